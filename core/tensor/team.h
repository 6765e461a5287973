/* team.h: one OpenMP team for a whole small forward pass, its threads meeting at barriers (spin,
 * then sleep) between the pass's kernels.
 *
 * Why: a batch-1 forward is ~45 kernels of a few microseconds each. Opening an OpenMP region per
 * kernel costs ~15 us with OMP_WAIT_POLICY=passive (the threads sleep between regions), more
 * than most of those kernels take (a second core would not pay for itself). A team opened once
 * per pass pays that wake-up once; between kernels its threads wait for each other by spinning
 * on an atomic counter (well under a microsecond), and spin only while the pass runs. A thread
 * that waits long (another process has its partner's core) sleeps in the kernel until its
 * partner wakes it (team.c: passive waiting, which keeps the team's share of a loaded machine).
 *
 * Each kernel's work is cut into parts that depend on the shape alone (gemm.h's tiles, rows,
 * (sample, head) pairs), so the results are bitwise those of the same kernels run whole. */
#ifndef HY_TEAM_H
#define HY_TEAM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct hy_team {
    atomic_uint n;        /* threads in the team (every thread stores its team size) */
    atomic_uint arrived;  /* threads at the current barrier */
    atomic_uint gen;      /* barriers passed */
    atomic_uint sleepers; /* threads asleep waiting for gen to advance */
    atomic_uint slept;    /* times a thread of the team went to sleep at a barrier */
} hy_team;

/* one thread's place in a team: part `part` of `parts` (the team size) */
typedef struct hy_team_part {
    hy_team *team;
    size_t part, parts;
} hy_team_part;

/* a team before its region; every thread then calls hy_team_join first */
void hy_team_init(hy_team *t);
/* inside the region: records the team size (omp_get_num_threads()) */
void hy_team_join(hy_team *t, unsigned nthreads);
/* returns when all n threads have called it; what each wrote before is visible to all after */
void hy_team_barrier(hy_team *t);

/* A one-way signal between two threads of a region: hy_signal_post publishes what the posting
 * thread wrote before it and returns at once (no barrier: the poster goes on with other work);
 * hy_signal_wait returns once the signal is posted, spinning like the barrier (sleeping when the
 * poster is not running). A signal starts unposted (atomic_init(s, 0)) and is posted once. */
void hy_signal_post(atomic_uint *s);
void hy_signal_wait(atomic_uint *s);

/* Graceful degradation on a loaded machine: a team pass during which a thread had to sleep at a
 * barrier (its partner had lost its core to another process, so every barrier of the pass may
 * wait a scheduler time slice) makes the next HY_TEAM_SOLO_PASSES small passes run on one
 * thread; the pass after them is a team pass again, which probes whether the load has gone.
 * The parts depend on the shape alone, so one thread computes the same bits as the team.
 *   if (... && hy_team_wanted()) { team pass; hy_team_done(&team); } else { one thread }
 * hy_team_wanted: false while solo passes remain (and counts one down). hy_team_done: after a
 * team pass, outside its region. Process-wide and thread-safe. */
#define HY_TEAM_SOLO_PASSES 64u
bool hy_team_wanted(void);
void hy_team_done(const hy_team *t);

/* part `part` of `parts` of n items: [*lo, *hi), contiguous, sizes differing by at most 1 */
static inline void hy_team_share(size_t n, size_t part, size_t parts, size_t *lo, size_t *hi) {
    *lo = n * part / parts;
    *hi = n * (part + 1) / parts;
}

#endif
