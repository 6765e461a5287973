/* test_prune.c: Taylor scores equal a finite-difference derivative of the loss w.r.t. each gate;
 * the circuit search recovers a circuit planted in a constructed model; member gates (keep
 * counts, overlap penalty, bootstrap determinism, Jaccard); gate validation messages; restoring
 * pruned heads' weights. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "hydra/prune.h"
#include "nn/train.h"

/* tolerances: |a - n| / max(|a| + |n|, 1e-4) of Taylor vs central differences (float32 model) */
static const struct { double eps, tol; } FD = {1e-2, 2e-2};

static hy_xfmr_config small_cfg(void) {
    hy_xfmr_config c;
    memset(&c, 0, sizeof c);
    c.kind = HY_XFMR_VIT;
    c.image_size = 28;
    c.channels = 1;
    c.patch = 7;
    c.d_model = 16;
    c.n_heads = 4;
    c.depth = 2;
    c.d_mlp = 24;
    c.n_classes = 4;
    return c;
}

static void perturbed(hy_xfmr *x, uint64_t seed, double sd) {
    hy_xfmr_config c = small_cfg();
    CHECK_OK(hy_xfmr_new(x, &c));
    hy_xfmr_init(x, seed);
    hy_rng r;
    hy_rng_seed(&r, seed + 99);
    for (size_t i = 0; i < x->n_params; i++) x->params[i] += (float)(sd * hy_rng_normal(&r));
}

static void synth(hy_dataset *d, size_t n, size_t classes, uint64_t seed) {
    hy_tensor img, lab;
    CHECK_OK(hy_synth_images(&img, &lab, n, 28, classes, seed));
    CHECK_OK(hy_dataset_from_images(d, &img, &lab, 0.2, 0.3, 0));
    hy_tensor_release(&img);
    hy_tensor_release(&lab);
}

/* loss (double) of rows [i, i+n) of ds with m's current gates */
static double loss_of(hy_xfmr *m, const hy_dataset *ds, size_t first, size_t n) {
    hy_loader ld;
    CHECK_OK(hy_loader_new(&ld, ds, n, 0, NULL, 0));
    int64_t idx[8];
    for (size_t i = 0; i < n; i++) idx[i] = (int64_t)(first + i);
    hy_loader_fill(&ld, idx, n);
    hy_batch b = {.images = ld.images};
    float logits[8 * 4];
    double loss = 0.0;
    CHECK_OK(hy_xfmr_forward(m, &b, n, logits));
    CHECK_OK(hy_xfmr_loss(m, logits, ld.labels, n, 0.0f, &loss, NULL));
    hy_loader_release(&ld);
    return loss;
}

/* ===== Taylor vs finite differences ===== */

static void test_taylor_fd(void) {
    uint64_t seed = check_seed();
    hy_xfmr m;
    perturbed(&m, seed, 0.2);
    hy_dataset ds;
    synth(&ds, 6, 4, seed);
    size_t LH = m.cfg.depth * m.cfg.n_heads;
    for (size_t bs = 1; bs <= 3; bs += 2) {
        float sc[8];
        hy_subset all = {&ds, NULL, 6};
        CHECK_OK(hy_prune_taylor(&m, &all, bs, false, sc));
        double worst = 0.0;
        for (size_t i = 0; i < LH; i++) {
            double num = 0.0;
            for (size_t first = 0; first < 6; first += bs) {
                float g = m.gates[i];
                m.gates[i] = g + (float)FD.eps;
                double lp = loss_of(&m, &ds, first, bs);
                m.gates[i] = g - (float)FD.eps;
                double lm = loss_of(&m, &ds, first, bs);
                m.gates[i] = g;
                num += fabs((lp - lm) / (2.0 * FD.eps));
            }
            num /= (double)(6 / bs);
            double e = fabs((double)sc[i] - num) / fmax(fabs((double)sc[i]) + num, 1e-4);
            worst = e > worst ? e : worst;
        }
        CHECK(worst <= FD.tol, "batch %zu: worst relative error %g > %g", bs, worst, FD.tol);
        /* normalised: each layer's row has unit L2 norm and the same ranking */
        float nsc[8];
        CHECK_OK(hy_prune_taylor(&m, &all, bs, true, nsc));
        for (size_t l = 0; l < m.cfg.depth; l++) {
            double n2 = 0.0;
            for (size_t h = 0; h < m.cfg.n_heads; h++) n2 += (double)nsc[l * 4 + h] * (double)nsc[l * 4 + h];
            CHECK(fabs(n2 - 1.0) < 1e-5, "layer %zu norm^2 %g", l + 1, n2);
        }
    }
    /* grads and dgates are left zeroed */
    double s = 0.0;
    for (size_t i = 0; i < m.n_params; i++) s += fabs((double)m.grads[i]);
    CHECK(s == 0.0, "grads not zeroed (%g)", s);
    hy_dataset_release(&ds);
    hy_xfmr_release(&m);
}

/* ===== planted circuit =====
 * A constructed model (depth 3, 4 heads of size 4, d_model 16) where the planted heads are the
 * only path from the input to the logits and each carries its own piece of evidence:
 *   - dims of the residual stream: 0 holds a constant E at every token (it dominates each
 *     token's LayerNorm variance, so what heads add elsewhere barely moves the normalisation);
 *     1..n are the features (planted head j's feature j = pixel j of each 7x7 patch, through the
 *     patch embedding; n = number of planted heads); n+1 is a reference dim that is always 0;
 *     D-2, D-1 are the output dims;
 *   - planted head j: q = k = 0 (uniform attention), its value reads feature j minus the
 *     reference dim (LayerNorm's mean cancels exactly), its output column writes +q / -q into
 *     the two output dims (so the final LayerNorm's mean cancels too); every planted head has
 *     the same weights, only the feature it reads differs;
 *   - other heads: random q/k/v, output columns exactly 0; MLPs: random fc1, fc2 = 0;
 *   - classifier: logit 0 = lambda (out1 - out2) of the final LayerNorm, others 0.
 * So logit 0 = c(x) ~ kappa * sum over unmasked planted heads j of phi_j(x) (phi_j = pixel j /
 * 255), whatever else is masked, and masking a non-planted head leaves every float unchanged.
 * Data (normalisation mean 0, std 1): ID = one sample per planted head with phi = e_j and n
 * "common" samples with phi_j = 0.5 for all j, all labelled 0; OOD = samples with phi_j = 0.05.
 *   acc: the ID NLL falls as c rises, so masking an unmasked planted head strictly raises it
 *     (its own sample loses all its evidence);
 *   ood (AUROC of -MSP, MSP increasing in c >= 0): with active set S (|S| = t >= 1), c(common)
 *     = 0.5 t > c(OOD) = 0.05 t, c(e_j) = 1 > c(OOD) for j in S and 0 < c(OOD) otherwise, so
 *     AUROC = (n + |S|) / (2n): it falls by 1/(2n) with every planted head masked, down to
 *     (n+1)/(2n) > 1/2 at t = 1 (and 1/2, all ties, at t = 0);
 *   avg: the planted heads are the only ones with nonzero a and u, so the only ones above the
 *     layer's minimum.
 * Every planted head of a layer therefore scores > 0 and every other head exactly 0, whichever
 * earlier circuits are masked: the greedy recovers the planted sets for any seed and any
 * planted pattern. The seeds vary the planted pattern (1-3 heads per layer) and the random
 * weights of everything off the path. */

enum { PC_D = 16, PC_NH = 4, PC_L = 3, PC_K = 4, PC_MAXN = PC_L * (PC_NH - 1) };

static hy_xfmr_config planted_cfg(void) {
    hy_xfmr_config c = small_cfg();
    c.d_model = PC_D;
    c.n_heads = PC_NH;
    c.depth = PC_L;
    c.n_classes = PC_K;
    return c;
}

static float *pv(hy_xfmr *m, const char *name) {
    hy_param_view v;
    CHECK_OK(hy_xfmr_param(m, name, &v));
    return v.data;
}

static float *pvl(hy_xfmr *m, size_t l, const char *name) {
    char full[48];
    snprintf(full, sizeof full, "blocks.%zu.%s", l, name);
    return pv(m, full);
}

static void fill_normal(float *x, size_t n, hy_rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = (float)hy_rng_normal(r);
}

/* planted (L, NH): 1 = planted; lambda: classifier scale */
static void plant(hy_xfmr *m, const int *planted, uint64_t seed, float lambda) {
    hy_xfmr_config c = planted_cfg();
    CHECK_OK(hy_xfmr_new(m, &c));
    memset(m->params, 0, m->n_params * sizeof(float));
    const size_t D = PC_D, HS = m->HS, F = 49, o1 = D - 2, o2 = D - 1;
    const float E = 50.0f, w = 4.0f, q = 1.0f;
    size_t n = 0;
    for (size_t i = 0; i < PC_L * PC_NH; i++) n += planted[i] != 0;
    const size_t ref = n + 1;
    hy_rng r;
    hy_rng_seed(&r, seed);
    pv(m, "cls_token")[0] = E;
    pv(m, "patch_embed.proj.bias")[0] = E;
    float *pe = pv(m, "patch_embed.proj.weight");
    for (size_t j = 0; j < n; j++) pe[(1 + j) * F + j] = 1.0f;   /* feature j = pixel j */
    size_t j = 0;
    for (size_t l = 0; l < PC_L; l++) {
        float *n1 = pvl(m, l, "norm1.weight"), *n2 = pvl(m, l, "norm2.weight");
        for (size_t d = 0; d < D; d++) n1[d] = n2[d] = 1.0f;
        fill_normal(pvl(m, l, "mlp.fc1.weight"), m->cfg.d_mlp * D, &r);
        float *qkv = pvl(m, l, "attn.qkv.weight"), *qb = pvl(m, l, "attn.qkv.bias");
        float *proj = pvl(m, l, "attn.proj.weight");
        for (size_t h = 0; h < PC_NH; h++) {
            if (!planted[l * PC_NH + h]) {
                for (size_t t = 0; t < 3; t++) {   /* q, k, v rows: random */
                    fill_normal(qkv + (t * D + h * HS) * D, HS * D, &r);
                    fill_normal(qb + t * D + h * HS, HS, &r);
                }
                continue;                         /* output columns stay 0 */
            }
            float *v0 = qkv + (2 * D + h * HS) * D;   /* first value row of head h */
            v0[1 + j] = w;
            v0[ref] = -w;
            proj[o1 * D + h * HS] = q;
            proj[o2 * D + h * HS] = -q;
            j++;
        }
    }
    float *nw = pv(m, "norm.weight");
    for (size_t d = 0; d < D; d++) nw[d] = 1.0f;
    float *hw = pv(m, "head.weight");
    hw[0 * D + o1] = lambda;
    hw[0 * D + o2] = -lambda;
}

/* n_each images per feature vector in phis (rows of n values in [0, 1]): pixel j of every
 * patch = round(255 phi_j), everything else 0; labels 0; normalisation mean 0, std 1 */
static void planted_data(hy_dataset *d, const double *phis, size_t rows, size_t n) {
    hy_tensor img, lab;
    int64_t si[3] = {(int64_t)rows, 28, 28}, sl[1] = {(int64_t)rows};
    CHECK_OK(hy_tensor_alloc(&img, HY_U8, 3, si));
    CHECK_OK(hy_tensor_alloc(&lab, HY_I32, 1, sl));
    uint8_t *px = img.data;
    memset(px, 0, rows * 28 * 28);
    for (size_t i = 0; i < rows; i++) {
        ((int32_t *)lab.data)[i] = 0;
        for (size_t j = 0; j < n; j++)
            for (size_t py = 0; py < 4; py++)
                for (size_t pxi = 0; pxi < 4; pxi++)
                    px[i * 784 + (py * 7 + j / 7) * 28 + pxi * 7 + j % 7] =
                        (uint8_t)lround(255.0 * phis[i * n + j]);
    }
    CHECK_OK(hy_dataset_from_images(d, &img, &lab, 0.0, 1.0, 0));
    hy_tensor_release(&img);
    hy_tensor_release(&lab);
}

/* one planted pattern: the circuit search recovers it under acc, ood and avg */
static void run_planted(uint64_t seed) {
    hy_rng r;
    hy_rng_seed(&r, seed);
    int planted[PC_L * PC_NH] = {0};
    size_t keep[PC_L], n = 0;
    for (size_t l = 0; l < PC_L; l++) {
        int64_t perm[PC_NH] = {0, 1, 2, 3};
        hy_rng_shuffle(&r, perm, PC_NH);
        keep[l] = 1 + hy_rng_below(&r, PC_NH - 1);
        for (size_t i = 0; i < keep[l]; i++) planted[l * PC_NH + (size_t)perm[i]] = 1;
        n += keep[l];
    }
    /* ID: e_j for every planted head j, then n common rows; OOD: 4 rows of 0.05 */
    double idphi[2 * PC_MAXN * PC_MAXN] = {0}, oodphi[4 * PC_MAXN];
    for (size_t j = 0; j < n; j++) {
        idphi[j * n + j] = 1.0;
        for (size_t k = 0; k < n; k++) idphi[(n + j) * n + k] = 0.5;
    }
    for (size_t i = 0; i < 4 * n; i++) oodphi[i] = 0.05;
    hy_dataset id, ood;
    planted_data(&id, idphi, 2 * n, n);
    planted_data(&ood, oodphi, 4, n);
    hy_subset ids = {&id, NULL, 2 * n}, oods = {&ood, NULL, 4};
    /* lambda: the common row's logit 0 is 3 with every head on (logits are linear in it) */
    hy_xfmr m;
    plant(&m, planted, seed + 1, 1.0f);
    float probs[2 * PC_MAXN * PC_K];
    CHECK_OK(hy_train_predict(&m, &id, 8, NULL, probs));
    double p0 = (double)probs[n * PC_K], c1 = log(p0 * (PC_K - 1) / (1.0 - p0));
    CHECK(c1 > 0.0, "seed %llu: the common row's logit %g is not positive",
          (unsigned long long)seed, c1);
    hy_xfmr_release(&m);
    plant(&m, planted, seed + 1, (float)(3.0 / c1));
    const hy_objective objs[3] = {HY_OBJ_ACC, HY_OBJ_OOD, HY_OBJ_AVG};
    for (size_t o = 0; o < 3; o++) {
        float scores[PC_L * PC_NH], circuit[PC_L * PC_NH];
        CHECK_OK(hy_prune_circuit(&m, &ids, &oods, objs[o], keep, NULL, 0.0, 8, scores,
                                  circuit));
        for (size_t i = 0; i < PC_L * PC_NH; i++) {
            CHECK(circuit[i] == (float)planted[i], "seed %llu %s: head %zu of layer %zu: circuit "
                  "%g, planted %d (score %g)", (unsigned long long)seed,
                  hy_objective_name(objs[o]), i % PC_NH + 1, i / PC_NH + 1, (double)circuit[i],
                  planted[i], (double)scores[i]);
            if (planted[i])
                CHECK(scores[i] > 0.0f, "seed %llu %s: planted head %zu of layer %zu scores %g",
                      (unsigned long long)seed, hy_objective_name(objs[o]), i % PC_NH + 1,
                      i / PC_NH + 1, (double)scores[i]);
            else
                CHECK(scores[i] == 0.0f, "seed %llu %s: unplanted head %zu of layer %zu scores "
                      "%g", (unsigned long long)seed, hy_objective_name(objs[o]),
                      i % PC_NH + 1, i / PC_NH + 1, (double)scores[i]);
        }
        for (size_t i = 0; i < PC_L * PC_NH; i++)
            CHECK(m.gates[i] == 1.0f, "seed %llu: gate %zu not restored", (unsigned long long)seed,
                  i);
    }
    /* the ood score is exactly the AUROC step of the construction: 1 / (2n) per head */
    float scores[PC_L * PC_NH], circuit[PC_L * PC_NH];
    CHECK_OK(hy_prune_circuit(&m, &ids, &oods, HY_OBJ_OOD, keep, NULL, 0.0, 8, scores, circuit));
    for (size_t i = 0; i < PC_L * PC_NH; i++)
        if (planted[i])
            CHECK(fabs((double)scores[i] - 0.5 / (double)n) < 1e-6, "seed %llu: ood score %g, "
                  "expected %g", (unsigned long long)seed, (double)scores[i], 0.5 / (double)n);
    hy_xfmr_release(&m);
    hy_dataset_release(&id);
    hy_dataset_release(&ood);
}

static void test_circuit_planted(void) {
    uint64_t base = check_seed();
    for (uint64_t i = 0; i < 6; i++) run_planted(hy_hash64(&i, sizeof i, base));
    /* argument errors */
    hy_xfmr m;
    perturbed(&m, base, 0.2);
    hy_dataset ds;
    synth(&ds, 8, 4, base + 1);
    hy_subset id = {&ds, NULL, 8};
    float scores[8], circuit[8];
    const size_t keep[2] = {1, 2};
    CHECK_FAIL(hy_prune_circuit(&m, &id, NULL, HY_OBJ_AVG, keep, NULL, 0.0, 16, scores, circuit),
               HY_EINVAL, "prune: objective avg needs a validation OOD set");
    CHECK_FAIL(hy_prune_circuit(&m, &id, NULL, HY_OBJ_OOD, keep, NULL, 0.0, 16, scores, circuit),
               HY_EINVAL, "prune: objective ood needs a validation OOD set");
    const size_t bad[2] = {1, 5};
    CHECK_FAIL(hy_prune_circuit(&m, &id, NULL, HY_OBJ_ACC, bad, NULL, 0.0, 16, scores, circuit),
               HY_EINVAL, "prune: circuit size of layer 2 is 5 (expected 1 to 4)");
    hy_dataset_release(&ds);
    hy_xfmr_release(&m);
}

/* ===== members ===== */

static void test_members(void) {
    uint64_t seed = check_seed();
    hy_xfmr m;
    perturbed(&m, seed, 0.2);
    hy_dataset ds;
    synth(&ds, 12, 4, seed + 3);
    hy_subset cal = {&ds, NULL, 12};
    size_t keep[3 * 2] = {2, 2, 2, 2, 2, 2};
    hy_objective objs[3] = {HY_OBJ_ACC, HY_OBJ_ACC, HY_OBJ_ACC};
    hy_prune_config pc = {.method = HY_PRUNE_TAYLOR, .members = 2, .keep = keep,
                          .objectives = objs, .bootstrap = false, .overlap_penalty = 1.0,
                          .normalize = true, .batch_size = 4, .seed = 5};
    float gates[3 * 8], scores[3 * 8], g2[3 * 8], s2[3 * 8];
    double ov[9];
    /* penalty 1: the second member avoids the first's heads (2 of 4 per layer: disjoint) */
    CHECK_OK(hy_prune_members(&m, &cal, NULL, NULL, &pc, gates, scores, ov));
    CHECK(ov[1] == 0.0 && ov[2] == 0.0 && ov[0] == 1.0, "jaccard %g %g", ov[1], ov[2]);
    for (size_t l = 0; l < 2; l++) {
        size_t k0 = 0, k1 = 0;
        for (size_t h = 0; h < 4; h++) {
            k0 += gates[l * 4 + h] != 0.0f;
            k1 += gates[8 + l * 4 + h] != 0.0f;
        }
        CHECK(k0 == 2 && k1 == 2, "layer %zu keeps %zu and %zu", l + 1, k0, k1);
    }
    /* member 1 keeps its two best heads */
    for (size_t l = 0; l < 2; l++)
        for (size_t h = 0; h < 4; h++)
            for (size_t o = 0; o < 4; o++)
                if (gates[l * 4 + h] != 0.0f && gates[l * 4 + o] == 0.0f)
                    CHECK(scores[l * 4 + h] >= scores[l * 4 + o], "kept a worse head");
    /* penalty 0, no bootstrap: identical members */
    pc.overlap_penalty = 0.0;
    CHECK_OK(hy_prune_members(&m, &cal, NULL, NULL, &pc, gates, scores, ov));
    CHECK(ov[1] == 1.0 && memcmp(gates, gates + 8, 8 * sizeof(float)) == 0, "not identical");
    /* bootstrap: deterministic per seed, scores differ between members; unequal keep counts */
    pc.bootstrap = true;
    pc.members = 3;
    keep[2] = 1;
    keep[5] = 3;
    CHECK_OK(hy_prune_members(&m, &cal, NULL, NULL, &pc, gates, scores, ov));
    CHECK_OK(hy_prune_members(&m, &cal, NULL, NULL, &pc, g2, s2, NULL));
    CHECK(memcmp(gates, g2, sizeof gates) == 0 && memcmp(scores, s2, sizeof scores) == 0,
          "bootstrap not deterministic");
    CHECK(memcmp(scores, scores + 8, 8 * sizeof(float)) != 0, "resamples gave equal scores");
    size_t k = 0;
    for (size_t h = 0; h < 4; h++) k += (gates[16 + 4 + h] != 0.0f);
    CHECK(k == 3, "member 3 layer 2 keeps %zu (want 3)", k);
    int64_t shape[3] = {3, 2, 4};
    CHECK_OK(hy_prune_check_gates(gates, 3, shape, 2, 4));
    keep[1] = 5;
    CHECK_FAIL(hy_prune_members(&m, &cal, NULL, NULL, &pc, gates, scores, ov), HY_EINVAL,
               "prune: member 1 keeps 5 heads in layer 2 (expected 1 to 4)");
    pc.members = 0;
    CHECK_FAIL(hy_prune_members(&m, &cal, NULL, NULL, &pc, gates, scores, ov), HY_EINVAL,
               "prune: members must be >= 1 (got 0)");
    hy_dataset_release(&ds);
    hy_xfmr_release(&m);
}

static void test_select(void) {
    const float s[4] = {0.1f, 0.9f, 0.5f, 0.5f};
    const float prior[4] = {0.0f, 1.0f, 0.0f, 0.0f};
    float g[4];
    hy_prune_select(g, s, NULL, 0.0, 4, 2);
    CHECK(g[0] == 0 && g[1] == 1 && g[2] == 1 && g[3] == 0, "top-2 with a tie -> lower index");
    hy_prune_select(g, s, prior, 0.4, 4, 1);     /* (0.9-0.1)*0.6 = 0.48 > 0.5-0.1 */
    CHECK(g[1] == 1.0f, "small penalty moved the choice");
    hy_prune_select(g, s, prior, 0.6, 4, 1);
    CHECK(g[2] == 1.0f && g[1] == 0.0f, "penalty did not move the choice");
}

/* ===== validation and restore ===== */

/* Writes a gates file: /gates (M, 2, 3) all ones, attributes members and keep when given. */
static void write_gates(const char *path, int64_t M, int64_t members, const char *keep) {
    float g[4 * 2 * 3];
    for (size_t i = 0; i < 24; i++) g[i] = 1.0f;
    int64_t sh[3] = {M, 2, 3};
    hy_h5 h;
    CHECK_OK(hy_h5_create(&h, path));
    CHECK_OK(hy_h5_write_data(&h, "/gates", HY_F32, 3, sh, g));
    if (members >= 0) CHECK_OK(hy_h5_set_attr_i64(&h, "/", "members", members));
    if (keep) CHECK_OK(hy_h5_set_attr_str(&h, "/", "keep", keep));
    CHECK_OK(hy_h5_commit(&h));
}

/* hy_prune_read_gates: the counts a gates file records agree with /gates */
static void test_read_gates(void) {
    char path[512], want[1024];
    snprintf(path, sizeof path, "%s/gates.h5", check_tmpdir());
    hy_tensor t;
    write_gates(path, 3, 3, "3,3;3,3;3,3");
    CHECK_OK(hy_prune_read_gates(path, 2, 3, &t));
    CHECK(t.ndim == 3 && t.shape[0] == 3 && t.shape[1] == 2 && t.shape[2] == 3, "shape");
    hy_tensor_release(&t);
    write_gates(path, 2, 3, NULL);
    snprintf(want, sizeof want, "prune: '%s': attribute members = 3 but /gates holds 2 members",
             path);
    CHECK_FAIL(hy_prune_read_gates(path, 2, 3, &t), HY_EINVAL, want);
    CHECK(t.data == NULL, "left zeroed");
    write_gates(path, 2, -1, "3,3;3,3;3,3");
    snprintf(want, sizeof want, "prune: '%s': attribute keep lists 3 members but /gates holds 2",
             path);
    CHECK_FAIL(hy_prune_read_gates(path, 2, 3, &t), HY_EINVAL, want);
    write_gates(path, 2, -1, NULL);
    snprintf(want, sizeof want, "prune: '%s': /gates has shape [2,2,3], expected [M,2,4]", path);
    CHECK_FAIL(hy_prune_read_gates(path, 2, 4, &t), HY_EINVAL, want);
    write_gates(path, 0, -1, NULL);
    snprintf(want, sizeof want, "prune: '%s': /gates members (its first dim) = 0 is out of range "
             "(expected 1 to 64)", path);
    CHECK_FAIL(hy_prune_read_gates(path, 2, 3, &t), HY_EINVAL, want);
    snprintf(path, sizeof path, "%s/nogates.h5", check_tmpdir());
    hy_h5 h;
    CHECK_OK(hy_h5_create(&h, path));
    CHECK_OK(hy_h5_set_attr_i64(&h, "/", "members", 1));
    CHECK_OK(hy_h5_commit(&h));
    snprintf(want, sizeof want, "prune: '%s' has no /gates (not a gates file)", path);
    CHECK_FAIL(hy_prune_read_gates(path, 2, 3, &t), HY_EINVAL, want);
}

static void test_gate_errors(void) {
    float g[2 * 2 * 3];
    for (size_t i = 0; i < 12; i++) g[i] = 1.0f;
    int64_t s3[3] = {2, 2, 3}, s2[2] = {2, 4}, s0[3] = {0, 2, 3};
    CHECK_OK(hy_prune_check_gates(g, 3, s3, 2, 3));
    CHECK_FAIL(hy_prune_check_gates(g, 2, s2, 2, 3), HY_EINVAL,
               "prune: gates have shape [2,4], expected [M,2,3]");
    CHECK_FAIL(hy_prune_check_gates(g, 3, s0, 2, 3), HY_EINVAL, "prune: gates hold no member (M = 0)");
    g[6 + 3] = g[6 + 4] = g[6 + 5] = 0.0f;
    CHECK_FAIL(hy_prune_check_gates(g, 3, s3, 2, 3), HY_EINVAL,
               "prune: member 2 prunes every head of layer 2 (keep at least one)");
    g[6 + 3] = 1.0f;
    g[1] = 0.5f;
    CHECK_FAIL(hy_prune_check_gates(g, 3, s3, 2, 3), HY_EINVAL,
               "prune: member 1 gate of layer 1, head 2 is 0.5 (expected 0 or 1)");
    hy_objective o;
    CHECK_FAIL(hy_objective_parse("nll", &o), HY_EINVAL,
               "prune: unknown objective 'nll' (expected acc, ood or avg)");
}

static void test_restore(void) {
    hy_xfmr m, base;
    perturbed(&m, 3, 0.1);
    perturbed(&base, 4, 0.1);
    hy_xfmr_set_gate(&m, 0, 1, 0.0f);
    hy_xfmr_set_gate(&m, 1, 3, 0.0f);
    float *before = hy_xmalloc(m.n_params * sizeof(float));
    memcpy(before, m.params, m.n_params * sizeof(float));
    hy_prune_restore(&m, base.params);
    size_t D = 16, HS = 4, changed = 0, kept_same = 0;
    hy_param_view qw, pw;
    CHECK_OK(hy_xfmr_param(&m, "blocks.1.attn.qkv.weight", &qw));
    CHECK_OK(hy_xfmr_param(&m, "blocks.1.attn.proj.weight", &pw));
    for (size_t s = 0; s < 3; s++)
        for (size_t r = s * D + 3 * HS; r < s * D + 4 * HS; r++)
            CHECK(memcmp(qw.data + r * D, base.params + qw.info->offset + r * D, D * 4) == 0,
                  "qkv row %zu not restored", r);
    for (size_t r = 0; r < D; r++)
        CHECK(memcmp(pw.data + r * D + 3 * HS, base.params + pw.info->offset + r * D + 3 * HS,
                     HS * 4) == 0, "proj row %zu not restored", r);
    for (size_t i = 0; i < m.n_params; i++) {
        changed += m.params[i] != before[i];
        kept_same += m.params[i] == before[i];
    }
    /* two heads: 2 x (3*HS*D + 3*HS + D*HS) floats come from base, nothing else */
    CHECK(changed == 2 * (3 * HS * D + 3 * HS + D * HS), "changed %zu", changed);
    hy_free(before);
    hy_xfmr_release(&m);
    hy_xfmr_release(&base);
}

int main(void) {
    RUN(test_taylor_fd);
    RUN(test_circuit_planted);
    RUN(test_members);
    RUN(test_select);
    RUN(test_gate_errors);
    RUN(test_read_gates);
    RUN(test_restore);
    return check_exit("test_prune");
}
