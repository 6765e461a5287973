/* l_loader.c: Lua binding of core/loader (in-memory datasets and synthetic data).
 *   core.dataset_load(path, split [, subset [, mean, std]]) / core.dataset_from_images(images,
 *   labels, mean, std [, subset]) / core.dataset_from_text(ids, lengths, labels [, subset])
 *                                                      -> hydra.Dataset (ds:size() ds:kind()
 *                                                         ds:labels() ds:mean_std()
 *                                                         ds:seq_lens(B): text only)
 *   core.synth_images(n, size, classes, seed) -> images, labels
 *   core.synth_text(n, max_len, vocab, seed) -> ids, lengths, labels
 * subset: the first N samples (0 = all). mean, std: numbers, or arrays of one value per image
 * channel (ds:mean_std() returns arrays when the channels differ). */
#include <string.h>

#include "bind.h"
#include "data/loader.h"

typedef struct l_dataset { hy_dataset d; } l_dataset;

hy_dataset *l_checkdataset(lua_State *L, int arg) {
    l_dataset *u = luaL_checkudata(L, arg, L_DATASET);
    return &u->d;
}

hy_dataset *l_pushdataset(lua_State *L) {
    l_dataset *u = lua_newuserdatauv(L, sizeof *u, 0);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, L_DATASET);
    return &u->d;
}

static int l_dataset_gc(lua_State *L) {
    l_dataset *u = luaL_checkudata(L, 1, L_DATASET);
    hy_dataset_release(&u->d);
    return 0;
}

static size_t opt_subset(lua_State *L, int arg) {
    lua_Integer s = luaL_optinteger(L, arg, 0);
    luaL_argcheck(L, s >= 0, arg, "subset must be >= 0");
    return (size_t)s;
}

/* A normalisation argument pair at arg, arg+1: two numbers, or two arrays of the same length
 * 1..HY_DATA_MAXC (one value per channel). Returns the count; values into m[], s[]. */
static size_t check_norm(lua_State *L, int arg, double *m, double *s) {
    if (lua_type(L, arg) != LUA_TTABLE) {
        m[0] = luaL_checknumber(L, arg);
        s[0] = luaL_checknumber(L, arg + 1);
        return 1;
    }
    luaL_checktype(L, arg + 1, LUA_TTABLE);
    lua_Integer n = luaL_len(L, arg);
    luaL_argcheck(L, n >= 1 && n <= HY_DATA_MAXC && luaL_len(L, arg + 1) == n, arg,
                  "mean and std must be numbers or arrays of the same length (1 to 4)");
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, arg, i);
        lua_geti(L, arg + 1, i);
        m[i - 1] = luaL_checknumber(L, -2);
        s[i - 1] = luaL_checknumber(L, -1);
        lua_pop(L, 2);
    }
    return (size_t)n;
}

static int l_dataset_load(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    const char *split = luaL_checkstring(L, 2);
    size_t subset = opt_subset(L, 3);
    double m[HY_DATA_MAXC], sd[HY_DATA_MAXC], ms[2];
    int have_ms = !lua_isnoneornil(L, 4);
    size_t nm = have_ms ? check_norm(L, 4, m, sd) : 0;
    ms[0] = m[0];
    ms[1] = sd[0];
    hy_dataset *d = l_pushdataset(L);
    if (hy_dataset_load(d, path, split, subset, have_ms ? ms : NULL) != HY_OK) return l_raise(L);
    if (nm > 1 && d->kind == HY_DATA_IMAGE && hy_dataset_set_norm(d, m, sd, nm) != HY_OK) {
        hy_fail_prefix(HY_EINVAL, "%s:/%s", path, split);
        return l_raise(L);
    }
    return 1;
}

static int l_dataset_from_images(lua_State *L) {
    hy_tensor *img = l_checktensor(L, 1);
    hy_tensor *lab = l_checktensor(L, 2);
    double m[HY_DATA_MAXC], sd[HY_DATA_MAXC];
    size_t nm = check_norm(L, 3, m, sd);
    size_t subset = opt_subset(L, 5);
    hy_dataset *d = l_pushdataset(L);
    if (hy_dataset_from_images(d, img, lab, m[0], sd[0], subset) != HY_OK) return l_raise(L);
    if (nm > 1 && hy_dataset_set_norm(d, m, sd, nm) != HY_OK) return l_raise(L);
    return 1;
}

static int l_dataset_from_text(lua_State *L) {
    hy_tensor *ids = l_checktensor(L, 1);
    hy_tensor *len = l_checktensor(L, 2);
    hy_tensor *lab = l_checktensor(L, 3);
    size_t subset = opt_subset(L, 4);
    if (hy_dataset_from_text(l_pushdataset(L), ids, len, lab, subset) != HY_OK) return l_raise(L);
    return 1;
}

static int l_dataset_size(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)l_checkdataset(L, 1)->n);
    return 1;
}

static int l_dataset_kind(lua_State *L) {
    lua_pushstring(L, l_checkdataset(L, 1)->kind == HY_DATA_TEXT ? "text" : "image");
    return 1;
}

static int l_dataset_labels(lua_State *L) {
    hy_dataset *d = l_checkdataset(L, 1);
    int64_t n = (int64_t)d->n;
    hy_tensor *t = l_pushtensor(L);
    if (hy_tensor_alloc(t, HY_I32, 1, &n) != HY_OK) return l_raise(L);
    if (n) memcpy(t->data, d->labels, d->n * sizeof(int32_t));
    return 1;
}

/* ds:mean_std() -> mean, std: numbers, or arrays (one per channel) when an image dataset's
 * channels are normalised differently */
static int l_dataset_mean_std(lua_State *L) {
    hy_dataset *d = l_checkdataset(L, 1);
    int same = 1;
    for (size_t c = 1; d->kind == HY_DATA_IMAGE && c < d->c; c++)
        same &= d->cmean[c] == d->cmean[0] && d->cstd[c] == d->cstd[0];
    if (same) {
        lua_pushnumber(L, d->mean);
        lua_pushnumber(L, d->std);
        return 2;
    }
    for (int k = 0; k < 2; k++) {
        lua_createtable(L, (int)d->c, 0);
        for (size_t c = 0; c < d->c; c++) {
            lua_pushnumber(L, k ? d->cstd[c] : d->cmean[c]);
            lua_rawseti(L, -2, (lua_Integer)c + 1);
        }
    }
    return 2;
}

/* ds:seq_lens(batch_size) -> real, padded: Lua arrays indexed by T = 1 .. max_len + 1 (tokens with
 * CLS) counting the samples computed at T, alone (real) and in the padded batches of batch_size
 * that predict runs (padded); hy_dataset_seq_lens (text datasets only) */
static int l_dataset_seq_lens(lua_State *L) {
    hy_dataset *d = l_checkdataset(L, 1);
    lua_Integer B = luaL_checkinteger(L, 2);
    luaL_argcheck(L, B >= 1, 2, "batch size must be >= 1");
    size_t nT = d->max_len + 2;
    size_t *real = lua_newuserdatauv(L, 2 * nT * sizeof(size_t), 0);   /* GC owns the scratch */
    size_t *padded = real + nT;
    if (hy_dataset_seq_lens(d, (size_t)B, real, padded) != HY_OK) return l_raise(L);
    for (int k = 0; k < 2; k++) {
        const size_t *c = k == 0 ? real : padded;
        lua_createtable(L, (int)(nT - 1), 0);
        for (size_t T = 1; T < nT; T++) {
            lua_pushinteger(L, (lua_Integer)c[T]);
            lua_rawseti(L, -2, (lua_Integer)T);
        }
    }
    return 2;
}

static int l_synth_images(lua_State *L) {
    lua_Integer n = luaL_checkinteger(L, 1), size = luaL_checkinteger(L, 2);
    lua_Integer classes = luaL_checkinteger(L, 3), seed = luaL_checkinteger(L, 4);
    luaL_argcheck(L, n >= 0, 1, "n must be >= 0");
    luaL_argcheck(L, size >= 0, 2, "size must be >= 0");
    luaL_argcheck(L, classes >= 0, 3, "classes must be >= 0");
    hy_tensor *img = l_pushtensor(L);
    hy_tensor *lab = l_pushtensor(L);
    hy_tensor a, b;
    if (hy_synth_images(&a, &b, (size_t)n, (size_t)size, (size_t)classes, (uint64_t)seed) !=
        HY_OK)
        return l_raise(L);
    *img = a;   /* the boxes own them now */
    *lab = b;
    return 2;
}

static int l_synth_text(lua_State *L) {
    lua_Integer n = luaL_checkinteger(L, 1), len = luaL_checkinteger(L, 2);
    lua_Integer vocab = luaL_checkinteger(L, 3), seed = luaL_checkinteger(L, 4);
    luaL_argcheck(L, n >= 0, 1, "n must be >= 0");
    luaL_argcheck(L, len >= 0, 2, "max_len must be >= 0");
    luaL_argcheck(L, vocab >= 0, 3, "vocab must be >= 0");
    hy_tensor *ids = l_pushtensor(L);
    hy_tensor *lens = l_pushtensor(L);
    hy_tensor *lab = l_pushtensor(L);
    hy_tensor a, b, c;
    if (hy_synth_text(&a, &b, &c, (size_t)n, (size_t)len, (size_t)vocab, (uint64_t)seed) !=
        HY_OK)
        return l_raise(L);
    *ids = a;
    *lens = b;
    *lab = c;
    return 3;
}

void l_open_loader(lua_State *L) {
    static const luaL_Reg methods[] = {
        {"size", l_dataset_size}, {"kind", l_dataset_kind}, {"labels", l_dataset_labels},
        {"mean_std", l_dataset_mean_std}, {"seq_lens", l_dataset_seq_lens}, {NULL, NULL}};
    static const luaL_Reg fns[] = {
        {"dataset_load", l_dataset_load}, {"dataset_from_images", l_dataset_from_images},
        {"dataset_from_text", l_dataset_from_text}, {"synth_images", l_synth_images},
        {"synth_text", l_synth_text}, {NULL, NULL}};
    l_newclass(L, L_DATASET, methods, l_dataset_gc, NULL);
    l_setfuncs(L, fns);
}
