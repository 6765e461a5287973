/* test_attn.c: the fused attention forward against its double twin (vit-fm and vit-fm-tiny
 * shapes, text lengths with key padding, gates including 0), determinism across thread counts,
 * and the pruned-head contract of the backward (exactly zero q/k/v gradient). Gradients
 * themselves are checked by test_grad.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/attn.h"
#include "tensor/base.h"
#include "check.h"
#include "ref_engine.h"
#include "tensor/rng.h"
#ifdef _OPENMP
#include <omp.h>
#endif

static const struct { const char *op; double atol, rtol; } TOL[] = {
    {"attn out", 2e-6, 2e-5},
    {"attn probs", 1e-6, 2e-5},
};

static hy_rng rng;

static float *rand_vec(size_t n, float scale) {
    float *p = malloc((n + 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = scale * (2.0f * hy_rng_uniform(&rng) - 1.0f);
    return p;
}

static void one_case(size_t B, size_t T, size_t C, size_t NH, int masked) {
    float *qkv = rand_vec(B * T * 3 * C, 1.5f), *gate = rand_vec(NH, 1);
    gate[0] = 1.0f;
    gate[NH - 1] = 0.0f;
    int32_t *kv = NULL;
    if (masked) {
        kv = malloc(B * sizeof *kv);
        for (size_t b = 0; b < B; b++) kv[b] = (int32_t)(1 + hy_rng_below(&rng, T));
        kv[0] = 1;                 /* only CLS valid */
        kv[B - 1] = (int32_t)T;    /* nothing masked */
    }
    float *out = rand_vec(B * T * C, 50), *att = rand_vec(B * NH * T * T, 50);
    double *wo = malloc(B * T * C * sizeof *wo), *wa = malloc(B * NH * T * T * sizeof *wa);
    hy_attn_forward(out, att, qkv, gate, kv, B, T, C, NH);
    ref_attn(wo, wa, qkv, gate, kv, B, T, C, NH);
    /* padding query rows (t >= kv[b]): out rows exactly 0; att rows unwritten (still the fill
     * values), so they are set to the reference's zeros and only the valid rows are compared */
    if (kv)
        for (size_t b = 0; b < B; b++)
            for (size_t t = (size_t)kv[b]; t < T; t++) {
                for (size_t c = 0; c < C; c++)
                    CHECK(out[(b * T + t) * C + c] == 0.0f, "padding row %zu of sample %zu", t, b);
                for (size_t h = 0; h < NH; h++)
                    for (size_t j = 0; j < T; j++) att[((b * NH + h) * T + t) * T + j] = 0.0f;
            }
    float *f = malloc((B * NH * T * T + B * T * C) * sizeof *f);
    char what[96];
    snprintf(what, sizeof what, "attn out B%zu T%zu C%zu NH%zu mask %d", B, T, C, NH, masked);
    ref_to_float(f, wo, B * T * C);
    check_close(what, out, f, B * T * C, TOL[0].atol, TOL[0].rtol);
    snprintf(what, sizeof what, "attn probs B%zu T%zu C%zu NH%zu mask %d", B, T, C, NH, masked);
    ref_to_float(f, wa, B * NH * T * T);
    check_close(what, att, f, B * NH * T * T, TOL[1].atol, TOL[1].rtol);
    /* without att (inference) the same out, bit for bit */
    float *out2 = rand_vec(B * T * C, 50);
    hy_attn_forward(out2, NULL, qkv, gate, kv, B, T, C, NH);
    snprintf(what, sizeof what, "attn out without probs B%zu T%zu C%zu NH%zu mask %d", B, T, C, NH,
             masked);
    check_close(what, out2, out, B * T * C, 0, 0);
    free(out2);
    /* masked keys have probability exactly 0 */
    if (kv)
        for (size_t b = 0; b < B; b++)
            for (size_t r = 0; r < NH * T; r++)
                for (size_t j = (size_t)kv[b]; j < T; j++)
                    CHECK(att[(b * NH * T + r) * T + j] == 0.0f, "masked key %zu has weight", j);
    free(qkv); free(gate); free(kv); free(out); free(att); free(wo); free(wa); free(f);
}

static void test_forward_vs_ref(void) {
    one_case(3, 17, 128, 8, 0);   /* vit-fm */
    one_case(2, 17, 64, 8, 0);    /* vit-fm-tiny */
    one_case(4, 33, 64, 4, 1);    /* text, padded */
    one_case(2, 65, 128, 8, 1);   /* text-sst length */
    one_case(1, 1, 8, 2, 0);      /* CLS only */
}

/* same inputs, 1 and 2 threads: bitwise-identical outputs and gradients */
static void threads_bitwise(const int32_t *kv) {
    size_t B = 5, T = 17, C = 64, NH = 8;
    float *qkv = rand_vec(B * T * 3 * C, 1), *gate = rand_vec(NH, 1);
    float *dout = rand_vec(B * T * C, 1);
    float *o[2], *a[2], *dq[2], dg[2][8], part[40];
    for (int r = 0; r < 2; r++) {
#ifdef _OPENMP
        omp_set_num_threads(r + 1);
#endif
        o[r] = malloc(B * T * C * sizeof(float));
        a[r] = malloc(B * NH * T * T * sizeof(float));
        dq[r] = malloc(B * T * 3 * C * sizeof(float));
        for (size_t i = 0; i < B * T * 3 * C; i++) dq[r][i] = NAN;   /* written, not added */
        memset(dg[r], 0, sizeof dg[r]);
        hy_attn_forward(o[r], a[r], qkv, gate, kv, B, T, C, NH);
        hy_attn_backward(dq[r], dg[r], dout, qkv, a[r], gate, kv, part, B, T, C, NH);
    }
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
    CHECK(memcmp(o[0], o[1], B * T * C * sizeof(float)) == 0, "forward differs across threads");
    CHECK(memcmp(dq[0], dq[1], B * T * 3 * C * sizeof(float)) == 0, "dqkv differs across threads");
    CHECK(memcmp(dg[0], dg[1], sizeof dg[0]) == 0, "dgate differs across threads");
    for (int r = 0; r < 2; r++) { free(o[r]); free(a[r]); free(dq[r]); }
    free(qkv); free(gate); free(dout);
}
static void test_threads_bitwise(void) {
    static const int32_t kv[5] = {17, 9, 1, 12, 17};
    threads_bitwise(NULL);
    threads_bitwise(kv);   /* padded: rows past each length skipped */
}

/* gate 0: q/k/v slices of dqkv stay exactly zero; dgate is still non-zero */
static void test_pruned_head_zero_grad(void) {
    size_t B = 3, T = 9, C = 32, NH = 4, HS = C / NH, h0 = 2;
    float *qkv = rand_vec(B * T * 3 * C, 1), *dout = rand_vec(B * T * C, 1);
    float gate[4] = {1, 0.5f, 0, 1}, dg[4] = {0}, part[12];
    int32_t kv[3] = {9, 4, 1};
    float *out = malloc(B * T * C * sizeof *out), *att = malloc(B * NH * T * T * sizeof *att);
    float *dq = malloc(B * T * 3 * C * sizeof *dq);
    for (size_t i = 0; i < B * T * 3 * C; i++) dq[i] = NAN;   /* every element is written */
    hy_attn_forward(out, att, qkv, gate, kv, B, T, C, NH);
    for (size_t r = 0; r < B * T; r++)
        for (size_t d = 0; d < HS; d++)
            CHECK(out[r * C + h0 * HS + d] == 0.0f, "pruned head writes output");
    hy_attn_backward(dq, dg, dout, qkv, att, gate, kv, part, B, T, C, NH);
    size_t nz = 0;
    for (size_t r = 0; r < B * T; r++)
        for (size_t third = 0; third < 3; third++)
            for (size_t d = 0; d < HS; d++) nz += dq[r * 3 * C + third * C + h0 * HS + d] != 0.0f;
    CHECK(nz == 0, "%zu non-zero q/k/v gradients in the pruned head", nz);
    size_t nan = 0, nzm = 0;
    for (size_t i = 0; i < B * T * 3 * C; i++) nan += isnan(dq[i]) ? 1u : 0u;
    for (size_t b = 0; b < B; b++)   /* masked keys (t >= kv[b]) get no k/v gradient */
        for (size_t t = (size_t)kv[b]; t < T; t++)
            for (size_t i = C; i < 3 * C; i++) nzm += dq[(b * T + t) * 3 * C + i] != 0.0f;
    CHECK(nan == 0, "%zu elements of dqkv not written", nan);
    CHECK(nzm == 0, "%zu non-zero k/v gradients of masked keys", nzm);
    CHECK(dg[h0] != 0.0f, "dgate of a pruned head must still be computed");
    free(qkv); free(dout); free(out); free(att); free(dq);
}

int main(void) {
    hy_rng_seed(&rng, check_seed());
    RUN(test_forward_vs_ref);
    RUN(test_threads_bitwise);
    RUN(test_pruned_head_zero_grad);
    return check_exit("test_attn");
}
