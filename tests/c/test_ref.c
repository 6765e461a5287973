/* test_ref.c: the whole model against PyTorch fixtures (tests/ref/ fixtures made by
 * tests/ref/make_ref.py and tests/ref/hf_bert_ref.py in float64 and stored as float32), loaded with hydra's own core/io/h5.c:
 * logits (atol from the file, 1e-4), loss, every parameter gradient and dL/dgate (rtol from the
 * file, 1e-3, with an absolute floor of rtol * the tensor's largest |gradient| so that
 * near-zero entries are judged against the tensor's scale), and the losses of 5 AdamW steps
 * (core/nn/optim.h, no decay on norms/biases/embeddings) against torch.optim.AdamW. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/base.h"
#include "check.h"
#include "nn/ckpt.h"
#include "io/h5.h"
#include "nn/optim.h"
#include "nn/xfmr.h"

static const struct { const char *what; double atol, rtol; } TOL[] = {
    {"loss", 1e-6, 1e-5},
    {"adamw losses (5 steps, float32 vs float64)", 1e-5, 1e-4},
};

/* reads a float32 dataset whose shape must equal want (ndim dims) */
static int read_f32(hy_h5 *f, const char *name, int ndim, const int64_t *want, hy_tensor *t) {
    hy_status st = hy_h5_read_as(f, name, HY_F32, t);
    CHECK(st == HY_OK, "read %s: %s", name, hy_errmsg());
    if (st != HY_OK) return 0;
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == want[i];
    CHECK(same, "%s: fixture shape differs from hydra's", name);
    return same;
}

static double maxabs(const float *p, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)p[i]));
    return m;
}

static void run_fixture(const char *path) {
    hy_h5 f = {0};
    hy_xfmr m = {0};
    hy_tensor t = {0}, img = {0}, ids = {0}, lens = {0}, tids = {0}, labels = {0}, ref = {0};
    float *logits = NULL, *dlogits = NULL;
    CHECK_OK(hy_h5_open(&f, path));
    if (!f.open) return;
    double atol = 0, rtol = 0;
    int64_t format = 0;
    CHECK_OK(hy_h5_get_attr_i64(&f, "/", "format", &format));
    CHECK(format == 1, "%s: format %lld, want 1", path, (long long)format);
    CHECK_OK(hy_h5_get_attr_f64(&f, "/", "atol", &atol));
    CHECK_OK(hy_h5_get_attr_f64(&f, "/", "rtol", &rtol));
    hy_xfmr_config c;
    CHECK_OK(hy_ckpt_read_config(&f, &c));
    CHECK_OK(hy_xfmr_new(&m, &c));
    CHECK_OK(hy_h5_read_as(&f, "/in/labels", HY_I32, &labels));
    size_t B = (size_t)labels.shape[0], K = c.n_classes;
    CHECK_OK(hy_xfmr_alloc_acts(&m, B));
    /* parameters and gates */
    char name[96];
    for (size_t i = 0; i < m.n_tensors; i++) {
        const hy_param *p = &m.table[i];
        snprintf(name, sizeof name, "/param/%s", p->name);
        if (read_f32(&f, name, p->ndim, p->shape, &t))
            memcpy(m.params + p->offset, t.data, p->numel * sizeof(float));
        hy_tensor_release(&t);
    }
    int64_t gshape[2] = {(int64_t)c.depth, (int64_t)c.n_heads};
    if (read_f32(&f, "/in/head_gates", 2, gshape, &t)) hy_xfmr_set_gates(&m, t.data);
    hy_tensor_release(&t);
    /* inputs */
    hy_batch in = {0};
    if (c.kind == HY_XFMR_VIT) {
        CHECK_OK(hy_h5_read_as(&f, "/in/images", HY_F32, &img));
        in.images = img.data;
    } else {
        CHECK_OK(hy_h5_read_as(&f, "/in/ids", HY_I32, &ids));
        CHECK_OK(hy_h5_read_as(&f, "/in/lengths", HY_I32, &lens));
        in.ids = ids.data;
        in.lengths = lens.data;
        in.len = (size_t)ids.shape[1];
        if (hy_h5_exists(&f, "/in/type_ids") == 1) {   /* BERT's token types */
            CHECK_OK(hy_h5_read_as(&f, "/in/type_ids", HY_I32, &tids));
            in.type_ids = tids.data;
        }
    }
    logits = malloc(B * K * sizeof *logits);
    dlogits = malloc(B * K * sizeof *dlogits);
    /* forward: logits */
    CHECK_OK(hy_xfmr_forward(&m, &in, B, logits));
    int64_t lshape[2] = {(int64_t)B, (int64_t)K};
    char what[160];
    if (read_f32(&f, "/out/logits", 2, lshape, &ref)) {
        snprintf(what, sizeof what, "%s logits", path);
        check_close(what, logits, ref.data, B * K, atol, 0.0);
        double md = 0;
        for (size_t i = 0; i < B * K; i++)
            md = fmax(md, fabs((double)logits[i] - (double)((float *)ref.data)[i]));
        printf("  %s: max |logit - torch| %.2e (atol %.0e)\n", path, md, atol);
    }
    hy_tensor_release(&ref);
    /* loss and backward */
    double loss = 0;
    CHECK_OK(hy_xfmr_loss(&m, logits, labels.data, B, 0.0f, &loss, dlogits));
    CHECK_OK(hy_h5_read_as(&f, "/out/loss", HY_F64, &ref));
    double want = ((double *)ref.data)[0];
    CHECK(fabs(loss - want) <= TOL[0].atol + TOL[0].rtol * fabs(want), "%s loss %.9g, want %.9g",
          path, loss, want);
    hy_tensor_release(&ref);
    hy_xfmr_zero_grad(&m);
    CHECK_OK(hy_xfmr_backward(&m, dlogits));
    for (size_t i = 0; i < m.n_tensors; i++) {
        const hy_param *p = &m.table[i];
        snprintf(name, sizeof name, "/grad/%s", p->name);
        if (read_f32(&f, name, p->ndim, p->shape, &ref)) {
            snprintf(what, sizeof what, "%s grad %s", path, p->name);
            check_close(what, m.grads + p->offset, ref.data, p->numel,
                        rtol * maxabs(ref.data, p->numel), rtol);
        }
        hy_tensor_release(&ref);
    }
    if (read_f32(&f, "/grad/head_gates", 2, gshape, &ref)) {
        size_t n = c.depth * c.n_heads;
        snprintf(what, sizeof what, "%s dgate", path);
        check_close(what, m.dgates, ref.data, n, rtol * maxabs(ref.data, n), rtol);
    }
    hy_tensor_release(&ref);
    /* 5 AdamW steps on the same batch */
    hy_adamw_config ac = {0};
    CHECK_OK(hy_h5_get_attr_f64(&f, "/adamw/losses", "lr", &ac.learning_rate));
    CHECK_OK(hy_h5_get_attr_f64(&f, "/adamw/losses", "beta1", &ac.beta1));
    CHECK_OK(hy_h5_get_attr_f64(&f, "/adamw/losses", "beta2", &ac.beta2));
    CHECK_OK(hy_h5_get_attr_f64(&f, "/adamw/losses", "eps", &ac.eps));
    CHECK_OK(hy_h5_get_attr_f64(&f, "/adamw/losses", "weight_decay", &ac.weight_decay));
    hy_optim_segment *seg = calloc(m.n_tensors, sizeof *seg);
    for (size_t i = 0; i < m.n_tensors; i++)
        seg[i] = (hy_optim_segment){m.table[i].offset, m.table[i].numel, m.table[i].decay};
    hy_adamw opt = {0};
    CHECK_OK(hy_adamw_new(&opt, &ac, m.n_params, seg, m.n_tensors));
    float losses[5];
    for (int s = 0; s < 5 && opt.m; s++) {
        hy_xfmr_zero_grad(&m);
        CHECK_OK(hy_xfmr_forward(&m, &in, B, logits));
        CHECK_OK(hy_xfmr_loss(&m, logits, labels.data, B, 0.0f, &loss, dlogits));
        losses[s] = (float)loss;
        CHECK_OK(hy_xfmr_backward(&m, dlogits));
        hy_adamw_step(&opt, m.params, m.grads, ac.learning_rate);
    }
    int64_t five = 5;
    if (read_f32(&f, "/adamw/losses", 1, &five, &ref)) {
        snprintf(what, sizeof what, "%s %s", path, TOL[1].what);
        check_close(what, losses, ref.data, 5, TOL[1].atol, TOL[1].rtol);
        printf("  %s: adamw loss after 5 steps %.7f, torch %.7f\n", path, (double)losses[4],
               (double)((float *)ref.data)[4]);
    }
    hy_tensor_release(&ref);
    hy_adamw_release(&opt);
    free(seg);
    free(logits);
    free(dlogits);
    hy_tensor_release(&img);
    hy_tensor_release(&ids);
    hy_tensor_release(&lens);
    hy_tensor_release(&tids);
    hy_tensor_release(&labels);
    hy_xfmr_release(&m);
    hy_h5_close(&f);
}

static void test_vit_tiny(void) { run_fixture("tests/ref/vit_tiny.h5"); }
static void test_text_tiny(void) { run_fixture("tests/ref/text_tiny.h5"); }
/* Hugging Face's BertForSequenceClassification and ViTForImageClassification, written by hand
 * with HF's names and mapped onto hydra's (tests/ref/hf_bert_ref.py): post-LN, BERT embedding
 * with token types, tanh pooler, eps 1e-12; pre-LN ViT with eps 1e-12 and the tanh GELU */
static void test_hf_bert_tiny(void) { run_fixture("tests/ref/hf_bert_tiny.h5"); }
static void test_hf_vit_tiny(void) { run_fixture("tests/ref/hf_vit_tiny.h5"); }

int main(void) {
    RUN(test_vit_tiny);
    RUN(test_text_tiny);
    RUN(test_hf_bert_tiny);
    RUN(test_hf_vit_tiny);
    return check_exit("test_ref");
}
