/* l_idx.c: Lua binding of core/idx (MNIST-style idx files, optionally gzipped).
 *   core.idx_read(path) -> Tensor     core.idx_write(path, tensor [, gzip])
 * Every function raises on failure. */
#include "bind.h"
#include "data/idx.h"

/* core.idx_read(path) -> Tensor */
static int l_idx_read(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    hy_tensor *t = l_pushtensor(L);
    if (hy_idx_read(path, t) != HY_OK) return l_raise(L);
    return 1;
}

/* core.idx_write(path, tensor [, gzip]) */
static int l_idx_write(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    hy_tensor *t = l_checktensor(L, 2);
    if (hy_idx_write(path, t, lua_toboolean(L, 3)) != HY_OK) return l_raise(L);
    return 0;
}

void l_open_idx(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"idx_read", l_idx_read},
        {"idx_write", l_idx_write},
        {NULL, NULL}};
    l_setfuncs(L, fns);
}
