/* test_ckpt.c: checkpoint round trip (bit-exact params, gates, config, meta) and the errors for
 * missing and mis-shaped tensors. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "nn/ckpt.h"

static hy_xfmr_config small_vit(void) {
    hy_xfmr_config c = check_tiny_vit();
    c.mlp_dropout = 0.25f;
    return c;
}

static void tmp_path(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", check_tmpdir(), name);
}

static void test_round_trip_bit_exact(void) {
    char path[512];
    tmp_path(path, sizeof path, "a.h5");
    hy_xfmr_config c = small_vit();
    hy_xfmr a, b;
    CHECK_OK(hy_xfmr_new(&a, &c));
    hy_xfmr_init(&a, check_seed());
    a.params[5] = -0.0f;            /* signed zero and a denormal survive */
    a.params[6] = 1e-42f;
    hy_xfmr_set_gate(&a, 1, 0, 0.0f);
    hy_xfmr_set_gate(&a, 0, 1, 0.5f);
    hy_kv meta[3] = {{"seed", NULL, 42, 1}, {"config_hash", "0123abcd", 0, 0},
                     {"val_nll", NULL, 0.125, 0}};
    CHECK_OK(hy_ckpt_save(path, &a, meta, 3));
    CHECK_OK(hy_ckpt_load(path, &b));
    CHECK(b.n_params == a.n_params, "n_params %zu vs %zu", b.n_params, a.n_params);
    CHECK(memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0, "params bit-exact");
    CHECK(memcmp(a.gates, b.gates, 4 * sizeof(float)) == 0, "gates");
    CHECK(memcmp(&a.cfg, &b.cfg, sizeof a.cfg) == 0, "config");
    hy_h5 f;
    CHECK_OK(hy_h5_open(&f, path));
    int64_t seed = 0;
    double nll = 0;
    char *s = NULL;
    CHECK_OK(hy_h5_get_attr_i64(&f, "/meta", "seed", &seed));
    CHECK_OK(hy_h5_get_attr_f64(&f, "/meta", "val_nll", &nll));
    CHECK_OK(hy_h5_get_attr_str(&f, "/meta", "hydra_version", &s));
    CHECK(seed == 42 && nll == 0.125 && s && strcmp(s, HY_VERSION) == 0, "meta");
    hy_free(s);
    CHECK_OK(hy_h5_get_attr_str(&f, "/config", "kind", &s));
    CHECK(strcmp(s, "vit") == 0, "kind %s", s);
    hy_free(s);
    /* PyTorch orientation: qkv [3d,d], head [C,d], patch embedding [d,C,p,p] */
    hy_dtype dt;
    int nd;
    int64_t sh[HY_MAXDIM];
    CHECK_OK(hy_h5_shape(&f, "/params/blocks.1.attn.qkv.weight", &dt, &nd, sh));
    CHECK(dt == HY_F32 && nd == 2 && sh[0] == 48 && sh[1] == 16, "qkv shape");
    CHECK_OK(hy_h5_shape(&f, "/params/patch_embed.proj.weight", &dt, &nd, sh));
    CHECK(nd == 4 && sh[0] == 16 && sh[1] == 1 && sh[2] == 4 && sh[3] == 4, "patch shape");
    CHECK_OK(hy_h5_shape(&f, "/head_gates", &dt, &nd, sh));
    CHECK(nd == 2 && sh[0] == 2 && sh[1] == 2, "gates shape");
    hy_h5_close(&f);
    hy_xfmr_release(&a);
    hy_xfmr_release(&b);
}

/* Writes model m's checkpoint, then overwrites one /config attribute. */
static void write_tampered(const char *path, const hy_xfmr *m, const char *key, int64_t v) {
    hy_h5 f;
    CHECK_OK(hy_h5_create(&f, path));
    CHECK_OK(hy_ckpt_write(&f, m, NULL, 0));
    CHECK_OK(hy_h5_set_attr_i64(&f, "/config", key, v));
    CHECK_OK(hy_h5_commit(&f));
}

static void test_missing_and_misshaped(void) {
    char path[512], want[1024];
    hy_xfmr_config c = small_vit();
    hy_xfmr a, b;
    CHECK_OK(hy_xfmr_new(&a, &c));
    hy_xfmr_init(&a, 1);
    tmp_path(path, sizeof path, "deeper.h5");
    write_tampered(path, &a, "depth", 3);
    snprintf(want, sizeof want, "ckpt: '%s': /config depth = 3 but /params holds 2 blocks "
             "(blocks.0 to blocks.1)", path);
    CHECK_FAIL(hy_ckpt_load(path, &b), HY_EINVAL, want);
    CHECK(b.params == NULL, "model left zeroed");
    tmp_path(path, sizeof path, "classes.h5");
    write_tampered(path, &a, "n_classes", 5);
    snprintf(want, sizeof want, "ckpt: '%s': tensor 'head.weight' has shape [3,16], "
             "expected [5,16]", path);
    CHECK_FAIL(hy_ckpt_load(path, &b), HY_EINVAL, want);
    tmp_path(path, sizeof path, "nothing.h5");
    hy_h5 f;
    CHECK_OK(hy_h5_create(&f, path));
    CHECK_OK(hy_h5_set_attr_str(&f, "/config", "kind", "vit"));
    CHECK_OK(hy_h5_commit(&f));
    snprintf(want, sizeof want, "ckpt: '%s' has no /config attribute 'image_size'", path);
    CHECK_FAIL(hy_ckpt_load(path, &b), HY_EINVAL, want);
    tmp_path(path, sizeof path, "absent.h5");
    snprintf(want, sizeof want, "h5: cannot open '%s': no such file", path);
    CHECK_FAIL(hy_ckpt_load(path, &b), HY_EIO, want);
    hy_xfmr_release(&a);
}

/* Sizes in /config are checked against their limits and against the tensors present before
 * anything is built: depth 2^31 / 2^40 used to loop over the layers for minutes. */
static void test_sizes_checked_first(void) {
    char path[512], want[1024];
    hy_xfmr_config c = small_vit();
    hy_xfmr a, b;
    CHECK_OK(hy_xfmr_new(&a, &c));
    hy_xfmr_init(&a, 1);
    static const struct { const char *key; int64_t v; const char *limit; } BIG[] = {
        {"depth", (int64_t)1 << 31, "0 to 1024"},
        {"depth", (int64_t)1 << 40, "0 to 1024"},
        {"d_mlp", (int64_t)1 << 40, "0 to 65536"},
        {"n_classes", (int64_t)1 << 31, "0 to 65536"},
        {"d_model", INT64_MAX, "0 to 65536"},
        {"max_len", (int64_t)1 << 40, "0 to 256"},   /* a vit: checked even though unused */
        {"channels", -1, "0 to 1024"},
    };
    for (size_t i = 0; i < sizeof BIG / sizeof *BIG; i++) {
        tmp_path(path, sizeof path, "big.h5");
        write_tampered(path, &a, BIG[i].key, BIG[i].v);
        double t0 = hy_now();
        snprintf(want, sizeof want, "ckpt: '%s': /config %s = %lld is out of range (expected %s)",
                 path, BIG[i].key, (long long)BIG[i].v, BIG[i].limit);
        CHECK_FAIL(hy_ckpt_load(path, &b), HY_EINVAL, want);
        CHECK(hy_now() - t0 < 1.0, "%s refused in %.2f s", BIG[i].key, hy_now() - t0);
        CHECK(b.params == NULL, "model left zeroed");
    }
    /* within the limits but not what the file holds: compared with /params */
    tmp_path(path, sizeof path, "deep.h5");
    write_tampered(path, &a, "depth", 1024);
    snprintf(want, sizeof want, "ckpt: '%s': /config depth = 1024 but /params holds 2 blocks "
             "(blocks.0 to blocks.1)", path);
    CHECK_FAIL(hy_ckpt_load(path, &b), HY_EINVAL, want);
    tmp_path(path, sizeof path, "wide.h5");
    write_tampered(path, &a, "d_mlp", 65536);
    snprintf(want, sizeof want, "ckpt: '%s': tensor 'blocks.0.mlp.fc1.weight' has shape [32,16], "
             "expected [65536,16]", path);
    CHECK_FAIL(hy_ckpt_load(path, &b), HY_EINVAL, want);
    /* a parameter count above HY_XFMR_MAX_PARAMS from sizes each within its limit */
    hy_xfmr_config big = c;
    big.d_model = 65536;
    big.n_heads = 1024;
    big.d_mlp = 65536;
    CHECK_FAIL_HAS(hy_xfmr_config_check(&big), HY_ECONFIG, "parameters, above the limit of "
                   "4294967296 (d_model 65536, depth 2, d_mlp 65536)");
    hy_h5 f;
    tmp_path(path, sizeof path, "huge.h5");
    CHECK_OK(hy_h5_create(&f, path));
    CHECK_OK(hy_ckpt_write(&f, &a, NULL, 0));
    CHECK_OK(hy_h5_set_attr_i64(&f, "/config", "d_model", 65536));
    CHECK_OK(hy_h5_set_attr_i64(&f, "/config", "n_heads", 1024));
    CHECK_OK(hy_h5_set_attr_i64(&f, "/config", "d_mlp", 65536));
    CHECK_OK(hy_h5_commit(&f));
    snprintf(want, sizeof want, "ckpt: '%s': xfmr: the model has", path);
    CHECK_FAIL_HAS(hy_ckpt_load(path, &b), HY_ECONFIG, want);
    hy_xfmr_release(&a);
}

static void test_text_config(void) {
    char path[512];
    tmp_path(path, sizeof path, "text.h5");
    hy_xfmr_config c;
    memset(&c, 0, sizeof c);
    c.kind = HY_XFMR_TEXT;
    c.vocab_size = 50;
    c.max_len = 12;
    c.d_model = 16;
    c.n_heads = 4;
    c.depth = 1;
    c.d_mlp = 24;
    c.n_classes = 2;
    hy_xfmr a, b;
    CHECK_OK(hy_xfmr_new(&a, &c));
    hy_xfmr_init(&a, 3);
    CHECK_OK(hy_ckpt_save(path, &a, NULL, 0));
    CHECK_OK(hy_ckpt_load(path, &b));
    CHECK(b.cfg.kind == HY_XFMR_TEXT && b.cfg.vocab_size == 50 && b.cfg.max_len == 12,
          "text config");
    CHECK(memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0, "text params");
    hy_xfmr_release(&a);
    hy_xfmr_release(&b);
}

/* ln_eps: a file written before the field existed (tests/ref/vit_tiny.h5 has no /config ln_eps)
 * reads as the default 1e-6; 1e-12 (HF) survives a round trip; 0 or negative is refused */
static void test_ln_eps(void) {
    hy_h5 f;
    hy_xfmr_config c;
    CHECK_OK(hy_h5_open(&f, "tests/ref/vit_tiny.h5"));
    CHECK(hy_h5_attr_exists(&f, "/config", "ln_eps") == 0, "the fixture predates ln_eps");
    CHECK_OK(hy_ckpt_read_config(&f, &c));
    CHECK(c.ln_eps == 1e-6 && hy_xfmr_ln_eps(&c) == 1e-6f, "absent ln_eps = 1e-6 (got %g)",
          c.ln_eps);
    hy_h5_close(&f);
    char path[512], want[1024];
    tmp_path(path, sizeof path, "eps.h5");
    c = small_vit();
    c.ln_eps = 1e-12;
    hy_xfmr a, b;
    CHECK_OK(hy_xfmr_new(&a, &c));
    hy_xfmr_init(&a, 5);
    CHECK_OK(hy_ckpt_save(path, &a, NULL, 0));
    CHECK_OK(hy_ckpt_load(path, &b));
    CHECK(b.cfg.ln_eps == 1e-12 && hy_xfmr_ln_eps(&b.cfg) == 1e-12f, "ln_eps %g", b.cfg.ln_eps);
    CHECK(memcmp(&a.cfg, &b.cfg, sizeof a.cfg) == 0, "config");
    hy_xfmr_release(&b);
    CHECK_OK(hy_h5_create(&f, path));
    CHECK_OK(hy_ckpt_write(&f, &a, NULL, 0));
    CHECK_OK(hy_h5_set_attr_f64(&f, "/config", "ln_eps", 0.0));
    CHECK_OK(hy_h5_commit(&f));
    snprintf(want, sizeof want, "ckpt: '%s': /config ln_eps must be > 0 (got 0)", path);
    CHECK_FAIL(hy_ckpt_load(path, &b), HY_EINVAL, want);
    hy_xfmr_release(&a);
    c.ln_eps = -1e-6;
    CHECK_FAIL(hy_xfmr_new(&a, &c), HY_ECONFIG,
               "xfmr: ln_eps must be in (0, 1) and representable as a float32 (got -1e-06)");
}

int main(void) {
    RUN(test_round_trip_bit_exact);
    RUN(test_missing_and_misshaped);
    RUN(test_sizes_checked_first);
    RUN(test_text_config);
    RUN(test_ln_eps);
    return check_exit("test_ckpt");
}
