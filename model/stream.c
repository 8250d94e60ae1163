// model/stream.c: streaming evaluation with cache eviction (model/stream.h), after StreamingLLM
// (Xiao et al., arXiv 2309.17453). The cache policies follow the authors' code
// (mit-han-lab/streaming-llm): streaming_llm/kv_cache.py keeps the first start_size and the last
// recent_size positions of every layer's keys and values; streaming_llm/pos_shift/modify_llama.py
// caches keys before RoPE and rotates them at their index in the cache; examples/eval_long_ppl.py
// scores one token at a time through that cache. Differences: here W counts the current token
// (the attention of a position spans at most S + W tokens, so S + W <= block_size), where the
// authors' cache holds start + recent past tokens and the current one comes on top; the eviction
// runs before a step, when the cache is full, rather than after it.
#include "model/stream.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "model/kv_cache.h"

const char* stream_policy_name(const StreamPolicy* p) {
    return p->recompute ? "recompute" : p->sinks > 0 ? "sinks" : "window";
}

int stream_check(const GPT2* m, const StreamPolicy* p, char* err, size_t cap) {
    const int bs = m->cfg.block_size;
    if (p->window < 1) {
        snprintf(err, cap, "--window %d: the window must hold at least 1 token", p->window);
        return -1;
    }
    if (p->sinks < 0) {
        snprintf(err, cap, "--sinks %d: must be >= 0", p->sinks);
        return -1;
    }
    if (p->recompute && p->sinks > 0) {
        snprintf(err, cap,
                 "--recompute takes no --sinks: the baseline recomputes the last --window tokens");
        return -1;
    }
    if ((long)p->window + p->sinks > bs) {
        snprintf(err, cap,
                 "--window %d + --sinks %d = %ld tokens do not fit the model's block_size = %d "
                 "(every position the attention sees needs a position below block_size)",
                 p->window, p->sinks, (long)p->window + p->sinks, bs);
        return -1;
    }
    if (!p->recompute) {
        char why[256];
        if (!kv_cache_supported(m, why, sizeof(why))) {
            snprintf(err, cap,
                     "--stream: %s; the cache cannot serve this model (--recompute, a full forward "
                     "per position, can)",
                     why);
            return -1;
        }
    }
    return 0;
}

// -log softmax(logits)[target] over the first V logits, in double.
static double stream_token_loss(const float* logits, int V, int target) {
    double mx = -INFINITY;
    for (int v = 0; v < V; v++)
        if (logits[v] > mx) mx = logits[v];
    double s = 0;
    for (int v = 0; v < V; v++)
        s += exp((double)logits[v] - mx);
    return mx + log(s) - (double)logits[target];
}

// Through a cache of S + W positions: when it is full, the oldest position after the sinks goes.
static void stream_cached(GPT2* m, const StreamPolicy* p, const int* tokens, int n, float* losses) {
    const int cap = p->sinks + p->window, V = m->cfg.vocab_size;
    KVCache* kv = kv_cache_new_stream(m, cap);
    for (int i = 0; i + 1 < n; i++) {
        if (kv_cache_len(kv) == cap) kv_cache_evict(kv, p->sinks, 1);
        const float* lg = kv_cache_step(m, kv, tokens[i]);
        losses[i] = (float)stream_token_loss(lg, V, tokens[i + 1]);
    }
    kv_cache_free(kv);
}

// Sliding window with recompute: position i's logits are the last row of a forward over tokens
// max(0, i - W + 1)..i; the first W positions all come from one forward (row i sees 0..i).
static void stream_recompute(GPT2* m, const StreamPolicy* p, const int* tokens, int n,
                             float* losses) {
    const int W = p->window, V = m->cfg.vocab_size;
    const int head = n - 1 < W ? n - 1 : W; // positions 0..head-1 from the first forward
    if (head > 0) {
        gpt2_forward(m, tokens, NULL, 1, head);
        for (int i = 0; i < head; i++)
            losses[i] = (float)stream_token_loss(gpt2_logits(m, 0, i), V, tokens[i + 1]);
    }
    for (int i = head; i + 1 < n; i++) {
        gpt2_forward(m, tokens + i - W + 1, NULL, 1, W);
        losses[i] = (float)stream_token_loss(gpt2_logits(m, 0, W - 1), V, tokens[i + 1]);
    }
}

void stream_losses(GPT2* m, const StreamPolicy* p, const int* tokens, int n, float* losses) {
    char err[512];
    if (stream_check(m, p, err, sizeof(err))) die(EXIT_USAGE, "%s", err);
    if (n < 2) return;
    const long saved = m->step;
    m->step = -1; // evaluation: stochastic variants draw nothing
    ASSERT(m->acts && m->B >= 1 && m->T >= p->window + p->sinks);
    if (p->recompute)
        stream_recompute(m, p, tokens, n, losses);
    else
        stream_cached(m, p, tokens, n, losses);
    m->step = saved;
}

// Mean loss of positions [a, b).
static double mean(const float* l, int a, int b) {
    double s = 0;
    for (int i = a; i < b; i++)
        s += l[i];
    return b > a ? s / (b - a) : NAN;
}

int stream_write_csv(const char* path, const StreamPolicy* p, const float* losses, int n,
                     int bucket, char* err, size_t cap) {
    FILE* f = fopen(path, "w");
    if (!f) {
        snprintf(err, cap, "%s: cannot open for writing", path);
        return -1;
    }
    int bad = fprintf(f, "policy,window,sinks,first,last,tokens,loss,perplexity\n") < 0;
    for (int a = 0; a < n && !bad; a += bucket) {
        const int b = a + bucket < n ? a + bucket : n;
        const double l = mean(losses, a, b);
        bad |= fprintf(f, "%s,%d,%d,%d,%d,%d,%.6f,%.6f\n", stream_policy_name(p), p->window,
                       p->sinks, a, b - 1, b - a, l, exp(l)) < 0;
    }
    bad |= fflush(f) != 0 || ferror(f);
    bad |= fclose(f) != 0;
    if (bad) {
        snprintf(err, cap, "%s: write failed", path);
        return -1;
    }
    return 0;
}

void stream_print_buckets(FILE* f, const float* losses, int n, int bucket) {
    fprintf(f, "%-8s %-8s %-7s %-9s %s\n", "first", "last", "tokens", "loss", "perplexity");
    for (int a = 0; a < n; a += bucket) {
        const int b = a + bucket < n ? a + bucket : n;
        const double l = mean(losses, a, b);
        fprintf(f, "%-8d %-8d %-7d %-9.4f %.4f\n", a, b - 1, b - a, l, exp(l));
    }
}
