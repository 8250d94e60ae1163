// model/run/header.c: the header of a training run on the console, in main.log and as the run
// event of metrics.jsonl (header.h).
#include "model/run/header.h"

#include <stdio.h>
#include <string.h>

#include "common/cpuinfo.h"
#include "common/dist.h"
#include "common/matmul.h"
#include "common/peak.h"

// The keys a resumed run changed: a line each in main.log and on stderr, an event record each.
static void run_header_changes(const RunHeader* h, RunLog* rl, JsonBuf* j) {
    const ResumeChanges* c = h->changes;
    for (int i = 0; c && i < c->n; i++) {
        const ResumeChange* ch = &c->ch[i];
        char line[CONFIG_STR * 2 + 200];
        snprintf(line, sizeof(line), "resume_change at step %ld: %s '%s' -> '%s'", h->start,
                 ch->key, ch->was, ch->now);
        fprintf(rl->log, "# %s\n", line);
        if (dist_is_root()) fprintf(stderr, "attnlab: %s\n", line);
        runlog_event(j, h->start, "resume_change");
        json_str(j, "key", ch->key);
        json_str(j, "was", ch->was);
        json_str(j, "now", ch->now);
        json_num(j, "lr_was", h->lr_was);
        json_num(j, "lr_now", h->lr_now);
        runlog_end(rl, j);
    }
    if (c && c->n && h->lr_was != h->lr_now) {
        fprintf(rl->log, "# resume_change at step %ld: learning rate %.6g -> %.6g\n", h->start,
                h->lr_was, h->lr_now);
        if (dist_is_root())
            fprintf(stderr,
                    "attnlab: the learning rate of step %ld is %.6g under the changed keys (%.6g "
                    "under the checkpoint's)\n",
                    h->start, h->lr_now, h->lr_was);
    }
}

void run_header_write(const RunHeader* h, RunLog* rl, JsonBuf* j) {
    const GPT2* m = h->model;
    const Config* c = h->cfg;
    FILE* log = rl->log;
    const char* pname = mm_precision_name(m->precision);
    printf("attnlab | %s | %d layers, %d heads, %d wide, block %d | %.2fM parameters | "
           "B=%d T=%d accum=%d | %d threads | %s peak %.1f GFLOP/s\n",
           m->attention, m->cfg.n_layer, m->cfg.n_head, m->cfg.n_embd, m->cfg.block_size,
           (double)m->num_params / 1e6, c->batch_size, c->seq_len, c->grad_accum, h->nthreads,
           pname, h->peak_flops / 1e9);
    char how[1600] = "";
    if (h->peak) peak_describe(h->peak, how, sizeof(how));
    printf("precision: %s; mfu is against the %s matmul peak above%s%s%s; model FLOPs/token "
           "%.6g\n",
           h->precision_info, pname, how[0] ? " (" : "", how, how[0] ? ")" : "",
           gpt2_flops_per_token(m, c->seq_len));
    const char* dpl = h->dp_line;
    const int dpn = dpl ? (int)strcspn(dpl, "\n") + 1 : 0; // the global batch
    if (dpl) printf("%.*s", dpn - 2, dpl + 2);
    fflush(stdout);
    fprintf(log, "# precision: %s | %s peak %.1f GFLOP/s\n", h->precision_info, pname,
            h->peak_flops / 1e9);
    if (how[0]) fprintf(log, "# peak: %s\n", how);
    char cpu[256], isa[256]; // recorded so that a result names the machine that trained it
    cpuinfo_describe(cpu, sizeof(cpu), isa, sizeof(isa));
    fprintf(log, "# cpu: %s | flags: %s | %d threads\n", cpu, isa, h->nthreads);
    if (dpl) fprintf(log, "%.*s", dpn, dpl);
    if (h->resumed) {
        fprintf(log, "# resumed from step %ld\n", h->start);
        run_header_changes(h, rl, j);
        return;
    }
    char against[128];
    snprintf(against, sizeof(against), // the figures vary by run: they are in main.log
             "%s matmul peak, 90th percentile of short trials, cached per machine", pname);
    runlog_event(j, h->start, "run");
    json_str(j, "precision", pname);
    json_str(j, "precision_info", h->precision_info);
    json_str(j, "mfu_against", against);
    json_str(j, "cpu", cpu);
    json_str(j, "cpu_flags", isa);
    json_int(j, "threads", h->nthreads);
    runlog_end(rl, j);
}
