// optim/clip.c: global-norm gradient clipping (as PyTorch's clip_grad_norm_); the norm itself
// is common/gradnorm.c's deterministic sum of squares.
#include "optim/clip.h"

#include <math.h>
#include <stddef.h>

float grad_clip_scale(double norm, float max_norm) {
    // !(norm > max_norm) is also true for a NaN norm: a non-finite gradient is the caller's to
    // detect (grad_first_nonfinite); scaling it would only turn Inf into NaN
    if (max_norm <= 0.0f || !(norm > (double)max_norm) || isinf(norm)) return 1.0f;
    return (float)((double)max_norm / (norm + 1e-6));
}
