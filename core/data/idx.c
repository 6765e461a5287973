/* idx.c: idx reader/writer through zlib's gz* API (which reads plain files transparently). */
#include "data/idx.h"

#include <errno.h>
#include <string.h>
#include <zlib.h>

static int type_of(unsigned code, hy_dtype *dt) {
    switch (code) {
    case 0x08: *dt = HY_U8; return 1;
    case 0x09: *dt = HY_I8; return 1;
    case 0x0B: *dt = HY_I16; return 1;
    case 0x0C: *dt = HY_I32; return 1;
    case 0x0D: *dt = HY_F32; return 1;
    case 0x0E: *dt = HY_F64; return 1;
    default: return 0;
    }
}

static int code_of(hy_dtype dt) {
    switch (dt) {
    case HY_U8: return 0x08;
    case HY_I8: return 0x09;
    case HY_I16: return 0x0B;
    case HY_I32: return 0x0C;
    case HY_F32: return 0x0D;
    case HY_F64: return 0x0E;
    default: return 0;
    }
}

/* Reads up to n bytes; returns bytes read, or -1 on a zlib error (message recorded). */
static int64_t gz_read_full(gzFile gz, void *buf, size_t n, const char *path, uint64_t at) {
    size_t got = 0;
    while (got < n) {
        size_t want = n - got > (1u << 30) ? (1u << 30) : n - got;
        int r = gzread(gz, (char *)buf + got, (unsigned)want);
        if (r < 0) {
            int code;
            hy_fail(HY_EIO, "idx: '%s': corrupt gzip data at byte %llu (%s)", path,
                    (unsigned long long)(at + got), gzerror(gz, &code));
            return -1;
        }
        if (r == 0) {
            int code;
            const char *m = gzerror(gz, &code);
            if (code != Z_OK && code != Z_BUF_ERROR) {
                hy_fail(HY_EIO, "idx: '%s': corrupt gzip data at byte %llu (%s)", path,
                        (unsigned long long)(at + got), m);
                return -1;
            }
            break;
        }
        got += (size_t)r;
    }
    return (int64_t)got;
}

static void swap_bytes(uint8_t *p, size_t count, size_t width) {
    if (width == 1) return;
    for (size_t i = 0; i < count; i++, p += width)
        for (size_t a = 0, b = width - 1; a < b; a++, b--) {
            uint8_t t = p[a]; p[a] = p[b]; p[b] = t;
        }
}

/* Bodies up to this size are read straight into the tensor; larger ones grow with the data. */
#define DIRECT_BYTES ((uint64_t)64 << 20)

static int host_is_little(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

hy_status hy_idx_read(const char *path, hy_tensor *out) {
    hy_status st = HY_OK;
    memset(out, 0, sizeof *out);
    gzFile gz = gzopen(path, "rb");
    if (!gz) return hy_fail(HY_EIO, "idx: cannot open '%s': %s", path, strerror(errno));
    uint8_t magic[4];
    int64_t n = gz_read_full(gz, magic, 4, path, 0);
    if (n < 0) { st = HY_EIO; goto done; }
    if (n < 4) { st = hy_fail(HY_EIO, "idx: '%s': truncated at byte %lld (header needs 4 bytes)", path, (long long)n); goto done; }
    if (magic[0] != 0 || magic[1] != 0) {
        st = hy_fail(HY_EIO, "idx: '%s': bad magic at byte 0 (expected 00 00 TYPE NDIM, got "
                     "%02x %02x %02x %02x)", path, magic[0], magic[1], magic[2], magic[3]);
        goto done;
    }
    hy_dtype dt;
    if (!type_of(magic[2], &dt)) {
        st = hy_fail(HY_EIO, "idx: '%s': unknown element type 0x%02x at byte 2", path, magic[2]);
        goto done;
    }
    int nd = magic[3];
    if (nd < 1 || nd > HY_MAXDIM) {
        st = hy_fail(HY_EIO, "idx: '%s': bad number of dimensions %d at byte 3 (expected 1 to %d)",
                     path, nd, HY_MAXDIM);
        goto done;
    }
    uint8_t dimb[4 * HY_MAXDIM];
    n = gz_read_full(gz, dimb, (size_t)(4 * nd), path, 4);
    if (n < 0) { st = HY_EIO; goto done; }
    if (n < 4 * nd) {
        st = hy_fail(HY_EIO, "idx: '%s': truncated at byte %lld (header needs %d bytes)", path,
                     (long long)(4 + n), 4 + 4 * nd);
        goto done;
    }
    int64_t shape[HY_MAXDIM];
    uint64_t total = hy_dtype_size(dt);
    for (int i = 0; i < nd; i++) {
        const uint8_t *b = dimb + 4 * i;
        uint32_t d = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
        if (d == 0) {
            st = hy_fail(HY_EIO, "idx: '%s': dimension %d is 0 at byte %d", path, i + 1, 4 + 4 * i);
            goto done;
        }
        shape[i] = (int64_t)d;
        if (total > ((uint64_t)1 << 40) / d) {
            st = hy_fail(HY_EIO, "idx: '%s': data too large at byte %d (over 2^40 bytes)", path,
                         4 + 4 * i);
            goto done;
        }
        total *= d;
    }
    uint64_t hdr = 4 + 4 * (uint64_t)nd;
    if (total <= DIRECT_BYTES) {
        st = hy_tensor_alloc(out, dt, nd, shape);
        if (st != HY_OK) goto done;
        n = gz_read_full(gz, out->data, (size_t)total, path, hdr);
    } else {
        /* The header's size is only a claim: a short or hostile file (12 bytes saying 6 GB)
         * must not make us allocate it. Larger bodies are read into a buffer that grows with
         * the data, then copied. */
        size_t cap = DIRECT_BYTES, got = 0;
        uint8_t *buf = hy_xmalloc(cap);
        if (!buf) { st = HY_ENOMEM; goto done; }
        for (;;) {
            n = gz_read_full(gz, buf + got, cap - got, path, hdr + got);
            if (n < 0) break;
            got += (size_t)n;
            if (got < cap || got == total) break;
            size_t ncap = (uint64_t)cap * 2 > total ? (size_t)total : cap * 2;
            uint8_t *nb = hy_xrealloc(buf, ncap);
            if (!nb) { hy_free(buf); st = HY_ENOMEM; goto done; }
            buf = nb;
            cap = ncap;
        }
        if (n >= 0 && got == total) {
            st = hy_tensor_alloc(out, dt, nd, shape);
            if (st == HY_OK) memcpy(out->data, buf, got);
        }
        hy_free(buf);
        if (st != HY_OK) goto done;
        if (n >= 0) n = (int64_t)got;
    }
    if (n < 0) { st = HY_EIO; goto done; }
    if ((uint64_t)n < total) {
        st = hy_fail(HY_EIO, "idx: '%s': truncated at byte %llu (header says %llu bytes)", path,
                     (unsigned long long)(hdr + (uint64_t)n), (unsigned long long)(hdr + total));
        goto done;
    }
    uint8_t extra;
    n = gz_read_full(gz, &extra, 1, path, hdr + total);
    if (n < 0) { st = HY_EIO; goto done; }
    if (n > 0) {
        st = hy_fail(HY_EIO, "idx: '%s': trailing data after byte %llu (header says %llu bytes)",
                     path, (unsigned long long)(hdr + total), (unsigned long long)(hdr + total));
        goto done;
    }
    if (host_is_little()) swap_bytes(out->data, hy_tensor_numel(out), hy_dtype_size(dt));
done:
    gzclose(gz);
    if (st != HY_OK) hy_tensor_release(out);
    return st;
}

hy_status hy_idx_write(const char *path, const hy_tensor *t, int gz) {
    int code = code_of(t->dtype);
    if (!code) return hy_fail(HY_EINVAL, "idx: cannot write dtype %s to '%s'", hy_dtype_name(t->dtype), path);
    if (t->ndim < 1) return hy_fail(HY_EINVAL, "idx: cannot write a scalar to '%s'", path);
    hy_status st = HY_OK;
    size_t w = hy_dtype_size(t->dtype), count = hy_tensor_numel(t);
    uint8_t *copy = hy_xmalloc(count * w + 1);
    if (!copy) return HY_ENOMEM;
    memcpy(copy, t->data, count * w);
    if (host_is_little()) swap_bytes(copy, count, w);
    gzFile f = gzopen(path, gz ? "wb6" : "wbT");
    if (!f) { hy_free(copy); return hy_fail(HY_EIO, "idx: cannot create '%s': %s", path, strerror(errno)); }
    uint8_t hdr[4 + 4 * HY_MAXDIM] = {0, 0, (uint8_t)code, (uint8_t)t->ndim};
    for (int i = 0; i < t->ndim; i++) {
        uint32_t d = (uint32_t)t->shape[i];
        hdr[4 + 4 * i] = (uint8_t)(d >> 24); hdr[5 + 4 * i] = (uint8_t)(d >> 16);
        hdr[6 + 4 * i] = (uint8_t)(d >> 8); hdr[7 + 4 * i] = (uint8_t)d;
    }
    unsigned hn = (unsigned)(4 + 4 * t->ndim);
    if (gzwrite(f, hdr, hn) != (int)hn) st = hy_fail(HY_EIO, "idx: write error in '%s'", path);
    for (size_t off = 0; st == HY_OK && off < count * w;) {
        size_t k = count * w - off > (1u << 30) ? (1u << 30) : count * w - off;
        if (gzwrite(f, copy + off, (unsigned)k) != (int)k) st = hy_fail(HY_EIO, "idx: write error in '%s'", path);
        off += k;
    }
    if (gzclose(f) != Z_OK && st == HY_OK) st = hy_fail(HY_EIO, "idx: write error in '%s'", path);
    hy_free(copy);
    return st;
}
