// model/layers.c: GPT-2 layer kernels (see layers.h for shapes and conventions).
#include "model/layers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "common/vmath.h"

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
    layernorm_forward_h(out, NULL, mean, rstd, inp, weight, bias, N, C);
}

// The row statistics are sums in index order, one add after another: each waits for the last,
// so one row's sum runs at the adder's latency. LN_ROWS rows are summed side by side instead
// (their chains are independent, so the CPU overlaps them); every row keeps its own order, so
// the sums are bit for bit those of one row at a time. On GPT-2's 1024 x 768 the forward is
// 2.6x and the backward 1.35x faster (docs/performance.md). A last group of n < LN_ROWS rows
// fills its other slots with its first row again (computed, not stored).
#define LN_ROWS 8

// The row in slot k of the group of n rows from r0: r0 + k, or r0 again past n.
static int ln_row(int r0, int k, int n) {
    return r0 + (k < n ? k : 0);
}

// Rows r0 .. r0+n-1 of a (rows, C) array as LN_ROWS row pointers (ln_row).
static void ln_group(const float** p, const float* base, int r0, int n, int C) {
    for (int k = 0; k < LN_ROWS; k++)
        p[k] = base + (size_t)ln_row(r0, k, n) * C;
}

// mean and rstd of the LN_ROWS rows x[k] (each C floats)
static void ln_stats(const float* const* x, int C, float* m, float* s) {
    float a[LN_ROWS] = {0};
    for (int i = 0; i < C; i++)
        for (int k = 0; k < LN_ROWS; k++)
            a[k] += x[k][i];
    for (int k = 0; k < LN_ROWS; k++)
        m[k] = a[k] / (float)C;
    float v[LN_ROWS] = {0};
    for (int i = 0; i < C; i++)
        for (int k = 0; k < LN_ROWS; k++) {
            float d = x[k][i] - m[k];
            v[k] += d * d;
        }
    for (int k = 0; k < LN_ROWS; k++)
        s[k] = 1.0f / sqrtf(v[k] / (float)C + 1e-5f);
}

void layernorm_forward_h(float* out, bf16* out_h, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, int N, int C) {
    const int ngrp = (N + LN_ROWS - 1) / LN_ROWS;
#pragma omp parallel for schedule(static)
    for (int g = 0; g < ngrp; g++) {
        const int r0 = g * LN_ROWS, n = N - r0 < LN_ROWS ? N - r0 : LN_ROWS;
        const float* x[LN_ROWS];
        float m[LN_ROWS], s[LN_ROWS];
        ln_group(x, inp, r0, n, C);
        ln_stats(x, C, m, s);
        for (int k = 0; k < n; k++) {
            const int r = r0 + k;
            float* o = out + (size_t)r * C;
            for (int i = 0; i < C; i++)
                o[i] = (x[k][i] - m[k]) * s[k] * weight[i] + bias[i];
            if (out_h) {
                bf16* oh = out_h + (size_t)r * C;
                for (int i = 0; i < C; i++)
                    oh[i] = bf16_from_float(o[i]);
            }
            mean[r] = m[k];
            rstd[r] = s[k];
        }
    }
}

// mean(g) and mean(g * xhat) of the LN_ROWS rows side by side, g = dy * w (row k's mean and rstd
// are m[k], s[k])
static void ln_grad_means(const float* const* dy, const float* const* x, const float* w,
                          const float* m, const float* s, int C, float* gm, float* gxm) {
    float a[LN_ROWS] = {0}, b[LN_ROWS] = {0};
    for (int i = 0; i < C; i++)
        for (int k = 0; k < LN_ROWS; k++) {
            float xh = (x[k][i] - m[k]) * s[k];
            float g = dy[k][i] * w[i];
            a[k] += g;
            b[k] += g * xh;
        }
    for (int k = 0; k < LN_ROWS; k++) {
        gm[k] = a[k] / (float)C;
        gxm[k] = b[k] / (float)C;
    }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C) {
    const int ngrp = (N + LN_ROWS - 1) / LN_ROWS;
#pragma omp parallel for schedule(static)
    for (int g = 0; g < ngrp; g++) {
        const int r0 = g * LN_ROWS, n = N - r0 < LN_ROWS ? N - r0 : LN_ROWS;
        const float* dy[LN_ROWS];
        const float* x[LN_ROWS];
        float m[LN_ROWS], s[LN_ROWS], gm[LN_ROWS], gxm[LN_ROWS];
        ln_group(dy, dout, r0, n, C);
        ln_group(x, inp, r0, n, C);
        for (int k = 0; k < LN_ROWS; k++) {
            m[k] = mean[ln_row(r0, k, n)];
            s[k] = rstd[ln_row(r0, k, n)];
        }
        ln_grad_means(dy, x, weight, m, s, C, gm, gxm);
        for (int k = 0; k < n; k++) {
            float* dx = dinp + (size_t)(r0 + k) * C;
            for (int i = 0; i < C; i++) {
                float xh = (x[k][i] - m[k]) * s[k];
                dx[i] += s[k] * (dy[k][i] * weight[i] - gm[k] - xh * gxm[k]);
            }
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
// tanh is common/vmath.h's (libm's tanhf is scalar and was the pass's whole cost); each element
// gets the same operations on the 16-lane, 8-lane and scalar paths, so results do not depend on
// where an element falls in the array or on the thread split.

#define GELU_K     0.7978845608028654f
#define GELU_A     0.044715f
#define GELU_CHUNK 4096 // elements per parallel work item (a multiple of 16)

static inline float gelu_u(float x) {
    return GELU_K * (x + GELU_A * x * x * x);
}

static inline float gelu_grad(float x, float th) {
    float sech2 = 1.0f - th * th;
    return 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_K * (1.0f + 3.0f * GELU_A * x * x);
}

// The vector forms spell out gelu_u / gelu_grad operation by operation (no FMA: the scalar
// expressions are compiled without contraction under -std=c11).
#if defined(__AVX512F__)
#define GV 16
typedef __m512 gvec;
#define gv_set1  _mm512_set1_ps
#define gv_load  _mm512_loadu_ps
#define gv_store _mm512_storeu_ps
#define gv_add   _mm512_add_ps
#define gv_sub   _mm512_sub_ps
#define gv_mul   _mm512_mul_ps
#define gv_tanh  vm_tanh16
#elif defined(__AVX2__) && defined(__FMA__)
#define GV       8
typedef __m256 gvec;
#define gv_set1  _mm256_set1_ps
#define gv_load  _mm256_loadu_ps
#define gv_store _mm256_storeu_ps
#define gv_add   _mm256_add_ps
#define gv_sub   _mm256_sub_ps
#define gv_mul   _mm256_mul_ps
#define gv_tanh  vm_tanh8
#endif

#ifdef GV
static inline gvec gelu_u_v(gvec x) {
    gvec x3 = gv_mul(gv_mul(gv_mul(gv_set1(GELU_A), x), x), x);
    return gv_mul(gv_set1(GELU_K), gv_add(x, x3));
}

static inline gvec gelu_grad_v(gvec x, gvec th) {
    gvec sech2 = gv_sub(gv_set1(1.0f), gv_mul(th, th));
    gvec left = gv_mul(gv_set1(0.5f), gv_add(gv_set1(1.0f), th));
    gvec poly = gv_add(gv_set1(1.0f), gv_mul(gv_mul(gv_set1(3.0f * GELU_A), x), x));
    gvec right = gv_mul(gv_mul(gv_mul(gv_mul(gv_set1(0.5f), x), sech2), gv_set1(GELU_K)), poly);
    return gv_add(left, right);
}
#endif

static void gelu_forward_span(float* out, const float* inp, size_t lo, size_t hi) {
    size_t i = lo;
#ifdef GV
    for (; i + GV <= hi; i += GV) {
        gvec x = gv_load(inp + i);
        gvec t = gv_add(gv_set1(1.0f), gv_tanh(gelu_u_v(x)));
        gv_store(out + i, gv_mul(gv_mul(gv_set1(0.5f), x), t));
    }
#endif
    for (; i < hi; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + vm_tanhf(gelu_u(x)));
    }
}

// dinp[i] = base[i] + gelu'(inp[i]) dout[i], base = dinp (accumulate) or 0 (gelu_backward_set:
// 0 + x, the bits of zeroing dinp first, -0 included)
static void gelu_backward_span(float* dinp, const float* inp, const float* dout, size_t lo,
                               size_t hi, int add) {
    size_t i = lo;
#ifdef GV
    for (; i + GV <= hi; i += GV) {
        gvec x = gv_load(inp + i);
        gvec g = gelu_grad_v(x, gv_tanh(gelu_u_v(x)));
        gvec base = add ? gv_load(dinp + i) : gv_set1(0.0f);
        gv_store(dinp + i, gv_add(base, gv_mul(g, gv_load(dout + i))));
    }
#endif
    for (; i < hi; i++) {
        float x = inp[i];
        dinp[i] = (add ? dinp[i] : 0.0f) + gelu_grad(x, vm_tanhf(gelu_u(x))) * dout[i];
    }
}

void gelu_forward(float* out, const float* inp, size_t n) {
    gelu_forward_h(out, NULL, inp, n);
}

void gelu_forward_h(float* out, bf16* out_h, const float* inp, size_t n) {
    long nchunks = (long)((n + GELU_CHUNK - 1) / GELU_CHUNK);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < nchunks; c++) {
        size_t lo = (size_t)c * GELU_CHUNK, hi = n - lo < GELU_CHUNK ? n : lo + GELU_CHUNK;
        gelu_forward_span(out, inp, lo, hi);
        if (out_h)
            for (size_t i = lo; i < hi; i++)
                out_h[i] = bf16_from_float(out[i]);
    }
}

static void gelu_backward_any(float* dinp, bf16* dinp_h, const float* inp, const float* dout,
                              size_t n, int add) {
    long nchunks = (long)((n + GELU_CHUNK - 1) / GELU_CHUNK);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < nchunks; c++) {
        size_t lo = (size_t)c * GELU_CHUNK, hi = n - lo < GELU_CHUNK ? n : lo + GELU_CHUNK;
        gelu_backward_span(dinp, inp, dout, lo, hi, add);
        if (dinp_h)
            for (size_t i = lo; i < hi; i++)
                dinp_h[i] = bf16_from_float(dinp[i]);
    }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
    gelu_backward_any(dinp, NULL, inp, dout, n, 1);
}

void gelu_backward_set(float* dinp, const float* inp, const float* dout, size_t n) {
    gelu_backward_any(dinp, NULL, inp, dout, n, 0);
}

void gelu_backward_set_h(float* dinp, bf16* dinp_h, const float* inp, const float* dout, size_t n) {
    gelu_backward_any(dinp, dinp_h, inp, dout, n, 0);
}

// ---------------------------------------------------------------------------------------------
// residual

void residual_forward(float* out, const float* a, const float* b, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

// ---------------------------------------------------------------------------------------------
// cross-entropy over the real vocabulary: loss = logsumexp(z[0..V)) - z[target]
// d loss / d z_v = softmax(z)_v - [v == target]
// One row per work item. exp is common/vmath.h's; the forward's sum of exp(z - max) is kept in
// double in GV interleaved lanes (element v, the scalar tail's too, goes to lane v mod GV), then
// the lanes are added in order, so a row's result depends only on the row and the vector width
// the build has (16 with AVX-512, 8 with AVX2, else 1).

#ifndef GV
#define GV 1
#endif

static double row_sumexp(const float* z, int V, float m) {
    double lane[16] = {0};
    int v = 0;
#if defined(__AVX512F__)
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    const __m512 mv = _mm512_set1_ps(m);
    for (; v + 16 <= V; v += 16) {
        __m512 e = vm_exp16(_mm512_sub_ps(_mm512_loadu_ps(z + v), mv));
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        s1 = _mm512_add_pd(
            s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    }
    _mm512_storeu_pd(lane, s0);
    _mm512_storeu_pd(lane + 8, s1);
#elif defined(__AVX2__) && defined(__FMA__)
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    const __m256 mv = _mm256_set1_ps(m);
    for (; v + 8 <= V; v += 8) {
        __m256 e = vm_exp8(_mm256_sub_ps(_mm256_loadu_ps(z + v), mv));
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    _mm256_storeu_pd(lane, s0);
    _mm256_storeu_pd(lane + 4, s1);
#endif
    for (; v < V; v++)
        lane[v % GV] += (double)vm_expf(z[v] - m);
    double s = 0.0;
    for (int k = 0; k < GV; k++)
        s += lane[k];
    return s;
}

static float row_max(const float* z, int V) {
    float m = -INFINITY;
    int v = 0;
#if defined(__AVX512F__)
    __m512 mv = _mm512_set1_ps(-INFINITY);
    for (; v + 16 <= V; v += 16)
        mv = _mm512_max_ps(_mm512_loadu_ps(z + v), mv); // a NaN z is skipped, as by fmaxf
    m = _mm512_reduce_max_ps(mv);
#endif
    for (; v < V; v++)
        m = fmaxf(m, z[v]);
    return m;
}

void crossentropy_forward(float* losses, float* lse, const float* logits, const int* targets, int N,
                          int V, int Vp) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++) {
        const float* z = logits + (size_t)r * Vp;
        float m = row_max(z, V);
        float l = m + (float)log(row_sumexp(z, V, m));
        lse[r] = l;
        if (losses) losses[r] = l - z[targets[r]];
    }
}

// dz[v - lo] for v in [lo, hi) of one row: exp(z_v - lse) dsoft for real entries (less dloss at
// the target), 0 for padded ones; dsoft = dloss without z-loss. lo must be a multiple of 16: the
// vector and scalar forms give the same bits, so any such split of a row gives the bits of the
// whole row.
static void ce_backward_span(float* dz, const float* z, float l, int target, float dsoft,
                             float dloss, int lo, int hi, int V) {
    int v = lo;
    const int vh = hi < V ? hi : V;
#if defined(__AVX512F__)
    const __m512 lv = _mm512_set1_ps(l), dv = _mm512_set1_ps(dsoft);
    for (; v + 16 <= vh; v += 16)
        _mm512_storeu_ps(dz + (v - lo),
                         _mm512_mul_ps(vm_exp16(_mm512_sub_ps(_mm512_loadu_ps(z + v), lv)), dv));
#elif defined(__AVX2__) && defined(__FMA__)
    const __m256 lv = _mm256_set1_ps(l), dv = _mm256_set1_ps(dsoft);
    for (; v + 8 <= vh; v += 8)
        _mm256_storeu_ps(dz + (v - lo),
                         _mm256_mul_ps(vm_exp8(_mm256_sub_ps(_mm256_loadu_ps(z + v), lv)), dv));
#endif
    for (; v < vh; v++)
        dz[v - lo] = vm_expf(z[v] - l) * dsoft;
    if (target >= lo && target < vh) dz[target - lo] -= dloss;
    for (v = vh > lo ? vh : lo; v < hi; v++)
        dz[v - lo] = 0.0f;
}

// The softmax part's factor of a row: d/dz_v [CE + zc lse^2] = p_v (1 + 2 zc lse) - onehot_v.
// Without z-loss exactly dloss (the cross-entropy's bits, untouched by the z-loss code).
static float ce_dsoft(float dloss, float zc, float l) {
    return zc != 0.0f ? (float)((double)dloss * (1.0 + 2.0 * (double)zc * (double)l)) : dloss;
}

// The plain mean of lse^2 over N rows (sums in double).
static double zloss_mean_sq(const float* lse, int N) {
    double s = 0.0;
    for (int r = 0; r < N; r++)
        s += (double)lse[r] * (double)lse[r];
    return N > 0 ? s / N : 0.0;
}

float zloss_mean(const float* lse, int N, float zc) {
    return (float)((double)zc * zloss_mean_sq(lse, N));
}

void crossentropy_backward_z(float* dlogits, const float* logits, const float* lse,
                             const int* targets, float dloss, float zc, int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++)
        ce_backward_span(dlogits + (size_t)r * Vp, logits + (size_t)r * Vp, lse[r], targets[r],
                         ce_dsoft(dloss, zc, lse[r]), dloss, 0, Vp, V);
}

void crossentropy_backward(float* dlogits, const float* logits, const float* lse,
                           const int* targets, float dloss, int N, int V, int Vp) {
    crossentropy_backward_z(dlogits, logits, lse, targets, dloss, 0.0f, N, V, Vp);
}

#define CE_SPAN 1024 // floats of a row computed on the stack, then rounded (a multiple of 16)

void crossentropy_backward_bf16_z(bf16* dlogits, const float* logits, const float* lse,
                                  const int* targets, float dloss, float zc, int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++) {
        float tmp[CE_SPAN];
        const float* z = logits + (size_t)r * Vp;
        bf16* dz = dlogits + (size_t)r * Vp;
        const float ds = ce_dsoft(dloss, zc, lse[r]);
        for (int lo = 0; lo < Vp; lo += CE_SPAN) {
            int hi = lo + CE_SPAN < Vp ? lo + CE_SPAN : Vp;
            ce_backward_span(tmp, z, lse[r], targets[r], ds, dloss, lo, hi, V);
            for (int v = lo; v < hi; v++)
                dz[v] = bf16_from_float(tmp[v - lo]);
        }
    }
}

void crossentropy_backward_bf16(bf16* dlogits, const float* logits, const float* lse,
                                const int* targets, float dloss, int N, int V, int Vp) {
    crossentropy_backward_bf16_z(dlogits, logits, lse, targets, dloss, 0.0f, N, V, Vp);
}
