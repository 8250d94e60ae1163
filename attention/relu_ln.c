// attention/relu_ln.c: ReLU + LayerNorm attention.
//
// Paper: C. Zhou, C. C. Loy, B. Dai, "Interpret Vision Transformers as ConvNets with Dynamic
// Convolutions", arXiv 2309.10713 (VARIANTS.md A29). Softmax is replaced by a ReLU followed by a
// LayerNorm over the key axis of the causal row:
//
//   r_j = max(s_j, 0),  mu = mean_{j<n} r_j,  var = mean_{j<n} (r_j - mu)^2,
//   rstd = 1 / sqrt(var + eps),  x_j = (r_j - mu) rstd,  a_j = g x_j + b
//
// Learnable per-head parameters: "gain" g (init 1) and "bias" b (init 0), the LayerNorm affine.
// Hyperparameters: `attn.eps` (default 1e-12) inside the square root; `attn.affine` learn (default)
// | none (g = 1, b = 0 fixed; the stored parameters are then unused and receive no gradient).
// Row of one key (n = 1): r - mu = 0, so a = b (the LayerNorm of a single value is its bias);
// a row whose ReLU outputs are all equal likewise gives a = b everywhere (var = 0, eps > 0 keeps
// rstd finite). Rows do not sum to 1 (they sum to n b); not shift-invariant (the ReLU threshold
// is absolute).
//
// Numerics: mean and variance are computed in two passes over the row in double (no cancellation
// of E[r^2] - mu^2; each weight is rounded to float once); |x_j| <= sqrt(n - 1) whatever the
// variance; rstd <= 1/sqrt(eps). eps defaults to 1e-12 (a row of two positive scores maps to
// +-1 up to float rounding); raise it (e.g. 1e-5) to bound the 1/sigma gain of the gradient on
// rows whose ReLU outputs are nearly constant. For |s| = 100 every intermediate stays finite.
//
// Backward (LayerNorm backward, then the ReLU mask), with dx_j = g da_j:
//   dg += sum_j da_j x_j,   db += sum_j da_j
//   dr_j = rstd (dx_j - mean(dx) - x_j mean(dx * x))
//   ds_j += dr_j [s_j > 0]                                                              O(n)
// mu and rstd are recomputed from s in backward (arithmetic only, no transcendentals).
//
// Reference: paper, arXiv 2309.10713 (equation not located)
// Deviations from it: the LayerNorm runs over the causal row's keys (the paper's ViT rows are not
//   causal); its eps (attn.eps = 1e-12) and the per-head affine (attn.affine = learn) are this
//   implementation's choices.
#include <math.h>

#include "attention/rowmap.h"

enum { AFF_LEARN, AFF_NONE };

static const AttnHParamSpec relu_ln_hparams[] = {
    {"eps", 1e-12f, 1e-13f, 1.0f, NULL, "epsilon added to the row variance"},
    {"affine", AFF_LEARN, 0, 0, "learn|none",
     "learn: learnable per-head gain and bias; none: gain 1, bias 0"},
};

static const char* const relu_ln_param_names[] = {"gain", "bias"};

static void relu_ln_init_params(real* p, const AttnHParams* hp) {
    (void)hp;
    p[0] = 1.0f;
    p[1] = 0.0f;
}

// Row statistics in double: the weights are then rounded to float once.
typedef struct {
    double mu, rstd;
    double g, b;
    int learn;
} ReluLnStats;

static ReluLnStats relu_ln_stats(const real* s, int n, const AttnRowCtx* ctx) {
    ReluLnStats st;
    st.learn = (int)ctx->hp->v[1] == AFF_LEARN && ctx->p != NULL;
    st.g = st.learn ? ctx->p[0] : 1.0f;
    st.b = st.learn ? ctx->p[1] : 0.0f;
    double sum = 0.0;
    for (int j = 0; j < n; j++)
        sum += real_fmax(s[j], 0.0f);
    st.mu = sum / n;
    double var = 0.0;
    for (int j = 0; j < n; j++) {
        double d = real_fmax(s[j], 0.0f) - st.mu;
        var += d * d;
    }
    var /= n;
    st.rstd = 1.0 / sqrt(var + (double)ctx->hp->v[0]);
    return st;
}

static void relu_ln_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    ReluLnStats st = relu_ln_stats(s, n, ctx);
    const double scale = st.g * st.rstd;
    for (int j = 0; j < n; j++)
        a[j] = (real)((real_fmax(s[j], 0.0f) - st.mu) * scale + st.b);
}

static void relu_ln_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                 const AttnRowCtx* ctx) {
    (void)a;
    ReluLnStats st = relu_ln_stats(s, n, ctx);
    const double mu = st.mu, rstd = st.rstd;
    double sum_da = 0.0, sum_dax = 0.0; // sum da, sum da * x
    for (int j = 0; j < n; j++) {
        double x = (real_fmax(s[j], 0.0f) - mu) * rstd;
        sum_da += da[j];
        sum_dax += da[j] * x;
    }
    if (st.learn && ctx->dp) {
        ctx->dp[0] += (real)sum_dax;
        ctx->dp[1] += (real)sum_da;
    }
    const double invn = 1.0 / n;
    const double mean_dx = st.g * sum_da * invn, mean_dxx = st.g * sum_dax * invn;
    for (int j = 0; j < n; j++) { // branch-free ReLU mask (signs of s are unpredictable)
        double x = (s[j] - mu) * rstd;
        real g = (real)(rstd * (st.g * da[j] - mean_dx - x * mean_dxx));
        ds[j] += s[j] > 0.0f ? g : 0.0f;
    }
}

const AttnVariant attn_relu_ln = {
    .name = "relu_ln",
    .formula = "a = g * LayerNorm_row(ReLU(s)) + b",
    .source = "Zhou, Loy, Dai 2023, ViTs as ConvNets with Dynamic Convolutions (arXiv 2309.10713)",
    .reference = "paper, arXiv 2309.10713 (equation not located)",
    .deviations = "the LayerNorm runs over the causal row's keys (the paper's ViT rows are not "
                  "causal); its eps (attn.eps = 1e-12) and the per-head affine (attn.affine = "
                  "learn) are this implementation's choices",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .hparams = relu_ln_hparams,
    .n_hparams = 2,
    .params_per_head = 2,
    .param_names = relu_ln_param_names,
    .init_params = relu_ln_init_params,
    .forward_row = relu_ln_forward_row,
    .backward_row = relu_ln_backward_row,
};
