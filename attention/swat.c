// attention/swat.c: SWAT, sigmoid attention in a sliding window with balanced ALiBi slopes.
//
// Paper: Z. Fu et al., "Sliding Window Attention Training for Efficient Large Language Models",
// arXiv 2502.18845 (VARIANTS.md A30). Softmax is replaced by an unnormalised sigmoid, keys are
// restricted to a window of the w most recent positions, and a per-head linear position bias
// (ALiBi) with "balanced" slopes is added; RoPE is combined with it through the model's
// pos_encoding (use learned or rope, not alibi, which would add a second bias).
//
//   a_tj = sigmoid(s_tj + m_h (j - t) + b)   for t - w < j <= t,   a_tj = 0 for j <= t - w
//
// Window w = `attn.window` (default 128, the paper's window); w >= n means the whole row.
// Slopes, `attn.slopes` (H = n_head, h = head index, P = ceil(H/2)):
//   balanced (default)  heads h < P: m_h = +2^(-8(h+1)/P) (a penalty on distance, favours recent
//                       keys); heads h >= P: m_h = -2^(-8(h-P+1)/P) (favours distant keys in the
//                       window). Inside the window the bias is bounded by |m_h| (w - 1).
//   alibi               m_h = attn_alibi_slope(h, H), standard ALiBi (attention/posenc.h: the ALiBi
//                       authors' slopes; 2^(-8(h+1)/H) when H is a power of two).
// The balanced slopes use the plain geometric sequence 2^(-8(h+1)/P) for every P, the form of
// get_alibi_slope in SWAT's code (Fzkuji/swat-attention:fla/layers/swat_attn.py, which takes it
// for any head count), not ALiBi's get_slopes: the two agree when P is a power of two (H = 2, 4,
// 8, 16) and differ otherwise (H = 6, 12). The split into halves is attnlab's reading of the
// paper's "balanced ALiBi"; that file passes all NH slopes with one sign.
//   none                m_h = 0.
// Bias, `attn.bias`: none (default, b = 0) | fixed (b = -ln min(w, T_train), the sigmoid-attention
// prior of one unit of mass per row) | learn (per-head parameter "bias" with that init).
// Learnable per-head parameter "bias", used only with attn.bias = learn.
// Rows do not sum to 1; not shift-invariant. Entries outside the window are exactly 0 and get
// zero gradient.
//
// Numerics: sigmoid(x) = 1 / (1 + exp(-x)); for x -> -inf exp overflows to +inf and the result is
// exactly 0, for x -> +inf it is 1: finite for |s| = 100 and any bias.
//
// Backward: da/dx = a (1 - a) elementwise, so inside the window
//   ds_j += da_j a_j (1 - a_j),   db += sum_j da_j a_j (1 - a_j)   (attn.bias = learn)     O(n)
// and nothing outside it.
//
// Reference: paper, arXiv 2502.18845 (equations not located)
// Deviations from it: window 128 and balanced slopes as described in VARIANTS.md A30; no bias by
//   default (attn.bias = fixed or learn adds -ln min(w, T_train)); the paper pairs it with RoPE
//   (pos_encoding = rope); the authors' repository Fzkuji/swat-attention was found, but its current
//   fla/layers/swattn.py runs softmax flash attention with standard ALiBi slopes, so it was not
//   taken as the reference.
#include <math.h>

#include "attention/layer.h"

enum { SL_BALANCED, SL_ALIBI, SL_NONE };
enum { B_NONE, B_FIXED, B_LEARN };

static const AttnHParamSpec swat_hparams[] = {
    {"window", 128.0f, 1.0f, 1e9f, NULL, "sliding window: keys t-w < j <= t (w >= n: whole row)"},
    {"slopes", SL_BALANCED, 0, 0, "balanced|alibi|none",
     "position bias m_h (j - t): balanced = half the heads +ALiBi, half -ALiBi slopes"},
    {"bias", B_NONE, 0, 0, "none|fixed|learn",
     "sigmoid bias: none = 0, fixed = -ln min(w, T_train), learn = per-head parameter"},
};

static const char* const swat_param_names[] = {"bias"};

static real swat_prior_bias(const AttnHParams* hp) {
    real w = hp->v[0];
    real T = hp->T_train > 0 ? (real)hp->T_train : w;
    return -real_log(real_fmax(real_fmin(w, T), 1.0f));
}

static void swat_init_params(real* p, const AttnHParams* hp) {
    p[0] = swat_prior_bias(hp);
}

static real swat_slope(const AttnRowCtx* ctx) {
    const int mode = (int)ctx->hp->v[1];
    const int H = ctx->hp->n_head > 0 ? ctx->hp->n_head : 1, h = ctx->h;
    if (mode == SL_NONE) return 0.0f;
    if (mode == SL_ALIBI) return attn_alibi_slope(h, H);
    const int P = (H + 1) / 2;
    if (h < P) return real_pow(2.0f, -8.0f * (real)(h + 1) / (real)P);
    return -real_pow(2.0f, -8.0f * (real)(h - P + 1) / (real)P);
}

static real swat_bias(const AttnRowCtx* ctx) {
    const int mode = (int)ctx->hp->v[2];
    if (mode == B_FIXED) return swat_prior_bias(ctx->hp);
    if (mode == B_LEARN && ctx->p) return ctx->p[0];
    return 0.0f;
}

// first key inside the window of a row of length n
static int swat_lo(int n, const AttnRowCtx* ctx) {
    real w = ctx->hp->v[0];
    return w >= (real)n ? 0 : n - (int)w;
}

static void swat_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const int lo = swat_lo(n, ctx), t = n - 1;
    const real m = swat_slope(ctx), b = swat_bias(ctx);
    for (int j = 0; j < lo; j++)
        a[j] = 0.0f;
    for (int j = lo; j < n; j++) {
        real x = s[j] + m * (real)(j - t) + b;
        a[j] = 1.0f / (1.0f + real_exp(-x));
    }
}

static void swat_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                              const AttnRowCtx* ctx) {
    (void)s;
    const int lo = swat_lo(n, ctx);
    real gsum = 0.0f;
    for (int j = lo; j < n; j++) {
        real g = da[j] * a[j] * (1.0f - a[j]);
        ds[j] += g;
        gsum += g;
    }
    if ((int)ctx->hp->v[2] == B_LEARN && ctx->dp) ctx->dp[0] += gsum;
}

const AttnVariant attn_swat = {
    .name = "swat",
    .formula = "a = sigmoid(s + m_h (j - t) + b) for t - w < j <= t, else 0 (balanced ALiBi)",
    .source = "Fu et al. 2025, SWAT: Sliding Window Attention Training (arXiv 2502.18845)",
    .reference = "paper, arXiv 2502.18845 (equations not located)",
    .deviations =
        "window 128 and balanced slopes as described in VARIANTS.md A30; no bias by default "
        "(attn.bias = fixed or learn adds -ln min(w, T_train)); the paper pairs it with RoPE "
        "(pos_encoding = rope); the authors' repository Fzkuji/swat-attention was found, but its "
        "current fla/layers/swattn.py runs softmax flash attention with standard ALiBi slopes, so "
        "it was not taken as the reference",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .hparams = swat_hparams,
    .n_hparams = 3,
    .params_per_head = 1,
    .param_names = swat_param_names,
    .init_params = swat_init_params,
    .forward_row = swat_forward_row,
    .backward_row = swat_backward_row,
};
