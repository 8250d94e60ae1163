// attention/quantized.c: K-level quantized softmax attention with a straight-through backward
// ("K-interval attention approximation", fixed-window calibration, post-normalisation STE).
//
//   p = softmax(s),   a = Q_K(p),   Q_K(x) = round(x (K-1)) / (K-1)   on the fixed window [0, 1]
//
// Source: the seed abstract 000#3 = 002#6 (124M model, +0.004 nats at K = 16); the paper itself
// was not located, so the grid and rounding follow the design in VARIANTS.md A14.
// Hyperparameters (no learnable parameters):
//   attn.levels   = 16 in [2, 65536]  number of quantisation levels K
//   attn.grid     = levels|intervals  levels: K points 0, 1/(K-1), .., 1 (round(x(K-1))/(K-1));
//                                     intervals: round(x K)/K
//   attn.rounding = nearest|stochastic  stochastic: floor(x L + u), u uniform from a hash of
//                   (seed, step, head, row, key), so it is unbiased and reproducible; evaluation
//                   (step < 0) always rounds to nearest. The batch index is not part of the
//                   hash (a row map does not see it).
//   attn.ste      = post|pre   post: quantise the probabilities p (default); pre: quantise
//                  e = exp(s - max s) in (0, 1] and normalise afterwards, a = Q(e)/sum Q(e)
//   attn.renorm   = off|on     post mode only: divide Q(p) by its sum (a row whose every entry
//                  rounds to 0 becomes one-hot on the first maximum of p). Pre mode always
//                  normalises, and its maximum e = 1 never rounds to 0.
// Rows sum to 1 only approximately (exactly with ste = pre or renorm = on); shift-invariant,
// since p and e are.
//
// Backward (straight-through): the quantiser is treated as the identity, which makes the map
// the softmax, in both modes. backward_row is the exact softmax VJP at the unquantised p,
// recomputed from s (the forward output a is quantised):
//   ds_j = p_j (da_j - <p, da>)
// surrogate_row is that softmax. Numerics: max subtraction, as in softmax (exp through an inline
// polynomial, <= 1.4 ulp, so the loops vectorise); the quantised values lie in [0, 1].
//
// Reference: paper, not located (seed abstract 000#3; design of VARIANTS.md A14)
// Deviations from it: the grid, rounding and straight-through placement are this implementation's
//   design, not checked against a paper or code; attn.grid, attn.rounding, attn.ste and attn.renorm
//   select alternatives.
#include <math.h>
#include <stdint.h>

#include "attention/rowmap.h"
#include "attention/rowops.h"

// min without libm's NaN and signed-zero handling (inputs are finite), so loops vectorise
static inline real min_f(real x, real y) {
    return x < y ? x : y;
}

enum { HP_LEVELS, HP_GRID, HP_ROUNDING, HP_STE, HP_RENORM, N_HP };

static const AttnHParamSpec QUANT_HP[N_HP] = {
    [HP_LEVELS] = {"levels", 16, 2, 65536, NULL, "number of quantisation levels K (integer)"},
    [HP_GRID] = {"grid", 0, 0, 0, "levels|intervals",
                 "levels: round(x(K-1))/(K-1); intervals: round(xK)/K"},
    [HP_ROUNDING] = {"rounding", 0, 0, 0, "nearest|stochastic",
                     "round to nearest, or stochastically (unbiased) during training"},
    [HP_STE] = {"ste", 0, 0, 0, "post|pre",
                "quantise the probabilities (post) or exp(s - max) before normalising (pre)"},
    [HP_RENORM] = {"renorm", 0, 0, 0, "off|on", "post mode: renormalise the quantised row"},
};

static size_t quant_scratch(int T) {
    return (size_t)T;
}

// x[j] <- Q(x[j] * pre_scale) for x in [0, 1]
static void quant_round(real* x, int n, real pre_scale, const AttnRowCtx* ctx) {
    const AttnHParams* hp = ctx->hp;
    real K = real_rint(hp->v[HP_LEVELS]); // an integer number of levels
    real L = hp->v[HP_GRID] >= 0.5f ? K : K - 1.0f;
    real invL = 1.0f / L, sc = pre_scale * L;
    if (hp->v[HP_ROUNDING] >= 0.5f && ctx->step >= 0) {
        uint64_t base =
            rowops_mix64(ctx->seed ^ rowops_mix64((uint64_t)ctx->step * 0x100000001b3ull +
                                                  ((uint64_t)ctx->h << 40) + (uint64_t)ctx->t));
        for (int j = 0; j < n; j++) {
            real u = (real)(rowops_draw(ctx, base + (uint64_t)j) >> 40) * 0x1.0p-24f; // [0, 1)
            x[j] = min_f(real_floor(x[j] * sc + u), L) * invL;
        }
    } else {
        for (int j = 0; j < n; j++)
            x[j] = real_rint(x[j] * sc) * invL;
    }
}

static void quant_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const AttnHParams* hp = ctx->hp;
    real sum = rowops_exp_shifted(a, s, n);
    if (hp->v[HP_STE] >= 0.5f) { // pre: quantise e in (0, 1], then normalise
        quant_round(a, n, 1.0f, ctx);
        real z = 0.0f;
        for (int j = 0; j < n; j++)
            z += a[j];
        real inv = 1.0f / z; // the maximum e = 1 is a grid point, so z >= 1
        for (int j = 0; j < n; j++)
            a[j] *= inv;
        return;
    }
    int jmax = 0;
    for (int j = 1; j < n; j++)
        if (a[j] > a[jmax]) jmax = j;
    quant_round(a, n, 1.0f / sum, ctx);
    if (hp->v[HP_RENORM] >= 0.5f) {
        real z = 0.0f;
        for (int j = 0; j < n; j++)
            z += a[j];
        if (z > 0.0f) {
            real inv = 1.0f / z;
            for (int j = 0; j < n; j++)
                a[j] *= inv;
        } else {
            a[jmax] = 1.0f;
        }
    }
}

const AttnVariant attn_quantized = {
    .name = "quantized",
    .formula = "a = round(softmax(s) (K-1)) / (K-1), straight-through softmax backward",
    .source = "K-interval attention approximation (VARIANTS.md A14; paper not located)",
    .reference = "paper, not located (seed abstract 000#3; design of VARIANTS.md A14)",
    .deviations = "the grid, rounding and straight-through placement are this implementation's "
                  "design, not checked against a paper or code; attn.grid, attn.rounding, attn.ste "
                  "and attn.renorm select alternatives",
    .rows_sum_to_one = 0,
    .shift_invariant = 1,
    .hparams = QUANT_HP,
    .n_hparams = N_HP,
    .scratch_floats = quant_scratch,
    .forward_row = quant_forward_row,
    .backward_row = rowops_ste_softmax_backward,
    .surrogate_row = rowops_ste_softmax,
};
