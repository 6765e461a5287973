/* loader.c: in-memory datasets and the batch loader (see loader.h). */
#include "data/loader.h"

#include <stdio.h>
#include <math.h>
#include <string.h>

#include "io/h5.h"

/* ===== datasets ===== */

static hy_status copy_labels(int32_t *out, const hy_tensor *labels, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        switch (labels->dtype) {
        case HY_U8: v = ((const uint8_t *)labels->data)[i]; break;
        case HY_I8: v = ((const int8_t *)labels->data)[i]; break;
        case HY_I16: v = ((const int16_t *)labels->data)[i]; break;
        case HY_I32: v = ((const int32_t *)labels->data)[i]; break;
        case HY_I64: v = ((const int64_t *)labels->data)[i]; break;
        default:
            return hy_fail(HY_EINVAL, "loader: labels must be integers (got %s)",
                           hy_dtype_name(labels->dtype));
        }
        if (v < -1 || v > INT32_MAX)
            return hy_fail(HY_EINVAL, "loader: label %lld of sample %zu out of range",
                           (long long)v, i);
        out[i] = (int32_t)v;
    }
    return HY_OK;
}

static size_t pick_n(size_t n, size_t subset) { return subset > 0 && subset < n ? subset : n; }

hy_status hy_dataset_from_images(hy_dataset *d, const hy_tensor *images, const hy_tensor *labels,
                                 double mean, double std, size_t subset) {
    memset(d, 0, sizeof *d);
    char s1[64];
    if (images->dtype != HY_U8 || (images->ndim != 3 && images->ndim != 4) ||
        (images->ndim == 4 && (images->shape[1] < 1 || images->shape[1] > HY_DATA_MAXC)))
        return hy_fail(HY_EINVAL, "loader: images must be uint8 [N,H,W] or [N,C,H,W] with C <= "
                       "%d (got %s %s)", HY_DATA_MAXC, hy_dtype_name(images->dtype),
                       hy_shape_str(s1, sizeof s1, images->ndim, images->shape));
    int nd = images->ndim;
    size_t C = nd == 4 ? (size_t)images->shape[1] : 1;
    if (labels->ndim != 1 || labels->shape[0] != images->shape[0])
        return hy_fail(HY_EINVAL, "loader: images have %lld samples but labels have shape %s",
                       (long long)images->shape[0],
                       hy_shape_str(s1, sizeof s1, labels->ndim, labels->shape));
    if (!(std > 0))
        return hy_fail(HY_EINVAL, "loader: std must be > 0 (got %g)", std);
    size_t n = pick_n((size_t)images->shape[0], subset);
    size_t hw = C * (size_t)images->shape[nd - 2] * (size_t)images->shape[nd - 1];
    d->kind = HY_DATA_IMAGE;
    d->c = C;
    d->h = (size_t)images->shape[nd - 2];
    d->w = (size_t)images->shape[nd - 1];
    d->mean = mean;
    d->std = std;
    for (size_t c = 0; c < HY_DATA_MAXC; c++) { d->cmean[c] = mean; d->cstd[c] = std; }
    size_t bytes;
    HY_TRY(hy_size_mul(&bytes, "loader: images", n, hw, 1));
    d->images = hy_xmalloc_aligned(bytes + 1);
    d->labels = hy_xmalloc(n * sizeof(int32_t) + 1);
    if (!d->images || !d->labels) { hy_dataset_release(d); return HY_ENOMEM; }
    if (n) memcpy(d->images, images->data, n * hw);
    hy_status st = copy_labels(d->labels, labels, n);
    if (st != HY_OK) { hy_dataset_release(d); return st; }
    d->n = n;
    return HY_OK;
}

hy_status hy_dataset_set_norm(hy_dataset *d, const double *mean, const double *std, size_t n) {
    if (d->kind != HY_DATA_IMAGE || (n != 1 && n != d->c))
        return hy_fail(HY_EINVAL, "loader: %zu normalisation values for %zu image channel(s) "
                       "(expected 1 or %zu)", n, d->c, d->c);
    for (size_t i = 0; i < n; i++)
        if (!(std[i] > 0) || !isfinite(std[i]) || !isfinite(mean[i]))
            return hy_fail(HY_EINVAL, "loader: channel %zu has mean %g, std %g (std must be "
                           "finite and > 0)", i, mean[i], std[i]);
    for (size_t c = 0; c < HY_DATA_MAXC; c++) {
        d->cmean[c] = mean[n == 1 ? 0 : (c < n ? c : 0)];
        d->cstd[c] = std[n == 1 ? 0 : (c < n ? c : 0)];
    }
    d->mean = d->cmean[0];
    d->std = d->cstd[0];
    return HY_OK;
}

hy_status hy_dataset_from_text(hy_dataset *d, const hy_tensor *ids, const hy_tensor *lengths,
                               const hy_tensor *labels, size_t subset) {
    memset(d, 0, sizeof *d);
    char s1[64], s2[64];
    if (ids->dtype != HY_I32 || ids->ndim != 2)
        return hy_fail(HY_EINVAL, "loader: ids must be int32 [N,L] (got %s %s)",
                       hy_dtype_name(ids->dtype), hy_shape_str(s1, sizeof s1, ids->ndim, ids->shape));
    if (lengths->dtype != HY_I32 || lengths->ndim != 1 || lengths->shape[0] != ids->shape[0])
        return hy_fail(HY_EINVAL, "loader: lengths must be int32 [%lld] (got %s %s)",
                       (long long)ids->shape[0], hy_dtype_name(lengths->dtype),
                       hy_shape_str(s2, sizeof s2, lengths->ndim, lengths->shape));
    if (labels->ndim != 1 || labels->shape[0] != ids->shape[0])
        return hy_fail(HY_EINVAL, "loader: ids have %lld samples but labels have shape %s",
                       (long long)ids->shape[0],
                       hy_shape_str(s1, sizeof s1, labels->ndim, labels->shape));
    size_t n = pick_n((size_t)ids->shape[0], subset);
    size_t L = (size_t)ids->shape[1];
    const int32_t *src = ids->data, *len = lengths->data;
    for (size_t i = 0; i < n; i++) {
        if (len[i] < 1 || (size_t)len[i] > L)
            return hy_fail(HY_EINVAL, "loader: length %d of sample %zu outside [1, %zu]",
                           (int)len[i], i, L);
        for (size_t j = 0; j < L; j++)
            if (src[i * L + j] < 0)
                return hy_fail(HY_EINVAL, "loader: negative token id %d at sample %zu, "
                               "position %zu", (int)src[i * L + j], i, j);
    }
    d->kind = HY_DATA_TEXT;
    d->max_len = L;
    size_t bytes;
    HY_TRY(hy_size_mul(&bytes, "loader: token ids", n, L, sizeof(int32_t)));
    d->ids = hy_xmalloc_aligned(bytes + 1);
    d->lengths = hy_xmalloc(n * sizeof(int32_t) + 1);
    d->labels = hy_xmalloc(n * sizeof(int32_t) + 1);
    if (!d->ids || !d->lengths || !d->labels) { hy_dataset_release(d); return HY_ENOMEM; }
    if (n) {
        memcpy(d->ids, src, n * L * sizeof(int32_t));
        memcpy(d->lengths, len, n * sizeof(int32_t));
    }
    hy_status st = copy_labels(d->labels, labels, n);
    if (st != HY_OK) { hy_dataset_release(d); return st; }
    d->n = n;
    d->mean = 0;
    d->std = 1;
    return HY_OK;
}

/* The shape of dataset `name` (of rank ndim) against the HY_DATA_MAX_* limits, before it is
 * read; a missing dataset or another rank is left to the reader's own message. */
static hy_status check_extent(hy_h5 *f, const char *name, int ndim) {
    int e = hy_h5_exists(f, name);
    if (e < 0) return HY_ENOMEM;
    if (!e) return HY_OK;
    hy_dtype dt;
    int nd = 0;
    int64_t sh[HY_MAXDIM];
    if (hy_h5_shape(f, name, &dt, &nd, sh) != HY_OK || nd != ndim) return HY_OK;
    size_t bytes = hy_dtype_size(dt);
    char what[600];
    for (int i = 0; i < nd; i++) {
        snprintf(what, sizeof what, "%s dim %d", name, i + 1);
        hy_status st = hy_check_range(f->path, what, sh[i], 0,
                                      i == 0 ? HY_DATA_MAX_ROWS : HY_DATA_MAX_SIDE);
        if (st != HY_OK) return hy_fail_prefix(st, "loader");
        hy_mul_ok(&bytes, bytes, (size_t)sh[i]);   /* saturates: fails the limit below */
    }
    if (bytes > HY_DATA_MAX_BYTES)
        return hy_fail(HY_EINVAL, "loader: '%s': %s holds more than %zu bytes (the limit for one "
                       "dataset)", f->path, name, HY_DATA_MAX_BYTES);
    return HY_OK;
}

hy_status hy_dataset_set_type_ids(hy_dataset *d, const hy_tensor *t) {
    char s1[64];
    size_t L = d->max_len;
    if (d->kind != HY_DATA_TEXT)
        return hy_fail(HY_EINVAL, "loader: token types need a text dataset");
    if (t->dtype != HY_I32 || t->ndim != 2 || (size_t)t->shape[0] < d->n ||
        (size_t)t->shape[1] != L)
        return hy_fail(HY_EINVAL, "loader: type_ids must be int32 [N,%zu] like ids, N >= %zu "
                       "(got %s %s)", L, d->n, hy_dtype_name(t->dtype),
                       hy_shape_str(s1, sizeof s1, t->ndim, t->shape));
    const int32_t *src = t->data;
    for (size_t i = 0; i < d->n * L; i++)
        if (src[i] < 0)
            return hy_fail(HY_EINVAL, "loader: negative token type %d at sample %zu, position "
                           "%zu", (int)src[i], i / L, i % L);
    int32_t *ty = hy_xmalloc(d->n * L * sizeof(int32_t) + 1);
    if (!ty) return HY_ENOMEM;
    if (d->n) memcpy(ty, src, d->n * L * sizeof(int32_t));
    hy_free(d->type_ids);
    d->type_ids = ty;
    return HY_OK;
}

hy_status hy_dataset_load(hy_dataset *d, const char *path, const char *split, size_t subset,
                          const double *mean_std) {
    memset(d, 0, sizeof *d);
    hy_status st = HY_OK;
    hy_h5 f;
    memset(&f, 0, sizeof f);
    hy_tensor a = {0}, b = {0}, c = {0};
    double *cm = NULL, *cs = NULL;
    size_t ncm = 0, ncs = 0;
    char name[512], lname[512];
    HY_TRY(hy_h5_open(&f, path));
    snprintf(lname, sizeof lname, "/%s/labels", split);
    snprintf(name, sizeof name, "/%s/images", split);
    int has = hy_h5_exists(&f, name);
    if (has < 0) { st = HY_ENOMEM; goto done; }   /* the probe recorded why */
    if (has) {
        double ms[2];
        if (mean_std) {
            ms[0] = mean_std[0];
            ms[1] = mean_std[1];
            if (!(ms[1] > 0) || !isfinite(ms[1]) || !isfinite(ms[0])) {
                st = hy_fail(HY_EINVAL, "loader: the normalisation given for '%s:/%s' (from the "
                             "checkpoint's /meta data_mean, data_std) is mean %g, std %g; std "
                             "must be finite and > 0", path, split, ms[0], ms[1]);
                goto done;
            }
        } else {
            int hm = hy_h5_attr_exists(&f, "/meta", "mean");
            int hs = hy_h5_attr_exists(&f, "/meta", "std");
            if (hm < 0 || hs < 0) { st = HY_ENOMEM; goto done; }
            if (!hm || !hs) {
                st = hy_fail(HY_EINVAL, "loader: '%s' has no /meta mean/std attributes "
                             "(needed to normalise its images)", path);
                goto done;
            }
            if ((st = hy_h5_get_attr_f64s(&f, "/meta", "mean", &cm, &ncm)) != HY_OK) goto done;
            if ((st = hy_h5_get_attr_f64s(&f, "/meta", "std", &cs, &ncs)) != HY_OK) goto done;
            if (ncm < 1 || ncm != ncs) {
                st = hy_fail(HY_EINVAL, "loader: '%s' /meta mean has %zu values but std %zu",
                             path, ncm, ncs);
                goto done;
            }
            ms[0] = cm[0];
            ms[1] = cs[0];
        }
        if ((st = check_extent(&f, name, 3)) != HY_OK) goto done;
        if ((st = check_extent(&f, lname, 1)) != HY_OK) goto done;
        if ((st = hy_h5_read(&f, name, &a)) != HY_OK) goto done;
        if ((st = hy_h5_read(&f, lname, &b)) != HY_OK) goto done;
        st = hy_dataset_from_images(d, &a, &b, ms[0], ms[1], subset);
        if (st == HY_OK && cm && ncm > 1) {
            st = hy_dataset_set_norm(d, cm, cs, ncm);
            if (st != HY_OK) hy_dataset_release(d);
        }
    } else {
        snprintf(name, sizeof name, "/%s/ids", split);
        has = hy_h5_exists(&f, name);
        if (has < 0) { st = HY_ENOMEM; goto done; }
        if (!has) {
            st = hy_fail(HY_EINVAL, "loader: '%s' has no split '%s' (neither /%s/images nor "
                         "/%s/ids)", path, split, split, split);
            goto done;
        }
        if ((st = check_extent(&f, name, 2)) != HY_OK) goto done;
        if ((st = check_extent(&f, lname, 1)) != HY_OK) goto done;
        if ((st = hy_h5_read_as(&f, name, HY_I32, &a)) != HY_OK) goto done;
        snprintf(name, sizeof name, "/%s/lengths", split);
        if ((st = check_extent(&f, name, 1)) != HY_OK) goto done;
        if ((st = hy_h5_read_as(&f, name, HY_I32, &c)) != HY_OK) goto done;
        if ((st = hy_h5_read(&f, lname, &b)) != HY_OK) goto done;
        st = hy_dataset_from_text(d, &a, &c, &b, subset);
        snprintf(name, sizeof name, "/%s/type_ids", split);
        has = st == HY_OK ? hy_h5_exists(&f, name) : 0;
        if (has < 0) st = HY_ENOMEM;
        if (has > 0) {   /* optional: BERT's token types */
            hy_tensor_release(&a);
            st = hy_h5_read_as(&f, name, HY_I32, &a);
            if (st == HY_OK) st = hy_dataset_set_type_ids(d, &a);
            if (st != HY_OK) hy_dataset_release(d);
        }
    }
    if (st != HY_OK) hy_fail_prefix(st, "%s:/%s", path, split);
    else snprintf(d->origin, sizeof d->origin, "%s:/%s", path, split);
done:
    hy_free(cm);
    hy_free(cs);
    hy_tensor_release(&a);
    hy_tensor_release(&b);
    hy_tensor_release(&c);
    hy_h5_close(&f);
    return st;
}

void hy_dataset_release(hy_dataset *d) {
    if (!d) return;
    hy_free(d->images);
    hy_free(d->ids);
    hy_free(d->lengths);
    hy_free(d->type_ids);
    hy_free(d->labels);
    memset(d, 0, sizeof *d);
}

/* The columns of a text batch: its longest sequence (at least 1), of rows idx[0..b) (idx NULL:
 * rows 0..b) of lengths. The one rule for how wide a batch is computed (fill,
 * hy_dataset_seq_lens). */
static size_t batch_len(const int32_t *lengths, const int64_t *idx, size_t b) {
    size_t len = 1;
    for (size_t i = 0; i < b; i++) {
        size_t n = (size_t)lengths[idx ? (size_t)idx[i] : i];
        if (n > len) len = n;
    }
    return len;
}

hy_status hy_dataset_seq_lens(const hy_dataset *ds, size_t batch_size, size_t *real,
                              size_t *padded) {
    if (ds->kind != HY_DATA_TEXT)
        return hy_fail(HY_EINVAL, "loader: sequence lengths need a text dataset (%s is images)",
                       ds->origin[0] ? ds->origin : "this one");
    if (batch_size < 1) return hy_fail(HY_EINVAL, "loader: batch_size must be >= 1 (got 0)");
    size_t nT = ds->max_len + 2;
    if (real) memset(real, 0, nT * sizeof *real);
    if (padded) memset(padded, 0, nT * sizeof *padded);
    /* batches as hy_loader_next cuts them without shuffling: rows in order, batch_size each */
    for (size_t first = 0; first < ds->n; first += batch_size) {
        size_t b = ds->n - first < batch_size ? ds->n - first : batch_size;
        const int32_t *len = ds->lengths + first;
        if (padded) padded[1 + batch_len(len, NULL, b)] += b;
        if (real)
            for (size_t i = 0; i < b; i++) real[1 + (size_t)len[i]]++;
    }
    return HY_OK;
}

/* ===== loader ===== */

hy_status hy_loader_new(hy_loader *ld, const hy_dataset *ds, size_t batch_size, int shuffle,
                        const hy_augment *aug, uint64_t seed) {
    memset(ld, 0, sizeof *ld);
    if (batch_size < 1) return hy_fail(HY_EINVAL, "loader: batch_size must be >= 1 (got 0)");
    if (aug && (aug->random_crop || aug->hflip) && ds->kind != HY_DATA_IMAGE)
        return hy_fail(HY_EINVAL, "loader: augmentation (random_crop, hflip) needs images");
    if (aug && aug->random_crop && (aug->crop_padding < 0 || (size_t)aug->crop_padding > ds->h))
        return hy_fail(HY_EINVAL, "loader: crop_padding must be in [0, %zu] (got %d)", ds->h,
                       aug->crop_padding);
    /* a batch larger than the data is the whole data (the same single batch) */
    size_t B = batch_size < ds->n ? batch_size : (ds->n ? ds->n : 1);
    size_t ibytes = 0, tbytes = 0;
    if (ds->kind == HY_DATA_IMAGE)
        HY_TRY(hy_size_mul(&ibytes, "loader: batch images", B, ds->c * ds->h * ds->w,
                           sizeof(float)));
    else
        HY_TRY(hy_size_mul(&tbytes, "loader: batch token ids", B, ds->max_len, sizeof(int32_t)));
    ld->ds = ds;
    ld->batch_size = B;
    ld->shuffle = shuffle;
    if (aug) ld->aug = *aug;
    hy_rng_seed(&ld->rng, seed);
    ld->order = hy_xmalloc((ds->n + 1) * sizeof(int64_t));
    ld->labels = hy_xmalloc(B * sizeof(int32_t));
    ld->index = hy_xmalloc(B * sizeof(int64_t));
    if (ds->kind == HY_DATA_IMAGE) {
        ld->images = hy_xmalloc_aligned(ibytes);
    } else {
        ld->ids = hy_xmalloc_aligned(tbytes);
        ld->lengths = hy_xmalloc(B * sizeof(int32_t));
        if (ds->type_ids) ld->type_ids = hy_xmalloc_aligned(tbytes);
    }
    if (!ld->order || !ld->labels || !ld->index ||
        (ds->kind == HY_DATA_IMAGE ? !ld->images : (!ld->ids || !ld->lengths)) ||
        (ds->type_ids && !ld->type_ids)) {
        hy_loader_release(ld);
        return HY_ENOMEM;
    }
    hy_loader_start_epoch(ld, 0);
    return HY_OK;
}

void hy_loader_release(hy_loader *ld) {
    if (!ld) return;
    hy_free(ld->order);
    hy_free(ld->labels);
    hy_free(ld->index);
    hy_free(ld->images);
    hy_free(ld->ids);
    hy_free(ld->lengths);
    hy_free(ld->type_ids);
    memset(ld, 0, sizeof *ld);
}

void hy_loader_start_epoch(hy_loader *ld, uint64_t epoch) {
    ld->epoch = epoch;
    ld->pos = 0;
    ld->b = 0;
    ld->epoch_rng = hy_rng_split(&ld->rng, epoch);
    for (size_t i = 0; i < ld->ds->n; i++) ld->order[i] = (int64_t)i;
    if (ld->shuffle) {
        hy_rng r = hy_rng_split(&ld->epoch_rng, 0);
        hy_rng_shuffle(&r, ld->order, ld->ds->n);
    }
}

size_t hy_loader_batches(const hy_loader *ld) {
    return (ld->ds->n + ld->batch_size - 1) / ld->batch_size;
}

/* One image: normalise, and (aug) crop/flip. out [h,w]. rng is this sample's own stream. */
static void fill_image(float *out, const uint8_t *img, size_t h, size_t w, float scale,
                       float shift, const hy_augment *aug, hy_rng *r) {
    int64_t dy = 0, dx = 0;
    int flip = 0;
    if (aug->random_crop && aug->crop_padding > 0) {
        uint64_t span = 2 * (uint64_t)aug->crop_padding + 1;
        dy = (int64_t)hy_rng_below(r, span) - aug->crop_padding;
        dx = (int64_t)hy_rng_below(r, span) - aug->crop_padding;
    }
    if (aug->hflip) flip = (hy_rng_u64(r) >> 63) != 0;
    const float zero = shift;   /* a padded (zero) pixel after normalisation */
    if (dy == 0 && dx == 0 && !flip) {
        for (size_t i = 0; i < h * w; i++) out[i] = (float)img[i] * scale + shift;
        return;
    }
    /* out[y][x] = in[y+dy][x'+dx] where x' = flip ? w-1-x : x; outside the image: zero pixel */
    for (size_t y = 0; y < h; y++) {
        int64_t sy = (int64_t)y + dy;
        for (size_t x = 0; x < w; x++) {
            int64_t xs = flip ? (int64_t)(w - 1 - x) : (int64_t)x;
            int64_t sx = xs + dx;
            out[y * w + x] = (sy < 0 || sy >= (int64_t)h || sx < 0 || sx >= (int64_t)w)
                                 ? zero
                                 : (float)img[(size_t)sy * w + (size_t)sx] * scale + shift;
        }
    }
}

static void fill(hy_loader *ld, const int64_t *idx, size_t b, size_t first_pos, int augment) {
    const hy_dataset *ds = ld->ds;
    HY_ASSERT(b <= ld->batch_size);
    ld->b = b;
    for (size_t i = 0; i < b; i++) {
        HY_ASSERT(idx[i] >= 0 && (size_t)idx[i] < ds->n);
        ld->index[i] = idx[i];
        ld->labels[i] = ds->labels[idx[i]];
    }
    if (ds->kind == HY_DATA_IMAGE) {
        const size_t hw = ds->h * ds->w, chw = ds->c * hw;
        hy_augment none = {0, 0, 0};
        const hy_augment *aug = augment ? &ld->aug : &none;
        for (size_t i = 0; i < b; i++) {
            hy_rng r = hy_rng_split(&ld->epoch_rng, 1 + first_pos + i);
            for (size_t c = 0; c < ds->c; c++) {
                /* (p/255 - mean)/std = p * (1/(255 std)) - mean/std; every channel starts
                 * from the same stream, so all get the same crop and flip */
                const float scale = (float)(1.0 / (255.0 * ds->cstd[c]));
                const float shift = (float)(-ds->cmean[c] / ds->cstd[c]);
                hy_rng rc = r;
                fill_image(ld->images + i * chw + c * hw,
                           ds->images + (size_t)idx[i] * chw + c * hw, ds->h, ds->w, scale,
                           shift, aug, &rc);
            }
        }
    } else {
        size_t len = batch_len(ds->lengths, idx, b);
        ld->len = len;
        for (size_t i = 0; i < b; i++) {
            memcpy(ld->ids + i * len, ds->ids + (size_t)idx[i] * ds->max_len,
                   len * sizeof(int32_t));
            if (ld->type_ids)
                memcpy(ld->type_ids + i * len, ds->type_ids + (size_t)idx[i] * ds->max_len,
                       len * sizeof(int32_t));
            ld->lengths[i] = ds->lengths[idx[i]];
        }
    }
}

size_t hy_loader_next(hy_loader *ld) {
    size_t n = ld->ds->n;
    if (ld->pos >= n) { ld->b = 0; return 0; }
    size_t b = n - ld->pos < ld->batch_size ? n - ld->pos : ld->batch_size;
    fill(ld, ld->order + ld->pos, b, ld->pos, 1);
    ld->pos += b;
    return b;
}

void hy_loader_fill(hy_loader *ld, const int64_t *idx, size_t b) { fill(ld, idx, b, 0, 0); }

/* ===== synthetic data ===== */

hy_status hy_synth_images(hy_tensor *images, hy_tensor *labels, size_t n, size_t size,
                          size_t classes, uint64_t seed) {
    memset(images, 0, sizeof *images);
    memset(labels, 0, sizeof *labels);
    if (classes < 1 || classes > 16 || size < 8)
        return hy_fail(HY_EINVAL, "loader: synthetic images need 1..16 classes and size >= 8 "
                       "(got %zu classes, size %zu)", classes, size);
    int64_t ishape[3] = {(int64_t)n, (int64_t)size, (int64_t)size}, lshape[1] = {(int64_t)n};
    HY_TRY(hy_tensor_alloc(images, HY_U8, 3, ishape));
    hy_status st = hy_tensor_alloc(labels, HY_I16, 1, lshape);
    if (st != HY_OK) { hy_tensor_release(images); return st; }
    /* class c's texture: a random binary cell x cell pattern tiled over the image */
    const size_t cell = size / 4;
    uint8_t *pat = hy_xmalloc(classes * cell * cell);
    if (!pat) {
        hy_tensor_release(images);
        hy_tensor_release(labels);
        return HY_ENOMEM;
    }
    for (size_t c = 0; c < classes; c++) {
        hy_rng pr;
        hy_rng_seed(&pr, 1000 + c);
        for (size_t j = 0; j < cell * cell; j++) 
            pat[c * cell * cell + j] = (uint8_t)(hy_rng_u64(&pr) >> 63);
    }
    hy_rng r;
    hy_rng_seed(&r, seed);
    uint8_t *img = images->data;
    int16_t *lab = labels->data;
    for (size_t i = 0; i < n; i++) {
        size_t c = (size_t)hy_rng_below(&r, classes);
        lab[i] = (int16_t)c;
        uint8_t *x = img + i * size * size;
        const uint8_t *p = pat + c * cell * cell;
        for (size_t y = 0; y < size; y++)
            for (size_t xx = 0; xx < size; xx++) {
                unsigned v = (unsigned)hy_rng_below(&r, 64);
                if (p[(y % cell) * cell + xx % cell]) v += 128 + (unsigned)hy_rng_below(&r, 64);
                x[y * size + xx] = (uint8_t)v;
            }
    }
    hy_free(pat);
    return HY_OK;
}

hy_status hy_synth_text(hy_tensor *ids, hy_tensor *lengths, hy_tensor *labels, size_t n,
                        size_t max_len, size_t vocab, uint64_t seed) {
    memset(ids, 0, sizeof *ids);
    memset(lengths, 0, sizeof *lengths);
    memset(labels, 0, sizeof *labels);
    if (max_len < 2 || vocab < 5)
        return hy_fail(HY_EINVAL, "loader: synthetic text needs max_len >= 2 and vocab >= 5 "
                       "(got %zu, %zu)", max_len, vocab);
    int64_t s2[2] = {(int64_t)n, (int64_t)max_len}, s1[1] = {(int64_t)n};
    hy_status st = hy_tensor_alloc(ids, HY_I32, 2, s2);
    if (st == HY_OK) st = hy_tensor_alloc(lengths, HY_I32, 1, s1);
    if (st == HY_OK) st = hy_tensor_alloc(labels, HY_I16, 1, s1);
    if (st != HY_OK) {
        hy_tensor_release(ids);
        hy_tensor_release(lengths);
        hy_tensor_release(labels);
        return st;
    }
    hy_rng r;
    hy_rng_seed(&r, seed);
    int32_t *id = ids->data, *len = lengths->data;
    int16_t *lab = labels->data;
    const size_t lo = max_len / 2;
    for (size_t i = 0; i < n; i++) {
        size_t L = lo + (size_t)hy_rng_below(&r, max_len - lo + 1);
        if (L < 1) L = 1;
        int c = (int)hy_rng_below(&r, 2);
        for (size_t j = 0; j < L; j++) id[i * max_len + j] = (int32_t)(4 + hy_rng_below(&r, vocab - 4));
        if (c) id[i * max_len + hy_rng_below(&r, L)] = 3;
        len[i] = (int32_t)L;
        lab[i] = (int16_t)c;
    }
    return HY_OK;
}
