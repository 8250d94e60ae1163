// attention/pot.c: power-of-two softmax ("Rowmax-PoT") with a straight-through backward.
//
//   t_j = log2(e) (s_j - max s) <= 0,   w_j = 2^(Q(t_j)),   a = w / sum w
//   Q(t) = round(t 2^r) / 2^r   (r = 0: pure powers of two, exponent only)
//
// Source: the seed abstract 002#9 (coarse log2-domain weights anchored at the row max, inside
// FlashAttention-4; inference only); the paper was not located, so the grid follows VARIANTS.md
// A15. Using it during training is an extension.
// Hyperparameters (no learnable parameters):
//   attn.frac_bits = 0 in [0, 10]   r: fractional bits of the exponent (grid step 2^-r)
//   attn.round     = nearest|floor  rounding of t 2^r to an integer
// Rows sum to 1 (normalised after quantisation); shift-invariant (t is max-anchored).
//
// Numerics: t <= 0, so every w is in (0, 1] (0 below 2^-126) and the max has w = 1, so the sum
// is >= 1 and finite for any finite scores. With r = 0 a weight is an exact power of two built
// from the exponent bits, no transcendental; with r > 0 an inline exp (<= 1.4 ulp) per entry.
//
// Backward (straight-through): Q is treated as the identity, which turns the map into the
// softmax. backward_row is the exact softmax VJP at the unquantised p = softmax(s), recomputed
// from s:
//   ds_j = p_j (da_j - <p, da>)
// and surrogate_row is that softmax.
//
// Reference: paper, not located (seed abstract 002#9; design of VARIANTS.md A15)
// Deviations from it: the source uses the power-of-two weights at inference inside
//   FlashAttention-4; training with them (straight-through backward) is an extension; the exponent
//   grid (attn.frac_bits, attn.round) is this implementation's.
#include <math.h>
#include <stdint.h>

#include "attention/rowmap.h"
#include "attention/rowops.h"

enum { HP_FRAC, HP_ROUND, N_HP };

static const AttnHParamSpec POT_HP[N_HP] = {
    [HP_FRAC] = {"frac_bits", 0, 0, 10, NULL,
                 "fractional bits r (integer) of the log2 weight: grid step 2^-r"},
    [HP_ROUND] = {"round", 0, 0, 0, "nearest|floor", "rounding of the scaled exponent"},
};

static size_t pot_scratch(int T) {
    return (size_t)T;
}

// 2^k for an integer k <= 0, built from the exponent bits (ldexpf is a library call); 0 below
// 2^-126 (such a weight is under 1e-38 of the row maximum's, which is 1)
#ifdef ATTN_REAL_DOUBLE
static inline real pow2i(int k) { // the double build: the same values through ldexp
    return k < -126 ? 0.0 : ldexp(1.0, k);
}
#else
static inline float pow2i(int k) {
    union {
        uint32_t u;
        float f;
    } v = {.u = (uint32_t)(k + 127) << 23};
    return k < -126 ? 0.0f : v.f;
}
#endif

static void pot_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const int r = (int)real_rint(ctx->hp->v[HP_FRAC]);
    const int use_floor = ctx->hp->v[HP_ROUND] >= 0.5f;
    const real R = real_ldexp(1.0f, r), step = (real)0.69314718055994531 / R; // ln2 2^-r
    const real c = (real)1.4426950408889634 * R;                              // log2(e) 2^r
    real m = -INFINITY;
    for (int j = 0; j < n; j++)
        m = rowops_max_f(m, s[j]);
    for (int j = 0; j < n; j++) { // the integer grid index q = Q(t) 2^r, clamped at -200 2^r
        real x = c * (s[j] - m);
        a[j] = rowops_max_f(use_floor ? real_floor(x) : real_rint(x), -200.0f * R);
    }
    if (r == 0) {
        for (int j = 0; j < n; j++)
            a[j] = pow2i((int)a[j]);
    } else {
        for (int j = 0; j < n; j++)
            a[j] = rowops_exp_neg(a[j] * step);
    }
    real sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < n; j++)
        sum += a[j];
    real inv = 1.0f / sum;
    for (int j = 0; j < n; j++)
        a[j] *= inv;
}

const AttnVariant attn_pot = {
    .name = "pot",
    .formula = "a = 2^round(log2(e)(s - max s)) / sum(.), straight-through softmax backward",
    .source = "Rowmax-PoT (VARIANTS.md A15; paper not located)",
    .reference = "paper, not located (seed abstract 002#9; design of VARIANTS.md A15)",
    .deviations = "the source uses the power-of-two weights at inference inside FlashAttention-4; "
                  "training with them (straight-through backward) is an extension; the exponent "
                  "grid (attn.frac_bits, attn.round) is this implementation's",
    .rows_sum_to_one = 1,
    .shift_invariant = 1,
    .hparams = POT_HP,
    .n_hparams = N_HP,
    .scratch_floats = pot_scratch,
    .forward_row = pot_forward_row,
    .backward_row = rowops_ste_softmax_backward,
    .surrogate_row = rowops_ste_softmax,
};
