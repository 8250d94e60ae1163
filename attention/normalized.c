// attention/normalized.c: normalized attention "without probability cage" (row standardisation).
//
// Paper: O. Richter, R. Wattenhofer, "Normalized Attention Without Probability Cage",
// arXiv 2005.09561 (VARIANTS.md A26). Softmax is replaced by a standardisation of the causal
// score row (a LayerNorm over the keys without bias):
//
//   mu = mean_{j<n} s_j,  var = mean_{j<n} (s_j - mu)^2,  rstd = 1 / sqrt(var + eps),
//   x_j = (s_j - mu) rstd,   a_j = G x_j,   G = g * (1/sqrt(n) if attn.len_scale = inv_sqrt_n)
//
// Learnable per-head parameter "gain" g (init 1), used only with `attn.gain = learn`; with
// `attn.gain = off` (default) g = 1 and the stored value gets no gradient. `attn.eps` (default
// 1e-12, range [1e-13, 1]) is added to the variance: the map stays (numerically) scale-free, and a
// row of two keys is +-1 up to float rounding; raise it (e.g. 1e-5) to bound the 1/sigma gain of
// the gradient on nearly constant rows. `attn.len_scale = inv_sqrt_n` divides by sqrt(n), which
// gives each row unit Euclidean norm (sum_j x_j^2 = n when var >> eps). Row of one key (n = 1):
// sigma = 0 and s - mu = 0, so a = 0 (defined, finite: eps > 0); the same holds for any constant
// row. Rows sum to 0, not 1; shift-invariant (mu absorbs a constant).
//
// Numerics: two-pass mean and variance in double, so each weight is rounded to float once;
// |x_j| <= sqrt(n - 1) whatever sigma is; rstd <= 1/sqrt(eps); finite for any finite scores.
//
// Backward (LayerNorm backward; sigma includes eps), with dx_j = G da_j:
//   ds_j += rstd (dx_j - mean(dx) - x_j mean(dx * x))                                    O(n)
//   dg += (G/g) sum_j da_j x_j    (only with attn.gain = learn)
// mu and rstd are recomputed from s in backward (arithmetic only).
//
// Reference: OliverRichter/normalized-attention:models.py
// Deviations from it: the reference learns a per-head gain (init 1) and bias (init 0) on the
//   standardised row: the gain is attn.gain = learn (off by default), the bias is not offered; the
//   reference adds 1e-3 to the standard deviation, here attn.eps (default 1e-12) is added to the
//   variance; attn.len_scale = inv_sqrt_n is an extension.
#include <math.h>

#include "attention/attention.h"

enum { GAIN_OFF, GAIN_LEARN };
enum { LS_NONE, LS_INV_SQRT_N };

static const AttnHParamSpec normalized_hparams[] = {
    {"eps", 1e-12f, 1e-13f, 1.0f, NULL, "epsilon added to the row variance"},
    {"gain", GAIN_OFF, 0, 0, "off|learn", "learnable per-head gain on the standardised row"},
    {"len_scale", LS_NONE, 0, 0, "none|inv_sqrt_n",
     "inv_sqrt_n: divide the standardised row by sqrt(n) (unit-norm rows)"},
};

static const char* const normalized_param_names[] = {"gain"};

static void normalized_init_params(real* p, const AttnHParams* hp) {
    (void)hp;
    p[0] = 1.0f;
}

// Row statistics in double: the weights are then rounded to float once, so they are smooth in s
// to float precision (a float mean of a shifted row would move each weight by a few ulps).
typedef struct {
    double mu, rstd;
    double len, G; // len = 1 or 1/sqrt(n); G = g * len
    int learn;
} NormStats;

static NormStats normalized_stats(const real* s, int n, const AttnRowCtx* ctx) {
    NormStats st;
    st.learn = (int)ctx->hp->v[1] == GAIN_LEARN && ctx->p != NULL;
    st.len = (int)ctx->hp->v[2] == LS_INV_SQRT_N ? 1.0 / sqrt((double)n) : 1.0;
    st.G = (st.learn ? (double)ctx->p[0] : 1.0) * st.len;
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
    st.rstd = 1.0 / sqrt(var + (double)ctx->hp->v[0]);
    return st;
}

static void normalized_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    NormStats st = normalized_stats(s, n, ctx);
    const double scale = st.G * st.rstd;
    for (int j = 0; j < n; j++)
        a[j] = (real)((s[j] - st.mu) * scale);
}

static void normalized_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                    const AttnRowCtx* ctx) {
    (void)a;
    NormStats st = normalized_stats(s, n, ctx);
    const double mu = st.mu, rstd = st.rstd;
    double sum_da = 0.0, sum_dax = 0.0;
    for (int j = 0; j < n; j++) {
        sum_da += da[j];
        sum_dax += da[j] * (s[j] - mu) * rstd;
    }
    if (st.learn && ctx->dp) ctx->dp[0] += (real)(st.len * sum_dax);
    const double invn = 1.0 / n;
    const double mean_dx = st.G * sum_da * invn, mean_dxx = st.G * sum_dax * invn;
    for (int j = 0; j < n; j++) {
        double x = (s[j] - mu) * rstd;
        ds[j] += (real)(rstd * (st.G * da[j] - mean_dx - x * mean_dxx));
    }
}

const AttnVariant attn_normalized = {
    .name = "normalized",
    .formula = "a = g (s - mean s) / sqrt(var s + eps)  (row standardisation)",
    .source = "Richter, Wattenhofer 2020, Normalized Attention Without Probability Cage "
              "(arXiv 2005.09561)",
    .reference = "OliverRichter/normalized-attention:models.py",
    .deviations =
        "the reference learns a per-head gain (init 1) and bias (init 0) on the standardised row: "
        "the gain is attn.gain = learn (off by default), the bias is not offered; the reference "
        "adds 1e-3 to the standard deviation, here attn.eps (default 1e-12) is added to the "
        "variance; attn.len_scale = inv_sqrt_n is an extension",
    .rows_sum_to_one = 0,
    .shift_invariant = 1,
    .hparams = normalized_hparams,
    .n_hparams = 3,
    .params_per_head = 1,
    .param_names = normalized_param_names,
    .init_params = normalized_init_params,
    .forward_row = normalized_forward_row,
    .backward_row = normalized_backward_row,
};
