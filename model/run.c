// model/run.c: a training run (see run.h): setup with full validation before anything is
// written, the step loop (gradient accumulation, clipping, schedule, non-finite guard),
// evaluation, sampling, JSONL/llm.c-style logs, checkpoints and exact resume.
#include "model/run.h"
#include "common/matmul.h"
#include "common/dist.h"
#include "model/run_dist.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json.h"
#include "common/util.h"
#include "model/hf.h"
#include "model/memory.h"
#include "model/metrics.h"
#include "model/sample.h"
#include "optim/clip.h"

// ---------------------------------------------------------------------------------------------
// setup

double run_measure_sgemm_peak(int nthreads, int trials) {
    const int n = 512;
    const size_t nn = (size_t)n * n;
    float* a = allocFloats((size_t)nthreads * nn);
    float* b = allocFloats((size_t)nthreads * nn);
    float* c = allocFloats((size_t)nthreads * nn);
    bf16* ah = mallocCheck(sizeof(bf16) * (size_t)nthreads * nn);
    bf16* bh = mallocCheck(sizeof(bf16) * (size_t)nthreads * nn);
    for (size_t i = 0; i < (size_t)nthreads * nn; i++) {
        a[i] = (float)(i % 7) * 0.1f;
        b[i] = (float)(i % 5) * 0.1f;
        ah[i] = bf16_from_float(a[i]);
        bh[i] = bf16_from_float(b[i]);
    }
    const int half = mm_precision() != MM_FP32;
    double best = 0;
    for (int rep = 0; rep < trials; rep++) {
        double t0 = util_now();
#pragma omp parallel num_threads(nthreads)
        {
            size_t o = (size_t)omp_get_thread_num() * nn;
            for (int k = 0; k < 2; k++) {
                if (half)
                    mm_gemm_bf16(0, 1, n, n, n, 1.0f, ah + o, n, bh + o, n, 0.0f, c + o, n);
                else
                    mm_gemm(0, 1, n, n, n, 1.0f, a + o, n, b + o, n, 0.0f, c + o, n);
            }
        }
        double dt = util_now() - t0;
        double f = 2.0 * 2.0 * n * n * (double)n * nthreads / dt;
        if (f > best && rep > 0) best = f; // the first trial creates primitives, warms caches
    }
    free(a);
    free(b);
    free(c);
    free(ah);
    free(bh);
    return best;
}

static int init_weights(Run* r, char* err, size_t errcap) {
    GPT2* m = &r->model;
    const char* src = r->cfg.init_from;
    gpt2_init(m, (uint64_t)r->cfg.seed);
    if (strcmp(src, "scratch") == 0 || src[0] == '\0') return 0;
    if (strncmp(src, "llmc:", 5) == 0) return llmc_load(m, src + 5, err, errcap);
    if (strncmp(src, "hf:", 3) == 0) return hf_load(m, src + 3, err, errcap);
    char note[1024];
    long step;
    if (ckpt_load_model(m, src, 0, &step, note, sizeof(note), err, errcap)) return -1;
    if (note[0])
        fprintf(stderr,
                "attnlab: init_from %s: tensors not in the file keep their initial "
                "values: %s\n",
                src, note);
    return 0;
}

// init_from a model file: its sizes (fc) must equal the config's (gc). On a difference, err
// reads "WHERE: WHAT n_layer=.. n_head=.. n_embd=.. vocab_size=.. block_size=..NOTE; set these
// keys to match" and 1 is returned.
static int sizes_differ(const GPT2Config* fc, const GPT2Config* gc, const char* where,
                        const char* what, const char* note, char* err, size_t errcap) {
    if (fc->n_layer == gc->n_layer && fc->n_head == gc->n_head && fc->n_embd == gc->n_embd &&
        fc->vocab_size == gc->vocab_size && fc->block_size == gc->block_size)
        return 0;
    snprintf(err, errcap,
             "%s: %s n_layer=%d n_head=%d n_embd=%d vocab_size=%d block_size=%d%s; set these "
             "keys to match",
             where, what, fc->n_layer, fc->n_head, fc->n_embd, fc->vocab_size, fc->block_size,
             note);
    return 1;
}

static char* resolved_config_text(const Run* r) {
    char* buf = NULL;
    size_t len = 0;
    FILE* f = open_memstream(&buf, &len);
    if (!f) die(1, "cannot allocate the resolved config");
    fprintf(f, "# attnlab resolved config: every key with its value for this run\n");
    config_write(&r->cfg, f);
    fprintf(f, "# precision in effect: %s\n", r->precision_info);
    const AttnVariant* seen[2 * GPT2_MAX_LAYERS];
    int nseen = 0;
    fprintf(f, "# attention hyperparameters in effect (defaults included):\n");
    for (int l = 0; l < r->model.cfg.n_layer; l++) {
        const LayerAttn* la = &r->model.la[l];
        const AttnVariant* vs[2] = {la->v, la->row};
        const AttnHParams* hs[2] = {&la->hp, &la->row_hp};
        for (int q = 0; q < 2; q++) {
            int dup = 0;
            for (int i = 0; i < nseen; i++)
                dup |= seen[i] == vs[q];
            if (dup || vs[q]->n_hparams == 0) continue;
            seen[nseen++] = vs[q];
            char* hb = NULL;
            size_t hl = 0;
            FILE* hf = open_memstream(&hb, &hl);
            attn_hparams_write(hs[q], vs[q], hf);
            fclose(hf);
            for (char* line = strtok(hb, "\n"); line; line = strtok(NULL, "\n"))
                fprintf(f, "#   %s   (%s)\n", line, vs[q]->name);
            free(hb);
        }
    }
    fclose(f);
    return buf;
}

int run_setup(Run* r, const Config* cfg, int nthreads, char* err, size_t errcap) {
    memset(r, 0, sizeof(*r));
    r->cfg = *cfg;
    r->nthreads = nthreads;
    const Config* c = &r->cfg;
    GPT2* m = &r->model;
    if (gpt2_setup_attention(m, c, err, errcap)) return -1;
    GPT2Config gc;
    if (gpt2_config_from(&gc, c, err, errcap)) return -1;
    if (strncmp(c->init_from, "llmc:", 5) == 0) { // the file's sizes must match the config
        GPT2Config fc;
        if (llmc_read_config(c->init_from + 5, &fc, err, errcap)) return -1;
        if (sizes_differ(&fc, &gc, c->init_from + 5, "llm.c model has", "", err, errcap)) return -1;
    }
    if (strncmp(c->init_from, "hf:", 3) == 0) { // config.json's sizes must match the config
        GPT2Config fc;
        char fatt[CONFIG_STR];
        if (hf_read_config(c->init_from + 3, &fc, fatt, sizeof(fatt), err, errcap)) return -1;
        char where[1100];
        snprintf(where, sizeof(where), "%s/config.json", c->init_from + 3);
        if (sizes_differ(&fc, &gc, where, "model has", " (n_positions)", err, errcap)) return -1;
        if (strcmp(fatt, c->attention) != 0)
            fprintf(stderr,
                    "attnlab: init_from %s: weights trained with attention '%s', this run "
                    "uses '%s'\n",
                    c->init_from, fatt, c->attention);
    }
    const OptimizerDef* od = optim_lookup(c->optimizer);
    if (!od) {
        snprintf(err, errcap, "key 'optimizer': unknown optimizer '%s'", c->optimizer);
        return -1;
    }
    { // refuse before allocating when the estimate exceeds the available memory
        MemEstimate me;
        int eT = c->eval_seq_len > c->seq_len ? c->eval_seq_len : c->seq_len;
        memory_estimate(&me, &gc, c->batch_size, eT, od->state_per_param, nthreads);
        if (memory_check(&me, memory_available(), err, errcap)) return -1;
    }
    if (lr_schedule_init(&r->sched, c->lr_schedule, c->lr, c->min_lr, c->warmup_steps,
                         c->max_steps)) {
        snprintf(err, errcap, "key 'lr_schedule': unknown schedule '%s'", c->lr_schedule);
        return -1;
    }
    const int B = c->batch_size, T = c->seq_len;
    r->eval_T = c->eval_seq_len > 0 ? c->eval_seq_len : T;
    if (c->max_steps > 0) {
        if (!c->train_data[0]) {
            snprintf(err, errcap,
                     "key 'train_data' is empty: give a glob of llm.c shards "
                     "(scripts/setup corpus mobydick makes some)");
            return -1;
        }
        if (dataloader_init(&r->train, c->train_data, B, T, c->shuffle, (uint64_t)c->seed, err,
                            errcap))
            return -1;
    }
    if (c->val_data[0]) {
        if (dataloader_init(&r->val, c->val_data, B, r->eval_T, 0, 0, err, errcap)) return -1;
        r->have_val = 1;
    } else if (c->max_steps == 0) {
        snprintf(err, errcap, "max_steps = 0 evaluates only, but 'val_data' is empty");
        return -1;
    }
    gpt2_build(m, &gc);
    if (init_weights(r, err, errcap)) return -1;
    m->seed = (uint64_t)c->seed;
    int Tmax = T > r->eval_T ? T : r->eval_T;
    gpt2_alloc_acts(m, B, Tmax, nthreads);
    optim_init(&r->opt, od, m->num_params);
    r->oh = (OptimHParams){
        .beta1 = c->beta1, .beta2 = c->beta2, .eps = c->eps, .weight_decay = c->weight_decay};
    r->nranges = m->nspecs;
    for (int i = 0; i < m->nspecs; i++)
        r->ranges[i] = (OptimRange){m->specs[i].offset, m->specs[i].size, m->specs[i].decay};
    r->inputs = mallocCheck(sizeof(int) * (size_t)B * Tmax);
    r->targets = mallocCheck(sizeof(int) * (size_t)B * Tmax);
    char terr[512];
    r->tok = tokenizer_load(c->tokenizer, c->tokenizer_dir, terr, sizeof(terr));
    if (!r->tok && c->sample_every > 0)
        fprintf(stderr, "attnlab: samples will print token ids: %s\n", terr);
    rng_seed(&r->rs.rng, (uint64_t)c->seed ^ 0x5eedULL);
    r->rs.best_val = -1.0f;
    MMPrecision prec;
    if (mm_resolve_precision(c->precision, &prec, r->precision_info, sizeof(r->precision_info), err,
                             errcap))
        return -1;
    gpt2_set_precision(m, prec);
    r->config_text = resolved_config_text(r);
    r->peak_flops = run_measure_sgemm_peak(nthreads, 8);
    return run_dist_setup(r, err, errcap); // [dist] sharded optimizer, gradient hook
}

void run_free(Run* r) {
    run_dist_free(r); // [dist]
    gpt2_free(&r->model);
    if (r->cfg.max_steps > 0) dataloader_free(&r->train);
    if (r->have_val) dataloader_free(&r->val);
    optim_free(&r->opt);
    if (r->tok) tokenizer_free(r->tok);
    free(r->inputs);
    free(r->targets);
    free(r->config_text);
    if (r->jsonl) fclose(r->jsonl);
    if (r->log) fclose(r->log);
}

// ---------------------------------------------------------------------------------------------
// pieces of the loop

static void check_tokens(const Run* r, const int* ids, size_t n, const char* which) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= r->cfg.vocab_size)
            die(EXIT_USAGE, "%s: token id %d is >= vocab_size %d (wrong tokenizer or vocab_size?)",
                which, ids[i], r->cfg.vocab_size);
}

float run_evaluate(Run* r) {
    const int B = r->cfg.batch_size, T = r->eval_T;
    GPT2* m = &r->model;
    long saved = m->step;
    m->step = -1;
    dataloader_reset(&r->val);
    double sum = 0;
    for (int i = 0; i < r->cfg.eval_steps; i++) {
        dataloader_next(&r->val, r->inputs, r->targets);
        check_tokens(r, r->inputs, (size_t)B * T + 0, "val_data");
        check_tokens(r, r->targets, (size_t)B * T, "val_data");
        gpt2_forward(m, r->inputs, r->targets, B, T);
        sum += m->mean_loss;
    }
    m->step = saved;
    return (float)(sum / r->cfg.eval_steps);
}

static void write_sample(Run* r, long step) {
    const int n = r->cfg.sample_tokens;
    int* ids = mallocCheck(sizeof(int) * (size_t)(n + 1));
    int eot = r->tok ? tokenizer_eot(r->tok) : (r->cfg.vocab_size == 257 ? 256 : 50256);
    ids[0] = eot < r->cfg.vocab_size ? eot : 0;
    int len = gpt2_generate(&r->model, ids, 1, n, 1.0f, 40, -1, &r->rs.rng);
    printf("---- sample at step %ld ----\n", step);
    if (r->tok) {
        size_t bl;
        char* text = tokenizer_decode(r->tok, ids + 1, (size_t)(len - 1), &bl);
        fwrite(text, 1, bl, stdout);
        free(text);
    } else {
        for (int i = 1; i < len; i++)
            printf("%d ", ids[i]);
    }
    printf("\n--------------------------------\n");
    fflush(stdout);
    free(ids);
}

static int save_checkpoint(Run* r, long step) {
    char mp[1100], sp[1100], err[2048];
    snprintf(mp, sizeof(mp), "%s/model_%08ld.bin", r->cfg.out_dir, step);
    snprintf(sp, sizeof(sp), "%s/state_%08ld.bin", r->cfg.out_dir, step);
    r->rs.step = step;
    if (r->cfg.max_steps > 0) dataloader_get_state(&r->train, &r->rs.train_data);
    Optimizer tmp;
    const Optimizer* opt = run_dist_state_for_save(r, &tmp); // [dist] full state; NULL: not rank 0
    if (!opt) return 0;
    // model first, state second: a checkpoint counts only when both exist and verify
    int rc = ckpt_save_model(&r->model, mp, step, r->config_text, err, sizeof(err)) ||
             ckpt_save_state(opt, &r->rs, sp, err, sizeof(err));
    run_dist_state_done(r, &tmp); // [dist]
    if (rc) {
        fprintf(stderr,
                "attnlab: checkpoint at step %ld failed: %s (previous checkpoints are "
                "intact)\n",
                step, err);
        return -1;
    }
    ckpt_prune(r->cfg.out_dir, r->cfg.keep_last);
    return 0;
}

// Locate the first non-finite gradient: "tensor NAME (layer L)".
static void describe_nonfinite(const GPT2* m, char* out, size_t cap) {
    for (int i = 0; i < m->nspecs; i++) {
        const ParamSpec* s = &m->specs[i];
        size_t k = grad_first_nonfinite(m->grads + s->offset, s->size);
        if (k < s->size) {
            if (s->stacked)
                snprintf(out, cap, "gradient of tensor %s (layer %zu)", s->name,
                         k / (s->size / s->shape[0]));
            else
                snprintf(out, cap, "gradient of tensor %s", s->name);
            return;
        }
    }
    snprintf(out, cap, "the loss (all gradients finite)");
}

// Probe sequences for the diagnostics (model/metrics.h): n windows of T tokens spread evenly
// over the shards of dl (metrics_probe_windows), read from the files dataloader_init validated.
// (n, T) token ids, or NULL with err.
static int* probe_tokens(const DataLoader* dl, int n, int T, char* err, size_t errcap) {
    int* file = mallocCheck(sizeof(int) * (size_t)n);
    size_t* start = mallocCheck(sizeof(size_t) * (size_t)n);
    int* out = NULL;
    if (metrics_probe_windows(dl->ntok, dl->nfiles, T, n, file, start)) {
        snprintf(err, errcap, "%s: no shard holds a probe sequence of %d tokens", dl->files[0], T);
        goto done;
    }
    out = mallocCheck(sizeof(int) * (size_t)n * T);
    uint16_t* buf = mallocCheck(sizeof(uint16_t) * (size_t)T);
    for (int j = 0; j < n && out; j++) {
        FILE* f = fopen(dl->files[file[j]], "rb");
        long off = (long)(sizeof(int32_t) * SHARD_HEADER_INTS + sizeof(uint16_t) * start[j]);
        if (!f || fseek(f, off, SEEK_SET) != 0 ||
            fread(buf, sizeof(uint16_t), (size_t)T, f) != (size_t)T) {
            snprintf(err, errcap, "%s: cannot read the probe tokens at token %zu",
                     dl->files[file[j]], start[j]);
            free(out);
            out = NULL;
        }
        if (f) fclose(f);
        for (int t = 0; out && t < T; t++)
            out[(size_t)j * T + t] = buf[t];
    }
    free(buf);
done:
    free(file);
    free(start);
    return out;
}

// Keep only records with step <= last in metrics.jsonl (after resuming from `last`).
static void truncate_jsonl(const char* path, long last) {
    char err[512];
    size_t len;
    char* text = util_read_file(path, &len, err, sizeof(err));
    if (!text) return;
    AtomicFile af;
    if (atomic_open(&af, path) == 0) {
        for (char* line = text; *line;) {
            char* nl = strchr(line, '\n');
            size_t ll = nl ? (size_t)(nl - line) + 1 : strlen(line);
            const char* sp = strstr(line, "\"step\":");
            long s = sp && (!nl || sp < nl) ? strtol(sp + 7, NULL, 10) : 0;
            // a last line without its newline was cut by a crash mid-write: drop it
            if (s <= last && nl) atomic_write(&af, line, ll);
            line += ll;
        }
        atomic_commit(&af);
    }
    free(text);
}

// Loss-spike detector: a train loss above SPIKE_K times the median of the last SPIKE_WINDOW
// losses (once at least SPIKE_MIN_HIST are known) is logged as {"event":"loss_spike"}.
#define SPIKE_K        3.0
#define SPIKE_WINDOW   50
#define SPIKE_MIN_HIST 10

typedef struct {
    double hist[SPIKE_WINDOW];
    int n, pos;
} SpikeWindow;

static int cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

// Add `loss`; returns the median of the window before it if it is a spike, else -1.
static double spike_push(SpikeWindow* w, double loss) {
    double med = -1;
    if (w->n >= SPIKE_MIN_HIST) {
        double tmp[SPIKE_WINDOW];
        memcpy(tmp, w->hist, sizeof(double) * (size_t)w->n);
        qsort(tmp, (size_t)w->n, sizeof(double), cmp_double);
        double m = w->n % 2 ? tmp[w->n / 2] : 0.5 * (tmp[w->n / 2 - 1] + tmp[w->n / 2]);
        if (loss > SPIKE_K * m) med = m;
    }
    w->hist[w->pos] = loss;
    w->pos = (w->pos + 1) % SPIKE_WINDOW;
    if (w->n < SPIKE_WINDOW) w->n++;
    return med;
}

// ---------------------------------------------------------------------------------------------
// the loop

int run_train(Run* r, volatile sig_atomic_t* stop) {
    const Config* c = &r->cfg;
    GPT2* m = &r->model;
    char err[2048];
    if (util_mkdirs(c->out_dir, err, sizeof(err))) die(1, "%s", err);
    long start = 0;
    int resumed = 0;
    if (c->resume) {
        long latest = ckpt_find_latest(c->out_dir);
        dist_bcast(&latest, sizeof(latest), 0, "resume step"); // [dist] rank 0's choice
        if (latest >= 0) {
            char mp[1100], sp[1100];
            snprintf(mp, sizeof(mp), "%s/model_%08ld.bin", c->out_dir, latest);
            snprintf(sp, sizeof(sp), "%s/state_%08ld.bin", c->out_dir, latest);
            long s;
            if (ckpt_load_model(m, mp, 1, &s, NULL, 0, err, sizeof(err)) ||
                run_dist_load_state(r, sp, err, sizeof(err))) // [dist] a shard with zero = 1
                die(EXIT_USAGE, "cannot resume: %s", err);
            if (c->max_steps > 0 &&
                dataloader_set_state(&r->train, &r->rs.train_data, err, sizeof(err)))
                die(EXIT_USAGE, "cannot resume: %s", err);
            start = r->rs.step;
            resumed = 1;
            printf("resuming from step %ld (%s)\n", start, mp);
        } else {
            printf("resume = 1 but %s has no complete checkpoint: starting from step 0\n",
                   c->out_dir);
        }
    }
    char path[1100];
    snprintf(path, sizeof(path), "%s/config.conf", c->out_dir);
    const int root = dist_is_root(); // [dist] only rank 0 writes files
    AtomicFile af;
    if (root && (atomic_open(&af, path) ||
                 atomic_write(&af, r->config_text, strlen(r->config_text)) || atomic_commit(&af)))
        die(1, "%s", af.err);
    snprintf(path, sizeof(path), "%s/metrics.jsonl", c->out_dir);
    if (root && resumed) truncate_jsonl(path, start);
    r->jsonl = fopen(root ? path : "/dev/null", resumed ? "a" : "w");
    snprintf(path, sizeof(path), "%s/main.log", c->out_dir);
    r->log = fopen(root ? path : "/dev/null", resumed ? "a" : "w");
    if (!r->jsonl || !r->log) die(1, "%s: cannot open log files", c->out_dir);

    const int B = c->batch_size, T = c->seq_len;
    const size_t BT = (size_t)B * T;
    const char* pname = mm_precision_name(m->precision);
    printf("attnlab | %s | %d layers, %d heads, %d wide, block %d | %.2fM parameters | "
           "B=%d T=%d accum=%d | %d threads | %s peak %.1f GFLOP/s\n",
           m->attention, m->cfg.n_layer, m->cfg.n_head, m->cfg.n_embd, m->cfg.block_size,
           (double)m->num_params / 1e6, B, T, c->grad_accum, r->nthreads, pname,
           r->peak_flops / 1e9);
    printf("precision: %s; mfu is against the %s matmul peak above (best of 8 short trials at "
           "start-up); model FLOPs/token %.6g\n",
           r->precision_info, pname, gpt2_flops_per_token(m, T));
    if (r->dist) printf("%s", strstr(r->config_text, "# data parallel:") + 2); // [dist]
    fflush(stdout);
    fprintf(r->log, "# precision: %s | %s peak %.1f GFLOP/s\n", r->precision_info, pname,
            r->peak_flops / 1e9);
    if (r->dist) fprintf(r->log, "%s", strstr(r->config_text, "# data parallel:")); // [dist]
    fflush(r->log);
    JsonBuf j;
    json_init(&j);
    json_begin(&j); // the run's header record: what precision ran, what MFU is against
    json_int(&j, "step", start);
    json_str(&j, "event", "run");
    json_str(&j, "precision", pname);
    json_str(&j, "precision_info", r->precision_info);
    char against[128];
    snprintf(against, sizeof(against), "%s matmul peak, best of 8 trials at start-up", pname);
    json_str(&j, "mfu_against", against);
    json_end(&j);
    json_write_line(&j, r->jsonl);
    // diagnostics (model/metrics.h): probe sequences and scratch; no-op when both intervals are 0
    Metrics mt;
    {
        const int on = c->metrics_every > 0 || c->dump_attention_every > 0;
        const DataLoader* pdl = r->have_val ? &r->val : &r->train;
        const int pT = r->have_val ? r->eval_T : c->seq_len, pn = c->probe_sequences;
        int* probe = on ? probe_tokens(pdl, pn, pT, err, sizeof(err)) : NULL;
        if (on && !probe) die(EXIT_USAGE, "%s", err);
        MetricsSetup ms = {.every = c->metrics_every,
                           .dump_every = c->dump_attention_every,
                           .sink_eps = c->sink_eps,
                           .tokens = probe,
                           .nseq = pn,
                           .T = pT,
                           .nthreads = r->nthreads};
        if (metrics_init(&mt, m, &ms, err, sizeof(err)))
            die(EXIT_USAGE, "%s: %s", r->have_val ? c->val_data : c->train_data, err);
        free(probe);
    }
    double t_sum = 0;
    int t_n = 0, rc = 0;
    long step = start;
    float last_loss = NAN;
    SpikeWindow spikes = {.n = 0};
    for (;; step++) {
        int last = step >= c->max_steps;
        if (root && r->have_val && ((c->eval_every > 0 && step % c->eval_every == 0) || last)) {
            float vl = run_evaluate(r);
            if (r->rs.best_val < 0 || vl < r->rs.best_val) r->rs.best_val = vl;
            json_begin(&j);
            json_int(&j, "step", step);
            json_num(&j, "val_loss", vl);
            json_end(&j);
            json_write_line(&j, r->jsonl);
            fprintf(r->log, "s:%ld tel:%f\n", step, (double)vl);
            fflush(r->log);
            printf("step %ld | val loss %.4f\n", step, (double)vl);
            fflush(stdout);
        }
        if (root && c->sample_every > 0 && step > 0 && (step % c->sample_every == 0 || last))
            write_sample(r, step);
        if (last || dist_max_int(*stop, "stop agreement")) break; // [dist] every rank stops

        // ---- one optimizer step
        double t0 = util_now();
        m->step = step;
        gpt2_zero_grad(m);
        double loss = 0;
        for (int k = 0; k < c->grad_accum; k++) {
            run_dist_next_batch(r, k); // [dist] this rank's slice of the global batch
            check_tokens(r, r->inputs, BT, "train_data");
            check_tokens(r, r->targets, BT, "train_data");
            gpt2_forward(m, r->inputs, r->targets, B, T);
            gpt2_backward(m, 1.0f / (float)(c->grad_accum * dist_size()));
            loss += m->mean_loss;
        }
        loss /= c->grad_accum;
        double norm = run_dist_reduce(r, &loss); // [dist] global gradient, loss and norm
        float lr = lr_schedule_get(&r->sched, (int)step);
        if (!isfinite(loss) || !isfinite(norm)) {
            char where[256];
            run_dist_full_grads(r); // [dist]
            describe_nonfinite(m, where, sizeof(where));
            if (strcmp(c->nan_policy, "skip") == 0 && ++r->rs.skips <= c->max_skips) {
                if (root) // [dist] once
                    fprintf(stderr,
                            "attnlab: non-finite loss or gradient at step %ld (first in %s): "
                            "update skipped (%d consecutive)\n",
                            step, where, r->rs.skips);
                json_begin(&j);
                json_int(&j, "step", step + 1);
                json_str(&j, "event", "skipped_nonfinite");
                json_str(&j, "where", where);
                json_end(&j);
                json_write_line(&j, r->jsonl);
                continue;
            }
            if (root) // [dist] once
                fprintf(
                    stderr,
                    "attnlab: non-finite loss (%g) or gradient norm (%g) at step %ld; "
                    "first non-finite value in %s. Stopping without a checkpoint of this state; "
                    "the last checkpoint in %s is intact.\n",
                    loss, norm, step, where, c->out_dir);
            rc = EXIT_NONFINITE;
            break;
        }
        r->rs.skips = 0;
        // diagnostics: gradient norms are read here, before clipping (read-only)
        const int metrics_now = metrics_due(&mt, step + 1, step + 1 == c->max_steps);
        const int dump_now = metrics_dump_due(&mt, step + 1, step + 1 == c->max_steps);
        if (metrics_now) run_dist_full_grads(r); // [dist]
        if (metrics_now) metrics_grads(&mt, m, norm);
        run_dist_update(r, norm, lr); // [dist] clip + optimizer step (a shard with zero = 1)
        gpt2_params_changed(m);       // the bf16 weight copy is refreshed by the next forward
        double dt = util_now() - t0;
        if (step > start) { // the first step warms caches up; keep it out of the ETA
            t_sum += dt;
            t_n++;
        }
        double tok_s = (double)BT * c->grad_accum * dist_size() / dt;
        double rate = gpt2_flops_per_token(m, T) * tok_s / dist_size(); // per rank
        if (rate > r->peak_flops) { // the start-up peak came out low (busy machine): raise it
            r->peak_flops = rate;
            if (!r->peak_raised)
                fprintf(r->log,
                        "# step %ld beat the measured matmul peak: mfu is now against "
                        "the best step rate, %.1f GFLOP/s\n",
                        step + 1, rate / 1e9);
            r->peak_raised = 1;
        }
        double mfu = rate / r->peak_flops;
        last_loss = (float)loss;
        int spike_hist = spikes.n;
        double spike_med = spike_push(&spikes, loss);
        if (spike_med >= 0) {
            if (root) // [dist] once
                fprintf(stderr,
                        "attnlab: loss spike at step %ld: %.4f > %.0fx the median %.4f of the "
                        "last %d steps\n",
                        step + 1, loss, SPIKE_K, spike_med, spike_hist);
            json_begin(&j);
            json_int(&j, "step", step + 1);
            json_str(&j, "event", "loss_spike");
            json_num(&j, "train_loss", loss);
            json_num(&j, "median", spike_med);
            json_num(&j, "factor", SPIKE_K);
            json_end(&j);
            json_write_line(&j, r->jsonl);
        }
        json_begin(&j);
        json_int(&j, "step", step + 1);
        json_num(&j, "train_loss", loss);
        json_num(&j, "lr", lr);
        json_num(&j, "grad_norm", norm);
        json_num(&j, "step_ms", dt * 1e3);
        json_num(&j, "tok_per_s", tok_s);
        json_num(&j, "mfu", mfu);
        run_dist_record(r, &j); // [dist] ranks, comm_ms, comm_mb
        json_end(&j);
        json_write_line(&j, r->jsonl);
        fprintf(r->log, "s:%ld trl:%f\n", step + 1, loss);
        // diagnostics: probe forward on the updated model, records, attention dump
        if (root && (metrics_now || dump_now) &&
            metrics_probe(&mt, m, step + 1, metrics_now, dump_now, r->tok, c->out_dir, r->jsonl,
                          r->log, err, sizeof(err)))
            fprintf(stderr, "attnlab: attention dump at step %ld failed: %s\n", step + 1, err);
        if (c->log_every > 0 && ((step + 1) % c->log_every == 0 || step + 1 == c->max_steps)) {
            char eta[32];
            double avg = t_n ? t_sum / t_n : dt;
            util_format_duration(eta, sizeof(eta), avg * (double)(c->max_steps - step - 1));
            printf("step %5ld/%d | loss %.4f | lr %.2e | norm %6.3f | %7.1f ms | %8.0f tok/s | "
                   "mfu %4.1f%% | ETA %s\n",
                   step + 1, c->max_steps, loss, (double)lr, norm, dt * 1e3, tok_s, 100 * mfu, eta);
            fflush(stdout);
        }
        if (c->checkpoint_every > 0 && (step + 1) % c->checkpoint_every == 0 &&
            step + 1 < c->max_steps) {
            if (save_checkpoint(r, step + 1)) rc = 1;
        }
    }
    json_free(&j);
    metrics_free(&mt); // diagnostics
    if (rc != EXIT_NONFINITE) {
        if (save_checkpoint(r, step))
            rc = 1;
        else
            printf("checkpoint: %s/model_%08ld.bin (+ state_%08ld.bin)\n", c->out_dir, step, step);
        if (*stop) printf("stopped by signal at step %ld; resume with resume=1\n", step);
    }
    (void)last_loss;
    return rc;
}
