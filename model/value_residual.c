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

double vres_bytes(int value_residual, int n_layer, int C, int B, int T) {
    if (!value_residual) return 0;
    const size_t BTC = (size_t)B * T * C;
    return (double)util_floats_bytes((size_t)n_layer * BTC) + (double)util_floats_bytes(BTC);
}

VresState* vres_alloc(int value_residual, int n_layer, int C, int B, int T) {
    if (!value_residual) return NULL;
    VresState* v = mallocCheck(sizeof(*v));
    const size_t BTC = (size_t)B * T * C;
    v->L = n_layer;
    v->C = C;
    v->cap = (size_t)B * T;
    v->raw = allocFloats((size_t)n_layer * BTC);
    v->dv1 = allocFloats(BTC);
    return v;
}

void vres_free(VresState* v) {
    if (!v) return;
    free(v->raw);
    free(v->dv1);
    free(v);
}

void vres_forward(VresState* vs, int l, float* qkv_all, const float* lam, int B, int T) {
    if (l == 0) return;
    const int C = vs->C;
    const size_t BT = (size_t)B * T, BTC = BT * C;
    ASSERT(BT <= vs->cap);
    float* qkv = qkv_all + (size_t)l * 3 * BTC;
    const float* qkv0 = qkv_all; // layer 0: never mixed, holds V_0
    float* raw = vs->raw + (size_t)l * BTC;
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

void vres_backward(VresState* vs, int l, float* dqkv, const float* qkv, const float* lam,
                   float* dlam, int B, int T) {
    const int C = vs->C, L = vs->L;
    const size_t BT = (size_t)B * T, BTC = BT * C;
    ASSERT(BT <= vs->cap);
    float* dv1 = vs->dv1;
    if (l == 0) { // dV_0 += the later layers' parts
        if (L < 2) return;
#pragma omp parallel for schedule(static)
        for (size_t p = 0; p < BT; p++) {
            float* d = dqkv + p * 3 * C + 2 * C;
            for (int c = 0; c < C; c++)
                d[c] += dv1[p * C + c];
        }
        return;
    }
    if (l == L - 1) memset(dv1, 0, sizeof(float) * BTC);
    const float* raw = vs->raw + (size_t)l * BTC;
    const float* qkv0 = qkv; // layer 0's projection holds V_0
    double s0 = 0, s1 = 0;
    for (size_t p = 0; p < BT; p++) {
        const float* d = dqkv + p * 3 * C + 2 * C;
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
        float* d = dqkv + p * 3 * C + 2 * C;
        for (int c = 0; c < C; c++) {
            dv1[p * C + c] += l1 * d[c];
            d[c] *= l0;
        }
    }
}
