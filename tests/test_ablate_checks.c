// tests/test_ablate_checks.c: what scripts/ablate refuses and records before it trains. The
// Slurm scripts (a fake sbatch on PATH): a sweep file named "evil<newline>touch X<newline>.conf"
// and a sweep directory "o sp%j" are refused with a message and nothing is submitted; for a
// name with '"', '#', a space and "$(touch Y)", every #SBATCH line of array.sbatch precedes its
// first command, Slurm's own reading of each value gives back the job name, log path and
// directory, and the exec line's words come back exactly (nothing runs). Sweep values are
// resolved as the trainer reads them: seed = 1, 01, 1.0 (and lr 3e-3 / 0.003, on / 1, attn.*
// 8 / 8.0 extras, an ablate.* key set twice, a non-integer seed, a line of 1001 values) exit 2
// naming the file, line and key. --dry-run of 200 runs writes nothing, takes seconds, says which
// data it generates first and estimates the time from the trainer's own FLOPs per step
// (gpt2_flops_per_token) at a given matmul peak. Provenance: in a temporary git repository a
// committed sweep trains and records the sha256 of its file and of the config it includes with
// commit_dirty false; an edited include, an edited or an untracked sweep file stop the runner;
// --allow-dirty trains and records sweep_dirty, allow_dirty and commit_dirty true. A Slurm task
// warned of its time limit while it still reads the sweep records the run failed (exit 124).
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "model/gpt2.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

static char* slurp(const char* path) {
    size_t len;
    char err[512];
    return util_read_file(path, &len, err, sizeof(err));
}

static void write_file(const char* path, const char* text) {
    FILE* f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
}

// bash -c CMD in DIR with its output into LOG; the exit code
static int sh_in(const char* dir, const char* cmd, const char* log) {
    char full[16384];
    snprintf(full, sizeof(full), "cd '%s' && { %s ; } >'%s' 2>&1", dir, cmd, log);
    int st = system(full);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// the tiny model every sweep here trains (1 layer, 2 heads, 32 wide) on DATA/recall_*.bin
static void base_conf(char* out, size_t cap, const char* data) {
    snprintf(out, cap,
             "n_layer = 1\nn_head = 2\nn_embd = 32\nblock_size = 32\nvocab_size = 257\n"
             "tokenizer = byte\ntrain_data = %s/recall_train_*.bin\n"
             "val_data = %s/recall_val_*.bin\nbatch_size = 4\nseq_len = 32\nmax_steps = 12\n"
             "warmup_steps = 1\neval_every = 0\nmetrics_every = 0\ncheckpoint_every = 0\n"
             "threads = 1\n",
             data, data);
}

// ---- Slurm ------------------------------------------------------------------------------

// One argument of an #SBATCH line read as Slurm's sbatch reads it (src/sbatch/opt.c
// _get_argument): whitespace separates, a backslash takes the next character, double quotes
// group, an unescaped '#' outside quotes ends the line. Returns the position after it.
static const char* slurm_arg(const char* p, char* out, size_t cap) {
    size_t n = 0;
    int quoted = 0, esc = 0;
    while (*p == ' ' || *p == '\t')
        p++;
    for (; *p && *p != '\n' && (quoted || (*p != ' ' && *p != '\t')); p++) {
        if (esc) {
            esc = 0;
        } else if (*p == '\\') {
            esc = 1;
            continue;
        } else if (*p == '"') {
            quoted = !quoted;
            continue;
        } else if (*p == '#' && !quoted) {
            break;
        }
        if (n + 1 < cap) out[n++] = *p;
    }
    out[n] = '\0';
    return p;
}

// array.sbatch: every #SBATCH line before the first command, no line that is a bare `touch`,
// and the values of --job-name, --output and --chdir as Slurm reads them
static void check_sbatch(const char* path, const char* job, const char* output, const char* dir) {
    char* text = slurp(path);
    ck_assert_msg(text != NULL, "%s missing", path);
    int line = 0, first_cmd = -1, seen = 0;
    char arg[2048];
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        line++;
        ck_assert_msg(strncmp(l, "touch ", 6) != 0, "%s:%d: a bare command '%s'", path, line, l);
        if (!strncmp(l, "#SBATCH", 7)) {
            ck_assert_msg(first_cmd < 0, "%s:%d: #SBATCH after the first command (line %d)", path,
                          line, first_cmd);
            slurm_arg(l + 7, arg, sizeof(arg));
            const char* want[3][2] = {
                {"--job-name=", job}, {"--output=", output}, {"--chdir=", dir}};
            for (int k = 0; k < 3; k++) {
                size_t n = strlen(want[k][0]);
                if (strncmp(arg, want[k][0], n)) continue;
                ck_assert_msg(!strcmp(arg + n, want[k][1]), "%s:%d: Slurm reads %s'%s', not '%s'",
                              path, line, want[k][0], arg + n, want[k][1]);
                seen |= 1 << k;
            }
        } else if (l[0] != '#' && l[strspn(l, " \t")] != '\0' && first_cmd < 0) {
            first_cmd = line;
        }
    }
    ck_assert_msg(seen == 7, "%s: --job-name, --output or --chdir missing (%d)", path, seen);
    ck_assert_msg(first_cmd > 0, "%s: no command", path);
    free(text);
}

// A scratch folder d for a Slurm test, its log path, and d/bin/sbatch: a fake that prints a job
// id and submits nothing (the tests put d/bin first on PATH).
static void slurm_scratch(char* d, size_t dcap, char* log, size_t logcap) {
    char p[800];
    util_strlcpy(d, test_tmpdir(), dcap);
    snprintf(log, logcap, "%s/log.txt", d);
    snprintf(p, sizeof(p), "%s/bin", d);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/bin/sbatch", d);
    write_file(p, "#!/bin/sh\necho 4242\n");
    ck_assert_int_eq(chmod(p, 0755), 0);
}

START_TEST(slurm_scripts_quote_every_value) {
    char d[600], p[4096], cmd[8192], log[700], sweep[8192];
    slurm_scratch(d, sizeof(d), log, sizeof(log));
    char base[4096];
    base_conf(base, sizeof(base), "/nonexistent");
    snprintf(sweep, sizeof(sweep), "%ssweep.seed = 1, 2\nout_dir = %s/o_evil\n", base, d);
    // the sweep name: a newline, a command, a newline
    char evil[700];
    snprintf(evil, sizeof(evil), "%s/evil\ntouch X\n.conf", d);
    write_file(evil, sweep);
    ck_assert_int_eq(setenv("EVIL", evil, 1), 0);
    const char* modes[] = {"--dry-run", ""};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof(cmd),
                 "PATH=%s/bin:$PATH %s/scripts/ablate \"$EVIL\" --slurm %s --allow-dirty --bin %s",
                 d, test_repo_root(), modes[i], test_build_dir());
        ck_assert_int_eq(sh_in(d, cmd, log), 2);
        char* text = slurp(log);
        ck_assert_msg(strstr(text, "control character") && !strstr(text, "\ntouch X\n"), "%s",
                      text);
        free(text);
        snprintf(p, sizeof(p), "%s/o_evil", d);
        ck_assert_msg(access(p, F_OK) != 0, "%s made for a refused sweep", p);
        snprintf(p, sizeof(p), "%s/X", d);
        ck_assert(access(p, F_OK) != 0);
    }

    // a name with '"', '#', a space and a command substitution: allowed, every value quoted
    const char* odd = "we\"ird #x$(touch Y)";
    snprintf(p, sizeof(p), "%s/%s.conf", d, odd);
    snprintf(sweep, sizeof(sweep), "%ssweep.seed = 1, 2\n", base);
    write_file(p, sweep);
    ck_assert_int_eq(setenv("SW", p, 1), 0);
    // --out with '%' (Slurm's %j in --output) is refused before anything is written
    snprintf(cmd, sizeof(cmd),
             "PATH=%s/bin:$PATH %s/scripts/ablate \"$SW\" --slurm --out \"%s/o sp%%j\" "
             "--allow-dirty --bin %s",
             d, test_repo_root(), d, test_build_dir());
    ck_assert_int_eq(sh_in(d, cmd, log), 2);
    char* text = slurp(log);
    ck_assert_msg(strstr(text, "'%'") && strstr(text, "--out"), "%s", text);
    free(text);
    snprintf(p, sizeof(p), "%s/o sp%%j", d);
    ck_assert_msg(access(p, F_OK) != 0, "%s made for a refused sweep", p);
    // a partition holding a newline and an #SBATCH line
    snprintf(cmd, sizeof(cmd),
             "PATH=%s/bin:$PATH %s/scripts/ablate \"$SW\" --slurm --dry-run --partition \"$(printf "
             "'cpu\\n#SBATCH --x')\" --allow-dirty --bin %s",
             d, test_repo_root(), test_build_dir());
    ck_assert_int_eq(sh_in(d, cmd, log), 2);
    text = slurp(log);
    ck_assert_msg(strstr(text, "--partition") && !strstr(text, "\n#SBATCH --x"), "%s", text);
    free(text);

    snprintf(cmd, sizeof(cmd),
             "PATH=%s/bin:$PATH %s/scripts/ablate \"$SW\" --slurm --out \"%s/o sp\" "
             "--partition cpu --allow-dirty --bin %s",
             d, test_repo_root(), d, test_build_dir());
    int rc = sh_in(d, cmd, log);
    text = slurp(log);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, text);
    free(text);
    char arr[1400], job[700], outp[1400];
    snprintf(arr, sizeof(arr), "%s/o sp/slurm/array.sbatch", d);
    snprintf(job, sizeof(job), "ablate-%s", odd);
    snprintf(outp, sizeof(outp), "%s/o sp/slurm/task_%%A_%%a.out", d);
    check_sbatch(arr, job, outp, d);
    // the command line comes back word for word when bash reads it (exec -> printf)
    snprintf(cmd, sizeof(cmd), "sed 's/^exec /printf \"[%%s]\\\\n\" /' \"%s\" | bash", arr);
    ck_assert_int_eq(sh_in(d, cmd, log), 0);
    text = slurp(log);
    char want[8192];
    snprintf(want, sizeof(want),
             "[%s/scripts/ablate]\n[%s/%s.conf]\n[--slurm-task]\n[--out]\n[%s/o sp]\n[--bin]\n"
             "[%s]\n[--allow-dirty]\n",
             test_repo_root(), d, odd, d, test_build_dir());
    ck_assert_msg(text && !strcmp(text, want), "got:\n%s\nwant:\n%s", text ? text : "", want);
    free(text);
    snprintf(p, sizeof(p), "%s/Y", d);
    ck_assert_msg(access(p, F_OK) != 0, "$(touch Y) ran");
}
END_TEST

// ---- duplicate values ---------------------------------------------------------------------

// the line number of the first line of `text` that starts with `prefix`
static int line_of(const char* text, const char* prefix) {
    int n = 1;
    for (const char* l = text; l && *l; n++) {
        if (!strncmp(l, prefix, strlen(prefix))) return n;
        l = strchr(l, '\n');
        if (l) l++;
    }
    return -1;
}

START_TEST(sweep_values_resolved_as_the_trainer_reads_them) {
    char d[600], sw[700], log[700], cmd[4096], base[4096], conf[8192];
    util_strlcpy(d, test_tmpdir(), sizeof(d));
    snprintf(sw, sizeof(sw), "%s/dup.conf", d);
    snprintf(log, sizeof(log), "%s/log.txt", d);
    base_conf(base, sizeof(base), "/nonexistent");
    snprintf(cmd, sizeof(cmd), "%s/scripts/ablate dup.conf --dry-run --bin %s", test_repo_root(),
             test_build_dir());
    // {extra lines, the line the message names, what it says}
    const char* bad[][3] = {
        {"sweep.attention = softmax, relu\nsweep.seed = 1, 01, 1.0\n", "sweep.seed", "same"},
        {"sweep.lr = 3e-3, 0.003\n", "sweep.lr", "same"},
        {"sweep.qk_norm = on, 1\n", "sweep.qk_norm", "same"},
        {"sweep.attention = quantized + attn.levels=8, quantized + attn.levels=8.0\n",
         "sweep.attention", "same"},
        {"sweep.seed = 1, 1.5\n", "sweep.seed", "not an integer"},
        {"sweep.seed = 1\nablate.step_ms = 5\nablate.step_ms = 6\n", "ablate.step_ms = 6",
         "set twice"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(conf, sizeof(conf), "%s%s", base, bad[i][0]);
        write_file(sw, conf);
        ck_assert_int_eq(sh_in(d, cmd, log), 2);
        char* text = slurp(log);
        char want[200];
        snprintf(want, sizeof(want), "dup.conf:%d: %.*s", line_of(conf, bad[i][1]),
                 (int)strcspn(bad[i][1], " "), bad[i][1]);
        ck_assert_msg(strstr(text, want) && strstr(text, bad[i][2]), "want '%s' and '%s': %s", want,
                      bad[i][2], text);
        free(text);
    }
    // distinct values pass: 1 and 10, 3e-3 and 3e-4
    snprintf(conf, sizeof(conf), "%ssweep.lr = 3e-3, 3e-4\nsweep.seed = 1, 10, 2\n", base);
    write_file(sw, conf);
    ck_assert_int_eq(sh_in(d, cmd, log), 0);
    // more than 1000 values in a line
    char* many = malloc(8000);
    size_t n = (size_t)snprintf(many, 8000, "%ssweep.seed = 1", base);
    for (int s = 2; s <= 1001; s++)
        n += (size_t)snprintf(many + n, 8000 - n, ", %d", s);
    snprintf(many + n, 8000 - n, "\n");
    write_file(sw, many);
    free(many);
    ck_assert_int_eq(sh_in(d, cmd, log), 2);
    char* text = slurp(log);
    ck_assert_msg(strstr(text, "sweep.seed has 1001 values, more than 1000"), "%s", text);
    free(text);
}
END_TEST

// ---- the dry run --------------------------------------------------------------------------

static int count_entries(const char* dir) {
    DIR* dd = opendir(dir);
    ck_assert_ptr_nonnull(dd);
    int n = 0;
    for (struct dirent* e; (e = readdir(dd));)
        n += e->d_name[0] != '.';
    closedir(dd);
    return n;
}

static void fmt_dur(char* out, size_t cap, long s) {
    if (s >= 3600)
        snprintf(out, cap, "%ldh%02ldm", s / 3600, s % 3600 / 60);
    else if (s >= 60)
        snprintf(out, cap, "%ldm%02lds", s / 60, s % 60);
    else
        snprintf(out, cap, "%lds", s);
}

START_TEST(dry_run_writes_nothing_and_estimates) {
    char d[600], logd[600], log[700], cmd[4096], base[4096], conf[8192], data[700];
    util_strlcpy(d, test_tmpdir(), sizeof(d));
    util_strlcpy(logd, test_tmpdir(), sizeof(logd));
    snprintf(log, sizeof(log), "%s/log.txt", logd);
    snprintf(data, sizeof(data), "%s/probes", d);
    base_conf(base, sizeof(base), data);
    char seeds[1200] = "1";
    for (int s = 2; s <= 100; s++) {
        char x[16];
        snprintf(x, sizeof(x), ", %d", s);
        strcat(seeds, x);
    }
    snprintf(
        conf, sizeof(conf),
        "%ssweep.attention = softmax, sigmoid\nsweep.seed = %s\nablate.probe = recall\n"
        "ablate.probe_data = %s\nablate.probe_gen = --seq-len 32 --pairs 3\nout_dir = %s/out\n",
        base, seeds, data, d);
    char sw[700];
    snprintf(sw, sizeof(sw), "%s/big.conf", d);
    write_file(sw, conf);
    snprintf(cmd, sizeof(cmd),
             "ATTNLAB_PEAK_GFLOPS=10 %s/scripts/ablate big.conf --dry-run --bin %s",
             test_repo_root(), test_build_dir());
    double t0 = now_s();
    int rc = sh_in(d, cmd, log);
    double dt = now_s() - t0;
    char* text = slurp(log);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, text);
    ck_assert_msg(dt < 6.0, "200 runs took %.1f s to list", dt);
    ck_assert_int_eq(count_entries(d), 1); // big.conf only: no out/, no run.conf, no record
    // every run listed, the probe data it generates first named
    int runs = 0;
    for (const char* q = text; (q = strstr(q, "\n  attention-")); q++)
        runs++;
    ck_assert_int_eq(runs, 200);
    char want[1400];
    snprintf(want, sizeof(want), "first: %s/probe gen recall --out %s --seq-len 32 --pairs 3",
             test_build_dir(), data);
    ck_assert_msg(strstr(text, want), "no '%s' in: %s", want, text);

    // the step-time model: the trainer's FLOPs per token of this model (softmax has no variant
    // tensors) x B x T over 10 GFLOP/s x MFU 0.5; 200 runs of 12 steps
    Config c;
    test_tiny_config(&c, 257, 1, 2, 32, 32);
    GPT2 m;
    test_build_model(&m, &c, 4, 32, 1);
    double ms = gpt2_flops_per_token(&m, 32) * 4 * 32 / (10e9 * 0.5) * 1e3;
    gpt2_free(&m);
    char dur[32];
    fmt_dur(dur, sizeof(dur), (long)(200 * 12 * ms / 1000));
    snprintf(want, sizeof(want),
             "200 runs, 200 to train, estimated %s of training (200 from the "
             "step-time model",
             dur);
    ck_assert_msg(strstr(text, want), "no '%s' in: %s", want, text);
    snprintf(want, sizeof(want), "x MFU 0.5 = %.0f ms/step", ms);
    ck_assert_msg(strstr(text, want), "no '%s' in: %s", want, text);
    free(text);
}
END_TEST

// ---- provenance ---------------------------------------------------------------------------

static void sha256_of(const char* path, char out[65]) {
    char cmd[1200];
    snprintf(cmd, sizeof(cmd),
             "/usr/bin/python3 -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"
             "\"rb\").read()).hexdigest())' '%s'",
             path);
    FILE* f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    char line[256] = "";
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
    while (fgetc(f) != EOF) {}
    ck_assert_int_eq(pclose(f), 0);
    ck_assert_int_eq(sscanf(line, "%64s", out), 1);
}

static void assert_status(const char* path, const char* const* want, int n) {
    char* text = slurp(path);
    ck_assert_msg(text != NULL, "%s missing", path);
    for (int i = 0; i < n; i++)
        ck_assert_msg(strstr(text, want[i]), "%s: no '%s' in %s", path, want[i], text);
    free(text);
}

START_TEST(uncommitted_sweep_refused_and_recorded) {
    char d[600], r[700], log[700], cmd[8192], p[1400], base[4096], data[700];
    util_strlcpy(d, test_tmpdir(), sizeof(d));
    snprintf(r, sizeof(r), "%s/repo", d);
    snprintf(log, sizeof(log), "%s/log.txt", d);
    snprintf(data, sizeof(data), "%s/probes", d);
    // a repository holding the scripts and two configs, committed
    snprintf(cmd, sizeof(cmd),
             "mkdir -p '%s/configs' && cp -r '%s/scripts' '%s/' && git -C '%s' init -q", r,
             test_repo_root(), r, r);
    ck_assert_int_eq(sh_in(d, cmd, log), 0);
    base_conf(base, sizeof(base), data);
    snprintf(p, sizeof(p), "%s/configs/base.conf", r);
    write_file(p, base);
    char sw[8192];
    const char* sw_fmt =
        "include = base.conf\nmax_steps = 4\nsweep.seed = %s\nablate.probe = recall\n"
        "ablate.probe_data = %s\nablate.probe_gen = --seq-len 32 --pairs 3 "
        "--n-train 100 --n-val 16 --seed 1\nout_dir = %s/o\n";
    snprintf(sw, sizeof(sw), sw_fmt, "1", data, d);
    snprintf(p, sizeof(p), "%s/configs/sw.conf", r);
    write_file(p, sw);
    const char* git_commit = "git add -A && git -c user.name=t -c user.email=t@t commit -qm c";
    ck_assert_int_eq(sh_in(r, git_commit, log), 0);

    snprintf(cmd, sizeof(cmd), "scripts/ablate configs/sw.conf --bin %s", test_build_dir());
    int rc = sh_in(r, cmd, log);
    char* text = slurp(log);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, text);
    free(text);
    char sha_sw[65], sha_base[65], want_sw[120], want_base[160];
    sha256_of(p, sha_sw);
    snprintf(p, sizeof(p), "%s/configs/base.conf", r);
    sha256_of(p, sha_base);
    snprintf(want_sw, sizeof(want_sw), "\"sweep_sha256\": \"%s\"", sha_sw);
    snprintf(want_base, sizeof(want_base), "\"config_sha256\": {\"configs/base.conf\": \"%s\"}",
             sha_base);
    const char* clean[] = {"\"sweep_file\": \"configs/sw.conf\"",
                           want_sw,
                           want_base,
                           "\"sweep_dirty\": false",
                           "\"allow_dirty\": false",
                           "\"commit_dirty\": false"};
    snprintf(p, sizeof(p), "%s/o/seed-1/ablate_status.json", d);
    assert_status(p, clean, 6);

    // an edited include (a comment: the same resolved config), then an edited sweep file
    snprintf(p, sizeof(p), "%s/configs/base.conf", r);
    char edited[4200];
    snprintf(edited, sizeof(edited), "%s# edited\n", base);
    write_file(p, edited);
    ck_assert_int_eq(sh_in(r, cmd, log), 2);
    text = slurp(log);
    ck_assert_msg(strstr(text, "configs/base.conf: modified") && strstr(text, "--allow-dirty"),
                  "%s", text);
    free(text);
    snprintf(p, sizeof(p), "%s/configs/sw.conf", r);
    snprintf(sw, sizeof(sw), sw_fmt, "1, 2", data, d);
    write_file(p, sw);
    ck_assert_int_eq(sh_in(r, cmd, log), 2);
    text = slurp(log);
    ck_assert_msg(strstr(text, "configs/sw.conf: modified"), "%s", text);
    free(text);
    snprintf(p, sizeof(p), "%s/o/seed-2", d);
    ck_assert_msg(access(p, F_OK) != 0, "%s made for a refused sweep", p);

    // --allow-dirty trains the new run and records it
    snprintf(cmd, sizeof(cmd), "scripts/ablate configs/sw.conf --allow-dirty --bin %s",
             test_build_dir());
    rc = sh_in(r, cmd, log);
    text = slurp(log);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, text);
    free(text);
    snprintf(p, sizeof(p), "%s/configs/sw.conf", r);
    sha256_of(p, sha_sw);
    snprintf(p, sizeof(p), "%s/configs/base.conf", r);
    sha256_of(p, sha_base);
    snprintf(want_sw, sizeof(want_sw), "\"sweep_sha256\": \"%s\"", sha_sw);
    snprintf(want_base, sizeof(want_base), "\"config_sha256\": {\"configs/base.conf\": \"%s\"}",
             sha_base);
    const char* dirty[] = {want_sw, want_base, "\"sweep_dirty\": true", "\"allow_dirty\": true",
                           "\"commit_dirty\": true"};
    snprintf(p, sizeof(p), "%s/o/seed-2/ablate_status.json", d);
    assert_status(p, dirty, 5);

    // committed again: an untracked copy of the sweep file is refused
    ck_assert_int_eq(sh_in(r, git_commit, log), 0);
    snprintf(cmd, sizeof(cmd),
             "cp configs/sw.conf configs/copy.conf && scripts/ablate configs/copy.conf --bin %s",
             test_build_dir());
    ck_assert_int_eq(sh_in(r, cmd, log), 2);
    text = slurp(log);
    ck_assert_msg(strstr(text, "configs/copy.conf: untracked"), "%s", text);
    free(text);
}
END_TEST

// A Slurm task warned of its time limit (SIGUSR1) while it still reads the sweep, before
// scripts/ablate_slurm.sh sets its handler, is not ended by the signal: it starts no trainer,
// records the run failed (exit 124, which --retry-failed submits again) and says why in the
// task's output and the run's train.log. The warning comes from a fake git on PATH, which
// scripts/ablate runs while it reads the sweep, to the task's own pid.
START_TEST(slurm_warning_before_training_is_recorded) {
    char d[600], p[1400], cmd[8192], log[700], sweep[8192], base[4096], git[600];
    slurm_scratch(d, sizeof(d), log, sizeof(log));
    FILE* w = popen("command -v git", "r"); // the real git, for the fake one to call
    ck_assert(w != NULL && fgets(git, sizeof(git), w) != NULL);
    pclose(w);
    git[strcspn(git, "\n")] = '\0';
    char fake[2400];
    snprintf(fake, sizeof(fake),
             "#!/bin/sh\n[ -f '%s/task.pid' ] && kill -USR1 \"$(cat '%s/task.pid')\"\nexec '%s' "
             "\"$@\"\n",
             d, d, git);
    snprintf(p, sizeof(p), "%s/bin/git", d);
    write_file(p, fake);
    ck_assert_int_eq(chmod(p, 0755), 0);
    base_conf(base, sizeof(base), "/nonexistent");
    snprintf(sweep, sizeof(sweep), "%ssweep.seed = 1\nout_dir = %s/o\n", base, d);
    snprintf(p, sizeof(p), "%s/sw.conf", d);
    write_file(p, sweep);
    snprintf(cmd, sizeof(cmd),
             "PATH=%s/bin:$PATH %s/scripts/ablate sw.conf --slurm --allow-dirty --bin %s", d,
             test_repo_root(), test_build_dir());
    int rc = sh_in(d, cmd, log);
    char* text = slurp(log);
    ck_assert_msg(rc == 0 && strstr(text, "submitted 1 runs"), "exit %d: %s", rc, text);
    free(text);
    // the task, its pid written before it starts, so the fake git can warn it
    snprintf(
        cmd, sizeof(cmd),
        "PATH=%s/bin:$PATH SLURM_ARRAY_TASK_ID=0 SLURM_JOB_ID=4242 bash -c 'echo $$ >task.pid; "
        "exec %s/scripts/ablate sw.conf --slurm-task --out %s/o --bin %s --allow-dirty'",
        d, test_repo_root(), d, test_build_dir());
    rc = sh_in(d, cmd, log);
    text = slurp(log);
    ck_assert_msg(rc == 1 && strstr(text, "came before the trainer started") &&
                      strstr(text, "recorded failed (exit 124)"),
                  "exit %d: %s", rc, text);
    free(text);
    snprintf(p, sizeof(p), "%s/o/seed-1/ablate_status.json", d);
    text = slurp(p);
    ck_assert_msg(text && strstr(text, "\"exit\": 124"), "%s", text ? text : "(no status)");
    free(text);
    snprintf(p, sizeof(p), "%s/o/seed-1/train.log", d);
    text = slurp(p);
    ck_assert_msg(text && strstr(text, "came before the trainer started") && !strstr(text, "step "),
                  "%s", text ? text : "(no train.log)");
    free(text);
    snprintf(p, sizeof(p), "%s/o/seed-1/metrics.jsonl", d); // no trainer ran
    ck_assert_int_ne(access(p, F_OK), 0);
}
END_TEST

// One runner per sweep directory: while another process holds OUT/ablate.lock (as a runner and
// its trainers do), a second scripts/ablate into OUT exits 2 naming the holder and writes
// nothing; --dry-run, which writes nothing, still runs; a lock file left by a runner that has
// ended does not stop the next one, which writes its own pid into it.
START_TEST(second_runner_into_a_sweep_directory_refused) {
    char d[600], p[1400], cmd[8192], log[700], sweep[8192], base[4096], data[700];
    util_strlcpy(d, test_tmpdir(), sizeof(d));
    snprintf(log, sizeof(log), "%s/log.txt", d);
    snprintf(data, sizeof(data), "%s/probes", d);
    base_conf(base, sizeof(base), data);
    snprintf(sweep, sizeof(sweep),
             "%smax_steps = 4\nsweep.seed = 1\nablate.probe = recall\nablate.probe_data = %s\n"
             "ablate.probe_gen = --seq-len 32 --pairs 3 --n-train 100 --n-val 16 --seed 1\n"
             "out_dir = %s/o\n",
             base, data, d);
    snprintf(p, sizeof(p), "%s/sw.conf", d);
    write_file(p, sweep);
    char ablate[2000];
    snprintf(ablate, sizeof(ablate), "%s/scripts/ablate sw.conf --allow-dirty --bin %s",
             test_repo_root(), test_build_dir());
    // the shell holds the lock on fd 9, as a running runner does, and names itself in the file
    snprintf(cmd, sizeof(cmd),
             "mkdir -p o && exec 9>>o/ablate.lock && flock -n 9 && "
             "echo 'pid 4321 on elsewhere' >o/ablate.lock && %s",
             ablate);
    int rc = sh_in(d, cmd, log);
    char* text = slurp(log);
    ck_assert_msg(rc == 2 && strstr(text, "another scripts/ablate is running") &&
                      strstr(text, "pid 4321 on elsewhere"),
                  "exit %d: %s", rc, text);
    free(text);
    snprintf(p, sizeof(p), "%s/o/ablate_sweep.tsv", d);
    ck_assert_msg(access(p, F_OK) != 0, "%s written by a refused runner", p);
    snprintf(p, sizeof(p), "%s/o/seed-1", d);
    ck_assert_msg(access(p, F_OK) != 0, "%s made by a refused runner", p);
    snprintf(cmd, sizeof(cmd), "mkdir -p o && exec 9>>o/ablate.lock && flock -n 9 && %s --dry-run",
             ablate);
    rc = sh_in(d, cmd, log);
    text = slurp(log);
    ck_assert_msg(rc == 0, "--dry-run beside a runner: exit %d: %s", rc, text);
    free(text);
    // the holder has ended: the file is still there, and the next runner trains
    rc = sh_in(d, ablate, log);
    text = slurp(log);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, text);
    free(text);
    snprintf(p, sizeof(p), "%s/o/seed-1/model_00000004.bin", d);
    ck_assert_msg(access(p, F_OK) == 0, "%s not trained", p);
    snprintf(p, sizeof(p), "%s/o/ablate.lock", d);
    text = slurp(p);
    ck_assert_msg(text && strncmp(text, "pid ", 4) == 0 && !strstr(text, "4321"), "%s",
                  text ? text : "(no lock file)");
    free(text);
}
END_TEST

static Suite* ablate_checks_suite(void) {
    Suite* s = suite_create("ablate_checks");
    TCase* tc = tcase_create("checks");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, slurm_scripts_quote_every_value);
    tcase_add_test(tc, sweep_values_resolved_as_the_trainer_reads_them);
    tcase_add_test(tc, dry_run_writes_nothing_and_estimates);
    tcase_add_test(tc, uncommitted_sweep_refused_and_recorded);
    tcase_add_test(tc, slurm_warning_before_training_is_recorded);
    tcase_add_test(tc, second_runner_into_a_sweep_directory_refused);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(ablate_checks_suite)
