/* fuzz_gates_h5.c: the gates file reader (hy_prune_read_gates) on valid HDF5 gates files edited
 * by the input (fuzz_h5model.h: 1 to 3 members of a 2-layer, 2-head model). The reader must
 * fail with a message (out zeroed) or return (M, 2, 2) gates of 1 to 64 members, every value
 * 0 or 1 and a kept head in every layer of every member. */
#include "fuzz_h5model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size, 0};
    int v = 0;
    const char *path = fz_file_of(&in, fz_write_gates, FZ_N_GATES, &v);
    if (!path) return 0;
    hy_tensor t;
    size_t L = 2, NH = 2;
    hy_status st = hy_prune_read_gates(path, L, NH, &t);
    fuzz_check_message(st);
    if (st != HY_OK) {
        if (t.data) abort();
        return 0;
    }
    if (t.dtype != HY_F32 || t.ndim != 3 || t.shape[0] < 1 || t.shape[0] > HY_PRUNE_MAX_MEMBERS ||
        t.shape[1] != (int64_t)L || t.shape[2] != (int64_t)NH)
        abort();
    const float *g = t.data;
    for (int64_t m = 0; m < t.shape[0]; m++)
        for (size_t l = 0; l < L; l++) {
            size_t kept = 0;
            for (size_t h = 0; h < NH; h++) {
                float x = g[((size_t)m * L + l) * NH + h];
                if (x != 0.0f && x != 1.0f) abort();
                kept += x == 1.0f;
            }
            if (kept == 0) abort();
        }
    hy_tensor_release(&t);
    return 0;
}
