// attention/twicing.c: twicing attention, O = (2A - A^2) V with the same attention matrix A.
//
// Source: Abdullaev & Nguyen, "Transformer Meets Twicing: Harnessing Unattended Residual
// Information", ICLR 2025; the baseline inside gradient-boosted attention (VARIANTS.md B2,
// `TwicingCausalAttention` of salehsargolzaee/boosted-attention). Twicing applies the smoother A
// once more to the residual V - AV: O = AV + A(V - AV).
//
// Forward, per (batch, head), with A = rowmap(q k^T / sqrt(hs)) from the inner row map
// (`attn.inner`, default softmax, with any position encoding) and P = A V:
//   O = 2 P - A P
// computed as two (T,T)x(T,hs) products, never forming A^2. A is lower triangular, so A P and
// A^2 are too: position t only sees keys j <= t.
// No tensors and no hyperparameters of its own. att stores A (diagnostics see the inner map).
//
// Backward, given dO:
//   dP = 2 dO - A^T dO                (P enters O directly and through A P)
//   dA = dP V^T - dO P^T              (through P = A V, and the -A P term)
//   dV += A^T dP
// The row-map VJP is linear in dA, so the driver's core backward runs twice on the same A: once
// with (v = V, dout = dP), which gives dV and the dP V^T part of dq, dk and the row params, and
// once with (v = P, dout = -dO), which adds the -dO P^T part (its "dv" is discarded).
// Cache (per layer): P, -dO, dP and a discard buffer, each (B,T,C).
//
// Reference: lazizcodes/twicing_attention:twicing_attention_lang/lmtool-fwms/src/mem_transformer.py
// Deviations from it: the reference language model applies twicing only in its last 2 of 16 layers
//   (layer_num >= 14) and forms A^2 explicitly; here every layer that selects twicing uses it
//   (per-layer spec, e.g. attention = 0-9:softmax,10-11:twicing).
#include <string.h>

#include "attention/layer.h"
#include "common/matmul.h"

static size_t twicing_cache_floats(const AttnDims* d, const AttnHParams* hp) {
    (void)hp;
    return 4 * (size_t)d->B * (size_t)d->T * (size_t)d->C;
}

// y_bh = alpha * x_bh - op(A_bh) x_bh for every (b, h): op = A (forward) or A^T (backward);
// x and y are (B,T,C) with row stride C.
static void twicing_apply(real* y, const real* x, const real* att, int transpose, const AttnDims* d,
                          AttnWorkspace* ws) {
    const int B = d->B, T = d->T, NH = d->NH, hs = d->hs, C = d->C;
#pragma omp parallel for collapse(2) schedule(static) num_threads(attn_workspace_threads(ws))
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const size_t off = (size_t)b * T * C + (size_t)h * hs;
            const real* A = att + ((size_t)b * NH + h) * T * T;
            for (int t = 0; t < T; t++)
                for (int i = 0; i < hs; i++)
                    y[off + (size_t)t * C + i] = 2.0f * x[off + (size_t)t * C + i];
            real_gemm(transpose, 0, T, hs, T, -1.0f, A, T, x + off, C, 1.0f, y + off, C);
        }
    }
}

static void twicing_forward(AttnLayer* L) {
    real* P = L->cache;
    AttnCore c = attn_layer_core(L);
    c.out = P;
    attn_pos_forward(&c, L, L->qk_pos);
    attn_core_forward(&c, &L->d, L->ws);
    twicing_apply(L->out, P, L->att, 0, &L->d, L->ws);
}

static void twicing_backward(AttnLayer* L) {
    const size_t BTC = (size_t)L->d.B * L->d.T * L->d.C;
    real* P = L->cache;
    real* neg_dout = P + BTC;
    real* dP = P + 2 * BTC;
    real* discard = P + 3 * BTC;
    twicing_apply(dP, L->dout, L->att, 1, &L->d, L->ws);
    for (size_t i = 0; i < BTC; i++)
        neg_dout[i] = -L->dout[i];
    AttnPosSave save;
    // pass 1: dA = dP V^T, dV += A^T dP
    AttnCore c1 = attn_layer_core(L);
    c1.dout = dP;
    attn_pos_backward_begin(&c1, &save, L, L->qk_pos);
    attn_core_backward(&c1, &L->d, L->ws);
    attn_pos_backward_end(&c1, &save, L);
    // pass 2: dA = -dO P^T (its value-gradient is not a gradient of anything: discarded)
    AttnCore c2 = attn_layer_core(L);
    c2.v = P;
    c2.ldv = (size_t)L->d.C;
    c2.dv = discard;
    c2.dout = neg_dout;
    attn_pos_backward_begin(&c2, &save, L, L->qk_pos);
    attn_core_backward(&c2, &L->d, L->ws);
    attn_pos_backward_end(&c2, &save, L);
}

const AttnVariant attn_twicing = {
    .name = "twicing",
    .formula = "O = (2A - A^2) V = 2 AV - A (AV), A from attn.inner",
    .source = "Abdullaev & Nguyen 2025, Twicing Attention (ICLR 2025)",
    .reference =
        "lazizcodes/twicing_attention:twicing_attention_lang/lmtool-fwms/src/mem_transformer.py",
    .deviations = "the reference language model applies twicing only in its last 2 of 16 layers "
                  "(layer_num >= 14) and forms A^2 explicitly; here every layer that selects "
                  "twicing uses it (per-layer spec, e.g. attention = 0-9:softmax,10-11:twicing)",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .layer_cache_floats = twicing_cache_floats,
    .layer_forward = twicing_forward,
    .layer_backward = twicing_backward,
};
