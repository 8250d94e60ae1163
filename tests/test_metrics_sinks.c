// tests/test_metrics_sinks.c: the papers' first-token sink measures (model/metrics_sinks.h)
// on attention maps built so that the answer is known by construction, and against a
// brute-force reference written here from the definitions (Gu et al.:
// sail-sg/Attention-Sink:pretrain/eval_sink_pretrain.py, importance of the first token = mean
// over the query rows of the prefix, renormalised a / (sum a + 1e-8) for maps that do not sum
// to 1, sink when > eps; Guo et al.: GuoTianYu2000/Active-Dormant-Attention:BBM/probe_utils.py,
// the weight on position 0 pooled over the rows whose token is not a trigger).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "common/util.h"
#include "model/metrics_sinks.h"
#include "tests/testutil.h"

static float* causal(int T) {
    return callocCheck((size_t)T * T, sizeof(float));
}

// Softmax-like rows: a_t0 = c (row 0: 1), the rest (1 - c) / t each. Over Ts rows Gu's
// importance is (1 + c (Ts - 1)) / Ts, raw and renormalised alike.
START_TEST(test_gu_normalised_rows) {
    const int T = 32, Ts = 16;
    const float c = 0.5f;
    float* A = causal(T);
    A[0] = 1.0f;
    for (int t = 1; t < T; t++) {
        A[t * T] = c;
        for (int j = 1; j <= t; j++)
            A[t * T + j] = (1.0f - c) / (float)t;
    }
    double raw, ren;
    metrics_gu_alpha0(A, T, Ts, &raw, &ren);
    const double want = (1.0 + 0.5 * (Ts - 1)) / Ts;
    ck_assert_double_eq_tol(raw, want, 1e-7);
    ck_assert_double_eq_tol(ren, want, 1e-6);
    // Ts larger than T is clamped to T
    metrics_gu_alpha0(A, T, 1000, &raw, &ren);
    ck_assert_double_eq_tol(raw, (1.0 + 0.5 * (T - 1)) / T, 1e-7);
    free(A);
}
END_TEST

// Sigmoid-like rows that do not sum to 1: every causal weight of row t is s = 0.25. Raw
// importance 0.25; renormalised a_t0 / (sum + 1e-8) = 0.25 / (0.25 (t + 1) + 1e-8), whose mean
// over Ts rows is close to H_Ts / Ts. An all-zero row counts 0 in both (Gu divides by Ts).
START_TEST(test_gu_unnormalised_rows) {
    const int T = 24, Ts = 20;
    float* A = causal(T);
    for (int t = 0; t < T; t++)
        for (int j = 0; j <= t; j++)
            A[t * T + j] = 0.25f;
    double raw, ren;
    metrics_gu_alpha0(A, T, Ts, &raw, &ren);
    ck_assert_double_eq_tol(raw, 0.25, 1e-12);
    double want = 0.0;
    for (int t = 0; t < Ts; t++)
        want += 0.25 / (0.25 * (t + 1) + 1e-8);
    want /= Ts;
    ck_assert_double_eq_tol(ren, want, 1e-9);
    double harmonic = 0.0;
    for (int t = 1; t <= Ts; t++)
        harmonic += 1.0 / t;
    ck_assert_double_eq_tol(ren, harmonic / Ts, 1e-6); // the exact renormalisation
    // zero out row 3: it adds 0 to both sums and still counts in the mean
    for (int j = 0; j <= 3; j++)
        A[3 * T + j] = 0.0f;
    double raw2, ren2;
    metrics_gu_alpha0(A, T, Ts, &raw2, &ren2);
    ck_assert_double_eq_tol(raw2, 0.25 * (Ts - 1) / Ts, 1e-12);
    ck_assert_double_eq_tol(ren2, (harmonic - 0.25) / Ts, 1e-6);
    free(A);
}
END_TEST

// Guo's rows: the rows whose mask is 0 (triggers) put all their weight on position 0, the
// others 0.25 of it; the masked mean is 0.25, the unmasked one the mix.
START_TEST(test_guo_row_mask) {
    const int T = 16;
    float* A = causal(T);
    unsigned char mask[16];
    int ntrig = 0;
    for (int t = 0; t < T; t++) {
        mask[t] = t == 0 || t % 3 != 0; // rows 3, 6, 9, 12, 15 are triggers
        ntrig += !mask[t];
        const float a0 = t == 0 ? 1.0f : mask[t] ? 0.25f : 1.0f;
        A[t * T] = a0;
        for (int j = 1; j <= t; j++)
            A[t * T + j] = (1.0f - a0) / (float)t;
    }
    double raw = 0, ren = 0;
    long n = 0;
    metrics_first_token_rows(A, T, mask, &raw, &ren, &n);
    ck_assert_int_eq(n, T - ntrig);
    // row 0 (weight 1) counts as a non-trigger row, as the <s> row does in Guo's code
    const double want = (1.0 + 0.25 * (T - ntrig - 1)) / (T - ntrig);
    ck_assert_double_eq_tol(raw / n, want, 1e-7);
    ck_assert_double_eq_tol(ren / n, want, 1e-6);
    double raw_all = 0, ren_all = 0;
    long n_all = 0;
    metrics_first_token_rows(A, T, NULL, &raw_all, &ren_all, &n_all);
    ck_assert_int_eq(n_all, T);
    ck_assert_double_eq_tol(raw_all / n_all, (want * (T - ntrig) + ntrig) / T, 1e-7);
    // a map that does not sum to 1: the renormalised mean differs from the raw one
    for (int t = 0; t < T; t++)
        for (int j = 0; j <= t; j++)
            A[t * T + j] *= 0.5f;
    raw = ren = 0;
    n = 0;
    metrics_first_token_rows(A, T, mask, &raw, &ren, &n);
    ck_assert_double_eq_tol(raw / n, 0.5 * want, 1e-7);
    ck_assert_double_eq_tol(ren / n, want, 1e-6);
    free(A);
}
END_TEST

// The threshold is strict: an importance of exactly eps is no sink (eps 0.25 is exact in float).
START_TEST(test_gu_threshold_strict) {
    const int T = 8;
    float* A = causal(T);
    for (int t = 0; t < T; t++)
        A[t * T] = 0.25f; // the rest 0: raw importance exactly 0.25
    SinkScores s;
    metrics_sinks_init(&s, 1, 1, 2, 0.25f);
    metrics_sinks_add_gu(&s, 0, 0, 0, A, T, T);
    A[0] = 0.5f; // now (0.5 + 7 * 0.25) / 8 > 0.25
    metrics_sinks_add_gu(&s, 0, 0, 1, A, T, T);
    metrics_sinks_finish(&s);
    ck_assert_double_eq_tol(s.rate_raw, 0.5, 1e-12);
    // renormalised, every row is one-hot on position 0: importance ~1 in both sequences
    ck_assert_double_eq_tol(s.rate_renorm, 1.0, 1e-12);
    metrics_sinks_free(&s);
    free(A);
}
END_TEST

// Random maps (L, NH, nseq) with random row sums: the scores against a brute-force reference
// that follows Gu's code literally (importance[j] = sum_i A[i][j] / (Ts - j), take j = 0;
// fraction of (seq, layer, head) above eps) and Guo's pooled mean over non-trigger rows.
START_TEST(test_scores_brute_force) {
    const int L = 3, NH = 2, N = 5, T = 12, Ts = 7;
    const float eps = 0.3f;
    Rng r;
    rng_seed(&r, 7);
    float* maps = allocFloats((size_t)L * NH * N * T * T);
    unsigned char* masks = mallocCheck((size_t)N * T);
    for (size_t i = 0; i < (size_t)N * T; i++)
        masks[i] = rng_below(&r, 3) != 0;
    for (size_t m = 0; m < (size_t)L * NH * N; m++) {
        float* A = maps + m * T * T;
        for (int t = 0; t < T; t++) {
            const float scale = (m % 2) ? 1.0f : 0.2f + 1.5f * (float)rng_uniform(&r);
            float sum = 0.0f;
            for (int j = 0; j <= t; j++) {
                // a first column heavy in some heads, light in others
                A[t * T + j] =
                    (float)rng_uniform(&r) + (j == 0 ? (float)(m % 4) * 0.4f * (float)t : 0.0f);
                sum += A[t * T + j];
            }
            for (int j = 0; j <= t; j++)
                A[t * T + j] *= scale / sum;
        }
    }
    SinkScores s;
    metrics_sinks_init(&s, L, NH, N, eps);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < NH; h++)
            for (int b = 0; b < N; b++) {
                const float* A = maps + (((size_t)l * NH + h) * N + b) * T * T;
                metrics_sinks_add_gu(&s, l, h, b, A, T, Ts);
                metrics_sinks_add_rows(&s, l, h, A, T, masks + (size_t)b * T);
            }
    metrics_sinks_finish(&s);

    long above_raw = 0, above_ren = 0;
    double best = -1.0;
    int best_l = -1, best_h = -1;
    for (int l = 0; l < L; l++) {
        for (int h = 0; h < NH; h++) {
            double nt_raw = 0, nt_ren = 0;
            long nt = 0;
            for (int b = 0; b < N; b++) {
                const float* A = maps + (((size_t)l * NH + h) * N + b) * T * T;
                double imp_raw = 0, imp_ren = 0;
                for (int i = 0; i < Ts; i++) {
                    double rs = 0;
                    for (int j = 0; j <= i; j++)
                        rs += A[i * T + j];
                    imp_raw += A[i * T] / (double)(Ts - 0);
                    imp_ren += A[i * T] / (rs + 1e-8) / (double)(Ts - 0);
                }
                above_raw += imp_raw > eps;
                above_ren += imp_ren > eps;
                const size_t k = (((size_t)l * NH + h) * N + b);
                ck_assert_double_eq_tol(s.gu_raw[k], imp_raw, 1e-9);
                ck_assert_double_eq_tol(s.gu_renorm[k], imp_ren, 1e-9);
                for (int t = 0; t < T; t++) {
                    if (!masks[(size_t)b * T + t]) continue;
                    double rs = 0;
                    for (int j = 0; j <= t; j++)
                        rs += A[t * T + j];
                    nt_raw += A[t * T];
                    nt_ren += A[t * T] / (rs + 1e-8);
                    nt++;
                }
            }
            const int i = l * NH + h;
            ck_assert_double_eq_tol(metrics_sinks_mean(s.nt_raw, s.nt_n, i), nt_raw / nt, 1e-9);
            ck_assert_double_eq_tol(metrics_sinks_mean(s.nt_renorm, s.nt_n, i), nt_ren / nt, 1e-9);
            if (nt_ren / nt > best) {
                best = nt_ren / nt;
                best_l = l;
                best_h = h;
            }
        }
    }
    ck_assert(above_raw > 0 && above_raw < L * NH * N); // the case tests both sides
    ck_assert_double_eq_tol(s.rate_raw, (double)above_raw / (L * NH * N), 1e-12);
    ck_assert_double_eq_tol(s.rate_renorm, (double)above_ren / (L * NH * N), 1e-12);
    ck_assert_double_eq_tol(s.nt_max, best, 1e-9);
    ck_assert_int_eq(s.nt_max_layer, best_l);
    ck_assert_int_eq(s.nt_max_head, best_h);
    metrics_sinks_free(&s);
    free(masks);
    free(maps);
}
END_TEST

static Suite* metrics_sinks_suite(void) {
    Suite* s = suite_create("metrics_sinks");
    TCase* k = tcase_create("kernels");
    tcase_add_test(k, test_gu_normalised_rows);
    tcase_add_test(k, test_gu_unnormalised_rows);
    tcase_add_test(k, test_guo_row_mask);
    tcase_add_test(k, test_gu_threshold_strict);
    tcase_add_test(k, test_scores_brute_force);
    suite_add_tcase(s, k);
    return s;
}

TEST_MAIN(metrics_sinks_suite)
