// tests/fuzz/fuzz_common.h: helpers shared by the libFuzzer harnesses: a per-process scratch
// directory and writing the fuzz input to a file there (the readers under test take paths).
#ifndef ATTNLAB_FUZZ_COMMON_H
#define ATTNLAB_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

// "/tmp/attnlab_fuzz_<name>_<pid>", created once.
static const char* fuzz_dir(const char* name) {
    static char dir[256];
    if (!dir[0]) {
        const char* base = getenv("TMPDIR");
        snprintf(dir, sizeof(dir), "%s/attnlab_fuzz_%s_%ld", base && *base ? base : "/tmp", name,
                 (long)getpid());
        mkdir(dir, 0700);
    }
    return dir;
}

// Write n bytes to dir/file; returns the path (static buffer).
static const char* fuzz_write(const char* dir, const char* file, const void* data, size_t n) {
    static char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    FILE* f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(data, 1, n, f) != n) abort();
    fclose(f);
    return path;
}

// Read a whole file (for building templates); NULL if missing.
static unsigned char* fuzz_slurp(const char* path, size_t* n) {
    FILE* f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char* b = malloc((size_t)sz + 1);
    if (fread(b, 1, (size_t)sz, f) != (size_t)sz) abort();
    fclose(f);
    *n = (size_t)sz;
    return b;
}

#endif
