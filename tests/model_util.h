// tests/model_util.h: small models and synthetic data shared by the model-level suites.
#ifndef ATTNLAB_MODEL_UTIL_H
#define ATTNLAB_MODEL_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "common/rng.h"
#include "model/gpt2.h"
#include "model/run/memory.h"
#include "optim/optim.h"

// Defaults with the given sizes: vocabulary V, L layers, NH heads, width C, block and sequence T,
// batch 2.
void test_tiny_config(Config* c, int V, int L, int NH, int C, int T);
// Attention setup, build, init from `seed` and activations for (B, T); fails the test on error.
void test_build_model(GPT2* m, const Config* c, int B, int T, uint64_t seed);
// The same with activations for `nthreads` threads (test_build_model: omp_get_max_threads()).
void test_build_model_threads(GPT2* m, const Config* c, int B, int T, int nthreads, uint64_t seed);
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
// test_train that must succeed: fails the test with the exit code and the trainer's stderr
// unless it exits 0.
void test_train_ok(const Config* c);

// The short run of the training suites: test_tiny_config(V, 2 layers, 2 heads, 32 wide, T = 32)
// with batch 4 on DIR/train_*.bin and DIR/val_*.bin (test_write_shards), out_dir DIR/OUT, lr
// 3e-3 -> 3e-4 after 5 warmup steps, eval_steps 2, no samples, 2 threads, the byte tokenizer.
// The caller sets max_steps, eval_every, log_every and anything else it tests.
void test_run_config(Config* c, const char* dir, const char* out, int V);

// train_loss of every training record of OUT_DIR/metrics.jsonl in order (at most cap), and in
// *last_val (if given) the last val_loss. Returns the count of training records.
int test_read_losses(const char* out_dir, double* losses, int cap, double* last_val);
// A run that learns: c trains its max_steps (3..64) with test_train_ok; every training loss is
// finite and the mean of the last three is more than 0.3 below that of the first three (`what`
// names the case). Returns the last val_loss (NAN without one).
double test_expect_learns(const Config* c, const char* what);
// Resume is exact: `a` trains its max_steps (<= 64) straight; the same run into out_dir
// `resumed`, with a checkpoint every max_steps / 2 steps, loses its final checkpoint, is resumed
// from the middle one and trains to the end. Both must have max_steps training records with the
// same losses bit for bit (`what` names the case). *val_a, *val_b (if given) get the runs' last
// val_loss (NAN without one).
void test_expect_resume_exact(const Config* a, const char* resumed, const char* what, double* val_a,
                              double* val_b);

// One-call forms of library calls that only the suites make:
// llm.c's file into a built model (llmc_read_config, then llmc_load_params); 0 or -1 with err.
int llmc_load(GPT2* m, const char* path, char* err, size_t errcap);
// An optimizer step with nothing fused (optim_step_fused with f = NULL: grads only read).
void optim_step(Optimizer* o, float* params, const float* grads, const OptimRange* ranges,
                int nranges, float lr, const OptimHParams* h);
// Scale g by grad_clip_scale(norm, max_norm) (optim/clip.h); returns the scale (1: g untouched).
float grad_clip(float* g, size_t n, double norm, float max_norm);

// Library functions that only the suites use:
// Compare two configs key by key, attn.* keys included (their order and origin are ignored).
// Returns the number of differing keys; `what` gets the first, e.g. "lr: '0.001' vs '0.002'".
int config_diff(const Config* a, const Config* b, char* what, size_t cap);
// memory_estimate for a run's config c: a model whose attention is set up from c
// (gpt2_setup_attention) stands in for the one setup will build, nothing else is allocated. 0, or
// -1 with err when c's attention cannot be set up.
int memory_estimate_config(MemEstimate* e, const Config* c, const GPT2Config* g, int B, int T,
                           int state_per_param, MMPrecision prec, int nthreads, char* err,
                           size_t errcap);

#endif
