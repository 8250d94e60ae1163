// common/run_state.h: the run-state file (state_NNNNNNNN.bin) of a checkpoint, as pieces each
// owner serialises: the optimizer's header and state arrays (optim_state_save / optim_state_load
// in optim/optim.h, which call run_state_begin / run_state_open), the training loader's position
// (dataloader_state_write / dataloader_state_read in data/dataloader.h) and the loop's own state.
// This module places the pieces in the file's layout (version 1, docs/design.md "Run state and
// checkpoints") and closes it with the checkpoint trailer (common/util.h); it needs only common/,
// and the trainer (train.c) composes the pieces. Also here: what a resumed run must keep for its
// saved data position to point at the same tokens (run_state_check_resume).
#ifndef ATTNLAB_RUN_STATE_H
#define ATTNLAB_RUN_STATE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/config.h"
#include "common/rng.h"
#include "common/util.h"

#define RUN_STATE_MAGIC      20261131
#define RUN_STATE_VERSION    1
#define RUN_STATE_NAME_BYTES 32 // the optimizer's name, NUL-padded
#define RUN_STATE_POS_BYTES  56 // the training loader's position (DATALOADER_STATE_BYTES)
// header (int32[256]), optimizer name, loop record: the bytes before the optimizer's arrays
#define RUN_STATE_FIXED_BYTES (1024 + RUN_STATE_NAME_BYTES + 8 + 32 + RUN_STATE_POS_BYTES + 4 + 4)

// What a checkpoint saves besides the model and the optimizer: the loop's own state.
typedef struct {
    long step;      // completed optimizer steps
    Rng rng;        // the sampling RNG
    float best_val; // best validation loss so far (or -1)
    int skips;      // consecutive skipped (non-finite) updates
} LoopState;

// The fixed part of a run-state file, before the optimizer's state arrays.
typedef struct {
    char opt_name[RUN_STATE_NAME_BYTES];    // the optimizer's piece (optim_state_save)
    int64_t opt_n, opt_t;                   // parameter count, update count
    int32_t opt_arrays;                     // state arrays of opt_n floats that follow
    unsigned char pos[RUN_STATE_POS_BYTES]; // the loader's piece (dataloader_state_write)
    LoopState loop;
} RunStateHead;

// Open path for an atomic write (common/util.h) and write the fixed part; the optimizer's state
// arrays follow through atomic_write (optim_state_write), then atomic_finish appends the trailer
// and commits. 0, or -1 with err (nothing written).
int run_state_begin(AtomicFile* af, const char* path, const RunStateHead* h, char* err,
                    size_t errcap);
// Verify path's trailer and read its fixed part into *h: the stream, positioned at the
// optimizer's state arrays (optim_state_read; the caller closes it), or NULL with err naming the
// file.
FILE* run_state_open(const char* path, RunStateHead* h, char* err, size_t errcap);

// What identifies the training data a saved position points into: one line
// "# train_data file: PATH (BYTES bytes, mtime SEC.NSEC)" per file (the loader's files[nfiles]).
// The trainer appends them to the resolved config text (*text, malloc'd) that every model file
// holds.
void run_state_append_data_text(char** text, char* const* files, int nfiles);

// resume = 1: may a run with config `now` (and resolved config text `now_text`, with its data
// lines) on `nranks` ranks continue exactly from the checkpoint `what` whose saved config text is
// `saved`? Exactness needs the same training data (the file list above, by path, size and mtime,
// where the checkpoint has one), batch_size, seq_len, seed, shuffle and global batch (ranks x
// grad_accum: the ranks may change when the product does not). 0, or -1 with err naming the key,
// the checkpoint's value and the new one.
int run_state_check_resume(const char* saved, const char* what, const Config* now,
                           const char* now_text, int nranks, char* err, size_t errcap);

#endif
