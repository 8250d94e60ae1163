// attention/linear_features.h: the feature maps phi of causal linear attention
// (attention/linear.c), applied to one vector of a head (or, for FLatten's focused map, of a
// group of channels), with their vector-Jacobian products. The maths of every map, its source
// and its backward are in the header comment of attention/linear_features.c.
#ifndef ATTNLAB_LINEAR_FEATURES_H
#define ATTNLAB_LINEAR_FEATURES_H

#include <stddef.h>

#include "attention/real.h"

// attn.feature, in the order of its choice words
enum {
    F_ELU1,
    F_RELU,
    F_COSFORMER,
    F_HEDGEHOG,
    F_GALERKIN,
    F_FLATTEN,
    F_PERFORMER,
    F_COSINE,
    F_SLAY,
    F_IDENTITY
};
// internal maps: galerkin's q (identity, also attn.feature = identity) and k, v (LayerNorm)
enum { F_IDENT = 100, F_LNORM };

#define GAL_LN_EPS ((real)1e-5)
#define FL_P       3            // FLatten focusing factor p
#define FL_K       5            // FLatten causal depthwise kernel length
#define FL_EPS     ((real)1e-6) // FLatten: r = relu(x) + eps keeps the norms nonzero
#define COS_EPS    ((real)1e-6) // cottention, slay: x^ = x / sqrt(|x|^2 + eps)

// dx += J^T dy of lf_forward (y its output); dW += the hedgehog weight gradient; du: hs scratch
void lf_backward(real* dx, real* dW, const real* dy, const real* y, const real* x, int hs, int kind,
                 const real* W, real* du);

// The backward of the Performer FAVOR+ features y (m) = exp(W x' - |x'|^2 / 2) / sqrt(m),
// x' = x / hs^(1/4), W (m, hs): dx += J^T dy.
void lf_perf_backward(real* dx, const real* dy, const real* y, const real* x, int hs, int m,
                      const real* W);

// features of the T rows of one (b,h) head view x (row stride ld) into Phi (T, F); kind is a
// role kind (F_IDENT, F_LNORM, F_COSINE, ...; F_PERFORMER with W its random features)
void lf_rows(real* Phi, const real* x, size_t ld, int T, int hs, int F, int kind, const real* W,
             real* u);

// FLatten's focused map over a group of n channels: with r = relu(x) + FL_EPS,
// phi(x) = |r| r^p / |r^p| (norms over the group). lf_flatten_factor returns f = |r| / |r^p|
// of x (n); lf_flatten_rows writes Phi_t,i = r_t,i^p f_t for the T rows of one head's hs
// channels (row stride ld), f_t = fac[t * fac_stride].
real lf_flatten_factor(const real* x, int n);
void lf_flatten_rows(real* Phi, const real* x, size_t ld, int T, int hs, const real* fac,
                     size_t fac_stride);
// dx (n) += J^T dy of phi over the group x (n), phi recomputed from x
void lf_flatten_backward(real* dx, const real* dy, const real* x, int n);

// the spherical Yat kernel kappa(c) = c^2 / (2 - 2c + e) of a cosine c, and kappa'(c)
static inline real lf_yat_k(real c, real e) {
    return c * c / (2.0f - 2.0f * c + e);
}
static inline real lf_yat_dk(real c, real e) {
    const real den = 2.0f - 2.0f * c + e;
    return (2.0f * c * den + 2.0f * c * c) / (den * den);
}

#endif
