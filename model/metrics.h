// model/metrics.h: training diagnostics for comparing attention variants (definitions from
// VARIANTS.md §4: D1-D8, D11, D15), attention-map dumps, and the kernels behind them.
//
// Every `metrics_every` steps, after the optimizer update, a probe forward runs on a fixed batch
// (the first validation batch, or the first training batch when there is no val_data) and the
// records below go to out_dir/metrics.jsonl. Diagnostics are read-only: the probe forward only
// overwrites activations that the next training step recomputes, runs at step -1 (evaluation
// mode for stochastic variants) and the gradient norms are read before clipping without
// changing anything, so the training numerics are identical with diagnostics on or off.
//
// Conventions (a = raw attention weights of one causal row t, n = t + 1 keys):
//   p_j = |a_j| / sum_k |a_k| (identical to a for softmax-like variants). Rows with sum |a| = 0
//   have no distribution: they are skipped by every p-based statistic (and counted by sparsity).
//   entropy       mean over rows of H = -sum_j p_j ln p_j (nats, 0 ln 0 = 0); row 0 counts (H=0)
//   entropy_norm  mean over rows with n >= 2 of H / ln n (1 = uniform)
//   sink_mass     mean over rows t >= 1 of p_t0
//   max_weight    mean over rows of max_j p_tj (row 0 counts, with 1)
//   sparsity      fraction of causal entries (j <= t) with raw a_tj == 0 exactly
//   max_logit     max |s_tj| over causal entries, s = q.k/sqrt(hs) (+ the ALiBi bias when the
//                 layer uses the default pipeline), recomputed from the layer's stored qkv
//   alpha0        Gu et al.: mean over queries i < Ts = min(64, T) of p_i0, per probe sequence
//   sink_rate     fraction of (layer, head) with alpha0 > sink_eps, averaged over the sequences
//   kurtosis      per sequence over all T*C values, non-excess, unbiased std (Bondarenko et al.):
//                 mean((x - mu)^4) / (std^4 + 1e-6); averaged over the probe sequences
//   max_abs       per sequence max |x| over T*C, averaged over the probe sequences
//   massive       entries of a block output with |x| > 100 and |x| > 1000 * median |x| of that
//                 sequence's block output (Sun et al. 2024); median = the floor(N/2)-th smallest
//                 (0-based) of the N = T*C magnitudes
#ifndef ATTNLAB_METRICS_H
#define ATTNLAB_METRICS_H

#include <stddef.h>
#include <stdio.h>

#include "common/config.h"
#include "common/json.h"
#include "data/tokenizer.h"
#include "model/gpt2.h"

#define METRICS_SINK_T 64 // positions used for the sink rate (Gu et al.)
#define METRICS_DUMP_T 64 // positions of the attention dumps written during training
#define METRICS_NSITES 6  // ln_1, attn, ln_2, mlp, block, ln_f

// ---------------------------------------------------------------------------------------------
// kernels

// Running sums over attention rows of one head (merge several (T,T) matrices into one).
typedef struct {
    double ent, ent_norm, sink, maxw; // sums
    long n_rows;                      // rows with sum|a| > 0 (entropy, max_weight)
    long n_rows_norm;                 // of those, rows with n >= 2 (entropy_norm)
    long n_rows_sink;                 // rows t >= 1 with sum|a| > 0 (sink_mass)
    long n_entries, n_zero;           // causal entries, exact zeros among them (sparsity)
} AttnAccum;

typedef struct {
    double entropy, entropy_norm, sink_mass, max_weight, sparsity; // NaN when nothing counted
} AttnHeadStats;

// Add the causal rows of one (T,T) attention matrix A (row t holds keys 0..t). Returns alpha0 of
// this matrix over the first Ts rows (NaN if none of them has sum|a| > 0).
double metrics_attn_accum(AttnAccum* acc, const float* A, int T, int Ts);
void metrics_attn_finish(AttnHeadStats* out, const AttnAccum* acc);

// Fraction of alpha0[0..n) above eps (NaN counts as no sink): over (layer, head, sequence)
// entries this is the sink rate averaged over the sequences.
double metrics_sink_rate(const double* alpha0, size_t n, double eps);

// Non-excess kurtosis of x[0..n) (Bondarenko et al.; see above). n >= 2.
double metrics_kurtosis(const float* x, size_t n);
float metrics_max_abs(const float* x, size_t n);
// Massive activations in x[0..n); scratch holds n floats (only touched when some |x| > 100).
long metrics_massive_count(const float* x, size_t n, float* scratch);

// Per-head gradient norms of one layer's q, k, v: head h of q owns rows [h*hs, (h+1)*hs) of
// dqkvw (3C, C) and the same entries of dqkvb (3C); k and v are the rows C and 2C further on.
// gq, gk, gv get NH norms each.
void metrics_head_grad_norms(float* gq, float* gk, float* gv, const float* dqkvw,
                             const float* dqkvb, int C, int NH);

// ---------------------------------------------------------------------------------------------
// the diagnostics of a run

typedef struct {
    int every, dump_every; // 0 = off
    float sink_eps;
    int B, T;   // probe batch
    int* probe; // (B, T) token ids
    int nthreads;
    // gradient norms of the current metrics step (read before clipping)
    int have_grads;
    double grad_norm;
    double* tensor_norm; // (nspecs, L): per tensor per layer (unstacked tensors in column 0)
    float *gq, *gk, *gv; // (L, NH)
    // scratch
    float* tbuf; // per thread: S (T*T) | key_sq (T) | row scratch
    size_t tbuf_per;
    float* massive_buf; // per thread T*C
    JsonBuf j;
} Metrics;

// Read the probe batch (val_data's first batch with eval_seq_len, else train_data's first) and
// allocate scratch. Does nothing (mt->every = mt->dump_every = 0) when both intervals are 0.
// 0, or -1 with err (unreadable data, token id >= vocab_size).
int metrics_init(Metrics* mt, const GPT2* m, const Config* c, int nthreads, char* err,
                 size_t errcap);
void metrics_free(Metrics* mt);

// Whether `step` (completed optimizer steps) is a metrics / dump step; last = final step.
int metrics_due(const Metrics* mt, long step, int last);
int metrics_dump_due(const Metrics* mt, long step, int last);

// Gradient norms (per tensor per layer, per head q/k/v) of the current gradients, which must not
// be clipped yet; global_norm is the pre-clip global norm the loop computed.
void metrics_grads(Metrics* mt, const GPT2* m, double global_norm);

// Probe forward, then every record of `step`: head, model, act, param (and grad if metrics_grads
// ran for this step) to jsonl, headline `s:STEP key:value` lines to log (either may be NULL),
// and, if dump is set, the attention dump out_dir/attn/step_XXXXXXXX.{npy,json}.
// Returns 0, or -1 with err if writing the dump failed.
int metrics_probe(Metrics* mt, GPT2* m, long step, int records, int dump, const Tokenizer* tok,
                  const char* out_dir, FILE* jsonl, FILE* log, char* err, size_t errcap);

// ---------------------------------------------------------------------------------------------
// attention maps

// From the last forward of m: PREFIX.npy, shape (nl, nh, T, T), the weights of sequence b for
// the listed layers and heads over the first T positions (exact causal weights, zeros above the
// diagonal; fp32 or fp16), and PREFIX.json with the token ids and strings (tokens[0..T), strings
// null without a tokenizer), the layer and head indices, the variant spec, step and source.
int metrics_write_attention(const GPT2* m, const char* prefix, int b, int T, const int* layers,
                            int nl, const int* heads, int nh, int fp16, const int* tokens,
                            const Tokenizer* tok, long step, const char* source, char* err,
                            size_t errcap);

#endif
