// attention/multimax.c: MultiMax, softmax of a learned piecewise-quadratic modulation of the
// scores (sparser for low scores, sharper or flatter for high ones).
//
//   z_j = s_j + t0 relu(r0 - s_j) + t1 relu(s_j - r1) + t2 relu(r2 - s_j)^2 + t3 relu(s_j - r3)^2
//   a   = softmax(z)
//
// Zhou, Fritz, Keuper, MultiMax: Sparse and Multi-Modal Attention Learning, ICML 2024 (code
// ZhouYuxuanYX/MultiMax). The paper shares t, r across the heads of a module; here each head has
// its own. Learnable per-head parameters "t0".."t3", "r0".."r3" (8 floats), initialised at
// attn.t_init = 0 and attn.r_init = 0 (the paper draws both from N(0, 0.02^2), i.e. about 0),
// so the map starts as the softmax. Rows sum to 1; not shift-invariant (the thresholds r are
// absolute, once any t is nonzero).
//
// Numerics: the max of z is subtracted before exp (the quadratic terms can make z large), so
// every exponent is <= 0; z is finite for finite s and parameters.
//
// Backward. dz = a (da - <a, da>) (softmax VJP), then with the masks of the four hinges:
//   ds  = dz (1 - t0 [s<r0] + t1 [s>r1] - 2 t2 relu(r2-s) + 2 t3 relu(s-r3))
//   dt0 = sum dz relu(r0-s),  dt1 = sum dz relu(s-r1),  dt2 = sum dz relu(r2-s)^2,
//   dt3 = sum dz relu(s-r3)^2
//   dr0 = sum dz t0 [s<r0],   dr1 = -sum dz t1 [s>r1],  dr2 = sum dz 2 t2 relu(r2-s),
//   dr3 = -sum dz 2 t3 relu(s-r3)
// One exp per entry in forward, none in backward; O(n).
//
// Reference: ZhouYuxuanYX/MultiMax:multihead_attention.py
// Deviations from it: t and r are per head (reference: one set of 4 + 4 shared by the heads of a
//   module); init 0 (attn.t_init, attn.r_init; the reference draws both from a truncated N(0,
//   0.02^2)).
#include <math.h>

#include "attention/rowmap.h"
#include "attention/rowops.h"

enum { HP_T0, HP_R0, N_HP };

static const AttnHParamSpec MULTIMAX_HP[N_HP] = {
    [HP_T0] = {"t_init", 0.0f, -10.0f, 10.0f, NULL, "initial t0..t3 (0: starts as softmax)"},
    [HP_R0] = {"r_init", 0.0f, -100.0f, 100.0f, NULL, "initial thresholds r0..r3"},
};

static const char* const MULTIMAX_PARAMS[] = {"t0", "t1", "t2", "t3", "r0", "r1", "r2", "r3"};

static void multimax_init_params(real* p, const AttnHParams* hp) {
    for (int k = 0; k < 4; k++) {
        p[k] = hp->v[HP_T0];
        p[4 + k] = hp->v[HP_R0];
    }
}

static void multimax_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const real* t = ctx->p;
    const real* r = ctx->p + 4;
    for (int j = 0; j < n; j++) { // z, branch-free so it vectorises
        real x = s[j];
        real l0 = rowops_max_f(r[0] - x, 0.0f), h1 = rowops_max_f(x - r[1], 0.0f);
        real l2 = rowops_max_f(r[2] - x, 0.0f), h3 = rowops_max_f(x - r[3], 0.0f);
        a[j] = x + t[0] * l0 + t[1] * h1 + t[2] * l2 * l2 + t[3] * h3 * h3;
    }
    rowops_softmax(a, a, n);
}

static void multimax_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                  const AttnRowCtx* ctx) {
    const real* t = ctx->p;
    const real* r = ctx->p + 4;
    real dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < n; j++)
        dot += a[j] * da[j];
    // `omp simd reduction` lets the eight parameter sums vectorise; their order is fixed by the
    // compiled code, so results do not depend on the thread count
    real g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0;
#pragma omp simd reduction(+ : g0, g1, g2, g3, g4, g5, g6, g7)
    for (int j = 0; j < n; j++) {
        real x = s[j], dz = a[j] * (da[j] - dot);
        real l0 = rowops_max_f(r[0] - x, 0.0f), h1 = rowops_max_f(x - r[1], 0.0f);
        real l2 = rowops_max_f(r[2] - x, 0.0f), h3 = rowops_max_f(x - r[3], 0.0f);
        real i0 = x < r[0] ? 1.0f : 0.0f, i1 = x > r[1] ? 1.0f : 0.0f;
        ds[j] += dz * (1.0f - t[0] * i0 + t[1] * i1 - 2.0f * t[2] * l2 + 2.0f * t[3] * h3);
        g0 += dz * l0;
        g1 += dz * h1;
        g2 += dz * l2 * l2;
        g3 += dz * h3 * h3;
        g4 += dz * i0;
        g5 += dz * i1;
        g6 += dz * l2;
        g7 += dz * h3;
    }
    if (!ctx->dp) return;
    real* dp = ctx->dp;
    dp[0] += g0;
    dp[1] += g1;
    dp[2] += g2;
    dp[3] += g3;
    dp[4] += t[0] * g4;
    dp[5] -= t[1] * g5;
    dp[6] += 2.0f * t[2] * g6;
    dp[7] -= 2.0f * t[3] * g7;
}

const AttnVariant attn_multimax = {
    .name = "multimax",
    .formula = "a = softmax(s + t0 relu(r0-s) + t1 relu(s-r1) + t2 relu(r2-s)^2 + t3 relu(s-r3)^2)",
    .source = "Zhou, Fritz, Keuper, ICML 2024",
    .reference = "ZhouYuxuanYX/MultiMax:multihead_attention.py",
    .deviations =
        "t and r are per head (reference: one set of 4 + 4 shared by the heads of a module); init "
        "0 (attn.t_init, attn.r_init; the reference draws both from a truncated N(0, 0.02^2))",
    .rows_sum_to_one = 1,
    .shift_invariant = 0,
    .hparams = MULTIMAX_HP,
    .n_hparams = N_HP,
    .params_per_head = 8,
    .param_names = MULTIMAX_PARAMS,
    .init_params = multimax_init_params,
    .forward_row = multimax_forward_row,
    .backward_row = multimax_backward_row,
};
