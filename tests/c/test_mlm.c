/* test_mlm.c: masked-language-model pretraining (core/nn/mlm.h): the masking recipe (rates,
 * padding, per-sample determinism), the MLM loss and backward against central finite
 * differences through a double reference (ref_xfmr_hidden + the double head below), the
 * PyTorch fixture tests/ref/mlm_tiny.h5 (tests/ref/make_mlm_ref.py), and a tiny pretraining
 * run whose held-out MLM loss falls. Seed: HYDRA_SEED (printed). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/base.h"
#include "check.h"
#include "nn/ckpt.h"
#include "io/h5.h"
#include "data/loader.h"
#include "nn/mlm.h"
#include "ref_xfmr.h"
#include "tensor/rng.h"
#include "nn/xfmr.h"

static hy_rng rng;

static const hy_mlm_mask_config BERT = {0.15, 0.8, 0.1};

/* ===== masking ===== */

static void test_mask(void) {
    size_t B = 400, len = 50, V = 1000;
    int32_t *ids = malloc(B * len * sizeof *ids), *lens = malloc(B * sizeof *lens);
    int32_t *out = malloc(B * len * sizeof *out), *tg = malloc(B * len * sizeof *tg);
    int32_t *out2 = malloc(B * len * sizeof *out2), *tg2 = malloc(B * len * sizeof *tg2);
    int64_t *index = malloc(B * sizeof *index);
    size_t tokens = 0;
    for (size_t b = 0; b < B; b++) {
        lens[b] = (int32_t)(b % 7 == 0 ? 1 : 10 + b % 41);
        index[b] = (int64_t)b;
        for (size_t t = 0; t < len; t++)
            ids[b * len + t] = (int32_t)t < lens[b] ? (int32_t)(4 + hy_rng_below(&rng, V - 4)) : 0;
        tokens += (size_t)lens[b];
    }
    size_t chosen = hy_mlm_mask(out, tg, ids, lens, index, B, len, V, &BERT, 7, 0);
    size_t n = 0, nmask = 0, nrand = 0, nkeep = 0, empty = 0;
    int pad_ok = 1, range_ok = 1;
    for (size_t b = 0; b < B; b++) {
        size_t row = 0;
        for (size_t t = 0; t < len; t++) {
            size_t i = b * len + t;
            if ((int32_t)t >= lens[b]) pad_ok &= out[i] == 0 && tg[i] == -1;
            if (tg[i] < 0) { range_ok &= out[i] == ids[i]; continue; }
            row++;
            n++;
            range_ok &= tg[i] == ids[i] && out[i] >= 0 && out[i] < (int32_t)V;
            if (out[i] == HY_TOK_MASK) nmask++;
            else if (out[i] == ids[i]) nkeep++;
            else { nrand++; range_ok &= out[i] >= HY_TOK_NRESERVED; }
        }
        empty += row == 0;
    }
    CHECK(n == chosen, "returned %zu, counted %zu", chosen, n);
    CHECK(pad_ok, "padding is never chosen nor changed");
    CHECK(range_ok, "targets are the original ids; replacements are words");
    CHECK(empty == 0, "%zu rows without a predicted position", empty);
    double rate = (double)n / (double)tokens;
    /* ~11.6k tokens: std of the rate ~0.0033 (plus the forced one-token rows) */
    CHECK(fabs(rate - 0.15) < 0.015, "mask rate %.4f", rate);
    CHECK(fabs((double)nmask / (double)n - 0.8) < 0.03, "[MASK] share %.3f", (double)nmask / (double)n);
    CHECK(fabs((double)nrand / (double)n - 0.1) < 0.025, "random share %.3f", (double)nrand / (double)n);
    printf("  mask: rate %.4f, [MASK] %.3f, random %.3f, kept %.3f of %zu positions\n", rate,
           (double)nmask / (double)n, (double)nrand / (double)n, (double)nkeep / (double)n, n);
    /* a sample's masks depend on (seed, stream, index) only: the rows reversed give the same */
    int32_t *rids = malloc(B * len * sizeof *rids), *rlens = malloc(B * sizeof *rlens);
    int64_t *rindex = malloc(B * sizeof *rindex);
    for (size_t b = 0; b < B; b++) {
        memcpy(rids + b * len, ids + (B - 1 - b) * len, len * sizeof *ids);
        rlens[b] = lens[B - 1 - b];
        rindex[b] = index[B - 1 - b];
    }
    hy_mlm_mask(out2, tg2, rids, rlens, rindex, B, len, V, &BERT, 7, 0);
    int same = 1;
    for (size_t b = 0; b < B; b++)
        same &= memcmp(out2 + b * len, out + (B - 1 - b) * len, len * sizeof *out) == 0 &&
                memcmp(tg2 + b * len, tg + (B - 1 - b) * len, len * sizeof *tg) == 0;
    CHECK(same, "masks follow the sample, not its place in the batch");
    hy_mlm_mask(out2, tg2, ids, lens, index, B, len, V, &BERT, 7, 1);
    CHECK(memcmp(tg, tg2, B * len * sizeof *tg) != 0, "another epoch masks other positions");
    hy_mlm_mask_config bad = {0.0, 0.8, 0.1};
    CHECK_FAIL(hy_mlm_mask_check(&bad), HY_ECONFIG, "pretrain: mask_rate must be in (0, 1] (got 0)");
    bad = (hy_mlm_mask_config){0.15, 0.8, 0.3};
    CHECK_FAIL(hy_mlm_mask_check(&bad), HY_ECONFIG,
               "pretrain: random_token must be in [0, 1 - mask_token] (got 0.3 with mask_token 0.8)");
    free(ids); free(lens); free(out); free(tg); free(out2); free(tg2); free(index);
    free(rids); free(rlens); free(rindex);
}

/* ===== the double reference of the head ===== */

static void ref_ln(double *out, const double *x, const float *w, const float *b, size_t D) {
    double m = 0, v = 0;
    for (size_t i = 0; i < D; i++) m += x[i];
    m /= (double)D;
    for (size_t i = 0; i < D; i++) v += (x[i] - m) * (x[i] - m);
    v /= (double)D;
    double r = 1.0 / sqrt(v + (double)HY_XFMR_LN_EPS);
    for (size_t i = 0; i < D; i++) out[i] = (x[i] - m) * r * (double)w[i] + (double)b[i];
}

/* mean cross-entropy over the predicted positions; logits (N, V) of them when non-NULL */
static double ref_mlm(const hy_mlm *h, const hy_xfmr *m, const hy_batch *in, size_t B,
                      const int32_t *tg, double *logits) {
    size_t D = h->D, V = h->V, len = in->len, T = 1 + len, N = 0;
    double *x = calloc(B * T * D, sizeof *x), *a = calloc(D, sizeof *a), *g = calloc(D, sizeof *g);
    double *u = calloc(D, sizeof *u), *z = calloc(V, sizeof *z);
    ref_xfmr_hidden(m, in, B, false, 0, x);
    double sum = 0;
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < len; t++) {
            int32_t y = tg[b * len + t];
            if (y < 0) continue;
            ref_ln(a, x + (b * T + 1 + t) * D, m->p.norm_w, m->p.norm_b, D);
            for (size_t o = 0; o < D; o++) {
                double s = (double)h->w[HY_MLM_DENSE_B][o];
                for (size_t i = 0; i < D; i++) s += (double)h->w[HY_MLM_DENSE_W][o * D + i] * a[i];
                g[o] = 0.5 * s * (1.0 + erf(s / sqrt(2.0)));
            }
            ref_ln(u, g, h->w[HY_MLM_NORM_W], h->w[HY_MLM_NORM_B], D);
            double mx = -INFINITY, se = 0;
            for (size_t j = 0; j < V; j++) {
                double s = (double)h->w[HY_MLM_BIAS][j];
                for (size_t i = 0; i < D; i++) s += u[i] * (double)m->p.tok_embed[j * D + i];
                z[j] = s;
                mx = fmax(mx, s);
            }
            for (size_t j = 0; j < V; j++) se += exp(z[j] - mx);
            sum += mx + log(se) - z[y];
            if (logits) memcpy(logits + N * V, z, V * sizeof *z);
            N++;
        }
    free(x); free(a); free(g); free(u); free(z);
    return N ? sum / (double)N : 0.0;
}

/* ===== finite differences ===== */

typedef struct tiny {
    hy_xfmr m;
    hy_mlm h;
    size_t B, len;
    int32_t *ids, *lens, *tg;
    float *logits, *dhidden;
} tiny;

static void tiny_build(tiny *s) {
    hy_xfmr_config c = {.kind = HY_XFMR_TEXT, .vocab_size = 20, .max_len = 8, .d_model = 32,
                        .n_heads = 4, .depth = 2, .d_mlp = 48, .n_classes = 3};
    memset(s, 0, sizeof *s);
    s->B = 4;
    s->len = 6;
    CHECK_OK(hy_xfmr_new(&s->m, &c));
    CHECK_OK(hy_xfmr_alloc_acts(&s->m, s->B));
    hy_xfmr_init(&s->m, 42);
    CHECK_OK(hy_mlm_new(&s->h, &c));
    hy_mlm_init(&s->h, 43);
    /* perturb everything so norms, biases and embeddings are generic */
    for (size_t i = 0; i < s->m.n_params; i++)
        s->m.params[i] += 0.2f * (2.0f * hy_rng_uniform(&rng) - 1.0f);
    for (size_t i = 0; i < s->h.n_params; i++)
        s->h.params[i] += 0.2f * (2.0f * hy_rng_uniform(&rng) - 1.0f);
    size_t n = s->B * s->len;
    s->ids = malloc(n * sizeof *s->ids);
    s->lens = malloc(s->B * sizeof *s->lens);
    s->tg = malloc(n * sizeof *s->tg);
    s->logits = malloc(s->B * c.n_classes * sizeof(float));
    s->dhidden = malloc(s->B * (1 + s->len) * c.d_model * sizeof(float));
    static const int32_t lens[4] = {6, 3, 1, 0};
    int32_t *raw = malloc(n * sizeof *raw);
    int64_t index[4] = {0, 1, 2, 3};
    for (size_t b = 0; b < s->B; b++) {
        s->lens[b] = lens[b];
        for (size_t t = 0; t < s->len; t++)
            raw[b * s->len + t] = (int32_t)t < lens[b] ? (int32_t)(4 + hy_rng_below(&rng, 16)) : 0;
    }
    hy_mlm_mask_config mc = {0.5, 0.8, 0.1};   /* many positions in a tiny batch */
    hy_mlm_mask(s->ids, s->tg, raw, s->lens, index, s->B, s->len, 20, &mc, 5, 0);
    free(raw);
}

static void tiny_free(tiny *s) {
    hy_xfmr_release(&s->m);
    hy_mlm_release(&s->h);
    free(s->ids); free(s->lens); free(s->tg); free(s->logits); free(s->dhidden);
}

static double tiny_ref_loss(tiny *s) {
    hy_batch in = {.ids = s->ids, .lengths = s->lens, .len = s->len};
    return ref_mlm(&s->h, &s->m, &in, s->B, s->tg, NULL);
}

/* forward + loss + backward of the engine; returns the float-path loss */
static double tiny_backward(tiny *s) {
    hy_batch in = {.ids = s->ids, .lengths = s->lens, .len = s->len};
    hy_xfmr_zero_grad(&s->m);
    memset(s->h.grads, 0, s->h.n_params * sizeof(float));
    CHECK_OK(hy_xfmr_forward(&s->m, &in, s->B, s->logits));
    double loss = 0;
    size_t correct = 0, n = 0;
    CHECK_OK(hy_mlm_loss(&s->h, &s->m, s->tg, s->B, s->len, true, s->dhidden, &loss, &correct,
                         &n));
    CHECK_OK(hy_xfmr_backward_hidden(&s->m, NULL, s->dhidden));
    return loss;
}

/* Tolerances as the whole-model rows of test_grad.c (float backward through L blocks): metric
 * |ga - gn| / max(|ga| + |gn|, 1e-3 x the largest |gradient|) <= 2e-3. */
#define FD_EPS 1e-3
#define FD_TOL 2e-3
#define FD_SAMPLES 4

typedef struct probe_in { const char *name; float *x, *g; size_t n; } probe_in;

static void test_grad(void) {
    tiny s;
    tiny_build(&s);
    double lf = tiny_backward(&s), lr = tiny_ref_loss(&s);
    CHECK(fabs(lf - lr) < 1e-5 * fmax(1.0, fabs(lr)), "float loss %.9g vs double %.9g", lf, lr);
    probe_in ins[64];
    size_t nin = 0;
    for (size_t i = 0; i < s.m.n_tensors; i++) {
        const hy_param *p = &s.m.table[i];
        if (strncmp(p->name, "head.", 5) == 0) continue;   /* the classifier gets no gradient */
        ins[nin++] = (probe_in){p->name, s.m.params + p->offset, s.m.grads + p->offset, p->numel};
    }
    for (size_t i = 0; i < HY_MLM_N; i++)
        ins[nin++] = (probe_in){s.h.table[i].name, s.h.w[i], s.h.g[i], s.h.table[i].numel};
    double gmax = 0;
    for (size_t k = 0; k < nin; k++)
        for (size_t i = 0; i < ins[k].n; i++) gmax = fmax(gmax, fabs((double)ins[k].g[i]));
    /* the classifier head's gradient is exactly zero: MLM does not touch it */
    int64_t hw = hy_xfmr_param_index(&s.m, "head.weight");
    const hy_param *hp = &s.m.table[hw];
    double hmax = 0;
    for (size_t i = 0; i < hp->numel; i++) hmax = fmax(hmax, fabs((double)s.m.grads[hp->offset + i]));
    CHECK(hmax == 0.0, "head.weight gradient %g, want exactly 0", hmax);
    double floor = fmax(1e-4, 1e-3 * gmax), worst = 0;
    const char *wname = "";
    size_t wi = 0, probes = 0;
    double wga = 0, wgn = 0;
    for (size_t k = 0; k < nin; k++) {
        size_t cnt = ins[k].n < FD_SAMPLES ? ins[k].n : FD_SAMPLES;
        for (size_t c = 0; c < cnt; c++) {
            size_t i = (size_t)hy_rng_below(&rng, ins[k].n);
            if (strcmp(ins[k].name, "tok_embed.weight") == 0 && c == 0)
                i = (size_t)HY_TOK_MASK * s.h.D + c;   /* the [MASK] row is always used */
            float x0 = ins[k].x[i], xp = x0 + (float)FD_EPS, xm = x0 - (float)FD_EPS;
            ins[k].x[i] = xp;
            double Lp = tiny_ref_loss(&s);
            ins[k].x[i] = xm;
            double Lm = tiny_ref_loss(&s);
            ins[k].x[i] = x0;
            double gn = (Lp - Lm) / ((double)xp - (double)xm), ga = (double)ins[k].g[i];
            double e = fabs(ga - gn) / fmax(fabs(ga) + fabs(gn), floor);
            if (!isfinite(e)) e = INFINITY;
            probes++;
            if (e > worst) { worst = e; wname = ins[k].name; wi = i; wga = ga; wgn = gn; }
        }
    }
    CHECK(worst <= FD_TOL, "mlm grad: worst %.3g > %.0e at %s[%zu] (analytic %.9g, numeric %.9g)",
          worst, FD_TOL, wname, wi, wga, wgn);
    printf("  grad mlm: %zu probes over %zu tensors, worst rel err %.2e (tol %.0e)\n", probes, nin,
           worst, FD_TOL);
    /* a target out of range is a clean error */
    s.tg[0] = 20;
    double l;
    size_t c, n;
    CHECK_FAIL(hy_mlm_loss(&s.h, &s.m, s.tg, s.B, s.len, false, NULL, &l, &c, &n), HY_EINVAL,
               "mlm: target 20 of row 1, position 1 out of range [0, 20) (or -1: not predicted)");
    tiny_free(&s);
}

/* ===== the PyTorch fixture ===== */

static int read_into(hy_h5 *f, const char *name, float *dst, size_t n) {
    hy_tensor t = {0};
    hy_status st = hy_h5_read_as(f, name, HY_F32, &t);
    CHECK(st == HY_OK, "read %s: %s", name, hy_errmsg());
    int ok = st == HY_OK && hy_tensor_numel(&t) == n;
    CHECK(st != HY_OK || ok, "%s: %zu elements, want %zu", name, (size_t)hy_tensor_numel(&t), n);
    if (ok) memcpy(dst, t.data, n * sizeof(float));
    hy_tensor_release(&t);
    return ok;
}

static double maxabs(const float *p, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)p[i]));
    return m;
}

static void test_torch_fixture(void) {
    const char *path = "tests/ref/mlm_tiny.h5";
    hy_h5 f = {0};
    hy_xfmr m = {0};
    hy_mlm h = {0};
    hy_tensor ids = {0}, lens = {0}, tg = {0}, ref = {0};
    CHECK_OK(hy_h5_open(&f, path));
    if (!f.open) return;
    double atol = 0, rtol = 0;
    CHECK_OK(hy_h5_get_attr_f64(&f, "/", "atol", &atol));
    CHECK_OK(hy_h5_get_attr_f64(&f, "/", "rtol", &rtol));
    hy_xfmr_config c;
    CHECK_OK(hy_ckpt_read_config(&f, &c));
    CHECK_OK(hy_xfmr_new(&m, &c));
    {   /* the head needs the default encoder (its final LN, the CLS-shifted rows) */
        hy_xfmr_config cp = c;
        hy_mlm hp;
        cp.norm = HY_NORM_POST;
        CHECK_FAIL(hy_mlm_new(&hp, &cp), HY_ECONFIG,
                   "mlm: masked-language-model pretraining does not support model.norm post");
    }
    CHECK_OK(hy_mlm_new(&h, &c));
    char name[96], what[160];
    for (size_t i = 0; i < m.n_tensors; i++) {
        snprintf(name, sizeof name, "/param/%s", m.table[i].name);
        read_into(&f, name, m.params + m.table[i].offset, m.table[i].numel);
    }
    for (size_t i = 0; i < HY_MLM_N; i++) {
        snprintf(name, sizeof name, "/param/%s", h.table[i].name);
        read_into(&f, name, h.w[i], h.table[i].numel);
    }
    CHECK_OK(hy_h5_read_as(&f, "/in/ids", HY_I32, &ids));
    CHECK_OK(hy_h5_read_as(&f, "/in/lengths", HY_I32, &lens));
    CHECK_OK(hy_h5_read_as(&f, "/in/targets", HY_I32, &tg));
    size_t B = (size_t)ids.shape[0], len = (size_t)ids.shape[1], D = c.d_model, V = c.vocab_size;
    CHECK_OK(hy_xfmr_alloc_acts(&m, B));
    float *logits = malloc(B * c.n_classes * sizeof *logits);
    float *dh = malloc(B * (1 + len) * D * sizeof *dh);
    hy_batch in = {.ids = ids.data, .lengths = lens.data, .len = len};
    CHECK_OK(hy_xfmr_forward(&m, &in, B, logits));
    hy_xfmr_zero_grad(&m);
    double loss = 0;
    size_t correct = 0, n = 0;
    CHECK_OK(hy_mlm_loss(&h, &m, tg.data, B, len, true, dh, &loss, &correct, &n));
    CHECK_OK(hy_xfmr_backward_hidden(&m, NULL, dh));
    /* the masked rows' logits: the head's first chunk holds dlogits now, so recompute them with
     * a forward-only call on a copy of the head's output (u E^T + b) */
    CHECK_OK(hy_h5_read_as(&f, "/out/logits", HY_F32, &ref));
    if (ref.ndim == 2 && (size_t)ref.shape[0] == n && (size_t)ref.shape[1] == V) {
        float *z = malloc(n * V * sizeof *z);
        for (size_t r = 0; r < n; r++)
            for (size_t j = 0; j < V; j++) {
                double s2 = (double)h.w[HY_MLM_BIAS][j];
                for (size_t i = 0; i < D; i++)
                    s2 += (double)h.u[r * D + i] * (double)m.p.tok_embed[j * D + i];
                z[r * V + j] = (float)s2;
            }
        snprintf(what, sizeof what, "%s masked-position logits", path);
        check_close(what, z, ref.data, n * V, atol, 0.0);
        double md = 0;
        for (size_t i = 0; i < n * V; i++)
            md = fmax(md, fabs((double)z[i] - (double)((float *)ref.data)[i]));
        printf("  %s: %zu predicted positions, max |logit - torch| %.2e (atol %.0e)\n", path, n,
               md, atol);
        free(z);
    } else {
        CHECK(0, "%s: /out/logits is not [%zu, %zu]", path, n, V);
    }
    hy_tensor_release(&ref);
    CHECK_OK(hy_h5_read_as(&f, "/out/loss", HY_F64, &ref));
    double want = ((double *)ref.data)[0];
    CHECK(fabs(loss - want) <= 1e-6 + 1e-5 * fabs(want), "%s loss %.9g, torch %.9g", path, loss,
          want);
    printf("  %s: loss %.7f, torch %.7f\n", path, loss, want);
    hy_tensor_release(&ref);
    float *buf = malloc((m.n_params > h.n_params ? m.n_params : h.n_params) * sizeof *buf);
    for (size_t i = 0; i < m.n_tensors; i++) {
        const hy_param *p = &m.table[i];
        if (strncmp(p->name, "head.", 5) == 0) continue;
        snprintf(name, sizeof name, "/grad/%s", p->name);
        if (read_into(&f, name, buf, p->numel)) {
            snprintf(what, sizeof what, "%s grad %s", path, p->name);
            check_close(what, m.grads + p->offset, buf, p->numel, rtol * maxabs(buf, p->numel),
                        rtol);
        }
    }
    for (size_t i = 0; i < HY_MLM_N; i++) {
        snprintf(name, sizeof name, "/grad/%s", h.table[i].name);
        if (read_into(&f, name, buf, h.table[i].numel)) {
            snprintf(what, sizeof what, "%s grad %s", path, h.table[i].name);
            check_close(what, h.g[i], buf, h.table[i].numel,
                        rtol * maxabs(buf, h.table[i].numel), rtol);
        }
    }
    free(buf); free(logits); free(dh);
    hy_tensor_release(&ids); hy_tensor_release(&lens); hy_tensor_release(&tg);
    hy_mlm_release(&h);
    hy_xfmr_release(&m);
    hy_h5_close(&f);
}

/* ===== a tiny pretraining run ===== */

/* Sentences of a tiny grammar: word 4+k is followed by word 4+(k+1)%8 (8 words cycling), so a
 * masked word is predictable from its neighbours. The held-out MLM loss must fall well below
 * log(V) and accuracy rise far above chance. */
static void test_pretrain_learns(void) {
    size_t n = 256, L = 10, V = 16;
    int64_t sh[2] = {(int64_t)n, (int64_t)L}, s1[1] = {(int64_t)n};
    hy_tensor ids = {0}, lens = {0}, labels = {0};
    CHECK_OK(hy_tensor_alloc(&ids, HY_I32, 2, sh));
    CHECK_OK(hy_tensor_alloc(&lens, HY_I32, 1, s1));
    CHECK_OK(hy_tensor_alloc(&labels, HY_I32, 1, s1));
    int32_t *ip = ids.data, *lp = lens.data, *yp = labels.data;
    for (size_t i = 0; i < n; i++) {
        size_t k0 = (size_t)hy_rng_below(&rng, 8), len = 6 + i % 5;
        lp[i] = (int32_t)len;
        yp[i] = -1;
        for (size_t t = 0; t < L; t++) ip[i * L + t] = t < len ? (int32_t)(4 + (k0 + t) % 8) : 0;
    }
    hy_dataset ds = {0};
    CHECK_OK(hy_dataset_from_text(&ds, &ids, &lens, &labels, 0));
    hy_xfmr_config c = {.kind = HY_XFMR_TEXT, .vocab_size = V, .max_len = L, .d_model = 32,
                        .n_heads = 4, .depth = 2, .d_mlp = 64, .n_classes = 2};
    hy_xfmr m = {0};
    hy_mlm h = {0};
    CHECK_OK(hy_xfmr_new(&m, &c));
    hy_xfmr_init(&m, 1);
    CHECK_OK(hy_mlm_new(&h, &c));
    hy_mlm_init(&h, 2);
    hy_mlm_train_config tc = {.epochs = 60, .batch_size = 32, .warmup_epochs = 1, .grad_clip = 1,
                              .min_lr = 0, .optim = {5e-3, 0.9, 0.999, 1e-8, 0.01},
                              .schedule = HY_SCHED_COSINE, .mask = BERT, .seed = 3};
    double l0, a0, l1, a1;
    size_t np;
    CHECK_OK(hy_mlm_evaluate(&m, &h, &ds, 64, &BERT, 9, &l0, &a0, &np));
    hy_mlm_trainer t;
    CHECK_OK(hy_mlm_trainer_new(&t, &m, &h, &ds, &tc));
    for (uint64_t e = 0; e < tc.epochs && t.fit.model; e++) {
        hy_fit_start_epoch(&t.fit, e);
        size_t ran = 0;
        CHECK_OK(hy_fit_run(&t.fit, 1000, &ran));
    }
    hy_mlm_trainer_release(&t);
    CHECK_OK(hy_mlm_evaluate(&m, &h, &ds, 64, &BERT, 9, &l1, &a1, &np));
    printf("  pretrain: held-out MLM loss %.3f -> %.3f, accuracy %.3f -> %.3f (%zu positions)\n",
           l0, l1, a0, a1, np);
    CHECK(l1 < 0.5 * l0, "MLM loss %.3f -> %.3f", l0, l1);
    CHECK(a1 > 0.6, "MLM accuracy %.3f", a1);
    CHECK_FAIL(hy_mlm_trainer_new(&t, &m, &h, &ds, &(hy_mlm_train_config){.epochs = 0}),
               HY_EINVAL, "pretrain: epochs must be >= 1 (got 0)");
    hy_xfmr_config vit = check_tiny_vit();
    hy_mlm h2;
    CHECK_FAIL(hy_mlm_new(&h2, &vit), HY_ECONFIG,
               "mlm: masked-language-model pretraining needs a text model (model.kind text)");
    hy_mlm_release(&h);
    hy_xfmr_release(&m);
    hy_dataset_release(&ds);
    hy_tensor_release(&ids); hy_tensor_release(&lens); hy_tensor_release(&labels);
}

int main(void) {
    hy_rng_seed(&rng, check_seed());
    RUN(test_mask);
    RUN(test_grad);
    RUN(test_torch_fixture);
    RUN(test_pretrain_learns);
    return check_exit("test_mlm");
}
