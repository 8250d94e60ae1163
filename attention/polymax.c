// attention/polymax.c: Polymax, ReaLLM-Forge's piecewise polynomial replacement of exp, with no
// row normalisation.
//
//   f(x) = 0                          x < x0            (flat)
//          y0 (1 - x / x0)            x0 <= x <= 0      (linear: 0 at x0, y0 at 0)
//          x^p + y0                   x > 0             (polynomial)
//   a_j  = f(s_j) / D
//
// with x0 < 0 the x-intercept, y0 > 0 the y-intercept, p the power and D the divisor. This is
// the `Polymax` module of ReaLLM-Forge (variations/softmax_variations.py): flat piece, linear
// piece with slope y0 / (0 - x0), polynomial piece x**power + y_intercept, the sum divided by
// `polymax_divisor`; defaults x_intercept = -100, y_intercept = 1, power = 2, divisor = 1000.
// f is continuous (f(x0) = 0, f(0) = y0 from both sides); f' jumps at x0 and at 0.
//
// Source: ReaLLM-Forge (a nanoGPT fork for hardware-friendly softmax research), Polymax.
//
// Learnable parameters: none. Hyperparameters: attn.x0 = -100, attn.y0 = 1, attn.power = 2,
// attn.divisor = 1000.
//
// Numerics: no exponentials; x^p is computed with pow for non-integer p, by multiplication for
// p = 2. For |s| <= 100 and p = 2, a <= (1e4 + 1) / D.
//
// Backward (elementwise, O(n)):
//   ds_j += da_j f'(s_j) / D,  f'(x) = 0 (x < x0), -y0 / x0 (x0 <= x <= 0), p x^(p-1) (x > 0)
// At the two kinks the one-sided derivative of the piece that contains the point is used.
// Rows do not sum to 1; not shift-invariant.
//
// Reference: ReaLLMASIC/ReaLLM-Forge:variations/softmax_variations.py
// Deviations from it: none.
#include <math.h>

#include "attention/rowmap.h"

enum { HP_X0, HP_Y0, HP_POWER, HP_DIVISOR };

static const AttnHParamSpec POLYMAX_HP[] = {
    {"x0", -100.0f, -1e6f, -1e-6f, NULL, "x-intercept (< 0): weights are 0 below it"},
    {"y0", 1.0f, 0.0f, 1e6f, NULL, "y-intercept: f(0)"},
    {"power", 2.0f, 1.0f, 8.0f, NULL, "power p of the polynomial piece x^p + y0 (x > 0)"},
    {"divisor", 1000.0f, 1e-6f, 1e9f, NULL, "divisor D of every weight"},
};

static real poly_pow(real x, real p) {
    return p == 2.0f ? x * x : real_pow(x, p);
}

static void polymax_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const float* v = ctx->hp->v;
    const real x0 = v[HP_X0], y0 = v[HP_Y0], p = v[HP_POWER], invd = (real)1 / v[HP_DIVISOR];
    for (int j = 0; j < n; j++) {
        const real x = s[j];
        real f = 0.0f;
        if (x > 0.0f)
            f = poly_pow(x, p) + y0;
        else if (x >= x0)
            f = y0 * (1.0f - x / x0);
        a[j] = f * invd;
    }
}

static void polymax_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                 const AttnRowCtx* ctx) {
    (void)a;
    const float* v = ctx->hp->v;
    const real x0 = v[HP_X0], y0 = v[HP_Y0], p = v[HP_POWER], invd = (real)1 / v[HP_DIVISOR];
    for (int j = 0; j < n; j++) {
        const real x = s[j];
        real d = 0.0f;
        if (x > 0.0f)
            d = p == 2.0f ? 2.0f * x : p * real_pow(x, p - 1.0f);
        else if (x >= x0)
            d = -y0 / x0;
        ds[j] += da[j] * d * invd;
    }
}

const AttnVariant attn_polymax = {
    .name = "polymax",
    .formula = "a = f(s) / D, f = 0 (s < x0), y0 (1 - s/x0) (x0 <= s <= 0), s^p + y0 (s > 0)",
    .source = "ReaLLM-Forge, Polymax (variations/softmax_variations.py)",
    .reference = "ReaLLMASIC/ReaLLM-Forge:variations/softmax_variations.py",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .hparams = POLYMAX_HP,
    .n_hparams = (int)(sizeof(POLYMAX_HP) / sizeof(POLYMAX_HP[0])),
    .forward_row = polymax_forward_row,
    .backward_row = polymax_backward_row,
};
