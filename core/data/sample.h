/* sample.h: choosing samples of a dataset: row gathers, seeded class-stratified hold-outs and
 * seeded subsets. Indices are 0-based int64 here (the Lua binding converts). Deterministic from
 * the seed (hy_rng), independent of the thread count. */
#ifndef HY_SAMPLE_H
#define HY_SAMPLE_H

#include "tensor/tensor.h"

/* out = rows idx[0..k) of in along dim 0 (any dtype, ndim >= 1); idx int64 [k].
 * Fails naming the first out-of-range index: "sample: index 60000 out of range [0, 60000)". */
hy_status hy_sample_gather(const hy_tensor *in, const hy_tensor *idx, hy_tensor *out);

/* Seeded class-stratified split of labels [N] (any integer dtype, values in [0, n_classes)):
 * `per_class` samples of every class go to `hold` (chosen uniformly without replacement by a
 * per-class stream hy_rng_split(seed, class)), the rest to `keep`. Both are int64 index lists
 * in increasing order (so the original order is preserved). Fails when a class has fewer than
 * per_class samples or a label is out of range (naming the sample). */
hy_status hy_sample_stratified(const hy_tensor *labels, int64_t n_classes, int64_t per_class,
                               uint64_t seed, hy_tensor *keep, hy_tensor *hold);

/* k distinct indices of [0, n), chosen uniformly by `seed`, in increasing order (int64 [k]).
 * Fails when k > n. */
hy_status hy_sample_subset(int64_t n, int64_t k, uint64_t seed, hy_tensor *out);

/* Copies a 1-d integer tensor into int16 [N] labels. Fails naming the first value outside
 * [-32768, 32767] or a non-integer dtype. */
hy_status hy_sample_labels16(const hy_tensor *in, hy_tensor *out);

/* A random permutation of [0, n) (int64 [n]) from `seed`. */
hy_status hy_sample_permutation(int64_t n, uint64_t seed, hy_tensor *out);
/* An owned copy of rows [start, start + count) of in along dim 0. */
hy_status hy_sample_slice(const hy_tensor *in, int64_t start, int64_t count, hy_tensor *out);
/* Concatenation of n tensors along dim 0; all must share dtype and trailing dims. */
hy_status hy_sample_concat(const hy_tensor *const *parts, size_t n, hy_tensor *out);

#endif
