// common/npy.h: NumPy .npy files (format version 1.0), little-endian float32 ('<f4') or float16
// ('<f2'), C order. numpy.load reads them, also with mmap_mode='r'. The header is
//   "\x93NUMPY" 0x01 0x00 HEADER_LEN(uint16 LE) "{'descr': '<f4', 'fortran_order': False,
//   'shape': (2, 3), }" + spaces + '\n'
// padded so that 10 + HEADER_LEN is a multiple of 64 (the data starts 64-byte aligned). The
// header is byte-identical to what numpy (>= 1.24) np.save writes: its padding rule (1..64
// spaces) plus its spare room for the first axis to grow to 21 digits. A 1-d shape is written
// "(5,)", a 0-d one "()".
// fp16: round to nearest, ties to even; overflow gives +-Inf, values below half the smallest
// subnormal (2^-25) give +-0, NaN stays NaN.
// Writes are atomic (temp file, fsync, rename): a failed write leaves no file behind and any
// existing file untouched. Large arrays can be streamed: npy_open, npy_write_chunk..., npy_commit.
#ifndef ATTNLAB_NPY_H
#define ATTNLAB_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "common/util.h"

#define NPY_MAX_DIMS 16

// Whole array in one call. shape[0..ndim) (ndim 0 = scalar). Returns 0, or -1 with err set.
int npy_write(const char* path, const float* data, const int* shape, int ndim, int fp16, char* err,
              size_t errcap);

// Streaming writer: elements are appended in C order; commit checks the count.
typedef struct {
    AtomicFile af;
    size_t total, written; // elements
    int fp16;
    char* err;
    size_t errcap;
} NpyWriter;

int npy_open(NpyWriter* w, const char* path, const int* shape, int ndim, int fp16, char* err,
             size_t errcap);
int npy_write_chunk(NpyWriter* w, const float* data, size_t n); // 0 or -1 (err set, aborted)
int npy_commit(NpyWriter* w); // 0, or -1 if a write failed or fewer/more elements than the shape
void npy_abort(NpyWriter* w); // drop the temp file

// The header bytes for a shape (magic through '\n'), into out[0..cap). Returns its length (a
// multiple of 64), or 0 if cap is too small or the shape invalid.
size_t npy_header(char* out, size_t cap, const int* shape, int ndim, int fp16);

// Reading (for tests and tools): '<f4' or '<f2', C order, versions 1.0-3.0.
typedef struct {
    int ndim;
    long long shape[NPY_MAX_DIMS];
    int fp16;           // 1 for '<f2'
    size_t data_offset; // bytes before the data
    size_t count;       // elements
} NpyInfo;

int npy_read_header(const char* path, NpyInfo* info, char* err, size_t errcap); // 0 or -1
// The whole array as float32 (fp16 converted), malloc'd; NULL with err set on error.
float* npy_read_f32(const char* path, NpyInfo* info, char* err, size_t errcap);

// IEEE 754 binary16 conversions.
uint16_t npy_f32_to_f16(float f);
float npy_f16_to_f32(uint16_t h);

#endif
