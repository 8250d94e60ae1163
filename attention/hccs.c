// attention/hccs.c: HCCS, head-calibrated clipped-linear softmax: a bounded, monotone,
// exponential-free surrogate of softmax on the max-centred scores, with a per-head offset and
// slope.
//
//   e_j = clip(alpha_h + beta_h (s_j - max s), 0, 1),   a = e / sum e
//
// Danopoulos, Lupi, Kagan, Pierini, Taming the Exponential: A Fast Softmax Surrogate for
// Integer-Native Edge Inference, arXiv 2604.02292. The exact parameterisation of the paper was
// not reachable; this follows VARIANTS.md A16.
// Learnable per-head parameters: "alpha" (offset at the row max, init attn.alpha_init = 1) and
// "log_beta" (beta = exp(log_beta) > 0, init ln(attn.beta_init), attn.beta_init = 1: with
// alpha = 1 the ramp 1 + (s - max) is the tangent of exp(s - max) at the max, i.e. it matches exp
// to first order on [-1/beta, 0], and reaches 0 at s = max - 1).
// attn.learn = on|off: off is a fixed calibration: the map uses attn.alpha_init and
// attn.beta_init directly and the per-head parameters are unused (no gradient).
// Rows sum to 1; shift-invariant (max-centred).
//
// All-zero row: when alpha <= 0 every e_j is 0 (the max gets clip(alpha) = 0 and the rest is
// lower). The row is then uniform over the keys that attain the max, which is the limit of the
// map as alpha -> 0+ with everything else clipped; it is locally constant, so its backward is 0
// for the scores and for both parameters. Numerics: no exponential; e is in [0, 1] and the sum
// is >= clip(alpha, 0, 1) for the max, so the only division-by-zero case is the one above.
//
// Backward. With Z = sum e, lin_j = [0 < alpha + beta (s_j - m) < 1], j* = first argmax:
//   de_j  = (da_j - <a, da>) / Z
//   ds_k  = beta lin_k de_k - [k = j*] beta sum_j lin_j de_j      (m = s_j* moves with s_j*)
//   dalpha = sum_j lin_j de_j,   dbeta = sum_j lin_j de_j (s_j - m),   dlog_beta = beta dbeta
// All O(n), two passes, no transcendental.
//
// Reference: paper, arXiv 2604.02292 (exact parameterisation not located)
// Deviations from it: clip(alpha + beta (s - max s), 0, 1), normalised, with learnable per-head
//   alpha and log beta follows VARIANTS.md A16, not the paper's equations; the paper's offline
//   calibration and int8 arithmetic are not modelled (fp32; attn.learn = off is a fixed
//   calibration).
#include <math.h>

#include "attention/rowmap.h"

// max/min without libm's NaN and signed-zero handling (a call per element otherwise; inputs are
// finite), so loops stay inline and vectorise
static inline real max_f(real x, real y) {
    return x > y ? x : y;
}

static inline real min_f(real x, real y) {
    return x < y ? x : y;
}

enum { HP_ALPHA0, HP_BETA0, HP_LEARN, N_HP };

static const AttnHParamSpec HCCS_HP[N_HP] = {
    [HP_ALPHA0] = {"alpha_init", 1.0f, 0.0f, 1.0f, NULL, "initial offset alpha_h at the row max"},
    [HP_BETA0] = {"beta_init", 1.0f, 1e-3f, 100.0f, NULL,
                  "initial slope beta_h (the ramp reaches 0 at s = max - alpha/beta)"},
    [HP_LEARN] = {"learn", 1, 0, 0, "off|on",
                  "learn alpha_h, beta_h (off: the map uses alpha_init, beta_init)"},
};

static const char* const HCCS_PARAMS[] = {"alpha", "log_beta"};

static void hccs_init_params(real* p, const AttnHParams* hp) {
    p[0] = hp->v[HP_ALPHA0];
    p[1] = real_log(hp->v[HP_BETA0]);
}

static real clip01(real x) {
    return min_f(max_f(x, 0.0f), 1.0f);
}

// e into a, returns Z; *jstar = first argmax, *m = max
static real hccs_ramp(real* a, const real* s, int n, real alpha, real beta, int* jstar, real* m) {
    int js = 0;
    for (int j = 1; j < n; j++)
        if (s[j] > s[js]) js = j;
    real mx = s[js], z = 0.0f;
    for (int j = 0; j < n; j++) {
        a[j] = clip01(alpha + beta * (s[j] - mx));
        z += a[j];
    }
    *jstar = js;
    *m = mx;
    return z;
}

// (alpha, beta): the per-head parameters, or the fixed calibration when attn.learn = off
static void hccs_params(real* alpha, real* beta, const AttnRowCtx* ctx) {
    if (ctx->hp->v[HP_LEARN] >= 0.5f && ctx->p) {
        *alpha = ctx->p[0];
        *beta = real_exp(ctx->p[1]);
    } else {
        *alpha = ctx->hp->v[HP_ALPHA0];
        *beta = ctx->hp->v[HP_BETA0];
    }
}

static void hccs_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    real alpha, beta;
    hccs_params(&alpha, &beta, ctx);
    int js;
    real m;
    real z = hccs_ramp(a, s, n, alpha, beta, &js, &m);
    if (z > 0.0f) {
        double inv = 1.0 / (double)z;
        for (int j = 0; j < n; j++)
            a[j] = (real)(a[j] * inv);
        return;
    }
    int ties = 0;
    for (int j = 0; j < n; j++)
        ties += s[j] == m;
    real u = 1.0f / (real)ties;
    for (int j = 0; j < n; j++)
        a[j] = s[j] == m ? u : 0.0f;
}

static void hccs_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                              const AttnRowCtx* ctx) {
    real alpha, beta;
    hccs_params(&alpha, &beta, ctx);
    // Z from the max entry: e_j* = clip(alpha) and a_j* = e_j* / Z
    int js = 0;
    for (int j = 1; j < n; j++)
        if (s[j] > s[js]) js = j;
    const real m = s[js], ejs = clip01(alpha);
    if (ejs <= 0.0f) return; // all-zero row: locally constant fallback
    real z = 0.0f;           // the forward's sum, same order
    for (int j = 0; j < n; j++)
        z += clip01(alpha + beta * (s[j] - m));
    real dot = 0.0f;
    for (int j = 0; j < n; j++)
        dot += a[j] * da[j];
    const real invz = 1.0f / z;
    real sl = 0.0f, slx = 0.0f;
    for (int j = 0; j < n; j++) {
        real d = s[j] - m, u = alpha + beta * d;
        if (u > 0.0f && u < 1.0f) {
            real de = (da[j] - dot) * invz;
            ds[j] += beta * de;
            sl += de;
            slx += de * d;
        }
    }
    ds[js] -= beta * sl;
    if (ctx->dp && ctx->hp->v[HP_LEARN] >= 0.5f) {
        ctx->dp[0] += sl;
        ctx->dp[1] += beta * slx;
    }
}

const AttnVariant attn_hccs = {
    .name = "hccs",
    .formula = "a = clip(alpha_h + beta_h (s - max s), 0, 1) / sum(.)",
    .source = "Danopoulos et al. 2026 (2604.02292)",
    .reference = "paper, arXiv 2604.02292 (exact parameterisation not located)",
    .deviations =
        "clip(alpha + beta (s - max s), 0, 1), normalised, with learnable per-head alpha and log "
        "beta follows VARIANTS.md A16, not the paper's equations; the paper's offline calibration "
        "and int8 arithmetic are not modelled (fp32; attn.learn = off is a fixed calibration)",
    .rows_sum_to_one = 1,
    .shift_invariant = 1,
    .hparams = HCCS_HP,
    .n_hparams = N_HP,
    .params_per_head = 2,
    .param_names = HCCS_PARAMS,
    .init_params = hccs_init_params,
    .forward_row = hccs_forward_row,
    .backward_row = hccs_backward_row,
};
