// attention/qknorm.c: qk-norm, the model key qk_norm (definition, source and the choice of
// LayerNorm in attention/qknorm.h): every head's q and k normalised over the head's channels, times
// a learnable gain per layer shared by the heads, in place in qkv before the layer reads them.
//
// Forward, per row r of B*T, part p in {q, k} and head h, x = the head's hs channels:
//   layernorm: mu = mean x, rstd = 1/sqrt(mean (x - mu)^2 + eps), xhat = (x - mu) rstd
//   rmsnorm:   rstd = 1/sqrt(mean x^2 + eps),                     xhat = x rstd
//   y = g_p * xhat  (elementwise, g_p of hs entries)
// Backward, given dy: dxhat = g_p dy,  dg_p += sum over rows and heads of dy xhat, and
//   layernorm: dx = rstd (dxhat - mean dxhat - xhat mean(dxhat xhat))
//   rmsnorm:   dx = rstd (dxhat - xhat mean(dxhat xhat))
// (both exact with eps inside rstd: xhat is defined with the same rstd). Means and the gain
// gradient are summed in double, the latter per channel over rows and heads in index order, so
// results do not depend on the thread count.
#include <stdlib.h>
#include <string.h>

#include "attention/qknorm.h"

static const char* const QKNORM_NAMES[ATTN_QKNORM_COUNT] = {
    [ATTN_QKNORM_LAYERNORM] = "layernorm",
    [ATTN_QKNORM_RMSNORM] = "rmsnorm",
};

const char* attn_qknorm_name(int kind) {
    return kind >= 0 && kind < ATTN_QKNORM_COUNT ? QKNORM_NAMES[kind] : NULL;
}

int attn_qknorm_from_name(const char* name) {
    for (int k = 0; k < ATTN_QKNORM_COUNT; k++)
        if (strcmp(name, QKNORM_NAMES[k]) == 0) return k;
    return -1;
}

void attn_qknorm_forward(real* qkv, real* xhat, real* rstd, const real* gq, const real* gk,
                         const AttnDims* d, int kind, int nthreads) {
    const int C = d->C, NH = d->NH, hs = d->hs;
    const long rows = (long)d->B * d->T;
    ASSERT(kind >= 0 && kind < ATTN_QKNORM_COUNT && hs * NH == C);
    const int center = kind == ATTN_QKNORM_LAYERNORM;
#pragma omp parallel for schedule(static) num_threads(nthreads > 0 ? nthreads : 1)
    for (long r = 0; r < rows; r++) {
        for (int p = 0; p < 2; p++) {
            const real* g = p ? gk : gq;
            for (int h = 0; h < NH; h++) {
                real* x = qkv + (size_t)r * 3 * C + (size_t)p * C + (size_t)h * hs;
                real* xh = xhat + (size_t)r * 2 * C + (size_t)p * C + (size_t)h * hs;
                double mu = 0.0;
                if (center) {
                    for (int i = 0; i < hs; i++)
                        mu += x[i];
                    mu /= hs;
                }
                double var = 0.0;
                for (int i = 0; i < hs; i++) {
                    const double c = (double)x[i] - mu;
                    var += c * c;
                }
                const real rs = (real)(1.0 / sqrt(var / hs + ATTN_QKNORM_EPS));
                rstd[(size_t)r * 2 * NH + (size_t)p * NH + h] = rs;
                for (int i = 0; i < hs; i++) {
                    const real v = (real)((double)x[i] - mu) * rs;
                    xh[i] = v;
                    x[i] = g[i] * v;
                }
            }
        }
    }
}

void attn_qknorm_backward(real* dqkv, real* dgq, real* dgk, const real* xhat, const real* rstd,
                          const real* gq, const real* gk, const AttnDims* d, int kind,
                          int nthreads) {
    const int C = d->C, NH = d->NH, hs = d->hs;
    const long rows = (long)d->B * d->T;
    ASSERT(kind >= 0 && kind < ATTN_QKNORM_COUNT && hs * NH == C);
    const int center = kind == ATTN_QKNORM_LAYERNORM;
    const int nt = nthreads > 0 ? nthreads : 1;
    // the gains' gradient first (dqkv still holds dy): one channel per iteration, its rows and
    // heads summed in index order
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int c = 0; c < 2 * hs; c++) {
        const int p = c / hs, i = c % hs;
        double s = 0.0;
        for (long r = 0; r < rows; r++)
            for (int h = 0; h < NH; h++) {
                const size_t o = (size_t)p * C + (size_t)h * hs + (size_t)i;
                s += (double)dqkv[(size_t)r * 3 * C + o] * (double)xhat[(size_t)r * 2 * C + o];
            }
        real* dg = p ? dgk : dgq;
        dg[i] += (real)s;
    }
#pragma omp parallel for schedule(static) num_threads(nt)
    for (long r = 0; r < rows; r++) {
        for (int p = 0; p < 2; p++) {
            const real* g = p ? gk : gq;
            for (int h = 0; h < NH; h++) {
                real* dy = dqkv + (size_t)r * 3 * C + (size_t)p * C + (size_t)h * hs;
                const real* xh = xhat + (size_t)r * 2 * C + (size_t)p * C + (size_t)h * hs;
                const real rs = rstd[(size_t)r * 2 * NH + (size_t)p * NH + h];
                double mean_d = 0.0, mean_dx = 0.0;
                for (int i = 0; i < hs; i++) {
                    const double dxh = (double)g[i] * (double)dy[i];
                    mean_d += dxh;
                    mean_dx += dxh * (double)xh[i];
                }
                mean_d = center ? mean_d / hs : 0.0;
                mean_dx /= hs;
                for (int i = 0; i < hs; i++) {
                    const double dxh = (double)g[i] * (double)dy[i];
                    dy[i] = (real)((double)rs * (dxh - mean_d - (double)xh[i] * mean_dx));
                }
            }
        }
    }
}
