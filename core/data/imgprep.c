/* imgprep.c: RGB decoding (libpng low-level API, libjpeg-turbo), PIL's resampler, centre crop,
 * the timm / HF pipelines and CIFAR binaries (see imgprep.h). */
#include "data/imgprep.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

/* ===== PNG ===== */

typedef struct {
    const char *path;
    char msg[200];
} png_err_ctx;

static void png_on_error(png_structp png, png_const_charp msg) {
    png_err_ctx *e = png_get_error_ptr(png);
    snprintf(e->msg, sizeof e->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg;
}

static hy_status too_large(const char *path, uint64_t w, uint64_t h, uint64_t max_pixels) {
    return hy_fail(HY_EINVAL, "imgprep: '%s' is %llux%llu = %llu pixels, more than the limit "
                   "%llu", path, (unsigned long long)w, (unsigned long long)h,
                   (unsigned long long)(w * h), (unsigned long long)max_pixels);
}

static hy_status read_png(FILE *f, const char *path, uint64_t max_pixels, hy_tensor *out) {
    png_err_ctx ectx = {path, ""};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &ectx, png_on_error,
                                             png_on_warning);
    if (!png) return hy_fail(HY_ENOMEM, "imgprep: out of memory reading '%s'", path);
    png_infop info = png_create_info_struct(png);
    /* volatile: modified between setjmp and a possible longjmp */
    uint8_t *volatile rows16 = NULL;
    png_bytep *volatile rowp = NULL;
    hy_tensor *volatile res = out;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return hy_fail(HY_ENOMEM, "imgprep: out of memory reading '%s'", path);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        hy_free(rows16);
        hy_free(rowp);
        hy_tensor_release(res);
        return hy_fail(HY_EIO, "imgprep: '%s': corrupt PNG (%s)", path, ectx.msg);
    }
    png_init_io(png, f);
    png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    int depth = png_get_bit_depth(png, info), ctype = png_get_color_type(png, info);
    if ((uint64_t)w * h > max_pixels) {
        png_destroy_read_struct(&png, &info, NULL);
        return too_large(path, w, h, max_pixels);
    }
    /* 16-bit grey without alpha: PIL mode "I", convert("RGB") clips at 255 (not the high
     * byte): read 16 bits and clip ourselves */
    int grey16 = depth == 16 && ctype == PNG_COLOR_TYPE_GRAY;
    if (ctype == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (ctype == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16 && !grey16) png_set_strip_16(png);   /* the high byte, as PIL's ;16B */
    if (grey16) png_set_swap(png);                       /* host (little) endian 16-bit */
    /* alpha, and tRNS (which palette expansion turns into alpha), dropped as convert("RGB")
     * drops them */
    if ((ctype & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS))
        png_set_strip_alpha(png);
    if (!grey16 && (ctype == PNG_COLOR_TYPE_GRAY || ctype == PNG_COLOR_TYPE_GRAY_ALPHA))
        png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    size_t want = grey16 ? 2 * (size_t)w : 3 * (size_t)w;
    if (rowbytes != want) png_error(png, "unexpected row size after conversion");
    int64_t shape[3] = {(int64_t)h, (int64_t)w, 3};
    if (hy_tensor_alloc(res, HY_U8, 3, shape) != HY_OK) png_error(png, "out of memory");
    rowp = hy_xmalloc(((size_t)h + 1) * sizeof *rowp);
    if (grey16) rows16 = hy_xmalloc((size_t)h * rowbytes + 1);
    if (!rowp || (grey16 && !rows16)) png_error(png, "out of memory");
    uint8_t *base = grey16 ? rows16 : res->data;
    for (size_t y = 0; y < h; y++) rowp[y] = base + y * rowbytes;
    png_read_image(png, rowp);
    png_read_end(png, NULL);
    if (grey16) {
        uint8_t *o = res->data;
        for (size_t i = 0; i < (size_t)w * h; i++) {
            uint16_t v;
            memcpy(&v, rows16 + 2 * i, 2);
            uint8_t c = v > 255 ? 255 : (uint8_t)v;
            o[3 * i] = o[3 * i + 1] = o[3 * i + 2] = c;
        }
    }
    png_destroy_read_struct(&png, &info, NULL);
    hy_free(rows16);
    hy_free(rowp);
    return HY_OK;
}

/* ===== JPEG ===== */

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
} jpeg_err;

static void jpeg_on_error(j_common_ptr c) {
    jpeg_err *e = (jpeg_err *)c->err;
    longjmp(e->jb, 1);
}

/* Warnings are ignored as PIL ignores them, except a premature end of the data: PIL refuses a
 * truncated file ("image file is truncated") where libjpeg would pad it with grey. */
static void jpeg_on_message(j_common_ptr c, int level) {
    if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) jpeg_on_error(c);
}

static hy_status read_jpeg(FILE *f, const char *path, uint64_t max_pixels, hy_tensor *out) {
    struct jpeg_decompress_struct cinfo;
    jpeg_err jerr;
    hy_tensor *volatile res = out;
    volatile int started = 0;
    memset(&cinfo, 0, sizeof cinfo);
    cinfo.err = jpeg_std_error(&jerr.pub);
    jerr.pub.error_exit = jpeg_on_error;
    jerr.pub.emit_message = jpeg_on_message;
    if (setjmp(jerr.jb)) {
        char msg[JMSG_LENGTH_MAX];
        (*cinfo.err->format_message)((j_common_ptr)&cinfo, msg);
        jpeg_destroy_decompress(&cinfo);
        hy_tensor_release(res);
        return hy_fail(HY_EIO, "imgprep: '%s': corrupt JPEG (%s)", path, msg);
    }
    jpeg_create_decompress(&cinfo);
    jpeg_stdio_src(&cinfo, f);
    jpeg_read_header(&cinfo, TRUE);
    if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
        jpeg_destroy_decompress(&cinfo);
        return hy_fail(HY_EINVAL, "imgprep: '%s' is a CMYK JPEG (only RGB/YCbCr and grey JPEGs "
                       "are read)", path);
    }
    if ((uint64_t)cinfo.image_width * cinfo.image_height > max_pixels) {
        uint64_t w = cinfo.image_width, h = cinfo.image_height;
        jpeg_destroy_decompress(&cinfo);
        return too_large(path, w, h, max_pixels);
    }
    int grey = cinfo.jpeg_color_space == JCS_GRAYSCALE;
    cinfo.out_color_space = grey ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&cinfo);
    started = 1;
    size_t w = cinfo.output_width, h = cinfo.output_height;
    int64_t shape[3] = {(int64_t)h, (int64_t)w, 3};
    if (hy_tensor_alloc(res, HY_U8, 3, shape) != HY_OK) {
        jpeg_destroy_decompress(&cinfo);
        return HY_ENOMEM;
    }
    uint8_t *o = res->data;
    while (cinfo.output_scanline < cinfo.output_height) {
        uint8_t *row = o + (size_t)cinfo.output_scanline * w * 3;
        JSAMPROW rp = row;
        jpeg_read_scanlines(&cinfo, &rp, 1);
        if (grey)   /* expand in place, from the right end */
            for (size_t x = w; x-- > 0;) row[3 * x] = row[3 * x + 1] = row[3 * x + 2] = row[x];
    }
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    (void)started;
    return HY_OK;
}

hy_status hy_img_read_rgb(const char *path, uint64_t max_pixels, hy_tensor *out) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return hy_fail(HY_EIO, "imgprep: cannot open '%s': %s", path, strerror(errno));
    uint8_t sig[8] = {0};
    size_t got = fread(sig, 1, 8, f);
    rewind(f);
    hy_status st;
    if (got == 8 && png_sig_cmp(sig, 0, 8) == 0)
        st = read_png(f, path, max_pixels, out);
    else if (got >= 3 && sig[0] == 0xFF && sig[1] == 0xD8 && sig[2] == 0xFF)
        st = read_jpeg(f, path, max_pixels, out);
    else
        st = hy_fail(HY_EINVAL, "imgprep: '%s' is neither a PNG nor a JPEG file (bad signature)",
                     path);
    fclose(f);
    return st;
}

/* ===== PIL's resampler (Pillow src/libImaging/Resample.c, 8 bits per channel) ===== */

#define PREC 22   /* PRECISION_BITS = 32 - 8 - 2 */

static double filter_bilinear(double x) {
    if (x < 0) x = -x;
    return x < 1 ? 1 - x : 0;
}

static double filter_bicubic(double x) {
    const double a = -0.5;
    if (x < 0) x = -x;
    if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
    return 0;
}

/* Fixed-point weights of resampling in_size -> out_size: for output i, taps
 * bounds[2i] .. + bounds[2i+1] with weights k[i*ksize ..]. Returns ksize, 0 on no memory. */
static size_t coeffs(size_t in_size, size_t out_size, hy_resample f, int32_t **kk_out,
                     int32_t **bounds_out) {
    double support0 = f == HY_RESAMPLE_BICUBIC ? 2.0 : 1.0;
    double (*fn)(double) = f == HY_RESAMPLE_BICUBIC ? filter_bicubic : filter_bilinear;
    double scale = (double)in_size / (double)out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = support0 * filterscale;
    size_t ksize = (size_t)ceil(support) * 2 + 1;
    double *k = hy_xmalloc(ksize * sizeof *k);
    int32_t *kk = hy_xmalloc(out_size * ksize * sizeof *kk);
    int32_t *bounds = hy_xmalloc(out_size * 2 * sizeof *bounds);
    if (!k || !kk || !bounds) { hy_free(k); hy_free(kk); hy_free(bounds); return 0; }
    for (size_t xx = 0; xx < out_size; xx++) {
        double center = ((double)xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
        int64_t xmin = (int64_t)(center - support + 0.5), xmax = (int64_t)(center + support + 0.5);
        if (xmin < 0) xmin = 0;
        if (xmax > (int64_t)in_size) xmax = (int64_t)in_size;
        xmax -= xmin;
        size_t x = 0;
        for (; x < (size_t)xmax; x++) {
            double w = fn(((double)x + (double)xmin - center + 0.5) * ss);
            k[x] = w;
            ww += w;
        }
        for (x = 0; x < (size_t)xmax; x++)
            if (ww != 0.0) k[x] /= ww;
        for (; x < ksize; x++) k[x] = 0;
        for (x = 0; x < ksize; x++)
            kk[xx * ksize + x] = (int32_t)(k[x] < 0 ? -0.5 + k[x] * (1 << PREC)
                                                   : 0.5 + k[x] * (1 << PREC));
        bounds[2 * xx] = (int32_t)xmin;
        bounds[2 * xx + 1] = (int32_t)xmax;
    }
    hy_free(k);
    *kk_out = kk;
    *bounds_out = bounds;
    return ksize;
}

static inline uint8_t clip8(int64_t v) {
    v >>= PREC;
    return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

hy_status hy_img_resize(const hy_tensor *in, size_t dw, size_t dh, hy_resample filter,
                        hy_tensor *out) {
    memset(out, 0, sizeof *out);
    if (in->dtype != HY_U8 || in->ndim != 3 || in->shape[2] < 1 || in->shape[2] > 4)
        return hy_fail(HY_EINVAL, "imgprep: resize expects uint8 [H,W,C] with C 1..4");
    size_t H = (size_t)in->shape[0], W = (size_t)in->shape[1], C = (size_t)in->shape[2];
    if (dw == 0 || dh == 0 || H == 0 || W == 0)
        return hy_fail(HY_EINVAL, "imgprep: resize of %zux%zu to %zux%zu (sizes must be >= 1)",
                       W, H, dw, dh);
    int64_t shape[3] = {(int64_t)dh, (int64_t)dw, (int64_t)C};
    HY_TRY(hy_tensor_alloc(out, HY_U8, 3, shape));
    const uint8_t *src = in->data;
    uint8_t *tmp = NULL;
    int32_t *kk = NULL, *bounds = NULL;
    hy_status st = HY_OK;
    /* pass 1: horizontal, W -> dw, into tmp [H, dw, C] (or src itself when W == dw) */
    if (dw != W) {
        size_t ks = coeffs(W, dw, filter, &kk, &bounds);
        tmp = hy_xmalloc(H * dw * C + 1);
        if (!ks || !tmp) { st = HY_ENOMEM; goto done; }
        for (size_t y = 0; y < H; y++)
            for (size_t x = 0; x < dw; x++) {
                const int32_t *k = kk + x * ks;
                size_t x0 = (size_t)bounds[2 * x], n = (size_t)bounds[2 * x + 1];
                for (size_t c = 0; c < C; c++) {
                    int64_t s = (int64_t)1 << (PREC - 1);
                    for (size_t j = 0; j < n; j++)
                        s += (int64_t)src[(y * W + x0 + j) * C + c] * k[j];
                    tmp[(y * dw + x) * C + c] = clip8(s);
                }
            }
        hy_free(kk);
        hy_free(bounds);
        kk = bounds = NULL;
        src = tmp;
    }
    /* pass 2: vertical, H -> dh */
    if (dh != H) {
        size_t ks = coeffs(H, dh, filter, &kk, &bounds);
        if (!ks) { st = HY_ENOMEM; goto done; }
        uint8_t *o = out->data;
        for (size_t y = 0; y < dh; y++) {
            const int32_t *k = kk + y * ks;
            size_t y0 = (size_t)bounds[2 * y], n = (size_t)bounds[2 * y + 1];
            for (size_t x = 0; x < dw * C; x++) {
                int64_t s = (int64_t)1 << (PREC - 1);
                for (size_t j = 0; j < n; j++) s += (int64_t)src[(y0 + j) * dw * C + x] * k[j];
                o[y * dw * C + x] = clip8(s);
            }
        }
    } else {
        memcpy(out->data, src, H * dw * C);
    }
done:
    hy_free(kk);
    hy_free(bounds);
    hy_free(tmp);
    if (st != HY_OK) {
        hy_tensor_release(out);
        return hy_fail(st, "imgprep: out of memory resizing %zux%zu to %zux%zu", W, H, dw, dh);
    }
    return HY_OK;
}

/* Python's round(x / 2) for an integer x: half to even */
static int64_t round_half_even_div2(int64_t x) {
    int64_t q = x >= 0 ? x / 2 : -((-x) / 2);
    if (x % 2 != 0 && (q % 2 != 0)) q += x > 0 ? 1 : -1;
    return q;
}

hy_status hy_img_center_crop(const hy_tensor *in, size_t size, hy_tensor *out) {
    memset(out, 0, sizeof *out);
    if (in->dtype != HY_U8 || in->ndim != 3)
        return hy_fail(HY_EINVAL, "imgprep: center crop expects uint8 [H,W,C]");
    if (size == 0) return hy_fail(HY_EINVAL, "imgprep: center crop size must be >= 1");
    int64_t H = in->shape[0], W = in->shape[1], C = in->shape[2], S = (int64_t)size;
    /* padding (torchvision): left/top (S - W) // 2, the rest right/bottom; then the crop */
    int64_t pl = W < S ? (S - W) / 2 : 0, pt = H < S ? (S - H) / 2 : 0;
    int64_t PW = W + (W < S ? S - W : 0), PH = H + (H < S ? S - H : 0);
    int64_t top = round_half_even_div2(PH - S), left = round_half_even_div2(PW - S);
    int64_t shape[3] = {S, S, C};
    HY_TRY(hy_tensor_alloc(out, HY_U8, 3, shape));
    uint8_t *o = out->data;
    const uint8_t *s = in->data;
    memset(o, 0, (size_t)(S * S * C));
    for (int64_t y = 0; y < S; y++) {
        int64_t sy = y + top - pt;
        if (sy < 0 || sy >= H) continue;
        for (int64_t x = 0; x < S; x++) {
            int64_t sx = x + left - pl;
            if (sx < 0 || sx >= W) continue;
            memcpy(o + (y * S + x) * C, s + (sy * W + sx) * C, (size_t)C);
        }
    }
    return HY_OK;
}

hy_status hy_imgprep_apply(const hy_imgprep *p, const hy_tensor *rgb, hy_tensor *out) {
    memset(out, 0, sizeof *out);
    if (rgb->dtype != HY_U8 || rgb->ndim != 3 || rgb->shape[2] != 3)
        return hy_fail(HY_EINVAL, "imgprep: expects RGB uint8 [H,W,3]");
    if (p->size < 1) return hy_fail(HY_EINVAL, "imgprep: size must be >= 1");
    size_t H = (size_t)rgb->shape[0], W = (size_t)rgb->shape[1], S = p->size;
    hy_tensor r = {0}, c = {0};
    const hy_tensor *sq;
    if (p->hf) {
        HY_TRY(hy_img_resize(rgb, S, S, p->interpolation, &r));
        sq = &r;
    } else {
        if (!(p->crop_pct > 0 && p->crop_pct <= 1))
            return hy_fail(HY_EINVAL, "imgprep: crop_pct must be in (0, 1] (got %g)", p->crop_pct);
        size_t scale = (size_t)floor((double)S / p->crop_pct);
        size_t shrt = W <= H ? W : H, lng = W <= H ? H : W;
        size_t nl = (size_t)((double)scale * (double)lng / (double)shrt);
        size_t nw = W <= H ? scale : nl, nh = W <= H ? nl : scale;
        HY_TRY(hy_img_resize(rgb, nw, nh, p->interpolation, &r));
        hy_status st = hy_img_center_crop(&r, S, &c);
        hy_tensor_release(&r);
        if (st != HY_OK) return st;
        sq = &c;
    }
    int64_t shape[3] = {3, (int64_t)S, (int64_t)S};
    hy_status st = hy_tensor_alloc(out, HY_U8, 3, shape);
    if (st == HY_OK) {
        const uint8_t *s = sq->data;
        uint8_t *o = out->data;
        for (size_t ch = 0; ch < 3; ch++)
            for (size_t i = 0; i < S * S; i++) o[ch * S * S + i] = s[3 * i + ch];
    }
    hy_tensor_release(&r);
    hy_tensor_release(&c);
    return st;
}

/* ===== CIFAR ===== */

hy_status hy_cifar_read(const char *path, int label_bytes, hy_tensor *images, hy_tensor *labels,
                        hy_tensor *coarse) {
    memset(images, 0, sizeof *images);
    memset(labels, 0, sizeof *labels);
    if (coarse) memset(coarse, 0, sizeof *coarse);
    if (label_bytes != 1 && label_bytes != 2)
        return hy_fail(HY_EINVAL, "imgprep: CIFAR label bytes must be 1 or 2");
    const char *kind = label_bytes == 1 ? "CIFAR-10" : "CIFAR-100";
    const int ncls = label_bytes == 1 ? 10 : 100;
    size_t rec = (size_t)label_bytes + 3072;
    FILE *f = fopen(path, "rb");
    if (!f) return hy_fail(HY_EIO, "imgprep: cannot open '%s': %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return hy_fail(HY_EIO, "imgprep: cannot seek '%s'", path); }
    long sz = ftell(f);
    rewind(f);
    if (sz <= 0 || (size_t)sz % rec != 0) {
        fclose(f);
        return hy_fail(HY_EINVAL, "imgprep: '%s' is %ld bytes, not a multiple of the %zu-byte %s "
                       "record", path, sz, rec, kind);
    }
    size_t n = (size_t)sz / rec;
    int64_t is[4] = {(int64_t)n, 3, 32, 32}, ls[1] = {(int64_t)n};
    hy_status st = hy_tensor_alloc(images, HY_U8, 4, is);
    if (st == HY_OK) st = hy_tensor_alloc(labels, HY_I16, 1, ls);
    if (st == HY_OK && coarse) st = hy_tensor_alloc(coarse, HY_I16, 1, ls);
    uint8_t buf[3074];
    for (size_t i = 0; st == HY_OK && i < n; i++) {
        if (fread(buf, 1, rec, f) != rec) {
            st = hy_fail(HY_EIO, "imgprep: cannot read record %zu of '%s'", i, path);
            break;
        }
        int lab = buf[label_bytes - 1];
        if (lab >= ncls) {
            st = hy_fail(HY_EINVAL, "imgprep: '%s' record %zu has label %d (%s has %d classes)",
                         path, i, lab, kind, ncls);
            break;
        }
        if (label_bytes == 2 && buf[0] >= 20) {
            st = hy_fail(HY_EINVAL, "imgprep: '%s' record %zu has coarse label %d (expected "
                         "< 20)", path, i, buf[0]);
            break;
        }
        ((int16_t *)labels->data)[i] = (int16_t)lab;
        if (coarse) ((int16_t *)coarse->data)[i] = (int16_t)(label_bytes == 2 ? buf[0] : lab);
        memcpy((uint8_t *)images->data + i * 3072, buf + label_bytes, 3072);
    }
    fclose(f);
    if (st != HY_OK) {
        hy_tensor_release(images);
        hy_tensor_release(labels);
        if (coarse) hy_tensor_release(coarse);
    }
    return st;
}
