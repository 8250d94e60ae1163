// model/residual.c: Attention Residuals and Delta Attention Residuals, the `residual` model key.
//
// Notation. Sublayer s = 0 .. 2L-1 (block l: attention s = 2l, MLP s = 2l+1), f_s its branch
// (attnproj(attention(ln_1(.))) or fcproj(gelu(fc(ln_2(.))))), u_s its input, s = 2L the input of
// ln_f. Sources v_0 = the token (+ position) embedding, v_{i+1} = f_i(u_i): the sublayer
// outputs, which are the increments of the standard residual stream r (r_0 = v_0,
// r_{s+1} = r_s + f_s(u_s)). All are (B,T,C); the routing acts per position p over depth.
//
// Routing of sublayer s over the sources i = 0..s, with a learned pseudo-query w_s (C):
//   k_i = RMSNorm(v_i) = v_i * rho_i,  rho_i = 1 / sqrt(mean_c v_ic^2 + 1e-6)   (per position)
//   z_i = w_s . k_i,  alpha_{i->s} = softmax_i(z)  (over depth, per position)
//   residual = attnres:       u_s = sum_i alpha_{i->s} v_i                    (s = 0 .. 2L)
//   residual = delta_attnres: u_s = r_s + sum_i alpha_{i->s} v_i              (s = 1 .. 2L-1)
//                             u_0 = r_0, and ln_f reads r_2L (no final routing)
// attnres is Full Attention Residuals (Kimi Team, "Attention Residuals", arXiv 2603.15031,
// 2026): phi(q, k) = exp(q^T RMSNorm(k)), q = w_l a learned vector per layer, values the
// embedding and the earlier layer outputs, here at sublayer granularity (each attention and
// each MLP is a layer, as in the paper's figure), and ln_f's input routed with its own query
// (the paper's output aggregation). The stream r then plays no part: the routed mix replaces it.
// delta_attnres is Delta Attention Residuals (Luo, Cai, Hu, "Delta Attention Residuals", arXiv
// 2605.18855, 2026): route over the deltas v_i = h_{i+1} - h_i of the stream (r_0 counted as the
// first delta) and add the routed mix to the stream, as its official code's per-sublayer
// "delta" mode (wdlctc/delta-attention-residuals-code, read, not copied) does: the first
// sublayer, with no delta yet, reads the stream alone, and there is no final routing.
// The RMSNorm has no gain: w_s . (g * k) = (w_s * g) . k, so a per-sublayer gain adds nothing.
// Init: w_s = 0 (uniform routing at the start; both papers zero-initialise the queries).
// Parameters: "resid.query" (resid_query_rows, C), no weight decay.
//
// Backward of one routing, given du = dL/du_s (per position; gradients accumulate):
//   dv_i  += alpha_i du                                             (value path)
//   da_i   = du . v_i;  dz_i = alpha_i (da_i - sum_j alpha_j da_j)  (softmax VJP)
//   dw_s  += sum_p sum_i dz_i k_i
//   dk_i   = dz_i w_s;  dv_i += rho_i (dk_i - k_i mean_c(dk_i * k_i))   (RMSNorm VJP)
//          = rho_i dz_i (w_s - k_i z_i / C)     since mean_c(w_s * k_i) = z_i / C
//   delta_attnres: dr_s += du (the stream passes through u_s).
// d(f_s) = dr_{s+1} (the stream) + the sum of the routing gradients into v_{s+1} from every
// later sublayer: the backward walks sublayers in reverse, so every consumer of v_{s+1} has
// added its part into dV[s+1] before f_s's branch backward reads it.
// Threads: positions are independent (each owns its rows of every buffer); dw_s is reduced over
// positions in index order per channel block, so results do not depend on the thread count.
#include "model/residual.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define MAXS RESID_MAX_SRC
#define CBLK 64

int resid_query_rows(int mode, int n_layer) {
    if (mode == GPT2_RESID_ATTNRES) return 2 * n_layer + 1;
    if (mode == GPT2_RESID_DELTA) return 2 * n_layer - 1;
    return 0;
}

int resid_nsrc(int mode, int n_layer, int s) {
    if (mode == GPT2_RESID_ATTNRES) return s + 1;
    if (mode == GPT2_RESID_DELTA) return s >= 1 && s < 2 * n_layer ? s + 1 : 0;
    return 0;
}

static const char* const RESID_NAMES[GPT2_RESID_COUNT] = {
    [GPT2_RESID_STANDARD] = "standard",
    [GPT2_RESID_ATTNRES] = "attnres",
    [GPT2_RESID_DELTA] = "delta_attnres",
};

const char* resid_name(int residual) {
    return residual >= 0 && residual < GPT2_RESID_COUNT ? RESID_NAMES[residual] : NULL;
}

int resid_from_name(const char* name) {
    for (int r = 0; r < GPT2_RESID_COUNT; r++)
        if (RESID_NAMES[r] && strcmp(name, RESID_NAMES[r]) == 0) return r;
    return -1;
}

static int query_row(int mode, int s) {
    return mode == GPT2_RESID_ATTNRES ? s : s - 1;
}

double resid_bytes(int mode, int n_layer, int C_, int B, int T) {
    if (mode == GPT2_RESID_STANDARD) return 0;
    const double S = 2.0 * n_layer + 1, BT = (double)B * T, C = C_;
    return 4.0 * (2 * S * BT * C + S * BT * S + S * BT + 2 * BT * C + BT * S);
}

ResidState* resid_alloc(int mode, int n_layer, int C_, int B, int T) {
    if (mode == GPT2_RESID_STANDARD) return NULL;
    ASSERT(2 * n_layer + 1 <= MAXS);
    ResidState* r = mallocCheck(sizeof(*r));
    memset(r, 0, sizeof(*r));
    const size_t S = (size_t)(2 * n_layer + 1), C = (size_t)C_;
    r->mode = mode;
    r->L = n_layer;
    r->C = C_;
    r->S = (int)S;
    r->cap = (size_t)B * T;
    r->h = allocFloats(S * r->cap * C);
    r->alpha = allocFloats(S * r->cap * S);
    r->rho = allocFloats(S * r->cap);
    r->dV = allocFloats(S * r->cap * C);
    r->du = allocFloats(r->cap * C);
    r->dbr = allocFloats(r->cap * C);
    r->dz = allocFloats(r->cap * S);
    return r;
}

void resid_free(ResidState* r) {
    if (!r) return;
    free(r->h);
    free(r->alpha);
    free(r->rho);
    free(r->dV);
    free(r->du);
    free(r->dbr);
    free(r->dz);
    free(r);
}

// Source i of the last forward: the embedding, or block l's attention / MLP output.
static const float* source(const ResidSources* src, int i, size_t BTC) {
    if (i == 0) return src->emb;
    int l = (i - 1) / 2;
    return (i % 2 ? src->attproj : src->fcproj) + (size_t)l * BTC;
}

// Row s's pseudo-query in the "resid.query" tensor (or its gradient).
static size_t query_off(const ResidState* r, int s) {
    return (size_t)query_row(r->mode, s) * r->C;
}

const float* resid_forward(ResidState* r, int s, const float* r_s, const float* query,
                           const ResidSources* src, int B, int T) {
    const int C = r->C, S = r->S;
    const size_t BT = (size_t)B * T, BTC = BT * C;
    ASSERT(BT <= r->cap);
    if (s == 0) r->rho_done = 0, r->BT = BT;
    const int n = resid_nsrc(r->mode, r->L, s);
    if (n == 0) return r_s;
    const float* V[MAXS];
    for (int i = 0; i < n; i++)
        V[i] = source(src, i, BTC);
    for (int i = r->rho_done; i < n; i++) { // each source's RMS once per forward
        float* rho = r->rho + (size_t)i * BT;
#pragma omp parallel for schedule(static)
        for (size_t p = 0; p < BT; p++) {
            const float* v = V[i] + p * C;
            double ss = 0;
            for (int c = 0; c < C; c++)
                ss += (double)v[c] * v[c];
            rho[p] = (float)(1.0 / sqrt(ss / C + RESID_EPS));
        }
    }
    if (n > r->rho_done) r->rho_done = n;
    const float* w = query + query_off(r, s);
    const float* base = r->mode == GPT2_RESID_DELTA ? r_s : NULL;
    float* out = r->h + (size_t)s * BTC;
    float* alpha = r->alpha + (size_t)s * BT * S;
#pragma omp parallel for schedule(static)
    for (size_t p = 0; p < BT; p++) {
        float z[MAXS], mx = -INFINITY;
        for (int i = 0; i < n; i++) {
            const float* v = V[i] + p * C;
            double d = 0;
            for (int c = 0; c < C; c++)
                d += (double)w[c] * v[c];
            z[i] = (float)(d * r->rho[(size_t)i * BT + p]);
            if (z[i] > mx) mx = z[i];
        }
        double sum = 0;
        for (int i = 0; i < n; i++)
            sum += (z[i] = expf(z[i] - mx));
        float* a = alpha + p * S;
        for (int i = 0; i < n; i++)
            a[i] = (float)(z[i] / sum);
        float* o = out + p * C;
        for (int c = 0; c < C; c++)
            o[c] = base ? base[p * C + c] : 0.0f;
        for (int i = 0; i < n; i++) {
            const float* v = V[i] + p * C;
            for (int c = 0; c < C; c++)
                o[c] += a[i] * v[c];
        }
    }
    return out;
}

const float* resid_input(const ResidState* r, int s, const float* r_s) {
    if (resid_nsrc(r->mode, r->L, s) == 0) return r_s;
    return r->h + (size_t)s * r->BT * r->C;
}

void resid_backward_begin(ResidState* r) {
    memset(r->dV, 0, sizeof(float) * (size_t)r->S * r->BT * r->C);
}

const float* resid_branch_grad(ResidState* r, int s, const float* dres) {
    const size_t BTC = r->BT * r->C;
    const float* dv = r->dV + (size_t)(s + 1) * BTC;
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < BTC; k++)
        r->dbr[k] = dres[k] + dv[k];
    return r->dbr;
}

float* resid_dinput(ResidState* r) {
    memset(r->du, 0, sizeof(float) * r->BT * r->C);
    return r->du;
}

void resid_backward(ResidState* r, int s, float* dres, const float* query, float* dquery,
                    const ResidSources* src) {
    const int C = r->C, S = r->S;
    const size_t BT = r->BT, BTC = BT * C;
    const int n = resid_nsrc(r->mode, r->L, s);
    const float* du = r->du;
    if (n == 0) { // the input is the stream itself
#pragma omp parallel for schedule(static)
        for (size_t k = 0; k < BTC; k++)
            dres[k] += du[k];
        return;
    }
    const float* V[MAXS];
    for (int i = 0; i < n; i++)
        V[i] = source(src, i, BTC);
    const float* w = query + query_off(r, s);
    const float* alpha = r->alpha + (size_t)s * BT * S;
    const int delta = r->mode == GPT2_RESID_DELTA;
#pragma omp parallel for schedule(static)
    for (size_t p = 0; p < BT; p++) {
        const float* a = alpha + p * S;
        const float* g = du + p * C;
        float da[MAXS], z[MAXS];
        double dot = 0;
        for (int i = 0; i < n; i++) {
            const float* v = V[i] + p * C;
            double d = 0, zw = 0;
            for (int c = 0; c < C; c++) {
                d += (double)g[c] * v[c];
                zw += (double)w[c] * v[c];
            }
            da[i] = (float)d;
            z[i] = (float)(zw * r->rho[(size_t)i * BT + p]);
            dot += (double)a[i] * d;
        }
        float* dz = r->dz + p * S;
        for (int i = 0; i < n; i++) {
            dz[i] = (float)(a[i] * (da[i] - dot));
            const float rho = r->rho[(size_t)i * BT + p];
            const float* v = V[i] + p * C;
            float* dv = r->dV + (size_t)i * BTC + p * C;
            const float cz = rho * dz[i], kz = rho * z[i] / (float)C;
            for (int c = 0; c < C; c++)
                dv[c] += a[i] * g[c] + cz * (w[c] - kz * v[c]);
        }
        if (delta)
            for (int c = 0; c < C; c++)
                dres[p * C + c] += g[c];
    }
    // dw_s = sum_p sum_i dz_i rho_i v_i, per channel block, positions in order
    float* dw = dquery + query_off(r, s);
    const int nblk = (C + CBLK - 1) / CBLK;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < nblk; b++) {
        const int c0 = b * CBLK, c1 = c0 + CBLK < C ? c0 + CBLK : C;
        double acc[CBLK] = {0};
        for (size_t p = 0; p < BT; p++)
            for (int i = 0; i < n; i++) {
                const float f = r->dz[p * S + i] * r->rho[(size_t)i * BT + p];
                const float* v = V[i] + p * C;
                for (int c = c0; c < c1; c++)
                    acc[c - c0] += (double)f * v[c];
            }
        for (int c = c0; c < c1; c++)
            dw[c] += (float)acc[c - c0];
    }
}

void resid_embed_grad(ResidState* r, float* dres) {
    const size_t BTC = r->BT * r->C;
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < BTC; k++)
        dres[k] += r->dV[k];
}

int resid_max_weight(const ResidState* r, int s, double* sum, long* n) {
    *sum = 0;
    *n = 0;
    const int ns = r ? resid_nsrc(r->mode, r->L, s) : 0;
    if (ns == 0) return 0;
    const float* alpha = r->alpha + (size_t)s * r->BT * r->S;
    for (size_t p = 0; p < r->BT; p++) {
        float mx = 0;
        for (int i = 0; i < ns; i++)
            if (alpha[p * r->S + i] > mx) mx = alpha[p * r->S + i];
        *sum += mx;
    }
    *n = (long)r->BT;
    return ns;
}
