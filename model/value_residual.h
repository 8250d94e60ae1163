// model/value_residual.h: the ResFormer value residual (`value_residual = 1`; math, source and
// backward at the top of model/value_residual.c). gpt2.c calls these only when
// m->cfg.value_residual is set: vres_forward after layer l's qkv projection, vres_backward after
// its attention backward (layers in reverse order, so layer 0 comes last). The kernels take flat
// arrays and their own state (VresState), as llm.c's layers do: they know nothing of the model.
#ifndef ATTNLAB_VALUE_RESIDUAL_H
#define ATTNLAB_VALUE_RESIDUAL_H

#include <stddef.h>

// The state of one model: sizes and the saved raw values.
typedef struct VresState {
    int L, C;   // layers, channels
    size_t cap; // B*T capacity
    float* raw; // (L, B, T, C) raw V_l of every layer l >= 1 (row 0 unused)
    float* dv1; // (B, T, C) the later layers' gradient into V_0
} VresState;

// The state for batches up to (B, T); NULL when value_residual is 0.
VresState* vres_alloc(int value_residual, int n_layer, int C, int B, int T);
// Bytes vres_alloc takes (0 without value_residual), for the size-only memory estimate.
double vres_bytes(int value_residual, int n_layer, int C, int B, int T);
void vres_free(VresState* v); // NULL is a no-op
// qkv and dqkv are the model's buffers: qkv (L, B, T, 3C) every layer's projection (layer 0's V
// is V_0), dqkv (B, T, 3C) layer l's gradient; lam and dlam (2) layer l's row of
// "value_residual.lambda" and of its gradient (not read for l = 0).
void vres_forward(VresState* v, int l, float* qkv, const float* lam, int B, int T);
void vres_backward(VresState* v, int l, float* dqkv, const float* qkv, const float* lam,
                   float* dlam, int B, int T);

#endif
