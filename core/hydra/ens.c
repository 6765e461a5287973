/* ens.c: BatchEnsemble and LoRA-Ensemble member linears (see ens.h). */
#include "hydra/ens.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tensor/gemm.h"
#include "nn/ckpt.h"
#include "nn/layers.h"
#include "tensor/prof.h"

#define NONE SIZE_MAX
/* the ensemble of a model built by hy_ens_new (its extension is the hy_ens's first member) */
#define ENS(m) ((hy_ens *)(m)->ext)

/* ===== configuration ===== */

const char *hy_ens_method_name(hy_ens_kind k) {
    return k == HY_ENS_LORA ? "lora_ensemble" : "batch_ensemble";
}

hy_status hy_ens_method_parse(const char *s, hy_ens_kind *out) {
    if (s && strcmp(s, "batch_ensemble") == 0) *out = HY_ENS_BATCH;
    else if (s && strcmp(s, "lora_ensemble") == 0) *out = HY_ENS_LORA;
    else return HY_EINVAL;
    return HY_OK;
}

static const char *const TARGET_WORDS[] = {"q", "k", "v", "o", "mlp"};

const char *hy_ens_targets_str(unsigned targets, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < 5; i++) {
        if (!(targets & (1u << i))) continue;
        int w = snprintf(buf + used, n - used, "%s%s", used ? "," : "", TARGET_WORDS[i]);
        if (w < 0 || (size_t)w >= n - used) break;
        used += (size_t)w;
    }
    return buf;
}

hy_status hy_ens_target_parse(const char *word, unsigned *bit) {
    for (unsigned i = 0; i < 5; i++)
        if (word && strcmp(word, TARGET_WORDS[i]) == 0) {
            *bit = 1u << i;
            return HY_OK;
        }
    return HY_EINVAL;
}

hy_status hy_ens_config_check(const hy_xfmr_config *c, const hy_ens_config *e) {
    if (e->kind != HY_ENS_BATCH && e->kind != HY_ENS_LORA)
        return hy_fail(HY_ECONFIG, "ens: method must be batch_ensemble or lora_ensemble (got %d)",
                       (int)e->kind);
    const char *sec = hy_ens_method_name(e->kind);
    if (e->members < 1 || e->members > 64)
        return hy_fail(HY_ECONFIG, "%s.members must be in [1, 64] (got %zu)", sec, e->members);
    if (e->kind == HY_ENS_LORA) {
        if (e->rank < 1 || e->rank > c->d_model)
            return hy_fail(HY_ECONFIG, "lora_ensemble.rank must be in [1, %zu] (d_model; got "
                           "%zu)", c->d_model, e->rank);
        if (!(e->alpha > 0.0f) || !isfinite((double)e->alpha))
            return hy_fail(HY_ECONFIG, "lora_ensemble.alpha must be > 0 (got %g)",
                           (double)e->alpha);
        if (e->targets == 0 || e->targets >= 32u)
            return hy_fail(HY_ECONFIG, "lora_ensemble.targets must name at least one of q, k, "
                           "v, o, mlp");
    } else if (e->rank || e->alpha != 0.0f || e->targets) {
        return hy_fail(HY_ECONFIG, "batch_ensemble takes no rank, alpha or targets");
    }
    return HY_OK;
}

/* ===== parameter table ===== */

/* the linears of a block: name, in, out */
typedef struct lin_desc { const char *name; size_t in, out; } lin_desc;

static lin_desc site_desc(const hy_xfmr_config *c, hy_xfmr_site s) {
    size_t D = c->d_model, DM = c->d_mlp;
    switch (s) {
    case HY_XFMR_QKV: return (lin_desc){"attn.qkv", D, 3 * D};
    case HY_XFMR_PROJ: return (lin_desc){"attn.proj", D, D};
    case HY_XFMR_FC1: return (lin_desc){"mlp.fc1", D, DM};
    default: return (lin_desc){"mlp.fc2", DM, D};
    }
}

/* lora parts of site s: names, their output width, whether targeted */
static size_t lora_parts(const hy_xfmr_config *c, const hy_ens_config *e, hy_xfmr_site s,
                         const char **names, size_t *out, int *on) {
    size_t D = c->d_model;
    lin_desc d = site_desc(c, s);
    if (s == HY_XFMR_QKV) {
        static const char *const qkv[3] = {"attn.q", "attn.k", "attn.v"};
        static const unsigned bits[3] = {HY_LORA_Q, HY_LORA_K, HY_LORA_V};
        for (int p = 0; p < 3; p++) {
            names[p] = qkv[p];
            out[p] = D;
            on[p] = (e->targets & bits[p]) != 0;
        }
        return 3;
    }
    names[0] = d.name;
    out[0] = d.out;
    on[0] = s == HY_XFMR_PROJ ? (e->targets & HY_LORA_O) != 0 : (e->targets & HY_LORA_MLP) != 0;
    return 1;
}

void hy_ens_table(const hy_xfmr_config *c, const hy_ens_config *e, hy_param *tab, size_t *n,
                  size_t *off) {
    int64_t M = (int64_t)e->members, R = (int64_t)e->rank;
    int64_t D = (int64_t)c->d_model, K = (int64_t)c->n_classes;
    char name[48];
#define ADD(dec, nd, ...) do { int64_t sh_[] = {__VA_ARGS__}; \
        hy_param_table_add(tab, n, off, name, nd, sh_, dec); } while (0)
    for (size_t l = 0; l < c->depth; l++) {
        for (int s = 0; s < HY_XFMR_N_SITES; s++) {
            lin_desc d = site_desc(c, (hy_xfmr_site)s);
            if (e->kind == HY_ENS_BATCH) {
                snprintf(name, sizeof name, "blocks.%zu.%s.be_s", l, d.name);
                ADD(false, 2, M, (int64_t)d.in);
                snprintf(name, sizeof name, "blocks.%zu.%s.be_r", l, d.name);
                ADD(false, 2, M, (int64_t)d.out);
                snprintf(name, sizeof name, "blocks.%zu.%s.be_bias", l, d.name);
                ADD(false, 2, M, (int64_t)d.out);
                continue;
            }
            const char *names[3];
            size_t outs[3];
            int on[3];
            size_t np = lora_parts(c, e, (hy_xfmr_site)s, names, outs, on);
            for (size_t p = 0; p < np; p++) {
                if (!on[p]) continue;
                snprintf(name, sizeof name, "blocks.%zu.%s.lora_a", l, names[p]);
                ADD(true, 3, M, R, (int64_t)d.in);
                snprintf(name, sizeof name, "blocks.%zu.%s.lora_b", l, names[p]);
                ADD(true, 3, M, (int64_t)outs[p], R);
            }
        }
    }
    if (e->kind == HY_ENS_BATCH) {
        snprintf(name, sizeof name, "head.be_s");
        ADD(false, 2, M, D);
        snprintf(name, sizeof name, "head.be_r");
        ADD(false, 2, M, K);
        snprintf(name, sizeof name, "head.be_bias");
        ADD(false, 2, M, K);
    } else {
        snprintf(name, sizeof name, "head.members.weight");
        ADD(true, 3, M, K, D);
        snprintf(name, sizeof name, "head.members.bias");
        ADD(false, 2, M, K);
    }
#undef ADD
}

static const hy_xfmr_ext_ops ens_ops;

static void ens_release(hy_xfmr_ext *x) {
    hy_ens *e = (hy_ens *)x;
    if (!e) return;
    hy_free(e->site);
    hy_free(e->buf0);
    hy_free(e->buf1);
    hy_free(e);
}

/* makes m->ext of a model whose table is the base table followed by hy_ens_table (the
 * install of hy_ens_new's hy_xfmr_ext_spec); marks the backbone frozen for lora_ensemble */
static hy_status ens_install(hy_xfmr *m, const void *ctx) {
    const hy_ens_config *e = ctx;
    const hy_xfmr_config *c = &m->cfg;
    hy_ens *s = hy_xcalloc(1, sizeof *s);
    if (s) s->site = hy_xcalloc(c->depth * HY_XFMR_N_SITES, sizeof *s->site);
    if (!s || !s->site) {
        hy_free(s);
        return hy_fail(HY_ENOMEM, "ens: out of memory for the ensemble's tables");
    }
    s->cfg = *e;
    s->n_base_tensors = hy_xfmr_n_slots(c);
    s->n_base_floats = m->table[s->n_base_tensors - 1].offset +
                       (m->table[s->n_base_tensors - 1].numel + 15) / 16 * 16;
    size_t idx = s->n_base_tensors;
#define NEXT() (m->table[idx++].offset)
    for (size_t l = 0; l < c->depth; l++)
        for (int st = 0; st < HY_XFMR_N_SITES; st++) {
            hy_ens_site_off *o = &s->site[l * HY_XFMR_N_SITES + (size_t)st];
            o->s = o->r = o->b = NONE;
            for (int p = 0; p < 3; p++) o->a[p] = o->bb[p] = NONE;
            if (e->kind == HY_ENS_BATCH) {
                o->s = NEXT();
                o->r = NEXT();
                o->b = NEXT();
                continue;
            }
            const char *names[3];
            size_t outs[3];
            int on[3];
            size_t np = lora_parts(c, e, (hy_xfmr_site)st, names, outs, on);
            for (size_t p = 0; p < np; p++) {
                if (!on[p]) continue;
                o->a[p] = NEXT();
                o->bb[p] = NEXT();
            }
        }
    s->head.s = s->head.r = s->head.b = NONE;
    for (int p = 0; p < 3; p++) s->head.a[p] = s->head.bb[p] = NONE;
    s->head_w = s->head_b = NONE;
    if (e->kind == HY_ENS_BATCH) {
        s->head.s = NEXT();
        s->head.r = NEXT();
        s->head.b = NEXT();
    } else {
        s->head_w = NEXT();
        s->head_b = NEXT();
        for (size_t i = 0; i < s->n_base_tensors; i++) {
            m->table[i].frozen = true;
            m->table[i].decay = false;
        }
    }
#undef NEXT
    HY_ASSERT(idx == m->n_tensors);
    s->ext.ops = &ens_ops;
    s->ext.name = hy_ens_method_name(e->kind);
    s->ext.members = e->members;
    s->ext.frozen_floats = e->kind == HY_ENS_LORA ? s->n_base_floats : 0;
    m->ext = &s->ext;
    return HY_OK;
}

static void ens_table(const hy_xfmr_config *c, const void *ctx, hy_param *tab, size_t *n,
                      size_t *off) {
    hy_ens_table(c, ctx, tab, n, off);
}

hy_status hy_ens_new(hy_xfmr *m, const hy_xfmr_config *cfg, const hy_ens_config *e) {
    memset(m, 0, sizeof *m);
    HY_TRY(hy_xfmr_config_check(cfg));
    HY_TRY(hy_ens_config_check(cfg, e));
    hy_xfmr_ext_spec x = {e, ens_table, ens_install};
    return hy_xfmr_new_ext(m, cfg, &x);
}

hy_ens *hy_ens_of(const hy_xfmr *m) {
    return m->ext && m->ext->ops == &ens_ops ? ENS(m) : NULL;
}

/* ===== init ===== */

static float trunc_normal(hy_rng *r, double std) {
    for (;;) {
        double z = hy_rng_normal(r);
        if (z >= -2.0 && z <= 2.0) return (float)(z * std);
    }
}

static void ens_init(hy_xfmr *m, uint64_t seed) {
    hy_ens *s = ENS(m);
    hy_rng root;
    hy_rng_seed(&root, seed);
    for (size_t i = s->n_base_tensors; i < m->n_tensors; i++) {
        const hy_param *p = &m->table[i];
        float *w = m->params + p->offset;
        hy_rng r = hy_rng_split(&root, (uint64_t)i);
        size_t len = strlen(p->name);
        int ends = 0;
#define ENDS(suf) (len >= strlen(suf) && strcmp(p->name + len - strlen(suf), suf) == 0)
        if (ENDS(".be_s") || ENDS(".be_r")) {
            for (size_t k = 0; k < p->numel; k++) w[k] = (float)(1.0 + 0.5 * hy_rng_normal(&r));
            ends = 1;
        } else if (ENDS(".be_bias") || ENDS(".lora_a")) {
            /* U(+-1/sqrt(in)): be_bias [M, out] of a linear with `in` inputs; lora_a [M, r, in] */
            size_t in;
            if (ENDS(".lora_a")) {
                in = (size_t)p->shape[2];
            } else {   /* the be_s tensor two entries before holds [M, in] */
                in = (size_t)m->table[i - 2].shape[1];
            }
            double bound = 1.0 / sqrt((double)in);
            for (size_t k = 0; k < p->numel; k++)
                w[k] = (float)(bound * (2.0 * (double)hy_rng_uniform(&r) - 1.0));
            ends = 1;
        } else if (ENDS(".lora_b") || ENDS("head.members.bias")) {
            memset(w, 0, p->numel * sizeof *w);
            ends = 1;
        } else if (ENDS("head.members.weight")) {
            for (size_t k = 0; k < p->numel; k++) w[k] = trunc_normal(&r, 0.02);
            ends = 1;
        }
#undef ENDS
        HY_ASSERT(ends);
    }
}

hy_status hy_ens_copy_backbone(hy_xfmr *m, const hy_xfmr *src) {
    if (src->ext)
        return hy_fail(HY_EINVAL, "ens: the backbone must be a single model, not a %s model",
                       src->ext->name);
    const hy_xfmr_config *a = &src->cfg, *b = &m->cfg;
    if (a->kind != b->kind)
        return hy_fail(HY_EINVAL, "ens: the backbone is a %s model, the ensemble %s",
                       hy_xfmr_kind_name(a->kind), hy_xfmr_kind_name(b->kind));
    for (size_t i = 0; i < HY_XFMR_N_FIELDS; i++) {
        const hy_xfmr_field *f = &hy_xfmr_fields[i];
        if (f->type == HY_FIELD_ENUM) {   /* the encoder options (xfmr.h) shape the table */
            if (hy_xfmr_field_enum(a, f) != hy_xfmr_field_enum(b, f))
                return hy_fail(HY_EINVAL, "ens: the backbone and the ensemble differ in %s",
                               f->name);
            continue;
        }
        if (f->type != HY_FIELD_SIZE && f->type != HY_FIELD_COUNT) continue;
        size_t va = hy_xfmr_field_size(a, f), vb = hy_xfmr_field_size(b, f);
        if (va != vb)
            return hy_fail(HY_EINVAL, "ens: the backbone has %s %zu, the ensemble %zu", f->name,
                           va, vb);
    }
    HY_ASSERT(hy_ens_of(m) && src->n_params == ENS(m)->n_base_floats);
    memcpy(m->params, src->params, src->n_params * sizeof(float));
    memcpy(m->gates, src->gates, a->depth * a->n_heads * sizeof(float));
    return HY_OK;
}

/* ===== cost ===== */

hy_xfmr_costs hy_ens_cost(const hy_xfmr_config *c, const hy_ens_config *e, size_t T) {
    hy_xfmr_costs r = hy_xfmr_cost(c, T, NULL);
    double Mf = (double)e->members, t = (double)T;
    size_t M = e->members, K = c->n_classes, D = c->d_model;
    for (int p = 0; p < HY_N_PARTS; p++)
        if (p != HY_PART_EMBED) r.flops[p] *= Mf;
    for (size_t l = 0; l < c->depth; l++)
        for (int s = 0; s < HY_XFMR_N_SITES; s++) {
            lin_desc d = site_desc(c, (hy_xfmr_site)s);
            int part = s <= HY_XFMR_PROJ ? HY_PART_ATTN : HY_PART_MLP;
            if (e->kind == HY_ENS_BATCH) {
                r.params[part] += M * (d.in + 2 * d.out);
                continue;
            }
            const char *names[3];
            size_t outs[3];
            int on[3];
            size_t np = lora_parts(c, e, (hy_xfmr_site)s, names, outs, on);
            for (size_t q = 0; q < np; q++) {
                if (!on[q]) continue;
                r.params[part] += M * e->rank * (d.in + outs[q]);
                r.flops[part] += Mf * 2.0 * t * (double)e->rank * (double)(d.in + outs[q]);
            }
        }
    if (e->kind == HY_ENS_BATCH) r.params[HY_PART_HEAD] += M * (D + 2 * K);
    else r.params[HY_PART_HEAD] = M * (K * D + K);
    r.flops_total = 0;
    r.params_total = 0;
    for (int p = 0; p < HY_N_PARTS; p++) {
        r.flops_total += r.flops[p];
        r.params_total += r.params[p];
    }
    return r;
}

/* ===== scratch ===== */

static hy_status ens_alloc(hy_xfmr *m, size_t rows) {
    hy_ens *s = ENS(m);
    const hy_xfmr_config *c = &m->cfg;
    size_t D = c->d_model, DM = c->d_mlp;
    size_t c0, c1;
    if (s->cfg.kind == HY_ENS_BATCH) {
        c0 = D > DM ? D : DM;                       /* x o s: the widest input */
        c1 = 3 * D > DM ? 3 * D : DM;               /* z, dout o r: the widest output */
    } else {
        c0 = c1 = s->cfg.rank;                      /* u = x A^T, du */
    }
    hy_free(s->buf0);
    hy_free(s->buf1);
    s->buf0 = hy_xmalloc_aligned(rows * c0 * sizeof(float) + 64);
    s->buf1 = hy_xmalloc_aligned(rows * c1 * sizeof(float) + 64);
    s->buf_rows = rows;
    s->buf_cols0 = c0;
    s->buf_cols1 = c1;
    if (!s->buf0 || !s->buf1) return HY_ENOMEM;
    return HY_OK;
}

/* ===== batch_ensemble linear ===== */

/* xs (N, Din) = in o s_m, member m of row n = n / NB */
static void scale_rows(float *xs, const float *in, const float *sv, size_t N, size_t NB,
                       size_t Din) {
#pragma omp parallel for schedule(static) if (N * Din > 32768)
    for (size_t n = 0; n < N; n++) {
        const float *x = in + n * Din, *sm = sv + (n / NB) * Din;
        float *o = xs + n * Din;
#pragma omp simd
        for (size_t k = 0; k < Din; k++) o[k] = x[k] * sm[k];
    }
}

static void be_forward(const float *P, const hy_ens_site_off *o, float *xs, float *out,
                       const float *in, const float *w, const float *b, const float *res,
                       size_t M, size_t N, size_t Din, size_t Dout) {
    size_t NB = N / M;
    const float *sv = P + o->s, *rv = P + o->r, *bm = P + o->b;
    scale_rows(xs, in, sv, N, NB, Din);
    hy_gemm(CblasNoTrans, CblasTrans, N, Dout, Din, 1.0f, xs, Din, w, Din, 0.0f, out, Dout);
    uint64_t t0 = hy_prof_t0();
#pragma omp parallel for schedule(static) if (N * Dout > 32768)
    for (size_t n = 0; n < N; n++) {
        size_t mm = n / NB;
        const float *r = rv + mm * Dout, *bb = bm + mm * Dout;
        float *y = out + n * Dout;
        const float *rs = res ? res + n * Dout : NULL;
        if (rs) {
#pragma omp simd
            for (size_t j = 0; j < Dout; j++) y[j] = rs[j] + (y[j] * r[j] + (b[j] + bb[j]));
        } else {
#pragma omp simd
            for (size_t j = 0; j < Dout; j++) y[j] = y[j] * r[j] + (b[j] + bb[j]);
        }
    }
    hy_prof_add(HY_PROF_COPY, t0, 0);
}

/* acc (Dout) += sum over rows [n0, n1) of a (o b when b != NULL); fixed order */
static void col_sums(float *acc, const float *a, const float *b, size_t n0, size_t n1,
                     size_t cols) {
    for (size_t n = n0; n < n1; n++) {
        const float *x = a + n * cols, *y = b ? b + n * cols : NULL;
        if (y) {
#pragma omp simd
            for (size_t j = 0; j < cols; j++) acc[j] += x[j] * y[j];
        } else {
#pragma omp simd
            for (size_t j = 0; j < cols; j++) acc[j] += x[j];
        }
    }
}

static void be_backward(const float *P, float *G, const hy_ens_site_off *o, float *xs,
                        float *z, float *din, float *dw, float *db, const float *dout,
                        const float *in, const float *w, size_t M, size_t N, size_t Din,
                        size_t Dout) {
    size_t NB = N / M;
    const float *sv = P + o->s, *rv = P + o->r;
    float *ds = G + o->s, *dr = G + o->r, *dbm = G + o->b;
    /* xs = in o s_m;  z = xs W^T (recomputed);  dr_m += sum dout o z */
    scale_rows(xs, in, sv, N, NB, Din);
    hy_gemm(CblasNoTrans, CblasTrans, N, Dout, Din, 1.0f, xs, Din, w, Din, 0.0f, z, Dout);
    uint64_t t0 = hy_prof_t0();
    for (size_t mm = 0; mm < M; mm++) {
        col_sums(dr + mm * Dout, dout, z, mm * NB, (mm + 1) * NB, Dout);
        /* db_m += column sums of the member's dout; the shared db gets every member's */
        col_sums(dbm + mm * Dout, dout, NULL, mm * NB, (mm + 1) * NB, Dout);
    }
    if (db) col_sums(db, dout, NULL, 0, N, Dout);
    /* g = dout o r_m (into z) */
#pragma omp parallel for schedule(static) if (N * Dout > 32768)
    for (size_t n = 0; n < N; n++) {
        const float *r = rv + (n / NB) * Dout, *g0 = dout + n * Dout;
        float *g = z + n * Dout;
#pragma omp simd
        for (size_t j = 0; j < Dout; j++) g[j] = g0[j] * r[j];
    }
    hy_prof_add(HY_PROF_COPY, t0, 0);
    /* dW += g^T xs;  dxs = g W (into din) */
    hy_gemm(CblasTrans, CblasNoTrans, Dout, Din, N, 1.0f, z, Dout, xs, Din, 1.0f, dw, Din);
    hy_gemm(CblasNoTrans, CblasNoTrans, N, Din, Dout, 1.0f, z, Dout, w, Din, 0.0f, din, Din);
    t0 = hy_prof_t0();
    /* ds_m += sum dxs o in;  din = dxs o s_m */
    for (size_t mm = 0; mm < M; mm++) col_sums(ds + mm * Din, din, in, mm * NB, (mm + 1) * NB, Din);
#pragma omp parallel for schedule(static) if (N * Din > 32768)
    for (size_t n = 0; n < N; n++) {
        const float *sm = sv + (n / NB) * Din;
        float *d = din + n * Din;
#pragma omp simd
        for (size_t k = 0; k < Din; k++) d[k] *= sm[k];
    }
    hy_prof_add(HY_PROF_COPY, t0, 0);
}

/* ===== lora_ensemble linear ===== */

/* out (N, Dout) += scale * (in A_m^T) B_m^T on columns [o0, o0 + Op), per member, as two
 * grouped GEMMs over the members (u = in A^T into u (N, rank)) */
static void lora_forward_part(float *u, float *out, const float *in, const float *A,
                              const float *Bw, size_t M, size_t NB, size_t Din, size_t Dout,
                              size_t o0, size_t Op, size_t rank, float scale) {
    hy_gemm_desc g[64] = {0};
    for (size_t mm = 0; mm < M; mm++)
        g[mm] = (hy_gemm_desc){CblasNoTrans, CblasTrans, in + mm * NB * Din, NB, Din, Din,
                               A + mm * rank * Din, rank, Din, Din, u + mm * NB * rank, NB, rank,
                               rank, 1.0f, 0.0f};
    hy_status st = hy_gemm_grouped(g, M);
    HY_ASSERT(st == HY_OK);
    for (size_t mm = 0; mm < M; mm++)
        g[mm] = (hy_gemm_desc){CblasNoTrans, CblasTrans, u + mm * NB * rank, NB, rank, rank,
                               Bw + mm * Op * rank, Op, rank, rank,
                               out + mm * NB * Dout + o0, NB, Op, Dout, scale, 1.0f};
    st = hy_gemm_grouped(g, M);
    HY_ASSERT(st == HY_OK);
}

/* the backward of lora_forward_part: dA, dB added; din (N, Din) += du A_m (du = scale dout_p
 * B_m); u recomputed */
static void lora_backward_part(float *u, float *du, float *din, float *dA, float *dB,
                               const float *dout, const float *in, const float *A,
                               const float *Bw, size_t M, size_t NB, size_t Din, size_t Dout,
                               size_t o0, size_t Op, size_t rank, float scale) {
    hy_gemm_desc g[64] = {0};
    hy_status st;
#define GROUPED() do { st = hy_gemm_grouped(g, M); HY_ASSERT(st == HY_OK); } while (0)
    for (size_t mm = 0; mm < M; mm++)   /* u = in A^T */
        g[mm] = (hy_gemm_desc){CblasNoTrans, CblasTrans, in + mm * NB * Din, NB, Din, Din,
                               A + mm * rank * Din, rank, Din, Din, u + mm * NB * rank, NB, rank,
                               rank, 1.0f, 0.0f};
    GROUPED();
    for (size_t mm = 0; mm < M; mm++)   /* dB += scale dout_p^T u   (Op, rank) */
        g[mm] = (hy_gemm_desc){CblasTrans, CblasNoTrans, dout + mm * NB * Dout + o0, NB, Op,
                               Dout, u + mm * NB * rank, NB, rank, rank, dB + mm * Op * rank, Op,
                               rank, rank, scale, 1.0f};
    GROUPED();
    for (size_t mm = 0; mm < M; mm++)   /* du = scale dout_p B   (NB, rank) */
        g[mm] = (hy_gemm_desc){CblasNoTrans, CblasNoTrans, dout + mm * NB * Dout + o0, NB, Op,
                               Dout, Bw + mm * Op * rank, Op, rank, rank, du + mm * NB * rank,
                               NB, rank, rank, scale, 0.0f};
    GROUPED();
    for (size_t mm = 0; mm < M; mm++)   /* dA += du^T in   (rank, Din) */
        g[mm] = (hy_gemm_desc){CblasTrans, CblasNoTrans, du + mm * NB * rank, NB, rank, rank,
                               in + mm * NB * Din, NB, Din, Din, dA + mm * rank * Din, rank, Din,
                               Din, 1.0f, 1.0f};
    GROUPED();
    for (size_t mm = 0; mm < M; mm++)   /* din += du A   (NB, Din) */
        g[mm] = (hy_gemm_desc){CblasNoTrans, CblasNoTrans, du + mm * NB * rank, NB, rank, rank,
                               A + mm * rank * Din, rank, Din, Din, din + mm * NB * Din, NB, Din,
                               Din, 1.0f, 1.0f};
    GROUPED();
#undef GROUPED
}

/* ===== dispatch ===== */

static const hy_ens_site_off *site_of(const hy_xfmr *m, size_t l, hy_xfmr_site s) {
    return &ENS(m)->site[l * HY_XFMR_N_SITES + (size_t)s];
}

static void ens_linear_forward(hy_xfmr *m, size_t l, hy_xfmr_site s, float *out,
                               const float *in, const float *w, const float *b,
                               const float *res, size_t N, size_t Din, size_t Dout) {
    hy_ens *e = ENS(m);
    size_t M = e->cfg.members;
    HY_ASSERT(N % M == 0 && N <= e->buf_rows && res != out);
    const hy_ens_site_off *o = site_of(m, l, s);
    if (e->cfg.kind == HY_ENS_BATCH) {
        be_forward(m->params, o, e->buf0, out, in, w, b, res, M, N, Din, Dout);
        return;
    }
    if (res) hy_linear_forward_res(out, in, w, b, res, N, Din, Dout);
    else hy_linear_forward(out, in, w, b, N, Din, Dout);
    size_t np = s == HY_XFMR_QKV ? 3 : 1, Op = Dout / np, R = e->cfg.rank;
    float scale = e->cfg.alpha / (float)R;
    for (size_t p = 0; p < np; p++) {
        if (o->a[p] == NONE) continue;
        lora_forward_part(e->buf0, out, in, m->params + o->a[p], m->params + o->bb[p], M, N / M,
                          Din, Dout, p * Op, Op, R, scale);
    }
}

static void ens_linear_backward(hy_xfmr *m, size_t l, hy_xfmr_site s, float *din, float *dw,
                                float *db, const float *dout, const float *in,
                                const float *w, size_t N, size_t Din, size_t Dout) {
    hy_ens *e = ENS(m);
    size_t M = e->cfg.members;
    HY_ASSERT(N % M == 0 && N <= e->buf_rows);
    const hy_ens_site_off *o = site_of(m, l, s);
    if (e->cfg.kind == HY_ENS_BATCH) {
        be_backward(m->params, m->grads, o, e->buf0, e->buf1, din, dw, db, dout, in, w, M, N,
                    Din, Dout);
        return;
    }
    /* frozen W, b: only din = dout W, then the adapters */
    hy_gemm(CblasNoTrans, CblasNoTrans, N, Din, Dout, 1.0f, dout, Dout, w, Din, 0.0f, din, Din);
    size_t np = s == HY_XFMR_QKV ? 3 : 1, Op = Dout / np, R = e->cfg.rank;
    float scale = e->cfg.alpha / (float)R;
    for (size_t p = 0; p < np; p++) {
        if (o->a[p] == NONE) continue;
        lora_backward_part(e->buf0, e->buf1, din, m->grads + o->a[p], m->grads + o->bb[p], dout,
                           in, m->params + o->a[p], m->params + o->bb[p], M, N / M, Din, Dout,
                           p * Op, Op, R, scale);
    }
}

static void ens_head_forward(hy_xfmr *m, float *logits, const float *lnf, size_t R) {
    hy_ens *e = ENS(m);
    size_t M = e->cfg.members, B = R / M, D = m->cfg.d_model, K = m->cfg.n_classes;
    HY_ASSERT(R % M == 0 && R <= e->buf_rows);
    if (e->cfg.kind == HY_ENS_BATCH) {
        be_forward(m->params, &e->head, e->buf0, logits, lnf, m->p.head_w, m->p.head_b, NULL, M,
                   R, D, K);
        return;
    }
    for (size_t mm = 0; mm < M; mm++)
        hy_linear_forward(logits + mm * B * K, lnf + mm * B * D,
                          m->params + e->head_w + mm * K * D, m->params + e->head_b + mm * K, B,
                          D, K);
}

static void ens_head_backward(hy_xfmr *m, float *dlnf, const float *dlogits, const float *lnf,
                              size_t R) {
    hy_ens *e = ENS(m);
    size_t M = e->cfg.members, B = R / M, D = m->cfg.d_model, K = m->cfg.n_classes;
    HY_ASSERT(R % M == 0 && R <= e->buf_rows);
    if (e->cfg.kind == HY_ENS_BATCH) {
        be_backward(m->params, m->grads, &e->head, e->buf0, e->buf1, dlnf, m->g.head_w,
                    m->g.head_b, dlogits, lnf, m->p.head_w, M, R, D, K);
        return;
    }
    for (size_t mm = 0; mm < M; mm++)
        hy_linear_backward_set(dlnf + mm * B * D, m->grads + e->head_w + mm * K * D,
                               m->grads + e->head_b + mm * K, dlogits + mm * B * K,
                               lnf + mm * B * D, m->params + e->head_w + mm * K * D, B, D, K);
}

/* ===== the extension ===== */

static hy_xfmr_costs ens_cost(const hy_xfmr *m, size_t T) {
    return hy_ens_cost(&m->cfg, &ENS(m)->cfg, T);
}

/* /ensemble: the YAML section's name and keys */
static hy_status ens_save(const hy_xfmr *m, hy_h5 *f) {
    const hy_ens_config *e = &ENS(m)->cfg;
    char tg[32];
    HY_TRY(hy_h5_set_attr_str(f, "/ensemble", "method", hy_ens_method_name(e->kind)));
    HY_TRY(hy_h5_set_attr_i64(f, "/ensemble", "members", (int64_t)e->members));
    if (e->kind == HY_ENS_LORA) {
        HY_TRY(hy_h5_set_attr_i64(f, "/ensemble", "rank", (int64_t)e->rank));
        HY_TRY(hy_h5_set_attr_f64(f, "/ensemble", "alpha", (double)e->alpha));
        HY_TRY(hy_h5_set_attr_str(f, "/ensemble", "targets",
                                  hy_ens_targets_str(e->targets, tg, sizeof tg)));
    }
    return HY_OK;
}

static const hy_xfmr_ext_ops ens_ops = {
    .linear_forward = ens_linear_forward,
    .linear_backward = ens_linear_backward,
    .head_forward = ens_head_forward,
    .head_backward = ens_head_backward,
    .alloc = ens_alloc,
    .init = ens_init,
    .cost = ens_cost,
    .save = ens_save,
    .release = ens_release,
};

/* ===== checkpoints ===== */

hy_status hy_ens_read(hy_h5 *f, hy_ens_config *e, int *has) {
    memset(e, 0, sizeof *e);
    int ex = hy_h5_exists(f, "/ensemble");
    if (ex < 0) return HY_ENOMEM;
    *has = ex;
    if (!ex) return HY_OK;
    static const char *const keys[] = {"method", "members", "rank", "alpha", "targets"};
    for (int i = 0; i < 5; i++) {
        int a = hy_h5_attr_exists(f, "/ensemble", keys[i]);
        if (a < 0) return HY_ENOMEM;
        if (!a && (i < 2 || e->kind == HY_ENS_LORA))
            return hy_fail(HY_EINVAL, "ckpt: '%s' has no /ensemble attribute '%s'", f->path,
                           keys[i]);
        if (!a) continue;
        if (i == 0 || i == 4) {
            char *v = NULL;
            HY_TRY(hy_h5_get_attr_str(f, "/ensemble", keys[i], &v));
            hy_status st = HY_OK;
            if (i == 0 && hy_ens_method_parse(v, &e->kind) != HY_OK)
                st = hy_fail(HY_EINVAL, "ckpt: '%s': /ensemble method must be batch_ensemble or "
                             "lora_ensemble (got '%s')", f->path, v);
            for (char *w = i == 4 ? v : NULL; w && st == HY_OK;) {   /* words split at ',' */
                char *comma = strchr(w, ',');
                if (comma) *comma = '\0';
                unsigned bit = 0;
                if (hy_ens_target_parse(w, &bit) != HY_OK)
                    st = hy_fail(HY_EINVAL, "ckpt: '%s': /ensemble targets: unknown target '%s' "
                                 "(expected q, k, v, o, mlp)", f->path, w);
                e->targets |= bit;
                w = comma ? comma + 1 : NULL;
            }
            hy_free(v);
            HY_TRY(st);
        } else if (i == 3) {
            double d;
            HY_TRY(hy_h5_get_attr_f64(f, "/ensemble", keys[i], &d));
            e->alpha = (float)d;
        } else {
            int64_t v;
            char what[32];
            HY_TRY(hy_h5_get_attr_i64(f, "/ensemble", keys[i], &v));
            snprintf(what, sizeof what, "/ensemble %s", keys[i]);
            /* members: the ensembles' limit; rank: at most d_model (<= the width limit) */
            hy_status rs = hy_check_range(f->path, what, v, 1, i == 1 ? 64 : HY_XFMR_MAX_WIDTH);
            if (rs != HY_OK) return hy_fail_prefix(rs, "ckpt");
            if (i == 1) e->members = (size_t)v;
            else e->rank = (size_t)v;
        }
    }
    return HY_OK;
}

/* the model of checkpoint f (hy_ckpt_load_with): an ensemble when it has /ensemble */
static hy_status build_model(hy_h5 *f, const hy_xfmr_config *cfg, hy_xfmr *m) {
    hy_ens_config e;
    int has = 0;
    HY_TRY(hy_ens_read(f, &e, &has));
    if (!has) return hy_xfmr_new(m, cfg);
    hy_status st = hy_ens_new(m, cfg, &e);
    if (st != HY_OK) st = hy_fail_prefix(st, "ckpt: '%s': /ensemble", f->path);
    return st;
}

hy_status hy_ens_load(const char *path, hy_xfmr *m) {
    return hy_ckpt_load_with(path, m, build_model);
}
