// tests/model_util.h: small models and synthetic data shared by the model-level suites.
#ifndef ATTNLAB_MODEL_UTIL_H
#define ATTNLAB_MODEL_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "common/rng.h"
#include "model/gpt2.h"

// Defaults with the given sizes: vocabulary V, L layers, NH heads, width C, block and sequence T,
// batch 2.
void test_tiny_config(Config* c, int V, int L, int NH, int C, int T);
// Attention setup, build, init from `seed` and activations for (B, T); fails the test on error.
void test_build_model(GPT2* m, const Config* c, int B, int T, uint64_t seed);
// n token ids uniform in [0, V).
void test_random_tokens(int* x, int n, int V, Rng* r);
// DIR/train_000.bin and DIR/val_000.bin: a learnable stream, a random sequence of `period` tokens
// below V repeated, ntrain and nval tokens.
void test_write_shards(const char* dir, int V, int period, size_t ntrain, size_t nval);

// Train on config c with the trainer built beside the suites (BUILD/train), as a subprocess: c
// is written with config_write to OUT.conf (OUT = c->out_dir) and run as `BUILD/train OUT.conf`,
// its stdout and stderr going to OUT.stdout.txt and OUT.stderr.txt. Returns the exit code (128 +
// signal if killed); *stderr_text (if given) gets the stderr text (malloc'd).
int test_train(const Config* c, char** stderr_text);

#endif
