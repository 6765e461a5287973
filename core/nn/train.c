/* train.c: training steps, evaluation and prediction over in-memory datasets (see train.h). */
#include "nn/train.h"

#include <math.h>
#include <string.h>

#include "nn/layers.h"

/* ===== shared helpers ===== */

hy_status hy_train_ensure_acts(hy_xfmr *m, size_t B) {
    if (m->B_cap >= B && m->acts) return HY_OK;
    return hy_xfmr_alloc_acts(m, B);
}

/* Does ds fit model m? Messages name both sides. */
void hy_train_input(const hy_loader *ld, hy_batch *out) {
    memset(out, 0, sizeof *out);
    if (ld->ds->kind == HY_DATA_IMAGE) {
        out->images = ld->images;
    } else {
        out->ids = ld->ids;
        out->lengths = ld->lengths;
        out->len = ld->len;
        out->type_ids = ld->type_ids;
    }
}

static hy_status check_data(const hy_xfmr *m, const hy_dataset *ds, int need_labels) {
    const hy_xfmr_config *c = &m->cfg;
    if (c->kind == HY_XFMR_VIT) {
        if (ds->kind != HY_DATA_IMAGE)
            return hy_fail(HY_EINVAL, "train: the model takes images but the data is text");
        if (c->channels != ds->c)
            return hy_fail(HY_EINVAL, "train: the data has %zu channel(s) but the model expects "
                           "%zu (model.channels)", ds->c, c->channels);
        if (ds->h != c->image_size || ds->w != c->image_size)
            return hy_fail(HY_EINVAL, "train: images are %zux%zu but the model expects %zux%zu "
                           "(model.image_size)", ds->h, ds->w, c->image_size, c->image_size);
    } else {
        if (ds->kind != HY_DATA_TEXT)
            return hy_fail(HY_EINVAL, "train: the model takes text but the data is images");
        for (size_t i = 0; i < ds->n; i++)
            if ((size_t)ds->lengths[i] > c->max_len)
                return hy_fail(HY_EINVAL, "train: %s: row %zu (0-based) has %d tokens, more "
                               "than the model's max_len %zu",
                               ds->origin[0] ? ds->origin : "the data", i,
                               (int)ds->lengths[i], c->max_len);
    }
    if (need_labels)
        for (size_t i = 0; i < ds->n; i++)
            if (ds->labels[i] < 0 || (size_t)ds->labels[i] >= c->n_classes)
                return hy_fail(HY_EINVAL, "train: %s: label %d at row %zu (0-based) outside "
                               "[0, %zu) (model.n_classes %zu)",
                               ds->origin[0] ? ds->origin : "the data", (int)ds->labels[i], i,
                               c->n_classes, c->n_classes);
    return HY_OK;
}

static size_t argmax(const float *x, size_t k) {
    size_t best = 0;
    for (size_t j = 1; j < k; j++)
        if (x[j] > x[best]) best = j;
    return best;
}

/* probs (B, K) = the mean over the M members of the softmaxes of logits (M*B, K), member-major
 * (p̄, DESIGN §4); M = 1: the softmax */
static void mean_probs(float *probs, float *tmp, const float *logits, size_t M, size_t B,
                       size_t K) {
    hy_softmax_rows(probs, logits, B, K);
    if (M == 1) return;
    for (size_t mm = 1; mm < M; mm++) {
        hy_softmax_rows(tmp, logits + mm * B * K, B, K);
        for (size_t i = 0; i < B * K; i++) probs[i] += tmp[i];
    }
    for (size_t i = 0; i < B * K; i++) probs[i] /= (float)M;
}

/* ===== trainer ===== */

hy_status hy_train_config_check(const hy_train_config *cfg) {
    if (cfg->epochs < 1) return hy_fail(HY_EINVAL, "train: epochs must be >= 1 (got 0)");
    if (cfg->batch_size < 1) return hy_fail(HY_EINVAL, "train: batch_size must be >= 1 (got 0)");
    if (!(cfg->warmup_epochs >= 0))
        return hy_fail(HY_EINVAL, "train: warmup_epochs must be >= 0 (got %g)",
                       cfg->warmup_epochs);
    if (!(cfg->grad_clip >= 0))
        return hy_fail(HY_EINVAL, "train: grad_clip must be >= 0 (got %g)", cfg->grad_clip);
    if (!(cfg->label_smoothing >= 0 && cfg->label_smoothing < 1))
        return hy_fail(HY_EINVAL, "train: label_smoothing must be in [0, 1) (got %g)",
                       cfg->label_smoothing);
    if (!(cfg->min_lr >= 0 && cfg->min_lr <= cfg->optim.learning_rate))
        return hy_fail(HY_EINVAL, "optim: min_lr must be in [0, learning_rate] (got %g)",
                       cfg->min_lr);
    return HY_OK;
}

/* ===== classification ===== */

static hy_status cls_forward(hy_fit *f, size_t B, double *loss) {
    hy_trainer *t = f->ctx;
    hy_batch in;
    hy_train_input(&f->loader, &in);
    HY_TRY(hy_train_ensure_acts(f->model, B));   /* freed by an evaluation in between */
    HY_TRY(hy_xfmr_forward(f->model, &in, B, t->logits));
    return hy_xfmr_loss(f->model, t->logits, f->loader.labels, B, (float)t->cfg.label_smoothing,
                        loss, t->dlogits);
}

static hy_status cls_backward(hy_fit *f, size_t B) {
    (void)B;
    hy_trainer *t = f->ctx;
    hy_xfmr_zero_grad(f->model);
    return hy_xfmr_backward(f->model, t->dlogits);
}

static void cls_tally(hy_fit *f, size_t B, double loss) {
    hy_trainer *t = f->ctx;
    hy_progress *p = &f->prog;
    const size_t K = f->model->cfg.n_classes, M = hy_xfmr_members(f->model);
    if (M > 1)   /* the ensemble's prediction: p̄ (dlogits' second half is free) */
        mean_probs(t->dlogits, t->dlogits + M * B * K, t->logits, M, B, K);
    const float *pred = M > 1 ? t->dlogits : t->logits;
    for (size_t i = 0; i < B; i++)
        p->epoch_correct += argmax(pred + i * K, K) == (size_t)f->loader.labels[i];
    p->epoch_seen += B;
    p->epoch_loss_sum += loss * (double)B;
    p->loss = loss;
}

static const hy_fit_objective classification = {"train", cls_forward, cls_backward, cls_tally};

hy_status hy_trainer_new(hy_trainer *t, hy_xfmr *m, const hy_dataset *ds,
                         const hy_train_config *cfg, const hy_augment *aug) {
    memset(t, 0, sizeof *t);
    HY_TRY(hy_train_config_check(cfg));
    if (ds->n == 0) return hy_fail(HY_EINVAL, "train: the training data has no samples");
    HY_TRY(hy_adamw_config_check(&cfg->optim));
    HY_TRY(check_data(m, ds, 1));

    /* a batch larger than the training split is the whole split (the same single batch) */
    size_t B = cfg->batch_size < ds->n ? cfg->batch_size : ds->n, lbytes;
    hy_status st = hy_fit_new(&t->fit, m, ds, B, aug, cfg->seed, cfg->grad_clip,
                              &classification, t);
    if (st != HY_OK) return st;
    st = hy_fit_block(&t->fit, m->params, m->grads, m->table, m->n_tensors, m->n_params,
                      &cfg->optim);
    if (st != HY_OK) goto fail;
    size_t K = m->cfg.n_classes;
    st = hy_size_mul(&lbytes, "train: logits (train.batch_size x n_classes x 4 bytes)", B, K,
                     sizeof(float));
    if (st == HY_OK)   /* an ensemble's logits: one row per member and sample */
        st = hy_size_mul(&lbytes, "train: logits (members x batch x n_classes x 4 bytes)",
                         lbytes, hy_xfmr_members(m) > 1 ? 2 * hy_xfmr_members(m) : 1, 1);
    if (st != HY_OK) goto fail;
    t->logits = hy_xmalloc_aligned(lbytes);
    t->dlogits = hy_xmalloc_aligned(lbytes);
    if (!t->logits || !t->dlogits) { st = HY_ENOMEM; goto fail; }
    st = hy_train_ensure_acts(m, B);
    if (st != HY_OK) goto fail;

    t->cfg = *cfg;
    hy_fit_plan(&t->fit, cfg->schedule, cfg->optim.learning_rate, cfg->min_lr, cfg->epochs,
                cfg->warmup_epochs);
    return HY_OK;
fail:
    hy_trainer_release(t);
    return st;
}

void hy_trainer_release(hy_trainer *t) {
    if (!t) return;
    hy_fit_release(&t->fit);
    hy_free(t->logits);
    hy_free(t->dlogits);
    memset(t, 0, sizeof *t);
}

/* ===== evaluation and prediction ===== */

/* Runs the forward over ds in order; per batch calls visit(ctx, first row, B, logits). */
typedef hy_status (*visit_fn)(void *ctx, const hy_loader *ld, size_t first, size_t B,
                              const float *logits);

static hy_status sweep(hy_xfmr *m, const hy_dataset *ds, size_t batch_size, int need_labels,
                       visit_fn visit, void *ctx) {
    if (batch_size < 1) return hy_fail(HY_EINVAL, "train: eval batch size must be >= 1 (got 0)");
    if (ds->n && batch_size > ds->n) batch_size = ds->n;     /* the same single batch */
    HY_TRY(check_data(m, ds, need_labels));
    HY_TRY(hy_xfmr_ensure_infer(m, batch_size));
    hy_loader ld;
    HY_TRY(hy_loader_new(&ld, ds, batch_size, 0, NULL, 0));
    hy_status st = HY_OK;
    size_t lbytes;
    HY_TRY(hy_size_mul(&lbytes, "train: logits (eval batch size x n_classes x 4 bytes)",
                       batch_size, m->cfg.n_classes, sizeof(float)));
    HY_TRY(hy_size_mul(&lbytes, "train: logits (members x eval batch x n_classes x 4 bytes)",
                       lbytes, hy_xfmr_members(m), 1));
    float *logits = hy_xmalloc_aligned(lbytes);
    if (!logits) st = HY_ENOMEM;
    size_t first = 0, B;
    while (st == HY_OK && (B = hy_loader_next(&ld)) > 0) {
        hy_batch in;
        hy_train_input(&ld, &in);
        st = hy_xfmr_infer(m, &in, B, logits);
        if (st == HY_OK) st = visit(ctx, &ld, first, B, logits);
        first += B;
    }
    hy_free(logits);
    hy_loader_release(&ld);
    return st;
}

typedef struct eval_ctx {
    const hy_xfmr *m;
    double nll_sum;
    size_t correct, n;
    float *probs;         /* ensembles: [2, B, K] p̄ and a temporary */
} eval_ctx;

static hy_status eval_visit(void *vctx, const hy_loader *ld, size_t first, size_t B,
                            const float *logits) {
    (void)first;
    eval_ctx *c = vctx;
    const size_t K = c->m->cfg.n_classes, M = hy_xfmr_members(c->m);
    if (M > 1) {   /* an ensemble: NLL and accuracy of p̄ (DESIGN §4) */
        mean_probs(c->probs, c->probs + B * K, logits, M, B, K);
        for (size_t i = 0; i < B; i++) {
            if (ld->labels[i] < 0 || (size_t)ld->labels[i] >= K)
                return hy_fail(HY_EINVAL, "train: label %d of row %zu out of range [0, %zu)",
                               (int)ld->labels[i], first + i + 1, K);
            c->nll_sum -= log((double)c->probs[i * K + (size_t)ld->labels[i]]);
            c->correct += argmax(c->probs + i * K, K) == (size_t)ld->labels[i];
        }
        c->n += B;
        return HY_OK;
    }
    double loss;
    HY_TRY(hy_xfmr_loss(c->m, logits, ld->labels, B, 0.0f, &loss, NULL));
    c->nll_sum += loss * (double)B;
    for (size_t i = 0; i < B; i++)
        c->correct += argmax(logits + i * K, K) == (size_t)ld->labels[i];
    c->n += B;
    return HY_OK;
}

hy_status hy_train_evaluate(hy_xfmr *m, const hy_dataset *ds, size_t batch_size, double *nll,
                            double *acc) {
    if (ds->n == 0) return hy_fail(HY_EINVAL, "train: cannot evaluate on an empty split");
    eval_ctx c = {m, 0, 0, 0, NULL};
    if (hy_xfmr_members(m) > 1) {
        size_t B = batch_size < ds->n ? batch_size : ds->n;
        c.probs = hy_xmalloc(2 * B * m->cfg.n_classes * sizeof(float));
        if (!c.probs) return HY_ENOMEM;
    }
    hy_status st = sweep(m, ds, batch_size, 1, eval_visit, &c);
    hy_free(c.probs);
    HY_TRY(st);
    *nll = c.nll_sum / (double)c.n;
    *acc = (double)c.correct / (double)c.n;
    return HY_OK;
}

typedef struct pred_ctx {
    size_t K, M, N;
    float *logits, *probs;
    const hy_xfmr *m;
    float *features;      /* (N, D) or NULL */
} pred_ctx;

static hy_status pred_visit(void *vctx, const hy_loader *ld, size_t first, size_t B,
                            const float *logits) {
    (void)ld;
    pred_ctx *c = vctx;
    for (size_t mm = 0; mm < c->M; mm++) {   /* member mm's rows go to [mm, first.., :] */
        size_t o = (mm * c->N + first) * c->K;
        const float *lg = logits + mm * B * c->K;
        if (c->logits) memcpy(c->logits + o, lg, B * c->K * sizeof(float));
        if (c->probs) hy_softmax_rows(c->probs + o, lg, B, c->K);
    }
    if (c->features) {
        size_t D = c->m->cfg.d_model;
        memcpy(c->features + first * D, hy_xfmr_features(c->m), B * D * sizeof(float));
    }
    return HY_OK;
}

hy_status hy_train_predict(hy_xfmr *m, const hy_dataset *ds, size_t batch_size, float *logits,
                           float *probs) {
    if (ds->n == 0) return HY_OK;
    pred_ctx c = {m->cfg.n_classes, hy_xfmr_members(m), ds->n, logits, probs, m, NULL};
    return sweep(m, ds, batch_size, 0, pred_visit, &c);
}

hy_status hy_train_features(hy_xfmr *m, const hy_dataset *ds, size_t batch_size, float *features,
                            float *logits, float *probs) {
    if (ds->n == 0) return HY_OK;
    if (m->ext)
        return hy_fail(HY_EINVAL, "train: features need a single model, not an ensemble");
    pred_ctx c = {m->cfg.n_classes, 1, ds->n, logits, probs, m, features};
    return sweep(m, ds, batch_size, 0, pred_visit, &c);
}

/* ===== resumable state ===== */

hy_status hy_train_state_write(hy_h5 *f, const hy_adamw *o, const hy_progress *p) {
    int64_t n = (int64_t)o->n;
    HY_TRY(hy_h5_write_data(f, "/train_state/adam_m", HY_F32, 1, &n, o->m));
    HY_TRY(hy_h5_write_data(f, "/train_state/adam_v", HY_F32, 1, &n, o->v));
    HY_TRY(hy_h5_set_attr_i64(f, "/train_state", "step", p->step));
    return hy_h5_set_attr_i64(f, "/train_state", "adam_t", o->t);
}

hy_status hy_train_state_read(hy_h5 *f, hy_adamw *o, hy_progress *p) {
    int64_t n = (int64_t)o->n, step = 0, at = 0;
    int e = hy_h5_exists(f, "/train_state");
    if (e < 0) return HY_ENOMEM;
    if (!e) return hy_fail(HY_EINVAL, "train: '%s' has no /train_state (not a training work file)",
                           f->path);
    HY_TRY(hy_h5_read_into(f, "/train_state/adam_m", HY_F32, 1, &n, o->m));
    HY_TRY(hy_h5_read_into(f, "/train_state/adam_v", HY_F32, 1, &n, o->v));
    HY_TRY(hy_h5_get_attr_i64(f, "/train_state", "step", &step));
    HY_TRY(hy_h5_get_attr_i64(f, "/train_state", "adam_t", &at));
    if (step < 0 || step > p->total_steps || at < 0)
        return hy_fail(HY_EINVAL, "train: '%s': /train_state step %lld, adam_t %lld: expected "
                       "step in [0, %lld] and adam_t >= 0", f->path, (long long)step,
                       (long long)at, (long long)p->total_steps);
    p->step = step;
    o->t = at;
    return HY_OK;
}
