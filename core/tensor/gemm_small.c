/* gemm_small.c: see gemm.h hy_gemm_small_nt. C (+)= A B^T for a few rows of A, read in place.
 *
 * Every output is a dot product of two contiguous rows (a row of A, a row of B: a linear
 * layer's input row and weight row), computed the same way on every build:
 *   - 16 partial sums, lane i summing a[k] b[k] for k = i, i + 16, i + 32, ... in k order, each
 *     step one fused multiply-add (the last, partial vector's missing lanes add 0 * 0);
 *   - the fixed tree  z_i = (x_i + x_{8+i}) + (x_{4+i} + x_{12+i}),  i = 0..3,
 *     out = (z_0 + z_2) + (z_1 + z_3);
 *   - C = out (beta 0) or C = C + out (beta 1).
 * AVX-512 builds run 16 lanes in one register, AVX2+FMA builds in two, others lane by lane with
 * fmaf: the same operations in the same order, so every build and every tiling gives the same
 * bits (tests/c/test_gemm.c checks each against a scalar transcription of the above). No
 * packing: OpenBLAS packs B on every call, which at a batch-1 pass's 17 rows costs about as
 * much as the multiply (17 x 384 x 128 on one Zen 5 core: OpenBLAS 63 GFLOP/s with its Haswell
 * kernels, 88 with its AVX-512 ones, this kernel 130; results/bench/README.md). Every loop over a
 * tile's rows, columns or lanes is fully unrolled (`#pragma GCC unroll`): the accumulators and
 * the reduction then stay in registers, where GCC otherwise keeps the arrays on the stack (100
 * -> 130 GFLOP/s at that shape); vkeep keeps a loaded row of B in its register. */
#include "tensor/gemm.h"

#include <math.h>
#include <string.h>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#define KV 16               /* lanes of a partial sum */

/* c[m ldc + n] (+)= out[m stride + n], m < mr, n < nr: a tile's reduced outputs one by one */
static inline __attribute__((always_inline)) void store_out(const float *out, int stride, int mr,
                                                            int nr, float beta, float *c,
                                                            size_t ldc) {
#pragma GCC unroll 16
    for (int m = 0; m < mr; m++)
#pragma GCC unroll 16
        for (int n = 0; n < nr; n++) {
            float *o = c + (size_t)m * ldc + n;
            *o = beta == 0.0f ? out[m * stride + n] : *o + out[m * stride + n];
        }
}

#if defined(__AVX512F__)
/* ===== 16 lanes in one register; tiles of up to 4 rows x 4 columns ===== */
#define NR 4
#define MR 4
typedef __m512 v16;
static inline v16 vzero(void) { return _mm512_setzero_ps(); }
static inline v16 vload(const float *p) { return _mm512_loadu_ps(p); }
static inline v16 vfma(v16 a, v16 b, v16 c) { return _mm512_fmadd_ps(a, b, c); }
/* a loaded vector kept in its register: without this the compiler folds the load into each of
 * the tile's multiply-adds that use it (4 loads instead of 1; load-bound) */
static inline v16 vkeep(v16 v) {
    __asm__("" : "+v"(v));
    return v;
}

/* the trees of 16 accumulators in one vector: after the four levels below, lane 4 j + p of
 * the result holds the tree of acc[j + 4 p] */
static inline v16 reduce16(const v16 acc[16]) {
    v16 p[8], q[4], r[2];
#pragma GCC unroll 16
    for (int i = 0; i < 8; i++) {   /* L0 + L2, L1 + L3 of two accumulators: y */
        v16 a = acc[2 * i], b = acc[2 * i + 1];
        p[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
    }
#pragma GCC unroll 16
    for (int i = 0; i < 4; i++) {   /* y_{0..3} + y_{4..7}: z of four accumulators */
        v16 c = p[2 * i], d = p[2 * i + 1];
        q[i] = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(3, 1, 3, 1)));
    }
    /* q[i] block j = z of accumulator 4 i + j; (z0 + z2, z1 + z3) of two accumulators */
#pragma GCC unroll 16
    for (int i = 0; i < 2; i++)
        r[i] = _mm512_add_ps(_mm512_unpacklo_ps(q[2 * i], q[2 * i + 1]),
                             _mm512_unpackhi_ps(q[2 * i], q[2 * i + 1]));
    /* r[0] block j = [w0(j), w0(4+j), w1(j), w1(4+j)], r[1] the same for 8 + j, 12 + j */
    __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(r[0]), _mm512_castps_pd(r[1]));
    __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(r[0]), _mm512_castps_pd(r[1]));
    return _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));
}
/* c[m ldc + n] (+)= the tree of acc[m NR + n], m < mr, n < nr: the accumulators go in
 * transposed (acc[4 m + n] at j + 4 p = m + 4 n), so that lane 4 m + n holds row m, column n
 * and a row of a whole tile is one 4-float store */
static inline __attribute__((always_inline)) void store_tile(const v16 acc[16], int mr, int nr,
                                                             float beta, float *c, size_t ldc) {
    v16 t[16];
#pragma GCC unroll 16
    for (int m = 0; m < 4; m++)
#pragma GCC unroll 16
        for (int n = 0; n < 4; n++) t[m + 4 * n] = acc[4 * m + n];
    v16 s = reduce16(t);
    if (nr == 4) {
        __m128 row[4] = {_mm512_castps512_ps128(s), _mm512_extractf32x4_ps(s, 1),
                         _mm512_extractf32x4_ps(s, 2), _mm512_extractf32x4_ps(s, 3)};
#pragma GCC unroll 16
        for (int m = 0; m < mr; m++) {
            float *o = c + (size_t)m * ldc;
            _mm_storeu_ps(o, beta == 0.0f ? row[m] : _mm_add_ps(_mm_loadu_ps(o), row[m]));
        }
        return;
    }
    float out[16];
    _mm512_storeu_ps(out, s);
    store_out(out, 4, mr, nr, beta, c, ldc);
}
#define NACC 16

#elif defined(__AVX2__) && defined(__FMA__)
/* ===== 16 lanes in two registers; tiles of up to 3 rows x 2 columns ===== */
#define NR 2
#define MR 3
typedef struct { __m256 lo, hi; } v16;
static inline v16 vzero(void) { return (v16){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
static inline v16 vload(const float *p) {
    return (v16){_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)};
}
static inline v16 vfma(v16 a, v16 b, v16 c) {
    return (v16){_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
static inline v16 vkeep(v16 v) {   /* as in the AVX-512 case */
    __asm__("" : "+x"(v.lo), "+x"(v.hi));
    return v;
}
/* z of one accumulator: (x_i + x_{8+i}) + (x_{4+i} + x_{12+i}) */
static inline __m128 zof(v16 a) {
    __m256 y = _mm256_add_ps(a.lo, a.hi);
    return _mm_add_ps(_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1));
}
/* out[0..3] = tree of accumulators a, b, c, d */
static inline __m128 reduce4(v16 a, v16 b, v16 c, v16 d) {
    __m128 za = zof(a), zb = zof(b), zc = zof(c), zd = zof(d);
    __m128 r0 = _mm_add_ps(_mm_unpacklo_ps(za, zb), _mm_unpackhi_ps(za, zb));
    __m128 r1 = _mm_add_ps(_mm_unpacklo_ps(zc, zd), _mm_unpackhi_ps(zc, zd));
    __m128d lo = _mm_unpacklo_pd(_mm_castps_pd(r0), _mm_castps_pd(r1));
    __m128d hi = _mm_unpackhi_pd(_mm_castps_pd(r0), _mm_castps_pd(r1));
    return _mm_add_ps(_mm_castpd_ps(lo), _mm_castpd_ps(hi));
}
#define NACC 8   /* 3 x 2 used, reduced in fours */
static inline void reduce16(const v16 acc[NACC], float out[NACC]) {
    _mm_storeu_ps(out, reduce4(acc[0], acc[1], acc[2], acc[3]));
    _mm_storeu_ps(out + 4, reduce4(acc[4], acc[5], acc[6], acc[7]));
}

#else
/* ===== portable: lane by lane ===== */
#define NR 2
#define MR 2
typedef struct { float f[KV]; } v16;
static inline v16 vzero(void) { return (v16){{0}}; }
static inline v16 vload(const float *p) {
    v16 v;
    memcpy(v.f, p, sizeof v.f);
    return v;
}
static inline v16 vfma(v16 a, v16 b, v16 c) {
#pragma GCC unroll 16
    for (int i = 0; i < KV; i++) c.f[i] = fmaf(a.f[i], b.f[i], c.f[i]);
    return c;
}
static inline v16 vkeep(v16 v) { return v; }
#define NACC 4
static inline void reduce16(const v16 acc[NACC], float out[NACC]) {
#pragma GCC unroll 16
    for (int a = 0; a < NACC; a++) {
        const float *x = acc[a].f;
        float z[4];
#pragma GCC unroll 16
        for (int i = 0; i < 4; i++) z[i] = (x[i] + x[8 + i]) + (x[4 + i] + x[12 + i]);
        out[a] = (z[0] + z[2]) + (z[1] + z[3]);
    }
}
#endif

#if !defined(__AVX512F__)
/* c[m ldc + n] (+)= the tree of acc[m NR + n], m < mr, n < nr */
static inline __attribute__((always_inline)) void store_tile(const v16 acc[NACC], int mr, int nr,
                                                             float beta, float *c, size_t ldc) {
    float out[NACC];
    reduce16(acc, out);
    store_out(out, NR, mr, nr, beta, c, ldc);
}
#endif

/* one tile: rows ar[0..mr), columns br[0..nr) (row pointers; mr <= MR, nr <= NR, constants
 * after inlining), K = kv * 16 + kt; c[m * ldc + n] (+)= the dot products */
static inline __attribute__((always_inline)) void tile_mn(int mr, int nr, const float *const *ar,
                                                          const float *const *br, size_t kv,
                                                          size_t kt, float beta, float *c,
                                                          size_t ldc) {
    v16 acc[NACC];
#pragma GCC unroll 16
    for (int i = 0; i < NACC; i++) acc[i] = vzero();
    for (size_t s = 0; s < kv; s++) {
        size_t k = s * KV;
        v16 b[NR];
#pragma GCC unroll 16
        for (int n = 0; n < nr; n++) b[n] = vkeep(vload(br[n] + k));
#pragma GCC unroll 16
        for (int m = 0; m < mr; m++) {
            v16 a = vload(ar[m] + k);
#pragma GCC unroll 16
            for (int n = 0; n < nr; n++) acc[m * NR + n] = vfma(a, b[n], acc[m * NR + n]);
        }
    }
    if (kt) {   /* the partial last vector: zeros past K */
        size_t k = kv * KV;
        float tb[NR][KV], ta[KV];
        v16 b[NR];
#pragma GCC unroll 16
        for (int n = 0; n < nr; n++) {
            memset(tb[n], 0, sizeof tb[n]);
            memcpy(tb[n], br[n] + k, kt * sizeof(float));
            b[n] = vload(tb[n]);
        }
#pragma GCC unroll 16
        for (int m = 0; m < mr; m++) {
            memset(ta, 0, sizeof ta);
            memcpy(ta, ar[m] + k, kt * sizeof(float));
            v16 a = vload(ta);
#pragma GCC unroll 16
            for (int n = 0; n < nr; n++) acc[m * NR + n] = vfma(a, b[n], acc[m * NR + n]);
        }
    }
    store_tile(acc, mr, nr, beta, c, ldc);
}

/* the tile shapes, each its own inlined copy */
static void tile_any(int mr, int nr, const float *const *ar, const float *const *br, size_t kv,
                     size_t kt, float beta, float *c, size_t ldc) {
#define CASE(M_, N_)                                                                              \
    if (mr == M_ && nr == N_) { tile_mn(M_, N_, ar, br, kv, kt, beta, c, ldc); return; }
#if MR == 4 && NR == 4
    CASE(4, 4) CASE(3, 4) CASE(2, 4) CASE(1, 4)
    CASE(4, 3) CASE(3, 3) CASE(2, 3) CASE(1, 3)
    CASE(4, 2) CASE(3, 2) CASE(2, 2) CASE(1, 2)
    CASE(4, 1) CASE(3, 1) CASE(2, 1) CASE(1, 1)
#elif MR == 3 && NR == 2
    CASE(3, 2) CASE(2, 2) CASE(1, 2) CASE(3, 1) CASE(2, 1) CASE(1, 1)
#else
    CASE(2, 2) CASE(1, 2) CASE(2, 1) CASE(1, 1)
#endif
#undef CASE
    HY_ASSERT(0);
}

/* columns per chunk: the chunk's rows of B stay in L1 while every row block of A passes */
#define NCHUNK 16

void hy_gemm_small_nt(size_t M, size_t N, size_t K, const float *A, size_t lda, const float *B,
                      size_t ldb, float beta, float *C, size_t ldc) {
    HY_ASSERT(beta == 0.0f || beta == 1.0f);
    HY_ASSERT(lda >= K && ldb >= K && ldc >= N);
    size_t kv = K / KV, kt = K % KV;
    for (size_t n0 = 0; n0 < N; n0 += NCHUNK) {
        size_t n1 = n0 + NCHUNK < N ? n0 + NCHUNK : N;
        for (size_t m0 = 0; m0 < M; m0 += MR) {
            int mr = (int)(M - m0 < MR ? M - m0 : MR);
            const float *ar[MR];
#pragma GCC unroll 16
            for (int m = 0; m < mr; m++) ar[m] = A + (m0 + (size_t)m) * lda;
            for (size_t j = n0; j < n1; j += NR) {
                int nr = (int)(n1 - j < NR ? n1 - j : NR);
                const float *br[NR];
#pragma GCC unroll 16
                for (int n = 0; n < nr; n++) br[n] = B + (j + (size_t)n) * ldb;
                tile_any(mr, nr, ar, br, kv, kt, beta, C + m0 * ldc + j, ldc);
            }
        }
    }
}
