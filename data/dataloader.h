// data/dataloader.h: batches of (inputs, targets) from a glob of llm.c shards.
// Batch layout as in llm.c: a batch reads B*T+1 consecutive tokens; inputs are the first B*T,
// targets the last B*T. Sequential order: batch i of a shard covers tokens [i*B*T, i*B*T+B*T+1);
// a shard's tail that cannot fill a batch is skipped; after the last shard it wraps to the first
// (epoch += 1). Shuffled order: every epoch permutes the shard order and, within each shard, the
// order of its batch windows, from a seeded RNG. The position (shard, window, epoch, RNG) is
// plain data: dataloader_get_state/set_state restore it exactly, for resume.
#ifndef ATTNLAB_DATALOADER_H
#define ATTNLAB_DATALOADER_H

#include <stddef.h>
#include <stdint.h>

#include "common/rng.h"
#include "common/run_state.h"
#include "data/shard.h"

typedef struct {
    uint64_t epoch;      // full passes completed
    uint64_t shard_pos;  // index into the (possibly permuted) shard order
    uint64_t window_pos; // index into the (possibly permuted) window order of that shard
    Rng rng;             // RNG at the start of the current epoch (permutations are re-derived)
} DataLoaderState;

typedef struct {
    int B, T;
    int shuffle;
    uint64_t seed;
    int nfiles;
    char** files; // sorted glob matches
    size_t* ntok; // tokens per file
    DataLoaderState st;
    uint64_t* shard_order;  // nfiles
    uint64_t* window_order; // windows of the current shard
    uint64_t nwindows;      // windows in the current shard
    int loaded;             // index of the shard currently in memory, -1 none
    Shard shard;
    uint64_t total_tokens; // over all files
} DataLoader;

// Open every shard matching `glob` (validating each header), ready at the first batch.
// Fails if nothing matches or no shard holds one batch of B*T+1 tokens. 0, or -1 with err.
int dataloader_init(DataLoader* dl, const char* glob, int B, int T, int shuffle, uint64_t seed,
                    char* err, size_t errcap);
// Fill inputs[B*T] and targets[B*T] with the next batch and advance.
void dataloader_next(DataLoader* dl, int* inputs, int* targets);
// Data parallelism: the next `nranks` batches form one slice each; rank `rank` gets batch number
// `rank` of them into inputs/targets and the position advances past all of them. Every rank
// calling this in step keeps the same position (the global one), and the ranks' batches are
// disjoint and are exactly the batches one process calling dataloader_next would read, in rank
// order.
void dataloader_next_slice(DataLoader* dl, int rank, int nranks, int* inputs, int* targets);
// Back to the first batch of epoch 0 (validation calls this before every evaluation).
void dataloader_reset(DataLoader* dl);
void dataloader_get_state(const DataLoader* dl, DataLoaderState* st);
// Restore a position saved by get_state (same glob, B, T, shuffle, seed). 0, or -1 with err.
int dataloader_set_state(DataLoader* dl, const DataLoaderState* st, char* err, size_t errcap);
void dataloader_free(DataLoader* dl);

// The position as bytes (dataloader_state_write; the section's get reads them back):
// DATALOADER_STATE_BYTES bytes, little-endian uint64 epoch, shard_pos,
// window_pos, then the 4 words of the RNG (the same bytes as the struct on a little-endian
// machine, which is how version-1 run-state files hold it).
#define DATALOADER_STATE_BYTES 56
void dataloader_state_write(const DataLoaderState* st, unsigned char* buf);
// The training loader's section of a run-state file (common/run_state.h), named
// DATALOADER_STATE_SECTION: the position's bytes. put writes it (a failed write is reported by
// run_state_finish); get reads it from r (0, or -1 with err naming the file and the section when
// it is not DATALOADER_STATE_BYTES long).
#define DATALOADER_STATE_SECTION "data"
void dataloader_state_put(const DataLoaderState* st, RunStateWriter* w);
int dataloader_state_get(DataLoaderState* st, RunStateReader* r, char* err, size_t errcap);

// Placement of n windows of T tokens over files holding ntok[0..nfiles) tokens: the
// possible starts (ntok[f] - T + 1 per file that holds T tokens, in file order) are numbered
// 0..S-1 and window j starts at number floor(j * S / n), so the windows are evenly spaced over
// the whole split (they overlap only when the split holds fewer than n * T tokens). Window j is
// tokens [start[j], start[j] + T) of file[j]. 0, or -1 when no file holds T tokens.
int dataloader_spread_windows(const size_t* ntok, int nfiles, int T, int n, int* file,
                              size_t* start);
// The tokens of those n windows over the loader's shards: (n, T) token ids (malloc'd), or NULL
// with err naming the shard. The trainer's diagnostics probe these.
int* dataloader_spread_tokens(const DataLoader* dl, int n, int T, char* err, size_t errcap);

// The one token-range check of every reader of token ids (the trainer's batches, evaluate's
// batches, attnmap's tokens): 0 when ids[0..n) all lie in [0, vocab_size), else -1 with err
// "<what>: token id <id> is >= vocab_size <V> ..." (or "is negative") for the first id outside.
int tokens_check_range(const int* ids, size_t n, int vocab_size, const char* what, char* err,
                       size_t errcap);

#endif
