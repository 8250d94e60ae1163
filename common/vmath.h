// common/vmath.h: a vectorised exp for the memory-bound passes (cross-entropy, GELU), the same
// algorithm in three widths: AVX-512 (16 lanes), AVX2 + FMA (8 lanes) and scalar. Every width
// does the same IEEE operations in the same order on each element (fused multiply-adds
// included), so an element's result never depends on the ISA path, its position in an array,
// the array's length or the thread count.
//
// exp(x), x fp32:
//   n = rint(x log2 e)                      (round to nearest even, exact as an integer)
//   r = x - n ln2_hi - n ln2_lo             (Cody-Waite: ln2_hi has 8 trailing zero bits, so
//                                            n ln2_hi is exact for |n| <= 128; two FMAs)
//   e^r = sum_{k<=7} r^k / k!               (Horner with FMAs; |r| <= ln2/2, truncation error
//                                            (ln2/2)^8 / 8! < 5e-9, below a quarter ulp)
//   exp(x) = e^r 2^n                        (2^n built from its exponent bits)
// Against double exp over every 97th float in [-87.3, 88.37] (tests/test_vmath.c): at most 0.92
// ulp, so below 1 ulp. Special cases:
// x > 88.37 (where 2^n would overflow the exponent) gives +Inf, x < -87.3 gives +0 (exp(-87.3)
// is 1.2e-38, the smallest normal float: denormal results are flushed), NaN stays NaN.
//
// tanh(u) = sign(u) (1 - 2 / (exp(2|u|) + 1)): for large |u| exp overflows to Inf and the
// quotient to 0, so tanh saturates at +-1 without a branch; near 0 the absolute error is below
// 1.2e-7, which is what GELU's 1 + tanh u and 1 - tanh^2 u need.
#ifndef ATTNLAB_VMATH_H
#define ATTNLAB_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#define VM_EXP_HI 88.37f // above: +Inf
#define VM_EXP_LO -87.3f // below: +0
#define VM_LOG2E  1.44269504088896341f
#define VM_LN2_HI 0.693145751953125f // ln 2 rounded to 16 significant bits
#define VM_LN2_LO 1.42860682030941723212e-6f
#define VM_C7     (1.0f / 5040.0f)
#define VM_C6     (1.0f / 720.0f)
#define VM_C5     (1.0f / 120.0f)
#define VM_C4     (1.0f / 24.0f)
#define VM_C3     (1.0f / 6.0f)
#define VM_C2     0.5f

static inline float vm_expf(float x) {
    if (isnan(x)) return x;
    if (x > VM_EXP_HI) return INFINITY;
    if (x < VM_EXP_LO) return 0.0f;
    float n = rintf(x * VM_LOG2E);
    float r = fmaf(-n, VM_LN2_HI, x);
    r = fmaf(-n, VM_LN2_LO, r);
    float p = fmaf(VM_C7, r, VM_C6);
    p = fmaf(p, r, VM_C5);
    p = fmaf(p, r, VM_C4);
    p = fmaf(p, r, VM_C3);
    p = fmaf(p, r, VM_C2);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &bits, 4);
    return p * s;
}

static inline float vm_tanhf(float u) {
    float e = vm_expf(2.0f * fabsf(u));
    float t = 1.0f - 2.0f / (e + 1.0f);
    return copysignf(t, u);
}

#if defined(__AVX512F__)
static inline __m512 vm_exp16(__m512 x) {
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    const __mmask16 hi = _mm512_cmp_ps_mask(x, _mm512_set1_ps(VM_EXP_HI), _CMP_GT_OQ);
    const __mmask16 lo = _mm512_cmp_ps_mask(x, _mm512_set1_ps(VM_EXP_LO), _CMP_LT_OQ);
    // clamp so the exponent arithmetic stays in range; the masks restore the special cases
    __m512 xc =
        _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(VM_EXP_LO)), _mm512_set1_ps(VM_EXP_HI));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(VM_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(VM_LN2_HI), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(VM_LN2_LO), r);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(VM_C7), r, _mm512_set1_ps(VM_C6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VM_C5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VM_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VM_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VM_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512i bits =
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
    y = _mm512_mask_mov_ps(y, lo, _mm512_setzero_ps());
    y = _mm512_mask_mov_ps(y, hi, _mm512_set1_ps(INFINITY));
    return _mm512_mask_mov_ps(y, nan, x);
}

static inline __m512 vm_tanh16(__m512 u) {
    const __m512 sign = _mm512_set1_ps(-0.0f);
    __m512 a = _mm512_andnot_ps(sign, u);
    __m512 e = vm_exp16(_mm512_mul_ps(_mm512_set1_ps(2.0f), a));
    __m512 t =
        _mm512_sub_ps(_mm512_set1_ps(1.0f),
                      _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
    return _mm512_or_ps(t, _mm512_and_ps(sign, u));
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
static inline __m256 vm_exp8(__m256 x) {
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    const __m256 hi = _mm256_cmp_ps(x, _mm256_set1_ps(VM_EXP_HI), _CMP_GT_OQ);
    const __m256 lo = _mm256_cmp_ps(x, _mm256_set1_ps(VM_EXP_LO), _CMP_LT_OQ);
    __m256 xc =
        _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(VM_EXP_LO)), _mm256_set1_ps(VM_EXP_HI));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(VM_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(VM_LN2_HI), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(VM_LN2_LO), r);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(VM_C7), r, _mm256_set1_ps(VM_C6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VM_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VM_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VM_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VM_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i bits =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
    y = _mm256_andnot_ps(lo, y);
    y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), hi);
    return _mm256_blendv_ps(y, x, nan);
}

static inline __m256 vm_tanh8(__m256 u) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 a = _mm256_andnot_ps(sign, u);
    __m256 e = vm_exp8(_mm256_mul_ps(_mm256_set1_ps(2.0f), a));
    __m256 t =
        _mm256_sub_ps(_mm256_set1_ps(1.0f),
                      _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
    return _mm256_or_ps(t, _mm256_and_ps(sign, u));
}
#endif

#endif
