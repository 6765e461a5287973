/* xfmr.h: the hydra transformer (DESIGN §2): a pre-LN encoder for images (ViT) and text.
 *   x = [cls; embed(input)] + pos_embed          (timm order: pos_embed covers the CLS slot too)
 *   per block l:  x += drop(proj(Attn_l(LN1_l(x))));  x += drop(fc2(drop(GELU(fc1(LN2_l(x))))))
 *   logits = head(LN_f(x[:, 0]))
 * Entry points: hy_xfmr_config_check, hy_xfmr_new / hy_xfmr_release, hy_xfmr_init,
 * hy_xfmr_alloc_acts, hy_xfmr_forward, hy_xfmr_loss, hy_xfmr_backward, hy_xfmr_zero_grad,
 * gates, the parameter table. Dimension letters: see hydra.h. Layer/head numbers are 0-based in
 * this C API; messages print them 1-based. */
#ifndef HY_XFMR_H
#define HY_XFMR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "base.h"
#include "rng.h"

/* LayerNorm epsilon of every norm in the model (timm ViT uses 1e-6). */
#define HY_XFMR_LN_EPS 1e-6f
/* Largest sequence length T (tokens including CLS) the attention kernel supports. */
#define HY_XFMR_MAX_T 257
/* Reserved token ids of the text model. ids never contain CLS: the model prepends cls_token. */
#define HY_TOK_PAD 0
#define HY_TOK_UNK 1
#define HY_TOK_CLS 2

typedef enum { HY_XFMR_VIT = 0, HY_XFMR_TEXT = 1 } hy_xfmr_kind;

/* Model configuration. Field names are the YAML keys of configs/models/ files and the /config
 * attributes of a checkpoint. Fields of the other kind are ignored (leave them 0). */
typedef struct hy_xfmr_config {
    hy_xfmr_kind kind;
    size_t image_size;   /* vit: H = W (square images) */
    size_t channels;     /* vit: C_in */
    size_t patch;        /* vit: p; image_size % patch == 0; NP = (image_size/patch)^2 */
    size_t vocab_size;   /* text: V (ids in [0, V)), V > HY_TOK_CLS */
    size_t max_len;      /* text: most tokens per sequence, CLS excluded */
    size_t d_model;      /* D (= C of the glossary), divisible by n_heads */
    size_t n_heads;      /* NH; head size HS = d_model / n_heads */
    size_t depth;        /* L blocks */
    size_t d_mlp;        /* DM hidden width of the MLP */
    size_t n_classes;    /* K classifier outputs */
    float attn_dropout;  /* rate on the attention block output (after proj), in [0, 1) */
    float mlp_dropout;   /* rate after GELU and after fc2, in [0, 1) */
} hy_xfmr_config;

/* Checks a configuration; the message names the field, e.g.
 * "xfmr: d_model must be divisible by n_heads (d_model 100, n_heads 8)". HY_ECONFIG. */
hy_status hy_xfmr_config_check(const hy_xfmr_config *c);
/* Tokens per sequence including CLS: 1 + NP (vit) or 1 + max_len (text). Needs a valid config. */
size_t hy_xfmr_seq_len(const hy_xfmr_config *c);
/* Forward multiply-adds x2 (FLOPs) of one sample at sequence length T (all heads kept). */
double hy_xfmr_flops(const hy_xfmr_config *c, size_t T);

/* One named tensor of the parameter block (timm names, PyTorch [out,in] shapes, DESIGN §2). */
typedef struct hy_param {
    char name[48];       /* e.g. "blocks.3.attn.qkv.weight" */
    size_t offset;       /* in floats from the start of the block (a multiple of 16) */
    size_t numel;
    int ndim;
    int64_t shape[4];
    bool decay;          /* weight decay applies: false for norms, biases, cls/pos/tok_embed */
} hy_param;

/* A view of one parameter: borrows the model's memory. */
typedef struct hy_param_view {
    const hy_param *info;
    float *data;         /* in params */
    float *grad;         /* in grads, same layout */
} hy_param_view;

/* One batch of inputs. The caller owns it and everything it points to; forward only reads it
 * (what backward needs is copied into the model's activations).
 *   vit:  images [B, C_in, H, W] float32, already normalised; ids/lengths NULL.
 *   text: ids [B, len] int32 (row stride len), 0 <= id < V everywhere (padding is HY_TOK_PAD);
 *         lengths [B] int32 with 0 <= lengths[b] <= len: keys at positions >= lengths[b] are
 *         masked (key-padding mask; CLS is never masked); 1 <= len <= max_len. The sequence
 *         length of this forward is T = 1 + len, so shorter batches cost less. */
typedef struct hy_batch {
    const float *images;
    const int32_t *ids;
    const int32_t *lengths;
    size_t len;
} hy_batch;

typedef struct hy_xfmr_acts hy_xfmr_acts;   /* private: activation block layout (xfmr.c) */

/* The model. Public fields are read-only for callers except through the functions below;
 * params/grads may be written directly (optimizers, checkpoint loading). */
typedef struct hy_xfmr {
    hy_xfmr_config cfg;
    size_t T;            /* max tokens including CLS (hy_xfmr_seq_len) */
    size_t HS;           /* head size d_model / n_heads */
    size_t n_params;     /* floats in params (and grads, and any optimizer block) */
    float *params;       /* owned, 64-byte aligned, layout given by table */
    float *grads;        /* owned, same layout; backward adds into it */
    hy_param *table;     /* owned, n_tensors entries in checkpoint order */
    size_t n_tensors;
    float *gates;        /* owned [L, NH]; 1 = head kept, 0 = pruned (any value allowed) */
    float *dgates;       /* owned [L, NH]; backward adds dL/dgate */
    /* activations (hy_xfmr_alloc_acts) */
    size_t B_cap;        /* largest batch forward accepts; 0 before hy_xfmr_alloc_acts */
    hy_xfmr_acts *acts;  /* owned */
    hy_arena scratch;    /* backward temporaries, planned for (B_cap, T) */
    /* dropout */
    bool dropout_on;
    hy_rng drop_rng;
    uint64_t drop_step;  /* forwards run with dropout on since hy_xfmr_set_dropout */
    /* state of the last forward, for backward */
    size_t last_B, last_T;
    bool have_fwd;
    bool last_drop;      /* the last forward applied dropout masks */
} hy_xfmr;

/* Builds a model: checks cfg, allocates params and grads (zeroed), the name table, gates (all 1)
 * and dgates (0). No activations yet (hy_xfmr_alloc_acts). On failure m is left zeroed and
 * nothing leaks. Release with hy_xfmr_release. HY_ECONFIG / HY_ENOMEM. */
hy_status hy_xfmr_new(hy_xfmr *m, const hy_xfmr_config *cfg);
/* Frees everything; accepts a zeroed or released model; zeroes m. */
void hy_xfmr_release(hy_xfmr *m);
/* timm-like init from seed: trunc-normal(std 0.02, cut at +-2 std) for linear weights,
 * patch/tok embeddings, pos_embed and cls_token; zeros for biases; ones for LN weights.
 * Each tensor draws from hy_rng_split(seed, tensor index), so init is layout independent. */
void hy_xfmr_init(hy_xfmr *m, uint64_t seed);

/* (Re)allocates the activation block and the backward scratch arena for batches of up to
 * B_cap samples at the full sequence length. Any previous block is freed first (the saved
 * forward is forgotten). HY_EINVAL for B_cap == 0, HY_ENOMEM. */
hy_status hy_xfmr_alloc_acts(hy_xfmr *m, size_t B_cap);
/* Bytes the activation block + scratch would take for B_cap (for planning). */
size_t hy_xfmr_acts_bytes(const hy_xfmr_config *c, size_t B_cap);

/* Checks the inputs of a batch of B samples against config c: images present (vit), or ids and
 * lengths present, 1 <= len <= max_len, every length in [0, len] and every id in
 * [0, vocab_size). Messages start with `who` (e.g. "xfmr", "fused") and name the 1-based row and
 * position. Shared by every forward that takes a hy_batch. */
hy_status hy_xfmr_check_inputs(const hy_xfmr_config *c, const hy_batch *in, size_t B,
                               const char *who);

/* Forward pass of B samples: writes logits [B, K] and keeps the activations for backward.
 * Dropout is applied when switched on (hy_xfmr_set_dropout). Validates the batch: B in
 * [1, B_cap], the text lengths/ids ranges ("xfmr: token id 9000 out of range [0, 8000) (row 2,
 * position 5)"); fails HY_EINVAL without touching logits. */
hy_status hy_xfmr_forward(hy_xfmr *m, const hy_batch *in, size_t B, float *logits);

/* Mean softmax cross-entropy over B rows with optional label smoothing eps in [0, 1):
 * target = (1-eps) one-hot + eps/K. Writes *loss (double) and, when dlogits != NULL,
 * dlogits [B, K] = d(mean loss)/dlogits (written, not added). labels [B] in [0, K);
 * a bad label fails HY_EINVAL naming the row (1-based) before anything is written. */
hy_status hy_xfmr_loss(const hy_xfmr *m, const float *logits, const int32_t *labels, size_t B,
                       float label_smoothing, double *loss, float *dlogits);

/* Backward of the last forward: adds (+=) dL/dparams into grads and dL/dgate into dgates.
 * dlogits [B, K] of that forward's B. A head whose gate is exactly 0 gets exactly zero gradient
 * in its q/k/v rows of qkv.weight/bias and its columns of proj.weight (its dgate is still
 * computed). HY_EINVAL when no forward was run since alloc_acts; uses the scratch arena. */
hy_status hy_xfmr_backward(hy_xfmr *m, const float *dlogits);
/* grads = 0 and dgates = 0. */
void hy_xfmr_zero_grad(hy_xfmr *m);

/* Head gates. layer < L, head < NH (HY_ASSERT: callers validate user input). */
void hy_xfmr_set_gate(hy_xfmr *m, size_t layer, size_t head, float g);
float hy_xfmr_gate(const hy_xfmr *m, size_t layer, size_t head);
/* Copies gates [L*NH] in; all 1 = unpruned. */
void hy_xfmr_set_gates(hy_xfmr *m, const float *gates);

/* Dropout: on = masks are drawn in every forward (training and MC dropout) from a stream seeded
 * with seed; each forward advances drop_step, so the same seed and call sequence give the same
 * masks whatever the thread count. off (default) = identity. */
void hy_xfmr_set_dropout(hy_xfmr *m, bool on, uint64_t seed);

/* Looks a parameter up by name; HY_EINVAL "xfmr: no parameter named 'x'" when absent. */
hy_status hy_xfmr_param(const hy_xfmr *m, const char *name, hy_param_view *out);
/* Index of a parameter by name, or -1. */
int64_t hy_xfmr_param_index(const hy_xfmr *m, const char *name);

#endif
