// optim/optim.h: optimizers over one flat parameter buffer, split into ranges that each carry a
// weight-decay flag (the model's parameter table supplies them; optim knows nothing of GPT-2).
// An optimizer is one file exporting a `const OptimizerDef`, listed in optim/optim.c's table:
// AdamW (default), SGD with momentum, SignSGD, Lion. State is `state_per_param` float arrays of
// n floats each, laid out one after another (AdamW: m then v, as llm.c's checkpoints hold them).
// Updates are elementwise and parallel over elements, so results do not depend on thread count.
#ifndef ATTNLAB_OPTIM_H
#define ATTNLAB_OPTIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/bf16.h"
#include "common/run_state.h"
#include "common/util.h"

// Weight decay modes (config key weight_decay_mode; the names in optim/optim.c's table).
// Every optimizer here decays as p -= lr_t (u + wd p), u its update direction and lr_t the
// scheduled learning rate, with wd passed to its update as:
//   coupled (default):  wd = weight_decay: the decay is scaled by lr_t (AdamW as PyTorch and Optax
//                       implement it);
//   independent:        wd = weight_decay / lr_max, lr_max the peak learning rate (the config's
//                       lr), so that lr_t wd p = s_t weight_decay p with s_t = lr_t / lr_max the
//                       schedule: p <- p - s_t lr_max u - s_t weight_decay p, Wortsman et al. 2023
//                       (arXiv 2309.14322, Sec. 3.2.2) "independent decay" (Loshchilov & Hutter's
//                       recommendation): the decay follows the schedule but not the peak lr.
//                       lr_max = 0 (nothing moves): no decay.
typedef enum { OPTIM_WD_COUPLED, OPTIM_WD_INDEPENDENT, OPTIM_WD_COUNT } OptimWdMode;
const char* optim_wd_mode_name(int mode);      // NULL out of range
int optim_wd_mode_from_name(const char* name); // -1 if unknown

typedef struct {
    float beta1, beta2, eps, weight_decay;
    int wd_mode;  // OptimWdMode (0: coupled)
    float lr_max; // the peak learning rate, for wd_mode = independent
} OptimHParams;

// The coefficient a decayed range passes to the update as wd (see OptimWdMode).
float optim_decay_coeff(const OptimHParams* h);

typedef struct {
    size_t offset, size; // a contiguous slice of the parameter buffer
    int decay;           // 1: apply weight decay to this slice
} OptimRange;

typedef struct {
    const char* name;
    const char* formula; // one line, for --help
    int state_per_param; // number of n-float state arrays
    // Update p[0..n) in place from g[0..n); state[k*stride + i] is state array k of element i.
    // t is the 1-based update count (for bias correction); wd is 0 for non-decayed ranges.
    void (*update)(float* p, const float* g, float* state, size_t stride, size_t n, float lr,
                   float wd, const OptimHParams* h, long t);
    // Optional, the same update in one pass with two extra jobs (see OptimFuse): the gradient
    // read as g[i] * gscale (clipping), and copy[i] = bf16(p[i]) written after the update.
    // Bitwise equal to scaling g in place, calling update, then converting p. Without it,
    // optim_step_fused does those three passes itself.
    void (*update_fused)(float* p, const float* g, float* state, size_t stride, size_t n, float lr,
                         float wd, const OptimHParams* h, long t, float gscale, bf16* copy);
} OptimizerDef;

// The jobs a step can fold into the optimizer's pass over the parameters: the clipping scale
// (grad_clip_scale) and a bf16 copy of the parameters to refresh (the bf16 matmul operands).
typedef struct {
    float gscale; // 1: no clipping
    bf16* copy;   // NULL: none; else indexed like the parameter buffer
} OptimFuse;

// The registered optimizers (one file each); add a new one to the table in optim/optim.c.
extern const OptimizerDef optim_adamw;   // "adamw" (default)
extern const OptimizerDef optim_sgd;     // "sgd": heavy-ball momentum beta1
extern const OptimizerDef optim_signsgd; // "signsgd"
extern const OptimizerDef optim_lion;    // "lion"

// Elementwise updates run in parallel only over slices at least this long (thread start-up
// costs more than it saves on small tensors; the result is the same either way).
#define OPTIM_PAR_MIN 32768

const OptimizerDef* optim_lookup(const char* name); // NULL if unknown
int optim_count(void);
const OptimizerDef* optim_get(int i);

typedef struct {
    const OptimizerDef* def;
    size_t n;     // parameters the state covers
    size_t base;  // first parameter index the state covers (0 unless sharded)
    float* state; // def->state_per_param * n floats, zero-initialised
    long t;       // updates done
} Optimizer;

void optim_init(Optimizer* o, const OptimizerDef* def, size_t n);
// Update the parameters [o->base, o->base + o->n) of the flat buffer: each range is clipped to
// that span (unsharded, base 0 and n = all, every range in full), with the jobs of *f (NULL:
// none; the gradient is then only read) done on the way: one pass over the parameters for an
// optimizer with update_fused (AdamW), else g scaled in place (only when gscale != 1), the
// update, and the copy converted, range by range. Either way the parameters, state and copy are
// bitwise what scaling g by gscale, the plain update (f = NULL) and bf16_from_floats give one
// after another.
void optim_step_fused(Optimizer* o, float* params, float* grads, const OptimRange* ranges,
                      int nranges, float lr, const OptimHParams* h, const OptimFuse* f);

// ZeRO-1 sharding (as llm.c): the parameters 0..n split into `nranks` contiguous shards,
// b[r] = floor(n / nranks) * r rounded down to a multiple of 16 floats (b[0] = 0, b[nranks] = n).
// Updates are elementwise, so a rank stepping its shard changes exactly the values the
// unsharded step would, bit for bit.
void optim_shard_bounds(size_t n, int nranks, size_t* b);
// State for the shard [lo, hi) only: (hi - lo) * state_per_param floats.
void optim_init_shard(Optimizer* o, const OptimizerDef* def, size_t lo, size_t hi);
void optim_free(Optimizer* o);

// State serialisation: the optimizer's section of a run-state file (common/run_state.h), named
// OPTIM_STATE_SECTION. Payload: the algorithm name (OPTIM_NAME_BYTES, NUL-padded), int64
// parameter count n, int64 update count t, int32 number of state arrays (little-endian: the
// OPTIM_STATE_HEADER_BYTES of the header), then the state arrays (state_per_param arrays of n
// float32, in memory order).
#define OPTIM_NAME_BYTES         32
#define OPTIM_STATE_SECTION      "optim"
#define OPTIM_STATE_HEADER_BYTES (OPTIM_NAME_BYTES + 8 + 8 + 4)
typedef struct {
    char name[OPTIM_NAME_BYTES]; // NUL-padded
    int64_t n, t;
    int32_t state_per_param;
} OptimStateHeader;

// Write o's section (a failed write is reported by run_state_finish).
void optim_state_put(const Optimizer* o, RunStateWriter* w);
// Read the section from r into o: its header accepted (optim_state_accept), then exactly the
// state arrays it implies. 0, or -1 with err naming the file and the section.
int optim_state_get(Optimizer* o, RunStateReader* r, char* err, size_t errcap);

#endif
