/* gemm_bf16.h: a linear's product C (+)= A W^T with W in bfloat16 (packed once) and A rounded to
 * bfloat16 per call, products summed in float32: the BF16 inference path (AVX-512 BF16,
 * dispatched at run time; hy_bf16_available). bfloat16 is float32's upper 16 bits (8 exponent
 * bits, 8 significand bits with the implicit one): every input is rounded to nearest even, a
 * relative change of at most 2^-9, so a product of K terms differs from float32's by about
 * 2^-9 sqrt(K) times the typical |a w| magnitude (core/tensor/README.md, "BF16").
 *
 * Summation order (fixed by K alone, whatever the tiling and the thread): output (m, n) is
 * acc = C (beta 1) or 0 (beta 0); then for k = 0, 2, 4, ... in order one VDPBF16PS step,
 * acc = acc + a[k] w[k] + a[k+1] w[k+1] (each product exact in float32; the instruction treats
 * denormal inputs and results as zero and rounds to nearest even), a missing a[K] w[K] of an odd
 * K adding 0. The accumulator is written to C and read back every HY_BF16_KC columns of A, which
 * changes no bit. Every split of C into tiles, every thread count, gives the same bits. */
#ifndef HY_GEMM_BF16_H
#define HY_GEMM_BF16_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor/base.h"

/* Columns of A converted per block: the weights' slice of a 64-column micro-panel, 64 x KC
 * bfloat16, stays in a 48 KiB L1 data cache while a tile's rows pass over it. */
#define HY_BF16_KC ((size_t)256)

/* A weight W (N, K) packed for the kernel: strips of 16 rows of W (columns of C), strip s at
 * p + s * 16 * kp, inside a strip pair j = 0 .. kp/2-1 of row n at p[(j * 16 + n % 16) * 2 + q]
 * = bf16(W[n][2 j + q]), kp = K rounded up to even; rows past N and the pad column are 0.
 * Owned by whoever allocated p (hy_bf16_pack_len elements, 64-byte aligned). */
typedef struct hy_bf16_w {
    uint16_t *p;
    size_t n, k, kp;
} hy_bf16_w;

/* True when this CPU (and its OS) runs AVX-512 BF16 instructions and the path is not switched
 * off (hy_bf16_disable). Fixed after the first call except through hy_bf16_disable. */
bool hy_bf16_available(void);
/* Switch the BF16 kernels off (true) or back to what the CPU supports (false): what a machine
 * without AVX-512 BF16 does. For the tests of the float32 fallback. */
void hy_bf16_disable(bool off);

/* float32 -> bfloat16, round to nearest even, denormals to signed zero, NaN kept quiet: the
 * conversion VCVTNE2PS2BF16 makes, in C (runs on any CPU). */
uint16_t hy_bf16_from_f32(float x);
static inline float hy_bf16_to_f32(uint16_t h) {
    union { uint32_t u; float f; } v = {.u = (uint32_t)h << 16};
    return v.f;
}

/* Elements of the packed form of an N x K weight. */
size_t hy_bf16_pack_len(size_t N, size_t K);
/* Packs W (N, K), row stride ldw >= K, into dst (hy_bf16_pack_len(N, K) elements, 64-byte
 * aligned); returns the view. Runs on any CPU. Never allocates or fails. */
hy_bf16_w hy_bf16_pack(uint16_t *dst, const float *W, size_t ldw, size_t N, size_t K);

/* C[:, c0:c1] = A W[c0:c1]^T (beta 0) or C[:, c0:c1] += A W[c0:c1]^T (beta 1), A (M, K) row
 * stride lda, C (M, .) row stride ldc, on the calling thread; c0 a multiple of 16. The
 * summation order above. Requires hy_bf16_available(). Never allocates (its A block lives on
 * the stack, HY_BF16_MC x HY_BF16_KC bfloat16) or fails. */
void hy_gemm_bf16_nt(size_t M, size_t c0, size_t c1, const float *A, size_t lda,
                     const hy_bf16_w *W, float beta, float *C, size_t ldc);

/* Rows of A converted per block (the tiles of gemm.h's tiling have at most 128). */
#define HY_BF16_MC ((size_t)128)

/* ===== the arithmetic of a model's inference (YAML precision, `hydra predict
 * --precision`, the prediction file's attribute `precision`) ===== */
typedef enum { HY_PRECISION_FP32 = 0, HY_PRECISION_BF16 = 1 } hy_precision;
/* "fp32" / "bf16" */
const char *hy_precision_name(hy_precision p);
/* Fails HY_EINVAL "precision must be fp32 or bf16 (got 'x')". */
hy_status hy_precision_parse(const char *s, hy_precision *out);

/* The BF16 forms of a model's weights, keyed by the float32 tensor each was packed from. */
typedef struct hy_bf16_set {
    size_t n;
    const float **w;      /* owned array [n], sorted: the float32 tensors */
    hy_bf16_w *pk;        /* owned array [n]: their packed forms, in mem */
    uint16_t *mem;        /* owned */
} hy_bf16_set;

/* Packs the n weights w[i] (rows[i], cols[i]), row-major and contiguous, into s (a pointer given
 * twice is packed once); s overwritten. Fails HY_ENOMEM with s zeroed. */
hy_status hy_bf16_set_build(hy_bf16_set *s, const float *const *w, const size_t *rows,
                            const size_t *cols, size_t n);
/* Frees s (a zeroed or released set is fine); zeroes it. */
void hy_bf16_set_release(hy_bf16_set *s);

/* Makes s the set whose weights the products that follow (gemm.h, on any thread) take in BF16;
 * NULL: none. Returns the set it replaces, for the caller to put back. Process-wide: set it
 * before a parallel region, never inside one. */
const hy_bf16_set *hy_bf16_use(const hy_bf16_set *s);
/* The packed form of W in the set in use when W (ld == K) is one of its tensors with K columns
 * and hy_bf16_available(), else NULL: gemm.h then runs the product in float32. */
const hy_bf16_w *hy_bf16_lookup(const float *W, size_t ld, size_t K);

#endif
