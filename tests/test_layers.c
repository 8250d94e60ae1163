// tests/test_layers.c: finite-difference gradient checks (loss in double) for every GPT-2 layer
// in model/layers.c, sgemm matmul against the naive reference, GELU and LayerNorm forward values
// against their definitions, and 1 vs 2 threads identical; the element-wise layers and
// LayerNorm read and write only their n (or N x C) elements: every buffer is followed by guard
// floats, NaN after inputs (a read past the end poisons the result) and a bit pattern after
// outputs (a write past the end shows), at a length that is not a multiple of the allocator's
// 64-byte rounding (so a one-past loop does not land in padding unseen).
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "model/layers.h"
#include "tests/ref_kernels.h"
#include "tests/testutil.h"

// Generic harness: the layer's forward maps the buffers under test to `out`; the loss is
// sum(w * out) in double; backward gets dout = w.
typedef struct {
    int kind;
    int N, C, OC, B, T, V, Vp;
    float *inp, *weight, *bias, *out, *w, *mean, *rstd, *wpe, *lse;
    int *tok, *targets;
} LayerCase;

enum { K_MATMUL, K_LAYERNORM, K_GELU, K_RESIDUAL, K_ENCODER, K_CROSSENT };

static void lc_forward(LayerCase* c) {
    switch (c->kind) {
    case K_MATMUL:
        matmul_forward(c->out, c->inp, c->weight, c->bias, c->N, c->C, c->OC);
        break;
    case K_LAYERNORM:
        layernorm_forward(c->out, c->mean, c->rstd, c->inp, c->weight, c->bias, c->N, c->C);
        break;
    case K_GELU:
        gelu_forward(c->out, c->inp, (size_t)c->N * c->C);
        break;
    case K_RESIDUAL:
        residual_forward(c->out, c->inp, c->weight, (size_t)c->N * c->C);
        break;
    case K_ENCODER:
        encoder_forward(c->out, c->tok, c->weight, c->wpe, c->B, c->T, c->C);
        break;
    case K_CROSSENT:
        crossentropy_forward(c->out, c->lse, c->inp, c->targets, c->N, c->V, c->Vp);
        break;
    }
}

static size_t lc_out_size(const LayerCase* c) {
    switch (c->kind) {
    case K_MATMUL:
        return (size_t)c->N * c->OC;
    case K_CROSSENT:
        return (size_t)c->N;
    default:
        return (size_t)c->N * c->C;
    }
}

static double lc_loss(void* p) {
    LayerCase* c = p;
    lc_forward(c);
    double L = 0;
    for (size_t i = 0; i < lc_out_size(c); i++)
        L += (double)c->w[i] * (double)c->out[i];
    return L;
}

static void expect_grad(LayerCase* c, float* x, const float* g, size_t n, const char* what) {
    float gm = max_abs(g, n);
    GradCheck r = gradcheck(lc_loss, c, x, g, n, 1e-2f, 1e-4 * gm + 1e-7, 400);
    ck_assert_msg(r.max_err <= 1.0, "%s: d%s[%zu] analytic %.8g numeric %.8g (err %.3g)",
                  (const char*[]){"matmul", "layernorm", "gelu", "residual", "encoder",
                                  "crossentropy"}[c->kind],
                  what, r.worst, r.ana, r.num, r.max_err);
    ck_assert(r.checked > 0);
}

START_TEST(test_matmul_grad) {
    Rng r;
    rng_seed(&r, 1);
    LayerCase c = {.kind = K_MATMUL, .N = 6, .C = 20, .OC = 36};
    c.inp = allocFloats(6 * 20);
    c.weight = allocFloats(36 * 20);
    c.bias = allocFloats(36);
    c.out = allocFloats(6 * 36);
    c.w = allocFloats(6 * 36);
    fill_normal(c.inp, 120, 1, &r);
    fill_normal(c.weight, 720, 0.5f, &r);
    fill_normal(c.bias, 36, 0.5f, &r);
    fill_normal(c.w, 216, 1, &r);
    float* di = allocFloats(120);
    float* dw = allocFloats(720);
    float* db = allocFloats(36);
    matmul_backward(di, dw, db, c.w, c.inp, c.weight, 6, 20, 36);
    expect_grad(&c, c.inp, di, 120, "inp");
    expect_grad(&c, c.weight, dw, 720, "weight");
    expect_grad(&c, c.bias, db, 36, "bias");
    // forward against the naive reference
    float* ref = allocFloats(216);
    matmul_forward(c.out, c.inp, c.weight, c.bias, 6, 20, 36);
    matmul_forward_ref(ref, c.inp, c.weight, c.bias, 6, 20, 36);
    ck_assert_msg(rel_diff(c.out, ref, 216) < 1e-5, "sgemm vs reference");
    free(ref), free(di), free(dw), free(db), free(c.inp), free(c.weight), free(c.bias);
    free(c.out), free(c.w);
}
END_TEST

START_TEST(test_layernorm_grad) {
    Rng r;
    rng_seed(&r, 2);
    const int N = 5, C = 12;
    LayerCase c = {.kind = K_LAYERNORM, .N = N, .C = C};
    c.inp = allocFloats(N * C), c.weight = allocFloats(C), c.bias = allocFloats(C);
    c.out = allocFloats(N * C), c.w = allocFloats(N * C), c.mean = allocFloats(N);
    c.rstd = allocFloats(N);
    fill_normal(c.inp, N * C, 2, &r);
    fill_normal(c.weight, C, 1, &r);
    fill_normal(c.bias, C, 1, &r);
    fill_normal(c.w, N * C, 1, &r);
    lc_forward(&c);
    float *di = allocFloats(N * C), *dw = allocFloats(C), *db = allocFloats(C);
    layernorm_backward(di, dw, db, c.w, c.inp, c.weight, c.mean, c.rstd, N, C);
    expect_grad(&c, c.inp, di, N * C, "inp");
    expect_grad(&c, c.weight, dw, C, "weight");
    expect_grad(&c, c.bias, db, C, "bias");
    // closed form: each output row has mean = mean(bias) when weight = 1... check normalisation
    for (int i = 0; i < C; i++)
        c.weight[i] = 1, c.bias[i] = 0;
    lc_forward(&c);
    for (int n = 0; n < N; n++) {
        double s = 0, s2 = 0;
        for (int i = 0; i < C; i++)
            s += c.out[n * C + i], s2 += c.out[n * C + i] * c.out[n * C + i];
        ck_assert_msg(fabs(s / C) < 1e-5 && fabs(s2 / C - 1) < 1e-3, "row %d not normalised", n);
    }
    free(di), free(dw), free(db), free(c.inp), free(c.weight), free(c.bias), free(c.out);
    free(c.w), free(c.mean), free(c.rstd);
}
END_TEST

START_TEST(test_gelu_residual_grad) {
    Rng r;
    rng_seed(&r, 3);
    const int N = 4, C = 10;
    LayerCase c = {.kind = K_GELU, .N = N, .C = C};
    c.inp = allocFloats(N * C), c.out = allocFloats(N * C), c.w = allocFloats(N * C);
    c.weight = allocFloats(N * C);
    fill_normal(c.inp, N * C, 2, &r);
    fill_normal(c.weight, N * C, 2, &r);
    fill_normal(c.w, N * C, 1, &r);
    float* di = allocFloats(N * C);
    gelu_backward(di, c.inp, c.w, N * C);
    expect_grad(&c, c.inp, di, N * C, "inp");
    // GELU closed forms: gelu(0) = 0, gelu(x) -> x for large x, -> 0 for very negative x
    float xs[3] = {0.0f, 10.0f, -10.0f}, ys[3];
    gelu_forward(ys, xs, 3);
    ck_assert(fabsf(ys[0]) < 1e-7f && fabsf(ys[1] - 10.0f) < 1e-5f && fabsf(ys[2]) < 1e-5f);
    c.kind = K_RESIDUAL;
    float* da = allocFloats(N * C);
    float* db = allocFloats(N * C);
    residual_backward(da, db, c.w, N * C);
    expect_grad(&c, c.inp, da, N * C, "a");
    expect_grad(&c, c.weight, db, N * C, "b");
    free(di), free(da), free(db), free(c.inp), free(c.out), free(c.w), free(c.weight);
}
END_TEST

START_TEST(test_encoder_grad) {
    Rng r;
    rng_seed(&r, 4);
    const int B = 2, T = 3, C = 8, V = 5;
    LayerCase c = {.kind = K_ENCODER, .N = B * T, .C = C, .B = B, .T = T};
    int tok[6] = {1, 4, 1, 0, 1, 3}; // repeated ids accumulate
    c.tok = tok;
    c.weight = allocFloats(V * C), c.wpe = allocFloats(T * C);
    c.out = allocFloats(B * T * C), c.w = allocFloats(B * T * C);
    fill_normal(c.weight, V * C, 1, &r);
    fill_normal(c.wpe, T * C, 1, &r);
    fill_normal(c.w, B * T * C, 1, &r);
    float *dwte = allocFloats(V * C), *dwpe = allocFloats(T * C);
    encoder_backward(dwte, dwpe, c.w, tok, B, T, C);
    expect_grad(&c, c.weight, dwte, V * C, "wte");
    expect_grad(&c, c.wpe, dwpe, T * C, "wpe");
    free(dwte), free(dwpe), free(c.weight), free(c.wpe), free(c.out), free(c.w);
}
END_TEST

START_TEST(test_crossentropy_grad) {
    Rng r;
    rng_seed(&r, 5);
    const int N = 4, V = 7, Vp = 16;
    LayerCase c = {.kind = K_CROSSENT, .N = N, .V = V, .Vp = Vp};
    int targets[4] = {0, 6, 3, 3};
    c.targets = targets;
    c.inp = allocFloats(N * Vp), c.out = allocFloats(N), c.w = allocFloats(N);
    c.lse = allocFloats(N);
    fill_normal(c.inp, N * Vp, 2, &r);
    for (int n = 0; n < N; n++)
        c.inp[n * Vp + V + 2] = 1e30f; // padded logits must never count
    for (int n = 0; n < N; n++)
        c.w[n] = 0.25f; // the mean loss
    lc_forward(&c);
    // closed form for row 0 in double
    double m = -1e300, s = 0;
    for (int v = 0; v < V; v++)
        m = fmax(m, c.inp[v]);
    for (int v = 0; v < V; v++)
        s += exp(c.inp[v] - m);
    ck_assert_msg(fabs(c.out[0] - (m + log(s) - c.inp[targets[0]])) < 1e-5, "loss row 0");
    float* dl = allocFloats(N * Vp);
    crossentropy_backward(dl, c.inp, c.lse, targets, 0.25f, N, V, Vp);
    for (int n = 0; n < N; n++)
        for (int v = V; v < Vp; v++)
            ck_assert(dl[n * Vp + v] == 0.0f);
    // the padded entries are excluded from the check (their gradient is 0 by definition)
    for (int n = 0; n < N; n++)
        c.inp[n * Vp + V + 2] = 0.0f;
    for (int n = 0; n < N; n++) {
        GradCheck g =
            gradcheck(lc_loss, &c, c.inp + n * Vp, dl + n * Vp, (size_t)V, 1e-2f, 1e-7, 0);
        ck_assert_msg(g.max_err <= 1.0, "crossentropy dlogits row %d err %.3g", n, g.max_err);
    }
    free(dl), free(c.inp), free(c.out), free(c.w), free(c.lse);
}
END_TEST

START_TEST(test_threads_identical) {
    // matmul, layernorm and encoder at GPT-2-like shapes: 1 vs 2 threads bitwise equal
    Rng r;
    rng_seed(&r, 6);
    const int N = 96, C = 192, OC = 576, V = 300;
    float *inp = allocFloats(N * C), *w = allocFloats(OC * C), *b = allocFloats(OC);
    float *dout = allocFloats(N * OC), *out[2], *di[2], *dw[2], *db[2];
    fill_normal(inp, N * C, 1, &r);
    fill_normal(w, OC * C, 0.1f, &r);
    fill_normal(b, OC, 0.1f, &r);
    fill_normal(dout, N * OC, 1, &r);
    int* tok = mallocCheck(sizeof(int) * N);
    for (int i = 0; i < N; i++)
        tok[i] = (int)rng_below(&r, V);
    float *wte = allocFloats(V * C), *dwte[2], *lnout[2], *dln[2], *mean = allocFloats(N);
    float* rstd = allocFloats(N);
    fill_normal(wte, V * C, 1, &r);
    for (int k = 0; k < 2; k++) {
        omp_set_num_threads(k + 1);
        out[k] = allocFloats(N * OC), di[k] = allocFloats(N * C), dw[k] = allocFloats(OC * C);
        db[k] = allocFloats(OC), dwte[k] = allocFloats(V * C), lnout[k] = allocFloats(N * C);
        dln[k] = allocFloats(N * C);
        matmul_forward(out[k], inp, w, b, N, C, OC);
        matmul_backward(di[k], dw[k], db[k], dout, inp, w, N, C, OC);
        encoder_backward(dwte[k], NULL, inp, tok, 1, N, C);
        layernorm_forward(lnout[k], mean, rstd, inp, w, b, N, C);
        float* g1 = allocFloats(C);
        float* g2 = allocFloats(C);
        layernorm_backward(dln[k], g1, g2, dout, inp, w, mean, rstd, N, C);
        free(g1), free(g2);
    }
    omp_set_num_threads(2);
    ck_assert(memcmp(out[0], out[1], sizeof(float) * N * OC) == 0);
    ck_assert(memcmp(di[0], di[1], sizeof(float) * N * C) == 0);
    ck_assert(memcmp(dw[0], dw[1], sizeof(float) * OC * C) == 0);
    ck_assert(memcmp(db[0], db[1], sizeof(float) * OC) == 0);
    ck_assert(memcmp(dwte[0], dwte[1], sizeof(float) * V * C) == 0);
    ck_assert(memcmp(lnout[0], lnout[1], sizeof(float) * N * C) == 0);
    ck_assert(memcmp(dln[0], dln[1], sizeof(float) * N * C) == 0);
    for (int k = 0; k < 2; k++) {
        free(out[k]), free(di[k]), free(dw[k]), free(db[k]), free(dwte[k]), free(lnout[k]);
        free(dln[k]);
    }
    free(inp), free(w), free(b), free(dout), free(tok), free(wte), free(mean), free(rstd);
}
END_TEST

// Forward values against the definitions, in double. GELU (tanh form, GPT-2 / Hendrycks &
// Gimpel): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); the points include |x| ~ 1, where a
// changed constant (0.044715 -> 0.05) moves the output by ~1e-3. LayerNorm (PyTorch, as GPT-2):
// (x - mean) / sqrt(var + 1e-5) * w + b with the biased variance; rows of std 0.05, where an
// epsilon of 1e-3 instead of 1e-5 would shrink the output by ~30%.
START_TEST(test_forward_definitions) {
    const float xs[] = {-3.0f, -1.5f, -1.0f, -0.5f, 0.0f, 0.25f, 0.75f, 1.0f, 1.7f, 4.0f};
    const int nx = (int)(sizeof(xs) / sizeof(xs[0]));
    float ys[16];
    gelu_forward(ys, xs, (size_t)nx);
    for (int i = 0; i < nx; i++) {
        double x = xs[i];
        double ref = 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
        ck_assert_msg(fabs(ys[i] - ref) <= 2e-7 + 2e-6 * fabs(ref), "gelu(%g) = %.9g, want %.9g", x,
                      (double)ys[i], ref);
    }
    enum { N = 3, C = 24 };
    Rng r;
    rng_seed(&r, 11);
    float x[N * C], w[C], b[C], out[N * C], mean[N], rstd[N];
    fill_normal(x, N * C, 0.05f, &r);
    for (int i = 0; i < N * C; i++)
        x[i] += 0.3f * (float)(i / C); // rows with different means
    fill_normal(w, C, 1.0f, &r);
    fill_normal(b, C, 1.0f, &r);
    layernorm_forward(out, mean, rstd, x, w, b, N, C);
    for (int n = 0; n < N; n++) {
        double mu = 0, var = 0;
        for (int i = 0; i < C; i++)
            mu += x[n * C + i];
        mu /= C;
        for (int i = 0; i < C; i++)
            var += (x[n * C + i] - mu) * (x[n * C + i] - mu);
        var /= C;
        double rs = 1.0 / sqrt(var + 1e-5);
        ck_assert_msg(fabs(mean[n] - mu) < 1e-6 && fabs(rstd[n] - rs) < 1e-4 * rs,
                      "row %d: mean %.7g rstd %.7g, want %.7g %.7g", n, (double)mean[n],
                      (double)rstd[n], mu, rs);
        for (int i = 0; i < C; i++) {
            double ref = (x[n * C + i] - mu) * rs * w[i] + b[i];
            ck_assert_msg(fabs(out[n * C + i] - ref) < 1e-4 * (1.0 + fabs(ref)),
                          "layernorm row %d [%d] = %.7g, want %.7g", n, i, (double)out[n * C + i],
                          ref);
        }
    }
}
END_TEST

// LayerNorm sums its rows' statistics several rows side by side (model/layers.c, LN_ROWS): every
// value must be bit for bit what one row at a time gives, written here as the plain float loops
// of the definition. N = 19: two full groups of 8 and a tail of 3; bf16 copy included.
START_TEST(test_layernorm_row_groups_exact) {
    enum { N = 19, C = 37 };
    Rng r;
    rng_seed(&r, 29);
    float x[N * C], w[C], b[C], out[N * C], mean[N], rstd[N], dy[N * C];
    float dx[N * C], dx0[N * C], dw[C], db[C];
    bf16 oh[N * C];
    fill_normal(x, N * C, 1.0f, &r);
    for (int i = 0; i < N * C; i++)
        x[i] += 0.1f * (float)(i / C);
    fill_normal(w, C, 1.0f, &r);
    fill_normal(b, C, 1.0f, &r);
    fill_normal(dy, N * C, 1.0f, &r);
    fill_normal(dx0, N * C, 1.0f, &r);
    layernorm_forward_h(out, oh, mean, rstd, x, w, b, N, C);
    memcpy(dx, dx0, sizeof(dx));
    memset(dw, 0, sizeof(dw));
    memset(db, 0, sizeof(db));
    layernorm_backward(dx, dw, db, dy, x, w, mean, rstd, N, C);
    for (int n = 0; n < N; n++) {
        const float* xr = x + n * C;
        float m = 0.0f, v = 0.0f;
        for (int i = 0; i < C; i++)
            m += xr[i];
        m /= (float)C;
        for (int i = 0; i < C; i++) {
            float d = xr[i] - m;
            v += d * d;
        }
        v /= (float)C;
        const float s = 1.0f / sqrtf(v + 1e-5f);
        ck_assert_msg(memcmp(&m, &mean[n], 4) == 0 && memcmp(&s, &rstd[n], 4) == 0,
                      "row %d: mean %.9g rstd %.9g, want %.9g %.9g", n, mean[n], rstd[n], m, s);
        float gm = 0.0f, gxm = 0.0f;
        for (int i = 0; i < C; i++) {
            const float o = (xr[i] - m) * s * w[i] + b[i];
            ck_assert_msg(memcmp(&o, &out[n * C + i], 4) == 0 &&
                              oh[n * C + i] == bf16_from_float(o),
                          "row %d [%d]: %.9g, want %.9g", n, i, out[n * C + i], o);
            float xh = (xr[i] - m) * s;
            float g = dy[n * C + i] * w[i];
            gm += g;
            gxm += g * xh;
        }
        gm /= (float)C;
        gxm /= (float)C;
        for (int i = 0; i < C; i++) {
            float xh = (xr[i] - m) * s;
            const float want = dx0[n * C + i] + s * (dy[n * C + i] * w[i] - gm - xh * gxm);
            ck_assert_msg(memcmp(&want, &dx[n * C + i], 4) == 0, "dx row %d [%d]: %.9g, want %.9g",
                          n, i, dx[n * C + i], want);
        }
    }
}
END_TEST

// ---------------------------------------------------------------------------------------------
// bounds of the element-wise layers and LayerNorm

enum { LGUARD = 16 };
static const uint32_t LPATTERN = 0x7f8a5a5au; // a signalling-NaN bit pattern no layer writes

// a buffer of n floats (filled normal) followed by LGUARD guard floats: NaN after inputs, the
// pattern after outputs
static float* guarded(size_t n, int output, Rng* r) {
    float* x = allocFloats(n + LGUARD);
    fill_normal(x, n, 1.0f, r);
    for (int k = 0; k < LGUARD; k++) {
        if (output)
            memcpy(&x[n + k], &LPATTERN, sizeof(float));
        else
            x[n + k] = NAN;
    }
    return x;
}

static void check_out(const float* x, size_t n, const char* what) {
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(isfinite(x[i]), "%s[%zu] = %g (an input read past its end?)", what, i,
                      (double)x[i]);
    for (int k = 0; k < LGUARD; k++)
        ck_assert_msg(memcmp(&x[n + k], &LPATTERN, sizeof(float)) == 0,
                      "%s: written %d floats past the end", what, k + 1);
}

START_TEST(test_layer_bounds) {
    Rng r;
    rng_seed(&r, 21);
    const int N = 3, C = 7; // 21 floats: 84 bytes, not a multiple of 64
    const size_t n = (size_t)N * C;
    float *a = guarded(n, 0, &r), *b = guarded(n, 0, &r), *dout = guarded(n, 0, &r);
    float *w = guarded((size_t)C, 0, &r), *bias = guarded((size_t)C, 0, &r);
    float *out = guarded(n, 1, &r), *da = guarded(n, 1, &r), *db = guarded(n, 1, &r);
    float *mean = guarded((size_t)N, 1, &r), *rstd = guarded((size_t)N, 1, &r);
    float *dw = guarded((size_t)C, 1, &r), *dbias = guarded((size_t)C, 1, &r);
    gelu_forward(out, a, n);
    check_out(out, n, "gelu_forward out");
    gelu_backward(da, a, dout, n);
    check_out(da, n, "gelu_backward dinp");
    residual_forward(out, a, b, n);
    check_out(out, n, "residual_forward out");
    residual_backward(da, db, dout, n);
    check_out(da, n, "residual_backward da");
    check_out(db, n, "residual_backward db");
    layernorm_forward(out, mean, rstd, a, w, bias, N, C);
    check_out(out, n, "layernorm_forward out");
    check_out(mean, (size_t)N, "layernorm_forward mean");
    check_out(rstd, (size_t)N, "layernorm_forward rstd");
    // the backward reads the forward's mean and rstd: give them input guards now
    for (int k = 0; k < LGUARD; k++)
        mean[N + k] = rstd[N + k] = NAN;
    layernorm_backward(da, dw, dbias, dout, a, w, mean, rstd, N, C);
    check_out(da, n, "layernorm_backward dinp");
    check_out(dw, (size_t)C, "layernorm_backward dweight");
    check_out(dbias, (size_t)C, "layernorm_backward dbias");
    float* all[] = {a, b, dout, w, bias, out, da, db, mean, rstd, dw, dbias};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        free(all[i]);
}
END_TEST

static Suite* layers_suite(void) {
    Suite* s = suite_create("layers");
    TCase* tc = tcase_create("gradcheck");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_matmul_grad);
    tcase_add_test(tc, test_layernorm_grad);
    tcase_add_test(tc, test_gelu_residual_grad);
    tcase_add_test(tc, test_encoder_grad);
    tcase_add_test(tc, test_crossentropy_grad);
    tcase_add_test(tc, test_threads_identical);
    tcase_add_test(tc, test_forward_definitions);
    tcase_add_test(tc, test_layernorm_row_groups_exact);
    tcase_add_test(tc, test_layer_bounds);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(layers_suite)
