// optim/adamw.c: AdamW (Loshchilov & Hutter 2019), exactly as PyTorch's torch.optim.AdamW and
// llm.c compute it:
//   m = b1 m + (1-b1) g            v = b2 v + (1-b2) g^2
//   mhat = m / (1 - b1^t)          vhat = v / (1 - b2^t)
//   p -= lr (mhat / (sqrt(vhat) + eps) + wd p)
// State: m then v (2 arrays of `stride` floats), as llm.c's checkpoints hold them.
//
// Speed: without -ffast-math gcc keeps sqrtf's errno path and will not vectorise the loop
// (measured 420 ms per step for 124M parameters on one core). The AVX-512 and AVX paths below do
// the same IEEE operations in the same order as the scalar loop, lane by lane (no FMA
// contraction, which -std=c11 also disables for the scalar code), so every path gives bitwise
// identical results, and a build for AVX2 (make portable) the same numbers as a native one. The
// AVX-512 path also rounds the updated parameters to the bf16 copy in registers (the integer
// form of bf16_from_float), so the copy costs no second pass over the chunk.
#include <math.h>

#if defined(__AVX__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "optim/optim.h"

#define ADAMW_CHUNK 4096 // elements per parallel work item (a multiple of 8)

typedef struct {
    float b1, b2, c1, c2; // c1 = 1-b1, c2 = 1-b2
    float bc1, bc2;       // bias corrections 1-b^t
    float eps, lr, wd;
} AdamWConst;

// One chunk: the update with the gradient read as g * gscale (x * 1 == x exactly, so gscale = 1
// is the plain update), then the chunk's bf16 copy while it is still in cache.
#ifdef __AVX512F__
// bf16_from_float of 16 lanes: round to nearest even, NaNs kept quiet (common/bf16.h)
static inline __m256i bf16_round16(__m512 x) {
    const __m512i u = _mm512_castps_si512(x);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), lsb));
    r = _mm512_srli_epi32(r, 16);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(
        _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x0040));
    return _mm512_cvtepi32_epi16(r); // each lane is below 2^16: truncation keeps it
}
#endif

static void adamw_span(float* p, const float* g, float* m, float* v, size_t lo, size_t hi,
                       const AdamWConst* k, float gscale, bf16* copy) {
    size_t i = lo;
#ifdef __AVX512F__
    {
        const __m512 gs = _mm512_set1_ps(gscale);
        const __m512 b1 = _mm512_set1_ps(k->b1), b2 = _mm512_set1_ps(k->b2);
        const __m512 c1 = _mm512_set1_ps(k->c1), c2 = _mm512_set1_ps(k->c2);
        const __m512 bc1 = _mm512_set1_ps(k->bc1), bc2 = _mm512_set1_ps(k->bc2);
        const __m512 eps = _mm512_set1_ps(k->eps), lr = _mm512_set1_ps(k->lr);
        const __m512 wd = _mm512_set1_ps(k->wd);
        for (; i + 16 <= hi; i += 16) {
            __m512 gi = _mm512_mul_ps(_mm512_loadu_ps(g + i), gs);
            __m512 pi = _mm512_loadu_ps(p + i);
            __m512 mi =
                _mm512_add_ps(_mm512_mul_ps(b1, _mm512_loadu_ps(m + i)), _mm512_mul_ps(c1, gi));
            __m512 vi = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_loadu_ps(v + i)),
                                      _mm512_mul_ps(_mm512_mul_ps(c2, gi), gi));
            _mm512_storeu_ps(m + i, mi);
            _mm512_storeu_ps(v + i, vi);
            __m512 mhat = _mm512_div_ps(mi, bc1);
            __m512 vhat = _mm512_div_ps(vi, bc2);
            __m512 u = _mm512_div_ps(mhat, _mm512_add_ps(_mm512_sqrt_ps(vhat), eps));
            u = _mm512_add_ps(u, _mm512_mul_ps(wd, pi));
            __m512 pn = _mm512_sub_ps(pi, _mm512_mul_ps(lr, u));
            _mm512_storeu_ps(p + i, pn);
            if (copy) _mm256_storeu_si256((__m256i*)(copy + i), bf16_round16(pn));
        }
    }
    const size_t copied = i; // [lo, copied) of the copy is written
#else
    const size_t copied = lo;
#endif
#ifdef __AVX__
    const __m256 gs = _mm256_set1_ps(gscale);
    const __m256 b1 = _mm256_set1_ps(k->b1), b2 = _mm256_set1_ps(k->b2);
    const __m256 c1 = _mm256_set1_ps(k->c1), c2 = _mm256_set1_ps(k->c2);
    const __m256 bc1 = _mm256_set1_ps(k->bc1), bc2 = _mm256_set1_ps(k->bc2);
    const __m256 eps = _mm256_set1_ps(k->eps), lr = _mm256_set1_ps(k->lr);
    const __m256 wd = _mm256_set1_ps(k->wd);
    for (; i + 8 <= hi; i += 8) {
        __m256 gi = _mm256_mul_ps(_mm256_loadu_ps(g + i), gs);
        __m256 pi = _mm256_loadu_ps(p + i);
        __m256 mi = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(c1, gi));
        __m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + i)),
                                  _mm256_mul_ps(_mm256_mul_ps(c2, gi), gi));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        __m256 mhat = _mm256_div_ps(mi, bc1);
        __m256 vhat = _mm256_div_ps(vi, bc2);
        __m256 u = _mm256_div_ps(mhat, _mm256_add_ps(_mm256_sqrt_ps(vhat), eps));
        u = _mm256_add_ps(u, _mm256_mul_ps(wd, pi));
        _mm256_storeu_ps(p + i, _mm256_sub_ps(pi, _mm256_mul_ps(lr, u)));
    }
#endif
    for (; i < hi; i++) {
        float gi = g[i] * gscale;
        float mi = k->b1 * m[i] + k->c1 * gi;
        float vi = k->b2 * v[i] + k->c2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float mhat = mi / k->bc1;
        float vhat = vi / k->bc2;
        p[i] -= k->lr * (mhat / (sqrtf(vhat) + k->eps) + k->wd * p[i]);
    }
    if (copy)
        for (i = copied; i < hi; i++)
            copy[i] = bf16_from_float(p[i]);
}

static void adamw_update_fused(float* p, const float* g, float* state, size_t stride, size_t n,
                               float lr, float wd, const OptimHParams* h, long t, float gscale,
                               bf16* copy) {
    AdamWConst k = {
        .b1 = h->beta1,
        .b2 = h->beta2,
        .c1 = 1.0f - h->beta1,
        .c2 = 1.0f - h->beta2,
        // bias corrections once per call, in double (b^t underflows gracefully for large t)
        .bc1 = (float)(1.0 - pow((double)h->beta1, (double)t)),
        .bc2 = (float)(1.0 - pow((double)h->beta2, (double)t)),
        .eps = h->eps,
        .lr = lr,
        .wd = wd,
    };
    float* m = state;
    float* v = state + stride;
    long nchunks = (long)((n + ADAMW_CHUNK - 1) / ADAMW_CHUNK);
#pragma omp parallel for schedule(static) if (n >= OPTIM_PAR_MIN)
    for (long c = 0; c < nchunks; c++) {
        size_t lo = (size_t)c * ADAMW_CHUNK;
        size_t hi = n - lo < ADAMW_CHUNK ? n : lo + ADAMW_CHUNK;
        adamw_span(p, g, m, v, lo, hi, &k, gscale, copy);
    }
}

static void adamw_update(float* p, const float* g, float* state, size_t stride, size_t n, float lr,
                         float wd, const OptimHParams* h, long t) {
    adamw_update_fused(p, g, state, stride, n, lr, wd, h, t, 1.0f, NULL);
}

const OptimizerDef optim_adamw = {
    .name = "adamw",
    .formula = "m=b1 m+(1-b1)g; v=b2 v+(1-b2)g^2; p-=lr(mhat/(sqrt(vhat)+eps)+wd p)",
    .state_per_param = 2,
    .update = adamw_update,
    .update_fused = adamw_update_fused,
};
