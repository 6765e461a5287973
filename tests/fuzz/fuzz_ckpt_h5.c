/* fuzz_ckpt_h5.c: the checkpoint loader (hy_ckpt_load) on valid HDF5 files edited by the input
 * (fuzz_h5model.h: a ViT, a text model, a BatchEnsemble and a LoRA-Ensemble checkpoint as bases).
 * hy_ckpt_load must fail with a message and leave the model zeroed, or build a model whose
 * loaded tensors are finite; a built model then runs one inference batch. */
#include "fuzz_h5model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size, 0};
    int v = 0;
    const char *path = fz_file_of(&in, fz_write_ckpt, FZ_N_CKPT, &v);
    if (!path) return 0;
    hy_xfmr m;
    hy_status st = hy_ens_load(path, &m);   /* a single model or an ensemble */
    fuzz_check_message(st);
    if (st != HY_OK) {
        if (m.params || m.table) abort();
        return 0;
    }
    for (size_t k = 0; k < m.n_tensors; k++) {
        const hy_param *p = &m.table[k];
        for (size_t i = 0; i < p->numel; i++)
            if (!isfinite(m.params[p->offset + i])) abort();
    }
    /* one batch of 2 through the loaded model (sizes are the file's: at most the limits) */
    const hy_xfmr_config *c = &m.cfg;
    size_t B = 2, L = c->kind == HY_XFMR_TEXT ? (c->max_len < 4 ? c->max_len : 4) : 0;
    size_t HW = c->kind == HY_XFMR_VIT ? c->channels * c->image_size * c->image_size : 0;
    if (HW <= 4096 && c->n_classes <= 64 && hy_xfmr_alloc_acts(&m, B) == HY_OK) {
        float *img = calloc(B * HW + 1, sizeof(float)), logits[2 * 64];
        int32_t ids[2 * 4] = {3, 4, 5, 6, 7, 3, 4, 5}, len[2] = {(int32_t)L, 1};
        for (size_t i = 0; i < 8; i++) ids[i] %= (int32_t)(c->vocab_size ? c->vocab_size : 1);
        hy_batch b = {img, ids, len, L};
        if (!img) abort();
        fuzz_check_message(hy_xfmr_infer(&m, &b, B, logits));
        free(img);
    }
    hy_xfmr_release(&m);
    return 0;
}
