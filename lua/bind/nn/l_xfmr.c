/* l_xfmr.c: Lua binding of core/xfmr (the transformer: parameters, gates, dropout).
 *   core.model_new(cfg) -> hydra.Model (cfg: a resolved model section, read by its YAML keys
 *     model.kind, model.d_model, ..., model.dropout; read_model_config)
 *   core.model_config_fields() (the schema, xfmr.h), core.model_cost(cfg [, kept [, T]]) and
 *   m:cost([kept [, T]]) -> flops, params, parts (hy_xfmr_cost at sequence length T, tokens
 *     with CLS; default the full length 1 + max_len for text)
 *   m:config() -> kind, the HY_XFMR_CONFIG_FIELDS (the /config attributes of a checkpoint),
 *     dropout (= model.dropout: both rates, when they are equal), seq_len, flops, params
 *   m:init(seed) m:params_count() m:n_tensors() m:param_names() m:param(name)
 *   m:get_params() m:set_params(t) m:gates() m:set_gates(t) m:set_gate(layer, head, g)
 *   m:set_dropout(on [, seed]) m:flops(T) m:close()
 *   m:set_precision("fp32" | "bf16") -> the precision in force (hy_xfmr_set_precision: bf16
 *     packs the linears' weights as they are now; without AVX-512 BF16 it stays "fp32")
 *   (m:save: l_ckpt.c; m:evaluate, m:predict: l_train.c)
 *   core.model_time(m, B, reps, seed) -> seconds per forward of a batch of B random images
 *     (after one warm-up), for the cost benchmark
 * A Model has __gc and __close (one idempotent release); methods of a closed one raise
 * "model: attempt to use a closed model". Layers and heads are 1-based here. */
#include <stdio.h>
#include <string.h>

#include "bind.h"
#include "nn/xfmr.h"

typedef struct l_model { hy_xfmr m; } l_model;

hy_xfmr *l_checkmodel(lua_State *L, int arg) {
    l_model *u = luaL_checkudata(L, arg, L_MODEL);
    if (!u->m.params) luaL_error(L, "model: attempt to use a closed model");
    return &u->m;
}

hy_xfmr *l_checksingle(lua_State *L, int arg, const char *who) {
    hy_xfmr *m = l_checkmodel(L, arg);
    if (m->ext)
        luaL_error(L, "%s: '%s' models are not supported (a single model is expected)", who,
                   m->ext->name);
    return m;
}

hy_xfmr *l_pushmodel(lua_State *L) {
    l_model *u = lua_newuserdatauv(L, sizeof *u, 0);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, L_MODEL);
    return &u->m;
}

/* Reads a resolved model section (table at arg) into c by its YAML keys: model.kind, the SIZE
 * fields of HY_XFMR_CONFIG_FIELDS that apply to the kind under their names (model.d_model, ...),
 * every RATE field (attn_dropout, mlp_dropout) from the one knob model.dropout, and the optional
 * fields (FLOAT, COUNT, ENUM: model.ln_eps, model.norm, ...) under their names, absent = the
 * schema's default. */
void l_read_model_config(lua_State *L, int arg, hy_xfmr_config *c) {
    luaL_checktype(L, arg, LUA_TTABLE);
    memset(c, 0, sizeof *c);
    const char *kind = l_cfgstr(L, arg, "model.kind");
    if (hy_xfmr_kind_parse(kind, &c->kind) != HY_OK)
        luaL_error(L, "model.kind must be vit or text (got '%s')", kind);
    float rate = (float)l_cfgnum(L, arg, "model.dropout");
    char key[64];
    for (size_t i = 0; i < HY_XFMR_N_FIELDS; i++) {
        const hy_xfmr_field *f = &hy_xfmr_fields[i];
        if (!hy_xfmr_field_applies(f, c->kind)) continue;
        if (f->type == HY_FIELD_RATE) {
            hy_xfmr_field_set_rate(c, f, rate);
            continue;
        }
        snprintf(key, sizeof key, "model.%s", f->name);
        if (f->type == HY_FIELD_FLOAT) {
            double v = l_cfghas(L, arg, key) ? l_cfgnum(L, arg, key) : hy_xfmr_field_default(f);
            hy_xfmr_field_set_float(c, f, v);
            continue;
        }
        if (f->type == HY_FIELD_COUNT) {
            size_t v = l_cfghas(L, arg, key) ? l_cfgsize(L, arg, key)
                                             : (size_t)hy_xfmr_field_default(f);
            hy_xfmr_field_set_size(c, f, v);
            continue;
        }
        if (f->type == HY_FIELD_ENUM) {
            int v = 0;
            if (l_cfghas(L, arg, key)) {
                const char *w = l_cfgstr(L, arg, key);
                if (hy_xfmr_field_enum_parse(f, w, &v) != HY_OK)
                    luaL_error(L, "%s must be one of %s (got '%s')", key, f->dflt, w);
            }
            hy_xfmr_field_set_enum(c, f, v);
            continue;
        }
        hy_xfmr_field_set_size(c, f, l_cfgsize(L, arg, key));
    }
}

/* core.model_config_fields() -> { { name =, type = "size"|"rate"|"float"|"count"|"enum", kind =
 * "vit"|"text"|"all" [, default = (optional fields)] [, words = { ... } (enum)] }, ... } in
 * schema order (HY_XFMR_CONFIG_FIELDS) */
static int l_model_config_fields(lua_State *L) {
    lua_createtable(L, HY_XFMR_N_FIELDS, 0);
    for (size_t i = 0; i < HY_XFMR_N_FIELDS; i++) {
        const hy_xfmr_field *f = &hy_xfmr_fields[i];
        lua_createtable(L, 0, 3);
        lua_pushstring(L, f->name);
        lua_setfield(L, -2, "name");
        static const char *const types[] = {"size", "rate", "float", "count", "enum"};
        lua_pushstring(L, types[f->type]);
        lua_setfield(L, -2, "type");
        char w[32];
        if (f->type == HY_FIELD_FLOAT) lua_pushnumber(L, hy_xfmr_field_default(f));
        else if (f->type == HY_FIELD_COUNT)
            lua_pushinteger(L, (lua_Integer)hy_xfmr_field_default(f));
        else if (f->type == HY_FIELD_ENUM)
            lua_pushstring(L, hy_xfmr_field_enum_name(f, 0, w, sizeof w));
        else lua_pushnil(L);
        lua_setfield(L, -2, "default");
        if (f->type == HY_FIELD_ENUM) {   /* its words, in value order */
            int n = hy_xfmr_field_enum_count(f);
            lua_createtable(L, n, 0);
            for (int v = 0; v < n; v++) {
                lua_pushstring(L, hy_xfmr_field_enum_name(f, v, w, sizeof w));
                lua_rawseti(L, -2, v + 1);
            }
            lua_setfield(L, -2, "words");
        }
        lua_pushstring(L, f->kind < 0 ? "all" : hy_xfmr_kind_name((hy_xfmr_kind)f->kind));
        lua_setfield(L, -2, "kind");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int push_costs(lua_State *L, hy_xfmr_costs r);

/* the sequence length at arg: an integer in [1, hy_xfmr_seq_len(c)], or none / nil: the full
 * length */
static size_t opt_seq_len(lua_State *L, int arg, const hy_xfmr_config *c) {
    size_t Tmax = hy_xfmr_seq_len(c);
    if (lua_isnoneornil(L, arg)) return Tmax;
    lua_Integer T = luaL_checkinteger(L, arg);
    luaL_argcheck(L, T >= 1 && (size_t)T <= Tmax, arg, "sequence length out of range");
    return (size_t)T;
}

/* pushes the hy_xfmr_cost of c at the sequence length at arg + 1 (opt_seq_len) with kept heads
 * (table at arg, or none): flops, params, parts = { embed|ln|attn|mlp|head = { flops =,
 * params = } } */
static int push_cost(lua_State *L, const hy_xfmr_config *c, int arg) {
    size_t kept[HY_ATTN_MAX_T], *kp = NULL;   /* any depth up to that bound */
    if (!lua_isnoneornil(L, arg)) {
        luaL_checktype(L, arg, LUA_TTABLE);
        if ((size_t)luaL_len(L, arg) != c->depth || c->depth > HY_ATTN_MAX_T)
            return luaL_error(L, "cost: kept must list the heads of each of the %d layers",
                              (int)c->depth);
        for (size_t l = 0; l < c->depth; l++) {
            lua_rawgeti(L, arg, (lua_Integer)l + 1);
            lua_Integer k = luaL_checkinteger(L, -1);
            if (k < 1 || (size_t)k > c->n_heads)
                return luaL_error(L, "cost: kept[%d] must be in [1, %d] (got %d)", (int)l + 1,
                                  (int)c->n_heads, (int)k);
            kept[l] = (size_t)k;
            lua_pop(L, 1);
        }
        kp = kept;
    }
    size_t T = opt_seq_len(L, arg + 1, c);
    return push_costs(L, hy_xfmr_cost(c, T, kp));
}

/* pushes flops, params, parts of r */
static int push_costs(lua_State *L, hy_xfmr_costs r) {
    static const char *const parts[HY_N_PARTS] = {"embed", "ln", "attn", "mlp", "head"};
    lua_pushnumber(L, r.flops_total);
    lua_pushinteger(L, (lua_Integer)r.params_total);
    lua_createtable(L, 0, HY_N_PARTS);
    for (int p = 0; p < HY_N_PARTS; p++) {
        lua_createtable(L, 0, 2);
        lua_pushnumber(L, r.flops[p]);
        lua_setfield(L, -2, "flops");
        lua_pushinteger(L, (lua_Integer)r.params[p]);
        lua_setfield(L, -2, "params");
        lua_setfield(L, -2, parts[p]);
    }
    return 3;
}

/* core.model_cost(cfg [, kept [, T]]) -> flops, params, parts (cfg: as core.model_new; T: the
 * sequence length, tokens with CLS, default the full one) */
static int l_model_cost_of(lua_State *L) {
    hy_xfmr_config c;
    l_read_model_config(L, 1, &c);
    if (hy_xfmr_config_check(&c) != HY_OK) return l_raise(L);
    return push_cost(L, &c, 2);
}

static int l_model_new(lua_State *L) {
    hy_xfmr_config c;
    l_read_model_config(L, 1, &c);
    if (hy_xfmr_new(l_pushmodel(L), &c) != HY_OK) return l_raise(L);
    return 1;
}

static int l_model_gc(lua_State *L) {
    l_model *u = luaL_checkudata(L, 1, L_MODEL);
    hy_xfmr_release(&u->m);
    return 0;
}

static int l_model_init(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    lua_Integer seed = luaL_checkinteger(L, 2);
    hy_xfmr_init(m, (uint64_t)seed);
    return 0;
}

static int l_model_config(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    const hy_xfmr_config *c = &m->cfg;
    lua_newtable(L);
    lua_pushstring(L, c->kind == HY_XFMR_TEXT ? "text" : "vit");
    lua_setfield(L, -2, "kind");
    for (size_t i = 0; i < HY_XFMR_N_FIELDS; i++) {
        const hy_xfmr_field *f = &hy_xfmr_fields[i];
        char w[32];
        if (f->type == HY_FIELD_SIZE || f->type == HY_FIELD_COUNT)
            lua_pushinteger(L, (lua_Integer)hy_xfmr_field_size(c, f));
        else if (f->type == HY_FIELD_FLOAT) lua_pushnumber(L, hy_xfmr_field_float(c, f));
        else if (f->type == HY_FIELD_ENUM)
            lua_pushstring(L, hy_xfmr_field_enum_name(f, hy_xfmr_field_enum(c, f), w, sizeof w));
        else lua_pushnumber(L, (lua_Number)hy_xfmr_field_rate(c, f));
        lua_setfield(L, -2, f->name);
    }
    if (c->attn_dropout == c->mlp_dropout) {   /* every model built from a config */
        lua_pushnumber(L, (lua_Number)c->attn_dropout);
        lua_setfield(L, -2, "dropout");
    }
    lua_pushinteger(L, (lua_Integer)m->T);
    lua_setfield(L, -2, "seq_len");
    hy_xfmr_costs cost = hy_xfmr_model_cost(m, m->T);
    lua_pushnumber(L, cost.flops_total);
    lua_setfield(L, -2, "flops");
    lua_pushinteger(L, (lua_Integer)cost.params_total);
    lua_setfield(L, -2, "params");
    return 1;
}

/* m:cost([kept [, T]]) -> flops, params, parts (core.model_cost of m's config) */
static int l_model_cost(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    if (m->ext) {   /* an ensemble: its extension's cost (every head of every member) */
        if (!lua_isnoneornil(L, 2)) return luaL_error(L, "cost: kept heads need a single model");
        return push_costs(L, hy_xfmr_model_cost(m, opt_seq_len(L, 3, &m->cfg)));
    }
    return push_cost(L, &m->cfg, 2);
}

static int l_model_params_count(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    lua_pushinteger(L, (lua_Integer)m->n_params);
    return 1;
}

/* m:flops(T) -> forward FLOPs of one sample at sequence length T (tokens with CLS, in
 * [1, max T]; all heads kept): hy_xfmr_cost at T, as m:config().flops is at the full T */
static int l_model_flops(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    lua_Integer T = luaL_checkinteger(L, 2);
    luaL_argcheck(L, T >= 1 && (size_t)T <= m->T, 2, "sequence length out of range");
    lua_pushnumber(L, hy_xfmr_model_cost(m, (size_t)T).flops_total);
    return 1;
}

static int l_model_param_names(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    lua_createtable(L, (int)m->n_tensors, 0);
    for (size_t i = 0; i < m->n_tensors; i++) {
        lua_pushstring(L, m->table[i].name);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* m:param(name) -> a float32 copy in its [out,in] shape */
static int l_model_param(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
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
    hy_xfmr *m = l_checkmodel(L, 1);
    int64_t n = (int64_t)m->n_params;
    hy_tensor *t = l_pushtensor(L);
    if (hy_tensor_alloc(t, HY_F32, 1, &n) != HY_OK) return l_raise(L);
    memcpy(t->data, m->params, m->n_params * sizeof(float));
    return 1;
}

static int l_model_set_params(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    hy_tensor *t = l_checktensor(L, 2);
    if (t->dtype != HY_F32 || hy_tensor_numel(t) != m->n_params)
        return luaL_error(L, "model: set_params needs float32 with %I elements (got %s with %I)",
                          (lua_Integer)m->n_params, hy_dtype_name(t->dtype),
                          (lua_Integer)hy_tensor_numel(t));
    memcpy(m->params, t->data, m->n_params * sizeof(float));
    return 0;
}

static int l_model_gates(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    int64_t shape[2] = {(int64_t)m->cfg.depth, (int64_t)m->cfg.n_heads};
    hy_tensor *t = l_pushtensor(L);
    if (hy_tensor_alloc(t, HY_F32, 2, shape) != HY_OK) return l_raise(L);
    memcpy(t->data, m->gates, m->cfg.depth * m->cfg.n_heads * sizeof(float));
    return 1;
}

static int l_model_set_gates(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
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
    hy_xfmr *m = l_checkmodel(L, 1);
    size_t layer = l_checkindex(L, 2, m->cfg.depth);
    size_t head = l_checkindex(L, 3, m->cfg.n_heads);
    float g = (float)luaL_checknumber(L, 4);
    hy_xfmr_set_gate(m, layer, head, g);
    return 0;
}

static int l_model_set_dropout(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    int on = lua_toboolean(L, 2);
    lua_Integer seed = luaL_optinteger(L, 3, 0);
    hy_xfmr_set_dropout(m, on, (uint64_t)seed);
    return 0;
}

hy_precision l_checkprecision(lua_State *L, int arg) {
    hy_precision p;
    if (hy_precision_parse(luaL_checkstring(L, arg), &p) != HY_OK) l_raise(L);
    return p;
}

int l_pushprecision(lua_State *L, hy_status st, hy_precision used) {
    if (st != HY_OK) return l_raise(L);
    lua_pushstring(L, hy_precision_name(used));
    return 1;
}

static int l_model_set_precision(lua_State *L) {
    hy_precision used = HY_PRECISION_FP32;
    hy_status st = hy_xfmr_set_precision(l_checkmodel(L, 1), l_checkprecision(L, 2), &used);
    return l_pushprecision(L, st, used);
}

/* ===== timing (cost benchmark) ===== */

static int l_model_time(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    lua_Integer B = luaL_checkinteger(L, 2), reps = luaL_checkinteger(L, 3);
    uint64_t seed = (uint64_t)luaL_optinteger(L, 4, 0);
    luaL_argcheck(L, B >= 1 && reps >= 1, 2, "batch and repetitions must be >= 1");
    luaL_argcheck(L, m->cfg.kind == HY_XFMR_VIT, 1, "timing needs an image model");
    size_t n = (size_t)B * m->cfg.channels * m->cfg.image_size * m->cfg.image_size;
    float *img = lua_newuserdatauv(L, n * sizeof(float), 0);
    float *lg = lua_newuserdatauv(L, (size_t)B * hy_xfmr_members(m) * m->cfg.n_classes *
                                  sizeof(float), 0);
    l_random_images(img, n, seed);
    if (hy_xfmr_ensure_infer(m, (size_t)B) != HY_OK) return l_raise(L);
    hy_batch in = {.images = img};
    if (hy_xfmr_infer(m, &in, (size_t)B, lg) != HY_OK) return l_raise(L);
    double t0 = hy_now();
    for (lua_Integer i = 0; i < reps; i++)
        if (hy_xfmr_infer(m, &in, (size_t)B, lg) != HY_OK) return l_raise(L);
    lua_pushnumber(L, (hy_now() - t0) / (double)reps);
    return 1;
}

void l_open_xfmr(lua_State *L) {
    static const luaL_Reg methods[] = {
        {"init", l_model_init},           {"config", l_model_config},
        {"cost", l_model_cost},
        {"params_count", l_model_params_count}, {"param_names", l_model_param_names},
        {"param", l_model_param},         {"get_params", l_model_get_params},
        {"set_params", l_model_set_params}, {"gates", l_model_gates},
        {"set_gates", l_model_set_gates}, {"set_gate", l_model_set_gate},
        {"set_dropout", l_model_set_dropout}, {"flops", l_model_flops}, {"close", l_model_gc},
        {"set_precision", l_model_set_precision}, {NULL, NULL}};
    static const luaL_Reg fns[] = {
        {"model_new", l_model_new}, {"model_time", l_model_time},
        {"model_config_fields", l_model_config_fields}, {"model_cost", l_model_cost_of},
        {NULL, NULL}};
    l_newclass(L, L_MODEL, methods, l_model_gc, l_model_gc);
    l_setfuncs(L, fns);
}
