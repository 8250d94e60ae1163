// tests/test_fire.c: pos_encoding = fire (attention/fire.c).
//   - the bias table against the formula of Li et al. 2023, written here in double, with the
//     threshold L above and below the row positions; below L the bias depends on t - j only,
//     above it on t as well (the progressive interpolation);
//   - the backward against central differences of sum(G * bias), with G's entries above the
//     diagonal never read, and bit-identical for 1 and 2 threads;
//   - the transform c and the threshold l enter through |c| and |l|: negated, the bias is the
//     same and their gradients change sign; at c = 0 (psi = 0 / 0) x is taken as 0, so every
//     pair gets the MLP's output at 0 and c, l and W1 get no gradient;
//   - the variants that form no logits refuse fire (at config time, with a message naming the
//     key and the variant).
// The layer and model gradient checks under fire are in test_posenc, test_attn64_layer and
// test_gpt2_gradcheck; training in test_gpt2_train.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "model/gpt2.h"
#include "tests/testutil.h"

// The formula, from the paper, in double:
// b_h(t, j) = f_h(psi(t - j) / psi(max(L, t))), psi(r) = ln(|c| r + 1), L = 512 |l|, f an MLP
// with one ReLU layer of 32 units and one output per head. theta = [c, l, W1, b1, W2, b2].
static double fire_formula(const float* th, int NH, int h, int t, int j) {
    const int H = ATTN_FIRE_HIDDEN;
    const double c = fabs((double)th[0]), L = 512.0 * fabs((double)th[1]);
    const double x = log(c * (t - j) + 1.0) / log(c * fmax(L, (double)t) + 1.0);
    const float *W1 = th + 2, *b1 = W1 + H, *W2 = b1 + H, *b2 = W2 + (size_t)NH * H;
    double s = b2[h];
    for (int k = 0; k < H; k++)
        s += (double)W2[(size_t)h * H + k] * fmax((double)W1[k] * x + b1[k], 0.0);
    return s;
}

// attn_fire_backward with its scratch rows (attn_fire_backward_scratch)
static void fire_backward(float* dtheta, const float* dbias, int B, const float* theta, int NH,
                          int T, int nthreads) {
    float* rows = allocFloats(attn_fire_backward_scratch(NH, T));
    attn_fire_backward(dtheta, dbias, B, theta, NH, T, nthreads, rows);
    free(rows);
}

START_TEST(test_fire_reference) {
    const int NH = 3, T = 12, P = attn_fire_nparams(NH);
    ck_assert_int_eq(P, 2 + 2 * 32 + NH * 32 + NH);
    float* th = allocFloats((size_t)P);
    float* bias = allocFloats((size_t)NH * T * T);
    attn_fire_init(th, NH, 17);
    ck_assert_msg(th[0] == 0.1f && th[1] == 1.0f, "init c = %g, l = %g (want 0.1, 1)", th[0],
                  th[1]);
    for (int pass = 0; pass < 2; pass++) {
        // pass 0: L = 512 > every t; pass 1: L = 4.5, so rows t > 4 normalise by psi(t)
        if (pass == 1) th[1] = 4.5f / 512.0f;
        attn_fire_bias(bias, th, NH, T, 2);
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++)
                for (int j = 0; j < T; j++) {
                    double got = bias[((size_t)h * T + t) * T + j];
                    double e = j <= t ? fire_formula(th, NH, h, t, j) : 0.0;
                    ck_assert_msg(fabs(got - e) < 1e-5 * (1 + fabs(e)),
                                  "fire bias (pass %d, h=%d, t=%d, j=%d): %.8g vs %.8g", pass, h, t,
                                  j, got, e);
                }
        // below the threshold the bias is a function of t - j only; above it, of t as well
        const size_t o = (size_t)T * T;                                // head 1
        double d1 = fabs(bias[o + 3 * T + 1] - bias[o + 4 * T + 2]);   // t = 3, 4 < L
        double d2 = fabs(bias[o + 10 * T + 5] - bias[o + 11 * T + 6]); // t = 10, 11 > 4.5
        ck_assert_msg(d1 < 1e-6, "pass %d: b(3,1) != b(4,2) below L (%g)", pass, d1);
        if (pass == 0)
            ck_assert_msg(d2 < 1e-6, "b(10,5) != b(11,6) below L = 512 (%g)", d2);
        else
            ck_assert_msg(d2 > 1e-5, "b(10,5) == b(11,6) above L: no interpolation");
    }
    free(th);
    free(bias);
}
END_TEST

// attn_fire_backward against central differences of sum(G * bias) (float, loss in double)
typedef struct {
    float *th, *bias, *G;
    int NH, T, B;
} FireProb;

static double fire_loss(void* vp) {
    FireProb* f = vp;
    attn_fire_bias(f->bias, f->th, f->NH, f->T, 1);
    double s = 0;
    const size_t TT = (size_t)f->T * f->T;
    for (int b = 0; b < f->B; b++)
        for (size_t e = 0; e < (size_t)f->NH * TT; e++)
            s += (double)f->G[(size_t)b * f->NH * TT + e] * f->bias[e];
    return s;
}

START_TEST(test_fire_backward) {
    FireProb f = {.NH = 2, .T = 7, .B = 2};
    const int P = attn_fire_nparams(f.NH);
    const size_t TT = (size_t)f.T * f.T;
    f.th = allocFloats((size_t)P);
    f.bias = allocFloats((size_t)f.NH * TT);
    f.G = allocFloats((size_t)f.B * f.NH * TT);
    float* g = allocFloats((size_t)P);
    float* g2 = allocFloats((size_t)P);
    attn_fire_init(f.th, f.NH, 3);
    f.th[1] = 3.3f / 512.0f; // L = 3.3: rows on both sides of the threshold, and dL != 0
    Rng r;
    rng_seed(&r, 5);
    fill_normal(f.G, (size_t)f.B * f.NH * TT, 1.0f, &r);
    for (int b = 0; b < f.B; b++) // entries above the diagonal are never read
        for (int h = 0; h < f.NH; h++)
            for (int t = 0; t < f.T; t++)
                for (int j = t + 1; j < f.T; j++)
                    f.G[((size_t)b * f.NH + h) * TT + (size_t)t * f.T + j] = 1e3f;
    memset(g, 0, sizeof(float) * (size_t)P);
    fire_backward(g, f.G, f.B, f.th, f.NH, f.T, 1);
    // the entries above the diagonal must not count: zero them and compare the loss's gradient
    for (size_t e = 0; e < (size_t)f.B * f.NH * TT; e++)
        if (f.G[e] == 1e3f) f.G[e] = 0.0f;
    ck_assert_msg(g[0] != 0 && g[1] != 0, "no gradient for c (%g) or l (%g)", g[0], g[1]);
    // estimates at 1e-3 and 5e-4, the finer one compared; at most one coordinate in five a kink
    test_check_grad_kinks(fire_loss, &f, f.th, g, (size_t)P, 1, 5e-4, 1e-4 * max_abs(g, (size_t)P),
                          0, 4, "fire");
    memset(g2, 0, sizeof(float) * (size_t)P); // thread-invariant, bit for bit
    fire_backward(g2, f.G, f.B, f.th, f.NH, f.T, 2);
    ck_assert_msg(memcmp(g, g2, sizeof(float) * (size_t)P) == 0,
                  "FIRE backward depends on threads");
    free(f.th);
    free(f.bias);
    free(f.G);
    free(g);
    free(g2);
}
END_TEST

// theta with c and l negated gives the same bias and the negated gradients of c and l (psi
// uses |c|, L = 512 |l|); at c = 0 every pair's x is 0 (the 0 / 0 convention of fire.c): the
// bias is f_h(0) = b2_h + sum_k W2_hk max(b1_k, 0) and the gradient is the MLP's at x = 0,
// written here from that formula (nothing for c, l and W1).
START_TEST(test_fire_signs_and_zero_transform) {
    const int NH = 2, T = 6, B = 2, H = ATTN_FIRE_HIDDEN, P = attn_fire_nparams(NH);
    const size_t TT = (size_t)T * T;
    float* th = allocFloats((size_t)P);
    float* neg = allocFloats((size_t)P);
    float* b1 = allocFloats((size_t)NH * TT);
    float* b2 = allocFloats((size_t)NH * TT);
    float* G = allocFloats((size_t)B * NH * TT);
    float* g1 = allocFloats((size_t)P);
    float* g2 = allocFloats((size_t)P);
    attn_fire_init(th, NH, 11);
    th[1] = 2.5f / 512.0f; // rows on both sides of L
    memcpy(neg, th, sizeof(float) * (size_t)P);
    neg[0] = -th[0];
    neg[1] = -th[1];
    Rng r;
    rng_seed(&r, 9);
    fill_normal(G, (size_t)B * NH * TT, 1.0f, &r);
    attn_fire_bias(b1, th, NH, T, 1);
    attn_fire_bias(b2, neg, NH, T, 1);
    ck_assert_msg(memcmp(b1, b2, sizeof(float) * (size_t)NH * TT) == 0,
                  "negated c and l change the bias");
    memset(g1, 0, sizeof(float) * (size_t)P);
    memset(g2, 0, sizeof(float) * (size_t)P);
    fire_backward(g1, G, B, th, NH, T, 1);
    fire_backward(g2, G, B, neg, NH, T, 1);
    ck_assert_msg(g1[0] != 0 && g1[1] != 0, "no gradient for c (%g) or l (%g)", g1[0], g1[1]);
    ck_assert_msg(g2[0] == -g1[0] && g2[1] == -g1[1], "dc %g vs %g, dl %g vs %g", g2[0], g1[0],
                  g2[1], g1[1]);
    ck_assert_msg(memcmp(g1 + 2, g2 + 2, sizeof(float) * (size_t)(P - 2)) == 0,
                  "negated c and l change the MLP's gradient");

    th[0] = 0.0f; // c = 0
    attn_fire_bias(b1, th, NH, T, 1);
    const float *W2 = th + 2 + 2 * H, *bb1 = th + 2 + H, *bb2 = W2 + (size_t)NH * H;
    double Gsum[2] = {0, 0};
    for (int h = 0; h < NH; h++) {
        double f0 = bb2[h];
        for (int k = 0; k < H; k++)
            f0 += (double)W2[(size_t)h * H + k] * fmax((double)bb1[k], 0.0);
        for (int t = 0; t < T; t++)
            for (int j = 0; j < T; j++) {
                const double got = b1[(size_t)h * TT + (size_t)t * T + j], e = j <= t ? f0 : 0.0;
                ck_assert_msg(fabs(got - e) < 1e-5 * (1 + fabs(e)),
                              "c = 0: bias(h=%d, t=%d, j=%d) %.8g, want f(0) = %.8g", h, t, j, got,
                              e);
                if (j <= t)
                    for (int b = 0; b < B; b++)
                        Gsum[h] += G[((size_t)b * NH + h) * TT + (size_t)t * T + j];
            }
    }
    memset(g1, 0, sizeof(float) * (size_t)P);
    fire_backward(g1, G, B, th, NH, T, 1);
    ck_assert_msg(g1[0] == 0 && g1[1] == 0, "c = 0: dc = %g, dl = %g (want 0)", g1[0], g1[1]);
    for (int k = 0; k < H; k++) {
        double db1 = 0;
        for (int h = 0; h < NH; h++) {
            const double dw2 = Gsum[h] * fmax((double)bb1[k], 0.0);
            const double got = g1[2 + 2 * H + h * H + k];
            ck_assert_msg(fabs(got - dw2) < 1e-4 * (1 + fabs(dw2)), "c = 0: dW2[%d,%d] %g vs %g", h,
                          k, got, dw2);
            db1 += bb1[k] > 0 ? Gsum[h] * W2[(size_t)h * H + k] : 0.0;
        }
        ck_assert_msg(g1[2 + k] == 0, "c = 0: dW1[%d] = %g (x = 0)", k, g1[2 + k]);
        ck_assert_msg(fabs(g1[2 + H + k] - db1) < 1e-4 * (1 + fabs(db1)), "c = 0: db1[%d] %g vs %g",
                      k, g1[2 + H + k], db1);
    }
    for (int h = 0; h < NH; h++)
        ck_assert_msg(fabs(g1[2 + 2 * H + NH * H + h] - Gsum[h]) < 1e-4 * (1 + fabs(Gsum[h])),
                      "c = 0: db2[%d] %g vs %g", h, g1[2 + 2 * H + NH * H + h], Gsum[h]);
    free(th);
    free(neg);
    free(b1);
    free(b2);
    free(G);
    free(g1);
    free(g2);
}
END_TEST

// linear attention, the delta-rule memories and multiscreen form no logits: fire is refused
START_TEST(test_fire_refused_without_logits) {
    const char* names[] = {"linear", "deltanet", "gated_deltanet", "multiscreen"};
    for (int i = 0; i < 4; i++) {
        const AttnVariant* v = attn_lookup(names[i]);
        if (!v) ck_abort_msg("variant %s is not registered", names[i]);
        ck_assert_msg(!attn_pos_supported(v, ATTN_POS_FIRE), "%s accepts fire", names[i]);
        Config c;
        config_defaults(&c);
        c.n_layer = 2;
        util_strlcpy(c.attention, i % 2 ? "0:softmax,1:" : "", sizeof(c.attention));
        snprintf(c.attention + strlen(c.attention), sizeof(c.attention) - strlen(c.attention), "%s",
                 names[i]);
        util_strlcpy(c.pos_encoding, "fire", sizeof(c.pos_encoding));
        GPT2 m;
        memset(&m, 0, sizeof(m));
        char err[512] = "";
        ck_assert_msg(gpt2_setup_attention(&m, &c, err, sizeof(err)) != 0, "%s: fire accepted",
                      names[i]);
        ck_assert_msg(strstr(err, "pos_encoding") && strstr(err, names[i]), "message: %s", err);
    }
    ck_assert(attn_pos_supported(attn_lookup("softmax"), ATTN_POS_FIRE));
    ck_assert(attn_pos_supported(attn_lookup("linear"), ATTN_POS_ROPE));
}
END_TEST

static Suite* fire_suite(void) {
    Suite* s = suite_create("fire");
    TCase* tc = tcase_create("fire");
    tcase_add_test(tc, test_fire_reference);
    tcase_add_test(tc, test_fire_backward);
    tcase_add_test(tc, test_fire_signs_and_zero_transform);
    tcase_add_test(tc, test_fire_refused_without_logits);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(fire_suite)
