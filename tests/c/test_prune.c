/* test_prune.c: Taylor scores equal a finite-difference derivative of the loss w.r.t. each gate;
 * the circuit search recovers a circuit planted in a constructed model; member gates (keep
 * counts, overlap penalty, bootstrap determinism, Jaccard); gate validation messages; restoring
 * pruned heads' weights. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "prune.h"
#include "train.h"

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

/* ===== planted circuit ===== */

/* A model where only the planted heads carry information: every MLP is off (fc2 = 0), every
 * other head's output columns in proj are 0, and the planted heads' value/output weights are
 * strong. Labels are the model's own predictions, so the full model has a low NLL, masking a
 * planted head removes every input-dependent signal from the CLS token (NLL rises), and masking
 * any other head changes nothing. */
static void plant(hy_xfmr *m, const int *planted, uint64_t seed) {
    perturbed(m, seed, 0.0);
    size_t D = m->cfg.d_model, NH = m->cfg.n_heads, HS = m->HS;
    hy_rng r;
    hy_rng_seed(&r, seed + 5);
    char name[48];
    hy_param_view v;
    CHECK_OK(hy_xfmr_param(m, "patch_embed.proj.weight", &v));
    for (size_t i = 0; i < v.info->numel; i++) v.data[i] = (float)(0.3 * hy_rng_normal(&r));
    CHECK_OK(hy_xfmr_param(m, "head.weight", &v));
    for (size_t i = 0; i < v.info->numel; i++) v.data[i] = (float)(3.0 * hy_rng_normal(&r));
    for (size_t l = 0; l < m->cfg.depth; l++) {
        snprintf(name, sizeof name, "blocks.%zu.mlp.fc2.weight", l);
        CHECK_OK(hy_xfmr_param(m, name, &v));
        memset(v.data, 0, v.info->numel * sizeof(float));
        hy_param_view qkv, proj;
        snprintf(name, sizeof name, "blocks.%zu.attn.qkv.weight", l);
        CHECK_OK(hy_xfmr_param(m, name, &qkv));
        snprintf(name, sizeof name, "blocks.%zu.attn.proj.weight", l);
        CHECK_OK(hy_xfmr_param(m, name, &proj));
        for (size_t h = 0; h < NH; h++) {
            int on = planted[l * NH + h];
            double sc = l == 0 ? 0.1 : 1.0;   /* layer 1 nudges, layer 2 decides */
            for (size_t row = 0; row < D; row++)
                for (size_t d = 0; d < HS; d++)
                    proj.data[row * D + h * HS + d] = on ? (float)(sc * hy_rng_normal(&r)) : 0.0f;
            for (size_t row = 2 * D + h * HS; on && row < 2 * D + (h + 1) * HS; row++)
                for (size_t d = 0; d < D; d++) qkv.data[row * D + d] = (float)(1.0 * hy_rng_normal(&r));
        }
    }
}

static void test_circuit_planted(void) {
    uint64_t seed = 11;   /* a constructed model: fixed, not HYDRA_SEED (see the report) */
    /* layer 1: head 3; layer 2: heads 2 and 4 */
    const int planted[8] = {0, 0, 1, 0, 0, 1, 0, 1};
    const size_t keep[2] = {1, 2};
    hy_xfmr m;
    plant(&m, planted, seed);
    hy_dataset ds;
    synth(&ds, 40, 4, seed + 1);
    /* relabel with the full model's predictions */
    float probs[40 * 4];
    CHECK_OK(hy_train_predict(&m, &ds, 16, NULL, probs));
    size_t counts[4] = {0};
    for (size_t i = 0; i < 40; i++) {
        size_t best = 0;
        for (size_t k = 1; k < 4; k++) best = probs[i * 4 + k] > probs[i * 4 + best] ? k : best;
        ds.labels[i] = (int32_t)best;
        counts[best]++;
    }
    CHECK(counts[0] < 40 && counts[1] < 40 && counts[2] < 40 && counts[3] < 40,
          "the planted model predicts one class for everything");
    hy_subset id = {&ds, NULL, 40};
    float scores[8], circuit[8];
    CHECK_OK(hy_prune_circuit(&m, &id, NULL, HY_OBJ_ACC, keep, NULL, 0.0, 16, scores, circuit));
    for (size_t i = 0; i < 8; i++) {
        CHECK(circuit[i] == (float)planted[i], "acc: head %zu of layer %zu: circuit %g, "
              "planted %d (score %g)", i % 4 + 1, i / 4 + 1, (double)circuit[i], planted[i],
              (double)scores[i]);
        if (!planted[i]) CHECK(scores[i] == 0.0f, "unplanted head score %g", (double)scores[i]);
    }
    CHECK(m.gates[2] == 1.0f && m.gates[5] == 1.0f, "gates not restored");
    /* the search ran layer-conditioned: with layer 1's circuit masked, masking any head of
     * layer 2 changes nothing but the planted ones; avg agrees with acc on the acc part */
    hy_dataset ood;
    hy_tensor img, lab;
    CHECK_OK(hy_synth_images(&img, &lab, 30, 28, 4, seed + 9));
    for (size_t i = 0; i < 30 * 28 * 28; i++) ((uint8_t *)img.data)[i] = (uint8_t)(255 - ((uint8_t *)img.data)[i]);
    CHECK_OK(hy_dataset_from_images(&ood, &img, &lab, 0.2, 0.3, 0));
    hy_subset os = {&ood, NULL, 30};
    CHECK_OK(hy_prune_circuit(&m, &id, &os, HY_OBJ_OOD, keep, NULL, 0.0, 16, scores, circuit));
    for (size_t i = 0; i < 8; i++)
        if (!planted[i]) CHECK(scores[i] == 0.0f, "ood: unplanted head score %g", (double)scores[i]);
    CHECK_FAIL(hy_prune_circuit(&m, &id, NULL, HY_OBJ_AVG, keep, NULL, 0.0, 16, scores, circuit),
               HY_EINVAL, "prune: objective avg needs a validation OOD set");
    const size_t bad[2] = {1, 5};
    CHECK_FAIL(hy_prune_circuit(&m, &id, NULL, HY_OBJ_ACC, bad, NULL, 0.0, 16, scores, circuit),
               HY_EINVAL, "prune: circuit size of layer 2 is 5 (expected 1 to 4)");
    hy_tensor_release(&img);
    hy_tensor_release(&lab);
    hy_dataset_release(&ood);
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
    RUN(test_restore);
    return check_exit("test_prune");
}
