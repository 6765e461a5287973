/* gemm.c: see gemm.h. Row-major cblas_sgemm with size_t sizes checked to fit blasint. */
#include "gemm.h"

#include <limits.h>

#include "prof.h"

static blasint bi(size_t v) {
    HY_ASSERT(v <= (size_t)INT_MAX);
    return (blasint)v;
}

void hy_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, size_t M, size_t N, size_t K, float alpha,
             const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C,
             size_t ldc) {
    HY_ASSERT(ldc >= N);
    HY_ASSERT(lda >= (ta == CblasNoTrans ? K : M));
    HY_ASSERT(ldb >= (tb == CblasNoTrans ? N : K));
    if (M == 0 || N == 0) return;
    if (K == 0) {
        /* pass 1 only: C = beta * C (BLAS may skip the scaling when K == 0) */
        for (size_t i = 0; i < M; i++)
            for (size_t j = 0; j < N; j++)
                C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
        return;
    }
    uint64_t t0 = hy_prof_t0();
    cblas_sgemm(CblasRowMajor, ta, tb, bi(M), bi(N), bi(K), alpha, A, bi(lda ? lda : 1), B,
                bi(ldb ? ldb : 1), beta, C, bi(ldc ? ldc : 1));
    hy_prof_add(HY_PROF_GEMM, t0, 2 * (uint64_t)M * N * K);
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
