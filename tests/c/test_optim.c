/* test_optim.c: AdamW against a double-precision twin of torch.optim.AdamW's update, no decay
 * outside decayed segments, the warmup + cosine schedule, grad-norm clipping, config errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nn/optim.h"
#include "tensor/rng.h"

/* tolerances (float update vs double reference after several steps) */
static const double ADAMW_ATOL = 1e-6, ADAMW_RTOL = 1e-5;

static hy_adamw_config default_cfg(void) {
    hy_adamw_config c = {.learning_rate = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                         .weight_decay = 0.05};
    return c;
}

/* The PyTorch AdamW update in double (torch/optim/adamw.py, single-tensor path). */
static void ref_adamw(double *p, double *m, double *v, const double *g, const int *decay,
                      size_t n, int64_t t, double lr, const hy_adamw_config *c) {
    double bc1 = 1 - pow(c->beta1, (double)t), bc2 = 1 - pow(c->beta2, (double)t);
    for (size_t i = 0; i < n; i++) {
        if (decay[i]) p[i] *= 1 - lr * c->weight_decay;
        m[i] = c->beta1 * m[i] + (1 - c->beta1) * g[i];
        v[i] = c->beta2 * v[i] + (1 - c->beta2) * g[i] * g[i];
        p[i] -= (lr / bc1) * m[i] / (sqrt(v[i]) / sqrt(bc2) + c->eps);
    }
}

static void test_first_step_is_lr_times_sign(void) {
    hy_adamw_config c = default_cfg();
    c.weight_decay = 0;
    hy_adamw o;
    CHECK_OK(hy_adamw_new(&o, &c, 3, NULL, 0));
    float p[3] = {1.0f, -2.0f, 0.5f}, g[3] = {0.5f, -3.0f, 1e-3f};
    hy_adamw_step(&o, p, g, 0.1);
    /* mhat = g, vhat = g^2: the first step moves every coordinate by lr*sign(g) (up to eps) */
    float want[3] = {0.9f, -1.9f, 0.4f};
    check_close("first step", p, want, 3, 1e-5, 0);
    CHECK(o.t == 1, "t = %lld", (long long)o.t);
    hy_adamw_release(&o);
    hy_adamw_release(&o);   /* idempotent */
}

static void test_matches_reference_with_segments(void) {
    enum { N = 1000, STEPS = 7 };
    hy_rng r;
    hy_rng_seed(&r, check_seed());
    hy_adamw_config c = default_cfg();
    hy_optim_segment seg[3] = {{0, 300, 1}, {300, 200, 0}, {500, 400, 1}};   /* 900..999 none */
    int decay[N];
    for (size_t i = 0; i < N; i++) decay[i] = (i < 300) || (i >= 500 && i < 900);
    static float p[N], g[N];
    static double pd[N], md[N], vd[N], gd[N];
    for (size_t i = 0; i < N; i++) {
        p[i] = (float)hy_rng_normal(&r);
        pd[i] = p[i];
    }
    hy_adamw o;
    CHECK_OK(hy_adamw_new(&o, &c, N, seg, 3));
    for (int64_t t = 1; t <= STEPS; t++) {
        for (size_t i = 0; i < N; i++) {
            g[i] = (float)(hy_rng_normal(&r) * (i % 7 == 0 ? 1e-4 : 1.0));
            gd[i] = g[i];
        }
        double lr = 1e-2 * (double)t / STEPS;
        hy_adamw_step(&o, p, g, lr);
        ref_adamw(pd, md, vd, gd, decay, N, t, lr, &c);
    }
    float want[N];
    for (size_t i = 0; i < N; i++) want[i] = (float)pd[i];
    check_close("adamw params after 7 steps", p, want, N, ADAMW_ATOL, ADAMW_RTOL);
    hy_adamw_release(&o);
}

static void test_no_decay_outside_segments(void) {
    hy_adamw_config c = default_cfg();
    c.weight_decay = 0.5;
    hy_optim_segment seg[1] = {{2, 2, 1}};
    hy_adamw o;
    CHECK_OK(hy_adamw_new(&o, &c, 6, seg, 1));
    float p[6] = {1, 2, 3, 4, 5, 6}, g[6] = {0};
    hy_adamw_step(&o, p, g, 0.1);   /* zero gradient: only decay can move a parameter */
    float f = (float)(1.0 - 0.1 * 0.5);
    float want[6] = {1, 2, 3 * f, 4 * f, 5, 6};
    for (int i = 0; i < 6; i++) CHECK(p[i] == want[i], "p[%d] = %g, want %g", i,
                                                (double)p[i], (double)want[i]);
    hy_adamw_reset(&o);
    CHECK(o.t == 0 && o.m[0] == 0 && o.v[5] == 0, "reset");
    hy_adamw_release(&o);
}

static void test_config_errors(void) {
    hy_adamw o;
    hy_adamw_config c = default_cfg();
    c.learning_rate = -0.1;
    CHECK_FAIL(hy_adamw_new(&o, &c, 4, NULL, 0), HY_EINVAL,
               "optim: learning_rate must be > 0 (got -0.1)");
    c = default_cfg();
    c.beta1 = 1.5;
    CHECK_FAIL(hy_adamw_new(&o, &c, 4, NULL, 0), HY_EINVAL,
               "optim: beta1 must be in [0, 1) (got 1.5)");
    c = default_cfg();
    c.beta2 = 1.0;
    CHECK_FAIL(hy_adamw_config_check(&c), HY_EINVAL, "optim: beta2 must be in [0, 1) (got 1)");
    c = default_cfg();
    c.eps = 0;
    CHECK_FAIL(hy_adamw_config_check(&c), HY_EINVAL, "optim: eps must be > 0 (got 0)");
    c = default_cfg();
    c.weight_decay = -1;
    CHECK_FAIL(hy_adamw_config_check(&c), HY_EINVAL,
               "optim: weight_decay must be >= 0 (got -1)");
    c = default_cfg();
    hy_optim_segment seg[2] = {{0, 2, 1}, {3, 5, 0}};
    CHECK_FAIL(hy_adamw_new(&o, &c, 4, seg, 2), HY_EINVAL,
               "optim: segment 1 [3, 8) outside the block of 4");
    CHECK(o.m == NULL && o.n == 0, "object left zeroed");
    hy_sched_kind k;
    CHECK_FAIL(hy_sched_parse("linear", &k), HY_EINVAL,
               "optim: unknown schedule 'linear' (expected cosine or constant)");
    CHECK_OK(hy_sched_parse("constant", &k));
    CHECK(k == HY_SCHED_CONSTANT, "constant");
}

static void test_schedule(void) {
    hy_schedule s = {HY_SCHED_COSINE, 1.0, 0.1, 4, 104};
    CHECK(hy_sched_lr(&s, 0) == 0.25, "warmup step 0: %g", hy_sched_lr(&s, 0));
    CHECK(hy_sched_lr(&s, 3) == 1.0, "warmup end: %g", hy_sched_lr(&s, 3));
    CHECK(hy_sched_lr(&s, 4) == 1.0, "cosine start: %g", hy_sched_lr(&s, 4));
    CHECK(fabs(hy_sched_lr(&s, 54) - 0.55) < 1e-12, "cosine midpoint: %g", hy_sched_lr(&s, 54));
    CHECK(fabs(hy_sched_lr(&s, 104) - 0.1) < 1e-12, "cosine end: %g", hy_sched_lr(&s, 104));
    CHECK(fabs(hy_sched_lr(&s, 500) - 0.1) < 1e-12, "past the end: %g", hy_sched_lr(&s, 500));
    double prev = 2;
    for (int64_t t = 4; t <= 104; t++) {
        double lr = hy_sched_lr(&s, t);
        CHECK(lr <= prev, "cosine not monotone at %lld", (long long)t);
        prev = lr;
    }
    hy_schedule k = {HY_SCHED_CONSTANT, 0.5, 0, 0, 10};
    CHECK(hy_sched_lr(&k, 0) == 0.5 && hy_sched_lr(&k, 9) == 0.5, "constant");
}

static void test_clip(void) {
    float g[4] = {3, 4, 0, 0};
    double norm = hy_grad_clip(g, 4, 10.0);
    CHECK(norm == 5.0 && g[0] == 3 && g[1] == 4, "no clip below max (norm %g)", norm);
    norm = hy_grad_clip(g, 4, 1.0);
    CHECK(norm == 5.0, "norm before clipping %g", norm);
    float want[4] = {0.6f, 0.8f, 0, 0};
    check_close("clipped", g, want, 4, 1e-6, 0);
    CHECK(fabs(hy_grad_norm(g, 4) - 1.0) < 1e-6, "norm after clip %g", hy_grad_norm(g, 4));
    float h[5] = {1, NAN, 2, 3, 4};
    norm = hy_grad_clip(h, 5, 1.0);
    CHECK(isnan(norm) && h[0] == 1, "non-finite norm reported, grads untouched");
    norm = hy_grad_clip(g, 4, 0);
    CHECK(fabs(norm - 1.0) < 1e-6, "max_norm 0 disables clipping");
    /* a large vector (blocks on the threads, an odd length for the tails) against a double sum */
    size_t n = 300001;
    float *big = malloc(n * sizeof *big);
    hy_rng r;
    hy_rng_seed(&r, check_seed());
    double sq = 0;
    for (size_t i = 0; i < n; i++) {
        big[i] = (float)hy_rng_normal(&r);
        sq += (double)big[i] * (double)big[i];
    }
    double got = hy_grad_norm(big, n);
    CHECK(fabs(got - sqrt(sq)) <= 1e-12 * sqrt(sq), "norm of %zu floats %.17g, double sum %.17g",
          n, got, sqrt(sq));
    free(big);
}

int main(void) {
    RUN(test_first_step_is_lr_times_sign);
    RUN(test_matches_reference_with_segments);
    RUN(test_no_decay_outside_segments);
    RUN(test_config_errors);
    RUN(test_schedule);
    RUN(test_clip);
    return check_exit("test_optim");
}
