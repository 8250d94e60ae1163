// model/run/memory.c: memory estimate of a training configuration and the check against
// MemAvailable (see memory.h). The sizes come from the model's allocation code in size-only mode.
#include "model/run/memory.h"

#include "common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void memory_estimate(MemEstimate* e, const GPT2* m, const GPT2Config* g, int B, int T,
                     int state_per_param, MMPrecision prec, int nthreads) {
    GPT2* s = malloc(sizeof(GPT2)); // large (the per-layer attention), and it holds no buffer
    if (!s) {
        memset(e, 0, sizeof(*e));
        return;
    }
    memcpy(s, m, sizeof(GPT2));
    s->size_only = 1;
    s->params = s->grads = s->acts = NULL;
    s->params_bf16 = NULL;
    s->dlogits_bf16 = NULL;
    s->acts_bf16 = NULL;
    s->ws = NULL;
    gpt2_build(s, g);
    gpt2_alloc_acts(s, B, T, nthreads);
    gpt2_set_precision(s, prec);
    const GPT2Bytes* b = &s->bytes;
    memset(e, 0, sizeof(*e));
    e->params = b->params;
    e->grads = b->grads;
    // optim_init: state_per_param arrays of num_params floats in one allocation
    e->optim = state_per_param > 0
                   ? (double)util_floats_bytes((size_t)state_per_param * s->num_params)
                   : 0;
    e->bf16 = b->bf16 + b->matmul;
    e->acts = b->acts;
    e->attn = b->attn;
    e->logits = b->logits;
    e->workspace = b->workspace + b->caches;
    e->total = e->params + e->grads + e->optim + e->bf16 + e->acts + e->workspace;
    free(s);
}

double memory_available(void) {
    const char* env = getenv("ATTNLAB_MEM_AVAILABLE");
    double v;
    if (env && *env) { // the shared number parser: NaN or text is refused, not compared
        if (util_parse_double(env, &v) != 0 || v < 0)
            die(EXIT_USAGE, "ATTNLAB_MEM_AVAILABLE: '%s' is not a number of bytes", env);
        return v;
    }
    FILE* f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    double kb = -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    fclose(f);
    return kb < 0 ? -1 : kb * 1024.0;
}

static double gib(double b) {
    return b / (1024.0 * 1024.0 * 1024.0);
}

int memory_check(const MemEstimate* e, double avail, char* err, size_t errcap) {
    if (avail < 0 || e->total <= avail) return 0;
    snprintf(err, errcap,
             "this config needs about %.2f GiB but only %.2f GiB is available (MemAvailable): "
             "parameters %.2f, gradients %.2f, optimizer state %.2f, bf16 copies %.2f, "
             "activations %.2f GiB (of which attention maps (n_layer, batch_size, n_head, T, T) "
             "%.2f and logits %.2f), workspace and variant caches %.2f GiB. Reduce batch_size "
             "(activations scale with it; use grad_accum to keep the effective batch), seq_len / "
             "eval_seq_len (attention maps grow with its square), or the model (n_layer, "
             "n_embd)",
             gib(e->total), gib(avail), gib(e->params), gib(e->grads), gib(e->optim), gib(e->bf16),
             gib(e->acts), gib(e->attn), gib(e->logits), gib(e->workspace));
    return -1;
}
