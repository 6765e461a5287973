/* test_train.c: the training loop learns the synthetic task, same seed + threads gives
 * bitwise-identical parameters, and so do 1 and 2 threads (training and predictions), a non-finite loss stops with a message naming the step,
 * evaluate/predict agree with the forward, prediction's memory does not grow with depth, and
 * config errors. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "nn/train.h"

static hy_xfmr_config tiny_vit(float dropout) {
    hy_xfmr_config c;
    memset(&c, 0, sizeof c);
    c.kind = HY_XFMR_VIT;
    c.image_size = 28;
    c.channels = 1;
    c.patch = 7;
    c.d_model = 32;
    c.n_heads = 4;
    c.depth = 2;
    c.d_mlp = 64;
    c.n_classes = 10;
    c.attn_dropout = dropout;
    c.mlp_dropout = dropout;
    return c;
}

static hy_train_config train_cfg(size_t epochs, size_t batch) {
    hy_train_config t;
    memset(&t, 0, sizeof t);
    t.epochs = epochs;
    t.batch_size = batch;
    t.warmup_epochs = 0.5;
    t.grad_clip = 1.0;
    t.optim.learning_rate = 3e-3;
    t.optim.beta1 = 0.9;
    t.optim.beta2 = 0.999;
    t.optim.eps = 1e-8;
    t.optim.weight_decay = 0.05;
    t.schedule = HY_SCHED_COSINE;
    t.seed = 17;
    return t;
}

static void synth(hy_dataset *d, size_t n, uint64_t seed) {
    hy_tensor img, lab;
    CHECK_OK(hy_synth_images(&img, &lab, n, 28, 10, seed));
    CHECK_OK(hy_dataset_from_images(d, &img, &lab, 0.2, 0.3, 0));
    hy_tensor_release(&img);
    hy_tensor_release(&lab);
}

static void run_epochs(hy_trainer *t, size_t epochs, size_t chunk) {
    for (size_t e = 0; e < epochs; e++) {
        hy_fit_start_epoch(&t->fit, e);
        size_t ran;
        do CHECK_OK(hy_fit_run(&t->fit, chunk, &ran));
        while (ran == chunk);
    }
}

static void test_learns_synthetic_task(void) {
    hy_dataset tr, va;
    synth(&tr, 1200, 1);
    synth(&va, 300, 2);
    hy_xfmr_config c = tiny_vit(0);
    hy_xfmr m;
    CHECK_OK(hy_xfmr_new(&m, &c));
    hy_xfmr_init(&m, 5);
    double nll0, acc0, nll, acc;
    CHECK_OK(hy_train_evaluate(&m, &va, 100, &nll0, &acc0));
    hy_train_config tc = train_cfg(2, 50);
    hy_trainer t;
    CHECK_OK(hy_trainer_new(&t, &m, &tr, &tc, NULL));
    run_epochs(&t, 2, 7);
    CHECK(t.fit.prog.step == 48 && t.fit.prog.total_steps == 48, "steps %lld",
          (long long)t.fit.prog.step);
    CHECK(t.fit.prog.epoch_seen == 1200, "seen %zu", t.fit.prog.epoch_seen);
    hy_trainer_release(&t);
    CHECK_OK(hy_train_evaluate(&m, &va, 64, &nll, &acc));
    printf("synthetic task: val nll %.3f -> %.3f, acc %.3f -> %.3f\n", nll0, nll, acc0, acc);
    CHECK(acc > 0.8 && nll < nll0 - 1.0, "did not learn: acc %.3f nll %.3f (from %.3f)", acc,
          nll, nll0);
    /* predict agrees with evaluate: probs rows sum to 1, argmax accuracy equals acc */
    static float logits[300 * 10], probs[300 * 10];
    CHECK_OK(hy_train_predict(&m, &va, 128, logits, probs));
    size_t correct = 0;
    double worst = 0;
    for (size_t i = 0; i < 300; i++) {
        double s = 0;
        size_t best = 0;
        for (size_t k = 0; k < 10; k++) {
            s += (double)probs[i * 10 + k];
            if (logits[i * 10 + k] > logits[i * 10 + best]) best = k;
        }
        worst = fmax(worst, fabs(s - 1));
        correct += best == (size_t)va.labels[i];
    }
    CHECK(worst < 1e-5, "probs sum to 1 (worst %g)", worst);
    CHECK(fabs((double)correct / 300 - acc) < 1e-12, "predict vs evaluate accuracy");
    hy_xfmr_release(&m);
    hy_dataset_release(&tr);
    hy_dataset_release(&va);
}

/* A BERT-style model (post-LN, no final norm, tanh pooler, tanh GELU, eps 1e-12) trains too:
 * two epochs take the synthetic task's validation NLL well down */
static void test_post_ln_learns(void) {
    hy_dataset tr, va;
    synth(&tr, 1200, 1);
    synth(&va, 300, 2);
    hy_xfmr_config c = tiny_vit(0);
    c.norm = HY_NORM_POST;
    c.pooler = HY_POOLER_TANH;
    c.act = HY_ACT_GELU_TANH;
    c.ln_eps = 1e-12;
    hy_xfmr m;
    CHECK_OK(hy_xfmr_new(&m, &c));
    hy_xfmr_init(&m, 5);
    double nll0, acc0, nll, acc;
    CHECK_OK(hy_train_evaluate(&m, &va, 100, &nll0, &acc0));
    hy_train_config tc = train_cfg(2, 50);
    hy_trainer t;
    CHECK_OK(hy_trainer_new(&t, &m, &tr, &tc, NULL));
    run_epochs(&t, 2, 7);
    hy_trainer_release(&t);
    CHECK_OK(hy_train_evaluate(&m, &va, 64, &nll, &acc));
    printf("post-LN: val nll %.3f -> %.3f, acc %.3f -> %.3f\n", nll0, nll, acc0, acc);
    CHECK(acc > 0.6 && nll < nll0 - 0.5, "post-LN did not learn: acc %.3f nll %.3f (from %.3f)",
          acc, nll, nll0);
    hy_xfmr_release(&m);
    hy_dataset_release(&tr);
    hy_dataset_release(&va);
}

/* Trains a fresh model a few steps (augmentation and dropout on); returns its params (owned). */
static float *train_few(const hy_dataset *d, uint64_t seed, size_t chunk, size_t *n) {
    hy_xfmr_config c = tiny_vit(0.1f);
    hy_xfmr m;
    CHECK_OK(hy_xfmr_new(&m, &c));
    hy_xfmr_init(&m, 9);
    hy_train_config tc = train_cfg(2, 16);
    tc.seed = seed;
    hy_augment aug = {1, 2, 1};
    hy_trainer t;
    CHECK_OK(hy_trainer_new(&t, &m, d, &tc, &aug));
    run_epochs(&t, 2, chunk);
    hy_trainer_release(&t);
    float *p = hy_xmalloc(m.n_params * sizeof(float));
    memcpy(p, m.params, m.n_params * sizeof(float));
    *n = m.n_params;
    hy_xfmr_release(&m);
    return p;
}

static void test_bitwise_determinism(void) {
    hy_dataset d;
    synth(&d, 80, 3);
    size_t n1, n2, n3;
    float *a = train_few(&d, 21, 3, &n1);
    float *b = train_few(&d, 21, 100, &n2);   /* other chunking of the same steps */
    float *c = train_few(&d, 22, 3, &n3);
    CHECK(n1 == n2 && memcmp(a, b, n1 * sizeof(float)) == 0,
          "same seed and threads: parameters differ");
    CHECK(memcmp(a, c, n1 * sizeof(float)) != 0, "another seed gives the same parameters");
    hy_free(a);
    hy_free(b);
    hy_free(c);
    hy_dataset_release(&d);
}

/* A model big enough that OpenBLAS would thread its GEMMs (M N K above its threshold):
 * trains a few steps with nt threads, then predicts; params and logits returned (owned). */
static void train_predict_threads(const hy_dataset *d, int nt, float **params, size_t *n,
                                  float **logits) {
    hy_threads_init(nt);
    hy_xfmr_config c = tiny_vit(0.1f);
    c.d_model = 64;
    c.d_mlp = 256;
    hy_xfmr m;
    CHECK_OK(hy_xfmr_new(&m, &c));
    hy_xfmr_init(&m, 4);
    hy_train_config tc = train_cfg(1, 48);
    hy_trainer t;
    CHECK_OK(hy_trainer_new(&t, &m, d, &tc, NULL));
    run_epochs(&t, 1, 100);
    hy_trainer_release(&t);
    *params = hy_xmalloc(m.n_params * sizeof(float));
    memcpy(*params, m.params, m.n_params * sizeof(float));
    *n = m.n_params;
    *logits = hy_xmalloc(d->n * 10 * sizeof(float));
    float *probs = hy_xmalloc(d->n * 10 * sizeof(float));
    CHECK_OK(hy_train_predict(&m, d, 64, *logits, probs));
    hy_free(probs);
    hy_xfmr_release(&m);
}

/* Prediction's memory does not grow with depth: hy_train_predict on a fresh model allocates the
 * inference block alone (no training block), whose size (hy_xfmr_infer_bytes) is the same at
 * depth 2 and 6, and predicts bitwise what a model whose training block holds the batch does
 * (there inference runs in the training block's first slots); the fused block path and the
 * plain one (norm post, gelu_tanh) */
static void test_predict_memory(void) {
    hy_dataset d;
    synth(&d, 40, 9);
    size_t B = 16, K = 10;
    hy_xfmr_config c2 = tiny_vit(0.0f), c6 = tiny_vit(0.0f);
    c6.depth = 6;
    size_t b2 = hy_xfmr_infer_bytes(&c2, B), b6 = hy_xfmr_infer_bytes(&c6, B);
    CHECK(b2 == b6, "inference block grows with depth: %zu bytes at depth 2, %zu at depth 6", b2,
          b6);
    CHECK(b6 < hy_xfmr_acts_bytes(&c6, B) / 4, "inference block %zu bytes, training %zu", b6,
          hy_xfmr_acts_bytes(&c6, B));
    hy_xfmr_config cp = c6;
    cp.norm = HY_NORM_POST;
    cp.act = HY_ACT_GELU_TANH;
    const hy_xfmr_config *cs[2] = {&c6, &cp};
    for (size_t r = 0; r < 2; r++) {
        hy_xfmr m, t;
        CHECK_OK(hy_xfmr_new(&m, cs[r]));
        CHECK_OK(hy_xfmr_new(&t, cs[r]));
        hy_xfmr_init(&m, 4);
        hy_xfmr_init(&t, 4);
        float *lm = hy_xmalloc(d.n * K * sizeof(float)), *lt = hy_xmalloc(d.n * K * sizeof(float));
        CHECK_OK(hy_train_predict(&m, &d, B, lm, NULL));
        CHECK(m.acts == NULL && m.infer_acts != NULL && m.B_infer == B,
              "config %zu: predict allocated the training block (B_cap %zu, B_infer %zu)", r,
              m.B_cap, m.B_infer);
        CHECK_OK(hy_xfmr_alloc_acts(&t, B));
        CHECK_OK(hy_train_predict(&t, &d, B, lt, NULL));
        CHECK(t.infer_acts == NULL, "config %zu: an inference block beside a training block "
              "that holds the batch", r);
        CHECK(memcmp(lm, lt, d.n * K * sizeof(float)) == 0,
              "config %zu: the inference block's predictions differ from the training block's", r);
        hy_free(lm);
        hy_free(lt);
        hy_xfmr_release(&m);
        hy_xfmr_release(&t);
    }
    hy_dataset_release(&d);
}

static void test_threads_bitwise(void) {
    int threads0 = hy_threads();
    hy_dataset d;
    synth(&d, 192, 6);
    float *p1, *p2, *l1, *l2;
    size_t n1, n2;
    train_predict_threads(&d, 1, &p1, &n1, &l1);
    train_predict_threads(&d, 2, &p2, &n2, &l2);
    CHECK(n1 == n2 && memcmp(p1, p2, n1 * sizeof(float)) == 0,
          "parameters after training differ between 1 and 2 threads");
    CHECK(memcmp(l1, l2, d.n * 10 * sizeof(float)) == 0,
          "predicted logits differ between 1 and 2 threads");
    hy_free(p1);
    hy_free(p2);
    hy_free(l1);
    hy_free(l2);
    hy_dataset_release(&d);
    hy_threads_init(threads0);
}

static void test_non_finite_loss_names_step(void) {
    hy_dataset d;
    synth(&d, 40, 4);
    hy_xfmr_config c = tiny_vit(0);
    hy_xfmr m;
    CHECK_OK(hy_xfmr_new(&m, &c));
    hy_xfmr_init(&m, 1);
    hy_train_config tc = train_cfg(1, 10);
    hy_trainer t;
    CHECK_OK(hy_trainer_new(&t, &m, &d, &tc, NULL));
    size_t ran;
    CHECK_OK(hy_fit_run(&t.fit, 2, &ran));
    hy_param_view v;
    CHECK_OK(hy_xfmr_param(&m, "head.bias", &v));
    v.data[0] = INFINITY;
    float *before = hy_xmalloc(m.n_params * sizeof(float));
    memcpy(before, m.params, m.n_params * sizeof(float));
    CHECK_FAIL(hy_fit_run(&t.fit, 2, &ran), HY_EINVAL,
               "train: non-finite loss (nan) at step 3 (epoch 1, batch 3 of 4)");
    CHECK(ran == 0, "no step taken (%zu)", ran);
    CHECK(memcmp(before, m.params, m.n_params * sizeof(float)) == 0, "params untouched");
    hy_free(before);
    hy_trainer_release(&t);
    hy_xfmr_release(&m);
    hy_dataset_release(&d);
}

static void test_config_errors(void) {
    hy_dataset d;
    synth(&d, 20, 5);
    hy_xfmr_config c = tiny_vit(0);
    hy_xfmr m;
    CHECK_OK(hy_xfmr_new(&m, &c));
    hy_trainer t;
    hy_train_config tc = train_cfg(0, 10);
    CHECK_FAIL(hy_trainer_new(&t, &m, &d, &tc, NULL), HY_EINVAL,
               "train: epochs must be >= 1 (got 0)");
    tc = train_cfg(1, 10);
    tc.label_smoothing = 1.0;
    CHECK_FAIL(hy_trainer_new(&t, &m, &d, &tc, NULL), HY_EINVAL,
               "train: label_smoothing must be in [0, 1) (got 1)");
    tc = train_cfg(1, 10);
    tc.optim.learning_rate = 0;
    CHECK_FAIL(hy_trainer_new(&t, &m, &d, &tc, NULL), HY_EINVAL,
               "optim: learning_rate must be > 0 (got 0)");
    tc = train_cfg(1, 10);
    d.labels[7] = 12;
    CHECK_FAIL(hy_trainer_new(&t, &m, &d, &tc, NULL), HY_EINVAL,
               "train: the data: label 12 at row 7 (0-based) outside [0, 10) (model.n_classes 10)");
    d.labels[7] = 1;
    d.h = 20;
    CHECK_FAIL(hy_trainer_new(&t, &m, &d, &tc, NULL), HY_EINVAL,
               "train: images are 20x28 but the model expects 28x28 (model.image_size)");
    d.h = 28;
    hy_xfmr_release(&m);
    hy_dataset_release(&d);
}

int main(void) {
    RUN(test_learns_synthetic_task);
    RUN(test_post_ln_learns);
    RUN(test_bitwise_determinism);
    RUN(test_threads_bitwise);
    RUN(test_predict_memory);
    RUN(test_non_finite_loss_names_step);
    RUN(test_config_errors);
    return check_exit("test_train");
}
