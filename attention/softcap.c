// attention/softcap.c: logit soft-capping: a softmax of the scores squashed by c tanh(s / c).
//
//   z_j = c tanh(s_j / c),   a_j = exp(z_j - max z) / sum_{k<n} exp(z_k - max z)
//
// Scores with |s| << c pass unchanged (tanh(x) ~ x); larger ones saturate at +-c, so no logit
// can exceed c in magnitude and the row can never become one-hot by logit growth alone.
//
// Source: Gemma Team, "Gemma 2: Improving Open Language Models at a Practical Size",
// arXiv 2408.00118 (attention logits capped at 50.0, final logits at 30.0); the same tanh cap is
// in Grok-1's attention.
//
// Learnable parameters: none. Hyperparameters: attn.cap = 50 (c, > 0).
//
// Numerics: |z_j| <= c, and the max is subtracted from z, so every exponent is <= 0.
//
// Backward. With the softmax VJP dz_j = a_j (da_j - <a, da>) and dz_j/ds_j = 1 - tanh^2(s_j / c)
// = 1 - (z_j / c)^2 (the Jacobian of the cap is diagonal):
//   ds_j += a_j (da_j - <a, da>) (1 - (z_j / c)^2)
// z_j is recomputed from s_j (one tanh per entry); O(n).
// Rows sum to 1; not shift-invariant (the cap is not).
//
// Reference: google-deepmind/gemma:gemma/modules.py
// Deviations from it: none.
#include <math.h>

#include "attention/rowmap.h"
#include "attention/rowops.h"

enum { HP_CAP };

static const AttnHParamSpec SOFTCAP_HP[] = {
    {"cap", 50.0f, 1e-3f, 1e6f, NULL, "soft cap c: scores become c tanh(s / c)"},
};

static void softcap_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const real c = ctx->hp->v[HP_CAP], inv = 1.0f / c;
    for (int j = 0; j < n; j++)
        a[j] = c * real_tanh(s[j] * inv);
    rowops_softmax(a, a, n);
}

static void softcap_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                 const AttnRowCtx* ctx) {
    const real c = ctx->hp->v[HP_CAP], inv = 1.0f / c;
    const real dot = rowops_dot(a, da, n);
    for (int j = 0; j < n; j++) {
        const real th = real_tanh(s[j] * inv);
        ds[j] += a[j] * (da[j] - dot) * (1.0f - th * th);
    }
}

const AttnVariant attn_softcap = {
    .name = "softcap",
    .formula = "a = softmax(c tanh(s / c))",
    .source = "Gemma Team 2024, Gemma 2, arXiv 2408.00118 (attention logit soft-capping)",
    .reference = "google-deepmind/gemma:gemma/modules.py",
    .rows_sum_to_one = 1,
    .shift_invariant = 0,
    .hparams = SOFTCAP_HP,
    .n_hparams = (int)(sizeof(SOFTCAP_HP) / sizeof(SOFTCAP_HP[0])),
    .forward_row = softcap_forward_row,
    .backward_row = softcap_backward_row,
};
