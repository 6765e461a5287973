/* l_hash.c: Lua binding of core/hash (SHA-256, MD5 of files and strings) and of hy_hash64
 * (rng.h), the hash of run-ids and config hashes.
 *   core.hash_file(path [, algo [, opts]]) -> hex     core.hash_string(s [, algo]) -> hex
 *   core.file_sha256(path) -> hex (identifies the data a model was trained on)
 *   core.hash64(s [, seed]) -> 16 lowercase hex digits of hy_hash64(s, seed)
 * Every function raises on failure. */
#include <stdio.h>
#include <string.h>

#include "bind.h"
#include "io/hash.h"
#include "tensor/rng.h"

static hy_hash_algo check_algo(lua_State *L, int arg) {
    static const char *const names[] = {"sha256", "md5", NULL};
    return luaL_checkoption(L, arg, "sha256", names) == 0 ? HY_HASH_SHA256 : HY_HASH_MD5;
}

/* core.hash_file(path [, algo="sha256" | "md5" [, opts]]) -> hex.
 * opts.gunzip = true hashes the decompressed content; opts.prefix (string) + opts.skip (bytes)
 * hash prefix .. file[skip:]. */
static int l_hash_file(lua_State *L) {
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
static int l_hash_string(lua_State *L) {
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

/* core.file_sha256(path) -> hex digest (identifies the data a model was trained on) */
static int l_hash_file_sha256(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    char hex[65];
    if (hy_hash_file(path, HY_HASH_SHA256, 0, hex) != HY_OK) return l_raise(L);
    lua_pushstring(L, hex);
    return 1;
}

/* core.hash64(s [, seed]) -> "0123456789abcdef" */
static int l_hash_hash64(lua_State *L) {
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    lua_Integer seed = luaL_optinteger(L, 2, 0);
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx",
             (unsigned long long)hy_hash64(s, len, (uint64_t)seed));
    lua_pushstring(L, hex);
    return 1;
}

void l_open_hash(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"hash_file", l_hash_file},
        {"hash_string", l_hash_string},
        {"file_sha256", l_hash_file_sha256},
        {"hash64", l_hash_hash64},
        {NULL, NULL}};
    l_setfuncs(L, fns);
}
