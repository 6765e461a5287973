/* metrics.c: see metrics.h. Formulas are written above each definition (and in
 * results/README.md). Sorting uses qsort with a total order on (value, index), so the result
 * never depends on qsort's handling of equal keys; tie groups are then walked explicitly. */
#include "eval/metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"
#include "tensor/rng.h"

typedef struct keyed {
    double v;
    size_t i;   /* original index, or the class of the sample (0 = ID, 1 = OOD) for OOD sorts */
} keyed;

/* ascending by value, then by index: a total order, so qsort's instability cannot matter */
static int cmp_asc(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    if (x->v < y->v) return -1;
    if (x->v > y->v) return 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* descending by value, then ascending by index */
static int cmp_desc(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    if (x->v > y->v) return -1;
    if (x->v < y->v) return 1;
    return (x->i > y->i) - (x->i < y->i);
}

static int cmp_double_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

static int cmp_double_asc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ===== validation ===== */

hy_status hy_metrics_check_probs(const float *p, size_t R, size_t C, double tol) {
    for (size_t r = 0; r < R; r++) {
        const float *row = p + r * C;
        double sum = 0.0;
        for (size_t c = 0; c < C; c++) {
            double v = (double)row[c];
            if (isnan(v))   /* printed as "nan" whatever its sign bit */
                return hy_fail(HY_EINVAL, "metrics: row %zu (0-based) has a non-finite value at "
                               "class %zu (nan)", r, c);
            if (!isfinite(v))
                return hy_fail(HY_EINVAL, "metrics: row %zu (0-based) has a non-finite value at "
                               "class %zu (%g)", r, c, v);
            if (v < 0.0)
                return hy_fail(HY_EINVAL, "metrics: row %zu (0-based) has a negative value at "
                               "class %zu (%g)", r, c, v);
            sum += v;
        }
        if (fabs(sum - 1.0) > tol)
            return hy_fail(HY_EINVAL, "metrics: row %zu (0-based) sums to %.6g (expected 1 "
                           "within %g)", r, sum, tol);
    }
    return HY_OK;
}

hy_status hy_metrics_check_labels(const int32_t *labels, size_t N, size_t C) {
    for (size_t i = 0; i < N; i++)
        if (labels[i] < 0 || (size_t)labels[i] >= C)
            return hy_fail(HY_EINVAL, "metrics: label %d at row %zu (0-based) is out of range "
                           "[0, %zu)", (int)labels[i], i, C);
    return HY_OK;
}

hy_status hy_metrics_check_finite(const float *x, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return hy_fail(HY_EINVAL, "metrics: %s has a non-finite value at flat index %zu "
                           "(0-based, %s)", what, i,
                           isnan(x[i]) ? "nan" : x[i] > 0 ? "inf" : "-inf");
    return HY_OK;
}

/* ===== per-sample quantities ===== */

static size_t argmax_row(const float *row, size_t C) {
    size_t best = 0;
    for (size_t c = 1; c < C; c++)
        if (row[c] > row[best]) best = c;   /* strict: ties keep the lowest class */
    return best;
}

/* conf = max_c p̄_c, pred = argmax_c p̄_c */
void hy_metrics_predict(double *conf, int32_t *pred, const float *p, size_t N, size_t C) {
    for (size_t i = 0; i < N; i++) {
        size_t k = argmax_row(p + i * C, C);
        pred[i] = (int32_t)k;
        conf[i] = (double)p[i * C + k];
    }
}

void hy_metrics_correct(uint8_t *correct, const int32_t *pred, const int32_t *labels, size_t N) {
    for (size_t i = 0; i < N; i++) correct[i] = pred[i] == labels[i];
}

/* NLL_i = -log max(p̄_{i,y}, eps), eps = HY_METRICS_EPS = 1e-12 */
void hy_metrics_nll_probs(double *nll, const float *p, const int32_t *labels, size_t N,
                          size_t C) {
    for (size_t i = 0; i < N; i++) {
        double py = (double)p[i * C + (size_t)labels[i]];
        nll[i] = -log(py > HY_METRICS_EPS ? py : HY_METRICS_EPS);
    }
}

/* NLL_i = -[ logsumexp_m( z_{m,i,y} - logsumexp_c z_{m,i,c} ) - log M ]
 * (log-mean-exp over members of the log-softmax at the true class = log p̄_y, stably). */
void hy_metrics_nll_logits(double *nll, const float *z, const int32_t *labels, size_t M,
                           size_t N, size_t C) {
    for (size_t i = 0; i < N; i++) {
        size_t y = (size_t)labels[i];
        /* pass 1: max over members of the log-softmax at y (for a stable log-mean-exp) */
        double mx = -INFINITY;
        for (size_t m = 0; m < M; m++) {
            const float *row = z + (m * N + i) * C;
            double ls = (double)row[y] - hy_logsumexp(row, C);
            if (ls > mx) mx = ls;
        }
        /* pass 2: sum of exp(ls - mx) */
        double s = 0.0;
        for (size_t m = 0; m < M; m++) {
            const float *row = z + (m * N + i) * C;
            s += exp((double)row[y] - hy_logsumexp(row, C) - mx);
        }
        nll[i] = -(mx + log(s) - log((double)M));
    }
}

/* Brier_i = sum_c (p̄_{i,c} - [y_i = c])^2 */
void hy_metrics_brier(double *brier, const float *p, const int32_t *labels, size_t N, size_t C) {
    for (size_t i = 0; i < N; i++) {
        double s = 0.0;
        for (size_t c = 0; c < C; c++) {
            double d = (double)p[i * C + c] - ((size_t)labels[i] == c ? 1.0 : 0.0);
            s += d * d;
        }
        brier[i] = s;
    }
}

/* ===== OOD scores ===== */

/* s_i = -max_c p̄_{i,c} */
void hy_metrics_score_msp(double *s, const float *p, size_t N, size_t C) {
    for (size_t i = 0; i < N; i++) s[i] = -(double)p[i * C + argmax_row(p + i * C, C)];
}

static double entropy_f(const float *p, size_t C) {
    double h = 0.0;
    for (size_t c = 0; c < C; c++) {
        double v = (double)p[c];
        if (v > 0.0) h -= v * log(v);
    }
    return h;
}

/* s_i = H(p̄_i) = -sum_c p̄_{i,c} log p̄_{i,c} */
void hy_metrics_score_entropy(double *s, const float *p, size_t N, size_t C) {
    for (size_t i = 0; i < N; i++) s[i] = entropy_f(p + i * C, C);
}

/* s_i = H(q_i) - (1/M) sum_m H(p_{m,i}),  q_{i,c} = (1/M) sum_m p_{m,i,c} */
void hy_metrics_score_mi(double *s, const float *pm, size_t M, size_t N, size_t C) {
    for (size_t i = 0; i < N; i++) {
        if (M <= 1) { s[i] = 0.0; continue; }
        double hq = 0.0, hm = 0.0;
        for (size_t c = 0; c < C; c++) {
            double q = 0.0;
            for (size_t m = 0; m < M; m++) q += (double)pm[(m * N + i) * C + c];
            q /= (double)M;
            if (q > 0.0) hq -= q * log(q);
        }
        for (size_t m = 0; m < M; m++) hm += entropy_f(pm + (m * N + i) * C, C);
        s[i] = hq - hm / (double)M;
    }
}

/* s_i = -logsumexp_c( zbar_{i,c} ),  zbar_{i,c} = (1/M) sum_m z_{m,i,c} */
void hy_metrics_score_energy(double *s, const float *z, size_t M, size_t N, size_t C) {
    for (size_t i = 0; i < N; i++) {
        /* pass 1: the mean logits' max */
        double mx = -INFINITY;
        for (size_t c = 0; c < C; c++) {
            double zb = 0.0;
            for (size_t m = 0; m < M; m++) zb += (double)z[(m * N + i) * C + c];
            zb /= (double)M;
            if (zb > mx) mx = zb;
        }
        /* pass 2: sum of exp(zbar - max) */
        double sum = 0.0;
        for (size_t c = 0; c < C; c++) {
            double zb = 0.0;
            for (size_t m = 0; m < M; m++) zb += (double)z[(m * N + i) * C + c];
            sum += exp(zb / (double)M - mx);
        }
        s[i] = -(mx + log(sum));
    }
}

/* s_i = -(1/M) sum_m max_c z_{m,i,c} */
void hy_metrics_score_maxlogit(double *s, const float *z, size_t M, size_t N, size_t C) {
    for (size_t i = 0; i < N; i++) {
        double sum = 0.0;
        for (size_t m = 0; m < M; m++) {
            const float *row = z + (m * N + i) * C;
            sum += (double)row[argmax_row(row, C)];
        }
        s[i] = -sum / (double)M;
    }
}

/* s_i = #{m < m' : argmax p_{m,i} != argmax p_{m',i}} / (M(M-1)/2) */
void hy_metrics_score_disagreement(double *s, const float *pm, size_t M, size_t N, size_t C) {
    for (size_t i = 0; i < N; i++) {
        if (M <= 1) { s[i] = 0.0; continue; }
        size_t differ = 0;
        for (size_t m = 0; m < M; m++) {
            size_t a = argmax_row(pm + (m * N + i) * C, C);
            for (size_t k = m + 1; k < M; k++)
                differ += a != argmax_row(pm + (k * N + i) * C, C);
        }
        s[i] = (double)differ / ((double)M * (double)(M - 1) / 2.0);
    }
}

/* ===== calibration ===== */

double hy_metrics_mean(const double *x, size_t n) {
    if (n == 0) return 0.0;
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += x[i];
    return s / (double)n;
}

/* Bin of conf among nbins equal-width bins [b/nbins, (b+1)/nbins) whose edges are the doubles
 * b/nbins; conf >= 1 (and anything above) goes to the last bin, conf < 0 to the first. */
static size_t width_bin(double conf, size_t nbins) {
    if (!(conf > 0.0)) return 0;
    if (conf >= 1.0) return nbins - 1;
    double nb = (double)nbins;
    size_t b = (size_t)floor(conf * nb);
    if (b >= nbins) b = nbins - 1;
    /* conf * nbins can round across an edge: move b until lo <= conf < hi exactly */
    while (b > 0 && conf < (double)b / nb) b--;
    while (b + 1 < nbins && conf >= (double)(b + 1) / nb) b++;
    return b;
}

void hy_metrics_reliability(int64_t *count, double *acc, double *mconf, const double *conf,
                            const uint8_t *correct, size_t N, size_t nbins) {
    for (size_t b = 0; b < nbins; b++) { count[b] = 0; acc[b] = 0.0; mconf[b] = 0.0; }
    for (size_t i = 0; i < N; i++) {
        size_t b = width_bin(conf[i], nbins);
        count[b]++;
        acc[b] += correct[i] ? 1.0 : 0.0;
        mconf[b] += conf[i];
    }
    for (size_t b = 0; b < nbins; b++)
        if (count[b] > 0) { acc[b] /= (double)count[b]; mconf[b] /= (double)count[b]; }
}

/* ECE = sum_b (n_b / N) |acc_b - conf_b| over equal-width bins; MCE = max_b |acc_b - conf_b|
 * over non-empty bins. Sums per bin are accumulated in one pass, so no scratch is needed. */
void hy_metrics_ece(double *ece, double *mce, const double *conf, const uint8_t *correct,
                    size_t N, size_t nbins) {
    double nsum[256], csum[256], asum[256];
    HY_ASSERT(nbins > 0 && nbins <= 256 && N > 0);
    for (size_t b = 0; b < nbins; b++) nsum[b] = csum[b] = asum[b] = 0.0;
    for (size_t i = 0; i < N; i++) {
        size_t b = width_bin(conf[i], nbins);
        nsum[b] += 1.0;
        csum[b] += conf[i];
        asum[b] += correct[i] ? 1.0 : 0.0;
    }
    double e = 0.0, mx = 0.0;
    for (size_t b = 0; b < nbins; b++) {
        if (nsum[b] == 0.0) continue;
        double gap = fabs(asum[b] / nsum[b] - csum[b] / nsum[b]);
        e += nsum[b] / (double)N * gap;
        if (gap > mx) mx = gap;
    }
    if (ece) *ece = e;
    if (mce) *mce = mx;
}

/* aECE with caller scratch `k` (N): equal-mass groups of the conf-ascending order */
static void aece_scratch(double *aece, const double *conf, const uint8_t *correct, size_t N,
                         size_t nbins, keyed *k) {
    for (size_t i = 0; i < N; i++) { k[i].v = conf[i]; k[i].i = i; }
    qsort(k, N, sizeof *k, cmp_asc);
    size_t q = N / nbins, r = N % nbins, pos = 0;
    double e = 0.0;
    for (size_t g = 0; g < nbins; g++) {
        size_t n = q + (g < r ? 1 : 0);
        if (n == 0) continue;
        double cs = 0.0, as = 0.0;
        for (size_t j = pos; j < pos + n; j++) {
            cs += k[j].v;
            as += correct[k[j].i] ? 1.0 : 0.0;
        }
        e += (double)n / (double)N * fabs(as / (double)n - cs / (double)n);
        pos += n;
    }
    *aece = e;
}

hy_status hy_metrics_aece(double *aece, const double *conf, const uint8_t *correct, size_t N,
                          size_t nbins) {
    if (N == 0) return hy_fail(HY_EINVAL, "metrics: aECE of an empty set");
    keyed *k = hy_xmalloc(N * sizeof *k);
    if (!k) return HY_ENOMEM;
    aece_scratch(aece, conf, correct, N, nbins, k);
    hy_free(k);
    return HY_OK;
}

/* Sorts by conf descending (ties: lower index first) into k (N). */
static void order_by_conf(keyed *k, const double *conf, size_t N) {
    for (size_t i = 0; i < N; i++) { k[i].v = conf[i]; k[i].i = i; }
    qsort(k, N, sizeof *k, cmp_desc);
}

/* AURC = (1/N) sum_{k=1..N} (errors among the k most confident) / k */
static double aurc_scratch(const double *conf, const uint8_t *correct, size_t N, keyed *k) {
    order_by_conf(k, conf, N);
    double errs = 0.0, area = 0.0;
    for (size_t j = 0; j < N; j++) {
        errs += correct[k[j].i] ? 0.0 : 1.0;
        area += errs / (double)(j + 1);
    }
    return area / (double)N;
}

hy_status hy_metrics_aurc(double *aurc, const double *conf, const uint8_t *correct, size_t N) {
    if (N == 0) return hy_fail(HY_EINVAL, "metrics: AURC of an empty set");
    keyed *k = hy_xmalloc(N * sizeof *k);
    if (!k) return HY_ENOMEM;
    *aurc = aurc_scratch(conf, correct, N, k);
    hy_free(k);
    return HY_OK;
}

hy_status hy_metrics_risk_coverage(double *cov, double *risk, const double *conf,
                                   const uint8_t *correct, size_t N, size_t npoints) {
    if (N == 0) return hy_fail(HY_EINVAL, "metrics: risk-coverage curve of an empty set");
    if (npoints == 0 || npoints > N)
        return hy_fail(HY_EINVAL, "metrics: risk-coverage points must be in [1, %zu] (got %zu)",
                       N, npoints);
    keyed *k = hy_xmalloc(N * sizeof *k);
    if (!k) return HY_ENOMEM;
    order_by_conf(k, conf, N);
    double errs = 0.0;
    size_t j = 0;
    for (size_t n = 1; n <= N && j < npoints; n++) {
        errs += correct[k[n - 1].i] ? 0.0 : 1.0;
        size_t want = ((j + 1) * N + npoints - 1) / npoints;   /* ceil((j+1) N / npoints) */
        if (n == want) {
            cov[j] = (double)n / (double)N;
            risk[j] = errs / (double)n;
            j++;
        }
    }
    hy_free(k);
    HY_ASSERT(j == npoints);
    return HY_OK;
}

static void id_scratch(hy_id_metrics *out, const double *conf, const uint8_t *correct,
                       const double *nll, const double *brier, size_t N, size_t nbins,
                       keyed *k) {
    double acc = 0.0;
    for (size_t i = 0; i < N; i++) acc += correct[i] ? 1.0 : 0.0;
    out->acc = acc / (double)N;
    out->nll = hy_metrics_mean(nll, N);
    out->brier = hy_metrics_mean(brier, N);
    hy_metrics_ece(&out->ece, &out->mce, conf, correct, N, nbins);
    aece_scratch(&out->aece, conf, correct, N, nbins, k);
    out->aurc = aurc_scratch(conf, correct, N, k);
}

static hy_status check_nbins(size_t nbins) {
    if (nbins == 0 || nbins > 256)
        return hy_fail(HY_EINVAL, "metrics: number of bins must be in [1, 256] (got %zu)", nbins);
    return HY_OK;
}

hy_status hy_metrics_id(hy_id_metrics *out, const double *conf, const uint8_t *correct,
                        const double *nll, const double *brier, size_t N, size_t nbins) {
    if (N == 0) return hy_fail(HY_EINVAL, "metrics: classification metrics of an empty set");
    HY_TRY(check_nbins(nbins));
    keyed *k = hy_xmalloc(N * sizeof *k);
    if (!k) return HY_ENOMEM;
    id_scratch(out, conf, correct, nll, brier, N, nbins, k);
    hy_free(k);
    return HY_OK;
}

/* ===== OOD detection ===== */

static hy_status check_scores(const double *s_id, size_t n_id, const double *s_ood,
                              size_t n_ood) {
    if (n_id == 0 || n_ood == 0)
        return hy_fail(HY_EINVAL, "metrics: OOD metrics need ID and OOD samples (got %zu ID, "
                       "%zu OOD)", n_id, n_ood);
    for (size_t i = 0; i < n_id; i++)
        if (isnan(s_id[i]))
            return hy_fail(HY_EINVAL, "metrics: ID score %zu (0-based) is NaN", i);
    for (size_t i = 0; i < n_ood; i++)
        if (isnan(s_ood[i]))
            return hy_fail(HY_EINVAL, "metrics: OOD score %zu (0-based) is NaN", i);
    return HY_OK;
}

/* Fills k (n_neg + n_pos) with (score, class) — class 1 for pos — sorted by score ascending;
 * within a tie group the class order does not matter to the callers (groups are walked whole). */
static void pool(keyed *k, const double *s_neg, size_t n_neg, const double *s_pos, size_t n_pos,
                 double sign) {
    for (size_t i = 0; i < n_neg; i++) { k[i].v = sign * s_neg[i]; k[i].i = 0; }
    for (size_t i = 0; i < n_pos; i++) { k[n_neg + i].v = sign * s_pos[i]; k[n_neg + i].i = 1; }
    qsort(k, n_neg + n_pos, sizeof *k, cmp_asc);
}

/* AUROC = (1 / (n_id n_ood)) sum over tie groups g (ascending) of
 *         ood_g * (id strictly below g) + 0.5 * ood_g * id_g */
static double auroc_scratch(const double *s_id, size_t n_id, const double *s_ood, size_t n_ood,
                            keyed *k) {
    size_t n = n_id + n_ood;
    pool(k, s_id, n_id, s_ood, n_ood, 1.0);
    double below = 0.0, u = 0.0;
    for (size_t j = 0; j < n;) {
        size_t e = j;
        double a_id = 0.0, a_ood = 0.0;
        while (e < n && k[e].v == k[j].v) {
            if (k[e].i) a_ood += 1.0; else a_id += 1.0;
            e++;
        }
        u += a_ood * below + 0.5 * a_ood * a_id;
        below += a_id;
        j = e;
    }
    return u / ((double)n_id * (double)n_ood);
}

/* AP = sum over thresholds t (distinct scores, descending) of (ΔTP_t / P) * TP_t / (TP_t + FP_t)
 * where TP_t, FP_t count positives/negatives with score >= t. */
static double aupr_scratch(const double *s_pos, size_t n_pos, const double *s_neg, size_t n_neg,
                           double sign, keyed *k) {
    size_t n = n_pos + n_neg;
    pool(k, s_neg, n_neg, s_pos, n_pos, sign);
    double tp = 0.0, fp = 0.0, ap = 0.0;
    for (size_t j = n; j > 0;) {   /* walk the ascending array from the top */
        size_t e = j;
        double a_pos = 0.0, a_neg = 0.0;
        while (e > 0 && k[e - 1].v == k[j - 1].v) {
            if (k[e - 1].i) a_pos += 1.0; else a_neg += 1.0;
            e--;
        }
        tp += a_pos;
        fp += a_neg;
        if (a_pos > 0.0) ap += a_pos / (double)n_pos * tp / (tp + fp);
        j = e;
    }
    return ap;
}

/* FPR at 95 % recall of the positives with caller scratch d (n_pos): scores multiplied by sign;
 * k = ceil(0.95 n_pos), t = the k-th largest positive score; FPR = #{neg >= t} / n_neg. */
static double fpr_at95(const double *s_neg, size_t n_neg, const double *s_pos, size_t n_pos,
                       double sign, double *d) {
    for (size_t i = 0; i < n_pos; i++) d[i] = sign * s_pos[i];
    qsort(d, n_pos, sizeof *d, cmp_double_desc);
    size_t kth = (95 * n_pos + 99) / 100;   /* ceil(0.95 n_pos), exact */
    double t = d[kth - 1];
    double fp = 0.0;
    for (size_t i = 0; i < n_neg; i++) fp += sign * s_neg[i] >= t ? 1.0 : 0.0;
    return fp / (double)n_neg;
}

/* FPR95 (ID flagged at 95 % OOD recall) with caller scratch d (n_ood) */
static double fpr95_scratch(const double *s_id, size_t n_id, const double *s_ood, size_t n_ood,
                            double *d) {
    return fpr_at95(s_id, n_id, s_ood, n_ood, 1.0, d);
}

/* FPR95-ID (OOD accepted at 95 % ID recall): ID positive, scores negated; scratch d (n_id) */
static double fpr95_id_scratch(const double *s_id, size_t n_id, const double *s_ood,
                               size_t n_ood, double *d) {
    return fpr_at95(s_ood, n_ood, s_id, n_id, -1.0, d);
}

hy_status hy_metrics_auroc(double *auroc, const double *s_id, size_t n_id, const double *s_ood,
                           size_t n_ood) {
    HY_TRY(check_scores(s_id, n_id, s_ood, n_ood));
    keyed *k = hy_xmalloc((n_id + n_ood) * sizeof *k);
    if (!k) return HY_ENOMEM;
    *auroc = auroc_scratch(s_id, n_id, s_ood, n_ood, k);
    hy_free(k);
    return HY_OK;
}

hy_status hy_metrics_aupr(double *ap, const double *s_pos, size_t n_pos, const double *s_neg,
                          size_t n_neg) {
    HY_TRY(check_scores(s_neg, n_neg, s_pos, n_pos));
    keyed *k = hy_xmalloc((n_pos + n_neg) * sizeof *k);
    if (!k) return HY_ENOMEM;
    *ap = aupr_scratch(s_pos, n_pos, s_neg, n_neg, 1.0, k);
    hy_free(k);
    return HY_OK;
}

hy_status hy_metrics_fpr95(double *fpr, const double *s_id, size_t n_id, const double *s_ood,
                           size_t n_ood) {
    HY_TRY(check_scores(s_id, n_id, s_ood, n_ood));
    double *d = hy_xmalloc(n_ood * sizeof *d);
    if (!d) return HY_ENOMEM;
    *fpr = fpr95_scratch(s_id, n_id, s_ood, n_ood, d);
    hy_free(d);
    return HY_OK;
}

hy_status hy_metrics_fpr95_id(double *fpr, const double *s_id, size_t n_id, const double *s_ood,
                              size_t n_ood) {
    HY_TRY(check_scores(s_id, n_id, s_ood, n_ood));
    double *d = hy_xmalloc(n_id * sizeof *d);
    if (!d) return HY_ENOMEM;
    *fpr = fpr95_id_scratch(s_id, n_id, s_ood, n_ood, d);
    hy_free(d);
    return HY_OK;
}

/* k: n_id + n_ood keyed; d: max(n_id, n_ood) doubles */
static void ood_scratch(hy_ood_metrics *out, const double *s_id, size_t n_id,
                        const double *s_ood, size_t n_ood, keyed *k, double *d) {
    out->auroc = auroc_scratch(s_id, n_id, s_ood, n_ood, k);
    out->aupr_out = aupr_scratch(s_ood, n_ood, s_id, n_id, 1.0, k);
    out->aupr_in = aupr_scratch(s_id, n_id, s_ood, n_ood, -1.0, k);
    out->fpr95 = fpr95_scratch(s_id, n_id, s_ood, n_ood, d);
    out->fpr95_id = fpr95_id_scratch(s_id, n_id, s_ood, n_ood, d);
}

hy_status hy_metrics_ood(hy_ood_metrics *out, const double *s_id, size_t n_id,
                         const double *s_ood, size_t n_ood) {
    HY_TRY(check_scores(s_id, n_id, s_ood, n_ood));
    keyed *k = hy_xmalloc((n_id + n_ood) * sizeof *k);
    double *d = hy_xmalloc((n_id > n_ood ? n_id : n_ood) * sizeof *d);
    if (!k || !d) { hy_free(k); hy_free(d); return HY_ENOMEM; }
    ood_scratch(out, s_id, n_id, s_ood, n_ood, k, d);
    hy_free(k);
    hy_free(d);
    return HY_OK;
}

/* Misclassification detection: errors (correct == 0) positive, correct samples negative;
 * AUROC, AUPR (step-wise AP, errors positive) and FPR95 (correct flagged at 95 % error recall)
 * exactly as for OOD detection. */
hy_status hy_metrics_misclf(hy_misclf_metrics *out, const double *s, const uint8_t *correct,
                            size_t N) {
    size_t n_err = 0;
    for (size_t i = 0; i < N; i++) {
        if (isnan(s[i])) return hy_fail(HY_EINVAL, "metrics: score %zu (0-based) is NaN", i);
        n_err += correct[i] ? 0 : 1;
    }
    if (n_err == 0 || n_err == N)
        return hy_fail(HY_EINVAL, "metrics: misclassification detection needs correct and "
                       "misclassified samples (got %zu of %zu misclassified)", n_err, N);
    size_t n_ok = N - n_err;
    double *neg = hy_xmalloc(2 * N * sizeof *neg);
    keyed *k = hy_xmalloc(N * sizeof *k);
    if (!neg || !k) { hy_free(neg); hy_free(k); return HY_ENOMEM; }
    double *pos = neg + n_ok, *d = neg + N;
    size_t a = 0, b = 0;
    for (size_t i = 0; i < N; i++) {
        if (correct[i]) neg[a++] = s[i];
        else pos[b++] = s[i];
    }
    out->auroc = auroc_scratch(neg, n_ok, pos, n_err, k);
    out->aupr = aupr_scratch(pos, n_err, neg, n_ok, 1.0, k);
    out->fpr95 = fpr_at95(neg, n_ok, pos, n_err, 1.0, d);
    hy_free(neg);
    hy_free(k);
    return HY_OK;
}

/* ===== temperature scaling ===== */

/* a_{i,c} = logsumexp_m( z_{m,i,c} - logsumexp_c' z_{m,i,c'} ) - log M */
void hy_metrics_log_mean_probs(double *a, const float *z, size_t M, size_t N, size_t C) {
    for (size_t i = 0; i < N; i++) {
        double *out = a + i * C;
        for (size_t c = 0; c < C; c++) out[c] = -INFINITY;
        /* running log-sum-exp over members, class by class */
        for (size_t m = 0; m < M; m++) {
            const float *row = z + (m * N + i) * C;
            double lse = hy_logsumexp(row, C);
            for (size_t c = 0; c < C; c++) {
                double v = (double)row[c] - lse, w = out[c];
                if (isinf(w) && w < 0.0) out[c] = v;
                else out[c] = (v > w ? v : w) + log1p(exp(-fabs(v - w)));
            }
        }
        for (size_t c = 0; c < C; c++) out[c] -= log((double)M);
    }
}

void hy_metrics_log_probs(double *a, const float *p, size_t N, size_t C) {
    for (size_t j = 0; j < N * C; j++) {
        double v = (double)p[j];
        a[j] = log(v > HY_METRICS_EPS ? v : HY_METRICS_EPS);
    }
}

static double row_max(const double *a, size_t C) {
    double mx = a[0];
    for (size_t c = 1; c < C; c++)
        if (a[c] > mx) mx = a[c];
    return mx;
}

/* p_{i,c} = exp(a_{i,c}/T - logsumexp_c' a_{i,c'}/T) */
void hy_metrics_temperature_apply(float *p, const double *a, size_t N, size_t C, double T) {
    double b = 1.0 / T;
    for (size_t i = 0; i < N; i++) {
        const double *row = a + i * C;
        double mx = row_max(row, C), sum = 0.0;
        for (size_t c = 0; c < C; c++) sum += exp(b * (row[c] - mx));
        for (size_t c = 0; c < C; c++) p[i * C + c] = (float)(exp(b * (row[c] - mx)) / sum);
    }
}

/* nll_i = logsumexp_c(a_{i,c}/T) - a_{i,y}/T */
void hy_metrics_temperature_nll(double *nll, const double *a, const int32_t *labels, size_t N,
                                size_t C, double T) {
    double b = 1.0 / T;
    for (size_t i = 0; i < N; i++) {
        const double *row = a + i * C;
        double mx = row_max(row, C), sum = 0.0;
        for (size_t c = 0; c < C; c++) sum += exp(b * (row[c] - mx));
        nll[i] = log(sum) - b * (row[(size_t)labels[i]] - mx);
    }
}

/* d/dβ of the mean NLL at β = 1/T: mean_i ( E_{softmax(β a_i)}[a_i] - a_{i,y} ), which is
 * non-decreasing in β (the NLL is convex in β). */
static double temp_slope(const double *a, const int32_t *labels, size_t N, size_t C, double b) {
    double g = 0.0;
    for (size_t i = 0; i < N; i++) {
        const double *row = a + i * C;
        double mx = row_max(row, C), sum = 0.0, ea = 0.0;
        for (size_t c = 0; c < C; c++) {
            double w = exp(b * (row[c] - mx));
            sum += w;
            ea += w * (row[c] - mx);
        }
        g += ea / sum - (row[(size_t)labels[i]] - mx);
    }
    return g / (double)N;
}

hy_status hy_metrics_temperature_fit(double *T, double *nll, const double *a,
                                     const int32_t *labels, size_t N, size_t C) {
    if (N == 0 || C == 0) return hy_fail(HY_EINVAL, "metrics: temperature fit on an empty set");
    for (size_t j = 0; j < N * C; j++)
        if (!isfinite(a[j]))
            return hy_fail(HY_EINVAL, "metrics: temperature fit: log-probability %zu (0-based "
                           "row %zu) is not finite", j, j / C);
    /* u = log T; the NLL decreases in u while the slope in β is > 0 (T too small) */
    double lo = log(HY_TEMP_MIN), hi = log(HY_TEMP_MAX), t;
    if (temp_slope(a, labels, N, C, 1.0 / HY_TEMP_MIN) <= 0.0) t = HY_TEMP_MIN;
    else if (temp_slope(a, labels, N, C, 1.0 / HY_TEMP_MAX) >= 0.0) t = HY_TEMP_MAX;
    else {
        for (int it = 0; it < 200 && hi - lo > 0.0; it++) {
            double mid = 0.5 * (lo + hi);
            if (mid <= lo || mid >= hi) break;
            if (temp_slope(a, labels, N, C, exp(-mid)) > 0.0) lo = mid;   /* T below optimum */
            else hi = mid;
        }
        t = exp(0.5 * (lo + hi));
    }
    *T = t;
    if (nll) {
        double *v = hy_xmalloc(N * sizeof *v);
        if (!v) return HY_ENOMEM;
        hy_metrics_temperature_nll(v, a, labels, N, C, t);
        *nll = hy_metrics_mean(v, N);
        hy_free(v);
    }
    return HY_OK;
}

/* ===== diversity ===== */

/* J[m,m'] = |A_m ∩ A_m'| / |A_m ∪ A_m'| (1 for two empty sets); mean over pairs m < m' */
double hy_metrics_jaccard(double *J, const float *gates, size_t M, size_t K) {
    double sum = 0.0;
    for (size_t a = 0; a < M; a++) {
        for (size_t b = 0; b < M; b++) {
            size_t inter = 0, uni = 0;
            for (size_t k = 0; k < K; k++) {
                int x = gates[a * K + k] != 0.0f, y = gates[b * K + k] != 0.0f;
                inter += (size_t)(x && y);
                uni += (size_t)(x || y);
            }
            double j = uni == 0 ? 1.0 : (double)inter / (double)uni;
            if (J) J[a * M + b] = j;
            if (a < b) sum += j;
        }
    }
    return M < 2 ? 1.0 : sum / ((double)M * (double)(M - 1) / 2.0);
}

/* ===== histogram ===== */

void hy_metrics_histogram(int64_t *counts, const double *x, size_t n, double lo, double hi,
                          size_t nbins) {
    double w = (hi - lo) / (double)nbins;
    for (size_t b = 0; b < nbins; b++) counts[b] = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(x[i] >= lo && x[i] <= hi)) continue;
        size_t b = x[i] >= hi ? nbins - 1 : (size_t)floor((x[i] - lo) / w);
        if (b >= nbins) b = nbins - 1;
        counts[b]++;
    }
}

/* ===== bootstrap ===== */

/* The q-quantile of v (B values, sorted in place): linear interpolation at q (B - 1). */
static double percentile(double *v, size_t B, double q) {
    qsort(v, B, sizeof *v, cmp_double_asc);
    double h = q * (double)(B - 1);
    size_t lo = (size_t)floor(h);
    if (lo + 1 >= B) return v[B - 1];
    return v[lo] + (h - (double)lo) * (v[lo + 1] - v[lo]);
}

#define ID_FIELDS 7
#define OOD_FIELDS 5

static double *id_field(hy_id_metrics *m, int f) {
    double *p[ID_FIELDS] = {&m->acc, &m->nll, &m->brier, &m->ece, &m->aece, &m->mce, &m->aurc};
    return p[f];
}

static double *ood_field(hy_ood_metrics *m, int f) {
    double *p[OOD_FIELDS] = {&m->auroc, &m->aupr_out, &m->aupr_in, &m->fpr95, &m->fpr95_id};
    return p[f];
}

static hy_status check_boot(size_t B) {
    if (B < 2) return hy_fail(HY_EINVAL, "metrics: bootstrap needs at least 2 resamples (got "
                              "%zu)", B);
    return HY_OK;
}

hy_status hy_metrics_bootstrap_id(hy_id_metrics *lo, hy_id_metrics *hi, const double *conf,
                                  const uint8_t *correct, const double *nll, const double *brier,
                                  size_t N, size_t nbins, size_t B, uint64_t seed) {
    if (N == 0) return hy_fail(HY_EINVAL, "metrics: bootstrap of an empty set");
    HY_TRY(check_nbins(nbins));
    HY_TRY(check_boot(B));
    /* scratch: resampled conf, nll, brier (3N doubles), correct (N), sort keys (N), values */
    double *rc = hy_xmalloc(3 * N * sizeof *rc);
    uint8_t *rk = hy_xmalloc(N);
    keyed *k = hy_xmalloc(N * sizeof *k);
    double *vals = hy_xmalloc(ID_FIELDS * B * sizeof *vals);
    hy_status st = HY_OK;
    if (!rc || !rk || !k || !vals) { st = HY_ENOMEM; goto done; }
    double *rn = rc + N, *rb = rc + 2 * N;
    hy_rng rng;
    hy_rng_seed(&rng, seed);
    for (size_t b = 0; b < B; b++) {
        for (size_t i = 0; i < N; i++) {
            size_t j = (size_t)hy_rng_below(&rng, (uint64_t)N);
            rc[i] = conf[j]; rk[i] = correct[j]; rn[i] = nll[j]; rb[i] = brier[j];
        }
        hy_id_metrics m;
        id_scratch(&m, rc, rk, rn, rb, N, nbins, k);
        for (int f = 0; f < ID_FIELDS; f++) vals[(size_t)f * B + b] = *id_field(&m, f);
    }
    for (int f = 0; f < ID_FIELDS; f++) {
        *id_field(lo, f) = percentile(vals + (size_t)f * B, B, 0.025);
        *id_field(hi, f) = percentile(vals + (size_t)f * B, B, 0.975);
    }
done:
    hy_free(rc);
    hy_free(rk);
    hy_free(k);
    hy_free(vals);
    return st;
}

hy_status hy_metrics_bootstrap_ood(hy_ood_metrics *lo, hy_ood_metrics *hi, const double *s_id,
                                   size_t n_id, const double *s_ood, size_t n_ood, size_t B,
                                   uint64_t seed) {
    HY_TRY(check_scores(s_id, n_id, s_ood, n_ood));
    HY_TRY(check_boot(B));
    double *ri = hy_xmalloc((n_id + n_ood + (n_id > n_ood ? n_id : n_ood)) * sizeof *ri);
    keyed *k = hy_xmalloc((n_id + n_ood) * sizeof *k);
    double *vals = hy_xmalloc(OOD_FIELDS * B * sizeof *vals);
    hy_status st = HY_OK;
    if (!ri || !k || !vals) { st = HY_ENOMEM; goto done; }
    double *ro = ri + n_id, *d = ri + n_id + n_ood;
    hy_rng rng;
    hy_rng_seed(&rng, seed);
    for (size_t b = 0; b < B; b++) {
        for (size_t i = 0; i < n_id; i++) ri[i] = s_id[hy_rng_below(&rng, (uint64_t)n_id)];
        for (size_t i = 0; i < n_ood; i++) ro[i] = s_ood[hy_rng_below(&rng, (uint64_t)n_ood)];
        hy_ood_metrics m;
        ood_scratch(&m, ri, n_id, ro, n_ood, k, d);
        for (int f = 0; f < OOD_FIELDS; f++) vals[(size_t)f * B + b] = *ood_field(&m, f);
    }
    for (int f = 0; f < OOD_FIELDS; f++) {
        *ood_field(lo, f) = percentile(vals + (size_t)f * B, B, 0.025);
        *ood_field(hi, f) = percentile(vals + (size_t)f * B, B, 0.975);
    }
done:
    hy_free(ri);
    hy_free(k);
    hy_free(vals);
    return st;
}
