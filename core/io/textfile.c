/* textfile.c: whole files, UTF-8 validation and JSON value kinds (contracts in textfile.h). */
#include "io/textfile.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

hy_status hy_file_read(hy_buf *b, const char *path, const char *who) {
    FILE *f = fopen(path, "rb");
    if (!f) return hy_fail(HY_EIO, "%s: cannot open '%s': %s", who, path, strerror(errno));
    char chunk[65536];
    size_t got;
    hy_status st = HY_OK;
    while (st == HY_OK && (got = fread(chunk, 1, sizeof chunk, f)) > 0)
        st = hy_buf_put(b, chunk, got);
    if (st == HY_OK && ferror(f)) st = hy_fail(HY_EIO, "%s: cannot read '%s'", who, path);
    fclose(f);
    return st;
}

size_t hy_utf8_bad(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    uint32_t cp;
    for (size_t i = 0; i < n;) {
        size_t k = hy_utf8_next(u, n, i, &cp);
        if (!k) return i;
        i += k;
    }
    return n;
}

const char *hy_json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a float";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "null";
}
