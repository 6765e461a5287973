/* sample.c: gathers and seeded splits (partial Fisher-Yates over index lists). */
#include "data/sample.h"

#include <stdlib.h>
#include <string.h>

#include "tensor/rng.h"

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

hy_status hy_sample_gather(const hy_tensor *in, const hy_tensor *idx, hy_tensor *out) {
    memset(out, 0, sizeof *out);
    if (in->ndim < 1) return hy_fail(HY_EINVAL, "sample: gather needs a tensor with >= 1 dims");
    if (idx->dtype != HY_I64 || idx->ndim != 1)
        return hy_fail(HY_EINVAL, "sample: gather indices must be int64 [k] (got %s, %d dims)",
                       hy_dtype_name(idx->dtype), idx->ndim);
    const int64_t *ix = idx->data;
    int64_t k = idx->shape[0], n = in->shape[0];
    for (int64_t i = 0; i < k; i++)
        if (ix[i] < 0 || ix[i] >= n)
            return hy_fail(HY_EINVAL, "sample: index %lld out of range [0, %lld) at position %lld",
                           (long long)ix[i], (long long)n, (long long)i);
    int64_t shape[HY_MAXDIM];
    memcpy(shape, in->shape, sizeof shape);
    shape[0] = k;
    HY_TRY(hy_tensor_alloc(out, in->dtype, in->ndim, shape));
    size_t row = n > 0 ? hy_tensor_nbytes(in) / (size_t)n : 0;
    for (int64_t i = 0; i < k; i++)
        memcpy((char *)out->data + (size_t)i * row, (const char *)in->data + (size_t)ix[i] * row,
               row);
    return HY_OK;
}

static int64_t label_at(const hy_tensor *t, size_t i) {
    switch (t->dtype) {
    case HY_U8: return ((const uint8_t *)t->data)[i];
    case HY_I8: return ((const int8_t *)t->data)[i];
    case HY_I16: return ((const int16_t *)t->data)[i];
    case HY_I32: return ((const int32_t *)t->data)[i];
    case HY_I64: return ((const int64_t *)t->data)[i];
    default: return -1;
    }
}

hy_status hy_sample_stratified(const hy_tensor *labels, int64_t n_classes, int64_t per_class,
                               uint64_t seed, hy_tensor *keep, hy_tensor *hold) {
    memset(keep, 0, sizeof *keep);
    memset(hold, 0, sizeof *hold);
    if (labels->ndim != 1 || labels->dtype == HY_F32 || labels->dtype == HY_F64)
        return hy_fail(HY_EINVAL, "sample: labels must be a 1-d integer tensor (got %s, %d dims)",
                       hy_dtype_name(labels->dtype), labels->ndim);
    if (n_classes < 1 || per_class < 0)
        return hy_fail(HY_EINVAL, "sample: bad split sizes (n_classes %lld, per_class %lld)",
                       (long long)n_classes, (long long)per_class);
    size_t n = (size_t)labels->shape[0];
    hy_status st = HY_OK;
    int64_t *count = hy_xcalloc((size_t)n_classes, sizeof *count);
    int64_t *order = hy_xmalloc((n + 1) * sizeof *order);  /* indices grouped by class */
    int64_t *start = hy_xcalloc((size_t)n_classes + 1, sizeof *start);
    int64_t *fill = hy_xcalloc((size_t)n_classes, sizeof *fill);
    uint8_t *held = hy_xcalloc(n + 1, 1);
    if (!count || !order || !start || !fill || !held) { st = HY_ENOMEM; goto done; }
    for (size_t i = 0; i < n; i++) {
        int64_t c = label_at(labels, i);
        if (c < 0 || c >= n_classes) {
            st = hy_fail(HY_EINVAL, "sample: label %lld of sample %zu out of range [0, %lld)",
                         (long long)c, i + 1, (long long)n_classes);
            goto done;
        }
        count[c]++;
    }
    for (int64_t c = 0; c < n_classes; c++) {
        if (count[c] < per_class) {
            st = hy_fail(HY_EINVAL, "sample: class %lld has %lld samples, fewer than the %lld to "
                         "hold out", (long long)c, (long long)count[c], (long long)per_class);
            goto done;
        }
        start[c + 1] = start[c] + count[c];
    }
    for (size_t i = 0; i < n; i++) {
        int64_t c = label_at(labels, i);
        order[start[c] + fill[c]++] = (int64_t)i;
    }
    hy_rng base;
    hy_rng_seed(&base, seed);
    for (int64_t c = 0; c < n_classes; c++) {
        hy_rng r = hy_rng_split(&base, (uint64_t)c);
        int64_t *v = order + start[c];
        /* partial Fisher-Yates: the first per_class entries become a uniform sample */
        for (int64_t i = 0; i < per_class; i++) {
            int64_t j = i + (int64_t)hy_rng_below(&r, (uint64_t)(count[c] - i));
            int64_t t = v[i]; v[i] = v[j]; v[j] = t;
            held[v[i]] = 1;
        }
    }
    int64_t nh = per_class * n_classes, nk = (int64_t)n - nh;
    st = hy_tensor_alloc(hold, HY_I64, 1, &nh);
    if (st == HY_OK) st = hy_tensor_alloc(keep, HY_I64, 1, &nk);
    if (st != HY_OK) goto done;
    int64_t *ph = hold->data, *pk = keep->data;
    for (size_t i = 0; i < n; i++) {
        if (held[i]) *ph++ = (int64_t)i;
        else *pk++ = (int64_t)i;
    }
done:
    hy_free(count); hy_free(order); hy_free(start); hy_free(fill); hy_free(held);
    if (st != HY_OK) { hy_tensor_release(keep); hy_tensor_release(hold); }
    return st;
}

hy_status hy_sample_subset(int64_t n, int64_t k, uint64_t seed, hy_tensor *out) {
    memset(out, 0, sizeof *out);
    if (n < 0 || k < 0 || k > n)
        return hy_fail(HY_EINVAL, "sample: cannot choose %lld of %lld samples", (long long)k,
                       (long long)n);
    int64_t *v = hy_xmalloc(((size_t)n + 1) * sizeof *v);
    if (!v) return HY_ENOMEM;
    for (int64_t i = 0; i < n; i++) v[i] = i;
    hy_rng r;
    hy_rng_seed(&r, seed);
    for (int64_t i = 0; i < k; i++) {
        int64_t j = i + (int64_t)hy_rng_below(&r, (uint64_t)(n - i));
        int64_t t = v[i]; v[i] = v[j]; v[j] = t;
    }
    qsort(v, (size_t)k, sizeof *v, cmp_i64);
    hy_status st = hy_tensor_alloc(out, HY_I64, 1, &k);
    if (st == HY_OK) memcpy(out->data, v, (size_t)k * sizeof *v);
    hy_free(v);
    return st;
}

hy_status hy_sample_labels16(const hy_tensor *in, hy_tensor *out) {
    memset(out, 0, sizeof *out);
    if (in->ndim != 1 || in->dtype == HY_F32 || in->dtype == HY_F64)
        return hy_fail(HY_EINVAL, "sample: labels must be a 1-d integer tensor (got %s, %d dims)",
                       hy_dtype_name(in->dtype), in->ndim);
    size_t n = (size_t)in->shape[0];
    for (size_t i = 0; i < n; i++) {
        int64_t v = label_at(in, i);
        if (v < INT16_MIN || v > INT16_MAX)
            return hy_fail(HY_EINVAL, "sample: label %lld of sample %zu does not fit int16",
                           (long long)v, i + 1);
    }
    HY_TRY(hy_tensor_alloc(out, HY_I16, 1, in->shape));
    int16_t *o = out->data;
    for (size_t i = 0; i < n; i++) o[i] = (int16_t)label_at(in, i);
    return HY_OK;
}

hy_status hy_sample_permutation(int64_t n, uint64_t seed, hy_tensor *out) {
    memset(out, 0, sizeof *out);
    if (n < 0) return hy_fail(HY_EINVAL, "sample: permutation of %lld elements", (long long)n);
    HY_TRY(hy_tensor_alloc(out, HY_I64, 1, &n));
    int64_t *v = out->data;
    for (int64_t i = 0; i < n; i++) v[i] = i;
    hy_rng r;
    hy_rng_seed(&r, seed);
    hy_rng_shuffle(&r, v, (size_t)n);
    return HY_OK;
}

hy_status hy_sample_slice(const hy_tensor *in, int64_t start, int64_t count, hy_tensor *out) {
    memset(out, 0, sizeof *out);
    if (in->ndim < 1) return hy_fail(HY_EINVAL, "sample: slice needs a tensor with >= 1 dims");
    /* compared without forming start + count: both come from the user and may be huge */
    if (start < 0 || count < 0 || start > in->shape[0] || count > in->shape[0] - start)
        return hy_fail(HY_EINVAL, "sample: rows [%lld, %lld + %lld) out of range [0, %lld)",
                       (long long)start, (long long)start, (long long)count,
                       (long long)in->shape[0]);
    int64_t shape[HY_MAXDIM];
    memcpy(shape, in->shape, sizeof shape);
    shape[0] = count;
    HY_TRY(hy_tensor_alloc(out, in->dtype, in->ndim, shape));
    size_t row = in->shape[0] > 0 ? hy_tensor_nbytes(in) / (size_t)in->shape[0] : 0;
    if (count > 0)
        memcpy(out->data, (const char *)in->data + (size_t)start * row, (size_t)count * row);
    return HY_OK;
}

hy_status hy_sample_concat(const hy_tensor *const *parts, size_t n, hy_tensor *out) {
    memset(out, 0, sizeof *out);
    if (n == 0) return hy_fail(HY_EINVAL, "sample: concat of no tensors");
    const hy_tensor *a = parts[0];
    if (a->ndim < 1) return hy_fail(HY_EINVAL, "sample: concat needs tensors with >= 1 dims");
    int64_t shape[HY_MAXDIM];
    memcpy(shape, a->shape, sizeof shape);
    shape[0] = 0;
    for (size_t i = 0; i < n; i++) {
        const hy_tensor *p = parts[i];
        int same = p->dtype == a->dtype && p->ndim == a->ndim;
        for (int d = 1; same && d < a->ndim; d++) same = p->shape[d] == a->shape[d];
        if (!same) {
            char b1[64], b2[64];
            return hy_fail(HY_EINVAL, "sample: concat part %zu is %s %s, part 1 is %s %s", i + 1,
                           hy_dtype_name(p->dtype), hy_shape_str(b1, sizeof b1, p->ndim, p->shape),
                           hy_dtype_name(a->dtype), hy_shape_str(b2, sizeof b2, a->ndim, a->shape));
        }
        shape[0] += p->shape[0];
    }
    HY_TRY(hy_tensor_alloc(out, a->dtype, a->ndim, shape));
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        size_t nb = hy_tensor_nbytes(parts[i]);
        if (nb) memcpy((char *)out->data + off, parts[i]->data, nb);
        off += nb;
    }
    return HY_OK;
}
