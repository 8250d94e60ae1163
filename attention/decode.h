// attention/decode.h: incremental decoding of one new position over cached keys and values
// (attention/decode.c), for the key/value cache of model/kv_cache.c.
#ifndef ATTNLAB_ATTENTION_DECODE_H
#define ATTNLAB_ATTENTION_DECODE_H

#include <stddef.h>

#include "attention/layer.h"

// ---- incremental decoding (attention/decode.c; model/kv_cache.c keeps the cache)
// 1 when the variant's output at a new position can be computed from cached keys and values with
// the same arithmetic as the full forward: the row maps (weights a function of the position's
// own masked score row; the stochastic ones draw nothing at evaluation, step < 0), except a row
// map that reads key norms (needs_key_sq) under xpos: xPos centres its key scale on the call's
// length, so |k_j|^2, and every earlier position's output, depends on how long the sequence is.
// 0 for the layer-level variants (layer_forward): gates and scales from the block input, mixes
// across heads or score positions, recurrent memories; decoding recomputes the prefix for them.
int attn_decode_exact(const AttnVariant* v, int pos_encoding);
typedef struct {
    const real* q; // (C) the query of position n - 1, rotated under rope / xpos
    const real* k; // key j at k + j*ld (C channels, rotated under rope / xpos), j < n
    const real* v; // value j at v + j*ld
    size_t ld;
    int n;         // positions so far, the new one included
    real* out;     // (C) head outputs of the new position (overwritten)
    real* scratch; // attn_decode_scratch_floats(row, T, NH, nthreads) reals
} AttnDecode;
size_t attn_decode_scratch_floats(const AttnVariant* row, int T, int NH, int nthreads);
// L: the layer as the model builds it (variant, row map, hyperparameters, row parameters, FIRE
// parameters, step, seed, layer, pos_encoding, d.NH/hs/C); T the longest n it will see.
void attn_decode_forward(const AttnLayer* L, const AttnDecode* s, int T, int nthreads);

#endif
