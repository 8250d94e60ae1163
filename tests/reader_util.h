// tests/reader_util.h: helpers of the reader suites (tests/test_readers_*.c): run a built tool
// and capture its exit code and output, train a tiny checkpoint with ./train, and write files
// byte for byte (with the attnlab trailer recomputed by zlib's crc32, independent of the
// project's own crc).
#ifndef ATTNLAB_READER_UTIL_H
#define ATTNLAB_READER_UTIL_H

#include <stddef.h>
#include <stdint.h>

// Run "BUILD/<tool> <args>" (args as a shell fragment) with stdout and stderr captured into
// out (NUL-terminated, truncated to cap). Returns the exit code (128 + signal when killed).
int rd_run(const char* tool, const char* args, char* out, size_t cap);

// Run and assert: exit code `want_rc` and every NUL-separated-free string of `needles` (a
// NULL-terminated list) present in the output. Returns the output (static buffer).
const char* rd_expect(int want_rc, const char* tool, const char* args, const char* const* needles);
#define RD_EXPECT(rc, tool, args, ...)                                                             \
    rd_expect((rc), (tool), (args), (const char* const[]){__VA_ARGS__, NULL})

// A tiny byte-vocabulary model trained 2 steps by BUILD/train (n_layer 2, n_head 2, n_embd 16,
// block_size 16) with `extra` key=value arguments, in a fresh directory. Returns the run
// directory (static); its model file is DIR/model_00000002.bin, its shards DIR/data/.
const char* rd_train_tiny(const char* extra);

// Whole-file read (malloc'd, *n bytes) and write; fail the test on error.
unsigned char* rd_slurp(const char* path, size_t* n);
void rd_write(const char* path, const void* p, size_t n);
// Rewrite the last 8 bytes of buf (n bytes) as attnlab's trailer: crc32 of the rest, end magic.
void rd_fix_trailer(unsigned char* buf, size_t n);

#endif
