// tests/test_linear_maps.c: the random and kernel parts of linear attention's Performer,
// Cottention and SLAY feature maps (attention/linear.c) that the layer references take as given.
//   - Performer's orthogonal random features: rows within a block of hs are orthogonal, row
//     norms vary (chi-distributed, not unit), the draw is a pure function of (seed, layer, head,
//     floor(step / redraw)), redraw = 0 keeps one draw, evaluation (step -1) uses draw 0;
//   - FAVOR+ is unbiased: the mean over many draws of phi(q).phi(k) approaches
//     exp(q.k / sqrt(hs)) (3 standard errors);
//   - the layer under Cottention has rows q^.k^_j / (j+1)^sigmoid(c_h) (the authors' per-value
//     stabiliser, c_h the layer's cos_c), under SLAY rows proportional to the Yat kernel
//     (q^.k^)^2 / (2 - 2 q^.k^ + eps), both computed here in double from q, k;
//   - a Performer layer is bit-identical on 1 and 2 threads and changes across a redraw.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "common/util.h"
#include "tests/attn_harness.h"
#include "tests/testutil.h"

START_TEST(test_performer_draw) {
    const int hs = 8, m = 20;
    float W[20 * 8], W2[20 * 8];
    attn_performer_features(W, m, hs, 7, 1, 0, 5, 0);
    for (int b0 = 0; b0 < m; b0 += hs) // orthogonal rows within each block
        for (int i = b0; i < b0 + hs && i < m; i++)
            for (int j = b0; j < i; j++) {
                double d = 0, ni = 0, nj = 0;
                for (int c = 0; c < hs; c++) {
                    d += (double)W[i * hs + c] * W[j * hs + c];
                    ni += (double)W[i * hs + c] * W[i * hs + c];
                    nj += (double)W[j * hs + c] * W[j * hs + c];
                }
                ck_assert_msg(fabs(d) < 1e-5 * sqrt(ni * nj), "rows %d, %d not orthogonal", i, j);
            }
    double nmin = 1e9, nmax = 0;
    for (int i = 0; i < m; i++) {
        double n = 0;
        for (int c = 0; c < hs; c++)
            n += (double)W[i * hs + c] * W[i * hs + c];
        nmin = fmin(nmin, n), nmax = fmax(nmax, n);
    }
    ck_assert_msg(nmax - nmin > 0.5 && nmin > 0.1, "row norms^2 in [%g, %g]: not chi(hs)", nmin,
                  nmax);
    // redraw = 0: one draw whatever the step; evaluation equals draw 0
    attn_performer_features(W2, m, hs, 7, 1, 0, 900, 0);
    ck_assert(memcmp(W, W2, sizeof(W)) == 0);
    attn_performer_features(W2, m, hs, 7, 1, 0, -1, 10);
    ck_assert(memcmp(W, W2, sizeof(W)) == 0);
    // redraw = 10: steps 0..9 share draw 0, step 10 draws anew; other heads, layers, seeds differ
    attn_performer_features(W2, m, hs, 7, 1, 0, 9, 10);
    ck_assert(memcmp(W, W2, sizeof(W)) == 0);
    attn_performer_features(W2, m, hs, 7, 1, 0, 10, 10);
    ck_assert(memcmp(W, W2, sizeof(W)) != 0);
    attn_performer_features(W2, m, hs, 7, 1, 1, 5, 0);
    ck_assert(memcmp(W, W2, sizeof(W)) != 0);
    attn_performer_features(W2, m, hs, 7, 2, 0, 5, 0);
    ck_assert(memcmp(W, W2, sizeof(W)) != 0);
    attn_performer_features(W2, m, hs, 8, 1, 0, 5, 0);
    ck_assert(memcmp(W, W2, sizeof(W)) != 0);
}
END_TEST

START_TEST(test_favor_unbiased) {
    // mean over draws of phi(q).phi(k) -> exp(q.k / sqrt(hs))
    const int hs = 4, m = 8, N = 4000;
    const double q[4] = {0.5, -0.3, 0.8, 0.1}, k[4] = {0.2, 0.4, 0.6, -0.5};
    const double s = pow(hs, -0.25);
    double qk = 0, q2 = 0, k2 = 0;
    for (int c = 0; c < hs; c++)
        qk += q[c] * k[c], q2 += q[c] * q[c] * s * s, k2 += k[c] * k[c] * s * s;
    double sum = 0, sum2 = 0;
    float W[8 * 4];
    for (int e = 0; e < N; e++) {
        attn_performer_features(W, m, hs, 3, 0, 0, e, 1);
        double est = 0;
        for (int i = 0; i < m; i++) {
            double wq = 0, wk = 0;
            for (int c = 0; c < hs; c++)
                wq += W[i * hs + c] * q[c] * s, wk += W[i * hs + c] * k[c] * s;
            est += exp(wq - 0.5 * q2) * exp(wk - 0.5 * k2) / m;
        }
        sum += est, sum2 += est * est;
    }
    const double mean = sum / N, se = sqrt((sum2 / N - mean * mean) / N), want = exp(qk / 2.0);
    ck_assert_msg(fabs(mean - want) < 3 * se + 1e-9, "FAVOR+ mean %g vs exp(q.k/sqrt d) %g (se %g)",
                  mean, want, se);
}
END_TEST

static void linear_layer(AttnHarness* h, const char* feature, int nthreads, uint64_t seed) {
    const AttnVariant* v = attn_lookup("linear");
    ck_assert_ptr_nonnull(v);
    AttnHParams hp;
    attn_hparams_default(&hp, v, 7, 2, 4, 8, 2);
    char err[256];
    ck_assert_int_eq(attn_hparams_set(&hp, v, "feature", feature, err, sizeof(err)), 0);
    harness_setup(h, v, &hp, ATTN_POS_NONE, 2, 7, 8, 2, nthreads, 0.1f, seed);
}

START_TEST(test_cosine_and_yat_rows) {
    for (int kind = 0; kind < 2; kind++) {
        AttnHarness h;
        linear_layer(&h, kind ? "slay" : "cottention", 1, 41 + (uint64_t)kind);
        attention_forward(&h.L);
        const int T = 7, C = 8, NH = 2, hs = 4;
        for (int b = 0; b < 2; b++)
            for (int hd = 0; hd < NH; hd++)
                for (int t = 0; t < T; t++) {
                    double K[7], z = 0;
                    for (int j = 0; j <= t; j++) {
                        const float* q = h.qkv + ((size_t)b * T + t) * 3 * C + hd * hs;
                        const float* k = h.qkv + ((size_t)b * T + j) * 3 * C + C + hd * hs;
                        double d = 0, nq = 0, nk = 0;
                        for (int c = 0; c < hs; c++)
                            d += (double)q[c] * k[c], nq += (double)q[c] * q[c],
                                nk += (double)k[c] * k[c];
                        const double cs = d / sqrt((nq + 1e-6) * (nk + 1e-6));
                        // cottention: v_j / (j+1)^sigmoid(c_h), no row normaliser
                        const double sg = kind ? 0 : 1.0 / (1.0 + exp(-(double)h.tp[0][hd]));
                        K[j] = kind ? cs * cs / (2 - 2 * cs + 1e-2) : cs * pow(j + 1.0, -sg);
                        z += K[j];
                    }
                    for (int j = 0; j <= t; j++) {
                        const double e = kind ? K[j] / (z + 1e-6) : K[j];
                        const double a = h.att[(((size_t)b * NH + hd) * T + t) * T + j];
                        ck_assert_msg(fabs(a - e) < 1e-5 * (1 + fabs(e)),
                                      "%s row (b=%d h=%d t=%d j=%d): %g vs %g",
                                      kind ? "slay" : "cottention", b, hd, t, j, a, e);
                    }
                }
        harness_free(&h);
    }
}
END_TEST

START_TEST(test_performer_layer_threads_and_redraw) {
    AttnHarness a, b;
    linear_layer(&a, "performer", 1, 5);
    linear_layer(&b, "performer", 2, 5);
    attention_forward(&a.L);
    attention_forward(&b.L);
    const size_t n = 2 * 7 * 8;
    ck_assert(memcmp(a.out, b.out, sizeof(float) * n) == 0);
    char err[256];
    ck_assert_int_eq(attn_hparams_set(&b.hp, b.v, "redraw", "2", err, sizeof(err)), 0);
    attention_forward(&b.L); // step 3: draw 1 instead of draw 0
    ck_assert_msg(rel_diff(a.out, b.out, n) > 1e-4, "a redraw did not change the features");
    harness_free(&a);
    harness_free(&b);
}
END_TEST

static Suite* linear_maps_suite(void) {
    Suite* s = suite_create("linear_maps");
    TCase* tc = tcase_create("maps");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_performer_draw);
    tcase_add_test(tc, test_favor_unbiased);
    tcase_add_test(tc, test_cosine_and_yat_rows);
    tcase_add_test(tc, test_performer_layer_threads_and_redraw);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(linear_maps_suite)
