/* test_xfmr.c: the model API: config checks (exact messages), the parameter table (timm names,
 * shapes, decay flags, vit-fm size), init statistics, forward against the double twin
 * (tests/c/ref_xfmr.c) for vit and padded text, batch validation, padding invariance, loss,
 * bitwise determinism of forward + backward with 1 and 2 threads, and hy_xfmr_infer against
 * hy_xfmr_forward. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/base.h"
#include "check.h"
#include "ref_engine.h"
#include "ref_xfmr.h"
#include "tensor/rng.h"
#include "nn/xfmr.h"
#ifdef _OPENMP
#include <omp.h>
#endif

static const struct { const char *op; double atol, rtol; } TOL[] = {
    {"model logits vs double twin", 2e-5, 1e-4},
    {"text logits, shorter batch vs padded", 2e-6, 1e-5},
};

static hy_rng rng;

static const hy_xfmr_config VIT_FM = {.kind = HY_XFMR_VIT, .image_size = 28, .channels = 1,
                                      .patch = 7, .d_model = 128, .n_heads = 8, .depth = 6,
                                      .d_mlp = 512, .n_classes = 10};
static const hy_xfmr_config VIT_TINY = {.kind = HY_XFMR_VIT, .image_size = 28, .channels = 1,
                                        .patch = 7, .d_model = 64, .n_heads = 8, .depth = 4,
                                        .d_mlp = 256, .n_classes = 10};
static const hy_xfmr_config TEXT = {.kind = HY_XFMR_TEXT, .vocab_size = 40, .max_len = 16,
                                    .d_model = 32, .n_heads = 4, .depth = 2, .d_mlp = 64,
                                    .n_classes = 3};

static float *rand_vec(size_t n, float scale) {
    float *p = malloc((n + 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = scale * (2.0f * hy_rng_uniform(&rng) - 1.0f);
    return p;
}

static void test_config_errors(void) {
    hy_xfmr_config c = VIT_TINY;
    c.n_heads = 6;
    CHECK_FAIL(hy_xfmr_config_check(&c), HY_ECONFIG,
               "xfmr: d_model must be divisible by n_heads (d_model 64, n_heads 6)");
    c = VIT_TINY;
    c.patch = 5;
    CHECK_FAIL(hy_xfmr_config_check(&c), HY_ECONFIG,
               "xfmr: image_size must be divisible by patch (image_size 28, patch 5)");
    c = VIT_TINY;
    c.depth = 0;
    CHECK_FAIL(hy_xfmr_config_check(&c), HY_ECONFIG, "xfmr: depth must be > 0 (got 0)");
    c = TEXT;
    c.vocab_size = 2;
    CHECK_FAIL(hy_xfmr_config_check(&c), HY_ECONFIG,
               "xfmr: vocab_size must be > 2 (PAD, UNK, CLS are reserved; got 2)");
    c = TEXT;
    c.max_len = 300;
    CHECK_FAIL(hy_xfmr_config_check(&c), HY_ECONFIG,
               "xfmr: sequence length 301 (with CLS) exceeds 257");
    c = TEXT;
    c.mlp_dropout = 1.0f;
    CHECK_FAIL(hy_xfmr_config_check(&c), HY_ECONFIG, "xfmr: mlp_dropout must be in [0, 1) (got 1)");
    hy_xfmr m;
    CHECK_FAIL(hy_xfmr_new(&m, &c), HY_ECONFIG, "xfmr: mlp_dropout must be in [0, 1) (got 1)");
    CHECK(m.params == NULL && m.table == NULL, "failed new leaves the model zeroed");
    hy_xfmr_release(&m);
}

static void test_table(void) {
    hy_xfmr m;
    CHECK_OK(hy_xfmr_new(&m, &VIT_FM));
    CHECK(m.T == 17 && m.HS == 16, "T %zu HS %zu", m.T, m.HS);
    CHECK(m.n_tensors == 4 + 6 * 12 + 4, "%zu tensors", m.n_tensors);
    size_t total = 0;
    for (size_t i = 0; i < m.n_tensors; i++) {
        total += m.table[i].numel;
        CHECK(m.table[i].offset % 16 == 0, "%s offset not 64-byte aligned", m.table[i].name);
    }
    /* DESIGN §2: vit-fm has 1.20 M parameters */
    CHECK(total > 1190000 && total < 1210000, "vit-fm has %zu parameters", total);
    hy_param_view v;
    CHECK_OK(hy_xfmr_param(&m, "blocks.5.attn.qkv.weight", &v));
    CHECK(v.info->ndim == 2 && v.info->shape[0] == 384 && v.info->shape[1] == 128 && v.info->decay,
          "qkv.weight shape/decay");
    CHECK_OK(hy_xfmr_param(&m, "patch_embed.proj.weight", &v));
    CHECK(v.info->ndim == 4 && v.info->shape[0] == 128 && v.info->shape[1] == 1 &&
          v.info->shape[2] == 7 && v.info->shape[3] == 7, "patch weight shape");
    CHECK_OK(hy_xfmr_param(&m, "pos_embed", &v));
    CHECK(v.info->shape[1] == 17 && !v.info->decay, "pos_embed");
    CHECK_OK(hy_xfmr_param(&m, "blocks.0.norm1.weight", &v));
    CHECK(!v.info->decay, "norms are not decayed");
    CHECK_OK(hy_xfmr_param(&m, "head.bias", &v));
    CHECK(!v.info->decay && v.info->shape[0] == 10, "head.bias");
    CHECK_FAIL(hy_xfmr_param(&m, "blocks.6.norm1.weight", &v), HY_EINVAL,
               "xfmr: no parameter named 'blocks.6.norm1.weight'");
    /* init: LN weights 1, biases 0, weights ~ N(0, 0.02) truncated at 2 std */
    hy_xfmr_init(&m, 7);
    CHECK_OK(hy_xfmr_param(&m, "blocks.2.norm2.weight", &v));
    for (size_t i = 0; i < 128; i++) CHECK(v.data[i] == 1.0f, "LN weight init");
    CHECK_OK(hy_xfmr_param(&m, "blocks.2.mlp.fc1.bias", &v));
    for (size_t i = 0; i < 512; i++) CHECK(v.data[i] == 0.0f, "bias init");
    CHECK_OK(hy_xfmr_param(&m, "blocks.2.mlp.fc1.weight", &v));
    double s = 0, s2 = 0, mx = 0;
    for (size_t i = 0; i < v.info->numel; i++) {
        s += (double)v.data[i];
        s2 += (double)v.data[i] * (double)v.data[i];
        mx = fmax(mx, fabs((double)v.data[i]));
    }
    double sd = sqrt(s2 / (double)v.info->numel);
    CHECK(fabs(sd - 0.0176) < 0.001 && mx <= 0.04 + 1e-7 && fabs(s) / (double)v.info->numel < 1e-3,
          "trunc-normal(0.02, 2 sd) init: sd %.4f (want 0.0176), max %.4f", sd, mx);
    for (size_t i = 0; i < 48; i++) CHECK(m.gates[i] == 1.0f, "gates start at 1");
    hy_xfmr_release(&m);
    hy_xfmr_release(&m);   /* idempotent */
}

static void perturb(hy_xfmr *m) {
    for (size_t i = 0; i < m->n_params; i++)
        m->params[i] += 0.1f * (2.0f * hy_rng_uniform(&rng) - 1.0f);
}

static void test_forward_vs_twin(void) {
    hy_xfmr m;
    size_t B = 3;
    CHECK_OK(hy_xfmr_new(&m, &VIT_TINY));
    CHECK_OK(hy_xfmr_alloc_acts(&m, 8));
    hy_xfmr_init(&m, 1);
    perturb(&m);
    hy_xfmr_set_gate(&m, 1, 3, 0.0f);
    float *img = rand_vec(B * 28 * 28, 2), logits[30], wf[30];
    double want[30];
    hy_batch in = {.images = img};
    CHECK_OK(hy_xfmr_forward(&m, &in, B, logits));
    ref_xfmr_forward(&m, &in, B, false, 0, want);
    ref_to_float(wf, want, B * 10);
    check_close("vit-fm-tiny logits", logits, wf, B * 10, TOL[0].atol, TOL[0].rtol);
    free(img);
    hy_xfmr_release(&m);

    CHECK_OK(hy_xfmr_new(&m, &TEXT));
    CHECK_OK(hy_xfmr_alloc_acts(&m, 4));
    hy_xfmr_init(&m, 2);
    perturb(&m);
    int32_t ids[4 * 9], lens[4] = {9, 5, 0, 2};
    for (size_t i = 0; i < 36; i++) ids[i] = (int32_t)hy_rng_below(&rng, 40);
    hy_batch tin = {.ids = ids, .lengths = lens, .len = 9};
    CHECK_OK(hy_xfmr_forward(&m, &tin, 4, logits));
    ref_xfmr_forward(&m, &tin, 4, false, 0, want);
    ref_to_float(wf, want, 12);
    check_close("text logits", logits, wf, 12, TOL[0].atol, TOL[0].rtol);
    /* padded positions do not matter: change every id past its length */
    float l2[12];
    for (size_t b = 0; b < 4; b++)
        for (size_t t = (size_t)lens[b]; t < 9; t++) ids[b * 9 + t] = (int32_t)((t * 7 + b) % 40);
    CHECK_OK(hy_xfmr_forward(&m, &tin, 4, l2));
    check_close("text logits ignore padding", l2, logits, 12, 0, 0);
    /* a shorter batch (len 5) gives the same logits for rows that fit */
    int32_t ids5[2 * 5], lens5[2] = {5, 2};
    memcpy(ids5, ids + 9, 5 * sizeof *ids5);
    memcpy(ids5 + 5, ids + 27, 5 * sizeof *ids5);
    hy_batch t5 = {.ids = ids5, .lengths = lens5, .len = 5};
    CHECK_OK(hy_xfmr_forward(&m, &t5, 2, l2));
    float want5[6];
    memcpy(want5, logits + 3, 3 * sizeof(float));
    memcpy(want5 + 3, logits + 9, 3 * sizeof(float));
    check_close("text len 5 vs len 9 padded", l2, want5, 6, TOL[1].atol, TOL[1].rtol);
    hy_xfmr_release(&m);
}

/* hy_xfmr_infer (layers reuse one slot of activations) gives hy_xfmr_forward's logits, features
 * and hidden bit for bit, for every depth's slot pattern, for padded text and with dropout on
 * (a forward of another batch in between, so that no slot holds the answer already); a backward
 * after it fails, and a forward after it makes backward work again */
static void infer_vs_forward(const hy_xfmr_config *c, size_t B, const hy_batch *in,
                             const hy_batch *other, bool drop) {
    hy_xfmr m;
    CHECK_OK(hy_xfmr_new(&m, c));
    CHECK_OK(hy_xfmr_alloc_acts(&m, B));
    hy_xfmr_init(&m, 3);
    perturb(&m);
    size_t K = c->n_classes, D = c->d_model, T = c->kind == HY_XFMR_VIT ? m.T : 1 + in->len;
    float *lf = malloc(B * K * sizeof *lf), *li = malloc(B * K * sizeof *li);
    float *ff = malloc(B * D * sizeof *ff), *hf = malloc(B * T * D * sizeof *hf);
    if (drop) hy_xfmr_set_dropout(&m, true, 17);
    CHECK_OK(hy_xfmr_forward(&m, in, B, lf));
    memcpy(ff, hy_xfmr_features(&m), B * D * sizeof *ff);
    memcpy(hf, hy_xfmr_hidden(&m), B * T * D * sizeof *hf);
    CHECK_OK(hy_xfmr_forward(&m, other, B, li));
    if (drop) hy_xfmr_set_dropout(&m, true, 17);   /* the same masks again */
    CHECK_OK(hy_xfmr_infer(&m, in, B, li));
    char what[64];
    snprintf(what, sizeof what, "infer logits (depth %zu%s)", c->depth, drop ? ", dropout" : "");
    check_close(what, li, lf, B * K, 0, 0);
    check_close("infer features", hy_xfmr_features(&m), ff, B * D, 0, 0);
    check_close("infer hidden", hy_xfmr_hidden(&m), hf, B * T * D, 0, 0);
    {   /* the same in a model with the inference block alone (hy_xfmr_alloc_infer) */
        hy_xfmr mi;
        CHECK_OK(hy_xfmr_new(&mi, c));
        CHECK_OK(hy_xfmr_alloc_infer(&mi, B));
        memcpy(mi.params, m.params, m.n_params * sizeof(float));
        CHECK_FAIL(hy_xfmr_forward(&mi, in, B, li), HY_EINVAL,
                   "xfmr: hy_xfmr_forward needs the training activations (call "
                   "hy_xfmr_alloc_acts; the model has only hy_xfmr_alloc_infer's)");
        CHECK_OK(hy_xfmr_infer(&mi, other, B, li));
        if (drop) hy_xfmr_set_dropout(&mi, true, 17);
        CHECK_OK(hy_xfmr_infer(&mi, in, B, li));
        snprintf(what, sizeof what, "inference block logits (depth %zu%s)", c->depth,
                 drop ? ", dropout" : "");
        check_close(what, li, lf, B * K, 0, 0);
        check_close("inference block features", hy_xfmr_features(&mi), ff, B * D, 0, 0);
        check_close("inference block hidden", hy_xfmr_hidden(&mi), hf, B * T * D, 0, 0);
        hy_xfmr_release(&mi);
    }
    CHECK_FAIL(hy_xfmr_backward(&m, li), HY_EINVAL,
               "xfmr: backward after hy_xfmr_infer, which keeps no activations (run "
               "hy_xfmr_forward first)");
    CHECK_OK(hy_xfmr_forward(&m, in, B, lf));
    CHECK_OK(hy_xfmr_backward(&m, lf));
    free(lf);
    free(li);
    free(ff);
    free(hf);
    hy_xfmr_release(&m);
}

static void test_infer(void) {
    size_t B = 3;
    float *img = rand_vec(B * 28 * 28, 2), *img2 = rand_vec(B * 28 * 28, 2);
    hy_batch in = {.images = img}, in2 = {.images = img2};
    for (size_t depth = 1; depth <= 4; depth++) {
        hy_xfmr_config c = VIT_TINY;
        c.depth = depth;
        c.attn_dropout = c.mlp_dropout = 0.1f;
        infer_vs_forward(&c, B, &in, &in2, false);
        if (depth == 3) infer_vs_forward(&c, B, &in, &in2, true);
    }
    free(img);
    free(img2);
    int32_t ids[4 * 9], ids2[4 * 9], lens[4] = {9, 5, 0, 2};
    for (size_t i = 0; i < 36; i++) ids[i] = (int32_t)hy_rng_below(&rng, 40);
    for (size_t i = 0; i < 36; i++) ids2[i] = (int32_t)hy_rng_below(&rng, 40);
    hy_batch tin = {.ids = ids, .lengths = lens, .len = 9};
    hy_batch tin2 = {.ids = ids2, .lengths = lens, .len = 9};
    infer_vs_forward(&TEXT, 4, &tin, &tin2, false);
    hy_xfmr_config tpost = TEXT;   /* the plain block path, every slot pattern of depth 3 */
    tpost.depth = 3;
    tpost.norm = HY_NORM_POST;
    tpost.act = HY_ACT_GELU_TANH;
    tpost.pooler = HY_POOLER_TANH;
    tpost.attn_dropout = tpost.mlp_dropout = 0.1f;
    infer_vs_forward(&tpost, 4, &tin, &tin2, false);
    infer_vs_forward(&tpost, 4, &tin, &tin2, true);
    /* batches whose products have whole-row tiles: the inference MLP runs tile by tile in
     * per-thread scratch (layers.h hy_mlp_infer), the LayerNorms in the products' epilogues */
    size_t BB = 64;
    float *bi = rand_vec(BB * 28 * 28, 2), *bi2 = rand_vec(BB * 28 * 28, 2);
    hy_batch bin = {.images = bi}, bin2 = {.images = bi2};
    hy_xfmr_config c3 = VIT_TINY;
    c3.depth = 3;
    infer_vs_forward(&c3, BB, &bin, &bin2, false);
    free(bi);
    free(bi2);
    size_t BT = 256;
    int32_t *tids = malloc(BT * 9 * sizeof *tids), *tids2 = malloc(BT * 9 * sizeof *tids2);
    int32_t *tl = malloc(BT * sizeof *tl);
    for (size_t i = 0; i < BT * 9; i++) tids[i] = (int32_t)hy_rng_below(&rng, 40);
    for (size_t i = 0; i < BT * 9; i++) tids2[i] = (int32_t)hy_rng_below(&rng, 40);
    for (size_t b = 0; b < BT; b++) tl[b] = (int32_t)hy_rng_below(&rng, 10);
    hy_batch btin = {.ids = tids, .lengths = tl, .len = 9};
    hy_batch btin2 = {.ids = tids2, .lengths = tl, .len = 9};
    infer_vs_forward(&TEXT, BT, &btin, &btin2, false);
    free(tids);
    free(tids2);
    free(tl);
}

static void test_batch_errors(void) {
    hy_xfmr m;
    float logits[12] = {0};
    CHECK_OK(hy_xfmr_new(&m, &TEXT));
    int32_t ids[8] = {3, 4, 5, 0, 6, 40, 0, 0}, lens[2] = {3, 2};
    hy_batch in = {.ids = ids, .lengths = lens, .len = 4};
    CHECK_FAIL(hy_xfmr_forward(&m, &in, 2, logits), HY_EINVAL,
               "xfmr: no activations allocated (call hy_xfmr_alloc_acts)");
    CHECK_FAIL(hy_xfmr_backward(&m, logits), HY_EINVAL,
               "xfmr: backward without a forward (run hy_xfmr_forward first)");
    CHECK_FAIL(hy_xfmr_alloc_acts(&m, 0), HY_EINVAL, "xfmr: activation batch size must be > 0");
    CHECK_OK(hy_xfmr_alloc_acts(&m, 2));
    CHECK_FAIL(hy_xfmr_forward(&m, &in, 3, logits), HY_EINVAL,
               "xfmr: batch size 3 out of range [1, 2] (the activation capacity)");
    CHECK_FAIL(hy_xfmr_forward(&m, &in, 2, logits), HY_EINVAL,
               "xfmr: token id 40 out of range [0, 40) (row 2, position 2)");
    ids[5] = 1;
    lens[1] = 5;
    CHECK_FAIL(hy_xfmr_forward(&m, &in, 2, logits), HY_EINVAL,
               "xfmr: length 5 of row 2 out of range [0, 4]");
    lens[1] = 2;
    in.len = 17;
    CHECK_FAIL(hy_xfmr_forward(&m, &in, 2, logits), HY_EINVAL,
               "xfmr: text batch length 17 out of range [1, 16] (max_len)");
    for (size_t i = 0; i < 12; i++) CHECK(logits[i] == 0.0f, "logits untouched on failure");
    in.len = 4;
    CHECK_OK(hy_xfmr_forward(&m, &in, 2, logits));
    int32_t labels[2] = {1, 3};
    double loss;
    float dl[6];
    CHECK_FAIL(hy_xfmr_loss(&m, logits, labels, 2, 0.0f, &loss, dl), HY_EINVAL,
               "xfmr: label 3 of row 2 out of range [0, 3)");
    labels[1] = 2;
    CHECK_OK(hy_xfmr_loss(&m, logits, labels, 2, 0.1f, &loss, dl));
    double want = ref_ce(NULL, logits, labels, 2, 3, 0.1);
    CHECK(fabs(loss - want) < 1e-6, "loss %.9g want %.9g", loss, want);
    double noloss;
    CHECK_OK(hy_xfmr_loss(&m, logits, labels, 2, 0.1f, &noloss, NULL));
    CHECK(noloss == loss, "loss without dlogits");
    double sum = 0;
    for (size_t i = 0; i < 6; i++) sum += (double)dl[i];
    CHECK(fabs(sum) < 1e-6, "dlogits rows sum to 0 (got %g)", sum);
    hy_xfmr_release(&m);
}

/* forward + backward twice with 1 thread and twice with 2: all four bitwise identical */
static void run_step(const hy_xfmr_config *c, int threads, float *logits, float *grads,
                     float *dgates, size_t *np) {
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    hy_rng r;
    hy_rng_seed(&r, 99);
    hy_xfmr m;
    size_t B = 6;
    CHECK_OK(hy_xfmr_new(&m, c));
    CHECK_OK(hy_xfmr_alloc_acts(&m, B));
    hy_xfmr_init(&m, 5);
    hy_xfmr_set_gate(&m, 0, 2, 0.0f);
    hy_xfmr_set_dropout(&m, true, 11);
    float *img = malloc(B * 28 * 28 * sizeof *img);
    for (size_t i = 0; i < B * 28 * 28; i++) img[i] = hy_rng_uniform(&r);
    hy_batch in = {.images = img};
    int32_t labels[6] = {0, 1, 2, 3, 4, 5};
    float dl[60];
    double loss;
    CHECK_OK(hy_xfmr_forward(&m, &in, B, logits));
    CHECK_OK(hy_xfmr_loss(&m, logits, labels, B, 0.0f, &loss, dl));
    CHECK_OK(hy_xfmr_backward(&m, dl));
    memcpy(grads, m.grads, m.n_params * sizeof(float));
    memcpy(dgates, m.dgates, c->depth * c->n_heads * sizeof(float));
    *np = m.n_params;
    free(img);
    hy_xfmr_release(&m);
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
}

static void test_determinism_threads(void) {
    hy_xfmr_config c = VIT_TINY;
    c.attn_dropout = 0.1f;
    c.mlp_dropout = 0.1f;
    hy_xfmr probe;
    CHECK_OK(hy_xfmr_new(&probe, &c));
    size_t np = probe.n_params;
    hy_xfmr_release(&probe);
    float *g[4], lg[4][60], dg[4][32];
    static const int threads[4] = {1, 1, 2, 2};
    for (int r = 0; r < 4; r++) {
        g[r] = malloc(np * sizeof(float));
        run_step(&c, threads[r], lg[r], g[r], dg[r], &np);
    }
    for (int r = 1; r < 4; r++) {
        CHECK(memcmp(lg[r], lg[0], sizeof lg[0]) == 0, "logits differ (run %d, %d threads)", r,
              threads[r]);
        CHECK(memcmp(g[r], g[0], np * sizeof(float)) == 0, "grads differ (run %d, %d threads)",
              r, threads[r]);
        CHECK(memcmp(dg[r], dg[0], sizeof dg[0]) == 0, "dgates differ (run %d)", r);
    }
    for (int r = 0; r < 4; r++) free(g[r]);
}

/* one pass of c at batch B with `threads` OpenMP threads: the logits of hy_xfmr_infer and of
 * hy_xfmr_forward, and the gradients of a backward after the latter */
static void small_pass(const hy_xfmr_config *c, const hy_batch *in, size_t B, int threads,
                       float *inf, float *fwd, float *grads) {
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    hy_xfmr m;
    CHECK_OK(hy_xfmr_new(&m, c));
    CHECK_OK(hy_xfmr_alloc_acts(&m, B));
    hy_xfmr_init(&m, 5);
    hy_xfmr_set_gate(&m, 0, 1, 0.0f);
    CHECK_OK(hy_xfmr_infer(&m, in, B, inf));
    CHECK_OK(hy_xfmr_forward(&m, in, B, fwd));
    int32_t labels[4] = {1, 0, 2, 1};
    float dl[4 * 10];
    double loss;
    CHECK_OK(hy_xfmr_loss(&m, fwd, labels, B, 0.0f, &loss, dl));
    CHECK_OK(hy_xfmr_backward(&m, dl));
    memcpy(grads, m.grads, m.n_params * sizeof(float));
    hy_xfmr_release(&m);
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
}

/* small passes (batch 1-2 of vit-fm, padded text) run in a team at 2 threads (team.h): logits
 * and a backward after them bitwise those of 1 thread, and infer the same as forward */
static void test_small_pass_team(void) {
    hy_xfmr_config vit = VIT_FM, txt = TEXT;
    vit.depth = 2;
    txt.d_model = 128, txt.n_heads = 8, txt.d_mlp = 512;
    float *img = rand_vec(2 * 28 * 28, 2);
    int32_t ids[2 * 12], lens[2] = {12, 7};
    for (size_t i = 0; i < 24; i++) ids[i] = (int32_t)hy_rng_below(&rng, 40);
    hy_batch vin = {.images = img}, tin = {.ids = ids, .lengths = lens, .len = 12};
    const struct { const hy_xfmr_config *c; const hy_batch *in; size_t B; } runs[] = {
        {&vit, &vin, 1}, {&vit, &vin, 2}, {&txt, &tin, 1}, {&txt, &tin, 2}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        hy_xfmr probe;
        CHECK_OK(hy_xfmr_new(&probe, runs[r].c));
        size_t np = probe.n_params, K = runs[r].c->n_classes, B = runs[r].B;
        hy_xfmr_release(&probe);
        float inf[2][20], fwd[2][20], *g[2] = {malloc(np * sizeof(float)), malloc(np * sizeof(float))};
        for (int t = 0; t < 2; t++) small_pass(runs[r].c, runs[r].in, B, t + 1, inf[t], fwd[t], g[t]);
        CHECK(memcmp(inf[0], inf[1], B * K * sizeof(float)) == 0,
              "run %zu: infer logits differ between 1 and 2 threads", r);
        CHECK(memcmp(fwd[0], fwd[1], B * K * sizeof(float)) == 0,
              "run %zu: forward logits differ between 1 and 2 threads", r);
        CHECK(memcmp(inf[1], fwd[1], B * K * sizeof(float)) == 0,
              "run %zu: infer and forward differ at 2 threads", r);
        CHECK(memcmp(g[0], g[1], np * sizeof(float)) == 0,
              "run %zu: gradients differ between 1 and 2 threads", r);
        free(g[0]);
        free(g[1]);
    }
    free(img);
}

/* Samples longer than a row tile (T = 197 rows against hy_gemm's 128-row tiles, as ViT-S/16 at
 * 224): with 2 threads the single model's block (hy_block_forward) gives each thread a run of
 * tiles, and the sample straddling the boundary between two threads is attended after the
 * region; at B = 6, 10, 14 it reaches past the tile that holds the boundary into the next one,
 * which must wait for it too. B = 8 and 16 straddle within one tile. Training forward (logits
 * and gradients) and inference at 2 threads bitwise equal to 1 thread's (the plain path). */
static void test_long_samples_threads(void) {
    hy_xfmr_config c = {.kind = HY_XFMR_VIT, .image_size = 28, .channels = 1, .patch = 2,
                        .d_model = 64, .n_heads = 4, .depth = 2, .d_mlp = 128, .n_classes = 3};
    static const size_t batches[] = {6, 8, 10, 14, 16};
    for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
        size_t B = batches[bi];
        float *img = rand_vec(B * 28 * 28, 1);
        hy_batch in = {.images = img};
        float lf[2][16 * 3], li[2][16 * 3], *g[2] = {NULL, NULL};
        size_t np = 0;
        int32_t labels[16];
        for (size_t i = 0; i < B; i++) labels[i] = (int32_t)(i % 3);
        hy_rng r0 = rng;   /* the same perturbation in both passes */
        for (int t = 0; t < 2; t++) {
            rng = r0;
#ifdef _OPENMP
            omp_set_num_threads(t + 1);
#endif
            hy_xfmr m;
            CHECK_OK(hy_xfmr_new(&m, &c));
            CHECK(m.T == 197, "T %zu", m.T);
            CHECK_OK(hy_xfmr_alloc_acts(&m, B));
            hy_xfmr_init(&m, 5);
            perturb(&m);
            float dl[16 * 3];
            double loss;
            CHECK_OK(hy_xfmr_forward(&m, &in, B, lf[t]));
            CHECK_OK(hy_xfmr_loss(&m, lf[t], labels, B, 0.0f, &loss, dl));
            CHECK_OK(hy_xfmr_backward(&m, dl));
            np = m.n_params;
            g[t] = malloc(np * sizeof(float));
            memcpy(g[t], m.grads, np * sizeof(float));
            CHECK_OK(hy_xfmr_infer(&m, &in, B, li[t]));
            hy_xfmr_release(&m);
        }
#ifdef _OPENMP
        omp_set_num_threads(1);
#endif
        CHECK(memcmp(lf[0], lf[1], B * 3 * sizeof(float)) == 0,
              "B %zu: forward logits differ between 1 and 2 threads", B);
        CHECK(memcmp(g[0], g[1], np * sizeof(float)) == 0,
              "B %zu: gradients differ between 1 and 2 threads", B);
        CHECK(memcmp(li[0], li[1], B * 3 * sizeof(float)) == 0,
              "B %zu: infer logits differ between 1 and 2 threads", B);
        CHECK(memcmp(li[1], lf[1], B * 3 * sizeof(float)) == 0,
              "B %zu: infer and forward logits differ at 2 threads", B);
        free(g[0]);
        free(g[1]);
        free(img);
    }
}

/* The encoder options of imported models (xfmr.h: norm post, gelu_tanh, pooler tanh, BERT's
 * embedding with token types): the parameter table, batch validation, forward against the
 * double twin, hy_xfmr_infer bitwise hy_xfmr_forward, and forward + backward (with dropout)
 * bitwise between 1 and 2 threads. */
static const hy_xfmr_config BERT = {.kind = HY_XFMR_TEXT, .vocab_size = 40, .max_len = 16,
                                    .d_model = 32, .n_heads = 4, .depth = 2, .d_mlp = 64,
                                    .n_classes = 3, .ln_eps = 1e-12, .norm = HY_NORM_POST,
                                    .pooler = HY_POOLER_TANH, .text_embed = HY_TEXT_EMBED_BERT,
                                    .type_vocab = 2};

static void test_options(void) {
    hy_xfmr m;
    CHECK_OK(hy_xfmr_new(&m, &BERT));
    static const char *const names[] = {"pos_embed", "tok_embed.weight", "type_embed.weight",
                                        "embed_norm.weight", "embed_norm.bias",
                                        "blocks.0.norm1.weight"};
    for (size_t i = 0; i < 6; i++)
        CHECK(strcmp(m.table[i].name, names[i]) == 0, "slot %zu: %s", i, m.table[i].name);
    CHECK(m.n_tensors == 5 + 2 * 12 + 4 && m.T == 16, "tensors %zu, T %zu", m.n_tensors, m.T);
    CHECK(strcmp(m.table[m.n_tensors - 4].name, "pooler.weight") == 0 &&
          strcmp(m.table[m.n_tensors - 1].name, "head.bias") == 0, "head slots");
    CHECK(hy_xfmr_param_index(&m, "cls_token") < 0 && hy_xfmr_param_index(&m, "norm.weight") < 0,
          "no cls_token, no final norm");
    CHECK(m.table[m.n_tensors - 4].decay && !m.table[2].decay, "decay flags");
    hy_xfmr_costs k = hy_xfmr_cost(&BERT, 16, NULL);
    size_t np = 0;
    for (size_t i = 0; i < m.n_tensors; i++) np += m.table[i].numel;
    CHECK(k.params_total == np, "cost params %zu vs table %zu", k.params_total, np);
    /* inputs: [CLS] is a token (length >= 1), type ids in [0, type_vocab) */
    CHECK_OK(hy_xfmr_alloc_acts(&m, 2));
    hy_xfmr_init(&m, 3);
    int32_t ids[8] = {2, 4, 5, 3, 2, 7, 3, 0}, lens[2] = {4, 0}, tt[8] = {0, 0, 1, 1, 0, 0, 2, 0};
    float logits[6];
    hy_batch in = {.ids = ids, .lengths = lens, .len = 4, .type_ids = tt};
    CHECK_FAIL(hy_xfmr_forward(&m, &in, 2, logits), HY_EINVAL,
               "xfmr: length 0 of row 2 out of range [1, 4]");
    lens[1] = 3;
    CHECK_FAIL(hy_xfmr_forward(&m, &in, 2, logits), HY_EINVAL,
               "xfmr: token type 2 out of range [0, 2) (row 2, position 3; type_vocab 2)");
    tt[6] = 0;
    CHECK_OK(hy_xfmr_forward(&m, &in, 2, logits));
    double ref[6];
    float reff[6];
    ref_xfmr_forward(&m, &in, 2, false, 0, ref);
    ref_to_float(reff, ref, 6);
    check_close("bert logits vs double twin", logits, reff, 6, TOL[0].atol, TOL[0].rtol);
    in.type_ids = NULL;   /* NULL = all zeros */
    float z0[6], z1[6];
    CHECK_OK(hy_xfmr_forward(&m, &in, 2, z0));
    memset(tt, 0, sizeof tt);
    in.type_ids = tt;
    CHECK_OK(hy_xfmr_forward(&m, &in, 2, z1));
    CHECK(memcmp(z0, z1, sizeof z0) == 0, "type_ids NULL = zeros");
    hy_xfmr_release(&m);
    /* config errors */
    hy_xfmr_config c = TEXT;
    c.type_vocab = 2;
    CHECK_FAIL(hy_xfmr_new(&m, &c), HY_ECONFIG,
               "xfmr: type_vocab 2 needs text_embed bert (token types are BERT's embedding)");
    c = VIT_TINY;
    c.text_embed = HY_TEXT_EMBED_BERT;
    CHECK_FAIL(hy_xfmr_new(&m, &c), HY_ECONFIG, "xfmr: text_embed applies to text models only");
    c = VIT_TINY;
    c.norm = 2;
    CHECK_FAIL(hy_xfmr_new(&m, &c), HY_ECONFIG, "xfmr: norm must be one of pre|post (got value 2)");

    /* infer = forward and 1 = 2 threads, bitwise, on the plain block path and BERT's embedding */
    hy_xfmr_config vpost = VIT_TINY;
    vpost.depth = 2;
    vpost.norm = HY_NORM_POST;
    vpost.act = HY_ACT_GELU_TANH;
    vpost.pooler = HY_POOLER_TANH;
    float *img = rand_vec(2 * 28 * 28, 2);
    int32_t bids[2 * 12], blens[2] = {12, 7}, btt[2 * 12];
    for (size_t i = 0; i < 24; i++) bids[i] = (int32_t)hy_rng_below(&rng, 40);
    for (size_t i = 0; i < 24; i++) btt[i] = (int32_t)hy_rng_below(&rng, 2);
    hy_batch vin = {.images = img}, tin = {.ids = bids, .lengths = blens, .len = 12,
                                           .type_ids = btt};
    const struct { const hy_xfmr_config *c; const hy_batch *in; size_t B; } runs[] = {
        {&vpost, &vin, 2}, {&BERT, &tin, 2}};
    for (size_t r = 0; r < 2; r++) {
        hy_xfmr probe;
        CHECK_OK(hy_xfmr_new(&probe, runs[r].c));
        size_t np2 = probe.n_params, K = runs[r].c->n_classes, B = runs[r].B;
        hy_xfmr_release(&probe);
        float inf[2][20], fwd[2][20];
        float *g[2] = {malloc(np2 * sizeof(float)), malloc(np2 * sizeof(float))};
        for (int t = 0; t < 2; t++)
            small_pass(runs[r].c, runs[r].in, B, t + 1, inf[t], fwd[t], g[t]);
        CHECK(memcmp(inf[0], fwd[0], B * K * sizeof(float)) == 0, "options %zu: infer", r);
        CHECK(memcmp(fwd[0], fwd[1], B * K * sizeof(float)) == 0, "options %zu: threads", r);
        CHECK(memcmp(g[0], g[1], np2 * sizeof(float)) == 0, "options %zu: grads threads", r);
        free(g[0]);
        free(g[1]);
    }
    free(img);
    vpost.depth = 4;
    vpost.attn_dropout = vpost.mlp_dropout = 0.1f;
    CHECK_OK(hy_xfmr_new(&m, &vpost));
    size_t npp = m.n_params;
    hy_xfmr_release(&m);
    float *g[2] = {malloc(npp * sizeof(float)), malloc(npp * sizeof(float))}, lg[2][60];
    float dg[2][32];
    for (int t = 0; t < 2; t++) run_step(&vpost, t + 1, lg[t], g[t], dg[t], &npp);
    CHECK(memcmp(lg[0], lg[1], sizeof lg[0]) == 0 && memcmp(g[0], g[1], npp * sizeof(float)) == 0
          && memcmp(dg[0], dg[1], sizeof dg[0]) == 0, "post-LN with dropout: 1 vs 2 threads");
    free(g[0]);
    free(g[1]);
}

int main(void) {
    hy_rng_seed(&rng, check_seed());
    RUN(test_config_errors);
    RUN(test_table);
    RUN(test_forward_vs_twin);
    RUN(test_batch_errors);
    RUN(test_infer);
    RUN(test_determinism_threads);
    RUN(test_small_pass_team);
    RUN(test_long_samples_threads);
    RUN(test_options);
    return check_exit("test_xfmr");
}
