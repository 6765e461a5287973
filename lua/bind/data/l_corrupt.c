/* l_corrupt.c: Lua binding of core/corrupt (image corruptions at severities 1-5, noise images).
 *   core.corrupt(images, name, severity, seed) core.corruptions() core.noise_images(...)
 * Every function raises on failure. */
#include "bind.h"
#include "data/corrupt.h"

/* core.corrupt(images, name, severity, seed) -> images */
static int l_corrupt_apply(lua_State *L) {
    hy_tensor *s = l_checktensor(L, 1);
    const char *name = luaL_checkstring(L, 2);
    lua_Integer sev = luaL_checkinteger(L, 3), seed = luaL_checkinteger(L, 4);
    hy_tensor *t = l_pushtensor(L);
    if (hy_corrupt_apply(name, (int)(sev < -1000 ? -1000 : sev > 1000 ? 1000 : sev),
                         (uint64_t)seed, s, t) != HY_OK)
        return l_raise(L);
    return 1;
}

/* core.corruptions() -> { {name=, describe=, params={p1..p5}}, ... } */
static int l_corrupt_list(lua_State *L) {
    lua_createtable(L, (int)hy_corrupt_count(), 0);
    for (size_t i = 0; i < hy_corrupt_count(); i++) {
        lua_createtable(L, 0, 3);
        lua_pushstring(L, hy_corrupt_name(i));
        lua_setfield(L, -2, "name");
        lua_pushstring(L, hy_corrupt_describe(i));
        lua_setfield(L, -2, "describe");
        lua_createtable(L, HY_CORRUPT_SEVERITIES, 0);
        for (int s = 1; s <= HY_CORRUPT_SEVERITIES; s++) {
            lua_pushnumber(L, hy_corrupt_param(i, s));
            lua_rawseti(L, -2, s);
        }
        lua_setfield(L, -2, "params");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* core.noise_images(kind, n, h, w, seed [, mean, std]) -> uint8 [n,h,w] */
static int l_corrupt_noise_images(lua_State *L) {
    const char *kind = luaL_checkstring(L, 1);
    lua_Integer n = luaL_checkinteger(L, 2), h = luaL_checkinteger(L, 3), w = luaL_checkinteger(L, 4);
    lua_Integer seed = luaL_checkinteger(L, 5);
    double mean = luaL_optnumber(L, 6, 0.5), sd = luaL_optnumber(L, 7, 0.25);
    luaL_argcheck(L, n >= 0 && h >= 1 && w >= 1, 2, "sizes must be n >= 0, h >= 1, w >= 1");
    hy_tensor *t = l_pushtensor(L);
    if (hy_corrupt_noise_images(kind, (int64_t)n, (int64_t)h, (int64_t)w, mean, sd,
                                (uint64_t)seed, t) != HY_OK)
        return l_raise(L);
    return 1;
}

void l_open_corrupt(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"corrupt", l_corrupt_apply},
        {"corruptions", l_corrupt_list},
        {"noise_images", l_corrupt_noise_images},
        {NULL, NULL}};
    l_setfuncs(L, fns);
}
