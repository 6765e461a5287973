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

/* ===== vector twins, 8 and 16 lanes (GCC vector extensions: explicit, so they vectorise at any -O
 * level and on any x86-64, lowering to SSE pairs, AVX or AVX-512 registers as the flags allow; a
 * 16-lane vector is one AVX-512 register, or two AVX registers where there is no AVX-512, which
 * still gives the out-of-order core two independent chains). Every lane runs exactly the scalar
 * function's operations (no FMA contraction: -ffp-contract=off), so a lane's result is bitwise
 * the scalar one, whatever the width: a loop may mix 16-lane blocks, 8-lane blocks and a scalar
 * tail anywhere. Both widths come from one body (HY_VMATH_DEFINE), so they cannot drift apart.
 * GELU runs 16 lanes at a time: 1.8x the 8-lane speed on an AVX-512 Zen 5 (0.36 against 0.66 ns
 * per float, a 128 x 512 tile in cache), bitwise the same. */
/* static inline helpers only, so the AVX-vs-SSE argument-passing ABI note is moot */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float hy_v8f __attribute__((vector_size(32)));
typedef int32_t hy_v8i __attribute__((vector_size(32)));
typedef uint32_t hy_v8u __attribute__((vector_size(32)));
typedef float hy_v16f __attribute__((vector_size(64)));
typedef int32_t hy_v16i __attribute__((vector_size(64)));
typedef uint32_t hy_v16u __attribute__((vector_size(64)));

/* For W lanes of types VF / VI / VU:
 *   hy_vW_splat(x)     every lane x
 *   hy_vW_sel(m, a, b) m ? a : b lane-wise (m from a comparison: all ones or zero)
 *   hy_vW_load(p), hy_vW_store(p, v)   unaligned W floats
 *   hy_erfW, hy_expW   the scalar hy_erf / hy_exp lane by lane */
#define HY_VMATH_DEFINE(W, VF, VI, VU)                                                            \
    static inline VF hy_v##W##_splat(float x) { return (VF){0} + x; }                           \
    static inline VF hy_v##W##_sel(VI m, VF a, VF b) {                                          \
        return (VF)(((VI)a & m) | ((VI)b & ~m));                                                \
    }                                                                                           \
    static inline VF hy_v##W##_load(const float *p) {                                           \
        VF v;                                                                                   \
        __builtin_memcpy(&v, p, sizeof v);                                                      \
        return v;                                                                               \
    }                                                                                           \
    static inline void hy_v##W##_store(float *p, VF v) { __builtin_memcpy(p, &v, sizeof v); }   \
    static inline VF hy_erf##W(VF a) {                                                          \
        VF x = hy_v##W##_sel(a < -4.0f, hy_v##W##_splat(-4.0f), a);                              \
        x = hy_v##W##_sel(x > 4.0f, hy_v##W##_splat(4.0f), x);                                   \
        VF x2 = x * x;                                                                          \
        VF p = hy_v##W##_splat(-2.72614225801306e-10f);                                         \
        p = p * x2 + 2.77068142495902e-08f;                                                     \
        p = p * x2 + -2.10102402082508e-06f;                                                    \
        p = p * x2 + -5.69250639462346e-05f;                                                    \
        p = p * x2 + -7.34990630326855e-04f;                                                    \
        p = p * x2 + -2.95459980854025e-03f;                                                    \
        p = p * x2 + -1.60960333262415e-02f;                                                    \
        p = p * x;                                                                              \
        VF q = hy_v##W##_splat(-1.45660718464996e-05f);                                         \
        q = q * x2 + -2.13374055278905e-04f;                                                    \
        q = q * x2 + -1.68282697438203e-03f;                                                    \
        q = q * x2 + -7.37332916720468e-03f;                                                    \
        q = q * x2 + -1.42647390514189e-02f;                                                    \
        return p / q;                                                                           \
    }                                                                                           \
    static inline VF hy_exp##W(VF x) {                                                          \
        VI under = x < -87.33654f;                                                              \
        VF xc = hy_v##W##_sel(under, hy_v##W##_splat(-87.33654f), x);                            \
        xc = hy_v##W##_sel(xc > 88.72283f, hy_v##W##_splat(88.72283f), xc);                      \
        VF t = xc * 1.44269504088896341f + 12582912.0f;                                         \
        VF nf = t - 12582912.0f;                                                                \
        VU n = (VU)t - 0x4B400000u;      /* unsigned: NaN lanes must not overflow (UB) */       \
        VF r = xc - nf * 0.693359375f;                                                          \
        r = r - nf * -2.12194440e-4f;                                                           \
        VF p = hy_v##W##_splat(1.9875691500e-4f);                                               \
        p = p * r + 1.3981999507e-3f;                                                           \
        p = p * r + 8.3334519073e-3f;                                                           \
        p = p * r + 4.1665795894e-2f;                                                           \
        p = p * r + 1.6666665459e-1f;                                                           \
        p = p * r + 5.0000001201e-1f;                                                           \
        p = p * r * r + r + 1.0f;                                                               \
        VF scale = (VF)((n + 127u) << 23);                                                      \
        return hy_v##W##_sel(under, hy_v##W##_splat(0.0f), p * scale);                          \
    }

HY_VMATH_DEFINE(8, hy_v8f, hy_v8i, hy_v8u)
HY_VMATH_DEFINE(16, hy_v16f, hy_v16i, hy_v16u)

/* Lane shuffles. HY_SHUFFLE(a, m): lane i = a[m[i] mod W]; HY_SHUFFLE2(a, b, m): lane i = lane
 * m[i] mod 2W of the concatenation a | b (m: an integer vector of W lanes, constant or not). Under
 * GCC they are __builtin_shuffle itself (the kernels' generated code); clang has no
 * __builtin_shuffle (its __builtin_shufflevector takes constant indices only), so there they are
 * element loops (clang builds only the fuzz targets): data movement only, so every result is
 * bitwise the same. */
#if defined(__clang__)
#define HY_SHUFFLE2(a, b, m) __extension__({                                                      \
        __typeof__(a) a_ = (a), b_ = (b), r_;                                                    \
        __typeof__(m) m_ = (m);                                                                  \
        const int w_ = (int)(sizeof r_ / sizeof r_[0]);                                          \
        for (int i_ = 0; i_ < w_; i_++) {                                                        \
            int k_ = (int)(m_[i_] & (2 * w_ - 1));                                               \
            r_[i_] = k_ < w_ ? a_[k_] : b_[k_ - w_];                                             \
        }                                                                                        \
        r_; })
#define HY_SHUFFLE(a, m) __extension__({                                                          \
        __typeof__(a) a1_ = (a);                                                                 \
        HY_SHUFFLE2(a1_, a1_, (m) & (int32_t)(sizeof a1_ / sizeof a1_[0] - 1)); })
#else
#define HY_SHUFFLE(a, m) __builtin_shuffle(a, m)
#define HY_SHUFFLE2(a, b, m) __builtin_shuffle(a, b, m)
#endif

/* Horizontal sums in a fixed tree: hy_hsum8(v) = ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7)),
 * hy_hsum16(v) = hy_hsum8 of the lane pairs v_i + v_{i+8} (attention's and LayerNorm's row sums) */
static inline float hy_hsum8(hy_v8f v) {
    v = v + HY_SHUFFLE(v, ((hy_v8i){1, 0, 3, 2, 5, 4, 7, 6}));
    v = v + HY_SHUFFLE(v, ((hy_v8i){2, 3, 0, 1, 6, 7, 4, 5}));
    return v[0] + v[4];
}
static inline float hy_hsum16(hy_v16f v) {
    hy_v8f lo, hi;
    __builtin_memcpy(&lo, &v, sizeof lo);
    __builtin_memcpy(&hi, (const char *)&v + sizeof lo, sizeof hi);
    return hy_hsum8(lo + hi);
}

#endif
