/* l_import.c: the hydra.Model methods model import and export need (lua/hydra/import.lua,
 * export.lua).
 *   m:set_param(name, t)   copies float32 tensor t into parameter `name`; t's shape must be the
 *                          parameter's ("model: set_param 'head.weight' needs shape [10,32],
 *                          got [5,32]")
 *   m:forward(inputs) -> logits float32 [B,K] (an ensemble: [M*B,K]) of one inference forward
 *                          (hy_xfmr_infer, gates applied, no dropout unless switched on):
 *                          inputs.images float32 [B,C,H,W] (vit), or inputs.ids int32 [B,len] and
 *                          inputs.lengths int32 [B] (text) and, for BERT's embedding,
 *                          inputs.type_ids int32 [B,len] (absent: all 0); checked by
 *                          hy_xfmr_check_inputs
 *   core.attn_max_t        the longest sequence the attention kernel takes (HY_ATTN_MAX_T)
 *   m:param_shapes() -> { name = {d1, ...} } of every parameter (no copies)
 *   m:write(f [, meta])    writes the checkpoint (DESIGN §2) into hydra.H5File f being written
 *                          (core.h5_create); the caller adds further groups and commits
 * and float32 tensor surgery for name maps (every result a new tensor; ranges are 0-based,
 * half-open {from, to} pairs along dim 1 (rows) or 2 (columns of a 2-d tensor)):
 *   core.tensor_cat({t1, t2, ...}) -> rows of t1, then t2, ... (same trailing shape)
 *   core.tensor_select(t, dim, ranges) -> the rows (dim 1) or columns (dim 2) in ranges, in order
 *   core.tensor_scatter(t, dim, ranges, n) -> select's inverse: a tensor whose dim `dim` has
 *                          size n, t's consecutive slices placed at the ranges, zeros elsewhere
 *   core.tensor_reshape(t, {d1, ...}) -> a copy with that shape (same element count)
 *   core.tensor_scale_ranges(t, dim, ranges, factors) -> a copy with rows / columns of range i
 *                          multiplied by factors[i] (0 zeroes them)
 *   m:set_param(name, t [, file, source]) with file and source also checks every value is
 *                          finite ("ckpt: 'x.safetensors': tensor 'head.bias' has a non-finite
 *                          value (nan) at flat index 3") */
#include <string.h>

#include "bind.h"
#include "nn/ckpt.h"

static int l_model_set_param(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    const char *name = luaL_checkstring(L, 2);
    hy_tensor *t = l_checktensor(L, 3);
    int64_t i = hy_xfmr_param_index(m, name);
    if (i < 0) return luaL_error(L, "model: no parameter named '%s'", name);
    const hy_param *p = &m->table[i];
    int same = t->ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == p->shape[d];
    if (t->dtype != HY_F32 || !same) {
        char want[96], got[96];
        hy_shape_str(want, sizeof want, p->ndim, p->shape);
        hy_shape_str(got, sizeof got, t->ndim, t->shape);
        return luaL_error(L, "model: set_param '%s' needs float32 %s, got %s %s", name, want,
                          hy_dtype_name(t->dtype), got);
    }
    if (!lua_isnoneornil(L, 4) &&
        hy_ckpt_check_finite(luaL_checkstring(L, 4), luaL_optstring(L, 5, name), t->data,
                             p->numel) != HY_OK)
        return l_raise(L);
    memcpy(m->params + p->offset, t->data, p->numel * sizeof(float));
    return 0;
}

/* ===== tensor surgery ===== */

static hy_tensor *check_f32(lua_State *L, int arg) {
    hy_tensor *t = l_checktensor(L, arg);
    if (t->dtype != HY_F32) luaL_argerror(L, arg, "float32 tensor expected");
    if (t->ndim < 1) luaL_argerror(L, arg, "a tensor of at least one dimension expected");
    return t;
}

static int l_tensor_cat(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer n = luaL_len(L, 1);
    luaL_argcheck(L, n >= 1, 1, "at least one tensor expected");
    int64_t shape[HY_MAXDIM];
    int nd = 0;
    size_t row = 1;
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, 1, i);
        hy_tensor *t = check_f32(L, -1);
        if (i == 1) {
            nd = t->ndim;
            memcpy(shape, t->shape, sizeof(int64_t) * (size_t)nd);
            shape[0] = 0;
            for (int d = 1; d < nd; d++) row *= (size_t)t->shape[d];
        } else {
            int same = t->ndim == nd;
            for (int d = 1; same && d < nd; d++) same = t->shape[d] == shape[d];
            if (!same) return luaL_error(L, "tensor_cat: tensor %I has other trailing dims", i);
        }
        shape[0] += t->shape[0];
        lua_pop(L, 1);
    }
    hy_tensor *out = l_pushtensor(L);
    if (hy_tensor_alloc(out, HY_F32, nd, shape) != HY_OK) return l_raise(L);
    float *dst = out->data;
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, 1, i);
        hy_tensor *t = l_checktensor(L, -1);
        size_t k = (size_t)t->shape[0] * row;
        memcpy(dst, t->data, k * sizeof(float));
        dst += k;
        lua_pop(L, 1);
    }
    return 1;
}

/* Reads the ranges at arg for a dimension of size n: each {from, to} with 0 <= from <= to <= n.
 * Returns the count; r gets 2 entries per range (a userdata on the stack keeps it). */
static size_t check_ranges(lua_State *L, int arg, int64_t n, int64_t **r) {
    luaL_checktype(L, arg, LUA_TTABLE);
    lua_Integer k = luaL_len(L, arg);
    *r = lua_newuserdatauv(L, sizeof(int64_t) * 2 * (size_t)(k > 0 ? k : 1), 0);
    for (lua_Integer i = 1; i <= k; i++) {
        lua_geti(L, arg, i);
        luaL_checktype(L, -1, LUA_TTABLE);
        lua_geti(L, -1, 1);
        lua_geti(L, -2, 2);
        lua_Integer a = luaL_checkinteger(L, -2), b = luaL_checkinteger(L, -1);
        if (a < 0 || b < a || b > n)
            luaL_error(L, "range %I {%I, %I} outside [0, %I]", i, a, b, (lua_Integer)n);
        (*r)[2 * (i - 1)] = a;
        (*r)[2 * (i - 1) + 1] = b;
        lua_pop(L, 3);
    }
    return (size_t)k;
}

static int check_dim(lua_State *L, int arg, const hy_tensor *t) {
    lua_Integer d = luaL_checkinteger(L, arg);
    luaL_argcheck(L, d == 1 || (d == 2 && t->ndim == 2), arg,
                  "dim must be 1 (rows) or 2 (columns of a 2-d tensor)");
    return (int)d;
}

static int l_tensor_select(lua_State *L) {
    hy_tensor *t = check_f32(L, 1);
    int dim = check_dim(L, 2, t);
    int64_t *r;
    size_t k = check_ranges(L, 3, t->shape[dim - 1], &r);
    int64_t shape[HY_MAXDIM];
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    int64_t kept = 0;
    for (size_t i = 0; i < k; i++) kept += r[2 * i + 1] - r[2 * i];
    shape[dim - 1] = kept;
    hy_tensor *out = l_pushtensor(L);
    if (hy_tensor_alloc(out, HY_F32, t->ndim, shape) != HY_OK) return l_raise(L);
    const float *src = t->data;
    float *dst = out->data;
    if (dim == 1) {
        size_t row = 1;
        for (int d = 1; d < t->ndim; d++) row *= (size_t)t->shape[d];
        for (size_t i = 0; i < k; i++) {
            size_t n = (size_t)(r[2 * i + 1] - r[2 * i]) * row;
            memcpy(dst, src + (size_t)r[2 * i] * row, n * sizeof(float));
            dst += n;
        }
    } else {
        size_t R = (size_t)t->shape[0], C = (size_t)t->shape[1];
        for (size_t y = 0; y < R; y++)
            for (size_t i = 0; i < k; i++) {
                size_t n = (size_t)(r[2 * i + 1] - r[2 * i]);
                memcpy(dst, src + y * C + (size_t)r[2 * i], n * sizeof(float));
                dst += n;
            }
    }
    return 1;
}

static int l_tensor_scatter(lua_State *L) {
    hy_tensor *t = check_f32(L, 1);
    int dim = check_dim(L, 2, t);
    lua_Integer n = luaL_checkinteger(L, 4);
    luaL_argcheck(L, n >= 0, 4, "size must be >= 0");
    int64_t *r;
    size_t k = check_ranges(L, 3, (int64_t)n, &r);
    int64_t total = 0;
    for (size_t i = 0; i < k; i++) total += r[2 * i + 1] - r[2 * i];
    if (total != t->shape[dim - 1])
        return luaL_error(L, "tensor_scatter: the ranges cover %I of dim %d, the tensor has %I",
                          (lua_Integer)total, dim, (lua_Integer)t->shape[dim - 1]);
    int64_t shape[HY_MAXDIM];
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    shape[dim - 1] = (int64_t)n;
    hy_tensor *out = l_pushtensor(L);
    if (hy_tensor_alloc(out, HY_F32, t->ndim, shape) != HY_OK) return l_raise(L);
    float *dst = out->data;
    memset(dst, 0, hy_tensor_numel(out) * sizeof(float));
    const float *src = t->data;
    if (dim == 1) {
        size_t row = 1;
        for (int d = 1; d < t->ndim; d++) row *= (size_t)t->shape[d];
        for (size_t i = 0; i < k; i++) {
            size_t m = (size_t)(r[2 * i + 1] - r[2 * i]) * row;
            memcpy(dst + (size_t)r[2 * i] * row, src, m * sizeof(float));
            src += m;
        }
    } else {
        size_t R = (size_t)t->shape[0], C = (size_t)t->shape[1];
        for (size_t y = 0; y < R; y++) {
            size_t c = 0;
            for (size_t i = 0; i < k; i++) {
                size_t m = (size_t)(r[2 * i + 1] - r[2 * i]);
                memcpy(dst + y * (size_t)n + (size_t)r[2 * i], src + y * C + c, m * sizeof(float));
                c += m;
            }
        }
    }
    return 1;
}

static int l_tensor_reshape(lua_State *L) {
    hy_tensor *t = check_f32(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Integer nd = luaL_len(L, 2);
    luaL_argcheck(L, nd >= 1 && nd <= HY_MAXDIM, 2, "1 to 8 dims expected");
    int64_t shape[HY_MAXDIM];
    size_t numel = 1;
    for (lua_Integer i = 1; i <= nd; i++) {
        lua_geti(L, 2, i);
        lua_Integer s = luaL_checkinteger(L, -1);
        luaL_argcheck(L, s >= 0, 2, "sizes must be >= 0");
        shape[i - 1] = (int64_t)s;
        numel *= (size_t)s;
        lua_pop(L, 1);
    }
    if (numel != hy_tensor_numel(t))
        return luaL_error(L, "tensor_reshape: %I elements cannot take a shape of %I",
                          (lua_Integer)hy_tensor_numel(t), (lua_Integer)numel);
    hy_tensor *out = l_pushtensor(L);
    if (hy_tensor_alloc(out, HY_F32, (int)nd, shape) != HY_OK) return l_raise(L);
    memcpy(out->data, t->data, numel * sizeof(float));
    return 1;
}

static int l_tensor_scale_ranges(lua_State *L) {
    hy_tensor *t = check_f32(L, 1);
    int dim = check_dim(L, 2, t);
    int64_t *r;
    size_t k = check_ranges(L, 3, t->shape[dim - 1], &r);
    luaL_checktype(L, 4, LUA_TTABLE);
    hy_tensor *out = l_pushtensor(L);
    if (hy_tensor_alloc(out, HY_F32, t->ndim, t->shape) != HY_OK) return l_raise(L);
    float *x = out->data;
    memcpy(x, t->data, hy_tensor_numel(t) * sizeof(float));
    size_t R = (size_t)t->shape[0], row = hy_tensor_numel(t) / (R ? R : 1);
    for (size_t i = 0; i < k; i++) {
        lua_geti(L, 4, (lua_Integer)i + 1);
        float g = (float)luaL_checknumber(L, -1);
        lua_pop(L, 1);
        for (int64_t j = r[2 * i]; j < r[2 * i + 1]; j++) {
            /* g = 0 stores +0.0 (not -0.0 for negative weights): zeroed ranges are all-zero
             * bytes */
            if (dim == 1)
                for (size_t c = 0; c < row; c++)
                    x[(size_t)j * row + c] = g == 0.0f ? 0.0f : x[(size_t)j * row + c] * g;
            else
                for (size_t y = 0; y < R; y++)
                    x[y * row + (size_t)j] = g == 0.0f ? 0.0f : x[y * row + (size_t)j] * g;
        }
    }
    return 1;
}

/* The tensor at field `key` of the table at arg, of dtype dt (NULL when absent). */
static hy_tensor *opt_field_tensor(lua_State *L, int arg, const char *key, hy_dtype dt,
                                   const char *who) {
    lua_getfield(L, arg, key);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return NULL;
    }
    hy_tensor *t = l_checktensor(L, -1);
    if (t->dtype != dt)
        luaL_error(L, "%s: inputs.%s must be %s (got %s)", who, key, hy_dtype_name(dt),
                   hy_dtype_name(t->dtype));
    lua_pop(L, 1);   /* the table at arg keeps it alive */
    return t;
}

size_t l_checkinputs(lua_State *L, int arg, const hy_xfmr_config *c, const char *who,
                     hy_batch *in) {
    luaL_checktype(L, arg, LUA_TTABLE);
    memset(in, 0, sizeof *in);
    size_t B;
    if (c->kind == HY_XFMR_VIT) {
        hy_tensor *img = opt_field_tensor(L, arg, "images", HY_F32, who);
        if (!img) luaL_error(L, "%s: an image model needs inputs.images", who);
        if (img->ndim != 4 || img->shape[0] < 1 || img->shape[1] != (int64_t)c->channels ||
            img->shape[2] != (int64_t)c->image_size || img->shape[3] != (int64_t)c->image_size)
            luaL_error(L, "%s: inputs.images must be [B,%d,%d,%d]", who, (int)c->channels,
                       (int)c->image_size, (int)c->image_size);
        B = (size_t)img->shape[0];
        in->images = img->data;
    } else {
        hy_tensor *ids = opt_field_tensor(L, arg, "ids", HY_I32, who);
        hy_tensor *len = opt_field_tensor(L, arg, "lengths", HY_I32, who);
        hy_tensor *tt = opt_field_tensor(L, arg, "type_ids", HY_I32, who);
        if (!ids || !len)
            luaL_error(L, "%s: a text model needs inputs.ids and inputs.lengths", who);
        if (ids->ndim != 2 || ids->shape[0] < 1 || len->ndim != 1 ||
            len->shape[0] != ids->shape[0])
            luaL_error(L, "%s: inputs.ids must be [B,len] and inputs.lengths [B]", who);
        if (tt && (tt->ndim != 2 || tt->shape[0] != ids->shape[0] ||
                   tt->shape[1] != ids->shape[1]))
            luaL_error(L, "%s: inputs.type_ids must have the shape of inputs.ids", who);
        B = (size_t)ids->shape[0];
        in->ids = ids->data;
        in->type_ids = tt ? tt->data : NULL;
        in->lengths = len->data;
        in->len = (size_t)ids->shape[1];
    }
    if (hy_xfmr_check_inputs(c, in, B, who) != HY_OK) l_raise(L);
    return B;
}

static int l_model_forward(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    const hy_xfmr_config *c = &m->cfg;
    hy_batch in;
    size_t B = l_checkinputs(L, 2, c, "model: forward", &in);
    int64_t shape[2] = {(int64_t)(B * hy_xfmr_members(m)), (int64_t)c->n_classes};
    hy_tensor *out = l_pushtensor(L);
    if (hy_tensor_alloc(out, HY_F32, 2, shape) != HY_OK) return l_raise(L);
    if (hy_xfmr_ensure_infer(m, B) != HY_OK) return l_raise(L);
    if (hy_xfmr_infer(m, &in, B, out->data) != HY_OK) return l_raise(L);
    return 1;
}

static int l_model_param_shapes(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    lua_createtable(L, 0, (int)m->n_tensors);
    for (size_t i = 0; i < m->n_tensors; i++) {
        const hy_param *p = &m->table[i];
        lua_createtable(L, p->ndim, 0);
        for (int d = 0; d < p->ndim; d++) {
            lua_pushinteger(L, (lua_Integer)p->shape[d]);
            lua_rawseti(L, -2, d + 1);
        }
        lua_setfield(L, -2, p->name);
    }
    return 1;
}

static int l_model_write(lua_State *L) {
    hy_xfmr *m = l_checkmodel(L, 1);
    hy_h5 *f = l_checkh5(L, 2);
    l_checkmeta(L, 3, "model");
    if (hy_ckpt_write(f, m, NULL, 0) != HY_OK || l_writemeta(L, 3, f) != HY_OK)
        return l_raise(L);
    return 0;
}

void l_open_import(lua_State *L) {
    static const luaL_Reg methods[] = {{"set_param", l_model_set_param},
                                       {"forward", l_model_forward},
                                       {"param_shapes", l_model_param_shapes},
                                       {"write", l_model_write}, {NULL, NULL}};
    static const luaL_Reg fns[] = {{"tensor_cat", l_tensor_cat}, {"tensor_select", l_tensor_select},
                                   {"tensor_reshape", l_tensor_reshape},
                                   {"tensor_scatter", l_tensor_scatter},
                                   {"tensor_scale_ranges", l_tensor_scale_ranges}, {NULL, NULL}};
    l_addmethods(L, L_MODEL, methods);
    l_setfuncs(L, fns);
    lua_pushinteger(L, HY_ATTN_MAX_T);
    lua_setfield(L, -2, "attn_max_t");
}
