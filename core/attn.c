/* attn.c: see attn.h. One (b, h) pair per task. The head's q, k, v are copied into aligned
 * buffers padded to HSP = HS rounded up to 8, and k (and v for backward) also transposed with T
 * padded to TP = T rounded up to 8, so every inner loop is a whole number of 8-float vectors
 * (GCC vector extensions: explicit, so it vectorises at -O2 and on any x86-64, and lowers to
 * SSE pairs, AVX or AVX-512 lanes as the flags allow). Padded lanes are zeros, masked and padded
 * keys get -inf scores and so exactly 0 probability. exp is the vector twin of hy_exp
 * (vmath.h). No BLAS: per-head 17x17x16 products lose to call overhead (DESIGN §7).
 * Reductions over lanes run in a fixed order: results do not depend on the thread count. */
#include "attn.h"

#include <math.h>
#include <string.h>

#include "base.h"
#include "prof.h"

/* the v8f helpers are static (inlined), so the AVX-vs-SSE argument-passing ABI note is moot */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));

/* largest head size / padded length the stack buffers hold, in 8-float vectors */
#define MAX_HB 8                                   /* HS <= 64 */
#define MAX_TB ((HY_ATTN_MAX_T + 7) / 8)           /* T <= 257 */
/* Work (B*NH*T*T*HS multiply-adds per product) below which the heads run on the calling
 * thread: waking a passive OpenMP team costs tens of microseconds, more than a batch-1
 * attention of vit-fm (8 x 17 x 17 x 16) takes on one core. */
#define PAR_MIN_WORK ((size_t)1 << 18)

static inline v8f vsplat(float x) { return (v8f){x, x, x, x, x, x, x, x}; }
/* m ? a : b lane-wise (m from a comparison: all ones or zero) */
static inline v8f vsel(v8i m, v8f a, v8f b) { return (v8f)(((v8i)a & m) | ((v8i)b & ~m)); }
static inline float hmax8(v8f v) {
    float m = v[0];
    for (int i = 1; i < 8; i++) m = v[i] > m ? v[i] : m;
    return m;
}
static inline float hsum8(v8f v) {
    return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

/* lane-wise hy_exp (vmath.h): the same operations on 8 lanes */
static inline v8f vexp(v8f x) {
    const v8f lo = vsplat(-87.33654f), hi = vsplat(88.72283f), magic = vsplat(12582912.0f);
    v8i under = x < lo;
    v8f xc = vsel(under, lo, x);
    xc = vsel(xc > hi, hi, xc);
    v8f t = xc * 1.44269504088896341f + magic;
    v8f nf = t - magic;
    v8u n = (v8u)t - 0x4B400000u;            /* unsigned: NaN lanes must not overflow (UB) */
    v8f r = xc - nf * 0.693359375f;
    r = r - nf * -2.12194440e-4f;
    v8f p = vsplat(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    v8f scale = (v8f)((n + 127u) << 23);
    return vsel(under, vsplat(0.0f), p * scale);
}

/* per-(b,h) working set, padded and aligned */
typedef struct head {
    v8f q[HY_ATTN_MAX_T][MAX_HB], k[HY_ATTN_MAX_T][MAX_HB], v[HY_ATTN_MAX_T][MAX_HB];
    v8f kt[MAX_HB * 8][MAX_TB];     /* kt[d][jb] lanes = k[jb*8 .. jb*8+7][d] */
    v8f madd[MAX_TB];               /* 0 for valid keys, -inf for masked and padded lanes */
} head;

/* per-thread working sets (~0.3 and ~0.5 MB: too big for comfort on OpenMP thread stacks);
 * each task overwrites what it reads, so nothing carries over between tasks */
typedef struct bwd_ws {
    head w;
    v8f vt[MAX_HB * 8][MAX_TB];
    v8f dk[HY_ATTN_MAX_T][MAX_HB], dv[HY_ATTN_MAX_T][MAX_HB];
} bwd_ws;
static _Thread_local head fwd_ws;
static _Thread_local bwd_ws bwd_wsp;

static void load_head(head *w, v8f (*vt)[MAX_TB], const float *qkv, size_t b, size_t h,
                      size_t T, size_t C, size_t HS, size_t nk) {
    size_t HB = (HS + 7) / 8, TB = (T + 7) / 8;
    const float *base = qkv + b * T * 3 * C + h * HS;
    for (size_t j = 0; j < T; j++) {
        float *q = (float *)w->q[j], *k = (float *)w->k[j], *v = (float *)w->v[j];
        const float *r = base + j * 3 * C;
        for (size_t d = 0; d < HS; d++) {   /* loops, not memcpy: HS is tiny */
            q[d] = r[d];
            k[d] = r[C + d];
            v[d] = r[2 * C + d];
        }
        for (size_t d = HS; d < HB * 8; d++) q[d] = k[d] = v[d] = 0.0f;
    }
    for (size_t d = 0; d < HS; d++) {
        float *kt = (float *)w->kt[d], *vtd = vt ? (float *)vt[d] : NULL;
        for (size_t j = 0; j < TB * 8; j++) {
            kt[j] = j < T ? ((float *)w->k[j])[d] : 0.0f;
            if (vtd) vtd[j] = j < T ? ((float *)w->v[j])[d] : 0.0f;
        }
    }
    float *ma = (float *)w->madd;
    for (size_t j = 0; j < TB * 8; j++) ma[j] = j < nk ? 0.0f : -INFINITY;
}

/* s (TB vectors) = softmax over the valid keys of scale * q_i K^T; 0 elsewhere */
static void softmax_row(v8f *s, const head *w, size_t i, size_t HS, size_t TB, float scale) {
    const float *q = (const float *)w->q[i];
    for (size_t jb = 0; jb < TB; jb++) s[jb] = w->madd[jb];
    /* pass 1: scores, one head dim at a time over all lanes */
    for (size_t d = 0; d < HS; d++) {
        float qd = q[d] * scale;
        for (size_t jb = 0; jb < TB; jb++) s[jb] += qd * w->kt[d][jb];
    }
    /* pass 2: max from -inf; an all -inf row gives zeros, not NaN */
    v8f m = s[0];
    for (size_t jb = 1; jb < TB; jb++) m = vsel(s[jb] > m, s[jb], m);
    float mx = hmax8(m);
    if (mx == -INFINITY) {
        for (size_t jb = 0; jb < TB; jb++) s[jb] = vsplat(0.0f);
        return;
    }
    /* pass 3: exponentials and their sum; pass 4: normalise */
    v8f acc = vsplat(0.0f);
    for (size_t jb = 0; jb < TB; jb++) {
        s[jb] = vexp(s[jb] - mx);
        acc += s[jb];
    }
    float inv = 1.0f / hsum8(acc);
    for (size_t jb = 0; jb < TB; jb++) s[jb] *= inv;
}

/* ===== attention forward ===== */

void hy_attn_forward(float *out, float *att, const float *qkv, const float *gate,
                     const int32_t *kvalid, size_t B, size_t T, size_t C, size_t NH) {
    size_t HS = C / NH, HB = (HS + 7) / 8, TB = (T + 7) / 8;
    HY_ASSERT(HS * NH == C && HB <= MAX_HB && T <= HY_ATTN_MAX_T && T >= 1);
    float scale = 1.0f / sqrtf((float)HS);
    size_t BH = B * NH;
    uint64_t t0 = hy_prof_t0();
#pragma omp parallel for schedule(static) if (BH > 1 && BH * T * T * HS > PAR_MIN_WORK)
    for (size_t bh = 0; bh < BH; bh++) {
        head *wp = &fwd_ws;
        v8f s[MAX_TB], y[MAX_HB];
        size_t b = bh / NH, h = bh % NH;
        size_t nk = kvalid ? (size_t)kvalid[b] : T;
        float g = gate[h];
        load_head(wp, NULL, qkv, b, h, T, C, HS, nk);
        for (size_t i = 0; i < T; i++) {
            softmax_row(s, wp, i, HS, TB, scale);
            const float *sf = (const float *)s;
            float *arow = att + (bh * T + i) * T;
            for (size_t j = 0; j < T; j++) arow[j] = sf[j];
            /* y = a V over the valid keys; out = gate * y */
            const float *a = (const float *)s;
            for (size_t hb = 0; hb < HB; hb++) y[hb] = vsplat(0.0f);
            for (size_t j = 0; j < nk; j++)
                for (size_t hb = 0; hb < HB; hb++) y[hb] += a[j] * wp->v[j][hb];
            for (size_t hb = 0; hb < HB; hb++) y[hb] *= g;
            const float *yf = (const float *)y;
            float *orow = out + (b * T + i) * C + h * HS;
            for (size_t d = 0; d < HS; d++) orow[d] = yf[d];
        }
    }
    hy_prof_add(HY_PROF_ATTN, t0, 0);
}

/* ===== attention backward ===== */

void hy_attn_backward(float *dqkv, float *dgate, const float *dout, const float *qkv,
                      const float *att, const float *gate, const int32_t *kvalid,
                      float *scratch, size_t B, size_t T, size_t C, size_t NH) {
    size_t HS = C / NH, HB = (HS + 7) / 8, TB = (T + 7) / 8;
    HY_ASSERT(HS * NH == C && HB <= MAX_HB && T <= HY_ATTN_MAX_T && T >= 1);
    float scale = 1.0f / sqrtf((float)HS);
    size_t BH = B * NH;
    uint64_t t0 = hy_prof_t0();
#pragma omp parallel for schedule(static) if (BH > 1 && BH * T * T * HS > PAR_MIN_WORK)
    for (size_t bh = 0; bh < BH; bh++) {
        bwd_ws *ws = &bwd_wsp;
        head *wp = &ws->w;
        v8f (*vt)[MAX_TB] = ws->vt, (*dk)[MAX_HB] = ws->dk, (*dv)[MAX_HB] = ws->dv;
        v8f av[MAX_TB], da[MAX_TB], y[MAX_HB], go[MAX_HB], dy[MAX_HB], dq[MAX_HB];
        size_t b = bh / NH, h = bh % NH;
        size_t nk = kvalid ? (size_t)kvalid[b] : T;
        float g = gate[h];
        load_head(wp, g == 0.0f ? NULL : vt, qkv, b, h, T, C, HS, nk);
        for (size_t j = 0; j < nk; j++)
            for (size_t hb = 0; hb < HB; hb++) dk[j][hb] = dv[j][hb] = vsplat(0.0f);
        float dg = 0.0f;
        for (size_t i = 0; i < T; i++) {
            float *a = (float *)av, *gof = (float *)go;
            const float *arow = att + (bh * T + i) * T, *grow = dout + (b * T + i) * C + h * HS;
            av[TB - 1] = vsplat(0.0f);
            for (size_t j = 0; j < T; j++) a[j] = arow[j];
            go[HB - 1] = vsplat(0.0f);
            for (size_t d = 0; d < HS; d++) gof[d] = grow[d];
            /* y = a V (ungated head output, recomputed); out = g * y => dgate += dout . y */
            for (size_t hb = 0; hb < HB; hb++) y[hb] = vsplat(0.0f);
            for (size_t j = 0; j < nk; j++)
                for (size_t hb = 0; hb < HB; hb++) y[hb] += a[j] * wp->v[j][hb];
            v8f p = vsplat(0.0f);
            for (size_t hb = 0; hb < HB; hb++) p += go[hb] * y[hb];
            dg += hsum8(p);
            if (g == 0.0f) continue;     /* pruned head: no q/k/v gradient at all */
            /* dy = g * dout;  da_j = dy . v_j (all lanes from vt);  dv_j += a_j dy */
            for (size_t hb = 0; hb < HB; hb++) dy[hb] = g * go[hb];
            for (size_t jb = 0; jb < TB; jb++) da[jb] = vsplat(0.0f);
            const float *dyf = (const float *)dy;
            for (size_t d = 0; d < HS; d++)
                for (size_t jb = 0; jb < TB; jb++) da[jb] += dyf[d] * vt[d][jb];
            for (size_t j = 0; j < nk; j++)
                for (size_t hb = 0; hb < HB; hb++) dv[j][hb] += a[j] * dy[hb];
            /* softmax backward: ds_j = a_j (da_j - sum_k a_k da_k) * scale (masked: a_j = 0) */
            v8f tv = vsplat(0.0f);
            for (size_t jb = 0; jb < TB; jb++) tv += av[jb] * da[jb];
            float t = hsum8(tv);
            for (size_t jb = 0; jb < TB; jb++) da[jb] = av[jb] * (da[jb] - t) * scale;
            /* s_ij = scale q_i . k_j:  dq_i = sum_j ds_j k_j;  dk_j += ds_j q_i */
            const float *ds = (const float *)da;
            for (size_t hb = 0; hb < HB; hb++) dq[hb] = vsplat(0.0f);
            for (size_t j = 0; j < nk; j++)
                for (size_t hb = 0; hb < HB; hb++) {
                    dq[hb] += ds[j] * wp->k[j][hb];
                    dk[j][hb] += ds[j] * wp->q[i][hb];
                }
            float *dqr = dqkv + (b * T + i) * 3 * C + h * HS;
            const float *dqf = (const float *)dq;
            for (size_t d = 0; d < HS; d++) dqr[d] += dqf[d];
        }
        scratch[bh] = dg;
        if (g == 0.0f) continue;
        /* add the head's dk, dv into dqkv */
        for (size_t j = 0; j < nk; j++) {
            float *base = dqkv + (b * T + j) * 3 * C + h * HS;
            const float *dkf = (const float *)dk[j], *dvf = (const float *)dv[j];
            for (size_t d = 0; d < HS; d++) {
                base[C + d] += dkf[d];
                base[2 * C + d] += dvf[d];
            }
        }
    }
    /* dgate: per-(b,h) partials summed over b in a fixed order */
    for (size_t h = 0; h < NH; h++) {
        float acc = 0.0f;
        for (size_t b = 0; b < B; b++) acc += scratch[b * NH + h];
        dgate[h] += acc;
    }
    hy_prof_add(HY_PROF_ATTN, t0, 0);
}
