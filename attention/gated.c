// attention/gated.c: gated attention (Bondarenko et al.), the `conditional_per_token` output gate
// over any inner row map (attn.inner, default softmax).
//
//   obar_i^h = sum_{j<=i} A_ij v_j^h,       A = rowmap(q k^T / sqrt(hs)) of head h
//   G_i^h    = sigmoid(w_h . x_i^h + b_h),  x_i^h = head h's hs-slice of the block input x_i
//   o_i^h    = G_i^h obar_i^h               (before the output projection)
//
// Paper: Y. Bondarenko, M. Nagel, T. Blankevoort, "Quantizable Transformers: Removing Outliers
// by Helping Attention Heads Do Nothing", NeurIPS 2023 (arXiv 2306.12929), code
// Qualcomm-AI-research/outlier-free-transformers (`conditional_per_token` gate). In pre-LN GPT-2
// x is the ln_1 output. A head switches itself off by driving its gate to 0, with no need for a
// softmax sink.
//
// Tensors (per layer): w (NH, hs), weight decay on, init N(0, 1/sqrt(3 hs)) (the variance of
// PyTorch's default Linear init U(-1/sqrt(hs), 1/sqrt(hs))); b (NH), no decay, init
// logit(attn.gate_init). Hyperparameter: attn.gate_init = 0.25 (the OPT scripts'
// --attn_gate_init), so every gate starts near 0.25.
// att holds the inner row map's weights A (rows sum to 1 for softmax); the effective weights are
// G_i A_i, with row sums G_i.
//
// Numerics: sigmoid through 1/(1 + exp(-z)), finite for any z.
// Backward, with dO the gradient of o:
//   dobar_i = G_i dO_i                      -> inner core backward (dq, dk, dv, row params)
//   dG_i = <dO_i, obar_i>;  dz_i = dG_i G_i (1 - G_i)
//   dw_h += sum_i dz_i x_i^h;  db_h += sum_i dz_i;  dx_i^h += dz_i w_h
// Parameter gradients are summed over (b, t) in index order, one head per thread.
// Position encodings (rope, alibi) apply to the inner scores as in the default pipeline.
// Cache: obar (B,T,C), dobar (B,T,C), G (B,T,NH), dz (B,T,NH).
//
// Reference: Qualcomm-AI-research/outlier-free-transformers:transformers_language/models/
//   opt_attention.py
// Deviations from it: w initialised N(0, 1/sqrt(3 hs)), the variance of the reference's
//   PyTorch-default uniform init of its nn.Linear(hs, 1) (b = logit(attn.gate_init) as there); only
//   the reference's default linear per-token gate is offered, not its attn_gate_mlp, per-head
//   pooled or all-features gates.
#include <math.h>
#include <string.h>

#include "attention/layer.h"
#include "attention/rowops.h"

enum { HP_GATE_INIT, N_HP };
enum { T_W, T_B, N_T };

static const AttnHParamSpec GATED_HP[N_HP] = {
    [HP_GATE_INIT] = {"gate_init", 0.25f, 0.001f, 0.999f, NULL,
                      "initial gate value: the bias starts at logit(gate_init)"},
};

static int gated_tensors(AttnTensorSpec* out, const AttnDims* d, const AttnHParams* hp) {
    real p = hp->v[HP_GATE_INIT];
    out[T_W] = (AttnTensorSpec){.name = "w",
                                .ndim = 2,
                                .shape = {d->NH, d->hs},
                                .decay = 1,
                                .init = ATTN_INIT_NORMAL,
                                .init_value = 1.0f / real_sqrt(3.0f * (real)d->hs)};
    out[T_B] = (AttnTensorSpec){.name = "b",
                                .ndim = 1,
                                .shape = {d->NH},
                                .decay = 0,
                                .init = ATTN_INIT_CONST,
                                .init_value = real_log(p / (1.0f - p))};
    return N_T;
}

static size_t gated_cache_floats(const AttnDims* d, const AttnHParams* hp) {
    (void)hp;
    const size_t BT = (size_t)d->B * d->T;
    return 2 * BT * d->C + 2 * BT * d->NH;
}

typedef struct {
    real *obar, *dobar, *G, *dz;
} GatedCache;

static GatedCache gated_cache(const AttnLayer* L) {
    const size_t BT = (size_t)L->d.B * L->d.T, C = (size_t)L->d.C, NH = (size_t)L->d.NH;
    GatedCache k;
    k.obar = L->cache;
    k.dobar = k.obar + BT * C;
    k.G = k.dobar + BT * C;
    k.dz = k.G + BT * NH;
    return k;
}

static void gated_forward(AttnLayer* L) {
    const int NH = L->d.NH, hs = L->d.hs;
    const size_t C = (size_t)L->d.C;
    const long BT = (long)L->d.B * L->d.T;
    GatedCache k = gated_cache(L);
    AttnCore c = rowops_layer_core(L, k.obar, k.dobar); // inner row map, A·V into obar
    rowops_core_forward(&c, L);
    const real* w = L->tp[T_W];
    const real* bias = L->tp[T_B];
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (long r = 0; r < BT; r++) {
        for (int h = 0; h < NH; h++) {
            const real* xh = L->x + (size_t)r * C + (size_t)h * hs;
            const real* wh = w + (size_t)h * hs;
            real z = bias[h];
            for (int i = 0; i < hs; i++)
                z += wh[i] * xh[i];
            real g = 1.0f / (1.0f + real_exp(-z));
            k.G[(size_t)r * NH + h] = g;
            const real* ob = k.obar + (size_t)r * C + (size_t)h * hs;
            real* o = L->out + (size_t)r * C + (size_t)h * hs;
            for (int i = 0; i < hs; i++)
                o[i] = g * ob[i];
        }
    }
}

static void gated_backward(AttnLayer* L) {
    const int NH = L->d.NH, hs = L->d.hs;
    const size_t C = (size_t)L->d.C;
    const long BT = (long)L->d.B * L->d.T;
    GatedCache k = gated_cache(L);
    const real* w = L->tp[T_W];
    // per (row, head): dobar = G dO, dz = <dO, obar> G (1 - G), dx += dz w
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (long r = 0; r < BT; r++) {
        for (int h = 0; h < NH; h++) {
            const size_t off = (size_t)r * C + (size_t)h * hs;
            const real g = k.G[(size_t)r * NH + h];
            const real* dO = L->dout + off;
            const real* ob = k.obar + off;
            real* dob = k.dobar + off;
            real dg = 0.0f;
            for (int i = 0; i < hs; i++) {
                dob[i] = g * dO[i];
                dg += dO[i] * ob[i];
            }
            real dz = dg * g * (1.0f - g);
            k.dz[(size_t)r * NH + h] = dz;
            const real* wh = w + (size_t)h * hs;
            real* dxh = L->dx + off;
            for (int i = 0; i < hs; i++)
                dxh[i] += dz * wh[i];
        }
    }
    // gate parameters: one head per thread, rows in index order
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int h = 0; h < NH; h++) {
        real* dw = L->dtp[T_W] + (size_t)h * hs;
        real db = 0.0f;
        for (long r = 0; r < BT; r++) {
            const real dz = k.dz[(size_t)r * NH + h];
            const real* xh = L->x + (size_t)r * C + (size_t)h * hs;
            for (int i = 0; i < hs; i++)
                dw[i] += dz * xh[i];
            db += dz;
        }
        L->dtp[T_B][h] += db;
    }
    AttnCore c = rowops_layer_core(L, k.obar, k.dobar);
    rowops_core_backward(&c, L);
}

const AttnVariant attn_gated = {
    .name = "gated",
    .formula = "o_i^h = sigmoid(w_h . x_i^h + b_h) * sum_j inner(s)_ij v_j",
    .source = "Bondarenko et al. 2023, Quantizable Transformers (2306.12929)",
    .reference = "Qualcomm-AI-research/outlier-free-transformers:transformers_language/models/"
                 "opt_attention.py",
    .deviations = "w initialised N(0, 1/sqrt(3 hs)), the variance of the reference's "
                  "PyTorch-default uniform init of its nn.Linear(hs, 1) (b = logit(attn.gate_init) "
                  "as there); only the reference's default linear per-token gate is offered, not "
                  "its attn_gate_mlp, per-head pooled or all-features gates",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .hparams = GATED_HP,
    .n_hparams = N_HP,
    .layer_tensors = gated_tensors,
    .layer_cache_floats = gated_cache_floats,
    .layer_forward = gated_forward,
    .layer_backward = gated_backward,
};
