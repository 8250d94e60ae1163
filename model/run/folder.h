// model/run/folder.h: a training run's folder (out_dir) holds one run at a time
// (docs/configuration.md, "The run folder"):
//   - a lock: while a run lives, it holds an exclusive flock on OUT/train.lock (which names its
//     pid and host); a second ./train on the folder is refused naming them. The kernel releases
//     the lock of a process that dies, so a killed run's lock file is taken over, with a note;
//     a run that ends (also on an error) deletes it;
//   - a new run (resume = 0) into a folder that holds a run's files (config.conf, non-empty
//     metrics.jsonl or main.log, checkpoints, attention dumps) is refused naming them, unless
//     overwrite = 1, which deletes exactly those files first (other files stay);
//   - a short run: warmup_steps from a config file larger than max_steps is capped at max_steps
//     with a note (set on the command line, config_validate refuses it naming the key).
// Under mpirun only rank 0 calls the folder functions (the trainer agrees on their verdicts).
#ifndef ATTNLAB_RUN_FOLDER_H
#define ATTNLAB_RUN_FOLDER_H

#include <stddef.h>

#include "common/config.h"

#define RUN_LOCK_FILE "train.lock"

// The start of a run in c->out_dir: run_lock_take, then for a new run (resume = 0)
// run_folder_check_new with c->overwrite. 0, or -1 with err.
int run_folder_open(const Config* c, char* err, size_t errcap);

// Delete the lock file and release the lock (a no-op when none is held). util_exit calls it too.
void run_lock_release(void);

// Is `key` set by one of argv[first..argc) (key=value or --key=value)?
int run_args_set(int argc, char** argv, int first, const char* key);
// Cap c->warmup_steps at c->max_steps (with a note on stderr from rank 0) unless it was set on
// the command line (on_cmdline: config_validate then refuses it naming warmup_steps=N).
void run_fit_warmup(Config* c, int on_cmdline);

// Resumed at `start`: drop the resume_change event records of step `start` from
// OUT/metrics.jsonl (the resumed run writes its own). 0, or -1 with err naming the file.
int run_folder_resume_records(const char* dir, long start, char* err, size_t errcap);

#endif
