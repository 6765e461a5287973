/* l_vilu.c: Lua binding of core/vilu (the learned uncertainty heads: ViLU-style error predictor,
 * ConfidNet-style confidence head).
 *   core.vilu_fit(vilu, input, loss, features, logits, labels, head_w, seed) -> hydra.Vilu, loss,
 *     n_err.  vilu: the resolved vilu section, read by its keys vilu.hidden, vilu.epochs,
 *     vilu.batch_size, vilu.learning_rate, vilu.weight_decay; input "vilu" | "features", loss
 *     "bce" | "tcp" (method vilu: vilu.input, vilu.loss; method confidnet: features, tcp);
 *     features float32 [N,D] (m:features), logits
 *     float32 [N,K], labels int32 [N], head_w float32 [K,D] (the model's head.weight); loss = the
 *     mean training loss of the last epoch, n_err = misclassified training rows.
 *   core.vilu_load(path) -> hydra.Vilu
 *   v:score(features, logits, head_w) -> float32 [N] uncertainty scores (higher = more likely an
 *     error / more OOD)
 *   v:save(path [, meta])  atomic   v:info() -> { input, loss, d_features, hidden }
 *   v:close()  (also __gc / __close; idempotent) */
#include <string.h>

#include "bind.h"
#include "io/h5.h"
#include "hydra/vilu.h"

#define L_VILU "hydra.Vilu"

typedef struct l_vilu { hy_vilu v; } l_vilu;

static hy_vilu *check_vilu(lua_State *L, int arg) {
    l_vilu *u = luaL_checkudata(L, arg, L_VILU);
    if (!u->v.params) luaL_error(L, "vilu: attempt to use a closed head");
    return &u->v;
}

static l_vilu *push_vilu(lua_State *L) {
    l_vilu *u = lua_newuserdatauv(L, sizeof *u, 0);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, L_VILU);
    return u;
}

/* a float32 tensor argument of rank 2 with `cols` columns (0: any) and `rows` rows (0: any) */
static hy_tensor *check_f32_2d(lua_State *L, int arg, int64_t rows, int64_t cols,
                               const char *what) {
    hy_tensor *t = l_checktensor(L, arg);
    if (t->dtype != HY_F32 || t->ndim != 2 || (rows && t->shape[0] != rows) ||
        (cols && t->shape[1] != cols))
        luaL_argerror(L, arg, lua_pushfstring(L, "%s: expected a float32 [%s,%s] tensor", what,
                                              rows ? lua_pushfstring(L, "%d", (int)rows) : "N",
                                              cols ? lua_pushfstring(L, "%d", (int)cols) : "*"));
    return t;
}

/* x (N, DI) of the head's inputs, as a new float32 tensor left on the stack */
static const float *inputs(lua_State *L, const hy_vilu *v, const hy_tensor *z,
                           const hy_tensor *lg, const hy_tensor *w) {
    int64_t N = z->shape[0];
    int64_t shape[2] = {N, (int64_t)v->DI};
    hy_tensor *x = l_pushtensor(L);
    if (hy_tensor_alloc(x, HY_F32, 2, shape) != HY_OK) l_raise(L);
    hy_vilu_inputs(x->data, v->input, z->data, lg->data, w->data, (size_t)N, v->D,
                   (size_t)lg->shape[1]);
    return x->data;
}

static int l_vilu_fit(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    const char *in_s = luaL_checkstring(L, 2), *loss_s = luaL_checkstring(L, 3);
    hy_tensor *z = check_f32_2d(L, 4, 0, 0, "features");
    int64_t N = z->shape[0], D = z->shape[1];
    hy_tensor *lg = check_f32_2d(L, 5, N, 0, "logits");
    int64_t K = lg->shape[1];
    hy_tensor *y = l_checktensor(L, 6);
    if (y->dtype != HY_I32 || y->ndim != 1 || y->shape[0] != N)
        luaL_argerror(L, 6, lua_pushfstring(L, "labels: expected an int32 [%d] tensor", (int)N));
    hy_tensor *w = check_f32_2d(L, 7, K, D, "head_w");
    lua_Integer seed = luaL_checkinteger(L, 8);
    const char *name = "vilu";
    hy_vilu_input in;
    hy_vilu_loss loss;
    if (hy_vilu_input_parse(in_s, "vilu.input", &in) != HY_OK) return l_raise(L);
    if (hy_vilu_loss_parse(loss_s, "vilu.loss", &loss) != HY_OK) return l_raise(L);
    size_t H = l_cfgsize(L, 1, "vilu.hidden");
    hy_vilu_fit_config c;
    c.epochs = l_cfgsize(L, 1, "vilu.epochs");
    c.batch_size = l_cfgsize(L, 1, "vilu.batch_size");
    c.learning_rate = l_cfgnum(L, 1, "vilu.learning_rate");
    c.weight_decay = l_cfgnum(L, 1, "vilu.weight_decay");
    c.seed = (uint64_t)seed;
    if (H == 0) return luaL_error(L, "%s.hidden must be >= 1 (got 0)", name);
    l_vilu *u = push_vilu(L);
    int ui = lua_gettop(L);
    if (hy_vilu_new(&u->v, in, loss, (size_t)D, H) != HY_OK) return l_raise(L);
    const float *x = inputs(L, &u->v, z, lg, w);
    hy_tensor *t = l_pushtensor(L);
    int64_t tn = N;
    if (hy_tensor_alloc(t, HY_F32, 1, &tn) != HY_OK) return l_raise(L);
    if (hy_vilu_targets(t->data, loss, lg->data, y->data, (size_t)N, (size_t)K) != HY_OK)
        return l_raise(L);
    /* misclassified rows, whatever the loss */
    const float *targets = t->data;
    size_t n_err = 0;
    {
        hy_tensor *e = l_pushtensor(L);
        if (hy_tensor_alloc(e, HY_F32, 1, &tn) != HY_OK) return l_raise(L);
        if (hy_vilu_targets(e->data, HY_VILU_LOSS_BCE, lg->data, y->data, (size_t)N,
                            (size_t)K) != HY_OK)
            return l_raise(L);
        for (int64_t i = 0; i < N; i++) n_err += ((float *)e->data)[i] > 0.5f;
        lua_pop(L, 1);
    }
    double final_loss = 0.0;
    if (hy_vilu_fit(&u->v, x, targets, (size_t)N, &c, name, &final_loss) != HY_OK)
        return l_raise(L);
    lua_pushvalue(L, ui);
    lua_pushnumber(L, final_loss);
    lua_pushinteger(L, (lua_Integer)n_err);
    return 3;
}

static int l_vilu_load(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    l_vilu *u = push_vilu(L);
    hy_h5 *f = l_pushh5(L);
    if (hy_h5_open(f, path) != HY_OK) return l_raise(L);
    hy_status st = hy_vilu_read(f, path, &u->v);
    hy_h5_close(f);
    if (st != HY_OK) return l_raise(L);
    lua_pop(L, 1);
    return 1;
}

static int l_vilu_score(lua_State *L) {
    hy_vilu *v = check_vilu(L, 1);
    hy_tensor *z = check_f32_2d(L, 2, 0, (int64_t)v->D, "features");
    int64_t N = z->shape[0];
    hy_tensor *lg = check_f32_2d(L, 3, N, 0, "logits");
    hy_tensor *w = check_f32_2d(L, 4, lg->shape[1], (int64_t)v->D, "head_w");
    const float *x = inputs(L, v, z, lg, w);
    hy_tensor *s = l_pushtensor(L);
    if (hy_tensor_alloc(s, HY_F32, 1, &N) != HY_OK) return l_raise(L);
    if (hy_vilu_score(v, x, (size_t)N, s->data) != HY_OK) return l_raise(L);
    return 1;
}

/* The file is boxed (l_pushh5) before it is created: an error discards it. */
static int l_vilu_save(lua_State *L) {
    hy_vilu *v = check_vilu(L, 1);
    const char *path = luaL_checkstring(L, 2);
    l_checkmeta(L, 3, "vilu");
    lua_settop(L, 3);   /* meta stays at 3 (nil when omitted): the box goes to 4 */
    hy_h5 *f = l_pushh5(L);
    if (hy_h5_create(f, path) != HY_OK) return l_raise(L);
    if (hy_vilu_write(f, v) != HY_OK || l_writemeta(L, 3, f) != HY_OK) {
        hy_h5_close(f);
        return l_raise(L);
    }
    if (hy_h5_commit(f) != HY_OK) return l_raise(L);
    return 0;
}

static int l_vilu_info(lua_State *L) {
    hy_vilu *v = check_vilu(L, 1);
    lua_createtable(L, 0, 4);
    lua_pushstring(L, hy_vilu_input_name(v->input));
    lua_setfield(L, -2, "input");
    lua_pushstring(L, hy_vilu_loss_name(v->loss));
    lua_setfield(L, -2, "loss");
    lua_pushinteger(L, (lua_Integer)v->D);
    lua_setfield(L, -2, "d_features");
    lua_pushinteger(L, (lua_Integer)v->H);
    lua_setfield(L, -2, "hidden");
    return 1;
}

static int l_vilu_gc(lua_State *L) {
    l_vilu *u = luaL_checkudata(L, 1, L_VILU);
    hy_vilu_release(&u->v);
    return 0;
}

void l_open_vilu(lua_State *L) {
    static const luaL_Reg methods[] = {{"score", l_vilu_score}, {"save", l_vilu_save},
                                       {"info", l_vilu_info},   {"close", l_vilu_gc},
                                       {NULL, NULL}};
    static const luaL_Reg fns[] = {{"vilu_fit", l_vilu_fit}, {"vilu_load", l_vilu_load},
                                   {NULL, NULL}};
    l_newclass(L, L_VILU, methods, l_vilu_gc, l_vilu_gc);
    l_setfuncs(L, fns);
}
