/* test_prof.c: the kernel timers of core/tensor/prof.h inside the real forward / backward / AdamW step:
 * off by default and then recording nothing; on, the GEMM class counts exactly the products a
 * step makes (FLOPs and calls from the model's shapes), every kernel class of the step is
 * visited, and results are bitwise the same with the timers on and off. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nn/optim.h"
#include "tensor/prof.h"
#include "nn/xfmr.h"

static hy_xfmr_config vit_cfg(void) {
    hy_xfmr_config c = check_tiny_vit();
    c.mlp_dropout = 0.1f;
    return c;
}

/* one training step (forward, loss, backward, AdamW) of B = 3 seeded images */
static void step(hy_xfmr *m, hy_adamw *o, float *logits) {
    enum { B = 3 };
    float img[B * 64], dl[B * 3];
    hy_rng r;
    hy_rng_seed(&r, 4);
    for (size_t i = 0; i < B * 64; i++) img[i] = hy_rng_uniform(&r);
    hy_batch in = {.images = img};
    int32_t labels[B] = {0, 2, 1};
    double loss;
    hy_xfmr_zero_grad(m);
    CHECK_OK(hy_xfmr_forward(m, &in, B, logits));
    CHECK_OK(hy_xfmr_loss(m, logits, labels, B, 0.0f, &loss, dl));
    CHECK_OK(hy_xfmr_backward(m, dl));
    hy_adamw_step(o, m->params, m->grads, 1e-3);
}

static void make(hy_xfmr *m, hy_adamw *o) {
    hy_xfmr_config c = vit_cfg();
    CHECK_OK(hy_xfmr_new(m, &c));
    CHECK_OK(hy_xfmr_alloc_acts(m, 3));
    hy_xfmr_init(m, 1);
    hy_xfmr_set_dropout(m, true, 3);
    hy_adamw_config ac = {1e-3, 0.9, 0.999, 1e-8, 0.05};
    hy_optim_segment seg = {0, m->n_params, 1};
    CHECK_OK(hy_adamw_new(o, &ac, m->n_params, &seg, 1));
}

static void test_step_classes(void) {
    hy_xfmr m, m2;
    hy_adamw o, o2;
    make(&m, &o);
    make(&m2, &o2);
    float lg[9], lg2[9];
    hy_prof_entry e[HY_PROF_N];
    /* off (the default): nothing recorded */
    hy_prof_reset();
    step(&m, &o, lg);
    hy_prof_read(e);
    for (int k = 0; k < HY_PROF_N; k++)
        CHECK(e[k].calls == 0 && e[k].ns == 0, "%s recorded while off", hy_prof_name(k));
    /* on: the second step of an identical model records, and changes nothing */
    hy_prof_enable(true);
    hy_prof_reset();
    step(&m2, &o2, lg2);
    hy_prof_read(e);
    hy_prof_enable(false);
    CHECK(memcmp(lg, lg2, sizeof lg) == 0, "logits differ with the timers on");
    CHECK(memcmp(m.params, m2.params, m.n_params * sizeof(float)) == 0,
          "parameters after the step differ with the timers on");
    /* GEMMs: B = 3, T = 5, N = 15 rows, F = 16, D = 16, DM = 32, K = 3, L = 2.
     * forward: patch embed (12 rows), per block qkv, proj, fc1, fc2, head: 2 + 4 L products;
     * backward: dX and dW of each, except the patch embedding's dX. */
    uint64_t N = 15, NP = 12, F = 16, D = 16, DM = 32, K = 3, L = 2, B = 3;
    uint64_t blk = 2 * N * D * 3 * D + 2 * N * D * D + 2 * 2 * N * D * DM;
    uint64_t fwd = 2 * NP * F * D + L * blk + 2 * B * D * K;
    uint64_t want = 3 * fwd - 2 * NP * F * D;
    CHECK(e[HY_PROF_GEMM].flops == want, "gemm flops %llu, want %llu",
          (unsigned long long)e[HY_PROF_GEMM].flops, (unsigned long long)want);
    CHECK(e[HY_PROF_GEMM].calls == (2 + 4 * L) + (2 * (1 + 4 * L) + 1), "gemm calls %llu",
          (unsigned long long)e[HY_PROF_GEMM].calls);
    static const hy_prof_kind visited[] = {HY_PROF_GEMM, HY_PROF_ATTN, HY_PROF_GELU, HY_PROF_LN,
                                           HY_PROF_DROPOUT, HY_PROF_RESID, HY_PROF_EMBED,
                                           HY_PROF_LOSS, HY_PROF_OPTIM};
    for (size_t i = 0; i < sizeof visited / sizeof *visited; i++)
        CHECK(e[visited[i]].calls > 0, "class %s not visited", hy_prof_name(visited[i]));
    CHECK(e[HY_PROF_ATTN].calls == 2 * L, "attention calls %llu",
          (unsigned long long)e[HY_PROF_ATTN].calls);
    CHECK(e[HY_PROF_LN].calls == 2 * (2 * L + 1), "layernorm calls %llu",
          (unsigned long long)e[HY_PROF_LN].calls);
    /* attention's products: forward q k^T and A v, backward dout v^T, A^T dout, dS k and
     * dS^T q, each T x T x HS per (sample, head), so 2 (2 + 4) B T^2 D flops a layer (T = 5
     * valid rows: no row path at this size), one forward and one backward call a layer */
    uint64_t T = 5, attn = L * 2 * (2 + 4) * B * T * T * D;
    CHECK(e[HY_PROF_ATTN_MM].flops == attn, "attention products' flops %llu, want %llu",
          (unsigned long long)e[HY_PROF_ATTN_MM].flops, (unsigned long long)attn);
    CHECK(e[HY_PROF_ATTN_MM].calls == 2 * L && e[HY_PROF_ATTN_MM].ns > 0,
          "attention products: %llu calls, %llu ns", (unsigned long long)e[HY_PROF_ATTN_MM].calls,
          (unsigned long long)e[HY_PROF_ATTN_MM].ns);
    for (int k = 0; k < HY_PROF_N; k++)
        CHECK(e[k].flops == 0 || k == HY_PROF_GEMM || k == HY_PROF_ATTN_MM, "flops");
    hy_prof_reset();
    hy_prof_read(e);
    for (int k = 0; k < HY_PROF_N; k++) CHECK(e[k].calls == 0 && e[k].ns == 0, "reset");
    CHECK(strcmp(hy_prof_name(HY_PROF_ATTN), "attention") == 0, "name");
    CHECK(strcmp(hy_prof_name(HY_PROF_ATTN_MM), "attn_products") == 0, "name");
    hy_adamw_release(&o);
    hy_adamw_release(&o2);
    hy_xfmr_release(&m);
    hy_xfmr_release(&m2);
}

int main(void) {
    RUN(test_step_classes);
    return check_exit("test_prof");
}
