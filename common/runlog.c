// common/runlog.c: the run's record files of runlog.h, every write checked.
#include "common/runlog.h"

#include <errno.h>
#include <string.h>

#include "common/util.h"

void runlog_fail(RunLog* r, const char* err) {
    if (!r->err[0]) util_strlcpy(r->err, err, sizeof(r->err));
}

int runlog_open(RunLog* r, const char* out_dir, long resumed_at, char* err, size_t errcap) {
    memset(r, 0, sizeof(*r));
    snprintf(r->jsonl_path, sizeof(r->jsonl_path), "%s%s", out_dir ? out_dir : "/dev/null",
             out_dir ? "/metrics.jsonl" : "");
    snprintf(r->log_path, sizeof(r->log_path), "%s%s", out_dir ? out_dir : "/dev/null",
             out_dir ? "/main.log" : "");
    // the records the resumed run writes again at its first step: validation, multiple choice
    if (out_dir && resumed_at >= 0 &&
        (jsonl_keep_steps(r->jsonl_path, resumed_at, "\"val_loss\":", err, errcap) ||
         jsonl_keep_steps(r->jsonl_path, resumed_at, "\"kind\":\"mc\"", err, errcap)))
        return -1;
    const char* mode = resumed_at >= 0 ? "a" : "w";
    const char* bad = (r->jsonl = fopen(r->jsonl_path, mode)) == NULL ? r->jsonl_path
                      : (r->log = fopen(r->log_path, mode)) == NULL   ? r->log_path
                                                                      : NULL;
    if (!bad) return 0;
    snprintf(err, errcap, "%s: cannot open: %s", bad, strerror(errno));
    if (r->jsonl) fclose(r->jsonl);
    r->jsonl = NULL;
    return -1;
}

// One record: j as a line of metrics.jsonl (flushed), checked.
static void runlog_record(RunLog* r, const JsonBuf* j) {
    if (json_write_line(j, r->jsonl) == 0) return;
    char err[1300];
    snprintf(err, sizeof(err), "%s: write failed: %s", r->jsonl_path, strerror(errno));
    runlog_fail(r, err);
}

JsonBuf* runlog_event(JsonBuf* j, long step, const char* name) {
    json_begin(j);
    json_int(j, "step", step);
    json_str(j, "event", name);
    return j;
}

void runlog_end(RunLog* r, JsonBuf* j) {
    json_end(j);
    runlog_record(r, j);
}

int runlog_check(RunLog* r) {
    char err[1300];
    if (util_fcheck(r->jsonl, r->jsonl_path, err, sizeof(err)) ||
        util_fcheck(r->log, r->log_path, err, sizeof(err)))
        runlog_fail(r, err);
    return r->err[0] ? -1 : 0;
}

int runlog_close(RunLog* r) {
    char err[1300];
    if (r->jsonl && util_fclose_checked(r->jsonl, r->jsonl_path, err, sizeof(err)))
        runlog_fail(r, err);
    if (r->log && util_fclose_checked(r->log, r->log_path, err, sizeof(err))) runlog_fail(r, err);
    r->jsonl = r->log = NULL;
    return r->err[0] ? -1 : 0;
}
