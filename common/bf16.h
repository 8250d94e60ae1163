// common/bf16.h: bfloat16 numbers (the top 16 bits of an IEEE fp32: sign, 8-bit exponent, 7-bit
// mantissa) and their conversion to and from fp32.
//
// fp32 -> bf16 rounds to nearest, ties to even (as oneDNN and PyTorch do): with u the fp32 bit
// pattern, bf16 = (u + 0x7FFF + ((u >> 16) & 1)) >> 16. The added 0x7FFF carries into bit 16
// exactly when the dropped low half exceeds one half ulp; on an exact half the odd/even bit
// decides. NaNs stay NaN (quiet bit forced, so rounding cannot turn a NaN into an infinity);
// infinities and values rounding past the largest bf16 become infinities, as in IEEE rounding.
// bf16 -> fp32 is exact (append 16 zero bits). The product of two bf16 numbers (8-bit
// significands) has at most 16 significant bits, so it is exact in fp32.
#ifndef ATTNLAB_BF16_H
#define ATTNLAB_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef uint16_t bf16;

static inline bf16 bf16_from_float(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (bf16)((u >> 16) | 0x0040u); // NaN
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (bf16)(u >> 16);
}

static inline float bf16_to_float(bf16 h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// dst[i] = bf16(src[i]), i < n, on OpenMP threads when n is large (elementwise: exact for any
// thread count).
void bf16_from_floats(bf16* dst, const float* src, size_t n);
// dst[i] = float(src[i]) (exact)
void bf16_to_floats(float* dst, const bf16* src, size_t n);
// A strided (rows, cols) view with row stride ld, packed into dense (rows, cols) bf16.
void bf16_pack_rows(bf16* dst, const float* src, int rows, int cols, int ld);

#endif
