/* l_data.c: Lua binding of the dataset core modules: hashing (hash.h), idx files (idx.h), PNG and
 * image stacks (imgio.h), sample selection (sample.h), glyph rendering (glyph.h) and corruptions
 * (corrupt.h). Row-index tensors (sample_*) are int64 and 0-based, like the idx/HDF5 files they
 * index and h5py; they are data, never Lua indices. Every function raises on failure. */
#include <string.h>

#include "bind.h"
#include "corrupt.h"
#include "glyph.h"
#include "hash.h"
#include "idx.h"
#include "imgio.h"
#include "sample.h"

static hy_hash_algo check_algo(lua_State *L, int arg) {
    static const char *const names[] = {"sha256", "md5", NULL};
    return luaL_checkoption(L, arg, "sha256", names) == 0 ? HY_HASH_SHA256 : HY_HASH_MD5;
}

/* core.hash_file(path [, algo="sha256" | "md5" [, opts]]) -> hex.
 * opts.gunzip = true hashes the decompressed content; opts.prefix (string) + opts.skip (bytes)
 * hash prefix .. file[skip:]. */
static int l_data_hash_file(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    hy_hash_algo algo = check_algo(L, 2);
    int gunzip = 0;
    const char *prefix = NULL;
    size_t nprefix = 0;
    lua_Integer skip = 0;
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        lua_getfield(L, 3, "gunzip");
        gunzip = lua_toboolean(L, -1);
        lua_getfield(L, 3, "prefix");
        if (!lua_isnil(L, -1)) prefix = luaL_checklstring(L, -1, &nprefix);
        lua_getfield(L, 3, "skip");
        skip = luaL_optinteger(L, -1, 0);
        luaL_argcheck(L, skip >= 0, 3, "skip must be >= 0");
        luaL_argcheck(L, !(gunzip && (prefix || skip)), 3, "gunzip cannot be combined with prefix/skip");
    }
    char hex[65];
    hy_status st = (prefix || skip)
        ? hy_hash_file_spliced(path, algo, prefix ? prefix : "", nprefix, (size_t)skip, hex)
        : hy_hash_file(path, algo, gunzip, hex);
    if (st != HY_OK) return l_raise(L);
    lua_pushstring(L, hex);
    return 1;
}

/* core.hash_string(s [, algo]) -> hex */
static int l_data_hash_string(lua_State *L) {
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    hy_hash_algo algo = check_algo(L, 2);
    uint8_t d[32];
    char hex[65];
    if (algo == HY_HASH_SHA256) {
        hy_sha256 c;
        hy_sha256_init(&c); hy_sha256_update(&c, s, n); hy_sha256_final(&c, d);
        hy_hash_hex(d, 32, hex);
    } else {
        hy_md5 c;
        hy_md5_init(&c); hy_md5_update(&c, s, n); hy_md5_final(&c, d);
        hy_hash_hex(d, 16, hex);
    }
    lua_pushstring(L, hex);
    return 1;
}

/* core.idx_read(path) -> Tensor */
static int l_data_idx_read(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    hy_tensor *t = l_pushtensor(L);
    if (hy_idx_read(path, t) != HY_OK) return l_raise(L);
    return 1;
}

/* core.idx_write(path, tensor [, gzip]) */
static int l_data_idx_write(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    hy_tensor *t = l_checktensor(L, 2);
    if (hy_idx_write(path, t, lua_toboolean(L, 3)) != HY_OK) return l_raise(L);
    return 0;
}

/* core.png_read(path) -> uint8 Tensor [H,W] (grey) */
static int l_data_png_read(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    hy_tensor *t = l_pushtensor(L);
    if (hy_png_read_gray(path, t) != HY_OK) return l_raise(L);
    return 1;
}

/* core.png_write(path, uint8 Tensor [H,W]) */
static int l_data_png_write(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    hy_tensor *t = l_checktensor(L, 2);
    if (hy_png_write_gray(path, t) != HY_OK) return l_raise(L);
    return 0;
}

/* core.img_tiles(sheet, th, tw) -> [K,th,tw] */
static int l_data_img_tiles(lua_State *L) {
    hy_tensor *s = l_checktensor(L, 1);
    lua_Integer th = luaL_checkinteger(L, 2), tw = luaL_checkinteger(L, 3);
    hy_tensor *t = l_pushtensor(L);
    if (hy_img_tiles(s, (int64_t)th, (int64_t)tw, t) != HY_OK) return l_raise(L);
    return 1;
}

/* core.img_pad(images, top, bottom, left, right [, value=0]) */
static int l_data_img_pad(lua_State *L) {
    hy_tensor *s = l_checktensor(L, 1);
    int64_t p[4];
    for (int i = 0; i < 4; i++) p[i] = (int64_t)luaL_checkinteger(L, 2 + i);
    lua_Integer v = luaL_optinteger(L, 6, 0);
    luaL_argcheck(L, v >= 0 && v <= 255, 6, "pad value must be in [0, 255]");
    hy_tensor *t = l_pushtensor(L);
    if (hy_img_pad(s, p[0], p[1], p[2], p[3], (uint8_t)v, t) != HY_OK) return l_raise(L);
    return 1;
}

static int l_data_img_flip_v(lua_State *L) {
    hy_tensor *s = l_checktensor(L, 1);
    hy_tensor *t = l_pushtensor(L);
    if (hy_img_flip_v(s, t) != HY_OK) return l_raise(L);
    return 1;
}

static int l_data_img_invert(lua_State *L) {
    hy_tensor *s = l_checktensor(L, 1);
    hy_tensor *t = l_pushtensor(L);
    if (hy_img_invert(s, t) != HY_OK) return l_raise(L);
    return 1;
}

/* core.img_stats(uint8 Tensor) -> mean, std of pixel/255 */
static int l_data_img_stats(lua_State *L) {
    hy_tensor *s = l_checktensor(L, 1);
    double m, sd;
    if (hy_img_stats(s, &m, &sd) != HY_OK) return l_raise(L);
    lua_pushnumber(L, m);
    lua_pushnumber(L, sd);
    return 2;
}

/* core.sample_gather(t, rows) -> t[rows] (rows: int64, 0-based) */
static int l_data_sample_gather(lua_State *L) {
    hy_tensor *s = l_checktensor(L, 1);
    hy_tensor *ix = l_checktensor(L, 2);
    hy_tensor *t = l_pushtensor(L);
    if (hy_sample_gather(s, ix, t) != HY_OK) return l_raise(L);
    return 1;
}

/* core.sample_stratified(labels, n_classes, per_class, seed) -> keep_rows, hold_rows */
static int l_data_sample_stratified(lua_State *L) {
    hy_tensor *lab = l_checktensor(L, 1);
    lua_Integer nc = luaL_checkinteger(L, 2), per = luaL_checkinteger(L, 3);
    lua_Integer seed = luaL_checkinteger(L, 4);
    hy_tensor *keep = l_pushtensor(L);
    hy_tensor *hold = l_pushtensor(L);
    if (hy_sample_stratified(lab, (int64_t)nc, (int64_t)per, (uint64_t)seed, keep, hold) != HY_OK)
        return l_raise(L);
    return 2;
}

/* core.sample_subset(n, k, seed) -> rows (k sorted distinct 0-based rows of [0, n)) */
static int l_data_sample_subset(lua_State *L) {
    lua_Integer n = luaL_checkinteger(L, 1), k = luaL_checkinteger(L, 2);
    lua_Integer seed = luaL_checkinteger(L, 3);
    hy_tensor *t = l_pushtensor(L);
    if (hy_sample_subset((int64_t)n, (int64_t)k, (uint64_t)seed, t) != HY_OK) return l_raise(L);
    return 1;
}

/* core.sample_permutation(n, seed) -> int64 [n] random order of 0..n-1 */
static int l_data_sample_permutation(lua_State *L) {
    lua_Integer n = luaL_checkinteger(L, 1), seed = luaL_checkinteger(L, 2);
    hy_tensor *t = l_pushtensor(L);
    if (hy_sample_permutation((int64_t)n, (uint64_t)seed, t) != HY_OK) return l_raise(L);
    return 1;
}

/* core.sample_slice(t, first, count) -> copy of rows first .. first+count-1 (first 1-based) */
static int l_data_sample_slice(lua_State *L) {
    hy_tensor *s = l_checktensor(L, 1);
    lua_Integer first = luaL_checkinteger(L, 2), count = luaL_checkinteger(L, 3);
    luaL_argcheck(L, first >= 1, 2, "rows are numbered from 1");   /* first - 1 cannot wrap */
    hy_tensor *t = l_pushtensor(L);
    if (hy_sample_slice(s, (int64_t)first - 1, (int64_t)count, t) != HY_OK) return l_raise(L);
    return 1;
}

/* core.concat({t1, t2, ...}) -> rows of every tensor, in order */
static int l_data_concat(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer n = luaL_len(L, 1);
    luaL_argcheck(L, n >= 1 && n <= 1024, 1, "expected 1 to 1024 tensors");
    const hy_tensor *parts[1024];
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, 1, i);
        parts[i - 1] = l_checktensor(L, -1);   /* kept alive by the table */
        lua_pop(L, 1);
    }
    hy_tensor *t = l_pushtensor(L);
    if (hy_sample_concat(parts, (size_t)n, t) != HY_OK) return l_raise(L);
    return 1;
}

/* core.labels_int16(t) -> int16 copy of a 1-d integer tensor */
static int l_data_labels_int16(lua_State *L) {
    hy_tensor *s = l_checktensor(L, 1);
    hy_tensor *t = l_pushtensor(L);
    if (hy_sample_labels16(s, t) != HY_OK) return l_raise(L);
    return 1;
}

static double optnumfield(lua_State *L, int arg, const char *key, double dflt) {
    lua_getfield(L, arg, key);
    double v = lua_isnil(L, -1) ? dflt : luaL_checknumber(L, -1);
    lua_pop(L, 1);
    return v;
}

/* core.glyph_render(font, letter, {scale=, rotation=, shift_x=, shift_y=, bold=}) -> [28,28] */
static int l_data_glyph_render(lua_State *L) {
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
static int l_data_glyph_render_set(lua_State *L) {
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

/* core.corrupt(images, name, severity, seed) -> images */
static int l_data_corrupt(lua_State *L) {
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
static int l_data_corruptions(lua_State *L) {
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
static int l_data_noise_images(lua_State *L) {
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

void l_open_data(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"hash_file", l_data_hash_file},
        {"hash_string", l_data_hash_string},
        {"idx_read", l_data_idx_read},
        {"idx_write", l_data_idx_write},
        {"png_read", l_data_png_read},
        {"png_write", l_data_png_write},
        {"img_tiles", l_data_img_tiles},
        {"img_pad", l_data_img_pad},
        {"img_flip_v", l_data_img_flip_v},
        {"img_invert", l_data_img_invert},
        {"img_stats", l_data_img_stats},
        {"sample_gather", l_data_sample_gather},
        {"sample_stratified", l_data_sample_stratified},
        {"sample_subset", l_data_sample_subset},
        {"labels_int16", l_data_labels_int16},
        {"sample_permutation", l_data_sample_permutation},
        {"sample_slice", l_data_sample_slice},
        {"concat", l_data_concat},
        {"glyph_render", l_data_glyph_render},
        {"glyph_render_set", l_data_glyph_render_set},
        {"corrupt", l_data_corrupt},
        {"corruptions", l_data_corruptions},
        {"noise_images", l_data_noise_images},
        {NULL, NULL}};
    l_setfuncs(L, fns);
}
