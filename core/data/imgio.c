/* imgio.c: PNG decoding through libpng's simplified API, and uint8 image-stack operations. */
#include "data/imgio.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <string.h>

static hy_status need_u8_stack(const hy_tensor *t, const char *fn) {
    if (t->dtype != HY_U8 || t->ndim != 3) {
        char b[64];
        return hy_fail(HY_EINVAL, "imgio: %s expects uint8 [N,H,W] (got %s %s)", fn,
                       hy_dtype_name(t->dtype), hy_shape_str(b, sizeof b, t->ndim, t->shape));
    }
    return HY_OK;
}

hy_status hy_png_read_gray(const char *path, hy_tensor *out) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return hy_fail(HY_EIO, "imgio: cannot open '%s': %s", path, strerror(errno));
    uint8_t sig[8];
    size_t got = fread(sig, 1, 8, f);
    fclose(f);
    if (got < 8 || png_sig_cmp(sig, 0, 8) != 0)
        return hy_fail(HY_EIO, "imgio: '%s' is not a PNG file (bad signature)", path);
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&img, path))
        return hy_fail(HY_EIO, "imgio: '%s': corrupt PNG (%s)", path, img.message);
    img.format = PNG_FORMAT_GRAY;
    int64_t shape[2] = {(int64_t)img.height, (int64_t)img.width};
    hy_status st = hy_tensor_alloc(out, HY_U8, 2, shape);
    if (st != HY_OK) { png_image_free(&img); return st; }
    if (!png_image_finish_read(&img, NULL, out->data, (png_int_32)img.width, NULL)) {
        st = hy_fail(HY_EIO, "imgio: '%s': corrupt PNG (%s)", path, img.message);
        png_image_free(&img);
        hy_tensor_release(out);
        return st;
    }
    return HY_OK;
}

hy_status hy_png_write_gray(const char *path, const hy_tensor *t) {
    if (t->dtype != HY_U8 || t->ndim != 2)
        return hy_fail(HY_EINVAL, "imgio: png write expects uint8 [H,W] (got %s, %d dims)",
                       hy_dtype_name(t->dtype), t->ndim);
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = (png_uint_32)t->shape[1];
    img.height = (png_uint_32)t->shape[0];
    img.format = PNG_FORMAT_GRAY;
    if (!png_image_write_to_file(&img, path, 0, t->data, (png_int_32)t->shape[1], NULL))
        return hy_fail(HY_EIO, "imgio: cannot write '%s' (%s)", path, img.message);
    return HY_OK;
}

hy_status hy_img_tiles(const hy_tensor *sheet, int64_t th, int64_t tw, hy_tensor *out) {
    memset(out, 0, sizeof *out);
    if (sheet->dtype != HY_U8 || sheet->ndim != 2)
        return hy_fail(HY_EINVAL, "imgio: tiles expects a uint8 [H,W] sheet (got %s, %d dims)",
                       hy_dtype_name(sheet->dtype), sheet->ndim);
    int64_t H = sheet->shape[0], W = sheet->shape[1];
    if (th < 1 || tw < 1 || H % th != 0 || W % tw != 0)
        return hy_fail(HY_EINVAL, "imgio: sheet %lldx%lld is not a multiple of the %lldx%lld cell",
                       (long long)H, (long long)W, (long long)th, (long long)tw);
    int64_t rows = H / th, cols = W / tw;
    int64_t shape[3] = {rows * cols, th, tw};
    HY_TRY(hy_tensor_alloc(out, HY_U8, 3, shape));
    const uint8_t *s = sheet->data;
    uint8_t *o = out->data;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            for (int64_t y = 0; y < th; y++)
                memcpy(o + (size_t)(((r * cols + c) * th + y) * tw),
                       s + (size_t)((r * th + y) * W + c * tw), (size_t)tw);
    return HY_OK;
}

hy_status hy_img_pad(const hy_tensor *in, int64_t top, int64_t bottom, int64_t left,
                     int64_t right, uint8_t value, hy_tensor *out) {
    memset(out, 0, sizeof *out);
    HY_TRY(need_u8_stack(in, "pad"));
    if (top < 0 || bottom < 0 || left < 0 || right < 0)
        return hy_fail(HY_EINVAL, "imgio: pad sizes must be >= 0 (got %lld %lld %lld %lld)",
                       (long long)top, (long long)bottom, (long long)left, (long long)right);
    int64_t N = in->shape[0], H = in->shape[1], W = in->shape[2];
    int64_t shape[3] = {N, 0, 0};
    /* the sizes come from the user: a sum past INT64_MAX is an error, not a wrap */
    if (__builtin_add_overflow(H, top, &shape[1]) ||
        __builtin_add_overflow(shape[1], bottom, &shape[1]) ||
        __builtin_add_overflow(W, left, &shape[2]) ||
        __builtin_add_overflow(shape[2], right, &shape[2]))
        return hy_fail(HY_EINVAL, "imgio: padded size overflows (pads %lld %lld %lld %lld on "
                       "%lldx%lld)", (long long)top, (long long)bottom, (long long)left,
                       (long long)right, (long long)H, (long long)W);
    HY_TRY(hy_tensor_alloc(out, HY_U8, 3, shape));
    const uint8_t *s = in->data;
    uint8_t *o = out->data;
    memset(o, value, hy_tensor_nbytes(out));
    for (int64_t n = 0; n < N; n++)
        for (int64_t y = 0; y < H; y++)
            memcpy(o + (size_t)((n * shape[1] + y + top) * shape[2] + left),
                   s + (size_t)((n * H + y) * W), (size_t)W);
    return HY_OK;
}

hy_status hy_img_flip_v(const hy_tensor *in, hy_tensor *out) {
    memset(out, 0, sizeof *out);
    HY_TRY(need_u8_stack(in, "flip_v"));
    HY_TRY(hy_tensor_alloc(out, HY_U8, 3, in->shape));
    int64_t N = in->shape[0], H = in->shape[1], W = in->shape[2];
    const uint8_t *s = in->data;
    uint8_t *o = out->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t y = 0; y < H; y++)
            memcpy(o + (size_t)((n * H + (H - 1 - y)) * W), s + (size_t)((n * H + y) * W),
                   (size_t)W);
    return HY_OK;
}

hy_status hy_img_invert(const hy_tensor *in, hy_tensor *out) {
    memset(out, 0, sizeof *out);
    HY_TRY(need_u8_stack(in, "invert"));
    HY_TRY(hy_tensor_alloc(out, HY_U8, 3, in->shape));
    const uint8_t *s = in->data;
    uint8_t *o = out->data;
    size_t n = hy_tensor_numel(in);
    for (size_t i = 0; i < n; i++) o[i] = (uint8_t)(255 - s[i]);
    return HY_OK;
}

hy_status hy_img_stats(const hy_tensor *in, double *mean, double *std) {
    if (in->dtype != HY_U8)
        return hy_fail(HY_EINVAL, "imgio: stats expects uint8 pixels (got %s)",
                       hy_dtype_name(in->dtype));
    size_t n = hy_tensor_numel(in);
    if (n == 0) return hy_fail(HY_EINVAL, "imgio: stats of an empty tensor");
    /* exact integer sums: n * 255^2 fits easily in 64 bits for any realistic n */
    uint64_t s1 = 0, s2 = 0;
    const uint8_t *p = in->data;
    for (size_t i = 0; i < n; i++) { s1 += p[i]; s2 += (uint64_t)p[i] * p[i]; }
    double m = (double)s1 / (double)n;
    double var = (double)s2 / (double)n - m * m;
    *mean = m / 255.0;
    *std = sqrt(var > 0 ? var : 0) / 255.0;
    return HY_OK;
}

/* ===== resampling ===== */

void hy_img_resize_area(const float *src, size_t w, size_t h, float *tmp, float *dst,
                        size_t dw, size_t dh) {
    /* horizontal: tmp [h, dw] */
    double fx = (double)w / (double)dw, fy = (double)h / (double)dh;
    for (size_t y = 0; y < h; y++)
        for (size_t x = 0; x < dw; x++) {
            double a = (double)x * fx, b = (double)(x + 1) * fx, acc = 0;
            for (size_t s = (size_t)a; s < w && (double)s < b; s++) {
                double lo = fmax(a, (double)s), hi = fmin(b, (double)(s + 1));
                acc += (hi - lo) * (double)src[y * w + s];
            }
            tmp[y * dw + x] = (float)(acc / fx);
        }
    for (size_t y = 0; y < dh; y++) {
        double a = (double)y * fy, b = (double)(y + 1) * fy;
        for (size_t x = 0; x < dw; x++) {
            double acc = 0;
            for (size_t s = (size_t)a; s < h && (double)s < b; s++) {
                double lo = fmax(a, (double)s), hi = fmin(b, (double)(s + 1));
                acc += (hi - lo) * (double)tmp[s * dw + x];
            }
            dst[y * dw + x] = (float)(acc / fy);
        }
    }
}
