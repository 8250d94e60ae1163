// attention/rela.c: ReLA, rectified linear attention: unnormalised ReLU weights, a per-head
// RMSNorm of the head output with a learned gain, and a sigmoid gate from the block input.
//
//   A_ij   = ReLU(s_ij)                     s = q k^T / sqrt(hs), j <= i (no normalisation)
//   obar_i = sum_j A_ij v_j                 per head
//   o_i^h  = sigmoid(W_g x_i)^h * g_h * obar_i^h / sqrt(mean(obar_i^h ^2) + eps)
// The RMSNorm over each head's hs channels restores the scale that the missing softmax
// normalisation leaves free; a row with every score <= 0 gives obar = 0 and o = 0, so a head can
// switch itself off. The gate is the paper's gated RMSNorm variant.
//
// Paper: B. Zhang, I. Titov, R. Sennrich, "Sparse Attention with Linear Units", EMNLP 2021
// (arXiv 2104.07012).
//
// Row map: attn.rela_map = relu (default, plain ReLU), relu_n (ReLU/n), relu2 (ReLU^2/n): the
// registry's `relu` variant with that attn.form; or inner: the attn.inner row map.
// Tensors (per layer): gate_w (C, C) weight decay, init N(0, 0.02) (sigmoid gates start near
// 0.5); gain (NH, hs) no decay, init 1. Hyperparameters: attn.rela_map, attn.rela_eps = 1e-5.
// att holds the unnormalised weights A.
//
// Backward, with dO the gradient of o, r = 1/sqrt(mean(obar^2) + eps), nhat = obar r, G the gate:
//   dnhat = dO G g;  dobar = r (dnhat - nhat mean(dnhat nhat))   -> core backward
//   dg += dO G nhat;  dZ = dO g nhat G (1 - G)   (Z = W_g x)
//   dW_g += dZ^T x;  dx += dZ W_g
// The gate products run through the kernel layer (mm_gemm) on fixed blocks of rows (of Z, dx) and
// of output channels (of dW_g), so the summation order never depends on the thread count; the
// gain's gradient is summed over (b, t) in index order per channel. Position encodings apply to the
// scores as in the default pipeline. Cache: obar, dobar, G, dZ (B,T,C); r (B,T,NH).
//
// Reference: bzhangGo/zero:modules/rela.py
// Deviations from it: RMSNorm per head over hs channels (reference: over all C channels of the
//   concatenated heads); gate sigmoid(W_g x) of the block input through a dense (C, C) matrix
//   (reference: sigmoid(g * o), elementwise on the attention output o with a vector g of C
//   entries); eps 1e-5 (reference 1e-8: attn.rela_eps = 1e-8); the relu_n, relu2 and inner maps
//   (attn.rela_map) are extensions.
#include <math.h>
#include <string.h>

#include "attention/attention.h"
#include "common/matmul.h"
#include "attention/compose.h"
#include "attention/rowops.h"
#include "common/util.h"

enum { HP_MAP, HP_EPS, N_HP };
enum { MAP_RELU, MAP_RELU_N, MAP_RELU2, MAP_INNER };
enum { T_GW, T_GAIN, N_T };

#define RELA_BLOCK 64 // rows (or output channels) per sgemm block

// rela_map relu | relu_n | relu2 as attn.form of the relu row map
static const int RELU_FORM_OF_MAP[] = {ATTN_RELU_FORM_PLAIN, ATTN_RELU_FORM_N, ATTN_RELU_FORM_SQ};

static const AttnHParamSpec RELA_HP[N_HP] = {
    [HP_MAP] = {"rela_map", MAP_RELU, 0, 0, "relu|relu_n|relu2|inner",
                "weights: ReLU(s), ReLU(s)/n, ReLU(s)^2/n (the relu variant's forms), or the "
                "attn.inner row map"},
    [HP_EPS] = {"rela_eps", 1e-5f, 1e-10f, 1.0f, NULL, "epsilon of the per-head RMSNorm"},
};

static int rela_tensors(AttnTensorSpec* out, const AttnDims* d, const AttnHParams* hp) {
    (void)hp;
    out[T_GW] = (AttnTensorSpec){.name = "gate_w",
                                 .ndim = 2,
                                 .shape = {d->C, d->C},
                                 .decay = 1,
                                 .init = ATTN_INIT_NORMAL,
                                 .init_value = 0.02f};
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
    if (L->own && L->own->row) { // a ReLU form: no row parameters
        c.row = L->own->row;
        c.hp = &L->own->hp;
        c.rowp = NULL;
        c.rowp_stride = 0;
        c.drowp = NULL;
    }
    if (backward)
        rowops_core_backward(&c, L);
    else
        rowops_core_forward(&c, L);
}

static void rela_forward(AttnLayer* L) {
    const int NH = L->d.NH, hs = L->d.hs;
    const int C = L->d.C;
    const long BT = (long)L->d.B * L->d.T;
    const real eps = L->hp->v[HP_EPS];
    RelaCache k = rela_cache(L);
    rela_run(L, &k, 0);
    // gate G = sigmoid(x W_g^T), fixed row blocks
    const long nblk = (BT + RELA_BLOCK - 1) / RELA_BLOCK;
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (long blk = 0; blk < nblk; blk++) {
        const long r0 = blk * RELA_BLOCK, m = BT - r0 < RELA_BLOCK ? BT - r0 : RELA_BLOCK;
        real* G = k.G + (size_t)r0 * C;
        real_gemm(0, 1, (int)m, C, C, 1.0f, L->x + (size_t)r0 * C, C, L->tp[T_GW], C, 0.0f, G, C);
        for (size_t i = 0; i < (size_t)m * C; i++)
            G[i] = 1.0f / (1.0f + real_exp(-G[i]));
    }
    // o = G * gain * RMSNorm(obar) per head
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (long r = 0; r < BT; r++) {
        for (int h = 0; h < NH; h++) {
            const size_t off = (size_t)r * C + (size_t)h * hs;
            const real* ob = k.obar + off;
            real ss = 0.0f;
            for (int i = 0; i < hs; i++)
                ss += ob[i] * ob[i];
            const real rs = 1.0f / real_sqrt(ss / (real)hs + eps);
            k.r[(size_t)r * NH + h] = rs;
            const real* g = L->tp[T_GAIN] + (size_t)h * hs;
            const real* G = k.G + off;
            real* o = L->out + off;
            for (int i = 0; i < hs; i++)
                o[i] = G[i] * g[i] * ob[i] * rs;
        }
    }
}

static void rela_backward(AttnLayer* L) {
    const int NH = L->d.NH, hs = L->d.hs;
    const int C = L->d.C;
    const long BT = (long)L->d.B * L->d.T;
    RelaCache k = rela_cache(L);
    // per (row, head): RMSNorm and gate backward
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (long r = 0; r < BT; r++) {
        for (int h = 0; h < NH; h++) {
            const size_t off = (size_t)r * C + (size_t)h * hs;
            const real rs = k.r[(size_t)r * NH + h];
            const real* ob = k.obar + off;
            const real* dO = L->dout + off;
            const real* G = k.G + off;
            const real* g = L->tp[T_GAIN] + (size_t)h * hs;
            real* dob = k.dobar + off;
            real* dZ = k.dZ + off;
            real m = 0.0f;
            for (int i = 0; i < hs; i++) {
                const real nh = ob[i] * rs;
                const real dn = dO[i] * G[i] * g[i];
                dob[i] = dn; // dnhat for now
                m += dn * nh;
                dZ[i] = dO[i] * g[i] * nh * G[i] * (1.0f - G[i]);
            }
            m /= (real)hs;
            for (int i = 0; i < hs; i++)
                dob[i] = rs * (dob[i] - ob[i] * rs * m);
        }
    }
    // gain: one channel per iteration, rows in index order
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int ch = 0; ch < C; ch++) {
        const int h = ch / hs;
        real s = 0.0f;
        for (long r = 0; r < BT; r++) {
            const size_t off = (size_t)r * C + (size_t)ch;
            s += L->dout[off] * k.G[off] * k.obar[off] * k.r[(size_t)r * NH + h];
        }
        L->dtp[T_GAIN][ch] += s;
    }
    // dW_g += dZ^T x on fixed blocks of output channels; dx += dZ W_g on fixed row blocks
    const int cblk = (C + RELA_BLOCK - 1) / RELA_BLOCK;
    const long rblk = (BT + RELA_BLOCK - 1) / RELA_BLOCK;
#pragma omp parallel num_threads(attn_workspace_threads(L->ws))
    {
#pragma omp for schedule(static) nowait
        for (int blk = 0; blk < cblk; blk++) {
            const int c0 = blk * RELA_BLOCK, m = C - c0 < RELA_BLOCK ? C - c0 : RELA_BLOCK;
            real_gemm(1, 0, m, C, (int)BT, 1.0f, k.dZ + c0, C, L->x, C, 1.0f,
                      L->dtp[T_GW] + (size_t)c0 * C, C);
        }
#pragma omp for schedule(static)
        for (long blk = 0; blk < rblk; blk++) {
            const long r0 = blk * RELA_BLOCK, m = BT - r0 < RELA_BLOCK ? BT - r0 : RELA_BLOCK;
            real_gemm(0, 0, (int)m, C, C, 1.0f, k.dZ + (size_t)r0 * C, C, L->tp[T_GW], C, 1.0f,
                      L->dx + (size_t)r0 * C, C);
        }
    }
    rela_run(L, &k, 1);
}

const AttnVariant attn_rela = {
    .name = "rela",
    .formula = "o = sigmoid(W_g x_i) * g * RMSNorm(sum_j ReLU(s_ij) v_j) per head",
    .source = "Zhang, Titov, Sennrich 2021, Sparse Attention with Linear Units (2104.07012)",
    .reference = "bzhangGo/zero:modules/rela.py",
    .deviations = "RMSNorm per head over hs channels (reference: over all C channels of the "
                  "concatenated heads); gate sigmoid(W_g x) of the block input through a dense (C, "
                  "C) matrix (reference: sigmoid(g * o), elementwise on the attention output o "
                  "with a vector g of C entries); eps 1e-5 (reference 1e-8: attn.rela_eps = 1e-8); "
                  "the relu_n, relu2 and inner maps (attn.rela_map) are extensions",
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
