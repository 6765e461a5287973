/* l_metrics.c: Lua binding of core/metrics (hydra.core.metrics_*). Takes and returns
 * hydra.Tensors: probabilities and logits float32 [N,C] or [M,N,C]; labels int32 [N];
 * per-sample arrays float64 [N]; correct uint8 [N]. lua/hydra/metrics.lua is the friendly face.
 *   metrics_check_probs(p [, tol])  metrics_check_labels(y, C)  metrics_check_finite(t, what)
 *   metrics_predict(p) -> conf, pred          metrics_correct(pred, y) -> correct
 *   metrics_nll_probs(p, y)  metrics_nll_logits(z, y)  metrics_brier(p, y)  -> float64 [N]
 *   metrics_score(name, t) -> float64 [N]    (msp, entropy: p̄; mi, disagreement: member
 *                                             probs; energy, maxlogit: logits)
 *   metrics_id(conf, correct, nll, brier [, nbins]) -> {acc=, nll=, ...}
 *   metrics_ood(s_id, s_ood) -> {auroc=, aupr_out=, aupr_in=, fpr95=, fpr95_id=}
 *   metrics_misclf(s, correct) -> {auroc=, aupr=, fpr95=}   (errors positive)
 *   metrics_log_mean_probs(z) / metrics_log_probs(p) -> float64 [N,C] = log p̄
 *   metrics_temperature_fit(a, y) -> T, nll      metrics_temperature_nll(a, y, T) -> f64 [N]
 *   metrics_temperature_apply(a, T) -> float32 [N,C] = softmax(a / T)
 *   metrics_reliability(conf, correct [, nbins]) -> count, acc, conf
 *   metrics_risk_coverage(conf, correct, npoints) -> coverage, risk
 *   metrics_histogram(x, lo, hi, nbins) -> counts    metrics_range(x) -> min, max
 *   metrics_jaccard(gates) -> J, mean                metrics_mean(x) -> number
 *   metrics_bootstrap_id(conf, correct, nll, brier, B, seed [, nbins]) -> lo, hi
 *   metrics_bootstrap_ood(s_id, s_ood, B, seed) -> lo, hi */
#include <math.h>
#include <string.h>

#include "bind.h"
#include "eval/metrics.h"

/* A tensor argument of dtype dt with ndim in [lo, hi]. */
static hy_tensor *check_t(lua_State *L, int arg, hy_dtype dt, int lo, int hi) {
    hy_tensor *t = l_checktensor(L, arg);
    if (t->dtype != dt)
        luaL_argerror(L, arg, lua_pushfstring(L, "expected a %s tensor, got %s",
                                              hy_dtype_name(dt), hy_dtype_name(t->dtype)));
    if (t->ndim < lo || t->ndim > hi) {
        if (lo == hi)
            luaL_argerror(L, arg, lua_pushfstring(L, "expected %d dims, got %d", lo, t->ndim));
        luaL_argerror(L, arg, lua_pushfstring(L, "expected %d to %d dims, got %d", lo, hi,
                                              t->ndim));
    }
    return t;
}

static size_t dim(const hy_tensor *t, int i) { return (size_t)t->shape[i]; }

/* (M, N, C) of a [N,C] (M = 1) or [M,N,C] tensor */
static void mnc(const hy_tensor *t, size_t *M, size_t *N, size_t *C) {
    if (t->ndim == 2) { *M = 1; *N = dim(t, 0); *C = dim(t, 1); }
    else { *M = dim(t, 0); *N = dim(t, 1); *C = dim(t, 2); }
}

static void check_len(lua_State *L, int arg, const hy_tensor *t, size_t n) {
    if (dim(t, 0) != n)
        luaL_argerror(L, arg, lua_pushfstring(L, "expected %I elements, got %I", (lua_Integer)n,
                                              (lua_Integer)t->shape[0]));
}

/* Pushes a new owned 1-d (or 2-d when n2 > 0) tensor; raises on no memory (the box owns it). */
static hy_tensor *push_new(lua_State *L, hy_dtype dt, size_t n1, size_t n2) {
    int64_t shape[2] = {(int64_t)n1, (int64_t)n2};
    hy_tensor *t = l_pushtensor(L);
    if (hy_tensor_alloc(t, dt, n2 > 0 ? 2 : 1, shape) != HY_OK) l_raise(L);
    return t;
}

static size_t opt_bins(lua_State *L, int arg) {
    lua_Integer b = luaL_optinteger(L, arg, HY_METRICS_BINS);
    luaL_argcheck(L, b >= 1 && b <= 256, arg, "number of bins must be in [1, 256]");
    return (size_t)b;
}

/* ===== validation ===== */

static int l_metrics_check_probs(lua_State *L) {
    hy_tensor *p = check_t(L, 1, HY_F32, 2, 3);
    double tol = luaL_optnumber(L, 2, HY_METRICS_SUM_TOL);
    size_t M, N, C;
    mnc(p, &M, &N, &C);
    for (size_t m = 0; m < M; m++) {
        if (hy_metrics_check_probs((const float *)p->data + m * N * C, N, C, tol) == HY_OK)
            continue;
        const char *msg = hy_errmsg();
        if (p->ndim == 3 && strncmp(msg, "metrics: row ", 13) == 0)
            return luaL_error(L, "metrics: member %I row %s", (lua_Integer)m, msg + 13);
        return l_raise(L);
    }
    return 0;
}

static int l_metrics_check_labels(lua_State *L) {
    hy_tensor *y = check_t(L, 1, HY_I32, 1, 1);
    lua_Integer C = luaL_checkinteger(L, 2);
    luaL_argcheck(L, C >= 1, 2, "number of classes must be >= 1");
    if (hy_metrics_check_labels(y->data, dim(y, 0), (size_t)C) != HY_OK) return l_raise(L);
    return 0;
}

static int l_metrics_check_finite(lua_State *L) {
    hy_tensor *t = check_t(L, 1, HY_F32, 0, HY_MAXDIM);
    const char *what = luaL_checkstring(L, 2);
    if (hy_metrics_check_finite(t->data, hy_tensor_numel(t), what) != HY_OK) return l_raise(L);
    return 0;
}

/* ===== per-sample ===== */

static int l_metrics_predict(lua_State *L) {
    hy_tensor *p = check_t(L, 1, HY_F32, 2, 2);
    size_t N = dim(p, 0), C = dim(p, 1);
    luaL_argcheck(L, C >= 1, 1, "expected at least 1 class");
    hy_tensor *conf = push_new(L, HY_F64, N, 0);
    hy_tensor *pred = push_new(L, HY_I32, N, 0);
    hy_metrics_predict(conf->data, pred->data, p->data, N, C);
    return 2;
}

static int l_metrics_correct(lua_State *L) {
    hy_tensor *pred = check_t(L, 1, HY_I32, 1, 1);
    hy_tensor *y = check_t(L, 2, HY_I32, 1, 1);
    check_len(L, 2, y, dim(pred, 0));
    hy_tensor *ok = push_new(L, HY_U8, dim(pred, 0), 0);
    hy_metrics_correct(ok->data, pred->data, y->data, dim(pred, 0));
    return 1;
}

/* labels of [N] matching p's N, all in [0, C) (raises otherwise) */
static hy_tensor *check_labels_for(lua_State *L, int arg, size_t N, size_t C) {
    hy_tensor *y = check_t(L, arg, HY_I32, 1, 1);
    check_len(L, arg, y, N);
    if (hy_metrics_check_labels(y->data, N, C) != HY_OK) l_raise(L);
    return y;
}

/* A per-sample metric of probs [N,C] and labels [N]: f(out [N] float64, p, y, N, C). */
static int per_sample_of_probs(lua_State *L, void (*f)(double *, const float *, const int32_t *,
                                                         size_t, size_t)) {
    hy_tensor *p = check_t(L, 1, HY_F32, 2, 2);
    size_t N = dim(p, 0), C = dim(p, 1);
    hy_tensor *y = check_labels_for(L, 2, N, C);
    hy_tensor *out = push_new(L, HY_F64, N, 0);
    f(out->data, p->data, y->data, N, C);
    return 1;
}

static int l_metrics_nll_probs(lua_State *L) {
    return per_sample_of_probs(L, hy_metrics_nll_probs);
}

static int l_metrics_nll_logits(lua_State *L) {
    hy_tensor *z = check_t(L, 1, HY_F32, 2, 3);
    size_t M, N, C;
    mnc(z, &M, &N, &C);
    luaL_argcheck(L, M >= 1, 1, "expected at least 1 member");
    hy_tensor *y = check_labels_for(L, 2, N, C);
    hy_tensor *out = push_new(L, HY_F64, N, 0);
    hy_metrics_nll_logits(out->data, z->data, y->data, M, N, C);
    return 1;
}

static int l_metrics_brier(lua_State *L) { return per_sample_of_probs(L, hy_metrics_brier); }

/* the names of eval.score, `hydra eval --score` and result.h5 (hydra.metrics.SCORES) */
static int l_metrics_score(lua_State *L) {
    static const char *const names[] = {"msp", "entropy", "mi", "energy", "disagreement",
                                        "maxlogit", NULL};
    int which = luaL_checkoption(L, 1, NULL, names);
    hy_tensor *t = check_t(L, 2, HY_F32, 2, which < 2 ? 2 : 3);
    size_t M, N, C;
    mnc(t, &M, &N, &C);
    luaL_argcheck(L, M >= 1 && C >= 1, 2, "expected at least 1 member and 1 class");
    hy_tensor *s = push_new(L, HY_F64, N, 0);
    double *o = s->data;
    const float *d = t->data;
    switch (which) {
    case 0: hy_metrics_score_msp(o, d, N, C); break;
    case 1: hy_metrics_score_entropy(o, d, N, C); break;
    case 2: hy_metrics_score_mi(o, d, M, N, C); break;
    case 3: hy_metrics_score_energy(o, d, M, N, C); break;
    case 4: hy_metrics_score_disagreement(o, d, M, N, C); break;
    default: hy_metrics_score_maxlogit(o, d, M, N, C); break;
    }
    return 1;
}

/* ===== aggregates ===== */

static void set_num(lua_State *L, const char *k, double v) {
    lua_pushnumber(L, v);
    lua_setfield(L, -2, k);
}

static void push_id(lua_State *L, const hy_id_metrics *m) {
    lua_createtable(L, 0, 7);
    set_num(L, "acc", m->acc);
    set_num(L, "nll", m->nll);
    set_num(L, "brier", m->brier);
    set_num(L, "ece", m->ece);
    set_num(L, "aece", m->aece);
    set_num(L, "mce", m->mce);
    set_num(L, "aurc", m->aurc);
}

static void push_ood(lua_State *L, const hy_ood_metrics *m) {
    lua_createtable(L, 0, 5);
    set_num(L, "auroc", m->auroc);
    set_num(L, "aupr_out", m->aupr_out);
    set_num(L, "aupr_in", m->aupr_in);
    set_num(L, "fpr95", m->fpr95);
    set_num(L, "fpr95_id", m->fpr95_id);
}

/* conf f64 [N] at arg, correct u8 [N] at arg+1; returns N */
static size_t check_conf_correct(lua_State *L, int arg, hy_tensor **conf, hy_tensor **ok) {
    *conf = check_t(L, arg, HY_F64, 1, 1);
    *ok = check_t(L, arg + 1, HY_U8, 1, 1);
    check_len(L, arg + 1, *ok, dim(*conf, 0));
    return dim(*conf, 0);
}

/* the per-sample inputs of the ID metrics: conf, correct, nll f64 [N], brier f64 [N] at 1..4 */
static size_t check_id_inputs(lua_State *L, hy_tensor **conf, hy_tensor **ok, hy_tensor **nll,
                              hy_tensor **brier) {
    size_t N = check_conf_correct(L, 1, conf, ok);
    *nll = check_t(L, 3, HY_F64, 1, 1);
    *brier = check_t(L, 4, HY_F64, 1, 1);
    check_len(L, 3, *nll, N);
    check_len(L, 4, *brier, N);
    return N;
}

static int l_metrics_id(lua_State *L) {
    hy_tensor *conf, *ok, *nll, *brier;
    size_t N = check_id_inputs(L, &conf, &ok, &nll, &brier);
    size_t nbins = opt_bins(L, 5);
    hy_id_metrics m;
    if (hy_metrics_id(&m, conf->data, ok->data, nll->data, brier->data, N, nbins) != HY_OK)
        return l_raise(L);
    push_id(L, &m);
    return 1;
}

static int l_metrics_ood(lua_State *L) {
    hy_tensor *a = check_t(L, 1, HY_F64, 1, 1);
    hy_tensor *b = check_t(L, 2, HY_F64, 1, 1);
    hy_ood_metrics m;
    if (hy_metrics_ood(&m, a->data, dim(a, 0), b->data, dim(b, 0)) != HY_OK) return l_raise(L);
    push_ood(L, &m);
    return 1;
}

static int l_metrics_misclf(lua_State *L) {
    hy_tensor *sc = check_t(L, 1, HY_F64, 1, 1);
    hy_tensor *ok = check_t(L, 2, HY_U8, 1, 1);
    check_len(L, 2, ok, dim(sc, 0));
    hy_misclf_metrics m;
    if (hy_metrics_misclf(&m, sc->data, ok->data, dim(sc, 0)) != HY_OK) return l_raise(L);
    lua_createtable(L, 0, 3);
    set_num(L, "auroc", m.auroc);
    set_num(L, "aupr", m.aupr);
    set_num(L, "fpr95", m.fpr95);
    return 1;
}

static int l_metrics_log_mean_probs(lua_State *L) {
    hy_tensor *z = check_t(L, 1, HY_F32, 2, 3);
    size_t M, N, C;
    mnc(z, &M, &N, &C);
    luaL_argcheck(L, M >= 1 && N >= 1 && C >= 1, 1, "expected a non-empty tensor");
    hy_tensor *a = push_new(L, HY_F64, N, C);
    hy_metrics_log_mean_probs(a->data, z->data, M, N, C);
    return 1;
}

static int l_metrics_log_probs(lua_State *L) {
    hy_tensor *p = check_t(L, 1, HY_F32, 2, 2);
    size_t N = dim(p, 0), C = dim(p, 1);
    luaL_argcheck(L, N >= 1 && C >= 1, 1, "expected a non-empty tensor");
    hy_tensor *a = push_new(L, HY_F64, N, C);
    hy_metrics_log_probs(a->data, p->data, N, C);
    return 1;
}

/* a float64 [N,C] at arg, labels int32 [N] in [0, C) at arg+1 */
static hy_tensor *check_logp_labels(lua_State *L, int arg, hy_tensor **y) {
    hy_tensor *a = check_t(L, arg, HY_F64, 2, 2);
    luaL_argcheck(L, dim(a, 1) >= 1, arg, "expected at least 1 class");
    if (y) *y = check_labels_for(L, arg + 1, dim(a, 0), dim(a, 1));
    return a;
}

static double check_temp(lua_State *L, int arg) {
    double T = luaL_checknumber(L, arg);
    luaL_argcheck(L, isfinite(T) && T > 0.0, arg, "temperature must be finite and > 0");
    return T;
}

static int l_metrics_temperature_fit(lua_State *L) {
    hy_tensor *y;
    hy_tensor *a = check_logp_labels(L, 1, &y);
    double T, nll;
    if (hy_metrics_temperature_fit(&T, &nll, a->data, y->data, dim(a, 0), dim(a, 1)) != HY_OK)
        return l_raise(L);
    lua_pushnumber(L, T);
    lua_pushnumber(L, nll);
    return 2;
}

static int l_metrics_temperature_nll(lua_State *L) {
    hy_tensor *y;
    hy_tensor *a = check_logp_labels(L, 1, &y);
    double T = check_temp(L, 3);
    hy_tensor *out = push_new(L, HY_F64, dim(a, 0), 0);
    hy_metrics_temperature_nll(out->data, a->data, y->data, dim(a, 0), dim(a, 1), T);
    return 1;
}

static int l_metrics_temperature_apply(lua_State *L) {
    hy_tensor *a = check_logp_labels(L, 1, NULL);
    double T = check_temp(L, 2);
    hy_tensor *p = push_new(L, HY_F32, dim(a, 0), dim(a, 1));
    hy_metrics_temperature_apply(p->data, a->data, dim(a, 0), dim(a, 1), T);
    return 1;
}

static int l_metrics_reliability(lua_State *L) {
    hy_tensor *conf, *ok;
    size_t N = check_conf_correct(L, 1, &conf, &ok);
    size_t nbins = opt_bins(L, 3);
    hy_tensor *cnt = push_new(L, HY_I64, nbins, 0);
    hy_tensor *acc = push_new(L, HY_F64, nbins, 0);
    hy_tensor *mc = push_new(L, HY_F64, nbins, 0);
    hy_metrics_reliability(cnt->data, acc->data, mc->data, conf->data, ok->data, N, nbins);
    return 3;
}

static int l_metrics_risk_coverage(lua_State *L) {
    hy_tensor *conf, *ok;
    size_t N = check_conf_correct(L, 1, &conf, &ok);
    lua_Integer np = luaL_checkinteger(L, 3);
    luaL_argcheck(L, np >= 1, 3, "number of points must be >= 1");
    hy_tensor *cov = push_new(L, HY_F64, (size_t)np, 0);
    hy_tensor *risk = push_new(L, HY_F64, (size_t)np, 0);
    if (hy_metrics_risk_coverage(cov->data, risk->data, conf->data, ok->data, N,
                                 (size_t)np) != HY_OK)
        return l_raise(L);
    return 2;
}

static int l_metrics_histogram(lua_State *L) {
    hy_tensor *x = check_t(L, 1, HY_F64, 1, 1);
    double lo = luaL_checknumber(L, 2), hi = luaL_checknumber(L, 3);
    lua_Integer nb = luaL_checkinteger(L, 4);
    luaL_argcheck(L, isfinite(lo) && isfinite(hi) && hi > lo, 3, "expected finite lo < hi");
    luaL_argcheck(L, nb >= 1, 4, "number of bins must be >= 1");
    hy_tensor *c = push_new(L, HY_I64, (size_t)nb, 0);
    hy_metrics_histogram(c->data, x->data, dim(x, 0), lo, hi, (size_t)nb);
    return 1;
}

/* metrics_range(x) -> min, max over finite values (nil, nil when none) */
static int l_metrics_range(lua_State *L) {
    hy_tensor *x = check_t(L, 1, HY_F64, 1, 1);
    const double *d = x->data;
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < dim(x, 0); i++) {
        if (!isfinite(d[i])) continue;
        if (d[i] < lo) lo = d[i];
        if (d[i] > hi) hi = d[i];
    }
    if (lo > hi) { lua_pushnil(L); lua_pushnil(L); return 2; }
    lua_pushnumber(L, lo);
    lua_pushnumber(L, hi);
    return 2;
}

static int l_metrics_mean(lua_State *L) {
    hy_tensor *x = check_t(L, 1, HY_F64, 1, 1);
    lua_pushnumber(L, hy_metrics_mean(x->data, dim(x, 0)));
    return 1;
}

static int l_metrics_jaccard(lua_State *L) {
    hy_tensor *g = check_t(L, 1, HY_F32, 2, HY_MAXDIM);
    size_t M = dim(g, 0), K = hy_tensor_numel(g) / (M ? M : 1);
    luaL_argcheck(L, M >= 1, 1, "expected at least 1 member");
    hy_tensor *J = push_new(L, HY_F64, M, M);
    double mean = hy_metrics_jaccard(J->data, g->data, M, K);
    lua_pushnumber(L, mean);
    return 2;
}

static int l_metrics_bootstrap_id(lua_State *L) {
    hy_tensor *conf, *ok, *nll, *brier;
    size_t N = check_id_inputs(L, &conf, &ok, &nll, &brier);
    lua_Integer B = luaL_checkinteger(L, 5);
    lua_Integer seed = luaL_checkinteger(L, 6);
    size_t nbins = opt_bins(L, 7);
    luaL_argcheck(L, B >= 2, 5, "at least 2 resamples");
    hy_id_metrics lo, hi;
    if (hy_metrics_bootstrap_id(&lo, &hi, conf->data, ok->data, nll->data, brier->data, N,
                                nbins, (size_t)B, (uint64_t)seed) != HY_OK)
        return l_raise(L);
    push_id(L, &lo);
    push_id(L, &hi);
    return 2;
}

static int l_metrics_bootstrap_ood(lua_State *L) {
    hy_tensor *a = check_t(L, 1, HY_F64, 1, 1);
    hy_tensor *b = check_t(L, 2, HY_F64, 1, 1);
    lua_Integer B = luaL_checkinteger(L, 3);
    lua_Integer seed = luaL_checkinteger(L, 4);
    luaL_argcheck(L, B >= 2, 3, "at least 2 resamples");
    hy_ood_metrics lo, hi;
    if (hy_metrics_bootstrap_ood(&lo, &hi, a->data, dim(a, 0), b->data, dim(b, 0), (size_t)B,
                                 (uint64_t)seed) != HY_OK)
        return l_raise(L);
    push_ood(L, &lo);
    push_ood(L, &hi);
    return 2;
}

void l_open_metrics(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"metrics_check_probs", l_metrics_check_probs},
        {"metrics_check_labels", l_metrics_check_labels},
        {"metrics_check_finite", l_metrics_check_finite},
        {"metrics_predict", l_metrics_predict},
        {"metrics_correct", l_metrics_correct},
        {"metrics_nll_probs", l_metrics_nll_probs},
        {"metrics_nll_logits", l_metrics_nll_logits},
        {"metrics_brier", l_metrics_brier},
        {"metrics_score", l_metrics_score},
        {"metrics_id", l_metrics_id},
        {"metrics_ood", l_metrics_ood},
        {"metrics_misclf", l_metrics_misclf},
        {"metrics_log_mean_probs", l_metrics_log_mean_probs},
        {"metrics_log_probs", l_metrics_log_probs},
        {"metrics_temperature_fit", l_metrics_temperature_fit},
        {"metrics_temperature_nll", l_metrics_temperature_nll},
        {"metrics_temperature_apply", l_metrics_temperature_apply},
        {"metrics_reliability", l_metrics_reliability},
        {"metrics_risk_coverage", l_metrics_risk_coverage},
        {"metrics_histogram", l_metrics_histogram},
        {"metrics_range", l_metrics_range},
        {"metrics_mean", l_metrics_mean},
        {"metrics_jaccard", l_metrics_jaccard},
        {"metrics_bootstrap_id", l_metrics_bootstrap_id},
        {"metrics_bootstrap_ood", l_metrics_bootstrap_ood},
        {NULL, NULL}};
    l_setfuncs(L, fns);
}
