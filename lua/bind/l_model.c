/* l_model.c: Lua binding of the model, datasets, training and checkpoints.
 *   core.model_new(cfg) / core.model_load(path)        -> hydra.Model (cfg: the model section)
 *   m:init(seed) m:config() m:params_count() m:n_tensors() m:param_names() m:param(name)
 *   m:get_params() m:set_params(t) m:gates() m:set_gates(t) m:set_gate(layer, head, g)
 *   m:set_dropout(on [, seed]) m:evaluate(ds, B) m:predict(ds, B [, logits, probs])
 *   m:save(path, meta) m:close()
 *   core.dataset_load(path, split [, subset [, mean, std]]) / core.dataset_from_images(images,
 *   labels, mean, std [, subset]) / core.dataset_from_text(ids, lengths, labels [, subset])
 *                                                      -> hydra.Dataset (ds:size() ds:kind()
 *                                                         ds:labels() ds:mean_std())
 *   core.synth_images(n, size, classes, seed) -> images, labels
 *   core.synth_text(n, max_len, vocab, seed) -> ids, lengths, labels
 *   core.mean_first(t) (mean over dim 1), core.file_sha256(path), core.bench_sgemm(n, reps)
 *   core.trainer_new(m, ds, cfg) -> hydra.Trainer (t:start_epoch(e) 1-based, t:run(n) -> ran,
 *                                                   t:progress() -> table, t:close())
 * Model and Trainer have __gc and __close (one idempotent release); methods of a closed one
 * raise "model: attempt to use a closed model". A Trainer pins its model and dataset through
 * uservalues, and checks the model is still open. Layers and heads are 1-based here. */
#include <math.h>
#include <string.h>

#include "bind.h"
#include "ckpt.h"
#include "gemm.h"
#include "hash.h"
#include "train.h"

#define L_MODEL "hydra.Model"
#define L_DATASET "hydra.Dataset"
#define L_TRAINER "hydra.Trainer"

typedef struct l_model { hy_xfmr m; } l_model;
typedef struct l_dataset { hy_dataset d; } l_dataset;
typedef struct l_trainer { hy_trainer t; int open; } l_trainer;

/* ===== helpers ===== */

static hy_xfmr *check_model(lua_State *L, int arg) {
    l_model *u = luaL_checkudata(L, arg, L_MODEL);
    if (!u->m.params) luaL_error(L, "model: attempt to use a closed model");
    return &u->m;
}

static hy_dataset *check_dataset(lua_State *L, int arg) {
    l_dataset *u = luaL_checkudata(L, arg, L_DATASET);
    return &u->d;
}

static l_model *push_model(lua_State *L) {
    l_model *u = lua_newuserdatauv(L, sizeof *u, 0);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, L_MODEL);
    return u;
}

static l_dataset *push_dataset(lua_State *L) {
    l_dataset *u = lua_newuserdatauv(L, sizeof *u, 0);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, L_DATASET);
    return u;
}

/* t[key] as a non-negative integer (required). */
static size_t field_size(lua_State *L, int t, const char *sect, const char *key) {
    lua_getfield(L, t, key);
    int ok = 0;
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    if (!ok || v < 0)
        luaL_error(L, "%s: %s must be a non-negative integer (got %s)", sect, key,
                   luaL_typename(L, -1));
    lua_pop(L, 1);
    return (size_t)v;
}

static double field_num(lua_State *L, int t, const char *sect, const char *key, double dflt,
                        int required) {
    lua_getfield(L, t, key);
    double v = dflt;
    if (lua_isnil(L, -1)) {
        if (required) luaL_error(L, "%s: missing key '%s'", sect, key);
    } else if (lua_type(L, -1) != LUA_TNUMBER) {
        luaL_error(L, "%s: %s must be a number (got %s)", sect, key, luaL_typename(L, -1));
    } else {
        v = lua_tonumber(L, -1);
    }
    lua_pop(L, 1);
    return v;
}

static int field_bool(lua_State *L, int t, const char *key) {
    lua_getfield(L, t, key);
    int v = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

/* Reads the model section (table at arg) into c. */
static void read_model_config(lua_State *L, int arg, hy_xfmr_config *c) {
    luaL_checktype(L, arg, LUA_TTABLE);
    memset(c, 0, sizeof *c);
    lua_getfield(L, arg, "kind");
    const char *kind = lua_tostring(L, -1);
    if (kind && strcmp(kind, "vit") == 0) c->kind = HY_XFMR_VIT;
    else if (kind && strcmp(kind, "text") == 0) c->kind = HY_XFMR_TEXT;
    else luaL_error(L, "model: kind must be 'vit' or 'text' (got %s)",
                    kind ? lua_pushfstring(L, "'%s'", kind) : luaL_typename(L, -1));
    lua_pop(L, 1);
    if (c->kind == HY_XFMR_VIT) {
        c->image_size = field_size(L, arg, "model", "image_size");
        c->channels = field_size(L, arg, "model", "channels");
        c->patch = field_size(L, arg, "model", "patch");
    } else {
        c->vocab_size = field_size(L, arg, "model", "vocab_size");
        c->max_len = field_size(L, arg, "model", "max_len");
    }
    c->d_model = field_size(L, arg, "model", "d_model");
    c->n_heads = field_size(L, arg, "model", "n_heads");
    c->depth = field_size(L, arg, "model", "depth");
    c->d_mlp = field_size(L, arg, "model", "d_mlp");
    c->n_classes = field_size(L, arg, "model", "n_classes");
    c->attn_dropout = (float)field_num(L, arg, "model", "attn_dropout", 0, 0);
    c->mlp_dropout = (float)field_num(L, arg, "model", "mlp_dropout", 0, 0);
}

/* ===== model ===== */

static int l_model_new(lua_State *L) {
    hy_xfmr_config c;
    read_model_config(L, 1, &c);
    l_model *u = push_model(L);
    if (hy_xfmr_new(&u->m, &c) != HY_OK) return l_raise(L);
    return 1;
}

static int l_model_load(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    l_model *u = push_model(L);
    if (hy_ckpt_load(path, &u->m) != HY_OK) return l_raise(L);
    return 1;
}

static int l_model_gc(lua_State *L) {
    l_model *u = luaL_checkudata(L, 1, L_MODEL);
    hy_xfmr_release(&u->m);
    return 0;
}

static int l_model_init(lua_State *L) {
    hy_xfmr *m = check_model(L, 1);
    lua_Integer seed = luaL_checkinteger(L, 2);
    hy_xfmr_init(m, (uint64_t)seed);
    return 0;
}

static int l_model_config(lua_State *L) {
    hy_xfmr *m = check_model(L, 1);
    const hy_xfmr_config *c = &m->cfg;
    lua_newtable(L);
    lua_pushstring(L, c->kind == HY_XFMR_TEXT ? "text" : "vit");
    lua_setfield(L, -2, "kind");
#define SETI(f) (lua_pushinteger(L, (lua_Integer)c->f), lua_setfield(L, -2, #f))
    SETI(image_size); SETI(channels); SETI(patch); SETI(vocab_size); SETI(max_len);
    SETI(d_model); SETI(n_heads); SETI(depth); SETI(d_mlp); SETI(n_classes);
#undef SETI
    lua_pushnumber(L, (lua_Number)c->attn_dropout);
    lua_setfield(L, -2, "attn_dropout");
    lua_pushnumber(L, (lua_Number)c->mlp_dropout);
    lua_setfield(L, -2, "mlp_dropout");
    lua_pushinteger(L, (lua_Integer)m->T);
    lua_setfield(L, -2, "seq_len");
    lua_pushnumber(L, hy_xfmr_flops(c, m->T));
    lua_setfield(L, -2, "flops");
    return 1;
}

static int l_model_params_count(lua_State *L) {
    hy_xfmr *m = check_model(L, 1);
    lua_pushinteger(L, (lua_Integer)m->n_params);
    return 1;
}

static int l_model_param_names(lua_State *L) {
    hy_xfmr *m = check_model(L, 1);
    lua_createtable(L, (int)m->n_tensors, 0);
    for (size_t i = 0; i < m->n_tensors; i++) {
        lua_pushstring(L, m->table[i].name);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* m:param(name) -> a float32 copy in its [out,in] shape */
static int l_model_param(lua_State *L) {
    hy_xfmr *m = check_model(L, 1);
    const char *name = luaL_checkstring(L, 2);
    int64_t i = hy_xfmr_param_index(m, name);
    if (i < 0) return luaL_error(L, "model: no parameter named '%s'", name);
    const hy_param *p = &m->table[i];
    hy_tensor *t = l_pushtensor(L);
    if (hy_tensor_alloc(t, HY_F32, p->ndim, p->shape) != HY_OK) return l_raise(L);
    memcpy(t->data, m->params + p->offset, p->numel * sizeof(float));
    return 1;
}

static int l_model_get_params(lua_State *L) {
    hy_xfmr *m = check_model(L, 1);
    int64_t n = (int64_t)m->n_params;
    hy_tensor *t = l_pushtensor(L);
    if (hy_tensor_alloc(t, HY_F32, 1, &n) != HY_OK) return l_raise(L);
    memcpy(t->data, m->params, m->n_params * sizeof(float));
    return 1;
}

static int l_model_set_params(lua_State *L) {
    hy_xfmr *m = check_model(L, 1);
    hy_tensor *t = l_checktensor(L, 2);
    if (t->dtype != HY_F32 || hy_tensor_numel(t) != m->n_params)
        return luaL_error(L, "model: set_params needs float32 with %I elements (got %s with %I)",
                          (lua_Integer)m->n_params, hy_dtype_name(t->dtype),
                          (lua_Integer)hy_tensor_numel(t));
    memcpy(m->params, t->data, m->n_params * sizeof(float));
    return 0;
}

static int l_model_gates(lua_State *L) {
    hy_xfmr *m = check_model(L, 1);
    int64_t shape[2] = {(int64_t)m->cfg.depth, (int64_t)m->cfg.n_heads};
    hy_tensor *t = l_pushtensor(L);
    if (hy_tensor_alloc(t, HY_F32, 2, shape) != HY_OK) return l_raise(L);
    memcpy(t->data, m->gates, m->cfg.depth * m->cfg.n_heads * sizeof(float));
    return 1;
}

static int l_model_set_gates(lua_State *L) {
    hy_xfmr *m = check_model(L, 1);
    hy_tensor *t = l_checktensor(L, 2);
    if (t->dtype != HY_F32 || t->ndim != 2 || t->shape[0] != (int64_t)m->cfg.depth ||
        t->shape[1] != (int64_t)m->cfg.n_heads) {
        char buf[64];
        return luaL_error(L, "model: gates must be float32 [%d,%d] (got %s %s)",
                          (int)m->cfg.depth, (int)m->cfg.n_heads, hy_dtype_name(t->dtype),
                          hy_shape_str(buf, sizeof buf, t->ndim, t->shape));
    }
    hy_xfmr_set_gates(m, t->data);
    return 0;
}

static int l_model_set_gate(lua_State *L) {
    hy_xfmr *m = check_model(L, 1);
    size_t layer = l_checkindex(L, 2, m->cfg.depth);
    size_t head = l_checkindex(L, 3, m->cfg.n_heads);
    float g = (float)luaL_checknumber(L, 4);
    hy_xfmr_set_gate(m, layer, head, g);
    return 0;
}

static int l_model_set_dropout(lua_State *L) {
    hy_xfmr *m = check_model(L, 1);
    int on = lua_toboolean(L, 2);
    lua_Integer seed = luaL_optinteger(L, 3, 0);
    hy_xfmr_set_dropout(m, on, (uint64_t)seed);
    return 0;
}

static int l_model_evaluate(lua_State *L) {
    hy_xfmr *m = check_model(L, 1);
    hy_dataset *d = check_dataset(L, 2);
    lua_Integer B = luaL_optinteger(L, 3, 256);
    luaL_argcheck(L, B >= 1, 3, "batch size must be >= 1");
    double nll, acc;
    if (hy_train_evaluate(m, d, (size_t)B, &nll, &acc) != HY_OK) return l_raise(L);
    lua_pushnumber(L, nll);
    lua_pushnumber(L, acc);
    return 2;
}

/* An optional float32 [N,K] output tensor at arg (nil: allocate and push a new one). */
static hy_tensor *out_tensor(lua_State *L, int arg, int64_t N, int64_t K) {
    if (lua_isnoneornil(L, arg)) {
        int64_t shape[2] = {N, K};
        hy_tensor *t = l_pushtensor(L);
        if (hy_tensor_alloc(t, HY_F32, 2, shape) != HY_OK) l_raise(L);
        return t;
    }
    hy_tensor *t = l_checktensor(L, arg);
    if (t->dtype != HY_F32 || hy_tensor_numel(t) != (size_t)(N * K) || t->ndim < 1 ||
        t->shape[0] != N)
        luaL_argerror(L, arg, lua_pushfstring(L, "expected a float32 [%d,%d] tensor",
                                              (int)N, (int)K));
    lua_pushvalue(L, arg);
    return t;
}

/* m:predict(ds [, B [, logits_out [, probs_out]]]) -> logits [N,K], probs [N,K]
 * (the outputs are written into the given tensors, e.g. row views, when passed) */
static int l_model_predict(lua_State *L) {
    hy_xfmr *m = check_model(L, 1);
    hy_dataset *d = check_dataset(L, 2);
    lua_Integer B = luaL_optinteger(L, 3, 256);
    luaL_argcheck(L, B >= 1, 3, "batch size must be >= 1");
    hy_tensor *lg = out_tensor(L, 4, (int64_t)d->n, (int64_t)m->cfg.n_classes);
    hy_tensor *pr = out_tensor(L, 5, (int64_t)d->n, (int64_t)m->cfg.n_classes);
    if (hy_train_predict(m, d, (size_t)B, lg->data, pr->data) != HY_OK) return l_raise(L);
    return 2;
}

/* core.mean_first(t) -> float32 tensor: the mean over dim 1 of a float32 [K, ...] tensor
 * (accumulated in double), e.g. MC-dropout passes [K,N,C] -> [N,C] */
static int l_mean_first(lua_State *L) {
    hy_tensor *t = l_checktensor(L, 1);
    luaL_argcheck(L, t->dtype == HY_F32 && t->ndim >= 2 && t->shape[0] >= 1, 1,
                  "expected a float32 tensor with 2 or more dims and a non-empty first dim");
    hy_tensor *o = l_pushtensor(L);
    if (hy_tensor_alloc(o, HY_F32, t->ndim - 1, t->shape + 1) != HY_OK) return l_raise(L);
    size_t K = (size_t)t->shape[0], n = hy_tensor_numel(o);
    const float *x = t->data;
    float *y = o->data;
    for (size_t i = 0; i < n; i++) {
        double s = 0;
        for (size_t k = 0; k < K; k++) s += (double)x[k * n + i];
        y[i] = (float)(s / (double)K);
    }
    return 1;
}

/* core.file_sha256(path) -> hex digest (identifies the data a model was trained on) */
static int l_file_sha256(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    char hex[65];
    if (hy_hash_file(path, HY_HASH_SHA256, 0, hex) != HY_OK) return l_raise(L);
    lua_pushstring(L, hex);
    return 1;
}

/* m:save(path, meta): meta maps keys to strings, integers or numbers */
static int l_model_save(lua_State *L) {
    hy_xfmr *m = check_model(L, 1);
    const char *path = luaL_checkstring(L, 2);
    enum { MAXKV = 64 };
    hy_kv kv[MAXKV];
    size_t n = 0;
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        lua_pushnil(L);
        while (lua_next(L, 3) != 0) {
            if (lua_type(L, -2) != LUA_TSTRING)
                return luaL_error(L, "model: meta keys must be strings");
            if (n == MAXKV) return luaL_error(L, "model: more than %d meta entries", MAXKV);
            kv[n].key = lua_tostring(L, -2);
            kv[n].str = NULL;
            kv[n].is_int = 0;
            kv[n].num = 0;
            if (lua_type(L, -1) == LUA_TSTRING) {
                kv[n].str = lua_tostring(L, -1);   /* the table keeps it alive */
            } else if (lua_isinteger(L, -1)) {
                kv[n].num = (double)lua_tointeger(L, -1);
                kv[n].is_int = 1;
            } else if (lua_type(L, -1) == LUA_TNUMBER) {
                kv[n].num = lua_tonumber(L, -1);
            } else if (lua_type(L, -1) == LUA_TBOOLEAN) {
                kv[n].num = lua_toboolean(L, -1);
                kv[n].is_int = 1;
            } else {
                return luaL_error(L, "model: meta '%s' must be a string or a number (got %s)",
                                  kv[n].key, luaL_typename(L, -1));
            }
            n++;
            lua_pop(L, 1);
        }
    }
    if (hy_ckpt_save(path, m, kv, n) != HY_OK) return l_raise(L);
    return 0;
}

/* ===== datasets ===== */

static int l_dataset_gc(lua_State *L) {
    l_dataset *u = luaL_checkudata(L, 1, L_DATASET);
    hy_dataset_release(&u->d);
    return 0;
}

static size_t opt_subset(lua_State *L, int arg) {
    lua_Integer s = luaL_optinteger(L, arg, 0);
    luaL_argcheck(L, s >= 0, arg, "subset must be >= 0");
    return (size_t)s;
}

static int l_dataset_load(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    const char *split = luaL_checkstring(L, 2);
    size_t subset = opt_subset(L, 3);
    double ms[2];
    int have_ms = !lua_isnoneornil(L, 4);
    if (have_ms) {
        ms[0] = luaL_checknumber(L, 4);
        ms[1] = luaL_checknumber(L, 5);
    }
    l_dataset *u = push_dataset(L);
    if (hy_dataset_load(&u->d, path, split, subset, have_ms ? ms : NULL) != HY_OK)
        return l_raise(L);
    return 1;
}

static int l_dataset_from_images(lua_State *L) {
    hy_tensor *img = l_checktensor(L, 1);
    hy_tensor *lab = l_checktensor(L, 2);
    double mean = luaL_checknumber(L, 3), std = luaL_checknumber(L, 4);
    size_t subset = opt_subset(L, 5);
    l_dataset *u = push_dataset(L);
    if (hy_dataset_from_images(&u->d, img, lab, mean, std, subset) != HY_OK) return l_raise(L);
    return 1;
}

static int l_dataset_from_text(lua_State *L) {
    hy_tensor *ids = l_checktensor(L, 1);
    hy_tensor *len = l_checktensor(L, 2);
    hy_tensor *lab = l_checktensor(L, 3);
    size_t subset = opt_subset(L, 4);
    l_dataset *u = push_dataset(L);
    if (hy_dataset_from_text(&u->d, ids, len, lab, subset) != HY_OK) return l_raise(L);
    return 1;
}

static int l_dataset_size(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)check_dataset(L, 1)->n);
    return 1;
}

static int l_dataset_kind(lua_State *L) {
    lua_pushstring(L, check_dataset(L, 1)->kind == HY_DATA_TEXT ? "text" : "image");
    return 1;
}

static int l_dataset_labels(lua_State *L) {
    hy_dataset *d = check_dataset(L, 1);
    int64_t n = (int64_t)d->n;
    hy_tensor *t = l_pushtensor(L);
    if (hy_tensor_alloc(t, HY_I32, 1, &n) != HY_OK) return l_raise(L);
    if (n) memcpy(t->data, d->labels, d->n * sizeof(int32_t));
    return 1;
}

static int l_dataset_mean_std(lua_State *L) {
    hy_dataset *d = check_dataset(L, 1);
    lua_pushnumber(L, d->mean);
    lua_pushnumber(L, d->std);
    return 2;
}

static int l_synth_images(lua_State *L) {
    lua_Integer n = luaL_checkinteger(L, 1), size = luaL_checkinteger(L, 2);
    lua_Integer classes = luaL_checkinteger(L, 3), seed = luaL_checkinteger(L, 4);
    luaL_argcheck(L, n >= 0, 1, "n must be >= 0");
    luaL_argcheck(L, size >= 0, 2, "size must be >= 0");
    luaL_argcheck(L, classes >= 0, 3, "classes must be >= 0");
    hy_tensor *img = l_pushtensor(L);
    hy_tensor *lab = l_pushtensor(L);
    hy_tensor a, b;
    if (hy_synth_images(&a, &b, (size_t)n, (size_t)size, (size_t)classes, (uint64_t)seed) !=
        HY_OK)
        return l_raise(L);
    *img = a;   /* the boxes own them now */
    *lab = b;
    return 2;
}

static int l_synth_text(lua_State *L) {
    lua_Integer n = luaL_checkinteger(L, 1), len = luaL_checkinteger(L, 2);
    lua_Integer vocab = luaL_checkinteger(L, 3), seed = luaL_checkinteger(L, 4);
    luaL_argcheck(L, n >= 0, 1, "n must be >= 0");
    luaL_argcheck(L, len >= 0, 2, "max_len must be >= 0");
    luaL_argcheck(L, vocab >= 0, 3, "vocab must be >= 0");
    hy_tensor *ids = l_pushtensor(L);
    hy_tensor *lens = l_pushtensor(L);
    hy_tensor *lab = l_pushtensor(L);
    hy_tensor a, b, c;
    if (hy_synth_text(&a, &b, &c, (size_t)n, (size_t)len, (size_t)vocab, (uint64_t)seed) !=
        HY_OK)
        return l_raise(L);
    *ids = a;
    *lens = b;
    *lab = c;
    return 3;
}

/* core.bench_sgemm(n, reps) -> best GFLOP/s of reps n x n x n sgemm calls (row-major, through
 * hy_gemm), for the % of peak that `make bench` reports */
static int l_bench_sgemm(lua_State *L) {
    lua_Integer n = luaL_checkinteger(L, 1), reps = luaL_optinteger(L, 2, 3);
    luaL_argcheck(L, n >= 1 && n <= 8192, 1, "size must be in [1, 8192]");
    luaL_argcheck(L, reps >= 1, 2, "reps must be >= 1");
    int64_t shape[2] = {n, n};
    hy_tensor *a = l_pushtensor(L), *b = l_pushtensor(L), *c = l_pushtensor(L);
    if (hy_tensor_alloc(a, HY_F32, 2, shape) != HY_OK || hy_tensor_alloc(b, HY_F32, 2, shape) !=
        HY_OK || hy_tensor_alloc(c, HY_F32, 2, shape) != HY_OK)
        return l_raise(L);
    float *x = a->data, *y = b->data;
    for (size_t i = 0; i < (size_t)(n * n); i++) {
        x[i] = (float)(i % 7) * 0.125f;
        y[i] = (float)(i % 5) * 0.25f;
    }
    double best = 0;
    for (lua_Integer r = 0; r <= reps; r++) {   /* first call warms up */
        double t0 = hy_now();
        hy_gemm(CblasNoTrans, CblasNoTrans, (size_t)n, (size_t)n, (size_t)n, 1.0f, a->data,
                (size_t)n, b->data, (size_t)n, 0.0f, c->data, (size_t)n);
        double dt = hy_now() - t0;
        double gf = 2.0 * (double)n * (double)n * (double)n / dt / 1e9;
        if (r > 0 && gf > best) best = gf;
    }
    lua_pushnumber(L, best);
    return 1;
}

/* ===== trainer ===== */

static l_trainer *check_trainer(lua_State *L, int arg) {
    l_trainer *u = luaL_checkudata(L, arg, L_TRAINER);
    if (!u->open) luaL_error(L, "train: attempt to use a closed trainer");
    if (!u->t.model->params) luaL_error(L, "model: attempt to use a closed model");
    return u;
}

/* core.trainer_new(model, dataset, cfg): cfg holds the train + optim keys flattened:
 * epochs, batch_size, warmup_epochs, grad_clip, label_smoothing, learning_rate, beta1, beta2,
 * eps, weight_decay, schedule, min_lr, seed, random_crop, crop_padding, hflip. */
static int l_trainer_new(lua_State *L) {
    hy_xfmr *m = check_model(L, 1);
    hy_dataset *d = check_dataset(L, 2);
    luaL_checktype(L, 3, LUA_TTABLE);
    hy_train_config c;
    memset(&c, 0, sizeof c);
    c.epochs = field_size(L, 3, "train", "epochs");
    c.batch_size = field_size(L, 3, "train", "batch_size");
    c.warmup_epochs = field_num(L, 3, "train", "warmup_epochs", 0, 1);
    c.grad_clip = field_num(L, 3, "train", "grad_clip", 0, 1);
    c.label_smoothing = field_num(L, 3, "train", "label_smoothing", 0, 1);
    c.optim.learning_rate = field_num(L, 3, "optim", "learning_rate", 0, 1);
    c.optim.beta1 = field_num(L, 3, "optim", "beta1", 0, 1);
    c.optim.beta2 = field_num(L, 3, "optim", "beta2", 0, 1);
    c.optim.eps = field_num(L, 3, "optim", "eps", 0, 1);
    c.optim.weight_decay = field_num(L, 3, "optim", "weight_decay", 0, 1);
    c.min_lr = field_num(L, 3, "optim", "min_lr", 0, 1);
    c.seed = (uint64_t)(lua_Integer)field_num(L, 3, "train", "seed", 0, 1);
    lua_getfield(L, 3, "schedule");
    const char *sched = lua_isnil(L, -1) ? "cosine" : luaL_checkstring(L, -1);
    if (hy_sched_parse(sched, &c.schedule) != HY_OK) return l_raise(L);
    lua_pop(L, 1);
    hy_augment aug = {field_bool(L, 3, "random_crop"), 0, field_bool(L, 3, "hflip")};
    aug.crop_padding = (int)field_num(L, 3, "train", "crop_padding", 0, 0);

    l_trainer *u = lua_newuserdatauv(L, sizeof *u, 2);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, L_TRAINER);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    lua_pushvalue(L, 2);
    lua_setiuservalue(L, -2, 2);
    if (hy_trainer_new(&u->t, m, d, &c, &aug) != HY_OK) return l_raise(L);
    u->open = 1;
    return 1;
}

static int l_trainer_gc(lua_State *L) {
    l_trainer *u = luaL_checkudata(L, 1, L_TRAINER);
    if (u->open && u->t.model && !u->t.model->params) u->t.model = NULL;   /* model closed */
    hy_trainer_release(&u->t);
    u->open = 0;
    return 0;
}

static int l_trainer_start_epoch(lua_State *L) {
    l_trainer *u = check_trainer(L, 1);
    lua_Integer e = luaL_checkinteger(L, 2);
    luaL_argcheck(L, e >= 1, 2, "epochs are numbered from 1");
    hy_trainer_start_epoch(&u->t, (uint64_t)(e - 1));
    return 0;
}

static int l_trainer_run(lua_State *L) {
    l_trainer *u = check_trainer(L, 1);
    lua_Integer n = luaL_checkinteger(L, 2);
    luaL_argcheck(L, n >= 0, 2, "steps must be >= 0");
    size_t ran = 0;
    if (hy_trainer_run(&u->t, (size_t)n, &ran) != HY_OK) return l_raise(L);
    lua_pushinteger(L, (lua_Integer)ran);
    return 1;
}

static int l_trainer_progress(lua_State *L) {
    l_trainer *u = check_trainer(L, 1);
    const hy_progress *p = &u->t.prog;
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
    return 1;
}

void l_open_model(lua_State *L) {
    static const luaL_Reg model_methods[] = {
        {"init", l_model_init},           {"config", l_model_config},
        {"params_count", l_model_params_count}, {"param_names", l_model_param_names},
        {"param", l_model_param},         {"get_params", l_model_get_params},
        {"set_params", l_model_set_params}, {"gates", l_model_gates},
        {"set_gates", l_model_set_gates}, {"set_gate", l_model_set_gate},
        {"set_dropout", l_model_set_dropout}, {"evaluate", l_model_evaluate},
        {"predict", l_model_predict},     {"save", l_model_save},
        {"close", l_model_gc},            {NULL, NULL}};
    static const luaL_Reg dataset_methods[] = {
        {"size", l_dataset_size}, {"kind", l_dataset_kind}, {"labels", l_dataset_labels},
        {"mean_std", l_dataset_mean_std}, {NULL, NULL}};
    static const luaL_Reg trainer_methods[] = {
        {"start_epoch", l_trainer_start_epoch}, {"run", l_trainer_run},
        {"progress", l_trainer_progress}, {"close", l_trainer_gc}, {NULL, NULL}};
    static const luaL_Reg fns[] = {
        {"model_new", l_model_new},       {"model_load", l_model_load},
        {"dataset_load", l_dataset_load}, {"dataset_from_images", l_dataset_from_images},
        {"dataset_from_text", l_dataset_from_text}, {"synth_images", l_synth_images},
        {"synth_text", l_synth_text},     {"trainer_new", l_trainer_new},
        {"mean_first", l_mean_first},     {"file_sha256", l_file_sha256},
        {"bench_sgemm", l_bench_sgemm},
        {NULL, NULL}};
    /* metatables: __index = methods; Model and Trainer also __close */
    luaL_newmetatable(L, L_MODEL);
    lua_newtable(L);
    luaL_setfuncs(L, model_methods, 0);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_model_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, l_model_gc);
    lua_setfield(L, -2, "__close");
    lua_pop(L, 1);
    luaL_newmetatable(L, L_DATASET);
    lua_newtable(L);
    luaL_setfuncs(L, dataset_methods, 0);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_dataset_gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);
    luaL_newmetatable(L, L_TRAINER);
    lua_newtable(L);
    luaL_setfuncs(L, trainer_methods, 0);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_trainer_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, l_trainer_gc);
    lua_setfield(L, -2, "__close");
    lua_pop(L, 1);
    l_setfuncs(L, fns);
}
