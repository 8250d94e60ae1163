// common/matmul.h: the matmul kernel layer. Every matrix product in attnlab goes through here,
// for model/ and attention/ alike: today fp32 through OpenBLAS cblas_sgemm; the bf16 path
// (oneDNN) plugs in behind the same calls.
//
// Threading: OpenBLAS runs single-threaded (openblas_set_num_threads(1) at start-up, see
// mm_init_threads); callers parallelise with OpenMP and call these kernels on fixed blocks, so
// the two thread pools never compete and results do not depend on the thread count.
#ifndef ATTNLAB_MATMUL_H
#define ATTNLAB_MATMUL_H

#include <stddef.h>

// Row-major GEMM on strided views, as cblas_sgemm(CblasRowMajor, ...):
//   C (M,N) = alpha * op(A) op(B) + beta * C,  op(X) = X or X^T (trans_a, trans_b nonzero),
//   op(A) is (M,K) with row stride lda, op(B) is (K,N) with row stride ldb, C has row stride ldc.
void mm_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float* A, int lda,
             const float* B, int ldb, float beta, float* C, int ldc);

// Set the BLAS library to one thread (call once at start-up, outside parallel regions).
void mm_init_threads(void);

// ---- the linear layer: out = inp @ weight^T + bias, on fixed column/row blocks
// out (N,OC) = inp (N,C) @ weight^T (weight is (OC,C)) + bias (OC, may be NULL)
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC);
// dinp (N,C) += dout @ weight (dinp may be NULL); dweight (OC,C) += dout^T @ inp;
// dbias (OC) += column sums of dout (may be NULL)
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC);
// Naive triple loop (double accumulation), the reference for tests.
void matmul_forward_ref(float* out, const float* inp, const float* weight, const float* bias, int N,
                        int C, int OC);

#endif
