// tests/run_state_v1.h: a test-only writer of version-1 run-state files, the fixed layout the
// trainer wrote before the sectioned version 2 (docs/design.md "Run state and checkpoints"): a
// copy of the old writer, so the suites can make a run directory as the previous build left it
// and check that today's reader resumes it. Not part of the library.
#ifndef ATTNLAB_TESTS_RUN_STATE_V1_H
#define ATTNLAB_TESTS_RUN_STATE_V1_H

#include <stddef.h>

#include "common/run_state.h"
#include "data/dataloader.h"
#include "optim/optim.h"

// Write path as a version-1 file: int32[256] header {magic, 1, n, t, state arrays, step}, the
// optimizer's name[32], the loop record {step, sampling RNG, the loader's position, best_val,
// skips}, the optimizer's state arrays, the trailer. 0, or -1 with err.
int test_run_state_v1_write(const char* path, const LoopState* loop, const Optimizer* o,
                            const DataLoaderState* pos, char* err, size_t errcap);

// Read a run-state file of either version through the trainer's own calls (run_state_open,
// optim_state_get, dataloader_state_get) into *loop, o (already initialised for the file's
// optimizer and size) and *pos. 0, or -1 with err.
int test_run_state_read(const char* path, LoopState* loop, Optimizer* o, DataLoaderState* pos,
                        char* err, size_t errcap);

#endif
