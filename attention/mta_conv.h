// attention/mta_conv.h: the two mixing operators of Multi-Token Attention (attention/mta.c) on
// causal (T, T) maps of one batch item: the 2-D key-query convolution of one head's map and the
// linear mixing of the maps of several heads, with their backward (math in mta_conv.c).
#ifndef ATTNLAB_MTA_CONV_H
#define ATTNLAB_MTA_CONV_H

#include "attention/real.h"

// A c_q x c_k kernel, c_k = 2w + 1: query offsets a = 0..c_q-1 (the current and earlier queries),
// key offsets b = -w..w centred on the key (theta[a * c_k + b + w]).
typedef struct {
    int cq, w, ck;
} MtaKernel;

// L (T,T) = conv_{e00 + th}(X) on j <= i, 0 above the diagonal, for X zero above the diagonal:
//   L[i,j] = X[i,j] + sum_{a,b} th[a,b] X[i-a, j-b]   (terms with i-a < 0 or j-b < 0 are 0).
// With cq = 0 (no kernel) L = X on j <= i.
void mta_conv(real* L, const real* X, const real* th, const MtaKernel* k, int T);

// Backward of mta_conv for dL (entries j <= i read): dX[i', j'] += (conv^T dL)[i', j'] on
// j' <= i' (never above the diagonal), dth[a,b] += sum_{i,j<=i} dL[i,j] X[i-a, j-b].
void mta_conv_backward(real* dX, real* dth, const real* dL, const real* X, const real* th,
                       const MtaKernel* k, int T);

// Head mixing in groups of gs consecutive heads (the last group may be smaller), with the mixing
// matrix I + D, D (NH, gs) holding row k's coefficients for the heads g0(k) .. g0(k)+gs-1:
//   Y_k = X_k + sum_m D[k, m] X_{g0(k)+m}   on the causal entries j <= i (Y above them: 0).
// X, Y (NH, T, T) must not overlap.
void mta_mix(real* Y, const real* X, const real* D, int gs, int NH, int T);

// Backward of mta_mix for dY (causal entries read): dX (NH,T,T) = dY_m + sum_k D[k, m-g0(k)] dY_k
// on j <= i (overwritten there, above the diagonal untouched), dD[k, m] += <dY_k, X_{g0(k)+m}>
// over j <= i. dX must not overlap dY or X.
void mta_mix_backward(real* dX, real* dD, const real* dY, const real* X, const real* D, int gs,
                      int NH, int T);

#endif
