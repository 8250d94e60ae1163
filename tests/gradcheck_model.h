// tests/gradcheck_model.h: model-level finite-difference gradient check of every parameter
// tensor of a tiny GPT-2 (whatever attention it is built with), shared by the model suites.
//
// The check (mgc_check) builds the model from a Config, moves every parameter away from its
// init (so attention is far from uniform and no parameter sits on its init value), runs one
// forward + backward on B = 2 differing batch items, and then, for every ParamSpec and every
// layer slice of it:
//   - a random directional derivative over the whole slice (the slice moves along a random
//     unit vector u; analytic g.u against the 4-point central difference), which must carry
//     signal: |numeric| >= MGC_SIGNAL x the noise floor, else the slice counts as unchecked;
//   - a sample of single entries (every entry of "attnp", so every head and every parameter of
//     every layer is checked on its own);
//   - entries that the model never reads (wte's padded rows, the attnp entries past a layer's
//     row-map parameter count, a layer tensor's slice in a layer that does not use its
//     variant, wpe without learned positions) must have a gradient of exactly 0.
// A slice whose gradient is exactly 0 everywhere and whose directional derivative has no
// signal is "unused": it passes only if the caller's `unused` list names it with the reason
// the math gives; a listed slice that does have signal fails too (the list is stale).
#ifndef ATTNLAB_GRADCHECK_MODEL_H
#define ATTNLAB_GRADCHECK_MODEL_H

#include <stdint.h>

#include "common/config.h"

// One tensor the math leaves unused under a configuration: "attnp" (with param index, or -1
// for all of a head's parameters) or a spec name ("affine.beta"); layer -1 = every layer.
typedef struct {
    const char* tensor;
    int param; // attnp only: the parameter index within a head, -1 = all
    int layer;
    const char* why;
} MgcUnused;

typedef struct {
    int slices_checked; // layer slices with a passing, signal-carrying directional derivative
    int entries_checked;
    int retries;     // checks that passed only at the smaller step (a kink inside the stencil)
    int unused;      // slices accepted as unused through the list
    int weak;        // attnp (layer, parameter) agreeing but below the signal bar; the parameter
                     // must then carry signal in another layer
    int zero_checks; // never-read entries asserted to have exactly 0 gradient
} MgcReport;

// Build a tiny model from c (sizes from c; B = 2, T = c->seq_len), check every tensor as above
// and ck_assert on any failure, naming `label`, the tensor, the layer and the entry.
MgcReport mgc_check(const Config* c, const char* label, const MgcUnused* unused, int nunused,
                    uint64_t seed);

// The tiny configuration the model-level checks use: L = 2, NH = 2, C = 16, T = 9, V = 64.
void mgc_tiny_config(Config* c);

#endif
