// model/run_header.c: the header of a training run on the console, in main.log and as the run
// event of metrics.jsonl (run_header.h).
#include "model/run_header.h"

#include <stdio.h>
#include <string.h>

#include "common/cpuinfo.h"
#include "common/matmul.h"
#include "common/peak.h"

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
