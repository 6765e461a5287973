/* gemm.h: row-major single-precision GEMM over OpenBLAS, and the ragged grouped GEMM.
 * Transposes are cblas' named flags (CblasNoTrans / CblasTrans), never magic integers.
 * hy_gemm is a kernel (no validation beyond HY_ASSERT, no failure); hy_gemm_grouped validates
 * every group before computing any, so a bad group never leaves outputs half-written. */
#ifndef HY_GEMM_H
#define HY_GEMM_H

#include <cblas.h>
#include <stddef.h>

#include "base.h"

/* C = alpha * op(A) op(B) + beta * C, all row-major.
 *   op(A) (M, K): A is (M, K) with lda >= K when ta == CblasNoTrans, else (K, M) with lda >= M
 *   op(B) (K, N): B is (K, N) with ldb >= N when tb == CblasNoTrans, else (N, K) with ldb >= K
 *   C     (M, N): ldc >= N; written when beta == 0 (C may hold NaN then), scaled+added otherwise
 * K == 0 gives C = beta * C. Never allocates or fails. */
void hy_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, size_t M, size_t N, size_t K, float alpha,
             const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C,
             size_t ldc);

/* One product of a grouped GEMM: C = alpha * op(A) op(B) + beta * C with the *stored* shapes
 * given, so that mismatches can be reported. ld* = 0 means tightly packed (ld = cols). */
typedef struct hy_gemm_desc {
    CBLAS_TRANSPOSE trans_a, trans_b;
    const float *a;  size_t a_rows, a_cols, lda;   /* stored A */
    const float *b;  size_t b_rows, b_cols, ldb;   /* stored B */
    float *c;        size_t c_rows, c_cols, ldc;   /* C = op(A) rows x op(B) cols */
    float alpha, beta;
} hy_gemm_desc;

/* n independent products, each with its own sizes (ragged). Validates all groups first:
 * inner dims, C shape, leading dims, NULL pointers with non-empty shapes. A bad group fails
 * HY_EINVAL naming it 1-based, e.g. "gemm: group 2: inner dims differ (op(A) is 64x128,
 * op(B) is 256x32)", and no C is touched. Then computes them in order (OpenBLAS 0.3.21 has no
 * batched sgemm; each product uses its threads). Borrows every pointer. */
hy_status hy_gemm_grouped(const hy_gemm_desc *g, size_t n);

#endif
