/* l_config.c: Lua binding of core/config (YAML -> Lua values).
 *   core.yaml_parse(text, name) -> value, pos      core.yaml_load(path) -> value, pos
 *   core.yaml_null                                 the value YAML null becomes (a light userdata)
 * value: maps become tables keyed by the key text, sequences arrays, scalars Lua values typed by
 * the core (integer, float, boolean, string, core.yaml_null).
 * pos mirrors value: { line=, col=, kind=, style=, sub= } where kind is "null", "boolean",
 * "integer", "float", "string", "list" or "map"; style "plain", "single", "double", "literal",
 * "folded", "block" or "flow"; for a list, sub[i] is item i's pos; for a map, sub[key] is the
 * value's pos (with key_line, key_col: where the key is written) and order lists the keys in
 * file order. Lines and columns are 1-based. Errors raise the core message
 * ("x.yaml:4:6: did not find expected ',' or ']' (while parsing a flow sequence)"). */
#include <string.h>

#include "bind.h"
#include "io/config.h"

#define L_CONFIGDOC "hydra.ConfigDoc"

static const char yaml_null_key = 0;   /* its address is the null sentinel */

typedef struct l_configdoc {
    hy_config_doc doc;
} l_configdoc;

static int l_configdoc_gc(lua_State *L) {
    l_configdoc *u = luaL_checkudata(L, 1, L_CONFIGDOC);
    hy_config_free(&u->doc);
    return 0;
}

static const char *style_name(hy_config_style s) {
    switch (s) {
    case HY_CONFIG_PLAIN: return "plain";
    case HY_CONFIG_SINGLE_QUOTED: return "single";
    case HY_CONFIG_DOUBLE_QUOTED: return "double";
    case HY_CONFIG_LITERAL: return "literal";
    case HY_CONFIG_FOLDED: return "folded";
    case HY_CONFIG_BLOCK: return "block";
    case HY_CONFIG_FLOW: return "flow";
    }
    return "?";
}

/* Pushes the value of n, then its pos table. Depth is bounded by HY_CONFIG_MAXDEPTH. */
static void push_node(lua_State *L, const hy_config_node *n) {
    luaL_checkstack(L, 8, "config: YAML nested too deeply");
    switch (n->kind) {
    case HY_CONFIG_NULL: lua_pushlightuserdata(L, (void *)(uintptr_t)&yaml_null_key); break;
    case HY_CONFIG_BOOL: lua_pushboolean(L, n->i != 0); break;
    case HY_CONFIG_INT: lua_pushinteger(L, (lua_Integer)n->i); break;
    case HY_CONFIG_FLOAT: lua_pushnumber(L, (lua_Number)n->f); break;
    case HY_CONFIG_STR: lua_pushlstring(L, n->text, n->len); break;
    case HY_CONFIG_SEQ: lua_createtable(L, (int)(n->n < 1024 ? n->n : 1024), 0); break;
    case HY_CONFIG_MAP: lua_createtable(L, 0, (int)(n->n < 1024 ? n->n : 1024)); break;
    }
    int val = lua_gettop(L);
    lua_createtable(L, 0, 6);
    int pos = lua_gettop(L);
    lua_pushinteger(L, (lua_Integer)n->line);
    lua_setfield(L, pos, "line");
    lua_pushinteger(L, (lua_Integer)n->col);
    lua_setfield(L, pos, "col");
    lua_pushstring(L, hy_config_kind_name(n->kind));
    lua_setfield(L, pos, "kind");
    lua_pushstring(L, style_name(n->style));
    lua_setfield(L, pos, "style");
    if (n->kind != HY_CONFIG_SEQ && n->kind != HY_CONFIG_MAP) return;

    lua_newtable(L);
    int sub = lua_gettop(L);
    int order = 0;
    if (n->kind == HY_CONFIG_MAP) {
        lua_createtable(L, (int)(n->n < 1024 ? n->n : 1024), 0);
        order = lua_gettop(L);
    }
    for (size_t i = 0; i < n->n; i++) {
        if (n->kind == HY_CONFIG_SEQ) {
            push_node(L, &n->items[i]);                /* val pos sub cval cpos */
            lua_rawseti(L, sub, (lua_Integer)i + 1);
            lua_rawseti(L, val, (lua_Integer)i + 1);
            continue;
        }
        const hy_config_node *k = &n->items[2 * i];
        lua_pushlstring(L, k->text, k->len);
        lua_rawseti(L, order, (lua_Integer)i + 1);
        push_node(L, &n->items[2 * i + 1]);            /* ... cval cpos */
        lua_pushinteger(L, (lua_Integer)k->line);
        lua_setfield(L, -2, "key_line");
        lua_pushinteger(L, (lua_Integer)k->col);
        lua_setfield(L, -2, "key_col");
        lua_pushlstring(L, k->text, k->len);
        lua_insert(L, -2);                             /* ... cval key cpos */
        lua_rawset(L, sub);                            /* sub[key] = cpos */
        lua_pushlstring(L, k->text, k->len);
        lua_insert(L, -2);                             /* ... key cval */
        lua_rawset(L, val);                            /* val[key] = cval */
    }
    if (order) lua_setfield(L, pos, "order");
    lua_setfield(L, pos, "sub");
}

/* Pushes a box, runs parse(doc) into it, converts, frees; returns 2 (value, pos). */
static int parse_and_push(lua_State *L, const char *text, size_t len, const char *name,
                          const char *path) {
    l_configdoc *u = lua_newuserdatauv(L, sizeof *u, 0);   /* box first: GC owns the doc */
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, L_CONFIGDOC);
    hy_status st = path ? hy_config_load(&u->doc, path) : hy_config_parse(&u->doc, text, len, name);
    if (st != HY_OK) return l_raise(L);
    push_node(L, &u->doc.root);
    hy_config_free(&u->doc);
    return 2;
}

/* core.yaml_parse(text, name) -> value, pos */
static int l_config_parse(lua_State *L) {
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    const char *name = luaL_optstring(L, 2, "<string>");
    return parse_and_push(L, text, len, name, NULL);
}

/* core.yaml_load(path) -> value, pos */
static int l_config_load(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    return parse_and_push(L, NULL, 0, NULL, path);
}

void l_open_config(lua_State *L) {
    static const luaL_Reg fns[] = {{"yaml_parse", l_config_parse},
                                   {"yaml_load", l_config_load},
                                   {NULL, NULL}};
    l_newclass(L, L_CONFIGDOC, NULL, l_configdoc_gc, NULL);
    l_setfuncs(L, fns);
    lua_pushlightuserdata(L, (void *)(uintptr_t)&yaml_null_key);
    lua_setfield(L, -2, "yaml_null");
}
