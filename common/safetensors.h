// common/safetensors.h: the safetensors file format, read and written.
//   8-byte little-endian header length N, N bytes of JSON header (padded with spaces to a
//   multiple of 8 when written here): an optional "__metadata__" object of string values, and
//   per tensor {"dtype", "shape", "data_offsets": [begin, end]}; then the data section, the
//   tensors' raw little-endian bytes back to back.
// The reader validates the header fully (length, JSON, dtypes, shapes, offsets in bounds and
// contiguous, no gaps or trailing bytes) and keeps the data on disk; errors name the file and the
// tensor. The writer produces F32 tensors, in the order declared, atomically. The model mapping
// (names, transposes) is model/hf.c's.
#ifndef ATTNLAB_SAFETENSORS_H
#define ATTNLAB_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/util.h"

#define ST_MAX_DIMS   8
#define ST_MAX_HEADER (100u << 20) // header bytes accepted (safetensors' own limit is 100 MB)

// Every safetensors dtype is accepted in a header (sizes are validated); st_read_f32 converts
// F32, F16, BF16 and F64, the others (masks, integer buffers) can only be skipped.
enum { ST_F32, ST_F16, ST_BF16, ST_F64, ST_OTHER1, ST_OTHER2, ST_OTHER4, ST_OTHER8 };

typedef struct {
    char name[160];
    int dtype; // ST_*
    char dtype_name[12];
    int ndim;
    uint64_t shape[ST_MAX_DIMS];
    uint64_t numel;
    uint64_t begin, end; // byte offsets into the data section
} StTensor;

typedef struct {
    char path[1024];
    FILE* f;
    uint64_t data_start; // 8 + header length
    uint64_t data_size;  // bytes after the header
    StTensor* t;
    int n;
    char attention[256];   // __metadata__ attnlab_attention, or "" if absent
    char pos_encoding[32]; // __metadata__ attnlab_pos_encoding, or ""
    int qk_norm;           // __metadata__ attnlab_qk_norm ("1"), else 0
} SafeTensors;

// Open and validate a safetensors file (the data stays on disk). 0, or -1 with err naming the
// file and what is wrong.
int st_open(SafeTensors* st, const char* path, char* err, size_t errcap);
void st_close(SafeTensors* st);
int st_find(const SafeTensors* st, const char* name); // index, or -1
// Read tensor i as float32 (converting F16 / BF16 / F64) into out[numel]. 0, or -1 with err
// (also for integer or boolean tensors, which are not parameters).
int st_read_f32(const SafeTensors* st, int i, float* out, char* err, size_t errcap);

// ---- writer
// One F32 tensor to be written (C order).
typedef struct {
    char name[160];
    int ndim;
    uint64_t shape[ST_MAX_DIMS];
} StSpec;

typedef struct {
    AtomicFile af;
    uint64_t expect;  // data bytes declared in the header
    uint64_t written; // data bytes appended so far
} StWriter;

// Start writing `path` (atomically): header with __metadata__ {"format": "pt", then the nmeta
// pairs meta[2i] = key, meta[2i+1] = string value}, and the n tensors in order with data_offsets
// back to back. 0, or -1 with err (nothing is left on disk).
int st_write_begin(StWriter* w, const char* path, const char* const* meta, int nmeta,
                   const StSpec* t, int n, char* err, size_t errcap);
// Append numel floats of tensor data (the tensors in header order, any number of calls each).
void st_write_f32(StWriter* w, const float* x, size_t numel);
// Finish: the data must be exactly what the header declared. 0, or -1 with err (file removed).
int st_write_end(StWriter* w, char* err, size_t errcap);

#endif
