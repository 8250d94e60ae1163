// attention/qknorm.h: qk-layernorm of every head's query and key (the model keys qk_norm and
// qk_norm_kind), run by the model on the projection's output before any attention reads q, k.
#ifndef ATTNLAB_ATTENTION_QKNORM_H
#define ATTNLAB_ATTENTION_QKNORM_H

#include "attention/real.h"
#include "attention/workspace.h"

// ---- qk-norm (attention/qknorm.c; the model key qk_norm): qk-layernorm as Wortsman et al. 2023
// ("Small-scale proxies for large-scale Transformer training instabilities", arXiv 2309.14322,
// Sec. 3.1.1, after Dehghani et al. 2023) define it: every head's query and key, x = q_t or k_t
// of head h (hs channels), is replaced by
//   layernorm: y_i = g_i (x_i - mu) rstd,  mu = mean_i x_i, rstd = 1/sqrt(mean_i (x_i - mu)^2 +
//   eps) rmsnorm:   y_i = g_i x_i rstd,                          rstd = 1/sqrt(mean_i x_i^2 + eps)
// with eps = ATTN_QKNORM_EPS (the paper's Flax LayerNorm default) and no bias (the paper's models
// have no biases), g the layer's learnable gain of hs entries for q and another for k, shared by
// the heads. It runs on the projection's output, in place in qkv, before anything else of the
// layer reads q and k: the row map, every layer-level variant and the position encoding (RoPE and
// xPos rotate the normalised q, k; the 1/sqrt(hs) scale follows) all see the normalised values.
enum { ATTN_QKNORM_LAYERNORM, ATTN_QKNORM_RMSNORM, ATTN_QKNORM_COUNT };
#define ATTN_QKNORM_EPS 1e-6
// The one spelling of each kind ("layernorm", "rmsnorm"; the config key qk_norm_kind). NULL out
// of range / -1 if unknown.
const char* attn_qknorm_name(int kind);
int attn_qknorm_from_name(const char* name);
// Forward, in place: q and k of qkv (rows 3C apart, q at channel 0, k at C, head h at h*hs) are
// normalised; xhat (B*T, 2C: q's then k's channels) keeps the normalised values before the gain
// and rstd (B*T, 2NH: q's heads then k's) the inverse scales, both for the backward. gq, gk (hs).
void attn_qknorm_forward(real* qkv, real* xhat, real* rstd, const real* gq, const real* gk,
                         const AttnDims* d, int kind, int nthreads);
// Backward, in place: dqkv's q and k channels hold dL/dy (the gradient of the normalised q, k)
// and are replaced by dL/dx (of the projection's q, k); dgq, dgk (hs) += dL/dg. v's channels are
// not touched. Reductions over rows run in a fixed order: identical for any thread count.
void attn_qknorm_backward(real* dqkv, real* dgq, real* dgk, const real* xhat, const real* rstd,
                          const real* gq, const real* gk, const AttnDims* d, int kind,
                          int nthreads);

#endif
