// attention/cog.c: Cog attention, signed attention weights.
//
//   p = softmax(|s|) over the causal row,   a_j = sign(s_j) p_j
//
// Lv et al., More Expressive Attention with Negative Weights, arXiv 2411.07176 (code
// trestad/CogAttn). No learnable parameters, no hyperparameters. sum_j |a_j| = 1 (the signed sum
// lies in [-1, 1], so rows do not sum to 1); not shift-invariant (|s| is not). The reference model
// keeps plain softmax in its first and last layers; a row map does not see the layer index, so
// here every layer that selects `cog` uses it.
//
// Numerics: the max of |s| is subtracted before exp, so every exponent is <= 0 and the forward is
// finite for any finite scores. sign(0) = 0: a score of exactly 0 gets weight 0 but its p still
// counts in the normaliser.
//
// Backward (sign' = 0 almost everywhere): dp = sign(s) da, d|s| = p (dp - <p, dp>),
// ds = sign(s) d|s|. With a = sign(s) p and sign(s)^2 p = |a|:
//   <p, dp> = <a, da>,   ds_j = |a_j| da_j - a_j <a, da>
// which is O(n), needs only a, and gives 0 at s_j = 0 (where a_j = 0).
//
// Reference: trestad/CogAttn:Cogformer/attention.py
// Deviations from it: the reference model keeps plain softmax in its first and last layers
//   (Cogformer/model.py); a row map applies to every layer that selects it, so write that as a
//   per-layer spec, e.g. attention = 0:softmax,1-10:cog,11:softmax.
#include <math.h>

#include "attention/rowmap.h"

// max/min without libm's NaN and signed-zero handling (a call per element otherwise; inputs are
// finite), so loops stay inline and vectorise
static inline real max_f(real x, real y) {
    return x > y ? x : y;
}

static void cog_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    (void)ctx;
    real m = 0.0f;
    for (int j = 0; j < n; j++)
        m = max_f(m, real_fabs(s[j]));
    real sum = 0.0f;
    for (int j = 0; j < n; j++) {
        a[j] = real_exp(real_fabs(s[j]) - m);
        sum += a[j];
    }
    real inv = 1.0f / sum;
    for (int j = 0; j < n; j++) {
        real sg = s[j] > 0.0f ? inv : s[j] < 0.0f ? -inv : 0.0f;
        a[j] *= sg;
    }
}

static void cog_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                             const AttnRowCtx* ctx) {
    (void)s;
    (void)ctx;
    real dot = 0.0f;
    for (int j = 0; j < n; j++)
        dot += a[j] * da[j];
    for (int j = 0; j < n; j++)
        ds[j] += real_fabs(a[j]) * da[j] - a[j] * dot;
}

const AttnVariant attn_cog = {
    .name = "cog",
    .formula = "a = sign(s) * softmax(|s|)  (sum |a| = 1)",
    .source = "Lv et al. 2024 (2411.07176)",
    .reference = "trestad/CogAttn:Cogformer/attention.py",
    .deviations = "the reference model keeps plain softmax in its first and last layers "
                  "(Cogformer/model.py); a row map applies to every layer that selects it, so "
                  "write that as a per-layer spec, e.g. attention = 0:softmax,1-10:cog,11:softmax",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .forward_row = cog_forward_row,
    .backward_row = cog_backward_row,
};
