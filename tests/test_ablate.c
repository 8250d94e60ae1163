// tests/test_ablate.c: the sweep runner scripts/ablate end to end on tiny models: a two-variant,
// two-seed sweep from one config file writes results.csv (every promised column, one row per
// run), results.md, claims.md and PNG plots, with probe accuracy in the table; a rerun skips
// finished runs; a run cut back to an earlier checkpoint resumes and ends with the same val loss
// (the trainer is deterministic); ablate.reuse copies a finished run with the same resolved
// config and trains one that differs; a bad sweep file exits 2 naming the file.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/testutil.h"

static char g_tmp[1024];

static void setup_paths(void) {
    if (!g_tmp[0]) util_strlcpy(g_tmp, test_tmpdir(), sizeof(g_tmp));
}

// The tiny model of every sweep here: 1 layer, 2 heads, 32 wide, on the recall probe task.
static void write_sweep(const char* path, const char* out, const char* extra) {
    FILE* f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "# a sweep of the runner's test\n"
            "n_layer = 1\nn_head = 2\nn_embd = 32\nblock_size = 32\nvocab_size = 257\n"
            "tokenizer = byte\n"
            "train_data = %s/probes/recall_train_*.bin\nval_data = %s/probes/recall_val_*.bin\n"
            "batch_size = 4\nseq_len = 32\nmax_steps = 12\nwarmup_steps = 2\nlr = 3e-3\n"
            "eval_every = 6\neval_steps = 2\nmetrics_every = 6\ncheckpoint_every = 6\n"
            "keep_last = 2\nlog_every = 1\nthreads = 1\n"
            "ablate.probe = recall\nablate.probe_data = %s/probes\n"
            "ablate.probe_gen = --seq-len 32 --pairs 3 --n-train 200 --n-val 24 --seed 1\n"
            "out_dir = %s\n%s",
            g_tmp, g_tmp, g_tmp, out, extra);
    fclose(f);
}

static int run_ablate(const char* sweep, const char* log) {
    char cmd[8192];
    snprintf(cmd, sizeof(cmd), "cd %s && scripts/ablate %s --bin %s >%s 2>&1", test_repo_root(),
             sweep, test_build_dir(), log);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
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

// results.csv as a table of at most 16 rows x 64 columns (RFC 4180 quoting, no "" escapes:
// run names hold commas)
typedef struct {
    char head[64][48];
    char cell[16][64][64];
    int ncol, nrow;
} Csv;

static void split_line(const char* line, char out[64][64], int* n) {
    *n = 0;
    size_t k = 0;
    int quoted = 0;
    for (const char* p = line;; p++) {
        if (*p == '"') {
            quoted = !quoted;
        } else if ((*p == ',' && !quoted) || *p == '\0' || *p == '\r') {
            out[*n][k < 63 ? k : 63] = '\0';
            if (++*n == 64 || *p != ',') return;
            k = 0;
        } else if (k < 63) {
            out[*n][k++] = *p;
        }
    }
}

static Csv* read_csv(const char* path) {
    char* text = slurp(path);
    ck_assert_msg(text != NULL, "%s missing", path);
    Csv* c = calloc(1, sizeof(Csv));
    char* save = NULL;
    char tmp[64][64];
    int row = -1;
    for (char* line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        int n;
        split_line(line, tmp, &n);
        if (row < 0) {
            c->ncol = n;
            for (int i = 0; i < n; i++)
                util_strlcpy(c->head[i], tmp[i], 48);
        } else if (row < 16) {
            ck_assert_int_eq(n, c->ncol);
            memcpy(c->cell[row], tmp, sizeof(tmp));
        }
        row++;
    }
    c->nrow = row;
    free(text);
    return c;
}

static int col(const Csv* c, const char* name) {
    for (int i = 0; i < c->ncol; i++)
        if (!strcmp(c->head[i], name)) return i;
    return -1;
}

// the cell of column `name` in the row whose `run` starts with `run_prefix`
static const char* cell(const Csv* c, const char* run_prefix, const char* name) {
    int r = col(c, "run"), k = col(c, name);
    ck_assert_msg(r >= 0 && k >= 0, "column %s missing", name);
    for (int i = 0; i < c->nrow; i++)
        if (!strncmp(c->cell[i][r], run_prefix, strlen(run_prefix))) return c->cell[i][k];
    ck_abort_msg("no run %s", run_prefix);
    return NULL;
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
    ck_assert_str_ne(cell(c, "attention=softmax,seed=1", "val_loss"),
                     cell(c, "attention=softmax,seed=2", "val_loss"));
    ck_assert_str_ne(cell(c, "attention=softmax,seed=1", "val_loss"),
                     cell(c, "attention=sigmoid,seed=1", "val_loss"));
    char before[64];
    util_strlcpy(before, cell(c, "attention=sigmoid,seed=2", "val_loss"), sizeof(before));
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
    ck_assert_msg(strstr(text, "**reproduced**") && strstr(text, "**not reproduced**"),
                  "claims.md:\n%s", text); // the 100-nat claim holds, the -5 nat one cannot
    free(text);
    snprintf(path, sizeof(path), "%s/results.md", out);
    text = slurp(path);
    ck_assert_ptr_nonnull(strstr(text, "| sigmoid |"));
    ck_assert_ptr_nonnull(strstr(text, "±")); // mean +- spread over the two seeds
    free(text);

    // a rerun trains nothing
    ck_assert_int_eq(run_ablate(sweep, log), 0);
    snprintf(path, sizeof(path), "%s/attention=softmax,seed=1/train.log", out);
    text = slurp(path);
    ck_assert_int_eq(count_substr(text, "===="), 1);
    free(text);

    // cut one run back to its step-6 checkpoint: the rerun resumes it and ends where it did
    snprintf(path, sizeof(path), "%s/attention=sigmoid,seed=2/model_00000012.bin", out);
    ck_assert_int_eq(unlink(path), 0);
    snprintf(path, sizeof(path), "%s/attention=sigmoid,seed=2/state_00000012.bin", out);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(run_ablate(sweep, log), 0);
    snprintf(path, sizeof(path), "%s/attention=sigmoid,seed=2/train.log", out);
    text = slurp(path);
    ck_assert_int_eq(count_substr(text, "===="), 2);
    ck_assert_ptr_nonnull(strstr(text, "resuming from step 6"));
    free(text);
    snprintf(path, sizeof(path), "%s/results.csv", out);
    c = read_csv(path);
    ck_assert_str_eq(cell(c, "attention=sigmoid,seed=2", "val_loss"), before);
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
    snprintf(path, sizeof(path), "%s/attention=softmax,seed=1/reused_from", out2);
    ck_assert(util_file_exists(path));
    snprintf(path, sizeof(path), "%s/attention=relu,seed=1/train.log", out2);
    ck_assert(util_file_exists(path));
    snprintf(path, sizeof(path), "%s/results.csv", out2);
    c = read_csv(path);
    ck_assert_ptr_nonnull(strstr(cell(c, "attention=softmax,seed=1", "status"), "reused"));
    snprintf(path, sizeof(path), "%s/results.csv", out);
    Csv* c1 = read_csv(path);
    ck_assert_str_eq(cell(c, "attention=softmax,seed=1", "val_loss"),
                     cell(c1, "attention=softmax,seed=1", "val_loss"));
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
    snprintf(path, sizeof(path), "%s/attention=softmax/reused_from", out3);
    ck_assert(!util_file_exists(path));
    snprintf(path, sizeof(path), "%s/attention=softmax/train.log", out3);
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
}
END_TEST

static Suite* ablate_suite(void) {
    Suite* s = suite_create("ablate");
    TCase* tc = tcase_create("runner");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, two_variant_sweep_table_plots_resume);
    tcase_add_test(tc, bad_sweep_file_exits_2_naming_it);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(ablate_suite)
