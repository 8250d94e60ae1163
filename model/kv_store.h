// model/kv_store.h: the storage of the key/value cache and the attention of one layer over it,
// knowing nothing of the model (model/kv_cache.h builds a cache for a GPT2 and steps it; the
// model's forward calls kv_cache_attend in place of attention_forward). A KVCache holds every
// layer's keys and values of the positions decoded so far, in the layout model/kv_cache.h
// describes.
#ifndef ATTNLAB_KV_STORE_H
#define ATTNLAB_KV_STORE_H

#include <stddef.h>

#include "attention/attention.h"

typedef struct KVCache KVCache;

// The sizes of a cache: n_layer layers of n_embd channels in n_head heads, up to T positions,
// under position encoding pos (ATTN_POS_*), decoding on nthreads threads with scratch_floats
// reals of attention scratch (attn_decode_scratch_floats of the layers' largest row map).
// reposition: rope keys stored unrotated and rotated at their cache index every step (streaming
// with eviction); ignored under other encodings.
typedef struct KVStoreShape {
    int n_layer, n_embd, n_head, T, pos, nthreads, reposition;
    size_t scratch_floats;
} KVStoreShape;

KVCache* kv_store_new(const KVStoreShape* s);
// Bytes kv_store_new(s) takes, each buffer as real_alloc rounds it, and the struct (the rotated
// keys counted under xpos).
double kv_store_bytes(const KVStoreShape* s);

void kv_cache_free(KVCache* kv);  // NULL is a no-op
void kv_cache_reset(KVCache* kv); // forget every position
int kv_cache_len(const KVCache* kv);
int kv_cache_capacity(const KVCache* kv);
// Drop the `count` positions from index `from` (from + count <= kv_cache_len): the later ones
// move down by count in every layer.
void kv_cache_evict(KVCache* kv, int from, int count);

// One step: kv_store_push keeps `token` for the position kv_cache_len(kv) (< capacity) and
// returns a pointer to it that stays valid until the next push (the model's forward keeps it);
// after the forward, kv_store_commit counts the position as cached.
const int* kv_store_push(KVCache* kv, int token);
void kv_store_commit(KVCache* kv);
// Layer al's attention at position kv_cache_len(kv): caches its key and value and writes al->out
// (1 row), as attention_forward over the whole prefix would (attention/decode.c).
void kv_cache_attend(KVCache* kv, const AttnLayer* al);

#endif
