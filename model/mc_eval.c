// model/mc_eval.c: log-likelihoods of multiple-choice completions under a GPT2 (model/mc_eval.h).
// Reference for the positions scored: karpathy/llm.c dev/data/hellaswag.py (the shifted mask: the
// last context token predicts the first completion token).
#include "model/mc_eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

int mc_eval_score(void* model, const int* const* ctx, const int* ctx_len, const int* const* comp,
                  const int* comp_len, int n, double* ll) {
    GPT2* m = model;
    const int V = m->cfg.vocab_size;
    for (int c = 0; c < n; c++)
        if (ctx_len[c] < 1 || comp_len[c] < 1 || ctx_len[c] + comp_len[c] - 1 > m->T) return -1;
    const long saved = m->step;
    int rc = 0;
    m->step = -1;
    int* in = mallocCheck(sizeof(int) * (size_t)m->B * (size_t)m->T);
    for (int c0 = 0; c0 < n; c0 += m->B) {
        const int rows = n - c0 < m->B ? n - c0 : m->B;
        int T = 1;
        for (int r = 0; r < rows; r++) {
            const int len = ctx_len[c0 + r] + comp_len[c0 + r] - 1;
            if (len > T) T = len;
        }
        memset(in, 0, sizeof(int) * (size_t)rows * T);
        for (int r = 0; r < rows; r++) {
            const int c = c0 + r;
            memcpy(in + (size_t)r * T, ctx[c], sizeof(int) * (size_t)ctx_len[c]);
            memcpy(in + (size_t)r * T + ctx_len[c], comp[c],
                   sizeof(int) * (size_t)(comp_len[c] - 1));
        }
        gpt2_forward(m, in, NULL, rows, T);
        for (int r = 0; r < rows; r++) {
            const int c = c0 + r;
            double sum = 0;
            for (int j = 0; j < comp_len[c]; j++) {
                const float* lg = gpt2_logits(m, r, ctx_len[c] - 1 + j);
                double mx = -INFINITY, z = 0;
                for (int v = 0; v < V; v++)
                    if (lg[v] > mx) mx = lg[v];
                for (int v = 0; v < V; v++)
                    z += exp((double)lg[v] - mx);
                sum += (double)lg[comp[c][j]] - mx - log(z);
            }
            ll[c] = sum;
            if (!isfinite(sum)) rc = -2;
        }
    }
    free(in);
    m->step = saved;
    return rc;
}
