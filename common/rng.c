// common/rng.c: xoshiro256** seeded by splitmix64 (both public-domain algorithms by Vigna).
#include "common/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t* x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void rng_seed(Rng* r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

uint64_t rng_u64(Rng* r) {
    uint64_t* s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float rng_uniform(Rng* r) {
    return (float)(rng_u64(r) >> 40) * (1.0f / 16777216.0f);
}

double rng_uniform_d(Rng* r) {
    return (double)(rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

float rng_normal(Rng* r) {
    double u1 = rng_uniform_d(r), u2 = rng_uniform_d(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

uint64_t rng_below(Rng* r, uint64_t n) {
    // rejection sampling avoids modulo bias
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = rng_u64(r);
    while (x >= lim);
    return x % n;
}

void rng_shuffle_u64(Rng* r, uint64_t* a, uint64_t n) {
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = rng_below(r, i);
        uint64_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}
