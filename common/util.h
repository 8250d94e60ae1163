// common/util.h: error handling, checked allocation and I/O, timing, crc32 and atomic file
// writes. Everything in attnlab includes this; it includes nothing of attnlab.
#ifndef ATTNLAB_UTIL_H
#define ATTNLAB_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// ----------------------------------------------------------------------------
// Exit codes shared by every tool.
enum {
    EXIT_USAGE = 2,     // bad config, CLI or input file: nothing was written
    EXIT_NONFINITE = 3, // training produced a non-finite loss or gradient
    EXIT_STOPPED = 4,   // stopped by SIGINT/SIGTERM/SIGHUP after writing a checkpoint
};

// Always-on assertion for programming errors (never for validating input).
#define ASSERT(x)                                                                                  \
    do {                                                                                           \
        if (!(x)) util_assert_fail(#x, __FILE__, __LINE__);                                        \
    } while (0)
_Noreturn void util_assert_fail(const char* expr, const char* file, int line);

// Print "attnlab: <prefix><message>" to stderr and exit with `code`. The prefix is empty unless
// util_set_die_prefix set one: under mpirun, dist_init sets "rank R of N: " on the ranks other
// than 0, so an error only one rank hits names it (docs/distributed.md).
_Noreturn void die(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void util_set_die_prefix(const char* prefix);
// How die() ends the process: flush stdio, run the exit hook, _exit(code) (no atexit handlers).
_Noreturn void util_exit(int code);
// One function util_exit calls before it ends the process (NULL: none): what a run holds outside
// the process and must give back even on an error (the trainer's out_dir lock file).
void util_set_exit_hook(void (*hook)(void));

// Install `handler` for SIGINT, SIGTERM, SIGHUP and SIGUSR1 (SA_RESTART); a SIGHUP that is
// ignored (nohup) stays ignored.
void util_catch_signals(void (*handler)(int));

// A command-line integer: the whole of `s` in [lo, hi], else die(EXIT_USAGE) naming the option
// `what` and the value.
long util_cli_long(const char* what, const char* s, long lo, long hi);

// The one number parser of every config key, attention hyperparameter and tool option: the whole
// of `s` in plain decimal notation (digits, sign, point, exponent), finite. NaN, inf, hex and
// overflow are refused. 0, or -1 (not a number).
int util_parse_double(const char* s, double* out);
// A command-line number: util_parse_double of `s` in [lo, hi], else die(EXIT_USAGE) naming the
// option `what` and the value.
double util_cli_double(const char* what, const char* s, double lo, double hi);

// Checked allocation: on failure print the size and the call site, exit 1.
void* util_malloc(size_t n, const char* file, int line);
void* util_calloc(size_t n, size_t sz, const char* file, int line);
void* util_realloc(void* p, size_t n, const char* file, int line);
#define mallocCheck(n)     util_malloc((n), __FILE__, __LINE__)
#define callocCheck(n, sz) util_calloc((n), (sz), __FILE__, __LINE__)
#define reallocCheck(p, n) util_realloc((p), (n), __FILE__, __LINE__)

// Zeroed allocation for large float buffers, 64-byte aligned; from 2 MiB up, whole 2 MiB pages
// asked for as transparent huge pages (util.c). Free with free().
float* util_alloc_floats(size_t n, const char* file, int line);
#define allocFloats(n) util_alloc_floats((n), __FILE__, __LINE__)
// Bytes allocFloats takes for n floats (rounded up to 64 bytes, or to 2 MiB from 2 MiB up).
size_t util_floats_bytes(size_t n);
// Bytes handed out so far by the checked allocators above (reallocCheck counts its new size),
// process-wide and never decreasing; tests compare differences of it with the memory estimate.
size_t util_alloc_total(void);

// Copy at most cap-1 bytes and always terminate. Returns 1 if src was truncated.
int util_strlcpy(char* dst, const char* src, size_t cap);

// ----------------------------------------------------------------------------
// Time
double util_now(void); // monotonic seconds
// Print "peak RSS: X MiB" (VmHWM of /proc/self/status) to stdout; nothing where unavailable.
void util_print_peak_rss(void);

// Format seconds as "1h02m", "3m05s" or "12.3s" into buf.
void util_format_duration(char* buf, size_t cap, double seconds);

// ----------------------------------------------------------------------------
// Checksums (zlib crc32; same polynomial as gzip/zip/PNG)
uint32_t util_crc32(uint32_t crc, const void* data, size_t n);

// ----------------------------------------------------------------------------
// Atomic file writes: data goes to "<path>.tmp.<pid>", is fsync'd, renamed over <path>, and the
// directory is fsync'd. On any error the temp file is removed, <path> is untouched, and a message
// naming the file and the OS error is put into the writer's `err`.
typedef struct {
    FILE* f;
    char path[1024];
    char tmp[1100];
    char err[1300];
    int failed;
    uint32_t crc; // crc32 of everything written so far
} AtomicFile;

int atomic_open(AtomicFile* af, const char* path);            // 0 ok, -1 error (af->err)
int atomic_write(AtomicFile* af, const void* data, size_t n); // 0 ok, -1 error
int atomic_commit(AtomicFile* af);                            // 0 ok, -1 error (temp removed)
void atomic_abort(AtomicFile* af);                            // drop the temp file

// The trailer every attnlab checkpoint file (model and run-state files) ends with: {crc32 of all
// bytes before it, UTIL_END_MAGIC}, both uint32 little-endian. atomic_finish appends it over
// everything af has written and commits (0, or -1 with err); util_verify_trailer checks a file of
// at least min_size bytes before the trailer (0, or -1 with err naming the file: truncated,
// missing end marker, checksum mismatch).
#define UTIL_END_MAGIC 0x4b4e4c41u // "ALNK"
int atomic_finish(AtomicFile* af, char* err, size_t errcap);
int util_verify_trailer(const char* path, size_t min_size, char* err, size_t errcap);

// Read a whole regular file into a malloc'd buffer (NUL-terminated). A path that is not a regular
// file (a device such as /dev/zero, a FIFO, a directory) or a file larger than `max` bytes is
// refused before it is read. Returns NULL and sets err (naming the file) on error.
char* util_read_file_max(const char* path, size_t max, size_t* len, char* err, size_t errcap);
// util_read_file_max with UTIL_READ_MAX (text corpora, metrics files).
#define UTIL_READ_MAX ((size_t)4 << 30)
char* util_read_file(const char* path, size_t* len, char* err, size_t errcap);
// 0 when the open stream f (opened from `path`; NULL: `path` itself, before opening it) of at most
// `max` bytes, else -1 with err = "PATH: not a regular file (...)" or "PATH: N bytes, more than the
// M a WHAT may hold". `what` names the kind of file ("config file").
int util_check_input(FILE* f, const char* path, size_t max, const char* what, char* err,
                     size_t errcap);

// Remove the temp files of atomic writes ("NAME.tmp.PID") in `dir` whose process is gone. Returns
// the number removed.
int util_remove_stale_temps(const char* dir);

// A stream the program appends to (a log, a record file): flush it and check that every write so
// far succeeded. 0, or -1 with err = "PATH: write failed: REASON". util_fclose_checked does the
// same and closes f in either case.
int util_fcheck(FILE* f, const char* path, char* err, size_t errcap);
int util_fclose_checked(FILE* f, const char* path, char* err, size_t errcap);

// mkdir -p. Returns 0 or -1 with err set.
int util_mkdirs(const char* path, char* err, size_t errcap);

int util_file_exists(const char* path);

#endif
