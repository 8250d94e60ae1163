// train.c: the attnlab trainer. config -> model -> loop (train, evaluate, sample, checkpoint,
// log) -> free. Usage: ./train CONFIG [key=value | --key=value ...]; ./train --help;
// ./train --list-attention; ./train CONFIG [overrides] --print-config.
// Data parallel: mpirun -np N ./train CONFIG ... (docs/distributed.md, model/run_dist.h); only
// rank 0 writes the console and files.
//
// defines: Config, config_* (common/config.h); GPT2, gpt2_* (model/gpt2.h); checkpoints
// (model/checkpoint.h); sampling (model/sample.h); the run loop helpers (model/run.h)
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/dist.h"
#include "common/matmul.h"
#include "common/util.h"
#include "model/run.h"

static volatile sig_atomic_t g_stop = 0;
static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

// Peak resident memory of this process (VmHWM), printed at exit for the benchmark.
static void print_peak_rss(void) {
    FILE* f = fopen("/proc/self/status", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof(line), f)) {
        long kb;
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) printf("peak RSS: %.1f MiB\n", kb / 1024.0);
    }
    fclose(f);
}

static void usage(FILE* f) {
    fprintf(f, "usage: ./train CONFIG [key=value | --key=value ...]\n"
               "       ./train --help             every config key with type, default, meaning\n"
               "       ./train --list-attention   every attention variant and its keys\n"
               "       ./train --sgemm-peak       measured sgemm GFLOP/s of this machine\n"
               "       ./train --bf16-peak        measured bf16 matmul GFLOP/s (oneDNN)\n"
               "       ./train CONFIG [key=value ...] --print-config\n"
               "                                  check the config and print every resolved key;\n"
               "                                  train nothing\n\n"
               "Trains GPT-2 from a config file (key = value lines, `include = base.conf`).\n"
               "Writes OUT/metrics.jsonl, OUT/main.log, OUT/config.conf and checkpoints\n"
               "OUT/model_NNNNNNNN.bin + OUT/state_NNNNNNNN.bin. Exit codes: 0 done, 1 I/O,\n"
               "2 bad config or input (nothing written), 3 non-finite loss or gradient.\n");
}

// A config or input error: the ranks agree on it, the lowest failing rank reports it once (rank 0
// when every rank fails, as a config error does), and every rank exits 2.
static void exit_if_failed(int failed, const char* err) {
    const int n = dist_size(), me = dist_rank();
    int v = dist_max_int(failed ? n - me : 0, "config check");
    if (!v) return;
    if (me == n - v) {
        if (n > 1 && me > 0)
            fprintf(stderr, "attnlab: rank %d of %d: %s\n", me, n, err);
        else
            fprintf(stderr, "attnlab: %s\n", err);
    }
    fflush(NULL);
    dist_finalize();
    _exit(EXIT_USAGE); // as die(): no atexit handlers for a run that never started
}

int main(int argc, char** argv) {
    dist_init(&argc, &argv); // joins MPI only when started by mpirun / srun
    if (!dist_is_root() && !freopen("/dev/null", "w", stdout)) return 1; // rank 0 prints
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            printf("\n");
            config_print_help(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--list-attention")) {
            attn_print_list(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--list-attention-names")) {
            for (int k = 0; k < attn_count(); k++)
                printf("%s\n", attn_get(k)->name);
            return 0;
        }
        if (!strcmp(argv[i], "--sgemm-peak")) { // used by scripts/bench
            mm_init_threads();
            int nt = omp_get_max_threads();
            double best = run_measure_sgemm_peak(nt, 12);
            printf("sgemm peak: %.1f GFLOP/s with %d threads\n", best / 1e9, nt);
            return 0;
        }
        if (!strcmp(argv[i], "--bf16-peak")) { // used by scripts/bench
            mm_init_threads();
            MMPrecision p;
            char info[384], err0[1024];
            if (mm_resolve_precision("bf16", &p, info, sizeof(info), err0, sizeof(err0)))
                die(EXIT_USAGE, "%s", err0);
            mm_set_precision(p);
            int nt = omp_get_max_threads();
            double best = run_measure_sgemm_peak(nt, 12);
            printf("bf16 peak: %.1f GFLOP/s with %d threads | %s\n", best / 1e9, nt, info);
            return 0;
        }
    }
    Config cfg;
    config_defaults(&cfg);
    char err[2048] = "";
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
    if (!bad) bad = config_validate(&cfg, err, sizeof(err)) != 0;
    exit_if_failed(bad, err);
    if (print_only) { // scripts/ablate compares runs by their resolved keys
        printf("# attnlab resolved config (./train --print-config)\n");
        int prc = config_write(&cfg, stdout) ? 1 : 0;
        dist_finalize();
        return prc;
    }

    // one thread pool: OpenMP; OpenBLAS runs inside our parallel regions single-threaded
    mm_init_threads();
    int nthreads = cfg.threads > 0 ? cfg.threads : omp_get_num_procs();
    omp_set_num_threads(nthreads);

    Run run;
    exit_if_failed(run_setup(&run, &cfg, nthreads, err, sizeof(err)) != 0, err);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    int rc = run_train(&run, &g_stop);
    run_free(&run);
    print_peak_rss();
    dist_finalize();
    return rc;
}
