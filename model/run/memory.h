// model/run/memory.h: the memory a training configuration needs (parameters, gradients, optimizer
// state, the bf16 weight copy and operand buffers, activations including the (L, B, NH, T, T)
// attention maps, variant caches, attention workspace), and the check the trainer's setup (train.c)
// makes against MemAvailable from /proc/meminfo before allocating anything.
//
// The estimate is not a formula: it runs the model's own allocation code (gpt2_build,
// gpt2_alloc_acts, gpt2_set_precision) in size-only mode, which allocates nothing and sums the
// bytes each buffer would take, so every tensor of the parameter table (variant tensors
// included), every variant cache and the workspace count exactly as they will be allocated.
// Not counted: per-thread GEMM scratch of the worker threads in bf16 and the diagnostics'
// buffers.
#ifndef ATTNLAB_MEMORY_H
#define ATTNLAB_MEMORY_H

#include <stddef.h>

#include "common/matmul.h"
#include "model/gpt2.h"

typedef struct {
    double params, grads, optim; // bytes
    double bf16;                 // bf16 weight copy and the linear layers' bf16 operand buffers
    double acts;                 // activations and backward scratch (attention maps included)
    double attn;                 // of which the attention maps (L, B, NH, T, T)
    double logits;               // of which the logits (B, T, Vp)
    double workspace;            // attention workspace and per-layer variant caches
    double total;
} MemEstimate;

// Estimate for model sizes g with the attention of `m` (set up by gpt2_setup_attention; nothing
// of m is changed), batches up to (B, T), an optimizer with `state_per_param` arrays of one float
// per parameter, matmul precision `prec` and `nthreads` threads.
void memory_estimate(MemEstimate* e, const GPT2* m, const GPT2Config* g, int B, int T,
                     int state_per_param, MMPrecision prec, int nthreads);

// MemAvailable of /proc/meminfo in bytes, or -1 if unknown. The environment variable
// ATTNLAB_MEM_AVAILABLE (bytes) overrides it (for tests and for sharing a machine).
double memory_available(void);

// 0 if the estimate fits in `avail` bytes (avail < 0: unknown, always fits); else -1 with a
// message giving the estimate, its parts and what to reduce.
int memory_check(const MemEstimate* e, double avail, char* err, size_t errcap);

#endif
