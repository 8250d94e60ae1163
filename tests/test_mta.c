// tests/test_mta.c: Multi-Token Attention (attention/mta.c) beyond the generic suites
// (gradients, causality, threads), the float64 references (test_ref_layers, and the
// double-precision test_attn64_mta, which also checks every gradient):
//   - at init (kernels and mixings 0, gn_w = 1) the weights are softmax attention of the scaled
//     scores; with the gate at w = 0, b = 0 the output is RMSNorm(softmax(S) V) / 2, and with
//     attn.rescale = on, attn.gate = off it is (1 - lambda_l) RMSNorm(softmax(S) V);
//   - the zero mask before the pre-softmax convolution: a kernel that only reads the previous
//     query (tap a = 1, b = 0) gives the logits L[i,j] = S[i-1,j] for j < i and exactly 0 on the
//     diagonal (the masked future entry S[i-1,i]), never the raw score there;
//   - the post-softmax convolution with the same tap: W[i,j] = P[i-1,j] (0 on the diagonal);
//   - the pre-softmax head mixing: logits S_0 + 0.5 S_1 for head 0;
//   - the convolutions run only in layers conv_first + n conv_every: nonzero kernels change
//     nothing in layer 3 and change the output in layer 6;
//   - post-softmax head mixing within groups: with c_h = 1 a nonzero mix scales each head by
//     (1 + mix) and leaves the others alone; with NH = 3, c_h = 2 the last group holds one head;
//   - in a convolution layer: causality (a later token never moves an earlier row) and 1 vs 2
//     threads bit-identical (the generic suites check both at layer 0, which has none).
// Expected values are computed here in double from q, k, v, not from the layer's code.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attention/attention.h"
#include "tests/attn_harness.h"
#include "tests/testutil.h"

enum { B_ = 2, T_ = 12, C_ = 12 };

static int tensor_index(const AttnHarness* h, const char* name) {
    for (int k = 0; k < h->ntens; k++)
        if (strcmp(h->specs[k].name, name) == 0) return k;
    ck_abort_msg("mta: no tensor %s", name);
    return -1;
}

static AttnHParams hp_with(int NH, int ch) {
    const AttnVariant* v = attn_lookup("mta");
    AttnHParams hp;
    attn_hparams_default(&hp, v, T_, NH, C_ / NH, C_, 12);
    hp.v[attn_hparam_index(v, "ch")] = (float)ch;
    return hp;
}

static void set(AttnHParams* hp, const char* key, const char* val) {
    char err[256];
    ck_assert_msg(attn_hparams_set(hp, attn_lookup("mta"), key, val, err, sizeof(err)) == 0, "%s",
                  err);
}

// every kernel and mixing at its identity init (0), the gate at w = 0, b = 0, gn_w = 1
static void identity_init(AttnHarness* h) {
    for (int k = 0; k < h->ntens; k++)
        for (size_t i = 0; i < h->tsize[k]; i++)
            h->tp[k][i] = strcmp(h->specs[k].name, "gn_w") == 0 ? 1.0f : 0.0f;
}

// the reference weights of head h, item b: softmax over j <= i of the logits Lg(i, j), where
// `shift` = 0 uses Lg = S[i,j] and `shift` = 1 uses Lg = S[i-1,j] (j < i), 0 (j = i)
static void ref_weights(double* P, const AttnHarness* h, int b, int hh, int shift) {
    const int NH = h->d.NH, hs = C_ / NH;
    for (int i = 0; i < T_; i++) {
        double Lg[T_], m = -INFINITY, z = 0;
        for (int j = 0; j <= i; j++) {
            double s = 0;
            const int iq = i - shift;
            if (iq >= 0 && j <= iq) {
                const float* q = h->qkv + ((size_t)b * T_ + iq) * 3 * C_ + (size_t)hh * hs;
                const float* k = h->qkv + ((size_t)b * T_ + j) * 3 * C_ + C_ + (size_t)hh * hs;
                for (int e = 0; e < hs; e++)
                    s += (double)q[e] * k[e];
                s /= sqrt((double)hs);
            }
            Lg[j] = s;
            m = s > m ? s : m;
        }
        for (int j = 0; j <= i; j++)
            z += exp(Lg[j] - m);
        for (int j = 0; j < T_; j++)
            P[i * T_ + j] = j <= i ? exp(Lg[j] - m) / z : 0.0;
    }
}

static double max_att_err(const AttnHarness* h, int shift, const double* head_scale) {
    double worst = 0, P[T_ * T_];
    for (int b = 0; b < B_; b++)
        for (int hh = 0; hh < h->d.NH; hh++) {
            ref_weights(P, h, b, hh, shift);
            const float* W = h->att + ((size_t)b * h->d.NH + hh) * T_ * T_;
            for (int e = 0; e < T_ * T_; e++) {
                const double d = fabs(W[e] - head_scale[hh] * P[e]);
                worst = d > worst ? d : worst;
            }
        }
    return worst;
}

// the score q_i . k_j / sqrt(hs) of head hh, item b, in double
static double score(const AttnHarness* h, int b, int hh, int i, int j) {
    const int hs = C_ / h->d.NH;
    const float* q = h->qkv + ((size_t)b * T_ + i) * 3 * C_ + (size_t)hh * hs;
    const float* k = h->qkv + ((size_t)b * T_ + j) * 3 * C_ + C_ + (size_t)hh * hs;
    double s = 0;
    for (int e = 0; e < hs; e++)
        s += (double)q[e] * k[e];
    return s / sqrt((double)hs);
}

// max |out - scale * RMSNorm(P V)| with P the reference softmax weights of every head
static double max_out_err(const AttnHarness* h, double scale) {
    const int NH = h->d.NH, hs = C_ / NH;
    double worst = 0, P[T_ * T_];
    for (int b = 0; b < B_; b++)
        for (int hh = 0; hh < NH; hh++) {
            ref_weights(P, h, b, hh, 0);
            for (int t = 0; t < T_; t++) {
                double U[C_], ms = 0;
                for (int e = 0; e < hs; e++) {
                    U[e] = 0;
                    for (int j = 0; j <= t; j++)
                        U[e] += P[t * T_ + j] *
                                h->qkv[((size_t)b * T_ + j) * 3 * C_ + 2 * C_ + hh * hs + e];
                    ms += U[e] * U[e];
                }
                const double r = 1.0 / sqrt(ms / hs + 1e-5);
                for (int e = 0; e < hs; e++) {
                    const double o = h->out[((size_t)b * T_ + t) * C_ + hh * hs + e];
                    worst = fmax(worst, fabs(o - scale * U[e] * r));
                }
            }
        }
    return worst;
}

START_TEST(test_init_is_softmax) {
    AttnHParams hp = hp_with(2, 0);
    AttnHarness h;
    harness_setup(&h, attn_lookup("mta"), &hp, ATTN_POS_LEARNED, B_, T_, C_, 2, 1, 0.3f, 3);
    ck_assert_int_eq(h.ntens, 7); // the defaults build every part
    identity_init(&h);
    h.L.layer = 2; // a convolution layer
    harness_loss(&h);
    const double one[2] = {1, 1};
    ck_assert_msg(max_att_err(&h, 0, one) < 1e-6, "att at init vs softmax: %g",
                  max_att_err(&h, 0, one));
    // gate sigma(0) = 1/2, no depth rescale
    ck_assert_msg(max_out_err(&h, 0.5) < 1e-5, "out at init vs RMSNorm(softmax V) / 2: %g",
                  max_out_err(&h, 0.5));
    harness_free(&h);

    set(&hp, "rescale", "on");
    set(&hp, "gate", "off");
    harness_setup(&h, attn_lookup("mta"), &hp, ATTN_POS_LEARNED, B_, T_, C_, 2, 1, 0.3f, 3);
    identity_init(&h);
    h.L.layer = 2;
    harness_loss(&h);
    // o = (1 - lambda_2) RMSNorm(P v), lambda_2 = 0.8 - 0.6 exp(-0.6)
    const double c = 1.0 - (0.8 - 0.6 * exp(-0.6));
    ck_assert_msg(max_out_err(&h, c) < 1e-5, "out at init vs (1 - lambda) RMSNorm(softmax V): %g",
                  max_out_err(&h, c));
    harness_free(&h);
}
END_TEST

// kernel = identity - e_{0,0} + e_{1,0} (the previous query, the same key) in tensor `name`
static void previous_query_kernel(AttnHarness* h, const char* name) {
    const int k = tensor_index(h, name);
    const int cq = h->specs[k].shape[1], ck = h->specs[k].shape[2], w = ck / 2;
    ck_assert(cq >= 2);
    for (int hh = 0; hh < h->d.NH; hh++) {
        h->tp[k][(size_t)hh * cq * ck + w] = -1.0f;
        h->tp[k][(size_t)hh * cq * ck + ck + w] = 1.0f;
    }
}

START_TEST(test_mask_before_convolution) {
    const AttnHParams hp = hp_with(2, 2);
    AttnHarness h;
    harness_setup(&h, attn_lookup("mta"), &hp, ATTN_POS_LEARNED, B_, T_, C_, 2, 1, 0.3f, 4);
    identity_init(&h);
    previous_query_kernel(&h, "theta");
    h.L.layer = 2;
    harness_loss(&h);
    const double one[2] = {1, 1};
    ck_assert_msg(max_att_err(&h, 1, one) < 1e-6, "previous-query kernel: %g",
                  max_att_err(&h, 1, one));
    harness_free(&h);
}
END_TEST

START_TEST(test_post_softmax_convolution) {
    const AttnHParams hp = hp_with(2, 2);
    AttnHarness h;
    harness_setup(&h, attn_lookup("mta"), &hp, ATTN_POS_LEARNED, B_, T_, C_, 2, 1, 0.3f, 8);
    identity_init(&h);
    previous_query_kernel(&h, "theta_post");
    h.L.layer = 6;
    harness_loss(&h);
    double worst = 0, P[T_ * T_];
    for (int b = 0; b < B_; b++)
        for (int hh = 0; hh < 2; hh++) {
            ref_weights(P, &h, b, hh, 0);
            const float* W = h.att + ((size_t)b * 2 + hh) * T_ * T_;
            for (int i = 0; i < T_; i++)
                for (int j = 0; j < T_; j++) {
                    const double want = i >= 1 && j <= i - 1 ? P[(i - 1) * T_ + j] : 0.0;
                    worst = fmax(worst, fabs(W[i * T_ + j] - want));
                }
        }
    ck_assert_msg(worst < 1e-6, "post-softmax previous-query kernel: %g", worst);
    harness_free(&h);
}
END_TEST

START_TEST(test_pre_softmax_mixing) {
    const AttnHParams hp = hp_with(2, 0);
    AttnHarness h;
    harness_setup(&h, attn_lookup("mta"), &hp, ATTN_POS_LEARNED, B_, T_, C_, 2, 1, 0.3f, 9);
    identity_init(&h);
    h.tp[tensor_index(&h, "pre_mix")][1] = 0.5f; // Z_0 = S_0 + 0.5 S_1 ; Z_1 = S_1
    h.L.layer = 3;
    harness_loss(&h);
    double worst = 0;
    for (int b = 0; b < B_; b++)
        for (int hh = 0; hh < 2; hh++)
            for (int i = 0; i < T_; i++) {
                double Z[T_], m = -INFINITY, z = 0;
                for (int j = 0; j <= i; j++) {
                    Z[j] = score(&h, b, hh, i, j) + (hh == 0 ? 0.5 * score(&h, b, 1, i, j) : 0);
                    m = fmax(m, Z[j]);
                }
                for (int j = 0; j <= i; j++)
                    z += exp(Z[j] - m);
                const float* W = h.att + (((size_t)b * 2 + hh) * T_ + i) * T_;
                for (int j = 0; j <= i; j++)
                    worst = fmax(worst, fabs(W[j] - exp(Z[j] - m) / z));
            }
    ck_assert_msg(worst < 1e-6, "pre-softmax mixing: %g", worst);
    harness_free(&h);
}
END_TEST

START_TEST(test_convolution_layers) {
    // defaults: convolutions in layers 2, 6, 10: random kernels leave layer 3 at softmax
    const AttnHParams hp = hp_with(2, 0);
    AttnHarness h;
    harness_setup(&h, attn_lookup("mta"), &hp, ATTN_POS_LEARNED, B_, T_, C_, 2, 1, 0.3f, 10);
    identity_init(&h);
    Rng r;
    rng_seed(&r, 11);
    const int kt[2] = {tensor_index(&h, "theta"), tensor_index(&h, "theta_post")};
    for (int q = 0; q < 2; q++)
        for (size_t i = 0; i < h.tsize[kt[q]]; i++)
            h.tp[kt[q]][i] = 0.3f * rng_normal(&r);
    const double one[2] = {1, 1};
    h.L.layer = 3;
    harness_loss(&h);
    ck_assert_msg(max_att_err(&h, 0, one) < 1e-6, "layer 3 has no convolution: %g",
                  max_att_err(&h, 0, one));
    h.L.layer = 6;
    harness_loss(&h);
    ck_assert_msg(max_att_err(&h, 0, one) > 1e-3, "layer 6 convolves: %g", max_att_err(&h, 0, one));
    harness_free(&h);
}
END_TEST

START_TEST(test_head_mixing_groups) {
    // c_h = 1: M = diag(1 + mix); NH = 3, c_h = 2: heads {0, 1} mix, head 2 alone
    const int NH = 3;
    const AttnHParams h1 = hp_with(NH, 1);
    AttnHarness h;
    harness_setup(&h, attn_lookup("mta"), &h1, ATTN_POS_LEARNED, B_, T_, C_, NH, 1, 0.3f, 5);
    identity_init(&h);
    const int m = tensor_index(&h, "mix");
    ck_assert_int_eq((int)h.tsize[m], NH);
    const double scale[3] = {1.5, 0.75, 1.25};
    for (int hh = 0; hh < NH; hh++)
        h.tp[m][hh] = (float)(scale[hh] - 1.0);
    harness_loss(&h);
    ck_assert_msg(max_att_err(&h, 0, scale) < 1e-6, "c_h = 1: %g", max_att_err(&h, 0, scale));
    harness_free(&h);

    const AttnHParams h2 = hp_with(NH, 2);
    harness_setup(&h, attn_lookup("mta"), &h2, ATTN_POS_LEARNED, B_, T_, C_, NH, 1, 0.3f, 6);
    identity_init(&h);
    ck_assert_int_eq((int)h.tsize[m], NH * 2);
    h.tp[m][1] = 0.5f;  // W_0 = P_0 + 0.5 P_1
    h.tp[m][5] = 0.75f; // head 2's second slot: outside the model, must be ignored
    harness_loss(&h);
    double worst0 = 0, worst2 = 0, P0[T_ * T_], P1[T_ * T_], P2[T_ * T_];
    for (int b = 0; b < B_; b++) {
        ref_weights(P0, &h, b, 0, 0);
        ref_weights(P1, &h, b, 1, 0);
        ref_weights(P2, &h, b, 2, 0);
        const float* W = h.att + (size_t)b * NH * T_ * T_;
        for (int e = 0; e < T_ * T_; e++) {
            worst0 = fmax(worst0, fabs(W[e] - (P0[e] + 0.5 * P1[e])));
            worst2 = fmax(worst2, fabs(W[2 * T_ * T_ + e] - P2[e]));
        }
    }
    ck_assert_msg(worst0 < 1e-6, "group {0, 1}: %g", worst0);
    ck_assert_msg(worst2 < 1e-6, "last group {2}: %g", worst2);
    harness_free(&h);
}
END_TEST

// a convolution layer (the generic suites run at layer 0, which has none by default): changing
// token t's q, k, v leaves every output row before t bit-identical, and 1 vs 2 threads agree
START_TEST(test_convolution_layer_causal_and_thread_invariant) {
    const AttnHParams hp = hp_with(3, 0);
    AttnHarness h;
    harness_setup(&h, attn_lookup("mta"), &hp, ATTN_POS_ROPE, B_, T_, C_, 3, 1, 0.3f, 12);
    h.L.layer = 6;
    harness_loss(&h);
    static float before[B_ * T_ * C_];
    memcpy(before, h.out, sizeof(before));
    const int t = T_ - 4;
    for (int c = 0; c < 3 * C_; c++)
        h.qkv[(size_t)t * 3 * C_ + c] += 0.5f; // item 0, token t
    harness_loss(&h);
    int changed_after = 0;
    for (int i = 0; i < T_; i++)
        for (int c = 0; c < C_; c++) {
            const size_t e = (size_t)i * C_ + c;
            if (i < t)
                ck_assert_msg(h.out[e] == before[e], "row %d moved with token %d", i, t);
            else
                changed_after += h.out[e] != before[e];
        }
    ck_assert_msg(changed_after > 0, "token %d changed nothing", t);
    for (size_t e = (size_t)T_ * C_; e < (size_t)B_ * T_ * C_; e++)
        ck_assert_msg(h.out[e] == before[e], "item 1 moved with item 0");
    harness_free(&h);

    AttnHarness h1, h2;
    harness_setup(&h1, attn_lookup("mta"), &hp, ATTN_POS_ROPE, B_, T_, C_, 3, 1, 0.3f, 13);
    harness_setup(&h2, attn_lookup("mta"), &hp, ATTN_POS_ROPE, B_, T_, C_, 3, 2, 0.3f, 13);
    h1.L.layer = h2.L.layer = 2;
    harness_pass(&h1);
    harness_pass(&h2);
    harness_expect_identical(&h1, &h2, "mta layer 2, 1 vs 2 threads");
    harness_free(&h1);
    harness_free(&h2);
}
END_TEST

static Suite* mta_suite(void) {
    Suite* s = suite_create("mta");
    TCase* tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_init_is_softmax);
    tcase_add_test(tc, test_mask_before_convolution);
    tcase_add_test(tc, test_post_softmax_convolution);
    tcase_add_test(tc, test_pre_softmax_mixing);
    tcase_add_test(tc, test_convolution_layers);
    tcase_add_test(tc, test_head_mixing_groups);
    tcase_add_test(tc, test_convolution_layer_causal_and_thread_invariant);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(mta_suite)
