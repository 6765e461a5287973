/* l_bench.c: the per-kernel time breakdown that `make bench` prints (experiments/bench.lua).
 *   core.bench_kernels(model_or_cfg, B [, reps [, mode]]) -> rows
 * model_or_cfg: a hydra.Model (its m:config() is used) or a model section table (kind,
 * image_size, channels, patch | vocab_size, max_len, d_model, n_heads, depth, d_mlp, n_classes,
 * attn_dropout, mlp_dropout). B: batch size in [1, 65536]. reps: samples per kernel in
 * [1, 1000] (default 5). mode: "train" (default) = every kernel one optimisation step at batch B
 * runs (forward with its dropout when the model has any, softmax-CE, zero_grad, backward,
 * grad-norm clip, AdamW over the whole parameter block), in the order the step runs them;
 * "infer" = one inference forward at batch B (dropout off) and the softmax of m:predict.
 * Each kernel is called through its public core function (gemm.h, attn.h, layers.h, optim.h,
 * xfmr.h, train.h) with the model's real shapes, on buffers allocated once (64-byte aligned,
 * seeded data; weights of block 1 of a model built with hy_xfmr_init(1); the forward kernels run
 * first, so the backward kernels read real forward outputs; clip and AdamW get a full seeded
 * gradient block). After one warm-up pass, reps rounds each run every kernel once in step order
 * (interleaved, so load bursts on a shared machine spread over all kernels); a sample is
 * back-to-back calls of one kernel lasting >= 0.5 ms (one call for the large ones) divided by
 * their count. A row's ms is its kernel's median sample times the calls per step (e.g. depth).
 * rows: array in step order of { name=, group=, calls=, ms= (per step), ms_call= (ms / calls),
 * flops= (per step: 2*M*N*K over the row's GEMMs; 0 for other kernels) }.
 * Caveats (what the caller prints beside the measured step): small kernels repeat back to back
 * on warm caches, unlike in a real step; not covered are the residual adds, memsets of backward
 * temporaries, the dropout-hidden mask product, the loss's own dlogits loop (timed as
 * hy_ce_backward, the same arithmetic), batch assembly by the loader and copies. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "bind.h"
#include "gemm.h"
#include "layers.h"
#include "optim.h"
#include "rng.h"
#include "train.h"
#include "xfmr.h"

#define L_BENCH "hydra.BenchKernels"
#define SAMPLE_MIN_S 5e-4   /* one timing sample lasts at least this long */
#define INNER_MAX 1000      /* most back-to-back calls in one sample */

/* the linear layers, by kind */
enum { LIN_PEMB, LIN_QKV, LIN_PROJ, LIN_FC1, LIN_FC2, LIN_HEAD, N_LIN };

typedef struct lin {
    const float *in, *w, *b;   /* forward inputs */
    float *out;                /* forward output */
    const float *dout;         /* backward input */
    float *din, *dw, *db;      /* backward outputs (din unused for the patch embedding) */
    size_t N, Din, Dout;
} lin;

/* kernel operations; arg selects the linear kind or the shape variant */
typedef enum {
    OP_PATCH, OP_TOKEMB_F, OP_ASSEMBLE_F, OP_LN_F, OP_LIN_F, OP_ATTN_F, OP_GELU_F,
    OP_DROP_MASK, OP_DROP_F, OP_CE_F, OP_SOFTMAX, OP_CE_B, OP_ZERO_GRAD, OP_LIN_BX, OP_LIN_BW,
    OP_LN_B, OP_GELU_B, OP_DROP_B, OP_ATTN_B, OP_ASSEMBLE_B, OP_TOKEMB_B, OP_CLIP, OP_ADAMW
} op_kind;

enum { SHAPE_BLOCK = 0, SHAPE_FINAL = 1 };   /* layernorm: (B*T, D) rows or the (B, D) head */
enum { SHAPE_D = 0, SHAPE_H = 1 };           /* dropout: (B*T, D) or (B*T, DM) */

typedef struct bstate {
    hy_xfmr m;                  /* owned: shapes, params/grads, param table, gates */
    hy_adamw opt;               /* owned */
    float *block;               /* owned: every activation buffer below */
    int32_t *ints;              /* owned: labels, ids, kvalid */
    float *grad0;               /* owned: seeded gradients restored before clip and AdamW */
    size_t B, T, D, DM, NH, K, F;
    float *images, *patches, *emb, *demb, *x, *ln, *mean, *rstd, *qkv, *att, *ao, *xm, *h, *hg;
    float *xo, *cls, *lnf, *fmean, *frstd, *logits, *probs, *dlogits, *dres, *dln, *dao, *dqkv;
    float *dh, *dhg, *dlnf, *dcls, *dtmp, *part, *mask_d, *mask_h;
    int32_t *labels, *ids, *kvalid;
    lin lin[N_LIN];
    hy_param_view n1w, n1b, nfw, nfb, cls_tok, pos, tok;
    hy_rng drop_rng;
    float drop_p;
    double clip_max;            /* max_norm passed to hy_grad_clip: just below the last norm */
    double loss;
} bstate;

static void bstate_release(bstate *s) {
    hy_xfmr_release(&s->m);
    hy_adamw_release(&s->opt);
    hy_free(s->block);
    hy_free(s->ints);
    hy_free(s->grad0);
    s->block = NULL;
    s->ints = NULL;
    s->grad0 = NULL;
}

static int l_bench_gc(lua_State *L) {
    bstate *s = luaL_checkudata(L, 1, L_BENCH);
    bstate_release(s);
    return 0;
}

/* ===== configuration ===== */

static size_t cfg_size(lua_State *L, int t, const char *key) {
    lua_getfield(L, t, key);
    int ok = 0;
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    if (!ok || v < 0)
        luaL_error(L, "model: %s must be a non-negative integer (got %s)", key,
                   luaL_typename(L, -1));
    lua_pop(L, 1);
    return (size_t)v;
}

static float cfg_rate(lua_State *L, int t, const char *key) {
    lua_getfield(L, t, key);
    double v = 0;
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TNUMBER)
            luaL_error(L, "model: %s must be a number (got %s)", key, luaL_typename(L, -1));
        v = lua_tonumber(L, -1);
    }
    lua_pop(L, 1);
    return (float)v;
}

/* the model section table at t into c */
static void read_config(lua_State *L, int t, hy_xfmr_config *c) {
    memset(c, 0, sizeof *c);
    lua_getfield(L, t, "kind");
    const char *kind = lua_tostring(L, -1);
    if (kind && strcmp(kind, "vit") == 0) c->kind = HY_XFMR_VIT;
    else if (kind && strcmp(kind, "text") == 0) c->kind = HY_XFMR_TEXT;
    else luaL_error(L, "model: kind must be 'vit' or 'text' (got %s)",
                    kind ? lua_pushfstring(L, "'%s'", kind) : luaL_typename(L, -1));
    lua_pop(L, 1);
    if (c->kind == HY_XFMR_VIT) {
        c->image_size = cfg_size(L, t, "image_size");
        c->channels = cfg_size(L, t, "channels");
        c->patch = cfg_size(L, t, "patch");
    } else {
        c->vocab_size = cfg_size(L, t, "vocab_size");
        c->max_len = cfg_size(L, t, "max_len");
    }
    c->d_model = cfg_size(L, t, "d_model");
    c->n_heads = cfg_size(L, t, "n_heads");
    c->depth = cfg_size(L, t, "depth");
    c->d_mlp = cfg_size(L, t, "d_mlp");
    c->n_classes = cfg_size(L, t, "n_classes");
    c->attn_dropout = cfg_rate(L, t, "attn_dropout");
    c->mlp_dropout = cfg_rate(L, t, "mlp_dropout");
}

/* ===== buffers ===== */

static size_t pad16(size_t n) { return (n + 15) / 16 * 16; }

static void fill_normal(float *p, size_t n, hy_rng *r, double scale) {
    for (size_t i = 0; i < n; i++) p[i] = (float)(hy_rng_normal(r) * scale);
}

static hy_param_view param(const bstate *s, const char *name) {
    hy_param_view v;
    hy_status st = hy_xfmr_param(&s->m, name, &v);
    HY_ASSERT(st == HY_OK);
    (void)st;
    return v;
}

/* Builds the model, the optimizer and every buffer for batch B; fills them with seeded data. */
static hy_status bstate_setup(bstate *s, const hy_xfmr_config *c, size_t B) {
    HY_TRY(hy_xfmr_new(&s->m, c));
    hy_xfmr_init(&s->m, 1);
    const hy_xfmr *m = &s->m;
    size_t T = m->T, D = c->d_model, DM = c->d_mlp, NH = c->n_heads, K = c->n_classes;
    size_t F = c->kind == HY_XFMR_VIT ? c->channels * c->patch * c->patch : 0;
    size_t N = B * T, NE = B * (T - 1);
    s->B = B; s->T = T; s->D = D; s->DM = DM; s->NH = NH; s->K = K; s->F = F;

    /* AdamW over the whole block, decay segments from the param table (as the trainer does) */
    hy_optim_segment *seg = hy_xmalloc(m->n_tensors * sizeof *seg);
    if (!seg) return HY_ENOMEM;
    for (size_t i = 0; i < m->n_tensors; i++) {
        seg[i].offset = m->table[i].offset;
        seg[i].n = m->table[i].numel;
        seg[i].decay = m->table[i].decay;
    }
    hy_adamw_config oc = {1e-3, 0.9, 0.999, 1e-8, 0.05};
    hy_status st = hy_adamw_new(&s->opt, &oc, m->n_params, seg, m->n_tensors);
    hy_free(seg);
    HY_TRY(st);

    struct { float **p; size_t n; } bufs[] = {
        {&s->images, c->kind == HY_XFMR_VIT ? B * c->channels * c->image_size * c->image_size : 0},
        {&s->patches, NE * F}, {&s->emb, NE * D}, {&s->demb, NE * D}, {&s->x, N * D},
        {&s->ln, N * D}, {&s->mean, N}, {&s->rstd, N}, {&s->qkv, N * 3 * D},
        {&s->att, B * NH * T * T}, {&s->ao, N * D}, {&s->xm, N * D}, {&s->h, N * DM},
        {&s->hg, N * DM}, {&s->xo, N * D}, {&s->cls, B * D}, {&s->lnf, B * D}, {&s->fmean, B},
        {&s->frstd, B}, {&s->logits, B * K}, {&s->probs, B * K}, {&s->dlogits, B * K},
        {&s->dres, N * D}, {&s->dln, N * D}, {&s->dao, N * D}, {&s->dqkv, N * 3 * D},
        {&s->dh, N * DM}, {&s->dhg, N * DM}, {&s->dlnf, B * D}, {&s->dcls, B * D},
        {&s->dtmp, N * D}, {&s->part, B * NH}, {&s->mask_d, N * D}, {&s->mask_h, N * DM},
    };
    size_t nb = sizeof bufs / sizeof bufs[0], total = 0;
    for (size_t i = 0; i < nb; i++) total += pad16(bufs[i].n ? bufs[i].n : 1);
    s->block = hy_xmalloc_aligned(total * sizeof(float));
    s->ints = hy_xmalloc((2 * B + NE + 3) * sizeof(int32_t));
    s->grad0 = hy_xmalloc_aligned(m->n_params * sizeof(float));
    if (!s->block || !s->ints || !s->grad0) return HY_ENOMEM;
    float *q = s->block;
    for (size_t i = 0; i < nb; i++) {
        *bufs[i].p = q;
        q += pad16(bufs[i].n ? bufs[i].n : 1);
    }
    s->labels = s->ints;
    s->kvalid = s->ints + B;
    s->ids = s->ints + 2 * B;

    /* seeded data: activations ~ N(0, 1), incoming gradients ~ N(0, 1e-2) */
    hy_rng r;
    hy_rng_seed(&r, 20240601);
    float *all[] = {s->images, s->patches, s->emb, s->x, s->ln, s->qkv, s->ao, s->xm, s->h,
                    s->hg, s->xo, s->cls, s->lnf, s->logits};
    size_t alln[] = {bufs[0].n, NE * F, NE * D, N * D, N * D, N * 3 * D, N * D, N * D, N * DM,
                     N * DM, N * D, B * D, B * D, B * K};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) fill_normal(all[i], alln[i], &r, 1);
    float *grads[] = {s->dres, s->dln, s->dao, s->dqkv, s->dh, s->dhg, s->dlnf, s->dcls,
                      s->demb, s->dlogits, s->dtmp};
    size_t gradn[] = {N * D, N * D, N * D, N * 3 * D, N * DM, N * DM, B * D, B * D, NE * D,
                      B * K, N * D};
    for (size_t i = 0; i < sizeof grads / sizeof grads[0]; i++)
        fill_normal(grads[i], gradn[i], &r, 1e-2);
    fill_normal(s->grad0, m->n_params, &r, 1e-2);
    memcpy(m->grads, s->grad0, m->n_params * sizeof(float));
    for (size_t i = 0; i < B; i++) {
        s->labels[i] = (int32_t)hy_rng_below(&r, K);
        s->kvalid[i] = (int32_t)T;
    }
    for (size_t i = 0; i < NE; i++)
        s->ids[i] = c->kind == HY_XFMR_TEXT ? (int32_t)hy_rng_below(&r, c->vocab_size) : 0;
    /* the layernorm statistics start as those of x (layernorm forward rewrites them anyway) */
    hy_layernorm_forward(s->ln, s->mean, s->rstd, s->x, param(s, "blocks.0.norm1.weight").data,
                         param(s, "blocks.0.norm1.bias").data, N, D, HY_XFMR_LN_EPS);
    hy_layernorm_forward(s->lnf, s->fmean, s->frstd, s->cls, param(s, "norm.weight").data,
                         param(s, "norm.bias").data, B, D, HY_XFMR_LN_EPS);
    hy_rng_seed(&s->drop_rng, 7);
    s->drop_p = c->attn_dropout > 0 ? c->attn_dropout : c->mlp_dropout;

    s->n1w = param(s, "blocks.0.norm1.weight");
    s->n1b = param(s, "blocks.0.norm1.bias");
    s->nfw = param(s, "norm.weight");
    s->nfb = param(s, "norm.bias");
    s->cls_tok = param(s, "cls_token");
    s->pos = param(s, "pos_embed");
    if (c->kind == HY_XFMR_TEXT) s->tok = param(s, "tok_embed.weight");

    /* the linear layers: inputs and outputs chained as in hy_xfmr_forward / _backward */
    static const char *const wname[N_LIN] = {
        "patch_embed.proj.weight", "blocks.0.attn.qkv.weight", "blocks.0.attn.proj.weight",
        "blocks.0.mlp.fc1.weight", "blocks.0.mlp.fc2.weight", "head.weight"};
    static const char *const bname[N_LIN] = {
        "patch_embed.proj.bias", "blocks.0.attn.qkv.bias", "blocks.0.attn.proj.bias",
        "blocks.0.mlp.fc1.bias", "blocks.0.mlp.fc2.bias", "head.bias"};
    struct { const float *in; float *out; const float *dout; float *din; size_t N, Din, Dout; }
    wiring[N_LIN] = {
        {s->patches, s->emb, s->demb, NULL, NE, F, D},
        {s->ln, s->qkv, s->dqkv, s->dln, N, D, 3 * D},
        {s->ao, s->xm, s->dres, s->dao, N, D, D},
        {s->ln, s->h, s->dh, s->dln, N, D, DM},
        {s->hg, s->xo, s->dres, s->dhg, N, DM, D},
        {s->lnf, s->logits, s->dlogits, s->dlnf, B, D, K},
    };
    for (int k = 0; k < N_LIN; k++) {
        if (k == LIN_PEMB && c->kind != HY_XFMR_VIT) continue;
        hy_param_view w = param(s, wname[k]), b = param(s, bname[k]);
        lin *l = &s->lin[k];
        l->in = wiring[k].in; l->out = wiring[k].out; l->dout = wiring[k].dout;
        l->din = wiring[k].din; l->N = wiring[k].N; l->Din = wiring[k].Din;
        l->Dout = wiring[k].Dout;
        l->w = w.data; l->b = b.data; l->dw = w.grad; l->db = b.grad;
    }
    s->clip_max = 0;
    return HY_OK;
}

/* ===== kernels ===== */

static void run_op(bstate *s, op_kind op, int arg) {
    size_t B = s->B, T = s->T, D = s->D, DM = s->DM, NH = s->NH, K = s->K;
    size_t N = B * T, NE = B * (T - 1);
    const hy_xfmr *m = &s->m;
    const int32_t *kv = m->cfg.kind == HY_XFMR_VIT ? NULL : s->kvalid;
    const lin *l = &s->lin[arg >= 0 && arg < N_LIN ? arg : 0];
    switch (op) {
    case OP_PATCH:
        hy_patch_extract(s->patches, s->images, B, m->cfg.channels, m->cfg.image_size,
                         m->cfg.patch);
        break;
    case OP_TOKEMB_F: hy_tokembed_forward(s->emb, s->ids, s->tok.data, NE, D); break;
    case OP_ASSEMBLE_F:
        hy_embed_assemble_forward(s->x, s->emb, s->cls_tok.data, s->pos.data, B, T, D);
        break;
    case OP_LN_F:
        if (arg == SHAPE_BLOCK)
            hy_layernorm_forward(s->ln, s->mean, s->rstd, s->x, s->n1w.data, s->n1b.data, N, D,
                                 HY_XFMR_LN_EPS);
        else
            hy_layernorm_forward(s->lnf, s->fmean, s->frstd, s->cls, s->nfw.data, s->nfb.data, B,
                                 D, HY_XFMR_LN_EPS);
        break;
    case OP_LIN_F: hy_linear_forward(l->out, l->in, l->w, l->b, l->N, l->Din, l->Dout); break;
    case OP_ATTN_F: hy_attn_forward(s->ao, s->att, s->qkv, m->gates, kv, B, T, D, NH); break;
    case OP_GELU_F: hy_gelu_forward(s->hg, s->h, N * DM); break;
    case OP_DROP_MASK:
        if (arg == SHAPE_D) hy_dropout_mask(s->mask_d, &s->drop_rng, N, D, s->drop_p);
        else hy_dropout_mask(s->mask_h, &s->drop_rng, N, DM, s->drop_p);
        break;
    case OP_DROP_F:
        if (arg == SHAPE_D) hy_dropout_forward(s->xm, s->xm, s->mask_d, N * D);
        else hy_dropout_forward(s->hg, s->hg, s->mask_h, N * DM);
        break;
    case OP_CE_F: hy_ce_forward(&s->loss, s->probs, s->logits, s->labels, B, K, 0.0f); break;
    case OP_SOFTMAX: hy_softmax_rows(s->probs, s->logits, B, K); break;
    case OP_CE_B: hy_ce_backward(s->dlogits, 1.0, s->probs, s->labels, B, K, 0.0f); break;
    case OP_ZERO_GRAD: hy_xfmr_zero_grad(&s->m); break;
    case OP_LIN_BX:   /* din += dout W: the first GEMM of hy_linear_backward */
        hy_gemm(CblasNoTrans, CblasNoTrans, l->N, l->Din, l->Dout, 1.0f, l->dout, l->Dout, l->w,
                l->Din, 1.0f, l->din, l->Din);
        break;
    case OP_LIN_BW:   /* dW += dout^T in, db += column sums: hy_linear_backward without din */
        hy_linear_backward(NULL, l->dw, l->db, l->dout, l->in, l->w, l->N, l->Din, l->Dout);
        break;
    case OP_LN_B:
        if (arg == SHAPE_BLOCK)
            hy_layernorm_backward(s->dres, s->n1w.grad, s->n1b.grad, s->dln, s->x, s->mean,
                                  s->rstd, s->n1w.data, N, D);
        else
            hy_layernorm_backward(s->dcls, s->nfw.grad, s->nfb.grad, s->dlnf, s->cls, s->fmean,
                                  s->frstd, s->nfw.data, B, D);
        break;
    case OP_GELU_B: hy_gelu_backward(s->dh, s->dhg, s->h, N * DM); break;
    case OP_DROP_B: hy_dropout_backward(s->dtmp, s->dres, s->mask_d, N * D); break;
    case OP_ATTN_B:
        hy_attn_backward(s->dqkv, m->dgates, s->dao, s->qkv, s->att, m->gates, kv, s->part, B, T,
                         D, NH);
        break;
    case OP_ASSEMBLE_B:
        hy_embed_assemble_backward(s->demb, s->cls_tok.grad, s->pos.grad, s->dres, B, T, D);
        break;
    case OP_TOKEMB_B: hy_tokembed_backward(s->tok.grad, s->demb, s->ids, NE, D); break;
    case OP_CLIP: {
        /* max_norm kept just below the norm (prep_op), so every call scales */
        double norm = hy_grad_clip(m->grads, m->n_params, s->clip_max);
        s->clip_max = 0.999 * norm;
        break;
    }
    case OP_ADAMW: hy_adamw_step(&s->opt, m->params, m->grads, 1e-3); break;
    }
}

static double op_flops(const bstate *s, op_kind op, int arg) {
    if (op != OP_LIN_F && op != OP_LIN_BX && op != OP_LIN_BW) return 0;
    const lin *l = &s->lin[arg];
    return 2.0 * (double)l->N * (double)l->Din * (double)l->Dout;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Untimed set-up before a sample: clip and AdamW see a full, nonzero gradient block (as in a
 * real step, not the one zero_grad and the block-1 backward kernels leave), and clip runs with
 * max_norm just below the norm, so its scaling pass runs as in a clipped step. */
static void prep_op(bstate *s, op_kind op) {
    if (op != OP_CLIP && op != OP_ADAMW) return;
    memcpy(s->m.grads, s->grad0, s->m.n_params * sizeof(float));
    if (op == OP_CLIP) s->clip_max = 0.999 * hy_grad_norm(s->m.grads, s->m.n_params);
}

static double median(double *x, size_t n) {
    qsort(x, n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* ===== rows ===== */

#define MAX_PARTS 3
#define MAX_ROWS 48

typedef struct part { op_kind op; int arg; size_t calls; } part;
typedef struct row {
    const char *name, *group;
    part p[MAX_PARTS];
    int np;
} row;

typedef struct rowlist { row r[MAX_ROWS]; int n; } rowlist;

/* the parts of all rows, flattened in step order, with their timing state */
#define MAX_FLAT (MAX_ROWS * MAX_PARTS)
typedef struct flat {
    part p[MAX_FLAT];
    size_t inner[MAX_FLAT];     /* back-to-back calls per sample */
    double sec[MAX_FLAT];       /* median seconds per call */
    size_t n;
} flat;

/* Times every part: one warm-up pass in step order (which also sizes each part's samples),
 * then reps rounds, each a pass over all parts in step order, so that a load burst on a shared
 * machine spreads over all kernels instead of inflating one. samples: n * reps doubles. */
static void time_parts(bstate *s, flat *f, size_t reps, double *samples) {
    for (size_t i = 0; i < f->n; i++) {
        prep_op(s, f->p[i].op);
        double t0 = hy_now();
        run_op(s, f->p[i].op, f->p[i].arg);
        double t1 = hy_now() - t0;
        double want = SAMPLE_MIN_S / (t1 > 1e-8 ? t1 : 1e-8);
        f->inner[i] = t1 >= SAMPLE_MIN_S ? 1 : want >= INNER_MAX ? INNER_MAX : (size_t)ceil(want);
    }
    for (size_t r = 0; r < reps; r++)
        for (size_t i = 0; i < f->n; i++) {
            prep_op(s, f->p[i].op);
            double t0 = hy_now();
            for (size_t k = 0; k < f->inner[i]; k++) run_op(s, f->p[i].op, f->p[i].arg);
            samples[i * reps + r] = (hy_now() - t0) / (double)f->inner[i];
        }
    for (size_t i = 0; i < f->n; i++) f->sec[i] = median(samples + i * reps, reps);
}

static row *add_row(rowlist *rl, const char *name, const char *group) {
    HY_ASSERT(rl->n < MAX_ROWS);
    row *r = &rl->r[rl->n++];
    memset(r, 0, sizeof *r);
    r->name = name;
    r->group = group;
    return r;
}

static void add_part(row *r, op_kind op, int arg, size_t calls) {
    HY_ASSERT(r->np < MAX_PARTS);
    if (calls == 0) return;
    r->p[r->np++] = (part){op, arg, calls};
}

/* one row of one kernel */
static void row1(rowlist *rl, const char *name, const char *group, op_kind op, int arg,
                 size_t calls) {
    if (calls == 0) return;
    add_part(add_row(rl, name, group), op, arg, calls);
}

/* The kernels of one training step (train != 0) or one inference forward, in step order. */
static void plan_rows(const bstate *s, int train, rowlist *rl) {
    const hy_xfmr_config *c = &s->m.cfg;
    size_t L = c->depth;
    int vit = c->kind == HY_XFMR_VIT;
    int da = train && c->attn_dropout > 0, dm = train && c->mlp_dropout > 0;
    size_t nD = (size_t)(da + dm) * L, nH = (size_t)dm * L;   /* dropout sites per step */
    rl->n = 0;
    if (vit) {
        row1(rl, "embed: patch extract", "embed", OP_PATCH, 0, 1);
        row1(rl, "gemm patch_embed fwd", "gemm", OP_LIN_F, LIN_PEMB, 1);
    } else {
        row1(rl, "embed: token fwd", "embed", OP_TOKEMB_F, 0, 1);
    }
    row1(rl, "embed: assemble fwd", "embed", OP_ASSEMBLE_F, 0, 1);
    row *r = add_row(rl, "layernorm fwd", "layernorm");
    add_part(r, OP_LN_F, SHAPE_BLOCK, 2 * L);
    add_part(r, OP_LN_F, SHAPE_FINAL, 1);
    row1(rl, "gemm qkv fwd", "gemm", OP_LIN_F, LIN_QKV, L);
    row1(rl, "attention fwd", "attention", OP_ATTN_F, 0, L);
    row1(rl, "gemm proj fwd", "gemm", OP_LIN_F, LIN_PROJ, L);
    row1(rl, "gemm fc1 fwd", "gemm", OP_LIN_F, LIN_FC1, L);
    row1(rl, "gelu fwd", "gelu", OP_GELU_F, 0, L);
    row1(rl, "gemm fc2 fwd", "gemm", OP_LIN_F, LIN_FC2, L);
    if (nD) {
        r = add_row(rl, "dropout mask", "dropout");
        add_part(r, OP_DROP_MASK, SHAPE_D, nD);
        add_part(r, OP_DROP_MASK, SHAPE_H, nH);
        r = add_row(rl, "dropout fwd", "dropout");
        add_part(r, OP_DROP_F, SHAPE_D, nD);
        add_part(r, OP_DROP_F, SHAPE_H, nH);
    }
    row1(rl, "gemm head fwd", "gemm", OP_LIN_F, LIN_HEAD, 1);
    if (!train) {
        row1(rl, "softmax (predict)", "loss", OP_SOFTMAX, 0, 1);
        return;
    }
    row1(rl, "softmax-CE fwd", "loss", OP_CE_F, 0, 1);
    row1(rl, "softmax-CE bwd", "loss", OP_CE_B, 0, 1);
    row1(rl, "zero_grad", "optimizer", OP_ZERO_GRAD, 0, 1);
    row1(rl, "gemm head bwd dX", "gemm", OP_LIN_BX, LIN_HEAD, 1);
    row1(rl, "gemm head bwd dW+db", "gemm", OP_LIN_BW, LIN_HEAD, 1);
    row1(rl, "dropout bwd", "dropout", OP_DROP_B, 0, nD);
    row1(rl, "gemm fc2 bwd dX", "gemm", OP_LIN_BX, LIN_FC2, L);
    row1(rl, "gemm fc2 bwd dW+db", "gemm", OP_LIN_BW, LIN_FC2, L);
    row1(rl, "gelu bwd", "gelu", OP_GELU_B, 0, L);
    row1(rl, "gemm fc1 bwd dX", "gemm", OP_LIN_BX, LIN_FC1, L);
    row1(rl, "gemm fc1 bwd dW+db", "gemm", OP_LIN_BW, LIN_FC1, L);
    r = add_row(rl, "layernorm bwd", "layernorm");
    add_part(r, OP_LN_B, SHAPE_FINAL, 1);
    add_part(r, OP_LN_B, SHAPE_BLOCK, 2 * L);
    row1(rl, "gemm proj bwd dX", "gemm", OP_LIN_BX, LIN_PROJ, L);
    row1(rl, "gemm proj bwd dW+db", "gemm", OP_LIN_BW, LIN_PROJ, L);
    row1(rl, "attention bwd", "attention", OP_ATTN_B, 0, L);
    row1(rl, "gemm qkv bwd dX", "gemm", OP_LIN_BX, LIN_QKV, L);
    row1(rl, "gemm qkv bwd dW+db", "gemm", OP_LIN_BW, LIN_QKV, L);
    row1(rl, "embed: assemble bwd", "embed", OP_ASSEMBLE_B, 0, 1);
    if (vit) row1(rl, "gemm patch_embed bwd dW+db", "gemm", OP_LIN_BW, LIN_PEMB, 1);
    else row1(rl, "embed: token bwd", "embed", OP_TOKEMB_B, 0, 1);
    row1(rl, "grad norm + clip", "optimizer", OP_CLIP, 0, 1);
    row1(rl, "adamw step", "optimizer", OP_ADAMW, 0, 1);
}

/* core.bench_kernels(model_or_cfg, B [, reps [, mode]]) -> rows (see the top of the file) */
static int l_bench_kernels(lua_State *L) {
    static const char *const modes[] = {"train", "infer", NULL};
    lua_Integer B = luaL_checkinteger(L, 2);
    luaL_argcheck(L, B >= 1 && B <= 65536, 2, "batch size must be in [1, 65536]");
    lua_Integer reps = luaL_optinteger(L, 3, 5);
    luaL_argcheck(L, reps >= 1 && reps <= 1000, 3, "reps must be in [1, 1000]");
    int train = luaL_checkoption(L, 4, "train", modes) == 0;
    int cfg_arg = 1;
    if (luaL_testudata(L, 1, "hydra.Model")) {   /* a model: its m:config() table */
        lua_getfield(L, 1, "config");
        lua_pushvalue(L, 1);
        lua_call(L, 1, 1);
        cfg_arg = lua_gettop(L);
    } else if (!lua_istable(L, 1)) {
        return luaL_typeerror(L, 1, "hydra.Model or model config table");
    }
    hy_xfmr_config c;
    read_config(L, cfg_arg, &c);

    bstate *s = lua_newuserdatauv(L, sizeof *s, 0);
    memset(s, 0, sizeof *s);
    luaL_setmetatable(L, L_BENCH);
    int box = lua_gettop(L);
    rowlist *rl = lua_newuserdatauv(L, sizeof *rl, 0);
    flat *f = lua_newuserdatauv(L, sizeof *f, 0);
    double *samples = lua_newuserdatauv(L, MAX_FLAT * (size_t)reps * sizeof(double), 0);
    if (bstate_setup(s, &c, (size_t)B) != HY_OK) {
        bstate_release(s);
        return l_raise(L);
    }
    plan_rows(s, train, rl);
    f->n = 0;
    for (int i = 0; i < rl->n; i++)
        for (int j = 0; j < rl->r[i].np; j++) f->p[f->n++] = rl->r[i].p[j];
    time_parts(s, f, (size_t)reps, samples);

    lua_createtable(L, rl->n, 0);
    size_t fi = 0;
    for (int i = 0; i < rl->n; i++) {
        const row *r = &rl->r[i];
        double ms = 0, flops = 0;
        size_t calls = 0;
        for (int j = 0; j < r->np; j++, fi++) {
            const part *p = &r->p[j];
            ms += 1e3 * f->sec[fi] * (double)p->calls;
            flops += op_flops(s, p->op, p->arg) * (double)p->calls;
            calls += p->calls;
        }
        lua_createtable(L, 0, 6);
        lua_pushstring(L, r->name);
        lua_setfield(L, -2, "name");
        lua_pushstring(L, r->group);
        lua_setfield(L, -2, "group");
        lua_pushinteger(L, (lua_Integer)calls);
        lua_setfield(L, -2, "calls");
        lua_pushnumber(L, ms);
        lua_setfield(L, -2, "ms");
        lua_pushnumber(L, ms / (double)calls);
        lua_setfield(L, -2, "ms_call");
        lua_pushnumber(L, flops);
        lua_setfield(L, -2, "flops");
        lua_rawseti(L, -2, i + 1);
    }
    bstate_release(s);   /* free now rather than at the next collection */
    lua_replace(L, box);
    lua_settop(L, box);
    return 1;
}

void l_open_bench(lua_State *L) {
    static const luaL_Reg fns[] = {{"bench_kernels", l_bench_kernels}, {NULL, NULL}};
    l_setfuncs(L, fns);
    luaL_newmetatable(L, L_BENCH);
    lua_pushcfunction(L, l_bench_gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);
}
