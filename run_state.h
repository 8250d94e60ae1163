// run_state.h: the trainer's run-state file (state_NNNNNNNN.bin), composed from the pieces each
// owner serialises: the optimizer (optim_state_*), the training loader's position
// (dataloader_state_*) and the loop's own state. Beside train.c, the one place where the
// optimizer and the data meet; the byte layout is in docs/design.md ("Run state and
// checkpoints").
#ifndef ATTNLAB_RUN_STATE_H
#define ATTNLAB_RUN_STATE_H

#include <stddef.h>

#include "common/config.h"
#include "common/rng.h"
#include "data/dataloader.h"
#include "model/gpt2.h"
#include "optim/data_parallel.h"
#include "optim/optim.h"

// What a checkpoint saves besides the model and the optimizer: the loop's own state.
typedef struct {
    long step;      // completed optimizer steps
    Rng rng;        // the sampling RNG
    float best_val; // best validation loss so far (or -1)
    int skips;      // consecutive skipped (non-finite) updates
} LoopState;

// The pieces of a run that a checkpoint saves and resume = 1 restores (train.c's Trainer owns
// them).
typedef struct {
    const Config* cfg;
    GPT2* model;
    Optimizer* opt;            // this rank's (its shard under mpirun with zero = 1)
    DataParallel* dp;          // NULL in a single process
    DataLoader* train;         // NULL without training data
    LoopState* ls;             // the loop state (step, RNG, best_val, skips)
    DataLoaderState* data_pos; // the training loader's position as last saved or loaded
    const char* config_text;   // the resolved config, saved in every model file
} RunParts;

// OUT/model_<step>.bin, then OUT/state_<step>.bin: a checkpoint counts only when both exist and
// verify; then the rotation keeps the newest keep_last pairs. Under mpirun every rank calls it
// (the state is gathered to rank 0, which alone writes). 0, or -1 after reporting the failure
// on stderr (the previous checkpoints are intact).
int run_checkpoint_save(const RunParts* r, long step);
// resume = 1: load the newest step whose model and state both verify, after checking that the
// run may continue from it exactly (run_state_check_resume). Returns the start step (0 when
// there is nothing to resume; *resumed = 1 when a checkpoint was loaded), or -1 when that
// checkpoint already ends the run (nothing to do). Every rank loads the files; a failure is
// agreed on and reported once (exit 2).
long run_checkpoint_resume(const RunParts* r, int* resumed);

// Write path atomically (checkpoint trailer included). 0, or -1 with err.
int run_state_save(const char* path, const LoopState* ls, const DataLoaderState* pos,
                   const Optimizer* opt, char* err, size_t errcap);
// Verify and read path into *ls, *pos and opt (whose optimizer and size must match the file's).
// 0, or -1 with err naming the file.
int run_state_load(const char* path, LoopState* ls, DataLoaderState* pos, Optimizer* opt, char* err,
                   size_t errcap);

// What identifies the training data a saved position points into: one line
// "# train_data file: PATH (BYTES bytes, mtime SEC.NSEC)" per file of the loader, malloc'd. The
// trainer appends it to the resolved config text (*text, malloc'd) that every model file holds.
void run_state_append_data_text(char** text, const DataLoader* dl);

// resume = 1: may a run with config `now` (and resolved config text `now_text`, with its data
// lines) on `nranks` ranks continue exactly from the checkpoint whose model file is `model_path`
// (its saved config text)? Exactness needs the same training data (the file list above, by
// path, size and mtime, where the checkpoint has one), batch_size, seq_len, seed, shuffle and
// global batch (ranks x grad_accum: the ranks may change when the product does not). 0, or -1 with
// err naming the key, the checkpoint's value and the new one.
int run_state_check_resume(const char* model_path, const Config* now, const char* now_text,
                           int nranks, char* err, size_t errcap);

#endif
