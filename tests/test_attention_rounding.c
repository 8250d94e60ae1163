// tests/test_attention_rounding.c: rows that drive sparsemax's threshold search into its
// rounding fallback (attention/sparsemax.c: the sorted scan over the candidates z > lo).
//
// The search iterates u = (sum_{z > lo} z - 1) / k in double and lo = the float at or below u.
// Mathematically u never decreases, so lo never decreases; but the double sum of a row such as
// {0, -0.5, -0.5, -2^-52} is inexact: the first u rounds to exactly -0.5, the two -0.5 entries
// (which belong to the support) are dropped, the next u is below -0.5 and lo would move down:
// the search stops and the fallback sorts the candidates. Such rows need entries that are
// exactly equal to the running threshold plus entries 2^-40 .. 2^-63 of the maximum, so random
// rows never reach it. The grid below (w in {-1/2, -1/4, -1/8} repeated b times, c tiny entries
// -m 2^-e, the maximum 0 first or last) contains many such rows; each is compared with the
// projection onto the simplex computed from its definition in long double: sort descending,
// support = the largest k with 1 + k z_(k) > sum_{i <= k} z_(i), tau = (sum_{i <= k} z_(i) - 1) /
// k, a = max(z - tau, 0).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "common/util.h"
#include "tests/testutil.h"

static int cmp_desc_ld(const void* pa, const void* pb) {
    long double a = *(const long double*)pa, b = *(const long double*)pb;
    return (a < b) - (a > b);
}

static long double projection_tau(const float* z, int n) {
    long double* v = malloc(sizeof(long double) * (size_t)n);
    for (int j = 0; j < n; j++)
        v[j] = z[j];
    qsort(v, (size_t)n, sizeof(long double), cmp_desc_ld);
    long double c = 0, tau = v[0] - 1;
    for (int k = 1; k <= n; k++) {
        c += v[k - 1];
        if (1 + k * v[k - 1] > c)
            tau = (c - 1) / k;
        else
            break;
    }
    free(v);
    return tau;
}

START_TEST(test_sparsemax_rounding_rows) {
    const AttnVariant* v = attn_lookup("sparsemax");
    ck_assert_msg(v != NULL, "sparsemax is not registered");
    if (!test_variant_selected("sparsemax")) return;
    AttnHParams hp;
    attn_hparams_default(&hp, v, 64, 2, 8, 16, 2);
    float* scratch = allocFloats(attn_row_scratch(v, 64) + 16);
    const float ws[3] = {-0.5f, -0.25f, -0.125f};
    int rows = 0;
    for (int b = 1; b <= 5; b++)
        for (int c = 1; c <= 3; c++)
            for (int m = 1; m <= 7; m++)
                for (int e = 40; e < 64; e++)
                    for (int wi = 0; wi < 3; wi++)
                        for (int last = 0; last < 2; last++) {
                            float z[16], a[16];
                            int n = 0;
                            if (!last) z[n++] = 0.0f;
                            for (int i = 0; i < b; i++)
                                z[n++] = ws[wi];
                            for (int i = 0; i < c; i++)
                                z[n++] = (float)(-m * ldexp(1.0, -e));
                            if (last) z[n++] = 0.0f;
                            AttnRowCtx ctx = {
                                .hp = &hp, .scratch = scratch, .t = n - 1, .T = 64, .h = 0};
                            v->forward_row(a, z, n, &ctx);
                            long double tau = projection_tau(z, n);
                            double sum = 0;
                            for (int j = 0; j < n; j++) {
                                long double want = z[j] - tau > 0 ? z[j] - tau : 0;
                                ck_assert_msg(fabsl(a[j] - want) <= 1e-6L,
                                              "b %d c %d m %d e %d w %g (max %s): a[%d] = %.9g, "
                                              "projection %.9Lg",
                                              b, c, m, e, (double)ws[wi], last ? "last" : "first",
                                              j, (double)a[j], want);
                                sum += a[j];
                            }
                            ck_assert_msg(fabs(sum - 1.0) <= 1e-6, "row sums to %.9g", sum);
                            rows++;
                        }
    ck_assert_int_eq(rows, 5 * 3 * 7 * 24 * 3 * 2);
    free(scratch);
}
END_TEST

static Suite* attention_rounding_suite(void) {
    Suite* s = suite_create("attention_rounding");
    TCase* tc = tcase_create("rounding");
    tcase_add_test(tc, test_sparsemax_rounding_rows);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(attention_rounding_suite)
