// attention/sigsoftmax.c: Sigsoftmax: the exponential times the logistic of each score,
// normalised over the causal row.
//
//   a_j = exp(s_j) sigma(s_j) / sum_{k<n} exp(s_k) sigma(s_k),   sigma(x) = 1 / (1 + exp(-x))
//
// Equivalently a = softmax(g(s)) with g(x) = x + log sigma(x) = x - softplus(-x): g(x) ~ x for
// x >> 0 and g(x) ~ 2x for x << 0, so low scores are suppressed twice as fast as by softmax.
// Kanai et al. introduce it to break the softmax bottleneck of the output layer; here it is the
// attention row map.
//
// Source: S. Kanai, Y. Fujiwara, Y. Yamanaka, S. Adachi, "Sigsoftmax: Reanalysis of the Softmax
// Bottleneck", NeurIPS 2018, arXiv 1805.10829.
//
// Learnable parameters: none. Hyperparameters: none.
//
// Numerics: g is evaluated stably, g(x) = x - log1p(exp(-x)) for x >= 0 and
// 2x - log1p(exp(x)) for x < 0 (every exp argument <= 0), then the max-shifted softmax of g.
//
// Backward. With the softmax VJP dz_j = a_j (da_j - <a, da>) and
// g'(x) = 1 + sigma(-x) = 2 - sigma(x):
//   ds_j += a_j (da_j - <a, da>) (2 - sigma(s_j))
// O(n), one exp per entry.
// Rows sum to 1; not shift-invariant.
//
// Reference: paper, arXiv 1805.10829 (sigsoftmax definition; equation number not located)
// Deviations from it: used as the attention row map (the paper defines it for the output layer).
#include <math.h>

#include "attention/rowmap.h"
#include "attention/rowops.h"

static real sig_g(real x) {
    return x >= 0.0f ? x - real_log1p(real_exp(-x)) : 2.0f * x - real_log1p(real_exp(x));
}

static real sig_sigma(real x) {
    if (x >= 0.0f) return 1.0f / (1.0f + real_exp(-x));
    const real e = real_exp(x);
    return e / (1.0f + e);
}

static void sigsoftmax_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    (void)ctx;
    for (int j = 0; j < n; j++)
        a[j] = sig_g(s[j]);
    rowops_softmax(a, a, n);
}

static void sigsoftmax_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                    const AttnRowCtx* ctx) {
    (void)ctx;
    const real dot = rowops_dot(a, da, n);
    for (int j = 0; j < n; j++)
        ds[j] += a[j] * (da[j] - dot) * (2.0f - sig_sigma(s[j]));
}

const AttnVariant attn_sigsoftmax = {
    .name = "sigsoftmax",
    .formula = "a = exp(s) sigma(s) / sum exp(s) sigma(s)",
    .source =
        "Kanai et al. 2018, Sigsoftmax: Reanalysis of the Softmax Bottleneck, arXiv 1805.10829",
    .reference = "paper, arXiv 1805.10829 (sigsoftmax definition; equation number not located)",
    .deviations = "used as the attention row map (the paper defines it for the output layer)",
    .rows_sum_to_one = 1,
    .shift_invariant = 0,
    .forward_row = sigsoftmax_forward_row,
    .backward_row = sigsoftmax_backward_row,
};
