// model/gpt2.h: GPT-2 (as llm.c / Hugging Face define it) with pluggable attention.
// One parameter table (ParamSpec) describes every tensor: llm.c's 16 tensors in llm.c's order,
// then the attention variants' tensors. Checkpoints, the optimizer's decay ranges, gradient-norm
// logging and the exporters all iterate this table. Parameters, gradients and activations each
// live in one buffer.
#ifndef ATTNLAB_GPT2_H
#define ATTNLAB_GPT2_H

#include <stddef.h>
#include <stdint.h>

#include "attention/attention.h"
#include "common/config.h"
#include "common/matmul.h"

#define GPT2_MAX_LAYERS 64
#define GPT2_MAX_SPECS  96
#define GPT2_NUM_LLMC   16

typedef struct {
    int n_layer, n_head, n_embd, block_size, vocab_size, padded_vocab;
    int pos_encoding; // ATTN_POS_*
    int qk_norm;
} GPT2Config;

// llm.c's tensor order; attnlab's own tensors follow.
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
    P_LNFB
};

typedef struct {
    char name[64]; // "wte", "h.qkvw", "attnp", "gated.w" ...
    int ndim;
    size_t shape[4];
    size_t size;       // floats
    size_t offset;     // into GPT2.params / GPT2.grads
    int decay;         // weight decay applies
    int stacked;       // first dimension is n_layer
    int llmc;          // 1: one of llm.c's 16 tensors
    int variant_owned; // 1: belongs to an attention variant (logged as kind "param")
} ParamSpec;

// Attention of one layer: variant, row map and their resolved hyperparameters.
typedef struct {
    const AttnVariant* v;
    const AttnVariant* row;
    AttnHParams hp, row_hp;
    int tensor_spec[ATTN_MAX_TENSORS]; // ParamSpec index of each of v's layer tensors
    int ntensors;
} LayerAttn;

typedef struct {
    GPT2Config cfg;
    char attention[CONFIG_STR]; // the attention spec as configured
    LayerAttn la[GPT2_MAX_LAYERS];
    int maxP;       // largest params_per_head among the layers' row maps
    int attnp_spec; // ParamSpec index of "attnp" (L, NH, maxP), -1 if none
    int fire_spec;  // ParamSpec index of "fire" (L, attn_fire_nparams(NH)) under fire, else -1
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
    float* attn_cache[GPT2_MAX_LAYERS];
    // backward scratch (one layer's worth)
    float *dres, *dln, *dqkv, *datty, *dfch, *dfch_gelu, *dlnf;
    const int* inputs; // of the last forward (kept for backward)
    const int* targets;
    float mean_loss; // of the last forward with targets, else -1
    long step;       // training step given to stochastic variants (-1 = eval)
    uint64_t seed;
    int nthreads;
    AttnWorkspace* ws;
    // ---- precision of the matmuls (gpt2_set_precision). In bf16 every matmul reads its weight
    // from params_bf16, a bf16 copy of params refreshed by the first forward after the
    // parameters changed (gpt2_params_changed): once per optimizer step, not once per call.
    MMPrecision precision;
    bf16* params_bf16; // NULL in fp32
    int bf16_stale;    // params changed since params_bf16 was made
    long bf16_refreshes;
} GPT2;

// Resolve the attention spec ("softmax" or per layer "0-3:softmax,4-11:ssmax") and the
// attn.* keys of `c` into m->la. Every attn.* key must belong to a variant in use; errors name
// where the key was set. Returns 0, or -1 with err.
int gpt2_setup_attention(GPT2* m, const Config* c, char* err, size_t errcap);

// Model sizes from the config (padded vocab = vocab_size rounded up to a multiple of 128).
int gpt2_config_from(GPT2Config* g, const Config* c, char* err, size_t errcap);

// Build the parameter table and allocate parameters and gradients (zeroed). Attention must be
// set up first. gpt2_init then fills GPT-2 initial values from `seed`.
void gpt2_build(GPT2* m, const GPT2Config* cfg);
void gpt2_init(GPT2* m, uint64_t seed);
// Allocate activations for batches up to (B, T) with `nthreads` OpenMP threads.
void gpt2_alloc_acts(GPT2* m, int B, int T, int nthreads);
void gpt2_free(GPT2* m);

// Slice of tensor `spec` for layer l (l ignored for unstacked tensors).
float* gpt2_tensor(const GPT2* m, const float* base, int spec, int l);
int gpt2_find_spec(const GPT2* m, const char* name); // -1 if absent

// Forward (B,T) token ids; with targets the mean loss is in m->mean_loss and per-position
// losses in m->losses. Token ids must be < vocab_size (checked by the caller).
void gpt2_forward(GPT2* m, const int* inputs, const int* targets, int B, int T);
void gpt2_zero_grad(GPT2* m);
// Backward of the last forward (which needs targets); grads += d(mean_loss * scale).
void gpt2_backward(GPT2* m, float scale);

// Run every matmul of this model in precision p (common/matmul.h; sets the process-wide kernel
// precision too). Master weights, gradients and all other passes stay fp32.
void gpt2_set_precision(GPT2* m, MMPrecision p);
// The parameters were changed (optimizer step, load): the next forward refreshes the bf16 copy.
// gpt2_init and gpt2_zero_grad call it themselves.
void gpt2_params_changed(GPT2* m);

// Logits row (Vp floats) of position (b, t) of the last forward.
const float* gpt2_logits(const GPT2* m, int b, int t);

// Model FLOPs per token of a training step (6N + 12 L T C, as in nanoGPT's MFU estimate).
double gpt2_flops_per_token(const GPT2* m, int T);

#endif
