// attention/slowgrow.c: slow-growing kernel attention (a normalised non-exponential kernel).
//
// Source: slow-growing kernels for heavy-tailed inputs in post-normalisation architectures
// (paper not located; VARIANTS.md A23 [I]), where softmax's exp is replaced by a kernel that
// grows polynomially or logarithmically:
//
//   a_j = kappa(s_j) / sum_{k<n} kappa(s_k),   kappa > 0, increasing, sub-exponential
//
// Kernels, `attn.kernel` (p = `attn.degree`, default 2, used by poly and log):
//   poly  kappa(s) = (1 + |s|)^(+p) for s >= 0,  (1 + |s|)^(-p) for s < 0
//         i.e. log kappa = p symlog(s), symlog(s) = sign(s) log(1 + |s|): polynomial growth
//         for s > 0 and polynomial decay for s < 0.
//   log   kappa(s) = (1 + log(1 + |s|))^(+-p): logarithmic growth / decay.
//   elu1  kappa(s) = 1 + ELU(s) = 1 + s for s > 0, exp(s) for s <= 0 (linear growth,
//         exponential decay; attn.degree unused).
// Each kernel is positive, C^1 at 0 (kappa(0) = 1) and finite for every finite s.
// No learnable parameters. Rows sum to 1; not shift-invariant (kappa(s + c) is not a constant
// multiple of kappa(s)).
//
// Numerics: the map is evaluated as a = softmax(z), z_j = log kappa(s_j), which is exactly
// kappa/sum kappa; the row max of z is subtracted, so every exponent is <= 0 and the forward is
// finite for any finite s and any degree (no overflow of (1 + |s|)^p, no underflow of the sum).
//
// Backward: with z' = d log kappa / ds, the softmax VJP in z times z':
//   ds_j += a_j (da_j - <a, da>) z'(s_j)                                                 O(n)
//   poly: z' = p / (1 + |s|)        log: z' = p / ((1 + |s|)(1 + log(1 + |s|)))
//   elu1: z' = 1 (s <= 0), 1 / (1 + s) (s > 0)
//
// Reference: paper, not located (seed abstract 002#7; VARIANTS.md A23)
// Deviations from it: the kernels (attn.kernel = poly|log|elu1) and the degree are this
//   implementation's choices.
#include <math.h>

#include "attention/rowmap.h"
#include "attention/rowops.h"

enum { K_POLY, K_LOG, K_ELU1 };

static const AttnHParamSpec slowgrow_hparams[] = {
    {"kernel", K_POLY, 0, 0, "poly|log|elu1",
     "kernel: poly (1+|s|)^(+-p), log (1+log(1+|s|))^(+-p), elu1 1+ELU(s)"},
    {"degree", 2.0f, 0.05f, 64.0f, NULL, "power p of the poly and log kernels"},
};

// log kappa(s)
static double slowgrow_z(int kernel, double p, double s) {
    double l = log1p(fabs(s));
    if (kernel == K_POLY) return copysign(p * l, s);
    if (kernel == K_LOG) return copysign(p * log1p(l), s);
    return s <= 0.0 ? s : l;
}

// z and exp(z - max) are kept in double in the scratch: each weight is rounded to float once.
static size_t slowgrow_scratch_floats(int T) {
    return 2 * (size_t)T + 2;
}

static void slowgrow_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const int kernel = (int)ctx->hp->v[0];
    const double p = ctx->hp->v[1];
    double* z = rowops_scratch_double(ctx->scratch);
    for (int j = 0; j < n; j++)
        z[j] = slowgrow_z(kernel, p, (double)s[j]);
    rowops_softmax_double(a, z, n);
}

static void slowgrow_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                  const AttnRowCtx* ctx) {
    const int kernel = (int)ctx->hp->v[0];
    const real p = ctx->hp->v[1];
    const real dot = rowops_dot(a, da, n);
    if (kernel == K_POLY) {
        for (int j = 0; j < n; j++)
            ds[j] += a[j] * (da[j] - dot) * p / (1.0f + real_fabs(s[j]));
    } else if (kernel == K_LOG) {
        for (int j = 0; j < n; j++) {
            real u = real_fabs(s[j]);
            ds[j] += a[j] * (da[j] - dot) * p / ((1.0f + u) * (1.0f + real_log1p(u)));
        }
    } else {
        for (int j = 0; j < n; j++) {
            real g = a[j] * (da[j] - dot);
            ds[j] += s[j] <= 0.0f ? g : g / (1.0f + s[j]);
        }
    }
}

const AttnVariant attn_slowgrow = {
    .name = "slowgrow",
    .formula = "a = kappa(s) / sum kappa(s), kappa = (1+|s|)^(+-p) | (1+log(1+|s|))^(+-p) | 1+ELU",
    .source = "Slow-growing kernels for heavy-tailed inputs (VARIANTS.md A23)",
    .reference = "paper, not located (seed abstract 002#7; VARIANTS.md A23)",
    .deviations = "the kernels (attn.kernel = poly|log|elu1) and the degree are this "
                  "implementation's choices",
    .rows_sum_to_one = 1,
    .shift_invariant = 0,
    .hparams = slowgrow_hparams,
    .n_hparams = 2,
    .scratch_floats = slowgrow_scratch_floats,
    .forward_row = slowgrow_forward_row,
    .backward_row = slowgrow_backward_row,
};
