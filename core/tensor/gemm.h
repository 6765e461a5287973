/* gemm.h: row-major single-precision GEMM over OpenBLAS, and the ragged grouped GEMM.
 * Transposes are cblas' named flags (CblasNoTrans / CblasTrans), never magic integers.
 * hy_gemm is a kernel (no validation beyond HY_ASSERT, no failure); hy_gemm_grouped validates
 * every group before computing any, so a bad group never leaves outputs half-written. */
#ifndef HY_GEMM_H
#define HY_GEMM_H

#include <cblas.h>
#include <stddef.h>

#include "tensor/base.h"

/* C = alpha * op(A) op(B) + beta * C, all row-major.
 * Threads: C is cut into tiles whose sizes depend on M, N, K alone (hy_gemm_tiling), never on
 * the thread count; each tile is one single-threaded OpenBLAS call (OpenBLAS runs at 1 thread:
 * hy_threads_init) or, for a few rows of a linear's product, one hy_gemm_small_nt call, and the
 * tiles are shared out among hydra's OpenMP threads. A linear's product (NoTrans, Trans, alpha
 * 1, beta 0 or 1) whose B the BF16 set in use holds (gemm_bf16.h hy_bf16_use, a model's
 * inference at precision bf16) runs every tile in hy_gemm_bf16_nt instead. A result is
 * then bitwise the same with any number of threads (OpenBLAS's own threading is not: its
 * Haswell/Zen kernels round differently at 2 threads). Inside an OpenMP parallel region
 * (omp_get_level() > 0: the fused model's slices) the product runs on the calling thread, the
 * caller's threads being the parallelism: one call from HY_GEMM_PAR_MIN_WORK up, below it its
 * tiles in turn (the tiles a team's parts share out, hy_gemm_ex_part).
 *   op(A) (M, K): A is (M, K) with lda >= K when ta == CblasNoTrans, else (K, M) with lda >= M
 *   op(B) (K, N): B is (K, N) with ldb >= N when tb == CblasNoTrans, else (N, K) with ldb >= K
 *   C     (M, N): ldc >= N; written when beta == 0 (C may hold NaN then), scaled+added otherwise
 * K == 0 gives C = beta * C. Never allocates or fails. */
void hy_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, size_t M, size_t N, size_t K, float alpha,
             const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C,
             size_t ldc);

/* C = A B^T (beta 0) or C + A B^T (beta 1) for row-major A (M, K), B (N, K), C (M, N): every
 * output the dot product of a row of A and a row of B, summed in one fixed order (16 partial
 * sums in k order, then a fixed tree; gemm_small.c) that every build (AVX-512, AVX2 + FMA,
 * portable) and every split of the outputs computes bitwise the same. No packing: for a few
 * rows OpenBLAS spends more time repacking B on every call than multiplying. hy_gemm's tiles of
 * a linear's product (NoTrans, Trans, alpha 1, beta 0 or 1) with at most HY_GEMM_SMALL_ROWS rows
 * run here, the others in OpenBLAS. Never allocates or fails. */
void hy_gemm_small_nt(size_t M, size_t N, size_t K, const float *A, size_t lda, const float *B,
                      size_t ldb, float beta, float *C, size_t ldc);

/* Rows up to which a tile of a linear's product runs in hy_gemm_small_nt: above it OpenBLAS's
 * own AVX-512 kernels win (core/README.md, Kernels, `gemm_small.c`). A pure constant, so that
 * which kernel computes a tile depends on its shape alone. */
#define HY_GEMM_SMALL_ROWS ((size_t)48)

/* Multiply-adds below which a product runs on the calling thread (its tiles one after another):
 * opening an OpenMP region would cost more than the product. */
#define HY_GEMM_PAR_MIN_WORK ((size_t)1 << 21)

/* The tiling of an M x N (x K) product: tiles of *rows x *cols (the last ones smaller). Below
 * HY_GEMM_PAR_MIN_WORK multiply-adds one tile, or two column tiles from 2^16 up (N >= 64) for a
 * small pass's team (hy_gemm_ex_part). A pure function of the shape. */
void hy_gemm_tiling(size_t M, size_t N, size_t K, size_t *rows, size_t *cols);
/* The most rows hy_gemm_tiling gives a tile of a product it cuts into row tiles (fewer rows
 * than the product): what per-row-tile scratch is sized for. */
size_t hy_gemm_tile_rows_max(void);

/* Per-tile hooks of hy_gemm_ex, called on the thread that computes the tile, with the tile's
 * rows [r0, r1) and columns [c0, c1) of C: pre before the tile's product (e.g. C = bias, then
 * beta = 1), post after it (e.g. an activation of the fresh tile while it is in cache). Their
 * time goes to classes pre_kind / post_kind of the per-kernel breakdown (prof.h), the product's
 * to HY_PROF_GEMM. A hook must not open an OpenMP region or call hy_gemm. */
typedef struct hy_gemm_epi {
    void (*pre)(const struct hy_gemm_epi *e, size_t r0, size_t r1, size_t c0, size_t c1);
    void (*post)(const struct hy_gemm_epi *e, size_t r0, size_t r1, size_t c0, size_t c1);
    int pre_kind, post_kind;          /* hy_prof_kind */
    const float *u, *v;               /* the hooks' operands and sizes (meaning theirs) */
    float *w, *x;
    size_t ld, n;
    const void *aux;                  /* further operands of a hook (its own struct) */
} hy_gemm_epi;

/* hy_gemm with per-tile hooks (epi may be NULL: hy_gemm). */
void hy_gemm_ex(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, size_t M, size_t N, size_t K,
                float alpha, const float *A, size_t lda, const float *B, size_t ldb, float beta,
                float *C, size_t ldc, const hy_gemm_epi *epi);

/* The tiles of part `part` of `parts` (hy_team_share over the tiles in order) of hy_gemm_ex's
 * product, on the calling thread: a team's threads calling it with parts = the team size
 * compute the whole product between them, bitwise as hy_gemm_ex does. Records no timings (a
 * team runs only with the per-kernel breakdown off). */
void hy_gemm_ex_part(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, size_t M, size_t N, size_t K,
                     float alpha, const float *A, size_t lda, const float *B, size_t ldb,
                     float beta, float *C, size_t ldc, const hy_gemm_epi *e, size_t part,
                     size_t parts);

/* The whole M x N product as ONE OpenBLAS call with the hooks (rows [0, M), columns [0, N)),
 * on the calling thread, no tiling: what hy_gemm_ex computes for a tile of that shape at those
 * operands, bitwise (the caller offsets A, C and the hooks' operands to the tile). For a kernel
 * that runs several products tile by tile (layers.h hy_mlp_infer). ns[0..2] += the pre, product
 * and post times when timing (prof.h); the caller records them. */
void hy_gemm_ex_block(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, size_t M, size_t N, size_t K,
                      float alpha, const float *A, size_t lda, const float *B, size_t ldb,
                      float beta, float *C, size_t ldc, const hy_gemm_epi *e, uint64_t ns[3]);

/* The tiles of hy_gemm_ex's product at the top level (its tiling, hy_gemm_tiling), one at a
 * time, for a kernel that runs a product's tiles inside its own region beside other work
 * (layers.h hy_linear_backward_ln): hy_gemm_ex_tiles is their count, hy_gemm_ex_tile runs tile
 * i (row-major over the tiles, as hy_gemm_ex deals them) on the calling thread with the hooks;
 * all of them, in any order on any threads, compute hy_gemm_ex's product bitwise. ns[0..2] +=
 * the pre, product and post times when timing; the caller records them. */
size_t hy_gemm_ex_tiles(size_t M, size_t N, size_t K);
void hy_gemm_ex_tile(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, size_t M, size_t N, size_t K,
                     float alpha, const float *A, size_t lda, const float *B, size_t ldb,
                     float beta, float *C, size_t ldc, const hy_gemm_epi *e, size_t i,
                     uint64_t ns[3]);

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
