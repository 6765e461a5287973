/* l_fit.c: Lua binding of core/fit (the training loop), shared by every trainer class
 * (hydra.Trainer, hydra.MimoTrainer, hydra.MLMTrainer: l_addfitmethods):
 *   t:start_epoch(e) (1-based), t:run(n) -> ran (steps run; fewer at the end of the epoch),
 *   t:progress() -> { epoch, step, total_steps, epoch_step, epoch_steps, seen, loss, acc,
 *     last_loss, lr, grad_norm, seconds, samples_per_s } (loss and acc: the epoch's so far)
 * The methods carry their class and message prefix as upvalues. */
#include "bind.h"
#include "nn/fit.h"

hy_fit *l_checkfit(lua_State *L, int arg, const char *cls, const char *who) {
    hy_fit *f = luaL_checkudata(L, arg, cls);
    if (!f->model) luaL_error(L, "%s: attempt to use a closed trainer", who);
    if (!f->model->params) luaL_error(L, "model: attempt to use a closed model");
    return f;
}

static hy_fit *upfit(lua_State *L) {
    return l_checkfit(L, 1, lua_tostring(L, lua_upvalueindex(1)),
                      lua_tostring(L, lua_upvalueindex(2)));
}

static int l_fit_start_epoch(lua_State *L) {
    hy_fit *f = upfit(L);
    lua_Integer e = luaL_checkinteger(L, 2);
    luaL_argcheck(L, e >= 1, 2, "epochs are numbered from 1");
    hy_fit_start_epoch(f, (uint64_t)(e - 1));
    return 0;
}

static int l_fit_run(lua_State *L) {
    hy_fit *f = upfit(L);
    lua_Integer n = luaL_checkinteger(L, 2);
    luaL_argcheck(L, n >= 0, 2, "steps must be >= 0");
    size_t ran = 0;
    if (hy_fit_run(f, (size_t)n, &ran) != HY_OK) return l_raise(L);
    lua_pushinteger(L, (lua_Integer)ran);
    return 1;
}

static int l_fit_progress(lua_State *L) {
    l_pushprogress(L, &upfit(L)->prog);
    return 1;
}

void l_addfitmethods(lua_State *L, const char *cls, const char *who) {
    static const luaL_Reg fns[] = {{"start_epoch", l_fit_start_epoch}, {"run", l_fit_run},
                                   {"progress", l_fit_progress}, {NULL, NULL}};
    luaL_getmetatable(L, cls);
    lua_getfield(L, -1, "__index");
    lua_pushstring(L, cls);
    lua_pushstring(L, who);
    luaL_setfuncs(L, fns, 2);
    lua_pop(L, 2);
}

void l_pushprogress(lua_State *L, const hy_progress *p) {
    lua_newtable(L);
#define SETN(k, v) (lua_pushnumber(L, (lua_Number)(v)), lua_setfield(L, -2, k))
#define SETI(k, v) (lua_pushinteger(L, (lua_Integer)(v)), lua_setfield(L, -2, k))
    SETI("epoch", p->epoch + 1);
    SETI("step", p->step);
    SETI("total_steps", p->total_steps);
    SETI("epoch_step", p->epoch_step);
    SETI("epoch_steps", p->epoch_steps);
    SETI("seen", p->epoch_seen);
    SETN("loss", p->epoch_seen ? p->epoch_loss_sum / (double)p->epoch_seen : 0.0);
    SETN("acc", p->epoch_seen ? (double)p->epoch_correct / (double)p->epoch_seen : 0.0);
    SETN("last_loss", p->loss);
    SETN("lr", p->lr);
    SETN("grad_norm", p->grad_norm);
    SETN("seconds", p->epoch_seconds);
    SETN("samples_per_s", p->epoch_seconds > 0 ? (double)p->epoch_seen / p->epoch_seconds : 0.0);
#undef SETN
#undef SETI
}
