// attention/consmax.c: ConSmax: softmax with the row max and the row sum replaced by two
// learnable per-head constants, so no reduction over the row is needed.
//
//   a_j = exp(s_j - beta_h) / gamma_h,   gamma_h = exp(l_h)
//
// beta_h stands in for the max and gamma_h for the denominator; after training both are
// constants, which is the point of the hardware design (no max search, no sum, no division by a
// data-dependent value). Rows do not sum to 1.
//
// Source: S. Liu, G. Tao, Y. Zou, D. Chow, Z. Fan, K. Lei, B. Pan, D. Sylvester, G. Kielian,
// M. Saligane, "ConSmax: Hardware-Friendly Alternative Softmax with Learnable Parameters",
// arXiv 2402.10930; the initial values beta = 2.5, gamma = 100 are ReaLLM-Forge's defaults
// (`consmax_initial_beta`, `consmax_initial_gamma`).
//
// Learnable per head: beta (init attn.beta0) and l = ln gamma (init ln attn.gamma0). gamma is
// stored through its logarithm so it stays positive and its gradient is on the scale of beta's.
// Hyperparameters: attn.beta0 = 2.5, attn.gamma0 = 100, attn.clamp = 80.
//
// Numerics: there is no max subtraction (that is the variant), so the exponent is clamped:
// x_j = min(s_j - beta, attn.clamp) with attn.clamp = 80 (exp(80) = 5.5e34 is finite in real;
// ReaLLM-Forge's ConSmaxV2 clamps its exponent likewise). Above the clamp a weight is constant and
// its score gets no gradient.
//
// Backward (elementwise map, so O(n)):
//   ds_j     += da_j a_j        (0 where the exponent is clamped)
//   dbeta_h  += -sum_j da_j a_j  (over unclamped j)
//   dl_h     += -sum_j da_j a_j  (over all j)
// Rows do not sum to 1; not shift-invariant (beta is a constant, not the row max).
//
// Reference: ReaLLMASIC/ReaLLM-Forge:variations/softmax_variations.py
// Deviations from it: per-head beta and gamma (ReaLLM-Forge's ConSmax has one of each per layer,
//   its ConSmaxV2 one per head); gamma is learned through ln gamma (the reference learns gamma
//   itself); the exponent is clamped at 80 (attn.clamp; ConSmax has no clamp, ConSmaxV2's clamp at
//   80 is off by default in its train_args.py).
#include <math.h>

#include "attention/rowmap.h"

enum { HP_BETA0, HP_GAMMA0, HP_CLAMP };

static const AttnHParamSpec CONSMAX_HP[] = {
    {"beta0", 2.5f, -100.0f, 100.0f, NULL, "initial beta (the learned stand-in for the row max)"},
    {"gamma0", 100.0f, 1e-6f, 1e9f, NULL, "initial gamma (the learned stand-in for the row sum)"},
    {"clamp", 80.0f, 0.0f, 88.0f, NULL, "upper clamp of the exponent s - beta (keeps exp finite)"},
};

static const char* const CONSMAX_PARAMS[] = {"beta", "log_gamma"};

static void consmax_init_params(real* p, const AttnHParams* hp) {
    p[0] = hp->v[HP_BETA0];
    p[1] = real_log(hp->v[HP_GAMMA0]);
}

static void consmax_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const real beta = ctx->p[0], inv_gamma = real_exp(-ctx->p[1]), cl = ctx->hp->v[HP_CLAMP];
    for (int j = 0; j < n; j++) {
        const real x = s[j] - beta;
        a[j] = real_exp(x < cl ? x : cl) * inv_gamma;
    }
}

static void consmax_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                 const AttnRowCtx* ctx) {
    const real beta = ctx->p[0], cl = ctx->hp->v[HP_CLAMP];
    real g = 0.0f, gall = 0.0f; // sum_j da_j a_j over unclamped j, and over all j
    for (int j = 0; j < n; j++) {
        const real t = da[j] * a[j];
        gall += t;
        if (s[j] - beta < cl) {
            ds[j] += t;
            g += t;
        }
    }
    if (ctx->dp) {
        ctx->dp[0] -= g;
        ctx->dp[1] -= gall;
    }
}

const AttnVariant attn_consmax = {
    .name = "consmax",
    .formula = "a = exp(s - beta_h) / gamma_h, gamma_h = exp(l_h) (learned per head, no row "
               "normalisation)",
    .source = "Liu et al. 2024, ConSmax: Hardware-Friendly Alternative Softmax with Learnable "
              "Parameters, arXiv 2402.10930",
    .reference = "ReaLLMASIC/ReaLLM-Forge:variations/softmax_variations.py",
    .deviations = "per-head beta and gamma (ReaLLM-Forge's ConSmax has one of each per layer, its "
                  "ConSmaxV2 one per head); gamma is learned through ln gamma (the reference "
                  "learns gamma itself); the exponent is clamped at 80 (attn.clamp; ConSmax has no "
                  "clamp, ConSmaxV2's clamp at 80 is off by default in its train_args.py)",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .hparams = CONSMAX_HP,
    .n_hparams = (int)(sizeof(CONSMAX_HP) / sizeof(CONSMAX_HP[0])),
    .params_per_head = 2,
    .param_names = CONSMAX_PARAMS,
    .init_params = consmax_init_params,
    .forward_row = consmax_forward_row,
    .backward_row = consmax_backward_row,
};
