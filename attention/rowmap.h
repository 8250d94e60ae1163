// attention/rowmap.h: what the author of a row map needs. A row map is one file exporting one
// `const AttnVariant` with forward_row and backward_row (and, where it has them, per-head
// parameters, hyperparameters and a surrogate), listed once in variants.def, with its float64
// reference in tests/ref/ (docs/variants.md, "Adding a variant"); attention/rowops.h has the
// shared row operations. forward_row maps one causal score row s[0..n) (n = t+1) to weights
// a[0..n); backward_row adds its vector-Jacobian product ds += J^T da in O(n) and accumulates the
// gradients of its per-head parameters. Rows need not sum to 1. The driver (attention.c) owns
// the scores, the mask, A·V and their backward.
//
// The struct also carries the optional hooks of layer-level variants (layer_forward and the
// rest); their types are in attention/layer.h, which such a variant includes instead.
#ifndef ATTNLAB_ATTENTION_ROWMAP_H
#define ATTNLAB_ATTENTION_ROWMAP_H

#include <stddef.h>
#include <stdint.h>

#include "attention/real.h"

#define ATTN_MAX_HP      12 // hyperparameters per variant
#define ATTN_MAX_PPH     16 // learnable floats per head of a row map
#define ATTN_MAX_TENSORS 8  // extra per-layer tensors of a layer-level variant

typedef struct AttnVariant AttnVariant;
// The layer kit's types, for the optional layer-level hooks of AttnVariant (attention/layer.h)
typedef struct AttnDims AttnDims;
typedef struct AttnTensorSpec AttnTensorSpec;
typedef struct AttnLayer AttnLayer;
typedef struct AttnComposed AttnComposed;

// ---------------------------------------------------------------------------------------------
// Hyperparameters: config keys `attn.<name>`, declared by each variant with default and range.

typedef struct {
    const char* name;    // key after "attn."
    float def;           // default (for a choice: the index of the default choice)
    float min, max;      // inclusive range for numbers
    const char* choices; // "a|b|c": the value is the index of the chosen word; NULL = number
    const char* help;
} AttnHParamSpec;

typedef struct {
    float v[ATTN_MAX_HP]; // values, in the order of the variant's hparams[]
    int T_train;          // training sequence length (for constants such as -ln T)
    int n_head, head_size, n_embd, n_layer;
    const AttnVariant* inner; // row map used by a layer-level variant (attn.inner), else NULL
} AttnHParams;

// ---------------------------------------------------------------------------------------------
// Row maps

typedef struct {
    const AttnHParams* hp;
    const real* p;      // this head's learnable params (params_per_head floats) or NULL
    real* dp;           // this (b,h)'s private gradient slot for p (+=), or NULL in forward
    real* scratch;      // per-thread scratch of scratch_floats(T) floats
    const real* key_sq; // |k_j|^2 for j < n when needs_key_sq, else NULL
    real* dkey_sq;      // gradient slot for key_sq (+=) in backward when needs_key_sq
    int t;              // query position; the row length is n = t + 1
    int T;              // sequence length of this call
    int h;              // head index
    long step;          // training step (stochastic variants); -1 at evaluation
    uint64_t seed;      // run seed (stochastic variants derive their draws from seed, step)
    int layer;          // layer index (stochastic variants may draw per layer)
    int draw_pin;       // 0 in every real call; tests: -1 / +1 pin every draw of a stochastic
                        // row map to its lowest / highest value (rowops_draw)
} AttnRowCtx;

// ---------------------------------------------------------------------------------------------
// The variant interface

struct AttnVariant {
    const char* name;    // config / CLI name
    const char* formula; // one line for --list-attention
    const char* source;  // paper reference
    // The implementation this variant's default follows, as "owner/repo:path" of the authors'
    // code, or "paper, Eq. N" where no authors' code exists (--list-attention, docs/variants.md).
    const char* reference;
    // Each way the default differs from that reference, and the attn.<key> that selects the
    // reference's behaviour where one exists; NULL = none.
    const char* deviations;
    int rows_sum_to_one; // 1: every causal row sums to 1
    int shift_invariant; // 1: f(s + c) == f(s) for a per-row constant c; 0: it must not be
    const AttnHParamSpec* hparams;
    int n_hparams;
    // ---- learnable per-head parameters of a row map (stored in the model tensor "attnp")
    int params_per_head;
    const char* const* param_names;                      // params_per_head names
    void (*init_params)(real* p, const AttnHParams* hp); // one head; NULL = zeros
    // ---- row map (required unless layer_forward is set)
    int needs_key_sq;                // driver supplies |k_j|^2 (and takes its gradient)
    size_t (*scratch_floats)(int T); // per-thread scratch for the row functions, NULL = 0
    void (*forward_row)(real* a, const real* s, int n, const AttnRowCtx* ctx);
    void (*backward_row)(real* ds, const real* da, const real* s, const real* a, int n,
                         const AttnRowCtx* ctx); // ds += J^T da; ctx->dp += dL/dp
    // Straight-through variants: the smooth map whose exact VJP backward_row computes
    // (tests check backward_row against finite differences of this map). NULL = forward_row.
    void (*surrogate_row)(real* a, const real* s, int n, const AttnRowCtx* ctx);
    // Optional: extra statistic logged per head (e.g. credal uncertainty), mean over rows.
    const char* row_stat_name;
    real (*row_stat)(const real* a, const real* s, int n, const AttnRowCtx* ctx);
    // ---- layer-level hooks (optional)
    // Configuration checks of a layer of dims d (T = block_size) under hyperparameters hp and
    // position encoding pos, run once at model setup (attn_layer_check): 0 ok, or -1 with err
    // naming the key and the value. The forward and backward may then assume what it checked.
    int (*layer_check)(const AttnDims* d, const AttnHParams* hp, int pos, char* err, size_t cap);
    int (*layer_tensors)(AttnTensorSpec* out, const AttnDims* d, const AttnHParams* hp);
    size_t (*layer_cache_floats)(const AttnDims* d, const AttnHParams* hp);
    // Per-thread workspace scratch (attn_workspace_reserve) the layer hooks take for dims d, the
    // most of forward and backward; the model reserves it at setup. NULL = none.
    size_t (*layer_scratch_floats)(const AttnDims* d, const AttnHParams* hp);
    void (*layer_forward)(AttnLayer* L);
    void (*layer_backward)(AttnLayer* L);
    // 1: a layer-level variant that computes its weights itself and never calls attn.inner
    int ignores_inner;
    // Composed variants: for hyperparameters hp, the row map the core runs instead of attn.inner
    // (out->row, with out->hp filled), or out->row = NULL for attn.inner. Called once at setup.
    void (*compose)(AttnComposed* out, const AttnHParams* hp);
};

#endif
