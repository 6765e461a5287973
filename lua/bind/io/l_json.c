/* l_json.c: JSON through Debian's libjansson, for the files models come with (HF/timm
 * config.json, preprocessor_config.json, tokenizer_config.json) and the JSON hydra writes beside
 * exported models (safetensors __metadata__ values, name maps).
 *   core.json_decode(text [, name]) -> value   objects -> tables with string keys, arrays ->
 *       sequences, strings, integers (Lua integers), reals (floats), booleans, null ->
 *       core.json_null. Duplicate object keys are refused. An error names `name` (default
 *       "json") and the position: "json: 'config.json': line 3, column 7: ..."
 *   core.json_encode(value) -> compact JSON text with object keys sorted (deterministic):
 *       a table with only the keys 1..n (n >= 0; {} included) is an array, one with string keys
 *       an object; strings must be UTF-8, numbers finite; core.json_null is null.
 * The jansson tree lives in a "hydra.JSONBox" userdata whose __gc frees it, so a Lua error
 * while converting leaks nothing; encoding checks the whole value before building it. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "bind.h"

#define L_JSONBOX "hydra.JSONBox"

typedef struct l_jsonbox { json_t *root; } l_jsonbox;

static int l_jsonbox_gc(lua_State *L) {
    l_jsonbox *b = luaL_checkudata(L, 1, L_JSONBOX);
    if (b->root) json_decref(b->root);
    b->root = NULL;
    return 0;
}

static l_jsonbox *push_box(lua_State *L) {
    l_jsonbox *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->root = NULL;
    luaL_setmetatable(L, L_JSONBOX);
    return b;
}

static char json_null_key;   /* its address is the null sentinel */

static void push_value(lua_State *L, json_t *v, int depth) {
    luaL_checkstack(L, 4, "json: nested too deeply");
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        lua_createtable(L, 0, (int)json_object_size(v));
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) {
            push_value(L, x, depth + 1);
            lua_setfield(L, -2, k);
        }
        break;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        lua_createtable(L, (int)n, 0);
        for (size_t i = 0; i < n; i++) {
            push_value(L, json_array_get(v, i), depth + 1);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        break;
    }
    case JSON_STRING: lua_pushlstring(L, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER: lua_pushinteger(L, (lua_Integer)json_integer_value(v)); break;
    case JSON_REAL: lua_pushnumber(L, json_real_value(v)); break;
    case JSON_TRUE: lua_pushboolean(L, 1); break;
    case JSON_FALSE: lua_pushboolean(L, 0); break;
    default: lua_pushlightuserdata(L, &json_null_key); break;
    }
}

static int l_json_decode(lua_State *L) {
    size_t n;
    const char *text = luaL_checklstring(L, 1, &n);
    const char *name = luaL_optstring(L, 2, NULL);
    l_jsonbox *b = push_box(L);
    json_error_t e;
    b->root = json_loadb(text, n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &e);
    if (!b->root) {
        if (name)
            return luaL_error(L, "json: '%s': line %d, column %d: %s", name, e.line, e.column,
                              e.text);
        return luaL_error(L, "json: line %d, column %d: %s", e.line, e.column, e.text);
    }
    push_value(L, b->root, 0);
    return 1;
}

/* Checks that the Lua value at idx (absolute) can be JSON; raises naming what cannot. Run
 * before building so that building never raises. A table is an array when its keys are exactly
 * 1..n (n >= 0). */
static int is_array(lua_State *L, int idx) {
    lua_Integer n = (lua_Integer)lua_rawlen(L, idx), count = 0;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        count++;
        int ok = lua_isinteger(L, -2) && lua_tointeger(L, -2) >= 1 && lua_tointeger(L, -2) <= n;
        lua_pop(L, 1);
        if (!ok) {
            lua_pop(L, 1);
            return 0;
        }
    }
    return count == n;
}

static void check_json(lua_State *L, int idx, int depth) {
    if (depth > 200) luaL_error(L, "json_encode: nested deeper than 200 levels (a cycle?)");
    luaL_checkstack(L, 4, "json_encode: nested too deeply");
    switch (lua_type(L, idx)) {
    case LUA_TNIL: case LUA_TBOOLEAN: return;
    case LUA_TLIGHTUSERDATA:
        if (lua_touserdata(L, idx) != &json_null_key)
            luaL_error(L, "json_encode: a light userdata is not JSON");
        return;
    case LUA_TNUMBER:
        if (!lua_isinteger(L, idx) && !isfinite(lua_tonumber(L, idx)))
            luaL_error(L, "json_encode: %f is not a finite number", lua_tonumber(L, idx));
        return;
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        json_t *v = json_stringn(s, n);
        if (!v) luaL_error(L, "json_encode: string '%s' is not valid UTF-8", s);
        json_decref(v);
        return;
    }
    case LUA_TTABLE: {
        int array = is_array(L, idx);
        lua_pushnil(L);
        while (lua_next(L, idx) != 0) {
            if (!array) {
                if (lua_type(L, -2) != LUA_TSTRING) {
                    lua_pop(L, 2);
                    luaL_error(L, "json_encode: table keys must be 1..n or strings");
                }
                check_json(L, lua_absindex(L, -2), depth + 1);
            }
            check_json(L, lua_gettop(L), depth + 1);
            lua_pop(L, 1);
        }
        return;
    }
    default:
        luaL_error(L, "json_encode: a %s is not JSON", luaL_typename(L, idx));
    }
}

/* Builds the jansson value of a checked Lua value; NULL when out of memory (nothing leaks). */
static json_t *build(lua_State *L, int idx) {
    switch (lua_type(L, idx)) {
    case LUA_TBOOLEAN: return json_boolean(lua_toboolean(L, idx));
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) return json_integer((json_int_t)lua_tointeger(L, idx));
        return json_real(lua_tonumber(L, idx));
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        return json_stringn(s, n);
    }
    case LUA_TTABLE: {
        if (is_array(L, idx)) {
            json_t *v = json_array();
            lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
            for (lua_Integer i = 1; v && i <= n; i++) {
                lua_rawgeti(L, idx, i);
                json_t *x = build(L, lua_gettop(L));
                lua_pop(L, 1);
                if (!x || json_array_append_new(v, x) != 0) {
                    json_decref(v);
                    v = NULL;
                }
            }
            return v;
        }
        json_t *v = json_object();
        lua_pushnil(L);
        while (v && lua_next(L, idx) != 0) {
            json_t *x = build(L, lua_gettop(L));
            lua_pop(L, 1);
            if (!x || json_object_set_new(v, lua_tostring(L, -1), x) != 0) {
                json_decref(v);
                v = NULL;
                lua_pop(L, 1);
            }
        }
        return v;
    }
    default: return json_null();
    }
}

static int l_json_encode(lua_State *L) {
    luaL_checkany(L, 1);
    lua_settop(L, 1);
    check_json(L, 1, 0);
    l_jsonbox *b = push_box(L);
    b->root = build(L, 1);
    if (!b->root) return luaL_error(L, "json_encode: out of memory");
    const size_t flags = JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY;
    size_t n = json_dumpb(b->root, NULL, 0, flags);
    if (n == 0) return luaL_error(L, "json_encode: out of memory");
    luaL_Buffer buf;
    char *p = luaL_buffinitsize(L, &buf, n);
    json_dumpb(b->root, p, n, flags);
    luaL_pushresultsize(&buf, n);
    return 1;
}

void l_open_json(lua_State *L) {
    static const luaL_Reg fns[] = {{"json_decode", l_json_decode},
                                   {"json_encode", l_json_encode}, {NULL, NULL}};
    l_newclass(L, L_JSONBOX, NULL, l_jsonbox_gc, NULL);
    l_setfuncs(L, fns);
    lua_pushlightuserdata(L, &json_null_key);
    lua_setfield(L, -2, "json_null");
}
