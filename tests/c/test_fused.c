/* test_fused.c: the fused Hydra model equals its members run one by one (every fuse.* =
 * member), for equal and unequal head counts, M = 1..4, batch 1 and > 1, images and text with
 * padding; with averaging it equals the members with the averaged weights substituted; save /
 * load round trip; cost counts; malformed members and gates are clear errors; precision bf16
 * (the model and the fused model) against fp32, its members and the switched-off path. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "hydra/fused.h"
#include "nn/train.h"

/* max |fused logit - sequential logit| allowed (DESIGN §3.5) */
#define TOL_LOGIT 1e-5

static hy_xfmr_config cfg_of(hy_xfmr_kind kind);

/* an imported HF BERT's options (xfmr.h): post-LN blocks, LayerNorm eps 1e-12, the embedding
 * LayerNorm over word + token type + absolute position, the tanh pooler on [CLS]; act gelu or
 * gelu_tanh. Images: the same block, activation and pooler options on a ViT. */
static hy_xfmr_config cfg_bert(hy_xfmr_kind kind, hy_xfmr_act act) {
    hy_xfmr_config c = cfg_of(kind);
    c.ln_eps = 1e-12;
    c.norm = HY_NORM_POST;
    c.act = act;
    c.pooler = HY_POOLER_TANH;
    if (kind == HY_XFMR_TEXT) {
        c.text_embed = HY_TEXT_EMBED_BERT;
        c.type_vocab = 2;
    }
    return c;
}

static hy_xfmr_config cfg_of(hy_xfmr_kind kind) {
    hy_xfmr_config c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.image_size = 28;
    c.channels = 1;
    c.patch = 7;
    c.vocab_size = 40;
    c.max_len = 12;
    c.d_model = 32;
    c.n_heads = 4;
    c.depth = 3;
    c.d_mlp = 48;
    c.n_classes = 5;
    return c;
}

/* a member: init from seed, every weight perturbed so logits are O(1) and members differ;
 * gates: member-dependent random head sets, keep[l] = kfn(m, l) heads */
static void make_member(hy_xfmr *x, const hy_xfmr_config *c, uint64_t seed, size_t m, int unequal) {
    CHECK_OK(hy_xfmr_new(x, c));
    hy_xfmr_init(x, seed);
    hy_rng r;
    hy_rng_seed(&r, seed * 31 + 7);
    for (size_t i = 0; i < x->n_params; i++) x->params[i] += (float)(0.15 * hy_rng_normal(&r));
    size_t L = c->depth, NH = c->n_heads;
    for (size_t l = 0; l < L; l++) {
        size_t keep = unequal ? 1 + (m + 2 * l) % NH : NH / 2;
        int64_t perm[16];
        for (size_t h = 0; h < NH; h++) perm[h] = (int64_t)h;
        hy_rng_shuffle(&r, perm, NH);
        for (size_t h = 0; h < NH; h++) hy_xfmr_set_gate(x, l, h, 0.0f);
        for (size_t i = 0; i < keep; i++) hy_xfmr_set_gate(x, l, (size_t)perm[i], 1.0f);
    }
}

/* batch sizes tested: 1, 3 and MAX_B = 20, where M * B pairs exceed the CHUNK_ROWS / T = 15
 * pairs that a thread runs through the layers at a time (fused.c), so slices are cut into
 * chunks, some of which cross from one member's stream to the next */
#define MAX_B 20
static const size_t BATCHES[] = {1, 3, MAX_B};

typedef struct input {
    float images[MAX_B * 28 * 28];
    int32_t ids[MAX_B * 12];
    int32_t type_ids[MAX_B * 12];
    int32_t lengths[MAX_B];
    hy_batch b;
} input;

static void make_input(input *in, const hy_xfmr_config *c, size_t B, uint64_t seed) {
    hy_rng r;
    hy_rng_seed(&r, seed);
    memset(in, 0, sizeof *in);
    if (c->kind == HY_XFMR_VIT) {
        for (size_t i = 0; i < B * 28 * 28; i++) in->images[i] = (float)hy_rng_normal(&r);
        in->b.images = in->images;
        return;
    }
    size_t len = 9;   /* shorter than max_len 12; rows padded after their length */
    bool bert = c->text_embed == HY_TEXT_EMBED_BERT;
    for (size_t b = 0; b < B; b++) {
        in->lengths[b] = (int32_t)(b == 0 ? len : 2 + hy_rng_below(&r, len - 2));
        /* text_embed bert: [CLS] first, a second segment (type 1) from a random position */
        size_t second = bert ? 1 + hy_rng_below(&r, (size_t)in->lengths[b]) : len;
        for (size_t t = 0; t < len; t++) {
            bool valid = (size_t)in->lengths[b] > t;
            in->ids[b * len + t] = !valid           ? HY_TOK_PAD
                                   : bert && t == 0 ? HY_TOK_CLS
                                       : (int32_t)(3 + hy_rng_below(&r, c->vocab_size - 3));
            in->type_ids[b * len + t] = valid && t >= second ? 1 : 0;
        }
    }
    in->b.ids = in->ids;
    in->b.lengths = in->lengths;
    in->b.len = len;
    if (bert) in->b.type_ids = in->type_ids;
}

/* sequential reference: logits (M, B, K) of each member's own forward */
static void sequential(hy_xfmr *const *ms, size_t M, const input *in, size_t B, float *out) {
    size_t K = ms[0]->cfg.n_classes;
    for (size_t m = 0; m < M; m++) {
        CHECK_OK(hy_xfmr_alloc_acts(ms[m], B));
        CHECK_OK(hy_xfmr_forward(ms[m], &in->b, B, out + m * B * K));
    }
}

static double fused_vs(hy_xfmr *const *ms, hy_xfmr *const *ref, size_t M, const input *in,
                       size_t B, const hy_fuse_config *fc) {
    size_t K = ms[0]->cfg.n_classes;
    float want[4 * MAX_B * 8], got[4 * MAX_B * 8];
    sequential(ref, M, in, B, want);
    hy_fused f;
    CHECK_OK(hy_fused_build(&f, ms, M, fc));
    CHECK_OK(hy_fused_alloc_acts(&f, B));
    CHECK_OK(hy_fused_forward(&f, &in->b, B, got));
    double worst = 0.0;
    for (size_t i = 0; i < M * B * K; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= worst)) worst = d;   /* NaN propagates */
    }
    hy_fused_release(&f);
    return worst;
}

static const hy_fuse_config ALL_MEMBER = {HY_FUSE_MEMBER, HY_FUSE_MEMBER, HY_FUSE_MEMBER,
                                          HY_FUSE_MEMBER};

/* ===== fused == sequential ===== */

/* with nt threads: at 3 the M B (member, sample) pairs are cut into slices that run their
 * layers concurrently (unequal head counts would collide if the buffers were not disjoint) */
static void run_equal_sequential_threads(const hy_xfmr_config *c0, int nt) {
    hy_xfmr_config c = *c0;
    hy_xfmr_kind kind = c.kind;
    uint64_t seed = check_seed();
    hy_threads_init(nt);
    for (int unequal = 0; unequal <= 1; unequal++)
        for (size_t M = 1; M <= 4; M++) {
            hy_xfmr xs[4];
            hy_xfmr *ms[4];
            for (size_t m = 0; m < M; m++) {
                make_member(&xs[m], &c, seed + 100 * m + 1, m, unequal);
                ms[m] = &xs[m];
            }
            for (size_t bi = 0; bi < 3; bi++) {
                size_t B = BATCHES[bi];
                static input in;
                make_input(&in, &c, B, seed + B);
                double d = fused_vs(ms, ms, M, &in, B, &ALL_MEMBER);
                CHECK(d <= TOL_LOGIT, "%s M=%zu B=%zu unequal=%d threads=%d: max |dlogit| %g > "
                      "%g", kind == HY_XFMR_VIT ? "vit" : "text", M, B, unequal, nt, d,
                      TOL_LOGIT);
            }
            for (size_t m = 0; m < M; m++) hy_xfmr_release(&xs[m]);
        }
}

static void run_equal_sequential_cfg(const hy_xfmr_config *c) {
    int threads0 = hy_threads();
    run_equal_sequential_threads(c, 1);
    run_equal_sequential_threads(c, 3);
    hy_threads_init(threads0);
}

static void run_equal_sequential(hy_xfmr_kind kind) {
    hy_xfmr_config c = cfg_of(kind);
    run_equal_sequential_cfg(&c);
}

static void test_sequential_images(void) { run_equal_sequential(HY_XFMR_VIT); }
static void test_sequential_text(void) { run_equal_sequential(HY_XFMR_TEXT); }

/* ===== averaging == members with averaged weights substituted ===== */

static int averaged(const char *name, const hy_fuse_config *fc) {
    if (strstr(name, "attn.")) return 0;
    if (strstr(name, "embed")) return fc->embed == HY_FUSE_AVERAGE;   /* embed_norm too */
    if (strncmp(name, "pooler.", 7) == 0) return fc->head == HY_FUSE_AVERAGE;
    if (strstr(name, "norm")) return fc->ln == HY_FUSE_AVERAGE;
    if (strstr(name, "mlp.")) return fc->mlp == HY_FUSE_AVERAGE;
    if (strncmp(name, "head.", 5) == 0) return fc->head == HY_FUSE_AVERAGE;
    return fc->embed == HY_FUSE_AVERAGE;   /* cls_token, pos_embed, patch/tok embed */
}

static void run_average_cfg(const hy_xfmr_config *c0, const hy_fuse_config *fc) {
    hy_xfmr_config c = *c0;
    hy_xfmr_kind kind = c.kind;
    uint64_t seed = check_seed();
    size_t M = 3;
    hy_xfmr xs[3], rs[3];
    hy_xfmr *ms[3], *refs[3];
    for (size_t m = 0; m < M; m++) {
        make_member(&xs[m], &c, seed + 50 * m + 3, m, 1);
        ms[m] = &xs[m];
        CHECK_OK(hy_xfmr_new(&rs[m], &c));
        memcpy(rs[m].params, xs[m].params, xs[m].n_params * sizeof(float));
        hy_xfmr_set_gates(&rs[m], xs[m].gates);
        refs[m] = &rs[m];
    }
    for (size_t i = 0; i < xs[0].n_tensors; i++) {
        const hy_param *p = &xs[0].table[i];
        if (!averaged(p->name, fc)) continue;
        for (size_t k = 0; k < p->numel; k++) {
            double acc = 0.0;
            for (size_t m = 0; m < M; m++) acc += (double)xs[m].params[p->offset + k];
            for (size_t m = 0; m < M; m++) rs[m].params[p->offset + k] = (float)(acc / (double)M);
        }
    }
    int threads0 = hy_threads();
    for (int nt = 1; nt <= 2; nt++) {   /* 2 threads: slices split streams and samples */
        hy_threads_init(nt);
        for (size_t bi = 0; bi < 3; bi++) {
            size_t B = BATCHES[bi];
            static input in;
            make_input(&in, &c, B, seed + 7 * B);
            double d = fused_vs(ms, refs, M, &in, B, fc);
            CHECK(d <= TOL_LOGIT, "%s mlp=%s ln=%s embed=%s head=%s B=%zu threads=%d: max "
                  "|dlogit| %g", kind == HY_XFMR_VIT ? "vit" : "text",
                  hy_fuse_mode_name(fc->mlp), hy_fuse_mode_name(fc->ln),
                  hy_fuse_mode_name(fc->embed), hy_fuse_mode_name(fc->head), B, nt, d);
        }
    }
    hy_threads_init(threads0);
    for (size_t m = 0; m < M; m++) {
        hy_xfmr_release(&xs[m]);
        hy_xfmr_release(&rs[m]);
    }
}

static void run_average(hy_xfmr_kind kind, const hy_fuse_config *fc) {
    hy_xfmr_config c = cfg_of(kind);
    run_average_cfg(&c, fc);
}

static void test_averaging(void) {
    const hy_fuse_mode A = HY_FUSE_AVERAGE, E = HY_FUSE_MEMBER;
    const hy_fuse_config cases[] = {{A, E, E, E}, {A, A, A, A}, {E, A, E, A}, {E, E, A, E}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run_average(HY_XFMR_VIT, &cases[i]);
        run_average(HY_XFMR_TEXT, &cases[i]);
    }
}

/* ===== bitwise determinism whatever the thread count ===== */

/* logits of 1, 2 and 3 threads are bitwise identical (chunk boundaries, and so every GEMM's row
 * count, must not depend on the thread count: OpenBLAS's edge kernels round differently).
 * B = 40 with vit-fm-like T = 17: M B pairs span several chunks, which cross member streams. */
static void run_threads_bitwise_cfg(const hy_xfmr_config *c0, const hy_fuse_config *fc,
                                   bool wide) {
    hy_xfmr_config c = *c0;
    hy_xfmr_kind kind = c.kind;
    if (wide) {
        /* vit-fm's widths (two layers): its products reach HY_GEMM_PAR_MIN_WORK, where a
         * product run as one OpenBLAS call and as its tiles round differently */
        c.d_model = 128;
        c.n_heads = 8;
        c.d_mlp = 512;
        c.depth = 2;
    }
    uint64_t seed = check_seed();
    enum { M = 3, B = 2 * MAX_B };
    hy_xfmr xs[M];
    hy_xfmr *ms[M];
    for (size_t m = 0; m < M; m++) {
        make_member(&xs[m], &c, seed + 40 * m + 9, m, 1);
        ms[m] = &xs[m];
    }
    hy_fused f;
    CHECK_OK(hy_fused_build(&f, ms, M, fc));
    CHECK_OK(hy_fused_alloc_acts(&f, B));
    static float images[B * 28 * 28];
    int32_t ids[B * 12], lengths[B], type_ids[B * 12];
    hy_rng r;
    hy_rng_seed(&r, seed + 5);
    hy_batch in;
    memset(&in, 0, sizeof in);
    if (kind == HY_XFMR_VIT) {
        for (size_t i = 0; i < B * 28 * 28; i++) images[i] = (float)hy_rng_normal(&r);
        in.images = images;
    } else {
        for (size_t b = 0; b < B; b++) {
            lengths[b] = (int32_t)(1 + hy_rng_below(&r, 12));
            for (size_t t = 0; t < 12; t++)
                ids[b * 12 + t] = t < (size_t)lengths[b]
                                      ? (int32_t)(3 + hy_rng_below(&r, c.vocab_size - 3))
                                      : HY_TOK_PAD;
        }
        in.ids = ids;
        in.lengths = lengths;
        in.len = 12;
        if (c.text_embed == HY_TEXT_EMBED_BERT) {   /* [CLS] first, then two segments */
            for (size_t b = 0; b < B; b++)
                for (size_t t = 0; t < 12; t++) {
                    if (t == 0) ids[b * 12] = HY_TOK_CLS;
                    type_ids[b * 12 + t] = t < (size_t)lengths[b] && t > 5 ? 1 : 0;
                }
            in.type_ids = type_ids;
        }
    }
    int threads0 = hy_threads();
    /* batch 1 and 3: 3 and 9 one-pair chunks, whose last one two threads split between its
     * layers (fused.c, forward); 3 threads deal them out whole */
    static const size_t sizes[] = {1, 2, 3, 7, B};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        size_t nb = sizes[si], K = c.n_classes;
        static float lg[3][M * B * 8];
        for (int nt = 1; nt <= 3; nt++) {
            hy_threads_init(nt);
            CHECK_OK(hy_fused_forward(&f, &in, nb, lg[nt - 1]));
        }
        for (int nt = 2; nt <= 3; nt++)
            CHECK(memcmp(lg[nt - 1], lg[0], M * nb * K * sizeof(float)) == 0,
                  "%s%s mlp=%s embed=%s B=%zu: logits with %d threads differ from 1 thread",
                  kind == HY_XFMR_VIT ? "vit" : "text", wide ? " (wide)" : "",
                  hy_fuse_mode_name(fc->mlp),
                  hy_fuse_mode_name(fc->embed), nb, nt);
    }
    /* two threads hand the split chunk over at any sublayer (fused.c, rebalance): the same
     * bits wherever the cut is */
    for (size_t si = 0; si < 3; si++) {
        size_t nb = sizes[si], K = c.n_classes;
        static float one[M * B * 8], two[M * B * 8];
        hy_threads_init(1);
        CHECK_OK(hy_fused_forward(&f, &in, nb, one));
        hy_threads_init(2);
        for (size_t cut = 1; cut < 2 * c.depth; cut++) {
            f.split_cut = cut;
            f.split_skew = 0;
            CHECK_OK(hy_fused_forward(&f, &in, nb, two));
            CHECK(memcmp(two, one, M * nb * K * sizeof(float)) == 0,
                  "%s B=%zu: logits with the split chunk cut at sublayer %zu differ from 1 thread",
                  kind == HY_XFMR_VIT ? "vit" : "text", nb, cut);
        }
    }
    hy_threads_init(threads0);
    hy_fused_release(&f);
    for (size_t m = 0; m < M; m++) hy_xfmr_release(&xs[m]);
}

static void run_threads_bitwise(hy_xfmr_kind kind, const hy_fuse_config *fc, bool wide) {
    hy_xfmr_config c = cfg_of(kind);
    run_threads_bitwise_cfg(&c, fc, wide);
}

static void test_threads_bitwise(void) {
    const hy_fuse_config avg = {HY_FUSE_AVERAGE, HY_FUSE_AVERAGE, HY_FUSE_AVERAGE,
                                HY_FUSE_AVERAGE};
    const hy_fuse_config dflt = {HY_FUSE_AVERAGE, HY_FUSE_MEMBER, HY_FUSE_MEMBER,
                                 HY_FUSE_MEMBER};
    run_threads_bitwise(HY_XFMR_VIT, &ALL_MEMBER, false);
    run_threads_bitwise(HY_XFMR_VIT, &dflt, false);
    run_threads_bitwise(HY_XFMR_VIT, &avg, false);
    run_threads_bitwise(HY_XFMR_TEXT, &dflt, false);
    run_threads_bitwise(HY_XFMR_TEXT, &avg, false);
    run_threads_bitwise(HY_XFMR_VIT, &dflt, true);
    run_threads_bitwise(HY_XFMR_TEXT, &avg, true);
}

/* ===== precision bf16 (tensor/gemm_bf16.h) ===== */

static double max_abs_diff(const float *a, const float *b, size_t n, double *scale) {
    double w = 0.0, s = 1.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= w)) w = d;
        if (fabs((double)b[i]) > s) s = fabs((double)b[i]);
    }
    if (scale) *scale = s;
    return w;
}

/* at bf16 the fused model equals its members at bf16 (hy_xfmr_infer) as closely as at fp32
 * (the same packed weights, the same summation order per output), stays within the BF16 error
 * of fp32 (and is not fp32: the path ran), gives the same bits at 1 and 3 threads; set back to
 * fp32, or with the BF16 path switched off (a CPU without it), everything is fp32 bitwise */
static void run_precision(hy_xfmr_kind kind) {
    if (!hy_bf16_available()) {
        fprintf(stderr, "test_fused: no AVX-512 BF16 on this CPU: bf16 checks skipped\n");
        return;
    }
    hy_xfmr_config c = cfg_of(kind);
    uint64_t seed = check_seed();
    int threads0 = hy_threads();
    size_t M = 3, B = MAX_B, K = c.n_classes;
    hy_xfmr xs[3];
    hy_xfmr *ms[3];
    for (size_t m = 0; m < M; m++) {
        make_member(&xs[m], &c, seed + 100 * m + 1, m, 1);
        ms[m] = &xs[m];
    }
    static input in;
    make_input(&in, &c, B, seed + 7);
    const hy_fuse_config dflt = {HY_FUSE_AVERAGE, HY_FUSE_MEMBER, HY_FUSE_MEMBER,
                                 HY_FUSE_MEMBER};
    float f32[3 * MAX_B * 8], f16[3 * MAX_B * 8], f16t[3 * MAX_B * 8], seq[3 * MAX_B * 8];
    float x32[MAX_B * 8], x16[MAX_B * 8], again[MAX_B * 8];
    const char *what = kind == HY_XFMR_VIT ? "vit" : "text";
    hy_precision used;
    /* the plain model */
    hy_threads_init(1);
    CHECK_OK(hy_xfmr_alloc_acts(ms[0], B));
    CHECK_OK(hy_xfmr_infer(ms[0], &in.b, B, x32));
    CHECK_OK(hy_xfmr_set_precision(ms[0], HY_PRECISION_BF16, &used));
    CHECK(used == HY_PRECISION_BF16, "%s: the model did not take bf16", what);
    CHECK_OK(hy_xfmr_infer(ms[0], &in.b, B, x16));
    double scale, d = max_abs_diff(x16, x32, B * K, &scale);
    CHECK(d > 1e-5 * scale && d <= 0.05 * scale, "%s model: bf16 vs fp32 max |dlogit| %g "
          "(scale %g)", what, d, scale);
    hy_threads_init(3);
    CHECK_OK(hy_xfmr_infer(ms[0], &in.b, B, again));
    CHECK(memcmp(again, x16, B * K * sizeof *x16) == 0, "%s model bf16: 1 and 3 threads differ",
          what);
    CHECK_OK(hy_xfmr_set_precision(ms[0], HY_PRECISION_FP32, &used));
    CHECK_OK(hy_xfmr_infer(ms[0], &in.b, B, again));
    CHECK(used == HY_PRECISION_FP32 && memcmp(again, x32, B * K * sizeof *x32) == 0,
          "%s model: back at fp32 the logits are not fp32's bits", what);
    /* the fused model */
    hy_fused f;
    CHECK_OK(hy_fused_build(&f, ms, M, &dflt));
    CHECK_OK(hy_fused_alloc_acts(&f, B));
    hy_threads_init(1);
    CHECK_OK(hy_fused_forward(&f, &in.b, B, f32));
    CHECK_OK(hy_fused_set_precision(&f, HY_PRECISION_BF16, &used));
    CHECK(used == HY_PRECISION_BF16, "%s: the fused model did not take bf16", what);
    CHECK_OK(hy_fused_forward(&f, &in.b, B, f16));
    hy_threads_init(3);
    CHECK_OK(hy_fused_forward(&f, &in.b, B, f16t));
    CHECK(memcmp(f16, f16t, M * B * K * sizeof *f16) == 0, "%s fused bf16: 1 and 3 threads "
          "differ", what);
    d = max_abs_diff(f16, f32, M * B * K, &scale);
    CHECK(d > 1e-5 * scale && d <= 0.05 * scale, "%s fused: bf16 vs fp32 max |dlogit| %g "
          "(scale %g)", what, d, scale);
    /* the members at bf16 one by one: the fused model's MLP and embedding are the averaged
     * ones (dflt), so compare against members built with all-member tensors */
    hy_fused g;
    CHECK_OK(hy_fused_build(&g, ms, M, &ALL_MEMBER));
    CHECK_OK(hy_fused_alloc_acts(&g, B));
    CHECK_OK(hy_fused_set_precision(&g, HY_PRECISION_BF16, NULL));
    CHECK_OK(hy_fused_forward(&g, &in.b, B, f16));
    for (size_t m = 0; m < M; m++) {
        CHECK_OK(hy_xfmr_set_precision(ms[m], HY_PRECISION_BF16, NULL));
        CHECK_OK(hy_xfmr_alloc_acts(ms[m], B));
        CHECK_OK(hy_xfmr_infer(ms[m], &in.b, B, seq + m * B * K));
        CHECK_OK(hy_xfmr_set_precision(ms[m], HY_PRECISION_FP32, NULL));
    }
    d = max_abs_diff(f16, seq, M * B * K, NULL);
    CHECK(d <= TOL_LOGIT, "%s: fused bf16 vs members bf16 max |dlogit| %g > %g", what, d,
          TOL_LOGIT);
    hy_fused_release(&g);
    /* back to fp32, and bf16 asked on a CPU without it: fp32's bits */
    CHECK_OK(hy_fused_set_precision(&f, HY_PRECISION_FP32, &used));
    CHECK_OK(hy_fused_forward(&f, &in.b, B, f16));
    CHECK(used == HY_PRECISION_FP32 && memcmp(f16, f32, M * B * K * sizeof *f16) == 0,
          "%s fused: back at fp32 the logits are not fp32's bits", what);
    hy_bf16_disable(true);
    CHECK_OK(hy_fused_set_precision(&f, HY_PRECISION_BF16, &used));
    CHECK_OK(hy_fused_forward(&f, &in.b, B, f16));
    CHECK(used == HY_PRECISION_FP32 && memcmp(f16, f32, M * B * K * sizeof *f16) == 0,
          "%s fused: without AVX-512 BF16 the logits are not fp32's bits", what);
    CHECK_OK(hy_xfmr_set_precision(ms[0], HY_PRECISION_BF16, &used));
    CHECK_OK(hy_xfmr_infer(ms[0], &in.b, B, again));
    CHECK(used == HY_PRECISION_FP32 && memcmp(again, x32, B * K * sizeof *x32) == 0,
          "%s model: without AVX-512 BF16 the logits are not fp32's bits", what);
    hy_bf16_disable(false);
    hy_fused_release(&f);
    for (size_t m = 0; m < M; m++) hy_xfmr_release(&xs[m]);
    hy_threads_init(threads0);
}

static void test_precision_bf16(void) {
    run_precision(HY_XFMR_VIT);
    run_precision(HY_XFMR_TEXT);
}

/* ===== file round trip, predict, cost ===== */

static void test_save_load_predict(void) {
    hy_xfmr_config c = cfg_of(HY_XFMR_VIT);
    uint64_t seed = check_seed();
    hy_xfmr xs[2];
    hy_xfmr *ms[2];
    for (size_t m = 0; m < 2; m++) {
        make_member(&xs[m], &c, seed + m + 11, m, 1);
        ms[m] = &xs[m];
    }
    hy_fuse_config fc = {HY_FUSE_AVERAGE, HY_FUSE_MEMBER, HY_FUSE_AVERAGE, HY_FUSE_MEMBER};
    hy_fused f, g;
    CHECK_OK(hy_fused_build(&f, ms, 2, &fc));
    char path[512];
    snprintf(path, sizeof path, "%s/fused.h5", check_tmpdir());
    CHECK_OK(hy_fused_save(path, &f));
    CHECK_OK(hy_fused_load(&g, path));
    CHECK(g.M == 2 && g.fuse.mlp == HY_FUSE_AVERAGE && g.fuse.ln == HY_FUSE_MEMBER &&
          g.n_params == f.n_params, "loaded header differs");
    CHECK(memcmp(g.params, f.params, f.n_params * sizeof(float)) == 0, "params differ");
    CHECK(memcmp(g.head_gates, f.head_gates, 2 * c.depth * c.n_heads * sizeof(float)) == 0,
          "gates differ");
    /* predict: mean of member softmaxes, member probs and logits */
    hy_tensor img, lab;
    hy_dataset ds;
    CHECK_OK(hy_synth_images(&img, &lab, 7, 28, 5, seed));
    CHECK_OK(hy_dataset_from_images(&ds, &img, &lab, 0.2, 0.3, 0));
    size_t N = 7, K = c.n_classes;
    float ml[2 * 7 * 5], pr[7 * 5], mp[2 * 7 * 5], want[7 * 5], wl[7 * 5];
    CHECK_OK(hy_fused_predict(&g, &ds, 3, ml, pr, mp));
    memset(want, 0, sizeof want);
    for (size_t m = 0; m < 2; m++) {
        float wp[7 * 5];
        CHECK_OK(hy_train_predict(&xs[m], &ds, 4, wl, wp));
        for (size_t i = 0; i < N * K; i++) want[i] += wp[i] / 2.0f;
    }
    (void)ml;
    (void)mp;
    /* averaged MLP/embed differ from the members', so compare against the fused forward only
     * through the invariant sum(probs) = 1 and member_probs consistency */
    for (size_t n = 0; n < N; n++) {
        double s = 0.0;
        for (size_t k = 0; k < K; k++) {
            s += (double)pr[n * K + k];
            double mean = 0.5 * ((double)mp[n * K + k] + (double)mp[(N + n) * K + k]);
            CHECK(fabs(mean - (double)pr[n * K + k]) <= 1e-6, "probs != mean of member probs");
        }
        CHECK(fabs(s - 1.0) <= 1e-5, "row %zu sums to %g", n, s);
    }
    /* with all members kept per member, predict equals the members' own predictions */
    hy_fused e;
    CHECK_OK(hy_fused_build(&e, ms, 2, &ALL_MEMBER));
    CHECK_OK(hy_fused_predict(&e, &ds, 4, NULL, pr, NULL));
    check_close("fused predict vs members", pr, want, N * K, 1e-6, 0.0);
    hy_fused_release(&e);
    hy_dataset_release(&ds);
    hy_tensor_release(&img);
    hy_tensor_release(&lab);
    hy_fused_release(&f);
    hy_fused_release(&g);
    for (size_t m = 0; m < 2; m++) hy_xfmr_release(&xs[m]);
}

static void test_cost(void) {
    hy_xfmr_config c = cfg_of(HY_XFMR_VIT);
    hy_xfmr x;
    CHECK_OK(hy_xfmr_new(&x, &c));
    hy_xfmr *ms[3] = {&x, &x, &x};
    hy_fused f;
    /* one unpruned member: same params and FLOPs as the model */
    CHECK_OK(hy_fused_build(&f, ms, 1, &ALL_MEMBER));
    size_t np = 0;
    for (size_t i = 0; i < x.n_tensors; i++) np += x.table[i].numel;
    CHECK(hy_fused_params(&f) == np, "params %zu vs %zu", hy_fused_params(&f), np);
    CHECK(hy_fused_flops(&f, x.T) == hy_xfmr_cost(&c, x.T, NULL).flops_total, "flops differ");
    hy_fused_release(&f);
    /* 3 members keeping half the heads with a merged MLP: attention halves, MLP counted thrice */
    for (size_t l = 0; l < c.depth; l++)
        for (size_t h = 0; h < 2; h++) hy_xfmr_set_gate(&x, l, h, 0.0f);
    hy_fuse_config fc = ALL_MEMBER;
    fc.mlp = HY_FUSE_AVERAGE;
    CHECK_OK(hy_fused_build(&f, ms, 3, &fc));
    size_t D = c.d_model, DM = c.d_mlp, L = c.depth;
    size_t mlp = L * (DM * D + DM + D * DM + D);
    size_t attn_full = L * (3 * D * D + 3 * D + D * D + D);
    size_t attn_half = L * (3 * D * D / 2 + 3 * D / 2 + D * D / 2 + D);
    CHECK(hy_fused_params(&f) == 3 * (np - mlp - attn_full + attn_half) + mlp,
          "params %zu", hy_fused_params(&f));
    hy_fused_release(&f);
    hy_xfmr_release(&x);
}

/* hy_xfmr_cost against the parameter tables (the tensors actually stored) and a FLOP count
 * written out by hand, for both kinds, kept heads and every fuse.* combination */
static void test_cost_matches_tables(void) {
    for (int kind = 0; kind < 2; kind++) {
        hy_xfmr_config c = cfg_of((hy_xfmr_kind)kind);
        hy_xfmr xs[3];
        hy_xfmr *ms[3];
        for (size_t m = 0; m < 3; m++) {
            make_member(&xs[m], &c, 40 + m, m, 1);
            ms[m] = &xs[m];
        }
        size_t T = xs[0].T, HS = xs[0].HS;
        double t = (double)T, D = (double)c.d_model, DM = (double)c.d_mlp, K = (double)c.n_classes;
        CHECK(T == (kind ? 1 + c.max_len : 17), "T %zu", T);
        /* unpruned: every tensor of the table */
        size_t np = 0;
        for (size_t i = 0; i < xs[0].n_tensors; i++) np += xs[0].table[i].numel;
        hy_xfmr_costs full = hy_xfmr_cost(&c, T, NULL);
        CHECK(full.params_total == np, "%s params %zu vs table %zu", kind ? "text" : "vit",
              full.params_total, np);
        /* FLOPs by hand: patch GEMM (vit), per layer qkv + 2 attention GEMMs + proj + fc1 + fc2,
         * head */
        size_t kept[3];
        double want = kind ? 0.0 : 2.0 * 16 * 49 * 32;
        for (size_t l = 0; l < c.depth; l++) {
            kept[l] = 0;
            for (size_t h = 0; h < c.n_heads; h++) kept[l] += hy_xfmr_gate(&xs[1], l, h) != 0.0f;
            double C = (double)(kept[l] * HS);
            want += 2.0 * t * D * 3 * C + 2.0 * t * t * C * 2 + 2.0 * t * C * D +
                    2.0 * t * D * DM * 2;
        }
        want += 2.0 * D * K;
        CHECK(hy_xfmr_cost(&c, T, kept).flops_total == want, "%s flops %.0f vs %.0f",
              kind ? "text" : "vit", hy_xfmr_cost(&c, T, kept).flops_total, want);
        /* every fuse.* combination: params = the fused table's tensors; flops = the members'
         * sum, the embedding once when it is shared */
        for (int bits = 0; bits < 16; bits++) {
            hy_fuse_config fc = {bits & 1 ? HY_FUSE_AVERAGE : HY_FUSE_MEMBER,
                                 bits & 2 ? HY_FUSE_AVERAGE : HY_FUSE_MEMBER,
                                 bits & 4 ? HY_FUSE_AVERAGE : HY_FUSE_MEMBER,
                                 bits & 8 ? HY_FUSE_AVERAGE : HY_FUSE_MEMBER};
            hy_fused f;
            CHECK_OK(hy_fused_build(&f, ms, 3, &fc));
            size_t fp = 0;
            for (size_t i = 0; i < f.n_tensors; i++) fp += f.table[i].numel;
            CHECK(hy_fused_params(&f) == fp, "%s fuse bits %d: params %zu vs table %zu",
                  kind ? "text" : "vit", bits, hy_fused_params(&f), fp);
            double fl = 0.0;
            for (size_t m = 0; m < 3; m++) {
                hy_xfmr_costs k = hy_xfmr_cost(&c, T, f.kept + m * c.depth);
                fl += k.flops_total - (m > 0 && (bits & 4) ? k.flops[HY_PART_EMBED] : 0.0);
            }
            CHECK(hy_fused_flops(&f, T) == fl, "fuse bits %d: flops", bits);
            hy_fused_release(&f);
        }
        for (size_t m = 0; m < 3; m++) hy_xfmr_release(&xs[m]);
    }
}

/* ===== errors ===== */

static void test_errors(void) {
    hy_xfmr_config c = cfg_of(HY_XFMR_VIT), c2 = c;
    c2.d_mlp = 64;
    hy_xfmr a, b;
    CHECK_OK(hy_xfmr_new(&a, &c));
    CHECK_OK(hy_xfmr_new(&b, &c2));
    hy_xfmr *ms[2] = {&a, &b};
    hy_fused f;
    CHECK_FAIL(hy_fused_build(&f, ms, 0, &ALL_MEMBER), HY_EINVAL,
               "fused: need at least one member (got 0)");
    CHECK_FAIL(hy_fused_build(&f, ms, 2, &ALL_MEMBER), HY_EINVAL,
               "fused: member 2 has a different config than member 1 (d_mlp 64 vs 48)");
    ms[1] = &a;
    for (size_t h = 0; h < c.n_heads; h++) hy_xfmr_set_gate(&a, 1, h, 0.0f);
    CHECK_FAIL(hy_fused_build(&f, ms, 2, &ALL_MEMBER), HY_EINVAL,
               "fused: member 1 prunes every head of layer 2 (keep at least one)");
    hy_xfmr_set_gate(&a, 1, 0, 1.0f);
    hy_xfmr_set_gate(&a, 0, 2, 0.5f);
    CHECK_FAIL(hy_fused_build(&f, ms, 2, &ALL_MEMBER), HY_EINVAL,
               "fused: member 1 gate of layer 1, head 3 is 0.5 (expected 0 or 1)");
    hy_xfmr_set_gate(&a, 0, 2, 1.0f);
    CHECK_OK(hy_fused_build(&f, ms, 2, &ALL_MEMBER));
    float lg[2 * 5];
    input in;
    make_input(&in, &c, 1, 1);
    CHECK_FAIL(hy_fused_forward(&f, &in.b, 1, lg), HY_EINVAL,
               "fused: no activations allocated (call hy_fused_alloc_acts)");
    CHECK_OK(hy_fused_alloc_acts(&f, 1));
    CHECK_FAIL(hy_fused_forward(&f, &in.b, 2, lg), HY_EINVAL,
               "fused: batch size 2 out of range [1, 1] (the activation capacity)");
    hy_fused_release(&f);
    hy_fused_release(&f);   /* idempotent */
    hy_fuse_mode mode;
    CHECK_FAIL(hy_fuse_mode_parse("ln", "mean", &mode), HY_EINVAL,
               "fused: fuse.ln must be average or member (got 'mean')");
    char path[512];
    snprintf(path, sizeof path, "%s/plain.h5", check_tmpdir());
    hy_h5 h;
    CHECK_OK(hy_h5_create(&h, path));
    CHECK_OK(hy_h5_set_attr_i64(&h, "/config", "d_model", 8));
    CHECK_OK(hy_h5_commit(&h));
    char want[600];
    snprintf(want, sizeof want, "fused: '%s' is not a fused Hydra model (no /fuse group)", path);
    CHECK_FAIL(hy_fused_load(&f, path), HY_EINVAL, want);
    hy_xfmr_release(&a);
    hy_xfmr_release(&b);
}

/* Writes fused model f to path with /fuse (or /config) attribute key set to v afterwards. */
static void write_fused_with(const char *path, const hy_fused *f, const char *obj,
                             const char *key, int64_t v) {
    hy_h5 h;
    CHECK_OK(hy_h5_create(&h, path));
    CHECK_OK(hy_fused_write(&h, f));
    if (key) CHECK_OK(hy_h5_set_attr_i64(&h, obj, key, v));
    CHECK_OK(hy_h5_commit(&h));
}

/* Every count in a fused file is checked against the member groups and tensors it holds: a
 * /fuse members of 2 over 3 stored members used to load as a 2-member ensemble. */
static void test_counts_checked(void) {
    hy_xfmr_config c = cfg_of(HY_XFMR_VIT);
    hy_xfmr xs[3];
    hy_xfmr *ms[3];
    for (size_t m = 0; m < 3; m++) {
        make_member(&xs[m], &c, 50 + m, m, 1);
        ms[m] = &xs[m];
    }
    hy_fuse_config fc = {HY_FUSE_AVERAGE, HY_FUSE_MEMBER, HY_FUSE_MEMBER, HY_FUSE_MEMBER};
    hy_fused f, g;
    CHECK_OK(hy_fused_build(&f, ms, 3, &fc));
    char path[512], want[1024];
    snprintf(path, sizeof path, "%s/counts.h5", check_tmpdir());
    write_fused_with(path, &f, NULL, NULL, 0);
    CHECK_OK(hy_fused_load(&g, path));
    CHECK(g.M == 3, "members %zu", g.M);
    hy_fused_release(&g);
    static const int64_t WRONG[] = {2, 5};
    for (size_t i = 0; i < 2; i++) {
        write_fused_with(path, &f, "/fuse", "members", WRONG[i]);
        snprintf(want, sizeof want, "fused: '%s': /fuse members = %lld but the file holds 3 "
                 "member groups under /members", path, (long long)WRONG[i]);
        CHECK_FAIL(hy_fused_load(&g, path), HY_EINVAL, want);
        CHECK(g.params == NULL && g.M == 0, "left zeroed");
    }
    static const int64_t RANGE[] = {0, -1, (int64_t)1 << 40, 65};
    for (size_t i = 0; i < 4; i++) {
        write_fused_with(path, &f, "/fuse", "members", RANGE[i]);
        snprintf(want, sizeof want, "fused: '%s': /fuse members = %lld is out of range "
                 "(expected 1 to 64)", path, (long long)RANGE[i]);
        CHECK_FAIL(hy_fused_load(&g, path), HY_EINVAL, want);
    }
    write_fused_with(path, &f, "/config", "depth", 4);
    snprintf(want, sizeof want, "fused: '%s': /config depth = 4 but the file holds 3 blocks",
             path);
    CHECK_FAIL(hy_fused_load(&g, path), HY_EINVAL, want);
    write_fused_with(path, &f, "/config", "depth", (int64_t)1 << 40);
    snprintf(want, sizeof want, "ckpt: '%s': /config depth = 1099511627776 is out of range "
             "(expected 0 to 1024)", path);
    CHECK_FAIL(hy_fused_load(&g, path), HY_EINVAL, want);
    write_fused_with(path, &f, "/config", "n_classes", 6);
    snprintf(want, sizeof want, "ckpt: '%s': tensor 'members/0/head.weight' has shape [5,32], "
             "expected [6,32]", path);
    CHECK_FAIL(hy_fused_load(&g, path), HY_EINVAL, want);
    write_fused_with(path, &f, "/config", "d_mlp", 96);   /* the merged MLP is under /shared */
    snprintf(want, sizeof want, "ckpt: '%s': tensor 'shared/blocks.0.mlp.fc1.weight' has shape "
             "[48,32], expected [96,32]", path);
    CHECK_FAIL(hy_fused_load(&g, path), HY_EINVAL, want);
    /* an extra group under /members */
    hy_h5 h;
    CHECK_OK(hy_h5_create(&h, path));
    CHECK_OK(hy_fused_write(&h, &f));
    CHECK_OK(hy_h5_set_attr_i64(&h, "/members/x", "a", 1));
    CHECK_OK(hy_h5_commit(&h));
    snprintf(want, sizeof want, "fused: '%s': /fuse members = 3 but the file holds 4 member "
             "groups under /members", path);
    CHECK_FAIL(hy_fused_load(&g, path), HY_EINVAL, want);
    /* more members than a fused model takes */
    hy_xfmr *many[65];
    for (size_t m = 0; m < 65; m++) many[m] = &xs[m % 3];
    hy_fused big;
    CHECK_FAIL(hy_fused_build(&big, many, 65, &fc), HY_EINVAL,
               "fused: at most 64 members (got 65)");
    hy_fused_release(&f);
    for (size_t m = 0; m < 3; m++) hy_xfmr_release(&xs[m]);
}

/* The encoder options (xfmr.h): ln_eps is the fused model's too (fused == its members at
 * 1e-12, written to and read from the fused file); members differing in an option are refused
 * naming it; a fused file claiming an option without its tensors is refused naming the tensor. */
static void test_encoder_options(void) {
    hy_xfmr_config c = cfg_of(HY_XFMR_TEXT);
    c.ln_eps = 1e-12;
    hy_xfmr xs[2];
    hy_xfmr *ms[2] = {&xs[0], &xs[1]};
    for (size_t m = 0; m < 2; m++) make_member(&xs[m], &c, 50 + m, m, 1);
    static input in;
    make_input(&in, &c, 3, 9);
    double d = fused_vs(ms, ms, 2, &in, 3, &ALL_MEMBER);
    CHECK(d <= TOL_LOGIT, "ln_eps 1e-12: max |dlogit| %g > %g", d, TOL_LOGIT);
    hy_fused f, g;
    char path[512], want[700];
    snprintf(path, sizeof path, "%s/eps.h5", check_tmpdir());
    CHECK_OK(hy_fused_build(&f, ms, 2, &ALL_MEMBER));
    CHECK_OK(hy_fused_save(path, &f));
    CHECK_OK(hy_fused_load(&g, path));
    CHECK(g.cfg.ln_eps == 1e-12, "fused file ln_eps %g", g.cfg.ln_eps);
    hy_fused_release(&g);
    hy_fused_release(&f);
    hy_xfmr_release(&xs[1]);
    hy_xfmr_config c2 = c;
    c2.norm = HY_NORM_POST;
    make_member(&xs[1], &c2, 51, 1, 1);
    CHECK_FAIL(hy_fused_build(&f, ms, 2, &ALL_MEMBER), HY_EINVAL,
               "fused: member 2 has a different config than member 1 (norm post vs pre)");
    /* a fused file claiming the pooler (written by something else) has no pooler tensors */
    CHECK_OK(hy_fused_build(&f, ms, 1, &ALL_MEMBER));
    hy_h5 h;
    CHECK_OK(hy_h5_create(&h, path));
    CHECK_OK(hy_fused_write(&h, &f));
    CHECK_OK(hy_h5_set_attr_str(&h, "/config", "pooler", "tanh"));
    CHECK_OK(hy_h5_commit(&h));
    snprintf(want, sizeof want, "ckpt: '%s' has no tensor 'members/0/pooler.weight' (expected "
             "shape [32,32])", path);
    CHECK_FAIL(hy_fused_load(&g, path), HY_EINVAL, want);
    hy_fused_release(&f);
    hy_xfmr_release(&xs[0]);
    hy_xfmr_release(&xs[1]);
}

/* ===== BERT-shaped members (post-LN, token types, padding, pooler) ===== */

/* fused == the members one by one (M = 1..4, equal and unequal head counts, batch 1, 3, 20,
 * rows of several lengths padded, two token types; 1 and 3 threads), for act gelu and
 * gelu_tanh, and the same block options on images */
static void test_bert_sequential(void) {
    hy_xfmr_config cs[] = {cfg_bert(HY_XFMR_TEXT, HY_ACT_GELU),
                           cfg_bert(HY_XFMR_TEXT, HY_ACT_GELU_TANH),
                           cfg_bert(HY_XFMR_VIT, HY_ACT_GELU_TANH)};
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) run_equal_sequential_cfg(&cs[i]);
}

/* averaging == members with the averaged weights substituted (the embedding LayerNorm and the
 * token-type table follow fuse.embed, the pooler fuse.head) */
static void test_bert_averaging(void) {
    const hy_fuse_mode A = HY_FUSE_AVERAGE, E = HY_FUSE_MEMBER;
    const hy_fuse_config cases[] = {{A, E, E, E}, {A, A, A, A}, {E, A, E, A}, {E, E, A, E}};
    hy_xfmr_config c = cfg_bert(HY_XFMR_TEXT, HY_ACT_GELU);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_average_cfg(&c, &cases[i]);
}

/* bitwise the same logits at 1, 2 and 3 threads (and wherever the split chunk is cut) */
static void test_bert_threads_bitwise(void) {
    const hy_fuse_config avg = {HY_FUSE_AVERAGE, HY_FUSE_AVERAGE, HY_FUSE_AVERAGE,
                                HY_FUSE_AVERAGE};
    const hy_fuse_config dflt = {HY_FUSE_AVERAGE, HY_FUSE_MEMBER, HY_FUSE_MEMBER,
                                 HY_FUSE_MEMBER};
    hy_xfmr_config c = cfg_bert(HY_XFMR_TEXT, HY_ACT_GELU);
    hy_xfmr_config ct = cfg_bert(HY_XFMR_TEXT, HY_ACT_GELU_TANH);
    run_threads_bitwise_cfg(&c, &dflt, false);
    run_threads_bitwise_cfg(&c, &avg, false);
    run_threads_bitwise_cfg(&ct, &ALL_MEMBER, false);
    run_threads_bitwise_cfg(&ct, &dflt, true);
}

/* a fused BERT written and read back computes the same logits bit for bit, and its predictions
 * (hy_fused_predict over a dataset with token types) are the member probabilities */
static void test_bert_save_load(void) {
    hy_xfmr_config c = cfg_bert(HY_XFMR_TEXT, HY_ACT_GELU);
    hy_xfmr xs[2];
    hy_xfmr *ms[2] = {&xs[0], &xs[1]};
    for (size_t m = 0; m < 2; m++) make_member(&xs[m], &c, 70 + m, m, 1);
    static input in;
    make_input(&in, &c, 3, 17);
    hy_fused f, g;
    char path[512];
    snprintf(path, sizeof path, "%s/bert.h5", check_tmpdir());
    CHECK_OK(hy_fused_build(&f, ms, 2, &ALL_MEMBER));
    CHECK_OK(hy_fused_save(path, &f));
    CHECK_OK(hy_fused_load(&g, path));
    CHECK(g.cfg.norm == HY_NORM_POST && g.cfg.pooler == HY_POOLER_TANH &&
          g.cfg.text_embed == HY_TEXT_EMBED_BERT && g.cfg.type_vocab == 2,
          "fused file options lost");
    float a[2 * 3 * 5], b[2 * 3 * 5];   /* M B K */
    CHECK_OK(hy_fused_alloc_acts(&f, 3));
    CHECK_OK(hy_fused_alloc_acts(&g, 3));
    CHECK_OK(hy_fused_forward(&f, &in.b, 3, a));
    CHECK_OK(hy_fused_forward(&g, &in.b, 3, b));
    CHECK(memcmp(a, b, sizeof a) == 0, "loaded fused BERT gives other logits");
    /* the token types matter: all-zero types give other logits */
    in.b.type_ids = NULL;
    CHECK_OK(hy_fused_forward(&g, &in.b, 3, b));
    CHECK(memcmp(a, b, sizeof a) != 0, "token types ignored by the fused forward");
    hy_fused_release(&f);
    hy_fused_release(&g);
    for (size_t m = 0; m < 2; m++) hy_xfmr_release(&xs[m]);
}

int main(void) {
    RUN(test_sequential_images);
    RUN(test_sequential_text);
    RUN(test_averaging);
    RUN(test_threads_bitwise);
    RUN(test_precision_bf16);
    RUN(test_save_load_predict);
    RUN(test_cost);
    RUN(test_cost_matches_tables);
    RUN(test_errors);
    RUN(test_counts_checked);
    RUN(test_encoder_options);
    RUN(test_bert_sequential);
    RUN(test_bert_averaging);
    RUN(test_bert_threads_bitwise);
    RUN(test_bert_save_load);
    return check_exit("test_fused");
}
