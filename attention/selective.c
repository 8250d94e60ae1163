// attention/selective.c: selective attention: one head's scores decide which earlier tokens
// later queries stop attending to, through a cumulative mask subtracted from every head's logits.
//
// Per batch item, with S_h = scale q_h k_h^T (+ ALiBi; rotated q, k under rope) and the
// selection head 0:
//   R[k, j] = ReLU(S_0[k, j])  for 1 <= j < k,   0 otherwise
//             (token k "selects" earlier token j; the first token is never masked and a token
//              does not mask itself)
//   F[i, j] = sum_{k < i} R[k, j]                (masking accumulated by the queries before i)
//   A_h[i] = rowmap(S_h[i, 0..i] - F[i, 0..i])   (every head, the inner row map attn.inner)
//   o_h = A_h v_h
// F[i, j] only sums queries k < i, and R[k, j] only keys j < k, so row i still depends on keys
// j <= i and queries <= i alone: the layer stays causal.
//
// Source: Y. Leviathan, M. Kalman, Y. Matias, "Selective Attention Improves Transformer",
// ICLR 2025, arXiv 2410.02703 (Sec. 3: F = shifted cumulative sum of ReLU of a head's logits, with
// the <BOS> column and the diagonal zeroed, subtracted from the logits of all heads). The
// paper's context pruning (dropping tokens whose F is large) is an inference-time memory saving
// and is not modelled; the selection head reuses head 0's q, k as in the paper.
//
// Tensors and hyperparameters: none of its own (attn.inner picks the row map; its keys apply).
// att holds the weights A_h (rows sum to 1 for a normalised inner map).
//
// Backward, per batch item, given do_h:
//   dA_h = do_h v_h^T ;  dv_h += A_h^T do_h
//   dL_h = VJP_rowmap(dA_h) row by row, on the recomputed logits L_h = S_h - F
//   dF = -sum_h dL_h ;  dR[k, j] = sum_{i > k} dF[i, j]   (reverse cumulative sum)
//   dS_h = dL_h (+ dR 1[1 <= j < k] 1[S_0 > 0] for h = 0)
//   dq_h += scale dS_h k_h ;  dk_h += scale dS_h^T q_h
// O(T^2) per head like the driver; the extra cost is one T x T cumulative sum and its reverse.
// Threading: parallel over batch items (the mask couples the heads); row-parameter gradients go
// to per-item slots reduced in index order: results are identical for any thread count.
// Per-thread scratch: (2 NH + 1) T^2 + 3 T floats plus the row scratch.
//
// Reference: paper, arXiv 2410.02703, Sec. 3
// Deviations from it: the paper's context pruning (an inference-time memory saving) is not
//   modelled.
#include <math.h>
#include <string.h>

#include "attention/layer.h"
#include "attention/rowops.h"

// per-thread scratch: 2 NH + 1 (T, T) planes, the row map's scratch and three rows
static size_t sel_scratch_for(const AttnDims* d, const AttnVariant* row) {
    const size_t TT = (size_t)d->T * d->T;
    return (2 * (size_t)d->NH + 1) * TT + attn_row_scratch(row, d->T) + 3 * (size_t)d->T;
}

static size_t sel_scratch(const AttnDims* d, const AttnHParams* hp) {
    return sel_scratch_for(d, hp->inner);
}

static size_t sel_cache_floats(const AttnDims* d, const AttnHParams* hp) {
    const int P = hp->inner ? hp->inner->params_per_head : 0;
    return (size_t)d->B * d->NH * (size_t)(P > 0 ? P : 1);
}

typedef struct {
    AttnCore c;
    int P, stride;
} SelSetup;

static SelSetup sel_setup(const AttnLayer* L) {
    SelSetup s;
    s.c = attn_layer_core(L);
    s.P = s.c.row->params_per_head;
    s.stride = s.c.rowp_stride > 0 ? s.c.rowp_stride : s.P;
    attn_workspace_expect(L->ws, sel_scratch_for(&L->d, s.c.row));
    return s;
}

// S_h for every head of item b, then F from head 0, then L_h = S_h - F in place (causal entries)
static void sel_logits(real* S, real* F, const SelSetup* s, const AttnLayer* L, int b) {
    const int T = L->d.T, NH = L->d.NH;
    const size_t TT = (size_t)T * T;
    for (int h = 0; h < NH; h++)
        rowops_head_scores(S + h * TT, &s->c, &L->d, b, h);
    // F[i, j] = F[i-1, j] + R[i-1, j], F[0, .] = 0
    memset(F, 0, sizeof(real) * (size_t)T);
    for (int i = 1; i < T; i++) {
        const real* Rk = S + (size_t)(i - 1) * T; // row k = i - 1 of S_0
        real* Fi = F + (size_t)i * T;
        const real* Fp = F + (size_t)(i - 1) * T;
        for (int j = 0; j < T; j++) {
            const int sel = j >= 1 && j < i - 1 && Rk[j] > 0.0f;
            Fi[j] = Fp[j] + (sel ? Rk[j] : 0.0f);
        }
    }
    for (int h = 0; h < NH; h++) // after F has read S_0
        for (int t = 0; t < T; t++)
            for (int j = 0; j <= t; j++)
                S[h * TT + (size_t)t * T + j] -= F[(size_t)t * T + j];
}

static void sel_forward(AttnLayer* L) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH, hs = L->d.hs;
    const size_t TT = (size_t)T * T, C = (size_t)L->d.C;
    SelSetup s = sel_setup(L);
    attn_pos_forward(&s.c, L, L->qk_pos);
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        real* tb = attn_thread_scratch(L->ws);
        real *S = tb, *F = tb + 2 * NH * TT, *ks = F + TT, *rs = ks + 2 * T;
        sel_logits(S, F, &s, L, b);
        for (int h = 0; h < NH; h++) {
            AttnRowCtx ctx = rowops_head_ctx(&s.c, L, h, rs);
            if (s.c.row->needs_key_sq) {
                rowops_head_key_sq(ks, &s.c, &L->d, b, h);
                ctx.key_sq = ks;
            }
            real* A = L->att + ((size_t)b * NH + h) * TT;
            for (int t = 0; t < T; t++) {
                ctx.t = t;
                s.c.row->forward_row(A + (size_t)t * T, S + h * TT + (size_t)t * T, t + 1, &ctx);
                memset(A + (size_t)t * T + t + 1, 0, sizeof(real) * (size_t)(T - t - 1));
            }
            const real* v = s.c.v + (size_t)b * T * s.c.ldv + (size_t)h * hs;
            real* o = L->out + (size_t)b * T * C + (size_t)h * hs;
            real_gemm(0, 0, T, hs, T, 1.0f, A, T, v, (int)s.c.ldv, 0.0f, o, (int)C);
        }
    }
}

static void sel_backward(AttnLayer* L) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH, hs = L->d.hs;
    const size_t TT = (size_t)T * T, C = (size_t)L->d.C;
    SelSetup s = sel_setup(L);
    AttnPosSave save;
    attn_pos_backward_begin(&s.c, &save, L, L->qk_pos);
    real* slots = L->cache;
    if (s.P > 0) memset(slots, 0, sizeof(real) * (size_t)B * NH * s.P);
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        real* tb = attn_thread_scratch(L->ws);
        real *S = tb, *X = tb + NH * TT, *F = tb + 2 * NH * TT, *ks = F + TT, *dks = ks + T;
        real* rs = ks + 2 * T;
        // X = dA_h = do_h v_h^T ; dv_h += A_h^T do_h
        for (int h = 0; h < NH; h++) {
            const real* dO = L->dout + (size_t)b * T * C + (size_t)h * hs;
            const real* v = s.c.v + (size_t)b * T * s.c.ldv + (size_t)h * hs;
            real* dv = s.c.dv + (size_t)b * T * s.c.ldv + (size_t)h * hs;
            const real* A = L->att + ((size_t)b * NH + h) * TT;
            real_gemm(0, 1, T, T, hs, 1.0f, dO, (int)C, v, (int)s.c.ldv, 0.0f, X + h * TT, T);
            real_gemm(1, 0, T, hs, T, 1.0f, A, T, dO, (int)C, 1.0f, dv, (int)s.c.ldv);
        }
        sel_logits(S, F, &s, L, b); // S = L_h; F kept for the selection mask of head 0
        // S_h <- dL_h = VJP_rowmap(dA_h) (a row's logits are read before its gradient is written)
        for (int h = 0; h < NH; h++) {
            AttnRowCtx ctx = rowops_head_ctx(&s.c, L, h, rs);
            ctx.dp = s.P > 0 ? slots + ((size_t)b * NH + h) * s.P : NULL;
            if (s.c.row->needs_key_sq) {
                rowops_head_key_sq(ks, &s.c, &L->d, b, h);
                memset(dks, 0, sizeof(real) * (size_t)T);
                ctx.key_sq = ks;
                ctx.dkey_sq = dks;
            }
            const real* A = L->att + ((size_t)b * NH + h) * TT;
            real* dl = rs + attn_row_scratch(s.c.row, T); // one row of dL
            for (int t = 0; t < T; t++) {
                ctx.t = t;
                const size_t o = h * TT + (size_t)t * T;
                memset(dl, 0, sizeof(real) * (size_t)T);
                s.c.row->backward_row(dl, X + o, S + o, A + (size_t)t * T, t + 1, &ctx);
                memcpy(S + o, dl, sizeof(real) * (size_t)(t + 1));
                memset(S + o + t + 1, 0, sizeof(real) * (size_t)(T - t - 1));
            }
            if (s.c.row->needs_key_sq) {
                const real* k = s.c.k + (size_t)b * T * s.c.ldk + (size_t)h * hs;
                real* dk = s.c.dk + (size_t)b * T * s.c.ldk + (size_t)h * hs;
                for (int j = 0; j < T; j++)
                    for (int i = 0; i < hs; i++)
                        dk[(size_t)j * s.c.ldk + i] += 2.0f * dks[j] * k[(size_t)j * s.c.ldk + i];
            }
        }
        // selection head: dR[k, j] = -sum_{i > k} sum_h dL_h[i, j], through the ReLU and the
        // masks. X is free now: X_0 <- raw S_0, overwritten row by row with dS_0; F's first row
        // holds the running sum over i > k of sum_h dL_h[i, .].
        real* dS0 = X;
        real* acc = F;
        rowops_head_scores(dS0, &s.c, &L->d, b, 0);
        memset(acc, 0, sizeof(real) * (size_t)T);
        for (int k = T - 1; k >= 0; k--) {
            if (k + 1 < T)
                for (int h = 0; h < NH; h++)
                    for (int j = 0; j <= k + 1; j++)
                        acc[j] += S[h * TT + (size_t)(k + 1) * T + j];
            real* row = dS0 + (size_t)k * T;
            for (int j = 0; j < T; j++)
                row[j] = j >= 1 && j < k && row[j] > 0.0f ? -acc[j] : 0.0f;
        }
        for (int h = 0; h < NH; h++) {
            real* dSh = S + h * TT;
            if (h == 0)
                for (size_t e = 0; e < TT; e++)
                    dSh[e] += dS0[e];
            const real* q = s.c.q + (size_t)b * T * s.c.ldq + (size_t)h * hs;
            const real* k = s.c.k + (size_t)b * T * s.c.ldk + (size_t)h * hs;
            real* dq = s.c.dq + (size_t)b * T * s.c.ldq + (size_t)h * hs;
            real* dk = s.c.dk + (size_t)b * T * s.c.ldk + (size_t)h * hs;
            attn_score_bias_grad(&s.c, b, h, dSh, T);
            attn_score_grad(dSh, T, hs, s.c.scale, q, (int)s.c.ldq, k, (int)s.c.ldk, 1.0f, dq,
                            (int)s.c.ldq, dk, (int)s.c.ldk);
        }
    }
    attn_pos_backward_end(&s.c, &save, L);
    if (s.P > 0 && L->drowp)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int p = 0; p < s.P; p++)
                    L->drowp[(size_t)h * s.stride + p] += slots[((size_t)b * NH + h) * s.P + p];
}

const AttnVariant attn_selective = {
    .name = "selective",
    .formula = "A_h = inner(S_h - F), F[i,j] = sum_{k<i} ReLU(S_0[k,j]) (1 <= j < k)",
    .source = "Leviathan et al. 2025, Selective Attention Improves Transformer (ICLR 2025), "
              "arXiv 2410.02703",
    .reference = "paper, arXiv 2410.02703, Sec. 3",
    .deviations = "the paper's context pruning (an inference-time memory saving) is not modelled",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .layer_cache_floats = sel_cache_floats,
    .layer_scratch_floats = sel_scratch,
    .layer_forward = sel_forward,
    .layer_backward = sel_backward,
};
