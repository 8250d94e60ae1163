// attention/ssa.c: Selective Self-Attention: a learned query temperature that depends on the
// token and on its position, and an optional value temperature, around any inner row map
// (attn.inner, default softmax).
//
//   tau_i  = 1 + tanh(tw_h . x_i) + lambda_h ln n_i        n_i = i + 1
//   A_i    = rowmap(tau_i s_i),   s = q k^T / sqrt(hs)
//   value temperature (attn.ssa_value = on):  v'_j = (1 + tanh(vw_h . x_j)) v_j
//   o_i    = sum_j A_ij v'_j      (v' = v when off)
// x_i is the whole block input (ln_1 output). Zero init of tw, lambda, vw gives tau = 1 and
// v' = v: the inner map exactly, so the variant starts as the baseline and learns where to
// sharpen or flatten (lambda > 0 sharpens long rows, like SSMax's s ln n).
//
// Paper: X. Zhang, X. Chang, M. Li, A. Roy-Chowdhury, J. Chen, S. Oymak, "Selective Attention:
// Enhancing Transformer through Principled Context Control", NeurIPS 2024 (arXiv 2411.12892):
// token-dependent and (logarithmic) position-dependent inverse temperatures on the query, and a
// value temperature, with under 0.5% extra parameters. Its exact functional form was not at hand:
// the tanh/ln parametrisation above is this implementation's choice.
//
// Tensors (per layer): tau_w (NH, C) weight decay, init 0; tau_pos (NH) = lambda, no decay,
// init 0; with attn.ssa_value = on also val_w (NH, C) weight decay, init 0.
// Hyperparameters: attn.ssa_value = off|on (default off).
//
// tau_i is the core's row_scale; the core returns dtau_i = <s_i, dz_i>, dz the row map's VJP.
//   dtw_h += sum_i dtau_i (1 - tanh^2) x_i;  dlambda_h += sum_i dtau_i ln n_i
//   value: the core returns dv'; dv_j += phi_j dv'_j, dphi_j = <v_j, dv'_j>,
//          dvw_h += sum_j dphi_j (1 - tanh^2) x_j
//   dx_i += sum_h dtau_i (1 - tanh^2) tw_h + dphi_i (1 - tanh^2) vw_h
// Parameter gradients are summed over (b, t) in index order per head.
// Position encodings apply to the scores as in the default pipeline.
// Cache: tau, dtau, tanh (B,NH,T); with the value temperature also phi and
// its gradient (B,T,NH) and v', dv' (B,T,C).
//
// Reference: umich-sota/selective_attention:lit_gpt/gpt_2_PTS.py
// Deviations from it: the public code has only the position temperature, tau = 1 + exp(-exp(beta))
//   ln n with one beta per layer shared by the heads (init 1.5, i.e. 1 + 0.0114 ln n at the start);
//   here lambda_h ln n is per head, free in sign and 0 at init, and the token term tanh(tw . x) and
//   the value temperature (attn.ssa_value) are this implementation's reading of the paper's query
//   and value temperatures, which that code does not contain; no attn key selects the reference's
//   form.
#include <math.h>
#include <string.h>

#include "attention/attention.h"

enum { HP_VALUE, N_HP };
enum { T_TW, T_POS, T_VW, N_T };

static const AttnHParamSpec SSA_HP[N_HP] = {
    [HP_VALUE] = {"ssa_value", 0, 0, 0, "off|on",
                  "value temperature v' = (1 + tanh(vw_h . x_j)) v_j"},
};

static int ssa_value_on(const AttnHParams* hp) {
    return (int)hp->v[HP_VALUE] == 1;
}

static int ssa_tensors(AttnTensorSpec* out, const AttnDims* d, const AttnHParams* hp) {
    out[T_TW] = (AttnTensorSpec){
        .name = "tau_w", .ndim = 2, .shape = {d->NH, d->C}, .decay = 1, .init = ATTN_INIT_ZERO};
    out[T_POS] = (AttnTensorSpec){
        .name = "tau_pos", .ndim = 1, .shape = {d->NH}, .decay = 0, .init = ATTN_INIT_ZERO};
    if (!ssa_value_on(hp)) return 2;
    out[T_VW] = (AttnTensorSpec){
        .name = "val_w", .ndim = 2, .shape = {d->NH, d->C}, .decay = 1, .init = ATTN_INIT_ZERO};
    return N_T;
}

static size_t ssa_cache_floats(const AttnDims* d, const AttnHParams* hp) {
    const size_t BNT = (size_t)d->B * d->NH * d->T, BTC = (size_t)d->B * d->T * d->C;
    size_t n = 3 * BNT;
    if (ssa_value_on(hp)) n += 2 * BNT + 2 * BTC;
    return n;
}

typedef struct {
    real *tau, *dtau, *th;       // (B,NH,T)
    real *phi, *dphi, *vp, *dvp; // (B,T,NH) x2, (B,T,C) x2; NULL without value temperature
} SsaCache;

static SsaCache ssa_cache(const AttnLayer* L) {
    const size_t BNT = (size_t)L->d.B * L->d.NH * L->d.T, BTC = (size_t)L->d.B * L->d.T * L->d.C;
    SsaCache k = {0};
    k.tau = L->cache;
    k.dtau = k.tau + BNT;
    k.th = k.dtau + BNT;
    if (ssa_value_on(L->hp)) {
        k.phi = k.th + BNT;
        k.dphi = k.phi + BNT;
        k.vp = k.dphi + BNT;
        k.dvp = k.vp + BTC;
    }
    return k;
}

// The inner core with the temperature as row scale and, with the value temperature, v' as the
// values; position encoding applied by the caller.
static AttnCore ssa_core(const AttnLayer* L, const SsaCache* k) {
    const size_t C = (size_t)L->d.C;
    AttnCore c = attn_layer_core(L);
    c.row_scale = k->tau;
    c.drow_scale = k->dtau;
    if (k->vp) {
        c.v = k->vp;
        c.ldv = C;
        c.dv = k->dvp;
    }
    return c;
}

static real dot(const real* a, const real* b, size_t n) {
    real s = 0.0f;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void ssa_forward(AttnLayer* L) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH, hs = L->d.hs;
    const size_t C = (size_t)L->d.C;
    SsaCache k = ssa_cache(L);
#pragma omp parallel for collapse(2) schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const size_t r = (size_t)b * T + t;
            const real* x = L->x + r * C;
            for (int h = 0; h < NH; h++) {
                const size_t i = ((size_t)b * NH + h) * T + t;
                const real th = real_tanh(dot(L->tp[T_TW] + (size_t)h * C, x, C));
                k.th[i] = th;
                k.tau[i] = 1.0f + th + L->tp[T_POS][h] * real_log((real)(t + 1));
                if (!k.vp) continue;
                const real ph = 1.0f + real_tanh(dot(L->tp[T_VW] + (size_t)h * C, x, C));
                k.phi[r * NH + h] = ph;
                const real* v = L->qkv + r * 3 * C + 2 * C + (size_t)h * hs;
                real* vp = k.vp + r * C + (size_t)h * hs;
                for (int q = 0; q < hs; q++)
                    vp[q] = ph * v[q];
            }
        }
    }
    AttnCore c = ssa_core(L, &k);
    attn_pos_forward(&c, L, L->qk_pos);
    attn_core_forward(&c, &L->d, L->ws);
}

static void ssa_backward(AttnLayer* L) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH, hs = L->d.hs;
    const size_t C = (size_t)L->d.C;
    const long BT = (long)B * T;
    SsaCache k = ssa_cache(L);
    memset(k.dtau, 0, sizeof(real) * (size_t)B * NH * T);
    if (k.vp) memset(k.dvp, 0, sizeof(real) * (size_t)BT * C);
    AttnCore c = ssa_core(L, &k);
    AttnPosSave save;
    attn_pos_backward_begin(&c, &save, L, L->qk_pos);
    attn_core_backward(&c, &L->d, L->ws);
    attn_pos_backward_end(&c, &save, L);
    // per (row, head): dtau -> d(tw . x) in place; value temperature: dv, dphi -> d(vw . x)
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (long r = 0; r < BT; r++) {
        const int b = (int)(r / T), t = (int)(r % T);
        real* dx = L->dx + (size_t)r * C;
        for (int h = 0; h < NH; h++) {
            const size_t i = ((size_t)b * NH + h) * T + t;
            const real th = k.th[i];
            const real dz = k.dtau[i] * (1.0f - th * th);
            k.th[i] = dz; // tanh no longer needed: keep d(tw . x) here for the parameter pass
            const real* tw = L->tp[T_TW] + (size_t)h * C;
            for (size_t q = 0; q < C; q++)
                dx[q] += dz * tw[q];
            if (!k.vp) continue;
            const size_t off = (size_t)r * C + (size_t)h * hs;
            const real* v = L->qkv + (size_t)r * 3 * C + 2 * C + (size_t)h * hs;
            real* dv = L->dqkv + (size_t)r * 3 * C + 2 * C + (size_t)h * hs;
            const real* dvp = k.dvp + off;
            const real ph = k.phi[(size_t)r * NH + h];
            real dph = 0.0f;
            for (int q = 0; q < hs; q++) {
                dph += v[q] * dvp[q];
                dv[q] += ph * dvp[q];
            }
            const real tv = ph - 1.0f;
            const real dzv = dph * (1.0f - tv * tv);
            k.dphi[(size_t)r * NH + h] = dzv;
            const real* vw = L->tp[T_VW] + (size_t)h * C;
            for (size_t q = 0; q < C; q++)
                dx[q] += dzv * vw[q];
        }
    }
    // parameters: one head per thread, (b, t) in index order
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int h = 0; h < NH; h++) {
        real* dtw = L->dtp[T_TW] + (size_t)h * C;
        real* dvw = k.vp ? L->dtp[T_VW] + (size_t)h * C : NULL;
        real dpos = 0.0f;
        for (long r = 0; r < BT; r++) {
            const int b = (int)(r / T), t = (int)(r % T);
            const size_t i = ((size_t)b * NH + h) * T + t;
            const real* x = L->x + (size_t)r * C;
            const real dz = k.th[i];
            for (size_t q = 0; q < C; q++)
                dtw[q] += dz * x[q];
            dpos += k.dtau[i] * real_log((real)(t + 1));
            if (dvw) {
                const real dzv = k.dphi[(size_t)r * NH + h];
                for (size_t q = 0; q < C; q++)
                    dvw[q] += dzv * x[q];
            }
        }
        L->dtp[T_POS][h] += dpos;
    }
}

const AttnVariant attn_ssa = {
    .name = "ssa",
    .formula = "A = inner(tau_i s), tau_i = 1 + tanh(tw_h . x_i) + lambda_h ln n_i",
    .source = "Zhang et al. 2024, Selective Attention (2411.12892)",
    .reference = "umich-sota/selective_attention:lit_gpt/gpt_2_PTS.py",
    .deviations = "the public code has only the position temperature, tau = 1 + exp(-exp(beta)) ln "
                  "n with one beta per layer shared by the heads (init 1.5, i.e. 1 + 0.0114 ln n "
                  "at the start); here lambda_h ln n is per head, free in sign and 0 at init, and "
                  "the token term tanh(tw . x) and the value temperature (attn.ssa_value) are this "
                  "implementation's reading of the paper's query and value temperatures, which "
                  "that code does not contain; no attn key selects the reference's form",
    .rows_sum_to_one = 0, // as the inner row map
    .shift_invariant = 0,
    .hparams = SSA_HP,
    .n_hparams = N_HP,
    .layer_tensors = ssa_tensors,
    .layer_cache_floats = ssa_cache_floats,
    .layer_forward = ssa_forward,
    .layer_backward = ssa_backward,
};
