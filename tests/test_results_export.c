// tests/test_results_export.c: the names and values scripts/results_export writes into a
// committed run's "command" and "rerun" (docs/ablations.md, "Reruns across machines"):
//   - a run folder or a results folder whose name is not a plain folder name ($(...), a space,
//     a quote, a newline, ..) is refused, exit 2 naming the folder, before anything is written,
//     on export and under --relabel; the payloads' marker file is never created;
//   - a sweep setting that needs quoting (a path with a space or a quote) is written as one
//     quoted shell word, which shlex.split reads back whole; scripts/rerun_check --check refuses
//     such a path (no shell and no odd path in a rerun) and accepts an ordinary relabelled run.
// Nothing is trained: the runs are a config.conf and a metrics file.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "common/util.h"
#include "tests/testutil.h"

#define PY "/usr/bin/python3"

static char g_tmp[600];
static char g_out[1 << 15];

// argv run in folder cwd, without a shell; its exit code, its stdout and stderr into g_out
static int run_in(const char* cwd, char* const argv[]) {
    char log[800];
    snprintf(log, sizeof(log), "%s/run.log", g_tmp);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || chdir(cwd) != 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    FILE* f = fopen(log, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(g_out, 1, sizeof(g_out) - 1, f);
    g_out[n] = '\0';
    fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void put(const char* path, const char* text) {
    FILE* f = fopen(path, "w");
    ck_assert_msg(f != NULL, "%s", path);
    ck_assert_int_ge(fputs(text, f), 0);
    ck_assert_int_eq(fclose(f), 0);
}

static int exists(const char* path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

// a finished run of a sweep folder: dir/name with config.conf, metrics.jsonl and its final
// checkpoint (empty: export copies only the small files)
static void sweep_run(const char* dir, const char* name) {
    char d[1400], p[1600];
    snprintf(d, sizeof(d), "%s/%s", dir, name);
    ck_assert_msg(mkdir(d, 0755) == 0, "%s", d);
    snprintf(p, sizeof(p), "%s/config.conf", d);
    put(p, "max_steps = 2\nseq_len = 8\n");
    snprintf(p, sizeof(p), "%s/metrics.jsonl", d);
    put(p, "{\"step\":0,\"event\":\"run\",\"precision\":\"fp32\",\"precision_info\":\"fp32\"}\n"
           "{\"step\":1,\"train_loss\":2.5}\n");
    snprintf(p, sizeof(p), "%s/model_00000002.bin", d);
    put(p, "");
}

// The marker a payload `touch${IFS}X` would create in the folder it ran in (g_tmp)
static void assert_no_marker(const char* what) {
    char p[800];
    snprintf(p, sizeof(p), "%s/X", g_tmp);
    ck_assert_msg(!exists(p), "%s: the payload ran", what);
}

// results_export SWEEP RESULTS [RUN]: a bad run or results folder name is exit 2, naming the
// folder, and nothing is written
START_TEST(test_export_refuses_folder_names) {
    snprintf(g_tmp, sizeof(g_tmp), "%s", test_tmpdir());
    char script[1200], sweep[800], res[900], dst[1200], p[1400];
    snprintf(script, sizeof(script), "%s/scripts/results_export", test_repo_root());
    // a sweep whose one run folder is named $(touch${IFS}X)
    snprintf(sweep, sizeof(sweep), "%s/sw", g_tmp);
    ck_assert_int_eq(mkdir(sweep, 0755), 0);
    snprintf(p, sizeof(p), "%s/ablate_sweep.tsv", sweep);
    put(p, "sweep\tx.conf\nkey\tseed\n");
    sweep_run(sweep, "$(touch${IFS}X)");
    snprintf(res, sizeof(res), "%s/results", g_tmp);
    ck_assert_int_eq(mkdir(res, 0755), 0);
    snprintf(dst, sizeof(dst), "%s/r_ok", res);
    char* a1[] = {PY, script, sweep, dst, NULL};
    int rc = run_in(g_tmp, a1);
    ck_assert_msg(rc == 2 && strstr(g_out, "the run folder name \"$(touch${IFS}X)\" is refused"),
                  "exit %d: %s", rc, g_out);
    ck_assert_msg(!exists(dst), "%s written", dst);
    assert_no_marker("run folder");

    // a results folder named h$(touch${IFS}X), a good run
    char swept[900];
    snprintf(swept, sizeof(swept), "%s/sw2", g_tmp);
    ck_assert_int_eq(mkdir(swept, 0755), 0);
    snprintf(p, sizeof(p), "%s/ablate_sweep.tsv", swept);
    put(p, "sweep\tx.conf\nkey\tseed\n");
    sweep_run(swept, "seed-1");
    snprintf(dst, sizeof(dst), "%s/h$(touch${IFS}X)", res);
    char* a2[] = {PY, script, swept, dst, NULL};
    rc = run_in(g_tmp, a2);
    ck_assert_msg(rc == 2 && strstr(g_out, "the results folder name \"h$(touch${IFS}X)\" is "
                                           "refused"),
                  "exit %d: %s", rc, g_out);
    ck_assert_msg(!exists(dst), "%s written", dst);
    assert_no_marker("results folder");

    // run folders named with a space, a quote, a newline, and '..', given as RUN
    const char* names[] = {"a b", "a'b", "a\nb", ".."};
    const char* shown[] = {"\"a b\"", "\"a'b\"", "\"a\\nb\"", "\"..\""};
    snprintf(dst, sizeof(dst), "%s/r_ok2", res);
    for (int k = 0; k < 4; k++) {
        if (k < 3) sweep_run(swept, names[k]);
        char* a3[] = {PY, script, swept, dst, (char*)names[k], NULL};
        rc = run_in(g_tmp, a3);
        char want[200];
        snprintf(want, sizeof(want), "the run folder name %s is refused", shown[k]);
        ck_assert_msg(rc == 2 && strstr(g_out, want), "%s: exit %d: %s", shown[k], rc, g_out);
        ck_assert_msg(!exists(dst), "%s written", dst);
    }
}
END_TEST

// A committed results folder results/NAME holding one run folder `run` with a provenance.json,
// config.conf `conf` and a metrics.jsonl.gz, the sweep table `tsv`; its path into dir.
static void results_dir(char* dir, size_t cap, const char* name, const char* run, const char* tsv,
                        const char* conf) {
    char d[1400], p[1600];
    snprintf(dir, cap, "%s/results/%s", g_tmp, name);
    snprintf(p, sizeof(p), "%s/results", g_tmp);
    mkdir(p, 0755);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    snprintf(p, sizeof(p), "%s/ablate_sweep.tsv", dir);
    put(p, tsv);
    snprintf(d, sizeof(d), "%s/%s", dir, run);
    ck_assert_int_eq(mkdir(d, 0755), 0);
    snprintf(p, sizeof(p), "%s/config.conf", d);
    put(p, conf);
    snprintf(p, sizeof(p), "%s/provenance.json", d);
    put(p, "{\"final_step\": 10, \"commit\": \"abc\"}\n");
    snprintf(p, sizeof(p), "%s/metrics.jsonl.gz", d);
    gzFile g = gzopen(p, "wb");
    ck_assert_ptr_nonnull(g);
    ck_assert_int_gt(gzputs(g, "{\"step\":0,\"event\":\"run\",\"precision\":\"fp32\","
                               "\"precision_info\":\"fp32\",\"threads\":1}\n"),
                     0);
    ck_assert_int_eq(gzclose(g), Z_OK);
}

#define TSV_HEAD "sweep\tx.conf\nkey\tseed\nrun\tseed-1\tseed=1\n"

// --relabel: a run folder named $(touch${IFS}X) is refused (its provenance.json untouched);
// values that need quoting are written quoted, read back whole by shlex.split; rerun_check
// --check accepts an ordinary relabelled run and refuses the odd path
START_TEST(test_relabel_names_and_quoting) {
    snprintf(g_tmp, sizeof(g_tmp), "%s", test_tmpdir());
    char script[1200], check[1200], dir[1200], p[1600];
    snprintf(script, sizeof(script), "%s/scripts/results_export", test_repo_root());
    snprintf(check, sizeof(check), "%s/scripts/rerun_check", test_repo_root());
    results_dir(dir, sizeof(dir), "r_bad", "$(touch${IFS}X)", TSV_HEAD, "max_steps = 10\n");
    char* a1[] = {PY, script, "--relabel", dir, NULL};
    int rc = run_in(g_tmp, a1);
    ck_assert_msg(rc == 2 && strstr(g_out, "the run folder name \"$(touch${IFS}X)\" is refused"),
                  "exit %d: %s", rc, g_out);
    snprintf(p, sizeof(p), "%s/$(touch${IFS}X)/provenance.json", dir);
    size_t n;
    char* js = util_read_file(p, &n, NULL, 0);
    ck_assert_ptr_nonnull(js);
    ck_assert_msg(!strstr(js, "rerun"), "relabelled: %s", js);
    free(js);
    assert_no_marker("relabel");

    // a probe data folder with a space, validation shards with a quote and a space
    results_dir(dir, sizeof(dir), "r_q", "seed-1",
                TSV_HEAD "setting\tprobe\tbb\nsetting\tprobe_data\tdata cache/p\n"
                         "setting\tlong_context\t1,2\n",
                "max_steps = 10\nval_data = v'x y_*.bin\n");
    char* a2[] = {PY, script, "--relabel", dir, NULL};
    rc = run_in(g_tmp, a2);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, g_out);
    snprintf(p, sizeof(p), "%s/seed-1/provenance.json", dir);
    // each step read back by shlex.split: the values whole, in place
    char* a3[] = {PY, "-c",
                  "import json, shlex, sys\n"
                  "r = [shlex.split(c) for c in json.load(open(sys.argv[1]))['rerun']]\n"
                  "ev = [a for a in r if a[0] == './probe' and a[1] == 'eval'][0]\n"
                  "lc = [a for a in r if a[0] == './evaluate'][0]\n"
                  "ok = ev[ev.index('--data') + 1] == 'data cache/p' and "
                  "lc[lc.index('--data') + 1] == \"v'x y_*.bin\" and len(lc) == 7\n"
                  "print('whole' if ok else 'split: %s %s' % (ev, lc))\n",
                  p, NULL};
    rc = run_in(g_tmp, a3);
    ck_assert_msg(rc == 0 && strstr(g_out, "whole"), "exit %d: %s", rc, g_out);
    char run[1400];
    snprintf(run, sizeof(run), "%s/seed-1", dir);
    char* a4[] = {PY, check, "--check", run, NULL};
    rc = run_in(g_tmp, a4);
    ck_assert_msg(rc == 2 && strstr(g_out, "\"rerun\" step 3 (eval, ") &&
                      strstr(g_out, "' ' inside quotes"),
                  "exit %d: %s", rc, g_out);

    // an ordinary run: what results_export writes, rerun_check accepts
    results_dir(dir, sizeof(dir), "r_ok", "seed-1",
                TSV_HEAD "setting\tprobe\tbb\nsetting\tprobe_data\tdata_cache/probes/b\n"
                         "setting\tprobe_gen\t--seq-len 64 --seed 1\nsetting\tsinks\tbb\n"
                         "setting\tlong_context\t1,2\nsetting\tpasskey\t1\n",
                "max_steps = 10\nseq_len = 8\nval_data = data_cache/v_*.bin\n");
    char* a5[] = {PY, script, "--relabel", dir, NULL};
    ck_assert_int_eq(run_in(g_tmp, a5), 0);
    snprintf(run, sizeof(run), "%s/seed-1", dir);
    char* a6[] = {PY, check, "--check", run, NULL};
    rc = run_in(g_tmp, a6);
    ck_assert_msg(rc == 0 && strstr(g_out, "ok (1 data steps, 6 evaluations)"), "exit %d: %s", rc,
                  g_out);
}
END_TEST

// A run that diverged (a "diverged" record, exit 3, no final checkpoint) is exported as data:
// provenance.json records the divergence, its step as final_step and no evaluation of a
// checkpoint it never wrote; the sweep file's hashes (ablate_status.json) and the keys a resume
// changed (its resume_change records) are carried over; a run that neither finished nor
// diverged is still not exported.
START_TEST(test_export_diverged_and_provenance) {
    snprintf(g_tmp, sizeof(g_tmp), "%s", test_tmpdir());
    char script[1200], sweep[800], res[900], p[1600];
    snprintf(script, sizeof(script), "%s/scripts/results_export", test_repo_root());
    snprintf(sweep, sizeof(sweep), "%s/sw", g_tmp);
    ck_assert_int_eq(mkdir(sweep, 0755), 0);
    snprintf(p, sizeof(p), "%s/ablate_sweep.tsv", sweep);
    put(p, "sweep\tx.conf\nkey\tlr\nsetting\tlong_context\t1,2\n"
           "run\tlr-1\tlr=1\nrun\tlr-2\tlr=2\n");
    for (int k = 0; k < 2; k++) {
        char d[1000];
        snprintf(d, sizeof(d), "%s/lr-%d", sweep, k + 1);
        ck_assert_int_eq(mkdir(d, 0755), 0);
        snprintf(p, sizeof(p), "%s/config.conf", d);
        put(p, "max_steps = 4\nseq_len = 8\nval_data = v.bin\n");
        snprintf(p, sizeof(p), "%s/metrics.jsonl", d);
        put(p, k == 0 ? "{\"step\":0,\"event\":\"run\",\"precision\":\"fp32\"}\n"
                        "{\"step\":1,\"event\":\"resume_change\",\"key\":\"max_steps\","
                        "\"was\":\"2\",\"now\":\"4\"}\n"
                        "{\"step\":1,\"train_loss\":2.5}\n"
                        "{\"step\":2,\"train_loss\":null}\n"
                        "{\"step\":2,\"event\":\"diverged\",\"where\":\"loss\","
                        "\"last_finite_step\":1,\"last_finite_loss\":2.5}\n"
                      : "{\"step\":0,\"event\":\"run\",\"precision\":\"fp32\"}\n"
                        "{\"step\":1,\"train_loss\":2.5}\n");
        snprintf(p, sizeof(p), "%s/ablate_status.json", d);
        put(p, "{\"exit\": 3, \"commit\": \"abc\", \"sweep_file\": \"x.conf\", "
               "\"sweep_sha256\": \"f00d\", \"config_sha256\": {}, \"sweep_dirty\": false, "
               "\"allow_dirty\": false}\n");
    }
    snprintf(res, sizeof(res), "%s/results", g_tmp);
    ck_assert_int_eq(mkdir(res, 0755), 0);
    char dst[1000];
    snprintf(dst, sizeof(dst), "%s/r_lr", res);
    char* a1[] = {PY, script, sweep, dst, NULL};
    int rc = run_in(g_tmp, a1);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, g_out);
    snprintf(p, sizeof(p), "%s/lr-2/provenance.json", dst);
    ck_assert_msg(!exists(p), "a run that neither finished nor diverged was exported: %s", g_out);
    snprintf(p, sizeof(p), "%s/lr-1/provenance.json", dst);
    size_t n;
    char err[1700];
    char* prov = util_read_file(p, &n, err, sizeof(err));
    ck_assert_msg(prov != NULL, "%s; %s", err, g_out);
    const char* want[] = {"\"diverged\": {",       "\"last_finite_loss\": 2.5",
                          "\"final_step\": 2,",    "\"sweep_sha256\": \"f00d\"",
                          "\"resume_changes\": [", "\"now\": \"4\""};
    for (int i = 0; i < 6; i++)
        ck_assert_msg(strstr(prov, want[i]), "%s not in %s", want[i], prov);
    // the rerun: build and train only (the sweep's ./evaluate of a final checkpoint would fail)
    ck_assert_msg(strstr(prov, "\"make\"") && !strstr(prov, "evaluate"), "%s", prov);
    free(prov);
}
END_TEST

static Suite* results_export_suite(void) {
    Suite* s = suite_create("results_export");
    TCase* tc = tcase_create("names");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_export_refuses_folder_names);
    tcase_add_test(tc, test_relabel_names_and_quoting);
    tcase_add_test(tc, test_export_diverged_and_provenance);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(results_export_suite)
