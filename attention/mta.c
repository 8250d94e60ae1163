// attention/mta.c: Multi-Token Attention, as the authors' released configuration: key-query
// convolutions before and after the softmax (in every 4th layer), linear mixing of all heads
// before and after the softmax (in every layer), a per-head RMS (group) norm and a sigmoid gate
// on the head outputs.
//
// Source: O. Golovneva, T. Wang, J. Weston, S. Sukhbaatar, "Multi-Token Attention", arXiv
// 2504.00927 (Eq. 1-2, Sec. 3; VARIANTS.md B4). Reference: facebookresearch/RAM,
// projects/mta/mta_transformer.py (Attention.forward, _mta_convolution, _head_convolution,
// reset_mta_parameters, BaseTransformer's mta_layers) with the released configs
// projects/mta/configs/830M_mta.yaml and 1B_mta.yaml: pre_sm_linear_head, query_kernel_size 6,
// key_kernel_size 11, after_sm 6 x 11, head_kernel_size = n_heads, init identity, pad_key both,
// mta_layers 2,6,10,...,22, group_norm, layer_norm_rescale false, add_gating with gate_1d.
//
// Per batch item, head h, with S_h = scale q_h k_h^T (+ ALiBi) on rotated q, k under rope, in a
// convolution layer (l = conv_first + n conv_every; the others skip both convolutions):
//   S0_h   = S_h on j <= i, 0 above the diagonal                    (the authors' zero mask)
//   A_h    = conv_theta_h(S0_h)                                     (c_q x (2w+1), pre-softmax)
//   Z_k    = sum_m Mpre[k,m] A_m          Mpre = I + pre_mix (NH x NH, pre_sm_linear_head)
//   P_k    = softmax(Z_k[i, 0..i])                                  (the -inf mask)
//   Q_k    = conv_post_k(P_k) on j <= i, 0 above                    (after_sm kernel, then 0 mask)
//   W_k    = sum_{m in G(k)} M[k,m] Q_m   M = I + mix, G(k) the c_h heads of k's group (all)
//   U_k    = W_k v_k ;  y = c g (.) U_k,t / sqrt(mean_e U_k,te^2 + 1e-5) ;  o = y sigma(w.y + b)
// conv_K(X)[i,j] = sum_{a=0}^{c_q-1} sum_{b=-w}^{w} K[a,b] X[i-a, j-b] over the map X (0 above its
// diagonal, 0 outside it): the current and c_q - 1 earlier queries, keys centred on j, the
// authors' F.conv2d over the map padded with c_q - 1 zero rows before and w zero columns on both
// sides, their kernel flipped (attention/mta_conv.c). Causality: row i reads only S0[i', j'] with
// j' <= i' <= i. c = 1 - lambda_l with lambda_l = 0.8 - 0.6 exp(-0.3 l) under attn.rescale = on
// (the authors' layer_norm_rescale, from the DIFF Transformer), else 1. g (hs) and the gate
// (w (hs), b) are shared by the heads of a layer (the authors' RMSNorm(head_dim) and
// Linear(head_dim, 1) over the (B,T,NH,hs) output).
//
// Parameters (per layer; the kernels and mixings are stored minus their identity init and carry
// no weight decay, which would pull them towards the identity; the authors' AdamW decays every
// parameter, facebookresearch/lingua:lingua/optim.py, so their full kernels decay towards 0):
//   theta (NH, c_q, 2w+1): pre-softmax kernel K_h = e_{a=0,b=0} + theta_h, init 0 (attn.cq > 0)
//   theta_post (NH, c_q', 2w'+1): post-softmax kernel, likewise (attn.post_cq > 0)
//   pre_mix (NH, NH): Mpre - I, init 0 (attn.pre_mix = on)
//   mix (NH, c_h): M[k, g0(k)+m] = [g0(k)+m = k] + mix[k,m], init 0 (g0: first head of the group)
//   gn_w (hs) init 1 ; gate_w (hs) ~ N(0, 1/C) with decay, gate_b init 0 (attn.gate = on)
// In layers without convolutions theta and theta_post are unused: their gradient is 0 there.
// att holds W (what multiplies V): rows sum to sum_m M[k,m] (1 at init) and may be negative
// after training, so diagnostics treat mta as an unnormalised variant.
//
// Backward, per batch item (n = U r, r = 1/sqrt(mean U^2 + eps), s = sigma(w.y + b)):
//   dz = s (1 - s) <dO, y> ; dw += dz y ; db += dz ; dy = s dO + dz w   (dy = dO without gate)
//   dg += c dy (.) n ; dn = c g (.) dy ; dU = (dn - n mean(dn (.) n)) r
//   dW_k = dU_k v_k^T (j <= i) ;  dv_k += W_k^T dU_k
//   dQ_m = sum_{k: m in G(k)} M[k,m] dW_k ; dmix[k, m-g0] += <dW_k, Q_m>     (Q recomputed)
//   dP = conv_post^T(dQ) on j <= i ; dtheta_post[a,b] += sum dQ[i,j] P[i-a, j-b]
//   dZ_k = P_k (.) (dP_k - <P_k, dP_k>) per row (softmax VJP)
//   dA_m = sum_k Mpre[k,m] dZ_k ; dpre_mix[k,m] += <dZ_k, A_m>              (A recomputed)
//   dS0 = conv_theta^T(dA) ; dtheta[a,b] += sum dA[i,j] S0[i-a, j-b]
//   dS = dS0 on j <= i ;  dq_h += scale dS_h k_h ;  dk_h += scale dS_h^T q_h
// Cost per head and item: each convolution c_q c_k multiply-adds per causal entry (forward, and
// twice in backward), each mixing NH (resp. c_h) per causal entry, against hs per entry of the
// full T x T for q k^T: at NH = 12, hs = 64 the two mixings add about a fifth of q k^T in every
// layer, the two 6 x 11 convolutions about one q k^T (in vector loops, not GEMMs) in every 4th.
// Threading: parallel over batch items (heads mix); parameter gradients go to per-item slots
// reduced in index order: identical results for any thread count.
// Cache: P (B,NH,T,T), U (B,T,C), r and s (B,T,NH), the per-item gradient slots.
#include <math.h>
#include <string.h>

#include "attention/layer.h"
#include "attention/mta_conv.h"
#include "attention/rowops.h"

#define MTA_EPS ((real)1e-5) // exact in the double build too

enum { HP_CQ, HP_KW, HP_PCQ, HP_PKW, HP_CH, HP_PRE, HP_EVERY, HP_FIRST, HP_RESCALE, HP_GATE, N_HP };

static const AttnHParamSpec MTA_HP[N_HP] = {
    [HP_CQ] = {"cq", 6.0f, 0.0f, 32.0f, NULL,
               "query length c_q of the pre-softmax key-query kernel, 0: none (integer)"},
    [HP_KW] = {"kw", 5.0f, 0.0f, 32.0f, NULL,
               "key half-width w of the pre-softmax kernel, c_k = 2w + 1 keys centred on j "
               "(integer)"},
    [HP_PCQ] = {"post_cq", 6.0f, 0.0f, 32.0f, NULL,
                "query length of the post-softmax key-query kernel, 0: none (integer)"},
    [HP_PKW] = {"post_kw", 5.0f, 0.0f, 32.0f, NULL,
                "key half-width of the post-softmax kernel (integer)"},
    [HP_CH] = {"ch", 0.0f, 0.0f, 64.0f, NULL,
               "heads per post-softmax head-mixing group c_h, 0: all heads (integer)"},
    [HP_PRE] = {"pre_mix", 1.0f, 0.0f, 0.0f, "off|on",
                "on: linear mixing of all heads' logits before the softmax"},
    [HP_EVERY] = {"conv_every", 4.0f, 1.0f, 64.0f, NULL,
                  "key-query convolutions in layers conv_first + n conv_every (integer)"},
    [HP_FIRST] = {"conv_first", 2.0f, 0.0f, 64.0f, NULL,
                  "first (0-based) layer with key-query convolutions; none past the last layer "
                  "(integer)"},
    [HP_RESCALE] = {"rescale", 0.0f, 0.0f, 0.0f, "off|on",
                    "on: scale the group norm by 1 - lambda_l, lambda_l = 0.8 - 0.6 exp(-0.3 l)"},
    [HP_GATE] = {"gate", 1.0f, 0.0f, 0.0f, "off|on",
                 "on: o = y sigmoid(w.y + b) after the group norm (w: hs, shared by the heads)"},
};

typedef struct {
    MtaKernel pre, post; // cq = 0: no such convolution
    int ch;              // heads per post-softmax mixing group (NH for all)
    int pre_mix, rescale, gate, every, first;
    // tensor indices (-1: absent), their sizes and offsets in a gradient slot
    int t_theta, t_post, t_pre, t_mix, t_gnw, t_gw, t_gb, nt;
    size_t size[ATTN_MAX_TENSORS], off[ATTN_MAX_TENSORS], slot;
} MtaShape;

static int hp_int(const AttnHParams* hp, int k) {
    return (int)(hp->v[k] + 0.5f);
}

static MtaKernel mta_kernel(int cq, int w) {
    return (MtaKernel){.cq = cq, .w = w, .ck = 2 * w + 1};
}

static MtaShape mta_shape(const AttnHParams* hp, const AttnDims* d) {
    MtaShape s;
    memset(&s, 0, sizeof(s));
    s.pre = mta_kernel(hp_int(hp, HP_CQ), hp_int(hp, HP_KW));
    s.post = mta_kernel(hp_int(hp, HP_PCQ), hp_int(hp, HP_PKW));
    s.ch = hp_int(hp, HP_CH);
    if (s.ch <= 0 || s.ch > d->NH) s.ch = d->NH;
    s.pre_mix = hp_int(hp, HP_PRE);
    s.rescale = hp_int(hp, HP_RESCALE);
    s.gate = hp_int(hp, HP_GATE);
    s.every = hp_int(hp, HP_EVERY);
    s.first = hp_int(hp, HP_FIRST);
    int n = 0;
    const size_t NH = (size_t)d->NH;
#define MTA_ADD(field, on, sz) (s.field = (on) ? (s.size[n] = (sz), n++) : -1)
    MTA_ADD(t_theta, s.pre.cq > 0, NH * s.pre.cq * s.pre.ck);
    MTA_ADD(t_post, s.post.cq > 0, NH * s.post.cq * s.post.ck);
    MTA_ADD(t_pre, s.pre_mix, NH * NH);
    MTA_ADD(t_mix, 1, NH * s.ch);
    MTA_ADD(t_gnw, 1, (size_t)d->hs);
    MTA_ADD(t_gw, s.gate, (size_t)d->hs);
    MTA_ADD(t_gb, s.gate, 1);
#undef MTA_ADD
    s.nt = n;
    for (int k = 0; k < n; k++) {
        s.off[k] = s.slot;
        s.slot += s.size[k];
    }
    return s;
}

// 1 when layer l has the key-query convolutions
static int mta_conv_layer(const MtaShape* s, int l) {
    return l >= s->first && (l - s->first) % s->every == 0;
}

static int mta_tensors(AttnTensorSpec* out, const AttnDims* d, const AttnHParams* hp) {
    const MtaShape s = mta_shape(hp, d);
    if (s.t_theta >= 0)
        out[s.t_theta] = (AttnTensorSpec){.name = "theta",
                                          .ndim = 3,
                                          .shape = {d->NH, s.pre.cq, s.pre.ck},
                                          .init = ATTN_INIT_ZERO};
    if (s.t_post >= 0)
        out[s.t_post] = (AttnTensorSpec){.name = "theta_post",
                                         .ndim = 3,
                                         .shape = {d->NH, s.post.cq, s.post.ck},
                                         .init = ATTN_INIT_ZERO};
    if (s.t_pre >= 0)
        out[s.t_pre] = (AttnTensorSpec){
            .name = "pre_mix", .ndim = 2, .shape = {d->NH, d->NH}, .init = ATTN_INIT_ZERO};
    out[s.t_mix] =
        (AttnTensorSpec){.name = "mix", .ndim = 2, .shape = {d->NH, s.ch}, .init = ATTN_INIT_ZERO};
    out[s.t_gnw] = (AttnTensorSpec){
        .name = "gn_w", .ndim = 1, .shape = {d->hs}, .init = ATTN_INIT_CONST, .init_value = 1.0f};
    if (s.gate) {
        out[s.t_gw] = (AttnTensorSpec){.name = "gate_w",
                                       .ndim = 1,
                                       .shape = {d->hs},
                                       .decay = 1,
                                       .init = ATTN_INIT_NORMAL,
                                       .init_value = 1.0f / sqrtf((float)d->C)};
        out[s.t_gb] =
            (AttnTensorSpec){.name = "gate_b", .ndim = 1, .shape = {1}, .init = ATTN_INIT_ZERO};
    }
    return s.nt;
}

static size_t mta_cache_floats(const AttnDims* d, const AttnHParams* hp) {
    const MtaShape s = mta_shape(hp, d);
    const size_t BT = (size_t)d->B * d->T;
    return BT * d->NH * d->T + BT * d->C + 2 * BT * d->NH + (size_t)d->B * s.slot;
}

// Per-thread scratch of the forward (2 NH + 1 T x T planes) and of the backward (3 NH + 2 planes
// and a T x hs block), declared so the model reserves it at setup.
static size_t mta_fwd_scratch(const AttnDims* d) {
    return (2 * (size_t)d->NH + 1) * ((size_t)d->T * d->T);
}

static size_t mta_bwd_scratch(const AttnDims* d) {
    return (3 * (size_t)d->NH + 2) * ((size_t)d->T * d->T) + (size_t)d->T * d->hs;
}

static size_t mta_scratch(const AttnDims* d, const AttnHParams* hp) {
    (void)hp;
    const size_t f = mta_fwd_scratch(d), b = mta_bwd_scratch(d);
    return f > b ? f : b;
}

// the depth factor c = 1 - lambda_l of the group norm
static real mta_depth_scale(int layer) {
    return (real)1.0 - ((real)0.8 - (real)0.6 * real_exp((real)-0.3 * (real)layer));
}

// S0 (T,T) = the scores of head h of item b with the entries above the diagonal zeroed
static void mta_masked_scores(real* S0, const AttnCore* c, const AttnDims* d, int b, int h) {
    const int T = d->T;
    rowops_head_scores(S0, c, d, b, h);
    for (int i = 0; i + 1 < T; i++)
        memset(S0 + (size_t)i * T + i + 1, 0, sizeof(real) * (size_t)(T - i - 1));
}

// A (T,T) = the pre-softmax logits of head h before the head mixing: conv_theta(S0) under a
// kernel th (S0 scratch), else the scores (j <= i used)
static void mta_logits(real* A, real* S0, const AttnCore* c, const AttnDims* d, int b, int h,
                       const real* th, const MtaKernel* k) {
    if (!th) {
        rowops_head_scores(A, c, d, b, h);
        return;
    }
    mta_masked_scores(S0, c, d, b, h);
    mta_conv(A, S0, th + (size_t)h * k->cq * k->ck, k, d->T);
}

static real mta_sigmoid(real z) {
    return 1.0f / (1.0f + real_exp(-z));
}

static void mta_forward(AttnLayer* L) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH, hs = L->d.hs;
    const size_t TT = (size_t)T * T, C = (size_t)L->d.C;
    const MtaShape s = mta_shape(L->hp, &L->d);
    const int conv = mta_conv_layer(&s, L->layer);
    const real* th = conv && s.t_theta >= 0 ? L->tp[s.t_theta] : NULL;
    const real* thp = conv && s.t_post >= 0 ? L->tp[s.t_post] : NULL;
    const real* Dpre = s.t_pre >= 0 ? L->tp[s.t_pre] : NULL;
    const real* g = L->tp[s.t_gnw];
    const real* gw = s.gate ? L->tp[s.t_gw] : NULL;
    const real gb = s.gate ? L->tp[s.t_gb][0] : 0.0f;
    AttnCore c = attn_layer_core(L);
    attn_pos_forward(&c, L, L->qk_pos);
    attn_workspace_expect(L->ws, mta_fwd_scratch(&L->d));
    real* Pc = L->cache;
    real* Uc = Pc + (size_t)B * NH * TT;
    real* rc = Uc + (size_t)B * T * C;
    real* sc = rc + (size_t)B * T * NH;
    const real cs = s.rescale ? mta_depth_scale(L->layer) : 1.0f;
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        real* A = attn_thread_scratch(L->ws); // (NH,T,T) logits, later the post-conv Q
        real* Z = A + NH * TT;                // (NH,T,T) mixed logits
        real* S0 = Z + NH * TT;
        real* P = Pc + (size_t)b * NH * TT;
        for (int h = 0; h < NH; h++)
            mta_logits(A + h * TT, S0, &c, &L->d, b, h, th, &s.pre);
        const real* Lg = A;
        if (Dpre) {
            mta_mix(Z, A, Dpre, NH, NH, T);
            Lg = Z;
        }
        for (int k = 0; k < NH; k++)
            for (int i = 0; i < T; i++) {
                real* Pi = P + k * TT + (size_t)i * T;
                rowops_softmax(Pi, Lg + k * TT + (size_t)i * T, i + 1);
                memset(Pi + i + 1, 0, sizeof(real) * (size_t)(T - i - 1));
            }
        const real* Q = P;
        if (thp) {
            for (int k = 0; k < NH; k++)
                mta_conv(A + k * TT, P + k * TT, thp + (size_t)k * s.post.cq * s.post.ck, &s.post,
                         T);
            Q = A;
        }
        real* W = L->att + (size_t)b * NH * TT;
        mta_mix(W, Q, L->tp[s.t_mix], s.ch, NH, T);
        for (int k = 0; k < NH; k++) {
            const real* v = c.v + (size_t)b * T * c.ldv + (size_t)k * hs;
            real* U = Uc + (size_t)b * T * C + (size_t)k * hs;
            real_gemm(0, 0, T, hs, T, 1.0f, W + k * TT, T, v, (int)c.ldv, 0.0f, U, (int)C);
            for (int t = 0; t < T; t++) {
                const real* Ut = U + (size_t)t * C;
                real ms = 0.0f;
                for (int e = 0; e < hs; e++)
                    ms += Ut[e] * Ut[e];
                const real r = 1.0f / real_sqrt(ms / (real)hs + MTA_EPS);
                const size_t row = ((size_t)b * T + t) * NH + k;
                rc[row] = r;
                real* o = L->out + ((size_t)b * T + t) * C + (size_t)k * hs;
                real z = gb;
                for (int e = 0; e < hs; e++) {
                    o[e] = cs * g[e] * Ut[e] * r;
                    if (gw) z += gw[e] * o[e];
                }
                const real sg = gw ? mta_sigmoid(z) : 1.0f;
                sc[row] = sg;
                if (gw)
                    for (int e = 0; e < hs; e++)
                        o[e] *= sg;
            }
        }
    }
}

// dU (T, hs) of head k, item b: the gate and group-norm VJP of dO into the slots dg, dgw, dgb
static void mta_norm_backward(real* dU, real* dg, real* dgw, real* dgb, const AttnLayer* L,
                              const real* Uc, const real* rc, const real* sc, real cs, int b,
                              int k) {
    const int T = L->d.T, NH = L->d.NH, hs = L->d.hs;
    const size_t C = (size_t)L->d.C;
    const MtaShape s = mta_shape(L->hp, &L->d);
    const real* g = L->tp[s.t_gnw];
    const real* gw = s.gate ? L->tp[s.t_gw] : NULL;
    for (int t = 0; t < T; t++) {
        const real* Ut = Uc + ((size_t)b * T + t) * C + (size_t)k * hs;
        const real* dO = L->dout + ((size_t)b * T + t) * C + (size_t)k * hs;
        const size_t row = ((size_t)b * T + t) * NH + k;
        const real r = rc[row], sg = sc[row];
        real* du = dU + (size_t)t * hs;
        real dz = 0.0f;
        if (gw) {
            for (int e = 0; e < hs; e++)
                dz += dO[e] * cs * g[e] * Ut[e] * r;
            dz *= sg * (1.0f - sg);
            *dgb += dz;
        }
        real dot = 0.0f;
        for (int e = 0; e < hs; e++) {
            const real n = Ut[e] * r;
            real dy = dO[e];
            if (gw) {
                dgw[e] += dz * cs * g[e] * n;
                dy = sg * dO[e] + dz * gw[e];
            }
            dg[e] += cs * dy * n;
            du[e] = cs * g[e] * dy;
            dot += du[e] * n;
        }
        dot /= (real)hs;
        for (int e = 0; e < hs; e++)
            du[e] = (du[e] - Ut[e] * r * dot) * r;
    }
}

static void mta_backward(AttnLayer* L) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH, hs = L->d.hs;
    const size_t TT = (size_t)T * T, C = (size_t)L->d.C;
    const MtaShape s = mta_shape(L->hp, &L->d);
    const int conv = mta_conv_layer(&s, L->layer);
    const real* th = conv && s.t_theta >= 0 ? L->tp[s.t_theta] : NULL;
    const real* thp = conv && s.t_post >= 0 ? L->tp[s.t_post] : NULL;
    const real* Dpre = s.t_pre >= 0 ? L->tp[s.t_pre] : NULL;
    const size_t nth = (size_t)s.pre.cq * s.pre.ck, ntp = (size_t)s.post.cq * s.post.ck;
    AttnCore c = attn_layer_core(L);
    AttnPosSave save;
    attn_pos_backward_begin(&c, &save, L, L->qk_pos);
    attn_workspace_expect(L->ws, mta_bwd_scratch(&L->d));
    const real* Pc = L->cache;
    const real* Uc = Pc + (size_t)B * NH * TT;
    const real* rc = Uc + (size_t)B * T * C;
    const real* sc = rc + (size_t)B * T * NH;
    real* slots = (real*)sc + (size_t)B * T * NH;
    memset(slots, 0, sizeof(real) * s.slot * (size_t)B);
    const real cs = s.rescale ? mta_depth_scale(L->layer) : 1.0f;
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        real* X = attn_thread_scratch(L->ws); // (NH,T,T): dW, then dZ
        real* Y = X + NH * TT;                // (NH,T,T): dQ, then the recomputed logits A
        real* Z = Y + NH * TT;                // (NH,T,T): Q, then dP, then dA
        real *S0 = Z + NH * TT, *dS = S0 + TT, *dU = dS + TT;
        real* sl = slots + (size_t)b * s.slot;
        real* dgw = s.gate ? sl + s.off[s.t_gw] : NULL;
        real* dgb = s.gate ? sl + s.off[s.t_gb] : NULL;
        const real* P = Pc + (size_t)b * NH * TT;
        const real* W = L->att + (size_t)b * NH * TT;
        for (int k = 0; k < NH; k++) { // dU, then dW_k = dU v^T, dv += W^T dU
            mta_norm_backward(dU, sl + s.off[s.t_gnw], dgw, dgb, L, Uc, rc, sc, cs, b, k);
            const real* v = c.v + (size_t)b * T * c.ldv + (size_t)k * hs;
            real* dv = c.dv + (size_t)b * T * c.ldv + (size_t)k * hs;
            real_gemm(0, 1, T, T, hs, 1.0f, dU, hs, v, (int)c.ldv, 0.0f, X + k * TT, T);
            real_gemm(1, 0, T, hs, T, 1.0f, W + k * TT, T, dU, hs, 1.0f, dv, (int)c.ldv);
        }
        const real* Q = P; // the post-softmax head mixing: dQ into Y
        if (thp) {
            for (int m = 0; m < NH; m++)
                mta_conv(Z + m * TT, P + m * TT, thp + (size_t)m * ntp, &s.post, T);
            Q = Z;
        }
        mta_mix_backward(Y, sl + s.off[s.t_mix], X, Q, L->tp[s.t_mix], s.ch, NH, T);
        const real* dP = Y;
        if (thp) { // the post-softmax convolution: dP into Z
            memset(Z, 0, sizeof(real) * NH * TT);
            for (int m = 0; m < NH; m++)
                mta_conv_backward(Z + m * TT, sl + s.off[s.t_post] + (size_t)m * ntp, Y + m * TT,
                                  P + m * TT, thp + (size_t)m * ntp, &s.post, T);
            dP = Z;
        }
        memset(X, 0, sizeof(real) * NH * TT); // softmax VJP: dZ into X
        for (int k = 0; k < NH; k++)
            for (int i = 0; i < T; i++)
                rowops_softmax_backward(X + k * TT + (size_t)i * T, dP + k * TT + (size_t)i * T,
                                        P + k * TT + (size_t)i * T, i + 1);
        const real* dA = X;
        if (Dpre) { // the pre-softmax head mixing on the recomputed logits: dA into Z
            for (int h = 0; h < NH; h++)
                mta_logits(Y + h * TT, S0, &c, &L->d, b, h, th, &s.pre);
            mta_mix_backward(Z, sl + s.off[s.t_pre], X, Y, Dpre, NH, NH, T);
            dA = Z;
        }
        for (int h = 0; h < NH; h++) {
            const real* dAh = dA + h * TT;
            memset(dS, 0, sizeof(real) * TT);
            if (th) {
                mta_masked_scores(S0, &c, &L->d, b, h);
                mta_conv_backward(dS, sl + s.off[s.t_theta] + (size_t)h * nth, dAh, S0,
                                  th + h * nth, &s.pre, T);
            } else {
                for (int i = 0; i < T; i++)
                    memcpy(dS + (size_t)i * T, dAh + (size_t)i * T, sizeof(real) * (size_t)(i + 1));
            }
            const real* q = c.q + (size_t)b * T * c.ldq + (size_t)h * hs;
            const real* kk = c.k + (size_t)b * T * c.ldk + (size_t)h * hs;
            real* dq = c.dq + (size_t)b * T * c.ldq + (size_t)h * hs;
            real* dk = c.dk + (size_t)b * T * c.ldk + (size_t)h * hs;
            attn_score_grad(dS, T, hs, c.scale, q, (int)c.ldq, kk, (int)c.ldk, 1.0f, dq, (int)c.ldq,
                            dk, (int)c.ldk);
        }
    }
    attn_pos_backward_end(&c, &save, L);
    for (int b = 0; b < B; b++) {
        const real* sl = slots + (size_t)b * s.slot;
        for (int t = 0; t < s.nt; t++)
            for (size_t e = 0; e < s.size[t]; e++)
                L->dtp[t][e] += sl[s.off[t] + e];
    }
}

const AttnVariant attn_mta = {
    .name = "mta",
    .formula = "W_k = sum_m M[k,m] conv'(softmax(sum_m' Mpre[k,m'] conv(Mask_0(S_m')))); o_k = "
               "gate(RMSNorm(W_k v_k)); convs every 4th layer",
    .source = "Golovneva, Wang, Weston, Sukhbaatar 2025, Multi-Token Attention, arXiv 2504.00927 "
              "(B4)",
    .reference = "facebookresearch/RAM:projects/mta/mta_transformer.py with "
                 "projects/mta/configs/1B_mta.yaml (830M_mta.yaml)",
    .deviations =
        "kernels and head mixings stored minus their identity init and, with gn_w and gate_b, "
        "not weight-decayed (the authors' AdamW, facebookresearch/lingua:lingua/optim.py, decays "
        "every parameter at 0.05, the full kernels towards 0); gate_b starts at 0 and "
        "gate_w ~ N(0, 1/C) untruncated (the authors' init_weights leaves the bias as allocated, "
        "the weight truncated at 3 std); attn.ch may leave a smaller last group (the authors "
        "require NH % c_h == 0); the channel-wise gate (gate_1d = false) and generation-time "
        "document cuts are not built",
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
