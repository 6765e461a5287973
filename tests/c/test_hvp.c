/* test_hvp.c: loss, gradient and Hessian-vector products over a dataset (core/nn/hvp.h) against
 * double-precision references on the tiny ViT (check_tiny_vit, 24 synthetic images).
 *  - The classifier head's block of the Hessian is exact and analytic: for logits = W z + b,
 *    H[(k,i),(k',j)] = (1/N) sum_n (p_nk d_kk' - p_nk p_nk') u_ni u_nj, u_n = [z_n; 1], with the
 *    features z_n and probabilities p_n from the double-precision twin of the forward
 *    (tests/c/ref_xfmr.c; z_n read through probe heads e_d). hy_hvp along directions supported
 *    on the head must give H_head v to 1e-4 of max |H v| (float gradients differenced over a step
 *    of 1e-3 |theta|: the float noise / h is ~1e-5 of |Hv|, the O(h^2) term smaller).
 *  - Along whole-model directions (random, and a pruning direction: gates folded into the
 *    projections, minus the base), v^T H v against a second difference of the double-precision
 *    loss (Richardson-extrapolated, corrected for the float rounding of theta +- t v) to 1e-3
 *    relative, and the symmetry u^T H v = v^T H u.
 *  - The gradient's head block against (1/N) sum_n (p_n - y_n) u_n^T; independence of the batch
 *    size; parameters restored bit-exactly; folding gates leaves the forward unchanged.
 * Seed: HYDRA_SEED (printed). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/base.h"
#include "check.h"
#include "nn/hvp.h"
#include "data/loader.h"
#include "ref_xfmr.h"
#include "tensor/rng.h"
#include "nn/train.h"
#include "nn/xfmr.h"

#define N_ROWS 24

typedef struct fixture {
    hy_xfmr m;
    hy_dataset ds;
    hy_loader ld;      /* one batch holding every row, normalised as the model sees it */
    hy_batch in;
} fixture;

static void setup(fixture *f, uint64_t seed) {
    memset(f, 0, sizeof *f);
    hy_xfmr_config c = check_tiny_vit();
    CHECK_OK(hy_xfmr_new(&f->m, &c));
    hy_xfmr_init(&f->m, seed);
    /* larger head weights than the init's 0.02 so that the softmax is far from uniform */
    hy_rng r;
    hy_rng_seed(&r, seed + 1);
    for (size_t i = 0; i < c.n_classes * c.d_model; i++)
        f->m.p.head_w[i] = (float)(0.5 * hy_rng_normal(&r));
    for (size_t i = 0; i < c.n_classes; i++) f->m.p.head_b[i] = (float)(0.3 * hy_rng_normal(&r));
    hy_tensor img, lab;
    CHECK_OK(hy_synth_images(&img, &lab, N_ROWS, c.image_size, c.n_classes, seed + 2));
    CHECK_OK(hy_dataset_from_images(&f->ds, &img, &lab, 0.2, 0.3, 0));
    hy_tensor_release(&img);
    hy_tensor_release(&lab);
    CHECK_OK(hy_loader_new(&f->ld, &f->ds, N_ROWS, 0, NULL, 0));
    CHECK(hy_loader_next(&f->ld) == N_ROWS, "one batch of every row");
    hy_train_input(&f->ld, &f->in);
}

static void teardown(fixture *f) {
    hy_loader_release(&f->ld);
    hy_dataset_release(&f->ds);
    hy_xfmr_release(&f->m);
}

/* Mean cross-entropy of the double-precision forward at the model's current parameters. */
static double ref_loss(fixture *f, double *probs) {
    const size_t K = f->m.cfg.n_classes;
    double *lg = malloc(N_ROWS * K * sizeof *lg);
    ref_xfmr_forward(&f->m, &f->in, N_ROWS, false, 0, lg);
    double s = 0;
    for (size_t n = 0; n < N_ROWS; n++) {
        double mx = -INFINITY, z = 0;
        for (size_t k = 0; k < K; k++) mx = fmax(mx, lg[n * K + k]);
        for (size_t k = 0; k < K; k++) z += exp(lg[n * K + k] - mx);
        s += log(z) + mx - lg[n * K + (size_t)f->ds.labels[n]];
        if (probs)
            for (size_t k = 0; k < K; k++) probs[n * K + k] = exp(lg[n * K + k] - mx) / z;
    }
    free(lg);
    return s / N_ROWS;
}

/* u_n = [z_n; 1] (N x (D+1)) from probe heads, and p_n (N x K), in double. */
static void head_features(fixture *f, double *u, double *p) {
    const size_t K = f->m.cfg.n_classes, D = f->m.cfg.d_model;
    float *w = f->m.p.head_w, *b = f->m.p.head_b;
    float *ws = malloc(K * D * sizeof *ws), *bs = malloc(K * sizeof *bs);
    memcpy(ws, w, K * D * sizeof *ws);
    memcpy(bs, b, K * sizeof *bs);
    double *lg = malloc(N_ROWS * K * sizeof *lg);
    memset(b, 0, K * sizeof *b);
    for (size_t d = 0; d < D; d++) {
        memset(w, 0, K * D * sizeof *w);
        w[d] = 1.0f;   /* logit 0 = z_d */
        ref_xfmr_forward(&f->m, &f->in, N_ROWS, false, 0, lg);
        for (size_t n = 0; n < N_ROWS; n++) u[n * (D + 1) + d] = lg[n * K];
    }
    for (size_t n = 0; n < N_ROWS; n++) u[n * (D + 1) + D] = 1.0;
    memcpy(w, ws, K * D * sizeof *ws);
    memcpy(b, bs, K * sizeof *bs);
    ref_loss(f, p);
    free(ws); free(bs); free(lg);
}

/* Head block index (k, i) -> parameter offset: i < D is head.weight[k][i], i = D head.bias[k]. */
static size_t head_off(const hy_xfmr *m, size_t k, size_t i) {
    const size_t D = m->cfg.d_model;
    return i < D ? (size_t)(m->p.head_w - m->params) + k * D + i
                 : (size_t)(m->p.head_b - m->params) + k;
}

static double dot(const double *a, const double *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static double param_norm(const hy_xfmr *m) {
    double s = 0;
    for (size_t i = 0; i < m->n_params; i++) s += (double)m->params[i] * (double)m->params[i];
    return sqrt(s);
}

static void test_grad_head_block_and_batch_size(void) {
    fixture f;
    setup(&f, check_seed());
    const size_t K = f.m.cfg.n_classes, D = f.m.cfg.d_model, P = f.m.n_params;
    double *u = malloc(N_ROWS * (D + 1) * sizeof *u), *p = malloc(N_ROWS * K * sizeof *p);
    head_features(&f, u, p);
    double *g = malloc(P * sizeof *g), *g5 = malloc(P * sizeof *g5);
    double loss, loss5;
    CHECK_OK(hy_hvp_grad(&f.m, &f.ds, N_ROWS, &loss, g));
    CHECK_OK(hy_hvp_grad(&f.m, &f.ds, 5, &loss5, g5));
    double want_loss = ref_loss(&f, NULL);
    CHECK(fabs(loss - want_loss) <= 1e-5 * want_loss, "loss %.9g vs double %.9g", loss, want_loss);
    CHECK(fabs(loss5 - loss) <= 1e-6 * loss, "loss batch 5 %.9g vs 24 %.9g", loss5, loss);
    check_close_d("grad: batch 5 vs one batch", g5, g, P, 1e-7, 1e-4);
    double *gw = malloc(K * (D + 1) * sizeof *gw), *gg = malloc(K * (D + 1) * sizeof *gg);
    for (size_t k = 0; k < K; k++)
        for (size_t i = 0; i <= D; i++) {
            double s = 0;
            for (size_t n = 0; n < N_ROWS; n++)
                s += (p[n * K + k] - (f.ds.labels[n] == (int32_t)k)) * u[n * (D + 1) + i];
            gw[k * (D + 1) + i] = s / N_ROWS;
            gg[k * (D + 1) + i] = g[head_off(&f.m, k, i)];
        }
    check_close_d("grad: head block vs analytic", gg, gw, K * (D + 1), 1e-6, 1e-4);
    /* labelled data only */
    for (size_t n = 0; n < 3; n++) f.ds.labels[n] = -1;
    CHECK_FAIL_HAS(hy_hvp_grad(&f.m, &f.ds, 8, &loss, g), HY_EINVAL,
                   "hvp: sample 1 of the dataset has label -1");
    free(u); free(p); free(g); free(g5); free(gw); free(gg);
    teardown(&f);
}

static void test_hvp_head_block_exact(void) {
    fixture f;
    setup(&f, check_seed() + 10);
    const size_t K = f.m.cfg.n_classes, D = f.m.cfg.d_model, P = f.m.n_params, Q = K * (D + 1);
    double *u = malloc(N_ROWS * (D + 1) * sizeof *u), *p = malloc(N_ROWS * K * sizeof *p);
    head_features(&f, u, p);
    /* the exact head Hessian, dense Q x Q */
    double *H = calloc(Q * Q, sizeof *H);
    for (size_t n = 0; n < N_ROWS; n++)
        for (size_t k = 0; k < K; k++)
            for (size_t k2 = 0; k2 < K; k2++) {
                double a = (k == k2 ? p[n * K + k] : 0) - p[n * K + k] * p[n * K + k2];
                for (size_t i = 0; i <= D; i++)
                    for (size_t j = 0; j <= D; j++)
                        H[(k * (D + 1) + i) * Q + k2 * (D + 1) + j] +=
                            a * u[n * (D + 1) + i] * u[n * (D + 1) + j] / N_ROWS;
            }
    float *theta = malloc(P * sizeof *theta);
    memcpy(theta, f.m.params, P * sizeof *theta);
    const double h = 1e-3 * param_norm(&f.m);
    double *v = calloc(P, sizeof *v), *hv = malloc(P * sizeof *hv);
    double *vq = malloc(Q * sizeof *vq), *want = malloc(Q * sizeof *want),
           *got = malloc(Q * sizeof *got);
    hy_rng r;
    hy_rng_seed(&r, check_seed() + 11);
    for (int trial = 0; trial < 3; trial++) {
        /* trial 0, 1: random directions on the head; 2: one head.weight row only */
        memset(v, 0, P * sizeof *v);
        for (size_t q = 0; q < Q; q++) {
            size_t k = q / (D + 1), i = q % (D + 1);
            vq[q] = trial < 2 || k == 1 ? hy_rng_normal(&r) * (trial == 1 ? 10.0 : 1.0) : 0.0;
            v[head_off(&f.m, k, i)] = vq[q];
        }
        CHECK_OK(hy_hvp(&f.m, &f.ds, 7, v, h, hv, NULL));
        CHECK(memcmp(theta, f.m.params, P * sizeof *theta) == 0,
              "hvp restores the parameters bit-exactly");
        double mx = 0;
        for (size_t q = 0; q < Q; q++) {
            double s = 0;
            for (size_t q2 = 0; q2 < Q; q2++) s += H[q * Q + q2] * vq[q2];
            want[q] = s;
            mx = fmax(mx, fabs(s));
            got[q] = hv[head_off(&f.m, q / (D + 1), q % (D + 1))];
        }
        char what[64];
        snprintf(what, sizeof what, "H v, head block, direction %d", trial);
        check_close_d(what, got, want, Q, 1e-4 * mx, 0);
        double vhv = dot(vq, want, Q), vhv_got = dot(v, hv, P);
        CHECK(vhv > 0, "the head block is positive semi-definite (v^T H v = %g)", vhv);
        CHECK(fabs(vhv_got - vhv) <= 1e-4 * vhv, "v^T H v %.9g vs exact %.9g", vhv_got, vhv);
    }
    /* v = 0: H v = 0 */
    memset(v, 0, P * sizeof *v);
    CHECK_OK(hy_hvp(&f.m, &f.ds, 7, v, h, hv, NULL));
    double z = 0;
    for (size_t i = 0; i < P; i++) z = fmax(z, fabs(hv[i]));
    CHECK(z == 0, "H 0 = 0");
    CHECK_FAIL_HAS(hy_hvp(&f.m, &f.ds, 7, v, 0.0, hv, NULL), HY_EINVAL,
                   "hvp: the step h must be a finite number > 0");
    free(u); free(p); free(H); free(theta); free(v); free(hv); free(vq); free(want); free(got);
    teardown(&f);
}

/* v^T H v of the double-precision loss by second differences along v (|v| = 1), each point
 * theta + d with d = fl(theta + s t v) - theta, corrected by g^T (d+ + d-) for the rounding, and
 * Richardson-extrapolated over t and t/2. */
static double ref_vhv(fixture *f, const double *v, const double *g, double t0) {
    const size_t P = f->m.n_params;
    float *theta = malloc(P * sizeof *theta);
    memcpy(theta, f->m.params, P * sizeof *theta);
    double l0 = ref_loss(f, NULL), est[2];
    for (int e = 0; e < 2; e++) {
        double t = e == 0 ? t0 : t0 / 2, l[2], corr = 0;
        for (int s = 0; s < 2; s++) {
            for (size_t i = 0; i < P; i++)
                f->m.params[i] = (float)((double)theta[i] + (s ? -t : t) * v[i]);
            for (size_t i = 0; i < P; i++)
                corr += g[i] * ((double)f->m.params[i] - (double)theta[i]);
            l[s] = ref_loss(f, NULL);
        }
        memcpy(f->m.params, theta, P * sizeof *theta);
        est[e] = (l[0] + l[1] - 2 * l0 - corr) / (t * t);
    }
    free(theta);
    return (4 * est[1] - est[0]) / 3;
}

static void test_hvp_whole_model(void) {
    fixture f;
    setup(&f, check_seed() + 20);
    const size_t P = f.m.n_params, L = f.m.cfg.depth, NH = f.m.cfg.n_heads;
    double *g = malloc(P * sizeof *g), loss;
    CHECK_OK(hy_hvp_grad(&f.m, &f.ds, N_ROWS, &loss, g));
    const double h = 1e-3 * param_norm(&f.m);
    double *v[3], *hv[3];
    hy_rng r;
    hy_rng_seed(&r, check_seed() + 21);
    for (int d = 0; d < 3; d++) {
        v[d] = calloc(P, sizeof(double));
        hv[d] = malloc(P * sizeof(double));
    }
    /* 0, 1: random on every tensor (padding stays 0); 2: pruning head 1 of every layer, gates
     * folded into the projections, minus the base */
    for (size_t t = 0; t < f.m.n_tensors; t++)
        for (size_t i = 0; i < f.m.table[t].numel; i++)
            for (int d = 0; d < 2; d++) v[d][f.m.table[t].offset + i] = hy_rng_normal(&r);
    hy_xfmr pr;
    memset(&pr, 0, sizeof pr);
    CHECK_OK(hy_xfmr_new(&pr, &f.m.cfg));
    memcpy(pr.params, f.m.params, P * sizeof(float));
    for (size_t l = 0; l < L; l++) hy_xfmr_set_gate(&pr, l, 1 % NH, 0.0f);
    /* folding keeps the forward: same logits, bitwise */
    const size_t K = f.m.cfg.n_classes;
    float *la = malloc(N_ROWS * K * sizeof *la), *lb = malloc(N_ROWS * K * sizeof *lb);
    CHECK_OK(hy_train_predict(&pr, &f.ds, 10, la, NULL));
    hy_hvp_fold_gates(&pr);
    for (size_t l = 0; l < L; l++)
        for (size_t hh = 0; hh < NH; hh++) CHECK(hy_xfmr_gate(&pr, l, hh) == 1.0f, "gate 1");
    CHECK_OK(hy_train_predict(&pr, &f.ds, 10, lb, NULL));
    check_close("folded gates: same logits", lb, la, N_ROWS * K, 0, 0);
    for (size_t i = 0; i < P; i++) v[2][i] = (double)pr.params[i] - (double)f.m.params[i];
    hy_xfmr_release(&pr);
    for (int d = 0; d < 3; d++) {
        double n = sqrt(dot(v[d], v[d], P));
        for (size_t i = 0; i < P; i++) v[d][i] /= n;
        CHECK_OK(hy_hvp(&f.m, &f.ds, 9, v[d], h, hv[d], NULL));
        double got = dot(v[d], hv[d], P), want = ref_vhv(&f, v[d], g, 0.05);
        double scale = sqrt(dot(hv[d], hv[d], P));
        CHECK(fabs(got - want) <= 1e-3 * scale, "direction %d: v^T H v %.9g vs double %.9g "
              "(|Hv| %.3g)", d, got, want, scale);
    }
    double uhv = dot(v[0], hv[1], P), vhu = dot(v[1], hv[0], P);
    double sc = sqrt(dot(hv[0], hv[0], P) * dot(hv[1], hv[1], P));
    CHECK(fabs(uhv - vhu) <= 1e-3 * sqrt(sc), "symmetry: u^T H v %.9g vs v^T H u %.9g", uhv, vhu);
    for (int d = 0; d < 3; d++) { free(v[d]); free(hv[d]); }
    free(g); free(la); free(lb);
    teardown(&f);
}

int main(void) {
    RUN(test_grad_head_block_and_batch_size);
    RUN(test_hvp_head_block_exact);
    RUN(test_hvp_whole_model);
    return check_exit("test_hvp");
}
