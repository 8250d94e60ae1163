// attention/lucid.c: LUCID attention: the inner attention applied to preconditioned values,
// O = A G^{-1} V, with G the causal exponential kernel of the RMS-normalised keys, shifted so
// that its diagonal is 1.
//
// Forward, per (batch b, head h), with k_j the head's key as the attention sees it (after
// RoPE/xPos under those encodings), hs the head size and A = rowmap(q k^T / sqrt(hs)) the inner
// attention (attn.inner, default softmax, with the layer's position encoding):
//   r_j  = 1 / sqrt(mean_i k_ji^2 + eps),  k^_j = r_j k_j           (RMS-normalised keys, eps 1e-6)
//   G_ij = exp(k^_i . k^_j / sqrt(hs) - sqrt(hs))  for j <= i, 0 above the diagonal
//   Vt   = G^{-1} V  by forward substitution:  Vt_i = (v_i - sum_{j<i} G_ij Vt_j) / G_ii
//   O    = A Vt
// |k^_i|^2 = hs m/(m + eps) with m = mean k_i^2, so G_ii = exp(sqrt(hs) (m/(m + eps) - 1)), 1 up
// to the eps: keys with no overlap give G = I and O = A V (softmax attention), and correlated keys
// have their shared part removed from the values. Vt_i depends on v_{<=i} and k_{<=i} only and A
// is causal, so o_t sees positions <= t alone: the layer stays causal.
// Numerics: |k^_i . k^_j| <= hs, so every entry of G lies in [exp(-2 sqrt hs), 1] (e^-16 at
// hs = 64: no overflow); G_ii >= exp(-sqrt hs) > 0 even for a zero key, so G is invertible.
//
// Source: S. S. Duvvuri, N. Patel, N. Gupta, I. S. Dhillon, "LUCID: Attention with
// Preconditioned Representations", arXiv 2602.10410 (VARIANTS.md B3): the preconditioner
// P = (M o exp(K_RN K_RN^T / sqrt(d) - sqrt(d)))^{-1} with M the causal mask and K_RN the
// RMS-normalised keys (the -sqrt(d) makes the diagonal 1), applied by a triangular solve. The
// authors' code (a modified LLaMA attention) RMS-normalises the keys after RoPE, so the
// preconditioner here uses the rotated keys too (docs/variants.md lists the sources checked).
//
// No tensors and no hyperparameters of its own (attn.inner picks the row map; its keys apply).
// att holds the inner weights A (what the diagnostics report: entropy, sinks and kurtosis of the
// row map before preconditioning; rows sum to 1 for a normalised inner map).
//
// Backward, given dO (all products per (b, h)):
//   dA, dq, dk (score path), row params: the driver's core backward with v = Vt, giving dVt
//   X    = G^{-T} dVt  by back-substitution:  X_i = (dVt_i - sum_{m>i} G_mi X_m) / G_ii
//   dV  += X                                   (Vt = G^{-1} V)
//   dG_ij = -X_i . Vt_j  for j <= i            (d(G^{-1}) = -G^{-1} dG G^{-1})
//   dE_ij = dG_ij G_ij ;  dk^ = (dE + dE^T) k^ / sqrt(hs)   (E_ij = k^_i . k^_j / sqrt hs; the
//                                                           constant shift has no gradient)
//   dk_j += r_j dk^_j - r_j^3 k_j (dk^_j . k_j) / hs        (RMS normalisation VJP)
// The key gradient of the kernel path is added in the rotated space (the driver's buffer under
// rope/xpos), before attn_pos_backward_end rotates it back with the score path's.
// Cost: the solve and its transpose are O(T^2 hs) per head, like the attention itself.
// Threading: parallel over (b, h); each pair writes its own slices of Vt, dVt, dk and dv:
// results are identical for any thread count. Cache: Vt and dVt (B,T,C); G and k^ are
// recomputed in backward.
// Per-thread scratch: T^2 + 3 T hs + T floats.
//
// Reference: paper, arXiv 2602.10410, Sec. 3
// Deviations from it: none known: the authors' LucidAttention (a modified LLaMA attention read in
//   the reference index without its repository name) computes the same kernel on RMS-normalised
//   keys after RoPE.
#include <math.h>
#include <string.h>

#include "attention/layer.h"

#define LUCID_EPS ((real)1e-6)

// per-thread scratch: forward a (T, T) plane and two (T, hs); backward one more (T, hs) and a row
static size_t lucid_fwd_scratch(const AttnDims* d) {
    return (size_t)d->T * d->T + 2 * (size_t)d->T * d->hs;
}

static size_t lucid_bwd_scratch(const AttnDims* d) {
    return (size_t)d->T * d->T + 3 * (size_t)d->T * d->hs + (size_t)d->T;
}

static size_t lucid_scratch(const AttnDims* d, const AttnHParams* hp) {
    (void)hp;
    return lucid_bwd_scratch(d); // >= the forward's
}

static size_t lucid_cache_floats(const AttnDims* d, const AttnHParams* hp) {
    (void)hp;
    return 2 * (size_t)d->B * d->T * d->C;
}

// k^ (T, hs) and r (T) of head h of item b from the keys the attention sees (c->k: rotated
// under rope/xpos, row stride c->ldk)
static void lucid_keys(real* kh, real* r, const AttnCore* c, const AttnLayer* L, int b, int h) {
    const int T = L->d.T, hs = L->d.hs;
    const real* k = c->k + (size_t)b * T * c->ldk + (size_t)h * hs;
    for (int t = 0; t < T; t++) {
        const real* kt = k + (size_t)t * c->ldk;
        real ss = 0.0f;
        for (int i = 0; i < hs; i++)
            ss += kt[i] * kt[i];
        const real rt = 1.0f / real_sqrt(ss / (real)hs + LUCID_EPS);
        r[t] = rt;
        for (int i = 0; i < hs; i++)
            kh[(size_t)t * hs + i] = rt * kt[i];
    }
}

// G (T,T) lower triangle from k^: exp(k^_i . k^_j / sqrt(hs) - sqrt(hs)); entries above the
// diagonal are left unset (never read)
static void lucid_kernel(real* G, const real* kh, int T, int hs) {
    const real rs = real_sqrt((real)hs);
    real_gemm(0, 1, T, T, hs, 1.0f / rs, kh, hs, kh, hs, 0.0f, G, T);
    for (int i = 0; i < T; i++)
        for (int j = 0; j <= i; j++)
            G[(size_t)i * T + j] = real_exp(G[(size_t)i * T + j] - rs);
}

static real* lucid_vt(const AttnLayer* L) {
    return L->cache;
}

static real* lucid_dvt(const AttnLayer* L) {
    return L->cache + (size_t)L->d.B * L->d.T * L->d.C;
}

static void lucid_forward(AttnLayer* L) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH, hs = L->d.hs, C = L->d.C;
    const size_t TT = (size_t)T * T;
    attn_workspace_expect(L->ws, lucid_fwd_scratch(&L->d));
    real* Vt = lucid_vt(L);
    AttnCore c = attn_layer_core(L);
    attn_pos_forward(&c, L, L->qk_pos); // rotated q, k under rope/xpos: the kernel uses these keys
#pragma omp parallel for collapse(2) schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            real* G = attn_thread_scratch(L->ws);
            real* kh = G + TT;
            real* r = kh + (size_t)T * hs;
            lucid_keys(kh, r, &c, L, b, h);
            lucid_kernel(G, kh, T, hs);
            const real* v = L->qkv + (size_t)b * T * 3 * C + 2 * C + (size_t)h * hs;
            real* y = Vt + (size_t)b * T * C + (size_t)h * hs;
            for (int i = 0; i < T; i++) { // forward substitution
                real* yi = y + (size_t)i * C;
                const real* vi = v + (size_t)i * 3 * C;
                for (int e = 0; e < hs; e++)
                    yi[e] = vi[e];
                for (int j = 0; j < i; j++) {
                    const real g = G[(size_t)i * T + j];
                    const real* yj = y + (size_t)j * C;
                    for (int e = 0; e < hs; e++)
                        yi[e] -= g * yj[e];
                }
                const real inv = 1.0f / G[(size_t)i * T + i];
                for (int e = 0; e < hs; e++)
                    yi[e] *= inv;
            }
        }
    }
    c.v = Vt;
    c.ldv = (size_t)C;
    attn_core_forward(&c, &L->d, L->ws);
}

static void lucid_backward(AttnLayer* L) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH, hs = L->d.hs, C = L->d.C;
    const size_t TT = (size_t)T * T;
    real *Vt = lucid_vt(L), *dVt = lucid_dvt(L);
    memset(dVt, 0, sizeof(real) * (size_t)B * T * C);
    // score path and dVt = A^T dO through the driver's core
    AttnCore c = attn_layer_core(L);
    c.v = Vt;
    c.ldv = (size_t)C;
    c.dv = dVt;
    AttnPosSave save;
    attn_pos_backward_begin(&c, &save, L, L->qk_pos);
    attn_core_backward(&c, &L->d, L->ws);
    attn_workspace_expect(L->ws, lucid_bwd_scratch(&L->d));
    const real sc = 1.0f / real_sqrt((real)hs);
#pragma omp parallel for collapse(2) schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            real* G = attn_thread_scratch(L->ws);
            real* kh = G + TT;
            real* X = kh + (size_t)T * hs;
            real* dkh = X + (size_t)T * hs;
            real* r = dkh + (size_t)T * hs;
            lucid_keys(kh, r, &c, L, b, h);
            lucid_kernel(G, kh, T, hs);
            const size_t off = (size_t)b * T * C + (size_t)h * hs;
            const real* y = Vt + off;
            const real* dy = dVt + off;
            for (int i = T - 1; i >= 0; i--) { // back-substitution with G^T
                real* xi = X + (size_t)i * hs;
                for (int q = 0; q < hs; q++)
                    xi[q] = dy[(size_t)i * C + q];
                for (int m = i + 1; m < T; m++) {
                    const real g = G[(size_t)m * T + i];
                    const real* xm = X + (size_t)m * hs;
                    for (int q = 0; q < hs; q++)
                        xi[q] -= g * xm[q];
                }
                const real inv = 1.0f / G[(size_t)i * T + i];
                for (int q = 0; q < hs; q++)
                    xi[q] *= inv;
            }
            real* dq3 = L->dqkv + (size_t)b * T * 3 * C + (size_t)h * hs;
            for (int i = 0; i < T; i++) // dV += X
                for (int q = 0; q < hs; q++)
                    dq3[(size_t)i * 3 * C + 2 * C + q] += X[(size_t)i * hs + q];
            // dE_ij = -(X_i . Vt_j) G_ij, overwriting G's lower triangle
            for (int i = 0; i < T; i++)
                for (int j = 0; j <= i; j++) {
                    real s = 0.0f;
                    for (int q = 0; q < hs; q++)
                        s += X[(size_t)i * hs + q] * y[(size_t)j * C + q];
                    G[(size_t)i * T + j] *= -s;
                }
            memset(dkh, 0, sizeof(real) * (size_t)T * hs);
            for (int i = 0; i < T; i++)
                for (int j = 0; j <= i; j++) {
                    const real e = sc * G[(size_t)i * T + j];
                    for (int q = 0; q < hs; q++) {
                        dkh[(size_t)i * hs + q] += e * kh[(size_t)j * hs + q];
                        dkh[(size_t)j * hs + q] += e * kh[(size_t)i * hs + q];
                    }
                }
            // RMS normalisation VJP into dk (the rotated-space buffer under rope/xpos)
            const real* k = c.k + (size_t)b * T * c.ldk + (size_t)h * hs;
            real* dkb = c.dk + (size_t)b * T * c.ldk + (size_t)h * hs;
            for (int t = 0; t < T; t++) {
                const real* kt = k + (size_t)t * c.ldk;
                const real* g = dkh + (size_t)t * hs;
                real dot = 0.0f;
                for (int q = 0; q < hs; q++)
                    dot += g[q] * kt[q];
                const real rt = r[t], c3 = rt * rt * rt * dot / (real)hs;
                real* dk = dkb + (size_t)t * c.ldk;
                for (int q = 0; q < hs; q++)
                    dk[q] += rt * g[q] - c3 * kt[q];
            }
        }
    }
    attn_pos_backward_end(&c, &save, L);
}

const AttnVariant attn_lucid = {
    .name = "lucid",
    .formula = "O = A G^-1 V, G = tril(exp(k^_i.k^_j / sqrt hs - sqrt hs)), k^ = RMSNorm(k), A: "
               "attn.inner",
    .source = "Duvvuri, Patel, Gupta, Dhillon 2026, LUCID attention (arXiv 2602.10410)",
    .reference = "paper, arXiv 2602.10410, Sec. 3",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .layer_cache_floats = lucid_cache_floats,
    .layer_scratch_floats = lucid_scratch,
    .layer_forward = lucid_forward,
    .layer_backward = lucid_backward,
};
