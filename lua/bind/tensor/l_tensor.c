/* l_tensor.c: the hydra.Tensor userdata (typed n-d arrays handed between Lua and the core).
 *   core.tensor(dtype, d1, ..., dn)         zeros
 *   core.from_table(dtype, values [, shape]) flat or nested Lua table -> tensor
 *   t:dtype() t:ndim() t:size(i) t:shape() t:numel() t:get(i, ...) t:set(i, ..., v)
 *   t:row(i) (view; keeps t alive) t:flat() t:totable() t:fill(v) t:clone()
 *   core.mean_first(t) -> the mean over dim 1 of a float32 [K, ...] tensor (accumulated in
 *                         double), e.g. MC-dropout passes [K,N,C] -> [N,C]
 * Views pin their owner through uservalue 1. Tensors have __gc only (no __close): a view may
 * still point into the data. */
#include <math.h>
#include <string.h>

#include "bind.h"

typedef struct l_tensor {
    hy_tensor t;
} l_tensor;

hy_tensor *l_checktensor(lua_State *L, int arg) {
    l_tensor *u = luaL_checkudata(L, arg, L_TENSOR);
    return &u->t;
}

hy_tensor *l_pushtensor(lua_State *L) {
    l_tensor *u = lua_newuserdatauv(L, sizeof *u, 1);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, L_TENSOR);
    return &u->t;
}

static hy_dtype check_dtype(lua_State *L, int arg) {
    const char *name = luaL_checkstring(L, arg);
    hy_dtype dt;
    if (hy_dtype_parse(name, &dt) != HY_OK) luaL_argerror(L, arg, hy_errmsg());
    return dt;
}

static double get_elem(const hy_tensor *t, size_t i) {
    switch (t->dtype) {
    case HY_F32: return (double)((const float *)t->data)[i];
    case HY_F64: return ((const double *)t->data)[i];
    case HY_U8: return ((const uint8_t *)t->data)[i];
    case HY_I8: return ((const int8_t *)t->data)[i];
    case HY_I16: return ((const int16_t *)t->data)[i];
    case HY_I32: return ((const int32_t *)t->data)[i];
    case HY_I64: return (double)((const int64_t *)t->data)[i];
    default: HY_ASSERT(0);
    }
    return 0;
}

static int is_int(hy_dtype dt) { return dt != HY_F32 && dt != HY_F64; }

static void push_elem(lua_State *L, const hy_tensor *t, size_t i) {
    if (t->dtype == HY_I64) lua_pushinteger(L, ((const int64_t *)t->data)[i]);
    else if (is_int(t->dtype)) lua_pushinteger(L, (lua_Integer)get_elem(t, i));
    else lua_pushnumber(L, get_elem(t, i));
}

/* Stores value at stack index `arg` into element i; integer dtypes need an in-range integer. */
static void set_elem(lua_State *L, hy_tensor *t, size_t i, int arg) {
    if (is_int(t->dtype)) {
        lua_Integer v = luaL_checkinteger(L, arg);
        static const lua_Integer lo[] = {0, 0, 0, -128, -32768, -2147483648LL, LUA_MININTEGER};
        static const lua_Integer hi[] = {0, 0, 255, 127, 32767, 2147483647LL, LUA_MAXINTEGER};
        if (v < lo[t->dtype] || v > hi[t->dtype])
            luaL_argerror(L, arg, lua_pushfstring(L, "value %I out of range for %s", v,
                                                  hy_dtype_name(t->dtype)));
        switch (t->dtype) {
        case HY_U8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
        case HY_I8: ((int8_t *)t->data)[i] = (int8_t)v; break;
        case HY_I16: ((int16_t *)t->data)[i] = (int16_t)v; break;
        case HY_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
        default: ((int64_t *)t->data)[i] = (int64_t)v; break;
        }
    } else {
        lua_Number v = luaL_checknumber(L, arg);
        if (t->dtype == HY_F32) ((float *)t->data)[i] = (float)v;
        else ((double *)t->data)[i] = (double)v;
    }
}

static int l_tensor_new(lua_State *L) {
    hy_dtype dt = check_dtype(L, 1);
    int nd = lua_gettop(L) - 1;
    int64_t shape[HY_MAXDIM];
    luaL_argcheck(L, nd <= HY_MAXDIM, 2, "too many dims (at most 8)");
    for (int i = 0; i < nd; i++) {
        lua_Integer s = luaL_checkinteger(L, i + 2);
        luaL_argcheck(L, s >= 0, i + 2, "size must be >= 0");
        shape[i] = (int64_t)s;
    }
    hy_tensor *t = l_pushtensor(L);
    if (hy_tensor_alloc(t, dt, nd, shape) != HY_OK) return l_raise(L);
    return 1;
}

/* Walks a nested table to find its shape (first elements decide). */
static int table_shape(lua_State *L, int idx, int64_t *shape) {
    int nd = 0;
    lua_pushvalue(L, idx);
    while (lua_istable(L, -1)) {
        if (nd == HY_MAXDIM) luaL_error(L, "from_table: nested deeper than %d", HY_MAXDIM);
        shape[nd++] = (int64_t)luaL_len(L, -1);
        lua_geti(L, -1, 1);
        lua_remove(L, -2);
    }
    lua_pop(L, 1);
    return nd;
}

static void fill_from(lua_State *L, hy_tensor *t, int idx, int dim, size_t *pos) {
    lua_Integer n = luaL_len(L, idx);
    if (n != t->shape[dim])
        luaL_error(L, "from_table: ragged table (dim %d has %I entries, expected %I)", dim + 1,
                   n, (lua_Integer)t->shape[dim]);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, idx, i);
        if (dim + 1 < t->ndim) {
            if (!lua_istable(L, -1)) luaL_error(L, "from_table: expected a table at depth %d", dim + 2);
            fill_from(L, t, lua_gettop(L), dim + 1, pos);
        } else {
            set_elem(L, t, (*pos)++, lua_gettop(L));
        }
        lua_pop(L, 1);
    }
}

static int l_from_table(lua_State *L) {
    hy_dtype dt = check_dtype(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    int64_t shape[HY_MAXDIM];
    int nd;
    if (lua_istable(L, 3)) {               /* explicit shape for a flat table */
        nd = (int)luaL_len(L, 3);
        luaL_argcheck(L, nd <= HY_MAXDIM, 3, "too many dims (at most 8)");
        size_t n = 1;
        for (int i = 0; i < nd; i++) {
            lua_geti(L, 3, i + 1);
            lua_Integer s = lua_tointeger(L, -1);
            lua_pop(L, 1);
            luaL_argcheck(L, s >= 0, 3, "sizes must be integers >= 0");
            shape[i] = (int64_t)s;
            n *= (size_t)s;
        }
        luaL_argcheck(L, (size_t)luaL_len(L, 2) == n, 2, "length does not match the shape");
        hy_tensor *t = l_pushtensor(L);
        if (hy_tensor_alloc(t, dt, nd, shape) != HY_OK) return l_raise(L);
        for (size_t i = 0; i < n; i++) {
            lua_geti(L, 2, (lua_Integer)i + 1);
            set_elem(L, t, i, lua_gettop(L));
            lua_pop(L, 1);
        }
        return 1;
    }
    nd = table_shape(L, 2, shape);
    hy_tensor *t = l_pushtensor(L);
    if (hy_tensor_alloc(t, dt, nd, shape) != HY_OK) return l_raise(L);
    size_t pos = 0;
    fill_from(L, t, 2, 0, &pos);
    return 1;
}

static size_t flat_index(lua_State *L, const hy_tensor *t, int first, int n) {
    if (n != t->ndim)
        luaL_error(L, "expected %d indices for a %d-dim tensor, got %d", t->ndim, t->ndim, n);
    size_t off = 0;
    for (int d = 0; d < t->ndim; d++)
        off = off * (size_t)t->shape[d] + l_checkindex(L, first + d, (size_t)t->shape[d]);
    return off;
}

static int l_tensor_get(lua_State *L) {
    hy_tensor *t = l_checktensor(L, 1);
    push_elem(L, t, flat_index(L, t, 2, lua_gettop(L) - 1));
    return 1;
}

static int l_tensor_set(lua_State *L) {
    hy_tensor *t = l_checktensor(L, 1);
    int top = lua_gettop(L);                  /* indices at 2..top-1, the value at top */
    size_t off = flat_index(L, t, 2, top - 2);
    set_elem(L, t, off, top);
    return 0;
}

static int l_tensor_dtype(lua_State *L) {
    lua_pushstring(L, hy_dtype_name(l_checktensor(L, 1)->dtype));
    return 1;
}

static int l_tensor_ndim(lua_State *L) {
    lua_pushinteger(L, l_checktensor(L, 1)->ndim);
    return 1;
}

static int l_tensor_size(lua_State *L) {
    hy_tensor *t = l_checktensor(L, 1);
    size_t d = l_checkindex(L, 2, (size_t)t->ndim);
    lua_pushinteger(L, t->shape[d]);
    return 1;
}

static int l_tensor_shape(lua_State *L) {
    hy_tensor *t = l_checktensor(L, 1);
    lua_createtable(L, t->ndim, 0);
    for (int d = 0; d < t->ndim; d++) {
        lua_pushinteger(L, t->shape[d]);
        lua_rawseti(L, -2, d + 1);
    }
    return 1;
}

static int l_tensor_numel(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)hy_tensor_numel(l_checktensor(L, 1)));
    return 1;
}

static int l_tensor_row(lua_State *L) {
    hy_tensor *src = l_checktensor(L, 1);
    luaL_argcheck(L, src->ndim >= 1, 1, "row() needs a tensor with 1 or more dims");
    size_t i = l_checkindex(L, 2, (size_t)src->shape[0]);
    hy_tensor *v = l_pushtensor(L);
    *v = hy_tensor_row(src, i);               /* borrows: alloc == NULL */
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    return 1;
}

static int l_tensor_flat(lua_State *L) {
    hy_tensor *t = l_checktensor(L, 1);
    size_t n = hy_tensor_numel(t);
    lua_createtable(L, (int)(n < 0x7fffffff ? n : 0), 0);
    for (size_t i = 0; i < n; i++) {
        push_elem(L, t, i);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static void push_nested(lua_State *L, const hy_tensor *t, int dim, size_t *pos) {
    if (dim == t->ndim) { push_elem(L, t, (*pos)++); return; }
    lua_createtable(L, (int)t->shape[dim], 0);
    for (int64_t i = 0; i < t->shape[dim]; i++) {
        push_nested(L, t, dim + 1, pos);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

static int l_tensor_totable(lua_State *L) {
    hy_tensor *t = l_checktensor(L, 1);
    size_t pos = 0;
    luaL_checkstack(L, t->ndim + 4, "tensor too deep");
    push_nested(L, t, 0, &pos);
    return 1;
}

static int l_tensor_fill(lua_State *L) {
    hy_tensor *t = l_checktensor(L, 1);
    size_t n = hy_tensor_numel(t);
    if (n > 0) {
        set_elem(L, t, 0, 2);
        size_t es = hy_dtype_size(t->dtype);
        for (size_t i = 1; i < n; i++) memcpy((char *)t->data + i * es, t->data, es);
    }
    lua_settop(L, 1);
    return 1;
}

static int l_tensor_clone(lua_State *L) {
    hy_tensor *t = l_checktensor(L, 1);
    hy_tensor *c = l_pushtensor(L);
    if (hy_tensor_alloc(c, t->dtype, t->ndim, t->shape) != HY_OK) return l_raise(L);
    memcpy(c->data, t->data, hy_tensor_nbytes(t));
    return 1;
}

static int l_tensor_gc(lua_State *L) {
    l_tensor *u = luaL_checkudata(L, 1, L_TENSOR);
    hy_tensor_release(&u->t);
    return 0;
}

static int l_tensor_len(lua_State *L) {
    hy_tensor *t = l_checktensor(L, 1);
    lua_pushinteger(L, t->ndim ? t->shape[0] : 1);
    return 1;
}

static int l_tensor_tostring(lua_State *L) {
    hy_tensor *t = l_checktensor(L, 1);
    char buf[160];
    hy_shape_str(buf, sizeof buf, t->ndim, t->shape);
    lua_pushfstring(L, "hydra.Tensor(%s %s)", hy_dtype_name(t->dtype), buf);
    return 1;
}

static int l_mean_first(lua_State *L) {
    hy_tensor *t = l_checktensor(L, 1);
    luaL_argcheck(L, t->dtype == HY_F32 && t->ndim >= 2 && t->shape[0] >= 1, 1,
                  "expected a float32 tensor with 2 or more dims and a non-empty first dim");
    hy_tensor *o = l_pushtensor(L);
    if (hy_tensor_alloc(o, HY_F32, t->ndim - 1, t->shape + 1) != HY_OK) return l_raise(L);
    size_t K = (size_t)t->shape[0], n = hy_tensor_numel(o);
    const float *x = t->data;
    float *y = o->data;
    for (size_t i = 0; i < n; i++) {
        double s = 0;
        for (size_t k = 0; k < K; k++) s += (double)x[k * n + i];
        y[i] = (float)(s / (double)K);
    }
    return 1;
}

void l_open_tensor(lua_State *L) {
    static const luaL_Reg methods[] = {
        {"get", l_tensor_get},     {"set", l_tensor_set},     {"dtype", l_tensor_dtype},
        {"ndim", l_tensor_ndim},   {"size", l_tensor_size},   {"shape", l_tensor_shape},
        {"numel", l_tensor_numel}, {"row", l_tensor_row},     {"flat", l_tensor_flat},
        {"totable", l_tensor_totable}, {"fill", l_tensor_fill}, {"clone", l_tensor_clone},
        {NULL, NULL}};
    static const luaL_Reg meta[] = {
        {"__len", l_tensor_len}, {"__tostring", l_tensor_tostring}, {NULL, NULL}};
    static const luaL_Reg fns[] = {
        {"tensor", l_tensor_new}, {"from_table", l_from_table}, {"mean_first", l_mean_first},
        {NULL, NULL}};
    l_newclass(L, L_TENSOR, methods, l_tensor_gc, NULL);
    l_setmeta(L, L_TENSOR, meta);
    l_setfuncs(L, fns);
}
