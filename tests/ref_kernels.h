// tests/ref_kernels.h: plain reference kernels that only the tests call: a naive matmul with
// double accumulation (the check of the sgemm path) and the residual add's backward (the model
// fuses it into its gradient buffers, so the library has no caller).
#ifndef ATTNLAB_REF_KERNELS_H
#define ATTNLAB_REF_KERNELS_H
#include <stddef.h>

// out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias (OC or NULL), every dot product summed in
// double in index order, then rounded once to float.
void matmul_forward_ref(float* out, const float* inp, const float* weight, const float* bias, int N,
                        int C, int OC);

// out = a + b, so dL/da += dout and dL/db += dout, elementwise over n entries.
void residual_backward(float* da, float* db, const float* dout, size_t n);

#endif
