/* test_safetensors.c: core/io/safetensors against the reference implementation's test vectors
 * (huggingface/safetensors safetensors/src/tensor.rs: reader and writer bytes), torch's
 * .float() of F16/BF16/F64 bits (tests/ref/st_dtypes.safetensors, made by
 * tests/ref/make_safetensors_ref.py), one malicious file per check, each refused with its own
 * message, a write -> read round trip, the writer's atomicity, and a deterministic mutation
 * loop (run it under `make MODE=asan`). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "check.h"
#include "io/safetensors.h"

/* jansson's allocations are counted (installed first thing in main, before any jansson use):
 * the peak bytes its tree takes while hy_st_open parses a header. */
static size_t js_cur, js_peak;
static void *js_malloc(size_t n) {
    size_t *p = malloc(n + 16);
    if (!p) return NULL;
    p[0] = n;
    js_cur += n;
    if (js_cur > js_peak) js_peak = js_cur;
    return (char *)p + 16;
}
static void js_free(void *q) {
    if (!q) return;
    size_t *p = (size_t *)(void *)((char *)q - 16);
    js_cur -= p[0];
    free(p);
}
/* The bound the tests hold hy_st_open's parse to: JSON_COST bytes per header byte (a valid header
 * of one-letter F32 scalars costs jansson ~21) plus a constant. */
#define JSON_COST 32
#define JSON_SLACK ((size_t)64 << 10)

static char path_buf[4096];

/* A file named `name` in the test folder holding buf[0..n); returns its path (static). */
static const char *put(const char *name, const void *buf, size_t n) {
    snprintf(path_buf, sizeof path_buf, "%s/%s", check_tmpdir(), name);
    FILE *f = fopen(path_buf, "wb");
    HY_ASSERT(f);
    HY_ASSERT(n == 0 || fwrite(buf, 1, n, f) == n);
    HY_ASSERT(fclose(f) == 0);
    return path_buf;
}

/* A file of 8-byte length strlen(hdr), hdr, then ndata zero bytes. */
static const char *mk(const char *name, const char *hdr, size_t ndata) {
    size_t h = strlen(hdr);
    unsigned char *b = calloc(8 + h + ndata, 1);
    HY_ASSERT(b);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, hdr, h);
    const char *p = put(name, b, 8 + h + ndata);
    free(b);
    return p;
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) { *n = 0; return NULL; }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len + 1);
    HY_ASSERT(b && fread(b, 1, (size_t)len, f) == (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

static uint64_t rng_state;
static uint64_t rnd(void) {                       /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Opens path expecting failure with a message containing want (and the file's path). */
static void refused(const char *path, const char *want) {
    hy_st st;
    hy_status rc = hy_st_open(&st, path);
    CHECK(rc != HY_OK, "'%s' was accepted (expected: %s)", path, want);
    if (rc == HY_OK) { hy_st_close(&st); return; }
    CHECK(strstr(hy_errmsg(), want) != NULL, "message '%s' lacks '%s'", hy_errmsg(), want);
    CHECK(strstr(hy_errmsg(), path) != NULL, "message '%s' does not name the file", hy_errmsg());
    CHECK(strncmp(hy_errmsg(), "safetensors: ", 13) == 0, "message '%s'", hy_errmsg());
    CHECK(strchr(hy_errmsg(), '\n') == NULL, "message '%s' is not one line", hy_errmsg());
    CHECK(st.path == NULL && st.ents == NULL && st.n == 0, "handle not zeroed on failure");
}

/* ===== allocation: the parsed header stays proportional to the header ===== */

/* item is a printf format chosen by test_parse_memory below (never user text). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
/* Builds "{" + n copies of item (with %d replaced by the copy's index, offsets advancing by
 * step) + tail + "}"; returns jansson's peak bytes while opening it, and the header length. */
static size_t peak_of(const char *name, const char *item, int n, int step, const char *tail,
                      size_t *hlen, int want_ok) {
    size_t cap = (size_t)n * (strlen(item) + 40) + strlen(tail) + 16, k = 1;
    char *h = malloc(cap);
    h[0] = '{';
    for (int i = 0; i < n; i++) {
        if (i) h[k++] = ',';
        k += (size_t)snprintf(h + k, cap - k, item, i, i * step, (i + 1) * step);
    }
    k += (size_t)snprintf(h + k, cap - k, "%s}", tail);
    h[k] = '\0';
    const char *p = mk(name, h, (size_t)n * (size_t)step);
    free(h);
    js_peak = js_cur;
    hy_st st;
    hy_status rc = hy_st_open(&st, p);
    CHECK((rc == HY_OK) == want_ok, "%s: %s", name, rc == HY_OK ? "accepted" : hy_errmsg());
    hy_st_close(&st);
    *hlen = k;
    return js_peak - js_cur;
}
#pragma GCC diagnostic pop

static void test_parse_memory(void) {
    struct { const char *name, *item, *tail; int step, ok; } v[] = {
        {"a_valid.safetensors", "\"%d\":{\"dtype\":\"F32\",\"shape\":[],"
         "\"data_offsets\":[%d,%d]}", "", 4, 1},
        {"a_vit.safetensors", "\"blocks.%d.attn.qkv.weight\":{\"dtype\":\"U8\",\"shape\":"
         "[2,2],\"data_offsets\":[%d,%d]}", "", 4, 1},
        {"a_meta.safetensors", "\"__metadata__%d\":{\"\":\"%d%d\"}", "", 0, 0},
        {"a_emptyobj.safetensors", "\"%d%d%d\":{}", "", 0, 0},
        {"a_short.safetensors", "\"%d%d%d\":{\"a\":0,\"b\":\"\",\"c\":[0,0]}", "", 0, 0},
        {"a_entries.safetensors", "\"%d%d%d\":{\"dtype\":\"\",\"shape\":[],\"x\":[]}", "", 0, 0},
        {"a_ints.safetensors", "\"%d%d%d\":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]", "", 0, 0},
        {"a_strs.safetensors", "\"%d%d%d\":[\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\"]", "", 0, 0},
        {"a_deep.safetensors", "\"%d%d%d\":{\"a\":{},\"b\":{},\"c\":{},\"d\":{}}", "", 0, 0},
        {"a_deep1.safetensors", "\"%d%d%d\":{\"\":{}}", "", 0, 0},
        {"a_deep2.safetensors", "\"%d%d%d\":{\"\":[]}", "", 0, 0},
        {"a_arrs.safetensors", "\"%d%d%d\":{\"a\":[],\"b\":[],\"c\":[],\"d\":[],\"e\":[],"
         "\"f\":[],\"g\":[]}", "", 0, 0},
        {"a_arrs2.safetensors", "\"%d%d%d\":{\"a\":[],\"b\":[],\"c\":[],\"d\":[],\"e\":[],"
         "\"f\":[],\"g\":[],\"h\":[],\"i\":[],\"j\":[],\"k\":[],\"l\":[],\"m\":[]}", "", 0, 0},
        {"a_mix.safetensors", "\"%d%d%d\":{\"a\":[0],\"b\":\"\",\"c\":0,\"d\":[],\"e\":null,"
         "\"f\":[]}", "", 0, 0},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        size_t n;
        size_t peak = peak_of(v[i].name, v[i].item, 8000, v[i].step, v[i].tail, &n, v[i].ok);
        printf("  %-24s header %8zu bytes, jansson peak %9zu bytes (%.1f per byte)\n",
               v[i].name, n, peak, (double)peak / (double)n);
        CHECK(peak <= JSON_COST * n + JSON_SLACK, "%s: %zu bytes for a %zu-byte header",
              v[i].name, peak, n);
    }
    /* refused before jansson builds anything: containers in arrays, depth 4 */
    size_t n, peak = peak_of("a_arrobj.safetensors", "{}", 200000, 0, "", &n, 0);
    (void)peak;
    refused(mk("a_arr.safetensors", "{\"x\":[{},{},{}]}", 0),
            "header has a JSON object inside an array (byte 6 of the header)");
    refused(mk("a_arr2.safetensors", "{\"x\":[1,[2]]}", 0),
            "header has a JSON array inside an array (byte 8 of the header)");
    refused(mk("a_short2.safetensors", "{\"a\":{},\"b\":{\"c\":1}}", 0),
            "header has more than one entry too short to be a tensor (7 bytes at byte 12 of "
            "the header)");
    char deep[2048] = "{\"x\":{";
    for (int i = 0; i < 65; i++)
        snprintf(deep + strlen(deep), sizeof deep - strlen(deep), "%s\"%d\":{}", i ? "," : "", i);
    strcat(deep, "}}");
    refused(mk("a_deepobj.safetensors", deep, 0),
            "header has more than 64 JSON objects inside entries (byte 513 of the header)");
    refused(mk("a_depth.safetensors", "{\"x\":{\"y\":{\"z\":{}}}}", 0),
            "header nests JSON deeper than 3 levels (byte 15 of the header)");
    /* brackets inside strings are not structure */
    hy_st st;
    CHECK_OK(hy_st_open(&st, mk("a_str.safetensors", "{\"__metadata__\":{\"[{[{\":\"\\\"[[[{\"}}", 0)));
    CHECK(st.open && strcmp(hy_st_meta_value(&st, 0), "\"[[[{") == 0, "metadata with brackets");
    hy_st_close(&st);
}

/* ===== T1: the reference's valid vectors ===== */

#define REF_I32 "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}"

static void test_reference_deserialization(void) {
    /* test_deserialization: N = 0x3C, I32 [2,2], 16 zero bytes */
    CHECK(strlen(REF_I32) == 0x3C, "vector length %zu", strlen(REF_I32));
    const char *p = mk("deser.safetensors", REF_I32, 16);
    hy_st st;
    CHECK_OK(hy_st_open(&st, p));
    CHECK(hy_st_count(&st) == 1, "count %zu", hy_st_count(&st));
    CHECK(strcmp(hy_st_name(&st, 0), "test") == 0, "name %s", hy_st_name(&st, 0));
    CHECK(hy_st_dtype_of(&st, 0) == HY_ST_I32, "dtype %s",
          hy_st_dtype_name(hy_st_dtype_of(&st, 0)));
    CHECK(hy_st_ndim(&st, 0) == 2 && hy_st_shape(&st, 0)[0] == 2 && hy_st_shape(&st, 0)[1] == 2,
          "shape");
    CHECK(hy_st_numel(&st, 0) == 4 && hy_st_entry_at(&st, 0)->end == 16, "numel/offsets");
    CHECK(hy_st_find(&st, "test") == 0 && hy_st_find(&st, "tes") == -1 &&
          hy_st_find(&st, "testx") == -1, "find");
    CHECK(hy_st_meta_count(&st) == 0 && hy_st_meta_get(&st, "format") == NULL, "metadata");
    /* I32 parses but is not read as float32 (hydra's dtype policy) */
    float out[4];
    char want[9000];
    snprintf(want, sizeof want, "safetensors: '%s': 'test' has dtype I32; only F32, F16, BF16 and "
             "F64 can be read as float32", p);
    CHECK_FAIL(hy_st_read_f32(&st, 0, out), HY_EINVAL, want);
    hy_st_close(&st);
    hy_st_close(&st);                          /* idempotent */
}

static void test_reference_whitespace(void) {
    /* test_whitespace_padded_header and test_whitespace_leading_padded_header */
    static const unsigned char trail[] = "\x06\0\0\0\0\0\0\0{}\x0D\x20\x09\x0A";
    static const unsigned char lead[] = "\x06\0\0\0\0\0\0\0\x09\x0A{}\x0D\x20";
    hy_st st;
    CHECK_OK(hy_st_open(&st, put("ws1.safetensors", trail, 14)));
    CHECK(st.open && hy_st_count(&st) == 0, "count %zu", hy_st_count(&st));
    hy_st_close(&st);
    CHECK_OK(hy_st_open(&st, put("ws2.safetensors", lead, 14)));
    CHECK(st.open && hy_st_count(&st) == 0, "count %zu", hy_st_count(&st));
    hy_st_close(&st);
    /* the writer's own padding: {} and 6 spaces (test_empty) */
    static const unsigned char empty[] = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ',
                                          ' ', ' '};
    CHECK_OK(hy_st_open(&st, put("ws3.safetensors", empty, sizeof empty)));
    CHECK(st.open && hy_st_count(&st) == 0, "count %zu", hy_st_count(&st));
    hy_st_close(&st);
}

static void test_reference_zero_sized_and_scalar(void) {
    /* test_zero_sized_tensor: I32 [2,0] at [0, 0], no data bytes */
    const char *z = "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,0],\"data_offsets\":[0, 0]}}";
    CHECK(strlen(z) == 0x3C, "vector length %zu", strlen(z));
    hy_st st;
    CHECK_OK(hy_st_open(&st, mk("zero.safetensors", z, 0)));
    CHECK(st.open && hy_st_count(&st) == 1 && hy_st_numel(&st, 0) == 0 &&
          hy_st_ndim(&st, 0) == 2 && hy_st_shape(&st, 0)[1] == 0, "zero-sized entry");
    hy_st_close(&st);
    /* test_empty_shapes_allowed: I32 shape [] (a scalar) of 4 bytes */
    const char *s = "{\"test\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[0,4]}}";
    CHECK(strlen(s) == 0x38, "vector length %zu", strlen(s));
    CHECK_OK(hy_st_open(&st, mk("scalar.safetensors", s, 4)));
    CHECK(st.open && hy_st_count(&st) == 1 && hy_st_ndim(&st, 0) == 0 && hy_st_numel(&st, 0) == 1,
          "rank-0 entry");
    hy_st_close(&st);
    /* a float32 scalar and a float32 [3,0] next to it read fine */
    const char *f = "{\"e\":{\"dtype\":\"F32\",\"shape\":[3,0],\"data_offsets\":[4,4]},"
                    "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}";
    size_t h = strlen(f);
    unsigned char b[256] = {0};
    b[0] = (unsigned char)h;
    memcpy(b + 8, f, h);
    float v = -2.5f;
    memcpy(b + 8 + h, &v, 4);
    CHECK_OK(hy_st_open(&st, put("scalar32.safetensors", b, 8 + h + 4)));
    if (st.open) {
        float got = 0, none = 7;
        CHECK(strcmp(hy_st_name(&st, 0), "s") == 0, "file order: %s first", hy_st_name(&st, 0));
        CHECK_OK(hy_st_read_f32(&st, (size_t)hy_st_find(&st, "s"), &got));
        CHECK_OK(hy_st_read_f32(&st, (size_t)hy_st_find(&st, "e"), &none));
        CHECK(got == -2.5f && none == 7, "got %g, untouched %g", (double)got, (double)none);
    }
    hy_st_close(&st);
}

static void test_metadata(void) {
    const char *m = "{\"__metadata__\":{\"format\":\"pt\",\"b\":\"caf\xc3\xa9\",\"a\":\"\"},"
                    "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    hy_st st;
    CHECK_OK(hy_st_open(&st, mk("meta.safetensors", m, 4)));
    if (!st.open) return;
    CHECK(hy_st_count(&st) == 1 && hy_st_meta_count(&st) == 3, "counts %zu %zu",
          hy_st_count(&st), hy_st_meta_count(&st));
    CHECK(strcmp(hy_st_meta_key(&st, 0), "a") == 0 && strcmp(hy_st_meta_key(&st, 1), "b") == 0 &&
          strcmp(hy_st_meta_key(&st, 2), "format") == 0, "keys sorted");
    CHECK(strcmp(hy_st_meta_get(&st, "format"), "pt") == 0, "format");
    CHECK(strcmp(hy_st_meta_get(&st, "b"), "caf\xc3\xa9") == 0, "utf-8 value");
    CHECK(strcmp(hy_st_meta_value(&st, 0), "") == 0, "empty value");
    hy_st_close(&st);
    /* __metadata__: null is no metadata (serde's Option) */
    CHECK_OK(hy_st_open(&st, mk("meta0.safetensors", "{\"__metadata__\":null}", 0)));
    CHECK(st.open && hy_st_meta_count(&st) == 0 && hy_st_count(&st) == 0, "null metadata");
    hy_st_close(&st);
}

/* ===== T2: malicious files, one per check ===== */

static void test_malicious_lengths(void) {
    refused(put("m_empty.safetensors", "", 0), "file is 0 bytes, shorter than the 8-byte header");
    refused(put("m_5.safetensors", "\x01\0\0\0\0", 5), "file is 5 bytes");
    static const unsigned char max[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'};
    refused(put("m_max.safetensors", max, sizeof max),
            "header length 18446744073709551615 is over the limit of 100000000 bytes");
    unsigned char big[16] = {0};
    uint64_t n = 100000001;
    for (int i = 0; i < 8; i++) big[i] = (unsigned char)(n >> (8 * i));
    memcpy(big + 8, "{}      ", 8);
    refused(put("m_big.safetensors", big, 16),
            "header length 100000001 is over the limit of 100000000 bytes");
    /* test_header_too_large: "<\0\0\0\0\xff\xff\xff" */
    unsigned char r[8 + 0x3C + 16] = {'<', 0, 0, 0, 0, 0xff, 0xff, 0xff};
    memcpy(r + 8, REF_I32, 0x3C);
    refused(put("m_ref_large.safetensors", r, sizeof r), "is over the limit of 100000000 bytes");
    /* test_invalid_header_length: N = 60 and nothing after */
    refused(put("m_past.safetensors", "<\0\0\0\0\0\0\0", 8),
            "header length 60 runs past the end of the file (8 bytes)");
    /* N exactly the limit but the file is short: past EOF, never allocated */
    n = HY_ST_MAX_HEADER;
    for (int i = 0; i < 8; i++) big[i] = (unsigned char)(n >> (8 * i));
    refused(put("m_limit.safetensors", big, 16), "header length 100000000 runs past the end");
}

static void test_malicious_encoding(void) {
    refused(put("m_utf8.safetensors", "\x01\0\0\0\0\0\0\0\xff", 9),
            "header is not valid UTF-8 (byte 0 of the header)");
    refused(mk("m_overlong.safetensors", "{\"\xc0\xaf\":1}", 0), "not valid UTF-8 (byte 2");
    refused(mk("m_surrogate.safetensors", "{\"a\":\"\xed\xa0\x80\"}", 0),
            "not valid UTF-8 (byte 6");
    refused(mk("m_cut.safetensors", "{\"a\":\"\xe2\x82\"}", 0), "not valid UTF-8");
    refused(put("m_json.safetensors", "\x01\0\0\0\0\0\0\0{", 9), "header is not valid JSON: ");
    refused(mk("m_array.safetensors", "[]", 0), "header must be a JSON object (got an array)");
    refused(mk("m_trailjunk.safetensors", "{} x", 0), "header is not valid JSON: end of file");
    refused(mk("m_dup.safetensors",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4),
            "duplicate key \"w\" in the header");
    refused(mk("m_dupmeta.safetensors", "{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", 0),
            "duplicate key \"a\"");
    refused(mk("m_nul.safetensors", "{\"a\\u0000b\":1}", 0), "header is not valid JSON: NUL");
    refused(mk("m_lone.safetensors", "{\"\\ud800\":1}", 0),
            "header is not valid JSON: invalid Unicode");
}

static void test_malicious_fields(void) {
    refused(mk("m_metanest.safetensors", "{\"__metadata__\":{\"a\":{\"b\":\"c\"}}}", 0),
            "__metadata__ value of 'a' must be a string (got an object)");
    refused(mk("m_metanum.safetensors", "{\"__metadata__\":{\"format\":1}}", 0),
            "__metadata__ value of 'format' must be a string (got an integer)");
    refused(mk("m_metastr.safetensors", "{\"__metadata__\":\"pt\"}", 0),
            "__metadata__ must be an object of strings (got a string)");
    refused(mk("m_notobj.safetensors", "{\"w\":[1,2]}", 0),
            "'w' must be an object with dtype, shape and data_offsets (got an array)");
    refused(mk("m_nodtype.safetensors", "{\"w\":{\"shape\":[],\"data_offsets\":[0,4]}}", 4),
            "'w' has no dtype");
    refused(mk("m_noshape.safetensors", "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4),
            "'w' has no shape");
    refused(mk("m_nooffs.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[]}}", 4),
            "'w' has no data_offsets");
    refused(mk("m_dtypenum.safetensors",
               "{\"w\":{\"dtype\":32,\"shape\":[],\"data_offsets\":[0,4]}}", 4),
            "dtype of 'w' must be a string (got an integer)");
    refused(mk("m_dtype.safetensors",
               "{\"w\":{\"dtype\":\"F128\",\"shape\":[],\"data_offsets\":[0,16]}}", 16),
            "'w' has unknown dtype 'F128'");
    refused(mk("m_dtypecase.safetensors",
               "{\"w\":{\"dtype\":\"f32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4),
            "'w' has unknown dtype 'f32'");
    refused(mk("m_shapestr.safetensors",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":\"2\",\"data_offsets\":[0,8]}}", 8),
            "shape of 'w' must be an array of integers >= 0 (got a string)");
    refused(mk("m_rank.safetensors",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
               "\"data_offsets\":[0,4]}}", 4),
            "'w' has rank 9, more than 8");
    refused(mk("m_negdim.safetensors",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,-2],\"data_offsets\":[0,0]}}", 0),
            "dimension 2 of 'w' must be an integer >= 0 (got a negative integer)");
    refused(mk("m_realdim.safetensors",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8),
            "dimension 1 of 'w' must be an integer >= 0 (got a float)");
    refused(mk("m_bigdim.safetensors",
               "{\"w\":{\"dtype\":\"U8\",\"shape\":[1099511627777],\"data_offsets\":[0,0]}}", 0),
            "dimension 1 of 'w' is 1099511627777, over the limit of 2^40");
    /* 2^63 x 2^63: not even a JSON integer jansson holds (a signed 64-bit one) */
    refused(mk("m_2p63.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[9223372036854775808,"
               "9223372036854775808],\"data_offsets\":[0,16]}}", 16),
            "header is not valid JSON: too big integer");
    /* the reference's test_validation_overflow, second vector: [2, 2^63-1] */
    refused(mk("m_refovf.safetensors", "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,"
               "9223372036854775807],\"data_offsets\":[0,16]}}", 16),
            "dimension 2 of 'test' is 9223372036854775807, over the limit of 2^40");
    /* dimensions within the limit whose product overflows 64 bits */
    refused(mk("m_ovf.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1099511627776,"
               "1099511627776],\"data_offsets\":[0,16]}}", 16),
            "size of 'w' (shape [1099511627776,1099511627776] of F32) overflows 64 bits");
    refused(mk("m_ovfbits.safetensors", "{\"w\":{\"dtype\":\"F64\",\"shape\":[1099511627776,"
               "4194304],\"data_offsets\":[0,16]}}", 16),
            "size of 'w' (shape [1099511627776,4194304] of F64) overflows 64 bits");
    refused(mk("m_offsnum.safetensors",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":4}}", 4),
            "data_offsets of 'w' must be [begin, end] (got an integer)");
    refused(mk("m_offs3.safetensors",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4,8]}}", 4),
            "data_offsets of 'w' must be [begin, end] (got an array of another length)");
    refused(mk("m_offsneg.safetensors",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", 8),
            "data_offsets of 'w' are negative");
    refused(mk("m_offsreal.safetensors",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0.0,4]}}", 4),
            "data_offsets of 'w' must be integers");
    refused(mk("m_emptyname.safetensors",
               "{\"\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4),
            "a tensor name is empty");
    char longname[1100 + 64];
    memset(longname, 0, sizeof longname);
    longname[0] = '{';
    longname[1] = '"';
    memset(longname + 2, 'n', 1025);
    strcat(longname, "\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}");
    refused(mk("m_longname.safetensors", longname, 4), "is 1025 bytes, over the limit of 1024");
}

static void test_malicious_offsets(void) {
    char want[9000];
    /* the brief's example: a tensor starting inside the previous one */
    const char *p = mk("m_overlap.safetensors",
                       "{\"cls_token\":{\"dtype\":\"F32\",\"shape\":[192],"
                       "\"data_offsets\":[0,768]},"
                       "\"blocks.0.attn.qkv.weight\":{\"dtype\":\"F32\",\"shape\":[2],"
                       "\"data_offsets\":[700,708]}}", 768);
    snprintf(want, sizeof want, "safetensors: '%s': data_offsets of 'blocks.0.attn.qkv.weight' "
             "overlap the previous tensor ('cls_token', ends at 768)", p);
    hy_st st;
    CHECK_FAIL(hy_st_open(&st, p), HY_EINVAL, want);
    /* test_json_attack: 10 tensors all on bytes [0, 16] */
    char hdr[2048] = "{";
    for (int i = 0; i < 10; i++)
        snprintf(hdr + strlen(hdr), sizeof hdr - strlen(hdr),
                 "%s\"weight_%d\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}",
                 i ? "," : "", i);
    strcat(hdr, "}");
    refused(mk("m_attack.safetensors", hdr, 16),
            "data_offsets of 'weight_1' overlap the previous tensor ('weight_0', ends at 16)");
    refused(mk("m_gap.safetensors",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12),
            "data_offsets of 'b' leave a gap of 4 bytes after the previous tensor ('a', ends "
            "at 4)");
    refused(mk("m_start.safetensors",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8),
            "data_offsets of 'a' start at 4: the first tensor must start at 0");
    refused(mk("m_inverted.safetensors",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8),
            "data_offsets of 'b' end before they begin ([8, 4])");
    /* test_invalid_info: I32 [2,2] on 4 bytes */
    refused(mk("m_info.safetensors",
               "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0, 4]}}", 0),
            "'test' has 4 bytes (data_offsets [0, 4]) but shape [2,2] of I32 needs 16");
    /* a shape bigger than its span (the mlx out-of-bounds read) */
    refused(mk("m_span.safetensors",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[1000000],\"data_offsets\":[0,16]}}", 16),
            "'w' has 16 bytes (data_offsets [0, 16]) but shape [1000000] of F32 needs 4000000");
    refused(mk("m_f4.safetensors",
               "{\"w\":{\"dtype\":\"F4\",\"shape\":[1,3],\"data_offsets\":[0,2]}}", 2),
            "'w' (3 elements of F4) does not fill whole bytes");
    /* test_metadata_incomplete_buffer: polyglot trailing bytes, then 2 bytes missing */
    static const char poly[] = "extra_bogus_data_for_polyglot_file";
    unsigned char b[8 + 0x3C + 16 + sizeof poly] = {'<'};
    memcpy(b + 8, REF_I32, 0x3C);
    memcpy(b + 8 + 0x3C + 16, poly, sizeof poly - 1);
    refused(put("m_poly.safetensors", b, 8 + 0x3C + 16 + sizeof poly - 1),
            "34 trailing bytes after the last tensor (data ends at byte 84, the file has 118)");
    refused(put("m_trunc.safetensors", b, 8 + 0x3C + 14),
            "file is truncated: the tensors end at byte 84, the file has 82");
    /* offsets near 2^63: validate's sums never wrap */
    refused(mk("m_hugeoff.safetensors", "{\"w\":{\"dtype\":\"U8\",\"shape\":[0],"
               "\"data_offsets\":[0,0]},\"v\":{\"dtype\":\"U8\",\"shape\":[1099511627776,"
               "1099511627776],\"data_offsets\":[0,9223372036854775807]}}", 0),
            "overflows 64 bits");
    refused(mk("m_hugeend.safetensors", "{\"v\":{\"dtype\":\"U8\",\"shape\":[1048576,1048576,"
               "1048576],\"data_offsets\":[0,1152921504606846976]}}", 0),
            "file is truncated: the tensors end at byte 1152921504606847077, the file has 101");
    /* missing file and a folder */
    char miss[4200];
    snprintf(miss, sizeof miss, "%s/none.safetensors", check_tmpdir());
    snprintf(want, sizeof want, "safetensors: cannot open '%s': no such file", miss);
    CHECK_FAIL(hy_st_open(&st, miss), HY_EIO, want);
    snprintf(want, sizeof want, "safetensors: cannot open '%s': it is a folder", check_tmpdir());
    CHECK_FAIL(hy_st_open(&st, check_tmpdir()), HY_EIO, want);
    /* a FIFO with no writer: refused at once, never waited on */
    snprintf(miss, sizeof miss, "%s/fifo.safetensors", check_tmpdir());
    HY_ASSERT(mkfifo(miss, 0600) == 0);
    snprintf(want, sizeof want, "safetensors: cannot open '%s': not a regular file", miss);
    CHECK_FAIL(hy_st_open(&st, miss), HY_EIO, want);
    unlink(miss);
}

/* ===== T3: dtypes against torch's .float() ===== */

static void compare_bits(const hy_st *st, const char *src, const char *ref) {
    int64_t i = hy_st_find(st, src), j = hy_st_find(st, ref);
    CHECK(i >= 0 && j >= 0, "fixture lacks '%s' or '%s'", src, ref);
    if (i < 0 || j < 0) return;
    size_t n = (size_t)hy_st_numel(st, (size_t)i);
    CHECK(n == hy_st_numel(st, (size_t)j) && hy_st_dtype_of(st, (size_t)j) == HY_ST_F32,
          "'%s' and '%s' differ in size", src, ref);
    float *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
    HY_ASSERT(got && want);
    CHECK_OK(hy_st_read_f32(st, (size_t)i, got));
    CHECK_OK(hy_st_read_f32(st, (size_t)j, want));
    size_t bad = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t a, b;
        memcpy(&a, &got[k], 4);
        memcpy(&b, &want[k], 4);
        if (a != b && bad++ < 5)
            fprintf(stderr, "  %s[%zu]: hydra 0x%08x, torch 0x%08x\n", src, k, a, b);
    }
    CHECK(bad == 0, "%zu of %zu %s values differ from torch's .float()", bad, n, src);
    free(got);
    free(want);
}

static void test_dtypes_vs_torch(void) {
    hy_st st;
    CHECK_OK(hy_st_open(&st, "tests/ref/st_dtypes.safetensors"));
    if (!st.open) return;
    CHECK(hy_st_dtype_of(&st, (size_t)hy_st_find(&st, "f16")) == HY_ST_F16 &&
          hy_st_dtype_of(&st, (size_t)hy_st_find(&st, "bf16")) == HY_ST_BF16 &&
          hy_st_dtype_of(&st, (size_t)hy_st_find(&st, "f64")) == HY_ST_F64, "fixture dtypes");
    CHECK(hy_st_meta_get(&st, "torch_version") != NULL, "fixture metadata");
    compare_bits(&st, "f16", "f16.float");
    compare_bits(&st, "bf16", "bf16.float");
    compare_bits(&st, "f64", "f64.float");
    /* the fixture covers every F16 pattern with exponent 0 or 31 */
    int64_t i = hy_st_find(&st, "f16");
    CHECK(i >= 0 && hy_st_numel(&st, (size_t)i) >= 4096, "f16 rows");
    hy_st_close(&st);
}

/* The raw bytes of tensor name in the file st was opened from (malloc'd; *n bytes). */
static unsigned char *raw_of(const hy_st *st, const char *name, size_t *n) {
    int64_t i = hy_st_find(st, name);
    if (i < 0) { *n = 0; return NULL; }
    const hy_st_entry *e = hy_st_entry_at(st, (size_t)i);
    size_t len;
    unsigned char *all = slurp(st->path, &len);
    HY_ASSERT(all && 8 + st->header_len + e->end <= len);
    *n = (size_t)(e->end - e->begin);
    unsigned char *r = malloc(*n ? *n : 1);
    memcpy(r, all + 8 + st->header_len + e->begin, *n);
    free(all);
    return r;
}

/* hy_st_write_as's F16 and BF16 narrowing against torch's .half() and .bfloat16(). */
static void test_narrowing_vs_torch(void) {
    hy_st ref;
    CHECK_OK(hy_st_open(&ref, "tests/ref/st_dtypes.safetensors"));
    if (!ref.open) return;
    int64_t i = hy_st_find(&ref, "f32");
    CHECK(i >= 0, "fixture lacks f32");
    if (i < 0) { hy_st_close(&ref); return; }
    int64_t n = (int64_t)hy_st_numel(&ref, (size_t)i);
    float *x = malloc((size_t)n * sizeof *x);
    CHECK_OK(hy_st_read_f32(&ref, (size_t)i, x));
    char p[4200];
    snprintf(p, sizeof p, "%s/narrow.safetensors", check_tmpdir());
    hy_st_tensor t = {"x", 1, &n, x};
    const struct { hy_st_dtype dt; const char *ref; } v[] = {{HY_ST_F16, "f32.half"},
                                                              {HY_ST_BF16, "f32.bfloat16"}};
    for (int k = 0; k < 2; k++) {
        CHECK_OK(hy_st_write_as(p, &t, 1, NULL, NULL, 0, v[k].dt));
        hy_st st;
        CHECK_OK(hy_st_open(&st, p));
        if (!st.open) continue;
        CHECK(hy_st_dtype_of(&st, 0) == v[k].dt, "dtype %s",
              hy_st_dtype_name(hy_st_dtype_of(&st, 0)));
        size_t ng, nw;
        unsigned char *got = raw_of(&st, "x", &ng), *want = raw_of(&ref, v[k].ref, &nw);
        CHECK(ng == nw && ng == 2 * (size_t)n, "%zu vs %zu bytes", ng, nw);
        size_t bad = 0;
        for (size_t j = 0; j + 1 < ng && j + 1 < nw; j += 2)
            if ((got[j] != want[j] || got[j + 1] != want[j + 1]) && bad++ < 5)
                fprintf(stderr, "  %s[%zu] of 0x%08x: hydra 0x%02x%02x, torch 0x%02x%02x\n",
                        v[k].ref, j / 2, (unsigned)((const uint32_t *)(const void *)x)[j / 2],
                        got[j + 1], got[j], want[j + 1], want[j]);
        CHECK(bad == 0, "%zu of %lld %s values differ from torch", bad, (long long)n,
              hy_st_dtype_name(v[k].dt));
        free(got);
        free(want);
        hy_st_close(&st);
    }
    char want[9000];
    snprintf(want, sizeof want, "safetensors: cannot write '%s' as F64: only F32, F16 and BF16 "
             "are written", p);
    CHECK_FAIL(hy_st_write_as(p, &t, 1, NULL, NULL, 0, HY_ST_F64), HY_EINVAL, want);
    free(x);
    hy_st_close(&ref);
}

/* ===== the writer ===== */

/* The reference's test_serialization, test_serialization_forced_alignement and test_empty. */
static void test_writer_reference_bytes(void) {
    static const unsigned char ser[] = {
        64, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 46, 48, 34, 58, 123, 34, 100,
        116, 121, 112, 101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34,
        58, 91, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102, 115,
        101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 0, 0, 0, 0, 0, 0, 128, 63,
        0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64};
    static const unsigned char aligned[] = {
        72, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 48, 34, 58, 123, 34, 100, 116,
        121, 112, 101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34, 58,
        91, 49, 44, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102,
        115, 101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 32, 32, 32, 32, 32,
        32, 32, 0, 0, 0, 0, 0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0,
        160, 64};
    static const unsigned char empty[] = {8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32};
    static const unsigned char empty_meta[] = {
        40, 0, 0, 0, 0, 0, 0, 0, 123, 34, 95, 95, 109, 101, 116, 97, 100, 97, 116, 97, 95,
        95, 34, 58, 123, 34, 102, 114, 97, 109, 101, 119, 111, 114, 107, 34, 58, 34, 112,
        116, 34, 125, 125, 32, 32, 32, 32, 32};
    const float data[6] = {0, 1, 2, 3, 4, 5};
    const int64_t s3[3] = {1, 2, 3}, s4[4] = {1, 1, 2, 3};
    char p[4200];
    snprintf(p, sizeof p, "%s/w_ref.safetensors", check_tmpdir());
    struct { hy_st_tensor t; const unsigned char *want; size_t n; const char *meta; } v[] = {
        {{"attn.0", 3, s3, data}, ser, sizeof ser, NULL},
        {{"attn0", 4, s4, data}, aligned, sizeof aligned, NULL},
        {{NULL, 0, NULL, NULL}, empty, sizeof empty, NULL},
        {{NULL, 0, NULL, NULL}, empty_meta, sizeof empty_meta, "framework"},
    };
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        const char *keys[1] = {v[k].meta}, *vals[1] = {"pt"};
        CHECK_OK(hy_st_write(p, &v[k].t, v[k].t.name ? 1 : 0, keys, vals, v[k].meta ? 1 : 0));
        size_t n;
        unsigned char *got = slurp(p, &n);
        CHECK(got && n == v[k].n && memcmp(got, v[k].want, n) == 0,
              "vector %zu: %zu bytes differ from the reference's %zu", k, n, v[k].n);
        free(got);
        hy_st st;
        CHECK_OK(hy_st_open(&st, p));
        hy_st_close(&st);
    }
}

static int no_temp_files(void) {
    DIR *d = opendir(check_tmpdir());
    HY_ASSERT(d);
    struct dirent *e;
    int ok = 1;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".tmp-")) ok = 0;
    closedir(d);
    return ok;
}

static void test_writer_round_trip(void) {
    rng_state = check_seed();
    enum { NT = 5 };
    const char *names[NT] = {"pos_embed", "blocks.0.attn.qkv.weight", "Head", "cls_token",
                             "blocks.10.mlp.fc1.bias"};
    int64_t shapes[NT][3] = {{1, 5, 8}, {24, 8, 0}, {3, 8, 0}, {1, 1, 8}, {0, 0, 0}};
    int nd[NT] = {3, 2, 2, 3, 0};
    float *data[NT];
    hy_st_tensor ts[NT], rev[NT];
    for (int i = 0; i < NT; i++) {
        size_t n = 1;
        for (int d = 0; d < nd[i]; d++) n *= (size_t)shapes[i][d];
        data[i] = malloc(n * sizeof(float));
        for (size_t k = 0; k < n; k++) {
            uint32_t u = (uint32_t)rnd();     /* any bits: NaN payloads, -0, inf, subnormals */
            if (k == 0) u = 0x80000000u;
            if (k == 1) u = 0x7F800001u;
            if (k == 2) u = 0x00000001u;
            memcpy(&data[i][k], &u, 4);
        }
        ts[i] = (hy_st_tensor){names[i], nd[i], shapes[i], data[i]};
        rev[NT - 1 - i] = ts[i];
    }
    const char *mk_[2] = {"format", "hydra.heads"}, *mv[2] = {"pt", "[[1,2],[3]]"};
    const char *mkr[2] = {"hydra.heads", "format"}, *mvr[2] = {"[[1,2],[3]]", "pt"};
    char p1[4200], p2[4200];
    snprintf(p1, sizeof p1, "%s/rt1.safetensors", check_tmpdir());
    snprintf(p2, sizeof p2, "%s/rt2.safetensors", check_tmpdir());
    CHECK_OK(hy_st_write(p1, ts, NT, mk_, mv, 2));
    hy_st st;
    CHECK_OK(hy_st_open(&st, p1));
    if (st.open) {
        CHECK(hy_st_count(&st) == NT && hy_st_meta_count(&st) == 2, "counts");
        /* F32 everywhere: file order is name order (bytewise: 'H' < 'b' < 'c' < 'p') */
        const char *order[NT] = {"Head", "blocks.0.attn.qkv.weight", "blocks.10.mlp.fc1.bias",
                                 "cls_token", "pos_embed"};
        for (int i = 0; i < NT; i++)
            CHECK(strcmp(hy_st_name(&st, (size_t)i), order[i]) == 0, "file order %d: %s", i,
                  hy_st_name(&st, (size_t)i));
        CHECK(strcmp(hy_st_meta_get(&st, "hydra.heads"), "[[1,2],[3]]") == 0, "metadata");
        CHECK(st.header_len % 8 == 0, "header length %llu", (unsigned long long)st.header_len);
        for (int i = 0; i < NT; i++) {
            int64_t j = hy_st_find(&st, names[i]);
            CHECK(j >= 0, "'%s' missing", names[i]);
            if (j < 0) continue;
            CHECK(hy_st_ndim(&st, (size_t)j) == nd[i], "ndim of %s", names[i]);
            size_t n = (size_t)hy_st_numel(&st, (size_t)j);
            float *back = malloc((n ? n : 1) * sizeof(float));
            CHECK_OK(hy_st_read_f32(&st, (size_t)j, back));
            CHECK(n == 0 || memcmp(back, data[i], n * sizeof(float)) == 0, "'%s' not bit-exact",
                  names[i]);
            free(back);
        }
        /* rewrite from what was read, in reverse order: the same bytes */
        CHECK_OK(hy_st_write(p2, rev, NT, mkr, mvr, 2));
        size_t n1, n2;
        unsigned char *b1 = slurp(p1, &n1), *b2 = slurp(p2, &n2);
        CHECK(b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0, "rewrite differs (%zu, %zu bytes)",
              n1, n2);
        free(b1);
        free(b2);
    }
    hy_st_close(&st);
    for (int i = 0; i < NT; i++) free(data[i]);
    CHECK(no_temp_files(), "a temporary file was left");
}

static void test_writer_errors(void) {
    char p[4200], want[9000];
    snprintf(p, sizeof p, "%s/werr.safetensors", check_tmpdir());
    const float x[2] = {1, 2};
    const int64_t s2[1] = {2}, sneg[1] = {-1};
    hy_st_tensor dup[2] = {{"w", 1, s2, x}, {"w", 1, s2, x}};
    snprintf(want, sizeof want, "safetensors: cannot write '%s': tensor name 'w' appears twice", p);
    CHECK_FAIL(hy_st_write(p, dup, 2, NULL, NULL, 0), HY_EINVAL, want);
    hy_st_tensor bad[1] = {{"", 1, s2, x}};
    CHECK_FAIL_HAS(hy_st_write(p, bad, 1, NULL, NULL, 0), HY_EINVAL, "a tensor name is empty");
    bad[0].name = "__metadata__";
    CHECK_FAIL_HAS(hy_st_write(p, bad, 1, NULL, NULL, 0), HY_EINVAL,
                   "'__metadata__' cannot name a tensor");
    bad[0].name = "\xff";
    CHECK_FAIL_HAS(hy_st_write(p, bad, 1, NULL, NULL, 0), HY_EINVAL, "is not valid UTF-8");
    bad[0] = (hy_st_tensor){"w", 1, sneg, x};
    CHECK_FAIL_HAS(hy_st_write(p, bad, 1, NULL, NULL, 0), HY_EINVAL,
                   "dimension 1 of 'w' is -1, expected 0 to 2^40");
    const char *k2[2] = {"a", "a"}, *v2[2] = {"1", "2"};
    CHECK_FAIL_HAS(hy_st_write(p, NULL, 0, k2, v2, 2), HY_EINVAL, "metadata key 'a' appears twice");
    char nodir[4300];
    snprintf(nodir, sizeof nodir, "%s/no/such/x.safetensors", check_tmpdir());
    snprintf(want, sizeof want, "safetensors: cannot write '%s': folder '%s/no/such' does not "
             "exist", nodir, check_tmpdir());
    CHECK_FAIL(hy_st_write(nodir, dup, 1, NULL, NULL, 0), HY_EIO, want);
    CHECK(access(p, F_OK) != 0, "a refused write left '%s'", p);
    /* a write that fails half way (file size limit: EFBIG) leaves the old file untouched */
    CHECK_OK(hy_st_write(p, dup, 1, NULL, NULL, 0));
    size_t n0;
    unsigned char *before = slurp(p, &n0);
    enum { BIG = 1 << 16 };
    float *big = calloc(BIG, sizeof(float));
    const int64_t sb[1] = {BIG};
    hy_st_tensor t = {"big", 1, sb, big};
    struct rlimit old, lim;
    HY_ASSERT(getrlimit(RLIMIT_FSIZE, &old) == 0);
    lim = old;
    lim.rlim_cur = 4096;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    HY_ASSERT(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    hy_status rc = hy_st_write(p, &t, 1, NULL, NULL, 0);
    HY_ASSERT(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, prev);
    CHECK(rc == HY_EIO && strstr(hy_errmsg(), "cannot write") && strstr(hy_errmsg(), p),
          "got %d '%s'", rc, hy_errmsg());
    size_t n1;
    unsigned char *after = slurp(p, &n1);
    CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0,
          "the old file changed after a failed write");
    CHECK(no_temp_files(), "a temporary file was left after a failed write");
    free(before);
    free(after);
    free(big);
}

/* ===== T2: a deterministic mutation loop ===== */

static void test_mutations(void) {
    rng_state = check_seed() ^ 0x5AFE;
    /* a valid file with metadata, F32 / F16 / BF16 / F64 / I64 and a zero-sized tensor */
    const char *hdr =
        "{\"__metadata__\":{\"format\":\"pt\"},"
        "\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[16,32]},"
        "\"c\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[32,38]},"
        "\"d\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[38,40]},"
        "\"e\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[40,40]},"
        "\"position_ids\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[40,48]}}";
    size_t h = strlen(hdr), n = 8 + h + 48;
    unsigned char *orig = calloc(n, 1), *buf = malloc(n + 64);
    for (int i = 0; i < 8; i++) orig[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(orig + 8, hdr, h);
    for (size_t i = 8 + h; i < n; i++) orig[i] = (unsigned char)rnd();
    hy_st st;
    CHECK_OK(hy_st_open(&st, put("mut.safetensors", orig, n)));
    CHECK(st.open && hy_st_count(&st) == 6, "the base file is valid");
    hy_st_close(&st);
    static const char *const tokens[] = {"\"", "{", "}", "[", "]", ",", ":", "-1", "0",
                                         "99999999999", "\"F32\"", "\"I64\"", "\\u0000", "\xff"};
    /* one file rewritten in place (pwrite + ftruncate: no create/unlink per mutation) */
    char mp[4200];
    snprintf(mp, sizeof mp, "%s/mut.safetensors", check_tmpdir());
    int fd = open(mp, O_RDWR);
    HY_ASSERT(fd >= 0);
    int accepted = 0;
    double t0 = hy_now();
    for (int it = 0; it < 10000; it++) {
        memcpy(buf, orig, n);
        size_t len = n;
        int k = 1 + (int)(rnd() % 4);
        for (int m = 0; m < k; m++) {
            uint64_t r = rnd();
            size_t at = (size_t)(r >> 16) % len;
            switch (r % 5) {
            case 0: case 1: buf[at] = (unsigned char)(r >> 8); break;
            case 2: buf[at] ^= (unsigned char)(1u << ((r >> 8) & 7)); break;
            case 3: {
                const char *tk = tokens[(r >> 8) % (sizeof tokens / sizeof tokens[0])];
                size_t tl = strlen(tk);
                if (at + tl <= len) memcpy(buf + at, tk, tl);
                break;
            }
            default:
                len = at + 1;            /* truncate */
            }
        }
        if (rnd() % 16 == 0) { memset(buf + len, 'x', 8); len += 8; }   /* trailing bytes */
        HY_ASSERT(pwrite(fd, buf, len, 0) == (ssize_t)len && ftruncate(fd, (off_t)len) == 0);
        js_peak = js_cur;
        hy_status rc = hy_st_open(&st, mp);
        CHECK(js_peak - js_cur <= JSON_COST * len + JSON_SLACK, "jansson took %zu bytes",
              js_peak - js_cur);
        if (rc != HY_OK) {
            CHECK(strncmp(hy_errmsg(), "safetensors: ", 13) == 0, "message '%s'", hy_errmsg());
            continue;
        }
        accepted++;
        /* a valid file's tensors fit in it: reading them allocates at most the file size */
        uint64_t bytes = 0;
        for (size_t i = 0; i < hy_st_count(&st); i++) {
            const hy_st_entry *e = hy_st_entry_at(&st, i);
            bytes += e->end - e->begin;
            CHECK(e->numel * hy_st_dtype_bits(e->dtype) / 8 == e->end - e->begin, "span");
        }
        CHECK(bytes + 8 + st.header_len == st.file_size, "data does not cover the file");
        for (size_t i = 0; i < hy_st_count(&st); i++) {
            if (!hy_st_dtype_readable(hy_st_dtype_of(&st, i))) continue;
            size_t ne = (size_t)hy_st_numel(&st, i);
            float *out = malloc((ne ? ne : 1) * sizeof *out);
            CHECK_OK(hy_st_read_f32(&st, i, out));
            free(out);
        }
        hy_st_close(&st);
    }
    double dt = hy_now() - t0;
    close(fd);
    printf("  mutations: 10000 files, %d accepted, %.2f s\n", accepted, dt);
    CHECK(accepted > 0 && accepted < 10000, "accepted %d", accepted);
    free(orig);
    free(buf);
}

int main(void) {
    json_set_alloc_funcs(js_malloc, js_free);
    RUN(test_reference_deserialization);
    RUN(test_reference_whitespace);
    RUN(test_reference_zero_sized_and_scalar);
    RUN(test_metadata);
    RUN(test_malicious_lengths);
    RUN(test_malicious_encoding);
    RUN(test_malicious_fields);
    RUN(test_malicious_offsets);
    RUN(test_dtypes_vs_torch);
    RUN(test_narrowing_vs_torch);
    RUN(test_writer_reference_bytes);
    RUN(test_writer_round_trip);
    RUN(test_writer_errors);
    RUN(test_parse_memory);
    RUN(test_mutations);
    return check_exit("test_safetensors");
}
