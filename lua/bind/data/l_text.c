/* l_text.c: Lua binding of core/data/text.h (textnorm, corpus with its readers, vocab).
 *   core.text_normalize(s [, news]) -> normalised string, token count
 *   core.text_read_tsv(path, {ncols=, text=, label=, header=, news=}) -> Corpus
 *   core.text_read_lines(path, {label_prefix=, news=}) -> Corpus
 *   core.text_read_records(path, {news=}) -> Corpus           (fortune files)
 *   core.text_read_wordnet(path [, {news=}]) -> Corpus         (WordNet glosses and examples)
 *   core.text_read_arff(path, {attr=, news=}) -> Corpus
 *   core.text_corpus(bytes_u8, offsets_i64 [, labels_i16 [, news]]) -> Corpus (re-normalised)
 *   core.text_corpus_new() -> empty Corpus;  core.text_normalization, core.text_reserved
 *   c:size() #c c:get(i) -> raw, norm, label, ntok   c:labels() -> int16 [N]
 *   c:ntokens() -> int32 [N]   c:text() -> uint8 [bytes], int64 [N+1]   c:append(other)
 *   c:take({i...}) c:split(nheld, seed, stratify) -> rest, held
 *   c:filter{dedup=, exclude=} -> Corpus, dropped
 *   core.vocab_build(corpus, min_count, max_size) -> Vocab; core.vocab_from_words({w...})
 *   v:size() #v v:word(id) v:id(word) -> id|nil  v:words() -> {w...} (words[1] is id 0)
 *   v:counts() -> int64 [V]  v:sha256()  v:encode(corpus, max_len) -> ids int32 [N,L], lengths,
 *                                            {n=, tokens=, unk=, truncated=}
 * Record indices (get/take) are 1-based; vocabulary ids are the ids themselves (0 = PAD).
 * Column numbers in read_tsv are 1-based. */
#include <string.h>

#include "bind.h"
#include "data/text.h"

#define L_CORPUS "hydra.Corpus"
#define L_VOCAB "hydra.Vocab"

static hy_corpus *check_corpus(lua_State *L, int arg) { return luaL_checkudata(L, arg, L_CORPUS); }
static hy_vocab *check_vocab(lua_State *L, int arg) { return luaL_checkudata(L, arg, L_VOCAB); }

static hy_corpus *push_corpus(lua_State *L) {
    hy_corpus *c = lua_newuserdatauv(L, sizeof *c, 0);
    memset(c, 0, sizeof *c);
    luaL_setmetatable(L, L_CORPUS);
    return c;
}

static hy_vocab *push_vocab(lua_State *L) {
    hy_vocab *v = lua_newuserdatauv(L, sizeof *v, 0);
    memset(v, 0, sizeof *v);
    luaL_setmetatable(L, L_VOCAB);
    return v;
}

/* opts.key as a boolean (absent: 0); raises on a non-boolean */
static int opt_bool(lua_State *L, int opts, const char *key) {
    if (lua_isnoneornil(L, opts)) return 0;
    int t = lua_getfield(L, opts, key);
    int v = lua_toboolean(L, -1);
    if (t != LUA_TNIL && t != LUA_TBOOLEAN)
        luaL_argerror(L, opts, lua_pushfstring(L, "field '%s' must be a boolean", key));
    lua_pop(L, 1);
    return v;
}

static lua_Integer opt_int(lua_State *L, int opts, const char *key, lua_Integer dflt) {
    if (lua_isnoneornil(L, opts)) return dflt;
    int t = lua_getfield(L, opts, key);
    lua_Integer v = dflt;
    if (t != LUA_TNIL) {
        int ok;
        v = lua_tointegerx(L, -1, &ok);
        if (!ok) luaL_argerror(L, opts, lua_pushfstring(L, "field '%s' must be an integer", key));
    }
    lua_pop(L, 1);
    return v;
}

static unsigned news_flag(lua_State *L, int opts) {
    return opt_bool(L, opts, "news") ? (unsigned)HY_TEXT_NEWS : 0u;
}

#define L_TEXTBUF "hydra.TextBuf"

/* A boxed hy_buf: scratch that the GC frees even when a later push raises (out of memory). */
static int l_textbuf_gc(lua_State *L) {
    hy_buf_release(luaL_checkudata(L, 1, L_TEXTBUF));
    return 0;
}

static int l_text_normalize(lua_State *L) {
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    unsigned flags = lua_toboolean(L, 2) ? (unsigned)HY_TEXT_NEWS : 0u;
    hy_buf *out = lua_newuserdatauv(L, sizeof *out, 0);   /* box first: GC owns the buffer */
    memset(out, 0, sizeof *out);
    luaL_setmetatable(L, L_TEXTBUF);
    size_t ntok = 0;
    if (hy_text_normalize(out, s, n, flags, &ntok) != HY_OK) return l_raise(L);
    lua_pushlstring(L, out->data ? out->data : "", out->len);
    hy_buf_release(out);                                  /* early; __gc finds it empty */
    lua_pushinteger(L, (lua_Integer)ntok);
    return 2;
}

static int l_text_read_tsv(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    hy_tsv_spec spec;
    spec.ncols = (int)opt_int(L, 2, "ncols", 0);
    spec.text_col = (int)opt_int(L, 2, "text", 0) - 1;
    spec.label_col = (int)opt_int(L, 2, "label", 0) - 1;
    spec.header = opt_bool(L, 2, "header");
    luaL_argcheck(L, spec.ncols >= 1 && spec.ncols <= 64, 2, "ncols must be in [1, 64]");
    luaL_argcheck(L, spec.text_col >= 0 && spec.text_col < spec.ncols, 2,
                  "text must be a column in [1, ncols]");
    luaL_argcheck(L, spec.label_col >= -1 && spec.label_col < spec.ncols &&
                  spec.label_col != spec.text_col, 2,
                  "label must be nil or a column in [1, ncols] other than text");
    unsigned flags = news_flag(L, 2);
    hy_corpus *c = push_corpus(L);
    if (hy_text_read_tsv(c, path, &spec, flags) != HY_OK) return l_raise(L);
    return 1;
}

static int l_text_read_lines(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    int label_prefix = opt_bool(L, 2, "label_prefix");
    unsigned flags = news_flag(L, 2);
    hy_corpus *c = push_corpus(L);
    if (hy_text_read_lines(c, path, label_prefix, flags) != HY_OK) return l_raise(L);
    return 1;
}

static int l_text_read_wordnet(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    unsigned flags = news_flag(L, 2);
    hy_corpus *c = push_corpus(L);
    if (hy_text_read_wordnet(c, path, flags) != HY_OK) return l_raise(L);
    return 1;
}

static int l_text_read_records(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    unsigned flags = news_flag(L, 2);
    hy_corpus *c = push_corpus(L);
    if (hy_text_read_records(c, path, flags) != HY_OK) return l_raise(L);
    return 1;
}

static int l_text_read_arff(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    const char *attr = NULL;
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        if (lua_getfield(L, 2, "attr") != LUA_TNIL) {
            if (lua_type(L, -1) != LUA_TSTRING) luaL_argerror(L, 2, "field 'attr' must be a string");
            attr = lua_tostring(L, -1);       /* stays on the stack while used */
        }
    }
    unsigned flags = news_flag(L, 2);
    hy_corpus *c = push_corpus(L);
    if (hy_text_read_arff(c, path, attr, flags) != HY_OK) return l_raise(L);
    return 1;
}

static int l_text_corpus(lua_State *L) {
    hy_tensor *bytes = l_checktensor(L, 1), *off = l_checktensor(L, 2), *lab = NULL;
    luaL_argcheck(L, bytes->dtype == HY_U8 && bytes->ndim == 1, 1, "expected a 1-d uint8 tensor");
    luaL_argcheck(L, off->dtype == HY_I64 && off->ndim == 1 && off->shape[0] >= 1, 2,
                  "expected a 1-d int64 tensor of N+1 offsets");
    size_t n = (size_t)off->shape[0] - 1;
    const int64_t *o = off->data;
    if (!lua_isnoneornil(L, 3)) {
        lab = l_checktensor(L, 3);
        luaL_argcheck(L, lab->dtype == HY_I16 && lab->ndim == 1 && (size_t)lab->shape[0] == n, 3,
                      "expected a 1-d int16 tensor of N labels");
    }
    for (size_t i = 0; i < n; i++)
        if (o[0] != 0 || o[i] > o[i + 1] || o[i + 1] > bytes->shape[0])
            luaL_argerror(L, 2, lua_pushfstring(L, "offsets not increasing within [0, %I] at %I",
                                                (lua_Integer)bytes->shape[0], (lua_Integer)i + 1));
    unsigned flags = lua_toboolean(L, 4) ? (unsigned)HY_TEXT_NEWS : 0u;
    hy_corpus *c = push_corpus(L);
    const char *b = bytes->data;
    for (size_t i = 0; i < n; i++) {
        int16_t label = lab ? ((const int16_t *)lab->data)[i] : (int16_t)-1;
        if (hy_corpus_add(c, b + o[i], (size_t)(o[i + 1] - o[i]), label, flags) != HY_OK)
            return l_raise(L);
    }
    return 1;
}

static int l_text_corpus_new(lua_State *L) {
    push_corpus(L);
    return 1;
}

/* ===== Corpus methods ===== */

static int l_corpus_size(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)check_corpus(L, 1)->n);
    return 1;
}

static int l_corpus_get(lua_State *L) {
    hy_corpus *c = check_corpus(L, 1);
    size_t i = l_checkindex(L, 2, c->n), rl, nl;
    const char *r = hy_corpus_raw(c, i, &rl), *m = hy_corpus_norm(c, i, &nl);
    lua_pushlstring(L, r, rl);
    lua_pushlstring(L, m, nl);
    lua_pushinteger(L, c->labels[i]);
    lua_pushinteger(L, c->ntok[i]);
    return 4;
}

static int l_corpus_labels(lua_State *L) {
    hy_corpus *c = check_corpus(L, 1);
    int64_t shape[1] = {(int64_t)c->n};
    hy_tensor *t = l_pushtensor(L);
    if (hy_tensor_alloc(t, HY_I16, 1, shape) != HY_OK) return l_raise(L);
    if (c->n) memcpy(t->data, c->labels, c->n * sizeof *c->labels);
    return 1;
}

static int l_corpus_ntokens(lua_State *L) {
    hy_corpus *c = check_corpus(L, 1);
    int64_t shape[1] = {(int64_t)c->n};
    hy_tensor *t = l_pushtensor(L);
    if (hy_tensor_alloc(t, HY_I32, 1, shape) != HY_OK) return l_raise(L);
    if (c->n) memcpy(t->data, c->ntok, c->n * sizeof *c->ntok);
    return 1;
}

/* c:text() -> raw bytes uint8 [total], offsets int64 [N+1] */
static int l_corpus_text(lua_State *L) {
    hy_corpus *c = check_corpus(L, 1);
    int64_t nb[1] = {c->n ? c->raw_off[c->n] : 0}, no[1] = {(int64_t)c->n + 1};
    hy_tensor *b = l_pushtensor(L);
    if (hy_tensor_alloc(b, HY_U8, 1, nb) != HY_OK) return l_raise(L);
    if (nb[0]) memcpy(b->data, c->raw.data, (size_t)nb[0]);
    hy_tensor *o = l_pushtensor(L);
    if (hy_tensor_alloc(o, HY_I64, 1, no) != HY_OK) return l_raise(L);
    if (c->n) memcpy(o->data, c->raw_off, (c->n + 1) * sizeof *c->raw_off);
    return 2;
}

static int l_corpus_append(lua_State *L) {
    hy_corpus *c = check_corpus(L, 1), *o = check_corpus(L, 2);
    luaL_argcheck(L, c != o, 2, "cannot append a corpus to itself");
    if (hy_corpus_append(c, o) != HY_OK) return l_raise(L);
    lua_settop(L, 1);
    return 1;
}

static int l_corpus_take(lua_State *L) {
    hy_corpus *c = check_corpus(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    size_t k = (size_t)luaL_len(L, 2);
    int64_t *idx = lua_newuserdatauv(L, (k + 1) * sizeof *idx, 0);   /* GC-owned scratch */
    for (size_t j = 0; j < k; j++) {
        lua_geti(L, 2, (lua_Integer)j + 1);
        int ok;
        lua_Integer i = lua_tointegerx(L, -1, &ok);
        lua_pop(L, 1);
        if (!ok || i < 1 || (lua_Unsigned)i > c->n)
            luaL_argerror(L, 2, lua_pushfstring(L, "entry %I is not an index in [1, %I]",
                                                (lua_Integer)j + 1, (lua_Integer)c->n));
        idx[j] = (int64_t)(i - 1);
    }
    hy_corpus *d = push_corpus(L);
    if (hy_corpus_take(d, c, idx, k) != HY_OK) return l_raise(L);
    return 1;
}

static int l_corpus_split(lua_State *L) {
    hy_corpus *c = check_corpus(L, 1);
    lua_Integer nheld = luaL_checkinteger(L, 2);
    lua_Integer seed = luaL_checkinteger(L, 3);
    int stratify = lua_toboolean(L, 4);
    luaL_argcheck(L, nheld >= 0, 2, "must be >= 0");
    hy_corpus *rest = push_corpus(L), *held = push_corpus(L);
    if (hy_corpus_split(rest, held, c, (size_t)nheld, (uint64_t)seed, stratify) != HY_OK)
        return l_raise(L);
    return 2;
}

static int l_corpus_filter(lua_State *L) {
    hy_corpus *c = check_corpus(L, 1), *ex = NULL;
    int dedup = opt_bool(L, 2, "dedup");
    if (!lua_isnoneornil(L, 2)) {
        if (lua_getfield(L, 2, "exclude") != LUA_TNIL) {
            ex = luaL_testudata(L, -1, L_CORPUS);
            if (!ex) luaL_argerror(L, 2, "field 'exclude' must be a hydra.Corpus");
        }
    }
    luaL_argcheck(L, ex != c, 2, "a corpus cannot exclude itself");
    hy_corpus *d = push_corpus(L);
    size_t dropped = 0;
    if (hy_corpus_filter(d, c, dedup, ex, &dropped) != HY_OK) return l_raise(L);
    lua_pushinteger(L, (lua_Integer)dropped);
    return 2;
}

static int l_corpus_gc(lua_State *L) {
    hy_corpus_release(check_corpus(L, 1));
    return 0;
}

/* ===== vocabulary ===== */

static int l_vocab_build(lua_State *L) {
    hy_corpus *c = check_corpus(L, 1);
    lua_Integer min_count = luaL_checkinteger(L, 2);
    lua_Integer max_size = luaL_checkinteger(L, 3);
    hy_vocab *v = push_vocab(L);
    if (hy_vocab_build(v, c, (int64_t)min_count, (int64_t)max_size) != HY_OK) return l_raise(L);
    return 1;
}

static int l_vocab_from_words(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    size_t n = (size_t)luaL_len(L, 1);
    const char **w = lua_newuserdatauv(L, (n + 1) * sizeof *w, 0);   /* GC-owned scratch */
    for (size_t i = 0; i < n; i++) {
        lua_geti(L, 1, (lua_Integer)i + 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_argerror(L, 1, lua_pushfstring(L, "entry %I is not a string", (lua_Integer)i + 1));
        w[i] = lua_tostring(L, -1);
        lua_pop(L, 1);                /* the table keeps the string alive */
    }
    hy_vocab *v = push_vocab(L);
    if (hy_vocab_from_words(v, w, n) != HY_OK) return l_raise(L);
    return 1;
}

static int l_vocab_size(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)check_vocab(L, 1)->n);
    return 1;
}

static int l_vocab_word(lua_State *L) {
    hy_vocab *v = check_vocab(L, 1);
    lua_Integer id = luaL_checkinteger(L, 2);
    if (id < 0 || (lua_Unsigned)id >= v->n)
        luaL_argerror(L, 2, lua_pushfstring(L, "id %I out of range [0, %I]", id,
                                            (lua_Integer)v->n - 1));
    lua_pushstring(L, hy_vocab_word(v, (size_t)id));
    return 1;
}

static int l_vocab_id(lua_State *L) {
    hy_vocab *v = check_vocab(L, 1);
    size_t n;
    const char *w = luaL_checklstring(L, 2, &n);
    int32_t id = hy_vocab_lookup(v, w, n);
    if (id < 0) lua_pushnil(L);
    else lua_pushinteger(L, id);
    return 1;
}

static int l_vocab_words(lua_State *L) {
    hy_vocab *v = check_vocab(L, 1);
    lua_createtable(L, (int)v->n, 0);
    for (size_t i = 0; i < v->n; i++) {
        lua_pushstring(L, hy_vocab_word(v, i));
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int l_vocab_counts(lua_State *L) {
    hy_vocab *v = check_vocab(L, 1);
    int64_t shape[1] = {(int64_t)v->n};
    hy_tensor *t = l_pushtensor(L);
    if (hy_tensor_alloc(t, HY_I64, 1, shape) != HY_OK) return l_raise(L);
    if (v->n) memcpy(t->data, v->counts, v->n * sizeof *v->counts);
    return 1;
}

static int l_vocab_sha256(lua_State *L) {
    char hex[65];
    hy_vocab_sha256(check_vocab(L, 1), hex);
    lua_pushstring(L, hex);
    return 1;
}

static int l_vocab_encode(lua_State *L) {
    hy_vocab *v = check_vocab(L, 1);
    hy_corpus *c = check_corpus(L, 2);
    lua_Integer max_len = luaL_checkinteger(L, 3);
    luaL_argcheck(L, max_len >= 1, 3, "max_len must be >= 1");
    hy_tensor *ids = l_pushtensor(L), *len = l_pushtensor(L);
    hy_text_stats st;
    if (hy_text_encode(ids, len, v, c, (int64_t)max_len, &st) != HY_OK) return l_raise(L);
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, (lua_Integer)c->n);
    lua_setfield(L, -2, "n");
    lua_pushinteger(L, st.tokens);
    lua_setfield(L, -2, "tokens");
    lua_pushinteger(L, st.unk);
    lua_setfield(L, -2, "unk");
    lua_pushinteger(L, st.truncated);
    lua_setfield(L, -2, "truncated");
    return 3;
}

static int l_vocab_gc(lua_State *L) {
    hy_vocab_release(check_vocab(L, 1));
    return 0;
}

void l_open_text(lua_State *L) {
    static const luaL_Reg corpus_m[] = {
        {"size", l_corpus_size},       {"get", l_corpus_get},       {"labels", l_corpus_labels},
        {"ntokens", l_corpus_ntokens}, {"text", l_corpus_text},     {"append", l_corpus_append},
        {"take", l_corpus_take},       {"split", l_corpus_split},   {"filter", l_corpus_filter},
        {NULL, NULL}};
    static const luaL_Reg vocab_m[] = {
        {"size", l_vocab_size},     {"word", l_vocab_word},     {"id", l_vocab_id},
        {"words", l_vocab_words},   {"counts", l_vocab_counts}, {"sha256", l_vocab_sha256},
        {"encode", l_vocab_encode}, {NULL, NULL}};
    static const luaL_Reg fns[] = {
        {"text_normalize", l_text_normalize},
        {"text_read_tsv", l_text_read_tsv},
        {"text_read_lines", l_text_read_lines},
        {"text_read_records", l_text_read_records}, {"text_read_wordnet", l_text_read_wordnet},
        {"text_read_arff", l_text_read_arff},
        {"text_corpus", l_text_corpus},
        {"text_corpus_new", l_text_corpus_new},
        {"vocab_build", l_vocab_build},
        {"vocab_from_words", l_vocab_from_words},
        {NULL, NULL}};
    static const luaL_Reg corpus_meta[] = {{"__len", l_corpus_size}, {NULL, NULL}};
    static const luaL_Reg vocab_meta[] = {{"__len", l_vocab_size}, {NULL, NULL}};
    l_newclass(L, L_CORPUS, corpus_m, l_corpus_gc, NULL);
    l_setmeta(L, L_CORPUS, corpus_meta);
    l_newclass(L, L_VOCAB, vocab_m, l_vocab_gc, NULL);
    l_setmeta(L, L_VOCAB, vocab_meta);
    l_newclass(L, L_TEXTBUF, NULL, l_textbuf_gc, NULL);
    l_setfuncs(L, fns);
    lua_pushstring(L, HY_TEXT_NORMALIZATION);
    lua_setfield(L, -2, "text_normalization");
    lua_createtable(L, HY_TOK_NRESERVED, 0);
    for (int i = 0; i < HY_TOK_NRESERVED; i++) {
        lua_pushstring(L, hy_tok_reserved[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "text_reserved");
    lua_pushinteger(L, HY_TEXT_NORM_VERSION);
    lua_setfield(L, -2, "text_norm_version");
}
