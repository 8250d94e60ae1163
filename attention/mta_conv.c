// attention/mta_conv.c: the key-query convolution and the head mixing of Multi-Token Attention
// on the causal (T, T) maps of one batch item (interface and formulas in mta_conv.h; the layer
// that uses them is attention/mta.c).
//
// Convolution, forward: L[i,j] = X[i,j] + sum_{a=0}^{cq-1} sum_{b=-w}^{w} th[a,b] X[i-a, j-b]
// for j <= i. X is zero above its diagonal, so a term is nonzero only for 0 <= j-b <= i-a: the
// output keys of tap (a, b) in row i are j in [max(b, 0), min(i-a+b, i)] (mta_range). That is
// the authors' F.conv2d (cross-correlation) over the map padded with cq-1 zero rows above and w
// zero columns on both sides, with their kernel flipped: K[cq-1-a, w-b] = [a = 0, b = 0] + th[a,b].
// Backward: L is linear in X and in th, so dX[i-a, j-b] += (e00 + th)[a,b] dL[i,j] and
// dth[a,b] += dL[i,j] X[i-a, j-b] over the same ranges.
//
// Mixing, forward: Y_k = X_k + sum_m D[k,m] X_{g0(k)+m} entrywise on j <= i. Backward:
// dX_m = dY_m + sum_{k: m in G(k)} D[k, m-g0(k)] dY_k, dD[k,m] = <dY_k, X_{g0(k)+m}> (j <= i).
// Every loop runs in a fixed order: results do not depend on the caller's threading.
#include "attention/mta_conv.h"

#include <stddef.h>
#include <string.h>

// the causal range of output keys j for row i, query offset a, key offset b: j <= i,
// 0 <= j - b <= i - a; returns 0 when empty
static int mta_range(int i, int a, int b, int* lo, int* hi) {
    *lo = b > 0 ? b : 0;
    *hi = i - a + b < i ? i - a + b : i;
    return *lo <= *hi;
}

void mta_conv(real* L, const real* X, const real* th, const MtaKernel* k, int T) {
    for (int i = 0; i < T; i++) { // the identity tap, and zeros above the diagonal
        memcpy(L + (size_t)i * T, X + (size_t)i * T, sizeof(real) * (size_t)(i + 1));
        memset(L + (size_t)i * T + i + 1, 0, sizeof(real) * (size_t)(T - i - 1));
    }
    for (int a = 0; a < k->cq; a++)
        for (int b = -k->w; b <= k->w; b++) {
            const real kk = th[(size_t)a * k->ck + (b + k->w)];
            if (kk == 0.0f) continue;
            for (int i = a; i < T; i++) {
                int lo, hi;
                if (!mta_range(i, a, b, &lo, &hi)) continue;
                real* Li = L + (size_t)i * T;
                const real* Xi = X + (size_t)(i - a) * T;
                for (int j = lo; j <= hi; j++)
                    Li[j] += kk * Xi[j - b];
            }
        }
}

void mta_conv_backward(real* dX, real* dth, const real* dL, const real* X, const real* th,
                       const MtaKernel* k, int T) {
    for (int i = 0; i < T; i++)
        for (int j = 0; j <= i; j++)
            dX[(size_t)i * T + j] += dL[(size_t)i * T + j];
    for (int a = 0; a < k->cq; a++)
        for (int b = -k->w; b <= k->w; b++) {
            const size_t e = (size_t)a * k->ck + (b + k->w);
            const real kk = th[e];
            real g = 0.0f;
            for (int i = a; i < T; i++) {
                int lo, hi;
                if (!mta_range(i, a, b, &lo, &hi)) continue;
                const real* dLi = dL + (size_t)i * T;
                const real* Xi = X + (size_t)(i - a) * T;
                real* dXi = dX + (size_t)(i - a) * T;
                for (int j = lo; j <= hi; j++) {
                    g += dLi[j] * Xi[j - b];
                    dXi[j - b] += kk * dLi[j];
                }
            }
            dth[e] += g;
        }
}

// first head of the group of head k, and the group's size
static int mta_group(int k, int gs, int NH, int* size) {
    const int g0 = (k / gs) * gs;
    *size = g0 + gs <= NH ? gs : NH - g0;
    return g0;
}

void mta_mix(real* Y, const real* X, const real* D, int gs, int NH, int T) {
    const size_t TT = (size_t)T * T;
    for (int k = 0; k < NH; k++) {
        int gn;
        const int g0 = mta_group(k, gs, NH, &gn);
        real* Yk = Y + (size_t)k * TT;
        const real* Xk = X + (size_t)k * TT;
        for (int i = 0; i < T; i++) {
            memcpy(Yk + (size_t)i * T, Xk + (size_t)i * T, sizeof(real) * (size_t)(i + 1));
            memset(Yk + (size_t)i * T + i + 1, 0, sizeof(real) * (size_t)(T - i - 1));
        }
        for (int m = 0; m < gn; m++) {
            const real d = D[(size_t)k * gs + m];
            if (d == 0.0f) continue;
            const real* Xm = X + (size_t)(g0 + m) * TT;
            for (int i = 0; i < T; i++)
                for (int j = 0; j <= i; j++)
                    Yk[(size_t)i * T + j] += d * Xm[(size_t)i * T + j];
        }
    }
}

void mta_mix_backward(real* dX, real* dD, const real* dY, const real* X, const real* D, int gs,
                      int NH, int T) {
    const size_t TT = (size_t)T * T;
    for (int m = 0; m < NH; m++)
        for (int i = 0; i < T; i++)
            memcpy(dX + (size_t)m * TT + (size_t)i * T, dY + (size_t)m * TT + (size_t)i * T,
                   sizeof(real) * (size_t)(i + 1));
    for (int k = 0; k < NH; k++) {
        int gn;
        const int g0 = mta_group(k, gs, NH, &gn);
        const real* dYk = dY + (size_t)k * TT;
        for (int m = 0; m < gn; m++) {
            const real* Xm = X + (size_t)(g0 + m) * TT;
            real* dXm = dX + (size_t)(g0 + m) * TT;
            const real d = D[(size_t)k * gs + m];
            real g = 0.0f;
            for (int i = 0; i < T; i++)
                for (int j = 0; j <= i; j++) {
                    const size_t e = (size_t)i * T + j;
                    g += dYk[e] * Xm[e];
                    dXm[e] += d * dYk[e];
                }
            dD[(size_t)k * gs + m] += g;
        }
    }
}
