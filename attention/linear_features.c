// attention/linear_features.c: the feature maps phi of causal linear attention (the layer, its
// row normalisations and weights are in attention/linear.c; declarations in linear_features.h).
//
// Feature maps (attn.feature, default elu1), applied per head to q_t and k_j alike:
//   elu1       phi(x) = elu(x) + 1 (x + 1 for x > 0, exp(x) else)               (dim hs)
//   relu       phi(x) = max(x, 0)                                               (dim hs)
//   cosformer  phi(x) = max(x, 0) with the layer's cos reweighting              (dim hs)
//   identity   phi(x) = x: InLine's default kernel (LeapLabTHU/InLine:models/inline_swin.py,
//              kernel_func = 'identity'); signed, so the divide normaliser is the count n_t
//   hedgehog   u = (I + W_h) x, phi(x) = [softmax(u); softmax(-u)]              (dim 2 hs)
//              tensor "phi_w" (NH, hs, hs) per layer, weight decay, init 0 (so the map starts
//              at W = I, the identity-initialised Hedgehog map); decay pulls it back to I.
//   galerkin   Cao 2021 "Choose a Transformer: Fourier or Galerkin" (NeurIPS, arXiv 2105.14995):
//              q as is (F_IDENT), LN(k_j) and LN(v_j) (F_LNORM) over the hs channels of a head,
//              eps 1e-5, without the paper's learnable affine.
//              Backward of LN: dx = r (dy - mean(dy) - y mean(dy y)), r = 1/sqrt(var + eps).
//   flatten    Han et al. 2023 "FLatten Transformer" (ICCV, arXiv 2308.00442): the focused map
//              phi(x) = |r| r^p / |r^p|, r = ReLU(x) + 1e-6, p = 3 (elementwise power), with both
//              norms over a group of channels: all C channels of q_t (k_j) before the split into
//              heads (the authors' code, LeapLabTHU/FLatten-Transformer:models/flatten_swin.py)
//              or the head's hs channels (attn.flatten_norm = head). Backward, with a = |r|,
//              u = r^p, w = u/|u| over the group: dr_i = (dy.w) r_i/a + p r_i^(p-1) a (dy_i -
//              w_i (w.dy))/|u|, dx = dr [x > 0] (dy.w sums over the whole group: across heads).
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
//   cottention, slay  the unit vectors x^ = x / sqrt(|x|^2 + 1e-6) (F_COSINE); backward
//              dx = r (dy - x^ (x^ . dy)), r = 1/sqrt(|x|^2 + 1e-6). The kernels built on them
//              (the cosine, the Yat kernel) are the layer's (attention/linear.c).
#include "attention/linear_features.h"

#include <math.h>
#include <string.h>

#include "attention/layer.h"
#include "attention/rowops.h"
#include "common/rng.h"

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
    double G[ATTN_PERFORMER_MAX_HS * ATTN_PERFORMER_MAX_HS];
    ASSERT(hs <= ATTN_PERFORMER_MAX_HS); // linear_check
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
static void lf_perf_forward(real* y, const real* x, int hs, int m, const real* W) {
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

void lf_perf_backward(real* dx, const real* dy, const real* y, const real* x, int hs, int m,
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

// phi of one vector x (hs) into y (F, the map's feature dimension); W = this head's phi_w
// (hedgehog) or NULL; u: hs scratch. Not for F_PERFORMER (lf_perf_forward) nor F_FLATTEN
// (lf_flatten_rows).
static void lf_forward(real* y, const real* x, int hs, int kind, const real* W, real* u) {
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

void lf_backward(real* dx, real* dW, const real* dy, const real* y, const real* x, int hs, int kind,
                 const real* W, real* du) {
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

real lf_flatten_factor(const real* x, int n) {
    real a = 0.0f, b = 0.0f;
    for (int i = 0; i < n; i++) {
        const real r = (x[i] > 0.0f ? x[i] : 0.0f) + FL_EPS;
        a += r * r;
        b += r * r * r * r * r * r;
    }
    return real_sqrt(a) / real_sqrt(b);
}

void lf_flatten_rows(real* Phi, const real* x, size_t ld, int T, int hs, const real* fac,
                     size_t fac_stride) {
    for (int t = 0; t < T; t++) {
        const real* xt = x + (size_t)t * ld;
        real* y = Phi + (size_t)t * hs;
        const real f = fac[(size_t)t * fac_stride];
        for (int i = 0; i < hs; i++) {
            const real r = (xt[i] > 0.0f ? xt[i] : 0.0f) + FL_EPS;
            y[i] = r * r * r * f;
        }
    }
}

// y = a w, a = |r|, w = u / |u|, u = r^p (over the group):
// dr_i = (dy . w) r_i / a + p r_i^(p-1) a (dy_i - w_i (w . dy)) / |u|, dx_i = dr_i [x_i > 0]
void lf_flatten_backward(real* dx, const real* dy, const real* x, int n) {
    real a = 0.0f, b = 0.0f;
    for (int i = 0; i < n; i++) {
        const real r = (x[i] > 0.0f ? x[i] : 0.0f) + FL_EPS;
        a += r * r;
        b += r * r * r * r * r * r;
    }
    a = real_sqrt(a), b = real_sqrt(b);
    real dw = 0.0f; // dy . w
    for (int i = 0; i < n; i++) {
        const real r = (x[i] > 0.0f ? x[i] : 0.0f) + FL_EPS;
        dw += dy[i] * r * r * r / b;
    }
    for (int i = 0; i < n; i++) {
        if (!(x[i] > 0.0f)) continue;
        const real r = x[i] + FL_EPS, w = r * r * r / b;
        dx[i] += dw * r / a + (real)FL_P * r * r * a * (dy[i] - w * dw) / b;
    }
}

void lf_rows(real* Phi, const real* x, size_t ld, int T, int hs, int F, int kind, const real* W,
             real* u) {
    for (int t = 0; t < T; t++) {
        if (kind == F_PERFORMER)
            lf_perf_forward(Phi + (size_t)t * F, x + (size_t)t * ld, hs, F, W);
        else
            lf_forward(Phi + (size_t)t * F, x + (size_t)t * ld, hs, kind, W, u);
    }
}
