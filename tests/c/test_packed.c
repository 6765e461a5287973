/* test_packed.c: Packed-Ensembles (lua/hydra/methods/packed_ensemble.lua). With gamma = 1 a
 * packed model is M independent narrow models; hydra runs it as a fused model with every
 * fuse.* = member (the block-diagonal layers are the ragged grouped GEMM over the members).
 *   - the fused pass equals the members run one by one (max |diff| <= 1e-6, batches 1, 3, 20,
 *     1 and 2 threads), members with nothing shared (independent inits);
 *   - against tests/ref/packed_tiny.h5 (tests/ref/packed_torch.py: ONE packed torch network of
 *     grouped 1x1 convolutions, GroupNorm over the M groups, M*NH heads, mean cross-entropy over
 *     the M*B rows): the fused file loads as it is, its logits match (atol 1e-4), and each
 *     member's own backward of (1/M) x its mean cross-entropy gives the packed network's
 *     gradients (rtol 1e-3, floor rtol x the tensor's largest |gradient|). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hydra/fused.h"
#include "io/h5.h"

#define TOL_SEQ 1e-6
#define MAX_B 20

/* a packed member of a base d_model 24 / 3 heads / d_mlp 48 model with alpha 2, M 3: width
 * 2 * 24 / 3 = 16 (2 heads of 8), d_mlp 32 */
static hy_xfmr_config member_cfg(void) {
    hy_xfmr_config c;
    memset(&c, 0, sizeof c);
    c.kind = HY_XFMR_VIT;
    c.image_size = 28;
    c.channels = 1;
    c.patch = 7;
    c.d_model = 16;
    c.n_heads = 2;
    c.depth = 2;
    c.d_mlp = 32;
    c.n_classes = 5;
    return c;
}

static void test_fused_equals_members(void) {
    enum { M = 3 };
    hy_xfmr_config c = member_cfg();
    hy_xfmr ms[M];
    hy_xfmr *mp[M];
    for (size_t m = 0; m < M; m++) {
        CHECK_OK(hy_xfmr_new(&ms[m], &c));
        hy_xfmr_init(&ms[m], 100 + m);   /* independent inits: the members share nothing */
        hy_rng r;
        hy_rng_seed(&r, 7 + m);
        for (size_t i = 0; i < ms[m].n_params; i++)
            ms[m].params[i] += (float)(0.1 * hy_rng_normal(&r));
        mp[m] = &ms[m];
    }
    const hy_fuse_config all = {HY_FUSE_MEMBER, HY_FUSE_MEMBER, HY_FUSE_MEMBER, HY_FUSE_MEMBER};
    hy_fused f;
    CHECK_OK(hy_fused_build(&f, mp, M, &all));
    CHECK_OK(hy_fused_alloc_acts(&f, MAX_B));
    static float images[MAX_B * 28 * 28];
    hy_rng r;
    hy_rng_seed(&r, check_seed());
    for (size_t i = 0; i < MAX_B * 28 * 28; i++) images[i] = (float)hy_rng_normal(&r);
    hy_batch in = {.images = images};
    size_t K = c.n_classes;
    static float want[M * MAX_B * 5], got[M * MAX_B * 5];
    const size_t batches[] = {1, 3, MAX_B};
    int threads0 = hy_threads();
    for (int nt = 1; nt <= 2; nt++) {
        CHECK_OK(hy_threads_init(nt));
        for (size_t bi = 0; bi < 3; bi++) {
            size_t B = batches[bi];
            for (size_t m = 0; m < M; m++) {
                CHECK_OK(hy_xfmr_alloc_acts(&ms[m], B));
                CHECK_OK(hy_xfmr_forward(&ms[m], &in, B, want + m * B * K));
            }
            CHECK_OK(hy_fused_forward(&f, &in, B, got));
            double worst = 0;
            for (size_t i = 0; i < M * B * K; i++) {
                double d = fabs((double)got[i] - (double)want[i]);
                if (!(d <= worst)) worst = d;
            }
            CHECK(worst <= TOL_SEQ, "threads %d, B %zu: max |fused - members| %.3g > %g", nt, B,
                  worst, TOL_SEQ);
            if (nt == 1 && B == MAX_B)
                printf("  packed, fused vs members one by one (B %zu): max |diff| %.2e\n", B,
                       worst);
        }
    }
    CHECK_OK(hy_threads_init(threads0));
    /* the cost is the members' hy_xfmr_cost added */
    hy_xfmr_costs one = hy_xfmr_cost(&c, ms[0].T, NULL);
    CHECK(hy_fused_params(&f) == M * one.params_total, "params %zu vs %d x %zu",
          hy_fused_params(&f), M, one.params_total);
    CHECK(hy_fused_flops(&f, ms[0].T) == M * one.flops_total, "flops");
    hy_fused_release(&f);
    for (size_t m = 0; m < M; m++) hy_xfmr_release(&ms[m]);
}

static double maxabs(const float *p, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)p[i]));
    return m;
}

static void test_torch_packed_network(void) {
    const char *path = "tests/ref/packed_tiny.h5";
    hy_fused f;
    CHECK_OK(hy_fused_load(&f, path));
    if (!f.params) return;
    hy_h5 h = {0};
    CHECK_OK(hy_h5_open(&h, path));
    double atol = 0, rtol = 0;
    CHECK_OK(hy_h5_get_attr_f64(&h, "/", "atol", &atol));
    CHECK_OK(hy_h5_get_attr_f64(&h, "/", "rtol", &rtol));
    hy_tensor img = {0}, lab = {0}, ref = {0}, t = {0};
    CHECK_OK(hy_h5_read_as(&h, "/in/images", HY_F32, &img));
    CHECK_OK(hy_h5_read_as(&h, "/in/labels", HY_I32, &lab));
    size_t M = f.M, B = (size_t)lab.shape[0], K = f.cfg.n_classes;
    CHECK(M == 3, "members %zu", M);
    hy_batch in = {.images = img.data};
    float *logits = malloc(M * B * K * sizeof *logits);
    float *dlogits = malloc(B * K * sizeof *dlogits);
    CHECK_OK(hy_fused_alloc_acts(&f, B));
    CHECK_OK(hy_fused_forward(&f, &in, B, logits));
    CHECK_OK(hy_h5_read_as(&h, "/out/logits", HY_F32, &ref));
    CHECK(hy_tensor_numel(&ref) == M * B * K, "logits shape");
    check_close("packed logits vs torch", logits, ref.data, M * B * K, atol, 0.0);
    double md = 0;
    for (size_t i = 0; i < M * B * K; i++)
        md = fmax(md, fabs((double)logits[i] - (double)((float *)ref.data)[i]));
    printf("  packed_tiny.h5: max |logit - torch| %.2e (atol %.0e)\n", md, atol);
    hy_tensor_release(&ref);
    /* gradients: member m alone, d/dlogits of (1/M) mean_b CE */
    double loss_sum = 0;
    char name[128], what[160];
    for (size_t m = 0; m < M; m++) {
        hy_xfmr x = {0};
        CHECK_OK(hy_xfmr_new(&x, &f.cfg));
        for (size_t i = 0; i < x.n_tensors; i++) {
            const hy_param *p = &x.table[i];
            snprintf(name, sizeof name, "/members/%zu/%s", m, p->name);
            CHECK_OK(hy_h5_read_as(&h, name, HY_F32, &t));
            if (hy_tensor_numel(&t) == p->numel)
                memcpy(x.params + p->offset, t.data, p->numel * sizeof(float));
            hy_tensor_release(&t);
        }
        CHECK_OK(hy_xfmr_alloc_acts(&x, B));
        float *lm = malloc(B * K * sizeof *lm);
        CHECK_OK(hy_xfmr_forward(&x, &in, B, lm));
        double loss = 0;
        CHECK_OK(hy_xfmr_loss(&x, lm, lab.data, B, 0.0f, &loss, dlogits));
        loss_sum += loss;
        for (size_t i = 0; i < B * K; i++) dlogits[i] /= (float)M;
        hy_xfmr_zero_grad(&x);
        CHECK_OK(hy_xfmr_backward(&x, dlogits));
        for (size_t i = 0; i < x.n_tensors; i++) {
            const hy_param *p = &x.table[i];
            snprintf(name, sizeof name, "/grad/members/%zu/%s", m, p->name);
            CHECK_OK(hy_h5_read_as(&h, name, HY_F32, &ref));
            CHECK(hy_tensor_numel(&ref) == p->numel, "%s shape", name);
            if (hy_tensor_numel(&ref) == p->numel) {
                snprintf(what, sizeof what, "packed grad member %zu %s", m, p->name);
                check_close(what, x.grads + p->offset, ref.data, p->numel,
                            rtol * maxabs(ref.data, p->numel), rtol);
            }
            hy_tensor_release(&ref);
        }
        free(lm);
        hy_xfmr_release(&x);
    }
    CHECK_OK(hy_h5_read_as(&h, "/out/loss", HY_F64, &ref));
    double want = ((double *)ref.data)[0], got = loss_sum / (double)M;
    CHECK(fabs(got - want) <= 1e-5 * fabs(want), "packed loss %.9g, torch %.9g", got, want);
    hy_tensor_release(&ref);
    free(logits);
    free(dlogits);
    hy_tensor_release(&img);
    hy_tensor_release(&lab);
    hy_h5_close(&h);
    hy_fused_release(&f);
}

int main(void) {
    RUN(test_fused_equals_members);
    RUN(test_torch_packed_network);
    return check_exit("test_packed");
}
