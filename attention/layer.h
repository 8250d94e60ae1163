// attention/layer.h: the kit of a layer-level variant (layer_forward / layer_backward replace the
// default pipeline). Such a variant sees the layer input x, q/k/v and the head outputs, owns
// extra tensors (layer_tensors, stored in the model's parameter table) and a per-layer
// activation cache, and builds on the driver's core (attn_core_forward/backward) with an inner
// row map chosen by `attn.inner`, its position encodings (attn_pos_forward) and per-thread
// scratch (attention/workspace.h). A row map needs none of this: attention/rowmap.h.
//
// Shapes: B batch, T sequence, C channels, NH heads, hs = C/NH head size. qkv is (B,T,3C) with
// q, k, v at channel offsets 0, C, 2C and head h at h*hs within each. att is (B,NH,T,T), row t
// holds weights for keys 0..t and zeros after. out is (B,T,C), heads concatenated.
#ifndef ATTNLAB_ATTENTION_LAYER_H
#define ATTNLAB_ATTENTION_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "attention/posenc.h"
#include "attention/rowmap.h"
#include "attention/workspace.h"

enum { ATTN_INIT_ZERO, ATTN_INIT_CONST, ATTN_INIT_NORMAL };

typedef struct AttnTensorSpec {
    const char* name; // tensor name; the model stores it as "<variant>.<name>" stacked over layers
    int ndim;
    int shape[3];     // per-layer shape
    int decay;        // 1: weight decay applies (matrices); 0: scalars, gates, biases
    int init;         // ATTN_INIT_*
    float init_value; // constant, or the std of the normal init
} AttnTensorSpec;

// Composed variants: a layer-level variant that, for some settings of its hyperparameters, runs a
// fixed row map of its own (rela's ReLU forms, asentmax's alpha-entmax) instead of attn.inner.
// attn_compose resolves that map and its hyperparameters once, at setup, through the variant's
// typed compose hook (attention/compose.h); forward and backward only read the result.
typedef struct AttnComposed {
    const AttnVariant* row; // the row map the variant's core runs; NULL: attn.inner
    AttnHParams hp;         // its hyperparameters
} AttnComposed;

typedef struct AttnLayer {
    const AttnVariant* v;      // this layer's variant
    const AttnVariant* row;    // row map of the core: v for row maps, hp->inner for wrappers
    const AttnHParams* hp;     // hyperparameters of v
    const AttnHParams* row_hp; // hyperparameters of row
    const AttnComposed* own;   // v's own row map, resolved at setup by attn_compose (required
                               // when v->compose is set)
    AttnDims d;
    int layer;
    long step; // training step, -1 at evaluation
    uint64_t seed;
    int pos_encoding; // ATTN_POS_*
    int qk_norm;      // 1: q, k of qkv are already normalised (attn_qknorm_forward, by the model)
    real* qk_pos;     // (B,T,2C) q, k after RoPE (q at 0, k at C); required under rope,
                      // owned by the caller (the model allocates one per layer)
    const real* posp; // this layer's FIRE parameters (attn_fire_nparams(NH)) under fire
    real* dposp;      // their gradient (+=), or NULL in forward
    // parameters (this layer's slices) and their gradients
    const real* rowp; // (NH, rowp_stride) or NULL; head h's params at rowp + h*rowp_stride
    real* drowp;
    int rowp_stride;                  // floats between heads in rowp (0 = row->params_per_head)
    const real* tp[ATTN_MAX_TENSORS]; // v's layer tensors, in layer_tensors order
    real* dtp[ATTN_MAX_TENSORS];
    // activations
    const real* x;   // (B,T,C) input of the attention block (ln_1 output)
    const real* qkv; // (B,T,3C)
    real* out;       // (B,T,C) head outputs, input of the output projection
    real* att;       // (B,NH,T,T) weights, kept for backward and diagnostics
    real* cache;     // layer_cache_floats(d) floats owned by the variant
    // backward (+= into all of these)
    const real* dout; // (B,T,C)
    real* dx;         // (B,T,C)
    real* dqkv;       // (B,T,3C)
    AttnWorkspace* ws;
} AttnLayer;

// ---- the core, for layer-level variants: rows of A from given q, k and A·V from v.
typedef struct {
    const real* q; // element (b,t,h,i) at q[(b*T + t)*ldq + h*hs + i]
    const real* k;
    const real* v;
    size_t ldq, ldk, ldv;
    real* out; // (b,t,h,i) at out[(b*T + t)*ldo + h*hs + i]; overwritten in forward
    size_t ldo;
    real* att;                     // (B,NH,T,T)
    real scale;                    // score scale, usually 1/sqrt(hs)
    const real* row_scale;         // (B,NH,T) per-row multiplier of s before the row map, or NULL
    const real* score_bias_slopes; // (NH) ALiBi slopes: s_tj += slope_h*(j - t), or NULL
    const real* score_bias;        // (NH,T,T) additive bias s_tj += bias_h[t][j] (FIRE), or NULL
    real* dscore_bias;             // (B,NH,T,T) its gradient slots (+=, j <= t), or NULL
    int dscore_nh;                 // NH of the slots
    const AttnVariant* row;
    const AttnHParams* hp;
    const real* rowp; // (NH, rowp_stride) or NULL
    int rowp_stride;  // 0 = P
    long step;
    uint64_t seed;
    int layer;
    // backward (+=): gradients of q, k, v (same layouts as q, k, v), row params, row scales
    const real* dout;
    real* dq;
    real* dk;
    real* dv;
    real* drowp;      // (NH, rowp_stride)
    real* drow_scale; // (B,NH,T), or NULL
} AttnCore;

void attn_core_forward(const AttnCore* c, const AttnDims* d, AttnWorkspace* ws);
void attn_core_backward(const AttnCore* c, const AttnDims* d, AttnWorkspace* ws);

// The core of the default pipeline for a layer, before position encoding: q, k, v views of
// L->qkv, scale 1/sqrt(hs), the row map with its params, step, seed, layer; out into L->out,
// att into L->att, dout from L->dout, dq/dk/dv into L->dqkv. Apply the position encoding with
// attn_pos_forward(&c, L, L->qk_pos) (forward) or attn_pos_backward_begin/_end (backward) so
// that the row map sees rotated q, k under rope and the ALiBi bias under alibi.
AttnCore attn_layer_core(const AttnLayer* L);

// Position encoding of any (q, k) pair of a core (e.g. a variant's own projections). Forward:
// under rope rotates c->q, c->k into qk (B,T,2C) and repoints c->q, c->k; under alibi sets the
// slopes; else nothing. Backward: call attn_pos_backward_begin before attn_core_backward (it
// also does the forward part) and attn_pos_backward_end after it: under rope the core then
// accumulates into a zeroed workspace buffer and _end adds R^T of it into the original dq, dk.
typedef struct {
    real *dq, *dk;
    size_t ldq, ldk;
    int active;
    int fire; // the core accumulates FIRE bias gradients; _end runs the FIRE backward
} AttnPosSave;
void attn_pos_forward(AttnCore* c, const AttnLayer* L, real* qk);
void attn_pos_backward_begin(AttnCore* c, AttnPosSave* save, const AttnLayer* L, real* qk);
void attn_pos_backward_end(const AttnCore* c, const AttnPosSave* save, const AttnLayer* L);

// Additive score bias of a core (pos_encoding = fire), for variants that form their scores
// themselves: S (T,T) of head h gets S_tj += bias_h[t][j] for j <= t (no-op without a bias);
// the gradient adds dS_tj (j <= t) into the (b, h) slot, which only that (b, h) writes.
void attn_score_bias_add(real* S, const AttnCore* c, int h, int T);
void attn_score_bias_grad(const AttnCore* c, int b, int h, const real* dS, int T);

// The score-gradient step of one head, for variants that form their scores S = alpha q k^T
// themselves: given dS = dL/dS (T,T), through the kernel layer (two GEMMs, this order)
//   dq = beta dq + alpha dS k      (T,n), rows ldd_q apart
//   dk = beta dk + alpha dS^T q    (T,n), rows ldd_k apart
// q, k (T,n) rows ldq, ldk apart. Backward of S_tj = alpha sum_c q_tc k_jc: dq_tc = alpha
// sum_j dS_tj k_jc, dk_jc = alpha sum_t dS_tj q_tc. beta = 1 accumulates, 0 overwrites.
// n may be narrower than a head (a slice of its channels: diff passes each half, n = hs/2, with
// q, k, dq, dk pointing at the half inside rows of the full stride).
void attn_score_grad(const real* dS, int T, int n, real alpha, const real* q, int ldq,
                     const real* k, int ldk, real beta, real* dq, int ldd_q, real* dk, int ldd_k);

// Performer FAVOR+ (attention/linear_features.c, attn.feature = performer): the orthogonal random
// features W (m, hs) of head h of layer `layer`: blocks of hs Gram-Schmidt-orthonormalised
// Gaussian rows, each scaled by the norm of an independent N(0, I_hs) vector. Draw
// e = floor(step / redraw) (0 when redraw = 0 or step < 0) from (seed, layer, h, e) only.
// hs <= ATTN_PERFORMER_MAX_HS (linear.c refuses larger heads at setup).
#define ATTN_PERFORMER_MAX_HS 64
void attn_performer_features(real* W, int m, int hs, uint64_t seed, int layer, int h, long step,
                             int redraw);

// ---------------------------------------------------------------------------------------------
// layer helpers for variants that wrap an inner row map

// The default-pipeline core of layer L (attn_layer_core) with its A·V product written to out
// (B,T,C) and, in backward, its output gradient read from dout (B,T,C).
static inline AttnCore rowops_layer_core(const AttnLayer* L, real* out, real* dout) {
    AttnCore c = attn_layer_core(L);
    c.out = out;
    c.dout = dout;
    return c;
}

// Position encoding of c's q, k (rotated into L->qk_pos under rope), then the core forward.
static inline void rowops_core_forward(AttnCore* c, const AttnLayer* L) {
    attn_pos_forward(c, L, L->qk_pos);
    attn_core_forward(c, &L->d, L->ws);
}

// The core backward between attn_pos_backward_begin and _end (gradients += into c's dq, dk, dv).
static inline void rowops_core_backward(AttnCore* c, const AttnLayer* L) {
    AttnPosSave save;
    attn_pos_backward_begin(c, &save, L, L->qk_pos);
    attn_core_backward(c, &L->d, L->ws);
    attn_pos_backward_end(c, &save, L);
}

// The core (forward or backward, position encoding included) of a composed variant (rela,
// asentmax): the row map its compose hook resolved at setup (L->own: a fixed map with fixed
// hyperparameters and no row parameters) replaces c's row map; without one c keeps its own
// (attn.inner, with its row parameters).
static inline void rowops_core_composed(AttnCore* c, const AttnLayer* L, int backward) {
    if (L->own && L->own->row) {
        c->row = L->own->row;
        c->hp = &L->own->hp;
        c->rowp = NULL;
        c->rowp_stride = 0;
        c->drowp = NULL;
    }
    if (backward)
        rowops_core_backward(c, L);
    else
        rowops_core_forward(c, L);
}

// For layer-level variants whose heads are coupled and which therefore compute every head's
// scores themselves (talking_heads, selective): with c the layer's core after the position
// encoding, S (T,T) = c->scale q_h k_h^T (+ ALiBi slope_h (j - t), + the FIRE bias) of item b,
// head h (their backward hands dS_h to attn_score_bias_grad); the key norms
// |k_j|^2 of that head; and the row context of head h (its row parameters, step, seed, layer).
static inline void rowops_head_scores(real* S, const AttnCore* c, const AttnDims* d, int b, int h) {
    const int T = d->T, hs = d->hs;
    const real* q = c->q + (size_t)b * T * c->ldq + (size_t)h * hs;
    const real* k = c->k + (size_t)b * T * c->ldk + (size_t)h * hs;
    real_gemm(0, 1, T, T, hs, c->scale, q, (int)c->ldq, k, (int)c->ldk, 0.0f, S, T);
    const real slope = c->score_bias_slopes ? c->score_bias_slopes[h] : 0.0f;
    if (slope != 0.0f)
        for (int t = 0; t < T; t++)
            for (int j = 0; j <= t; j++)
                S[(size_t)t * T + j] -= slope * (real)(t - j);
    attn_score_bias_add(S, c, h, T); // FIRE
}

static inline void rowops_head_key_sq(real* ks, const AttnCore* c, const AttnDims* d, int b,
                                      int h) {
    const real* k = c->k + (size_t)b * d->T * c->ldk + (size_t)h * d->hs;
    for (int j = 0; j < d->T; j++) {
        real a = 0.0f;
        for (int i = 0; i < d->hs; i++)
            a += k[(size_t)j * c->ldk + i] * k[(size_t)j * c->ldk + i];
        ks[j] = a;
    }
}

static inline AttnRowCtx rowops_head_ctx(const AttnCore* c, const AttnLayer* L, int h,
                                         real* scratch) {
    const int P = c->row->params_per_head, stride = c->rowp_stride > 0 ? c->rowp_stride : P;
    return (AttnRowCtx){.hp = c->hp,
                        .p = P > 0 ? c->rowp + (size_t)h * stride : NULL,
                        .scratch = scratch,
                        .T = L->d.T,
                        .h = h,
                        .step = L->step,
                        .seed = L->seed,
                        .layer = L->layer};
}

#endif
