// attention/keynorm.c: Gaussian-kernel attention, written as key-norm-penalised softmax.
//
// Sources: the Gaussian attention kernel of the gradient-descent analysis "Softmax vs Gaussian
// attention kernels" and the Boltzmann-aggregation reading of softmax that notes the omitted
// -|k|^2 term (VARIANTS.md A25). The Gaussian kernel exp(-|q_t - k_j|^2 / (2 sqrt d)) expands to
// exp(q.k/sqrt d) * exp(-|q|^2/(2 sqrt d)) * exp(-|k_j|^2/(2 sqrt d)); the |q_t|^2 factor is the
// same for the whole row and cancels in the normalisation, so with s = q.k/sqrt d:
//
//   z_j = s_j - c |k_j|^2,   c = coef / (2 sqrt d),   a = softmax(z)
//
// d = head size; |k_j|^2 is the raw key norm supplied by the driver (needs_key_sq). `attn.coef`
// (default 1, the Gaussian kernel) scales the penalty; coef = 0 is plain softmax. No learnable
// parameters. Rows sum to 1; shift-invariant in s (a per-row constant cancels).
//
// Numerics: the row max of z is subtracted before exp, so every exponent is <= 0 and the forward
// is finite for any finite scores and key norms.
//
// Backward: with g_j = a_j (da_j - <a, da>) (the softmax VJP with respect to z),
//   ds_j += g_j,   d|k_j|^2 += -c g_j                                                  O(n)
// (the driver turns d|k_j|^2 into dk_j += 2 d|k_j|^2 k_j).
//
// Reference: paper, not located (seed abstracts 003:L59, 003:L139; VARIANTS.md A25)
// Deviations from it: attn.coef = 1 is exactly the Gaussian kernel exp(-|q - k|^2 / (2 sqrt d));
//   the source papers and code were not located.
#include <math.h>

#include "attention/rowmap.h"
#include "attention/rowops.h"

static const AttnHParamSpec keynorm_hparams[] = {
    {"coef", 1.0f, 0.0f, 100.0f, NULL,
     "multiplier of the key-norm penalty |k|^2/(2 sqrt d); 1 = Gaussian kernel, 0 = softmax"},
};

static real keynorm_c(const AttnRowCtx* ctx) {
    return ctx->hp->v[0] / (2.0f * real_sqrt((real)ctx->hp->head_size));
}

// The logits and exponentials are kept in double in the scratch (each weight is rounded to float
// once, so it is a smooth function of s and |k|^2 to float precision).
static size_t keynorm_scratch_floats(int T) {
    return 2 * (size_t)T + 2;
}

static void keynorm_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const double c = keynorm_c(ctx);
    const real* ks = ctx->key_sq;
    double* z = rowops_scratch_double(ctx->scratch);
    for (int j = 0; j < n; j++)
        z[j] = ks ? (double)s[j] - c * (double)ks[j] : (double)s[j];
    rowops_softmax_double(a, z, n);
}

static void keynorm_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                 const AttnRowCtx* ctx) {
    (void)s;
    real* dks = ctx->dkey_sq;
    if (!dks) {
        rowops_softmax_backward(ds, da, a, n);
        return;
    }
    const real dot = rowops_dot(a, da, n);
    const real c = keynorm_c(ctx);
    for (int j = 0; j < n; j++) {
        real g = a[j] * (da[j] - dot);
        ds[j] += g;
        dks[j] -= c * g;
    }
}

const AttnVariant attn_keynorm = {
    .name = "keynorm",
    .formula = "a = softmax(s - coef |k_j|^2 / (2 sqrt d))  (Gaussian kernel)",
    .source = "Gaussian-kernel attention / softmax without the -|k|^2 term (VARIANTS.md A25)",
    .reference = "paper, not located (seed abstracts 003:L59, 003:L139; VARIANTS.md A25)",
    .deviations = "attn.coef = 1 is exactly the Gaussian kernel exp(-|q - k|^2 / (2 sqrt d)); the "
                  "source papers and code were not located",
    .rows_sum_to_one = 1,
    .shift_invariant = 1,
    .hparams = keynorm_hparams,
    .n_hparams = 1,
    .needs_key_sq = 1,
    .scratch_floats = keynorm_scratch_floats,
    .forward_row = keynorm_forward_row,
    .backward_row = keynorm_backward_row,
};
