// attention/asentmax.c: ASEntmax (Adaptive-Scalable alpha-entmax): alpha-entmax of the scores
// scaled by a learned, query- and length-dependent inverse temperature.
//
//   attn.as_scale = adapt (default; the authors' adapt-softplus-tanh, their ASEntmax recipe):
//     theta_i = delta + softplus(wb_h . x_i + bb_h) * L_i^gamma_i,   L_i = ln(i + 2)
//     gamma_i = 2 tanh(wg_h . x_i + bg_h)                  x_i the block input (ln_1 output)
//   attn.as_scale = recipe (a third-party recipe; the earlier default):
//     theta_i = delta + softplus(w_h . q_i) (ln max(i + 1, 2))^gamma_h,   gamma_h = exp(lg_h)
//   A_i = entmax_alpha(theta_i s_i),   s = q k^T / sqrt(hs);   o_i = sum_j A_ij v_j
//
// Paper: P. Vasylenko, H. Pitorro, A. Martins, M. Treviso, "Long-Context Generalization with
// Sparse Attention", arXiv 2506.16640 (code deep-spin/asentmax). Its README's ASEntmax runs
// entmax_alpha = 1.5, attn_scale_type = adapt-softplus-tanh, attn_scale_proj_bias = True; the
// gamma range 2 is its attn_scale_gamma_range default and delta = 1 its attn_scale_delta.
//
// Row map: attn.as_map = entmax (default) uses the registry's `entmax` variant at attn.alpha
// (fixed alpha; its learnable-alpha option is not used here); attn.as_map = inner uses the row
// map of attn.inner (default softmax) instead, e.g. scalable softmax with a learned temperature.
// The map and its hyperparameters are resolved once at setup (as_compose, attention/compose.h);
// the model sizes the workspace's row-map scratch for it as well as for attn.inner.
//
// Tensors (per layer): adapt: beta_w, gamma_w (NH, C) weight decay, init N(0, 0.02), and beta_b,
// gamma_b (NH) no decay, init 0 (the nn.Linear(C, NH, bias) projections after Hugging Face's
// Gemma-2 weight init, initializer_range 0.02, zero biases); recipe: w (NH, hs) weight decay,
// init 0, and log_gamma (NH) no decay, init 0 (softplus(0) = ln 2, gamma = 1).
// Hyperparameters: attn.as_scale = adapt|recipe; attn.as_map = entmax|inner; attn.alpha = 1.5 in
// [1.01, 2]; attn.delta = 1.
//
// theta_i enters as the core's row_scale (the row map sees theta_i s_i); the core returns
// dtheta_i = <s_i, dz_i> with dz the row map's VJP. Then, with P the power of the log position:
//   adapt (ub, ug the two projections, P = L^gamma):
//     dub = dtheta sigmoid(ub) P;   dug = dtheta softplus(ub) P ln L * 2 (1 - tanh^2(ug))
//     dwb_h += dub x_i, dbb_h += dub, dwg_h += dug x_i, dbg_h += dug;  dx_i += sum_h dub wb_h
//     + dug wg_h
//   recipe (u = w_h . q_i, P = (ln n_i)^gamma):
//     dq_i += dtheta sigmoid(u) P w_h;  dw_h += dtheta sigmoid(u) P q_i
//     dlog_gamma_h += dtheta softplus(u) P ln(ln n_i) gamma_h
// Parameter gradients are summed over (b, t) in index order per head; dx over heads in order.
// Numerics: softplus(u) = max(u,0) + log1p(e^-|u|). Position encodings apply to the scores as in
// the default pipeline; under rope the recipe's scale reads the unrotated q (theta carries no
// position except through ln n). Cache: theta, dtheta, u, u2 (B,NH,T).
//
// Reference: deep-spin/asentmax:synthetic/src/models/architectures/sparse_gemma.py
//   (SparseGemma2Attention._apply_length_scaling)
// Deviations from it: under pos_encoding = alibi the scale multiplies the whole score row, ALiBi
//   bias included (the reference scales the queries, so its NAPE ALiBi bias is unscaled, and
//   scales only the NoPE half of the heads); its learn and nakanishi modes are not offered
//   (nakanishi is close to the ssmax variant); attn.as_scale = recipe (the earlier default) and
//   attn.as_map = inner are extensions.
#include <math.h>
#include <string.h>

#include "attention/attention.h"
#include "attention/compose.h"
#include "attention/rowops.h"
#include "common/util.h"

enum { HP_MAP, HP_ALPHA, HP_DELTA, HP_SCALE, N_HP };
enum { MAP_ENTMAX, MAP_INNER };
enum { SCALE_ADAPT, SCALE_RECIPE };
enum { T_W, T_LG, N_T };                    // recipe
enum { T_BW, T_BB, T_GW, T_GB, N_T_ADAPT }; // adapt
#define AS_GAMMA_RANGE 2.0f                 // the reference's attn_scale_gamma_range default

static const AttnHParamSpec AS_HP[N_HP] = {
    [HP_MAP] = {"as_map", MAP_ENTMAX, 0, 0, "entmax|inner",
                "row map: alpha-entmax at attn.alpha, or the attn.inner row map"},
    [HP_ALPHA] = {"alpha", 1.5f, 1.01f, 2.0f, NULL, "entmax alpha (with as_map = entmax)"},
    [HP_DELTA] = {"delta", 1.0f, 0.0f, 100.0f, NULL, "fixed offset of the inverse temperature"},
    [HP_SCALE] = {"as_scale", SCALE_ADAPT, 0, 0, "adapt|recipe",
                  "adapt: delta + softplus(wb.x + bb) ln(i+2)^(2 tanh(wg.x + bg)) (the authors'); "
                  "recipe: delta + softplus(w.q) (ln max(i+1, 2))^gamma_h"},
};

static int as_adapt(const AttnHParams* hp) {
    return (int)hp->v[HP_SCALE] == SCALE_ADAPT;
}

static int as_tensors(AttnTensorSpec* out, const AttnDims* d, const AttnHParams* hp) {
    if (as_adapt(hp)) {
        static const char* const NAMES[N_T_ADAPT] = {"beta_w", "beta_b", "gamma_w", "gamma_b"};
        for (int k = 0; k < N_T_ADAPT; k++) {
            const int mat = k == T_BW || k == T_GW;
            out[k] = (AttnTensorSpec){.name = NAMES[k],
                                      .ndim = mat ? 2 : 1,
                                      .shape = {d->NH, mat ? d->C : 0},
                                      .decay = mat,
                                      .init = mat ? ATTN_INIT_NORMAL : ATTN_INIT_ZERO,
                                      .init_value = mat ? 0.02f : 0.0f};
        }
        return N_T_ADAPT;
    }
    out[T_W] = (AttnTensorSpec){
        .name = "w", .ndim = 2, .shape = {d->NH, d->hs}, .decay = 1, .init = ATTN_INIT_ZERO};
    out[T_LG] = (AttnTensorSpec){
        .name = "log_gamma", .ndim = 1, .shape = {d->NH}, .decay = 0, .init = ATTN_INIT_ZERO};
    return N_T;
}

static size_t as_cache_floats(const AttnDims* d, const AttnHParams* hp) {
    (void)hp;
    const size_t BNT = (size_t)d->B * d->NH * d->T;
    return 4 * BNT;
}

typedef struct {
    real *theta, *dtheta, *u, *u2; // u2: the gamma projection (adapt)
} AsCache;

static AsCache as_cache(const AttnLayer* L) {
    const size_t BNT = (size_t)L->d.B * L->d.NH * L->d.T;
    AsCache k;
    k.theta = L->cache;
    k.dtheta = k.theta + BNT;
    k.u = k.dtheta + BNT;
    k.u2 = k.u + BNT;
    return k;
}

// ---------------------------------------------------------------------------------------------
// entmax at a fixed alpha as the core's row map: the registry's entmax without its per-head
// parameter (the learnable alpha, not used here), so the core keeps no parameter slots for it.
// Its row scratch (T floats) comes from the driver, which the model sizes for this map as well.

static void as_entmax_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    AttnRowCtx c2 = *ctx;
    c2.p = NULL;
    c2.dp = NULL;
    attn_entmax.forward_row(a, s, n, &c2);
}

static void as_entmax_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                   const AttnRowCtx* ctx) {
    AttnRowCtx c2 = *ctx;
    c2.p = NULL;
    c2.dp = NULL;
    attn_entmax.backward_row(ds, da, s, a, n, &c2);
}

static size_t as_entmax_scratch(int T) {
    return attn_row_scratch(&attn_entmax, T);
}

static const AttnVariant AS_ENTMAX_ROW = {
    .name = "entmax",
    .formula = "alpha-entmax at the fixed attn.alpha",
    .rows_sum_to_one = 1,
    .shift_invariant = 1,
    .scratch_floats = as_entmax_scratch,
    .forward_row = as_entmax_forward_row,
    .backward_row = as_entmax_backward_row,
};

// Setup: as_map = entmax runs entmax at attn.alpha; inner leaves the core on attn.inner.
static void as_compose(AttnComposed* out, const AttnHParams* hp) {
    if ((int)hp->v[HP_MAP] != MAP_ENTMAX) return;
    out->row = &AS_ENTMAX_ROW;
    attn_hparams_default(&out->hp, &attn_entmax, hp->T_train, hp->n_head, hp->head_size, hp->n_embd,
                         hp->n_layer);
    out->hp.v[ATTN_ENTMAX_HP_ALPHA] = hp->v[HP_ALPHA];
}

// Run the core forward or backward with the row map resolved at setup (position encoding
// included).
static void as_run(const AttnLayer* L, const AsCache* k, int backward) {
    AttnCore c = attn_layer_core(L);
    c.row_scale = k->theta;
    c.drow_scale = k->dtheta;
    rowops_core_composed(&c, L, backward); // as_map = entmax: entmax at a fixed alpha
}

static inline real softplusf(real u) {
    return real_fmax(u, 0.0f) + real_log1p(real_exp(-real_fabs(u)));
}

static inline real ln_len(int t) { // ln n, n = t + 1, clamped at n >= 2
    return real_log((real)(t + 1 < 2 ? 2 : t + 1));
}

static inline real ln_pos2(int t) { // the reference's log position ln(i + 2)
    return real_log((real)(t + 2));
}

// adapt: theta from the block input (the two projections per head)
static void as_adapt_forward(AttnLayer* L, const AsCache* k) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH;
    const size_t C = (size_t)L->d.C;
    const real delta = L->hp->v[HP_DELTA];
#pragma omp parallel for collapse(2) schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const real* wb = L->tp[T_BW] + (size_t)h * C;
            const real* wg = L->tp[T_GW] + (size_t)h * C;
            for (int t = 0; t < T; t++) {
                const real* x = L->x + ((size_t)b * T + t) * C;
                real ub = L->tp[T_BB][h], ug = L->tp[T_GB][h];
                for (size_t i = 0; i < C; i++) {
                    ub += wb[i] * x[i];
                    ug += wg[i] * x[i];
                }
                const size_t r = ((size_t)b * NH + h) * T + t;
                k->u[r] = ub;
                k->u2[r] = ug;
                const real gam = AS_GAMMA_RANGE * real_tanh(ug);
                k->theta[r] = delta + softplusf(ub) * real_exp(gam * real_log(ln_pos2(t)));
            }
        }
    }
}

static void as_adapt_backward(AttnLayer* L, const AsCache* k) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH;
    const size_t C = (size_t)L->d.C;
    const size_t BNT = (size_t)B * NH * T;
    // dtheta -> d(ub) in u, d(ug) in u2
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (size_t r = 0; r < BNT; r++) {
        const int t = (int)(r % (size_t)T);
        const real ub = k->u[r], th = real_tanh(k->u2[r]), dth = k->dtheta[r];
        const real lnL = real_log(ln_pos2(t));
        const real P = real_exp(AS_GAMMA_RANGE * th * lnL);
        k->u[r] = dth * P / (1.0f + real_exp(-ub));
        k->u2[r] = dth * softplusf(ub) * P * lnL * AS_GAMMA_RANGE * (1.0f - th * th);
    }
    // dx: one row per iteration, heads in order
#pragma omp parallel for collapse(2) schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            real* dx = L->dx + ((size_t)b * T + t) * C;
            for (int h = 0; h < NH; h++) {
                const size_t r = ((size_t)b * NH + h) * T + t;
                const real db = k->u[r], dg = k->u2[r];
                const real* wb = L->tp[T_BW] + (size_t)h * C;
                const real* wg = L->tp[T_GW] + (size_t)h * C;
                for (size_t i = 0; i < C; i++)
                    dx[i] += db * wb[i] + dg * wg[i];
            }
        }
    }
    // parameters: one head per thread, (b, t) in index order
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int h = 0; h < NH; h++) {
        real* dwb = L->dtp[T_BW] + (size_t)h * C;
        real* dwg = L->dtp[T_GW] + (size_t)h * C;
        real sb = 0.0f, sg = 0.0f;
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                const size_t r = ((size_t)b * NH + h) * T + t;
                const real db = k->u[r], dg = k->u2[r];
                const real* x = L->x + ((size_t)b * T + t) * C;
                for (size_t i = 0; i < C; i++) {
                    dwb[i] += db * x[i];
                    dwg[i] += dg * x[i];
                }
                sb += db;
                sg += dg;
            }
        }
        L->dtp[T_BB][h] += sb;
        L->dtp[T_GB][h] += sg;
    }
}

static void as_forward(AttnLayer* L) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH, hs = L->d.hs;
    const size_t C = (size_t)L->d.C;
    const real delta = L->hp->v[HP_DELTA];
    AsCache k = as_cache(L);
    if (as_adapt(L->hp)) {
        as_adapt_forward(L, &k);
        as_run(L, &k, 0);
        return;
    }
#pragma omp parallel for collapse(2) schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const real* w = L->tp[T_W] + (size_t)h * hs;
            const real gamma = real_exp(L->tp[T_LG][h]);
            for (int t = 0; t < T; t++) {
                const real* q = L->qkv + ((size_t)b * T + t) * 3 * C + (size_t)h * hs;
                real u = 0.0f;
                for (int i = 0; i < hs; i++)
                    u += w[i] * q[i];
                const size_t r = ((size_t)b * NH + h) * T + t;
                k.u[r] = u;
                k.theta[r] = delta + softplusf(u) * real_pow(ln_len(t), gamma);
            }
        }
    }
    as_run(L, &k, 0);
}

static void as_backward(AttnLayer* L) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH, hs = L->d.hs;
    const size_t C = (size_t)L->d.C;
    AsCache k = as_cache(L);
    memset(k.dtheta, 0, sizeof(real) * (size_t)B * NH * T);
    as_run(L, &k, 1);
    if (as_adapt(L->hp)) {
        as_adapt_backward(L, &k);
        return;
    }
    // the scale's parameters and its path into q: one head per thread, (b, t) in index order
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int h = 0; h < NH; h++) {
        const real* w = L->tp[T_W] + (size_t)h * hs;
        real* dw = L->dtp[T_W] + (size_t)h * hs;
        const real gamma = real_exp(L->tp[T_LG][h]);
        real dlg = 0.0f;
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                const size_t r = ((size_t)b * NH + h) * T + t;
                const real u = k.u[r], dth = k.dtheta[r];
                const real ln = ln_len(t), P = real_pow(ln, gamma);
                const real sig = 1.0f / (1.0f + real_exp(-u));
                const real g = dth * sig * P;
                const size_t qo = ((size_t)b * T + t) * 3 * C + (size_t)h * hs;
                const real* q = L->qkv + qo;
                real* dq = L->dqkv + qo;
                for (int i = 0; i < hs; i++) {
                    dq[i] += g * w[i];
                    dw[i] += g * q[i];
                }
                dlg += dth * softplusf(u) * P * real_log(ln) * gamma;
            }
        }
        L->dtp[T_LG][h] += dlg;
    }
}

const AttnVariant attn_asentmax = {
    .name = "asentmax",
    .formula = "A = entmax_1.5(theta_i s), theta_i = delta + softplus(wb.x_i + bb) "
               "ln(i+2)^(2 tanh(wg.x_i + bg))",
    .source =
        "Vasylenko et al. 2025, Long-Context Generalization with Sparse Attention (2506.16640)",
    .reference = "deep-spin/asentmax:synthetic/src/models/architectures/sparse_gemma.py",
    .deviations =
        "under pos_encoding = alibi the scale multiplies the whole score row, ALiBi bias included "
        "(the reference scales the queries, so its NAPE ALiBi bias is unscaled, and scales only "
        "the NoPE half of the heads); its learn and nakanishi scale modes are not offered; "
        "attn.as_scale = recipe (delta + softplus(w_h . q_i) (ln max(i+1, 2))^gamma_h, a "
        "third-party recipe and the earlier default) and attn.as_map = inner are extensions",
    .rows_sum_to_one = 0, // 1 with entmax; depends on attn.inner with as_map = inner
    .shift_invariant = 0,
    .hparams = AS_HP,
    .n_hparams = N_HP,
    .layer_tensors = as_tensors,
    .layer_cache_floats = as_cache_floats,
    .layer_forward = as_forward,
    .layer_backward = as_backward,
    .compose = as_compose,
};
