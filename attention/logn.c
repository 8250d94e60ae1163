// attention/logn.c: length-dependent inverse temperature ("critical attention scaling"): a
// softmax whose logits are multiplied by a fixed function of the row length.
//
//   beta(n) = g_h * (ln n / ln T_train)^kappa      (g_h = 1 unless attn.learn = on)
//   a_j     = softmax(beta(n) * s)_j
//
// Normalisation: beta(T_train) = g_h, so with the default g_h = 1 the model sees plain softmax
// logits at full training context, sharper ones beyond it and flatter ones in early rows. Row 0
// (n = 1) has ln 1 = 0, so beta = 0 and the single weight is 1 (as in SSMax); beta(1) is defined
// as 0 also for kappa = 0, where (ln n)^0 = 1 for every other n and the map is plain softmax.
//
// Source: T. Hayase, R. Karakida, "A Unified Framework for Critical Scaling of Inverse Temperature
// in Self-Attention", arXiv 2605.12697 (critical laws from (ln n)^(1/2) to (ln n)^2); this is
// SSMax (arXiv 2501.19399) with a fixed rather than learned coefficient.
//
// Learnable per head: beta_scale g_h (init 1), trained only with attn.learn = on; with off it
// receives no gradient and stays at 1.
// Hyperparameters: attn.kappa = 1 (exponent, [0, 4]); attn.learn = off | on.
// T_train below 2 is treated as 2 so that ln T_train > 0.
//
// Numerics: the max is subtracted from z = beta s, so every exponent is <= 0; beta is at most
// g_h (ln T / ln T_train)^kappa, a few units, so z stays far inside fp32 for |s| <= 100.
//
// Backward. With dz_j = a_j (da_j - <a, da>) (softmax VJP) and z = beta s:
//   ds_j  += beta dz_j
//   dg_h  += (beta / g_h) <s, dz> = (ln n / ln T_train)^kappa <s, dz>    (attn.learn = on)
// O(n) with no transcendental per entry.
// Rows sum to 1; shift-invariant (beta depends on n only).
//
// Reference: paper, arXiv 2605.12697 (critical-scaling laws; no single equation)
// Deviations from it: beta = (ln n / ln T_train)^kappa is the drop-in VARIANTS.md A11 derives from
//   the paper's laws, normalised so that beta(T_train) = 1; kappa = 1 by default (the paper ranges
//   from 1/2 to 2).
#include <math.h>

#include "attention/rowmap.h"
#include "attention/rowops.h"

enum { HP_KAPPA, HP_LEARN };

static const AttnHParamSpec LOGN_HP[] = {
    {"kappa", 1.0f, 0.0f, 4.0f, NULL, "exponent: beta = (ln n / ln T_train)^kappa"},
    {"learn", 0, 0, 0, "off|on", "learnable per-head multiplier beta_scale (init 1)"},
};

static const char* const LOGN_PARAMS[] = {"beta_scale"};

static void logn_init_params(real* p, const AttnHParams* hp) {
    (void)hp;
    p[0] = 1.0f;
}

// (ln n / ln T_train)^kappa, 0 for n = 1
static real logn_base(int n, const AttnHParams* hp) {
    if (n <= 1) return 0.0f;
    int T = hp->T_train > 2 ? hp->T_train : 2;
    real r = real_log((real)n) / real_log((real)T);
    real kappa = hp->v[HP_KAPPA];
    return kappa == 1.0f ? r : real_pow(r, kappa);
}

static real logn_scale(const AttnRowCtx* ctx) {
    return (int)ctx->hp->v[HP_LEARN] == 1 && ctx->p ? ctx->p[0] : 1.0f;
}

static void logn_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const real beta = logn_scale(ctx) * logn_base(n, ctx->hp);
    rowops_softmax_scaled(a, s, n, beta);
}

static void logn_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                              const AttnRowCtx* ctx) {
    const real base = logn_base(n, ctx->hp);
    const real beta = logn_scale(ctx) * base;
    const real sdz = rowops_softmax_scaled_backward(ds, da, s, a, n, beta);
    if (ctx->dp && (int)ctx->hp->v[HP_LEARN] == 1) ctx->dp[0] += base * sdz;
}

const AttnVariant attn_logn = {
    .name = "logn",
    .formula = "a = softmax(g_h (ln n / ln T_train)^kappa * s), g_h = 1 unless attn.learn = on",
    .source = "Hayase & Karakida, critical scaling of inverse temperature, arXiv 2605.12697",
    .reference = "paper, arXiv 2605.12697 (critical-scaling laws; no single equation)",
    .deviations = "beta = (ln n / ln T_train)^kappa is the drop-in VARIANTS.md A11 derives from "
                  "the paper's laws, normalised so that beta(T_train) = 1; kappa = 1 by default "
                  "(the paper ranges from 1/2 to 2)",
    .rows_sum_to_one = 1,
    .shift_invariant = 1,
    .hparams = LOGN_HP,
    .n_hparams = (int)(sizeof(LOGN_HP) / sizeof(LOGN_HP[0])),
    .params_per_head = 1,
    .param_names = LOGN_PARAMS,
    .init_params = logn_init_params,
    .forward_row = logn_forward_row,
    .backward_row = logn_backward_row,
};
