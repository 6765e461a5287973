/* prof.h: per-kernel time accounting inside the real forward, backward and optimizer step (the
 * breakdown `make bench` prints). Off by default; hy_prof_enable switches it on. Each timed
 * kernel brackets its work with
 *     uint64_t t0 = hy_prof_t0();  ...work...  hy_prof_add(HY_PROF_GEMM, t0, flops);
 * which costs one load and a predictable branch on a global flag when off. Kernels time only
 * their own work (leaves, never nested), so the classes add up; what no timer covers (the
 * loader, the loss's own loops, Lua) is the caller's measured time minus the sum ("other").
 * Timers may run on several threads at once (the fused forward's chunks): the sums are then CPU
 * time over the threads. Accumulation is atomic; timing never changes a result. */
#ifndef HY_PROF_H
#define HY_PROF_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    HY_PROF_GEMM,      /* hy_gemm: every product but attention's own (flops: 2 M N K) */
    HY_PROF_ATTN,      /* hy_attn_forward / backward, all but their matrix products */
    HY_PROF_ATTN_MM,   /* the matrix products inside attention (attn.h hy_attn_cost; flops) */
    HY_PROF_GELU,      /* GELU forward / backward */
    HY_PROF_LN,        /* LayerNorm forward / backward */
    HY_PROF_DROPOUT,   /* dropout masks and their products (when not fused into another pass) */
    HY_PROF_RESID,     /* residual adds and fused residual/bias/dropout passes */
    HY_PROF_BIAS,      /* bias broadcasts before a GEMM and bias-gradient column sums */
    HY_PROF_EMBED,     /* patch extraction, token embedding, [cls; x] + pos, their backward */
    HY_PROF_COPY,      /* memsets and copies (CLS rows, ids, stream copies) */
    HY_PROF_LOSS,      /* softmax cross-entropy */
    HY_PROF_OPTIM,     /* AdamW step, gradient norm and clipping, zero_grad */
    HY_PROF_N
} hy_prof_kind;

/* one class: accumulated nanoseconds, calls, flops (GEMM and ATTN_MM only) */
typedef struct hy_prof_entry {
    uint64_t ns, calls, flops;
} hy_prof_entry;

extern int hy_prof_on;   /* read by the inline timers; set only through hy_prof_enable */

void hy_prof_enable(bool on);
/* zeroes every class */
void hy_prof_reset(void);
/* copies the classes out (HY_PROF_N entries) */
void hy_prof_read(hy_prof_entry *out);
/* "gemm", "attention", "attn_products", "gelu", "layernorm", "dropout", "residual", "bias", "embed", "copies",
 * "loss", "optim" */
const char *hy_prof_name(hy_prof_kind k);

uint64_t hy_prof_clock(void);   /* monotonic ns */
void hy_prof_record(hy_prof_kind k, uint64_t t0, uint64_t flops);
/* adds ns (a duration measured by the caller) and one call to class k */
void hy_prof_record_ns(hy_prof_kind k, uint64_t ns, uint64_t flops);

static inline uint64_t hy_prof_t0(void) { return hy_prof_on ? hy_prof_clock() : 0; }
static inline void hy_prof_add(hy_prof_kind k, uint64_t t0, uint64_t flops) {
    if (hy_prof_on) hy_prof_record(k, t0, flops);
}
/* times one statement (a block of calls) as class k */
#define HY_PROF(k, stmt) do { uint64_t hy_t0_ = hy_prof_t0(); stmt; hy_prof_add(k, hy_t0_, 0); } \
    while (0)

#endif
