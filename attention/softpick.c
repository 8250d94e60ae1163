// attention/softpick.c: Softpick, a rectified softmax: positive scores get weight, non-positive
// scores get exactly 0 but still enter the denominator through |exp(s) - 1|.
//
//   a_j = ReLU(exp(s_j) - 1) / (sum_{k<n} |exp(s_k) - 1| + eps)
//
// Only the causal row enters the denominator (masked keys are excluded, as the reference code
// does with torch.where(isfinite)). Weights sum to at most 1, with equality only when every score
// is >= 0 and eps = 0; a row with every score <= 0 is all zeros (the head outputs 0).
//
// Source: Z. M. K. Zuhri, E. H. Fuadi, A. F. Aji, "Softpick: No Attention Sink, No Massive
// Activations with Rectified Softmax", arXiv 2504.20966 (code zaydzuhri/softpick-attention).
//
// Learnable parameters: none. Hyperparameters: attn.eps = 1e-8.
//
// Numerics and eps: with the shift m' = max(max_k s_k, 0), E_k = exp(s_k - m') and
// u_k = E_k - exp(-m') = exp(-m') (exp(s_k) - 1),
//   a_j = ReLU(u_j) / (sum_k |u_k| + eps exp(-m'))
// which is the formula above exactly: eps is scaled by exp(-m') together with the rest, so it
// keeps the meaning "eps added to the unshifted denominator" (the reference code adds eps to the
// shifted denominator, i.e. effectively eps exp(m')). Every exponent is <= 0, and clamping the
// shift at 0 keeps exp(-m') <= 1 when all scores are very negative (exp(-m) would overflow
// below m = -88). The denominator is >= eps exp(-m') > 0, and >= 1 - exp(-m') when m' > 0.
//
// Backward. With D = sum_k |e^{s_k} - 1| + eps (unshifted):
//   da_j/ds_k = delta_jk 1[s_k > 0] e^{s_k} / D - a_j sgn(s_k) e^{s_k} / D
// and e^{s_k} / D = E_k / D' with D' the shifted denominator, so
//   ds_k += (E_k / D') (1[s_k > 0] da_k - sgn(s_k) <a, da>)
// (the ReLU and |.| kinks at s = 0 take the subgradient 0). Non-positive keys still get gradient
// through the denominator. The backward recomputes E_k (one exp per entry, kept in the row
// scratch) because a_k = 0 does not determine it; O(n).
// Rows do not sum to 1; not shift-invariant.
//
// Reference: zaydzuhri/softpick-attention:naive_softpick_attn.py
// Deviations from it: eps is added to the unshifted denominator (the reference adds it after the
//   max shift, i.e. eps e^max); the two differ only when every score is ~0; the shift is clamped at
//   0.
#include <math.h>

#include "attention/rowmap.h"

enum { HP_EPS };

static const AttnHParamSpec SOFTPICK_HP[] = {
    {"eps", 1e-8f, 1e-20f, 1.0f, NULL, "added to the denominator sum |exp(s) - 1|"},
};

// m' = max(max s, 0)
static real softpick_shift(const real* s, int n) {
    real m = 0.0f;
    for (int j = 0; j < n; j++)
        m = real_fmax(m, s[j]);
    return m;
}

static void softpick_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const real m = softpick_shift(s, n);
    const real e0 = real_exp(-m);
    real den = ctx->hp->v[HP_EPS] * e0;
    for (int j = 0; j < n; j++) {
        real u = real_exp(s[j] - m) - e0;
        den += real_fabs(u);
        a[j] = s[j] > 0.0f ? u : 0.0f;
    }
    // a division, not a reciprocal product: correctly rounded, so a lone positive key gets
    // exactly the float nearest to 1 - O(eps) instead of jittering by one ulp with s
    for (int j = 0; j < n; j++)
        a[j] /= den;
}

static void softpick_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                  const AttnRowCtx* ctx) {
    real* E = ctx->scratch; // exp(s_k - m'), n floats
    const real m = softpick_shift(s, n);
    const real e0 = real_exp(-m);
    real den = ctx->hp->v[HP_EPS] * e0;
    real dot = 0.0f;
    for (int j = 0; j < n; j++) {
        E[j] = real_exp(s[j] - m);
        den += real_fabs(E[j] - e0);
        dot += a[j] * da[j];
    }
    real inv = 1.0f / den;
    for (int j = 0; j < n; j++) {
        real g = s[j] > 0.0f ? da[j] - dot : (s[j] < 0.0f ? dot : 0.0f);
        ds[j] += E[j] * inv * g;
    }
}

static size_t softpick_scratch(int T) {
    return (size_t)T;
}

const AttnVariant attn_softpick = {
    .name = "softpick",
    .formula = "a = ReLU(exp(s) - 1) / (sum |exp(s) - 1| + eps)",
    .source = "Zuhri, Fuadi, Aji 2025, Softpick, arXiv 2504.20966",
    .reference = "zaydzuhri/softpick-attention:naive_softpick_attn.py",
    .deviations =
        "eps is added to the unshifted denominator (the reference adds it after the max shift, "
        "i.e. eps e^max); the two differ only when every score is ~0; the shift is clamped at 0",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .hparams = SOFTPICK_HP,
    .n_hparams = (int)(sizeof(SOFTPICK_HP) / sizeof(SOFTPICK_HP[0])),
    .scratch_floats = softpick_scratch,
    .forward_row = softpick_forward_row,
    .backward_row = softpick_backward_row,
};
