/* gemm_bf16.c: see gemm_bf16.h. The AVX-512 BF16 kernel, compiled for that target in this file
 * alone (a target attribute on its functions: the rest of the build keeps its own -march) and
 * called only after hy_bf16_available() said the CPU runs it.
 *
 * Blocking (per call, on one thread): rows in blocks of MC, K in blocks of KC; a block of A is
 * rounded to bfloat16 into a row-major buffer on the stack (KC / 2 pairs a row: the pair
 * a[k], a[k+1] is one 32-bit word, the operand VDPBF16PS broadcasts); then for every group of
 * four 16-column strips of W (64 columns, 64 x KC bfloat16 = 32 KiB: stays in L1) the block's
 * rows go through the micro-kernel MR = 6 rows at a time: 6 x 4 accumulators (24 of the 32
 * vector registers), per pair four loads of W and six broadcasts of A for 24 VDPBF16PS. */
#include "tensor/gemm_bf16.h"

#include <stdlib.h>
#include <string.h>

#include "tensor/base.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_BF16_KERNEL 1
#include <immintrin.h>
/* the kernel's functions only: the rest of the build keeps its own -march */
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#else
#define HAVE_BF16_KERNEL 0
#endif

#define MR 6
#define NV 4                /* 16-column strips a micro-kernel covers */
#define MC HY_BF16_MC
#define KC HY_BF16_KC

/* ===== dispatch ===== */

static int disabled;        /* hy_bf16_disable */

bool hy_bf16_available(void) {
#if HAVE_BF16_KERNEL
    if (disabled) return false;
    static int have = -1;   /* races write the same value */
    if (have < 0) {
        __builtin_cpu_init();
        have = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512f");
    }
    return have != 0;
#else
    return false;
#endif
}

void hy_bf16_disable(bool off) { disabled = off; }

/* ===== conversion and packing (any CPU) ===== */

uint16_t hy_bf16_from_f32(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);   /* NaN */
    if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);         /* 0, denormal */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

size_t hy_bf16_pack_len(size_t N, size_t K) {
    size_t strips = (N + 15) / 16, kp = (K + 1) / 2 * 2;
    return strips * 16 * kp;
}

hy_bf16_w hy_bf16_pack(uint16_t *dst, const float *W, size_t ldw, size_t N, size_t K) {
    size_t kp = (K + 1) / 2 * 2, strips = (N + 15) / 16;
    for (size_t s = 0; s < strips; s++) {
        uint16_t *st = dst + s * 16 * kp;
        for (size_t j = 0; j < kp / 2; j++)
            for (size_t n = 0; n < 16; n++)
                for (size_t q = 0; q < 2; q++) {
                    size_t row = s * 16 + n, k = 2 * j + q;
                    st[(j * 16 + n) * 2 + q] =
                        row < N && k < K ? hy_bf16_from_f32(W[row * ldw + k]) : 0;
                }
    }
    return (hy_bf16_w){.p = dst, .n = N, .k = K, .kp = kp};
}

/* ===== precision names ===== */

const char *hy_precision_name(hy_precision p) { return p == HY_PRECISION_BF16 ? "bf16" : "fp32"; }

hy_status hy_precision_parse(const char *s, hy_precision *out) {
    if (s && strcmp(s, "fp32") == 0) *out = HY_PRECISION_FP32;
    else if (s && strcmp(s, "bf16") == 0) *out = HY_PRECISION_BF16;
    else return hy_fail(HY_EINVAL, "precision must be fp32 or bf16 (got '%s')", s ? s : "");
    return HY_OK;
}

/* ===== weight sets ===== */

static const hy_bf16_set *in_use;   /* hy_bf16_use */

typedef struct ent { const float *w; size_t i; } ent;

static int cmp_ent(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const ent *)a)->w, y = (uintptr_t)((const ent *)b)->w;
    return (x > y) - (x < y);
}

/* elements of a packed weight in a set, rounded up to 64 bytes */
static size_t slot_len(size_t rows, size_t cols) {
    return (hy_bf16_pack_len(rows, cols) + 31) / 32 * 32;
}

hy_status hy_bf16_set_build(hy_bf16_set *s, const float *const *w, const size_t *rows,
                            const size_t *cols, size_t n) {
    memset(s, 0, sizeof *s);
    /* (pointer, index) sorted by pointer, duplicates dropped */
    ent *e = hy_xmalloc((n ? n : 1) * sizeof *e);
    if (!e) return HY_ENOMEM;
    for (size_t i = 0; i < n; i++) e[i] = (ent){w[i], i};
    qsort(e, n, sizeof *e, cmp_ent);
    size_t u = 0, total = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || e[u - 1].w != e[i].w) e[u++] = e[i];
    for (size_t i = 0; i < u; i++) total += slot_len(rows[e[i].i], cols[e[i].i]);
    s->w = hy_xmalloc((u ? u : 1) * sizeof *s->w);
    s->pk = hy_xmalloc((u ? u : 1) * sizeof *s->pk);
    s->mem = hy_xmalloc_aligned((total ? total : 1) * sizeof *s->mem);
    if (!s->w || !s->pk || !s->mem) {
        hy_free(e);
        hy_bf16_set_release(s);
        return HY_ENOMEM;
    }
    size_t off = 0;
    for (size_t i = 0; i < u; i++) {
        size_t r = rows[e[i].i], c = cols[e[i].i];
        s->w[i] = e[i].w;
        s->pk[i] = hy_bf16_pack(s->mem + off, e[i].w, c, r, c);
        off += slot_len(r, c);
    }
    s->n = u;
    hy_free(e);
    return HY_OK;
}

void hy_bf16_set_release(hy_bf16_set *s) {
    hy_free(s->w);
    hy_free(s->pk);
    hy_free(s->mem);
    memset(s, 0, sizeof *s);
}

const hy_bf16_set *hy_bf16_use(const hy_bf16_set *s) {
    const hy_bf16_set *prev = in_use;
    in_use = s;
    return prev;
}

const hy_bf16_w *hy_bf16_lookup(const float *W, size_t ld, size_t K) {
    const hy_bf16_set *s = in_use;
    if (!s || !s->n || !hy_bf16_available()) return NULL;
    size_t lo = 0, hi = s->n;   /* the first entry >= W */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)s->w[mid] < (uintptr_t)W) lo = mid + 1;
        else hi = mid;
    }
    if (lo == s->n || s->w[lo] != W || s->pk[lo].k != K || ld != K) return NULL;
    return &s->pk[lo];
}

#if HAVE_BF16_KERNEL
/* rows [0, mr) x columns [0, kc) of A (row stride lda) to bfloat16 pairs: ab[r * KC/2 + j]
 * holds a[r][2 j], a[r][2 j + 1] (a[r][kc] = 0 for an odd kc); rows [mr, MC) are left alone */
BF16_TARGET static void convert_block(uint32_t *ab, const float *A, size_t lda, size_t mr,
                                      size_t kc) {
    for (size_t r = 0; r < mr; r++) {
        const float *a = A + r * lda;
        uint16_t *o = (uint16_t *)(ab + r * (KC / 2));
        size_t k = 0;
        for (; k + 32 <= kc; k += 32) {
            __m512bh h = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(a + k + 16), _mm512_loadu_ps(a + k));
            _mm512_storeu_si512(o + k, (__m512i)h);
        }
        if (k < kc) {
            size_t left = kc - k;   /* 1 .. 31 */
            __mmask16 m0 = (__mmask16)(left >= 16 ? 0xffffu : (1u << left) - 1u);
            __mmask16 m1 = (__mmask16)(left > 16 ? (1u << (left - 16)) - 1u : 0u);
            __m512 lo = _mm512_maskz_loadu_ps(m0, a + k);
            __m512 hi = _mm512_maskz_loadu_ps(m1, a + k + 16);
            __m512bh h = _mm512_cvtne2ps_pbh(hi, lo);
            size_t words = (left + 1) / 2;
            __mmask16 mw = (__mmask16)(words >= 16 ? 0xffffu : (1u << words) - 1u);
            _mm512_mask_storeu_epi32(o + k, mw, (__m512i)h);
        }
    }
}

/* The micro-kernel: rows [0, mr) x strips [0, nv) of C (+)= the block's pairs [0, np).
 *   a   the block's rows, KC/2 words each     b  strip 0's pair 0; strip v at b + v * bs
 *   c   C at the tile's corner, row stride ldc   last  valid columns of strip nv - 1 (1..16)
 *   load  0: start from 0, else from C */
BF16_TARGET static inline __attribute__((always_inline)) void micro(int mr, int nv, size_t np,
                                                        const uint32_t *a, const uint16_t *b,
                                                        size_t bs, float *c, size_t ldc,
                                                        unsigned last, int load) {
    __m512 acc[MR][NV];
    __mmask16 ml = (__mmask16)(last >= 16 ? 0xffffu : (1u << last) - 1u);
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            __mmask16 m = v == nv - 1 ? ml : (__mmask16)0xffffu;
            acc[r][v] = load ? _mm512_maskz_loadu_ps(m, c + (size_t)r * ldc + 16 * v)
                             : _mm512_setzero_ps();
        }
    for (size_t j = 0; j < np; j++) {
        __m512bh w[NV];
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            w[v] = (__m512bh)_mm512_load_si512(b + (size_t)v * bs + j * 32);
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            __m512bh x = (__m512bh)_mm512_set1_epi32((int)a[(size_t)r * (KC / 2) + j]);
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], x, w[v]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            __mmask16 m = v == nv - 1 ? ml : (__mmask16)0xffffu;
            _mm512_mask_storeu_ps(c + (size_t)r * ldc + 16 * v, m, acc[r][v]);
        }
}

#define MICRO_NV(mr_)                                                                    \
    switch (nv) {                                                                        \
    case 1: micro(mr_, 1, np, a, b, bs, c, ldc, last, load); break;                      \
    case 2: micro(mr_, 2, np, a, b, bs, c, ldc, last, load); break;                      \
    case 3: micro(mr_, 3, np, a, b, bs, c, ldc, last, load); break;                      \
    default: micro(mr_, 4, np, a, b, bs, c, ldc, last, load); break;                     \
    }

BF16_TARGET static void micro_any(int mr, int nv, size_t np, const uint32_t *a,
                                  const uint16_t *b, size_t bs, float *c, size_t ldc,
                                  unsigned last, int load) {
    switch (mr) {
    case 1: MICRO_NV(1) break;
    case 2: MICRO_NV(2) break;
    case 3: MICRO_NV(3) break;
    case 4: MICRO_NV(4) break;
    case 5: MICRO_NV(5) break;
    default: MICRO_NV(6) break;
    }
}

BF16_TARGET void hy_gemm_bf16_nt(size_t M, size_t c0, size_t c1, const float *A, size_t lda,
                                 const hy_bf16_w *W, float beta, float *C, size_t ldc) {
    HY_ASSERT(c0 % 16 == 0 && c0 <= c1 && c1 <= W->n && (beta == 0.0f || beta == 1.0f));
    HY_ASSERT(hy_bf16_available());
    size_t K = W->k, bs = 16 * W->kp;
    _Alignas(64) uint32_t ab[MC * (KC / 2)];
    if (K == 0) {
        if (beta == 0.0f)
            for (size_t m = 0; m < M; m++) memset(C + m * ldc + c0, 0, (c1 - c0) * sizeof *C);
        return;
    }
    for (size_t m0 = 0; m0 < M; m0 += MC) {
        size_t mb = M - m0 < MC ? M - m0 : MC;
        for (size_t k0 = 0; k0 < K; k0 += KC) {
            size_t kc = K - k0 < KC ? K - k0 : KC, np = (kc + 1) / 2;
            int load = k0 > 0 || beta != 0.0f;
            convert_block(ab, A + m0 * lda + k0, lda, mb, kc);
            for (size_t n0 = c0; n0 < c1; n0 += 16 * NV) {
                size_t cols = c1 - n0 < 16 * NV ? c1 - n0 : 16 * NV;
                int nv = (int)((cols + 15) / 16);
                unsigned last = (unsigned)(cols - 16 * (size_t)(nv - 1));
                const uint16_t *b = W->p + (n0 / 16) * bs + k0 * 16;
                for (size_t r = 0; r < mb; r += MR) {
                    int mr = (int)(mb - r < MR ? mb - r : MR);
                    micro_any(mr, nv, np, ab + r * (KC / 2), b, bs, C + (m0 + r) * ldc + n0,
                              ldc, last, load);
                }
            }
        }
    }
}

#else
void hy_gemm_bf16_nt(size_t M, size_t c0, size_t c1, const float *A, size_t lda,
                     const hy_bf16_w *W, float beta, float *C, size_t ldc) {
    (void)M; (void)c0; (void)c1; (void)A; (void)lda; (void)W; (void)beta; (void)C; (void)ldc;
    HY_ASSERT(!"hy_gemm_bf16_nt without hy_bf16_available()");
}
#endif
