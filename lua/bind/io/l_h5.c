/* l_h5.c: Lua binding of core/h5 (HDF5 files).
 *   core.h5_create(path) -> H5File (writing; appears at path on f:commit())
 *   core.h5_open(path)   -> H5File (read-only)
 *   core.h5_is_file(path) -> boolean
 * H5File methods: write(name, tensor) write_string(name, s) write_strings(name, {s...})
 *   set_attr(obj, key, value) commit() close() read(name [, dtype]) read_string(name)
 *   read_strings(name) attr(obj, key) attrs(obj) exists(name) stat(name) list([group])
 *   path() writable() is_open()
 * __gc and __close both run hy_h5_close, which is idempotent: an uncommitted file is discarded.
 * Methods on a closed (or committed) file raise "h5: attempt to use a closed file".
 * Owned C results (strings, listings) live in a "hydra.H5Result" box with __gc while they are
 * copied into Lua values, so a Lua memory error never leaks them. For other bindings: l_pushh5
 * (a boxed file) and the one /meta writer, l_checkmeta + l_writemeta (bind.h). */
#include <string.h>

#include "bind.h"
#include "io/h5.h"

#define L_H5RESULT "hydra.H5Result"

typedef struct l_h5file {
    hy_h5 f;
} l_h5file;

/* Owned results of one core call, freed by __gc (or earlier by the binding). */
typedef struct l_h5result {
    char *str;
    char **strs;
    size_t nstrs;
    hy_h5_entry *ents;
    size_t nents;
    hy_h5_attr *attrs;
    size_t nattrs;
    hy_h5_attr one;
    hy_h5_entry ent;
} l_h5result;

static int l_h5result_gc(lua_State *L) {
    l_h5result *r = luaL_checkudata(L, 1, L_H5RESULT);
    hy_free(r->str);
    hy_h5_strings_free(r->strs, r->nstrs);
    hy_h5_list_free(r->ents, r->nents);
    hy_h5_attrs_free(r->attrs, r->nattrs);
    hy_h5_attr_free(&r->one);
    hy_h5_entry_free(&r->ent);
    memset(r, 0, sizeof *r);
    return 0;
}

static l_h5result *push_result(lua_State *L) {
    l_h5result *r = lua_newuserdatauv(L, sizeof *r, 0);
    memset(r, 0, sizeof *r);
    luaL_setmetatable(L, L_H5RESULT);
    return r;
}

static l_h5file *check_h5(lua_State *L) { return luaL_checkudata(L, 1, L_H5FILE); }

static hy_h5 *check_open(lua_State *L) {
    l_h5file *u = check_h5(L);
    if (!u->f.open) luaL_error(L, "h5: attempt to use a closed file");
    return &u->f;
}

hy_h5 *l_checkh5(lua_State *L, int arg) {
    l_h5file *u = luaL_checkudata(L, arg, L_H5FILE);
    if (!u->f.open) luaL_error(L, "h5: attempt to use a closed file");
    return &u->f;
}

/* A string argument without embedded NUL bytes. */
static const char *check_cstr(lua_State *L, int arg) {
    size_t n;
    const char *s = luaL_checklstring(L, arg, &n);
    if (strlen(s) != n) luaL_argerror(L, arg, "string contains a NUL byte");
    return s;
}

/* ===== files ===== */

hy_h5 *l_pushh5(lua_State *L) {
    l_h5file *u = lua_newuserdatauv(L, sizeof *u, 0);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, L_H5FILE);
    return &u->f;
}

static int l_h5_create(lua_State *L) {
    const char *path = check_cstr(L, 1);
    if (hy_h5_create(l_pushh5(L), path) != HY_OK) return l_raise(L);
    return 1;
}

static int l_h5_open(lua_State *L) {
    const char *path = check_cstr(L, 1);
    if (hy_h5_open(l_pushh5(L), path) != HY_OK) return l_raise(L);
    return 1;
}

static int l_h5_is_file(lua_State *L) {
    lua_pushboolean(L, hy_h5_is_file(check_cstr(L, 1)));
    return 1;
}

static int l_h5file_close(lua_State *L) {
    hy_h5_close(&check_h5(L)->f);
    return 0;
}

static int l_h5file_commit(lua_State *L) {
    hy_h5 *f = check_open(L);
    if (hy_h5_commit(f) != HY_OK) return l_raise(L);
    return 0;
}

static int l_h5file_path(lua_State *L) {
    hy_h5 *f = check_open(L);
    lua_pushstring(L, f->path);
    return 1;
}

static int l_h5file_writable(lua_State *L) {
    hy_h5 *f = check_open(L);
    lua_pushboolean(L, f->tmp != NULL);
    return 1;
}

static int l_h5file_is_open(lua_State *L) {
    lua_pushboolean(L, check_h5(L)->f.open);
    return 1;
}

static int l_h5file_tostring(lua_State *L) {
    l_h5file *u = check_h5(L);
    if (!u->f.open) lua_pushliteral(L, "hydra.H5File (closed)");
    else lua_pushfstring(L, "hydra.H5File (%s, %s)", u->f.path, u->f.tmp ? "writing" : "reading");
    return 1;
}

/* ===== writing ===== */

static int l_h5file_write(lua_State *L) {
    hy_h5 *f = check_open(L);
    const char *name = check_cstr(L, 2);
    hy_tensor *t = l_checktensor(L, 3);
    if (hy_h5_write(f, name, t) != HY_OK) return l_raise(L);
    return 0;
}

static int l_h5file_write_string(lua_State *L) {
    hy_h5 *f = check_open(L);
    const char *name = check_cstr(L, 2);
    const char *s = check_cstr(L, 3);
    if (hy_h5_write_string(f, name, s) != HY_OK) return l_raise(L);
    return 0;
}

static int l_h5file_write_strings(lua_State *L) {
    hy_h5 *f = check_open(L);
    const char *name = check_cstr(L, 2);
    luaL_checktype(L, 3, LUA_TTABLE);
    lua_Integer n = luaL_len(L, 3);
    /* the pointer array is a userdata, so an error while filling it leaks nothing; the strings
     * stay alive in the table (argument 3) */
    const char **v = lua_newuserdatauv(L, sizeof *v * (size_t)(n > 0 ? n : 1), 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, 3, i);
        if (lua_type(L, -1) != LUA_TSTRING)
            return luaL_argerror(L, 3, lua_pushfstring(L, "entry %I is a %s, not a string", i,
                                                       luaL_typename(L, -1)));
        size_t len;
        const char *s = lua_tolstring(L, -1, &len);
        if (strlen(s) != len)
            return luaL_argerror(L, 3, lua_pushfstring(L, "entry %I contains a NUL byte", i));
        v[i - 1] = s;
        lua_pop(L, 1);
    }
    if (hy_h5_write_strings(f, name, v, (size_t)n) != HY_OK) return l_raise(L);
    return 0;
}

/* set_attr(obj, key, value): value is a string, an integer, a float or an array of numbers
 * (all integers -> int64 array, else float64 array; {} -> empty float64 array). */
static int l_h5file_set_attr(lua_State *L) {
    hy_h5 *f = check_open(L);
    const char *obj = check_cstr(L, 2);
    const char *key = check_cstr(L, 3);
    hy_status st;
    int ty = lua_type(L, 4);
    if (ty == LUA_TSTRING) {
        st = hy_h5_set_attr_str(f, obj, key, check_cstr(L, 4));
    } else if (ty == LUA_TNUMBER && lua_isinteger(L, 4)) {
        st = hy_h5_set_attr_i64(f, obj, key, (int64_t)lua_tointeger(L, 4));
    } else if (ty == LUA_TNUMBER) {
        st = hy_h5_set_attr_f64(f, obj, key, (double)lua_tonumber(L, 4));
    } else if (ty == LUA_TTABLE) {
        lua_Integer n = luaL_len(L, 4);
        int all_int = n > 0;
        for (lua_Integer i = 1; i <= n; i++) {
            lua_geti(L, 4, i);
            if (lua_type(L, -1) != LUA_TNUMBER)
                return luaL_argerror(L, 4, lua_pushfstring(L, "entry %I is a %s, not a number",
                                                           i, luaL_typename(L, -1)));
            if (!lua_isinteger(L, -1)) all_int = 0;
            lua_pop(L, 1);
        }
        size_t cnt = (size_t)n;
        if (all_int) {
            int64_t *v = lua_newuserdatauv(L, sizeof *v * (cnt ? cnt : 1), 0);
            for (lua_Integer i = 1; i <= n; i++) {
                lua_geti(L, 4, i);
                v[i - 1] = (int64_t)lua_tointeger(L, -1);
                lua_pop(L, 1);
            }
            st = hy_h5_set_attr_i64s(f, obj, key, v, cnt);
        } else {
            double *v = lua_newuserdatauv(L, sizeof *v * (cnt ? cnt : 1), 0);
            for (lua_Integer i = 1; i <= n; i++) {
                lua_geti(L, 4, i);
                v[i - 1] = (double)lua_tonumber(L, -1);
                lua_pop(L, 1);
            }
            st = hy_h5_set_attr_f64s(f, obj, key, v, cnt);
        }
    } else {
        return luaL_typeerror(L, 4, "string, number or array of numbers");
    }
    if (st != HY_OK) return l_raise(L);
    return 0;
}

/* ===== /meta of checkpoints and fused files ===== */

void l_checkmeta(lua_State *L, int arg, const char *what) {
    if (lua_isnoneornil(L, arg)) return;
    luaL_checktype(L, arg, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, arg) != 0) {
        if (lua_type(L, -2) != LUA_TSTRING) luaL_error(L, "%s: meta keys must be strings", what);
        int t = lua_type(L, -1);
        int ok = t == LUA_TSTRING || t == LUA_TNUMBER || t == LUA_TBOOLEAN;
        if (t == LUA_TTABLE) {   /* an array of 1..64 numbers (e.g. per-channel data_mean) */
            lua_Integer n = luaL_len(L, -1);
            ok = n >= 1 && n <= 64;
            for (lua_Integer i = 1; ok && i <= n; i++) {
                ok = lua_geti(L, -1, i) == LUA_TNUMBER;
                lua_pop(L, 1);
            }
        }
        if (!ok)
            luaL_error(L, "%s: meta '%s' must be a string, a number, a boolean or an array of "
                       "1 to 64 numbers (got %s)", what, lua_tostring(L, -2),
                       luaL_typename(L, -1));
        lua_pop(L, 1);
    }
}

hy_status l_writemeta(lua_State *L, int arg, hy_h5 *f) {
    if (lua_isnoneornil(L, arg)) return HY_OK;
    hy_status st = HY_OK;
    lua_pushnil(L);
    while (lua_next(L, arg) != 0) {
        const char *k = lua_tostring(L, -2);   /* a string key (l_checkmeta): no conversion */
        if (st == HY_OK) {
            if (lua_type(L, -1) == LUA_TSTRING)
                st = hy_h5_set_attr_str(f, "/meta", k, lua_tostring(L, -1));
            else if (lua_type(L, -1) == LUA_TBOOLEAN)
                st = hy_h5_set_attr_i64(f, "/meta", k, lua_toboolean(L, -1));
            else if (lua_type(L, -1) == LUA_TTABLE) {   /* checked: 1..64 numbers */
                double v[64];
                lua_Integer n = luaL_len(L, -1);
                for (lua_Integer i = 1; i <= n; i++) {
                    lua_geti(L, -1, i);
                    v[i - 1] = (double)lua_tonumber(L, -1);
                    lua_pop(L, 1);
                }
                st = hy_h5_set_attr_f64s(f, "/meta", k, v, (size_t)n);
            } else if (lua_isinteger(L, -1))
                st = hy_h5_set_attr_i64(f, "/meta", k, (int64_t)lua_tointeger(L, -1));
            else
                st = hy_h5_set_attr_f64(f, "/meta", k, (double)lua_tonumber(L, -1));
        }
        lua_pop(L, 1);
    }
    return st;
}

/* ===== reading ===== */

static int l_h5file_read(lua_State *L) {
    hy_h5 *f = check_open(L);
    const char *name = check_cstr(L, 2);
    int want = -1;
    if (!lua_isnoneornil(L, 3)) {
        hy_dtype dt;
        if (hy_dtype_parse(luaL_checkstring(L, 3), &dt) != HY_OK)
            return luaL_argerror(L, 3, hy_errmsg());
        want = (int)dt;
    }
    hy_tensor *t = l_pushtensor(L);
    hy_status st = want < 0 ? hy_h5_read(f, name, t) : hy_h5_read_as(f, name, (hy_dtype)want, t);
    if (st != HY_OK) return l_raise(L);
    return 1;
}

static int l_h5file_read_string(lua_State *L) {
    hy_h5 *f = check_open(L);
    const char *name = check_cstr(L, 2);
    l_h5result *r = push_result(L);
    if (hy_h5_read_string(f, name, &r->str) != HY_OK) return l_raise(L);
    lua_pushstring(L, r->str);
    return 1;
}

static void push_strings(lua_State *L, char *const *s, size_t n) {
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushstring(L, s[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

static int l_h5file_read_strings(lua_State *L) {
    hy_h5 *f = check_open(L);
    const char *name = check_cstr(L, 2);
    l_h5result *r = push_result(L);
    if (hy_h5_read_strings(f, name, &r->strs, &r->nstrs) != HY_OK) return l_raise(L);
    push_strings(L, r->strs, r->nstrs);
    return 1;
}

/* Pushes an attribute's value: string / integer / number, or a table for arrays; nil for types
 * hydra does not read. */
static void push_attr(lua_State *L, const hy_h5_attr *a) {
    if (a->type == HY_H5_ATTR_OTHER) { lua_pushnil(L); return; }
    if (a->type == HY_H5_ATTR_STR && !a->is_array && a->n == 1) {
        lua_pushstring(L, a->strs[0]);
        return;
    }
    if (a->type == HY_H5_ATTR_STR) { push_strings(L, a->strs, a->n); return; }
    if (!a->is_array) {
        if (a->type == HY_H5_ATTR_I64) lua_pushinteger(L, (lua_Integer)a->i64[0]);
        else lua_pushnumber(L, (lua_Number)a->f64[0]);
        return;
    }
    lua_createtable(L, (int)a->n, 0);
    for (size_t i = 0; i < a->n; i++) {
        if (a->type == HY_H5_ATTR_I64) lua_pushinteger(L, (lua_Integer)a->i64[i]);
        else lua_pushnumber(L, (lua_Number)a->f64[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

static int l_h5file_attr(lua_State *L) {
    hy_h5 *f = check_open(L);
    const char *obj = check_cstr(L, 2);
    const char *key = check_cstr(L, 3);
    l_h5result *r = push_result(L);
    if (hy_h5_get_attr(f, obj, key, &r->one) != HY_OK) return l_raise(L);
    if (r->one.type == HY_H5_ATTR_OTHER)
        return luaL_error(L, "h5: attribute '%s' on '%s' in '%s' has a type hydra cannot read",
                          key, obj, f->path);
    push_attr(L, &r->one);
    return 1;
}

/* attrs(obj) -> { key = value, ... } (attributes of unreadable types are left out) */
static int l_h5file_attrs(lua_State *L) {
    hy_h5 *f = check_open(L);
    const char *obj = luaL_optstring(L, 2, "/");
    l_h5result *r = push_result(L);
    if (hy_h5_attrs(f, obj, &r->attrs, &r->nattrs) != HY_OK) return l_raise(L);
    lua_createtable(L, 0, (int)r->nattrs);
    for (size_t i = 0; i < r->nattrs; i++) {
        if (r->attrs[i].type == HY_H5_ATTR_OTHER) continue;
        push_attr(L, &r->attrs[i]);
        lua_setfield(L, -2, r->attrs[i].key);
    }
    return 1;
}

static int l_h5file_exists(lua_State *L) {
    hy_h5 *f = check_open(L);
    int e = hy_h5_exists(f, check_cstr(L, 2));
    if (e < 0) return l_raise(L);   /* could not tell (out of memory) */
    lua_pushboolean(L, e);
    return 1;
}

/* {name=, path=, kind="group"|"dataset"|"other", dtype= (datasets), shape= {...} (datasets)} */
static void push_entry(lua_State *L, const hy_h5_entry *e) {
    static const char *const kinds[] = {"group", "dataset", "other"};
    lua_createtable(L, 0, 5);
    lua_pushstring(L, e->name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, e->path);
    lua_setfield(L, -2, "path");
    lua_pushstring(L, kinds[e->kind]);
    lua_setfield(L, -2, "kind");
    if (e->kind == HY_H5_DATASET) {
        lua_pushstring(L, e->type);
        lua_setfield(L, -2, "dtype");
        lua_createtable(L, e->ndim, 0);
        for (int i = 0; i < e->ndim; i++) {
            lua_pushinteger(L, (lua_Integer)e->shape[i]);
            lua_rawseti(L, -2, i + 1);
        }
        lua_setfield(L, -2, "shape");
    }
}

static int l_h5file_stat(lua_State *L) {
    hy_h5 *f = check_open(L);
    const char *name = check_cstr(L, 2);
    l_h5result *r = push_result(L);
    if (hy_h5_stat(f, name, &r->ent) != HY_OK) return l_raise(L);
    push_entry(L, &r->ent);
    return 1;
}

static int l_h5file_list(lua_State *L) {
    hy_h5 *f = check_open(L);
    const char *group = luaL_optstring(L, 2, "/");
    l_h5result *r = push_result(L);
    if (hy_h5_list(f, group, &r->ents, &r->nents) != HY_OK) return l_raise(L);
    lua_createtable(L, (int)r->nents, 0);
    for (size_t i = 0; i < r->nents; i++) {
        push_entry(L, &r->ents[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

void l_open_h5(lua_State *L) {
    static const luaL_Reg methods[] = {
        {"write", l_h5file_write},
        {"write_string", l_h5file_write_string},
        {"write_strings", l_h5file_write_strings},
        {"set_attr", l_h5file_set_attr},
        {"commit", l_h5file_commit},
        {"close", l_h5file_close},
        {"read", l_h5file_read},
        {"read_string", l_h5file_read_string},
        {"read_strings", l_h5file_read_strings},
        {"attr", l_h5file_attr},
        {"attrs", l_h5file_attrs},
        {"exists", l_h5file_exists},
        {"stat", l_h5file_stat},
        {"list", l_h5file_list},
        {"path", l_h5file_path},
        {"writable", l_h5file_writable},
        {"is_open", l_h5file_is_open},
        {NULL, NULL}};
    static const luaL_Reg meta[] = {{"__tostring", l_h5file_tostring}, {NULL, NULL}};
    static const luaL_Reg fns[] = {
        {"h5_create", l_h5_create}, {"h5_open", l_h5_open}, {"h5_is_file", l_h5_is_file},
        {NULL, NULL}};
    l_newclass(L, L_H5FILE, methods, l_h5file_close, l_h5file_close);
    l_setmeta(L, L_H5FILE, meta);
    l_newclass(L, L_H5RESULT, NULL, l_h5result_gc, NULL);
    l_setfuncs(L, fns);
}
