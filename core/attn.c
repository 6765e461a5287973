/* attn.c: see attn.h. One (b, h) pair per task. The head's keys are copied transposed and
 * zero-padded to TP = T rounded up to 8 (kt, vt: HS x TP) and row-major (k, v: T x HS), so that
 * every inner loop is a fixed-width `omp simd` loop: scores and softmax over TP lanes (masked and
 * padded lanes are -inf -> exactly 0), a V / dK / dQ / dV as HS-wide axpys. No BLAS: per-head
 * 17x17x16 products lose to call overhead (DESIGN §7). exp is hy_exp (vmath.h), vectorisable. */
#include "attn.h"

#include <math.h>
#include <string.h>

#include "base.h"
#include "vmath.h"

/* largest head size the stack buffers hold */
#define MAX_HS 64
#define MAX_TP ((HY_ATTN_MAX_T + 7) / 8 * 8)

/* head h of batch b: kt, vt (HS, TP) transposed and zero-padded; k, v (T, HS) row-major */
static void load_head(float *kt, float *vt, float *k, float *v, const float *qkv, size_t b,
                      size_t h, size_t T, size_t TP, size_t C, size_t HS) {
    const float *base = qkv + b * T * 3 * C + h * HS;
    for (size_t j = 0; j < T; j++) {
        const float *kr = base + j * 3 * C + C, *vr = base + j * 3 * C + 2 * C;
        memcpy(k + j * HS, kr, HS * sizeof *k);
        memcpy(v + j * HS, vr, HS * sizeof *v);
        for (size_t d = 0; d < HS; d++) {
            kt[d * TP + j] = kr[d];
            if (vt) vt[d * TP + j] = vr[d];
        }
    }
    for (size_t d = 0; d < HS; d++)
        for (size_t j = T; j < TP; j++) {
            kt[d * TP + j] = 0.0f;
            if (vt) vt[d * TP + j] = 0.0f;
        }
}

/* s (TP) = softmax over the first nk lanes of scale * q K^T; other lanes 0.
 * Returns 0 when every lane is -inf (then s is all 0). */
static int softmax_row(float *s, const float *q, const float *kt, size_t nk, size_t TP,
                       size_t HS, float scale) {
    for (size_t j = 0; j < TP; j++) s[j] = 0.0f;
    /* pass 1: scores s = scale * q . k_j, one HS step at a time over all lanes */
    for (size_t d = 0; d < HS; d++) {
        float qd = q[d] * scale;
        const float *kr = kt + d * TP;
#pragma omp simd aligned(s, kr : 32)
        for (size_t j = 0; j < TP; j++) s[j] += qd * kr[j];
    }
    /* pass 2: mask keys >= nk (padding lanes too), running max from -inf */
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (size_t j = 0; j < TP; j++) {
        s[j] = j < nk ? s[j] : -INFINITY;
        mx = s[j] > mx ? s[j] : mx;
    }
    if (mx == -INFINITY) {
        for (size_t j = 0; j < TP; j++) s[j] = 0.0f;
        return 0;
    }
    /* pass 3: exponentials (exp(-inf) = 0) and their sum; pass 4: normalise */
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (size_t j = 0; j < TP; j++) {
        s[j] = hy_exp(s[j] - mx);
        sum += s[j];
    }
    float inv = 1.0f / sum;
#pragma omp simd
    for (size_t j = 0; j < TP; j++) s[j] *= inv;
    return 1;
}

/* ===== attention forward ===== */

void hy_attn_forward(float *out, float *att, const float *qkv, const float *gate,
                     const int32_t *kvalid, size_t B, size_t T, size_t C, size_t NH) {
    size_t HS = C / NH, TP = (T + 7) / 8 * 8;
    HY_ASSERT(HS * NH == C && HS <= MAX_HS && T <= HY_ATTN_MAX_T);
    float scale = 1.0f / sqrtf((float)HS);
    size_t BH = B * NH;
#pragma omp parallel for schedule(static) if (BH > 1)
    for (size_t bh = 0; bh < BH; bh++) {
        _Alignas(64) float kt[MAX_HS * MAX_TP];
        _Alignas(64) float k[HY_ATTN_MAX_T * MAX_HS];
        _Alignas(64) float v[HY_ATTN_MAX_T * MAX_HS];
        _Alignas(64) float s[MAX_TP];
        _Alignas(64) float y[MAX_HS];
        size_t b = bh / NH, h = bh % NH;
        size_t nk = kvalid ? (size_t)kvalid[b] : T;
        float g = gate[h];
        load_head(kt, NULL, k, v, qkv, b, h, T, TP, C, HS);
        for (size_t i = 0; i < T; i++) {
            const float *q = qkv + (b * T + i) * 3 * C + h * HS;
            float *a = att + (bh * T + i) * T;
            float *o = out + (b * T + i) * C + h * HS;
            softmax_row(s, q, kt, nk, TP, HS, scale);
            memcpy(a, s, T * sizeof *a);
            /* y = a V over the valid keys; out = gate * y */
            for (size_t d = 0; d < HS; d++) y[d] = 0.0f;
            for (size_t j = 0; j < nk; j++) {
                float aj = s[j];
                const float *vr = v + j * HS;
#pragma omp simd
                for (size_t d = 0; d < HS; d++) y[d] += aj * vr[d];
            }
#pragma omp simd
            for (size_t d = 0; d < HS; d++) o[d] = g * y[d];
        }
    }
}

/* ===== attention backward ===== */

void hy_attn_backward(float *dqkv, float *dgate, const float *dout, const float *qkv,
                      const float *att, const float *gate, const int32_t *kvalid,
                      float *scratch, size_t B, size_t T, size_t C, size_t NH) {
    size_t HS = C / NH, TP = (T + 7) / 8 * 8;
    HY_ASSERT(HS * NH == C && HS <= MAX_HS && T <= HY_ATTN_MAX_T);
    float scale = 1.0f / sqrtf((float)HS);
    size_t BH = B * NH;
#pragma omp parallel for schedule(static) if (BH > 1)
    for (size_t bh = 0; bh < BH; bh++) {
        _Alignas(64) float kt[MAX_HS * MAX_TP];
        _Alignas(64) float vt[MAX_HS * MAX_TP];
        _Alignas(64) float k[HY_ATTN_MAX_T * MAX_HS];
        _Alignas(64) float v[HY_ATTN_MAX_T * MAX_HS];
        _Alignas(64) float dk[HY_ATTN_MAX_T * MAX_HS];
        _Alignas(64) float dv[HY_ATTN_MAX_T * MAX_HS];
        _Alignas(64) float a[MAX_TP];
        _Alignas(64) float da[MAX_TP];
        _Alignas(64) float y[MAX_HS];
        _Alignas(64) float dy[MAX_HS];
        _Alignas(64) float dq[MAX_HS];
        size_t b = bh / NH, h = bh % NH;
        size_t nk = kvalid ? (size_t)kvalid[b] : T;
        float g = gate[h];
        load_head(kt, vt, k, v, qkv, b, h, T, TP, C, HS);
        memset(dk, 0, nk * HS * sizeof *dk);
        memset(dv, 0, nk * HS * sizeof *dv);
        float dg = 0.0f;
        for (size_t i = 0; i < T; i++) {
            const float *go = dout + (b * T + i) * C + h * HS;
            const float *q = qkv + (b * T + i) * 3 * C + h * HS;
            memcpy(a, att + (bh * T + i) * T, T * sizeof *a);
            for (size_t j = T; j < TP; j++) a[j] = 0.0f;
            /* y = a V (ungated head output, recomputed); out = g * y => dgate += dout . y */
            for (size_t d = 0; d < HS; d++) y[d] = 0.0f;
            for (size_t j = 0; j < nk; j++) {
                float aj = a[j];
                const float *vr = v + j * HS;
#pragma omp simd
                for (size_t d = 0; d < HS; d++) y[d] += aj * vr[d];
            }
            float p = 0.0f;
#pragma omp simd reduction(+ : p)
            for (size_t d = 0; d < HS; d++) p += go[d] * y[d];
            dg += p;
            if (g == 0.0f) continue;     /* pruned head: no q/k/v gradient at all */
            /* dy = g * dout; da_j = dy . v_j (all lanes at once from vt); dv_j += a_j dy */
#pragma omp simd
            for (size_t d = 0; d < HS; d++) dy[d] = g * go[d];
            for (size_t j = 0; j < TP; j++) da[j] = 0.0f;
            for (size_t d = 0; d < HS; d++) {
                float dyd = dy[d];
                const float *vr = vt + d * TP;
#pragma omp simd aligned(da, vr : 32)
                for (size_t j = 0; j < TP; j++) da[j] += dyd * vr[j];
            }
            for (size_t j = 0; j < nk; j++) {
                float aj = a[j];
                float *dvr = dv + j * HS;
#pragma omp simd
                for (size_t d = 0; d < HS; d++) dvr[d] += aj * dy[d];
            }
            /* softmax backward: ds_j = a_j (da_j - sum_k a_k da_k) * scale (masked: a_j = 0) */
            float t = 0.0f;
#pragma omp simd reduction(+ : t)
            for (size_t j = 0; j < TP; j++) t += a[j] * da[j];
#pragma omp simd
            for (size_t j = 0; j < TP; j++) da[j] = a[j] * (da[j] - t) * scale;
            /* s_ij = scale q_i . k_j:  dq_i = sum_j ds_j k_j;  dk_j += ds_j q_i */
            for (size_t d = 0; d < HS; d++) dq[d] = 0.0f;
            for (size_t j = 0; j < nk; j++) {
                float dsj = da[j];
                const float *kr = k + j * HS;
                float *dkr = dk + j * HS;
#pragma omp simd
                for (size_t d = 0; d < HS; d++) {
                    dq[d] += dsj * kr[d];
                    dkr[d] += dsj * q[d];
                }
            }
            float *dqr = dqkv + (b * T + i) * 3 * C + h * HS;
#pragma omp simd
            for (size_t d = 0; d < HS; d++) dqr[d] += dq[d];
        }
        scratch[bh] = dg;
        if (g == 0.0f) continue;
        /* add the head's dk, dv into dqkv */
        for (size_t j = 0; j < nk; j++) {
            float *base = dqkv + (b * T + j) * 3 * C + h * HS;
#pragma omp simd
            for (size_t d = 0; d < HS; d++) {
                base[C + d] += dk[j * HS + d];
                base[2 * C + d] += dv[j * HS + d];
            }
        }
    }
    /* dgate: per-(b,h) partials summed over b in a fixed order */
    for (size_t h = 0; h < NH; h++) {
        float acc = 0.0f;
        for (size_t b = 0; b < B; b++) acc += scratch[b * NH + h];
        dgate[h] += acc;
    }
}
