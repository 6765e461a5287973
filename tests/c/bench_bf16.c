/* bench_bf16.c: the BF16 kernel (tensor/gemm_bf16.h) against hydra's float32 product (hy_gemm:
 * OpenBLAS sgemm in shape-fixed tiles on hydra's threads) at the linears of ViT-S/16-224 and
 * BERT-base-128, GFLOP/s and their ratio; not part of `make test` (a timing). Both run the same
 * tiling (hy_gemm_tiling) on the same OpenMP threads; the BF16 side includes rounding A per
 * call, not the weights' packing (once per model). Also prints the relative error of the BF16
 * product against the float32 one. `make bench-bf16` (HYDRA_THREADS threads, default all).
 * Usage: bench_bf16 [seconds per measurement, default 0.3] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensor/base.h"
#include "tensor/gemm.h"
#include "tensor/gemm_bf16.h"
#include "tensor/rng.h"

static void bf16_product(size_t M, size_t N, size_t K, const float *A, const hy_bf16_w *W,
                         float *C) {
    size_t rt, ct;
    hy_gemm_tiling(M, N, K, &rt, &ct);
    size_t nr = (M + rt - 1) / rt, nc = (N + ct - 1) / ct, nt = nr * nc;
#pragma omp parallel for schedule(static) if (nt > 1)
    for (size_t t = 0; t < nt; t++) {
        size_t r0 = t / nc * rt, c0 = t % nc * ct;
        size_t r1 = r0 + rt < M ? r0 + rt : M, c1 = c0 + ct < N ? c0 + ct : N;
        hy_gemm_bf16_nt(r1 - r0, c0, c1, A + r0 * K, K, W, 0.0f, C + r0 * N, N);
    }
}

static double now(void) { return hy_now(); }

/* median of 5 rounds of calls lasting `secs` / 5 each: seconds per call */
#define ROUNDS 5
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0.3;
    if (hy_threads_init(0) != HY_OK) { fprintf(stderr, "%s\n", hy_errmsg()); return 1; }
    if (!hy_bf16_available()) {
        printf("bench_bf16: this CPU has no AVX-512 BF16; nothing to measure\n");
        return 0;
    }
    static const struct { const char *model, *layer; size_t M, K, N; } S[] = {
        {"vit-s16-224 b16", "qkv", 3152, 384, 1152}, {"vit-s16-224 b16", "proj", 3152, 384, 384},
        {"vit-s16-224 b16", "fc1", 3152, 384, 1536}, {"vit-s16-224 b16", "fc2", 3152, 1536, 384},
        {"vit-s16-224 b1", "qkv", 197, 384, 1152},   {"vit-s16-224 b1", "fc1", 197, 384, 1536},
        {"vit-s16-224 b1", "fc2", 197, 1536, 384},   {"bert-base-128 b8", "qkv", 1024, 768, 2304},
        {"bert-base-128 b8", "proj", 1024, 768, 768}, {"bert-base-128 b8", "fc1", 1024, 768, 3072},
        {"bert-base-128 b8", "fc2", 1024, 3072, 768}, {"bert-base-128 b1", "qkv", 128, 768, 2304},
        {"bert-base-128 b1", "fc1", 128, 768, 3072}, {"bert-base-128 b1", "fc2", 128, 3072, 768},
    };
    hy_rng rng;
    hy_rng_seed(&rng, 1234);
    printf("threads %d; GFLOP/s, median of %d rounds\n", hy_threads(), ROUNDS);
    printf("%-18s %-5s %6s %5s %5s %9s %9s %7s %10s\n", "model", "layer", "rows", "K", "N",
           "sgemm", "bf16", "ratio", "rel.err");
    double lsum_s = 0, lsum_b = 0;
    for (size_t s = 0; s < sizeof S / sizeof S[0]; s++) {
        size_t M = S[s].M, K = S[s].K, N = S[s].N;
        float *A = hy_xmalloc_aligned(M * K * sizeof *A), *W = hy_xmalloc_aligned(N * K * 4);
        float *C = hy_xmalloc_aligned(M * N * 4), *D = hy_xmalloc_aligned(M * N * 4);
        uint16_t *P = hy_xmalloc_aligned(hy_bf16_pack_len(N, K) * sizeof *P);
        if (!A || !W || !C || !D || !P) { fprintf(stderr, "out of memory\n"); return 1; }
        for (size_t i = 0; i < M * K; i++) A[i] = 2.0f * hy_rng_uniform(&rng) - 1.0f;
        for (size_t i = 0; i < N * K; i++) W[i] = 0.1f * (2.0f * hy_rng_uniform(&rng) - 1.0f);
        hy_bf16_w w = hy_bf16_pack(P, W, K, N, K);
        double t[2][ROUNDS];
        for (int r = 0; r < ROUNDS; r++)
            for (int side = 0; side < 2; side++) {
                size_t n = 0;
                double t0 = now(), t1;
                do {
                    if (side == 0)
                        hy_gemm(CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, W, K, 0.0f, C, N);
                    else
                        bf16_product(M, N, K, A, &w, D);
                    n++;
                    t1 = now();
                } while (t1 - t0 < secs / ROUNDS);
                t[side][r] = (t1 - t0) / (double)n;
            }
        qsort(t[0], ROUNDS, sizeof(double), cmp_d);
        qsort(t[1], ROUNDS, sizeof(double), cmp_d);
        double fl = 2.0 * (double)M * (double)N * (double)K;
        double gs = fl / t[0][ROUNDS / 2] * 1e-9, gb = fl / t[1][ROUNDS / 2] * 1e-9;
        double num = 0, den = 0;
        for (size_t i = 0; i < M * N; i++) {
            double d = (double)D[i] - (double)C[i];
            num += d * d;
            den += (double)C[i] * (double)C[i];
        }
        printf("%-18s %-5s %6zu %5zu %5zu %9.1f %9.1f %6.2fx %10.2e\n", S[s].model, S[s].layer, M,
               K, N, gs, gb, gb / gs, sqrt(num / den));
        lsum_s += t[0][ROUNDS / 2];
        lsum_b += t[1][ROUNDS / 2];
        hy_free(A); hy_free(W); hy_free(C); hy_free(D); hy_free(P);
    }
    printf("all shapes, time sgemm / time bf16: %.2fx\n", lsum_s / lsum_b);
    return 0;
}
