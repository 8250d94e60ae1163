// attention/attention.h: the pluggable causal self-attention of attnlab.
//
// The driver (attention.c) owns what every variant shares: scores s = QK^T * scale per
// (batch, head) through sgemm, the causal structure (a row t sees keys 0..t), the A·V product,
// and their backward. A variant is one file exporting one `const AttnVariant`, listed once in
// variants.def, with its float64 reference in tests/ref/ (the checklist: docs/variants.md,
// "Adding a variant"). Two kinds fit the same struct:
//
//  1. Row maps: forward_row maps one causal score row s[0..n) (n = t+1) to weights a[0..n);
//     backward_row adds its vector-Jacobian product ds += J^T da in O(n) and accumulates the
//     gradients of its per-head parameters. Rows need not sum to 1.
//  2. Layer-level variants: layer_forward / layer_backward replace the default layer pipeline.
//     They see the layer input x, q/k/v and the head outputs, own extra tensors (declared by
//     layer_tensors, stored in the model's parameter table) and a per-layer activation cache,
//     and build on the driver's core (attn_core_forward/backward) with an inner row map chosen
//     by `attn.inner`.
//
// Shapes: B batch, T sequence, C channels, NH heads, hs = C/NH head size. qkv is (B,T,3C) with
// q, k, v at channel offsets 0, C, 2C and head h at h*hs within each. att is (B,NH,T,T), row t
// holds weights for keys 0..t and zeros after. out is (B,T,C), heads concatenated.
//
// Threading: forward and backward run `omp parallel for collapse(2)` over (b, h). Each pair
// owns its slices of out, dq, dk, dv and its own slot for parameter gradients, which are
// reduced over b in a fixed order: results are bit-identical for any thread count.
#ifndef ATTNLAB_ATTENTION_H
#define ATTNLAB_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "attention/real.h"

#define ATTN_MAX_HP      12 // hyperparameters per variant
#define ATTN_MAX_PPH     16 // learnable floats per head of a row map
#define ATTN_MAX_TENSORS 8  // extra per-layer tensors of a layer-level variant

typedef struct AttnVariant AttnVariant;

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

// Composed variants: a layer-level variant that, for some settings of its hyperparameters, runs a
// fixed row map of its own (rela's ReLU forms, asentmax's alpha-entmax) instead of attn.inner.
// attn_compose resolves that map and its hyperparameters once, at setup, through the variant's
// typed compose hook (attention/compose.h); forward and backward only read the result.
typedef struct {
    const AttnVariant* row; // the row map the variant's core runs; NULL: attn.inner
    AttnHParams hp;         // its hyperparameters
} AttnComposed;

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
// Layer-level variants: extra tensors and the layer object they receive

typedef struct {
    int B, T, C, NH, hs;
} AttnDims;

enum { ATTN_INIT_ZERO, ATTN_INIT_CONST, ATTN_INIT_NORMAL };

typedef struct {
    const char* name; // tensor name; the model stores it as "<variant>.<name>" stacked over layers
    int ndim;
    int shape[3];     // per-layer shape
    int decay;        // 1: weight decay applies (matrices); 0: scalars, gates, biases
    int init;         // ATTN_INIT_*
    float init_value; // constant, or the std of the normal init
} AttnTensorSpec;

typedef struct AttnWorkspace AttnWorkspace;

typedef struct {
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

enum {
    ATTN_POS_LEARNED,
    ATTN_POS_ROPE,
    ATTN_POS_ALIBI,
    ATTN_POS_NONE,
    ATTN_POS_XPOS,
    ATTN_POS_FIRE,
    ATTN_POS_COUNT
};

// The one spelling of each position encoding (attention.c, designated initializers), used by
// the config (model/attn_setup.c), the model files (model/checkpoint.c, model/open.c) and the
// Hugging Face config.json (model/hf.c). attn_pos_name: NULL out of range; attn_pos_from_name:
// -1 if unknown. The `pos_encoding` choices of common/config_table.c (which cannot include
// attention/) are checked against this table by tests/test_enum_names.c.
const char* attn_pos_name(int pos);
int attn_pos_from_name(const char* name);

// 1 when the encoding rotates q and k (rope, xpos): the layer then needs a (B,T,2C) qk_pos buffer
static inline int attn_pos_rotates(int pos) {
    return pos == ATTN_POS_ROPE || pos == ATTN_POS_XPOS;
}

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

// ---------------------------------------------------------------------------------------------
// Driver

// Per-thread scratch for sequences up to T. Sized for the row map's scratch and the largest
// number of per-head params among the variants in use.
AttnWorkspace* attn_workspace_new(int B, int T, int NH, int nthreads, size_t row_scratch,
                                  int max_params_per_head);
void attn_workspace_free(AttnWorkspace* ws);
// Allocate now what a rotating position encoding (rope, xpos) of width C would otherwise allocate
// on the first forward and backward (the RoPE tables and the (B,T,2C) rotated-space gradient).
void attn_workspace_prepare_pos(AttnWorkspace* ws, int pos_encoding, int C);
// Bytes attn_workspace_new and then attn_workspace_prepare_pos allocate for these arguments,
// allocating nothing (the memory estimate's size-only mode).
size_t attn_workspace_bytes(int B, int T, int NH, int C, int nthreads, size_t row_scratch,
                            int max_params_per_head, int pos_encoding);
// Bytes attn_workspace_reserve(ws, floats_per_thread) allocates in a workspace of nthreads
// threads that has no such scratch yet (0 for 0 floats).
size_t attn_workspace_reserve_bytes(int nthreads, size_t floats_per_thread);
size_t attn_row_scratch(const AttnVariant* v, int T);

// Forward and backward of one attention layer (dispatches to the variant's layer hooks, or the
// default pipeline: position encoding of q,k (rope rotation or ALiBi bias), scores, row map, A·V).
void attention_forward(AttnLayer* L);
void attention_backward(AttnLayer* L);

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

// ---- position encodings, for the default pipeline and for layer-level variants
//
// RoPE (Su et al., RoFormer): within every head, channel pair (2i, 2i+1) of q and k at position
// t is rotated by the angle t * 10000^(-2i/hs) (interleaved pairs, as in the RoFormer paper and
// Meta's LLaMA code; GPT-NeoX pairs i with i + hs/2 instead). Scores then depend on q and k only
// through their relative position.
//
// ALiBi (Press et al. 2022): s_tj += slope_h * (j - t), slope_h = attn_alibi_slope(h, NH): the
// authors' get_slopes (ofirpress/attention_with_linear_biases: fairseq/models/transformer.py),
// 2^(-8(h+1)/NH) when NH is a power of two; otherwise the P = 2^floor(log2 NH) slopes of P heads,
// then every other slope of 2P heads (BLOOM and MPT use the same slopes). Every ALiBi user in
// attention/ and model/ calls this one function.
//
// xPos (Sun et al. 2022, "A Length-Extrapolatable Transformer", arXiv 2212.10554; the authors'
// code microsoft/torchscale: torchscale/component/xpos_relative_position.py): RoPE with an
// exponential decay. With zeta_i = (2i/hs + 0.4) / 1.4 (gamma = 0.4, scale base 512) and the
// centred position p = t - ceil(T/2) of a call of T positions (torchscale's min_pos = -T // 2;
// the rotation angle still uses t), pair i of q at position t is also multiplied by
// zeta_i^(p/512) and of k by zeta_i^(-p/512), so q_t . k_j carries zeta_i^((t - j)/512) <= 1:
// attention to distant keys decays. The scores are those of uncentred positions (the offset
// cancels); q and k themselves span zeta^(-+T/1024) instead of zeta^(-+T/512), which doubles the
// float32 range: attn_xpos_max_T() (71,388) is the longest T whose factors are all normal floats
// (the config refuses a larger block_size under xpos).
#define ATTN_XPOS_SCALE_BASE 512.0
real attn_alibi_slope(int h, int NH);
int attn_xpos_max_T(void);
// zeta_i^(p/512) for pair i of a head of size hs at centred position p (computed in double)
real attn_xpos_scale(int i, int hs, int p);
//
// attn_rope: out (row stride ldo) = R x (inverse: R^T x) for the (B,T,C) view `in` (row stride
// ldi); accumulate = 1 adds into out. out may equal in when accumulate = 0.
void attn_rope(real* out, size_t ldo, const real* in, size_t ldi, const AttnDims* d,
               AttnWorkspace* ws, int inverse, int accumulate);
// attn_xpos: as attn_rope, times zeta_i^(+p/512) for queries (is_key = 0) or zeta_i^(-p/512) for
// keys (is_key = 1), p = t - ceil(T/2) with T = d->T; inverse applies the transpose (the same
// scale with R^T).
void attn_xpos(real* out, size_t ldo, const real* in, size_t ldi, const AttnDims* d,
               AttnWorkspace* ws, int is_key, int inverse, int accumulate);
//
// attn_rope_table: the rotation table of a head of `width` channels (width even, pairs
// i < width/2) at positions t < T of a call of length T, row-major (T, width/2):
//   cs[t][i] = (real)(z cos a),  sn[t][i] = (real)(z sin a),  a = t 10000^(-2i/width),
// every factor in double and rounded once. z = 1 for xsign = 0: the RoPE table attn_rope reads
// (built by this function at width hs); xsign = +1 / -1: z = zeta_i^(+-p/512), the xPos query /
// key factor at p = t - ceil(T/2) (zeta_i of width `width`, as attn_xpos_scale), multiplied
// into cos and sin before rounding. Used with attn_rotate by variants that rotate a head of a
// width other than hs (diff: each half of a head, width hs/2). Writes 2 T width/2 reals.
void attn_rope_table(real* cs, real* sn, int T, int width, int xsign);
// attn_rotate: out (row stride ldo) = R x (inverse: R^T x; accumulate = 1 adds into out) for
// the view `in` (row stride ldi) of d->B * d->T rows of d->NH heads of d->hs channels, pair i
// of every head at row t turned by the table of attn_rope_table(cs, sn, d->T, d->hs, xsign):
//   y0 = x0 c - x1 s,  y1 = x0 s + x1 c,  c = cs[t][i],  s = sn[t][i] (-sn[t][i] for R^T)
// on nthreads threads (each row by one thread: identical for any count). The backward of
// y = R x is dx = R^T dy, the transpose (under xPos R is z times a rotation, and its transpose,
// not its inverse, is the VJP). Not attn_rope's loop: with the width-hs table both compute the
// same formula, but the compiler fuses multiply-adds in this loop and not in attn_rope's, so the
// two can differ in the last bit (attention.c).
void attn_rotate(real* out, size_t ldo, const real* in, size_t ldi, const AttnDims* d,
                 const real* cs, const real* sn, int nthreads, int inverse, int accumulate);

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

// Rotate rows t0..T-1 of a call of length T (d: B = 1, T, NH, hs) as the forward's position
// encoding does (attn_pos_forward: RoPE, or xPos with the call's centring), a query (is_key = 0)
// or key (is_key = 1) view; `in` and `out` hold only those rows (row t0 first). Rows rotate
// independently, so this equals rows t0.. of the whole call's rotation bit for bit. Incremental
// decoding (attention/decode.c) rotates the new position alone (RoPE; t0 = T - 1) or every
// cached position again (xPos: its scale depends on T).
void attn_pos_rotate_rows(real* out, size_t ldo, const real* in, size_t ldi, const AttnDims* d,
                          AttnWorkspace* ws, int pos_encoding, int is_key, int t0);

// ---- incremental decoding (attention/decode.c; model/kv_cache.c keeps the cache)
// 1 when the variant's output at a new position can be computed from cached keys and values with
// the same arithmetic as the full forward: the row maps (weights a function of the position's
// own masked score row; the stochastic ones draw nothing at evaluation, step < 0), except a row
// map that reads key norms (needs_key_sq) under xpos: xPos centres its key scale on the call's
// length, so |k_j|^2, and every earlier position's output, depends on how long the sequence is.
// 0 for the layer-level variants (layer_forward): gates and scales from the block input, mixes
// across heads or score positions, recurrent memories; decoding recomputes the prefix for them.
int attn_decode_exact(const AttnVariant* v, int pos_encoding);
typedef struct {
    const real* q; // (C) the query of position n - 1, rotated under rope / xpos
    const real* k; // key j at k + j*ld (C channels, rotated under rope / xpos), j < n
    const real* v; // value j at v + j*ld
    size_t ld;
    int n;         // positions so far, the new one included
    real* out;     // (C) head outputs of the new position (overwritten)
    real* scratch; // attn_decode_scratch_floats(row, T, NH, nthreads) reals
} AttnDecode;
size_t attn_decode_scratch_floats(const AttnVariant* row, int T, int NH, int nthreads);
// L: the layer as the model builds it (variant, row map, hyperparameters, row parameters, FIRE
// parameters, step, seed, layer, pos_encoding, d.NH/hs/C); T the longest n it will see.
void attn_decode_forward(const AttnLayer* L, const AttnDecode* s, int T, int nthreads);

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

// 1 when variant v can run under position encoding pos. fire adds a learned bias to the
// attention logits; variants that form no logits (attn_variant.ignores_inner: linear, the
// delta-rule memories, multiscreen) refuse it.
int attn_pos_supported(const AttnVariant* v, int pos);

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

// ---- FIRE (attention/fire.c; Li et al. 2023, arXiv 2310.04418): the bias of head h between
// query t and key j <= t is b_h(t, j) = f_h(psi(t - j) / psi(max(L, t))), psi(x) = ln(|c| x + 1),
// L = 512 |l|, f an MLP 1 -> ATTN_FIRE_HIDDEN (ReLU) -> NH. One parameter vector per layer:
// [c, l, W1 (H), b1 (H), W2 (NH,H), b2 (NH)].
#define ATTN_FIRE_HIDDEN 32
#define ATTN_FIRE_L0     512.0
int attn_fire_nparams(int NH);
// initial values from `seed`: c = 0.1, l = 1 (L = 512), the MLP as PyTorch's nn.Linear default
// (W1, b1 ~ U(-1, 1) for one input; W2, b2 ~ U(-1/sqrt(H), 1/sqrt(H)))
void attn_fire_init(real* theta, int NH, uint64_t seed);
// bias (NH,T,T): entries j <= t of every row, zeros above the diagonal
void attn_fire_bias(real* bias, const real* theta, int NH, int T, int nthreads);
// row t of every head's bias: entries j <= t of head h at bias[h*ldh + j] (equal to the table's)
void attn_fire_bias_row(real* bias, size_t ldh, const real* theta, int NH, int t);
// dtheta += dL/dtheta given dbias (B,NH,T,T) slots (entries j <= t are read); thread-invariant
void attn_fire_backward(real* dtheta, const real* dbias, int B, const real* theta, int NH, int T,
                        int nthreads);

// Performer FAVOR+ (attention/linear_features.c, attn.feature = performer): the orthogonal random
// features W (m, hs) of head h of layer `layer`: blocks of hs Gram-Schmidt-orthonormalised
// Gaussian rows, each scaled by the norm of an independent N(0, I_hs) vector. Draw
// e = floor(step / redraw) (0 when redraw = 0 or step < 0) from (seed, layer, h, e) only.
void attn_performer_features(real* W, int m, int hs, uint64_t seed, int layer, int h, long step,
                             int redraw);

// ---- extra per-thread scratch for layer-level variants
// Reserve n floats per thread (call outside parallel regions; grows, never shrinks), then, in a
// region run with attn_workspace_threads(ws) threads, attn_thread_scratch returns the calling
// thread's n floats.
void attn_workspace_reserve(AttnWorkspace* ws, size_t floats_per_thread);
real* attn_thread_scratch(AttnWorkspace* ws);
int attn_workspace_threads(const AttnWorkspace* ws);

#endif
