// attention/rowops.h: small kernels shared by the attention variants, as static inline functions.
//
// Row kernels work on one causal row of length n (n = t + 1): s[0..n) scores, a[0..n) weights,
// da the gradient of a, ds the gradient of s (accumulated with +=). Each one keeps the exact
// operation order of the loops it replaced, so the variants that call it give bit-identical
// results. Maxima use `x > m ? x : m`: an inline comparison (fmaxf is a libm call per entry)
// that, like fmaxf, ignores a NaN entry and gives the same differences s_j - m.
//
// The layer helpers that run the driver's core with position encoding, for layer-level variants
// that wrap an inner row map, are in attention/layer.h.
#ifndef ATTNLAB_ROWOPS_H
#define ATTNLAB_ROWOPS_H

#include <math.h>
#include <stdint.h>

#include "attention/rowmap.h"

// max(x, y) without libm's NaN and signed-zero handling (for finite inputs), so loops vectorise
static inline real rowops_max_f(real x, real y) {
    return x > y ? x : y;
}

// exp(x) for x <= 0, inline and vectorisable (a libm call per entry otherwise): Cody-Waite
// reduction x = k ln2 + r, the Cephes degree-6 polynomial for exp(r), 2^k from the exponent
// bits; relative error <= 1.4 ulp, 0 below -87 (where exp underflows to subnormals anyway).
// Only for x <= 0 (k + 127 must stay a valid exponent): the argument of a max-shifted softmax.
#ifdef ATTN_REAL_DOUBLE
// The double build uses libm exp (the polynomial is accurate to float precision only).
static inline real rowops_exp_neg(real x) {
    return exp(x);
}
#else
static inline float rowops_exp_neg(float x) {
    float xc = x < -87.0f ? -87.0f : x;
    float k = rintf(xc * 1.44269504088896341f);
    float r = xc - k * 0.693359375f;
    r = r + k * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union {
        uint32_t u;
        float f;
    } sc = {.u = (uint32_t)((int)k + 127) << 23};
    return x < -87.0f ? 0.0f : p * sc.f;
}
#endif

// splitmix64's finaliser: a 64-bit hash, the source of every stochastic variant's draws (each
// draw a pure function of (seed, step, layer, head, position), so draws do not depend on
// threads and repeat on resume)
static inline uint64_t rowops_mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// ---------------------------------------------------------------------------------------------
// Stochastic draws. Every stochastic row map (gumbel, quantized's stochastic rounding, window's
// stochastic width) takes its random bits from rowops_draw(ctx, key): the hash of a key the
// variant builds from (seed, step, layer, head, position). A test sets ctx->draw_pin to -1 or +1
// to replace every draw by the hash's lowest (0) or highest (UINT64_MAX) output, so it can drive
// any variant to its extreme draws without knowing how the variant builds its keys
// (tests/test_attention_draws.c); real calls leave draw_pin at 0.
static inline uint64_t rowops_draw(const AttnRowCtx* ctx, uint64_t key) {
    if (ctx->draw_pin) return ctx->draw_pin < 0 ? 0 : UINT64_MAX;
    return rowops_mix64(key);
}

// Bits of the integer behind an open-interval uniform (see rowops_uniform_open).
#define ROWOPS_UNIFORM_BITS 23

// u in the open interval (0, 1) from m in [0, 2^23): u = (m + 1/2) 2^-23, exact in float32
// (m + 1/2 < 2^23 needs 24 significant bits), from 2^-24 (m = 0) to 1 - 2^-24 (m = 2^23 - 1), so
// ln u and ln(1 - u) are finite and nonzero. (With a 24-bit m, (2^24 - 1/2) 2^-24 needs 25 bits and
// rounds to exactly 1 in float32.) The distribution is symmetric about 1/2.
static inline real rowops_uniform_open(uint32_t m) {
    return ((real)m + 0.5f) * 0x1.0p-23f;
}

// The open-interval uniform of a draw: its top ROWOPS_UNIFORM_BITS bits as m.
static inline real rowops_uniform_open_bits(uint64_t bits) {
    return rowops_uniform_open((uint32_t)(bits >> (64 - ROWOPS_UNIFORM_BITS)));
}

// <x, y> = sum_j x_j y_j over j < n, summed in index order
static inline real rowops_dot(const real* x, const real* y, int n) {
    real dot = 0.0f;
    for (int j = 0; j < n; j++)
        dot += x[j] * y[j];
    return dot;
}

// ---------------------------------------------------------------------------------------------
// softmax with expf (sums in index order)

// a = softmax(s): a_j = exp(s_j - m) / sum_k exp(s_k - m), m = max_k s_k. a may equal s.
static inline void rowops_softmax(real* a, const real* s, int n) {
    real m = -INFINITY;
    for (int j = 0; j < n; j++)
        m = s[j] > m ? s[j] : m;
    real sum = 0.0f;
    for (int j = 0; j < n; j++) {
        a[j] = real_exp(s[j] - m);
        sum += a[j];
    }
    real inv = 1.0f / sum;
    for (int j = 0; j < n; j++)
        a[j] *= inv;
}

// Softmax VJP: ds_j += a_j (da_j - <a, da>) with a = softmax(.); returns <a, da>.
static inline real rowops_softmax_backward(real* ds, const real* da, const real* a, int n) {
    real dot = rowops_dot(a, da, n);
    for (int j = 0; j < n; j++)
        ds[j] += a[j] * (da[j] - dot);
    return dot;
}

// Scaled softmax a = softmax(beta s) (z_j = beta s_j; the max is taken over z, so every exponent
// is <= 0 whatever the sign of beta).
static inline void rowops_softmax_scaled(real* a, const real* s, int n, real beta) {
    for (int j = 0; j < n; j++)
        a[j] = beta * s[j];
    rowops_softmax(a, a, n);
}

// VJP of a = softmax(beta s) for a fixed beta: with dz_j = a_j (da_j - <a, da>),
// ds_j += beta dz_j; returns <s, dz>, the gradient of the loss with respect to beta.
static inline real rowops_softmax_scaled_backward(real* ds, const real* da, const real* s,
                                                  const real* a, int n, real beta) {
    real dot = rowops_dot(a, da, n);
    real sdz = 0.0f; // <s, dz>
    for (int j = 0; j < n; j++) {
        real dz = a[j] * (da[j] - dot);
        ds[j] += beta * dz;
        sdz += s[j] * dz;
    }
    return sdz;
}

// ---------------------------------------------------------------------------------------------
// softmax with the inline exp (vectorised; `omp simd` sums, in the order of the compiled code)

// e_j = exp(s_j - max s) in (0, 1] through rowops_exp_neg; returns sum_j e_j (>= 1).
static inline real rowops_exp_shifted(real* e, const real* s, int n) {
    real m = -INFINITY;
    for (int j = 0; j < n; j++)
        m = rowops_max_f(m, s[j]);
    for (int j = 0; j < n; j++)
        e[j] = rowops_exp_neg(s[j] - m);
    real sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < n; j++)
        sum += e[j];
    return sum;
}

// a = softmax(s) through rowops_exp_shifted (each weight within a few ulp of the expf version).
static inline void rowops_softmax_fast(real* a, const real* s, int n) {
    real inv = 1.0f / rowops_exp_shifted(a, s, n);
    for (int j = 0; j < n; j++)
        a[j] *= inv;
}

// Softmax VJP as rowops_softmax_backward, with the <a, da> sum under `omp simd`.
static inline void rowops_softmax_backward_simd(real* ds, const real* da, const real* a, int n) {
    real dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < n; j++)
        dot += a[j] * da[j];
    for (int j = 0; j < n; j++)
        ds[j] += a[j] * (da[j] - dot);
}

// ---------------------------------------------------------------------------------------------
// softmax in double (each weight rounded to float once, so it is smooth in the logits)

// The row scratch viewed as doubles: ctx->scratch rounded up to 8-byte alignment. A variant using
// it declares scratch_floats(T) >= 2 T + 2 (T doubles plus the alignment slack).
static inline double* rowops_scratch_double(real* scratch) {
    return (double*)(((uintptr_t)scratch + 7) & ~(uintptr_t)7);
}

// a = (float) softmax(z) for logits z[0..n) in double; z is overwritten with exp(z_j - max z).
static inline void rowops_softmax_double(real* a, double* z, int n) {
    double m = -INFINITY;
    for (int j = 0; j < n; j++)
        m = z[j] > m ? z[j] : m;
    double sum = 0.0;
    for (int j = 0; j < n; j++) {
        z[j] = exp(z[j] - m);
        sum += z[j];
    }
    double inv = 1.0 / sum;
    for (int j = 0; j < n; j++)
        a[j] = (real)(z[j] * inv);
}

// Row statistic of sparse maps: the fraction of keys with nonzero weight (signature of
// AttnVariant.row_stat).
static inline real rowops_support(const real* a, const real* s, int n, const AttnRowCtx* ctx) {
    (void)s;
    (void)ctx;
    int k = 0;
    for (int j = 0; j < n; j++)
        k += a[j] > 0.0f;
    return (real)k / (real)n;
}

// Straight-through softmax, for quantized maps whose backward is the softmax VJP (AttnVariant
// row signatures): the smooth surrogate a = softmax(s), and its VJP ds += p (da - <p, da>)
// with p recomputed into ctx->scratch (n floats).
static inline void rowops_ste_softmax(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    (void)ctx;
    rowops_softmax_fast(a, s, n);
}

static inline void rowops_ste_softmax_backward(real* ds, const real* da, const real* s,
                                               const real* a, int n, const AttnRowCtx* ctx) {
    (void)a;
    real* p = ctx->scratch;
    rowops_softmax_fast(p, s, n);
    rowops_softmax_backward_simd(ds, da, p, n);
}

#endif
