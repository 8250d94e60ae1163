// attention/normalized.c: normalized attention "without probability cage" (row standardisation).
//
// Paper: O. Richter, R. Wattenhofer, "Normalized Attention Without Probability Cage",
// arXiv 2005.09561 (VARIANTS.md A26). Softmax is replaced by a standardisation of the causal
// score row with a learned per-head gain and bias (the authors' NormalizeAttention):
//
//   mu = mean_{j<n} s_j,  sigma = sqrt(mean_{j<n} (s_j - mu)^2)
//   eps_mode = std (default):  x_j = (s_j - mu) / (sigma + eps)            eps = attn.eps = 1e-3
//   eps_mode = var:            x_j = (s_j - mu) / sqrt(sigma^2 + eps)
//   a_j = G x_j + b,   G = g * (1/sqrt(n) if attn.len_scale = inv_sqrt_n)
//
// Learnable per-head parameters "gain" g (init 1, used with attn.gain = learn, the default) and
// "bias" b (init 0, used with attn.bias = learn, the default); with off, g = 1 (b = 0) and the
// stored value gets no gradient. attn.eps (range [1e-13, 1]) is added to the standard deviation
// (std, as the reference's 1e-3) or to the variance (var). The form before the reference was
// adopted is `attn.gain = off attn.bias = off attn.eps_mode = var attn.eps = 1e-12`: scale-free up
// to float rounding, a row of two keys is +-1. `attn.len_scale = inv_sqrt_n` divides by sqrt(n)
// (unit Euclidean rows when sigma >> eps). Row of one key (n = 1), or any constant row: sigma = 0,
// s - mu = 0, so a = b (defined, finite: eps > 0). Rows sum to n b; shift-invariant (mu absorbs a
// constant).
//
// Numerics: two-pass mean and variance in double, so each weight is rounded to float once;
// |x_j| <= sqrt(n - 1) whatever sigma is; the divisor is >= eps (std) or sqrt(eps) (var).
//
// Backward, with d_j = s_j - mu, D the divisor (sigma + eps or sqrt(sigma^2 + eps)), dx_j = G da_j:
//   var:  dD/ds_k = d_k / (n D):      ds_k += (dx_k - mean(dx)) / D - d_k sum_j(dx_j d_j) / (n D^3)
//   std:  dD/ds_k = d_k / (n sigma):  ds_k += (dx_k - mean(dx)) / D
//                                             - d_k sum_j(dx_j d_j) / (n sigma D^2)
//   (sigma = 0 gives d = 0: the second term is 0, its limit)                              O(n)
//   dg += (G/g) sum_j da_j x_j  (gain = learn);   db += sum_j da_j  (bias = learn)
// mu and sigma are recomputed from s in backward (arithmetic only).
//
// Reference: OliverRichter/normalized-attention:models.py (NormalizeAttention, normalize_masked)
// Deviations from it: none in the row map's default form (gain and bias per head, init 1 and 0,
//   eps 1e-3 on the standard deviation); the reference is a bidirectional encoder that standardises
//   over the unpadded keys, here over the causal row j <= t; its NAP model does not divide the
//   logits by sqrt(hs), here the scores keep the model's 1/sqrt(hs) (it only moves the relative
//   size of eps); attn.eps_mode = var, attn.gain = off, attn.bias = off (the earlier default with
//   attn.eps = 1e-12) and attn.len_scale = inv_sqrt_n are extensions.
#include <math.h>

#include "attention/rowmap.h"

enum { HP_EPS, HP_GAIN, HP_LEN, HP_BIAS, HP_EPS_MODE };
enum { GAIN_OFF, GAIN_LEARN };
enum { LS_NONE, LS_INV_SQRT_N };
enum { EPS_STD, EPS_VAR };

static const AttnHParamSpec normalized_hparams[] = {
    [HP_EPS] = {"eps", 1e-3f, 1e-13f, 1.0f, NULL,
                "epsilon added to the row's standard deviation (eps_mode = std) or variance (var)"},
    [HP_GAIN] = {"gain", GAIN_LEARN, 0, 0, "off|learn",
                 "learnable per-head gain on the standardised row"},
    [HP_LEN] = {"len_scale", LS_NONE, 0, 0, "none|inv_sqrt_n",
                "inv_sqrt_n: divide the standardised row by sqrt(n) (unit-norm rows)"},
    [HP_BIAS] = {"bias", GAIN_LEARN, 0, 0, "off|learn",
                 "learnable per-head bias added to the standardised row"},
    [HP_EPS_MODE] = {"eps_mode", EPS_STD, 0, 0, "std|var",
                     "std: divide by sigma + eps (the reference); var: by sqrt(sigma^2 + eps)"},
};

static const char* const normalized_param_names[] = {"gain", "bias"};

static void normalized_init_params(real* p, const AttnHParams* hp) {
    (void)hp;
    p[0] = 1.0f;
    p[1] = 0.0f;
}

// Row statistics in double: the weights are then rounded to float once, so they are smooth in s
// to float precision (a float mean of a shifted row would move each weight by a few ulps).
typedef struct {
    double mu, sigma, D; // D: the divisor
    double len, G;       // len = 1 or 1/sqrt(n); G = g * len
    double b;
    int learn, learn_b, std;
} NormStats;

static NormStats normalized_stats(const real* s, int n, const AttnRowCtx* ctx) {
    NormStats st;
    st.learn = (int)ctx->hp->v[HP_GAIN] == GAIN_LEARN && ctx->p != NULL;
    st.learn_b = (int)ctx->hp->v[HP_BIAS] == GAIN_LEARN && ctx->p != NULL;
    st.std = (int)ctx->hp->v[HP_EPS_MODE] == EPS_STD;
    st.len = (int)ctx->hp->v[HP_LEN] == LS_INV_SQRT_N ? 1.0 / sqrt((double)n) : 1.0;
    st.G = (st.learn ? (double)ctx->p[0] : 1.0) * st.len;
    st.b = st.learn_b ? (double)ctx->p[1] : 0.0;
    double sum = 0.0;
    for (int j = 0; j < n; j++)
        sum += s[j];
    st.mu = sum / n;
    double var = 0.0;
    for (int j = 0; j < n; j++) {
        double d = s[j] - st.mu;
        var += d * d;
    }
    var /= n;
    const double eps = (double)ctx->hp->v[HP_EPS];
    st.sigma = sqrt(var);
    st.D = st.std ? st.sigma + eps : sqrt(var + eps);
    return st;
}

static void normalized_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    NormStats st = normalized_stats(s, n, ctx);
    const double scale = st.G / st.D;
    for (int j = 0; j < n; j++)
        a[j] = (real)((s[j] - st.mu) * scale + st.b);
}

static void normalized_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                    const AttnRowCtx* ctx) {
    (void)a;
    NormStats st = normalized_stats(s, n, ctx);
    const double mu = st.mu, D = st.D;
    double sum_da = 0.0, sum_dad = 0.0;
    for (int j = 0; j < n; j++) {
        sum_da += da[j];
        sum_dad += da[j] * (s[j] - mu);
    }
    if (st.learn && ctx->dp) ctx->dp[0] += (real)(st.len * sum_dad / D);
    if (st.learn_b && ctx->dp) ctx->dp[1] += (real)sum_da;
    const double invn = 1.0 / n;
    const double mean_dx = st.G * sum_da * invn;
    // coefficient of d_k: sum_j dx_j d_j / (n sigma D^2) (std) or / (n D^3) (var)
    double cd = 0.0;
    if (st.std)
        cd = st.sigma > 0.0 ? st.G * sum_dad * invn / (st.sigma * D * D) : 0.0;
    else
        cd = st.G * sum_dad * invn / (D * D * D);
    for (int j = 0; j < n; j++)
        ds[j] += (real)((st.G * da[j] - mean_dx) / D - (s[j] - mu) * cd);
}

const AttnVariant attn_normalized = {
    .name = "normalized",
    .formula = "a = g (s - mean s) / (std s + eps) + b  (row standardisation)",
    .source = "Richter, Wattenhofer 2020, Normalized Attention Without Probability Cage "
              "(arXiv 2005.09561)",
    .reference = "OliverRichter/normalized-attention:models.py",
    .deviations =
        "none in the row map's default (per-head gain and bias, init 1 and 0, eps 1e-3 on the "
        "standard deviation); the reference is a bidirectional encoder standardising over the "
        "unpadded keys, here over the causal row; its NAP model does not divide the logits by "
        "sqrt(hs), here the scores keep the 1/sqrt(hs) (this only moves the relative size of eps); "
        "attn.eps_mode = var, attn.gain = off, attn.bias = off (the earlier default, with attn.eps "
        "= 1e-12) and attn.len_scale = inv_sqrt_n are extensions",
    .rows_sum_to_one = 0,
    .shift_invariant = 1,
    .hparams = normalized_hparams,
    .n_hparams = 5,
    .params_per_head = 2,
    .param_names = normalized_param_names,
    .init_params = normalized_init_params,
    .forward_row = normalized_forward_row,
    .backward_row = normalized_backward_row,
};
