// model/run/trainer.h: the state of one training run (train.c's Trainer: the config, the model,
// the loaders, the optimizer, the loop state and the run's files) and the pieces of the run that
// train.c's script calls by name: its checkpoint pair, saved and resumed (model/run/checkpoints.c),
// and its files and records: the logs and the run header, the diagnostics' probe windows,
// samples and the divergence record (model/run/records.c). Only train.c (and tests) include it.
#ifndef ATTNLAB_RUN_TRAINER_H
#define ATTNLAB_RUN_TRAINER_H

#include <stddef.h>

#include "common/config.h"
#include "common/eta.h"
#include "common/json.h"
#include "common/matmul.h"
#include "common/peak.h"
#include "common/resume_keys.h"
#include "common/run_state.h"
#include "common/runlog.h"
#include "data/dataloader.h"
#include "data/mc.h"
#include "data/tokenizer.h"
#include "model/gpt2.h"
#include "model/metrics.h"
#include "optim/data_parallel.h"
#include "optim/optim.h"
#include "optim/schedule.h"

typedef struct {
    Config cfg;
    GPT2* setup; // preflight's translation of cfg (settings, attention; no tensors), until
                 // model_open has built the model from it
    GPT2 model;
    DataLoader train, val;
    int have_train, have_val;
    Optimizer opt;    // with zero = 1 under mpirun: this rank's shard of the state
    DataParallel* dp; // N ranks (optim/data_parallel.h); NULL in a single process
    OptimHParams oh;
    OptimRange ranges[GPT2_MAX_SPECS]; // one per tensor, with its weight-decay flag
    int nranges;
    LrSchedule sched;
    Tokenizer* tok; // NULL if the tokenizer files are missing (samples print ids)
    McSet mc;       // mc_data, scored at every evaluation (data/mc.h); n = 0 without one
    LoopState ls;
    DataLoaderState data_pos; // the training loader's position as last saved or loaded
    int resumed;
    ResumeChanges changes; // resumed: the keys resume_change let differ from the checkpoint's
    double lr_was;         // resumed: the start step's learning rate under the checkpoint's keys
    int *inputs, *targets; // a step's micro-batches (grad_accum, B, T), or (B, eval_T)
    int eval_T;
    RunLog rl; // OUT/metrics.jsonl and OUT/main.log, every write checked (common/runlog.h)
    JsonBuf j;
    Metrics mt;
    char* config_text; // the resolved config: OUT/config.conf and every model file
    int nthreads;
    MMPeak peak;        // matmul FLOP/s in this run's precision (MFU is against it)
    PeakStats peak_how; // how that peak was measured: trials, spread, cache (common/peak.h)
    Eta eta;            // step and phase costs, for the ETA (common/eta.h)
    char precision_info[384];
} Trainer;

// ---- the checkpoint pair: OUT/model_<step>.bin (model/checkpoint.h), then OUT/state_<step>.bin
// (common/run_state.h: the loop, data and optim sections, each written by its owner)

// A checkpoint counts only when both files exist and verify; then the rotation keeps the newest
// keep_last pairs. Under mpirun every rank calls it (the optimizer state is gathered to rank 0,
// which alone writes). 0, or -1 after reporting the failure (the previous checkpoints are intact).
int run_checkpoint_save(Trainer* t, long step);
// resume = 1: load the newest step whose model and state both verify and may be continued
// exactly. The start step (0 when there is nothing to resume), or -1 when that checkpoint
// already ends the run; a failure is agreed on by every rank and reported once (exit 2).
long run_checkpoint_resume(Trainer* t);

// ---- the run's files and records

// OUT/config.conf, OUT/metrics.jsonl and OUT/main.log opened, and the run's header written
// (model/run/header.h). A file that cannot be written ends every rank (exit 1), reported once.
void run_open_logs(Trainer* t, long start);
// The diagnostics (model/metrics.h) set up on their probe windows; bad data ends every rank
// (exit 2), reported once.
void run_diagnostics_init(Trainer* t);
// A token's bytes for sample text and attention dumps (tok: a Tokenizer, or NULL: none).
const unsigned char* run_token_bytes(const void* tok, int id, size_t* len);
// A sample of sample_tokens tokens from the model at `step`, on stdout.
void run_write_sample(Trainer* t, long step);
// The "diverged" record of a run that stops on a non-finite loss or gradient.
void run_record_divergence(Trainer* t, long step, double loss, double norm, const char* where,
                           long last_step, double last_loss);

#endif
