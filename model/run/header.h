// model/run/header.h: the header of a training run, written once when its logs open
// (run_open_logs, model/run/records.c): on the console the banner (attention, model shape,
// parameters, batch, threads, the matmul precision and its measured peak), what MFU is measured
// against (the peak's trials, spread and cache, common/peak.h) and, under mpirun, the global batch;
// in main.log the precision, the peak's figures, the CPU with its kernel-selecting flags and the
// thread count, so that a result names the machine that trained it; and the "run" event of
// metrics.jsonl (precision, MFU reference, CPU). A resumed run notes the resume in main.log
// instead of a second run event, so that its metrics.jsonl equals an uninterrupted run's; the
// keys it changes (resume_change) are recorded, each in main.log, on stderr and as a
// "resume_change" event of metrics.jsonl at the resumed step, with the learning rate of that
// step under the saved and the new keys.
#ifndef ATTNLAB_RUN_HEADER_H
#define ATTNLAB_RUN_HEADER_H

#include "common/config.h"
#include "common/json.h"
#include "common/peak.h"
#include "common/resume_keys.h"
#include "common/runlog.h"
#include "model/gpt2.h"

typedef struct {
    const GPT2* model;
    const Config* cfg;          // the run's config (batch_size, seq_len, grad_accum)
    const char* precision_info; // the precision in effect, as mm_resolve_precision describes it
    double peak_flops;          // the measured matmul peak MFU is against (MMPeak.flops)
    const PeakStats* peak;      // how it was measured: trials, spread, cache (NULL: not said)
    int nthreads;
    const char* dp_line;          // the resolved config's "# data parallel: ..." line, or NULL
    long start;                   // the run's first step
    int resumed;                  // 1: the run continues from the checkpoint at `start`
    const ResumeChanges* changes; // resumed: the keys changed (resume_change), or NULL
    double lr_was, lr_now;        // resumed with changes: step start's learning rate before/after
} RunHeader;

// Print the banner (stdout, flushed), write the header lines to rl's main.log and, unless
// resumed, the run event (built in j) to its metrics.jsonl; the RunLog checks every write.
void run_header_write(const RunHeader* h, RunLog* rl, JsonBuf* j);

#endif
