// model/sample.h: text generation from a GPT2 (temperature and top-k sampling).
#ifndef ATTNLAB_SAMPLE_H
#define ATTNLAB_SAMPLE_H

#include "common/rng.h"
#include "model/gpt2.h"

// Extend ids[0..n_prompt) by up to max_new tokens (ids must hold n_prompt + max_new), running a
// forward over the last m->T tokens for each new token. temperature <= 0 means greedy; top_k 0
// means the full vocabulary. Stops early at `stop_id` if >= 0. Returns the new total length.
// Overwrites the model's activations.
int gpt2_generate(GPT2* m, int* ids, int n_prompt, int max_new, float temperature, int top_k,
                  int stop_id, Rng* rng);

#endif
