// attention/stablemax.c: StableMax attention: softmax's exp replaced by a function that grows
// linearly for positive scores and decays like 1/|x| for negative ones, normalised over the row.
//
//   f(x) = x + 1 (x >= 0),  1 / (1 - x) (x < 0);    a_j = f(s_j) / sum_{k<n} f(s_k)
//
// f is positive, increasing, continuous with a continuous first derivative at 0 (f(0) = 1,
// f'(0) = 1 from both sides; f'' jumps from 2 to 0 there). Without exponentials a large score
// cannot drive the other weights to exactly zero in floating point, which is the "softmax
// collapse" the paper identifies in grokking.
//
// Source: L. Prieto, M. Barsbey, P. A. M. Mediano, T. Birdal, "Grokking at the Edge of Numerical
// Stability", ICLR 2025, arXiv 2501.04697 (StableMax, s(x) as above).
//
// Learnable parameters: none. Hyperparameters: none.
//
// Numerics: f >= 1 / (1 + |x|) > 0, so the row sum is positive; no overflow for finite scores.
//
// Backward. With S = sum_k f(s_k), a = f / S: df_j = (da_j - <a, da>) / S and
// f'(x) = 1 (x >= 0), 1 / (1 - x)^2 = f(x)^2 (x < 0), so with f_j / S = a_j:
//   ds_j += (da_j - <a, da>) a_j / f_j * f'(s_j) = (da_j - <a, da>) a_j g_j,
//   g_j = 1 / (1 + s_j) (s_j >= 0),  1 / (1 - s_j) (s_j < 0)      (= f'(s_j) / f(s_j))
// O(n), one division per entry.
// Rows sum to 1; not shift-invariant.
//
// Reference: LucasPrietoAl/grokking-at-the-edge-of-numerical-stability:utils.py
//   (read in the fork EIFY/grokking-at-the-edge-of-numerical-stability; utils.py there is the
//   authors' own commit)
// Deviations from it: used as the attention row map (the reference uses it in the cross-entropy
//   loss); the reference's 1e-30 in 1/(1 - x + 1e-30) is omitted (below float resolution for x <
//   0).
#include "attention/rowmap.h"
#include "attention/rowops.h"

static void stablemax_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    (void)ctx;
    real sum = 0.0f;
    for (int j = 0; j < n; j++) {
        a[j] = s[j] >= 0.0f ? s[j] + 1.0f : 1.0f / (1.0f - s[j]);
        sum += a[j];
    }
    const real inv = 1.0f / sum;
    for (int j = 0; j < n; j++)
        a[j] *= inv;
}

static void stablemax_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                   const AttnRowCtx* ctx) {
    (void)ctx;
    const real dot = rowops_dot(a, da, n);
    for (int j = 0; j < n; j++) {
        const real g = s[j] >= 0.0f ? 1.0f / (1.0f + s[j]) : 1.0f / (1.0f - s[j]);
        ds[j] += (da[j] - dot) * a[j] * g;
    }
}

const AttnVariant attn_stablemax = {
    .name = "stablemax",
    .formula = "a = f(s) / sum f(s), f(x) = x + 1 (x >= 0), 1 / (1 - x) (x < 0)",
    .source = "Prieto et al. 2025, Grokking at the Edge of Numerical Stability, arXiv 2501.04697",
    .reference = "LucasPrietoAl/grokking-at-the-edge-of-numerical-stability:utils.py",
    .deviations =
        "used as the attention row map (the reference uses it in the cross-entropy loss); the "
        "reference's 1e-30 in 1/(1 - x + 1e-30) is omitted (below float resolution for x < 0)",
    .rows_sum_to_one = 1,
    .shift_invariant = 0,
    .forward_row = stablemax_forward_row,
    .backward_row = stablemax_backward_row,
};
