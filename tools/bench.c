// tools/bench.c: the machine's measured matmul peaks, the reference of the trainer's MFU column
// and of scripts/bench, and the per-phase profile of a training step (docs/performance.md).
// Usage: ./bench sgemm-peak    sgemm GFLOP/s with every OpenMP thread (OpenBLAS)
//        ./bench bf16-peak     bf16 matmul GFLOP/s with every OpenMP thread (oneDNN); refused
//                              where the CPU has no native bf16 matmul (exit 2)
//        ./bench profile [CONFIG] [steps=N] [key=value...]
//                              trains N steps (default 5, after one warm-up step) of the config on
//                              synthetic tokens, in fp32 and in bf16 where native (or only in the
//                              precision= given), timing each phase of the step (common/prof.h),
//                              and prints the median ms per phase and its share of the median step
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
#include "optim/clip.h"
#include "optim/optim.h"

static void usage(FILE* f) {
    fprintf(
        f, "usage: ./bench sgemm-peak | bf16-peak | profile [CONFIG] [steps=N] [key=value...]\n"
           "  sgemm-peak   measured sgemm GFLOP/s of this machine (OpenBLAS, every thread)\n"
           "  bf16-peak    measured bf16 matmul GFLOP/s (oneDNN, every thread)\n"
           "  profile      where a training step's time goes: N steps (default 5, after one\n"
           "               warm-up step) of CONFIG with the key=value overrides, on synthetic\n"
           "               tokens, in fp32 and in bf16 where native (precision=P: only P); prints\n"
           "               the median ms of each phase and its share of the median step\n"
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

// One precision's profile: med[p] the median seconds of phase p, *step the median step.
typedef struct {
    char name[16];
    char info[384];
    double med[PROF_NPHASES], step, sum_named;
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
    return 0;
}

int main(int argc, char** argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc < 2 || (argc != 2 && strcmp(argv[1], "profile") != 0)) {
        usage(stderr);
        return 2;
    }
    cpuinfo_blas_core_warn(stderr, "bench"); // a forced core explains a low sgemm peak
    if (!strcmp(argv[1], "sgemm-peak")) return mm_print_peak(NULL);
    if (!strcmp(argv[1], "bf16-peak")) return mm_print_peak("bf16");
    if (!strcmp(argv[1], "profile")) return profile(argc - 2, argv + 2);
    fprintf(stderr, "bench: unknown measurement '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
