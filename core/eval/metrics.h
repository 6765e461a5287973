/* metrics.h: classification, calibration, OOD-detection and diversity metrics (DESIGN §4).
 * Every sum is accumulated in double; inputs are the float32 arrays of a prediction file.
 * Shapes use N samples, C classes, M members, B bootstrap resamples. OOD is the positive class
 * and every OOD score is "higher = more OOD". Per-sample functions never allocate or fail;
 * aggregate functions that sort allocate O(N) scratch once per call (never inside a loop) and
 * fail only with HY_ENOMEM or HY_EINVAL (empty input, non-finite value). The exact formula of
 * every metric is written above its definition in metrics.c and in results/README.md. */
#ifndef HY_METRICS_H
#define HY_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/base.h"

/* Number of bins for ECE, aECE and MCE. */
#define HY_METRICS_BINS 15
/* NLL from probabilities (no logits available): -log(max(p_y, HY_METRICS_EPS)). */
#define HY_METRICS_EPS 1e-12
/* Default tolerance on |sum_c p_c - 1| used by the validators. */
#define HY_METRICS_SUM_TOL 1e-4

/* Classification and calibration metrics of one labelled set (fractions, not percentages). */
typedef struct hy_id_metrics {
    double acc, nll, brier, ece, aece, mce, aurc;
} hy_id_metrics;

/* OOD-detection metrics of one (ID, OOD) pair of score arrays. */
/* fpr95 = fraction of ID flagged at 95 % OOD recall (hydra's and the paper authors' convention);
 * fpr95_id = fraction of OOD accepted at 95 % ID recall (Hendrycks' convention). */
typedef struct hy_ood_metrics {
    double auroc, aupr_out, aupr_in, fpr95, fpr95_id;
} hy_ood_metrics;

/* Misclassification detection on a labelled set: the misclassified samples are the positive
 * class ("error"), the correctly classified ones the negative, the score is an uncertainty
 * score (higher = more likely wrong). fpr95 = fraction of correct samples flagged when 95 % of
 * the errors are caught (the OOD convention with error in place of OOD). */
typedef struct hy_misclf_metrics {
    double auroc, aupr, fpr95;
} hy_misclf_metrics;

/* Temperature scaling bounds: the fitted T is clamped to [HY_TEMP_MIN, HY_TEMP_MAX]. */
#define HY_TEMP_MIN 0.01
#define HY_TEMP_MAX 100.0

/* ===== validation ===== */

/* Checks p (R, C) row by row: every entry finite and >= 0, every row sum within tol of 1.
 * R = N for p̄ (N,C) and M*N for member probabilities (M,N,C) viewed as rows.
 * Fails (HY_EINVAL) at the first bad row r (0-based), naming it:
 *   "metrics: row 3 (0-based) has a non-finite value at class 2 (nan)"
 *   "metrics: row 3 (0-based) has a negative value at class 2 (-0.1)"
 *   "metrics: row 3 (0-based) sums to 0.9 (expected 1 within 0.0001)" */
hy_status hy_metrics_check_probs(const float *p, size_t R, size_t C, double tol);
/* Checks that every label is in [0, C); fails naming the first bad row (0-based). */
hy_status hy_metrics_check_labels(const int32_t *labels, size_t N, size_t C);
/* Checks that every value is finite; fails naming the first bad index: "metrics: <what> ...". */
hy_status hy_metrics_check_finite(const float *x, size_t n, const char *what);

/* ===== per-sample quantities (write N outputs; never fail) ===== */

/* conf[i] = max_c p[i,c]; pred[i] = argmax_c p[i,c] (the lowest class index among ties).
 *   p (N,C) read; conf (N), pred (N) written */
void hy_metrics_predict(double *conf, int32_t *pred, const float *p, size_t N, size_t C);
/* correct[i] = 1 if pred[i] == labels[i] else 0. */
void hy_metrics_correct(uint8_t *correct, const int32_t *pred, const int32_t *labels, size_t N);
/* nll[i] = -log(max(p[i,y_i], HY_METRICS_EPS)); labels checked by the caller. */
void hy_metrics_nll_probs(double *nll, const float *p, const int32_t *labels, size_t N,
                          size_t C);
/* nll[i] = -( logsumexp_m( z[m,i,y] - logsumexp_c z[m,i,c] ) - log M ), i.e. -log p̄_y with
 * p̄ the mean of the member softmaxes, computed stably from logits z (M,N,C). */
void hy_metrics_nll_logits(double *nll, const float *z, const int32_t *labels, size_t M,
                           size_t N, size_t C);
/* brier[i] = sum_c (p[i,c] - [y_i == c])^2. */
void hy_metrics_brier(double *brier, const float *p, const int32_t *labels, size_t N, size_t C);

/* ===== OOD scores (write s (N); higher = more OOD; never fail) ===== */

/* MSP: s[i] = -max_c p[i,c]. */
void hy_metrics_score_msp(double *s, const float *p, size_t N, size_t C);
/* Entropy of p̄: s[i] = -sum_c p[i,c] log p[i,c] (0 log 0 = 0; natural log). */
void hy_metrics_score_entropy(double *s, const float *p, size_t N, size_t C);
/* Mutual information from member probabilities pm (M,N,C):
 * s[i] = H(q_i) - (1/M) sum_m H(pm[m,i,:]) with q_i = (1/M) sum_m pm[m,i,:] in double.
 * Exactly 0 when M = 1. */
void hy_metrics_score_mi(double *s, const float *pm, size_t M, size_t N, size_t C);
/* Energy from logits z (M,N,C) (M = 1 for a single model's /logits):
 * s[i] = -logsumexp_c( (1/M) sum_m z[m,i,c] ). */
void hy_metrics_score_energy(double *s, const float *z, size_t M, size_t N, size_t C);
/* Max-logit (the negated mean over members of each member's largest logit):
 * s[i] = -(1/M) sum_m max_c z[m,i,c]. */
void hy_metrics_score_maxlogit(double *s, const float *z, size_t M, size_t N, size_t C);
/* Member disagreement: s[i] = fraction of the M(M-1)/2 member pairs (m < m') whose argmaxes
 * differ on sample i (0 when M = 1). Argmax ties resolve to the lowest class. */
void hy_metrics_score_disagreement(double *s, const float *pm, size_t M, size_t N, size_t C);

/* ===== aggregates ===== */

/* Mean of x (n); 0 when n == 0. */
double hy_metrics_mean(const double *x, size_t n);
/* Equal-width reliability bins: bin b holds conf in [b/nbins, (b+1)/nbins), conf >= 1 in the
 * last bin. Writes count (nbins), acc (nbins) = mean correct, mconf (nbins) = mean conf
 * (0 for empty bins). Never fails. */
void hy_metrics_reliability(int64_t *count, double *acc, double *mconf, const double *conf,
                            const uint8_t *correct, size_t N, size_t nbins);
/* ECE and MCE from equal-width bins (either output may be NULL). N > 0, nbins > 0. */
void hy_metrics_ece(double *ece, double *mce, const double *conf, const uint8_t *correct,
                    size_t N, size_t nbins);
/* aECE: samples sorted by conf ascending (ties by index), split into nbins consecutive groups,
 * group g of size floor(N/nbins) + (g < N mod nbins); empty groups skipped; same formula. */
hy_status hy_metrics_aece(double *aece, const double *conf, const uint8_t *correct, size_t N,
                          size_t nbins);
/* AURC: order by conf descending (ties: lower index first); risk_k = errors among the first k
 * / k; AURC = (1/N) sum_{k=1..N} risk_k. */
hy_status hy_metrics_aurc(double *aurc, const double *conf, const uint8_t *correct, size_t N);
/* Risk-coverage curve at npoints coverages k_j = ceil(j N / npoints), j = 1..npoints (same
 * order as AURC): cov[j-1] = k_j / N, risk[j-1] = risk_{k_j}. npoints <= N. */
hy_status hy_metrics_risk_coverage(double *cov, double *risk, const double *conf,
                                   const uint8_t *correct, size_t N, size_t npoints);
/* Every hy_id_metrics field from per-sample arrays (N > 0). Fails on N == 0 or no memory. */
hy_status hy_metrics_id(hy_id_metrics *out, const double *conf, const uint8_t *correct,
                        const double *nll, const double *brier, size_t N, size_t nbins);

/* AUROC = P(s_ood > s_id) + 0.5 P(s_ood == s_id) over all n_id * n_ood pairs (Mann-Whitney,
 * ties counted half). Fails on an empty set or a NaN score. */
hy_status hy_metrics_auroc(double *auroc, const double *s_id, size_t n_id, const double *s_ood,
                           size_t n_ood);
/* Step-wise average precision with `pos` as the positive class: sort all scores descending,
 * one threshold per distinct score; AP = sum over thresholds of (ΔTP / P) * TP / (TP + FP).
 * AUPR-Out = aupr(s_ood as pos, s_id as neg); AUPR-In = aupr(-s_id as pos, -s_ood as neg). */
hy_status hy_metrics_aupr(double *ap, const double *s_pos, size_t n_pos, const double *s_neg,
                          size_t n_neg);
/* FPR95: k = ceil(0.95 n_ood) (integer arithmetic), t = the k-th largest OOD score, which is
 * the largest t with #{s_ood >= t} >= 0.95 n_ood; FPR = #{s_id >= t} / n_id. */
hy_status hy_metrics_fpr95(double *fpr, const double *s_id, size_t n_id, const double *s_ood,
                           size_t n_ood);
/* FPR95 at 95 % ID recall: k = ceil(0.95 n_id), t = the k-th smallest ID score (the smallest
 * t with #{s_id <= t} >= 0.95 n_id); FPR = #{s_ood <= t} / n_ood (OOD accepted as ID). It is
 * hy_metrics_fpr95 with ID and OOD swapped and the scores negated. */
hy_status hy_metrics_fpr95_id(double *fpr, const double *s_id, size_t n_id, const double *s_ood,
                              size_t n_ood);
/* Every OOD metric (AUPR-In uses the negated scores). */
hy_status hy_metrics_ood(hy_ood_metrics *out, const double *s_id, size_t n_id,
                         const double *s_ood, size_t n_ood);

/* Misclassification detection from a per-sample score s (N, higher = more likely wrong) and
 * correct (N): AUROC, AUPR and FPR95 with the errors as the positive class. Fails (HY_EINVAL)
 * when every sample is correct or every sample is wrong (the metrics need both classes). */
hy_status hy_metrics_misclf(hy_misclf_metrics *out, const double *s, const uint8_t *correct,
                            size_t N);

/* ===== post-hoc calibration: temperature scaling ===== */

/* Log of the mean prediction a[i,c] = log p̄[i,c] = logsumexp_m(z[m,i,c] - logsumexp_c' z[m,i,c'])
 * - log M, in double, from logits z (M,N,C) (M = 1: the log-softmax of a single model). */
void hy_metrics_log_mean_probs(double *a, const float *z, size_t M, size_t N, size_t C);
/* The same from probabilities p (N,C) when no logits exist: a = log(max(p, HY_METRICS_EPS)). */
void hy_metrics_log_probs(double *a, const float *p, size_t N, size_t C);
/* Temperature scaling of the mean prediction: p_T[i,:] = softmax(a[i,:] / T), a = log p̄ (for a
 * single model this is softmax(z / T), classic temperature scaling). Writes p (N,C) float32. */
void hy_metrics_temperature_apply(float *p, const double *a, size_t N, size_t C, double T);
/* Per-sample NLL of p_T at the labels, exactly in double: nll[i] = logsumexp_c(a[i,c]/T) - a[i,y]/T. */
void hy_metrics_temperature_nll(double *nll, const double *a, const int32_t *labels, size_t N,
                                size_t C, double T);
/* Fits T by minimising the mean NLL of p_T over (a, labels) (N,C): the NLL is convex in 1/T,
 * so its derivative in u = log T changes sign once; bisection on that sign over
 * u in [log HY_TEMP_MIN, log HY_TEMP_MAX] (200 halvings, deterministic), T clamped to the
 * bounds when the minimum lies outside. Writes T and, when nll is not NULL, the mean NLL at T.
 * Fails on N == 0 or a non-finite a. */
hy_status hy_metrics_temperature_fit(double *T, double *nll, const double *a,
                                     const int32_t *labels, size_t N, size_t C);

/* ===== diversity ===== */

/* Head-set Jaccard overlap. gates (M,K): member m keeps unit k when gates[m,k] != 0.
 * J[m,m'] = |A ∩ B| / |A ∪ B| (1 when both sets are empty); writes J (M,M) when not NULL and
 * returns the mean over pairs m < m' (1 when M == 1). Never fails. */
double hy_metrics_jaccard(double *J, const float *gates, size_t M, size_t K);

/* ===== histogram ===== */

/* counts (nbins) of x (n) over [lo, hi] in equal-width bins [lo + b w, lo + (b+1) w), x == hi
 * in the last bin; values outside [lo, hi] are not counted. hi > lo. Never fails. */
void hy_metrics_histogram(int64_t *counts, const double *x, size_t n, double lo, double hi,
                          size_t nbins);

/* ===== bootstrap confidence intervals ===== */

/* Percentile 95 % intervals over B resamples (B >= 2) drawn with hy_rng seeded by `seed`:
 * resample N indices with replacement, recompute every metric; lo/hi = 2.5th/97.5th
 * percentiles (linear interpolation at q (B-1) of the sorted values). Same seed => same CI.
 * Allocates O(N + B) scratch once. */
hy_status hy_metrics_bootstrap_id(hy_id_metrics *lo, hy_id_metrics *hi, const double *conf,
                                  const uint8_t *correct, const double *nll, const double *brier,
                                  size_t N, size_t nbins, size_t B, uint64_t seed);
/* Same for the OOD metrics; ID and OOD samples are resampled separately (stratified). */
hy_status hy_metrics_bootstrap_ood(hy_ood_metrics *lo, hy_ood_metrics *hi, const double *s_id,
                                   size_t n_id, const double *s_ood, size_t n_ood, size_t B,
                                   uint64_t seed);

#endif
