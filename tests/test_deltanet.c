// tests/test_deltanet.c: the delta-rule memories deltanet and gated_deltanet (attention/deltanet.c)
// beyond the generic suites (gradients, causality, threads) and the float64 reference:
//   - the recurrent output o_t = S_t q_t equals the quadratic (masked) form A V, with A the
//     weights the layer reports in att, on the same inputs, under every position encoding;
//   - the delta rule overwrites: with beta = 1 (alpha = 1) and the query equal to the key just
//     written, the memory returns exactly that value, o_t = v_t, whatever was stored before
//     (a plain linear-attention sum of v_j k_j^T would return a mix of earlier values);
//   - the gate forgets: with alpha -> 0 (A_log large) only the current write survives,
//     o_t = beta_t (kh_t . qh_t) v_t;
//   - the chunked (WY) form equals the recurrence: outputs, att and every gradient (q, k, v, x
//     and each layer tensor) for chunk lengths 1, 7 (T = 40 is not a multiple), 40 (= T) and 64
//     (> T), under every position encoding, and is identical for 1 and 2 threads. The recurrent
//     and chunked outputs are also each checked against the quadratic form (first test);
//   - fla's q scale and output norm: without the norm, q_scale = rsqrt gives exactly 1/sqrt(hs)
//     times the output of q_scale = one; with the default norm the two agree (scale-free).
// The first three tests read the bare memory (attn.o_norm = none; q_scale = one where they
// compare with q, k, v directly); the chunked ones run the defaults, output norm included.
// One attention layer through the harness (tests/attn_harness.h), float build, B = 2, NH = 2,
// hs = 8, T = 40; x, q, k, v N(0, 1).
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attention/attention.h"
#include "tests/attn_harness.h"
#include "tests/testutil.h"

enum { B_ = 2, T_ = 40, C_ = 16, NH_ = 2, HS_ = C_ / NH_ };

static const char* const VARIANTS[] = {"deltanet", "gated_deltanet"};

// value of v (or q, k: which = 0, 1, 2) at (b, t, h, i) in the harness qkv
static float* qkv_at(AttnHarness* h, int which, int b, int t, int hh, int i) {
    return h->qkv + ((size_t)b * T_ + t) * 3 * C_ + (size_t)which * C_ + (size_t)hh * HS_ + i;
}

static int tensor_index(const AttnHarness* h, const char* name) {
    for (int k = 0; k < h->ntens; k++)
        if (strcmp(h->specs[k].name, name) == 0) return k;
    ck_abort_msg("%s: no tensor %s", h->v->name, name);
    return -1;
}

static void fill_tensor(AttnHarness* h, const char* name, float value) {
    const int k = tensor_index(h, name);
    for (size_t i = 0; i < h->tsize[k]; i++)
        h->tp[k][i] = value;
}

// the hyperparameters of v with attn.chunk = chunk
static AttnHParams with_chunk(const AttnVariant* v, int chunk) {
    AttnHParams hp;
    attn_hparams_default(&hp, v, T_, NH_, HS_, C_, 2);
    const int k = attn_hparam_index(v, "chunk");
    ck_assert_msg(k >= 0, "%s has no attn.chunk", v->name);
    hp.v[k] = (float)chunk;
    return hp;
}

static void set_hp(AttnHParams* hp, const AttnVariant* v, const char* key, const char* value) {
    char err[256];
    ck_assert_msg(attn_hparams_set(hp, v, key, value, err, sizeof(err)) == 0, "%s", err);
}

// the bare memory read: attn.chunk = chunk, no output norm, with or without fla's q scale
static AttnHParams bare(const AttnVariant* v, int chunk, int q_scaled) {
    AttnHParams hp = with_chunk(v, chunk);
    set_hp(&hp, v, "o_norm", "none");
    set_hp(&hp, v, "q_scale", q_scaled ? "rsqrt" : "one");
    return hp;
}

START_TEST(test_recurrent_matches_quadratic) {
    const AttnVariant* v = attn_lookup(VARIANTS[_i / 8]);
    const int pos = _i % 4, chunk = (_i / 4) % 2 ? 7 : 0;
    ck_assert(v != NULL);
    AttnHarness h;
    const AttnHParams hp = bare(v, chunk, 1);
    harness_setup(&h, v, &hp, pos, B_, T_, C_, NH_, 1, 0.3f, 91 + (uint64_t)_i);
    harness_loss(&h);
    double worst = 0, mag = 0;
    for (int b = 0; b < B_; b++)
        for (int hh = 0; hh < NH_; hh++)
            for (int t = 0; t < T_; t++) {
                const float* A = h.att + (((size_t)b * NH_ + hh) * T_ + t) * T_;
                for (int j = t + 1; j < T_; j++)
                    ck_assert_msg(A[j] == 0.0f, "%s: att above the diagonal", v->name);
                for (int i = 0; i < HS_; i++) {
                    double s = 0;
                    for (int j = 0; j <= t; j++)
                        s += (double)A[j] * *qkv_at(&h, 2, b, j, hh, i);
                    const double o = h.out[((size_t)b * T_ + t) * C_ + (size_t)hh * HS_ + i];
                    if (fabs(o - s) > worst) worst = fabs(o - s);
                    if (fabs(s) > mag) mag = fabs(s);
                }
            }
    ck_assert_msg(mag > 0.1, "%s: degenerate output (max |A V| = %g)", v->name, mag);
    ck_assert_msg(worst <= 1e-5 * (mag > 1 ? mag : 1), "%s pos %d chunk %d: |o - A V| = %g",
                  v->name, pos, chunk, worst);
    harness_free(&h);
}
END_TEST

START_TEST(test_delta_rule_overwrites) {
    AttnHarness h;
    const AttnHParams hp = bare(attn_lookup("deltanet"), 16, 0);
    harness_setup(&h, attn_lookup("deltanet"), &hp, ATTN_POS_LEARNED, B_, T_, C_, NH_, 1, 0.3f, 7);
    fill_tensor(&h, "beta_w", 0.0f);
    fill_tensor(&h, "beta_b", 40.0f); // beta = sigmoid(40) = 1 in float
    for (int b = 0; b < B_; b++)
        for (int t = 0; t < T_; t++)
            for (int hh = 0; hh < NH_; hh++)
                for (int i = 0; i < HS_; i++)
                    *qkv_at(&h, 0, b, t, hh, i) = *qkv_at(&h, 1, b, t, hh, i);
    harness_loss(&h);
    double worst = 0;
    for (int b = 0; b < B_; b++)
        for (int t = 0; t < T_; t++)
            for (int hh = 0; hh < NH_; hh++)
                for (int i = 0; i < HS_; i++) {
                    const double o = h.out[((size_t)b * T_ + t) * C_ + (size_t)hh * HS_ + i];
                    const double d = fabs(o - *qkv_at(&h, 2, b, t, hh, i));
                    if (d > worst) worst = d;
                }
    ck_assert_msg(worst <= 1e-4, "beta = 1, q = k: |o_t - v_t| = %g", worst);
    harness_free(&h);
}
END_TEST

START_TEST(test_gate_forgets) {
    AttnHarness h;
    const AttnHParams hp = bare(attn_lookup("gated_deltanet"), 16, 0);
    harness_setup(&h, attn_lookup("gated_deltanet"), &hp, ATTN_POS_LEARNED, B_, T_, C_, NH_, 1,
                  0.3f, 8);
    fill_tensor(&h, "beta_w", 0.0f);
    fill_tensor(&h, "beta_b", 0.0f); // beta = 1/2
    fill_tensor(&h, "a_w", 0.0f);
    fill_tensor(&h, "dt_b", 2.0f);
    fill_tensor(&h, "A_log", 6.0f); // alpha = exp(-e^6 softplus(2)) ~ exp(-860) = 0
    harness_loss(&h);
    double worst = 0;
    for (int b = 0; b < B_; b++)
        for (int t = 0; t < T_; t++)
            for (int hh = 0; hh < NH_; hh++) {
                double qq = 1e-6, kk = 1e-6, qk = 0;
                for (int i = 0; i < HS_; i++) {
                    const double q = *qkv_at(&h, 0, b, t, hh, i), k = *qkv_at(&h, 1, b, t, hh, i);
                    qq += q * q, kk += k * k, qk += q * k;
                }
                const double c = 0.5 * qk / sqrt(qq * kk);
                for (int i = 0; i < HS_; i++) {
                    const double o = h.out[((size_t)b * T_ + t) * C_ + (size_t)hh * HS_ + i];
                    const double d = fabs(o - c * *qkv_at(&h, 2, b, t, hh, i));
                    if (d > worst) worst = d;
                }
            }
    ck_assert_msg(worst <= 1e-5, "alpha = 0: |o_t - beta (kh.qh) v_t| = %g", worst);
    harness_free(&h);
}
END_TEST

// fla's scale: without an output norm the memory read with q scaled by hs^-1/2 is exactly
// 1/sqrt(hs) of the unscaled one (o is linear in qh); with the default norm (rms for deltanet,
// gated for gated_deltanet) the output does not depend on that scale, up to the norm's eps
START_TEST(test_q_scale_and_norm) {
    const AttnVariant* v = attn_lookup(VARIANTS[_i]);
    const size_t BTC = (size_t)B_ * T_ * C_;
    for (int normed = 0; normed < 2; normed++) {
        AttnHParams h1 = normed ? with_chunk(v, 16) : bare(v, 16, 1);
        AttnHParams h0 = h1;
        set_hp(&h0, v, "q_scale", "one");
        AttnHarness a, b;
        harness_setup(&a, v, &h1, ATTN_POS_ROPE, B_, T_, C_, NH_, 1, 0.3f, 23);
        harness_setup(&b, v, &h0, ATTN_POS_ROPE, B_, T_, C_, NH_, 1, 0.3f, 23);
        attention_forward(&a.L);
        attention_forward(&b.L);
        const double s = normed ? 1.0 : 1.0 / sqrt((double)HS_);
        double worst = 0, mag = 0;
        for (size_t i = 0; i < BTC; i++) {
            worst = fmax(worst, fabs((double)a.out[i] - s * b.out[i]));
            mag = fmax(mag, fabs((double)a.out[i]));
        }
        ck_assert_msg(mag > 0.1, "%s: degenerate (max %g)", v->name, mag);
        ck_assert_msg(worst <= (normed ? 2e-2 : 2e-6) * mag,
                      "%s o_norm %s: q_scale rsqrt vs one * %g: %g (max %g)", v->name,
                      normed ? "default" : "none", s, worst, mag);
        harness_free(&a);
        harness_free(&b);
    }
}
END_TEST

// max |a - b| over n floats, and max |b| into *mag
static double max_diff(const float* a, const float* b, size_t n, double* mag) {
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - b[i]);
        if (d > w) w = d;
        if (fabs((double)b[i]) > *mag) *mag = fabs((double)b[i]);
    }
    return w;
}

static void check_close(const char* what, const float* a, const float* b, size_t n,
                        const char* label) {
    double mag = 0;
    const double w = max_diff(a, b, n, &mag);
    ck_assert_msg(mag > 1e-3, "%s: %s is degenerate (max %g)", label, what, mag);
    ck_assert_msg(w <= 2e-5 * (mag > 1 ? mag : 1), "%s: %s chunked vs recurrent: %g (max %g)",
                  label, what, w, mag);
}

static const int CHUNKS[4] = {1, 7, 40, 64};

START_TEST(test_chunked_matches_recurrent) {
    const AttnVariant* v = attn_lookup(VARIANTS[_i / 16]);
    const int pos = (_i / 4) % 4, chunk = CHUNKS[_i % 4];
    char label[96];
    snprintf(label, sizeof(label), "%s pos %d chunk %d", v->name, pos, chunk);
    const AttnHParams h0 = with_chunk(v, 0), h1 = with_chunk(v, chunk);
    AttnHarness a, b;
    harness_setup(&a, v, &h0, pos, B_, T_, C_, NH_, 1, 0.3f, 300 + (uint64_t)_i);
    harness_setup(&b, v, &h1, pos, B_, T_, C_, NH_, 1, 0.3f, 300 + (uint64_t)_i);
    harness_pass(&a);
    harness_pass(&b);
    const size_t BTC = (size_t)B_ * T_ * C_;
    check_close("out", b.out, a.out, BTC, label);
    check_close("att", b.att, a.att, (size_t)B_ * NH_ * T_ * T_, label);
    check_close("dqkv", b.dqkv, a.dqkv, 3 * BTC, label);
    check_close("dx", b.dx, a.dx, BTC, label);
    for (int k = 0; k < a.ntens; k++)
        check_close(a.specs[k].name, b.dtp[k], a.dtp[k], a.tsize[k], label);
    harness_free(&a);
    harness_free(&b);
}
END_TEST

START_TEST(test_chunked_threads_identical) {
    const AttnVariant* v = attn_lookup(VARIANTS[_i]);
    const AttnHParams hp = with_chunk(v, 7);
    AttnHarness a, b;
    harness_setup(&a, v, &hp, ATTN_POS_ROPE, B_, T_, C_, NH_, 1, 0.3f, 17);
    harness_setup(&b, v, &hp, ATTN_POS_ROPE, B_, T_, C_, NH_, 2, 0.3f, 17);
    harness_pass(&a);
    harness_pass(&b);
    harness_expect_identical(&a, &b, v->name);
    ck_assert_msg(memcmp(a.att, b.att, sizeof(float) * (size_t)B_ * NH_ * T_ * T_) == 0,
                  "%s: att differs 1 vs 2 threads", v->name);
    harness_free(&a);
    harness_free(&b);
}
END_TEST

static Suite* deltanet_suite(void) {
    Suite* s = suite_create("deltanet");
    TCase* tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_recurrent_matches_quadratic, 0, 16);
    tcase_add_loop_test(tc, test_chunked_matches_recurrent, 0, 32);
    tcase_add_loop_test(tc, test_chunked_threads_identical, 0, 2);
    tcase_add_test(tc, test_delta_rule_overwrites);
    tcase_add_test(tc, test_gate_forgets);
    tcase_add_loop_test(tc, test_q_scale_and_norm, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(deltanet_suite)
