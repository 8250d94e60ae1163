// attention/linear_scale.c: linear "scaling-factor" attention (no nonlinearity).
//
// Sources: the non-local block's scaling-factor variant of softmax and the Galerkin Transformer's
// "softmax is sufficient but not necessary" (VARIANTS.md A28). A baseline for the question of
// whether any normalising nonlinearity is needed:
//
//   a_j = s_j / N,   N = n (the causal row length, `attn.length = row`)
//                    N = T_train (the training sequence length, `attn.length = train`)
//
// Reference: paper, Wang et al. 2018 Non-local Neural Networks, Sec. 3.2 (dot product, C(x) = N).
// Deviations from it: causal rows, so N is the row length n (attn.length = train: T_train).
// No learnable parameters. Rows do not sum to 1; not shift-invariant.
// Numerics: a linear map, finite for any finite scores.
// Backward: J = I / N, so ds_j += da_j / N                                                O(n)
#include "attention/rowmap.h"

enum { LEN_ROW, LEN_TRAIN };

static const AttnHParamSpec linear_scale_hparams[] = {
    {"length", LEN_ROW, 0, 0, "row|train",
     "divisor N: row = causal row length n = t + 1; train = training sequence length"},
};

static real linear_scale_inv(int n, const AttnRowCtx* ctx) {
    int N = (int)ctx->hp->v[0] == LEN_TRAIN ? ctx->hp->T_train : n;
    return 1.0f / (real)(N > 0 ? N : 1);
}

static void linear_scale_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const real inv = linear_scale_inv(n, ctx);
    for (int j = 0; j < n; j++)
        a[j] = s[j] * inv;
}

static void linear_scale_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                      const AttnRowCtx* ctx) {
    (void)s;
    (void)a;
    const real inv = linear_scale_inv(n, ctx);
    for (int j = 0; j < n; j++)
        ds[j] += da[j] * inv;
}

const AttnVariant attn_linear_scale = {
    .name = "linear_scale",
    .formula = "a = s / n  (or s / T_train; no nonlinearity)",
    .source = "Non-local block scaling factor; Cao 2021 Galerkin Transformer (VARIANTS.md A28)",
    .reference = "paper, Wang et al. 2018 Non-local Neural Networks, Sec. 3.2 (the dot-product "
                 "pairwise function, normalised by C(x) = N)",
    .deviations =
        "causal rows: N is the row length n = t + 1 (the paper's N counts every position; "
        "attn.length = train divides by the training length instead)",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .hparams = linear_scale_hparams,
    .n_hparams = 1,
    .forward_row = linear_scale_forward_row,
    .backward_row = linear_scale_backward_row,
};
