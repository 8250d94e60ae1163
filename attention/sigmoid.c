// attention/sigmoid.c: sigmoid attention: every weight is an independent logistic of its score
// plus a bias; no row normalisation.
//
//   a_j = sigma(s_j + b),   sigma(x) = 1 / (1 + exp(-x))
//
// Bias modes (attn.bias_mode):
//   ln_T  b = -ln T_train, fixed (default; Apple's choice: sigmoid_bias = -ln 2048 for T = 2048)
//   ln_n  b = -ln n per row (this implementation's causal-LM adaptation; the default before the
//         reference's form was adopted): at init the row mass sum_j a_j ~ const for every row
//   fixed b = attn.bias (default 0)
//   none  b = 0 (Gu et al., sigmoid without normalisation)
//   learn b = b_h, a learnable per-head scalar initialised to -ln T_train
//
// Sources: J. Ramapuram et al., "Theory, Analysis, and Best Practices for Sigmoid Self-Attention",
// arXiv 2409.04431 (apple/ml-sigmoid-attention); X. Gu et al., "When Attention Sink Emerges in
// Language Models", ICLR 2025, arXiv 2410.10781; TritonSigmoid (MSDLLCpapers/triton-sigmoid).
// The paper recommends b = -ln n with n the sequence length; the released LM code fixes
// it at -ln of the training context (sigmoid_bias = -7.62 for 2048): both are ln_T here. The
// per-row -ln n bias (ln_n) is a causal-LM adaptation, not the papers' choice.
//
// Learnable per head: bias (init -ln T_train), trained only with attn.bias_mode = learn; in the
// other modes it receives no gradient.
// Hyperparameters: attn.bias_mode (above), attn.bias = 0 (the value used by mode fixed).
// T_train below 2 is treated as 2.
//
// Numerics: stable sigmoid, one exp per entry of a non-positive argument:
//   x >= 0: 1 / (1 + exp(-x));   x < 0: e / (1 + e), e = exp(x)
// so nothing overflows for any finite score; the result is in [0, 1].
//
// Backward: the Jacobian is diagonal, sigma' = sigma (1 - sigma):
//   ds_j += da_j a_j (1 - a_j);    db_h += sum_j da_j a_j (1 - a_j)    (mode learn)
// O(n), no transcendental.
// Rows do not sum to 1; not shift-invariant.
//
// Reference: apple/ml-sigmoid-attention:attention_simulator/src/attention_simulator/layers/
//   flash_sigmoid_attention.py
// Deviations from it: none in the default (b = -ln T_train, its LM config's sigmoid_bias = -7.62
//   = -ln 2048); attn.bias_mode = ln_n (b = -ln n per row, a causal-LM adaptation and the earlier
//   default), fixed, none and learn are extensions; its LM recipe also normalises q and k
//   (qk_norm: true; here the model key qk_norm = 1, qk-layernorm, off by default).
#include <math.h>

#include "attention/rowmap.h"

enum { HP_BIAS_MODE, HP_BIAS };
enum { BIAS_LN_N, BIAS_LN_T, BIAS_FIXED, BIAS_NONE, BIAS_LEARN };

static const AttnHParamSpec SIGMOID_HP[] = {
    {"bias_mode", BIAS_LN_T, 0, 0, "ln_n|ln_T|fixed|none|learn",
     "bias b: -ln n per row, -ln T_train (default, the reference's), attn.bias, 0, or learnable "
     "per head"},
    {"bias", 0.0f, -100.0f, 100.0f, NULL, "bias value for bias_mode = fixed"},
};

static const char* const SIGMOID_PARAMS[] = {"bias"};

static real sigmoid_ln_t(const AttnHParams* hp) {
    int T = hp->T_train > 2 ? hp->T_train : 2;
    return real_log((real)T);
}

static void sigmoid_init_params(real* p, const AttnHParams* hp) {
    p[0] = -sigmoid_ln_t(hp);
}

static real sigmoid_bias(int n, const AttnRowCtx* ctx) {
    switch ((int)ctx->hp->v[HP_BIAS_MODE]) {
    case BIAS_LN_N:
        return -real_log((real)n);
    case BIAS_LN_T:
        return -sigmoid_ln_t(ctx->hp);
    case BIAS_FIXED:
        return ctx->hp->v[HP_BIAS];
    case BIAS_LEARN:
        return ctx->p ? ctx->p[0] : -sigmoid_ln_t(ctx->hp);
    default:
        return 0.0f;
    }
}

static void sigmoid_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const real b = sigmoid_bias(n, ctx);
    for (int j = 0; j < n; j++) {
        real x = s[j] + b;
        real e = real_exp(-real_fabs(x));
        real r = 1.0f / (1.0f + e);
        a[j] = x >= 0.0f ? r : e * r;
    }
}

static void sigmoid_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                 const AttnRowCtx* ctx) {
    (void)s;
    real db = 0.0f;
    for (int j = 0; j < n; j++) {
        real g = da[j] * a[j] * (1.0f - a[j]);
        ds[j] += g;
        db += g;
    }
    if (ctx->dp && (int)ctx->hp->v[HP_BIAS_MODE] == BIAS_LEARN) ctx->dp[0] += db;
}

const AttnVariant attn_sigmoid = {
    .name = "sigmoid",
    .formula = "a = sigma(s + b), b = -ln n | -ln T_train | attn.bias | 0 | learnable b_h",
    .source = "Ramapuram et al. 2024, arXiv 2409.04431; Gu et al. 2025, arXiv 2410.10781",
    .reference = "apple/ml-sigmoid-attention:attention_simulator/src/attention_simulator/layers/"
                 "flash_sigmoid_attention.py",
    .deviations = "none in the default (b = -ln T_train, as its LM config's sigmoid_bias = -7.62 "
                  "= -ln 2048); attn.bias_mode = ln_n (b = -ln n per row, a causal-LM adaptation "
                  "and the earlier default), fixed, none and learn are extensions; its LM recipe "
                  "also normalises q and k (qk_norm: true; here the model key qk_norm = 1, "
                  "qk-layernorm, off by default)",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .hparams = SIGMOID_HP,
    .n_hparams = (int)(sizeof(SIGMOID_HP) / sizeof(SIGMOID_HP[0])),
    .params_per_head = 1,
    .param_names = SIGMOID_PARAMS,
    .init_params = sigmoid_init_params,
    .forward_row = sigmoid_forward_row,
    .backward_row = sigmoid_backward_row,
};
