// common/peak.c: the stable matmul peak behind MFU: the 90th percentile of many short trials
// with their median and spread, cached per machine and configuration (peak.h).
#include "common/peak.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#include "common/cpuinfo.h"
#include "common/matmul.h"
#include "common/util.h"

#define PEAK_BATCH 33 // trials per mm_measure_peak_trials call (its first one is not counted)

static int cmp_double(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

void peak_stats_of(double* rates, int n, PeakStats* out) {
    ASSERT(n >= 1);
    qsort(rates, (size_t)n, sizeof(double), cmp_double);
    out->min = rates[0];
    out->max = rates[n - 1];
    out->peak = rates[(9 * (n - 1)) / 10];
    out->median = n % 2 ? rates[n / 2] : 0.5 * (rates[n / 2 - 1] + rates[n / 2]);
}

void peak_key(char* buf, size_t cap, int nthreads, const char* precision_info) {
    char cpu[256], flags[256];
    cpuinfo_describe(cpu, sizeof(cpu), flags, sizeof(flags));
    struct utsname u;
    const char* rel = uname(&u) == 0 ? u.release : "unknown";
    // "trial=pinned": the trials pin their threads (matmul.h); a figure cached by the unpinned
    // trial, which could be half the machine's, is not reused
    snprintf(buf, cap, "cpu=%s; flags=%s; threads=%d; precision=%s; linux=%s; trial=pinned", cpu,
             flags, nthreads, precision_info, rel);
    for (char* p = buf; *p; p++) // one line in the cache file
        if (*p == '\n' || *p == '\r') *p = ' ';
}

int peak_cache_path(char* buf, size_t cap, const char* key) {
    const char *d = getenv("ATTNLAB_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    char dir[900];
    buf[0] = '\0';
    if (d && *d) {
        if (strcmp(d, "off") == 0) return 1;
        snprintf(dir, sizeof(dir), "%s", d);
    } else if (x && *x) {
        snprintf(dir, sizeof(dir), "%s/attnlab", x);
    } else if (h && *h) {
        snprintf(dir, sizeof(dir), "%s/.cache/attnlab", h);
    } else {
        return 1;
    }
    uint64_t hash = 14695981039346656037ull; // FNV-1a 64
    for (const unsigned char* p = (const unsigned char*)key; *p; p++)
        hash = (hash ^ *p) * 1099511628211ull;
    snprintf(buf, cap, "%s/peak-%016llx.txt", dir, (unsigned long long)hash);
    return 0;
}

static char* trim(char* s) {
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

int peak_cache_read(const char* path, const char* key, PeakStats* out, char* err, size_t errcap) {
    if (!util_file_exists(path)) return 0;
    size_t len;
    char rerr[1200];
    char* text = util_read_file_max(path, 1 << 16, &len, rerr, sizeof(rerr));
    if (!text) {
        snprintf(err, errcap, "%s", rerr);
        return -1;
    }
    static const char* const NAMES[] = {"key",        "peak_gflops", "median_gflops",
                                        "min_gflops", "max_gflops",  "trials",
                                        "seconds",    "load",        "measured"};
    enum { NNAMES = 9, TRIALS = 5, LOAD = 7, WHEN = 8 };
    int seen[NNAMES] = {0}, rc = 0, lineno = 0, same_key = 0;
    double v[NNAMES] = {0};
    PeakStats ps;
    memset(&ps, 0, sizeof(ps));
    for (char *line = text, *next; line && rc == 0; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        lineno++;
        char* s = trim(line);
        if (!*s || *s == '#') continue;
        char* eq = strchr(s, '=');
        int k = -1;
        if (eq) {
            *eq = '\0';
            const char* name = trim(s);
            for (int i = 0; i < NNAMES; i++)
                if (strcmp(name, NAMES[i]) == 0) k = i;
        }
        if (k < 0 || seen[k]) {
            snprintf(err, errcap, "%s:%d: %s", path, lineno,
                     !eq     ? "not a 'name = value' line"
                     : k < 0 ? "unknown name"
                             : "repeated name");
            rc = -1;
            break;
        }
        seen[k] = 1;
        const char* val = trim(eq + 1);
        if (k == 0) {
            same_key = strcmp(val, key) == 0;
        } else if (k == WHEN) {
            snprintf(ps.when, sizeof(ps.when), "%s", val);
        } else if (util_parse_double(val, &v[k]) || (k == LOAD ? v[k] < -1 : v[k] <= 0) ||
                   (k == TRIALS && (v[k] > 1e6 || v[k] != (double)(long)v[k]))) {
            snprintf(err, errcap, "%s:%d: '%s' must be a finite %s number, not '%s'", path, lineno,
                     NAMES[k],
                     k == TRIALS ? "positive whole"
                     : k == LOAD ? "(>= -1)"
                                 : "positive",
                     val);
            rc = -1;
        }
    }
    for (int i = 0; i < NNAMES && rc == 0; i++)
        if (!seen[i]) {
            snprintf(err, errcap, "%s: no '%s' line", path, NAMES[i]);
            rc = -1;
        }
    if (rc == 0 && !(v[3] <= v[2] && v[2] <= v[1] && v[1] <= v[4])) {
        snprintf(err, errcap,
                 "%s: min_gflops <= median_gflops <= peak_gflops <= max_gflops does not hold",
                 path);
        rc = -1;
    }
    free(text);
    if (rc < 0) return -1;
    if (!same_key) return 0; // another configuration with the same hash: measure, overwrite
    ps.peak = v[1] * 1e9;
    ps.median = v[2] * 1e9;
    ps.min = v[3] * 1e9;
    ps.max = v[4] * 1e9;
    ps.trials = (int)v[TRIALS];
    ps.seconds = v[6];
    ps.load = v[LOAD];
    ps.cached = 1;
    snprintf(ps.path, sizeof(ps.path), "%s", path);
    *out = ps;
    return 1;
}

int peak_cache_write(const char* path, const char* key, const PeakStats* ps, char* err,
                     size_t errcap) {
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s", path);
    char* slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        if (util_mkdirs(dir, err, errcap)) return -1;
    }
    char text[2048];
    int n = snprintf(text, sizeof(text),
                     "# attnlab matmul peak (common/peak.h): every run with this key uses it for "
                     "MFU; delete this file to measure again\n"
                     "key = %s\npeak_gflops = %.6f\nmedian_gflops = %.6f\nmin_gflops = %.6f\n"
                     "max_gflops = %.6f\ntrials = %d\nseconds = %.3f\nload = %.2f\nmeasured = %s\n",
                     key, ps->peak / 1e9, ps->median / 1e9, ps->min / 1e9, ps->max / 1e9,
                     ps->trials, ps->seconds, ps->load, ps->when);
    if (n < 0 || (size_t)n >= sizeof(text)) {
        snprintf(err, errcap, "%s: the key is too long to cache", path);
        return -1;
    }
    AtomicFile af = {.err = ""};
    if (atomic_open(&af, path) || atomic_write(&af, text, (size_t)n) || atomic_commit(&af)) {
        snprintf(err, errcap, "%s", af.err);
        return -1;
    }
    return 0;
}

static double load_average(void) {
    FILE* f = fopen("/proc/loadavg", "r");
    double l = -1;
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

int peak_get(PeakStats* out, int nthreads, const char* precision_info, char* err, size_t errcap) {
    char key[1024], path[1024];
    memset(out, 0, sizeof(*out));
    peak_key(key, sizeof(key), nthreads, precision_info);
    const int on = peak_cache_path(path, sizeof(path), key) == 0;
    if (on) {
        const int r = peak_cache_read(path, key, out, err, errcap);
        if (r < 0) return -1;
        if (r == 1) return 0;
    }
    double* rates = mallocCheck(sizeof(double) * PEAK_MAX_TRIALS);
    int n = 0;
    out->load = load_average();
    const double t0 = util_now();
    while (n + PEAK_BATCH - 1 <= PEAK_MAX_TRIALS &&
           (n < PEAK_MIN_TRIALS || util_now() - t0 < PEAK_MIN_SECONDS)) {
        mm_measure_peak_trials(nthreads, PEAK_BATCH, rates + n);
        n += PEAK_BATCH - 1;
    }
    out->seconds = util_now() - t0;
    out->trials = n;
    peak_stats_of(rates, n, out);
    free(rates);
    time_t now = time(NULL);
    struct tm tmv;
    if (gmtime_r(&now, &tmv)) strftime(out->when, sizeof(out->when), "%Y-%m-%d %H:%M UTC", &tmv);
    if (!on) return 0;
    char werr[1400];
    if (peak_cache_write(path, key, out, werr, sizeof(werr)))
        fprintf(stderr,
                "attnlab: the matmul peak was not cached (it is measured again next run): "
                "%s\n",
                werr);
    else
        snprintf(out->path, sizeof(out->path), "%s", path);
    return 0;
}

void peak_describe(const PeakStats* ps, char* buf, size_t cap) {
    char load[32] = "";
    if (ps->load >= 0) snprintf(load, sizeof(load), " at load %.2f", ps->load);
    snprintf(buf, cap,
             "90th percentile of %d trials in %.1f s (median %.1f, spread %.1f-%.1f GFLOP/s), "
             "measured %s%s, %s%s%s",
             ps->trials, ps->seconds, ps->median / 1e9, ps->min / 1e9, ps->max / 1e9,
             ps->cached ? ps->when : "now", load, ps->path[0] ? "cached in " : "not cached",
             ps->path, ps->path[0] ? " (delete it to measure again)" : "");
}
