// attention/rela.c: ReLA, rectified linear attention: unnormalised ReLU weights, then the
// authors' gated RMSNorm of the attention output.
//
//   A_ij = ReLU(s_ij)                      s = q k^T / sqrt(hs), j <= i (no normalisation)
//   obar_i = sum_j A_ij v_j                per head, heads concatenated: C channels
//   o_ic = gain_c * obar_ic * r_i * G_ic,  r_i = 1 / sqrt(mean_{c in group} obar_ic^2 + eps)
// Norm groups (attn.rela_norm): all (default, the reference): one RMSNorm over all C channels of
// the concatenated heads; head: one per head over its hs channels.
// Gate (attn.rela_gate): output (default, the reference): G_ic = sigmoid(g_c obar_ic), elementwise
// on the (unnormalised) attention output with a learnable C-vector g; input: G = sigmoid(W_g x_i),
// a dense (C, C) map of the block input x (ln_1 output). The RMSNorm restores the scale that the
// missing softmax normalisation leaves free; a row with every score <= 0 gives obar = 0 and o = 0,
// so a head can switch itself off. The form before the reference was adopted is
// `attn.rela_norm = head attn.rela_gate = input attn.rela_eps = 1e-5`.
//
// Paper: B. Zhang, I. Titov, R. Sennrich, "Sparse Attention with Linear Units", EMNLP 2021
// (arXiv 2104.07012).
//
// Row map: attn.rela_map = relu (default, plain ReLU), relu_n (ReLU/n), relu2 (ReLU^2/n): the
// registry's `relu` variant with that attn.form; or inner: the attn.inner row map.
// Tensors (per layer): rela_gate = output: gate (C) no decay, init N(0, 1/C) (the variance of the
// reference's variance-scaling init of a C-vector); rela_gate = input: gate_w (C, C) weight
// decay, init N(0, 0.02) (gates start near 0.5). gain (NH, hs) = the reference's C-vector
// "scale", no decay, init 1. Hyperparameters: attn.rela_map, attn.rela_eps = 1e-8 (the
// reference's dtype.epsilon() in float32), attn.rela_norm, attn.rela_gate. att holds the
// unnormalised weights A.
//
// Backward, with dO the gradient of o, a norm group of m channels (m = C or hs), r its factor,
// Z the pre-sigmoid gate (g_c obar_c or W_g x), G = sigmoid(Z):
//   dZ_c = dO_c gain_c obar_c r G_c (1 - G_c);   dgain_c += dO_c G_c obar_c r
//   dobar_c = dO_c gain_c G_c r - r^3 obar_c / m * sum_{c' in group} dO_c' gain_c' G_c' obar_c'
//             (+ dZ_c g_c with the output gate)                           -> core backward
//   output gate: dg_c += dZ_c obar_c;   input gate: dW_g += dZ^T x,  dx += dZ W_g
// The gate products run through the kernel layer (mm_gemm) on fixed blocks of rows (of Z, dx) and
// of output channels (of dW_g), so the summation order never depends on the thread count; the
// gain's and g's gradients are summed over (b, t) in index order per channel. Position encodings
// apply to the scores as in the default pipeline. Cache: obar, dobar, G, dZ (B,T,C); r (B,T,NH).
//
// Reference: bzhangGo/zero:modules/rela.py (dot_attention, gated_rms_norm)
// Deviations from it: the gate vector is drawn N(0, 1/C) (the reference leaves it to the scope's
//   initializer: variance scaling, fan_avg, which gives variance 1/C at gain 1); attn.rela_norm =
//   head and attn.rela_gate = input (with attn.rela_eps = 1e-5: the earlier default) and the
//   relu_n, relu2 and inner maps (attn.rela_map) are extensions.
#include <math.h>
#include <string.h>

#include "attention/attention.h"
#include "common/matmul.h"
#include "attention/compose.h"
#include "attention/rowops.h"
#include "common/util.h"

enum { HP_MAP, HP_EPS, HP_NORM, HP_GATE, N_HP };
enum { MAP_RELU, MAP_RELU_N, MAP_RELU2, MAP_INNER };
enum { NORM_ALL, NORM_HEAD };
enum { GATE_OUTPUT, GATE_INPUT };
enum { T_GW, T_GAIN, N_T }; // T_GW: gate (C) with the output gate, gate_w (C, C) with the input

#define RELA_BLOCK 64 // rows (or output channels) per sgemm block

// rela_map relu | relu_n | relu2 as attn.form of the relu row map
static const int RELU_FORM_OF_MAP[] = {ATTN_RELU_FORM_PLAIN, ATTN_RELU_FORM_N, ATTN_RELU_FORM_SQ};

static const AttnHParamSpec RELA_HP[N_HP] = {
    [HP_MAP] = {"rela_map", MAP_RELU, 0, 0, "relu|relu_n|relu2|inner",
                "weights: ReLU(s), ReLU(s)/n, ReLU(s)^2/n (the relu variant's forms), or the "
                "attn.inner row map"},
    [HP_EPS] = {"rela_eps", 1e-8f, 1e-10f, 1.0f, NULL, "epsilon of the RMSNorm"},
    [HP_NORM] = {"rela_norm", NORM_ALL, 0, 0, "all|head",
                 "RMSNorm over all C channels of the concatenated heads, or per head"},
    [HP_GATE] = {"rela_gate", GATE_OUTPUT, 0, 0, "output|input",
                 "gate sigmoid(g * o) on the attention output (C-vector g), or sigmoid(W_g x) of "
                 "the block input"},
};

static int rela_input_gate(const AttnHParams* hp) {
    return (int)hp->v[HP_GATE] == GATE_INPUT;
}

static int rela_tensors(AttnTensorSpec* out, const AttnDims* d, const AttnHParams* hp) {
    if (rela_input_gate(hp))
        out[T_GW] = (AttnTensorSpec){.name = "gate_w",
                                     .ndim = 2,
                                     .shape = {d->C, d->C},
                                     .decay = 1,
                                     .init = ATTN_INIT_NORMAL,
                                     .init_value = 0.02f};
    else
        out[T_GW] = (AttnTensorSpec){.name = "gate",
                                     .ndim = 1,
                                     .shape = {d->C},
                                     .decay = 0,
                                     .init = ATTN_INIT_NORMAL,
                                     .init_value = 1.0f / sqrtf((float)d->C)};
    out[T_GAIN] = (AttnTensorSpec){.name = "gain",
                                   .ndim = 2,
                                   .shape = {d->NH, d->hs},
                                   .decay = 0,
                                   .init = ATTN_INIT_CONST,
                                   .init_value = 1.0f};
    return N_T;
}

static size_t rela_cache_floats(const AttnDims* d, const AttnHParams* hp) {
    (void)hp;
    const size_t BT = (size_t)d->B * d->T;
    return 4 * BT * d->C + BT * d->NH;
}

typedef struct {
    real *obar, *dobar, *G, *dZ, *r;
} RelaCache;

static RelaCache rela_cache(const AttnLayer* L) {
    const size_t BT = (size_t)L->d.B * L->d.T, C = (size_t)L->d.C;
    RelaCache k;
    k.obar = L->cache;
    k.dobar = k.obar + BT * C;
    k.G = k.dobar + BT * C;
    k.dZ = k.G + BT * C;
    k.r = k.dZ + BT * C;
    return k;
}

// Setup: rela_map relu | relu_n | relu2 runs the registry's relu row map at that attn.form;
// inner leaves the core on attn.inner.
static void rela_compose(AttnComposed* out, const AttnHParams* hp) {
    const int map = (int)hp->v[HP_MAP];
    if (map == MAP_INNER) return;
    out->row = &attn_relu;
    attn_hparams_default(&out->hp, &attn_relu, hp->T_train, hp->n_head, hp->head_size, hp->n_embd,
                         hp->n_layer);
    out->hp.v[ATTN_RELU_HP_FORM] = (float)RELU_FORM_OF_MAP[map];
}

// Run the core (forward or backward) with the row map resolved at setup; out = obar.
static void rela_run(const AttnLayer* L, const RelaCache* k, int backward) {
    AttnCore c = rowops_layer_core(L, k->obar, k->dobar);
    rowops_core_composed(&c, L, backward); // a ReLU form, or attn.inner
}

static void rela_forward(AttnLayer* L) {
    const int NH = L->d.NH, hs = L->d.hs;
    const int C = L->d.C;
    const long BT = (long)L->d.B * L->d.T;
    const real eps = L->hp->v[HP_EPS];
    const int m = (int)L->hp->v[HP_NORM] == NORM_HEAD ? hs : C, ngrp = C / m;
    RelaCache k = rela_cache(L);
    rela_run(L, &k, 0);
    if (rela_input_gate(L->hp)) {
        // gate G = sigmoid(x W_g^T), fixed row blocks
        const long nblk = (BT + RELA_BLOCK - 1) / RELA_BLOCK;
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
        for (long blk = 0; blk < nblk; blk++) {
            const long r0 = blk * RELA_BLOCK, mb = BT - r0 < RELA_BLOCK ? BT - r0 : RELA_BLOCK;
            real* G = k.G + (size_t)r0 * C;
            real_gemm(0, 1, (int)mb, C, C, 1.0f, L->x + (size_t)r0 * C, C, L->tp[T_GW], C, 0.0f, G,
                      C);
            for (size_t i = 0; i < (size_t)mb * C; i++)
                G[i] = 1.0f / (1.0f + real_exp(-G[i]));
        }
    }
    // (output gate: G = sigmoid(g * obar)); o = G * gain * obar * r per norm group
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (long r = 0; r < BT; r++) {
        const size_t row = (size_t)r * C;
        if (!rela_input_gate(L->hp))
            for (int c = 0; c < C; c++)
                k.G[row + c] = 1.0f / (1.0f + real_exp(-L->tp[T_GW][c] * k.obar[row + c]));
        for (int gi = 0; gi < ngrp; gi++) {
            const size_t off = row + (size_t)gi * m;
            const real* ob = k.obar + off;
            real ss = 0.0f;
            for (int i = 0; i < m; i++)
                ss += ob[i] * ob[i];
            const real rs = 1.0f / real_sqrt(ss / (real)m + eps);
            k.r[(size_t)r * NH + gi] = rs;
            const real* g = L->tp[T_GAIN] + (size_t)gi * m;
            const real* G = k.G + off;
            real* o = L->out + off;
            for (int i = 0; i < m; i++)
                o[i] = G[i] * g[i] * ob[i] * rs;
        }
    }
}

static void rela_backward(AttnLayer* L) {
    const int NH = L->d.NH, hs = L->d.hs;
    const int C = L->d.C;
    const long BT = (long)L->d.B * L->d.T;
    const int m = (int)L->hp->v[HP_NORM] == NORM_HEAD ? hs : C, ngrp = C / m;
    const int input_gate = rela_input_gate(L->hp);
    RelaCache k = rela_cache(L);
    // per (row, norm group): RMSNorm and gate backward
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (long r = 0; r < BT; r++) {
        for (int gi = 0; gi < ngrp; gi++) {
            const size_t off = (size_t)r * C + (size_t)gi * m;
            const real rs = k.r[(size_t)r * NH + gi];
            const real* ob = k.obar + off;
            const real* dO = L->dout + off;
            const real* G = k.G + off;
            const real* g = L->tp[T_GAIN] + (size_t)gi * m;
            const real* gv = input_gate ? NULL : L->tp[T_GW] + (size_t)gi * m;
            real* dob = k.dobar + off;
            real* dZ = k.dZ + off;
            real sum = 0.0f;
            for (int i = 0; i < m; i++) {
                const real dn = dO[i] * G[i] * g[i];
                sum += dn * ob[i];
                dZ[i] = dO[i] * g[i] * ob[i] * rs * G[i] * (1.0f - G[i]);
                dob[i] = dn * rs + (gv ? dZ[i] * gv[i] : 0.0f);
            }
            const real c3 = rs * rs * rs * sum / (real)m;
            for (int i = 0; i < m; i++)
                dob[i] -= c3 * ob[i];
        }
    }
    // gain (and the output gate's g): one channel per iteration, rows in index order
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int ch = 0; ch < C; ch++) {
        const int gi = ch / m;
        real s = 0.0f, sg = 0.0f;
        for (long r = 0; r < BT; r++) {
            const size_t off = (size_t)r * C + (size_t)ch;
            s += L->dout[off] * k.G[off] * k.obar[off] * k.r[(size_t)r * NH + gi];
            sg += k.dZ[off] * k.obar[off];
        }
        L->dtp[T_GAIN][ch] += s;
        if (!input_gate) L->dtp[T_GW][ch] += sg;
    }
    if (input_gate) {
        // dW_g += dZ^T x on fixed blocks of output channels; dx += dZ W_g on fixed row blocks
        const int cblk = (C + RELA_BLOCK - 1) / RELA_BLOCK;
        const long rblk = (BT + RELA_BLOCK - 1) / RELA_BLOCK;
#pragma omp parallel num_threads(attn_workspace_threads(L->ws))
        {
#pragma omp for schedule(static) nowait
            for (int blk = 0; blk < cblk; blk++) {
                const int c0 = blk * RELA_BLOCK, mc = C - c0 < RELA_BLOCK ? C - c0 : RELA_BLOCK;
                real_gemm(1, 0, mc, C, (int)BT, 1.0f, k.dZ + c0, C, L->x, C, 1.0f,
                          L->dtp[T_GW] + (size_t)c0 * C, C);
            }
#pragma omp for schedule(static)
            for (long blk = 0; blk < rblk; blk++) {
                const long r0 = blk * RELA_BLOCK, mb = BT - r0 < RELA_BLOCK ? BT - r0 : RELA_BLOCK;
                real_gemm(0, 0, (int)mb, C, C, 1.0f, k.dZ + (size_t)r0 * C, C, L->tp[T_GW], C, 1.0f,
                          L->dx + (size_t)r0 * C, C);
            }
        }
    }
    rela_run(L, &k, 1);
}

const AttnVariant attn_rela = {
    .name = "rela",
    .formula = "o = sigmoid(g * obar) * gain * RMSNorm_C(obar), obar = sum_j ReLU(s_ij) v_j",
    .source = "Zhang, Titov, Sennrich 2021, Sparse Attention with Linear Units (2104.07012)",
    .reference = "bzhangGo/zero:modules/rela.py",
    .deviations = "the gate vector g is drawn N(0, 1/C) (the reference leaves it to its "
                  "scope's variance-scaling initializer, variance 1/C at gain 1); attn.rela_norm "
                  "= head and attn.rela_gate = input (a dense sigmoid(W_g x) of the block input; "
                  "with attn.rela_eps = 1e-5 the earlier default) and the relu_n, relu2 and inner "
                  "maps (attn.rela_map) are extensions",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .hparams = RELA_HP,
    .n_hparams = N_HP,
    .layer_tensors = rela_tensors,
    .layer_cache_floats = rela_cache_floats,
    .layer_forward = rela_forward,
    .layer_backward = rela_backward,
    .compose = rela_compose,
};
