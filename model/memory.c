// model/memory.c: memory estimate of a training configuration and the check against
// MemAvailable (see memory.h). The activation sizes mirror gpt2_alloc_acts.
#include "model/memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/residual.h"

void memory_estimate(MemEstimate* e, const GPT2Config* g, int B, int T, int state_per_param,
                     int nthreads) {
    const double L = g->n_layer, C = g->n_embd, NH = g->n_head, Vp = g->padded_vocab;
    const double maxT = g->block_size, BT = (double)B * T;
    const double nparams = Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C;
    memset(e, 0, sizeof(*e));
    e->params = 4 * nparams;
    e->grads = 4 * nparams;
    e->optim = 4 * nparams * state_per_param;
    e->attn = 4 * L * B * NH * (double)T * T;
    e->logits = 4 * BT * Vp;
    // per layer: ln1, qkv(3), atty, attproj, residual2, ln2, fch(4), fch_gelu(4), fcproj,
    // residual3 = 16 C per position, plus 4 LayerNorm statistics
    double per_layer = 4 * L * BT * (16 * C + 4);
    // encoded, lnf (+ stats), lse, losses; backward scratch dres, dln, dqkv(3), datty,
    // dfch(4), dfch_gelu(4), dlnf = 15 C
    double rest = 4 * BT * (2 * C + 4 + 15 * C);
    // residual = attnres | delta_attnres: routed inputs, weights and source gradients;
    // value_residual: the raw values of every layer and one gradient buffer
    double paths = resid_bytes(g, B, T) + (g->value_residual ? 4 * (L + 1) * BT * C : 0);
    e->acts = per_layer + e->attn + e->logits + rest + paths;
    // attention workspace: a few (T, T) planes per thread, plus variant caches of up to one
    // attention map per layer
    e->workspace = 4 * (double)nthreads * 8 * (double)T * T + 4 * (double)B * NH * 16;
    e->total = e->params + e->grads + e->optim + e->acts + e->workspace;
}

double memory_available(void) {
    const char* env = getenv("ATTNLAB_MEM_AVAILABLE");
    if (env && *env) return strtod(env, NULL);
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
             "parameters %.2f, gradients %.2f, optimizer state %.2f, activations %.2f GiB (of "
             "which attention maps (n_layer, batch_size, n_head, T, T) %.2f and logits %.2f), "
             "workspace %.2f GiB. Reduce batch_size (activations scale with it; use grad_accum "
             "to keep the effective batch), seq_len / eval_seq_len (attention maps grow with "
             "its square), or the model (n_layer, n_embd)",
             gib(e->total), gib(avail), gib(e->params), gib(e->grads), gib(e->optim), gib(e->acts),
             gib(e->attn), gib(e->logits), gib(e->workspace));
    return -1;
}
