// common/gradnorm.h: gradient norms and the non-finite scan. Sums run in double over fixed blocks
// reduced in a fixed order, so the norm is identical for any thread count.
#ifndef ATTNLAB_GRADNORM_H
#define ATTNLAB_GRADNORM_H

#include <stddef.h>

double grad_sumsq(const float* g, size_t n);       // sum of squares, deterministic
double grad_global_norm(const float* g, size_t n); // sqrt(grad_sumsq)
// Index of the first non-finite value in g[0..n), or n if all are finite.
size_t grad_first_nonfinite(const float* g, size_t n);

#endif
