// attention/deltanet_onorm.c: the per-head output norm of the delta-rule layers, after
// flash-linear-attention (fla-org/flash-linear-attention): fla/layers/delta_net.py (use_gate =
// False by default: o_norm = RMSNorm(head_v_dim)) and fla/layers/gated_deltanet.py (use_gate =
// True by default: o_norm = FusedRMSNormGated(head_v_dim), activation swish, with g_proj a
// bias-free Linear(hidden, value_dim)); fla/modules/layernorm.py, fused_norm_gate.py.
//
// Per row (b, t) and head h, obar = the head's hs outputs, w (hs) the norm's weight shared by all
// heads (fla normalises the last dimension of (b, t, h, d) with one weight of size head_v_dim):
//   r = 1 / sqrt(mean_i obar_i^2 + 1e-5),  nh = obar r
//   o_i = nh_i w_i                              (rms)
//   o_i = nh_i w_i silu(g_i),  g = x_t W_g^T    (gated; g_i the channel h*hs + i of g, W_g (C, C))
// silu(g) = g sigmoid(g). The output no longer depends on the scale of obar (up to the eps).
//
// Backward, with s = silu(g) (1 for rms), dO the gradient of o:
//   dnh = dO w s;  dobar = r (dnh - nh mean(dnh nh))   (the RMSNorm VJP)
//   dw_i += sum over (b, t, h) of dO_i nh_i s_i
//   dg = dO nh w sigmoid(g) (1 + g (1 - sigmoid(g)));  dW_g += dG^T x;  dx += dG W_g
// dw is summed per channel over (b, t, h) in index order; the gate products run through the
// kernel layer (real_gemm) on fixed blocks of rows (of G, dx) and of output channels (of dW_g),
// so no sum depends on the thread count.
#include "attention/deltanet_onorm.h"

#include <math.h>

#include "common/matmul.h"

#define ON_BLOCK 64 // rows (or output channels) per gemm block

static real on_sigmoid(real z) {
    return 1.0f / (1.0f + real_exp(-z));
}

void dn_onorm_forward(const DnONorm* n) {
    const int C = n->C, NH = n->NH, hs = n->hs;
    const long BT = (long)n->B * n->T;
    if (n->gated) { // G = x W_g^T on fixed row blocks
        const long nblk = (BT + ON_BLOCK - 1) / ON_BLOCK;
#pragma omp parallel for schedule(static) num_threads(n->nthreads)
        for (long blk = 0; blk < nblk; blk++) {
            const long r0 = blk * ON_BLOCK, m = BT - r0 < ON_BLOCK ? BT - r0 : ON_BLOCK;
            real_gemm(0, 1, (int)m, C, C, 1.0f, n->x + (size_t)r0 * C, C, n->Wg, C, 0.0f,
                      n->G + (size_t)r0 * C, C);
        }
    }
#pragma omp parallel for schedule(static) num_threads(n->nthreads)
    for (long row = 0; row < BT; row++)
        for (int h = 0; h < NH; h++) {
            const size_t off = (size_t)row * C + (size_t)h * hs;
            const real* ob = n->obar + off;
            real ss = 0.0f;
            for (int i = 0; i < hs; i++)
                ss += ob[i] * ob[i];
            const real rs = 1.0f / real_sqrt(ss / (real)hs + DN_ONORM_EPS);
            n->r[(size_t)row * NH + h] = rs;
            real* o = n->out + off;
            for (int i = 0; i < hs; i++) {
                real s = 1.0f;
                if (n->gated) {
                    const real g = n->G[off + i];
                    s = g * on_sigmoid(g);
                }
                o[i] = ob[i] * rs * n->w[i] * s;
            }
        }
}

void dn_onorm_backward(const DnONorm* n) {
    const int C = n->C, NH = n->NH, hs = n->hs;
    const long BT = (long)n->B * n->T;
#pragma omp parallel for schedule(static) num_threads(n->nthreads)
    for (long row = 0; row < BT; row++)
        for (int h = 0; h < NH; h++) {
            const size_t off = (size_t)row * C + (size_t)h * hs;
            const real rs = n->r[(size_t)row * NH + h];
            const real* ob = n->obar + off;
            const real* dO = n->dout + off;
            real* dob = n->dobar + off;
            real m = 0.0f;
            for (int i = 0; i < hs; i++) {
                const real nh = ob[i] * rs;
                real s = 1.0f;
                if (n->gated) {
                    const real g = n->G[off + i], sg = on_sigmoid(g);
                    s = g * sg;
                    n->dG[off + i] = dO[i] * nh * n->w[i] * sg * (1.0f + g * (1.0f - sg));
                }
                dob[i] = dO[i] * n->w[i] * s; // dnh for now
                m += dob[i] * nh;
            }
            m /= (real)hs;
            for (int i = 0; i < hs; i++)
                dob[i] = rs * (dob[i] - ob[i] * rs * m);
        }
        // dw: one channel per iteration, (row, head) in index order
#pragma omp parallel for schedule(static) num_threads(n->nthreads)
    for (int i = 0; i < hs; i++) {
        real acc = 0.0f;
        for (long row = 0; row < BT; row++)
            for (int h = 0; h < NH; h++) {
                const size_t off = (size_t)row * C + (size_t)h * hs + (size_t)i;
                real s = 1.0f;
                if (n->gated) {
                    const real g = n->G[off];
                    s = g * on_sigmoid(g);
                }
                acc += n->dout[off] * n->obar[off] * n->r[(size_t)row * NH + h] * s;
            }
        n->dw[i] += acc;
    }
    if (!n->gated) return;
    // dW_g += dG^T x on fixed blocks of output channels; dx += dG W_g on fixed row blocks
    const int cblk = (C + ON_BLOCK - 1) / ON_BLOCK;
    const long rblk = (BT + ON_BLOCK - 1) / ON_BLOCK;
#pragma omp parallel num_threads(n->nthreads)
    {
#pragma omp for schedule(static) nowait
        for (int blk = 0; blk < cblk; blk++) {
            const int c0 = blk * ON_BLOCK, m = C - c0 < ON_BLOCK ? C - c0 : ON_BLOCK;
            real_gemm(1, 0, m, C, (int)BT, 1.0f, n->dG + c0, C, n->x, C, 1.0f,
                      n->dWg + (size_t)c0 * C, C);
        }
#pragma omp for schedule(static)
        for (long blk = 0; blk < rblk; blk++) {
            const long r0 = blk * ON_BLOCK, m = BT - r0 < ON_BLOCK ? BT - r0 : ON_BLOCK;
            real_gemm(0, 0, (int)m, C, C, 1.0f, n->dG + (size_t)r0 * C, C, n->Wg, C, 1.0f,
                      n->dx + (size_t)r0 * C, C);
        }
    }
}
