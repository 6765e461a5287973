/* check.c: see check.h. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tensor/base.h"

int check_failures;
int check_tests_passed;
int check_tests_failed;

void check_run_(void (*fn)(void), const char *name) {
    int before = check_failures;
    hy_clear_error();
    fn();
    if (check_failures == before) check_tests_passed++;
    else {
        check_tests_failed++;
        fprintf(stderr, "  FAIL %s\n", name);
    }
}

void check_fail_(int got, int want, const char *msg, const char *expr, const char *file,
                 int line) {
    if (got != want) {
        check_failures++;
        fprintf(stderr, "%s:%d: %s returned status %d, want %d (message: %s)\n", file, line,
                expr, got, want, hy_errmsg());
    } else if (msg && strcmp(hy_errmsg(), msg) != 0) {
        check_failures++;
        fprintf(stderr, "%s:%d: %s message\n  got:  %s\n  want: %s\n", file, line, expr,
                hy_errmsg(), msg);
    }
}

void check_fail_has_(int got, int want, const char *msg, const char *expr, const char *file,
                     int line) {
    if (got != want) {
        check_failures++;
        fprintf(stderr, "%s:%d: %s returned status %d, want %d (message: %s)\n", file, line,
                expr, got, want, hy_errmsg());
    } else if (msg && !strstr(hy_errmsg(), msg)) {
        check_failures++;
        fprintf(stderr, "%s:%d: %s message\n  got:  %s\n  want it to contain: %s\n", file, line,
                expr, hy_errmsg(), msg);
    }
}

static int close_impl(const char *what, size_t n, double atol, double rtol,
                      double (*get)(const void *, size_t), const void *got, const void *want) {
    size_t worst = 0, bad = 0;
    double worst_ex = -1.0;
    for (size_t i = 0; i < n; i++) {
        double g = get(got, i), w = get(want, i);
        double ex;
        if (!isfinite(g) || !isfinite(w)) ex = (g == w) ? 0.0 : (double)INFINITY;
        else ex = fabs(g - w) - (atol + rtol * fabs(w));
        if (ex > 0) bad++;
        if (ex > worst_ex) { worst_ex = ex; worst = i; }
    }
    if (bad == 0) return 1;
    check_failures++;
    fprintf(stderr, "check_close %s: %zu of %zu elements off; worst at [%zu]: got %.9g want %.9g "
            "(|diff| %.3g, atol %.3g, rtol %.3g)\n", what, bad, n, worst, get(got, worst),
            get(want, worst), fabs(get(got, worst) - get(want, worst)), atol, rtol);
    return 0;
}

static double get_f(const void *p, size_t i) { return (double)((const float *)p)[i]; }
static double get_d(const void *p, size_t i) { return ((const double *)p)[i]; }

int check_close(const char *what, const float *got, const float *want, size_t n, double atol,
                double rtol) {
    return close_impl(what, n, atol, rtol, get_f, got, want);
}

int check_close_d(const char *what, const double *got, const double *want, size_t n,
                  double atol, double rtol) {
    return close_impl(what, n, atol, rtol, get_d, got, want);
}

uint64_t check_seed(void) {
    static int printed;
    static uint64_t seed = 1234;
    if (!printed) {
        const char *s = getenv("HYDRA_SEED");
        if (s && *s) seed = strtoull(s, NULL, 10);
        fprintf(stderr, "seed %llu (HYDRA_SEED)\n", (unsigned long long)seed);
        printed = 1;
    }
    return seed;
}

static char tmpdir[256];

static void rm_tmpdir(void) {
    if (tmpdir[0]) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmpdir);
    }
}

const char *check_tmpdir(void) {
    if (!tmpdir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/hydra-test-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(tmpdir)) {
            perror("mkdtemp");
            exit(1);
        }
        atexit(rm_tmpdir);
    }
    return tmpdir;
}

int check_exit(const char *name) {
    printf("%s: %d passed, %d failed\n", name, check_tests_passed, check_tests_failed);
    fflush(stdout);
    return check_tests_failed == 0 ? 0 : 1;
}

hy_xfmr_config check_tiny_vit(void) {
    hy_xfmr_config c;
    memset(&c, 0, sizeof c);
    c.kind = HY_XFMR_VIT;
    c.image_size = 8;
    c.channels = 1;
    c.patch = 4;
    c.d_model = 16;
    c.n_heads = 2;
    c.depth = 2;
    c.d_mlp = 32;
    c.n_classes = 3;
    return c;
}
