/* fuzz_ckpt.c: the HDF5 checkpoint loader (core/nn/ckpt.c on core/io/h5.c, with ensembles'
 * /ensemble from core/hydra/ens.c). The input is a whole HDF5 file; hy_ens_load (a single model
 * or an ensemble) must either build a model (every tensor then finite, checked again
 * here) or fail with a message and leave the model zeroed. Only hydra's code is instrumented:
 * libhdf5 is Debian's build, so coverage guides through hydra's checks, not HDF5's parser. */
#include "fuzz_common.h"   /* first: it defines _GNU_SOURCE (memfd_create) */

#include <math.h>
#include <string.h>

#include "hydra/ens.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    hy_xfmr m;
    hy_status st = hy_ens_load(path, &m);
    fuzz_check_message(st);
    if (st != HY_OK) {
        if (m.params || m.table) abort();
        return 0;
    }
    for (size_t i = 0; i < m.n_params; i++)
        if (!isfinite(m.params[i]) && i < m.n_params) {
            int in_tensor = 0;
            for (size_t k = 0; k < m.n_tensors; k++)
                if (i >= m.table[k].offset && i < m.table[k].offset + m.table[k].numel)
                    in_tensor = 1;
            if (in_tensor) abort();          /* padding between tensors is not loaded */
        }
    hy_xfmr_release(&m);
    return 0;
}
