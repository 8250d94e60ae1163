// tests/test_ablate_stream.c: ablate.stream of scripts/ablate on tiny RoPE models: after each
// run, ./evaluate --stream under the three policies with one cache budget (window only over
// W + S tokens, S sinks beside a window of W, the sliding window with recompute over W + S), its
// columns in results.csv equal to what ./evaluate prints when run by hand with those options,
// stream_gap = the window-only loss minus the sinks + window loss, control_stream set exactly
// when that gap reaches ln 2 (a perplexity twice as high), a claim on stream_gap gated by the
// softmax side's control_stream, the evaluations exported with the run (stream.txt and the
// three CSVs) and named in its rerun; ablate.stream_data streams another file than val_data (here
// one longer document that ablate.stream_gen makes with the task's generator before the runs,
// a step the rerun names too); a malformed ablate.stream or ablate.sinks_hold, ablate.stream_data
// without ablate.stream, ablate.stream_gen without ablate.stream_data or with a wildcard folder,
// and a misspelt ablate.* key exit 2 naming the line.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "tests/csv_util.h"
#include "tests/testutil.h"

static char g_tmp[1024];

static char* slurp(const char* path) {
    size_t len;
    char err[512];
    return util_read_file(path, &len, err, sizeof(err));
}

// The tiny sweep: 1 layer, 2 heads, 32 wide, RoPE, on the recall probe task, EXTRA appended.
static void write_sweep(const char* path, const char* out, const char* extra) {
    FILE* f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "n_layer = 1\nn_head = 2\nn_embd = 32\nblock_size = 32\nvocab_size = 257\n"
            "pos_encoding = rope\ntokenizer = byte\n"
            "train_data = %s/probes/recall_train_*.bin\nval_data = %s/probes/recall_val_*.bin\n"
            "batch_size = 4\nseq_len = 32\nmax_steps = 8\nwarmup_steps = 2\nlr = 3e-3\n"
            "eval_every = 0\nmetrics_every = 4\ncheckpoint_every = 4\nkeep_last = 1\n"
            "threads = 1\n"
            "ablate.probe = recall\nablate.probe_data = %s/probes\n"
            "ablate.probe_gen = --seq-len 32 --pairs 3 --n-train 200 --n-val 24 --seed 1\n"
            "out_dir = %s\n%s",
            g_tmp, g_tmp, g_tmp, out, extra);
    fclose(f);
}

static int run_ablate(const char* sweep, const char* log) {
    char cmd[8192];
    snprintf(cmd, sizeof(cmd), "cd %s && scripts/ablate %s --allow-dirty --bin %s >%s 2>&1",
             test_repo_root(), sweep, test_build_dir(), log);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// "loss L" of ./evaluate --stream run by hand on CKPT with OPTS
static double evaluate_loss(const char* ckpt, const char* opts) {
    char cmd[4096], out[1200];
    snprintf(out, sizeof(out), "%s/hand.txt", g_tmp);
    snprintf(cmd, sizeof(cmd),
             "%s/evaluate --checkpoint %s --stream --data '%s/stream/recall_val_*.bin' "
             "--length 40 --threads 1 %s >%s 2>&1",
             test_build_dir(), ckpt, g_tmp, opts, out);
    int st = system(cmd);
    char* text = slurp(out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s:\n%s", cmd, text ? text : "");
    const char* p = strstr(text, "\nloss ");
    ck_assert_msg(p != NULL, "%s", text);
    double v = atof(p + 6);
    free(text);
    return v;
}

START_TEST(stream_columns_match_evaluate_and_gate_claims) {
    util_strlcpy(g_tmp, test_tmpdir(), sizeof(g_tmp));
    char sweep[1200], out[1200], res[1200], log[1200], path[1600];
    snprintf(sweep, sizeof(sweep), "%s/s.conf", g_tmp);
    snprintf(out, sizeof(out), "%s/s", g_tmp);
    snprintf(res, sizeof(res), "%s/s_results", g_tmp);
    snprintf(log, sizeof(log), "%s/s.log", g_tmp);
    char extra[3000];
    snprintf(extra, sizeof(extra),
             "sweep.attention = softmax, softpick\nsweep.seed = 1, 2, 3\n"
             "ablate.stream = 8, 2, 40\nablate.stream_data = %s/stream/recall_val_*.bin\n"
             "ablate.stream_gen = --seq-len 48 --pairs 3 --n-train 1 --n-val 1 --seed 9\n"
             "ablate.results = %s\n"
             "ablate.claim = stream_gap: softpick < softmax | softpick needs no sink\n",
             g_tmp, res);
    write_sweep(sweep, out, extra);
    int rc = run_ablate(sweep, log);
    char* text = slurp(log);
    ck_assert_msg(rc == 0, "scripts/ablate exit %d:\n%s", rc, text ? text : "");
    free(text);
    // ablate.stream_gen made the stream before the runs: one document of 48 tokens
    snprintf(path, sizeof(path), "%s/stream/recall_val_000000.bin", g_tmp);
    ck_assert_msg(util_file_exists(path), "ablate.stream_gen did not make %s", path);
    snprintf(path, sizeof(path), "%s/results.csv", out);
    Csv* c = read_csv(path);
    ck_assert_int_eq(c->nrow, 6);
    int kw = col(c, "stream_loss_window"), ks = col(c, "stream_loss_sinks");
    int kr = col(c, "stream_loss_recompute"), kg = col(c, "stream_gap");
    int kc = col(c, "control_stream"), kp = col(c, "stream_ppl_window");
    ck_assert_msg(kw >= 0 && ks >= 0 && kr >= 0 && kg >= 0 && kc >= 0 && kp >= 0,
                  "a stream column is missing from results.csv");
    int softmax_ok = 1;
    for (int r = 0; r < c->nrow; r++) {
        double lw = atof(c->cell[r][kw]), ls = atof(c->cell[r][ks]), gap = atof(c->cell[r][kg]);
        ck_assert_msg(c->cell[r][kw][0] && c->cell[r][ks][0] && c->cell[r][kr][0],
                      "row %d: empty stream loss", r);
        ck_assert_msg(fabs(gap - (lw - ls)) < 1e-4, "row %d: gap %g != %g - %g", r, gap, lw, ls);
        ck_assert_msg(fabs(atof(c->cell[r][kp]) - exp(lw)) < 1e-3 * exp(lw), "row %d: ppl", r);
        ck_assert_int_eq(atoi(c->cell[r][kc]), gap >= M_LN2);
        if (!strncmp(c->cell[r][col(c, "run")], "attention-softmax__", 19) &&
            atoi(c->cell[r][kc]) != 1)
            softmax_ok = 0;
    }
    // the runner's columns are ./evaluate's numbers at the options the budget gives, over
    // ablate.stream_data (evaluate_loss streams the generated document)
    snprintf(path, sizeof(path), "%s/attention-softpick__seed-2/model_00000008.bin", out);
    const char* run = "attention-softpick__seed-2";
    ck_assert(fabs(evaluate_loss(path, "--window 10") - atof(cell(c, run, "stream_loss_window"))) <
              1e-5);
    ck_assert(fabs(evaluate_loss(path, "--window 8 --sinks 2") -
                   atof(cell(c, run, "stream_loss_sinks"))) < 1e-5);
    ck_assert(fabs(evaluate_loss(path, "--window 10 --recompute") -
                   atof(cell(c, run, "stream_loss_recompute"))) < 1e-5);
    free(c);
    // the claim is gated by the softmax side's control
    snprintf(path, sizeof(path), "%s/claims.md", out);
    text = slurp(path);
    ck_assert_ptr_nonnull(text);
    if (!softmax_ok)
        ck_assert_msg(strstr(text, "untestable here") && strstr(text, "control_stream"), "%s",
                      text);
    else
        ck_assert_msg(!strstr(text, "untestable here"), "%s", text);
    free(text);
    // exported with the run, and named in its rerun
    const char* files[] = {"stream.txt", "stream_window.csv", "stream_sinks.csv",
                           "stream_recompute.csv"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/attention-softmax__seed-1/%s", res, files[i]);
        ck_assert_msg(util_file_exists(path), "%s missing", path);
    }
    snprintf(path, sizeof(path), "%s/attention-softmax__seed-1/stream_sinks.csv", res);
    text = slurp(path);
    ck_assert_msg(text && !strncmp(text, "policy,window,sinks,", 20) &&
                      strstr(text, "\nsinks,8,2,"),
                  "%s", text ? text : "");
    free(text);
    snprintf(path, sizeof(path), "%s/attention-softmax__seed-1/provenance.json", res);
    text = slurp(path);
    ck_assert_msg(text && strstr(text, "--stream") && strstr(text, "--recompute") &&
                      strstr(text, "--sinks 2"),
                  "%s", text ? text : "");
    const char* st = strstr(text, "--stream --data"); // over ablate.stream_data
    const char* tr = st ? strstr(st, "/stream/recall_val_") : NULL;
    ck_assert_msg(tr && tr - st < 200, "the rerun's stream is not ablate.stream_data:\n%s", text);
    // and the rerun makes that stream as the runner did, before training
    char gen[1400];
    snprintf(gen, sizeof(gen),
             "probe gen recall --out %s/stream --seq-len 48 --pairs 3 --n-train 1 --n-val 1 "
             "--seed 9",
             g_tmp);
    const char* rr = strstr(text, "\"rerun\"");
    const char* g = rr ? strstr(rr, gen) : NULL;
    ck_assert_msg(g && g < strstr(rr, "train include="), "the rerun does not make the stream:\n%s",
                  text);
    free(text);
}
END_TEST

// ablate.stream needs three positive integers, ablate.sinks_hold a K >= 3 and ablate.sinks; an
// unknown ablate.* key is refused (it would silently do nothing)
START_TEST(bad_runner_settings_exit_2) {
    util_strlcpy(g_tmp, test_tmpdir(), sizeof(g_tmp));
    const char* bad[] = {"ablate.stream = 8, 2\n",
                         "ablate.stream = 8, 0, 40\n",
                         "ablate.stream = 8, 2, 40, 1\n",
                         "ablate.stream = 8, x, 40\n",
                         "ablate.strem = 8, 2, 40\n",
                         "ablate.sinks_hold = 3\n",
                         "ablate.sinks = recall\nablate.sinks_hold = 2\n",
                         "ablate.stream_data = x_*.bin\n",
                         "ablate.stream_gen = --n-val 1\n",
                         "ablate.stream = 8, 2, 40\nablate.stream_data = d*/x_*.bin\n"
                         "ablate.stream_gen = --n-val 1\n"};
    const char* want[] = {"ablate.stream",
                          "ablate.stream",
                          "ablate.stream",
                          "ablate.stream",
                          "unknown runner setting ablate.strem",
                          "ablate.sinks_hold needs ablate.sinks",
                          "want K >= 3",
                          "ablate.stream_data needs ablate.stream",
                          "ablate.stream_gen needs ablate.stream_data",
                          "needs a folder without wildcards"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char sweep[1200], out[1200], log[1200], extra[256];
        snprintf(sweep, sizeof(sweep), "%s/b%zu.conf", g_tmp, i);
        snprintf(out, sizeof(out), "%s/b%zu", g_tmp, i);
        snprintf(log, sizeof(log), "%s/b%zu.log", g_tmp, i);
        snprintf(extra, sizeof(extra), "sweep.seed = 1\n%s", bad[i]);
        write_sweep(sweep, out, extra);
        int rc = run_ablate(sweep, log);
        char* text = slurp(log);
        ck_assert_msg(rc == 2, "%s: exit %d:\n%s", bad[i], rc, text ? text : "");
        ck_assert_msg(text && strstr(text, want[i]) && strstr(text, "b") && strstr(text, ".conf:"),
                      "%s:\n%s", bad[i], text ? text : "");
        free(text);
        ck_assert_msg(!util_file_exists(out), "%s: the sweep wrote %s", bad[i], out);
    }
}
END_TEST

static Suite* ablate_stream_suite(void) {
    Suite* s = suite_create("ablate_stream");
    TCase* tc = tcase_create("stream");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, stream_columns_match_evaluate_and_gate_claims);
    tcase_add_test(tc, bad_runner_settings_exit_2);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(ablate_stream_suite)
