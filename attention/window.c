// attention/window.c: sliding-window softmax attention, with a fixed window or a window
// resampled at every training step as in SWAX.
//
// Sources: VARIANTS.md B5. Sliding-window attention (Longformer/Mistral style local attention);
// SWAX (hybrid of sliding-window attention and xLSTM) trains with a stochastically changing
// window size and evaluates at a fixed one; LayerBoost uses SWA in moderately sensitive layers.
//
//   a_tj = exp(s_tj - m) / sum_{t-w < k <= t} exp(s_tk - m)   for t - w < j <= t,  else a_tj = 0
//   m = max over the window. Row length n = t + 1; w >= n means the whole causal row.
//
// Hyperparameters (defaults):
//   attn.window      = 64      window w used in fixed mode and at evaluation (step = -1)
//   attn.window_mode = fixed   fixed | stochastic
//   attn.window_min  = 16      stochastic mode: w drawn uniformly from [window_min, window_max]
//   attn.window_max  = 128     (the bounds are ordered if given the wrong way round)
// In stochastic mode w is a pure function of (run seed, training step, layer) through a
// splitmix64 hash, so a resumed run, any thread count and forward/backward of one step all see
// the same window; every head of a layer shares it. Evaluation (step = -1) uses attn.window.
// No learnable parameters. Rows sum to 1; shift-invariant. Entries outside the window are
// exactly 0 and receive zero gradient.
//
// Numerics: subtracting the window max keeps every exponent <= 0 (finite for any finite s).
// Backward: the softmax VJP restricted to the window, ds_j += a_j (da_j - <a, da>_window) for
// t - w < j <= t, nothing outside. O(n) per row.
//
// Reference: paper, SWAX (seed abstract 003:L7; VARIANTS.md B5; no single equation)
// Deviations from it: sliding-window softmax with the window drawn uniformly per step and layer in
//   stochastic mode (attn.window_mode); the window sizes and their distribution are this
//   implementation's choices.
#include <math.h>
#include <stdint.h>

#include "attention/rowmap.h"
#include "attention/rowops.h"

enum { WM_FIXED, WM_STOCHASTIC };

static const AttnHParamSpec window_hparams[] = {
    {"window", 64.0f, 1.0f, 1e9f, NULL,
     "window w: keys t-w < j <= t (fixed mode and evaluation; w >= t+1: whole row)"},
    {"window_mode", WM_FIXED, 0, 0, "fixed|stochastic",
     "fixed = attn.window always; stochastic = w drawn per (step, layer) in training"},
    {"window_min", 16.0f, 1.0f, 1e9f, NULL, "stochastic mode: smallest window"},
    {"window_max", 128.0f, 1.0f, 1e9f, NULL, "stochastic mode: largest window"},
};

// the window of this row's (step, layer)
static long window_size(const AttnRowCtx* ctx) {
    const float* v = ctx->hp->v;
    if ((int)v[1] != WM_STOCHASTIC || ctx->step < 0) return (long)v[0];
    long lo = (long)v[2], hi = (long)v[3];
    if (lo > hi) {
        long tmp = lo;
        lo = hi;
        hi = tmp;
    }
    uint64_t h =
        rowops_draw(ctx, ctx->seed ^ rowops_mix64((uint64_t)ctx->step ^
                                                  rowops_mix64((uint64_t)(ctx->layer + 1))));
    // the top 32 bits scaled to [0, hi - lo] (hi - lo + 1 <= 1e9 < 2^32): the lowest draw gives
    // window_min, the highest window_max
    return lo + (long)(((h >> 32) * (uint64_t)(hi - lo + 1)) >> 32);
}

static int window_lo(int n, const AttnRowCtx* ctx) {
    long w = window_size(ctx);
    return w >= (long)n ? 0 : n - (int)w;
}

static void window_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const int lo = window_lo(n, ctx);
    for (int j = 0; j < lo; j++)
        a[j] = 0.0f;
    real m = -INFINITY;
    for (int j = lo; j < n; j++)
        m = real_fmax(m, s[j]);
    real sum = 0.0f;
    for (int j = lo; j < n; j++) {
        a[j] = real_exp(s[j] - m);
        sum += a[j];
    }
    const real inv = 1.0f / sum;
    for (int j = lo; j < n; j++)
        a[j] *= inv;
}

static void window_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                const AttnRowCtx* ctx) {
    (void)s;
    const int lo = window_lo(n, ctx);
    real dot = 0.0f;
    for (int j = lo; j < n; j++)
        dot += a[j] * da[j];
    for (int j = lo; j < n; j++)
        ds[j] += a[j] * (da[j] - dot);
}

const AttnVariant attn_window = {
    .name = "window",
    .formula = "a = softmax over t-w < j <= t, 0 elsewhere; w fixed or drawn per step (SWAX)",
    .source = "Sliding-window attention; SWAX stochastic windows (VARIANTS.md B5)",
    .reference = "paper, SWAX (seed abstract 003:L7; VARIANTS.md B5; no single equation)",
    .deviations = "sliding-window softmax with the window drawn uniformly per step and layer in "
                  "stochastic mode (attn.window_mode); the window sizes and their distribution are "
                  "this implementation's choices",
    .rows_sum_to_one = 1,
    .shift_invariant = 1,
    .hparams = window_hparams,
    .n_hparams = 4,
    .forward_row = window_forward_row,
    .backward_row = window_backward_row,
};
