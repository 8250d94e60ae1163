// attention/mta.c: Multi-Token Attention: a causal key-query convolution on the logits before
// the softmax, a head-mixing convolution on the weights after it, and a per-head RMS (group)
// normalisation with depth scaling on the head outputs.
//
// Source: O. Golovneva, T. Wang, J. Weston, S. Sukhbaatar, "Multi-Token Attention", arXiv
// 2504.00927 (Eq. 1-2 and Sec. 3; VARIANTS.md B4), checked against the authors' code
// (facebookresearch/RAM, projects/mta): identity init of both kernels, keys padded on both
// sides, zero-mask before and -inf mask after the convolution. The paper's default placement
// is used: key-query convolution pre-softmax, head mixing post-softmax.
//
// Per batch item, head h, with S_h = scale q_h k_h^T (+ ALiBi) on rotated q, k under rope:
//   S0_h[i,j] = S_h[i,j] for j <= i, 0 above the diagonal          (Mask_0)
//   L_h[i,j]  = sum_{a=0}^{c_q-1} sum_{b=-w}^{w} theta_h[a, b] S0_h[i-a, j-b]   for j <= i
//               (terms with i-a < 0 or j-b < 0 are 0; S0 is 0 wherever j-b > i-a)
//   P_h[i,.]  = softmax(L_h[i, 0..i])                              (Mask_-inf: keys j <= i)
//   W_k       = sum_{m in G(k)} M[k, m] P_m      (G(k): the c_h consecutive heads of k's group)
//   U_k       = W_k v_k ;   o_k,t = (1 - lambda_l) g (.) U_k,t / sqrt(mean_e U_k,te^2 + 1e-5)
// with key offsets b = -w..w (c_k = 2w + 1 keys centred on j, as the paper's "both" padding) and
// query offsets a = 0..c_q-1 (the current and earlier queries). Causality: L[i,j] reads only
// S0[i', j'] with i' <= i and j' <= i' (Mask_0), i.e. q_i' . k_j' for tokens j' <= i' <= i: a
// future key never reaches row i although offsets b < 0 look right of j. lambda_l = 0.8 - 0.6
// exp(-0.3 l) for the layer index l = 0, 1, ... (the depth scaling of the paper's group norm,
// taken from the DIFF Transformer); g (hs) is shared by the heads of a layer (RMSNorm over a
// head's hs channels, as the authors' code).
//
// Parameters (per layer, no weight decay: decay would pull towards the identity):
//   theta (NH, c_q, c_k): the kernel minus the identity, theta_h = e_{a=0,b=0} + theta_h, init 0
//   mix (NH, c_h): M[k, m] = [m = k] + mix[k, m - g0(k)] (g0: the first head of k's group), init 0
//   gn_w (hs): g, init 1
// At init L = S and W = P: the weights start as softmax attention. Hyperparameters: attn.cq = 6,
// attn.kw = 5 (c_k = 11), attn.ch = 2 (the paper's 6 x 11 kernel, heads mixed in pairs); a last
// group may hold fewer than c_h heads when c_h does not divide NH. The paper's gating of the
// group norm (an option of the authors' code) and its use in every 4th layer are not built:
// attention = mta applies in every layer.
// att holds W (what multiplies V): rows sum to sum_m M[k,m] (1 at init) and may be negative
// after training, so diagnostics treat mta as an unnormalised variant.
//
// Backward, per batch item, with n = U / r, r = sqrt(mean U^2 + eps), c = 1 - lambda_l:
//   dg += c sum_t dO (.) n ;  dn = c g (.) dO ;  dU = (dn - n mean(dn (.) n)) / r
//   dW_k = dU_k v_k^T (j <= i) ;  dv_k += W_k^T dU_k
//   dP_m = sum_{k: m in G(k)} M[k, m] dW_k ;  dmix[k, m - g0] += <dW_k, P_m>
//   dL_h = P_h (.) (dP_h - <P_h, dP_h>) per row (softmax VJP)
//   dS0_h[i-a, j-b] += theta_h[a,b] dL_h[i,j] ;  dtheta_h[a,b] += dL_h[i,j] S0_h[i-a, j-b]
//   dS_h = dS0_h on j <= i (0 above) ;  dq_h += scale dS_h k_h ;  dk_h += scale dS_h^T q_h
// Cost: the convolution is c_q c_k multiply-adds per causal entry and head, forward and twice in
// backward, in vector loops; with 6 x 11 it costs about as much as the q k^T product itself.
// Threading: parallel over batch items (heads mix); parameter gradients go to per-item slots,
// reduced over items in index order: identical results for any thread count.
// Cache: P (B,NH,T,T), U (B,T,C), 1/r (B,T,NH), the per-item gradient slots.
#include <math.h>
#include <string.h>

#include "attention/attention.h"
#include "attention/rowops.h"

#define MTA_EPS 1e-5f

enum { HP_CQ, HP_KW, HP_CH, N_HP };
enum { T_THETA, T_MIX, T_GNW, N_T };

static const AttnHParamSpec MTA_HP[N_HP] = {
    [HP_CQ] = {"cq", 6.0f, 1.0f, 32.0f, NULL, "query length c_q of the key-query kernel (integer)"},
    [HP_KW] = {"kw", 5.0f, 0.0f, 32.0f, NULL,
               "key half-width w of the kernel, c_k = 2w + 1 keys centred on j (integer)"},
    [HP_CH] = {"ch", 2.0f, 1.0f, 64.0f, NULL, "heads per head-mixing group c_h (integer)"},
};

typedef struct {
    int cq, w, ck, ch;
} MtaShape;

static MtaShape mta_shape(const AttnHParams* hp) {
    MtaShape s;
    s.cq = (int)(hp->v[HP_CQ] + 0.5f);
    s.w = (int)(hp->v[HP_KW] + 0.5f);
    s.ck = 2 * s.w + 1;
    s.ch = (int)(hp->v[HP_CH] + 0.5f);
    return s;
}

static int mta_tensors(AttnTensorSpec* out, const AttnDims* d, const AttnHParams* hp) {
    const MtaShape s = mta_shape(hp);
    out[T_THETA] = (AttnTensorSpec){.name = "theta",
                                    .ndim = 3,
                                    .shape = {d->NH, s.cq, s.ck},
                                    .decay = 0,
                                    .init = ATTN_INIT_ZERO};
    out[T_MIX] = (AttnTensorSpec){
        .name = "mix", .ndim = 2, .shape = {d->NH, s.ch}, .decay = 0, .init = ATTN_INIT_ZERO};
    out[T_GNW] = (AttnTensorSpec){.name = "gn_w",
                                  .ndim = 1,
                                  .shape = {d->hs},
                                  .decay = 0,
                                  .init = ATTN_INIT_CONST,
                                  .init_value = 1.0f};
    return N_T;
}

static size_t mta_slot(const AttnDims* d, const MtaShape* s) {
    return (size_t)d->NH * s->cq * s->ck + (size_t)d->NH * s->ch + (size_t)d->hs;
}

static size_t mta_cache_floats(const AttnDims* d, const AttnHParams* hp) {
    const MtaShape s = mta_shape(hp);
    const size_t BT = (size_t)d->B * d->T;
    return BT * d->NH * d->T + BT * d->C + BT * d->NH + (size_t)d->B * mta_slot(d, &s);
}

// Per-thread scratch of the forward (two T x T planes and a T x hs block) and of the backward
// ((2 NH + 3) T x T planes and a T x hs block), declared so the model reserves it at setup.
static size_t mta_fwd_scratch(const AttnDims* d) {
    return 2 * (size_t)d->T * d->T + (size_t)d->T * d->hs;
}

static size_t mta_bwd_scratch(const AttnDims* d) {
    return (2 * (size_t)d->NH + 3) * ((size_t)d->T * d->T) + (size_t)d->T * d->hs;
}

static size_t mta_scratch(const AttnDims* d, const AttnHParams* hp) {
    (void)hp;
    const size_t f = mta_fwd_scratch(d), b = mta_bwd_scratch(d);
    return f > b ? f : b;
}

// first head of the group of head k, and the group's size
static int mta_group(int k, int ch, int NH, int* size) {
    const int g0 = (k / ch) * ch;
    *size = g0 + ch <= NH ? ch : NH - g0;
    return g0;
}

// lambda_l of the depth scaling, as a factor c = 1 - lambda_l
static real mta_depth_scale(int layer) {
    return 1.0f - (0.8f - 0.6f * real_exp(-0.3f * (real)layer));
}

// S0 (T,T) = the scores of head h of item b with the entries above the diagonal zeroed
static void mta_masked_scores(real* S0, const AttnCore* c, const AttnDims* d, int b, int h) {
    const int T = d->T;
    rowops_head_scores(S0, c, d, b, h);
    for (int i = 0; i + 1 < T; i++)
        memset(S0 + (size_t)i * T + i + 1, 0, sizeof(real) * (size_t)(T - i - 1));
}

// the causal range of output keys j for row i, query offset a, key offset b: j <= i,
// 0 <= j - b <= i - a; returns 0 when empty
static int mta_range(int i, int a, int b, int* lo, int* hi) {
    *lo = b > 0 ? b : 0;
    *hi = i - a + b < i ? i - a + b : i;
    return *lo <= *hi;
}

// L (T,T) = conv(S0) on j <= i, with the kernel e_{0,0} + th (cq x ck)
static void mta_conv(real* L, const real* S0, const real* th, const MtaShape* s, int T) {
    memcpy(L, S0, sizeof(real) * (size_t)T * T); // the identity part
    for (int a = 0; a < s->cq; a++)
        for (int b = -s->w; b <= s->w; b++) {
            const real k = th[(size_t)a * s->ck + (b + s->w)];
            if (k == 0.0f) continue;
            for (int i = a; i < T; i++) {
                int lo, hi;
                if (!mta_range(i, a, b, &lo, &hi)) continue;
                real* Li = L + (size_t)i * T;
                const real* Si = S0 + (size_t)(i - a) * T;
                for (int j = lo; j <= hi; j++)
                    Li[j] += k * Si[j - b];
            }
        }
}

// dS0 (T,T) += conv^T(dL) ; dth (cq x ck) += the kernel gradient
static void mta_conv_backward(real* dS0, real* dth, const real* dL, const real* S0, const real* th,
                              const MtaShape* s, int T) {
    for (int i = 0; i < T; i++)
        for (int j = 0; j <= i; j++)
            dS0[(size_t)i * T + j] += dL[(size_t)i * T + j];
    for (int a = 0; a < s->cq; a++)
        for (int b = -s->w; b <= s->w; b++) {
            const size_t e = (size_t)a * s->ck + (b + s->w);
            const real k = th[e];
            real g = 0.0f;
            for (int i = a; i < T; i++) {
                int lo, hi;
                if (!mta_range(i, a, b, &lo, &hi)) continue;
                const real* dLi = dL + (size_t)i * T;
                const real* Si = S0 + (size_t)(i - a) * T;
                real* dSi = dS0 + (size_t)(i - a) * T;
                for (int j = lo; j <= hi; j++) {
                    g += dLi[j] * Si[j - b];
                    dSi[j - b] += k * dLi[j];
                }
            }
            dth[e] += g;
        }
}

static void mta_forward(AttnLayer* L) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH, hs = L->d.hs;
    const size_t TT = (size_t)T * T, C = (size_t)L->d.C;
    const MtaShape s = mta_shape(L->hp);
    AttnCore c = attn_layer_core(L);
    attn_pos_forward(&c, L, L->qk_pos);
    attn_workspace_reserve(L->ws, mta_fwd_scratch(&L->d));
    real* Pc = L->cache;
    real* Uc = Pc + (size_t)B * NH * TT;
    real* rc = Uc + (size_t)B * T * C;
    const real cs = mta_depth_scale(L->layer);
    const real* g = L->tp[T_GNW];
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        real* S0 = attn_thread_scratch(L->ws);
        real* Lg = S0 + TT;
        real* P = Pc + (size_t)b * NH * TT;
        for (int h = 0; h < NH; h++) {
            mta_masked_scores(S0, &c, &L->d, b, h);
            mta_conv(Lg, S0, L->tp[T_THETA] + (size_t)h * s.cq * s.ck, &s, T);
            for (int i = 0; i < T; i++) {
                real* Pi = P + h * TT + (size_t)i * T;
                rowops_softmax(Pi, Lg + (size_t)i * T, i + 1);
                memset(Pi + i + 1, 0, sizeof(real) * (size_t)(T - i - 1));
            }
        }
        real* W = L->att + (size_t)b * NH * TT;
        for (int k = 0; k < NH; k++) {
            int gn;
            const int g0 = mta_group(k, s.ch, NH, &gn);
            real* Wk = W + k * TT;
            memcpy(Wk, P + k * TT, sizeof(real) * TT);
            for (int m = 0; m < gn; m++) {
                const real mk = L->tp[T_MIX][(size_t)k * s.ch + m];
                if (mk == 0.0f) continue;
                const real* Pm = P + (g0 + m) * TT;
                for (size_t e = 0; e < TT; e++)
                    Wk[e] += mk * Pm[e];
            }
            const real* v = c.v + (size_t)b * T * c.ldv + (size_t)k * hs;
            real* U = Uc + (size_t)b * T * C + (size_t)k * hs;
            real_gemm(0, 0, T, hs, T, 1.0f, Wk, T, v, (int)c.ldv, 0.0f, U, (int)C);
            for (int t = 0; t < T; t++) {
                const real* Ut = U + (size_t)t * C;
                real ms = 0.0f;
                for (int e = 0; e < hs; e++)
                    ms += Ut[e] * Ut[e];
                const real r = 1.0f / real_sqrt(ms / (real)hs + MTA_EPS);
                rc[((size_t)b * T + t) * NH + k] = r;
                real* o = L->out + ((size_t)b * T + t) * C + (size_t)k * hs;
                for (int e = 0; e < hs; e++)
                    o[e] = cs * g[e] * Ut[e] * r;
            }
        }
    }
}

static void mta_backward(AttnLayer* L) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH, hs = L->d.hs;
    const size_t TT = (size_t)T * T, C = (size_t)L->d.C;
    const MtaShape s = mta_shape(L->hp);
    const size_t nth = (size_t)s.cq * s.ck, slot = mta_slot(&L->d, &s);
    AttnCore c = attn_layer_core(L);
    AttnPosSave save;
    attn_pos_backward_begin(&c, &save, L, L->qk_pos);
    attn_workspace_reserve(L->ws, mta_bwd_scratch(&L->d));
    const real* Pc = L->cache;
    const real* Uc = Pc + (size_t)B * NH * TT;
    const real* rc = Uc + (size_t)B * T * C;
    real* slots = (real*)rc + (size_t)B * T * NH;
    memset(slots, 0, sizeof(real) * slot * (size_t)B);
    const real cs = mta_depth_scale(L->layer);
    const real* g = L->tp[T_GNW];
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        real* X = attn_thread_scratch(L->ws); // dW (NH,T,T)
        real* Y = X + NH * TT;                // dP (NH,T,T)
        real *S0 = Y + NH * TT, *dL = S0 + TT, *dS = dL + TT, *dU = dS + TT;
        real* sl = slots + (size_t)b * slot;
        real *dth = sl, *dmix = sl + (size_t)NH * nth, *dg = dmix + (size_t)NH * s.ch;
        const real* P = Pc + (size_t)b * NH * TT;
        const real* W = L->att + (size_t)b * NH * TT;
        for (int k = 0; k < NH; k++) {
            // RMSNorm VJP into dU (T, hs), then dW_k = dU v^T, dv += W^T dU
            for (int t = 0; t < T; t++) {
                const real* Ut = Uc + ((size_t)b * T + t) * C + (size_t)k * hs;
                const real* dO = L->dout + ((size_t)b * T + t) * C + (size_t)k * hs;
                const real r = rc[((size_t)b * T + t) * NH + k];
                real* du = dU + (size_t)t * hs;
                real dot = 0.0f;
                for (int e = 0; e < hs; e++) {
                    const real n = Ut[e] * r;
                    dg[e] += cs * dO[e] * n;
                    du[e] = cs * g[e] * dO[e];
                    dot += du[e] * n;
                }
                dot /= (real)hs;
                for (int e = 0; e < hs; e++)
                    du[e] = (du[e] - Ut[e] * r * dot) * r;
            }
            const real* v = c.v + (size_t)b * T * c.ldv + (size_t)k * hs;
            real* dv = c.dv + (size_t)b * T * c.ldv + (size_t)k * hs;
            real_gemm(0, 1, T, T, hs, 1.0f, dU, hs, v, (int)c.ldv, 0.0f, X + k * TT, T);
            for (int i = 0; i + 1 < T; i++) // entries j > i carry no gradient
                memset(X + k * TT + (size_t)i * T + i + 1, 0, sizeof(real) * (size_t)(T - i - 1));
            real_gemm(1, 0, T, hs, T, 1.0f, W + k * TT, T, dU, hs, 1.0f, dv, (int)c.ldv);
        }
        // dP_m = dW_m + sum_k mix[k, m - g0] dW_k over the heads k of m's group
        memcpy(Y, X, sizeof(real) * NH * TT);
        for (int k = 0; k < NH; k++) {
            int gn;
            const int g0 = mta_group(k, s.ch, NH, &gn);
            for (int m = 0; m < gn; m++) {
                const real* Pm = P + (g0 + m) * TT;
                const real* Xk = X + k * TT;
                dmix[(size_t)k * s.ch + m] += rowops_dot(Xk, Pm, (int)TT);
                const real mk = L->tp[T_MIX][(size_t)k * s.ch + m];
                if (mk == 0.0f) continue;
                real* Ym = Y + (g0 + m) * TT;
                for (size_t e = 0; e < TT; e++)
                    Ym[e] += mk * Xk[e];
            }
        }
        for (int h = 0; h < NH; h++) {
            const real* Ph = P + h * TT;
            memset(dL, 0, sizeof(real) * TT);
            for (int i = 0; i < T; i++)
                rowops_softmax_backward(dL + (size_t)i * T, Y + h * TT + (size_t)i * T,
                                        Ph + (size_t)i * T, i + 1);
            mta_masked_scores(S0, &c, &L->d, b, h);
            memset(dS, 0, sizeof(real) * TT);
            mta_conv_backward(dS, dth + (size_t)h * nth, dL, S0, L->tp[T_THETA] + (size_t)h * nth,
                              &s, T);
            for (int i = 0; i + 1 < T; i++) // Mask_0: no gradient above the diagonal
                memset(dS + (size_t)i * T + i + 1, 0, sizeof(real) * (size_t)(T - i - 1));
            const real* q = c.q + (size_t)b * T * c.ldq + (size_t)h * hs;
            const real* kk = c.k + (size_t)b * T * c.ldk + (size_t)h * hs;
            real* dq = c.dq + (size_t)b * T * c.ldq + (size_t)h * hs;
            real* dk = c.dk + (size_t)b * T * c.ldk + (size_t)h * hs;
            real_gemm(0, 0, T, hs, T, c.scale, dS, T, kk, (int)c.ldk, 1.0f, dq, (int)c.ldq);
            real_gemm(1, 0, T, hs, T, c.scale, dS, T, q, (int)c.ldq, 1.0f, dk, (int)c.ldk);
        }
    }
    attn_pos_backward_end(&c, &save, L);
    for (int b = 0; b < B; b++) {
        const real* sl = slots + (size_t)b * slot;
        for (size_t e = 0; e < (size_t)NH * nth; e++)
            L->dtp[T_THETA][e] += sl[e];
        for (size_t e = 0; e < (size_t)NH * s.ch; e++)
            L->dtp[T_MIX][e] += sl[(size_t)NH * nth + e];
        for (int e = 0; e < hs; e++)
            L->dtp[T_GNW][e] += sl[(size_t)NH * nth + (size_t)NH * s.ch + e];
    }
}

const AttnVariant attn_mta = {
    .name = "mta",
    .formula =
        "W_k = sum_{m in G(k)} M[k,m] softmax(conv_theta(Mask_0(S_m))); o_k = (1 - lambda_l) "
        "RMSNorm(W_k v_k)",
    .source = "Golovneva, Wang, Weston, Sukhbaatar 2025, Multi-Token Attention, arXiv 2504.00927 "
              "(B4)",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .hparams = MTA_HP,
    .n_hparams = N_HP,
    .layer_tensors = mta_tensors,
    .layer_cache_floats = mta_cache_floats,
    .layer_scratch_floats = mta_scratch,
    .layer_forward = mta_forward,
    .layer_backward = mta_backward,
    .ignores_inner = 1,
};
