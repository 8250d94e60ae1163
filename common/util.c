// common/util.c: implementation of util.h (errors, allocation, time, crc32, atomic writes).
#include "common/util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
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

void util_exit(int code) {
    // a fatal error ends the process here: flush stdio and leave without atexit handlers (so
    // leak checkers do not report the buffers an aborted run still held)
    fflush(NULL);
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

size_t util_floats_bytes(size_t n) {
    size_t bytes = (n ? n : 1) * sizeof(float);
    return (bytes + 63) & ~(size_t)63;
}

float* util_alloc_floats(size_t n, const char* file, int line) {
    size_t bytes = util_floats_bytes(n);
    float* p = aligned_alloc(64, bytes);
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

char* util_read_file(const char* path, size_t* len, char* err, size_t errcap) {
    FILE* f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errcap, "%s: cannot open: %s", path, strerror(errno));
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
        if (r == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, errcap, "%s: read error", path);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
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
