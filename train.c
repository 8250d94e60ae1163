// train.c: the attnlab trainer, to be read top to bottom as the script of a run:
//   setup     config -> model (model_open: from scratch or init_from) -> data loaders ->
//             optimizer, schedule, precision; everything that can fail on bad input fails here,
//             before anything is written (exit 2);
//   the loop  resume from the newest complete checkpoint, open the logs, then per step:
//             evaluation and sampling at their intervals; micro-batches (forward + backward,
//             gradients accumulate); gradients ready (global norm, non-finite guard); clipping;
//             the optimizer step; logs, diagnostics and checkpoint rotation;
//   teardown  the final checkpoint (also after SIGINT/SIGTERM/SIGHUP), free.
// Nothing is lost silently: every record and log line is checked; a failed write stops the run
// (exit 1) before any newer checkpoint, so resume = 1 redoes the steps whose records were lost.
// Usage: ./train CONFIG [key=value | --key=value ...]; ./train --help; ./train --list-attention
// [NAME]; ./train --list-metrics; ./train CONFIG [overrides] --print-config.
// Data parallel: mpirun -np N ./train CONFIG ... (docs/distributed.md, optim/data_parallel.h):
// only rank 0 writes the console and files; an error every rank can meet at the same point is
// agreed on with dist_exit_if_failed and reported once (common/dist.h).
//
// Where the pieces live: Config (common/config.h); model_open, GPT2, gpt2_* (model/open.h,
// model/gpt2.h); model files (model/checkpoint.h); diagnostics (model/metrics.h); DataLoader
// (data/dataloader.h); Optimizer, schedules, clipping (optim/). The run's own code is in
// model/run/: the Trainer, the checkpoint pair (the model file and the run-state file, saved and
// resumed) and the run's files and records (trainer.h), the run folder and its lock (folder.h),
// the memory estimate (memory.h) and the loss-spike window (spike.h).
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/cpuinfo.h"
#include "common/dist.h"
#include "common/eta.h"
#include "common/json.h"
#include "common/matmul.h"
#include "common/peak.h"
#include "common/run_state.h"
#include "common/runlog.h"
#include "common/util.h"
#include "data/dataloader.h"
#include "data/mc.h"
#include "data/tokenizer.h"
#include "model/checkpoint.h"
#include "model/gpt2.h"
#include "model/mc_eval.h"
#include "model/metrics.h"
#include "model/metrics_table.h"
#include "model/open.h"
#include "model/run/folder.h"
#include "model/run/memory.h"
#include "model/run/spike.h"
#include "model/run/trainer.h"
#include "model/settings.h"
#include "optim/data_parallel.h"
#include "optim/optim.h"
#include "optim/schedule.h"

// SIGINT, SIGTERM, SIGHUP: checkpoint after this step and stop (exit EXIT_STOPPED). SIGUSR1:
// checkpoint after this step and go on (Slurm's --signal=USR1@SECONDS before a time limit).
// g_usr1 counts this rank's SIGUSR1s (only the handler writes it; SIGUSR1 is blocked while it
// runs). The n-th SIGUSR1 of every rank is one request: mpirun and scancel deliver each signal
// to every rank, which can see it at different step boundaries, and the job checkpoints once,
// when the largest count over the ranks passes the number of SIGUSR1 checkpoints made.
static volatile sig_atomic_t g_stop = 0, g_usr1 = 0;
static void on_signal(int sig) {
    if (sig == SIGUSR1)
        g_usr1 = g_usr1 + 1;
    else
        g_stop = 1;
}
// Requests agreed on by every rank at each step boundary (dist_agree_v: the highest wins).
enum { REQ_NONE, REQ_CKPT, REQ_STOP, REQ_IO };

// =============================================================================================
// setup

// The model's gradient hook under mpirun: the in-order gradient chain of optim/data_parallel.h.
static int grad_hook(void* ctx, int seg, int phase) {
    Trainer* t = ctx;
    return dp_grad_hook(t->dp, t->model.grads, seg, phase, t->model.mean_loss, t->model.step + 1);
}

// N ranks (mpirun -np N): the optimizer shard (zero = 1), the gradient segments and hook, and
// the global batch in the resolved config. Nothing in a single process.
static int setup_data_parallel(Trainer* t, char* err, size_t errcap) {
    const Config* c = &t->cfg;
    GPT2* m = &t->model;
    dist_set_timeout(c->dist_timeout);
    if (dist_size() < 2) return 0; // (preflight refused the settings it cannot train)
    const int nseg = gpt2_grad_segments(m);
    if (dp_new(&t->dp, c->grad_accum, c->zero, strcmp(c->dp_reduce, "allreduce") == 0,
               m->num_params, nseg, &t->opt, err, errcap))
        return -1;
    for (int sgi = 0; sgi < nseg; sgi++) {
        size_t off[GPT2_MAX_SPECS], len[GPT2_MAX_SPECS];
        dp_set_segment(t->dp, sgi, gpt2_segment_slices(m, sgi, off, len), off, len);
    }
    m->grad_hook = grad_hook;
    m->grad_hook_ctx = t;
    char line[256];
    dp_describe(t->dp, c->batch_size, c->seq_len, line, sizeof(line));
    size_t len = strlen(t->config_text);
    t->config_text = reallocCheck(t->config_text, len + strlen(line) + 1);
    memcpy(t->config_text + len, line, strlen(line) + 1);
    return 0;
}

// Every check of the config and its data that training makes before step 1, with nothing of the
// model allocated: sizes and settings, optimizer, precision, the attention spec and attn.* keys
// (the config translated once, into `shell`: settings in shell->cfg, attention set up, no
// tensors), the memory estimate against the memory available (the allocation code run on the
// shell in size-only mode), schedule, data parallelism's limits, and the shard globs (opened and
// their headers probed). 0, or -1 with err (main exits 2).
static int preflight_checks(const Config* c, int nthreads, Trainer* t, GPT2* shell, char* err,
                            size_t errcap) {
    const int B = c->batch_size, T = c->seq_len;
    const int eval_T = c->eval_seq_len > 0 ? c->eval_seq_len : T;
    if (gpt2_config_from(&shell->cfg, c, err, errcap)) return -1;
    const GPT2Config gc = shell->cfg;
    const OptimizerDef* od = optim_lookup(c->optimizer);
    if (!od) {
        snprintf(err, errcap, "key 'optimizer': unknown optimizer '%s'", c->optimizer);
        return -1;
    }
    MMPrecision prec;
    char info[256];
    if (mm_resolve_precision(c->precision, &prec, info, sizeof(info), err, errcap)) return -1;
    if (dist_is_root()) cpuinfo_blas_core_warn(stderr, "attnlab"); // a forced, slower sgemm core
    if (gpt2_setup_attention(shell, c, err, errcap)) return -1;
    MemEstimate me; // refuse before allocating when the estimate exceeds the available memory
    memory_estimate(&me, shell, &gc, B, T > eval_T ? T : eval_T, od->state_per_param, prec,
                    nthreads);
    if (memory_check(&me, memory_available(), err, errcap)) return -1;
    LrSchedule sched;
    if (lr_schedule_from_config(&sched, c)) {
        snprintf(err, errcap, "key 'lr_schedule': unknown schedule '%s'", c->lr_schedule);
        return -1;
    }
    if (dist_size() >= 2 && (gc.residual != GPT2_RESID_STANDARD || gc.value_residual)) {
        snprintf(err, errcap,
                 "data parallel training (mpirun) supports residual = standard and "
                 "value_residual = 0 only: their gradients accumulate across the segments the "
                 "ranks pass on");
        return -1;
    }
    if (c->max_steps > 0 && !c->train_data[0]) {
        snprintf(err, errcap,
                 "key 'train_data' is empty: give a glob of llm.c shards "
                 "(scripts/setup corpus mobydick makes some)");
        return -1;
    }
    if (c->max_steps == 0 && !c->val_data[0]) {
        snprintf(err, errcap, "max_steps = 0 evaluates only, but 'val_data' is empty");
        return -1;
    }
    DataLoader tr, va;
    if (c->max_steps > 0 &&
        dataloader_init(&tr, c->train_data, B, T, c->shuffle, (uint64_t)c->seed, err, errcap))
        return -1;
    if (c->val_data[0] && dataloader_init(&va, c->val_data, B, eval_T, 0, 0, err, errcap)) {
        if (c->max_steps > 0) dataloader_free(&tr);
        return -1;
    }
    if (t) { // the run keeps them
        t->sched = sched;
        if ((t->have_train = c->max_steps > 0)) t->train = tr;
        if ((t->have_val = c->val_data[0] != '\0')) t->val = va;
    } else {
        if (c->max_steps > 0) dataloader_free(&tr);
        if (c->val_data[0]) dataloader_free(&va);
    }
    return 0;
}

// preflight_checks on a model shell of its own. --print-config runs it alone (t NULL); setup()
// keeps the schedule and the loaders in t, and the shell in t->setup for model_open, which builds
// the model from it without translating the config again.
static int preflight(const Config* c, int nthreads, Trainer* t, char* err, size_t errcap) {
    GPT2* shell = callocCheck(1, sizeof(GPT2)); // large: the per-layer attention
    const int rc = preflight_checks(c, nthreads, t, shell, err, errcap);
    if (rc == 0 && t)
        t->setup = shell;
    else
        free(shell);
    return rc;
}

// Everything that can fail on bad input (preflight, then the model file of init_from): returns
// -1 with err (main exits 2).
static int setup(Trainer* t, const Config* cfg, int nthreads, char* err, size_t errcap) {
    memset(t, 0, sizeof(*t));
    t->cfg = *cfg;
    t->nthreads = nthreads;
    const Config* c = &t->cfg;
    const int B = c->batch_size, T = c->seq_len;
    t->eval_T = c->eval_seq_len > 0 ? c->eval_seq_len : T;
    const int Tmax = T > t->eval_T ? T : t->eval_T;
    if (preflight(c, nthreads, t, err, errcap)) return -1;
    const OptimizerDef* od = optim_lookup(c->optimizer); // (preflight checked both)
    MMPrecision prec;
    if (mm_resolve_precision(c->precision, &prec, t->precision_info, sizeof(t->precision_info), err,
                             errcap))
        return -1;
    // the model: built from the config, initialised from the seed, init_from's weights loaded
    ModelOpen mo = {.run = c, .setup = t->setup};
    const int bad_model = model_open(&t->model, c->init_from, &mo, err, errcap) != 0;
    free(t->setup);
    t->setup = NULL;
    if (bad_model) return -1;
    if (mo.note[0])
        fprintf(stderr,
                "attnlab: init_from %s: tensors not in the file keep their initial "
                "values: %s\n",
                c->init_from, mo.note);
    GPT2* m = &t->model;
    gpt2_alloc_acts(m, B, Tmax, nthreads);
    const size_t nbuf = (size_t)B * (Tmax > T * c->grad_accum ? Tmax : T * c->grad_accum);
    t->inputs = mallocCheck(sizeof(int) * nbuf);
    t->targets = mallocCheck(sizeof(int) * nbuf);
    // the optimizer over the parameter table's tensors
    optim_init(&t->opt, od, m->num_params);
    t->oh = (OptimHParams){.beta1 = c->beta1,
                           .beta2 = c->beta2,
                           .eps = c->eps,
                           .weight_decay = c->weight_decay,
                           .wd_mode = optim_wd_mode_from_name(c->weight_decay_mode),
                           .lr_max = c->lr};
    t->nranges = m->nspecs;
    for (int i = 0; i < m->nspecs; i++)
        t->ranges[i] = (OptimRange){m->specs[i].offset, m->specs[i].size, m->specs[i].decay};
    char terr[512];
    t->tok = tokenizer_load(c->tokenizer, c->tokenizer_dir, terr, sizeof(terr));
    if (!t->tok && c->sample_every > 0)
        fprintf(stderr, "attnlab: samples will print token ids: %s\n", terr);
    if (c->mc_data[0] && (mc_load(&t->mc, c->mc_data, t->tok, c->vocab_size, err, errcap) ||
                          mc_check_window(&t->mc, c->mc_examples, Tmax, err, errcap)))
        return -1;
    rng_seed(&t->ls.rng, (uint64_t)c->seed ^ 0x5eedULL);
    t->ls.best_val = -1.0f;
    gpt2_set_precision(m, prec);
    t->config_text = gpt2_config_text(m, c, t->precision_info);
    if (t->have_train) // the training files, so that resume = 1 can refuse changed data
        run_state_append_data_text(&t->config_text, t->train.files, t->train.nfiles);
    if (peak_get(&t->peak_how, nthreads, t->precision_info, err, errcap)) return -1;
    t->peak.flops = t->peak_how.peak;
    return setup_data_parallel(t, err, errcap);
}

static void teardown(Trainer* t) {
    run_lock_release(); // (rank 0: the out_dir lock)
    dp_free(t->dp);
    t->model.grad_hook = NULL;
    gpt2_free(&t->model);
    if (t->have_train) dataloader_free(&t->train);
    if (t->have_val) dataloader_free(&t->val);
    optim_free(&t->opt);
    if (t->tok) tokenizer_free(t->tok);
    mc_free(&t->mc);
    free(t->inputs);
    free(t->targets);
    free(t->config_text);
    json_free(&t->j);
}

// =============================================================================================
// pieces of the loop

// Mean validation loss over the first eval_steps batches (sequential, from the start), in
// evaluation mode (step -1: stochastic variants are deterministic).
static float evaluate(Trainer* t) {
    const int B = t->cfg.batch_size, T = t->eval_T;
    GPT2* m = &t->model;
    const long saved = m->step;
    m->step = -1;
    dataloader_reset(&t->val);
    double sum = 0;
    char err[256];
    for (int i = 0; i < t->cfg.eval_steps; i++) {
        dataloader_next(&t->val, t->inputs, t->targets);
        if (tokens_check_range(t->inputs, (size_t)B * T, t->cfg.vocab_size, "val_data", err,
                               sizeof(err)) ||
            tokens_check_range(t->targets, (size_t)B * T, t->cfg.vocab_size, "val_data", err,
                               sizeof(err)))
            die(EXIT_USAGE, "%s", err); // rank 0 alone evaluates
        gpt2_forward(m, t->inputs, t->targets, B, T);
        sum += m->mean_loss;
    }
    m->step = saved;
    return (float)(sum / t->cfg.eval_steps);
}

// =============================================================================================
// the loop

static int train(Trainer* t) {
    const Config* c = &t->cfg;
    GPT2* m = &t->model;
    char err[2048];
    dist_exit_if_failed(util_mkdirs(c->out_dir, err, sizeof(err)) != 0, 1, err);
    // one run per out_dir (model/run/folder.h): rank 0 takes its lock, checks a new run's folder
    dist_exit_if_failed(dist_is_root() && run_folder_open(c, err, sizeof(err)), EXIT_USAGE, err);
    if (dist_is_root()) util_remove_stale_temps(c->out_dir); // of writes a killed run left
    const long start = run_checkpoint_resume(t);
    if (start < 0) return 0; // resume = 1 on a finished run: nothing written
    json_init(&t->j);
    run_open_logs(t, start);
    run_diagnostics_init(t);
    const int B = c->batch_size, T = c->seq_len, accum = c->grad_accum;
    const size_t BT = (size_t)B * T;
    eta_init(&t->eta, t->have_val, c->eval_every, c->sample_every, c->metrics_every,
             c->dump_attention_every, c->checkpoint_every);
    int rc = 0, req = REQ_NONE, usr1_done = 0; // SIGUSR1 checkpoints made
    long step = start;
    SpikeWindow spikes = {.n = 0};
    const int root = dist_is_root(), N = dp_size(t->dp);
    long last_step = -1; // the last step whose loss was finite (-1: none in this process)
    double last_loss = NAN;
    for (;; step++) {
        const int last = step >= c->max_steps;
        // ---- evaluation and samples (at step 0, every eval_every / sample_every, and the end)
        double p0 = util_now(); // (each phase's cost goes into the ETA)
        if (root && t->have_val && ((c->eval_every > 0 && step % c->eval_every == 0) || last)) {
            float vl = evaluate(t);
            if (t->ls.best_val < 0 || vl < t->ls.best_val) t->ls.best_val = vl;
            json_begin(&t->j);
            json_int(&t->j, "step", step);
            json_num(&t->j, "val_loss", vl);
            runlog_end(&t->rl, &t->j);
            fprintf(t->rl.log, "step %ld val_loss %f\n", step, (double)vl);
            printf("step %ld | val loss %.4f\n", step, (double)vl);
            fflush(stdout);
            eta_add(&t->eta, ETA_EVAL, util_now() - p0);
        }
        if (root && t->mc.n && ((c->eval_every > 0 && step % c->eval_every == 0) || last)) {
            p0 = util_now(); // rank 0 alone evaluates
            if (mc_log(&t->mc, c->mc_examples, m->T, mc_eval_score, m, step, &t->rl, &t->j, err,
                       sizeof(err)))
                die(EXIT_USAGE, "%s", err);
            eta_add(&t->eta, ETA_EVAL, util_now() - p0);
        }
        if (root && c->sample_every > 0 && step > 0 && (step % c->sample_every == 0 || last)) {
            p0 = util_now();
            run_write_sample(t, step);
            eta_add(&t->eta, ETA_SAMPLE, util_now() - p0);
        }
        if (last) break;

        // ---- one optimizer step: this rank's micro-batches of the global batch, then in one
        // collective the ranks agree on their tokens (one outside the vocabulary on any rank ends
        // every rank, reported once) and on the requests: a stop (SIGINT/SIGTERM/SIGHUP on any
        // rank: every rank stops together, the loader back before the step's batches), a failed
        // write of rank 0's files (stop, no newer checkpoint), a checkpoint after this step
        // (SIGUSR1)
        double t0 = util_now();
        DataLoaderState at_step;
        dataloader_get_state(&t->train, &at_step);
        int bad = 0;
        for (int k = 0; k < accum; k++) {
            int *in = t->inputs + k * BT, *tg = t->targets + k * BT;
            dataloader_next_slice(&t->train, dp_rank(t->dp), N, in, tg);
            bad = bad ||
                  tokens_check_range(in, BT, t->cfg.vocab_size, "train_data", err, sizeof(err)) ||
                  tokens_check_range(tg, BT, t->cfg.vocab_size, "train_data", err, sizeof(err));
        }
        int agree[2] = {root && runlog_check(&t->rl) ? REQ_IO
                        : g_stop                     ? REQ_STOP
                                                     : REQ_NONE,
                        (int)g_usr1};
        dist_agree_v(bad, EXIT_USAGE, err, agree, 2, "stop agreement");
        req = agree[0];
        if (agree[1] > usr1_done) { // a SIGUSR1 no checkpoint has answered yet, on some rank
            usr1_done = agree[1];
            if (req == REQ_NONE) req = REQ_CKPT;
        }
        if (req >= REQ_STOP) {
            ASSERT(dataloader_set_state(&t->train, &at_step, err, sizeof(err)) == 0);
            break;
        }
        // forward + backward per micro-batch, gradients accumulate into m->grads
        m->step = step;
        gpt2_zero_grad(m);
        double loss = 0, zloss = 0; // the cross-entropy; the z-loss term (this rank's batches)
        for (int k = 0; k < accum; k++) {
            dp_begin_micro(t->dp, k);
            gpt2_forward(m, t->inputs + k * BT, t->targets + k * BT, B, T);
            gpt2_backward(m, 1.0f / (float)(accum * N)); // (hook: the ranks' gradient chain)
            loss += m->mean_loss;
            zloss += m->mean_zloss;
        }
        loss /= accum;
        zloss /= accum;

        // ---- gradients ready: global norm, non-finite guard
        double norm = dp_reduce(t->dp, m->grads, m->num_params, &loss); // global: every rank
        float lr = lr_schedule_get(&t->sched, (int)step);
        if (!isfinite(loss) || !isfinite(norm)) {
            char where[256];
            dp_full_grads(t->dp, m->grads, m->num_params);
            metrics_describe_nonfinite(m, where, sizeof(where));
            if (strcmp(c->nan_policy, "skip") == 0 && ++t->ls.skips <= c->max_skips) {
                if (root)
                    fprintf(stderr,
                            "attnlab: non-finite loss or gradient at step %ld (first in %s): "
                            "update skipped (%d consecutive)\n",
                            step, where, t->ls.skips);
                JsonBuf* j = runlog_event(&t->j, step + 1, "skipped_nonfinite");
                json_str(j, "where", where);
                runlog_end(&t->rl, j);
                continue;
            }
            if (root)
                fprintf(stderr,
                        "attnlab: non-finite loss (%g) or gradient norm (%g) at step %ld; first "
                        "non-finite value in %s. Stopping without a checkpoint of this state; the "
                        "last checkpoint in %s is intact.\n",
                        loss, norm, step, where, c->out_dir);
            run_record_divergence(t, step + 1, loss, norm, where, last_step, last_loss);
            rc = EXIT_NONFINITE;
            break;
        }
        t->ls.skips = 0;
        last_step = step + 1;
        last_loss = loss;
        // diagnostics read the gradient norms here, before clipping (read-only)
        const int metrics_now = metrics_due(&t->mt, step + 1, step + 1 == c->max_steps);
        const int dump_now = metrics_dump_due(&t->mt, step + 1, step + 1 == c->max_steps);
        if (metrics_now) dp_full_grads(t->dp, m->grads, m->num_params);
        if (metrics_now) metrics_grads(&t->mt, m, norm);

        // ---- clip, then the optimizer step
        // (zero = 1: this rank's shard, then all-gather); the bf16 weight copy is rewritten in the
        // same pass, or else refreshed by the next forward
        if (dp_update(t->dp, &t->opt, m->params, m->grads, t->ranges, t->nranges, norm,
                      c->grad_clip, lr, &t->oh, gpt2_weight_copy(m)))
            gpt2_params_synced(m);
        else
            gpt2_params_changed(m);

        // ---- logs: throughput, MFU, loss spikes, the step record
        double dt = util_now() - t0;
        eta_step(&t->eta, dt, step == start);       // the first step warms caches up
        double tok_s = (double)BT * accum * N / dt; // the global batch
        double rate = gpt2_flops_per_token(m, T) * tok_s / (double)N; // per rank
        double mfu = mm_peak_mfu(&t->peak, rate, step + 1, t->rl.log);
        spike_check(&spikes, loss, step + 1, root, &t->j, &t->rl); // a spike: stderr, a record
        json_begin(&t->j);
        json_int(&t->j, "step", step + 1);
        json_num(&t->j, "train_loss", loss);
        if (c->z_loss > 0.0f) json_num(&t->j, "z_loss", zloss);
        json_num(&t->j, "lr", lr);
        json_num(&t->j, "grad_norm", norm);
        json_num(&t->j, "step_ms", dt * 1e3);
        json_num(&t->j, "tok_per_s", tok_s);
        json_num(&t->j, "mfu", mfu);
        dp_record(t->dp, &t->j); // N ranks: ranks, comm_ms, comm_mb
        runlog_end(&t->rl, &t->j);
        fprintf(t->rl.log, "step %ld train_loss %f\n", step + 1, loss);

        // ---- diagnostics: probe forward on the updated model, records, attention dump
        const TokenText tt = {.bytes = run_token_bytes, .ctx = t->tok};
        p0 = util_now();
        if (root && (metrics_now || dump_now) &&
            metrics_probe(&t->mt, m, step + 1, metrics_now, dump_now, &tt, c->out_dir, t->rl.jsonl,
                          t->rl.log, err, sizeof(err)))
            runlog_fail(&t->rl, err);
        if (metrics_now || dump_now) eta_add(&t->eta, ETA_DIAG, util_now() - p0);
        if (c->log_every > 0 && ((step + 1) % c->log_every == 0 || step + 1 == c->max_steps)) {
            char eta[32]; // steps and the evaluations, diagnostics, checkpoints still to come
            eta_format(&t->eta, step + 1, c->max_steps, eta, sizeof(eta));
            printf("step %5ld/%d | loss %.4f | lr %.2e | norm %6.3f | %7.1f ms | %8.0f tok/s | "
                   "mfu %4.1f%% | ETA %s\n",
                   step + 1, c->max_steps, loss, (double)lr, norm, dt * 1e3, tok_s, 100 * mfu, eta);
            fflush(stdout);
        }

        // ---- checkpoint rotation, and the checkpoint SIGUSR1 asked for
        const int periodic = c->checkpoint_every > 0 && (step + 1) % c->checkpoint_every == 0;
        if ((periodic || req == REQ_CKPT) && step + 1 < c->max_steps) {
            snprintf(err, sizeof(err), "step %ld: the checkpoint could not be written", step + 1);
            p0 = util_now();
            const int cbad = run_checkpoint_save(t, step + 1);
            eta_add(&t->eta, ETA_CKPT, util_now() - p0);
            if (cbad)
                runlog_fail(&t->rl, err);
            else if (req == REQ_CKPT && root)
                printf("checkpoint at step %ld (SIGUSR1); training goes on\n", step + 1);
        }
    }
    metrics_free(&t->mt);
    // rank 0's files checked once more, agreed by every rank (the final checkpoint is collective)
    if (dist_agree(0, 0, "", root && runlog_check(&t->rl) ? REQ_IO : REQ_NONE, "log check") ==
        REQ_IO) {
        const long ck = root ? ckpt_find_latest(c->out_dir) : -1;
        if (root && ck >= 0)
            fprintf(stderr,
                    "attnlab: %s. Stopped at step %ld without a newer checkpoint: the checkpoint "
                    "at step %ld in %s is intact, and resume=1 continues from it (writing the "
                    "lost records again) once the disk has room.\n",
                    t->rl.err, step, ck, c->out_dir);
        else if (root)
            fprintf(stderr, "attnlab: %s. Stopped at step %ld (no checkpoint yet).\n", t->rl.err,
                    step);
        rc = 1;
    } else if (rc != EXIT_NONFINITE) { // the final checkpoint, also after a signal
        double p0 = util_now();
        if (run_checkpoint_save(t, step))
            rc = 1;
        else
            printf("checkpoint: %s/model_%08ld.bin (+ state_%08ld.bin)\n", c->out_dir, step, step);
        eta_add(&t->eta, ETA_CKPT, util_now() - p0);
        char tsum[320]; // where the time went (common/eta.h)
        eta_summary(&t->eta, tsum, sizeof(tsum));
        if (root && tsum[0]) printf("time: %s\n", tsum);
        if (req == REQ_STOP && rc == 0) {
            printf("stopped by signal at step %ld (exit %d); resume with resume=1\n", step,
                   EXIT_STOPPED);
            rc = EXIT_STOPPED;
        }
    }
    if (runlog_close(&t->rl) && rc != 1 && root) { // fclose can fail too (NFS, quota)
        fprintf(stderr, "attnlab: %s\n", t->rl.err);
        rc = 1;
    }
    return rc;
}

// =============================================================================================
// main: the command line

static void usage(FILE* f) {
    fprintf(f, "usage: ./train CONFIG [key=value | --key=value ...]\n"
               "       ./train --help             every config key with type, default, meaning\n"
               "       ./train --list-attention [NAME]\n"
               "                                  every attention variant and its keys (NAME:\n"
               "                                  that variant's entry only)\n"
               "       ./train --list-metrics     every statistic of metrics.jsonl\n"
               "       ./train CONFIG [key=value ...] --print-config\n"
               "                                  check the config and print every resolved key;\n"
               "                                  train nothing\n\n"
               "Trains GPT-2 from a config file (key = value lines, `include = base.conf`).\n"
               "Writes OUT/metrics.jsonl, OUT/main.log, OUT/config.conf and checkpoints\n"
               "OUT/model_NNNNNNNN.bin + OUT/state_NNNNNNNN.bin. Exit codes: 0 done, 1 I/O,\n"
               "2 bad config or input (nothing written), 3 non-finite loss or gradient,\n"
               "4 stopped by SIGINT/SIGTERM/SIGHUP after a checkpoint (resume=1 continues).\n"
               "SIGUSR1 writes a checkpoint after the current step and training goes on.\n");
}

int main(int argc, char** argv) {
    dist_init(&argc, &argv); // joins MPI only when started by mpirun / srun
    if (!dist_is_root() && !freopen("/dev/null", "w", stdout)) return 1; // rank 0 prints
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    char err[2048] = "";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            printf("\n");
            config_print_help(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--list-attention")) { // all variants, or NAME's entry alone
            const char* name = i + 1 < argc && argv[i + 1][0] != '-' ? argv[i + 1] : NULL;
            if (name && attn_print_named(stdout, name, err, sizeof(err)))
                die(EXIT_USAGE, "%s", err);
            if (!name) attn_print_list(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--list-metrics")) { // the metrics table (docs/diagnostics.md)
            metrics_print_table(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--list-attention-names")) {
            for (int k = 0; k < attn_count(); k++)
                printf("%s\n", attn_get(k)->name);
            return 0;
        }
    }
    Config cfg;
    config_defaults(&cfg);
    int first = 1, print_only = 0, bad = 0;
    if (!strchr(argv[1], '=') && strncmp(argv[1], "--", 2) != 0) {
        bad = config_load(&cfg, argv[1], err, sizeof(err)) != 0;
        first = 2;
    }
    for (int i = first; i < argc && !bad; i++) {
        if (!strcmp(argv[i], "--print-config")) {
            print_only = 1;
            continue;
        }
        bad = config_apply_arg(&cfg, argv[i], err, sizeof(err)) != 0;
    }
    if (!bad) run_fit_warmup(&cfg, run_args_set(argc, argv, first, "warmup_steps")); // short runs
    if (!bad) bad = config_validate(&cfg, err, sizeof(err)) != 0;
    if (!bad) bad = settings_resume_change_check(&cfg, err, sizeof(err)) != 0; // the rows' rules
    dist_exit_if_failed(bad, EXIT_USAGE, err); // reported once, by rank 0

    // one thread pool: OpenMP; OpenBLAS runs inside our parallel regions single-threaded
    mm_init_threads();
    int nthreads = cfg.threads > 0 ? cfg.threads : omp_get_num_procs();
    omp_set_num_threads(nthreads);
    if (print_only) { // every check training makes before step 1; scripts/ablate compares runs
        dist_exit_if_failed(preflight(&cfg, nthreads, NULL, err, sizeof(err)) != 0, EXIT_USAGE,
                            err);
        printf("# attnlab resolved config (./train --print-config)\n");
        int prc = config_write(&cfg, stdout) ? 1 : 0;
        dist_finalize();
        return prc;
    }

    static Trainer t; // large (the config and the parameter table): not on the stack
    dist_exit_if_failed(setup(&t, &cfg, nthreads, err, sizeof(err)) != 0, EXIT_USAGE, err);
    util_catch_signals(on_signal); // SIGINT, SIGTERM, SIGHUP (unless ignored), SIGUSR1
    int rc = train(&t);
    teardown(&t);
    util_print_peak_rss(); // for the benchmark
    dist_finalize();
    return rc;
}
