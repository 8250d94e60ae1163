// optim/clip.h: gradient norms and global-norm clipping. Sums run in double over fixed blocks
// reduced in a fixed order, so the norm is identical for any thread count.
#ifndef ATTNLAB_CLIP_H
#define ATTNLAB_CLIP_H

#include <stddef.h>

double grad_sumsq(const float* g, size_t n);       // sum of squares, deterministic
double grad_global_norm(const float* g, size_t n); // sqrt(grad_sumsq)
// Scale g so its norm is at most max_norm (no-op if max_norm <= 0 or norm <= max_norm).
// Returns the scale applied (1 if none).
float grad_clip(float* g, size_t n, double norm, float max_norm);
// Index of the first non-finite value in g[0..n), or n if all are finite.
size_t grad_first_nonfinite(const float* g, size_t n);

#endif
