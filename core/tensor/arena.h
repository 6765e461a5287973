/* arena.h: a bump allocator for per-step temporaries (ggml-style reserve).
 * Size it once from a plan over the worst-case shapes; hy_arena_alloc never grows it: overflow is
 * HY_ENOMEM with both sizes in the message, in every build. Under HY_DEBUG, reset fills the arena
 * with 0xFF bytes (NaN as float), so reading stale scratch shows up as NaN in tests. */
#ifndef HY_ARENA_H
#define HY_ARENA_H

#include "tensor/base.h"

typedef struct hy_arena {
    unsigned char *base;
    size_t cap;       /* bytes reserved */
    size_t used;      /* bytes handed out since the last reset */
    size_t peak;      /* high-water mark */
} hy_arena;

/* Reserves cap bytes (64-byte aligned). Fails with HY_ENOMEM. */
hy_status hy_arena_init(hy_arena *a, size_t cap);
/* Hands out n bytes aligned to 64; *out = NULL and HY_ENOMEM when it does not fit. */
hy_status hy_arena_alloc(hy_arena *a, size_t n, void **out);
/* Float convenience: n floats. */
hy_status hy_arena_floats(hy_arena *a, size_t n, float **out);
size_t hy_arena_mark(const hy_arena *a);
void hy_arena_rewind(hy_arena *a, size_t mark);
void hy_arena_reset(hy_arena *a);
/* Frees the reservation; accepts a zeroed arena and zeroes what it frees. */
void hy_arena_release(hy_arena *a);
/* Bytes hy_arena_alloc(n) consumes (n rounded up to 64): for plan passes. */
size_t hy_arena_need(size_t n);

#endif
