// optim/data_parallel.h: data-parallel optimizer steps over N ranks (common/dist.h), as a few
// calls in the trainer's loop (train.c). Flat float buffers only: the model's parameter and
// gradient buffers and its gradient segments are passed in, so optim/ stays below model/.
//
// N ranks train one model. Every optimizer step reads a global batch of N x grad_accum
// micro-batches of batch_size sequences, in the order one process with grad_accum = N x
// grad_accum would read them; micro-batch j goes to rank j mod N (dataloader_next_slice), so
// every rank keeps the same, global, data position.
//
// Gradient reduction in a fixed order, matching one process exactly: a single process adds
// micro-batch j's gradient onto the sum of micro-batches 0..j-1, in place. Here rank j mod N
// receives that running sum from the rank of micro-batch j-1, segment by segment (the model's
// gradient segments: final layernorm, the layers top-down, the embeddings), just before its
// backward first adds to the segment (dp_grad_hook, phase 0), adds its own micro-batch onto it
// with the same kernels, and sends the segment on as soon as it is final (phase 1). The backward
// passes of the ranks overlap, each a segment behind the previous rank; the transfers overlap the
// backward (one bucket per segment). The rank of the last micro-batch (N - 1) ends with the
// global gradient, which is bit-identical to one process with grad_accum = N x grad_accum and
// does not depend on timing.
// zero = 0: it is broadcast and every rank steps the full optimizer. zero = 1 (ZeRO-1): rank
// N - 1 computes the norm and scatters the shards of the gradient, each rank steps the AdamW
// state of its shard (optim_init_shard), and the parameters are all-gathered; elementwise
// updates make this bit-identical to zero = 0. Checkpoints always hold the full optimizer state
// (gathered to rank 0, the only rank that writes), so they resume with any N and either zero.
//
// dp_reduce = allreduce (allreduce = 1 in dp_new): instead of the chain, each rank accumulates
// its own micro-batches k * N + rank in place, and as its last micro-batch's backward finishes a
// segment, the segment is summed over the ranks by MPI_Iallreduce (zero = 0) or
// MPI_Ireduce_scatter onto the ZeRO-1 shards (zero = 1; the shards are not of equal size, so the
// block variant does not fit), overlapped with the backward of the remaining segments; dp_reduce
// completes them. No broadcast follows: every rank has the sum (zero = 0) or its shard of it.
// The sum order differs from one process (each rank's micro-batches first, then the MPI
// library's order over ranks), so the results are not bit-identical to grad_accum = N x accum;
// they are the same run to run for a fixed N and launcher. The norm is summed from per-shard
// sums of squares in rank order. Checkpoints are as above.
#ifndef ATTNLAB_DATA_PARALLEL_H
#define ATTNLAB_DATA_PARALLEL_H

#include <stddef.h>

#include "common/json.h"
#include "optim/optim.h"

typedef struct DataParallel DataParallel;

// NULL in a single process (every dp_* call below accepts NULL and then does the one-process
// thing). With N ranks: nseg gradient segments, to be described with dp_set_segment. With zero,
// *opt is replaced by the state of this rank's shard. -1 with err when the ranks cannot run
// this model (exit 2).
int dp_new(DataParallel** out, int accum, int zero, int allreduce, size_t nparams, int nseg,
           Optimizer* opt, char* err, size_t errcap);
void dp_free(DataParallel* d);
void dp_set_segment(DataParallel* d, int seg, int n, const size_t* off, const size_t* len);
int dp_rank(const DataParallel* d); // 0 for NULL
int dp_size(const DataParallel* d); // 1 for NULL
// Before micro-batch k of a step (k = 0 starts the step's counters).
void dp_begin_micro(DataParallel* d, int k);
// The model's gradient hook (gpt2_backward): G the gradient buffer, loss the micro-batch's mean
// loss (read at segment 0, phase 0), step the step being computed (for messages). Returns 1 when
// it received the segment's running sum into G (phase 0 of every micro-batch but the global
// first), else 0.
int dp_grad_hook(DataParallel* d, float* G, int seg, int phase, double loss, long step);
// After the micro-batches: the global gradient is complete (on every rank with zero = 0, on
// rank N - 1 with zero = 1), *loss becomes the global mean loss; returns the global gradient norm.
double dp_reduce(DataParallel* d, float* G, size_t n, double* loss);
// The full gradient on every rank (zero = 1 only has it on rank N - 1): for diagnostics and the
// non-finite report, which read every tensor.
void dp_full_grads(DataParallel* d, float* G, size_t n);
// Clip to max_norm and step the optimizer (this rank's shard with zero = 1, then the parameters
// are all-gathered), in one pass over the parameters: the clipping scale is applied as g is
// read (grads keep their unclipped values), and `copy` (NULL: none), the parameters' bf16 copy,
// is rewritten from the new values on the way. Returns 1 if the copy is now up to date (0 under
// zero = 1, where other ranks' shards arrive afterwards: the caller refreshes it).
int dp_update(DataParallel* d, Optimizer* opt, float* params, float* grads,
              const OptimRange* ranges, int nranges, double norm, float max_norm, float lr,
              const OptimHParams* h, bf16* copy);
// The optimizer with its full state for a checkpoint: opt, or (zero = 1) the shards gathered
// into *tmp on rank 0. NULL on ranks other than 0 (they write nothing). Then dp_state_done.
const Optimizer* dp_state_for_save(DataParallel* d, Optimizer* opt, Optimizer* tmp, size_t n);
void dp_state_done(DataParallel* d, Optimizer* tmp);
// zero = 1: whether the run state must be loaded into a full optimizer first (then call
// dp_take_shard with it).
int dp_sharded(const DataParallel* d);
void dp_take_shard(const DataParallel* d, const Optimizer* full, Optimizer* shard);
// The run's global batch, for the resolved config, the log and the console: "# data parallel: N
// ranks x batch_size B x grad_accum A = global batch of G sequences of T tokens; zero = Z\n".
// An empty line for NULL.
void dp_describe(const DataParallel* d, int batch_size, int seq_len, char* line, size_t cap);
// Communication of the last step into its metrics record: ranks, comm_ms, comm_mb, seg_ms.
void dp_record(const DataParallel* d, JsonBuf* j);

#endif
