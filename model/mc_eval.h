// model/mc_eval.h: the model's side of multiple-choice evaluation (data/mc.h): the summed
// log-likelihood of each completion given its context, in one forward of padded rows.
#ifndef ATTNLAB_MC_EVAL_H
#define ATTNLAB_MC_EVAL_H

#include "model/gpt2.h"

// An McScoreFn (data/mc.h) over a GPT2 (model): completion c is the row ctx[c] + comp[c] without
// its last token; ll[c] = sum_j log softmax(logits at position ctx_len[c] - 1 + j)[comp[c][j]],
// the log-softmax over the vocab_size real ids in double. Rows go through gpt2_forward in groups
// of at most the activations' B, padded with id 0 to the group's longest row (causal attention:
// the padding follows every position that is read). Runs in evaluation mode (step -1) and restores
// m->step. 0; -1 when a row is longer than the activations' T (the window the caller must
// respect); -2 when a log-likelihood is not finite (NaN or infinite logits).
int mc_eval_score(void* model, const int* const* ctx, const int* ctx_len, const int* const* comp,
                  const int* comp_len, int n, double* ll);

#endif
