// model/residual.h: the residual path options `residual = attnres | delta_attnres` (the math,
// its sources and its backward are at the top of model/residual.c). gpt2.c calls these at the
// sublayer boundaries only when m->cfg.residual != GPT2_RESID_STANDARD.
//
// Sublayers are numbered s = 0 .. 2L-1 (block l: attention s = 2l, MLP s = 2l+1); s = 2L is the
// input of ln_f. Sources (the values routed over depth): v_0 = the embedding, v_{s+1} = the
// output f_s of sublayer s (attention projection or MLP projection), all (B,T,C).
#ifndef ATTNLAB_RESIDUAL_H
#define ATTNLAB_RESIDUAL_H

#include <stddef.h>

#include "model/gpt2.h"

#define RESID_EPS 1e-6f // RMSNorm epsilon of the keys

// Rows of the pseudo-query tensor "resid.query" (rows, C): 2L + 1 under attnres (every sublayer
// and ln_f), 2L - 1 under delta_attnres (sublayers 1 .. 2L-1; sublayer 0 has no source yet and
// ln_f reads the residual stream), 0 under standard.
int resid_query_rows(const GPT2Config* g);
// Number of sources routed into the input of sublayer s (0: the input is the residual stream).
int resid_nsrc(const GPT2Config* g, int s);
// The one spelling of each residual mode (residual.c, designated initializers): resid_name
// ("standard", "attnres", "delta_attnres"; NULL out of range), resid_from_name (-1 if unknown).
// The `residual` choices of common/config_table.c are checked against it by
// tests/test_enum_names.c.
const char* resid_name(int residual);
int resid_from_name(const char* name);

void resid_alloc(GPT2* m, int B, int T);
void resid_free(GPT2* m);

// Forward: the input of sublayer s (s = 2L: of ln_f), given r_s, the standard residual stream at
// that point (x_l before block l's attention, residual2 before its MLP, residual3 of the last
// block before ln_f). Sources 0..s must be computed. Returns r_s itself when nothing is routed.
const float* resid_forward(GPT2* m, int s, const float* r_s, int B, int T);
// The input of sublayer s that the last forward returned (for the LayerNorm backward).
const float* resid_input(const GPT2* m, int s, const float* r_s);

// Backward, in reverse sublayer order after resid_backward_begin:
//   resid_branch_grad: d(f_s) = dres + (the routing gradients into source s+1), in scratch;
//   resid_dinput: a zeroed (B,T,C) buffer for d(input of sublayer s) (the LayerNorm backward);
//   resid_backward: routes that gradient: into the sources, the pseudo-query, and (delta) dres;
//   resid_embed_grad: dres += the routing gradient into the embedding (source 0).
void resid_backward_begin(GPT2* m);
const float* resid_branch_grad(GPT2* m, int s, const float* dres);
float* resid_dinput(GPT2* m);
void resid_backward(GPT2* m, int s, float* dres);
void resid_embed_grad(GPT2* m, float* dres);

// D11: sum over the positions of the last forward of max_i alpha_{i->s}, into *sum (and the
// number of positions into *n); 0 when sublayer s routes nothing.
int resid_max_weight(const GPT2* m, int s, double* sum, long* n);

// Bytes of the routing activations for batches (B, T) (memory estimate).
double resid_bytes(const GPT2Config* g, int B, int T);

#endif
