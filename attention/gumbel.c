// attention/gumbel.c: Gumbel-softmax attention: a softmax of the scores plus Gumbel noise at a
// temperature, with a hard straight-through mode.
//
//   g_j = -ln(-ln u_j),  u_j ~ U(0, 1) i.i.d.     (training steps only; g = 0 at evaluation)
//   soft: a_j = exp(z_j - max z) / sum_{k<n} exp(z_k - max z),   z_j = (s_j + g_j) / tau
//   hard: a = one_hot(argmax_j (s_j + g_j)) in the forward pass; the backward pass is the exact
//         VJP of the soft map with the same noise (straight-through estimator)
//
// Sampling: u_j is a pure function of (run seed, training step, layer, head, query t, key j)
// through a splitmix64 hash, so a step's draws are identical for any thread count and on resume,
// and the backward pass sees the noise of its own forward pass. At evaluation (step < 0) the map
// is deterministic: softmax(s / tau), or one_hot(argmax s) in hard mode.
//
// Sources: E. Jang, S. Gu, B. Poole, "Categorical Reparameterization with Gumbel-Softmax",
// ICLR 2017, arXiv 1611.01144 (Eq. 1 the Gumbel-max sample, Eq. 2 the softmax relaxation, §2.2
// the straight-through estimator); C. J. Maddison, A. Mnih, Y. W. Teh, "The Concrete
// Distribution", ICLR 2017, arXiv 1611.00712.
// Reference code: pytorch/pytorch:torch/nn/functional.py, gumbel_softmax: g = -ln(E), E ~ Exp(1)
// (the law of -ln(-ln u)), y_soft = softmax((logits + g) / tau); hard returns
// y_hard - y_soft.detach() + y_soft with y_hard the one-hot argmax of y_soft, so its gradient is
// the soft one. The scores s play the role of the logits. Deviations from that code:
//   - the noise is a hash of (seed, step, layer, head, query, key), not a stateful generator, and
//     u is quantised to 2^23 levels (g in [-2.81, 16.64]; see Numerics);
//   - no noise at evaluation (step < 0): softmax(s / tau), or one-hot argmax s in hard mode
//     (torch's function always samples; no key adds noise at evaluation);
//   - ties of the hard argmax go to the lower index.
//
// Learnable parameters: none. Hyperparameters: attn.tau = 1 (> 0), attn.hard = off | on.
//
// Numerics: u_j = (m + 1/2) 2^-23 for a 23-bit integer m (rowops_uniform_open), exact in float32,
// so u is in [2^-24, 1 - 2^-24] and g is finite: g in [-2.8, 16.6]. (A 24-bit m with 2^-24 made
// u = 1 exactly in float32 for m = 2^24 - 1, so g = +inf and a NaN row once per 2^24 draws; the
// double build computed that u exactly and could not see it.) The max of z is subtracted, so
// every exponent is <= 0. Ties of the hard argmax are broken by the lower index.
//
// Backward (soft, or the surrogate of hard). With p = softmax(z) (p = a in soft mode, recomputed
// into the row scratch in hard mode):
//   ds_j += p_j (da_j - <p, da>) / tau
// O(n).
// Rows sum to 1; shift-invariant (the noise does not depend on s).
#include <math.h>
#include <stdint.h>

#include "attention/rowmap.h"
#include "attention/rowops.h"

enum { HP_TAU, HP_HARD };

static const AttnHParamSpec GUMBEL_HP[] = {
    {"tau", 1.0f, 1e-3f, 1e3f, NULL, "temperature: z = (s + g) / tau"},
    {"hard", 0, 0, 0, "off|on", "on: one-hot forward, soft backward (straight-through)"},
};

static size_t gumbel_scratch(int T) {
    return (size_t)T;
}

// z_j = (s_j + g_j) / tau (g = 0 at evaluation)
static void gumbel_logits(real* z, const real* s, int n, const AttnRowCtx* ctx) {
    const real inv_tau = 1.0f / ctx->hp->v[HP_TAU];
    if (ctx->step < 0) {
        for (int j = 0; j < n; j++)
            z[j] = s[j] * inv_tau;
        return;
    }
    const uint64_t base =
        rowops_mix64(ctx->seed ^ rowops_mix64(((uint64_t)ctx->step << 20) ^
                                              ((uint64_t)ctx->layer << 12) ^ (uint64_t)ctx->h)) ^
        rowops_mix64((uint64_t)ctx->t * 0x100000001b3ull);
    for (int j = 0; j < n; j++) {
        const real u = rowops_uniform_open_bits(rowops_draw(ctx, base + (uint64_t)j));
        z[j] = (s[j] - real_log(-real_log(u))) * inv_tau;
    }
}

static void gumbel_soft_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    gumbel_logits(a, s, n, ctx);
    rowops_softmax(a, a, n);
}

static void gumbel_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    if ((int)ctx->hp->v[HP_HARD] == 0) {
        gumbel_soft_row(a, s, n, ctx);
        return;
    }
    gumbel_logits(a, s, n, ctx); // argmax of z = argmax of s + g (tau > 0)
    int jmax = 0;
    for (int j = 1; j < n; j++)
        if (a[j] > a[jmax]) jmax = j;
    for (int j = 0; j < n; j++)
        a[j] = j == jmax ? 1.0f : 0.0f;
}

static void gumbel_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                const AttnRowCtx* ctx) {
    const real inv_tau = 1.0f / ctx->hp->v[HP_TAU];
    const real* p = a;
    if ((int)ctx->hp->v[HP_HARD] == 1) {
        gumbel_soft_row(ctx->scratch, s, n, ctx);
        p = ctx->scratch;
    }
    const real dot = rowops_dot(p, da, n);
    for (int j = 0; j < n; j++)
        ds[j] += p[j] * (da[j] - dot) * inv_tau;
}

const AttnVariant attn_gumbel = {
    .name = "gumbel",
    .formula = "a = softmax((s + g) / tau), g ~ Gumbel(0, 1) in training; hard: one-hot forward, "
               "soft backward",
    .source = "Jang et al. 2017, Gumbel-Softmax, arXiv 1611.01144; Maddison et al. 2017, Concrete, "
              "arXiv 1611.00712",
    .reference = "pytorch/pytorch:torch/nn/functional.py (gumbel_softmax); Jang et al. 2017, "
                 "Eq. 1-2 and Sec. 2.2 (straight-through)",
    .deviations = "noise from a hash of (seed, step, layer, head, query, key) with u = (m + 1/2) "
                  "2^-23 (2^23 levels strictly inside (0, 1)) instead of a stateful Exp(1) draw; "
                  "no noise at evaluation (step < 0; torch always samples); hard-mode ties go to "
                  "the lower index",
    .rows_sum_to_one = 1,
    .shift_invariant = 1,
    .hparams = GUMBEL_HP,
    .n_hparams = (int)(sizeof(GUMBEL_HP) / sizeof(GUMBEL_HP[0])),
    .scratch_floats = gumbel_scratch,
    .forward_row = gumbel_forward_row,
    .backward_row = gumbel_backward_row,
    .surrogate_row = gumbel_soft_row,
};
