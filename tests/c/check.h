/* check.h: the tiny C test harness. A test file defines `static void test_x(void)` functions and
 * a main() that calls RUN(test_x) for each, then `return check_exit("test_module");`.
 * CHECK keeps going after a failure; check_close reports the worst element.
 * Output: one line per failed check, then "<file>: N passed, N failed" where N counts tests. */
#ifndef HY_CHECK_H
#define HY_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nn/xfmr.h"

extern int check_failures;     /* failed CHECKs in the current test */
extern int check_tests_passed;
extern int check_tests_failed;

#define CHECK(cond, ...) do { if (!(cond)) { check_failures++;                     \
    fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);      \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* Checks a hy_status-returning expression is HY_OK; prints hy_errmsg() otherwise. */
#define CHECK_OK(expr) do { hy_status cst_ = (expr); if (cst_ != HY_OK) { check_failures++; \
    fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, hy_errmsg()); } } while (0)

/* Checks that expr fails with status st and that hy_errmsg() equals msg exactly. */
#define CHECK_FAIL(expr, st, msg) check_fail_((expr), (st), (msg), #expr, __FILE__, __LINE__)
/* Same, but msg only has to occur inside hy_errmsg(). */
#define CHECK_FAIL_HAS(expr, st, msg) check_fail_has_((expr), (st), (msg), #expr, __FILE__, __LINE__)

#define RUN(fn) check_run_(fn, #fn)

void check_run_(void (*fn)(void), const char *name);
void check_fail_(int got, int want, const char *msg, const char *expr, const char *file, int line);
void check_fail_has_(int got, int want, const char *msg, const char *expr, const char *file,
                     int line);
/* Reports the worst index, got/want and tolerances; counts one failure per call.
 * Passes when |got - want| <= atol + rtol * |want| everywhere and nothing is non-finite. */
int check_close(const char *what, const float *got, const float *want, size_t n,
                double atol, double rtol);
int check_close_d(const char *what, const double *got, const double *want, size_t n,
                  double atol, double rtol);
/* Seed for randomised tests: HYDRA_SEED or 1234; printed once. */
uint64_t check_seed(void);
/* A fresh temporary directory (removed at exit with its contents). */
const char *check_tmpdir(void);
/* A tiny ViT for unit tests: 8x8x1 images, patch 4, d 16, 2 heads, depth 2, mlp 32, 3 classes,
 * no dropout (tests set what they need on top). */
hy_xfmr_config check_tiny_vit(void);
/* Prints "<name>: N passed, N failed"; returns 0 when everything passed, else 1. */
int check_exit(const char *name);

#endif
