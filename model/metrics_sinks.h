// model/metrics_sinks.h: the two first-token sink measures of the papers, as kernels over one
// (T, T) attention map, and the per-checkpoint score built from them (./probe sinks).
//
// Gu et al. 2410.10781 (sail-sg/Attention-Sink:pretrain/eval_sink_pretrain.py and
// eval_sink_open_source.py, compute_attention_sink): the model runs on the first Ts = 64 tokens
// of each of >= 100 held-out sequences; for each (sequence, layer, head) the importance of the
// first token is the mean over the Ts query rows i = 0..Ts-1 of its weight, row 0 included
// (their `(scores / arange(T, 0, -1)).sum(-2)`: column j is divided by its T - j causal rows).
// For maps that do not sum to 1 (sigmoid, ReLU, ELU+1 kernels) the weights are first
// renormalised as a_ij / (sum_k a_ik + 1e-8) (lit_gpt/inference/model_attn_sim_infer.py,
// attn_weight_normalized), so an all-zero row counts 0. The sink rate is the fraction of all
// (sequence, layer, head) triples whose importance exceeds eps = 0.3 (strictly), i.e. the
// per-sequence rate averaged over the sequences. The raw version reads the weights unchanged.
//
// Guo et al. 2410.13835 (GuoTianYu2000/Active-Dormant-Attention:BBM/probe_utils.py,
// get_dynamic_summary, key "bos_attn"): per layer (head 0 of their one-head models) the mean of
// the weight on position 0 over every query row whose input token is not a trigger, pooled over
// all rows of all sequences (row 0, the <s> token, counts). Here per (layer, head), raw and
// renormalised as above.
#ifndef ATTNLAB_METRICS_SINKS_H
#define ATTNLAB_METRICS_SINKS_H

#include <stddef.h>

#define METRICS_GU_T          64   // prefix length of Gu's measure
#define METRICS_GU_RENORM_EPS 1e-8 // Gu et al.'s a / (sum a + 1e-8)

// Gu's first-token importance of the (T, T) row-major causal map A (row i holds keys 0..i) over
// its first Ts <= T rows: *raw = (1/Ts) sum_{i<Ts} A[i][0], *renorm = (1/Ts) sum_{i<Ts}
// A[i][0] / (sum_{j<=i} A[i][j] + 1e-8). Non-finite rows give NaN.
void metrics_gu_alpha0(const float* A, int T, int Ts, double* raw, double* renorm);

// Guo's pooled first-token weight: adds, over the rows t < T with mask[t] != 0 (mask NULL:
// every row), A[t][0] to *raw_sum, A[t][0] / (sum_{j<=t} A[t][j] + 1e-8) to *renorm_sum, and
// the number of rows to *n.
void metrics_first_token_rows(const float* A, int T, const unsigned char* mask, double* raw_sum,
                              double* renorm_sum, long* n);

// Scores of one checkpoint over nseq sequences (filled by metrics_sinks_add per sequence and
// head, finished by metrics_sinks_finish).
typedef struct {
    int L, NH, nseq;
    float eps;
    double *gu_raw, *gu_renorm;    // (L, NH, nseq) Gu's importance per sequence
    double *nt_raw, *nt_renorm;    // (L, NH) sums over non-trigger rows
    double *all_raw, *all_renorm;  // (L, NH) sums over all rows
    long *nt_n, *all_n;            // (L, NH) row counts
    double rate_raw, rate_renorm;  // Gu sink rates over all (layer, head, sequence)
    double nt_max;                 // largest non-trigger renormalised weight over (layer, head)
    int nt_max_layer, nt_max_head; // where it is
} SinkScores;

void metrics_sinks_init(SinkScores* s, int L, int NH, int nseq, float eps);
void metrics_sinks_free(SinkScores* s);
// Sequence b's map A_gu (Tg, Tg) of (layer l, head h) for Gu's measure over its Ts rows, and its
// map A (T, T) with the row mask (rows whose input is not a trigger) for Guo's.
void metrics_sinks_add_gu(SinkScores* s, int l, int h, int b, const float* A_gu, int Tg, int Ts);
void metrics_sinks_add_rows(SinkScores* s, int l, int h, const float* A, int T,
                            const unsigned char* nontrig);
void metrics_sinks_finish(SinkScores* s);
// The mean of one (L, NH) sum array over its counts, NaN when none.
double metrics_sinks_mean(const double* sum, const long* n, int i);

#endif
