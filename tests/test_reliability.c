// tests/test_reliability.c: crash safety, integrity, divergence handling, resource checks and
// determinism of real training runs. The trainer is the one built next to this test
// (BUILD/tests/test_reliability -> BUILD/train); it runs a tiny byte-level model on shards made
// here. Covered: kill -9 at random moments (checkpoint writes included) then resume; bit flips
// and truncation of model/state files (rejected, resume falls back); a full disk during a
// checkpoint write (RLIMIT_FSIZE); keep_last; nan_policy stop/skip; the memory estimate; and
// identical metrics.jsonl records (losses, norms, diagnostics) across two runs on 1 and 2
// threads, timing fields excepted.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "data/shard.h"
#include "model/checkpoint.h"
#include "model/run/memory.h"
#include "optim/optim.h"
#include "tests/testutil.h"

static char g_train[1100];
static char g_data[1100]; // train shard glob
static char g_val[1100];

static void setup_once(void) {
    if (g_train[0]) return;
    snprintf(g_train, sizeof(g_train), "%s/train", test_build_dir());
    ck_assert_msg(access(g_train, X_OK) == 0, "%s: trainer not built", g_train);
    // byte-level shards: a repeating pattern with noise, so the model has something to learn
    const char* dir = test_tmpdir();
    char err[2048];
    size_t ntok = 20000;
    uint16_t* t = mallocCheck(sizeof(uint16_t) * ntok);
    Rng r;
    rng_seed(&r, 3);
    for (size_t i = 0; i < ntok; i++)
        t[i] = (uint16_t)(i % 97 == 0 ? 256 : 'a' + (i * 7 + rng_below(&r, 3)) % 26);
    snprintf(g_data, sizeof(g_data), "%s/train_000000.bin", dir);
    ck_assert(shard_write(g_data, t, ntok, err, sizeof(err)) == 0);
    snprintf(g_val, sizeof(g_val), "%s/val_000000.bin", dir);
    ck_assert(shard_write(g_val, t, 4000, err, sizeof(err)) == 0);
    free(t);
}

// Run the trainer with the tiny config plus `extra` (space-separated key=value). Output goes
// to out_dir/stdout.txt and stderr.txt. Returns the child pid (not waited for).
static pid_t spawn_train(const char* out_dir, const char* extra, rlim_t fsize_limit,
                         const char* env) {
    char args[4096];
    snprintf(args, sizeof(args),
             "n_layer=2 n_head=2 n_embd=32 block_size=32 seq_len=16 batch_size=4 "
             "vocab_size=257 tokenizer=byte threads=1 log_every=1 eval_every=0 sample_every=0 "
             "warmup_steps=0 "
             "train_data=%s out_dir=%s %s",
             g_data, out_dir, extra);
    char* argv[64];
    int argc = 0;
    argv[argc++] = g_train;
    for (char* tok = strtok(args, " "); tok && argc < 63; tok = strtok(NULL, " "))
        argv[argc++] = tok;
    argv[argc] = NULL;
    char so[1200], se[1200];
    snprintf(so, sizeof(so), "%s.stdout.txt", out_dir);
    snprintf(se, sizeof(se), "%s.stderr.txt", out_dir);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        int fo = open(so, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int fe = open(se, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fo, 1);
        dup2(fe, 2);
        if (fsize_limit) {
            signal(SIGXFSZ, SIG_IGN); // writes then fail with EFBIG, like a full disk
            struct rlimit rl = {fsize_limit, fsize_limit};
            setrlimit(RLIMIT_FSIZE, &rl);
        }
        if (env) putenv((char*)env);
        setenv("OMP_NUM_THREADS", "1", 1);
        execv(g_train, argv);
        _exit(127);
    }
    return pid;
}

static int wait_rc(pid_t pid) {
    int st;
    ck_assert(waitpid(pid, &st, 0) == pid);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return WEXITSTATUS(st);
}

static int run_train(const char* out_dir, const char* extra) {
    return wait_rc(spawn_train(out_dir, extra, 0, NULL));
}

static char* slurp(const char* path) {
    char err[1200];
    size_t n;
    char* t = util_read_file(path, &n, err, sizeof(err));
    return t ? t : strdup("");
}

static char* out_file(const char* out_dir, const char* suffix) {
    char p[1200];
    snprintf(p, sizeof(p), "%s.%s", out_dir, suffix);
    return slurp(p);
}

static int count_files(const char* dir, const char* prefix, const char* contains) {
    DIR* d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent* e;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 &&
            (!contains || strstr(e->d_name, contains)))
            n++;
    closedir(d);
    return n;
}

// A model built like the trainer's tiny config, for loading checkpoints in-process.
static void tiny_model(GPT2* m, Optimizer* o) {
    Config c;
    char err[2048];
    config_defaults(&c);
    c.n_layer = 2;
    c.n_head = 2;
    c.n_embd = 32;
    c.block_size = 32;
    c.vocab_size = 257;
    memset(m, 0, sizeof(*m));
    ck_assert(gpt2_setup_attention(m, &c, err, sizeof(err)) == 0);
    GPT2Config gc;
    ck_assert(gpt2_config_from(&gc, &c, err, sizeof(err)) == 0);
    gpt2_build(m, &gc);
    optim_init(o, optim_lookup("adamw"), m->num_params);
}

// Read a run-state file the way its layout is documented (docs/design.md), independently of the
// trainer's reader: the trailer verifies (util_verify_trailer), the header says STATE_MAGIC version
// 2 with 4 sections that fill the file exactly: "loop" (48 bytes, the step first), "data" (56
// bytes), "optim" with o's name, size and state arrays and exactly that many floats, and "model"
// (16 bytes: the loop's step again, the crc32 of the paired model file's parameters, 0). Returns
// 0 with *step, or -1 with err naming the file.
static int read_state(const Optimizer* o, const char* path, long* step, char* err, size_t cap) {
    if (util_verify_trailer(path, 12, err, cap)) return -1;
    size_t n;
    unsigned char* b = (unsigned char*)util_read_file(path, &n, err, cap);
    if (!b) return -1;
    int32_t h[3];
    memcpy(h, b, sizeof(h));
    int ok = h[0] == STATE_MAGIC && h[1] == 2 && h[2] == 4, seen = 0;
    size_t pos = 12, body = n - 8;
    int64_t lstep = -1, pstep = -2;
    for (int i = 0; ok && i < 4; i++) {
        uint64_t size;
        ok = pos + 24 <= body;
        if (!ok) break;
        char name[17] = {0};
        memcpy(name, b + pos, 16);
        memcpy(&size, b + pos + 16, 8);
        const unsigned char* d = b + pos + 24;
        ok = size <= body - pos - 24;
        if (ok && strcmp(name, "loop") == 0) {
            ok = size == 48;
            memcpy(&lstep, d, 8);
            seen |= 1;
        } else if (ok && strcmp(name, "data") == 0) {
            ok = size == 56;
            seen |= 2;
        } else if (ok && strcmp(name, "optim") == 0) {
            int64_t pn;
            int32_t arrays;
            memcpy(&pn, d + 32, 8);
            memcpy(&arrays, d + 48, 4);
            ok = strcmp((const char*)d, o->def->name) == 0 && (size_t)pn == o->n &&
                 arrays == o->def->state_per_param &&
                 size == 52 + sizeof(float) * o->n * (size_t)arrays;
            seen |= 4;
        } else if (ok && strcmp(name, "model") == 0) {
            uint32_t zero;
            memcpy(&pstep, d, 8);
            memcpy(&zero, d + 12, 4);
            ok = size == 16 && zero == 0;
            seen |= 8;
        } else {
            ok = 0;
        }
        pos += 24 + (ok ? size : 0);
    }
    ok = ok && seen == 15 && pos == body && pstep == lstep;
    free(b);
    if (!ok) snprintf(err, cap, "%s: not the documented run-state layout", path);
    *step = (long)lstep;
    return ok ? 0 : -1;
}

static void ckpt_paths(char* mp, char* sp, size_t cap, const char* dir, long step) {
    snprintf(mp, cap, "%s/model_%08ld.bin", dir, step);
    snprintf(sp, cap, "%s/state_%08ld.bin", dir, step);
}

static int files_equal(const char* a, const char* b) {
    char err[1200];
    size_t na, nb;
    char* x = util_read_file(a, &na, err, sizeof(err));
    char* y = util_read_file(b, &nb, err, sizeof(err));
    int eq = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return eq;
}

// ---------------------------------------------------------------------------------------------

START_TEST(test_kill9_then_resume) {
    setup_once();
    const char* dir = test_tmpdir();
    char ref[1100], run[1100], mp[1200], sp[1200], err[2048];
    snprintf(ref, sizeof(ref), "%s/ref", dir);
    snprintf(run, sizeof(run), "%s/killed", dir);
    const char* cfg = "max_steps=120 checkpoint_every=1 keep_last=3 seed=5";
    // the uninterrupted run
    ck_assert_int_eq(run_train(ref, cfg), 0);
    // kill -9 at random moments; with a checkpoint after every step most kills land in a write
    Rng r;
    rng_seed(&r, (uint64_t)time(NULL));
    GPT2 m;
    Optimizer o;
    tiny_model(&m, &o);
    int kills = 0, partial = 0; // partial: kills that left a half-written checkpoint behind
    long last_seen = -1;
    for (int k = 0; k < 6; k++) {
        char extra[512];
        snprintf(extra, sizeof(extra), "%s resume=1", cfg);
        pid_t pid = spawn_train(run, extra, 0, NULL);
        // wait until the run has checkpointed a random number of steps further, then kill it
        // after a random few milliseconds (a checkpoint write takes a few of those)
        long target = (last_seen < 0 ? 0 : last_seen) + 3 + (long)rng_below(&r, 15);
        char probe[1200];
        snprintf(probe, sizeof(probe), "%s/state_%08ld.bin", run, target);
        int st, exited = 0;
        for (int w = 0; w < 20000 && !util_file_exists(probe); w++) {
            if (waitpid(pid, &st, WNOHANG) == pid) {
                exited = 1;
                break;
            }
            usleep(500);
        }
        int rc;
        if (exited) {
            rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        } else {
            usleep((useconds_t)rng_below(&r, 12000));
            kill(pid, SIGKILL);
            rc = wait_rc(pid);
            if (rc == 128 + SIGKILL) kills++;
        }
        partial += count_files(run, "model_", ".tmp.") + count_files(run, "state_", ".tmp.") > 0;
        long latest = ckpt_find_latest(run);
        if (rc == 0) break;       // it finished before the kill
        if (latest < 0) continue; // killed before the first checkpoint
        ck_assert_int_ge(latest, last_seen);
        last_seen = latest;
        // the newest complete checkpoint loads
        ckpt_paths(mp, sp, sizeof(mp), run, latest);
        long step;
        long sstep;
        ck_assert_msg(ckpt_load_model(&m, mp, 1, &step, NULL, 0, err, sizeof(err)) == 0, "%s", err);
        ck_assert_msg(read_state(&o, sp, &sstep, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(step, latest);
        ck_assert_int_eq(sstep, latest);
    }
    ck_assert_int_ge(kills, 5);
    char extra[512];
    snprintf(extra, sizeof(extra), "%s resume=1", cfg);
    ck_assert_int_eq(run_train(run, extra), 0);
    ck_assert_int_eq(ckpt_find_latest(run), 120);
    printf("kill -9: %d kills, %d during a checkpoint write\n", kills, partial);
    // metrics.jsonl holds each training step exactly once, every line complete
    snprintf(mp, sizeof(mp), "%s/metrics.jsonl", run);
    char* mj = slurp(mp);
    int seen[121] = {0};
    char* save;
    for (char* line = strtok_r(mj, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        size_t ll = strlen(line);
        ck_assert_msg(line[0] == '{' && line[ll - 1] == '}', "incomplete record: %s", line);
        long st;
        if (strstr(line, "\"train_loss\"") && sscanf(line, "{\"step\":%ld", &st) == 1 && st >= 1 &&
            st <= 120)
            seen[st]++;
    }
    for (int i = 1; i <= 120; i++)
        ck_assert_msg(seen[i] == 1, "step %d logged %d times", i, seen[i]);
    free(mj);
    // the finished run removed the temp files the killed ones left behind
    ck_assert_int_eq(count_files(run, "model_", ".tmp.") + count_files(run, "state_", ".tmp."), 0);
    // exact resume: the final weights equal the uninterrupted run's (the files differ only in
    // the saved config text, which records resume = 1)
    GPT2 m2;
    Optimizer o2;
    tiny_model(&m2, &o2);
    long s1, s2;
    ckpt_paths(mp, sp, sizeof(mp), ref, 120);
    ck_assert(ckpt_load_model(&m, mp, 1, &s1, NULL, 0, err, sizeof(err)) == 0);
    ckpt_paths(mp, sp, sizeof(mp), run, 120);
    ck_assert(ckpt_load_model(&m2, mp, 1, &s2, NULL, 0, err, sizeof(err)) == 0);
    ck_assert_msg(memcmp(m.params, m2.params, sizeof(float) * m.num_params) == 0,
                  "resumed run ended with different weights than an uninterrupted run (%d kills)",
                  kills);
    optim_free(&o2);
    gpt2_free(&m2);
    optim_free(&o);
    gpt2_free(&m);
}
END_TEST

static void flip_bit(const char* path, long off) {
    FILE* f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, off, SEEK_SET);
    int c = fgetc(f);
    fseek(f, off, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
}

START_TEST(test_corrupt_files_rejected_and_fallback) {
    setup_once();
    char run[1100], mp[1200], sp[1200], err[2048];
    snprintf(run, sizeof(run), "%s/corrupt", test_tmpdir());
    ck_assert_int_eq(run_train(run, "max_steps=6 checkpoint_every=1 keep_last=4"), 0);
    ck_assert_int_eq(ckpt_find_latest(run), 6);
    GPT2 m;
    Optimizer o;
    tiny_model(&m, &o);
    long step, sstep;
    // bit flip in the parameters of the newest model file
    ckpt_paths(mp, sp, sizeof(mp), run, 6);
    flip_bit(mp, 5000);
    ck_assert(ckpt_load_model(&m, mp, 1, &step, NULL, 0, err, sizeof(err)) != 0);
    ck_assert_msg(strstr(err, mp) && strstr(err, "checksum"), "%s", err);
    ck_assert_int_eq(ckpt_find_latest(run), 5);
    // truncated state file of the next one
    ckpt_paths(mp, sp, sizeof(mp), run, 5);
    ck_assert(truncate(sp, 2000) == 0);
    ck_assert(read_state(&o, sp, &sstep, err, sizeof(err)) != 0);
    ck_assert_msg(strstr(err, sp) != NULL, "%s", err);
    ck_assert_int_eq(ckpt_find_latest(run), 4);
    // bit flip in a header field of the run state (crc catches it too)
    ckpt_paths(mp, sp, sizeof(mp), run, 4);
    char saved[1300];
    snprintf(saved, sizeof(saved), "%s.orig", sp);
    {
        size_t n;
        char* t = util_read_file(sp, &n, err, sizeof(err));
        FILE* f = fopen(saved, "wb");
        fwrite(t, 1, n, f);
        fclose(f);
        free(t);
    }
    flip_bit(sp, 20);
    ck_assert(read_state(&o, sp, &sstep, err, sizeof(err)) != 0);
    ck_assert_msg(strstr(err, sp) != NULL, "%s", err);
    ck_assert_int_eq(ckpt_find_latest(run), 3);
    rename(saved, sp); // repair step 4
    ck_assert_int_eq(ckpt_find_latest(run), 4);
    // a truncated model file and a zero-length one
    ckpt_paths(mp, sp, sizeof(mp), run, 6);
    ck_assert(truncate(mp, 100) == 0);
    ck_assert(ckpt_load_model(&m, mp, 1, &step, NULL, 0, err, sizeof(err)) != 0);
    ck_assert_msg(strstr(err, mp) && strstr(err, "truncated"), "%s", err);
    // resume falls back to step 4 and finishes
    ck_assert_int_eq(run_train(run, "max_steps=8 checkpoint_every=1 keep_last=4 resume=1 "
                                    "resume_change=max_steps"),
                     0);
    char* so = out_file(run, "stdout.txt");
    char* se = out_file(run, "stderr.txt");
    ck_assert_msg(strstr(so, "resuming from step 4"), "%s", so);
    ck_assert_msg(strstr(se, "damaged checkpoint at step 6") && strstr(se, "model_00000006.bin"),
                  "%s", se);
    ck_assert_int_eq(ckpt_find_latest(run), 8);
    free(so);
    free(se);
    optim_free(&o);
    gpt2_free(&m);
}
END_TEST

START_TEST(test_disk_full_keeps_previous) {
    setup_once();
    char run[1100], mp[1200], sp[1200], copy[1300], err[2048];
    snprintf(run, sizeof(run), "%s/full", test_tmpdir());
    ck_assert_int_eq(run_train(run, "max_steps=3"), 0);
    ckpt_paths(mp, sp, sizeof(mp), run, 3);
    struct stat sb;
    ck_assert(stat(mp, &sb) == 0);
    snprintf(copy, sizeof(copy), "%s.copy", mp);
    {
        size_t n;
        char* t = util_read_file(mp, &n, err, sizeof(err));
        FILE* f = fopen(copy, "wb");
        fwrite(t, 1, n, f);
        fclose(f);
        free(t);
    }
    // every file the trainer writes may hold at most half a model file: the checkpoint fails
    pid_t pid = spawn_train(run, "max_steps=5 resume=1 resume_change=max_steps",
                            (rlim_t)sb.st_size / 2, NULL);
    int rc = wait_rc(pid);
    char* se = out_file(run, "stderr.txt");
    ck_assert_msg(rc == 1, "exit code %d; stderr: %s", rc, se);
    ck_assert_msg(strstr(se, "checkpoint at step 5 failed") && strstr(se, "model_00000005.bin"),
                  "%s", se);
    free(se);
    ck_assert_int_eq(ckpt_find_latest(run), 3);
    ck_assert(files_equal(mp, copy));
    ck_assert_int_eq(count_files(run, "model_", ".tmp."), 0);
    ck_assert_int_eq(count_files(run, "model_00000005", NULL), 0);
}
END_TEST

// metrics.jsonl line without the timing fields (wall-clock measurements, which differ between
// runs by nature): step_ms, tok_per_s, mfu; and the run event's thread count (the runs compared
// differ in it on purpose). Everything else in a record must be reproduced.
static void strip_timing(char* line) {
    static const char* keys[] = {"\"step_ms\":", "\"tok_per_s\":", "\"mfu\":", "\"threads\":"};
    for (int k = 0; k < 4; k++) {
        char* p = strstr(line, keys[k]);
        if (!p) continue;
        char* e = p + strlen(keys[k]);
        while (*e && *e != ',' && *e != '}')
            e++;
        if (*e == ',') e++;
        memmove(p, e, strlen(e) + 1);
    }
}

// Compare two metrics.jsonl texts record by record, timing fields excluded. Returns the number
// of records (>= 0) when every record matches, or -(1 + index) of the first record that
// differs (or is missing) with both lines in `what`. Counts the records holding each quantity
// that must be reproduced, so the caller can check the comparison was not vacuous.
typedef struct {
    int train_loss, val_loss, grad_norm, head_grad, entropy, sink_rate, kurtosis;
} MetricCounts;

static int metrics_compare(const char* a, const char* b, char* what, size_t cap, MetricCounts* mc) {
    char* x = strdup(a);
    char* y = strdup(b);
    char *sx, *sy;
    char* lx = strtok_r(x, "\n", &sx);
    char* ly = strtok_r(y, "\n", &sy);
    int n = 0, rc = 0;
    memset(mc, 0, sizeof(*mc));
    while (lx || ly) {
        if (!lx || !ly) {
            snprintf(what, cap, "record %d present in one run only", n + 1);
            rc = -(1 + n);
            break;
        }
        strip_timing(lx);
        strip_timing(ly);
        if (strcmp(lx, ly) != 0) {
            snprintf(what, cap, "record %d differs:\n%s\n%s", n + 1, lx, ly);
            rc = -(1 + n);
            break;
        }
        mc->train_loss += strstr(lx, "\"train_loss\":") != NULL;
        mc->val_loss += strstr(lx, "\"val_loss\":") != NULL;
        mc->grad_norm += strstr(lx, "\"grad_norm\":") != NULL;
        mc->head_grad += strstr(lx, "\"grad_norm_q\":") != NULL;
        mc->entropy += strstr(lx, "\"entropy") != NULL;
        mc->sink_rate += strstr(lx, "\"sink_rate\":") != NULL;
        mc->kurtosis += strstr(lx, "\"kurtosis") != NULL;
        n++;
        lx = strtok_r(NULL, "\n", &sx);
        ly = strtok_r(NULL, "\n", &sy);
    }
    free(x);
    free(y);
    return rc < 0 ? rc : n;
}

// Copy of text with the first number after `key` changed in its last digit.
static char* perturb_after(const char* text, const char* key) {
    char* t = strdup(text);
    char* p = strstr(t, key);
    ck_assert_msg(p != NULL, "no %s in the metrics", key);
    p += strlen(key);
    char* last = NULL;
    for (; *p && *p != ',' && *p != '}'; p++)
        if (*p >= '0' && *p <= '9') last = p;
    ck_assert(last != NULL);
    *last = *last == '9' ? '8' : (char)(*last + 1);
    return t;
}

START_TEST(test_determinism) {
    // Two runs with the same config and seed, one on 1 thread and one on 2: every loss, learning
    // rate, gradient norm and diagnostic of metrics.jsonl must agree exactly (results do not
    // depend on the thread count); only the wall-clock fields may differ.
    setup_once();
    char a[1100], b[1100], pa[1200], pb[1200], extra[1400], extra2[1500], what[4096];
    snprintf(a, sizeof(a), "%s/detA", test_tmpdir());
    snprintf(b, sizeof(b), "%s/detB", test_tmpdir());
    snprintf(extra, sizeof(extra),
             "max_steps=8 eval_every=4 eval_steps=2 metrics_every=4 "
             "seed=11 shuffle=1 val_data=%s",
             g_val);
    snprintf(extra2, sizeof(extra2), "%s threads=2", extra);
    ck_assert_int_eq(run_train(a, extra), 0);
    ck_assert_int_eq(run_train(b, extra2), 0);
    snprintf(pa, sizeof(pa), "%s/metrics.jsonl", a);
    snprintf(pb, sizeof(pb), "%s/metrics.jsonl", b);
    char* x = slurp(pa);
    char* y = slurp(pb);
    MetricCounts mc;
    int n = metrics_compare(x, y, what, sizeof(what), &mc);
    ck_assert_msg(n >= 0, "the runs differ: %s", what);
    // the comparison covered what must be reproduced: 8 training steps with loss and norm,
    // the evaluations (steps 4, 8 and the final one), the diagnostics at steps 4 and 8
    // (entropy, sink rate, kurtosis, per-head gradient norms)
    ck_assert_int_ge(n, 10);
    ck_assert_int_eq(mc.train_loss, 8);
    ck_assert_int_ge(mc.val_loss, 2);
    ck_assert_int_ge(mc.grad_norm, 8);
    ck_assert_int_ge(mc.head_grad, 2);
    ck_assert_int_ge(mc.entropy, 2);
    ck_assert_int_ge(mc.sink_rate, 2);
    ck_assert_int_ge(mc.kurtosis, 2);
    // and it can fail: one digit of a loss, a gradient norm or an entropy changed is a
    // difference; a changed timing field is not
    static const char* const must[] = {
        "\"train_loss\":", "\"val_loss\":", "\"grad_norm\":", "\"sink_rate\":", "\"entropy"};
    for (int k = 0; k < 5; k++) {
        char* z = perturb_after(y, must[k]);
        ck_assert_msg(metrics_compare(x, z, what, sizeof(what), &mc) < 0, "%s change missed",
                      must[k]);
        free(z);
    }
    char* z = perturb_after(y, "\"step_ms\":");
    ck_assert_int_eq(metrics_compare(x, z, what, sizeof(what), &mc), n);
    free(z);
    free(x);
    free(y);
}
END_TEST

START_TEST(test_keep_last_prunes) {
    setup_once();
    char run[1100];
    snprintf(run, sizeof(run), "%s/keep", test_tmpdir());
    ck_assert_int_eq(run_train(run, "max_steps=7 checkpoint_every=1 keep_last=2"), 0);
    ck_assert_int_eq(count_files(run, "model_", ".bin"), 2);
    ck_assert_int_eq(count_files(run, "state_", ".bin"), 2);
    ck_assert_int_eq(count_files(run, "model_00000007.bin", NULL), 1);
    ck_assert_int_eq(count_files(run, "model_00000006.bin", NULL), 1);
    ck_assert_int_eq(count_files(run, "model_", ".tmp."), 0);
}
END_TEST

// The last record of a run that stopped on a non-finite value is its "diverged" event: 1 + skips
// steps after the last training record, whose step and loss it repeats as last_finite_step and
// last_finite_loss (a learning-rate sweep reads the divergence from it, scripts/ablate_lr.py).
static void check_divergence_record(const char* run, const char* policy, int skips) {
    char p[1200];
    snprintf(p, sizeof(p), "%s/metrics.jsonl", run);
    char* m = slurp(p);
    const char* ev = strstr(m, "\"event\":\"diverged\"");
    ck_assert_msg(ev != NULL, "no diverged record:\n%s", m);
    ck_assert_ptr_null(strstr(ev + 1, "\"event\":\"diverged\"")); // once
    ck_assert_ptr_null(strchr(strchr(ev, '\n') + 1, '{'));        // and last
    // the last training record before it: its step and loss
    const char *tr = NULL, *q = m;
    while ((q = strstr(q, "\"train_loss\":")) && q < ev)
        tr = q++;
    ck_assert_ptr_nonnull(tr);
    const char* line = tr;
    while (line > m && line[-1] != '\n')
        line--;
    long last_step = atol(strstr(line, "\"step\":") + 7);
    double last_loss = atof(tr + 13);
    const char* ev_line = ev;
    while (ev_line > m && ev_line[-1] != '\n')
        ev_line--;
    ck_assert_int_eq(atol(strstr(ev_line, "\"step\":") + 7), last_step + 1 + skips);
    ck_assert_int_eq(atol(strstr(ev, "\"last_finite_step\":") + 19), last_step);
    ck_assert_double_eq_tol(atof(strstr(ev, "\"last_finite_loss\":") + 19), last_loss,
                            1e-6 * fabs(last_loss));
    ck_assert_msg(isfinite(last_loss) && last_loss > 0, "%s", line);
    char want[64];
    snprintf(want, sizeof(want), "\"nan_policy\":\"%s\"", policy);
    ck_assert_msg(strstr(ev, want) != NULL, "%s", ev);
    free(m);
}

START_TEST(test_nan_policy) {
    setup_once();
    char run[1100], p[1200];
    // a huge learning rate without clipping diverges: weight decay alone multiplies every
    // weight by (1 - lr*wd) = -99 per step
    const char* diverge = "max_steps=60 lr=10 weight_decay=10 grad_clip=0 lr_schedule=constant";
    snprintf(run, sizeof(run), "%s/nanstop", test_tmpdir());
    char extra[512];
    snprintf(extra, sizeof(extra), "%s nan_policy=stop", diverge);
    int rc = run_train(run, extra);
    char* se = out_file(run, "stderr.txt");
    ck_assert_msg(rc == 3, "exit %d: %s", rc, se);
    ck_assert_msg(strstr(se, "non-finite"), "%s", se);
    free(se);
    check_divergence_record(run, "stop", 0);
    snprintf(run, sizeof(run), "%s/nanskip", test_tmpdir());
    snprintf(extra, sizeof(extra), "%s nan_policy=skip max_skips=3", diverge);
    rc = run_train(run, extra);
    ck_assert_int_eq(rc, 3); // every later step is non-finite too: stops after 3 skips
    snprintf(p, sizeof(p), "%s/metrics.jsonl", run);
    char* m = slurp(p);
    int skips = 0;
    for (char* q = m; (q = strstr(q, "\"event\":\"skipped_nonfinite\"")); q++)
        skips++;
    ck_assert_msg(skips == 3, "%d skip records:\n%s", skips, m);
    free(m);
    check_divergence_record(run, "skip", 3);
}
END_TEST

// Bytes the allocator takes for a buffer of `bytes` (a multiple of 64 here): rounded up to whole
// 2 MiB pages, except in the ASan build, which keeps exact sizes (common/util.c).
static double pages_2mib(double bytes) {
#if defined(__SANITIZE_ADDRESS__)
    return bytes;
#else
    const double page = 2097152.0;
    return ceil(bytes / page) * page;
#endif
}

START_TEST(test_memory_estimate) {
    // GPT-2 124M (llm.c: 124,475,904 parameters with the padded vocabulary), AdamW (2 arrays)
    Config c;
    config_defaults(&c);
    c.n_layer = 12;
    c.n_head = 12;
    c.n_embd = 768;
    c.block_size = 1024;
    c.vocab_size = 50257;
    c.seq_len = 1024;
    char err[2048];
    GPT2* m = callocCheck(1, sizeof(GPT2)); // attention set up, nothing allocated
    ck_assert_msg(gpt2_setup_attention(m, &c, err, sizeof(err)) == 0, "%s", err);
    GPT2Config g;
    ck_assert_msg(gpt2_config_from(&g, &c, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(g.padded_vocab, 50304);
    MemEstimate e;
    memory_estimate(&e, m, &g, 4, 1024, 2, MM_FP32, 2);
    ck_assert(m->params == NULL && m->num_params == 0); // the estimate left m alone
    free(m);
    // each buffer as the allocator takes it: whole 2 MiB pages from 2 MiB up (exact under ASan)
    ck_assert_double_eq(e.params, pages_2mib(4.0 * 124475904));
    ck_assert_double_eq(e.optim, pages_2mib(2 * 4.0 * 124475904)); // one buffer, both moments
    ck_assert(e.bf16 == 0);                                        // fp32: no bf16 copies
    ck_assert(e.attn == 4.0 * 12 * 4 * 12 * 1024 * 1024);          // (L, B, NH, T, T) floats
    ck_assert(e.logits == 4.0 * 4 * 1024 * 50304);
    ck_assert(e.total > e.params * 4 + e.attn + e.logits);
    ck_assert(e.total < 20e9);
    ck_assert_int_eq(memory_check(&e, 64e9, err, sizeof(err)), 0);
    ck_assert_int_eq(memory_check(&e, 2e9, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "GiB") && strstr(err, "batch_size") && strstr(err, "seq_len"), "%s",
                  err);
    // the trainer refuses before writing anything (exit 2)
    setup_once();
    char run[1100];
    snprintf(run, sizeof(run), "%s/nomem", test_tmpdir());
    pid_t pid = spawn_train(run, "max_steps=5", 0, "ATTNLAB_MEM_AVAILABLE=100000");
    int rc = wait_rc(pid);
    char* se = out_file(run, "stderr.txt");
    ck_assert_msg(rc == 2 && strstr(se, "needs about"), "exit %d: %s", rc, se);
    free(se);
    ck_assert(!util_file_exists(run));
}
END_TEST

// Training on a trivially predictable shard, then on random tokens: the first random batch
// is a loss spike (> 3x the running median) and is logged.
START_TEST(test_loss_spike_logged) {
    setup_once();
    const char* dir = test_tmpdir();
    char sdir[1100], p1[1200], p2[1200], run[1100], extra[1400], err[2048];
    snprintf(sdir, sizeof(sdir), "%s/spike_data", dir);
    ck_assert(util_mkdirs(sdir, err, sizeof(err)) == 0);
    const size_t BT = 4 * 16, n1 = BT * 30 + 1, n2 = BT * 10 + 1; // 30 and 10 batches
    uint16_t* t = mallocCheck(sizeof(uint16_t) * n1);
    for (size_t i = 0; i < n1; i++)
        t[i] = (uint16_t)('a' + i % 2);
    snprintf(p1, sizeof(p1), "%s/s_000000.bin", sdir);
    ck_assert(shard_write(p1, t, n1, err, sizeof(err)) == 0);
    Rng r;
    rng_seed(&r, 8);
    for (size_t i = 0; i < n2; i++)
        t[i] = (uint16_t)rng_below(&r, 256);
    snprintf(p2, sizeof(p2), "%s/s_000001.bin", sdir);
    ck_assert(shard_write(p2, t, n2, err, sizeof(err)) == 0);
    free(t);
    snprintf(run, sizeof(run), "%s/spike", dir);
    snprintf(extra, sizeof(extra),
             "max_steps=33 lr=0.01 lr_schedule=constant train_data=%s/s_*.bin", sdir);
    ck_assert_int_eq(run_train(run, extra), 0);
    char mp[1200];
    snprintf(mp, sizeof(mp), "%s/metrics.jsonl", run);
    char* m = slurp(mp);
    char* se = out_file(run, "stderr.txt");
    ck_assert_msg(strstr(m, "{\"step\":31,\"event\":\"loss_spike\""), "%s", m);
    ck_assert_msg(strstr(se, "loss spike at step 31"), "%s", se);
    free(m);
    free(se);
}
END_TEST

static Suite* reliability_suite(void) {
    Suite* s = suite_create("reliability");
    TCase* tc = tcase_create("core");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_memory_estimate);
    tcase_add_test(tc, test_keep_last_prunes);
    tcase_add_test(tc, test_corrupt_files_rejected_and_fallback);
    tcase_add_test(tc, test_disk_full_keeps_previous);
    tcase_add_test(tc, test_nan_policy);
    tcase_add_test(tc, test_determinism);
    tcase_add_test(tc, test_loss_spike_logged);
    tcase_add_test(tc, test_kill9_then_resume);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(reliability_suite)
