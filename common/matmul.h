// common/matmul.h: the matmul kernel layer. Every matrix product in attnlab goes through here,
// for model/ and attention/ alike, in one of three precisions (mm_set_precision):
//   fp32      OpenBLAS cblas_sgemm (the default; bit-identical to attnlab before bf16 existed)
//   bf16      operands rounded to bf16 (round-to-nearest-even), products accumulated in fp32 and
//             written as fp32, on oneDNN's matmul primitive (AMX-BF16 / AVX512-BF16 kernels)
//   bf16_ref  the portable reference of bf16: the same rounded operands, multiplied by fp32
//             sgemm. A product of two bf16 numbers is exact in fp32, so it differs from bf16
//             only in summation order; it runs on any x86-64 CPU.
// Outputs, and everything outside the products (bias, gradients, optimizer), stay fp32.
//
// Weights: a caller may register a bf16 copy of a float array (mm_bf16_register, the model does
// this for its parameters and refreshes it once per optimizer step); a matmul operand inside a
// registered array reads the copy instead of rounding the floats again on every call.
//
// Threading: OpenBLAS and oneDNN run single-threaded (see mm_init_threads); callers parallelise
// with OpenMP and call these kernels on fixed blocks, so thread pools never compete and results
// do not depend on the thread count.
#ifndef ATTNLAB_MATMUL_H
#define ATTNLAB_MATMUL_H

#include <stddef.h>
#include <stdio.h>

#include "common/bf16.h"

typedef enum { MM_FP32 = 0, MM_BF16 = 1, MM_BF16_REF = 2, MM_PRECISION_COUNT } MMPrecision;

// Row-major GEMM on strided views, as cblas_sgemm(CblasRowMajor, ...):
//   C (M,N) = alpha * op(A) op(B) + beta * C,  op(X) = X or X^T (trans_a, trans_b nonzero),
//   op(A) is (M,K) with row stride lda, op(B) is (K,N) with row stride ldb, C has row stride ldc.
// In bf16 / bf16_ref, A and B are rounded to bf16 first (or read from a registered bf16 copy).
void mm_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float* A, int lda,
             const float* B, int ldb, float beta, float* C, int ldc);

// Set the BLAS library to one thread (call once at start-up, outside parallel regions).
void mm_init_threads(void);

// ---- precision
void mm_set_precision(MMPrecision p); // outside parallel regions
// The one spelling of each precision (matmul.c, designated initializers): mm_precision_name(p)
// ("fp32", "bf16", "bf16_ref"; NULL out of range) and mm_precision_from_name (-1 if unknown).
// The config key `precision` also takes MM_PRECISION_AUTO, resolved by mm_resolve_precision; its
// choices string in common/config_table.c is checked against these by tests/test_enum_names.c.
#define MM_PRECISION_AUTO "auto"
const char* mm_precision_name(MMPrecision p);
int mm_precision_from_name(const char* name);
// Resolve a configured precision: "fp32", "bf16" (oneDNN; refused when this CPU has no native
// bf16 matmul), "auto" (bf16 where native, else fp32), "bf16_ref". On success *out is set and
// `info` describes the choice and oneDNN's implementation (e.g. "bf16 (oneDNN
// brg:avx512_core_amx_bf16 (isa avx512_core_amx))"); returns 0. Otherwise -1 with err naming what
// is missing and suggesting fp32.
int mm_resolve_precision(const char* want, MMPrecision* out, char* info, size_t infocap, char* err,
                         size_t errcap);

// ---- bf16 copies of weights: [base, base+n) reads `copy` (n bf16) in bf16 precisions. The
// caller keeps `copy` current. At most MM_MAX_REGISTERED arrays at once.
#define MM_MAX_REGISTERED 16
void mm_bf16_register(const float* base, size_t n, const bf16* copy);
void mm_bf16_unregister(const float* base);

// ---- the linear layer: out = inp @ weight^T + bias, on fixed column/row blocks
// out (N,OC) = inp (N,C) @ weight^T (weight is (OC,C)) + bias (OC, may be NULL)
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC);
// dinp (N,C) += dout @ weight (dinp may be NULL); dweight (OC,C) += dout^T @ inp (dweight may
// be NULL: then dbias must be NULL and only dinp is computed); dbias (OC) += column sums of dout
// (may be NULL)
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC);
// The same with each product output either accumulated into (MM_ACCUMULATE, as matmul_backward)
// or overwritten (MM_OVERWRITE: GEMM beta = 0, the output's old contents are never read, so it
// need not be zeroed first). Overwriting gives the bits that zeroing and then accumulating gives
// (every kernel's sum starts from +0, so it is never -0 and 0 + sum == sum exactly). dbias
// always accumulates.
typedef enum { MM_ACCUMULATE = 0, MM_OVERWRITE = 1 } MMWrite;
void matmul_backward_to(float* dinp, MMWrite dinp_w, float* dweight, MMWrite dweight_w,
                        float* dbias, const float* dout, const float* inp, const float* weight,
                        int N, int C, int OC);
// The same with the input's bf16 rounding supplied by the caller: inp_h (N,C, dense) holds
// bf16_from_float of every inp element (its producer wrote it, e.g. layernorm_forward_h), and
// bf16 precisions multiply it instead of rounding inp again, so the forward and the backward of
// one layer share one rounding. The results are bitwise those of the calls without it. inp_h
// NULL: inp is rounded as above. dout_h likewise holds bf16(dout) (N,OC, dense; NULL: dout is
// rounded here). fp32 ignores both.
void matmul_forward_h(float* out, const float* inp, const bf16* inp_h, const float* weight,
                      const float* bias, int N, int C, int OC);
void matmul_backward_to_h(float* dinp, MMWrite dinp_w, float* dweight, MMWrite dweight_w,
                          float* dbias, const float* dout, const bf16* dout_h, const float* inp,
                          const bf16* inp_h, const float* weight, int N, int C, int OC);
// bf16 precisions round the linear layer's activations (inp, and dout in backward) into buffers
// of the calling thread, grown on demand. mm_linear_reserve sizes them now for operands of up to
// x0 elements (inp of forward, dout of backward) and x1 elements (inp of backward);
// mm_linear_reserve_bytes is what that allocates in a thread that has none yet.
void mm_linear_reserve(size_t x0, size_t x1);
size_t mm_linear_reserve_bytes(size_t x0, size_t x1);
// Free the calling thread's operand buffers (they are allocated again when next needed).
void mm_thread_scratch_free(void);

// Measured matmul throughput (FLOP/s) in the current kernel precision (fp32: sgemm; bf16: oneDNN
// on operands already in bf16) with n threads each multiplying its own 512x512 matrices, the way
// the trainer calls the kernels: the best of `trials` short trials (a busy machine makes single
// trials come out low; the first trial, which creates primitives and warms caches, never
// counts). About 0.05 s per trial. The rate of every counted trial goes to rates[0 .. trials-2]
// (NULL: not kept), and the best is returned; the
// trainer's peak (the median, its spread and the per-machine cache) is in common/peak.h.
// Its threads are pinned to distinct CPUs of the caller's affinity mask during the trials (when
// the mask has one for each) and get their own masks back after; mm_peak_trial_cpu(t) is the CPU
// thread t of the last trial ended on (-1 outside 0..63).
double mm_measure_peak_trials(int nthreads, int trials, double* rates);
int mm_peak_trial_cpu(int thread);
// ./bench sgemm-peak (precision NULL) / bf16-peak ("bf16"): measure the peak with every OpenMP
// thread (12 trials, the first not counted) and print "sgemm peak: X GFLOP/s with N threads (best
// of 11 trials; median M, min m)" (bf16: "bf16 peak: ... | <precision info>") to stdout; returns
// 0 (die(2) on a bad precision).
int mm_print_peak(const char* precision);

// The reference of a run's MFU: the start-up peak, raised to a step's rate when a step beats it
// (the start-up trials came out low on a busy machine).
typedef struct {
    double flops; // FLOP/s that MFU is measured against
    int raised;   // a step beat the measured peak
} MMPeak;
// MFU of a step that ran at `rate` FLOP/s: rate / p->flops after raising p->flops to rate if it
// is larger; the first raise writes "# step STEP beat the measured matmul peak: ..." to log.
double mm_peak_mfu(MMPeak* p, double rate, long step, FILE* log);

#endif
