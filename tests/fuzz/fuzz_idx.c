/* fuzz_idx.c: the idx reader (core/data/idx.c), plain and gzip-compressed input (zlib detects it).
 * A successful read must give a tensor whose element count matches its shape; a failure must
 * leave out zeroed with a message. */
#include "fuzz_common.h"   /* first: it defines _GNU_SOURCE (memfd_create) */

#include <string.h>

#include "data/idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    hy_tensor t;
    hy_status st = hy_idx_read(path, &t);
    fuzz_check_message(st);
    if (st != HY_OK) {
        if (t.data) abort();
        return 0;
    }
    size_t n = 1;
    for (int i = 0; i < t.ndim; i++) n *= (size_t)t.shape[i];
    if (n != hy_tensor_numel(&t)) abort();
    if (n) {
        /* touch the first and last bytes (ASan checks the extent) */
        volatile const unsigned char *b = t.data;
        size_t bytes = n * hy_dtype_size(t.dtype);
        (void)b[0];
        (void)b[bytes - 1];
    }
    hy_tensor_release(&t);
    return 0;
}
