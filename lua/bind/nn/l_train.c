/* l_train.c: Lua binding of core/train (training loop, evaluation, prediction).
 *   m:evaluate(ds, B) -> nll, acc      m:predict(ds, B [, logits, probs]) -> logits, probs
 *   m:features(ds, B) -> features [N,D] (the CLS row after the final LayerNorm: the classifier's
 *     input, hy_xfmr_features), logits [N,K], probs [N,K] (m:predict's, from the same forward)
 *     (B: the caller's batch size, train.eval_batch_size in the pipeline)
 *   core.trainer_new(m, ds, train, optim, seed [, finetune]) -> hydra.Trainer
 *     t:start_epoch(e) (1-based), t:run(n) -> ran, t:progress() -> table, t:close(),
 *     t:save(path, meta [, best]), t:resume(path) -> best or nil (l_train_save / l_train_resume)
 * A Trainer has __gc and __close (one idempotent release); it pins its model and dataset through
 * uservalues, and checks the model is still open. */
#include <string.h>

#include "bind.h"
#include "nn/ckpt.h"
#include "nn/train.h"

#define L_TRAINER "hydra.Trainer"

typedef struct l_trainer { hy_trainer t; } l_trainer;

static int l_model_evaluate(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    hy_dataset *d = l_checkdataset(L, 2);
    lua_Integer B = luaL_checkinteger(L, 3);
    luaL_argcheck(L, B >= 1, 3, "batch size must be >= 1");
    double nll, acc;
    if (hy_train_evaluate(m, d, (size_t)B, &nll, &acc) != HY_OK) return l_raise(L);
    lua_pushnumber(L, nll);
    lua_pushnumber(L, acc);
    return 2;
}

/* An optional float32 [N,K] output tensor at arg (nil: allocate and push a new one); an
 * ensemble's (M > 1) is [M,N,K]. */
static hy_tensor *out_tensor(lua_State *L, int arg, int64_t M, int64_t N, int64_t K) {
    if (lua_isnoneornil(L, arg)) {
        int64_t shape[3] = {M, N, K};
        hy_tensor *t = l_pushtensor(L);
        if (hy_tensor_alloc(t, HY_F32, M > 1 ? 3 : 2, M > 1 ? shape : shape + 1) != HY_OK)
            l_raise(L);
        return t;
    }
    hy_tensor *t = l_checktensor(L, arg);
    if (t->dtype != HY_F32 || hy_tensor_numel(t) != (size_t)(M * N * K) || t->ndim < 1 ||
        t->shape[0] != (M > 1 ? M : N))
        luaL_argerror(L, arg, M > 1 ? lua_pushfstring(L, "expected a float32 [%d,%d,%d] tensor",
                                                      (int)M, (int)N, (int)K)
                                    : lua_pushfstring(L, "expected a float32 [%d,%d] tensor",
                                                      (int)N, (int)K));
    lua_pushvalue(L, arg);
    return t;
}

/* m:predict(ds, B [, logits_out [, probs_out]]) -> logits [N,K], probs [N,K]
 * (the outputs are written into the given tensors, e.g. row views, when passed); an ensemble's
 * are its members' [M,N,K] */
static int l_model_predict(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    hy_dataset *d = l_checkdataset(L, 2);
    lua_Integer B = luaL_checkinteger(L, 3);
    luaL_argcheck(L, B >= 1, 3, "batch size must be >= 1");
    int64_t M = (int64_t)hy_xfmr_members(m);
    hy_tensor *lg = out_tensor(L, 4, M, (int64_t)d->n, (int64_t)m->cfg.n_classes);
    hy_tensor *pr = out_tensor(L, 5, M, (int64_t)d->n, (int64_t)m->cfg.n_classes);
    if (hy_train_predict(m, d, (size_t)B, lg->data, pr->data) != HY_OK) return l_raise(L);
    return 2;
}

/* m:features(ds, B) -> features [N,D], logits [N,K], probs [N,K] */
static int l_model_features(lua_State *L) {
    hy_xfmr *m = l_checksingle(L, 1, "features");
    hy_dataset *d = l_checkdataset(L, 2);
    lua_Integer B = luaL_checkinteger(L, 3);
    luaL_argcheck(L, B >= 1, 3, "batch size must be >= 1");
    hy_tensor *ft = out_tensor(L, 4, 1, (int64_t)d->n, (int64_t)m->cfg.d_model);
    hy_tensor *lg = out_tensor(L, 5, 1, (int64_t)d->n, (int64_t)m->cfg.n_classes);
    hy_tensor *pr = out_tensor(L, 6, 1, (int64_t)d->n, (int64_t)m->cfg.n_classes);
    if (hy_train_features(m, d, (size_t)B, ft->data, lg->data, pr->data) != HY_OK)
        return l_raise(L);
    return 3;
}

static l_trainer *check_trainer(lua_State *L, int arg) {
    return (l_trainer *)l_checkfit(L, arg, L_TRAINER, "train");
}

/* core.trainer_new(model, dataset, train, optim, seed [, finetune]): train, optim and finetune
 * are the resolved config sections, read by their YAML keys (train.epochs, train.batch_size,
 * train.warmup_epochs, train.grad_clip, train.label_smoothing, train.augment.random_crop,
 * train.augment.crop_padding, train.augment.hflip, optim.learning_rate, optim.beta1,
 * optim.beta2, optim.eps, optim.weight_decay, optim.schedule, optim.min_lr); seed: the run's
 * seed. A fine-tuning trainer (finetune given) reads finetune.epochs, finetune.warmup_epochs and
 * finetune.learning_rate in place of train.epochs, train.warmup_epochs and optim.learning_rate
 * (finetune.warmup_epochs resolved: hydra.finetune fills in the rule of its null default). */
void l_read_train_config(lua_State *L, int tr, int op, int ft, lua_Integer seed,
                         hy_train_config *out, hy_augment *aug_out) {
    luaL_checktype(L, tr, LUA_TTABLE);
    luaL_checktype(L, op, LUA_TTABLE);
    if (ft) luaL_checktype(L, ft, LUA_TTABLE);
    hy_train_config c;
    memset(&c, 0, sizeof c);
    c.epochs = ft ? l_cfgsize(L, ft, "finetune.epochs") : l_cfgsize(L, tr, "train.epochs");
    c.batch_size = l_cfgsize(L, tr, "train.batch_size");
    c.warmup_epochs = ft ? l_cfgnum(L, ft, "finetune.warmup_epochs")
                         : l_cfgnum(L, tr, "train.warmup_epochs");
    c.grad_clip = l_cfgnum(L, tr, "train.grad_clip");
    c.label_smoothing = l_cfgnum(L, tr, "train.label_smoothing");
    c.optim.learning_rate = ft ? l_cfgnum(L, ft, "finetune.learning_rate")
                               : l_cfgnum(L, op, "optim.learning_rate");
    c.optim.beta1 = l_cfgnum(L, op, "optim.beta1");
    c.optim.beta2 = l_cfgnum(L, op, "optim.beta2");
    c.optim.eps = l_cfgnum(L, op, "optim.eps");
    c.optim.weight_decay = l_cfgnum(L, op, "optim.weight_decay");
    c.min_lr = l_cfgnum(L, op, "optim.min_lr");
    c.seed = (uint64_t)seed;
    if (hy_sched_parse(l_cfgstr(L, op, "optim.schedule"), &c.schedule) != HY_OK) l_raise(L);
    hy_augment aug = {l_cfgbool(L, tr, "train.augment.random_crop"),
                      (int)l_cfgsize(L, tr, "train.augment.crop_padding"),
                      l_cfgbool(L, tr, "train.augment.hflip")};
    *out = c;
    *aug_out = aug;
}

static int l_trainer_new(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    hy_dataset *d = l_checkdataset(L, 2);
    lua_Integer seed = luaL_checkinteger(L, 5);
    int ft = !lua_isnoneornil(L, 6);
    hy_train_config c;
    hy_augment aug;
    l_read_train_config(L, 3, 4, ft ? 6 : 0, seed, &c, &aug);

    l_trainer *u = lua_newuserdatauv(L, sizeof *u, 2);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, L_TRAINER);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    lua_pushvalue(L, 2);
    lua_setiuservalue(L, -2, 2);
    if (hy_trainer_new(&u->t, m, d, &c, &aug) != HY_OK) return l_raise(L);
    return 1;
}

static int l_trainer_gc(lua_State *L) {
    l_trainer *u = luaL_checkudata(L, 1, L_TRAINER);
    hy_fit *f = &u->t.fit;
    if (f->model && !f->model->params) f->model = NULL;   /* model closed */
    hy_trainer_release(&u->t);
    return 0;
}

/* ===== resumable state (hydra.Trainer and hydra.MimoTrainer) ===== */

int l_train_save(lua_State *L, hy_xfmr *m, const hy_adamw *o, const hy_progress *p) {
    const char *path = luaL_checkstring(L, 2);
    l_checkmeta(L, 3, "train");
    hy_tensor *best = lua_isnoneornil(L, 4) ? NULL : l_checktensor(L, 4);
    if (best && (best->dtype != HY_F32 || hy_tensor_numel(best) != m->n_params))
        return luaL_error(L, "train: save: best must be float32 with %I elements (got %s with %I)",
                          (lua_Integer)m->n_params, hy_dtype_name(best->dtype),
                          (lua_Integer)hy_tensor_numel(best));
    hy_h5 *f = l_pushh5(L);
    if (hy_h5_create(f, path) != HY_OK) return l_raise(L);
    hy_status st = hy_ckpt_write(f, m, NULL, 0);
    if (st == HY_OK) st = l_writemeta(L, 3, f);
    if (st == HY_OK) st = hy_train_state_write(f, o, p);
    if (st == HY_OK && best) {
        int64_t n = (int64_t)m->n_params;
        st = hy_h5_write_data(f, "/train_state/best", HY_F32, 1, &n, best->data);
    }
    if (st != HY_OK) {
        hy_h5_close(f);
        return l_raise(L);
    }
    if (hy_h5_commit(f) != HY_OK) return l_raise(L);
    return 0;
}

int l_train_resume(lua_State *L, hy_xfmr *m, hy_adamw *o, hy_progress *p) {
    const char *path = luaL_checkstring(L, 2);
    hy_h5 *f = l_pushh5(L);
    if (hy_h5_open(f, path) != HY_OK) return l_raise(L);
    hy_status st = hy_ckpt_read_params(f, m);
    if (st == HY_OK) st = hy_train_state_read(f, o, p);
    int has_best = 0;
    if (st == HY_OK) {
        int e = hy_h5_exists(f, "/train_state/best");
        if (e < 0) st = HY_ENOMEM;
        has_best = e > 0;
    }
    if (st == HY_OK && has_best) {
        int64_t n = (int64_t)m->n_params;
        hy_tensor *t = l_pushtensor(L);
        st = hy_tensor_alloc(t, HY_F32, 1, &n);
        if (st == HY_OK) st = hy_h5_read_into(f, "/train_state/best", HY_F32, 1, &n, t->data);
    }
    hy_h5_close(f);
    if (st != HY_OK) return l_raise(L);
    if (!has_best) lua_pushnil(L);
    return 1;
}

static int l_trainer_save(lua_State *L) {
    hy_fit *f = &check_trainer(L, 1)->t.fit;
    return l_train_save(L, f->model, &f->opt[0], &f->prog);
}

static int l_trainer_resume(lua_State *L) {
    hy_fit *f = &check_trainer(L, 1)->t.fit;
    return l_train_resume(L, f->model, &f->opt[0], &f->prog);
}

void l_open_train(lua_State *L) {
    static const luaL_Reg model_methods[] = {
        {"evaluate", l_model_evaluate}, {"predict", l_model_predict},
        {"features", l_model_features}, {NULL, NULL}};
    static const luaL_Reg methods[] = {
        {"save", l_trainer_save}, {"resume", l_trainer_resume}, {"close", l_trainer_gc},
        {NULL, NULL}};
    static const luaL_Reg fns[] = {{"trainer_new", l_trainer_new}, {NULL, NULL}};
    l_addmethods(L, L_MODEL, model_methods);
    l_newclass(L, L_TRAINER, methods, l_trainer_gc, l_trainer_gc);
    l_addfitmethods(L, L_TRAINER, "train");
    l_setfuncs(L, fns);
}
