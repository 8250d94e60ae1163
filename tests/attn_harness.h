// tests/attn_harness.h: one attention layer with random inputs, for the suites that test the
// driver and the variants through attention_forward / attention_backward. The loss is
// sum(w * out) in double, with w the upstream gradient; every buffer the layer reads or writes
// is owned here.
#ifndef ATTNLAB_ATTN_HARNESS_H
#define ATTNLAB_ATTN_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "attention/attention.h"

typedef struct {
    const AttnVariant* v;   // the layer's variant
    const AttnVariant* row; // its row map: v, or the inner map of a layer-level variant
    AttnHParams hp, row_hp;
    AttnComposed own; // v's own row map (composed variants), resolved from hp by attn_compose
    AttnDims d;
    int ntens;
    AttnTensorSpec specs[ATTN_MAX_TENSORS];
    real* tp[ATTN_MAX_TENSORS];
    real* dtp[ATTN_MAX_TENSORS];
    size_t tsize[ATTN_MAX_TENSORS];
    real *x, *qkv, *out, *att, *cache, *qk_pos, *rowp, *w; // w: upstream gradient of out
    real *dx, *dqkv, *drowp;
    real *posp, *dposp; // FIRE parameters (used under pos_encoding = fire) and their gradient
    size_t nposp;
    AttnWorkspace* ws;
    AttnLayer L;
} AttnHarness;

// A layer of variant v with hyperparameters hp (NULL: defaults, with T_train = T; a
// layer-level variant wraps hp->inner, default softmax) under position encoding `pos`.
// Layer tensors start at their declared init plus N(0, tensor_noise) (tensor_noise <= 0: the
// declared std, or 0.05 for constant inits); row parameters at their init plus N(0, 0.02);
// x, qkv and w are N(0, 1); FIRE parameters at attn_fire_init plus N(0, 0.05) on the MLP
// (the layer reads them only under pos_encoding = fire). Everything is drawn from `seed`.
void harness_setup(AttnHarness* h, const AttnVariant* v, const AttnHParams* hp, int pos, int B,
                   int T, int C, int NH, int nthreads, real tensor_noise, uint64_t seed);
void harness_free(AttnHarness* h);
void harness_zero_grads(AttnHarness* h);
double harness_loss(void* h); // forward, then sum(w * out) in double
// Zero the gradients, then the layer's forward and backward.
void harness_pass(AttnHarness* h);
// a and b (same variant and sizes, different thread counts) agree bit for bit: out, dqkv, dx, the
// row-map and layer parameter gradients; fails the test naming `label` and what differs.
void harness_expect_identical(const AttnHarness* a, const AttnHarness* b, const char* label);

#endif
