// attention/boosted.c: gradient-boosted attention, two rounds: a second attention with its own
// q/k/v projection fits the residual x - Attn_0(x), and a per-dimension gate adds it in.
//
// Source: S. Sargolzaei, "Gradient Boosting within a Single Attention Layer", arXiv 2604.03190,
// code salehsargolzaee/boosted-attention, experiments/exp_lm_v2.py::BoostedCausalAttention
// (VARIANTS.md B1, M = 2 rounds, kv_source = residual).
//
// With x the attention input (ln_1 output, (B,T,C)) and heads concatenated before c_proj:
//   P0  = MHA_0(x)         q, k, v = the layer's c_attn projection (the model's qkv)
//   res = x - P0
//   P1  = MHA_1(res)       q, k, v = res W1^T + b1, its own projection
//   g   = sigmoid(Wg [P0 ; P1] + bg)      Linear(2C -> C): one gate per channel and token
//   out = P0 + g * P1      (fed to the shared output projection c_proj)
// Both rounds use the inner row map (`attn.inner`, default softmax) with the same per-head row
// parameters, scale 1/sqrt(hs) and the model's position encoding (under rope round 1's q, k are
// rotated too). att holds round 0's weights A0 (what diagnostics see); round 1's are in the
// cache.
//
// Tensors (per layer; the model stores them as "boosted.<name>"):
//   qkvw  (3C, C)  weight decay, init N(0, 0.02)     round 1's q/k/v projection
//   qkvb  (3C)     no decay, init 0
//   gatew (C, 2C)  weight decay, init N(0, 0.02)     gate Linear(2C -> C)
//   gateb (C)      no decay, init 0                  (so the gate starts near 0.5)
// No hyperparameters. Cost: two attentions plus two projections per layer.
//
// Backward, given dout:
//   dg   = dout * P1 ;  dpre = dg * g (1 - g)
//   [dP0 ; dP1] = dpre Wg  ;  dWg += dpre^T [P0 ; P1] ;  dbg += sum dpre
//   dP0 += dout ;  dP1 += g * dout
//   round 1 core backward with dP1 -> dqkv1 ;  dW1 += dqkv1^T res ; db1 += sum dqkv1 ;
//   dres = dqkv1 W1 ;  dx += dres ;  dP0 -= dres
//   round 0 core backward with dP0 -> dqkv (the layer's c_attn gradient)
// Projections go through the model's blocked sgemm kernels (fixed blocks: results do not
// depend on the thread count); parameter gradients are summed over rows inside sgemm.
//
// Reference: salehsargolzaee/boosted-attention:experiments/exp_lm_v2.py
// Deviations from it: projections initialised N(0, 0.02) with zero biases (the GPT-2 convention;
//   the reference uses PyTorch's default nn.Linear init); no attention dropout; M = 2 rounds only.
#include <math.h>
#include <string.h>

#include "attention/layer.h"
#include "common/matmul.h"

enum { T_QKVW, T_QKVB, T_GATEW, T_GATEB };

static int boosted_tensors(AttnTensorSpec* out, const AttnDims* d, const AttnHParams* hp) {
    (void)hp;
    const int C = d->C;
    out[T_QKVW] = (AttnTensorSpec){.name = "qkvw",
                                   .ndim = 2,
                                   .shape = {3 * C, C},
                                   .decay = 1,
                                   .init = ATTN_INIT_NORMAL,
                                   .init_value = 0.02f};
    out[T_QKVB] = (AttnTensorSpec){
        .name = "qkvb", .ndim = 1, .shape = {3 * C}, .decay = 0, .init = ATTN_INIT_ZERO};
    out[T_GATEW] = (AttnTensorSpec){.name = "gatew",
                                    .ndim = 2,
                                    .shape = {C, 2 * C},
                                    .decay = 1,
                                    .init = ATTN_INIT_NORMAL,
                                    .init_value = 0.02f};
    out[T_GATEB] = (AttnTensorSpec){
        .name = "gateb", .ndim = 1, .shape = {C}, .decay = 0, .init = ATTN_INIT_ZERO};
    return 4;
}

// cache layout, in units of BTC = B*T*C floats, then att1
typedef struct {
    real* cat;   // (BT, 2C): P0 | P1
    real* res;   // (BT, C)
    real* qkv1;  // (BT, 3C)
    real* g;     // (BT, C)
    real* qk1;   // (BT, 2C) round 1's rotated q, k under rope
    real* dcat;  // (BT, 2C)
    real* dqkv1; // (BT, 3C)
    real* dres;  // (BT, C)
    real* dpre;  // (BT, C)
    real* att1;  // (B, NH, T, T)
} BoostedCache;

static size_t boosted_cache_floats(const AttnDims* d, const AttnHParams* hp) {
    (void)hp;
    const size_t BTC = (size_t)d->B * d->T * d->C;
    return 16 * BTC + (size_t)d->B * d->NH * d->T * d->T;
}

static BoostedCache boosted_cache(const AttnLayer* L) {
    const size_t BTC = (size_t)L->d.B * L->d.T * L->d.C;
    real* p = L->cache;
    BoostedCache c;
    c.cat = p;
    c.res = p + 2 * BTC;
    c.qkv1 = p + 3 * BTC;
    c.g = p + 6 * BTC;
    c.qk1 = p + 7 * BTC;
    c.dcat = p + 9 * BTC;
    c.dqkv1 = p + 11 * BTC;
    c.dres = p + 14 * BTC;
    c.dpre = p + 15 * BTC;
    c.att1 = p + 16 * BTC;
    return c;
}

// round 0's core (the layer's q, k, v) or round 1's (q, k, v from qkv1), writing P_r into cat
static AttnCore boosted_core(const AttnLayer* L, const BoostedCache* bc, int round) {
    const size_t C = (size_t)L->d.C;
    AttnCore c = attn_layer_core(L);
    c.ldo = 2 * C;
    c.out = bc->cat + (round ? C : 0);
    c.dout = bc->dcat + (round ? C : 0);
    if (round) {
        c.q = bc->qkv1;
        c.k = bc->qkv1 + C;
        c.v = bc->qkv1 + 2 * C;
        c.att = bc->att1;
        c.dq = bc->dqkv1;
        c.dk = bc->dqkv1 + C;
        c.dv = bc->dqkv1 + 2 * C;
    }
    return c;
}

static void boosted_forward(AttnLayer* L) {
    const int C = L->d.C, BT = L->d.B * L->d.T;
    BoostedCache bc = boosted_cache(L);
    AttnCore c0 = boosted_core(L, &bc, 0);
    attn_pos_forward(&c0, L, L->qk_pos);
    attn_core_forward(&c0, &L->d, L->ws);
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int r = 0; r < BT; r++)
        for (int i = 0; i < C; i++)
            bc.res[(size_t)r * C + i] = L->x[(size_t)r * C + i] - bc.cat[(size_t)r * 2 * C + i];
    real_matmul_forward(bc.qkv1, bc.res, L->tp[T_QKVW], L->tp[T_QKVB], BT, C, 3 * C);
    AttnCore c1 = boosted_core(L, &bc, 1);
    attn_pos_forward(&c1, L, bc.qk1);
    attn_core_forward(&c1, &L->d, L->ws);
    real_matmul_forward(bc.g, bc.cat, L->tp[T_GATEW], L->tp[T_GATEB], BT, 2 * C, C);
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int r = 0; r < BT; r++) {
        const real* p0 = bc.cat + (size_t)r * 2 * C;
        const real* p1 = p0 + C;
        real* g = bc.g + (size_t)r * C;
        real* o = L->out + (size_t)r * C;
        for (int i = 0; i < C; i++) {
            g[i] = 1.0f / (1.0f + real_exp(-g[i]));
            o[i] = p0[i] + g[i] * p1[i];
        }
    }
}

static void boosted_backward(AttnLayer* L) {
    const int C = L->d.C, BT = L->d.B * L->d.T;
    const size_t BTC = (size_t)BT * C;
    BoostedCache bc = boosted_cache(L);
    const real* dout = L->dout;
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int r = 0; r < BT; r++) {
        const real* p1 = bc.cat + (size_t)r * 2 * C + C;
        const real* g = bc.g + (size_t)r * C;
        const real* d = dout + (size_t)r * C;
        real* dp = bc.dpre + (size_t)r * C;
        for (int i = 0; i < C; i++)
            dp[i] = d[i] * p1[i] * g[i] * (1.0f - g[i]);
    }
    memset(bc.dcat, 0, sizeof(real) * 2 * BTC);
    real_matmul_backward(bc.dcat, L->dtp[T_GATEW], L->dtp[T_GATEB], bc.dpre, bc.cat, L->tp[T_GATEW],
                         BT, 2 * C, C);
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int r = 0; r < BT; r++) {
        const real* g = bc.g + (size_t)r * C;
        const real* d = dout + (size_t)r * C;
        real* dc = bc.dcat + (size_t)r * 2 * C;
        for (int i = 0; i < C; i++) {
            dc[i] += d[i];
            dc[C + i] += g[i] * d[i];
        }
    }
    // round 1
    memset(bc.dqkv1, 0, sizeof(real) * 3 * BTC);
    AttnCore c1 = boosted_core(L, &bc, 1);
    AttnPosSave save;
    attn_pos_backward_begin(&c1, &save, L, bc.qk1);
    attn_core_backward(&c1, &L->d, L->ws);
    attn_pos_backward_end(&c1, &save, L);
    memset(bc.dres, 0, sizeof(real) * BTC);
    real_matmul_backward(bc.dres, L->dtp[T_QKVW], L->dtp[T_QKVB], bc.dqkv1, bc.res, L->tp[T_QKVW],
                         BT, C, 3 * C);
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int r = 0; r < BT; r++) {
        const real* dr = bc.dres + (size_t)r * C;
        real* dc = bc.dcat + (size_t)r * 2 * C;
        real* dx = L->dx ? L->dx + (size_t)r * C : NULL;
        for (int i = 0; i < C; i++) {
            if (dx) dx[i] += dr[i];
            dc[i] -= dr[i];
        }
    }
    // round 0
    AttnCore c0 = boosted_core(L, &bc, 0);
    attn_pos_backward_begin(&c0, &save, L, L->qk_pos);
    attn_core_backward(&c0, &L->d, L->ws);
    attn_pos_backward_end(&c0, &save, L);
}

const AttnVariant attn_boosted = {
    .name = "boosted",
    .formula = "out = P0 + g*P1, P0 = MHA(x), P1 = MHA_1(x - P0), g = sigmoid(Wg[P0;P1] + bg)",
    .source = "Sargolzaei 2026, Gradient Boosting within a Single Attention Layer (2604.03190)",
    .reference = "salehsargolzaee/boosted-attention:experiments/exp_lm_v2.py",
    .deviations =
        "projections initialised N(0, 0.02) with zero biases (the GPT-2 convention; the reference "
        "uses PyTorch's default nn.Linear init); no attention dropout; M = 2 rounds only",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .layer_tensors = boosted_tensors,
    .layer_cache_floats = boosted_cache_floats,
    .layer_forward = boosted_forward,
    .layer_backward = boosted_backward,
};
