/* l_core.c: luaopen_hydra_core builds the hydra.core table from every l_<module>.c, and holds the
 * helpers shared by all bindings (l_raise, l_checkindex, the class helpers of bind.h). */
#include <string.h>

#include "bind.h"
#include "tensor/rng.h"

int l_raise(lua_State *L) { return luaL_error(L, "%s", hy_errmsg()); }

size_t l_checkindex(lua_State *L, int arg, size_t n) {
    lua_Integer i = luaL_checkinteger(L, arg);
    if (i < 1 || (lua_Unsigned)i > n)
        luaL_argerror(L, arg, lua_pushfstring(L, "index %I out of range [1, %I]", i,
                                              (lua_Integer)n));
    return (size_t)(i - 1);
}

void l_setfuncs(lua_State *L, const luaL_Reg *fns) { luaL_setfuncs(L, fns, 0); }

void l_random_images(float *x, size_t n, uint64_t seed) {
    hy_rng r;
    hy_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = (float)hy_rng_normal(&r);
}

void l_newclass(lua_State *L, const char *name, const luaL_Reg *methods, lua_CFunction gc,
                lua_CFunction close) {
    luaL_newmetatable(L, name);
    if (methods) {
        lua_newtable(L);
        luaL_setfuncs(L, methods, 0);
        lua_setfield(L, -2, "__index");
    }
    if (gc) {
        lua_pushcfunction(L, gc);
        lua_setfield(L, -2, "__gc");
    }
    if (close) {
        lua_pushcfunction(L, close);
        lua_setfield(L, -2, "__close");
    }
    lua_pop(L, 1);
}

void l_addmethods(lua_State *L, const char *name, const luaL_Reg *methods) {
    luaL_getmetatable(L, name);
    lua_getfield(L, -1, "__index");
    luaL_setfuncs(L, methods, 0);
    lua_pop(L, 2);
}

void l_setmeta(lua_State *L, const char *name, const luaL_Reg *meta) {
    luaL_getmetatable(L, name);
    luaL_setfuncs(L, meta, 0);
    lua_pop(L, 1);
}

/* Pushes the value of dotted key `key` (its first part skipped) of the table at t. */
static int push_key(lua_State *L, int t, const char *key) {
    t = lua_absindex(L, t);
    const char *p = strchr(key, '.');
    luaL_argcheck(L, p != NULL, 1, "config key without a section");
    lua_pushvalue(L, t);
    while (p) {
        const char *s = p + 1;
        p = strchr(s, '.');
        size_t n = p ? (size_t)(p - s) : strlen(s);
        if (!lua_istable(L, -1)) {
            lua_pushnil(L);   /* a missing section: the key is missing */
            lua_replace(L, -2);
            break;
        }
        lua_pushlstring(L, s, n);
        lua_gettable(L, -2);
        lua_replace(L, -2);
    }
    return lua_type(L, -1);
}

static void key_error(lua_State *L, const char *key, const char *what) {
    luaL_error(L, "%s must be %s (got %s)", key, what, luaL_typename(L, -1));
}

int l_cfghas(lua_State *L, int t, const char *key) {
    int has = push_key(L, t, key) != LUA_TNIL;
    lua_pop(L, 1);
    return has;
}

size_t l_cfgsize(lua_State *L, int t, const char *key) {
    push_key(L, t, key);
    int ok = 0;
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    if (!ok || v < 0 || lua_type(L, -1) != LUA_TNUMBER)
        key_error(L, key, "a non-negative integer");
    lua_pop(L, 1);
    return (size_t)v;
}

double l_cfgnum(lua_State *L, int t, const char *key) {
    if (push_key(L, t, key) != LUA_TNUMBER) key_error(L, key, "a number");
    double v = lua_tonumber(L, -1);
    lua_pop(L, 1);
    return v;
}

int l_cfgbool(lua_State *L, int t, const char *key) {
    if (push_key(L, t, key) != LUA_TBOOLEAN) key_error(L, key, "a boolean");
    int v = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

const char *l_cfgstr(lua_State *L, int t, const char *key) {
    if (push_key(L, t, key) != LUA_TSTRING) key_error(L, key, "a string");
    const char *v = lua_tostring(L, -1);   /* the table holds it */
    lua_pop(L, 1);
    return v;
}

int luaopen_hydra_core(lua_State *L) {
    lua_newtable(L);
    l_open_base(L);
    l_open_tensor(L);
    l_open_h5(L);
    l_open_safetensors(L);
    l_open_config(L);
    l_open_hash(L);
    l_open_idx(L);
    l_open_imgio(L);
    l_open_imgprep(L);
    l_open_wordpiece(L);
    l_open_sample(L);
    l_open_glyph(L);
    l_open_corrupt(L);
    l_open_text(L);
    l_open_metrics(L);
    l_open_xfmr(L);     /* the Model class, before l_ckpt and l_train add methods to it */
    l_open_loader(L);
    l_open_ckpt(L);
    l_open_train(L);
    l_open_ens(L);
    l_open_mlm(L);
    l_open_gemm(L);
    l_open_prune(L);
    l_open_fused(L);
    l_open_vilu(L);
    l_open_mimo(L);
    l_open_hvp(L);
    l_open_proc(L);
    l_open_spawn(L);
    l_open_prof(L);
    l_open_import(L);
    l_open_json(L);
    return 1;
}
