/* prune.h: head importance and Hydra member gates (DESIGN §3.2-3.3).
 *   Taylor (Michel et al. 2019): I[l,h] = mean over calibration batches of |dL/dg[l,h]|
 *     (batch_size 1 = the per-sample definition), optional per-layer L2 normalisation.
 *   Circuit (HeadMap's layer-conditioned greedy): for l = 1..L, score every head of layer l by
 *     how much masking it (on top of the circuits already chosen in earlier layers) hurts the
 *     objective; the k most harmful form layer l's circuit and stay masked while later layers
 *     are scored. Scores: acc = NLL(masked) - NLL(reference), ood = AUROC(reference) -
 *     AUROC(masked) (MSP score, OOD positive), avg = (a + o) / 2 where a and o are those two
 *     scores min-max normalised over the heads of the layer ((s - min) / (max - min), 0 for every
 *     head when max == min). The reference is the model with the earlier layers' circuits
 *     masked. Higher score = more important in every method; a member keeps its top heads.
 *   Members: M gate matrices [L,H] (1 kept, 0 pruned) with per-member keep counts, bootstrap
 *     resamples (member m draws from hy_rng_split(seed, m)), objectives and an overlap penalty.
 * Entry points: hy_prune_taylor, hy_prune_circuit, hy_prune_select, hy_prune_members,
 * hy_prune_check_gates, hy_prune_read_gates, hy_prune_restore. The circuit search only takes the data it is given:
 * the callers (lua/hydra/prune.lua) pass validation splits only and refuse test sets. */
#ifndef HY_PRUNE_H
#define HY_PRUNE_H

#include <stdbool.h>

#include "data/loader.h"
#include "io/h5.h"
#include "nn/xfmr.h"

typedef enum { HY_OBJ_ACC = 0, HY_OBJ_OOD, HY_OBJ_AVG } hy_objective;
typedef enum { HY_PRUNE_TAYLOR = 0, HY_PRUNE_CIRCUIT } hy_prune_method;

/* "acc" / "ood" / "avg"; parse fails HY_EINVAL "prune: unknown objective 'x' (expected acc, ood
 * or avg)". */
const char *hy_objective_name(hy_objective o);
hy_status hy_objective_parse(const char *s, hy_objective *out);

/* A subset of a dataset: rows idx[0..n) of ds (idx NULL = rows 0..n-1; then n <= ds->n).
 * Borrowed. */
typedef struct hy_subset {
    const hy_dataset *ds;
    const int64_t *idx;
    size_t n;
} hy_subset;

/* Taylor importance of every head of m (with m's current gates; its dgates and grads are used
 * as scratch and left zeroed). scores (L, NH) written: mean over batches of |dL_batch/dg|,
 * L_batch the mean cross-entropy of the batch; when normalize, each layer's row is divided by
 * its L2 norm (rows of zeros stay zero). Labels must be classes. HY_EINVAL on an empty set or a
 * bad label, HY_ENOMEM. */
hy_status hy_prune_taylor(hy_xfmr *m, const hy_subset *calib, size_t batch_size, bool normalize,
                          float *scores);

/* Mean NLL (*nll) and the MSP AUROC ID vs OOD (*auroc, only when ood != NULL and auroc != NULL)
 * of m with its current gates, in batches of batch_size. */
hy_status hy_prune_objective(hy_xfmr *m, const hy_subset *id, const hy_subset *ood,
                             size_t batch_size, double *nll, double *auroc);

/* Layer-conditioned greedy circuit search (see the file header). keep (L): circuit size per
 * layer, 1 <= keep[l] <= NH. prior (L, NH) or NULL: number of earlier members that kept each
 * head; each layer's circuit is chosen with hy_prune_select (overlap penalty on heads with
 * prior > 0), so the circuit is the member's kept set. scores (L, NH) written; circuit
 * (L, NH) written: 1 for the circuit heads, 0 elsewhere. ood is needed for ood/avg. m's gates
 * are restored on return. */
hy_status hy_prune_circuit(hy_xfmr *m, const hy_subset *id, const hy_subset *ood,
                           hy_objective obj, const size_t *keep, const float *prior,
                           double penalty, size_t batch_size, float *scores, float *circuit);

/* Keeps the keep (>= 1, <= H) highest of scores (H) after the overlap penalty: the ranking value
 * of head h is (s_h - min_s) * (1 - penalty) when prior[h] > 0, else s_h - min_s (prior NULL:
 * no penalty). Ties go to a head without prior when penalty > 0, then to the lower head index
 * (so penalty 1 never re-picks a head while an unused one is left). gates (H) written. */
void hy_prune_select(float *gates, const float *scores, const float *prior, double penalty,
                     size_t H, size_t keep);

/* What hy_prune_members does (DESIGN §3.3). */
typedef struct hy_prune_config {
    hy_prune_method method;         /* prune.method */
    size_t members;                 /* hydra.members: M >= 1 */
    const size_t *keep;             /* (M, L): heads kept by member m in layer l (hydra.keep_heads,
                                     * or hydra.diversity.keep_counts[m]) */
    const hy_objective *objectives; /* (M): circuit objective of each member */
    bool bootstrap;                 /* hydra.diversity.bootstrap: member m scores on a bootstrap
                                     * resample of the data */
    double overlap_penalty;         /* hydra.diversity.overlap_penalty, in [0, 1] */
    bool normalize;                 /* prune.normalize (taylor): per-layer L2 normalisation */
    size_t batch_size;              /* taylor: samples per backward (prune.batch_size); circuit:
                                     * rows per forward (prune.circuit_batch_size) */
    uint64_t seed;                  /* seed; resamples: member m uses hy_rng_split(seed, m) */
    /* optional (NULL: none): called after every masked evaluation of the circuit search with
     * the count done so far and the total (M * L * (NH + 1)); it must not fail or longjmp */
    void (*progress)(void *ctx, size_t done, size_t total);
    void *progress_ctx;
} hy_prune_config;

/* Member gates. taylor needs calib; circuit needs id (and ood for ood/avg objectives).
 *   gates   (M, L, NH) written: 1 kept, 0 pruned
 *   scores  (M, L, NH) written: the scores member m was selected from
 *   overlap (M, M) written or NULL: pairwise Jaccard of the kept head sets
 * m's gates are restored on return. Fails on a bad config naming the member (1-based). */
hy_status hy_prune_members(hy_xfmr *m, const hy_subset *calib, const hy_subset *id,
                           const hy_subset *ood, const hy_prune_config *cfg, float *gates,
                           float *scores, double *overlap);

/* Validates gates of M members for a model of L layers and NH heads: ndim 3 shape (M, L, NH)
 * (or ndim 2 (L, NH) as one member), every value 0 or 1, at least one head kept per layer:
 *   "prune: gates have shape [2,4], expected [M,4,8]"
 *   "prune: gates hold no member (M = 0)"
 *   "prune: member 2 prunes every head of layer 3 (keep at least one)"
 *   "prune: member 1 gate of layer 2, head 5 is 0.5 (expected 0 or 1)"
 * HY_EINVAL. shape: the tensor's dims (ndim of them). */
hy_status hy_prune_check_gates(const float *gates, int ndim, const int64_t *shape, size_t L,
                               size_t NH);
/* The most members a gates file holds (the fused model's limit, HY_FUSED_MAX_MEMBERS). */
#define HY_PRUNE_MAX_MEMBERS 64
/* Reads and validates /gates of the gates file at path for a model of L layers and NH heads
 * into *out (returns owned float32 (M, L, NH); a 2-d (L, NH) /gates reads as M = 1). The shape
 * is checked before anything is read; M in [1, HY_PRUNE_MAX_MEMBERS]; values as
 * hy_prune_check_gates; and the counts the file records must agree with /gates: the root
 * attribute members (when present) and the number of ';'-separated entries of keep (when
 * present and not empty):
 *   "prune: 'g.h5' has no /gates (not a gates file)"
 *   "prune: 'g.h5': /gates has shape [2,4,4], expected [M,4,8]"
 *   "prune: 'g.h5': attribute members = 3 but /gates holds 2 members"
 * out is zeroed on failure. */
hy_status hy_prune_read_gates(const char *path, size_t L, size_t NH, hy_tensor *out);
/* The rule of hy_prune_check_gates for ONE member's gates g (L, NH), the only gate check (the
 * fused model uses it too): messages start with `who` and name member + 1, e.g.
 * "fused: member 2 gate of layer 1, head 3 is 0.5 (expected 0 or 1)". HY_EINVAL. */
hy_status hy_prune_check_member(const char *who, const float *g, size_t member, size_t L,
                                size_t NH);

/* Copies the q/k/v rows (weight and bias) and proj.weight columns of every head whose gate in
 * m is 0 from base_params (a parameter block of the same layout) into m->params, so pruned
 * heads' weights stay bit-identical to the base's after fine-tuning. */
void hy_prune_restore(hy_xfmr *m, const float *base_params);

#endif
