/* fuzz_fused_h5.c: the fused-model loader (hy_fused_load) on valid HDF5 fused files edited by
 * the input (fuzz_h5model.h: 1 to 3 members, vit and text, every fuse.* combination used by
 * hydra). hy_fused_load must fail with a message and leave f zeroed, or give a model whose
 * member count is the number of member groups stored and whose tensors are finite; a loaded
 * model then runs one batch of 2 through hy_fused_forward. */
#include "fuzz_h5model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size, 0};
    int v = 0;
    const char *path = fz_file_of(&in, fz_write_fused, FZ_N_FUSED, &v);
    if (!path) return 0;
    hy_fused f;
    hy_status st = hy_fused_load(&f, path);
    fuzz_check_message(st);
    if (st != HY_OK) {
        if (f.params || f.M) abort();
        return 0;
    }
    if (f.M < 1 || f.M > HY_FUSED_MAX_MEMBERS) abort();
    for (size_t k = 0; k < f.n_tensors; k++) {
        const hy_param *p = &f.table[k];
        for (size_t i = 0; i < p->numel; i++)
            if (!isfinite(f.params[p->offset + i])) abort();
    }
    const hy_xfmr_config *c = &f.cfg;
    size_t B = 2, L = c->kind == HY_XFMR_TEXT ? (c->max_len < 4 ? c->max_len : 4) : 0;
    size_t HW = c->kind == HY_XFMR_VIT ? c->channels * c->image_size * c->image_size : 0;
    if (HW <= 4096 && c->n_classes <= 64 && f.M <= 8 && hy_fused_alloc_acts(&f, B) == HY_OK) {
        float *img = calloc(B * HW + 1, sizeof(float)), *logits = calloc(8 * 2 * 64, 4);
        int32_t ids[2 * 4] = {3, 4, 5, 6, 7, 3, 4, 5}, len[2] = {(int32_t)L, 1};
        for (size_t i = 0; i < 8; i++) ids[i] %= (int32_t)(c->vocab_size ? c->vocab_size : 1);
        hy_batch b = {img, ids, len, L};
        if (!img || !logits) abort();
        fuzz_check_message(hy_fused_forward(&f, &b, B, logits));
        free(img);
        free(logits);
    }
    hy_fused_release(&f);
    return 0;
}
