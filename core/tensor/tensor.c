/* tensor.c: see tensor.h. */
#include "tensor/tensor.h"

#include <stdio.h>
#include <string.h>

static const struct { const char *name; size_t size; } dtypes[HY_NDTYPES] = {
    [HY_F32] = {"float32", 4}, [HY_F64] = {"float64", 8}, [HY_U8] = {"uint8", 1},
    [HY_I8] = {"int8", 1},     [HY_I16] = {"int16", 2},   [HY_I32] = {"int32", 4},
    [HY_I64] = {"int64", 8},
};

size_t hy_dtype_size(hy_dtype dt) {
    HY_ASSERT((int)dt >= 0 && dt < HY_NDTYPES);
    return dtypes[dt].size;
}

const char *hy_dtype_name(hy_dtype dt) {
    HY_ASSERT((int)dt >= 0 && dt < HY_NDTYPES);
    return dtypes[dt].name;
}

hy_status hy_dtype_parse(const char *name, hy_dtype *out) {
    for (int i = 0; i < HY_NDTYPES; i++)
        if (strcmp(name, dtypes[i].name) == 0) { *out = (hy_dtype)i; return HY_OK; }
    return hy_fail(HY_EINVAL, "tensor: unknown dtype '%s' (known: float32, float64, uint8, "
                   "int8, int16, int32, int64)", name);
}

size_t hy_tensor_numel(const hy_tensor *t) {
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
    return n;
}

size_t hy_tensor_nbytes(const hy_tensor *t) {
    return hy_tensor_numel(t) * hy_dtype_size(t->dtype);
}

hy_status hy_tensor_alloc(hy_tensor *t, hy_dtype dt, int ndim, const int64_t *shape) {
    memset(t, 0, sizeof *t);
    if (ndim < 0 || ndim > HY_MAXDIM)
        return hy_fail(HY_EINVAL, "tensor: %d dims (at most %d)", ndim, HY_MAXDIM);
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return hy_fail(HY_EINVAL, "tensor: dim %d has negative size %lld", i + 1,
                           (long long)shape[i]);
        if (shape[i] > 0 && n > SIZE_MAX / 16 / (size_t)shape[i])
            return hy_fail(HY_EINVAL, "tensor: too many elements");
        n *= (size_t)shape[i];
        t->shape[i] = shape[i];
    }
    size_t bytes = n * hy_dtype_size(dt);
    void *p = hy_xmalloc_aligned(bytes);
    if (!p) return hy_fail(HY_ENOMEM, "tensor: out of memory (%zu bytes)", bytes);
    memset(p, 0, bytes);
    t->data = t->alloc = p;
    t->dtype = dt;
    t->ndim = ndim;
    return HY_OK;
}

hy_tensor hy_tensor_row(const hy_tensor *t, size_t i) {
    HY_ASSERT(t->ndim >= 1 && i < (size_t)t->shape[0]);
    hy_tensor v;
    memset(&v, 0, sizeof v);
    v.dtype = t->dtype;
    v.ndim = t->ndim - 1;
    for (int d = 1; d < t->ndim; d++) v.shape[d - 1] = t->shape[d];
    v.data = (char *)t->data + i * hy_tensor_nbytes(&v);
    return v;
}

void hy_tensor_release(hy_tensor *t) {
    if (!t) return;
    hy_free(t->alloc);
    memset(t, 0, sizeof *t);
}

const char *hy_shape_str(char *buf, size_t n, int ndim, const int64_t *shape) {
    size_t k = 0;
    if (n == 0) return buf;
    buf[0] = '\0';
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}
