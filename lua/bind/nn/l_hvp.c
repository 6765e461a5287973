/* l_hvp.c: Lua binding of core/hvp (loss, gradient and Hessian-vector products over a dataset)
 * and the flat-vector arithmetic the Proposition 1 measurements need (experiments/prop1.lua,
 * lua/hydra/hvp.lua); vectors are 1-d float32 or float64 tensors of one length, results float64.
 *   core.hvp_grad(model, ds, batch) -> loss, grad [P] float64
 *   core.hvp(model, ds, batch, v, h) -> hv [P] float64, loss at theta +- h u (mean)
 *   core.hvp_fold_gates(model)       gates folded into attn.proj.weight, gates set to 1
 *   core.vec_dot(a, b) -> number     sum a_i b_i in double
 *   core.vec_sub(a, b) -> a - b      float64 tensor */
#include <string.h>

#include "bind.h"
#include "nn/hvp.h"

static const char *vec_err(const hy_tensor *t) {
    if (t->ndim != 1) return "a 1-d tensor";
    if (t->dtype != HY_F32 && t->dtype != HY_F64) return "float32 or float64";
    return NULL;
}

static hy_tensor *check_vec(lua_State *L, int arg, size_t n) {
    hy_tensor *t = l_checktensor(L, arg);
    const char *e = vec_err(t);
    if (e) luaL_error(L, "hvp: argument %d must be %s", arg, e);
    if (n && hy_tensor_numel(t) != n)
        luaL_error(L, "hvp: argument %d has %I elements, expected %I", arg,
                   (lua_Integer)hy_tensor_numel(t), (lua_Integer)n);
    return t;
}

static double vget(const hy_tensor *t, size_t i) {
    return t->dtype == HY_F32 ? (double)((const float *)t->data)[i] : ((const double *)t->data)[i];
}

static size_t check_batch(lua_State *L, int arg) {
    lua_Integer b = luaL_checkinteger(L, arg);
    if (b < 1) luaL_error(L, "hvp: batch size must be >= 1 (got %I)", b);
    return (size_t)b;
}

static hy_tensor *push_vec(lua_State *L, size_t n) {
    int64_t shape = (int64_t)n;
    hy_tensor *t = l_pushtensor(L);
    if (hy_tensor_alloc(t, HY_F64, 1, &shape) != HY_OK) l_raise(L);
    return t;
}

static int l_hvp_grad(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    hy_dataset *ds = l_checkdataset(L, 2);
    size_t B = check_batch(L, 3);
    hy_tensor *g = push_vec(L, m->n_params);
    double loss;
    if (hy_hvp_grad(m, ds, B, &loss, g->data) != HY_OK) return l_raise(L);
    lua_pushnumber(L, loss);
    lua_insert(L, -2);
    return 2;
}

static int l_hvp(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    hy_dataset *ds = l_checkdataset(L, 2);
    size_t B = check_batch(L, 3);
    hy_tensor *v = check_vec(L, 4, m->n_params);
    double h = luaL_checknumber(L, 5);
    hy_tensor *hv = push_vec(L, m->n_params);
    int hv_at = lua_gettop(L);
    /* v as double: a Lua userdata scratch on the stack (collected whatever happens) */
    double *vd = v->data;
    if (v->dtype == HY_F32) {
        vd = lua_newuserdatauv(L, m->n_params * sizeof(double), 0);
        for (size_t i = 0; i < m->n_params; i++) vd[i] = vget(v, i);
    }
    double loss;
    if (hy_hvp(m, ds, B, vd, h, hv->data, &loss) != HY_OK) return l_raise(L);
    lua_pushvalue(L, hv_at);
    lua_pushnumber(L, loss);
    return 2;
}

static int l_hvp_fold_gates(lua_State *L) {
    hy_hvp_fold_gates(l_checkmodel(L, 1));
    return 0;
}

static int l_vec_dot(lua_State *L) {
    hy_tensor *a = check_vec(L, 1, 0);
    hy_tensor *b = check_vec(L, 2, hy_tensor_numel(a));
    double s = 0;
    for (size_t i = 0, n = hy_tensor_numel(a); i < n; i++) s += vget(a, i) * vget(b, i);
    lua_pushnumber(L, s);
    return 1;
}

static int l_vec_sub(lua_State *L) {
    hy_tensor *a = check_vec(L, 1, 0);
    hy_tensor *b = check_vec(L, 2, hy_tensor_numel(a));
    size_t n = hy_tensor_numel(a);
    hy_tensor *r = push_vec(L, n);
    double *o = r->data;
    for (size_t i = 0; i < n; i++) o[i] = vget(a, i) - vget(b, i);
    return 1;
}

void l_open_hvp(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"hvp_grad", l_hvp_grad}, {"hvp", l_hvp}, {"hvp_fold_gates", l_hvp_fold_gates},
        {"vec_dot", l_vec_dot},   {"vec_sub", l_vec_sub}, {NULL, NULL}};
    l_setfuncs(L, fns);
}
