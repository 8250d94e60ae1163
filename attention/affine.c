// attention/affine.c: Affine-Scaled Attention: input-dependent scale and bias applied to the
// inner row map's weights (attn.inner, default softmax), which relaxes the sum-to-one constraint.
//
//   p_i = rowmap(s_i)                       s = q k^T / sqrt(hs), causal row i (n_i = i + 1)
//   A'_ij = alpha_i p_ij + beta_i           (j <= i), per head
//   alpha_i = 2 sigmoid(wa_h . x_i + ba_h)  in (0, 2); init wa = 0, ba = 0 => alpha = 1
//   beta_i  = tanh(wb_h . x_i + bb_h) / n_i (attn.affine_beta = free, default), init 0 => beta = 0
//          or (1 - alpha_i) / n_i           (attn.affine_beta = tied: rows sum to 1 again)
//   o_i = sum_j A'_ij v_j = alpha_i (p v)_i + beta_i sum_{j<=i} v_j
// x_i is the whole block input (ln_1 output, C channels); each head has its own maps. Dividing
// beta by n_i keeps the bias's total mass per row at most 1. The beta part needs only the prefix
// sums of v, never a T x T matrix. att holds the effective weights A'.
//
// Paper: J. Bae, B. Park, G. Park et al., "Affine-Scaled Attention: Towards Flexible and Stable
// Transformer Attention", arXiv 2602.23057 ("input-dependent scaling and a corresponding bias
// term applied to softmax-normalised attention weights"). Its method equations were not at hand:
// the parametrisation above (2 sigmoid for alpha, tanh/n for beta, zero init = the inner map
// exactly) is this implementation's choice; `tied` is the alternative reading in which the bias
// redistributes the mass alpha removes.
//
// Tensors (per layer): alpha_w (NH, C) decay, init 0; alpha_b (NH) no decay, init 0; with free
// beta also beta_w (NH, C) decay, init 0, and beta_b (NH) no decay, init 0.
//
// Backward, with dO the gradient of o, obar = p v and V_i = sum_{j<=i} v_j:
//   dobar_i = alpha_i dO_i  -> inner core backward (dq, dk, dv, row params)
//   dalpha_i = <obar_i, dO_i>;  dbeta_i = <V_i, dO_i>;  dv_j += sum_{i>=j} beta_i dO_i
//   free: dza_i = dalpha_i alpha_i (1 - alpha_i/2);  dzb_i = dbeta_i (1 - tanh^2) / n_i
//   tied: dza_i = (dalpha_i - dbeta_i / n_i) alpha_i (1 - alpha_i/2)
//   dwa_h += sum_i dza_i x_i, dba_h += sum_i dza_i (same for wb, bb); dx_i += sum_h dza wa_h + dzb
//   wb_h
// The core's backward needs p, not A': p is recomputed into att by a second core forward at the
// start of backward (one extra score pass instead of a stored (B,NH,T,T) copy), and att is set
// back to A' at the end. Parameter gradients are summed over (b, t) in index order per head.
// Position encodings (rope, alibi) apply to the inner scores as in the default pipeline.
// Cache: obar, dobar (B,T,C); alpha, beta, dza, dzb (B,T,NH).
//
// Reference: paper, arXiv 2602.23057 (method equations not located)
// Deviations from it: alpha = 2 sigmoid(.), beta = tanh(.)/n and the zero init are this
//   implementation's reading of the abstract, not checked against the paper's equations;
//   attn.affine_beta = tied is the other reading (the bias redistributes the mass alpha removes).
#include <math.h>
#include <string.h>

#include "attention/layer.h"
#include "attention/rowops.h"

enum { HP_BETA, N_HP };
enum { BETA_FREE, BETA_TIED };
enum { T_AW, T_AB, T_BW, T_BB, N_T };

static const AttnHParamSpec AFFINE_HP[N_HP] = {
    [HP_BETA] = {"affine_beta", BETA_FREE, 0, 0, "free|tied",
                 "free: beta = tanh(wb.x + bb)/n; tied: beta = (1 - alpha)/n (rows sum to 1)"},
};

static int affine_tensors(AttnTensorSpec* out, const AttnDims* d, const AttnHParams* hp) {
    out[T_AW] = (AttnTensorSpec){
        .name = "alpha_w", .ndim = 2, .shape = {d->NH, d->C}, .decay = 1, .init = ATTN_INIT_ZERO};
    out[T_AB] = (AttnTensorSpec){
        .name = "alpha_b", .ndim = 1, .shape = {d->NH}, .decay = 0, .init = ATTN_INIT_ZERO};
    if ((int)hp->v[HP_BETA] == BETA_TIED) return 2;
    out[T_BW] = (AttnTensorSpec){
        .name = "beta_w", .ndim = 2, .shape = {d->NH, d->C}, .decay = 1, .init = ATTN_INIT_ZERO};
    out[T_BB] = (AttnTensorSpec){
        .name = "beta_b", .ndim = 1, .shape = {d->NH}, .decay = 0, .init = ATTN_INIT_ZERO};
    return N_T;
}

// per-thread scratch of forward and backward: one running sum of hs floats
static size_t affine_scratch(const AttnDims* d, const AttnHParams* hp) {
    (void)hp;
    return (size_t)d->hs;
}

static size_t affine_cache_floats(const AttnDims* d, const AttnHParams* hp) {
    (void)hp;
    const size_t BT = (size_t)d->B * d->T;
    return 2 * BT * d->C + 4 * BT * d->NH;
}

typedef struct {
    real *obar, *dobar, *alpha, *beta, *dza, *dzb;
} AffineCache;

static AffineCache affine_cache(const AttnLayer* L) {
    const size_t BT = (size_t)L->d.B * L->d.T, C = (size_t)L->d.C, NH = (size_t)L->d.NH;
    AffineCache k;
    k.obar = L->cache;
    k.dobar = k.obar + BT * C;
    k.alpha = k.dobar + BT * C;
    k.beta = k.alpha + BT * NH;
    k.dza = k.beta + BT * NH;
    k.dzb = k.dza + BT * NH;
    return k;
}

// att row t of every (b, h): p -> A' = alpha_t p + beta_t on the causal part
static void affine_apply_att(const AttnLayer* L, const AffineCache* k) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH;
#pragma omp parallel for collapse(2) schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            real* A = L->att + ((size_t)b * NH + h) * T * T;
            for (int t = 0; t < T; t++) {
                const size_t r = ((size_t)b * T + t) * NH + h;
                const real al = k->alpha[r], be = k->beta[r];
                real* row = A + (size_t)t * T;
                for (int j = 0; j <= t; j++)
                    row[j] = al * row[j] + be;
            }
        }
    }
}

static void affine_forward(AttnLayer* L) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH, hs = L->d.hs;
    const size_t C = (size_t)L->d.C;
    const long BT = (long)B * T;
    const int tied = (int)L->hp->v[HP_BETA] == BETA_TIED;
    AffineCache k = affine_cache(L);
    AttnCore c = rowops_layer_core(L, k.obar, k.dobar); // inner row map, A·V into obar
    rowops_core_forward(&c, L);
    // alpha, beta per (row, head)
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (long r = 0; r < BT; r++) {
        const real* x = L->x + (size_t)r * C;
        const int n = (int)(r % T) + 1;
        for (int h = 0; h < NH; h++) {
            const real* wa = L->tp[T_AW] + (size_t)h * C;
            real za = L->tp[T_AB][h];
            for (size_t i = 0; i < C; i++)
                za += wa[i] * x[i];
            const real al = 2.0f / (1.0f + real_exp(-za));
            real be;
            if (tied) {
                be = (1.0f - al) / (real)n;
            } else {
                const real* wb = L->tp[T_BW] + (size_t)h * C;
                real zb = L->tp[T_BB][h];
                for (size_t i = 0; i < C; i++)
                    zb += wb[i] * x[i];
                be = real_tanh(zb) / (real)n;
            }
            k.alpha[(size_t)r * NH + h] = al;
            k.beta[(size_t)r * NH + h] = be;
        }
    }
    // o_t = alpha_t obar_t + beta_t V_t, V the running prefix sum of v (per-thread buffer)
    attn_workspace_expect(L->ws, affine_scratch(&L->d, L->hp));
#pragma omp parallel num_threads(attn_workspace_threads(L->ws))
    {
        real* V = attn_thread_scratch(L->ws);
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                memset(V, 0, sizeof(real) * (size_t)hs);
                for (int t = 0; t < T; t++) {
                    const size_t r = (size_t)b * T + t;
                    const size_t off = r * C + (size_t)h * hs;
                    const real* v = L->qkv + r * 3 * C + 2 * C + (size_t)h * hs;
                    const real al = k.alpha[r * NH + h], be = k.beta[r * NH + h];
                    real* o = L->out + off;
                    const real* ob = k.obar + off;
                    for (int i = 0; i < hs; i++) {
                        V[i] += v[i];
                        o[i] = al * ob[i] + be * V[i];
                    }
                }
            }
        }
    }
    affine_apply_att(L, &k);
}

static void affine_backward(AttnLayer* L) {
    const int B = L->d.B, T = L->d.T, NH = L->d.NH, hs = L->d.hs;
    const size_t C = (size_t)L->d.C;
    const long BT = (long)B * T;
    const int tied = (int)L->hp->v[HP_BETA] == BETA_TIED;
    AffineCache k = affine_cache(L);
    // p back into att (and obar, unchanged) for the core's backward
    AttnCore c = rowops_layer_core(L, k.obar, k.dobar);
    AttnPosSave save;
    attn_pos_backward_begin(&c, &save, L, L->qk_pos);
    attn_core_forward(&c, &L->d, L->ws);
    // per (b, h): dobar = alpha dO, dalpha, dbeta -> dza, dzb; dv += suffix sums of beta dO
    attn_workspace_expect(L->ws, affine_scratch(&L->d, L->hp));
#pragma omp parallel num_threads(attn_workspace_threads(L->ws))
    {
        real* acc = attn_thread_scratch(L->ws);
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                memset(acc, 0, sizeof(real) * (size_t)hs); // prefix sum V_t
                for (int t = 0; t < T; t++) {
                    const size_t r = (size_t)b * T + t;
                    const size_t off = r * C + (size_t)h * hs;
                    const real* v = L->qkv + r * 3 * C + 2 * C + (size_t)h * hs;
                    const real* dO = L->dout + off;
                    const real* ob = k.obar + off;
                    real* dob = k.dobar + off;
                    const real al = k.alpha[r * NH + h];
                    real da = 0.0f, db = 0.0f;
                    for (int i = 0; i < hs; i++) {
                        acc[i] += v[i];
                        da += ob[i] * dO[i];
                        db += acc[i] * dO[i];
                        dob[i] = al * dO[i];
                    }
                    const real n = (real)(t + 1);
                    const real dsig = al * (1.0f - 0.5f * al); // d alpha / d za
                    if (tied) {
                        k.dza[r * NH + h] = (da - db / n) * dsig;
                        k.dzb[r * NH + h] = 0.0f;
                    } else {
                        const real th = k.beta[r * NH + h] * n; // tanh(zb)
                        k.dza[r * NH + h] = da * dsig;
                        k.dzb[r * NH + h] = db * (1.0f - th * th) / n;
                    }
                }
                memset(acc, 0, sizeof(real) * (size_t)hs); // suffix sum of beta_i dO_i
                for (int t = T - 1; t >= 0; t--) {
                    const size_t r = (size_t)b * T + t;
                    const real be = k.beta[r * NH + h];
                    const real* dO = L->dout + r * C + (size_t)h * hs;
                    real* dv = L->dqkv + r * 3 * C + 2 * C + (size_t)h * hs;
                    for (int i = 0; i < hs; i++) {
                        acc[i] += be * dO[i];
                        dv[i] += acc[i];
                    }
                }
            }
        }
    }
    // dx_r += sum_h dza wa_h + dzb wb_h
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (long r = 0; r < BT; r++) {
        real* dx = L->dx + (size_t)r * C;
        for (int h = 0; h < NH; h++) {
            const real dza = k.dza[(size_t)r * NH + h];
            const real* wa = L->tp[T_AW] + (size_t)h * C;
            for (size_t i = 0; i < C; i++)
                dx[i] += dza * wa[i];
            if (!tied) {
                const real dzb = k.dzb[(size_t)r * NH + h];
                const real* wb = L->tp[T_BW] + (size_t)h * C;
                for (size_t i = 0; i < C; i++)
                    dx[i] += dzb * wb[i];
            }
        }
    }
    // map parameters: one head per thread, rows in index order
#pragma omp parallel for schedule(static) num_threads(attn_workspace_threads(L->ws))
    for (int h = 0; h < NH; h++) {
        real* dwa = L->dtp[T_AW] + (size_t)h * C;
        real* dwb = tied ? NULL : L->dtp[T_BW] + (size_t)h * C;
        real sa = 0.0f, sb = 0.0f;
        for (long r = 0; r < BT; r++) {
            const real* x = L->x + (size_t)r * C;
            const real dza = k.dza[(size_t)r * NH + h];
            for (size_t i = 0; i < C; i++)
                dwa[i] += dza * x[i];
            sa += dza;
            if (dwb) {
                const real dzb = k.dzb[(size_t)r * NH + h];
                for (size_t i = 0; i < C; i++)
                    dwb[i] += dzb * x[i];
                sb += dzb;
            }
        }
        L->dtp[T_AB][h] += sa;
        if (!tied) L->dtp[T_BB][h] += sb;
    }
    attn_core_backward(&c, &L->d, L->ws);
    attn_pos_backward_end(&c, &save, L);
    affine_apply_att(L, &k);
}

const AttnVariant attn_affine = {
    .name = "affine",
    .formula = "A' = alpha(x_i) inner(s) + beta(x_i), alpha = 2 sigmoid(.), beta = tanh(.)/n",
    .source = "Bae et al. 2026, Affine-Scaled Attention (2602.23057)",
    .reference = "paper, arXiv 2602.23057 (method equations not located)",
    .deviations =
        "alpha = 2 sigmoid(.), beta = tanh(.)/n and the zero init are this implementation's "
        "reading of the abstract, not checked against the paper's equations; attn.affine_beta = "
        "tied is the other reading (the bias redistributes the mass alpha removes)",
    .rows_sum_to_one = 0,
    .shift_invariant = 0,
    .hparams = AFFINE_HP,
    .n_hparams = N_HP,
    .layer_tensors = affine_tensors,
    .layer_cache_floats = affine_cache_floats,
    .layer_scratch_floats = affine_scratch,
    .layer_forward = affine_forward,
    .layer_backward = affine_backward,
};
