/* attn.c: see attn.h. One (b, h) pair per task, its operands read in place where the products
 * allow it: every product is a register-tiled micro-kernel (mm_*) broadcasting scalars of an
 * operand A (any row and column strides, so A^T is only a change of strides) against vectors
 * of a row-major operand B read in place (rows of q, k, v or dout in their (B, T, 3C) /
 * (B, T, C) arrays), and the results go straight into out / dqkv. Lanes: keys or queries in
 * vectors of VL floats (16 with AVX-512, else 8), head dims in vectors of 16 (AVX-512 and HS a
 * multiple of 16) or 8. GCC vector extensions (vmath.h): explicit, so it vectorises at -O2 and
 * on any x86-64, lowering to SSE pairs, AVX or AVX-512 lanes as the flags allow.
 * Forward: scores transposed, st[j][i] = scale k_j . q_i with lanes over queries (from q^T, built
 * by 8x8 vector shuffles), so the softmax runs down the columns with no horizontal reduction;
 * A V reads A from st by strides; att rows are written by 8x8 shuffle transposes of st. The few
 * queries past the last whole vector (vit-fm: T = 17 = 16 + 1) would cost a mostly empty vector
 * per key; they take a row path instead: dot products with lanes over head dims summed by a
 * transposed reduction, a softmax along the row, probabilities into st's column.
 * Backward: P = dO V^T with lanes over keys (from v^T), A rows read in place, dV = A^T dO with A^T
 * read by strides, dQ = dS K and dK = dS^T Q from the dS rows. Keys past the last whole vector
 * (up to VL/4 of them) take a row path like the forward's queries: their P column as dot
 * products, and the softmax backward's part of them by columns with lanes over queries; the
 * row sums t_i = sum_j a_ij P_ij of the keys in vectors are transposed reductions of VL rows.
 * Only the next sample's valid rows (and its head's valid block of att) are prefetched, and
 * nothing of dqkv.
 * Each output element of a product is summed in index order (acc = a_0 b_0, then
 * acc += a_c b_c for c = 1, 2, ...) whatever the tile, and every reduction (softmax sums, the
 * row path's dot products, dgate partials) has a fixed order that depends on the shape and
 * kvalid only, so a result never depends on the tiling or on the thread count. Masked keys get
 * exactly 0 probability; exp is vmath.h's hy_exp16 / hy_exp8 lane by lane. Heads whose size
 * is not a multiple of 8 (the tests' tiny shapes) copy q, k, v (and dout) into zero-padded
 * buffers first and write their results through a buffer. No BLAS: per-head 17x17x16 products
 * lose to call overhead (DESIGN §7). */
#include "tensor/attn.h"

#include <math.h>
#include <string.h>

#include "tensor/base.h"
#include "tensor/prof.h"
#include "tensor/team.h"
#include "tensor/vmath.h"

typedef hy_v8f v8f;
typedef hy_v8i v8i;

/* key lanes: vf holds VL floats (vmath.h's vector types and their load, store, splat, select
 * and exp) */
#ifdef __AVX512F__
#define VL 16
typedef hy_v16f v16f;
typedef hy_v16i v16i;
typedef hy_v16f vf;
typedef hy_v16i vi;
#define ldv hy_v16_load
#define stv hy_v16_store
#define splatv hy_v16_splat
#define selv hy_v16_sel
#define expv hy_exp16
#else
#define VL 8
typedef hy_v8f vf;
typedef hy_v8i vi;
#define ldv hy_v8_load
#define stv hy_v8_store
#define splatv hy_v8_splat
#define selv hy_v8_sel
#define expv hy_exp8
#endif

#define MAX_HP 64                                       /* HS <= 64 */
#define MAX_LD (((HY_ATTN_MAX_T + 15) / 16) * 16)       /* padded key row, >= T */
/* Work (B*NH*T*T*HS multiply-adds per product) below which the heads run on the calling
 * thread: waking a passive OpenMP team costs tens of microseconds, more than a batch-1
 * attention of vit-fm (8 x 17 x 17 x 16) takes on one core. */
#define PAR_MIN_WORK ((size_t)1 << 18)
/* at most this many queries past the last whole vector of VL take the row path (fwd_pair) */
#ifndef TAIL_MAX
#define TAIL_MAX (VL / 4)
#endif
#ifndef HY_ATTN_PREFETCH
#define HY_ATTN_PREFETCH 1
#endif

#define UNROLL(n) _Pragma(#n)
#define PRAGMA_UNROLL(n) UNROLL(GCC unroll n)

/* ===== vector helpers ===== */
#define ld8 hy_v8_load
#define st8 hy_v8_store
#if VL == 16
#define ld16 hy_v16_load
#define st16 hy_v16_store
#endif
static inline vi iotav(void) {
    vi v;
    for (int i = 0; i < VL; i++) v[i] = i;
    return v;
}
static inline v8f max8(v8f a, v8f b) {
    v8i m = a > b;
    return (v8f)((m & (v8i)a) | (~m & (v8i)b));
}
static inline vf maxv(vf a, vf b) { return selv(a > b, a, b); }

static inline float hmax8(v8f v) {
    v = max8(v, HY_SHUFFLE(v, ((v8i){4, 5, 6, 7, 0, 1, 2, 3})));
    v = max8(v, HY_SHUFFLE(v, ((v8i){2, 3, 0, 1, 6, 7, 4, 5})));
    v = max8(v, HY_SHUFFLE(v, ((v8i){1, 0, 3, 2, 5, 4, 7, 6})));
    return v[0];
}
#define hsum8 hy_hsum8
#if VL == 16
static inline v8f lo8(v16f v) {
    v8f r;
    memcpy(&r, &v, sizeof r);
    return r;
}
static inline v8f hi8(v16f v) {
    v8f r;
    memcpy(&r, (const char *)&v + sizeof r, sizeof r);
    return r;
}
static inline float hmaxv(vf v) { return hmax8(max8(lo8(v), hi8(v))); }
#define hsumv hy_hsum16
#else
static inline float hmaxv(vf v) { return hmax8(v); }
#define hsumv hy_hsum8
#endif

/* Transposed reductions: r[l] = sum of the lanes of x[l] (l < W), by a fixed tree: at block
 * size b = W/2, ..., 1, vectors k and k + b are folded into one (their lanes' pairs at distance
 * b summed), so the last vector holds every x[l]'s sum at lane l. W/2 + W/4 + ... adds and
 * twice as many two-source shuffles for W sums. */
static inline v8f tred8(v8f x[8]) {
    const v8i l4 = {0, 1, 2, 3, 8, 9, 10, 11}, h4 = {4, 5, 6, 7, 12, 13, 14, 15};
    const v8i l2 = {0, 1, 8, 9, 4, 5, 12, 13}, h2 = {2, 3, 10, 11, 6, 7, 14, 15};
    const v8i l1 = {0, 8, 2, 10, 4, 12, 6, 14}, h1 = {1, 9, 3, 11, 5, 13, 7, 15};
    for (int k = 0; k < 4; k++)
        x[k] = HY_SHUFFLE2(x[k], x[k + 4], l4) + HY_SHUFFLE2(x[k], x[k + 4], h4);
    for (int k = 0; k < 2; k++)
        x[k] = HY_SHUFFLE2(x[k], x[k + 2], l2) + HY_SHUFFLE2(x[k], x[k + 2], h2);
    return HY_SHUFFLE2(x[0], x[1], l1) + HY_SHUFFLE2(x[0], x[1], h1);
}
#if VL == 16
static inline v16f tred16(v16f x[16]) {
    const v16i l8 = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
               h8 = {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31};
    const v16i l4 = {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
               h4 = {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31};
    const v16i l2 = {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
               h2 = {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31};
    const v16i l1 = {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
               h1 = {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31};
    for (int k = 0; k < 8; k++)
        x[k] = HY_SHUFFLE2(x[k], x[k + 8], l8) + HY_SHUFFLE2(x[k], x[k + 8], h8);
    for (int k = 0; k < 4; k++)
        x[k] = HY_SHUFFLE2(x[k], x[k + 4], l4) + HY_SHUFFLE2(x[k], x[k + 4], h4);
    for (int k = 0; k < 2; k++)
        x[k] = HY_SHUFFLE2(x[k], x[k + 2], l2) + HY_SHUFFLE2(x[k], x[k + 2], h2);
    return HY_SHUFFLE2(x[0], x[1], l1) + HY_SHUFFLE2(x[0], x[1], h1);
}
#define hsum16 hy_hsum16
static inline vf tredv(vf x[VL]) { return tred16(x); }
#else
static inline vf tredv(vf x[VL]) { return tred8(x); }
#endif

/* one width of dots: W lanes (VT, loads LD, stores ST, the transposed reduction TRED, the
 * horizontal sum HSUM for blocks of at most SMALL rows) */
#define DOTS_BODY(VT, LD, ST, TRED, HSUM, W, SMALL)                                               \
    VT xv[MAX_HP / W];                                                                          \
    for (size_t d = 0; d < HP / W; d++) xv[d] = LD(x + W * d);                                  \
    for (size_t j0 = 0; j0 < n; j0 += W) {                                                      \
        size_t m = n - j0 < W ? n - j0 : W;                                                     \
        VT p[W];                                                                                \
        for (size_t l = 0; l < W; l++) {                                                        \
            const float *yr = y + (j0 + (l < m ? l : 0)) * ys;                                  \
            VT a = xv[0] * LD(yr);                                                              \
            for (size_t d = 1; d < HP / W; d++) a += xv[d] * LD(yr + W * d);                    \
            p[l] = a;                                                                           \
        }                                                                                       \
        if (m <= SMALL)                                                                         \
            for (size_t l = 0; l < m; l++) out[j0 + l] = HSUM(p[l]);                            \
        else                                                                                    \
            ST(out + j0, TRED(p));                                                              \
    }

/* out[j] = sum_{d < HP} x[d] y_j[d] for the n rows y_j = y + j ys (x, y_j: HP floats, HP a
 * multiple of 8; W = 16 lanes when they divide HP): per row, the HP / W lane products are
 * summed in order, then each row's lanes by a transposed reduction of W rows (or hsum for a
 * block of at most 3 rows). */
static void dots(float *out, const float *x, const float *y, size_t ys, size_t n, size_t HP) {
#if VL == 16
    if (HP % 16 == 0) {
        DOTS_BODY(v16f, ld16, st16, tred16, hsum16, 16, 3)
        return;
    }
#endif
    DOTS_BODY(v8f, ld8, st8, tred8, hsum8, 8, 2)
}

/* IN_REG(x): x is in a register here (an empty asm), so that GCC does not fold its load into
 * every multiply as a memory operand (a B vector feeds R multiplies; reloading it for each
 * made the loads, not the arithmetic, the bound) */
#if defined(__AVX512F__)
#define IN_REG(x) __asm__("" : "+v"(x))
#elif defined(__AVX__)
#define IN_REG(x) do { if (sizeof(x) <= 32) __asm__("" : "+x"(x)); } while (0)
#else
#define IN_REG(x) ((void)0)
#endif

/* ===== the micro-kernels =====
 * C[r ldc + v W + l] = alpha * (sum_{c < K} A[r ars + c acs] * B[c ldb + v W + l]) + 0.0f
 * for r < rows, v < nv vectors of W lanes, l < W. Each element is acc = a_0 b_0, then
 * acc += a_c b_c for c = 1, ..., K - 1, in that order whatever the tile (K >= 1); the + 0.0f
 * stores a -0 as +0. Tiles of R rows x NV vectors of accumulators, each B vector loaded once
 * per R rows. */
#define MM_TILE(VT, LD, ST, W, R, NV)                                                         \
    do {                                                                                      \
        VT acc[R][NV];                                                                        \
        const float *a_ = A + r * ars, *b_ = B + v * W;                                       \
        PRAGMA_UNROLL(8) for (int rr = 0; rr < R; rr++) {                                     \
            float as = a_[(size_t)rr * ars];                                                  \
            PRAGMA_UNROLL(4) for (int vv = 0; vv < NV; vv++) acc[rr][vv] = as * LD(b_ + vv * W); \
        }                                                                                     \
        for (size_t c = 1; c < K; c++) {                                                      \
            const float *ac = a_ + c * acs, *bc = b_ + c * ldb;                               \
            VT bv[NV];                                                                        \
            PRAGMA_UNROLL(4) for (int vv = 0; vv < NV; vv++) {                                \
                bv[vv] = LD(bc + vv * W);                                                     \
                IN_REG(bv[vv]);                                                               \
            }                                                                                 \
            PRAGMA_UNROLL(8) for (int rr = 0; rr < R; rr++) {                                 \
                float as = ac[(size_t)rr * ars];                                              \
                PRAGMA_UNROLL(4) for (int vv = 0; vv < NV; vv++) acc[rr][vv] += as * bv[vv];  \
            }                                                                                 \
        }                                                                                     \
        PRAGMA_UNROLL(8) for (int rr = 0; rr < R; rr++)                                       \
            PRAGMA_UNROLL(4) for (int vv = 0; vv < NV; vv++)                                  \
                ST(C + (r + (size_t)rr) * ldc + v * W + (size_t)vv * W,                       \
                   acc[rr][vv] * alpha + 0.0f);                                               \
    } while (0)

/* one-vector products: rows in tiles of RM; then rows in tiles of 4, then 1, vectors in pairs
 * then one */
#define MM_BODY(VT, LD, ST, W, RM)                                                            \
    size_t r = 0;                                                                             \
    if (nv == 1)                                                                              \
        for (; r + RM <= rows; r += RM) {                                                     \
            size_t v = 0;                                                                     \
            MM_TILE(VT, LD, ST, W, RM, 1);                                                    \
        }                                                                                     \
    for (; r + 4 <= rows; r += 4) {                                                           \
        size_t v = 0;                                                                         \
        for (; v + 2 <= nv; v += 2) MM_TILE(VT, LD, ST, W, 4, 2);                             \
        if (v < nv) MM_TILE(VT, LD, ST, W, 4, 1);                                             \
    }                                                                                         \
    for (; r < rows; r++) {                                                                   \
        size_t v = 0;                                                                         \
        for (; v + 2 <= nv; v += 2) MM_TILE(VT, LD, ST, W, 1, 2);                             \
        if (v < nv) MM_TILE(VT, LD, ST, W, 1, 1);                                             \
    }

#define MM_ARGS                                                                               \
    float *C, size_t ldc, const float *A, size_t ars, size_t acs, const float *B, size_t ldb, \
        size_t rows, size_t K, size_t nv, float alpha

static void mm8(MM_ARGS) { MM_BODY(v8f, ld8, st8, 8, 4) }
#if VL == 16
static void mm16(MM_ARGS) { MM_BODY(v16f, ld16, st16, 16, 8) }
#endif
/* key lanes: W = VL */
static void mmk(MM_ARGS) {
#if VL == 16
    mm16(C, ldc, A, ars, acs, B, ldb, rows, K, nv, alpha);
#else
    mm8(C, ldc, A, ars, acs, B, ldb, rows, K, nv, alpha);
#endif
}
/* head-dim lanes: HP floats per row, in vectors of 16 when they divide it */
static void mmd(float *C, size_t ldc, const float *A, size_t ars, size_t acs, const float *B,
                size_t ldb, size_t rows, size_t K, size_t HP, float alpha) {
#if VL == 16
    if (HP % 16 == 0) {
        mm16(C, ldc, A, ars, acs, B, ldb, rows, K, HP / 16, alpha);
        return;
    }
#endif
    mm8(C, ldc, A, ars, acs, B, ldb, rows, K, HP / 8, alpha);
}

/* ===== transposes ===== */

/* y[c][r] = src[r lds + c] for c < 8, r < 8; source rows r >= n read as zeros */
static inline __attribute__((always_inline)) void tr8x(v8f y[8], const float *src, size_t lds,
                                                        size_t n) {
    v8f z = {0}, x[8];
    for (size_t r = 0; r < 8; r++) x[r] = r < n ? ld8(src + r * lds) : z;
    v8f t0 = HY_SHUFFLE2(x[0], x[1], ((v8i){0, 8, 1, 9, 4, 12, 5, 13}));
    v8f t1 = HY_SHUFFLE2(x[0], x[1], ((v8i){2, 10, 3, 11, 6, 14, 7, 15}));
    v8f t2 = HY_SHUFFLE2(x[2], x[3], ((v8i){0, 8, 1, 9, 4, 12, 5, 13}));
    v8f t3 = HY_SHUFFLE2(x[2], x[3], ((v8i){2, 10, 3, 11, 6, 14, 7, 15}));
    v8f t4 = HY_SHUFFLE2(x[4], x[5], ((v8i){0, 8, 1, 9, 4, 12, 5, 13}));
    v8f t5 = HY_SHUFFLE2(x[4], x[5], ((v8i){2, 10, 3, 11, 6, 14, 7, 15}));
    v8f t6 = HY_SHUFFLE2(x[6], x[7], ((v8i){0, 8, 1, 9, 4, 12, 5, 13}));
    v8f t7 = HY_SHUFFLE2(x[6], x[7], ((v8i){2, 10, 3, 11, 6, 14, 7, 15}));
    v8f u0 = HY_SHUFFLE2(t0, t2, ((v8i){0, 1, 8, 9, 4, 5, 12, 13}));
    v8f u1 = HY_SHUFFLE2(t0, t2, ((v8i){2, 3, 10, 11, 6, 7, 14, 15}));
    v8f u2 = HY_SHUFFLE2(t1, t3, ((v8i){0, 1, 8, 9, 4, 5, 12, 13}));
    v8f u3 = HY_SHUFFLE2(t1, t3, ((v8i){2, 3, 10, 11, 6, 7, 14, 15}));
    v8f u4 = HY_SHUFFLE2(t4, t6, ((v8i){0, 1, 8, 9, 4, 5, 12, 13}));
    v8f u5 = HY_SHUFFLE2(t4, t6, ((v8i){2, 3, 10, 11, 6, 7, 14, 15}));
    v8f u6 = HY_SHUFFLE2(t5, t7, ((v8i){0, 1, 8, 9, 4, 5, 12, 13}));
    v8f u7 = HY_SHUFFLE2(t5, t7, ((v8i){2, 3, 10, 11, 6, 7, 14, 15}));
    y[0] = HY_SHUFFLE2(u0, u4, ((v8i){0, 1, 2, 3, 8, 9, 10, 11}));
    y[4] = HY_SHUFFLE2(u0, u4, ((v8i){4, 5, 6, 7, 12, 13, 14, 15}));
    y[1] = HY_SHUFFLE2(u1, u5, ((v8i){0, 1, 2, 3, 8, 9, 10, 11}));
    y[5] = HY_SHUFFLE2(u1, u5, ((v8i){4, 5, 6, 7, 12, 13, 14, 15}));
    y[2] = HY_SHUFFLE2(u2, u6, ((v8i){0, 1, 2, 3, 8, 9, 10, 11}));
    y[6] = HY_SHUFFLE2(u2, u6, ((v8i){4, 5, 6, 7, 12, 13, 14, 15}));
    y[3] = HY_SHUFFLE2(u3, u7, ((v8i){0, 1, 2, 3, 8, 9, 10, 11}));
    y[7] = HY_SHUFFLE2(u3, u7, ((v8i){4, 5, 6, 7, 12, 13, 14, 15}));
}
/* dst[c ldd + r] = src[r lds + c] for c < 8, r < 8; source rows r >= n read as zeros */
static inline void tr8(float *dst, size_t ldd, const float *src, size_t lds, size_t n) {
    v8f y[8];
    tr8x(y, src, lds, n);
    for (size_t c = 0; c < 8; c++) st8(dst + c * ldd, y[c]);
}

/* dst[d ld + j] = src[j lds + d] for d < HP (a multiple of 8), j < n; lanes n <= j < lend
 * zero (lend <= ld multiples of 8, n <= lend) */
static void transpose_rows(float *dst, size_t ld, size_t lend, const float *src, size_t lds,
                           size_t n, size_t HP) {
    v8f z = {0};
    for (size_t d0 = 0; d0 < HP; d0 += 8) {
        float *dd = dst + d0 * ld;
        size_t j0 = 0;
        for (; j0 + 8 <= n; j0 += 8) tr8(dd + j0, ld, src + j0 * lds + d0, lds, 8);
        size_t rem = n - j0;
        if (rem >= 3) {   /* a partial block, zeros below its rows */
            tr8(dd + j0, ld, src + j0 * lds + d0, lds, rem);
            j0 += 8;
            rem = 0;
        }
        for (size_t d = 0; d < 8; d++)
            for (size_t j = j0; j < lend; j += 8) st8(dd + d * ld + j, z);
        for (size_t j = j0; j < j0 + rem; j++)
            for (size_t d = 0; d < 8; d++) dd[d * ld + j] = src[j * lds + d0 + d];
    }
}

/* dst rows of HP floats = the n rows of src (stride lds) of HS floats, zero-padded */
static void pad_rows(float *dst, size_t HP, const float *src, size_t lds, size_t n, size_t HS) {
    for (size_t j = 0; j < n; j++) {
        for (size_t d = 0; d < HS; d++) dst[j * HP + d] = src[j * lds + d];
        for (size_t d = HS; d < HP; d++) dst[j * HP + d] = 0.0f;
    }
}
/* the first HS floats of n rows: dst (stride ldd) = src (stride HP) */
static void unpad_rows(float *dst, size_t ldd, const float *src, size_t HP, size_t n, size_t HS) {
    for (size_t j = 0; j < n; j++)
        for (size_t d = 0; d < HS; d++) dst[j * ldd + d] = src[j * HP + d];
}
/* HS zeros in rows [i0, i1) of stride ld */
static void zero_rows(float *p, size_t ld, size_t i0, size_t i1, size_t HS) {
    for (size_t i = i0; i < i1; i++) memset(p + i * ld, 0, HS * sizeof *p);
}

/* HS zeros in the q, k and v slices (p, p + C, p + 2 C) of rows [i0, i1) of stride ld: vector
 * stores when HS is a multiple of 8 (a memset call per 64-byte slice cost more than the stores) */
static void zero_qkv_rows(float *p, size_t ld, size_t C, size_t i0, size_t i1, size_t HS) {
    if (HS % 8) {
        for (size_t t = 0; t < 3; t++) zero_rows(p + t * C, ld, i0, i1, HS);
        return;
    }
    v8f z = {0};
    for (size_t i = i0; i < i1; i++) {
        float *r = p + i * ld;
        for (size_t d = 0; d < HS; d += 8) {
            st8(r + d, z);
            st8(r + C + d, z);
            st8(r + 2 * C + d, z);
        }
    }
}

/* per-thread working sets (sized for T = 257, HS = 64: too big for OpenMP thread stacks);
 * each task overwrites what it reads, so nothing carries over between tasks. kt: the head's
 * k (forward) or v (backward) transposed, rows of ld floats; s: scores / probabilities /
 * score gradients, rows of ld floats; row: a score row (forward's row path) or the row sums t
 * (backward); tc, ac: the backward row path's P and A columns; q, k, v, g, y*: zero-padded
 * copies and result buffers of heads whose size is not a multiple of 8 */
typedef struct ws {
    _Alignas(64) float kt[MAX_HP * MAX_LD];
    _Alignas(64) float s[HY_ATTN_MAX_T * MAX_LD];
    _Alignas(64) float row[MAX_LD + 16];
    _Alignas(64) float tc[TAIL_MAX + 1][MAX_LD + 16], ac[TAIL_MAX + 1][MAX_LD + 16];
    _Alignas(64) float q[HY_ATTN_MAX_T * MAX_HP], k[HY_ATTN_MAX_T * MAX_HP],
        v[HY_ATTN_MAX_T * MAX_HP], g[HY_ATTN_MAX_T * MAX_HP];
    _Alignas(64) float y0[HY_ATTN_MAX_T * MAX_HP], y1[HY_ATTN_MAX_T * MAX_HP],
        y2[HY_ATTN_MAX_T * MAX_HP];
} ws;
static _Thread_local ws wsp;

/* Prefetch: a head reads one 64-byte slice of each of its sample's rows (qkv row stride 3C
 * floats), a pattern the hardware prefetchers follow poorly, so each (b, h) task first asks for
 * its share 1/NH of the next sample's rows of every array the loop reads or updates: by the
 * time the loop reaches that sample, its rows are in cache. */
static inline void prefetch_share(const float *base, size_t bytes, size_t h, size_t NH, int w) {
    const char *p = (const char *)base;
    size_t lines = (bytes + 63) / 64, l0 = lines * h / NH, l1 = lines * (h + 1) / NH;
    for (size_t l = l0; l < l1; l++) {
        if (w) __builtin_prefetch(p + 64 * l, 1, 3);
        else __builtin_prefetch(p + 64 * l, 0, 3);
    }
}

/* the lines of the first n floats of the n rows (stride ld) at p: a head's valid block of att */
static inline void prefetch_block(const float *p, size_t ld, size_t n) {
    uintptr_t next = 0;
    for (size_t i = 0; i < n; i++) {
        uintptr_t l0 = (uintptr_t)(p + i * ld) / 64, l1 = (uintptr_t)(p + i * ld + n - 1) / 64;
        for (uintptr_t l = l0 > next ? l0 : next; l <= l1; l++)
            __builtin_prefetch((const void *)(l * 64), 0, 3);
        next = l1 + 1;
    }
}

/* ===== attention forward ===== */

/* softmax of the score row s (KB vectors; keys j >= nk masked to -inf) times scale, in place;
 * an all -inf row gives zeros, not NaN */
static void softmax_row(float *s, size_t KB, size_t nk, float scale) {
    size_t last = (KB - 1) * VL;
    vf xl = selv(iotav() < (int32_t)(nk - last), ldv(s + last) * scale, splatv(-INFINITY));
    stv(s + last, xl);
    vf m = xl;
    for (size_t jb = 0; jb + 1 < KB; jb++) {
        vf x = ldv(s + jb * VL) * scale;
        stv(s + jb * VL, x);
        m = maxv(x, m);
    }
    float mx = hmaxv(m);
    if (mx == -INFINITY) {
        for (size_t jb = 0; jb < KB; jb++) stv(s + jb * VL, splatv(0.0f));
        return;
    }
    vf acc = splatv(0.0f);
    for (size_t jb = 0; jb < KB; jb++) {
        vf e = expv(ldv(s + jb * VL) - mx);
        stv(s + jb * VL, e);
        acc += e;
    }
    float inv = 1.0f / hsumv(acc);
    for (size_t jb = 0; jb < KB; jb++) stv(s + jb * VL, ldv(s + jb * VL) * inv);
}

/* Softmax down the columns of st (rows j < nk: keys; IB vectors of lanes: queries), in place:
 * max, exp and sum run vertically, so no horizontal reduction and a query's keys are all
 * independent lanes of different vectors. A column whose scores are all -inf gives zeros, not
 * NaN. */
static void softmax_cols(float *st, size_t ldi, size_t IB, size_t nk) {
    for (size_t ib = 0; ib < IB; ib++) {
        float *c = st + ib * VL;
        vf m0 = ldv(c), m1 = m0;
        size_t j = 1;
        for (; j + 2 <= nk; j += 2) {
            m0 = maxv(ldv(c + j * ldi), m0);
            m1 = maxv(ldv(c + (j + 1) * ldi), m1);
        }
        if (j < nk) m0 = maxv(ldv(c + j * ldi), m0);
        vf m = maxv(m0, m1);
        vi allinf = m == -INFINITY;
        m = selv(allinf, splatv(0.0f), m);
        vf s0 = splatv(0.0f), s1 = s0;
        for (j = 0; j + 2 <= nk; j += 2) {
            vf e0 = expv(ldv(c + j * ldi) - m), e1 = expv(ldv(c + (j + 1) * ldi) - m);
            stv(c + j * ldi, e0);
            stv(c + (j + 1) * ldi, e1);
            s0 += e0;
            s1 += e1;
        }
        if (j < nk) {
            vf e0 = expv(ldv(c + j * ldi) - m);
            stv(c + j * ldi, e0);
            s0 += e0;
        }
        vf inv = selv(allinf, splatv(0.0f), 1.0f / (s0 + s1));
        for (j = 0; j < nk; j++) stv(c + j * ldi, ldv(c + j * ldi) * inv);
    }
}

/* the head's probability rows i < nk of att (row stride T) from their transpose pt (rows
 * j < nk of ldi floats): att[i][j] = pt[j][i] for j < nk, 0 for nk <= j < T */
static void store_att(float *att, size_t T, const float *pt, size_t ldi, size_t nk) {
    for (size_t i0 = 0; i0 < nk; i0 += 8) {
        size_t m = nk - i0 < 8 ? nk - i0 : 8, j0 = 0;
        for (; j0 + 8 <= T; j0 += 8) {
            float *dst = att + i0 * T + j0;
            size_t n = j0 >= nk ? 0 : nk - j0 < 8 ? nk - j0 : 8;
            v8f y[8];
            tr8x(y, pt + j0 * ldi + i0, ldi, n);
            if (m == 8)
                for (size_t r = 0; r < 8; r++) st8(dst + r * T, y[r]);
            else
                for (size_t r = 0; r < m; r++) st8(dst + r * T, y[r]);
        }
        for (size_t j = j0; j < T; j++)
            for (size_t i = i0; i < i0 + m; i++) att[i * T + j] = j < nk ? pt[j * ldi + i] : 0.0f;
    }
}

/* Pair bh = b * NH + h of a pass over the (sample, head) pairs: sample b, head h of HS dims
 * (HP: HS rounded up to whole 8-float vectors), nk valid keys (the query rows i >= nk are
 * padding too, see attn.h), gate g, and the head's q, k, v columns in qkv (row stride 3C). */
typedef struct {
    size_t b, h, HS, HP, nk;
    float g;
    const float *q, *k, *v;
} head_pair;

static inline head_pair pair_at(const float *qkv, const float *gate, const int32_t *kvalid,
                                size_t T, size_t C, size_t NH, size_t bh) {
    head_pair p;
    p.HS = C / NH;
    p.HP = (p.HS + 7) / 8 * 8;
    p.b = bh / NH;
    p.h = bh % NH;
    p.nk = kvalid ? (size_t)kvalid[p.b] : T;
    p.g = gate[p.h];
    p.q = qkv + p.b * T * 3 * C + p.h * p.HS;
    p.k = p.q + C;
    p.v = p.q + 2 * C;
    return p;
}

/* the time since t and its 2 * rows * cols * depth flops into c (timers on) */
static inline void mm_done(hy_attn_cost *c, uint64_t t, size_t rows, size_t cols, size_t depth) {
    if (!hy_prof_on) return;
    c->ns += hy_prof_clock() - t;
    c->flops += 2 * (uint64_t)rows * cols * depth;
}

/* pair bh = b * NH + h of the forward; its products' cost */
static hy_attn_cost fwd_pair(float *out, float *att, const float *qkv, const float *gate,
                     const int32_t *kvalid, size_t B, size_t T, size_t C, size_t NH, size_t bh,
                     float scale) {
    const head_pair hp = pair_at(qkv, gate, kvalid, T, C, NH, bh);
    size_t HS = hp.HS, HP = hp.HP, b = hp.b, h = hp.h, nk = hp.nk;
    ws *w = &wsp;
    /* the padding query rows i >= nk: zeros */
    size_t IB = (nk + VL - 1) / VL, ldi = IB * VL;
    if (HY_ATTN_PREFETCH && b + 1 < B) {
        prefetch_share(qkv + (b + 1) * T * 3 * C, T * 3 * C * sizeof(float), h, NH, 0);
        prefetch_share(out + (b + 1) * T * C, T * C * sizeof(float), h, NH, 1);
    }
    const float *q = hp.q, *k = hp.k, *v = hp.v;
    size_t qs = 3 * C, ks = 3 * C, vs = 3 * C;
    float *y = out + b * T * C + h * HS;
    size_t ys = C;
    if (HS != HP) {
        pad_rows(w->q, HP, q, qs, nk, HS);
        pad_rows(w->v, HP, v, vs, nk, HS);
        q = w->q, v = w->v, qs = vs = HP;
        y = w->y0, ys = HP;
    }
    /* transposed scores st[j][i] = scale (k_j . q_i) (lanes: queries, from q^T), softmax down
     * the columns: st becomes A^T */
    size_t IBm = IB, tail = nk - (IB - 1) * VL;
    if (IB >= 2 && tail <= TAIL_MAX && HS == HP) IBm = IB - 1;
    hy_attn_cost c = {0, 0};
    size_t qv = IBm < IB ? IBm * VL : nk;   /* queries of the vector path */
    transpose_rows(w->kt, ldi, IBm * VL, q, qs, qv, HP);
    uint64_t t = hy_prof_t0();
    mmk(w->s, ldi, k, ks, 1, w->kt, ldi, nk, HS, IBm, scale);
    mm_done(&c, t, nk, qv, HS);
    softmax_cols(w->s, ldi, IBm, nk);
    /* a few queries past the last whole vector: each a row of dot products (lanes over the head
     * dims, a transposed reduction), softmax along the row, probabilities into st's column */
    for (size_t i = IBm * VL; i < nk; i++) {
        float *sc = w->row;
        dots(sc, q + i * qs, k, ks, nk, HP);
        softmax_row(sc, (nk + VL - 1) / VL, nk, scale);
        for (size_t j = 0; j < nk; j++) w->s[j * ldi + i] = sc[j];
    }
    if (att) store_att(att + bh * T * T, T, w->s, ldi, nk);
    /* out = gate * (A V) over the valid keys (A read from A^T); padding rows zero */
    t = hy_prof_t0();
    mmd(y, ys, w->s, 1, ldi, v, vs, nk, nk, HP, hp.g);
    mm_done(&c, t, nk, nk, HS);
    if (HS != HP) unpad_rows(out + b * T * C + h * HS, C, y, HP, nk, HS);
    zero_rows(out + b * T * C + h * HS, C, nk, T, HS);
    return c;
}

/* The score scale 1/sqrt(HS) of a pass over the (sample, head) pairs of B*NH, its shapes
 * checked, and whether the pass runs them in a parallel region: only where it adds threads
 * (base.h hy_omp_par: inside the fused model's slices a nested region of one thread would cost
 * more than a slice's attention). */
static float pairs_scale(size_t T, size_t C, size_t NH) {
    size_t HS = C / NH;
    HY_ASSERT(HS * NH == C && HS <= MAX_HP && T <= HY_ATTN_MAX_T && T >= 1);
    return 1.0f / sqrtf((float)HS);
}

static bool pairs_par(size_t B, size_t T, size_t C, size_t NH) {
    size_t BH = B * NH;
    return hy_omp_par(BH > 1 && BH * T * T * (C / NH) > PAR_MIN_WORK);
}

/* Runs `call` (a pair function called on bh, returning its products' hy_attn_cost) for every
 * pair bh < B NH of a pass, in one parallel region (static split) when pairs_par says so: the
 * forward's and the backward's dispatch. With the timers on, each pair is also timed whole:
 * the products' CPU ns, their flops and the pairs' CPU ns are added into mm, fl and all, for
 * record_pass. */
#define FOR_EACH_PAIR(B, T, C, NH, mm, fl, all, call)                                      \
    do {                                                                                   \
        size_t n_pairs_ = (B) * (NH);                                                      \
        if (pairs_par(B, T, C, NH)) {                                                      \
            _Pragma("omp parallel for schedule(static) reduction(+ : mm, fl, all)")        \
            for (size_t bh = 0; bh < n_pairs_; bh++) PAIR_TIMED(mm, fl, all, call);        \
        } else {                                                                           \
            for (size_t bh = 0; bh < n_pairs_; bh++) PAIR_TIMED(mm, fl, all, call);        \
        }                                                                                  \
    } while (0)
#define PAIR_TIMED(mm, fl, all, call)                                                      \
    do {                                                                                   \
        uint64_t p0_ = hy_prof_t0();                                                       \
        hy_attn_cost c_ = call;                                                            \
        if (hy_prof_on) mm += c_.ns, fl += c_.flops, all += hy_prof_clock() - p0_;        \
    } while (0)

/* a pass's wall time since t0 shared out between HY_PROF_ATTN_MM and HY_PROF_ATTN by the
 * pairs' CPU times (as hy_gemm_ex shares a call's): mm of all */
static void record_pass(uint64_t t0, uint64_t mm, uint64_t flops, uint64_t all) {
    if (!hy_prof_on) return;
    uint64_t wall = hy_prof_clock() - t0;
    uint64_t mw = all ? (uint64_t)((double)wall * ((double)mm / (double)all)) : 0;
    if (mw > wall) mw = wall;
    hy_prof_record_ns(HY_PROF_ATTN_MM, mw, flops);
    hy_prof_record_ns(HY_PROF_ATTN, wall - mw, 0);
}

void hy_attn_forward(float *out, float *att, const float *qkv, const float *gate,
                     const int32_t *kvalid, size_t B, size_t T, size_t C, size_t NH) {
    float scale = pairs_scale(T, C, NH);
    uint64_t t0 = hy_prof_t0(), mm = 0, fl = 0, all = 0;
    FOR_EACH_PAIR(B, T, C, NH, mm, fl, all,
                  fwd_pair(out, att, qkv, gate, kvalid, B, T, C, NH, bh, scale));
    record_pass(t0, mm, fl, all);
}

hy_attn_cost hy_attn_forward_part(float *out, float *att, const float *qkv, const float *gate,
                          const int32_t *kvalid, size_t B, size_t T, size_t C, size_t NH,
                          size_t part, size_t parts) {
    HY_ASSERT(part < parts);
    float scale = pairs_scale(T, C, NH);
    size_t lo, hi;
    hy_team_share(B * NH, part, parts, &lo, &hi);
    hy_attn_cost c = {0, 0};
    for (size_t bh = lo; bh < hi; bh++) {
        hy_attn_cost p = fwd_pair(out, att, qkv, gate, kvalid, B, T, C, NH, bh, scale);
        c.ns += p.ns, c.flops += p.flops;
    }
    return c;
}

/* ===== attention backward ===== */

/* key vector jb of row arow (keys j >= nk zero; never reads past the row's T floats) */
static inline vf load_keys(const float *arow, size_t jb, size_t nk, size_t T) {
    size_t j0 = jb * VL;
    if (j0 + VL <= nk) return ldv(arow + j0);
    vi keep = iotav() < (int32_t)(nk - j0);
    if (j0 + VL <= T) return selv(keep, ldv(arow + j0), splatv(0.0f));
    if (T >= VL)   /* the row's last VL floats, moved down to lane 0 = key j0 */
        return selv(keep, HY_SHUFFLE(ldv(arow + T - VL), iotav() + (int32_t)(j0 + VL - T)),
                    splatv(0.0f));
    vf a = splatv(0.0f);
    for (size_t j = j0; j < nk; j++) a[j - j0] = arow[j];
    return a;
}

/* pair bh = b * NH + h of the backward; its dgate partial into scratch[bh]; its products'
 * cost */
static hy_attn_cost bwd_pair(float *dqkv, float *scratch, const float *dout, const float *qkv,
                     const float *att, const float *gate, const int32_t *kvalid, size_t B,
                     size_t T, size_t C, size_t NH, size_t bh, float scale) {
    const head_pair hp = pair_at(qkv, gate, kvalid, T, C, NH, bh);
    size_t HS = hp.HS, HP = hp.HP, b = hp.b, h = hp.h, nk = hp.nk;
    ws *w = &wsp;
    /* the padding rows i >= nk: zero gradients */
    size_t KB = (nk + VL - 1) / VL, ld = KB * VL;
    if (HY_ATTN_PREFETCH && b + 1 < B) {
        /* of the next sample, only its valid rows (and keys) are read; dqkv is only written
         * (prefetching it for writing is slower) */
        size_t nn = kvalid ? (size_t)kvalid[b + 1] : T;
        prefetch_share(qkv + (b + 1) * T * 3 * C, nn * 3 * C * sizeof(float), h, NH, 0);
        prefetch_share(dout + (b + 1) * T * C, nn * C * sizeof(float), h, NH, 0);
        prefetch_block(att + ((b + 1) * NH + h) * T * T, T, nn);
    }
    const float *q = hp.q, *k = hp.k, *v = hp.v;
    const float *go = dout + b * T * C + h * HS;
    const float *A = att + bh * T * T;
    size_t qs = 3 * C, ks = 3 * C, vs = 3 * C, gs = C;
    float *dq = dqkv + b * T * 3 * C + h * HS, *dk = dq + C, *dv = dq + 2 * C;
    float *yq = dq, *yk = dk, *yv = dv;
    size_t ys = 3 * C;
    if (HS != HP) {
        pad_rows(w->q, HP, q, qs, nk, HS);
        pad_rows(w->k, HP, k, ks, nk, HS);
        pad_rows(w->v, HP, v, vs, nk, HS);
        pad_rows(w->g, HP, go, gs, nk, HS);
        q = w->q, k = w->k, v = w->v, go = w->g, qs = ks = vs = gs = HP;
        yq = w->y0, yk = w->y1, yv = w->y2, ys = HP;
    }
    /* P = dout_h V^T (key lanes from the transpose of v): with out = g y, y = A V,
     * dgate = sum_ij a_ij P_ij (= sum_i dout_i . y_i) and dA = g P. Keys in KBv vectors; a few
     * keys past the last whole vector (vit-fm: T = 17 = 16 + 1) would cost a mostly empty
     * vector per query, here and in the softmax backward: they take a row path instead, their
     * column of P as dot products v_j . dout_i (lanes over head dims, a transposed reduction) */
    size_t KBv = KB, tail = nk - (KB - 1) * VL;
    if (KB >= 2 && tail <= TAIL_MAX) KBv = KB - 1;
    size_t jt = KBv * VL < nk ? KBv * VL : nk;   /* keys [jt, nk): the row path */
    hy_attn_cost c = {0, 0};
    transpose_rows(w->kt, ld, KBv * VL, v, vs, jt, HP);
    uint64_t tm = hy_prof_t0();
    mmk(w->s, ld, go, gs, 1, w->kt, ld, nk, HS, KBv, 1.0f);
    mm_done(&c, tm, nk, jt, HS);
    /* softmax backward: with da = g P, ds_ij = a_ij (da_ij - sum_k a_ik da_ik) * scale
     * = a_ij (P_ij - t_i) * (g scale), t_i = sum_j a_ij P_ij (masked: a = 0), and
     * dgate = sum_i t_i; the dS rows overwrite P's. The row path's keys first, by columns
     * (lanes over queries): their P column pc, A column ac, and tt_i = their part of t_i, in
     * key order. */
    size_t nt = nk - jt, IB = (nk + VL - 1) / VL;
    float *tt = w->row, gsc = hp.g * scale;
    for (size_t u = 0; u < nt; u++) dots(w->tc[u], v + (jt + u) * vs, go, gs, nk, HP);
    for (size_t ib = 0; ib < IB; ib++) stv(tt + ib * VL, splatv(0.0f));
    for (size_t u = 0; u < nt; u++) {
        size_t j = jt + u;
        float *pc = w->tc[u], *ac = w->ac[u];
        for (size_t i = 0; i < nk; i++) ac[i] = A[i * T + j];
        for (size_t i = nk; i < IB * VL; i++) ac[i] = pc[i] = 0.0f;
        for (size_t ib = 0; ib < IB; ib++)
            stv(tt + ib * VL, ldv(tt + ib * VL) + ldv(ac + ib * VL) * ldv(pc + ib * VL));
    }
    /* the keys in vectors, by rows: per block of VL rows, each row's lanes of t summed by a
     * transposed reduction (hsum for a block of at most 3 rows), plus tt; then the dS rows.
     * Keys [0, KBf VL) in whole vectors, then the partial vector (when no row path). */
    size_t KBf = jt / VL;
    int part = KBv > KBf;
    for (size_t i0 = 0; i0 < nk; i0 += VL) {
        size_t m = nk - i0 < VL ? nk - i0 : VL;
        vf x[VL];
        for (size_t l = 0; l < m; l++) {
            const float *p = w->s + (i0 + l) * ld, *arow = A + (i0 + l) * T;
            vf tv = ldv(arow) * ldv(p);
            for (size_t jb = 1; jb < KBf; jb++) tv += ldv(arow + jb * VL) * ldv(p + jb * VL);
            if (part) {
                vf pr = load_keys(arow, KBf, nk, T) * ldv(p + KBf * VL);
                tv = KBf ? tv + pr : pr;
            }
            x[l] = tv;
        }
        if (m <= 3)
            for (size_t l = 0; l < m; l++) tt[i0 + l] += hsumv(x[l]);
        else {
            for (size_t l = m; l < VL; l++) x[l] = splatv(0.0f);
            stv(tt + i0, tredv(x) + ldv(tt + i0));
        }
        if (hp.g == 0.0f) continue;
        for (size_t l = 0; l < m; l++) {
            float *p = w->s + (i0 + l) * ld;
            const float *arow = A + (i0 + l) * T;
            vf t = tt[i0 + l] - (vf){0};   /* a broadcast (splatv: lane inserts) */
            for (size_t jb = 0; jb < KBf; jb++) {
                vf a = ldv(arow + jb * VL);
                stv(p + jb * VL, a * (ldv(p + jb * VL) - t) * gsc);
            }
            if (part) {
                vf a = load_keys(arow, KBf, nk, T);
                stv(p + KBf * VL, a * (ldv(p + KBf * VL) - t) * gsc);
            }
        }
    }
    /* the row path's dS columns */
    if (hp.g != 0.0f)
        for (size_t u = 0; u < nt; u++) {
            const float *pc = w->tc[u], *ac = w->ac[u];
            for (size_t i = 0; i < nk; i++) w->s[i * ld + jt + u] = ac[i] * (pc[i] - tt[i]) * gsc;
        }
    vf dgv = ldv(tt);
    for (size_t ib = 1; ib < IB; ib++) dgv += ldv(tt + ib * VL);
    scratch[bh] = hsumv(dgv);
    if (hp.g == 0.0f) {   /* pruned head: no q/k/v gradient at all (zeros) */
        float *base = dqkv + b * T * 3 * C + h * HS;
        zero_qkv_rows(base, 3 * C, C, 0, T, HS);
        return c;
    }
    /* dV = g (A^T dout_h), A^T read in place; s_ij = scale q_i . k_j: dQ = dS K, dK = dS^T Q */
    tm = hy_prof_t0();
    mmd(yv, ys, A, 1, T, go, gs, nk, nk, HP, hp.g);
    mmd(yq, ys, w->s, ld, 1, k, ks, nk, nk, HP, 1.0f);
    mmd(yk, ys, w->s, 1, ld, q, qs, nk, nk, HP, 1.0f);
    mm_done(&c, tm, 3 * nk, nk, HS);
    if (HS != HP) {
        unpad_rows(dq, 3 * C, yq, HP, nk, HS);
        unpad_rows(dk, 3 * C, yk, HP, nk, HS);
        unpad_rows(dv, 3 * C, yv, HP, nk, HS);
    }
    /* the padding rows j >= nk get no gradient */
    zero_qkv_rows(dq, 3 * C, C, nk, T, HS);
    return c;
}

void hy_attn_backward(float *dqkv, float *dgate, const float *dout, const float *qkv,
                      const float *att, const float *gate, const int32_t *kvalid,
                      float *scratch, size_t B, size_t T, size_t C, size_t NH) {
    float scale = pairs_scale(T, C, NH);
    uint64_t t0 = hy_prof_t0(), mm = 0, fl = 0, all = 0;
    FOR_EACH_PAIR(B, T, C, NH, mm, fl, all,
                  bwd_pair(dqkv, scratch, dout, qkv, att, gate, kvalid, B, T, C, NH, bh, scale));
    /* dgate: per-(b,h) partials summed over b in a fixed order */
    for (size_t h = 0; h < NH; h++) {
        float acc = 0.0f;
        for (size_t b = 0; b < B; b++) acc += scratch[b * NH + h];
        dgate[h] += acc;
    }
    record_pass(t0, mm, fl, all);
}
