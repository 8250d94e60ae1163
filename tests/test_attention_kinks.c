// tests/test_attention_kinks.c: backward passes at kinks where a variant starts. hccs initialises
// alpha_h = attn.alpha_init = 1, so the row maximum sits exactly on the clip at 1:
// e_j* = clip(alpha + beta (s_j* - m), 0, 1) = clip(alpha) = 1. attention/hccs.c documents the
// backward with lin_j = [0 < alpha + beta (s_j - m) < 1] (strict), i.e. at alpha = 1 the
// derivative from the right, where e_j* stays clipped at 1. The gradient checks move parameters
// away from kinks, so this convention is checked here: d/dalpha of L = sum_j w_j a_j against a
// one-sided (right) difference of the map written from its definition in double (exact on the
// linear piece), and the left difference must differ from it (the kink is real for this row).
// sa_softmax (form = minmax) at the edge of its degenerate rows: docs/variants.md defines a row
// with hi - lo < 1e-30 as all zeros; a row whose range is exactly 1e-30 is not degenerate and
// follows the formula a_j = (s_j - lo) / (hi - lo) softmax(s)_j.
// softplus with reweight = power raises e_j = softplus(kappa s_j) to the power P after dividing
// by max e (so the power acts on [0, 1]): with P = 8 and scores in the hundreds, e^P alone
// would overflow float; the weights must still be e_j^P / sum e^P, computed here in double.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attention/attention.h"
#include "tests/testutil.h"

// L(alpha) = sum_j w_j e_j / sum e, e_j = clip(alpha + beta (s_j - max s), 0, 1)
static double hccs_loss(const double* s, const double* w, int n, double alpha, double beta) {
    double m = s[0], z = 0, l = 0, e[16];
    for (int j = 1; j < n; j++)
        m = s[j] > m ? s[j] : m;
    for (int j = 0; j < n; j++) {
        double u = alpha + beta * (s[j] - m);
        e[j] = u < 0 ? 0 : u > 1 ? 1 : u;
        z += e[j];
    }
    for (int j = 0; j < n; j++)
        l += w[j] * e[j] / z;
    return l;
}

START_TEST(test_hccs_alpha_at_init_kink) {
    const AttnVariant* v = attn_lookup("hccs");
    ck_assert_msg(v != NULL, "hccs is not registered");
    if (!test_variant_selected("hccs")) return;
    AttnHParams hp;
    attn_hparams_default(&hp, v, 64, 2, 8, 16, 2);
    enum { N = 5 };
    const float s[N] = {0.3f, -0.2f, 0.9f, 0.1f, -0.5f}, w[N] = {1.0f, -0.5f, 0.25f, 2.0f, 0.5f};
    double sd[N], wd[N];
    for (int j = 0; j < N; j++)
        sd[j] = s[j], wd[j] = w[j];
    float p[ATTN_MAX_PPH] = {0}, dp[ATTN_MAX_PPH] = {0}, a[N], ds[N] = {0}, scratch[64];
    v->init_params(p, &hp);
    ck_assert_msg(p[0] == 1.0f, "alpha starts at %g, not on the kink at 1", (double)p[0]);
    AttnRowCtx ctx = {.hp = &hp, .p = p, .dp = dp, .scratch = scratch, .t = N - 1, .T = 64};
    v->forward_row(a, s, N, &ctx);
    v->backward_row(ds, w, s, a, N, &ctx);
    const double beta = exp((double)p[1]), h = 1e-4;
    double right = (hccs_loss(sd, wd, N, 1.0 + h, beta) - hccs_loss(sd, wd, N, 1.0, beta)) / h;
    double left = (hccs_loss(sd, wd, N, 1.0, beta) - hccs_loss(sd, wd, N, 1.0 - h, beta)) / h;
    ck_assert_msg(fabs(right - left) > 0.05, "no kink in this row (left %g, right %g)", left,
                  right);
    ck_assert_msg(fabs((double)dp[0] - right) <= 1e-3 * (1 + fabs(right)),
                  "dalpha %.6g at alpha = 1: right derivative %.6g (left %.6g)", (double)dp[0],
                  right, left);
}
END_TEST

START_TEST(test_sa_softmax_range_edge) {
    const AttnVariant* v = attn_lookup("sa_softmax");
    ck_assert_msg(v != NULL, "sa_softmax is not registered");
    if (!test_variant_selected("sa_softmax")) return;
    AttnHParams hp;
    attn_hparams_default(&hp, v, 64, 2, 8, 16, 2);
    char err[256];
    ck_assert_msg(attn_hparams_set(&hp, v, "form", "minmax", err, sizeof(err)) == 0, "%s", err);
    float scratch[64], a[3], ds[3];
    AttnRowCtx ctx = {.hp = &hp, .scratch = scratch, .t = 1, .T = 64};
    // range exactly 1e-30 above 0 and below 0: w = (1, 0) and softmax = (1/2, 1/2) in float
    const float rows[2][2] = {{1e-30f, 0.0f}, {0.0f, -1e-30f}};
    for (int r = 0; r < 2; r++) {
        v->forward_row(a, rows[r], 2, &ctx);
        ck_assert_msg(fabsf(a[0] - 0.5f) < 1e-6f && a[1] == 0.0f,
                      "row (%g, %g) with range 1e-30: a = (%g, %g), want (0.5, 0)",
                      (double)rows[r][0], (double)rows[r][1], (double)a[0], (double)a[1]);
        const float da[2] = {1.0f, 0.0f};
        ds[0] = ds[1] = 0.0f;
        v->backward_row(ds, da, rows[r], a, 2, &ctx);
        ck_assert_msg(isfinite(ds[0]) && isfinite(ds[1]), "row %d: ds = (%g, %g)", r, (double)ds[0],
                      (double)ds[1]);
    }
    // every score 0: the degenerate row, all zeros with zero gradient
    const float z[3] = {0.0f, 0.0f, 0.0f}, dz[3] = {1.0f, -2.0f, 0.5f};
    ctx.t = 2;
    v->forward_row(a, z, 3, &ctx);
    ds[0] = ds[1] = ds[2] = 0.0f;
    v->backward_row(ds, dz, z, a, 3, &ctx);
    for (int j = 0; j < 3; j++)
        ck_assert_msg(a[j] == 0.0f && ds[j] == 0.0f, "zero row: a[%d] = %g, ds = %g", j,
                      (double)a[j], (double)ds[j]);
}
END_TEST

START_TEST(test_softplus_power_large_scores) {
    const AttnVariant* v = attn_lookup("softplus");
    ck_assert_msg(v != NULL, "softplus is not registered");
    if (!test_variant_selected("softplus")) return;
    AttnHParams hp;
    attn_hparams_default(&hp, v, 64, 2, 8, 16, 2);
    char err[256];
    ck_assert_msg(attn_hparams_set(&hp, v, "length_scale", "none", err, sizeof(err)) == 0 &&
                      attn_hparams_set(&hp, v, "reweight", "power", err, sizeof(err)) == 0 &&
                      attn_hparams_set(&hp, v, "power", "8", err, sizeof(err)) == 0,
                  "%s", err);
    enum { N = 4 };
    const float s[N] = {300.0f, 290.0f, 150.0f, -5.0f};
    float a[N], scratch[64];
    AttnRowCtx ctx = {.hp = &hp, .scratch = scratch, .t = N - 1, .T = 64};
    v->forward_row(a, s, N, &ctx);
    double e[N], z = 0; // kappa = 1: e_j = softplus(s_j) = log(1 + exp(s_j))
    for (int j = 0; j < N; j++) {
        const double sp =
            s[j] > 30 ? (double)s[j] + log1p(exp(-(double)s[j])) : log1p(exp((double)s[j]));
        e[j] = pow(sp, 8.0);
        z += e[j];
    }
    for (int j = 0; j < N; j++)
        ck_assert_msg(isfinite(a[j]) && fabs((double)a[j] - e[j] / z) < 1e-5,
                      "softplus power 8, s = %g: a[%d] = %g, want %.8g", (double)s[j], j,
                      (double)a[j], e[j] / z);
}
END_TEST

static Suite* attention_kinks_suite(void) {
    Suite* s = suite_create("attention_kinks");
    TCase* tc = tcase_create("kinks");
    tcase_add_test(tc, test_hccs_alpha_at_init_kink);
    tcase_add_test(tc, test_sa_softmax_range_edge);
    tcase_add_test(tc, test_softplus_power_large_scores);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(attention_kinks_suite)
