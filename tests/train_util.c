// tests/train_util.c: driving BUILD/train from a suite (train_util.h).
#include "tests/train_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/rng.h"
#include "common/util.h"
#include "data/shard.h"
#include "tests/testutil.h"

const char* tu_dir(void) {
    static char dir[512];
    if (!dir[0]) util_strlcpy(dir, test_tmpdir(), sizeof(dir));
    return dir;
}

const char* tu_data(void) {
    static char args[2600];
    if (args[0]) return args;
    char err[2048], train[1200], val[1200], dir[1100];
    snprintf(dir, sizeof(dir), "%s/data", tu_dir());
    ck_assert(util_mkdirs(dir, err, sizeof(err)) == 0);
    size_t ntok = 20000;
    uint16_t* t = mallocCheck(sizeof(uint16_t) * ntok);
    Rng r;
    rng_seed(&r, 11);
    for (size_t i = 0; i < ntok; i++)
        t[i] = (uint16_t)(i % 89 == 0 ? 256 : 'a' + (i * 5 + rng_below(&r, 4)) % 26);
    snprintf(train, sizeof(train), "%s/train_000000.bin", dir);
    snprintf(val, sizeof(val), "%s/val_000000.bin", dir);
    ck_assert_msg(shard_write(train, t, ntok, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(shard_write(val, t, 3000, err, sizeof(err)) == 0, "%s", err);
    free(t);
    snprintf(args, sizeof(args), "train_data=%s val_data=%s", train, val);
    return args;
}

pid_t tu_spawn(const char* args, const char* log) {
    char bin[1500], buf[8192], so[1500], se[1500];
    snprintf(bin, sizeof(bin), "%s/train", test_build_dir());
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
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        int fo = open(so, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(se, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0) _exit(126);
        dup2(fo, 1);
        dup2(fe, 2);
        setenv("OMP_NUM_THREADS", "1", 1);
        signal(SIGHUP, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execv(bin, argv);
        _exit(127);
    }
    return pid;
}

int tu_wait(pid_t pid, double secs, const char* what) {
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

pid_t tu_spawn_train(const char* dir, const char* extra) {
    char args[8192], log[1500];
    snprintf(args, sizeof(args), TU_TINY "%s out_dir=%s %s", tu_data(), dir, extra);
    snprintf(log, sizeof(log), "%s.log", dir);
    return tu_spawn(args, log);
}

int tu_train(const char* dir, const char* extra) {
    return tu_wait(tu_spawn_train(dir, extra), 120, extra);
}

char* tu_slurp(const char* path) {
    char err[1300];
    size_t n;
    char* t = util_read_file(path, &n, err, sizeof(err));
    return t ? t : strdup("");
}

char* tu_file_in(const char* dir, const char* name) {
    char p[1500];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return tu_slurp(p);
}

char* tu_log(const char* dir, const char* which) {
    char p[1500];
    snprintf(p, sizeof(p), "%s.log.%s", dir, which);
    return tu_slurp(p);
}

void tu_wait_step(pid_t pid, const char* dir, long step) {
    char key[64];
    snprintf(key, sizeof(key), "{\"step\":%ld,\"train_loss\"", step);
    for (int i = 0; i < 30000; i++) {
        char* m = tu_file_in(dir, "metrics.jsonl");
        int there = strstr(m, key) != NULL;
        free(m);
        if (there || waitpid(pid, NULL, WNOHANG) == pid) return;
        usleep(2000);
    }
}

int tu_count(const char* dir, const char* part) {
    DIR* d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent* e;
    while ((e = readdir(d)))
        n += strstr(e->d_name, part) != NULL;
    closedir(d);
    return n;
}

void tu_copy_dir(const char* from, const char* to) {
    char cmd[4000];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' && cp -a '%s' '%s'", to, from, to);
    ck_assert(system(cmd) == 0);
}

void tu_copy_file(const char* from, const char* to) {
    char cmd[4000];
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
    ck_assert(system(cmd) == 0);
}

void tu_drop_ckpt(const char* dir, long step) {
    char p[1200];
    snprintf(p, sizeof(p), "%s/model_%08ld.bin", dir, step);
    ck_assert_msg(unlink(p) == 0, "%s", p);
    snprintf(p, sizeof(p), "%s/state_%08ld.bin", dir, step);
    ck_assert_msg(unlink(p) == 0, "%s", p);
}

double tu_record(const char* jsonl, long step, const char* key) {
    char head[64], k[80];
    snprintf(head, sizeof(head), "{\"step\":%ld,\"train_loss\"", step);
    snprintf(k, sizeof(k), "\"%s\":", key);
    const char* p = strstr(jsonl, head);
    if (!p) return NAN;
    const char* e = strchr(p, '\n');
    const char* v = strstr(p, k);
    if (!v || (e && v > e)) return NAN;
    return strtod(v + strlen(k), NULL);
}
