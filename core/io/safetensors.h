/* safetensors.h: reader and writer of the safetensors format (huggingface/safetensors).
 *   read:  hy_st_open -> hy_st_count / hy_st_name / hy_st_dtype_of / hy_st_shape / hy_st_find /
 *          hy_st_meta_* / hy_st_read_f32 -> hy_st_close
 *   write: hy_st_write / hy_st_write_as (float32 data stored as F32, F16 or BF16; atomic:
 *          temporary file + rename)
 * A file is 8 bytes N (u64 little-endian), N bytes of UTF-8 JSON
 *   {"__metadata__": {"k": "v", ...}, "NAME": {"dtype": "F32", "shape": [d0, ...],
 *    "data_offsets": [BEGIN, END]}, ...}
 * and then the byte buffer: tensors row-major, little-endian, offsets relative to byte 8 + N.
 * hy_st_open refuses every file the reference reader (safetensors/src/tensor.rs) refuses, and
 * more (duplicate keys, rank > 8, a dimension > 2^40, names empty or over 1024 bytes, a NUL in a
 * string, JSON shapes no header has: see Memory), each with its own one-line message
 * "safetensors: '<file>': ..." naming the tensor. Unknown fields of an entry are ignored, as
 * the reference does. A header may have JSON whitespace before and after the object.
 * Memory: no allocation is sized from a declared length. open allocates the N header bytes only
 * after checking that they are in the file; jansson's tree of them is at most ~25 bytes per
 * header byte (a valid header: ~10-13; JSON shapes that would cost more, such as objects in
 * arrays, are refused before parsing; test_safetensors holds it to 32 x N + 64 KiB), and the
 * entry table ~120 bytes per tensor. The data section is never read at open; hy_st_read_f32
 * writes into the caller's buffer through a 64 KiB scratch block. */
#ifndef HY_SAFETENSORS_H
#define HY_SAFETENSORS_H

#include "tensor/base.h"

/* Header limits: the reference's MAX_HEADER_SIZE, and hydra's own bounds. */
#define HY_ST_MAX_HEADER 100000000u
#define HY_ST_MAX_RANK 8
#define HY_ST_MAX_NAME 1024
#define HY_ST_MAX_DIM ((int64_t)1 << 40)

/* The reference's dtypes, in its order ("increasing alignment"): the writer sorts by it.
 * Every one parses; hy_st_read_f32 reads F32, F16, BF16 and F64 and refuses the others by
 * name. A dtype name outside this list makes hy_st_open fail. */
typedef enum {
    HY_ST_BOOL = 0, HY_ST_F4, HY_ST_F6_E2M3, HY_ST_F6_E3M2, HY_ST_U8, HY_ST_I8, HY_ST_F8_E5M2,
    HY_ST_F8_E4M3, HY_ST_F8_E8M0, HY_ST_F8_E4M3FNUZ, HY_ST_F8_E5M2FNUZ, HY_ST_I16, HY_ST_U16,
    HY_ST_F16, HY_ST_BF16, HY_ST_I32, HY_ST_U32, HY_ST_F32, HY_ST_C64, HY_ST_F64, HY_ST_I64,
    HY_ST_U64, HY_ST_NDTYPES
} hy_st_dtype;

/* "F32", "BF16", ... (the file's spelling); "?" for a value out of range. */
const char *hy_st_dtype_name(hy_st_dtype dt);
/* Bits per element (4 for F4, 6 for F6_*, else 8 x bytes); 0 for a value out of range. */
size_t hy_st_dtype_bits(hy_st_dtype dt);
/* 1 for the dtypes hy_st_read_f32 converts (F32, F16, BF16, F64), else 0. */
int hy_st_dtype_readable(hy_st_dtype dt);

/* One tensor of an open file. */
typedef struct hy_st_entry {
    char *name;                        /* owned; valid UTF-8, 1..HY_ST_MAX_NAME bytes, no NUL */
    hy_st_dtype dtype;
    int ndim;                          /* 0 (a scalar) .. HY_ST_MAX_RANK */
    int64_t shape[HY_ST_MAX_RANK];     /* each in [0, HY_ST_MAX_DIM] */
    uint64_t numel;                    /* product of shape (1 for ndim 0) */
    uint64_t begin, end;               /* data_offsets: relative to the byte buffer */
} hy_st_entry;

/* An open file. Zero it (or hy_st_close it) before reuse; hy_st_close is idempotent. */
typedef struct hy_st {
    char *path;                        /* as given (owned; used in messages) */
    int fd;                            /* valid when open != 0 */
    int open;
    uint64_t file_size;                /* bytes of the file when opened */
    uint64_t header_len;               /* N */
    hy_st_entry *ents;                 /* n entries in file order: sorted by (begin, end, name) */
    size_t n;
    size_t *by_name;                   /* indices into ents sorted by name (for hy_st_find) */
    char **meta_keys, **meta_values;   /* __metadata__, n_meta pairs sorted by key (owned) */
    size_t n_meta;
} hy_st;

/* ===== reading ===== */

/* Opens path and reads and validates its whole header (the data section is not read).
 * st is overwritten (zeroed on failure). Fails (HY_EIO for I/O, HY_EINVAL for a bad file):
 *   "safetensors: cannot open 'x.safetensors': no such file"
 *   "safetensors: 'x.safetensors': file is 5 bytes, shorter than the 8-byte header length"
 *   "safetensors: 'x.safetensors': header length 100000001 is over the limit of 100000000 bytes"
 *   "safetensors: 'x.safetensors': header length 300 runs past the end of the file (108 bytes)"
 *   "safetensors: 'x.safetensors': header is not valid UTF-8 (byte 17 of the header)"
 *   "safetensors: 'x.safetensors': header has a JSON object inside an array (byte 6 of the
 *    header); safetensors arrays hold integers" (and the other shapes check_nesting refuses)
 *   "safetensors: 'x.safetensors': header is not valid JSON: <jansson's text> (byte 12 of the
 *    header)"
 *   "safetensors: 'x.safetensors': duplicate key "w" in the header (byte 70 of the header)"
 *   "safetensors: 'x.safetensors': __metadata__ value of 'format' must be a string (got an
 *    integer)"
 *   "safetensors: 'x.safetensors': 'w' has unknown dtype 'F128'"
 *   "safetensors: 'x.safetensors': data_offsets of 'b' overlap the previous tensor ('a', ends
 *    at 768)" (also: leave a gap after, do not start at 0, end before they begin)
 *   "safetensors: 'x.safetensors': 'w' has 48 bytes (data_offsets [0, 48]) but shape [4,4] of
 *    F32 needs 64"
 *   "safetensors: 'x.safetensors': 8 trailing bytes after the last tensor (data ends at byte
 *    108, the file has 116)" (or "... file is truncated ...")
 *   ... and one message per remaining check (see safetensors.c). */
hy_status hy_st_open(hy_st *st, const char *path);
/* Closes the file and frees everything; accepts a zeroed or closed handle; zeroes st. */
void hy_st_close(hy_st *st);

/* Number of tensors (the __metadata__ entry is not one). */
size_t hy_st_count(const hy_st *st);
/* Entry i (0-based, i < hy_st_count; file order) and its fields. Borrowed from st. */
const hy_st_entry *hy_st_entry_at(const hy_st *st, size_t i);
const char *hy_st_name(const hy_st *st, size_t i);
hy_st_dtype hy_st_dtype_of(const hy_st *st, size_t i);
int hy_st_ndim(const hy_st *st, size_t i);
const int64_t *hy_st_shape(const hy_st *st, size_t i);   /* ndim values */
uint64_t hy_st_numel(const hy_st *st, size_t i);
/* Index of the tensor called name, or -1 when there is none. */
int64_t hy_st_find(const hy_st *st, const char *name);

/* __metadata__: n_meta string pairs sorted by key (borrowed from st). */
size_t hy_st_meta_count(const hy_st *st);
const char *hy_st_meta_key(const hy_st *st, size_t i);
const char *hy_st_meta_value(const hy_st *st, size_t i);
/* The value for key, or NULL when there is none. */
const char *hy_st_meta_get(const hy_st *st, const char *key);

/* Reads tensor i into out (hy_st_numel(st, i) floats, the caller's): F32 copied, F16 and BF16
 * widened exactly (bit-equal to torch's .float(): subnormals, signed zeros, infinities, NaN
 * payloads with the quiet bit set as x86 conversions do for F16), F64 rounded to nearest even
 * (as a C cast; torch's .float() of a double). Fails on any other dtype:
 *   "safetensors: 'x.safetensors': 'position_ids' has dtype I64; only F32, F16, BF16 and F64
 *    can be read as float32"
 * or on an I/O error or a file that shrank since hy_st_open. Safe to call from several
 * threads on one st (pread). */
hy_status hy_st_read_f32(const hy_st *st, size_t i, float *out);

/* ===== writing ===== */

/* One float32 tensor to write (all borrowed). */
typedef struct hy_st_tensor {
    const char *name;                  /* valid UTF-8, 1..HY_ST_MAX_NAME bytes, not __metadata__ */
    int ndim;                          /* 0 .. HY_ST_MAX_RANK */
    const int64_t *shape;              /* ndim sizes >= 0 (may be NULL when ndim == 0) */
    const float *data;                 /* numel(shape) floats, row-major (NULL when numel 0) */
} hy_st_tensor;

/* Writes n tensors as F32 to path exactly as the reference writer (serialize_to_file) does:
 * sorted by descending dtype alignment then by name (bytewise), offsets back to back from 0,
 * compact JSON "__metadata__" first (when n_meta > 0; pairs sorted by key), each tensor as
 * {"dtype":"F32","shape":[...],"data_offsets":[b,e]}, strings escaped as serde_json does, the
 * header padded with spaces to a multiple of 8 bytes. The same input gives the same bytes,
 * whatever the order of ts and of the metadata pairs.
 * Written to "<dir>/.<base>.tmp-<pid>-<n>", fsynced and renamed onto path; on any failure
 * (bad name, duplicate name or key, I/O error, full disk) nothing is left and path is
 * untouched: "safetensors: cannot write 'x.safetensors': no space left on device". */
hy_status hy_st_write(const char *path, const hy_st_tensor *ts, size_t n,
                      const char *const *meta_keys, const char *const *meta_values,
                      size_t n_meta);
/* hy_st_write with every tensor stored as dt: HY_ST_F32 (= hy_st_write), HY_ST_F16 or
 * HY_ST_BF16, narrowed with round-to-nearest-even (bit-equal to torch's .half() and
 * .bfloat16(); overflow gives infinity; NaN gives sign | 0x7E00 in F16 and 0xFFFF in BF16, as
 * torch 1.13 on the CPU does). Any other dt fails. */
hy_status hy_st_write_as(const char *path, const hy_st_tensor *ts, size_t n,
                         const char *const *meta_keys, const char *const *meta_values,
                         size_t n_meta, hy_st_dtype dt);

#endif
