/* test_metrics.c: every metric of core/metrics against hand-computed values on small cases
 * (the arithmetic is in the comments), plus invariances, ties, edge cases and error messages.
 * Probabilities are dyadic (exact in float32) so most expectations hold to ~1e-15. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "eval/metrics.h"
#include "tensor/rng.h"

#define TOL 1e-12

static void near(const char *what, double got, double want, double tol) {
    CHECK(fabs(got - want) <= tol, "%s: got %.17g, want %.17g (tol %g)", what, got, want, tol);
}

/* The 4-sample, 3-class case used by several tests:
 *   row 0 [0.75 0.125 0.125] y=0 -> pred 0, conf 0.75, correct
 *   row 1 [0.25 0.25  0.5  ] y=1 -> pred 2, conf 0.5,  wrong
 *   row 2 [0.5  0.5   0    ] y=1 -> pred 0 (tie: lowest class), conf 0.5, wrong
 *   row 3 [0    0     1    ] y=2 -> pred 2, conf 1.0 (exactly), correct */
static const float P4[12] = {0.75f, 0.125f, 0.125f, 0.25f, 0.25f, 0.5f,
                             0.5f, 0.5f, 0.0f, 0.0f, 0.0f, 1.0f};
static const int32_t Y4[4] = {0, 1, 1, 2};

static void test_predict_correct(void) {
    double conf[4];
    int32_t pred[4];
    uint8_t ok[4];
    hy_metrics_predict(conf, pred, P4, 4, 3);
    hy_metrics_correct(ok, pred, Y4, 4);
    const int32_t want_pred[4] = {0, 2, 0, 2};
    const double want_conf[4] = {0.75, 0.5, 0.5, 1.0};
    const uint8_t want_ok[4] = {1, 0, 0, 1};
    for (int i = 0; i < 4; i++) {
        CHECK(pred[i] == want_pred[i], "pred[%d] = %d, want %d", i, pred[i], want_pred[i]);
        CHECK(conf[i] == want_conf[i], "conf[%d] = %g, want %g", i, conf[i], want_conf[i]);
        CHECK(ok[i] == want_ok[i], "correct[%d] = %d", i, ok[i]);
    }
}

static void id_arrays(double *conf, uint8_t *ok, double *nll, double *brier) {
    int32_t pred[4];
    hy_metrics_predict(conf, pred, P4, 4, 3);
    hy_metrics_correct(ok, pred, Y4, 4);
    hy_metrics_nll_probs(nll, P4, Y4, 4, 3);
    hy_metrics_brier(brier, P4, Y4, 4, 3);
}

static void test_id_metrics_hand(void) {
    double conf[4], nll[4], brier[4];
    uint8_t ok[4];
    id_arrays(conf, ok, nll, brier);
    /* Brier: row 0 (0.75-1)^2 + 0.125^2 + 0.125^2 = 0.09375; row 1 0.25^2 + 0.75^2 + 0.5^2
     * = 0.875; row 2 0.5^2 + 0.5^2 = 0.5; row 3 0 */
    near("brier[0]", brier[0], 0.09375, 0);
    near("brier[1]", brier[1], 0.875, 0);
    near("brier[2]", brier[2], 0.5, 0);
    near("brier[3]", brier[3], 0.0, 0);
    /* NLL: -log 0.75, -log 0.25, -log 0.5, -log 1 = 0 */
    near("nll[1]", nll[1], log(4.0), TOL);
    near("nll[3]", nll[3], 0.0, 0);
    hy_id_metrics m;
    CHECK_OK(hy_metrics_id(&m, conf, ok, nll, brier, 4, HY_METRICS_BINS));
    near("acc", m.acc, 0.5, 0);                                    /* 2 of 4 */
    near("brier", m.brier, 1.46875 / 4, TOL);                      /* 0.3671875 */
    near("nll", m.nll, (log(4.0 / 3.0) + log(4.0) + log(2.0)) / 4, TOL);
    /* ECE, 15 bins: 0.75 -> bin 11 (n 1, acc 1, gap 0.25); 0.5 -> bin 7 (n 2, acc 0, gap 0.5);
     * 1.0 -> bin 14 (n 1, acc 1, gap 0); all other bins empty.
     * ECE = 1/4 * 0.25 + 2/4 * 0.5 = 0.3125; MCE = 0.5 */
    near("ece", m.ece, 0.3125, TOL);
    near("mce", m.mce, 0.5, TOL);
    /* aECE, 15 groups of N=4: sizes 1,1,1,1,0,...: conf-ascending order (ties by index)
     * row1 (0.5, wrong) row2 (0.5, wrong) row0 (0.75, right) row3 (1, right):
     * gaps 0.5, 0.5, 0.25, 0 -> (0.5 + 0.5 + 0.25) / 4 = 0.3125 */
    near("aece", m.aece, 0.3125, TOL);
    /* AURC: conf-descending order row3 (right), row0 (right), row1 (wrong), row2 (wrong):
     * risks 0/1, 0/2, 1/3, 2/4 -> (1/3 + 1/2) / 4 = 5/24 */
    near("aurc", m.aurc, 5.0 / 24.0, TOL);
}

static void test_reliability_bins_and_edges(void) {
    double conf[4], nll[4], brier[4];
    uint8_t ok[4];
    id_arrays(conf, ok, nll, brier);
    int64_t cnt[15];
    double acc[15], mc[15];
    hy_metrics_reliability(cnt, acc, mc, conf, ok, 4, 15);
    for (int b = 0; b < 15; b++) {
        int64_t want = b == 7 ? 2 : (b == 11 || b == 14) ? 1 : 0;
        CHECK(cnt[b] == want, "bin %d count %lld, want %lld", b, (long long)cnt[b],
              (long long)want);
        if (want == 0) CHECK(acc[b] == 0.0 && mc[b] == 0.0, "empty bin %d not zero", b);
    }
    near("bin 14 conf (conf exactly 1.0 in the last bin)", mc[14], 1.0, 0);
    near("bin 7 acc", acc[7], 0.0, 0);
    /* every edge b/15 belongs to bin b ([lo, hi)); just below it to bin b-1 */
    double e[30];
    uint8_t z[30] = {0};
    for (int b = 0; b < 15; b++) {
        e[2 * b] = (double)b / 15.0;
        e[2 * b + 1] = b == 0 ? 0.0 : nextafter((double)b / 15.0, 0.0);
    }
    hy_metrics_reliability(cnt, acc, mc, e, z, 30, 15);
    /* bin b gets edge b and the value just below edge b+1 (bin 0 also gets the extra 0) */
    for (int b = 0; b < 15; b++) {
        int64_t want = b == 0 ? 3 : b == 14 ? 1 : 2;
        CHECK(cnt[b] == want, "edge test: bin %d count %lld, want %lld", b, (long long)cnt[b],
              (long long)want);
    }
}

static void test_ece_perfectly_calibrated(void) {
    /* conf 0.75 x4 with 3 right, conf 0.5 x2 with 1 right, conf 1.0 x1 right: every bin has
     * acc_b == conf_b, so ECE = aECE-per-bin gap = 0 exactly */
    const float p[14] = {0.75f, 0.25f, 0.75f, 0.25f, 0.75f, 0.25f, 0.75f, 0.25f,
                         0.5f, 0.5f, 0.5f, 0.5f, 1.0f, 0.0f};
    const int32_t y[7] = {0, 0, 0, 1, 0, 1, 0};
    double conf[7];
    int32_t pred[7];
    uint8_t ok[7];
    hy_metrics_predict(conf, pred, p, 7, 2);
    hy_metrics_correct(ok, pred, y, 7);
    double ece = -1, mce = -1;
    hy_metrics_ece(&ece, &mce, conf, ok, 7, 15);
    CHECK(ece == 0.0 && mce == 0.0, "calibrated: ece %g mce %g, want 0", ece, mce);
    /* and a large synthetic calibrated set: conf c = k/8, exactly c of each 8 samples right */
    enum { K = 8, REP = 8 };
    double c2[K * REP];
    uint8_t ok2[K * REP];
    for (int k = 1; k <= K; k++)
        for (int r = 0; r < REP; r++) {
            c2[(k - 1) * REP + r] = (double)k / K;
            ok2[(k - 1) * REP + r] = r < k;
        }
    hy_metrics_ece(&ece, &mce, c2, ok2, K * REP, 15);
    near("synthetic calibrated ece", ece, 0.0, 1e-15);
}

static void test_aece_groups(void) {
    const double conf[6] = {0.1, 0.2, 0.3, 0.4, 0.9, 0.8};
    const uint8_t ok[6] = {1, 0, 0, 1, 1, 0};
    double a;
    /* 2 groups of 3: [.1 .2 .3] acc 1/3 conf .2 gap 2/15; [.4 .8 .9] acc 2/3 conf .7 gap 1/30
     * aECE = 1/2 * 2/15 + 1/2 * 1/30 = 1/12 */
    CHECK_OK(hy_metrics_aece(&a, conf, ok, 6, 2));
    near("aece 2 groups", a, 1.0 / 12.0, TOL);
    /* 4 groups, N=6: sizes 2,2,1,1 (the first N mod 4 groups get one more):
     * [.1 .2] acc .5 conf .15 gap .35; [.3 .4] acc .5 conf .35 gap .15; [.8] wrong gap .8;
     * [.9] right gap .1  -> (2*.35 + 2*.15 + .8 + .1) / 6 = 1.9 / 6 */
    CHECK_OK(hy_metrics_aece(&a, conf, ok, 6, 4));
    near("aece 4 groups", a, 1.9 / 6.0, TOL);
    CHECK_FAIL(hy_metrics_aece(&a, conf, ok, 0, 4), HY_EINVAL, "metrics: aECE of an empty set");
}

static void test_aurc_ties_by_index(void) {
    /* conf ties are ordered by index: row0 (wrong) first: risks 1/1, 1/2 -> 0.75 */
    const double conf[2] = {0.5, 0.5};
    const uint8_t ok[2] = {0, 1};
    double a;
    CHECK_OK(hy_metrics_aurc(&a, conf, ok, 2));
    near("aurc tie", a, 0.75, 0);
    /* a perfect ranking: all right first -> risks 0,0,1/3 -> 1/9 */
    const double c3[3] = {0.9, 0.8, 0.4};
    const uint8_t o3[3] = {1, 1, 0};
    CHECK_OK(hy_metrics_aurc(&a, c3, o3, 3));
    near("aurc", a, 1.0 / 9.0, TOL);
}

static void test_risk_coverage(void) {
    double conf[4], nll[4], brier[4];
    uint8_t ok[4];
    id_arrays(conf, ok, nll, brier);
    double cov[4], risk[4];
    /* 2 points: k = 2 (risk 0), k = 4 (risk 2/4) */
    CHECK_OK(hy_metrics_risk_coverage(cov, risk, conf, ok, 4, 2));
    near("cov[0]", cov[0], 0.5, 0);
    near("risk[0]", risk[0], 0.0, 0);
    near("cov[1]", cov[1], 1.0, 0);
    near("risk[1]", risk[1], 0.5, 0);
    CHECK_OK(hy_metrics_risk_coverage(cov, risk, conf, ok, 4, 4));
    near("risk[2]", risk[2], 1.0 / 3.0, TOL);
    CHECK_FAIL(hy_metrics_risk_coverage(cov, risk, conf, ok, 4, 5), HY_EINVAL,
               "metrics: risk-coverage points must be in [1, 4] (got 5)");
}

static void test_nll_logits_members(void) {
    /* M=1: logits [0, log 3] -> softmax [1/4, 3/4]; y=0: NLL = log 4 */
    const float z1[2] = {0.0f, (float)log(3.0)};
    const int32_t y0[1] = {0};
    double nll;
    hy_metrics_nll_logits(&nll, z1, y0, 1, 1, 2);
    near("M=1 nll", nll, log(4.0), 1e-6);
    /* M=2: member 1 [0,0] -> p [.5,.5]; member 2 [log 3, 0] -> p [.75,.25]; y = 0:
     * p̄_0 = .625, NLL = -log .625 = 0.4700; the mean of member NLLs is
     * (log 2 + log 4/3) / 2 = 0.4904: the ensemble NLL differs (Jensen) */
    const float z2[4] = {0.0f, 0.0f, (float)log(3.0), 0.0f};
    hy_metrics_nll_logits(&nll, z2, y0, 2, 1, 2);
    near("M=2 nll", nll, -log(0.625), 1e-6);
    double member_mean = (log(2.0) + log(4.0 / 3.0)) / 2;
    CHECK(nll < member_mean - 0.02, "ensemble nll %g should be below mean member nll %g", nll,
          member_mean);
    /* and equals the probability path on p̄ = [.625, .375] */
    const float pbar[2] = {0.625f, 0.375f};
    double nllp;
    hy_metrics_nll_probs(&nllp, pbar, y0, 1, 2);
    near("logits vs probs path", nll, nllp, 1e-6);
    /* stability: logits [1000, 0], y = 1: p_1 = e^-1000 underflows in float (the probs path
     * clamps at 1e-12), the logits path gives exactly 1000 */
    const float zx[2] = {1000.0f, 0.0f};
    const int32_t y1[1] = {1};
    hy_metrics_nll_logits(&nll, zx, y1, 1, 1, 2);
    near("extreme logits nll", nll, 1000.0, 1e-9);
    const float px[2] = {1.0f, 0.0f};
    hy_metrics_nll_probs(&nllp, px, y1, 1, 2);
    near("clamped probs nll", nllp, -log(1e-12), 1e-9);
    /* M=2 extreme: member 1 [0, 1000] y=0 -> log p = -1000; member 2 [0, 0] -> log p = -log 2;
     * NLL = -log((e^-1000 + 1/2) / 2) = log 4 */
    const float z3[4] = {0.0f, 1000.0f, 0.0f, 0.0f};
    hy_metrics_nll_logits(&nll, z3, y0, 2, 1, 2);
    near("M=2 extreme nll", nll, log(4.0), 1e-12);
}

static void test_scores(void) {
    double s[4];
    hy_metrics_score_msp(s, P4, 4, 3);
    near("msp[0]", s[0], -0.75, 0);
    near("msp[3]", s[3], -1.0, 0);
    hy_metrics_score_entropy(s, P4, 4, 3);
    near("H[0]", s[0], -(0.75 * log(0.75) + 2 * 0.125 * log(0.125)), TOL);
    near("H[2] (0 log 0 = 0)", s[2], log(2.0), TOL);
    near("H[3] one-hot", s[3], 0.0, 0);
    /* MI, M=1: exactly 0 whatever the probabilities */
    hy_metrics_score_mi(s, P4, 1, 4, 3);
    for (int i = 0; i < 4; i++) CHECK(s[i] == 0.0, "MI at M=1 row %d = %g", i, s[i]);
    /* MI, M=2, N=2: sample 0 members [1,0] and [0,1] -> H(q=[.5,.5]) - 0 = log 2;
     * sample 1 both members [.5,.5] -> log 2 - log 2 = 0. Layout (M,N,C). */
    const float pm[8] = {1.0f, 0.0f, 0.5f, 0.5f,    /* member 0: sample 0, sample 1 */
                         0.0f, 1.0f, 0.5f, 0.5f};   /* member 1 */
    hy_metrics_score_mi(s, pm, 2, 2, 2);
    near("MI disagree", s[0], log(2.0), TOL);
    near("MI agree", s[1], 0.0, TOL);
    /* energy, M=1: z [0,0] -> -log 2; M=2: z1 [2,0], z2 [0,2] -> mean [1,1] -> -(1 + log 2) */
    const float z1[2] = {0.0f, 0.0f};
    hy_metrics_score_energy(s, z1, 1, 1, 2);
    near("energy M=1", s[0], -log(2.0), TOL);
    const float z2[4] = {2.0f, 0.0f, 0.0f, 2.0f};
    hy_metrics_score_energy(s, z2, 2, 1, 2);
    near("energy M=2", s[0], -(1.0 + log(2.0)), TOL);
    /* disagreement, M=3, N=1: argmaxes 0,0,1 -> pairs (0,1) agree, (0,2), (1,2) differ: 2/3 */
    const float pd[6] = {0.75f, 0.25f, 0.5f, 0.5f, 0.25f, 0.75f};
    hy_metrics_score_disagreement(s, pd, 3, 1, 2);
    near("disagreement M=3", s[0], 2.0 / 3.0, TOL);
    hy_metrics_score_disagreement(s, pd, 1, 1, 2);
    CHECK(s[0] == 0.0, "disagreement at M=1 = %g", s[0]);
}

/* naive O(n^2) twin: pairs (ood > id) + 0.5 (ood == id) */
static double auroc_naive(const double *a, size_t na, const double *b, size_t nb) {
    double u = 0;
    for (size_t i = 0; i < na; i++)
        for (size_t j = 0; j < nb; j++) u += b[j] > a[i] ? 1.0 : b[j] == a[i] ? 0.5 : 0.0;
    return u / ((double)na * (double)nb);
}

static void test_auroc_hand_and_ties(void) {
    double a;
    /* id [.1 .2 .3], ood [.25 .35]: .25 beats 2, .35 beats 3 -> 5/6 */
    const double id1[3] = {0.1, 0.2, 0.3}, ood1[2] = {0.25, 0.35};
    CHECK_OK(hy_metrics_auroc(&a, id1, 3, ood1, 2));
    near("auroc", a, 5.0 / 6.0, TOL);
    /* ties: id [0 1 1 2], ood [1 1 3]: each ood 1 beats 0 and ties two 1s -> 1 + 1 = 2;
     * ood 3 beats all 4 -> (2 + 2 + 4) / 12 = 2/3 */
    const double id2[4] = {0, 1, 1, 2}, ood2[3] = {1, 1, 3};
    CHECK_OK(hy_metrics_auroc(&a, id2, 4, ood2, 3));
    near("auroc ties", a, 2.0 / 3.0, TOL);
    /* all-equal scores: every pair is a tie -> 0.5 */
    const double e1[3] = {7, 7, 7}, e2[2] = {7, 7};
    CHECK_OK(hy_metrics_auroc(&a, e1, 3, e2, 2));
    near("auroc all equal", a, 0.5, 0);
    /* perfect separation and its reverse */
    CHECK_OK(hy_metrics_auroc(&a, id1, 3, (const double[]){1, 2}, 2));
    near("auroc perfect", a, 1.0, 0);
    CHECK_OK(hy_metrics_auroc(&a, (const double[]){1, 2}, 2, id1, 3));
    near("auroc reversed", a, 0.0, 0);
    CHECK_FAIL(hy_metrics_auroc(&a, id1, 0, ood1, 2), HY_EINVAL,
               "metrics: OOD metrics need ID and OOD samples (got 0 ID, 2 OOD)");
    const double bad[2] = {0.1, NAN};
    CHECK_FAIL(hy_metrics_auroc(&a, id1, 3, bad, 2), HY_EINVAL,
               "metrics: OOD score 1 (0-based) is NaN");
}

static void test_auroc_invariances(void) {
    hy_rng r;
    hy_rng_seed(&r, check_seed());
    enum { NI = 57, NO = 41 };
    double id[NI], ood[NO], nid[NO], nood[NI];
    for (int i = 0; i < NI; i++) id[i] = (double)hy_rng_below(&r, 8);       /* many ties */
    for (int i = 0; i < NO; i++) ood[i] = (double)hy_rng_below(&r, 8) + 1.0;
    double a, b, c;
    CHECK_OK(hy_metrics_auroc(&a, id, NI, ood, NO));
    near("auroc vs naive twin", a, auroc_naive(id, NI, ood, NO), 1e-14);
    /* swap ID/OOD and negate the scores: same AUROC */
    for (int i = 0; i < NO; i++) nid[i] = -ood[i];
    for (int i = 0; i < NI; i++) nood[i] = -id[i];
    CHECK_OK(hy_metrics_auroc(&b, nid, NO, nood, NI));
    CHECK(a == b, "swap + negate: %.17g vs %.17g", a, b);
    /* swap without negating: 1 - AUROC */
    CHECK_OK(hy_metrics_auroc(&c, ood, NO, id, NI));
    near("swap only", c, 1.0 - a, 1e-15);
    /* input order does not matter (ties handled as groups) */
    int64_t perm[NI];
    for (int i = 0; i < NI; i++) perm[i] = i;
    hy_rng_shuffle(&r, perm, NI);
    double sh[NI];
    for (int i = 0; i < NI; i++) sh[i] = id[perm[i]];
    CHECK_OK(hy_metrics_auroc(&b, sh, NI, ood, NO));
    CHECK(a == b, "shuffled: %.17g vs %.17g", a, b);
}

static void test_aupr(void) {
    double ap;
    /* AUPR-Out: pos (OOD) [.9 .4], neg (ID) [.8 .3 .1]; descending .9P .8N .4P .3N .1N:
     * at .9 TP 1 FP 0 -> 1/2 * 1; at .4 TP 2 FP 1 -> 1/2 * 2/3. AP = 1/2 + 1/3 = 5/6 */
    const double ood[2] = {0.9, 0.4}, id[3] = {0.8, 0.3, 0.1};
    CHECK_OK(hy_metrics_aupr(&ap, ood, 2, id, 3));
    near("aupr-out", ap, 5.0 / 6.0, TOL);
    hy_ood_metrics m;
    CHECK_OK(hy_metrics_ood(&m, id, 3, ood, 2));
    near("ood.aupr_out", m.aupr_out, 5.0 / 6.0, TOL);
    /* AUPR-In: ID positive, scores negated: -.1P -.3P -.4N -.8P -.9N:
     * 1/3 * 1 + 1/3 * 1 + 1/3 * 3/4 = 11/12 */
    near("ood.aupr_in", m.aupr_in, 11.0 / 12.0, TOL);
    /* AUROC of the same pair: .9 beats 3, .4 beats 2 -> 5/6 */
    near("ood.auroc", m.auroc, 5.0 / 6.0, TOL);
    /* ties form one threshold: pos [1 1], neg [1 0]: at 1 TP 2 FP 1 -> 1 * 2/3 */
    CHECK_OK(hy_metrics_aupr(&ap, (const double[]){1, 1}, 2, (const double[]){1, 0}, 2));
    near("aupr ties", ap, 2.0 / 3.0, TOL);
    /* all equal: one threshold, AP = P / (P + N) */
    CHECK_OK(hy_metrics_aupr(&ap, (const double[]){3, 3}, 2, (const double[]){3, 3, 3}, 3));
    near("aupr all equal", ap, 0.4, TOL);
}

static void test_fpr95(void) {
    double f;
    /* 20 OOD scores 1..20: k = ceil(19) = 19 -> t = the 19th largest = 2;
     * ID [1 2 3 .5]: 2 of 4 have s >= 2 -> 0.5 */
    double ood[20];
    for (int i = 0; i < 20; i++) ood[i] = i + 1;
    const double id[4] = {1, 2, 3, 0.5};
    CHECK_OK(hy_metrics_fpr95(&f, id, 4, ood, 20));
    near("fpr95 n=20", f, 0.5, 0);
    /* 10 OOD 1..10: k = ceil(9.5) = 10 -> t = 1; ID [.5 1 5] -> 2/3 */
    CHECK_OK(hy_metrics_fpr95(&f, (const double[]){0.5, 1, 5}, 3, ood, 10));
    near("fpr95 n=10", f, 2.0 / 3.0, TOL);
    /* ties: OOD all 3 -> t = 3; ID [3 2] -> 1/2 */
    CHECK_OK(hy_metrics_fpr95(&f, (const double[]){3, 2}, 2, (const double[]){3, 3, 3}, 3));
    near("fpr95 ties", f, 0.5, 0);
    /* one OOD sample: t = its score */
    CHECK_OK(hy_metrics_fpr95(&f, (const double[]){0, 1, 2, 3}, 4, (const double[]){2}, 1));
    near("fpr95 n=1", f, 0.5, 0);
}

static void test_jaccard(void) {
    /* A = {0,1}, B = {1,2}, C = {0,1}: J(A,B) = 1/3, J(A,C) = 1, J(B,C) = 1/3; mean 5/9 */
    const float g[12] = {1, 1, 0, 0, 0, 1, 1, 0, 1, 1, 0, 0};
    double J[9];
    double mean = hy_metrics_jaccard(J, g, 3, 4);
    near("jaccard mean", mean, 5.0 / 9.0, TOL);
    near("J[0,1]", J[1], 1.0 / 3.0, TOL);
    near("J[1,0]", J[3], 1.0 / 3.0, TOL);
    near("J[0,2]", J[2], 1.0, 0);
    near("J[1,1]", J[4], 1.0, 0);
    /* disjoint sets -> 0; two empty sets -> 1; M = 1 -> 1 */
    const float d[4] = {1, 0, 0, 1};
    near("disjoint", hy_metrics_jaccard(NULL, d, 2, 2), 0.0, 0);
    const float e[4] = {0, 0, 0, 0};
    near("empty", hy_metrics_jaccard(NULL, e, 2, 2), 1.0, 0);
    near("M=1", hy_metrics_jaccard(NULL, d, 1, 2), 1.0, 0);
}

static void test_histogram(void) {
    /* [0, 1] in 2 bins: 0 -> b0; .5 -> b1 ([.5, 1)); 1 -> b1 (hi in the last bin);
     * 1.5 and -1 are outside and not counted */
    const double x[5] = {0, 0.5, 1, 1.5, -1};
    int64_t c[2];
    hy_metrics_histogram(c, x, 5, 0.0, 1.0, 2);
    CHECK(c[0] == 1 && c[1] == 2, "histogram %lld %lld, want 1 2", (long long)c[0],
          (long long)c[1]);
}

static void test_validation_messages(void) {
    const float ok[4] = {0.25f, 0.75f, 0.5f, 0.5f};
    CHECK_OK(hy_metrics_check_probs(ok, 2, 2, HY_METRICS_SUM_TOL));
    const float nan_row[4] = {0.25f, 0.75f, NAN, 0.5f};
    CHECK_FAIL(hy_metrics_check_probs(nan_row, 2, 2, 1e-4), HY_EINVAL,
               "metrics: row 1 (0-based) has a non-finite value at class 0 (nan)");
    const float neg[4] = {0.25f, 0.75f, -0.5f, 1.5f};
    CHECK_FAIL(hy_metrics_check_probs(neg, 2, 2, 1e-4), HY_EINVAL,
               "metrics: row 1 (0-based) has a negative value at class 0 (-0.5)");
    const float sum[4] = {0.25f, 0.75f, 0.5f, 0.375f};
    CHECK_FAIL(hy_metrics_check_probs(sum, 2, 2, 1e-4), HY_EINVAL,
               "metrics: row 1 (0-based) sums to 0.875 (expected 1 within 0.0001)");
    /* within tolerance passes; just beyond fails */
    const float close[2] = {0.5f, 0.50009f};
    CHECK_OK(hy_metrics_check_probs(close, 1, 2, 1e-4));
    const float far[2] = {0.5f, 0.50011f};
    CHECK_FAIL_HAS(hy_metrics_check_probs(far, 1, 2, 1e-4), HY_EINVAL, "row 0 (0-based) sums");
    const int32_t y[3] = {0, 2, -1};
    CHECK_FAIL(hy_metrics_check_labels(y, 3, 3), HY_EINVAL,
               "metrics: label -1 at row 2 (0-based) is out of range [0, 3)");
    const float z[3] = {0, INFINITY, 0};
    CHECK_FAIL(hy_metrics_check_finite(z, 3, "/logits"), HY_EINVAL,
               "metrics: /logits has a non-finite value at flat index 1 (0-based, inf)");
    hy_id_metrics m;
    CHECK_FAIL(hy_metrics_id(&m, NULL, NULL, NULL, NULL, 0, 15), HY_EINVAL,
               "metrics: classification metrics of an empty set");
}

static void test_bootstrap(void) {
    hy_rng r;
    hy_rng_seed(&r, check_seed());
    enum { N = 200, NO = 150 };
    double conf[N], nll[N], brier[N], sid[N], sood[NO];
    uint8_t ok[N];
    for (int i = 0; i < N; i++) {
        conf[i] = 0.5 + 0.5 * hy_rng_double(&r);
        ok[i] = hy_rng_double(&r) < conf[i];
        nll[i] = -log(conf[i]);
        brier[i] = (1 - conf[i]) * (1 - conf[i]);
        sid[i] = hy_rng_normal(&r);
    }
    for (int i = 0; i < NO; i++) sood[i] = hy_rng_normal(&r) + 1.0;
    hy_id_metrics lo1, hi1, lo2, hi2, pt;
    CHECK_OK(hy_metrics_bootstrap_id(&lo1, &hi1, conf, ok, nll, brier, N, 15, 100, 7));
    CHECK_OK(hy_metrics_bootstrap_id(&lo2, &hi2, conf, ok, nll, brier, N, 15, 100, 7));
    CHECK(memcmp(&lo1, &lo2, sizeof lo1) == 0 && memcmp(&hi1, &hi2, sizeof hi1) == 0,
          "same seed gave different ID intervals");
    CHECK_OK(hy_metrics_id(&pt, conf, ok, nll, brier, N, 15));
    CHECK(lo1.acc <= pt.acc && pt.acc <= hi1.acc && lo1.acc < hi1.acc,
          "acc %g outside [%g, %g]", pt.acc, lo1.acc, hi1.acc);
    CHECK(lo1.nll <= pt.nll && pt.nll <= hi1.nll, "nll %g outside [%g, %g]", pt.nll, lo1.nll,
          hi1.nll);
    CHECK_OK(hy_metrics_bootstrap_id(&lo2, &hi2, conf, ok, nll, brier, N, 15, 100, 8));
    CHECK(lo1.acc != lo2.acc || hi1.acc != hi2.acc || lo1.nll != lo2.nll,
          "different seeds gave identical intervals");
    hy_ood_metrics olo1, ohi1, olo2, ohi2, opt;
    CHECK_OK(hy_metrics_bootstrap_ood(&olo1, &ohi1, sid, N, sood, NO, 100, 3));
    CHECK_OK(hy_metrics_bootstrap_ood(&olo2, &ohi2, sid, N, sood, NO, 100, 3));
    CHECK(memcmp(&olo1, &olo2, sizeof olo1) == 0 && memcmp(&ohi1, &ohi2, sizeof ohi1) == 0,
          "same seed gave different OOD intervals");
    CHECK_OK(hy_metrics_ood(&opt, sid, N, sood, NO));
    CHECK(olo1.auroc <= opt.auroc && opt.auroc <= ohi1.auroc, "auroc %g outside [%g, %g]",
          opt.auroc, olo1.auroc, ohi1.auroc);
    CHECK_FAIL(hy_metrics_bootstrap_ood(&olo1, &ohi1, sid, N, sood, NO, 1, 3), HY_EINVAL,
               "metrics: bootstrap needs at least 2 resamples (got 1)");
}

/* ===== naive references for the evaluation-protocol metrics ===== */

/* FPR at 95 % recall of the positives by scanning every candidate threshold: the largest t
 * among the positive scores with #{pos >= t} >= 0.95 n_pos; FPR = #{neg >= t} / n_neg. */
static double naive_fpr95(const double *neg, size_t nn, const double *pos, size_t np) {
    double best = -INFINITY;
    for (size_t j = 0; j < np; j++) {
        size_t caught = 0;
        for (size_t q = 0; q < np; q++) caught += pos[q] >= pos[j];
        if ((double)caught >= 0.95 * (double)np && pos[j] > best) best = pos[j];
    }
    size_t fp = 0;
    for (size_t i = 0; i < nn; i++) fp += neg[i] >= best;
    return (double)fp / (double)nn;
}

static double naive_auroc(const double *neg, size_t nn, const double *pos, size_t np) {
    double u = 0.0;
    for (size_t i = 0; i < nn; i++)
        for (size_t j = 0; j < np; j++) u += pos[j] > neg[i] ? 1.0 : pos[j] == neg[i] ? 0.5 : 0.0;
    return u / ((double)nn * (double)np);
}

/* step-wise AP: one threshold per distinct score, descending */
static double naive_ap(const double *neg, size_t nn, const double *pos, size_t np) {
    double ap = 0.0, prev = INFINITY;
    for (;;) {
        double t = -INFINITY;   /* the next distinct score below prev */
        for (size_t j = 0; j < np; j++) if (pos[j] < prev && pos[j] > t) t = pos[j];
        for (size_t i = 0; i < nn; i++) if (neg[i] < prev && neg[i] > t) t = neg[i];
        if (isinf(t)) break;
        double tp = 0, fp = 0, dtp = 0;
        for (size_t j = 0; j < np; j++) { tp += pos[j] >= t; dtp += pos[j] == t; }
        for (size_t i = 0; i < nn; i++) fp += neg[i] >= t;
        if (dtp > 0) ap += dtp / (double)np * tp / (tp + fp);
        prev = t;
    }
    return ap;
}

static void test_fpr95_id(void) {
    double f;
    /* ID 1..20: k = 19 -> t = the 19th smallest = 19; OOD [19 20 25 0]: 19 and 0 are <= 19
     * -> 2/4 accepted */
    double id[20];
    for (int i = 0; i < 20; i++) id[i] = i + 1;
    CHECK_OK(hy_metrics_fpr95_id(&f, id, 20, (const double[]){19, 20, 25, 0}, 4));
    near("fpr95_id n=20", f, 0.5, 0);
    /* randomised with ties, against the swapped-and-negated naive FPR95 */
    hy_rng r;
    hy_rng_seed(&r, check_seed() + 11);
    enum { NI = 137, NO = 61 };
    double si[NI], so[NO], ni[NI], no[NO];
    for (int rep = 0; rep < 20; rep++) {
        for (int i = 0; i < NI; i++) { si[i] = (double)hy_rng_below(&r, 30); ni[i] = -si[i]; }
        for (int i = 0; i < NO; i++) { so[i] = (double)hy_rng_below(&r, 30) + 5; no[i] = -so[i]; }
        hy_ood_metrics m;
        CHECK_OK(hy_metrics_ood(&m, si, NI, so, NO));
        near("fpr95_id vs naive", m.fpr95_id, naive_fpr95(no, NO, ni, NI), 0);
        near("fpr95 vs naive", m.fpr95, naive_fpr95(si, NI, so, NO), 0);
        CHECK_OK(hy_metrics_fpr95_id(&f, si, NI, so, NO));
        near("fpr95_id single call", f, m.fpr95_id, 0);
    }
}

static void test_maxlogit(void) {
    /* M = 2, N = 2, C = 3: sample 0 maxima 3 and 1 -> -2; sample 1 maxima -1 and 5 -> -2 */
    const float z[12] = {3, 0, 1, -1, -2, -3,   /* member 0: samples 0, 1 */
                         1, 0.5f, -4, 0, 5, 2}; /* member 1 */
    double s[2];
    hy_metrics_score_maxlogit(s, z, 2, 2, 3);
    near("maxlogit[0]", s[0], -2.0, 0);
    near("maxlogit[1]", s[1], -(-1.0 + 5.0) / 2, 0);
    /* M = 1: -max z */
    hy_metrics_score_maxlogit(s, z, 1, 2, 3);
    near("maxlogit M=1", s[1], 1.0, 0);
}

static void test_misclf(void) {
    hy_rng r;
    hy_rng_seed(&r, check_seed() + 12);
    enum { N = 173 };
    double s[N], pos[N], neg[N];
    uint8_t ok[N];
    for (int rep = 0; rep < 20; rep++) {
        size_t np = 0, nn = 0;
        for (int i = 0; i < N; i++) {
            s[i] = (double)hy_rng_below(&r, 25);
            ok[i] = hy_rng_double(&r) < 0.3 + 0.02 * s[i] ? 0 : 1;   /* higher s, more errors */
            if (ok[i]) neg[nn++] = s[i]; else pos[np++] = s[i];
        }
        hy_misclf_metrics m;
        CHECK_OK(hy_metrics_misclf(&m, s, ok, N));
        near("misclf auroc", m.auroc, naive_auroc(neg, nn, pos, np), 1e-12);
        near("misclf aupr", m.aupr, naive_ap(neg, nn, pos, np), 1e-12);
        near("misclf fpr95", m.fpr95, naive_fpr95(neg, nn, pos, np), 0);
    }
    /* hand case: errors at scores 3, 2; correct at 1, 2: AUROC = (2 + 1.5) / 4 */
    hy_misclf_metrics m;
    CHECK_OK(hy_metrics_misclf(&m, (const double[]){3, 2, 1, 2}, (const uint8_t[]){0, 0, 1, 1},
                               4));
    near("misclf hand auroc", m.auroc, 0.875, 0);
    CHECK_FAIL(hy_metrics_misclf(&m, (const double[]){1, 2}, (const uint8_t[]){1, 1}, 2),
               HY_EINVAL, "metrics: misclassification detection needs correct and "
               "misclassified samples (got 0 of 2 misclassified)");
}

/* mean NLL of softmax(a / T), naively in double */
static double naive_ts_nll(const double *a, const int32_t *y, size_t N, size_t C, double T) {
    double s = 0.0;
    for (size_t i = 0; i < N; i++) {
        double z = 0.0;
        for (size_t c = 0; c < C; c++) z += exp(a[i * C + c] / T);
        s += -(a[i * C + (size_t)y[i]] / T - log(z));
    }
    return s / (double)N;
}

static void test_temperature(void) {
    hy_rng r;
    hy_rng_seed(&r, check_seed() + 13);
    enum { M = 3, N = 300, C = 4 };
    static float z[M * N * C];
    static int32_t y[N];
    static double a[N * C], a1[N * C];
    for (int i = 0; i < N; i++) y[i] = (int32_t)hy_rng_below(&r, C);
    /* overconfident members: one large logit (+8) on the true class 60 % of the time, else on
     * another class; members share it and differ by small noise, so conf ~ 1 at acc ~ 0.6 */
    for (int i = 0; i < N; i++) {
        int k = hy_rng_double(&r) < 0.6 ? y[i]
                : (int)(((uint64_t)y[i] + 1 + hy_rng_below(&r, C - 1)) % C);
        double base[C];
        for (int c = 0; c < C; c++) base[c] = hy_rng_normal(&r) + (c == k ? 8.0 : 0.0);
        for (int m = 0; m < M; m++)
            for (int c = 0; c < C; c++)
                z[(m * N + i) * C + c] = (float)(base[c] + 0.5 * hy_rng_normal(&r));
    }
    /* log p̄ against the naive log of the mean of the member softmaxes */
    hy_metrics_log_mean_probs(a, z, M, N, C);
    double worst = 0.0;
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++) {
            double pm = 0.0;
            for (int m = 0; m < M; m++) {
                const float *row = z + (m * N + i) * C;
                double zs = 0.0;
                for (int k = 0; k < C; k++) zs += exp((double)row[k]);
                pm += exp((double)row[c]) / zs;
            }
            double d = fabs(a[i * C + c] - log(pm / M));
            if (d > worst) worst = d;
        }
    CHECK(worst < 1e-12, "log_mean_probs off by %g", worst);
    /* the fit against a fine grid over log T */
    double T, nll, T2, nll2;
    CHECK_OK(hy_metrics_temperature_fit(&T, &nll, a, y, N, C));
    CHECK_OK(hy_metrics_temperature_fit(&T2, &nll2, a, y, N, C));
    CHECK(T == T2 && nll == nll2, "temperature fit not deterministic");
    double best = INFINITY, bestT = 0.0;
    for (int g = 0; g <= 4000; g++) {
        double t = exp(log(HY_TEMP_MIN) + (log(HY_TEMP_MAX) - log(HY_TEMP_MIN)) * g / 4000.0);
        double v = naive_ts_nll(a, y, N, C, t);
        if (v < best) { best = v; bestT = t; }
    }
    CHECK(T > 1.0, "overconfident ensemble should get T > 1 (got %g)", T);
    CHECK(nll <= best + 1e-12, "fitted NLL %.17g above the grid minimum %.17g", nll, best);
    CHECK(fabs(log(T) - log(bestT)) < 2 * 9.3 / 4000.0, "T %g vs grid %g", T, bestT);
    near("fit nll = naive nll at T", nll, naive_ts_nll(a, y, N, C, T), 1e-12);
    /* T = 1 is the uncalibrated ensemble: its NLL equals hy_metrics_nll_logits */
    {
        double n1[N], n2[N];
        hy_metrics_temperature_nll(n1, a, y, N, C, 1.0);
        hy_metrics_nll_logits(n2, z, y, M, N, C);
        check_close_d("T=1 nll vs nll_logits", n1, n2, N, 1e-12, 1e-12);
    }
    /* per-sample NLL and apply against naive softmax(a / T) */
    double nl[N];
    static float p[N * C];
    hy_metrics_temperature_nll(nl, a, y, N, C, T);
    hy_metrics_temperature_apply(p, a, N, C, T);
    double wn = 0.0, wp = 0.0;
    for (int i = 0; i < N; i++) {
        double zs = 0.0;
        for (int c = 0; c < C; c++) zs += exp(a[i * C + c] / T);
        double d = fabs(nl[i] + (a[i * C + y[i]] / T - log(zs)));
        if (d > wn) wn = d;
        for (int c = 0; c < C; c++) {
            double dp = fabs((double)p[i * C + c] - exp(a[i * C + c] / T) / zs);
            if (dp > wp) wp = dp;
        }
    }
    CHECK(wn < 1e-12 && wp < 1e-7, "temperature nll/apply off by %g / %g", wn, wp);
    /* M = 1: a = log-softmax(z), so softmax(a / T) = softmax(z / T) (classic TS) */
    hy_metrics_log_mean_probs(a1, z, 1, N, C);
    hy_metrics_temperature_apply(p, a1, N, C, 2.5);
    wp = 0.0;
    for (int i = 0; i < N; i++) {
        double zs = 0.0;
        for (int c = 0; c < C; c++) zs += exp((double)z[i * C + c] / 2.5);
        for (int c = 0; c < C; c++) {
            double dp = fabs((double)p[i * C + c] - exp((double)z[i * C + c] / 2.5) / zs);
            if (dp > wp) wp = dp;
        }
    }
    CHECK(wp < 1e-7, "M=1 temperature scaling differs from softmax(z/T) by %g", wp);
    /* always right and confident: the NLL falls as T -> 0, so T clamps to HY_TEMP_MIN */
    const double sep[4] = {0.0, -3.0, -3.0, 0.0};
    CHECK_OK(hy_metrics_temperature_fit(&T, NULL, sep, (const int32_t[]){0, 1}, 2, 2));
    near("separable -> T min", T, HY_TEMP_MIN, 0);
    /* labels uninformative (uniform-right half the time): T large */
    const double flip[4] = {0.0, -5.0, 0.0, -5.0};
    CHECK_OK(hy_metrics_temperature_fit(&T, NULL, flip, (const int32_t[]){0, 1}, 2, 2));
    near("coin flip -> T max", T, HY_TEMP_MAX, 0);
    const double bad[2] = {0.0, -INFINITY};
    CHECK_FAIL(hy_metrics_temperature_fit(&T, NULL, bad, (const int32_t[]){0}, 1, 2), HY_EINVAL,
               "metrics: temperature fit: log-probability 1 (0-based row 0) is not finite");
}

int main(void) {
    RUN(test_predict_correct);
    RUN(test_id_metrics_hand);
    RUN(test_reliability_bins_and_edges);
    RUN(test_ece_perfectly_calibrated);
    RUN(test_aece_groups);
    RUN(test_aurc_ties_by_index);
    RUN(test_risk_coverage);
    RUN(test_nll_logits_members);
    RUN(test_scores);
    RUN(test_auroc_hand_and_ties);
    RUN(test_auroc_invariances);
    RUN(test_aupr);
    RUN(test_fpr95);
    RUN(test_jaccard);
    RUN(test_histogram);
    RUN(test_validation_messages);
    RUN(test_bootstrap);
    RUN(test_fpr95_id);
    RUN(test_maxlogit);
    RUN(test_misclf);
    RUN(test_temperature);
    return check_exit("test_metrics");
}
