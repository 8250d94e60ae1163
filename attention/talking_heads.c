// attention/talking_heads.c: talking-heads attention: learned mixing across heads of the logits
// before the row map and of the weights after it, around any inner row map (attn.inner).
//
// Per batch item, with S_h = scale q_h k_h^T the scores of head h (rotated q, k under rope/xpos),
// B_h the position bias of head h (ALiBi slope_h (j - t), or the FIRE bias; 0 otherwise) and two
// learned H x H matrices stored as deviations from the identity, M1 = I + P1 and M2 = I + P2:
//   L_g = sum_h M1[g,h] S_h + B_g           (attn.bias_order = after, the default)
//   L_g = sum_h M1[g,h] (S_h + B_h)         (attn.bias_order = before: the biases are mixed too)
//   A_g = rowmap(L_g), row by row           (the inner map, with head g's row parameters)
//   W_k = sum_g M2[k,g] A_g                 (weights of head k)
//   o_k = W_k v_k
// The mixing acts on each (t, j) entry separately, so position t still sees only keys j <= t.
// With P1 = P2 = 0 (the init) the layer is exactly the inner attention, in either order.
//
// Source: N. Shazeer, Z. Lan, Y. Cheng, N. Ding, L. Hou, "Talking-Heads Attention",
// arXiv 2003.02436 (the same number of heads at every stage here: h_k = h = h_v = NH). The paper
// has no position bias. Its order follows the reference code that combines the two,
// lucidrains/x-transformers: x_transformers/attend.py (Attend.forward: sim = sim +
// pre_softmax_talking_heads(sim), then sim = sim + attn_bias), where attn_bias is the ALiBi (or
// other relative) bias computed in x_transformers/x_transformers.py (Attention.forward, rel_pos):
// the bias is added after the pre-softmax mixing, so each head keeps its own ALiBi slope.
// attn.bias_order = before (attnlab's order until this option existed) mixes the slopes too.
// Deviations from x-transformers: its pre-softmax mixing is sim + W sim with W initialised to the
// identity (dirac_), i.e. M1 = 2I at init, here M1 = I + P1 with P1 = 0; its post-softmax mixing
// W sim (identity init) equals M2 = I + P2 at init. Neither mixing has a bias, as here.
//
// Tensors (per layer): pre (NH, NH) = P1 and post (NH, NH) = P2, no weight decay, init 0.
// Hyperparameters: attn.bias_order = after | before (attn.inner picks the row map; its keys apply).
// att holds the post-mix weights W (what multiplies V); rows sum to sum_g M2[k,g] for a
// normalised inner map. The cache keeps the inner weights A (B,NH,T,T).
//
// Backward, per batch item, given do_k:
//   dW_k = do_k v_k^T ;  dv_k += W_k^T do_k
//   dA_g = sum_k M2[k,g] dW_k ;  dP2[k,g] += <dW_k, A_g>
//   dL_g = VJP_rowmap(dA_g) row by row (O(n) per row; row-parameter gradients of head g)
//   dS_h = sum_g M1[g,h] dL_g ;  dP1[g,h] += <dL_g, S_h> (S_h + B_h under before)
//   dB_g = dL_g (after) or dB_h = dS_h (before): the FIRE parameters' gradient (ALiBi is fixed)
//   dq_h += scale dS_h k_h ;  dk_h += scale dS_h^T q_h
// S and L are recomputed in backward (one product per head) rather than stored. Inner products
// <., .> run over the causal entries j <= t only.
// Threading: parallel over batch items (heads mix, so a (b, h) split would race); every
// parameter gradient goes to a per-item slot, reduced over items in index order: results are
// identical for any thread count. Per-thread scratch: 4 NH T^2 floats plus the row scratch.
#include <math.h>
#include <string.h>

#include "attention/layer.h"
#include "attention/rowops.h"

enum { T_PRE, T_POST, N_T };
enum { BO_AFTER, BO_BEFORE };

static const AttnHParamSpec TH_HP[] = {
    {"bias_order", BO_AFTER, 0, 0, "after|before",
     "position bias (alibi, fire) added after the pre-softmax head mixing (x-transformers) or "
     "before it (the bias is mixed too)"},
};

static int th_tensors(AttnTensorSpec* out, const AttnDims* d, const AttnHParams* hp) {
    (void)hp;
    out[T_PRE] = (AttnTensorSpec){
        .name = "pre", .ndim = 2, .shape = {d->NH, d->NH}, .decay = 0, .init = ATTN_INIT_ZERO};
    out[T_POST] = (AttnTensorSpec){
        .name = "post", .ndim = 2, .shape = {d->NH, d->NH}, .decay = 0, .init = ATTN_INIT_ZERO};
    return N_T;
}

// per-item gradient slot: dP1 (NH*NH) | dP2 (NH*NH) | drowp (NH*P)
static size_t th_slot(const AttnDims* d, int P) {
    return 2 * (size_t)d->NH * d->NH + (size_t)d->NH * (size_t)P;
}

// per-thread scratch: 4 NH (T, T) planes, the row map's scratch and two rows
static size_t th_scratch_for(const AttnDims* d, const AttnVariant* row) {
    return 4 * (size_t)d->NH * d->T * d->T + attn_row_scratch(row, d->T) + 2 * (size_t)d->T;
}

static size_t th_scratch(const AttnDims* d, const AttnHParams* hp) {
    return th_scratch_for(d, hp->inner);
}

static size_t th_cache_floats(const AttnDims* d, const AttnHParams* hp) {
    const int P = hp->inner ? hp->inner->params_per_head : 0;
    return (size_t)d->B * d->NH * d->T * d->T + (size_t)d->B * th_slot(d, P);
}

typedef struct {
    AttnCore c; // q, k (rotated under rope), v, slopes, row map, row params
    int P, stride;
    int after; // attn.bias_order = after
    size_t row_scratch, per_thread;
} ThSetup;

// the layer's core (q, k before position encoding), sizes, and the per-thread scratch
static ThSetup th_setup(const AttnLayer* L) {
    ThSetup s;
    s.c = attn_layer_core(L);
    s.P = s.c.row->params_per_head;
    s.stride = s.c.rowp_stride > 0 ? s.c.rowp_stride : s.P;
    s.after = (int)L->hp->v[0] == BO_AFTER;
    s.row_scratch = attn_row_scratch(s.c.row, L->d.T);
    s.per_thread = th_scratch_for(&L->d, s.c.row);
    attn_workspace_expect(L->ws, s.per_thread);
    return s;
}

// S_h (all heads; with their bias B_h under before) and L_g = S_g + sum_h P1[g,h] S_h (+ B_g
// under after) for item b, causal entries only
static void th_scores(real* S, real* Lg, const ThSetup* s, const AttnLayer* L, int b) {
    const int T = L->d.T, NH = L->d.NH;
    const size_t TT = (size_t)T * T;
    AttnCore raw = s->c; // the scores without the position bias
    if (s->after) {
        raw.score_bias_slopes = NULL;
        raw.score_bias = NULL;
    }
    for (int h = 0; h < NH; h++)
        rowops_head_scores(S + h * TT, &raw, &L->d, b, h);
    const real* P1 = L->tp[T_PRE];
    for (int g = 0; g < NH; g++) {
        real* Lrow = Lg + g * TT;
        const real slope =
            s->after && s->c.score_bias_slopes ? s->c.score_bias_slopes[g] : (real)0.0f;
        for (int t = 0; t < T; t++)
            for (int j = 0; j <= t; j++) {
                const size_t e = (size_t)t * T + j;
                real z = S[g * TT + e];
                for (int h = 0; h < NH; h++)
                    z += P1[g * NH + h] * S[h * TT + e];
                Lrow[e] = z - slope * (real)(t - j);
            }
        if (s->after) attn_score_bias_add(Lrow, &s->c, g, T); // FIRE
    }
}

static void th_forward(AttnLayer* L) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH, hs = L->d.hs;
    const size_t TT = (size_t)T * T, C = (size_t)L->d.C;
    ThSetup s = th_setup(L);
    attn_pos_forward(&s.c, L, L->qk_pos);
    const real* P2 = L->tp[T_POST];
    real* Acache = L->cache;
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        real* tb = attn_thread_scratch(L->ws);
        real *S = tb, *Lg = tb + NH * TT, *ks = tb + 4 * NH * TT, *rs = ks + 2 * T;
        th_scores(S, Lg, &s, L, b);
        real* A = Acache + (size_t)b * NH * TT;
        for (int g = 0; g < NH; g++) {
            AttnRowCtx ctx = rowops_head_ctx(&s.c, L, g, rs);
            if (s.c.row->needs_key_sq) {
                rowops_head_key_sq(ks, &s.c, &L->d, b, g);
                ctx.key_sq = ks;
            }
            for (int t = 0; t < T; t++) {
                ctx.t = t;
                real* arow = A + g * TT + (size_t)t * T;
                s.c.row->forward_row(arow, Lg + g * TT + (size_t)t * T, t + 1, &ctx);
                memset(arow + t + 1, 0, sizeof(real) * (size_t)(T - t - 1));
            }
        }
        real* W = L->att + (size_t)b * NH * TT;
        for (int k = 0; k < NH; k++) {
            real* Wk = W + k * TT;
            memcpy(Wk, A + k * TT, sizeof(real) * TT);
            for (int g = 0; g < NH; g++) {
                const real m = P2[k * NH + g];
                if (m == 0.0f) continue;
                const real* Ag = A + g * TT;
                for (int t = 0; t < T; t++)
                    for (int j = 0; j <= t; j++)
                        Wk[(size_t)t * T + j] += m * Ag[(size_t)t * T + j];
            }
            const real* v = s.c.v + (size_t)b * T * s.c.ldv + (size_t)k * hs;
            real* o = L->out + (size_t)b * T * C + (size_t)k * hs;
            real_gemm(0, 0, T, hs, T, 1.0f, Wk, T, v, (int)s.c.ldv, 0.0f, o, (int)C);
        }
    }
}

// <X, Y> over the causal entries of two (T,T) matrices
static real th_causal_dot(const real* X, const real* Y, int T) {
    real a = 0.0f;
    for (int t = 0; t < T; t++)
        for (int j = 0; j <= t; j++)
            a += X[(size_t)t * T + j] * Y[(size_t)t * T + j];
    return a;
}

static void th_backward(AttnLayer* L) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH, hs = L->d.hs;
    const size_t TT = (size_t)T * T, C = (size_t)L->d.C;
    AttnPosSave save;
    ThSetup s = th_setup(L);
    attn_pos_backward_begin(&s.c, &save, L, L->qk_pos);
    const real *P1 = L->tp[T_PRE], *P2 = L->tp[T_POST];
    const size_t slot = th_slot(&L->d, s.P);
    real* slots = L->cache + (size_t)B * NH * TT;
    memset(slots, 0, sizeof(real) * slot * (size_t)B);
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        real* tb = attn_thread_scratch(L->ws);
        real *S = tb, *Lg = tb + NH * TT, *X = tb + 2 * NH * TT, *Y = tb + 3 * NH * TT;
        real *ks = tb + 4 * NH * TT, *dks = ks + T, *rs = ks + 2 * T;
        real* sl = slots + (size_t)b * slot;
        real *dP1 = sl, *dP2 = sl + NH * NH, *drp = sl + 2 * NH * NH;
        const real* A = L->cache + (size_t)b * NH * TT;
        const real* W = L->att + (size_t)b * NH * TT;
        // X = dW_k = do_k v_k^T ; dv_k += W_k^T do_k
        for (int k = 0; k < NH; k++) {
            const real* dO = L->dout + (size_t)b * T * C + (size_t)k * hs;
            const real* v = s.c.v + (size_t)b * T * s.c.ldv + (size_t)k * hs;
            real* dv = s.c.dv + (size_t)b * T * s.c.ldv + (size_t)k * hs;
            real_gemm(0, 1, T, T, hs, 1.0f, dO, (int)C, v, (int)s.c.ldv, 0.0f, X + k * TT, T);
            real_gemm(1, 0, T, hs, T, 1.0f, W + k * TT, T, dO, (int)C, 1.0f, dv, (int)s.c.ldv);
        }
        // Y = dA_g = dW_g + sum_k P2[k,g] dW_k ; dP2[k,g] += <dW_k, A_g>
        for (int g = 0; g < NH; g++) {
            real* Yg = Y + g * TT;
            memcpy(Yg, X + g * TT, sizeof(real) * TT);
            for (int k = 0; k < NH; k++) {
                const real m = P2[k * NH + g];
                const real* Xk = X + k * TT;
                dP2[k * NH + g] += th_causal_dot(Xk, A + g * TT, T);
                if (m == 0.0f) continue;
                for (int t = 0; t < T; t++)
                    for (int j = 0; j <= t; j++)
                        Yg[(size_t)t * T + j] += m * Xk[(size_t)t * T + j];
            }
        }
        // X = dL_g = VJP_rowmap(dA_g), on the recomputed logits L_g
        th_scores(S, Lg, &s, L, b);
        for (int g = 0; g < NH; g++) {
            AttnRowCtx ctx = rowops_head_ctx(&s.c, L, g, rs);
            ctx.dp = s.P > 0 ? drp + (size_t)g * s.P : NULL;
            if (s.c.row->needs_key_sq) {
                rowops_head_key_sq(ks, &s.c, &L->d, b, g);
                memset(dks, 0, sizeof(real) * (size_t)T);
                ctx.key_sq = ks;
                ctx.dkey_sq = dks;
            }
            real* Xg = X + g * TT;
            memset(Xg, 0, sizeof(real) * TT);
            for (int t = 0; t < T; t++) {
                ctx.t = t;
                const size_t o = (size_t)t * T;
                s.c.row->backward_row(Xg + o, Y + g * TT + o, Lg + g * TT + o, A + g * TT + o,
                                      t + 1, &ctx);
            }
            if (s.after) attn_score_bias_grad(&s.c, b, g, Xg, T); // dB_g = dL_g
            if (s.c.row->needs_key_sq) { // key_sq_j = |k_j|^2 => dk_j += 2 dkey_sq_j k_j
                const real* k = s.c.k + (size_t)b * T * s.c.ldk + (size_t)g * hs;
                real* dk = s.c.dk + (size_t)b * T * s.c.ldk + (size_t)g * hs;
                for (int j = 0; j < T; j++)
                    for (int i = 0; i < hs; i++)
                        dk[(size_t)j * s.c.ldk + i] += 2.0f * dks[j] * k[(size_t)j * s.c.ldk + i];
            }
        }
        // Y = dS_h = dL_h + sum_g P1[g,h] dL_g ; dP1[g,h] += <dL_g, S_h> ; then dq, dk
        for (int h = 0; h < NH; h++) {
            real* Yh = Y + h * TT;
            memcpy(Yh, X + h * TT, sizeof(real) * TT);
            for (int g = 0; g < NH; g++) {
                const real m = P1[g * NH + h];
                const real* Xg = X + g * TT;
                dP1[g * NH + h] += th_causal_dot(Xg, S + h * TT, T);
                if (m == 0.0f) continue;
                for (int t = 0; t < T; t++)
                    for (int j = 0; j <= t; j++)
                        Yh[(size_t)t * T + j] += m * Xg[(size_t)t * T + j];
            }
            for (int t = 0; t < T; t++) // entries j > t carry no gradient
                memset(Yh + (size_t)t * T + t + 1, 0, sizeof(real) * (size_t)(T - t - 1));
            const real* q = s.c.q + (size_t)b * T * s.c.ldq + (size_t)h * hs;
            const real* k = s.c.k + (size_t)b * T * s.c.ldk + (size_t)h * hs;
            real* dq = s.c.dq + (size_t)b * T * s.c.ldq + (size_t)h * hs;
            real* dk = s.c.dk + (size_t)b * T * s.c.ldk + (size_t)h * hs;
            if (!s.after) attn_score_bias_grad(&s.c, b, h, Yh, T); // dB_h = dS_h
            attn_score_grad(Yh, T, hs, s.c.scale, q, (int)s.c.ldq, k, (int)s.c.ldk, 1.0f, dq,
                            (int)s.c.ldq, dk, (int)s.c.ldk);
        }
    }
    attn_pos_backward_end(&s.c, &save, L);
    // reduce the per-item slots over b in index order
    for (int b = 0; b < B; b++) {
        const real* sl = slots + (size_t)b * slot;
        for (int i = 0; i < NH * NH; i++) {
            L->dtp[T_PRE][i] += sl[i];
            L->dtp[T_POST][i] += sl[NH * NH + i];
        }
        if (s.P > 0 && L->drowp)
            for (int g = 0; g < NH; g++)
                for (int p = 0; p < s.P; p++)
                    L->drowp[(size_t)g * s.stride + p] += sl[2 * NH * NH + g * s.P + p];
    }
}

const AttnVariant attn_talking_heads = {
    .name = "talking_heads",
    .formula = "W_k = sum_g (I + P2)[k,g] inner(sum_h (I + P1)[g,h] S_h); o_k = W_k v_k",
    .source = "Shazeer et al. 2020, Talking-Heads Attention, arXiv 2003.02436",
    .reference = "paper, Sec. 4 (pseudo-code); the position-bias order as "
                 "lucidrains/x-transformers:x_transformers/attend.py (Attend.forward)",
    .deviations = "x-transformers initialises its pre-softmax mixing sim + W sim with W = I (M1 = "
                  "2I at init); here M1 = I + P1, P1 = 0 (the identity). attn.bias_order = before "
                  "mixes the position bias with the logits (attnlab's earlier order)",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .hparams = TH_HP,
    .n_hparams = (int)(sizeof(TH_HP) / sizeof(TH_HP[0])),
    .layer_tensors = th_tensors,
    .layer_cache_floats = th_cache_floats,
    .layer_scratch_floats = th_scratch,
    .layer_forward = th_forward,
    .layer_backward = th_backward,
};
