/* xfmr.h: the hydra transformer (DESIGN §2): a pre-LN encoder for images (ViT) and text.
 *   x = [cls; embed(input)] + pos_embed          (timm order: pos_embed covers the CLS slot too)
 *   per block l:  x += drop(proj(Attn_l(LN1_l(x))));  x += drop(fc2(drop(GELU(fc1(LN2_l(x))))))
 *   logits = head(LN_f(x[:, 0]))
 * Options of the one schema for encoders from outside (HF ViT, BERT; DESIGN §9), each with its
 * backward:
 *   norm post (BERT):  x = LN1_l(x + drop(proj(Attn_l(x))));  x = LN2_l(x + drop(fc2(drop(
 *                      act(fc1(x))))));  no final LN (norm1 = BERT's attention.output.LayerNorm,
 *                      norm2 its output.LayerNorm)
 *   act gelu_tanh:     0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in place of exact GELU
 *   text_embed bert:   ids hold [CLS] ... [SEP] already: x = embed_norm(tok_embed[ids] +
 *                      pos_embed[0..T) + type_embed[type_ids]), T = len, no cls_token
 *   pooler tanh:       logits = head(drop(tanh(pooler(LN_f(x[:, 0]))))) (post: no LN_f); the
 *                      dropout is mlp_dropout's (BERT's hidden dropout)
 *   ln_eps:            the epsilon of every LayerNorm
 * Entry points: the config schema (HY_XFMR_CONFIG_FIELDS, hy_xfmr_fields), hy_xfmr_config_check,
 * the parameter layout (slots: hy_xfmr_slot, hy_xfmr_head_slot; hy_param_table_add), the cost
 * (hy_xfmr_cost), hy_xfmr_new / hy_xfmr_release, hy_xfmr_init, hy_xfmr_alloc_acts,
 * hy_xfmr_alloc_infer / hy_xfmr_ensure_infer,
 * hy_xfmr_forward, hy_xfmr_features, hy_xfmr_loss, hy_xfmr_backward, hy_xfmr_zero_grad, gates, the parameter table
 * and its named views (hy_xfmr_tensors). Dimension letters: see hydra.h. Layer/head numbers are
 * 0-based in this C API; messages print them 1-based. */
#ifndef HY_XFMR_H
#define HY_XFMR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor/arena.h"
#include "tensor/attn.h"
#include "tensor/base.h"
#include "tensor/gemm_bf16.h"
#include "tensor/rng.h"
#include "data/vocab.h"

/* The default LayerNorm epsilon of every norm in the model (timm ViT uses 1e-6; HF ViT and BERT
 * 1e-12: the model field ln_eps). */
#define HY_XFMR_LN_EPS 1e-6f
/* The longest sequence T (tokens including CLS) is the attention kernel's HY_ATTN_MAX_T
 * (attn.h). The reserved token ids HY_TOK_PAD / _UNK / _CLS are the vocabulary's (vocab.h); ids
 * never contain CLS: the model prepends cls_token (text_embed hydra; with text_embed bert the
 * ids are a WordPiece tokenizer's, [CLS] first). */

typedef enum { HY_XFMR_VIT = 0, HY_XFMR_TEXT = 1 } hy_xfmr_kind;
/* The ENUM fields' values, in the order of their words in the schema (0 = the default). */
typedef enum { HY_NORM_PRE = 0, HY_NORM_POST = 1 } hy_xfmr_norm;
typedef enum { HY_ACT_GELU = 0, HY_ACT_GELU_TANH = 1 } hy_xfmr_act;
typedef enum { HY_POOLER_NONE = 0, HY_POOLER_TANH = 1 } hy_xfmr_pooler;
typedef enum { HY_TEXT_EMBED_HYDRA = 0, HY_TEXT_EMBED_BERT = 1 } hy_xfmr_text_embed;

/* The model-config schema, one line per field: X(name, type, kind, dflt).
 *   type SIZE: size_t, a required int64 /config attribute; RATE: float in [0, 1), a float64
 *        /config attribute (0 when absent); FLOAT: double > 0, an optional float64 /config
 *        attribute and YAML key, dflt (a number literal as a string) when absent; 0 in a
 *        hy_xfmr_config also means dflt (a zero-initialised config is the default model:
 *        hy_xfmr_field_float gives the value in effect); COUNT: size_t, an optional int64
 *        /config attribute and YAML key, dflt when absent; ENUM: int, an optional string
 *        /config attribute and YAML key, one of the words of dflt ("pre|post"), the first
 *        (value 0) when absent.
 *   kind VIT or TEXT: only models of that kind read the field (leave it 0 for the other);
 *        ALL: every model.
 *   dflt: the default of an optional field, the words of an ENUM ("" for SIZE and RATE).
 * The names are the YAML keys of configs/models/ files (the two rates both come from
 * model.dropout, which the binding reads for them), the /config attributes of checkpoints and
 * fused files and the keys of m:config() (core.model_config_fields() lists them). kind itself
 * ("vit" | "text") is outside the list. Adding a field here adds it to hy_xfmr_config, the files,
 * the bindings and hydra.model.core_config. Files written before an optional field existed
 * read as its default. */
#define HY_XFMR_CONFIG_FIELDS(X)                                                              \
    X(image_size, SIZE, VIT, "")    /* H = W (square images) */                               \
    X(channels, SIZE, VIT, "")      /* C_in */                                                \
    X(patch, SIZE, VIT, "")         /* p; image_size % patch == 0; NP = (image_size/patch)^2 */ \
    X(vocab_size, SIZE, TEXT, "")   /* V (ids in [0, V)), V > HY_TOK_CLS */                   \
    X(max_len, SIZE, TEXT, "")      /* most tokens per sequence, CLS excluded */              \
    X(d_model, SIZE, ALL, "")       /* D (= C of the glossary), divisible by n_heads */       \
    X(n_heads, SIZE, ALL, "")       /* NH; head size HS = d_model / n_heads */                \
    X(depth, SIZE, ALL, "")         /* L blocks */                                            \
    X(d_mlp, SIZE, ALL, "")         /* DM hidden width of the MLP */                          \
    X(n_classes, SIZE, ALL, "")     /* K classifier outputs */                                \
    X(attn_dropout, RATE, ALL, "")  /* model.dropout: on the attention block output */        \
    X(mlp_dropout, RATE, ALL, "")   /* model.dropout: after GELU and after fc2 */             \
    X(ln_eps, FLOAT, ALL, "1e-6")   /* epsilon of every LayerNorm (HF: 1e-12) */             \
    X(norm, ENUM, ALL, "pre|post")  /* hy_xfmr_norm: LayerNorm placement (BERT: post) */      \
    X(act, ENUM, ALL, "gelu|gelu_tanh")  /* hy_xfmr_act: the MLP's activation */              \
    X(pooler, ENUM, ALL, "none|tanh")    /* hy_xfmr_pooler: BERT's tanh pooler */             \
    X(text_embed, ENUM, TEXT, "hydra|bert") /* hy_xfmr_text_embed: the text embedding */     \
    X(type_vocab, COUNT, TEXT, "0") /* token types (text_embed bert; 0: no type_embed) */

#define HY_XFMR_FIELD_TYPE_SIZE size_t
#define HY_XFMR_FIELD_TYPE_RATE float
#define HY_XFMR_FIELD_TYPE_FLOAT double
#define HY_XFMR_FIELD_TYPE_COUNT size_t
#define HY_XFMR_FIELD_TYPE_ENUM int

/* Model configuration: kind + the fields of HY_XFMR_CONFIG_FIELDS, in that order. */
typedef struct hy_xfmr_config {
    hy_xfmr_kind kind;
#define HY_XFMR_FIELD_DECL_(name, type, kind, dflt) HY_XFMR_FIELD_TYPE_##type name;
    HY_XFMR_CONFIG_FIELDS(HY_XFMR_FIELD_DECL_)
#undef HY_XFMR_FIELD_DECL_
} hy_xfmr_config;

/* The schema as data (for loops over the fields: checkpoints, fused files, bindings). */
typedef enum { HY_FIELD_SIZE = 0, HY_FIELD_RATE = 1, HY_FIELD_FLOAT = 2, HY_FIELD_COUNT = 3,
               HY_FIELD_ENUM = 4 } hy_field_type;
typedef struct hy_xfmr_field {
    const char *name;    /* e.g. "d_model" */
    hy_field_type type;
    int kind;            /* HY_XFMR_VIT, HY_XFMR_TEXT, or -1 for every kind */
    size_t offset;       /* offsetof(hy_xfmr_config, name) */
    const char *dflt;    /* FLOAT, COUNT: the default as written in the schema; ENUM: its words
                          * joined by '|'; "" otherwise */
} hy_xfmr_field;
#define HY_XFMR_FIELD_COUNT_(name, type, kind, dflt) +1
enum { HY_XFMR_N_FIELDS = 0 HY_XFMR_CONFIG_FIELDS(HY_XFMR_FIELD_COUNT_) };
#undef HY_XFMR_FIELD_COUNT_
/* HY_XFMR_N_FIELDS entries in schema order. */
extern const hy_xfmr_field hy_xfmr_fields[];
/* The field named `name`, or NULL. */
const hy_xfmr_field *hy_xfmr_field_find(const char *name);
/* The field applies to models of kind k. */
bool hy_xfmr_field_applies(const hy_xfmr_field *f, hy_xfmr_kind k);
/* Value of a SIZE (or COUNT) / RATE / FLOAT / ENUM field of c (HY_ASSERT on the type); a FLOAT
 * field's value in effect (its default when c holds 0). */
size_t hy_xfmr_field_size(const hy_xfmr_config *c, const hy_xfmr_field *f);
int hy_xfmr_field_enum(const hy_xfmr_config *c, const hy_xfmr_field *f);
void hy_xfmr_field_set_enum(hy_xfmr_config *c, const hy_xfmr_field *f, int v);
/* The word of value v of an ENUM field into buf (n bytes, NUL-terminated; "" when v is out of
 * range); returns buf. */
const char *hy_xfmr_field_enum_name(const hy_xfmr_field *f, int v, char *buf, size_t n);
/* The value of word s of an ENUM field; HY_EINVAL (no message) when s is none of its words. */
hy_status hy_xfmr_field_enum_parse(const hy_xfmr_field *f, const char *s, int *out);
/* The words of an ENUM field (its number of values). */
int hy_xfmr_field_enum_count(const hy_xfmr_field *f);
float hy_xfmr_field_rate(const hy_xfmr_config *c, const hy_xfmr_field *f);
double hy_xfmr_field_float(const hy_xfmr_config *c, const hy_xfmr_field *f);
/* The default of a FLOAT (or COUNT) field. */
double hy_xfmr_field_default(const hy_xfmr_field *f);
void hy_xfmr_field_set_size(hy_xfmr_config *c, const hy_xfmr_field *f, size_t v);
void hy_xfmr_field_set_rate(hy_xfmr_config *c, const hy_xfmr_field *f, float v);
void hy_xfmr_field_set_float(hy_xfmr_config *c, const hy_xfmr_field *f, double v);
/* The LayerNorm epsilon the kernels use: (float) ln_eps, HY_XFMR_LN_EPS when it is 0. */
float hy_xfmr_ln_eps(const hy_xfmr_config *c);
/* "vit" / "text"; parse gives HY_EINVAL (no message: callers word it) for anything else. */
const char *hy_xfmr_kind_name(hy_xfmr_kind k);
hy_status hy_xfmr_kind_parse(const char *s, hy_xfmr_kind *out);

/* Limits on the sizes of a config. They are far above hydra's models (vit-fm: depth 6, d_model
 * 128) and keep every size product of a valid config below 2^60, so no layout computation can
 * overflow size_t and a file declaring absurd sizes is refused before anything is built:
 *   HY_XFMR_MAX_DEPTH     depth
 *   HY_XFMR_MAX_WIDTH     d_model, d_mlp (n_heads <= d_model, patch <= image_size follow)
 *   HY_XFMR_MAX_IMAGE     image_size
 *   HY_XFMR_MAX_CHANNELS  channels
 *   HY_XFMR_MAX_VOCAB     vocab_size
 *   HY_XFMR_MAX_CLASSES   n_classes
 *   HY_ATTN_MAX_T - 1     max_len (the sequence limit, attn.h)
 *   HY_XFMR_MAX_PARAMS    floats in the parameter table (16 GiB; grads double it) */
#define HY_XFMR_MAX_DEPTH 1024
#define HY_XFMR_MAX_WIDTH 65536
#define HY_XFMR_MAX_IMAGE 65536
#define HY_XFMR_MAX_CHANNELS 1024
#define HY_XFMR_MAX_VOCAB (1 << 24)
#define HY_XFMR_MAX_CLASSES 65536
#define HY_XFMR_MAX_PARAMS ((size_t)1 << 32)
/* The largest value SIZE field f may hold (the limits above). */
size_t hy_xfmr_field_max(const hy_xfmr_field *f);

/* Checks a configuration; the message names the field, e.g.
 * "xfmr: d_model must be divisible by n_heads (d_model 100, n_heads 8)",
 * "xfmr: depth must be <= 1024 (got 1099511627776)",
 * "xfmr: the model has 8623489024 parameters, above the limit of 4294967296". HY_ECONFIG. */
hy_status hy_xfmr_config_check(const hy_xfmr_config *c);
/* Tokens per sequence including CLS: 1 + NP (vit), 1 + max_len (text), max_len (text_embed
 * bert: the position table's length, [CLS] included). Needs a valid config. */
size_t hy_xfmr_seq_len(const hy_xfmr_config *c);

/* ===== parameter layout =====
 * The parameter table (checkpoint /params order, timm names, PyTorch [out, in] shapes) is, for
 * S = hy_xfmr_n_slots(c) "slots" (table indices):
 *   embedding  HY_EMB_*: cls_token (1,1,D), pos_embed (1,T,D), then
 *              vit: patch_embed.proj.weight (D,C_in,p,p), patch_embed.proj.bias (D)
 *              text: tok_embed.weight (V,D)
 *              text_embed bert instead (no HY_EMB_* slots): pos_embed (1,max_len,D),
 *              tok_embed.weight (V,D), type_embed.weight (type_vocab,D) when type_vocab > 0,
 *              embed_norm.weight, embed_norm.bias (D)
 *   block l    HY_BLK_* at hy_xfmr_slot(c, l, which) (blocks.{l}.<name>)
 *   head       HY_HEAD_* at hy_xfmr_head_slot(c, which): norm.weight, norm.bias (D) (norm pre
 *              only), pooler.weight (D,D), pooler.bias (D) (pooler tanh only), head.weight
 *              (K,D), head.bias (K)
 * The fused model (fused.h) keeps the same slots per member. */
typedef enum {
    HY_EMB_CLS,      /* cls_token (1, 1, D) */
    HY_EMB_POS,      /* pos_embed (1, T, D) */
    HY_EMB_W,        /* vit: patch_embed.proj.weight (D, C_in, p, p); text: tok_embed.weight
                      * (V, D) */
    HY_EMB_B         /* vit only: patch_embed.proj.bias (D) */
} hy_emb_slot;
typedef enum {
    HY_BLK_N1W, HY_BLK_N1B,      /* norm1.weight, .bias (D) */
    HY_BLK_QKVW, HY_BLK_QKVB,    /* attn.qkv.weight (3D, D), .bias (3D): rows q | k | v */
    HY_BLK_PROJW, HY_BLK_PROJB,  /* attn.proj.weight (D, D), .bias (D) */
    HY_BLK_N2W, HY_BLK_N2B,      /* norm2.weight, .bias (D) */
    HY_BLK_FC1W, HY_BLK_FC1B,    /* mlp.fc1.weight (DM, D), .bias (DM) */
    HY_BLK_FC2W, HY_BLK_FC2B,    /* mlp.fc2.weight (D, DM), .bias (D) */
    HY_BLK_N                     /* slots per block */
} hy_blk_slot;
typedef enum {
    HY_HEAD_NW, HY_HEAD_NB,      /* norm.weight, norm.bias (D): norm pre only */
    HY_HEAD_W, HY_HEAD_B,        /* head.weight (K, D), head.bias (K) */
    HY_HEAD_PW, HY_HEAD_PB,      /* pooler.weight (D, D), pooler.bias (D): pooler tanh only */
    HY_HEAD_N
} hy_head_slot;
/* What a slot belongs to (the fuse.* groups; cost breakdown): the embedding, a LayerNorm
 * (norm1, norm2, the final norm), attention (qkv, proj), the MLP, the classifier head. */
typedef enum { HY_PART_EMBED, HY_PART_LN, HY_PART_ATTN, HY_PART_MLP, HY_PART_HEAD,
               HY_N_PARTS } hy_xfmr_part;

/* Embedding slots: 4 (vit), 3 (text), 4 or 5 (text_embed bert without / with type_embed). */
size_t hy_xfmr_n_embed_slots(const hy_xfmr_config *c);
/* Table index of block `layer`'s tensor `which` (layer < L). */
size_t hy_xfmr_slot(const hy_xfmr_config *c, size_t layer, hy_blk_slot which);
/* Table index of head tensor `which` (HY_ASSERT that the model has it: hy_xfmr_has_head_slot). */
size_t hy_xfmr_head_slot(const hy_xfmr_config *c, hy_head_slot which);
bool hy_xfmr_has_head_slot(const hy_xfmr_config *c, hy_head_slot which);
/* Head tensors: 4 (norm pre), 2 (norm post), + 2 with the pooler. */
size_t hy_xfmr_n_head_slots(const hy_xfmr_config *c);
/* The structural option of c the pretraining head does not implement ("norm post", "act
 * gelu_tanh", "pooler tanh", "text_embed bert"), or NULL when it has none (the default encoder,
 * whatever its ln_eps). */
const char *hy_xfmr_nondefault_option(const hy_xfmr_config *c);
/* The block path: norm post or act gelu_tanh run the plain kernels one after another (no fused
 * block, no small-pass team); the default encoder keeps its fused kernels. */
bool hy_xfmr_plain_blocks(const hy_xfmr_config *c);
/* Tensors in the table: n_embed + L * HY_BLK_N + n_head. */
size_t hy_xfmr_n_slots(const hy_xfmr_config *c);
/* The part of slot s (< n_slots); for a block slot also its layer and hy_blk_slot (may be NULL;
 * left untouched for other slots). */
hy_xfmr_part hy_xfmr_slot_part(const hy_xfmr_config *c, size_t s, size_t *layer, size_t *which);

/* ===== cost =====
 * Forward FLOPs (multiply-adds x2; LayerNorm, GELU, softmax and adds not counted) of one sample
 * at sequence length T, and the parameter count (without alignment padding), of a model of
 * config c whose layer l computes kept[l] heads (kept NULL: every head). A pruned head's q/k/v
 * rows and proj columns are neither computed nor counted, as in a packed fused member. Split by
 * part (hy_xfmr_part) and summed. One formula for every model: the fused model adds its
 * members' costs (hy_fused_flops, hy_fused_params), the Lua methods read it through the
 * bindings at each T a text set runs at (loader.h hy_dataset_seq_lens; core/README.md). */
typedef struct hy_xfmr_costs {
    double flops[HY_N_PARTS];
    size_t params[HY_N_PARTS];
    double flops_total;
    size_t params_total;
} hy_xfmr_costs;
hy_xfmr_costs hy_xfmr_cost(const hy_xfmr_config *c, size_t T, const size_t *kept);

/* One named tensor of the parameter block (timm names, PyTorch [out,in] shapes, DESIGN §2). */
typedef struct hy_param {
    char name[48];       /* e.g. "blocks.3.attn.qkv.weight" */
    size_t offset;       /* in floats from the start of the block (a multiple of 16) */
    size_t numel;
    int ndim;
    int64_t shape[4];
    bool decay;          /* weight decay applies: false for norms, biases, cls/pos/tok_embed */
    bool frozen;         /* never trained (an extension's frozen_floats); decay is false */
} hy_param;

/* Appends tensor `name` of shape [ndim] to a parameter table: tab[*n] gets the name, shape,
 * numel, decay and offset *off; *off advances by numel rounded up to 16 floats (every tensor
 * stays 64-byte aligned) and *n by one. tab NULL: only counts (*n, *off). The name must fit
 * hy_param.name (HY_ASSERT). */
void hy_param_table_add(hy_param *tab, size_t *n, size_t *off, const char *name, int ndim,
                        const int64_t *shape, bool decay);

/* The parameter table of a valid config c (hy_xfmr_n_slots(c) tensors in slot order) into tab
 * (NULL: only counts); returns the tensor count, *total gets the floats of the block (with the
 * 64-byte alignment padding). hy_xfmr_new builds its table with it. */
size_t hy_xfmr_table(const hy_xfmr_config *c, hy_param *tab, size_t *total);

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
 *         length of this forward is T = 1 + len, so shorter batches cost less.
 *         text_embed bert: ids hold [CLS] first, T = len, lengths[b] >= 1 (keys at positions
 *         >= lengths[b] masked); type_ids [B, len] int32 in [0, type_vocab) (all 0 when
 *         type_vocab is 0) or NULL (all 0); ignored by the other embeddings. */
typedef struct hy_batch {
    const float *images;
    const int32_t *ids;
    const int32_t *lengths;
    size_t len;
    const int32_t *type_ids;
} hy_batch;

typedef struct hy_xfmr_acts hy_xfmr_acts;   /* private: activation block layout (xfmr.c) */

/* Named pointers into a parameter block (params or grads) of one block l, as llm.c's
 * ParameterTensors; shapes PyTorch [out, in]. */
typedef struct hy_xfmr_block_tensors {
    float *norm1_w, *norm1_b;   /* (D) */
    float *qkv_w;               /* (3D, D): rows q | k | v, each head-major (NH, HS) */
    float *qkv_b;               /* (3D) */
    float *proj_w;              /* (D, D) */
    float *proj_b;              /* (D) */
    float *norm2_w, *norm2_b;   /* (D) */
    float *fc1_w;               /* (DM, D) */
    float *fc1_b;               /* (DM) */
    float *fc2_w;               /* (D, DM) */
    float *fc2_b;               /* (D) */
} hy_xfmr_block_tensors;

/* Named pointers into a whole parameter block, filled from the table once (hy_xfmr_new). */
typedef struct hy_xfmr_tensors {
    float *cls_token;           /* (1, 1, D); NULL for text_embed bert */
    float *pos_embed;           /* (1, T, D), T = hy_xfmr_seq_len */
    float *patch_w;             /* vit: (D, C_in, p, p); NULL for text */
    float *patch_b;             /* vit: (D); NULL for text */
    float *tok_embed;           /* text: (V, D); NULL for vit */
    float *type_embed;          /* text_embed bert, type_vocab > 0: (type_vocab, D); else NULL */
    float *embed_norm_w, *embed_norm_b; /* text_embed bert: (D); else NULL */
    hy_xfmr_block_tensors *blk; /* [L] */
    float *norm_w, *norm_b;     /* final LayerNorm (D); NULL for norm post */
    float *pooler_w, *pooler_b; /* pooler tanh: (D, D), (D); else NULL */
    float *head_w;              /* (K, D) */
    float *head_b;              /* (K) */
} hy_xfmr_tensors;

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
    hy_xfmr_tensors p;   /* named views of params (p.blk owned, [L]) */
    hy_xfmr_tensors g;   /* the same views of grads (g.blk owned, [L]) */
    float *gates;        /* owned [L, NH]; 1 = head kept, 0 = pruned (any value allowed) */
    float *dgates;       /* owned [L, NH]; backward adds dL/dgate */
    /* activations (hy_xfmr_alloc_acts): every layer's, for training */
    size_t B_cap;        /* largest batch forward accepts; 0 before hy_xfmr_alloc_acts */
    hy_xfmr_acts *acts;  /* owned */
    hy_arena scratch;    /* backward temporaries, planned for (B_cap, T) */
    /* inference activations (hy_xfmr_alloc_infer): one layer's, whatever the depth */
    size_t B_infer;      /* largest batch of the inference block; 0 without one */
    hy_xfmr_acts *infer_acts; /* owned */
    hy_xfmr_acts *cur;   /* the block the last forward ran in (acts or infer_acts; borrowed) */
    /* dropout */
    bool dropout_on;
    hy_rng drop_rng;
    uint64_t drop_step;  /* forwards run with dropout on since hy_xfmr_set_dropout */
    /* state of the last forward, for backward */
    size_t last_B, last_T;
    bool have_fwd;
    bool last_kept;      /* it kept every layer's activations (hy_xfmr_forward, not _infer) */
    bool last_drop;      /* the last forward applied dropout masks */
    hy_rng last_drop_rng; /* its dropout stream: backward draws the same masks again */
    /* extension (hy_xfmr_ext below): NULL for a plain model. With M members, forward takes B
     * samples and writes logits [M*B, K] (member-major); B_cap counts samples; hy_xfmr_loss
     * takes the B labels and averages the members' cross-entropies. */
    struct hy_xfmr_ext *ext;  /* owned */
    /* precision bf16 (hy_xfmr_set_precision): the BF16 forms of the linears' weights that
     * hy_xfmr_infer uses; NULL: float32 */
    hy_bf16_set *bf16;        /* owned */
} hy_xfmr;

/* ===== extensions =====
 * An extension gives the model M members that share everything but the linears: the members'
 * rows are stacked along the batch, member-major (row m*B + b is member m's copy of sample b),
 * and the extension computes every block linear and the classifier head over those stacked rows
 * (one indirect call per linear), its own tensors following the base ones in the parameter
 * table. A member-linear ensemble (BatchEnsemble, LoRA-Ensemble: hydra/ens.h) is one; the model
 * knows nothing else of it. */

/* The linears of a block, in forward order. */
typedef enum { HY_XFMR_QKV, HY_XFMR_PROJ, HY_XFMR_FC1, HY_XFMR_FC2, HY_XFMR_N_SITES } hy_xfmr_site;

struct hy_h5;
typedef struct hy_xfmr_ext hy_xfmr_ext;
typedef struct hy_xfmr_ext_ops {
    /* The linear of block l at site s over N = M * NB stacked rows: out (N, Dout) written = the
     * members' product of in (N, Din) (+ res (N, Dout) when not NULL; res does not alias out);
     * w (Dout, Din), b (Dout) the model's shared weight and bias. */
    void (*linear_forward)(hy_xfmr *m, size_t l, hy_xfmr_site s, float *out, const float *in,
                           const float *w, const float *b, const float *res, size_t N,
                           size_t Din, size_t Dout);
    /* Its backward: din (N, Din) written; dw (Dout, Din), db (Dout) and the extension's
     * gradients added; dout (N, Dout), in as in forward. */
    void (*linear_backward)(hy_xfmr *m, size_t l, hy_xfmr_site s, float *din, float *dw,
                            float *db, const float *dout, const float *in, const float *w,
                            size_t N, size_t Din, size_t Dout);
    /* The classifier over R stacked rows: logits (R, K) written from lnf (R, D); backward:
     * dlnf (R, D) written, the head's gradients added. */
    void (*head_forward)(hy_xfmr *m, float *logits, const float *lnf, size_t R);
    void (*head_backward)(hy_xfmr *m, float *dlnf, const float *dlogits, const float *lnf,
                          size_t R);
    /* Scratch for `rows` stacked rows (M * B_cap * T; hy_xfmr_alloc_acts). HY_ENOMEM. */
    hy_status (*alloc)(hy_xfmr *m, size_t rows);
    /* Initialises the extension's tensors from seed, after the base init (hy_xfmr_init). */
    void (*init)(hy_xfmr *m, uint64_t seed);
    /* The model's cost at sequence length T (hy_xfmr_model_cost). */
    hy_xfmr_costs (*cost)(const hy_xfmr *m, size_t T);
    /* Writes the extension's part of a checkpoint beside /config and /params (hy_ckpt_write). */
    hy_status (*save)(const hy_xfmr *m, struct hy_h5 *f);
    /* Frees x (hy_xfmr_release). */
    void (*release)(hy_xfmr_ext *x);
} hy_xfmr_ext_ops;

struct hy_xfmr_ext {
    const hy_xfmr_ext_ops *ops;
    const char *name;        /* what the model is, for messages: "batch_ensemble" */
    size_t members;          /* M >= 1: logit rows per sample */
    size_t frozen_floats;    /* > 0: params[0, frozen_floats) and the gates never train:
                              * backward leaves their gradients exactly 0 */
};

/* How hy_xfmr_new_ext extends the model: `table` appends the extension's tensors to a parameter
 * table as hy_xfmr_table does (tab NULL: count only; *n and *off advanced), then `install` makes
 * m->ext of the built model (its message on failure). ctx is passed to both. */
typedef struct hy_xfmr_ext_spec {
    const void *ctx;
    void (*table)(const hy_xfmr_config *c, const void *ctx, hy_param *tab, size_t *n,
                  size_t *off);
    hy_status (*install)(hy_xfmr *m, const void *ctx);
} hy_xfmr_ext_spec;

/* Builds a model: checks cfg, allocates params and grads (zeroed), the name table, gates (all 1)
 * and dgates (0). No activations yet (hy_xfmr_alloc_acts). On failure m is left zeroed and
 * nothing leaks. Release with hy_xfmr_release. HY_ECONFIG / HY_ENOMEM. */
hy_status hy_xfmr_new(hy_xfmr *m, const hy_xfmr_config *cfg);
/* The same extended by x (hy_xfmr_ext_spec): the extension's tensors after the base table. */
hy_status hy_xfmr_new_ext(hy_xfmr *m, const hy_xfmr_config *cfg, const hy_xfmr_ext_spec *x);
/* Members of m: 1 for a plain model, m->ext->members for an extended one (logit rows per
 * sample). */
size_t hy_xfmr_members(const hy_xfmr *m);
/* The cost of model m at sequence length T: hy_xfmr_cost (all heads), or the extension's. */
hy_xfmr_costs hy_xfmr_model_cost(const hy_xfmr *m, size_t T);
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

/* (Re)allocates the inference block: what hy_xfmr_infer needs for batches of up to B_cap
 * samples, and nothing a backward reads: the residual stream in HY_XFMR_INFER_X_SLOTS slots and
 * one layer's buffers (LayerNorms, Q/K/V, attention output, MLP hidden), which every layer
 * reuses, plus hy_block_forward's per-thread windows (layers.h) in place of the probabilities.
 * Its size does not depend on the depth (hy_xfmr_infer_bytes). The training block (acts) is
 * left alone; hy_xfmr_forward never runs in this one. HY_EINVAL for B_cap == 0, HY_ENOMEM
 * (when an extension's scratch cannot be had, the training block is freed too). */
hy_status hy_xfmr_alloc_infer(hy_xfmr *m, size_t B_cap);
/* Makes sure hy_xfmr_infer takes batches of B samples: nothing when the training block or the
 * inference block holds them, else the training block is freed (a trained model keeps no GBs
 * of activations; a training step allocates them again) and hy_xfmr_alloc_infer(m, B). Every
 * prediction and evaluation
 * calls this (never hy_xfmr_alloc_acts), so inference memory grows with the batch, not with
 * batch x depth. */
hy_status hy_xfmr_ensure_infer(hy_xfmr *m, size_t B);
/* Bytes of the inference block for B_cap stacked rows (a plain model: B_cap samples; an
 * extension with M members holds M * B_cap) at the current thread count (its per-thread
 * windows): the same at every depth. */
size_t hy_xfmr_infer_bytes(const hy_xfmr_config *c, size_t B_cap);
#define HY_XFMR_INFER_X_SLOTS 4

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

/* The arithmetic of hy_xfmr_infer: fp32 (the default; bitwise the model without this call) or
 * bf16: the linears of the blocks (qkv, proj, fc1, fc2) and the vit patch embedding take their
 * weights, packed here once, and their inputs rounded to bfloat16, with float32 sums
 * (tensor/gemm_bf16.h); everything else stays float32. The packed weights are those of this
 * call: after the weights change, call it again. On a CPU without AVX-512 BF16 (or an extended
 * model: hydra/ens.h) it stays fp32; *used (may be NULL) gets the precision in force. Fails
 * HY_ENOMEM (the model unchanged). */
hy_status hy_xfmr_set_precision(hy_xfmr *m, hy_precision want, hy_precision *used);

/* The BF16 weights of a parameter block at precision `want`, into *owned (NULL: float32; a
 * previous set is freed): for bf16 on a CPU with AVX-512 BF16, the linears above of `members`
 * models sharing one config c (slots S = hy_xfmr_n_slots(c)), member k's slot s being params +
 * table[slot_of[k S + s]].offset (slot_of NULL: table[s], one model), a tensor shared by
 * members packed once. *used (may be NULL) gets the precision in force. Fails HY_ENOMEM with
 * *owned unchanged. hy_xfmr_set_precision and hy_fused_set_precision (hydra/fused.h) call it. */
hy_status hy_xfmr_bf16_precision(hy_bf16_set **owned, hy_precision want, const hy_xfmr_config *c,
                                 const float *params, const hy_param *table,
                                 const size_t *slot_of, size_t members, hy_precision *used);

/* hy_xfmr_forward for prediction and evaluation: the same operations in the same order, so the
 * same logits bit for bit, but every layer reuses the first layer's activation buffers instead
 * of keeping its own for backward (vit-fm at batch 256: ~38 MB for one layer's working set
 * instead of ~230 MB for all six), so the passes between the GEMMs mostly hit cache; the plain
 * block path (norm post, gelu_tanh) too. It runs in the inference block when that holds B
 * samples, else in the training block's first slots (the same bits either way). Features and
 * hidden (below) are kept; a backward after it fails HY_EINVAL. */
hy_status hy_xfmr_infer(hy_xfmr *m, const hy_batch *in, size_t B, float *logits);

/* The features of the last forward: LN_f(x[:, 0]), the CLS row after the final LayerNorm (the
 * head's input; norm post: x[:, 0]; pooler tanh: tanh(pooler(.)) before its dropout), (last_B, D)
 * row-major, borrowed from the activations (valid until the next
 * forward or hy_xfmr_alloc_acts). NULL when no forward was run since hy_xfmr_alloc_acts. The
 * learned uncertainty heads (vilu.h) read them through hy_train_features. */
const float *hy_xfmr_features(const hy_xfmr *m);

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
/* The same with a gradient on the last residual stream: dhidden (B, T, D) of that forward (T =
 * its sequence length with CLS; NULL = none) is added to dL/dx_L before the blocks' backward,
 * and dlogits may be NULL (no classifier-head gradient: masked-language-model pretraining,
 * mlm.h). hy_xfmr_backward(m, d) is hy_xfmr_backward_hidden(m, d, NULL). */
hy_status hy_xfmr_backward_hidden(hy_xfmr *m, const float *dlogits, const float *dhidden);
/* x_L (last_B, last_T, D) of the last forward: the final residual stream before LN_f (row
 * b * T + t; t = 0 is CLS); NULL when no forward was run. Borrowed from the activations. */
const float *hy_xfmr_hidden(const hy_xfmr *m);
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
