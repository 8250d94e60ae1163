// attention/relu.c: ReLU attention, normalisation-free: each weight is a rectified score.
//
//   relu_n (default)  a_j = ReLU(s_j) / n
//   relu              a_j = ReLU(s_j)
//   relu2             a_j = ReLU(s_j)^2 / n
//
// n = t + 1 is the causal row length: the causal adaptation of Wortsman et al.'s division by the
// sequence length L (ViT, non-causal), so the output scale does not grow with the row.
//
// Sources: M. Wortsman, J. Lee, J. Gilmer, S. Kornblith, "Replacing softmax with ReLU in Vision
// Transformers", arXiv 2309.08586 (ReLU(s)/L); Y. Ran-Milo, "Attention Sinks Are Provably
// Necessary in Softmax Transformers", arXiv 2603.11487 (non-normalised ReLU attention); the
// squared form is the ReLU^alpha family (alpha = 2) discussed in the HSR sparse-attention theory.
//
// Learnable parameters: none. Hyperparameters: attn.form = relu_n | relu | relu2.
//
// Numerics: no exponentials; for |s| <= 100 the largest weight is 1e4 (relu2, n = 1). A row with
// every score <= 0 is all zeros (the head outputs 0).
//
// Backward (elementwise, subgradient 0 at s = 0):
//   relu_n: ds_j += da_j 1[s_j > 0] / n
//   relu:   ds_j += da_j 1[s_j > 0]
//   relu2:  ds_j += da_j 2 ReLU(s_j) / n
// O(n), no transcendental.
// Rows do not sum to 1; not shift-invariant.
//
// Reference: paper, arXiv 2309.08586 (ReLU(s)/L; equation not located)
// Deviations from it: L, the sequence length of the paper's non-causal ViT, becomes the causal row
//   length n (attn.form = relu is Ran-Milo's unnormalised ReLU); the paper trains with qk-layernorm
//   (model key qk_norm).
#include "attention/rowmap.h"
#include "attention/compose.h"

enum { HP_FORM };
enum { FORM_RELU_N, FORM_RELU, FORM_RELU2 };
_Static_assert((int)HP_FORM == (int)ATTN_RELU_HP_FORM &&
                   (int)FORM_RELU_N == (int)ATTN_RELU_FORM_N &&
                   (int)FORM_RELU == (int)ATTN_RELU_FORM_PLAIN &&
                   (int)FORM_RELU2 == (int)ATTN_RELU_FORM_SQ,
               "attention/compose.h must match relu's hyperparameters");

static const AttnHParamSpec RELU_HP[] = {
    {"form", FORM_RELU_N, 0, 0, "relu_n|relu|relu2",
     "ReLU(s)/n (row length n), plain ReLU(s), or ReLU(s)^2/n"},
};

static void relu_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const int form = (int)ctx->hp->v[HP_FORM];
    const real inv_n = form == FORM_RELU ? 1.0f : 1.0f / (real)n;
    if (form == FORM_RELU2) {
        for (int j = 0; j < n; j++) {
            real r = s[j] > 0.0f ? s[j] : 0.0f;
            a[j] = r * r * inv_n;
        }
    } else {
        for (int j = 0; j < n; j++)
            a[j] = (s[j] > 0.0f ? s[j] : 0.0f) * inv_n;
    }
}

static void relu_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                              const AttnRowCtx* ctx) {
    (void)a;
    const int form = (int)ctx->hp->v[HP_FORM];
    const real inv_n = form == FORM_RELU ? 1.0f : 1.0f / (real)n;
    if (form == FORM_RELU2) {
        const real c = 2.0f * inv_n;
        for (int j = 0; j < n; j++)
            ds[j] += da[j] * c * (s[j] > 0.0f ? s[j] : 0.0f);
    } else {
        for (int j = 0; j < n; j++)
            ds[j] += s[j] > 0.0f ? da[j] * inv_n : 0.0f;
    }
}

const AttnVariant attn_relu = {
    .name = "relu",
    .formula = "a = ReLU(s)/n | ReLU(s) | ReLU(s)^2/n  (attn.form; n = row length)",
    .source = "Wortsman et al. 2023, arXiv 2309.08586; Ran-Milo 2026, arXiv 2603.11487",
    .reference = "paper, arXiv 2309.08586 (ReLU(s)/L; equation not located)",
    .deviations = "L, the sequence length of the paper's non-causal ViT, becomes the causal row "
                  "length n (attn.form = relu is Ran-Milo's unnormalised ReLU); the paper trains "
                  "with qk-layernorm (model key qk_norm)",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .hparams = RELU_HP,
    .n_hparams = (int)(sizeof(RELU_HP) / sizeof(RELU_HP[0])),
    .forward_row = relu_forward_row,
    .backward_row = relu_backward_row,
};
