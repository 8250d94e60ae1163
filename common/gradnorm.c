// common/gradnorm.c: sums of squares and the non-finite scan over float buffers (gradients),
// deterministic for any thread count. The sum of squares is reduced over fixed 64K-element
// blocks: each block's partial is summed in double in a fixed order (8 interleaved lanes, then
// the lanes in order), blocks run in parallel into an array, and the array is summed serially
// in block order. The partition depends only on n, so the result is bitwise identical for any
// thread count.
#include "common/gradnorm.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define GN_BLOCK ((size_t)1 << 16)
#define GN_LANES 8

static double block_sumsq(const float* g, size_t n) {
    double acc[GN_LANES] = {0};
    size_t i = 0;
    for (; i + GN_LANES <= n; i += GN_LANES)
        for (int k = 0; k < GN_LANES; k++)
            acc[k] += (double)g[i + k] * (double)g[i + k];
    for (int k = 0; i < n; i++, k++)
        acc[k] += (double)g[i] * (double)g[i];
    double s = 0.0;
    for (int k = 0; k < GN_LANES; k++)
        s += acc[k];
    return s;
}

double grad_sumsq(const float* g, size_t n) {
    size_t nb = (n + GN_BLOCK - 1) / GN_BLOCK;
    if (nb <= 1) return block_sumsq(g, n);
    double local[256];
    double* part = nb <= 256 ? local : mallocCheck(nb * sizeof(double));
    long nbl = (long)nb;
#pragma omp parallel for schedule(static)
    for (long b = 0; b < nbl; b++) {
        size_t lo = (size_t)b * GN_BLOCK;
        size_t len = n - lo < GN_BLOCK ? n - lo : GN_BLOCK;
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
    size_t nb = (n + GN_BLOCK - 1) / GN_BLOCK;
    size_t first = n;
    long nbl = (long)nb;
#pragma omp parallel for schedule(static) reduction(min : first)
    for (long b = 0; b < nbl; b++) {
        size_t lo = (size_t)b * GN_BLOCK;
        size_t hi = n - lo < GN_BLOCK ? n : lo + GN_BLOCK;
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
