// model/layers.c: GPT-2 layer kernels (see layers.h for shapes and conventions).
#include "model/layers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

// Channel blocks for reductions over rows (bias/LayerNorm/embedding gradients): each block is
// owned by one thread and its rows are summed in index order.
#define CBLOCK 64

// ---------------------------------------------------------------------------------------------
// encoder

void encoder_forward(float* out, const int* inp, const float* wte, const float* wpe, int B, int T,
                     int C) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float* o = out + ((size_t)b * T + t) * C;
            const float* we = wte + (size_t)inp[b * T + t] * C;
            if (wpe) {
                const float* pe = wpe + (size_t)t * C;
                for (int i = 0; i < C; i++)
                    o[i] = we[i] + pe[i];
            } else {
                memcpy(o, we, sizeof(float) * (size_t)C);
            }
        }
    }
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T,
                      int C) {
    // tokens repeat, so rows cannot be split across threads: split channels instead
    int nblk = (C + CBLOCK - 1) / CBLOCK;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        int c0 = blk * CBLOCK, c1 = c0 + CBLOCK < C ? c0 + CBLOCK : C;
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                const float* d = dout + ((size_t)b * T + t) * C;
                float* dw = dwte + (size_t)inp[b * T + t] * C;
                for (int i = c0; i < c1; i++)
                    dw[i] += d[i];
                if (dwpe) {
                    float* dp = dwpe + (size_t)t * C;
                    for (int i = c0; i < c1; i++)
                        dp[i] += d[i];
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// layernorm: y = (x - mu) * rstd * w + b,  rstd = 1/sqrt(var + 1e-5)
// backward: with xhat = (x - mu) * rstd and g = dy * w,
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) ; dw += dy * xhat ; db += dy

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++) {
        const float* x = inp + (size_t)r * C;
        float m = 0.0f;
        for (int i = 0; i < C; i++)
            m += x[i];
        m /= (float)C;
        float v = 0.0f;
        for (int i = 0; i < C; i++) {
            float d = x[i] - m;
            v += d * d;
        }
        v /= (float)C;
        float s = 1.0f / sqrtf(v + 1e-5f);
        float* o = out + (size_t)r * C;
        for (int i = 0; i < C; i++)
            o[i] = (x[i] - m) * s * weight[i] + bias[i];
        mean[r] = m;
        rstd[r] = s;
    }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++) {
        const float* dy = dout + (size_t)r * C;
        const float* x = inp + (size_t)r * C;
        float m = mean[r], s = rstd[r];
        float gm = 0.0f, gxm = 0.0f;
        for (int i = 0; i < C; i++) {
            float xh = (x[i] - m) * s;
            float g = dy[i] * weight[i];
            gm += g;
            gxm += g * xh;
        }
        gm /= (float)C;
        gxm /= (float)C;
        float* dx = dinp + (size_t)r * C;
        for (int i = 0; i < C; i++) {
            float xh = (x[i] - m) * s;
            dx[i] += s * (dy[i] * weight[i] - gm - xh * gxm);
        }
    }
    int nblk = (C + CBLOCK - 1) / CBLOCK;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        int c0 = blk * CBLOCK, c1 = c0 + CBLOCK < C ? c0 + CBLOCK : C;
        float dw[CBLOCK] = {0}, db[CBLOCK] = {0};
        for (int r = 0; r < N; r++) {
            const float* dy = dout + (size_t)r * C;
            const float* x = inp + (size_t)r * C;
            float m = mean[r], s = rstd[r];
            for (int i = c0; i < c1; i++) {
                dw[i - c0] += dy[i] * (x[i] - m) * s;
                db[i - c0] += dy[i];
            }
        }
        for (int i = c0; i < c1; i++) {
            dweight[i] += dw[i - c0];
            dbias[i] += db[i - c0];
        }
    }
}

// ---------------------------------------------------------------------------------------------
// GELU (tanh approximation). With u = k (x + 0.044715 x^3), k = sqrt(2/pi):
//   y = 0.5 x (1 + tanh u),  dy/dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) k (1 + 3*0.044715 x^2)

#define GELU_K 0.7978845608028654f

void gelu_forward(float* out, const float* inp, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_K * (x + 0.044715f * x * x * x);
        out[i] = 0.5f * x * (1.0f + tanhf(u));
    }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_K * (x + 0.044715f * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float g =
            0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += g * dout[i];
    }
}

// ---------------------------------------------------------------------------------------------
// residual

void residual_forward(float* out, const float* a, const float* b, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

void residual_backward(float* da, float* db, const float* dout, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}

// ---------------------------------------------------------------------------------------------
// cross-entropy over the real vocabulary: loss = logsumexp(z[0..V)) - z[target]
// d loss / d z_v = softmax(z)_v - [v == target]

void crossentropy_forward(float* losses, float* lse, const float* logits, const int* targets, int N,
                          int V, int Vp) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++) {
        const float* z = logits + (size_t)r * Vp;
        float m = -INFINITY;
        for (int v = 0; v < V; v++)
            m = fmaxf(m, z[v]);
        double s = 0.0;
        for (int v = 0; v < V; v++)
            s += (double)expf(z[v] - m);
        float l = m + (float)log(s);
        lse[r] = l;
        if (losses) losses[r] = l - z[targets[r]];
    }
}

void crossentropy_backward(float* dlogits, const float* logits, const float* lse,
                           const int* targets, float dloss, int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++) {
        const float* z = logits + (size_t)r * Vp;
        float* dz = dlogits + (size_t)r * Vp;
        float l = lse[r];
        for (int v = 0; v < V; v++)
            dz[v] = expf(z[v] - l) * dloss;
        dz[targets[r]] -= dloss;
        for (int v = V; v < Vp; v++)
            dz[v] = 0.0f;
    }
}
