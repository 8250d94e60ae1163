// model/sample.h: text generation from a GPT2 (temperature and top-k sampling), and the text of
// a sample as ./generate and the trainer print it.
#ifndef ATTNLAB_SAMPLE_H
#define ATTNLAB_SAMPLE_H

#include <stddef.h>
#include <stdio.h>

#include "common/rng.h"
#include "model/gpt2.h"

// Extend ids[0..n_prompt) by up to max_new tokens (ids must hold n_prompt + max_new), running a
// forward over the last m->T tokens for each new token. temperature <= 0 means greedy; top_k 0
// means the full vocabulary. Stops early at `stop_id` if >= 0. Returns the new total length.
// Overwrites the model's activations.
int gpt2_generate(GPT2* m, int* ids, int n_prompt, int max_new, float temperature, int top_k,
                  int stop_id, Rng* rng);

// gpt2_generate decoding with a key/value cache (model/kv_cache.h): each new token costs one
// position's forward while the sequence fits the cache (kv_cache_capacity, at most m->T); past
// it, each token re-runs the forward over the last m->T tokens as gpt2_generate does (the window
// slides, so every position of it changes). The same tokens as gpt2_generate up to the matmul
// library's rounding of one-row products (docs/configuration.md, "Generation: the key/value
// cache"). kv NULL: gpt2_generate. The cache is reset first.
typedef struct KVCache KVCache;
int gpt2_generate_cached(GPT2* m, KVCache* kv, int* ids, int n_prompt, int max_new,
                         float temperature, int top_k, int stop_id, Rng* rng);

// What a sample shows where a document ends (the end-of-text token), instead of the token's
// own text ("<|endoftext|>" for GPT-2).
#define SAMPLE_DOC_BREAK "\n--- end of document ---\n"

// The bytes of token `id` (NULL when it has none); ctx is the caller's tokenizer.
typedef const unsigned char* (*SampleTokenBytes)(const void* ctx, int id, size_t* len);

// Write ids[0..n) to f: each token's bytes, or with bytes == NULL the ids as numbers ("ID ");
// the end-of-text id `eot` as SAMPLE_DOC_BREAK, unless raw (then as its own bytes, or its
// number). 0, or -1 when a write failed.
int sample_write(FILE* f, const int* ids, int n, int eot, SampleTokenBytes bytes, const void* ctx,
                 int raw);

#endif
