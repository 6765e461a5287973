/* l_glyph.c: Lua binding of core/glyph (letters rendered from font files, 28x28 uint8).
 *   core.glyph_render(font, letter [, params]) core.glyph_render_set(fonts, letters, per, seed
 *   [, jitter]) -> images, letter, font
 * Every function raises on failure. */
#include "bind.h"
#include "data/glyph.h"

static double optnumfield(lua_State *L, int arg, const char *key, double dflt) {
    lua_getfield(L, arg, key);
    double v = lua_isnil(L, -1) ? dflt : luaL_checknumber(L, -1);
    lua_pop(L, 1);
    return v;
}

/* core.glyph_render(font, letter, {scale=, rotation=, shift_x=, shift_y=, bold=}) -> [28,28] */
static int l_glyph_render(lua_State *L) {
    const char *font = luaL_checkstring(L, 1);
    size_t n;
    const char *ch = luaL_checklstring(L, 2, &n);
    luaL_argcheck(L, n == 1, 2, "expected one ASCII character");
    hy_glyph_params p = {1, 0, 0, 0, 0};
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        p.scale = optnumfield(L, 3, "scale", 1);
        p.rotation = optnumfield(L, 3, "rotation", 0);
        p.shift_x = optnumfield(L, 3, "shift_x", 0);
        p.shift_y = optnumfield(L, 3, "shift_y", 0);
        p.bold = optnumfield(L, 3, "bold", 0);
    }
    hy_tensor *t = l_pushtensor(L);
    int64_t shape[2] = {HY_GLYPH_SIZE, HY_GLYPH_SIZE};
    if (hy_tensor_alloc(t, HY_U8, 2, shape) != HY_OK) return l_raise(L);
    if (hy_glyph_render(font, (unsigned char)ch[0], &p, t->data) != HY_OK) return l_raise(L);
    return 1;
}

/* core.glyph_render_set(fonts, letters, per, seed [, jitter]) -> images, letter, font
 * (letter and font int16, 0-based positions in `letters` and `fonts`) */
static int l_glyph_render_set(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    const char *letters = luaL_checkstring(L, 2);
    lua_Integer per = luaL_checkinteger(L, 3), seed = luaL_checkinteger(L, 4);
    luaL_argcheck(L, per >= 1, 3, "per must be >= 1");
    hy_glyph_jitter j = hy_glyph_default_jitter();
    if (!lua_isnoneornil(L, 5)) {
        luaL_checktype(L, 5, LUA_TTABLE);
        j.scale_min = optnumfield(L, 5, "scale_min", j.scale_min);
        j.scale_max = optnumfield(L, 5, "scale_max", j.scale_max);
        j.rotation_max = optnumfield(L, 5, "rotation_max", j.rotation_max);
        j.shift_max = optnumfield(L, 5, "shift_max", j.shift_max);
        j.bold_min = optnumfield(L, 5, "bold_min", j.bold_min);
        j.bold_max = optnumfield(L, 5, "bold_max", j.bold_max);
    }
    lua_Integer nf = luaL_len(L, 1);
    luaL_argcheck(L, nf >= 1 && nf <= 4096, 1, "expected 1 to 4096 font paths");
    const char *fonts[4096];
    for (lua_Integer i = 1; i <= nf; i++) {
        lua_geti(L, 1, i);
        fonts[i - 1] = luaL_checkstring(L, -1);   /* kept alive by the table */
        lua_pop(L, 1);
    }
    hy_tensor *img = l_pushtensor(L);
    hy_tensor *let = l_pushtensor(L);
    hy_tensor *fnt = l_pushtensor(L);
    if (hy_glyph_render_set(fonts, (size_t)nf, letters, (size_t)per, &j, (uint64_t)seed, img, let,
                            fnt) != HY_OK)
        return l_raise(L);
    return 3;
}

void l_open_glyph(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"glyph_render", l_glyph_render},
        {"glyph_render_set", l_glyph_render_set},
        {NULL, NULL}};
    l_setfuncs(L, fns);
}
