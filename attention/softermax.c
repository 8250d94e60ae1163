// attention/softermax.c: Softermax, the hardware-friendly base-2 softmax with an integer running
// max and an online normaliser.
//
//   m_j = max(m_{j-1}, ceil(s_j))              (integer running max, m_{-1} = -inf)
//   d_j = d_{j-1} 2^(m_{j-1} - m_j) + 2^(s_j - m_j)
//   a_j = 2^(s_j - M) / d_{n-1},   M = m_{n-1} = ceil(max_k s_k)
//
// The integer max makes every rescaling of the running sum a power-of-two shift (exact in
// hardware). Mathematically a = softmax(s ln 2): the base only rescales the logits, which the
// model absorbs into W_q W_k; the row max never enters a weight.
//
// Source: J. R. Stevens, R. Venkatesan, S. Dai, B. Khailany, A. Raghunathan, "Softermax:
// Hardware/Software Co-Design of an Efficient Softmax for Transformers", DAC 2021,
// arXiv 2103.09301 (base 2, integer max, online normalisation). The fixed-point
// quantisation of the paper's hardware unit is not modelled: arithmetic is fp32.
//
// Learnable parameters: none. Hyperparameters: none.
//
// Numerics: s_j - m_j <= 0 in every term, so 2^x is taken only for x <= 0 (through the inline
// exp of rowops.h at x ln 2: within 1.4 ulp of exp2f); 2^(m_{j-1} - m_j) is an exact power of two.
//
// Backward: a = softmax(z) with z = s ln 2, so with the softmax VJP
//   ds_j += ln 2 * a_j (da_j - <a, da>)
// O(n).
// Rows sum to 1; shift-invariant (up to rounding: the integer max moves with the shift).
//
// Reference: paper, arXiv 2103.09301 (equation not located)
// Deviations from it: fp32 arithmetic: the paper's fixed-point quantisation of its hardware unit is
//   not modelled.
#include <math.h>

#include "attention/rowmap.h"
#include "attention/rowops.h"

#define LN2 ((real)0.693147180559945309) // float in the float build, double in the double

static void softermax_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    (void)ctx;
    real m = -INFINITY, d = 0.0f;
    for (int j = 0; j < n; j++) { // online pass: integer running max, rescaled running sum
        const real cj = -real_floor(-s[j]); // ceil(s_j)
        const real mj = cj > m ? cj : m;
        if (mj > m) { // rescale by the exact power of two 2^(m - mj) (0 when it underflows)
            const real sh = m - mj;
            d = sh < -200.0f ? 0.0f : real_ldexp(d, (int)sh);
        }
        m = mj;
        d += rowops_exp_neg(LN2 * (s[j] - m));
    }
    const real inv = 1.0f / d; // d >= 2^(max s - M) > 1/2
    for (int j = 0; j < n; j++)
        a[j] = rowops_exp_neg(LN2 * (s[j] - m)) * inv;
}

static void softermax_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                   const AttnRowCtx* ctx) {
    (void)s;
    (void)ctx;
    const real dot = rowops_dot(a, da, n);
    for (int j = 0; j < n; j++)
        ds[j] += LN2 * a[j] * (da[j] - dot);
}

const AttnVariant attn_softermax = {
    .name = "softermax",
    .formula = "a = 2^(s - M) / sum 2^(s - M), M = ceil(max s) found online (= softmax(s ln 2))",
    .source = "Stevens et al. 2021, Softermax, DAC 2021, arXiv 2103.09301",
    .reference = "paper, arXiv 2103.09301 (equation not located)",
    .deviations = "fp32 arithmetic: the paper's fixed-point quantisation of its hardware unit is "
                  "not modelled",
    .rows_sum_to_one = 1,
    .shift_invariant = 1,
    .forward_row = softermax_forward_row,
    .backward_row = softermax_backward_row,
};
