// attention/softplus.c: softplus attention with a log-length scale (LSSA), optionally followed
// by power re-weighting (LSSAR).
//
//   stage 1:  x_j = kappa_n s_j,  kappa_n = ln(n) / ln(n_ref),  e_j = softplus(x_j),  a = e / sum e
//   stage 2:  a~_j = a_j^P / sum_k a_k^P                          (attn.reweight = power)
//
// Gao, Spratling, Softplus Attention with Re-weighting Boosts Length Extrapolation in Large
// Language Models, arXiv 2501.13428 (code iminfine/freeatten). The structure (softplus in place
// of exp, l1 normalisation, an entropy-invariant log-length scale, a power re-weighting) is
// verified; the constants are not, so they are hyperparameters (VARIANTS.md A19):
//   attn.n_ref        = 0 in [0, 1e7]   reference length of the scale; 0 or 1: T_train
//   attn.length_scale = log|none        log: kappa_n = ln n / ln n_ref (row 0 gets kappa = 0 and
//                                       weight 1); none: kappa = 1
//   attn.reweight     = off|power       stage 2 on or off
//   attn.power        = 2 in [1, 8]     exponent P of stage 2
// No learnable parameters. Rows sum to 1; not shift-invariant.
//
// Numerics: softplus(x) = max(x, 0) + log1p(exp(-|x|)) never overflows. exp and log1p are
// inline polynomial versions (<= 3 ulp) so the row loops vectorise (no libm call per entry).
// If the whole row has x < -20, the weights could underflow at |s| = 100 with kappa > 1, so there
// e_j = exp(x_j - max x) is used instead: the same row after normalisation, since
// softplus(x) = e^x (1 + O(e^x)). Stage 2 raises e / max e in [0, 1], so it cannot overflow.
//
// Backward. Stage 1: de_k = (da_k - <a, da>)/Z with Z = sum e, and de/ds = kappa sigmoid(x), so
//   ds_k = kappa sigmoid(x_k) (da_k - <a, da>) / Z,
// with Z recovered from the largest weight (Z = e_k*/a_k*, a_k* >= 1/n): one exp per entry.
// Stage 2: with R = a^P, da_k = P a_k^(P-1) (da~_k - <a~, da~>) / sum R, whose inner product
// with a vanishes (sum a~ = 1), so the stage-1 step reduces to
//   ds_k = P kappa a~_k (da~_k - <a~, da~>) sigmoid(x_k) / softplus(x_k)
// (a~_k / a_k = a_k^(P-1)/sum R, a_k Z = e_k). In the all-below--20 regime both forms use
// sigmoid/softplus = 1, consistent with the exp-based forward. O(n).
//
// Reference: paper, arXiv 2501.13428 (method section not located; code iminfine/freeatten not in
//   the index)
// Deviations from it: the reference length of the scale (attn.n_ref, default T_train), the form of
//   the scale and the re-weighting's form and power (attn.reweight = off by default, attn.power =
//   2) are unverified readings of the abstract.
#include <math.h>

#include "attention/rowmap.h"
#include "attention/rowops.h"

enum { HP_NREF, HP_SCALE, HP_REWEIGHT, HP_POWER, N_HP };

static const AttnHParamSpec SOFTPLUS_HP[N_HP] = {
    [HP_NREF] = {"n_ref", 0, 0, 1e7f, NULL,
                 "reference length n_ref of kappa = ln n / ln n_ref (0 or 1: T_train)"},
    [HP_SCALE] = {"length_scale", 0, 0, 0, "log|none", "kappa = ln n / ln n_ref, or 1"},
    [HP_REWEIGHT] = {"reweight", 0, 0, 0, "off|power",
                     "stage 2 (LSSAR): a^P / sum a^P after the softplus normalisation"},
    [HP_POWER] = {"power", 2, 1, 8, NULL, "exponent P of the re-weighting"},
};

static real softplus_kappa(const AttnHParams* hp, int n) {
    if (hp->v[HP_SCALE] >= 0.5f) return 1.0f;
    real nref = hp->v[HP_NREF] >= 2.0f ? hp->v[HP_NREF] : (real)hp->T_train;
    if (nref < 2.0f) nref = 2.0f;
    return real_log((real)n) / real_log(nref);
}

// log1p(e) for e in [0, 1]: 2 atanh(u), u = e/(2+e) in [0, 1/3], series to u^13 (truncation
// < 2e-8 relative; measured <= 3 ulp overall), accurate for tiny e as well
#ifdef ATTN_REAL_DOUBLE
static inline real log1p_unit(real e) { // the double build: libm, exact to double
    return log1p(e);
}
#else
static inline real log1p_unit(real e) {
    real u = e / (2.0f + e), u2 = u * u;
    real q = 1.0f / 13.0f;
    q = q * u2 + 1.0f / 11.0f;
    q = q * u2 + 1.0f / 9.0f;
    q = q * u2 + 1.0f / 7.0f;
    q = q * u2 + 1.0f / 5.0f;
    q = q * u2 + 1.0f / 3.0f;
    real r = 2.0f * u;
    return r + r * u2 * q;
}
#endif

// softplus(x) = max(x, 0) + log1p(exp(-|x|)): never overflows, exact to float for any x
static inline real softplus_f(real x) {
    return rowops_max_f(x, 0.0f) + log1p_unit(rowops_exp_neg(-real_fabs(x)));
}

static void softplus_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const AttnHParams* hp = ctx->hp;
    if (n == 1) { // a single key: weight 1 exactly (also for kappa = 0)
        a[0] = 1.0f;
        return;
    }
    const real kappa = softplus_kappa(hp, n);
    real mx = -INFINITY;
    for (int j = 0; j < n; j++)
        mx = rowops_max_f(mx, kappa * s[j]);
    real emax;
    if (mx < -20.0f) { // every weight is exp(x) to float precision: normalise at the max
        for (int j = 0; j < n; j++)
            a[j] = rowops_exp_neg(kappa * s[j] - mx);
        emax = 1.0f;
    } else {
        for (int j = 0; j < n; j++)
            a[j] = softplus_f(kappa * s[j]);
        emax = softplus_f(mx);
    }
    if (hp->v[HP_REWEIGHT] >= 0.5f) { // stage 2 on e / max e in [0, 1]
        const real P = hp->v[HP_POWER], inve = 1.0f / emax;
        for (int j = 0; j < n; j++) {
            real r = a[j] * inve;
            a[j] = P == 2.0f ? r * r : real_pow(r, P);
        }
    }
    double sum = 0.0; // double: the rounding of 1/sum would move every weight the same way
    for (int j = 0; j < n; j++)
        sum += a[j];
    double inv = 1.0 / sum;
    for (int j = 0; j < n; j++)
        a[j] = (real)(a[j] * inv);
}

static void softplus_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                  const AttnRowCtx* ctx) {
    const AttnHParams* hp = ctx->hp;
    if (n == 1) return; // constant weight 1
    const real kappa = softplus_kappa(hp, n);
    int ks = 0;
    for (int j = 1; j < n; j++)
        if (s[j] > s[ks]) ks = j;
    const real mx = kappa * s[ks]; // kappa > 0 for n > 1
    real dot = 0.0f;
    for (int j = 0; j < n; j++)
        dot += a[j] * da[j];
    if (mx < -20.0f) { // exp regime: the softmax of x, times kappa (and P in stage 2)
        real c = kappa * (hp->v[HP_REWEIGHT] >= 0.5f ? hp->v[HP_POWER] : 1.0f);
        for (int j = 0; j < n; j++)
            ds[j] += c * a[j] * (da[j] - dot);
        return;
    }
    if (hp->v[HP_REWEIGHT] >= 0.5f) {
        const real c = hp->v[HP_POWER] * kappa;
        for (int j = 0; j < n; j++) {
            real x = kappa * s[j], E = rowops_exp_neg(-real_fabs(x));
            real sig = x >= 0.0f ? 1.0f / (1.0f + E) : E / (1.0f + E);
            real sp = rowops_max_f(x, 0.0f) + log1p_unit(E);
            real ratio = x < -20.0f ? 1.0f : sig / sp; // sigmoid/softplus -> 1 as x -> -inf
            ds[j] += c * a[j] * (da[j] - dot) * ratio;
        }
        return;
    }
    const real c = kappa * a[ks] / softplus_f(mx); // kappa / Z
    for (int j = 0; j < n; j++) {
        real x = kappa * s[j], E = rowops_exp_neg(-real_fabs(x));
        real sig = x >= 0.0f ? 1.0f / (1.0f + E) : E / (1.0f + E);
        ds[j] += c * sig * (da[j] - dot);
    }
}

const AttnVariant attn_softplus = {
    .name = "softplus",
    .formula = "a = softplus(kappa_n s) / sum(.), kappa_n = ln n / ln n_ref (LSSA)",
    .source = "Gao & Spratling 2025 (2501.13428)",
    .reference = "paper, arXiv 2501.13428 (method section not located; code iminfine/freeatten not "
                 "in the index)",
    .deviations = "the reference length of the scale (attn.n_ref, default T_train), the form of "
                  "the scale and the re-weighting's form and power (attn.reweight = off by "
                  "default, attn.power = 2) are unverified readings of the abstract",
    .rows_sum_to_one = 1,
    .shift_invariant = 0,
    .hparams = SOFTPLUS_HP,
    .n_hparams = N_HP,
    .forward_row = softplus_forward_row,
    .backward_row = softplus_backward_row,
};
