// tests/test_mta.c: Multi-Token Attention (attention/mta.c) beyond the generic suites
// (gradients, causality, threads) and the float64 reference:
//   - at init (theta = 0, mix = 0, gn_w = 1) the weights are softmax attention of the scaled
//     scores and the output is (1 - lambda_l) RMSNorm(softmax(S) V) (the identity kernels);
//   - Mask_0 before the convolution: a kernel that only reads the previous query (tap a = 1,
//     b = 0) gives the logits L[i,j] = S[i-1,j] for j < i and exactly 0 on the diagonal (the
//     masked future entry S[i-1,i]), never the raw score there;
//   - head mixing within groups: with c_h = 1 a nonzero mix scales each head by (1 + mix) and
//     leaves the others alone; with NH = 3, c_h = 2 the last group holds one head.
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

static void fill(AttnHarness* h, const char* name, float v) {
    const int k = tensor_index(h, name);
    for (size_t i = 0; i < h->tsize[k]; i++)
        h->tp[k][i] = v;
}

static AttnHParams hp_with(int NH, int ch) {
    const AttnVariant* v = attn_lookup("mta");
    AttnHParams hp;
    attn_hparams_default(&hp, v, T_, NH, C_ / NH, C_, 2);
    hp.v[attn_hparam_index(v, "ch")] = (float)ch;
    return hp;
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

START_TEST(test_init_is_softmax) {
    const AttnHParams hp = hp_with(2, 2);
    AttnHarness h;
    harness_setup(&h, attn_lookup("mta"), &hp, ATTN_POS_LEARNED, B_, T_, C_, 2, 1, 0.3f, 3);
    fill(&h, "theta", 0.0f);
    fill(&h, "mix", 0.0f);
    fill(&h, "gn_w", 1.0f);
    h.L.layer = 2;
    harness_loss(&h);
    const double one[2] = {1, 1};
    ck_assert_msg(max_att_err(&h, 0, one) < 1e-6, "att at init vs softmax: %g",
                  max_att_err(&h, 0, one));
    // o = (1 - lambda_2) RMSNorm(P v), lambda_2 = 0.8 - 0.6 exp(-0.6)
    const double c = 1.0 - (0.8 - 0.6 * exp(-0.6));
    double worst = 0, P[T_ * T_];
    for (int b = 0; b < B_; b++)
        for (int hh = 0; hh < 2; hh++) {
            ref_weights(P, &h, b, hh, 0);
            for (int t = 0; t < T_; t++) {
                double U[C_ / 2], ms = 0;
                for (int e = 0; e < C_ / 2; e++) {
                    U[e] = 0;
                    for (int j = 0; j <= t; j++)
                        U[e] += P[t * T_ + j] *
                                h.qkv[((size_t)b * T_ + j) * 3 * C_ + 2 * C_ + hh * (C_ / 2) + e];
                    ms += U[e] * U[e];
                }
                const double r = 1.0 / sqrt(ms / (C_ / 2) + 1e-5);
                for (int e = 0; e < C_ / 2; e++) {
                    const double o = h.out[((size_t)b * T_ + t) * C_ + hh * (C_ / 2) + e];
                    worst = fmax(worst, fabs(o - c * U[e] * r));
                }
            }
        }
    ck_assert_msg(worst < 1e-5, "out at init vs (1 - lambda) RMSNorm(softmax V): %g", worst);
    harness_free(&h);
}
END_TEST

START_TEST(test_mask_before_convolution) {
    const AttnHParams hp = hp_with(2, 2);
    AttnHarness h;
    harness_setup(&h, attn_lookup("mta"), &hp, ATTN_POS_LEARNED, B_, T_, C_, 2, 1, 0.3f, 4);
    fill(&h, "theta", 0.0f);
    fill(&h, "mix", 0.0f);
    const int k = tensor_index(&h, "theta");
    const int cq = h.specs[k].shape[1], ck = h.specs[k].shape[2], w = ck / 2;
    ck_assert(cq >= 2);
    for (int hh = 0; hh < 2; hh++) { // kernel = identity - e_{0,0} + e_{1,0}
        h.tp[k][(size_t)hh * cq * ck + w] = -1.0f;
        h.tp[k][(size_t)hh * cq * ck + ck + w] = 1.0f;
    }
    harness_loss(&h);
    const double one[2] = {1, 1};
    ck_assert_msg(max_att_err(&h, 1, one) < 1e-6, "previous-query kernel: %g",
                  max_att_err(&h, 1, one));
    harness_free(&h);
}
END_TEST

START_TEST(test_head_mixing_groups) {
    // c_h = 1: M = diag(1 + mix); NH = 3, c_h = 2: heads {0, 1} mix, head 2 alone
    const int NH = 3;
    const AttnHParams h1 = hp_with(NH, 1);
    AttnHarness h;
    harness_setup(&h, attn_lookup("mta"), &h1, ATTN_POS_LEARNED, B_, T_, C_, NH, 1, 0.3f, 5);
    fill(&h, "theta", 0.0f);
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
    fill(&h, "theta", 0.0f);
    fill(&h, "mix", 0.0f);
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

static Suite* mta_suite(void) {
    Suite* s = suite_create("mta");
    TCase* tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_init_is_softmax);
    tcase_add_test(tc, test_mask_before_convolution);
    tcase_add_test(tc, test_head_mixing_groups);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(mta_suite)
