/* test_layers.c: every layers.c kernel's forward against its double twin; dropout mask
 * statistics and thread independence; softmax of an all -inf row. Backward passes are checked
 * by test_grad.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/attn.h"
#include "tensor/base.h"
#include "check.h"
#include "tensor/gemm.h"
#include "nn/layers.h"
#include "ref_engine.h"
#include "tensor/rng.h"
#include "tensor/vmath.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* per-op tolerances: optimized float32 kernel vs double twin */
static const struct { const char *op; double atol, rtol; } TOL[] = {
    {"linear", 2e-5, 1e-5},
    {"layernorm", 2e-5, 2e-5},
    /* hy_erf's abs error 3.9e-7 times 0.5|x| (|x| <= 5.66 before erf saturates) = 1.1e-6 */
    {"gelu", 1.5e-6, 1e-6},
    /* tanhf's error (<= 2 ulp) and the float cubic: a few float32 ulps of |gelu_tanh| */
    {"gelu_tanh", 5e-7, 1e-6},
    {"softmax", 1e-7, 1e-6},
    {"ce", 1e-6, 1e-6},
    {"exact", 0, 0},
};
enum { T_LINEAR, T_LN, T_GELU, T_GELU_TANH, T_SOFTMAX, T_CE, T_EXACT };

static hy_rng rng;

static float *rand_vec(size_t n, float scale) {
    float *p = malloc((n + 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = scale * (2.0f * hy_rng_uniform(&rng) - 1.0f);
    return p;
}

static void compare(const char *what, int tol, const float *got, const double *want, size_t n) {
    float *w = malloc((n + 1) * sizeof *w);
    ref_to_float(w, want, n);
    check_close(what, got, w, n, TOL[tol].atol, TOL[tol].rtol);
    free(w);
}

/* the vectorisable erf/exp of vmath.h against double erf/exp over their whole useful range */
static void test_vmath(void) {
    double e_erf = 0, e_exp = 0;
    for (float x = -9.0f; x < 9.0f; x += 3e-4f)
        e_erf = fmax(e_erf, fabs((double)hy_erf(x) - erf((double)x)));
    for (float x = -87.0f; x < 88.0f; x += 2e-3f)
        e_exp = fmax(e_exp, fabs((double)hy_exp(x) - exp((double)x)) / exp((double)x));
    CHECK(e_erf < 4e-7, "hy_erf max abs error %.3g", e_erf);
    CHECK(e_exp < 1.5e-7, "hy_exp max rel error %.3g", e_exp);
    CHECK(hy_exp(-INFINITY) == 0.0f && hy_exp(-200.0f) == 0.0f && hy_exp(0.0f) == 1.0f,
          "hy_exp special values");
    CHECK(isnan(hy_exp(NAN)) && isnan(hy_erf(NAN)), "NaN in, NaN out (and no UB)");
    CHECK(hy_erf(INFINITY) == 1.0f && hy_erf(-INFINITY) == -1.0f && hy_erf(0.0f) == 0.0f,
          "hy_erf special values (%g)", (double)hy_erf(INFINITY));
}

static void test_linear(void) {
    size_t N = 37, Din = 64, Dout = 24;
    float *x = rand_vec(N * Din, 1), *w = rand_vec(Dout * Din, 0.5f), *b = rand_vec(Dout, 1);
    float *out = rand_vec(N * Dout, 100);
    double *want = malloc(N * Dout * sizeof *want);
    hy_linear_forward(out, x, w, b, N, Din, Dout);
    ref_linear(want, x, w, b, N, Din, Dout);
    compare("linear", T_LINEAR, out, want, N * Dout);
    hy_linear_forward(out, x, w, NULL, N, Din, Dout);
    ref_linear(want, x, w, NULL, N, Din, Dout);
    compare("linear no bias", T_LINEAR, out, want, N * Dout);
    free(x); free(w); free(b); free(out); free(want);
}

/* fc1 + GELU and fc2's backward + GELU' in one pass over each GEMM tile: bitwise the separate
 * passes, at shapes cut into several tiles (an odd width for the scalar tails); the bias
 * gradient is the plain column sum in row order */
static void test_linear_gelu_fused(void) {
    size_t N = 301, Din = 64, Dout = 203;
    float *x = rand_vec(N * Din, 1), *w = rand_vec(Dout * Din, 0.5f), *b = rand_vec(Dout, 1);
    float *h1 = malloc(N * Dout * sizeof *h1), *g1 = malloc(N * Dout * sizeof *g1);
    float *h2 = malloc(N * Dout * sizeof *h2), *g2 = malloc(N * Dout * sizeof *g2);
    hy_linear_gelu_forward(h1, g1, x, w, b, N, Din, Dout);
    hy_linear_forward(h2, x, w, b, N, Din, Dout);
    hy_gelu_forward(g2, h2, N * Dout);
    CHECK(memcmp(h1, h2, N * Dout * sizeof *h1) == 0 && memcmp(g1, g2, N * Dout * sizeof *g1) == 0,
          "fused fc1 + GELU differs from the separate passes");
    hy_linear_gelu_forward(h2, h2, x, w, b, N, Din, Dout);   /* in place (the fused model's) */
    CHECK(memcmp(h2, g2, N * Dout * sizeof *h2) == 0, "in-place fc1 + GELU differs");
    memcpy(h2, h1, N * Dout * sizeof *h2);
    /* backward of out = hg W2^T + b2 (hg = GELU(h1), W2 (Dout2, Dout)): dh = (dout W2) GELU'(h1) */
    size_t D2 = 48;
    float *w2 = rand_vec(D2 * Dout, 0.5f), *dout = rand_vec(N * D2, 1);
    float *dh1 = malloc(N * Dout * sizeof *dh1), *dh2 = malloc(N * Dout * sizeof *dh2);
    float *dw1 = calloc(D2 * Dout, sizeof *dw1), *dw2 = calloc(D2 * Dout, sizeof *dw2);
    float *db1 = calloc(D2, sizeof *db1), *db2 = calloc(D2, sizeof *db2);
    float *dbw = calloc(D2, sizeof *dbw);
    hy_linear_backward_gelu_set(dh1, dw1, db1, dout, g1, w2, h1, N, Dout, D2);
    hy_linear_backward_set(dh2, dw2, db2, dout, g1, w2, N, Dout, D2);
    hy_gelu_backward_set(dh2, dh2, h1, N * Dout);
    for (size_t n = 0; n < N; n++)
        for (size_t o = 0; o < D2; o++) dbw[o] += dout[n * D2 + o];
    CHECK(memcmp(dh1, dh2, N * Dout * sizeof *dh1) == 0, "fused GELU' differs from its pass");
    CHECK(memcmp(dw1, dw2, D2 * Dout * sizeof *dw1) == 0, "dW differs");
    CHECK(memcmp(db1, dbw, D2 * sizeof *db1) == 0 && memcmp(db2, dbw, D2 * sizeof *db2) == 0,
          "the bias gradient is not the column sum in row order");
    /* training's form: GELU' stored by the forward (over the pre-activation's buffer), the
     * backward multiplying by it: GELU(h1) and dh1 bitwise, in the product's tiles, as a
     * separate pass (an ensemble's), and in a small pass's two parts */
    float *d = malloc(N * Dout * sizeof *d), *gd = malloc(N * Dout * sizeof *gd);
    hy_linear_gelu_d_forward(d, gd, x, w, b, N, Din, Dout);
    CHECK(memcmp(gd, g1, N * Dout * sizeof *gd) == 0, "GELU with the stored GELU' differs");
    memset(dw2, 0, D2 * Dout * sizeof *dw2);
    memset(db2, 0, D2 * sizeof *db2);
    hy_linear_backward_dgelu_set(dh2, dw2, db2, dout, gd, w2, d, N, Dout, D2);
    CHECK(memcmp(dh2, dh1, N * Dout * sizeof *dh2) == 0, "the stored GELU' gives another dh");
    CHECK(memcmp(dw2, dw1, D2 * Dout * sizeof *dw2) == 0 && memcmp(db2, db1, D2 * sizeof *db2) == 0,
          "the stored GELU' changes dW or db");
    memcpy(h2, h1, N * Dout * sizeof *h2);
    hy_gelu_d_forward(g2, h2, N * Dout);
    CHECK(memcmp(g2, g1, N * Dout * sizeof *g2) == 0 && memcmp(h2, d, N * Dout * sizeof *h2) == 0,
          "the separate GELU + GELU' pass differs from the fused one");
    hy_linear_backward_set(dh2, dw2, db2, dout, g1, w2, N, Dout, D2);
    hy_gelu_backward_d_set(dh2, dh2, d, N * Dout);
    CHECK(memcmp(dh2, dh1, N * Dout * sizeof *dh2) == 0, "the separate GELU' product differs");
    size_t Ns = 17;   /* a small pass: below the 2^21 threshold, two column tiles */
    memset(h2, 0, N * Dout * sizeof *h2);
    memset(g2, 0, N * Dout * sizeof *g2);
    for (size_t part = 0; part < 2; part++)
        hy_linear_gelu_d_forward_part(h2, g2, x, w, b, Ns, Din, Dout, part, 2);
    hy_linear_gelu_d_forward(d, gd, x, w, b, Ns, Din, Dout);
    CHECK(memcmp(h2, d, Ns * Dout * sizeof *h2) == 0 && memcmp(g2, gd, Ns * Dout * sizeof *g2) == 0,
          "the two parts of fc1 + GELU + GELU' differ from the whole");
    free(x); free(w); free(b); free(h1); free(g1); free(h2); free(g2); free(w2); free(dout);
    free(dh1); free(dh2); free(dw1); free(dw2); free(db1); free(db2); free(dbw); free(d); free(gd);
}

/* the residual form in place (out == res: the fused model's residual stream) gives the bits of
 * the out-of-place form, above and below the products' 2^21 tiling threshold, and both are the
 * double reference res + in W^T + b */
static void test_linear_res_inplace(void) {
    static const size_t shapes[][3] = {{301, 128, 203}, {17, 64, 96}};
    for (size_t s = 0; s < 2; s++) {
        size_t N = shapes[s][0], Din = shapes[s][1], Dout = shapes[s][2];
        float *x = rand_vec(N * Din, 1), *w = rand_vec(Dout * Din, 0.5f), *b = rand_vec(Dout, 1);
        float *res = rand_vec(N * Dout, 2), *out = malloc(N * Dout * sizeof *out);
        float *inpl = malloc(N * Dout * sizeof *inpl);
        double *want = malloc(N * Dout * sizeof *want);
        hy_linear_forward_res(out, x, w, b, res, N, Din, Dout);
        ref_linear(want, x, w, b, N, Din, Dout);
        for (size_t i = 0; i < N * Dout; i++) want[i] += (double)res[i];
        compare("linear + residual", T_LINEAR, out, want, N * Dout);
        memcpy(inpl, res, N * Dout * sizeof *inpl);
        hy_linear_forward_res(inpl, x, w, b, inpl, N, Din, Dout);
        CHECK(memcmp(inpl, out, N * Dout * sizeof *out) == 0,
              "%zu x %zu x %zu: the residual in place differs from out of place", N, Dout, Din);
        free(x); free(w); free(b); free(res); free(out); free(inpl); free(want);
    }
}

/* the residual product with the LayerNorm in its epilogue: bitwise the two calls, for tiles of
 * whole rows (vit-fm's proj at batch 128: 2176 x 128 x 128; its fc2, K = 512, in place) and
 * for column tiles (the LayerNorm after the product: 129 x 128 x 128, 2^21 multiply-adds) */
static void test_linear_res_ln(void) {
    static const size_t shapes[][3] = {{2176, 128, 128}, {2176, 512, 128}, {129, 128, 128}};
    for (size_t s = 0; s < 3; s++) {
        size_t N = shapes[s][0], Din = shapes[s][1], D = shapes[s][2];
        size_t rt, ct;
        hy_gemm_tiling(N, D, Din, &rt, &ct);
        CHECK((ct == D) == (s < 2), "shape %zu: expected %s tiles", s,
              s < 2 ? "whole-row" : "column");
        float *x = rand_vec(N * Din, 1), *w = rand_vec(D * Din, 0.5f), *b = rand_vec(D, 1);
        float *res = rand_vec(N * D, 2), *lw = rand_vec(D, 1), *lb = rand_vec(D, 1);
        float *o1 = malloc(N * D * sizeof *o1), *o2 = malloc(N * D * sizeof *o2);
        float *l1 = malloc(N * D * sizeof *l1), *l2 = malloc(N * D * sizeof *l2);
        float *m1 = malloc(N * sizeof *m1), *m2 = malloc(N * sizeof *m2);
        float *r1 = malloc(N * sizeof *r1), *r2 = malloc(N * sizeof *r2);
        hy_linear_forward_res(o1, x, w, b, res, N, Din, D);
        hy_layernorm_forward(l1, m1, r1, o1, lw, lb, N, D, 1e-6f);
        if (s == 1) {   /* in place: out is the residual */
            memcpy(o2, res, N * D * sizeof *o2);
            hy_linear_forward_res_ln(o2, l2, m2, r2, x, w, b, o2, lw, lb, 1e-6f, N, Din, D);
        } else {
            hy_linear_forward_res_ln(o2, l2, m2, r2, x, w, b, res, lw, lb, 1e-6f, N, Din, D);
        }
        CHECK(memcmp(o1, o2, N * D * sizeof *o1) == 0, "shape %zu: the residual product differs",
              s);
        CHECK(memcmp(l1, l2, N * D * sizeof *l1) == 0 && memcmp(m1, m2, N * sizeof *m1) == 0 &&
                  memcmp(r1, r2, N * sizeof *r1) == 0,
              "shape %zu: the LayerNorm in the epilogue differs from its own pass", s);
        free(x); free(w); free(b); free(res); free(lw); free(lb); free(o1); free(o2); free(l1);
        free(l2); free(m1); free(m2); free(r1); free(r2);
    }
}

/* the inference MLP tile by tile: bitwise fc1 + GELU, then the residual fc2 (+ LayerNorm), at
 * vit-fm's batch-256 shape (whole-row tiles: the tiled path), at a shape that falls back (129
 * rows: column tiles), and at 960 rows (8 whole-row tiles, the last one short: 8 threads' scratch
 * tiles would not fit in h, so it falls back there; h is allocated to its N rows exactly, so
 * make asan catches a scratch tile past them), with and without the LayerNorm, at 1, 2 and 8
 * threads */
static void test_mlp_infer(void) {
    static const size_t rows[] = {4352, 129, 960};
    size_t D = 128, DM = 512;
    int nt0 = omp_get_max_threads();
    for (size_t s = 0; s < 3; s++) {
        size_t N = rows[s];
        float *x = rand_vec(N * D, 1), *w1 = rand_vec(DM * D, 0.3f), *b1 = rand_vec(DM, 1);
        float *w2 = rand_vec(D * DM, 0.2f), *b2 = rand_vec(D, 1), *res = rand_vec(N * D, 2);
        float *lw = rand_vec(D, 1), *lb = rand_vec(D, 1);
        float *h = malloc(N * DM * sizeof *h), *o1 = malloc(N * D * sizeof *o1);
        float *o2 = malloc(N * D * sizeof *o2), *l1 = malloc(N * D * sizeof *l1);
        float *l2 = malloc(N * D * sizeof *l2), *m1 = malloc(N * sizeof *m1);
        float *m2 = malloc(N * sizeof *m2), *r1 = malloc(N * sizeof *r1);
        float *r2 = malloc(N * sizeof *r2);
        hy_linear_gelu_forward(h, h, x, w1, b1, N, D, DM);
        hy_linear_forward_res(o1, h, w2, b2, res, N, DM, D);
        hy_layernorm_forward(l1, m1, r1, o1, lw, lb, N, D, 1e-6f);
        for (int th = 1; th <= 8; th *= 2) {
            if (th == 4) continue;
            omp_set_num_threads(th);
            hy_mlp_infer(o2, l2, m2, r2, lw, lb, 1e-6f, h, x, w1, b1, w2, b2, res, N, D, DM);
            CHECK(memcmp(o1, o2, N * D * sizeof *o1) == 0 &&
                      memcmp(l1, l2, N * D * sizeof *l1) == 0 &&
                      memcmp(m1, m2, N * sizeof *m1) == 0 && memcmp(r1, r2, N * sizeof *r1) == 0,
                  "%zu rows, %d threads: the tiled MLP (+ LN) differs from its separate calls", N,
                  th);
            memset(o2, 0, N * D * sizeof *o2);
            hy_mlp_infer(o2, NULL, NULL, NULL, NULL, NULL, 0.0f, h, x, w1, b1, w2, b2, res, N, D,
                         DM);
            CHECK(memcmp(o1, o2, N * D * sizeof *o1) == 0,
                  "%zu rows, %d threads: the tiled MLP differs from its separate calls", N, th);
        }
        omp_set_num_threads(nt0);
        free(x); free(w1); free(b1); free(w2); free(b2); free(res); free(lw); free(lb); free(h);
        free(o1); free(o2); free(l1); free(l2); free(m1); free(m2); free(r1); free(r2);
    }
}

/* the outputs test_block_forward compares (qkv, att, h, hg only when kept) */
typedef struct block_out {
    float *qkv, *att, *h, *hg, *ao, *xm, *ln2, *m2, *r2, *xo, *ln1, *m1, *r1;
} block_out;

static void block_out_alloc(block_out *o, size_t N, size_t D, size_t DM, size_t B, size_t NH,
                            size_t T) {
    o->qkv = calloc(N * 3 * D, sizeof(float)), o->att = calloc(B * NH * T * T, sizeof(float));
    o->h = calloc(N * DM, sizeof(float)), o->hg = calloc(N * DM, sizeof(float));
    o->ao = calloc(N * D, sizeof(float)), o->xm = calloc(N * D, sizeof(float));
    o->ln2 = calloc(N * D, sizeof(float)), o->xo = calloc(N * D, sizeof(float));
    o->ln1 = calloc(N * D, sizeof(float)), o->m2 = calloc(N, sizeof(float));
    o->r2 = calloc(N, sizeof(float)), o->m1 = calloc(N, sizeof(float));
    o->r1 = calloc(N, sizeof(float));
}

static void block_out_free(block_out *o) {
    free(o->qkv), free(o->att), free(o->h), free(o->hg), free(o->ao), free(o->xm);
    free(o->ln2), free(o->xo), free(o->ln1), free(o->m2), free(o->r2), free(o->m1);
    free(o->r1);
}

/* the kernels one after another, as xfmr.c's layer runs them without the tiled block: k's
 * operands, o's outputs (k->hg: kept; k->drop_*: dropout) */
static void block_ref(const hy_block *k, block_out *o) {
    size_t N = k->B * k->T, D = k->D, DM = k->DM;
    hy_linear_forward(o->qkv, k->in, k->qkv_w, k->qkv_b, N, D, 3 * D);
    hy_attn_forward(o->ao, k->hg ? o->att : NULL, o->qkv, k->gate, k->kvalid, k->B, k->T, D,
                    k->NH);
    if (k->drop_attn) {
        hy_linear_forward(o->xm, o->ao, k->proj_w, k->proj_b, N, D, D);
        hy_dropout_apply(o->xm, o->xm, k->res, k->drop_attn, N, D, k->p_attn);
        hy_layernorm_forward(o->ln2, o->m2, o->r2, o->xm, k->ln2_w, k->ln2_b, N, D, k->eps);
    } else {
        hy_linear_forward_res_ln(o->xm, o->ln2, o->m2, o->r2, o->ao, k->proj_w, k->proj_b,
                                 k->res, k->ln2_w, k->ln2_b, k->eps, N, D, D);
    }
    float *g = k->hg ? o->hg : o->h;
    if (k->hg) hy_linear_gelu_d_forward(o->h, o->hg, o->ln2, k->fc1_w, k->fc1_b, N, D, DM);
    else hy_linear_gelu_forward(o->h, o->h, o->ln2, k->fc1_w, k->fc1_b, N, D, DM);
    if (k->drop_fc1) hy_dropout_apply(g, g, NULL, k->drop_fc1, N, DM, k->p_mlp);
    if (k->drop_fc2) {
        hy_linear_forward(o->xo, g, k->fc2_w, k->fc2_b, N, DM, D);
        hy_dropout_apply(o->xo, o->xo, o->xm, k->drop_fc2, N, D, k->p_mlp);
        hy_layernorm_forward(o->ln1, o->m1, o->r1, o->xo, k->ln1_w, k->ln1_b, N, D, k->eps);
    } else {
        hy_linear_forward_res_ln(o->xo, o->ln1, o->m1, o->r1, g, k->fc2_w, k->fc2_b, o->xm,
                                 k->ln1_w, k->ln1_b, k->eps, N, DM, D);
    }
}

/* hy_block_forward against the kernels one after another (block_ref), bitwise: an image-like
 * shape (T = 17, samples straddling the threads' tiles), a text-like one (T = 30, key-padding
 * counts from 1 to T), at inference and in the training forward (qkv, probabilities, GELU' and
 * GELU kept), without and with dropout (attention and MLP sites), the residual stream in
 * place (res = xm = xo, without attention dropout) and in three buffers, with and without the
 * next LN1; at 1 thread (declined) and 2, 3 and 8 threads (taken when there are two tiles per
 * thread: the text-like shape has 10, declined at 8; the third shape one tile) */
static void test_block_forward(void) {
    static const struct { size_t B, T, D, NH; bool pad; } S[] = {
        {256, 17, 128, 8, false}, {40, 30, 64, 4, true}, {9, 17, 32, 2, false}};
    int nt0 = omp_get_max_threads();
    hy_rng base;
    hy_rng_seed(&base, 77);
    hy_rng ra = hy_rng_split(&base, 0), r1 = hy_rng_split(&base, 1), r2 = hy_rng_split(&base, 2);
    for (size_t s = 0; s < 3; s++) {
        size_t B = S[s].B, T = S[s].T, D = S[s].D, NH = S[s].NH, DM = 4 * D, N = B * T;
        size_t ND = N * D * sizeof(float), NS = N * sizeof(float), NQ = 3 * ND;
        size_t NH_ = N * DM * sizeof(float), NA = B * NH * T * T * sizeof(float);
        float *in = rand_vec(N * D, 1), *wq = rand_vec(3 * D * D, 0.3f), *bq = rand_vec(3 * D, 1);
        float *wp = rand_vec(D * D, 0.3f), *bp = rand_vec(D, 1), *res = rand_vec(N * D, 2);
        float *w1 = rand_vec(DM * D, 0.3f), *b1 = rand_vec(DM, 1), *w2 = rand_vec(D * DM, 0.2f);
        float *b2 = rand_vec(D, 1), *lw = rand_vec(D, 1), *lb = rand_vec(D, 1);
        float *nw = rand_vec(D, 1), *nb = rand_vec(D, 1), *gate = rand_vec(NH, 1);
        int32_t *kv = malloc(B * sizeof *kv);
        for (size_t b = 0; b < B; b++) kv[b] = (int32_t)(1 + hy_rng_below(&rng, T));
        const int32_t *kvp = S[s].pad ? kv : NULL;
        size_t nscr = 8 * (128 + T) * 3 * D;
        float *scr = malloc(nscr * sizeof *scr);
        block_out want[4], got;
        block_out_alloc(&got, N, D, DM, B, NH, T);
        for (int kd = 0; kd < 4; kd++) {   /* kept x dropout */
            block_out_alloc(&want[kd], N, D, DM, B, NH, T);
            hy_block k = {B, T, D, NH, DM, in, wq, bq, gate, kvp, NULL, NULL, NULL, wp, bp, res,
                          NULL, NULL, NULL, NULL, lw, lb, NULL, (kd & 1) ? want[kd].hg : NULL,
                          w1, b1, w2, b2, NULL, NULL, NULL, NULL, nw, nb, 1e-6f,
                          (kd & 2) ? &ra : NULL, (kd & 2) ? &r1 : NULL, (kd & 2) ? &r2 : NULL,
                          0.25f, 0.4f};
            block_ref(&k, &want[kd]);
        }
        for (int th = 1; th <= 8; th++) {
            if (th > 3 && th < 8) continue;
            omp_set_num_threads(th);
            for (int v = 0; v < 16; v++) {
                bool inplace = v & 1, next = v & 2, keep = v & 4, drop = v & 8;
                if (inplace && drop) continue;   /* attention dropout keeps xm beside x */
                const block_out *w = &want[(keep ? 1 : 0) + (drop ? 2 : 0)];
                memset(got.ao, 0, ND), memset(got.ln2, 0, ND), memset(got.xo, 0, ND);
                memset(got.qkv, 0, NQ), memset(got.att, 0, NA), memset(got.hg, 0, NH_);
                memset(got.xm, 0, ND);
                memcpy(got.ln1, in, ND);   /* the input, then the next LN1 over it */
                float *x = malloc(ND);
                memcpy(x, res, ND);
                float *xm = inplace ? x : got.xm, *xo = inplace ? x : got.xo;
                hy_block k = {B, T, D, NH, DM, got.ln1, wq, bq, gate, kvp, got.qkv, got.ao,
                              keep ? got.att : NULL, wp, bp, x, xm, got.ln2, got.m2, got.r2, lw,
                              lb, got.h, keep ? got.hg : NULL, w1, b1, w2, b2, xo,
                              next ? got.ln1 : NULL, got.m1, got.r1, nw, nb, 1e-6f,
                              drop ? &ra : NULL, drop ? &r1 : NULL, drop ? &r2 : NULL, 0.25f,
                              0.4f};
                bool taken = hy_block_forward(&k, scr, nscr);
                bool want_taken = th > 1 && (s == 0 || (s == 1 && th <= 3));
                CHECK(taken == want_taken, "shape %zu, %d threads: the tiled block %s", s, th,
                      want_taken ? "was declined" : "ran");
                if (taken)
                    CHECK(memcmp(w->ao, got.ao, ND) == 0 && memcmp(w->ln2, got.ln2, ND) == 0 &&
                              memcmp(w->m2, got.m2, NS) == 0 && memcmp(w->r2, got.r2, NS) == 0 &&
                              (inplace || memcmp(w->xm, got.xm, ND) == 0) &&
                              memcmp(w->xo, xo, ND) == 0 &&
                              (!next || (memcmp(w->ln1, got.ln1, ND) == 0 &&
                                         memcmp(w->m1, got.m1, NS) == 0 &&
                                         memcmp(w->r1, got.r1, NS) == 0)) &&
                              (!keep || (memcmp(w->qkv, got.qkv, NQ) == 0 &&
                                         memcmp(w->att, got.att, NA) == 0 &&
                                         memcmp(w->h, got.h, NH_) == 0 &&
                                         memcmp(w->hg, got.hg, NH_) == 0)),
                          "shape %zu, %d threads, in place %d, next LN1 %d, kept %d, dropout "
                          "%d: the tiled block differs from its kernels", s, th, inplace, next,
                          keep, drop);
                free(x);
            }
        }
        omp_set_num_threads(nt0);
        for (int kd = 0; kd < 4; kd++) block_out_free(&want[kd]);
        block_out_free(&got);
        free(in); free(wq); free(bq); free(wp); free(bp); free(res); free(w1); free(b1);
        free(w2); free(b2); free(lw); free(lb); free(nw); free(nb); free(gate); free(kv);
        free(scr);
    }
}

/* A linear's backward in one region (hy_linear_backward_set: both products' tiles; and
 * hy_linear_backward_ln: with the LayerNorm backward of din in the same region, each row
 * tile's rows while in cache) against the separate kernels, bitwise: din = dout W, dW += dout^T
 * in as hy_gemm computes them, db += the column sums row by row, then hy_layernorm_backward.
 * Shapes: row tiles of whole rows (vit-fm's fc1 and qkv at batch 128), column tiles (the
 * LayerNorm after the product), and a product too small for a region; 1, 2, 3 and 8 threads. */
static void test_linear_backward_fused(void) {
    static const struct { size_t N, Din, Dout; } S[] = {
        {2176, 128, 512}, {2176, 128, 384}, {816, 64, 256}, {60, 32, 64}};
    int nt0 = omp_get_max_threads();
    for (size_t s = 0; s < sizeof S / sizeof *S; s++) {
        size_t N = S[s].N, Di = S[s].Din, Do = S[s].Dout;
        float *dout = rand_vec(N * Do, 1), *in = rand_vec(N * Di, 1), *w = rand_vec(Do * Di, 0.3f);
        float *x = rand_vec(N * Di, 2), *lw = rand_vec(Di, 1), *dx0 = rand_vec(N * Di, 1);
        float *dw0 = rand_vec(Do * Di, 1), *db0 = rand_vec(Do, 1), *lg0 = rand_vec(2 * Di, 1);
        float *mean = malloc(N * sizeof *mean), *rstd = malloc(N * sizeof *rstd);
        for (size_t n = 0; n < N; n++) {
            mean[n] = 0.1f * x[n * Di];
            rstd[n] = 0.5f + 0.25f * (float)(n % 5);
        }
        /* the separate kernels */
        size_t nD = N * Di * sizeof(float), nW = Do * Di * sizeof(float);
        float *din = malloc(nD), *dw = malloc(nW), *db = malloc(Do * sizeof *db);
        float *dx = malloc(nD), *lg = malloc(2 * Di * sizeof *lg);
        memcpy(dw, dw0, nW), memcpy(db, db0, Do * sizeof *db);
        memcpy(dx, dx0, nD), memcpy(lg, lg0, 2 * Di * sizeof *lg);
        hy_gemm(CblasNoTrans, CblasNoTrans, N, Di, Do, 1.0f, dout, Do, w, Di, 0.0f, din, Di);
        hy_gemm(CblasTrans, CblasNoTrans, Do, Di, N, 1.0f, dout, Do, in, Di, 1.0f, dw, Di);
        for (size_t n = 0; n < N; n++)
            for (size_t o = 0; o < Do; o++) db[o] += dout[n * Do + o];
        hy_layernorm_backward(dx, lg, lg + Di, din, x, mean, rstd, lw, N, Di);
        float *gin = malloc(nD), *gw = malloc(nW), *gb = malloc(Do * sizeof *gb);
        float *gx = malloc(nD), *gl = malloc(2 * Di * sizeof *gl);
        for (int th = 1; th <= 8; th++) {
            if (th > 3 && th < 8) continue;
            omp_set_num_threads(th);
            for (int ln = 0; ln < 2; ln++) {
                memset(gin, 0xff, nD);   /* NaNs: every element must be written */
                memcpy(gw, dw0, nW), memcpy(gb, db0, Do * sizeof *gb);
                memcpy(gx, dx0, nD), memcpy(gl, lg0, 2 * Di * sizeof *gl);
                if (ln)
                    hy_linear_backward_ln(gx, gl, gl + Di, x, mean, rstd, lw, gin, gw, gb, dout,
                                          in, w, N, Di, Do);
                else
                    hy_linear_backward_set(gin, gw, gb, dout, in, w, N, Di, Do);
                CHECK(memcmp(gin, din, nD) == 0 && memcmp(gw, dw, nW) == 0 &&
                          memcmp(gb, db, Do * sizeof *gb) == 0 &&
                          (!ln || (memcmp(gx, dx, nD) == 0 &&
                                   memcmp(gl, lg, 2 * Di * sizeof *gl) == 0)),
                      "%zu x %zu x %zu, %d threads: %s differs from the separate kernels", N,
                      Di, Do, th, ln ? "hy_linear_backward_ln" : "hy_linear_backward_set");
            }
        }
        omp_set_num_threads(nt0);
        free(dout); free(in); free(w); free(x); free(lw); free(dx0); free(dw0); free(db0);
        free(lg0); free(mean); free(rstd); free(din); free(dw); free(db); free(dx); free(lg);
        free(gin); free(gw); free(gb); free(gx); free(gl);
    }
}

static void test_layernorm(void) {
    size_t N = 41, D = 128;
    float *x = rand_vec(N * D, 3), *w = rand_vec(D, 1), *b = rand_vec(D, 1);
    for (size_t i = 0; i < N * D; i++) x[i] += 5.0f;   /* an offset tests the two-pass variance */
    float *out = malloc(N * D * sizeof *out), *mean = malloc(N * sizeof *mean),
          *rstd = malloc(N * sizeof *rstd);
    double *want = malloc(N * D * sizeof *want), *wm = malloc(N * sizeof *wm),
           *wr = malloc(N * sizeof *wr);
    hy_layernorm_forward(out, mean, rstd, x, w, b, N, D, 1e-6f);
    ref_layernorm(want, wm, wr, x, w, b, N, D, 1e-6);
    compare("layernorm out", T_LN, out, want, N * D);
    compare("layernorm mean", T_LN, mean, wm, N);
    compare("layernorm rstd", T_LN, rstd, wr, N);
    /* in place (out aliases x) */
    hy_layernorm_forward(x, mean, rstd, x, w, b, N, D, 1e-6f);
    compare("layernorm in place", T_LN, x, want, N * D);
    free(x); free(w); free(b); free(out); free(mean); free(rstd); free(want); free(wm); free(wr);
    /* a width that is no multiple of 16 (the rows' scalar tails) */
    N = 9, D = 40;
    x = rand_vec(N * D, 3), w = rand_vec(D, 1), b = rand_vec(D, 1);
    out = malloc(N * D * sizeof *out), mean = malloc(N * sizeof *mean),
    rstd = malloc(N * sizeof *rstd);
    want = malloc(N * D * sizeof *want), wm = malloc(N * sizeof *wm), wr = malloc(N * sizeof *wr);
    hy_layernorm_forward(out, mean, rstd, x, w, b, N, D, 1e-6f);
    ref_layernorm(want, wm, wr, x, w, b, N, D, 1e-6);
    compare("layernorm out D 40", T_LN, out, want, N * D);
    compare("layernorm rstd D 40", T_LN, rstd, wr, N);
    free(x); free(w); free(b); free(out); free(mean); free(rstd); free(want); free(wm); free(wr);
}

static void test_gelu(void) {
    size_t n = 70001;   /* above the parallel threshold */
    float *x = rand_vec(n, 6), *out = malloc(n * sizeof *out);
    double *want = malloc(n * sizeof *want);
    hy_gelu_forward(out, x, n);
    ref_gelu(want, x, n);
    compare("gelu", T_GELU, out, want, n);
    /* exact erf form, not the tanh approximation: gelu(1) = 0.8413447460685429 */
    float one = 1.0f, g;
    hy_gelu_forward(&g, &one, 1);
    CHECK(fabs((double)g - 0.8413447460685429) < 1e-7, "gelu(1) = %.9g", (double)g);
    free(x); free(out); free(want);
}

/* the tanh approximation (act gelu_tanh) against its double definition, forward and derivative;
 * in place; distinct from the exact form */
static void test_gelu_tanh(void) {
    size_t n = 70001;   /* above the parallel threshold */
    float *x = rand_vec(n, 6), *out = malloc(n * sizeof *out), *dx = malloc(n * sizeof *dx);
    float *ones = malloc(n * sizeof *ones);
    double *want = malloc(n * sizeof *want), *dwant = malloc(n * sizeof *dwant);
    double k = sqrt(2.0 / acos(-1.0));
    for (size_t i = 0; i < n; i++) {
        double v = (double)x[i], t = tanh(k * (v + 0.044715 * v * v * v));
        want[i] = 0.5 * v * (1.0 + t);
        dwant[i] = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * v * v);
        ones[i] = 1.0f;
    }
    hy_gelu_tanh_forward(out, x, n);
    compare("gelu_tanh", T_GELU_TANH, out, want, n);
    hy_gelu_tanh_backward_set(dx, ones, x, n);
    compare("gelu_tanh'", T_GELU_TANH, dx, dwant, n);
    hy_gelu_tanh_backward_set(ones, ones, x, n);   /* dx aliasing dout */
    CHECK(memcmp(ones, dx, n * sizeof *dx) == 0, "gelu_tanh backward in place");
    hy_gelu_tanh_forward(x, x, n);
    CHECK(memcmp(x, out, n * sizeof *out) == 0, "gelu_tanh forward in place");
    /* gelu_tanh(1) = 0.8411919906082768, not the exact 0.8413447460685429 */
    float one = 1.0f, g;
    hy_gelu_tanh_forward(&g, &one, 1);
    CHECK(fabs((double)g - 0.8411919906082768) < 1e-7, "gelu_tanh(1) = %.9g", (double)g);
    /* far tails: the limits x and 0, derivative 1 and 0, never NaN */
    float big[4] = {-40.0f, 40.0f, -1e30f, 1e30f}, gb[4], db[4], one4[4] = {1, 1, 1, 1};
    hy_gelu_tanh_forward(gb, big, 4);
    hy_gelu_tanh_backward_set(db, one4, big, 4);
    CHECK(gb[0] == 0.0f && gb[1] == 40.0f && gb[2] == 0.0f && gb[3] == 1e30f, "tails %g %g %g %g",
          (double)gb[0], (double)gb[1], (double)gb[2], (double)gb[3]);
    CHECK(db[0] == 0.0f && db[1] == 1.0f && db[2] == 0.0f && db[3] == 1.0f, "tails' %g %g %g %g",
          (double)db[0], (double)db[1], (double)db[2], (double)db[3]);
    free(x); free(out); free(dx); free(ones); free(want); free(dwant);
}

static void test_softmax(void) {
    size_t N = 9, K = 13;
    float *x = rand_vec(N * K, 20), *out = malloc(N * K * sizeof *out);
    for (size_t k = 0; k < K; k++) x[3 * K + k] = -INFINITY;      /* every entry masked */
    x[5 * K + 2] = -INFINITY;                                      /* one masked entry */
    double *want = malloc(N * K * sizeof *want);
    hy_softmax_forward(out, x, N, K);
    ref_softmax(want, x, N, K);
    compare("softmax", T_SOFTMAX, out, want, N * K);
    for (size_t k = 0; k < K; k++)
        CHECK(out[3 * K + k] == 0.0f, "all -inf row gives %g", (double)out[3 * K + k]);
    free(x); free(out); free(want);
}

static void test_ce(void) {
    size_t N = 11, K = 10;
    float *x = rand_vec(N * K, 8), *probs = malloc(N * K * sizeof *probs);
    int32_t labels[11];
    for (size_t n = 0; n < N; n++) labels[n] = (int32_t)hy_rng_below(&rng, K);
    double *wp = malloc(N * K * sizeof *wp);
    static const float eps[] = {0.0f, 0.1f};
    for (size_t e = 0; e < 2; e++) {
        double loss = 0, want = ref_ce(wp, x, labels, N, K, (double)eps[e]);
        hy_ce_forward(&loss, probs, x, labels, N, K, eps[e]);
        CHECK(fabs(loss - want) <= 1e-6 * fabs(want) + 1e-7, "ce eps %g: %.12g vs %.12g",
              (double)eps[e], loss, want);
        compare("ce probs", T_CE, probs, wp, N * K);
    }
    free(x); free(probs); free(wp);
}

static void test_patches_and_assemble(void) {
    size_t B = 3, Cin = 2, S = 28, p = 7, G = S / p, NP = G * G, F = Cin * p * p, D = 8;
    float *img = rand_vec(B * Cin * S * S, 1), *pt = malloc(B * NP * F * sizeof *pt);
    double *want = malloc(B * NP * F * sizeof *want);
    hy_patch_extract(pt, img, B, Cin, S, p);
    ref_patches(want, img, B, Cin, S, p);
    compare("patches", T_EXACT, pt, want, B * NP * F);
    size_t T = NP + 1;
    float *emb = rand_vec(B * NP * D, 1), *cls = rand_vec(D, 1), *pos = rand_vec(T * D, 1);
    float *x = malloc(B * T * D * sizeof *x);
    double *wx = malloc(B * T * D * sizeof *wx);
    hy_embed_assemble_forward(x, emb, cls, pos, B, T, D);
    ref_assemble(wx, emb, cls, pos, B, T, D);
    compare("assemble", T_EXACT, x, wx, B * T * D);
    free(img); free(pt); free(want); free(emb); free(cls); free(pos); free(x); free(wx);
}

static void test_tokembed(void) {
    size_t V = 9, D = 5, N = 7;
    float *w = rand_vec(V * D, 1), *out = malloc(N * D * sizeof *out);
    int32_t ids[7] = {0, 3, 3, 8, 1, 2, 3};
    hy_tokembed_forward(out, ids, w, N, D);
    for (size_t n = 0; n < N; n++)
        check_close("tokembed row", out + n * D, w + (size_t)ids[n] * D, D, 0, 0);
    float *dw = calloc(V * D, sizeof *dw);
    hy_tokembed_backward(dw, out, ids, N, D);
    /* id 3 appears three times: its gradient row is 3 * its embedding */
    for (size_t i = 0; i < D; i++)
        CHECK(fabsf(dw[3 * D + i] - 3.0f * w[3 * D + i]) < 1e-6f,
              "tokembed backward accumulates repeated ids");
    for (size_t i = 0; i < D; i++) CHECK(dw[4 * D + i] == 0.0f, "unused id gets no gradient");
    free(w); free(out); free(dw);
}

static void test_dropout(void) {
    size_t rows = 300, cols = 257;   /* above the parallel threshold */
    float p = 0.25f;
    float *m1 = malloc(rows * cols * sizeof *m1), *m2 = malloc(rows * cols * sizeof *m2);
    hy_rng s;
    hy_rng_seed(&s, 99);
    hy_dropout_mask(m1, &s, rows, cols, p);
    size_t zeros = 0;
    for (size_t i = 0; i < rows * cols; i++) {
        CHECK(m1[i] == 0.0f || m1[i] == 1.0f / (1.0f - p), "mask value %g", (double)m1[i]);
        zeros += m1[i] == 0.0f;
    }
    double frac = (double)zeros / (double)(rows * cols);
    CHECK(fabs(frac - 0.25) < 0.01, "dropped fraction %.4f, want 0.25 +- 0.01", frac);
#ifdef _OPENMP
    int nt = omp_get_max_threads();
    omp_set_num_threads(2);
    hy_dropout_mask(m2, &s, rows, cols, p);
    omp_set_num_threads(nt);
#else
    hy_dropout_mask(m2, &s, rows, cols, p);
#endif
    CHECK(memcmp(m1, m2, rows * cols * sizeof *m1) == 0, "mask depends on the thread count");
    hy_dropout_mask(m2, &s, rows, cols, 0.0f);
    for (size_t i = 0; i < rows * cols; i++) CHECK(m2[i] == 1.0f, "p = 0 keeps everything");
    float x[4] = {1, 2, 3, 4}, mk[4] = {0, 2, 2, 0}, y[4], dx[4] = {1, 1, 1, 1};
    hy_dropout_forward(y, x, mk, 4);
    float wy[4] = {0, 4, 6, 0}, wd[4] = {1, 5, 7, 1};
    check_close("dropout forward", y, wy, 4, 0, 0);
    hy_dropout_backward(dx, wy, mk, 4);
    float wdx[4] = {1, 9, 13, 1};
    (void)wd;
    check_close("dropout backward adds", dx, wdx, 4, 0, 0);
    free(m1); free(m2);
}

/* the counter-based masks: hy_dropout_apply is exactly x * mask (+ res) with hy_dropout_mask's
 * mask, the mask is the scalar definition of layers.h, and its draws look independent: the
 * dropped fraction, pairs of neighbours in a row and in a column, other streams */
static void test_dropout_counter(void) {
    size_t rows = 200, cols = 300, n = rows * cols;
    float p = 0.3f, keep = 1.0f / (1.0f - p);
    float *mk = malloc(n * sizeof *mk), *x = malloc(n * sizeof *x), *res = malloc(n * sizeof *res);
    float *y = malloc(n * sizeof *y), *m2 = malloc(n * sizeof *m2);
    hy_rng s, s2;
    hy_rng_seed(&s, check_seed() + 3);
    hy_rng_seed(&s2, check_seed() + 4);
    hy_dropout_mask(mk, &s, rows, cols, p);
    uint32_t thr = (uint32_t)ceil((double)p * 16777216.0);
    size_t bad = 0, zeros = 0, zz_row = 0, zz_col = 0, same = 0;
    for (size_t r = 0; r < rows; r++) {
        uint64_t k = hy_rng_split_key(&s, r);
        CHECK(k == hy_rng_split(&s, r).key, "split_key differs from split");
        for (size_t c = 0; c < cols; c++) {
            float want = hy_ctr_bits24(k, (uint32_t)c) < thr ? 0.0f : keep;
            bad += mk[r * cols + c] != want;
        }
    }
    CHECK(bad == 0, "%zu mask elements differ from the definition", bad);
    hy_dropout_mask(m2, &s2, rows, cols, p);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            size_t i = r * cols + c;
            zeros += mk[i] == 0.0f;
            if (c + 1 < cols) zz_row += mk[i] == 0.0f && mk[i + 1] == 0.0f;
            if (r + 1 < rows) zz_col += mk[i] == 0.0f && mk[i + cols] == 0.0f;
            same += (mk[i] == 0.0f) == (m2[i] == 0.0f);
        }
    /* binomial standard deviations: ~0.002 for the fractions below */
    double f = (double)zeros / (double)n;
    double frow = (double)zz_row / (double)(rows * (cols - 1));
    double fcol = (double)zz_col / (double)((rows - 1) * cols);
    double fsame = (double)same / (double)n;
    double pp = (double)p;
    CHECK(fabs(f - pp) < 0.01, "dropped fraction %.4f, want %.2f", f, pp);
    CHECK(fabs(frow - pp * pp) < 0.01, "row neighbours both dropped %.4f, want %.4f", frow,
          pp * pp);
    CHECK(fabs(fcol - pp * pp) < 0.01, "column neighbours both dropped %.4f, want %.4f", fcol,
          pp * pp);
    CHECK(fabs(fsame - (pp * pp + (1 - pp) * (1 - pp))) < 0.01,
          "two streams agree on %.4f of the elements, want %.4f", fsame,
          pp * pp + (1 - pp) * (1 - pp));
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)hy_rng_normal(&rng);
        res[i] = (float)hy_rng_normal(&rng);
    }
    hy_dropout_apply(y, x, NULL, &s, rows, cols, p);
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += y[i] != x[i] * mk[i];
    CHECK(bad == 0, "apply: %zu elements differ from x * mask", bad);
    hy_dropout_apply(y, x, res, &s, rows, cols, p);
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += y[i] != res[i] + x[i] * mk[i];
    CHECK(bad == 0, "apply with res: %zu elements differ from res + x * mask", bad);
    /* in place, and the same with 2 threads */
    memcpy(m2, x, n * sizeof *x);
#ifdef _OPENMP
    int nt = omp_get_max_threads();
    omp_set_num_threads(2);
#endif
    hy_dropout_apply(m2, m2, res, &s, rows, cols, p);
#ifdef _OPENMP
    omp_set_num_threads(nt);
#endif
    CHECK(memcmp(m2, y, n * sizeof *y) == 0, "in place / 2 threads differ");
    hy_dropout_apply(y, x, NULL, &s, rows, cols, 0.0f);
    CHECK(memcmp(y, x, n * sizeof *x) == 0, "p = 0 is the identity");
    free(mk); free(x); free(res); free(y); free(m2);
}

int main(void) {
    hy_rng_seed(&rng, check_seed());
    RUN(test_vmath);
    RUN(test_linear);
    RUN(test_linear_gelu_fused);
    RUN(test_linear_res_inplace);
    RUN(test_linear_res_ln);
    RUN(test_mlp_infer);
    RUN(test_block_forward);
    RUN(test_linear_backward_fused);
    RUN(test_layernorm);
    RUN(test_gelu);
    RUN(test_gelu_tanh);
    RUN(test_softmax);
    RUN(test_ce);
    RUN(test_patches_and_assemble);
    RUN(test_tokembed);
    RUN(test_dropout);
    RUN(test_dropout_counter);
    return check_exit("test_layers");
}
