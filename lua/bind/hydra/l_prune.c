/* l_prune.c: Lua binding of core/prune (head importance, circuits, member gates).
 *   core.prune_members(model, prune, hydra, args) -> gates [M,L,H] float32,
 *                                      scores [M,L,H] float32, overlap [M,M] float64
 *     prune, hydra: the resolved config sections, read by their keys: prune.method,
 *           prune.normalize, prune.batch_size (taylor) or prune.circuit_batch_size (circuit),
 *           hydra.members (M), hydra.diversity.bootstrap, hydra.diversity.overlap_penalty
 *     args: keep (M lists of L counts: hydra.keep_heads, or hydra.diversity.keep_counts[m];
 *           hydra.prune.keep_table), objectives (M strings), seed,
 *           calib (Dataset) [+ calib_rows (int64 Tensor of 0-based rows)], id (Dataset),
 *           ood (Dataset or nil), progress (function(done, total) called after every masked
 *           evaluation of a circuit search; its errors are ignored)
 *   core.prune_objective(model, id, ood|nil, batch_size) -> nll, auroc|nil
 *     (batch_size: prune.circuit_batch_size in the pipeline)
 *   core.prune_check_gates(gates, L, H)     raises the validation message
 *   core.prune_read_gates(path, L, H) -> gates [M,L,H]   (hy_prune_read_gates)
 *   core.prune_restore(model, base_params)  base_params: float32 Tensor of the flat block
 * model is a hydra.Model (l_xfmr.c), datasets hydra.Dataset (l_loader.c). Scratch arrays are
 * Lua userdata: nothing leaks when an argument check raises. */
#include <string.h>

#include "bind.h"
#include "hydra/prune.h"

static hy_dataset *opt_dataset(lua_State *L, int t, const char *key, int required) {
    lua_getfield(L, t, key);
    hy_dataset *d = NULL;
    if (!lua_isnil(L, -1)) d = l_checkdataset(L, -1);
    else if (required) luaL_error(L, "prune: missing argument '%s'", key);
    lua_pop(L, 1);
    return d;
}

static void *scratch(lua_State *L, size_t n) {
    void *p = lua_newuserdatauv(L, n ? n : 1, 0);
    memset(p, 0, n ? n : 1);
    return p;
}

/* the C side of opts.progress: calls the Lua function (done, total) in protected mode, so an
 * error in it cannot longjmp through the core; such an error is dropped (the display is
 * cosmetic) */
typedef struct progress_ctx {
    lua_State *L;
    int fn;     /* stack index of the Lua function */
} progress_ctx;

static void call_progress(void *vctx, size_t done, size_t total) {
    progress_ctx *c = vctx;
    lua_pushvalue(c->L, c->fn);
    lua_pushinteger(c->L, (lua_Integer)done);
    lua_pushinteger(c->L, (lua_Integer)total);
    if (lua_pcall(c->L, 2, 0, 0) != LUA_OK) lua_pop(c->L, 1);
}

static int l_prune_members(lua_State *L) {
    hy_xfmr *m = l_checksingle(L, 1, "prune");
    luaL_checktype(L, 2, LUA_TTABLE);
    luaL_checktype(L, 3, LUA_TTABLE);
    luaL_checktype(L, 4, LUA_TTABLE);
    size_t NL = m->cfg.depth, NH = m->cfg.n_heads;
    hy_prune_config pc;
    memset(&pc, 0, sizeof pc);
    const char *method = l_cfgstr(L, 2, "prune.method");
    if (strcmp(method, "taylor") == 0) pc.method = HY_PRUNE_TAYLOR;
    else if (strcmp(method, "circuit") == 0) pc.method = HY_PRUNE_CIRCUIT;
    else return luaL_error(L, "prune: prune.method must be taylor or circuit (got '%s')", method);
    size_t M = l_cfgsize(L, 3, "hydra.members");
    if (M == 0) return luaL_error(L, "prune: hydra.members must be >= 1 (got 0)");
    lua_getfield(L, 4, "keep");
    if (!lua_istable(L, -1) || (size_t)luaL_len(L, -1) != M)
        return luaL_error(L, "prune: keep must list the heads kept by each of the hydra.members "
                          "= %d members (hydra.keep_heads)", (int)M);
    int kt = lua_gettop(L);
    size_t *keep = scratch(L, M * NL * sizeof(size_t));
    hy_objective *objs = scratch(L, M * sizeof(hy_objective));
    for (size_t k = 0; k < M; k++) {
        lua_geti(L, kt, (lua_Integer)k + 1);
        if (!lua_istable(L, -1) || (size_t)luaL_len(L, -1) != NL)
            return luaL_error(L, "prune: hydra.keep_heads of member %d must list %d counts (one "
                              "per layer)", (int)k + 1, (int)NL);
        for (size_t l = 0; l < NL; l++) {
            lua_geti(L, -1, (lua_Integer)l + 1);
            lua_Integer v = luaL_checkinteger(L, -1);
            if (v < 0)   /* the core checks the range [1, NH] with this message */
                return luaL_error(L, "prune: member %d keeps %d heads in layer %d (expected 1 "
                                  "to %d)", (int)k + 1, (int)v, (int)l + 1, (int)NH);
            keep[k * NL + l] = (size_t)v;
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    lua_getfield(L, 4, "objectives");
    if (!lua_istable(L, -1) || (size_t)luaL_len(L, -1) != M)
        return luaL_error(L, "prune: objectives must list one objective per member");
    for (size_t k = 0; k < M; k++) {
        lua_geti(L, -1, (lua_Integer)k + 1);
        if (hy_objective_parse(luaL_checkstring(L, -1), &objs[k]) != HY_OK) return l_raise(L);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    pc.members = M;
    pc.keep = keep;
    pc.objectives = objs;
    pc.bootstrap = l_cfgbool(L, 3, "hydra.diversity.bootstrap");
    pc.overlap_penalty = l_cfgnum(L, 3, "hydra.diversity.overlap_penalty");
    pc.normalize = l_cfgbool(L, 2, "prune.normalize");
    pc.batch_size = pc.method == HY_PRUNE_TAYLOR ? l_cfgsize(L, 2, "prune.batch_size")
                                                 : l_cfgsize(L, 2, "prune.circuit_batch_size");
    if (pc.batch_size < 1)
        return luaL_error(L, "prune: %s must be >= 1 (got 0)",
                          pc.method == HY_PRUNE_TAYLOR ? "prune.batch_size"
                                                       : "prune.circuit_batch_size");
    lua_getfield(L, 4, "seed");
    pc.seed = (uint64_t)luaL_checkinteger(L, -1);
    lua_pop(L, 1);
    hy_dataset *calib = opt_dataset(L, 4, "calib", pc.method == HY_PRUNE_TAYLOR);
    hy_dataset *id = opt_dataset(L, 4, "id", pc.method == HY_PRUNE_CIRCUIT);
    hy_dataset *ood = opt_dataset(L, 4, "ood", 0);
    hy_subset cs = {calib, NULL, calib ? calib->n : 0}, is = {id, NULL, id ? id->n : 0};
    hy_subset os = {ood, NULL, ood ? ood->n : 0};
    lua_getfield(L, 4, "calib_rows");
    if (!lua_isnil(L, -1)) {
        hy_tensor *r = l_checktensor(L, -1);
        if (r->dtype != HY_I64 || r->ndim != 1)
            return luaL_error(L, "prune: calib_rows must be a 1-d int64 tensor");
        cs.idx = r->data;
        cs.n = (size_t)r->shape[0];
    }
    progress_ctx pctx = {L, 0};
    lua_getfield(L, 4, "progress");
    if (lua_isfunction(L, -1)) {
        pctx.fn = lua_gettop(L);   /* stays on the stack during the call */
        pc.progress = call_progress;
        pc.progress_ctx = &pctx;
    }
    /* the rows tensor stays referenced on the stack during the call */
    int64_t sh[3] = {(int64_t)M, (int64_t)NL, (int64_t)NH}, so[2] = {(int64_t)M, (int64_t)M};
    hy_tensor *g = l_pushtensor(L);
    if (hy_tensor_alloc(g, HY_F32, 3, sh) != HY_OK) return l_raise(L);
    hy_tensor *s = l_pushtensor(L);
    if (hy_tensor_alloc(s, HY_F32, 3, sh) != HY_OK) return l_raise(L);
    hy_tensor *o = l_pushtensor(L);
    if (hy_tensor_alloc(o, HY_F64, 2, so) != HY_OK) return l_raise(L);
    if (hy_prune_members(m, calib ? &cs : NULL, id ? &is : NULL, ood ? &os : NULL, &pc, g->data,
                         s->data, o->data) != HY_OK)
        return l_raise(L);
    return 3;
}

static int l_prune_objective(lua_State *L) {
    hy_xfmr *m = l_checksingle(L, 1, "prune");
    hy_dataset *id = l_checkdataset(L, 2);
    hy_dataset *ood = lua_isnoneornil(L, 3) ? NULL : l_checkdataset(L, 3);
    lua_Integer bs = luaL_checkinteger(L, 4);
    luaL_argcheck(L, bs >= 1, 4, "batch size must be >= 1");
    hy_subset is = {id, NULL, id->n}, os = {ood, NULL, ood ? ood->n : 0};
    double nll = 0.0, auc = 0.0;
    if (hy_prune_objective(m, &is, ood ? &os : NULL, (size_t)bs, &nll, ood ? &auc : NULL) != HY_OK)
        return l_raise(L);
    lua_pushnumber(L, nll);
    if (ood) lua_pushnumber(L, auc);
    else lua_pushnil(L);
    return 2;
}

static int l_prune_check_gates(lua_State *L) {
    hy_tensor *t = l_checktensor(L, 1);
    lua_Integer nl = luaL_checkinteger(L, 2), nh = luaL_checkinteger(L, 3);
    luaL_argcheck(L, t->dtype == HY_F32, 1, "gates must be float32");
    luaL_argcheck(L, nl >= 1 && nh >= 1, 2, "layers and heads must be >= 1");
    if (hy_prune_check_gates(t->data, t->ndim, t->shape, (size_t)nl, (size_t)nh) != HY_OK)
        return l_raise(L);
    return 0;
}

static int l_prune_read_gates(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    lua_Integer nl = luaL_checkinteger(L, 2), nh = luaL_checkinteger(L, 3);
    luaL_argcheck(L, nl >= 1 && nh >= 1, 2, "layers and heads must be >= 1");
    hy_tensor *t = l_pushtensor(L);
    if (hy_prune_read_gates(path, (size_t)nl, (size_t)nh, t) != HY_OK) return l_raise(L);
    return 1;
}

static int l_prune_restore(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    hy_tensor *b = l_checktensor(L, 2);
    if (b->dtype != HY_F32 || hy_tensor_numel(b) != m->n_params)
        return luaL_error(L, "prune: base parameters must be a float32 tensor of %d values "
                          "(got %d)", (int)m->n_params, (int)hy_tensor_numel(b));
    hy_prune_restore(m, b->data);
    return 0;
}

void l_open_prune(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"prune_members", l_prune_members}, {"prune_objective", l_prune_objective},
        {"prune_check_gates", l_prune_check_gates}, {"prune_restore", l_prune_restore},
        {"prune_read_gates", l_prune_read_gates},
        {NULL, NULL}};
    l_setfuncs(L, fns);
}
