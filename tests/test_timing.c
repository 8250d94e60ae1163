// tests/test_timing.c: the trainer's timing figures. The ETA (common/eta.c): occurrences of a
// phase from its cadence (multiples of one or two intervals, the end boundary) and the time left
// on a hand-computed run: steps at their mean (the first step excluded), evaluations,
// diagnostics and checkpoints still to come at their measured mean cost, "+" while one is not
// timed. The matmul peak (common/peak.c): its 90th percentile, median and spread; the cache
// file's path (ATTNLAB_CACHE_DIR, XDG_CACHE_HOME, off), write and read back, another key, and
// malformed files refused naming file:line; peak_get takes a cached peak without measuring; and
// a tiny ./train run reports a cached peak and the time its phases took. The peak trial pins its
// threads to distinct CPUs and gives each its own CPU mask back.
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/eta.h"
#include "common/matmul.h"
#include "common/peak.h"
#include "common/util.h"
#include "tests/file_util.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

// ---------------------------------------------------------------------------------------------
// ETA

START_TEST(test_eta_occurrences) {
    const long none[2] = {0, 0}, five[2] = {5, 0}, four_six[2] = {4, 6}, twenty_fifty[2] = {20, 50};
    ck_assert_int_eq(eta_occurrences(0, 100, none, 1), 1); // only the end
    ck_assert_int_eq(eta_occurrences(0, 100, none, 0), 0);
    ck_assert_int_eq(eta_occurrences(100, 100, five, 1), 0);  // nothing left
    ck_assert_int_eq(eta_occurrences(-1, 10, five, 0), 3);    // 0, 5, 10
    ck_assert_int_eq(eta_occurrences(-1, 10, five, 1), 3);    // 10 is a multiple: not twice
    ck_assert_int_eq(eta_occurrences(0, 12, five, 1), 3);     // 5, 10, and the end 12
    ck_assert_int_eq(eta_occurrences(7, 13, four_six, 1), 3); // 8, 12 (4 and 6), the end 13
    ck_assert_int_eq(eta_occurrences(7, 13, four_six, 0), 2);
    // 40, 50, 60, 80, 100: 100 is a multiple of both intervals and the end, counted once
    ck_assert_int_eq(eta_occurrences(30, 100, twenty_fifty, 1), 5);
    // brute force: every s in (from, to] tested directly
    for (long from = -1; from < 30; from += 3)
        for (long to = from; to < 40; to += 2) {
            long n = 0;
            for (long s = from + 1; s <= to; s++)
                n += s % 4 == 0 || s % 6 == 0 || s == to;
            ck_assert_int_eq(eta_occurrences(from, to, four_six, 1), n);
        }
}
END_TEST

// A run of 100 steps: eval_every 25 (with validation data), no samples, metrics_every 20 and
// dump_attention_every 50, checkpoint_every 40. After 30 steps: the first step took 5 s (not
// counted), later steps 1.5 s and 2.5 s (mean 2 s); evaluations at boundaries 0 and 25 took 3 s
// and 5 s (mean 4 s); diagnostics at boundary 20 took 6 s; no checkpoint yet. Left:
//   steps        70 x 2 s                                   = 140 s
//   evaluations  at 50, 75, 100: 3 x 4 s                    =  12 s
//   diagnostics  at 40, 50, 60, 80, 100: 5 x 6 s            =  30 s
//   checkpoints  at 40, 80 and the final one at 100: untimed, so the ETA is a lower bound
// = 182 s "+"; once a checkpoint took 2.5 s: 182 + 3 x 2.5 = 189.5 s.
START_TEST(test_eta_hand_computed) {
    Eta e;
    eta_init(&e, 1, 25, 0, 20, 50, 40);
    eta_step(&e, 5.0, 1);
    eta_step(&e, 1.5, 0);
    eta_step(&e, 2.5, 0);
    eta_add(&e, ETA_EVAL, 3.0);
    eta_add(&e, ETA_EVAL, 5.0);
    eta_add(&e, ETA_DIAG, 6.0);
    int untimed = -1;
    ck_assert_double_eq_tol(eta_seconds(&e, 30, 100, &untimed), 182.0, 1e-9);
    ck_assert_int_eq(untimed, 1);
    char buf[32];
    eta_format(&e, 30, 100, buf, sizeof(buf));
    ck_assert_str_eq(buf, "3m02s+");
    eta_add(&e, ETA_CKPT, 2.5);
    ck_assert_double_eq_tol(eta_seconds(&e, 30, 100, &untimed), 189.5, 1e-9);
    ck_assert_int_eq(untimed, 0);
    eta_format(&e, 30, 100, buf, sizeof(buf));
    ck_assert_str_eq(buf, "3m09s");
    // at the last step only the final evaluation and checkpoint are left: 4 + 2.5 s
    ck_assert_double_eq_tol(eta_seconds(&e, 100, 100, &untimed), 6.5, 1e-9);
    // without validation data no evaluation is counted; the first step alone is the estimate
    Eta f;
    eta_init(&f, 0, 25, 0, 0, 0, 0);
    eta_step(&f, 4.0, 1);
    eta_add(&f, ETA_EVAL, 100.0); // (not on: ignored in the projection)
    eta_add(&f, ETA_CKPT, 1.0);
    ck_assert_double_eq_tol(eta_seconds(&f, 1, 10, &untimed), 9 * 4.0 + 1.0, 1e-9);
    char sum[256];
    eta_summary(&e, sum, sizeof(sum));
    ck_assert_str_eq(sum, "training steps 9.0s (3x), evaluation 8.0s (2x), diagnostics 6.0s (1x), "
                          "checkpoints 2.5s (1x)");
}
END_TEST

// ---------------------------------------------------------------------------------------------
// the matmul peak

START_TEST(test_peak_stats) {
    double r5[5] = {5e9, 1e9, 4e9, 2e9, 3e9};
    PeakStats ps = {0};
    peak_stats_of(r5, 5, &ps);
    ck_assert(ps.min == 1e9 && ps.max == 5e9 && ps.median == 3e9);
    ck_assert(ps.peak == 4e9); // sorted index (9 x 4) / 10 = 3
    double r4[4] = {4, 1, 3, 2};
    peak_stats_of(r4, 4, &ps);
    ck_assert(ps.median == 2.5 && ps.peak == 3); // index 27 / 10 = 2
    double r20[20];
    for (int i = 0; i < 20; i++)
        r20[i] = 100 - i; // 81 .. 100
    peak_stats_of(r20, 20, &ps);
    ck_assert(ps.peak == 98); // index 171 / 10 = 17: the 18th smallest
    ck_assert(ps.median == 90.5 && ps.min == 81 && ps.max == 100);
}
END_TEST

static void write_text(const char* path, const char* text) {
    FILE* f = fopen(path, "w");
    ck_assert_msg(f != NULL, "%s", path);
    ck_assert(fputs(text, f) >= 0);
    ck_assert(fclose(f) == 0);
}

START_TEST(test_peak_cache_path) {
    char p[1024], p2[1024];
    setenv("ATTNLAB_CACHE_DIR", "off", 1);
    ck_assert_int_eq(peak_cache_path(p, sizeof(p), "k"), 1);
    ck_assert_str_eq(p, "");
    setenv("ATTNLAB_CACHE_DIR", "/some/dir", 1);
    ck_assert_int_eq(peak_cache_path(p, sizeof(p), "k"), 0);
    ck_assert_msg(strncmp(p, "/some/dir/peak-", 15) == 0 && strlen(p) == 15 + 16 + 4 &&
                      strcmp(p + 31, ".txt") == 0,
                  "%s", p);
    ck_assert_int_eq(peak_cache_path(p2, sizeof(p2), "k2"), 0);
    ck_assert_str_ne(p, p2); // another key, another file
    unsetenv("ATTNLAB_CACHE_DIR");
    setenv("XDG_CACHE_HOME", "/x", 1);
    ck_assert_int_eq(peak_cache_path(p, sizeof(p), "k"), 0);
    ck_assert_msg(strncmp(p, "/x/attnlab/peak-", 16) == 0, "%s", p);
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/h", 1);
    ck_assert_int_eq(peak_cache_path(p, sizeof(p), "k"), 0);
    ck_assert_msg(strncmp(p, "/h/.cache/attnlab/peak-", 23) == 0, "%s", p);
}
END_TEST

START_TEST(test_peak_cache_roundtrip_and_refusals) {
    const char* dir = test_tmpdir();
    char path[1100], err[2048];
    snprintf(path, sizeof(path), "%s/sub/peak-test.txt", dir); // the directory is created
    PeakStats w = {.peak = 120.5e9,
                   .median = 100.25e9,
                   .min = 60.5e9,
                   .max = 131e9,
                   .trials = 128,
                   .seconds = 1.5,
                   .load = 2.25,
                   .when = "2026-12-05 14:20 UTC"};
    ck_assert_msg(peak_cache_write(path, "key A", &w, err, sizeof(err)) == 0, "%s", err);
    PeakStats r;
    memset(&r, 0, sizeof(r));
    ck_assert_int_eq(peak_cache_read(path, "key A", &r, err, sizeof(err)), 1);
    ck_assert(r.peak == w.peak && r.median == w.median && r.min == w.min && r.max == w.max);
    ck_assert(r.trials == 128 && r.seconds == 1.5 && r.load == 2.25 && r.cached == 1);
    ck_assert_str_eq(r.when, w.when);
    ck_assert_str_eq(r.path, path);
    ck_assert_int_eq(peak_cache_read(path, "key B", &r, err, sizeof(err)), 0); // another key
    snprintf(path, sizeof(path), "%s/none.txt", dir);
    ck_assert_int_eq(peak_cache_read(path, "key A", &r, err, sizeof(err)), 0); // no file

    // malformed files: refused, naming the file and line
    const char* good = "key = key A\npeak_gflops = 120\nmedian_gflops = 100\nmin_gflops = 60\n"
                       "max_gflops = 131\ntrials = 128\nseconds = 1.5\nload = 2.25\n"
                       "measured = today\n";
    struct {
        const char *from, *to, *want;
    } bad[] = {
        {"median_gflops = 100", "median_gflops = nan", ":3: 'median_gflops' must be a finite"},
        {"peak_gflops = 120", "peak_gflops = inf", ":2: 'peak_gflops' must be a finite"},
        {"trials = 128", "trials = 12.5", ":6: 'trials' must be a finite positive whole"},
        {"load = 2.25", "load = -3", ":8: 'load'"},
        {"seconds = 1.5", "secs = 1.5", ":7: unknown name"},
        {"seconds = 1.5", "seconds 1.5", ":7: not a 'name = value' line"},
        {"seconds = 1.5", "trials = 3", ":7: repeated name"},
        {"load = 2.25\n", "", ": no 'load' line"},
        {"peak_gflops = 120", "peak_gflops = 140", "peak_gflops <= max_gflops does not hold"},
    };
    snprintf(path, sizeof(path), "%s/bad.txt", dir);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[1024];
        const char* at = strstr(good, bad[i].from);
        ck_assert(at != NULL);
        snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - good), good, bad[i].to,
                 at + strlen(bad[i].from));
        write_text(path, text);
        err[0] = '\0';
        ck_assert_int_eq(peak_cache_read(path, "key A", &r, err, sizeof(err)), -1);
        ck_assert_msg(strncmp(err, path, strlen(path)) == 0 && strstr(err, bad[i].want),
                      "case %zu: %s", i, err);
    }
    write_text(path, good); // the unaltered text reads
    ck_assert_int_eq(peak_cache_read(path, "key A", &r, err, sizeof(err)), 1);
    ck_assert(r.peak == 120e9);
}
END_TEST

// peak_get reads the cache entry of this machine's key instead of measuring (a measurement could
// never give exactly these figures), and refuses a malformed one.
START_TEST(test_peak_get_uses_the_cache) {
    const char* dir = test_tmpdir();
    setenv("ATTNLAB_CACHE_DIR", dir, 1);
    char key[1024], path[1100], err[2048];
    peak_key(key, sizeof(key), 2, "fp32 (test kernels)");
    ck_assert(strstr(key, "threads=2; precision=fp32 (test kernels); linux=") != NULL);
    ck_assert(strstr(key, "; trial=pinned") != NULL); // figures of the unpinned trial not reused
    ck_assert_int_eq(peak_cache_path(path, sizeof(path), key), 0);
    PeakStats w = {.peak = 7.25e9,
                   .median = 7e9,
                   .min = 6e9,
                   .max = 8e9,
                   .trials = 70,
                   .seconds = 1.5,
                   .load = 0.5,
                   .when = "then"};
    ck_assert_msg(peak_cache_write(path, key, &w, err, sizeof(err)) == 0, "%s", err);
    PeakStats g;
    ck_assert_msg(peak_get(&g, 2, "fp32 (test kernels)", err, sizeof(err)) == 0, "%s", err);
    ck_assert(g.cached == 1 && g.peak == 7.25e9 && g.trials == 70);
    char d[2048];
    peak_describe(&g, d, sizeof(d));
    ck_assert_msg(strstr(d, "90th percentile of 70 trials in 1.5 s (median 7.0, spread 6.0-8.0 "
                            "GFLOP/s), measured then at load 0.50, cached in ") &&
                      strstr(d, path),
                  "%s", d);
    write_text(path, "key = x\npeak_gflops = nan\n");
    ck_assert_int_eq(peak_get(&g, 2, "fp32 (test kernels)", err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, path) && strstr(err, ":2:"), "%s", err);
    unsetenv("ATTNLAB_CACHE_DIR");
}
END_TEST

// ./train with a cached peak: MFU is against the cached figure (main.log says so); the ETA
// marks a lower bound; the console's last lines say where the time went, phase by phase.
START_TEST(test_train_reports_cached_peak_and_phases) {
    const char* dir = test_tmpdir();
    char cache[1100], err[2048];
    snprintf(cache, sizeof(cache), "%s/cache", dir);
    Config c;
    test_write_shards(dir, 257, 37, 3000, 600);
    test_run_config(&c, dir, "run", 257);
    c.max_steps = 4;
    c.warmup_steps = 1;
    c.log_every = 1;
    c.eval_every = 2;
    c.checkpoint_every = 2;
    c.metrics_every = 2;
    // a first run measures and caches the peak; rewrite its figures to ones no measurement gives
    setenv("ATTNLAB_CACHE_DIR", cache, 1);
    test_train_ok(&c);
    char cmd[2300], file[1400];
    snprintf(cmd, sizeof(cmd), "ls %s/peak-*.txt", cache);
    FILE* ls = popen(cmd, "r");
    ck_assert(ls && fgets(file, sizeof(file), ls));
    pclose(ls);
    file[strcspn(file, "\n")] = '\0';
    PeakStats ps;
    ck_assert_int_eq(peak_cache_read(file, "", &ps, err, sizeof(err)), 0); // reads, other key
    size_t n;
    char* text = test_read_text(file, &n);
    char* k = strstr(text, "key = ");
    ck_assert(k);
    k[strcspn(k, "\n")] = '\0';
    char key[1024];
    util_strlcpy(key, k + 6, sizeof(key));
    free(text);
    PeakStats w = {.peak = 1.2345e12,
                   .median = 1e12,
                   .min = 1e11,
                   .max = 2e12,
                   .trials = 99,
                   .seconds = 2,
                   .load = 0.25,
                   .when = "2026-01-02 03:04 UTC"};
    ck_assert_msg(peak_cache_write(file, key, &w, err, sizeof(err)) == 0, "%s", err);
    snprintf(c.out_dir, sizeof(c.out_dir), "%s/run2", dir);
    test_train_ok(&c);
    snprintf(cmd, sizeof(cmd), "%s/run2/main.log", dir);
    char* log = test_read_text(cmd, &n);
    ck_assert_msg(strstr(log, "peak 1234.5 GFLOP/s\n# peak: 90th percentile of 99 trials in 2.0 s "
                              "(median 1000.0, spread 100.0-2000.0 GFLOP/s), measured 2026-01-02 "
                              "03:04 UTC at load 0.25, cached in "),
                  "%s", log);
    free(log);
    // the ETA: a lower bound ("+") after step 1 (diagnostics and checkpoints not timed yet), an
    // estimate after step 3 (everything timed at boundary 2); the phases' account at the end:
    // evaluations at 0, 2, 4; diagnostics at 2, 4; checkpoints at 2 and the final one
    snprintf(cmd, sizeof(cmd), "%s/run2.stdout.txt", dir);
    char* out = test_read_text(cmd, &n);
    const char* s1 = strstr(out, "step     1/4 |");
    const char* s3 = strstr(out, "step     3/4 |");
    ck_assert_msg(s1 && s3, "%s", out);
    ck_assert_msg(s1[strcspn(s1, "\n") - 1] == '+' && s3[strcspn(s3, "\n") - 1] != '+', "%s", out);
    const char* tl = strstr(out, "\ntime: training steps ");
    ck_assert_msg(tl, "%s", out);
    char line[512];
    snprintf(line, sizeof(line), "%.*s", (int)strcspn(tl + 1, "\n"), tl + 1);
    ck_assert_msg(strstr(line, " (4x), evaluation ") && strstr(line, " (3x), diagnostics ") &&
                      strstr(line, " (2x), checkpoints ") && strstr(line, " (2x)") &&
                      !strstr(line, "samples"),
                  "%s", line);
    free(out);
    unsetenv("ATTNLAB_CACHE_DIR");
}
END_TEST

// Thread 1 is confined to the caller's first CPU, where, unpinned, it would share that CPU with
// whatever thread 0 does; the trial must move it to the caller's second CPU (thread 0 to the
// first), then give thread 1 its one-CPU mask back and leave thread 0's mask as it was.
START_TEST(test_peak_trial_pins_threads) {
    cpu_set_t all;
    ck_assert_int_eq(sched_getaffinity(0, sizeof(all), &all), 0);
    int cpus[2], n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &all)) cpus[n++] = c;
    if (n < 2) {
        printf("test_peak_trial_pins_threads: skipped, this process may run on one CPU only\n");
        return;
    }
    cpu_set_t first, before[2], after[2];
    CPU_ZERO(&first);
    CPU_SET(cpus[0], &first);
    mm_init_threads();
    mm_set_precision(MM_FP32);
#pragma omp parallel num_threads(2)
    {
        const int t = omp_get_thread_num();
        if (t == 1) ck_assert_int_eq(sched_setaffinity(0, sizeof(first), &first), 0);
        ck_assert_int_eq(sched_getaffinity(0, sizeof(before[t]), &before[t]), 0);
    }
    ck_assert(mm_measure_peak_trials(2, 3, NULL) > 0);
    ck_assert_int_eq(mm_peak_trial_cpu(0), cpus[0]);
    ck_assert_int_eq(mm_peak_trial_cpu(1), cpus[1]);
    ck_assert_int_eq(mm_peak_trial_cpu(64), -1);
#pragma omp parallel num_threads(2)
    {
        const int t = omp_get_thread_num();
        ck_assert_int_eq(sched_getaffinity(0, sizeof(after[t]), &after[t]), 0);
        if (t == 1) sched_setaffinity(0, sizeof(all), &all); // as the test found it
    }
    ck_assert(CPU_EQUAL(&before[0], &all) && CPU_EQUAL(&after[0], &all));
    ck_assert(CPU_EQUAL(&before[1], &first) && CPU_EQUAL(&after[1], &first));
}
END_TEST

static Suite* timing_suite(void) {
    Suite* s = suite_create("timing");
    TCase* t = tcase_create("eta");
    tcase_add_test(t, test_eta_occurrences);
    tcase_add_test(t, test_eta_hand_computed);
    suite_add_tcase(s, t);
    TCase* p = tcase_create("peak");
    tcase_set_timeout(p, 120);
    tcase_add_test(p, test_peak_stats);
    tcase_add_test(p, test_peak_trial_pins_threads);
    tcase_add_test(p, test_peak_cache_path);
    tcase_add_test(p, test_peak_cache_roundtrip_and_refusals);
    tcase_add_test(p, test_peak_get_uses_the_cache);
    tcase_add_test(p, test_train_reports_cached_peak_and_phases);
    suite_add_tcase(s, p);
    return s;
}

TEST_MAIN(timing_suite)
