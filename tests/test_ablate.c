// tests/test_ablate.c: the sweep runner scripts/ablate end to end on tiny models: a two-variant,
// two-seed sweep from one config file writes results.csv (every promised column, one row per
// run), results.md, claims.md and PNG plots, with probe accuracy in the table; a rerun skips
// finished runs; a run cut back to an earlier checkpoint resumes and ends with the same val loss
// (the trainer is deterministic); ablate.reuse copies a finished run with the same resolved
// config and trains one that differs; a bad sweep file exits 2 naming the file. --part K/N:
// --dry-run shows which seed group each part holds (N = 3 and N = 2 of three seeds) with a time
// estimate per part; a part trains only its seed's runs and exports each to ablate.results as
// soon as it finishes (a runner killed during its second run leaves the first committed-ready);
// another machine running the next part takes the committed runs instead of training them; bad
// --part values and more parts than seed groups exit 2 with a message. Run folder names are of
// [A-Za-z0-9._+-] only, their settings strings are kept in the metadata, and two runs with one
// folder name exit 2.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/csv_util.h"
#include "tests/testutil.h"

static char g_tmp[1024];

static void setup_paths(void) {
    if (!g_tmp[0]) util_strlcpy(g_tmp, test_tmpdir(), sizeof(g_tmp));
}

// The tiny model of every sweep here: N_LAYER layers (1 unless said), 2 heads, 32 wide, on the
// recall probe task.
static void write_sweep_layers(const char* path, const char* out, const char* extra, int n_layer) {
    FILE* f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "# a sweep of the runner's test\n"
            "n_layer = %d\nn_head = 2\nn_embd = 32\nblock_size = 32\nvocab_size = 257\n"
            "tokenizer = byte\n"
            "train_data = %s/probes/recall_train_*.bin\nval_data = %s/probes/recall_val_*.bin\n"
            "batch_size = 4\nseq_len = 32\nmax_steps = 12\nwarmup_steps = 2\nlr = 3e-3\n"
            "eval_every = 6\neval_steps = 2\nmetrics_every = 6\ncheckpoint_every = 6\n"
            "keep_last = 2\nlog_every = 1\nthreads = 1\n"
            "ablate.probe = recall\nablate.probe_data = %s/probes\n"
            "ablate.probe_gen = --seq-len 32 --pairs 3 --n-train 200 --n-val 24 --seed 1\n"
            "out_dir = %s\n%s",
            n_layer, g_tmp, g_tmp, g_tmp, out, extra);
    fclose(f);
}

static void write_sweep(const char* path, const char* out, const char* extra) {
    write_sweep_layers(path, out, extra, 1);
}

// scripts/ablate SWEEP ARGS --bin BIN (BIN NULL: the build directory), output into LOG; the
// sweep files here are outside the repository, so not committed: --allow-dirty
static int run_ablate_args(const char* sweep, const char* args, const char* bin, const char* log) {
    char cmd[8192];
    snprintf(cmd, sizeof(cmd), "cd %s && scripts/ablate %s %s --allow-dirty --bin %s >%s 2>&1",
             test_repo_root(), sweep, args, bin ? bin : test_build_dir(), log);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int run_ablate(const char* sweep, const char* log) {
    return run_ablate_args(sweep, "", NULL, log);
}

static char* slurp(const char* path) {
    size_t len;
    char err[512];
    return util_read_file(path, &len, err, sizeof(err));
}

static int count_substr(const char* s, const char* needle) {
    int n = 0;
    for (const char* p = s; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static int is_png(const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char b[8];
    size_t n = fread(b, 1, 8, f);
    fclose(f);
    return n == 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8);
}

START_TEST(two_variant_sweep_table_plots_resume) {
    setup_paths();
    char sweep[1200], out[1200], log[1200], path[1400];
    snprintf(sweep, sizeof(sweep), "%s/s1.conf", g_tmp);
    snprintf(out, sizeof(out), "%s/s1", g_tmp);
    snprintf(log, sizeof(log), "%s/s1.log", g_tmp);
    write_sweep(sweep, out,
                "sweep.attention = softmax, sigmoid\nsweep.seed = 1, 2\n"
                "ablate.claim = val_loss: sigmoid ~ softmax 100 | equal within 100 nats\n"
                "ablate.claim = val_loss: sigmoid < -5 | below -5 nats\n");
    int rc = run_ablate(sweep, log);
    char* text = slurp(log);
    ck_assert_msg(rc == 0, "scripts/ablate exit %d:\n%s", rc, text ? text : "");
    ck_assert_ptr_nonnull(strstr(text, "ETA"));
    ck_assert_ptr_nonnull(strstr(text, "4/4 done"));
    free(text);

    snprintf(path, sizeof(path), "%s/results.csv", out);
    Csv* c = read_csv(path);
    ck_assert_int_eq(c->nrow, 4);
    const char* need[] = {"attention",     "seed",         "val_loss",    "best_val_loss",
                          "train_loss",    "step_ms",      "tok_per_s",   "sink_rate",
                          "kurtosis_mean", "kurtosis_max", "max_abs_act", "entropy_norm",
                          "grad_spikes",   "diverged",     "probe_acc"};
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
        ck_assert_msg(col(c, need[i]) >= 0, "results.csv has no column %s", need[i]);
    int kv = col(c, "val_loss"), kb = col(c, "best_val_loss"), ks = col(c, "status");
    int ka = col(c, "probe_acc");
    for (int i = 0; i < 4; i++) {
        ck_assert_str_eq(c->cell[i][ks], "ok");
        double v = atof(c->cell[i][kv]), b = atof(c->cell[i][kb]), a = atof(c->cell[i][ka]);
        ck_assert_msg(v > 0.5 && v < 7.0, "val_loss %g", v); // ln 257 = 5.55 at the start
        ck_assert(b <= v);
        ck_assert(a >= 0 && a <= 1 && c->cell[i][ka][0] != '\0');
    }
    // the two seeds differ, the variants differ
    ck_assert_str_ne(cell(c, "attention-softmax__seed-1", "val_loss"),
                     cell(c, "attention-softmax__seed-2", "val_loss"));
    ck_assert_str_ne(cell(c, "attention-softmax__seed-1", "val_loss"),
                     cell(c, "attention-sigmoid__seed-1", "val_loss"));
    char before[64];
    util_strlcpy(before, cell(c, "attention-sigmoid__seed-2", "val_loss"), sizeof(before));
    free(c);

    const char* files[] = {"results.md", "claims.md", "plots/loss.png"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/%s", out, files[i]);
        ck_assert_msg(util_file_exists(path), "%s missing", path);
    }
    snprintf(path, sizeof(path), "%s/plots/loss.png", out);
    ck_assert(is_png(path));
    snprintf(path, sizeof(path), "%s/claims.md", out);
    text = slurp(path);
    // the 100-nat claim holds, the -5 nat one cannot; with 2 seeds the exact sign-flip p is at
    // least 1/2, so after Holm's correction neither verdict stands
    ck_assert_msg(
        strstr(text, "(unadjusted: reproduced)") && strstr(text, "(unadjusted: not reproduced)") &&
            strstr(text, "- **inconclusive after correction**") && !strstr(text, "- **reproduced"),
        "claims.md:\n%s", text);
    free(text);
    snprintf(path, sizeof(path), "%s/results.md", out);
    text = slurp(path);
    ck_assert_ptr_nonnull(strstr(text, "| sigmoid |"));
    ck_assert_ptr_nonnull(strstr(text, "±")); // mean +- spread over the two seeds
    free(text);

    // a rerun trains nothing
    ck_assert_int_eq(run_ablate(sweep, log), 0);
    snprintf(path, sizeof(path), "%s/attention-softmax__seed-1/train.log", out);
    text = slurp(path);
    ck_assert_int_eq(count_substr(text, "===="), 1);
    free(text);

    // cut one run back to its step-6 checkpoint: the rerun resumes it and ends where it did
    snprintf(path, sizeof(path), "%s/attention-sigmoid__seed-2/model_00000012.bin", out);
    ck_assert_int_eq(unlink(path), 0);
    snprintf(path, sizeof(path), "%s/attention-sigmoid__seed-2/state_00000012.bin", out);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(run_ablate(sweep, log), 0);
    snprintf(path, sizeof(path), "%s/attention-sigmoid__seed-2/train.log", out);
    text = slurp(path);
    ck_assert_int_eq(count_substr(text, "===="), 2);
    ck_assert_ptr_nonnull(strstr(text, "resuming from step 6"));
    free(text);
    snprintf(path, sizeof(path), "%s/results.csv", out);
    c = read_csv(path);
    ck_assert_str_eq(cell(c, "attention-sigmoid__seed-2", "val_loss"), before);
    free(c);

    // ablate.reuse: softmax seed 1 has the same resolved config as in s1 (other comments,
    // other out_dir): copied; relu is new: trained
    char sweep2[1200], out2[1200], extra[1400];
    snprintf(sweep2, sizeof(sweep2), "%s/s2.conf", g_tmp);
    snprintf(out2, sizeof(out2), "%s/s2", g_tmp);
    snprintf(extra, sizeof(extra),
             "# another sweep\nsweep.attention = softmax, relu\nsweep.seed = 1\n"
             "ablate.reuse = %s\n",
             out);
    write_sweep(sweep2, out2, extra);
    rc = run_ablate(sweep2, log);
    text = slurp(log);
    ck_assert_msg(rc == 0, "%s", text);
    ck_assert_int_eq(count_substr(text, ": reused"), 1);
    free(text);
    snprintf(path, sizeof(path), "%s/attention-softmax__seed-1/reused_from", out2);
    ck_assert(util_file_exists(path));
    snprintf(path, sizeof(path), "%s/attention-relu__seed-1/train.log", out2);
    ck_assert(util_file_exists(path));
    snprintf(path, sizeof(path), "%s/results.csv", out2);
    c = read_csv(path);
    ck_assert_ptr_nonnull(strstr(cell(c, "attention-softmax__seed-1", "status"), "reused"));
    snprintf(path, sizeof(path), "%s/results.csv", out);
    Csv* c1 = read_csv(path);
    ck_assert_str_eq(cell(c, "attention-softmax__seed-1", "val_loss"),
                     cell(c1, "attention-softmax__seed-1", "val_loss"));
    free(c);
    free(c1);

    // a different resolved config (lr) is not reused
    char sweep3[1200], out3[1200];
    snprintf(sweep3, sizeof(sweep3), "%s/s3.conf", g_tmp);
    snprintf(out3, sizeof(out3), "%s/s3", g_tmp);
    snprintf(extra, sizeof(extra), "lr = 2e-3\nsweep.attention = softmax\nablate.reuse = %s\n",
             out);
    write_sweep(sweep3, out3, extra);
    ck_assert_int_eq(run_ablate(sweep3, log), 0);
    snprintf(path, sizeof(path), "%s/attention-softmax/reused_from", out3);
    ck_assert(!util_file_exists(path));
    snprintf(path, sizeof(path), "%s/attention-softmax/train.log", out3);
    ck_assert(util_file_exists(path));
}
END_TEST

START_TEST(bad_sweep_file_exits_2_naming_it) {
    setup_paths();
    char sweep[1200], out[1200], log[1200];
    snprintf(sweep, sizeof(sweep), "%s/bad.conf", g_tmp);
    snprintf(out, sizeof(out), "%s/bad", g_tmp);
    snprintf(log, sizeof(log), "%s/bad.log", g_tmp);
    write_sweep(sweep, out, "sweep.seed = 1, , 2\n");
    ck_assert_int_eq(run_ablate(sweep, log), 2);
    char* text = slurp(log);
    ck_assert_msg(strstr(text, "bad.conf:") && strstr(text, "empty value"), "%s", text);
    free(text);
    write_sweep(sweep, out, "");
    ck_assert_int_eq(run_ablate(sweep, log), 2);
    text = slurp(log);
    ck_assert_msg(strstr(text, "bad.conf") && strstr(text, "no sweep."), "%s", text);
    free(text);
    // a claim that cannot be judged (parity without its tolerance, a field given twice) stops
    // the sweep while the file is read, naming its line, before anything is trained
    const char* bad_claims[2][2] = {
        {"ablate.claim = val_loss: softmax1 ~ softmax | equal loss\n", "positive tolerance"},
        {"ablate.claim = val_loss: softmax1 < softmax | lower | size: -1 | size: -2\n",
         "given twice"}};
    for (int i = 0; i < 2; i++) {
        char extra[400];
        snprintf(extra, sizeof(extra), "sweep.seed = 1, 2\n%s", bad_claims[i][0]);
        write_sweep(sweep, out, extra);
        char* conf = slurp(sweep);
        int line = 1;
        for (const char* c = conf; c < strstr(conf, "ablate.claim"); c++)
            line += *c == '\n';
        free(conf);
        char want[64];
        snprintf(want, sizeof(want), "bad.conf:%d: ablate.claim: ", line);
        ck_assert_int_eq(run_ablate(sweep, log), 2);
        text = slurp(log);
        ck_assert_msg(strstr(text, want) && strstr(text, bad_claims[i][1]), "want '%s': %s", want,
                      text);
        free(text);
        ck_assert_msg(access(out, F_OK) != 0, "%s was made for a refused sweep", out);
    }
}
END_TEST

// the line of `text` that contains `needle` (copied into out), or "" when there is none
static const char* line_with(const char* text, const char* needle, char* out, size_t cap) {
    out[0] = '\0';
    const char* p = strstr(text, needle);
    if (!p) return out;
    const char* b = p;
    while (b > text && b[-1] != '\n')
        b--;
    size_t n = strcspn(b, "\n");
    if (n >= cap) n = cap - 1;
    memcpy(out, b, n);
    out[n] = '\0';
    return out;
}

START_TEST(part_runs_seed_groups_and_exports_each_run) {
    setup_paths();
    char sweep[1200], out[1200], res[1200], log[1200], path[1600], extra[1400], ln[512];
    snprintf(sweep, sizeof(sweep), "%s/p.conf", g_tmp);
    snprintf(out, sizeof(out), "%s/p", g_tmp);
    snprintf(res, sizeof(res), "%s/p_results", g_tmp);
    snprintf(log, sizeof(log), "%s/p.log", g_tmp);
    snprintf(extra, sizeof(extra),
             "sweep.attention = softmax, sigmoid\nsweep.seed = 1, 2, 3\nablate.results = %s\n"
             "ablate.step_ms = 500\n",
             res);
    write_sweep(sweep, out, extra);

    // which runs each part holds: seed s of every variant together
    ck_assert_int_eq(run_ablate_args(sweep, "--dry-run --part 2/3", NULL, log), 0);
    char* text = slurp(log);
    ck_assert_ptr_nonnull(
        strstr(line_with(text, "attention-softmax__seed-2 ", ln, sizeof(ln)), "part 2/3"));
    ck_assert_ptr_nonnull(
        strstr(line_with(text, "attention-sigmoid__seed-2 ", ln, sizeof(ln)), "part 2/3"));
    ck_assert_ptr_nonnull(
        strstr(line_with(text, "attention-sigmoid__seed-1 ", ln, sizeof(ln)), "part 1/3"));
    ck_assert_ptr_nonnull(
        strstr(line_with(text, "attention-softmax__seed-3 ", ln, sizeof(ln)), "part 3/3"));
    // 2 runs of 12 steps at 500 ms/step: 12 s per part
    line_with(text, "part 2/3 (seed 2): 2 runs, 2 to train, estimated 12s", ln, sizeof(ln));
    ck_assert_msg(ln[0], "no estimate for part 2/3:\n%s", text);
    // the command it prints for a part repeats --bin, so the part runs with the same tools
    char want[1400];
    snprintf(want, sizeof(want), "--part 2/3 --bin %s, then commit", test_build_dir());
    ck_assert_msg(strstr(text, want), "no '%s' in:\n%s", want, text);
    free(text);
    ck_assert_int_eq(run_ablate_args(sweep, "--dry-run --part 1/2 --jobs 2", NULL, log), 0);
    text = slurp(log);
    // ... and --jobs
    ck_assert_msg(strstr(line_with(text, "run it: scripts/ablate", ln, sizeof(ln)), " --jobs 2, "),
                  "no --jobs 2 in: %s", ln);
    ck_assert_ptr_nonnull(strstr(text, "part 1/2 (seed 1): 2 runs"));
    ck_assert_ptr_nonnull(strstr(text, "part 2/2 (seed 2,3): 4 runs"));
    ck_assert_ptr_nonnull(
        strstr(line_with(text, "attention-sigmoid__seed-3 ", ln, sizeof(ln)), "part 2/2"));
    free(text);

    // bad values: exit 2 with a message naming --part
    const char* bad[] = {"--part 0/3", "--part 4/3",   "--part x",
                         "--part 2/4", "--part 1/3/2", "--part"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(run_ablate_args(sweep, bad[i], NULL, log) == 2, "%s: not exit 2", bad[i]);
        text = slurp(log);
        ck_assert_msg(strstr(text, "--part"), "%s: %s", bad[i], text);
        if (!strcmp(bad[i], "--part 2/4")) ck_assert_msg(strstr(text, "3 seed groups"), "%s", text);
        free(text);
    }

    // part 1 with a trainer that kills the runner when its second run starts: the first run is
    // already exported to ablate.results, the second is not, no other part's run started
    char fake[1200], script[1400];
    snprintf(fake, sizeof(fake), "%s/fakebin", g_tmp);
    ck_assert_int_eq(mkdir(fake, 0755), 0);
    snprintf(script, sizeof(script), "%s/train", fake);
    FILE* f = fopen(script, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "#!/bin/sh\ncase \"$*\" in *attention-sigmoid__seed-1/run.conf*resume=1*)\n"
            "    kill -KILL $PPID; exit 137 ;;\nesac\nexec %s/train \"$@\"\n",
            test_build_dir());
    fclose(f);
    ck_assert_int_eq(chmod(script, 0755), 0);
    const char* tools[] = {"probe", "evaluate"};
    for (int i = 0; i < 2; i++) {
        char src[1400], dst[1400];
        snprintf(src, sizeof(src), "%s/%s", test_build_dir(), tools[i]);
        snprintf(dst, sizeof(dst), "%s/%s", fake, tools[i]);
        ck_assert_int_eq(symlink(src, dst), 0);
    }
    int rc = run_ablate_args(sweep, "--part 1/3", fake, log);
    ck_assert_msg(rc != 0, "the runner was not killed");
    const char* kept[] = {"provenance.json", "config.conf", "metrics.jsonl.gz", "heads.csv"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof(path), "%s/attention-softmax__seed-1/%s", res, kept[i]);
        ck_assert_msg(util_file_exists(path), "%s missing after the kill", path);
    }
    snprintf(path, sizeof(path), "%s/attention-sigmoid__seed-1", res);
    ck_assert(!util_file_exists(path));
    const char* others[] = {"softmax__seed-2", "softmax__seed-3", "sigmoid__seed-2"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/attention-%s/train.log", out, others[i]);
        ck_assert_msg(!util_file_exists(path), "%s: trained outside its part", path);
    }

    // the same part again with the real trainer: the finished run is skipped, the other trained.
    // The killed runner's trainer (the fake, which holds the sweep's lock as every trainer does)
    // may still be ending: a runner started before it has is refused, rightly, so wait for it.
    char wait_lock[1400];
    snprintf(wait_lock, sizeof(wait_lock), "flock -w 60 '%s/ablate.lock' true", out);
    ck_assert_msg(system(wait_lock) == 0, "%s: still held a minute after the kill", wait_lock);
    ck_assert_int_eq(run_ablate_args(sweep, "--part 1/3", NULL, log), 0);
    text = slurp(log);
    ck_assert_msg(strstr(text, "2/2 done"), "%s", text);
    free(text);
    snprintf(path, sizeof(path), "%s/attention-softmax__seed-1/train.log", out);
    text = slurp(path);
    ck_assert_int_eq(count_substr(text, "===="), 1);
    free(text);
    snprintf(path, sizeof(path), "%s/attention-sigmoid__seed-1/provenance.json", res);
    ck_assert(util_file_exists(path));

    // another machine (a fresh sweep directory) runs part 2: seed 1 comes from the committed
    // results, seed 2 is trained, seed 3 is left
    char out2[1200];
    snprintf(out2, sizeof(out2), "--part 2/3 --out %s/p2", g_tmp);
    ck_assert_int_eq(run_ablate_args(sweep, out2, NULL, log), 0);
    snprintf(path, sizeof(path), "%s/p2/results.csv", g_tmp);
    Csv* c = read_csv(path);
    ck_assert_int_eq(c->nrow, 6);
    ck_assert_str_eq(cell(c, "attention-softmax__seed-1", "status"), "ok");
    ck_assert_str_eq(cell(c, "attention-sigmoid__seed-1", "status"), "ok");
    ck_assert_str_eq(cell(c, "attention-softmax__seed-2", "status"), "ok");
    ck_assert_str_eq(cell(c, "attention-sigmoid__seed-3", "status"), "not run");
    free(c);
    snprintf(path, sizeof(path), "%s/p2/attention-softmax__seed-1/train.log", g_tmp);
    ck_assert(!util_file_exists(path)); // not trained there
    snprintf(path, sizeof(path), "%s/attention-sigmoid__seed-2/provenance.json", res);
    ck_assert(util_file_exists(path));

    // part 1 on a third machine: both runs come from the committed results, and the progress
    // line counts them as done (not "0/2 done, 2 left")
    snprintf(out2, sizeof(out2), "--part 1/3 --out %s/p3", g_tmp);
    ck_assert_int_eq(run_ablate_args(sweep, out2, NULL, log), 0);
    text = slurp(log);
    ck_assert_msg(strstr(text, "2/2 done, 0 failed, 0 left") && !strstr(text, "training (log"),
                  "%s", text);
    free(text);

    // a sweep without sweep.seed is one group: it cannot be cut
    write_sweep(sweep, out, "sweep.attention = softmax, sigmoid\n");
    ck_assert_int_eq(run_ablate_args(sweep, "--dry-run --part 1/2", NULL, log), 2);
    text = slurp(log);
    ck_assert_msg(strstr(text, "no sweep.seed line"), "%s", text);
    free(text);
}
END_TEST

// ablate.sinks: ./probe sinks on each final checkpoint and scripts/score_sinks on every kept
// one; the papers' columns in results.csv, the trajectory exported with the run, and a claim on
// them gated by the calibrated control (control_sink_gu of the softmax side: a 4-step model has
// near-uniform rows, Gu's importance about H_16 / 16 = 0.21 < 0.3 and a non-trigger weight
// below 0.5, so the claim is "untestable here").
START_TEST(sinks_columns_trajectory_and_control_gate) {
    setup_paths();
    char sweep[1200], out[1200], res[1200], log[1200], path[1600];
    snprintf(sweep, sizeof(sweep), "%s/k.conf", g_tmp);
    snprintf(out, sizeof(out), "%s/k", g_tmp);
    snprintf(res, sizeof(res), "%s/k_results", g_tmp);
    snprintf(log, sizeof(log), "%s/k.log", g_tmp);
    FILE* f = fopen(sweep, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "n_layer = 1\nn_head = 1\nn_embd = 16\nblock_size = 16\nvocab_size = 257\n"
            "tokenizer = byte\n"
            "train_data = %s/bbp/bb_train_*.bin\nval_data = %s/bbp/bb_val_*.bin\n"
            "batch_size = 4\nseq_len = 16\nmax_steps = 4\nwarmup_steps = 1\n"
            "eval_every = 0\nmetrics_every = 2\ncheckpoint_every = 2\nkeep_last = 10\n"
            "threads = 1\nsweep.attention = softmax, relu\nsweep.seed = 1, 2, 3\n"
            "ablate.probe = bb\nablate.probe_data = %s/bbp\nablate.sinks = bb\n"
            "ablate.probe_gen = --seq-len 16 --n-train 200 --n-val 100 --alphabet 4 "
            "--trigger-every 2 --seed 1\nablate.results = %s\n"
            "ablate.claim = nontrig_a0_max_raw: relu < softmax | ReLU parks no head\n"
            "out_dir = %s\n",
            g_tmp, g_tmp, g_tmp, res, out);
    fclose(f);
    int rc = run_ablate(sweep, log);
    char* text = slurp(log);
    ck_assert_msg(rc == 0, "scripts/ablate exit %d:\n%s", rc, text ? text : "");
    free(text);
    snprintf(path, sizeof(path), "%s/results.csv", out);
    Csv* c = read_csv(path);
    ck_assert_int_eq(c->nrow, 6);
    const char* need[] = {"sink_rate_gu", "sink_rate_gu_raw", "nontrig_a0_max",
                          "nontrig_a0_max_raw", "control_sink_gu"};
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
        int k = col(c, need[i]);
        ck_assert_msg(k >= 0, "results.csv has no column %s", need[i]);
        for (int r = 0; r < c->nrow; r++) {
            double v = atof(c->cell[r][k]);
            ck_assert_msg(c->cell[r][k][0] != '\0' && v >= 0 && v <= 1, "%s = '%s'", need[i],
                          c->cell[r][k]);
        }
    }
    int kc = col(c, "control_sink_gu");
    for (int r = 0; r < c->nrow; r++)
        ck_assert_str_eq(c->cell[r][kc], "0");
    free(c);
    // the trajectory of every kept checkpoint (steps 2 and 4), exported with the run
    snprintf(path, sizeof(path), "%s/attention-softmax__seed-1/sinks.csv", res);
    text = slurp(path);
    ck_assert_msg(text && strstr(text, "\n2,") && strstr(text, "\n4,"), "%s", text ? text : path);
    free(text);
    snprintf(path, sizeof(path), "%s/attention-relu__seed-2/sinks.json", res);
    ck_assert_msg(util_file_exists(path), "%s missing", path);
    snprintf(path, sizeof(path), "%s/claims.md", out);
    text = slurp(path);
    ck_assert_msg(strstr(text, "untestable here") && strstr(text, "control_sink_gu"), "%s", text);
    free(text);
}
END_TEST

// every directory in DIR but plots/ (a run folder) has a name of [A-Za-z0-9._+-] only; returns
// how many there are
static int check_run_dir_names(const char* dir) {
    DIR* d = opendir(dir);
    ck_assert_msg(d != NULL, "%s: cannot open", dir);
    int n = 0;
    char path[2048];
    for (struct dirent* e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "plots")) continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        const char* ok = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._+-";
        ck_assert_msg(strspn(e->d_name, ok) == strlen(e->d_name),
                      "run folder '%s' has a character outside [A-Za-z0-9._+-]", e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

// Run names (docs/ablations.md): per-layer specs with ',' and ':' in a ';'-separated line, a
// value with spaces and ' + ' extras all give folders of [A-Za-z0-9._+-] only (KEY-VALUE joined
// by '__'); the key=value settings string is kept in ablate_sweep.tsv, ablate_status.json,
// provenance.json and results.csv; two runs that map to one folder name exit 2 naming both.
START_TEST(run_names_shell_safe_settings_in_metadata) {
    setup_paths();
    char sweep[1200], out[1200], res[1200], log[1200], path[1600], extra[1400];
    snprintf(sweep, sizeof(sweep), "%s/n.conf", g_tmp);
    snprintf(out, sizeof(out), "%s/n", g_tmp);
    snprintf(res, sizeof(res), "%s/n_results", g_tmp);
    snprintf(log, sizeof(log), "%s/n.log", g_tmp);
    // the names, without training: --report-only writes every run's folder and ablate_sweep.tsv
    write_sweep_layers(sweep, out,
                       "sweep.attention = 0:softmax,1:relu; 0:relu, 1:softmax; "
                       "sigmoid + attn.bias_mode=none\nsweep.seed = 1\n",
                       2);
    ck_assert_int_eq(run_ablate_args(sweep, "--report-only", NULL, log), 0);
    ck_assert_int_eq(check_run_dir_names(out), 3);
    const char* names[] = {"attention-0_softmax_1_relu__seed-1",
                           "attention-0_relu__1_softmax__seed-1",
                           "attention-sigmoid+attn.bias_mode-none__seed-1"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/%s/run.conf", out, names[i]);
        ck_assert_msg(util_file_exists(path), "%s missing", path);
    }
    snprintf(path, sizeof(path), "%s/ablate_sweep.tsv", out);
    char* text = slurp(path);
    ck_assert_msg(strstr(text, "run_settings\tattention-0_relu__1_softmax__seed-1\t"
                               "attention=0:relu, 1:softmax,seed=1\n") &&
                      strstr(text, "run_settings\tattention-sigmoid+attn.bias_mode-none__seed-1\t"
                                   "attention=sigmoid+attn.bias_mode=none,seed=1\n"),
                  "%s", text);
    free(text);

    // a trained run keeps its settings in ablate_status.json, provenance.json and results.csv
    snprintf(extra, sizeof(extra),
             "sweep.attention = 0:softmax,1:relu; softmax\nsweep.seed = 1\nablate.results = %s\n",
             res);
    write_sweep_layers(sweep, out, extra, 2);
    int rc = run_ablate(sweep, log);
    text = slurp(log);
    ck_assert_msg(rc == 0, "scripts/ablate exit %d:\n%s", rc, text ? text : "");
    free(text);
    ck_assert_int_eq(check_run_dir_names(res), 2);
    const char* want = "\"settings\": \"attention=0:softmax,1:relu,seed=1\"";
    snprintf(path, sizeof(path), "%s/attention-0_softmax_1_relu__seed-1/ablate_status.json", out);
    text = slurp(path);
    ck_assert_msg(text && strstr(text, want), "%s: %s", path, text ? text : "missing");
    free(text);
    snprintf(path, sizeof(path), "%s/attention-0_softmax_1_relu__seed-1/provenance.json", res);
    text = slurp(path);
    ck_assert_msg(text && strstr(text, want) &&
                      strstr(text, "\"run\": \"attention-0_softmax_1_relu__seed-1\"") &&
                      strstr(text, "/attention-0_softmax_1_relu__seed-1/config.conf"),
                  "%s: %s", path, text ? text : "missing");
    free(text);
    snprintf(path, sizeof(path), "%s/results.csv", res);
    Csv* c = read_csv(path);
    ck_assert_str_eq(cell(c, "attention-0_softmax_1_relu__seed-1", "settings"),
                     "attention=0:softmax,1:relu,seed=1");
    ck_assert_str_eq(cell(c, "attention-softmax__seed-1", "settings"), "attention=softmax,seed=1");
    free(c);

    // two runs with one folder name: exit 2 at parse time, naming both runs' settings
    write_sweep_layers(sweep, out,
                       "sweep.attention = 0:softmax,1:relu; 0:softmax 1:relu\nsweep.seed = 1\n", 2);
    ck_assert_int_eq(run_ablate_args(sweep, "--dry-run", NULL, log), 2);
    text = slurp(log);
    ck_assert_msg(strstr(text, "n.conf") && strstr(text, "'attention=0:softmax,1:relu,seed=1'") &&
                      strstr(text, "'attention=0:softmax 1:relu,seed=1'") &&
                      strstr(text, "'attention-0_softmax_1_relu__seed-1'"),
                  "%s", text);
    free(text);
}
END_TEST

// ablate.setup under --bin DIR runs the project's own tools from DIR (./prepare -> DIR/prepare,
// as the rerun steps of scripts/results_export say), other ./NAME and scripts/ as written.
START_TEST(setup_runs_the_tools_of_bin) {
    setup_paths();
    // the sweep file, the fake --bin directory, the file its prepare writes, the runner's log
    char names[4][1200], p[2600];
    const char* leaf[4] = {"s.conf", "setupbin", "setup.mark", "s.log"};
    for (int i = 0; i < 4; i++)
        snprintf(names[i], sizeof(names[i]), "%s/%s", g_tmp, leaf[i]);
    const char *sweep = names[0], *fake = names[1], *mark = names[2], *log = names[3];
    ck_assert_int_eq(mkdir(fake, 0755), 0);
    const char* tools[] = {"train", "prepare"};
    for (int i = 0; i < 2; i++) { // both record who ran them, then fail the setup
        snprintf(p, sizeof(p), "%s/%s", fake, tools[i]);
        FILE* f = fopen(p, "w");
        ck_assert_ptr_nonnull(f);
        if (i == 0)
            fprintf(f, "#!/bin/sh\nexec %s/train \"$@\"\n", test_build_dir());
        else
            fprintf(f, "#!/bin/sh\necho \"$0 $*\" >>%s\nexit 3\n", mark);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_int_eq(chmod(p, 0755), 0);
    }
    FILE* f = fopen(sweep, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "n_layer = 1\nn_head = 2\nn_embd = 32\nblock_size = 32\nvocab_size = 257\n"
            "tokenizer = byte\ntrain_data = %s/nodata/x_train_*.bin\n"
            "val_data = %s/nodata/x_val_*.bin\nbatch_size = 4\nseq_len = 32\nmax_steps = 4\n"
            "warmup_steps = 1\nthreads = 1\nsweep.seed = 1\n"
            "ablate.setup = test -d ./prepare2 || ./prepare --out %s/nodata/x\n"
            "out_dir = %s/s\n",
            g_tmp, g_tmp, g_tmp, g_tmp);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_ne(run_ablate_args(sweep, "", fake, log), 0); // the fake prepare fails
    char* text = slurp(log);
    snprintf(p, sizeof(p), "%s/prepare --out %s/nodata/x", fake, g_tmp);
    ck_assert_msg(text && strstr(text, "ablate.setup failed: test -d ./prepare2 || ") &&
                      strstr(text, p),
                  "%s", text ? text : "no log");
    free(text);
    text = slurp(mark);
    ck_assert_msg(text && strstr(text, p), "--bin's prepare did not run: %s", text ? text : "");
    free(text);
}
END_TEST

static Suite* ablate_suite(void) {
    Suite* s = suite_create("ablate");
    TCase* tc = tcase_create("runner");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, two_variant_sweep_table_plots_resume);
    tcase_add_test(tc, bad_sweep_file_exits_2_naming_it);
    tcase_add_test(tc, part_runs_seed_groups_and_exports_each_run);
    tcase_add_test(tc, sinks_columns_trajectory_and_control_gate);
    tcase_add_test(tc, run_names_shell_safe_settings_in_metadata);
    tcase_add_test(tc, setup_runs_the_tools_of_bin);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(ablate_suite)
