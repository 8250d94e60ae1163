// attention/ssmax.c: Scalable-Softmax (SSMax), a softmax whose logits are scaled by a learnable
// per-head coefficient times the log of the row length.
//
//   lambda = theta_h * ln n + b_h          (b_h = 0 unless attn.bias = learn)
//   z_j    = lambda * s_j
//   a_j    = exp(z_j - max z) / sum_{k<n} exp(z_k - max z)
//
// Source: K. M. Nakanishi, "Scalable-Softmax Is Superior for Attention", arXiv 2501.19399. The
// scale is multiplicative on the logits (softmax(s + theta ln n) would be a no-op by shift
// invariance). In causal attention n = t + 1, the number of keys visible to the query.
//
// Learnable per head: theta (the paper's "s"), bias (used only with attn.bias = learn; with
// attn.bias = off it receives no gradient and stays at 0).
// Hyperparameters:
//   attn.theta_init = fixed | inv_log_T (default fixed): theta starts at attn.theta0, or at
//                     1/ln(T_train) so that lambda = 1 at full training context;
//   attn.theta0     = 0.43 (value of the fixed init; the paper's Fig. 1 value);
//   attn.bias       = off | learn (default off): the "with bias" variant lambda = theta ln n + b.
// Row 0 (n = 1): ln 1 = 0, so lambda = b and the single weight is 1.
//
// Numerics: the max is subtracted from z (not from s), so every exponent is <= 0 whatever the
// sign or size of lambda; for |s| <= 100 and lambda of a few units, z stays far inside fp32.
//
// Backward. With the softmax VJP dz_j = a_j (da_j - <a, da>) and z = lambda s:
//   ds_j     += lambda dz_j
//   dtheta_h += ln n * <s, dz>
//   db_h     += <s, dz>            (only when the bias is learnable)
// One pass for <a, da>, one pass for ds and <s, dz>: O(n), no transcendental per entry.
// Rows sum to 1; shift-invariant (lambda depends on n only).
//
// Reference: paper, arXiv 2501.19399 (SSMax definition; equation number not located)
// Deviations from it: theta starts at 0.43 (the paper's Fig. 1 value; its init is not verified;
//   attn.theta_init = inv_log_T starts at 1/ln T_train); n is the causal row length t + 1; the
//   paper's 'with bias' form is attn.bias = learn.
#include <math.h>

#include "attention/rowmap.h"
#include "attention/rowops.h"

enum { HP_THETA_INIT, HP_THETA0, HP_BIAS };
enum { THETA_FIXED, THETA_INV_LOG_T };

static const AttnHParamSpec SSMAX_HP[] = {
    {"theta_init", THETA_FIXED, 0, 0, "fixed|inv_log_T",
     "initial theta: attn.theta0, or 1/ln(T_train) (scale 1 at full context)"},
    {"theta0", 0.43f, -10.0f, 10.0f, NULL, "initial theta when theta_init = fixed"},
    {"bias", 0, 0, 0, "off|learn", "learnable per-head bias b: lambda = theta ln n + b"},
};

static const char* const SSMAX_PARAMS[] = {"theta", "bias"};

static void ssmax_init_params(real* p, const AttnHParams* hp) {
    if ((int)hp->v[HP_THETA_INIT] == THETA_INV_LOG_T) {
        int T = hp->T_train > 2 ? hp->T_train : 2;
        p[0] = 1.0f / real_log((real)T);
    } else {
        p[0] = hp->v[HP_THETA0];
    }
    p[1] = 0.0f;
}

static real ssmax_lambda(int n, const AttnRowCtx* ctx) {
    real lambda = ctx->p[0] * real_log((real)n);
    if ((int)ctx->hp->v[HP_BIAS] == 1) lambda += ctx->p[1];
    return lambda;
}

static void ssmax_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const real lambda = ssmax_lambda(n, ctx);
    rowops_softmax_scaled(a, s, n, lambda);
}

static void ssmax_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                               const AttnRowCtx* ctx) {
    const real lnn = real_log((real)n);
    const real lambda = ssmax_lambda(n, ctx);
    const real sdz = rowops_softmax_scaled_backward(ds, da, s, a, n, lambda); // <s, dz>
    if (ctx->dp) {
        ctx->dp[0] += lnn * sdz;
        if ((int)ctx->hp->v[HP_BIAS] == 1) ctx->dp[1] += sdz;
    }
}

const AttnVariant attn_ssmax = {
    .name = "ssmax",
    .formula = "a = softmax((theta_h ln n + b_h) * s), b_h = 0 unless attn.bias = learn",
    .source = "Nakanishi 2025, Scalable-Softmax Is Superior for Attention, arXiv 2501.19399",
    .reference = "paper, arXiv 2501.19399 (SSMax definition; equation number not located)",
    .deviations = "theta starts at 0.43 (the paper's Fig. 1 value; its init is not verified; "
                  "attn.theta_init = inv_log_T starts at 1/ln T_train); n is the causal row length "
                  "t + 1; the paper's 'with bias' form is attn.bias = learn",
    .rows_sum_to_one = 1,
    .shift_invariant = 1,
    .hparams = SSMAX_HP,
    .n_hparams = (int)(sizeof(SSMAX_HP) / sizeof(SSMAX_HP[0])),
    .params_per_head = 2,
    .param_names = SSMAX_PARAMS,
    .init_params = ssmax_init_params,
    .forward_row = ssmax_forward_row,
    .backward_row = ssmax_backward_row,
};
