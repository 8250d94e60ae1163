// attention/deltanet_chunk.h: the chunked (WY / UT-transform) form of the gated delta rule, for
// one (batch, head) sequence; used by attention/deltanet.c (math in deltanet_chunk.c).
#ifndef ATTNLAB_DELTANET_CHUNK_H
#define ATTNLAB_DELTANET_CHUNK_H

#include <stddef.h>

#include "attention/real.h"

typedef struct {
    int T, hs;        // sequence length, key size (and value size when v is given)
    const real* q;    // (T, hs) normalised queries, contiguous
    const real* k;    // (T, hs) normalised keys, contiguous
    const real* v;    // (T, dv) values at row stride ldv, or NULL: v_t = e_t (dv = T)
    size_t ldv;       // row stride of v (and of dv in the backward)
    int dv;           // value width: hs when v is given, T when v is NULL
    const real* beta; // (T) write strengths
    const real* la;   // (T) log alpha_t, or NULL (alpha = 1)
} DnSeq;

// floats of scratch for dn_chunk_forward / dn_chunk_backward at chunk size C
size_t dn_chunk_fwd_floats(int T, int hs, int dv, int C);
size_t dn_chunk_bwd_floats(int T, int hs, int C);

// o (T, dv) at row stride ldo = the outputs o_t = S_t q_t, chunk by chunk (C >= 1)
void dn_chunk_forward(const DnSeq* s, int C, real* o, size_t ldo, real* scratch);

// Given dO (T, hs) at row stride ldo: dq, dk (T, hs) contiguous (+=, gradients of the normalised
// q, k), dv (+=, row stride s->ldv), dbeta and dla (T, overwritten). v must be given.
void dn_chunk_backward(const DnSeq* s, int C, const real* dO, size_t ldo, real* dq, real* dk,
                       real* dv, real* dbeta, real* dla, real* scratch);

#endif
