/* l_ckpt.c: Lua binding of core/ckpt (model checkpoints, DESIGN §2 schema).
 *   (core.model_load, which also loads ensembles, is l_ens.c's)
 *   m:save(path [, meta])   atomic; meta: extra /meta attributes (strings, numbers, booleans;
 *                           l_checkmeta in l_h5.c)
 *   m:load_encoder(path) -> n   train.init: every tensor but the classifier head, from the
 *                           checkpoint at path (hy_ckpt_read_encoder); n tensors read */
#include "bind.h"
#include "nn/ckpt.h"

/* The file is boxed (l_pushh5) before it is created: an error discards it. */
static int l_model_save(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    const char *path = luaL_checkstring(L, 2);
    l_checkmeta(L, 3, "model");
    lua_settop(L, 3);   /* meta stays at 3 (nil when omitted): the box goes to 4 */
    hy_h5 *f = l_pushh5(L);
    if (hy_h5_create(f, path) != HY_OK) return l_raise(L);
    if (hy_ckpt_write(f, m, NULL, 0) != HY_OK || l_writemeta(L, 3, f) != HY_OK) {
        hy_h5_close(f);
        return l_raise(L);
    }
    if (hy_h5_commit(f) != HY_OK) return l_raise(L);
    return 0;
}

static int l_model_load_encoder(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    const char *path = luaL_checkstring(L, 2);
    size_t n = 0;
    if (hy_ckpt_read_encoder(path, m, &n) != HY_OK) return l_raise(L);
    lua_pushinteger(L, (lua_Integer)n);
    return 1;
}

void l_open_ckpt(lua_State *L) {
    static const luaL_Reg methods[] = {{"save", l_model_save},
                                       {"load_encoder", l_model_load_encoder}, {NULL, NULL}};
    l_addmethods(L, L_MODEL, methods);
}
