// model/run_dist.h: data-parallel training (common/dist.h) as a few calls in the training loop.
//
// N ranks train one model. Every optimizer step reads a global batch of N x grad_accum
// micro-batches of batch_size sequences, in the order one process with grad_accum = N x
// grad_accum would read them; micro-batch j goes to rank j mod N (dataloader_next_slice), so
// every rank keeps the same, global, data position.
//
// Gradient reduction in a fixed order, matching one process exactly: a single process adds
// micro-batch j's gradient onto the sum of micro-batches 0..j-1, in place. Here rank j mod N
// receives that running sum from the rank of micro-batch j-1, segment by segment
// (gpt2_grad_segments: final layernorm, the layers top-down, the embeddings), just before its
// backward first adds to the segment, adds its own micro-batch onto it with the same kernels,
// and sends the segment on as soon as it is final. The backward passes of the ranks overlap,
// each a segment behind the previous rank; the transfers overlap the backward (one bucket per
// segment). The rank of the last micro-batch (N - 1) ends with the global gradient, which is
// bit-identical to one process with grad_accum = N x grad_accum, and does not depend on timing.
// zero = 0: it is broadcast and every rank steps the full optimizer. zero = 1 (ZeRO-1): rank
// N - 1 computes the norm and scatters the shards of the gradient, each rank steps the AdamW
// state of its shard (optim_init_shard), and the parameters are all-gathered; elementwise
// updates make this bit-identical to zero = 0. Checkpoints always hold the full optimizer state
// (gathered to rank 0, the only rank that writes), so they resume with any N and either zero.
#ifndef ATTNLAB_RUN_DIST_H
#define ATTNLAB_RUN_DIST_H

#include "common/json.h"
#include "model/run.h"

// After run_setup: one rank does nothing; N ranks shard the optimizer (zero = 1) and install
// the gradient hook. -1 with err on a config the ranks cannot run (exit 2).
int run_dist_setup(Run* r, char* err, size_t errcap);
void run_dist_free(Run* r);
// This rank's micro-batch k of the step (dataloader_next_slice) into r->inputs/targets.
void run_dist_next_batch(Run* r, int k);
// After the micro-batches: the global gradient is complete (on every rank with zero = 0, on
// rank N - 1 with zero = 1), *loss is the global mean loss; returns the global gradient norm.
double run_dist_reduce(Run* r, double* loss);
// The full gradient on every rank (zero = 1 only has it on rank N - 1): for diagnostics and the
// non-finite report, which read every tensor.
void run_dist_full_grads(Run* r);
// Clip and step the optimizer (this rank's shard with zero = 1, then the parameters are
// all-gathered).
void run_dist_update(Run* r, double norm, float lr);
// The optimizer with its full state for a checkpoint: r->opt, or (zero = 1) the shards gathered
// into *tmp on rank 0. NULL on ranks other than 0 (they write nothing). Free with
// run_dist_state_done.
const Optimizer* run_dist_state_for_save(Run* r, Optimizer* tmp);
void run_dist_state_done(Run* r, Optimizer* tmp);
// Load a run-state file into the (possibly sharded) optimizer. 0, or -1 with err.
int run_dist_load_state(Run* r, const char* path, char* err, size_t errcap);
// Communication of the last step into its metrics record: ranks, comm_ms, comm_mb.
void run_dist_record(const Run* r, JsonBuf* j);

#endif
