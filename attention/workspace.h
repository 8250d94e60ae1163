// attention/workspace.h: the shapes of an attention call (AttnDims) and the per-thread scratch
// the driver and the layer-level variants share (AttnWorkspace, attention.c). The model sizes
// and allocates every workspace at setup (attn_workspace_new, _prepare_pos, _reserve); the
// memory estimate asks the same functions for their sizes without allocating (_bytes).
#ifndef ATTNLAB_ATTENTION_WORKSPACE_H
#define ATTNLAB_ATTENTION_WORKSPACE_H

#include <stddef.h>

#include "attention/real.h"

typedef struct AttnVariant AttnVariant;

typedef struct AttnDims {
    int B, T, C, NH, hs;
} AttnDims;

typedef struct AttnWorkspace AttnWorkspace;

// Per-thread scratch for sequences up to T. Sized for the row map's scratch and the largest
// number of per-head params among the variants in use.
AttnWorkspace* attn_workspace_new(int B, int T, int NH, int nthreads, size_t row_scratch,
                                  int max_params_per_head);
void attn_workspace_free(AttnWorkspace* ws);
// Allocate what the position encoding of width C needs in forward and backward: under rope and
// xpos the tables and the (B,T,2C) rotated-space gradient, under fire the bias table (NH,T,T),
// its gradient slots (B,NH,T,T) and the backward's rows. Required before any forward under these
// encodings (which allocate nothing themselves).
void attn_workspace_prepare_pos(AttnWorkspace* ws, int pos_encoding, int C);
// Bytes attn_workspace_new and then attn_workspace_prepare_pos allocate for these arguments,
// allocating nothing (the memory estimate's size-only mode).
size_t attn_workspace_bytes(int B, int T, int NH, int C, int nthreads, size_t row_scratch,
                            int max_params_per_head, int pos_encoding);
// Bytes attn_workspace_reserve(ws, floats_per_thread) allocates in a workspace of nthreads
// threads that has no such scratch yet (0 for 0 floats).
size_t attn_workspace_reserve_bytes(int nthreads, size_t floats_per_thread);
size_t attn_row_scratch(const AttnVariant* v, int T);

// ---- extra per-thread scratch for layer-level variants
// Reserve n floats per thread at setup (the model reserves the largest layer_scratch_floats of
// its layers; grows, never shrinks), then, in a region run with attn_workspace_threads(ws)
// threads, attn_thread_scratch returns the calling thread's n floats. A layer hook states what it
// is about to use with attn_workspace_expect, which allocates nothing: it asserts that setup
// reserved at least that much (a hook whose layer_scratch_floats under-reports is a programming
// error, caught by every test that runs the hook).
void attn_workspace_reserve(AttnWorkspace* ws, size_t floats_per_thread);
void attn_workspace_expect(const AttnWorkspace* ws, size_t floats_per_thread);
real* attn_thread_scratch(AttnWorkspace* ws);
int attn_workspace_threads(const AttnWorkspace* ws);

#endif
