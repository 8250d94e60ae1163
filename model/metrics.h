// model/metrics.h: training diagnostics for comparing attention variants (definitions from
// VARIANTS.md §4: D1-D8, D11, D15), attention-map dumps, and the kernels behind them.
//
// Every `metrics_every` steps, after the optimizer update, a probe forward runs on a fixed set
// of probe sequences (`probe_sequences` windows spread evenly over the validation split, built
// by the trainer with data/dataloader.h's dataloader_spread_tokens and handed in), in chunks of the
// model's activation batch, and the records below go to out_dir/metrics.jsonl. Which statistics
// they hold, how each is collected and aggregated, and which go to main.log is the table of
// model/metrics_table.h. Diagnostics are
// read-only: the probe forward only overwrites activations that the next training step recomputes,
// runs at step -1 (evaluation mode for stochastic variants) and the gradient norms are read before
// clipping without changing anything, so the training numerics are identical with diagnostics on or
// off.
//
// Conventions (a = raw attention weights of one causal row t, n = t + 1 keys); the full
// definitions, with what is reported for rows that do not sum to 1, are in docs/diagnostics.md:
//   p_j = |a_j| / sum_k |a_k| (identical to a for softmax-like variants). Rows with sum |a| = 0
//   have no distribution: they are skipped by every p-based statistic (and counted by sparsity).
//   entropy       mean over rows of H = -sum_j p_j ln p_j (nats, 0 ln 0 = 0); row 0 counts (H=0)
//   entropy_norm  mean over rows with n >= 2 of H / ln n (1 = uniform)
//   sink_mass     mean over rows t >= 1 of p_t0;  sink_mass_raw: of a_t0 over every row t >= 1
//   max_weight    mean over rows of max_j p_tj (row 0 counts, with 1)
//   sparsity      fraction of causal entries (j <= t) with raw a_tj == 0 exactly
//   max_logit     max |s_tj| over causal entries, s = q.k/sqrt(hs) (+ the ALiBi bias when the
//                 layer uses the default pipeline), recomputed from the layer's stored qkv
//   alpha0        Gu et al., per probe sequence over the queries i < Ts = min(64, T):
//                 renormalised = mean of p_i0 over the rows with sum|a| > 0;
//                 raw = mean of a_i0 over all Ts rows (an all-zero row counts 0)
//   sink rate     fraction of (layer, head, sequence) with alpha0 > sink_eps (raw / renorm)
//   kurtosis      per sequence over all T*C values, non-excess, unbiased std (Bondarenko et al.):
//                 mean((x - mu)^4) / (std^4 + 1e-6); averaged over the probe sequences
//   max_abs       per sequence max |x| over T*C, averaged over the probe sequences
//   massive       entries of a block output with |x| > 100 and |x| > 1000 * median |x| of that
//                 sequence's block output (Sun et al. 2024); median = the floor(N/2)-th smallest
//                 (0-based) of the N = T*C magnitudes
//   massive_ratio per sequence max |x| / median |x| (same median), averaged over the sequences
//   log_z_mean, log_z_max  over every probe position, of log Z = ln sum_v exp(logit_v), the
//                 log-partition of the output logits over the real vocabulary (Wortsman et al.
//                 2023's output-logit divergence: z-loss pushes it to 0); in the "model" record
//   route max_weight (D11; residual = attnres | delta_attnres only): per sublayer, the mean
//                 over probe positions of max_i alpha_{i->s}, the largest depth-routing weight
#ifndef ATTNLAB_METRICS_H
#define ATTNLAB_METRICS_H

#include <stddef.h>
#include <stdio.h>

#include "common/json.h"
#include "model/gpt2.h"

// The text of token ids, for the attention dumps' token strings: bytes(ctx, id, &len) returns
// the token's bytes (not NUL-terminated) or NULL. The caller adapts its tokenizer (train.c and
// ./attnmap wrap data/tokenizer.h's tokenizer_token_bytes); NULL everywhere = no strings.
typedef struct {
    const unsigned char* (*bytes)(const void* ctx, int id, size_t* len);
    const void* ctx;
} TokenText;

#define METRICS_SINK_T    64 // positions used for the sink rate (Gu et al.)
#define METRICS_DUMP_T    64 // positions of the attention dumps written during training
#define METRICS_NSITES    6  // ln_1, attn, ln_2, mlp, block, ln_f
#define METRICS_MAX_SLOTS 16 // collected quantities of one kind (model/metrics_table.h)

// ---------------------------------------------------------------------------------------------
// kernels

// Running sums over attention rows of one head (merge several (T,T) matrices into one).
typedef struct {
    double ent, ent_norm, sink, sink_raw, maxw; // sums
    long n_rows;                                // rows with sum|a| > 0 (entropy, max_weight)
    long n_rows_norm;                           // of those, rows with n >= 2 (entropy_norm)
    long n_rows_sink;                           // rows t >= 1 with sum|a| > 0 (sink_mass)
    long n_rows_sink_raw;                       // rows t >= 1 (sink_mass_raw)
    long n_entries, n_zero;                     // causal entries, exact zeros among them
} AttnAccum;

typedef struct {
    double entropy, entropy_norm, sink_mass, sink_mass_raw, max_weight, sparsity; // NaN: none
} AttnHeadStats;

typedef struct {
    double raw, renorm; // alpha0 of one (T,T) matrix; NaN when no row counted
} MetricsAlpha0;

// Add the causal rows of one (T,T) attention matrix A (row t holds keys 0..t). Returns alpha0 of
// this matrix over the first Ts rows, raw and renormalised.
MetricsAlpha0 metrics_attn_accum(AttnAccum* acc, const float* A, int T, int Ts);
void metrics_accum_add(AttnAccum* a, const AttnAccum* b);
void metrics_attn_finish(AttnHeadStats* out, const AttnAccum* acc);

// Fraction of alpha0[0..n) above eps (NaN counts as no sink): over (layer, head, sequence)
// entries this is the sink rate averaged over the sequences.
double metrics_sink_rate(const double* alpha0, size_t n, double eps);

// Non-excess kurtosis (Bondarenko et al.; see above) of x[0..n), n >= 2, or of the rows x n
// matrix x with row stride ld (e.g. one head's channels of a (T, C) tensor).
double metrics_kurtosis(const float* x, size_t n);
double metrics_kurtosis_2d(const float* x, size_t rows, size_t cols, size_t ld);
float metrics_max_abs(const float* x, size_t n);
// Massive activations in x[0..n) (scratch holds n floats): returns max|x| / median|x| (INFINITY
// when the median is 0 and some x != 0, NaN when all are 0 or any is NaN) and, if count is
// given, the number of entries with |x| > 100 and |x| > 1000 * median|x|.
double metrics_massive(const float* x, size_t n, float* scratch, long* count);
long metrics_massive_count(const float* x, size_t n, float* scratch);

// Per-head gradient norms of one layer's q, k, v: head h of q owns rows [h*hs, (h+1)*hs) of
// dqkvw (3C, C) and the same entries of dqkvb (3C); k and v are the rows C and 2C further on.
// gq, gk, gv get NH norms each.
void metrics_head_grad_norms(float* gq, float* gk, float* gv, const float* dqkvw,
                             const float* dqkvb, int C, int NH);

// ---------------------------------------------------------------------------------------------
// the diagnostics of a run

typedef struct {
    int every, dump_every; // intervals in steps, 0 = off
    float sink_eps;        // sink threshold on alpha0 (Gu et al.: 0.3)
    const int* tokens;     // (nseq, T) probe token ids (copied by metrics_init)
    int nseq, T;
    int nthreads;
} MetricsSetup;

typedef struct {
    int every, dump_every; // 0 = off
    float sink_eps;
    int nseq, T; // probe sequences
    int* probe;  // (nseq, T) token ids
    int chunk;   // sequences per probe forward (<= the model's activation batch)
    int nthreads;
    int L, NH, nspecs;
    // gradient norms of the current metrics step (read before clipping)
    int have_grads;
    double grad_norm;
    // the collected quantities of the current metrics step (model/metrics_table.h), all in one
    // allocation `store`: per per-sequence slot (its units x nseq; the head slots of
    // MetricSeqSlot, then one per act row: metrics_row_slot) at seq_off[slot], per
    // slot of MetricRunSlot (its units) at run_off[slot]
    double* store;
    size_t seq_off[METRICS_MAX_SLOTS], run_off[METRICS_MAX_SLOTS];
    AttnAccum* acc;      // (L, NH, nseq) the attention rows of each head and sequence
    double* grad_head;   // (3, L, NH) per head q, k, v gradient norms
    double* grad_tensor; // (nspecs, L): per tensor per layer (unstacked tensors in column 0)
    float* logz;         // (chunk, T) log Z of the positions of one probe forward
    int collected;       // probe sequences collected so far
    // scratch
    void* items; // per (b, h) of one chunk
    float* tbuf; // per thread: S (T*T) | key_sq (T) | row scratch
    size_t tbuf_per;
    float* act_scratch; // per thread T*C (the act kernels' MetricActCtx.scratch)
    JsonBuf j;
} Metrics;

// Copy the probe tokens and allocate scratch. Does nothing (mt->every = mt->dump_every = 0) when
// both intervals are 0. 0, or -1 with err (token id >= vocab_size, T > the model's activation
// length, no sequences). The model's activations must be allocated.
int metrics_init(Metrics* mt, const GPT2* m, const MetricsSetup* s, char* err, size_t errcap);
void metrics_free(Metrics* mt);

// Whether `step` (completed optimizer steps) is a metrics / dump step; last = final step.
int metrics_due(const Metrics* mt, long step, int last);
int metrics_dump_due(const Metrics* mt, long step, int last);

// Gradient norms (per tensor per layer, per head q/k/v) of the current gradients, which must not
// be clipped yet; global_norm is the pre-clip global norm the loop computed.
void metrics_grads(Metrics* mt, const GPT2* m, double global_norm);

// Where the first non-finite gradient is, for the trainer's message: "gradient of tensor NAME
// (layer L)", or "the loss (all gradients finite)".
void metrics_describe_nonfinite(const GPT2* m, char* out, size_t cap);

// Probe forward over all probe sequences, then every record of `step`: head, model, act, param
// (and grad if metrics_grads ran for this step) to jsonl, headline `s:STEP key:value` lines to
// log (either may be NULL), and, if dump is set, the attention dump
// out_dir/attn/step_XXXXXXXX.{npy,json} of the first probe sequence.
// Returns 0, or -1 with err if writing the dump failed.
int metrics_probe(Metrics* mt, GPT2* m, long step, int records, int dump, const TokenText* tok,
                  const char* out_dir, FILE* jsonl, FILE* log, char* err, size_t errcap);

// The two halves of metrics_probe's records, for callers that run the forward themselves:
// metrics_collect adds the statistics of the model's last forward (m->cur_B sequences, taken as
// probe sequences b0 .. b0 + cur_B - 1; b0 = 0 starts a new step), metrics_write writes the
// records of everything collected since.
void metrics_collect(Metrics* mt, const GPT2* m, int b0);
void metrics_write(Metrics* mt, const GPT2* m, long step, FILE* jsonl, FILE* log);

// ---------------------------------------------------------------------------------------------
// attention maps

// From the last forward of m: PREFIX.npy, shape (nl, nh, T, T), the weights of sequence b for
// the listed layers and heads over the first T positions (exact causal weights, zeros above the
// diagonal; fp32 or fp16), and PREFIX.json with the token ids and strings (tokens[0..T), strings
// null where tok (or tok->bytes) is NULL or gives none), the layer and head indices, the variant
// spec, step and source.
int metrics_write_attention(const GPT2* m, const char* prefix, int b, int T, const int* layers,
                            int nl, const int* heads, int nh, int fp16, const int* tokens,
                            const TokenText* tok, long step, const char* source, char* err,
                            size_t errcap);

#endif
