// tests/test_attention_kinks.c: backward passes at kinks where a variant starts. hccs initialises
// alpha_h = attn.alpha_init = 1, so the row maximum sits exactly on the clip at 1:
// e_j* = clip(alpha + beta (s_j* - m), 0, 1) = clip(alpha) = 1. attention/hccs.c documents the
// backward with lin_j = [0 < alpha + beta (s_j - m) < 1] (strict), i.e. at alpha = 1 the
// derivative from the right, where e_j* stays clipped at 1. The gradient checks move parameters
// away from kinks, so this convention is checked here: d/dalpha of L = sum_j w_j a_j against a
// one-sided (right) difference of the map written from its definition in double (exact on the
// linear piece), and the left difference must differ from it (the kink is real for this row).
#include <math.h>
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

static Suite* attention_kinks_suite(void) {
    Suite* s = suite_create("attention_kinks");
    TCase* tc = tcase_create("kinks");
    tcase_add_test(tc, test_hccs_alpha_at_init_kink);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(attention_kinks_suite)
