// tests/test_ref_window_draws.c: the law of the stochastic window of the `window` row map. Its
// draws come from a hash of (seed, step, layer) that cannot be reproduced independently, so the
// suite checks the documented properties instead (window.c's header, README "window"): w is
// drawn uniformly from [window_min, window_max] (bounds ordered if given the wrong way round),
// is a pure function of (step, layer), is shared by every head of a layer, and evaluation
// (step = -1) uses attn.window. That each drawn row is the windowed softmax is checked against
// the float64 reference in test_ref_rowmaps.c.
#include <string.h>

#include "attention/attention.h"
#include "tests/testutil.h"

// window, window_mode = stochastic: the width is a pure function of (step, layer), the same for
// every head, and uniform over [window_min, window_max] (chi-square over 1400 draws).
START_TEST(test_ref_window_stochastic_draws) {
    const AttnVariant* v = attn_lookup("window");
    ck_assert_ptr_nonnull(v);
    AttnHParams hp;
    attn_hparams_default(&hp, v, 200, 6, 16, 96, 3);
    char err[256];
    ck_assert_int_eq(attn_hparams_set(&hp, v, "window_mode", "stochastic", err, sizeof(err)), 0);
    ck_assert_int_eq(attn_hparams_set(&hp, v, "window_min", "9", err, sizeof(err)), 0);
    ck_assert_int_eq(attn_hparams_set(&hp, v, "window_max", "3", err, sizeof(err)), 0); // swapped
    const int n = 40, W = 7, NDRAW = 1400;
    float s[40], a[40], b[40];
    for (int j = 0; j < n; j++)
        s[j] = 0.1f * (float)(j % 5);
    int count[7] = {0};
    AttnRowCtx ctx = {.hp = &hp, .t = n - 1, .T = n, .seed = 99};
    for (int d = 0; d < NDRAW; d++) {
        ctx.step = d / 2;
        ctx.layer = d % 2;
        ctx.h = 0;
        v->forward_row(a, s, n, &ctx);
        ctx.h = 5;
        v->forward_row(b, s, n, &ctx);
        ck_assert_msg(memcmp(a, b, sizeof(a)) == 0, "heads of one layer see different windows");
        v->forward_row(b, s, n, &ctx);
        ck_assert_msg(memcmp(a, b, sizeof(a)) == 0, "the window is not a function of step, layer");
        int first = 0;
        while (first < n && a[first] == 0.0f)
            first++;
        int w = n - first;
        ck_assert_msg(w >= 3 && w <= 9, "drawn window %d outside [3, 9]", w);
        count[w - 3]++;
    }
    double chi2 = 0, e = (double)NDRAW / W;
    for (int i = 0; i < W; i++)
        chi2 += (count[i] - e) * (count[i] - e) / e;
    // 6 degrees of freedom: P(chi2 > 22.5) = 1e-3
    ck_assert_msg(chi2 < 22.5, "window widths are not uniform over [3, 9]: chi2 = %.1f", chi2);
    ctx.step = -1; // evaluation uses attn.window (64 >= n: the whole row)
    v->forward_row(a, s, n, &ctx);
    ck_assert_float_gt(a[0], 0.0f);
}
END_TEST

static Suite* ref_window_draws_suite(void) {
    Suite* s = suite_create("ref_window_draws");
    TCase* tc = tcase_create("draws");
    tcase_add_test(tc, test_ref_window_stochastic_draws);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(ref_window_draws_suite)
