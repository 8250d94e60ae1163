// attention/deltanet_chunk.c: the chunked (WY) form of the gated delta rule
//   S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T ,  o_t = S_t q_t
// for one (batch, head) sequence, forward and exact backward, as matmuls through real_gemm.
//
// Sources: Yang, Wang, Zhang, Shen, Kim 2024, "Parallelizing Linear Transformers with the Delta
// Rule over Sequence Length" (NeurIPS, arXiv 2406.06484: the WY representation and UT transform
// of a chunk); Yang, Kautz, Hatamizadeh 2025, "Gated Delta Networks" (ICLR, arXiv 2412.06464:
// the gate folded into the chunk as the decay ratios gamma_i / gamma_j).
//
// Chunk of n tokens (positions t0 + i, i < n), incoming state S0 (dv x hs, row = value channel):
//   G_i = sum_{m<=i} log alpha_{t0+m},  gamma_i = e^{G_i},  Gam_ij = e^{G_i - G_j} (j <= i),
//   D_j = e^{G_{n-1} - G_j}   (all <= 1: ratios of gates, formed in log space, no overflow)
// Writing S_i = alpha_i S_{i-1} + u_i k_i^T with the "pseudo value" u_i = beta_i (v_i - alpha_i
// S_{i-1} k_i) and unrolling S_{i-1} inside the chunk gives the UT transform
//   (I + L) U = R ,  L_ij = beta_i Gam_ij (k_i . k_j) for j < i (strictly lower),
//   R_i = beta_i (v_i - gamma_i S0 k_i)                       [R = diag(beta)(V - diag(gamma) K
//   S0^T)]
// solved by forward substitution (U = T R with T = (I + L)^-1, the paper's T matrix applied to
// diag(beta) V and diag(beta gamma) K, its WY factors). Then
//   O     = diag(gamma) Q S0^T + A U ,   A_ij = Gam_ij (q_i . k_j) for j <= i, 0 above
//   S_end = gamma_{n-1} S0 + U^T diag(D) K .
// Every product is a (n x hs) by (hs x n | hs x dv | n x dv) GEMM; the two triangular solves
// cost n^2 dv / 2 each. With alpha = 1 this is DeltaNet; C = 1 is the recurrence itself.
//
// Backward of one chunk, given dO and dS_end (chunks in reverse, dS0 carried to the previous):
//   dU   = A^T dO + diag(D) K dS_end^T ;  dK_j += D_j (U dS_end)_j ;  dD_j = (U dS_end)_j . k_j
//   dS0  = gamma_{n-1} dS_end + dO^T diag(gamma) Q - dRk^T K ,   dgamma_{n-1} += <dS_end, S0>
//   dQ  += diag(gamma) dO S0 ,   dgamma_i += dO_i . (S0 q_i)
//   dA   = dO U^T (j <= i) ;  dR = (I + L)^-T dU (back substitution) ;  dL = -dR U^T (j < i)
//   dV  += diag(beta) dR ;  dbeta_i = dR_i . (v_i - gamma_i S0 k_i) ;  with dRk = diag(beta gamma)
//   dR: dK += -dRk S0 ... (as dKS = -diag(beta gamma) dR: dK += dKS S0, dS0 += dKS^T K),
//   dgamma_i += dKS_i . (S0 k_i) / gamma_i   (taken as dG_i += dKS_i . (S0 k_i) directly)
//   A: dQ += (dA o Gam) K ,  dK += (dA o Gam)^T Q ,  dG_i += sum_j dA_ij A_ij, dG_j -= the same
//   L: dbeta_i += sum_j dL_ij Gam_ij (k_i.k_j) ;  dK += M K + M^T K with M = diag(beta) (dL o Gam);
//      dG_i += sum_j dL_ij L_ij, dG_j -= the same
// and gamma = e^G: dG_i += gamma_i dgamma_i; D: dG_j -= D_j dD_j, dG_{n-1} += D_j dD_j. Finally
// dlog alpha_{t0+m} = sum_{i>=m} dG_i (G is a prefix sum). The backward first replays the chunk
// recurrence S0 -> S_end (matmuls only, no outputs) to keep every chunk's incoming state,
// ceil(T / C) hs^2 floats, then recomputes each chunk's L, A, U in the reverse sweep.
#include "attention/deltanet_chunk.h"

#include <string.h>

typedef struct {
    real *G, *gam, *D, *dG; // (n)
    real *KK, *Lm, *A, *Gm; // (n, n), leading dimension n
    real* Kd;               // (n, hs): diag(D) K
} DnBuf;

static size_t dn_buf_floats(int C, int hs) {
    return 4 * (size_t)C + 4 * (size_t)C * C + (size_t)C * hs;
}

static real* dn_buf_carve(DnBuf* b, real* p, int C, int hs) {
    const size_t CC = (size_t)C * C;
    b->G = p, b->gam = p + C, b->D = p + 2 * C, b->dG = p + 3 * C;
    p += 4 * (size_t)C;
    b->KK = p, b->Lm = p + CC, b->A = p + 2 * CC, b->Gm = p + 3 * CC;
    p += 4 * CC;
    b->Kd = p;
    return p + (size_t)C * hs;
}

size_t dn_chunk_fwd_floats(int T, int hs, int dv, int C) {
    if (C > T) C = T;
    return (size_t)dv * hs + (size_t)C * dv + dn_buf_floats(C, hs);
}

size_t dn_chunk_bwd_floats(int T, int hs, int C) {
    if (C > T) C = T;
    const size_t nch = ((size_t)T + C - 1) / C, hs2 = (size_t)hs * hs;
    return (nch + 1) * hs2 + 7 * (size_t)C * hs + (size_t)C * C + dn_buf_floats(C, hs);
}

static real dn_dotc(const real* a, const real* b, int n) {
    real s = 0.0f;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

// gates, KK, L, Kd (and A = Gam o Q K^T when want_A) of the chunk at t0 of length n
static void dn_prep(DnBuf* b, const DnSeq* s, int t0, int n, int want_A) {
    const int hs = s->hs;
    const real* K = s->k + (size_t)t0 * hs;
    real acc = 0.0f;
    for (int i = 0; i < n; i++) {
        acc += s->la ? s->la[t0 + i] : 0.0f;
        b->G[i] = acc;
        b->gam[i] = real_exp(acc);
    }
    for (int j = 0; j < n; j++) {
        b->D[j] = real_exp(b->G[n - 1] - b->G[j]);
        for (int c = 0; c < hs; c++)
            b->Kd[(size_t)j * hs + c] = b->D[j] * K[(size_t)j * hs + c];
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            b->Gm[(size_t)i * n + j] = j <= i ? real_exp(b->G[i] - b->G[j]) : 0.0f;
    real_gemm(0, 1, n, n, hs, 1.0f, K, hs, K, hs, 0.0f, b->KK, n);
    for (int i = 0; i < n; i++) {
        const real be = s->beta[t0 + i];
        for (int j = 0; j < n; j++) {
            const size_t e = (size_t)i * n + j;
            b->Lm[e] = j < i ? be * b->Gm[e] * b->KK[e] : 0.0f;
        }
    }
    if (!want_A) return;
    real_gemm(0, 1, n, n, hs, 1.0f, s->q + (size_t)t0 * hs, hs, K, hs, 0.0f, b->A, n);
    for (size_t e = 0; e < (size_t)n * n; e++)
        b->A[e] *= b->Gm[e];
}

// R (n, w) at stride ldr: R = K S0^T into KS (when not NULL), then R_i = beta_i (v_i - gamma_i
// KS_i), then U = (I + L)^-1 R in place (forward substitution)
static void dn_pseudo_values(real* R, size_t ldr, real* KS, const DnBuf* b, const DnSeq* s,
                             const real* S0, int t0, int n, int w) {
    const int hs = s->hs;
    real_gemm(0, 1, n, w, hs, 1.0f, s->k + (size_t)t0 * hs, hs, S0, hs, 0.0f, R, (int)ldr);
    for (int i = 0; i < n; i++) {
        real* Ri = R + (size_t)i * ldr;
        const real be = s->beta[t0 + i], bg = be * b->gam[i];
        if (KS) memcpy(KS + (size_t)i * w, Ri, sizeof(real) * (size_t)w);
        if (s->v) {
            const real* vi = s->v + (size_t)(t0 + i) * s->ldv;
            for (int c = 0; c < w; c++)
                Ri[c] = be * vi[c] - bg * Ri[c];
        } else {
            for (int c = 0; c < w; c++)
                Ri[c] = -bg * Ri[c];
            Ri[t0 + i] += be;
        }
    }
    for (int i = 1; i < n; i++) {
        real* Ri = R + (size_t)i * ldr;
        for (int j = 0; j < i; j++) {
            const real l = b->Lm[(size_t)i * n + j];
            const real* Rj = R + (size_t)j * ldr;
            for (int c = 0; c < w; c++)
                Ri[c] -= l * Rj[c];
        }
    }
}

// S (first w rows) <- gamma_{n-1} S + U^T diag(D) K
static void dn_state_update(real* S, const real* U, size_t ldu, const DnBuf* b, int n, int w,
                            int hs) {
    const real gl = b->gam[n - 1];
    for (size_t e = 0; e < (size_t)w * hs; e++)
        S[e] *= gl;
    real_gemm(1, 0, w, hs, n, 1.0f, U, (int)ldu, b->Kd, hs, 1.0f, S, hs);
}

void dn_chunk_forward(const DnSeq* s, int C, real* o, size_t ldo, real* scratch) {
    const int T = s->T, hs = s->hs, dv = s->dv;
    if (C > T) C = T;
    real* S = scratch;
    real* R = S + (size_t)dv * hs;
    DnBuf b;
    dn_buf_carve(&b, R + (size_t)C * dv, C, hs);
    memset(S, 0, sizeof(real) * (size_t)dv * hs);
    for (int t0 = 0; t0 < T; t0 += C) {
        const int n = T - t0 < C ? T - t0 : C;
        const int w = s->v ? dv : t0 + n; // identity values: channels past t0 + n are still 0
        dn_prep(&b, s, t0, n, 1);
        dn_pseudo_values(R, (size_t)dv, NULL, &b, s, S, t0, n, w);
        real* oc = o + (size_t)t0 * ldo;
        real_gemm(0, 1, n, w, hs, 1.0f, s->q + (size_t)t0 * hs, hs, S, hs, 0.0f, oc, (int)ldo);
        for (int i = 0; i < n; i++) {
            real* oi = oc + (size_t)i * ldo;
            for (int c = 0; c < w; c++)
                oi[c] *= b.gam[i];
            if (w < dv) memset(oi + w, 0, sizeof(real) * (size_t)(dv - w));
        }
        real_gemm(0, 0, n, w, n, 1.0f, b.A, n, R, dv, 1.0f, oc, (int)ldo);
        dn_state_update(S, R, (size_t)dv, &b, n, w, hs);
    }
}

void dn_chunk_backward(const DnSeq* s, int C, const real* dO, size_t ldo, real* dq, real* dk,
                       real* dv, real* dbeta, real* dla, real* scratch) {
    const int T = s->T, hs = s->hs;
    if (C > T) C = T;
    const int nch = (T + C - 1) / C;
    const size_t hs2 = (size_t)hs * hs, Ch = (size_t)C * hs;
    real* states = scratch; // states + c hs^2: the state entering chunk c
    real* dS = states + (size_t)nch * hs2;
    real *U = dS + hs2, *KS = U + Ch, *dU = KS + Ch, *P = dU + Ch, *tmp = P + Ch;
    real *dKd = tmp + Ch, *Qg = dKd + Ch, *dA = Qg + Ch;
    DnBuf b;
    dn_buf_carve(&b, dA + (size_t)C * C, C, hs);
    real* dL = b.KK; // reuses KK after its last read (the L-term loop reads KK before writing)
    memset(states, 0, sizeof(real) * hs2);
    for (int c = 0; c + 1 < nch; c++) {
        const int t0 = c * C;
        dn_prep(&b, s, t0, C, 0);
        dn_pseudo_values(U, (size_t)hs, NULL, &b, s, states + (size_t)c * hs2, t0, C, hs);
        memcpy(states + (size_t)(c + 1) * hs2, states + (size_t)c * hs2, sizeof(real) * hs2);
        dn_state_update(states + (size_t)(c + 1) * hs2, U, (size_t)hs, &b, C, hs, hs);
    }
    memset(dS, 0, sizeof(real) * hs2);
    for (int c = nch - 1; c >= 0; c--) {
        const int t0 = c * C, n = T - t0 < C ? T - t0 : C;
        const real* S0 = states + (size_t)c * hs2;
        const real* K = s->k + (size_t)t0 * hs;
        const real* Q = s->q + (size_t)t0 * hs;
        const real* dOc = dO + (size_t)t0 * ldo;
        real* dKc = dk + (size_t)t0 * hs;
        real* dQc = dq + (size_t)t0 * hs;
        dn_prep(&b, s, t0, n, 1);
        dn_pseudo_values(U, (size_t)hs, KS, &b, s, S0, t0, n, hs);
        for (int i = 0; i < n; i++)
            b.dG[i] = 0.0f;
        // through S_end = gamma_{n-1} S0 + U^T diag(D) K
        real_gemm(1, 0, n, hs, n, 1.0f, b.A, n, dOc, (int)ldo, 0.0f, dU, hs);
        real_gemm(0, 1, n, hs, hs, 1.0f, b.Kd, hs, dS, hs, 1.0f, dU, hs);
        real_gemm(0, 0, n, hs, hs, 1.0f, U, hs, dS, hs, 0.0f, dKd, hs);
        real dGL = 0.0f;
        for (int j = 0; j < n; j++) {
            const real dd = b.D[j] * dn_dotc(dKd + (size_t)j * hs, K + (size_t)j * hs, hs);
            for (int e = 0; e < hs; e++)
                dKc[(size_t)j * hs + e] += b.D[j] * dKd[(size_t)j * hs + e];
            b.dG[j] -= dd;
            dGL += dd;
        }
        const real gl = b.gam[n - 1];
        dGL += gl * dn_dotc(dS, S0, (int)hs2);
        for (size_t e = 0; e < hs2; e++)
            dS[e] *= gl;
        // through O = diag(gamma) Q S0^T + A U
        real_gemm(0, 1, n, n, hs, 1.0f, dOc, (int)ldo, U, hs, 0.0f, dA, n);
        real_gemm(0, 1, n, hs, hs, 1.0f, Q, hs, S0, hs, 0.0f, P, hs);
        real_gemm(0, 0, n, hs, hs, 1.0f, dOc, (int)ldo, S0, hs, 0.0f, tmp, hs);
        for (int i = 0; i < n; i++) {
            const real g = b.gam[i];
            b.dG[i] += g * dn_dotc(dOc + (size_t)i * ldo, P + (size_t)i * hs, hs);
            for (int e = 0; e < hs; e++) {
                dQc[(size_t)i * hs + e] += g * tmp[(size_t)i * hs + e];
                Qg[(size_t)i * hs + e] = g * Q[(size_t)i * hs + e];
            }
        }
        real_gemm(1, 0, hs, hs, n, 1.0f, dOc, (int)ldo, Qg, hs, 1.0f, dS, hs);
        // dR = (I + L)^-T dU, in place: dR_i = dU_i - sum_{m>i} L_mi dR_m
        for (int i = n - 2; i >= 0; i--) {
            real* di = dU + (size_t)i * hs;
            for (int m = i + 1; m < n; m++) {
                const real l = b.Lm[(size_t)m * n + i];
                const real* dm = dU + (size_t)m * hs;
                for (int e = 0; e < hs; e++)
                    di[e] -= l * dm[e];
            }
        }
        const real* dR = dU;
        // R_i = beta_i (v_i - gamma_i KS_i): dV, dbeta, dKS (into tmp), dG
        for (int i = 0; i < n; i++) {
            const real be = s->beta[t0 + i], bg = be * b.gam[i];
            const real* dRi = dR + (size_t)i * hs;
            const real* vi = s->v + (size_t)(t0 + i) * s->ldv;
            real* dvi = dv + (size_t)(t0 + i) * s->ldv;
            const real* KSi = KS + (size_t)i * hs;
            real db = 0.0f, dg = 0.0f;
            for (int e = 0; e < hs; e++) {
                dvi[e] += be * dRi[e];
                db += dRi[e] * (vi[e] - b.gam[i] * KSi[e]);
                tmp[(size_t)i * hs + e] = -bg * dRi[e];
                dg += tmp[(size_t)i * hs + e] * KSi[e];
            }
            dbeta[t0 + i] = db;
            b.dG[i] += dg;
        }
        real_gemm(0, 0, n, hs, hs, 1.0f, tmp, hs, S0, hs, 1.0f, dKc, hs);
        real_gemm(1, 0, hs, hs, n, 1.0f, tmp, hs, K, hs, 1.0f, dS, hs);
        // A_ij = Gam_ij (q_i . k_j), j <= i: dA o Gam into dA, the gate terms into dG
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                const size_t e = (size_t)i * n + j;
                if (j > i) {
                    dA[e] = 0.0f;
                    continue;
                }
                const real E = dA[e] * b.A[e];
                b.dG[i] += E;
                b.dG[j] -= E;
                dA[e] *= b.Gm[e];
            }
        real_gemm(0, 0, n, hs, n, 1.0f, dA, n, K, hs, 1.0f, dQc, hs);
        real_gemm(1, 0, n, hs, n, 1.0f, dA, n, Q, hs, 1.0f, dKc, hs);
        // L_ij = beta_i Gam_ij (k_i . k_j), j < i: dL = -dR U^T, then M = diag(beta)(dL o Gam)
        real_gemm(0, 1, n, n, hs, -1.0f, dR, hs, U, hs, 0.0f, dA, n); // dA now holds dL
        for (int i = 0; i < n; i++) {
            const real be = s->beta[t0 + i];
            for (int j = 0; j < n; j++) {
                const size_t e = (size_t)i * n + j;
                if (j >= i) {
                    dL[e] = 0.0f;
                    continue;
                }
                const real F = dA[e] * b.Gm[e] * b.KK[e];
                dbeta[t0 + i] += F;
                b.dG[i] += be * F;
                b.dG[j] -= be * F;
                dL[e] = be * b.Gm[e] * dA[e];
            }
        }
        real_gemm(0, 0, n, hs, n, 1.0f, dL, n, K, hs, 1.0f, dKc, hs);
        real_gemm(1, 0, n, hs, n, 1.0f, dL, n, K, hs, 1.0f, dKc, hs);
        // G is the prefix sum of log alpha within the chunk
        b.dG[n - 1] += dGL;
        real acc = 0.0f;
        for (int i = n - 1; i >= 0; i--) {
            acc += b.dG[i];
            dla[t0 + i] = acc;
        }
    }
}
