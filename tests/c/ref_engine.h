/* ref_engine.h: naive double-precision twins of the engine's optimized kernels (gemm, attention,
 * layers). Float inputs, double outputs; straight loops, no BLAS, no OpenMP. Shapes and
 * argument meanings are those of the optimized kernel named in each comment. */
#ifndef HY_REF_ENGINE_H
#define HY_REF_ENGINE_H

#include <stddef.h>
#include <stdint.h>

/* hy_gemm: C = alpha op(A) op(B) + beta C0; trans flags are 0/1 (1 = transposed). */
void ref_gemm(int ta, int tb, size_t M, size_t N, size_t K, double alpha, const float *A,
              size_t lda, const float *B, size_t ldb, double beta, const float *C0, size_t ldc,
              double *C);
/* hy_linear_forward */
void ref_linear(double *out, const float *in, const float *w, const float *b, size_t N,
                size_t Din, size_t Dout);
/* hy_layernorm_forward (mean and rstd may be NULL) */
void ref_layernorm(double *out, double *mean, double *rstd, const float *x, const float *w,
                   const float *b, size_t N, size_t D, double eps);
/* hy_gelu_forward */
void ref_gelu(double *out, const float *x, size_t n);
/* hy_softmax_forward */
void ref_softmax(double *out, const float *x, size_t N, size_t K);
/* hy_ce_forward: returns the mean loss; probs may be NULL */
double ref_ce(double *probs, const float *logits, const int32_t *labels, size_t N, size_t K,
              double eps);
/* hy_attn_forward (att may be NULL) */
void ref_attn(double *out, double *att, const float *qkv, const float *gate,
              const int32_t *kvalid, size_t B, size_t T, size_t C, size_t NH);
/* hy_patch_extract */
void ref_patches(double *patches, const float *images, size_t B, size_t Cin, size_t S, size_t p);
/* hy_embed_assemble_forward */
void ref_assemble(double *x, const float *emb, const float *cls, const float *pos, size_t B,
                  size_t T, size_t D);
/* float copies for comparing with check_close */
void ref_to_float(float *dst, const double *src, size_t n);

#endif
