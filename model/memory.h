// model/memory.h: estimate of the memory a training configuration needs (parameters, gradients,
// optimizer state, activations including the (L, B, NH, T, T) attention maps, workspace), and
// the check run_setup makes against MemAvailable from /proc/meminfo before allocating anything.
#ifndef ATTNLAB_MEMORY_H
#define ATTNLAB_MEMORY_H

#include <stddef.h>

#include "model/gpt2.h"

typedef struct {
    double params, grads, optim; // bytes
    double acts;                 // all activations and backward scratch (attention included)
    double attn;                 // of which the attention maps (L, B, NH, T, T)
    double logits;               // of which the logits (B, T, Vp)
    double workspace;            // attention workspace and per-layer variant caches (estimate)
    double total;
} MemEstimate;

// Estimate for model sizes g, batches up to (B, T), an optimizer with `state_per_param` arrays
// of one float per parameter, and `nthreads` threads.
void memory_estimate(MemEstimate* e, const GPT2Config* g, int B, int T, int state_per_param,
                     int nthreads);

// MemAvailable of /proc/meminfo in bytes, or -1 if unknown. The environment variable
// ATTNLAB_MEM_AVAILABLE (bytes) overrides it (for tests and for sharing a machine).
double memory_available(void);

// 0 if the estimate fits in `avail` bytes (avail < 0: unknown, always fits); else -1 with a
// message giving the estimate, its parts and what to reduce.
int memory_check(const MemEstimate* e, double avail, char* err, size_t errcap);

#endif
