// model/sample.c: autoregressive sampling: gpt2_generate re-runs the forward over the window of
// the last T tokens for each new token; gpt2_generate_cached extends a key/value cache by one
// position instead (model/kv_cache.h) while the sequence fits it. And a sample's text, with
// document breaks shown as such.
#include "model/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "model/kv_cache.h"

static int sample_row(const float* logits, int V, float temperature, int top_k, Rng* rng,
                      float* probs) {
    if (temperature <= 0.0f) {
        int best = 0;
        for (int v = 1; v < V; v++)
            if (logits[v] > logits[best]) best = v;
        return best;
    }
    float thresh = -INFINITY;
    if (top_k > 0 && top_k < V) { // k-th largest logit by partial selection on a copy
        memcpy(probs, logits, sizeof(float) * (size_t)V);
        int lo = 0, hi = V - 1, k = top_k - 1;
        while (lo < hi) {
            float pivot = probs[(lo + hi) / 2];
            int i = lo, j = hi;
            while (i <= j) {
                while (probs[i] > pivot)
                    i++;
                while (probs[j] < pivot)
                    j--;
                if (i <= j) {
                    float t = probs[i];
                    probs[i] = probs[j];
                    probs[j] = t;
                    i++;
                    j--;
                }
            }
            if (k <= j)
                hi = j;
            else if (k >= i)
                lo = i;
            else
                break;
        }
        thresh = probs[k];
    }
    float mx = -INFINITY;
    for (int v = 0; v < V; v++)
        mx = fmaxf(mx, logits[v]);
    double sum = 0;
    for (int v = 0; v < V; v++) {
        float p = logits[v] >= thresh ? expf((logits[v] - mx) / temperature) : 0.0f;
        probs[v] = p;
        sum += p;
    }
    double u = rng_uniform_d(rng) * sum, acc = 0;
    for (int v = 0; v < V; v++) {
        acc += probs[v];
        if (u < acc) return v;
    }
    for (int v = V - 1; v >= 0; v--)
        if (probs[v] > 0) return v;
    return 0;
}

int gpt2_generate(GPT2* m, int* ids, int n_prompt, int max_new, float temperature, int top_k,
                  int stop_id, Rng* rng) {
    const int V = m->cfg.vocab_size;
    float* probs = mallocCheck(sizeof(float) * (size_t)V);
    int n = n_prompt;
    long saved_step = m->step;
    m->step = -1;
    for (int k = 0; k < max_new; k++) {
        int start = n > m->T ? n - m->T : 0;
        int len = n - start;
        gpt2_forward(m, ids + start, NULL, 1, len);
        int next = sample_row(gpt2_logits(m, 0, len - 1), V, temperature, top_k, rng, probs);
        ids[n++] = next;
        if (next == stop_id) break;
    }
    m->step = saved_step;
    free(probs);
    return n;
}

int gpt2_generate_cached(GPT2* m, KVCache* kv, int* ids, int n_prompt, int max_new,
                         float temperature, int top_k, int stop_id, Rng* rng) {
    if (!kv) return gpt2_generate(m, ids, n_prompt, max_new, temperature, top_k, stop_id, rng);
    const int V = m->cfg.vocab_size, cap = kv_cache_capacity(kv);
    float* probs = mallocCheck(sizeof(float) * (size_t)V);
    int n = n_prompt;
    long saved_step = m->step;
    m->step = -1;
    kv_cache_reset(kv);
    for (int k = 0; k < max_new; k++) {
        const float* logits;
        if (n <= cap) { // the prefix fits: feed what the cache lacks (the prompt, then 1 a step)
            logits = NULL;
            while (kv_cache_len(kv) < n)
                logits = kv_cache_step(m, kv, ids[kv_cache_len(kv)]);
        } else { // the window slides past the cache: recompute, as gpt2_generate
            int start = n > m->T ? n - m->T : 0;
            gpt2_forward(m, ids + start, NULL, 1, n - start);
            logits = gpt2_logits(m, 0, n - start - 1);
        }
        int next = sample_row(logits, V, temperature, top_k, rng, probs);
        ids[n++] = next;
        if (next == stop_id) break;
    }
    m->step = saved_step;
    free(probs);
    return n;
}

int sample_write(FILE* f, const int* ids, int n, int eot, SampleTokenBytes bytes, const void* ctx,
                 int raw) {
    int bad = 0;
    for (int i = 0; i < n; i++) {
        if (ids[i] == eot && !raw) {
            bad |= fputs(SAMPLE_DOC_BREAK, f) < 0;
        } else if (bytes) {
            size_t len = 0;
            const unsigned char* b = bytes(ctx, ids[i], &len);
            if (b && len) bad |= fwrite(b, 1, len, f) != len;
        } else {
            bad |= fprintf(f, "%d ", ids[i]) < 0;
        }
    }
    return bad ? -1 : 0;
}
