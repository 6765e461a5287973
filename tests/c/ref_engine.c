/* ref_engine.c: see ref_engine.h. Every loop is the textbook formula, accumulated in double. */
#include "ref_engine.h"

#include <math.h>

void ref_gemm(int ta, int tb, size_t M, size_t N, size_t K, double alpha, const float *A,
              size_t lda, const float *B, size_t ldb, double beta, const float *C0, size_t ldc,
              double *C) {
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double s = 0.0;
            for (size_t k = 0; k < K; k++) {
                double a = ta ? (double)A[k * lda + i] : (double)A[i * lda + k];
                double b = tb ? (double)B[j * ldb + k] : (double)B[k * ldb + j];
                s += a * b;
            }
            double c0 = beta != 0.0 ? beta * (double)C0[i * ldc + j] : 0.0;
            C[i * ldc + j] = alpha * s + c0;
        }
}

void ref_linear(double *out, const float *in, const float *w, const float *b, size_t N,
                size_t Din, size_t Dout) {
    for (size_t n = 0; n < N; n++)
        for (size_t o = 0; o < Dout; o++) {
            double s = b ? (double)b[o] : 0.0;
            for (size_t i = 0; i < Din; i++) s += (double)in[n * Din + i] * (double)w[o * Din + i];
            out[n * Dout + o] = s;
        }
}

void ref_layernorm(double *out, double *mean, double *rstd, const float *x, const float *w,
                   const float *b, size_t N, size_t D, double eps) {
    for (size_t n = 0; n < N; n++) {
        const float *r = x + n * D;
        double m = 0.0, v = 0.0;
        for (size_t i = 0; i < D; i++) m += (double)r[i];
        m /= (double)D;
        for (size_t i = 0; i < D; i++) v += ((double)r[i] - m) * ((double)r[i] - m);
        v /= (double)D;
        double s = 1.0 / sqrt(v + eps);
        for (size_t i = 0; i < D; i++)
            out[n * D + i] = ((double)r[i] - m) * s * (double)w[i] + (double)b[i];
        if (mean) mean[n] = m;
        if (rstd) rstd[n] = s;
    }
}

void ref_gelu(double *out, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double v = (double)x[i];
        out[i] = 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    }
}

void ref_softmax(double *out, const float *x, size_t N, size_t K) {
    for (size_t n = 0; n < N; n++) {
        double mx = -INFINITY, s = 0.0;
        for (size_t k = 0; k < K; k++) mx = fmax(mx, (double)x[n * K + k]);
        if (isinf(mx) && mx < 0) {
            for (size_t k = 0; k < K; k++) out[n * K + k] = 0.0;
            continue;
        }
        for (size_t k = 0; k < K; k++) s += exp((double)x[n * K + k] - mx);
        for (size_t k = 0; k < K; k++) out[n * K + k] = exp((double)x[n * K + k] - mx) / s;
    }
}

double ref_ce(double *probs, const float *logits, const int32_t *labels, size_t N, size_t K,
              double eps) {
    double total = 0.0;
    for (size_t n = 0; n < N; n++) {
        double mx = -INFINITY, s = 0.0;
        for (size_t k = 0; k < K; k++) mx = fmax(mx, (double)logits[n * K + k]);
        for (size_t k = 0; k < K; k++) s += exp((double)logits[n * K + k] - mx);
        double lse = mx + log(s);
        for (size_t k = 0; k < K; k++) {
            double lp = (double)logits[n * K + k] - lse;
            double t = eps / (double)K + ((int32_t)k == labels[n] ? 1.0 - eps : 0.0);
            total -= t * lp;
            if (probs) probs[n * K + k] = exp(lp);
        }
    }
    return total / (double)N;
}

void ref_attn(double *out, double *att, const float *qkv, const float *gate,
              const int32_t *kvalid, size_t B, size_t T, size_t C, size_t NH) {
    size_t HS = C / NH;
    double scale = 1.0 / sqrt((double)HS);
    double row[512];
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < NH; h++) {
            size_t nk = kvalid ? (size_t)kvalid[b] : T;
            for (size_t i = 0; i < T; i++) {
                if (i >= nk) {   /* a padding query row: zeros (attn.h) */
                    for (size_t d = 0; d < HS; d++) out[(b * T + i) * C + h * HS + d] = 0.0;
                    if (att)
                        for (size_t j = 0; j < T; j++) att[((b * NH + h) * T + i) * T + j] = 0.0;
                    continue;
                }
                const float *q = qkv + (b * T + i) * 3 * C + h * HS;
                double mx = -INFINITY;
                for (size_t j = 0; j < T; j++) {
                    if (j >= nk) { row[j] = -INFINITY; continue; }
                    const float *k = qkv + (b * T + j) * 3 * C + C + h * HS;
                    double s = 0.0;
                    for (size_t d = 0; d < HS; d++) s += (double)q[d] * (double)k[d];
                    row[j] = s * scale;
                    mx = fmax(mx, row[j]);
                }
                double sum = 0.0;
                for (size_t j = 0; j < T; j++) {
                    row[j] = j < nk ? exp(row[j] - mx) : 0.0;
                    sum += row[j];
                }
                for (size_t j = 0; j < T; j++) row[j] /= sum;
                if (att)
                    for (size_t j = 0; j < T; j++) att[((b * NH + h) * T + i) * T + j] = row[j];
                for (size_t d = 0; d < HS; d++) {
                    double y = 0.0;
                    for (size_t j = 0; j < T; j++)
                        y += row[j] * (double)qkv[(b * T + j) * 3 * C + 2 * C + h * HS + d];
                    out[(b * T + i) * C + h * HS + d] = (double)gate[h] * y;
                }
            }
        }
}

void ref_patches(double *patches, const float *images, size_t B, size_t Cin, size_t S, size_t p) {
    size_t G = S / p, F = Cin * p * p;
    for (size_t b = 0; b < B; b++)
        for (size_t gy = 0; gy < G; gy++)
            for (size_t gx = 0; gx < G; gx++)
                for (size_t c = 0; c < Cin; c++)
                    for (size_t dy = 0; dy < p; dy++)
                        for (size_t dx = 0; dx < p; dx++)
                            patches[(b * G * G + gy * G + gx) * F + (c * p + dy) * p + dx] =
                                (double)images[((b * Cin + c) * S + gy * p + dy) * S + gx * p + dx];
}

void ref_assemble(double *x, const float *emb, const float *cls, const float *pos, size_t B,
                  size_t T, size_t D) {
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++)
            for (size_t i = 0; i < D; i++) {
                double e = t == 0 ? (double)cls[i] : (double)emb[(b * (T - 1) + t - 1) * D + i];
                x[(b * T + t) * D + i] = e + (double)pos[t * D + i];
            }
}

void ref_to_float(float *dst, const double *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = (float)src[i];
}
