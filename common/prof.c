// common/prof.c: the per-phase step profile's accumulators (see prof.h).
#include "common/prof.h"

#include <omp.h>
#include <string.h>

#include "common/util.h"

int prof_on = 0;

static double acc[PROF_NPHASES];
static int cur = PROF_OTHER;
static double t_last;

#define PROF_MAX_THREADS 256
typedef struct {
    double s[2];
    char pad[64 - 2 * sizeof(double)]; // one cache line per thread
} ProfSlot;
static ProfSlot par[PROF_MAX_THREADS];

static const char* const NAMES[PROF_NPHASES] = {
    [PROF_OTHER] = "other (untimed)",
    [PROF_MM_QKV_FWD] = "matmul qkv fwd",
    [PROF_MM_QKV_BWD] = "matmul qkv bwd",
    [PROF_MM_ATTPROJ_FWD] = "matmul attn proj fwd",
    [PROF_MM_ATTPROJ_BWD] = "matmul attn proj bwd",
    [PROF_MM_FC_FWD] = "matmul fc fwd",
    [PROF_MM_FC_BWD] = "matmul fc bwd",
    [PROF_MM_FCPROJ_FWD] = "matmul fc proj fwd",
    [PROF_MM_FCPROJ_BWD] = "matmul fc proj bwd",
    [PROF_MM_LMHEAD_FWD] = "matmul lm head fwd",
    [PROF_MM_LMHEAD_BWD] = "matmul lm head bwd",
    [PROF_ATTN_MM_FWD] = "attention QK^T, A.V fwd",
    [PROF_ATTN_MM_BWD] = "attention QK^T, A.V bwd",
    [PROF_ATTN_ROW_FWD] = "attention row maps fwd",
    [PROF_ATTN_ROW_BWD] = "attention row maps bwd",
    [PROF_LN_FWD] = "layernorm fwd",
    [PROF_LN_BWD] = "layernorm bwd",
    [PROF_GELU_FWD] = "gelu fwd",
    [PROF_GELU_BWD] = "gelu bwd",
    [PROF_RESID] = "residual adds, grad zeroing",
    [PROF_EMBED] = "embeddings fwd+bwd",
    [PROF_LOSS_FWD] = "loss (softmax, CE) fwd",
    [PROF_LOSS_BWD] = "loss (softmax, CE) bwd",
    [PROF_ZERO_GRAD] = "zero_grad",
    [PROF_GRADNORM] = "grad clipping norm",
    [PROF_ADAMW] = "adamw (+clip scale, bf16 copy)",
    [PROF_CAST] = "fp32->bf16 casts",
    [PROF_METRICS] = "metrics (loss, record)",
};

const char* prof_name(int phase) {
    return phase >= 0 && phase < PROF_NPHASES ? NAMES[phase] : "?";
}

void prof_enable(int on) {
    prof_on = on != 0;
    prof_step_begin();
}

void prof_step_begin(void) {
    memset(acc, 0, sizeof(acc));
    cur = PROF_OTHER;
    t_last = util_now();
}

void prof_step_end(double* out) {
    double now = util_now();
    acc[cur] += now - t_last;
    t_last = now;
    memcpy(out, acc, sizeof(acc));
}

int prof_enter(int phase) {
    if (!prof_on || omp_in_parallel()) return -1;
    double now = util_now();
    acc[cur] += now - t_last;
    t_last = now;
    int prev = cur;
    cur = phase;
    return prev;
}

void prof_leave(int prev) {
    double now = util_now();
    acc[cur] += now - t_last;
    t_last = now;
    cur = prev;
}

void prof_par_reset(void) {
    memset(par, 0, sizeof(par));
}

void prof_par_add(int slot, double seconds) {
    int t = omp_get_thread_num();
    if (t < PROF_MAX_THREADS) par[t].s[slot] += seconds;
}

void prof_par_split(int from, int to, double wall) {
    double all = 0, part = 0;
    for (int t = 0; t < PROF_MAX_THREADS; t++) {
        all += par[t].s[0];
        part += par[t].s[1];
    }
    if (all <= 0) return;
    double moved = wall * (part / all);
    acc[from] -= moved;
    acc[to] += moved;
}
