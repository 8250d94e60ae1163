// attention/credal.c: credal (evidential / Dirichlet) attention.
//
// Paper: S. Ji, Z. Song, J. Huang, "Credal Transformer: A Principled Approach for Quantifying and
// Mitigating Hallucinations in LLMs", arXiv 2510.12137. Scores are evidence masses of a Dirichlet
// distribution over the keys; the weights are the Dirichlet mean (the standard Evidential Deep
// Learning parameterisation, VARIANTS.md A20):
//
//   e_j = e(s_j) >= 0,   alpha_j = e_j + 1,   S = sum_{k<n} alpha_k = sum_k e_k + n,
//   a_j = alpha_j / S,   uncertainty u = n / S in (0, 1]  (logged per head as "uncertainty")
//
// Evidence function, `attn.evidence` (default softplus, as VARIANTS.md recommends):
//   softplus  e(s) = log(1 + exp(s))       e'(s) = sigmoid(s)
//   exp       e(s) = exp(s)                e'(s) = e(s)   (large evidence recovers softmax)
//   relu      e(s) = max(s, 0)             e'(s) = 1[s > 0]
// With little evidence every row tends to the uniform 1/n; rows always sum to 1. Not
// shift-invariant (the +1 prior mass fixes the scale). No learnable parameters.
//
// Numerics (|s| up to 100 and beyond, fp32):
//   softplus is evaluated as max(s,0) + log1p(exp(-|s|)), so it never overflows.
//   exp would overflow for s > 88. It is evaluated exactly in log space instead of being clamped:
//   with M = max(0, max_k s_k),  a_j = (exp(s_j - M) + exp(-M)) / sum_k (exp(s_k - M) + exp(-M)),
//   which is the same ratio with numerator and denominator scaled by exp(-M); every exponent is
//   <= 0 and the denominator is >= 1 (the arg-max term), so the forward is finite for all s.
//
// Backward. a = alpha / S with dalpha_j/ds_j = e'(s_j):
//   da_j/dalpha_k = ([j=k] - a_j) / S   =>   dalpha_k = (da_k - <a, da>) / S
//   ds_k += (da_k - <a, da>) * e'(s_k) / S                                         O(n)
// 1/S is recovered from the forward output without a second reduction: for any j,
// 1/S = a_j / (1 + e(s_j)); j = arg min s is used (the smallest evidence, best conditioned; for
// the exp evidence 1 + e^{s_min} = inf gives 1/S = 0, the correct limit). For the exp evidence
// e'(s_k)/S = e_k/S = a_k - 1/S needs no transcendental at all.
//
// Reference: paper, arXiv 2510.12137 (equations not located)
// Deviations from it: evidence e = softplus(s) by default (the evidential-learning form of
//   VARIANTS.md A20); the public implementation
//   Chunjiang-Intelligence/Credal-Transformer:src/layers/attention.py uses e = exp(s - max s), the
//   max-shifted exponential, which no attn key reproduces (attn.evidence = exp is the unshifted e =
//   exp(s)).
#include <math.h>
#include <stdint.h>

#include "attention/rowmap.h"

enum { EV_SOFTPLUS, EV_EXP, EV_RELU };

static const AttnHParamSpec credal_hparams[] = {
    {"evidence", EV_SOFTPLUS, 0, 0, "softplus|exp|relu",
     "evidence function e(s) >= 0; the Dirichlet concentrations are e(s) + 1"},
};

static int credal_mode(const AttnRowCtx* ctx) {
    return (int)ctx->hp->v[0];
}

static real softplus(real x) {
    return real_fmax(x, 0.0f) + real_log1p(real_exp(-real_fabs(x)));
}

static real evidence(int mode, real s) {
    if (mode == EV_SOFTPLUS) return softplus(s);
    if (mode == EV_EXP) return real_exp(s);
    return real_fmax(s, 0.0f);
}

// The concentrations are kept in double in the scratch, so each weight is rounded to float once.
static size_t credal_scratch_floats(int T) {
    return 2 * (size_t)T + 2;
}

static double* credal_dbuf(real* scratch) {
    return (double*)(((uintptr_t)scratch + 7) & ~(uintptr_t)7);
}

static void credal_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    if (n == 1) { // a single key carries all the mass, whatever its evidence
        a[0] = 1.0f;
        return;
    }
    int mode = credal_mode(ctx);
    double* al = credal_dbuf(ctx->scratch);
    double sum = 0.0;
    if (mode == EV_EXP) {
        real m = 0.0f; // M = max(0, max s): exponents s - M <= 0 and -M <= 0
        for (int j = 0; j < n; j++)
            m = real_fmax(m, s[j]);
        double prior = exp(-(double)m);
        for (int j = 0; j < n; j++) {
            al[j] = exp((double)s[j] - (double)m) + prior;
            sum += al[j];
        }
    } else if (mode == EV_SOFTPLUS) {
        for (int j = 0; j < n; j++) {
            double x = s[j];
            al[j] = 1.0 + fmax(x, 0.0) + log1p(exp(-fabs(x)));
            sum += al[j];
        }
    } else {
        for (int j = 0; j < n; j++) {
            al[j] = 1.0 + fmax((double)s[j], 0.0);
            sum += al[j];
        }
    }
    double inv = 1.0 / sum;
    for (int j = 0; j < n; j++)
        a[j] = (real)(al[j] * inv);
}

// 1/S from the forward output: a_j / (1 + e(s_j)) at the smallest score.
static real credal_inv_total(const real* a, const real* s, int n, int mode) {
    int jmin = 0;
    for (int j = 1; j < n; j++)
        if (s[j] < s[jmin]) jmin = j;
    return a[jmin] / (1.0f + evidence(mode, s[jmin]));
}

static void credal_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                const AttnRowCtx* ctx) {
    int mode = credal_mode(ctx);
    real invS = credal_inv_total(a, s, n, mode);
    real dot = 0.0f;
    for (int j = 0; j < n; j++)
        dot += a[j] * da[j];
    if (mode == EV_EXP) {
        for (int j = 0; j < n; j++)
            ds[j] += (da[j] - dot) * (a[j] - invS);
    } else if (mode == EV_SOFTPLUS) {
        for (int j = 0; j < n; j++)
            ds[j] += (da[j] - dot) * invS / (1.0f + real_exp(-s[j]));
    } else {
        for (int j = 0; j < n; j++)
            if (s[j] > 0.0f) ds[j] += (da[j] - dot) * invS;
    }
}

// Uncertainty u = n / S: 1 with no evidence, -> 0 with overwhelming evidence.
static real credal_row_stat(const real* a, const real* s, int n, const AttnRowCtx* ctx) {
    return (real)n * credal_inv_total(a, s, n, credal_mode(ctx));
}

const AttnVariant attn_credal = {
    .name = "credal",
    .formula = "a = (e(s) + 1) / sum (e(s) + 1), e = softplus|exp|relu; uncertainty n/S",
    .source = "Ji, Song, Huang 2025, Credal Transformer (arXiv 2510.12137)",
    .reference = "paper, arXiv 2510.12137 (equations not located)",
    .deviations = "evidence e = softplus(s) by default (the evidential-learning form of "
                  "VARIANTS.md A20); the public implementation "
                  "Chunjiang-Intelligence/Credal-Transformer:src/layers/attention.py uses e = "
                  "exp(s - max s), the max-shifted exponential, which no attn key reproduces "
                  "(attn.evidence = exp is the unshifted e = exp(s))",
    .rows_sum_to_one = 1,
    .shift_invariant = 0,
    .hparams = credal_hparams,
    .n_hparams = 1,
    .scratch_floats = credal_scratch_floats,
    .forward_row = credal_forward_row,
    .backward_row = credal_backward_row,
    .row_stat_name = "uncertainty",
    .row_stat = credal_row_stat,
};
