/* rng.c: SplitMix64 seeding, xoshiro256** (Blackman & Vigna), Lemire bounded draws. */
#include "tensor/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void hy_rng_seed(hy_rng *r, uint64_t seed) {
    uint64_t x = seed;
    r->key = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

hy_rng hy_rng_split(const hy_rng *parent, uint64_t key) {
    hy_rng r;
    hy_rng_seed(&r, hy_rng_split_key(parent, key));
    return r;
}

double hy_rng_double(hy_rng *r) {
    return (double)(hy_rng_u64(r) >> 11) * 0x1.0p-53;
}

uint64_t hy_rng_below(hy_rng *r, uint64_t n) {
    /* Lemire: multiply-shift with rejection of the biased low region */
    uint64_t x = hy_rng_u64(r);
    __uint128_t m = (__uint128_t)x * n;
    uint64_t l = (uint64_t)m;
    if (l < n) {
        uint64_t t = (0 - n) % n;
        while (l < t) {
            x = hy_rng_u64(r);
            m = (__uint128_t)x * n;
            l = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

double hy_rng_normal(hy_rng *r) {
    double u1 = hy_rng_double(r);
    double u2 = hy_rng_double(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void hy_rng_shuffle(hy_rng *r, int64_t *idx, size_t n) {
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)hy_rng_below(r, (uint64_t)i);
        int64_t t = idx[i - 1];
        idx[i - 1] = idx[j];
        idx[j] = t;
    }
}

uint64_t hy_hash64(const void *data, size_t n, uint64_t seed) {
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ULL ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return splitmix64(&h);
}
