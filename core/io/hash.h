/* hash.h: SHA-256 (FIPS 180-4) and MD5 (RFC 1321), streaming, plus whole-file helpers used to
 * verify dataset inputs. Digests are raw bytes; hy_hash_hex turns them into lowercase hex.
 * The streaming functions never fail; the file helpers fail with HY_EIO naming the file. */
#ifndef HY_HASH_H
#define HY_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/base.h"

typedef struct hy_sha256 {
    uint32_t h[8];
    uint64_t len;          /* bytes hashed so far */
    uint8_t buf[64];
    size_t nbuf;
} hy_sha256;

typedef struct hy_md5 {
    uint32_t h[4];
    uint64_t len;
    uint8_t buf[64];
    size_t nbuf;
} hy_md5;

void hy_sha256_init(hy_sha256 *c);
void hy_sha256_update(hy_sha256 *c, const void *data, size_t n);
/* Writes the 32-byte digest; c must be re-initialised before reuse. */
void hy_sha256_final(hy_sha256 *c, uint8_t out[32]);

void hy_md5_init(hy_md5 *c);
void hy_md5_update(hy_md5 *c, const void *data, size_t n);
void hy_md5_final(hy_md5 *c, uint8_t out[16]);

/* Lowercase hex of n bytes into out (2n + 1 chars, NUL-terminated). */
void hy_hash_hex(const uint8_t *digest, size_t n, char *out);

typedef enum { HY_HASH_SHA256 = 0, HY_HASH_MD5 } hy_hash_algo;

/* Hex digest of a file's bytes (out: 65 chars for SHA-256, 33 for MD5).
 * gunzip != 0 hashes the decompressed content instead (zlib; a file that is not gzip is read
 * as is). Fails with HY_EIO ("hash: cannot open 'path': reason", "hash: read error in 'path'"). */
hy_status hy_hash_file(const char *path, hy_hash_algo algo, int gunzip, char *out);
/* Hex digest of `prefix` (nprefix bytes) followed by the file's bytes from offset `skip` on
 * (no decompression). Used to check a re-packed file against its original: e.g. a gzip file whose
 * header was normalised, hashed with the original header restored. Fails like hy_hash_file, and
 * with HY_EIO when the file is shorter than skip. */
hy_status hy_hash_file_spliced(const char *path, hy_hash_algo algo, const void *prefix,
                               size_t nprefix, size_t skip, char *out);

#endif
