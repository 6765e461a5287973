/* l_safetensors.c: Lua binding of core/io/safetensors (safetensors files).
 *   core.safetensors_open(path) -> SafeTensors (header read and validated)
 *   core.safetensors_write(path, {{name=, tensor=}, ...} [, {key = "value", ...} [, dtype]])
 *     writes float32 tensors (any order; the file is sorted as the reference writer sorts) as
 *     dtype "F32" (default), "F16" or "BF16" (round to nearest even)
 * SafeTensors methods: names() (file order: by data_offsets), info(name) -> {dtype=, shape={}},
 *   metadata() -> {key = value}, read(name) -> float32 Tensor (F16/BF16 widened exactly, F64
 *   rounded), path(), close(). __gc and __close both close; methods on a closed file raise
 *   "safetensors: attempt to use a closed file". Every failure raises the core's one-line
 *   message. */
#include <string.h>

#include "bind.h"
#include "io/safetensors.h"

#define L_SAFETENSORS "hydra.SafeTensors"

typedef struct l_stfile {
    hy_st st;
} l_stfile;

static hy_st *check_open(lua_State *L) {
    l_stfile *u = luaL_checkudata(L, 1, L_SAFETENSORS);
    if (!u->st.open) luaL_error(L, "safetensors: attempt to use a closed file");
    return &u->st;
}

/* The index of tensor `name` (argument 2), or raises naming the file. */
static size_t check_name(lua_State *L, const hy_st *st) {
    const char *name = luaL_checkstring(L, 2);
    int64_t i = hy_st_find(st, name);
    if (i < 0) luaL_error(L, "safetensors: '%s': no tensor '%s'", st->path, name);
    return (size_t)i;
}

static int l_st_open(lua_State *L) {
    size_t n;
    const char *path = luaL_checklstring(L, 1, &n);
    if (strlen(path) != n) luaL_argerror(L, 1, "string contains a NUL byte");
    l_stfile *u = lua_newuserdatauv(L, sizeof *u, 0);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, L_SAFETENSORS);
    if (hy_st_open(&u->st, path) != HY_OK) return l_raise(L);
    return 1;
}

static int l_st_close(lua_State *L) {
    l_stfile *u = luaL_checkudata(L, 1, L_SAFETENSORS);
    hy_st_close(&u->st);
    return 0;
}

static int l_st_names(lua_State *L) {
    hy_st *st = check_open(L);
    size_t n = hy_st_count(st);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushstring(L, hy_st_name(st, i));
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int l_st_info(lua_State *L) {
    hy_st *st = check_open(L);
    size_t i = check_name(L, st);
    const hy_st_entry *e = hy_st_entry_at(st, i);
    lua_createtable(L, 0, 2);
    lua_pushstring(L, hy_st_dtype_name(e->dtype));
    lua_setfield(L, -2, "dtype");
    lua_createtable(L, e->ndim, 0);
    for (int d = 0; d < e->ndim; d++) {
        lua_pushinteger(L, (lua_Integer)e->shape[d]);
        lua_rawseti(L, -2, d + 1);
    }
    lua_setfield(L, -2, "shape");
    return 1;
}

static int l_st_metadata(lua_State *L) {
    hy_st *st = check_open(L);
    size_t n = hy_st_meta_count(st);
    lua_createtable(L, 0, (int)n);
    for (size_t i = 0; i < n; i++) {
        lua_pushstring(L, hy_st_meta_value(st, i));
        lua_setfield(L, -2, hy_st_meta_key(st, i));
    }
    return 1;
}

static int l_st_read(lua_State *L) {
    hy_st *st = check_open(L);
    size_t i = check_name(L, st);
    const hy_st_entry *e = hy_st_entry_at(st, i);
    if (!hy_st_dtype_readable(e->dtype)) {
        (void)hy_st_read_f32(st, i, NULL);   /* refuses the dtype by name, writes nothing */
        return l_raise(L);
    }
    hy_tensor *t = l_pushtensor(L);
    if (hy_tensor_alloc(t, HY_F32, e->ndim, e->shape) != HY_OK) return l_raise(L);
    if (hy_st_read_f32(st, i, t->data) != HY_OK) return l_raise(L);
    return 1;
}

static int l_st_path(lua_State *L) {
    lua_pushstring(L, check_open(L)->path);
    return 1;
}

static int l_st_tostring(lua_State *L) {
    l_stfile *u = luaL_checkudata(L, 1, L_SAFETENSORS);
    if (u->st.open)
        lua_pushfstring(L, "SafeTensors('%s', %I tensors)", u->st.path,
                        (lua_Integer)hy_st_count(&u->st));
    else
        lua_pushliteral(L, "SafeTensors(closed)");
    return 1;
}

/* core.safetensors_write(path, entries [, metadata [, dtype]]). The descriptors live in a Lua
 * userdata (no C allocation); every name and tensor they point into is anchored in a table on
 * the stack (a field read through __index may return a value nothing else references), and
 * metadata keys and values are read raw from their table, which holds them. */
static int l_st_write(lua_State *L) {
    size_t plen;
    const char *path = luaL_checklstring(L, 1, &plen);
    if (strlen(path) != plen) luaL_argerror(L, 1, "string contains a NUL byte");
    luaL_checktype(L, 2, LUA_TTABLE);
    int has_meta = !lua_isnoneornil(L, 3);
    if (has_meta) luaL_checktype(L, 3, LUA_TTABLE);
    const char *dts = luaL_optstring(L, 4, "F32");
    hy_st_dtype dt = HY_ST_NDTYPES;
    for (int i = 0; i < HY_ST_NDTYPES; i++)
        if (strcmp(dts, hy_st_dtype_name((hy_st_dtype)i)) == 0) dt = (hy_st_dtype)i;
    if (dt != HY_ST_F32 && dt != HY_ST_F16 && dt != HY_ST_BF16)
        luaL_argerror(L, 4, lua_pushfstring(L, "dtype must be F32, F16 or BF16 (got '%s')", dts));
    lua_settop(L, 3);
    size_t n = (size_t)lua_rawlen(L, 2);
    lua_createtable(L, (int)(2 * n < 0x7fffffff ? 2 * n : 0), 0);               /* index 4 */
    hy_st_tensor *ts = lua_newuserdatauv(L, (n ? n : 1) * sizeof *ts, 0);       /* index 5 */
    for (size_t i = 0; i < n; i++) {
        if (lua_rawgeti(L, 2, (lua_Integer)i + 1) != LUA_TTABLE)
            return luaL_error(L, "safetensors_write: entry %I must be a table {name=, tensor=}"
                              " (got %s)", (lua_Integer)i + 1, luaL_typename(L, -1));
        if (lua_getfield(L, -1, "name") != LUA_TSTRING)
            return luaL_error(L, "safetensors_write: entry %I: name must be a string (got %s)",
                              (lua_Integer)i + 1, luaL_typename(L, -1));
        size_t nl;
        const char *name = lua_tolstring(L, -1, &nl);
        if (strlen(name) != nl)
            return luaL_error(L, "safetensors_write: entry %I: name contains a NUL byte",
                              (lua_Integer)i + 1);
        lua_rawseti(L, 4, 2 * (lua_Integer)i + 1);    /* anchored: name stays valid */
        lua_getfield(L, -1, "tensor");
        hy_tensor *t = luaL_testudata(L, -1, L_TENSOR);
        if (!t)
            return luaL_error(L, "safetensors_write: entry %I ('%s'): tensor must be a "
                              "hydra.Tensor (got %s)", (lua_Integer)i + 1, name,
                              luaL_typename(L, -1));
        if (t->dtype != HY_F32)
            return luaL_error(L, "safetensors_write: entry %I ('%s'): tensor is %s, expected "
                              "float32", (lua_Integer)i + 1, name, hy_dtype_name(t->dtype));
        lua_rawseti(L, 4, 2 * (lua_Integer)i + 2);    /* anchored: the tensor stays alive */
        lua_pop(L, 1);
        ts[i].name = name;
        ts[i].ndim = t->ndim;
        ts[i].shape = t->shape;
        ts[i].data = t->data;
    }
    size_t nm = 0;
    if (has_meta) {
        lua_pushnil(L);
        while (lua_next(L, 3) != 0) {
            if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
                return luaL_error(L, "safetensors_write: metadata keys and values must be "
                                  "strings (got %s = %s)", luaL_typename(L, -2),
                                  luaL_typename(L, -1));
            nm++;
            lua_pop(L, 1);
        }
    }
    const char **kv = lua_newuserdatauv(L, (nm ? nm : 1) * 2 * sizeof *kv, 0);  /* index 6 */
    if (has_meta) {
        size_t j = 0;
        lua_pushnil(L);
        while (lua_next(L, 3) != 0) {
            size_t kl, vl;
            const char *k = lua_tolstring(L, -2, &kl), *v = lua_tolstring(L, -1, &vl);
            if (strlen(k) != kl || strlen(v) != vl)
                return luaL_error(L, "safetensors_write: metadata '%s' contains a NUL byte", k);
            kv[j] = k;
            kv[nm + j] = v;
            j++;
            lua_pop(L, 1);
        }
    }
    if (hy_st_write_as(path, ts, n, kv, kv + nm, nm, dt) != HY_OK) return l_raise(L);
    return 0;
}

void l_open_safetensors(lua_State *L) {
    static const luaL_Reg methods[] = {
        {"names", l_st_names},       {"info", l_st_info}, {"metadata", l_st_metadata},
        {"read", l_st_read},         {"path", l_st_path}, {"close", l_st_close},
        {NULL, NULL}};
    static const luaL_Reg meta[] = {{"__tostring", l_st_tostring}, {NULL, NULL}};
    static const luaL_Reg fns[] = {
        {"safetensors_open", l_st_open}, {"safetensors_write", l_st_write}, {NULL, NULL}};
    l_newclass(L, L_SAFETENSORS, methods, l_st_close, l_st_close);
    l_setmeta(L, L_SAFETENSORS, meta);
    l_setfuncs(L, fns);
}
