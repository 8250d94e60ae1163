// attention/clipped.c: clipped softmax: a stretched softmax clipped to [0, 1], so a head can
// put exact zeros (and exact ones) on keys with finite logits.
//
//   p = softmax(s);   y_j = (zeta - gamma) p_j + gamma;   a_j = clip(y_j, 0, 1)
//   gamma = -alpha / T_train
//
// T_train is the fixed training block length, not the causal row length (the reference code uses
// gamma = -alpha / max_seq_length = -alpha / block_size). Entries with p_j < -gamma/(zeta-gamma)
// become exactly 0; with zeta > 1 entries near p = 1 become exactly 1.
//
// Source: Y. Bondarenko, M. Nagel, T. Blankevoort, "Quantizable Transformers: Removing Outliers by
// Helping Attention Heads Do Nothing", NeurIPS 2023, arXiv 2306.12929
// (Qualcomm-AI-research/outlier-free-transformers); OPT-125m used alpha = 12 with block 512.
//
// Learnable parameters: none. Hyperparameters: attn.alpha = 12, attn.zeta = 1.
//
// Numerics: the softmax subtracts the row max, so p is finite for any finite scores; the affine
// map and the clip are bounded.
//
// Backward (clip passes the gradient at its bounds inclusively, as torch.clamp does):
//   dy_j = da_j 1[0 <= y_j <= 1];   dp_j = (zeta - gamma) dy_j
//   ds_j += p_j (dp_j - <p, dp>)          (softmax VJP with the unclipped p)
// Clipped entries still receive gradient through the normalisation term -p_j <p, dp>, so p is
// needed for every entry: the backward recomputes the softmax (one exp per entry, stored in the
// row scratch), then one pass; O(n).
// Rows do not sum to 1; shift-invariant (p is, and the affine map and clip do not see s).
//
// Reference: Qualcomm-AI-research/outlier-free-transformers:transformers_language/models/
//   opt_attention.py
// Deviations from it: none.
#include <math.h>

#include "attention/rowmap.h"
#include "attention/rowops.h"

enum { HP_ALPHA, HP_ZETA };

static const AttnHParamSpec CLIPPED_HP[] = {
    {"alpha", 12.0f, 0.0f, 10000.0f, NULL, "stretch below 0: gamma = -alpha / T_train"},
    {"zeta", 1.0f, 0.0f, 100.0f, NULL, "stretch above: y = (zeta - gamma) p + gamma"},
};

static real clipped_gamma(const AttnHParams* hp) {
    int T = hp->T_train > 1 ? hp->T_train : 1;
    return -hp->v[HP_ALPHA] / (real)T;
}

static void clipped_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const real gamma = clipped_gamma(ctx->hp);
    const real stretch = ctx->hp->v[HP_ZETA] - gamma;
    rowops_softmax(a, s, n);
    for (int j = 0; j < n; j++) {
        real y = stretch * a[j] + gamma;
        y = y < 0.0f ? 0.0f : y; // comparisons, not fminf/fmaxf: they vectorise
        a[j] = y > 1.0f ? 1.0f : y;
    }
}

static void clipped_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                 const AttnRowCtx* ctx) {
    (void)a;
    const real gamma = clipped_gamma(ctx->hp);
    const real stretch = ctx->hp->v[HP_ZETA] - gamma;
    real* p = ctx->scratch; // n floats
    real* dp = p + n;       // n floats
    rowops_softmax(p, s, n);
    real dot = 0.0f;
    for (int j = 0; j < n; j++) {
        real y = stretch * p[j] + gamma;
        dp[j] = (y >= 0.0f && y <= 1.0f) ? stretch * da[j] : 0.0f;
        dot += p[j] * dp[j];
    }
    for (int j = 0; j < n; j++)
        ds[j] += p[j] * (dp[j] - dot);
}

static size_t clipped_scratch(int T) {
    return 2 * (size_t)T;
}

const AttnVariant attn_clipped = {
    .name = "clipped",
    .formula = "a = clip((zeta - gamma) softmax(s) + gamma, 0, 1), gamma = -alpha / T_train",
    .source = "Bondarenko, Nagel, Blankevoort 2023, Quantizable Transformers, arXiv 2306.12929",
    .reference = "Qualcomm-AI-research/outlier-free-transformers:transformers_language/models/"
                 "opt_attention.py",
    .rows_sum_to_one = 0,
    .shift_invariant = 1,
    .hparams = CLIPPED_HP,
    .n_hparams = (int)(sizeof(CLIPPED_HP) / sizeof(CLIPPED_HP[0])),
    .scratch_floats = clipped_scratch,
    .forward_row = clipped_forward_row,
    .backward_row = clipped_backward_row,
};
