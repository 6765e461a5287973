/* l_mlm.c: Lua binding of core/mlm (masked-language-model pretraining).
 *   core.mlm_new(model) -> hydra.MLMHead (for the model's d_model and vocab_size)
 *     h:init(seed); h:param_names() -> {...}; h:param(name) -> Tensor (a copy)
 *     h:load(path) (the /mlm/params of a pretrained checkpoint)
 *   core.mlm_trainer_new(model, head, dataset, pretrain, optim, seed) -> hydra.MLMTrainer
 *     t:start_epoch(e) (1-based), t:run(n) -> ran, t:progress() -> table (as hydra.Trainer's;
 *     seen/acc count predicted positions), t:save(path, meta, with_state) (model checkpoint +
 *     /mlm/params [+ /mlm/state]; atomic), t:resume(path) (params, head and state of such a
 *     file), t:close()
 *   core.mlm_evaluate(model, head, dataset, B, pretrain, seed) -> loss, acc, n
 * pretrain / optim are the resolved config sections, read by their YAML keys (pretrain.epochs,
 * pretrain.batch_size, pretrain.warmup_epochs, pretrain.grad_clip, pretrain.learning_rate,
 * pretrain.min_lr, pretrain.mask_rate, pretrain.mask_token, pretrain.random_token,
 * optim.beta1, optim.beta2, optim.eps, optim.weight_decay, optim.schedule). A trainer pins its
 * model, head and dataset through uservalues; it has __gc and __close (one release). */
#include <string.h>

#include "bind.h"
#include "nn/ckpt.h"
#include "nn/mlm.h"

#define L_MLM "hydra.MLMHead"
#define L_MLMTRAINER "hydra.MLMTrainer"

typedef struct l_mlm { hy_mlm h; } l_mlm;
typedef struct l_mlmtrainer { hy_mlm_trainer t; } l_mlmtrainer;

static hy_mlm *check_head(lua_State *L, int arg) {
    l_mlm *u = luaL_checkudata(L, arg, L_MLM);
    return &u->h;
}

static int l_mlm_gc(lua_State *L) {
    l_mlm *u = luaL_checkudata(L, 1, L_MLM);
    hy_mlm_release(&u->h);
    return 0;
}

static int l_mlm_new(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    l_mlm *u = lua_newuserdatauv(L, sizeof *u, 0);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, L_MLM);
    if (hy_mlm_new(&u->h, &m->cfg) != HY_OK) return l_raise(L);
    return 1;
}

static int l_mlm_init(lua_State *L) {
    hy_mlm *h = check_head(L, 1);
    hy_mlm_init(h, (uint64_t)luaL_checkinteger(L, 2));
    return 0;
}

static int l_mlm_param_names(lua_State *L) {
    hy_mlm *h = check_head(L, 1);
    lua_createtable(L, HY_MLM_N, 0);
    for (int i = 0; i < HY_MLM_N; i++) {
        lua_pushstring(L, h->table[i].name);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int l_mlm_param(lua_State *L) {
    hy_mlm *h = check_head(L, 1);
    const char *name = luaL_checkstring(L, 2);
    int64_t i = hy_mlm_param_index(h, name);
    if (i < 0) return luaL_error(L, "mlm: no parameter named '%s'", name);
    const hy_param *p = &h->table[i];
    hy_tensor *t = l_pushtensor(L);
    if (hy_tensor_alloc(t, HY_F32, p->ndim, p->shape) != HY_OK) return l_raise(L);
    memcpy(t->data, h->w[i], p->numel * sizeof(float));
    return 1;
}

static int l_mlm_load(lua_State *L) {
    hy_mlm *h = check_head(L, 1);
    const char *path = luaL_checkstring(L, 2);
    hy_h5 *f = l_pushh5(L);
    if (hy_h5_open(f, path) != HY_OK) return l_raise(L);
    hy_status st = hy_mlm_read(f, h);
    hy_h5_close(f);
    if (st != HY_OK) return l_raise(L);
    return 0;
}

/* ===== trainer ===== */

static hy_mlm_mask_config mask_config(lua_State *L, int p) {
    hy_mlm_mask_config c = {l_cfgnum(L, p, "pretrain.mask_rate"),
                            l_cfgnum(L, p, "pretrain.mask_token"),
                            l_cfgnum(L, p, "pretrain.random_token")};
    return c;
}

static l_mlmtrainer *check_trainer(lua_State *L, int arg) {
    return (l_mlmtrainer *)l_checkfit(L, arg, L_MLMTRAINER, "pretrain");
}

static int l_mlm_trainer_new(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    hy_mlm *h = check_head(L, 2);
    hy_dataset *d = l_checkdataset(L, 3);
    luaL_checktype(L, 4, LUA_TTABLE);
    luaL_checktype(L, 5, LUA_TTABLE);
    lua_Integer seed = luaL_checkinteger(L, 6);
    int p = 4, op = 5;
    hy_mlm_train_config c;
    memset(&c, 0, sizeof c);
    c.epochs = l_cfgsize(L, p, "pretrain.epochs");
    c.batch_size = l_cfgsize(L, p, "pretrain.batch_size");
    c.warmup_epochs = l_cfgnum(L, p, "pretrain.warmup_epochs");
    c.grad_clip = l_cfgnum(L, p, "pretrain.grad_clip");
    c.min_lr = l_cfgnum(L, p, "pretrain.min_lr");
    c.optim.learning_rate = l_cfgnum(L, p, "pretrain.learning_rate");
    c.optim.beta1 = l_cfgnum(L, op, "optim.beta1");
    c.optim.beta2 = l_cfgnum(L, op, "optim.beta2");
    c.optim.eps = l_cfgnum(L, op, "optim.eps");
    c.optim.weight_decay = l_cfgnum(L, op, "optim.weight_decay");
    c.mask = mask_config(L, p);
    c.seed = (uint64_t)seed;
    if (hy_sched_parse(l_cfgstr(L, op, "optim.schedule"), &c.schedule) != HY_OK)
        return l_raise(L);
    l_mlmtrainer *u = lua_newuserdatauv(L, sizeof *u, 3);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, L_MLMTRAINER);
    for (int i = 1; i <= 3; i++) {
        lua_pushvalue(L, i);
        lua_setiuservalue(L, -2, i);
    }
    if (hy_mlm_trainer_new(&u->t, m, h, d, &c) != HY_OK) return l_raise(L);
    return 1;
}

static int l_mlm_trainer_gc(lua_State *L) {
    l_mlmtrainer *u = luaL_checkudata(L, 1, L_MLMTRAINER);
    hy_fit *f = &u->t.fit;
    if (f->model && !f->model->params) f->model = NULL;   /* model closed */
    hy_mlm_trainer_release(&u->t);
    return 0;
}

/* t:save(path, meta, with_state): the file is boxed before it is created */
static int l_mlm_trainer_save(lua_State *L) {
    l_mlmtrainer *u = check_trainer(L, 1);
    const char *path = luaL_checkstring(L, 2);
    l_checkmeta(L, 3, "pretrain");
    int with_state = lua_toboolean(L, 4);
    hy_h5 *f = l_pushh5(L);
    if (hy_h5_create(f, path) != HY_OK) return l_raise(L);
    hy_status st = hy_ckpt_write(f, u->t.fit.model, NULL, 0);
    if (st == HY_OK) st = l_writemeta(L, 3, f);
    if (st == HY_OK) st = hy_mlm_write(f, u->t.head);
    if (st == HY_OK && with_state) st = hy_mlm_trainer_write_state(f, &u->t);
    if (st != HY_OK) {
        hy_h5_close(f);
        return l_raise(L);
    }
    if (hy_h5_commit(f) != HY_OK) return l_raise(L);
    return 0;
}

static int l_mlm_trainer_resume(lua_State *L) {
    l_mlmtrainer *u = check_trainer(L, 1);
    const char *path = luaL_checkstring(L, 2);
    hy_h5 *f = l_pushh5(L);
    if (hy_h5_open(f, path) != HY_OK) return l_raise(L);
    hy_status st = hy_ckpt_read_params(f, u->t.fit.model);
    if (st == HY_OK) st = hy_mlm_read(f, u->t.head);
    if (st == HY_OK) st = hy_mlm_trainer_read_state(f, &u->t);
    hy_h5_close(f);
    if (st != HY_OK) return l_raise(L);
    return 0;
}

static int l_mlm_evaluate(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    hy_mlm *h = check_head(L, 2);
    hy_dataset *d = l_checkdataset(L, 3);
    lua_Integer B = luaL_checkinteger(L, 4);
    luaL_argcheck(L, B >= 1, 4, "batch size must be >= 1");
    luaL_checktype(L, 5, LUA_TTABLE);
    lua_Integer seed = luaL_checkinteger(L, 6);
    hy_mlm_mask_config mc = mask_config(L, 5);
    double loss, acc;
    size_t n;
    if (hy_mlm_evaluate(m, h, d, (size_t)B, &mc, (uint64_t)seed, &loss, &acc, &n) != HY_OK)
        return l_raise(L);
    lua_pushnumber(L, loss);
    lua_pushnumber(L, acc);
    lua_pushinteger(L, (lua_Integer)n);
    return 3;
}

void l_open_mlm(lua_State *L) {
    static const luaL_Reg head[] = {
        {"init", l_mlm_init}, {"param_names", l_mlm_param_names}, {"param", l_mlm_param},
        {"load", l_mlm_load}, {NULL, NULL}};
    static const luaL_Reg trainer[] = {
        {"save", l_mlm_trainer_save}, {"resume", l_mlm_trainer_resume},
        {"close", l_mlm_trainer_gc}, {NULL, NULL}};
    static const luaL_Reg fns[] = {{"mlm_new", l_mlm_new}, {"mlm_trainer_new", l_mlm_trainer_new},
                                   {"mlm_evaluate", l_mlm_evaluate}, {NULL, NULL}};
    l_newclass(L, L_MLM, head, l_mlm_gc, NULL);
    l_newclass(L, L_MLMTRAINER, trainer, l_mlm_trainer_gc, l_mlm_trainer_gc);
    l_addfitmethods(L, L_MLMTRAINER, "pretrain");
    l_setfuncs(L, fns);
}
