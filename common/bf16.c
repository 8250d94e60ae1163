// common/bf16.c: bulk fp32 <-> bf16 conversion (see bf16.h for the rounding rule). Written as
// plain loops over bf16_from_float so the compiler vectorises them; large arrays are split over
// OpenMP threads in fixed chunks (elementwise, so the result never depends on the split).
#include "common/bf16.h"

#include <omp.h>

#define BF16_PAR_MIN (1u << 16) // below this, one thread: the fork costs more than it saves

static void from_floats_serial(bf16* restrict dst, const float* restrict src, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = bf16_from_float(src[i]);
}

void bf16_from_floats(bf16* dst, const float* src, size_t n) {
    if (n < BF16_PAR_MIN || omp_in_parallel()) {
        from_floats_serial(dst, src, n);
        return;
    }
    const size_t chunk = BF16_PAR_MIN, nchunk = (n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < nchunk; c++) {
        size_t lo = c * chunk, hi = lo + chunk < n ? lo + chunk : n;
        from_floats_serial(dst + lo, src + lo, hi - lo);
    }
}

void bf16_to_floats(float* restrict dst, const bf16* restrict src, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = bf16_to_float(src[i]);
}

void bf16_pack_rows(bf16* dst, const float* src, int rows, int cols, int ld) {
    if (ld == cols) {
        bf16_from_floats(dst, src, (size_t)rows * (size_t)cols);
        return;
    }
    for (int r = 0; r < rows; r++)
        from_floats_serial(dst + (size_t)r * cols, src + (size_t)r * ld, (size_t)cols);
}
