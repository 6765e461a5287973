/* mimo.c: MIMO training, loss and prediction over the plain transformer (see mimo.h). */
#include "hydra/mimo.h"

#include <math.h>
#include <string.h>

#include "nn/layers.h"

/* ===== loss ===== */

hy_status hy_mimo_loss(const float *logits, const int32_t *labels, size_t B, size_t M, size_t K,
                       float eps, double *loss, float *dlogits) {
    if (!(eps >= 0.0f && eps < 1.0f))
        return hy_fail(HY_EINVAL, "mimo: label_smoothing must be in [0, 1) (got %g)",
                       (double)eps);
    for (size_t m = 0; m < M; m++)
        for (size_t b = 0; b < B; b++)
            if (labels[m * B + b] < 0 || (size_t)labels[m * B + b] >= K)
                return hy_fail(HY_EINVAL, "mimo: label %d of slot %zu, row %zu out of range "
                               "[0, %zu)", (int)labels[m * B + b], m + 1, b + 1, K);
    float *z = hy_xmalloc(3 * B * K * sizeof *z);
    if (!z) return HY_ENOMEM;
    float *probs = z + B * K, *dz = z + 2 * B * K;
    double total = 0.0;
    for (size_t m = 0; m < M; m++) {
        for (size_t b = 0; b < B; b++)
            memcpy(z + b * K, logits + b * M * K + m * K, K * sizeof *z);
        double lm = 0.0;
        hy_ce_forward(&lm, probs, z, labels + m * B, B, K, eps);
        total += lm;
        if (dlogits) {
            memset(dz, 0, B * K * sizeof *dz);
            hy_ce_backward(dz, 1.0, probs, labels + m * B, B, K, eps);
            for (size_t b = 0; b < B; b++)
                memcpy(dlogits + b * M * K + m * K, dz + b * K, K * sizeof *dz);
        }
    }
    hy_free(z);
    *loss = total;
    return HY_OK;
}

/* ===== checks ===== */

hy_status hy_mimo_check(const hy_xfmr *m, size_t M, const hy_dataset *ds, int need_labels) {
    const hy_xfmr_config *c = &m->cfg;
    if (M < 1) return hy_fail(HY_EINVAL, "mimo: mimo.members must be >= 1 (got 0)");
    if (c->kind != HY_XFMR_VIT)
        return hy_fail(HY_EINVAL, "mimo: MIMO needs an image model (model.kind vit)");
    if (c->channels != M)
        return hy_fail(HY_EINVAL, "mimo: the model has %zu input channels, expected mimo.members "
                       "x 1 = %zu (one per slot)", c->channels, M);
    if (c->n_classes % M != 0)
        return hy_fail(HY_EINVAL, "mimo: the model's %zu outputs are not mimo.members (%zu) "
                       "heads", c->n_classes, M);
    if (ds->kind != HY_DATA_IMAGE)
        return hy_fail(HY_EINVAL, "mimo: the model takes images but the data is text");
    if (ds->c != 1)
        return hy_fail(HY_EINVAL, "mimo: the data has %zu channels (MIMO slots take grey "
                       "images)", ds->c);
    if (ds->h != c->image_size || ds->w != c->image_size)
        return hy_fail(HY_EINVAL, "mimo: images are %zux%zu but the model expects %zux%zu "
                       "(model.image_size)", ds->h, ds->w, c->image_size, c->image_size);
    size_t K = c->n_classes / M;
    if (need_labels)
        for (size_t i = 0; i < ds->n; i++)
            if (ds->labels[i] < 0 || (size_t)ds->labels[i] >= K)
                return hy_fail(HY_EINVAL, "mimo: %s: label %d at row %zu (0-based) outside "
                               "[0, %zu) (model.n_classes %zu)",
                               ds->origin[0] ? ds->origin : "the data", (int)ds->labels[i], i, K,
                               K);
    return HY_OK;
}

/* ===== trainer ===== */

/* the slot orders of a step over the loader's b samples: order[0..R) the main order (the batch
 * tiled r times, shuffled), order[(1 + m) R ..] slot m's (its first n_shuf rows reshuffled) */
static void slot_orders(hy_mimo_trainer *t, size_t b, uint64_t step) {
    size_t R = b * t->mc.batch_repetition, M = t->mc.members;
    int64_t *main_order = t->order;
    for (size_t i = 0; i < R; i++) main_order[i] = (int64_t)(i % b);
    hy_rng base;
    hy_rng_seed(&base, hy_hash64(&step, sizeof step, t->cfg.seed ^ 0x6d696d6fULL));   /* "mimo" */
    hy_rng r = hy_rng_split(&base, 0);
    hy_rng_shuffle(&r, main_order, R);
    size_t n_shuf = (size_t)floor((double)R * (1.0 - t->mc.input_repetition));
    for (size_t m = 0; m < M; m++) {
        int64_t *o = t->order + (1 + m) * R;
        memcpy(o, main_order, R * sizeof *o);
        hy_rng rm = hy_rng_split(&base, 1 + m);
        hy_rng_shuffle(&rm, o, n_shuf);
    }
}

/* fills the slot images (R, M, H, W) and labels (M, R) from the loader's batch */
static void assemble(hy_mimo_trainer *t, size_t R) {
    const hy_loader *ld = &t->fit.loader;
    size_t M = t->mc.members, HW = t->fit.data->h * t->fit.data->w;
    for (size_t m = 0; m < M; m++) {
        const int64_t *o = t->order + (1 + m) * R;
        for (size_t i = 0; i < R; i++) {
            memcpy(t->images + (i * M + m) * HW, ld->images + (size_t)o[i] * HW,
                   HW * sizeof(float));
            t->labels[m * R + i] = ld->labels[o[i]];
        }
    }
}

static size_t argmax(const float *x, size_t k) {
    size_t best = 0;
    for (size_t j = 1; j < k; j++)
        if (x[j] > x[best]) best = j;
    return best;
}

static hy_status mimo_forward(hy_fit *f, size_t b, double *loss) {
    hy_mimo_trainer *t = f->ctx;
    size_t R = b * t->mc.batch_repetition, M = t->mc.members, K = f->model->cfg.n_classes / M;
    slot_orders(t, b, (uint64_t)f->prog.step);
    assemble(t, R);
    hy_batch in = {.images = t->images};
    HY_TRY(hy_train_ensure_acts(f->model, R));   /* freed by an evaluation in between */
    HY_TRY(hy_xfmr_forward(f->model, &in, R, t->logits));
    return hy_mimo_loss(t->logits, t->labels, R, M, K, (float)t->cfg.label_smoothing, loss,
                        t->dlogits);
}

static hy_status mimo_backward(hy_fit *f, size_t b) {
    (void)b;
    hy_mimo_trainer *t = f->ctx;
    hy_xfmr_zero_grad(f->model);
    return hy_xfmr_backward(f->model, t->dlogits);
}

static void mimo_tally(hy_fit *f, size_t b, double loss) {
    hy_mimo_trainer *t = f->ctx;
    hy_progress *p = &f->prog;
    const size_t M = t->mc.members, MK = f->model->cfg.n_classes, K = MK / M;
    size_t R = b * t->mc.batch_repetition;
    for (size_t s = 0; s < M; s++)
        for (size_t i = 0; i < R; i++)
            p->epoch_correct +=
                argmax(t->logits + i * MK + s * K, K) == (size_t)t->labels[s * R + i];
    p->epoch_seen += R * M;
    p->epoch_loss_sum += loss * (double)R;   /* = mean member CE x (R M) pairs */
    p->loss = loss / (double)M;
}

static const hy_fit_objective mimo_objective = {"train", mimo_forward, mimo_backward, mimo_tally};

hy_status hy_mimo_trainer_new(hy_mimo_trainer *t, hy_xfmr *m, const hy_dataset *ds,
                              const hy_train_config *cfg, const hy_mimo_config *mc,
                              const hy_augment *aug) {
    memset(t, 0, sizeof *t);
    HY_TRY(hy_train_config_check(cfg));
    if (!(mc->input_repetition >= 0 && mc->input_repetition <= 1))
        return hy_fail(HY_EINVAL, "mimo: mimo.input_repetition must be in [0, 1] (got %g)",
                       mc->input_repetition);
    if (mc->batch_repetition < 1)
        return hy_fail(HY_EINVAL, "mimo: mimo.batch_repetition must be >= 1 (got 0)");
    if (ds->n == 0) return hy_fail(HY_EINVAL, "train: the training data has no samples");
    HY_TRY(hy_adamw_config_check(&cfg->optim));
    HY_TRY(hy_mimo_check(m, mc->members, ds, 1));

    size_t b = cfg->batch_size < ds->n ? cfg->batch_size : ds->n, M = mc->members;
    size_t HW = ds->h * ds->w, R = b * mc->batch_repetition, bytes;
    hy_status st = hy_fit_new(&t->fit, m, ds, b, aug, cfg->seed, cfg->grad_clip,
                              &mimo_objective, t);
    if (st != HY_OK) return st;
    st = hy_fit_block(&t->fit, m->params, m->grads, m->table, m->n_tensors, m->n_params,
                      &cfg->optim);
    if (st != HY_OK) goto fail;
    st = hy_size_mul(&bytes, "mimo: slot images (rows x members x pixels x 4 bytes)", R, M * HW,
                     sizeof(float));
    if (st != HY_OK) goto fail;
    t->images = hy_xmalloc_aligned(bytes);
    t->labels = hy_xmalloc(M * R * sizeof *t->labels);
    t->order = hy_xmalloc((M + 1) * R * sizeof *t->order);
    t->logits = hy_xmalloc_aligned(R * m->cfg.n_classes * sizeof(float));
    t->dlogits = hy_xmalloc_aligned(R * m->cfg.n_classes * sizeof(float));
    if (!t->images || !t->labels || !t->order || !t->logits || !t->dlogits) {
        st = HY_ENOMEM;
        goto fail;
    }
    st = hy_train_ensure_acts(m, R);
    if (st != HY_OK) goto fail;
    t->cfg = *cfg;
    t->mc = *mc;
    t->R = R;
    hy_fit_plan(&t->fit, cfg->schedule, cfg->optim.learning_rate, cfg->min_lr, cfg->epochs,
                cfg->warmup_epochs);
    return HY_OK;
fail:
    hy_mimo_trainer_release(t);
    return st;
}

void hy_mimo_trainer_release(hy_mimo_trainer *t) {
    if (!t) return;
    hy_fit_release(&t->fit);
    hy_free(t->images);
    hy_free(t->labels);
    hy_free(t->order);
    hy_free(t->logits);
    hy_free(t->dlogits);
    memset(t, 0, sizeof *t);
}

/* ===== prediction ===== */

typedef struct sweep_out {
    float *member_logits, *probs, *member_probs;   /* any may be NULL */
    double nll_sum;
    size_t correct;
} sweep_out;

/* every sample of ds in order with its image in every slot */
static hy_status sweep(hy_xfmr *m, size_t M, const hy_dataset *ds, size_t batch_size,
                       int need_labels, sweep_out *out) {
    if (batch_size < 1) return hy_fail(HY_EINVAL, "mimo: eval batch size must be >= 1 (got 0)");
    if (ds->n && batch_size > ds->n) batch_size = ds->n;
    HY_TRY(hy_mimo_check(m, M, ds, need_labels));
    if (ds->n == 0) return HY_OK;
    HY_TRY(hy_xfmr_ensure_infer(m, batch_size));
    size_t N = ds->n, MK = m->cfg.n_classes, K = MK / M, HW = ds->h * ds->w;
    hy_loader ld;
    HY_TRY(hy_loader_new(&ld, ds, batch_size, 0, NULL, 0));
    hy_status st = HY_OK;
    float *img = hy_xmalloc_aligned(batch_size * M * HW * sizeof(float));
    float *lg = hy_xmalloc_aligned(batch_size * MK * sizeof(float));
    float *pr = hy_xmalloc(K * sizeof(float));
    double *acc = hy_xmalloc(K * sizeof(double));
    if (!img || !lg || !pr || !acc) st = HY_ENOMEM;
    size_t first = 0, B;
    while (st == HY_OK && (B = hy_loader_next(&ld)) > 0) {
        for (size_t b = 0; b < B; b++)
            for (size_t s = 0; s < M; s++)
                memcpy(img + (b * M + s) * HW, ld.images + b * HW, HW * sizeof(float));
        hy_batch in = {.images = img};
        if ((st = hy_xfmr_infer(m, &in, B, lg)) != HY_OK) break;
        for (size_t b = 0; b < B; b++) {
            for (size_t k = 0; k < K; k++) acc[k] = 0.0;
            for (size_t s = 0; s < M; s++) {
                const float *z = lg + b * MK + s * K;
                hy_softmax_rows(pr, z, 1, K);
                for (size_t k = 0; k < K; k++) acc[k] += (double)pr[k];
                size_t row = (s * N + first + b) * K;
                if (out->member_logits) memcpy(out->member_logits + row, z, K * sizeof(float));
                if (out->member_probs) memcpy(out->member_probs + row, pr, K * sizeof(float));
            }
            for (size_t k = 0; k < K; k++) acc[k] /= (double)M;
            if (out->probs)
                for (size_t k = 0; k < K; k++) out->probs[(first + b) * K + k] = (float)acc[k];
            if (need_labels) {
                size_t y = (size_t)ld.labels[b], best = 0;
                for (size_t k = 1; k < K; k++)
                    if (acc[k] > acc[best]) best = k;
                out->correct += best == y;
                out->nll_sum -= log(acc[y] > 1e-300 ? acc[y] : 1e-300);
            }
        }
        first += B;
    }
    hy_free(img);
    hy_free(lg);
    hy_free(pr);
    hy_free(acc);
    hy_loader_release(&ld);
    return st;
}

hy_status hy_mimo_predict(hy_xfmr *m, size_t M, const hy_dataset *ds, size_t batch_size,
                          float *member_logits, float *probs, float *member_probs) {
    sweep_out o = {member_logits, probs, member_probs, 0.0, 0};
    return sweep(m, M, ds, batch_size, 0, &o);
}

hy_status hy_mimo_evaluate(hy_xfmr *m, size_t M, const hy_dataset *ds, size_t batch_size,
                           double *nll, double *acc) {
    if (ds->n == 0) return hy_fail(HY_EINVAL, "mimo: cannot evaluate on an empty split");
    sweep_out o = {NULL, NULL, NULL, 0.0, 0};
    HY_TRY(sweep(m, M, ds, batch_size, 1, &o));
    *nll = o.nll_sum / (double)ds->n;
    *acc = (double)o.correct / (double)ds->n;
    return HY_OK;
}
