/* mlm.c: see mlm.h. Sections: masking, the head (layout, init), loss + backward, trainer,
 * evaluation. */
#include "nn/mlm.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/ckpt.h"
#include "nn/layers.h"
#include "tensor/rng.h"
#include "tensor/vmath.h"

/* ===== masking ===== */

hy_status hy_mlm_mask_check(const hy_mlm_mask_config *c) {
    if (!(c->mask_rate > 0.0 && c->mask_rate <= 1.0))
        return hy_fail(HY_ECONFIG, "pretrain: mask_rate must be in (0, 1] (got %g)", c->mask_rate);
    if (!(c->mask_token >= 0.0 && c->mask_token <= 1.0))
        return hy_fail(HY_ECONFIG, "pretrain: mask_token must be in [0, 1] (got %g)",
                       c->mask_token);
    if (!(c->random_token >= 0.0 && c->random_token <= 1.0 - c->mask_token))
        return hy_fail(HY_ECONFIG, "pretrain: random_token must be in [0, 1 - mask_token] "
                       "(got %g with mask_token %g)", c->random_token, c->mask_token);
    return HY_OK;
}

size_t hy_mlm_mask(int32_t *out, int32_t *targets, const int32_t *ids, const int32_t *lengths,
                   const int64_t *index, size_t B, size_t len, size_t V,
                   const hy_mlm_mask_config *c, uint64_t seed, uint64_t stream) {
    HY_ASSERT(V > HY_TOK_NRESERVED);
    size_t chosen = 0;
    for (size_t b = 0; b < B; b++) {
        const int32_t *src = ids + b * len;
        int32_t *dst = out + b * len, *tg = targets + b * len;
        size_t n = (size_t)lengths[b];
        uint64_t key[2] = {stream, (uint64_t)index[b]};
        hy_rng r;
        hy_rng_seed(&r, hy_hash64(key, sizeof key, seed));
        size_t row = 0;
        for (size_t t = 0; t < len; t++) {
            dst[t] = src[t];
            tg[t] = -1;
            if (t < n && hy_rng_double(&r) < c->mask_rate) {
                tg[t] = src[t];
                row++;
            }
        }
        if (n > 0 && row == 0) {
            size_t t = (size_t)hy_rng_below(&r, n);
            tg[t] = src[t];
            row = 1;
        }
        for (size_t t = 0; t < n; t++) {
            if (tg[t] < 0) continue;
            double u = hy_rng_double(&r);
            if (u < c->mask_token) dst[t] = HY_TOK_MASK;
            else if (u < c->mask_token + c->random_token)
                dst[t] = (int32_t)(HY_TOK_NRESERVED + hy_rng_below(&r, V - HY_TOK_NRESERVED));
        }
        chosen += row;
    }
    return chosen;
}

/* ===== the head ===== */

static const char *const names[HY_MLM_N] = {
    "mlm.transform.dense.weight", "mlm.transform.dense.bias", "mlm.transform.norm.weight",
    "mlm.transform.norm.bias", "mlm.bias"};

static void free_scratch(hy_mlm *h) {
    hy_free(h->block);
    h->block = NULL;
    h->N_cap = 0;
}

void hy_mlm_release(hy_mlm *h) {
    if (!h) return;
    free_scratch(h);
    hy_free(h->params);
    hy_free(h->grads);
    memset(h, 0, sizeof *h);
}

hy_status hy_mlm_new(hy_mlm *h, const hy_xfmr_config *c) {
    memset(h, 0, sizeof *h);
    if (c->kind != HY_XFMR_TEXT)
        return hy_fail(HY_ECONFIG, "mlm: masked-language-model pretraining needs a text model "
                       "(model.kind text)");
    HY_TRY(hy_xfmr_config_check(c));
    /* the head reads the final LayerNorm and the hydra embedding's CLS-shifted rows */
    const char *opt = hy_xfmr_nondefault_option(c);
    if (opt)
        return hy_fail(HY_ECONFIG, "mlm: masked-language-model pretraining does not support "
                       "model.%s", opt);
    if (c->vocab_size <= HY_TOK_NRESERVED)
        return hy_fail(HY_ECONFIG, "mlm: vocab_size must be > %d (PAD, UNK, CLS, MASK are "
                       "reserved; got %zu)", HY_TOK_NRESERVED, c->vocab_size);
    size_t D = c->d_model, V = c->vocab_size, n = 0, off = 0;
    int64_t sDD[2] = {(int64_t)D, (int64_t)D}, sD[1] = {(int64_t)D}, sV[1] = {(int64_t)V};
    hy_param_table_add(h->table, &n, &off, names[HY_MLM_DENSE_W], 2, sDD, true);
    hy_param_table_add(h->table, &n, &off, names[HY_MLM_DENSE_B], 1, sD, false);
    hy_param_table_add(h->table, &n, &off, names[HY_MLM_NORM_W], 1, sD, false);
    hy_param_table_add(h->table, &n, &off, names[HY_MLM_NORM_B], 1, sD, false);
    hy_param_table_add(h->table, &n, &off, names[HY_MLM_BIAS], 1, sV, false);
    HY_ASSERT(n == HY_MLM_N);
    h->D = D;
    h->V = V;
    h->n_params = off;
    h->params = hy_xmalloc_aligned(off * sizeof(float));
    h->grads = hy_xmalloc_aligned(off * sizeof(float));
    if (!h->params || !h->grads) {
        hy_mlm_release(h);
        return HY_ENOMEM;
    }
    memset(h->params, 0, off * sizeof(float));
    memset(h->grads, 0, off * sizeof(float));
    for (size_t i = 0; i < HY_MLM_N; i++) {
        h->w[i] = h->params + h->table[i].offset;
        h->g[i] = h->grads + h->table[i].offset;
    }
    return HY_OK;
}

/* truncated normal at +-2 std (hy_xfmr_init's) */
static float trunc_normal(hy_rng *r, double std) {
    for (;;) {
        double z = hy_rng_normal(r);
        if (z >= -2.0 && z <= 2.0) return (float)(z * std);
    }
}

void hy_mlm_init(hy_mlm *h, uint64_t seed) {
    /* a stream of its own: tensor 0 of the model (hy_xfmr_init) draws from split(seed, 0) */
    hy_rng root;
    hy_rng_seed(&root, hy_hash64("mlm", 3, seed));
    memset(h->params, 0, h->n_params * sizeof(float));
    for (size_t i = 0; i < h->D; i++) h->w[HY_MLM_NORM_W][i] = 1.0f;
    hy_rng r = hy_rng_split(&root, HY_MLM_DENSE_W);
    for (size_t k = 0; k < h->D * h->D; k++) h->w[HY_MLM_DENSE_W][k] = trunc_normal(&r, 0.02);
}

int64_t hy_mlm_param_index(const hy_mlm *h, const char *name) {
    for (size_t i = 0; i < HY_MLM_N; i++)
        if (strcmp(h->table[i].name, name) == 0) return (int64_t)i;
    return -1;
}

/* scratch for N predicted rows (grown, never shrunk) */
static hy_status ensure_scratch(hy_mlm *h, size_t N) {
    if (N <= h->N_cap && h->block) return HY_OK;
    free_scratch(h);
    size_t D = h->D, R = (N + 15) / 16 * 16, RD = R * D, nb;
    /* xs a h gl u du dg da: 8 x (R, D); 4 x (R) stats; z (CHUNK, V); rows int64, tgt int32 */
    size_t floats = 8 * RD + 4 * R + (size_t)HY_MLM_CHUNK * h->V + 2 * R + R;
    HY_TRY(hy_size_mul(&nb, "mlm: scratch (rows x d_model)", floats, sizeof(float), 1));
    h->block = hy_xmalloc_aligned(nb);
    if (!h->block) return HY_ENOMEM;
    float *q = h->block;
#define TAKE(p, n) do { p = q; q += (n); } while (0)
    TAKE(h->xs, RD); TAKE(h->a, RD); TAKE(h->h, RD); TAKE(h->gl, RD); TAKE(h->u, RD);
    TAKE(h->du, RD); TAKE(h->dg, RD); TAKE(h->da, RD);
    TAKE(h->a_mean, R); TAKE(h->a_rstd, R); TAKE(h->u_mean, R); TAKE(h->u_rstd, R);
    TAKE(h->z, (size_t)HY_MLM_CHUNK * h->V);
#undef TAKE
    h->rows = (int64_t *)q;
    h->tgt = (int32_t *)(h->rows + R);
    h->N_cap = R;
    return HY_OK;
}

/* ===== loss + backward ===== */

/* z (V) := softmax(z); returns -log softmax(z)_y (max-shifted; the sum in double) */
static double softmax_ce_inplace(float *z, size_t y, size_t V) {
    float mx = -INFINITY;
    for (size_t j = 0; j < V; j++) mx = z[j] > mx ? z[j] : mx;
    double zy = (double)z[y] - (double)mx, s = 0.0;
    for (size_t j = 0; j < V; j++) {
        z[j] = hy_exp(z[j] - mx);
        s += (double)z[j];
    }
    float inv = (float)(1.0 / s);
    for (size_t j = 0; j < V; j++) z[j] *= inv;
    return log(s) - zy;
}

static size_t argmax(const float *x, size_t k) {
    size_t best = 0;
    for (size_t j = 1; j < k; j++)
        if (x[j] > x[best]) best = j;
    return best;
}

hy_status hy_mlm_loss(hy_mlm *h, hy_xfmr *m, const int32_t *targets, size_t B, size_t len,
                      bool backward, float *dhidden, double *loss, size_t *correct, size_t *n) {
    const float *xl = hy_xfmr_hidden(m);
    if (!xl) return hy_fail(HY_EINVAL, "mlm: loss without a forward (run hy_xfmr_forward first)");
    if (m->last_B != B || m->last_T != 1 + len)
        return hy_fail(HY_EINVAL, "mlm: targets are %zu x %zu but the last forward was %zu x %zu",
                       B, len, m->last_B, m->last_T - 1);
    if (h->D != m->cfg.d_model || h->V != m->cfg.vocab_size)
        return hy_fail(HY_EINVAL, "mlm: the head is for d_model %zu, vocab_size %zu; the model "
                       "has %zu, %zu", h->D, h->V, m->cfg.d_model, m->cfg.vocab_size);
    size_t D = h->D, V = h->V, T = 1 + len, N = 0;
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < len; t++) {
            int32_t y = targets[b * len + t];
            if (y < -1 || y >= (int32_t)V)
                return hy_fail(HY_EINVAL, "mlm: target %d of row %zu, position %zu out of "
                               "range [0, %zu) (or -1: not predicted)", (int)y, b + 1, t + 1, V);
            N += y >= 0;
        }
    if (backward && dhidden) memset(dhidden, 0, B * T * D * sizeof(float));
    *loss = 0.0;
    *correct = 0;
    *n = N;
    if (N == 0) return HY_OK;
    HY_TRY(ensure_scratch(h, N));
    /* pass 1: gather the predicted rows of x_L */
    size_t i = 0;
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < len; t++) {
            int32_t y = targets[b * len + t];
            if (y < 0) continue;
            h->rows[i] = (int64_t)(b * T + 1 + t);
            h->tgt[i] = y;
            memcpy(h->xs + i * D, xl + (b * T + 1 + t) * D, D * sizeof(float));
            i++;
        }
    /* a = LN_f(xs); h = a Wd^T + bd; gl = GELU(h); u = LN_m(gl) */
    hy_layernorm_forward(h->a, h->a_mean, h->a_rstd, h->xs, m->p.norm_w, m->p.norm_b, N, D,
                         hy_xfmr_ln_eps(&m->cfg));
    hy_linear_forward(h->h, h->a, h->w[HY_MLM_DENSE_W], h->w[HY_MLM_DENSE_B], N, D, D);
    hy_gelu_forward(h->gl, h->h, N * D);
    hy_layernorm_forward(h->u, h->u_mean, h->u_rstd, h->gl, h->w[HY_MLM_NORM_W],
                         h->w[HY_MLM_NORM_B], N, D, hy_xfmr_ln_eps(&m->cfg));
    if (backward) memset(h->du, 0, N * D * sizeof(float));
    /* z = u E^T + bv in chunks of HY_MLM_CHUNK rows: loss, accuracy and (backward) dz = (p -
     * onehot) / N, du += dz E, dE += dz^T u, dbv += column sums of dz */
    double sum = 0.0;
    for (size_t r0 = 0; r0 < N; r0 += HY_MLM_CHUNK) {
        size_t R = N - r0 < HY_MLM_CHUNK ? N - r0 : HY_MLM_CHUNK;
        const float *u = h->u + r0 * D;
        hy_linear_forward(h->z, u, m->p.tok_embed, h->w[HY_MLM_BIAS], R, D, V);
        for (size_t k = 0; k < R; k++) {
            float *zr = h->z + k * V;
            size_t y = (size_t)h->tgt[r0 + k];
            *correct += argmax(zr, V) == y;
            sum += softmax_ce_inplace(zr, y, V);
            if (!backward) continue;
            /* dz = (p - onehot) / N, in place */
            float inv = 1.0f / (float)N;
            for (size_t j = 0; j < V; j++) zr[j] *= inv;
            zr[y] -= inv;
        }
        if (!backward) continue;
        hy_linear_backward(h->du + r0 * D, m->g.tok_embed, h->g[HY_MLM_BIAS], h->z, u,
                           m->p.tok_embed, R, D, V);
    }
    *loss = sum / (double)N;
    if (!backward) return HY_OK;
    /* u = LN_m(gl) */
    memset(h->dg, 0, N * D * sizeof(float));
    hy_layernorm_backward(h->dg, h->g[HY_MLM_NORM_W], h->g[HY_MLM_NORM_B], h->du, h->gl,
                          h->u_mean, h->u_rstd, h->w[HY_MLM_NORM_W], N, D);
    /* gl = GELU(h): dh = dg GELU'(h), in place */
    hy_gelu_backward_set(h->dg, h->dg, h->h, N * D);
    /* h = a Wd^T + bd */
    hy_linear_backward_set(h->da, h->g[HY_MLM_DENSE_W], h->g[HY_MLM_DENSE_B], h->dg, h->a,
                           h->w[HY_MLM_DENSE_W], N, D, D);
    /* a = LN_f(xs): dxs into du (free now), then scattered to dhidden */
    memset(h->du, 0, N * D * sizeof(float));
    hy_layernorm_backward(h->du, m->g.norm_w, m->g.norm_b, h->da, h->xs, h->a_mean, h->a_rstd,
                          m->p.norm_w, N, D);
    if (dhidden)
        for (size_t k = 0; k < N; k++)
            memcpy(dhidden + (size_t)h->rows[k] * D, h->du + k * D, D * sizeof(float));
    return HY_OK;
}

/* ===== files ===== */

hy_status hy_mlm_write(hy_h5 *f, const hy_mlm *h) {
    char name[96];
    for (size_t i = 0; i < HY_MLM_N; i++) {
        const hy_param *p = &h->table[i];
        snprintf(name, sizeof name, "/mlm/params/%s", p->name);
        HY_TRY(hy_h5_write_data(f, name, HY_F32, p->ndim, p->shape, h->w[i]));
    }
    return HY_OK;
}

hy_status hy_mlm_read(hy_h5 *f, hy_mlm *h) {
    char name[96];
    for (size_t i = 0; i < HY_MLM_N; i++) {
        const hy_param *p = &h->table[i];
        snprintf(name, sizeof name, "/mlm/params/%s", p->name);
        HY_TRY(hy_ckpt_read_tensor(f, name, p->name, p->ndim, p->shape, h->w[i]));
    }
    return HY_OK;
}

/* ===== the pretraining trainer ===== */

void hy_mlm_trainer_release(hy_mlm_trainer *t) {
    if (!t) return;
    hy_fit_release(&t->fit);
    hy_free(t->in_ids);
    hy_free(t->targets);
    hy_free(t->logits);
    hy_free(t->dhidden);
    memset(t, 0, sizeof *t);
}

static hy_status check_text(const hy_xfmr *m, const hy_dataset *ds) {
    if (ds->kind != HY_DATA_TEXT)
        return hy_fail(HY_EINVAL, "pretrain: the corpus must be text");
    const char *who = ds->origin[0] ? ds->origin : "the corpus";
    for (size_t i = 0; i < ds->n; i++) {
        if ((size_t)ds->lengths[i] > m->cfg.max_len)
            return hy_fail(HY_EINVAL, "pretrain: %s: row %zu (0-based) has %d tokens, more than "
                           "the model's max_len %zu", who, i, (int)ds->lengths[i],
                           m->cfg.max_len);
        for (size_t k = 0; k < ds->max_len; k++) {
            int32_t id = ds->ids[i * ds->max_len + k];
            if ((size_t)id >= m->cfg.vocab_size)
                return hy_fail(HY_EINVAL, "pretrain: %s: token id %d at row %zu (0-based) is "
                               "outside the model's vocab_size %zu", who, (int)id, i,
                               m->cfg.vocab_size);
        }
    }
    return HY_OK;
}

static hy_status mlm_forward(hy_fit *f, size_t B, double *loss) {
    hy_mlm_trainer *t = f->ctx;
    hy_xfmr *m = f->model;
    hy_mlm *h = t->head;
    size_t len = f->loader.len;
    hy_mlm_mask(t->in_ids, t->targets, f->loader.ids, f->loader.lengths, f->loader.index, B, len,
                h->V, &t->cfg.mask, t->cfg.seed, f->prog.epoch);
    hy_batch in = {.ids = t->in_ids, .lengths = f->loader.lengths, .len = len};
    HY_TRY(hy_train_ensure_acts(m, B));   /* freed by an evaluation in between */
    HY_TRY(hy_xfmr_forward(m, &in, B, t->logits));
    /* the loss's backward through the head adds into both blocks' gradients */
    hy_xfmr_zero_grad(m);
    memset(h->grads, 0, h->n_params * sizeof(float));
    t->correct = t->n = 0;
    return hy_mlm_loss(h, m, t->targets, B, len, true, t->dhidden, loss, &t->correct, &t->n);
}

static hy_status mlm_backward(hy_fit *f, size_t B) {
    (void)B;
    hy_mlm_trainer *t = f->ctx;
    return hy_xfmr_backward_hidden(f->model, NULL, t->dhidden);
}

static void mlm_tally(hy_fit *f, size_t B, double loss) {
    (void)B;
    hy_mlm_trainer *t = f->ctx;
    hy_progress *p = &f->prog;
    p->epoch_correct += t->correct;
    p->epoch_seen += t->n;
    p->epoch_loss_sum += loss * (double)t->n;
    p->loss = loss;
}

static const hy_fit_objective mlm_objective = {"pretrain", mlm_forward, mlm_backward, mlm_tally};

hy_status hy_mlm_trainer_new(hy_mlm_trainer *t, hy_xfmr *m, hy_mlm *h, const hy_dataset *ds,
                             const hy_mlm_train_config *cfg) {
    memset(t, 0, sizeof *t);
    if (cfg->epochs < 1) return hy_fail(HY_EINVAL, "pretrain: epochs must be >= 1 (got 0)");
    if (cfg->batch_size < 1)
        return hy_fail(HY_EINVAL, "pretrain: batch_size must be >= 1 (got 0)");
    if (!(cfg->warmup_epochs >= 0))
        return hy_fail(HY_EINVAL, "pretrain: warmup_epochs must be >= 0 (got %g)",
                       cfg->warmup_epochs);
    if (!(cfg->grad_clip >= 0))
        return hy_fail(HY_EINVAL, "pretrain: grad_clip must be >= 0 (got %g)", cfg->grad_clip);
    if (!(cfg->min_lr >= 0 && cfg->min_lr <= cfg->optim.learning_rate))
        return hy_fail(HY_EINVAL, "pretrain: min_lr must be in [0, learning_rate] (got %g)",
                       cfg->min_lr);
    if (ds->n == 0) return hy_fail(HY_EINVAL, "pretrain: the corpus has no samples");
    if (h->D != m->cfg.d_model || h->V != m->cfg.vocab_size)
        return hy_fail(HY_EINVAL, "pretrain: the MLM head does not fit the model");
    HY_TRY(hy_adamw_config_check(&cfg->optim));
    HY_TRY(hy_mlm_mask_check(&cfg->mask));
    HY_TRY(check_text(m, ds));
    size_t B = cfg->batch_size < ds->n ? cfg->batch_size : ds->n, L = ds->max_len, nb;
    hy_status st = hy_fit_new(&t->fit, m, ds, B, NULL, cfg->seed, cfg->grad_clip,
                              &mlm_objective, t);
    if (st != HY_OK) return st;
    st = hy_fit_block(&t->fit, m->params, m->grads, m->table, m->n_tensors, m->n_params,
                      &cfg->optim);
    if (st == HY_OK)
        st = hy_fit_block(&t->fit, h->params, h->grads, h->table, HY_MLM_N, h->n_params,
                          &cfg->optim);
    if (st != HY_OK) goto fail;
    if ((st = hy_size_mul(&nb, "pretrain: batch (batch_size x max_len)", B, L + 1,
                          m->cfg.d_model)) != HY_OK)
        goto fail;
    t->in_ids = hy_xmalloc(B * L * sizeof(int32_t) + 1);
    t->targets = hy_xmalloc(B * L * sizeof(int32_t) + 1);
    t->logits = hy_xmalloc(B * m->cfg.n_classes * sizeof(float));
    t->dhidden = hy_xmalloc_aligned(nb * sizeof(float));
    if (!t->in_ids || !t->targets || !t->logits || !t->dhidden) { st = HY_ENOMEM; goto fail; }
    if ((st = hy_train_ensure_acts(m, B)) != HY_OK) goto fail;
    t->head = h;
    t->cfg = *cfg;
    hy_fit_plan(&t->fit, cfg->schedule, cfg->optim.learning_rate, cfg->min_lr, cfg->epochs,
                cfg->warmup_epochs);
    return HY_OK;
fail:
    hy_mlm_trainer_release(t);
    return st;
}

hy_status hy_mlm_trainer_write_state(hy_h5 *f, const hy_mlm_trainer *t) {
    int64_t nm = (int64_t)t->fit.model->n_params, nh = (int64_t)t->head->n_params;
    HY_TRY(hy_h5_write_data(f, "/mlm/state/model_m", HY_F32, 1, &nm, t->fit.opt[0].m));
    HY_TRY(hy_h5_write_data(f, "/mlm/state/model_v", HY_F32, 1, &nm, t->fit.opt[0].v));
    HY_TRY(hy_h5_write_data(f, "/mlm/state/head_m", HY_F32, 1, &nh, t->fit.opt[1].m));
    HY_TRY(hy_h5_write_data(f, "/mlm/state/head_v", HY_F32, 1, &nh, t->fit.opt[1].v));
    HY_TRY(hy_h5_set_attr_i64(f, "/mlm/state", "step", t->fit.prog.step));
    return hy_h5_set_attr_i64(f, "/mlm/state", "adam_t", t->fit.opt[0].t);
}

hy_status hy_mlm_trainer_read_state(hy_h5 *f, hy_mlm_trainer *t) {
    int64_t nm = (int64_t)t->fit.model->n_params, nh = (int64_t)t->head->n_params, step = 0, at = 0;
    HY_TRY(hy_ckpt_read_tensor(f, "/mlm/state/model_m", "model_m", 1, &nm, t->fit.opt[0].m));
    HY_TRY(hy_ckpt_read_tensor(f, "/mlm/state/model_v", "model_v", 1, &nm, t->fit.opt[0].v));
    HY_TRY(hy_ckpt_read_tensor(f, "/mlm/state/head_m", "head_m", 1, &nh, t->fit.opt[1].m));
    HY_TRY(hy_ckpt_read_tensor(f, "/mlm/state/head_v", "head_v", 1, &nh, t->fit.opt[1].v));
    HY_TRY(hy_h5_get_attr_i64(f, "/mlm/state", "step", &step));
    HY_TRY(hy_h5_get_attr_i64(f, "/mlm/state", "adam_t", &at));
    if (step < 0 || at < 0 || step > t->fit.prog.total_steps)
        return hy_fail(HY_EINVAL, "mlm: '%s': /mlm/state step %lld out of range [0, %lld]",
                       f->path, (long long)step, (long long)t->fit.prog.total_steps);
    t->fit.prog.step = step;
    t->fit.opt[0].t = at;
    t->fit.opt[1].t = at;
    return HY_OK;
}

/* ===== evaluation ===== */

/* the held-out masks' stream (training uses the epoch number) */
#define EVAL_STREAM UINT64_MAX

hy_status hy_mlm_evaluate(hy_xfmr *m, hy_mlm *h, const hy_dataset *ds, size_t batch_size,
                          const hy_mlm_mask_config *mc, uint64_t seed, double *loss,
                          double *acc, size_t *n) {
    *loss = 0;
    *acc = 0;
    *n = 0;
    if (batch_size < 1) return hy_fail(HY_EINVAL, "pretrain: eval batch size must be >= 1");
    HY_TRY(hy_mlm_mask_check(mc));
    HY_TRY(check_text(m, ds));
    if (ds->n == 0) return HY_OK;
    size_t B = batch_size < ds->n ? batch_size : ds->n;
    HY_TRY(hy_xfmr_ensure_infer(m, B));
    hy_loader ld;
    HY_TRY(hy_loader_new(&ld, ds, B, 0, NULL, 0));
    hy_status st = HY_OK;
    size_t L = ds->max_len;
    int32_t *ids = hy_xmalloc(B * L * sizeof *ids + 1), *tg = hy_xmalloc(B * L * sizeof *tg + 1);
    float *logits = hy_xmalloc(B * m->cfg.n_classes * sizeof *logits);
    if (!ids || !tg || !logits) { st = HY_ENOMEM; goto done; }
    double sum = 0;
    size_t correct = 0, total = 0, b;
    while ((b = hy_loader_next(&ld)) > 0) {
        hy_mlm_mask(ids, tg, ld.ids, ld.lengths, ld.index, b, ld.len, h->V, mc, seed,
                    EVAL_STREAM);
        hy_batch in = {.ids = ids, .lengths = ld.lengths, .len = ld.len};
        if ((st = hy_xfmr_infer(m, &in, b, logits)) != HY_OK) goto done;
        double l = 0;
        size_t c = 0, k = 0;
        if ((st = hy_mlm_loss(h, m, tg, b, ld.len, false, NULL, &l, &c, &k)) != HY_OK) goto done;
        sum += l * (double)k;
        correct += c;
        total += k;
    }
    if (total > 0) {
        *loss = sum / (double)total;
        *acc = (double)correct / (double)total;
    }
    *n = total;
done:
    hy_free(ids);
    hy_free(tg);
    hy_free(logits);
    hy_loader_release(&ld);
    return st;
}
