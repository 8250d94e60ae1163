// attention/polynomial.c: polynomial attention: each weight is a power of its (clamped) score,
// scaled by 1/sqrt(N); no positivity, no normalisation.
//
//   x_j = clamp(s_j, -c, c);    a_j = x_j^p / sqrt(N)
//   N = n (the causal row length, attn.scale = row, default) or T_train (attn.scale = train)
//
// Source: H. Saratchandran, J. Zheng, Y. Ji, W. Zhang, S. Lucey, "Rethinking Attention: Polynomial
// Alternatives to Softmax in Transformers", arXiv 2410.18613: phi(x) = x^p / sqrt(N) with N the
// sequence length, p = 3 the main choice (an odd power keeps the sign, so weights can be
// negative). The scale matches softmax's bound ||softmax(S)||_F <= sqrt(N). Causal adaptation:
// dividing each row by sqrt(n) keeps every row's norm O(1), as one softmax row has norm <= 1, and
// is the default; sqrt(T_train) is the fixed alternative (early rows are then smaller).
//
// Learnable parameters: none. Hyperparameters: attn.power = 3 (an integer 1..7; a fractional
// value is rounded to the nearest integer, since x^p is undefined for x < 0 otherwise),
// attn.clamp = 10 (c), attn.scale = row | train.
//
// Numerics: the clamp bounds |a_j| <= c^p / sqrt(N), 1e3 at the defaults and at most
// 1000^7 = 1e21 at the extreme settings, finite in fp32; no exponentials.
//
// Backward (the clamp passes the gradient at its bounds inclusively, as torch.clamp does):
//   ds_j += da_j p x_j^(p-1) / sqrt(N) * 1[-c <= s_j <= c]
// Elementwise, O(n), no transcendental (x^(p-1) by repeated multiplication).
// Rows do not sum to 1; not shift-invariant.
//
// Reference: paper, arXiv 2410.18613 (phi(x) = x^p / sqrt(N); equation not located)
// Deviations from it: scores are clamped to [-10, 10] first (attn.clamp; the paper has no clamp); N
//   is the causal row length n (attn.scale = train uses T_train, the paper's fixed sequence
//   length).
#include <math.h>

#include "attention/rowmap.h"

enum { HP_POWER, HP_CLAMP, HP_SCALE };
enum { SCALE_ROW, SCALE_TRAIN };

static const AttnHParamSpec POLY_HP[] = {
    {"power", 3.0f, 1.0f, 7.0f, NULL, "integer power p (rounded): a = clamp(s)^p / sqrt(N)"},
    {"clamp", 10.0f, 0.001f, 1000.0f, NULL, "scores are clamped to [-clamp, clamp] first"},
    {"scale", SCALE_ROW, 0, 0, "row|train", "N = row length n, or T_train"},
};

static int poly_power(const AttnHParams* hp) {
    return (int)real_lround(hp->v[HP_POWER]);
}

static real poly_inv_sqrt_n(int n, const AttnHParams* hp) {
    int N = (int)hp->v[HP_SCALE] == SCALE_TRAIN ? hp->T_train : n;
    return 1.0f / real_sqrt((real)(N > 1 ? N : 1));
}

static real poly_clamp(real x, real c) {
    x = x < -c ? -c : x;
    return x > c ? c : x;
}

static real poly_ipow(real x, int e) {
    real r = 1.0f;
    for (int i = 0; i < e; i++)
        r *= x;
    return r;
}

static void poly_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const int p = poly_power(ctx->hp);
    const real c = ctx->hp->v[HP_CLAMP];
    const real k = poly_inv_sqrt_n(n, ctx->hp);
    if (p == 3) {
        for (int j = 0; j < n; j++) {
            real x = poly_clamp(s[j], c);
            a[j] = x * x * x * k;
        }
    } else {
        for (int j = 0; j < n; j++)
            a[j] = poly_ipow(poly_clamp(s[j], c), p) * k;
    }
}

static void poly_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                              const AttnRowCtx* ctx) {
    (void)a;
    const int p = poly_power(ctx->hp);
    const real c = ctx->hp->v[HP_CLAMP];
    const real pk = (real)p * poly_inv_sqrt_n(n, ctx->hp);
    for (int j = 0; j < n; j++) {
        real x = s[j];
        if (x < -c || x > c) continue;
        real d = p == 3 ? x * x : poly_ipow(x, p - 1);
        ds[j] += da[j] * pk * d;
    }
}

const AttnVariant attn_polynomial = {
    .name = "polynomial",
    .formula = "a = clamp(s, -c, c)^p / sqrt(N), N = n (row) or T_train",
    .source = "Saratchandran et al. 2024, Rethinking Attention: Polynomial Alternatives, "
              "arXiv 2410.18613",
    .reference = "paper, arXiv 2410.18613 (phi(x) = x^p / sqrt(N); equation not located)",
    .deviations =
        "scores are clamped to [-10, 10] first (attn.clamp; the paper has no clamp); N is the "
        "causal row length n (attn.scale = train uses T_train, the paper's fixed sequence length)",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .hparams = POLY_HP,
    .n_hparams = (int)(sizeof(POLY_HP) / sizeof(POLY_HP[0])),
    .forward_row = poly_forward_row,
    .backward_row = poly_backward_row,
};
