/* l_fused.c: Lua binding of core/fused (the fused Hydra model).
 *   core.fused_new({model, ...}, fuse) -> hydra.Fused (fuse: the resolved fuse section, read by
 *     its keys fuse.mlp, fuse.ln, fuse.embed, fuse.head; models are hydra.Model with binary gates)
 *   core.fused_load(path) -> hydra.Fused
 *   f:save(path [, meta])  f:predict(ds, B) -> member_logits [M,N,K], probs [N,K], member_probs [M,N,K]
 *   f:info() -> { members, mlp, ln, embed, head, params, flops (at the full sequence length
 *     seq_len), seq_len, kept = { {k per layer}... } }
 *   f:flops(T) -> forward FLOPs of one sample at sequence length T (hy_fused_flops)
 *   f:forward(inputs) -> member logits [M,B,K]: inputs.images float32 [B,C,H,W], or inputs.ids,
 *                        lengths (and type_ids) of a text model (as m:forward's)
 *   f:gates() -> float32 [M,L,H]   f:close()  (also __gc / __close; idempotent)
 *   f:set_precision("fp32" | "bf16") -> the precision in force (hy_fused_set_precision)
 *   core.fused_time(f, B, reps, seed) -> seconds per forward of a batch of B random images
 *     (after one warm-up), for the cost benchmark (core.model_time: l_xfmr.c). */
#include <string.h>

#include "bind.h"
#include "hydra/fused.h"

#define L_FUSED "hydra.Fused"

typedef struct l_fused { hy_fused f; } l_fused;

static hy_fused *check_fused(lua_State *L, int arg) {
    l_fused *u = luaL_checkudata(L, arg, L_FUSED);
    if (!u->f.params) luaL_error(L, "fused: attempt to use a closed model");
    return &u->f;
}

static l_fused *push_fused(lua_State *L) {
    l_fused *u = lua_newuserdatauv(L, sizeof *u, 0);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, L_FUSED);
    return u;
}

static int l_fused_new(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    size_t M = (size_t)luaL_len(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    hy_fuse_config fc;
    const char *keys[4] = {"fuse.mlp", "fuse.ln", "fuse.embed", "fuse.head"};
    hy_fuse_mode *dst[4] = {&fc.mlp, &fc.ln, &fc.embed, &fc.head};
    for (int i = 0; i < 4; i++)
        if (hy_fuse_mode_parse(keys[i] + 5, l_cfgstr(L, 2, keys[i]), dst[i]) != HY_OK)
            return l_raise(L);
    hy_xfmr **ms = lua_newuserdatauv(L, (M ? M : 1) * sizeof *ms, 0);
    for (size_t m = 0; m < M; m++) {
        lua_geti(L, 1, (lua_Integer)m + 1);
        ms[m] = l_checksingle(L, -1, "fuse");
        lua_pop(L, 1);
    }
    l_fused *u = push_fused(L);
    if (hy_fused_build(&u->f, ms, M, &fc) != HY_OK) return l_raise(L);
    return 1;
}

static int l_fused_load(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    l_fused *u = push_fused(L);
    if (hy_fused_load(&u->f, path) != HY_OK) return l_raise(L);
    return 1;
}

static int l_fused_gc(lua_State *L) {
    l_fused *u = luaL_checkudata(L, 1, L_FUSED);
    hy_fused_release(&u->f);
    return 0;
}

/* f:save(path [, meta]): meta = { key = string|number|boolean } written as /meta attributes
 * (l_checkmeta); the file is boxed (l_pushh5) before it is created: an error discards it. */
static int l_fused_save(lua_State *L) {
    hy_fused *f = check_fused(L, 1);
    const char *path = luaL_checkstring(L, 2);
    l_checkmeta(L, 3, "fused");
    lua_settop(L, 3);   /* meta stays at 3 (nil when omitted): the box goes to 4 */
    hy_h5 *file = l_pushh5(L);
    if (hy_h5_create(file, path) != HY_OK) return l_raise(L);
    if (hy_fused_write(file, f) != HY_OK || l_writemeta(L, 3, file) != HY_OK) {
        hy_h5_close(file);
        return l_raise(L);
    }
    if (hy_h5_commit(file) != HY_OK) return l_raise(L);
    return 0;
}

static int l_fused_predict(lua_State *L) {
    hy_fused *f = check_fused(L, 1);
    hy_dataset *ds = l_checkdataset(L, 2);
    lua_Integer bs = luaL_checkinteger(L, 3);
    luaL_argcheck(L, bs >= 1, 3, "batch size must be >= 1");
    int64_t M = (int64_t)f->M, N = (int64_t)ds->n, K = (int64_t)f->cfg.n_classes;
    int64_t s3[3] = {M, N, K}, s2[2] = {N, K};
    hy_tensor *ml = l_pushtensor(L);
    if (hy_tensor_alloc(ml, HY_F32, 3, s3) != HY_OK) return l_raise(L);
    hy_tensor *pr = l_pushtensor(L);
    if (hy_tensor_alloc(pr, HY_F32, 2, s2) != HY_OK) return l_raise(L);
    hy_tensor *mp = l_pushtensor(L);
    if (hy_tensor_alloc(mp, HY_F32, 3, s3) != HY_OK) return l_raise(L);
    if (hy_fused_predict(f, ds, (size_t)bs, ml->data, pr->data, mp->data) != HY_OK)
        return l_raise(L);
    return 3;
}

static int l_fused_info(lua_State *L) {
    hy_fused *f = check_fused(L, 1);
    lua_createtable(L, 0, 9);
    lua_pushinteger(L, (lua_Integer)f->M);
    lua_setfield(L, -2, "members");
    lua_pushstring(L, hy_fuse_mode_name(f->fuse.mlp));
    lua_setfield(L, -2, "mlp");
    lua_pushstring(L, hy_fuse_mode_name(f->fuse.ln));
    lua_setfield(L, -2, "ln");
    lua_pushstring(L, hy_fuse_mode_name(f->fuse.embed));
    lua_setfield(L, -2, "embed");
    lua_pushstring(L, hy_fuse_mode_name(f->fuse.head));
    lua_setfield(L, -2, "head");
    lua_pushinteger(L, (lua_Integer)hy_fused_params(f));
    lua_setfield(L, -2, "params");
    lua_pushnumber(L, hy_fused_flops(f, f->T));
    lua_setfield(L, -2, "flops");
    lua_pushinteger(L, (lua_Integer)f->T);
    lua_setfield(L, -2, "seq_len");
    lua_createtable(L, (int)f->M, 0);
    for (size_t m = 0; m < f->M; m++) {
        lua_createtable(L, (int)f->cfg.depth, 0);
        for (size_t l = 0; l < f->cfg.depth; l++) {
            lua_pushinteger(L, (lua_Integer)f->kept[m * f->cfg.depth + l]);
            lua_rawseti(L, -2, (lua_Integer)l + 1);
        }
        lua_rawseti(L, -2, (lua_Integer)m + 1);
    }
    lua_setfield(L, -2, "kept");
    return 1;
}

/* f:flops(T) -> forward FLOPs of one sample at sequence length T (tokens with CLS, in
 * [1, seq_len]): hy_fused_flops at T, as f:info().flops is at the full T */
static int l_fused_flops(lua_State *L) {
    hy_fused *f = check_fused(L, 1);
    lua_Integer T = luaL_checkinteger(L, 2);
    luaL_argcheck(L, T >= 1 && (size_t)T <= f->T, 2, "sequence length out of range");
    lua_pushnumber(L, hy_fused_flops(f, (size_t)T));
    return 1;
}

static int l_fused_gates(lua_State *L) {
    hy_fused *f = check_fused(L, 1);
    int64_t sh[3] = {(int64_t)f->M, (int64_t)f->cfg.depth, (int64_t)f->cfg.n_heads};
    hy_tensor *t = l_pushtensor(L);
    if (hy_tensor_alloc(t, HY_F32, 3, sh) != HY_OK) return l_raise(L);
    memcpy(t->data, f->head_gates, hy_tensor_nbytes(t));
    return 1;
}

/* ===== timing (cost benchmark) ===== */

/* f:forward(inputs) -> member logits float32 [M,B,K]; inputs as m:forward's (l_checkinputs:
 * images, or ids, lengths and type_ids). */
static int l_fused_forward(lua_State *L) {
    hy_fused *f = check_fused(L, 1);
    const hy_xfmr_config *c = &f->cfg;
    hy_batch in;
    size_t B = l_checkinputs(L, 2, c, "fused: forward", &in);
    int64_t shape[3] = {(int64_t)f->M, (int64_t)B, (int64_t)c->n_classes};
    hy_tensor *out = l_pushtensor(L);
    if (hy_tensor_alloc(out, HY_F32, 3, shape) != HY_OK) return l_raise(L);
    if ((f->B_cap < B || !f->acts) && hy_fused_alloc_acts(f, B) != HY_OK) return l_raise(L);
    if (hy_fused_forward(f, &in, B, out->data) != HY_OK) return l_raise(L);
    return 1;
}

static int l_fused_time(lua_State *L) {
    hy_fused *f = check_fused(L, 1);
    lua_Integer B = luaL_checkinteger(L, 2), reps = luaL_checkinteger(L, 3);
    uint64_t seed = (uint64_t)luaL_optinteger(L, 4, 0);
    luaL_argcheck(L, B >= 1 && reps >= 1, 2, "batch and repetitions must be >= 1");
    luaL_argcheck(L, f->cfg.kind == HY_XFMR_VIT, 1, "timing needs an image model");
    size_t n = (size_t)B * f->cfg.channels * f->cfg.image_size * f->cfg.image_size;
    float *img = lua_newuserdatauv(L, n * sizeof(float), 0);
    float *lg = lua_newuserdatauv(L, (size_t)B * f->M * f->cfg.n_classes * sizeof(float), 0);
    l_random_images(img, n, seed);
    if (f->B_cap < (size_t)B && hy_fused_alloc_acts(f, (size_t)B) != HY_OK) return l_raise(L);
    hy_batch in = {.images = img};
    if (hy_fused_forward(f, &in, (size_t)B, lg) != HY_OK) return l_raise(L);
    double t0 = hy_now();
    for (lua_Integer i = 0; i < reps; i++)
        if (hy_fused_forward(f, &in, (size_t)B, lg) != HY_OK) return l_raise(L);
    lua_pushnumber(L, (hy_now() - t0) / (double)reps);
    return 1;
}

static int l_fused_set_precision(lua_State *L) {
    hy_precision used = HY_PRECISION_FP32;
    hy_status st = hy_fused_set_precision(check_fused(L, 1), l_checkprecision(L, 2), &used);
    return l_pushprecision(L, st, used);
}

void l_open_fused(lua_State *L) {
    static const luaL_Reg methods[] = {
        {"save", l_fused_save}, {"predict", l_fused_predict}, {"info", l_fused_info},
        {"forward", l_fused_forward},
        {"gates", l_fused_gates}, {"flops", l_fused_flops}, {"close", l_fused_gc},
        {"set_precision", l_fused_set_precision}, {NULL, NULL}};
    static const luaL_Reg fns[] = {
        {"fused_new", l_fused_new}, {"fused_load", l_fused_load}, {"fused_time", l_fused_time},
        {NULL, NULL}};
    l_newclass(L, L_FUSED, methods, l_fused_gc, l_fused_gc);
    l_setfuncs(L, fns);
}
