// model/kv_cache.h: incremental decoding. A KVCache holds every layer's keys and values of the
// positions decoded so far, so that each new token costs one position's forward (its embedding,
// projections, MLP and logits) plus one attention row over the cached keys, instead of a forward
// over the whole prefix. The result is the full forward's, with the same arithmetic for every
// position-wise operation and the driver's score row (attention/decode.c); the matmul library may
// still order a one-row product's sums differently from a many-row one (docs/configuration.md,
// "Generation: the key/value cache").
//
// Keys are cached after the position encoding where it does not depend on the call length:
// rotated under rope, raw under xpos (whose scale is centred on the call: every step rotates the
// cached keys again, as the full forward would), as they are under learned / alibi / none / fire.
// Only layers whose variant is a row map cache (attn_decode_exact): kv_cache_supported says why
// a model cannot, and decoding then recomputes the prefix (model/sample.h).
//
// This file builds a cache for a model and steps it; the storage and the attention of one layer
// over it are model/kv_store.h (which the model's forward uses, so that the dependencies run one
// way: kv_cache -> gpt2 -> kv_store).
#ifndef ATTNLAB_KV_CACHE_H
#define ATTNLAB_KV_CACHE_H

#include <stddef.h>

#include "model/gpt2.h"
#include "model/kv_store.h"

// 1 when every layer of m can decode from a cache; else 0 with the reason in why (naming the
// first layer and variant that cannot).
int kv_cache_supported(const GPT2* m, char* why, size_t cap);
// A cache for up to T positions (T <= the model's activation length m->T, allocated for B >= 1).
// m must be kv_cache_supported. Freed with kv_cache_free (model/kv_store.h, with the cache's
// length, capacity, reset and eviction).
KVCache* kv_cache_new(const GPT2* m, int T);
// Bytes kv_cache_new(m, T) takes (the memory estimate; m kv_cache_supported, its activations
// allocated: m->nthreads): keys and values (n_layer, T, n_embd) each, the query, the rotated keys
// under xpos, the attention scratch, each buffer as real_alloc rounds it, and the struct itself.
double kv_cache_model_bytes(const GPT2* m, int T);

// Append `token` at position kv_cache_len(kv) (< capacity) and return its logits (padded_vocab
// floats, valid until the next forward of m). Overwrites the model's activations of position 0.
const float* kv_cache_step(GPT2* m, KVCache* kv, int token);

// ---- streaming with eviction (model/stream.h): positions are indices in the cache
// A cache like kv_cache_new's whose positions may be evicted (kv_cache_evict). Under rope its keys
// are stored before the rotation and every step rotates all of them at their current cache index
// 0..n-1 (the query at n - 1), so a key moves to its new index when earlier ones are evicted (xpos
// keys are already rotated per step; alibi and fire biases read the cache index). Learned
// positions enter the residual stream before the first layer: a cached key or value keeps the wpe
// row of the index it was appended at.
KVCache* kv_cache_new_stream(const GPT2* m, int T);

#endif
