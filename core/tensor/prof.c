/* prof.c: see prof.h. */
#include "tensor/prof.h"

#include <string.h>
#include <time.h>

int hy_prof_on = 0;
static hy_prof_entry acc[HY_PROF_N];

void hy_prof_enable(bool on) { hy_prof_on = on ? 1 : 0; }

void hy_prof_reset(void) { memset(acc, 0, sizeof acc); }

void hy_prof_read(hy_prof_entry *out) {
    for (int k = 0; k < HY_PROF_N; k++) {
        out[k].ns = __atomic_load_n(&acc[k].ns, __ATOMIC_RELAXED);
        out[k].calls = __atomic_load_n(&acc[k].calls, __ATOMIC_RELAXED);
        out[k].flops = __atomic_load_n(&acc[k].flops, __ATOMIC_RELAXED);
    }
}

const char *hy_prof_name(hy_prof_kind k) {
    static const char *const names[HY_PROF_N] = {
        "gemm", "attention", "attn_products", "gelu", "layernorm", "dropout", "residual", "bias",
        "embed", "copies", "loss", "optim"};
    return (unsigned)k < HY_PROF_N ? names[k] : "?";
}

uint64_t hy_prof_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void hy_prof_record(hy_prof_kind k, uint64_t t0, uint64_t flops) {
    hy_prof_record_ns(k, hy_prof_clock() - t0, flops);
}

void hy_prof_record_ns(hy_prof_kind k, uint64_t ns, uint64_t flops) {
    __atomic_fetch_add(&acc[k].ns, ns, __ATOMIC_RELAXED);
    __atomic_fetch_add(&acc[k].calls, 1, __ATOMIC_RELAXED);
    if (flops) __atomic_fetch_add(&acc[k].flops, flops, __ATOMIC_RELAXED);
}
