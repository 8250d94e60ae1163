// tests/test_attn64_posenc.c: the position encodings' tables in the double-precision build of
// attention/ (-DATTN_REAL_DOUBLE), against the independent float64 reference
// tests/ref/ref_posenc.py (the float build is checked against the same reference in
// tests/test_posenc.c), and talking heads' position-bias order by finite differences:
//   - ALiBi slopes for NH = 1..8, 12, 16, 24, 32, 48 against the authors' get_slopes
//     (ofirpress/attention_with_linear_biases, fairseq/models/transformer.py), 1e-14 relative;
//   - xPos factors zeta_i^(p/512) (microsoft/torchscale, xpos_relative_position.py) at centred
//     positions up to the ends of the longest allowed table, 1e-12 relative, and the limit itself;
//   - talking_heads with attn.bias_order = after | before under alibi (NH = 3, 6) and fire: the
//     gradients of qkv, pre, post (and the FIRE parameters) at B = 2 against 4-point differences
//     (tests/attn64_cfg.h), and the two orders agree at P1 = 0 and differ otherwise;
//   - every registered variant at its defaults under xpos (centred), B = 2: gradients of qkv, x,
//     row parameters and layer tensors by differences.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "common/util.h"
#include "tests/attn64_cfg.h"
#include "tests/attn_harness.h"
#include "tests/testutil.h"

#define PY "/usr/bin/python3"

// Run tests/ref/ref_posenc.py ARGS and read up to cap numbers of its output into out (count back).
static int ref_numbers(const char* args, double* out, int cap) {
    ck_assert_msg(system(PY " -c 'import numpy' >/dev/null 2>&1") == 0,
                  PY " with numpy is required for the independent references: "
                     "sudo apt-get install python3-numpy (or bash scripts/deps)");
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), PY " %s/tests/ref/ref_posenc.py %s", test_repo_root(), args);
    FILE* p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "cannot run %s", cmd);
    int n = 0;
    while (n < cap && fscanf(p, "%lf", &out[n]) == 1)
        n++;
    ck_assert_msg(pclose(p) == 0, "%s failed", cmd);
    return n;
}

static const int SLOPE_NH[] = {1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48};
#define N_SLOPE_NH ((int)(sizeof(SLOPE_NH) / sizeof(SLOPE_NH[0])))

START_TEST(test_alibi_slopes64) {
    char args[256] = "slopes";
    int total = 0;
    for (int k = 0; k < N_SLOPE_NH; k++) {
        snprintf(args + strlen(args), sizeof(args) - strlen(args), " %d", SLOPE_NH[k]);
        total += SLOPE_NH[k];
    }
    double ref[256];
    ck_assert_int_eq(ref_numbers(args, ref, 256), total);
    int o = 0;
    for (int k = 0; k < N_SLOPE_NH; k++)
        for (int h = 0; h < SLOPE_NH[k]; h++, o++) {
            const double m = (double)attn_alibi_slope(h, SLOPE_NH[k]);
            ck_assert_msg(fabs(m - ref[o]) <= 1e-14 * ref[o],
                          "ALiBi slope of head %d of %d: %.17g, the authors' get_slopes %.17g", h,
                          SLOPE_NH[k], m, ref[o]);
        }
}
END_TEST

START_TEST(test_xpos_scale64) {
    double lim;
    ck_assert_int_eq(ref_numbers("xpos_max_T", &lim, 1), 1);
    const int Tmax = attn_xpos_max_T();
    ck_assert_msg(Tmax == (int)lim, "attn_xpos_max_T() = %d, the reference %d", Tmax, (int)lim);
    // the centred positions of the longest table run from -ceil(T/2) to floor(T/2) - 1
    const int hs = 16,
              P[] = {-(Tmax + 1) / 2, -(Tmax + 1) / 2 + 1, -777, -1, 0, 1, 513, Tmax / 2 - 1};
    const int np = (int)(sizeof(P) / sizeof(P[0]));
    char args[512];
    int len = snprintf(args, sizeof(args), "xpos_scale %d", hs);
    for (int k = 0; k < np; k++)
        len += snprintf(args + len, sizeof(args) - (size_t)len, " %d", P[k]);
    double ref[8 * 8];
    ck_assert_int_eq(ref_numbers(args, ref, np * hs / 2), np * hs / 2);
    for (int k = 0; k < np; k++)
        for (int i = 0; i < hs / 2; i++) {
            const double z = (double)attn_xpos_scale(i, hs, P[k]), r = ref[k * hs / 2 + i];
            ck_assert_msg(fabs(z - r) <= 1e-12 * r, "xpos scale (i=%d, p=%d): %.17g vs %.17g", i,
                          P[k], z, r);
        }
}
END_TEST

// ---------------------------------------------------------------------------------------------
// talking heads: the order of the position bias and the head mixing

enum { B_ = 2, T_ = 7 };

static void th_layer(AttnHarness* h, const char* order, int pos, int NH, uint64_t seed) {
    const AttnVariant* v = attn_lookup("talking_heads");
    ck_assert_ptr_nonnull(v);
    AttnHParams hp;
    attn_hparams_default(&hp, v, T_, NH, 4, 4 * NH, 2);
    hp.inner = attn_lookup("softmax");
    char err[256];
    ck_assert_msg(attn_hparams_set(&hp, v, "bias_order", order, err, sizeof(err)) == 0, "%s", err);
    harness_setup(h, v, &hp, pos, B_, T_, 4 * NH, NH, 1, 0.3f, seed);
}

START_TEST(test_talking_heads_bias_order64) {
    static const char* const ORDER[2] = {"after", "before"};
    static const struct {
        int pos, NH;
    } CASES[] = {{ATTN_POS_ALIBI, 3}, {ATTN_POS_ALIBI, 6}, {ATTN_POS_FIRE, 3}};
    for (size_t c = 0; c < sizeof(CASES) / sizeof(CASES[0]); c++) {
        const int pos = CASES[c].pos, NH = CASES[c].NH;
        const size_t BTC = (size_t)B_ * T_ * 4 * NH;
        real* out[2];
        for (int o = 0; o < 2; o++) {
            char label[160];
            snprintf(label, sizeof(label), "talking_heads bias_order=%s pos=%s NH=%d B=%d",
                     ORDER[o], pos == ATTN_POS_FIRE ? "fire" : "alibi", NH, B_);
            AttnHarness h;
            th_layer(&h, ORDER[o], pos, NH, 4242 + c);
            if (pos == ATTN_POS_FIRE) { // c, L inside the rows (L = 3.5 < T)
                h.posp[0] = 0.25;
                h.posp[1] = 3.5 / 512.0;
            }
            harness_zero_grads(&h);
            attention_forward(&h.L);
            attention_backward(&h.L);
            out[o] = malloc(sizeof(real) * BTC);
            ck_assert_ptr_nonnull(out[o]);
            memcpy(out[o], h.out, sizeof(real) * BTC);
            double gmax = attn64_max_abs(h.dqkv, 3 * BTC);
            for (int k = 0; k < h.ntens; k++)
                gmax = fmax(gmax, attn64_max_abs(h.dtp[k], h.tsize[k]));
            double lmag = 0;
            for (size_t i = 0; i < BTC; i++)
                lmag += fabs((double)h.w[i] * (double)h.out[i]);
            Attn64Count cq =
                attn64_check(harness_loss, &h, h.qkv, h.dqkv, 3 * BTC, gmax, lmag, label, "qkv");
            ck_assert_msg(cq.checked > 0, "%s: no qkv coordinate checked", label);
            for (int k = 0; k < h.ntens; k++) {
                Attn64Count ct = attn64_check(harness_loss, &h, h.tp[k], h.dtp[k], h.tsize[k], gmax,
                                              lmag, label, h.specs[k].name);
                ck_assert_msg(ct.checked > 0, "%s: %s not checked", label, h.specs[k].name);
            }
            if (pos == ATTN_POS_FIRE) {
                Attn64Count cf = attn64_check(harness_loss, &h, h.posp, h.dposp, h.nposp, gmax,
                                              lmag, label, "fire");
                ck_assert_msg(h.dposp[0] != 0 && h.dposp[1] != 0 && cf.checked > 0,
                              "%s: the FIRE parameters have no gradient", label);
            }
            harness_free(&h);
        }
        double d = 0;
        for (size_t i = 0; i < BTC; i++)
            d = fmax(d, fabs((double)out[0][i] - (double)out[1][i]));
        ck_assert_msg(d > 1e-3, "bias_order after and before agree (max diff %g) with P1 != 0", d);
        free(out[0]);
        free(out[1]);
        // with P1 = 0 (no pre-softmax mixing) the two orders are the same layer
        AttnHarness a, b;
        th_layer(&a, "after", pos, NH, 99 + c);
        th_layer(&b, "before", pos, NH, 99 + c);
        memset(a.tp[0], 0, sizeof(real) * a.tsize[0]);
        memset(b.tp[0], 0, sizeof(real) * b.tsize[0]);
        attention_forward(&a.L);
        attention_forward(&b.L);
        for (size_t i = 0; i < BTC; i++)
            ck_assert_msg(fabs((double)a.out[i] - (double)b.out[i]) <= 1e-13,
                          "P1 = 0: after %.17g vs before %.17g at %zu", (double)a.out[i],
                          (double)b.out[i], i);
        harness_free(&a);
        harness_free(&b);
    }
}
END_TEST

// Every registered variant at its defaults under xpos (the centred scale, forward and the
// transposed map in backward; diff rotates by halves with its own code): B = 2, T = 7, NH = 2,
// gradients of qkv, x, row parameters and layer tensors against differences.
START_TEST(test_xpos_gradcheck64) {
    const AttnVariant* v = attn_get(_i);
    if (!test_variant_selected(v->name)) return;
    enum { C = 8, NH = 2 };
    char label[160];
    snprintf(label, sizeof(label), "%s (defaults, pos_encoding=xpos, B=%d T=%d)", v->name, B_, T_);
    AttnHarness h;
    harness_setup(&h, v, NULL, ATTN_POS_XPOS, B_, T_, C, NH, 1, 0, attn64_seed(label));
    AttnVariant surrogate; // straight-through maps: the backward is that of the surrogate
    if (h.row->surrogate_row) {
        surrogate = *h.row;
        surrogate.forward_row = h.row->surrogate_row;
        h.L.row = &surrogate;
        if (!v->layer_forward) h.L.v = &surrogate;
    }
    harness_zero_grads(&h);
    attention_forward(&h.L);
    attention_backward(&h.L);
    const size_t BTC = (size_t)B_ * T_ * C;
    const int P = h.row->params_per_head;
    double gmax = fmax(attn64_max_abs(h.dqkv, 3 * BTC), attn64_max_abs(h.dx, BTC));
    if (P) gmax = fmax(gmax, attn64_max_abs(h.drowp, (size_t)NH * P));
    for (int k = 0; k < h.ntens; k++)
        gmax = fmax(gmax, attn64_max_abs(h.dtp[k], h.tsize[k]));
    double lmag = 0;
    for (size_t i = 0; i < BTC; i++)
        lmag += fabs((double)h.w[i] * (double)h.out[i]);
    Attn64Count cq =
        attn64_check(harness_loss, &h, h.qkv, h.dqkv, 3 * BTC, gmax, lmag, label, "qkv");
    ck_assert_msg(cq.checked > 0, "%s: no qkv coordinate checked", label);
    attn64_check(harness_loss, &h, h.x, h.dx, BTC, gmax, lmag, label, "x");
    if (P) attn64_check(harness_loss, &h, h.rowp, h.drowp, (size_t)NH * P, gmax, lmag, label, "p");
    for (int k = 0; k < h.ntens; k++)
        attn64_check(harness_loss, &h, h.tp[k], h.dtp[k], h.tsize[k], gmax, lmag, label,
                     h.specs[k].name);
    harness_free(&h);
}
END_TEST

static Suite* attn64_posenc_suite(void) {
    Suite* s = suite_create("attn64_posenc");
    TCase* tc = tcase_create("tables");
    tcase_set_timeout(tc, 60); // python starts slowly on a loaded machine
    tcase_add_test(tc, test_alibi_slopes64);
    tcase_add_test(tc, test_xpos_scale64);
    suite_add_tcase(s, tc);
    TCase* tt = tcase_create("talking_heads");
    tcase_set_timeout(tt, 120);
    tcase_add_test(tt, test_talking_heads_bias_order64);
    suite_add_tcase(s, tt);
    TCase* tx = tcase_create("xpos");
    tcase_set_timeout(tx, 120);
    tcase_add_loop_test(tx, test_xpos_gradcheck64, 0, attn_count());
    suite_add_tcase(s, tx);
    return s;
}

TEST_MAIN(attn64_posenc_suite)
