// attention/deltanet.c: the delta-rule memories DeltaNet and Gated DeltaNet, two layer-level
// variants (`deltanet`, `gated_deltanet`) in their exact recurrent form.
//
// Sources (VARIANTS.md B9): Schlag, Irie, Schmidhuber 2021 "Linear Transformers Are Secretly Fast
// Weight Programmers" (the delta rule); Yang, Wang, Zhang, Shen, Kim 2024 "Parallelizing Linear
// Transformers with the Delta Rule over Sequence Length" (DeltaNet: L2-normalised q, k, beta_t =
// sigmoid(W_beta x_t), the chunked WY form); Yang, Kautz, Hatamizadeh 2024 "Gated Delta
// Networks: Improving Mamba2 with Delta Rule" (arXiv 2412.06464: the gate alpha_t, parameterised
// as in Mamba2, alpha_t = exp(-exp(A_log) softplus(W_a x_t + dt_bias))).
//
// Reference code (the defaults follow it): flash-linear-attention,
// fla-org/flash-linear-attention: fla/ops/delta_rule/naive.py and fla/ops/gated_delta_rule/naive.py
// (the recurrences, q scaled by d^-1/2), fla/layers/delta_net.py and fla/layers/gated_deltanet.py
// (the layers: q, k L2-normalised in the kernel, beta = sigmoid(b_proj x), the output norm o_norm
// per head before o_proj; use_gate defaults to False in DeltaNet, True in GatedDeltaNet).
//
// Per (batch, head), positions t = 0..T-1, state S (hs x hs, S_{-1} = 0):
//   qh_t = s_q q_t / sqrt(|q_t|^2 + 1e-6),  kh_t = k_t / sqrt(|k_t|^2 + 1e-6)
//          (after rope/xpos when enabled; s_q = hs^-1/2, fla's scale, or 1 under
//          attn.q_scale = one)
//   beta_t  = sigmoid(w_beta,h . x_t + b_beta,h)               (x_t: the block input, dim C)
//   alpha_t = 1                                                 (deltanet)
//   alpha_t = exp(-exp(A_log,h) softplus(w_a,h . x_t + dt_b,h)) (gated_deltanet, in (0, 1))
//   S_t = alpha_t S_{t-1} (I - beta_t kh_t kh_t^T) + beta_t v_t kh_t^T ,   o_t = S_t qh_t
// Under pos_encoding = alibi alpha_t also carries exp(-m_h) (the ALiBi slope as a fixed decay:
// in the quadratic form below this is the bias exp(-m_h (t - j)), as linear attention uses it).
// Output norm (attn.o_norm; attention/deltanet_onorm.c), per head on obar_t = S_t qh_t:
//   rms   (deltanet's default, fla's RMSNorm): o = w * obar / sqrt(mean(obar^2) + 1e-5)
//   gated (gated_deltanet's default, fla's FusedRMSNormGated with g_proj): o = w * obar /
//         sqrt(mean(obar^2) + 1e-5) * silu(x_t W_g^T)
//   none  o = obar (the earlier attnlab form; with attn.q_scale = one it is the whole earlier
//         layer, whose head outputs are sqrt(hs) times those of the scaled form)
// With a norm the layer's output does not depend on the scale of obar (up to the eps), so
// q_scale matters only under o_norm = none.
// Deviations from fla's default layers: the SiLU on q, k, v and the short convolutions are not
// part of this layer (attnlab's layer receives q, k, v from the shared c_attn projection); beta
// has a bias beta_b; gated_deltanet's A_log and dt_b start at constants (fla: A ~ U(0, 16), dt
// log-uniform in [1e-3, 0.1]) and its value heads have size hs (fla: expand_v = 2).
//
// Quadratic (masked) form, which att reports (the memory read obar, before the output norm):
// S_t is linear in v, so obar_t = sum_{j<=t} A_tj v_j
//   A_tj = beta_j kh_j^T (alpha_{j+1} M_{j+1}) ... (alpha_t M_t) qh_t ,  M_i = I - beta_i kh_i
//   kh_i^T
// computed per row by w = qh_t; for j = t..0: A_tj = beta_j kh_j . w, w <- alpha_j M_j w
// (O(T^2 hs) per head, as the score matrix of softmax attention). Rows do not sum to 1 and A can
// be negative. The tests check o (recurrent) against A V (quadratic) on the same inputs.
//
// Backward (reverse sweep, dS_T = 0; u = S_{t-1} kh_t, y = dS kh_t with dS = dS_t; do_t the
// gradient of obar_t, after the output norm's VJP):
//   dS  += do_t qh_t^T ;  dqh_t = S_t^T do_t
//   dv_t = beta_t y ;  dbeta_t = y . (v_t - alpha_t u)
//   dkh_t = beta_t dS^T (v_t - alpha_t u) - alpha_t beta_t S_{t-1}^T y
//   dalpha_t = <dS, S_{t-1}> - beta_t u . y
//   dS_{t-1} = alpha_t (dS - beta_t y kh_t^T)
// from S_t = alpha P + beta v k^T, P = S_{t-1} M (M symmetric): dP = alpha dS, dS_{t-1} = dP M,
// dM = S_{t-1}^T dP, dbeta -= <dM, k k^T>, dk -= beta (dM + dM^T) k. Then the L2 norm
// dq = s_q (dqh - qh^ (qh^ . dqh)) / sqrt(|q|^2 + 1e-6) (qh^ = qh / s_q); dz_beta = dbeta beta (1 -
// beta); for the gate, g = -exp(A_log) softplus(z_a): dg = dalpha alpha, dA_log += dg g, dz_a = -dg
// exp(A_log) sigmoid(z_a); dw += dz x_t, db += dz, dx_t += dz w (per head). Two exact forms of the
// same function, chosen by attn.chunk (integer 0..64; default 16, the fastest of 0, 16, 32, 64 at T
// = 256, docs/variants.md):
//   chunk = 0   the recurrence above step by step; the backward recomputes the states
//               S_{-1..T-1} of one (b, h) into per-thread scratch ((T + 1) hs^2 floats) and runs
//               the reverse sweep, O(T hs^2) per head in vector loops; att by the per-row sweep
//               for A_tj (O(T^2 hs)).
//   chunk = C   the chunked WY form of attention/deltanet_chunk.c (math there): per chunk of C
//               tokens the UT transform turns the C steps into GEMMs through real_gemm, and the
//               state passes between chunks; the backward is the hand-written VJP of that form
//               (chunk-entry states replayed, ceil(T/C) hs^2 floats). att is the same chunked
//               form run on v = the T x T identity (o_t is linear in v), also GEMMs. C >= T is
//               one chunk; C = 1 is the recurrence again, in matrix form.
// The two agree to rounding (tests/test_deltanet.c: outputs, att and every gradient).
// The scalar gate derivatives are taken in log space: dz_a = -dlog(alpha) e^A_log sigmoid(z_a),
// dA_log = dlog(alpha) g (dlog(alpha) = dalpha alpha in the recurrent sweep).
// Parameter gradients: dz per (b, h, t) in the cache, then reduced per head over (b, t) in index
// order, and dx per row over heads in order: bit-identical for any thread count.
//
// Tensors (per layer): beta_w (NH, C) decay, N(0, 1/sqrt(3C)); beta_b (NH) 0 (beta starts near
// 1/2). gated_deltanet adds a_w (NH, C) decay, N(0, 1/sqrt(3C)); dt_b (NH) = softplus^-1(0.05)
// and A_log (NH) = 0 (alpha starts near exp(-0.05) = 0.95), no decay. The output norm adds
// o_norm_w (hs) = 1, no decay, shared by the heads (rms, gated), and g_w (C, C) decay, N(0, 0.02)
// (gated).
// Cache: qh, kh (B,NH,T,hs); rq, rk, beta, alpha, z_a, dz_beta, dz_a, dg g, log alpha (B,NH,T);
// the output norm's obar, dobar (B,T,C), r (B,T,NH) and (gated) G, dG (B,T,C).
#include <math.h>
#include <string.h>

#include "attention/layer.h"
#include "attention/deltanet_chunk.h"
#include "attention/deltanet_onorm.h"

#define DN_EPS ((real)1e-6)

enum { HP_CHUNK, HP_QSCALE, HP_ONORM, N_HP };
enum { QS_RSQRT, QS_ONE };
enum { ON_RMS, ON_GATED, ON_NONE };

#define DN_HP_CHUNK                                                                                \
    [HP_CHUNK] = {"chunk",                                                                         \
                  16.0f,                                                                           \
                  0.0f,                                                                            \
                  64.0f,                                                                           \
                  NULL,                                                                            \
                  "chunk length C of the WY form (integer; 0 = the step-by-step recurrence)"},     \
    [HP_QSCALE] = {                                                                                \
        "q_scale",   QS_RSQRT,                                                                     \
        0,           0,                                                                            \
        "rsqrt|one", "queries times hs^-1/2 after the L2 norm (flash-linear-attention) or not"}
#define DN_HP_ONORM(DEF)                                                                           \
    [HP_ONORM] = {"o_norm",                                                                        \
                  DEF,                                                                             \
                  0,                                                                               \
                  0,                                                                               \
                  "rms|gated|none",                                                                \
                  "per-head output norm: RMSNorm with a learned weight, the same times "           \
                  "silu(x W_g^T) (fla's FusedRMSNormGated), or none"}

static const AttnHParamSpec DN_HP[N_HP] = {DN_HP_CHUNK, DN_HP_ONORM(ON_RMS)};
static const AttnHParamSpec GDN_HP[N_HP] = {DN_HP_CHUNK, DN_HP_ONORM(ON_GATED)};

static int dn_onorm(const AttnHParams* hp) {
    return (int)hp->v[HP_ONORM];
}

static real dn_qscale(const AttnLayer* L) {
    return (int)L->hp->v[HP_QSCALE] == QS_RSQRT ? 1.0f / real_sqrt((real)L->d.hs) : 1.0f;
}

// chunk length of the layer: 0 (recurrent) or >= 1
static int dn_chunk(const AttnLayer* L) {
    return (int)(L->hp->v[HP_CHUNK] + 0.5f);
}

enum { T_BW, T_BB, T_AW, T_DTB, T_ALOG };

static int dn_gated(const AttnLayer* L);

// the output norm's tensors after the n memory tensors: "o_norm_w" (hs), fla's RMSNorm weight
// (init 1, no decay), and under o_norm = gated "g_w" (C, C), its g_proj (decay, N(0, 0.02))
static int dn_onorm_tensors(AttnTensorSpec* out, int n, const AttnDims* d, const AttnHParams* hp) {
    if (dn_onorm(hp) == ON_NONE) return n;
    out[n++] = (AttnTensorSpec){.name = "o_norm_w",
                                .ndim = 1,
                                .shape = {d->hs},
                                .decay = 0,
                                .init = ATTN_INIT_CONST,
                                .init_value = 1.0f};
    if (dn_onorm(hp) != ON_GATED) return n;
    out[n++] = (AttnTensorSpec){.name = "g_w",
                                .ndim = 2,
                                .shape = {d->C, d->C},
                                .decay = 1,
                                .init = ATTN_INIT_NORMAL,
                                .init_value = 0.02f};
    return n;
}

static int dn_tensors_common(AttnTensorSpec* out, const AttnDims* d, int gated) {
    const float std = 1.0f / sqrtf(3.0f * (float)d->C);
    out[T_BW] = (AttnTensorSpec){.name = "beta_w",
                                 .ndim = 2,
                                 .shape = {d->NH, d->C},
                                 .decay = 1,
                                 .init = ATTN_INIT_NORMAL,
                                 .init_value = std};
    out[T_BB] = (AttnTensorSpec){
        .name = "beta_b", .ndim = 1, .shape = {d->NH}, .decay = 0, .init = ATTN_INIT_CONST};
    if (!gated) return 2;
    out[T_AW] = (AttnTensorSpec){.name = "a_w",
                                 .ndim = 2,
                                 .shape = {d->NH, d->C},
                                 .decay = 1,
                                 .init = ATTN_INIT_NORMAL,
                                 .init_value = std};
    out[T_DTB] = (AttnTensorSpec){.name = "dt_b",
                                  .ndim = 1,
                                  .shape = {d->NH},
                                  .decay = 0,
                                  .init = ATTN_INIT_CONST,
                                  .init_value = logf(expm1f(0.05f))};
    out[T_ALOG] = (AttnTensorSpec){
        .name = "A_log", .ndim = 1, .shape = {d->NH}, .decay = 0, .init = ATTN_INIT_CONST};
    return 5;
}

static int deltanet_tensors(AttnTensorSpec* out, const AttnDims* d, const AttnHParams* hp) {
    return dn_onorm_tensors(out, dn_tensors_common(out, d, 0), d, hp);
}

static int gated_deltanet_tensors(AttnTensorSpec* out, const AttnDims* d, const AttnHParams* hp) {
    return dn_onorm_tensors(out, dn_tensors_common(out, d, 1), d, hp);
}

// per-thread scratch: forward the state S (hs, hs) and two hs vectors; backward every step's
// state (T + 2) hs^2 and six hs vectors
// Per-thread scratch floats of the forward and backward, for chunk size `chunk` (0: recurrent).
static size_t dn_fwd_scratch(const AttnDims* d, int chunk) {
    const int T = d->T, hs = d->hs;
    size_t need = (size_t)hs * hs + 2 * (size_t)hs;
    if (chunk > 0) {
        const size_t fo = dn_chunk_fwd_floats(T, hs, hs, chunk); // outputs: dv = hs
        const size_t fa = dn_chunk_fwd_floats(T, hs, T, chunk);  // att: dv = T
        need = fo > need ? fo : need;
        need = fa > need ? fa : need;
    }
    return need;
}

static size_t dn_bwd_scratch(const AttnDims* d, int chunk) {
    const int T = d->T, hs = d->hs;
    return chunk > 0 ? dn_chunk_bwd_floats(T, hs, chunk) + 2 * (size_t)T * hs + 2 * (size_t)T
                     : ((size_t)T + 2) * ((size_t)hs * hs) + 6 * (size_t)hs;
}

static size_t dn_scratch(const AttnDims* d, const AttnHParams* hp) {
    const int chunk = (int)(hp->v[HP_CHUNK] + 0.5f);
    const size_t f = dn_fwd_scratch(d, chunk), b = dn_bwd_scratch(d, chunk);
    return f > b ? f : b;
}

// the output norm's cache: obar, dobar (B,T,C), r (B,T,NH); gated adds G, dG (B,T,C)
static size_t dn_onorm_floats(const AttnDims* d, const AttnHParams* hp) {
    const size_t BT = (size_t)d->B * d->T, BTC = BT * d->C;
    if (dn_onorm(hp) == ON_NONE) return 0;
    return 2 * BTC + BT * d->NH + (dn_onorm(hp) == ON_GATED ? 2 * BTC : 0);
}

static size_t dn_cache_floats(const AttnDims* d, const AttnHParams* hp) {
    const size_t BHT = (size_t)d->B * d->NH * d->T;
    return 2 * BHT * d->hs + 9 * BHT + dn_onorm_floats(d, hp);
}

typedef struct {
    real *qh, *kh, *rq, *rk, *beta, *alpha, *za, *dzb, *dza, *dgg, *la;
    real *obar, *dobar, *r, *G, *dG; // the output norm (NULL under o_norm = none)
} DnCache;

static DnCache dn_cache(const AttnLayer* L) {
    const size_t BHT = (size_t)L->d.B * L->d.NH * L->d.T;
    DnCache k;
    k.qh = L->cache;
    k.kh = k.qh + BHT * L->d.hs;
    k.rq = k.kh + BHT * L->d.hs;
    k.rk = k.rq + BHT;
    k.beta = k.rk + BHT;
    k.alpha = k.beta + BHT;
    k.za = k.alpha + BHT;
    k.dzb = k.za + BHT;
    k.dza = k.dzb + BHT;
    k.dgg = k.dza + BHT;
    k.la = k.dgg + BHT;
    k.obar = k.dobar = k.r = k.G = k.dG = NULL;
    if (dn_onorm(L->hp) != ON_NONE) {
        const size_t BTC = (size_t)L->d.B * L->d.T * L->d.C;
        k.obar = k.la + BHT;
        k.dobar = k.obar + BTC;
        k.r = k.dobar + BTC;
        if (dn_onorm(L->hp) == ON_GATED) {
            k.G = k.r + (size_t)L->d.B * L->d.T * L->d.NH;
            k.dG = k.G + BTC;
        }
    }
    return k;
}

// the output norm of layer L over cache k (tensors after the n memory tensors)
static DnONorm dn_onorm_of(const AttnLayer* L, const DnCache* k) {
    const int n = dn_gated(L) ? 5 : 2;
    DnONorm o = {.B = L->d.B,
                 .T = L->d.T,
                 .C = L->d.C,
                 .NH = L->d.NH,
                 .hs = L->d.hs,
                 .gated = dn_onorm(L->hp) == ON_GATED,
                 .nthreads = attn_workspace_threads(L->ws),
                 .x = L->x,
                 .obar = k->obar,
                 .w = L->tp[n],
                 .Wg = L->tp[n + 1],
                 .r = k->r,
                 .G = k->G,
                 .out = L->out,
                 .dout = L->dout,
                 .dobar = k->dobar,
                 .dG = k->dG,
                 .dw = L->dtp[n],
                 .dWg = L->dtp[n + 1],
                 .dx = L->dx};
    return o;
}

static real dn_softplus(real z) {
    return z > 0.0f ? z + real_log1p(real_exp(-z)) : real_log1p(real_exp(z));
}

static real dn_sigmoid(real z) {
    return 1.0f / (1.0f + real_exp(-z));
}

// y (n) = sc x / sqrt(|x|^2 + eps); returns the factor 1 / sqrt(|x|^2 + eps)
static real dn_l2(real* y, const real* x, int n, real sc) {
    real s = DN_EPS;
    for (int i = 0; i < n; i++)
        s += x[i] * x[i];
    const real r = 1.0f / real_sqrt(s);
    for (int i = 0; i < n; i++)
        y[i] = x[i] * r * sc;
    return r;
}

static real dn_dot(const real* a, const real* b, int n) {
    real s = 0.0f;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

// S (hs x hs, row i = value channel) <- alpha S (I - beta k k^T) + beta v k^T; u: hs scratch
static void dn_step(real* S, const real* k, const real* v, real alpha, real beta, real* u, int hs) {
    for (int i = 0; i < hs; i++)
        u[i] = dn_dot(S + (size_t)i * hs, k, hs);
    for (int i = 0; i < hs; i++) {
        real* Si = S + (size_t)i * hs;
        const real c = beta * v[i] - alpha * beta * u[i];
        for (int j = 0; j < hs; j++)
            Si[j] = alpha * Si[j] + c * k[j];
    }
}

static void dn_forward(AttnLayer* L) {
    const AttnDims* d = &L->d;
    const int B = d->B, T = d->T, NH = d->NH, hs = d->hs, C = d->C;
    const int gated = dn_gated(L);
    AttnCore c = attn_layer_core(L);
    attn_pos_forward(&c, L, L->qk_pos);
    DnCache k = dn_cache(L);
    const int chunk = dn_chunk(L);
    const real qsc = dn_qscale(L);
    real* obar = k.obar ? k.obar : L->out; // the memory read, before the output norm
    attn_workspace_expect(L->ws, dn_fwd_scratch(&L->d, chunk));
#pragma omp parallel for collapse(2) schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            real* S = attn_thread_scratch(L->ws);
            real* u = S + (size_t)hs * hs;
            real* w = u + hs;
            const size_t bh = (size_t)b * NH + h, bt = (size_t)b * T;
            real* qh = k.qh + bh * T * hs;
            real* kh = k.kh + bh * T * hs;
            real* beta = k.beta + bh * T;
            real* alpha = k.alpha + bh * T;
            const real decay = c.score_bias_slopes ? real_exp(-(real)c.score_bias_slopes[h]) : 1.0f;
            for (int t = 0; t < T; t++) {
                const real* x = L->x + (bt + t) * (size_t)C;
                k.rq[bh * T + t] =
                    dn_l2(qh + (size_t)t * hs, c.q + (bt + t) * c.ldq + (size_t)h * hs, hs, qsc);
                k.rk[bh * T + t] =
                    dn_l2(kh + (size_t)t * hs, c.k + (bt + t) * c.ldk + (size_t)h * hs, hs, 1.0f);
                beta[t] = dn_sigmoid(L->tp[T_BB][h] + dn_dot(L->tp[T_BW] + (size_t)h * C, x, C));
                alpha[t] = decay;
                k.la[bh * T + t] = c.score_bias_slopes ? -(real)c.score_bias_slopes[h] : 0.0f;
                if (gated) {
                    const real za = L->tp[T_DTB][h] + dn_dot(L->tp[T_AW] + (size_t)h * C, x, C);
                    const real g = -real_exp(L->tp[T_ALOG][h]) * dn_softplus(za);
                    k.za[bh * T + t] = za;
                    alpha[t] *= real_exp(g);
                    k.la[bh * T + t] += g;
                }
            }
            if (chunk > 0) { // the WY form: outputs with v, the weights att with v_t = e_t
                DnSeq sq = {.T = T,
                            .hs = hs,
                            .q = qh,
                            .k = kh,
                            .v = c.v + bt * c.ldv + (size_t)h * hs,
                            .ldv = c.ldv,
                            .dv = hs,
                            .beta = beta,
                            .la = k.la + bh * T};
                dn_chunk_forward(&sq, chunk, obar + bt * (size_t)C + (size_t)h * hs, (size_t)C, S);
                sq.v = NULL;
                sq.dv = T;
                real* A = L->att + bh * T * T;
                dn_chunk_forward(&sq, chunk, A, (size_t)T, S);
                for (int t = 0; t + 1 < T; t++)
                    memset(A + (size_t)t * T + t + 1, 0, sizeof(real) * (size_t)(T - t - 1));
                continue;
            }
            // recurrent form: o_t = S_t qh_t
            memset(S, 0, sizeof(real) * (size_t)hs * hs);
            for (int t = 0; t < T; t++) {
                dn_step(S, kh + (size_t)t * hs, c.v + (bt + t) * c.ldv + (size_t)h * hs, alpha[t],
                        beta[t], u, hs);
                real* o = obar + (bt + t) * (size_t)C + (size_t)h * hs;
                for (int i = 0; i < hs; i++)
                    o[i] = dn_dot(S + (size_t)i * hs, qh + (size_t)t * hs, hs);
            }
            // quadratic form for att: A_tj = beta_j kh_j . (alpha_{j+1} M_{j+1} ... alpha_t M_t
            // qh_t)
            real* A = L->att + bh * T * T;
            for (int t = 0; t < T; t++) {
                real* row = A + (size_t)t * T;
                memcpy(w, qh + (size_t)t * hs, sizeof(real) * (size_t)hs);
                for (int j = t; j >= 0; j--) {
                    const real* kj = kh + (size_t)j * hs;
                    const real kw = dn_dot(kj, w, hs);
                    row[j] = beta[j] * kw;
                    for (int i = 0; i < hs; i++)
                        w[i] = alpha[j] * (w[i] - beta[j] * kw * kj[i]);
                }
                memset(row + t + 1, 0, sizeof(real) * (size_t)(T - t - 1));
            }
        }
    }
    if (k.obar) {
        const DnONorm on = dn_onorm_of(L, &k);
        dn_onorm_forward(&on);
    }
}

// dx (n) += r (sc dy - y (y . dy) / sc): the VJP of y = sc x / sqrt(|x|^2 + eps), r = 1 /
// sqrt(...) (with yh = y / sc the unit vector: dx = sc r (dy - yh (yh . dy)))
static void dn_l2_back(real* dx, const real* dy, const real* y, real r, int n, real sc) {
    const real p = dn_dot(y, dy, n) / sc;
    for (int i = 0; i < n; i++)
        dx[i] += r * (sc * dy[i] - y[i] * p);
}

// the backward of one (b, h) through the chunked form (deltanet_chunk.c), then the L2 norms and
// the beta / gate pre-activations as in the recurrent backward (dg = dlog alpha directly)
static void dn_backward_chunked(const AttnLayer* L, const AttnCore* c, const DnCache* k,
                                const real* dout, int b, int h, int chunk) {
    const int T = L->d.T, NH = L->d.NH, hs = L->d.hs, C = L->d.C;
    const size_t bh = (size_t)b * NH + h, bt = (size_t)b * T;
    real* dqh = attn_thread_scratch(L->ws);
    real* dkh = dqh + (size_t)T * hs;
    real* dbeta = dkh + (size_t)T * hs;
    real* dla = dbeta + T;
    real* rest = dla + T;
    memset(dqh, 0, sizeof(real) * 2 * (size_t)T * hs);
    const DnSeq sq = {.T = T,
                      .hs = hs,
                      .q = k->qh + bh * T * hs,
                      .k = k->kh + bh * T * hs,
                      .v = c->v + bt * c->ldv + (size_t)h * hs,
                      .ldv = c->ldv,
                      .dv = hs,
                      .beta = k->beta + bh * T,
                      .la = k->la + bh * T};
    dn_chunk_backward(&sq, chunk, dout + bt * (size_t)C + (size_t)h * hs, (size_t)C, dqh, dkh,
                      c->dv + bt * c->ldv + (size_t)h * hs, dbeta, dla, rest);
    const int gated = dn_gated(L);
    const real eA = gated ? real_exp(L->tp[T_ALOG][h]) : 0.0f;
    for (int t = 0; t < T; t++) {
        const size_t i = bh * T + t;
        dn_l2_back(c->dq + (bt + t) * c->ldq + (size_t)h * hs, dqh + (size_t)t * hs,
                   sq.q + (size_t)t * hs, k->rq[i], hs, dn_qscale(L));
        dn_l2_back(c->dk + (bt + t) * c->ldk + (size_t)h * hs, dkh + (size_t)t * hs,
                   sq.k + (size_t)t * hs, k->rk[i], hs, 1.0f);
        const real be = k->beta[i];
        k->dzb[i] = dbeta[t] * be * (1.0f - be);
        if (gated) { // log alpha = -slope + g, g = -eA softplus(z_a)
            const real za = k->za[i];
            k->dza[i] = -dla[t] * eA * dn_sigmoid(za);
            k->dgg[i] = dla[t] * (-eA * dn_softplus(za));
        }
    }
}

static void dn_backward(AttnLayer* L) {
    const AttnDims* d = &L->d;
    const int B = d->B, T = d->T, NH = d->NH, hs = d->hs, C = d->C;
    const int gated = dn_gated(L);
    AttnCore c = attn_layer_core(L);
    AttnPosSave save;
    attn_pos_backward_begin(&c, &save, L, L->qk_pos);
    DnCache k = dn_cache(L);
    const size_t hs2 = (size_t)hs * hs;
    const int chunk = dn_chunk(L);
    const real qsc = dn_qscale(L);
    const real* dout = L->dout; // the gradient of the memory read
    if (k.obar) {               // through the output norm first
        const DnONorm on = dn_onorm_of(L, &k);
        dn_onorm_backward(&on);
        dout = k.dobar;
    }
    attn_workspace_expect(L->ws, dn_bwd_scratch(&L->d, chunk));
#pragma omp parallel for collapse(2) schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            if (chunk > 0) {
                dn_backward_chunked(L, &c, &k, dout, b, h, chunk);
                continue;
            }
            real* Sall = attn_thread_scratch(L->ws); // Sall + (t+1) hs^2 = S_t, Sall = S_{-1}
            real* dS = Sall + ((size_t)T + 1) * hs2;
            real* u = dS + hs2;
            real* y = u + hs;
            real* r = y + hs;
            real* dqh = r + hs;
            real* dkh = dqh + hs;
            real* tmp = dkh + hs;
            const size_t bh = (size_t)b * NH + h, bt = (size_t)b * T;
            const real* qh = k.qh + bh * T * hs;
            const real* kh = k.kh + bh * T * hs;
            const real* beta = k.beta + bh * T;
            const real* alpha = k.alpha + bh * T;
            memset(Sall, 0, sizeof(real) * hs2);
            for (int t = 0; t < T; t++) {
                memcpy(Sall + (size_t)(t + 1) * hs2, Sall + (size_t)t * hs2, sizeof(real) * hs2);
                dn_step(Sall + (size_t)(t + 1) * hs2, kh + (size_t)t * hs,
                        c.v + (bt + t) * c.ldv + (size_t)h * hs, alpha[t], beta[t], tmp, hs);
            }
            memset(dS, 0, sizeof(real) * hs2);
            const real eA = gated ? real_exp(L->tp[T_ALOG][h]) : 0.0f;
            for (int t = T - 1; t >= 0; t--) {
                const real* St = Sall + (size_t)(t + 1) * hs2;
                const real* Sp = Sall + (size_t)t * hs2;
                const real* q = qh + (size_t)t * hs;
                const real* kk = kh + (size_t)t * hs;
                const real* v = c.v + (bt + t) * c.ldv + (size_t)h * hs;
                const real* dO = dout + (bt + t) * (size_t)C + (size_t)h * hs;
                const real a = alpha[t], be = beta[t];
                // dS += do q^T ; dqh = S_t^T do
                for (int j = 0; j < hs; j++)
                    dqh[j] = 0.0f;
                for (int i = 0; i < hs; i++) {
                    real* dSi = dS + (size_t)i * hs;
                    const real* Si = St + (size_t)i * hs;
                    for (int j = 0; j < hs; j++) {
                        dSi[j] += dO[i] * q[j];
                        dqh[j] += Si[j] * dO[i];
                    }
                }
                // u = S_{t-1} k, y = dS k, r = v - alpha u
                real dalpha = 0.0f;
                for (int i = 0; i < hs; i++) {
                    u[i] = dn_dot(Sp + (size_t)i * hs, kk, hs);
                    y[i] = dn_dot(dS + (size_t)i * hs, kk, hs);
                    r[i] = v[i] - a * u[i];
                    dalpha += dn_dot(dS + (size_t)i * hs, Sp + (size_t)i * hs, hs);
                }
                dalpha -= be * dn_dot(u, y, hs);
                const real dbeta = dn_dot(y, r, hs);
                real* dv = c.dv + (bt + t) * c.ldv + (size_t)h * hs;
                for (int i = 0; i < hs; i++)
                    dv[i] += be * y[i];
                // dkh = beta dS^T r - alpha beta S_{t-1}^T y
                for (int j = 0; j < hs; j++)
                    dkh[j] = 0.0f;
                for (int i = 0; i < hs; i++) {
                    const real* dSi = dS + (size_t)i * hs;
                    const real* Spi = Sp + (size_t)i * hs;
                    const real ci = be * r[i], di = a * be * y[i];
                    for (int j = 0; j < hs; j++)
                        dkh[j] += ci * dSi[j] - di * Spi[j];
                }
                // dS_{t-1} = alpha (dS - beta y k^T)
                for (int i = 0; i < hs; i++) {
                    real* dSi = dS + (size_t)i * hs;
                    const real ci = be * y[i];
                    for (int j = 0; j < hs; j++)
                        dSi[j] = a * (dSi[j] - ci * kk[j]);
                }
                dn_l2_back(c.dq + (bt + t) * c.ldq + (size_t)h * hs, dqh, q, k.rq[bh * T + t], hs,
                           qsc);
                dn_l2_back(c.dk + (bt + t) * c.ldk + (size_t)h * hs, dkh, kk, k.rk[bh * T + t], hs,
                           1.0f);
                k.dzb[bh * T + t] = dbeta * be * (1.0f - be);
                if (gated) {
                    // alpha = decay exp(g), g = -eA softplus(z_a): dz_a = -dalpha alpha eA
                    // sigma(z_a)
                    const real za = k.za[bh * T + t];
                    k.dza[bh * T + t] = -dalpha * a * eA * dn_sigmoid(za);
                    k.dgg[bh * T + t] = dalpha * a * (-eA * dn_softplus(za)); // dA_log: dg g
                }
            }
        }
    }
    attn_pos_backward_end(&c, &save, L);
    // dx per row over heads in order
    const long BT = (long)B * T;
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (long rr = 0; rr < BT; rr++) {
        const long b = rr / T, t = rr % T;
        real* dx = L->dx + (size_t)rr * C;
        for (int h = 0; h < NH; h++) {
            const size_t i = ((size_t)b * NH + h) * T + (size_t)t;
            const real* bw = L->tp[T_BW] + (size_t)h * C;
            for (int q = 0; q < C; q++)
                dx[q] += k.dzb[i] * bw[q];
            if (gated) {
                const real* aw = L->tp[T_AW] + (size_t)h * C;
                for (int q = 0; q < C; q++)
                    dx[q] += k.dza[i] * aw[q];
            }
        }
    }
    // parameter gradients per head over (b, t) in order
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int h = 0; h < NH; h++) {
        real db = 0.0f, ddt = 0.0f, dA = 0.0f;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                const size_t i = ((size_t)b * NH + h) * T + (size_t)t;
                const real* x = L->x + ((size_t)b * T + t) * C;
                real* dbw = L->dtp[T_BW] + (size_t)h * C;
                for (int q = 0; q < C; q++)
                    dbw[q] += k.dzb[i] * x[q];
                db += k.dzb[i];
                if (gated) {
                    real* daw = L->dtp[T_AW] + (size_t)h * C;
                    for (int q = 0; q < C; q++)
                        daw[q] += k.dza[i] * x[q];
                    ddt += k.dza[i];
                    dA += k.dgg[i];
                }
            }
        L->dtp[T_BB][h] += db;
        if (gated) {
            L->dtp[T_DTB][h] += ddt;
            L->dtp[T_ALOG][h] += dA;
        }
    }
}

static const char DN_FORMULA[] = "S_t = alpha_t S_{t-1}(I - beta_t k_t k_t^T) + beta_t v_t k_t^T, "
                                 "o_t = S_t q_t (q, k L2-normalised)";

// The two variants share every hook (dn_gated tells them apart inside); only the name, the
// source and the tensor list differ.
#define DN_VARIANT(NAME, SOURCE, REF, DEV, TENSORS, HP)                                            \
    {                                                                                              \
        .name = NAME, .formula = DN_FORMULA, .source = SOURCE, .reference = REF,                   \
        .deviations = DEV, .rows_sum_to_one = 0, .shift_invariant = 0, .layer_tensors = TENSORS,   \
        .layer_cache_floats = dn_cache_floats, .layer_scratch_floats = dn_scratch,                 \
        .layer_forward = dn_forward, .layer_backward = dn_backward, .hparams = HP,                 \
        .n_hparams = N_HP, .ignores_inner = 1,                                                     \
    }

#define DN_DEV_COMMON                                                                              \
    "no SiLU on q, k, v and no short convolutions (q, k, v come from the shared c_attn); "         \
    "beta has a bias; "

const AttnVariant attn_deltanet =
    DN_VARIANT("deltanet", "Schlag 2021 delta rule; Yang 2024 DeltaNet (alpha = 1) (B9)",
               "fla-org/flash-linear-attention:fla/layers/delta_net.py (DeltaNet, defaults), "
               "fla/ops/delta_rule/naive.py",
               DN_DEV_COMMON "attn.q_scale = one, attn.o_norm = none: the earlier attnlab form",
               deltanet_tensors, DN_HP);

const AttnVariant attn_gated_deltanet = DN_VARIANT(
    "gated_deltanet",
    "Yang, Kautz, Hatamizadeh 2024 Gated DeltaNet, alpha_t = exp(-e^A softplus(.)) (B9)",
    "fla-org/flash-linear-attention:fla/layers/gated_deltanet.py (GatedDeltaNet, defaults), "
    "fla/ops/gated_delta_rule/naive.py",
    DN_DEV_COMMON "A_log = 0 and dt_b = softplus^-1(0.05) at init (fla: A ~ U(0, 16), dt "
                  "log-uniform in [1e-3, 0.1]); value heads of size hs (fla: expand_v = 2); "
                  "attn.q_scale = one, attn.o_norm = none: the earlier attnlab form",
    gated_deltanet_tensors, GDN_HP);

static int dn_gated(const AttnLayer* L) {
    return L->v == &attn_gated_deltanet;
}
