/* ref_xfmr.c: see ref_xfmr.h. Textbook loops in double, in the order of DESIGN §2. */
#include "ref_xfmr.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"

static const float *P(const hy_xfmr *m, const char *name) {
    int64_t i = hy_xfmr_param_index(m, name);
    HY_ASSERT(i >= 0);
    return m->params + m->table[i].offset;
}

static const float *PB(const hy_xfmr *m, size_t l, const char *suffix) {
    char nm[64];
    snprintf(nm, sizeof nm, "blocks.%zu.%s", l, suffix);
    return P(m, nm);
}

static void lin(double *out, const double *in, const float *w, const float *b, size_t N,
                size_t I, size_t O) {
    for (size_t n = 0; n < N; n++)
        for (size_t o = 0; o < O; o++) {
            double s = (double)b[o];
            for (size_t i = 0; i < I; i++) s += in[n * I + i] * (double)w[o * I + i];
            out[n * O + o] = s;
        }
}

static void ln(double *out, const double *x, const float *w, const float *b, size_t N, size_t D,
               double eps) {
    for (size_t n = 0; n < N; n++) {
        double m = 0, v = 0;
        for (size_t i = 0; i < D; i++) m += x[n * D + i];
        m /= (double)D;
        for (size_t i = 0; i < D; i++) v += (x[n * D + i] - m) * (x[n * D + i] - m);
        v /= (double)D;
        double r = 1.0 / sqrt(v + eps);
        for (size_t i = 0; i < D; i++)
            out[n * D + i] = (x[n * D + i] - m) * r * (double)w[i] + (double)b[i];
    }
}

static void mask_apply(double *x, const hy_rng *fwd, size_t key, size_t rows, size_t cols,
                       float p) {
    hy_rng r = hy_rng_split(fwd, (uint64_t)key);
    float *mk = malloc(rows * cols * sizeof *mk);
    hy_dropout_mask(mk, &r, rows, cols, p);
    for (size_t i = 0; i < rows * cols; i++) x[i] *= (double)mk[i];
    free(mk);
}

void ref_xfmr_hidden(const hy_xfmr *m, const hy_batch *in, size_t B, bool dropout,
                     uint64_t step, double *x) {
    const hy_xfmr_config *c = &m->cfg;
    size_t D = c->d_model, DM = c->d_mlp, NH = c->n_heads, HS = D / NH;
    bool bert = c->kind == HY_XFMR_TEXT && c->text_embed == HY_TEXT_EMBED_BERT;
    bool post = c->norm == HY_NORM_POST;
    size_t T = c->kind == HY_XFMR_VIT ? m->T : bert ? in->len : 1 + in->len, BT = B * T;
    double eps = (double)hy_xfmr_ln_eps(c);   /* the float kernels' epsilon */
    double *t1 = calloc(BT * D, sizeof *t1);
    double *qkv = calloc(BT * 3 * D, sizeof *qkv), *ao = calloc(BT * D, sizeof *ao);
    double *h = calloc(BT * DM, sizeof *h), *row = calloc(T, sizeof *row);
    hy_rng fwd;
    if (dropout) fwd = hy_rng_split(&m->drop_rng, step);
    const float *pos = P(m, "pos_embed");
    /* embedding: text_embed bert: embed_norm(tok[ids] + type[type_ids] + pos) */
    if (bert) {
        const float *tok = P(m, "tok_embed.weight");
        const float *ty = c->type_vocab ? P(m, "type_embed.weight") : NULL;
        for (size_t b = 0; b < B; b++)
            for (size_t t = 0; t < T; t++) {
                size_t id = (size_t)in->ids[b * in->len + t];
                size_t tt = in->type_ids ? (size_t)in->type_ids[b * in->len + t] : 0;
                for (size_t i = 0; i < D; i++)
                    t1[(b * T + t) * D + i] = (double)tok[id * D + i] +
                                              (ty ? (double)ty[tt * D + i] : 0.0) +
                                              (double)pos[t * D + i];
            }
        ln(x, t1, P(m, "embed_norm.weight"), P(m, "embed_norm.bias"), BT, D, eps);
    }
    const float *cls = bert ? NULL : P(m, "cls_token");
    for (size_t b = 0; b < B && !bert; b++)
        for (size_t t = 0; t < T; t++)
            for (size_t i = 0; i < D; i++) {
                double e;
                if (t == 0) e = (double)cls[i];
                else if (c->kind == HY_XFMR_TEXT) {
                    int32_t id = in->ids[b * in->len + t - 1];
                    e = (double)P(m, "tok_embed.weight")[(size_t)id * D + i];
                } else {
                    size_t G = c->image_size / c->patch, p = c->patch, n = t - 1;
                    size_t gy = n / G, gx = n % G;
                    const float *w = P(m, "patch_embed.proj.weight");
                    e = (double)P(m, "patch_embed.proj.bias")[i];
                    for (size_t ch = 0; ch < c->channels; ch++)
                        for (size_t dy = 0; dy < p; dy++)
                            for (size_t dx = 0; dx < p; dx++)
                                e += (double)w[((i * c->channels + ch) * p + dy) * p + dx] *
                                     (double)in->images[((b * c->channels + ch) * c->image_size
                                                         + gy * p + dy) * c->image_size
                                                        + gx * p + dx];
                }
                x[(b * T + t) * D + i] = e + (double)pos[t * D + i];
            }
    /* blocks */
    double scale = 1.0 / sqrt((double)HS);
    for (size_t l = 0; l < c->depth; l++) {
        if (post) memcpy(t1, x, BT * D * sizeof *t1);
        else ln(t1, x, PB(m, l, "norm1.weight"), PB(m, l, "norm1.bias"), BT, D, eps);
        lin(qkv, t1, PB(m, l, "attn.qkv.weight"), PB(m, l, "attn.qkv.bias"), BT, D, 3 * D);
        for (size_t b = 0; b < B; b++) {
            size_t nk = c->kind == HY_XFMR_TEXT ? (bert ? 0 : 1) + (size_t)in->lengths[b] : T;
            for (size_t hh = 0; hh < NH; hh++)
                for (size_t i = 0; i < T; i++) {
                    double mx = -INFINITY, sum = 0;
                    for (size_t j = 0; j < nk; j++) {
                        double s = 0;
                        for (size_t d = 0; d < HS; d++)
                            s += qkv[(b * T + i) * 3 * D + hh * HS + d] *
                                 qkv[(b * T + j) * 3 * D + D + hh * HS + d];
                        row[j] = s * scale;
                        mx = fmax(mx, row[j]);
                    }
                    for (size_t j = 0; j < nk; j++) {
                        row[j] = exp(row[j] - mx);
                        sum += row[j];
                    }
                    for (size_t d = 0; d < HS; d++) {
                        double y = 0;
                        for (size_t j = 0; j < nk; j++)
                            y += row[j] / sum * qkv[(b * T + j) * 3 * D + 2 * D + hh * HS + d];
                        ao[(b * T + i) * D + hh * HS + d] = (double)m->gates[l * NH + hh] * y;
                    }
                }
        }
        lin(t1, ao, PB(m, l, "attn.proj.weight"), PB(m, l, "attn.proj.bias"), BT, D, D);
        if (dropout && c->attn_dropout > 0) mask_apply(t1, &fwd, l * 4, BT, D, c->attn_dropout);
        for (size_t i = 0; i < BT * D; i++) x[i] += t1[i];
        if (post) {   /* x = LN1(x + attn), the MLP's input and its residual */
            ln(t1, x, PB(m, l, "norm1.weight"), PB(m, l, "norm1.bias"), BT, D, eps);
            memcpy(x, t1, BT * D * sizeof *x);
        } else {
            ln(t1, x, PB(m, l, "norm2.weight"), PB(m, l, "norm2.bias"), BT, D, eps);
        }
        lin(h, t1, PB(m, l, "mlp.fc1.weight"), PB(m, l, "mlp.fc1.bias"), BT, D, DM);
        for (size_t i = 0; i < BT * DM && c->act == HY_ACT_GELU; i++)
            h[i] = 0.5 * h[i] * (1.0 + erf(h[i] / sqrt(2.0)));
        for (size_t i = 0; i < BT * DM && c->act == HY_ACT_GELU_TANH; i++)
            h[i] = 0.5 * h[i] * (1.0 + tanh(sqrt(2.0 / acos(-1.0)) *
                                            (h[i] + 0.044715 * h[i] * h[i] * h[i])));
        if (dropout && c->mlp_dropout > 0) mask_apply(h, &fwd, l * 4 + 1, BT, DM, c->mlp_dropout);
        lin(t1, h, PB(m, l, "mlp.fc2.weight"), PB(m, l, "mlp.fc2.bias"), BT, DM, D);
        if (dropout && c->mlp_dropout > 0) mask_apply(t1, &fwd, l * 4 + 2, BT, D, c->mlp_dropout);
        for (size_t i = 0; i < BT * D; i++) x[i] += t1[i];
        if (post) {   /* x = LN2(x + mlp) */
            ln(t1, x, PB(m, l, "norm2.weight"), PB(m, l, "norm2.bias"), BT, D, eps);
            memcpy(x, t1, BT * D * sizeof *x);
        }
    }
    free(t1); free(qkv); free(ao); free(h); free(row);
}

void ref_xfmr_forward(const hy_xfmr *m, const hy_batch *in, size_t B, bool dropout,
                      uint64_t step, double *logits) {
    const hy_xfmr_config *c = &m->cfg;
    size_t D = c->d_model, K = c->n_classes;
    bool bert = c->kind == HY_XFMR_TEXT && c->text_embed == HY_TEXT_EMBED_BERT;
    size_t T = c->kind == HY_XFMR_VIT ? m->T : bert ? in->len : 1 + in->len;
    double *x = calloc(B * T * D, sizeof *x);
    ref_xfmr_hidden(m, in, B, dropout, step, x);
    /* head on the CLS rows */
    double *cl = calloc(B * D, sizeof *cl), *cn = calloc(B * D, sizeof *cn);
    for (size_t b = 0; b < B; b++) memcpy(cl + b * D, x + b * T * D, D * sizeof *cl);
    if (c->norm == HY_NORM_PRE)
        ln(cn, cl, P(m, "norm.weight"), P(m, "norm.bias"), B, D, (double)hy_xfmr_ln_eps(c));
    else
        memcpy(cn, cl, B * D * sizeof *cn);
    if (c->pooler == HY_POOLER_TANH) {   /* head(drop(tanh(pooler(.)))) */
        lin(cl, cn, P(m, "pooler.weight"), P(m, "pooler.bias"), B, D, D);
        for (size_t i = 0; i < B * D; i++) cn[i] = tanh(cl[i]);
        if (dropout && c->mlp_dropout > 0) {
            hy_rng fwd = hy_rng_split(&m->drop_rng, step);
            mask_apply(cn, &fwd, c->depth * 4, B, D, c->mlp_dropout);
        }
    }
    lin(logits, cn, P(m, "head.weight"), P(m, "head.bias"), B, D, K);
    free(x); free(cl); free(cn);
}
