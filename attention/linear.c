// attention/linear.c: causal linear attention in its quadratic (masked) form: the layer, its
// kernel weights and its two row normalisations. The feature maps phi (elu+1, ReLU, cosFormer,
// identity, Hedgehog, Galerkin, FLatten's focused map, Performer, Cottention's and SLAY's unit
// vectors) are in attention/linear_features.c, with their maths and backward.
//
// Sources (VARIANTS.md B6): Katharopoulos et al. 2020 "Transformers are RNNs" (elu+1);
// Qin et al. 2022 "cosFormer" (ReLU features, reweighting cos(pi (i - j) / 2M)); Zhang et al.
// 2024 "The Hedgehog & the Porcupine"; Cao 2021 Galerkin; Han et al. 2023 FLatten; Han et al.
// 2024 InLine; Choromanski et al. 2021 Performer; Mongaras et al. 2024 Cottention; Luna et al.
// 2026 SLAY. Reference code, where the default follows the authors' code:
//   InLine     LeapLabTHU/InLine:models/inline_swin.py (InLineAttention)
//   FLatten    LeapLabTHU/FLatten-Transformer:models/flatten_swin.py (FocusedLinearAttention)
//   Cottention gmongaras/Cottention_Transformer:GPT_Trainer/GPTCosAttention.py (_cos_attn)
// the other maps follow their papers' equations.
//
// Per (batch, head), position t, keys j <= t (q, k after the position encoding), n_t = t + 1:
//   K_tj = phi(q_t) . phi(k_j) * w_tj ,   A_tj = norm_t(K_t.)_j ,   o_t = sum_{j<=t} A_tj v_j
// with the positive weight w_tj = 1, times cos(pi (t - j) / (2M)) for cosformer (M =
// attn.cos_len, or the sequence length of the call when 0, so t - j < M keeps it positive),
// times exp(-slope_h (t - j)) under pos_encoding = alibi (the ALiBi bias exp'd, as softmax
// would see it), times Cottention's stabiliser below. No score scale 1/sqrt(hs) (as in the
// papers), except InLine's. This is the exact causal form of the prefix-sum recurrence S_t =
// sum_{j<=t} phi(k_j) v_j^T; it costs O(T^2) like softmax attention but matches it in memory
// layout (att holds A for diagnostics).
//
// Kernels on top of the features:
//   cottention K_tj = q^_t . k^_j (the cosine) w_tj. Stabiliser attn.cos_stab:
//              value (default, the authors' code): each value is divided by its own position,
//              v_j / max((j+1)^sigmoid(c_h), 1) (the max is 1 for j >= 0), with a learnable
//              c_h per head (tensor "cos_c" (NH), init 0.5, no decay), and rows are not
//              normalised: w_tj carries (j+1)^-sigmoid(c_h), Z_t = 1. Backward: with g_tj the
//              gradient of K_tj and X_tj the cosine, dc_h += sum g_tj X_tj w_tj (-ln(j+1))
//              sigma(c_h) (1 - sigma(c_h)).
//              row (the earlier attnlab form; the paper's learned length scaling unverified
//              then): rows divided by the prefix count n_t, no parameter.
//   slay       the spherical Yat kernel kappa(c) = c^2 / (2 - 2c + eps_y) of the cosine c
//              (Luna, Bouhsine, Choromanski 2026, arXiv 2602.04915; eps_y = attn.yat_eps), exactly
//              (the paper's random-feature mixture approximates it). kappa >= 0. Backward: dc =
//              dK kappa'(c), kappa'(c) = (2c (2 - 2c + eps_y) + 2c^2) / (2 - 2c + eps_y)^2.
//   galerkin   K_tj = q_t . LN(k_j) w_tj, values LN(v_j) (Cao 2021, z = Q (LN(K)^T LN(V)) / n).
//   flatten    adds the rank-restoring depthwise convolution on V, causal along time with kernel 5:
//              o_t,c += b_c + sum_{i<5, i<=t} w_c,i v_(t-i),c. Tensors "dwc_w" (NH, hs, 5) decay,
//              N(0, 1/sqrt(15)) (PyTorch's Conv default spread for fan-in 5), "dwc_b" (NH, hs) 0.
//              Backward: dv_(t-i),c += w_c,i dO_t,c, dw_c,i += dO_t,c v_(t-i),c, db_c += dO_t,c
//              (per (b,h) slots, reduced over b).
// Row normalisation (attn.norm, default divide):
//   divide     A_tj = K_tj / Z_t with Z_t = sum_{j<=t} K_tj + eps (the prefix normaliser);
//              for flatten Z_t = sum_j K_tj + n_t eps (the authors' 1 / (q . mean_j k_j + 1e-6));
//              for the signed kernels (galerkin, identity, cottention with cos_stab = row) the
//              prefix count Z_t = n_t (no eps, no quotient rule); Z_t = 1 for cottention's value
//              stabiliser.
//   subtract   InLine (Han et al. 2024, "Bridging the Divide", NeurIPS, arXiv 2412.06590), the
//              injective form that subtracts the causal prefix mean instead of dividing:
//              A_tj = c_t (K_tj - (1/n_t) sum_{l<=t} K_tl) + 1/n_t; rows sum to 1, weights may be
//              negative; eps unused. attn.inline_scale:
//              code (default): c_t = 1 / (sqrt(hs) n_t), what the authors' code computes
//                (x = q (k^T v) scale/n + (1 - q . mean(k) scale) mean(v), scale = hs^-1/2);
//              paper: c_t = 1, the paper's Eq. 5. The code's comment says the factor scale/n
//                folds into phi(Q) and is omitted from Eq. 5 for simplicity: true for a fixed n,
//                but causal rows have n_t = t + 1, so without it the K - mean(K) term is
//                sqrt(hs) n_t times larger (8192x at t = 1023, hs = 64) and outgrows the 1/n_t
//                average along the row. The code is what the paper's results were trained with
//                and its row t is the non-causal formula on the t + 1 visible keys, so it is
//                the default; paper keeps the literal Eq. 5.
//              Use with attn.feature = identity for InLine's default kernel. The paper's
//              local-attention residual (a 3x3 conv of v with input-dependent weights) is not
//              part of this layer.
// Hyperparameters: attn.feature, attn.eps = 1e-6 (the guard of the prefix sum: with ReLU features
// a row can be all zero, then A = 0), attn.cos_len = 0, attn.norm, attn.rf_m, attn.redraw
// (performer), attn.yat_eps (slay), attn.inline_scale (subtract), attn.flatten_norm = channels |
// head (flatten; linear_features.c), attn.cos_stab (cottention). The inner row map (attn.inner)
// is not used: linear attention replaces it.
//
// Deviations from the reference code (defaults): InLine: no local residual, causal rows; FLatten:
// no learnable per-channel scale softplus(s) dividing r (init 0, i.e. r / ln 2, which the norms
// cancel at init), no learned positional encoding on k, the depthwise conv is 1-D causal (kernel
// 5) with per-head weights where the authors use one 5x5 2-D conv shared by all heads;
// Cottention: x^ = x / sqrt(|x|^2 + 1e-6) where F.normalize uses x / max(|x|, 1e-12).
//
// Backward, given dO (per (b,h)):
//   dA = dO V^T ;  dV += A^T dO
//   dK_tj = (dA_tj - sum_l A_tl dA_tl) / Z_t    (quotient rule through a prefix-sum Z_t)
//   dK_tj = dA_tj / Z_t                          (count or unit normaliser)
//   dK_tj = c_t (dA_tj - (1/n_t) sum_{l<=t} dA_tl)  (subtract: the mean's VJP)
//   dKraw = dK * w   (j <= t only) ;  dPhi_q = dKraw Phi_k ;  dPhi_k = dKraw^T Phi_q
// then the feature maps' VJPs (linear_features.c); FLatten's over all channels runs after every
// head's dPhi is known. Parameter gradients (phi_w, dwc_w, dwc_b, cos_c) are accumulated per
// (b, h) and reduced over b in index order (thread-count independent). Products through the
// kernel layer (real_gemm) on per-thread scratch.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attention/layer.h"
#include "attention/linear_features.h"
#include "common/matmul.h"

enum {
    HP_FEATURE,
    HP_EPS,
    HP_COS_LEN,
    HP_NORM,
    HP_RF_M,
    HP_REDRAW,
    HP_YAT_EPS,
    HP_INLINE,
    HP_FLNORM,
    HP_COSSTAB,
    N_HP
};
enum { N_DIVIDE, N_SUBTRACT };
enum { INL_CODE, INL_PAPER };
enum { FLN_CHANNELS, FLN_HEAD };
enum { CST_VALUE, CST_ROW };
enum { Z_SUM, Z_SUM_N, Z_COUNT, Z_ONE }; // the divide normaliser: sum + eps, + n eps, n_t, 1

static const AttnHParamSpec linear_hparams[N_HP] = {
    [HP_FEATURE] = {"feature", F_ELU1, 0, 0,
                    "elu1|relu|cosformer|hedgehog|galerkin|flatten|performer|cottention|slay|"
                    "identity",
                    "feature map phi: elu+1, ReLU, ReLU with cos((t-j) pi/2M) reweighting, "
                    "learnable softmax map, Galerkin (q . LN(k_j) / n_t, values LN(v_j)), FLatten "
                    "focused map p = 3 + causal depthwise conv on v, Performer FAVOR+ positive "
                    "orthogonal random features, Cottention cosine, SLAY spherical Yat kernel "
                    "c^2/(2 - 2c + yat_eps) of the cosine c, identity (InLine's default)"},
    [HP_EPS] = {"eps", 1e-6f, 0.0f, 1.0f, NULL, "added to the row normaliser sum_j K_tj"},
    [HP_COS_LEN] = {"cos_len", 0.0f, 0.0f, 1e9f, NULL,
                    "cosformer M (0: the sequence length of the call)"},
    [HP_NORM] = {"norm", N_DIVIDE, 0, 0, "divide|subtract",
                 "row normaliser: divide by the causal prefix sum, or InLine: subtract the prefix "
                 "mean, + 1/n"},
    [HP_RF_M] = {"rf_m", 0.0f, 0.0f, 4096.0f, NULL,
                 "performer: number of random features, integer (0: 2 x head size)"},
    [HP_REDRAW] = {"redraw", 0.0f, 0.0f, 1e9f, NULL,
                   "performer: redraw the random features every this many training steps, "
                   "integer (0: one draw for the run)"},
    [HP_YAT_EPS] = {"yat_eps", 1e-2f, 1e-6f, 10.0f, NULL,
                    "slay: eps of the Yat kernel c^2 / (2 - 2c + eps)"},
    [HP_INLINE] = {"inline_scale", INL_CODE, 0, 0, "code|paper",
                   "norm = subtract: code: A = (K - mean K) / (sqrt(hs) n_t) + 1/n_t (the InLine "
                   "authors' code), paper: A = K - mean K + 1/n_t (the paper's Eq. 5)"},
    [HP_FLNORM] = {"flatten_norm", FLN_CHANNELS, 0, 0, "channels|head",
                   "flatten: the focused map's norms over all C channels before the head split "
                   "(the authors' code) or over each head's channels"},
    [HP_COSSTAB] = {"cos_stab", CST_VALUE, 0, 0, "value|row",
                    "cottention: v_j / (j+1)^sigmoid(c_h) with a learnable c_h per head and no "
                    "row normaliser (the authors' code), or rows divided by n_t"},
};

static int lin_kind(const AttnHParams* hp) {
    return (int)hp->v[HP_FEATURE];
}

static int lin_norm(const AttnHParams* hp) {
    return (int)hp->v[HP_NORM];
}

// cottention with the authors' per-value stabiliser (tensor cos_c)
static int lin_cos_value(const AttnHParams* hp) {
    return lin_kind(hp) == F_COSINE && (int)hp->v[HP_COSSTAB] == CST_VALUE;
}

// channel groups of FLatten's norms: 1 (all C channels) or NH (per head)
static int lin_fl_groups(const AttnHParams* hp, int NH) {
    return (int)hp->v[HP_FLNORM] == FLN_HEAD ? NH : 1;
}

static int lin_znorm(const AttnHParams* hp) {
    const int kind = lin_kind(hp);
    if (kind == F_GALERKIN || kind == F_IDENTITY) return Z_COUNT;
    if (kind == F_COSINE) return lin_cos_value(hp) ? Z_ONE : Z_COUNT;
    return kind == F_FLATTEN ? Z_SUM_N : Z_SUM;
}

// the map applied to queries (role 0) and keys (role 1)
static int lin_role_kind(int kind, int role) {
    if (kind == F_GALERKIN) return role ? F_LNORM : F_IDENT;
    if (kind == F_IDENTITY) return F_IDENT;
    return kind == F_SLAY ? F_COSINE : kind;
}

static int lin_fdim(const AttnHParams* hp, int hs) {
    if (lin_kind(hp) == F_PERFORMER) return hp->v[HP_RF_M] > 0.0f ? (int)hp->v[HP_RF_M] : 2 * hs;
    return lin_kind(hp) == F_HEDGEHOG ? 2 * hs : hs;
}

// Performer's orthogonal blocks are drawn hs x hs in a fixed buffer (attn_performer_features):
// refused at setup above ATTN_PERFORMER_MAX_HS channels per head.
static int linear_check(const AttnDims* d, const AttnHParams* hp, int pos, char* err, size_t cap) {
    (void)pos;
    if (lin_kind(hp) == F_PERFORMER && d->hs > ATTN_PERFORMER_MAX_HS) {
        snprintf(err, cap,
                 "key 'attn.feature': performer draws its random features for a head size of at "
                 "most %d, and n_embd %d / n_head %d gives %d",
                 ATTN_PERFORMER_MAX_HS, d->C, d->NH, d->hs);
        return -1;
    }
    return 0;
}

static int linear_tensors(AttnTensorSpec* out, const AttnDims* d, const AttnHParams* hp) {
    if (lin_kind(hp) == F_FLATTEN) {
        out[0] = (AttnTensorSpec){.name = "dwc_w",
                                  .ndim = 3,
                                  .shape = {d->NH, d->hs, FL_K},
                                  .decay = 1,
                                  .init = ATTN_INIT_NORMAL,
                                  .init_value = 1.0f / sqrtf(3.0f * FL_K)};
        out[1] = (AttnTensorSpec){.name = "dwc_b",
                                  .ndim = 2,
                                  .shape = {d->NH, d->hs},
                                  .decay = 0,
                                  .init = ATTN_INIT_ZERO};
        return 2;
    }
    if (lin_cos_value(hp)) {
        out[0] = (AttnTensorSpec){.name = "cos_c",
                                  .ndim = 1,
                                  .shape = {d->NH},
                                  .decay = 0,
                                  .init = ATTN_INIT_CONST,
                                  .init_value = 0.5f};
        return 1;
    }
    if (lin_kind(hp) != F_HEDGEHOG) return 0;
    out[0] = (AttnTensorSpec){.name = "phi_w",
                              .ndim = 3,
                              .shape = {d->NH, d->hs, d->hs},
                              .decay = 1,
                              .init = ATTN_INIT_ZERO};
    return 1;
}

// per-thread scratch, F = the feature dimension: forward three (T, F), an hs vector, performer's
// (F, hs) features and two T vectors (cottention's column weights and logs); backward a (T, T)
// plane more, six (T, F) and the same vectors
static size_t linear_fwd_scratch(const AttnDims* d, const AttnHParams* hp) {
    const size_t F = (size_t)lin_fdim(hp, d->hs);
    return 3 * (size_t)d->T * F + (size_t)d->hs + F * (size_t)d->hs + 2 * (size_t)d->T;
}

static size_t linear_bwd_scratch(const AttnDims* d, const AttnHParams* hp) {
    const size_t F = (size_t)lin_fdim(hp, d->hs);
    return 2 * (size_t)d->T * d->T + 6 * (size_t)d->T * F + (size_t)d->hs + F * (size_t)d->hs +
           2 * (size_t)d->T;
}

static size_t linear_scratch(const AttnDims* d, const AttnHParams* hp) {
    return linear_bwd_scratch(d, hp); // >= the forward's
}

// Cache: Z (B,NH,T); the parameter-gradient slots per (b, h); for flatten the focused map's
// factors of q and k (B,T,groups) and the feature gradients dPhi_q, dPhi_k (B,T,C)
typedef struct {
    real *Z, *slots, *fq, *fk, *dPq, *dPk;
} LinCache;

static size_t lin_slot_floats(const AttnDims* d, const AttnHParams* hp) {
    const size_t BH = (size_t)d->B * d->NH;
    if (lin_kind(hp) == F_HEDGEHOG) return BH * d->hs * d->hs;
    if (lin_kind(hp) == F_FLATTEN) return BH * d->hs * (FL_K + 1);
    return lin_cos_value(hp) ? BH : 0;
}

// carve the cache at base (or only size it when base is NULL); returns its floats
static size_t lin_cache_carve(LinCache* k, real* base, const AttnDims* d, const AttnHParams* hp) {
    const size_t BT = (size_t)d->B * d->T;
    const int fl = lin_kind(hp) == F_FLATTEN;
    const size_t ng = fl ? (size_t)lin_fl_groups(hp, d->NH) : 0, C = fl ? (size_t)d->C : 0;
    const size_t sz[6] = {BT * d->NH, lin_slot_floats(d, hp), BT * ng, BT * ng, BT * C, BT * C};
    real** dst[6] = {&k->Z, &k->slots, &k->fq, &k->fk, &k->dPq, &k->dPk};
    size_t off = 0;
    for (int i = 0; i < 6; i++) {
        *dst[i] = base ? base + off : NULL;
        off += sz[i];
    }
    return off;
}

static size_t linear_cache_floats(const AttnDims* d, const AttnHParams* hp) {
    LinCache k;
    return lin_cache_carve(&k, NULL, d, hp);
}

// positive weight w_tj of this head (without cottention's column weight)
static real lin_weight(int t, int j, const AttnHParams* hp, int T, real slope) {
    real w = 1.0f;
    if (lin_kind(hp) == F_COSFORMER) {
        real M = hp->v[HP_COS_LEN] > 0.0f ? hp->v[HP_COS_LEN] : (real)T;
        w = real_cos((real)3.14159265358979 * (real)(t - j) / (2.0f * M));
    }
    if (slope != 0.0f) w *= real_exp(-slope * (real)(t - j));
    return w;
}

// cottention's column weights colw_j = (j+1)^-sigmoid(c) and lnj_j = -ln(j+1), j < T
static real lin_colw(real* colw, real* lnj, real c, int T) {
    const real sg = 1.0f / (1.0f + real_exp(-c));
    for (int j = 0; j < T; j++) {
        lnj[j] = -real_log((real)(j + 1));
        colw[j] = real_exp(sg * lnj[j]);
    }
    return sg;
}

// FLatten's factors |r| / |r^p| of every row of x (B*T rows, stride ld) per channel group
static void lin_flatten_factors(real* f, const real* x, size_t ld, long BT, int C, int ng,
                                int nthreads) {
    const int gw = C / ng;
#pragma omp parallel for schedule(static) num_threads(nthreads)
    for (long r = 0; r < BT; r++)
        for (int g = 0; g < ng; g++)
            f[(size_t)r * ng + g] = lf_flatten_factor(x + (size_t)r * ld + (size_t)g * gw, gw);
}

// the features Phi_q, Phi_k of head h of batch row b
static void lin_features(real* Pq, real* Pk, const AttnCore* c, const LinCache* kc,
                         const AttnHParams* hp, const AttnDims* d, int b, int h, const real* W,
                         real* u) {
    const int T = d->T, hs = d->hs, F = lin_fdim(hp, hs), kind = lin_kind(hp);
    const size_t bt = (size_t)b * T;
    const real* q = c->q + bt * c->ldq + (size_t)h * hs;
    const real* k = c->k + bt * c->ldk + (size_t)h * hs;
    if (kind == F_FLATTEN) {
        const int ng = lin_fl_groups(hp, d->NH), g = ng > 1 ? h : 0;
        lf_flatten_rows(Pq, q, c->ldq, T, hs, kc->fq + bt * ng + g, (size_t)ng);
        lf_flatten_rows(Pk, k, c->ldk, T, hs, kc->fk + bt * ng + g, (size_t)ng);
        return;
    }
    lf_rows(Pq, q, c->ldq, T, hs, F, lin_role_kind(kind, 0), W, u);
    lf_rows(Pk, k, c->ldk, T, hs, F, lin_role_kind(kind, 1), W, u);
}

// the subtract form's factor c_t of row t (n = t + 1)
static real lin_inline_c(const AttnHParams* hp, int hs, int n) {
    if ((int)hp->v[HP_INLINE] == INL_PAPER) return 1.0f;
    return 1.0f / (real_sqrt((real)hs) * (real)n);
}

static void linear_forward(AttnLayer* L) {
    const AttnDims* d = &L->d;
    const int B = d->B, T = d->T, NH = d->NH, hs = d->hs;
    const AttnHParams* hp = L->hp;
    const int kind = lin_kind(hp), F = lin_fdim(hp, hs), zn = lin_znorm(hp);
    const int sub = lin_norm(hp) == N_SUBTRACT, cosv = lin_cos_value(hp);
    const real eps = hp->v[HP_EPS], ye = hp->v[HP_YAT_EPS];
    AttnCore c = attn_layer_core(L);
    attn_pos_forward(&c, L, L->qk_pos);
    LinCache kc;
    lin_cache_carve(&kc, L->cache, d, hp);
    const int nth = attn_workspace_threads(L->ws);
    if (kind == F_FLATTEN) {
        const int ng = lin_fl_groups(hp, NH);
        lin_flatten_factors(kc.fq, c.q, c.ldq, (long)B * T, d->C, ng, nth);
        lin_flatten_factors(kc.fk, c.k, c.ldk, (long)B * T, d->C, ng, nth);
    }
    attn_workspace_expect(L->ws, linear_fwd_scratch(d, hp));
#pragma omp parallel for collapse(2) schedule(static) num_threads(nth)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            real* Pq = attn_thread_scratch(L->ws);
            real* Pk = Pq + (size_t)T * F;
            real* Vn = Pk + (size_t)T * F;
            real* u = Vn + (size_t)T * F;
            real* Wr = u + hs;                // performer's random features (F, hs)
            real* colw = Wr + (size_t)F * hs; // cottention's column weights (T)
            real* lnj = colw + T;             // and -ln(j + 1) (T)
            const size_t bt = (size_t)b * T;
            const real* W = kind == F_HEDGEHOG ? L->tp[0] + (size_t)h * hs * hs : NULL;
            if (kind == F_PERFORMER) {
                attn_performer_features(Wr, F, hs, L->seed, L->layer, h, L->step,
                                        (int)hp->v[HP_REDRAW]);
                W = Wr;
            }
            lin_features(Pq, Pk, &c, &kc, hp, d, b, h, W, u);
            if (cosv) lin_colw(colw, lnj, L->tp[0][h], T);
            const real* V = c.v + bt * c.ldv + (size_t)h * hs;
            int ldv = (int)c.ldv;
            if (kind == F_GALERKIN) { // values LN(v_j)
                lf_rows(Vn, V, c.ldv, T, hs, hs, F_LNORM, NULL, u);
                V = Vn, ldv = hs;
            }
            real* A = L->att + ((size_t)b * NH + h) * T * T;
            real_gemm(0, 1, T, T, F, 1.0f, Pq, F, Pk, F, 0.0f, A, T);
            const real slope = c.score_bias_slopes ? c.score_bias_slopes[h] : 0.0f;
            real* Z = kc.Z + ((size_t)b * NH + h) * T;
            for (int t = 0; t < T; t++) {
                real* row = A + (size_t)t * T;
                const real n = (real)(t + 1);
                real z = 0.0f;
                for (int j = 0; j <= t; j++) {
                    if (kind == F_SLAY) row[j] = lf_yat_k(row[j], ye);
                    row[j] *= lin_weight(t, j, hp, T, slope) * (cosv ? colw[j] : 1.0f);
                    z += row[j];
                }
                if (sub) { // c_t (K - z / n) + 1 / n
                    const real ct = lin_inline_c(hp, hs, t + 1), shift = (1.0f - ct * z) / n;
                    Z[t] = z;
                    for (int j = 0; j <= t; j++)
                        row[j] = ct * row[j] + shift;
                } else {
                    Z[t] = zn == Z_SUM     ? z + eps
                           : zn == Z_SUM_N ? z + n * eps
                           : zn == Z_COUNT ? n
                                           : 1.0f;
                    const real inv = 1.0f / Z[t];
                    for (int j = 0; j <= t; j++)
                        row[j] *= inv;
                }
                memset(row + t + 1, 0, sizeof(real) * (size_t)(T - t - 1));
            }
            real_gemm(0, 0, T, hs, T, 1.0f, A, T, V, ldv, 0.0f,
                      L->out + bt * (size_t)d->C + (size_t)h * hs, d->C);
            if (kind == F_FLATTEN) { // o_t,c += b_c + sum_i w_c,i v_(t-i),c
                const real* cw = L->tp[0] + (size_t)h * hs * FL_K;
                const real* cb = L->tp[1] + (size_t)h * hs;
                for (int t = 0; t < T; t++) {
                    real* o = L->out + (bt + t) * (size_t)d->C + (size_t)h * hs;
                    for (int ch = 0; ch < hs; ch++) {
                        real s = cb[ch];
                        for (int i = 0; i < FL_K && i <= t; i++)
                            s += cw[ch * FL_K + i] * V[(size_t)(t - i) * ldv + ch];
                        o[ch] += s;
                    }
                }
            }
        }
    }
}

// the depthwise conv's backward of one (b, h): dv, and dw, db into the (b, h) slot
static void lin_conv_backward(const AttnLayer* L, const AttnCore* c, real* slot, int b, int h) {
    const int T = L->d.T, hs = L->d.hs, C = L->d.C;
    const size_t bt = (size_t)b * T;
    const real* cw = L->tp[0] + (size_t)h * hs * FL_K;
    const real* v = c->v + bt * c->ldv + (size_t)h * hs;
    real* dv = c->dv + bt * c->ldv + (size_t)h * hs;
    real* sb = slot + (size_t)hs * FL_K;
    for (int t = 0; t < T; t++) {
        const real* g = L->dout + (bt + t) * (size_t)C + (size_t)h * hs;
        for (int ch = 0; ch < hs; ch++) {
            sb[ch] += g[ch];
            for (int i = 0; i < FL_K && i <= t; i++) {
                dv[(size_t)(t - i) * c->ldv + ch] += cw[ch * FL_K + i] * g[ch];
                slot[ch * FL_K + i] += g[ch] * v[(size_t)(t - i) * c->ldv + ch];
            }
        }
    }
}

static void linear_backward(AttnLayer* L) {
    const AttnDims* d = &L->d;
    const int B = d->B, T = d->T, NH = d->NH, hs = d->hs, C = d->C;
    const AttnHParams* hp = L->hp;
    const int kind = lin_kind(hp), F = lin_fdim(hp, hs), zn = lin_znorm(hp);
    const int sub = lin_norm(hp) == N_SUBTRACT, cosv = lin_cos_value(hp);
    const int quot = !sub && (zn == Z_SUM || zn == Z_SUM_N); // Z_t depends on the row
    AttnCore c = attn_layer_core(L);
    AttnPosSave save;
    attn_pos_backward_begin(&c, &save, L, L->qk_pos);
    LinCache kc;
    lin_cache_carve(&kc, L->cache, d, hp);
    memset(kc.slots, 0, sizeof(real) * lin_slot_floats(d, hp));
    const size_t nfl = (size_t)hs * (FL_K + 1); // flatten slot: dw (hs, K), db (hs)
    const real ye = hp->v[HP_YAT_EPS];
    const int nth = attn_workspace_threads(L->ws);
    attn_workspace_expect(L->ws, linear_bwd_scratch(d, hp));
#pragma omp parallel for collapse(2) schedule(static) num_threads(nth)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            real* dA = attn_thread_scratch(L->ws);
            real* Pq = dA + (size_t)T * T;
            real* Pk = Pq + (size_t)T * F;
            real* dPq = Pk + (size_t)T * F;
            real* dPk = dPq + (size_t)T * F;
            real* Vn = dPk + (size_t)T * F;
            real* dVn = Vn + (size_t)T * F;
            real* u = dVn + (size_t)T * F;
            real* Wr = u + hs;             // performer's random features (F, hs)
            real* X = Wr + (size_t)F * hs; // slay, cottention: the cosines (T, T)
            real* colw = X + (size_t)T * T;
            real* lnj = colw + T;
            const size_t bt = (size_t)b * T, bh = (size_t)b * NH + h;
            const real* W = kind == F_HEDGEHOG ? L->tp[0] + (size_t)h * hs * hs : NULL;
            real* dW = kind == F_HEDGEHOG ? kc.slots + bh * hs * hs : NULL;
            if (kind == F_PERFORMER) {
                attn_performer_features(Wr, F, hs, L->seed, L->layer, h, L->step,
                                        (int)hp->v[HP_REDRAW]);
                W = Wr;
            }
            const real* q = c.q + bt * c.ldq + (size_t)h * hs;
            const real* k = c.k + bt * c.ldk + (size_t)h * hs;
            const real* v = c.v + bt * c.ldv + (size_t)h * hs;
            const real* dO = L->dout + bt * (size_t)C + (size_t)h * hs;
            const real* A = L->att + bh * T * T;
            const real* Z = kc.Z + bh * T;
            lin_features(Pq, Pk, &c, &kc, hp, d, b, h, W, u);
            if (kind == F_SLAY || cosv) real_gemm(0, 1, T, T, F, 1.0f, Pq, F, Pk, F, 0.0f, X, T);
            const real sg = cosv ? lin_colw(colw, lnj, L->tp[0][h], T) : 0.0f;
            real* dv = c.dv + bt * c.ldv + (size_t)h * hs;
            if (kind == F_GALERKIN) { // dA = dO LN(V)^T, dLN(V) = A^T dO, the LN VJP into dv
                lf_rows(Vn, v, c.ldv, T, hs, hs, F_LNORM, NULL, u);
                real_gemm(0, 1, T, T, hs, 1.0f, dO, C, Vn, hs, 0.0f, dA, T);
                real_gemm(1, 0, T, hs, T, 1.0f, A, T, dO, C, 0.0f, dVn, hs);
                for (int t = 0; t < T; t++)
                    lf_backward(dv + (size_t)t * c.ldv, NULL, dVn + (size_t)t * hs,
                                Vn + (size_t)t * hs, v + (size_t)t * c.ldv, hs, F_LNORM, NULL, u);
            } else { // dA = dO V^T, dV += A^T dO
                real_gemm(0, 1, T, T, hs, 1.0f, dO, C, v, (int)c.ldv, 0.0f, dA, T);
                real_gemm(1, 0, T, hs, T, 1.0f, A, T, dO, C, 1.0f, dv, (int)c.ldv);
            }
            if (kind == F_FLATTEN) lin_conv_backward(L, &c, kc.slots + bh * nfl, b, h);
            const real slope = c.score_bias_slopes ? c.score_bias_slopes[h] : 0.0f;
            real dc = 0.0f; // cottention: sum g_tj X_tj w_tj (-ln(j+1))
            for (int t = 0; t < T; t++) {
                real* row = dA + (size_t)t * T;
                const real* a = A + (size_t)t * T;
                real dot = 0.0f, inv = 1.0f;
                if (sub) {
                    for (int j = 0; j <= t; j++)
                        dot += row[j];
                    dot /= (real)(t + 1);
                    inv = lin_inline_c(hp, hs, t + 1);
                } else {
                    if (quot) // the quotient rule through Z_t (a count or 1 is constant)
                        for (int j = 0; j <= t; j++)
                            dot += a[j] * row[j];
                    inv = 1.0f / Z[t];
                }
                for (int j = 0; j <= t; j++) {
                    const real w = lin_weight(t, j, hp, T, slope) * (cosv ? colw[j] : 1.0f);
                    const real g = (row[j] - dot) * inv; // gradient of K_tj w_tj
                    if (cosv) dc += g * X[(size_t)t * T + j] * w * lnj[j];
                    row[j] = g * w;
                }
                if (kind == F_SLAY) // through the kernel: dc = dK kappa'(c)
                    for (int j = 0; j <= t; j++)
                        row[j] *= lf_yat_dk(X[(size_t)t * T + j], ye);
                memset(row + t + 1, 0, sizeof(real) * (size_t)(T - t - 1));
            }
            if (cosv) kc.slots[bh] = dc * sg * (1.0f - sg);
            if (kind == F_FLATTEN) { // dPhi into the (B,T,C) buffers: the map runs over channels
                attn_score_grad(dA, T, F, 1.0f, Pq, F, Pk, F, 0.0f,
                                kc.dPq + bt * C + (size_t)h * hs, C,
                                kc.dPk + bt * C + (size_t)h * hs, C);
                continue;
            }
            attn_score_grad(dA, T, F, 1.0f, Pq, F, Pk, F, 0.0f, dPq, F, dPk, F);
            real* dq = c.dq + bt * c.ldq + (size_t)h * hs;
            real* dk = c.dk + bt * c.ldk + (size_t)h * hs;
            for (int t = 0; t < T; t++) {
                if (kind == F_PERFORMER) {
                    lf_perf_backward(dq + (size_t)t * c.ldq, dPq + (size_t)t * F,
                                     Pq + (size_t)t * F, q + (size_t)t * c.ldq, hs, F, W);
                    lf_perf_backward(dk + (size_t)t * c.ldk, dPk + (size_t)t * F,
                                     Pk + (size_t)t * F, k + (size_t)t * c.ldk, hs, F, W);
                    continue;
                }
                lf_backward(dq + (size_t)t * c.ldq, dW, dPq + (size_t)t * F, Pq + (size_t)t * F,
                            q + (size_t)t * c.ldq, hs, lin_role_kind(kind, 0), W, u);
                lf_backward(dk + (size_t)t * c.ldk, dW, dPk + (size_t)t * F, Pk + (size_t)t * F,
                            k + (size_t)t * c.ldk, hs, lin_role_kind(kind, 1), W, u);
            }
        }
    }
    if (kind == F_FLATTEN) { // the focused map's VJP over each channel group of every row
        const int ng = lin_fl_groups(hp, NH), gw = C / ng;
        const long BT = (long)B * T;
#pragma omp parallel for schedule(static) num_threads(nth)
        for (long r = 0; r < BT; r++)
            for (int g = 0; g < ng; g++) {
                const size_t o = (size_t)g * gw;
                lf_flatten_backward(c.dq + (size_t)r * c.ldq + o, kc.dPq + (size_t)r * C + o,
                                    c.q + (size_t)r * c.ldq + o, gw);
                lf_flatten_backward(c.dk + (size_t)r * c.ldk + o, kc.dPk + (size_t)r * C + o,
                                    c.k + (size_t)r * c.ldk + o, gw);
            }
    }
    attn_pos_backward_end(&c, &save, L);
    if (!L->dtp[0]) return;
    for (int b = 0; b < B; b++) // parameter gradients: slots reduced over b in order
        for (int h = 0; h < NH; h++) {
            const size_t bh = (size_t)b * NH + h;
            if (kind == F_HEDGEHOG) {
                const size_t n = (size_t)hs * hs;
                for (size_t i = 0; i < n; i++)
                    L->dtp[0][(size_t)h * n + i] += kc.slots[bh * n + i];
            } else if (kind == F_FLATTEN) {
                const size_t nw = (size_t)hs * FL_K;
                const real* sw = kc.slots + bh * nfl;
                for (size_t i = 0; i < nw; i++)
                    L->dtp[0][(size_t)h * nw + i] += sw[i];
                for (int i = 0; i < hs; i++)
                    L->dtp[1][(size_t)h * hs + i] += sw[nw + i];
            } else if (cosv) {
                L->dtp[0][h] += kc.slots[bh];
            }
        }
}

const AttnVariant attn_linear = {
    .name = "linear",
    .formula = "A_tj = phi(q_t).phi(k_j) w_tj / (sum_{j<=t} phi(q_t).phi(k_j) w_tj + eps)",
    .source =
        "Katharopoulos 2020 (elu+1); Qin 2022 cosFormer; Zhang 2024 Hedgehog; Cao 2021 Galerkin; "
        "Han 2023 FLatten; Han 2024 InLine; Choromanski 2021 Performer FAVOR+; Mongaras 2024 "
        "Cottention; Luna 2026 SLAY (B6)",
    .reference = "paper, each feature map's own equations (elu1, relu, cosformer, hedgehog, "
                 "galerkin, performer, slay); "
                 "LeapLabTHU/InLine:models/inline_swin.py (norm = subtract, feature = identity); "
                 "LeapLabTHU/FLatten-Transformer:models/flatten_swin.py (flatten); "
                 "gmongaras/Cottention_Transformer:GPT_Trainer/GPTCosAttention.py (cottention)",
    .deviations =
        "causal rows throughout; InLine: subtract's scale 1/(sqrt(hs) n_t) is the code's, the "
        "paper's Eq. 5 omits it (attn.inline_scale = paper), no local residual; FLatten: norms "
        "over all C channels as the code (attn.flatten_norm = head: per head), no learnable "
        "per-channel scale or positional encoding on k, 1-D causal depthwise conv per head "
        "(the code: one 5x5 2-D conv shared by the heads); Cottention: v_j / (j+1)^sigmoid(c_h) "
        "as the code (attn.cos_stab = row: rows / n_t), x / sqrt(|x|^2 + 1e-6) for F.normalize",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .hparams = linear_hparams,
    .n_hparams = N_HP,
    .layer_check = linear_check,
    .layer_tensors = linear_tensors,
    .layer_cache_floats = linear_cache_floats,
    .layer_scratch_floats = linear_scratch,
    .layer_forward = linear_forward,
    .layer_backward = linear_backward,
    .ignores_inner = 1,
};
