/* corrupt.c: the corruptions of Fashion-MNIST-C. Each works on one image in [0,1] floats
 * (x = pixel / 255) and the result is rounded back to uint8 with clipping. */
#include "data/corrupt.h"

#include <math.h>
#include <string.h>

#include "data/imgio.h"
#include "tensor/rng.h"

typedef void (*corrupt_fn)(const float *in, float *out, size_t H, size_t W, double c, hy_rng *r,
                           float *scratch);

typedef struct spec {
    const char *name;
    corrupt_fn fn;
    double param[HY_CORRUPT_SEVERITIES];
    const char *describe;
} spec;

/* ===== helpers ===== */

static float clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Pixel with edge clamping. */
static float px(const float *im, size_t H, size_t W, long y, long x) {
    if (y < 0) y = 0;
    if (x < 0) x = 0;
    if (y >= (long)H) y = (long)H - 1;
    if (x >= (long)W) x = (long)W - 1;
    return im[(size_t)y * W + (size_t)x];
}

/* Bilinear sample with edge clamping. */
static float bilinear(const float *im, size_t H, size_t W, double y, double x) {
    double fy = floor(y), fx = floor(x);
    long y0 = (long)fy, x0 = (long)fx;
    double ay = y - fy, ax = x - fx;
    double v = (1 - ay) * ((1 - ax) * (double)px(im, H, W, y0, x0) + ax * (double)px(im, H, W, y0, x0 + 1)) +
               ay * ((1 - ax) * (double)px(im, H, W, y0 + 1, x0) + ax * (double)px(im, H, W, y0 + 1, x0 + 1));
    return (float)v;
}

/* 2-d convolution with a (2R+1)^2 kernel, edges clamped. */
static void convolve(const float *in, float *out, size_t H, size_t W, const double *k, long R) {
    long S = 2 * R + 1;
    for (size_t y = 0; y < H; y++)
        for (size_t x = 0; x < W; x++) {
            double acc = 0;
            for (long dy = -R; dy <= R; dy++)
                for (long dx = -R; dx <= R; dx++)
                    acc += k[(dy + R) * S + dx + R] * (double)px(in, H, W, (long)y + dy, (long)x + dx);
            out[y * W + x] = (float)acc;
        }
}

/* ===== noise ===== */

static void gaussian_noise(const float *in, float *out, size_t H, size_t W, double c, hy_rng *r,
                           float *scratch) {
    (void)scratch;
    for (size_t i = 0; i < H * W; i++) out[i] = (float)((double)in[i] + c * hy_rng_normal(r));
}

/* Poisson(lambda) by inversion from one uniform draw (exact for the lambdas used, <= 60). */
static double poisson(double lambda, double u) {
    double p = exp(-lambda), cdf = p;
    double k = 0;
    while (u > cdf && k < 1000) {
        k += 1;
        p *= lambda / k;
        cdf += p;
        if (p == 0) break;
    }
    return k;
}

static void shot_noise(const float *in, float *out, size_t H, size_t W, double c, hy_rng *r,
                       float *scratch) {
    (void)scratch;
    for (size_t i = 0; i < H * W; i++)
        out[i] = (float)(poisson((double)in[i] * c, hy_rng_double(r)) / c);
}

static void impulse_noise(const float *in, float *out, size_t H, size_t W, double c, hy_rng *r,
                          float *scratch) {
    (void)scratch;
    for (size_t i = 0; i < H * W; i++) {
        double u = hy_rng_double(r), v = hy_rng_double(r);
        out[i] = u < c ? (v < 0.5 ? 0.0f : 1.0f) : in[i];
    }
}

/* ===== blur ===== */

static void defocus_blur(const float *in, float *out, size_t H, size_t W, double c, hy_rng *r,
                         float *scratch) {
    (void)r; (void)scratch;
    long R = (long)ceil(c);
    long S = 2 * R + 1;
    double k[13 * 13], sum = 0;
    /* anti-aliased disk: coverage of each cell by the radius-c disk, 8x8 supersampled */
    for (long dy = -R; dy <= R; dy++)
        for (long dx = -R; dx <= R; dx++) {
            int hit = 0;
            for (int sy = 0; sy < 8; sy++)
                for (int sx = 0; sx < 8; sx++) {
                    double yy = (double)dy - 0.5 + (sy + 0.5) / 8, xx = (double)dx - 0.5 + (sx + 0.5) / 8;
                    hit += yy * yy + xx * xx <= c * c;
                }
            k[(dy + R) * S + dx + R] = hit;
            sum += hit;
        }
    for (long i = 0; i < S * S; i++) k[i] /= sum;
    convolve(in, out, H, W, k, R);
}

static void gaussian_blur(const float *in, float *out, size_t H, size_t W, double c, hy_rng *r,
                          float *scratch) {
    (void)r; (void)scratch;
    long R = (long)ceil(3 * c);
    if (R > 6) R = 6;
    long S = 2 * R + 1;
    double k[13 * 13], sum = 0;
    for (long dy = -R; dy <= R; dy++)
        for (long dx = -R; dx <= R; dx++) {
            double v = exp(-(double)(dy * dy + dx * dx) / (2 * c * c));
            k[(dy + R) * S + dx + R] = v;
            sum += v;
        }
    for (long i = 0; i < S * S; i++) k[i] /= sum;
    convolve(in, out, H, W, k, R);
}

/* Average of the image shifted along a line of length c at an angle drawn per image. */
static void motion_blur(const float *in, float *out, size_t H, size_t W, double c, hy_rng *r,
                        float *scratch) {
    (void)scratch;
    double th = (hy_rng_double(r) * 90.0 - 45.0) * 3.14159265358979323846 / 180.0;
    double cy = sin(th), cx = cos(th);
    int n = (int)ceil(c * 2) + 1;   /* samples every half pixel, from 0 to c */
    for (size_t y = 0; y < H; y++)
        for (size_t x = 0; x < W; x++) {
            double acc = 0;
            for (int k = 0; k < n; k++) {
                double t = c * k / (n - 1);
                acc += (double)bilinear(in, H, W, (double)y - t * cy, (double)x - t * cx);
            }
            out[y * W + x] = (float)(acc / n);
        }
}

/* ===== photometric ===== */

static void contrast(const float *in, float *out, size_t H, size_t W, double c, hy_rng *r,
                     float *scratch) {
    (void)r; (void)scratch;
    double m = 0;
    for (size_t i = 0; i < H * W; i++) m += (double)in[i];
    m /= (double)(H * W);
    for (size_t i = 0; i < H * W; i++) out[i] = (float)(((double)in[i] - m) * c + m);
}

static void brightness(const float *in, float *out, size_t H, size_t W, double c, hy_rng *r,
                       float *scratch) {
    (void)r; (void)scratch;
    for (size_t i = 0; i < H * W; i++) out[i] = (float)((double)in[i] + c);
}

/* ===== digital ===== */

static void pixelate(const float *in, float *out, size_t H, size_t W, double c, hy_rng *r,
                     float *scratch) {
    (void)r;
    size_t dh = (size_t)lround((double)H * c), dw = (size_t)lround((double)W * c);
    if (dh < 1) dh = 1;
    if (dw < 1) dw = 1;
    float *tmp = scratch, *small = scratch + H * W;
    hy_img_resize_area(in, W, H, tmp, small, dw, dh);
    for (size_t y = 0; y < H; y++)
        for (size_t x = 0; x < W; x++)
            out[y * W + x] = small[(y * dh / H) * dw + x * dw / W];
}

static const int JPEG_LUMA[64] = {
    16, 11, 10, 16, 24,  40,  51,  61,  12, 12, 14, 19, 26,  58,  60,  55,
    14, 13, 16, 24, 40,  57,  69,  56,  14, 17, 22, 29, 51,  87,  80,  62,
    18, 22, 37, 56, 68,  109, 103, 77,  24, 35, 55, 64, 81,  104, 113, 92,
    49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99};

/* JPEG-like: 8x8 DCT-II of (255x - 128), quantised with the IJG luminance table at quality c,
 * dequantised and inverted (edges padded by replication to a multiple of 8). */
static void jpeg(const float *in, float *out, size_t H, size_t W, double c, hy_rng *r,
                 float *scratch) {
    (void)r; (void)scratch;
    double q[64], cosv[8][8];
    double s = c < 50 ? 5000.0 / c : 200.0 - 2 * c;
    for (int i = 0; i < 64; i++) {
        double v = floor((JPEG_LUMA[i] * s + 50) / 100);
        q[i] = v < 1 ? 1 : v > 255 ? 255 : v;
    }
    for (int u = 0; u < 8; u++)
        for (int x = 0; x < 8; x++)
            cosv[u][x] = (u == 0 ? sqrt(0.125) : 0.5) * cos((2 * x + 1) * u * 3.14159265358979323846 / 16);
    for (size_t by = 0; by < H; by += 8)
        for (size_t bx = 0; bx < W; bx += 8) {
            double b[8][8], t[8][8], d[8][8];
            for (int y = 0; y < 8; y++)
                for (int x = 0; x < 8; x++)
                    b[y][x] = 255.0 * (double)px(in, H, W, (long)(by + (size_t)y), (long)(bx + (size_t)x)) - 128.0;
            /* forward: rows then columns */
            for (int y = 0; y < 8; y++)
                for (int u = 0; u < 8; u++) {
                    double a = 0;
                    for (int x = 0; x < 8; x++) a += cosv[u][x] * b[y][x];
                    t[y][u] = a;
                }
            for (int v = 0; v < 8; v++)
                for (int u = 0; u < 8; u++) {
                    double a = 0;
                    for (int y = 0; y < 8; y++) a += cosv[v][y] * t[y][u];
                    d[v][u] = q[v * 8 + u] * nearbyint(a / q[v * 8 + u]);
                }
            /* inverse */
            for (int v = 0; v < 8; v++)
                for (int x = 0; x < 8; x++) {
                    double a = 0;
                    for (int u = 0; u < 8; u++) a += cosv[u][x] * d[v][u];
                    t[v][x] = a;
                }
            for (int y = 0; y < 8; y++)
                for (int x = 0; x < 8; x++) {
                    if (by + (size_t)y >= H || bx + (size_t)x >= W) continue;
                    double a = 0;
                    for (int v = 0; v < 8; v++) a += cosv[v][y] * t[v][x];
                    out[(by + (size_t)y) * W + bx + (size_t)x] = (float)((a + 128.0) / 255.0);
                }
        }
}

/* Elastic: a random displacement field (uniform [-1,1] per pixel, Gaussian-smoothed with
 * sigma 2, scaled to an RMS of c pixels) resamples the image bilinearly. */
static void elastic(const float *in, float *out, size_t H, size_t W, double c, hy_rng *r,
                    float *scratch) {
    float *raw = scratch, *dfy = scratch + H * W, *dfx = scratch + 2 * H * W;
    double k[13 * 13], sum = 0;
    const double sg = 2.0;
    const long R = 6, S = 13;
    for (long dy = -R; dy <= R; dy++)
        for (long dx = -R; dx <= R; dx++) {
            double v = exp(-(double)(dy * dy + dx * dx) / (2 * sg * sg));
            k[(dy + R) * S + dx + R] = v;
            sum += v;
        }
    for (long i = 0; i < S * S; i++) k[i] /= sum;
    for (int axis = 0; axis < 2; axis++) {
        float *f = axis == 0 ? dfy : dfx;
        for (size_t i = 0; i < H * W; i++) raw[i] = (float)(2 * hy_rng_double(r) - 1);
        convolve(raw, f, H, W, k, R);
        double ss = 0;
        for (size_t i = 0; i < H * W; i++) ss += (double)f[i] * (double)f[i];
        double rms = sqrt(ss / (double)(H * W));
        for (size_t i = 0; i < H * W; i++) f[i] = (float)((double)f[i] * c / (rms > 0 ? rms : 1));
    }
    for (size_t y = 0; y < H; y++)
        for (size_t x = 0; x < W; x++)
            out[y * W + x] = bilinear(in, H, W, (double)y + (double)dfy[y * W + x],
                                      (double)x + (double)dfx[y * W + x]);
}

static const spec SPECS[] = {
    {"gaussian_noise", gaussian_noise, {0.08, 0.12, 0.18, 0.26, 0.38},
     "x + N(0, sigma^2) on x = pixel/255; param sigma"},
    {"shot_noise", shot_noise, {60, 25, 12, 5, 3}, "Poisson(x * lambda) / lambda; param lambda"},
    {"impulse_noise", impulse_noise, {0.03, 0.06, 0.09, 0.17, 0.27},
     "salt-and-pepper: fraction of pixels set to 0 or 1 (half each); param fraction"},
    {"defocus_blur", defocus_blur, {0.75, 1.0, 1.5, 2.0, 2.5},
     "convolution with an anti-aliased disk; param radius (px)"},
    {"gaussian_blur", gaussian_blur, {0.5, 0.75, 1.0, 1.25, 1.5},
     "convolution with a Gaussian; param sigma (px)"},
    {"motion_blur", motion_blur, {2, 3, 4, 5, 6},
     "mean along a line at an angle uniform in [-45, 45] degrees per image; param length (px)"},
    {"contrast", contrast, {0.7, 0.5, 0.4, 0.3, 0.15},
     "(x - mean) * c + mean, mean per image; param c"},
    {"brightness", brightness, {0.1, 0.2, 0.3, 0.4, 0.5}, "x + c; param c"},
    {"pixelate", pixelate, {0.75, 0.6, 0.45, 0.35, 0.25},
     "area downscale by c, nearest upscale; param c"},
    {"jpeg", jpeg, {60, 40, 25, 15, 8},
     "8x8 DCT quantised with the IJG luminance table; param quality"},
    {"elastic", elastic, {0.5, 0.8, 1.1, 1.5, 2.0},
     "bilinear resampling through a smoothed random displacement field (sigma 2 px); "
     "param RMS displacement (px)"},
};
#define NSPECS (sizeof SPECS / sizeof SPECS[0])

size_t hy_corrupt_count(void) { return NSPECS; }
const char *hy_corrupt_name(size_t i) { return i < NSPECS ? SPECS[i].name : NULL; }
const char *hy_corrupt_describe(size_t i) { return i < NSPECS ? SPECS[i].describe : NULL; }

int hy_corrupt_find(const char *name) {
    for (size_t i = 0; i < NSPECS; i++)
        if (strcmp(SPECS[i].name, name) == 0) return (int)i;
    return -1;
}

double hy_corrupt_param(size_t i, int severity) {
    if (i >= NSPECS || severity < 1 || severity > HY_CORRUPT_SEVERITIES) return NAN;
    return SPECS[i].param[severity - 1];
}

hy_status hy_corrupt_apply(const char *name, int severity, uint64_t seed, const hy_tensor *in,
                           hy_tensor *out) {
    memset(out, 0, sizeof *out);
    int id = hy_corrupt_find(name);
    if (id < 0) {
        char known[512] = "";
        for (size_t i = 0; i < NSPECS; i++) {
            if (i) strncat(known, ", ", sizeof known - strlen(known) - 1);
            strncat(known, SPECS[i].name, sizeof known - strlen(known) - 1);
        }
        return hy_fail(HY_EINVAL, "corrupt: unknown corruption '%s' (known: %s)", name, known);
    }
    if (severity < 1 || severity > HY_CORRUPT_SEVERITIES)
        return hy_fail(HY_EINVAL, "corrupt: severity %d out of range [1, %d]", severity,
                       HY_CORRUPT_SEVERITIES);
    if (in->dtype != HY_U8 || in->ndim != 3 || in->shape[1] < 2 || in->shape[2] < 2) {
        char b[64];
        return hy_fail(HY_EINVAL, "corrupt: expects uint8 [N,H,W] images with H, W >= 2 (got %s %s)",
                       hy_dtype_name(in->dtype), hy_shape_str(b, sizeof b, in->ndim, in->shape));
    }
    HY_TRY(hy_tensor_alloc(out, HY_U8, 3, in->shape));
    const size_t N = (size_t)in->shape[0], H = (size_t)in->shape[1], W = (size_t)in->shape[2];
    const spec *sp = &SPECS[id];
    const double c = sp->param[severity - 1];
    hy_rng base;
    hy_rng_seed(&base, seed);
    const hy_rng stream = hy_rng_split(&base, (uint64_t)id);
    const uint8_t *src = in->data;
    uint8_t *dst = out->data;
    /* per thread: input, output and 3 scratch planes */
    size_t plane = H * W;
    int failed = 0;
#pragma omp parallel
    {
        float *buf = hy_xmalloc(5 * plane * sizeof *buf);
        if (!buf) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (size_t n = 0; n < N; n++) {
            if (!buf) continue;
            float *x = buf, *y = buf + plane;
            hy_rng r = hy_rng_split(&stream, (uint64_t)n);
            for (size_t i = 0; i < plane; i++) x[i] = (float)src[n * plane + i] / 255.0f;
            sp->fn(x, y, H, W, c, &r, buf + 2 * plane);
            for (size_t i = 0; i < plane; i++)
                dst[n * plane + i] = (uint8_t)lrintf(clampf(y[i], 0.0f, 1.0f) * 255.0f);
        }
        hy_free(buf);
    }
    if (failed) {
        hy_tensor_release(out);
        return hy_fail(HY_ENOMEM, "corrupt: out of memory for scratch planes");
    }
    return HY_OK;
}

hy_status hy_corrupt_noise_images(const char *kind, int64_t n, int64_t h, int64_t w, double mean,
                                  double std, uint64_t seed, hy_tensor *out) {
    memset(out, 0, sizeof *out);
    int gauss = strcmp(kind, "gaussian") == 0;
    if (!gauss && strcmp(kind, "uniform") != 0)
        return hy_fail(HY_EINVAL, "corrupt: unknown noise '%s' (known: gaussian, uniform)", kind);
    int64_t shape[3] = {n, h, w};
    HY_TRY(hy_tensor_alloc(out, HY_U8, 3, shape));
    hy_rng base;
    hy_rng_seed(&base, seed);
    uint8_t *o = out->data;
    size_t plane = (size_t)(h * w);
    for (int64_t i = 0; i < n; i++) {
        hy_rng r = hy_rng_split(&base, (uint64_t)i);
        for (size_t k = 0; k < plane; k++) {
            double v = gauss ? mean + std * hy_rng_normal(&r) : hy_rng_double(&r);
            v = v < 0 ? 0 : v > 1 ? 1 : v;
            o[(size_t)i * plane + k] = (uint8_t)lrint(v * 255.0);
        }
    }
    return HY_OK;
}
