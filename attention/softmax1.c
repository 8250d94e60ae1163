// attention/softmax1.c: softmax with one extra "null" logit in the denominator ("off-by-one"
// softmax, softmax_1), optionally with a learnable per-head sink logit.
//
//   a_j = exp(s_j) / (exp(b_h) + sum_{k<n} exp(s_k)),    b_h = 0 (softmax_1) or learnable
//
// Equivalently: append a key with constant logit b_h to the row, take a softmax and drop that
// column. The weights sum to 1 - a_null < 1, a_null = exp(b_h) / (exp(b_h) + sum exp(s)), so a
// head can output ~0 ("do nothing") with finite logits.
//
// Source: J. Y.-C. Hu et al., "Outlier-Efficient Hopfield Layers for Large Transformer-Based
// Models", ICML 2024, arXiv 2404.03828 (code MAGICS-LAB/OutEffHop); idea from E. Miller,
// "Attention is off by one". The learnable sink is the attention-sink extension (init 0 gives
// softmax_1 exactly).
//
// Learnable per head: sink (the logit b_h, init 0), trained only with attn.sink = learn; with
// attn.sink = fixed the constant 0 is used and the parameter receives no gradient.
// Hyperparameters: attn.sink = fixed | learn (default fixed).
//
// Numerics: the shift is m' = max(max_k s_k, b_h), so every exponent, including the null one
// exp(b_h - m'), is <= 0 and the denominator is >= 1: finite for any finite scores (the plain
// max shift of the reference code would overflow exp(b - m) once all scores are below -88).
//
// Backward. The Jacobian has the softmax form over the real keys:
//   da_j/ds_k = a_j (delta_jk - a_k)  =>  ds_j += a_j (da_j - <a, da>)
// and da_j/db = -a_j a_null  =>  db_h += -a_null <a, da>.
// a_null is recovered without a second pass of exponentials: if max s >= b it equals
// a_k exp(b - s_k) at k = argmax s (exponent <= 0, a_k >= 1/(n+1)); otherwise a_null >= 1/(n+1)
// and 1 - sum a is accurate. O(n), no transcendental per entry.
// Rows do not sum to 1; not shift-invariant (the null logit is not shifted).
//
// Reference: MAGICS-LAB/OutEffHop:OutEffHop/vutils/softmax_1.py
// Deviations from it: the shift is max(max s, b) instead of the reference's max s (the same value;
//   no overflow of exp(-max s) when every score is below -88); the learnable sink (attn.sink =
//   learn) is an extension.
#include <math.h>

#include "attention/rowmap.h"

enum { HP_SINK };
enum { SINK_FIXED, SINK_LEARN };

static const AttnHParamSpec SOFTMAX1_HP[] = {
    {"sink", SINK_FIXED, 0, 0, "fixed|learn",
     "null logit: constant 0 (softmax_1) or a learnable per-head logit (init 0)"},
};

static const char* const SOFTMAX1_PARAMS[] = {"sink"};

static real softmax1_sink(const AttnRowCtx* ctx) {
    return (int)ctx->hp->v[HP_SINK] == SINK_LEARN && ctx->p ? ctx->p[0] : 0.0f;
}

static void softmax1_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const real b = softmax1_sink(ctx);
    real m = b;
    for (int j = 0; j < n; j++)
        m = real_fmax(m, s[j]);
    real sum = real_exp(b - m);
    for (int j = 0; j < n; j++) {
        a[j] = real_exp(s[j] - m);
        sum += a[j];
    }
    real inv = 1.0f / sum;
    for (int j = 0; j < n; j++)
        a[j] *= inv;
}

static void softmax1_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                  const AttnRowCtx* ctx) {
    real dot = 0.0f;
    for (int j = 0; j < n; j++)
        dot += a[j] * da[j];
    for (int j = 0; j < n; j++)
        ds[j] += a[j] * (da[j] - dot);
    if (ctx->dp && (int)ctx->hp->v[HP_SINK] == SINK_LEARN) {
        const real b = softmax1_sink(ctx);
        int kmax = 0;
        real sum = 0.0f;
        for (int j = 0; j < n; j++) {
            if (s[j] > s[kmax]) kmax = j;
            sum += a[j];
        }
        real a_null = s[kmax] >= b ? a[kmax] * real_exp(b - s[kmax]) : 1.0f - sum;
        ctx->dp[0] -= a_null * dot;
    }
}

const AttnVariant attn_softmax1 = {
    .name = "softmax1",
    .formula = "a = exp(s) / (exp(b_h) + sum exp(s)), b_h = 0 unless attn.sink = learn",
    .source = "Hu et al. 2024, Outlier-Efficient Hopfield Layers, arXiv 2404.03828",
    .reference = "MAGICS-LAB/OutEffHop:OutEffHop/vutils/softmax_1.py",
    .deviations = "the shift is max(max s, b) instead of the reference's max s (the same value; no "
                  "overflow of exp(-max s) when every score is below -88); the learnable sink "
                  "(attn.sink = learn) is an extension",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .hparams = SOFTMAX1_HP,
    .n_hparams = (int)(sizeof(SOFTMAX1_HP) / sizeof(SOFTMAX1_HP[0])),
    .params_per_head = 1,
    .param_names = SOFTMAX1_PARAMS,
    .forward_row = softmax1_forward_row,
    .backward_row = softmax1_backward_row,
};
