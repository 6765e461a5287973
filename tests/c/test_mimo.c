/* test_mimo.c: MIMO (core/hydra/mimo.h).
 *   - hy_mimo_loss: the sum of the slots' mean cross-entropies; its dlogits against central
 *     finite differences (with and without label smoothing); a bad label names slot and row;
 *   - against tests/ref/mimo_torch.py (mimo_tiny.h5): logits of M stacked slot images (atol
 *     1e-4), the loss, every parameter gradient through hy_mimo_loss (rtol 1e-3, floor rtol x
 *     the tensor's largest |gradient|), and the test-time member / mean probabilities of
 *     hy_mimo_predict (same image in every slot);
 *   - the trainer's slot orders: rho 0 = each slot a permutation of the batch (different ones),
 *     rho 1 = the same order in every slot, batch_repetition r = every sample r times per slot;
 *     same seed = bitwise the same weights, another seed = different;
 *   - bad settings and mismatched models are one-line errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nn/ckpt.h"
#include "io/h5.h"
#include "nn/layers.h"
#include "hydra/mimo.h"

static void test_loss_gradcheck(void) {
    enum { B = 4, M = 3, K = 5 };
    float z[B * M * K], dz[B * M * K];
    int32_t lab[M * B];
    hy_rng r;
    hy_rng_seed(&r, check_seed());
    for (size_t i = 0; i < B * M * K; i++) z[i] = (float)(2.0 * hy_rng_normal(&r));
    for (size_t i = 0; i < M * B; i++) lab[i] = (int32_t)hy_rng_below(&r, K);
    const float eps[2] = {0.0f, 0.1f};
    for (int e = 0; e < 2; e++) {
        double loss = 0;
        CHECK_OK(hy_mimo_loss(z, lab, B, M, K, eps[e], &loss, dz));
        /* the loss is the sum of the slots' hy_ce_forward */
        double want = 0;
        for (size_t m = 0; m < M; m++) {
            float zm[B * K], pm[B * K];
            for (size_t b = 0; b < B; b++)
                memcpy(zm + b * K, z + b * M * K + m * K, sizeof(float) * K);
            double lm;
            hy_ce_forward(&lm, pm, zm, lab + m * B, B, K, eps[e]);
            want += lm;
        }
        CHECK(fabs(loss - want) <= 1e-12 * fabs(want), "loss %.15g vs sum %.15g", loss, want);
        double num[B * M * K];
        const float h = 1e-2f;
        for (size_t i = 0; i < B * M * K; i++) {
            float z0 = z[i];
            double lp, lm;
            z[i] = z0 + h;
            CHECK_OK(hy_mimo_loss(z, lab, B, M, K, eps[e], &lp, NULL));
            z[i] = z0 - h;
            CHECK_OK(hy_mimo_loss(z, lab, B, M, K, eps[e], &lm, NULL));
            z[i] = z0;
            num[i] = (lp - lm) / (2.0 * (double)h);
        }
        double an[B * M * K];
        for (size_t i = 0; i < B * M * K; i++) an[i] = dz[i];
        check_close_d(eps[e] > 0 ? "dlogits (smoothing 0.1) vs finite differences"
                                 : "dlogits vs finite differences", an, num, B * M * K, 1e-5,
                      1e-3);
    }
    lab[2 * B + 1] = K;
    double loss;
    CHECK_FAIL(hy_mimo_loss(z, lab, B, M, K, 0.0f, &loss, dz), HY_EINVAL,
               "mimo: label 5 of slot 3, row 2 out of range [0, 5)");
}

static double maxabs(const float *p, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)p[i]));
    return m;
}

static void test_torch_fixture(void) {
    const char *path = "tests/ref/mimo_tiny.h5";
    hy_h5 f = {0};
    CHECK_OK(hy_h5_open(&f, path));
    if (!f.open) return;
    double atol = 0, rtol = 0;
    int64_t M = 0;
    CHECK_OK(hy_h5_get_attr_f64(&f, "/", "atol", &atol));
    CHECK_OK(hy_h5_get_attr_f64(&f, "/", "rtol", &rtol));
    CHECK_OK(hy_h5_get_attr_i64(&f, "/", "members", &M));
    hy_xfmr_config c;
    CHECK_OK(hy_ckpt_read_config(&f, &c));
    hy_xfmr m = {0};
    CHECK_OK(hy_xfmr_new(&m, &c));
    hy_tensor t = {0}, img = {0}, lab = {0}, ref = {0};
    char name[128], what[160];
    for (size_t i = 0; i < m.n_tensors; i++) {
        const hy_param *p = &m.table[i];
        snprintf(name, sizeof name, "/param/%s", p->name);
        CHECK_OK(hy_h5_read_as(&f, name, HY_F32, &t));
        if (hy_tensor_numel(&t) == p->numel)
            memcpy(m.params + p->offset, t.data, p->numel * sizeof(float));
        hy_tensor_release(&t);
    }
    CHECK_OK(hy_h5_read_as(&f, "/in/images", HY_F32, &img));
    CHECK_OK(hy_h5_read_as(&f, "/in/labels", HY_I32, &lab));
    size_t B = (size_t)lab.shape[1], MK = c.n_classes, K = MK / (size_t)M;
    CHECK(lab.shape[0] == M, "labels [M, B]");
    CHECK_OK(hy_xfmr_alloc_acts(&m, B));
    float *logits = malloc(B * MK * sizeof *logits), *dlogits = malloc(B * MK * sizeof *dlogits);
    hy_batch in = {.images = img.data};
    CHECK_OK(hy_xfmr_forward(&m, &in, B, logits));
    CHECK_OK(hy_h5_read_as(&f, "/out/logits", HY_F32, &ref));
    check_close("mimo logits vs torch", logits, ref.data, B * MK, atol, 0.0);
    double md = 0;
    for (size_t i = 0; i < B * MK; i++)
        md = fmax(md, fabs((double)logits[i] - (double)((float *)ref.data)[i]));
    printf("  mimo_tiny.h5: max |logit - torch| %.2e (atol %.0e)\n", md, atol);
    hy_tensor_release(&ref);
    double loss = 0;
    CHECK_OK(hy_mimo_loss(logits, lab.data, B, (size_t)M, K, 0.0f, &loss, dlogits));
    CHECK_OK(hy_h5_read_as(&f, "/out/loss", HY_F64, &ref));
    double want = ((double *)ref.data)[0];
    CHECK(fabs(loss - want) <= 1e-5 * fabs(want), "mimo loss %.9g, torch %.9g", loss, want);
    hy_tensor_release(&ref);
    hy_xfmr_zero_grad(&m);
    CHECK_OK(hy_xfmr_backward(&m, dlogits));
    for (size_t i = 0; i < m.n_tensors; i++) {
        const hy_param *p = &m.table[i];
        snprintf(name, sizeof name, "/grad/%s", p->name);
        CHECK_OK(hy_h5_read_as(&f, name, HY_F32, &ref));
        if (hy_tensor_numel(&ref) == p->numel) {
            snprintf(what, sizeof what, "mimo grad %s", p->name);
            check_close(what, m.grads + p->offset, ref.data, p->numel,
                        rtol * maxabs(ref.data, p->numel), rtol);
        }
        hy_tensor_release(&ref);
    }
    /* test time: the same image in every slot */
    hy_tensor px = {0}, zl = {0};
    double mean = 0, std = 0;
    CHECK_OK(hy_h5_read_as(&f, "/test/pixels", HY_U8, &px));
    CHECK_OK(hy_h5_get_attr_f64(&f, "/test/pixels", "mean", &mean));
    CHECK_OK(hy_h5_get_attr_f64(&f, "/test/pixels", "std", &std));
    size_t N = (size_t)px.shape[0];
    int64_t ns = (int64_t)N;
    CHECK_OK(hy_tensor_alloc(&zl, HY_I32, 1, &ns));
    memset(zl.data, 0, N * sizeof(int32_t));
    hy_dataset ds = {0};
    CHECK_OK(hy_dataset_from_images(&ds, &px, &zl, mean, std, 0));
    float *mp = malloc((size_t)M * N * K * sizeof *mp), *pr = malloc(N * K * sizeof *pr);
    CHECK_OK(hy_mimo_predict(&m, (size_t)M, &ds, 4, NULL, pr, mp));   /* 2 batches: 4 + 2 */
    CHECK_OK(hy_h5_read_as(&f, "/test/member_probs", HY_F32, &ref));
    check_close("mimo member_probs vs torch", mp, ref.data, (size_t)M * N * K, atol, 0.0);
    hy_tensor_release(&ref);
    CHECK_OK(hy_h5_read_as(&f, "/test/probs", HY_F32, &ref));
    check_close("mimo probs vs torch", pr, ref.data, N * K, atol, 0.0);
    hy_tensor_release(&ref);
    free(mp);
    free(pr);
    hy_dataset_release(&ds);
    hy_tensor_release(&px);
    hy_tensor_release(&zl);
    free(logits);
    free(dlogits);
    hy_tensor_release(&img);
    hy_tensor_release(&lab);
    hy_xfmr_release(&m);
    hy_h5_close(&f);
}

/* a 3-slot model on 8x8 images of 4 classes */
static hy_xfmr_config mimo_cfg(size_t M) {
    hy_xfmr_config c = check_tiny_vit();
    c.channels = M;
    c.n_classes = M * 4;
    return c;
}

static void make_data(hy_dataset *ds, size_t n) {
    hy_tensor im = {0}, lb = {0};
    CHECK_OK(hy_synth_images(&im, &lb, n, 8, 4, 5));
    CHECK_OK(hy_dataset_from_images(ds, &im, &lb, 0.3, 0.35, 0));
    hy_tensor_release(&im);
    hy_tensor_release(&lb);
}

static hy_train_config train_cfg(uint64_t seed) {
    hy_train_config tc;
    memset(&tc, 0, sizeof tc);
    tc.epochs = 2;
    tc.batch_size = 8;
    tc.warmup_epochs = 0.5;
    tc.grad_clip = 1.0;
    tc.optim = (hy_adamw_config){3e-3, 0.9, 0.999, 1e-8, 0.05};
    tc.schedule = HY_SCHED_COSINE;
    tc.seed = seed;
    return tc;
}

static void isort(int64_t *x, size_t n) {
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && x[j - 1] > x[j]; j--) {
            int64_t s = x[j];
            x[j] = x[j - 1];
            x[j - 1] = s;
        }
}

static int sorted_equal(const int64_t *a, const int64_t *b, size_t n) {
    int64_t x[64], y[64];
    memcpy(x, a, n * sizeof *x);
    memcpy(y, b, n * sizeof *y);
    isort(x, n);
    isort(y, n);
    return memcmp(x, y, n * sizeof *x) == 0;
}

static void run_steps(hy_xfmr *m, const hy_dataset *ds, const hy_mimo_config *mc, uint64_t seed,
                      size_t steps, hy_mimo_trainer *keep) {
    hy_train_config tc = train_cfg(seed);
    hy_xfmr_init(m, 3);
    hy_mimo_trainer t;
    CHECK_OK(hy_mimo_trainer_new(&t, m, ds, &tc, mc, NULL));
    size_t ran = 0;
    CHECK_OK(hy_fit_run(&t.fit, steps, &ran));
    CHECK(ran == steps, "ran %zu of %zu steps", ran, steps);
    if (keep) *keep = t;
    else hy_mimo_trainer_release(&t);
}

static void test_trainer_slots(void) {
    enum { M = 3 };
    hy_xfmr_config c = mimo_cfg(M);
    hy_xfmr m = {0};
    CHECK_OK(hy_xfmr_new(&m, &c));
    hy_dataset ds = {0};
    make_data(&ds, 24);
    /* rho 0, r 1: each slot a permutation of the batch, the slots in different orders */
    hy_mimo_config mc = {M, 0.0, 1};
    hy_mimo_trainer t;
    run_steps(&m, &ds, &mc, 11, 1, &t);
    size_t R = t.R;
    CHECK(R == 8, "R %zu", R);
    int differ = 0;
    for (size_t s = 0; s < M; s++) {
        CHECK(sorted_equal(t.order, t.order + (1 + s) * R, R), "slot %zu is a permutation", s);
        if (s > 0) differ |= memcmp(t.order + R, t.order + (1 + s) * R, R * sizeof(int64_t)) != 0;
    }
    CHECK(differ, "slots shuffled independently");
    /* the slot images are the loader's images in the slot order */
    size_t HW = 64;
    CHECK(memcmp(t.images + (5 * M + 2) * HW,
                 t.fit.loader.images + (size_t)t.order[3 * R + 5] * HW,
                 HW * sizeof(float)) == 0, "slot 3 of row 6 holds its sample");
    CHECK(t.labels[2 * R + 5] == t.fit.loader.labels[t.order[3 * R + 5]], "slot label");
    double loss0 = t.fit.prog.loss;
    CHECK(isfinite(loss0) && loss0 > 0, "loss %g", loss0);
    hy_mimo_trainer_release(&t);
    /* rho 1: the same order in every slot */
    mc.input_repetition = 1.0;
    run_steps(&m, &ds, &mc, 11, 1, &t);
    for (size_t s = 1; s < M; s++)
        CHECK(memcmp(t.order + R, t.order + (1 + s) * R, R * sizeof(int64_t)) == 0,
              "rho 1: slot %zu as slot 1", s + 1);
    hy_mimo_trainer_release(&t);
    /* r 2: every sample twice per slot */
    mc.input_repetition = 0.0;
    mc.batch_repetition = 2;
    run_steps(&m, &ds, &mc, 11, 1, &t);
    CHECK(t.R == 16, "R %zu", t.R);
    for (size_t s = 0; s < M; s++) {
        int cnt[8] = {0};
        for (size_t i = 0; i < t.R; i++) cnt[t.order[(1 + s) * t.R + i]]++;
        for (size_t k = 0; k < 8; k++) CHECK(cnt[k] == 2, "slot %zu sample %zu x%d", s, k, cnt[k]);
    }
    hy_mimo_trainer_release(&t);
    /* determinism: same seed bitwise, another seed different */
    mc.batch_repetition = 1;
    float *a = malloc(m.n_params * sizeof *a);
    run_steps(&m, &ds, &mc, 11, 3, NULL);
    memcpy(a, m.params, m.n_params * sizeof *a);
    run_steps(&m, &ds, &mc, 11, 3, NULL);
    CHECK(memcmp(a, m.params, m.n_params * sizeof *a) == 0, "same seed: same weights");
    run_steps(&m, &ds, &mc, 12, 3, NULL);
    CHECK(memcmp(a, m.params, m.n_params * sizeof *a) != 0, "another seed: other weights");
    free(a);
    double nll = 0, acc = 0;
    CHECK_OK(hy_mimo_evaluate(&m, M, &ds, 10, &nll, &acc));
    CHECK(isfinite(nll) && nll > 0 && acc >= 0 && acc <= 1, "evaluate nll %g acc %g", nll, acc);
    hy_dataset_release(&ds);
    hy_xfmr_release(&m);
}

static void test_errors(void) {
    hy_xfmr_config c = mimo_cfg(3);
    hy_xfmr m = {0};
    CHECK_OK(hy_xfmr_new(&m, &c));
    hy_dataset ds = {0};
    make_data(&ds, 16);
    hy_train_config tc = train_cfg(1);
    hy_mimo_trainer t;
    hy_mimo_config mc = {3, 1.5, 1};
    CHECK_FAIL(hy_mimo_trainer_new(&t, &m, &ds, &tc, &mc, NULL), HY_EINVAL,
               "mimo: mimo.input_repetition must be in [0, 1] (got 1.5)");
    mc = (hy_mimo_config){3, 0.0, 0};
    CHECK_FAIL(hy_mimo_trainer_new(&t, &m, &ds, &tc, &mc, NULL), HY_EINVAL,
               "mimo: mimo.batch_repetition must be >= 1 (got 0)");
    mc = (hy_mimo_config){2, 0.0, 1};
    CHECK_FAIL(hy_mimo_trainer_new(&t, &m, &ds, &tc, &mc, NULL), HY_EINVAL,
               "mimo: the model has 3 input channels, expected mimo.members x 1 = 2 (one per "
               "slot)");
    CHECK_FAIL(hy_mimo_check(&m, 5, &ds, 0), HY_EINVAL,
               "mimo: the model has 3 input channels, expected mimo.members x 1 = 5 (one per "
               "slot)");
    hy_xfmr_release(&m);
    c.n_classes = 10;
    CHECK_OK(hy_xfmr_new(&m, &c));
    CHECK_FAIL(hy_mimo_check(&m, 3, &ds, 0), HY_EINVAL,
               "mimo: the model's 10 outputs are not mimo.members (3) heads");
    hy_xfmr_release(&m);
    c.n_classes = 6;   /* 2 classes per head, the data has 4 */
    CHECK_OK(hy_xfmr_new(&m, &c));
    CHECK_FAIL_HAS(hy_mimo_check(&m, 3, &ds, 1), HY_EINVAL, "outside [0, 2)");
    hy_xfmr_release(&m);
    hy_dataset_release(&ds);
}

int main(void) {
    RUN(test_loss_gradcheck);
    RUN(test_torch_fixture);
    RUN(test_trainer_slots);
    RUN(test_errors);
    return check_exit("test_mimo");
}
