/* test_finite.c: a checkpoint or a fused model whose weights or gates hold a NaN or an infinity
 * is refused on load, naming the file, the tensor and the first bad flat index. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "nn/ckpt.h"
#include "hydra/fused.h"

/* The flat offset of tensor `name` in m's parameter block (SIZE_MAX when absent). */
static size_t offset_of(const hy_param *table, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(table[i].name, name) == 0) return table[i].offset;
    return SIZE_MAX;
}

static void test_checkpoint(void) {
    hy_xfmr_config c = check_tiny_vit();
    hy_xfmr a, b;
    CHECK_OK(hy_xfmr_new(&a, &c));
    hy_xfmr_init(&a, check_seed());
    char path[512], want[800];
    snprintf(path, sizeof path, "%s/nan.h5", check_tmpdir());
    size_t qkv = offset_of(a.table, a.n_tensors, "blocks.0.attn.qkv.weight");
    size_t fc1 = offset_of(a.table, a.n_tensors, "blocks.1.mlp.fc1.weight");
    CHECK(qkv != SIZE_MAX && fc1 != SIZE_MAX, "tensor names");
    if (qkv == SIZE_MAX || fc1 == SIZE_MAX) return;
    /* clean: loads */
    CHECK_OK(hy_ckpt_save(path, &a, NULL, 0));
    CHECK_OK(hy_ckpt_load(path, &b));
    hy_xfmr_release(&b);
    /* a NaN in a weight (the first bad index is reported, not the last) */
    a.params[qkv + 17] = NAN;
    a.params[qkv + 40] = INFINITY;
    CHECK_OK(hy_ckpt_save(path, &a, NULL, 0));
    snprintf(want, sizeof want, "ckpt: '%s': tensor 'blocks.0.attn.qkv.weight' has a non-finite "
             "value (nan) at flat index 17", path);
    CHECK_FAIL(hy_ckpt_load(path, &b), HY_EINVAL, want);
    CHECK(b.params == NULL, "the model is left zeroed");
    a.params[qkv + 17] = 0.5f;
    a.params[qkv + 40] = 0.5f;
    /* -inf in another layer */
    a.params[fc1 + 3] = -INFINITY;
    CHECK_OK(hy_ckpt_save(path, &a, NULL, 0));
    snprintf(want, sizeof want, "ckpt: '%s': tensor 'blocks.1.mlp.fc1.weight' has a non-finite "
             "value (-inf) at flat index 3", path);
    CHECK_FAIL(hy_ckpt_load(path, &b), HY_EINVAL, want);
    a.params[fc1 + 3] = 0.0f;
    /* a NaN head gate */
    a.gates[3] = NAN;
    CHECK_OK(hy_ckpt_save(path, &a, NULL, 0));
    snprintf(want, sizeof want, "ckpt: '%s': tensor 'head_gates' has a non-finite value (nan) at "
             "flat index 3", path);
    CHECK_FAIL(hy_ckpt_load(path, &b), HY_EINVAL, want);
    hy_xfmr_release(&a);
}

static void test_fused(void) {
    hy_xfmr_config c = check_tiny_vit();
    hy_xfmr a;
    CHECK_OK(hy_xfmr_new(&a, &c));
    hy_xfmr_init(&a, check_seed());
    hy_xfmr *ms[2] = {&a, &a};
    hy_fuse_config fc = {HY_FUSE_MEMBER, HY_FUSE_MEMBER, HY_FUSE_MEMBER, HY_FUSE_MEMBER};
    hy_fused f, g;
    CHECK_OK(hy_fused_build(&f, ms, 2, &fc));
    char path[512], want[800];
    snprintf(path, sizeof path, "%s/fused_nan.h5", check_tmpdir());
    CHECK_OK(hy_fused_save(path, &f));
    CHECK_OK(hy_fused_load(&g, path));
    hy_fused_release(&g);
    const hy_param *p = &f.table[f.n_tensors - 1];
    f.params[p->offset + 1] = INFINITY;
    CHECK_OK(hy_fused_save(path, &f));
    snprintf(want, sizeof want, "ckpt: '%s': tensor '%s' has a non-finite value (inf) at flat "
             "index 1", path, p->name);
    CHECK_FAIL(hy_fused_load(&g, path), HY_EINVAL, want);
    f.params[p->offset + 1] = 0.0f;
    f.head_gates[c.depth * c.n_heads + 1] = NAN;       /* member 1 (0-based), layer 0, head 1 */
    CHECK_OK(hy_fused_save(path, &f));
    snprintf(want, sizeof want, "ckpt: '%s': tensor 'members/1/head_gates' has a non-finite "
             "value (nan) at flat index 1", path);
    CHECK_FAIL(hy_fused_load(&g, path), HY_EINVAL, want);
    hy_fused_release(&f);
    hy_xfmr_release(&a);
}

int main(void) {
    RUN(test_checkpoint);
    RUN(test_fused);
    return check_exit("test_finite");
}
