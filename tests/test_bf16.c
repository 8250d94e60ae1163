// tests/test_bf16.c: the bf16 kernel layer.
//   - fp32 -> bf16 rounding is round-to-nearest-even, checked against the two bf16 neighbours
//     of each value chosen in double (independent of the bit trick in common/bf16.h);
//   - the reference path (bf16_ref) equals a double-precision product of the rounded operands
//     within fp32 summation error, and the fp32 product of the unrounded operands within bf16's
//     bound |err| <= sum_k |a_k b_k| (2u + u^2 + K 2^-23), u = 2^-8 (and it does round);
//   - oneDNN bf16 against the reference within fp32 summation error only (same exact products),
//     for transposes, strides, alpha and beta; the primitive cache creates one per shape;
//   - the linear layer's forward, dinp and dweight in bf16 against fp32 within the bound;
//   - 1 vs 2 threads identical in bf16; registered weight copies are what the matmul reads;
//   - dispatch: fp32 / bf16_ref / auto / bf16 resolve as documented, and ./train with oneDNN
//     capped below bf16 (DNNL_MAX_CPU_ISA=AVX2) refuses bf16 with exit 2 and runs auto as fp32.
// oneDNN-specific checks print why and are skipped where the CPU has no native bf16 matmul.
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/bf16.h"
#include "common/dnnl_mm.h"
#include "common/matmul.h"
#include "common/util.h"
#include "data/shard.h"
#include "tests/testutil.h"

static const double U = 1.0 / 256; // bf16 unit roundoff (8-bit significand)

static int native(void) {
    return test_bf16_native("test_bf16");
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// ---------------------------------------------------------------------------------------------

START_TEST(test_rounding_nearest_even) {
    // exact ties at 1.0 (bf16 ulp 2^-7): 1 + 2^-8 -> 1 (even), 1 + 3 2^-8 -> 1 + 2^-6 (even)
    ck_assert_float_eq(bf16_to_float(bf16_from_float(1.0f + 0x1p-8f)), 1.0f);
    ck_assert_float_eq(bf16_to_float(bf16_from_float(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);
    ck_assert_float_eq(bf16_to_float(bf16_from_float(1.0f + 0x1p-8f + 0x1p-20f)), 1.0f + 0x1p-7f);
    ck_assert_float_eq(bf16_to_float(bf16_from_float(-(1.0f + 3 * 0x1p-8f))), -(1.0f + 0x1p-6f));
    ck_assert(isinf(bf16_to_float(bf16_from_float(3.4e38f)))); // past the largest bf16
    ck_assert(isinf(bf16_to_float(bf16_from_float(INFINITY))));
    ck_assert(isnan(bf16_to_float(bf16_from_float(from_bits(0x7F800001u))))); // NaN stays NaN
    // every value: one of its two bf16 neighbours (truncation and the next), the nearer in
    // double, ties to the even one
    Rng r;
    rng_seed(&r, 3);
    for (int i = 0; i < 200000; i++) {
        uint32_t u = (uint32_t)rng_below(&r, 0x7F000000u) | (i & 1 ? 0x80000000u : 0);
        float x = from_bits(u);
        uint32_t lo = u & 0xFFFF0000u, hi = lo + 0x10000u;
        double dlo = fabs((double)x - from_bits(lo)), dhi = fabs((double)from_bits(hi) - x);
        uint32_t want = dlo < dhi ? lo : dhi < dlo ? hi : ((lo >> 16) & 1 ? hi : lo);
        bf16 got = bf16_from_float(x);
        ck_assert_msg(got == (bf16)(want >> 16), "x=%a: got %04x want %04x", (double)x, got,
                      want >> 16);
        ck_assert(bf16_to_float(got) == from_bits((uint32_t)got << 16));
    }
    // bulk conversion = the scalar one
    float* v = allocFloats(100000);
    bf16* h = mallocCheck(sizeof(bf16) * 100000);
    fill_normal(v, 100000, 3.0f, &r);
    bf16_from_floats(h, v, 100000);
    for (int i = 0; i < 100000; i++)
        ck_assert(h[i] == bf16_from_float(v[i]));
    free(v);
    free(h);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// GEMM cases on strided views

typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc;
    float alpha, beta;
} GCase;

static const GCase CASES[] = {
    {0, 0, 33, 47, 65, 65, 47, 47, 1.0f, 0.0f},
    {0, 1, 64, 64, 64, 192, 192, 64, 0.125f, 0.0f},
    {1, 0, 40, 24, 70, 40, 72, 30, 0.5f, 1.0f},
    {0, 0, 64, 32, 64, 64, 96, 96, 1.0f, 1.0f},
    {1, 1, 17, 19, 23, 30, 25, 19, -1.0f, 1.0f},
    {0, 1, 128, 96, 256, 256, 256, 100, 1.0f, 0.0f},
    {1, 0, 128, 256, 64, 300, 256, 256, 1.0f, 1.0f},
};
#define NCASES ((int)(sizeof(CASES) / sizeof(CASES[0])))

typedef struct {
    float *A, *B, *C0;
    size_t na, nb, nc;
} GData;

static GData gdata(const GCase* g, Rng* r) {
    GData d;
    d.na = (size_t)(g->ta ? g->K : g->M) * g->lda;
    d.nb = (size_t)(g->tb ? g->N : g->K) * g->ldb;
    d.nc = (size_t)g->M * g->ldc;
    d.A = allocFloats(d.na);
    d.B = allocFloats(d.nb);
    d.C0 = allocFloats(d.nc);
    fill_uniform(d.A, d.na, -1.0f, 1.0f, r);
    fill_uniform(d.B, d.nb, -1.0f, 1.0f, r);
    fill_uniform(d.C0, d.nc, -1.0f, 1.0f, r);
    return d;
}

static void gfree(GData* d) {
    free(d->A);
    free(d->B);
    free(d->C0);
}

static float aat(const GCase* g, const float* A, int i, int k) {
    return g->ta ? A[(size_t)k * g->lda + i] : A[(size_t)i * g->lda + k];
}
static float bat(const GCase* g, const float* B, int k, int j) {
    return g->tb ? B[(size_t)j * g->ldb + k] : B[(size_t)k * g->ldb + j];
}

// C under test vs: exact (double) alpha sum(a b) + beta C0 with a, b rounded to bf16 or not.
// Returns max over elements of |C - ref| / (|alpha| sum|a b| * rel + |beta C0| 2^-23 + tiny).
static double gerr(const GCase* g, const GData* d, const float* C, int round, double rel) {
    double worst = 0;
    for (int i = 0; i < g->M; i++) {
        for (int j = 0; j < g->N; j++) {
            double s = 0, sa = 0;
            for (int k = 0; k < g->K; k++) {
                double a = aat(g, d->A, i, k), b = bat(g, d->B, k, j);
                if (round) {
                    a = bf16_to_float(bf16_from_float((float)a));
                    b = bf16_to_float(bf16_from_float((float)b));
                }
                s += a * b;
                sa += fabs(a * b);
            }
            double c0 = d->C0[(size_t)i * g->ldc + j];
            double ref = g->alpha * s + g->beta * c0;
            double tol = fabs(g->alpha) * sa * rel + fabs(g->beta * c0) * 0x1p-22 + 1e-30;
            double e = fabs(C[(size_t)i * g->ldc + j] - ref) / tol;
            if (e > worst) worst = e;
        }
    }
    return worst;
}

static float* run_case(const GCase* g, const GData* d) {
    float* C = allocFloats(d->nc);
    memcpy(C, d->C0, sizeof(float) * d->nc);
    mm_gemm(g->ta, g->tb, g->M, g->N, g->K, g->alpha, d->A, g->lda, d->B, g->ldb, g->beta, C,
            g->ldc);
    return C;
}

START_TEST(test_ref_gemm_bound) {
    Rng r;
    rng_seed(&r, 11);
    for (int c = 0; c < NCASES; c++) {
        const GCase* g = &CASES[c];
        GData d = gdata(g, &r);
        mm_set_precision(MM_BF16_REF);
        float* C = run_case(g, &d);
        mm_set_precision(MM_FP32);
        float* F = run_case(g, &d);
        const double sum_err = (g->K + 2) * 0x1p-23; // fp32 accumulation of K exact products
        // the rounded operands' exact product, up to fp32 summation
        double e1 = gerr(g, &d, C, 1, sum_err);
        ck_assert_msg(e1 <= 1.0, "case %d: ref vs rounded-exact %.3g of the bound", c, e1);
        // the unrounded product within bf16's bound
        double e2 = gerr(g, &d, C, 0, 2 * U + U * U + sum_err);
        ck_assert_msg(e2 <= 1.0, "case %d: ref vs fp32-exact %.3g of the bound", c, e2);
        // and it does round: fp32 sgemm meets the tight bound, the bf16 path does not
        ck_assert_msg(gerr(g, &d, F, 0, sum_err) <= 1.0, "case %d: fp32 sgemm off", c);
        ck_assert_msg(gerr(g, &d, C, 0, sum_err) > 1.0, "case %d: bf16_ref did not round", c);
        // elements outside the view (between ldc rows) untouched
        for (int i = 0; i < g->M; i++)
            for (int j = g->N; j < g->ldc; j++)
                ck_assert(C[(size_t)i * g->ldc + j] == d.C0[(size_t)i * g->ldc + j]);
        free(C);
        free(F);
        gfree(&d);
    }
}
END_TEST

START_TEST(test_onednn_vs_ref) {
    if (!native()) return;
    Rng r;
    rng_seed(&r, 12);
    for (int c = 0; c < NCASES; c++) {
        const GCase* g = &CASES[c];
        GData d = gdata(g, &r);
        mm_set_precision(MM_BF16);
        long before = dnnl_mm_primitives_created();
        float* C = run_case(g, &d);
        long after = dnnl_mm_primitives_created();
        float* C2 = run_case(g, &d); // same shape again: cached, same result
        ck_assert_int_eq(dnnl_mm_primitives_created(), after);
        ck_assert_msg(after - before <= 1, "case %d: %ld primitives for one shape", c,
                      after - before);
        ck_assert(memcmp(C, C2, sizeof(float) * d.nc) == 0);
        mm_set_precision(MM_FP32);
        // same exact products as the reference: only the fp32 summation order differs
        double e = gerr(g, &d, C, 1, (g->K + 2) * 0x1p-23);
        ck_assert_msg(e <= 1.0, "case %d: oneDNN vs rounded-exact %.3g of the bound", c, e);
        free(C);
        free(C2);
        gfree(&d);
    }
    ck_assert_msg(dnnl_mm_primitives_created() > 0, "oneDNN never ran natively");
}
END_TEST

// ---------------------------------------------------------------------------------------------
// the linear layer

static void linear_case(MMPrecision p, int nthreads, int N, int C, int OC, float* out, float* dinp,
                        float* dw) {
    Rng r;
    rng_seed(&r, 21);
    float* inp = allocFloats((size_t)N * C);
    float* w = allocFloats((size_t)OC * C);
    float* dout = allocFloats((size_t)N * OC);
    fill_uniform(inp, (size_t)N * C, -1.0f, 1.0f, &r);
    fill_uniform(w, (size_t)OC * C, -1.0f, 1.0f, &r);
    fill_uniform(dout, (size_t)N * OC, -1.0f, 1.0f, &r);
    omp_set_num_threads(nthreads);
    mm_set_precision(p);
    matmul_forward(out, inp, w, NULL, N, C, OC);
    memset(dinp, 0, sizeof(float) * (size_t)N * C);
    memset(dw, 0, sizeof(float) * (size_t)OC * C);
    matmul_backward(dinp, dw, NULL, dout, inp, w, N, C, OC);
    mm_set_precision(MM_FP32);
    omp_set_num_threads(2);
    free(inp);
    free(w);
    free(dout);
}

// max over elements of |x - y| / (K * bound) against the fp32 result y with |operands| <= 1:
// the bf16 error of an element is at most sum_k |a b| (2u + u^2) <= K (2u + u^2) plus summation
static double lin_err(const float* x, const float* y, size_t n, int K) {
    double worst = 0, tol = K * (2 * U + U * U + (K + 2) * 0x1p-22);
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)x[i] - y[i]) / tol;
        if (e > worst) worst = e;
    }
    return worst;
}

START_TEST(test_linear_bf16_vs_fp32) {
    const int N = 96, C = 160, OC = 288;
    float *o[3], *di[3], *dw[3];
    MMPrecision ps[3] = {MM_FP32, MM_BF16_REF, native() ? MM_BF16 : MM_BF16_REF};
    for (int k = 0; k < 3; k++) {
        o[k] = allocFloats((size_t)N * OC);
        di[k] = allocFloats((size_t)N * C);
        dw[k] = allocFloats((size_t)OC * C);
        linear_case(ps[k], 2, N, C, OC, o[k], di[k], dw[k]);
    }
    for (int k = 1; k < 3; k++) {
        ck_assert_msg(lin_err(o[k], o[0], (size_t)N * OC, C) <= 1.0, "forward %d", k);
        ck_assert_msg(lin_err(di[k], di[0], (size_t)N * C, OC) <= 1.0, "dinp %d", k);
        ck_assert_msg(lin_err(dw[k], dw[0], (size_t)OC * C, N) <= 1.0, "dweight %d", k);
        // and not fp32 in disguise
        ck_assert(memcmp(o[k], o[0], sizeof(float) * (size_t)N * OC) != 0);
        ck_assert(memcmp(dw[k], dw[0], sizeof(float) * (size_t)OC * C) != 0);
    }
    // typical relative error is bf16-sized, far below the worst-case bound
    double rd = rel_diff(o[2], o[0], (size_t)N * OC);
    ck_assert_msg(rd > 1e-5 && rd < 2e-2, "forward rel diff %.3g", rd);
    for (int k = 0; k < 3; k++) {
        free(o[k]);
        free(di[k]);
        free(dw[k]);
    }
}
END_TEST

START_TEST(test_linear_bf16_threads_identical) {
    const int N = 64, C = 192, OC = 320;
    MMPrecision ps[2] = {MM_BF16_REF, MM_BF16};
    for (int q = 0; q < 2; q++) {
        if (ps[q] == MM_BF16 && !native()) continue;
        float *o[2], *di[2], *dw[2];
        for (int k = 0; k < 2; k++) {
            o[k] = allocFloats((size_t)N * OC);
            di[k] = allocFloats((size_t)N * C);
            dw[k] = allocFloats((size_t)OC * C);
            linear_case(ps[q], k + 1, N, C, OC, o[k], di[k], dw[k]);
        }
        ck_assert(memcmp(o[0], o[1], sizeof(float) * (size_t)N * OC) == 0);
        ck_assert(memcmp(di[0], di[1], sizeof(float) * (size_t)N * C) == 0);
        ck_assert(memcmp(dw[0], dw[1], sizeof(float) * (size_t)OC * C) == 0);
        for (int k = 0; k < 2; k++) {
            free(o[k]);
            free(di[k]);
            free(dw[k]);
        }
    }
}
END_TEST

START_TEST(test_registered_copy_is_read) {
    // a registered copy stands in for the floats: register W2's bf16 copy at W's address
    const int N = 16, C = 32, OC = 48;
    Rng r;
    rng_seed(&r, 5);
    float* x = allocFloats((size_t)N * C);
    float* w = allocFloats((size_t)OC * C);
    float* w2 = allocFloats((size_t)OC * C);
    fill_uniform(x, (size_t)N * C, -1, 1, &r);
    fill_uniform(w, (size_t)OC * C, -1, 1, &r);
    fill_uniform(w2, (size_t)OC * C, -1, 1, &r);
    bf16* h2 = mallocCheck(sizeof(bf16) * (size_t)OC * C);
    bf16_from_floats(h2, w2, (size_t)OC * C);
    float* a = allocFloats((size_t)N * OC);
    float* b = allocFloats((size_t)N * OC);
    mm_set_precision(MM_BF16_REF);
    matmul_forward(a, x, w2, NULL, N, C, OC);
    mm_bf16_register(w, (size_t)OC * C, h2);
    matmul_forward(b, x, w, NULL, N, C, OC);
    ck_assert(memcmp(a, b, sizeof(float) * (size_t)N * OC) == 0);
    mm_bf16_unregister(w);
    matmul_forward(b, x, w, NULL, N, C, OC);
    ck_assert(memcmp(a, b, sizeof(float) * (size_t)N * OC) != 0);
    mm_set_precision(MM_FP32);
    free(x);
    free(w);
    free(w2);
    free(h2);
    free(a);
    free(b);
}
END_TEST

// The bias of the forward (added to the block in the merge of a strided block, after the product
// otherwise) and the backward's column sums give exactly what the plain loops give: out = (x W^T)
// + bias element by element, dbias = d0 + dout[0] + dout[1] + ... in row order. One block
// (OC = 64: the output is dense) and several (OC = 288: each block is merged into a strided C).
START_TEST(test_linear_bias_exact) {
    const int N = 40, C = 96;
    const int OCS[2] = {64, 288};
    MMPrecision ps[3] = {MM_FP32, MM_BF16_REF, MM_BF16};
    Rng r;
    rng_seed(&r, 77);
    for (int q = 0; q < 3; q++) {
        if (ps[q] == MM_BF16 && !native()) continue;
        for (int t = 0; t < 2; t++) {
            const int OC = OCS[t];
            float* x = allocFloats((size_t)N * C);
            float* w = allocFloats((size_t)OC * C);
            float* bias = allocFloats((size_t)OC);
            float* dout = allocFloats((size_t)N * OC);
            float* plain = allocFloats((size_t)N * OC);
            float* with = allocFloats((size_t)N * OC);
            float* dinp = allocFloats((size_t)N * C);
            float* dw = allocFloats((size_t)OC * C);
            float* dbias = allocFloats((size_t)OC);
            float* want = allocFloats((size_t)OC);
            fill_uniform(x, (size_t)N * C, -1, 1, &r);
            fill_uniform(w, (size_t)OC * C, -1, 1, &r);
            fill_uniform(bias, (size_t)OC, -1, 1, &r);
            fill_uniform(dout, (size_t)N * OC, -1, 1, &r);
            fill_uniform(dbias, (size_t)OC, -1, 1, &r);
            mm_set_precision(ps[q]);
            matmul_forward(plain, x, w, NULL, N, C, OC);
            matmul_forward(with, x, w, bias, N, C, OC);
            for (int i = 0; i < N; i++)
                for (int j = 0; j < OC; j++) {
                    const float e = plain[(size_t)i * OC + j] + bias[j];
                    ck_assert_msg(memcmp(&e, &with[(size_t)i * OC + j], 4) == 0,
                                  "precision %d OC %d: out[%d][%d] = %.9g, want %.9g", q, OC, i, j,
                                  with[(size_t)i * OC + j], e);
                }
            memcpy(want, dbias, sizeof(float) * (size_t)OC);
            for (int i = 0; i < N; i++)
                for (int j = 0; j < OC; j++)
                    want[j] += dout[(size_t)i * OC + j];
            matmul_backward(dinp, dw, dbias, dout, x, w, N, C, OC);
            mm_set_precision(MM_FP32);
            ck_assert_msg(memcmp(want, dbias, sizeof(float) * (size_t)OC) == 0,
                          "precision %d OC %d: dbias differs from the in-order column sums", q, OC);
            free(x);
            free(w);
            free(bias);
            free(dout);
            free(plain);
            free(with);
            free(dinp);
            free(dw);
            free(dbias);
            free(want);
        }
    }
}
END_TEST

// ---------------------------------------------------------------------------------------------
// dispatch

START_TEST(test_dispatch_resolve) {
    MMPrecision p;
    char info[384], err[1024];
    ck_assert_int_eq(mm_resolve_precision("fp32", &p, info, sizeof(info), err, sizeof(err)), 0);
    ck_assert_int_eq(p, MM_FP32);
    // the code path is named: OpenBLAS's kernel as OpenBLAS reports it, and the build's flags
    char want[128];
    snprintf(want, sizeof(want), "; OpenBLAS core %s; compiled -", openblas_get_corename());
    ck_assert_msg(strstr(info, want) != NULL && strstr(info, "(-march = "), "%s", info);
    ck_assert_int_eq(mm_resolve_precision("bf16_ref", &p, info, sizeof(info), err, sizeof(err)), 0);
    ck_assert_int_eq(p, MM_BF16_REF);
    ck_assert_int_ne(mm_resolve_precision("fp8", &p, info, sizeof(info), err, sizeof(err)), 0);
    ck_assert_int_eq(mm_resolve_precision("auto", &p, info, sizeof(info), err, sizeof(err)), 0);
    ck_assert_int_eq(p, native() ? MM_BF16 : MM_FP32);
    ck_assert_msg(strstr(info, "auto") != NULL, "%s", info);
    int rc = mm_resolve_precision("bf16", &p, info, sizeof(info), err, sizeof(err));
    if (native()) {
        ck_assert_int_eq(rc, 0);
        ck_assert_int_eq(p, MM_BF16);
        ck_assert_msg(strstr(info, "brg:") != NULL, "impl: %s", info);
    } else {
        ck_assert_int_ne(rc, 0);
        ck_assert_msg(strstr(err, "fp32") && strstr(err, "AVX512-BF16"), "%s", err);
    }
}
END_TEST

// ./train with oneDNN capped below bf16 (runs on every machine): bf16 is refused with exit 2,
// naming what is missing and suggesting fp32; auto falls back to fp32 and says so.
static int run_capped(const char* precision, const char* shard, const char* out, char* log,
                      size_t cap) {
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "cd %s && DNNL_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=1 %s/train configs/small.conf "
             "n_layer=1 n_head=2 n_embd=32 block_size=16 seq_len=16 batch_size=1 threads=1 "
             "max_steps=1 warmup_steps=0 eval_every=0 metrics_every=0 sample_every=0 "
             "vocab_size=257 tokenizer=byte val_data= train_data=%s precision=%s "
             "out_dir=%s > %s.log 2>&1",
             test_repo_root(), test_build_dir(), shard, precision, out, out);
    int st = system(cmd);
    char p[1100], e[256];
    snprintf(p, sizeof(p), "%s.log", out);
    size_t len;
    char* t = util_read_file(p, &len, e, sizeof(e));
    util_strlcpy(log, t ? t : "", cap);
    free(t);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(test_dispatch_capped_isa) {
    // a small byte-level shard of its own: the check needs no downloaded corpus
    const char* dir = test_tmpdir();
    char shard[1100], err[1024];
    snprintf(shard, sizeof(shard), "%s/train_000.bin", dir);
    uint16_t toks[4096];
    for (int i = 0; i < 4096; i++)
        toks[i] = (uint16_t)((i * 37 + i / 7) % 256);
    ck_assert_msg(shard_write(shard, toks, 4096, err, sizeof(err)) == 0, "%s", err);
    char out[1100], log[8192];
    snprintf(out, sizeof(out), "%s/bf16", dir);
    int rc = run_capped("bf16", shard, out, log, sizeof(log));
    ck_assert_msg(rc == 2, "rc %d: %s", rc, log);
    ck_assert_msg(strstr(log, "AVX512-BF16") && strstr(log, "precision = fp32"), "%s", log);
    snprintf(out, sizeof(out), "%s/auto", dir);
    rc = run_capped("auto", shard, out, log, sizeof(log));
    ck_assert_msg(rc == 0, "rc %d: %s", rc, log);
    ck_assert_msg(strstr(log, "precision: fp32 (auto: no native bf16"), "%s", log);
}
END_TEST

static Suite* bf16_suite(void) {
    Suite* s = suite_create("bf16");
    TCase* tc = tcase_create("kernels");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_rounding_nearest_even);
    tcase_add_test(tc, test_ref_gemm_bound);
    tcase_add_test(tc, test_onednn_vs_ref);
    tcase_add_test(tc, test_linear_bf16_vs_fp32);
    tcase_add_test(tc, test_linear_bf16_threads_identical);
    tcase_add_test(tc, test_registered_copy_is_read);
    tcase_add_test(tc, test_linear_bias_exact);
    tcase_add_test(tc, test_dispatch_resolve);
    tcase_add_test(tc, test_dispatch_capped_isa);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(bf16_suite)
