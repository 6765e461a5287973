/* attn.c: see attn.h. One (b, h) pair per task. The head's q, k, v are copied into aligned
 * buffers padded to HSP = HS rounded up to 8, and k (and v for backward) also transposed with T
 * padded to TP = T rounded up to 8, so every product is a whole number of 8-float vectors
 * (GCC vector extensions, vmath.h: explicit, so it vectorises at -O2 and on any x86-64, and
 * lowers to SSE pairs, AVX or AVX-512 lanes as the flags allow). Padded lanes are zeros, masked
 * and padded keys get -inf scores and so exactly 0 probability. exp is hy_exp8 (vmath.h).
 * Every product of the head -- scores Q K^T, A V, and in backward dO V^T, dS K, dS^T Q, A^T dY --
 * goes through one register-tiled micro-kernel (mm: 4 rows x 2 vectors of accumulators, each
 * B vector loaded once for 4 rows), with each output element summed in index order, so a
 * result never depends on the tiling or on the thread count. No BLAS: per-head 17x17x16
 * products lose to call overhead (DESIGN §7). */
#include "attn.h"

#include <math.h>
#include <string.h>

#include "base.h"
#include "prof.h"
#include "team.h"
#include "vmath.h"

typedef hy_v8f v8f;
typedef hy_v8i v8i;
#define vsplat hy_v8_splat
#define vsel hy_v8_sel

/* largest head size / padded length the buffers hold, in 8-float vectors */
#define MAX_HB 8                                   /* HS <= 64 */
#define MAX_TB ((HY_ATTN_MAX_T + 7) / 8)           /* T <= 257 */
#define MAX_TP (MAX_TB * 8)
/* Work (B*NH*T*T*HS multiply-adds per product) below which the heads run on the calling
 * thread: waking a passive OpenMP team costs tens of microseconds, more than a batch-1
 * attention of vit-fm (8 x 17 x 17 x 16) takes on one core. */
#define PAR_MIN_WORK ((size_t)1 << 18)

static inline float hmax8(v8f v) {
    float m = v[0];
    for (int i = 1; i < 8; i++) m = v[i] > m ? v[i] : m;
    return m;
}
static inline float hsum8(v8f v) {
    return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

/* ===== the micro-kernel =====
 * C[r][v] = sum_{c < K} A[r lda + c] * Bv[c ldb + v] for r < rows, v < nv (vectors): A scalars
 * with row stride lda (floats), Bv and C rows of vectors with strides ldb, ldc (vectors).
 * Each element is acc = 0, then acc += a * b for c = 0, 1, ... (the same in every tile shape). */
static void mm(v8f *C, size_t ldc, const float *A, size_t lda, const v8f *Bv, size_t ldb,
               size_t rows, size_t K, size_t nv) {
    size_t r = 0;
    for (; r + 4 <= rows; r += 4) {
        const float *a0 = A + r * lda, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda;
        v8f *c0 = C + r * ldc;
        size_t v = 0;
        for (; v + 2 <= nv; v += 2) {
            v8f s00 = vsplat(0.0f), s01 = s00, s10 = s00, s11 = s00, s20 = s00, s21 = s00,
                s30 = s00, s31 = s00;
            for (size_t c = 0; c < K; c++) {
                v8f b0 = Bv[c * ldb + v], b1 = Bv[c * ldb + v + 1];
                s00 += a0[c] * b0; s01 += a0[c] * b1;
                s10 += a1[c] * b0; s11 += a1[c] * b1;
                s20 += a2[c] * b0; s21 += a2[c] * b1;
                s30 += a3[c] * b0; s31 += a3[c] * b1;
            }
            c0[v] = s00; c0[v + 1] = s01;
            c0[ldc + v] = s10; c0[ldc + v + 1] = s11;
            c0[2 * ldc + v] = s20; c0[2 * ldc + v + 1] = s21;
            c0[3 * ldc + v] = s30; c0[3 * ldc + v + 1] = s31;
        }
        if (v < nv) {
            v8f s0 = vsplat(0.0f), s1 = s0, s2 = s0, s3 = s0;
            for (size_t c = 0; c < K; c++) {
                v8f b0 = Bv[c * ldb + v];
                s0 += a0[c] * b0;
                s1 += a1[c] * b0;
                s2 += a2[c] * b0;
                s3 += a3[c] * b0;
            }
            c0[v] = s0; c0[ldc + v] = s1; c0[2 * ldc + v] = s2; c0[3 * ldc + v] = s3;
        }
    }
    for (; r < rows; r++) {
        const float *a0 = A + r * lda;
        v8f *c0 = C + r * ldc;
        size_t v = 0;
        for (; v + 2 <= nv; v += 2) {
            v8f s0 = vsplat(0.0f), s1 = s0;
            for (size_t c = 0; c < K; c++) {
                s0 += a0[c] * Bv[c * ldb + v];
                s1 += a0[c] * Bv[c * ldb + v + 1];
            }
            c0[v] = s0;
            c0[v + 1] = s1;
        }
        if (v < nv) {
            v8f s0 = vsplat(0.0f);
            for (size_t c = 0; c < K; c++) s0 += a0[c] * Bv[c * ldb + v];
            c0[v] = s0;
        }
    }
}

/* per-(b,h) working set, padded and aligned. Row-major matrices of vectors: q, k, v, y, dy
 * [T][MAX_HB]; kt, vt [d][MAX_TB] (kt[d][jb] lanes = k[jb*8 .. jb*8+7][d]); s, at, dst
 * [T][MAX_TB] (probabilities / score gradients, and transposes) */
typedef struct head {
    v8f q[HY_ATTN_MAX_T][MAX_HB], k[HY_ATTN_MAX_T][MAX_HB], v[HY_ATTN_MAX_T][MAX_HB];
    v8f kt[MAX_HB * 8][MAX_TB];
    v8f s[HY_ATTN_MAX_T][MAX_TB];
    v8f y[HY_ATTN_MAX_T][MAX_HB];
    v8f madd[MAX_TB];               /* 0 for valid keys, -inf for masked and padded lanes */
} head;

/* backward's extra buffers */
typedef struct bwd_ws {
    head w;
    v8f vt[MAX_HB * 8][MAX_TB];
    v8f go[HY_ATTN_MAX_T][MAX_HB], dy[HY_ATTN_MAX_T][MAX_HB];
    v8f at[HY_ATTN_MAX_T][MAX_TB], dst[HY_ATTN_MAX_T][MAX_TB];
    v8f dk[HY_ATTN_MAX_T][MAX_HB], dv[HY_ATTN_MAX_T][MAX_HB];
} bwd_ws;
/* per-thread working sets (~0.6 and ~1.5 MB at the largest T: too big for OpenMP thread
 * stacks); each task overwrites what it reads, so nothing carries over between tasks */
static _Thread_local head fwd_ws;
static _Thread_local bwd_ws bwd_wsp;

/* Prefetch: a head reads one 64-byte slice of each of its sample's rows (qkv row stride 3C
 * floats), a pattern the hardware prefetchers follow poorly, so each (b, h) task first asks for
 * its share 1/NH of the next sample's rows of every array the loop reads or updates: by the
 * time the loop reaches that sample, its rows are in cache. */
static inline void prefetch_share(const float *base, size_t bytes, size_t h, size_t NH, int w) {
    const char *p = (const char *)base;
    size_t lines = (bytes + 63) / 64, l0 = lines * h / NH, l1 = lines * (h + 1) / NH;
    for (size_t l = l0; l < l1; l++) {
        if (w) __builtin_prefetch(p + 64 * l, 1, 3);
        else __builtin_prefetch(p + 64 * l, 0, 3);
    }
}

/* q (times qscale), k, v of the first n = nk rows of head (b, h) into w (rows j >= nk are
 * padding: neither a key nor a query anyone reads); kt always, vt when non-NULL, both with lanes
 * j >= nk zero up to the next multiple of 8 */
static void load_head(head *w, v8f (*vt)[MAX_TB], const float *qkv, size_t b, size_t h,
                      size_t T, size_t C, size_t HS, size_t nk, float qscale) {
    size_t HB = (HS + 7) / 8, TB = (nk + 7) / 8;
    const float *base = qkv + b * T * 3 * C + h * HS;
    for (size_t j = 0; j < nk; j++) {
        float *q = (float *)w->q[j], *k = (float *)w->k[j], *v = (float *)w->v[j];
        const float *r = base + j * 3 * C;
        for (size_t d = 0; d < HS; d++) {   /* loops, not memcpy: HS is tiny */
            q[d] = r[d] * qscale;
            k[d] = r[C + d];
            v[d] = r[2 * C + d];
        }
        for (size_t d = HS; d < HB * 8; d++) q[d] = k[d] = v[d] = 0.0f;
    }
    for (size_t d = 0; d < HS; d++) {
        float *kt = (float *)w->kt[d];
        for (size_t j = 0; j < nk; j++) kt[j] = ((float *)w->k[j])[d];
        for (size_t j = nk; j < TB * 8; j++) kt[j] = 0.0f;
        if (vt) {
            float *vtd = (float *)vt[d];
            for (size_t j = 0; j < nk; j++) vtd[j] = ((float *)w->v[j])[d];
            for (size_t j = nk; j < TB * 8; j++) vtd[j] = 0.0f;
        }
    }
    float *ma = (float *)w->madd;
    for (size_t j = 0; j < TB * 8; j++) ma[j] = j < nk ? 0.0f : -INFINITY;
}

/* s (TB vectors, the row's scores) = softmax over the valid keys (+ madd); 0 elsewhere */
static void softmax_row(v8f *s, const v8f *madd, size_t TB) {
    for (size_t jb = 0; jb < TB; jb++) s[jb] += madd[jb];
    /* max from -inf; an all -inf row gives zeros, not NaN */
    v8f m = s[0];
    for (size_t jb = 1; jb < TB; jb++) m = vsel(s[jb] > m, s[jb], m);
    float mx = hmax8(m);
    if (mx == -INFINITY) {
        for (size_t jb = 0; jb < TB; jb++) s[jb] = vsplat(0.0f);
        return;
    }
    /* exponentials and their sum; normalise */
    v8f acc = vsplat(0.0f);
    for (size_t jb = 0; jb < TB; jb++) {
        s[jb] = hy_exp8(s[jb] - mx);
        acc += s[jb];
    }
    float inv = 1.0f / hsum8(acc);
    for (size_t jb = 0; jb < TB; jb++) s[jb] *= inv;
}

/* ===== attention forward ===== */

/* pair bh = b * NH + h of the forward */
static void fwd_pair(float *out, float *att, const float *qkv, const float *gate,
                     const int32_t *kvalid, size_t B, size_t T, size_t C, size_t NH, size_t bh,
                     float scale) {
    size_t HS = C / NH, HB = (HS + 7) / 8;
    head *w = &fwd_ws;
    size_t b = bh / NH, h = bh % NH;
    /* nk valid keys; the query rows i >= nk are padding too (see attn.h): zeros */
    size_t nk = kvalid ? (size_t)kvalid[b] : T, KB = (nk + 7) / 8;
    float g = gate[h];
    if (b + 1 < B) {
        prefetch_share(qkv + (b + 1) * T * 3 * C, T * 3 * C * sizeof(float), h, NH, 0);
        prefetch_share(out + (b + 1) * T * C, T * C * sizeof(float), h, NH, 1);
    }
    load_head(w, NULL, qkv, b, h, T, C, HS, nk, scale);
    /* scores (scale q) K^T over the KB key vectors, then softmax row by row; att rows keep
     * the probabilities (0 for masked keys) */
    mm(&w->s[0][0], MAX_TB, (const float *)w->q, MAX_HB * 8, &w->kt[0][0], MAX_TB, nk, HS, KB);
    for (size_t i = 0; i < nk; i++) {
        softmax_row(w->s[i], w->madd, KB);
        if (!att) continue;
        const float *sf = (const float *)w->s[i];
        float *arow = att + (bh * T + i) * T;
        for (size_t j = 0; j < nk; j++) arow[j] = sf[j];
        for (size_t j = nk; j < T; j++) arow[j] = 0.0f;
    }
    /* y = A V over the valid keys; out = gate * y */
    mm(&w->y[0][0], MAX_HB, (const float *)w->s, MAX_TP, &w->v[0][0], MAX_HB, nk, nk, HB);
    for (size_t i = 0; i < T; i++) {
        const float *yf = (const float *)w->y[i];
        float *orow = out + (b * T + i) * C + h * HS;
        if (i < nk)
            for (size_t d = 0; d < HS; d++) orow[d] = g * yf[d];
        else
            for (size_t d = 0; d < HS; d++) orow[d] = 0.0f;
    }
}

void hy_attn_forward(float *out, float *att, const float *qkv, const float *gate,
                     const int32_t *kvalid, size_t B, size_t T, size_t C, size_t NH) {
    size_t HS = C / NH, HB = (HS + 7) / 8;
    HY_ASSERT(HS * NH == C && HB <= MAX_HB && T <= HY_ATTN_MAX_T && T >= 1);
    float scale = 1.0f / sqrtf((float)HS);
    size_t BH = B * NH;
    uint64_t t0 = hy_prof_t0();
#pragma omp parallel for schedule(static) if (BH > 1 && BH * T * T * HS > PAR_MIN_WORK)
    for (size_t bh = 0; bh < BH; bh++) fwd_pair(out, att, qkv, gate, kvalid, B, T, C, NH, bh, scale);
    hy_prof_add(HY_PROF_ATTN, t0, 0);
}

void hy_attn_forward_part(float *out, float *att, const float *qkv, const float *gate,
                          const int32_t *kvalid, size_t B, size_t T, size_t C, size_t NH,
                          size_t part, size_t parts) {
    size_t HS = C / NH, HB = (HS + 7) / 8;
    HY_ASSERT(HS * NH == C && HB <= MAX_HB && T <= HY_ATTN_MAX_T && T >= 1 && part < parts);
    float scale = 1.0f / sqrtf((float)HS);
    size_t lo, hi;
    hy_team_share(B * NH, part, parts, &lo, &hi);
    for (size_t bh = lo; bh < hi; bh++) fwd_pair(out, att, qkv, gate, kvalid, B, T, C, NH, bh, scale);
}

/* ===== attention backward ===== */

void hy_attn_backward(float *dqkv, float *dgate, const float *dout, const float *qkv,
                      const float *att, const float *gate, const int32_t *kvalid,
                      float *scratch, size_t B, size_t T, size_t C, size_t NH) {
    size_t HS = C / NH, HB = (HS + 7) / 8;
    HY_ASSERT(HS * NH == C && HB <= MAX_HB && T <= HY_ATTN_MAX_T && T >= 1);
    float scale = 1.0f / sqrtf((float)HS);
    size_t BH = B * NH;
    uint64_t t0 = hy_prof_t0();
#pragma omp parallel for schedule(static) if (BH > 1 && BH * T * T * HS > PAR_MIN_WORK)
    for (size_t bh = 0; bh < BH; bh++) {
        bwd_ws *ws = &bwd_wsp;
        head *w = &ws->w;
        size_t b = bh / NH, h = bh % NH;
        /* nk valid keys and query rows (the padding rows i >= nk: zero gradients) */
        size_t nk = kvalid ? (size_t)kvalid[b] : T, KB = (nk + 7) / 8, KP = KB * 8;
        float g = gate[h];
        if (b + 1 < B) {
            prefetch_share(qkv + (b + 1) * T * 3 * C, T * 3 * C * sizeof(float), h, NH, 0);
            prefetch_share(dqkv + (b + 1) * T * 3 * C, T * 3 * C * sizeof(float), h, NH, 1);
            prefetch_share(dout + (b + 1) * T * C, T * C * sizeof(float), h, NH, 0);
            prefetch_share(att + (b + 1) * NH * T * T, NH * T * T * sizeof(float), h, NH, 0);
        }
        load_head(w, ws->vt, qkv, b, h, T, C, HS, nk, 1.0f);
        /* A (saved probabilities) into s, padded with zeros, and its transpose into at;
         * dout's head slice into go */
        for (size_t i = 0; i < nk; i++) {
            const float *arow = att + (bh * T + i) * T, *grow = dout + (b * T + i) * C + h * HS;
            float *a = (float *)w->s[i], *gof = (float *)ws->go[i];
            for (size_t j = 0; j < nk; j++) {
                a[j] = arow[j];
                ((float *)ws->at[j])[i] = arow[j];
            }
            for (size_t j = nk; j < KP; j++) a[j] = 0.0f;
            for (size_t d = 0; d < HS; d++) gof[d] = grow[d];
            for (size_t d = HS; d < HB * 8; d++) gof[d] = 0.0f;
        }
        /* P = dout_h V^T (the key lanes from vt): with out = g * y, y = A V,
         * dgate = sum_ij a_ij P_ij (= sum_i dout_i . y_i) and dA = g P */
        v8f (*P)[MAX_TB] = ws->dst;   /* P first, then (below) the transpose of dS */
        mm(&P[0][0], MAX_TB, (const float *)ws->go, MAX_HB * 8, &ws->vt[0][0], MAX_TB, nk, HS,
           KB);
        v8f dgv = vsplat(0.0f);
        for (size_t i = 0; i < nk; i++)
            for (size_t jb = 0; jb < KB; jb++) dgv += w->s[i][jb] * P[i][jb];
        scratch[bh] = hsum8(dgv);
        if (g == 0.0f) {             /* pruned head: no q/k/v gradient at all (zeros) */
            for (size_t i = 0; i < T; i++) {
                float *base = dqkv + (b * T + i) * 3 * C + h * HS;
                for (size_t d = 0; d < HS; d++) base[d] = base[C + d] = base[2 * C + d] = 0.0f;
            }
            continue;
        }
        /* softmax backward: ds_ij = a_ij (da_ij - sum_k a_ik da_ik) * scale (masked: a = 0);
         * the dS rows overwrite P's */
        for (size_t i = 0; i < nk; i++) {
            v8f tv = vsplat(0.0f);
            for (size_t jb = 0; jb < KB; jb++) {
                P[i][jb] = g * P[i][jb];
                tv += w->s[i][jb] * P[i][jb];
            }
            float t = hsum8(tv);
            for (size_t jb = 0; jb < KB; jb++) P[i][jb] = w->s[i][jb] * (P[i][jb] - t) * scale;
        }
        /* dy = g * dout_h; dV = A^T dy over the valid rows */
        for (size_t i = 0; i < nk; i++)
            for (size_t hb = 0; hb < HB; hb++) ws->dy[i][hb] = g * ws->go[i][hb];
        mm(&ws->dv[0][0], MAX_HB, (const float *)ws->at, MAX_TP, &ws->dy[0][0], MAX_HB, nk, nk,
           HB);
        /* s_ij = scale q_i . k_j:  dQ = dS K;  dK = dS^T Q */
        mm(&w->y[0][0], MAX_HB, (const float *)P, MAX_TP, &w->k[0][0], MAX_HB, nk, nk, HB);
        for (size_t i = 0; i < nk; i++) {   /* dS^T into at (A^T is no longer needed) */
            const float *dsr = (const float *)P[i];
            for (size_t j = 0; j < nk; j++) ((float *)ws->at[j])[i] = dsr[j];
        }
        mm(&ws->dk[0][0], MAX_HB, (const float *)ws->at, MAX_TP, &w->q[0][0], MAX_HB, nk, nk,
           HB);
        /* written (+ 0.0f: a -0 result is stored as +0, as when it was added to zeros); the
         * padding rows j >= nk get no gradient */
        for (size_t j = 0; j < T; j++) {
            float *base = dqkv + (b * T + j) * 3 * C + h * HS;
            if (j < nk) {
                const float *dqf = (const float *)w->y[j], *dkf = (const float *)ws->dk[j],
                            *dvf = (const float *)ws->dv[j];
                for (size_t d = 0; d < HS; d++) {
                    base[d] = dqf[d] + 0.0f;
                    base[C + d] = dkf[d] + 0.0f;
                    base[2 * C + d] = dvf[d] + 0.0f;
                }
            } else {
                for (size_t d = 0; d < HS; d++) base[d] = base[C + d] = base[2 * C + d] = 0.0f;
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
