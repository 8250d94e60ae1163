// tests/train_util.h: helpers of the suites that drive the real BUILD/train on a tiny byte-level
// model in a temporary directory (tests/test_run_folder.c, tests/test_resume_keys.c): shards,
// starting and waiting for the trainer, reading a run folder's files.
#ifndef ATTNLAB_TRAIN_UTIL_H
#define ATTNLAB_TRAIN_UTIL_H

#include <stddef.h>
#include <sys/types.h>

// A tiny model on the shards below, for ./train's command line (no out_dir).
#define TU_TINY                                                                                    \
    "n_layer=2 n_head=2 n_embd=32 block_size=32 seq_len=16 batch_size=4 vocab_size=257 "           \
    "tokenizer=byte threads=1 log_every=1 sample_every=0 eval_steps=2 probe_sequences=2 "          \
    "metrics_every=0 "

// This process's temporary directory (made once), and a training and a validation shard in it
// (byte tokens), whose globs tu_data() gives as "train_data=... val_data=...".
const char* tu_dir(void);
const char* tu_data(void);

// Start BUILD/train with the space-separated arguments `args` (stdout and stderr to LOG.out and
// LOG.err; OMP_NUM_THREADS=1). Returns the pid.
pid_t tu_spawn(const char* args, const char* log);
// Wait for pid at most `secs` seconds (then SIGKILL it and fail the test naming `what`). Its exit
// code (128 + signal when killed).
int tu_wait(pid_t pid, double secs, const char* what);
// ./train TU_TINY tu_data() out_dir=DIR EXTRA, logged to DIR.log.{out,err}: the pid, or the exit
// code after at most 120 s.
pid_t tu_spawn_train(const char* dir, const char* extra);
int tu_train(const char* dir, const char* extra);
// Until DIR/metrics.jsonl holds the training record of `step` (or pid ended; at most 60 s).
void tu_wait_step(pid_t pid, const char* dir, long step);

// The whole file (malloc'd; "" when missing), DIR/NAME, and DIR.log.WHICH (out or err).
char* tu_slurp(const char* path);
char* tu_file_in(const char* dir, const char* name);
char* tu_log(const char* dir, const char* which);
// Entries of dir whose name contains `part`.
int tu_count(const char* dir, const char* part);
// Remove dir `to`, copy dir `from` to it (cp -a); copy one file.
void tu_copy_dir(const char* from, const char* to);
void tu_copy_file(const char* from, const char* to);
// Delete DIR/model_<step>.bin and DIR/state_<step>.bin.
void tu_drop_ckpt(const char* dir, long step);
// The value of `key` (a number) in the metrics.jsonl training record of `step` of text; NAN when
// absent.
double tu_record(const char* jsonl, long step, const char* key);

#endif
