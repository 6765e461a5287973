/* ens.h: member-linear ensembles inside one transformer (BatchEnsemble, LoRA-Ensemble).
 *
 * An ensemble model is a hy_xfmr extended by its member linears (xfmr.h hy_xfmr_ext, installed by
 * hy_ens_new). Its M members share the embedding, and every block's LayerNorms and attention;
 * the members' rows are stacked along the batch, member-major: row m*B + b of every activation
 * is member m's copy of sample b (the authors' `(m b)` order), so one GEMM over all M*B*T rows
 * serves every member of a shared weight. Only the linears differ per member, through the
 * extension's linear_forward / _backward that xfmr.c calls for qkv, proj, fc1, fc2 and
 * head_forward / _backward for the classifier head:
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
 * checkpoints (/params/<name>) cover them without knowing about ensembles; the extension writes
 * the /ensemble attributes method, members, rank, alpha, targets (its save hook, called by
 * hy_ckpt_write) and hy_ens_load reads them back.
 * Entry points: hy_ens_config_check, hy_ens_method_name / _parse, hy_ens_targets_str / _parse,
 * hy_ens_table, hy_ens_new, hy_ens_of, hy_ens_copy_backbone, hy_ens_cost, hy_ens_read,
 * hy_ens_load. */
#ifndef HY_ENS_H
#define HY_ENS_H

#include "io/h5.h"
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

/* offsets (in floats, into params and grads) of one site's member tensors; SIZE_MAX = none */
typedef struct hy_ens_site_off {
    size_t s, r, b;        /* batch_ensemble: s [M,in], r [M,out], b_m [M,out] */
    size_t a[3], bb[3];    /* lora: A [M,rank,in], B [M,out_p,rank] per part (qkv: q, k, v) */
} hy_ens_site_off;

/* An ensemble: the model's extension (first, so m->ext is the hy_ens) and its layout. */
typedef struct hy_ens {
    hy_xfmr_ext ext;        /* ops, name (the method), members, frozen_floats (lora: the backbone) */
    hy_ens_config cfg;
    size_t n_base_tensors;  /* the base table's tensors come first (hy_xfmr_table) */
    size_t n_base_floats;   /* floats they span (the frozen backbone of lora_ensemble) */
    hy_ens_site_off *site;  /* owned [L * HY_XFMR_N_SITES]: layer l, site s at l*N_SITES + s */
    hy_ens_site_off head;   /* batch_ensemble head: s, r, b */
    size_t head_w, head_b;  /* lora: head.members.weight [M,K,D], .bias [M,K] */
    float *buf0, *buf1;     /* owned scratch, buf_rows rows of buf_cols0 / buf_cols1 floats */
    size_t buf_rows, buf_cols0, buf_cols1;
} hy_ens;

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
/* Builds a BatchEnsemble or LoRA-Ensemble model of M = e->members members: hy_xfmr_new_ext with
 * the members' tensors (hy_ens_table) after the base table, the backbone marked frozen for
 * lora_ensemble. hy_xfmr_init then also initialises the members' tensors (see the file header),
 * each from hy_rng_split(seed stream, its table index). As hy_xfmr_new on failure; HY_ECONFIG
 * names the YAML key. Release with hy_xfmr_release. */
hy_status hy_ens_new(hy_xfmr *m, const hy_xfmr_config *cfg, const hy_ens_config *e);
/* The ensemble of model m; NULL for a model that is none (a single model). */
hy_ens *hy_ens_of(const hy_xfmr *m);
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

/* Reads /ensemble of an open checkpoint into e; *has = 0 (e zeroed) when the file has none (a
 * single model). A missing or bad attribute fails naming the file and the attribute. */
hy_status hy_ens_read(hy_h5 *f, hy_ens_config *e, int *has);
/* hy_ckpt_load for every model: an ensemble (hy_ens_new from /config and /ensemble) when the
 * file has /ensemble, else a single model; then params and gates. */
hy_status hy_ens_load(const char *path, hy_xfmr *m);

#endif
