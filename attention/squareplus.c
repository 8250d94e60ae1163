// attention/squareplus.c: Squareplus attention: Barron's algebraic softplus-like squareplus of each
// score in place of exp, as ReaLLM-Forge uses it in attention.
//
//   f(x) = (x + sqrt(x^2 + b)) / 2
//   attn.form = reallm (default):  a_j = f(s_j) / D          (no normalisation over the row)
//   attn.form = barron:            a_j = f(s_j) / sum_{k<n} f(s_k)
//
// f is smooth and positive for b > 0, f(x) -> x for x >> 0 and f(x) ~ b / (4 |x|) for x << 0
// (a heavy polynomial tail instead of softmax's exponential one); f(0) = sqrt(b) / 2, f'(0) = 1/2.
// b = 4 ln^2 2 (the default, ReaLLM-Forge's) gives f(0) = ln 2 = softplus(0) and is the smallest b
// with f >= softplus everywhere.
//
// Sources: J. T. Barron, "Squareplus: A Softplus-Like Algebraic Rectifier", arXiv 2112.11687 (the
// activation; the paper has no attention). The attention use is ReaLLM-Forge's,
// ReaLLMASIC/ReaLLM-Forge: variations/softmax_variations.py (class Squareplus, applied to the
// masked logits by variations/attention_variations.py): 0.5 (x + sqrt(x^2 + b)) /
// squareplus_divisor with b = 4 ln^2 2 and the divisor 256 (gpt_conf.py; its train_args.py
// command line defaults to 100), no row normalisation: attnlab's default is that form. The
// row-normalised form (attn.form = barron) is attnlab's earlier default (then with b = 4: set
// attn.b = 4 to reproduce it).
// Deviations from ReaLLM-Forge: masked (future) keys get weight 0, the limit of f at -inf (their
// f(-inf) evaluates to -inf + inf = NaN); its optional div_by_seq_len is not offered.
//
// Learnable parameters: none. Hyperparameters: attn.form = reallm | barron, attn.b = 4 ln^2 2
// (> 0), attn.divisor = 256 (> 0, reallm only).
//
// Numerics: for x < 0 the sum x + r (r = sqrt(x^2 + b)) cancels; the identity
// (x + r)(r - x) = r^2 - x^2 = b gives f(x) = b / (2 (r - x)), exact and cancellation-free. The
// barron row sum is >= n * min f > 0, so the division is always defined. No exponentials.
//
// Backward. f'(x) = (1 + x / r) / 2 = f(x) / r.
//   reallm: a_j = f_j / D, so ds_j += da_j a_j / r_j.
//   barron: with S = sum_k f(s_k) and a = f / S, the VJP of the normalisation is
//           df_j = (da_j - <a, da>) / S, so ds_j += (da_j - <a, da>) a_j / r_j (f_j / S = a_j).
// O(n), one sqrt per entry. Rows sum to 1 under barron only; not shift-invariant.
#include <math.h>

#include "attention/rowmap.h"
#include "attention/rowops.h"

enum { HP_FORM, HP_B, HP_DIV };
enum { FORM_REALLM, FORM_BARRON };

static const AttnHParamSpec SQUAREPLUS_HP[] = {
    {"form", FORM_REALLM, 0, 0, "reallm|barron",
     "reallm: a = f(s) / divisor (ReaLLM-Forge); barron: a = f(s) / sum f(s) over the row"},
    {"b", 1.92181206f, 1e-6f, 1e6f, NULL,
     "curvature b > 0 of f(x) = (x + sqrt(x^2 + b)) / 2 (default 4 ln^2 2)"},
    {"divisor", 256.0f, 1e-6f, 1e9f, NULL, "form = reallm: the constant D of a = f(s) / D"},
};

static real squareplus(real x, real b, real r) {
    return x >= 0.0f ? 0.5f * (x + r) : 0.5f * b / (r - x);
}

static void squareplus_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const real b = ctx->hp->v[HP_B];
    real sum = 0.0f;
    for (int j = 0; j < n; j++) {
        const real r = real_sqrt(s[j] * s[j] + b);
        a[j] = squareplus(s[j], b, r);
        sum += a[j];
    }
    const real inv =
        (int)ctx->hp->v[HP_FORM] == FORM_BARRON ? 1.0f / sum : 1.0f / (real)ctx->hp->v[HP_DIV];
    for (int j = 0; j < n; j++)
        a[j] *= inv;
}

static void squareplus_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                    const AttnRowCtx* ctx) {
    const real b = ctx->hp->v[HP_B];
    const real dot = (int)ctx->hp->v[HP_FORM] == FORM_BARRON ? rowops_dot(a, da, n) : 0.0f;
    for (int j = 0; j < n; j++)
        ds[j] += (da[j] - dot) * a[j] / real_sqrt(s[j] * s[j] + b);
}

const AttnVariant attn_squareplus = {
    .name = "squareplus",
    .formula = "a = f(s) / D (reallm) or f(s) / sum f(s) (barron), f(x) = (x + sqrt(x^2 + b)) / 2",
    .source = "Barron 2021, Squareplus: A Softplus-Like Algebraic Rectifier, arXiv 2112.11687; "
              "ReaLLM-Forge",
    .reference = "ReaLLMASIC/ReaLLM-Forge:variations/softmax_variations.py (Squareplus)",
    .deviations = "masked keys get 0 (ReaLLM-Forge's f(-inf) is NaN); div_by_seq_len not offered; "
                  "divisor 256 as its gpt_conf.py (its train_args.py defaults to 100); "
                  "attn.form = barron normalises over the row (attnlab's earlier default, with "
                  "attn.b = 4)",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .hparams = SQUAREPLUS_HP,
    .n_hparams = (int)(sizeof(SQUAREPLUS_HP) / sizeof(SQUAREPLUS_HP[0])),
    .forward_row = squareplus_forward_row,
    .backward_row = squareplus_backward_row,
};
