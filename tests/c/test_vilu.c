/* test_vilu.c: the learned uncertainty head (core/hydra/vilu.h). Gradient check of hy_vilu_loss_grad
 * against central differences of a double twin of the head's loss (the numeric side accurate to
 * ~1e-8, so the tolerance measures the float backward), for both losses, with per-row weights;
 * inputs and targets; a seeded fit that learns a separable rule and is bitwise reproducible;
 * the file round trip; the features accessor (hy_xfmr_features: logits = head(features)); and
 * the errors. Seed: HYDRA_SEED (printed). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/base.h"
#include "check.h"
#include "io/h5.h"
#include "nn/layers.h"
#include "data/loader.h"
#include "tensor/rng.h"
#include "nn/train.h"
#include "hydra/vilu.h"
#include "nn/xfmr.h"

static hy_rng rng;

static float *rand_vec(size_t n, float scale) {
    float *p = malloc((n + 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = scale * (2.0f * hy_rng_uniform(&rng) - 1.0f);
    return p;
}

static double gelu_d(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

/* the loss of hy_vilu_loss_grad in double, parameters p (n_params, double) in h's layout */
static double ref_loss(const hy_vilu *h, const double *p, const float *x, const float *t,
                       const float *w, size_t N) {
    size_t DI = h->DI, H = h->H;
    const double *W1 = p + h->off[HY_VILU_W1], *b1 = p + h->off[HY_VILU_B1];
    const double *W2 = p + h->off[HY_VILU_W2], *b2 = p + h->off[HY_VILU_B2];
    const double *w3 = p + h->off[HY_VILU_W3], *b3 = p + h->off[HY_VILU_B3];
    double *h1 = malloc(H * sizeof *h1), *h2 = malloc(H * sizeof *h2);
    double sum = 0.0;
    for (size_t i = 0; i < N; i++) {
        for (size_t o = 0; o < H; o++) {
            double a = b1[o];
            for (size_t j = 0; j < DI; j++)
                a += W1[o * DI + j] * (((double)x[i * DI + j] - (double)h->mean[j]) / (double)h->std[j]);
            h1[o] = gelu_d(a);
        }
        for (size_t o = 0; o < H; o++) {
            double a = b2[o];
            for (size_t j = 0; j < H; j++) a += W2[o * H + j] * h1[j];
            h2[o] = gelu_d(a);
        }
        double u = b3[0];
        for (size_t j = 0; j < H; j++) u += w3[j] * h2[j];
        double l, s = 1.0 / (1.0 + exp(-u));
        double ti = (double)t[i];
        if (h->loss == HY_VILU_LOSS_BCE) l = log1p(exp(u)) - ti * u;
        else l = (s - ti) * (s - ti);
        sum += (w ? (double)w[i] : 1.0) * l;
    }
    free(h1);
    free(h2);
    return sum / (double)N;
}

static void gradcheck(hy_vilu_loss loss) {
    const size_t D = 4, H = 5, N = 7;
    hy_vilu h;
    CHECK_OK(hy_vilu_new(&h, HY_VILU_INPUT_VILU, loss, D, H));
    hy_vilu_init(&h, 11);
    /* a non-trivial standardisation */
    for (size_t j = 0; j < h.DI; j++) {
        h.mean[j] = 0.1f * (float)j - 0.3f;
        h.std[j] = 0.5f + 0.05f * (float)j;
    }
    /* larger weights than the init so the GELUs leave their linear part */
    for (size_t k = 0; k < h.n_params; k++) h.params[k] *= 3.0f;
    float *x = rand_vec(N * h.DI, 1.0f);
    float *t = rand_vec(N, 1.0f), *w = rand_vec(N, 1.0f);
    for (size_t i = 0; i < N; i++) {
        t[i] = loss == HY_VILU_LOSS_BCE ? (float)(i % 3 == 0) : 0.5f + 0.5f * t[i];
        w[i] = 1.5f + w[i];                    /* in [0.5, 2.5] */
    }
    double L;
    CHECK_OK(hy_vilu_loss_grad(&h, x, t, w, N, &L));
    double *p = malloc(h.n_params * sizeof *p);
    for (size_t k = 0; k < h.n_params; k++) p[k] = h.params[k];
    double Lref = ref_loss(&h, p, x, t, w, N);
    CHECK(fabs(L - Lref) <= 1e-5 * (1.0 + fabs(Lref)), "%s loss %.9g vs double twin %.9g",
          hy_vilu_loss_name(loss), L, Lref);
    double worst = 0.0;
    size_t worst_k = 0, probed = 0;
    const double eps = 1e-5;
    for (size_t ti = 0; ti < HY_VILU_NT; ti++) {
        size_t n = ti == HY_VILU_W1 ? H * h.DI : ti == HY_VILU_W2 ? H * H
                 : ti == HY_VILU_W3 || ti == HY_VILU_B1 || ti == HY_VILU_B2 ? H : 1;
        for (size_t e = 0; e < n; e++) {
            size_t k = h.off[ti] + e;
            double keep = p[k];
            p[k] = keep + eps;
            double lp = ref_loss(&h, p, x, t, w, N);
            p[k] = keep - eps;
            double lm = ref_loss(&h, p, x, t, w, N);
            p[k] = keep;
            double gn = (lp - lm) / (2 * eps), ga = h.grads[k];
            double rel = fabs(ga - gn) / fmax(fabs(ga) + fabs(gn), 1e-4);
            if (rel > worst) { worst = rel; worst_k = k; }
            probed++;
        }
    }
    CHECK(probed == 4 * 5 * 3 + 5 + 25 + 5 + 5 + 1, "every parameter probed (%zu)", probed);
    CHECK(worst <= 2e-3, "%s: worst relative gradient error %.3g at parameter %zu (analytic %g)",
          hy_vilu_loss_name(loss), worst, worst_k, (double)h.grads[worst_k]);
    /* w = NULL means every weight 1 */
    for (size_t i = 0; i < N; i++) w[i] = 1.0f;
    double L1, L2;
    CHECK_OK(hy_vilu_loss_grad(&h, x, t, w, N, &L1));
    float *g1 = malloc(h.n_params * sizeof *g1);
    memcpy(g1, h.grads, h.n_params * sizeof *g1);
    CHECK_OK(hy_vilu_loss_grad(&h, x, t, NULL, N, &L2));
    CHECK(L1 == L2 && memcmp(g1, h.grads, h.n_params * sizeof *g1) == 0, "NULL weights = 1");
    free(g1);
    free(p);
    free(x);
    free(t);
    free(w);
    hy_vilu_release(&h);
}

static void test_gradcheck_bce(void) { gradcheck(HY_VILU_LOSS_BCE); }
static void test_gradcheck_tcp(void) { gradcheck(HY_VILU_LOSS_TCP); }

static void test_inputs_and_targets(void) {
    const size_t N = 2, D = 3, K = 2;
    float z[6] = {1, 2, 3, -1, 0.5f, 2};
    float logits[4] = {0.1f, 0.9f, 2.0f, -1.0f};        /* predicted 1, then 0 */
    float W[6] = {10, 20, 30, 40, 50, 60};              /* rows: class 0, class 1 */
    float x[18];
    hy_vilu_inputs(x, HY_VILU_INPUT_VILU, z, logits, W, N, D, K);
    float want[18] = {1, 2, 3, 40, 50, 60, 40, 100, 180, -1, 0.5f, 2, 10, 20, 30, -10, 10, 60};
    CHECK(memcmp(x, want, sizeof want) == 0, "[z, w_pred, z * w_pred]");
    hy_vilu_inputs(x, HY_VILU_INPUT_FEATURES, z, logits, W, N, D, K);
    CHECK(memcmp(x, z, sizeof z) == 0, "features input is z");
    int32_t y[2] = {1, 1};
    float t[2];
    CHECK_OK(hy_vilu_targets(t, HY_VILU_LOSS_BCE, logits, y, N, K));
    CHECK(t[0] == 0.0f && t[1] == 1.0f, "misclassified = 1 (%g %g)", (double)t[0], (double)t[1]);
    CHECK_OK(hy_vilu_targets(t, HY_VILU_LOSS_TCP, logits, y, N, K));
    CHECK(fabsf(t[0] - 1.0f / (1.0f + expf(-0.8f))) < 1e-6f, "tcp row 1 %g", (double)t[0]);
    CHECK(fabsf(t[1] - 1.0f / (1.0f + expf(3.0f))) < 1e-6f, "tcp row 2 %g", (double)t[1]);
    int32_t bad[2] = {0, 2};
    CHECK_FAIL(hy_vilu_targets(t, HY_VILU_LOSS_BCE, logits, bad, N, K), HY_EINVAL,
               "vilu: label 2 out of range [0, 2) (row 2)");
}

/* rows whose first column decides the target: a fitted head must rank them */
static void test_fit_learns_and_is_reproducible(void) {
    const size_t N = 400, D = 6, H = 16;
    float *x = rand_vec(N * D, 1.0f), *t = malloc(N * sizeof *t);
    size_t npos = 0;
    for (size_t i = 0; i < N; i++) {
        t[i] = x[i * D] + 0.3f * x[i * D + 1] > 0.6f ? 1.0f : 0.0f;   /* ~25 % positive */
        npos += t[i] > 0.5f;
    }
    CHECK(npos > 40 && npos < 160, "class balance %zu", npos);
    hy_vilu_fit_config c = {30, 32, 3e-3, 1e-4, 5};
    hy_vilu a, b;
    CHECK_OK(hy_vilu_new(&a, HY_VILU_INPUT_FEATURES, HY_VILU_LOSS_BCE, D, H));
    CHECK_OK(hy_vilu_new(&b, HY_VILU_INPUT_FEATURES, HY_VILU_LOSS_BCE, D, H));
    double la, lb;
    CHECK_OK(hy_vilu_fit(&a, x, t, N, &c, "vilu", &la));
    CHECK_OK(hy_vilu_fit(&b, x, t, N, &c, "vilu", &lb));
    CHECK(la == lb && memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0,
          "same seed, same head (bitwise)");
    /* weighted BCE of a constant predictor is log 2 = 0.693 */
    CHECK(la < 0.3, "training loss %g", la);
    float *s = malloc(N * sizeof *s);
    CHECK_OK(hy_vilu_score(&a, x, N, s));
    /* AUROC of the score, positives vs negatives (ties half) */
    double wins = 0;
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++)
            if (t[i] > 0.5f && t[j] < 0.5f) wins += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
    double auroc = wins / ((double)npos * (double)(N - npos));
    CHECK(auroc > 0.95, "training AUROC %g", auroc);
    /* another seed gives another head */
    c.seed = 6;
    CHECK_OK(hy_vilu_fit(&b, x, t, N, &c, "vilu", &lb));
    CHECK(memcmp(a.params, b.params, a.n_params * sizeof(float)) != 0, "seed matters");
    /* file round trip: the same scores */
    char path[512];
    snprintf(path, sizeof path, "%s/head.h5", check_tmpdir());
    hy_h5 f;
    CHECK_OK(hy_h5_create(&f, path));
    CHECK_OK(hy_vilu_write(&f, &a));
    CHECK_OK(hy_h5_commit(&f));
    hy_vilu r;
    CHECK_OK(hy_h5_open(&f, path));
    CHECK_OK(hy_vilu_read(&f, path, &r));
    hy_h5_close(&f);
    float *s2 = malloc(N * sizeof *s2);
    CHECK_OK(hy_vilu_score(&r, x, N, s2));
    CHECK(memcmp(s, s2, N * sizeof *s) == 0, "scores after the round trip");
    CHECK(r.input == a.input && r.loss == a.loss && r.H == H && r.D == D, "attributes");
    hy_vilu_release(&r);
    /* a size from the file beyond its limit is refused before anything is allocated */
    CHECK_OK(hy_h5_create(&f, path));
    CHECK_OK(hy_vilu_write(&f, &a));
    CHECK_OK(hy_h5_set_attr_i64(&f, "/vilu", "hidden", (int64_t)1 << 40));
    CHECK_OK(hy_h5_commit(&f));
    CHECK_OK(hy_h5_open(&f, path));
    char want[700];
    snprintf(want, sizeof want, "vilu: '%s': /vilu hidden = 1099511627776 is out of range "
             "(expected 1 to 65536)", path);
    CHECK_FAIL(hy_vilu_read(&f, path, &r), HY_EINVAL, want);
    hy_h5_close(&f);
    /* tcp scores are -sigmoid(u) in (-1, 0) */
    hy_vilu_release(&b);
    CHECK_OK(hy_vilu_new(&b, HY_VILU_INPUT_FEATURES, HY_VILU_LOSS_TCP, D, H));
    c.epochs = 2;
    CHECK_OK(hy_vilu_fit(&b, x, t, N, &c, "vilu", &lb));
    CHECK_OK(hy_vilu_score(&b, x, N, s2));
    int in_range = 1;
    for (size_t i = 0; i < N; i++) in_range &= s2[i] < 0.0f && s2[i] > -1.0f;
    CHECK(in_range, "tcp scores in (-1, 0)");
    free(s);
    free(s2);
    free(x);
    free(t);
    hy_vilu_release(&a);
    hy_vilu_release(&b);
}

static void test_fit_errors(void) {
    hy_vilu h;
    CHECK_OK(hy_vilu_new(&h, HY_VILU_INPUT_FEATURES, HY_VILU_LOSS_BCE, 2, 3));
    float x[8] = {0}, t[4] = {0};
    hy_vilu_fit_config c = {1, 2, 1e-3, 0, 1};
    CHECK_FAIL(hy_vilu_fit(&h, x, t, 4, &c, "vilu", NULL), HY_EINVAL,
               "vilu: the training rows have no misclassified sample (0 of 4): a learned error "
               "predictor needs both outcomes");
    t[0] = 1;
    c.epochs = 0;
    CHECK_FAIL(hy_vilu_fit(&h, x, t, 4, &c, "vilu", NULL), HY_EINVAL,
               "vilu.epochs must be >= 1 (got 0)");
    c.epochs = 1;
    c.learning_rate = 0;
    CHECK_FAIL(hy_vilu_fit(&h, x, t, 4, &c, "vilu", NULL), HY_EINVAL,
               "vilu.learning_rate must be > 0 (got 0)");
    hy_vilu_input in;
    CHECK_FAIL(hy_vilu_input_parse("clip", "vilu.input", &in), HY_EINVAL,
               "vilu.input must be vilu or features (got 'clip')");
    hy_vilu_release(&h);
    CHECK_FAIL(hy_vilu_new(&h, HY_VILU_INPUT_VILU, HY_VILU_LOSS_BCE, 4, 0), HY_EINVAL,
               "vilu: features (4) and hidden width (0) must be >= 1");
}

/* hy_xfmr_features / hy_train_features: logits = features head.weight^T + head.bias */
static void test_features_are_the_head_input(void) {
    hy_xfmr_config cfg = check_tiny_vit();
    hy_xfmr m;
    CHECK_OK(hy_xfmr_new(&m, &cfg));
    hy_xfmr_init(&m, 3);
    for (size_t k = 0; k < cfg.n_classes; k++) m.p.head_b[k] = 0.1f * (float)k;
    CHECK_OK(hy_xfmr_alloc_acts(&m, 4));
    CHECK(hy_xfmr_features(&m) == NULL, "no forward yet");
    const size_t N = 5, S = cfg.image_size, D = cfg.d_model, K = cfg.n_classes;
    hy_tensor im, lb;
    int64_t ish[3] = {(int64_t)N, (int64_t)S, (int64_t)S}, lsh[1] = {(int64_t)N};
    CHECK_OK(hy_tensor_alloc(&im, HY_U8, 3, ish));
    CHECK_OK(hy_tensor_alloc(&lb, HY_I32, 1, lsh));
    uint8_t *px = im.data;
    for (size_t i = 0; i < N * S * S; i++) px[i] = (uint8_t)hy_rng_below(&rng, 256);
    for (size_t i = 0; i < N; i++) ((int32_t *)lb.data)[i] = (int32_t)(i % K);
    hy_dataset ds;
    CHECK_OK(hy_dataset_from_images(&ds, &im, &lb, 0.3, 0.3, 0));
    float *feat = malloc(N * D * sizeof *feat), *lg = malloc(N * K * sizeof *lg);
    float *lg2 = malloc(N * K * sizeof *lg2), *re = malloc(N * K * sizeof *re);
    float *pr = malloc(N * K * sizeof *pr), *pr2 = malloc(N * K * sizeof *pr2);
    CHECK_OK(hy_train_features(&m, &ds, 2, feat, lg, pr));
    CHECK_OK(hy_train_predict(&m, &ds, 2, lg2, pr2));
    CHECK(memcmp(lg, lg2, N * K * sizeof *lg) == 0, "the same logits as hy_train_predict");
    CHECK(memcmp(pr, pr2, N * K * sizeof *pr) == 0, "the same probs as hy_train_predict");
    free(pr);
    free(pr2);
    hy_linear_forward(re, feat, m.p.head_w, m.p.head_b, N, D, K);
    check_close("head(features)", re, lg, N * K, 1e-6, 1e-6);
    CHECK(hy_xfmr_features(&m) != NULL, "after a forward");
    hy_tensor_release(&im);
    hy_tensor_release(&lb);
    free(feat);
    free(lg);
    free(lg2);
    free(re);
    hy_dataset_release(&ds);
    hy_xfmr_release(&m);
}

int main(void) {
    hy_rng_seed(&rng, check_seed());
    RUN(test_gradcheck_bce);
    RUN(test_gradcheck_tcp);
    RUN(test_inputs_and_targets);
    RUN(test_fit_learns_and_is_reproducible);
    RUN(test_fit_errors);
    RUN(test_features_are_the_head_input);
    return check_exit("test_vilu");
}
