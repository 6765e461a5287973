/* ens.h: member-linear ensembles inside one transformer (BatchEnsemble, LoRA-Ensemble).
 *
 * An ensemble model is a hy_xfmr whose m->ens is set (hy_xfmr_new_ens). Its M members share the
 * embedding, and every block's LayerNorms and attention; the members' rows are stacked along the
 * batch, member-major: row m*B + b of every activation is member m's copy of sample b (the
 * authors' `(m b)` order), so one GEMM over all M*B*T rows serves every member of a shared
 * weight. Only the linears differ per member, through one dispatch (hy_ens_linear_forward /
 * _backward) that xfmr.c calls for qkv, proj, fc1, fc2 and the classifier head:
 *
 *   batch_ensemble (Wen et al. 2020): y = ((x o s_m) W^T) o r_m + b + b_m for every linear
 *     (qkv, proj, fc1, fc2, head): W and b shared; s_m [in], r_m [out], b_m [out] per member
 *     (b_m an offset on the shared bias, the same function class as torch-uncertainty's
 *     per-member bias). Everything trains. Init: s, r ~ N(1, 0.5) (torch-uncertainty's
 *     BatchLinear; its r_group is our s, its s_group our r), b_m ~ U(+-1/sqrt(in)).
 *   lora_ensemble (Halbheer et al. 2024): y = x W^T + b + (alpha/rank) (x A_m^T) B_m^T on each
 *     targeted part (q, k, v rows of qkv; proj; fc1; fc2), A_m [rank, in], B_m [out, rank];
 *     each member its own classifier head (head.members.weight/bias); the backbone (every tensor
 *     of the base table, the unused base head included) is frozen: backward leaves its gradient
 *     exactly 0 and it is never decayed (hy_param.frozen), so AdamW leaves it bit-identical.
 *     Init: A ~ U(+-1/sqrt(in)) (PEFT's kaiming-uniform), B = 0, member heads trunc-normal(0.02),
 *     biases 0; the backbone is copied from a trained single model (hy_ens_copy_backbone).
 *
 * The members' tensors follow the base table in m->table (names in hy_ens_table); their
 * gradients are in m->grads at the same offsets, so AdamW, clipping, get/set_params and
 * checkpoints (/params/<name>, plus /ensemble attributes method, members, rank, alpha, targets:
 * ckpt.c) cover them without knowing about ensembles.
 * Entry points: hy_ens_config_check, hy_ens_method_name / _parse, hy_ens_targets_str / _parse,
 * hy_ens_table, hy_ens_bind, hy_ens_free, hy_ens_init, hy_ens_copy_backbone, hy_ens_cost,
 * hy_ens_alloc, hy_ens_linear_forward / _backward, hy_ens_head_forward / _backward. */
#ifndef HY_ENS_H
#define HY_ENS_H

#include "nn/xfmr.h"

typedef enum { HY_ENS_BATCH = 1, HY_ENS_LORA = 2 } hy_ens_kind;

/* LoRA targets (bits of hy_ens_config.targets); words q, k, v, o, mlp (mlp = fc1 and fc2) */
enum { HY_LORA_Q = 1, HY_LORA_K = 2, HY_LORA_V = 4, HY_LORA_O = 8, HY_LORA_MLP = 16 };

/* The YAML sections batch_ensemble.* / lora_ensemble.* and the /ensemble attributes carry these
 * under the same names (method = the section's name). */
typedef struct hy_ens_config {
    hy_ens_kind kind;      /* method: "batch_ensemble" | "lora_ensemble" */
    size_t members;        /* M >= 1 */
    size_t rank;           /* lora: adapter rank r >= 1 (0 for batch_ensemble) */
    float alpha;           /* lora: adapters scaled by alpha / rank (0 for batch_ensemble) */
    unsigned targets;      /* lora: HY_LORA_* bits, at least one (0 for batch_ensemble) */
} hy_ens_config;

/* The member linears xfmr.c dispatches (site of a block, or the head). */
typedef enum { HY_ENS_QKV, HY_ENS_PROJ, HY_ENS_FC1, HY_ENS_FC2, HY_ENS_N_SITES } hy_ens_site;

/* offsets (in floats, into params and grads) of one site's member tensors; SIZE_MAX = none */
typedef struct hy_ens_site_off {
    size_t s, r, b;        /* batch_ensemble: s [M,in], r [M,out], b_m [M,out] */
    size_t a[3], bb[3];    /* lora: A [M,rank,in], B [M,out_p,rank] per part (qkv: q, k, v) */
} hy_ens_site_off;

struct hy_ens {
    hy_ens_config cfg;
    size_t n_base_tensors;  /* the base table's tensors come first (hy_xfmr_table) */
    size_t n_base_floats;   /* floats they span (the frozen backbone of lora_ensemble) */
    hy_ens_site_off *site;  /* owned [L * HY_ENS_N_SITES]: layer l, site s at l*N_SITES + s */
    hy_ens_site_off head;   /* batch_ensemble head: s, r, b */
    size_t head_w, head_b;  /* lora: head.members.weight [M,K,D], .bias [M,K] */
    float *buf0, *buf1;     /* owned scratch, buf_rows rows of buf_cols0 / buf_cols1 floats */
    size_t buf_rows, buf_cols0, buf_cols1;
};

/* Checks e against model config c; messages name the YAML key, e.g.
 * "lora_ensemble.rank must be in [1, 64] (got 0)". HY_ECONFIG. */
hy_status hy_ens_config_check(const hy_xfmr_config *c, const hy_ens_config *e);
/* "batch_ensemble" | "lora_ensemble"; parse gives HY_EINVAL (no message) for anything else. */
const char *hy_ens_method_name(hy_ens_kind k);
hy_status hy_ens_method_parse(const char *s, hy_ens_kind *out);
/* targets as words joined by commas ("q,v"); buf of n bytes (>= 16). Parse of that form (also
 * one word at a time: call with each word and OR the bits); HY_EINVAL for an unknown word. */
const char *hy_ens_targets_str(unsigned targets, char *buf, size_t n);
hy_status hy_ens_target_parse(const char *word, unsigned *bit);

/* Appends the members' tensors to a parameter table (hy_param_table_add; tab NULL: count):
 *   batch_ensemble, for every linear X of block l (attn.qkv, attn.proj, mlp.fc1, mlp.fc2) and
 *     for head:  blocks.{l}.X.be_s [M,in], .be_r [M,out], .be_bias [M,out];  head.be_s [M,D],
 *     head.be_r [M,K], head.be_bias [M,K]
 *   lora_ensemble, for each targeted part P of block l (attn.q, attn.k, attn.v, attn.proj,
 *     mlp.fc1, mlp.fc2):  blocks.{l}.P.lora_a [M,rank,in], blocks.{l}.P.lora_b [M,out,rank];
 *     then head.members.weight [M,K,D], head.members.bias [M,K]
 * Weight decay: lora_a, lora_b and head.members.weight; never on be_* (fast weights) or biases. */
void hy_ens_table(const hy_xfmr_config *c, const hy_ens_config *e, hy_param *tab, size_t *n,
                  size_t *off);
/* Builds m->ens for a model whose table is the base table followed by hy_ens_table (xfmr.c's
 * hy_xfmr_new_ens); marks the backbone frozen for lora_ensemble. HY_ENOMEM. */
hy_status hy_ens_bind(hy_xfmr *m, const hy_ens_config *e);
void hy_ens_free(struct hy_ens *e);
/* Initialises the members' tensors (see the file header) from seed; each tensor draws from
 * hy_rng_split(seed stream, its table index). hy_xfmr_init calls it after the base init. */
void hy_ens_init(hy_xfmr *m, uint64_t seed);
/* Copies the backbone (every base-table tensor and the gates) of a single model src of the same
 * config into the ensemble model m (lora_ensemble's frozen backbone). Fails naming the
 * mismatch ("ens: the backbone has d_model 64, the ensemble 128") or when src is an ensemble. */
hy_status hy_ens_copy_backbone(hy_xfmr *m, const hy_xfmr *src);

/* The cost of ensemble e over model config c at sequence length T: hy_xfmr_cost(c, T, NULL) with
 * every per-row part (LN, attention, MLP, head) counted M times (the embedding once: members
 * share it) plus the members' tensors (params) and products (lora: 2 T rank (in + out) per
 * adapter and member; batch_ensemble's elementwise scalings are not counted, like LayerNorm);
 * lora_ensemble counts M member heads in place of the unused base head. */
hy_xfmr_costs hy_ens_cost(const hy_xfmr_config *c, const hy_ens_config *e, size_t T);

/* (Re)allocates the scratch rows of m->ens for `rows` stacked rows (M * B_cap * T). HY_ENOMEM. */
hy_status hy_ens_alloc(hy_xfmr *m, size_t rows);

/* Member linear of block l, site s over N = M * NB stacked rows (member-major, NB rows each):
 *   out (N, Dout) written = the site's member product of in (N, Din) (+ res (N, Dout) when not
 *   NULL; res must not alias out); w (Dout, Din), b (Dout) the shared weight and bias. */
void hy_ens_linear_forward(hy_xfmr *m, size_t l, hy_ens_site s, float *out, const float *in,
                           const float *w, const float *b, const float *res, size_t N,
                           size_t Din, size_t Dout);
/* Its backward: din (N, Din) written; the shared dw (Dout, Din), db (Dout) and the members'
 * gradients added (lora: the frozen dw, db untouched); dout (N, Dout), in as in forward. */
void hy_ens_linear_backward(hy_xfmr *m, size_t l, hy_ens_site s, float *din, float *dw,
                            float *db, const float *dout, const float *in, const float *w,
                            size_t N, size_t Din, size_t Dout);
/* The classifier over R = M * B stacked rows: logits (R, K) written from lnf (R, D);
 * backward: dlnf (R, D) written, the head's gradients added. */
void hy_ens_head_forward(hy_xfmr *m, float *logits, const float *lnf, size_t R);
void hy_ens_head_backward(hy_xfmr *m, float *dlnf, const float *dlogits, const float *lnf,
                          size_t R);

#endif
