// tests/test_attention_halves.c: diff's two halves of a head through the driver's shared code.
//   - the driver's rotation table of a given width (attn_rope_table) with its rotation loop
//     (attn_rotate) on the view of 2 NH heads of hs/2 channels equals, bit for bit, the rotation
//     by halves diff computed itself before it used them (old_diff_rotate below, a verbatim copy
//     of attention/diff.c's diff_rotate as of commit b241c47), under RoPE and xPos (query and key),
//     forward and transpose, overwriting and accumulating, at several T and head sizes and
//     strided rows;
//   - the default pipeline's hs-wide RoPE table is attn_rope_table's (attn_rope of unit pairs
//     returns its entries); its xPos factors (float zeta times float cos, what the attempt
//     2f2ac1a, reverted in d22af1c, gave diff's halves) differ from attn_rope_table's double
//     products in the last bit, so the pinned check above can tell the two apart;
//   - a diff layer under rope and xpos equals, bit for bit, the old rotation by halves of q, k,
//     then diff under pos_encoding = none, then the old transpose rotation of its dq, dk: out,
//     dqkv and every layer-tensor gradient;
//   - attn_score_grad on a strided half (n = hs/2 channels inside rows of stride 3C, as diff
//     calls it) gives the dq, dk of the two explicit GEMMs bit for bit, leaves the other channels
//     alone, and agrees with the sums formed in double.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "common/matmul.h"
#include "common/util.h"
#include "tests/attn_harness.h"
#include "tests/testutil.h"

// attention/diff.c's diff_rotate before the driver's table (B, T, NH, hs, nthreads in place of
// the layer; otherwise token for token)
static void old_diff_rotate(real* out, size_t ldo, const real* in, size_t ldi, int B, int T, int NH,
                            int hs, int nthreads, int inverse, int accumulate, int xsign) {
    const int NG = 2 * NH, d = hs / 2, half = d / 2;
    const double sgn = inverse ? -1.0 : 1.0;
#pragma omp parallel for schedule(static) num_threads(nthreads)
    for (int bt = 0; bt < B * T; bt++) {
        const int t = bt % T;
        const real* x = in + (size_t)bt * ldi;
        real* y = out + (size_t)bt * ldo;
        for (int i = 0; i < half; i++) {
            const double a = (double)t * pow(10000.0, -2.0 * (double)i / (double)d);
            const double z = xsign == 0 ? 1.0
                                        : exp((double)xsign * log((2.0 * i / d + 0.4) / 1.4) *
                                              (double)(t - (T + 1) / 2) / ATTN_XPOS_SCALE_BASE);
            const real c = (real)(z * cos(a)), sn = (real)(sgn * z * sin(a));
            for (int g = 0; g < NG; g++) {
                const size_t o = (size_t)g * d + 2 * (size_t)i;
                const real x0 = x[o], x1 = x[o + 1];
                const real y0 = x0 * c - x1 * sn, y1 = x0 * sn + x1 * c;
                if (accumulate) {
                    y[o] += y0;
                    y[o + 1] += y1;
                } else {
                    y[o] = y0;
                    y[o + 1] = y1;
                }
            }
        }
    }
}

// the new path: the driver's table of width hs/2 and its rotation on the view of 2 NH heads
static void new_diff_rotate(real* out, size_t ldo, const real* in, size_t ldi, int B, int T, int NH,
                            int hs, int nthreads, int inverse, int accumulate, int xsign) {
    const int d = hs / 2;
    real* cs = real_alloc((size_t)T * (d / 2));
    real* sn = real_alloc((size_t)T * (d / 2));
    attn_rope_table(cs, sn, T, d, xsign);
    const AttnDims v = {.B = B, .T = T, .C = NH * hs, .NH = 2 * NH, .hs = d};
    attn_rotate(out, ldo, in, ldi, &v, cs, sn, nthreads, inverse, accumulate);
    free(cs);
    free(sn);
}

START_TEST(test_rotation_by_halves_pinned) {
    static const int Ts[4] = {1, 7, 8, 33}, HS[3] = {4, 8, 12};
    int cases = 0;
    for (int ti = 0; ti < 4; ti++)
        for (int hi = 0; hi < 3; hi++)
            for (int xsign = -1; xsign <= 1; xsign++)
                for (int inv = 0; inv < 2; inv++)
                    for (int acc = 0; acc < 2; acc++) {
                        const int B = 2, T = Ts[ti], NH = 3, hs = HS[hi], C = NH * hs;
                        const size_t ldi = 3 * (size_t)C, ldo = 2 * (size_t)C + 4;
                        const size_t ni = (size_t)B * T * ldi, no = (size_t)B * T * ldo;
                        Rng r;
                        rng_seed(&r, 100 + (uint64_t)cases);
                        real *x = real_alloc(ni), *a = real_alloc(no), *b = real_alloc(no);
                        fill_normal(x, ni, 1.0f, &r);
                        fill_normal(a, no, 1.0f, &r);
                        memcpy(b, a, sizeof(real) * no);
                        old_diff_rotate(a, ldo, x, ldi, B, T, NH, hs, 2, inv, acc, xsign);
                        new_diff_rotate(b, ldo, x, ldi, B, T, NH, hs, 2, inv, acc, xsign);
                        ck_assert_msg(memcmp(a, b, sizeof(real) * no) == 0,
                                      "T=%d hs=%d xsign=%d inverse=%d accumulate=%d: the driver's "
                                      "table and rotation differ from diff's old rotation",
                                      T, hs, xsign, inv, acc);
                        free(x);
                        free(a);
                        free(b);
                        cases++;
                    }
    ck_assert_int_eq(cases, 4 * 3 * 3 * 2 * 2);
}
END_TEST

// The default pipeline's hs-wide tables are attn_rope_table's: attn_rope of unit pairs (1, 0)
// gives (c, s) (y0 = 1 c - 0 s, y1 = 1 s + 0 c, exact in any rounding), the table entries
// bit for bit. Its xPos factors are float zeta times float cos: within 2 ulp of the table of
// attn_rope_table, which rounds z cos once, and not equal to it everywhere (which is why diff's
// table multiplies in double: the float product would change diff under xpos).
START_TEST(test_driver_tables_shared) {
    const int B = 1, T = 33, NH = 2, hs = 8, C = NH * hs, half = hs / 2;
    const size_t n = (size_t)B * T * C;
    real *x = real_alloc(n), *y = real_alloc(n);
    real *cs = real_alloc((size_t)T * half), *sn = real_alloc((size_t)T * half);
    for (size_t e = 0; e < n; e += 2)
        x[e] = 1.0f;
    const AttnDims d = {.B = B, .T = T, .C = C, .NH = NH, .hs = hs};
    AttnWorkspace* ws = attn_workspace_new(B, T, NH, 2, 0, 0);
    attn_workspace_prepare_pos(ws, ATTN_POS_XPOS, C); // the tables attn_rope and attn_xpos read
    for (int xsign = -1; xsign <= 1; xsign++) {
        attn_rope_table(cs, sn, T, hs, xsign);
        for (int inv = 0; inv < 2; inv++) {
            if (xsign == 0)
                attn_rope(y, C, x, C, &d, ws, inv, 0);
            else
                attn_xpos(y, C, x, C, &d, ws, xsign < 0, inv, 0);
            int differ = 0;
            for (int t = 0; t < T; t++)
                for (int h = 0; h < NH; h++)
                    for (int i = 0; i < half; i++) {
                        const size_t o = (size_t)t * C + (size_t)h * hs + 2 * (size_t)i;
                        const real c = cs[(size_t)t * half + i];
                        const real s = inv ? -sn[(size_t)t * half + i] : sn[(size_t)t * half + i];
                        if (xsign == 0)
                            ck_assert_msg(y[o] == c && y[o + 1] == s,
                                          "rope t=%d i=%d inverse=%d: (%a, %a), table (%a, %a)", t,
                                          i, inv, y[o], y[o + 1], c, s);
                        const double tol = 4.5 * 0x1p-24; // 1/zeta, zeta, cos, product
                        ck_assert_msg(fabs(y[o] - c) <= tol * fabs(c) + 1e-30 &&
                                          fabs(y[o + 1] - s) <= tol * fabs(s) + 1e-30,
                                      "xsign %d t=%d i=%d: (%a, %a), table (%a, %a)", xsign, t, i,
                                      y[o], y[o + 1], c, s);
                        differ += y[o] != c || y[o + 1] != s;
                    }
            if (xsign != 0)
                ck_assert_msg(differ > 0,
                              "xsign %d: the float-product xPos factors equal the table's "
                              "everywhere (the check cannot tell them apart)",
                              xsign);
        }
    }
    attn_workspace_free(ws);
    free(x);
    free(y);
    free(cs);
    free(sn);
}
END_TEST

// diff under pos (rope or xpos) against: old rotation by halves of q, k; diff under none; the
// old transpose rotation of its dq, dk (accumulated into zeros, as the layer does)
static void check_layer_pinned(int pos, int T) {
    const AttnVariant* v = attn_lookup("diff");
    ck_assert(v != NULL);
    const int B = 2, NH = 2, C = 16, hs = C / NH;
    const int xs = pos == ATTN_POS_XPOS;
    AttnHarness hr, hn;
    harness_setup(&hr, v, NULL, pos, B, T, C, NH, 2, 0, 21);
    harness_setup(&hn, v, NULL, ATTN_POS_NONE, B, T, C, NH, 2, 0, 21);
    const size_t BTC = (size_t)B * T * C, ld = 3 * (size_t)C;
    ck_assert(memcmp(hr.qkv, hn.qkv, sizeof(real) * 3 * BTC) == 0);
    old_diff_rotate(hn.qkv, ld, hr.qkv, ld, B, T, NH, hs, 2, 0, 0, xs ? 1 : 0);
    old_diff_rotate(hn.qkv + C, ld, hr.qkv + C, ld, B, T, NH, hs, 2, 0, 0, xs ? -1 : 0);
    harness_pass(&hr);
    harness_pass(&hn);
    ck_assert_msg(memcmp(hr.out, hn.out, sizeof(real) * BTC) == 0, "diff %s T=%d: out differs",
                  xs ? "xpos" : "rope", T);
    real* e = real_alloc(3 * BTC); // zeros, then R^T of none's dq, dk and none's dv
    old_diff_rotate(e, ld, hn.dqkv, ld, B, T, NH, hs, 2, 1, 1, xs ? 1 : 0);
    old_diff_rotate(e + C, ld, hn.dqkv + C, ld, B, T, NH, hs, 2, 1, 1, xs ? -1 : 0);
    for (size_t bt = 0; bt < (size_t)B * T; bt++)
        memcpy(e + bt * ld + 2 * C, hn.dqkv + bt * ld + 2 * C, sizeof(real) * C);
    ck_assert_msg(memcmp(hr.dqkv, e, sizeof(real) * 3 * BTC) == 0, "diff %s T=%d: dqkv differs",
                  xs ? "xpos" : "rope", T);
    for (int k = 0; k < hr.ntens; k++)
        ck_assert_msg(memcmp(hr.dtp[k], hn.dtp[k], sizeof(real) * hr.tsize[k]) == 0,
                      "diff %s T=%d: gradient of %s differs", xs ? "xpos" : "rope", T,
                      hr.specs[k].name);
    free(e);
    harness_free(&hr);
    harness_free(&hn);
}

START_TEST(test_diff_layer_pinned) {
    check_layer_pinned(ATTN_POS_ROPE, 9);
    check_layer_pinned(ATTN_POS_ROPE, 16);
    check_layer_pinned(ATTN_POS_XPOS, 9);
    check_layer_pinned(ATTN_POS_XPOS, 16);
}
END_TEST

START_TEST(test_score_grad_strided_half) {
    const int T = 9, NH = 2, hs = 8, C = NH * hs, d = hs / 2, ld = 3 * C;
    const size_t n = (size_t)T * ld;
    Rng r;
    rng_seed(&r, 3);
    real *dS = real_alloc((size_t)T * T), *q = real_alloc(n), *k = real_alloc(n);
    real *dq0 = real_alloc(n), *dk0 = real_alloc(n);
    real *dq1 = real_alloc(n), *dk1 = real_alloc(n), *dq2 = real_alloc(n), *dk2 = real_alloc(n);
    fill_normal(dS, (size_t)T * T, 1.0f, &r);
    fill_normal(q, n, 1.0f, &r);
    fill_normal(k, n, 1.0f, &r);
    fill_normal(dq0, n, 1.0f, &r);
    fill_normal(dk0, n, 1.0f, &r);
    const real alpha = 1.0f / sqrtf((float)d);
    for (int beta = 0; beta < 2; beta++)
        for (int off = 0; off < C; off += d) { // every half of every head
            memcpy(dq1, dq0, sizeof(real) * n);
            memcpy(dk1, dk0, sizeof(real) * n);
            memcpy(dq2, dq0, sizeof(real) * n);
            memcpy(dk2, dk0, sizeof(real) * n);
            attn_score_grad(dS, T, d, alpha, q + off, ld, k + off, ld, (real)beta, dq1 + off, ld,
                            dk1 + off, ld);
            mm_gemm(0, 0, T, d, T, alpha, dS, T, k + off, ld, (real)beta, dq2 + off, ld);
            mm_gemm(1, 0, T, d, T, alpha, dS, T, q + off, ld, (real)beta, dk2 + off, ld);
            ck_assert_msg(
                memcmp(dq1, dq2, sizeof(real) * n) == 0 && memcmp(dk1, dk2, sizeof(real) * n) == 0,
                "offset %d beta %d: attn_score_grad differs from the two GEMMs", off, beta);
            for (int t = 0; t < T; t++)
                for (int ch = 0; ch < ld; ch++) {
                    const size_t o = (size_t)t * ld + ch;
                    if (ch < off || ch >= off + d) {
                        ck_assert_msg(dq1[o] == dq0[o] && dk1[o] == dk0[o],
                                      "offset %d: channel %d outside the half written", off, ch);
                        continue;
                    }
                    double sq = beta ? dq0[o] : 0.0, sk = beta ? dk0[o] : 0.0;
                    for (int j = 0; j < T; j++) {
                        sq += (double)alpha * dS[(size_t)t * T + j] * k[(size_t)j * ld + ch];
                        sk += (double)alpha * dS[(size_t)j * T + t] * q[(size_t)j * ld + ch];
                    }
                    ck_assert_msg(fabs(dq1[o] - sq) < 1e-5 * (1 + fabs(sq)) &&
                                      fabs(dk1[o] - sk) < 1e-5 * (1 + fabs(sk)),
                                  "offset %d (t %d, channel %d): dq %g vs %g, dk %g vs %g", off, t,
                                  ch, dq1[o], sq, dk1[o], sk);
                }
        }
    free(dS);
    free(q);
    free(k);
    free(dq0);
    free(dk0);
    free(dq1);
    free(dk1);
    free(dq2);
    free(dk2);
}
END_TEST

static Suite* attention_halves_suite(void) {
    Suite* s = suite_create("attention_halves");
    TCase* tc = tcase_create("halves");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_rotation_by_halves_pinned);
    tcase_add_test(tc, test_driver_tables_shared);
    tcase_add_test(tc, test_diff_layer_pinned);
    tcase_add_test(tc, test_score_grad_strided_half);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(attention_halves_suite)
