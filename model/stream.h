// model/stream.h: streaming evaluation with a bounded key/value cache, after StreamingLLM (Xiao et
// al., "Efficient Streaming Language Models with Attention Sinks", arXiv 2309.17453). A long token
// sequence runs through the model one token at a time and the next-token loss is scored at every
// position, under one of three policies (docs/streaming.md):
//   window     the cache keeps the last W tokens (the current one included): the first ones are
//              evicted as the text goes on;
//   sinks      it also keeps the first S tokens (the attention sinks): S + W tokens at most;
//   recompute  no cache: each position's logits come from a full forward over its last W tokens
//              (the sliding window with recompute baseline).
// Positions are indices in the cache (0..n-1 over the tokens it holds, the sinks first), not in
// the text, as StreamingLLM re-indexes them: under rope the keys are stored un-rotated and rotated
// at their cache index every step; alibi, fire and xpos read the cache index; learned positions
// index wpe with the cache slot a token is appended at (its cached states keep that row).
#ifndef ATTNLAB_STREAM_H
#define ATTNLAB_STREAM_H

#include <stddef.h>
#include <stdio.h>

#include "model/gpt2.h"

typedef struct {
    int window;    // W >= 1: the last W tokens, the current one included
    int sinks;     // S >= 0: the first S tokens kept besides the window (not with recompute)
    int recompute; // 1: a full forward over the last W tokens per position, no cache
} StreamPolicy;

// "window", "sinks" or "recompute".
const char* stream_policy_name(const StreamPolicy* p);
// 0 when m can stream under p; else -1 with the reason in err, naming the option (--window,
// --sinks, --recompute) or the variant the cache cannot serve.
int stream_check(const GPT2* m, const StreamPolicy* p, char* err, size_t cap);
// The next-token loss (nats) at every position: losses[i] = -log p(tokens[i + 1] | the context p
// leaves at position i), i = 0..n-2. Token ids must be < vocab_size; p must pass stream_check;
// m's activations must hold (1, S + W) (gpt2_alloc_acts). m->step is restored.
void stream_losses(GPT2* m, const StreamPolicy* p, const int* tokens, int n, float* losses);

// Per bucket of `bucket` positions (position i of losses is in bucket i / bucket): the CSV
//   policy,window,sinks,first,last,tokens,loss,perplexity
// one row per bucket (first..last the positions it covers, loss the mean in nats, perplexity
// exp(loss)). 0, or -1 with err naming the path on any failed write.
int stream_write_csv(const char* path, const StreamPolicy* p, const float* losses, int n,
                     int bucket, char* err, size_t cap);
// The same buckets as a table on f (stdout of ./evaluate --stream).
void stream_print_buckets(FILE* f, const float* losses, int n, int bucket);

#endif
