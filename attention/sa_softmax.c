// attention/sa_softmax.c: Self-Adjust Softmax (SA-Softmax): the softmax weights multiplied by
// the scores themselves, raw or min-max normalised over the causal row.
//
//   p = softmax(s)
//   scaled (default)  a_j = s_j p_j
//   minmax            a_j = w_j p_j,  w_j = (s_j - lo) / (hi - lo),
//                     lo = min(min_k s_k, 0),  hi = max(0, max_k s_k)   (k over the causal row)
//
// Source: C. Zheng et al., "Self-Adjust Softmax", arXiv 2502.18277 (chuanyang-Zheng/SA-Softmax).
// The scaled form can give negative weights; in the minmax form w in [0, 1], so rows sum to a
// value in [0, 1]. Row 0 (n = 1): scaled gives a = s; minmax gives 1 if s > 0 and 0 if s < 0.
//
// Learnable parameters: none (the arXiv v1 formula has none).
// Hyperparameters: attn.form = scaled | minmax.
// The gradient flows through lo and hi (what autograd gives); a stop-gradient on them is not
// offered, since its backward would not be the derivative of this map.
//
// Degenerate minmax row: r = hi - lo = 0 only when every score is exactly 0, where w is 0/0 and
// the map is discontinuous; such a row (and any with r < 1e-30, where 1/r would overflow the
// gradient) is defined as all zeros with zero gradient. Elsewhere the formula is exact (no eps
// added to r).
//
// Numerics: the softmax subtracts the row max; |a_j| <= |s_j| (scaled) or <= 1 (minmax), finite
// for |s| <= 100.
//
// Backward, with P = <da, p>, Q = <da, a>:
//   scaled: a_j = s_j p_j, da_j/ds_k = delta_jk p_j (1 + s_j) - s_j p_j p_k
//           ds_k += p_k (da_k (1 + s_k) - Q)
//   minmax: with r = hi - lo, dw_j/ds_k = (delta_jk - alpha_k - w_j (beta_k - alpha_k)) / r,
//           alpha_k = 1[k = argmin, s_min < 0] (= d lo / d s_k), beta_k = 1[k = argmax, s_max > 0]:
//           ds_k += (p_k da_k + alpha_k (Q - P) - beta_k Q) / r + p_k (da_k w_k - Q)
//           (ties for the argmin/argmax take the first index, a valid subgradient).
// p is needed where a does not determine it (s_j = 0, w_j = 0), so the backward recomputes the
// softmax (one exp per entry, kept in the row scratch); then O(n).
// Rows do not sum to 1; not shift-invariant.
//
// Reference: paper, arXiv 2502.18277 (v1 formula; equation not located)
// Deviations from it: in the minmax form lo and hi include 0 (w in [0, 1]) and the gradient flows
//   through them (no stop-gradient); code chuanyang-Zheng/SA-Softmax is not in the index.
#include <math.h>

#include "attention/rowmap.h"
#include "attention/rowops.h"

enum { HP_FORM };
enum { FORM_SCALED, FORM_MINMAX };

static const AttnHParamSpec SA_HP[] = {
    {"form", FORM_SCALED, 0, 0, "scaled|minmax",
     "s * softmax(s), or min-max-normalised s * softmax(s)"},
};

#define SA_MIN_RANGE 1e-30f

// lo = min(min s, 0), hi = max(max s, 0), first argmin / argmax
static void sa_range(real* lo, real* hi, int* kmin, int* kmax, const real* s, int n) {
    int i0 = 0, i1 = 0;
    for (int j = 1; j < n; j++) {
        if (s[j] < s[i0]) i0 = j;
        if (s[j] > s[i1]) i1 = j;
    }
    *kmin = i0;
    *kmax = i1;
    *lo = real_fmin(s[i0], 0.0f);
    *hi = real_fmax(s[i1], 0.0f);
}

static void sa_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    rowops_softmax(a, s, n);
    if ((int)ctx->hp->v[HP_FORM] == FORM_SCALED) {
        for (int j = 0; j < n; j++)
            a[j] *= s[j];
        return;
    }
    real lo, hi;
    int kmin, kmax;
    sa_range(&lo, &hi, &kmin, &kmax, s, n);
    real r = hi - lo;
    if (r < SA_MIN_RANGE) {
        for (int j = 0; j < n; j++)
            a[j] = 0.0f;
        return;
    }
    for (int j = 0; j < n; j++)
        a[j] *= (s[j] - lo) / r; // exact: w = 1 at the max, 0 at lo
}

static void sa_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                            const AttnRowCtx* ctx) {
    real* p = ctx->scratch; // n floats
    if ((int)ctx->hp->v[HP_FORM] == FORM_SCALED) {
        rowops_softmax(p, s, n);
        real Q = 0.0f;
        for (int j = 0; j < n; j++)
            Q += da[j] * a[j];
        for (int j = 0; j < n; j++)
            ds[j] += p[j] * (da[j] * (1.0f + s[j]) - Q);
        return;
    }
    real lo, hi;
    int kmin, kmax;
    sa_range(&lo, &hi, &kmin, &kmax, s, n);
    real r = hi - lo;
    if (r < SA_MIN_RANGE) return;
    real inv_r = 1.0f / r;
    rowops_softmax(p, s, n);
    real P = 0.0f, Q = 0.0f;
    for (int j = 0; j < n; j++) {
        P += da[j] * p[j];
        Q += da[j] * a[j];
    }
    // the 1/r terms are summed before scaling, so they cancel exactly where they should
    // (n = 1: the map is constant and the gradient is exactly 0)
    const real adj_min = s[kmin] < 0.0f ? Q - P : 0.0f;
    const real adj_max = s[kmax] > 0.0f ? -Q : 0.0f;
    for (int j = 0; j < n; j++) {
        real w = (s[j] - lo) / r;
        real t = p[j] * da[j];
        if (j == kmin) t += adj_min;
        if (j == kmax) t += adj_max;
        ds[j] += t * inv_r + p[j] * (da[j] * w - Q);
    }
}

static size_t sa_scratch(int T) {
    return (size_t)T;
}

const AttnVariant attn_sa_softmax = {
    .name = "sa_softmax",
    .formula = "a = s * softmax(s) | (s - lo)/(hi - lo) * softmax(s), lo = min(s,0), hi = max(s,0)",
    .source = "Zheng et al. 2025, Self-Adjust Softmax, arXiv 2502.18277",
    .reference = "paper, arXiv 2502.18277 (v1 formula; equation not located)",
    .deviations =
        "in the minmax form lo and hi include 0 (w in [0, 1]) and the gradient flows through them "
        "(no stop-gradient); code chuanyang-Zheng/SA-Softmax is not in the index",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .hparams = SA_HP,
    .n_hparams = (int)(sizeof(SA_HP) / sizeof(SA_HP[0])),
    .scratch_floats = sa_scratch,
    .forward_row = sa_forward_row,
    .backward_row = sa_backward_row,
};
