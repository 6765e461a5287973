/* test_data.c: the dataset core: SHA-256/MD5 known answers, idx reading (good, gzip, truncated,
 * bad magic, trailing bytes -> messages with file and offset), PNG round trip, tiles/pad/flip,
 * stratified splits, corruption determinism and severity monotonicity, glyph rendering. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "data/corrupt.h"
#include "data/glyph.h"
#include "io/hash.h"
#include "data/idx.h"
#include "data/imgio.h"
#include "tensor/rng.h"
#include "data/sample.h"

static void sha_hex(const char *s, size_t n, size_t reps, char *out) {
    hy_sha256 c;
    uint8_t d[32];
    hy_sha256_init(&c);
    for (size_t i = 0; i < reps; i++) hy_sha256_update(&c, s, n);
    hy_sha256_final(&c, d);
    hy_hash_hex(d, 32, out);
}

static void md5_hex(const char *s, char *out) {
    hy_md5 c;
    uint8_t d[16];
    hy_md5_init(&c);
    hy_md5_update(&c, s, strlen(s));
    hy_md5_final(&c, d);
    hy_hash_hex(d, 16, out);
}

static void test_sha256_vectors(void) {
    /* FIPS 180-4 examples and the NIST long-message vector */
    char h[65];
    sha_hex("", 0, 1, h);
    CHECK(strcmp(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0, "%s", h);
    sha_hex("abc", 3, 1, h);
    CHECK(strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0, "%s", h);
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha_hex(m, strlen(m), 1, h);
    CHECK(strcmp(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0, "%s", h);
    sha_hex("aaaaaaaaaa", 10, 100000, h);   /* one million 'a', fed in odd-sized pieces */
    CHECK(strcmp(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0, "%s", h);
    /* split updates across block boundaries give the same digest */
    hy_sha256 c;
    uint8_t d[32];
    hy_sha256_init(&c);
    hy_sha256_update(&c, m, 5);
    hy_sha256_update(&c, m + 5, 50);
    hy_sha256_update(&c, m + 55, strlen(m) - 55);
    hy_sha256_final(&c, d);
    hy_hash_hex(d, 32, h);
    CHECK(strcmp(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0, "%s", h);
}

static void test_md5_vectors(void) {
    /* RFC 1321 test suite */
    static const char *v[][2] = {
        {"", "d41d8cd98f00b204e9800998ecf8427e"},
        {"a", "0cc175b9c0f1b6a831c399e269772661"},
        {"abc", "900150983cd24fb0d6963f7d28e17f72"},
        {"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
        {"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"},
        {"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
         "57edf4a22be3c955ac49da2e2107b67a"}};
    char h[33];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        md5_hex(v[i][0], h);
        CHECK(strcmp(h, v[i][1]) == 0, "md5(\"%s\") = %s", v[i][0], h);
    }
}

static char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 512, "%s/%s", check_tmpdir(), name);
    return p;
}

static void write_bytes(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    HY_ASSERT(f != NULL);
    HY_ASSERT(fwrite(b, 1, n, f) == n);
    fclose(f);
}

static void test_hash_file(void) {
    const char *p = tmp_path("abc.txt");
    write_bytes(p, "abc", 3);
    char h[65];
    CHECK_OK(hy_hash_file(p, HY_HASH_SHA256, 0, h));
    CHECK(strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0, "%s", h);
    CHECK_OK(hy_hash_file(p, HY_HASH_MD5, 0, h));
    CHECK(strcmp(h, "900150983cd24fb0d6963f7d28e17f72") == 0, "%s", h);
    /* spliced: "a" + file[1:] == "abc"; "xy" + file[3:] == "xy" */
    CHECK_OK(hy_hash_file_spliced(p, HY_HASH_MD5, "a", 1, 1, h));
    CHECK(strcmp(h, "900150983cd24fb0d6963f7d28e17f72") == 0, "%s", h);
    CHECK_FAIL_HAS(hy_hash_file_spliced(p, HY_HASH_MD5, "", 0, 9, h), HY_EIO, "is shorter than 9 bytes");
    char msg[600];
    snprintf(msg, sizeof msg, "hash: cannot open '%s/nope': No such file or directory", check_tmpdir());
    CHECK_FAIL(hy_hash_file(tmp_path("nope"), HY_HASH_SHA256, 0, h), HY_EIO, msg);
}

/* a small idx of 3 images 2x3, values i*7 */
static void small_images(hy_tensor *t) {
    int64_t shape[3] = {3, 2, 3};
    HY_ASSERT(hy_tensor_alloc(t, HY_U8, 3, shape) == HY_OK);
    for (size_t i = 0; i < 18; i++) ((uint8_t *)t->data)[i] = (uint8_t)(i * 7);
}

static void test_idx_roundtrip(void) {
    hy_tensor t, r;
    small_images(&t);
    for (int gz = 0; gz <= 1; gz++) {
        const char *p = tmp_path(gz ? "a.idx.gz" : "a.idx");
        CHECK_OK(hy_idx_write(p, &t, gz));
        CHECK_OK(hy_idx_read(p, &r));
        CHECK(r.dtype == HY_U8 && r.ndim == 3 && r.shape[0] == 3 && r.shape[1] == 2 &&
              r.shape[2] == 3, "shape");
        CHECK(memcmp(r.data, t.data, 18) == 0, "content (gz %d)", gz);
        hy_tensor_release(&r);
    }
    /* big-endian int16 decoding */
    int64_t n = 3;
    hy_tensor s;
    CHECK_OK(hy_tensor_alloc(&s, HY_I16, 1, &n));
    ((int16_t *)s.data)[0] = -2; ((int16_t *)s.data)[1] = 300; ((int16_t *)s.data)[2] = 7;
    const char *p = tmp_path("s.idx");
    CHECK_OK(hy_idx_write(p, &s, 0));
    uint8_t raw[14];
    FILE *f = fopen(p, "rb");
    CHECK(f && fread(raw, 1, 14, f) == 14, "read back");
    if (f) fclose(f);
    CHECK(raw[2] == 0x0B && raw[3] == 1 && raw[10] == 0x01 && raw[11] == 0x2C, "big-endian layout");
    CHECK_OK(hy_idx_read(p, &r));
    CHECK(r.dtype == HY_I16 && ((int16_t *)r.data)[0] == -2 && ((int16_t *)r.data)[1] == 300,
          "int16 values");
    hy_tensor_release(&r);
    hy_tensor_release(&s);
    hy_tensor_release(&t);
}

static void test_idx_errors(void) {
    char msg[700];
    hy_tensor r;
    const char *p = tmp_path("bad.idx");
    uint8_t bad_magic[] = {0x12, 0x34, 0x08, 0x03, 0, 0, 0, 1};
    write_bytes(p, bad_magic, sizeof bad_magic);
    snprintf(msg, sizeof msg, "idx: '%s': bad magic at byte 0 (expected 00 00 TYPE NDIM, got 12 34 08 03)", p);
    CHECK_FAIL(hy_idx_read(p, &r), HY_EIO, msg);
    CHECK(r.data == NULL, "out zeroed");

    uint8_t bad_type[] = {0, 0, 0x07, 0x01, 0, 0, 0, 1, 5};
    write_bytes(p, bad_type, sizeof bad_type);
    snprintf(msg, sizeof msg, "idx: '%s': unknown element type 0x07 at byte 2", p);
    CHECK_FAIL(hy_idx_read(p, &r), HY_EIO, msg);

    uint8_t zero_dim[] = {0, 0, 0x08, 0x02, 0, 0, 0, 2, 0, 0, 0, 0};
    write_bytes(p, zero_dim, sizeof zero_dim);
    snprintf(msg, sizeof msg, "idx: '%s': dimension 2 is 0 at byte 8", p);
    CHECK_FAIL(hy_idx_read(p, &r), HY_EIO, msg);

    /* truncated data: header promises 3x2x3 = 18 bytes, only 10 follow (offset 16 + 10 = 26) */
    hy_tensor t;
    small_images(&t);
    const char *g = tmp_path("full.idx");
    CHECK_OK(hy_idx_write(g, &t, 0));
    uint8_t buf[64];
    FILE *f = fopen(g, "rb");
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    CHECK(n == 34, "full idx is 34 bytes (%zu)", n);
    write_bytes(p, buf, 26);
    snprintf(msg, sizeof msg, "idx: '%s': truncated at byte 26 (header says 34 bytes)", p);
    CHECK_FAIL(hy_idx_read(p, &r), HY_EIO, msg);
    write_bytes(p, buf, 6);
    snprintf(msg, sizeof msg, "idx: '%s': truncated at byte 6 (header needs 16 bytes)", p);
    CHECK_FAIL(hy_idx_read(p, &r), HY_EIO, msg);
    buf[34] = 9;
    write_bytes(p, buf, 35);
    snprintf(msg, sizeof msg, "idx: '%s': trailing data after byte 34 (header says 34 bytes)", p);
    CHECK_FAIL(hy_idx_read(p, &r), HY_EIO, msg);

    /* truncated gzip stream: the message names the file and the byte reached */
    const char *z = tmp_path("t.idx.gz");
    CHECK_OK(hy_idx_write(z, &t, 1));
    f = fopen(z, "rb");
    uint8_t zb[256];
    size_t zn = f ? fread(zb, 1, sizeof zb, f) : 0;
    if (f) fclose(f);
    write_bytes(z, zb, zn - 12);
    hy_status st = hy_idx_read(z, &r);
    CHECK(st == HY_EIO, "truncated gzip fails");
    snprintf(msg, sizeof msg, "idx: '%s': ", z);
    CHECK(strncmp(hy_errmsg(), msg, strlen(msg)) == 0 && strstr(hy_errmsg(), "byte") != NULL,
          "message names file and byte: %s", hy_errmsg());
    hy_tensor_release(&t);

    snprintf(msg, sizeof msg, "idx: cannot open '%s': No such file or directory", tmp_path("none.idx"));
    CHECK_FAIL(hy_idx_read(tmp_path("none.idx"), &r), HY_EIO, msg);
}

static void test_png_and_tiles(void) {
    int64_t shape[2] = {4, 6};
    hy_tensor s, r, tiles, pad, flip, inv;
    CHECK_OK(hy_tensor_alloc(&s, HY_U8, 2, shape));
    for (int i = 0; i < 24; i++) ((uint8_t *)s.data)[i] = (uint8_t)(i * 10);
    const char *p = tmp_path("s.png");
    CHECK_OK(hy_png_write_gray(p, &s));
    CHECK_OK(hy_png_read_gray(p, &r));
    CHECK(r.shape[0] == 4 && r.shape[1] == 6 && memcmp(r.data, s.data, 24) == 0, "png round trip");
    /* 2x3 cells: 4 tiles, row-major over the sheet */
    CHECK_OK(hy_img_tiles(&s, 2, 3, &tiles));
    const uint8_t *tp = tiles.data;
    CHECK(tiles.shape[0] == 4 && tp[0] == 0 && tp[6] == 30 && tp[3] == 60 && tp[12] == 120,
          "tile order %d %d %d %d", tp[0], tp[6], tp[3], tp[12]);
    hy_tensor_release(&r);
    CHECK_FAIL(hy_img_tiles(&s, 3, 3, &r), HY_EINVAL, "imgio: sheet 4x6 is not a multiple of the 3x3 cell");
    CHECK_OK(hy_img_pad(&tiles, 1, 2, 3, 4, 0, &pad));
    const uint8_t *pp = pad.data;
    CHECK(pad.shape[1] == 5 && pad.shape[2] == 10 && pp[0] == 0 && pp[1 * 10 + 3] == tp[0] &&
          pp[2 * 10 + 5] == tp[5], "pad");
    hy_tensor big;   /* user-sized pads whose sum passes INT64_MAX: an error, not a wrap (UB) */
    CHECK_FAIL(hy_img_pad(&tiles, 0, 0, INT64_MAX, 1, 0, &big), HY_EINVAL,
               "imgio: padded size overflows (pads 0 0 9223372036854775807 1 on 2x3)");
    CHECK_OK(hy_img_flip_v(&tiles, &flip));
    CHECK(((uint8_t *)flip.data)[0] == tp[3], "flip_v");
    CHECK_OK(hy_img_invert(&tiles, &inv));
    CHECK(((uint8_t *)inv.data)[1] == 255 - tp[1], "invert");
    write_bytes(p, "not a png at all", 16);
    hy_tensor_release(&r);
    char msg[600];
    snprintf(msg, sizeof msg, "imgio: '%s' is not a PNG file (bad signature)", p);
    CHECK_FAIL(hy_png_read_gray(p, &r), HY_EIO, msg);
    double m, sd;
    CHECK_OK(hy_img_stats(&s, &m, &sd));
    CHECK(fabs(m - 115.0 / 255) < 1e-12, "mean %g", m);
    hy_tensor_release(&s); hy_tensor_release(&tiles); hy_tensor_release(&pad);
    hy_tensor_release(&flip); hy_tensor_release(&inv);
}

static void test_stratified(void) {
    int64_t n = 1000;
    hy_tensor lab, keep, hold, keep2, hold2;
    CHECK_OK(hy_tensor_alloc(&lab, HY_I16, 1, &n));
    for (int64_t i = 0; i < n; i++) ((int16_t *)lab.data)[i] = (int16_t)((i * 7) % 10);
    CHECK_OK(hy_sample_stratified(&lab, 10, 20, 5, &keep, &hold));
    CHECK(hold.shape[0] == 200 && keep.shape[0] == 800, "sizes");
    int counts[10] = {0};
    const int64_t *h = hold.data, *k = keep.data;
    for (int i = 0; i < 200; i++) {
        counts[((int16_t *)lab.data)[h[i]]]++;
        if (i) CHECK(h[i] > h[i - 1], "hold sorted");
    }
    for (int c = 0; c < 10; c++) CHECK(counts[c] == 20, "class %d has %d held out", c, counts[c]);
    /* disjoint and covering */
    uint8_t seen[1000] = {0};
    for (int i = 0; i < 200; i++) seen[h[i]]++;
    for (int i = 0; i < 800; i++) seen[k[i]]++;
    int ok = 1;
    for (int i = 0; i < 1000; i++) ok &= seen[i] == 1;
    CHECK(ok, "keep and hold partition the samples");
    CHECK_OK(hy_sample_stratified(&lab, 10, 20, 5, &keep2, &hold2));
    CHECK(memcmp(hold.data, hold2.data, 200 * 8) == 0, "same seed, same split");
    hy_tensor_release(&keep2); hy_tensor_release(&hold2);
    CHECK_OK(hy_sample_stratified(&lab, 10, 20, 6, &keep2, &hold2));
    CHECK(memcmp(hold.data, hold2.data, 200 * 8) != 0, "another seed, another split");
    hy_tensor_release(&keep);
    hy_tensor_release(&hold);
    CHECK_FAIL(hy_sample_stratified(&lab, 10, 101, 5, &keep, &hold), HY_EINVAL,
               "sample: class 0 has 100 samples, fewer than the 101 to hold out");
    CHECK_FAIL(hy_sample_stratified(&lab, 5, 1, 5, &keep, &hold), HY_EINVAL,
               "sample: label 7 of sample 2 out of range [0, 5)");
    hy_tensor g;
    CHECK_FAIL(hy_sample_gather(&hold2, &lab, &g), HY_EINVAL,
               "sample: gather indices must be int64 [k] (got int16, 1 dims)");
    ((int64_t *)hold2.data)[3] = 1000;
    CHECK_FAIL(hy_sample_gather(&lab, &hold2, &g), HY_EINVAL,
               "sample: index 1000 out of range [0, 1000) at position 3");
    hy_tensor_release(&keep2); hy_tensor_release(&hold2);
    /* slice bounds are compared without forming start + count (no signed overflow) */
    CHECK_FAIL(hy_sample_slice(&lab, 2, INT64_MAX, &g), HY_EINVAL,
               "sample: rows [2, 2 + 9223372036854775807) out of range [0, 1000)");
    CHECK_FAIL(hy_sample_slice(&lab, 1001, 0, &g), HY_EINVAL,
               "sample: rows [1001, 1001 + 0) out of range [0, 1000)");
    CHECK_OK(hy_sample_slice(&lab, 1000, 0, &g));
    CHECK(g.ndim == 1 && g.shape[0] == 0, "empty slice at the end");
    hy_tensor_release(&g);
    hy_tensor_release(&lab);
}

/* synthetic fashion-like images: a bright blob with texture on black */
static void synth_images(hy_tensor *t, size_t n) {
    int64_t shape[3] = {(int64_t)n, 28, 28};
    HY_ASSERT(hy_tensor_alloc(t, HY_U8, 3, shape) == HY_OK);
    hy_rng r;
    hy_rng_seed(&r, check_seed());
    uint8_t *p = t->data;
    for (size_t i = 0; i < n; i++) {
        double cx = 10 + 8 * hy_rng_double(&r), cy = 10 + 8 * hy_rng_double(&r);
        double rad = 5 + 5 * hy_rng_double(&r);
        for (int y = 0; y < 28; y++)
            for (int x = 0; x < 28; x++) {
                double d = sqrt((x - cx) * (x - cx) + (y - cy) * (y - cy));
                double v = d < rad ? 120 + 100 * ((x / 3 + y / 2) % 2) : 0;
                p[i * 784 + (size_t)(y * 28 + x)] = (uint8_t)v;
            }
    }
}

static double mean_abs_change(const hy_tensor *a, const hy_tensor *b) {
    size_t n = hy_tensor_numel(a);
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += fabs((double)((const uint8_t *)a->data)[i] - (double)((const uint8_t *)b->data)[i]);
    return s / (double)n;
}

static void test_corrupt_monotone_and_deterministic(void) {
    hy_tensor im;
    synth_images(&im, 40);
    CHECK(hy_corrupt_count() >= 10, "at least 10 corruptions (%zu)", hy_corrupt_count());
    for (size_t c = 0; c < hy_corrupt_count(); c++) {
        const char *name = hy_corrupt_name(c);
        double prev = 0;
        for (int s = 1; s <= HY_CORRUPT_SEVERITIES; s++) {
            hy_tensor out, again;
            CHECK_OK(hy_corrupt_apply(name, s, 11, &im, &out));
            double d = mean_abs_change(&im, &out);
            CHECK(d > prev, "%s: severity %d changes pixels by %.3f, severity %d by %.3f", name, s,
                  d, s - 1, prev);
            prev = d;
            CHECK_OK(hy_corrupt_apply(name, s, 11, &im, &again));
            CHECK(memcmp(out.data, again.data, hy_tensor_nbytes(&out)) == 0, "%s/%d deterministic",
                  name, s);
            hy_tensor_release(&out);
            hy_tensor_release(&again);
        }
    }
    hy_tensor a, b;
    CHECK_OK(hy_corrupt_apply("gaussian_noise", 3, 1, &im, &a));
    CHECK_OK(hy_corrupt_apply("gaussian_noise", 3, 2, &im, &b));
    CHECK(memcmp(a.data, b.data, hy_tensor_nbytes(&a)) != 0, "the seed matters");
    hy_tensor_release(&a); hy_tensor_release(&b);
    CHECK_FAIL_HAS(hy_corrupt_apply("fog", 1, 0, &im, &a), HY_EINVAL,
                   "corrupt: unknown corruption 'fog' (known: gaussian_noise, shot_noise,");
    CHECK_FAIL(hy_corrupt_apply("contrast", 6, 0, &im, &a), HY_EINVAL,
               "corrupt: severity 6 out of range [1, 5]");
    hy_tensor_release(&im);
}

static void test_glyph(void) {
    const char *font = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
    if (access(font, R_OK) != 0) {
        fprintf(stderr, "test_glyph: %s missing (run make deps); skipped\n", font);
        return;
    }
    uint8_t im[784];
    hy_glyph_params p = {1, 0, 0, 0, 0};
    CHECK_OK(hy_glyph_render(font, 'A', &p, im));
    double mass = 0, mx = 0, my = 0;
    int xmin = 28, xmax = -1, ymin = 28, ymax = -1;
    for (int y = 0; y < 28; y++)
        for (int x = 0; x < 28; x++) {
            double v = im[y * 28 + x];
            mass += v; mx += v * (x + 0.5); my += v * (y + 0.5);
            if (v > 0) {
                if (x < xmin) xmin = x;
                if (x > xmax) xmax = x;
                if (y < ymin) ymin = y;
                if (y > ymax) ymax = y;
            }
        }
    CHECK(mass > 784 * 255 * 0.08, "non-empty (%g)", mass);
    CHECK(fabs(mx / mass - 14) < 0.75 && fabs(my / mass - 14) < 0.75, "centred: %g %g", mx / mass, my / mass);
    CHECK(ymax - ymin + 1 >= 18 && ymax - ymin + 1 <= 21, "fits the 20 px box: height %d", ymax - ymin + 1);
    CHECK(im[0] == 0 && im[783] == 0, "black background");
    /* 'A' is wider at the bottom: more ink in the lower rows' extent */
    /* bold adds ink */
    uint8_t b[784];
    hy_glyph_params pb = {1, 0, 0, 0, 3};
    CHECK_OK(hy_glyph_render(font, 'A', &pb, b));
    double mb = 0;
    for (int i = 0; i < 784; i++) mb += b[i];
    CHECK(mb > mass * 1.1, "bold adds ink: %g vs %g", mb, mass);
    /* set: deterministic, labels in order */
    const char *fonts[1] = {font};
    hy_glyph_jitter j = hy_glyph_default_jitter();
    hy_tensor i1, l1, f1, i2, l2, f2;
    CHECK_OK(hy_glyph_render_set(fonts, 1, "AB", 3, &j, 9, &i1, &l1, &f1));
    CHECK_OK(hy_glyph_render_set(fonts, 1, "AB", 3, &j, 9, &i2, &l2, &f2));
    CHECK(i1.shape[0] == 6 && ((int16_t *)l1.data)[3] == 1 && ((int16_t *)f1.data)[5] == 0, "set labels");
    CHECK(memcmp(i1.data, i2.data, 6 * 784) == 0, "set deterministic");
    CHECK(memcmp(i1.data, (uint8_t *)i1.data + 784, 784) != 0, "jitter varies the images");
    hy_tensor_release(&i1); hy_tensor_release(&l1); hy_tensor_release(&f1);
    hy_tensor_release(&i2); hy_tensor_release(&l2); hy_tensor_release(&f2);
    char msg[600];
    snprintf(msg, sizeof msg, "glyph: cannot load font '%s' (FreeType error 1)", tmp_path("none.ttf"));
    CHECK_FAIL(hy_glyph_render(tmp_path("none.ttf"), 'A', &p, im), HY_EIO, msg);
}

int main(void) {
    RUN(test_sha256_vectors);
    RUN(test_md5_vectors);
    RUN(test_hash_file);
    RUN(test_idx_roundtrip);
    RUN(test_idx_errors);
    RUN(test_png_and_tiles);
    RUN(test_stratified);
    RUN(test_corrupt_monotone_and_deterministic);
    RUN(test_glyph);
    return check_exit("test_data");
}
