// common/dnnl_mm.h: bf16 GEMM on oneDNN's matmul primitive (bf16 operands, fp32 accumulation,
// fp32 output), used by the kernel layer (common/matmul.c) in precision bf16. Not called
// directly by anything else.
//
// Primitives are created once per shape (M, N, K, transposes, strides, alpha, beta) and cached.
// oneDNN (Debian's build threads with the same libgomp as attnlab) runs single-threaded inside
// attnlab's OpenMP regions, and every primitive is created for one thread, so a primitive's
// summation order, and hence its result, never depends on the thread count.
#ifndef ATTNLAB_DNNL_MM_H
#define ATTNLAB_DNNL_MM_H

#include <stddef.h>
#include <stdio.h>

#include "common/bf16.h"

// Probe oneDNN at GPT-2-like shapes. Returns 1 when its bf16 matmul is native (the CPU has
// AVX512-BF16 or AMX-BF16 and oneDNN picks a kernel using it), else 0 with `why` saying what is
// missing. `impl` receives oneDNN's implementation string (e.g. brg:avx512_core_amx_bf16) and
// the effective ISA in both cases.
int dnnl_mm_probe(char* impl, size_t implcap, char* why, size_t whycap);

// C (M,N) = alpha op(A) op(B) + beta C as cblas_sgemm (row-major, strided views), with A and B
// bf16 and C fp32. Returns 0, or -1 when oneDNN has no native kernel for this shape (then
// nothing was written and the caller computes it another way).
int dnnl_mm_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const bf16* A, int lda,
                 const bf16* B, int ldb, float beta, float* C, int ldc);

// Number of primitives created so far (tests check the cache with it).
long dnnl_mm_primitives_created(void);

#endif
