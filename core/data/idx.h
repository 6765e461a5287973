/* idx.h: reader for the idx format of MNIST-like datasets (LeCun): a 4-byte magic
 * (0x00 0x00 TYPE NDIM), NDIM big-endian uint32 sizes, then the big-endian data, row-major.
 * TYPE: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64.
 * Files may be gzip-compressed (detected by zlib; plain files are read as they are).
 * Byte offsets in messages count bytes of the (decompressed) idx stream. */
#ifndef HY_IDX_H
#define HY_IDX_H

#include "tensor/tensor.h"

/* Reads the whole file into out (returns owned storage; out zeroed on failure) with the dtype
 * named by the magic, converted to host byte order. Validates and fails with HY_EIO naming the
 * file and the byte offset:
 *   "idx: 'f.gz': bad magic at byte 0 (expected 00 00 TYPE NDIM, got 12 34 08 03)"
 *   "idx: 'f.gz': unknown element type 0x07 at byte 2"
 *   "idx: 'f.gz': bad number of dimensions 0 at byte 3 (expected 1 to 8)"
 *   "idx: 'f.gz': dimension 2 is 0 at byte 8"
 *   "idx: 'f.gz': truncated at byte 1200 (header says 47040016 bytes)"
 *   "idx: 'f.gz': trailing data after byte 7856 (header says 7856 bytes)"
 *   "idx: 'f.gz': corrupt gzip data at byte N (reason)". */
hy_status hy_idx_read(const char *path, hy_tensor *out);

/* Writes t (uint8/int8/int16/int32/float32/float64, 1 to 8 dims) as an uncompressed idx file
 * (gz != 0: gzip-compressed). Used by tests and for exporting. Fails with HY_EIO naming the file,
 * HY_EINVAL for an unsupported dtype. */
hy_status hy_idx_write(const char *path, const hy_tensor *t, int gz);

#endif
