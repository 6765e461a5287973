/* base.h: status codes, the per-thread error message, HY_ASSERT, checked allocation, a growable
 * byte buffer, logging.
 * Every core function that can fail returns hy_status and records a message with hy_fail();
 * the caller reads it with hy_errmsg(). Bugs (broken invariants) abort via HY_ASSERT. */
#ifndef HY_BASE_H
#define HY_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define HY_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define HY_NORETURN __attribute__((noreturn))
#else
#define HY_PRINTF(f, a)
#define HY_NORETURN
#endif

#define HY_VERSION "0.1.0"

typedef enum { HY_OK = 0, HY_EINVAL, HY_ENOMEM, HY_EIO, HY_ECONFIG } hy_status;

/* Records a message for this thread and returns st, so callers write `return hy_fail(...)`.
 * Message style: "module: what (values)", lowercase, no trailing period. */
hy_status hy_fail(hy_status st, const char *fmt, ...) HY_PRINTF(2, 3);
/* Prepends "prefix: " to the current message (adds context one level up); returns st. */
hy_status hy_fail_prefix(hy_status st, const char *fmt, ...) HY_PRINTF(2, 3);
/* The last message recorded on this thread; never NULL ("" when none). */
const char *hy_errmsg(void);
void hy_clear_error(void);

#define HY_TRY(expr) do { hy_status st_ = (expr); if (st_ != HY_OK) return st_; } while (0)

/* Always-on check for internal invariants; prints file:line and aborts. Never for user input. */
#define HY_ASSERT(cond) \
    do { if (!(cond)) hy_assert_fail(#cond, __FILE__, __LINE__); } while (0)
HY_NORETURN void hy_assert_fail(const char *cond, const char *file, int line);

/* Allocation. Every core allocation goes through these. On failure they return NULL and record
 * "out of memory (N bytes)"; under HY_DEBUG, HYDRA_FAIL_ALLOC=N makes the Nth call fail.
 * hy_xmalloc_aligned returns 64-byte aligned memory; free both with hy_free (NULL is fine). */
void *hy_xmalloc(size_t n);
void *hy_xcalloc(size_t count, size_t size);
void *hy_xmalloc_aligned(size_t n);
void *hy_xrealloc(void *p, size_t n);
char *hy_xstrdup(const char *s);
void hy_free(void *p);
/* *out = a * b * c, or fails (HY_EINVAL) when the product does not fit size_t, naming what it
 * sizes: "train: logits for batch 4611686018427387904 x 10 classes x 4 bytes overflow". */
hy_status hy_size_mul(size_t *out, const char *what, size_t a, size_t b, size_t c);
/* ===== overflow-safe sizes =====
 * For every size computed from numbers read out of a file (checkpoint, gates, fused model,
 * dataset, safetensors header): hy_mul_ok / hy_add_ok store a*b / a+b into *out and return true
 * when the result fits size_t; on overflow they return false and leave *out = SIZE_MAX (so a
 * chain of them stays "too big" and fails the caller's limit check). Never record a message. */
static inline bool hy_mul_ok(size_t *out, size_t a, size_t b) {
    if (__builtin_mul_overflow(a, b, out)) { *out = SIZE_MAX; return false; }
    return true;
}
static inline bool hy_add_ok(size_t *out, size_t a, size_t b) {
    if (__builtin_add_overflow(a, b, out)) { *out = SIZE_MAX; return false; }
    return true;
}
/* Checks a count or size read from a file: lo <= v <= hi, else fails (HY_EINVAL) with
 * "'<file>': <what> = <v> is out of range (expected <lo> to <hi>)", where `what` names the
 * attribute or dataset ("/config depth", "/fuse members"). file may be NULL (then "h5: ..."). */
hy_status hy_check_range(const char *file, const char *what, int64_t v, int64_t lo, int64_t hi);
/* Number of allocations made through hy_x* so far (used by failure-injection tests). */
uint64_t hy_alloc_count(void);

/* A growable NUL-terminated byte buffer (zeroed = empty; data stays NULL until the first put).
 * reserve makes room for `extra` more bytes plus the NUL; put appends s[0..n), putc one byte,
 * set replaces the contents. They fail only on out-of-memory (the buffer is then unchanged). */
typedef struct hy_buf {
    char *data;
    size_t len, cap;
} hy_buf;
hy_status hy_buf_reserve(hy_buf *b, size_t extra);
hy_status hy_buf_put(hy_buf *b, const char *s, size_t n);
hy_status hy_buf_putc(hy_buf *b, char c);
hy_status hy_buf_set(hy_buf *b, const char *s, size_t n);
void hy_buf_release(hy_buf *b);

/* Logging to stderr; level from HYDRA_LOG (error, warn, info, debug; default info). */
typedef enum { HY_LOG_ERROR = 0, HY_LOG_WARN, HY_LOG_INFO, HY_LOG_DEBUG } hy_log_level;
void hy_log(hy_log_level lv, const char *fmt, ...) HY_PRINTF(2, 3);

/* Monotonic wall-clock time in seconds. */
double hy_now(void);

/* Threads: hy_threads_init sets the OpenMP thread count once (n <= 0: HYDRA_THREADS, else
 * SLURM_CPUS_PER_TASK (a Slurm task's allocation), else the number of cores; the last two at
 * most HY_MAX_THREADS) and OpenBLAS to 1 thread (hy_gemm parallelises over fixed tiles
 * itself, gemm.h); hy_threads() returns the count in force.
 * Fails, changing nothing, when n > HY_MAX_THREADS ("threads: 100000 is above the limit of 1024
 * threads"), HYDRA_THREADS is set but not an integer in [1, HY_MAX_THREADS], or
 * SLURM_CPUS_PER_TASK is set but not an integer >= 1. */
#define HY_MAX_THREADS 1024
hy_status hy_threads_init(int64_t n);
/* The count hy_threads_init(0) uses, into *n; fails like it on a bad environment. */
hy_status hy_threads_default(int64_t *n);
int hy_threads(void);
/* The thread count OpenBLAS would use for its own products: 1 in every process that called
 * hy_threads_init (the hydra executable calls it before anything else, lua/host/main.c);
 * OpenBLAS's own default otherwise. */
int hy_blas_threads(void);

/* Whether a kernel should open an OpenMP region for work worth `cond`: cond, and not inside a
 * region with more than one thread already (a small pass's team, the fused model's slices), where
 * the region would run on one thread anyway. A kernel branches on this rather than writing
 * `omp parallel ... if (cond)` alone: libgomp still builds a team for a region whose `if` is
 * false, which costs ~1.3 us at the top level and ~4.8 us nested inside a 2-thread region
 * (passive wait: a futex wake at its end; measured on a 2-core Zen 5), and a
 * batch-1 pass of vit-fm ran ~36 such nested regions per thread. */
bool hy_omp_par(bool cond);

#endif
