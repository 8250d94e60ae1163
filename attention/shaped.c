// attention/shaped.c: shaped attention (the shaped Transformer).
//
// Paper: L. Noci, C. Li, M. Li, B. He, T. Hofmann, C. Maddison, D. Roy, "The Shaped Transformer:
// Attention Models in the Infinite Depth-and-Width Limit", NeurIPS 2023, arXiv 2306.17759.
// The attention matrix is centred at the identity: A = I + softmax(s / tau) - (1/T) 1 1^T.
// Causal form (VARIANTS.md A27): the uniform matrix becomes U_tj = 1/n for j <= t (n = t + 1), and
// the identity contributes +1 to the diagonal entry j = t of each row:
//
//   p = softmax(s / tau),   a_j = p_j - 1/n + [j = t]
//
// Each row sums to 1 + 1 - 1 = 1 (entries may be negative). Shift-invariant (softmax part).
// Temperature: the paper uses tau = tau0 sqrt(width * d_k) on raw q.k; the driver's scores
// already carry 1/sqrt(d_k), so tau = tau0 * sqrt(n_embd) here (`attn.tau_scale = width`), or
// tau = tau0 (`attn.tau_scale = none`). `attn.tau` = tau0, default 1. No learnable parameters.
//
// Numerics: the softmax subtracts the row max, so it is finite for any finite scores.
//
// Backward: I and U are constants, so with p recovered from a (p_j = a_j + 1/n - [j = t]),
//   ds_j += (1/tau) p_j (da_j - <p, da>)                                                O(n)
// Recovering the diagonal p_t from a_t = 1 + p_t - 1/n costs an absolute rounding of ~1e-7
// (the float spacing near 1), the same order as the softmax's own rounding.
//
// Reference: paper, arXiv 2306.17759 (equation not located)
// Deviations from it: causal form: the uniform matrix (1/T) 1 1^T becomes 1/n on each row's keys j
//   <= t; the temperature is tau0 sqrt(n_embd) on scores that already carry 1/sqrt(d_k)
//   (attn.tau_scale = width; none gives tau = tau0).
#include <math.h>
#include <stdint.h>

#include "attention/rowmap.h"

enum { TAU_WIDTH, TAU_NONE };

static const AttnHParamSpec shaped_hparams[] = {
    {"tau", 1.0f, 1e-3f, 1e3f, NULL, "temperature factor tau0"},
    {"tau_scale", TAU_WIDTH, 0, 0, "width|none",
     "width: tau = tau0 * sqrt(n_embd) (the paper's width-dependent temperature); none: tau = "
     "tau0"},
};

static real shaped_inv_tau(const AttnRowCtx* ctx) {
    real tau = ctx->hp->v[0];
    if ((int)ctx->hp->v[1] == TAU_WIDTH) tau *= real_sqrt((real)ctx->hp->n_embd);
    return 1.0f / tau;
}

// exp((s - max)/tau) is kept in double in the scratch: each weight is rounded to float once.
static size_t shaped_scratch_floats(int T) {
    return 2 * (size_t)T + 2;
}

static void shaped_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const double it = shaped_inv_tau(ctx);
    double* e = (double*)(((uintptr_t)ctx->scratch + 7) & ~(uintptr_t)7);
    real m = -INFINITY;
    for (int j = 0; j < n; j++)
        m = real_fmax(m, s[j]);
    double sum = 0.0;
    for (int j = 0; j < n; j++) {
        e[j] = exp(((double)s[j] - (double)m) * it);
        sum += e[j];
    }
    double inv = 1.0 / sum, u = 1.0 / (double)n;
    for (int j = 0; j < n - 1; j++)
        a[j] = (real)(e[j] * inv - u);
    a[n - 1] = (real)(1.0 + (e[n - 1] * inv - u));
}

static void shaped_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                const AttnRowCtx* ctx) {
    (void)s;
    const real it = shaped_inv_tau(ctx);
    const real u = 1.0f / (real)n;
    const real p_last = a[n - 1] - 1.0f + u;
    real dot = p_last * da[n - 1];
    for (int j = 0; j < n - 1; j++)
        dot += (a[j] + u) * da[j];
    for (int j = 0; j < n - 1; j++)
        ds[j] += it * (a[j] + u) * (da[j] - dot);
    ds[n - 1] += it * p_last * (da[n - 1] - dot);
}

const AttnVariant attn_shaped = {
    .name = "shaped",
    .formula = "a = I + softmax(s / tau) - 1/n  (identity on the diagonal j = t)",
    .source = "Noci et al. 2023, The Shaped Transformer (arXiv 2306.17759)",
    .reference = "paper, arXiv 2306.17759 (equation not located)",
    .deviations = "causal form: the uniform matrix (1/T) 1 1^T becomes 1/n on each row's keys j <= "
                  "t; the temperature is tau0 sqrt(n_embd) on scores that already carry "
                  "1/sqrt(d_k) (attn.tau_scale = width; none gives tau = tau0)",
    .rows_sum_to_one = 1,
    .shift_invariant = 1,
    .hparams = shaped_hparams,
    .n_hparams = 2,
    .scratch_floats = shaped_scratch_floats,
    .forward_row = shaped_forward_row,
    .backward_row = shaped_backward_row,
};
