// attention/multiscreen.c: screening attention (Multiscreen): unit-normalised q, k, v, each key
// accepted or rejected against an absolute similarity threshold, no row normalisation, a
// TanhNorm on the head output and a gate.
//
// Forward, per (batch b, head h), rows i and keys j <= i, d = i - j:
//   q^_i = q_i / |q_i|, k^_j = k_j / |k_j|, v^_j = v_j / |v_j|   (|x| = sqrt(sum x^2 + 1e-12))
//   then the layer's position encoding on q^, k^ (rope / xpos rotate them)
//   s_ij   = q^_i . k^_j                                 (in [-1, 1] without xpos)
//   t_ij   = max(1 - r_h (1 - s_ij), 0),  r_h = exp(sr_h) + 1
//   m_ij   = (cos(pi d / w_h) + 1) / 2 for d < w_h, else 0,  w_h = exp(sw0_h + sw_h) + 1
//   rho_ij = t_ij^2 m_ij a_ij,  a_ij = exp(-slope_h d) under alibi, else 1
//   hh_i   = sum_j rho_ij v^_j                           (no row normalisation)
//   u_i    = tanh(|hh_i|) hh_i / |hh_i|                  (TanhNorm; u = hh f(n), f = tanh(n)/n)
//   o_i    = exp(so_h) tanh(SiLU(g_i)) (.) u_i,  g = x Wg^T (the head's hs channels of g)
// A key is accepted when s_ij > 1 - 1/r_h; m is C^1 at d = w_h. rho_ij in [0, 1]: att holds rho
// (rows do not sum to 1; the diagnostics see the raw screening weights).
//
// Source: K. M. Nakanishi, "Screening Is Enough", arXiv 2604.01178 (VARIANTS.md A22). The
// formulas of r_h, w_h, the soft window, TanhNorm, the tanh(SiLU) gate and the exp(s_O) scale
// follow the third-party implementation dieOD/multiscreen-pytorch (multiscreen/model.py, its
// parameters "paper Table 3"), not the author's code. Not modelled: its MiPE rotation (the
// layer's pos_encoding takes its place) and the Multiscreen tiles replacing the MLP; the ALiBi
// factor a_ij is attnlab's, so that every position encoding has a meaning.
//
// Tensors (per layer): sr (NH) init 0 (r = 2); sw (NH) init 0, a deviation from
// sw0_h = ln(T_train) h / (NH - 1) (the code's linspace(0, ln w_th) init with w_th = T_train,
// sw0 = 0 for one head); so (NH) init 0; all three without weight decay; gate_w (C, C) with
// weight decay, init N(0, 0.02). No hyperparameters.
//
// Backward, given dO (rows i, keys j <= i, per (b, h)):
//   G = tanh(SiLU(g)):  du = e^so G (.) dO ;  dso += e^so <G (.) u, dO> ;
//   dg = e^so u (.) dO (.) (1 - G^2) SiLU'(g),  SiLU'(g) = sig(g) (1 + g (1 - sig(g)))
//   dWg += dg^T x ;  dx += dg Wg
//   dhh = f du + hh (f'(n)/n) <hh, du>,  f'(n)/n = (n sech^2 n - tanh n) / n^3
//         (series -2/3 + 8n^2/15 - 34n^4/105 for small n)
//   drho_ij = dhh_i . v^_j ;  dv^_j += sum_i rho_ij dhh_i
//   dt = 2 t m a drho ;  ds_ij = r dt [t > 0] ;  dr += dt (s - 1) [t > 0] ;  dsr = dr e^sr
//   dm = t^2 a drho ;  dw += dm sin(pi d / w) pi d / (2 w^2) [d < w] ;  dsw = dw e^(sw0 + sw)
//   dq^_i += sum_j ds_ij k^_j ;  dk^_j += sum_i ds_ij q^_i  (rotated back by the position code)
//   dx = (dx^ - x <x, dx^> / |x|^2) / |x|  for x = q, k, v  (unit normalisation VJP)
// Threading: parallel over (b, h); each pair writes its own slices and a slot of (dsr, dsw,
// dso), reduced over (b, h) in index order: identical results for any thread count.
// Cache: q^, k^ and their gradients (B,T,2C); v^, hh, g, dg, dv^ (B,T,C); |q|, |k|, |v|
// (B,T,NH each); slots (B NH 3). Per-thread scratch: T^2 + 2 T hs floats.
//
// Reference: dieOD/multiscreen-pytorch:multiscreen/model.py
// Deviations from it: a third-party implementation (no author code located); its MiPE rotation is
//   replaced by the model's pos_encoding; sw starts at 0 for every head (reference: linspace(0, ln
//   T_train) over the heads); the ALiBi factor is attnlab's; the Multiscreen tiles replacing the
//   MLP are not modelled.
#include <math.h>
#include <string.h>

#include "attention/layer.h"

enum { T_SR, T_SW, T_SO, T_GW, N_T };

#define MS_NORM_EPS 1e-12

static int ms_tensors(AttnTensorSpec* out, const AttnDims* d, const AttnHParams* hp) {
    (void)hp;
    static const char* const names[3] = {"sr", "sw", "so"};
    for (int i = 0; i < 3; i++)
        out[i] = (AttnTensorSpec){
            .name = names[i], .ndim = 1, .shape = {d->NH}, .decay = 0, .init = ATTN_INIT_ZERO};
    out[T_GW] = (AttnTensorSpec){.name = "gate_w",
                                 .ndim = 2,
                                 .shape = {d->C, d->C},
                                 .decay = 1,
                                 .init = ATTN_INIT_NORMAL,
                                 .init_value = 0.02f};
    return N_T;
}

// per-thread scratch of the backward: a (T, T) plane and two (T, hs)
static size_t ms_scratch(const AttnDims* d, const AttnHParams* hp) {
    (void)hp;
    return (size_t)d->T * d->T + 2 * (size_t)d->T * d->hs;
}

static size_t ms_cache_floats(const AttnDims* d, const AttnHParams* hp) {
    (void)hp;
    const size_t BT = (size_t)d->B * d->T;
    return 2 * BT * 2 * d->C + 5 * BT * d->C + 3 * BT * d->NH + 3 * (size_t)d->B * d->NH;
}

typedef struct {
    real *qk, *dqk, *vn, *hh, *g, *dg, *dv, *nq, *nk, *nv, *slots;
} MsCache;

static MsCache ms_cache(const AttnLayer* L) {
    const size_t BT = (size_t)L->d.B * L->d.T, C = (size_t)L->d.C;
    MsCache k;
    k.qk = L->cache;
    k.dqk = k.qk + BT * 2 * C;
    k.vn = k.dqk + BT * 2 * C;
    k.hh = k.vn + BT * C;
    k.g = k.hh + BT * C;
    k.dg = k.g + BT * C;
    k.dv = k.dg + BT * C;
    k.nq = k.dv + BT * C;
    k.nk = k.nq + BT * L->d.NH;
    k.nv = k.nk + BT * L->d.NH;
    k.slots = k.nv + BT * L->d.NH;
    return k;
}

// per-head constants: r, w (and d w / d sw), exp(so)
typedef struct {
    real r, w, dw_dsw, scale, slope;
} MsHead;

static MsHead ms_head(const AttnLayer* L, const AttnCore* c, int h) {
    const int NH = L->d.NH;
    const double sw0 =
        NH > 1 ? log((double)(L->hp->T_train > 1 ? L->hp->T_train : 2)) * h / (double)(NH - 1)
               : 0.0;
    MsHead m;
    m.r = real_exp(L->tp[T_SR][h]) + 1.0f;
    const real ew = (real)exp(sw0 + (double)L->tp[T_SW][h]);
    m.w = ew + 1.0f;
    m.dw_dsw = ew;
    m.scale = real_exp(L->tp[T_SO][h]);
    m.slope = c->score_bias_slopes ? c->score_bias_slopes[h] : 0.0f;
    return m;
}

// x / |x| of every (b, t, head) of a (B,T,C) view with row stride ld into out (row stride ldo)
static void ms_unit(real* out, size_t ldo, real* nrm, const real* x, size_t ld, const AttnDims* d) {
    const int NH = d->NH, hs = d->hs;
    for (int bt = 0; bt < d->B * d->T; bt++)
        for (int h = 0; h < NH; h++) {
            const real* xi = x + (size_t)bt * ld + (size_t)h * hs;
            real ss = 0.0f;
            for (int i = 0; i < hs; i++)
                ss += xi[i] * xi[i];
            const real n = real_sqrt(ss + (real)MS_NORM_EPS);
            nrm[(size_t)bt * NH + h] = n;
            for (int i = 0; i < hs; i++)
                out[(size_t)bt * ldo + (size_t)h * hs + i] = xi[i] / n;
        }
}

// rho row i of head h of item b (entries j <= i; zeros above), with t and m for backward
static void ms_rho_row(real* rho, const AttnCore* c, const AttnLayer* L, const MsHead* m, int b,
                       int h, int i) {
    const int T = L->d.T, hs = L->d.hs;
    const real* qi = c->q + ((size_t)b * T + i) * c->ldq + (size_t)h * hs;
    for (int j = 0; j <= i; j++) {
        const real* kj = c->k + ((size_t)b * T + j) * c->ldk + (size_t)h * hs;
        real s = 0.0f;
        for (int q = 0; q < hs; q++)
            s += qi[q] * kj[q];
        const real t = real_fmax(1.0f - m->r * (1.0f - s), 0.0f);
        const int dd = i - j;
        const real mw = (real)dd < m->w ? (real)(0.5 * (cos(M_PI * dd / (double)m->w) + 1.0)) : 0;
        rho[j] = t * t * mw * real_exp(-m->slope * (real)dd);
    }
    for (int j = i + 1; j < T; j++)
        rho[j] = 0.0f;
}

static real ms_silu(real g) {
    return g / (1.0f + real_exp(-g));
}

static void ms_forward(AttnLayer* L) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH, hs = L->d.hs, C = L->d.C;
    const size_t BT = (size_t)B * T, TT = (size_t)T * T;
    MsCache k = ms_cache(L);
    ms_unit(k.qk, 2 * (size_t)C, k.nq, L->qkv, 3 * (size_t)C, &L->d);
    ms_unit(k.qk + C, 2 * (size_t)C, k.nk, L->qkv + C, 3 * (size_t)C, &L->d);
    ms_unit(k.vn, (size_t)C, k.nv, L->qkv + 2 * C, 3 * (size_t)C, &L->d);
    AttnCore c = attn_layer_core(L);
    c.q = k.qk;
    c.k = k.qk + C;
    c.ldq = c.ldk = 2 * (size_t)C;
    attn_pos_forward(&c, L, L->qk_pos);
    real_gemm(0, 1, (int)BT, C, C, 1.0f, L->x, C, L->tp[T_GW], C, 0.0f, k.g, C);
#pragma omp parallel for collapse(2) schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const MsHead m = ms_head(L, &c, h);
            real* A = L->att + ((size_t)b * NH + h) * TT;
            for (int i = 0; i < T; i++)
                ms_rho_row(A + (size_t)i * T, &c, L, &m, b, h, i);
            const size_t off = (size_t)b * T * C + (size_t)h * hs;
            real_gemm(0, 0, T, hs, T, 1.0f, A, T, k.vn + off, C, 0.0f, k.hh + off, C);
            for (int i = 0; i < T; i++) {
                const real* hh = k.hh + off + (size_t)i * C;
                real ss = 0.0f;
                for (int q = 0; q < hs; q++)
                    ss += hh[q] * hh[q];
                const real n = real_sqrt(ss), f = n > 0.0f ? real_tanh(n) / n : 1.0f;
                const real* g = k.g + off + (size_t)i * C;
                real* o = L->out + off + (size_t)i * C;
                for (int q = 0; q < hs; q++)
                    o[q] = m.scale * real_tanh(ms_silu(g[q])) * f * hh[q];
            }
        }
    }
}

// f'(n)/n for f(n) = tanh(n)/n
static real ms_fprime_over_n(real n) {
    const real lim = REAL_IS_DOUBLE ? 0.02f : 0.15f;
    const real n2 = n * n;
    if (n < lim) return -2.0f / 3.0f + n2 * (8.0f / 15.0f - n2 * 34.0f / 105.0f);
    const real th = real_tanh(n);
    return (n * (1.0f - th * th) - th) / (n2 * n);
}

// unit-normalisation VJP: dx += (dxh - x <x, dxh> / |x|^2) / |x| per (b, t, head)
static void ms_unit_back(real* dx, size_t ldd, const real* dxh, size_t ldh, const real* x,
                         size_t ld, const real* nrm, const AttnDims* d) {
    const int NH = d->NH, hs = d->hs;
    for (int bt = 0; bt < d->B * d->T; bt++)
        for (int h = 0; h < NH; h++) {
            const real* xi = x + (size_t)bt * ld + (size_t)h * hs;
            const real* gi = dxh + (size_t)bt * ldh + (size_t)h * hs;
            const real n = nrm[(size_t)bt * NH + h];
            real dot = 0.0f;
            for (int i = 0; i < hs; i++)
                dot += xi[i] * gi[i];
            const real cc = dot / (n * n);
            for (int i = 0; i < hs; i++)
                dx[(size_t)bt * ldd + (size_t)h * hs + i] += (gi[i] - xi[i] * cc) / n;
        }
}

static void ms_backward(AttnLayer* L) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH, hs = L->d.hs, C = L->d.C;
    const size_t BT = (size_t)B * T, TT = (size_t)T * T;
    MsCache k = ms_cache(L);
    memset(k.dqk, 0, sizeof(real) * BT * 2 * C);
    memset(k.dv, 0, sizeof(real) * BT * C);
    AttnCore c = attn_layer_core(L);
    c.q = k.qk;
    c.k = k.qk + C;
    c.ldq = c.ldk = 2 * (size_t)C;
    c.dq = k.dqk;
    c.dk = k.dqk + C;
    AttnPosSave save;
    attn_pos_backward_begin(&c, &save, L, L->qk_pos);
    real* dg = k.dg;
    attn_workspace_expect(L->ws, ms_scratch(&L->d, L->hp));
#pragma omp parallel for collapse(2) schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const MsHead m = ms_head(L, &c, h);
            real* sl = k.slots + ((size_t)b * NH + h) * 3;
            sl[0] = sl[1] = sl[2] = 0.0f;
            real* drho = attn_thread_scratch(L->ws);
            real* dhh = drho + TT;
            const size_t off = (size_t)b * T * C + (size_t)h * hs;
            for (int i = 0; i < T; i++) { // gate, scale and TanhNorm backward
                const real* hh = k.hh + off + (size_t)i * C;
                const real* g = k.g + off + (size_t)i * C;
                const real* dO = L->dout + off + (size_t)i * C;
                real ss = 0.0f;
                for (int q = 0; q < hs; q++)
                    ss += hh[q] * hh[q];
                const real n = real_sqrt(ss), f = n > 0.0f ? real_tanh(n) / n : 1.0f;
                real* du = dhh + (size_t)i * hs;
                real hdu = 0.0f;
                for (int q = 0; q < hs; q++) {
                    const real sg = 1.0f / (1.0f + real_exp(-g[q]));
                    const real G = real_tanh(g[q] * sg), u = f * hh[q];
                    sl[2] += m.scale * G * u * dO[q];
                    du[q] = m.scale * G * dO[q];
                    dg[off + (size_t)i * C + q] =
                        m.scale * u * dO[q] * (1.0f - G * G) * sg * (1.0f + g[q] * (1.0f - sg));
                    hdu += hh[q] * du[q];
                }
                const real fp = ms_fprime_over_n(n) * hdu;
                for (int q = 0; q < hs; q++)
                    du[q] = f * du[q] + hh[q] * fp;
            }
            // drho = dhh v^T (causal entries), dv^ += rho^T dhh
            const real* A = L->att + ((size_t)b * NH + h) * TT;
            real_gemm(0, 1, T, T, hs, 1.0f, dhh, hs, k.vn + off, C, 0.0f, drho, T);
            real_gemm(1, 0, T, hs, T, 1.0f, A, T, dhh, hs, 1.0f, k.dv + off, C);
            for (int i = 0; i < T; i++) {
                const real* qi = c.q + ((size_t)b * T + i) * c.ldq + (size_t)h * hs;
                real* dqi = c.dq + ((size_t)b * T + i) * c.ldq + (size_t)h * hs;
                for (int j = 0; j <= i; j++) {
                    const real* kj = c.k + ((size_t)b * T + j) * c.ldk + (size_t)h * hs;
                    real* dkj = c.dk + ((size_t)b * T + j) * c.ldk + (size_t)h * hs;
                    real s = 0.0f;
                    for (int q = 0; q < hs; q++)
                        s += qi[q] * kj[q];
                    const real t = real_fmax(1.0f - m.r * (1.0f - s), 0.0f);
                    if (t <= 0.0f) continue;
                    const int dd = i - j;
                    if ((real)dd >= m.w) continue;
                    const double ang = M_PI * dd / (double)m.w;
                    const real mw = (real)(0.5 * (cos(ang) + 1.0));
                    const real a = real_exp(-m.slope * (real)dd);
                    const real dr = drho[(size_t)i * T + j];
                    const real dt = 2.0f * t * mw * a * dr;
                    const real ds = m.r * dt;
                    sl[0] += dt * (s - 1.0f);
                    const real dm = t * t * a * dr;
                    sl[1] += dm * (real)(0.5 * sin(ang) * M_PI * dd / ((double)m.w * m.w));
                    for (int q = 0; q < hs; q++) {
                        dqi[q] += ds * kj[q];
                        dkj[q] += ds * qi[q];
                    }
                }
            }
        }
    }
    attn_pos_backward_end(&c, &save, L);
    for (int b = 0; b < B; b++) // slot reduction in index order
        for (int h = 0; h < NH; h++) {
            const MsHead m = ms_head(L, &c, h);
            const real* sl = k.slots + ((size_t)b * NH + h) * 3;
            L->dtp[T_SR][h] += sl[0] * (m.r - 1.0f);
            L->dtp[T_SW][h] += sl[1] * m.dw_dsw;
            L->dtp[T_SO][h] += sl[2];
        }
    real_gemm(1, 0, C, C, (int)BT, 1.0f, dg, C, L->x, C, 1.0f, L->dtp[T_GW], C);
    real_gemm(0, 0, (int)BT, C, C, 1.0f, dg, C, L->tp[T_GW], C, 1.0f, L->dx, C);
    ms_unit_back(L->dqkv, 3 * (size_t)C, k.dqk, 2 * (size_t)C, L->qkv, 3 * (size_t)C, k.nq, &L->d);
    ms_unit_back(L->dqkv + C, 3 * (size_t)C, k.dqk + C, 2 * (size_t)C, L->qkv + C, 3 * (size_t)C,
                 k.nk, &L->d);
    ms_unit_back(L->dqkv + 2 * C, 3 * (size_t)C, k.dv, (size_t)C, L->qkv + 2 * C, 3 * (size_t)C,
                 k.nv, &L->d);
}

const AttnVariant attn_multiscreen = {
    .name = "multiscreen",
    .formula = "rho = max(1 - r(1 - q^.k^), 0)^2 soft_window(w); o = e^so tanh(SiLU(g)) "
               "TanhNorm(rho v^)",
    .source = "Nakanishi 2026, Screening Is Enough (arXiv 2604.01178); third-party "
              "dieOD/multiscreen-pytorch",
    .reference = "dieOD/multiscreen-pytorch:multiscreen/model.py",
    .deviations = "a third-party implementation (no author code located); its MiPE rotation is "
                  "replaced by the model's pos_encoding; sw starts at 0 for every head (reference: "
                  "linspace(0, ln T_train) over the heads); the ALiBi factor is attnlab's; the "
                  "Multiscreen tiles replacing the MLP are not modelled",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .layer_tensors = ms_tensors,
    .layer_cache_floats = ms_cache_floats,
    .layer_scratch_floats = ms_scratch,
    .layer_forward = ms_forward,
    .layer_backward = ms_backward,
    .ignores_inner = 1,
};
