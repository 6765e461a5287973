/* h5.h: hydra's HDF5 layer: checkpoints, prepared datasets and results.
 *   write: hy_h5_create -> hy_h5_write* / hy_h5_set_attr_* -> hy_h5_commit (atomic rename)
 *   read:  hy_h5_open -> hy_h5_read* / hy_h5_get_attr_* / hy_h5_list / hy_h5_attrs -> hy_h5_close
 * Names are HDF5 paths ("/train/images", or relative to the root: "train/images"); "/" is the
 * root group. Every failure returns a status and records "h5: ... '<name>' in '<file>'"; HDF5's
 * own error printing is off. Not thread-safe: use one hy_h5 from one thread at a time.
 *
 * File format decisions (readable with h5py / h5dump):
 *  - numeric datasets use little-endian IEEE / two's complement types (H5T_STD_*LE, H5T_IEEE_*LE);
 *    datasets over HY_H5_COMPRESS_BYTES are chunked (~1 MiB chunks) with shuffle + deflate level 4,
 *    smaller ones are contiguous;
 *  - strings (scalar datasets, 1-d string arrays, string attributes) are variable-length UTF-8;
 *    readers also accept fixed-length strings (ASCII or UTF-8) written by other tools;
 *  - no object timestamps are stored, so the same content written twice gives byte-identical files;
 *  - a file being written lives in memory (HDF5's core driver) with an empty placeholder at
 *    "<dir>/.<basename>.tmp-<pid>-<n>"; hy_h5_commit writes the image there with checked
 *    write(2) calls, fsyncs it and renames it onto the final path, so a crash never leaves a
 *    truncated file under the real name, and a full disk is a clean error
 *    ("h5: cannot write 'x.h5': no space left on device"): HDF5 itself never writes to disk,
 *    since HDF5 1.10 cannot recover from a write failing while it flushes (the file then stays
 *    registered, half closed, and the library's exit handler crashes on it). Memory: a file
 *    being written costs its size, and twice that while it is committed. */
#ifndef HY_H5_H
#define HY_H5_H

#include "tensor/tensor.h"

/* Datasets with more bytes than this are chunked and compressed. */
#define HY_H5_COMPRESS_BYTES ((size_t)64 * 1024)

/* An open HDF5 file. Zero it (or pass it to hy_h5_close) before reuse; hy_h5_close is
 * idempotent, so a zeroed or already closed handle is fine. */
typedef struct hy_h5 {
    int64_t id;               /* hid_t of the file; valid when open != 0 */
    char *path;               /* final path, as given (owned; used in messages) */
    char *tmp;                /* temporary path while writing, NULL for a read-only file (owned) */
    char *dir;                /* folder of path while writing (owned; fsynced after the rename) */
    int64_t pid;              /* process that created the temporary file */
    int open;
} hy_h5;

/* ===== files ===== */

/* Creates a new file that will appear at `path` on hy_h5_commit; writes go to a temporary file in
 * the same folder. f is overwritten (it must not hold an open file).
 * Fails (f left zeroed) when the folder is missing or not writable:
 * "h5: cannot create 'dir/x.h5': folder 'dir' does not exist". */
hy_status hy_h5_create(hy_h5 *f, const char *path);
/* Writes the file's image to the temporary file, fsyncs it, renames it onto the final path
 * (replacing an older file) and fsyncs the folder. f is closed afterwards whatever the outcome; on failure the temporary
 * file is removed and nothing appears under the final path. Fails on a read-only file. */
hy_status hy_h5_commit(hy_h5 *f);
/* Closes f without committing: a file being written is discarded (temporary file removed).
 * Accepts a zeroed or closed handle; zeroes f. */
void hy_h5_close(hy_h5 *f);
/* Opens an existing file read-only. Fails (f left zeroed) with
 * "h5: cannot open 'x.h5': no such file", "...: it is a folder", "...: it is not a regular file"
 * (a FIFO, whose open would wait for a writer, or a device; checked before opening) or
 * "h5: 'x.h5' is not an HDF5 file". */
hy_status hy_h5_open(hy_h5 *f, const char *path);
/* 1 when path names a readable HDF5 file, else 0. Never fails. */
int hy_h5_is_file(const char *path);

/* ===== numeric datasets ===== */

/* Writes tensor t (any dtype, rank 0..8, zero-size dims allowed) as dataset `name`; missing parent
 * groups are created. Borrows t. Fails if `name` already exists. */
hy_status hy_h5_write(hy_h5 *f, const char *name, const hy_tensor *t);
/* Same, from a raw row-major buffer of numel(shape) elements of dtype dt (borrowed). */
hy_status hy_h5_write_data(hy_h5 *f, const char *name, hy_dtype dt, int ndim,
                           const int64_t *shape, const void *data);
/* Reads dataset `name` into out (returns owned storage; out is overwritten, zeroed on failure),
 * with the file's dtype. Fails when the dataset's type has no hy_dtype (use hy_h5_read_as). */
hy_status hy_h5_read(hy_h5 *f, const char *name, hy_tensor *out);
/* Same, converted to dt by HDF5 (integer <-> float; out-of-range values saturate). */
hy_status hy_h5_read_as(hy_h5 *f, const char *name, hy_dtype dt, hy_tensor *out);
/* Reads dataset `name`, converted to dt, into buf (caller's, numel(shape) elements) after checking
 * that its shape equals shape[0..ndim):
 * "h5: 'w' in 'x.h5' has shape [192,64], expected [96,64]". */
hy_status hy_h5_read_into(hy_h5 *f, const char *name, hy_dtype dt, int ndim,
                          const int64_t *shape, void *buf);

/* ===== strings ===== */

/* A scalar UTF-8 string dataset. */
hy_status hy_h5_write_string(hy_h5 *f, const char *name, const char *s);
/* *out receives an owned copy (free with hy_free). */
hy_status hy_h5_read_string(hy_h5 *f, const char *name, char **out);
/* A 1-d string array of n strings (n may be 0). */
hy_status hy_h5_write_strings(hy_h5 *f, const char *name, const char *const *s, size_t n);
/* *out receives an owned array of n owned strings (free with hy_h5_strings_free). */
hy_status hy_h5_read_strings(hy_h5 *f, const char *name, char ***out, size_t *n);
void hy_h5_strings_free(char **s, size_t n);

/* ===== attributes =====
 * obj is "/" (the root), a group or a dataset. Setting an attribute replaces one of the same key;
 * when obj does not exist yet in a file being written, it is created as a group (with parents).
 * Numeric getters convert integer <-> float; float -> int64 fails unless the value is integral. */
hy_status hy_h5_set_attr_str(hy_h5 *f, const char *obj, const char *key, const char *value);
hy_status hy_h5_set_attr_f64(hy_h5 *f, const char *obj, const char *key, double value);
hy_status hy_h5_set_attr_i64(hy_h5 *f, const char *obj, const char *key, int64_t value);
hy_status hy_h5_set_attr_f64s(hy_h5 *f, const char *obj, const char *key, const double *v,
                              size_t n);
hy_status hy_h5_set_attr_i64s(hy_h5 *f, const char *obj, const char *key, const int64_t *v,
                              size_t n);
/* *out owned (hy_free). */
hy_status hy_h5_get_attr_str(hy_h5 *f, const char *obj, const char *key, char **out);
/* Scalar attributes (or 1-element arrays). */
hy_status hy_h5_get_attr_f64(hy_h5 *f, const char *obj, const char *key, double *out);
hy_status hy_h5_get_attr_i64(hy_h5 *f, const char *obj, const char *key, int64_t *out);
/* Arrays (a scalar reads as 1 element); *out owned (hy_free), NULL when *n == 0. */
hy_status hy_h5_get_attr_f64s(hy_h5 *f, const char *obj, const char *key, double **out,
                              size_t *n);
hy_status hy_h5_get_attr_i64s(hy_h5 *f, const char *obj, const char *key, int64_t **out,
                              size_t *n);
/* Any attribute with its value(s) (see hy_h5_attr below); out owned (hy_h5_attr_free). */
typedef struct hy_h5_attr hy_h5_attr;
hy_status hy_h5_get_attr(hy_h5 *f, const char *obj, const char *key, hy_h5_attr *out);
void hy_h5_attr_free(hy_h5_attr *a);
/* 1 when obj exists and has attribute key, 0 when not (or f is closed), -1 when it cannot tell
 * (out of memory: the message is recorded; callers return HY_ENOMEM, never read it as 0). */
int hy_h5_attr_exists(hy_h5 *f, const char *obj, const char *key);

/* ===== inspection ===== */

typedef enum { HY_H5_GROUP = 0, HY_H5_DATASET, HY_H5_OTHER } hy_h5_kind;

/* One object. type: "float32", ..., "int64" (dtype then holds the hy_dtype), or "string",
 * "uint16", "uint32", "uint64", "float16", "compound", "other" (dtype is -1). */
typedef struct hy_h5_entry {
    char *name;               /* child name (owned) */
    char *path;               /* full path from the root, "/a/b" (owned) */
    hy_h5_kind kind;
    char type[16];            /* datasets only ("" for groups) */
    int dtype;                /* hy_dtype or -1 */
    int ndim;                 /* datasets only; 0 for scalars */
    int64_t shape[HY_MAXDIM];
} hy_h5_entry;

typedef enum { HY_H5_ATTR_STR = 0, HY_H5_ATTR_I64, HY_H5_ATTR_F64, HY_H5_ATTR_OTHER } hy_h5_atype;

/* One attribute with its value(s). Scalars have is_array 0 and n 1; arrays is_array 1.
 * Integers of any width read as i64, floats as f64; other types (enums, compounds, ...) as
 * HY_H5_ATTR_OTHER with no value. */
typedef struct hy_h5_attr {
    char *key;                /* owned */
    hy_h5_atype type;
    int is_array;
    size_t n;
    char **strs;              /* HY_H5_ATTR_STR (owned, n strings) */
    int64_t *i64;             /* HY_H5_ATTR_I64 (owned, n values) */
    double *f64;              /* HY_H5_ATTR_F64 (owned, n values) */
} hy_h5_attr;

/* 1 when `name` (a group or a dataset; "/" is the root) exists, 0 when not (or f is closed),
 * -1 when it cannot tell (out of memory, as for hy_h5_attr_exists). */
int hy_h5_exists(hy_h5 *f, const char *name);
/* Describes one object; out->name and out->path are owned (hy_h5_entry_free). */
hy_status hy_h5_stat(hy_h5 *f, const char *name, hy_h5_entry *out);
void hy_h5_entry_free(hy_h5_entry *e);
/* Numeric dataset shape and dtype; fails for groups, strings and types without a hy_dtype. */
hy_status hy_h5_shape(hy_h5 *f, const char *name, hy_dtype *dtype, int *ndim, int64_t *shape);
/* The children of group `group`, sorted by name (bytewise). *out owned (hy_h5_list_free). */
hy_status hy_h5_list(hy_h5 *f, const char *group, hy_h5_entry **out, size_t *n);
void hy_h5_list_free(hy_h5_entry *e, size_t n);
/* The attributes of obj, sorted by key. *out owned (hy_h5_attrs_free). */
hy_status hy_h5_attrs(hy_h5 *f, const char *obj, hy_h5_attr **out, size_t *n);
void hy_h5_attrs_free(hy_h5_attr *a, size_t n);

#endif
