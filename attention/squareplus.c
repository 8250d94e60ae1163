// attention/squareplus.c: Squareplus attention: the algebraic softplus-like squareplus of each
// score, normalised over the causal row.
//
//   f(x) = (x + sqrt(x^2 + b)) / 2,   a_j = f(s_j) / sum_{k<n} f(s_k)
//
// f is smooth and positive for b > 0, f(x) -> x for x >> 0 and f(x) ~ b / (4 |x|) for x << 0
// (a heavy polynomial tail instead of softmax's exponential one); f(0) = sqrt(b) / 2. b = 4
// makes f close to softplus near 0 (Barron's suggestion).
//
// Source: J. T. Barron, "Squareplus: A Softplus-Like Algebraic Rectifier", arXiv 2112.11687.
// Normalising it over the row as an attention map is the ReaLLM-Forge-style use of a positive
// activation in place of exp.
//
// Learnable parameters: none. Hyperparameters: attn.b = 4 (> 0).
//
// Numerics: for x < 0 the sum x + r (r = sqrt(x^2 + b)) cancels; the identity
// (x + r)(r - x) = r^2 - x^2 = b gives f(x) = b / (2 (r - x)), exact and cancellation-free. The
// row sum is >= n * min f > 0, so the division is always defined. No exponentials.
//
// Backward. With S = sum_k f(s_k) and a = f / S, the VJP of the normalisation is
// df_j = (da_j - <a, da>) / S, and f'(x) = (1 + x / r) / 2 = f(x) / r:
//   ds_j += (da_j - <a, da>) a_j / r_j
// (f_j / S = a_j, so S is not needed); O(n), one sqrt per entry.
// Rows sum to 1; not shift-invariant.
#include <math.h>

#include "attention/attention.h"
#include "attention/rowops.h"

enum { HP_B };

static const AttnHParamSpec SQUAREPLUS_HP[] = {
    {"b", 4.0f, 1e-6f, 1e6f, NULL, "curvature b > 0 of f(x) = (x + sqrt(x^2 + b)) / 2"},
};

static real squareplus(real x, real b, real r) {
    return x >= 0.0f ? 0.5f * (x + r) : 0.5f * b / (r - x);
}

static void squareplus_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const real b = ctx->hp->v[HP_B];
    real sum = 0.0f;
    for (int j = 0; j < n; j++) {
        const real r = real_sqrt(s[j] * s[j] + b);
        a[j] = squareplus(s[j], b, r);
        sum += a[j];
    }
    const real inv = 1.0f / sum;
    for (int j = 0; j < n; j++)
        a[j] *= inv;
}

static void squareplus_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                    const AttnRowCtx* ctx) {
    const real b = ctx->hp->v[HP_B];
    const real dot = rowops_dot(a, da, n);
    for (int j = 0; j < n; j++)
        ds[j] += (da[j] - dot) * a[j] / real_sqrt(s[j] * s[j] + b);
}

const AttnVariant attn_squareplus = {
    .name = "squareplus",
    .formula = "a = f(s) / sum f(s), f(x) = (x + sqrt(x^2 + b)) / 2",
    .source = "Barron 2021, Squareplus: A Softplus-Like Algebraic Rectifier, arXiv 2112.11687",
    .rows_sum_to_one = 1,
    .shift_invariant = 0,
    .hparams = SQUAREPLUS_HP,
    .n_hparams = (int)(sizeof(SQUAREPLUS_HP) / sizeof(SQUAREPLUS_HP[0])),
    .forward_row = squareplus_forward_row,
    .backward_row = squareplus_backward_row,
};
