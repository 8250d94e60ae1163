// attention/fire.c: pos_encoding = fire, the functional interpolation for relative positions
// (S. Li et al. 2023, "Functional Interpolation for Relative Positions Improves Long Context
// Transformers", arXiv 2310.04418, ICLR 2024).
//
// Forward. For query t and key j <= t (0-based positions), every head h adds a learned bias to
// its attention logit, s_tj += b_h(t, j), with
//   x(t, j)   = psi(t - j) / psi(max(L, t)),   psi(r) = ln(|c| r + 1)      (progressive
//               interpolation: x is in [0, 1] for every t, so longer sequences than the training
//               length map into the same input range once t > L)
//   z_k       = W1_k x + b1_k,  g_k = max(z_k, 0)                            (k < H = 32)
//   b_h(t, j) = sum_k W2_hk g_k + b2_h                                        (h < NH)
// The paper's f_theta is an MLP of the scalar x with one output per head; the transform c and
// the threshold L are learnable. We store L = 512 |l| (l initialised to 1, so L starts at 512)
// and use |c| (c initialised to 0.1), so psi stays monotone whatever sign the optimizer gives
// them. These initial values, the width 32 and one hidden ReLU layer are those of the FIRE port
// in ReaLLM-Forge (its fire_init_c = 0.1, fire_init_L = 512, fire_mlp_width = 32), which also
// keeps the threshold as a learnable multiplier of 512. Future keys (j > t) get no bias: the
// causal mask removes them before the row map.
//
// Parameters: one vector per layer (the model's tensor "fire", (n_layer, P), no weight decay),
//   theta = [c, l, W1 (H), b1 (H), W2 (NH, H), b2 (NH)],  P = 2 + 2H + NH H + NH.
// FIRE is not shared across layers here (ReaLLM-Forge's default; it has a shared option).
//
// VJP. With G_h(t, j) = sum_b dL/ds_bhtj (the driver keeps one slot per (b, h) and this file
// sums them over b in index order):
//   db2_h += G_h ;  dW2_hk += G_h g_k ;  dg_k = sum_h G_h W2_hk ;  dz_k = dg_k [z_k > 0]
//   dW1_k += dz_k x ;  db1_k += dz_k ;  dx = sum_k dz_k W1_k
//   with N = psi(t - j), D = psi(m), m = max(L, t), a = |c|:
//   dx/da = ((t - j)/(a (t - j) + 1) - x m/(a m + 1)) / D
//   dx/dm = -x a / ((a m + 1) D),  dm/dL = [L > t],  dL/dl = 512 sign(l),  da/dc = sign(c).
//
// Numerics: psi(m) > 0 for a > 0 and m >= L > 0; at a = 0 or l = 0 the ratio is 0/0 and x is
// taken as 0 (never reached from the init in practice). psi uses log1p. Cost per layer: the
// MLP at T(T+1)/2 pairs, (H + NH H) multiply-adds each, in forward and twice in backward
// (recompute + VJP); the bias table is (NH, T, T).
// Threading: rows t are independent in forward; backward writes a private dtheta row per t and
// sums the rows in index order, so results do not depend on the thread count. Nothing here
// allocates: the rows are the caller's (the workspace's, attn_workspace_prepare_pos).
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "attention/posenc.h"
#include "common/rng.h"
#include "common/util.h"

enum { FH = ATTN_FIRE_HIDDEN };

int attn_fire_nparams(int NH) {
    return 2 + 2 * FH + NH * FH + NH;
}

typedef struct {
    real a, sa; // |c| and sign(c)
    real L, sl; // 512 |l| and sign(l)
    const real *W1, *b1, *W2, *b2;
} FireView;

static FireView fire_view(const real* th, int NH) {
    FireView f;
    f.a = real_fabs(th[0]);
    f.sa = th[0] < 0 ? -1.0f : 1.0f;
    f.L = (real)ATTN_FIRE_L0 * real_fabs(th[1]);
    f.sl = th[1] < 0 ? -1.0f : 1.0f;
    f.W1 = th + 2;
    f.b1 = f.W1 + FH;
    f.W2 = f.b1 + FH;
    f.b2 = f.W2 + (size_t)NH * FH;
    return f;
}

static real fire_m(const FireView* f, int t) {
    return f->L > (real)t ? f->L : (real)t;
}

// x(t, j) given D = psi(m)
static real fire_x(const FireView* f, int r, real D) {
    if (D <= 0.0f) return 0.0f;
    return real_log1p(f->a * (real)r) / D;
}

void attn_fire_init(real* theta, int NH, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    theta[0] = 0.1f;
    theta[1] = 1.0f;
    real* w = theta + 2;
    for (int k = 0; k < 2 * FH; k++) // W1, b1: U(-1, 1) (fan-in 1)
        w[k] = (real)(2.0 * rng_uniform_d(&r) - 1.0);
    const double bound = 1.0 / sqrt((double)FH);
    for (int k = 2 * FH; k < 2 * FH + NH * FH + NH; k++) // W2, b2: U(-1/sqrt(H), 1/sqrt(H))
        w[k] = (real)(bound * (2.0 * rng_uniform_d(&r) - 1.0));
}

// Row t of every head's bias: entries j <= t at out[h * ldh + j]. The one loop of both the table
// and the single row, so the two agree bit for bit.
static void fire_row(real* out, size_t ldh, const FireView* f, int NH, int t) {
    const real D = real_log1p(f->a * fire_m(f, t));
    real g[FH];
    for (int j = 0; j <= t; j++) {
        const real x = fire_x(f, t - j, D);
        for (int k = 0; k < FH; k++) {
            const real z = f->W1[k] * x + f->b1[k];
            g[k] = z > 0.0f ? z : 0.0f;
        }
        for (int h = 0; h < NH; h++) {
            const real* w2 = f->W2 + (size_t)h * FH;
            real s = f->b2[h];
            for (int k = 0; k < FH; k++)
                s += w2[k] * g[k];
            out[h * ldh + (size_t)j] = s;
        }
    }
}

void attn_fire_bias(real* bias, const real* theta, int NH, int T, int nthreads) {
    const FireView f = fire_view(theta, NH);
    const size_t TT = (size_t)T * T;
#pragma omp parallel for schedule(static) num_threads(nthreads > 0 ? nthreads : 1)
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < NH; h++)
            memset(bias + h * TT + (size_t)t * T + t + 1, 0, sizeof(real) * (size_t)(T - t - 1));
        fire_row(bias + (size_t)t * T, TT, &f, NH, t);
    }
}

void attn_fire_bias_row(real* bias, size_t ldh, const real* theta, int NH, int t) {
    const FireView f = fire_view(theta, NH);
    fire_row(bias, ldh, &f, NH, t);
}

size_t attn_fire_backward_scratch(int NH, int T) {
    return (size_t)T * (size_t)attn_fire_nparams(NH);
}

void attn_fire_backward(real* dtheta, const real* dbias, int B, const real* theta, int NH, int T,
                        int nthreads, real* rows) {
    const FireView f = fire_view(theta, NH);
    const int P = attn_fire_nparams(NH);
    const size_t TT = (size_t)T * T;
    ASSERT(NH <= ATTN_FIRE_MAX_HEADS); // attn_layer_check, at setup
    // rows: one private dtheta per query row (attn_fire_backward_scratch)
    memset(rows, 0, sizeof(real) * (size_t)T * (size_t)P);
#pragma omp parallel for schedule(dynamic, 4) num_threads(nthreads > 0 ? nthreads : 1)
    for (int t = 0; t < T; t++) {
        real* d = rows + (size_t)t * P;
        real *dW1 = d + 2, *db1 = dW1 + FH, *dW2 = db1 + FH, *db2 = dW2 + (size_t)NH * FH;
        const real m = fire_m(&f, t);
        const real D = real_log1p(f.a * m);
        real z[FH], g[FH], Gp[ATTN_FIRE_MAX_HEADS], dz[FH];
        for (int j = 0; j <= t; j++) {
            for (int h = 0; h < NH; h++) { // G_h = sum over b, in index order
                real s = 0.0f;
                for (int b = 0; b < B; b++)
                    s += dbias[((size_t)b * NH + h) * TT + (size_t)t * T + j];
                Gp[h] = s;
            }
            const real x = fire_x(&f, t - j, D);
            for (int k = 0; k < FH; k++) {
                z[k] = f.W1[k] * x + f.b1[k];
                g[k] = z[k] > 0.0f ? z[k] : 0.0f;
                dz[k] = 0.0f;
            }
            for (int h = 0; h < NH; h++) {
                const real gh = Gp[h];
                const real* w2 = f.W2 + (size_t)h * FH;
                real* dw2 = dW2 + (size_t)h * FH;
                db2[h] += gh;
                for (int k = 0; k < FH; k++) {
                    dw2[k] += gh * g[k];
                    dz[k] += gh * w2[k];
                }
            }
            real dx = 0.0f;
            for (int k = 0; k < FH; k++) {
                if (z[k] <= 0.0f) continue;
                dW1[k] += dz[k] * x;
                db1[k] += dz[k];
                dx += dz[k] * f.W1[k];
            }
            if (D <= 0.0f) continue;
            const real r = (real)(t - j);
            const real dxda = (r / (f.a * r + 1.0f) - x * m / (f.a * m + 1.0f)) / D;
            d[0] += dx * dxda * f.sa;
            if (f.L > (real)t) {
                const real dxdm = -x * f.a / ((f.a * m + 1.0f) * D);
                d[1] += dx * dxdm * (real)ATTN_FIRE_L0 * f.sl;
            }
        }
    }
    for (int t = 0; t < T; t++)
        for (int p = 0; p < P; p++)
            dtheta[p] += rows[(size_t)t * P + p];
}
