// model/gpt2.h: GPT-2 (as llm.c / Hugging Face define it) with pluggable attention.
// One parameter table describes every tensor: the rows of model/params.c (TABLE, keyed by the
// P_* names below), each declaring its shape, init rule, weight decay, Hugging Face name and
// transpose, and the config predicate that switches it on. GPT-2's own rows come first, in
// llm.c's file order; then the row maps' per-head parameters ("attnp"), FIRE, the layer-level
// variants' tensors (one row that expands to each variant's layer_tensors), "resid.query",
// "value_residual.lambda" and the qk-norm gains "qk_norm.q_gain", "qk_norm.k_gain". gpt2_build
// resolves the table into GPT2.specs (ParamSpec), which init, checkpoints, the llm.c and Hugging
// Face readers and writers, the optimizer's decay ranges, gradient-norm logging and the memory
// estimate all iterate. Parameters, gradients and activations each live in one buffer.
#ifndef ATTNLAB_GPT2_H
#define ATTNLAB_GPT2_H

#include <stddef.h>
#include <stdint.h>

#include "attention/attention.h"
#include "common/config.h"
#include "common/matmul.h"
#include "model/residual.h"
#include "model/value_residual.h"

#define GPT2_MAX_LAYERS 64
#define GPT2_MAX_SPECS  96
#define GPT2_NUM_LLMC   16

typedef struct {
    int n_layer, n_head, n_embd, block_size, vocab_size, padded_vocab;
    int pos_encoding;   // ATTN_POS_*
    int qk_norm;        // 0/1: qk-norm of every layer's q and k (attention.h, attention/qknorm.c)
    int qk_norm_kind;   // ATTN_QKNORM_* (layernorm, rmsnorm)
    int residual;       // GPT2_RESID_* (model/residual.h)
    int value_residual; // 0/1 (model/value_residual.h)
    int mlp;            // 1: blocks have an MLP and ln_2; 0: attention-only (those rows have
                        // a layer dimension of 0)
    // the training objective, not the architecture (model files do not hold it): the z-loss
    // coefficient; the forward with targets also computes mean_zloss, the backward its gradient
    float z_loss;
} GPT2Config;

_Static_assert(2 * GPT2_MAX_LAYERS + 1 <= RESID_MAX_SRC, "residual source slots");

// Rows of the parameter table (TABLE in model/params.c is keyed by them). GPT-2's rows,
// P_WTE..P_LNFB, are always present and in llm.c's file order: a row's llm.c slot is its index,
// and its tensor is m->specs[row] (the forward reads m->specs[P_QKVW]). The rows after them are
// present when the config asks for them: GPT2.row_spec[row] is the index of a row's (first)
// tensor, -1 when it is absent.
enum {
    P_WTE,
    P_WPE,
    P_LN1W,
    P_LN1B,
    P_QKVW,
    P_QKVB,
    P_ATTPROJW,
    P_ATTPROJB,
    P_LN2W,
    P_LN2B,
    P_FCW,
    P_FCB,
    P_FCPROJW,
    P_FCPROJB,
    P_LNFW,
    P_LNFB,
    P_ATTNP,       // "attnp" (L, NH, maxP): row-map parameters of every layer, when maxP > 0
    P_FIRE,        // "fire" (L, attn_fire_nparams(NH)) under pos_encoding = fire
    P_VARIANT,     // "<variant>.<tensor>" (L, ...): the layer-level variants' tensors
    P_RESID_QUERY, // "resid.query" (resid_query_rows, C) under residual = attnres | delta
    P_VRES_LAMBDA, // "value_residual.lambda" (L, 2) under value_residual = 1
    P_QKNORM_Q,    // "qk_norm.q_gain" (L, hs) under qk_norm = 1: the gain of the normalised q
    P_QKNORM_K,    // "qk_norm.k_gain" (L, hs): of the normalised k
    GPT2_NUM_ROWS
};

// Init rules of the parameter table.
typedef enum {
    PINIT_ZERO,   // zeros (biases)
    PINIT_ONES,   // ones (LayerNorm gains)
    PINIT_NORMAL, // N(0, 0.02)
    PINIT_RESID,  // N(0, 0.02 / sqrt(2 n_layer)): the projections into the residual stream
    PINIT_HALF,   // 0.5 (value_residual's mixing weights)
    // per-layer rules, declared by the attention; gpt2_init fills a run of consecutive tensors
    // with these rules layer by layer (layer 0's slice of each, then layer 1's, ...)
    PINIT_ROWMAP, // each head's row-map init_params (zeros without one)
    PINIT_FIRE,   // attn_fire_init, seeded by one draw of the init stream
    PINIT_LAYER,  // the AttnTensorSpec init of the layer's variant (tensors of a variant the
                  // layer does not use stay 0)
} ParamInit;

typedef struct {
    char name[64]; // "wte", "qkvw", "attnp", "gated.w" ...
    int ndim;
    size_t shape[4];
    size_t size;       // floats
    size_t offset;     // into GPT2.params / GPT2.grads
    int decay;         // weight decay applies
    int stacked;       // first dimension is n_layer
    int init;          // ParamInit
    int vocab_rows;    // first dimension is the padded vocabulary: only the vocab_size real rows
                       // are initialised, exported and imported (padding rows stay 0)
    const char* hf;    // Hugging Face GPT2LMHeadModel name (after "transformer." and, when
                       // stacked, "h.<layer>."), NULL for tensors HF GPT-2 lacks ("attnlab.<name>")
    int hf_transpose;  // HF stores it (in, out): a Conv1D weight, transposed against (out, in)
    int llmc;          // slot in llm.c's model file (0..GPT2_NUM_LLMC-1), -1 if not in it
    int variant_owned; // 1: belongs to an attention variant (logged as kind "param")
    int row;           // the table row it comes from (P_*)
    int mm_grad; // 1: its whole gradient is the output of a weight-gradient matmul (wte's tied
                 // classifier, qkvw, attprojw, fcw, fcprojw), which overwrites it on the first
                 // micro-batch of a step instead of adding to zeros (gpt2_zero_grad)
} ParamSpec;

// Attention of one layer: variant, row map and their resolved hyperparameters.
typedef struct {
    const AttnVariant* v;
    const AttnVariant* row;
    AttnHParams hp, row_hp;
    AttnComposed own; // v's own row map (composed variants), resolved once by the setup
    int tensor_spec[ATTN_MAX_TENSORS]; // ParamSpec index of each of v's layer tensors
    int ntensors;
} LayerAttn;

// Bytes of the model's buffers by kind (GPT2.bytes): what gpt2_build, gpt2_alloc_acts and
// gpt2_set_precision allocated, or in size-only mode would allocate.
typedef struct {
    double params, grads; // the parameter table, fp32, and its gradients
    double bf16;          // bf16 copy of the parameters (bf16 precisions)
    double acts;          // activations and backward scratch, attention maps and logits included
    double attn, logits;  // of which the attention maps (L, B, NH, T, T) and logits (B, T, Vp)
    double caches;        // per-layer variant caches and rotated q, k (rope, xpos)
    double workspace;     // attention workspace (per-thread planes, RoPE tables and gradient)
    double matmul;        // bf16 operand buffers of the linear layers (bf16 precisions)
} GPT2Bytes;

typedef struct {
    GPT2Config cfg;
    char attention[CONFIG_STR]; // the attention spec as configured
    LayerAttn la[GPT2_MAX_LAYERS];
    int maxP;                    // largest params_per_head among the layers' row maps
    int row_spec[GPT2_NUM_ROWS]; // ParamSpec index of each row's (first) tensor, -1 if absent
    ParamSpec specs[GPT2_MAX_SPECS];
    int nspecs;
    size_t num_params;
    float* params;
    float* grads;
    // ---- activations, allocated for up to (B, T)
    int B, T;
    int cur_B, cur_T; // shape of the last forward
    float* acts;
    float *encoded, *ln1, *ln1_mean, *ln1_rstd, *qkv, *atty, *att, *attproj, *residual2, *ln2,
        *ln2_mean, *ln2_rstd, *fch, *fch_gelu, *fcproj, *residual3, *lnf, *lnf_mean, *lnf_rstd,
        *logits, *lse, *losses;
    // qk_norm = 1: every layer's normalised q, k before the gain (L, B, T, 2C) and the inverse
    // scales (L, B, T, 2NH), kept for the backward (attn_qknorm_forward); NULL otherwise
    float *qkn_xhat, *qkn_rstd;
    float* attn_cache[GPT2_MAX_LAYERS];
    // residual = attnres | delta_attnres and value_residual (their own files own these)
    ResidState* resid; // NULL under residual = standard
    VresState* vres;   // NULL without value_residual
    // backward scratch (one layer's worth)
    float *dres, *dln, *dqkv, *datty, *dfch, *dfch_gelu, *dlnf;
    const int* inputs; // of the last forward (kept for backward)
    const int* targets;
    float mean_loss;  // of the last forward with targets, else -1 (the cross-entropy only)
    float mean_zloss; // cfg.z_loss * mean (log Z)^2 of the last forward with targets, else 0
    long step;        // training step given to stochastic variants (-1 = eval)
    uint64_t seed;
    int nthreads;
    AttnWorkspace* ws;
    // ---- precision of the matmuls (gpt2_set_precision). In bf16 every matmul reads its weight
    // from params_bf16, a bf16 copy of params refreshed by the first forward after the
    // parameters changed (gpt2_params_changed): once per optimizer step, not once per call.
    MMPrecision precision;
    bf16* params_bf16;  // NULL in fp32
    bf16* dlogits_bf16; // (B, T, Vp) the classifier's dlogits in bf16 (NULL in fp32)
    // The linear layers' inputs rounded to bf16 by their producers in the forward (layernorm,
    // GELU fused; the attention output by a cast), read by the forward matmul and again by the
    // weight-gradient matmul of the backward: one rounding per step. Same layout as the fp32
    // arrays; one allocation at acts_bf16 (NULL in fp32).
    bf16* acts_bf16;
    bf16 *ln1_h, *atty_h, *ln2_h, *fch_gelu_h, *lnf_h;
    bf16* dfch_h;    // (B, T, 4C) the backward's dfch rounded by the GELU backward (NULL in fp32)
    int bf16_stale;  // params changed since params_bf16 was made
    int bf16_synced; // the last optimizer step rewrote params_bf16 itself (gpt2_params_synced)
    long bf16_refreshes;
    // ---- allocation. Every buffer gpt2_build, gpt2_alloc_acts and gpt2_set_precision allocate
    // is tallied in `bytes`. With size_only = 1 (set before gpt2_build) they allocate nothing and
    // only tally: the memory estimate (model/run/memory.h) runs the allocation code this way.
    int size_only;
    GPT2Bytes bytes;
    // ---- data parallelism (optim/data_parallel.h, train.c). gpt2_backward accumulates the
    // gradient in segments (gpt2_grad_segments) and calls grad_hook(ctx, seg, 0) before it first
    // adds to segment seg and grad_hook(ctx, seg, 1) once the segment is final for this
    // micro-batch. NULL (a single process): no calls, and the backward runs as without this field.
    // At phase 0 the hook returns 1 when it has replaced the segment's gradient (a running sum
    // received from another rank): the backward then adds to it even on a step's first
    // micro-batch; 0 otherwise (and always at phase 1).
    int (*grad_hook)(void* ctx, int seg, int phase);
    void* grad_hook_ctx;
    // gpt2_zero_grad left the mm_grad tensors uncleared: the next backward overwrites them
    int grads_fresh;
} GPT2;

// The gradient segments in the order gpt2_backward finishes them: 0 = final layernorm (lnfw,
// lnfb); 1 + (L-1-l) = layer l (its slice of every stacked tensor); L+1 = embeddings (wte, wpe;
// with a hook set, the classifier's wte gradient is added here, after the layers, so every
// segment is written in one contiguous stretch of the backward). Every parameter is in exactly
// one segment.
int gpt2_grad_segments(const GPT2* m);
// The (offset, size) slices of segment seg into off[], len[] (at most GPT2_MAX_SPECS); returns
// their number.
int gpt2_segment_slices(const GPT2* m, int seg, size_t* off, size_t* len);

// Resolve the attention spec ("softmax" or per layer "0-3:softmax,4-11:ssmax") and the
// attn.* keys of `c` into m->la. Every attn.* key must belong to a variant in use; errors name
// where the key was set. Returns 0, or -1 with err.
int gpt2_setup_attention(GPT2* m, const Config* c, char* err, size_t errcap);

// Model sizes from the config (padded vocab = vocab_size rounded up to a multiple of 128).
int gpt2_config_from(GPT2Config* g, const Config* c, char* err, size_t errcap);
// The resolved config of a run as text (malloc'd): every key of c, the precision in effect and
// every attention hyperparameter of m in effect (defaults included) as comments. Written to
// OUT/config.conf and into every model file.
char* gpt2_config_text(const GPT2* m, const Config* c, const char* precision_info);

// Build the parameter table and allocate parameters and gradients (zeroed). Attention must be
// set up first. gpt2_init then fills GPT-2 initial values from `seed`.
void gpt2_build(GPT2* m, const GPT2Config* cfg);
void gpt2_init(GPT2* m, uint64_t seed);
// Allocate activations for batches up to (B, T) with `nthreads` OpenMP threads.
void gpt2_alloc_acts(GPT2* m, int B, int T, int nthreads);
void gpt2_free(GPT2* m);

// Floats of an llm.c model file of these sizes (the table's rows that have an llm.c slot).
size_t gpt2_llmc_floats(const GPT2Config* cfg);

// Slice of tensor `spec` for layer l (l ignored for unstacked tensors).
float* gpt2_tensor(const GPT2* m, const float* base, int spec, int l);
int gpt2_find_spec(const GPT2* m, const char* name); // -1 if absent

// Forward (B,T) token ids; with targets the mean loss is in m->mean_loss and per-position
// losses in m->losses. Token ids must be < vocab_size (checked by the caller).
void gpt2_forward(GPT2* m, const int* inputs, const int* targets, int B, int T);
// The forward of one position, kv_cache_len(kv), whose layers attend over and extend the cache kv
// (model/kv_store.h); model/kv_cache.h steps a cache with it.
struct KVCache;
void gpt2_forward_cached(GPT2* m, struct KVCache* kv, const int* token);
// A new step's gradient: zero for the next backward. Only the tensors that backward adds into
// are cleared in memory; the mm_grad tensors (the weight-gradient matmuls' outputs) keep stale
// values until the next gpt2_backward overwrites them, so read m->grads only after a backward.
void gpt2_zero_grad(GPT2* m);
// Backward of the last forward (which needs targets); grads += d(mean_loss * scale).
void gpt2_backward(GPT2* m, float scale);

// Run every matmul of this model in precision p (common/matmul.h; sets the process-wide kernel
// precision too). Master weights, gradients and all other passes stay fp32.
void gpt2_set_precision(GPT2* m, MMPrecision p);
// The parameters were changed (optimizer step, load): the next forward refreshes the bf16 copy.
// gpt2_init and gpt2_zero_grad call it themselves.
void gpt2_params_changed(GPT2* m);
// The bf16 copy of the parameters (NULL in fp32), for an optimizer pass to rewrite as it updates
// them; it then calls gpt2_params_synced, and neither the next forward nor gpt2_zero_grad redoes
// the copy.
bf16* gpt2_weight_copy(GPT2* m);
void gpt2_params_synced(GPT2* m);

// Logits row (Vp floats) of position (b, t) of the last forward.
const float* gpt2_logits(const GPT2* m, int b, int t);

// Model FLOPs per token of a training step (6N + 12 L T C, as in nanoGPT's MFU estimate).
double gpt2_flops_per_token(const GPT2* m, int T);

#endif
