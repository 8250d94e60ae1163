// attention/diff.c: differential attention (DIFF Transformer): the difference of two attention
// maps of the inner row map, with a learned scalar lambda and a per-head RMS normalisation.
//
// Per head h, its query and key split into halves of d = hs/2 channels (q = [q1, q2],
// k = [k1, k2]); v keeps all hs channels. With the inner row map (attn.inner, default softmax):
//   A1 = rowmap(q1 k1^T / sqrt(d)),  A2 = rowmap(q2 k2^T / sqrt(d))   (position encoding on q, k)
// Under rope/xpos each half is rotated as a head of its own of d channels: pair i of a half at
// position t turns by t 10000^(-2i/d) (xPos: times zeta_i^(+-p/512), zeta_i = (2i/d + 0.4)/1.4,
// p = t - ceil(T/2) the centred position as attn_xpos),
// as the authors' code views q, k as 2 NH heads of d channels and rotates those (not the hs-wide
// rotation of the other variants, whose frequencies would differ between the two halves). This
// needs d even (hs a multiple of 4). The rotation is the driver's (attn_rotate on the view of
// 2 NH heads of d channels) with the driver's table of width d (attn_rope_table; under xPos the
// table carries z cos, z sin rounded once, the query's and the key's). ALiBi and FIRE add the
// same bias to both maps.
//   D  = A1 - lambda A2,   U = D v
//   lambda = exp(lq1 . lk1) - exp(lq2 . lk2) + lambda_init
//   o_t = (1 - lambda_init) * w (.) U_t / sqrt(mean_i U_ti^2 + eps)     (RMSNorm per head, eps
//   1e-5)
// lambda_init = 0.8 - 0.6 exp(-0.3 l) for layer index l = 0, 1, ... (the paper's depth schedule,
// with its 1-based l - 1), or attn.lambda0 with attn.lambda_mode = fixed.
// Causal: both maps see keys j <= t only, so D and o do too.
//
// Source: T. Ye, L. Dong, Y. Xia, Y. Sun, Y. Zhu, G. Huang, F. Wei, "Differential Transformer",
// ICLR 2025, arXiv 2410.05258 (Eq. 1-3; the reference code, microsoft/unilm
// Diff-Transformer/multihead_diffattn.py: rotary per sub-head of d, lambda vectors of size d,
// shared by the heads of a layer, init N(0, 0.1); sub-layer RMSNorm with a learnable weight of
// size 2 head_dim). Here the GPT-2 head of hs channels plays the paper's 2d: the same parameter
// count as the softmax baseline, the halves of q and k being the paper's two groups.
//
// Tensors (per layer, no weight decay): lq1, lk1, lq2, lk2 (hs/2), init N(0, 0.1); w (hs), init 1.
// Hyperparameters: attn.lambda_mode = depth | fixed, attn.lambda0 = 0.8.
// att holds D (rows sum to 1 - lambda for a normalised inner map; entries can be negative).
//
// Backward, per (b, h), with n_t = U_t / r_t, r_t = sqrt(mean U_t^2 + eps), c = 1 - lambda_init:
//   dw += c sum_t dO_t (.) n_t ;  dn_t = c w (.) dO_t
//   dU_t = (dn_t - n_t mean_i(dn_ti n_ti)) / r_t                       (RMSNorm VJP)
//   dD = dU v^T ;  dv += D^T dU
//   dA1 = dD ;  dA2 = -lambda dD ;  dlambda += -<dD, A2>  (causal entries)
//   dS1 = VJP_rowmap(dA1), dS2 = VJP_rowmap(dA2) row by row (O(n) each)
//   dq1 += dS1 k1 / sqrt(d) ;  dk1 += dS1^T q1 / sqrt(d)   (same for q2, k2: the driver's
//   attn_score_grad on each half, n = d channels at offsets 0 and d of rows of the full stride)
//   under rope/xpos: dq0 += R^T dq, dk0 += R^T dk (R the rotation by halves, rotated space in the
//   driver's buffer)
//   dlq1 += dlambda e1 lk1 ;  dlk1 += dlambda e1 lq1 ;  dlq2 -= dlambda e2 lk2 ;  dlk2 -= ...
// with e1 = exp(lq1 . lk1), e2 = exp(lq2 . lk2). S1, S2 are recomputed in backward.
// Threading: parallel over (b, h); each pair writes its own slices of dq, dk, dv and its own slot
// for dw, dlambda and the row parameters, reduced over (b, h) in index order: results are
// identical for any thread count.
// Cache: A1, A2 (B,NH,T,T), U (B,T,C), 1/r (B,T,NH), the rotation tables of width d (query cos,
// sin, key cos, sin: 4 (T, d/2), written under rope/xpos in forward and again in backward),
// slots. Inner maps that need key norms, odd head sizes and, under rope/xpos, head sizes that
// are not multiples of 4 are refused at setup (diff_check).
//
// Reference: microsoft/unilm:Diff-Transformer/multihead_diffattn.py
// Deviations from it: none.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attention/layer.h"
#include "attention/rowops.h"
#include "common/util.h"

enum { HP_LAMBDA_MODE, HP_LAMBDA0, N_HP };
enum { LAMBDA_DEPTH, LAMBDA_FIXED };
enum { T_LQ1, T_LK1, T_LQ2, T_LK2, T_W, N_T };

#define DIFF_EPS ((real)1e-5)

static const AttnHParamSpec DIFF_HP[N_HP] = {
    [HP_LAMBDA_MODE] = {"lambda_mode", LAMBDA_DEPTH, 0, 0, "depth|fixed",
                        "lambda_init = 0.8 - 0.6 exp(-0.3 layer), or attn.lambda0"},
    [HP_LAMBDA0] = {"lambda0", 0.8f, -10.0f, 10.0f, NULL, "lambda_init when lambda_mode = fixed"},
};

// The configuration diff needs, checked once at setup (attn_layer_check): the forward and
// backward then assume it.
static int diff_check(const AttnDims* d, const AttnHParams* hp, int pos, char* err, size_t cap) {
    if (hp->inner && hp->inner->needs_key_sq) {
        snprintf(err, cap,
                 "key 'attn.inner': attention 'diff' cannot run inner map '%s', which reads key "
                 "norms (not supported)",
                 hp->inner->name);
        return -1;
    }
    if (d->hs % 2 != 0) {
        snprintf(err, cap,
                 "key 'n_embd': attention 'diff' splits each head's q and k in halves: head size "
                 "%d (n_embd %d / n_head %d) is odd",
                 d->hs, d->C, d->NH);
        return -1;
    }
    if (attn_pos_rotates(pos) && (d->hs / 2) % 2 != 0) {
        snprintf(err, cap,
                 "key 'pos_encoding': attention 'diff' under %s rotates each half of a head as a "
                 "head of its own: head size %d (n_embd %d / n_head %d) is not a multiple of 4",
                 attn_pos_name(pos), d->hs, d->C, d->NH);
        return -1;
    }
    return 0;
}

static int diff_tensors(AttnTensorSpec* out, const AttnDims* d, const AttnHParams* hp) {
    (void)hp;
    ASSERT(d->hs % 2 == 0); // diff_check
    static const char* const names[4] = {"lq1", "lk1", "lq2", "lk2"};
    for (int i = 0; i < 4; i++)
        out[i] = (AttnTensorSpec){.name = names[i],
                                  .ndim = 1,
                                  .shape = {d->hs / 2},
                                  .decay = 0,
                                  .init = ATTN_INIT_NORMAL,
                                  .init_value = 0.1f};
    out[T_W] = (AttnTensorSpec){.name = "w",
                                .ndim = 1,
                                .shape = {d->hs},
                                .decay = 0,
                                .init = ATTN_INIT_CONST,
                                .init_value = 1};
    return N_T;
}

// per-(b,h) slot: dw (hs) | dlambda (1) | drowp (P)
static size_t diff_slot(const AttnDims* d, int P) {
    return (size_t)d->hs + 1 + (size_t)P;
}

// per-thread scratch: 4 (T, T) planes, a (T, hs) block and the row map's scratch
static size_t diff_scratch_for(const AttnDims* d, const AttnVariant* row) {
    const size_t TT = (size_t)d->T * d->T;
    return 4 * TT + (size_t)d->T * d->hs + attn_row_scratch(row, d->T);
}

static size_t diff_scratch(const AttnDims* d, const AttnHParams* hp) {
    return diff_scratch_for(d, hp->inner);
}

static size_t diff_cache_floats(const AttnDims* d, const AttnHParams* hp) {
    const int P = hp->inner ? hp->inner->params_per_head : 0;
    const size_t BNH = (size_t)d->B * d->NH;
    return 2 * BNH * d->T * d->T + (size_t)d->B * d->T * d->C + (size_t)d->B * d->T * d->NH +
           (size_t)d->T * d->hs + BNH * diff_slot(d, P);
}

typedef struct {
    real *A1, *A2, *U, *rinv, *rot, *slots; // rot: 4 tables (T, hs/4)
} DiffCache;

static DiffCache diff_cache(const AttnLayer* L) {
    const size_t BNH = (size_t)L->d.B * L->d.NH, TT = (size_t)L->d.T * L->d.T;
    DiffCache k;
    k.A1 = L->cache;
    k.A2 = k.A1 + BNH * TT;
    k.U = k.A2 + BNH * TT;
    k.rinv = k.U + (size_t)L->d.B * L->d.T * L->d.C;
    k.rot = k.rinv + (size_t)L->d.B * L->d.T * L->d.NH;
    k.slots = k.rot + (size_t)L->d.T * L->d.hs;
    return k;
}

static real diff_lambda_init(const AttnLayer* L) {
    if ((int)L->hp->v[HP_LAMBDA_MODE] == LAMBDA_FIXED) return L->hp->v[HP_LAMBDA0];
    return (real)0.8 - (real)0.6 * real_exp((real)-0.3 * (real)L->layer);
}

static real diff_dot(const real* x, const real* y, int n) {
    real a = 0.0f;
    for (int i = 0; i < n; i++)
        a += x[i] * y[i];
    return a;
}

// S1, S2 (T,T) of head h of item b from the (rotated) q, k of the core, plus ALiBi
static void diff_scores(real* S1, real* S2, const AttnCore* c, const AttnLayer* L, int b, int h) {
    const int T = L->d.T, hs = L->d.hs, d = hs / 2;
    const real sc = 1.0f / real_sqrt((real)d);
    const real* q = c->q + (size_t)b * T * c->ldq + (size_t)h * hs;
    const real* k = c->k + (size_t)b * T * c->ldk + (size_t)h * hs;
    real_gemm(0, 1, T, T, d, sc, q, (int)c->ldq, k, (int)c->ldk, 0.0f, S1, T);
    real_gemm(0, 1, T, T, d, sc, q + d, (int)c->ldq, k + d, (int)c->ldk, 0.0f, S2, T);
    const real slope = c->score_bias_slopes ? c->score_bias_slopes[h] : 0.0f;
    if (slope != 0.0f)
        for (int t = 0; t < T; t++)
            for (int j = 0; j <= t; j++) {
                S1[(size_t)t * T + j] -= slope * (real)(t - j);
                S2[(size_t)t * T + j] -= slope * (real)(t - j);
            }
    attn_score_bias_add(S1, c, h, T); // FIRE: the same bias on both maps
    attn_score_bias_add(S2, c, h, T);
}

// The rotation by halves of this call: the driver's tables of width d = hs/2 (query, key)
typedef struct {
    const real *qc, *qs, *kc, *ks;
} DiffRot;

// q or k of every head rotated by halves (see above) from `in` (row stride ldi) into `out` (row
// stride ldo): out = R x, or R^T x with inverse (then accumulated into out when accumulate),
// with the table cs, sn: the driver's rotation of the view of 2 NH heads of d channels.
static void diff_rotate(real* out, size_t ldo, const real* in, size_t ldi, const AttnLayer* L,
                        const real* cs, const real* sn, int inverse, int accumulate) {
    AttnDims halves = L->d;
    halves.NH = 2 * L->d.NH;
    halves.hs = L->d.hs / 2;
    attn_rotate(out, ldo, in, ldi, &halves, cs, sn, attn_workspace_threads(L->ws), inverse,
                accumulate);
}

// After attn_pos_forward or attn_pos_backward_begin (ALiBi slopes, FIRE bias and, under
// rope/xpos, an hs-wide rotation into L->qk_pos): under rope/xpos that rotation is replaced by
// the rotation by halves of the unrotated q0, k0, its tables built into the cache (xPos: the
// query's zeta^(p/512), the key's zeta^(-p/512); RoPE: one table for both).
static DiffRot diff_pos_halves(AttnCore* c, const AttnLayer* L, const DiffCache* k, const real* q0,
                               size_t ldq0, const real* k0, size_t ldk0) {
    DiffRot r = {0};
    if (!attn_pos_rotates(L->pos_encoding)) return r;
    ASSERT((L->d.hs / 2) % 2 == 0); // diff_check
    const int T = L->d.T, d = L->d.hs / 2, xs = L->pos_encoding == ATTN_POS_XPOS;
    const size_t C = (size_t)L->d.C, n = (size_t)T * (size_t)(d / 2);
    real *qc = k->rot, *qs = qc + n, *kc = qs + n, *ks = kc + n;
    attn_rope_table(qc, qs, T, d, xs ? 1 : 0);
    if (xs) attn_rope_table(kc, ks, T, d, -1);
    r = (DiffRot){qc, qs, xs ? kc : qc, xs ? ks : qs};
    diff_rotate(L->qk_pos, 2 * C, q0, ldq0, L, r.qc, r.qs, 0, 0);
    diff_rotate(L->qk_pos + C, 2 * C, k0, ldk0, L, r.kc, r.ks, 0, 0);
    c->q = L->qk_pos;
    c->k = L->qk_pos + C;
    c->ldq = c->ldk = 2 * C;
    return r;
}

static size_t diff_reserve(const AttnLayer* L, const AttnCore* c) {
    const size_t n = diff_scratch_for(&L->d, c->row);
    attn_workspace_expect(L->ws, n);
    return n;
}

static real diff_lambda(const AttnLayer* L, real* e1, real* e2) {
    const int d = L->d.hs / 2;
    *e1 = real_exp(diff_dot(L->tp[T_LQ1], L->tp[T_LK1], d));
    *e2 = real_exp(diff_dot(L->tp[T_LQ2], L->tp[T_LK2], d));
    return *e1 - *e2 + diff_lambda_init(L);
}

static void diff_forward(AttnLayer* L) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH, hs = L->d.hs;
    const size_t TT = (size_t)T * T, C = (size_t)L->d.C;
    DiffCache k = diff_cache(L);
    AttnCore c = attn_layer_core(L);
    const AttnCore c0 = c;
    attn_pos_forward(&c, L, L->qk_pos);
    diff_pos_halves(&c, L, &k, c0.q, c0.ldq, c0.k, c0.ldk);
    diff_reserve(L, &c);
    real e1, e2;
    const real lambda = diff_lambda(L, &e1, &e2), cnorm = 1.0f - diff_lambda_init(L);
    const real* w = L->tp[T_W];
#pragma omp parallel for collapse(2) schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            real* tb = attn_thread_scratch(L->ws);
            real *S1 = tb, *S2 = tb + TT, *rs = tb + 4 * TT + (size_t)T * hs;
            diff_scores(S1, S2, &c, L, b, h);
            const size_t bh = ((size_t)b * NH + h) * TT;
            real *A1 = k.A1 + bh, *A2 = k.A2 + bh, *D = L->att + bh;
            AttnRowCtx ctx = rowops_head_ctx(&c, L, h, rs);
            for (int t = 0; t < T; t++) {
                const size_t o = (size_t)t * T;
                ctx.t = t;
                c.row->forward_row(A1 + o, S1 + o, t + 1, &ctx);
                c.row->forward_row(A2 + o, S2 + o, t + 1, &ctx);
                for (int j = 0; j <= t; j++)
                    D[o + j] = A1[o + j] - lambda * A2[o + j];
                for (int j = t + 1; j < T; j++)
                    A1[o + j] = A2[o + j] = D[o + j] = 0.0f;
            }
            const real* v = c.v + (size_t)b * T * c.ldv + (size_t)h * hs;
            real* U = k.U + (size_t)b * T * C + (size_t)h * hs;
            real_gemm(0, 0, T, hs, T, 1.0f, D, T, v, (int)c.ldv, 0.0f, U, (int)C);
            for (int t = 0; t < T; t++) {
                const real* u = U + (size_t)t * C;
                const real ri = 1.0f / real_sqrt(diff_dot(u, u, hs) / (real)hs + DIFF_EPS);
                k.rinv[((size_t)b * T + t) * NH + h] = ri;
                real* o = L->out + ((size_t)b * T + t) * C + (size_t)h * hs;
                for (int i = 0; i < hs; i++)
                    o[i] = cnorm * w[i] * u[i] * ri;
            }
        }
    }
}

static void diff_backward(AttnLayer* L) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH, hs = L->d.hs, dh = hs / 2;
    const size_t TT = (size_t)T * T, C = (size_t)L->d.C;
    DiffCache k = diff_cache(L);
    AttnCore c = attn_layer_core(L);
    const AttnCore c0 = c;
    AttnPosSave save;
    attn_pos_backward_begin(&c, &save, L, L->qk_pos); // under rope/xpos dq, dk go to its buffer
    const DiffRot rot = diff_pos_halves(&c, L, &k, c0.q, c0.ldq, c0.k, c0.ldk);
    diff_reserve(L, &c);
    const int P = c.row->params_per_head, stride = c.rowp_stride > 0 ? c.rowp_stride : P;
    const size_t slot = diff_slot(&L->d, P);
    memset(k.slots, 0, sizeof(real) * slot * (size_t)B * NH);
    real e1, e2;
    const real lambda = diff_lambda(L, &e1, &e2), cnorm = 1.0f - diff_lambda_init(L);
    const real sc = 1.0f / real_sqrt((real)dh);
    const real* w = L->tp[T_W];
#pragma omp parallel for collapse(2) schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            real* tb = attn_thread_scratch(L->ws);
            real *S1 = tb, *S2 = tb + TT, *dD = tb + 2 * TT, *dS = tb + 3 * TT, *dU = tb + 4 * TT;
            real* rs = dU + (size_t)T * hs;
            real* sl = k.slots + ((size_t)b * NH + h) * slot;
            real *dw = sl, *dlam = sl + hs, *drp = sl + hs + 1;
            const size_t bh = ((size_t)b * NH + h) * TT;
            const real *A1 = k.A1 + bh, *A2 = k.A2 + bh, *D = L->att + bh;
            const real* U = k.U + (size_t)b * T * C + (size_t)h * hs;
            // RMSNorm backward: dU (T, hs) in the thread scratch
            for (int t = 0; t < T; t++) {
                const real ri = k.rinv[((size_t)b * T + t) * NH + h];
                const real* dO = L->dout + ((size_t)b * T + t) * C + (size_t)h * hs;
                const real* u = U + (size_t)t * C;
                real* du = dU + (size_t)t * hs;
                real m = 0.0f; // mean_i dn_i n_i
                for (int i = 0; i < hs; i++) {
                    const real n = u[i] * ri;
                    dw[i] += cnorm * dO[i] * n;
                    m += cnorm * w[i] * dO[i] * n;
                }
                m /= (real)hs;
                for (int i = 0; i < hs; i++) {
                    const real n = u[i] * ri;
                    du[i] = (cnorm * w[i] * dO[i] - n * m) * ri;
                }
            }
            const real* v = c.v + (size_t)b * T * c.ldv + (size_t)h * hs;
            real* dv = c.dv + (size_t)b * T * c.ldv + (size_t)h * hs;
            real_gemm(0, 1, T, T, hs, 1.0f, dU, hs, v, (int)c.ldv, 0.0f, dD, T);
            real_gemm(1, 0, T, hs, T, 1.0f, D, T, dU, hs, 1.0f, dv, (int)c.ldv);
            diff_scores(S1, S2, &c, L, b, h);
            AttnRowCtx ctx = rowops_head_ctx(&c, L, h, rs);
            ctx.dp = P > 0 ? drp : NULL;
            real dl = 0.0f;
            for (int t = 0; t < T; t++) {
                const size_t o = (size_t)t * T;
                ctx.t = t;
                for (int j = 0; j <= t; j++)
                    dl -= dD[o + j] * A2[o + j];
                memset(dS + o, 0, sizeof(real) * (size_t)T);
                c.row->backward_row(dS + o, dD + o, S1 + o, A1 + o, t + 1, &ctx);
                for (int j = 0; j <= t; j++) // dA2 = -lambda dD, in place (dD is done with)
                    dD[o + j] *= -lambda;
                memset(S1 + o, 0, sizeof(real) * (size_t)T); // S1 row becomes dS2
                c.row->backward_row(S1 + o, dD + o, S2 + o, A2 + o, t + 1, &ctx);
            }
            *dlam += dl;
            const real* q = c.q + (size_t)b * T * c.ldq + (size_t)h * hs;
            const real* kk = c.k + (size_t)b * T * c.ldk + (size_t)h * hs;
            real* dq = c.dq + (size_t)b * T * c.ldq + (size_t)h * hs;
            real* dk = c.dk + (size_t)b * T * c.ldk + (size_t)h * hs;
            attn_score_bias_grad(&c, b, h, dS, T); // FIRE: dS1 + dS2
            attn_score_bias_grad(&c, b, h, S1, T);
            attn_score_grad(dS, T, dh, sc, q, (int)c.ldq, kk, (int)c.ldk, 1.0f, dq, (int)c.ldq, dk,
                            (int)c.ldk); // first half: dS1
            attn_score_grad(S1, T, dh, sc, q + dh, (int)c.ldq, kk + dh, (int)c.ldk, 1.0f, dq + dh,
                            (int)c.ldq, dk + dh, (int)c.ldk); // second half: dS2
        }
    }
    if (save.active) { // R^T by halves of the rotated-space gradients into the layer's dq, dk
        if (save.dq) diff_rotate(save.dq, save.ldq, c.dq, c.ldq, L, rot.qc, rot.qs, 1, 1);
        if (save.dk) diff_rotate(save.dk, save.ldk, c.dk, c.ldk, L, rot.kc, rot.ks, 1, 1);
    } else {
        attn_pos_backward_end(&c, &save, L); // FIRE's backward (no rotation is active)
    }
    real dlambda = 0.0f;
    for (int bh = 0; bh < B * NH; bh++) { // fixed-order reduction of the slots
        const real* sl = k.slots + (size_t)bh * slot;
        for (int i = 0; i < hs; i++)
            L->dtp[T_W][i] += sl[i];
        dlambda += sl[hs];
        if (P > 0 && L->drowp)
            for (int p = 0; p < P; p++)
                L->drowp[(size_t)(bh % NH) * stride + p] += sl[hs + 1 + p];
    }
    const real *lq1 = L->tp[T_LQ1], *lk1 = L->tp[T_LK1], *lq2 = L->tp[T_LQ2], *lk2 = L->tp[T_LK2];
    for (int i = 0; i < dh; i++) {
        L->dtp[T_LQ1][i] += dlambda * e1 * lk1[i];
        L->dtp[T_LK1][i] += dlambda * e1 * lq1[i];
        L->dtp[T_LQ2][i] -= dlambda * e2 * lk2[i];
        L->dtp[T_LK2][i] -= dlambda * e2 * lq2[i];
    }
}

const AttnVariant attn_diff = {
    .name = "diff",
    .formula = "o = (1 - l0) RMSNorm((inner(q1 k1^T) - lambda inner(q2 k2^T)) v), lambda learned",
    .source = "Ye et al. 2025, Differential Transformer (ICLR 2025), arXiv 2410.05258",
    .reference = "microsoft/unilm:Diff-Transformer/multihead_diffattn.py",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .hparams = DIFF_HP,
    .n_hparams = N_HP,
    .layer_check = diff_check,
    .layer_tensors = diff_tensors,
    .layer_cache_floats = diff_cache_floats,
    .layer_scratch_floats = diff_scratch,
    .layer_forward = diff_forward,
    .layer_backward = diff_backward,
};
