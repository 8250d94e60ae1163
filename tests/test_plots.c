// tests/test_plots.c: the analysis scripts on metrics.jsonl. scripts/export_metrics on the
// fixture tests/fixtures/metrics_small.jsonl: every CSV (one per record kind, and the wide table)
// equals the table worked out by hand from the fixture, null values are empty cells, and a
// malformed line or a NaN literal is refused naming file:line with nothing written.
// scripts/plot_run over several runs: runs that differ only in seed form one configuration whose
// line is their mean and whose band is their min-max (checked on the script's own functions
// against hand-computed values), the figures are PNGs, and a bad line names file:line.
// scripts/syspython.py: a script started by a python3 without matplotlib (a venv) runs itself
// again under the interpreter that has it (plot_run, and unigram_entropy.py with numpy), and
// says which one to use when none has it.
// Needs /usr/bin/python3 with matplotlib (Debian's python3-matplotlib, `make deps`).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "data/shard.h"
#include "tests/file_util.h"
#include "tests/testutil.h"

static int run_cmd(const char* cmd) {
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char* read_file(const char* dir, const char* name) {
    char p[1400];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    size_t n;
    return test_read_text(p, &n);
}

static void expect_file(const char* dir, const char* name, const char* want) {
    char* got = read_file(dir, name);
    ck_assert_msg(strcmp(got, want) == 0, "%s/%s:\n%s\nwanted:\n%s", dir, name, got, want);
    free(got);
}

static int png_ok(const char* dir, const char* name) {
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    char p[1400];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    unsigned char b[8];
    FILE* f = fopen(p, "rb");
    if (!f) return 0;
    size_t n = fread(b, 1, 8, f);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fclose(f);
    return n == 8 && memcmp(b, sig, 8) == 0 && sz > 1000;
}

// ---------------------------------------------------------------------------------------------
// export_metrics

START_TEST(test_export_metrics_fixture) {
    const char* dir = test_tmpdir();
    char cmd[4096], out[1100];
    snprintf(out, sizeof(out), "%s/csv", dir);
    snprintf(cmd, sizeof(cmd),
             "%s %s/scripts/export_metrics %s/tests/fixtures/metrics_small.jsonl --out %s "
             ">/dev/null",
             TEST_PYTHON, test_repo_root(), test_repo_root(), out);
    ck_assert_int_eq(run_cmd(cmd), 0);
    ck_assert_int_eq(test_dir_entries(out), 6); // events, val, train, model, head, act
    expect_file(out, "events.csv", "step,event,precision,threads\n0,run,fp32,2\n");
    expect_file(out, "val.csv", "step,val_loss\n0,10.5\n2,9.5\n");
    // grad_norm null at step 1: an empty cell
    expect_file(out, "train.csv",
                "step,train_loss,lr,grad_norm,step_ms\n1,10.25,0.001,,12.5\n2,9.75,0.002,1.5,11\n");
    expect_file(out, "model.csv", "step,sink_rate,entropy_mean\n2,0.25,\n");
    expect_file(out, "head.csv", "step,layer,head,entropy,alpha0\n2,0,1,2.5,0.125\n");
    expect_file(out, "act.csv", "step,site,kurtosis\n2,ln_f,3.5\n");
    // the wide table: a row per step, columns in the order first seen, events left out
    snprintf(cmd, sizeof(cmd),
             "%s %s/scripts/export_metrics %s/tests/fixtures/metrics_small.jsonl --wide --out "
             "%s/wide.csv >/dev/null",
             TEST_PYTHON, test_repo_root(), test_repo_root(), dir);
    ck_assert_int_eq(run_cmd(cmd), 0);
    expect_file(dir, "wide.csv",
                "step,val_loss,train_loss,lr,grad_norm,step_ms,model.sink_rate,model.entropy_mean,"
                "head.L0.H1.entropy,head.L0.H1.alpha0,act.ln_f.kurtosis\n"
                "0,10.5,,,,,,,,,\n"
                "1,,10.25,0.001,,12.5,,,,,\n"
                "2,9.5,9.75,0.002,1.5,11,0.25,,2.5,0.125,3.5\n");
}
END_TEST

// A broken line and a NaN literal (attnlab writes null): exit 2 naming the file and line, and
// no CSV written.
START_TEST(test_export_metrics_refuses_bad_lines) {
    const char* dir = test_tmpdir();
    struct {
        const char *line3, *want;
    } cases[] = {
        {"{\"step\":1,\"train_loss\":10.25,", ":3: not valid JSON"},
        {"{\"step\":1,\"train_loss\":NaN}", ":3: not valid JSON (NaN is not JSON"},
        {"{\"step\":\"1\",\"train_loss\":1}", ":3: not a metrics record"},
        {"{\"step\":1,\"kind\":\"../x\"}", ":3: \"kind\" must be a word"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char path[1100], text[512], cmd[4096], out[1100], err[1100];
        snprintf(path, sizeof(path), "%s/m%zu.jsonl", dir, i);
        snprintf(text, sizeof(text),
                 "{\"step\":0,\"val_loss\":1}\n\n%s\n{\"step\":2,\"val_loss\":2}\n",
                 cases[i].line3);
        test_write_text(path, text, strlen(text));
        snprintf(out, sizeof(out), "%s/out%zu", dir, i);
        snprintf(err, sizeof(err), "%s/err%zu.txt", dir, i);
        snprintf(cmd, sizeof(cmd), "%s %s/scripts/export_metrics %s --out %s 2>%s >/dev/null",
                 TEST_PYTHON, test_repo_root(), path, out, err);
        ck_assert_int_eq(run_cmd(cmd), 2);
        size_t n;
        char* msg = test_read_text(err, &n);
        char want[1400];
        snprintf(want, sizeof(want), "export_metrics: %s%s", path, cases[i].want);
        ck_assert_msg(strncmp(msg, want, strlen(want)) == 0, "case %zu: %s", i, msg);
        free(msg);
        struct stat st;
        ck_assert_msg(stat(out, &st) != 0, "case %zu: %s was written", i, out);
    }
}
END_TEST

// ---------------------------------------------------------------------------------------------
// plot_run over several runs

// RUN/metrics.jsonl with train losses t1, t2 at steps 1, 2 and a model record at step 2, and
// RUN/config.conf with the attention and the seed.
static void write_run(const char* dir, const char* name, const char* attention, int seed, double t1,
                      double t2) {
    char p[1100], text[1024];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/%s/metrics.jsonl", dir, name);
    snprintf(text, sizeof(text),
             "{\"step\":0,\"val_loss\":11}\n{\"step\":1,\"train_loss\":%g,\"grad_norm\":2}\n"
             "{\"step\":2,\"train_loss\":%g,\"grad_norm\":1}\n"
             "{\"step\":2,\"kind\":\"model\",\"sink_rate\":0.5,\"entropy_mean\":2.5,"
             "\"kurtosis_max\":4}\n{\"step\":2,\"val_loss\":9}\n",
             t1, t2);
    test_write_text(p, text, strlen(text));
    snprintf(p, sizeof(p), "%s/%s/config.conf", dir, name);
    snprintf(text, sizeof(text),
             "# attnlab resolved config\nn_layer = 2\nattention = %s   # from command line\n"
             "seed = %d\nout_dir = %s/%s\n",
             attention, seed, dir, name);
    test_write_text(p, text, strlen(text));
}

START_TEST(test_plot_run_several_runs) {
    if (!test_have_python("matplotlib")) {
        fprintf(stderr, "test_plot_run_several_runs: %s has no matplotlib: not run\n", TEST_PYTHON);
        return;
    }
    const char* dir = test_tmpdir();
    write_run(dir, "soft1", "softmax", 1, 10.0, 8.0);
    write_run(dir, "soft2", "softmax", 2, 12.0, 7.0);
    write_run(dir, "soft3", "softmax", 3, 11.0, 9.0);
    write_run(dir, "ssmax", "ssmax", 1, 10.5, 6.5);
    char cmd[4096], cmp[1100];
    snprintf(cmp, sizeof(cmp), "%s/cmp", dir);
    snprintf(cmd, sizeof(cmd),
             "%s %s/scripts/plot_run %s/soft1 %s/soft2 %s/soft3 %s/ssmax --out %s "
             ">%s/out.txt",
             TEST_PYTHON, test_repo_root(), dir, dir, dir, dir, cmp, dir);
    ck_assert_int_eq(run_cmd(cmd), 0);
    char* out = read_file(dir, "out.txt");
    ck_assert_msg(strstr(out, "plot_run: 4 runs in 2 configurations: attention=softmax (3 seeds); "
                              "attention=ssmax\n"),
                  "%s", out);
    free(out);
    const char* figs[] = {"loss.png", "grad_norm.png", "diagnostics.png"};
    for (int i = 0; i < 3; i++)
        ck_assert_msg(png_ok(cmp, figs[i]), "%s/%s is not a PNG", cmp, figs[i]);
    // the band's numbers: softmax's train loss mean (10+12+11)/3 = 11 at step 1 and
    // (8+7+9)/3 = 8 at step 2, band [10, 12] and [7, 9]; ssmax one line, no band
    char script[4096];
    snprintf(
        script, sizeof(script),
        "import sys\n"
        "from importlib.machinery import SourceFileLoader\n"
        "sys.path.insert(0, '%s/scripts')\n"
        "pr = SourceFileLoader('pr', '%s/scripts/plot_run').load_module()\n"
        "d = '%s'\n"
        "data = [(d + '/' + r, pr.load_records(d + '/' + r + '/metrics.jsonl'),\n"
        "         pr.load_config(d + '/' + r)) for r in ('soft1', 'soft2', 'soft3', 'ssmax')]\n"
        "g = pr.group_runs(data)\n"
        "assert [len(m) for _, m in g] == [3, 1], g\n"
        "class Ax:\n"
        "    def __init__(s): s.lines, s.bands = [], []\n"
        "    def plot(s, xs, ys, *a, **k): s.lines.append((list(xs), list(ys)))\n"
        "    def fill_between(s, xs, lo, hi, **k): s.bands.append((list(xs), list(lo), "
        "list(hi)))\n"
        "sel = lambda r: 'train_loss' in r\n"
        "ax = Ax(); pr.draw_group(ax, g[0][1], sel, 'train_loss', 'b', 'x')\n"
        "assert ax.lines == [([1, 2], [11.0, 8.0])], ax.lines\n"
        "assert ax.bands == [([1, 2], [10.0, 7.0], [12.0, 9.0])], ax.bands\n"
        "ax = Ax(); pr.draw_group(ax, g[1][1], sel, 'train_loss', 'b', 'x')\n"
        "assert ax.lines == [([1, 2], [10.5, 6.5])] and ax.bands == [], (ax.lines, ax.bands)\n",
        test_repo_root(), test_repo_root(), dir);
    ck_assert_int_eq(test_run_python(dir, script, ""), 0);
    // a bad line of one run: exit 2 naming its file and line
    char p[1100];
    snprintf(p, sizeof(p), "%s/ssmax/metrics.jsonl", dir);
    FILE* f = fopen(p, "a");
    ck_assert(f && fputs("{\"step\":3,\n", f) >= 0 && fclose(f) == 0);
    snprintf(cmd, sizeof(cmd), "%s %s/scripts/plot_run %s/soft1 %s/ssmax --out %s 2>%s/err.txt",
             TEST_PYTHON, test_repo_root(), dir, dir, cmp, dir);
    ck_assert_int_eq(run_cmd(cmd), 2);
    char* err = read_file(dir, "err.txt");
    char want[1200];
    snprintf(want, sizeof(want), "plot_run: %s:6: not valid JSON", p);
    ck_assert_msg(strstr(err, want), "%s", err);
    free(err);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// the interpreter: a python3 without matplotlib (a venv of the system one, without its
// dist-packages) runs plot_run, which runs itself again under /usr/bin/python3

START_TEST(test_scripts_reexec_under_system_python) {
    if (!test_have_python("matplotlib")) {
        fprintf(stderr, "test_scripts_reexec: %s has no matplotlib: not run\n", TEST_PYTHON);
        return;
    }
    const char* dir = test_tmpdir();
    char cmd[4096], venv[1100];
    snprintf(venv, sizeof(venv), "%s/venv", dir);
    snprintf(cmd, sizeof(cmd), "%s -m venv --without-pip %s >/dev/null 2>&1", TEST_PYTHON, venv);
    if (run_cmd(cmd) != 0) {
        fprintf(stderr, "test_scripts_reexec: %s -m venv failed (python3-venv): not run\n",
                TEST_PYTHON);
        return;
    }
    // the venv's python3 really lacks matplotlib (else the test proves nothing)
    snprintf(cmd, sizeof(cmd), "%s/bin/python3 -c 'import matplotlib' 2>/dev/null", venv);
    ck_assert_int_ne(run_cmd(cmd), 0);
    write_run(dir, "run", "softmax", 1, 10.0, 8.0);
    snprintf(cmd, sizeof(cmd),
             "env -u ATTNLAB_PYTHON %s/bin/python3 %s/scripts/plot_run %s/run >%s/out.txt 2>&1",
             venv, test_repo_root(), dir, dir);
    int rc = run_cmd(cmd);
    char* out = read_file(dir, "out.txt");
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    char plots[1100];
    snprintf(plots, sizeof(plots), "%s/run/plots", dir);
    ck_assert(png_ok(plots, "loss.png") && png_ok(plots, "diagnostics.png"));
    // the same for a numpy script: tokens 0, 1, 0, 1 have a unigram entropy of ln 2
    char shard[1100], serr[512];
    const uint16_t tok[4] = {0, 1, 0, 1};
    snprintf(shard, sizeof(shard), "%s/s.bin", dir);
    ck_assert_msg(shard_write(shard, tok, 4, serr, sizeof(serr)) == 0, "%s", serr);
    snprintf(cmd, sizeof(cmd), "%s/bin/python3 %s/scripts/unigram_entropy.py %s >%s/u.txt 2>&1",
             venv, test_repo_root(), shard, dir);
    rc = run_cmd(cmd);
    out = read_file(dir, "u.txt");
    char want[1400];
    snprintf(want, sizeof(want), "unigram entropy of %s: 0.6931 nats\n", shard);
    ck_assert_msg(rc == 0 && strcmp(out, want) == 0, "exit %d: %s", rc, out);
    free(out);
    // an interpreter without matplotlib named as the one to use: exit 2, saying what to run
    snprintf(cmd, sizeof(cmd),
             "ATTNLAB_PYTHON=%s/bin/python3 %s/bin/python3 %s/scripts/plot_run "
             "%s/run 2>%s/err.txt",
             venv, venv, test_repo_root(), dir, dir);
    ck_assert_int_eq(run_cmd(cmd), 2);
    char* err = read_file(dir, "err.txt");
    snprintf(want, sizeof(want), "plot_run: matplotlib is missing for %s/bin/python3", venv);
    ck_assert_msg(strncmp(err, want, strlen(want)) == 0 && strstr(err, "python3-matplotlib") &&
                      strstr(err, "scripts/plot_run"),
                  "%s", err);
    free(err);
}
END_TEST

static Suite* plots_suite(void) {
    Suite* s = suite_create("plots");
    TCase* t = tcase_create("scripts");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_export_metrics_fixture);
    tcase_add_test(t, test_export_metrics_refuses_bad_lines);
    tcase_add_test(t, test_plot_run_several_runs);
    tcase_add_test(t, test_scripts_reexec_under_system_python);
    suite_add_tcase(s, t);
    return s;
}

TEST_MAIN(plots_suite)
