// tools/bench.c: the machine's measured matmul peaks, the reference of the trainer's MFU column
// and of scripts/bench, the per-phase profile of a training step, and the speed of generation
// with the key/value cache against without it (docs/performance.md).
// Usage: ./bench sgemm-peak    sgemm GFLOP/s with every OpenMP thread (OpenBLAS)
//        ./bench bf16-peak     bf16 matmul GFLOP/s with every OpenMP thread (oneDNN); refused
//                              where the CPU has no native bf16 matmul (exit 2)
//        ./bench profile [CONFIG] [steps=N] [key=value...]
//                              trains N steps (default 5, after one warm-up step) of the config on
//                              synthetic tokens, in fp32 and in bf16 where native (or only in the
//                              precision= given), timing each phase of the step (common/prof.h),
//                              and prints the median ms per phase and its share of the median step,
//                              then each linear-layer family's GFLOP/s and share of this run's
//                              measured matmul peak, the step's MFU against that peak, and
//                              with both precisions the bf16 step with every matmul at its peak
//                              (the best speed-up over fp32 this run allows) and at fp32's
//                              efficiency (the speed-up at parity)
//        ./bench generate [CONFIG] [tokens=N] [repeats=N] [key=value...]
//                              greedy generation of N new tokens (default 512) by a randomly
//                              initialised model of CONFIG's shapes (default
//                              configs/gpt2_124M.conf) with the key/value cache and without it (the
//                              prefix recomputed for every token), in one run: median tokens/s of
//                              each and their ratio; exit 1 when the two generated different tokens
// defines: mm_print_peak (common/matmul.h)
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/cpuinfo.h"
#include "common/gradnorm.h"
#include "common/matmul.h"
#include "common/prof.h"
#include "common/rng.h"
#include "common/util.h"
#include "model/gpt2.h"
#include "model/kv_cache.h"
#include "model/sample.h"
#include "optim/clip.h"
#include "optim/optim.h"

static void usage(FILE* f) {
    fprintf(
        f, "usage: ./bench sgemm-peak | bf16-peak | profile [CONFIG] [steps=N] [key=value...]\n"
           "       ./bench generate [CONFIG] [tokens=N] [repeats=N] [key=value...]\n"
           "  sgemm-peak   measured sgemm GFLOP/s of this machine (OpenBLAS, every thread)\n"
           "  bf16-peak    measured bf16 matmul GFLOP/s (oneDNN, every thread)\n"
           "  profile      where a training step's time goes: N steps (default 5, after one\n"
           "               warm-up step) of CONFIG with the key=value overrides, on synthetic\n"
           "               tokens, in fp32 and in bf16 where native (precision=P: only P); prints\n"
           "               the median ms of each phase and its share of the median step, then\n"
           "               the linear layers' GFLOP/s against this run's peak, the step MFU\n"
           "               and, with both precisions, the best speed-up with every matmul at\n"
           "               the bf16 peak and the speed-up with bf16 at fp32's efficiency\n"
           "  generate     tokens/s of greedy generation with the key/value cache and without it\n"
           "               (the prefix recomputed for every token), in one run: N new tokens\n"
           "               (default 512) after a one-token prompt, by a randomly initialised\n"
           "               model of CONFIG's shapes (default configs/gpt2_124M.conf) with the\n"
           "               key=value overrides, median of R repeats (default 3, after a warm-up);\n"
           "               prints both rates and their ratio, and exits 1 when the two generated\n"
           "               different tokens\n"
           "Each peak is the best of 12 short trials of 512x512 matrices per thread, the way the\n"
           "trainer calls the kernels. OMP_NUM_THREADS (or threads=N) sets the thread count.\n");
}

#define PROF_MAX_STEPS 1000

static int cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static double median(double* v, int n) {
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The linear layers' matmul families: each phase's FLOPs per step, from the weight it multiplies
// (all layers' elements, specs) and the step's rows: 2 * rows * |W| forward, twice that backward
// (the input's and the weight's gradients).
#define PROF_NLINEAR 10
static const struct {
    int phase, row, bwd;
} LINEAR[PROF_NLINEAR] = {
    {PROF_MM_QKV_FWD, P_QKVW, 0},         {PROF_MM_QKV_BWD, P_QKVW, 1},
    {PROF_MM_ATTPROJ_FWD, P_ATTPROJW, 0}, {PROF_MM_ATTPROJ_BWD, P_ATTPROJW, 1},
    {PROF_MM_FC_FWD, P_FCW, 0},           {PROF_MM_FC_BWD, P_FCW, 1},
    {PROF_MM_FCPROJ_FWD, P_FCPROJW, 0},   {PROF_MM_FCPROJ_BWD, P_FCPROJW, 1},
    {PROF_MM_LMHEAD_FWD, P_WTE, 0},       {PROF_MM_LMHEAD_BWD, P_WTE, 1},
};

// One precision's profile: med[p] the median seconds of phase p, *step the median step.
typedef struct {
    char name[16];
    char info[384];
    double med[PROF_NPHASES], step, sum_named;
    double flops[PROF_NLINEAR]; // FLOPs per step of each LINEAR family
    double step_flops;          // the model's FLOPs per step as the trainer counts them (MFU)
    double attn_flops; // QK^T and A.V per step, forward and backward, over full T x T; 0 when a
                       // layer's attention is layer-level (its own products, not counted)
    double peak;       // FLOP/s: this precision's matmul peak, measured in this run
} ProfResult;

// Train `steps` + 1 steps of c in precision `prec_name`, the first not counted. 0, or -1 with err.
static int profile_one(const Config* c, const char* prec_name, int steps, int nthreads,
                       ProfResult* out, char* err, size_t errcap) {
    MMPrecision prec;
    if (mm_resolve_precision(prec_name, &prec, out->info, sizeof(out->info), err, errcap))
        return -1;
    util_strlcpy(out->name, prec_name, sizeof(out->name));
    GPT2 m;
    memset(&m, 0, sizeof(m));
    GPT2Config gc;
    if (gpt2_setup_attention(&m, c, err, errcap) || gpt2_config_from(&gc, c, err, errcap))
        return -1;
    const int B = c->batch_size, T = c->seq_len, accum = c->grad_accum;
    gpt2_build(&m, &gc);
    gpt2_init(&m, (uint64_t)c->seed);
    gpt2_alloc_acts(&m, B, T, nthreads);
    gpt2_set_precision(&m, prec);
    // the peak as scripts/bench models measures it (best of 12 trials, 512x512 per thread)
    out->peak = mm_measure_peak_trials(nthreads, 12, NULL);
    const double rows = (double)B * T * c->grad_accum;
    for (int i = 0; i < PROF_NLINEAR; i++)
        out->flops[i] = (LINEAR[i].bwd ? 4.0 : 2.0) * rows * (double)m.specs[LINEAR[i].row].size;
    out->step_flops = gpt2_flops_per_token(&m, T) * rows;
    // per row and layer: QK^T and A.V are 2 T C each forward, twice that backward
    out->attn_flops = 12.0 * c->n_layer * (double)T * c->n_embd * rows;
    for (int l = 0; l < c->n_layer; l++)
        if (m.la[l].v->layer_forward) out->attn_flops = 0;
    const OptimizerDef* od = optim_lookup(c->optimizer);
    if (!od) {
        snprintf(err, errcap, "optimizer '%s' is unknown", c->optimizer);
        gpt2_free(&m);
        return -1;
    }
    Optimizer opt;
    optim_init(&opt, od, m.num_params);
    OptimHParams oh = {.beta1 = c->beta1,
                       .beta2 = c->beta2,
                       .eps = c->eps,
                       .weight_decay = c->weight_decay,
                       .wd_mode = optim_wd_mode_from_name(c->weight_decay_mode),
                       .lr_max = c->lr};
    OptimRange* ranges = mallocCheck(sizeof(OptimRange) * (size_t)m.nspecs);
    for (int i = 0; i < m.nspecs; i++)
        ranges[i] = (OptimRange){m.specs[i].offset, m.specs[i].size, m.specs[i].decay};
    // synthetic tokens: the phases' cost does not depend on the values
    const size_t ntok = (size_t)B * T * (size_t)accum;
    int* inputs = mallocCheck(sizeof(int) * ntok);
    int* targets = mallocCheck(sizeof(int) * ntok);
    Rng r;
    rng_seed(&r, (uint64_t)c->seed);
    for (size_t i = 0; i < ntok; i++) {
        inputs[i] = (int)rng_below(&r, (uint64_t)c->vocab_size);
        targets[i] = (int)rng_below(&r, (uint64_t)c->vocab_size);
    }
    double* acc = mallocCheck(sizeof(double) * PROF_NPHASES * (size_t)steps);
    double* wall = mallocCheck(sizeof(double) * (size_t)steps);
    prof_enable(1);
    for (int s = -1; s < steps; s++) { // step -1 warms the caches up and creates primitives
        prof_step_begin();
        const double t0 = util_now();
        m.step = s + 1;
        gpt2_zero_grad(&m);
        double loss = 0;
        for (int k = 0; k < accum; k++) {
            const size_t o = (size_t)k * B * T;
            gpt2_forward(&m, inputs + o, targets + o, B, T);
            gpt2_backward(&m, 1.0f / (float)accum);
            loss += m.mean_loss;
        }
        double norm;
        PROF(PROF_GRADNORM, norm = grad_global_norm(m.grads, m.num_params));
        int pp = prof_begin(PROF_METRICS); // what the trainer checks and records per step
        const int bad = !isfinite(loss) || !isfinite(norm);
        prof_end(pp);
        if (bad) {
            snprintf(err, errcap, "non-finite loss (%g) or gradient norm (%g) at step %d", loss,
                     norm, s + 2);
            break;
        }
        OptimFuse f = {grad_clip_scale(norm, c->grad_clip), gpt2_weight_copy(&m)};
        PROF(PROF_ADAMW,
             optim_step_fused(&opt, m.params, m.grads, ranges, m.nspecs, c->lr, &oh, &f));
        if (f.copy)
            gpt2_params_synced(&m);
        else
            gpt2_params_changed(&m);
        const double dt = util_now() - t0;
        if (s >= 0) {
            prof_step_end(acc + (size_t)s * PROF_NPHASES);
            wall[s] = dt;
        }
    }
    prof_enable(0);
    double* col = mallocCheck(sizeof(double) * (size_t)steps);
    out->sum_named = 0;
    for (int p = 0; p < PROF_NPHASES; p++) {
        for (int s = 0; s < steps; s++)
            col[s] = acc[(size_t)s * PROF_NPHASES + p];
        out->med[p] = median(col, steps);
        if (p != PROF_OTHER) out->sum_named += out->med[p];
    }
    out->step = median(wall, steps);
    free(col);
    free(acc);
    free(wall);
    free(inputs);
    free(targets);
    free(ranges);
    optim_free(&opt);
    gpt2_free(&m);
    return 0;
}

// Seconds of a profiled step in its matmul phases: the linear layers' and, with `attn`, the
// attention products'.
static double matmul_seconds(const ProfResult* r, int attn) {
    double mm = 0;
    for (int f = 0; f < PROF_NLINEAR; f++)
        mm += r->med[LINEAR[f].phase];
    if (attn) mm += r->med[PROF_ATTN_MM_FWD] + r->med[PROF_ATTN_MM_BWD];
    return mm;
}

// Two lines on the second precision's step. The best speed-up it could reach in this run: its
// step with every matmul (the linear layers' FLOPs and the attention products') at the peak it
// measured, and the rest of its step (every phase but the matmul ones: the step minus their
// medians) as measured. The attention products are counted over the full T x T, as the driver
// computes them, and the backward's recomputed QK^T not at all, so the time is a lower bound and
// the speed-up an upper bound. Where a layer's attention is layer-level (its own products, in its
// own number), the attention phases stay in the rest, as measured: still a lower bound. Then the
// speed-up at parity: its matmuls at the same share of its peak as the first precision's reach of
// their own, and the first precision's rest, so nothing but the peaks differs; a speed-up above
// it needs the second precision's matmuls nearer their peak than the first's are to theirs.
static void print_bound(const ProfResult* res) {
    const ProfResult *r = &res[1], *f = &res[0];
    const int attn = r->attn_flops > 0;
    double linear = 0; // one config, so the same FLOPs in both precisions
    for (int i = 0; i < PROF_NLINEAR; i++)
        linear += r->flops[i];
    const double flops = linear + r->attn_flops;
    const double mm = matmul_seconds(r, attn), rest = r->step - mm, ideal = flops / r->peak + rest;
    printf("\n%s step with every matmul at its peak (%.4g GFLOP of linear layers, ", r->name,
           linear * 1e-9);
    if (attn)
        printf("%.4g of attention products", r->attn_flops * 1e-9);
    else
        printf("the attention of a layer-level variant as measured");
    printf("; the other %.2f ms as measured): %.2f ms, so %s step over %s step at most %.2fx",
           rest * 1e3, ideal * 1e3, f->name, r->name, f->step / ideal);
    const double mm0 = matmul_seconds(f, attn), rest0 = f->step - mm0;
    const double parity = mm0 * f->peak / r->peak + rest0;
    printf("\n%s step at %s's efficiency (its matmuls at %.1f%% of the %s peak, as %s's are of "
           "the %s peak; %s's other %.2f ms): %.2f ms, so %s step over %s step %.2fx at parity",
           r->name, f->name, 100 * flops / mm0 / f->peak, r->name, f->name, f->name, f->name,
           rest0 * 1e3, parity * 1e3, f->name, r->name, f->step / parity);
}

// The linear layers against the peak: each family's GFLOP per step, its rate in the profiled
// step and that rate's share of the precision's peak measured in this run; then the step's MFU
// (the trainer's FLOPs per step over the median step, against the same peak).
static void print_linear(const ProfResult* res, int nres) {
    printf("\npeak (this run, best of 12 trials of 512x512 matrices per thread):");
    for (int i = 0; i < nres; i++)
        printf("%s %s %.1f GFLOP/s", i ? ";" : "", res[i].name, res[i].peak * 1e-9);
    printf("\nstep MFU (the trainer's FLOPs per step over the median step, against that peak):");
    for (int i = 0; i < nres; i++)
        printf("%s %s %.1f%%", i ? "," : "", res[i].name,
               100 * res[i].step_flops / res[i].step / res[i].peak);
    if (nres == 2) {
        printf("\n%s step over %s step (medians): %.2fx", res[0].name, res[1].name,
               res[0].step / res[1].step);
        print_bound(res);
    }
    printf("\n\n| linear layers | GFLOP per step |");
    for (int i = 0; i < nres; i++)
        printf(" %s GFLOP/s | %s %% of peak |", res[i].name, res[i].name);
    printf("\n|---|---|");
    for (int i = 0; i < nres; i++)
        printf("---|---|");
    printf("\n");
    double total = 0, sec[2] = {0, 0};
    for (int f = 0; f < PROF_NLINEAR; f++) {
        const double fl = res[0].flops[f];
        if (fl <= 0) continue; // a model without this family (mlp = 0)
        total += fl;
        printf("| %s | %.4g |", prof_name(LINEAR[f].phase) + strlen("matmul "), fl * 1e-9);
        for (int i = 0; i < nres; i++) {
            const double t = res[i].med[LINEAR[f].phase];
            sec[i] += t;
            if (t > 0)
                printf(" %.1f | %.1f%% |", fl / t * 1e-9, 100 * fl / t / res[i].peak);
            else
                printf(" - | - |");
        }
        printf("\n");
    }
    printf("| all linear layers | %.4g |", total * 1e-9);
    for (int i = 0; i < nres; i++)
        printf(" %.1f | %.1f%% |", total / sec[i] * 1e-9, 100 * total / sec[i] / res[i].peak);
    printf("\n");
}

static int profile(int argc, char** argv) {
    Config c;
    config_defaults(&c);
    char err[2048];
    int steps = 5, argi = 0, only = 0;
    if (argi < argc && !strchr(argv[argi], '=')) {
        if (config_load(&c, argv[argi], err, sizeof(err))) {
            fprintf(stderr, "bench: %s\n", err);
            return 2;
        }
        argi++;
    }
    for (; argi < argc; argi++) {
        const char* a = argv[argi];
        if (!strncmp(a, "steps=", 6)) {
            char* end;
            long v = strtol(a + 6, &end, 10);
            if (end == a + 6 || *end || v < 1 || v > PROF_MAX_STEPS) {
                fprintf(stderr, "bench: steps = '%s' is not a whole number in 1..%d\n", a + 6,
                        PROF_MAX_STEPS);
                return 2;
            }
            steps = (int)v;
            continue;
        }
        if (config_apply_arg(&c, a, err, sizeof(err))) {
            fprintf(stderr, "bench: %s\n", err);
            return 2;
        }
        if (!strncmp(a, "precision=", 10) || !strncmp(a, "--precision=", 12)) only = 1;
    }
    if (config_validate(&c, err, sizeof(err))) {
        fprintf(stderr, "bench: %s\n", err);
        return 2;
    }
    mm_init_threads();
    const int nthreads = c.threads > 0 ? c.threads : omp_get_max_threads();
    omp_set_num_threads(nthreads);
    ProfResult res[2];
    int nres = 0;
    const char* want[2] = {only ? c.precision : "fp32", only ? NULL : "bf16"};
    for (int i = 0; i < 2 && want[i]; i++) {
        memset(&res[nres], 0, sizeof(res[nres]));
        if (profile_one(&c, want[i], steps, nthreads, &res[nres], err, sizeof(err))) {
            if (i == 1) { // bf16 where the CPU has no native bf16 matmul: said, not fatal
                printf("%s: not profiled: %s\n", want[i], err);
                continue;
            }
            fprintf(stderr, "bench: %s\n", err);
            return 2;
        }
        nres++;
    }
    char model[256], flags[512];
    cpuinfo_describe(model, sizeof(model), flags, sizeof(flags));
    printf("profile: %d layers, %d heads, %d wide, vocab %d, attention %s, B=%d, T=%d, "
           "grad_accum %d; %d threads; CPU %s; median of %d steps (after 1 warm-up step)\n",
           c.n_layer, c.n_head, c.n_embd, c.vocab_size, c.attention, c.batch_size, c.seq_len,
           c.grad_accum, nthreads, model, steps);
    for (int i = 0; i < nres; i++)
        printf("%s: %s\n", res[i].name, res[i].info);
    printf("\n| phase |");
    for (int i = 0; i < nres; i++)
        printf(" %s ms | %s share |", res[i].name, res[i].name);
    printf("\n|---|");
    for (int i = 0; i < nres; i++)
        printf("---|---|");
    printf("\n");
    for (int p = 1; p <= PROF_NPHASES; p++) {
        const int ph = p % PROF_NPHASES; // PROF_OTHER last
        printf("| %s |", prof_name(ph));
        for (int i = 0; i < nres; i++)
            printf(" %.2f | %.1f%% |", res[i].med[ph] * 1e3, 100 * res[i].med[ph] / res[i].step);
        printf("\n");
    }
    printf("| sum of the named phases |");
    for (int i = 0; i < nres; i++)
        printf(" %.2f | %.1f%% |", res[i].sum_named * 1e3, 100 * res[i].sum_named / res[i].step);
    printf("\n| step (median) |");
    for (int i = 0; i < nres; i++)
        printf(" %.2f | 100%% |", res[i].step * 1e3);
    printf("\n");
    print_linear(res, nres);
    return 0;
}

#define GEN_MAX_REPEATS    100
#define GEN_DEFAULT_CONFIG "configs/gpt2_124M.conf"

// A whole-number argument "key=N" in lo..hi into *v: 1 if a is that key, -1 when its value is
// bad (said on stderr), 0 when a is another key.
static int int_arg(const char* a, const char* key, int lo, int hi, int* v) {
    const size_t kl = strlen(key);
    if (strncmp(a, key, kl) != 0 || a[kl] != '=') return 0;
    char* end;
    long x = strtol(a + kl + 1, &end, 10);
    if (end == a + kl + 1 || *end || x < lo || x > hi) {
        fprintf(stderr, "bench: %s = '%s' is not a whole number in %d..%d\n", key, a + kl + 1, lo,
                hi);
        return -1;
    }
    *v = (int)x;
    return 1;
}

// FNV-1a (64 bit) of the token ids, each folded in as one value: the tokens' fingerprint.
static unsigned long long tokens_hash(const int* ids, int n) {
    unsigned long long h = 14695981039346656037ULL;
    for (int i = 0; i < n; i++) {
        h ^= (unsigned long long)(unsigned)ids[i];
        h *= 1099511628211ULL;
    }
    return h;
}

// Greedy generation of `tokens` new tokens after the one-token prompt 0, with the cache kv or
// recomputing the prefix (kv NULL): the seconds it took; the sequence in ids.
static double generate_once(GPT2* m, KVCache* kv, int* ids, int tokens) {
    Rng r; // greedy draws nothing
    rng_seed(&r, 1);
    ids[0] = 0;
    const double t0 = util_now();
    const int n = gpt2_generate_cached(m, kv, ids, 1, tokens, 0.0f, 0, -1, &r);
    const double dt = util_now() - t0;
    ASSERT(n == 1 + tokens);
    return dt;
}

static int generate(int argc, char** argv) {
    Config c;
    config_defaults(&c);
    char err[2048];
    int tokens = 512, repeats = 3, argi = 0;
    const char* conf = GEN_DEFAULT_CONFIG;
    if (argi < argc && !strchr(argv[argi], '=')) conf = argv[argi++];
    if (config_load(&c, conf, err, sizeof(err))) {
        fprintf(stderr, "bench: %s\n", err);
        return 2;
    }
    for (; argi < argc; argi++) {
        const char* a = argv[argi];
        int r = int_arg(a, "tokens", 1, 1 << 20, &tokens);
        if (!r) r = int_arg(a, "repeats", 1, GEN_MAX_REPEATS, &repeats);
        if (r < 0) return 2;
        if (r) continue;
        if (config_apply_arg(&c, a, err, sizeof(err))) {
            fprintf(stderr, "bench: %s\n", err);
            return 2;
        }
    }
    // nothing trains: the training lengths need only be valid for the block size given
    if (c.seq_len > c.block_size) c.seq_len = c.block_size;
    if (c.eval_seq_len > c.block_size) c.eval_seq_len = c.block_size;
    if (config_validate(&c, err, sizeof(err))) {
        fprintf(stderr, "bench: %s\n", err);
        return 2;
    }
    if (tokens > c.block_size - 1) { // past the block size the window slides: no cache then
        fprintf(stderr,
                "bench: tokens = %d: the prompt token and the new tokens must fit block_size = %d "
                "(at most %d new tokens), or the window slides and the cache no longer serves\n",
                tokens, c.block_size, c.block_size - 1);
        return 2;
    }
    MMPrecision prec;
    char info[384];
    if (mm_resolve_precision(c.precision, &prec, info, sizeof(info), err, sizeof(err))) {
        fprintf(stderr, "bench: %s\n", err);
        return 2;
    }
    mm_init_threads();
    const int nthreads = c.threads > 0 ? c.threads : omp_get_max_threads();
    omp_set_num_threads(nthreads);
    GPT2 m;
    memset(&m, 0, sizeof(m));
    GPT2Config gc;
    if (gpt2_setup_attention(&m, &c, err, sizeof(err)) ||
        gpt2_config_from(&gc, &c, err, sizeof(err))) {
        fprintf(stderr, "bench: %s\n", err);
        return 2;
    }
    const int T = 1 + tokens;
    gpt2_build(&m, &gc);
    gpt2_init(&m, (uint64_t)c.seed);
    gpt2_alloc_acts(&m, 1, T, nthreads);
    gpt2_set_precision(&m, prec);
    char why[512];
    if (!kv_cache_supported(&m, why, sizeof(why))) {
        fprintf(stderr, "bench: no key/value cache for this model: %s\n", why);
        gpt2_free(&m);
        return 2;
    }
    KVCache* kv = kv_cache_new(&m, T);
    int* a = mallocCheck(sizeof(int) * (size_t)T);
    int* b = mallocCheck(sizeof(int) * (size_t)T);
    double* tc = mallocCheck(sizeof(double) * (size_t)repeats);
    double* tu = mallocCheck(sizeof(double) * (size_t)repeats);
    const int warm = tokens < 4 ? tokens : 4; // thread pools, pages, matmul primitives
    generate_once(&m, kv, a, warm);
    generate_once(&m, NULL, b, warm);
    int bad = -1;                                  // the first new token where the two differ
    for (int r = 0; r < repeats && bad < 0; r++) { // alternated: load changes hit both alike
        tc[r] = generate_once(&m, kv, a, tokens);
        tu[r] = generate_once(&m, NULL, b, tokens);
        for (int i = 1; i < T && bad < 0; i++)
            if (a[i] != b[i]) bad = i;
    }
    int rc = 0;
    if (bad >= 0) {
        fprintf(stderr,
                "bench: cached and uncached greedy generation differ at new token %d (cached %d, "
                "uncached %d)\n",
                bad, a[bad], b[bad]);
        rc = 1;
    } else {
        const double mc = median(tc, repeats), mu = median(tu, repeats);
        char model[256], flags[512];
        cpuinfo_describe(model, sizeof(model), flags, sizeof(flags));
        const char* wait = getenv("OMP_WAIT_POLICY"); // spinning waits cost much on a busy CPU
        printf("generate: %d layers, %d heads, %d wide, vocab %d, block_size %d (%s and the "
               "overrides), attention %s, pos_encoding %s, random init (seed %lld); greedy, %d new "
               "tokens after a one-token prompt; %d threads (OMP_WAIT_POLICY %s); CPU %s; median "
               "of %d repeats (after a warm-up)\n",
               c.n_layer, c.n_head, c.n_embd, c.vocab_size, c.block_size, conf, c.attention,
               c.pos_encoding, (long long)c.seed, tokens, nthreads, wait ? wait : "unset", model,
               repeats);
        printf("precision %s: %s\n", c.precision, info);
        printf("key/value cache: %.0f bytes (%.1f MiB) for %d positions\n",
               kv_cache_model_bytes(&m, T), kv_cache_model_bytes(&m, T) / 1048576.0, T);
        printf("cached: %.2f tokens/s (%.6g s for %d tokens)\n", tokens / mc, mc, tokens);
        printf("uncached: %.2f tokens/s (%.6g s for %d tokens)\n", tokens / mu, mu, tokens);
        printf("speed-up: %.2fx (cached over uncached tokens/s)\n", mu / mc);
        printf("tokens: cached %016llx, uncached %016llx (FNV-1a of the new token ids): "
               "identical\n",
               tokens_hash(a + 1, tokens), tokens_hash(b + 1, tokens));
    }
    free(a);
    free(b);
    free(tc);
    free(tu);
    kv_cache_free(kv);
    gpt2_free(&m);
    return rc;
}

int main(int argc, char** argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc < 2 ||
        (argc != 2 && strcmp(argv[1], "profile") != 0 && strcmp(argv[1], "generate") != 0)) {
        usage(stderr);
        return 2;
    }
    cpuinfo_blas_core_warn(stderr, "bench"); // a forced core explains a low sgemm peak
    if (!strcmp(argv[1], "sgemm-peak")) return mm_print_peak(NULL);
    if (!strcmp(argv[1], "bf16-peak")) return mm_print_peak("bf16");
    if (!strcmp(argv[1], "profile")) return profile(argc - 2, argv + 2);
    if (!strcmp(argv[1], "generate")) return generate(argc - 2, argv + 2);
    fprintf(stderr, "bench: unknown measurement '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
