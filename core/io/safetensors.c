/* safetensors.c: the safetensors reader and writer (contracts in safetensors.h).
 * Reading: the 8-byte length and the header are read with pread; the header is checked for
 * UTF-8 here, parsed by libjansson (duplicate keys rejected), then every entry is type-checked
 * and the entries, sorted by data_offsets, are validated as the reference's Metadata::validate
 * does. Writing: the header JSON is emitted here (serde_json's compact form and escapes), the
 * data streamed through a fixed block into a temporary file that is renamed onto the path. */
#define _POSIX_C_SOURCE 200809L
#include "io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "io/textfile.h"

/* Conversion scratch of hy_st_read_f32 and the writer's output block. */
#define BLOCK_BYTES ((size_t)1 << 16)

static const char *const dtype_names[HY_ST_NDTYPES] = {
    "BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0",
    "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "C64",
    "F64", "I64", "U64"};
static const unsigned char dtype_bits[HY_ST_NDTYPES] = {
    8, 4, 6, 6, 8, 8, 8, 8, 8, 8, 8, 16, 16, 16, 16, 32, 32, 32, 64, 64, 64, 64};

const char *hy_st_dtype_name(hy_st_dtype dt) {
    return (unsigned)dt < HY_ST_NDTYPES ? dtype_names[dt] : "?";
}

size_t hy_st_dtype_bits(hy_st_dtype dt) {
    return (unsigned)dt < HY_ST_NDTYPES ? dtype_bits[dt] : 0;
}

int hy_st_dtype_readable(hy_st_dtype dt) {
    return dt == HY_ST_F32 || dt == HY_ST_F16 || dt == HY_ST_BF16 || dt == HY_ST_F64;
}

static int dtype_parse(const char *s, hy_st_dtype *out) {
    for (int i = 0; i < HY_ST_NDTYPES; i++)
        if (strcmp(s, dtype_names[i]) == 0) { *out = (hy_st_dtype)i; return 1; }
    return 0;
}

/* ===== small helpers ===== */

/* *r = a * b; 1 on overflow. */
static int mul_u64(uint64_t a, uint64_t b, uint64_t *r) {
    if (a != 0 && b > UINT64_MAX / a) return 1;
    *r = a * b;
    return 0;
}

static uint64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static const char *errno_text(int e) {
    switch (e) {
    case ENOENT: return "no such file";
    case EACCES: case EPERM: return "permission denied";
    case ENOSPC: return "no space left on device";
    case EISDIR: return "it is a folder";
    default: return strerror(e);
    }
}

/* Reads n bytes at off; 0, or -1 with errno set (EIO for a short file). */
static int pread_all(int fd, void *buf, size_t n, uint64_t off) {
    unsigned char *p = buf;
    while (n > 0) {
        size_t k = n < ((size_t)1 << 30) ? n : ((size_t)1 << 30);
        ssize_t r = pread(fd, p, k, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) { errno = EIO; return -1; }
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

static void free_strs(char **s, size_t n) {
    if (!s) return;
    for (size_t i = 0; i < n; i++) hy_free(s[i]);
    hy_free(s);
}

/* ===== reading ===== */

void hy_st_close(hy_st *st) {
    if (!st) return;
    if (st->open) close(st->fd);
    hy_free(st->path);
    if (st->ents)
        for (size_t i = 0; i < st->n; i++) hy_free(st->ents[i].name);
    hy_free(st->ents);
    hy_free(st->by_name);
    free_strs(st->meta_keys, st->n_meta);
    free_strs(st->meta_values, st->n_meta);
    memset(st, 0, sizeof *st);
}

static int cmp_offsets(const void *a, const void *b) {
    const hy_st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* qsort has no context argument: by_name is sorted through this pointer, set just around that
 * qsort call in parse_header (thread-local, so concurrent opens do not share it). */
static _Thread_local const hy_st_entry *sort_ents;
static int cmp_by_name(const void *a, const void *b) {
    return strcmp(sort_ents[*(const size_t *)a].name, sort_ents[*(const size_t *)b].name);
}

static int cmp_meta(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A non-negative JSON integer into *out; 0 when v is not one. */
static int get_u64(const json_t *v, uint64_t *out, int *negative) {
    if (!json_is_integer(v)) return 0;
    json_int_t x = json_integer_value(v);
    if (x < 0) { *negative = 1; return 0; }
    *out = (uint64_t)x;
    return 1;
}

/* Parses and checks one tensor entry (name, value) into e's dtype, shape and offsets. */
static hy_status parse_entry(const char *file, const char *name, const json_t *v,
                             hy_st_entry *e) {
    size_t len = strlen(name);
    if (len == 0)
        return hy_fail(HY_EINVAL, "safetensors: '%s': a tensor name is empty", file);
    if (len > HY_ST_MAX_NAME)
        return hy_fail(HY_EINVAL, "safetensors: '%s': tensor name '%.40s...' is %zu bytes, "
                       "over the limit of %d", file, name, len, HY_ST_MAX_NAME);
    if (!json_is_object(v))
        return hy_fail(HY_EINVAL, "safetensors: '%s': '%s' must be an object with dtype, shape "
                       "and data_offsets (got %s)", file, name, hy_json_kind(v));
    const json_t *dt = json_object_get(v, "dtype");
    const json_t *sh = json_object_get(v, "shape");
    const json_t *of = json_object_get(v, "data_offsets");
    if (!dt || !sh || !of)
        return hy_fail(HY_EINVAL, "safetensors: '%s': '%s' has no %s", file, name,
                       !dt ? "dtype" : !sh ? "shape" : "data_offsets");
    if (!json_is_string(dt))
        return hy_fail(HY_EINVAL, "safetensors: '%s': dtype of '%s' must be a string (got %s)",
                       file, name, hy_json_kind(dt));
    if (!dtype_parse(json_string_value(dt), &e->dtype))
        return hy_fail(HY_EINVAL, "safetensors: '%s': '%s' has unknown dtype '%s'", file, name,
                       json_string_value(dt));
    if (!json_is_array(sh))
        return hy_fail(HY_EINVAL, "safetensors: '%s': shape of '%s' must be an array of "
                       "integers >= 0 (got %s)", file, name, hy_json_kind(sh));
    size_t nd = json_array_size(sh);
    if (nd > HY_ST_MAX_RANK)
        return hy_fail(HY_EINVAL, "safetensors: '%s': '%s' has rank %zu, more than %d", file,
                       name, nd, HY_ST_MAX_RANK);
    e->ndim = (int)nd;
    for (size_t d = 0; d < nd; d++) {
        uint64_t x;
        int neg = 0;
        if (!get_u64(json_array_get(sh, d), &x, &neg))
            return hy_fail(HY_EINVAL, "safetensors: '%s': dimension %zu of '%s' must be an "
                           "integer >= 0 (got %s)", file, d + 1, name,
                           neg ? "a negative integer" : hy_json_kind(json_array_get(sh, d)));
        if (x > (uint64_t)HY_ST_MAX_DIM)
            return hy_fail(HY_EINVAL, "safetensors: '%s': dimension %zu of '%s' is %llu, over "
                           "the limit of 2^40", file, d + 1, name, (unsigned long long)x);
        e->shape[d] = (int64_t)x;
    }
    if (!json_is_array(of) || json_array_size(of) != 2)
        return hy_fail(HY_EINVAL, "safetensors: '%s': data_offsets of '%s' must be [begin, end] "
                       "(got %s%s)", file, name, hy_json_kind(of),
                       json_is_array(of) ? " of another length" : "");
    int neg = 0;
    if (!get_u64(json_array_get(of, 0), &e->begin, &neg) ||
        !get_u64(json_array_get(of, 1), &e->end, &neg)) {
        if (neg)
            return hy_fail(HY_EINVAL, "safetensors: '%s': data_offsets of '%s' are negative",
                           file, name);
        return hy_fail(HY_EINVAL, "safetensors: '%s': data_offsets of '%s' must be integers",
                       file, name);
    }
    return HY_OK;
}

/* Parses __metadata__ (an object of strings, or null) into st. */
static hy_status parse_meta(hy_st *st, const json_t *m) {
    const char *file = st->path;
    if (json_is_null(m)) return HY_OK;
    if (!json_is_object(m))
        return hy_fail(HY_EINVAL, "safetensors: '%s': __metadata__ must be an object of strings "
                       "(got %s)", file, hy_json_kind(m));
    size_t n = json_object_size(m);
    st->meta_keys = hy_xcalloc(n ? n : 1, sizeof(char *));
    st->meta_values = hy_xcalloc(n ? n : 1, sizeof(char *));
    if (!st->meta_keys || !st->meta_values) return HY_ENOMEM;
    const char *k;
    json_t *v;
    size_t i = 0;
    json_object_foreach((json_t *)(uintptr_t)m, k, v) {
        if (!json_is_string(v))
            return hy_fail(HY_EINVAL, "safetensors: '%s': __metadata__ value of '%s' must be a "
                           "string (got %s)", file, k, hy_json_kind(v));
        st->meta_keys[i] = hy_xstrdup(k);
        st->meta_values[i] = hy_xstrdup(json_string_value(v));
        st->n_meta = ++i;
        if (!st->meta_keys[i - 1] || !st->meta_values[i - 1]) return HY_ENOMEM;
    }
    /* Sort the pairs by key: sort an index, then permute both arrays. */
    char **pairs = hy_xmalloc((n ? n : 1) * 2 * sizeof(char *));
    if (!pairs) return HY_ENOMEM;
    for (i = 0; i < n; i++) {
        pairs[2 * i] = st->meta_keys[i];
        pairs[2 * i + 1] = st->meta_values[i];
    }
    qsort(pairs, n, 2 * sizeof(char *), cmp_meta);
    for (i = 0; i < n; i++) {
        st->meta_keys[i] = pairs[2 * i];
        st->meta_values[i] = pairs[2 * i + 1];
    }
    hy_free(pairs);
    return HY_OK;
}

/* The Metadata::validate checks on the entries sorted by offsets; *data_end = last end. */
static hy_status validate(const hy_st *st, uint64_t *data_end) {
    const char *file = st->path;
    uint64_t start = 0;
    for (size_t i = 0; i < st->n; i++) {
        const hy_st_entry *e = &st->ents[i];
        if (e->end < e->begin)
            return hy_fail(HY_EINVAL, "safetensors: '%s': data_offsets of '%s' end before they "
                           "begin ([%llu, %llu])", file, e->name, (unsigned long long)e->begin,
                           (unsigned long long)e->end);
        if (e->begin != start) {
            if (i == 0)
                return hy_fail(HY_EINVAL, "safetensors: '%s': data_offsets of '%s' start at "
                               "%llu: the first tensor must start at 0", file, e->name,
                               (unsigned long long)e->begin);
            const hy_st_entry *p = &st->ents[i - 1];
            if (e->begin < start)
                return hy_fail(HY_EINVAL, "safetensors: '%s': data_offsets of '%s' overlap the "
                               "previous tensor ('%s', ends at %llu)", file, e->name, p->name,
                               (unsigned long long)start);
            return hy_fail(HY_EINVAL, "safetensors: '%s': data_offsets of '%s' leave a gap of "
                           "%llu bytes after the previous tensor ('%s', ends at %llu)", file,
                           e->name, (unsigned long long)(e->begin - start), p->name,
                           (unsigned long long)start);
        }
        start = e->end;
        uint64_t nel = 1, nbits;
        int ovf = 0;
        for (int d = 0; d < e->ndim; d++) ovf |= mul_u64(nel, (uint64_t)e->shape[d], &nel);
        char sh[160];
        int64_t shape[HY_ST_MAX_RANK];
        memcpy(shape, e->shape, sizeof shape);
        if (ovf || mul_u64(nel, hy_st_dtype_bits(e->dtype), &nbits)) {
            int k = snprintf(sh, sizeof sh, "[");
            for (int d = 0; d < e->ndim && k < (int)sizeof sh - 24; d++)
                k += snprintf(sh + k, sizeof sh - (size_t)k, "%s%lld", d ? "," : "",
                              (long long)shape[d]);
            snprintf(sh + k, sizeof sh - (size_t)k, "]");
            return hy_fail(HY_EINVAL, "safetensors: '%s': size of '%s' (shape %s of %s) "
                           "overflows 64 bits", file, e->name, sh, hy_st_dtype_name(e->dtype));
        }
        if (nbits % 8 != 0)
            return hy_fail(HY_EINVAL, "safetensors: '%s': '%s' (%llu elements of %s) does not "
                           "fill whole bytes", file, e->name, (unsigned long long)nel,
                           hy_st_dtype_name(e->dtype));
        if (e->end - e->begin != nbits / 8) {
            int k = snprintf(sh, sizeof sh, "[");
            for (int d = 0; d < e->ndim && k < (int)sizeof sh - 24; d++)
                k += snprintf(sh + k, sizeof sh - (size_t)k, "%s%lld", d ? "," : "",
                              (long long)shape[d]);
            snprintf(sh + k, sizeof sh - (size_t)k, "]");
            return hy_fail(HY_EINVAL, "safetensors: '%s': '%s' has %llu bytes (data_offsets "
                           "[%llu, %llu]) but shape %s of %s needs %llu", file, e->name,
                           (unsigned long long)(e->end - e->begin),
                           (unsigned long long)e->begin, (unsigned long long)e->end, sh,
                           hy_st_dtype_name(e->dtype), (unsigned long long)(nbits / 8));
        }
    }
    *data_end = start;
    return HY_OK;
}

/* The shortest tensor entry: {"dtype":"","shape":[],"data_offsets":[]} */
#define MIN_ENTRY_BYTES 41
/* Objects allowed inside entries (a valid header has none; a few keep the messages specific). */
#define MAX_DEEP_OBJECTS 64

/* Refuses, before jansson builds its tree, the JSON shapes no safetensors header has and that
 * would make the tree many times larger than the header (an empty object costs jansson ~240
 * bytes): a container inside an array ([{},{},...]: ~70 bytes per header byte), nesting deeper
 * than 3 levels (root, entry, field), more than MAX_DEEP_OBJECTS objects inside entries, or more
 * than one entry object (the metadata may be one) shorter than any tensor entry can be. What is
 * left costs jansson at most ~25 bytes per header byte (arrays of empty arrays; a valid header
 * costs ~10-13). Works on bytes (strings skipped with their escapes); syntax is left to
 * jansson. */
static hy_status check_nesting(const char *file, const char *s, size_t n) {
    char kind[3];                      /* '{' or '[' of each open container */
    size_t start2 = 0, deep = 0, shorts = 0;
    int depth = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '"') {
            for (i++; i < n && s[i] != '"'; i++)
                if (s[i] == '\\') i++;
            continue;
        }
        if (c == '{' || c == '[') {
            if (depth > 0 && kind[depth - 1] == '[')
                return hy_fail(HY_EINVAL, "safetensors: '%s': header has a JSON %s inside an "
                               "array (byte %zu of the header); safetensors arrays hold integers",
                               file, c == '{' ? "object" : "array", i);
            if (depth == 3)
                return hy_fail(HY_EINVAL, "safetensors: '%s': header nests JSON deeper than 3 "
                               "levels (byte %zu of the header)", file, i);
            if (depth == 1 && c == '{') start2 = i;
            if (depth == 2 && c == '{' && ++deep > MAX_DEEP_OBJECTS)
                return hy_fail(HY_EINVAL, "safetensors: '%s': header has more than %d JSON "
                               "objects inside entries (byte %zu of the header); safetensors "
                               "fields are strings, integers and arrays", file,
                               MAX_DEEP_OBJECTS, i);
            kind[depth++] = c;
        } else if ((c == '}' || c == ']') && depth > 0) {
            depth--;
            if (depth == 1 && kind[1] == '{' && i + 1 - start2 < MIN_ENTRY_BYTES &&
                ++shorts > 1)
                return hy_fail(HY_EINVAL, "safetensors: '%s': header has more than one entry "
                               "too short to be a tensor (%zu bytes at byte %zu of the header)",
                               file, i + 1 - start2, start2);
        }
    }
    return HY_OK;
}

/* Everything after the header bytes are in memory: UTF-8, JSON, entries, validation. */
static hy_status parse_header(hy_st *st, const char *hdr, size_t n) {
    const char *file = st->path;
    size_t bad = hy_utf8_bad(hdr, n);
    if (bad != n)
        return hy_fail(HY_EINVAL, "safetensors: '%s': header is not valid UTF-8 (byte %zu of "
                       "the header)", file, bad);
    HY_TRY(check_nesting(file, hdr, n));
    json_error_t err;
    json_t *root = json_loadb(hdr, n, JSON_REJECT_DUPLICATES, &err);
    if (!root) {
        if (json_error_code(&err) == json_error_duplicate_key) {
            const char *near = strstr(err.text, "near '");
            const char *key = near ? near + 6 : "?";
            size_t kl = near ? strlen(key) : 1;
            if (kl > 0 && key[kl - 1] == '\'') kl--;
            return hy_fail(HY_EINVAL, "safetensors: '%s': duplicate key %.*s in the header "
                           "(byte %d of the header)", file, (int)kl, key, err.position);
        }
        return hy_fail(HY_EINVAL, "safetensors: '%s': header is not valid JSON: %s (byte %d of "
                       "the header)", file, err.text, err.position);
    }
    hy_status rc = HY_OK;
    if (!json_is_object(root)) {
        rc = hy_fail(HY_EINVAL, "safetensors: '%s': header must be a JSON object (got %s)",
                     file, hy_json_kind(root));
        goto done;
    }
    size_t total = json_object_size(root);
    const json_t *meta = json_object_get(root, "__metadata__");
    size_t nt = total - (meta ? 1 : 0);
    st->ents = hy_xcalloc(nt ? nt : 1, sizeof *st->ents);
    st->by_name = hy_xcalloc(nt ? nt : 1, sizeof *st->by_name);
    if (!st->ents || !st->by_name) { rc = HY_ENOMEM; goto done; }
    if (meta && (rc = parse_meta(st, meta)) != HY_OK) goto done;
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (strcmp(k, "__metadata__") == 0) continue;
        hy_st_entry *e = &st->ents[st->n];
        if ((rc = parse_entry(file, k, v, e)) != HY_OK) goto done;
        e->name = hy_xstrdup(k);
        if (!e->name) { rc = HY_ENOMEM; goto done; }
        e->numel = 1;
        for (int d = 0; d < e->ndim; d++) (void)mul_u64(e->numel, (uint64_t)e->shape[d], &e->numel);
        st->n++;
    }
    HY_ASSERT(st->n == nt);
    qsort(st->ents, st->n, sizeof *st->ents, cmp_offsets);
    uint64_t data_end = 0;
    if ((rc = validate(st, &data_end)) != HY_OK) goto done;
    /* data_end <= 2^64 - 1 and 8 + N <= file_size: the sum below cannot overflow unless the
     * file claims more than 2^64 bytes, which validate's checked sizes already exclude. */
    uint64_t want = 8 + st->header_len;
    if (data_end > UINT64_MAX - want || data_end + want > st->file_size) {
        rc = hy_fail(HY_EINVAL, "safetensors: '%s': file is truncated: the tensors end at byte "
                     "%llu%s, the file has %llu", file,
                     (unsigned long long)(data_end > UINT64_MAX - want ? data_end
                                                                       : data_end + want),
                     data_end > UINT64_MAX - want ? " of the data" : "",
                     (unsigned long long)st->file_size);
        goto done;
    }
    if (data_end + want < st->file_size) {
        rc = hy_fail(HY_EINVAL, "safetensors: '%s': %llu trailing bytes after the last tensor "
                     "(data ends at byte %llu, the file has %llu)", file,
                     (unsigned long long)(st->file_size - data_end - want),
                     (unsigned long long)(data_end + want), (unsigned long long)st->file_size);
        goto done;
    }
    for (size_t i = 0; i < st->n; i++) st->by_name[i] = i;
    sort_ents = st->ents;
    qsort(st->by_name, st->n, sizeof *st->by_name, cmp_by_name);
    sort_ents = NULL;
done:
    json_decref(root);
    return rc;
}

hy_status hy_st_open(hy_st *st, const char *path) {
    memset(st, 0, sizeof *st);
    if (!path || !*path) return hy_fail(HY_EINVAL, "safetensors: empty file name");
    hy_status rc = HY_OK;
    char *hdr = NULL;
    st->path = hy_xstrdup(path);
    if (!st->path) return HY_ENOMEM;
    /* O_NONBLOCK: a FIFO must not block open (it is refused below); no effect on files */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        rc = hy_fail(HY_EIO, "safetensors: cannot open '%s': %s", path, errno_text(errno));
        goto fail;
    }
    st->fd = fd;
    st->open = 1;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        rc = hy_fail(HY_EIO, "safetensors: cannot open '%s': %s", path, errno_text(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        rc = hy_fail(HY_EIO, "safetensors: cannot open '%s': %s", path,
                     S_ISDIR(sb.st_mode) ? "it is a folder" : "not a regular file");
        goto fail;
    }
    st->file_size = (uint64_t)sb.st_size;
    if (st->file_size < 8) {
        rc = hy_fail(HY_EINVAL, "safetensors: '%s': file is %llu bytes, shorter than the 8-byte "
                     "header length", path, (unsigned long long)st->file_size);
        goto fail;
    }
    unsigned char nb[8];
    if (pread_all(fd, nb, 8, 0) != 0) {
        rc = hy_fail(HY_EIO, "safetensors: cannot read '%s': %s", path, errno_text(errno));
        goto fail;
    }
    uint64_t n = le64(nb);
    st->header_len = n;
    if (n > HY_ST_MAX_HEADER) {
        rc = hy_fail(HY_EINVAL, "safetensors: '%s': header length %llu is over the limit of %u "
                     "bytes", path, (unsigned long long)n, HY_ST_MAX_HEADER);
        goto fail;
    }
    if (n > st->file_size - 8) {
        rc = hy_fail(HY_EINVAL, "safetensors: '%s': header length %llu runs past the end of the "
                     "file (%llu bytes)", path, (unsigned long long)n,
                     (unsigned long long)st->file_size);
        goto fail;
    }
    hdr = hy_xmalloc((size_t)n + 1);
    if (!hdr) { rc = HY_ENOMEM; goto fail; }
    if (pread_all(fd, hdr, (size_t)n, 8) != 0) {
        rc = hy_fail(HY_EIO, "safetensors: cannot read '%s': %s", path, errno_text(errno));
        goto fail;
    }
    hdr[n] = '\0';
    if ((rc = parse_header(st, hdr, (size_t)n)) != HY_OK) {
        if (rc == HY_ENOMEM) hy_fail_prefix(rc, "safetensors: '%s'", path);
        goto fail;
    }
    hy_free(hdr);
    return HY_OK;
fail:
    hy_free(hdr);
    hy_st_close(st);
    return rc;
}

size_t hy_st_count(const hy_st *st) { return st->n; }

const hy_st_entry *hy_st_entry_at(const hy_st *st, size_t i) {
    HY_ASSERT(i < st->n);
    return &st->ents[i];
}

const char *hy_st_name(const hy_st *st, size_t i) { return hy_st_entry_at(st, i)->name; }
hy_st_dtype hy_st_dtype_of(const hy_st *st, size_t i) { return hy_st_entry_at(st, i)->dtype; }
int hy_st_ndim(const hy_st *st, size_t i) { return hy_st_entry_at(st, i)->ndim; }
const int64_t *hy_st_shape(const hy_st *st, size_t i) { return hy_st_entry_at(st, i)->shape; }
uint64_t hy_st_numel(const hy_st *st, size_t i) { return hy_st_entry_at(st, i)->numel; }

int64_t hy_st_find(const hy_st *st, const char *name) {
    size_t lo = 0, hi = st->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->ents[st->by_name[mid]].name, name);
        if (c == 0) return (int64_t)st->by_name[mid];
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return -1;
}

size_t hy_st_meta_count(const hy_st *st) { return st->n_meta; }

const char *hy_st_meta_key(const hy_st *st, size_t i) {
    HY_ASSERT(i < st->n_meta);
    return st->meta_keys[i];
}

const char *hy_st_meta_value(const hy_st *st, size_t i) {
    HY_ASSERT(i < st->n_meta);
    return st->meta_values[i];
}

const char *hy_st_meta_get(const hy_st *st, const char *key) {
    for (size_t i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_values[i];
    return NULL;
}

/* ===== conversions ===== */

/* Conversions work on bit patterns and store them with memcpy, so no value passes through a
 * floating-point register that could quiet a signalling NaN. */
static void put_bits(float *dst, uint32_t u) { memcpy(dst, &u, sizeof u); }

/* IEEE binary16 -> binary32 bits, exact. NaNs keep sign and payload and get the quiet bit, as
 * x86's vcvtph2ps and torch's scalar fp16_ieee_to_fp32_value (a multiply) both produce. */
static uint32_t f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t ex = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
    if (ex == 0x1F) return sign | 0x7F800000u | (man ? 0x400000u | (man << 13) : 0);
    if (ex == 0) {
        if (man == 0) return sign;
        /* subnormal: man x 2^-24; normalise the mantissa into the f32 form */
        int e = -14;
        while (!(man & 0x400u)) { man <<= 1; e--; }
        man &= 0x3FFu;
        return sign | ((uint32_t)(e + 127) << 23) | (man << 13);
    }
    return sign | ((ex + 112u) << 23) | (man << 13);
}

static void convert(hy_st_dtype dt, const unsigned char *src, float *dst, size_t n) {
    switch (dt) {
    case HY_ST_F32:
        for (size_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)src[4 * i] | (uint32_t)src[4 * i + 1] << 8 |
                         (uint32_t)src[4 * i + 2] << 16 | (uint32_t)src[4 * i + 3] << 24;
            put_bits(&dst[i], u);
        }
        break;
    case HY_ST_F16:
        for (size_t i = 0; i < n; i++)
            put_bits(&dst[i], f16_to_f32((uint16_t)(src[2 * i] | src[2 * i + 1] << 8)));
        break;
    case HY_ST_BF16:
        for (size_t i = 0; i < n; i++)
            put_bits(&dst[i], (uint32_t)(src[2 * i] | src[2 * i + 1] << 8) << 16);
        break;
    case HY_ST_F64:
        for (size_t i = 0; i < n; i++) {
            uint64_t u = le64(src + 8 * i);
            double d;
            memcpy(&d, &u, sizeof d);
            dst[i] = (float)d;
        }
        break;
    default:
        HY_ASSERT(0);
    }
}

hy_status hy_st_read_f32(const hy_st *st, size_t i, float *out) {
    HY_ASSERT(st->open && i < st->n);
    const hy_st_entry *e = &st->ents[i];
    if (!hy_st_dtype_readable(e->dtype))
        return hy_fail(HY_EINVAL, "safetensors: '%s': '%s' has dtype %s; only F32, F16, BF16 "
                       "and F64 can be read as float32", st->path, e->name,
                       hy_st_dtype_name(e->dtype));
    size_t es = hy_st_dtype_bits(e->dtype) / 8;
    uint64_t off = 8 + st->header_len + e->begin;
    uint64_t left = e->numel;
    if (left == 0) return HY_OK;
    unsigned char *buf = hy_xmalloc(BLOCK_BYTES);
    if (!buf) return HY_ENOMEM;
    hy_status rc = HY_OK;
    while (left > 0) {
        size_t k = BLOCK_BYTES / es;
        if (k > left) k = (size_t)left;
        if (pread_all(st->fd, buf, k * es, off) != 0) {
            rc = hy_fail(HY_EIO, "safetensors: cannot read '%s' from '%s': %s", e->name,
                         st->path, errno == EIO ? "the file is shorter than when it was opened"
                                                : errno_text(errno));
            break;
        }
        convert(e->dtype, buf, out, k);
        out += k;
        off += k * es;
        left -= k;
    }
    hy_free(buf);
    return rc;
}

/* ===== writing ===== */

/* binary32 -> binary16, round to nearest even; overflow gives infinity, NaN the quiet NaN
 * sign | 0x7E00 (what torch's .half() gives). */
static uint16_t f32_to_f16(uint32_t u) {
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u);
    if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);     /* >= 65520 rounds to inf */
    if (a < 0x38800000u) {                                       /* below 2^-14: subnormal */
        if (a < 0x33000000u) return sign;                        /* <= 2^-25 rounds to 0 */
        uint32_t e = a >> 23, m = (a & 0x7FFFFFu) | 0x800000u;
        uint32_t shift = 126 - e;                                /* 14 .. 24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);                             /* q may carry to 0x400 */
    }
    uint32_t r = a - 0x38000000u;                                /* rebias 127 -> 15 */
    uint32_t q = r >> 13, rem = r & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

/* binary32 -> bfloat16, round to nearest even; NaN gives 0xFFFF, what torch 1.13's CPU
 * .bfloat16() gives for every NaN (c10's scalar rule gives 0x7FC0: both are NaNs). */
static uint16_t f32_to_bf16(uint32_t u) {
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0xFFFFu;
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* Appends s as a JSON string the way serde_json writes it: ", \ and the control characters
 * escaped (\b \f \n \r \t, else \u00xx in lowercase hex), everything else (UTF-8) verbatim. */
static hy_status put_json_string(hy_buf *b, const char *s) {
    static const char hex[] = "0123456789abcdef";
    HY_TRY(hy_buf_putc(b, '"'));
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[7];
        size_t n = 0;
        switch (*p) {
        case '"': esc[0] = '\\'; esc[1] = '"'; n = 2; break;
        case '\\': esc[0] = '\\'; esc[1] = '\\'; n = 2; break;
        case '\b': esc[0] = '\\'; esc[1] = 'b'; n = 2; break;
        case '\f': esc[0] = '\\'; esc[1] = 'f'; n = 2; break;
        case '\n': esc[0] = '\\'; esc[1] = 'n'; n = 2; break;
        case '\r': esc[0] = '\\'; esc[1] = 'r'; n = 2; break;
        case '\t': esc[0] = '\\'; esc[1] = 't'; n = 2; break;
        default:
            if (*p < 0x20) {
                memcpy(esc, "\\u00", 4);
                esc[4] = hex[*p >> 4];
                esc[5] = hex[*p & 15];
                n = 6;
            }
        }
        if (n) HY_TRY(hy_buf_put(b, esc, n));
        else HY_TRY(hy_buf_putc(b, (char)*p));
    }
    return hy_buf_putc(b, '"');
}

static hy_status put_u64(hy_buf *b, uint64_t v) {
    char t[24];
    int k = snprintf(t, sizeof t, "%llu", (unsigned long long)v);
    return hy_buf_put(b, t, (size_t)k);
}

static _Thread_local const hy_st_tensor *sort_ts;
static int cmp_tensor(const void *a, const void *b) {
    /* One dtype for every tensor: descending dtype alignment ties, so the order is by name
     * (bytewise, as Rust's String order). */
    return strcmp(sort_ts[*(const size_t *)a].name, sort_ts[*(const size_t *)b].name);
}

static _Thread_local const char *const *sort_mk;
static int cmp_key(const void *a, const void *b) {
    return strcmp(sort_mk[*(const size_t *)a], sort_mk[*(const size_t *)b]);
}

/* Checks one name or key for the writer. */
static hy_status check_name(const char *path, const char *what, const char *s, int tensor) {
    if (!s) return hy_fail(HY_EINVAL, "safetensors: cannot write '%s': a %s is NULL", path, what);
    size_t n = strlen(s);
    if (tensor && n == 0)
        return hy_fail(HY_EINVAL, "safetensors: cannot write '%s': a tensor name is empty", path);
    if (tensor && n > HY_ST_MAX_NAME)
        return hy_fail(HY_EINVAL, "safetensors: cannot write '%s': tensor name '%.40s...' is %zu "
                       "bytes, over the limit of %d", path, s, n, HY_ST_MAX_NAME);
    if (tensor && strcmp(s, "__metadata__") == 0)
        return hy_fail(HY_EINVAL, "safetensors: cannot write '%s': '__metadata__' cannot name a "
                       "tensor", path);
    if (hy_utf8_bad(s, n) != n)
        return hy_fail(HY_EINVAL, "safetensors: cannot write '%s': %s '%s' is not valid UTF-8",
                       path, what, s);
    return HY_OK;
}

/* Builds the padded header of the sorted tensors; *data_len = bytes of the data section. */
static hy_status build_header(hy_buf *b, const char *path, const hy_st_tensor *ts,
                              const size_t *order, size_t n, const char *const *mk,
                              const char *const *mv, const size_t *morder, size_t nm,
                              hy_st_dtype dt, uint64_t *data_len) {
    HY_TRY(hy_buf_putc(b, '{'));
    if (nm > 0) {
        HY_TRY(hy_buf_put(b, "\"__metadata__\":{", 16));
        for (size_t j = 0; j < nm; j++) {
            if (j) HY_TRY(hy_buf_putc(b, ','));
            HY_TRY(put_json_string(b, mk[morder[j]]));
            HY_TRY(hy_buf_putc(b, ':'));
            HY_TRY(put_json_string(b, mv[morder[j]]));
        }
        HY_TRY(hy_buf_putc(b, '}'));
    }
    uint64_t off = 0;
    for (size_t j = 0; j < n; j++) {
        const hy_st_tensor *t = &ts[order[j]];
        uint64_t nel = 1, bytes;
        int ovf = 0;
        for (int d = 0; d < t->ndim; d++) ovf |= mul_u64(nel, (uint64_t)t->shape[d], &nel);
        if (ovf || mul_u64(nel, hy_st_dtype_bits(dt) / 8, &bytes) || bytes > UINT64_MAX - off)
            return hy_fail(HY_EINVAL, "safetensors: cannot write '%s': size of '%s' overflows",
                           path, t->name);
        if (nm > 0 || j > 0) HY_TRY(hy_buf_putc(b, ','));
        HY_TRY(put_json_string(b, t->name));
        HY_TRY(hy_buf_put(b, ":{\"dtype\":\"", 11));
        HY_TRY(hy_buf_put(b, hy_st_dtype_name(dt), strlen(hy_st_dtype_name(dt))));
        HY_TRY(hy_buf_put(b, "\",\"shape\":[", 11));
        for (int d = 0; d < t->ndim; d++) {
            if (d) HY_TRY(hy_buf_putc(b, ','));
            HY_TRY(put_u64(b, (uint64_t)t->shape[d]));
        }
        HY_TRY(hy_buf_put(b, "],\"data_offsets\":[", 18));
        HY_TRY(put_u64(b, off));
        HY_TRY(hy_buf_putc(b, ','));
        HY_TRY(put_u64(b, off + bytes));
        HY_TRY(hy_buf_put(b, "]}", 2));
        off += bytes;
    }
    HY_TRY(hy_buf_putc(b, '}'));
    while (b->len % 8 != 0) HY_TRY(hy_buf_putc(b, ' '));
    if (b->len > HY_ST_MAX_HEADER)
        return hy_fail(HY_EINVAL, "safetensors: cannot write '%s': header of %zu bytes is over "
                       "the limit of %u", path, b->len, HY_ST_MAX_HEADER);
    *data_len = off;
    return HY_OK;
}

/* Writes n bytes of buf to fd; 0, or -1 with errno set. */
static int write_all(int fd, const void *buf, size_t n) {
    const unsigned char *p = buf;
    while (n > 0) {
        size_t k = n < ((size_t)1 << 30) ? n : ((size_t)1 << 30);
        ssize_t w = write(fd, p, k);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        if (w == 0) { errno = EIO; return -1; }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Streams the header and the tensors' little-endian bytes to fd. */
static int write_body(int fd, const hy_buf *hdr, const hy_st_tensor *ts, const size_t *order,
                      size_t n, hy_st_dtype dt, unsigned char *blk) {
    unsigned char nb[8];
    uint64_t len = hdr->len;
    for (int i = 0; i < 8; i++) nb[i] = (unsigned char)(len >> (8 * i));
    if (write_all(fd, nb, 8) != 0 || write_all(fd, hdr->data, hdr->len) != 0) return -1;
    for (size_t j = 0; j < n; j++) {
        const hy_st_tensor *t = &ts[order[j]];
        size_t nel = 1;
        for (int d = 0; d < t->ndim; d++) nel *= (size_t)t->shape[d];
        const float *src = t->data;
        size_t es = hy_st_dtype_bits(dt) / 8;
        while (nel > 0) {
            size_t k = nel < BLOCK_BYTES / 4 ? nel : BLOCK_BYTES / 4;
            for (size_t i = 0; i < k; i++) {
                uint32_t u;
                memcpy(&u, &src[i], 4);
                if (dt == HY_ST_F32) {
                    blk[4 * i] = (unsigned char)u;
                    blk[4 * i + 1] = (unsigned char)(u >> 8);
                    blk[4 * i + 2] = (unsigned char)(u >> 16);
                    blk[4 * i + 3] = (unsigned char)(u >> 24);
                } else {
                    uint16_t h = dt == HY_ST_F16 ? f32_to_f16(u) : f32_to_bf16(u);
                    blk[2 * i] = (unsigned char)h;
                    blk[2 * i + 1] = (unsigned char)(h >> 8);
                }
            }
            if (write_all(fd, blk, es * k) != 0) return -1;
            src += k;
            nel -= k;
        }
    }
    return 0;
}

static atomic_uint tmp_counter;

hy_status hy_st_write(const char *path, const hy_st_tensor *ts, size_t n,
                      const char *const *meta_keys, const char *const *meta_values,
                      size_t n_meta) {
    return hy_st_write_as(path, ts, n, meta_keys, meta_values, n_meta, HY_ST_F32);
}

hy_status hy_st_write_as(const char *path, const hy_st_tensor *ts, size_t n,
                         const char *const *meta_keys, const char *const *meta_values,
                         size_t n_meta, hy_st_dtype dt) {
    if (!path || !*path) return hy_fail(HY_EINVAL, "safetensors: empty file name");
    if (dt != HY_ST_F32 && dt != HY_ST_F16 && dt != HY_ST_BF16)
        return hy_fail(HY_EINVAL, "safetensors: cannot write '%s' as %s: only F32, F16 and BF16 "
                       "are written", path, hy_st_dtype_name(dt));
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base) return hy_fail(HY_EINVAL, "safetensors: cannot write '%s': not a file name", path);
    hy_status rc = HY_OK;
    size_t *order = NULL, *morder = NULL;
    char *tmp = NULL, *dir = NULL;
    unsigned char *blk = NULL;
    hy_buf hdr = {0};
    int fd = -1;
    /* 1. check names, shapes and data; sort tensors and metadata keys */
    for (size_t i = 0; i < n; i++) {
        const hy_st_tensor *t = &ts[i];
        HY_TRY(check_name(path, "tensor name", t->name, 1));
        if (t->ndim < 0 || t->ndim > HY_ST_MAX_RANK)
            return hy_fail(HY_EINVAL, "safetensors: cannot write '%s': '%s' has rank %d, expected "
                           "0 to %d", path, t->name, t->ndim, HY_ST_MAX_RANK);
        size_t nel = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0 || t->shape[d] > HY_ST_MAX_DIM)
                return hy_fail(HY_EINVAL, "safetensors: cannot write '%s': dimension %d of '%s' "
                               "is %lld, expected 0 to 2^40", path, d + 1, t->name,
                               (long long)t->shape[d]);
            nel *= (size_t)t->shape[d];
        }
        if (nel > 0 && !t->data)
            return hy_fail(HY_EINVAL, "safetensors: cannot write '%s': '%s' has no data", path,
                           t->name);
    }
    for (size_t i = 0; i < n_meta; i++) {
        HY_TRY(check_name(path, "metadata key", meta_keys[i], 0));
        HY_TRY(check_name(path, "metadata value", meta_values[i], 0));
    }
    order = hy_xmalloc((n ? n : 1) * sizeof *order);
    morder = hy_xmalloc((n_meta ? n_meta : 1) * sizeof *morder);
    blk = hy_xmalloc(BLOCK_BYTES);
    if (!order || !morder || !blk) { rc = HY_ENOMEM; goto done; }
    for (size_t i = 0; i < n; i++) order[i] = i;
    sort_ts = ts;
    qsort(order, n, sizeof *order, cmp_tensor);
    sort_ts = NULL;
    for (size_t i = 1; i < n; i++)
        if (strcmp(ts[order[i]].name, ts[order[i - 1]].name) == 0) {
            rc = hy_fail(HY_EINVAL, "safetensors: cannot write '%s': tensor name '%s' appears "
                         "twice", path, ts[order[i]].name);
            goto done;
        }
    for (size_t i = 0; i < n_meta; i++) morder[i] = i;
    sort_mk = meta_keys;
    qsort(morder, n_meta, sizeof *morder, cmp_key);
    sort_mk = NULL;
    for (size_t i = 1; i < n_meta; i++)
        if (strcmp(meta_keys[morder[i]], meta_keys[morder[i - 1]]) == 0) {
            rc = hy_fail(HY_EINVAL, "safetensors: cannot write '%s': metadata key '%s' appears "
                         "twice", path, meta_keys[morder[i]]);
            goto done;
        }
    /* 2. the header */
    uint64_t data_len = 0;
    if ((rc = build_header(&hdr, path, ts, order, n, meta_keys, meta_values, morder, n_meta,
                           dt, &data_len)) != HY_OK)
        goto done;
    /* 3. a temporary file beside path, written, synced, renamed */
    size_t plen = strlen(path), dlen = slash ? (size_t)(slash - path) : 0;
    tmp = hy_xmalloc(plen + 64);
    dir = hy_xmalloc(dlen + 2);
    if (!tmp || !dir) { rc = HY_ENOMEM; goto done; }
    if (slash) {
        memcpy(dir, path, dlen ? dlen : 1);
        dir[dlen ? dlen : 1] = '\0';
    } else {
        strcpy(dir, ".");
    }
    snprintf(tmp, plen + 64, "%.*s.%s.tmp-%ld-%u", (int)(base - path), path, base,
             (long)getpid(), atomic_fetch_add(&tmp_counter, 1u));
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        rc = hy_fail(HY_EIO, "safetensors: cannot write '%s': it is a folder", path);
        goto done;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR)
            rc = hy_fail(HY_EIO, "safetensors: cannot write '%s': folder '%s' does not exist",
                         path, dir);
        else
            rc = hy_fail(HY_EIO, "safetensors: cannot write '%s': %s", path, errno_text(e));
        goto done;
    }
    if (write_body(fd, &hdr, ts, order, n, dt, blk) != 0 || fsync(fd) != 0) {
        rc = hy_fail(HY_EIO, "safetensors: cannot write '%s': %s", path, errno_text(errno));
        close(fd);
        fd = -1;
        unlink(tmp);
        goto done;
    }
    int cr = close(fd);
    fd = -1;
    if (cr != 0) {
        rc = hy_fail(HY_EIO, "safetensors: cannot write '%s': %s", path, errno_text(errno));
        unlink(tmp);
        goto done;
    }
    if (rename(tmp, path) != 0) {
        rc = hy_fail(HY_EIO, "safetensors: cannot rename '%s' to '%s': %s", tmp, path,
                     errno_text(errno));
        unlink(tmp);
        goto done;
    }
    /* Make the rename durable; best effort (some filesystems refuse fsync on folders). */
    int dfd = open(dir, O_RDONLY | O_CLOEXEC);
    if (dfd >= 0) { (void)fsync(dfd); close(dfd); }
done:
    if (rc == HY_ENOMEM) hy_fail_prefix(rc, "safetensors: cannot write '%s'", path);
    hy_buf_release(&hdr);
    hy_free(order);
    hy_free(morder);
    hy_free(blk);
    hy_free(tmp);
    hy_free(dir);
    return rc;
}
