/* test_gemm.c: hy_gemm against the double twin (every transpose pair, padded leading dims,
 * alpha/beta, K = 0; shapes cut into row tiles, column tiles or both), bitwise the same at 1, 2
 * and 3 threads, the small-row kernel bitwise its documented summation order, its per-tile
 * hooks covering every element of C once, and hy_gemm_grouped (ragged groups; validation
 * messages; nothing written when one group is bad). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/base.h"
#include "check.h"
#include "tensor/gemm.h"
#include "nn/layers.h"
#include "ref_engine.h"
#include "tensor/rng.h"

/* per-op tolerances (float32 GEMM vs double, K <= 300, inputs in [-1, 1]) */
static const struct { const char *op; double atol, rtol; } TOL[] = {
    {"gemm", 2e-5, 1e-5},
    {"grouped", 2e-5, 1e-5},
};

static hy_rng rng;

static float *rand_vec(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = 2.0f * hy_rng_uniform(&rng) - 1.0f;
    return p;
}

static void one_gemm(int ta, int tb, size_t M, size_t N, size_t K, size_t pad, float alpha,
                     float beta) {
    size_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    size_t lda = ac + pad, ldb = bc + pad, ldc = N + pad;
    float *A = rand_vec(ar * lda), *B = rand_vec(br * ldb), *C = rand_vec(M * ldc);
    float *C0 = malloc(M * ldc * sizeof *C0);
    double *want = malloc((M * ldc + 1) * sizeof *want);
    float *wantf = malloc((M * ldc + 1) * sizeof *wantf);
    memcpy(C0, C, M * ldc * sizeof *C0);
    ref_gemm(ta, tb, M, N, K, (double)alpha, A, lda, B, ldb, (double)beta, C0, ldc, want);
    /* padding columns of C must stay as they were */
    for (size_t i = 0; i < M; i++)
        for (size_t j = N; j < ldc; j++) want[i * ldc + j] = (double)C0[i * ldc + j];
    hy_gemm(ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A,
            lda, B, ldb, beta, C, ldc);
    ref_to_float(wantf, want, M * ldc);
    char what[96];
    snprintf(what, sizeof what, "gemm ta=%d tb=%d %zux%zux%zu pad %zu", ta, tb, M, N, K, pad);
    check_close(what, C, wantf, M * ldc, TOL[0].atol, TOL[0].rtol);
    free(A); free(B); free(C); free(C0); free(want); free(wantf);
}

static void test_gemm_vs_ref(void) {
    static const size_t shapes[][3] = {{1, 1, 1}, {17, 16, 17}, {7, 33, 129}, {64, 48, 300},
                                       {3, 5, 0}};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                one_gemm(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 0, 1.0f, 0.0f);
                one_gemm(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 3, 0.5f, 1.0f);
                one_gemm(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 1, -1.5f, 0.25f);
            }
}

/* shapes above the tiling threshold: row tiles, column tiles, both; tiled products agree with
 * the twin and are bitwise the same with 1, 2 and 3 threads */
static void test_gemm_tiled(void) {
    static const size_t shapes[][3] = {{300, 200, 64}, {96, 520, 400}, {1000, 48, 50},
                                       {17, 384, 128}};
    size_t rt, ct;
    hy_gemm_tiling(300, 200, 64, &rt, &ct);
    CHECK(rt < 300, "300x200x64 is cut into row tiles (rows %zu)", rt);
    hy_gemm_tiling(96, 520, 400, &rt, &ct);
    CHECK(rt == 96 && ct < 520 && ct % 16 == 0, "96x520x400: column tiles (%zu x %zu)", rt, ct);
    hy_gemm_tiling(17, 384, 128, &rt, &ct);
    CHECK(rt == 17 && ct == 192, "a batch-1 product is two column tiles (%zu x %zu)", rt, ct);
    hy_gemm_tiling(17, 48, 64, &rt, &ct);
    CHECK(rt == 17 && ct == 48, "a product below 2^16 multiply-adds is one tile (%zu x %zu)",
          rt, ct);
    int threads0 = hy_threads();
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                size_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                hy_threads_init(2);
                one_gemm(ta, tb, M, N, K, 1, 0.5f, 1.0f);
                size_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
                float *A = rand_vec(ar * ac), *B = rand_vec(br * bc), *C[3];
                for (int nt = 1; nt <= 3; nt++) {
                    hy_threads_init(nt);
                    C[nt - 1] = rand_vec(M * N);
                    hy_gemm(ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
                            K, 1.0f, A, ac, B, bc, 0.0f, C[nt - 1], N);
                }
                CHECK(memcmp(C[0], C[1], M * N * sizeof(float)) == 0 &&
                      memcmp(C[0], C[2], M * N * sizeof(float)) == 0,
                      "ta=%d tb=%d %zux%zux%zu: 1, 2, 3 threads differ", ta, tb, M, N, K);
                free(A); free(B); free(C[0]); free(C[1]); free(C[2]);
            }
    hy_threads_init(threads0);
}

/* a team's parts (hy_gemm_ex_part, parts 1..3, each part's tiles in turn) together write
 * bitwise what hy_gemm_ex writes, hooks included, and nothing outside C */
static void test_gemm_parts(void) {
    static const size_t shapes[][3] = {{17, 384, 128}, {17, 128, 512}, {300, 200, 64},
                                       {5, 7, 3}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ldc = N + 2;   /* room past C */
        float *A = rand_vec(M * K), *B = rand_vec(N * K), *bias = rand_vec(N);
        float *want = rand_vec(M * ldc), *got = malloc(M * ldc * sizeof *got);
        memcpy(got, want, M * ldc * sizeof *got);
        hy_linear_forward(want, A, B, bias, M, K, N);   /* ldc = N: the tight case below */
        for (size_t parts = 1; parts <= 3; parts++) {
            for (size_t i = 0; i < M * ldc; i++) got[i] = NAN;
            for (size_t p = 0; p < parts; p++)
                hy_linear_forward_part(got, NULL, A, B, bias, NULL, M, K, N, p, parts);
            CHECK(memcmp(got, want, M * N * sizeof(float)) == 0,
                  "%zux%zux%zu: %zu parts differ from the whole product", M, N, K, parts);
            size_t nan_tail = 0;
            for (size_t i = M * N; i < M * ldc; i++) nan_tail += isnan(got[i]) ? 1u : 0u;
            CHECK(nan_tail == M * ldc - M * N, "%zux%zux%zu: a part wrote past C", M, N, K);
        }
        free(A); free(B); free(bias); free(want); free(got);
    }
}

/* the order gemm.h promises for hy_gemm_small_nt, transcribed lane by lane: 16 partial sums in
 * k order (lane k % 16; the missing lanes of a partial last vector add 0 * 0), then the tree */
static float small_dot(const float *a, const float *b, size_t K) {
    float x[16] = {0};
    size_t kp = (K + 15) / 16 * 16;
    for (size_t k = 0; k < kp; k++)
        x[k % 16] = k < K ? fmaf(a[k], b[k], x[k % 16]) : fmaf(0.0f, 0.0f, x[k % 16]);
    float z[4];
    for (int i = 0; i < 4; i++) z[i] = (x[i] + x[8 + i]) + (x[4 + i] + x[12 + i]);
    return (z[0] + z[2]) + (z[1] + z[3]);
}

/* hy_gemm_small_nt: bitwise the transcription above for every tile shape the kernels have
 * (rows and columns 1..9 and past, K around the 16-lane vector), beta 0 (NaN in C ignored) and
 * 1, padded leading dims, nothing written outside C; close to the double twin; and the same
 * bits whether computed whole, column block by column block or row by row (the tilings
 * hy_gemm and a team use). This build's vector unit runs it: AVX-512 or AVX2 in release
 * builds, the portable path in `make asan`, the same transcription checked in both. */
static void test_gemm_small(void) {
    static const size_t Ms[] = {1, 2, 3, 4, 5, 7, 9, 17, 64};
    static const size_t Ns[] = {1, 2, 3, 4, 5, 6, 9, 16, 17, 33};
    static const size_t Ks[] = {1, 15, 16, 17, 49, 128, 300};
    size_t bad = 0, cases = 0;
    for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++)
        for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
            for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++)
                for (int beta1 = 0; beta1 < 2; beta1++) {
                    size_t M = Ms[mi], N = Ns[ni], K = Ks[ki], pad = (mi + ki) % 3;
                    size_t lda = K + pad, ldb = K + 2 * pad, ldc = N + pad;
                    float *A = rand_vec(M * lda), *B = rand_vec(N * ldb), *C = rand_vec(M * ldc);
                    float *C0 = malloc(M * ldc * sizeof *C0);
                    memcpy(C0, C, M * ldc * sizeof *C);
                    if (!beta1)
                        for (size_t i = 0; i < M; i++) C[i * ldc] = NAN;   /* ignored */
                    hy_gemm_small_nt(M, N, K, A, lda, B, ldb, beta1 ? 1.0f : 0.0f, C, ldc);
                    for (size_t i = 0; i < M; i++)
                        for (size_t j = 0; j < ldc; j++) {
                            float want = C0[i * ldc + j];
                            if (j < N) {
                                float d = small_dot(A + i * lda, B + j * ldb, K);
                                want = beta1 ? want + d : d;
                            }
                            float got = C[i * ldc + j];
                            bad += memcmp(&got, &want, sizeof got) != 0;
                        }
                    cases++;
                    free(A); free(B); free(C); free(C0);
                }
    CHECK(bad == 0, "hy_gemm_small_nt: %zu outputs of %zu shapes differ from the transcription",
          bad, cases);

    /* against the double twin, and split three ways */
    size_t M = 17, N = 384, K = 128;
    float *A = rand_vec(M * K), *B = rand_vec(N * K), *C = malloc(M * N * sizeof *C);
    float *cols = malloc(M * N * sizeof *cols), *rows = malloc(M * N * sizeof *rows);
    double *want = malloc(M * N * sizeof *want);
    float *wantf = malloc(M * N * sizeof *wantf);
    hy_gemm_small_nt(M, N, K, A, K, B, K, 0.0f, C, N);
    ref_gemm(0, 1, M, N, K, 1.0, A, K, B, K, 0.0, C, N, want);
    ref_to_float(wantf, want, M * N);
    check_close("hy_gemm_small_nt 17x384x128 against the double twin", C, wantf, M * N,
                TOL[0].atol, TOL[0].rtol);
    for (size_t c0 = 0; c0 < N; c0 += 48)   /* column blocks of 48, as a tile of C */
        hy_gemm_small_nt(M, 48, K, A, K, B + c0 * K, K, 0.0f, cols + c0, N);
    for (size_t r = 0; r < M; r++)
        hy_gemm_small_nt(1, N, K, A + r * K, K, B, K, 0.0f, rows + r * N, N);
    CHECK(memcmp(C, cols, M * N * sizeof *C) == 0 && memcmp(C, rows, M * N * sizeof *C) == 0,
          "hy_gemm_small_nt: column blocks or single rows give other bits than the whole");
    /* hy_gemm routes a linear's few-row product there: the same bits at 1, 2 and 3 threads */
    int threads0 = hy_threads();
    for (int nt = 1; nt <= 3; nt++) {
        hy_threads_init(nt);
        hy_gemm(CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, B, K, 0.0f, cols, N);
        CHECK(memcmp(C, cols, M * N * sizeof *C) == 0,
              "hy_gemm 17x384x128 (NoTrans, Trans) at %d threads is not hy_gemm_small_nt's", nt);
    }
    hy_threads_init(threads0);
    free(A); free(B); free(C); free(cols); free(rows); free(want); free(wantf);
    /* up to HY_GEMM_SMALL_ROWS rows inclusive, a whole product is hy_gemm_small_nt's */
    M = HY_GEMM_SMALL_ROWS, N = 64, K = 40;
    A = rand_vec(M * K), B = rand_vec(N * K), C = malloc(M * N * sizeof *C);
    cols = malloc(M * N * sizeof *cols);
    hy_gemm_small_nt(M, N, K, A, K, B, K, 0.0f, C, N);
    hy_gemm(CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, B, K, 0.0f, cols, N);
    CHECK(memcmp(C, cols, M * N * sizeof *C) == 0,
          "hy_gemm %zux%zux%zu (NoTrans, Trans) is not hy_gemm_small_nt's", M, N, K);
    free(A); free(B); free(C); free(cols);
}

/* pre counts each element's visits in w, post checks the product is there (C = 0 + A B) */
static void pre_count(const hy_gemm_epi *e, size_t r0, size_t r1, size_t c0, size_t c1) {
    for (size_t r = r0; r < r1; r++)
        for (size_t c = c0; c < c1; c++) {
            e->x[r * e->ld + c] += 1.0f;
            e->w[r * e->ld + c] = 0.0f;
        }
}
static void post_count(const hy_gemm_epi *e, size_t r0, size_t r1, size_t c0, size_t c1) {
    for (size_t r = r0; r < r1; r++)
        for (size_t c = c0; c < c1; c++) e->x[r * e->ld + c] += 2.0f * (e->w[r * e->ld + c] != 0.0f);
}

static void test_gemm_hooks_cover_once(void) {
    static const size_t shapes[][3] = {{300, 200, 64}, {96, 520, 400}, {5, 7, 3}};
    int threads0 = hy_threads();
    hy_threads_init(2);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *A = malloc(M * K * sizeof *A), *B = malloc(K * N * sizeof *B);
        float *C = malloc(M * N * sizeof *C), *cnt = calloc(M * N, sizeof *cnt);
        for (size_t i = 0; i < M * K; i++) A[i] = 1.0f;
        for (size_t i = 0; i < K * N; i++) B[i] = 1.0f;
        for (size_t i = 0; i < M * N; i++) C[i] = NAN;
        hy_gemm_epi e = {0};
        e.pre = pre_count;
        e.post = post_count;
        e.pre_kind = e.post_kind = 0;
        e.w = C;
        e.x = cnt;
        e.ld = N;
        hy_gemm_ex(CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, K, B, N, 1.0f, C, N, &e);
        size_t bad = 0;
        for (size_t i = 0; i < M * N; i++) bad += cnt[i] != 3.0f || C[i] != (float)K;
        CHECK(bad == 0, "%zux%zux%zu: %zu elements not hooked exactly once before and after "
              "their product", M, N, K, bad);
        free(A); free(B); free(C); free(cnt);
    }
    hy_threads_init(threads0);
}

static void test_gemm_beta0_ignores_nan(void) {
    float A[4] = {1, 2, 3, 4}, B[4] = {1, 0, 0, 1}, C[4] = {NAN, NAN, NAN, NAN};
    hy_gemm(CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, A, 2, B, 2, 0.0f, C, 2);
    float want[4] = {1, 2, 3, 4};
    check_close("beta 0 over NaN", C, want, 4, 0, 0);
}

/* ragged groups: different m, n, k, transposes and leading dims per group */
static void test_grouped_ragged(void) {
    enum { G = 4 };
    static const size_t dims[G][3] = {{17, 48, 128}, {17, 24, 128}, {5, 7, 3}, {34, 128, 40}};
    static const int tr[G][2] = {{0, 1}, {0, 0}, {1, 0}, {1, 1}};
    hy_gemm_desc g[G];
    float *A[G], *B[G], *C[G], *C0[G];
    double *want[G];
    for (size_t i = 0; i < G; i++) {
        size_t M = dims[i][0], N = dims[i][1], K = dims[i][2];
        int ta = tr[i][0], tb = tr[i][1];
        size_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
        A[i] = rand_vec(ar * ac);
        B[i] = rand_vec(br * bc);
        C[i] = rand_vec(M * N);
        C0[i] = malloc(M * N * sizeof(float));
        memcpy(C0[i], C[i], M * N * sizeof(float));
        want[i] = malloc(M * N * sizeof(double));
        float beta = i % 2 ? 1.0f : 0.0f, alpha = 1.0f + 0.5f * (float)i;
        g[i] = (hy_gemm_desc){.trans_a = ta ? CblasTrans : CblasNoTrans,
                              .trans_b = tb ? CblasTrans : CblasNoTrans,
                              .a = A[i], .a_rows = ar, .a_cols = ac,
                              .b = B[i], .b_rows = br, .b_cols = bc,
                              .c = C[i], .c_rows = M, .c_cols = N,
                              .alpha = alpha, .beta = beta};
        ref_gemm(ta, tb, M, N, K, (double)alpha, A[i], ac, B[i], bc, (double)beta, C0[i], N,
                 want[i]);
    }
    CHECK_OK(hy_gemm_grouped(g, G));
    for (size_t i = 0; i < G; i++) {
        size_t n = dims[i][0] * dims[i][1];
        float *wf = malloc(n * sizeof *wf);
        ref_to_float(wf, want[i], n);
        char what[32];
        snprintf(what, sizeof what, "group %zu", i + 1);
        check_close(what, C[i], wf, n, TOL[1].atol, TOL[1].rtol);
        free(wf); free(A[i]); free(B[i]); free(C[i]); free(C0[i]); free(want[i]);
    }
    CHECK_OK(hy_gemm_grouped(NULL, 0));
}

/* a bad group: exact message, and no group (not even the good ones before it) is written */
static void test_grouped_validation(void) {
    float a1[6] = {1, 2, 3, 4, 5, 6}, b1[6] = {1, 1, 1, 1, 1, 1}, c1[4] = {7, 7, 7, 7};
    float a2[8] = {0}, b2[8] = {0}, c2[4] = {9, 9, 9, 9};
    hy_gemm_desc g[2] = {
        {.trans_a = CblasNoTrans, .trans_b = CblasNoTrans, .a = a1, .a_rows = 2, .a_cols = 3,
         .b = b1, .b_rows = 3, .b_cols = 2, .c = c1, .c_rows = 2, .c_cols = 2, .alpha = 1},
        {.trans_a = CblasNoTrans, .trans_b = CblasNoTrans, .a = a2, .a_rows = 2, .a_cols = 4,
         .b = b2, .b_rows = 2, .b_cols = 4, .c = c2, .c_rows = 2, .c_cols = 4, .alpha = 1},
    };
    CHECK_FAIL(hy_gemm_grouped(g, 2), HY_EINVAL,
               "gemm: group 2: inner dims differ (op(A) is 2x4, op(B) is 2x4)");
    float u1[4] = {7, 7, 7, 7}, u2[4] = {9, 9, 9, 9};
    check_close("group 1 untouched", c1, u1, 4, 0, 0);
    check_close("group 2 untouched", c2, u2, 4, 0, 0);

    g[1].trans_b = CblasTrans;   /* op(B) is 4x2: inner ok, C must be 2x2 */
    CHECK_FAIL(hy_gemm_grouped(g, 2), HY_EINVAL,
               "gemm: group 2: C is 2x4, expected 2x2 (op(A) is 2x4, op(B) is 4x2)");
    g[1].c_cols = 2;
    g[1].ldc = 1;
    CHECK_FAIL(hy_gemm_grouped(g, 2), HY_EINVAL, "gemm: group 2: ldc 1 < C's 2 columns");
    g[1].ldc = 0;
    g[0].b = NULL;
    CHECK_FAIL(hy_gemm_grouped(g, 2), HY_EINVAL, "gemm: group 1: B is NULL (3x2)");
    check_close("group 1 still untouched", c1, u1, 4, 0, 0);
    g[0].b = b1;
    CHECK_OK(hy_gemm_grouped(g, 2));
    float w1[4] = {6, 6, 15, 15};
    check_close("group 1 computed", c1, w1, 4, 0, 0);
    CHECK_FAIL(hy_gemm_grouped(NULL, 3), HY_EINVAL,
               "gemm: 3 groups but the descriptor array is NULL");
}

int main(void) {
    hy_rng_seed(&rng, check_seed());
    RUN(test_gemm_vs_ref);
    RUN(test_gemm_tiled);
    RUN(test_gemm_parts);
    RUN(test_gemm_small);
    RUN(test_gemm_hooks_cover_once);
    RUN(test_gemm_beta0_ignores_nan);
    RUN(test_grouped_ragged);
    RUN(test_grouped_validation);
    return check_exit("test_gemm");
}
