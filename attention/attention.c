// attention/attention.c: the attention driver shared by every variant: scores through sgemm,
// causal rows handed to the variant's row map, A·V, and the backward of all three. See
// attention/layer.h for shapes, attention.h for the threading contract.
//
// Forward, per (b, h), with S, A of shape (T, T) and q, k, v, o of shape (T, hs):
//   S   = scale * q k^T (+ ALiBi slope_h * (j - t)) ; S'_t = row_scale_t * S_t
//   A_t = rowmap(S'_t[0..t])      (zeros for j > t: future keys never enter a row)
//   o   = A v
// Backward, given do = dL/do:
//   dA   = do v^T                 (only j <= t is used)
//   dS'_t = VJP_rowmap(dA_t)      (O(n) per row, supplied by the variant)
//   drow_scale_t = <S_t, dS'_t> ; dS_t = row_scale_t * dS'_t
//   dq  += scale * dS k ;  dk += scale * dS^T q ;  dv += A^T do
// S is recomputed in backward (one sgemm) instead of being stored: it saves a (B,NH,T,T)
// tensor per layer. All products go through the kernel layer (mm_gemm, common/matmul.h) on strided
// views of qkv.
#include "attention/attention.h"
#include "common/matmul.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/prof.h"
#include "common/util.h"

#ifdef ATTN_REAL_DOUBLE
#include <cblas.h>

void real_gemm(int trans_a, int trans_b, int M, int N, int K, real alpha, const real* A, int lda,
               const real* B, int ldb, real beta, real* C, int ldc) {
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// out (N,OC) = inp (N,C) weight^T + bias
void real_matmul_forward(real* out, const real* inp, const real* weight, const real* bias, int N,
                         int C, int OC) {
    real_gemm(0, 1, N, OC, C, 1.0, inp, C, weight, C, 0.0, out, OC);
    if (bias)
        for (int i = 0; i < N; i++)
            for (int o = 0; o < OC; o++)
                out[(size_t)i * OC + o] += bias[o];
}

// dinp += dout weight; dweight += dout^T inp; dbias += column sums of dout
void real_matmul_backward(real* dinp, real* dweight, real* dbias, const real* dout, const real* inp,
                          const real* weight, int N, int C, int OC) {
    if (dinp) real_gemm(0, 0, N, C, OC, 1.0, dout, OC, weight, C, 1.0, dinp, C);
    real_gemm(1, 0, OC, C, N, 1.0, dout, OC, inp, C, 1.0, dweight, C);
    if (dbias)
        for (int i = 0; i < N; i++)
            for (int o = 0; o < OC; o++)
                dbias[o] += dout[(size_t)i * OC + o];
}
#endif

struct AttnWorkspace {
    int B, T, NH, nthreads, maxP;
    size_t per_thread; // floats per thread
    real* buf;         // nthreads * per_thread
    real* dp_slots;    // (B, NH, maxP) private parameter-gradient slots
    real* slopes;      // (NH) ALiBi slopes
    // RoPE: cos/sin of t * 10000^(-2i/hs) for t < T, i < hs/2 (attn_workspace_prepare_pos)
    real *rope_cos, *rope_sin;
    real* xpos_scale; // (T, hs/2) zeta_i^(p/512), p = t - ceil(T/2), for xPos
    int rope_hs;
    real* posgrad; // (B,T,2C) rotated-space gradient of q, k under rope
    size_t posgrad_n;
    real* extra; // nthreads * extra_n: scratch reserved by layer-level variants
    size_t extra_n;
    real* fire_bias;  // (NH,T,T) FIRE bias of the layer being run (attn_workspace_prepare_pos)
    real* fire_dbias; // (B,NH,T,T) its gradient slots
    real* fire_rows;  // (T, attn_fire_nparams(NH)) attn_fire_backward's private rows
};

// per-thread layout: S (T*T) | dA (T*T) | dS (T*T) | srow (T) | key_sq (T) | dkey_sq (T) | row
static size_t ws_fixed(int T) {
    return 3 * (size_t)T * (size_t)T + 3 * (size_t)T;
}

// The workspace's buffers, in reals: one function for the allocation and for its size-only twin.
typedef struct {
    size_t per_thread, buf, dp_slots, slopes;
    size_t rope, posgrad; // each of the 3 RoPE tables, the rotated-space gradient (rope, xpos)
    size_t fire_bias, fire_dbias, fire_rows; // FIRE's bias table, its slots, its backward's rows
} WsSizes;

static WsSizes ws_sizes(int B, int T, int NH, int C, int nthreads, size_t row_scratch, int maxP) {
    WsSizes z;
    z.per_thread = (ws_fixed(T) + row_scratch + 15) & ~(size_t)15;
    z.buf = z.per_thread * (size_t)(nthreads > 0 ? nthreads : 1);
    z.dp_slots = (size_t)B * NH * (size_t)(maxP > 0 ? maxP : 1);
    z.slopes = (size_t)NH;
    z.rope = C > 0 ? (size_t)T * (size_t)(C / NH / 2) : 0;
    z.posgrad = (size_t)B * T * 2 * (size_t)C;
    z.fire_bias = (size_t)NH * T * T;
    z.fire_dbias = (size_t)B * NH * T * T;
    z.fire_rows = attn_fire_backward_scratch(NH, T);
    return z;
}

static size_t real_bytes(size_t n) {
    return util_floats_bytes(n * (sizeof(real) / sizeof(float)));
}

size_t attn_workspace_bytes(int B, int T, int NH, int C, int nthreads, size_t row_scratch,
                            int max_params_per_head, int pos_encoding) {
    const WsSizes z = ws_sizes(B, T, NH, C, nthreads, row_scratch, max_params_per_head);
    size_t b =
        sizeof(AttnWorkspace) + real_bytes(z.buf) + real_bytes(z.dp_slots) + real_bytes(z.slopes);
    if (attn_pos_rotates(pos_encoding)) b += 3 * real_bytes(z.rope) + real_bytes(z.posgrad);
    if (pos_encoding == ATTN_POS_FIRE)
        b += real_bytes(z.fire_bias) + real_bytes(z.fire_dbias) + real_bytes(z.fire_rows);
    return b;
}

AttnWorkspace* attn_workspace_new(int B, int T, int NH, int nthreads, size_t row_scratch,
                                  int max_params_per_head) {
    AttnWorkspace* ws = callocCheck(1, sizeof(AttnWorkspace));
    ws->B = B;
    ws->T = T;
    ws->NH = NH;
    ws->nthreads = nthreads > 0 ? nthreads : 1;
    ws->maxP = max_params_per_head;
    const WsSizes z = ws_sizes(B, T, NH, 0, nthreads, row_scratch, max_params_per_head);
    ws->per_thread = z.per_thread;
    ws->buf = real_alloc(z.buf);
    ws->dp_slots = real_alloc(z.dp_slots);
    ws->slopes = real_alloc(z.slopes);
    for (int h = 0; h < NH; h++) // ALiBi, as negative distance penalties
        ws->slopes[h] = attn_alibi_slope(h, NH);
    return ws;
}

void attn_workspace_free(AttnWorkspace* ws) {
    if (!ws) return;
    free(ws->buf);
    free(ws->dp_slots);
    free(ws->slopes);
    free(ws->rope_cos);
    free(ws->rope_sin);
    free(ws->xpos_scale);
    free(ws->posgrad);
    free(ws->extra);
    free(ws->fire_bias);
    free(ws->fire_dbias);
    free(ws->fire_rows);
    free(ws);
}

size_t attn_row_scratch(const AttnVariant* v, int T) {
    return v && v->scratch_floats ? v->scratch_floats(T) : 0;
}

static real* thread_buf(AttnWorkspace* ws) {
    int tid = omp_get_thread_num();
    ASSERT(tid < ws->nthreads);
    return ws->buf + (size_t)tid * ws->per_thread;
}

// S = scale * q k^T (+ ALiBi) (+ the FIRE bias of head h) for one (b, h): q, k point at row 0
// of that head.
static void scores(real* S, const real* q, size_t ldq, const real* k, size_t ldk, int T, int hs,
                   real scale, real slope, const real* bias) {
    real_gemm(0, 1, T, T, hs, scale, q, (int)ldq, k, (int)ldk, 0.0f, S, T);
    if (slope != 0.0f) {
        for (int t = 0; t < T; t++)
            for (int j = 0; j <= t; j++)
                S[(size_t)t * T + j] -= slope * (real)(t - j);
    }
    if (bias)
        for (int t = 0; t < T; t++)
            for (int j = 0; j <= t; j++)
                S[(size_t)t * T + j] += bias[(size_t)t * T + j];
}

void attn_score_bias_add(real* S, const AttnCore* c, int h, int T) {
    if (!c->score_bias) return;
    const real* bias = c->score_bias + (size_t)h * T * T;
    for (int t = 0; t < T; t++)
        for (int j = 0; j <= t; j++)
            S[(size_t)t * T + j] += bias[(size_t)t * T + j];
}

void attn_score_bias_grad(const AttnCore* c, int b, int h, const real* dS, int T) {
    if (!c->dscore_bias) return;
    const int NH = c->dscore_nh;
    real* slot = c->dscore_bias + ((size_t)b * NH + h) * T * T;
    for (int t = 0; t < T; t++)
        for (int j = 0; j <= t; j++)
            slot[(size_t)t * T + j] += dS[(size_t)t * T + j];
}

void attn_score_grad(const real* dS, int T, int n, real alpha, const real* q, int ldq,
                     const real* k, int ldk, real beta, real* dq, int ldd_q, real* dk, int ldd_k) {
    real_gemm(0, 0, T, n, T, alpha, dS, T, k, ldk, beta, dq, ldd_q);
    real_gemm(1, 0, T, n, T, alpha, dS, T, q, ldq, beta, dk, ldd_k);
}

static const char* const ATTN_POS_NAMES[ATTN_POS_COUNT] = {
    [ATTN_POS_LEARNED] = "learned", [ATTN_POS_ROPE] = "rope", [ATTN_POS_ALIBI] = "alibi",
    [ATTN_POS_NONE] = "none",       [ATTN_POS_XPOS] = "xpos", [ATTN_POS_FIRE] = "fire",
};

const char* attn_pos_name(int pos) {
    return pos >= 0 && pos < ATTN_POS_COUNT ? ATTN_POS_NAMES[pos] : NULL;
}

int attn_pos_from_name(const char* name) {
    for (int p = 0; p < ATTN_POS_COUNT; p++)
        if (ATTN_POS_NAMES[p] && strcmp(name, ATTN_POS_NAMES[p]) == 0) return p;
    return -1;
}

int attn_pos_supported(const AttnVariant* v, int pos) {
    return !(pos == ATTN_POS_FIRE && v->ignores_inner);
}

static void key_norms(real* key_sq, const real* k, size_t ldk, int T, int hs) {
    for (int j = 0; j < T; j++) {
        const real* kj = k + (size_t)j * ldk;
        real s = 0.0f;
        for (int i = 0; i < hs; i++)
            s += kj[i] * kj[i];
        key_sq[j] = s;
    }
}

void attn_core_forward(const AttnCore* c, const AttnDims* d, AttnWorkspace* ws) {
    const int B = d->B, T = d->T, NH = d->NH, hs = d->hs;
    const int P = c->row->params_per_head;
    const int stride = c->rowp_stride > 0 ? c->rowp_stride : P;
    ASSERT(T <= ws->T && B <= ws->B && NH == ws->NH);
    const int prof = prof_on; // the profile: the row maps' share of this region (common/prof.h)
    double pw0 = 0;
    if (prof) {
        prof_par_reset();
        pw0 = util_now();
    }
#pragma omp parallel for collapse(2) schedule(static) num_threads(ws->nthreads)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const double pt0 = prof ? util_now() : 0;
            real* tb = thread_buf(ws);
            real* S = tb;
            real* key_sq = tb + 3 * (size_t)T * T + (size_t)T;
            real* row_scratch = tb + ws_fixed(T);
            const size_t bt = (size_t)b * T;
            const real* q = c->q + bt * c->ldq + (size_t)h * hs;
            const real* k = c->k + bt * c->ldk + (size_t)h * hs;
            const real* v = c->v + bt * c->ldv + (size_t)h * hs;
            real slope = c->score_bias_slopes ? c->score_bias_slopes[h] : 0.0f;
            const real* bias = c->score_bias ? c->score_bias + (size_t)h * T * T : NULL;
            scores(S, q, c->ldq, k, c->ldk, T, hs, c->scale, slope, bias);
            if (c->row->needs_key_sq) key_norms(key_sq, k, c->ldk, T, hs);
            AttnRowCtx ctx = {.hp = c->hp,
                              .p = P > 0 ? c->rowp + (size_t)h * stride : NULL,
                              .scratch = row_scratch,
                              .key_sq = c->row->needs_key_sq ? key_sq : NULL,
                              .T = T,
                              .h = h,
                              .step = c->step,
                              .seed = c->seed,
                              .layer = c->layer};
            real* A = c->att + ((size_t)b * NH + h) * T * T;
            const real* rs = c->row_scale ? c->row_scale + ((size_t)b * NH + h) * T : NULL;
            const double pt1 = prof ? util_now() : 0;
            for (int t = 0; t < T; t++) {
                real* srow = S + (size_t)t * T;
                if (rs)
                    for (int j = 0; j <= t; j++)
                        srow[j] *= rs[t];
                ctx.t = t;
                c->row->forward_row(A + (size_t)t * T, srow, t + 1, &ctx);
                memset(A + (size_t)t * T + t + 1, 0, sizeof(real) * (size_t)(T - t - 1));
            }
            const double pt2 = prof ? util_now() : 0;
            real* o = c->out + bt * c->ldo + (size_t)h * hs;
            real_gemm(0, 0, T, hs, T, 1.0f, A, T, v, (int)c->ldv, 0.0f, o, (int)c->ldo);
            if (prof) {
                prof_par_add(0, util_now() - pt0);
                prof_par_add(1, pt2 - pt1);
            }
        }
    }
    if (prof) prof_par_split(PROF_ATTN_MM_FWD, PROF_ATTN_ROW_FWD, util_now() - pw0);
}

void attn_core_backward(const AttnCore* c, const AttnDims* d, AttnWorkspace* ws) {
    const int B = d->B, T = d->T, NH = d->NH, hs = d->hs;
    const int P = c->row->params_per_head;
    const int stride = c->rowp_stride > 0 ? c->rowp_stride : P;
    ASSERT(T <= ws->T && B <= ws->B && NH == ws->NH && P <= ws->maxP);
    if (P > 0) memset(ws->dp_slots, 0, sizeof(real) * (size_t)B * NH * P);
    const int prof = prof_on; // the profile: the row maps' share of this region (common/prof.h)
    double pw0 = 0;
    if (prof) {
        prof_par_reset();
        pw0 = util_now();
    }
#pragma omp parallel for collapse(2) schedule(static) num_threads(ws->nthreads)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const double pt0 = prof ? util_now() : 0;
            real* tb = thread_buf(ws);
            real* S = tb;
            real* dA = tb + (size_t)T * T;
            real* dS = tb + 2 * (size_t)T * T;
            real* srow = tb + 3 * (size_t)T * T;
            real* key_sq = srow + T;
            real* dkey_sq = key_sq + T;
            real* row_scratch = tb + ws_fixed(T);
            const size_t bt = (size_t)b * T;
            const real* q = c->q + bt * c->ldq + (size_t)h * hs;
            const real* k = c->k + bt * c->ldk + (size_t)h * hs;
            const real* v = c->v + bt * c->ldv + (size_t)h * hs;
            const real* dout = c->dout + bt * c->ldo + (size_t)h * hs;
            const real* A = c->att + ((size_t)b * NH + h) * T * T;
            real slope = c->score_bias_slopes ? c->score_bias_slopes[h] : 0.0f;
            const real* bias = c->score_bias ? c->score_bias + (size_t)h * T * T : NULL;
            scores(S, q, c->ldq, k, c->ldk, T, hs, c->scale, slope, bias);
            int need_ks = c->row->needs_key_sq;
            if (need_ks) {
                key_norms(key_sq, k, c->ldk, T, hs);
                memset(dkey_sq, 0, sizeof(real) * (size_t)T);
            }
            // dA = do v^T
            real_gemm(0, 1, T, T, hs, 1.0f, dout, (int)c->ldo, v, (int)c->ldv, 0.0f, dA, T);
            AttnRowCtx ctx = {.hp = c->hp,
                              .p = P > 0 ? c->rowp + (size_t)h * stride : NULL,
                              .dp = P > 0 ? ws->dp_slots + ((size_t)b * NH + h) * P : NULL,
                              .scratch = row_scratch,
                              .key_sq = need_ks ? key_sq : NULL,
                              .dkey_sq = need_ks ? dkey_sq : NULL,
                              .T = T,
                              .h = h,
                              .step = c->step,
                              .seed = c->seed,
                              .layer = c->layer};
            const real* rs = c->row_scale ? c->row_scale + ((size_t)b * NH + h) * T : NULL;
            real* drs = c->drow_scale ? c->drow_scale + ((size_t)b * NH + h) * T : NULL;
            const double pt1 = prof ? util_now() : 0;
            for (int t = 0; t < T; t++) {
                const real* s_raw = S + (size_t)t * T;
                const real* s_in = s_raw;
                if (rs) {
                    for (int j = 0; j <= t; j++)
                        srow[j] = rs[t] * s_raw[j];
                    s_in = srow;
                }
                real* dsr = dS + (size_t)t * T;
                memset(dsr, 0, sizeof(real) * (size_t)T);
                ctx.t = t;
                c->row->backward_row(dsr, dA + (size_t)t * T, s_in, A + (size_t)t * T, t + 1, &ctx);
                if (rs) {
                    real g = 0.0f;
                    for (int j = 0; j <= t; j++)
                        g += s_raw[j] * dsr[j];
                    if (drs) drs[t] += g;
                    for (int j = 0; j <= t; j++)
                        dsr[j] *= rs[t];
                }
            }
            const double pt2 = prof ? util_now() : 0;
            attn_score_bias_grad(c, b, h, dS, T); // dS is dL/ds of the biased scores
            real* dq = c->dq + bt * c->ldq + (size_t)h * hs;
            real* dk = c->dk + bt * c->ldk + (size_t)h * hs;
            real* dv = c->dv + bt * c->ldv + (size_t)h * hs;
            attn_score_grad(dS, T, hs, c->scale, q, (int)c->ldq, k, (int)c->ldk, 1.0f, dq,
                            (int)c->ldq, dk, (int)c->ldk);
            real_gemm(1, 0, T, hs, T, 1.0f, A, T, dout, (int)c->ldo, 1.0f, dv, (int)c->ldv);
            if (need_ks) { // key_sq_j = |k_j|^2  =>  dk_j += 2 dkey_sq_j k_j
                for (int j = 0; j < T; j++) {
                    real g = 2.0f * dkey_sq[j];
                    const real* kj = k + (size_t)j * c->ldk;
                    real* dkj = dk + (size_t)j * c->ldk;
                    for (int i = 0; i < hs; i++)
                        dkj[i] += g * kj[i];
                }
            }
            if (prof) {
                prof_par_add(0, util_now() - pt0);
                prof_par_add(1, pt2 - pt1);
            }
        }
    }
    if (prof) prof_par_split(PROF_ATTN_MM_BWD, PROF_ATTN_ROW_BWD, util_now() - pw0);
    // reduce the per-(b,h) parameter gradients over b in a fixed order
    if (P > 0 && c->drowp) {
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int k = 0; k < P; k++)
                    c->drowp[(size_t)h * stride + k] += ws->dp_slots[((size_t)b * NH + h) * P + k];
    }
}

// ---------------------------------------------------------------------------------------------
// position encodings

// ALiBi slopes as the authors' get_slopes (ofirpress/attention_with_linear_biases:
// fairseq/models/transformer.py, also BLOOM's and MPT's): P = the largest power of two <= NH;
// heads h < P take the geometric sequence of P heads, 2^(-8(h+1)/P); heads h >= P take every other
// slope of the sequence of 2P heads, starting with the first: 2^(-8(2(h-P)+1)/(2P)). For NH a power
// of two this is 2^(-8(h+1)/NH), evaluated exactly as before. The exponents are dyadic rationals,
// exact in float.
real attn_alibi_slope(int h, int NH) {
    int P = 1;
    while (2 * P <= NH)
        P *= 2;
    if (h < P) return real_pow(2.0f, -8.0f * (real)(h + 1) / (real)P);
    return real_pow(2.0f, -4.0f * (real)(2 * (h - P) + 1) / (real)P);
}

// xPos (torchscale, see attention/posenc.h): ln zeta_0 = ln(0.4 / 1.4) is the most negative, so the
// extreme factors are zeta_0^(-+P/512) at the centred position p = -P, P = ceil(T/2). Both stay
// normal floats while P ln(1.4 / 0.4) / 512 <= 126 ln 2 (FLT_MIN = 2^-126; FLT_MAX > 2^127).
int attn_xpos_max_T(void) {
    const double P = floor(126.0 * log(2.0) * ATTN_XPOS_SCALE_BASE / log(1.4 / 0.4));
    return 2 * (int)P;
}

// zeta_i^(p/512) in double (the one formula of attn_xpos_scale and attn_rope_table)
static double xpos_zeta_pow(int i, int width, int p) {
    const double lz = log((2.0 * i / width + 0.4) / 1.4); // ln zeta_i
    return exp(lz * (double)p / ATTN_XPOS_SCALE_BASE);
}

real attn_xpos_scale(int i, int hs, int p) {
    return (real)xpos_zeta_pow(i, hs, p);
}

void attn_rope_table(real* cs, real* sn, int T, int width, int xsign) {
    const int half = width / 2, c = (T + 1) / 2; // p = t - c
    for (int i = 0; i < half; i++) {
        const double theta = pow(10000.0, -2.0 * (double)i / (double)width);
        for (int t = 0; t < T; t++) {
            const double a = (double)t * theta;
            const double z = xsign == 0 ? 1.0 : xpos_zeta_pow(i, width, xsign * (t - c));
            cs[(size_t)t * half + i] = (real)(z * cos(a));
            sn[(size_t)t * half + i] = (real)(z * sin(a));
        }
    }
}

static void rope_table(AttnWorkspace* ws, int hs) {
    if (ws->rope_cos && ws->rope_hs == hs) return;
    free(ws->rope_cos);
    free(ws->rope_sin);
    free(ws->xpos_scale);
    const int half = hs / 2;
    ws->rope_cos = real_alloc((size_t)ws->T * (size_t)half);
    ws->rope_sin = real_alloc((size_t)ws->T * (size_t)half);
    ws->xpos_scale = real_alloc((size_t)ws->T * (size_t)half);
    ws->rope_hs = hs;
    attn_rope_table(ws->rope_cos, ws->rope_sin, ws->T, hs, 0);
    const int c = (ws->T + 1) / 2; // row r of the xPos table is the centred position r - c
    for (int t = 0; t < ws->T; t++)
        for (int i = 0; i < half; i++)
            ws->xpos_scale[(size_t)t * half + i] = attn_xpos_scale(i, hs, t - c);
}

// R x (or R^T x), times the xPos scale zeta^(xsign p/512) per pair when xsign != 0, at the
// centred position p = t - ceil(T/2) of a call of length T (torchscale's min_pos = -T // 2)
// Rows t0..T-1 of each batch entry only (t0 = 0: all), `in` and `out` holding just those rows.
static void rope_apply_from(real* out, size_t ldo, const real* in, size_t ldi, const AttnDims* d,
                            AttnWorkspace* ws, int inverse, int accumulate, int xsign, int t0) {
    const int B = d->B, T = d->T, NH = d->NH, hs = d->hs, half = hs / 2, R = T - t0;
    // the tables of attn_workspace_prepare_pos; an even hs is attn_layer_check's (at setup)
    ASSERT(T <= ws->T && hs % 2 == 0 && ws->rope_cos && ws->rope_hs == hs);
    const int xoff = (ws->T + 1) / 2 - (T + 1) / 2; // table row of position t: t + xoff
    const real sgn = inverse ? -1.0f : 1.0f;
#pragma omp parallel for schedule(static) num_threads(ws->nthreads)
    for (int bt = 0; bt < B * R; bt++) {
        const int t = t0 + bt % R;
        const real* cs = ws->rope_cos + (size_t)t * half;
        const real* sn = ws->rope_sin + (size_t)t * half;
        const real* xs = ws->xpos_scale + (size_t)(t + xoff) * half;
        const real* x = in + (size_t)bt * ldi;
        real* y = out + (size_t)bt * ldo;
        for (int h = 0; h < NH; h++) {
            for (int i = 0; i < half; i++) {
                const size_t o = (size_t)h * hs + 2 * (size_t)i;
                const real x0 = x[o], x1 = x[o + 1];
                const real z = xsign == 0 ? 1.0f : xsign > 0 ? xs[i] : 1.0f / xs[i];
                const real c = z * cs[i], s = z * sgn * sn[i];
                const real y0 = x0 * c - x1 * s, y1 = x0 * s + x1 * c;
                if (accumulate) {
                    y[o] += y0;
                    y[o + 1] += y1;
                } else {
                    y[o] = y0;
                    y[o + 1] = y1;
                }
            }
        }
    }
}

static void rope_apply(real* out, size_t ldo, const real* in, size_t ldi, const AttnDims* d,
                       AttnWorkspace* ws, int inverse, int accumulate, int xsign) {
    rope_apply_from(out, ldo, in, ldi, d, ws, inverse, accumulate, xsign, 0);
}

void attn_pos_rotate_rows(real* out, size_t ldo, const real* in, size_t ldi, const AttnDims* d,
                          AttnWorkspace* ws, int pos_encoding, int is_key, int t0) {
    ASSERT(attn_pos_rotates(pos_encoding) && t0 >= 0 && t0 < d->T);
    const int xs = pos_encoding == ATTN_POS_XPOS ? (is_key ? -1 : 1) : 0;
    rope_apply_from(out, ldo, in, ldi, d, ws, 0, 0, xs, t0);
}

// Pairs outermost, heads innermost (c, s fixed across the heads): the loop shape of diff's own
// rotation, which this replaces bit for bit. The shape matters: GCC 12 at -O3 -march=native
// vectorises it over the heads with fused multiply-add/subtract instructions (vfmaddsub), which
// round one of the products of x0 c - x1 s, x0 s + x1 c less than rope_apply's loop (heads
// outermost, no fused instruction) does: the same formula, a different last bit.
void attn_rotate(real* out, size_t ldo, const real* in, size_t ldi, const AttnDims* d,
                 const real* cs, const real* sn, int nthreads, int inverse, int accumulate) {
    const int B = d->B, T = d->T, NG = d->NH, w = d->hs, half = w / 2;
    const real sgn = inverse ? -1.0f : 1.0f;
#pragma omp parallel for schedule(static) num_threads(nthreads)
    for (int bt = 0; bt < B * T; bt++) {
        const int t = bt % T;
        const real* x = in + (size_t)bt * ldi;
        real* y = out + (size_t)bt * ldo;
        for (int i = 0; i < half; i++) {
            const real c = cs[(size_t)t * half + i], s = sgn * sn[(size_t)t * half + i];
            for (int g = 0; g < NG; g++) {
                const size_t o = (size_t)g * w + 2 * (size_t)i;
                const real x0 = x[o], x1 = x[o + 1];
                const real y0 = x0 * c - x1 * s, y1 = x0 * s + x1 * c;
                if (accumulate) {
                    y[o] += y0;
                    y[o + 1] += y1;
                } else {
                    y[o] = y0;
                    y[o + 1] = y1;
                }
            }
        }
    }
}

void attn_rope(real* out, size_t ldo, const real* in, size_t ldi, const AttnDims* d,
               AttnWorkspace* ws, int inverse, int accumulate) {
    rope_apply(out, ldo, in, ldi, d, ws, inverse, accumulate, 0);
}

void attn_xpos(real* out, size_t ldo, const real* in, size_t ldi, const AttnDims* d,
               AttnWorkspace* ws, int is_key, int inverse, int accumulate) {
    rope_apply(out, ldo, in, ldi, d, ws, inverse, accumulate, is_key ? -1 : 1);
}

// FIRE: this layer's bias table into the workspace; the core then adds it to its scores. The
// variant forms logits (model setup refuses fire otherwise) and the model gives the layer its
// FIRE parameters; the table was allocated with the workspace (attn_workspace_prepare_pos).
static void fire_forward(AttnCore* c, const AttnLayer* L) {
    AttnWorkspace* ws = L->ws;
    ASSERT(attn_pos_supported(L->v, L->pos_encoding) && L->posp && ws->fire_bias);
    attn_fire_bias(ws->fire_bias, L->posp, L->d.NH, L->d.T, ws->nthreads);
    c->score_bias = ws->fire_bias;
    c->dscore_nh = L->d.NH;
}

void attn_pos_forward(AttnCore* c, const AttnLayer* L, real* qk) {
    c->score_bias_slopes = L->pos_encoding == ATTN_POS_ALIBI ? L->ws->slopes : NULL;
    c->score_bias = NULL;
    if (L->pos_encoding == ATTN_POS_FIRE) fire_forward(c, L);
    if (!attn_pos_rotates(L->pos_encoding)) return;
    ASSERT(qk); // the model allocates every layer's qk_pos under rope/xpos (gpt2_alloc_acts)
    const size_t C = (size_t)L->d.C;
    const int xs = L->pos_encoding == ATTN_POS_XPOS;
    rope_apply(qk, 2 * C, c->q, c->ldq, &L->d, L->ws, 0, 0, xs ? 1 : 0);
    rope_apply(qk + C, 2 * C, c->k, c->ldk, &L->d, L->ws, 0, 0, xs ? -1 : 0);
    c->q = qk;
    c->k = qk + C;
    c->ldq = c->ldk = 2 * C;
}

void attn_workspace_prepare_pos(AttnWorkspace* ws, int pos_encoding, int C) {
    const WsSizes z = ws_sizes(ws->B, ws->T, ws->NH, C, ws->nthreads, 0, ws->maxP);
    if (pos_encoding == ATTN_POS_FIRE && !ws->fire_bias) {
        ws->fire_bias = real_alloc(z.fire_bias);
        ws->fire_dbias = real_alloc(z.fire_dbias);
        ws->fire_rows = real_alloc(z.fire_rows);
    }
    if (!attn_pos_rotates(pos_encoding)) return;
    // the tables must hold every centred xPos factor: model setup refuses a longer block_size
    ASSERT(pos_encoding != ATTN_POS_XPOS || ws->T <= attn_xpos_max_T());
    rope_table(ws, C / ws->NH);
    if (ws->posgrad_n < z.posgrad) {
        free(ws->posgrad);
        ws->posgrad = real_alloc(z.posgrad);
        ws->posgrad_n = z.posgrad;
    }
}

void attn_pos_backward_begin(AttnCore* c, AttnPosSave* save, const AttnLayer* L, real* qk) {
    memset(save, 0, sizeof(*save));
    save->dq = c->dq;
    save->dk = c->dk;
    save->ldq = c->ldq;
    save->ldk = c->ldk;
    attn_pos_forward(c, L, qk);
    c->dscore_bias = NULL;
    if (L->pos_encoding == ATTN_POS_FIRE && L->dposp) {
        AttnWorkspace* ws = L->ws;
        const size_t n = (size_t)L->d.B * L->d.NH * L->d.T * L->d.T;
        ASSERT(ws->fire_dbias); // attn_workspace_prepare_pos
        memset(ws->fire_dbias, 0, sizeof(real) * n);
        c->dscore_bias = ws->fire_dbias;
        save->fire = 1;
    }
    if (!attn_pos_rotates(L->pos_encoding)) return;
    AttnWorkspace* ws = L->ws;
    const size_t C = (size_t)L->d.C, n = (size_t)L->d.B * (size_t)L->d.T * 2 * C;
    ASSERT(ws->posgrad_n >= n); // attn_workspace_prepare_pos
    memset(ws->posgrad, 0, sizeof(real) * n);
    save->active = 1;
    c->dq = ws->posgrad;
    c->dk = ws->posgrad + C;
}

void attn_pos_backward_end(const AttnCore* c, const AttnPosSave* save, const AttnLayer* L) {
    (void)c;
    if (save->fire)
        attn_fire_backward(L->dposp, L->ws->fire_dbias, L->d.B, L->posp, L->d.NH, L->d.T,
                           L->ws->nthreads, L->ws->fire_rows);
    if (!save->active) return;
    const size_t C = (size_t)L->d.C;
    const real* g = L->ws->posgrad;
    const int xs = L->pos_encoding == ATTN_POS_XPOS;
    if (save->dq) rope_apply(save->dq, save->ldq, g, 2 * C, &L->d, L->ws, 1, 1, xs ? 1 : 0);
    if (save->dk) rope_apply(save->dk, save->ldk, g + C, 2 * C, &L->d, L->ws, 1, 1, xs ? -1 : 0);
}

// ---------------------------------------------------------------------------------------------
// extra scratch for layer-level variants

static size_t extra_per_thread(size_t floats_per_thread) {
    return (floats_per_thread + 15) & ~(size_t)15;
}

size_t attn_workspace_reserve_bytes(int nthreads, size_t floats_per_thread) {
    const size_t n = extra_per_thread(floats_per_thread);
    return n ? real_bytes(n * (size_t)(nthreads > 0 ? nthreads : 1)) : 0;
}

void attn_workspace_reserve(AttnWorkspace* ws, size_t floats_per_thread) {
    size_t n = extra_per_thread(floats_per_thread);
    if (n <= ws->extra_n) return;
    free(ws->extra);
    ws->extra = real_alloc(n * (size_t)ws->nthreads);
    ws->extra_n = n;
}

void attn_workspace_expect(const AttnWorkspace* ws, size_t floats_per_thread) {
    ASSERT(extra_per_thread(floats_per_thread) <= ws->extra_n);
}

real* attn_thread_scratch(AttnWorkspace* ws) {
    int tid = omp_get_thread_num();
    ASSERT(tid < ws->nthreads && ws->extra);
    return ws->extra + (size_t)tid * ws->extra_n;
}

int attn_workspace_threads(const AttnWorkspace* ws) {
    return ws->nthreads;
}

// ---------------------------------------------------------------------------------------------
// default layer pipeline

AttnCore attn_layer_core(const AttnLayer* L) {
    const size_t C = (size_t)L->d.C;
    AttnCore c = {.q = L->qkv,
                  .k = L->qkv + C,
                  .v = L->qkv + 2 * C,
                  .ldq = 3 * C,
                  .ldk = 3 * C,
                  .ldv = 3 * C,
                  .out = L->out,
                  .ldo = C,
                  .att = L->att,
                  .scale = 1.0f / real_sqrt((real)L->d.hs),
                  .row = L->row,
                  // a row map's own hyperparameters are L->hp (row_hp is the inner map's)
                  .hp = L->row == L->v || !L->row_hp ? L->hp : L->row_hp,
                  .rowp = L->rowp,
                  .rowp_stride = L->rowp_stride,
                  .step = L->step,
                  .seed = L->seed,
                  .layer = L->layer,
                  .dout = L->dout,
                  .dq = L->dqkv,
                  .dk = L->dqkv ? L->dqkv + C : NULL,
                  .dv = L->dqkv ? L->dqkv + 2 * C : NULL,
                  .drowp = L->drowp};
    return c;
}

void attention_forward(AttnLayer* L) {
    if (L->v->layer_forward) {
        L->v->layer_forward(L);
        return;
    }
    AttnCore c = attn_layer_core(L);
    attn_pos_forward(&c, L, L->qk_pos);
    attn_core_forward(&c, &L->d, L->ws);
}

void attention_backward(AttnLayer* L) {
    if (L->v->layer_backward) {
        L->v->layer_backward(L);
        return;
    }
    AttnCore c = attn_layer_core(L);
    AttnPosSave save;
    attn_pos_backward_begin(&c, &save, L, L->qk_pos); // recomputes the rotation (cheap)
    attn_core_backward(&c, &L->d, L->ws);
    attn_pos_backward_end(&c, &save, L);
}
