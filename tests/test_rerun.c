// tests/test_rerun.c: scripts/rerun_check, the check that this machine reproduces a committed run
// (docs/ablations.md, "Reruns across machines"):
//   - a tiny run is trained here and laid out as a committed result (config.conf, metrics.jsonl.gz,
//     provenance.json with its "command"); rerun_check retrains it and reports "identical" (exit
//     0) for every step, and with --steps 4 compares steps 1-4 only (stopping the trainer there
//     when it is still running: this run is too short to see that);
//   - one train loss of the committed copy changed in its last digit: exit 1, naming that step;
//   - --full runs the whole rerun list and compares every committed output (test_rerun_full),
//     the streaming evaluation's CSV and report among them (stream_outputs);
//   - --compare of two metrics files; bad input (a missing provenance.json, a malformed metrics
//     line, a bad --steps) is exit 2 with the file or option named;
//   - a "command" with shell text, an unknown config key or a path outside the repository, and
//     (test_rerun_full) a tampered rerun list or a sweep or run name that is not a plain folder
//     name, are refused before anything of them runs (exit 2, the step named), their payloads'
//     marker files never created; every committed provenance.json passes --check.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "tests/testutil.h"

static char g_dir[1024];

static int sh(const char* cmd, char* out, size_t cap) {
    char full[8192];
    snprintf(full, sizeof(full), "cd %s && %s >%s/out.txt 2>&1", test_repo_root(), cmd, g_dir);
    int st = system(full);
    char p[1200];
    snprintf(p, sizeof(p), "%s/out.txt", g_dir);
    FILE* f = fopen(p, "r");
    size_t n = f ? fread(out, 1, cap - 1, f) : 0;
    out[n] = '\0';
    const int cut = f && n == cap - 1 && fgetc(f) != EOF; // more output than the buffer holds
    if (f) fclose(f);
    ck_assert_msg(!cut, "the output of '%s' is longer than %zu bytes", cmd, cap - 1);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// metrics.jsonl of RUN gzipped into DST, with the train_loss of step `bump` (0: none) changed in
// its last printed digit
static void gzip_metrics(const char* src, const char* dst, int bump) {
    FILE* f = fopen(src, "r");
    ck_assert_ptr_nonnull(f);
    gzFile g = gzopen(dst, "wb");
    ck_assert_ptr_nonnull(g);
    char line[8192], key[64];
    snprintf(key, sizeof(key), "{\"step\":%d,\"train_loss\":", bump);
    int bumped = 0;
    while (fgets(line, sizeof(line), f)) {
        if (bump && strncmp(line, key, strlen(key)) == 0) {
            char* d = line + strlen(key);
            while (*d && *d != ',')
                d++;
            d--; // the last digit of the value
            ck_assert(*d >= '0' && *d <= '9');
            *d = *d == '9' ? '8' : (char)(*d + 1);
            bumped = 1;
        }
        ck_assert_int_gt(gzputs(g, line), 0);
    }
    ck_assert_int_eq(gzclose(g), Z_OK);
    fclose(f);
    ck_assert_int_eq(bumped, !!bump);
}

// The data-generation command (without the tool's directory) of the tiny run below, into DIR
#define TINY_GEN                                                                                   \
    "probe gen recall --out %s --seq-len 32 --pairs 3 --n-train 200 --n-val 24 --seed 1"

// A tiny run trained here into g_dir/run (8 steps, checkpoints at 4 and 8) on recall data it
// generates into `data`
static void train_tiny(const char* bin, const char* data) {
    char cmd[4096], out[16384], p[1400];
    snprintf(cmd, sizeof(cmd), "%s/" TINY_GEN, bin, data);
    ck_assert_msg(sh(cmd, out, sizeof(out)) == 0, "%s", out);
    snprintf(p, sizeof(p), "%s/tiny.conf", g_dir);
    FILE* f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "n_layer = 1\nn_head = 2\nn_embd = 32\nblock_size = 32\nvocab_size = 257\n"
            "tokenizer = byte\ntrain_data = %s/recall_train_*.bin\n"
            "val_data = %s/recall_val_*.bin\nbatch_size = 4\nseq_len = 32\nmax_steps = 8\n"
            "warmup_steps = 2\nlr = 3e-3\neval_every = 4\neval_steps = 2\nmetrics_every = 4\n"
            "checkpoint_every = 4\nlog_every = 1\nthreads = 1\nprecision = fp32\n",
            data, data);
    ck_assert_int_eq(fclose(f), 0);
    snprintf(cmd, sizeof(cmd), "%s/train %s/tiny.conf out_dir=%s/run", bin, g_dir, g_dir);
    ck_assert_msg(sh(cmd, out, sizeof(out)) == 0, "%s", out);
}

START_TEST(test_rerun_reproduces_and_detects) {
    snprintf(g_dir, sizeof(g_dir), "%s", test_tmpdir());
    const char* bin = test_build_dir();
    char cmd[4096], out[16384], p[1400];
    FILE* f;
    snprintf(p, sizeof(p), "%s/data", g_dir);
    train_tiny(bin, p);

    // the committed layout: config.conf, metrics.jsonl.gz, provenance.json
    snprintf(cmd, sizeof(cmd), "mkdir -p %s/res/r1 && cp %s/run/config.conf %s/res/r1/", g_dir,
             g_dir, g_dir);
    ck_assert_msg(sh(cmd, out, sizeof(out)) == 0, "%s", out);
    char src[1200], dst[1200];
    snprintf(src, sizeof(src), "%s/run/metrics.jsonl", g_dir);
    snprintf(dst, sizeof(dst), "%s/res/r1/metrics.jsonl.gz", g_dir);
    gzip_metrics(src, dst, 0);
    snprintf(p, sizeof(p), "%s/res/r1/provenance.json", g_dir);
    f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "{\"command\": \"./train include=%s/res/r1/config.conf out_dir=x\", \"sweep\": "
            "\"t\", \"run\": \"r1\"}\n",
            g_dir);
    fclose(f);

    snprintf(cmd, sizeof(cmd), "scripts/rerun_check %s/res/r1 --bin %s --out %s/re1", g_dir, bin,
             g_dir);
    ck_assert_msg(sh(cmd, out, sizeof(out)) == 0, "%s", out);
    ck_assert_msg(strstr(out, "identical for steps 1-8 (8 train and 3 eval losses compared)") &&
                      strstr(out, "code paths: the same"),
                  "%s", out);

    snprintf(cmd, sizeof(cmd), "scripts/rerun_check %s/res/r1 --steps 4 --bin %s --out %s/re2",
             g_dir, bin, g_dir);
    ck_assert_msg(sh(cmd, out, sizeof(out)) == 0, "%s", out);
    ck_assert_msg(strstr(out, "identical for steps 1-4 (4 train"), "%s", out);

    // one committed loss changed in its last digit: found, at its step
    gzip_metrics(src, dst, 6);
    snprintf(cmd, sizeof(cmd), "scripts/rerun_check %s/res/r1 --bin %s --out %s/re3", g_dir, bin,
             g_dir);
    ck_assert_msg(sh(cmd, out, sizeof(out)) == 1, "%s", out);
    ck_assert_msg(strstr(out, "differs from step 6 (train loss"), "%s", out);
    snprintf(cmd, sizeof(cmd), "scripts/rerun_check --compare %s %s/run/metrics.jsonl --steps 5",
             dst, g_dir);
    ck_assert_msg(sh(cmd, out, sizeof(out)) == 0, "--steps 5 stops before step 6: %s", out);

    // bad input: named, exit 2
    snprintf(cmd, sizeof(cmd), "scripts/rerun_check %s/run", g_dir);
    ck_assert_msg(sh(cmd, out, sizeof(out)) == 2 && strstr(out, "provenance.json"), "%s", out);
    snprintf(p, sizeof(p), "%s/bad.jsonl", g_dir);
    f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "{\"step\":1,\"train_loss\":5.5}\nnot json\n{\"step\":2,\"train_loss\":5.4}\n");
    fclose(f);
    snprintf(cmd, sizeof(cmd), "scripts/rerun_check --compare %s %s/run/metrics.jsonl", p, g_dir);
    ck_assert_msg(sh(cmd, out, sizeof(out)) == 2 && strstr(out, "bad.jsonl:2"), "%s", out);
    snprintf(cmd, sizeof(cmd), "scripts/rerun_check --compare %s %s --steps nan", src, src);
    ck_assert_msg(sh(cmd, out, sizeof(out)) == 2 && strstr(out, "--steps"), "%s", out);

    // a "command" that is not a plain trainer call: refused before the trainer starts (no
    // "rerun:" line), the marker file its shell text would create never made
    struct {
        const char *args, *want;
    } bad[] = {
        {"out_dir=x; touch %s/MARK", "';' and '||' belong to data steps only"},
        {"out_dir=$(touch %s/MARK)", "'$' (a shell character"},
        {"out_dir=x nope_key=1 seed=%.0s1", "'nope_key' is not a config key"},
        {"out_dir=x include=/etc/%s", "is outside the repository"},
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        char args[1400];
        snprintf(args, sizeof(args), bad[k].args, g_dir);
        snprintf(p, sizeof(p), "%s/res/r1/provenance.json", g_dir);
        f = fopen(p, "w");
        ck_assert_ptr_nonnull(f);
        fprintf(f, "{\"command\": \"./train include=%s/res/r1/config.conf %s\"}\n", g_dir, args);
        ck_assert_int_eq(fclose(f), 0);
        snprintf(cmd, sizeof(cmd), "scripts/rerun_check %s/res/r1 --bin %s --out %s/re_bad%zu",
                 g_dir, bin, g_dir, k);
        int rc = sh(cmd, out, sizeof(out));
        snprintf(p, sizeof(p), "%s/MARK", g_dir);
        ck_assert_msg(access(p, F_OK) != 0, "case %zu: the payload ran: %s", k, out);
        ck_assert_msg(rc == 2 && strstr(out, "/res/r1/provenance.json: \"command\"") &&
                          strstr(out, bad[k].want) && !strstr(out, "rerun: "),
                      "case %zu: exit %d: %s", k, rc, out);
    }
}
END_TEST

// a file's whole text into buf (the test's own small files)
static void slurp(const char* path, char* buf, size_t cap) {
    FILE* f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s", path);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    ck_assert_int_eq(fclose(f), 0);
}

static void spit(const char* path, const char* text) {
    FILE* f = fopen(path, "w");
    ck_assert_msg(f != NULL, "%s", path);
    ck_assert_int_ge(fputs(text, f), 0);
    ck_assert_int_eq(fclose(f), 0);
}

// text with its first `from` replaced by `to` (a change the check must find)
static void edit_file(const char* path, const char* from, const char* to) {
    static char buf[1 << 20], out[1 << 20];
    slurp(path, buf, sizeof(buf));
    char* at = strstr(buf, from);
    ck_assert_msg(at != NULL, "%s: no '%s'", path, from);
    snprintf(out, sizeof(out), "%.*s%s%s", (int)(at - buf), buf, to, at + strlen(from));
    spit(path, out);
}

// The committed run g_dir/res/rf of test_rerun_full, its data in g_data (inside the rerun's
// output folder g_dir/rf), the sha256 of its two data files
static char g_data[1100], g_sha[2][80];

// provenance.json of res/rf with names `sweep` and `run` (JSON text, quotes included) and the
// rerun list: `build`, the data steps `data` (JSON strings, each ending in a comma), the
// training, and `eval` (NULL: the probe evaluation of the final checkpoint)
static void write_prov(const char* sweep, const char* run, const char* build, const char* data,
                       const char* eval) {
    char p[1400], text[16384], ev[2400];
    if (!eval) {
        snprintf(ev, sizeof(ev),
                 "./probe eval recall --checkpoint runs/rerun/t/rf/model_00000008.bin --data %s",
                 g_data);
        eval = ev;
    }
    snprintf(p, sizeof(p), "%s/res/rf/provenance.json", g_dir);
    snprintf(text, sizeof(text),
             "{\"command\": \"./train include=%s/res/rf/config.conf out_dir=runs/rerun/t/rf\", "
             "\"sweep\": %s, \"run\": %s, \"final_step\": 8, \"data_sha256\": "
             "{\"%s/recall_train_000000.bin\": \"%s\", \"%s/recall_val_000000.bin\": \"%s\"}, "
             "\"trained_on\": [{\"cpu\": \"Test CPU\"}], \"rerun\": [\"%s\", %s "
             "\"./train include=%s/res/rf/config.conf out_dir=runs/rerun/t/rf\", \"%s\"]}\n",
             g_dir, sweep, run, g_data, g_sha[0], g_data, g_sha[1], build, data, g_dir, eval);
    spit(p, text);
}

// A tampered provenance.json is refused before anything of it runs (exit 2, naming the file
// and the step or field; no "step:" line): shell text in the build step, $(...) and `...` in
// an evaluation, an unknown step, another make target, a path outside the repository, a sweep
// or run name that is not a plain folder name. Each payload would create a marker file: in
// g_dir (MARK) for the steps, at the repository root (the steps' working folder) for the
// names; neither may exist afterwards. The old rerun_check ran them through bash (the finished
// rerun of test_rerun_full is compared again without training, so it reached the evaluations).
#define NAME_MARK "rerun_check_marker"
static void refused_payloads(const char* bin) {
    char mark[1200], rootmark[1200], stub[1200], cmd[8000], out[16384], ev[2400], bld[1400];
    char extra[1400];
    snprintf(mark, sizeof(mark), "%s/MARK", g_dir);
    snprintf(rootmark, sizeof(rootmark), "%s/" NAME_MARK, test_repo_root());
    // a stand-in make, so that a build step the old code ran built nothing
    snprintf(stub, sizeof(stub), "%s/stub", g_dir);
    snprintf(cmd, sizeof(cmd),
             "mkdir -p %s && printf '#!/bin/sh\\nexit 0\\n' >%s/make && "
             "chmod +x %s/make",
             stub, stub, stub);
    ck_assert_int_eq(sh(cmd, out, sizeof(out)), 0);
    struct {
        const char *sweep, *run, *build, *extra, *eval, *want;
        int bin, out;
    } pay[] = {
        {"\"t\"", "\"rf\"", "make; touch %s", NULL, NULL, "\"rerun\" step 1 (build, \"make; touch ",
         0, 1},
        {"\"t\"", "\"rf\"", "make\\ntouch %s", NULL, NULL, "'\\n' (a shell character", 0, 1},
        {"\"t\"", "\"rf\"", "make clean", NULL, NULL, "make, make all or make portable", 0, 1},
        {"\"t\"", "\"rf\"", "make", NULL,
         "./probe eval recall --checkpoint runs/rerun/t/rf/model_00000008.bin --data $(touch %s)",
         "\"rerun\" step 4 (eval, ", 1, 1},
        {"\"t\"", "\"rf\"", "make", NULL,
         "./evaluate --checkpoint runs/rerun/t/rf/model_00000008.bin --passkey --trials `touch "
         "%s`",
         "'`' (a shell character", 1, 1},
        {"\"t\"", "\"rf\"", "make", "touch %s", NULL, "'touch' is not a data command", 1, 1},
        {"\"t\"", "\"rf\"", "make", NULL, "touch %s", "'touch' is not an evaluation", 1, 1},
        {"\"t\"", "\"rf\"", "make", NULL,
         "./probe eval recall --checkpoint /etc/%s --data data_cache", "is outside the repository",
         1, 1},
        {"\"h$(touch${IFS}" NAME_MARK ")\"", "\"rf\"", "make", NULL, NULL,
         "\"sweep\" \"h$(touch${IFS}" NAME_MARK ")\" is refused", 1, 0},
        {"\"t\"", "\"$(touch${IFS}" NAME_MARK ")\"", "make", NULL, NULL,
         "\"run\" \"$(touch${IFS}" NAME_MARK ")\" is refused", 1, 0},
        {"\"t\"", "\"../../..\"", "make", NULL, NULL, "\"run\" \"../../..\" is refused", 1, 0},
        {"\"t\"", "\"r f\"", "make", NULL, NULL, "\"run\" \"r f\" is refused", 1, 0},
        {"\"t\"", "\"r'f\"", "make", NULL, NULL, "\"run\" \"r'f\" is refused", 1, 0},
        {"\"t\"", "\"r\\nf\"", "make", NULL, NULL, "\"run\" \"r\\nf\" is refused", 1, 0},
    };
    for (size_t k = 0; k < sizeof(pay) / sizeof(pay[0]); k++) {
        char gen[1400];
        snprintf(gen, sizeof(gen), "\"./" TINY_GEN "\",", g_data);
        snprintf(bld, sizeof(bld), pay[k].build, mark);
        extra[0] = 0;
        if (pay[k].extra) {
            snprintf(extra, sizeof(extra), "\"");
            snprintf(extra + 1, sizeof(extra) - 1, pay[k].extra, mark);
            strcat(extra, "\",");
        }
        if (pay[k].eval) snprintf(ev, sizeof(ev), pay[k].eval, mark);
        char data[3000];
        snprintf(data, sizeof(data), "%s%s", gen, extra);
        write_prov(pay[k].sweep, pay[k].run, bld, data, pay[k].eval ? ev : NULL);
        char opt[2600] = "";
        if (pay[k].bin) snprintf(opt, sizeof(opt), " --bin %s", bin);
        if (pay[k].out)
            snprintf(opt + strlen(opt), sizeof(opt) - strlen(opt), " --out %s/rf", g_dir);
        snprintf(cmd, sizeof(cmd), "PATH=%s:$PATH scripts/rerun_check %s/res/rf --full%s", stub,
                 g_dir, opt);
        int rc = sh(cmd, out, sizeof(out));
        int marked = access(mark, F_OK) == 0 || access(rootmark, F_OK) == 0;
        unlink(mark);
        unlink(rootmark);
        ck_assert_msg(!marked, "case %zu: the payload ran: %s", k, out);
        ck_assert_msg(rc == 2 && strstr(out, "/res/rf/provenance.json: ") &&
                          strstr(out, pay[k].want) && !strstr(out, "step: "),
                      "case %zu: exit %d: %s", k, rc, out);
    }
}

// A rerun list whose evaluation step is ev, checked with scripts/rerun_check --full on
// g_dir/res/rf (the rerun in g_dir/rf, already trained): the command into cmd, for the checks
// after an edit of a committed file; fails unless this first check reproduces (exit 0).
static void rerun_eval(const char* bin, const char* ev, char* cmd, size_t cmdcap, char* out,
                       size_t outcap) {
    write_prov("\"t\"", "\"rf\"", "make", "", ev);
    snprintf(cmd, cmdcap, "scripts/rerun_check %s/res/rf --full --bin %s --out %s/rf", g_dir, bin,
             g_dir);
    ck_assert_msg(sh(cmd, out, outcap) == 0, "%s", out);
}

// The streaming evaluation of a rerun list (ablate.stream): ./evaluate --stream writes the
// policy's CSV (--csv, into the run's folder) and prints its report, which make the committed
// stream_window.csv and stream.txt. Both are compared with the rerun's own, the paths of the
// checkpoint and of the CSV (the committed run's folder against the rerun's) set aside; a change
// to either committed file is found and named. Called by test_rerun_full after its rerun in
// g_dir/rf has finished, so that nothing is trained again.
static void stream_outputs(const char* bin) {
    char cmd[8000], out[16384], ev[2400], p[1400], keep[1 << 14];
    snprintf(cmd, sizeof(cmd),
             "(%s/evaluate --checkpoint %s/run/model_00000008.bin --stream --data "
             "'%s/recall_val_*.bin' --length 256 --window 16 --threads 1 --csv "
             "%s/res/rf/stream_window.csv >%s/res/rf/stream.txt 2>&1)",
             bin, g_dir, g_data, g_dir, g_dir);
    const int rc = sh(cmd, out, sizeof(out));
    snprintf(p, sizeof(p), "%s/res/rf/stream.txt", g_dir);
    slurp(p, out, sizeof(out));
    ck_assert_msg(rc == 0 && strstr(out, "# stream: policy window") && strstr(out, "# wrote "),
                  "exit %d: %s", rc, out);
    snprintf(ev, sizeof(ev),
             "./evaluate --checkpoint runs/rerun/t/rf/model_00000008.bin --stream --data "
             "%s/recall_val_*.bin --length 256 --window 16 --threads 1 --csv "
             "runs/rerun/t/rf/stream_window.csv",
             g_data);
    rerun_eval(bin, ev, cmd, sizeof(cmd), out, sizeof(out));
    ck_assert_msg(strstr(out, "stream_window.csv: identical") &&
                      strstr(out, "stream.txt: identical") &&
                      strstr(out, "stream_window.csv, stream.txt identical"),
                  "%s", out);
    struct {
        const char *file, *from, *to, *want;
    } cases[] = {
        {"stream_window.csv", "window,16,", "window,17,", "stream_window.csv: the streaming"},
        {"stream.txt", " perplexity ", " perplexity 1", "stream.txt differs"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        snprintf(p, sizeof(p), "%s/res/rf/%s", g_dir, cases[k].file);
        slurp(p, keep, sizeof(keep));
        edit_file(p, cases[k].from, cases[k].to);
        ck_assert_msg(sh(cmd, out, sizeof(out)) == 1 && strstr(out, "not reproduced: ") &&
                          strstr(out, cases[k].want),
                      "%s: %s", cases[k].file, out);
        spit(p, keep);
    }
}

// The long-context evaluation of a rerun list (./evaluate --lengths): long_context.txt is
// compared with the rerun's column by column by name. A committed file made before ./evaluate
// printed bpb and bytes (those two columns cut out of it here) is identical, with the two named
// as not compared; a changed value, and a committed column the rerun's table lacks, are found
// and named. Called by test_rerun_full after its rerun in g_dir/rf has finished.
static void lengths_outputs(const char* bin) {
    char cmd[8000], out[16384], ev[2400], p[1400], keep[1 << 14];
    snprintf(p, sizeof(p), "%s/res/rf/long_context.txt", g_dir);
    snprintf(cmd, sizeof(cmd),
             "(%s/evaluate --checkpoint %s/run/model_00000008.bin --data '%s/recall_val_*.bin' "
             "--lengths 1 --batches 2 >%s.full 2>&1 && awk '/^#/ {print; next} "
             "{print $1, $2, $3, $4, $5, $6}' %s.full >%s)",
             bin, g_dir, g_data, p, p, p);
    ck_assert_msg(sh(cmd, out, sizeof(out)) == 0, "%s", out);
    slurp(p, out, sizeof(out));
    ck_assert_msg(strstr(out, "length factor val_loss") && !strstr(out, "bpb"), "%s", out);
    snprintf(ev, sizeof(ev),
             "./evaluate --checkpoint runs/rerun/t/rf/model_00000008.bin --data "
             "%s/recall_val_*.bin --lengths 1 --batches 2",
             g_data);
    rerun_eval(bin, ev, cmd, sizeof(cmd), out, sizeof(out));
    ck_assert_msg(strstr(out, "long_context.txt: identical (columns added since, not compared: "
                              "bpb, bytes)") &&
                      strstr(out, "reproduced: ") && strstr(out, "long_context.txt identical"),
                  "%s", out);
    struct {
        const char *from, *to;
    } cases[] = {{" 1x ", " 2x "}, {" val_loss ", " val_lossx "}};
    slurp(p, keep, sizeof(keep));
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        edit_file(p, cases[k].from, cases[k].to);
        ck_assert_msg(sh(cmd, out, sizeof(out)) == 1 && strstr(out, "long_context.txt: DIFFERS") &&
                          strstr(out, "not reproduced: long_context.txt differs"),
                      "case %zu: %s", k, out);
        spit(p, keep);
    }
}

// --full: the whole rerun list of a committed run (its data step, the training, its probe
// evaluation), each output compared with the committed copy; a change to the committed data
// hash, final metrics or probe result is found and named (exit 1), the finished rerun being
// compared again without training. The data step holds a [ -f PATH ] || guard (its command,
// which would write other data, skipped since PATH is a file) and a second command after ';'.
START_TEST(test_rerun_full) {
    snprintf(g_dir, sizeof(g_dir), "%s", test_tmpdir());
    const char* bin = test_build_dir();
    char cmd[16384], out[16384], p[1400], p2[1400];
    char genc[1400], gen2[1400], data[4000];
    snprintf(g_data, sizeof(g_data), "%s/rf/data", g_dir);
    snprintf(genc, sizeof(genc), TINY_GEN, g_data);
    snprintf(gen2, sizeof(gen2), TINY_GEN, g_data);
    memcpy(strstr(gen2, "--seed 1"), "--seed 2", 8);
    train_tiny(bin, g_data);
    // the committed layout: config.conf, metrics.jsonl.gz, final.jsonl (the model, head and act
    // records of step 8, the last metrics step), probe.json, provenance.json with the rerun list
    snprintf(cmd, sizeof(cmd),
             "(mkdir -p %s/res/rf && cp %s/run/config.conf %s/res/rf/ && "
             "grep -E '^\\{\"step\":8,\"kind\":\"(model|head|act)\"' %s/run/metrics.jsonl "
             ">%s/res/rf/final.jsonl && %s/probe eval recall --checkpoint "
             "%s/run/model_00000008.bin --data %s | grep '^{\"probe\"' >%s/res/rf/probe.json)",
             g_dir, g_dir, g_dir, g_dir, g_dir, bin, g_dir, g_data, g_dir);
    ck_assert_msg(sh(cmd, out, sizeof(out)) == 0, "%s", out);
    snprintf(p, sizeof(p), "%s/res/rf/final.jsonl", g_dir);
    slurp(p, out, sizeof(out));
    ck_assert_msg(strstr(out, "\"kind\":\"model\"") && strstr(out, "\"kind\":\"head\""), "%s", out);
    char src[1200], dst[1200];
    snprintf(src, sizeof(src), "%s/run/metrics.jsonl", g_dir);
    snprintf(dst, sizeof(dst), "%s/res/rf/metrics.jsonl.gz", g_dir);
    gzip_metrics(src, dst, 0);
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof(cmd), "sha256sum %s/recall_%s_000000.bin | cut -c1-64", g_data,
                 k ? "val" : "train");
        ck_assert_msg(sh(cmd, out, sizeof(out)) == 0, "%s", out);
        snprintf(g_sha[k], sizeof(g_sha[k]), "%.64s", out);
    }
    snprintf(data, sizeof(data), "\"[ -f %s/recall_val_000000.bin ] || ./%s; ./%s\",", g_data, gen2,
             genc);
    write_prov("\"t\"", "\"rf\"", "make", data, NULL);
    const char* const sha[2] = {g_sha[0], g_sha[1]};

    snprintf(cmd, sizeof(cmd),
             "scripts/rerun_check %s/res/rf --full --bin %s --out %s/rf "
             "--record %s/rec.csv",
             g_dir, bin, g_dir, g_dir);
    ck_assert_msg(sh(cmd, out, sizeof(out)) == 0, "%s", out);
    ck_assert_msg(strstr(out, "build: skipped") && strstr(out, "step: skipped (") &&
                      strstr(out, "data: 2 files, sha256 compared") &&
                      strstr(out, "identical for steps 1-8") &&
                      strstr(out, "probe.json: identical") &&
                      strstr(out, "reproduced: data (2 files), every train and eval loss, final "
                                  "metrics (") &&
                      strstr(out, "probe.json identical"),
                  "%s", out);
    // the probe step read the rerun's own checkpoint
    ck_assert_msg(strstr(out, "--checkpoint ") && strstr(out, "/rf/model_00000008.bin"), "%s", out);
    snprintf(p2, sizeof(p2), "%s/rec.csv", g_dir);
    slurp(p2, out, sizeof(out));
    ck_assert_msg(strncmp(out, "sweep,run,trained_cpu,", 22) == 0 &&
                      strstr(out, "\nt,rf,Test CPU,") && strstr(out, "reproduced: data"),
                  "%s", out);

    // each committed output changed: found and named, the finished rerun compared again
    struct {
        const char *file, *from, *to, *want;
    } cases[] = {
        {"probe.json", "\"accuracy\": ", "\"accuracy\": 1", "probe.json: accuracy"},
        {"final.jsonl", "\"kind\":\"model\",", "\"kind\":\"model\",\"x\":1,",
         "final.jsonl: the last"},
        {"provenance.json", sha[1], "00", "recall_val_000000.bin has sha256"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        snprintf(p, sizeof(p), "%s/res/rf/%s", g_dir, cases[k].file);
        char keep[1 << 14];
        slurp(p, keep, sizeof(keep));
        edit_file(p, cases[k].from, cases[k].to);
        snprintf(cmd, sizeof(cmd), "scripts/rerun_check %s/res/rf --full --bin %s --out %s/rf",
                 g_dir, bin, g_dir);
        ck_assert_msg(sh(cmd, out, sizeof(out)) == 1, "%s: %s", cases[k].file, out);
        ck_assert_msg(strstr(out, "compared again, not retrained") &&
                          strstr(out, "not reproduced: ") && strstr(out, cases[k].want),
                      "%s: %s", cases[k].file, out);
        spit(p, keep);
    }
    stream_outputs(bin);
    lengths_outputs(bin);
    snprintf(cmd, sizeof(cmd), "scripts/rerun_check %s/res/rf --full --steps 3", g_dir);
    ck_assert_msg(sh(cmd, out, sizeof(out)) == 2 && strstr(out, "--steps"), "%s", out);
    // --data-only: the data steps and the data's sha256, nothing trained
    snprintf(cmd, sizeof(cmd), "scripts/rerun_check %s/res/rf --data-only --bin %s --out %s/rf",
             g_dir, bin, g_dir);
    ck_assert_msg(sh(cmd, out, sizeof(out)) == 0 && strstr(out, "data reproduced") &&
                      !strstr(out, "rerun: "),
                  "%s", out);
    refused_payloads(bin);
}
END_TEST

// Every committed run's provenance.json passes the checks of its rerun list (--check: names,
// "command", every step; nothing run), one "ok" line each.
START_TEST(test_rerun_check_committed) {
    snprintf(g_dir, sizeof(g_dir), "%s", test_tmpdir());
    static char out[1 << 20];
    ck_assert_int_eq(sh("ls results/*/*/provenance.json | wc -l", out, sizeof(out)), 0);
    int want = atoi(out);
    ck_assert_int_ge(want, 100); // the committed sweeps, not an empty tree
    ck_assert_msg(sh("scripts/rerun_check --check $(dirname results/*/*/provenance.json)", out,
                     sizeof(out)) == 0,
                  "%s", out);
    int n = 0;
    for (const char* at = out; (at = strstr(at, "/provenance.json: ok (")); at++)
        n++;
    ck_assert_int_eq(n, want);
}
END_TEST

static Suite* rerun_suite(void) {
    Suite* s = suite_create("rerun");
    TCase* tc = tcase_create("rerun_check");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_rerun_reproduces_and_detects);
    tcase_add_test(tc, test_rerun_full);
    tcase_add_test(tc, test_rerun_check_committed);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(rerun_suite)
