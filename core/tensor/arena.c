/* arena.c: see arena.h. */
#include "tensor/arena.h"

#include <string.h>

size_t hy_arena_need(size_t n) { return (n + 63) / 64 * 64; }

hy_status hy_arena_init(hy_arena *a, size_t cap) {
    memset(a, 0, sizeof *a);
    cap = hy_arena_need(cap);
    a->base = hy_xmalloc_aligned(cap);
    if (!a->base) return hy_fail(HY_ENOMEM, "arena: out of memory reserving %zu bytes", cap);
    a->cap = cap;
#ifdef HY_DEBUG
    memset(a->base, 0xFF, cap);
#endif
    return HY_OK;
}

hy_status hy_arena_alloc(hy_arena *a, size_t n, void **out) {
    size_t need = hy_arena_need(n);
    *out = NULL;
    if (need > a->cap - a->used)
        return hy_fail(HY_ENOMEM, "arena: overflow (need %zu bytes, %zu of %zu free)", need,
                       a->cap - a->used, a->cap);
    *out = a->base + a->used;
    a->used += need;
    if (a->used > a->peak) a->peak = a->used;
    return HY_OK;
}

hy_status hy_arena_floats(hy_arena *a, size_t n, float **out) {
    void *p;
    hy_status st = hy_arena_alloc(a, n * sizeof(float), &p);
    *out = p;
    return st;
}

size_t hy_arena_mark(const hy_arena *a) { return a->used; }

void hy_arena_rewind(hy_arena *a, size_t mark) {
    HY_ASSERT(mark <= a->used);
#ifdef HY_DEBUG
    memset(a->base + mark, 0xFF, a->used - mark);
#endif
    a->used = mark;
}

void hy_arena_reset(hy_arena *a) { hy_arena_rewind(a, 0); }

void hy_arena_release(hy_arena *a) {
    if (!a) return;
    hy_free(a->base);
    memset(a, 0, sizeof *a);
}
