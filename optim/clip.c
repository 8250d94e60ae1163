// optim/clip.c: gradient norms and global-norm clipping (as PyTorch's clip_grad_norm_).
// The sum of squares is reduced over fixed 64K-element blocks: each block's partial is summed in
// double in a fixed order (8 interleaved lanes, then the lanes in order), blocks run in parallel
// into an array, and the array is summed serially in block order. The partition depends only on
// n, so the result is bitwise identical for any thread count.
#include "optim/clip.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define CLIP_BLOCK ((size_t)1 << 16)
#define CLIP_LANES 8

static double block_sumsq(const float* g, size_t n) {
    double acc[CLIP_LANES] = {0};
    size_t i = 0;
    for (; i + CLIP_LANES <= n; i += CLIP_LANES)
        for (int k = 0; k < CLIP_LANES; k++)
            acc[k] += (double)g[i + k] * (double)g[i + k];
    for (int k = 0; i < n; i++, k++)
        acc[k] += (double)g[i] * (double)g[i];
    double s = 0.0;
    for (int k = 0; k < CLIP_LANES; k++)
        s += acc[k];
    return s;
}

double grad_sumsq(const float* g, size_t n) {
    size_t nb = (n + CLIP_BLOCK - 1) / CLIP_BLOCK;
    if (nb <= 1) return block_sumsq(g, n);
    double local[256];
    double* part = nb <= 256 ? local : mallocCheck(nb * sizeof(double));
    long nbl = (long)nb;
#pragma omp parallel for schedule(static)
    for (long b = 0; b < nbl; b++) {
        size_t lo = (size_t)b * CLIP_BLOCK;
        size_t len = n - lo < CLIP_BLOCK ? n - lo : CLIP_BLOCK;
        part[b] = block_sumsq(g + lo, len);
    }
    double s = 0.0;
    for (size_t b = 0; b < nb; b++)
        s += part[b];
    if (part != local) free(part);
    return s;
}

double grad_global_norm(const float* g, size_t n) {
    return sqrt(grad_sumsq(g, n));
}

float grad_clip(float* g, size_t n, double norm, float max_norm) {
    // !(norm > max_norm) is also true for a NaN norm: a non-finite gradient is the caller's to
    // detect (grad_first_nonfinite); scaling it would only turn Inf into NaN
    if (max_norm <= 0.0f || !(norm > (double)max_norm) || isinf(norm)) return 1.0f;
    float scale = (float)((double)max_norm / (norm + 1e-6));
#pragma omp parallel for schedule(static) if (n >= 32768)
    for (size_t i = 0; i < n; i++)
        g[i] *= scale;
    return scale;
}

// 1 if g[0..n) holds an Inf or NaN (exponent bits all ones); branch-free so it vectorises.
static int block_has_nonfinite(const float* g, size_t n) {
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, g + i, sizeof(b));
        bad |= (uint32_t)((b & 0x7f800000u) == 0x7f800000u);
    }
    return bad != 0;
}

size_t grad_first_nonfinite(const float* g, size_t n) {
    size_t nb = (n + CLIP_BLOCK - 1) / CLIP_BLOCK;
    size_t first = n;
    long nbl = (long)nb;
#pragma omp parallel for schedule(static) reduction(min : first)
    for (long b = 0; b < nbl; b++) {
        size_t lo = (size_t)b * CLIP_BLOCK;
        size_t hi = n - lo < CLIP_BLOCK ? n : lo + CLIP_BLOCK;
        if (!block_has_nonfinite(g + lo, hi - lo)) continue;
        for (size_t i = lo; i < hi; i++) {
            if (!isfinite(g[i])) {
                if (i < first) first = i;
                break;
            }
        }
    }
    return first;
}
