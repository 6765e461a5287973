/* vmath.h: vectorisable float erf and exp for the engine's kernels (GELU, softmax). glibc's
 * erff/expf are scalar calls that the compiler cannot vectorise without -ffast-math (which hydra
 * never uses); these are polynomials with select-only clamps that `omp simd` loops vectorise
 * (at -O3: the Makefile compiles the kernel files with -O3 in release mode). Accuracy
 * (checked against double erf/exp in tests/c/test_layers.c): hy_erf abs error < 4e-7 over all
 * floats (glibc erff: 5e-8), hy_exp rel error < 1e-7 for x in [-87, 88]; exp(-inf) = 0. */
#ifndef HY_VMATH_H
#define HY_VMATH_H

#include <stdint.h>

/* erf: a rational approximation on [-4, 4] (erf is +-1 in float beyond), odd numerator of
 * degree 13 over an even denominator of degree 8 (the coefficients of Eigen's float erf). */
static inline float hy_erf(float a) {
    float x = a < -4.0f ? -4.0f : a;
    x = x > 4.0f ? 4.0f : x;
    float x2 = x * x;
    float p = -2.72614225801306e-10f;
    p = p * x2 + 2.77068142495902e-08f;
    p = p * x2 + -2.10102402082508e-06f;
    p = p * x2 + -5.69250639462346e-05f;
    p = p * x2 + -7.34990630326855e-04f;
    p = p * x2 + -2.95459980854025e-03f;
    p = p * x2 + -1.60960333262415e-02f;
    p = p * x;
    float q = -1.45660718464996e-05f;
    q = q * x2 + -2.13374055278905e-04f;
    q = q * x2 + -1.68282697438203e-03f;
    q = q * x2 + -7.37332916720468e-03f;
    q = q * x2 + -1.42647390514189e-02f;
    return p / q;
}

/* exp: x = n ln2 + r with |r| <= ln2/2 (ln2 split hi/lo), e^r by a degree-6 polynomial,
 * 2^n built in the exponent bits. Inputs below -87.3 give 0, above 88.7 are clamped. */
static inline float hy_exp(float x) {
    float xc = x < -87.33654f ? -87.33654f : x;
    xc = xc > 88.72283f ? 88.72283f : xc;
    /* n = round(x / ln2) with the 1.5 * 2^23 trick (no float->int branch); bits give n */
    union { float f; uint32_t u; } t = {.f = xc * 1.44269504088896341f + 12582912.0f};
    float nf = t.f - 12582912.0f;
    uint32_t n = t.u - 0x4B400000u;          /* unsigned: a NaN input must not overflow (UB) */
    float r = xc - nf * 0.693359375f;        /* ln2 hi (exact in 9 bits) */
    r = r - nf * -2.12194440e-4f;            /* ln2 lo */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union { uint32_t u; float f; } scale = {.u = (n + 127u) << 23};   /* 2^n */
    float y = p * scale.f;
    return x < -87.33654f ? 0.0f : y;
}

/* ===== 8-lane twins (GCC vector extensions: explicit, so they vectorise at any -O level and on
 * any x86-64, lowering to SSE pairs, AVX or AVX-512 lanes as the flags allow). Every lane runs
 * exactly the scalar function's operations (no FMA contraction: -ffp-contract=off), so a lane's
 * result is bitwise the scalar one: a loop may mix vector blocks and a scalar tail anywhere. */
/* static inline helpers only, so the AVX-vs-SSE argument-passing ABI note is moot */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float hy_v8f __attribute__((vector_size(32)));
typedef int32_t hy_v8i __attribute__((vector_size(32)));
typedef uint32_t hy_v8u __attribute__((vector_size(32)));

static inline hy_v8f hy_v8_splat(float x) { return (hy_v8f){x, x, x, x, x, x, x, x}; }
/* m ? a : b lane-wise (m from a comparison: all ones or zero) */
static inline hy_v8f hy_v8_sel(hy_v8i m, hy_v8f a, hy_v8f b) {
    return (hy_v8f)(((hy_v8i)a & m) | ((hy_v8i)b & ~m));
}
/* unaligned load / store of 8 floats */
static inline hy_v8f hy_v8_load(const float *p) {
    hy_v8f v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
static inline void hy_v8_store(float *p, hy_v8f v) { __builtin_memcpy(p, &v, sizeof v); }

static inline hy_v8f hy_erf8(hy_v8f a) {
    hy_v8f x = hy_v8_sel(a < -4.0f, hy_v8_splat(-4.0f), a);
    x = hy_v8_sel(x > 4.0f, hy_v8_splat(4.0f), x);
    hy_v8f x2 = x * x;
    hy_v8f p = hy_v8_splat(-2.72614225801306e-10f);
    p = p * x2 + 2.77068142495902e-08f;
    p = p * x2 + -2.10102402082508e-06f;
    p = p * x2 + -5.69250639462346e-05f;
    p = p * x2 + -7.34990630326855e-04f;
    p = p * x2 + -2.95459980854025e-03f;
    p = p * x2 + -1.60960333262415e-02f;
    p = p * x;
    hy_v8f q = hy_v8_splat(-1.45660718464996e-05f);
    q = q * x2 + -2.13374055278905e-04f;
    q = q * x2 + -1.68282697438203e-03f;
    q = q * x2 + -7.37332916720468e-03f;
    q = q * x2 + -1.42647390514189e-02f;
    return p / q;
}

static inline hy_v8f hy_exp8(hy_v8f x) {
    hy_v8i under = x < -87.33654f;
    hy_v8f xc = hy_v8_sel(under, hy_v8_splat(-87.33654f), x);
    xc = hy_v8_sel(xc > 88.72283f, hy_v8_splat(88.72283f), xc);
    hy_v8f t = xc * 1.44269504088896341f + 12582912.0f;
    hy_v8f nf = t - 12582912.0f;
    hy_v8u n = (hy_v8u)t - 0x4B400000u;      /* unsigned: NaN lanes must not overflow (UB) */
    hy_v8f r = xc - nf * 0.693359375f;
    r = r - nf * -2.12194440e-4f;
    hy_v8f p = hy_v8_splat(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    hy_v8f scale = (hy_v8f)((n + 127u) << 23);
    return hy_v8_sel(under, hy_v8_splat(0.0f), p * scale);
}

#endif
