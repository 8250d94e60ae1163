// common/matmul.c: the matmul kernel layer (see matmul.h): GEMM on strided views and the linear
// layer's forward and backward on fixed blocks.
#include "common/matmul.h"

#include <cblas.h>

void mm_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float* A, int lda,
             const float* B, int ldb, float beta, float* C, int ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void mm_init_threads(void) {
    openblas_set_num_threads(1);
}

// ---------------------------------------------------------------------------------------------
// matmul through sgemm. OpenBLAS runs single-threaded (set at start-up); OpenMP threads each call
// sgemm on fixed blocks of output columns (forward, dinp) or rows (dweight). The block size
// depends only on the matrix shape, never on the thread count: sgemm's result for an element
// depends on how the call is sliced, so fixed blocks are what make results identical for any
// number of threads. Blocks of 128 (64 for narrow or odd-count dimensions, for load balance)
// cost 2-4% against one whole call, measured on GPT-2 shapes.

static int mm_block(int dim) {
    int nb = dim / 128;
    return (nb >= 8 || (nb > 0 && nb % 2 == 0 && dim % 128 == 0)) ? 128 : 64;
}

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC) {
    const int bs = mm_block(OC), nblk = (OC + bs - 1) / bs;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        int lo = blk * bs, hi = lo + bs < OC ? lo + bs : OC;
        mm_gemm(0, 1, N, hi - lo, C, 1.0f, inp, C, weight + (size_t)lo * C, C, 0.0f, out + lo, OC);
        if (bias) {
            for (int r = 0; r < N; r++) {
                float* o = out + (size_t)r * OC;
                for (int j = lo; j < hi; j++)
                    o[j] += bias[j];
            }
        }
    }
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC) {
    if (dinp) { // dinp[:, lo:hi] += dout @ weight[:, lo:hi]
        const int bs = mm_block(C), nblk = (C + bs - 1) / bs;
#pragma omp parallel for schedule(static)
        for (int blk = 0; blk < nblk; blk++) {
            int lo = blk * bs, hi = lo + bs < C ? lo + bs : C;
            mm_gemm(0, 0, N, hi - lo, OC, 1.0f, dout, OC, weight + lo, C, 1.0f, dinp + lo, C);
        }
    }
    // dweight[lo:hi, :] += dout[:, lo:hi]^T @ inp ; dbias[lo:hi] += column sums
    const int bs = mm_block(OC), nblk = (OC + bs - 1) / bs;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        int lo = blk * bs, hi = lo + bs < OC ? lo + bs : OC;
        mm_gemm(1, 0, hi - lo, C, N, 1.0f, dout + lo, OC, inp, C, 1.0f, dweight + (size_t)lo * C,
                C);
        if (dbias) {
            for (int r = 0; r < N; r++) {
                const float* d = dout + (size_t)r * OC;
                for (int j = lo; j < hi; j++)
                    dbias[j] += d[j];
            }
        }
    }
}

void matmul_forward_ref(float* out, const float* inp, const float* weight, const float* bias, int N,
                        int C, int OC) {
    for (int r = 0; r < N; r++) {
        for (int o = 0; o < OC; o++) {
            double acc = bias ? (double)bias[o] : 0.0;
            for (int i = 0; i < C; i++)
                acc += (double)inp[(size_t)r * C + i] * (double)weight[(size_t)o * C + i];
            out[(size_t)r * OC + o] = (float)acc;
        }
    }
}
