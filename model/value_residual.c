// model/value_residual.c: the ResFormer value residual, the `value_residual` model key.
//
// Source: Zhou, Wu, Jiang, Obeid, Lan, "Value Residual Learning" (ResFormer), arXiv 2410.17897,
// ACL 2025. ResFormer adds a residual connection from the first layer's values to every later
// layer's, before the attention: U_n = A_n (lambda_1 V_n + lambda_2 V_1) (their base form fixes
// lambda_1 = lambda_2 = 1/2; the learnable form learns them).
// Here (layers 0-based, l = 0 is the paper's layer 1):
//   V'_l = lambda_{l,0} V_l + lambda_{l,1} V_0   for l >= 1;   V'_0 = V_0 (layer 0 is not mixed)
// where V_l (B,T,C) is the raw value projection of layer l (the third C of its qkv) and V'_l
// what its attention reads. lambda is "value_residual.lambda" (L, 2), stacked per layer, no
// weight decay, initialised to (0.5, 0.5): ResFormer's fixed form at step 0. Row 0 is never
// read (gradient 0). Every attention variant sees V'_l in place of V_l; q and k are unchanged.
// Why a model key and not an attention option: V_0 is state across layers, and an attention
// layer sees one layer only (AttnLayer has no cross-layer pointers, and attention/ never
// includes model/); the model owns the per-layer qkv buffers, so it mixes them between the qkv
// projection and the attention.
//
// Forward (l >= 1): keep V_l in vres_raw[l], overwrite qkv's V slice with V'_l.
// Backward, given dV'_l in dqkv's V slice (after the attention backward):
//   d lambda_{l,0} += sum dV'_l * V_l;  d lambda_{l,1} += sum dV'_l * V_0
//   dV_l = lambda_{l,0} dV'_l (in place);  dV_0 += lambda_{l,1} dV'_l (accumulated in vres_dv1,
//   added into layer 0's dqkv when the backward reaches layer 0, before its qkv projection).
// Reductions run in index order in double: results do not depend on the thread count.
#include "model/value_residual.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

double vres_bytes(const GPT2Config* g, int B, int T) {
    if (!g->value_residual) return 0;
    const size_t BTC = (size_t)B * T * g->n_embd;
    return (double)util_floats_bytes((size_t)g->n_layer * BTC) + (double)util_floats_bytes(BTC);
}

void vres_alloc(GPT2* m, int B, int T) {
    if (!m->cfg.value_residual) return;
    const size_t BTC = (size_t)B * T * m->cfg.n_embd;
    m->vres_raw = allocFloats((size_t)m->cfg.n_layer * BTC);
    m->vres_dv1 = allocFloats(BTC);
}

void vres_free(GPT2* m) {
    free(m->vres_raw);
    free(m->vres_dv1);
    m->vres_raw = m->vres_dv1 = NULL;
}

void vres_forward(GPT2* m, int l, int B, int T) {
    if (l == 0) return;
    const int C = m->cfg.n_embd;
    const size_t BT = (size_t)B * T, BTC = BT * C;
    const float* lam = gpt2_tensor(m, m->params, m->row_spec[P_VRES_LAMBDA], l);
    float* qkv = m->qkv + (size_t)l * 3 * BTC;
    const float* qkv0 = m->qkv; // layer 0: never mixed, holds V_0
    float* raw = m->vres_raw + (size_t)l * BTC;
    const float l0 = lam[0], l1 = lam[1];
#pragma omp parallel for schedule(static)
    for (size_t p = 0; p < BT; p++) {
        float* v = qkv + p * 3 * C + 2 * C;
        const float* v0 = qkv0 + p * 3 * C + 2 * C;
        float* rv = raw + p * C;
        for (int c = 0; c < C; c++) {
            rv[c] = v[c];
            v[c] = l0 * v[c] + l1 * v0[c];
        }
    }
}

void vres_backward(GPT2* m, int l, int B, int T) {
    const int C = m->cfg.n_embd, L = m->cfg.n_layer;
    const size_t BT = (size_t)B * T, BTC = BT * C;
    if (l == 0) { // dV_0 += the later layers' parts
        if (L < 2) return;
#pragma omp parallel for schedule(static)
        for (size_t p = 0; p < BT; p++) {
            float* d = m->dqkv + p * 3 * C + 2 * C;
            for (int c = 0; c < C; c++)
                d[c] += m->vres_dv1[p * C + c];
        }
        return;
    }
    if (l == L - 1) memset(m->vres_dv1, 0, sizeof(float) * BTC);
    const float* lam = gpt2_tensor(m, m->params, m->row_spec[P_VRES_LAMBDA], l);
    float* dlam = gpt2_tensor(m, m->grads, m->row_spec[P_VRES_LAMBDA], l);
    const float* raw = m->vres_raw + (size_t)l * BTC;
    const float* qkv0 = m->qkv;
    double s0 = 0, s1 = 0;
    for (size_t p = 0; p < BT; p++) {
        const float* d = m->dqkv + p * 3 * C + 2 * C;
        const float* v0 = qkv0 + p * 3 * C + 2 * C;
        for (int c = 0; c < C; c++) {
            s0 += (double)d[c] * raw[p * C + c];
            s1 += (double)d[c] * v0[c];
        }
    }
    dlam[0] += (float)s0;
    dlam[1] += (float)s1;
    const float l0 = lam[0], l1 = lam[1];
#pragma omp parallel for schedule(static)
    for (size_t p = 0; p < BT; p++) {
        float* d = m->dqkv + p * 3 * C + 2 * C;
        for (int c = 0; c < C; c++) {
            m->vres_dv1[p * C + c] += l1 * d[c];
            d[c] *= l0;
        }
    }
}
