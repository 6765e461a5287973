/* l_mimo.c: Lua binding of core/mimo (MIMO training and prediction on a plain model).
 *   core.mimo_trainer_new(m, ds, train, optim, seed, mimo) -> hydra.MimoTrainer
 *     (train, optim: as core.trainer_new; mimo: the resolved mimo section, read by its keys
 *     mimo.members, mimo.input_repetition, mimo.batch_repetition)
 *     t:start_epoch(e) (1-based), t:run(n) -> ran, t:progress() -> table, t:close(),
 *     t:save(path, meta [, best]), t:resume(path) -> best or nil (as hydra.Trainer's)
 *   m:mimo_predict(M, ds, B) -> member_logits [M,N,K], probs [N,K], member_probs [M,N,K]
 *   m:mimo_evaluate(M, ds, B) -> nll, acc   (of the mean of the members' softmaxes)
 * A MimoTrainer has __gc and __close (one idempotent release); it pins its model and dataset
 * through uservalues and checks the model is still open. */
#include <string.h>

#include "bind.h"
#include "hydra/mimo.h"

#define L_MIMO_TRAINER "hydra.MimoTrainer"

typedef struct l_mtrainer { hy_mimo_trainer t; } l_mtrainer;

static l_mtrainer *check_trainer(lua_State *L, int arg) {
    return (l_mtrainer *)l_checkfit(L, arg, L_MIMO_TRAINER, "mimo");
}

static void read_mimo(lua_State *L, int arg, hy_mimo_config *mc) {
    luaL_checktype(L, arg, LUA_TTABLE);
    mc->members = l_cfgsize(L, arg, "mimo.members");
    mc->input_repetition = l_cfgnum(L, arg, "mimo.input_repetition");
    mc->batch_repetition = l_cfgsize(L, arg, "mimo.batch_repetition");
}

static int l_mimo_trainer_new(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    hy_dataset *d = l_checkdataset(L, 2);
    lua_Integer seed = luaL_checkinteger(L, 5);
    hy_train_config c;
    hy_augment aug;
    l_read_train_config(L, 3, 4, 0, seed, &c, &aug);
    hy_mimo_config mc;
    read_mimo(L, 6, &mc);
    l_mtrainer *u = lua_newuserdatauv(L, sizeof *u, 2);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, L_MIMO_TRAINER);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    lua_pushvalue(L, 2);
    lua_setiuservalue(L, -2, 2);
    if (hy_mimo_trainer_new(&u->t, m, d, &c, &mc, &aug) != HY_OK) return l_raise(L);
    return 1;
}

static int l_mimo_trainer_gc(lua_State *L) {
    l_mtrainer *u = luaL_checkudata(L, 1, L_MIMO_TRAINER);
    hy_fit *f = &u->t.fit;
    if (f->model && !f->model->params) f->model = NULL;   /* model closed */
    hy_mimo_trainer_release(&u->t);
    return 0;
}

static int l_mimo_trainer_save(lua_State *L) {
    hy_fit *f = &check_trainer(L, 1)->t.fit;
    return l_train_save(L, f->model, &f->opt[0], &f->prog);
}

static int l_mimo_trainer_resume(lua_State *L) {
    hy_fit *f = &check_trainer(L, 1)->t.fit;
    return l_train_resume(L, f->model, &f->opt[0], &f->prog);
}

static size_t check_members(lua_State *L, int arg) {
    lua_Integer M = luaL_checkinteger(L, arg);
    luaL_argcheck(L, M >= 1, arg, "members must be >= 1");
    return (size_t)M;
}

static hy_tensor *push_out(lua_State *L, int ndim, int64_t a, int64_t b, int64_t c) {
    int64_t shape[3] = {a, b, c};
    hy_tensor *t = l_pushtensor(L);
    if (hy_tensor_alloc(t, HY_F32, ndim, shape) != HY_OK) l_raise(L);
    return t;
}

static int l_mimo_predict(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    size_t M = check_members(L, 2);
    hy_dataset *d = l_checkdataset(L, 3);
    lua_Integer B = luaL_checkinteger(L, 4);
    luaL_argcheck(L, B >= 1, 4, "batch size must be >= 1");
    if (hy_mimo_check(m, M, d, 0) != HY_OK) return l_raise(L);
    int64_t N = (int64_t)d->n, K = (int64_t)(m->cfg.n_classes / M);
    hy_tensor *ml = push_out(L, 3, (int64_t)M, N, K);
    hy_tensor *pr = push_out(L, 2, N, K, 0);
    hy_tensor *mp = push_out(L, 3, (int64_t)M, N, K);
    if (hy_mimo_predict(m, M, d, (size_t)B, ml->data, pr->data, mp->data) != HY_OK)
        return l_raise(L);
    return 3;
}

static int l_mimo_evaluate(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    size_t M = check_members(L, 2);
    hy_dataset *d = l_checkdataset(L, 3);
    lua_Integer B = luaL_checkinteger(L, 4);
    luaL_argcheck(L, B >= 1, 4, "batch size must be >= 1");
    double nll, acc;
    if (hy_mimo_evaluate(m, M, d, (size_t)B, &nll, &acc) != HY_OK) return l_raise(L);
    lua_pushnumber(L, nll);
    lua_pushnumber(L, acc);
    return 2;
}

void l_open_mimo(lua_State *L) {
    static const luaL_Reg model_methods[] = {
        {"mimo_predict", l_mimo_predict}, {"mimo_evaluate", l_mimo_evaluate}, {NULL, NULL}};
    static const luaL_Reg methods[] = {
        {"save", l_mimo_trainer_save}, {"resume", l_mimo_trainer_resume},
        {"close", l_mimo_trainer_gc}, {NULL, NULL}};
    static const luaL_Reg fns[] = {{"mimo_trainer_new", l_mimo_trainer_new}, {NULL, NULL}};
    l_addmethods(L, L_MODEL, model_methods);
    l_newclass(L, L_MIMO_TRAINER, methods, l_mimo_trainer_gc, l_mimo_trainer_gc);
    l_addfitmethods(L, L_MIMO_TRAINER, "mimo");
    l_setfuncs(L, fns);
}
