/* test_imgprep.c: RGB decoding, PIL's resampler and the timm / HF pipelines of
 * core/data/imgprep.c against PIL / torchvision (tests/ref/make_image_ref.py ->
 * tests/ref/image_ref.h5 and the images in tests/ref/images/), centre-crop rounding, CIFAR
 * binaries, and the error messages (bad signature, truncated file, pixel limit). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "data/imgprep.h"
#include "io/h5.h"

#define REF "tests/ref/image_ref.h5"
#define IMAGES "tests/ref/images/"

typedef struct {
    char **files;
    size_t nfiles;
    hy_tensor data[3], index[3];
} ref;

static const char *const GROUPS[3] = {"decode", "resize", "pipeline"};

static hy_status ref_load(ref *r) {
    memset(r, 0, sizeof *r);
    hy_h5 f;
    HY_TRY(hy_h5_open(&f, REF));
    hy_status st = hy_h5_read_strings(&f, "/files", &r->files, &r->nfiles);
    char name[64];
    for (int g = 0; g < 3 && st == HY_OK; g++) {
        snprintf(name, sizeof name, "/%s/data", GROUPS[g]);
        st = hy_h5_read(&f, name, &r->data[g]);
        snprintf(name, sizeof name, "/%s/index", GROUPS[g]);
        if (st == HY_OK) st = hy_h5_read_as(&f, name, HY_I64, &r->index[g]);
    }
    hy_h5_close(&f);
    return st;
}

static void ref_release(ref *r) {
    hy_h5_strings_free(r->files, r->nfiles);
    for (int g = 0; g < 3; g++) {
        hy_tensor_release(&r->data[g]);
        hy_tensor_release(&r->index[g]);
    }
}

static ref R;

/* largest |got - want| over n bytes; got is HWC when planar == 0, CHW [3,h,w] otherwise */
static int max_diff(const uint8_t *got, const uint8_t *want, size_t h, size_t w, int planar) {
    int worst = 0;
    for (size_t y = 0; y < h; y++)
        for (size_t x = 0; x < w; x++)
            for (size_t c = 0; c < 3; c++) {
                int g = planar ? got[(c * h + y) * w + x] : got[(y * w + x) * 3 + c];
                int d = abs(g - (int)want[(y * w + x) * 3 + c]);
                if (d > worst) worst = d;
            }
    return worst;
}

static hy_status decode(size_t file, hy_tensor *out) {
    char path[512];
    snprintf(path, sizeof path, IMAGES "%s", R.files[file]);
    return hy_img_read_rgb(path, HY_IMG_MAX_PIXELS, out);
}

static void test_decode(void) {
    const int64_t *ix = R.index[0].data;
    const uint8_t *data = R.data[0].data;
    size_t K = (size_t)R.index[0].shape[0], W = (size_t)R.index[0].shape[1];
    for (size_t k = 0; k < K; k++) {
        const int64_t *row = ix + k * W;
        hy_tensor t;
        CHECK_OK(decode((size_t)row[3], &t));
        if (!t.data) continue;
        CHECK(t.shape[0] == row[1] && t.shape[1] == row[2], "%s: %lldx%lld, want %lldx%lld",
              R.files[row[3]], (long long)t.shape[0], (long long)t.shape[1],
              (long long)row[1], (long long)row[2]);
        if (t.shape[0] == row[1] && t.shape[1] == row[2]) {
            /* same pixels as PIL (libpng, and the same libjpeg-turbo build PIL links) */
            int d = max_diff(t.data, data + row[0], (size_t)row[1], (size_t)row[2], 0);
            CHECK(d == 0, "%s: decoded pixels differ from PIL's by up to %d", R.files[row[3]], d);
        }
        hy_tensor_release(&t);
    }
    CHECK(K == 10, "%zu decode cases", K);
}

static void test_resize(void) {
    const int64_t *ix = R.index[1].data;
    const uint8_t *data = R.data[1].data;
    size_t K = (size_t)R.index[1].shape[0], W = (size_t)R.index[1].shape[1];
    int worst = 0;
    size_t exact = 0;
    for (size_t k = 0; k < K; k++) {
        const int64_t *row = ix + k * W;
        hy_tensor in, out;
        CHECK_OK(decode((size_t)row[3], &in));
        hy_resample f = row[4] ? HY_RESAMPLE_BICUBIC : HY_RESAMPLE_BILINEAR;
        CHECK_OK(hy_img_resize(&in, (size_t)row[2], (size_t)row[1], f, &out));
        if (out.data) {
            int d = max_diff(out.data, data + row[0], (size_t)row[1], (size_t)row[2], 0);
            CHECK(d <= 1, "%s -> %lldx%lld (%s): off by %d levels", R.files[row[3]],
                  (long long)row[2], (long long)row[1], row[4] ? "bicubic" : "bilinear", d);
            if (d > worst) worst = d;
            exact += d == 0;
        }
        hy_tensor_release(&in);
        hy_tensor_release(&out);
    }
    printf("  resize: %zu cases, %zu bit-exact, worst %d level(s)\n", K, exact, worst);
}

static void test_pipeline(void) {
    const int64_t *ix = R.index[2].data;
    const uint8_t *data = R.data[2].data;
    size_t K = (size_t)R.index[2].shape[0], W = (size_t)R.index[2].shape[1];
    int worst = 0, saw224 = 0;
    size_t exact = 0;
    for (size_t k = 0; k < K; k++) {
        const int64_t *row = ix + k * W;
        hy_imgprep p = {.hf = (int)row[4],
                        .interpolation = row[5] ? HY_RESAMPLE_BICUBIC : HY_RESAMPLE_BILINEAR,
                        .size = (size_t)row[1], .crop_pct = (double)row[6] / 1000.0};
        hy_tensor in, out;
        CHECK_OK(decode((size_t)row[3], &in));
        CHECK_OK(hy_imgprep_apply(&p, &in, &out));
        if (out.data) {
            CHECK(out.shape[0] == 3 && out.shape[1] == row[1] && out.shape[2] == row[2],
                  "pipeline output shape");
            int d = max_diff(out.data, data + row[0], (size_t)row[1], (size_t)row[2], 1);
            CHECK(d <= 1, "%s %s %s size %lld crop_pct %.3f: off by %d levels", R.files[row[3]],
                  p.hf ? "hf" : "timm", row[5] ? "bicubic" : "bilinear", (long long)row[1],
                  p.crop_pct, d);
            if (d > worst) worst = d;
            exact += d == 0;
            saw224 |= row[1] == 224;
        }
        hy_tensor_release(&in);
        hy_tensor_release(&out);
    }
    CHECK(saw224, "no 224 x 224 case");
    printf("  pipeline: %zu cases, %zu bit-exact, worst %d level(s)\n", K, exact, worst);
}

static void test_center_crop_rounding(void) {
    /* H = 5, crop 2: torchvision's top = round(1.5) = 2; W = 7, crop 2: round(2.5) = 2 */
    int64_t shape[3] = {5, 7, 1};
    hy_tensor in, out;
    CHECK_OK(hy_tensor_alloc(&in, HY_U8, 3, shape));
    uint8_t *p = in.data;
    for (int i = 0; i < 35; i++) p[i] = (uint8_t)i;
    CHECK_OK(hy_img_center_crop(&in, 2, &out));
    const uint8_t *o = out.data;
    CHECK(o[0] == 2 * 7 + 2 && o[1] == 2 * 7 + 3 && o[2] == 3 * 7 + 2, "crop origin (%d)", o[0]);
    hy_tensor_release(&out);
    /* a crop larger than the image pads: 7 wide -> 10: left pad 1, right 2; 5 -> 10: 2, 3 */
    CHECK_OK(hy_img_center_crop(&in, 10, &out));
    o = out.data;
    CHECK(o[2 * 10 + 1] == 0 + 0 && o[2 * 10 + 2] == 1 && o[6 * 10 + 7] == 4 * 7 + 6 &&
          o[6 * 10 + 8] == 0 && o[0] == 0, "padded crop");
    hy_tensor_release(&out);
    hy_tensor_release(&in);
}

static void write_bytes(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fwrite(b, 1, n, f);
    fclose(f);
}

static void test_cifar(void) {
    char p10[512], p100[512], msg[700];
    snprintf(p10, sizeof p10, "%s/data_batch_1.bin", check_tmpdir());
    snprintf(p100, sizeof p100, "%s/train.bin", check_tmpdir());
    static uint8_t buf[3 * 3074];
    for (size_t r = 0; r < 3; r++) {
        buf[r * 3073] = (uint8_t)(7 - r);
        for (size_t j = 0; j < 3072; j++) buf[r * 3073 + 1 + j] = (uint8_t)(r * 31 + j);
    }
    write_bytes(p10, buf, 3 * 3073);
    hy_tensor im, lab, coarse;
    CHECK_OK(hy_cifar_read(p10, 1, &im, &lab, NULL));
    if (im.data) {
        const int16_t *l = lab.data;
        const uint8_t *px = im.data;
        CHECK(im.ndim == 4 && im.shape[0] == 3 && im.shape[1] == 3 && im.shape[2] == 32,
              "shape");
        CHECK(l[0] == 7 && l[1] == 6 && l[2] == 5, "labels %d %d %d", l[0], l[1], l[2]);
        /* record 1, G plane (bytes 1024..2047), row 2, col 5 */
        CHECK(px[3072 + 1024 + 2 * 32 + 5] == (uint8_t)(31 + 1024 + 69), "pixel order");
    }
    hy_tensor_release(&im);
    hy_tensor_release(&lab);
    for (size_t r = 0; r < 3; r++) {
        buf[r * 3074] = (uint8_t)(19 - r);
        buf[r * 3074 + 1] = (uint8_t)(99 - r);
    }
    write_bytes(p100, buf, 3 * 3074);
    CHECK_OK(hy_cifar_read(p100, 2, &im, &lab, &coarse));
    if (lab.data) {
        const int16_t *l = lab.data, *c = coarse.data;
        CHECK(l[0] == 99 && l[2] == 97 && c[0] == 19 && c[2] == 17, "fine/coarse labels");
    }
    hy_tensor_release(&im);
    hy_tensor_release(&lab);
    hy_tensor_release(&coarse);
    write_bytes(p10, buf, 3075);
    snprintf(msg, sizeof msg, "imgprep: '%s' is 3075 bytes, not a multiple of the 3073-byte "
             "CIFAR-10 record", p10);
    CHECK_FAIL(hy_cifar_read(p10, 1, &im, &lab, NULL), HY_EINVAL, msg);
    buf[0] = 10;
    write_bytes(p10, buf, 3073);
    snprintf(msg, sizeof msg, "imgprep: '%s' record 0 has label 10 (CIFAR-10 has 10 classes)",
             p10);
    CHECK_FAIL(hy_cifar_read(p10, 1, &im, &lab, NULL), HY_EINVAL, msg);
}

static void test_errors(void) {
    char path[512], msg[700];
    hy_tensor t;
    snprintf(path, sizeof path, "%s/x.png", check_tmpdir());
    write_bytes(path, "GIF89a......", 12);
    snprintf(msg, sizeof msg, "imgprep: '%s' is neither a PNG nor a JPEG file (bad signature)",
             path);
    CHECK_FAIL(hy_img_read_rgb(path, HY_IMG_MAX_PIXELS, &t), HY_EINVAL, msg);
    /* the first 300 bytes of a real PNG / JPEG: truncated */
    const char *src[2] = {IMAGES "fruits_rgb_97x61.png", IMAGES "baboon_rgb_45x77.jpg"};
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen(src[k], "rb");
        char b[300];
        size_t n = f ? fread(b, 1, sizeof b, f) : 0;
        if (f) fclose(f);
        snprintf(path, sizeof path, "%s/cut%d.%s", check_tmpdir(), k, k ? "jpg" : "png");
        write_bytes(path, b, n);
        snprintf(msg, sizeof msg, "imgprep: '%s': corrupt %s (", path, k ? "JPEG" : "PNG");
        CHECK_FAIL_HAS(hy_img_read_rgb(path, HY_IMG_MAX_PIXELS, &t), HY_EIO, msg);
        CHECK(t.data == NULL, "nothing returned on failure");
    }
    /* a JPEG cut inside its scan data: libjpeg would pad it, PIL (and hydra) refuse it */
    {
        FILE *f = fopen(src[1], "rb");
        static char b[2500];
        size_t n = f ? fread(b, 1, sizeof b, f) : 0;
        if (f) fclose(f);
        CHECK(n == sizeof b, "read %zu bytes of %s", n, src[1]);
        snprintf(path, sizeof path, "%s/cutscan.jpg", check_tmpdir());
        write_bytes(path, b, n);
        snprintf(msg, sizeof msg, "imgprep: '%s': corrupt JPEG (Premature end of JPEG file)",
                 path);
        CHECK_FAIL(hy_img_read_rgb(path, HY_IMG_MAX_PIXELS, &t), HY_EIO, msg);
    }
    /* pixel limit, from the header */
    snprintf(msg, sizeof msg, "imgprep: '%s' is 97x61 = 5917 pixels, more than the limit 5000",
             src[0]);
    CHECK_FAIL(hy_img_read_rgb(src[0], 5000, &t), HY_EINVAL, msg);
    snprintf(msg, sizeof msg, "imgprep: '%s' is 45x77 = 3465 pixels, more than the limit 3464",
             src[1]);
    CHECK_FAIL(hy_img_read_rgb(src[1], 3464, &t), HY_EINVAL, msg);
    CHECK_OK(hy_img_read_rgb(src[1], 3465, &t));
    hy_tensor_release(&t);
    CHECK_FAIL_HAS(hy_img_read_rgb("/nonexistent.png", HY_IMG_MAX_PIXELS, &t), HY_EIO,
                   "imgprep: cannot open '/nonexistent.png'");
}

int main(void) {
    if (ref_load(&R) != HY_OK) {
        fprintf(stderr, "test_imgprep: cannot load %s: %s\n", REF, hy_errmsg());
        return 1;
    }
    RUN(test_decode);
    RUN(test_resize);
    RUN(test_pipeline);
    RUN(test_center_crop_rounding);
    RUN(test_cifar);
    RUN(test_errors);
    ref_release(&R);
    return check_exit("test_imgprep");
}
