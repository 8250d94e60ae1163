// model/value_residual.h: the ResFormer value residual (`value_residual = 1`; math, source and
// backward at the top of model/value_residual.c). gpt2.c calls these only when
// m->cfg.value_residual is set: vres_forward after layer l's qkv projection, vres_backward after
// its attention backward (layers in reverse order, so layer 0 comes last).
#ifndef ATTNLAB_VALUE_RESIDUAL_H
#define ATTNLAB_VALUE_RESIDUAL_H

#include "model/gpt2.h"

void vres_alloc(GPT2* m, int B, int T);
// Bytes vres_alloc takes (0 without value_residual), for the size-only memory estimate.
double vres_bytes(const GPT2Config* g, int B, int T);
void vres_free(GPT2* m);
void vres_forward(GPT2* m, int l, int B, int T);
void vres_backward(GPT2* m, int l, int B, int T);

#endif
