/* fuzz_safetensors.c: the safetensors reader (core/io/safetensors.c). The input is a whole file;
 * hy_st_open must either accept it, and then every invariant the reader promises holds (the
 * tensors tile the data section exactly, names are found by hy_st_find, every F32/F16/BF16/F64
 * tensor reads into a buffer no larger than the file), or fail with a message and leave the
 * handle zeroed. */
#include "fuzz_common.h"   /* first: it defines _GNU_SOURCE for memfd_create */

#include <string.h>

#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    hy_st st;
    hy_status rc = hy_st_open(&st, path);
    fuzz_check_message(rc);
    if (rc != HY_OK) {
        if (st.path || st.ents || st.n || st.open) abort();
        return 0;
    }
    if (st.file_size != size) abort();
    uint64_t covered = 8 + st.header_len;
    for (size_t i = 0; i < hy_st_count(&st); i++) {
        const hy_st_entry *e = hy_st_entry_at(&st, i);
        if (e->begin + 8 + st.header_len != covered) abort();     /* contiguous, in order */
        if (e->numel * hy_st_dtype_bits(e->dtype) / 8 != e->end - e->begin) abort();
        covered += e->end - e->begin;
        size_t len = strlen(e->name);
        if (len == 0 || len > HY_ST_MAX_NAME || e->ndim > HY_ST_MAX_RANK) abort();
        int64_t j = hy_st_find(&st, e->name);
        if (j < 0 || strcmp(hy_st_name(&st, (size_t)j), e->name) != 0) abort();
    }
    if (covered != size) abort();
    for (size_t i = 0; i < hy_st_meta_count(&st); i++)
        if (hy_st_meta_get(&st, hy_st_meta_key(&st, i)) != hy_st_meta_value(&st, i)) abort();
    for (size_t i = 0; i < hy_st_count(&st); i++) {
        if (!hy_st_dtype_readable(hy_st_dtype_of(&st, i))) continue;
        size_t n = (size_t)hy_st_numel(&st, i);
        if (n * 2 > size) abort();                   /* at least 2 bytes per element */
        float *out = malloc((n ? n : 1) * sizeof *out);
        if (!out) abort();
        rc = hy_st_read_f32(&st, i, out);
        fuzz_check_message(rc);
        if (rc != HY_OK) abort();                    /* the file cannot change under us */
        free(out);
    }
    hy_st_close(&st);
    return 0;
}
