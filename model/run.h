// model/run.h: one training run: model, data, optimizer, logs and checkpoints, and the loop
// that drives them. train.c parses the command line and calls run_setup / run_train.
#ifndef ATTNLAB_RUN_H
#define ATTNLAB_RUN_H

#include <signal.h>
#include <stdio.h>

#include "common/config.h"
#include "common/rng.h"
#include "data/dataloader.h"
#include "data/tokenizer.h"
#include "model/checkpoint.h"
#include "model/gpt2.h"
#include "optim/optim.h"
#include "optim/schedule.h"

typedef struct {
    Config cfg;
    GPT2 model;
    DataLoader train, val;
    int have_val;
    Optimizer opt;
    OptimHParams oh;
    OptimRange ranges[GPT2_MAX_SPECS];
    int nranges;
    LrSchedule sched;
    Tokenizer* tok; // NULL if the tokenizer files are missing (samples print ids)
    RunState rs;
    int* inputs; // (B*T)
    int* targets;
    FILE* jsonl;
    FILE* log;
    char* config_text; // resolved config (written to out_dir and into checkpoints)
    int nthreads;
    double peak_flops; // measured matmul FLOP/s in this run's precision with nthreads (for MFU)
    int peak_raised;   // a step's rate beat the measured peak, which was raised to it
    char precision_info[384]; // the precision in effect and oneDNN's implementation
    int eval_T;
    struct RunDist* dist; // data parallelism (model/run_dist.c); NULL in a single process
} Run;

// Everything that can fail on bad input happens here, before anything is written:
// returns -1 with err (the caller exits 2).
int run_setup(Run* r, const Config* cfg, int nthreads, char* err, size_t errcap);
// The loop. Returns the process exit code (0, 1 on I/O failure, 3 on non-finite values).
// *stop set asynchronously (SIGINT/SIGTERM) ends the run after the current step with a
// checkpoint.
int run_train(Run* r, volatile sig_atomic_t* stop);
void run_free(Run* r);

// Mean validation loss over the first eval_steps batches (sequential, from the start).
float run_evaluate(Run* r);

// Measured matmul throughput (FLOP/s) in the current kernel precision (fp32: sgemm; bf16: oneDNN
// on operands already in bf16) with n threads each multiplying its own 512x512 matrices, the way
// the trainer calls the kernels: the best of `trials` short trials (a busy machine makes single
// trials come out low). About 0.05 s per trial.
double run_measure_sgemm_peak(int nthreads, int trials);

#endif
