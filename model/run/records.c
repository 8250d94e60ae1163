// model/run/records.c: the training run's files and records (trainer.h): the logs opened with
// the run's header, the diagnostics' probe windows, samples, and the divergence record.
#include "model/run/trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dist.h"
#include "common/util.h"
#include "model/run/folder.h"
#include "model/run/header.h"
#include "model/sample.h"

const unsigned char* run_token_bytes(const void* tok, int id, size_t* len) {
    return tok ? tokenizer_token_bytes(tok, id, len) : NULL;
}

void run_write_sample(Trainer* t, long step) {
    const int n = t->cfg.sample_tokens, V = t->cfg.vocab_size;
    int* ids = mallocCheck(sizeof(int) * (size_t)(n + 1));
    int eot = t->tok ? tokenizer_eot(t->tok) : (V == 257 ? 256 : 50256);
    ids[0] = eot < V ? eot : 0;
    int len = gpt2_generate(&t->model, ids, 1, n, 1.0f, 40, -1, &t->ls.rng);
    printf("---- sample at step %ld ----\n", step); // a document's end shows as a break line
    sample_write(stdout, ids + 1, len - 1, eot, t->tok ? run_token_bytes : NULL, t->tok, 0);
    printf("\n--------------------------------\n");
    fflush(stdout);
    free(ids);
}

// The diagnostics (model/metrics.h) on probe_sequences windows of the validation split (the
// training split without one), spread evenly over its shards; a no-op when both intervals are 0.
void run_diagnostics_init(Trainer* t) {
    const Config* c = &t->cfg;
    const DataLoader* dl = t->have_val ? &t->val : &t->train;
    const int on = c->metrics_every > 0 || c->dump_attention_every > 0;
    const int T = t->have_val ? t->eval_T : c->seq_len, n = c->probe_sequences;
    const char* src = t->have_val ? c->val_data : c->train_data;
    char err[2048] = "", msg[2400]; // "SRC: ERR"
    int* probe = on ? dataloader_spread_tokens(dl, n, T, err, sizeof(err)) : NULL;
    dist_exit_if_failed(on && !probe, EXIT_USAGE, err); // every rank loads the probe tokens
    MetricsSetup ms = {.every = c->metrics_every,
                       .dump_every = c->dump_attention_every,
                       .sink_eps = c->sink_eps,
                       .tokens = probe,
                       .nseq = n,
                       .T = T,
                       .nthreads = t->nthreads};
    const int bad = metrics_init(&t->mt, &t->model, &ms, err, sizeof(err)) != 0;
    snprintf(msg, sizeof(msg), "%s: %s", src, err);
    dist_exit_if_failed(bad, EXIT_USAGE, msg);
    free(probe);
}

// OUT/config.conf, OUT/metrics.jsonl (cut back to `start` when resumed: what the resumed run
// writes again is dropped) and OUT/main.log, and the run's header: what precision ran, what MFU
// is measured against and the machine (model/run/header.h). A file that cannot be written ends
// every rank (exit 1), reported once.
void run_open_logs(Trainer* t, long start) {
    const Config* c = &t->cfg;
    char path[1100];
    snprintf(path, sizeof(path), "%s/config.conf", c->out_dir);
    const int root = dist_is_root(); // under mpirun only rank 0 writes files
    AtomicFile af = {.err = ""};
    dist_exit_if_failed(root && (atomic_open(&af, path) ||
                                 atomic_write(&af, t->config_text, strlen(t->config_text)) ||
                                 atomic_commit(&af)),
                        1, af.err);
    char err[2048] = ""; // (the other ranks write the same records to /dev/null)
    dist_exit_if_failed(
        (root && t->resumed && run_folder_resume_records(c->out_dir, start, err, sizeof(err))) ||
            runlog_open(&t->rl, root ? c->out_dir : NULL, t->resumed ? start : -1, err,
                        sizeof(err)) != 0,
        1, err);
    const RunHeader h = {.model = &t->model,
                         .cfg = c,
                         .precision_info = t->precision_info,
                         .peak_flops = t->peak.flops,
                         .peak = &t->peak_how,
                         .nthreads = t->nthreads,
                         .dp_line = t->dp ? strstr(t->config_text, "# data parallel:") : NULL,
                         .start = start,
                         .resumed = t->resumed,
                         .changes = &t->changes,
                         .lr_was = t->lr_was,
                         .lr_now = lr_schedule_get(&t->sched, (int)start)};
    run_header_write(&h, &t->rl, &t->j); // model/run/header.h
}

// The record of a run that stops on a non-finite loss or gradient (nan_policy = stop, or more than
// max_skips consecutive skips): {"step", "event": "diverged", "loss", "grad_norm", "where",
// "last_finite_step", "last_finite_loss", "nan_policy"} (non-finite numbers, and a last finite
// step from before a resume, are null), so that a learning-rate sweep reads the divergence from
// metrics.jsonl alone (docs/ablations.md, "Learning-rate sensitivity").
void run_record_divergence(Trainer* t, long step, double loss, double norm, const char* where,
                           long last_step, double last_loss) {
    JsonBuf* j = runlog_event(&t->j, step, "diverged");
    json_num(j, "loss", loss);
    json_num(j, "grad_norm", norm);
    json_str(j, "where", where);
    json_num(j, "last_finite_step", last_step >= 0 ? (double)last_step : NAN);
    json_num(j, "last_finite_loss", last_loss);
    json_str(j, "nan_policy", t->cfg.nan_policy);
    runlog_end(&t->rl, j);
}
