/* tensor.h: a typed n-d array header (row-major, contiguous, 64-byte aligned data).
 * alloc != NULL means the tensor owns its data; a view has alloc == NULL and borrows.
 * Used at module boundaries (HDF5 I/O, datasets, the Lua binding); kernels take raw pointers. */
#ifndef HY_TENSOR_H
#define HY_TENSOR_H

#include "tensor/base.h"

#define HY_MAXDIM 8

typedef enum {
    HY_F32 = 0, HY_F64, HY_U8, HY_I8, HY_I16, HY_I32, HY_I64, HY_NDTYPES
} hy_dtype;

typedef struct hy_tensor {
    void *data;
    void *alloc;              /* owner pointer (== data) or NULL for a view */
    hy_dtype dtype;
    int ndim;
    int64_t shape[HY_MAXDIM];
} hy_tensor;

size_t hy_dtype_size(hy_dtype dt);
const char *hy_dtype_name(hy_dtype dt);      /* "float32", "int16", ... */
/* Parses a dtype name; returns HY_EINVAL for an unknown name. */
hy_status hy_dtype_parse(const char *name, hy_dtype *out);

/* Number of elements (1 for ndim 0). */
size_t hy_tensor_numel(const hy_tensor *t);
size_t hy_tensor_nbytes(const hy_tensor *t);
/* Allocates zeroed, owned storage. Fails on ndim > HY_MAXDIM, a negative size or no memory. */
hy_status hy_tensor_alloc(hy_tensor *t, hy_dtype dt, int ndim, const int64_t *shape);
/* A view of t's i-th slice along dim 0 (ndim - 1 dims); borrows t's data. */
hy_tensor hy_tensor_row(const hy_tensor *t, size_t i);
/* Frees owned storage; accepts a zeroed tensor or a view; zeroes t. */
void hy_tensor_release(hy_tensor *t);
/* "[3,28,28]" into buf. */
const char *hy_shape_str(char *buf, size_t n, int ndim, const int64_t *shape);

#endif
