// common/util.c: implementation of util.h (errors, allocation, time, crc32, atomic writes and the
// checkpoint trailer, the shared number parser, bounded reads of input files).
#include "common/util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

void util_assert_fail(const char* expr, const char* file, int line) {
    fprintf(stderr, "attnlab: internal error: assertion `%s` failed at %s:%d\n", expr, file, line);
    abort();
}

// What die() prints after "attnlab: " (util_set_die_prefix); empty in a single process.
static char g_die_prefix[64];

void util_set_die_prefix(const char* prefix) {
    util_strlcpy(g_die_prefix, prefix ? prefix : "", sizeof(g_die_prefix));
}

void die(int code, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("attnlab: ", stderr);
    fputs(g_die_prefix, stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    util_exit(code);
}

static void (*g_exit_hook)(void);

void util_set_exit_hook(void (*hook)(void)) {
    g_exit_hook = hook;
}

void util_exit(int code) {
    // a fatal error ends the process here: flush stdio and leave without atexit handlers (so
    // leak checkers do not report the buffers an aborted run still held)
    fflush(NULL);
    if (g_exit_hook) g_exit_hook();
#ifdef ATTNLAB_COVERAGE
    // coverage builds (scripts/coverage): _exit skips gcov's exit handler, so write the counts
    // first, or every error path that ends here would count as never run
    extern void __gcov_dump(void);
    __gcov_dump();
#endif
    _exit(code);
}

// Bytes handed out by the checked allocators (util_alloc_total).
static size_t g_alloc_total;

static void count_alloc(size_t bytes) {
    __atomic_fetch_add(&g_alloc_total, bytes, __ATOMIC_RELAXED);
}

size_t util_alloc_total(void) {
    return __atomic_load_n(&g_alloc_total, __ATOMIC_RELAXED);
}

void* util_malloc(size_t n, const char* file, int line) {
    void* p = malloc(n ? n : 1);
    if (!p) die(1, "out of memory allocating %zu bytes at %s:%d", n, file, line);
    count_alloc(n ? n : 1);
    return p;
}

void* util_calloc(size_t n, size_t sz, const char* file, int line) {
    void* p = calloc(n ? n : 1, sz ? sz : 1);
    if (!p) die(1, "out of memory allocating %zu x %zu bytes at %s:%d", n, sz, file, line);
    count_alloc((n ? n : 1) * (sz ? sz : 1));
    return p;
}

void* util_realloc(void* p, size_t n, const char* file, int line) {
    void* q = realloc(p, n ? n : 1);
    if (!q) die(1, "out of memory reallocating %zu bytes at %s:%d", n, file, line);
    count_alloc(n ? n : 1);
    return q;
}

// Buffers of 2 MiB or more are whole 2 MiB pages, aligned to one, and asked of the kernel as
// transparent huge pages (MADV_HUGEPAGE: where THP is "madvise", the default of many
// distributions, nothing else gets them). The parameters, gradients, moments and activations then
// take one TLB entry per 2 MiB: measured 6-7% off a GPT-2 124M step in fp32 and bf16
// (docs/performance.md). Smaller buffers stay 64-byte aligned. Values are never affected. Under
// AddressSanitizer (make asan) nothing is rounded to 2 MiB, so a write one past a large buffer
// still lands outside its allocation and is reported.
#if defined(__SANITIZE_ADDRESS__)
#define HUGE_PAGES 0
#else
#define HUGE_PAGES 1
#endif
#define HUGE_PAGE ((size_t)2 << 20)

size_t util_floats_bytes(size_t n) {
    size_t bytes = (n ? n : 1) * sizeof(float);
    if (HUGE_PAGES && bytes >= HUGE_PAGE) return (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    return (bytes + 63) & ~(size_t)63;
}

float* util_alloc_floats(size_t n, const char* file, int line) {
    size_t bytes = util_floats_bytes(n);
    int huge = HUGE_PAGES && bytes >= HUGE_PAGE;
    float* p = aligned_alloc(huge ? HUGE_PAGE : 64, bytes);
#ifdef MADV_HUGEPAGE
    if (p && huge) (void)madvise(p, bytes, MADV_HUGEPAGE); // advice only: a refusal costs speed
#endif
    if (!p)
        die(1, "out of memory allocating %zu floats (%.1f MiB) at %s:%d", n,
            (double)bytes / 1048576.0, file, line);
    memset(p, 0, bytes);
    count_alloc(bytes);
    return p;
}

int util_strlcpy(char* dst, const char* src, size_t cap) {
    size_t n = strlen(src);
    if (cap == 0) return n > 0;
    size_t m = n < cap - 1 ? n : cap - 1;
    memcpy(dst, src, m);
    dst[m] = '\0';
    return m < n;
}

double util_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void util_format_duration(char* buf, size_t cap, double s) {
    if (!(s >= 0) || s > 1e8) {
        snprintf(buf, cap, "?");
    } else if (s >= 3600) {
        int h = (int)(s / 3600);
        snprintf(buf, cap, "%dh%02dm", h, (int)((s - 3600.0 * h) / 60));
    } else if (s >= 60) {
        int m = (int)(s / 60);
        snprintf(buf, cap, "%dm%02ds", m, (int)(s - 60.0 * m));
    } else {
        snprintf(buf, cap, "%.1fs", s);
    }
}

uint32_t util_crc32(uint32_t crc, const void* data, size_t n) {
    const unsigned char* p = data;
    uLong c = crc;
    while (n > 0) { // zlib takes uInt lengths
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return (uint32_t)c;
}

// ----------------------------------------------------------------------------
// atomic writes

int atomic_open(AtomicFile* af, const char* path) {
    memset(af, 0, sizeof(*af));
    if (util_strlcpy(af->path, path, sizeof(af->path))) {
        snprintf(af->err, sizeof(af->err), "%s: path too long", path);
        af->failed = 1;
        return -1;
    }
    snprintf(af->tmp, sizeof(af->tmp), "%s.tmp.%ld", path, (long)getpid());
    af->f = fopen(af->tmp, "wb");
    if (!af->f) {
        snprintf(af->err, sizeof(af->err), "%s: cannot create: %s", af->tmp, strerror(errno));
        af->failed = 1;
        return -1;
    }
    af->crc = (uint32_t)crc32(0L, Z_NULL, 0);
    return 0;
}

int atomic_write(AtomicFile* af, const void* data, size_t n) {
    if (af->failed) return -1;
    if (n && fwrite(data, 1, n, af->f) != n) {
        snprintf(af->err, sizeof(af->err), "%s: write failed: %s", af->path, strerror(errno));
        af->failed = 1;
        return -1;
    }
    af->crc = util_crc32(af->crc, data, n);
    return 0;
}

void atomic_abort(AtomicFile* af) {
    if (af->f) fclose(af->f);
    af->f = NULL;
    if (af->tmp[0]) unlink(af->tmp);
    af->failed = 1;
}

static int fsync_dir_of(const char* path) {
    char buf[1024];
    util_strlcpy(buf, path, sizeof(buf));
    const char* dir = dirname(buf);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int atomic_commit(AtomicFile* af) {
    if (af->failed) {
        atomic_abort(af);
        return -1;
    }
    int bad = 0;
    if (fflush(af->f) != 0 || fsync(fileno(af->f)) != 0) bad = 1;
    if (fclose(af->f) != 0) bad = 1;
    af->f = NULL;
    if (bad) {
        snprintf(af->err, sizeof(af->err), "%s: write failed: %s", af->path, strerror(errno));
        atomic_abort(af);
        return -1;
    }
    if (rename(af->tmp, af->path) != 0) {
        snprintf(af->err, sizeof(af->err), "%s: rename failed: %s", af->path, strerror(errno));
        atomic_abort(af);
        return -1;
    }
    af->tmp[0] = '\0';
    fsync_dir_of(af->path); // best effort: some file systems refuse directory fsync
    return 0;
}

// the checkpoint trailer (util.h)

int atomic_finish(AtomicFile* af, char* err, size_t errcap) {
    uint32_t tr[2] = {af->crc, UTIL_END_MAGIC};
    atomic_write(af, tr, sizeof(tr));
    if (atomic_commit(af)) {
        snprintf(err, errcap, "%s", af->err);
        return -1;
    }
    return 0;
}

int util_verify_trailer(const char* path, size_t min_size, char* err, size_t errcap) {
    FILE* f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errcap, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || (size_t)st.st_size < min_size + 8) {
        fclose(f);
        snprintf(err, errcap, "%s: truncated (%lld bytes)", path, (long long)st.st_size);
        return -1;
    }
    size_t body = (size_t)st.st_size - 8;
    uint32_t crc = util_crc32(0, NULL, 0);
    size_t bufn = body < (1u << 20) ? body + 1 : (1u << 20);
    char* buf = mallocCheck(bufn);
    size_t left = body;
    while (left > 0) {
        size_t n = left < bufn ? left : bufn;
        if (fread(buf, 1, n, f) != n) break;
        crc = util_crc32(crc, buf, n);
        left -= n;
    }
    uint32_t tr[2] = {0, 0};
    int ok = left == 0 && fread(tr, 4, 2, f) == 2;
    free(buf);
    fclose(f);
    if (!ok) {
        snprintf(err, errcap, "%s: read error", path);
        return -1;
    }
    if (tr[1] != UTIL_END_MAGIC) {
        snprintf(err, errcap, "%s: missing end marker (truncated or not an attnlab file)", path);
        return -1;
    }
    if (tr[0] != crc) {
        snprintf(err, errcap,
                 "%s: checksum mismatch (stored %08x, computed %08x): the file is "
                 "corrupted",
                 path, tr[0], crc);
        return -1;
    }
    return 0;
}

static void fmt_bytes(char* buf, size_t cap, double b) {
    if (b >= 1 << 30)
        snprintf(buf, cap, "%.1f GiB", b / (1 << 30));
    else if (b >= 1 << 20)
        snprintf(buf, cap, "%.1f MiB", b / (1 << 20));
    else
        snprintf(buf, cap, "%.0f bytes", b);
}

int util_check_input(FILE* f, const char* path, size_t max, const char* what, char* err,
                     size_t errcap) {
    struct stat st;
    if ((f ? fstat(fileno(f), &st) : stat(path, &st)) != 0) {
        snprintf(err, errcap, "%s: cannot stat: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                           : S_ISCHR(st.st_mode)  ? "a character device"
                           : S_ISBLK(st.st_mode)  ? "a block device"
                           : S_ISFIFO(st.st_mode) ? "a pipe"
                                                  : "not a file";
        snprintf(err, errcap, "%s: not a regular file (%s); a %s must be a regular file", path,
                 kind, what);
        return -1;
    }
    if ((uintmax_t)st.st_size > (uintmax_t)max) {
        char a[32], b[32];
        fmt_bytes(a, sizeof(a), (double)st.st_size);
        fmt_bytes(b, sizeof(b), (double)max);
        snprintf(err, errcap, "%s: %s, more than the %s a %s may hold", path, a, b, what);
        return -1;
    }
    return 0;
}

char* util_read_file_max(const char* path, size_t max, size_t* len, char* err, size_t errcap) {
    // checked before the open too: opening a FIFO for reading would wait for a writer
    if (util_file_exists(path) && util_check_input(NULL, path, max, "text input", err, errcap))
        return NULL;
    FILE* f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errcap, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    if (util_check_input(f, path, max, "text input", err, errcap)) {
        fclose(f);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char* buf = mallocCheck(cap);
    for (;;) {
        if (n + 1 >= cap) {
            cap *= 2;
            buf = reallocCheck(buf, cap);
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0 || n > max) break; // a file that grows while it is read stops at the cap
    }
    int bad = ferror(f);
    fclose(f);
    if (bad || n > max) {
        if (bad)
            snprintf(err, errcap, "%s: read error", path);
        else
            snprintf(err, errcap, "%s: grew past %zu bytes while it was read", path, max);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

char* util_read_file(const char* path, size_t* len, char* err, size_t errcap) {
    return util_read_file_max(path, UTIL_READ_MAX, len, err, errcap);
}

int util_remove_stale_temps(const char* dir) {
    DIR* d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent* e;
    while ((e = readdir(d))) {
        // NAME.tmp.PID (atomic_open's temp files), PID all digits up to the end of the name
        const char* t = strstr(e->d_name, ".tmp.");
        while (t && strstr(t + 1, ".tmp."))
            t = strstr(t + 1, ".tmp.");
        if (!t || t == e->d_name || !t[5]) continue;
        const char* q = t + 5;
        while (isdigit((unsigned char)*q))
            q++;
        if (*q) continue;
        long pid = strtol(t + 5, NULL, 10);
        if (pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char p[1400];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        if (unlink(p) == 0) n++;
    }
    closedir(d);
    return n;
}

int util_fcheck(FILE* f, const char* path, char* err, size_t errcap) {
    errno = 0;
    if (fflush(f) == 0 && !ferror(f)) return 0;
    snprintf(err, errcap, "%s: write failed: %s", path, errno ? strerror(errno) : "I/O error");
    return -1;
}

int util_fclose_checked(FILE* f, const char* path, char* err, size_t errcap) {
    int bad = util_fcheck(f, path, err, errcap);
    errno = 0;
    if (fclose(f) != 0 && !bad) {
        snprintf(err, errcap, "%s: write failed: %s", path, errno ? strerror(errno) : "I/O error");
        bad = -1;
    }
    return bad ? -1 : 0;
}

int util_mkdirs(const char* path, char* err, size_t errcap) {
    char buf[1024];
    if (util_strlcpy(buf, path, sizeof(buf))) {
        snprintf(err, errcap, "%s: path too long", path);
        return -1;
    }
    for (char* p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
                snprintf(err, errcap, "%s: cannot create directory: %s", buf, strerror(errno));
                return -1;
            }
            *p = c;
            if (c == '\0') break;
        }
    }
    return 0;
}

int util_file_exists(const char* path) {
    struct stat st;
    return stat(path, &st) == 0;
}

long util_cli_long(const char* what, const char* s, long lo, long hi) {
    char* end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || isspace((unsigned char)*s) || *end != '\0' || errno == ERANGE || v < lo ||
        v > hi)
        die(EXIT_USAGE, "%s: '%s' is not an integer in [%ld, %ld]", what, s, lo, hi);
    return v;
}

void util_catch_signals(void (*handler)(int)) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1};
    for (int i = 0; i < 4; i++)
        if (sigaction(sigs[i], NULL, &old) == 0 &&
            !(sigs[i] == SIGHUP && old.sa_handler == SIG_IGN))
            sigaction(sigs[i], &sa, NULL);
}

int util_parse_double(const char* s, double* out) {
    if (!*s) return -1;
    for (const char* p = s; *p; p++) // plain decimal notation only: no hex, inf or nan
        if (!isdigit((unsigned char)*p) && !strchr("+-.eE", *p)) return -1;
    char* end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

double util_cli_double(const char* what, const char* s, double lo, double hi) {
    double v;
    if (util_parse_double(s, &v) != 0 || !(v >= lo && v <= hi))
        die(EXIT_USAGE, "%s: '%s' is not a number in [%g, %g]", what, s, lo, hi);
    return v;
}

void util_print_peak_rss(void) {
    FILE* f = fopen("/proc/self/status", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof(line), f)) {
        long kb;
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) printf("peak RSS: %.1f MiB\n", kb / 1024.0);
    }
    fclose(f);
}
