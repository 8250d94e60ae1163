// optim/clip.h: global-norm clipping. The norms (grad_sumsq, grad_global_norm) and the
// non-finite scan live in common/gradnorm.h, included here.
#ifndef ATTNLAB_CLIP_H
#define ATTNLAB_CLIP_H

#include <stddef.h>

#include "common/gradnorm.h"

// Scale g so its norm is at most max_norm (no-op if max_norm <= 0 or norm <= max_norm).
// Returns the scale applied (1 if none).
float grad_clip(float* g, size_t n, double norm, float max_norm);
// The scale grad_clip would apply, without applying it (for optim_step_fused's gscale).
float grad_clip_scale(double norm, float max_norm);

#endif
