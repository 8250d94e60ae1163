// tests/test_metrics.c: the diagnostics kernels (model/metrics.h) against closed forms derived
// here from the definitions (VARIANTS.md §4, docs/diagnostics.md): entropy of uniform and
// one-hot rows, alpha0 raw and renormalised on hand-built rows (including rows that do not sum
// to 1 and all-zero rows), the sink threshold on both sides, kurtosis of known distributions and
// of a strided head slice, max |x|, massive-activation counts and top/median ratios, per-head
// gradient norms and the placement of the probe windows.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "data/dataloader.h"
#include "model/metrics.h"
#include "tests/testutil.h"

// ---------------------------------------------------------------------------------------------
// attention-row statistics

static float* causal(int T) {
    return callocCheck((size_t)T * T, sizeof(float));
}

START_TEST(test_uniform_rows) {
    const int T = 20, Ts = 8;
    float* A = causal(T);
    for (int t = 0; t < T; t++)
        for (int j = 0; j <= t; j++)
            A[t * T + j] = 1.0f / (float)(t + 1);
    AttnAccum acc = {0};
    double a0 = metrics_attn_accum(&acc, A, T, Ts).renorm;
    AttnHeadStats s;
    metrics_attn_finish(&s, &acc);
    double ent = 0, sink = 0, a0e = 0;
    for (int t = 0; t < T; t++)
        ent += log(t + 1.0);
    for (int t = 1; t < T; t++)
        sink += 1.0 / (t + 1);
    for (int t = 0; t < Ts; t++)
        a0e += 1.0 / (t + 1);
    ck_assert_double_eq_tol(s.entropy, ent / T, 1e-6);
    ck_assert_double_eq_tol(s.entropy_norm, 1.0, 1e-6);
    ck_assert_double_eq_tol(s.sink_mass, sink / (T - 1), 1e-7);
    ck_assert_double_eq_tol(s.max_weight, (sink + 1.0) / T, 1e-7);
    ck_assert(s.sparsity == 0.0);
    ck_assert_double_eq_tol(a0, a0e / Ts, 1e-7);
    free(A);
}
END_TEST

START_TEST(test_one_hot_rows) {
    const int T = 16;
    float* A = causal(T);
    for (int t = 0; t < T; t++)
        A[t * T + t] = 1.0f; // each query attends to itself only
    AttnAccum acc = {0};
    double a0 = metrics_attn_accum(&acc, A, T, T).renorm;
    AttnHeadStats s;
    metrics_attn_finish(&s, &acc);
    ck_assert_double_eq_tol(s.entropy, 0.0, 1e-12);
    ck_assert_double_eq_tol(s.entropy_norm, 0.0, 1e-12);
    ck_assert_double_eq_tol(s.max_weight, 1.0, 1e-12);
    ck_assert_double_eq_tol(s.sink_mass, 0.0, 1e-12);
    // T(T+1)/2 causal entries, T of them non-zero
    ck_assert_double_eq_tol(s.sparsity, 1.0 - 2.0 / (T + 1), 1e-12);
    ck_assert_double_eq_tol(a0, 1.0 / T, 1e-12); // only row 0 puts its mass on key 0
    free(A);
}
END_TEST

START_TEST(test_sink_rows) {
    enum { T = 70, L = 3, NH = 4 };
    float* A = causal(T);
    for (int t = 0; t < T; t++)
        A[t * T] = 1.0f; // every query on key 0
    AttnAccum acc = {0};
    double a0 = metrics_attn_accum(&acc, A, T, METRICS_SINK_T).renorm;
    AttnHeadStats s;
    metrics_attn_finish(&s, &acc);
    ck_assert_double_eq_tol(s.sink_mass, 1.0, 1e-12);
    ck_assert_double_eq_tol(a0, 1.0, 1e-12);
    ck_assert_double_eq_tol(s.entropy, 0.0, 1e-12);
    // a near-sink: 0.97 on key 0, the rest spread evenly
    for (int t = 1; t < T; t++)
        for (int j = 0; j <= t; j++)
            A[t * T + j] = j == 0 ? 0.97f : 0.03f / (float)t;
    AttnAccum acc2 = {0};
    double a02 = metrics_attn_accum(&acc2, A, T, METRICS_SINK_T).renorm;
    metrics_attn_finish(&s, &acc2);
    ck_assert_double_eq_tol(s.sink_mass, 0.97, 1e-6);
    ck_assert_double_eq_tol(a02, (1.0 + 0.97 * 63) / 64, 1e-6); // rows 0..63
    // every (layer, head, sequence) a sink -> rate 1; half of them -> 0.5
    double al[L * NH];
    for (int i = 0; i < L * NH; i++)
        al[i] = a0;
    ck_assert(metrics_sink_rate(al, L * NH, 0.3) == 1.0);
    for (int i = 0; i < L * NH; i += 2)
        al[i] = 0.1;
    al[1] = NAN;
    ck_assert_double_eq_tol(metrics_sink_rate(al, L * NH, 0.3), (L * NH / 2 - 1.0) / (L * NH),
                            1e-12);
    free(A);
}
END_TEST

// Non-normalised rows: statistics use |a| / sum|a|, zero rows are skipped, zeros are counted.
START_TEST(test_unnormalised_rows) {
    const int T = 6;
    float* A = causal(T);
    float* B = causal(T);
    Rng r;
    rng_seed(&r, 7);
    for (int t = 0; t < T; t++) {
        double s = 0;
        for (int j = 0; j <= t; j++) {
            A[t * T + j] = 0.1f + rng_uniform(&r);
            s += A[t * T + j];
        }
        for (int j = 0; j <= t; j++)
            A[t * T + j] = (float)(A[t * T + j] / s);
        for (int j = 0; j <= t; j++)
            B[t * T + j] = (j % 2 ? -3.0f : 3.0f) * A[t * T + j];
    }
    AttnAccum ea = {0}, eb = {0};
    AttnHeadStats sa, sb;
    metrics_attn_accum(&ea, A, T, T);
    metrics_attn_accum(&eb, B, T, T);
    metrics_attn_finish(&sa, &ea);
    metrics_attn_finish(&sb, &eb);
    ck_assert_double_eq_tol(sa.entropy, sb.entropy, 1e-6);
    ck_assert_double_eq_tol(sa.sink_mass, sb.sink_mass, 1e-6);
    ck_assert_double_eq_tol(sa.max_weight, sb.max_weight, 1e-6);
    // a zero row (t = 3) is skipped by p-statistics and counted by sparsity
    for (int j = 0; j <= 3; j++)
        B[3 * T + j] = 0.0f;
    AttnAccum ec = {0};
    metrics_attn_accum(&ec, B, T, T);
    ck_assert_int_eq(ec.n_rows, T - 1);
    ck_assert_int_eq(ec.n_zero, 4);
    ck_assert_int_eq(ec.n_entries, T * (T + 1) / 2);
    double H = 0; // expected entropy: mean over the 5 remaining rows
    for (int t = 0; t < T; t++) {
        if (t == 3) continue;
        for (int j = 0; j <= t; j++)
            H -= A[t * T + j] * log(A[t * T + j]);
    }
    AttnHeadStats sc;
    metrics_attn_finish(&sc, &ec);
    ck_assert_double_eq_tol(sc.entropy, H / (T - 1), 1e-6);
    free(A);
    free(B);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// sink rate: raw vs renormalised, both sides of the threshold

// Row t >= 1 of a head: weight w0 on key 0, the rest (s - w0) spread evenly over keys 1..t, so
// the row sums to s; row 0 holds s (its only key). s = 1 is a normalised variant, s != 1 one
// that does not normalise (sigmoid, ReLU). Returns the (T, T) matrix.
static float* sink_head(int T, double w0, double s) {
    float* A = causal(T);
    A[0] = (float)s;
    for (int t = 1; t < T; t++)
        for (int j = 0; j <= t; j++)
            A[t * T + j] = (float)(j == 0 ? w0 : (s - w0) / t);
    return A;
}

START_TEST(test_alpha0_raw_and_renorm) {
    const int T = 40, Ts = 32;
    // unnormalised rows summing to 0.5 with 0.25 on key 0: raw a_i0 = 0.25 (row 0: 0.5), the
    // renormalised p_i0 = 0.5 (row 0: 1)
    float* A = sink_head(T, 0.25, 0.5);
    AttnAccum acc = {0};
    MetricsAlpha0 a0 = metrics_attn_accum(&acc, A, T, Ts);
    ck_assert_double_eq_tol(a0.raw, (0.5 + 0.25 * (Ts - 1)) / Ts, 1e-7);
    ck_assert_double_eq_tol(a0.renorm, (1.0 + 0.5 * (Ts - 1)) / Ts, 1e-7);
    AttnHeadStats s;
    metrics_attn_finish(&s, &acc);
    ck_assert_double_eq_tol(s.sink_mass_raw, 0.25, 1e-7);
    ck_assert_double_eq_tol(s.sink_mass, 0.5, 1e-7);
    // eps = 0.3 lies between them: a sink renormalised, none raw
    double v[2] = {a0.raw, a0.renorm};
    ck_assert(metrics_sink_rate(v, 1, 0.3) == 0.0);
    ck_assert(metrics_sink_rate(v + 1, 1, 0.3) == 1.0);
    // normalised rows: raw and renormalised agree
    free(A);
    A = sink_head(T, 0.4, 1.0);
    AttnAccum acc2 = {0};
    a0 = metrics_attn_accum(&acc2, A, T, Ts);
    ck_assert_double_eq_tol(a0.raw, (1.0 + 0.4 * (Ts - 1)) / Ts, 1e-7);
    ck_assert_double_eq_tol(a0.renorm, a0.raw, 1e-7);
    // all-zero rows (ReLU): raw counts them as 0 on key 0, renormalised skips them
    for (int t = 5; t < 10; t++)
        for (int j = 0; j <= t; j++)
            A[t * T + j] = 0.0f;
    AttnAccum acc3 = {0};
    a0 = metrics_attn_accum(&acc3, A, T, Ts);
    ck_assert_double_eq_tol(a0.raw, (1.0 + 0.4 * (Ts - 6)) / Ts, 1e-7);
    ck_assert_double_eq_tol(a0.renorm, (1.0 + 0.4 * (Ts - 6)) / (Ts - 5), 1e-7);
    metrics_attn_finish(&s, &acc3);
    ck_assert_double_eq_tol(s.sink_mass_raw, 0.4 * (T - 6) / (T - 1), 1e-7);
    ck_assert_double_eq_tol(s.sink_mass, 0.4, 1e-7);
    ck_assert_int_eq(acc3.n_rows, T - 5);
    // every row zero: no renormalised alpha0 at all, raw 0
    memset(A, 0, sizeof(float) * T * T);
    AttnAccum acc4 = {0};
    a0 = metrics_attn_accum(&acc4, A, T, Ts);
    ck_assert(a0.raw == 0.0 && isnan(a0.renorm));
    metrics_attn_finish(&s, &acc4);
    ck_assert(isnan(s.entropy) && isnan(s.sink_mass) && s.sink_mass_raw == 0.0);
    ck_assert(s.sparsity == 1.0);
    free(A);
}
END_TEST

// Exactly k of NH heads above the threshold, with heads just below it and heads between half the
// threshold and the threshold (a rate counted at eps/2 would differ).
START_TEST(test_sink_rate_threshold) {
    enum { T = 64, NH = 8 };
    const double eps = 0.3;
    // per head: weight on key 0 of rows t >= 1; row 0 is always 1 (normalised rows)
    const double w0[NH] = {0.9, 0.5, 0.28, 0.2, 0.31, 0.05, 0.25, 0.6};
    double alpha[NH];
    int k = 0, k_half = 0;
    for (int h = 0; h < NH; h++) {
        float* A = sink_head(T, w0[h], 1.0);
        AttnAccum acc = {0};
        alpha[h] = metrics_attn_accum(&acc, A, T, METRICS_SINK_T).renorm;
        const double expect = (1.0 + w0[h] * (T - 1)) / T; // closed form of the mean over 64 rows
        ck_assert_double_eq_tol(alpha[h], expect, 1e-6);
        k += expect > eps;
        k_half += expect > eps / 2;
        free(A);
    }
    ck_assert_int_eq(k, 4); // 0.9, 0.5, 0.31, 0.6
    ck_assert_int_ne(k, k_half);
    ck_assert_double_eq_tol(metrics_sink_rate(alpha, NH, eps), (double)k / NH, 1e-12);
    // just above and just below: strict inequality
    double edge[3] = {eps, nextafter(eps, 1.0), nextafter(eps, 0.0)};
    ck_assert_double_eq_tol(metrics_sink_rate(edge, 3, eps), 1.0 / 3, 1e-12);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// activations

START_TEST(test_kurtosis) {
    const size_t n = 400000;
    float* x = allocFloats(n);
    Rng r;
    rng_seed(&r, 11);
    fill_normal(x, n, 2.0f, &r);
    for (size_t i = 0; i < n; i++)
        x[i] += 5.0f; // shift-invariant
    ck_assert_double_eq_tol(metrics_kurtosis(x, n), 3.0, 0.05);
    // uniform on [-1, 1): 9/5
    fill_uniform(x, n, -1.0f, 1.0f, &r);
    ck_assert_double_eq_tol(metrics_kurtosis(x, n), 1.8, 0.02);
    // heavy tail: one +a, one -a, the rest 0 (N = 1000):
    //   mean((x-mu)^4) = 2 a^4 / N, unbiased var = 2 a^2 / (N - 1)
    const size_t N = 1000;
    const double a = 10.0;
    memset(x, 0, sizeof(float) * N);
    x[17] = (float)a;
    x[400] = (float)-a;
    double var = 2 * a * a / (N - 1);
    double expect = (2 * a * a * a * a / N) / (var * var + 1e-6);
    ck_assert_double_eq_tol(metrics_kurtosis(x, N), expect, 1e-6 * expect);
    ck_assert(expect > 490.0); // (N-1)^2 / (2N) = 499.0 without the epsilon
    // constant: 0 / (0 + 1e-6) = 0
    for (size_t i = 0; i < N; i++)
        x[i] = 3.0f;
    ck_assert_double_eq_tol(metrics_kurtosis(x, N), 0.0, 1e-9);
    free(x);
}
END_TEST

START_TEST(test_max_abs_and_massive) {
    const size_t n = 1001;
    float* x = allocFloats(n);
    float* scratch = allocFloats(n);
    for (size_t i = 0; i < n; i++)
        x[i] = (i % 2 ? -0.05f : 0.05f); // median |x| = 0.05
    ck_assert_int_eq(metrics_massive_count(x, n, scratch), 0);
    x[3] = 500.0f;  // > 100 and > 1000 * 0.05
    x[9] = -150.0f; // > 100 and > 50
    x[10] = 40.0f;  // below 100
    ck_assert_float_eq(metrics_max_abs(x, n), 500.0f);
    ck_assert_int_eq(metrics_massive_count(x, n, scratch), 2);
    // median 1: threshold 1000, so 500 is large but not massive
    for (size_t i = 0; i < n; i++)
        x[i] = 1.0f;
    x[0] = 500.0f;
    ck_assert_int_eq(metrics_massive_count(x, n, scratch), 0);
    x[1] = -2000.0f;
    ck_assert_int_eq(metrics_massive_count(x, n, scratch), 1);
    ck_assert_float_eq(metrics_max_abs(x, n), 2000.0f);
    free(x);
    free(scratch);
}
END_TEST

// Kurtosis of one head's channels of a (T, C) tensor: a hand-built slice with two spikes in a
// matrix whose other heads hold large values (a wrong stride would read them).
START_TEST(test_head_kurtosis) {
    enum { T = 10, C = 12, hs = 4 };
    float x[T * C];
    for (int i = 0; i < T * C; i++)
        x[i] = 50.0f + (float)(i % 7);
    const int h = 1;
    for (int t = 0; t < T; t++)
        for (int c = 0; c < hs; c++)
            x[t * C + h * hs + c] = 0.0f;
    const double a = 3.0;
    x[2 * C + h * hs + 1] = (float)a;
    x[7 * C + h * hs + 3] = (float)-a;
    const double N = T * hs, var = 2 * a * a / (N - 1);
    const double expect = (2 * a * a * a * a / N) / (var * var + 1e-6);
    ck_assert_double_eq_tol(metrics_kurtosis_2d(x + h * hs, T, hs, C), expect, 1e-9 * expect);
    // a contiguous copy gives the same number
    float y[T * hs];
    for (int t = 0; t < T; t++)
        memcpy(y + t * hs, x + t * C + h * hs, sizeof(float) * hs);
    ck_assert_double_eq_tol(metrics_kurtosis(y, T * hs), expect, 1e-9 * expect);
}
END_TEST

// Top |x| over median |x| (Sun et al.) on constructed tensors.
START_TEST(test_massive_ratio) {
    const size_t n = 1001;
    float* x = allocFloats(n);
    float* scratch = allocFloats(n);
    for (size_t i = 0; i < n; i++)
        x[i] = (i % 2 ? -0.05f : 0.05f);
    long c = -1;
    ck_assert_double_eq_tol(metrics_massive(x, n, scratch, &c), 1.0, 1e-12);
    ck_assert_int_eq(c, 0);
    x[500] = -500.0f; // one spike: 500 / 0.05
    ck_assert_double_eq_tol(metrics_massive(x, n, scratch, &c), 10000.0, 1e-3);
    ck_assert_int_eq(c, 1);
    x[7] = 100.0f; // exactly 100 is not above 100
    x[8] = 100.5f;
    ck_assert_double_eq_tol(metrics_massive(x, n, scratch, &c), 10000.0, 1e-3);
    ck_assert_int_eq(c, 2);
    // median = the floor(N/2)-th smallest magnitude: 500 values 1, 501 values 2 -> median 2
    for (size_t i = 0; i < n; i++)
        x[i] = i < 500 ? 1.0f : -2.0f;
    x[3] = 300.0f; // replaces a 1: still 499 below 2
    ck_assert_double_eq_tol(metrics_massive(x, n, scratch, &c), 150.0, 1e-9);
    ck_assert_int_eq(c, 0); // 300 < 1000 * 2
    // median 0 with a non-zero entry: unbounded; all zero: undefined
    memset(x, 0, sizeof(float) * n);
    x[10] = 1.0f;
    ck_assert(isinf(metrics_massive(x, n, scratch, NULL)));
    x[10] = 0.0f;
    ck_assert(isnan(metrics_massive(x, n, scratch, NULL)));
    free(x);
    free(scratch);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// probe windows

START_TEST(test_probe_windows) {
    // files of 100, 10 (too short for T = 20) and 61 tokens: starts 81 + 0 + 42 = 123
    const size_t ntok[3] = {100, 10, 61};
    int file[64];
    size_t start[64];
    ck_assert_int_eq(dataloader_spread_windows(ntok, 3, 20, 4, file, start), 0);
    // window j at start number floor(123 j / 4) = 0, 30, 61, 92: file 0 holds starts 0..80,
    // file 2 starts 81..122, so the last window is file 2 at 92 - 81
    const int ef[4] = {0, 0, 0, 2};
    const size_t es[4] = {0, 30, 61, 11};
    for (int j = 0; j < 4; j++) {
        ck_assert_int_eq(file[j], ef[j]);
        ck_assert_uint_eq(start[j], es[j]);
    }
    // 64 windows over 123 starts: evenly spaced, every window inside its file, last near the end
    ck_assert_int_eq(dataloader_spread_windows(ntok, 3, 20, 64, file, start), 0);
    for (int j = 0; j < 64; j++) {
        ck_assert(file[j] != 1);
        ck_assert(start[j] + 20 <= ntok[file[j]]);
        size_t g = (file[j] == 2 ? 81 : 0) + start[j];
        ck_assert_uint_eq(g, (size_t)(123 * j / 64));
    }
    ck_assert_int_eq(file[63], 2);
    // nothing long enough
    ck_assert_int_eq(dataloader_spread_windows(ntok, 3, 200, 4, file, start), -1);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// gradient norms

START_TEST(test_head_grad_norms) {
    const int C = 4, NH = 2; // hs = 2; rows of dqkvw: q 0..3, k 4..7, v 8..11
    float w[12 * 4], b[12];
    for (int r = 0; r < 12; r++) {
        for (int c = 0; c < C; c++)
            w[r * C + c] = (float)(r + 1);
        b[r] = (float)(r % 3);
    }
    float gq[2], gk[2], gv[2];
    metrics_head_grad_norms(gq, gk, gv, w, b, C, NH);
    // head h of part p owns rows p*4 + 2h, p*4 + 2h + 1: sum 4 (r+1)^2 + (r % 3)^2
    float* outs[3] = {gq, gk, gv};
    for (int p = 0; p < 3; p++) {
        for (int h = 0; h < NH; h++) {
            double s = 0;
            for (int r = p * 4 + 2 * h; r < p * 4 + 2 * h + 2; r++)
                s += 4.0 * (r + 1) * (r + 1) + (r % 3) * (r % 3);
            ck_assert_double_eq_tol(outs[p][h], sqrt(s), 1e-5 * sqrt(s));
        }
    }
    ck_assert_double_eq_tol(gq[0], sqrt(4.0 * (1 + 4) + 0 + 1), 1e-5); // rows 0, 1 by hand
}
END_TEST

static Suite* metrics_suite(void) {
    Suite* s = suite_create("metrics");
    TCase* k = tcase_create("kernels");
    tcase_add_test(k, test_uniform_rows);
    tcase_add_test(k, test_one_hot_rows);
    tcase_add_test(k, test_sink_rows);
    tcase_add_test(k, test_unnormalised_rows);
    tcase_add_test(k, test_alpha0_raw_and_renorm);
    tcase_add_test(k, test_sink_rate_threshold);
    tcase_add_test(k, test_head_kurtosis);
    tcase_add_test(k, test_massive_ratio);
    tcase_add_test(k, test_probe_windows);
    tcase_add_test(k, test_kurtosis);
    tcase_add_test(k, test_max_abs_and_massive);
    tcase_add_test(k, test_head_grad_norms);
    suite_add_tcase(s, k);
    return s;
}

TEST_MAIN(metrics_suite)
