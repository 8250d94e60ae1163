// attention/real.h: the scalar type of the attention kernels.
//
// Every kernel in attention/ computes in `real`: float in the product build, double when the
// directory is compiled with -DATTN_REAL_DOUBLE (the test build in $(BUILD)/attn64/, whose
// gradient checks run finite differences at h ~ 1e-5 against a 1e-6 relative tolerance, which a
// float forward map cannot support). In the float build every wrapper below is the float libm
// function (or mm_gemm) it names, token for token, so the product is unchanged by this header.
// Hyperparameter values (AttnHParams.v, AttnHParamSpec) stay float in both builds.
#ifndef ATTNLAB_REAL_H
#define ATTNLAB_REAL_H

#include <math.h>
#include <stddef.h>

#include "common/util.h"

#ifdef ATTN_REAL_DOUBLE
typedef double real;
#define REAL_IS_DOUBLE 1
#define real_exp       exp
#define real_log       log
#define real_log1p     log1p
#define real_sqrt      sqrt
#define real_fabs      fabs
#define real_fmax      fmax
#define real_fmin      fmin
#define real_pow       pow
#define real_tanh      tanh
#define real_cos       cos
#define real_rint      rint
#define real_floor     floor
#define real_lround    lround
#define real_ldexp     ldexp
#define real_nextafter nextafter
#else
typedef float real;
#define REAL_IS_DOUBLE 0
#define real_exp       expf
#define real_log       logf
#define real_log1p     log1pf
#define real_sqrt      sqrtf
#define real_fabs      fabsf
#define real_fmax      fmaxf
#define real_fmin      fminf
#define real_pow       powf
#define real_tanh      tanhf
#define real_cos       cosf
#define real_rint      rintf
#define real_floor     floorf
#define real_lround    lroundf
#define real_ldexp     ldexpf
#define real_nextafter nextafterf
#endif

// 64-byte aligned, zeroed buffer of n reals (free with free()).
#define real_alloc(n)                                                                              \
    ((real*)util_alloc_floats((n) * (sizeof(real) / sizeof(float)), __FILE__, __LINE__))

// Row-major GEMM on strided views: C (M,N) = alpha op(A) op(B) + beta C, as mm_gemm
// (common/matmul.h). Float: mm_gemm itself. Double: cblas_dgemm (defined in attention.c).
#ifdef ATTN_REAL_DOUBLE
void real_gemm(int trans_a, int trans_b, int M, int N, int K, real alpha, const real* A, int lda,
               const real* B, int ldb, real beta, real* C, int ldc);
// The linear layer, as matmul_forward / matmul_backward of common/matmul.h.
void real_matmul_forward(real* out, const real* inp, const real* weight, const real* bias, int N,
                         int C, int OC);
void real_matmul_backward(real* dinp, real* dweight, real* dbias, const real* dout, const real* inp,
                          const real* weight, int N, int C, int OC);
#else
#include "common/matmul.h"
#define real_gemm            mm_gemm
#define real_matmul_forward  matmul_forward
#define real_matmul_backward matmul_backward
#endif

#endif
