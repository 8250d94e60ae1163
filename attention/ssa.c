// attention/ssa.c: Selective Self-Attention: a learned query temperature on the scores around
// any inner row map (attn.inner, default softmax), and an optional value temperature.
//
//   attn.ssa_temp = position (default, the authors' code):
//     tau_i = 1 + exp(-exp(beta)) ln n_i,   n_i = i + 1,  one beta per layer (all heads), init 1.5
//   attn.ssa_temp = token (this implementation's reading of the paper; the earlier default):
//     tau_i = 1 + tanh(tw_h . x_i) + lambda_h ln n_i,     tw, lambda per head, init 0
//   A_i    = rowmap(tau_i s_i),   s = q k^T / sqrt(hs)
//   value temperature (attn.ssa_value = on):  v'_j = (1 + tanh(vw_h . x_j)) v_j
//   o_i    = sum_j A_ij v'_j      (v' = v when off)
// x_i is the whole block input (ln_1 output). At init the position form is 1 + 0.0114 ln n (a
// slight sharpening of long rows); the token form starts at tau = 1 (the inner map exactly) and
// learns where to sharpen or flatten (lambda > 0 sharpens long rows, like SSMax's s ln n).
//
// Paper: X. Zhang, X. Chang, M. Li, A. Roy-Chowdhury, J. Chen, S. Oymak, "Selective Attention:
// Enhancing Transformer through Principled Context Control", NeurIPS 2024 (arXiv 2411.12892):
// token-dependent and (logarithmic) position-dependent inverse temperatures on the query, and a
// value temperature, with under 0.5% extra parameters. Its exact functional form was not at hand:
// the tanh/ln parametrisation above is this implementation's choice.
//
// Tensors (per layer): position: beta (1), no decay, init 1.5; token: tau_w (NH, C) weight
// decay, init 0, and tau_pos (NH) = lambda, no decay, init 0; with attn.ssa_value = on also val_w
// (NH, C) weight decay, init 0 (after the others).
// Hyperparameters: attn.ssa_temp = position|token (default position); attn.ssa_value = off|on
// (default off).
//
// tau_i is the core's row_scale; the core returns dtau_i = <s_i, dz_i>, dz the row map's VJP.
//   position: dbeta += sum_{b,h,i} dtau_i (-exp(beta - exp(beta))) ln n_i  (index order)
//   token:    dtw_h += sum_i dtau_i (1 - tanh^2) x_i;  dlambda_h += sum_i dtau_i ln n_i
//   value: the core returns dv'; dv_j += phi_j dv'_j, dphi_j = <v_j, dv'_j>,
//          dvw_h += sum_j dphi_j (1 - tanh^2) x_j
//   dx_i += sum_h dtau_i (1 - tanh^2) tw_h (token) + dphi_i (1 - tanh^2) vw_h
// Parameter gradients are summed over (b, t) in index order per head.
// Position encodings apply to the scores as in the default pipeline.
// Cache: tau, dtau, tanh (B,NH,T); with the value temperature also phi and
// its gradient (B,T,NH) and v', dv' (B,T,C).
//
// Reference: umich-sota/selective_attention:lit_gpt/gpt_2_PTS.py (CausalSelfAttention,
//   scaled_dot_product_attention: the scores times 1 + exp(-exp(beta)) log(row length))
// Paper vs code: the paper's SSA has a token- and position-dependent query temperature and a value
//   temperature; the public code implements only the position term. The default follows the
//   code, which is the form that can be checked; the paper's fuller form is offered as this
//   implementation's reading of it (its exact parametrisation was not at hand).
// Deviations from it: none in the default; attn.ssa_temp = token (1 + tanh(tw_h . x) + lambda_h
//   ln n, per head, 0 at init: the earlier default) and attn.ssa_value = on (the value
//   temperature) are readings of the paper that the code does not contain.
#include <math.h>
#include <string.h>

#include "attention/layer.h"

enum { HP_VALUE, HP_TEMP, N_HP };
enum { TEMP_POSITION, TEMP_TOKEN };
// tensor indices: token form tau_w, tau_pos[, val_w]; position form beta[, val_w]
enum { T_TW, T_POS, T_VW, N_T };
enum { T_BETA = 0 };

#define SSA_BETA_INIT 1.5f // the reference's nn.Parameter(torch.tensor(1.5))

static const AttnHParamSpec SSA_HP[N_HP] = {
    [HP_VALUE] = {"ssa_value", 0, 0, 0, "off|on",
                  "value temperature v' = (1 + tanh(vw_h . x_j)) v_j"},
    [HP_TEMP] = {"ssa_temp", TEMP_POSITION, 0, 0, "position|token",
                 "query temperature: 1 + exp(-exp(beta)) ln n, one beta per layer (the authors' "
                 "code), or 1 + tanh(tw_h . x) + lambda_h ln n per head"},
};

static int ssa_token(const AttnHParams* hp) {
    return (int)hp->v[HP_TEMP] == TEMP_TOKEN;
}

static int ssa_vw_index(const AttnHParams* hp) {
    return ssa_token(hp) ? T_VW : T_BETA + 1;
}

static int ssa_value_on(const AttnHParams* hp) {
    return (int)hp->v[HP_VALUE] == 1;
}

static int ssa_tensors(AttnTensorSpec* out, const AttnDims* d, const AttnHParams* hp) {
    if (ssa_token(hp)) {
        out[T_TW] = (AttnTensorSpec){
            .name = "tau_w", .ndim = 2, .shape = {d->NH, d->C}, .decay = 1, .init = ATTN_INIT_ZERO};
        out[T_POS] = (AttnTensorSpec){
            .name = "tau_pos", .ndim = 1, .shape = {d->NH}, .decay = 0, .init = ATTN_INIT_ZERO};
    } else {
        out[T_BETA] = (AttnTensorSpec){.name = "beta",
                                       .ndim = 1,
                                       .shape = {1},
                                       .decay = 0,
                                       .init = ATTN_INIT_CONST,
                                       .init_value = SSA_BETA_INIT};
    }
    const int nv = ssa_vw_index(hp);
    if (!ssa_value_on(hp)) return nv;
    out[nv] = (AttnTensorSpec){
        .name = "val_w", .ndim = 2, .shape = {d->NH, d->C}, .decay = 1, .init = ATTN_INIT_ZERO};
    return nv + 1;
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
    const int token = ssa_token(L->hp);
    const real* vw = k.vp ? L->tp[ssa_vw_index(L->hp)] : NULL;
    const real cpos = token ? 0.0f : real_exp(-real_exp(L->tp[T_BETA][0]));
#pragma omp parallel for collapse(2) schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const size_t r = (size_t)b * T + t;
            const real* x = L->x + r * C;
            for (int h = 0; h < NH; h++) {
                const size_t i = ((size_t)b * NH + h) * T + t;
                if (token) {
                    const real th = real_tanh(dot(L->tp[T_TW] + (size_t)h * C, x, C));
                    k.th[i] = th;
                    k.tau[i] = 1.0f + th + L->tp[T_POS][h] * real_log((real)(t + 1));
                } else {
                    k.th[i] = 0.0f;
                    k.tau[i] = 1.0f + cpos * real_log((real)(t + 1));
                }
                if (!k.vp) continue;
                const real ph = 1.0f + real_tanh(dot(vw + (size_t)h * C, x, C));
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
    const int token = ssa_token(L->hp);
    const int ivw = ssa_vw_index(L->hp);
    // per (row, head): dtau -> d(tw . x) in place; value temperature: dv, dphi -> d(vw . x)
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (long r = 0; r < BT; r++) {
        const int b = (int)(r / T), t = (int)(r % T);
        real* dx = L->dx + (size_t)r * C;
        for (int h = 0; h < NH; h++) {
            const size_t i = ((size_t)b * NH + h) * T + t;
            if (token) {
                const real th = k.th[i];
                const real dz = k.dtau[i] * (1.0f - th * th);
                k.th[i] = dz; // tanh no longer needed: keep d(tw . x) here for the parameter pass
                const real* tw = L->tp[T_TW] + (size_t)h * C;
                for (size_t q = 0; q < C; q++)
                    dx[q] += dz * tw[q];
            }
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
            const real* vw = L->tp[ivw] + (size_t)h * C;
            for (size_t q = 0; q < C; q++)
                dx[q] += dzv * vw[q];
        }
    }
    // parameters: one head per thread, (b, t) in index order
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int h = 0; h < NH; h++) {
        real* dtw = token ? L->dtp[T_TW] + (size_t)h * C : NULL;
        real* dvw = k.vp ? L->dtp[ivw] + (size_t)h * C : NULL;
        real dpos = 0.0f;
        for (long r = 0; r < BT; r++) {
            const int b = (int)(r / T), t = (int)(r % T);
            const size_t i = ((size_t)b * NH + h) * T + t;
            const real* x = L->x + (size_t)r * C;
            if (dtw) {
                const real dz = k.th[i];
                for (size_t q = 0; q < C; q++)
                    dtw[q] += dz * x[q];
                dpos += k.dtau[i] * real_log((real)(t + 1));
            }
            if (dvw) {
                const real dzv = k.dphi[(size_t)r * NH + h];
                for (size_t q = 0; q < C; q++)
                    dvw[q] += dzv * x[q];
            }
        }
        if (dtw) L->dtp[T_POS][h] += dpos;
    }
    if (token) return;
    // position form: the layer's beta, summed over (b, h, t) in index order
    const real be = L->tp[T_BETA][0];
    real dsum = 0.0f;
    for (size_t i = 0; i < (size_t)B * NH * T; i++)
        dsum += k.dtau[i] * real_log((real)(i % (size_t)T + 1));
    L->dtp[T_BETA][0] += -real_exp(be - real_exp(be)) * dsum;
}

const AttnVariant attn_ssa = {
    .name = "ssa",
    .formula = "A = inner(tau_i s), tau_i = 1 + exp(-exp(beta)) ln n_i (one beta per layer)",
    .source = "Zhang et al. 2024, Selective Attention (2411.12892)",
    .reference = "umich-sota/selective_attention:lit_gpt/gpt_2_PTS.py",
    .deviations = "none in the default (the public code's position temperature, one beta per "
                  "layer, init 1.5); the paper also describes token-dependent query and value "
                  "temperatures that the code does not contain: attn.ssa_temp = token (1 + "
                  "tanh(tw_h . x) + lambda_h ln n per head, 0 at init; the earlier default) and "
                  "attn.ssa_value = on are this implementation's reading of them",
    .rows_sum_to_one = 0, // as the inner row map
    .shift_invariant = 0,
    .hparams = SSA_HP,
    .n_hparams = N_HP,
    .layer_tensors = ssa_tensors,
    .layer_cache_floats = ssa_cache_floats,
    .layer_forward = ssa_forward,
    .layer_backward = ssa_backward,
};
