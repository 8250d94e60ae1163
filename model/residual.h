// model/residual.h: the residual path options `residual = attnres | delta_attnres` (the math,
// its sources and its backward are at the top of model/residual.c). gpt2.c calls these at the
// sublayer boundaries only when m->cfg.residual != GPT2_RESID_STANDARD. The kernels take flat
// arrays and their own state (ResidState), as llm.c's layers do: they know nothing of the model.
//
// Sublayers are numbered s = 0 .. 2L-1 (block l: attention s = 2l, MLP s = 2l+1); s = 2L is the
// input of ln_f. Sources (the values routed over depth): v_0 = the embedding, v_{s+1} = the
// output f_s of sublayer s (attention projection or MLP projection), all (B,T,C).
#ifndef ATTNLAB_RESIDUAL_H
#define ATTNLAB_RESIDUAL_H

#include <stddef.h>

#define RESID_EPS     1e-6f // RMSNorm epsilon of the keys
#define RESID_MAX_SRC 129   // source slots 2L + 1 for up to 64 layers (GPT2_MAX_LAYERS)

// The `residual` modes (GPT2Config.residual).
enum { GPT2_RESID_STANDARD, GPT2_RESID_ATTNRES, GPT2_RESID_DELTA, GPT2_RESID_COUNT };

// The routing state of one model: sizes, saved activations and backward scratch.
typedef struct ResidState {
    int mode;             // GPT2_RESID_ATTNRES or GPT2_RESID_DELTA
    int L, C;             // layers, channels
    int S;                // 2L + 1 source slots
    size_t cap;           // B*T capacity
    size_t BT;            // of the last forward
    int rho_done;         // sources whose rho is computed in this forward
    float *h, *alpha;     // (S, BT, C) routed inputs; (S, BT, S) weights per sublayer
    float *rho, *dV;      // (S, BT); (S, BT, C) source gradients
    float *du, *dbr, *dz; // (BT, C); (BT, C); (BT, S)
} ResidState;

// The sources of one forward (all of the model's activation buffers): emb (B,T,C) the
// embedding, attproj and fcproj (L,B,T,C) every block's attention and MLP outputs.
typedef struct {
    const float *emb, *attproj, *fcproj;
} ResidSources;

// Rows of the pseudo-query tensor "resid.query" (rows, C): 2L + 1 under attnres (every sublayer
// and ln_f), 2L - 1 under delta_attnres (sublayers 1 .. 2L-1; sublayer 0 has no source yet and
// ln_f reads the residual stream), 0 under standard.
int resid_query_rows(int mode, int n_layer);
// Number of sources routed into the input of sublayer s (0: the input is the residual stream).
int resid_nsrc(int mode, int n_layer, int s);
// The one spelling of each residual mode (residual.c, designated initializers): resid_name
// ("standard", "attnres", "delta_attnres"; NULL out of range), resid_from_name (-1 if unknown).
// The `residual` choices of common/config_table.c are checked against it by
// tests/test_enum_names.c.
const char* resid_name(int residual);
int resid_from_name(const char* name);

// The state for batches up to (B, T) of C channels; NULL under standard (nothing to route).
ResidState* resid_alloc(int mode, int n_layer, int C, int B, int T);
void resid_free(ResidState* r); // NULL is a no-op

// Forward: the input of sublayer s (s = 2L: of ln_f), given r_s, the standard residual stream at
// that point (x_l before block l's attention, residual2 before its MLP, residual3 of the last
// block before ln_f). query is the whole "resid.query" tensor (resid_query_rows, C). Sources
// 0..s must be computed. Returns r_s itself when nothing is routed.
const float* resid_forward(ResidState* r, int s, const float* r_s, const float* query,
                           const ResidSources* src, int B, int T);
// The input of sublayer s that the last forward returned (for the LayerNorm backward).
const float* resid_input(const ResidState* r, int s, const float* r_s);

// Backward, in reverse sublayer order after resid_backward_begin:
//   resid_branch_grad: d(f_s) = dres + (the routing gradients into source s+1), in scratch;
//   resid_dinput: a zeroed (B,T,C) buffer for d(input of sublayer s) (the LayerNorm backward);
//   resid_backward: routes that gradient: into the sources, the pseudo-query, and (delta) dres;
//   resid_embed_grad: dres += the routing gradient into the embedding (source 0).
// resid_backward reads query (as in the forward) and adds into dquery, the gradient of the
// whole "resid.query" tensor.
void resid_backward_begin(ResidState* r);
const float* resid_branch_grad(ResidState* r, int s, const float* dres);
float* resid_dinput(ResidState* r);
void resid_backward(ResidState* r, int s, float* dres, const float* query, float* dquery,
                    const ResidSources* src);
void resid_embed_grad(ResidState* r, float* dres);

// D11: sum over the positions of the last forward of max_i alpha_{i->s}, into *sum (and the
// number of positions into *n); 0 when sublayer s routes nothing (or r is NULL).
int resid_max_weight(const ResidState* r, int s, double* sum, long* n);

// Bytes of the routing activations for batches (B, T) (memory estimate).
double resid_bytes(int mode, int n_layer, int C, int B, int T);

#endif
