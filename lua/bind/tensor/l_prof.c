/* l_prof.c: Lua binding of core/prof, the per-kernel time breakdown of the real engine, for
 * `make bench` (experiments/bench.lua):
 *   core.prof_enable(on)   switches the kernel timers on or off (off by default)
 *   core.prof_reset()      zeroes every class
 *   core.prof_read()  ->   array in class order of { name=, ms=, calls=, gflop= } accumulated
 *                          since the last reset (gflop: GEMM FLOPs / 1e9, 0 for other classes)
 * The timers sit inside the kernels the real forward, backward and optimizer step call (see
 * prof.h for the classes); what they do not cover is the caller's measured time minus the sum. */
#include "bind.h"
#include "tensor/prof.h"

static int l_prof_enable(lua_State *L) {
    luaL_checktype(L, 1, LUA_TBOOLEAN);
    hy_prof_enable(lua_toboolean(L, 1));
    return 0;
}

static int l_prof_reset(lua_State *L) {
    (void)L;
    hy_prof_reset();
    return 0;
}

static int l_prof_read(lua_State *L) {
    hy_prof_entry e[HY_PROF_N];
    hy_prof_read(e);
    lua_createtable(L, HY_PROF_N, 0);
    for (int k = 0; k < HY_PROF_N; k++) {
        lua_createtable(L, 0, 4);
        lua_pushstring(L, hy_prof_name((hy_prof_kind)k));
        lua_setfield(L, -2, "name");
        lua_pushnumber(L, (lua_Number)e[k].ns / 1e6);
        lua_setfield(L, -2, "ms");
        lua_pushinteger(L, (lua_Integer)e[k].calls);
        lua_setfield(L, -2, "calls");
        lua_pushnumber(L, (lua_Number)e[k].flops / 1e9);
        lua_setfield(L, -2, "gflop");
        lua_rawseti(L, -2, k + 1);
    }
    return 1;
}

void l_open_prof(lua_State *L) {
    static const luaL_Reg fns[] = {{"prof_enable", l_prof_enable}, {"prof_reset", l_prof_reset},
                                   {"prof_read", l_prof_read}, {NULL, NULL}};
    l_setfuncs(L, fns);
}
