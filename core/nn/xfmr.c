/* xfmr.c: see xfmr.h. Layout: one flat parameter block (timm order, 64-byte aligned tensors),
 * one activation block with per-layer slots sized for (B_cap, T), a scratch arena for the
 * backward temporaries, and for inference a block with one layer's slots (hy_xfmr_alloc_infer).
 * The forward of a batch with fewer rows or a shorter text length uses the first B*T rows of
 * every slot. */
#include "nn/xfmr.h"

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/attn.h"
#include "tensor/gemm.h"
#include "nn/layers.h"
#include "tensor/prof.h"
#include "tensor/team.h"

/* Every per-layer field holds L slots (x: L+1), slot l at l * its slot size; within a slot only
 * the first B*T rows of the current forward are used (B <= B_cap, T <= the full length).
 * The inference block (hy_xfmr_alloc_infer) has one slot of each (x: HY_XFMR_INFER_X_SLOTS, the
 * last standing for slot L), no hg, and att holds hy_block_forward's windows, not
 * probabilities. */
struct hy_xfmr_acts {
    float *block;         /* owned; every pointer below points into it */
    size_t sD, sQ, sA, sH, sR; /* per-layer slot sizes: B*T*D, B*T*3D, B*NH*T*T, B*T*DM, B*T */
    size_t nx;            /* slots of x: L + 1, or HY_XFMR_INFER_X_SLOTS */
    size_t att_floats;    /* floats at att: L * sA, or the inference windows' */
    float *x;             /* (L+1, B, T, D): x[0] embedded input, x[l+1] block l output */
    float *ln1;           /* (L, B, T, D) LN1(x[l]) */
    float *ln1_mean;      /* (L, B, T) */
    float *ln1_rstd;      /* (L, B, T) */
    float *qkv;           /* (L, B, T, 3D): q | k | v, each head-major (NH, HS) */
    float *att;           /* (L, B, NH, T, T) softmax probabilities */
    float *ao;            /* (L, B, T, D) attention output (heads concatenated, gated) */
    float *xm;            /* (L, B, T, D) x[l] + drop(proj(ao)): the MLP's input */
    float *ln2;           /* (L, B, T, D) LN2(xm) */
    float *ln2_mean;      /* (L, B, T) */
    float *ln2_rstd;      /* (L, B, T) */
    float *h;             /* (L, B, T, DM) GELU'(fc1 output) when kept for backward; at inference
                           * the fc1 output, then GELU of it in place */
    float *hg;            /* (L, B, T, DM) drop(GELU(h)) */
    float *cls;           /* (B, D) x[L][:, 0] */
    float *lnf;           /* (B, D) LN_f(cls) */
    float *lnf_mean;      /* (B) */
    float *lnf_rstd;      /* (B) */
    float *emb;           /* (B, T-1, D) patch / token embeddings; text_embed bert: (B, T, D)
                           * tok + pos + type, embed_norm's input */
    float *emb_mean;      /* text_embed bert: (B, T) embed_norm's statistics; else NULL */
    float *emb_rstd;
    float *pool;          /* pooler tanh: (B, D) tanh(pooler(.)); else NULL */
    float *pool_in;       /* pooler tanh: (B, D) the head's input, drop(pool) */
    float *patches;       /* vit: (B, NP, C_in*p*p); NULL for text */
    int32_t *ids;         /* text: (B, T-1) the batch's ids (text_embed bert: (B, T)) */
    int32_t *tids;        /* text_embed bert: (B, T) the batch's type ids; else NULL */
    int32_t *kvalid;      /* (B) valid keys per row (T for vit, 1 + length for text) */
};

/* ===== configuration ===== */

size_t hy_xfmr_field_max(const hy_xfmr_field *f) {
    HY_ASSERT(f->type == HY_FIELD_SIZE || f->type == HY_FIELD_COUNT);
    static const struct { const char *name; size_t max; } lim[] = {
        {"image_size", HY_XFMR_MAX_IMAGE},   {"channels", HY_XFMR_MAX_CHANNELS},
        {"patch", HY_XFMR_MAX_IMAGE},        {"vocab_size", HY_XFMR_MAX_VOCAB},
        {"max_len", HY_ATTN_MAX_T - 1},      {"d_model", HY_XFMR_MAX_WIDTH},
        {"n_heads", HY_XFMR_MAX_WIDTH},      {"depth", HY_XFMR_MAX_DEPTH},
        {"d_mlp", HY_XFMR_MAX_WIDTH},        {"n_classes", HY_XFMR_MAX_CLASSES},
        {"type_vocab", HY_XFMR_MAX_CLASSES},
    };
    for (size_t i = 0; i < sizeof lim / sizeof *lim; i++)
        if (strcmp(lim[i].name, f->name) == 0) return lim[i].max;
    HY_ASSERT(!"every SIZE and COUNT field has a limit");
    return 0;
}

hy_status hy_xfmr_config_check(const hy_xfmr_config *c) {
    if (c->kind != HY_XFMR_VIT && c->kind != HY_XFMR_TEXT)
        return hy_fail(HY_ECONFIG, "xfmr: kind must be vit or text (got %d)", (int)c->kind);
#define NEED_POS(f) \
    if (c->f == 0) return hy_fail(HY_ECONFIG, "xfmr: " #f " must be > 0 (got 0)")
    NEED_POS(d_model);
    NEED_POS(n_heads);
    NEED_POS(depth);
    NEED_POS(d_mlp);
    NEED_POS(n_classes);
    if (c->d_model % c->n_heads)
        return hy_fail(HY_ECONFIG, "xfmr: d_model must be divisible by n_heads (d_model %zu, "
                       "n_heads %zu)", c->d_model, c->n_heads);
    if (c->d_model / c->n_heads > 64)
        return hy_fail(HY_ECONFIG, "xfmr: head size d_model/n_heads must be <= 64 (got %zu)",
                       c->d_model / c->n_heads);
    if (c->kind == HY_XFMR_VIT) {
        NEED_POS(image_size);
        NEED_POS(channels);
        NEED_POS(patch);
        if (c->image_size % c->patch)
            return hy_fail(HY_ECONFIG, "xfmr: image_size must be divisible by patch "
                           "(image_size %zu, patch %zu)", c->image_size, c->patch);
    } else {
        NEED_POS(max_len);
        if (c->vocab_size <= HY_TOK_CLS)
            return hy_fail(HY_ECONFIG, "xfmr: vocab_size must be > %d (PAD, UNK, CLS are "
                           "reserved; got %zu)", HY_TOK_CLS, c->vocab_size);
    }
#undef NEED_POS
    if (hy_xfmr_seq_len(c) > HY_ATTN_MAX_T)
        return hy_fail(HY_ECONFIG, "xfmr: sequence length %zu (with CLS) exceeds %d",
                       hy_xfmr_seq_len(c), HY_ATTN_MAX_T);
    /* the limits (after the more telling messages above, which need no product that could
     * overflow: a wrapped sequence length is caught here), before the parameter count */
    for (size_t i = 0; i < HY_XFMR_N_FIELDS; i++) {
        const hy_xfmr_field *fd = &hy_xfmr_fields[i];
        if ((fd->type != HY_FIELD_SIZE && fd->type != HY_FIELD_COUNT) ||
            !hy_xfmr_field_applies(fd, c->kind))
            continue;
        size_t v = hy_xfmr_field_size(c, fd), max = hy_xfmr_field_max(fd);
        if (v > max)
            return hy_fail(HY_ECONFIG, "xfmr: %s must be <= %zu (got %zu)", fd->name, max, v);
    }
    size_t total = 0;
    hy_xfmr_table(c, NULL, &total);   /* < 2^60 under the limits above: no overflow */
    if (total > HY_XFMR_MAX_PARAMS)
        return hy_fail(HY_ECONFIG, "xfmr: the model has %zu parameters, above the limit of %zu "
                       "(d_model %zu, depth %zu, d_mlp %zu)", total, HY_XFMR_MAX_PARAMS,
                       c->d_model, c->depth, c->d_mlp);
    if (!(c->attn_dropout >= 0.0f && c->attn_dropout < 1.0f))
        return hy_fail(HY_ECONFIG, "xfmr: attn_dropout must be in [0, 1) (got %g)",
                       (double)c->attn_dropout);
    if (!(c->mlp_dropout >= 0.0f && c->mlp_dropout < 1.0f))
        return hy_fail(HY_ECONFIG, "xfmr: mlp_dropout must be in [0, 1) (got %g)",
                       (double)c->mlp_dropout);
    for (size_t i = 0; i < HY_XFMR_N_FIELDS; i++) {
        const hy_xfmr_field *f = &hy_xfmr_fields[i];
        if (f->type != HY_FIELD_ENUM) continue;
        int v = hy_xfmr_field_enum(c, f), n = hy_xfmr_field_enum_count(f);
        if (v < 0 || v >= n)
            return hy_fail(HY_ECONFIG, "xfmr: %s must be one of %s (got value %d)", f->name,
                           f->dflt, v);
        if (v != 0 && !hy_xfmr_field_applies(f, c->kind))
            return hy_fail(HY_ECONFIG, "xfmr: %s applies to text models only", f->name);
    }
    if (c->kind != HY_XFMR_TEXT && c->type_vocab)
        return hy_fail(HY_ECONFIG, "xfmr: type_vocab applies to text models only (got %zu)",
                       c->type_vocab);
    if (c->type_vocab && c->text_embed != HY_TEXT_EMBED_BERT)
        return hy_fail(HY_ECONFIG, "xfmr: type_vocab %zu needs text_embed bert (token types are "
                       "BERT's embedding)", c->type_vocab);
    /* ln_eps: 0 = the default; a float32 LayerNorm needs it finite and > 0 as a float */
    if (!(c->ln_eps == 0.0 || (c->ln_eps > 0.0 && c->ln_eps < 1.0 && (float)c->ln_eps > 0.0f)))
        return hy_fail(HY_ECONFIG, "xfmr: ln_eps must be in (0, 1) and representable as a "
                       "float32 (got %g)", c->ln_eps);
    return HY_OK;
}

size_t hy_xfmr_seq_len(const hy_xfmr_config *c) {
    if (c->kind == HY_XFMR_VIT) {
        size_t g = c->patch ? c->image_size / c->patch : 0;
        return 1 + g * g;
    }
    return c->text_embed == HY_TEXT_EMBED_BERT ? c->max_len : 1 + c->max_len;
}

static bool bert_embed(const hy_xfmr_config *c) {
    return c->kind == HY_XFMR_TEXT && c->text_embed == HY_TEXT_EMBED_BERT;
}

bool hy_xfmr_plain_blocks(const hy_xfmr_config *c) {
    return c->norm == HY_NORM_POST || c->act == HY_ACT_GELU_TANH;
}

const char *hy_xfmr_nondefault_option(const hy_xfmr_config *c) {
    if (c->norm == HY_NORM_POST) return "norm post";
    if (c->act == HY_ACT_GELU_TANH) return "act gelu_tanh";
    if (c->pooler == HY_POOLER_TANH) return "pooler tanh";
    if (bert_embed(c)) return "text_embed bert";
    return NULL;
}

/* ===== the config schema ===== */

#define FIELD_KIND_VIT HY_XFMR_VIT
#define FIELD_KIND_TEXT HY_XFMR_TEXT
#define FIELD_KIND_ALL (-1)
#define FIELD_ROW(name, type, kind, dflt) \
    {#name, HY_FIELD_##type, FIELD_KIND_##kind, offsetof(hy_xfmr_config, name), dflt},
const hy_xfmr_field hy_xfmr_fields[HY_XFMR_N_FIELDS] = {HY_XFMR_CONFIG_FIELDS(FIELD_ROW)};
#undef FIELD_ROW
/* the generated struct and the X-macro agree on every field's type */
#define FIELD_TYPE_OK(name, type, kind, dflt) \
    _Static_assert(sizeof(((hy_xfmr_config *)0)->name) == sizeof(HY_XFMR_FIELD_TYPE_##type), \
                   #name);
HY_XFMR_CONFIG_FIELDS(FIELD_TYPE_OK)
#undef FIELD_TYPE_OK

const hy_xfmr_field *hy_xfmr_field_find(const char *name) {
    for (size_t i = 0; i < HY_XFMR_N_FIELDS; i++)
        if (strcmp(hy_xfmr_fields[i].name, name) == 0) return &hy_xfmr_fields[i];
    return NULL;
}

bool hy_xfmr_field_applies(const hy_xfmr_field *f, hy_xfmr_kind k) {
    return f->kind < 0 || f->kind == (int)k;
}

size_t hy_xfmr_field_size(const hy_xfmr_config *c, const hy_xfmr_field *f) {
    HY_ASSERT(f->type == HY_FIELD_SIZE || f->type == HY_FIELD_COUNT);
    size_t v;
    memcpy(&v, (const char *)c + f->offset, sizeof v);
    return v;
}

float hy_xfmr_field_rate(const hy_xfmr_config *c, const hy_xfmr_field *f) {
    HY_ASSERT(f->type == HY_FIELD_RATE);
    float v;
    memcpy(&v, (const char *)c + f->offset, sizeof v);
    return v;
}

double hy_xfmr_field_default(const hy_xfmr_field *f) {
    HY_ASSERT(f->type == HY_FIELD_FLOAT || f->type == HY_FIELD_COUNT);
    return strtod(f->dflt, NULL);
}

int hy_xfmr_field_enum(const hy_xfmr_config *c, const hy_xfmr_field *f) {
    HY_ASSERT(f->type == HY_FIELD_ENUM);
    int v;
    memcpy(&v, (const char *)c + f->offset, sizeof v);
    return v;
}

void hy_xfmr_field_set_enum(hy_xfmr_config *c, const hy_xfmr_field *f, int v) {
    HY_ASSERT(f->type == HY_FIELD_ENUM);
    memcpy((char *)c + f->offset, &v, sizeof v);
}

/* word i of the '|'-separated words of an ENUM field: its start and length; false past the end */
static bool enum_word(const hy_xfmr_field *f, int i, const char **w, size_t *n) {
    const char *p = f->dflt;
    for (int k = 0; k < i; k++) {
        p = strchr(p, '|');
        if (!p) return false;
        p++;
    }
    const char *e = strchr(p, '|');
    *w = p;
    *n = e ? (size_t)(e - p) : strlen(p);
    return i >= 0;
}

int hy_xfmr_field_enum_count(const hy_xfmr_field *f) {
    HY_ASSERT(f->type == HY_FIELD_ENUM);
    int n = 1;
    for (const char *p = f->dflt; (p = strchr(p, '|')) != NULL; p++) n++;
    return n;
}

const char *hy_xfmr_field_enum_name(const hy_xfmr_field *f, int v, char *buf, size_t n) {
    HY_ASSERT(f->type == HY_FIELD_ENUM && n > 0);
    const char *w;
    size_t len;
    buf[0] = 0;
    if (enum_word(f, v, &w, &len) && len < n) {
        memcpy(buf, w, len);
        buf[len] = 0;
    }
    return buf;
}

hy_status hy_xfmr_field_enum_parse(const hy_xfmr_field *f, const char *s, int *out) {
    HY_ASSERT(f->type == HY_FIELD_ENUM);
    const char *w;
    size_t len;
    for (int i = 0; s && enum_word(f, i, &w, &len); i++)
        if (strlen(s) == len && strncmp(s, w, len) == 0) {
            *out = i;
            return HY_OK;
        }
    return HY_EINVAL;
}

double hy_xfmr_field_float(const hy_xfmr_config *c, const hy_xfmr_field *f) {
    HY_ASSERT(f->type == HY_FIELD_FLOAT);
    double v;
    memcpy(&v, (const char *)c + f->offset, sizeof v);
    return v != 0.0 ? v : hy_xfmr_field_default(f);
}

void hy_xfmr_field_set_float(hy_xfmr_config *c, const hy_xfmr_field *f, double v) {
    HY_ASSERT(f->type == HY_FIELD_FLOAT);
    memcpy((char *)c + f->offset, &v, sizeof v);
}

/* the optional fields' values in effect written into c (a model's cfg holds no 0 = default) */
static void resolve_defaults(hy_xfmr_config *c) {
    for (size_t i = 0; i < HY_XFMR_N_FIELDS; i++)
        if (hy_xfmr_fields[i].type == HY_FIELD_FLOAT)
            hy_xfmr_field_set_float(c, &hy_xfmr_fields[i],
                                    hy_xfmr_field_float(c, &hy_xfmr_fields[i]));
}

float hy_xfmr_ln_eps(const hy_xfmr_config *c) {
    return c->ln_eps != 0.0 ? (float)c->ln_eps : HY_XFMR_LN_EPS;
}

void hy_xfmr_field_set_size(hy_xfmr_config *c, const hy_xfmr_field *f, size_t v) {
    HY_ASSERT(f->type == HY_FIELD_SIZE || f->type == HY_FIELD_COUNT);
    memcpy((char *)c + f->offset, &v, sizeof v);
}

void hy_xfmr_field_set_rate(hy_xfmr_config *c, const hy_xfmr_field *f, float v) {
    HY_ASSERT(f->type == HY_FIELD_RATE);
    memcpy((char *)c + f->offset, &v, sizeof v);
}

const char *hy_xfmr_kind_name(hy_xfmr_kind k) { return k == HY_XFMR_TEXT ? "text" : "vit"; }

hy_status hy_xfmr_kind_parse(const char *s, hy_xfmr_kind *out) {
    if (s && strcmp(s, "vit") == 0) *out = HY_XFMR_VIT;
    else if (s && strcmp(s, "text") == 0) *out = HY_XFMR_TEXT;
    else return HY_EINVAL;
    return HY_OK;
}

/* ===== parameter layout (slots) ===== */

size_t hy_xfmr_n_embed_slots(const hy_xfmr_config *c) {
    if (bert_embed(c)) return c->type_vocab ? 5 : 4;
    return c->kind == HY_XFMR_VIT ? 4 : 3;
}

bool hy_xfmr_has_head_slot(const hy_xfmr_config *c, hy_head_slot which) {
    if (which == HY_HEAD_NW || which == HY_HEAD_NB) return c->norm == HY_NORM_PRE;
    if (which == HY_HEAD_PW || which == HY_HEAD_PB) return c->pooler == HY_POOLER_TANH;
    return which < HY_HEAD_N;
}

size_t hy_xfmr_n_head_slots(const hy_xfmr_config *c) {
    size_t n = 2;
    if (c->norm == HY_NORM_PRE) n += 2;
    if (c->pooler == HY_POOLER_TANH) n += 2;
    return n;
}

size_t hy_xfmr_slot(const hy_xfmr_config *c, size_t layer, hy_blk_slot which) {
    HY_ASSERT(layer < c->depth && which < HY_BLK_N);
    return hy_xfmr_n_embed_slots(c) + layer * HY_BLK_N + (size_t)which;
}

size_t hy_xfmr_head_slot(const hy_xfmr_config *c, hy_head_slot which) {
    HY_ASSERT(hy_xfmr_has_head_slot(c, which));
    /* table order: [norm.weight, norm.bias] [pooler.weight, pooler.bias] head.weight, head.bias */
    size_t base = hy_xfmr_n_embed_slots(c) + c->depth * HY_BLK_N;
    size_t fn = c->norm == HY_NORM_PRE ? 2 : 0, pl = c->pooler == HY_POOLER_TANH ? 2 : 0;
    switch (which) {
    case HY_HEAD_NW: return base;
    case HY_HEAD_NB: return base + 1;
    case HY_HEAD_PW: return base + fn;
    case HY_HEAD_PB: return base + fn + 1;
    case HY_HEAD_W: return base + fn + pl;
    case HY_HEAD_B: return base + fn + pl + 1;
    case HY_HEAD_N: break;
    }
    HY_ASSERT(0);
    return 0;
}

size_t hy_xfmr_n_slots(const hy_xfmr_config *c) {
    return hy_xfmr_n_embed_slots(c) + c->depth * HY_BLK_N + hy_xfmr_n_head_slots(c);
}

hy_xfmr_part hy_xfmr_slot_part(const hy_xfmr_config *c, size_t s, size_t *layer,
                               size_t *which) {
    size_t ne = hy_xfmr_n_embed_slots(c), head = ne + c->depth * HY_BLK_N;
    HY_ASSERT(s < hy_xfmr_n_slots(c));
    if (s < ne) return HY_PART_EMBED;
    if (s >= head) return c->norm == HY_NORM_PRE && s - head < 2 ? HY_PART_LN : HY_PART_HEAD;
    size_t l = (s - ne) / HY_BLK_N, j = (s - ne) % HY_BLK_N;
    if (layer) *layer = l;
    if (which) *which = j;
    if (j == HY_BLK_N1W || j == HY_BLK_N1B || j == HY_BLK_N2W || j == HY_BLK_N2B)
        return HY_PART_LN;
    if (j >= HY_BLK_QKVW && j <= HY_BLK_PROJB) return HY_PART_ATTN;
    return HY_PART_MLP;
}

/* ===== cost ===== */

hy_xfmr_costs hy_xfmr_cost(const hy_xfmr_config *c, size_t T, const size_t *kept) {
    hy_xfmr_costs r;
    memset(&r, 0, sizeof r);
    size_t D = c->d_model, DM = c->d_mlp, K = c->n_classes, HS = c->d_model / c->n_heads;
    double d = (double)D, dm = (double)DM, t = (double)T;
    /* embedding: cls_token, pos_embed at the full length; the patch GEMM over T-1 patches */
    size_t Tmax = hy_xfmr_seq_len(c);
    r.params[HY_PART_EMBED] = bert_embed(c) ? Tmax * D + c->type_vocab * D + 2 * D : D + Tmax * D;
    if (c->kind == HY_XFMR_VIT) {
        size_t F = c->channels * c->patch * c->patch;
        r.params[HY_PART_EMBED] += D * F + D;
        r.flops[HY_PART_EMBED] = 2.0 * (t - 1.0) * (double)F * d;
    } else {
        r.params[HY_PART_EMBED] += c->vocab_size * D;
    }
    for (size_t l = 0; l < c->depth; l++) {
        size_t C = (kept ? kept[l] : c->n_heads) * HS;   /* width of the kept heads */
        double cc = (double)C;
        r.params[HY_PART_LN] += 4 * D;
        r.params[HY_PART_ATTN] += 3 * C * D + 3 * C + D * C + D;
        r.params[HY_PART_MLP] += DM * D + DM + D * DM + D;
        /* qkv, scores + weighted sum (T x T per kept head), proj; fc1 + fc2 */
        r.flops[HY_PART_ATTN] += 2.0 * t * d * 3.0 * cc + 2.0 * 2.0 * t * t * cc + 2.0 * t * cc * d;
        r.flops[HY_PART_MLP] += 2.0 * 2.0 * t * d * dm;
    }
    if (c->norm == HY_NORM_PRE) r.params[HY_PART_LN] += 2 * D;
    r.params[HY_PART_HEAD] = K * D + K;
    r.flops[HY_PART_HEAD] = 2.0 * d * (double)K;
    if (c->pooler == HY_POOLER_TANH) {
        r.params[HY_PART_HEAD] += D * D + D;
        r.flops[HY_PART_HEAD] += 2.0 * d * d;
    }
    for (int p = 0; p < HY_N_PARTS; p++) {
        r.flops_total += r.flops[p];
        r.params_total += r.params[p];
    }
    return r;
}

/* ===== parameter table ===== */

void hy_param_table_add(hy_param *tab, size_t *n, size_t *off, const char *name, int ndim,
                        const int64_t *shape, bool decay) {
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= (size_t)shape[i];
    if (tab) {
        hy_param *p = &tab[*n];
        memset(p, 0, sizeof *p);
        size_t len = strlen(name);
        HY_ASSERT(len < sizeof p->name);
        memcpy(p->name, name, len + 1);
        p->ndim = ndim;
        for (int i = 0; i < ndim; i++) p->shape[i] = shape[i];
        p->numel = numel;
        p->offset = *off;
        p->decay = decay;
    }
    *off += (numel + 15) / 16 * 16;
    (*n)++;
}

size_t hy_xfmr_table(const hy_xfmr_config *c, hy_param *tab, size_t *total) {
    size_t n = 0, off = 0;
    int64_t D = (int64_t)c->d_model, DM = (int64_t)c->d_mlp, K = (int64_t)c->n_classes;
    int64_t T = (int64_t)hy_xfmr_seq_len(c);
    char name[48];
#define ADD(nm, nd, dec, ...) do { int64_t sh_[] = {__VA_ARGS__}; \
        hy_param_table_add(tab, &n, &off, nm, nd, sh_, dec); } while (0)
    if (bert_embed(c)) {   /* no cls_token: the ids begin with [CLS] */
        ADD("pos_embed", 3, false, 1, T, D);
        ADD("tok_embed.weight", 2, false, (int64_t)c->vocab_size, D);
        if (c->type_vocab) ADD("type_embed.weight", 2, false, (int64_t)c->type_vocab, D);
        ADD("embed_norm.weight", 1, false, D);
        ADD("embed_norm.bias", 1, false, D);
    } else {
        ADD("cls_token", 3, false, 1, 1, D);
        ADD("pos_embed", 3, false, 1, T, D);
    }
    if (c->kind == HY_XFMR_VIT) {
        int64_t C = (int64_t)c->channels, p = (int64_t)c->patch;
        ADD("patch_embed.proj.weight", 4, true, D, C, p, p);
        ADD("patch_embed.proj.bias", 1, false, D);
    } else if (!bert_embed(c)) {
        ADD("tok_embed.weight", 2, false, (int64_t)c->vocab_size, D);
    }
    for (size_t l = 0; l < c->depth; l++) {
#define BLK(suffix, nd, dec, ...) do { snprintf(name, sizeof name, "blocks.%zu." suffix, l); \
        ADD(name, nd, dec, __VA_ARGS__); } while (0)
        BLK("norm1.weight", 1, false, D);
        BLK("norm1.bias", 1, false, D);
        BLK("attn.qkv.weight", 2, true, 3 * D, D);
        BLK("attn.qkv.bias", 1, false, 3 * D);
        BLK("attn.proj.weight", 2, true, D, D);
        BLK("attn.proj.bias", 1, false, D);
        BLK("norm2.weight", 1, false, D);
        BLK("norm2.bias", 1, false, D);
        BLK("mlp.fc1.weight", 2, true, DM, D);
        BLK("mlp.fc1.bias", 1, false, DM);
        BLK("mlp.fc2.weight", 2, true, D, DM);
        BLK("mlp.fc2.bias", 1, false, D);
#undef BLK
    }
    if (c->norm == HY_NORM_PRE) {
        ADD("norm.weight", 1, false, D);
        ADD("norm.bias", 1, false, D);
    }
    if (c->pooler == HY_POOLER_TANH) {
        ADD("pooler.weight", 2, true, D, D);
        ADD("pooler.bias", 1, false, D);
    }
    ADD("head.weight", 2, true, K, D);
    ADD("head.bias", 1, false, K);
#undef ADD
    *total = off;
    return n;
}

/* the named views of a parameter block laid out by m->table (t->blk already allocated) */
static void fill_tensors(const hy_xfmr *m, float *base, hy_xfmr_tensors *t) {
    const hy_xfmr_config *c = &m->cfg;
    hy_xfmr_block_tensors *blk = t->blk;
#define AT(slot) (base + m->table[slot].offset)
    memset(t, 0, sizeof *t);
    t->blk = blk;
    if (bert_embed(c)) {
        size_t e = 0;
        t->pos_embed = AT(e++);
        t->tok_embed = AT(e++);
        if (c->type_vocab) t->type_embed = AT(e++);
        t->embed_norm_w = AT(e++);
        t->embed_norm_b = AT(e);
    } else if (c->kind == HY_XFMR_VIT) {
        t->cls_token = AT(HY_EMB_CLS);
        t->pos_embed = AT(HY_EMB_POS);
        t->patch_w = AT(HY_EMB_W);
        t->patch_b = AT(HY_EMB_B);
    } else {
        t->cls_token = AT(HY_EMB_CLS);
        t->pos_embed = AT(HY_EMB_POS);
        t->tok_embed = AT(HY_EMB_W);
    }
    for (size_t l = 0; l < c->depth; l++) {
        hy_xfmr_block_tensors *b = &blk[l];
        b->norm1_w = AT(hy_xfmr_slot(c, l, HY_BLK_N1W));
        b->norm1_b = AT(hy_xfmr_slot(c, l, HY_BLK_N1B));
        b->qkv_w = AT(hy_xfmr_slot(c, l, HY_BLK_QKVW));
        b->qkv_b = AT(hy_xfmr_slot(c, l, HY_BLK_QKVB));
        b->proj_w = AT(hy_xfmr_slot(c, l, HY_BLK_PROJW));
        b->proj_b = AT(hy_xfmr_slot(c, l, HY_BLK_PROJB));
        b->norm2_w = AT(hy_xfmr_slot(c, l, HY_BLK_N2W));
        b->norm2_b = AT(hy_xfmr_slot(c, l, HY_BLK_N2B));
        b->fc1_w = AT(hy_xfmr_slot(c, l, HY_BLK_FC1W));
        b->fc1_b = AT(hy_xfmr_slot(c, l, HY_BLK_FC1B));
        b->fc2_w = AT(hy_xfmr_slot(c, l, HY_BLK_FC2W));
        b->fc2_b = AT(hy_xfmr_slot(c, l, HY_BLK_FC2B));
    }
    if (c->norm == HY_NORM_PRE) {
        t->norm_w = AT(hy_xfmr_head_slot(c, HY_HEAD_NW));
        t->norm_b = AT(hy_xfmr_head_slot(c, HY_HEAD_NB));
    }
    if (c->pooler == HY_POOLER_TANH) {
        t->pooler_w = AT(hy_xfmr_head_slot(c, HY_HEAD_PW));
        t->pooler_b = AT(hy_xfmr_head_slot(c, HY_HEAD_PB));
    }
    t->head_w = AT(hy_xfmr_head_slot(c, HY_HEAD_W));
    t->head_b = AT(hy_xfmr_head_slot(c, HY_HEAD_B));
#undef AT
}

/* ===== build / release ===== */

static hy_status build(hy_xfmr *m, const hy_xfmr_config *cfg, const hy_xfmr_ext_spec *x) {
    memset(m, 0, sizeof *m);
    HY_TRY(hy_xfmr_config_check(cfg));
    m->cfg = *cfg;
    resolve_defaults(&m->cfg);
    m->T = hy_xfmr_seq_len(cfg);
    m->HS = cfg->d_model / cfg->n_heads;
    size_t total = 0;
    size_t nt = hy_xfmr_table(cfg, NULL, &total);
    if (x) x->table(cfg, x->ctx, NULL, &nt, &total);
    size_t LH = cfg->depth * cfg->n_heads;
    m->table = hy_xcalloc(nt, sizeof *m->table);
    m->params = hy_xmalloc_aligned(total * sizeof(float));
    m->grads = hy_xmalloc_aligned(total * sizeof(float));
    m->gates = hy_xmalloc(LH * sizeof(float));
    m->dgates = hy_xmalloc(LH * sizeof(float));
    m->p.blk = hy_xcalloc(cfg->depth, sizeof *m->p.blk);
    m->g.blk = hy_xcalloc(cfg->depth, sizeof *m->g.blk);
    if (!m->table || !m->params || !m->grads || !m->gates || !m->dgates || !m->p.blk ||
        !m->g.blk) {
        hy_status st = hy_fail(HY_ENOMEM, "xfmr: out of memory for %zu parameters", total);
        hy_xfmr_release(m);
        return st;
    }
    m->n_tensors = hy_xfmr_table(cfg, m->table, &total);
    HY_ASSERT(m->n_tensors == hy_xfmr_n_slots(cfg));
    if (x) x->table(cfg, x->ctx, m->table, &m->n_tensors, &total);
    HY_ASSERT(m->n_tensors == nt);
    m->n_params = total;
    fill_tensors(m, m->params, &m->p);
    fill_tensors(m, m->grads, &m->g);
    memset(m->params, 0, total * sizeof(float));
    memset(m->grads, 0, total * sizeof(float));
    for (size_t i = 0; i < LH; i++) {
        m->gates[i] = 1.0f;
        m->dgates[i] = 0.0f;
    }
    if (x) {
        hy_status st = x->install(m, x->ctx);
        if (st != HY_OK) {
            hy_xfmr_release(m);
            return st;
        }
    }
    return HY_OK;
}

hy_status hy_xfmr_new(hy_xfmr *m, const hy_xfmr_config *cfg) { return build(m, cfg, NULL); }

hy_status hy_xfmr_new_ext(hy_xfmr *m, const hy_xfmr_config *cfg, const hy_xfmr_ext_spec *x) {
    return build(m, cfg, x);
}

size_t hy_xfmr_members(const hy_xfmr *m) { return m->ext ? m->ext->members : 1; }

hy_xfmr_costs hy_xfmr_model_cost(const hy_xfmr *m, size_t T) {
    return m->ext ? m->ext->ops->cost(m, T) : hy_xfmr_cost(&m->cfg, T, NULL);
}

static void free_block(hy_xfmr_acts **a) {
    if (*a) {
        hy_free((*a)->block);
        hy_free(*a);
    }
    *a = NULL;
}

static void free_acts(hy_xfmr *m) {
    free_block(&m->acts);
    hy_arena_release(&m->scratch);
    m->B_cap = 0;
    m->have_fwd = false;
    m->cur = NULL;
}

static void free_infer(hy_xfmr *m) {
    free_block(&m->infer_acts);
    m->B_infer = 0;
    m->have_fwd = false;
    m->cur = NULL;
}

void hy_xfmr_release(hy_xfmr *m) {
    if (!m) return;
    free_acts(m);
    free_infer(m);
    if (m->ext) m->ext->ops->release(m->ext);
    hy_xfmr_bf16_precision(&m->bf16, HY_PRECISION_FP32, &m->cfg, NULL, NULL, NULL, 0, NULL);
    hy_free(m->table);
    hy_free(m->params);
    hy_free(m->grads);
    hy_free(m->gates);
    hy_free(m->dgates);
    hy_free(m->p.blk);
    hy_free(m->g.blk);
    memset(m, 0, sizeof *m);
}

/* ===== init ===== */

static float trunc_normal(hy_rng *r, double std) {
    for (;;) {
        double z = hy_rng_normal(r);
        if (z >= -2.0 && z <= 2.0) return (float)(z * std);
    }
}

void hy_xfmr_init(hy_xfmr *m, uint64_t seed) {
    hy_rng root;
    hy_rng_seed(&root, seed);
    memset(m->params, 0, m->n_params * sizeof(float));
    for (size_t i = 0; i < m->n_tensors; i++) {
        const hy_param *p = &m->table[i];
        float *w = m->params + p->offset;
        size_t len = strlen(p->name);
        bool is_bias = len >= 5 && strcmp(p->name + len - 5, ".bias") == 0;
        bool is_norm = strstr(p->name, "norm") != NULL;
        if (is_bias) continue;                          /* zeros */
        if (is_norm) {                                  /* LN weight: ones */
            for (size_t k = 0; k < p->numel; k++) w[k] = 1.0f;
            continue;
        }
        hy_rng r = hy_rng_split(&root, (uint64_t)i);
        for (size_t k = 0; k < p->numel; k++) w[k] = trunc_normal(&r, 0.02);
    }
    if (m->ext) m->ext->ops->init(m, seed);
}

/* ===== activations ===== */

typedef struct plan {
    size_t sD, sQ, sA, sH, sR, sB, emb, embr, pool, patches, total_f, ints, nid;
    size_t nx, nl, att, hg;   /* slots of x and of the per-layer fields; floats of att, hg */
} plan;

/* threads hy_block_forward's inference windows are planned for: the most a region may have
 * now or on every processor (a later region with more runs the kernels instead: the same
 * bits) */
static size_t window_threads(void) {
#ifdef _OPENMP
    int a = omp_get_max_threads(), b = omp_get_num_procs();
    return (size_t)(a > b ? a : b);
#else
    return 1;
#endif
}

/* The block of B stacked rows: training (every layer's slots) or inference (infer: one layer's,
 * the depth only in the sizes of nothing) */
static plan make_plan(const hy_xfmr_config *c, size_t B, bool infer) {
    plan p;
    memset(&p, 0, sizeof p);
    size_t T = hy_xfmr_seq_len(c), D = c->d_model, L = infer ? 1 : c->depth;
    /* every slot rounded to 16 floats so that all pointers stay 64-byte aligned */
#define R16(x) (((x) + 15) / 16 * 16)
    p.sD = R16(B * T * D);
    p.sQ = R16(B * T * 3 * D);
    p.sA = R16(B * c->n_heads * T * T);
    p.sH = R16(B * T * c->d_mlp);
    p.sR = R16(B * T);
    p.sB = R16(B * D);
    bool bert = bert_embed(c);
    p.nid = R16(B * (bert ? T : T - 1));   /* ids per slot (text) */
    p.emb = R16(B * (bert ? T : T - 1) * D);
    p.embr = bert ? R16(B * T) : 0;
    p.pool = c->pooler == HY_POOLER_TANH ? R16(B * D) : 0;
    p.patches = c->kind == HY_XFMR_VIT ? R16(B * (T - 1) * c->channels * c->patch * c->patch) : 0;
    p.nl = L;
    p.nx = infer ? HY_XFMR_INFER_X_SLOTS : L + 1;
    p.att = infer ? R16(hy_block_scratch_floats(B * T, T, D, window_threads())) : L * p.sA;
    p.hg = infer ? 0 : L * p.sH;
    p.total_f = p.nx * p.sD                                  /* x */
              + L * (p.sD + 2 * p.sR)                        /* ln1 */
              + L * (p.sQ + p.sD + p.sD) + p.att             /* qkv ao xm att */
              + L * (p.sD + 2 * p.sR)                        /* ln2 */
              + L * p.sH + p.hg                              /* h hg */
              + 2 * p.sB + 2 * R16(B)                        /* cls lnf mean rstd */
              + p.emb + p.patches + 2 * p.embr + 2 * p.pool;
    p.ints = p.nid * (bert ? 2 : 1) + R16(B);
#undef R16
    return p;
}

/* backward scratch: dres, dln, dao, dtmp (B,T,D); dqkv (B,T,3D); dhg (B,T,DM);
 * dlnf, dcls (B,D); demb (B,T-1,D; text_embed bert: B,T,D); attention partials (B*NH); the
 * pooler's dpool (B,D) */
static size_t scratch_bytes(const hy_xfmr_config *c, size_t B) {
    size_t T = hy_xfmr_seq_len(c), D = c->d_model, TE = bert_embed(c) ? T : T - 1;
    size_t n = 4 * hy_arena_need(B * T * D * sizeof(float)) +
               hy_arena_need(B * T * 3 * D * sizeof(float)) +
               hy_arena_need(B * T * c->d_mlp * sizeof(float)) +
               2 * hy_arena_need(B * D * sizeof(float)) +
               hy_arena_need(B * TE * D * sizeof(float)) +
               hy_arena_need(B * c->n_heads * sizeof(float));
    if (c->pooler == HY_POOLER_TANH) n += hy_arena_need(B * D * sizeof(float));
    return n;
}

size_t hy_xfmr_acts_bytes(const hy_xfmr_config *c, size_t B_cap) {
    plan p = make_plan(c, B_cap, false);
    return (p.total_f + p.ints) * sizeof(float) + scratch_bytes(c, B_cap);
}

size_t hy_xfmr_infer_bytes(const hy_xfmr_config *c, size_t B_cap) {
    plan p = make_plan(c, B_cap, true);
    return (p.total_f + p.ints) * sizeof(float);
}

/* every size in make_plan / scratch_bytes is at most B_cap times its value for one sample
 * (the inference windows at most that of the training block's probabilities): bound B_cap so
 * that none of them overflows */
static hy_status check_cap(const hy_xfmr *m, size_t B_cap) {
    if (B_cap == 0) return hy_fail(HY_EINVAL, "xfmr: activation batch size must be > 0");
    plan p1 = make_plan(&m->cfg, 1, false);
    size_t one = (p1.total_f + p1.ints) * sizeof(float) + scratch_bytes(&m->cfg, 1);
    one += hy_block_scratch_floats(m->T, m->T, m->cfg.d_model, 64) * sizeof(float);
    if (B_cap > SIZE_MAX / 2 / one / hy_xfmr_members(m))
        return hy_fail(HY_EINVAL, "xfmr: activations for a batch of %zu samples (%zu bytes "
                       "each, %zu member(s)) overflow the size range", B_cap, one,
                       hy_xfmr_members(m));
    return HY_OK;
}

/* An activation block of RC stacked rows (training or infer), its pointers set; NULL when out
 * of memory */
static hy_xfmr_acts *new_block(const hy_xfmr_config *c, size_t RC, bool infer) {
    plan p = make_plan(c, RC, infer);
    size_t L = p.nl;
    hy_xfmr_acts *a = hy_xcalloc(1, sizeof *a);
    if (!a) return NULL;
    a->block = hy_xmalloc_aligned((p.total_f + p.ints) * sizeof(float));
    if (!a->block) {
        hy_free(a);
        return NULL;
    }
    float *q = a->block;
#define TAKE(ptr, n) do { ptr = q; q += (n); } while (0)
    a->sD = p.sD; a->sQ = p.sQ; a->sA = p.sA; a->sH = p.sH; a->sR = p.sR;
    a->nx = p.nx;
    a->att_floats = p.att;
    TAKE(a->x, p.nx * p.sD);
    TAKE(a->ln1, L * p.sD);
    TAKE(a->ln1_mean, L * p.sR);
    TAKE(a->ln1_rstd, L * p.sR);
    TAKE(a->qkv, L * p.sQ);
    TAKE(a->att, p.att);
    TAKE(a->ao, L * p.sD);
    TAKE(a->xm, L * p.sD);
    TAKE(a->ln2, L * p.sD);
    TAKE(a->ln2_mean, L * p.sR);
    TAKE(a->ln2_rstd, L * p.sR);
    TAKE(a->h, L * p.sH);
    if (p.hg) TAKE(a->hg, p.hg);
    TAKE(a->cls, p.sB);
    TAKE(a->lnf, p.sB);
    TAKE(a->lnf_mean, (RC + 15) / 16 * 16);
    TAKE(a->lnf_rstd, (RC + 15) / 16 * 16);
    TAKE(a->emb, p.emb);
    if (p.patches) TAKE(a->patches, p.patches);
    if (p.embr) {
        TAKE(a->emb_mean, p.embr);
        TAKE(a->emb_rstd, p.embr);
    }
    if (p.pool) {
        TAKE(a->pool, p.pool);
        TAKE(a->pool_in, p.pool);
    }
#undef TAKE
    a->ids = (int32_t *)q;
    if (bert_embed(c)) a->tids = a->ids + p.nid;
    a->kvalid = a->ids + p.nid * (bert_embed(c) ? 2 : 1);
    HY_ASSERT((size_t)(q - a->block) == p.total_f);
    return a;
}

/* an extension's scratch, for the larger of the two blocks */
static hy_status ext_alloc(hy_xfmr *m) {
    if (!m->ext) return HY_OK;
    size_t B = m->B_cap > m->B_infer ? m->B_cap : m->B_infer;
    return m->ext->ops->alloc(m, B * hy_xfmr_members(m) * m->T);
}

hy_status hy_xfmr_alloc_acts(hy_xfmr *m, size_t B_cap) {
    free_acts(m);
    HY_TRY(check_cap(m, B_cap));
    const hy_xfmr_config *c = &m->cfg;
    /* an extended model's activations hold its M * B_cap stacked member rows */
    size_t RC = B_cap * hy_xfmr_members(m);
    if (!(m->acts = new_block(c, RC, false))) return HY_ENOMEM;
    m->B_cap = B_cap;
    hy_status st = hy_arena_init(&m->scratch, scratch_bytes(c, RC));
    if (st == HY_OK) st = ext_alloc(m);
    if (st != HY_OK) free_acts(m);
    return st;
}

hy_status hy_xfmr_alloc_infer(hy_xfmr *m, size_t B_cap) {
    free_infer(m);
    HY_TRY(check_cap(m, B_cap));
    if (!(m->infer_acts = new_block(&m->cfg, B_cap * hy_xfmr_members(m), true)))
        return HY_ENOMEM;
    m->B_infer = B_cap;
    hy_status st = ext_alloc(m);
    if (st != HY_OK) {
        free_infer(m);
        free_acts(m);   /* the extension's scratch is gone */
    }
    return st;
}

hy_status hy_xfmr_ensure_infer(hy_xfmr *m, size_t B) {
    if ((m->acts && m->B_cap >= B) || (m->infer_acts && m->B_infer >= B)) return HY_OK;
    free_acts(m);   /* a training block too small for B: its GBs go back (training steps
                     * allocate it again: hy_train_ensure_acts) */
    return hy_xfmr_alloc_infer(m, B);
}

/* ===== forward ===== */

/* p[0, n) = 0 (backward temporaries), timed as a copy */
static void zero(float *p, size_t n) { HY_PROF(HY_PROF_COPY, memset(p, 0, n * sizeof *p)); }

hy_status hy_xfmr_check_inputs(const hy_xfmr_config *c, const hy_batch *in, size_t B,
                               const char *who) {
    if (c->kind == HY_XFMR_VIT) {
        if (!in->images) return hy_fail(HY_EINVAL, "%s: vit batch without images", who);
        return HY_OK;
    }
    if (!in->ids || !in->lengths)
        return hy_fail(HY_EINVAL, "%s: text batch without ids/lengths", who);
    if (in->len == 0 || in->len > c->max_len)
        return hy_fail(HY_EINVAL, "%s: text batch length %zu out of range [1, %zu] (max_len)",
                       who, in->len, c->max_len);
    /* text_embed bert: [CLS] is a token of the ids, so every row has at least one */
    int32_t lo = bert_embed(c) ? 1 : 0;
    size_t ntypes = c->type_vocab ? c->type_vocab : 1;
    for (size_t b = 0; b < B; b++) {
        int32_t n = in->lengths[b];
        if (n < lo || (size_t)n > in->len)
            return hy_fail(HY_EINVAL, "%s: length %d of row %zu out of range [%d, %zu]", who,
                           (int)n, b + 1, (int)lo, in->len);
        for (size_t t = 0; bert_embed(c) && in->type_ids && t < in->len; t++) {
            int32_t ty = in->type_ids[b * in->len + t];
            if (ty < 0 || (size_t)ty >= ntypes)
                return hy_fail(HY_EINVAL, "%s: token type %d out of range [0, %zu) (row %zu, "
                               "position %zu; type_vocab %zu)", who, (int)ty, ntypes, b + 1,
                               t + 1, c->type_vocab);
        }
        for (size_t t = 0; t < in->len; t++) {
            int32_t id = in->ids[b * in->len + t];
            if (id < 0 || (size_t)id >= c->vocab_size)
                return hy_fail(HY_EINVAL, "%s: token id %d out of range [0, %zu) (row %zu, "
                               "position %zu)", who, (int)id, c->vocab_size, b + 1, t + 1);
        }
    }
    return HY_OK;
}

/* Checks a batch of B samples and picks the block the forward runs in (*a): the training block
 * when it keeps the activations for backward, else the inference block when it holds B, else
 * the training block */
static hy_status check_batch(const hy_xfmr *m, const hy_batch *in, size_t B, bool keep,
                             hy_xfmr_acts **a) {
    bool inf = !keep && m->infer_acts;
    if (!m->acts && !inf) {
        if (m->infer_acts)
            return hy_fail(HY_EINVAL, "xfmr: hy_xfmr_forward needs the training activations "
                           "(call hy_xfmr_alloc_acts; the model has only hy_xfmr_alloc_infer's)");
        return hy_fail(HY_EINVAL, "xfmr: no activations allocated (call hy_xfmr_alloc_acts)");
    }
    size_t cap = m->acts ? m->B_cap : 0;
    if (inf && m->B_infer > cap) cap = m->B_infer;
    if (B == 0 || B > cap)
        return hy_fail(HY_EINVAL, "xfmr: batch size %zu out of range [1, %zu] (the activation "
                       "capacity)", B, cap);
    HY_TRY(hy_xfmr_check_inputs(&m->cfg, in, B, "xfmr"));
    *a = inf && B <= m->B_infer ? m->infer_acts : m->acts;
    return HY_OK;
}

/* x slot s (0 <= s <= L) of block a: slot L, the last layer's output, is a's last one */
static float *x_at(const hy_xfmr_acts *a, size_t s, size_t L) {
    return a->x + (s == L ? a->nx - 1 : s) * a->sD;
}

/* The block linears: the plain kernels, or an extension's over its stacked member rows. */
static void lin_fwd(hy_xfmr *m, size_t l, hy_xfmr_site s, float *out, const float *in,
                    const float *w, const float *b, size_t N, size_t Din, size_t Dout) {
    if (m->ext) m->ext->ops->linear_forward(m, l, s, out, in, w, b, NULL, N, Din, Dout);
    else hy_linear_forward(out, in, w, b, N, Din, Dout);
}

static void lin_fwd_res(hy_xfmr *m, size_t l, hy_xfmr_site s, float *out, const float *in,
                        const float *w, const float *b, const float *res, size_t N, size_t Din,
                        size_t Dout) {
    if (m->ext) m->ext->ops->linear_forward(m, l, s, out, in, w, b, res, N, Din, Dout);
    else hy_linear_forward_res(out, in, w, b, res, N, Din, Dout);
}

static void lin_bwd(hy_xfmr *m, size_t l, hy_xfmr_site s, float *din, float *dw, float *db,
                    const float *dout, const float *in, const float *w, size_t N, size_t Din,
                    size_t Dout) {
    if (m->ext) m->ext->ops->linear_backward(m, l, s, din, dw, db, dout, in, w, N, Din, Dout);
    else hy_linear_backward_set(din, dw, db, dout, in, w, N, Din, Dout);
}

/* the linear at site s of layer l backward into dln (its input, the LayerNorm's output), then
 * that LayerNorm's backward: dx += LN backward(dln), its weight grads into lw, lb. A single
 * model runs both in one region (hy_linear_backward_ln, bitwise the two calls) */
static void lin_bwd_ln(hy_xfmr *m, size_t l, hy_xfmr_site s, float *dx, float *lw, float *lb,
                       const float *x, const float *mean, const float *rstd, const float *ln_w,
                       float *dln, float *dw, float *db, const float *dout, const float *in,
                       const float *w, size_t N, size_t D, size_t Dout) {
    if (m->ext) {
        lin_bwd(m, l, s, dln, dw, db, dout, in, w, N, D, Dout);
        hy_layernorm_backward(dx, lw, lb, dln, x, mean, rstd, ln_w, N, D);
    } else {
        hy_linear_backward_ln(dx, lw, lb, x, mean, rstd, ln_w, dln, dw, db, dout, in, w, N, D,
                              Dout);
    }
}

/* dropout stream for one site of one forward */
static hy_rng site_rng(const hy_rng *fwd, size_t l, size_t k) {
    return hy_rng_split(fwd, (uint64_t)(l * 4 + k));
}

/* Activation slot of the residual stream entering layer l (out = 0: leaving it). Kept: slot l
 * (the input of layer l+1 is slot l+1). Not kept (inference): with both residual adds in place
 * (inplace) every layer works in slot 0 and the last one writes slot L; otherwise layer 0 reads
 * slot 0, the layers alternate between slots 1 and 2, and the last one writes slot L.
 * hy_xfmr_hidden reads slot L either way. */
static size_t x_slot(size_t l, size_t L, bool keep, bool inplace, bool out) {
    if (keep) return out ? l + 1 : l;
    if (out) return l + 1 == L ? L : inplace ? 0 : 1 + (l & 1);
    return l == 0 ? 0 : x_slot(l - 1, L, false, inplace, true);
}

/* threads in a small pass's team: the products' two column tiles (gemm.h) are its widest
 * kernels' parts */
#define TEAM_MAX 2

/* sh: this thread's part of a small pass's team (team.h); NULL: every kernel runs whole, with
 * its own threads. Each step below is one kernel, then (in a team) a barrier. */
typedef hy_team_part share;

static void step_layernorm(const share *sh, float *out, float *mean, float *rstd, const float *x,
                           const float *w, const float *b, size_t N, size_t D, float eps) {
    size_t lo = 0, hi = N;
    if (sh) hy_team_share(N, sh->part, sh->parts, &lo, &hi);
    hy_layernorm_forward(out + lo * D, mean + lo, rstd + lo, x + lo * D, w, b, hi - lo, D, eps);
    if (sh) hy_team_barrier(sh->team);
}

/* LayerNorm of x into out (mean, rstd), and the buffer the next product reads. In an inference
 * team of two (dup: nothing reads out's statistics later) each thread computes the whole
 * LayerNorm, the second into `spare` (another LayerNorm's buffers, free at that point of the
 * layer), and reads its own copy: the same rows, bitwise, and no barrier (about 1 us of work at
 * batch 1 against a barrier's 1-8 us on the 2-core VM). Otherwise the team shares the rows. */
static const float *layernorm_in(const share *sh, bool dup, float *out, float *mean,
                                 float *rstd, float *spare, float *spare_mean,
                                 float *spare_rstd, const float *x, const float *w,
                                 const float *b, size_t N, size_t D, float eps) {
    if (!(sh && dup && sh->parts == 2)) {
        step_layernorm(sh, out, mean, rstd, x, w, b, N, D, eps);
        return out;
    }
    bool own = sh->part == 0;
    float *o = own ? out : spare;
    hy_layernorm_forward(o, own ? mean : spare_mean, own ? rstd : spare_rstd, x, w, b, N, D,
                         eps);
    return o;
}

/* out = [res +] in W^T + b, gelu_out = GELU(out) when non-NULL, and then out = GELU'(out) when
 * keep_d (training: the backward reads the derivative, not the pre-activation): the model's
 * linear at site s of layer l (the extension's when m->ext) */
static void step_linear(const share *sh, hy_xfmr *m, size_t l, hy_xfmr_site s, float *out,
                        float *gelu_out, bool keep_d, const float *in, const float *w,
                        const float *b, const float *res, size_t N, size_t Din, size_t Dout) {
    HY_ASSERT(!keep_d || (gelu_out && gelu_out != out && !res));
    if (sh) {
        if (keep_d)
            hy_linear_gelu_d_forward_part(out, gelu_out, in, w, b, N, Din, Dout, sh->part,
                                          sh->parts);
        else
            hy_linear_forward_part(out, gelu_out, in, w, b, res, N, Din, Dout, sh->part,
                                   sh->parts);
        hy_team_barrier(sh->team);
    } else if (gelu_out && !m->ext) {
        if (keep_d) hy_linear_gelu_d_forward(out, gelu_out, in, w, b, N, Din, Dout);
        else hy_linear_gelu_forward(out, gelu_out, in, w, b, N, Din, Dout);
    } else {
        if (res) lin_fwd_res(m, l, s, out, in, w, b, res, N, Din, Dout);
        else lin_fwd(m, l, s, out, in, w, b, N, Din, Dout);
        if (gelu_out && keep_d) hy_gelu_d_forward(gelu_out, out, N * Dout);
        else if (gelu_out) hy_gelu_forward(gelu_out, out, N * Dout);
    }
}

static void step_attn(const share *sh, float *out, float *att, const float *qkv,
                      const float *gate, const int32_t *kvalid, size_t B, size_t T, size_t C,
                      size_t NH) {
    if (sh) {
        hy_attn_forward_part(out, att, qkv, gate, kvalid, B, T, C, NH, sh->part, sh->parts);
        hy_team_barrier(sh->team);
    } else {
        hy_attn_forward(out, att, qkv, gate, kvalid, B, T, C, NH);
    }
}

/* the transformer layers of forward: x_0 in slot 0 -> x_L in slot L (sh: see share) */
static void layers_fwd(hy_xfmr *m, size_t B, size_t T, bool keep, bool drop,
                       const hy_rng *fwd_rng, const share *sh) {
    const hy_xfmr_config *c = &m->cfg;
    hy_xfmr_acts *a = m->cur;
    size_t D = c->d_model, DM = c->d_mlp, NH = c->n_heads, L = c->depth;
    size_t R = hy_xfmr_members(m) * B, BT = R * T;
    const int32_t *kv = c->kind == HY_XFMR_VIT ? NULL : a->kvalid;
    float eps = hy_xfmr_ln_eps(c);
    HY_ASSERT(!sh || (!drop && !m->ext));
    /* a single model's whole kernels: the LayerNorm after a residual product runs in its
     * epilogue (hy_linear_forward_res_ln: the fresh tile's rows, in cache); ln1_done: layer
     * l's LN1 was so computed by layer l-1's fc2 */
    bool fuse_ln = !sh && !m->ext, ln1_done = false;
    /* inference of a single model without dropout: both residual adds in place over the
     * stream (x is not read again; an extension's linears write out beside res) */
    bool inplace = !keep && !m->ext && !drop;
    for (size_t l = 0; l < L; l++) {
        const hy_xfmr_block_tensors *w = &m->p.blk[l];
        /* slot s of the per-layer buffers: layer l's own when kept for backward, else the
         * first layer's, reused (one layer's working set, which stays in cache) */
        size_t s = keep ? l : 0;
        float *x = x_at(a, x_slot(l, L, keep, inplace, false), L);
        float *xo = x_at(a, x_slot(l, L, keep, inplace, true), L);
        float *ln1 = a->ln1 + s * a->sD, *qkv = a->qkv + s * a->sQ, *att = a->att + s * a->sA;
        float *ao = a->ao + s * a->sD, *ln2 = a->ln2 + s * a->sD;
        /* the attention block's residual: at inference over x in place (x is not read again:
         * one buffer's traffic instead of two), unless dropout's mask must see proj alone or
         * an extension's linears (which write out beside res) compute it */
        bool xm_in_x = !keep && !m->ext && !(drop && c->attn_dropout > 0.0f);
        float *xm = xm_in_x ? x : a->xm + s * a->sD;
        /* GELU's output: its own buffer when kept for backward, and h then holds GELU'(h)
         * (the backward's factor, from the forward's erf), else over h (in place: the fc1
         * tile is rewritten while in cache, and hg's ~9 MB at batch 256 are never touched) */
        float *h = a->h + s * a->sH, *hg = keep ? a->hg + s * a->sH : h;
        /* attention: xm = x + drop(proj(attn(LN1(x)))) */
        const float *ln1_in =
            ln1_done ? ln1
                     : layernorm_in(sh, !keep, ln1, a->ln1_mean + s * a->sR,
                                    a->ln1_rstd + s * a->sR, ln2, a->ln2_mean + s * a->sR,
                                    a->ln2_rstd + s * a->sR, x, w->norm1_w, w->norm1_b, BT, D,
                                    eps);
        bool ln2_done = false;
        /* a single model: the whole block row tile by row tile (hy_block_forward), at
         * inference with the Q/K/V rows in a thread's window of the (unused) probability
         * buffers, in training keeping what backward reads; dropout's masks row by row */
        if (fuse_ln) {
            bool nx = l + 1 < L;
            bool da = drop && c->attn_dropout > 0.0f, dm = drop && c->mlp_dropout > 0.0f;
            hy_rng r0, r1, r2;
            if (da) r0 = site_rng(fwd_rng, l, 0);
            if (dm) r1 = site_rng(fwd_rng, l, 1), r2 = site_rng(fwd_rng, l, 2);
            const hy_xfmr_block_tensors *wn = nx ? &m->p.blk[l + 1] : NULL;
            size_t sn = keep ? l + 1 : 0;   /* the next LN1's slot */
            hy_block blk = {R, T, D, NH, DM, ln1_in, w->qkv_w, w->qkv_b, m->gates + l * NH, kv,
                            qkv, ao, keep ? att : NULL, w->proj_w, w->proj_b, x, xm, ln2,
                            a->ln2_mean + s * a->sR, a->ln2_rstd + s * a->sR, w->norm2_w,
                            w->norm2_b, h, keep ? hg : NULL, w->fc1_w, w->fc1_b, w->fc2_w,
                            w->fc2_b, xo, nx ? a->ln1 + sn * a->sD : NULL,
                            nx ? a->ln1_mean + sn * a->sR : NULL,
                            nx ? a->ln1_rstd + sn * a->sR : NULL, nx ? wn->norm1_w : NULL,
                            nx ? wn->norm1_b : NULL, eps, da ? &r0 : NULL,
                            dm ? &r1 : NULL, dm ? &r2 : NULL, c->attn_dropout, c->mlp_dropout};
            if (hy_block_forward(&blk, a->att, a->att_floats)) {
                ln1_done = nx;
                continue;
            }
        }
        step_linear(sh, m, l, HY_XFMR_QKV, qkv, NULL, false, ln1_in, w->qkv_w, w->qkv_b, NULL, BT,
                    D, 3 * D);
        step_attn(sh, ao, keep ? att : NULL, qkv, m->gates + l * NH, kv, R, T, D, NH);
        if (drop && c->attn_dropout > 0.0f) {
            /* xm = proj(ao), then xm = x + xm * mask in one pass */
            hy_rng r = site_rng(fwd_rng, l, 0);
            lin_fwd(m, l, HY_XFMR_PROJ, xm, ao, w->proj_w, w->proj_b, BT, D, D);
            hy_dropout_apply(xm, xm, x, &r, BT, D, c->attn_dropout);
        } else if (fuse_ln) {
            hy_linear_forward_res_ln(xm, ln2, a->ln2_mean + s * a->sR, a->ln2_rstd + s * a->sR,
                                     ao, w->proj_w, w->proj_b, x, w->norm2_w, w->norm2_b,
                                     eps, BT, D, D);
            ln2_done = true;
        } else {
            step_linear(sh, m, l, HY_XFMR_PROJ, xm, NULL, false, ao, w->proj_w, w->proj_b, x, BT,
                        D, D);
        }
        /* MLP: xo = xm + drop(fc2(drop(GELU(fc1(LN2(xm)))))) */
        /* (an inference team's second LN2 goes into LN1's buffers: qkv has read them) */
        const float *ln2_in =
            ln2_done ? ln2
                     : layernorm_in(sh, !keep, ln2, a->ln2_mean + s * a->sR,
                                    a->ln2_rstd + s * a->sR, ln1, a->ln1_mean + s * a->sR,
                                    a->ln1_rstd + s * a->sR, xm, w->norm2_w, w->norm2_b, BT, D,
                                    eps);
        ln1_done = false;
        bool mlp_drop = drop && c->mlp_dropout > 0.0f;
        if (fuse_ln && !keep && !mlp_drop) {
            /* inference: fc1, GELU, fc2 (and the next LN1) row tile by row tile, each tile's
             * hidden rows in a thread's own tile of h, in cache (hy_mlp_infer; bitwise) */
            bool nx = l + 1 < L;
            const hy_xfmr_block_tensors *wn = nx ? &m->p.blk[l + 1] : NULL;
            hy_mlp_infer(xo, nx ? a->ln1 : NULL, nx ? a->ln1_mean : NULL,
                         nx ? a->ln1_rstd : NULL, nx ? wn->norm1_w : NULL,
                         nx ? wn->norm1_b : NULL, eps, h, ln2_in, w->fc1_w,
                         w->fc1_b, w->fc2_w, w->fc2_b, xm, BT, D, DM);
            ln1_done = nx;
            continue;
        }
        step_linear(sh, m, l, HY_XFMR_FC1, h, hg, keep, ln2_in, w->fc1_w, w->fc1_b, NULL, BT, D,
                    DM);
        if (mlp_drop) {
            hy_rng r1 = site_rng(fwd_rng, l, 1), r2 = site_rng(fwd_rng, l, 2);
            hy_dropout_apply(hg, hg, NULL, &r1, BT, DM, c->mlp_dropout);
            lin_fwd(m, l, HY_XFMR_FC2, xo, hg, w->fc2_w, w->fc2_b, BT, DM, D);
            hy_dropout_apply(xo, xo, xm, &r2, BT, D, c->mlp_dropout);
        } else if (fuse_ln && l + 1 < L) {
            /* and the next layer's LN1 into its buffers (slot 0 at inference: this layer's
             * LN1 has been read by qkv) */
            const hy_xfmr_block_tensors *wn = &m->p.blk[l + 1];
            size_t sn = keep ? l + 1 : 0;
            hy_linear_forward_res_ln(xo, a->ln1 + sn * a->sD, a->ln1_mean + sn * a->sR,
                                     a->ln1_rstd + sn * a->sR, hg, w->fc2_w, w->fc2_b, xm,
                                     wn->norm1_w, wn->norm1_b, eps, BT, DM, D);
            ln1_done = true;
        } else {
            step_linear(sh, m, l, HY_XFMR_FC2, xo, NULL, false, hg, w->fc2_w, w->fc2_b, xm, BT,
                        DM, D);
        }
    }
}

/* ===== backward steps of both block paths ===== */

/* Layer l's activations in their kept slots (training keeps every layer's; the plain block
 * path uses them at inference too); m1, r1, m2, r2: LN1's and LN2's mean and rstd. */
typedef struct {
    float *x, *ln1, *qkv, *att, *ao, *xm, *ln2, *h, *hg, *m1, *r1, *m2, *r2;
} layer_acts;

static layer_acts kept_layer(const hy_xfmr_acts *a, size_t l) {
    return (layer_acts){a->x + l * a->sD, a->ln1 + l * a->sD, a->qkv + l * a->sQ,
                        a->att + l * a->sA, a->ao + l * a->sD, a->xm + l * a->sD,
                        a->ln2 + l * a->sD, a->h + l * a->sH, a->hg + l * a->sH,
                        a->ln1_mean + l * a->sR, a->ln1_rstd + l * a->sR,
                        a->ln2_mean + l * a->sR, a->ln2_rstd + l * a->sR};
}

/* the key-padding lengths the attention reads: none for vit (every key valid) */
static const int32_t *key_lengths(const hy_xfmr *m) {
    return m->cfg.kind == HY_XFMR_VIT ? NULL : m->cur->kvalid;
}

/* The gradient a residual branch's output gets from d (N, D): d itself, or (on) d times
 * dropout site k's mask of layer l, drawn again from the last forward's stream, into tmp. */
static const float *branch_grad(const hy_xfmr *m, float *tmp, const float *d, size_t l,
                                size_t k, size_t N, size_t D, float p, bool on) {
    if (!on) return d;
    hy_rng r = site_rng(&m->last_drop_rng, l, k);
    hy_dropout_apply(tmp, d, NULL, &r, N, D, p);
    return tmp;
}

/* xo = res + drop(fc2(hg)), hg = drop(act(h)) (dm: with the MLP's dropout): from dsum = d xo
 * (BT, D), dhg (BT, DM) written = d act(h) (the activation's backward is the caller's); fc2's
 * weight grads set; dtmp (BT, D) scratch */
static void fc2_bwd(hy_xfmr *m, size_t l, float *dhg, float *dtmp, const float *dsum,
                    const float *hg, size_t BT, bool dm) {
    const hy_xfmr_config *c = &m->cfg;
    const hy_xfmr_block_tensors *w = &m->p.blk[l], *gw = &m->g.blk[l];
    size_t D = c->d_model, DM = c->d_mlp;
    const float *db = branch_grad(m, dtmp, dsum, l, 2, BT, D, c->mlp_dropout, dm);
    lin_bwd(m, l, HY_XFMR_FC2, dhg, gw->fc2_w, gw->fc2_b, db, hg, w->fc2_w, BT, DM, D);
    if (dm) {
        hy_rng r = site_rng(&m->last_drop_rng, l, 1);
        hy_dropout_apply(dhg, dhg, NULL, &r, BT, DM, c->mlp_dropout);
    }
}

/* xm = x + drop(proj(ao)), ao = attn(qkv) (da: with the attention's dropout), R rows of T
 * tokens: from dxm (R T, D), dqkv (R T, 3D) written; proj's weight grads set, the gates'
 * gradients added into m->dgates; dao, dtmp (R T, D) and part (R NH) scratch */
static void attn_bwd(hy_xfmr *m, size_t l, const layer_acts *s, float *dqkv, float *dao,
                     float *dtmp, float *part, const float *dxm, size_t R, size_t T, bool da) {
    const hy_xfmr_config *c = &m->cfg;
    const hy_xfmr_block_tensors *w = &m->p.blk[l], *gw = &m->g.blk[l];
    size_t D = c->d_model, NH = c->n_heads, BT = R * T;
    const float *db = branch_grad(m, dtmp, dxm, l, 0, BT, D, c->attn_dropout, da);
    lin_bwd(m, l, HY_XFMR_PROJ, dao, gw->proj_w, gw->proj_b, db, s->ao, w->proj_w, BT, D, D);
    hy_attn_backward(dqkv, m->dgates + l * NH, dao, s->qkv, s->att, m->gates + l * NH,
                     key_lengths(m), part, R, T, D, NH);
}

/* ===== the plain block path (hy_xfmr_plain_blocks: norm post, act gelu_tanh) ===== */

/* the MLP's activation: out (n) = act(x) (out must not be x: the backward reads x) */
static void act_forward(const hy_xfmr_config *c, float *out, const float *x, size_t n) {
    if (c->act == HY_ACT_GELU_TANH) hy_gelu_tanh_forward(out, x, n);
    else hy_gelu_forward(out, x, n);
}

/* dx (n) written = dout * act'(x); dx may alias dout */
static void act_backward_set(const hy_xfmr_config *c, float *dx, const float *dout,
                             const float *x, size_t n) {
    if (c->act == HY_ACT_GELU_TANH) hy_gelu_tanh_backward_set(dx, dout, x, n);
    else hy_gelu_backward_set(dx, dout, x, n);
}

/* out = res + drop(in W^T + b): the linear at site s of layer l, with dropout site k's mask of
 * the forward's stream when drop */
static void residual_branch(hy_xfmr *m, size_t l, hy_xfmr_site s, float *out, const float *in,
                            const float *w, const float *b, const float *res, size_t N,
                            size_t Din, size_t Dout, bool drop, const hy_rng *fwd, size_t k,
                            float p) {
    if (drop) {
        hy_rng r = site_rng(fwd, l, k);
        lin_fwd(m, l, s, out, in, w, b, N, Din, Dout);
        hy_dropout_apply(out, out, res, &r, N, Dout, p);
    } else {
        lin_fwd_res(m, l, s, out, in, w, b, res, N, Din, Dout);
    }
}

/* The blocks with the plain kernels one after another, every layer in its own slots when kept
 * for backward; at inference (keep false) every layer in the first slots, hg over h and the
 * residual stream in place (x_slot), no probabilities. With act = GELU or its tanh
 * approximation, h keeping fc1's output:
 *   pre:   ln1 = LN1(x);  xm = x + drop(proj(attn(qkv(ln1))));  ln2 = LN2(xm);  h = fc1(ln2);
 *          hg = drop(act(h));  xo = xm + drop(fc2(hg))
 *   post:  xm = x + drop(proj(attn(qkv(x))));  ln1 = LN1(xm);  h = fc1(ln1);
 *          hg = drop(act(h));  ln2 = ln1 + drop(fc2(hg)) (LN2's input);  xo = LN2(ln2) */
static void layers_fwd_plain(hy_xfmr *m, size_t B, size_t T, bool keep, bool drop,
                             const hy_rng *fwd_rng) {
    const hy_xfmr_config *c = &m->cfg;
    hy_xfmr_acts *a = m->cur;
    size_t D = c->d_model, DM = c->d_mlp, NH = c->n_heads, L = c->depth;
    size_t R = hy_xfmr_members(m) * B, BT = R * T;
    float eps = hy_xfmr_ln_eps(c);
    bool post = c->norm == HY_NORM_POST;
    bool da = drop && c->attn_dropout > 0.0f, dm = drop && c->mlp_dropout > 0.0f;
    for (size_t l = 0; l < L; l++) {
        const hy_xfmr_block_tensors *w = &m->p.blk[l];
        layer_acts s = kept_layer(a, keep ? l : 0);
        if (!keep) {
            s.x = x_at(a, x_slot(l, L, false, true, false), L);
            s.att = NULL;
            s.hg = s.h;
        }
        float *xo = x_at(a, x_slot(l, L, keep, true, true), L);
        if (!post) hy_layernorm_forward(s.ln1, s.m1, s.r1, s.x, w->norm1_w, w->norm1_b, BT, D, eps);
        lin_fwd(m, l, HY_XFMR_QKV, s.qkv, post ? s.x : s.ln1, w->qkv_w, w->qkv_b, BT, D, 3 * D);
        hy_attn_forward(s.ao, s.att, s.qkv, m->gates + l * NH, key_lengths(m), R, T, D, NH);
        residual_branch(m, l, HY_XFMR_PROJ, s.xm, s.ao, w->proj_w, w->proj_b, s.x, BT, D, D, da,
                        fwd_rng, 0, c->attn_dropout);
        if (post) hy_layernorm_forward(s.ln1, s.m1, s.r1, s.xm, w->norm1_w, w->norm1_b, BT, D, eps);
        else hy_layernorm_forward(s.ln2, s.m2, s.r2, s.xm, w->norm2_w, w->norm2_b, BT, D, eps);
        lin_fwd(m, l, HY_XFMR_FC1, s.h, post ? s.ln1 : s.ln2, w->fc1_w, w->fc1_b, BT, D, DM);
        act_forward(c, s.hg, s.h, BT * DM);
        if (dm) {
            hy_rng r = site_rng(fwd_rng, l, 1);
            hy_dropout_apply(s.hg, s.hg, NULL, &r, BT, DM, c->mlp_dropout);
        }
        residual_branch(m, l, HY_XFMR_FC2, post ? s.ln2 : xo, s.hg, w->fc2_w, w->fc2_b,
                        post ? s.ln1 : s.xm, BT, DM, D, dm, fwd_rng, 2, c->mlp_dropout);
        if (post) hy_layernorm_forward(xo, s.m2, s.r2, s.ln2, w->norm2_w, w->norm2_b, BT, D, eps);
    }
}

/* dst[0, n) += src[0, n) */
static void add_into(float *dst, const float *src, size_t n) {
    HY_PROF(HY_PROF_COPY, for (size_t i = 0; i < n; i++) dst[i] += src[i]);
}

/* The backward of layers_fwd_plain: dres (BT, D) holds dL/dx_L on entry and dL/dx_0 on exit;
 * dln, dao, dtmp (BT, D), dqkv (BT, 3D), dhg (BT, DM), part (R NH) are scratch */
static void layers_bwd_plain(hy_xfmr *m, float *dres, float *dln, float *dao, float *dtmp,
                             float *dqkv, float *dhg, float *part) {
    const hy_xfmr_config *c = &m->cfg;
    size_t D = c->d_model, DM = c->d_mlp, L = c->depth;
    size_t B = m->last_B, T = m->last_T, R = hy_xfmr_members(m) * B, BT = R * T;
    bool post = c->norm == HY_NORM_POST, drop = m->last_drop;
    bool da = drop && c->attn_dropout > 0.0f, dm = drop && c->mlp_dropout > 0.0f;
    for (size_t l = L; l-- > 0;) {
        const hy_xfmr_block_tensors *w = &m->p.blk[l], *gw = &m->g.blk[l];
        layer_acts s = kept_layer(m->acts, l);
        /* the gradient on the MLP branch's residual sum: dres (pre), LN2's backward (post) */
        float *dsum = dres;
        if (post) {
            zero(dln, BT * D);
            hy_layernorm_backward(dln, gw->norm2_w, gw->norm2_b, dres, s.ln2, s.m2, s.r2,
                                  w->norm2_w, BT, D);
            dsum = dln;
        }
        fc2_bwd(m, l, dhg, dtmp, dsum, s.hg, BT, dm);
        act_backward_set(c, dhg, dhg, s.h, BT * DM);
        lin_bwd(m, l, HY_XFMR_FC1, dtmp, gw->fc1_w, gw->fc1_b, dhg, post ? s.ln1 : s.ln2,
                w->fc1_w, BT, D, DM);
        if (post) {
            /* ln1 feeds the MLP and its residual: d ln1 = dln + dtmp; then LN1's backward
             * gives d xm into dres */
            add_into(dln, dtmp, BT * D);
            zero(dres, BT * D);
            hy_layernorm_backward(dres, gw->norm1_w, gw->norm1_b, dln, s.xm, s.m1, s.r1,
                                  w->norm1_w, BT, D);
        } else {
            hy_layernorm_backward(dres, gw->norm2_w, gw->norm2_b, dtmp, s.xm, s.m2, s.r2,
                                  w->norm2_w, BT, D);
        }
        attn_bwd(m, l, &s, dqkv, dao, dtmp, part, dres, R, T, da);
        lin_bwd(m, l, HY_XFMR_QKV, dln, gw->qkv_w, gw->qkv_b, dqkv, post ? s.x : s.ln1, w->qkv_w,
                BT, D, 3 * D);
        if (post) add_into(dres, dln, BT * D);
        else hy_layernorm_backward(dres, gw->norm1_w, gw->norm1_b, dln, s.x, s.m1, s.r1,
                                   w->norm1_w, BT, D);
    }
}

/* text_embed bert: emb (B, T, D) = tok_embed[ids] + type_embed[type_ids] + pos_embed[0..T)
 * (HF's order of the sums), x_0 = embed_norm(emb); every key up to lengths[b] valid */
static void bert_embed_forward(hy_xfmr *m, const hy_batch *in, size_t B, size_t T) {
    const hy_xfmr_config *c = &m->cfg;
    hy_xfmr_acts *a = m->cur;
    size_t D = c->d_model, N = B * T;
    memcpy(a->ids, in->ids, N * sizeof *a->ids);
    if (in->type_ids) memcpy(a->tids, in->type_ids, N * sizeof *a->tids);
    else memset(a->tids, 0, N * sizeof *a->tids);
    hy_bert_embed_forward(a->emb, a->ids, a->tids, m->p.tok_embed, m->p.type_embed,
                          m->p.pos_embed, N, T, D);
    hy_layernorm_forward(a->x, a->emb_mean, a->emb_rstd, a->emb, m->p.embed_norm_w,
                         m->p.embed_norm_b, N, D, hy_xfmr_ln_eps(c));
    for (size_t b = 0; b < B; b++) a->kvalid[b] = in->lengths[b];
}

/* its backward: dx0 (B, T, D) of the shared embedding; demb (B, T, D) scratch */
static void bert_embed_backward(hy_xfmr *m, const float *dx0, float *demb, size_t B, size_t T) {
    const hy_xfmr_config *c = &m->cfg;
    hy_xfmr_acts *a = m->acts;
    size_t D = c->d_model, N = B * T;
    zero(demb, N * D);
    hy_layernorm_backward(demb, m->g.embed_norm_w, m->g.embed_norm_b, dx0, a->emb, a->emb_mean,
                          a->emb_rstd, m->p.embed_norm_w, N, D);
    hy_tokembed_backward(m->g.tok_embed, demb, a->ids, N, D);
    if (m->g.type_embed) hy_tokembed_backward(m->g.type_embed, demb, a->tids, N, D);
    for (size_t r = 0; r < N; r++) add_into(m->g.pos_embed + (r % T) * D, demb + r * D, D);
}

static hy_status forward(hy_xfmr *m, const hy_batch *in, size_t B, float *logits, bool keep) {
    hy_xfmr_acts *a = NULL;
    HY_TRY(check_batch(m, in, B, keep, &a));
    m->cur = a;
    const hy_xfmr_config *c = &m->cfg;
    size_t D = c->d_model, DM = c->d_mlp, K = c->n_classes, L = c->depth;
    size_t T = c->kind == HY_XFMR_VIT ? m->T : bert_embed(c) ? in->len : 1 + in->len;
    size_t R = hy_xfmr_members(m) * B;   /* residual streams: an extension's member rows */
    size_t BT = R * T;
    bool drop = m->dropout_on;
    hy_rng fwd_rng;
    if (drop) fwd_rng = hy_rng_split(&m->drop_rng, m->drop_step++);

    /* embedding: emb (B, T-1, D), then x0 = [cls; emb] + pos (text_embed bert: see
     * bert_embed_forward) */
    if (bert_embed(c)) {
        bert_embed_forward(m, in, B, T);
    } else if (c->kind == HY_XFMR_VIT) {
        size_t F = c->channels * c->patch * c->patch;
        hy_patch_extract(a->patches, in->images, B, c->channels, c->image_size, c->patch);
        hy_linear_forward(a->emb, a->patches, m->p.patch_w, m->p.patch_b, B * (T - 1), F, D);
        for (size_t b = 0; b < B; b++) a->kvalid[b] = (int32_t)T;
    } else {
        memcpy(a->ids, in->ids, B * in->len * sizeof *a->ids);
        hy_tokembed_forward(a->emb, a->ids, m->p.tok_embed, B * (T - 1), D);
        for (size_t b = 0; b < B; b++) a->kvalid[b] = 1 + in->lengths[b];
    }
    if (!bert_embed(c))
        hy_embed_assemble_forward(a->x, a->emb, m->p.cls_token, m->p.pos_embed, B, T, D);
    for (size_t r = B; r < R; r += B) {   /* every member starts from the shared embedding */
        HY_PROF(HY_PROF_COPY, memcpy(a->x + r * T * D, a->x, B * T * D * sizeof(float)));
        memcpy(a->kvalid + r, a->kvalid, B * sizeof *a->kvalid);
    }
    /* a small pass (every product below HY_GEMM_PAR_MIN_WORK, which would otherwise run on one
     * thread) runs its layers in one team of up to TEAM_MAX threads (team.h) */
#ifdef _OPENMP
    int nth = omp_in_parallel() ? 1 : omp_get_max_threads();
#else
    int nth = 1;
#endif
    if (nth > TEAM_MAX) nth = TEAM_MAX;
    bool plain = hy_xfmr_plain_blocks(c);
    bool team = nth > 1 && !drop && !m->ext && !hy_prof_on && !plain &&
                BT * D * (DM > 3 * D ? DM : 3 * D) < HY_GEMM_PAR_MIN_WORK && hy_team_wanted();
    if (plain) {
        layers_fwd_plain(m, B, T, keep, drop, drop ? &fwd_rng : NULL);
    } else if (team) {
        hy_team tm;
        hy_team_init(&tm);
#pragma omp parallel num_threads(nth)
        {
            share sh = {&tm, (size_t)omp_get_thread_num(), (size_t)omp_get_num_threads()};
            hy_team_join(&tm, (unsigned)sh.parts);
            layers_fwd(m, B, T, keep, false, NULL, &sh);
        }
        hy_team_done(&tm);
    } else {
        layers_fwd(m, B, T, keep, drop, drop ? &fwd_rng : NULL, NULL);
    }

    /* head: logits = head(LN_f(x_L[:, 0])); norm post: no LN_f (lnf = cls); pooler tanh:
     * logits = head(drop(tanh(pooler(lnf)))) */
    const float *xl = x_at(a, L, L);
    HY_PROF(HY_PROF_COPY, for (size_t b = 0; b < R; b++)
                              memcpy(a->cls + b * D, xl + b * T * D, D * sizeof(float)));
    if (c->norm == HY_NORM_PRE)
        hy_layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, a->cls, m->p.norm_w, m->p.norm_b,
                             R, D, hy_xfmr_ln_eps(c));
    else
        HY_PROF(HY_PROF_COPY, memcpy(a->lnf, a->cls, R * D * sizeof(float)));
    const float *hin = a->lnf;
    if (c->pooler == HY_POOLER_TANH) {
        hy_pooler_forward(a->pool, a->lnf, m->p.pooler_w, m->p.pooler_b, R, D);
        hin = a->pool;
        if (drop && c->mlp_dropout > 0.0f) {   /* the site after the last layer's */
            hy_rng r = site_rng(&fwd_rng, L, 0);
            hy_dropout_apply(a->pool_in, a->pool, NULL, &r, R, D, c->mlp_dropout);
            hin = a->pool_in;
        }
    }
    if (m->ext) m->ext->ops->head_forward(m, logits, hin, R);
    else hy_linear_forward(logits, hin, m->p.head_w, m->p.head_b, B, D, K);
    m->last_B = B;
    m->last_T = T;
    m->have_fwd = true;
    m->last_kept = keep;
    m->last_drop = drop;
    if (drop) m->last_drop_rng = fwd_rng;
    return HY_OK;
}

hy_status hy_xfmr_forward(hy_xfmr *m, const hy_batch *in, size_t B, float *logits) {
    return forward(m, in, B, logits, true);
}

hy_status hy_xfmr_infer(hy_xfmr *m, const hy_batch *in, size_t B, float *logits) {
    if (!m->bf16) return forward(m, in, B, logits, false);
    const hy_bf16_set *prev = hy_bf16_use(m->bf16);
    hy_status st = forward(m, in, B, logits, false);
    hy_bf16_use(prev);
    return st;
}

/* ===== precision ===== */

/* the BF16 set of the block linears (and the vit patch embedding) of `members` models sharing
 * config c (see xfmr.h hy_xfmr_bf16_precision) */
static hy_status bf16_build(hy_bf16_set *s, const hy_xfmr_config *c, const float *params,
                            const hy_param *table, const size_t *slot_of, size_t members) {
    size_t S = hy_xfmr_n_slots(c), L = c->depth, per = 4 * L + 1, n = 0;
    static const hy_blk_slot lin[4] = {HY_BLK_QKVW, HY_BLK_PROJW, HY_BLK_FC1W, HY_BLK_FC2W};
    const float **w = hy_xmalloc(members * per * sizeof *w);
    size_t *rows = hy_xmalloc(members * per * sizeof *rows);
    size_t *cols = hy_xmalloc(members * per * sizeof *cols);
    hy_status st = HY_ENOMEM;
    memset(s, 0, sizeof *s);
    if (w && rows && cols) {
        for (size_t k = 0; k < members; k++)
            for (size_t i = 0; i < per; i++) {
                size_t slot;
                if (i < 4 * L) slot = hy_xfmr_slot(c, i / 4, lin[i % 4]);
                else if (c->kind == HY_XFMR_VIT) slot = HY_EMB_W;   /* the patch embedding */
                else continue;                                      /* a gather, not a linear */
                const hy_param *t = &table[slot_of ? slot_of[k * S + slot] : slot];
                w[n] = params + t->offset;
                rows[n] = (size_t)t->shape[0];
                cols[n++] = t->numel / (size_t)t->shape[0];
            }
        st = hy_bf16_set_build(s, w, rows, cols, n);
    }
    hy_free(w);
    hy_free(rows);
    hy_free(cols);
    return st;
}

hy_status hy_xfmr_bf16_precision(hy_bf16_set **owned, hy_precision want, const hy_xfmr_config *c,
                                 const float *params, const hy_param *table,
                                 const size_t *slot_of, size_t members, hy_precision *used) {
    hy_bf16_set *s = NULL;
    if (want == HY_PRECISION_BF16 && hy_bf16_available()) {
        if (!(s = hy_xcalloc(1, sizeof *s))) return HY_ENOMEM;
        hy_status st = bf16_build(s, c, params, table, slot_of, members);
        if (st != HY_OK) {
            hy_free(s);
            return st;
        }
    }
    if (*owned) hy_bf16_set_release(*owned);
    hy_free(*owned);
    *owned = s;
    if (used) *used = s ? HY_PRECISION_BF16 : HY_PRECISION_FP32;
    return HY_OK;
}

hy_status hy_xfmr_set_precision(hy_xfmr *m, hy_precision want, hy_precision *used) {
    return hy_xfmr_bf16_precision(&m->bf16, m->ext ? HY_PRECISION_FP32 : want, &m->cfg,
                                  m->params, m->table, NULL, 1, used);
}

/* ===== loss ===== */

const float *hy_xfmr_features(const hy_xfmr *m) {
    if (!m->have_fwd) return NULL;
    return m->cur->pool ? m->cur->pool : m->cur->lnf;
}

hy_status hy_xfmr_loss(const hy_xfmr *m, const float *logits, const int32_t *labels, size_t B,
                       float label_smoothing, double *loss, float *dlogits) {
    size_t K = m->cfg.n_classes;
    if (!(label_smoothing >= 0.0f && label_smoothing < 1.0f))
        return hy_fail(HY_EINVAL, "xfmr: label_smoothing must be in [0, 1) (got %g)",
                       (double)label_smoothing);
    for (size_t b = 0; b < B; b++)
        if (labels[b] < 0 || (size_t)labels[b] >= K)
            return hy_fail(HY_EINVAL, "xfmr: label %d of row %zu out of range [0, %zu)",
                           (int)labels[b], b + 1, K);
    /* an extended model: the mean over its M members of each member's mean cross-entropy on the
     * same B labels (logits [M*B, K], member-major) */
    size_t M = hy_xfmr_members(m);
    float *probs = hy_xmalloc(M * B * K * sizeof *probs);
    if (!probs) return HY_ENOMEM;
    if (dlogits) memset(dlogits, 0, M * B * K * sizeof *dlogits);
    double sum = 0;
    for (size_t mm = 0; mm < M; mm++) {
        double lm = 0;
        size_t o = mm * B * K;
        hy_ce_forward(&lm, probs + o, logits + o, labels, B, K, label_smoothing);
        sum += lm;
        if (dlogits)
            hy_ce_backward(dlogits + o, 1.0 / (double)M, probs + o, labels, B, K,
                           label_smoothing);
    }
    *loss = M == 1 ? sum : sum / (double)M;
    hy_free(probs);
    return HY_OK;
}

/* ===== backward ===== */

hy_status hy_xfmr_backward(hy_xfmr *m, const float *dlogits) {
    return hy_xfmr_backward_hidden(m, dlogits, NULL);
}

const float *hy_xfmr_hidden(const hy_xfmr *m) {
    if (!m->have_fwd) return NULL;
    return x_at(m->cur, m->cfg.depth, m->cfg.depth);
}

hy_status hy_xfmr_backward_hidden(hy_xfmr *m, const float *dlogits, const float *dhidden) {
    if (!m->have_fwd)
        return hy_fail(HY_EINVAL, "xfmr: backward without a forward (run hy_xfmr_forward first)");
    if (!m->last_kept)
        return hy_fail(HY_EINVAL, "xfmr: backward after hy_xfmr_infer, which keeps no "
                       "activations (run hy_xfmr_forward first)");
    const hy_xfmr_config *c = &m->cfg;
    hy_xfmr_acts *a = m->acts;
    size_t D = c->d_model, DM = c->d_mlp, NH = c->n_heads, K = c->n_classes, L = c->depth;
    size_t B = m->last_B, T = m->last_T, R = hy_xfmr_members(m) * B, BT = R * T;
    bool drop = m->last_drop;
    hy_arena *ar = &m->scratch;
    hy_arena_reset(ar);
    float *dres, *dln, *dao, *dtmp, *dqkv, *dhg, *dlnf, *dcls, *demb, *part, *dpool = NULL;
    size_t TE = bert_embed(c) ? T : T - 1;   /* embedded tokens per sample */
    HY_TRY(hy_arena_floats(ar, BT * D, &dres));
    HY_TRY(hy_arena_floats(ar, BT * D, &dln));
    HY_TRY(hy_arena_floats(ar, BT * D, &dao));
    HY_TRY(hy_arena_floats(ar, BT * D, &dtmp));
    HY_TRY(hy_arena_floats(ar, BT * 3 * D, &dqkv));
    HY_TRY(hy_arena_floats(ar, BT * DM, &dhg));
    HY_TRY(hy_arena_floats(ar, R * D, &dlnf));
    HY_TRY(hy_arena_floats(ar, R * D, &dcls));
    HY_TRY(hy_arena_floats(ar, B * TE * D, &demb));
    HY_TRY(hy_arena_floats(ar, R * NH, &part));
    if (c->pooler == HY_POOLER_TANH) HY_TRY(hy_arena_floats(ar, R * D, &dpool));

    /* dres = dL/dx_L: dhidden (or 0), plus the classifier head's gradient on the CLS rows */
    if (dhidden) HY_PROF(HY_PROF_COPY, memcpy(dres, dhidden, BT * D * sizeof(float)));
    else zero(dres, BT * D);
    if (dlogits) {
        /* head: logits = lnf W^T + b; lnf = LN_f(cls) (pooler tanh: the head's input is
         * drop(pool), pool = tanh(pooler(lnf)); norm post: lnf = cls) */
        zero(dlnf, R * D);
        zero(dcls, R * D);
        float *dhin = dlnf;
        const float *hin = a->lnf;
        if (dpool) {
            zero(dpool, R * D);
            dhin = dpool;
            hin = drop && c->mlp_dropout > 0.0f ? a->pool_in : a->pool;
        }
        if (m->ext) m->ext->ops->head_backward(m, dhin, dlogits, hin, R);
        else hy_linear_backward(dhin, m->g.head_w, m->g.head_b, dlogits, hin, m->p.head_w, B,
                                D, K);
        if (dpool) {
            if (drop && c->mlp_dropout > 0.0f) {
                hy_rng r = site_rng(&m->last_drop_rng, L, 0);
                hy_dropout_apply(dpool, dpool, NULL, &r, R, D, c->mlp_dropout);
            }
            for (size_t i = 0; i < R * D; i++) dpool[i] *= 1.0f - a->pool[i] * a->pool[i];
            hy_linear_backward(dlnf, m->g.pooler_w, m->g.pooler_b, dpool, a->lnf, m->p.pooler_w,
                               R, D, D);
        }
        if (c->norm == HY_NORM_PRE)
            hy_layernorm_backward(dcls, m->g.norm_w, m->g.norm_b, dlnf, a->cls, a->lnf_mean,
                                  a->lnf_rstd, m->p.norm_w, R, D);
        else
            add_into(dcls, dlnf, R * D);
        /* cls = x_L[:, 0]: only the CLS rows get this gradient (0 + g is exact: without
         * dhidden the result is bitwise the plain copy) */
        HY_PROF(HY_PROF_COPY, for (size_t b = 0; b < R; b++) {
            float *dr = dres + b * T * D;
            const float *dc = dcls + b * D;
            for (size_t i = 0; i < D; i++) dr[i] += dc[i];
        });
    }
    /* the plain block path has its own backward; the loop below is the fused kernels' */
    bool plain = hy_xfmr_plain_blocks(c);
    if (plain) layers_bwd_plain(m, dres, dln, dao, dtmp, dqkv, dhg, part);
    bool da = drop && c->attn_dropout > 0.0f, dm = drop && c->mlp_dropout > 0.0f;
    for (size_t l = plain ? 0 : L; l-- > 0;) {
        const hy_xfmr_block_tensors *w = &m->p.blk[l], *gw = &m->g.blk[l];
        layer_acts s = kept_layer(a, l);
        /* xo = xm + drop(fc2(hg)), hg = drop(GELU(h)): dres is dxo; dh = d GELU(h) GELU'(h), in
         * place in dhg (h holds GELU'(h), stored by the forward); the masks are drawn again
         * from the forward's streams. For a single model without dropout the product is fused
         * into the fc2 backward GEMM. */
        if (dm || m->ext) {
            fc2_bwd(m, l, dhg, dtmp, dres, s.hg, BT, dm);
            hy_gelu_backward_d_set(dhg, dhg, s.h, BT * DM);
        } else {
            hy_linear_backward_dgelu_set(dhg, gw->fc2_w, gw->fc2_b, dres, s.hg, w->fc2_w, s.h,
                                         BT, DM, D);
        }
        /* ln2 = LN2(xm); dres += LN2 backward, so dres becomes dxm */
        lin_bwd_ln(m, l, HY_XFMR_FC1, dres, gw->norm2_w, gw->norm2_b, s.xm, s.m2, s.r2,
                   w->norm2_w, dln, gw->fc1_w, gw->fc1_b, dhg, s.ln2, w->fc1_w, BT, D, DM);
        attn_bwd(m, l, &s, dqkv, dao, dtmp, part, dres, R, T, da);
        lin_bwd_ln(m, l, HY_XFMR_QKV, dres, gw->norm1_w, gw->norm1_b, s.x, s.m1, s.r1,
                   w->norm1_w, dln, gw->qkv_w, gw->qkv_b, dqkv, s.ln1, w->qkv_w, BT, D, 3 * D);
    }

    /* the members' streams all start from the shared embedding: their gradients add up */
    for (size_t r = B; r < R; r += B) {
        float *d0 = dres;
        const float *dr = dres + r * T * D;
        for (size_t i = 0; i < B * T * D; i++) d0[i] += dr[i];
    }
    /* embedding: x0 = [cls; emb] + pos (text_embed bert: bert_embed_backward) */
    if (bert_embed(c)) {
        bert_embed_backward(m, dres, demb, B, T);
    } else {
        zero(demb, B * (T - 1) * D);
        hy_embed_assemble_backward(demb, m->g.cls_token, m->g.pos_embed, dres, B, T, D);
    }
    if (c->kind == HY_XFMR_VIT) {
        size_t F = c->channels * c->patch * c->patch;
        hy_linear_backward(NULL, m->g.patch_w, m->g.patch_b, demb, a->patches, m->p.patch_w,
                           B * (T - 1), F, D);
    } else if (!bert_embed(c)) {
        hy_tokembed_backward(m->g.tok_embed, demb, a->ids, B * (T - 1), D);
    }
    /* an extension's frozen backbone gets exactly zero gradient */
    if (m->ext && m->ext->frozen_floats > 0) {
        memset(m->grads, 0, m->ext->frozen_floats * sizeof(float));
        memset(m->dgates, 0, c->depth * NH * sizeof(float));
    }
    return HY_OK;
}

void hy_xfmr_zero_grad(hy_xfmr *m) {
    uint64_t t0 = hy_prof_t0();
    memset(m->grads, 0, m->n_params * sizeof(float));
    memset(m->dgates, 0, m->cfg.depth * m->cfg.n_heads * sizeof(float));
    hy_prof_add(HY_PROF_OPTIM, t0, 0);
}

/* ===== gates, dropout, lookup ===== */

void hy_xfmr_set_gate(hy_xfmr *m, size_t layer, size_t head, float g) {
    HY_ASSERT(layer < m->cfg.depth && head < m->cfg.n_heads);
    m->gates[layer * m->cfg.n_heads + head] = g;
}

float hy_xfmr_gate(const hy_xfmr *m, size_t layer, size_t head) {
    HY_ASSERT(layer < m->cfg.depth && head < m->cfg.n_heads);
    return m->gates[layer * m->cfg.n_heads + head];
}

void hy_xfmr_set_gates(hy_xfmr *m, const float *gates) {
    memcpy(m->gates, gates, m->cfg.depth * m->cfg.n_heads * sizeof(float));
}

void hy_xfmr_set_dropout(hy_xfmr *m, bool on, uint64_t seed) {
    m->dropout_on = on;
    hy_rng_seed(&m->drop_rng, seed);
    m->drop_step = 0;
}

int64_t hy_xfmr_param_index(const hy_xfmr *m, const char *name) {
    for (size_t i = 0; i < m->n_tensors; i++)
        if (strcmp(m->table[i].name, name) == 0) return (int64_t)i;
    return -1;
}

hy_status hy_xfmr_param(const hy_xfmr *m, const char *name, hy_param_view *out) {
    int64_t i = hy_xfmr_param_index(m, name);
    if (i < 0) return hy_fail(HY_EINVAL, "xfmr: no parameter named '%s'", name);
    out->info = &m->table[i];
    out->data = m->params + m->table[i].offset;
    out->grad = m->grads + m->table[i].offset;
    return HY_OK;
}
