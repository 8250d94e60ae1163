// attention/linear.c: causal linear attention in its quadratic (masked) form, with a choice of
// feature maps: elu+1, ReLU, cosFormer-style ReLU with cos reweighting, a learnable
// Hedgehog-style map, Galerkin's LayerNorm on keys and values and FLatten's focused map with its
// depthwise convolution on V; two row normalisations.
//
// Sources (VARIANTS.md B6): Katharopoulos et al. 2020 "Transformers are RNNs" (elu+1);
// Qin et al. 2022 "cosFormer: Rethinking Softmax in Attention" (ReLU features, reweighting
// cos(pi (i - j) / 2M)); Zhang et al. 2024 "The Hedgehog & the Porcupine" (learnable
// softmax feature map [softmax(Wx); softmax(-Wx)]).
//
// Per (batch, head), position t, keys j <= t (q, k after the position encoding):
//   K_tj = phi(q_t) . phi(k_j) * w_tj ,   Z_t = sum_{j<=t} K_tj + eps ,   A_tj = K_tj / Z_t
//   o_t  = sum_{j<=t} A_tj v_j
// with the positive weight w_tj = 1, times cos(pi (t - j) / (2M)) for cosformer (M =
// attn.cos_len, or the sequence length of the call when 0, so t - j < M keeps it positive),
// times exp(-slope_h (t - j)) under pos_encoding = alibi (the ALiBi bias exp'd, as softmax
// would see it). No score scale 1/sqrt(hs) (as in the papers). This is the exact causal
// form of the prefix-sum recurrence S_t = sum_{j<=t} phi(k_j) v_j^T; it costs O(T^2) like
// softmax attention but matches it in memory layout (att holds A for diagnostics).
//
// Feature maps (attn.feature, default elu1), applied per head to q_t and k_j alike:
//   elu1       phi(x) = elu(x) + 1 (x + 1 for x > 0, exp(x) else)               (dim hs)
//   relu       phi(x) = max(x, 0)                                               (dim hs)
//   cosformer  phi(x) = max(x, 0) with the cos reweighting above                (dim hs)
//   hedgehog   u = (I + W_h) x, phi(x) = [softmax(u); softmax(-u)]              (dim 2 hs)
//              tensor "phi_w" (NH, hs, hs) per layer, weight decay, init 0 (so the map starts
//              at W = I, the identity-initialised Hedgehog map); decay pulls it back to I.
//   galerkin   Cao 2021 "Choose a Transformer: Fourier or Galerkin" (NeurIPS, arXiv 2105.14995),
//              z = Q (LN(K)^T LN(V)) / n in its causal form: K_tj = q_t . LN(k_j) w_tj (q as is),
//              A_tj = K_tj / n_t (n_t = t + 1, the causal prefix count, no eps), o_t =
//              sum_j A_tj LN(v_j); LN over the hs channels of a head, eps 1e-5, without the
//              paper's learnable affine (weights may be signed; att holds A).
//              Backward: dA = dO LN(V)^T, dLN(V) = A^T dO, dK = dA w / n_t, and the LayerNorm
//              VJP dx = r (dy - mean(dy) - y mean(dy y)) for k and v (r = 1/sqrt(var + eps)).
//   flatten    Han et al. 2023 "FLatten Transformer: Vision Transformer using Focused Linear
//              Attention" (ICCV, arXiv 2308.00442): focused map phi(x) = |r| r^p / |r^p|, r =
//              ReLU(x) + 1e-6 (keeps the norms nonzero), p = 3 (elementwise power), plus the rank
//              restoring depthwise convolution on V, here causal along time with kernel 5:
//              o_t,c += b_c + sum_{i<5, i<=t} w_c,i v_(t-i),c. Tensors "dwc_w" (NH, hs, 5) decay,
//              N(0, 1/sqrt(15)) (PyTorch's Conv default spread for fan-in 5), "dwc_b" (NH, hs) 0.
//              Backward: with a = |r|, u = r^p, w = u/|u|: dr_i = (dy.w) r_i/a + p r_i^(p-1) a
//              (dy_i - w_i (w.dy))/|u|, dx = dr [x > 0]; conv: dv_(t-i),c += w_c,i dO_t,c,
//              dw_c,i += dO_t,c v_(t-i),c, db_c += dO_t,c (per (b,h) slots, reduced over b).
//   performer  Choromanski et al. 2021 "Rethinking Attention with Performers" (ICLR, arXiv
//              2009.14794), FAVOR+: with x' = x / hs^(1/4) and m = attn.rf_m (0: 2 hs) random
//              rows w_i, phi_i(x) = exp(w_i . x' - |x'|^2 / 2) / sqrt(m), positive, so that
//              E phi(q) . phi(k) = exp(q . k / sqrt(hs)) (the softmax kernel). W is orthogonal
//              random features: blocks of hs rows, Gaussian matrices orthonormalised by
//              Gram-Schmidt, row i scaled by the norm of an independent N(0, I_hs) vector
//              (attn_performer_features). Redrawn every attn.redraw training steps (0: one draw
//              for the run): draw e = floor(step / redraw) of head h, layer l is a pure function
//              of (seed, l, h, e), so resume and any thread count see the same features;
//              evaluation (step -1) uses draw 0. Backward: dx' = sum_i dphi_i phi_i (w_i - x'),
//              dx = dx' / hs^(1/4). Features exp(.) are not max-stabilised (|x'|^2 up to ~80).
//   cottention Mongaras et al. 2024 "Cottention: Linear Transformers With Cosine Attention"
//              (arXiv 2409.18747): cosine similarity K_tj = q^_t . k^_j w_tj with
//              x^ = x / sqrt(|x|^2 + 1e-6). The cosine is signed, so under divide the row
//              normaliser is the causal prefix count n_t = t + 1 (as galerkin; no eps, no
//              quotient rule) rather than the signed prefix sum; subtract works as for any map.
//              The paper's learned length-scaling stabiliser is not included (unverified).
//              Backward: dx = r (dy - x^ (x^ . dy)), r = 1/sqrt(|x|^2 + 1e-6).
//   slay       Luna, Bouhsine, Choromanski 2026 "SLAY: Geometry-Aware Spherical Linearized
//              Attention with Yat-Kernel" (arXiv 2602.04915): the spherical Yat kernel
//              (q^ . k^)^2 / (|q^ - k^|^2 + eps_y) on unit q^, k^, i.e. kappa(c) = c^2 / (2 - 2c +
//              eps_y) of the cosine c (eps_y = attn.yat_eps). Computed exactly in this quadratic
//              form (the paper's Bernstein / Gauss-Laguerre mixture with positive random features
//              is its linear-time approximation of this kernel). kappa >= 0, so the divide
//              normaliser applies. Backward: dc = dK kappa'(c), kappa'(c) = (2c (2 - 2c + eps_y)
//              + 2c^2) / (2 - 2c + eps_y)^2, then the cosine features' VJP.
// Row normalisation (attn.norm, default divide):
//   divide     A_tj = K_tj / Z_t as above (the linear-attention prefix normaliser)
//   subtract   A_tj = K_tj - (1/n_t) sum_{l<=t} K_tl + 1/n_t, n_t = t + 1: InLine (Han et al.
//              2024, "Bridging the Divide: Reconsidering Softmax and Linear Attention", NeurIPS,
//              arXiv 2412.06590), the injective form that subtracts the causal prefix mean instead
//              of dividing by the prefix sum; rows sum to 1, weights may be negative; eps unused.
//              The paper's local-attention residual is not part of this layer.
// Hyperparameters: attn.feature = elu1 | relu | cosformer | hedgehog | galerkin | flatten |
// performer | cottention | slay; attn.rf_m, attn.redraw (performer); attn.yat_eps (slay); attn.eps
// = 1e-6 (the denominator guard: with ReLU features a row can be all zero, then A = 0);
// attn.cos_len = 0; attn.norm = divide | subtract. The inner row map (attn.inner) is not used:
// linear attention replaces it.
//
// Backward, given dO (per (b,h)):
//   dA = dO V^T ;  dV += A^T dO
//   dK_tj = (dA_tj - sum_l A_tl dA_tl) / Z_t    (quotient rule through Z_t; divide)
//   dK_tj = dA_tj - (1/n_t) sum_{l<=t} dA_tl      (subtract: the mean's VJP)
//   dKraw = dK * w   (j <= t only) ;  dPhi_q = dKraw Phi_k ;  dPhi_k = dKraw^T Phi_q
//   features: elu1 dx = dphi * (x > 0 ? 1 : phi); relu dx = dphi * [x > 0];
//   hedgehog (f+, f- the two softmaxes): du = f+ (df+ - <f+, df+>) - f- (df- - <f-, df->),
//            dx = du + W_h^T du,  dW_h += du x^T
// The W_h gradient is accumulated per (b, h) and reduced over b in index order (thread-count
// independent). Products through sgemm on per-thread scratch.
#include <math.h>
#include <string.h>

#include "attention/attention.h"
#include "attention/rowops.h"
#include "common/matmul.h"
#include "common/rng.h"

enum {
    F_ELU1,
    F_RELU,
    F_COSFORMER,
    F_HEDGEHOG,
    F_GALERKIN,
    F_FLATTEN,
    F_PERFORMER,
    F_COSINE,
    F_SLAY
};
enum { F_IDENT = 100, F_LNORM }; // galerkin's maps of q (identity) and of k, v (LayerNorm)
#define GAL_LN_EPS 1e-5f
#define FL_P       3     // FLatten focusing factor p
#define FL_K       5     // FLatten causal depthwise kernel length
#define FL_EPS     1e-6f // FLatten: r = relu(x) + eps keeps the norms nonzero

static const AttnHParamSpec linear_hparams[] = {
    {"feature", F_ELU1, 0, 0,
     "elu1|relu|cosformer|hedgehog|galerkin|flatten|performer|cottention|slay",
     "feature map phi: elu+1, ReLU, ReLU with cos((t-j) pi/2M) reweighting, learnable softmax map, "
     "Galerkin (q . LN(k_j) / n_t, values LN(v_j)), FLatten focused map p = 3 + causal depthwise "
     "conv on v, Performer FAVOR+ positive orthogonal random features, Cottention cosine "
     "(q^.k^ / n_t), SLAY spherical Yat kernel c^2/(2 - 2c + yat_eps) of the cosine c"},
    {"eps", 1e-6f, 0.0f, 1.0f, NULL, "added to the row normaliser sum_j phi(q).phi(k_j)"},
    {"cos_len", 0.0f, 0.0f, 1e9f, NULL, "cosformer M (0: the sequence length of the call)"},
    {"norm", 0, 0, 0, "divide|subtract",
     "row normaliser: divide by the causal prefix sum, or InLine: subtract the prefix mean, + 1/n"},
    {"rf_m", 0.0f, 0.0f, 4096.0f, NULL,
     "performer: number of random features, integer (0: 2 x head size)"},
    {"redraw", 0.0f, 0.0f, 1e9f, NULL,
     "performer: redraw the random features every this many training steps, integer (0: one "
     "draw for the run)"},
    {"yat_eps", 1e-2f, 1e-6f, 10.0f, NULL, "slay: eps of the Yat kernel c^2 / (2 - 2c + eps)"},
};

enum { N_DIVIDE, N_SUBTRACT };

static int lin_norm(const AttnHParams* hp) {
    return (int)hp->v[3];
}

static int lin_kind(const AttnHParams* hp) {
    return (int)hp->v[0];
}

// the map applied to queries (role 0) and keys (role 1)
static int lin_role_kind(int kind, int role) {
    if (kind != F_GALERKIN) return kind;
    return role ? F_LNORM : F_IDENT;
}

static int lin_fdim(const AttnHParams* hp, int hs) {
    if (lin_kind(hp) == F_PERFORMER) return hp->v[4] > 0.0f ? (int)hp->v[4] : 2 * hs;
    return lin_kind(hp) == F_HEDGEHOG ? 2 * hs : hs;
}

// the row normaliser under divide is the prefix count n_t (galerkin, cottention)
static int lin_count_norm(int kind) {
    return kind == F_GALERKIN || kind == F_COSINE;
}

// cottention and slay share the unit-normalised features
static int lin_role_kind2(int kind, int role) {
    return kind == F_SLAY ? F_COSINE : lin_role_kind(kind, role);
}

#define COS_EPS 1e-6f

// Performer's orthogonal random features of head h, layer `layer`: W (m, hs), draw
// e = floor(step / redraw) (0 when redraw = 0 or step < 0), from (seed, layer, h, e) only.
void attn_performer_features(real* W, int m, int hs, uint64_t seed, int layer, int h, long step,
                             int redraw) {
    const long e = redraw > 0 && step >= 0 ? step / redraw : 0;
    uint64_t s = rowops_mix64(seed ^ 0x5045524641564fULL); // "PERFAVO"
    s = rowops_mix64(s ^ (uint64_t)(layer + 1));
    s = rowops_mix64(s ^ ((uint64_t)(h + 1) << 20));
    s = rowops_mix64(s ^ ((uint64_t)e << 32));
    Rng r;
    rng_seed(&r, s);
    double G[64 * 64];
    ASSERT(hs <= 64);
    for (int b0 = 0; b0 < m; b0 += hs) {
        for (int i = 0; i < hs * hs; i++)
            G[i] = (double)rng_normal(&r);
        for (int i = 0; i < hs; i++) { // modified Gram-Schmidt on the rows
            double* gi = G + (size_t)i * hs;
            for (int j = 0; j < i; j++) {
                const double* gj = G + (size_t)j * hs;
                double d = 0;
                for (int c = 0; c < hs; c++)
                    d += gi[c] * gj[c];
                for (int c = 0; c < hs; c++)
                    gi[c] -= d * gj[c];
            }
            double n = 0;
            for (int c = 0; c < hs; c++)
                n += gi[c] * gi[c];
            n = sqrt(n);
            for (int c = 0; c < hs; c++)
                gi[c] /= n;
        }
        for (int i = 0; i < hs && b0 + i < m; i++) { // row norms of Gaussian vectors
            double n = 0;
            for (int c = 0; c < hs; c++) {
                const double z = (double)rng_normal(&r);
                n += z * z;
            }
            n = sqrt(n);
            for (int c = 0; c < hs; c++)
                W[(size_t)(b0 + i) * hs + c] = (real)(n * G[(size_t)i * hs + c]);
        }
    }
}

// phi(x) of Performer: y (m) from W (m, hs)
static void perf_forward(real* y, const real* x, int hs, int m, const real* W) {
    const real s = 1.0f / real_sqrt(real_sqrt((real)hs)), inv = 1.0f / real_sqrt((real)m);
    real x2 = 0.0f;
    for (int c = 0; c < hs; c++)
        x2 += x[c] * x[c];
    x2 *= s * s;
    for (int i = 0; i < m; i++) {
        real d = 0.0f;
        for (int c = 0; c < hs; c++)
            d += W[(size_t)i * hs + c] * x[c];
        y[i] = real_exp(d * s - 0.5f * x2) * inv;
    }
}

static void perf_backward(real* dx, const real* dy, const real* y, const real* x, int hs, int m,
                          const real* W) {
    const real s = 1.0f / real_sqrt(real_sqrt((real)hs));
    real g = 0.0f; // sum_i dy_i y_i
    for (int i = 0; i < m; i++)
        g += dy[i] * y[i];
    for (int c = 0; c < hs; c++) {
        real a = 0.0f;
        for (int i = 0; i < m; i++)
            a += dy[i] * y[i] * W[(size_t)i * hs + c];
        dx[c] += s * (a - g * s * x[c]); // d/dx of (w.x s - s^2 |x|^2 / 2)
    }
}

// the Yat kernel of a cosine and its derivative
static real yat_k(real c, real e) {
    return c * c / (2.0f - 2.0f * c + e);
}
static real yat_dk(real c, real e) {
    const real den = 2.0f - 2.0f * c + e;
    return (2.0f * c * den + 2.0f * c * c) / (den * den);
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
    if (lin_kind(hp) != F_HEDGEHOG) return 0;
    out[0] = (AttnTensorSpec){.name = "phi_w",
                              .ndim = 3,
                              .shape = {d->NH, d->hs, d->hs},
                              .decay = 1,
                              .init = ATTN_INIT_ZERO};
    return 1;
}

// per-thread scratch, F = the feature dimension: forward three (T, F) and an hs vector; backward
// a (T, T) plane, six (T, F) and an hs vector
static size_t linear_fwd_scratch(const AttnDims* d, const AttnHParams* hp) {
    const size_t F = (size_t)lin_fdim(hp, d->hs);
    return 3 * (size_t)d->T * F + (size_t)d->hs + F * (size_t)d->hs;
}

static size_t linear_bwd_scratch(const AttnDims* d, const AttnHParams* hp) {
    const size_t F = (size_t)lin_fdim(hp, d->hs);
    return 2 * (size_t)d->T * d->T + 6 * (size_t)d->T * F + (size_t)d->hs + F * (size_t)d->hs;
}

static size_t linear_scratch(const AttnDims* d, const AttnHParams* hp) {
    return linear_bwd_scratch(d, hp); // >= the forward's
}

static size_t linear_cache_floats(const AttnDims* d, const AttnHParams* hp) {
    size_t n = (size_t)d->B * d->NH * d->T;                                        // Z
    if (lin_kind(hp) == F_HEDGEHOG) n += (size_t)d->B * d->NH * d->hs * d->hs;     // dW slots
    if (lin_kind(hp) == F_FLATTEN) n += (size_t)d->B * d->NH * d->hs * (FL_K + 1); // dwc slots
    return n;
}

static void softmax_vec(real* y, const real* u, real sign, int n) {
    real m = -INFINITY;
    for (int i = 0; i < n; i++)
        m = real_fmax(m, sign * u[i]);
    real s = 0.0f;
    for (int i = 0; i < n; i++) {
        y[i] = real_exp(sign * u[i] - m);
        s += y[i];
    }
    for (int i = 0; i < n; i++)
        y[i] /= s;
}

// phi of one vector x (hs) into y (F); W = this head's phi_w (hedgehog) or NULL; u: hs scratch
static void feat_forward(real* y, const real* x, int hs, int kind, const real* W, real* u) {
    switch (kind) {
    case F_ELU1:
        for (int i = 0; i < hs; i++)
            y[i] = x[i] > 0.0f ? x[i] + 1.0f : real_exp(x[i]);
        break;
    case F_IDENT:
        memcpy(y, x, sizeof(real) * (size_t)hs);
        break;
    case F_COSINE: {
        real n = 0.0f;
        for (int i = 0; i < hs; i++)
            n += x[i] * x[i];
        const real r = 1.0f / real_sqrt(n + COS_EPS);
        for (int i = 0; i < hs; i++)
            y[i] = x[i] * r;
        break;
    }
    case F_FLATTEN: { // r = relu(x) + eps, y = |r| r^p / |r^p|
        real a = 0.0f, b = 0.0f;
        for (int i = 0; i < hs; i++) {
            const real r = (x[i] > 0.0f ? x[i] : 0.0f) + FL_EPS;
            y[i] = r * r * r;
            a += r * r;
            b += y[i] * y[i];
        }
        const real f = real_sqrt(a) / real_sqrt(b);
        for (int i = 0; i < hs; i++)
            y[i] *= f;
        break;
    }
    case F_LNORM: {
        real m = 0.0f, var = 0.0f;
        for (int i = 0; i < hs; i++)
            m += x[i];
        m /= (real)hs;
        for (int i = 0; i < hs; i++)
            var += (x[i] - m) * (x[i] - m);
        const real r = 1.0f / real_sqrt(var / (real)hs + GAL_LN_EPS);
        for (int i = 0; i < hs; i++)
            y[i] = (x[i] - m) * r;
        break;
    }
    case F_HEDGEHOG:
        for (int i = 0; i < hs; i++) {
            real s = x[i];
            for (int j = 0; j < hs; j++)
                s += W[(size_t)i * hs + j] * x[j];
            u[i] = s;
        }
        softmax_vec(y, u, 1.0f, hs);
        softmax_vec(y + hs, u, -1.0f, hs);
        break;
    default: // relu, cosformer
        for (int i = 0; i < hs; i++)
            y[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    }
}

// dx += J^T dy; dW += (hedgehog) ; du: hs scratch
static void feat_backward(real* dx, real* dW, const real* dy, const real* y, const real* x, int hs,
                          int kind, const real* W, real* du) {
    switch (kind) {
    case F_ELU1:
        for (int i = 0; i < hs; i++)
            dx[i] += dy[i] * (x[i] > 0.0f ? 1.0f : y[i]);
        break;
    case F_IDENT:
        for (int i = 0; i < hs; i++)
            dx[i] += dy[i];
        break;
    case F_COSINE: { // y = x r: dx = r (dy - y (y . dy))
        real n = 0.0f, yd = 0.0f;
        for (int i = 0; i < hs; i++) {
            n += x[i] * x[i];
            yd += y[i] * dy[i];
        }
        const real r = 1.0f / real_sqrt(n + COS_EPS);
        for (int i = 0; i < hs; i++)
            dx[i] += r * (dy[i] - y[i] * yd);
        break;
    }
    case F_FLATTEN: { // y = a w, a = |r|, w = u / |u|, u = r^p:
        // dr_i = (dy . w) r_i / a + p r_i^(p-1) a (dy_i - w_i (w . dy)) / |u|
        real a = 0.0f, b = 0.0f, dw = 0.0f;
        for (int i = 0; i < hs; i++) {
            const real r = (x[i] > 0.0f ? x[i] : 0.0f) + FL_EPS;
            a += r * r;
            b += r * r * r * r * r * r;
        }
        a = real_sqrt(a), b = real_sqrt(b);
        for (int i = 0; i < hs; i++)
            dw += dy[i] * y[i] / a; // y / a = w
        for (int i = 0; i < hs; i++) {
            if (!(x[i] > 0.0f)) continue;
            const real r = x[i] + FL_EPS, w = y[i] / a;
            dx[i] += dw * r / a + (real)FL_P * r * r * a * (dy[i] - w * dw) / b;
        }
        break;
    }
    case F_LNORM: { // y = (x - m) r: dx = r (dy - mean(dy) - y mean(dy y))
        real m = 0.0f, var = 0.0f, my = 0.0f, mdy = 0.0f;
        for (int i = 0; i < hs; i++)
            m += x[i];
        m /= (real)hs;
        for (int i = 0; i < hs; i++)
            var += (x[i] - m) * (x[i] - m);
        const real r = 1.0f / real_sqrt(var / (real)hs + GAL_LN_EPS);
        for (int i = 0; i < hs; i++) {
            mdy += dy[i];
            my += dy[i] * y[i];
        }
        mdy /= (real)hs;
        my /= (real)hs;
        for (int i = 0; i < hs; i++)
            dx[i] += r * (dy[i] - mdy - y[i] * my);
        break;
    }
    case F_HEDGEHOG: {
        const real* fp = y;
        const real* fm = y + hs;
        real dp = 0.0f, dm = 0.0f;
        for (int i = 0; i < hs; i++) {
            dp += fp[i] * dy[i];
            dm += fm[i] * dy[hs + i];
        }
        for (int i = 0; i < hs; i++)
            du[i] = fp[i] * (dy[i] - dp) - fm[i] * (dy[hs + i] - dm);
        for (int j = 0; j < hs; j++) {
            real s = du[j];
            for (int i = 0; i < hs; i++)
                s += W[(size_t)i * hs + j] * du[i];
            dx[j] += s;
        }
        for (int i = 0; i < hs; i++)
            for (int j = 0; j < hs; j++)
                dW[(size_t)i * hs + j] += du[i] * x[j];
        break;
    }
    default:
        for (int i = 0; i < hs; i++)
            dx[i] += x[i] > 0.0f ? dy[i] : 0.0f;
        break;
    }
}

// positive weight w_tj of this head
static real lin_weight(int t, int j, const AttnHParams* hp, int T, real slope) {
    real w = 1.0f;
    if (lin_kind(hp) == F_COSFORMER) {
        real M = hp->v[2] > 0.0f ? hp->v[2] : (real)T;
        w = real_cos(3.14159265358979f * (real)(t - j) / (2.0f * M));
    }
    if (slope != 0.0f) w *= real_exp(-slope * (real)(t - j));
    return w;
}

// features of the T rows of one (b,h) head view x (row stride ld) into Phi (T, F)
static void feat_rows(real* Phi, const real* x, size_t ld, int T, int hs, int F, int kind,
                      const real* W, real* u) {
    for (int t = 0; t < T; t++) {
        if (kind == F_PERFORMER)
            perf_forward(Phi + (size_t)t * F, x + (size_t)t * ld, hs, F, W);
        else
            feat_forward(Phi + (size_t)t * F, x + (size_t)t * ld, hs, kind, W, u);
    }
}

static void linear_forward(AttnLayer* L) {
    const AttnDims* d = &L->d;
    const int B = d->B, T = d->T, NH = d->NH, hs = d->hs;
    const AttnHParams* hp = L->hp;
    const int kind = lin_kind(hp), F = lin_fdim(hp, hs);
    const real eps = hp->v[1];
    AttnCore c = attn_layer_core(L);
    attn_pos_forward(&c, L, L->qk_pos);
    real* Zs = L->cache;
    const int gal = kind == F_GALERKIN, cnt = lin_count_norm(kind);
    const real ye = hp->v[6];
    attn_workspace_reserve(L->ws, linear_fwd_scratch(d, hp));
#pragma omp parallel for collapse(2) schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            real* Pq = attn_thread_scratch(L->ws);
            real* Pk = Pq + (size_t)T * F;
            real* Vn = Pk + (size_t)T * F;
            real* u = Vn + (size_t)T * F;
            real* Wr = u + hs; // performer's random features (F, hs)
            const size_t bt = (size_t)b * T;
            const real* W = kind == F_HEDGEHOG ? L->tp[0] + (size_t)h * hs * hs : NULL;
            if (kind == F_PERFORMER) {
                attn_performer_features(Wr, F, hs, L->seed, L->layer, h, L->step, (int)hp->v[5]);
                W = Wr;
            }
            feat_rows(Pq, c.q + bt * c.ldq + (size_t)h * hs, c.ldq, T, hs, F,
                      lin_role_kind2(kind, 0), W, u);
            feat_rows(Pk, c.k + bt * c.ldk + (size_t)h * hs, c.ldk, T, hs, F,
                      lin_role_kind2(kind, 1), W, u);
            const real* V = c.v + bt * c.ldv + (size_t)h * hs;
            int ldv = (int)c.ldv;
            if (gal) { // galerkin: values LN(v_j)
                feat_rows(Vn, V, c.ldv, T, hs, hs, F_LNORM, NULL, u);
                V = Vn, ldv = hs;
            }
            real* A = L->att + ((size_t)b * NH + h) * T * T;
            real_gemm(0, 1, T, T, F, 1.0f, Pq, F, Pk, F, 0.0f, A, T);
            const real slope = c.score_bias_slopes ? c.score_bias_slopes[h] : 0.0f;
            real* Z = Zs + ((size_t)b * NH + h) * T;
            for (int t = 0; t < T; t++) {
                real* row = A + (size_t)t * T;
                real z = lin_norm(hp) == N_SUBTRACT || cnt ? 0.0f : eps;
                for (int j = 0; j <= t; j++) {
                    if (kind == F_SLAY) row[j] = yat_k(row[j], ye);
                    row[j] *= lin_weight(t, j, hp, T, slope);
                    z += row[j];
                }
                if (lin_norm(hp) == N_SUBTRACT) {
                    const real inv_n = 1.0f / (real)(t + 1), shift = inv_n - z * inv_n;
                    Z[t] = z;
                    for (int j = 0; j <= t; j++)
                        row[j] += shift;
                } else {
                    Z[t] = cnt ? (real)(t + 1) : z; // galerkin, cottention: 1/n_t
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

static void linear_backward(AttnLayer* L) {
    const AttnDims* d = &L->d;
    const int B = d->B, T = d->T, NH = d->NH, hs = d->hs;
    const AttnHParams* hp = L->hp;
    const int kind = lin_kind(hp), F = lin_fdim(hp, hs);
    AttnCore c = attn_layer_core(L);
    AttnPosSave save;
    attn_pos_backward_begin(&c, &save, L, L->qk_pos);
    const real* Zs = L->cache;
    real* dWslots = L->cache + (size_t)B * NH * T;
    if (kind == F_HEDGEHOG) memset(dWslots, 0, sizeof(real) * (size_t)B * NH * hs * hs);
    const size_t nfl = (size_t)hs * (FL_K + 1); // flatten slot: dw (hs, K), db (hs)
    if (kind == F_FLATTEN) memset(dWslots, 0, sizeof(real) * (size_t)B * NH * nfl);
    const int gal = kind == F_GALERKIN, cnt = lin_count_norm(kind);
    const real ye = hp->v[6];
    attn_workspace_reserve(L->ws, linear_bwd_scratch(d, hp));
#pragma omp parallel for collapse(2) schedule(static) num_threads(attn_workspace_threads(L->ws))
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
            real* X = Wr + (size_t)F * hs; // slay: the cosines (T, T)
            const size_t bt = (size_t)b * T;
            const real* W = kind == F_HEDGEHOG ? L->tp[0] + (size_t)h * hs * hs : NULL;
            real* dW = kind == F_HEDGEHOG ? dWslots + ((size_t)b * NH + h) * hs * hs : NULL;
            if (kind == F_PERFORMER) {
                attn_performer_features(Wr, F, hs, L->seed, L->layer, h, L->step, (int)hp->v[5]);
                W = Wr;
            }
            const real* q = c.q + bt * c.ldq + (size_t)h * hs;
            const real* k = c.k + bt * c.ldk + (size_t)h * hs;
            const real* v = c.v + bt * c.ldv + (size_t)h * hs;
            const real* dO = L->dout + bt * (size_t)d->C + (size_t)h * hs;
            const real* A = L->att + ((size_t)b * NH + h) * T * T;
            const real* Z = Zs + ((size_t)b * NH + h) * T;
            feat_rows(Pq, q, c.ldq, T, hs, F, lin_role_kind2(kind, 0), W, u);
            feat_rows(Pk, k, c.ldk, T, hs, F, lin_role_kind2(kind, 1), W, u);
            if (kind == F_SLAY) real_gemm(0, 1, T, T, F, 1.0f, Pq, F, Pk, F, 0.0f, X, T);
            real* dv = c.dv + bt * c.ldv + (size_t)h * hs;
            if (gal) { // dA = dO LN(V)^T, dLN(V) = A^T dO, then the LayerNorm VJP into dv
                feat_rows(Vn, v, c.ldv, T, hs, hs, F_LNORM, NULL, u);
                real_gemm(0, 1, T, T, hs, 1.0f, dO, d->C, Vn, hs, 0.0f, dA, T);
                real_gemm(1, 0, T, hs, T, 1.0f, A, T, dO, d->C, 0.0f, dVn, hs);
                for (int t = 0; t < T; t++)
                    feat_backward(dv + (size_t)t * c.ldv, NULL, dVn + (size_t)t * hs,
                                  Vn + (size_t)t * hs, v + (size_t)t * c.ldv, hs, F_LNORM, NULL, u);
            } else { // dA = dO V^T, dV += A^T dO
                real_gemm(0, 1, T, T, hs, 1.0f, dO, d->C, v, (int)c.ldv, 0.0f, dA, T);
                real_gemm(1, 0, T, hs, T, 1.0f, A, T, dO, d->C, 1.0f, dv, (int)c.ldv);
            }
            if (kind == F_FLATTEN) { // the depthwise conv: dv, dw, db
                const real* cw = L->tp[0] + (size_t)h * hs * FL_K;
                real* sw = dWslots + ((size_t)b * NH + h) * nfl;
                real* sb = sw + (size_t)hs * FL_K;
                for (int t = 0; t < T; t++) {
                    const real* g = dO + (size_t)t * d->C;
                    for (int ch = 0; ch < hs; ch++) {
                        sb[ch] += g[ch];
                        for (int i = 0; i < FL_K && i <= t; i++) {
                            dv[(size_t)(t - i) * c.ldv + ch] += cw[ch * FL_K + i] * g[ch];
                            sw[ch * FL_K + i] += g[ch] * v[(size_t)(t - i) * c.ldv + ch];
                        }
                    }
                }
            }
            const real slope = c.score_bias_slopes ? c.score_bias_slopes[h] : 0.0f;
            for (int t = 0; t < T; t++) {
                real* row = dA + (size_t)t * T;
                const real* a = A + (size_t)t * T;
                real dot = 0.0f, inv = 1.0f;
                if (lin_norm(hp) == N_SUBTRACT) {
                    for (int j = 0; j <= t; j++)
                        dot += row[j];
                    dot /= (real)(t + 1);
                } else {
                    if (!cnt) // the quotient rule through Z_t (a count 1/n_t is constant)
                        for (int j = 0; j <= t; j++)
                            dot += a[j] * row[j];
                    inv = 1.0f / Z[t];
                }
                for (int j = 0; j <= t; j++)
                    row[j] = (row[j] - dot) * inv * lin_weight(t, j, hp, T, slope);
                if (kind == F_SLAY) // through the kernel: dc = dK kappa'(c)
                    for (int j = 0; j <= t; j++)
                        row[j] *= yat_dk(X[(size_t)t * T + j], ye);
                memset(row + t + 1, 0, sizeof(real) * (size_t)(T - t - 1));
            }
            real_gemm(0, 0, T, F, T, 1.0f, dA, T, Pk, F, 0.0f, dPq, F);
            real_gemm(1, 0, T, F, T, 1.0f, dA, T, Pq, F, 0.0f, dPk, F);
            real* dq = c.dq + bt * c.ldq + (size_t)h * hs;
            real* dk = c.dk + bt * c.ldk + (size_t)h * hs;
            for (int t = 0; t < T; t++) {
                if (kind == F_PERFORMER) {
                    perf_backward(dq + (size_t)t * c.ldq, dPq + (size_t)t * F, Pq + (size_t)t * F,
                                  q + (size_t)t * c.ldq, hs, F, W);
                    perf_backward(dk + (size_t)t * c.ldk, dPk + (size_t)t * F, Pk + (size_t)t * F,
                                  k + (size_t)t * c.ldk, hs, F, W);
                    continue;
                }
                feat_backward(dq + (size_t)t * c.ldq, dW, dPq + (size_t)t * F, Pq + (size_t)t * F,
                              q + (size_t)t * c.ldq, hs, lin_role_kind2(kind, 0), W, u);
                feat_backward(dk + (size_t)t * c.ldk, dW, dPk + (size_t)t * F, Pk + (size_t)t * F,
                              k + (size_t)t * c.ldk, hs, lin_role_kind2(kind, 1), W, u);
            }
        }
    }
    attn_pos_backward_end(&c, &save, L);
    if (kind == F_HEDGEHOG && L->dtp[0]) {
        const size_t n = (size_t)hs * hs;
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (size_t i = 0; i < n; i++)
                    L->dtp[0][(size_t)h * n + i] += dWslots[((size_t)b * NH + h) * n + i];
    }
    if (kind == F_FLATTEN && L->dtp[0]) {
        const size_t nw = (size_t)hs * FL_K;
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) {
                const real* sw = dWslots + ((size_t)b * NH + h) * nfl;
                for (size_t i = 0; i < nw; i++)
                    L->dtp[0][(size_t)h * nw + i] += sw[i];
                for (int i = 0; i < hs; i++)
                    L->dtp[1][(size_t)h * hs + i] += sw[nw + i];
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
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .hparams = linear_hparams,
    .n_hparams = 7,
    .layer_tensors = linear_tensors,
    .layer_cache_floats = linear_cache_floats,
    .layer_scratch_floats = linear_scratch,
    .layer_forward = linear_forward,
    .layer_backward = linear_backward,
    .ignores_inner = 1,
};
