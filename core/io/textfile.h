/* textfile.h: the bytes of text files, for every reader of a text format (safetensors headers,
 * tables, WordPiece vocabularies): a whole file into an hy_buf, strict UTF-8 (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF), and what a JSON value is, for
 * messages. */
#ifndef HY_TEXTFILE_H
#define HY_TEXTFILE_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/base.h"

/* Appends the whole file at path to b (a NUL follows its bytes, as after every hy_buf_put).
 * Fails with "<who>: cannot open 'x.csv': <reason>", "<who>: cannot read 'x.csv'" (HY_EIO) or
 * out of memory; b then holds what was read so far (the caller releases it). */
hy_status hy_file_read(hy_buf *b, const char *path, const char *who);

/* The code point of the UTF-8 sequence at s[i] (i < n) into *cp and its length in bytes (1-4),
 * or 0 when no valid sequence starts there (an invalid or cut-off one: *cp is then unchanged).
 * Inline: tokenizers decode every character with it. */
static inline size_t hy_utf8_next(const unsigned char *s, size_t n, size_t i, uint32_t *cp) {
    unsigned c = s[i];
    if (c < 0x80) { *cp = c; return 1; }
    size_t k;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) { k = 2; v = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { k = 3; v = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { k = 4; v = c & 0x07; min = 0x10000; }
    else return 0;
    if (n - i < k) return 0;
    for (size_t j = 1; j < k; j++) {
        if ((s[i + j] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i + j] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return k;
}

/* The offset of the first byte of s[0..n) at which no valid UTF-8 sequence starts, or n when
 * s[0..n) is all valid UTF-8 (a NUL byte is valid: callers that refuse it say so). */
size_t hy_utf8_bad(const char *s, size_t n);

/* What a JSON value (libjansson's json_t) is, for messages: "an object", "an array",
 * "a string", "an integer", "a float", "a boolean" or "null". */
struct json_t;
const char *hy_json_kind(const struct json_t *v);

#endif
