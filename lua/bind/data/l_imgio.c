/* l_imgio.c: Lua binding of core/imgio (grey PNG files and uint8 image stacks).
 *   core.png_read(path) core.png_write(path, t) core.img_tiles(sheet, th, tw)
 *   core.img_pad(images, top, bottom, left, right [, value]) core.img_flip_v(t)
 *   core.img_invert(t) core.img_stats(t) -> mean, std
 * Every function raises on failure. */
#include "bind.h"
#include "data/imgio.h"

/* core.png_read(path) -> uint8 Tensor [H,W] (grey) */
static int l_imgio_png_read(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    hy_tensor *t = l_pushtensor(L);
    if (hy_png_read_gray(path, t) != HY_OK) return l_raise(L);
    return 1;
}

/* core.png_write(path, uint8 Tensor [H,W]) */
static int l_imgio_png_write(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    hy_tensor *t = l_checktensor(L, 2);
    if (hy_png_write_gray(path, t) != HY_OK) return l_raise(L);
    return 0;
}

/* core.img_tiles(sheet, th, tw) -> [K,th,tw] */
static int l_imgio_img_tiles(lua_State *L) {
    hy_tensor *s = l_checktensor(L, 1);
    lua_Integer th = luaL_checkinteger(L, 2), tw = luaL_checkinteger(L, 3);
    hy_tensor *t = l_pushtensor(L);
    if (hy_img_tiles(s, (int64_t)th, (int64_t)tw, t) != HY_OK) return l_raise(L);
    return 1;
}

/* core.img_pad(images, top, bottom, left, right [, value=0]) */
static int l_imgio_img_pad(lua_State *L) {
    hy_tensor *s = l_checktensor(L, 1);
    int64_t p[4];
    for (int i = 0; i < 4; i++) p[i] = (int64_t)luaL_checkinteger(L, 2 + i);
    lua_Integer v = luaL_optinteger(L, 6, 0);
    luaL_argcheck(L, v >= 0 && v <= 255, 6, "pad value must be in [0, 255]");
    hy_tensor *t = l_pushtensor(L);
    if (hy_img_pad(s, p[0], p[1], p[2], p[3], (uint8_t)v, t) != HY_OK) return l_raise(L);
    return 1;
}

static int l_imgio_img_flip_v(lua_State *L) {
    hy_tensor *s = l_checktensor(L, 1);
    hy_tensor *t = l_pushtensor(L);
    if (hy_img_flip_v(s, t) != HY_OK) return l_raise(L);
    return 1;
}

static int l_imgio_img_invert(lua_State *L) {
    hy_tensor *s = l_checktensor(L, 1);
    hy_tensor *t = l_pushtensor(L);
    if (hy_img_invert(s, t) != HY_OK) return l_raise(L);
    return 1;
}

/* core.img_stats(uint8 Tensor) -> mean, std of pixel/255 */
static int l_imgio_img_stats(lua_State *L) {
    hy_tensor *s = l_checktensor(L, 1);
    double m, sd;
    if (hy_img_stats(s, &m, &sd) != HY_OK) return l_raise(L);
    lua_pushnumber(L, m);
    lua_pushnumber(L, sd);
    return 2;
}

void l_open_imgio(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"png_read", l_imgio_png_read},
        {"png_write", l_imgio_png_write},
        {"img_tiles", l_imgio_img_tiles},
        {"img_pad", l_imgio_img_pad},
        {"img_flip_v", l_imgio_img_flip_v},
        {"img_invert", l_imgio_img_invert},
        {"img_stats", l_imgio_img_stats},
        {NULL, NULL}};
    l_setfuncs(L, fns);
}
