// attention/attention.h: the pluggable causal self-attention of attnlab, as the model uses it:
// the registry of variants, their hyperparameters, and the forward and backward of one layer.
//
// The driver (attention.c) owns what every variant shares: scores s = QK^T * scale per
// (batch, head) through sgemm, the causal structure (a row t sees keys 0..t), the A·V product,
// and their backward. A variant is one file exporting one `const AttnVariant`, listed once in
// variants.def, with its float64 reference in tests/ref/ (docs/variants.md, "Adding a
// variant"). The headers, by reader:
//   attention/rowmap.h     a row map's author: AttnVariant, AttnRowCtx, hyperparameters
//   attention/layer.h      a layer-level variant's author: AttnLayer, the core, the tensors
//   attention/posenc.h     the position encodings (RoPE, ALiBi, xPos, FIRE)
//   attention/workspace.h  the shapes of a call and the per-thread scratch
//   attention/qknorm.h     qk-layernorm; attention/decode.h: incremental decoding
// This header includes them all, for model/.
//
// Threading: forward and backward run `omp parallel for collapse(2)` over (b, h). Each pair
// owns its slices of out, dq, dk, dv and its own slot for parameter gradients, which are
// reduced over b in a fixed order: results are bit-identical for any thread count.
#ifndef ATTNLAB_ATTENTION_H
#define ATTNLAB_ATTENTION_H

#include <stddef.h>

#include "attention/decode.h"
#include "attention/layer.h"
#include "attention/posenc.h"
#include "attention/qknorm.h"
#include "attention/rowmap.h"
#include "attention/workspace.h"

// ---------------------------------------------------------------------------------------------
// Registry (registry.c)

int attn_count(void);
const AttnVariant* attn_get(int i);
const AttnVariant* attn_lookup(const char* name); // NULL if unknown
// Closest registered name for "did you mean" messages (NULL if nothing is close; the distance
// and the limit are common/suggest.h's, as for config keys and attn.* keys).
const char* attn_closest(const char* name);
// Print every variant: name, formula, source, parameters, hyperparameters with defaults.
void attn_print_list(void* file /* FILE* */);
// Print one variant's entry of that list (the same lines, without the list's header).
void attn_print_variant(void* file /* FILE* */, const AttnVariant* v);
// The entry of the variant called `name`; an unknown name: -1 with err, which names it and the
// closest variant (attn_closest).
int attn_print_named(void* file /* FILE* */, const char* name, char* err, size_t errcap);

// ---------------------------------------------------------------------------------------------
// Hyperparameters

// Fill hp with the variant's defaults and the model sizes.
void attn_hparams_default(AttnHParams* hp, const AttnVariant* v, int T_train, int n_head,
                          int head_size, int n_embd, int n_layer);
// Set one hyperparameter from text ("0.5" or a choice word). 0 ok; -1 with err (names key).
int attn_hparams_set(AttnHParams* hp, const AttnVariant* v, const char* name, const char* value,
                     char* err, size_t errcap);
int attn_hparam_index(const AttnVariant* v, const char* name); // -1 if v has no such key
// Write "attn.<name> = <value>" lines for every hyperparameter (resolved config).
void attn_hparams_write(const AttnHParams* hp, const AttnVariant* v, void* file /* FILE* */);

// Resolve v's own row map for hyperparameters hp (v->compose; out->row = NULL without one).
void attn_compose(AttnComposed* out, const AttnVariant* v, const AttnHParams* hp);

// The configuration checks of one layer of variant v (hyperparameters hp) in a model of dims d
// (d->T = block_size) under position encoding pos, run once at model setup (layer_check.c):
// rope/xpos need an even head size, fire at most ATTN_FIRE_MAX_HEADS heads, and the variant's own
// layer_check. 0 ok; -1 with err naming the key and the value.
int attn_layer_check(const AttnVariant* v, const AttnHParams* hp, const AttnDims* d, int pos,
                     char* err, size_t errcap);

// Forward and backward of one attention layer (dispatches to the variant's layer hooks, or the
// default pipeline: position encoding of q,k (rope rotation or ALiBi bias), scores, row map, A·V).
void attention_forward(AttnLayer* L);
void attention_backward(AttnLayer* L);

#endif
