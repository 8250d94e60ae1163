// attention/deltanet_onorm.h: the per-head output normalisation of the delta-rule layers
// (attention/deltanet.c), as flash-linear-attention's DeltaNet and GatedDeltaNet layers apply it
// (fla-org/flash-linear-attention:fla/layers/delta_net.py, gated_deltanet.py: o_norm).
// Math, shapes and backward in attention/deltanet_onorm.c.
#ifndef ATTNLAB_DELTANET_ONORM_H
#define ATTNLAB_DELTANET_ONORM_H

#include "attention/real.h"

#define DN_ONORM_EPS ((real)1e-5) // fla's norm_eps

typedef struct {
    int B, T, C, NH, hs;
    int gated;        // 1: times silu(x W_g^T) (FusedRMSNormGated); 0: RMSNorm only
    int nthreads;     // threads of the parallel loops (results do not depend on it)
    const real* x;    // (B,T,C) block input
    const real* obar; // (B,T,C) head outputs of the memory read
    const real* w;    // (hs) the norm's weight, shared by the heads
    const real* Wg;   // (C, C) gate projection (gated)
    real* r;          // (B,T,NH) 1/rms per head (written by forward)
    real* G;          // (B,T,C) gate pre-activation x W_g^T (gated; written by forward)
    real* out;        // (B,T,C) forward output
    // backward
    const real* dout; // (B,T,C)
    real* dobar;      // (B,T,C) overwritten
    real* dG;         // (B,T,C) scratch (gated)
    real* dw;         // (hs) +=
    real* dWg;        // (C, C) +=
    real* dx;         // (B,T,C) +=
} DnONorm;

void dn_onorm_forward(const DnONorm* n);
void dn_onorm_backward(const DnONorm* n);

#endif
