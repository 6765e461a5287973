/* gemm.c: see gemm.h. Row-major cblas_sgemm with size_t sizes checked to fit blasint, in tiles
 * fixed by the shape, shared out among hydra's threads; a tile of a linear whose weight the BF16
 * set in use holds runs in gemm_bf16.c instead. */
#include "tensor/gemm.h"

#include <limits.h>
#include <stdbool.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensor/gemm_bf16.h"
#include "tensor/prof.h"
#include "tensor/team.h"

static blasint bi(size_t v) {
    HY_ASSERT(v <= (size_t)INT_MAX);
    return (blasint)v;
}

/* Tiles: rows in multiples of 16 near TILE_ROWS (equal-sized row tiles); when that gives
 * fewer than TILES_WANT tiles, the columns are cut too (tiles at least TILE_MIN_COLS wide).
 * Every tile re-packs its share of B (OpenBLAS packs per call): rows of 128 keep that under a
 * few per cent of the product. Below HY_GEMM_PAR_MIN_WORK a product runs on one thread, or
 * on a small pass's team (team.h, hy_gemm_ex_part): from SPLIT_MIN_WORK up it is cut into two
 * column tiles, which OpenBLAS runs at the whole product's speed (41-42 against 42 GFLOP/s
 * for 17x384x128 on one Zen 3 core). */
#ifndef HY_GEMM_TILE_ROWS
#define HY_GEMM_TILE_ROWS 128
#endif
#define TILE_ROWS ((size_t)HY_GEMM_TILE_ROWS)
#define TILE_MIN_COLS ((size_t)32)
#define TILES_WANT ((size_t)8)
#define TILE_MIN_WORK ((double)HY_GEMM_PAR_MIN_WORK)
#define SPLIT_MIN_WORK ((double)(1u << 16))

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }
static size_t round16(size_t v) { return (v + 15) / 16 * 16; }

void hy_gemm_tiling(size_t M, size_t N, size_t K, size_t *rows, size_t *cols) {
    *rows = M ? M : 1;
    *cols = N ? N : 1;
    double work = (double)M * (double)N * (double)K;
    if (work < TILE_MIN_WORK) {
        if (work >= SPLIT_MIN_WORK && N >= 2 * TILE_MIN_COLS) *cols = round16(ceil_div(N, 2));
        return;
    }
    size_t nm = ceil_div(M, TILE_ROWS);
    if (nm > 1) *rows = round16(ceil_div(M, nm));
    nm = ceil_div(M, *rows);
    if (nm < TILES_WANT) {
        size_t nc = ceil_div(TILES_WANT, nm), most = N / TILE_MIN_COLS;
        if (nc > most) nc = most;
        if (nc > 1) *cols = round16(ceil_div(N, nc));
    }
}

size_t hy_gemm_tile_rows_max(void) { return round16(TILE_ROWS); }

static void sgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, size_t M, size_t N, size_t K,
                  float alpha, const float *A, size_t lda, const float *B, size_t ldb, float beta,
                  float *C, size_t ldc) {
    cblas_sgemm(CblasRowMajor, ta, tb, bi(M), bi(N), bi(K), alpha, A, bi(lda ? lda : 1), B,
                bi(ldb ? ldb : 1), beta, C, bi(ldc ? ldc : 1));
}

/* one tile: rows [r0, r1), columns [c0, c1) of C; ns[0..2] += pre, product, post times when
 * timing */
static void tile(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, size_t r0, size_t r1, size_t c0,
                 size_t c1, size_t K, float alpha, const float *A, size_t lda, const float *B,
                 size_t ldb, float beta, float *C, size_t ldc, const hy_gemm_epi *e,
                 uint64_t ns[3]) {
    uint64_t t = hy_prof_t0(), u;
    if (e && e->pre) {
        e->pre(e, r0, r1, c0, c1);
        if (hy_prof_on) { u = hy_prof_clock(); ns[0] += u - t; t = u; }
    }
    const float *a = ta == CblasNoTrans ? A + r0 * lda : A + r0;
    const float *b = tb == CblasNoTrans ? B + c0 : B + c0 * ldb;
    const hy_bf16_w *w16 = NULL;
    if (K > 0 && ta == CblasNoTrans && tb == CblasTrans && alpha == 1.0f &&
        (beta == 0.0f || beta == 1.0f) && (w16 = hy_bf16_lookup(B, ldb, K))) {
        /* a linear whose weight the set in use holds in BF16 (gemm_bf16.h) */
        hy_gemm_bf16_nt(r1 - r0, c0, c1, a, lda, w16, beta, C + r0 * ldc, ldc);
    } else if (K > 0 && ta == CblasNoTrans && tb == CblasTrans && r1 - r0 <= HY_GEMM_SMALL_ROWS &&
        alpha == 1.0f && (beta == 0.0f || beta == 1.0f)) {
        /* a few rows of a linear's product: no packing (gemm.h hy_gemm_small_nt) */
        hy_gemm_small_nt(r1 - r0, c1 - c0, K, a, lda, b, ldb, beta, C + r0 * ldc + c0, ldc);
    } else if (K == 0) {
        /* C = beta * C (BLAS may skip the scaling when K == 0) */
        for (size_t i = r0; i < r1; i++)
            for (size_t j = c0; j < c1; j++)
                C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    } else {
        sgemm(ta, tb, r1 - r0, c1 - c0, K, alpha, a, lda, b, ldb, beta, C + r0 * ldc + c0, ldc);
    }
    if (hy_prof_on) { u = hy_prof_clock(); ns[1] += u - t; t = u; }
    if (e && e->post) {
        e->post(e, r0, r1, c0, c1);
        if (hy_prof_on) ns[2] += hy_prof_clock() - t;
    }
}

/* tiles [i0, i1) of the product (tiling rt x ct, nct column tiles), on `threads` threads */
static void tiles(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, size_t M, size_t N, size_t K,
                  float alpha, const float *A, size_t lda, const float *B, size_t ldb, float beta,
                  float *C, size_t ldc, const hy_gemm_epi *e, size_t rt, size_t ct, size_t i0,
                  size_t i1, bool threads, uint64_t p[3]) {
    size_t nct = ceil_div(N, ct);
    uint64_t p0 = 0, p1 = 0, p2 = 0;
#define TILE_I                                                                                    \
    do {                                                                                          \
        size_t r0 = i / nct * rt, c0 = i % nct * ct;                                              \
        size_t r1 = r0 + rt < M ? r0 + rt : M, c1 = c0 + ct < N ? c0 + ct : N;                    \
        uint64_t ns[3] = {0, 0, 0};                                                               \
        tile(ta, tb, r0, r1, c0, c1, K, alpha, A, lda, B, ldb, beta, C, ldc, e, ns);              \
        p0 += ns[0];                                                                              \
        p1 += ns[1];                                                                              \
        p2 += ns[2];                                                                              \
    } while (0)
    if (hy_omp_par(threads)) {
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : p0, p1, p2)
        for (size_t i = i0; i < i1; i++) TILE_I;
    } else {
        for (size_t i = i0; i < i1; i++) TILE_I;   /* no region (base.h hy_omp_par) */
    }
#undef TILE_I
    p[0] = p0, p[1] = p1, p[2] = p2;
}

void hy_gemm_ex(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, size_t M, size_t N, size_t K,
                float alpha, const float *A, size_t lda, const float *B, size_t ldb, float beta,
                float *C, size_t ldc, const hy_gemm_epi *e) {
    HY_ASSERT(ldc >= N);
    HY_ASSERT(lda >= (ta == CblasNoTrans ? K : M));
    HY_ASSERT(ldb >= (tb == CblasNoTrans ? N : K));
    if (M == 0 || N == 0) return;
    uint64_t t0 = hy_prof_t0();
    size_t rt, ct;
    hy_gemm_tiling(M, N, K, &rt, &ct);
    size_t nt = ceil_div(M, rt) * ceil_div(N, ct);
    bool big = (double)M * (double)N * (double)K >= TILE_MIN_WORK, threads = nt > 1 && big;
#ifdef _OPENMP
    /* inside a region the caller's threads are the parallelism: a large product is one call,
     * a small one its tiles in turn (those of a team's parts, hy_gemm_ex_part) */
    if (omp_get_level() > 0) {
        threads = false;
        if (big) nt = 1, rt = M, ct = N;
    }
#endif
    uint64_t p[3];
    tiles(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, e, rt, ct, 0, nt, threads, p);
    if (hy_prof_on) {
        /* the call's wall time, shared out by the classes' CPU times over the tiles */
        double wall = (double)(hy_prof_clock() - t0), cpu = (double)(p[0] + p[1] + p[2]);
        double f = cpu > 0 ? wall / cpu : 0;
        hy_prof_record_ns(HY_PROF_GEMM, (uint64_t)((double)p[1] * f), 2 * (uint64_t)M * N * K);
        if (e && e->pre) hy_prof_record_ns((hy_prof_kind)e->pre_kind, (uint64_t)((double)p[0] * f), 0);
        if (e && e->post)
            hy_prof_record_ns((hy_prof_kind)e->post_kind, (uint64_t)((double)p[2] * f), 0);
    }
}

void hy_gemm_ex_part(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, size_t M, size_t N, size_t K,
                     float alpha, const float *A, size_t lda, const float *B, size_t ldb,
                     float beta, float *C, size_t ldc, const hy_gemm_epi *e, size_t part,
                     size_t parts) {
    HY_ASSERT(ldc >= N);
    HY_ASSERT(lda >= (ta == CblasNoTrans ? K : M));
    HY_ASSERT(ldb >= (tb == CblasNoTrans ? N : K));
    HY_ASSERT(part < parts);
    if (M == 0 || N == 0) return;
    size_t rt, ct;
    hy_gemm_tiling(M, N, K, &rt, &ct);
    size_t nt = ceil_div(M, rt) * ceil_div(N, ct), i0, i1;
    hy_team_share(nt, part, parts, &i0, &i1);
    uint64_t p[3];
    tiles(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, e, rt, ct, i0, i1, false, p);
}

void hy_gemm_ex_block(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, size_t M, size_t N, size_t K,
                      float alpha, const float *A, size_t lda, const float *B, size_t ldb,
                      float beta, float *C, size_t ldc, const hy_gemm_epi *e, uint64_t ns[3]) {
    HY_ASSERT(ldc >= N);
    HY_ASSERT(lda >= (ta == CblasNoTrans ? K : M));
    HY_ASSERT(ldb >= (tb == CblasNoTrans ? N : K));
    if (M == 0 || N == 0) return;
    tile(ta, tb, 0, M, 0, N, K, alpha, A, lda, B, ldb, beta, C, ldc, e, ns);
}

size_t hy_gemm_ex_tiles(size_t M, size_t N, size_t K) {
    if (M == 0 || N == 0) return 0;
    size_t rt, ct;
    hy_gemm_tiling(M, N, K, &rt, &ct);
    return ceil_div(M, rt) * ceil_div(N, ct);
}

void hy_gemm_ex_tile(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, size_t M, size_t N, size_t K,
                     float alpha, const float *A, size_t lda, const float *B, size_t ldb,
                     float beta, float *C, size_t ldc, const hy_gemm_epi *e, size_t i,
                     uint64_t ns[3]) {
    HY_ASSERT(ldc >= N);
    HY_ASSERT(lda >= (ta == CblasNoTrans ? K : M));
    HY_ASSERT(ldb >= (tb == CblasNoTrans ? N : K));
    HY_ASSERT(i < hy_gemm_ex_tiles(M, N, K));
    size_t rt, ct;
    hy_gemm_tiling(M, N, K, &rt, &ct);
    size_t nct = ceil_div(N, ct), r0 = i / nct * rt, c0 = i % nct * ct;
    size_t r1 = r0 + rt < M ? r0 + rt : M, c1 = c0 + ct < N ? c0 + ct : N;
    tile(ta, tb, r0, r1, c0, c1, K, alpha, A, lda, B, ldb, beta, C, ldc, e, ns);
}

void hy_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, size_t M, size_t N, size_t K, float alpha,
             const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C,
             size_t ldc) {
    hy_gemm_ex(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL);
}

/* op(X) dims of a stored rows x cols matrix */
static void op_dims(CBLAS_TRANSPOSE t, size_t rows, size_t cols, size_t *r, size_t *c) {
    *r = t == CblasNoTrans ? rows : cols;
    *c = t == CblasNoTrans ? cols : rows;
}

static hy_status check_group(const hy_gemm_desc *d, size_t i) {
    size_t ar, ac, br, bc;
    size_t gi = i + 1;
    if ((d->trans_a != CblasNoTrans && d->trans_a != CblasTrans) ||
        (d->trans_b != CblasNoTrans && d->trans_b != CblasTrans))
        return hy_fail(HY_EINVAL, "gemm: group %zu: transpose flag must be CblasNoTrans or "
                       "CblasTrans", gi);
    op_dims(d->trans_a, d->a_rows, d->a_cols, &ar, &ac);
    op_dims(d->trans_b, d->b_rows, d->b_cols, &br, &bc);
    if (ac != br)
        return hy_fail(HY_EINVAL, "gemm: group %zu: inner dims differ (op(A) is %zux%zu, op(B) "
                       "is %zux%zu)", gi, ar, ac, br, bc);
    if (d->c_rows != ar || d->c_cols != bc)
        return hy_fail(HY_EINVAL, "gemm: group %zu: C is %zux%zu, expected %zux%zu (op(A) is "
                       "%zux%zu, op(B) is %zux%zu)", gi, d->c_rows, d->c_cols, ar, bc, ar, ac,
                       br, bc);
    if (d->lda && d->lda < d->a_cols)
        return hy_fail(HY_EINVAL, "gemm: group %zu: lda %zu < A's %zu columns", gi, d->lda,
                       d->a_cols);
    if (d->ldb && d->ldb < d->b_cols)
        return hy_fail(HY_EINVAL, "gemm: group %zu: ldb %zu < B's %zu columns", gi, d->ldb,
                       d->b_cols);
    if (d->ldc && d->ldc < d->c_cols)
        return hy_fail(HY_EINVAL, "gemm: group %zu: ldc %zu < C's %zu columns", gi, d->ldc,
                       d->c_cols);
    if (d->a_rows && d->a_cols && !d->a)
        return hy_fail(HY_EINVAL, "gemm: group %zu: A is NULL (%zux%zu)", gi, d->a_rows, d->a_cols);
    if (d->b_rows && d->b_cols && !d->b)
        return hy_fail(HY_EINVAL, "gemm: group %zu: B is NULL (%zux%zu)", gi, d->b_rows, d->b_cols);
    if (d->c_rows && d->c_cols && !d->c)
        return hy_fail(HY_EINVAL, "gemm: group %zu: C is NULL (%zux%zu)", gi, d->c_rows, d->c_cols);
    size_t big = (size_t)INT_MAX;
    if (d->a_rows > big || d->a_cols > big || d->b_rows > big || d->b_cols > big ||
        d->lda > big || d->ldb > big || d->ldc > big)
        return hy_fail(HY_EINVAL, "gemm: group %zu: a size exceeds the BLAS integer range", gi);
    return HY_OK;
}

hy_status hy_gemm_grouped(const hy_gemm_desc *g, size_t n) {
    if (n && !g) return hy_fail(HY_EINVAL, "gemm: %zu groups but the descriptor array is NULL", n);
    /* pass 1: validate every group; nothing is written on failure */
    for (size_t i = 0; i < n; i++) HY_TRY(check_group(&g[i], i));
    /* pass 2: compute */
    for (size_t i = 0; i < n; i++) {
        const hy_gemm_desc *d = &g[i];
        size_t M = d->c_rows, N = d->c_cols;
        size_t K = d->trans_a == CblasNoTrans ? d->a_cols : d->a_rows;
        hy_gemm(d->trans_a, d->trans_b, M, N, K, d->alpha, d->a, d->lda ? d->lda : d->a_cols,
                d->b, d->ldb ? d->ldb : d->b_cols, d->beta, d->c, d->ldc ? d->ldc : d->c_cols);
    }
    return HY_OK;
}
