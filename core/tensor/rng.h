/* rng.h: the only source of randomness in hydra. xoshiro256** seeded through SplitMix64.
 * Same seed => same stream on every machine (integer arithmetic only; the float and normal
 * draws are derived from the integers with exactly rounded operations).
 * Splitting: hy_rng_split(parent, key) derives an independent child from the parent's *seed key*
 * and `key`, without consuming the parent, so per-member / per-epoch streams do not depend on
 * how much the parent has been used. */
#ifndef HY_RNG_H
#define HY_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct hy_rng {
    uint64_t s[4];
    uint64_t key;     /* the seed key this generator was made from (for splitting) */
} hy_rng;

void hy_rng_seed(hy_rng *r, uint64_t seed);
/* A child generator for stream `key`; the parent is not advanced. */
hy_rng hy_rng_split(const hy_rng *parent, uint64_t key);
/* The seed key of hy_rng_split(parent, key) (its .key) without seeding a generator. */
static inline uint64_t hy_rng_split_key(const hy_rng *parent, uint64_t key) {
    uint64_t x = parent->key ^ 0x6a09e667f3bcc909ULL;
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);          /* SplitMix64 step (rng.c) */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    x = (z ^ (z >> 31)) ^ (key * 0xd1342543de82ef95ULL + 0x2545f4914f6cdd1dULL);
    z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* ===== counter-based draws (dropout masks) =====
 * hy_ctr_bits24(key, i): 24 random bits that are a pure function of a 64-bit stream key and a
 * 32-bit counter i, so element i of a row can be drawn in any order, by any thread, 8 or 16 at a
 * time in vector lanes, and drawn again in a backward pass instead of being stored. Two rounds
 * of a 32-bit integer mixer (Wellons' lowbias32: xorshift-multiply, a bijection), keyed by the
 * two halves of the key; only 32-bit integer operations, so it vectorises on SSE/AVX2/AVX-512
 * and is the same on every machine. The uniform draw is bits24 * 2^-24 (hy_rng_uniform's
 * resolution). */
static inline uint32_t hy_mix32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}
static inline uint32_t hy_ctr_bits24(uint64_t key, uint32_t i) {
    uint32_t h = hy_mix32(i ^ (uint32_t)key);
    h = hy_mix32(h ^ (uint32_t)(key >> 32));
    return h >> 8;
}
/* The next 64 bits of xoshiro256**. Inline (with hy_rng_uniform) because the kernels draw one
 * number per element (dropout masks): an out-of-line call per draw cost more than the draw. */
static inline uint64_t hy_rng_u64(hy_rng *r) {
    uint64_t *s = r->s;
    uint64_t x = s[1] * 5;
    uint64_t result = ((x << 7) | (x >> 57)) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
}
/* Uniform in [0, 1) with 24 (float) or 53 (double) random bits. */
static inline float hy_rng_uniform(hy_rng *r) {
    return (float)(hy_rng_u64(r) >> 40) * 0x1.0p-24f;
}
double hy_rng_double(hy_rng *r);
/* Uniform integer in [0, n), unbiased (Lemire's method); n > 0. */
uint64_t hy_rng_below(hy_rng *r, uint64_t n);
/* Standard normal (Box-Muller on double draws). */
double hy_rng_normal(hy_rng *r);
/* Fisher-Yates shuffle of an index array. */
void hy_rng_shuffle(hy_rng *r, int64_t *idx, size_t n);
/* A stable 64-bit hash of bytes (FNV-1a folded through SplitMix64); used for config hashes. */
uint64_t hy_hash64(const void *data, size_t n, uint64_t seed);

#endif
