// run_state.h: the trainer's run-state file (state_NNNNNNNN.bin), composed from the pieces each
// owner serialises: the optimizer (optim_state_*), the training loader's position
// (dataloader_state_*) and the loop's own state. Beside train.c, the one place where the
// optimizer and the data meet; the byte layout is in docs/design.md ("Run state and
// checkpoints").
#ifndef ATTNLAB_RUN_STATE_H
#define ATTNLAB_RUN_STATE_H

#include <stddef.h>

#include "common/rng.h"
#include "data/dataloader.h"
#include "optim/optim.h"

// What a checkpoint saves besides the model and the optimizer: the loop's own state.
typedef struct {
    long step;      // completed optimizer steps
    Rng rng;        // the sampling RNG
    float best_val; // best validation loss so far (or -1)
    int skips;      // consecutive skipped (non-finite) updates
} LoopState;

// Write path atomically (checkpoint trailer included). 0, or -1 with err.
int run_state_save(const char* path, const LoopState* ls, const DataLoaderState* pos,
                   const Optimizer* opt, char* err, size_t errcap);
// Verify and read path into *ls, *pos and opt (whose optimizer and size must match the file's).
// 0, or -1 with err naming the file.
int run_state_load(const char* path, LoopState* ls, DataLoaderState* pos, Optimizer* opt, char* err,
                   size_t errcap);

#endif
