/* team.c: see team.h. A generation barrier: the last thread to arrive resets the count and
 * advances the generation; the others spin until they see it advance. */
#include "tensor/team.h"

#include <sched.h>

/* polls between yields of a waiting thread: ~10-50 us of spinning, longer than any kernel of a
 * small pass, so a thread yields only when its partner is not running */
#define SPINS_BEFORE_YIELD 4096

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

void hy_team_init(hy_team *t) {
    atomic_init(&t->n, 1);
    atomic_init(&t->arrived, 0);
    atomic_init(&t->gen, 0);
}

void hy_team_join(hy_team *t, unsigned nthreads) {
    atomic_store_explicit(&t->n, nthreads, memory_order_relaxed);
}

/* spins (then yields) until *v differs from `old` */
static void wait_change(atomic_uint *v, unsigned old) {
    for (unsigned spins = 0; atomic_load_explicit(v, memory_order_acquire) == old;) {
        cpu_relax();
        if (++spins == SPINS_BEFORE_YIELD) {
            spins = 0;
            sched_yield();
        }
    }
}

void hy_signal_post(atomic_uint *s) { atomic_store_explicit(s, 1, memory_order_release); }

void hy_signal_wait(atomic_uint *s) { wait_change(s, 0); }

void hy_team_barrier(hy_team *t) {
    unsigned n = atomic_load_explicit(&t->n, memory_order_relaxed);
    if (n <= 1) return;
    unsigned g = atomic_load_explicit(&t->gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&t->arrived, 1, memory_order_acq_rel) + 1 == n) {
        atomic_store_explicit(&t->arrived, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&t->gen, 1, memory_order_release);
        return;
    }
    wait_change(&t->gen, g);
}
