/* test_gemm_bf16.c: the BF16 kernel (tensor/gemm_bf16.h): the C rounding bitwise the
 * instruction's, packing, the product against a double-precision sum of the BF16-rounded inputs
 * within the float32 accumulation bound (ragged rows, columns and K, K past one block, beta 0
 * and 1, padded strides, column offsets), its distance from the float32 product (the expected
 * BF16 error), the same bits whatever the split into tiles and the thread count, hy_gemm
 * taking a weight set's products there (and only those), and the switch that turns the path
 * off. Without AVX-512 BF16 the kernel checks are skipped and say so. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "check.h"
#include "ref_engine.h"
#include "tensor/base.h"
#include "tensor/gemm.h"
#include "tensor/gemm_bf16.h"
#include "tensor/rng.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

static hy_rng rng;

static float *rand_vec(size_t n, float scale) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = scale * (2.0f * hy_rng_uniform(&rng) - 1.0f);
    return p;
}

static float round_bf16(float x) { return hy_bf16_to_f32(hy_bf16_from_f32(x)); }

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#if HAVE_X86
__attribute__((target("avx512f,avx512bf16"))) static void cvt_insn(const float *x, uint16_t *o) {
    __m512bh h = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x));
    _mm512_storeu_si512(o, (__m512i)h);
}
#endif

/* hy_bf16_from_f32: ties to even, denormals to signed zero, NaN quiet, infinities kept; and
 * bitwise VCVTNE2PS2BF16 on those values and on random ones */
static void test_bf16_round(void) {
    CHECK(hy_bf16_from_f32(1.0f) == 0x3f80, "1.0");
    CHECK(hy_bf16_from_f32(from_bits(0x3f808000u)) == 0x3f80, "a tie rounds to the even 0x3f80");
    CHECK(hy_bf16_from_f32(from_bits(0x3f818000u)) == 0x3f82, "a tie rounds to the even 0x3f82");
    CHECK(hy_bf16_from_f32(from_bits(0x3f808001u)) == 0x3f81, "above a tie rounds up");
    CHECK(hy_bf16_from_f32(from_bits(0x00400000u)) == 0x0000, "a denormal flushes to +0");
    CHECK(hy_bf16_from_f32(from_bits(0x80400000u)) == 0x8000, "a negative denormal to -0");
    CHECK(hy_bf16_from_f32(INFINITY) == 0x7f80 && hy_bf16_from_f32(-INFINITY) == 0xff80, "inf");
    CHECK(hy_bf16_from_f32(from_bits(0x7f7fffffu)) == 0x7f80, "FLT_MAX rounds to inf");
    uint16_t nan = hy_bf16_from_f32(from_bits(0x7f800001u));
    CHECK((nan & 0x7f80) == 0x7f80 && (nan & 0x7f) != 0, "a signalling NaN stays a NaN (%04x)",
          nan);
#if HAVE_X86
    if (!hy_bf16_available()) return;
    float x[64];
    const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x3f808001u, 0x00400000u, 0x80400000u,
                                0x7f800000u, 0xff800000u, 0x7f7fffffu, 0x00800000u, 0x0080ffffu,
                                0x80000000u, 0x00000000u, 0xbf7fffffu, 0x7f800001u, 0xffc00000u,
                                0x7fffffffu};
    for (int i = 0; i < 16; i++) x[i] = from_bits(special[i]);
    for (int i = 16; i < 64; i++) {
        uint32_t u = (uint32_t)hy_rng_u64(&rng);
        x[i] = from_bits(u);
    }
    uint16_t got[64];
    cvt_insn(x, got);
    cvt_insn(x + 32, got + 32);
    int bad = 0;
    for (int i = 0; i < 64; i++)
        if (got[i] != hy_bf16_from_f32(x[i])) {
            uint32_t u;
            memcpy(&u, &x[i], sizeof u);
            if (bad++ < 3)
                fprintf(stderr, "  %08x: instruction %04x, C %04x\n", (unsigned)u, got[i],
                        hy_bf16_from_f32(x[i]));
        }
    CHECK(bad == 0, "hy_bf16_from_f32 differs from VCVTNE2PS2BF16 on %d of 64 values", bad);
#endif
}

/* the packed layout gemm_bf16.h documents, element by element, pads included */
static void test_bf16_pack(void) {
    size_t N = 19, K = 5, ld = 7, kp = 6;
    float *W = rand_vec(N * ld, 1.0f);
    size_t len = hy_bf16_pack_len(N, K);
    CHECK(len == 2 * 16 * kp, "pack length %zu", len);
    uint16_t *p = hy_xmalloc_aligned(len * sizeof *p);
    hy_bf16_w w = hy_bf16_pack(p, W, ld, N, K);
    CHECK(w.n == N && w.k == K && w.kp == kp, "view %zu %zu %zu", w.n, w.k, w.kp);
    int bad = 0;
    for (size_t n = 0; n < 32; n++)
        for (size_t k = 0; k < kp; k++) {
            uint16_t want = n < N && k < K ? hy_bf16_from_f32(W[n * ld + k]) : 0;
            bad += p[(n / 16) * 16 * kp + ((k / 2) * 16 + n % 16) * 2 + k % 2] != want;
        }
    CHECK(bad == 0, "%d packed elements differ from the documented layout", bad);
    hy_free(p);
    free(W);
}

/* bound on |float32 accumulation - exact| for n terms of magnitude sum s: (n + 1) 2^-24 s, the
 * pairs' two roundings a step and the start value's */
static double acc_bound(size_t K, double s) { return (double)(K + 2) * 0x1p-24 * s + 1e-30; }

/* one product: C[:, c0:c1] (+)= A W[c0:c1]^T against the double sum of the rounded inputs,
 * and the float32 product's distance */
static void one_product(size_t M, size_t N, size_t K, size_t c0, size_t pad, float beta,
                        double *rel_fp32) {
    size_t lda = K + pad, ldw = K + pad, ldc = N + pad;
    float *A = rand_vec(M * lda, 1.0f), *W = rand_vec(N * ldw, 0.25f);
    float *C = rand_vec(M * ldc, 1.0f), *C0 = malloc(M * ldc * sizeof *C0);
    memcpy(C0, C, M * ldc * sizeof *C0);
    uint16_t *p = hy_xmalloc_aligned(hy_bf16_pack_len(N, K) * sizeof *p);
    hy_bf16_w w = hy_bf16_pack(p, W, ldw, N, K);
    hy_gemm_bf16_nt(M, c0, N, A, lda, &w, beta, C, ldc);
    size_t bad = 0, worst_i = 0;
    double worst = 0, num = 0, den = 0;
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < ldc; j++) {
            double got = (double)C[i * ldc + j];
            if (j < c0 || j >= N) {   /* outside the written columns: untouched */
                bad += got != (double)C0[i * ldc + j];
                continue;
            }
            double start = beta == 0.0f ? 0.0 : (double)C0[i * ldc + j], want = start;
            double s = fabs(start), f32 = start;
            for (size_t k = 0; k < K; k++) {
                double t = (double)round_bf16(A[i * lda + k]) * (double)round_bf16(W[j * ldw + k]);
                want += t;
                s += fabs(t);
                f32 += (double)A[i * lda + k] * (double)W[j * ldw + k];
            }
            double e = fabs(got - want) / acc_bound(K, s);
            if (e > worst) worst = e, worst_i = i * ldc + j;
            num += (got - f32) * (got - f32);
            den += f32 * f32;
        }
    CHECK(bad == 0, "%zux%zux%zu c0 %zu: %zu elements outside C[:, c0:N] changed", M, N, K, c0,
          bad);
    CHECK(worst <= 1.0, "%zux%zux%zu c0 %zu beta %g: element %zu is %.3g x the accumulation "
          "bound off the double sum of the rounded inputs", M, N, K, c0, (double)beta, worst_i,
          worst);
    if (rel_fp32) *rel_fp32 = den > 0 ? sqrt(num / den) : 0;
    hy_free(p);
    free(A); free(W); free(C); free(C0);
}

static void test_bf16_vs_ref(void) {
    if (!hy_bf16_available()) {
        fprintf(stderr, "test_gemm_bf16: no AVX-512 BF16 on this CPU: kernel checks skipped\n");
        return;
    }
    /* rows past MR and MC, columns past 64 and ragged, K odd / past KC / ragged */
    static const size_t shapes[][3] = {{1, 1, 1},     {7, 17, 3},     {6, 64, 32},
                                       {13, 33, 129}, {131, 70, 300}, {200, 130, 513},
                                       {5, 16, 1031}, {260, 200, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        one_product(M, N, K, 0, 0, 0.0f, NULL);
        one_product(M, N, K, 0, 3, 1.0f, NULL);
        if (N > 16) one_product(M, N, K, 16, 1, 1.0f, NULL);
        if (N > 32) one_product(M, N, K, 32, 0, 0.0f, NULL);
    }
    /* against float32: BF16 rounds each input by <= 2^-9 relative, so a sum of K random terms
     * moves by about 2^-9 (sqrt 2 / sqrt 3) ~ 2e-3 of its size; well below 1e-2, never 0 */
    double rel;
    one_product(64, 96, 384, 0, 0, 0.0f, &rel);
    fprintf(stderr, "test_gemm_bf16: relative distance from float32 at 64x96x384: %.2e\n", rel);
    CHECK(rel > 1e-4 && rel < 1e-2, "BF16 vs float32 relative distance %.3g", rel);
}

/* the same bits whatever the split into tiles (rows and 16-column groups) and the threads */
static void test_bf16_tiles(void) {
    if (!hy_bf16_available()) return;
    size_t M = 301, N = 208, K = 600;
    float *A = rand_vec(M * K, 1.0f), *W = rand_vec(N * K, 0.25f);
    float *C0 = rand_vec(M * N, 1.0f), *want = malloc(M * N * sizeof *want);
    float *got = malloc(M * N * sizeof *got);
    uint16_t *p = hy_xmalloc_aligned(hy_bf16_pack_len(N, K) * sizeof *p);
    hy_bf16_w w = hy_bf16_pack(p, W, K, N, K);
    memcpy(want, C0, M * N * sizeof *want);
    hy_gemm_bf16_nt(M, 0, N, A, K, &w, 1.0f, want, N);
    static const size_t tiles[][2] = {{1, 16}, {7, 48}, {64, 64}, {128, 112}, {300, 32}};
    for (int nt = 1; nt <= 3; nt++)
        for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
            size_t rt = tiles[t][0], ct = tiles[t][1];
            size_t nr = (M + rt - 1) / rt, nc = (N + ct - 1) / ct;
            memcpy(got, C0, M * N * sizeof *got);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
            for (size_t i = 0; i < nr * nc; i++) {
                size_t r0 = i / nc * rt, c0 = i % nc * ct;
                size_t r1 = r0 + rt < M ? r0 + rt : M, c1 = c0 + ct < N ? c0 + ct : N;
                hy_gemm_bf16_nt(r1 - r0, c0, c1, A + r0 * K, K, &w, 1.0f, got + r0 * N, N);
            }
            CHECK(memcmp(got, want, M * N * sizeof *got) == 0,
                  "tiles %zu x %zu on %d threads differ from one call", rt, ct, nt);
        }
    hy_free(p);
    free(A); free(W); free(C0); free(want); free(got);
}

/* hy_gemm with a set in use: a product whose B the set holds runs in the kernel (bitwise one
 * hy_gemm_bf16_nt call, whatever the tiling: row tiles, column tiles, a small product; 1, 2 and
 * 3 threads); B not in the set, another ldb or alpha, or the path switched off: float32's bits */
static void test_bf16_gemm_set(void) {
    if (!hy_bf16_available()) return;
    static const size_t shapes[][3] = {{300, 200, 64}, {96, 520, 400}, {17, 384, 128},
                                       {5, 7, 3}};
    int threads0 = hy_threads();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *A = rand_vec(M * K, 1.0f), *W = rand_vec(N * K, 0.25f), *W2 = rand_vec(N * K, 1);
        float *want = malloc(M * N * sizeof *want), *got = malloc(M * N * sizeof *got);
        float *f32 = malloc(M * N * sizeof *f32);
        const float *ws[2] = {W2, W};
        size_t rows[2] = {N, N}, cols[2] = {K, K};
        hy_bf16_set set;
        CHECK_OK(hy_bf16_set_build(&set, ws, rows, cols, 2));
        hy_bf16_w w = set.pk[set.w[0] == W ? 0 : 1];
        CHECK(set.n == 2 && w.n == N && w.k == K, "set of two weights: n %zu", set.n);
        hy_gemm_bf16_nt(M, 0, N, A, K, &w, 0.0f, want, N);
        hy_gemm(CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, W, K, 0.0f, f32, N);
        CHECK(hy_bf16_use(&set) == NULL, "a set was in use before");
        for (int nt = 1; nt <= 3; nt++) {
            hy_threads_init(nt);
            hy_gemm(CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, W, K, 0.0f, got, N);
            CHECK(memcmp(got, want, M * N * sizeof *got) == 0,
                  "%zux%zux%zu on %d threads: hy_gemm with the set is not the kernel's bits", M,
                  N, K, nt);
        }
        hy_bf16_use(NULL);
        hy_gemm(CblasNoTrans, CblasTrans, M, N, K, 0.5f, A, K, W, K, 0.0f, want, N);
        hy_bf16_use(&set);
        hy_gemm(CblasNoTrans, CblasTrans, M, N, K, 0.5f, A, K, W, K, 0.0f, got, N);
        CHECK(memcmp(got, want, M * N * sizeof *got) == 0, "%zux%zux%zu: alpha 0.5 not fp32",
              M, N, K);
        hy_bf16_disable(true);
        hy_gemm(CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, W, K, 0.0f, got, N);
        hy_bf16_disable(false);
        CHECK(memcmp(got, f32, M * N * sizeof *got) == 0, "%zux%zux%zu: switched off, not fp32",
              M, N, K);
        CHECK(hy_bf16_use(NULL) == &set, "the set in use changed");
        hy_gemm(CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, W, K, 0.0f, got, N);
        CHECK(memcmp(got, f32, M * N * sizeof *got) == 0, "%zux%zux%zu: no set, not fp32", M, N,
              K);
        hy_bf16_set_release(&set);
        free(A); free(W); free(W2); free(want); free(got); free(f32);
    }
    hy_threads_init(threads0);
}

/* hy_bf16_disable: the path reports itself off (what a CPU without it sees) and back */
static void test_bf16_disable(void) {
    bool have = hy_bf16_available();
    hy_bf16_disable(true);
    CHECK(!hy_bf16_available(), "disabled, the path still reports itself available");
    hy_bf16_disable(false);
    CHECK(hy_bf16_available() == have, "re-enabled, availability changed");
}

int main(void) {
    hy_rng_seed(&rng, check_seed());
    RUN(test_bf16_round);
    RUN(test_bf16_pack);
    RUN(test_bf16_vs_ref);
    RUN(test_bf16_tiles);
    RUN(test_bf16_gemm_set);
    RUN(test_bf16_disable);
    return check_exit("test_gemm_bf16");
}
