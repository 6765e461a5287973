/* l_wordpiece.c: Lua binding of core/data/wordpiece (BERT's tokenizer) and core/data/table
 * (CSV / TSV / JSONL records).
 *   core.wordpiece_load(path) -> WordPiece            core.wordpiece_from_tokens(list, what)
 *   wp:size()  wp:tokens() -> list  wp:sha256()  wp:specials() -> {pad=, unk=, cls=, sep=,
 *   mask=} (0-based ids, absent ones nil)  wp:set_options{do_lower_case=, strip_accents=
 *   (true|false|nil = follow do_lower_case), tokenize_chinese_chars=}
 *   wp:tokenize(s) -> list of 0-based ids (no [CLS]/[SEP])
 *   wp:encode(a [, b], max_len) -> ids list (max_len, padded), types list, len
 *   wp:encode_all(texts, max_len [, pairs]) -> ids int32 [N,max_len], lengths int32 [N],
 *                                     {truncated = records cut, pieces = ids before cutting,
 *                                      unk = [UNK] ids kept} [, type_ids int32 [N,max_len]
 *                                     with pairs: [CLS] a [SEP] b [SEP]]
 *   core.table_read(path, text_col [, label_col [, pair_col]]) -> { texts = {...},
 *                                     labels = {...} | nil, pairs = {...} | nil,
 *                                     lines = {...}, n = N, bytes = uint8 Tensor of the texts
 *                                     concatenated, offsets = int64 Tensor [N+1],
 *                                     pair_bytes, pair_offsets (with pair_col) }
 * Every function raises on failure ("wordpiece: ...", "table: ..."). */
#include <string.h>

#include "bind.h"
#include "data/table.h"
#include "data/wordpiece.h"

#define L_WORDPIECE "hydra.WordPiece"
#define L_TABLE "hydra.TextTable"

static int l_table_gc(lua_State *L) {
    hy_table_release(luaL_checkudata(L, 1, L_TABLE));
    return 0;
}

static hy_wordpiece *check_wp(lua_State *L, int arg) {
    return luaL_checkudata(L, arg, L_WORDPIECE);
}

static hy_wordpiece *push_wp(lua_State *L) {
    hy_wordpiece *wp = lua_newuserdatauv(L, sizeof *wp, 0);
    memset(wp, 0, sizeof *wp);
    luaL_setmetatable(L, L_WORDPIECE);
    return wp;
}

static int l_wp_gc(lua_State *L) {
    hy_wordpiece_release(check_wp(L, 1));
    return 0;
}

/* core.wordpiece_load(path) */
static int l_wordpiece_load(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    hy_wordpiece *wp = push_wp(L);
    if (hy_wordpiece_load(wp, path) != HY_OK) return l_raise(L);
    return 1;
}

/* core.wordpiece_from_tokens(list, what) */
static int l_wordpiece_from_tokens(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    const char *what = luaL_optstring(L, 2, "the vocab");
    lua_Integer n = luaL_len(L, 1);
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_geti(L, 1, i) != LUA_TSTRING)
            return luaL_error(L, "wordpiece: %s token %d is not a string", what, (int)(i - 1));
        lua_pop(L, 1);
    }
    /* the strings stay alive in the table while the core copies them */
    const char **tok = lua_newuserdatauv(L, (size_t)(n + 1) * sizeof *tok, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, 1, i);
        tok[i - 1] = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    hy_wordpiece *wp = push_wp(L);
    if (hy_wordpiece_from_tokens(wp, tok, (size_t)n, what) != HY_OK) return l_raise(L);
    return 1;
}

static int l_wp_size(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)check_wp(L, 1)->n);
    return 1;
}

static int l_wp_tokens(lua_State *L) {
    hy_wordpiece *wp = check_wp(L, 1);
    lua_createtable(L, (int)wp->n, 0);
    for (size_t i = 0; i < wp->n; i++) {
        lua_pushstring(L, hy_wordpiece_token(wp, i));
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int l_wp_sha256(lua_State *L) {
    char h[65];
    hy_wordpiece_sha256(check_wp(L, 1), h);
    lua_pushstring(L, h);
    return 1;
}

static int l_wp_specials(lua_State *L) {
    hy_wordpiece *wp = check_wp(L, 1);
    const char *names[5] = {"pad", "unk", "cls", "sep", "mask"};
    int32_t ids[5] = {wp->pad_id, wp->unk_id, wp->cls_id, wp->sep_id, wp->mask_id};
    lua_newtable(L);
    for (int k = 0; k < 5; k++)
        if (ids[k] >= 0) {
            lua_pushinteger(L, ids[k]);
            lua_setfield(L, -2, names[k]);
        }
    return 1;
}

/* wp:set_options{do_lower_case = bool, strip_accents = bool|nil, tokenize_chinese_chars = bool} */
static int l_wp_set_options(lua_State *L) {
    hy_wordpiece *wp = check_wp(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    if (lua_getfield(L, 2, "do_lower_case") != LUA_TNIL) wp->do_lower_case = lua_toboolean(L, -1);
    lua_pop(L, 1);
    int t = lua_getfield(L, 2, "strip_accents");
    wp->strip_accents = t == LUA_TNIL ? -1 : lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (lua_getfield(L, 2, "tokenize_chinese_chars") != LUA_TNIL)
        wp->tokenize_chinese_chars = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return 0;
}

static void push_ids(lua_State *L, const int32_t *v, size_t n) {
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushinteger(L, v[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

/* wp:tokenize(s) -> ids */
static int l_wp_tokenize(lua_State *L) {
    hy_wordpiece *wp = check_wp(L, 1);
    size_t len;
    const char *s = luaL_checklstring(L, 2, &len);
    hy_i32s out = {0};
    if (hy_wordpiece_tokenize(wp, s, len, &out) != HY_OK) return l_raise(L);
    lua_createtable(L, (int)out.n, 0);   /* may raise on memory: free first */
    for (size_t i = 0; i < out.n; i++) {
        lua_pushinteger(L, out.v[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    hy_i32s_release(&out);
    return 1;
}

/* wp:encode(a [, b], max_len) -> ids, types, len */
static int l_wp_encode(lua_State *L) {
    hy_wordpiece *wp = check_wp(L, 1);
    size_t la, lb = 0;
    const char *a = luaL_checklstring(L, 2, &la), *b = NULL;
    int mi = 3;
    if (lua_type(L, 3) == LUA_TSTRING) { b = lua_tolstring(L, 3, &lb); mi = 4; }
    lua_Integer ml = luaL_checkinteger(L, mi);
    luaL_argcheck(L, ml >= 2 && ml <= 1 << 20, mi, "max_len must be in [2, 1048576]");
    int32_t *ids = lua_newuserdatauv(L, 2 * (size_t)ml * sizeof(int32_t), 0);
    int32_t *types = ids + ml;
    size_t len = 0;
    if (hy_wordpiece_encode(wp, a, la, b, lb, (size_t)ml, ids, types, &len, NULL) != HY_OK)
        return l_raise(L);
    push_ids(L, ids, (size_t)ml);
    push_ids(L, types, (size_t)ml);
    lua_pushinteger(L, (lua_Integer)len);
    return 3;
}

/* wp:encode_all(texts, max_len [, pairs]) -> ids [N,L], lengths [N], stats [, types [N,L]] */
static int l_wp_encode_all(lua_State *L) {
    hy_wordpiece *wp = check_wp(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Integer ml = luaL_checkinteger(L, 3);
    luaL_argcheck(L, ml >= 2 && ml <= 1 << 20, 3, "max_len must be in [2, 1048576]");
    int pairs = !lua_isnoneornil(L, 4);
    if (pairs) luaL_checktype(L, 4, LUA_TTABLE);
    lua_Integer n = luaL_len(L, 2);
    if (pairs && luaL_len(L, 4) != n) return luaL_error(L, "wordpiece: %d texts but %d pairs",
                                                        (int)n, (int)luaL_len(L, 4));
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_geti(L, 2, i) != LUA_TSTRING)
            return luaL_error(L, "wordpiece: text %d is not a string", (int)i);
        lua_pop(L, 1);
        if (pairs && lua_geti(L, 4, i) != LUA_TSTRING)
            return luaL_error(L, "wordpiece: pair %d is not a string", (int)i);
        if (pairs) lua_pop(L, 1);
    }
    hy_tensor *ids = l_pushtensor(L);
    hy_tensor *lens = l_pushtensor(L);
    hy_tensor *types = pairs ? l_pushtensor(L) : NULL;
    int64_t s2[2] = {(int64_t)n, (int64_t)ml}, s1[1] = {(int64_t)n};
    if (hy_tensor_alloc(ids, HY_I32, 2, s2) != HY_OK || hy_tensor_alloc(lens, HY_I32, 1, s1) != HY_OK ||
        (types && hy_tensor_alloc(types, HY_I32, 2, s2) != HY_OK))
        return l_raise(L);
    int32_t *iv = ids->data, *lv = lens->data, *tv = types ? types->data : NULL;
    lua_Integer truncated = 0, pieces = 0, unk = 0;
    for (lua_Integer i = 1; i <= n; i++) {
        size_t tl, bl = 0, len = 0, cut = 0, row = (size_t)(i - 1) * (size_t)ml;
        lua_geti(L, 2, i);
        const char *t = lua_tolstring(L, -1, &tl), *b = NULL;
        if (pairs) {
            lua_geti(L, 4, i);
            b = lua_tolstring(L, -1, &bl);
        }
        hy_status st = hy_wordpiece_encode(wp, t, tl, b, bl, (size_t)ml, iv + row,
                                           tv ? tv + row : NULL, &len, &cut);
        lua_pop(L, pairs ? 2 : 1);
        if (st != HY_OK) {
            hy_fail_prefix(st, "text %d", (int)i);
            return l_raise(L);
        }
        lv[i - 1] = (int32_t)len;
        truncated += cut > 0;
        pieces += (lua_Integer)(len - (pairs ? 3 : 2) + cut);
        for (size_t j = 1; j < len; j++) unk += iv[row + j] == wp->unk_id;
    }
    lua_newtable(L);
    lua_pushinteger(L, truncated);
    lua_setfield(L, -2, "truncated");
    lua_pushinteger(L, pieces);
    lua_setfield(L, -2, "pieces");
    lua_pushinteger(L, unk);
    lua_setfield(L, -2, "unk");
    if (pairs) lua_rotate(L, -2, 1);   /* ids, lengths, stats, types */
    return pairs ? 4 : 3;
}

/* Pushes the n NUL-terminated strings of b (starting at off[i]) as a uint8 tensor of their
 * bytes, then an int64 [n+1] tensor of their offsets. */
static hy_status push_bytes(lua_State *L, const hy_buf *b, const int64_t *off, size_t n) {
    size_t total = b->len - n;   /* without the NULs */
    hy_tensor *bytes = l_pushtensor(L);
    int64_t bs[1] = {(int64_t)total};
    HY_TRY(hy_tensor_alloc(bytes, HY_U8, 1, bs));
    hy_tensor *offs = l_pushtensor(L);
    int64_t os[1] = {(int64_t)n + 1};
    HY_TRY(hy_tensor_alloc(offs, HY_I64, 1, os));
    int64_t *ov = offs->data, at = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = b->data + off[i];
        size_t len = strlen(s);
        ov[i] = at;
        memcpy((uint8_t *)bytes->data + at, s, len);
        at += (int64_t)len;
    }
    ov[n] = at;
    return HY_OK;
}

/* core.table_read(path, text_col [, label_col [, pair_col]]) */
static int l_table_read(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    const char *tc = luaL_checkstring(L, 2);
    const char *lc = luaL_optstring(L, 3, NULL);
    const char *pc = luaL_optstring(L, 4, NULL);
    hy_table *t = lua_newuserdatauv(L, sizeof *t, 0);   /* box first: its __gc frees t */
    memset(t, 0, sizeof *t);
    luaL_setmetatable(L, L_TABLE);
    if (hy_table_read(path, tc, pc, lc, t) != HY_OK) return l_raise(L);
    lua_createtable(L, 0, 4);
    lua_createtable(L, (int)t->n, 0);
    for (size_t i = 0; i < t->n; i++) {
        lua_pushstring(L, t->text.data + t->text_off[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "texts");
    if (lc) {
        lua_createtable(L, (int)t->n, 0);
        for (size_t i = 0; i < t->n; i++) {
            lua_pushstring(L, t->label.data + t->label_off[i]);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        lua_setfield(L, -2, "labels");
    }
    if (pc) {
        lua_createtable(L, (int)t->n, 0);
        for (size_t i = 0; i < t->n; i++) {
            lua_pushstring(L, t->pair.data + t->pair_off[i]);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        lua_setfield(L, -2, "pairs");
    }
    lua_createtable(L, (int)t->n, 0);
    for (size_t i = 0; i < t->n; i++) {
        lua_pushinteger(L, t->line[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "lines");
    lua_pushinteger(L, (lua_Integer)t->n);
    lua_setfield(L, -2, "n");
    /* the raw texts as one byte tensor + offsets [N+1] (the prepared format's /<split>/text) */
    if (push_bytes(L, &t->text, t->text_off, t->n) != HY_OK) return l_raise(L);
    lua_setfield(L, -3, "offsets");
    lua_setfield(L, -2, "bytes");
    if (pc) {
        if (push_bytes(L, &t->pair, t->pair_off, t->n) != HY_OK) return l_raise(L);
        lua_setfield(L, -3, "pair_offsets");
        lua_setfield(L, -2, "pair_bytes");
    }
    hy_table_release(t);
    return 1;
}

void l_open_wordpiece(lua_State *L) {
    static const luaL_Reg methods[] = {
        {"size", l_wp_size}, {"tokens", l_wp_tokens}, {"sha256", l_wp_sha256},
        {"specials", l_wp_specials}, {"set_options", l_wp_set_options},
        {"tokenize", l_wp_tokenize}, {"encode", l_wp_encode}, {"encode_all", l_wp_encode_all},
        {NULL, NULL}};
    static const luaL_Reg fns[] = {
        {"wordpiece_load", l_wordpiece_load}, {"wordpiece_from_tokens", l_wordpiece_from_tokens},
        {"table_read", l_table_read}, {NULL, NULL}};
    static const luaL_Reg none[] = {{NULL, NULL}};
    l_newclass(L, L_WORDPIECE, methods, l_wp_gc, NULL);
    l_newclass(L, L_TABLE, none, l_table_gc, NULL);
    l_setfuncs(L, fns);
}
