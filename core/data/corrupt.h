/* corrupt.h: Fashion-MNIST-C: common corruptions of greyscale uint8 images [N,H,W] at five
 * severities, in the style of CIFAR-10-C (Hendrycks & Dietterich 2019), with parameters scaled
 * for 28x28 greyscale. Deterministic from the seed: image n of corruption c draws from
 * hy_rng_split(hy_rng_split(seed, c), n), so its random field is the same at every severity
 * (severities are nested: noise amplitudes grow, impulse sets grow, the blur angle is fixed)
 * and the result does not depend on the thread count.
 * Entry points: hy_corrupt_count / _name / _param / _describe, hy_corrupt_apply. */
#ifndef HY_CORRUPT_H
#define HY_CORRUPT_H

#include "tensor/tensor.h"

#define HY_CORRUPT_SEVERITIES 5

/* Number of corruptions and their names (0-based index, stable order). */
size_t hy_corrupt_count(void);
const char *hy_corrupt_name(size_t i);
/* The index of a name, or -1. */
int hy_corrupt_find(const char *name);
/* The main parameter of corruption i at severity s (1..5), and a one-line description of what
 * it means (for /meta). */
double hy_corrupt_param(size_t i, int severity);
const char *hy_corrupt_describe(size_t i);

/* out = corruption `name` at severity 1..5 applied to every image of in (uint8 [N,H,W], H and W
 * >= 2); out has in's shape (owned; zeroed on failure). Fails with HY_EINVAL:
 * "corrupt: unknown corruption 'fog' (known: gaussian_noise, ...)",
 * "corrupt: severity 6 out of range [1, 5]", or on a wrong input type. Uses OpenMP threads. */
hy_status hy_corrupt_apply(const char *name, int severity, uint64_t seed, const hy_tensor *in,
                           hy_tensor *out);

/* Noise images uint8 [n,h,w] (validation OOD): "gaussian" draws each pixel/255 from
 * N(mean, std^2), "uniform" from U[0,1) (mean, std unused); clipped to [0,1] and rounded.
 * Image i uses hy_rng_split(seed, i). Fails on an unknown kind. */
hy_status hy_corrupt_noise_images(const char *kind, int64_t n, int64_t h, int64_t w, double mean,
                                  double std, uint64_t seed, hy_tensor *out);

#endif
