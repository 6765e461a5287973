/* l_imgprep.c: Lua binding of core/data/imgprep (RGB decoding, PIL-compatible resizing, the
 * timm / HF pipelines, CIFAR binaries).
 *   core.img_read_rgb(path [, max_pixels]) -> uint8 [H,W,3]
 *   core.img_resize(t, w, h, "bicubic"|"bilinear") -> uint8 [h,w,C]
 *   core.imgprep_files(paths, prep [, max_pixels]) -> uint8 [N,3,S,S]: every file decoded and
 *        preprocessed; prep = {mode = "timm"|"hf", interpolation = "bicubic"|"bilinear",
 *        size = S, crop_pct = x (timm)}
 *   core.imgprep_stack(images, prep) -> uint8 [N,3,S,S] from planar uint8 [N,3,h,w] (CIFAR)
 *   core.cifar_read(paths, label_bytes) -> images uint8 [N,3,32,32], labels int16 [N],
 *        coarse int16 [N] (CIFAR-100; the fine labels are `labels`): the files concatenated
 *   core.img_max_pixels: HY_IMG_MAX_PIXELS
 * Every function raises on failure. */
#include <string.h>

#include "bind.h"
#include "data/imgprep.h"

static hy_resample check_filter(lua_State *L, int arg) {
    static const char *const names[] = {"bilinear", "bicubic", NULL};
    return luaL_checkoption(L, arg, NULL, names) == 1 ? HY_RESAMPLE_BICUBIC : HY_RESAMPLE_BILINEAR;
}

static uint64_t opt_max_pixels(lua_State *L, int arg) {
    lua_Integer m = luaL_optinteger(L, arg, HY_IMG_MAX_PIXELS);
    luaL_argcheck(L, m >= 1, arg, "max_pixels must be >= 1");
    return (uint64_t)m;
}

static const char *prep_str(lua_State *L, int arg, const char *key) {
    if (lua_getfield(L, arg, key) != LUA_TSTRING)
        luaL_error(L, "imgprep: prep.%s must be a string", key);
    const char *v = lua_tostring(L, -1);   /* the table holds it */
    lua_pop(L, 1);
    return v;
}

static double prep_num(lua_State *L, int arg, const char *key) {
    if (lua_getfield(L, arg, key) != LUA_TNUMBER)
        luaL_error(L, "imgprep: prep.%s must be a number", key);
    double v = lua_tonumber(L, -1);
    lua_pop(L, 1);
    return v;
}

/* the prep table at arg */
static void check_prep(lua_State *L, int arg, hy_imgprep *p) {
    luaL_checktype(L, arg, LUA_TTABLE);
    memset(p, 0, sizeof *p);
    const char *mode = prep_str(L, arg, "mode");
    if (strcmp(mode, "timm") != 0 && strcmp(mode, "hf") != 0)
        luaL_error(L, "imgprep: mode must be timm or hf (got '%s')", mode);
    p->hf = strcmp(mode, "hf") == 0;
    const char *in = prep_str(L, arg, "interpolation");
    if (strcmp(in, "bicubic") != 0 && strcmp(in, "bilinear") != 0)
        luaL_error(L, "imgprep: interpolation must be bicubic or bilinear (got '%s')", in);
    p->interpolation = strcmp(in, "bicubic") == 0 ? HY_RESAMPLE_BICUBIC : HY_RESAMPLE_BILINEAR;
    double size = prep_num(L, arg, "size");
    if (!(size >= 1 && size <= 4096) || size != (double)(size_t)size)
        luaL_error(L, "imgprep: size must be an integer in [1, 4096]");
    p->size = (size_t)size;
    p->crop_pct = p->hf ? 1.0 : prep_num(L, arg, "crop_pct");
}

static int l_img_read_rgb(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    uint64_t mp = opt_max_pixels(L, 2);
    hy_tensor *t = l_pushtensor(L);
    if (hy_img_read_rgb(path, mp, t) != HY_OK) return l_raise(L);
    return 1;
}

static int l_img_resize(lua_State *L) {
    hy_tensor *in = l_checktensor(L, 1);
    lua_Integer w = luaL_checkinteger(L, 2), h = luaL_checkinteger(L, 3);
    luaL_argcheck(L, w >= 1 && w <= 65536, 2, "width must be in [1, 65536]");
    luaL_argcheck(L, h >= 1 && h <= 65536, 3, "height must be in [1, 65536]");
    hy_resample f = check_filter(L, 4);
    hy_tensor *t = l_pushtensor(L);
    if (hy_img_resize(in, (size_t)w, (size_t)h, f, t) != HY_OK) return l_raise(L);
    return 1;
}

static int l_imgprep_files(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    hy_imgprep p;
    check_prep(L, 2, &p);
    uint64_t mp = opt_max_pixels(L, 3);
    lua_Integer n = luaL_len(L, 1);
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_geti(L, 1, i) != LUA_TSTRING) return luaL_error(L, "imgprep: path %d is not a string", (int)i);
        lua_pop(L, 1);
    }
    size_t S = p.size;
    hy_tensor *out = l_pushtensor(L);
    int64_t shape[4] = {(int64_t)n, 3, (int64_t)S, (int64_t)S};
    if (hy_tensor_alloc(out, HY_U8, 4, shape) != HY_OK) return l_raise(L);
    hy_tensor *img = l_pushtensor(L), *one = l_pushtensor(L);   /* boxed scratch */
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, 1, i);
        const char *path = lua_tostring(L, -1);
        hy_status st = hy_img_read_rgb(path, mp, img);
        if (st == HY_OK) {
            st = hy_imgprep_apply(&p, img, one);
            if (st != HY_OK) hy_fail_prefix(st, "'%s'", path);
        }
        hy_tensor_release(img);
        lua_pop(L, 1);
        if (st != HY_OK) return l_raise(L);
        memcpy((uint8_t *)out->data + (size_t)(i - 1) * 3 * S * S, one->data, 3 * S * S);
        hy_tensor_release(one);
    }
    lua_pop(L, 2);
    return 1;
}

/* planar [N,3,h,w] -> preprocessed [N,3,S,S] */
static int l_imgprep_stack(lua_State *L) {
    hy_tensor *in = l_checktensor(L, 1);
    hy_imgprep p;
    check_prep(L, 2, &p);
    if (in->dtype != HY_U8 || in->ndim != 4 || in->shape[1] != 3)
        return luaL_error(L, "imgprep: stack expects uint8 [N,3,H,W]");
    size_t N = (size_t)in->shape[0], h = (size_t)in->shape[2], w = (size_t)in->shape[3];
    size_t S = p.size;
    hy_tensor *out = l_pushtensor(L);
    int64_t shape[4] = {(int64_t)N, 3, (int64_t)S, (int64_t)S};
    if (hy_tensor_alloc(out, HY_U8, 4, shape) != HY_OK) return l_raise(L);
    hy_tensor *hwc = l_pushtensor(L), *one = l_pushtensor(L);
    int64_t s3[3] = {(int64_t)h, (int64_t)w, 3};
    if (hy_tensor_alloc(hwc, HY_U8, 3, s3) != HY_OK) return l_raise(L);
    const uint8_t *src = in->data;
    for (size_t i = 0; i < N; i++) {
        uint8_t *d = hwc->data;
        for (size_t c = 0; c < 3; c++)
            for (size_t q = 0; q < h * w; q++) d[3 * q + c] = src[(i * 3 + c) * h * w + q];
        if (hy_imgprep_apply(&p, hwc, one) != HY_OK) return l_raise(L);
        memcpy((uint8_t *)out->data + i * 3 * S * S, one->data, 3 * S * S);
        hy_tensor_release(one);
    }
    lua_pop(L, 2);
    return 1;
}

/* core.cifar_read(paths, label_bytes): the files' records concatenated in order */
static int l_cifar_read(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer lb = luaL_checkinteger(L, 2);
    luaL_argcheck(L, lb == 1 || lb == 2, 2, "label bytes must be 1 (CIFAR-10) or 2 (CIFAR-100)");
    lua_Integer nf = luaL_len(L, 1);
    luaL_argcheck(L, nf >= 1, 1, "no files");
    for (lua_Integer i = 1; i <= nf; i++) {
        if (lua_geti(L, 1, i) != LUA_TSTRING) return luaL_error(L, "imgprep: path %d is not a string", (int)i);
        lua_pop(L, 1);
    }
    hy_tensor *im = l_pushtensor(L), *lab = l_pushtensor(L), *co = l_pushtensor(L);
    hy_tensor *pi = l_pushtensor(L), *pl = l_pushtensor(L), *pc = l_pushtensor(L);
    /* pass 1: read each file once to count; pass 2 copies (files are small: 30 MB each) */
    size_t total = 0;
    for (lua_Integer i = 1; i <= nf; i++) {
        lua_geti(L, 1, i);
        hy_status st = hy_cifar_read(lua_tostring(L, -1), (int)lb, pi, pl, pc);
        lua_pop(L, 1);
        if (st != HY_OK) return l_raise(L);
        total += (size_t)pl->shape[0];
        hy_tensor_release(pi);
        hy_tensor_release(pl);
        hy_tensor_release(pc);
    }
    int64_t is[4] = {(int64_t)total, 3, 32, 32}, ls[1] = {(int64_t)total};
    if (hy_tensor_alloc(im, HY_U8, 4, is) != HY_OK || hy_tensor_alloc(lab, HY_I16, 1, ls) != HY_OK ||
        hy_tensor_alloc(co, HY_I16, 1, ls) != HY_OK)
        return l_raise(L);
    size_t at = 0;
    for (lua_Integer i = 1; i <= nf; i++) {
        lua_geti(L, 1, i);
        hy_status st = hy_cifar_read(lua_tostring(L, -1), (int)lb, pi, pl, pc);
        lua_pop(L, 1);
        if (st != HY_OK) return l_raise(L);
        size_t n = (size_t)pl->shape[0];
        if (at + n > total) return luaL_error(L, "imgprep: a CIFAR file changed while read");
        memcpy((uint8_t *)im->data + at * 3072, pi->data, n * 3072);
        memcpy((int16_t *)lab->data + at, pl->data, n * sizeof(int16_t));
        memcpy((int16_t *)co->data + at, pc->data, n * sizeof(int16_t));
        at += n;
        hy_tensor_release(pi);
        hy_tensor_release(pl);
        hy_tensor_release(pc);
    }
    lua_pop(L, 3);
    return 3;
}

void l_open_imgprep(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"img_read_rgb", l_img_read_rgb}, {"img_resize", l_img_resize},
        {"imgprep_files", l_imgprep_files}, {"imgprep_stack", l_imgprep_stack},
        {"cifar_read", l_cifar_read}, {NULL, NULL}};
    l_setfuncs(L, fns);
    lua_pushinteger(L, HY_IMG_MAX_PIXELS);
    lua_setfield(L, -2, "img_max_pixels");
}
