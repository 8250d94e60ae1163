// common/peak.h: the matmul peak a training run's MFU is measured against, made stable across
// runs. A single short measurement at start-up swings with the machine's load (65 to 113 GFLOP/s
// across runs on one shared machine), so the peak is the 90th percentile of many short trials
// (at least PEAK_MIN_TRIALS and PEAK_MIN_SECONDS of them; each trial is mm_measure_peak_trials'
// unit: every thread multiplies its own 512x512 matrices, as the trainer calls the kernels),
// reported with the trials' median and spread (min-max) and the load average it was measured at,
// and cached per machine: the first run with a given key measures and writes the cache file,
// later runs read it, so their MFU figures share one reference. Why the 90th percentile and not
// the median: on a loaded machine the median measures the load (at load 12 on 2 cores the median
// bf16 trial ran at 38 GFLOP/s, the fastest at 807), while a trial that has the cores to itself
// runs at what the kernels can do; the 90th percentile is that rate, robust to a few outliers. A
// peak measured under heavy load is still low (the load is printed with it): delete the file and
// let the next run measure at a quiet moment.
//
// The key: the CPU model and its kernel-selecting flags (common/cpuinfo.h), the thread count,
// the precision in effect with its kernels and build (mm_resolve_precision's text) and the Linux
// kernel release. The cache file is DIR/peak-HASH.txt, HASH the FNV-1a 64-bit hash of the key,
// DIR $ATTNLAB_CACHE_DIR, else $XDG_CACHE_HOME/attnlab, else $HOME/.cache/attnlab;
// ATTNLAB_CACHE_DIR=off measures in every run and caches nothing. Delete the file to measure
// again. The file is "name = value" lines (# comments): key, peak_gflops (the 90th percentile),
// median_gflops, min_gflops, max_gflops, trials, seconds, load, measured. A malformed one is
// refused, naming file:line.
#ifndef ATTNLAB_PEAK_H
#define ATTNLAB_PEAK_H

#include <stddef.h>

#define PEAK_MIN_TRIALS  64
#define PEAK_MIN_SECONDS 1.0
#define PEAK_MAX_TRIALS  1024

typedef struct {
    double peak;             // FLOP/s: the 90th percentile of the counted trials
    double median, min, max; // FLOP/s over the counted trials
    int trials;              // trials counted
    double seconds;          // wall time of the measurement
    double load;             // 1-minute load average when measured (-1: unknown)
    char when[32];           // "2026-12-05 14:20 UTC": when it was measured
    char path[1024];         // the cache file ("" when the cache is off)
    int cached;              // 1: read from path; 0: measured by this process
} PeakStats;

// Of rates[0..n), n >= 1, sorted ascending in place: peak = rates[(9 (n - 1)) / 10] (integer
// division: the 90th percentile, rounded down), median (mean of the two middle values for even
// n), min and max. Only those four fields of out are set.
void peak_stats_of(double* rates, int n, PeakStats* out);

// The cache key of this machine for nthreads threads in the precision described by
// precision_info (mm_resolve_precision's text).
void peak_key(char* buf, size_t cap, int nthreads, const char* precision_info);

// The cache file of `key` into buf: 0, or 1 when ATTNLAB_CACHE_DIR=off (or no directory can be
// named: no HOME), buf then "".
int peak_cache_path(char* buf, size_t cap, const char* key);

// Read the cache file at path: 1 and *out filled (path, cached = 1) when it holds `key`; 0 when
// there is no such file or it holds another key; -1 with err "PATH:LINE: ..." when it is
// malformed (an unknown or repeated name, a value that is not a finite positive number, a missing
// name, min <= median <= peak <= max violated).
int peak_cache_read(const char* path, const char* key, PeakStats* out, char* err, size_t errcap);

// Write ps under `key` to path atomically, creating its directory: 0, or -1 with err naming it.
int peak_cache_write(const char* path, const char* key, const PeakStats* ps, char* err,
                     size_t errcap);

// The peak in the current kernel precision (mm_set_precision) with nthreads threads: the cache
// entry of this key if there is one, else measured now and written to the cache (a failed write
// is reported on stderr, naming the file; the run goes on). 0, or -1 with err when the cache file
// is malformed (the caller exits 2: delete the file to measure again).
int peak_get(PeakStats* out, int nthreads, const char* precision_info, char* err, size_t errcap);

// "90th percentile of 128 trials in 1.0 s (median 101.2, spread 98.1-131.0 GFLOP/s), measured
// 2026-12-05 14:20 UTC at load 5.60, cached in PATH (delete it to measure again)"; a peak this
// process measured says "measured now" and "cached in PATH" or "not cached".
void peak_describe(const PeakStats* ps, char* buf, size_t cap);

#endif
