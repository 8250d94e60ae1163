// model/run/folder.c: one run at a time per out_dir (folder.h): the lock, the refusal (or
// clearing) of a folder that holds a run, the warmup cap of short runs.
#include "model/run/folder.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dist.h"
#include "common/json.h"
#include "common/util.h"

// ---------------------------------------------------------------------------------------------
// the lock

static int g_lock_fd = -1;
static char g_lock_path[1100];

void run_lock_release(void) {
    if (g_lock_fd < 0) return;
    unlink(g_lock_path); // while still holding the lock: a waiting opener then sees another file
    close(g_lock_fd);
    g_lock_fd = -1;
}

// The holder text of a lock file ("pid N on HOST"), newline removed; "" when empty.
static void read_holder(int fd, char* buf, size_t cap) {
    ssize_t n = pread(fd, buf, cap - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
}

// Take OUT/train.lock. 0 (held until run_lock_release or the process ends), or -1 with err
// naming the folder and the pid and host that hold it. A file system without locks: a warning on
// stderr, and 0 without a lock.
static int run_lock_take(const char* dir, char* err, size_t errcap) {
    ASSERT(g_lock_fd < 0);
    snprintf(g_lock_path, sizeof(g_lock_path), "%s/%s", dir, RUN_LOCK_FILE);
    for (int attempt = 0; attempt < 16; attempt++) {
        int fd = open(g_lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            snprintf(err, errcap, "%s: cannot open: %s", g_lock_path, strerror(errno));
            return -1;
        }
        char holder[256];
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            const int e = errno;
            read_holder(fd, holder, sizeof(holder));
            close(fd);
            if (e == EWOULDBLOCK) {
                snprintf(err, errcap,
                         "out_dir '%s' is in use: another ./train (%s) holds %s; wait for it to "
                         "end (or stop it), or train into another out_dir",
                         dir, holder[0] ? holder : "pid not yet written", g_lock_path);
                return -1;
            }
            if (e == ENOLCK || e == EOPNOTSUPP || e == ENOSYS || e == EINVAL) {
                fprintf(stderr,
                        "attnlab: %s: this file system has no locks (%s): a second ./train into "
                        "this out_dir would not be refused\n",
                        g_lock_path, strerror(e));
                return 0;
            }
            snprintf(err, errcap, "%s: cannot lock: %s", g_lock_path, strerror(e));
            return -1;
        }
        // the file locked must still be the one at the path: a run that ends deletes its lock
        // file while it holds it, so an opener that locks after that holds a deleted file
        struct stat a, b;
        if (fstat(fd, &a) != 0 || stat(g_lock_path, &b) != 0 || a.st_ino != b.st_ino ||
            a.st_dev != b.st_dev) {
            close(fd);
            continue;
        }
        read_holder(fd, holder, sizeof(holder));
        if (holder[0])
            fprintf(stderr,
                    "attnlab: %s was left by %s, which no longer holds it (that run was killed "
                    "or crashed): taking the folder over\n",
                    g_lock_path, holder);
        char host[128] = "?", line[256];
        if (gethostname(host, sizeof(host)) != 0) util_strlcpy(host, "?", sizeof(host));
        host[sizeof(host) - 1] = '\0';
        int n = snprintf(line, sizeof(line), "pid %ld on %s\n", (long)getpid(), host);
        if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)n, 0) != n) {
            snprintf(err, errcap, "%s: write failed: %s", g_lock_path, strerror(errno));
            close(fd);
            return -1;
        }
        g_lock_fd = fd;
        util_set_exit_hook(run_lock_release);
        return 0;
    }
    snprintf(err, errcap, "%s: cannot lock: the file keeps being replaced", g_lock_path);
    return -1;
}

// ---------------------------------------------------------------------------------------------
// a new run into a used folder

// Is name a checkpoint file, model_NNNNNNNN.bin or state_NNNNNNNN.bin? Its step into *step.
static int ckpt_name(const char* name, long* step) {
    if (strlen(name) != 18 || (strncmp(name, "model_", 6) && strncmp(name, "state_", 6)) ||
        strcmp(name + 14, ".bin") != 0)
        return 0;
    for (int i = 6; i < 14; i++)
        if (name[i] < '0' || name[i] > '9') return 0;
    *step = strtol(name + 6, NULL, 10);
    return 1;
}

static int regular(const char* path, off_t* size) {
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    if (size) *size = st.st_size;
    return 1;
}

typedef struct {
    char listed[1200];
    int nckpt, ndump;
    long lo, hi;
} RunFiles;

// Walk dir's run files; delete them when `remove`. The number found (or removed); -1 with err
// when one cannot be removed.
static int run_files(const char* dir, RunFiles* rf, int remove, char* err, size_t errcap) {
    memset(rf, 0, sizeof(*rf));
    static const char* const LOGS[] = {"config.conf", "metrics.jsonl", "main.log"};
    int n = 0, eno = 0;
    char p[1400];
    for (int i = 0; i < 3; i++) {
        off_t size = 0;
        snprintf(p, sizeof(p), "%s/%s", dir, LOGS[i]);
        if (!regular(p, &size) || (i > 0 && size == 0)) continue;
        if (remove && unlink(p) != 0) {
            eno = errno;
            goto fail;
        }
        size_t l = strlen(rf->listed);
        snprintf(rf->listed + l, sizeof(rf->listed) - l, "%s%s", n ? ", " : "", LOGS[i]);
        n++;
    }
    for (int pass = 0; pass < 2; pass++) { // the checkpoints, then the attention dumps in attn/
        if (pass == 1) snprintf(p, sizeof(p), "%s/attn", dir);
        DIR* d = opendir(pass ? p : dir);
        if (!d) continue;
        struct dirent* e;
        while ((e = readdir(d))) {
            long step = 0;
            char f[1400];
            snprintf(f, sizeof(f), "%s/%s%s", dir, pass ? "attn/" : "", e->d_name);
            if (pass == 0 ? !ckpt_name(e->d_name, &step) : strncmp(e->d_name, "step_", 5) != 0)
                continue;
            if (!regular(f, NULL)) continue;
            if (remove && unlink(f) != 0) {
                eno = errno;
                closedir(d);
                snprintf(p, sizeof(p), "%s", f);
                goto fail;
            }
            if (pass == 1) {
                rf->ndump++;
            } else {
                if (rf->nckpt++ == 0 || step < rf->lo) rf->lo = step;
                if (rf->nckpt == 1 || step > rf->hi) rf->hi = step;
            }
            n++;
        }
        closedir(d);
    }
    size_t l = strlen(rf->listed);
    if (rf->nckpt && rf->lo == rf->hi)
        snprintf(rf->listed + l, sizeof(rf->listed) - l, "%s%d checkpoint file%s of step %ld",
                 l ? ", " : "", rf->nckpt, rf->nckpt > 1 ? "s" : "", rf->lo);
    else if (rf->nckpt)
        snprintf(rf->listed + l, sizeof(rf->listed) - l, "%s%d checkpoint files (steps %ld to %ld)",
                 l ? ", " : "", rf->nckpt, rf->lo, rf->hi);
    l = strlen(rf->listed);
    if (rf->ndump)
        snprintf(rf->listed + l, sizeof(rf->listed) - l, "%s%d attention dump files in attn/",
                 l ? ", " : "", rf->ndump);
    return n;
fail:
    snprintf(err, errcap, "overwrite = 1: cannot delete %s: %s", p, strerror(eno));
    return -1;
}

// A new run into dir: 0 when dir holds no run's files, or when overwrite is 1 and they were
// deleted (said on stdout); -1 with err listing them and the three ways on (resume=1,
// overwrite=1, another out_dir).
static int run_folder_check_new(const char* dir, int overwrite, char* err, size_t errcap) {
    RunFiles rf;
    int n = run_files(dir, &rf, 0, err, errcap);
    if (n <= 0) return n;
    if (!overwrite) {
        snprintf(err, errcap,
                 "out_dir '%s' holds a run (%s); a new run would mix its files with that one's. "
                 "Continue it with resume=1, start over with overwrite=1 (deletes those files), "
                 "or train into another out_dir",
                 dir, rf.listed);
        return -1;
    }
    char listed[sizeof(rf.listed)];
    util_strlcpy(listed, rf.listed, sizeof(listed));
    if (run_files(dir, &rf, 1, err, errcap) < 0) return -1;
    printf("overwrite = 1: deleted the earlier run in %s (%s)\n", dir, listed);
    fflush(stdout);
    return 0;
}

int run_folder_open(const Config* c, char* err, size_t errcap) {
    return run_lock_take(c->out_dir, err, errcap) ||
                   (!c->resume && run_folder_check_new(c->out_dir, c->overwrite, err, errcap))
               ? -1
               : 0;
}

// ---------------------------------------------------------------------------------------------
// short runs

int run_args_set(int argc, char** argv, int first, const char* key) {
    const size_t n = strlen(key);
    for (int i = first; i < argc; i++) {
        const char* a = argv[i];
        if (strncmp(a, "--", 2) == 0) a += 2;
        while (*a == ' ' || *a == '\t')
            a++;
        if (strncmp(a, key, n) != 0) continue;
        const char* q = a + n;
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q == '=') return 1;
    }
    return 0;
}

void run_fit_warmup(Config* c, int on_cmdline) {
    if (on_cmdline || c->max_steps <= 0 || c->warmup_steps <= c->max_steps) return;
    if (dist_is_root())
        fprintf(stderr,
                "attnlab: note: warmup_steps = %d (not set on the command line) is more than "
                "max_steps = %d: the warmup is capped at %d steps for this run\n",
                c->warmup_steps, c->max_steps, c->max_steps);
    c->warmup_steps = c->max_steps;
}

// ---------------------------------------------------------------------------------------------
// resumed records

int run_folder_resume_records(const char* dir, long start, char* err, size_t errcap) {
    char p[1100];
    snprintf(p, sizeof(p), "%s/metrics.jsonl", dir);
    return jsonl_keep_steps(p, start, "\"event\":\"resume_change\"", err, errcap);
}
