/* test_h5.c: HDF5 layer: round trips of every dtype and rank, strings, attributes, groups,
 * conversion, exact error messages, atomic writes (fork + crash before commit) and
 * byte-identical output. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>

#include "check.h"
#include "io/h5.h"

static char path_buf[8][512];
static int path_i;

/* A path inside the test's temporary folder (rotating static buffers). */
static const char *tpath(const char *name) {
    char *p = path_buf[path_i++ % 8];
    snprintf(p, 512, "%s/%s", check_tmpdir(), name);
    return p;
}

static int file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* Number of entries in folder d whose name contains `part`. */
static int count_entries(const char *d, const char *part) {
    DIR *dir = opendir(d);
    int n = 0;
    struct dirent *e;
    if (!dir) return -1;
    while ((e = readdir(dir)) != NULL)
        if (strstr(e->d_name, part)) n++;
    closedir(dir);
    return n;
}

static char *slurp(const char *p, size_t *n) {
    FILE *fp = fopen(p, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = malloc((size_t)sz + 1);
    *n = fread(buf, 1, (size_t)sz, fp);
    fclose(fp);
    return buf;
}

static int same_bytes(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

static uint64_t mix64(uint64_t x) {            /* splitmix64 finaliser */
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

/* Fills t with deterministic values that fit its dtype. */
static void fill(hy_tensor *t, uint64_t seed) {
    size_t n = hy_tensor_numel(t);
    for (size_t i = 0; i < n; i++) {
        uint64_t h = mix64(seed * 1000003u + i);
        switch (t->dtype) {
        case HY_F32: ((float *)t->data)[i] = (float)((double)(h % 20001) / 1000.0 - 10.0); break;
        case HY_F64: ((double *)t->data)[i] = (double)(h % 2000001) / 7.0 - 1e5; break;
        case HY_U8: ((uint8_t *)t->data)[i] = (uint8_t)h; break;
        case HY_I8: ((int8_t *)t->data)[i] = (int8_t)(int)(h % 256 - 128); break;
        case HY_I16: ((int16_t *)t->data)[i] = (int16_t)(int)(h % 65536 - 32768); break;
        case HY_I32:
            ((int32_t *)t->data)[i] = (int32_t)((int64_t)(h % 4294967296u) - 2147483648);
            break;
        case HY_I64: ((int64_t *)t->data)[i] = (int64_t)h; break;
        default: break;
        }
    }
}

static int tensors_equal(const hy_tensor *a, const hy_tensor *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return memcmp(a->data, b->data, hy_tensor_nbytes(a)) == 0;
}

/* ===== numeric round trips ===== */

static void test_roundtrip_all_dtypes_and_ranks(void) {
    const char *p = tpath("dtypes.h5");
    static const int64_t shapes[][4] = {{0}, {7}, {3, 5}, {2, 3, 4}, {2, 1, 3, 2}};
    static const int ranks[] = {0, 1, 2, 3, 4};
    hy_h5 f;
    CHECK_OK(hy_h5_create(&f, p));
    char name[64];
    for (int dt = 0; dt < HY_NDTYPES; dt++)
        for (int r = 0; r < 5; r++) {
            hy_tensor t;
            CHECK_OK(hy_tensor_alloc(&t, (hy_dtype)dt, ranks[r], shapes[r]));
            fill(&t, (uint64_t)(dt * 100 + r));
            snprintf(name, sizeof name, "/%s/rank%d", hy_dtype_name((hy_dtype)dt), r);
            CHECK_OK(hy_h5_write(&f, name, &t));
            hy_tensor_release(&t);
        }
    /* zero-size dims, in the middle and first */
    int64_t z1[3] = {2, 0, 3}, z2[1] = {0};
    hy_tensor t0;
    CHECK_OK(hy_tensor_alloc(&t0, HY_F32, 3, z1));
    CHECK_OK(hy_h5_write(&f, "zero/mid", &t0));
    hy_tensor_release(&t0);
    CHECK_OK(hy_tensor_alloc(&t0, HY_I16, 1, z2));
    CHECK_OK(hy_h5_write(&f, "zero/empty", &t0));
    hy_tensor_release(&t0);
    CHECK_OK(hy_h5_commit(&f));
    CHECK(!f.open && f.path == NULL, "commit closes the handle");

    CHECK_OK(hy_h5_open(&f, p));
    for (int dt = 0; dt < HY_NDTYPES; dt++)
        for (int r = 0; r < 5; r++) {
            hy_tensor want, got;
            CHECK_OK(hy_tensor_alloc(&want, (hy_dtype)dt, ranks[r], shapes[r]));
            fill(&want, (uint64_t)(dt * 100 + r));
            snprintf(name, sizeof name, "%s/rank%d", hy_dtype_name((hy_dtype)dt), r);
            CHECK_OK(hy_h5_read(&f, name, &got));
            CHECK(tensors_equal(&got, &want), "%s differs after the round trip", name);
            hy_tensor_release(&got);
            hy_tensor_release(&want);
        }
    hy_tensor g;
    CHECK_OK(hy_h5_read(&f, "/zero/mid", &g));
    CHECK(g.dtype == HY_F32 && g.ndim == 3 && g.shape[0] == 2 && g.shape[1] == 0 &&
          g.shape[2] == 3, "zero-size dims kept");
    hy_tensor_release(&g);
    CHECK_OK(hy_h5_read(&f, "/zero/empty", &g));
    CHECK(g.dtype == HY_I16 && g.ndim == 1 && g.shape[0] == 0, "empty 1-d kept");
    hy_tensor_release(&g);
    hy_h5_close(&f);
    hy_h5_close(&f);    /* idempotent */
}

static void test_large_dataset_compressed_roundtrip(void) {
    const char *p = tpath("large.h5");
    int64_t shape[2] = {300, 257};               /* 300 KB of float32: chunked + deflate */
    hy_tensor t, g;
    CHECK_OK(hy_tensor_alloc(&t, HY_F32, 2, shape));
    float *v = t.data;
    for (size_t i = 0; i < hy_tensor_numel(&t); i++) v[i] = (float)(i % 97) * 0.25f;
    hy_h5 f;
    CHECK_OK(hy_h5_create(&f, p));
    CHECK_OK(hy_h5_write(&f, "big", &t));
    CHECK_OK(hy_h5_commit(&f));
    struct stat sb;
    CHECK(stat(p, &sb) == 0 && (size_t)sb.st_size < hy_tensor_nbytes(&t) / 4,
          "compressible data is compressed (%lld bytes for %zu)", (long long)sb.st_size,
          hy_tensor_nbytes(&t));
    CHECK_OK(hy_h5_open(&f, p));
    CHECK_OK(hy_h5_read(&f, "big", &g));
    CHECK(tensors_equal(&g, &t), "large dataset differs after the round trip");
    hy_tensor_release(&g);
    hy_h5_close(&f);
    hy_tensor_release(&t);
}

static void test_read_as_and_read_into(void) {
    const char *p = tpath("conv.h5");
    hy_h5 f;
    int64_t shape[2] = {2, 3};
    int16_t iv[6] = {-3, 0, 7, 100, -32768, 32767};
    double dv[3] = {1.5, -2.25, 1e10};
    int64_t s3[1] = {3};
    CHECK_OK(hy_h5_create(&f, p));
    CHECK_OK(hy_h5_write_data(&f, "i16", HY_I16, 2, shape, iv));
    CHECK_OK(hy_h5_write_data(&f, "f64", HY_F64, 1, s3, dv));
    CHECK_OK(hy_h5_commit(&f));

    CHECK_OK(hy_h5_open(&f, p));
    hy_tensor t;
    CHECK_OK(hy_h5_read_as(&f, "i16", HY_F32, &t));
    CHECK(t.dtype == HY_F32 && t.ndim == 2 && t.shape[1] == 3, "read_as f32 shape");
    float want[6] = {-3, 0, 7, 100, -32768, 32767};
    check_close("i16 as f32", t.data, want, 6, 0, 0);
    hy_tensor_release(&t);
    CHECK_OK(hy_h5_read_as(&f, "f64", HY_F32, &t));
    float want2[3] = {1.5f, -2.25f, 1e10f};
    check_close("f64 as f32", t.data, want2, 3, 0, 0);
    hy_tensor_release(&t);
    CHECK_OK(hy_h5_read_as(&f, "i16", HY_I64, &t));
    CHECK(t.dtype == HY_I64 && ((int64_t *)t.data)[4] == -32768, "i16 as i64");
    hy_tensor_release(&t);

    double buf[6];
    CHECK_OK(hy_h5_read_into(&f, "i16", HY_F64, 2, shape, buf));
    CHECK(buf[0] == -3.0 && buf[5] == 32767.0, "read_into converts");
    int64_t wrong[2] = {3, 2};
    char msg[1024];
    snprintf(msg, sizeof msg, "h5: 'i16' in '%s' has shape [2,3], expected [3,2]", p);
    CHECK_FAIL(hy_h5_read_into(&f, "i16", HY_F64, 2, wrong, buf), HY_EINVAL, msg);
    snprintf(msg, sizeof msg, "h5: 'f64' in '%s' has shape [3], expected [3,1]", p);
    int64_t s31[2] = {3, 1};
    CHECK_FAIL(hy_h5_read_into(&f, "f64", HY_F64, 2, s31, buf), HY_EINVAL, msg);

    hy_dtype dt;
    int nd;
    int64_t sh[HY_MAXDIM];
    CHECK_OK(hy_h5_shape(&f, "/i16", &dt, &nd, sh));
    CHECK(dt == HY_I16 && nd == 2 && sh[0] == 2 && sh[1] == 3, "shape of i16");
    hy_h5_close(&f);
}

/* ===== strings, attributes, groups ===== */

static void test_strings(void) {
    const char *p = tpath("str.h5");
    const char *words[] = {"alpha", "", "γειά σου", "a much longer string with spaces"};
    hy_h5 f;
    CHECK_OK(hy_h5_create(&f, p));
    CHECK_OK(hy_h5_write_string(&f, "/meta/name", "fashion-mnist ✓"));
    CHECK_OK(hy_h5_write_string(&f, "/meta/empty", ""));
    CHECK_OK(hy_h5_write_strings(&f, "/vocab", words, 4));
    CHECK_OK(hy_h5_write_strings(&f, "/none", NULL, 0));
    CHECK_OK(hy_h5_commit(&f));

    CHECK_OK(hy_h5_open(&f, p));
    char *s = NULL;
    CHECK_OK(hy_h5_read_string(&f, "meta/name", &s));
    CHECK(s && strcmp(s, "fashion-mnist ✓") == 0, "scalar string: %s", s ? s : "(null)");
    hy_free(s);
    CHECK_OK(hy_h5_read_string(&f, "meta/empty", &s));
    CHECK(s && s[0] == '\0', "empty string");
    hy_free(s);
    char **v = NULL;
    size_t n = 0;
    CHECK_OK(hy_h5_read_strings(&f, "vocab", &v, &n));
    CHECK(n == 4, "4 strings, got %zu", n);
    for (size_t i = 0; i < n && i < 4; i++)
        CHECK(strcmp(v[i], words[i]) == 0, "string %zu: %s", i, v[i]);
    hy_h5_strings_free(v, n);
    CHECK_OK(hy_h5_read_strings(&f, "none", &v, &n));
    CHECK(n == 0, "empty string array");
    hy_h5_strings_free(v, n);

    char msg[1024];
    snprintf(msg, sizeof msg, "h5: 'vocab' in '%s' has shape [4], expected a single string", p);
    CHECK_FAIL(hy_h5_read_string(&f, "vocab", &s), HY_EINVAL, msg);
    hy_tensor t;
    snprintf(msg, sizeof msg, "h5: 'vocab' in '%s' holds strings, not numbers", p);
    CHECK_FAIL(hy_h5_read(&f, "vocab", &t), HY_EINVAL, msg);
    hy_h5_close(&f);
}

static void test_attributes(void) {
    const char *p = tpath("attr.h5");
    hy_h5 f;
    double dv[3] = {0.5, -1.25, 3.0};
    int64_t iv[4] = {1, -2, 3, INT64_MAX};
    int64_t one[1] = {2};
    float x[2] = {1, 2};
    CHECK_OK(hy_h5_create(&f, p));
    CHECK_OK(hy_h5_write_data(&f, "/params/w", HY_F32, 1, one, x));
    CHECK_OK(hy_h5_set_attr_str(&f, "/", "kind", "vit"));
    CHECK_OK(hy_h5_set_attr_i64(&f, "/", "d_model", 128));
    CHECK_OK(hy_h5_set_attr_f64(&f, "/", "lr", 3e-4));
    CHECK_OK(hy_h5_set_attr_f64(&f, "/", "whole", 7.0));
    CHECK_OK(hy_h5_set_attr_f64s(&f, "/params", "f64s", dv, 3));
    CHECK_OK(hy_h5_set_attr_i64s(&f, "/params/w", "i64s", iv, 4));
    CHECK_OK(hy_h5_set_attr_i64s(&f, "/params/w", "nothing", NULL, 0));
    CHECK_OK(hy_h5_set_attr_str(&f, "/config", "kind", "text"));   /* creates group /config */
    CHECK_OK(hy_h5_set_attr_i64(&f, "/config", "depth", 4));
    CHECK_OK(hy_h5_set_attr_i64(&f, "/config", "depth", 6));       /* replaces */
    CHECK_OK(hy_h5_commit(&f));

    CHECK_OK(hy_h5_open(&f, p));
    char *s = NULL;
    CHECK_OK(hy_h5_get_attr_str(&f, "/", "kind", &s));
    CHECK(s && strcmp(s, "vit") == 0, "kind attr");
    hy_free(s);
    int64_t i = 0;
    double d = 0;
    CHECK_OK(hy_h5_get_attr_i64(&f, "/", "d_model", &i));
    CHECK(i == 128, "d_model");
    CHECK_OK(hy_h5_get_attr_f64(&f, "/", "d_model", &d));
    CHECK(d == 128.0, "int attr read as double");
    CHECK_OK(hy_h5_get_attr_f64(&f, "/", "lr", &d));
    CHECK(d == 3e-4, "lr");
    CHECK_OK(hy_h5_get_attr_i64(&f, "/", "whole", &i));
    CHECK(i == 7, "integral double read as int");
    CHECK_OK(hy_h5_get_attr_i64(&f, "config", "depth", &i));
    CHECK(i == 6, "replaced attribute: %lld", (long long)i);
    double *dp = NULL;
    int64_t *ip = NULL;
    size_t n = 0;
    CHECK_OK(hy_h5_get_attr_f64s(&f, "/params", "f64s", &dp, &n));
    CHECK(n == 3 && dp[0] == 0.5 && dp[1] == -1.25 && dp[2] == 3.0, "f64 array");
    hy_free(dp);
    CHECK_OK(hy_h5_get_attr_i64s(&f, "/params/w", "i64s", &ip, &n));
    CHECK(n == 4 && ip[1] == -2 && ip[3] == INT64_MAX, "i64 array");
    hy_free(ip);
    CHECK_OK(hy_h5_get_attr_i64s(&f, "/params/w", "nothing", &ip, &n));
    CHECK(n == 0 && ip == NULL, "empty array attribute");
    CHECK_OK(hy_h5_get_attr_f64s(&f, "/", "lr", &dp, &n));
    CHECK(n == 1 && dp[0] == 3e-4, "scalar read as a 1-element array");
    hy_free(dp);
    CHECK(hy_h5_attr_exists(&f, "/", "kind") && !hy_h5_attr_exists(&f, "/", "nope") &&
          !hy_h5_attr_exists(&f, "/missing", "kind"), "attr_exists");

    char msg[1024];
    snprintf(msg, sizeof msg, "h5: no attribute 'nope' on '/' in '%s'", p);
    CHECK_FAIL(hy_h5_get_attr_i64(&f, "/", "nope", &i), HY_EIO, msg);
    snprintf(msg, sizeof msg, "h5: no object '/missing' in '%s'", p);
    CHECK_FAIL(hy_h5_get_attr_i64(&f, "/missing", "kind", &i), HY_EIO, msg);
    snprintf(msg, sizeof msg, "h5: attribute 'lr' on '/' in '%s' is 0.00029999999999999997, "
             "not an integer", p);
    CHECK_FAIL(hy_h5_get_attr_i64(&f, "/", "lr", &i), HY_EINVAL, msg);
    snprintf(msg, sizeof msg, "h5: attribute 'kind' on '/' in '%s' is a string, not a number", p);
    CHECK_FAIL(hy_h5_get_attr_f64(&f, "/", "kind", &d), HY_EINVAL, msg);
    snprintf(msg, sizeof msg, "h5: attribute 'd_model' on '/' in '%s' is an integer, not a "
             "string", p);
    CHECK_FAIL(hy_h5_get_attr_str(&f, "/", "d_model", &s), HY_EINVAL, msg);
    snprintf(msg, sizeof msg, "h5: attribute 'f64s' on '/params' in '%s' has 3 values, "
             "expected 1", p);
    CHECK_FAIL(hy_h5_get_attr_f64(&f, "/params", "f64s", &d), HY_EINVAL, msg);

    hy_h5_attr *as = NULL;
    CHECK_OK(hy_h5_attrs(&f, "/", &as, &n));
    CHECK(n == 4, "4 root attributes, got %zu", n);
    if (n == 4) {
        CHECK(strcmp(as[0].key, "d_model") == 0 && as[0].type == HY_H5_ATTR_I64 &&
              !as[0].is_array && as[0].i64[0] == 128, "attrs sorted: d_model");
        CHECK(strcmp(as[1].key, "kind") == 0 && as[1].type == HY_H5_ATTR_STR &&
              strcmp(as[1].strs[0], "vit") == 0, "attrs: kind");
        CHECK(strcmp(as[2].key, "lr") == 0 && as[2].type == HY_H5_ATTR_F64, "attrs: lr");
        CHECK(strcmp(as[3].key, "whole") == 0, "attrs: whole");
    }
    hy_h5_attrs_free(as, n);
    CHECK_OK(hy_h5_attrs(&f, "/params/w", &as, &n));
    CHECK(n == 2 && as[0].is_array && as[0].n == 4 && as[1].n == 0, "dataset attrs");
    hy_h5_attrs_free(as, n);
    hy_h5_close(&f);
}

static void test_groups_and_listing(void) {
    const char *p = tpath("groups.h5");
    hy_h5 f;
    int64_t s2[2] = {10, 4}, s0[1] = {0};
    float w[40] = {0};
    CHECK_OK(hy_h5_create(&f, p));
    CHECK_OK(hy_h5_write_data(&f, "/params/head.weight", HY_F32, 2, s2, w));
    CHECK_OK(hy_h5_write_data(&f, "/params/blocks.0.attn.qkv.bias", HY_F32, 1, s0, w));
    CHECK_OK(hy_h5_write_data(&f, "a/b/c/d/deep", HY_I32, 0, NULL, w));
    CHECK_OK(hy_h5_write_string(&f, "/zz", "last"));
    char msg[1024];
    snprintf(msg, sizeof msg, "h5: '/zz' already exists in '%s'", p);
    CHECK_FAIL(hy_h5_write_string(&f, "/zz", "again"), HY_EINVAL, msg);
    snprintf(msg, sizeof msg, "h5: '/zz' in '%s' is a dataset, not a group", p);
    CHECK_FAIL(hy_h5_write_data(&f, "/zz/x", HY_F32, 1, s0, w), HY_EINVAL, msg);
    CHECK_OK(hy_h5_commit(&f));

    CHECK_OK(hy_h5_open(&f, p));
    CHECK(hy_h5_exists(&f, "/") && hy_h5_exists(&f, "a/b/c") && hy_h5_exists(&f, "/a/b/c/d/deep")
          && !hy_h5_exists(&f, "/a/x/y") && !hy_h5_exists(&f, "/zz/x"), "exists");
    hy_h5_entry *e = NULL;
    size_t n = 0;
    CHECK_OK(hy_h5_list(&f, "/", &e, &n));
    CHECK(n == 3, "3 children of the root, got %zu", n);
    if (n == 3) {
        CHECK(strcmp(e[0].name, "a") == 0 && e[0].kind == HY_H5_GROUP, "a is a group");
        CHECK(strcmp(e[1].name, "params") == 0 && strcmp(e[1].path, "/params") == 0, "params");
        CHECK(strcmp(e[2].name, "zz") == 0 && e[2].kind == HY_H5_DATASET &&
              strcmp(e[2].type, "string") == 0 && e[2].dtype == -1 && e[2].ndim == 0, "zz");
    }
    hy_h5_list_free(e, n);
    CHECK_OK(hy_h5_list(&f, "params", &e, &n));
    CHECK(n == 2, "2 params");
    if (n == 2) {
        CHECK(strcmp(e[0].name, "blocks.0.attn.qkv.bias") == 0 && e[0].shape[0] == 0, "sorted");
        CHECK(strcmp(e[1].path, "/params/head.weight") == 0 && e[1].dtype == HY_F32 &&
              strcmp(e[1].type, "float32") == 0 && e[1].ndim == 2 && e[1].shape[0] == 10 &&
              e[1].shape[1] == 4, "head.weight entry");
    }
    hy_h5_list_free(e, n);
    snprintf(msg, sizeof msg, "h5: no group '/nope' in '%s'", p);
    CHECK_FAIL(hy_h5_list(&f, "/nope", &e, &n), HY_EIO, msg);
    snprintf(msg, sizeof msg, "h5: 'zz' in '%s' is a dataset, not a group", p);
    CHECK_FAIL(hy_h5_list(&f, "zz", &e, &n), HY_EINVAL, msg);
    hy_h5_close(&f);
}

/* ===== errors ===== */

static void test_error_messages(void) {
    hy_h5 f;
    char msg[1024];
    const char *missing = tpath("missing.h5");
    snprintf(msg, sizeof msg, "h5: cannot open '%s': no such file", missing);
    CHECK_FAIL(hy_h5_open(&f, missing), HY_EIO, msg);
    CHECK(!f.open && f.path == NULL, "failed open leaves f zeroed");

    const char *text = tpath("text.h5");
    FILE *fp = fopen(text, "w");
    fputs("this is not an HDF5 file, only some text long enough to have a signature\n", fp);
    fclose(fp);
    snprintf(msg, sizeof msg, "h5: '%s' is not an HDF5 file", text);
    CHECK_FAIL(hy_h5_open(&f, text), HY_EIO, msg);
    CHECK(!hy_h5_is_file(text) && !hy_h5_is_file(missing), "is_file on non-HDF5");

    const char *nodir = tpath("no/such/folder/x.h5");
    char dir[600];
    snprintf(dir, sizeof dir, "%s/no/such/folder", check_tmpdir());
    snprintf(msg, sizeof msg, "h5: cannot create '%s': folder '%s' does not exist", nodir, dir);
    CHECK_FAIL(hy_h5_create(&f, nodir), HY_EIO, msg);
    snprintf(msg, sizeof msg, "h5: cannot create '%s': it is a folder", check_tmpdir());
    CHECK_FAIL(hy_h5_create(&f, check_tmpdir()), HY_EIO, msg);

    if (geteuid() != 0) {                   /* root ignores folder permissions */
        const char *ro = tpath("readonly");
        mkdir(ro, 0555);
        char rof[600];
        snprintf(rof, sizeof rof, "%s/x.h5", ro);
        snprintf(msg, sizeof msg, "h5: cannot create '%s': folder '%s' is not writable", rof, ro);
        CHECK_FAIL(hy_h5_create(&f, rof), HY_EIO, msg);
        chmod(ro, 0755);
    }

    const char *p = tpath("errs.h5");
    int64_t s1[1] = {2};
    float v[2] = {1, 2};
    CHECK_OK(hy_h5_create(&f, p));
    CHECK_OK(hy_h5_write_data(&f, "/g/x", HY_F32, 1, s1, v));
    CHECK_OK(hy_h5_commit(&f));
    CHECK(hy_h5_is_file(p), "is_file on an HDF5 file");
    CHECK_OK(hy_h5_open(&f, p));
    hy_tensor t;
    snprintf(msg, sizeof msg, "h5: no dataset '/train/images' in '%s'", p);
    CHECK_FAIL(hy_h5_read(&f, "/train/images", &t), HY_EIO, msg);
    CHECK(t.data == NULL, "failed read leaves out zeroed");
    snprintf(msg, sizeof msg, "h5: no dataset 'g/y' in '%s'", p);
    CHECK_FAIL(hy_h5_read(&f, "g/y", &t), HY_EIO, msg);
    snprintf(msg, sizeof msg, "h5: '/g' in '%s' is a group, not a dataset", p);
    CHECK_FAIL(hy_h5_read(&f, "/g", &t), HY_EINVAL, msg);
    snprintf(msg, sizeof msg, "h5: cannot write '/y': '%s' is open for reading", p);
    CHECK_FAIL(hy_h5_write_data(&f, "/y", HY_F32, 1, s1, v), HY_EINVAL, msg);
    snprintf(msg, sizeof msg, "h5: cannot commit '%s': it is open for reading", p);
    CHECK_FAIL(hy_h5_commit(&f), HY_EINVAL, msg);
    hy_h5_close(&f);
    CHECK_FAIL(hy_h5_read(&f, "/g/x", &t), HY_EINVAL, "h5: attempt to use a closed file");
    CHECK(!hy_h5_exists(&f, "/g"), "exists on a closed file is 0");

    /* a truncated HDF5 file: opens fail with a message naming it */
    const char *trunc = tpath("trunc.h5");
    size_t n = 0;
    char *bytes = slurp(p, &n);
    fp = fopen(trunc, "wb");
    fwrite(bytes, 1, n / 2, fp);
    fclose(fp);
    free(bytes);
    hy_status st = hy_h5_open(&f, trunc);
    if (st == HY_OK) {                      /* superblock intact: the read must fail instead */
        st = hy_h5_read(&f, "/g/x", &t);
        hy_tensor_release(&t);
        hy_h5_close(&f);
    }
    CHECK(st == HY_EIO && strstr(hy_errmsg(), trunc), "truncated file: %s", hy_errmsg());
}

/* ===== atomic writes ===== */

static void test_atomic_before_commit(void) {
    const char *p = tpath("atomic.h5");
    hy_h5 f;
    int64_t s1[1] = {3};
    double v[3] = {1, 2, 3};
    CHECK_OK(hy_h5_create(&f, p));
    CHECK_OK(hy_h5_write_data(&f, "x", HY_F64, 1, s1, v));
    CHECK(!file_exists(p), "the real path does not exist before commit");
    CHECK(f.tmp && file_exists(f.tmp), "the temporary file exists");
    CHECK(strstr(f.tmp, "/.atomic.h5.tmp-") != NULL, "temporary name: %s", f.tmp);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s", f.tmp);
    hy_h5_close(&f);                        /* uncommitted: discarded */
    CHECK(!file_exists(p) && !file_exists(tmp), "uncommitted close removes the temporary file");
    CHECK(count_entries(check_tmpdir(), "atomic.h5") == 0, "nothing left behind");
}

/* A child creates and writes, then dies before commit (how: 0 = _exit, 1 = SIGKILL). */
static void crash_child(const char *p, int how) {
    pid_t pid = fork();
    if (pid == 0) {
        hy_h5 f;
        int64_t s1[1] = {1000};
        static double v[1000];
        if (hy_h5_create(&f, p) != HY_OK || hy_h5_write_data(&f, "x", HY_F64, 1, s1, v) != HY_OK)
            _exit(3);
        if (how == 1) raise(SIGKILL);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (how == 0) CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    else CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %d", status);
}

static void test_crash_leaves_no_file(void) {
    const char *p = tpath("crash.h5");
    crash_child(p, 0);
    CHECK(!file_exists(p), "_exit before commit leaves no file under the real name");
    crash_child(p, 1);
    CHECK(!file_exists(p), "SIGKILL before commit leaves no file under the real name");
    CHECK(count_entries(check_tmpdir(), ".crash.h5.tmp-") == 2, "only hidden temporaries remain");

    /* an older complete file survives a crashed rewrite untouched */
    hy_h5 f;
    CHECK_OK(hy_h5_create(&f, p));
    CHECK_OK(hy_h5_write_string(&f, "v", "old"));
    CHECK_OK(hy_h5_commit(&f));
    crash_child(p, 1);
    char *s = NULL;
    CHECK_OK(hy_h5_open(&f, p));
    CHECK_OK(hy_h5_read_string(&f, "v", &s));
    CHECK(s && strcmp(s, "old") == 0, "old file intact");
    hy_free(s);
    hy_h5_close(&f);
}

static void test_commit_replaces(void) {
    const char *p = tpath("replace.h5");
    hy_h5 f;
    CHECK_OK(hy_h5_create(&f, p));
    CHECK_OK(hy_h5_write_string(&f, "v", "first"));
    CHECK_OK(hy_h5_commit(&f));
    CHECK_OK(hy_h5_create(&f, p));
    CHECK_OK(hy_h5_write_string(&f, "v", "second"));
    CHECK_OK(hy_h5_write_string(&f, "w", "new"));
    CHECK_OK(hy_h5_commit(&f));
    char *s = NULL;
    CHECK_OK(hy_h5_open(&f, p));
    CHECK_OK(hy_h5_read_string(&f, "v", &s));
    CHECK(s && strcmp(s, "second") == 0, "commit replaces the older file");
    hy_free(s);
    CHECK(hy_h5_exists(&f, "w"), "new dataset present");
    hy_h5_close(&f);
    CHECK(count_entries(check_tmpdir(), "replace.h5.tmp") == 0, "no temporaries left");
    /* two files being written at once get different temporary names */
    hy_h5 a, b;
    CHECK_OK(hy_h5_create(&a, p));
    CHECK_OK(hy_h5_create(&b, p));
    CHECK(strcmp(a.tmp, b.tmp) != 0, "distinct temporaries");
    hy_h5_close(&a);
    hy_h5_close(&b);
}

/* ===== determinism ===== */

static void write_sample(const char *p) {
    hy_h5 f;
    int64_t big[2] = {200, 300}, small[2] = {3, 4};
    hy_tensor t;
    if (hy_tensor_alloc(&t, HY_F32, 2, big) != HY_OK) return;
    fill(&t, 42);
    float w[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    const char *voc[3] = {"<pad>", "<unk>", "the"};
    double dv[2] = {0.25, 0.5};
    CHECK_OK(hy_h5_create(&f, p));
    CHECK_OK(hy_h5_set_attr_str(&f, "/meta", "name", "sample"));
    CHECK_OK(hy_h5_set_attr_f64s(&f, "/meta", "mean", dv, 2));
    CHECK_OK(hy_h5_write(&f, "/train/images", &t));
    CHECK_OK(hy_h5_write_data(&f, "/params/w", HY_F32, 2, small, w));
    CHECK_OK(hy_h5_set_attr_i64(&f, "/params/w", "n", 12));
    CHECK_OK(hy_h5_write_strings(&f, "/vocab", voc, 3));
    CHECK_OK(hy_h5_write_string(&f, "/note", "hello"));
    CHECK_OK(hy_h5_commit(&f));
    hy_tensor_release(&t);
}

static void test_byte_identical(void) {
    const char *a = tpath("same_a.h5"), *b = tpath("same_b.h5"), *c = tpath("same_c.h5");
    write_sample(a);
    /* a second second on the clock, so any timestamp would differ */
    struct timespec ts = {1, 100000000};
    nanosleep(&ts, NULL);
    write_sample(b);
    CHECK(same_bytes(a, b), "same content twice gives byte-identical files");
    pid_t pid = fork();                     /* and from another process */
    if (pid == 0) {
        write_sample(c);
        _exit(check_failures ? 1 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child wrote the sample");
    CHECK(same_bytes(a, c), "byte-identical across processes");
}

/* ===== files written by other tools (h5py style) ===== */

/* Writes, with the raw HDF5 API, what other tools produce and hydra never writes itself:
 * fixed-length strings (dataset and attribute), big-endian floats, uint16 data. */
static void write_foreign(const char *p) {
    hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t d3[1] = {3};
    hid_t s3 = H5Screate_simple(1, d3, NULL), sc = H5Screate(H5S_SCALAR);
    hid_t fs = H5Tcopy(H5T_C_S1);
    H5Tset_size(fs, 5);
    H5Tset_strpad(fs, H5T_STR_NULLPAD);
    hid_t ds = H5Dcreate2(f, "fixed", fs, s3, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(ds, fs, H5S_ALL, H5S_ALL, H5P_DEFAULT, "ab\0\0\0cdefgh\0\0\0\0");
    H5Dclose(ds);
    hid_t root = H5Gopen2(f, "/", H5P_DEFAULT);
    hid_t a = H5Acreate2(root, "label", fs, sc, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, fs, "hello");
    H5Aclose(a);
    H5Gclose(root);
    double be[3] = {1.5, -2, 1e300};
    ds = H5Dcreate2(f, "be", H5T_IEEE_F64BE, s3, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, be);
    H5Dclose(ds);
    uint16_t u[3] = {0, 1000, 65535};
    ds = H5Dcreate2(f, "u16", H5T_STD_U16LE, s3, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(ds, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, u);
    H5Dclose(ds);
    H5Tclose(fs);
    H5Sclose(sc);
    H5Sclose(s3);
    H5Fclose(f);
}

static void test_foreign_files(void) {
    const char *p = tpath("foreign.h5");
    write_foreign(p);
    hy_h5 f;
    CHECK_OK(hy_h5_open(&f, p));
    char **v = NULL;
    size_t n = 0;
    CHECK_OK(hy_h5_read_strings(&f, "fixed", &v, &n));
    CHECK(n == 3 && strcmp(v[0], "ab") == 0 && strcmp(v[1], "cdefg") == 0 && v[2][0] == 'h' &&
          v[2][1] == '\0', "fixed-length strings");
    hy_h5_strings_free(v, n);
    char *s = NULL;
    CHECK_OK(hy_h5_get_attr_str(&f, "/", "label", &s));
    CHECK(s && strcmp(s, "hello") == 0, "fixed-length string attribute");
    hy_free(s);
    hy_tensor t;
    CHECK_OK(hy_h5_read(&f, "be", &t));
    CHECK(t.dtype == HY_F64 && t.data && ((double *)t.data)[0] == 1.5 && ((double *)t.data)[2] == 1e300,
          "big-endian float64 read natively");
    hy_tensor_release(&t);
    char msg[1024];
    snprintf(msg, sizeof msg, "h5: 'u16' in '%s' has type uint16, which has no hydra dtype (read "
             "it converted to one)", p);
    CHECK_FAIL(hy_h5_read(&f, "u16", &t), HY_EINVAL, msg);
    CHECK_OK(hy_h5_read_as(&f, "u16", HY_I32, &t));
    CHECK(t.data && ((int32_t *)t.data)[2] == 65535, "uint16 read as int32");
    hy_tensor_release(&t);
    hy_h5_entry e;
    CHECK_OK(hy_h5_stat(&f, "u16", &e));
    CHECK(strcmp(e.type, "uint16") == 0 && e.dtype == -1 && e.shape[0] == 3, "stat of uint16");
    hy_h5_entry_free(&e);
    hy_h5_close(&f);
}

int main(void) {
    check_seed();
    RUN(test_roundtrip_all_dtypes_and_ranks);
    RUN(test_large_dataset_compressed_roundtrip);
    RUN(test_read_as_and_read_into);
    RUN(test_strings);
    RUN(test_attributes);
    RUN(test_groups_and_listing);
    RUN(test_foreign_files);
    RUN(test_error_messages);
    RUN(test_atomic_before_commit);
    RUN(test_crash_leaves_no_file);
    RUN(test_commit_replaces);
    RUN(test_byte_identical);
    return check_exit("test_h5");
}
