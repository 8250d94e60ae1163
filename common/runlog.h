// common/runlog.h: a training run's record files, OUT/metrics.jsonl and OUT/main.log, with every
// write checked. A write that fails (disk full, quota, I/O error) is kept as the first error,
// naming the file; the trainer stops at its next step boundary (docs/interop.md, "Crash
// safety"). Under mpirun the ranks other than 0 write the same records to /dev/null.
#ifndef ATTNLAB_RUNLOG_H
#define ATTNLAB_RUNLOG_H

#include <stdio.h>

#include "common/json.h"

typedef struct {
    FILE *jsonl, *log;
    char jsonl_path[1100], log_path[1100];
    char err[2048]; // the first failed write ("" while none)
} RunLog;

// Open OUT/metrics.jsonl and OUT/main.log (out_dir NULL: both /dev/null). resumed_at >= 0 appends
// after cutting metrics.jsonl back to that step (jsonl_keep_steps: the resumed run writes the
// step's validation and multiple-choice records again; a cut last line is dropped); -1
// truncates. 0, or -1 with err.
int runlog_open(RunLog* r, const char* out_dir, long resumed_at, char* err, size_t errcap);
// An event record ({"step": STEP, "event": NAME, ...}): runlog_event starts it in j (json_begin,
// then the two keys) and returns j for the event's own fields; runlog_end closes a record
// (json_end) and writes it (runlog_record).
JsonBuf* runlog_event(JsonBuf* j, long step, const char* name);
void runlog_end(RunLog* r, JsonBuf* j);
// Flush both files and check every write since the last check (main.log lines and records other
// code wrote into the streams). 0, or -1 with r->err set.
int runlog_check(RunLog* r);
// Keep `err` as the run's first write error (a failed checkpoint, a failed attention dump).
void runlog_fail(RunLog* r, const char* err);
// Close both files, checked (fclose included). 0, or -1 with r->err set. Safe on a RunLog that
// was never opened (all zero).
int runlog_close(RunLog* r);

#endif
