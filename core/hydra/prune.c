/* prune.c: see prune.h. Batches of a subset come from a non-shuffling hy_loader filled with the
 * subset's rows (hy_loader_fill), so images are normalised exactly as in training and
 * prediction. Sums are accumulated in double; the forward runs with dropout off. */
#include "hydra/prune.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/layers.h"
#include "nn/train.h"
#include "eval/metrics.h"

/* ===== names ===== */

const char *hy_objective_name(hy_objective o) {
    switch (o) {
    case HY_OBJ_ACC: return "acc";
    case HY_OBJ_OOD: return "ood";
    case HY_OBJ_AVG: return "avg";
    }
    return "?";
}

hy_status hy_objective_parse(const char *s, hy_objective *out) {
    if (strcmp(s, "acc") == 0) *out = HY_OBJ_ACC;
    else if (strcmp(s, "ood") == 0) *out = HY_OBJ_OOD;
    else if (strcmp(s, "avg") == 0) *out = HY_OBJ_AVG;
    else return hy_fail(HY_EINVAL, "prune: unknown objective '%s' (expected acc, ood or avg)", s);
    return HY_OK;
}

/* ===== batches over a subset ===== */

typedef struct sweep {
    const hy_subset *s;
    hy_loader ld;
    int64_t *rows;      /* (batch) row indices of the current batch */
    size_t pos, bs;
} sweep;

static hy_status sweep_open(sweep *w, const hy_subset *s, size_t bs) {
    memset(w, 0, sizeof *w);
    if (s->n == 0) return hy_fail(HY_EINVAL, "prune: empty data subset");
    if (!s->idx && s->n > s->ds->n)
        return hy_fail(HY_EINVAL, "prune: subset of %zu rows from a dataset of %zu", s->n,
                       s->ds->n);
    w->s = s;
    w->bs = bs;
    w->rows = hy_xmalloc(bs * sizeof *w->rows);
    if (!w->rows) return HY_ENOMEM;
    hy_status st = hy_loader_new(&w->ld, s->ds, bs, 0, NULL, 0);
    if (st != HY_OK) {
        hy_free(w->rows);
        w->rows = NULL;
    }
    return st;
}

static void sweep_close(sweep *w) {
    if (w->rows) hy_loader_release(&w->ld);
    hy_free(w->rows);
    memset(w, 0, sizeof *w);
}

/* fills the next batch; returns its size (0 at the end) and the batch in *in */
static size_t sweep_next(sweep *w, hy_batch *in) {
    size_t b = w->s->n - w->pos < w->bs ? w->s->n - w->pos : w->bs;
    if (b == 0) return 0;
    for (size_t i = 0; i < b; i++)
        w->rows[i] = w->s->idx ? w->s->idx[w->pos + i] : (int64_t)(w->pos + i);
    hy_loader_fill(&w->ld, w->rows, b);
    w->pos += b;
    hy_train_input(&w->ld, in);
    return b;
}

static hy_status check_rows(const hy_subset *s) {
    if (!s->idx) return HY_OK;
    for (size_t i = 0; i < s->n; i++)
        if (s->idx[i] < 0 || (size_t)s->idx[i] >= s->ds->n)
            return hy_fail(HY_EINVAL, "prune: row %lld of a subset out of range [0, %zu)",
                           (long long)s->idx[i], s->ds->n);
    return HY_OK;
}

static hy_status prepare(hy_xfmr *m, size_t bs) {
    if (bs == 0) return hy_fail(HY_EINVAL, "prune: batch_size must be >= 1 (got 0)");
    if (m->dropout_on) hy_xfmr_set_dropout(m, false, 0);
    if (m->B_cap >= bs && m->acts) return HY_OK;
    return hy_xfmr_alloc_acts(m, bs);
}

/* ===== Taylor ===== */

hy_status hy_prune_taylor(hy_xfmr *m, const hy_subset *calib, size_t batch_size, bool normalize,
                          float *scores) {
    size_t L = m->cfg.depth, NH = m->cfg.n_heads, K = m->cfg.n_classes, LH = L * NH;
    HY_TRY(check_rows(calib));
    HY_TRY(prepare(m, batch_size));
    sweep w;
    HY_TRY(sweep_open(&w, calib, batch_size));
    hy_status st = HY_OK;
    float *logits = hy_xmalloc(batch_size * K * sizeof(float));
    float *dlogits = hy_xmalloc(batch_size * K * sizeof(float));
    double *acc = hy_xcalloc(LH, sizeof(double));
    if (!logits || !dlogits || !acc) {
        st = HY_ENOMEM;
        goto done;
    }
    size_t nb = 0, B;
    hy_batch in;
    while ((B = sweep_next(&w, &in)) > 0) {
        double loss;
        hy_xfmr_zero_grad(m);
        if ((st = hy_xfmr_forward(m, &in, B, logits)) != HY_OK) goto done;
        if ((st = hy_xfmr_loss(m, logits, w.ld.labels, B, 0.0f, &loss, dlogits)) != HY_OK)
            goto done;
        if ((st = hy_xfmr_backward(m, dlogits)) != HY_OK) goto done;
        for (size_t i = 0; i < LH; i++) acc[i] += fabs((double)m->dgates[i]);
        nb++;
    }
    for (size_t l = 0; l < L; l++) {
        double norm = 0.0;
        for (size_t h = 0; h < NH; h++) {
            acc[l * NH + h] /= (double)nb;
            norm += acc[l * NH + h] * acc[l * NH + h];
        }
        norm = sqrt(norm);
        for (size_t h = 0; h < NH; h++)
            scores[l * NH + h] = (float)(normalize && norm > 0.0 ? acc[l * NH + h] / norm
                                                                 : acc[l * NH + h]);
    }
done:
    hy_xfmr_zero_grad(m);
    hy_free(logits);
    hy_free(dlogits);
    hy_free(acc);
    sweep_close(&w);
    return st;
}

/* ===== objectives ===== */

/* per-sample NLL (nll, may be NULL) and MSP OOD score -max p (msp, may be NULL) of a subset */
static hy_status run_subset(hy_xfmr *m, const hy_subset *s, size_t bs, double *nll, double *msp) {
    size_t K = m->cfg.n_classes;
    sweep w;
    HY_TRY(sweep_open(&w, s, bs));
    hy_status st = HY_OK;
    float *logits = hy_xmalloc(bs * K * sizeof(float));
    if (!logits) st = HY_ENOMEM;
    size_t first = 0, B;
    hy_batch in;
    while (st == HY_OK && (B = sweep_next(&w, &in)) > 0) {
        if ((st = hy_xfmr_infer(m, &in, B, logits)) != HY_OK) break;
        for (size_t b = 0; b < B; b++) {
            const float *z = logits + b * K;
            double mx = -INFINITY;
            for (size_t k = 0; k < K; k++) mx = (double)z[k] > mx ? (double)z[k] : mx;
            double lse = hy_logsumexp(z, K);
            if (nll) {
                int32_t y = w.ld.labels[b];
                if (y < 0 || (size_t)y >= K) {
                    st = hy_fail(HY_EINVAL, "prune: label %d of ID sample %zu outside [0, %zu)",
                                 (int)y, first + b + 1, K);
                    break;
                }
                nll[first + b] = lse - (double)z[y];
            }
            if (msp) msp[first + b] = -exp(mx - lse);
        }
        first += B;
    }
    hy_free(logits);
    sweep_close(&w);
    return st;
}

hy_status hy_prune_objective(hy_xfmr *m, const hy_subset *id, const hy_subset *ood,
                             size_t batch_size, double *nll, double *auroc) {
    HY_TRY(check_rows(id));
    if (ood) HY_TRY(check_rows(ood));
    HY_TRY(prepare(m, batch_size));
    bool want_auc = ood && auroc;
    hy_status st = HY_OK;
    double *nl = hy_xmalloc(id->n * sizeof(double));
    double *sid = want_auc ? hy_xmalloc(id->n * sizeof(double)) : NULL;
    double *sood = want_auc ? hy_xmalloc(ood->n * sizeof(double)) : NULL;
    if (!nl || (want_auc && (!sid || !sood))) {
        st = HY_ENOMEM;
        goto done;
    }
    if ((st = run_subset(m, id, batch_size, nl, sid)) != HY_OK) goto done;
    double sum = 0.0;
    for (size_t i = 0; i < id->n; i++) sum += nl[i];
    if (nll) *nll = sum / (double)id->n;
    if (want_auc) {
        if ((st = run_subset(m, ood, batch_size, NULL, sood)) != HY_OK) goto done;
        st = hy_metrics_auroc(auroc, sid, id->n, sood, ood->n);
    }
done:
    hy_free(nl);
    hy_free(sid);
    hy_free(sood);
    return st;
}

/* ===== selection ===== */

void hy_prune_select(float *gates, const float *scores, const float *prior, double penalty,
                     size_t H, size_t keep) {
    HY_ASSERT(keep >= 1 && keep <= H);
    double mn = INFINITY;
    for (size_t h = 0; h < H; h++) mn = (double)scores[h] < mn ? (double)scores[h] : mn;
    for (size_t h = 0; h < H; h++) gates[h] = 0.0f;
    for (size_t n = 0; n < keep; n++) {
        size_t best = H;
        double bv = -INFINITY;
        for (size_t h = 0; h < H; h++) {
            if (gates[h] != 0.0f) continue;
            bool pen = prior && prior[h] > 0.0f;
            double r = (double)scores[h] - mn;
            if (pen) r *= 1.0 - penalty;
            /* ties: a head no earlier member kept wins, then the lower index */
            bool better = best == H || r > bv ||
                          (r == bv && !pen && prior && prior[best] > 0.0f && penalty > 0.0);
            if (better) {
                best = h;
                bv = r;
            }
        }
        gates[best] = 1.0f;
    }
}

/* ===== circuit search ===== */

static void minmax(double *x, size_t n) {
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    for (size_t i = 0; i < n; i++) x[i] = hi > lo ? (x[i] - lo) / (hi - lo) : 0.0;
}

/* progress reporting of the circuit search: evaluations done so far of `total` */
typedef struct circuit_progress {
    void (*fn)(void *ctx, size_t done, size_t total);
    void *ctx;
    size_t done, total;
} circuit_progress;

static void tick(circuit_progress *p) {
    if (p && p->fn) p->fn(p->ctx, ++p->done, p->total);
}

static hy_status circuit(hy_xfmr *m, const hy_subset *id, const hy_subset *ood,
                         hy_objective obj, const size_t *keep, const float *prior,
                         double penalty, size_t batch_size, float *scores, float *circuit,
                         circuit_progress *prog) {
    size_t L = m->cfg.depth, NH = m->cfg.n_heads, LH = L * NH;
    bool need_ood = obj != HY_OBJ_ACC;
    if (need_ood && (!ood || ood->n == 0))
        return hy_fail(HY_EINVAL, "prune: objective %s needs a validation OOD set",
                       hy_objective_name(obj));
    for (size_t l = 0; l < L; l++)
        if (keep[l] < 1 || keep[l] > NH)
            return hy_fail(HY_EINVAL, "prune: circuit size of layer %zu is %zu (expected 1 to "
                           "%zu)", l + 1, keep[l], NH);
    const hy_subset *o = need_ood ? ood : NULL;
    hy_status st = HY_OK;
    float *saved = hy_xmalloc(LH * sizeof(float));
    double *a = hy_xmalloc(NH * sizeof(double)), *u = hy_xmalloc(NH * sizeof(double));
    if (!saved || !a || !u) {
        st = HY_ENOMEM;
        goto done;
    }
    memcpy(saved, m->gates, LH * sizeof(float));
    for (size_t l = 0; l < L; l++) {
        double nll0 = 0.0, auc0 = 0.0;
        if ((st = hy_prune_objective(m, id, o, batch_size, &nll0, &auc0)) != HY_OK) goto done;
        tick(prog);
        for (size_t h = 0; h < NH; h++) {
            float g = m->gates[l * NH + h];
            double nll = 0.0, auc = 0.0;
            m->gates[l * NH + h] = 0.0f;
            st = hy_prune_objective(m, id, o, batch_size, &nll, &auc);
            m->gates[l * NH + h] = g;
            if (st != HY_OK) goto done;
            tick(prog);
            a[h] = nll - nll0;         /* acc: how much the ID NLL rises */
            u[h] = auc0 - auc;         /* ood: how much the AUROC falls */
        }
        float *sr = scores + l * NH;
        if (obj == HY_OBJ_ACC) {
            for (size_t h = 0; h < NH; h++) sr[h] = (float)a[h];
        } else if (obj == HY_OBJ_OOD) {
            for (size_t h = 0; h < NH; h++) sr[h] = (float)u[h];
        } else {
            minmax(a, NH);
            minmax(u, NH);
            for (size_t h = 0; h < NH; h++) sr[h] = (float)(0.5 * (a[h] + u[h]));
        }
        hy_prune_select(circuit + l * NH, sr, prior ? prior + l * NH : NULL, penalty, NH,
                        keep[l]);
        /* the circuit stays masked while later layers are scored */
        for (size_t h = 0; h < NH; h++)
            if (circuit[l * NH + h] != 0.0f) m->gates[l * NH + h] = 0.0f;
    }
done:
    if (saved) memcpy(m->gates, saved, LH * sizeof(float));
    hy_free(saved);
    hy_free(a);
    hy_free(u);
    return st;
}

hy_status hy_prune_circuit(hy_xfmr *m, const hy_subset *id, const hy_subset *ood,
                           hy_objective obj, const size_t *keep, const float *prior,
                           double penalty, size_t batch_size, float *scores, float *circuit_out) {
    return circuit(m, id, ood, obj, keep, prior, penalty, batch_size, scores, circuit_out, NULL);
}

/* ===== members ===== */

/* out: n rows drawn with replacement from s (through its idx) */
static void bootstrap(int64_t *out, const hy_subset *s, hy_rng *r) {
    for (size_t i = 0; i < s->n; i++) {
        uint64_t j = hy_rng_below(r, s->n);
        out[i] = s->idx ? s->idx[j] : (int64_t)j;
    }
}

hy_status hy_prune_members(hy_xfmr *m, const hy_subset *calib, const hy_subset *id,
                           const hy_subset *ood, const hy_prune_config *cfg, float *gates,
                           float *scores, double *overlap) {
    size_t L = m->cfg.depth, NH = m->cfg.n_heads, LH = L * NH, M = cfg->members;
    if (M == 0) return hy_fail(HY_EINVAL, "prune: members must be >= 1 (got 0)");
    circuit_progress prog = {cfg->progress, cfg->progress_ctx, 0, M * L * (NH + 1)};
    if (!(cfg->overlap_penalty >= 0.0 && cfg->overlap_penalty <= 1.0))
        return hy_fail(HY_EINVAL, "prune: overlap_penalty must be in [0, 1] (got %g)",
                       cfg->overlap_penalty);
    for (size_t k = 0; k < M; k++)
        for (size_t l = 0; l < L; l++)
            if (cfg->keep[k * L + l] < 1 || cfg->keep[k * L + l] > NH)
                return hy_fail(HY_EINVAL, "prune: member %zu keeps %zu heads in layer %zu "
                               "(expected 1 to %zu)", k + 1, cfg->keep[k * L + l], l + 1, NH);
    const hy_subset *base = cfg->method == HY_PRUNE_TAYLOR ? calib : id;
    if (!base || base->n == 0)
        return hy_fail(HY_EINVAL, "prune: %s needs %s data", cfg->method == HY_PRUNE_TAYLOR ?
                       "taylor" : "circuit", cfg->method == HY_PRUNE_TAYLOR ? "calibration" :
                       "ID validation");
    HY_TRY(check_rows(base));
    if (ood) HY_TRY(check_rows(ood));
    hy_status st = HY_OK;
    float *prior = hy_xcalloc(LH, sizeof(float));
    int64_t *rows = hy_xmalloc(base->n * sizeof(int64_t));
    int64_t *orows = ood && ood->n ? hy_xmalloc(ood->n * sizeof(int64_t)) : NULL;
    if (!prior || !rows || (ood && ood->n && !orows)) {
        st = HY_ENOMEM;
        goto done;
    }
    hy_rng root;
    hy_rng_seed(&root, cfg->seed);
    for (size_t k = 0; k < M; k++) {
        hy_subset sb = *base, so = ood ? *ood : (hy_subset){0};
        if (cfg->bootstrap) {
            hy_rng r = hy_rng_split(&root, (uint64_t)k);
            hy_rng r0 = hy_rng_split(&r, 0), r1 = hy_rng_split(&r, 1);
            bootstrap(rows, base, &r0);
            sb.idx = rows;
            if (orows) {
                bootstrap(orows, ood, &r1);
                so.idx = orows;
            }
        }
        float *sk = scores + k * LH, *gk = gates + k * LH;
        const size_t *kk = cfg->keep + k * L;
        if (cfg->method == HY_PRUNE_TAYLOR) {
            if (k == 0 || cfg->bootstrap) {
                st = hy_prune_taylor(m, &sb, cfg->batch_size, cfg->normalize, sk);
                if (st != HY_OK) goto member_fail;
            } else {
                memcpy(sk, scores, LH * sizeof(float));
            }
            for (size_t l = 0; l < L; l++)
                hy_prune_select(gk + l * NH, sk + l * NH, prior + l * NH, cfg->overlap_penalty,
                                NH, kk[l]);
        } else {
            st = circuit(m, &sb, ood ? &so : NULL, cfg->objectives[k], kk, prior,
                         cfg->overlap_penalty, cfg->batch_size, sk, gk, &prog);
            if (st != HY_OK) goto member_fail;
        }
        for (size_t i = 0; i < LH; i++) prior[i] += gk[i];
        continue;
    member_fail:
        st = hy_fail_prefix(st, "member %zu", k + 1);
        goto done;
    }
    if (overlap) hy_metrics_jaccard(overlap, gates, M, LH);
done:
    hy_free(prior);
    hy_free(rows);
    hy_free(orows);
    return st;
}

/* ===== gates ===== */

hy_status hy_prune_check_gates(const float *gates, int ndim, const int64_t *shape, size_t L,
                               size_t NH) {
    char buf[96];
    bool ok = (ndim == 3 && shape[1] == (int64_t)L && shape[2] == (int64_t)NH) ||
              (ndim == 2 && shape[0] == (int64_t)L && shape[1] == (int64_t)NH);
    if (!ok)
        return hy_fail(HY_EINVAL, "prune: gates have shape %s, expected [M,%zu,%zu]",
                       hy_shape_str(buf, sizeof buf, ndim, shape), L, NH);
    size_t M = ndim == 3 ? (size_t)shape[0] : 1;
    if (M == 0) return hy_fail(HY_EINVAL, "prune: gates hold no member (M = 0)");
    for (size_t k = 0; k < M; k++)
        HY_TRY(hy_prune_check_member("prune", gates + k * L * NH, k, L, NH));
    return HY_OK;
}

hy_status hy_prune_read_gates(const char *path, size_t L, size_t NH, hy_tensor *out) {
    memset(out, 0, sizeof *out);
    hy_h5 f;
    memset(&f, 0, sizeof f);
    HY_TRY(hy_h5_open(&f, path));
    hy_status st = HY_OK;
    char a[96];
    int ex = hy_h5_exists(&f, "/gates");
    if (ex < 0) { st = HY_ENOMEM; goto done; }
    if (!ex) {
        st = hy_fail(HY_EINVAL, "prune: '%s' has no /gates (not a gates file)", path);
        goto done;
    }
    hy_dtype dt;
    int nd = 0;
    int64_t sh[HY_MAXDIM];
    if ((st = hy_h5_shape(&f, "/gates", &dt, &nd, sh)) != HY_OK) goto done;
    bool ok = (nd == 3 && sh[1] == (int64_t)L && sh[2] == (int64_t)NH) ||
              (nd == 2 && sh[0] == (int64_t)L && sh[1] == (int64_t)NH);
    if (!ok) {
        st = hy_fail(HY_EINVAL, "prune: '%s': /gates has shape %s, expected [M,%zu,%zu]", path,
                     hy_shape_str(a, sizeof a, nd, sh), L, NH);
        goto done;
    }
    int64_t M = nd == 3 ? sh[0] : 1;
    if ((st = hy_check_range(path, "/gates members (its first dim)", M, 1,
                             HY_PRUNE_MAX_MEMBERS)) != HY_OK) {
        hy_fail_prefix(st, "prune");
        goto done;
    }
    int64_t want[3] = {M, (int64_t)L, (int64_t)NH};
    if ((st = hy_tensor_alloc(out, HY_F32, 3, want)) != HY_OK) goto done;
    if ((st = hy_h5_read_into(&f, "/gates", HY_F32, nd, sh, out->data)) != HY_OK)
        goto done;
    if ((st = hy_prune_check_gates(out->data, 3, want, L, NH)) != HY_OK) {
        char msg[512];   /* "prune: member 2 ..." -> "prune: 'g.h5': member 2 ..." */
        snprintf(msg, sizeof msg, "%s", hy_errmsg());
        const char *rest = strncmp(msg, "prune: ", 7) == 0 ? msg + 7 : msg;
        st = hy_fail(st, "prune: '%s': %s", path, rest);
        goto done;
    }
    /* the counts the file records must be the ones /gates holds */
    ex = hy_h5_attr_exists(&f, "/", "members");
    if (ex < 0) { st = HY_ENOMEM; goto done; }
    if (ex) {
        int64_t am = 0;
        if ((st = hy_h5_get_attr_i64(&f, "/", "members", &am)) != HY_OK) goto done;
        if (am != M) {
            st = hy_fail(HY_EINVAL, "prune: '%s': attribute members = %lld but /gates holds "
                         "%lld members", path, (long long)am, (long long)M);
            goto done;
        }
    }
    ex = hy_h5_attr_exists(&f, "/", "keep");
    if (ex < 0) { st = HY_ENOMEM; goto done; }
    if (ex) {
        char *keep = NULL;
        if ((st = hy_h5_get_attr_str(&f, "/", "keep", &keep)) != HY_OK) goto done;
        int64_t n = keep[0] ? 1 : 0;
        for (const char *c = keep; *c; c++) n += *c == ';';
        hy_free(keep);
        if (n && n != M) {
            st = hy_fail(HY_EINVAL, "prune: '%s': attribute keep lists %lld members but /gates "
                         "holds %lld", path, (long long)n, (long long)M);
            goto done;
        }
    }
done:
    if (st != HY_OK) hy_tensor_release(out);
    hy_h5_close(&f);
    return st;
}

hy_status hy_prune_check_member(const char *who, const float *g, size_t member, size_t L,
                                size_t NH) {
    for (size_t l = 0; l < L; l++) {
        size_t kept = 0;
        for (size_t h = 0; h < NH; h++) {
            float v = g[l * NH + h];
            if (v != 0.0f && v != 1.0f)
                return hy_fail(HY_EINVAL, "%s: member %zu gate of layer %zu, head %zu is %g "
                               "(expected 0 or 1)", who, member + 1, l + 1, h + 1, (double)v);
            kept += v != 0.0f;
        }
        if (kept == 0)
            return hy_fail(HY_EINVAL, "%s: member %zu prunes every head of layer %zu (keep at "
                           "least one)", who, member + 1, l + 1);
    }
    return HY_OK;
}

void hy_prune_restore(hy_xfmr *m, const float *base_params) {
    size_t D = m->cfg.d_model, NH = m->cfg.n_heads, HS = m->HS;
    char name[48];
    for (size_t l = 0; l < m->cfg.depth; l++) {
        hy_param_view qw, qb, pw;
        snprintf(name, sizeof name, "blocks.%zu.attn.qkv.weight", l);
        HY_ASSERT(hy_xfmr_param(m, name, &qw) == HY_OK);
        snprintf(name, sizeof name, "blocks.%zu.attn.qkv.bias", l);
        HY_ASSERT(hy_xfmr_param(m, name, &qb) == HY_OK);
        snprintf(name, sizeof name, "blocks.%zu.attn.proj.weight", l);
        HY_ASSERT(hy_xfmr_param(m, name, &pw) == HY_OK);
        for (size_t h = 0; h < NH; h++) {
            if (m->gates[l * NH + h] != 0.0f) continue;
            for (size_t s = 0; s < 3; s++) {
                size_t r0 = s * D + h * HS;
                memcpy(qw.data + r0 * D, base_params + qw.info->offset + r0 * D,
                       HS * D * sizeof(float));
                memcpy(qb.data + r0, base_params + qb.info->offset + r0, HS * sizeof(float));
            }
            for (size_t r = 0; r < D; r++)
                memcpy(pw.data + r * D + h * HS, base_params + pw.info->offset + r * D + h * HS,
                       HS * sizeof(float));
        }
    }
}
