/* fit.c: the training loop (see fit.h). */
#include "nn/fit.h"

#include <math.h>
#include <string.h>

/* AdamW over a block of n_params floats laid out by tab[n_tensors], with the tensors' decay flags
 * as its segments */
static hy_status adamw_new(hy_adamw *o, const hy_adamw_config *c, const hy_param *tab,
                           size_t n_tensors, size_t n_params) {
    hy_optim_segment *seg = hy_xmalloc(n_tensors * sizeof *seg + 1);
    if (!seg) return HY_ENOMEM;
    for (size_t i = 0; i < n_tensors; i++) {
        seg[i].offset = tab[i].offset;
        seg[i].n = tab[i].numel;
        seg[i].decay = tab[i].decay;
    }
    hy_status st = hy_adamw_new(o, c, n_params, seg, n_tensors);
    hy_free(seg);
    return st;
}

hy_status hy_fit_new(hy_fit *f, hy_xfmr *m, const hy_dataset *ds, size_t batch_size,
                     const hy_augment *aug, uint64_t seed, double grad_clip,
                     const hy_fit_objective *obj, void *ctx) {
    memset(f, 0, sizeof *f);
    HY_TRY(hy_loader_new(&f->loader, ds, batch_size, 1, aug, seed));
    f->model = m;
    f->data = ds;
    f->obj = obj;
    f->ctx = ctx;
    f->grad_clip = grad_clip;
    f->seed = seed;
    return HY_OK;
}

hy_status hy_fit_block(hy_fit *f, float *params, float *grads, const hy_param *tab,
                       size_t n_tensors, size_t n_params, const hy_adamw_config *c) {
    HY_ASSERT(f->n_blocks < HY_FIT_BLOCKS);
    size_t k = f->n_blocks;
    HY_TRY(adamw_new(&f->opt[k], c, tab, n_tensors, n_params));
    f->params[k] = params;
    f->grads[k] = grads;
    f->n[k] = n_params;
    f->n_blocks++;
    return HY_OK;
}

void hy_fit_plan(hy_fit *f, hy_sched_kind kind, double lr, double min_lr, size_t epochs,
                 double warmup_epochs) {
    f->sched = hy_sched_plan(kind, lr, min_lr, epochs, warmup_epochs,
                             hy_loader_batches(&f->loader));
    f->prog.total_steps = f->sched.total_steps;
    hy_fit_start_epoch(f, 0);
}

void hy_fit_release(hy_fit *f) {
    if (!f) return;
    if (f->model) hy_xfmr_set_dropout(f->model, false, 0);
    hy_loader_release(&f->loader);
    for (size_t k = 0; k < HY_FIT_BLOCKS; k++) hy_adamw_release(&f->opt[k]);
    memset(f, 0, sizeof *f);
}

void hy_fit_start_epoch(hy_fit *f, uint64_t epoch) {
    hy_loader_start_epoch(&f->loader, epoch);
    hy_progress *p = &f->prog;
    p->epoch = epoch;
    p->epoch_step = 0;
    p->epoch_steps = hy_loader_batches(&f->loader);
    p->epoch_seen = 0;
    p->epoch_correct = 0;
    p->epoch_loss_sum = 0;
    p->epoch_seconds = 0;
}

static const char *nonfinite_name(double x) {
    return isnan(x) ? "nan" : x > 0 ? "inf" : "-inf";
}

/* the gradient norm over the blocks, their gradients scaled to grad_clip when above it */
static double clip_blocks(hy_fit *f) {
    if (f->n_blocks == 1) return hy_grad_clip(f->grads[0], f->n[0], f->grad_clip);
    double sq = 0;
    for (size_t k = 0; k < f->n_blocks; k++) {
        double nk = hy_grad_norm(f->grads[k], f->n[k]);
        sq += nk * nk;
    }
    double norm = sqrt(sq);
    if (f->grad_clip > 0 && isfinite(norm) && norm > f->grad_clip) {
        float s = (float)(f->grad_clip / (norm + 1e-6));
        for (size_t k = 0; k < f->n_blocks; k++)
            for (size_t i = 0; i < f->n[k]; i++) f->grads[k][i] *= s;
    }
    return norm;
}

hy_status hy_fit_run(hy_fit *f, size_t max_steps, size_t *ran) {
    hy_xfmr *m = f->model;
    hy_progress *p = &f->prog;
    const hy_fit_objective *o = f->obj;
    int drop = m->cfg.attn_dropout > 0 || m->cfg.mlp_dropout > 0;
    double t0 = hy_now();
    hy_status st = HY_OK;
    size_t done = 0;
    while (done < max_steps) {
        size_t b = hy_loader_next(&f->loader);
        if (b == 0) break;
        /* dropout masks are a function of (seed, global step) only */
        if (drop) hy_xfmr_set_dropout(m, true, hy_hash64(&p->step, sizeof p->step, f->seed));
        double loss = 0;
        if ((st = o->forward(f, b, &loss)) != HY_OK) break;
        if (!isfinite(loss)) {
            st = hy_fail(HY_EINVAL, "%s: non-finite loss (%s) at step %lld (epoch %llu, "
                         "batch %zu of %zu)", o->who, nonfinite_name(loss),
                         (long long)p->step + 1, (unsigned long long)p->epoch + 1,
                         p->epoch_step + 1, p->epoch_steps);
            break;
        }
        if ((st = o->backward(f, b)) != HY_OK) break;
        double norm = clip_blocks(f);
        if (!isfinite(norm)) {
            st = hy_fail(HY_EINVAL, "%s: non-finite gradient norm (%s) at step %lld (epoch "
                         "%llu, batch %zu of %zu)", o->who, nonfinite_name(norm),
                         (long long)p->step + 1, (unsigned long long)p->epoch + 1,
                         p->epoch_step + 1, p->epoch_steps);
            break;
        }
        double lr = hy_sched_lr(&f->sched, p->step);
        for (size_t k = 0; k < f->n_blocks; k++)
            hy_adamw_step(&f->opt[k], f->params[k], f->grads[k], lr);
        o->tally(f, b, loss);
        p->lr = lr;
        p->grad_norm = norm;
        p->step++;
        p->epoch_step++;
        done++;
    }
    if (drop) hy_xfmr_set_dropout(m, false, 0);
    p->epoch_seconds += hy_now() - t0;
    *ran = done;
    return st;
}
