/* base.c: error messages (thread-local), assertions, allocation with failure injection, logging,
 * clocks and the thread-count setting shared by OpenMP and OpenBLAS. */
#define _POSIX_C_SOURCE 200809L
#include "tensor/base.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static _Thread_local char errbuf[2048];

hy_status hy_fail(hy_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
    return st;
}

hy_status hy_fail_prefix(hy_status st, const char *fmt, ...) {
    char pre[512], old[sizeof errbuf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, errbuf, sizeof old);
    size_t k = strlen(pre);
    memcpy(errbuf, pre, k);
    errbuf[k++] = ':';
    errbuf[k++] = ' ';
    size_t rest = strlen(old);
    if (rest > sizeof errbuf - k - 1) rest = sizeof errbuf - k - 1;
    memcpy(errbuf + k, old, rest);
    errbuf[k + rest] = '\0';
    return st;
}

const char *hy_errmsg(void) { return errbuf; }
void hy_clear_error(void) { errbuf[0] = '\0'; }

void hy_assert_fail(const char *cond, const char *file, int line) {
    fprintf(stderr, "hydra: internal error: %s:%d: assertion '%s' failed\n", file, line, cond);
    fflush(stderr);
    abort();
}

/* ===== allocation ===== */

static uint64_t alloc_count;
#ifdef HY_DEBUG
static long long fail_at = -2; /* -2: not read yet, -1: never fail */
static int should_fail(void) {
    if (fail_at == -2) {
        const char *s = getenv("HYDRA_FAIL_ALLOC");
        fail_at = (s && *s) ? atoll(s) : -1; /* debug-only knob; a bad value disables it */
    }
    return fail_at >= 0 && (long long)alloc_count == fail_at;
}
#else
static int should_fail(void) { return 0; }
#endif

static void *oom(size_t n) {
    hy_fail(HY_ENOMEM, "out of memory (%zu bytes)", n);
    return NULL;
}

void *hy_xmalloc(size_t n) {
    alloc_count++;
    if (should_fail()) return oom(n);
    void *p = malloc(n ? n : 1);
    return p ? p : oom(n);
}

void *hy_xcalloc(size_t count, size_t size) {
    alloc_count++;
    if (size && count > SIZE_MAX / size) return oom(SIZE_MAX);
    if (should_fail()) return oom(count * size);
    void *p = calloc(count ? count : 1, size ? size : 1);
    return p ? p : oom(count * size);
}

void *hy_xmalloc_aligned(size_t n) {
    alloc_count++;
    size_t r = (n + 63) / 64 * 64;
    if (r == 0) r = 64;
    if (should_fail()) return oom(n);
    void *p = aligned_alloc(64, r);
    return p ? p : oom(n);
}

void *hy_xrealloc(void *p, size_t n) {
    alloc_count++;
    if (should_fail()) return oom(n);
    void *q = realloc(p, n ? n : 1);
    return q ? q : oom(n);
}

char *hy_xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = hy_xmalloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

hy_status hy_size_mul(size_t *out, const char *what, size_t a, size_t b, size_t c) {
    size_t ab;
    if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, out)) {
        *out = 0;
        return hy_fail(HY_EINVAL, "%s: %zu x %zu x %zu overflows the size range", what, a, b, c);
    }
    return HY_OK;
}

hy_status hy_check_range(const char *file, const char *what, int64_t v, int64_t lo,
                         int64_t hi) {
    if (v >= lo && v <= hi) return HY_OK;
    if (!file) {
        return hy_fail(HY_EINVAL, "h5: %s = %lld is out of range (expected %lld to %lld)", what,
                       (long long)v, (long long)lo, (long long)hi);
    }
    return hy_fail(HY_EINVAL, "'%s': %s = %lld is out of range (expected %lld to %lld)", file,
                   what, (long long)v, (long long)lo, (long long)hi);
}

void hy_free(void *p) { free(p); }
uint64_t hy_alloc_count(void) { return alloc_count; }

/* ===== logging, clock ===== */

static int log_level = -1;

void hy_log(hy_log_level lv, const char *fmt, ...) {
    if (log_level < 0) {
        const char *s = getenv("HYDRA_LOG");
        log_level = HY_LOG_INFO;
        if (s && strcmp(s, "error") == 0) log_level = HY_LOG_ERROR;
        else if (s && strcmp(s, "warn") == 0) log_level = HY_LOG_WARN;
        else if (s && strcmp(s, "debug") == 0) log_level = HY_LOG_DEBUG;
    }
    if ((int)lv > log_level) return;
    static const char *names[] = {"error", "warning", "", "debug"};
    va_list ap;
    va_start(ap, fmt);
    if (lv != HY_LOG_INFO) fprintf(stderr, "hydra: %s: ", names[lv]);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

double hy_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ===== threads ===== */

void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
static int n_threads = 1;

/* An environment variable holding a thread count: 0 when unset or empty, -1 when malformed. */
static long long env_count(const char *name) {
    const char *s = getenv(name);
    if (!s || !*s) return 0;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < 1) return -1;
    return v;
}

hy_status hy_threads_default(int64_t *n) {
    long long v = env_count("HYDRA_THREADS");
    if (v < 0 || v > HY_MAX_THREADS)
        return hy_fail(HY_EINVAL, "HYDRA_THREADS must be an integer in [1, %d] (got '%s')",
                       HY_MAX_THREADS, getenv("HYDRA_THREADS"));
    if (v == 0) {
        /* a Slurm task's allocation (set by --cpus-per-task); capped like the cores */
        v = env_count("SLURM_CPUS_PER_TASK");
        if (v < 0)
            return hy_fail(HY_EINVAL, "SLURM_CPUS_PER_TASK must be an integer >= 1 (got '%s')",
                           getenv("SLURM_CPUS_PER_TASK"));
        if (v > HY_MAX_THREADS) v = HY_MAX_THREADS;
    }
    if (v == 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        v = c < 1 ? 1 : c > HY_MAX_THREADS ? HY_MAX_THREADS : c;
    }
    *n = (int64_t)v;
    return HY_OK;
}

hy_status hy_threads_init(int64_t n) {
    if (n > HY_MAX_THREADS)
        return hy_fail(HY_EINVAL, "threads: %lld is above the limit of %d threads",
                       (long long)n, HY_MAX_THREADS);
    if (n <= 0) HY_TRY(hy_threads_default(&n));
    n_threads = (int)n;
#ifdef _OPENMP
    omp_set_num_threads(n_threads);
#endif
    /* OpenBLAS single-threaded: hy_gemm shares out fixed tiles among hydra's own threads, so
     * that a product's bits never depend on the thread count (gemm.h) */
    openblas_set_num_threads(1);
    return HY_OK;
}

int hy_threads(void) { return n_threads; }

int hy_blas_threads(void) { return openblas_get_num_threads(); }

bool hy_omp_par(bool cond) {
#ifdef _OPENMP
    return cond && !omp_in_parallel();
#else
    (void)cond;
    return false;
#endif
}

/* ===== growable byte buffer ===== */

void hy_buf_release(hy_buf *b) {
    if (!b) return;
    hy_free(b->data);
    memset(b, 0, sizeof *b);
}

hy_status hy_buf_reserve(hy_buf *b, size_t extra) {
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return HY_OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    char *p = hy_xrealloc(b->data, cap);
    if (!p) return HY_ENOMEM;   /* hy_xrealloc recorded "out of memory (N bytes)" */
    b->data = p;
    b->cap = cap;
    return HY_OK;
}

hy_status hy_buf_put(hy_buf *b, const char *s, size_t n) {
    HY_TRY(hy_buf_reserve(b, n));
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return HY_OK;
}

hy_status hy_buf_putc(hy_buf *b, char c) { return hy_buf_put(b, &c, 1); }

hy_status hy_buf_set(hy_buf *b, const char *s, size_t n) {
    b->len = 0;
    return hy_buf_put(b, s, n);
}
