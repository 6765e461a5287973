/* team.c: see team.h. A generation barrier: the last thread to arrive resets the count and
 * advances the generation; the others spin until they see it advance, then sleep on it.
 *
 * Waiting: a thread polls for SPINS_BEFORE_SLEEP rounds (longer than a small pass's kernels take
 * on an idle machine, so there it never sleeps), then blocks in the kernel (a futex on the word
 * it waits for) until the thread that changes the word wakes it. A blocked waiter leaves its core
 * to whatever else runs there, and the scheduler runs it again as soon as it is woken (a sleeper
 * is owed CPU time); a thread that spun or yielded through its partner's absence instead has used
 * up its share and waits behind the other processes when its partner comes back. The waker pays
 * the wake-up system call only when a waiter sleeps (the sleepers count; the barrier word's
 * low bits for a signal). */
#define _GNU_SOURCE   /* syscall */
#include "tensor/team.h"

#include <limits.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#include <sched.h>
#endif

/* polls before a waiting thread sleeps: ~100 us of spinning (2-core Zen 5), longer than any
 * kernel of a small pass on an idle machine and than an OpenMP worker takes to wake (~15 us with
 * OMP_WAIT_POLICY=passive), so a thread sleeps only when its partner is not running */
#define SPINS_BEFORE_SLEEP 4096

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* blocks while *v == old (returns at once if it differs; may return spuriously) */
static void sleep_on(atomic_uint *v, unsigned old) {
#if defined(__linux__)
    syscall(SYS_futex, v, FUTEX_WAIT_PRIVATE, (long)old, NULL, NULL, 0L);
#else
    (void)v;
    (void)old;
    sched_yield();
#endif
}

/* wakes every thread blocked in sleep_on(v, .) */
static void wake_all(atomic_uint *v) {
#if defined(__linux__)
    syscall(SYS_futex, v, FUTEX_WAKE_PRIVATE, (long)INT_MAX, NULL, NULL, 0L);
#else
    (void)v;
#endif
}

/* polls until *v differs from old; true if it did within the spin budget */
static bool spin_change(atomic_uint *v, unsigned old) {
    for (unsigned spins = 0; spins < SPINS_BEFORE_SLEEP; spins++) {
        if (atomic_load_explicit(v, memory_order_acquire) != old) return true;
        cpu_relax();
    }
    return false;
}

void hy_team_init(hy_team *t) {
    atomic_init(&t->n, 1);
    atomic_init(&t->arrived, 0);
    atomic_init(&t->gen, 0);
    atomic_init(&t->sleepers, 0);
    atomic_init(&t->slept, 0);
}

void hy_team_join(hy_team *t, unsigned nthreads) {
    atomic_store_explicit(&t->n, nthreads, memory_order_relaxed);
}

/* A signal's word: 0 unposted, SIGNAL_SLEEPER unposted with a waiter asleep on it, 1 posted. */
#define SIGNAL_SLEEPER 2u

void hy_signal_post(atomic_uint *s) {
    if (atomic_exchange_explicit(s, 1, memory_order_acq_rel) == SIGNAL_SLEEPER) wake_all(s);
}

void hy_signal_wait(atomic_uint *s) {
    if (spin_change(s, 0)) return;
    for (;;) {
        unsigned v = 0;
        /* announce a sleeper (0 -> SIGNAL_SLEEPER) unless posted meanwhile */
        if (!atomic_compare_exchange_strong_explicit(s, &v, SIGNAL_SLEEPER,
                                                     memory_order_acq_rel,
                                                     memory_order_acquire) &&
            v == 1)
            return;
        sleep_on(s, SIGNAL_SLEEPER);
        if (atomic_load_explicit(s, memory_order_acquire) == 1) return;
    }
}

void hy_team_barrier(hy_team *t) {
    unsigned n = atomic_load_explicit(&t->n, memory_order_relaxed);
    if (n <= 1) return;
    unsigned g = atomic_load_explicit(&t->gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&t->arrived, 1, memory_order_acq_rel) + 1 == n) {
        atomic_store_explicit(&t->arrived, 0, memory_order_relaxed);
        /* seq_cst with the sleepers count (a waiter: count, then re-read gen): either this
         * thread sees the sleeper or the sleeper sees the new generation */
        atomic_fetch_add_explicit(&t->gen, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&t->sleepers, memory_order_seq_cst) > 0) wake_all(&t->gen);
        return;
    }
    if (spin_change(&t->gen, g)) return;
    atomic_fetch_add_explicit(&t->slept, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->sleepers, 1, memory_order_seq_cst);
    while (atomic_load_explicit(&t->gen, memory_order_seq_cst) == g) sleep_on(&t->gen, g);
    atomic_fetch_sub_explicit(&t->sleepers, 1, memory_order_seq_cst);
}

/* small passes still to run on one thread (hy_team_wanted) */
static atomic_uint solo_left;

bool hy_team_wanted(void) {
    unsigned n = atomic_load_explicit(&solo_left, memory_order_relaxed);
    while (n > 0)
        if (atomic_compare_exchange_weak_explicit(&solo_left, &n, n - 1, memory_order_relaxed,
                                                  memory_order_relaxed))
            return false;
    return true;
}

void hy_team_done(const hy_team *t) {
    if (atomic_load_explicit(&t->slept, memory_order_relaxed) > 0)
        atomic_store_explicit(&solo_left, HY_TEAM_SOLO_PASSES, memory_order_relaxed);
}
