/* hash.c: SHA-256 and MD5, straight from FIPS 180-4 and RFC 1321 (byte-oriented, portable:
 * words are assembled explicitly, so host endianness never matters). */
#include "io/hash.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

/* ===== SHA-256 ===== */

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static uint32_t ror32(uint32_t x, unsigned n) { return (x >> n) | (x << (32u - n)); }

/* The 64-byte block buffering shared by SHA-256 and MD5: completes the partial block in buf
 * (nbuf bytes), runs `block` over every full block of data and keeps the tail in buf; returns
 * the new nbuf. */
static size_t feed(uint32_t *h, uint8_t buf[64], size_t nbuf, const void *data, size_t n,
                   void (*block)(uint32_t *h, const uint8_t *p)) {
    const uint8_t *p = data;
    if (nbuf > 0) {
        size_t take = 64 - nbuf < n ? 64 - nbuf : n;
        memcpy(buf + nbuf, p, take);
        nbuf += take; p += take; n -= take;
        if (nbuf < 64) return nbuf;
        block(h, buf);
    }
    for (; n >= 64; p += 64, n -= 64) block(h, p);
    memcpy(buf, p, n);
    return n;
}

static void sha256_block(uint32_t *h, const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t S1 = ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = k + S1 + ch + K256[i] + w[i];
        uint32_t S0 = ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22);
        uint32_t mj = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = S0 + mj;
        k = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += k;
}

void hy_sha256_init(hy_sha256 *c) {
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, h0, sizeof h0);
    c->len = 0;
    c->nbuf = 0;
}

void hy_sha256_update(hy_sha256 *c, const void *data, size_t n) {
    c->len += n;
    c->nbuf = feed(c->h, c->buf, c->nbuf, data, n, sha256_block);
}

/* The end shared by SHA-256 (big: big-endian) and MD5 (little-endian) after len bytes, nbuf of
 * them still in buf: 0x80, zeros to 56 mod 64 and the bit length in 8 bytes run through
 * `block`, then the nw state words written as the digest in the same byte order. Returns the
 * new nbuf (0). */
static size_t finish(uint32_t *h, size_t nw, uint8_t buf[64], size_t nbuf, uint64_t len, int big,
                     void (*block)(uint32_t *h, const uint8_t *p), uint8_t *out) {
    uint64_t bits = len * 8u;
    uint8_t pad[72] = {0x80};
    size_t padn = (nbuf < 56 ? 56 : 120) - nbuf;
    for (int i = 0; i < 8; i++)
        pad[padn + (size_t)i] = (uint8_t)(bits >> (big ? 56 - 8 * i : 8 * i));
    nbuf = feed(h, buf, nbuf, pad, padn + 8, block);
    for (size_t i = 0; i < nw; i++)
        for (int k = 0; k < 4; k++)
            out[4 * i + (size_t)k] = (uint8_t)(h[i] >> (big ? 24 - 8 * k : 8 * k));
    return nbuf;
}

void hy_sha256_final(hy_sha256 *c, uint8_t out[32]) {
    c->nbuf = finish(c->h, 8, c->buf, c->nbuf, c->len, 1, sha256_block, out);
}

/* ===== MD5 ===== */

static const uint32_t KMD5[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613,
    0xfd469501, 0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193,
    0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d,
    0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed,
    0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122,
    0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa,
    0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244,
    0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb,
    0xeb86d391};
static const unsigned RMD5[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                                  5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
                                  4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                                  6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};

static uint32_t rol32(uint32_t x, unsigned n) { return (x << n) | (x >> (32u - n)); }

static void md5_block(uint32_t *h, const uint8_t *p) {
    uint32_t m[16];
    for (int i = 0; i < 16; i++)
        m[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
               (uint32_t)p[4 * i + 3] << 24;
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    for (unsigned i = 0; i < 64; i++) {
        uint32_t f;
        unsigned g;
        if (i < 16) { f = (b & c) | (~b & d); g = i; }
        else if (i < 32) { f = (d & b) | (~d & c); g = (5 * i + 1) % 16; }
        else if (i < 48) { f = b ^ c ^ d; g = (3 * i + 5) % 16; }
        else { f = c ^ (b | ~d); g = (7 * i) % 16; }
        uint32_t t = d;
        d = c; c = b;
        b = b + rol32(a + f + KMD5[i] + m[g], RMD5[i]);
        a = t;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d;
}

void hy_md5_init(hy_md5 *c) {
    c->h[0] = 0x67452301; c->h[1] = 0xefcdab89; c->h[2] = 0x98badcfe; c->h[3] = 0x10325476;
    c->len = 0;
    c->nbuf = 0;
}

void hy_md5_update(hy_md5 *c, const void *data, size_t n) {
    c->len += n;
    c->nbuf = feed(c->h, c->buf, c->nbuf, data, n, md5_block);
}

void hy_md5_final(hy_md5 *c, uint8_t out[16]) {
    c->nbuf = finish(c->h, 4, c->buf, c->nbuf, c->len, 0, md5_block, out);
}

void hy_hash_hex(const uint8_t *digest, size_t n, char *out) {
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[digest[i] >> 4];
        out[2 * i + 1] = hex[digest[i] & 15];
    }
    out[2 * n] = '\0';
}

/* ===== files ===== */

/* the hash of algo over a file's bytes */
typedef struct either {
    hy_hash_algo algo;
    hy_sha256 sc;
    hy_md5 mc;
} either;

static void either_init(either *e, hy_hash_algo algo) {
    e->algo = algo;
    hy_sha256_init(&e->sc);
    hy_md5_init(&e->mc);
}

static void either_update(either *e, const void *data, size_t n) {
    if (e->algo == HY_HASH_SHA256) hy_sha256_update(&e->sc, data, n);
    else hy_md5_update(&e->mc, data, n);
}

static void either_hex(either *e, char *out) {
    uint8_t d[32];
    if (e->algo == HY_HASH_SHA256) { hy_sha256_final(&e->sc, d); hy_hash_hex(d, 32, out); }
    else { hy_md5_final(&e->mc, d); hy_hash_hex(d, 16, out); }
}

hy_status hy_hash_file(const char *path, hy_hash_algo algo, int gunzip, char *out) {
    enum { CHUNK = 1 << 16 };
    hy_status st = HY_OK;
    either h;
    FILE *f = NULL;
    gzFile gz = NULL;
    uint8_t *buf = hy_xmalloc(CHUNK);
    if (!buf) return HY_ENOMEM;
    either_init(&h, algo);
    if (gunzip) {
        gz = gzopen(path, "rb");
        if (!gz) { st = hy_fail(HY_EIO, "hash: cannot open '%s': %s", path, strerror(errno)); goto done; }
    } else {
        f = fopen(path, "rb");
        if (!f) { st = hy_fail(HY_EIO, "hash: cannot open '%s': %s", path, strerror(errno)); goto done; }
    }
    for (;;) {
        size_t n;
        if (gz) {
            int r = gzread(gz, buf, CHUNK);
            if (r < 0) {
                int code;
                st = hy_fail(HY_EIO, "hash: corrupt gzip data in '%s' (%s)", path, gzerror(gz, &code));
                goto done;
            }
            n = (size_t)r;
        } else {
            n = fread(buf, 1, CHUNK, f);
            if (n == 0 && ferror(f)) { st = hy_fail(HY_EIO, "hash: read error in '%s'", path); goto done; }
        }
        if (n == 0) break;
        either_update(&h, buf, n);
    }
    either_hex(&h, out);
done:
    if (gz) gzclose(gz);
    if (f) fclose(f);
    hy_free(buf);
    return st;
}

hy_status hy_hash_file_spliced(const char *path, hy_hash_algo algo, const void *prefix,
                               size_t nprefix, size_t skip, char *out) {
    enum { CHUNK = 1 << 16 };
    hy_status st = HY_OK;
    either h;
    uint8_t *buf = hy_xmalloc(CHUNK);
    if (!buf) return HY_ENOMEM;
    FILE *f = fopen(path, "rb");
    if (!f) { st = hy_fail(HY_EIO, "hash: cannot open '%s': %s", path, strerror(errno)); goto done; }
    either_init(&h, algo);
    either_update(&h, prefix, nprefix);
    for (size_t left = skip; left > 0;) {
        size_t n = fread(buf, 1, left < CHUNK ? left : CHUNK, f);
        if (n == 0) {
            st = hy_fail(HY_EIO, "hash: '%s' is shorter than %zu bytes", path, skip);
            goto done;
        }
        left -= n;
    }
    for (;;) {
        size_t n = fread(buf, 1, CHUNK, f);
        if (n == 0 && ferror(f)) { st = hy_fail(HY_EIO, "hash: read error in '%s'", path); goto done; }
        if (n == 0) break;
        either_update(&h, buf, n);
    }
    either_hex(&h, out);
done:
    if (f) fclose(f);
    hy_free(buf);
    return st;
}
