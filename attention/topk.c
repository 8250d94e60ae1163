// attention/topk.c: top-k attention: softmax over the k largest scores of the causal row, zero
// weight elsewhere.
//
//   K = the k largest s_j (j < n), ties at the k-th value broken by lower index first
//   a_j = exp(s_j - max s) / sum_{i in K} exp(s_i - max s)  (j in K),   a_j = 0 otherwise
//
// Rows with n <= k are plain softmax. The selection is piecewise constant in s, so away from
// ties the Jacobian is the softmax Jacobian on K and zero elsewhere.
//
// Source: A. Gupta, G. Dar, S. Goodman, D. Ciprut, J. Berant, "Memory-efficient Transformers via
// Top-k Attention", SustaiNLP 2021, arXiv 2106.06899.
//
// Learnable parameters: none. Hyperparameters: attn.k = 32 (an integer >= 1).
//
// Numerics: the k-th largest value is found by quickselect on a copy of the row in the row
// scratch (expected O(n)); the softmax subtracts the row max (always in K), so exponents are <= 0.
//
// Backward: with a supported on K, the softmax VJP restricted to K is
//   ds_j += a_j (da_j - <a, da>)
// and a_j = 0 off K makes that entry 0, so the plain softmax VJP over the whole row is exact;
// O(n).
// Rows sum to 1; shift-invariant.
//
// Reference: ag1988/top_k_attention:nocache_attention/nocache_attention.py
// Deviations from it: ties at the k-th score are broken by the lower index (torch.topk leaves them
//   unspecified); k = 32 is this project's default (the reference takes k as an argument).
#include <math.h>
#include <string.h>

#include "attention/rowmap.h"
#include "attention/rowops.h"

enum { HP_K };

static const AttnHParamSpec TOPK_HP[] = {
    {"k", 32.0f, 1.0f, 1e6f, NULL, "number of keys kept per row (the k largest scores)"},
};

static size_t topk_scratch(int T) {
    return (size_t)T;
}

// the k-th largest of x[0..n) (1 <= k <= n); x is permuted
static real kth_largest(real* x, int n, int k) {
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        const real pivot = x[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) { // descending partition
            while (x[i] > pivot)
                i++;
            while (x[j] < pivot)
                j--;
            if (i <= j) {
                const real t = x[i];
                x[i] = x[j];
                x[j] = t;
                i++;
                j--;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            return x[want];
    }
    return x[want];
}

static void topk_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    const int k = (int)ctx->hp->v[HP_K];
    if (n <= k) {
        rowops_softmax(a, s, n);
        return;
    }
    real* tmp = ctx->scratch;
    memcpy(tmp, s, sizeof(real) * (size_t)n);
    const real thr = kth_largest(tmp, n, k);
    int above = 0;
    real m = -INFINITY;
    for (int j = 0; j < n; j++) {
        above += s[j] > thr;
        m = s[j] > m ? s[j] : m;
    }
    int ties = k - above; // entries equal to thr to keep, lowest index first
    real sum = 0.0f;
    for (int j = 0; j < n; j++) {
        int keep = s[j] > thr;
        if (!keep && s[j] == thr && ties > 0) {
            keep = 1;
            ties--;
        }
        a[j] = keep ? real_exp(s[j] - m) : 0.0f;
        sum += a[j];
    }
    const real inv = 1.0f / sum;
    for (int j = 0; j < n; j++)
        a[j] *= inv;
}

static void topk_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                              const AttnRowCtx* ctx) {
    (void)s;
    (void)ctx;
    rowops_softmax_backward(ds, da, a, n);
}

const AttnVariant attn_topk = {
    .name = "topk",
    .formula = "a = softmax over the k largest scores of the row, 0 elsewhere",
    .source = "Gupta et al. 2021, Memory-efficient Transformers via Top-k Attention, arXiv "
              "2106.06899",
    .reference = "ag1988/top_k_attention:nocache_attention/nocache_attention.py",
    .deviations =
        "ties at the k-th score are broken by the lower index (torch.topk leaves them "
        "unspecified); k = 32 is this project's default (the reference takes k as an argument)",
    .rows_sum_to_one = 1,
    .shift_invariant = 1,
    .hparams = TOPK_HP,
    .n_hparams = (int)(sizeof(TOPK_HP) / sizeof(TOPK_HP[0])),
    .scratch_floats = topk_scratch,
    .forward_row = topk_forward_row,
    .backward_row = topk_backward_row,
    .row_stat_name = "support",
    .row_stat = rowops_support,
};
