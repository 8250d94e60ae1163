// optim/clip.h: global-norm clipping. The norms (grad_sumsq, grad_global_norm) and the
// non-finite scan live in common/gradnorm.h, included here.
#ifndef ATTNLAB_CLIP_H
#define ATTNLAB_CLIP_H

#include <stddef.h>

#include "common/gradnorm.h"

// The scale that brings a gradient of global norm `norm` to at most max_norm (1: none, when
// max_norm <= 0 or norm <= max_norm; a non-finite norm is the caller's to detect:
// grad_first_nonfinite), for optim_step_fused's gscale.
float grad_clip_scale(double norm, float max_norm);

#endif
