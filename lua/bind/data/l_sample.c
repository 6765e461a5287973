/* l_sample.c: Lua binding of core/sample (row selection: gather, stratified, subsets,
 * permutations, slices, concatenation, label narrowing). Row-index tensors are int64 and 0-based,
 * like the idx/HDF5 files they index and h5py; they are data, never Lua indices (only
 * sample_slice's `first` is a 1-based Lua index). Every function raises on failure. */
#include "bind.h"
#include "data/sample.h"

/* core.sample_gather(t, rows) -> t[rows] (rows: int64, 0-based) */
static int l_sample_gather(lua_State *L) {
    hy_tensor *s = l_checktensor(L, 1);
    hy_tensor *ix = l_checktensor(L, 2);
    hy_tensor *t = l_pushtensor(L);
    if (hy_sample_gather(s, ix, t) != HY_OK) return l_raise(L);
    return 1;
}

/* core.sample_stratified(labels, n_classes, per_class, seed) -> keep_rows, hold_rows */
static int l_sample_stratified(lua_State *L) {
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
static int l_sample_subset(lua_State *L) {
    lua_Integer n = luaL_checkinteger(L, 1), k = luaL_checkinteger(L, 2);
    lua_Integer seed = luaL_checkinteger(L, 3);
    hy_tensor *t = l_pushtensor(L);
    if (hy_sample_subset((int64_t)n, (int64_t)k, (uint64_t)seed, t) != HY_OK) return l_raise(L);
    return 1;
}

/* core.sample_permutation(n, seed) -> int64 [n] random order of 0..n-1 */
static int l_sample_permutation(lua_State *L) {
    lua_Integer n = luaL_checkinteger(L, 1), seed = luaL_checkinteger(L, 2);
    hy_tensor *t = l_pushtensor(L);
    if (hy_sample_permutation((int64_t)n, (uint64_t)seed, t) != HY_OK) return l_raise(L);
    return 1;
}

/* core.sample_slice(t, first, count) -> copy of rows first .. first+count-1 (first 1-based) */
static int l_sample_slice(lua_State *L) {
    hy_tensor *s = l_checktensor(L, 1);
    lua_Integer first = luaL_checkinteger(L, 2), count = luaL_checkinteger(L, 3);
    luaL_argcheck(L, first >= 1, 2, "rows are numbered from 1");   /* first - 1 cannot wrap */
    hy_tensor *t = l_pushtensor(L);
    if (hy_sample_slice(s, (int64_t)first - 1, (int64_t)count, t) != HY_OK) return l_raise(L);
    return 1;
}

/* core.concat({t1, t2, ...}) -> rows of every tensor, in order */
static int l_sample_concat(lua_State *L) {
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
static int l_sample_labels_int16(lua_State *L) {
    hy_tensor *s = l_checktensor(L, 1);
    hy_tensor *t = l_pushtensor(L);
    if (hy_sample_labels16(s, t) != HY_OK) return l_raise(L);
    return 1;
}

void l_open_sample(lua_State *L) {
    static const luaL_Reg fns[] = {
        {"sample_gather", l_sample_gather},
        {"sample_stratified", l_sample_stratified},
        {"sample_subset", l_sample_subset},
        {"sample_permutation", l_sample_permutation},
        {"sample_slice", l_sample_slice},
        {"concat", l_sample_concat},
        {"labels_int16", l_sample_labels_int16},
        {NULL, NULL}};
    l_setfuncs(L, fns);
}
