// model/layers.h: GPT-2 layers as forward/backward pairs over flat float arrays.
// Conventions: outputs first, then inputs, then cached forward values, weights, dimensions.
// Backward functions accumulate (+=) into gradients the caller has zeroed. N = B*T rows.
// Every layer is parallel over rows or over fixed channel blocks, never with atomics or
// thread-count-dependent reductions, so results are identical for any number of threads.
#ifndef ATTNLAB_LAYERS_H
#define ATTNLAB_LAYERS_H

#include <stddef.h>

#include "common/matmul.h"

// out (B,T,C) = wte[inp] + wpe[t] ; wpe may be NULL (no learned positions)
void encoder_forward(float* out, const int* inp, const float* wte, const float* wpe, int B, int T,
                     int C);
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T,
                      int C);

// out (N,C) = (inp - mean) * rstd * weight + bias, per row; caches mean (N), rstd (N)
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C);
// The same, also writing out_h (N,C) = bf16_from_float(out) in the same pass (the rounded copy
// the next linear layer multiplies in bf16 precisions, matmul_forward_h); out_h NULL: none.
void layernorm_forward_h(float* out, bf16* out_h, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, int N, int C);
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C);

// The linear layer (matmul_forward / matmul_backward) lives in the kernel layer.

// GELU, tanh approximation (as GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
void gelu_forward(float* out, const float* inp, size_t n);
// The same, also writing out_h[i] = bf16_from_float(out[i]) (NULL: none), chunk by chunk while
// the chunk is in cache.
void gelu_forward_h(float* out, bf16* out_h, const float* inp, size_t n);
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n); // dinp +=
// dinp = the gradient, bit for bit what zeroing dinp and then gelu_backward gives (dinp unread)
void gelu_backward_set(float* dinp, const float* inp, const float* dout, size_t n);
// The same, also writing dinp_h[i] = bf16_from_float(dinp[i]) chunk by chunk (NULL: none): the
// rounded output gradient the linear layer before GELU multiplies in bf16 precisions.
void gelu_backward_set_h(float* dinp, bf16* dinp_h, const float* inp, const float* dout, size_t n);

void residual_forward(float* out, const float* a, const float* b, size_t n);

// Cross-entropy over the first V of Vp logits per row (padded logits never count).
// losses (N) = lse - logits[target]; lse (N) cached for backward. losses may be NULL (targets is
// then not read): lse only, the log-partition log Z of each row (the diagnostics' log_z).
void crossentropy_forward(float* losses, float* lse, const float* logits, const int* targets, int N,
                          int V, int Vp);
// dlogits (N,Vp) = (softmax(logits) - onehot(target)) * dloss, padded entries 0.
// dlogits may alias logits (the fused, in-place form).
void crossentropy_backward(float* dlogits, const float* logits, const float* lse,
                           const int* targets, float dloss, int N, int V, int Vp);
// With the z-loss (PaLM; Wortsman et al. 2023) of coefficient zc, the per-row objective
// CE + zc lse^2: dlogits = (softmax(logits) (1 + 2 zc lse) - onehot(target)) * dloss. zc = 0 gives
// crossentropy_backward's bits exactly.
void crossentropy_backward_z(float* dlogits, const float* logits, const float* lse,
                             const int* targets, float dloss, float zc, int N, int V, int Vp);
// The z-loss term of N rows from their cached lse: zc * mean(lse^2) (sums in double).
float zloss_mean(const float* lse, int N, float zc);
// The same rounded to bf16 (bf16_from_float of each crossentropy_backward value, bit for bit)
// in one pass: the fp32 dlogits are never stored (bf16 precisions: the classifier backward's
// operand).
void crossentropy_backward_bf16(bf16* dlogits, const float* logits, const float* lse,
                                const int* targets, float dloss, int N, int V, int Vp);
void crossentropy_backward_bf16_z(bf16* dlogits, const float* logits, const float* lse,
                                  const int* targets, float dloss, float zc, int N, int V, int Vp);

#endif
