// tests/test_run_safety.c: a run never loses data silently and never trains on something other
// than what was asked (docs/interop.md, "Crash safety"). Runs the real BUILD/train (and the other
// tools) on a tiny byte-level model:
//   - a write that fails (metrics.jsonl or main.log on /dev/full; a tmpfs that fills mid-run,
//     where the machine lets the test mount one) stops the run with exit 1 naming the file, and
//     resume = 1 after the disk has room ends with the metrics of an uninterrupted run;
//   - a resumed run's metrics.jsonl equals an uninterrupted run's line for line (timing fields
//     aside), also resumed at a validation step and after a stop by signal; a finished run given
//     resume = 1 changes nothing;
//   - start-up removes the temp files of dead processes, whatever their name;
//   - devices and oversized files are refused as config or tokenizer files, at once;
//   - NaN (and inf) is refused by every config key, every attn.* hyperparameter of every variant
//     and every numeric option that a tool's --help lists;
//   - resume = 1 refuses a changed batch_size, seq_len, seed, shuffle, ranks x grad_accum or
//     training data (path, size, mtime), naming the key and both values;
//   - SIGINT / SIGTERM / SIGHUP stop with a checkpoint and exit 4, SIGUSR1 checkpoints and goes on.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attention/attention.h"
#include "common/config.h"
#include "common/util.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

static char g_data[1100], g_val[1100];

// One temporary directory per test process (test_tmpdir makes a new one each call).
static const char* tmp(void) {
    static char dir[512];
    if (!dir[0]) util_strlcpy(dir, test_tmpdir(), sizeof(dir));
    return dir;
}

static void setup_data(void) {
    if (g_data[0]) return;
    char err[2048];
    size_t ntok = 20000;
    uint16_t* t = mallocCheck(sizeof(uint16_t) * ntok);
    Rng r;
    rng_seed(&r, 11);
    for (size_t i = 0; i < ntok; i++)
        t[i] = (uint16_t)(i % 89 == 0 ? 256 : 'a' + (i * 5 + rng_below(&r, 4)) % 26);
    snprintf(g_data, sizeof(g_data), "%s/data/train_000000.bin", tmp());
    snprintf(g_val, sizeof(g_val), "%s/data/val_000000.bin", tmp());
    char dir[1100];
    snprintf(dir, sizeof(dir), "%s/data", tmp());
    ck_assert(util_mkdirs(dir, err, sizeof(err)) == 0);
    ck_assert_msg(shard_write(g_data, t, ntok, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(shard_write(g_val, t, 3000, err, sizeof(err)) == 0, "%s", err);
    free(t);
}

// Start BUILD/NAME with the space-separated arguments `args` (stdout and stderr to `log`.out and
// `log`.err). Returns the pid.
static pid_t spawn(const char* name, const char* args, const char* log) {
    char bin[1500], buf[8192], so[1500], se[1500];
    snprintf(bin, sizeof(bin), "%s/%s", test_build_dir(), name);
    ck_assert_msg(access(bin, X_OK) == 0, "%s not built", bin);
    util_strlcpy(buf, args, sizeof(buf));
    char* argv[128];
    int argc = 0;
    argv[argc++] = bin;
    for (char* tok = strtok(buf, " "); tok && argc < 127; tok = strtok(NULL, " "))
        argv[argc++] = tok;
    argv[argc] = NULL;
    snprintf(so, sizeof(so), "%s.out", log);
    snprintf(se, sizeof(se), "%s.err", log);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        int fo = open(so, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(se, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fo, 1);
        dup2(fe, 2);
        setenv("OMP_NUM_THREADS", "1", 1);
        // the stop signals at their defaults, whatever this test inherited (under nohup SIGHUP
        // is ignored, and the trainer keeps an ignored SIGHUP ignored, as nohup means)
        signal(SIGHUP, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execv(bin, argv);
        _exit(127);
    }
    return pid;
}

// Wait for pid at most `secs` seconds (then SIGKILL it and fail). Returns its exit code.
static int wait_for(pid_t pid, double secs, const char* what) {
    double t0 = util_now();
    int st;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) break;
        if (util_now() - t0 > secs) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            ck_abort_msg("%s still ran after %.0f s", what, secs);
        }
        usleep(2000);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int run_tool(const char* name, const char* args, const char* log) {
    return wait_for(spawn(name, args, log), 120, args);
}

#define TINY                                                                                       \
    "n_layer=2 n_head=2 n_embd=32 block_size=32 seq_len=16 batch_size=4 vocab_size=257 "           \
    "tokenizer=byte threads=1 log_every=1 sample_every=0 warmup_steps=0 eval_steps=2 "             \
    "probe_sequences=2 "

// ./train with the tiny model on the shards, out_dir = DIR, plus `extra`; log DIR.log.*
static pid_t spawn_train(const char* dir, const char* extra) {
    char args[8192], log[1500];
    snprintf(args, sizeof(args), TINY "train_data=%s val_data=%s out_dir=%s %s", g_data, g_val, dir,
             extra);
    snprintf(log, sizeof(log), "%s.log", dir);
    return spawn("train", args, log);
}

static int run_train(const char* dir, const char* extra) {
    return wait_for(spawn_train(dir, extra), 300, extra);
}

static char* slurp(const char* path) {
    char err[1300];
    size_t n;
    char* t = util_read_file(path, &n, err, sizeof(err));
    return t ? t : strdup("");
}

static char* log_of(const char* dir, const char* which) {
    char p[1500];
    snprintf(p, sizeof(p), "%s.log.%s", dir, which);
    return slurp(p);
}

static char* file_in(const char* dir, const char* name) {
    char p[1500];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return slurp(p);
}

static void out_path(char* buf, size_t cap, const char* name) {
    snprintf(buf, cap, "%s/%s", tmp(), name);
}

// metrics.jsonl text with the wall-clock fields (step_ms, tok_per_s, mfu) removed from each line.
static char* strip_timing(const char* text) {
    char* t = strdup(text);
    static const char* keys[] = {"\"step_ms\":", "\"tok_per_s\":", "\"mfu\":"};
    for (int k = 0; k < 3; k++)
        for (char* p; (p = strstr(t, keys[k])) != NULL;) {
            char* e = p + strlen(keys[k]);
            while (*e && *e != ',' && *e != '}')
                e++;
            if (*e == ',') e++;
            memmove(p, e, strlen(e) + 1);
        }
    return t;
}

// The two runs' metrics.jsonl are equal line for line, timing aside (and not empty); names the
// first differing line.
static void assert_same_metrics(const char* a, const char* b, int min_val) {
    char *ta = file_in(a, "metrics.jsonl"), *tb = file_in(b, "metrics.jsonl");
    char *x = strip_timing(ta), *y = strip_timing(tb);
    free(ta);
    free(tb);
    int line = 1, vals = 0;
    const char *p = x, *q = y;
    while (*p || *q) {
        size_t n = strcspn(p, "\n"), m = strcspn(q, "\n");
        ck_assert_msg(n == m && strncmp(p, q, n) == 0, "metrics.jsonl line %d differs:\n%.*s\n%.*s",
                      line, (int)n, p, (int)m, q);
        vals += strncmp(p, "{\"step\":", 8) == 0 && memmem(p, n, "\"val_loss\"", 10) != NULL;
        p += n + (p[n] == '\n');
        q += m + (q[m] == '\n');
        line++;
    }
    ck_assert_msg(line > 10, "only %d lines", line - 1);
    ck_assert_int_ge(vals, min_val);
    free(x);
    free(y);
}

static int count_with(const char* dir, const char* part) {
    DIR* d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent* e;
    while ((e = readdir(d)))
        n += strstr(e->d_name, part) != NULL;
    closedir(d);
    return n;
}

static void copy_dir(const char* from, const char* to) {
    char cmd[4000];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' && cp -a '%s' '%s'", to, from, to);
    ck_assert(system(cmd) == 0);
}

// ---------------------------------------------------------------------------------------------
// 1. a failed write stops the run (exit 1) naming the file

START_TEST(test_write_to_full_device_stops) {
    setup_data();
    static const char* const files[] = {"metrics.jsonl", "main.log"};
    for (int k = 0; k < 2; k++) {
        char dir[1100], link[1200], err[1200];
        snprintf(dir, sizeof(dir), "%s/devfull_%d", tmp(), k);
        ck_assert(util_mkdirs(dir, err, sizeof(err)) == 0);
        snprintf(link, sizeof(link), "%s/%s", dir, files[k]);
        ck_assert(symlink("/dev/full", link) == 0); // every write fails with ENOSPC
        int rc = run_train(dir, "max_steps=6 eval_every=3 checkpoint_every=3");
        char* se = log_of(dir, "err");
        ck_assert_msg(rc == 1, "%s on /dev/full: exit %d, stderr: %s", files[k], rc, se);
        ck_assert_msg(strstr(se, link) && strstr(se, "No space left on device"), "%s", se);
        free(se);
        ck_assert_int_eq(count_with(dir, "model_00000006"), 0); // stopped before the end
    }
}
END_TEST

// A tmpfs that fills in the middle of a run: the run stops with exit 1 naming the file; once
// the tmpfs has room, resume = 1 finishes and metrics.jsonl equals an uninterrupted run's.
START_TEST(test_full_tmpfs_then_resume) {
    setup_data();
    char mnt[1100], ref[1100], err[1200];
    out_path(mnt, sizeof(mnt), "tmpfs");
    ck_assert(util_mkdirs(mnt, err, sizeof(err)) == 0);
    // a private mount namespace for this test process (Check runs each test in its own fork)
    if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", mnt, "tmpfs", 0, "size=1200k") != 0) {
        printf("test_full_tmpfs_then_resume: skipped: cannot mount a tmpfs here (%s); "
               "test_write_to_full_device_stops covers the failing write\n",
               strerror(errno));
        return;
    }
    const char* cfg = "max_steps=24 eval_every=4 checkpoint_every=4 keep_last=10 metrics_every=4";
    out_path(ref, sizeof(ref), "tmpfs_ref");
    ck_assert_int_eq(run_train(ref, cfg), 0);
    char run[1200];
    snprintf(run, sizeof(run), "%s/run", mnt);
    int rc = run_train(run, cfg); // 1200 KiB hold about 2 checkpoints of ~420 KiB
    char* se = log_of(run, "err");
    ck_assert_msg(rc == 1, "exit %d on a full tmpfs; stderr: %s", rc, se);
    ck_assert_msg(strstr(se, "No space left on device") || strstr(se, "write failed"), "%s", se);
    free(se);
    ck_assert(mount("tmpfs", mnt, "tmpfs", MS_REMOUNT, "size=64m") == 0); // the disk has room
    char extra[512];
    snprintf(extra, sizeof(extra), "%s resume=1", cfg);
    rc = run_train(run, extra);
    se = log_of(run, "err");
    ck_assert_msg(rc == 0, "resume after freeing: exit %d; %s", rc, se);
    free(se);
    assert_same_metrics(ref, run, 6);
    umount2(mnt, MNT_DETACH);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// 2. resumed metrics equal an uninterrupted run's; a finished run stays as it is

START_TEST(test_resume_metrics_line_for_line) {
    setup_data();
    char ref[1100], run[1100], p[1200];
    out_path(ref, sizeof(ref), "lines_ref");
    out_path(run, sizeof(run), "lines_run");
    const char* cfg = "max_steps=12 eval_every=4 checkpoint_every=4 keep_last=5 metrics_every=4";
    ck_assert_int_eq(run_train(ref, cfg), 0);
    // resumed at step 8 (a validation step): the copy without its newer checkpoint
    copy_dir(ref, run);
    snprintf(p, sizeof(p), "%s/model_00000012.bin", run);
    unlink(p);
    snprintf(p, sizeof(p), "%s/state_00000012.bin", run);
    unlink(p);
    char extra[512];
    snprintf(extra, sizeof(extra), "%s resume=1", cfg);
    ck_assert_int_eq(run_train(run, extra), 0);
    char* so = log_of(run, "out");
    ck_assert_msg(strstr(so, "resuming from step 8"), "%s", so);
    free(so);
    assert_same_metrics(ref, run, 4);
    // a finished run given resume = 1 says so and changes nothing
    char *m0 = file_in(run, "metrics.jsonl"), *l0 = file_in(run, "main.log"),
         *c0 = file_in(run, "config.conf");
    ck_assert_int_eq(run_train(run, extra), 0);
    so = log_of(run, "out");
    ck_assert_msg(strstr(so, "finished") && !strstr(so, "resuming"), "%s", so);
    free(so);
    char *m1 = file_in(run, "metrics.jsonl"), *l1 = file_in(run, "main.log"),
         *c1 = file_in(run, "config.conf");
    ck_assert_str_eq(m0, m1);
    ck_assert_str_eq(l0, l1);
    ck_assert_str_eq(c0, c1);
    free(m0), free(m1), free(l0), free(l1), free(c0), free(c1);
    // a cut last line (a crash mid-write) is dropped on resume
    snprintf(p, sizeof(p), "%s/model_00000012.bin", run);
    unlink(p);
    snprintf(p, sizeof(p), "%s/state_00000012.bin", run);
    unlink(p);
    snprintf(p, sizeof(p), "%s/metrics.jsonl", run);
    FILE* f = fopen(p, "a");
    fputs("{\"step\":13,\"train_lo", f);
    fclose(f);
    ck_assert_int_eq(run_train(run, extra), 0);
    assert_same_metrics(ref, run, 4);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// 3. temp files of dead processes

START_TEST(test_stale_temp_files_removed) {
    setup_data();
    char dir[1100], p[1300], err[1200];
    out_path(dir, sizeof(dir), "temps");
    ck_assert(util_mkdirs(dir, err, sizeof(err)) == 0);
    pid_t dead = fork(); // a pid that is gone
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    static const char* const names[] = {"config.conf", "metrics.jsonl", "model_00000002.bin",
                                        "attn_00000004.npy", "hf.json"};
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof(p), "%s/%s.tmp.%ld", dir, names[i], (long)dead);
        FILE* f = fopen(p, "w");
        fputs("partial", f);
        fclose(f);
    }
    snprintf(p, sizeof(p), "%s/config.conf.tmp.%ld", dir, (long)getpid()); // a live writer's
    FILE* f = fopen(p, "w");
    fclose(f);
    ck_assert_int_eq(run_train(dir, "max_steps=1 eval_every=0"), 0);
    char tag[64];
    snprintf(tag, sizeof(tag), ".tmp.%ld", (long)dead);
    ck_assert_msg(count_with(dir, tag) == 0, "%d temp files of a dead process remain",
                  count_with(dir, tag));
    ck_assert_msg(util_file_exists(p), "the temp file of a live process was removed");
}
END_TEST

// ---------------------------------------------------------------------------------------------
// 4. unbounded reads

START_TEST(test_devices_and_huge_inputs_refused) {
    char log[1100], p[1100], err[2048];
    out_path(log, sizeof(log), "zero");
    double t0 = util_now();
    int rc = wait_for(spawn("train", "/dev/zero --print-config", log), 20, "/dev/zero config");
    char lp[1200];
    snprintf(lp, sizeof(lp), "%s.err", log);
    char* se = slurp(lp);
    ck_assert_msg(rc == 2 && strstr(se, "/dev/zero") && strstr(se, "not a regular file"),
                  "exit %d: %s", rc, se);
    free(se);
    ck_assert_msg(util_now() - t0 < 10, "refusing /dev/zero took %.1f s", util_now() - t0);
    // an include of a device, a directory as the config, a config larger than 1 MiB
    Config c;
    config_defaults(&c);
    ck_assert(config_apply_arg(&c, "include=/dev/zero", err, sizeof(err)) != 0);
    ck_assert_msg(strstr(err, "not a regular file"), "%s", err);
    ck_assert(config_load(&c, tmp(), err, sizeof(err)) != 0);
    ck_assert_msg(strstr(err, "not a regular file") && strstr(err, "directory"), "%s", err);
    out_path(p, sizeof(p), "huge.conf");
    FILE* f = fopen(p, "w");
    for (int i = 0; i < 80000; i++)
        fputs("# a comment line of some length\n", f);
    fclose(f);
    ck_assert(config_load(&c, p, err, sizeof(err)) != 0);
    ck_assert_msg(strstr(err, "huge.conf") && strstr(err, "more than the 1.0 MiB"), "%s", err);
    // the tokenizer's files: vocab.bpe on /dev/zero
    char dir[1100], link[1200];
    out_path(dir, sizeof(dir), "tokdir");
    ck_assert(util_mkdirs(dir, err, sizeof(err)) == 0);
    snprintf(link, sizeof(link), "%s/vocab.bpe", dir);
    ck_assert(symlink("/dev/zero", link) == 0);
    t0 = util_now();
    Tokenizer* tok = tokenizer_load("gpt2", dir, err, sizeof(err));
    ck_assert_ptr_null(tok);
    ck_assert_msg(strstr(err, "vocab.bpe") && strstr(err, "not a regular file"), "%s", err);
    ck_assert(util_now() - t0 < 5);
    // util_read_file: a FIFO, and a cap
    out_path(p, sizeof(p), "fifo");
    ck_assert(mkfifo(p, 0600) == 0);
    size_t n;
    ck_assert_ptr_null(util_read_file(p, &n, err, sizeof(err)));
    ck_assert_msg(strstr(err, "a pipe"), "%s", err);
    out_path(p, sizeof(p), "huge.conf");
    ck_assert_ptr_null(util_read_file_max(p, 1000, &n, err, sizeof(err)));
    ck_assert_msg(strstr(err, "more than the 1000 bytes"), "%s", err);
    char* ok = util_read_file_max(p, 4 << 20, &n, err, sizeof(err));
    ck_assert_ptr_nonnull(ok);
    ck_assert_uint_eq(n, 80000 * 32);
    free(ok);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// 5. NaN everywhere

static const char* const NOT_NUMBERS[] = {"nan",  "NaN",      "-nan",  "nan(0x1)", "inf",
                                          "-inf", "infinity", "1e999", "0x10"};
#define N_NOT_NUMBERS (int)(sizeof(NOT_NUMBERS) / sizeof(NOT_NUMBERS[0]))

START_TEST(test_nan_refused_by_every_key) {
    int keys = 0;
    for (int i = 0; i < CONFIG_NFIELDS; i++) {
        const ConfigField* f = &CONFIG_FIELDS[i];
        if (f->type == CF_STR) continue;
        keys++;
        for (int k = 0; k < N_NOT_NUMBERS; k++) {
            Config c, d;
            config_defaults(&c);
            config_defaults(&d);
            char arg[128], err[1024] = "";
            snprintf(arg, sizeof(arg), "%s=%s", f->key, NOT_NUMBERS[k]);
            ck_assert_msg(config_apply_arg(&c, arg, err, sizeof(err)) != 0, "%s accepted", arg);
            ck_assert_msg(strstr(err, f->key), "%s: %s", arg, err);
            ck_assert_msg(config_diff(&c, &d, err, sizeof(err)) == 0, "%s changed %s", arg, err);
            char text[160], where[64];
            snprintf(text, sizeof(text), "%s = %s\n", f->key, NOT_NUMBERS[k]);
            snprintf(where, sizeof(where), "sweep.conf");
            ck_assert(config_load_text(&c, text, where, err, sizeof(err)) != 0);
            ck_assert_msg(strstr(err, "sweep.conf:1") && strstr(err, f->key), "%s", err);
        }
    }
    ck_assert_int_ge(keys, 30);
    // every numeric hyperparameter of every attention variant
    int hps = 0;
    for (int v = 0; v < attn_count(); v++) {
        const AttnVariant* av = attn_get(v);
        for (int h = 0; h < av->n_hparams; h++) {
            if (av->hparams[h].choices) continue;
            hps++;
            for (int k = 0; k < N_NOT_NUMBERS; k++) {
                AttnHParams hp;
                memset(&hp, 0, sizeof(hp));
                char err[512] = "";
                ck_assert_msg(attn_hparams_set(&hp, av, av->hparams[h].name, NOT_NUMBERS[k], err,
                                               sizeof(err)) != 0,
                              "attention %s: attn.%s = %s accepted", av->name, av->hparams[h].name,
                              NOT_NUMBERS[k]);
                ck_assert_msg(strstr(err, av->hparams[h].name), "%s", err);
            }
            AttnHParams hp; // and a number in range is still accepted
            memset(&hp, 0, sizeof(hp));
            char num[32], err[512];
            snprintf(num, sizeof(num), "%.9g", (double)av->hparams[h].def);
            ck_assert_msg(attn_hparams_set(&hp, av, av->hparams[h].name, num, err, sizeof(err)) ==
                              0,
                          "%s: %s", av->name, err);
        }
    }
    ck_assert_int_ge(hps, 20);
    double x;
    ck_assert(util_parse_double("-1.5e-3", &x) == 0 && x == -1.5e-3);
}
END_TEST

// Each numeric option a tool's --help lists ("--name N", one capital letter or LIST as the value),
// given `nan` after each of the tool's prefixes (the arguments that get it to parse the option):
// no run exits 0, and one exits 2 naming the option.
typedef struct {
    const char* tool;
    const char* prefixes[3];
} ToolCall;

START_TEST(test_nan_refused_by_every_tool_option) {
    setup_data();
    char ck[1100];
    out_path(ck, sizeof(ck), "nan_ck");
    ck_assert_int_eq(run_train(ck, "max_steps=1 eval_every=0"), 0);
    char ckf[1200], pre[8][2600];
    snprintf(ckf, sizeof(ckf), "%s/model_00000001.bin", ck);
    snprintf(pre[0], sizeof(pre[0]), "--checkpoint %s", ckf);
    snprintf(pre[1], sizeof(pre[1]), "--checkpoint %s --data %s", ckf, g_val);
    snprintf(pre[2], sizeof(pre[2]), "--checkpoint %s --passkey", ckf);
    snprintf(pre[3], sizeof(pre[3]), "gen trigger --out %s/nan_probe", tmp());
    snprintf(pre[4], sizeof(pre[4]), "eval trigger --checkpoint %s --data %s", ckf, g_val);
    snprintf(pre[5], sizeof(pre[5]), "--checkpoint %s --text ab --out %s/nan_map", ckf, tmp());
    snprintf(pre[6], sizeof(pre[6]), "html --checkpoint %s --text ab --out %s/nan_map.html", ckf,
             tmp());
    snprintf(pre[7], sizeof(pre[7]), "sinks trigger --checkpoint %s --data %s", ckf, g_val);
    const ToolCall calls[] = {{"generate", {pre[0]}},
                              {"evaluate", {pre[1], pre[2]}},
                              {"prepare", {""}},
                              {"probe", {pre[3], pre[4], pre[7]}},
                              {"attnmap", {pre[5], pre[6]}},
                              {"tokenize", {"bench"}},
                              {"export", {pre[0]}}};
    int options = 0;
    for (size_t t = 0; t < sizeof(calls) / sizeof(calls[0]); t++) {
        char log[1200], lp[1300];
        snprintf(log, sizeof(log), "%s/help_%s", tmp(), calls[t].tool);
        ck_assert_int_eq(run_tool(calls[t].tool, "--help", log), 0);
        snprintf(lp, sizeof(lp), "%s.out", log);
        char* help = slurp(lp);
        for (char* p = help; (p = strstr(p, "--")) != NULL; p += 2) {
            char opt[64], val[16];
            if (sscanf(p, "%63[a-z0-9-]%15[A-Z0-9 ]", opt, val) != 2 || strlen(opt) < 3 ||
                val[0] != ' ' || val[1] == ' ')
                continue; // the value follows after one space: "--batches N"
            memmove(val, val + 1, strlen(val));
            val[strcspn(val, " ")] = '\0';
            if (strlen(val) != 1 && strcmp(val, "LIST") != 0 && !(val[0] >= '0' && val[0] <= '9'))
                continue; // PATH, DIR, TEXT, ...
            char name[80];
            snprintf(name, sizeof(name), "%s", opt);
            if (strstr(help, name) != p) continue; // the first mention of each option only
            options++;
            int named = 0;
            for (int k = 0; k < 3 && calls[t].prefixes[k]; k++) {
                char args[2048];
                snprintf(args, sizeof(args), "%s %s nan", calls[t].prefixes[k], opt);
                int rc = run_tool(calls[t].tool, args, log);
                snprintf(lp, sizeof(lp), "%s.err", log);
                char* se = slurp(lp);
                ck_assert_msg(rc != 0, "%s %s exits 0", calls[t].tool, args);
                named |= rc == 2 && strstr(se, opt) && strstr(se, "nan") && !strstr(se, "unknown");
                free(se);
            }
            ck_assert_msg(named, "%s %s nan: no run refused it naming the option", calls[t].tool,
                          opt);
        }
        free(help);
    }
    ck_assert_int_ge(options, 30);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// 6. resume into changed data or geometry

START_TEST(test_resume_refuses_changed_data) {
    setup_data();
    char dir[1100], err[1200];
    out_path(dir, sizeof(dir), "changed");
    const char* cfg = "max_steps=8 eval_every=0 checkpoint_every=4";
    // a private copy of the data, so that touching it does not disturb the other tests
    char data2[1100], cmd[3000], base[3000];
    snprintf(data2, sizeof(data2), "%s/data2", tmp());
    ck_assert(util_mkdirs(data2, err, sizeof(err)) == 0);
    snprintf(cmd, sizeof(cmd), "cp -p '%s' '%s/'", g_data, data2);
    ck_assert(system(cmd) == 0);
    snprintf(base, sizeof(base), "%s train_data=%s/train_*.bin", cfg, data2);
    ck_assert_int_eq(run_train(dir, base), 0);
    char p[1200];
    snprintf(p, sizeof(p), "%s/model_00000008.bin", dir);
    unlink(p);
    snprintf(p, sizeof(p), "%s/state_00000008.bin", dir);
    unlink(p);
    const char* changes[][3] = {{"batch_size=8", "batch_size", "'4'"},
                                {"seq_len=8", "seq_len", "'16'"},
                                {"seed=7", "seed", "'1337'"},
                                {"shuffle=1", "shuffle", "'0'"},
                                {"grad_accum=2", "grad_accum", "1 on 1 rank"}};
    for (int i = 0; i < 5; i++) {
        char extra[4096];
        snprintf(extra, sizeof(extra), "%s resume=1 %s", base, changes[i][0]);
        int rc = run_train(dir, extra);
        char* se = log_of(dir, "err");
        ck_assert_msg(rc == 2, "%s: exit %d; %s", changes[i][0], rc, se);
        ck_assert_msg(strstr(se, changes[i][1]) && strstr(se, changes[i][2]) &&
                          strstr(se, strchr(changes[i][0], '=') + 1),
                      "%s: %s", changes[i][0], se);
        free(se);
    }
    // the same file under another path, then the file itself changed (mtime, then size)
    char extra[4096];
    snprintf(extra, sizeof(extra), "%s resume=1 train_data=%s", cfg, g_data);
    ck_assert_int_eq(run_train(dir, extra), 2);
    char* se = log_of(dir, "err");
    ck_assert_msg(strstr(se, "train_data") && strstr(se, data2) && strstr(se, g_data), "%s", se);
    free(se);
    char shard[1200];
    snprintf(shard, sizeof(shard), "%s/train_000000.bin", data2);
    struct timespec ts[2] = {{0, UTIME_OMIT}, {1700000000, 0}};
    ck_assert(utimensat(AT_FDCWD, shard, ts, 0) == 0);
    snprintf(extra, sizeof(extra), "%s resume=1", base);
    ck_assert_int_eq(run_train(dir, extra), 2);
    se = log_of(dir, "err");
    ck_assert_msg(strstr(se, "mtime 1700000000.000000000"), "%s", se);
    free(se);
    // the original file back (cp -p keeps the mtime): the resume goes through, and a changed
    // model width is still refused
    snprintf(cmd, sizeof(cmd), "cp -p '%s' '%s/'", g_data, data2);
    ck_assert(system(cmd) == 0);
    snprintf(extra, sizeof(extra), "%s resume=1 n_embd=64", base);
    ck_assert_int_eq(run_train(dir, extra), 2);
    snprintf(extra, sizeof(extra), "%s resume=1", base);
    ck_assert_int_eq(run_train(dir, extra), 0);
    char* so = log_of(dir, "out");
    ck_assert_msg(strstr(so, "resuming from step 4"), "%s", so);
    free(so);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// 7. signals

// Wait until DIR/metrics.jsonl holds a training record of step >= step (or the run ended).
static void wait_step(pid_t pid, const char* dir, long step) {
    char key[64];
    snprintf(key, sizeof(key), "{\"step\":%ld,\"train_loss\"", step);
    for (int i = 0; i < 30000; i++) {
        char* m = file_in(dir, "metrics.jsonl");
        int there = strstr(m, key) != NULL;
        free(m);
        if (there || waitpid(pid, NULL, WNOHANG) == pid) return;
        usleep(2000);
    }
}

START_TEST(test_signal_exit_codes) {
    setup_data();
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) {
        char dir[1100];
        snprintf(dir, sizeof(dir), "%s/sig_%d", tmp(), sigs[i]);
        pid_t pid = spawn_train(dir, "max_steps=100000 eval_every=0 log_every=1000");
        wait_step(pid, dir, 3);
        kill(pid, sigs[i]);
        int rc = wait_for(pid, 60, "stopped run");
        char* so = log_of(dir, "out");
        ck_assert_msg(rc == EXIT_STOPPED, "signal %d: exit %d; %s", sigs[i], rc, so);
        ck_assert_msg(strstr(so, "stopped by signal") && strstr(so, "checkpoint: "), "%s", so);
        free(so);
        ck_assert_int_eq(count_with(dir, "state_"), 1);
    }
    // SIGUSR1: a checkpoint after the current step, and training goes on; then a stop, and the
    // resumed run's metrics equal an uninterrupted run's (validation at every step, so that the
    // resume lands on a validation step)
    char ref[1100], dir[1100];
    out_path(ref, sizeof(ref), "usr1_ref");
    out_path(dir, sizeof(dir), "usr1");
    const char* cfg = "max_steps=160 eval_every=1 eval_steps=1 metrics_every=7";
    ck_assert_int_eq(run_train(ref, cfg), 0);
    pid_t pid = spawn_train(dir, cfg);
    wait_step(pid, dir, 5);
    kill(pid, SIGUSR1);
    for (int i = 0; i < 20000 && count_with(dir, "state_") == 0; i++)
        usleep(1000);
    ck_assert_msg(count_with(dir, "state_") == 1, "no checkpoint after SIGUSR1");
    ck_assert_msg(waitpid(pid, NULL, WNOHANG) == 0, "the run ended after SIGUSR1");
    long ck = 0;
    DIR* d = opendir(dir);
    struct dirent* e;
    while ((e = readdir(d)))
        if (sscanf(e->d_name, "state_%ld.bin", &ck) == 1) break;
    closedir(d);
    wait_step(pid, dir, ck + 5);
    kill(pid, SIGTERM);
    int rc = wait_for(pid, 60, "stopped run");
    ck_assert_msg(rc == EXIT_STOPPED, "exit %d after SIGTERM", rc);
    char* so = log_of(dir, "out");
    ck_assert_msg(strstr(so, "(SIGUSR1); training goes on"), "%s", so);
    free(so);
    char extra[512];
    snprintf(extra, sizeof(extra), "%s resume=1", cfg);
    ck_assert_int_eq(run_train(dir, extra), 0);
    assert_same_metrics(ref, dir, 100);
}
END_TEST

static Suite* run_safety_suite(void) {
    Suite* s = suite_create("run_safety");
    TCase* tc = tcase_create("faults");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_write_to_full_device_stops);
    tcase_add_test(tc, test_full_tmpfs_then_resume);
    tcase_add_test(tc, test_resume_metrics_line_for_line);
    tcase_add_test(tc, test_stale_temp_files_removed);
    tcase_add_test(tc, test_devices_and_huge_inputs_refused);
    tcase_add_test(tc, test_nan_refused_by_every_key);
    tcase_add_test(tc, test_nan_refused_by_every_tool_option);
    tcase_add_test(tc, test_resume_refuses_changed_data);
    tcase_add_test(tc, test_signal_exit_codes);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(run_safety_suite)
