// common/rng.h: small deterministic RNG (splitmix64-seeded xoshiro256**) with uniform and normal
// draws. State is plain data so checkpoints can save and restore it exactly.
#ifndef ATTNLAB_RNG_H
#define ATTNLAB_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s[4];
} Rng;

void rng_seed(Rng* r, uint64_t seed);
uint64_t rng_u64(Rng* r);
float rng_uniform(Rng* r);                             // [0, 1)
double rng_uniform_d(Rng* r);                          // [0, 1), 53 bits
float rng_normal(Rng* r);                              // N(0, 1), Box-Muller
uint64_t rng_below(Rng* r, uint64_t n);                // uniform integer in [0, n), n > 0
void rng_shuffle_u64(Rng* r, uint64_t* a, uint64_t n); // Fisher-Yates

#endif
