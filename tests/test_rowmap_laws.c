// tests/test_rowmap_laws.c: laws of row maps that a reference on random inputs cannot see.
//   - gumbel, hard mode at training steps: the Gumbel-max trick, P(argmax_j (s_j + g_j) = j) =
//     softmax(s)_j, checked by frequency over many steps against the closed-form softmax (a
//     binomial 5-sigma band); the draws differ between steps and between heads, repeat for the
//     same (step, head), and evaluation (step -1) adds no noise;
//   - topk: ties at the k-th value keep the lower indices, and rows of n <= k are softmax;
//   - softermax: equal to softmax(s ln 2) computed in double (the integer running max cancels);
//   - every row map's backward_row accumulates: ds += J^T da and dp += dL/dp, whatever ds and dp
//     held before (the driver always passes zeros, so nothing else sees a '=' for '+=').
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "common/util.h"
#include "tests/testutil.h"

static const AttnVariant* need(const char* name) {
    const AttnVariant* v = attn_lookup(name);
    if (!v) ck_abort_msg("variant %s is not registered", name);
    return v;
}

static void set_hp(AttnHParams* hp, const AttnVariant* v, const char* k, const char* val) {
    char err[256];
    ck_assert_msg(attn_hparams_set(hp, v, k, val, err, sizeof(err)) == 0, "%s", err);
}

START_TEST(test_gumbel_max_trick) {
    const AttnVariant* v = need("gumbel");
    AttnHParams hp;
    attn_hparams_default(&hp, v, 64, 2, 8, 16, 2);
    set_hp(&hp, v, "hard", "on");
    const int n = 5, STEPS = 20000;
    const float s[5] = {0.3f, -1.0f, 1.2f, 0.0f, 0.7f};
    float a[5], scratch[64];
    long count[5] = {0};
    AttnRowCtx ctx = {.hp = &hp, .scratch = scratch, .t = n - 1, .T = 64, .h = 1, .seed = 42};
    for (int st = 0; st < STEPS; st++) {
        ctx.step = st;
        v->forward_row(a, s, n, &ctx);
        int hot = -1;
        double sum = 0;
        for (int j = 0; j < n; j++) {
            sum += a[j];
            if (a[j] == 1.0f) hot = j;
        }
        ck_assert_msg(hot >= 0 && sum == 1.0, "step %d: not one-hot", st);
        count[hot]++;
    }
    double m = -INFINITY, z = 0, p[5];
    for (int j = 0; j < n; j++)
        m = fmax(m, (double)s[j]);
    for (int j = 0; j < n; j++)
        z += exp((double)s[j] - m);
    for (int j = 0; j < n; j++) {
        p[j] = exp((double)s[j] - m) / z;
        double f = (double)count[j] / STEPS, sd = sqrt(p[j] * (1 - p[j]) / STEPS);
        ck_assert_msg(fabs(f - p[j]) < 5 * sd, "key %d: frequency %.4f, softmax %.4f (sd %.4f)", j,
                      f, p[j], sd);
    }
    // same (step, head) -> same draw; another head or step -> another draw (soft mode sees it)
    set_hp(&hp, v, "hard", "off");
    float b1[5], b2[5], b3[5];
    ctx.step = 7;
    v->forward_row(b1, s, n, &ctx);
    v->forward_row(b2, s, n, &ctx);
    ck_assert(memcmp(b1, b2, sizeof(b1)) == 0);
    ctx.h = 0;
    v->forward_row(b3, s, n, &ctx);
    ck_assert_msg(memcmp(b1, b3, sizeof(b1)) != 0, "heads 0 and 1 drew the same noise");
    // evaluation: softmax(s / tau) exactly up to rounding
    ctx.step = -1;
    v->forward_row(b1, s, n, &ctx);
    for (int j = 0; j < n; j++)
        ck_assert_msg(fabs(b1[j] - p[j]) < 1e-6, "eval weight %d: %g vs softmax %g", j,
                      (double)b1[j], p[j]);
}
END_TEST

START_TEST(test_topk_ties_and_short_rows) {
    const AttnVariant* v = need("topk");
    AttnHParams hp;
    attn_hparams_default(&hp, v, 64, 2, 8, 16, 2);
    set_hp(&hp, v, "k", "2");
    float scratch[64], a[5];
    AttnRowCtx ctx = {.hp = &hp, .scratch = scratch, .t = 4, .T = 64, .step = -1};
    const float s[5] = {1.0f, 2.0f, 1.0f, 2.0f, 2.0f}; // three-way tie at the top, k = 2
    v->forward_row(a, s, 5, &ctx);
    ck_assert_msg(fabs(a[1] - 0.5f) < 1e-7 && fabs(a[3] - 0.5f) < 1e-7 && a[4] == 0.0f &&
                      a[0] == 0.0f && a[2] == 0.0f,
                  "tie break: %g %g %g %g %g", (double)a[0], (double)a[1], (double)a[2],
                  (double)a[3], (double)a[4]);
    const float s2[2] = {0.5f, -0.25f}; // n <= k: plain softmax
    v->forward_row(a, s2, 2, &ctx);
    double e = 1.0 / (1.0 + exp(-0.75));
    ck_assert_msg(fabs(a[0] - e) < 1e-6 && fabs(a[1] - (1 - e)) < 1e-6, "short row");
}
END_TEST

START_TEST(test_softermax_is_base2_softmax) {
    const AttnVariant* v = need("softermax");
    AttnHParams hp;
    attn_hparams_default(&hp, v, 64, 2, 8, 16, 2);
    float scratch[8], s[300], a[300];
    Rng r;
    rng_seed(&r, 3);
    fill_normal(s, 300, 4.0f, &r);
    AttnRowCtx ctx = {.hp = &hp, .scratch = scratch, .t = 299, .T = 300, .step = -1};
    v->forward_row(a, s, 300, &ctx);
    double m = -INFINITY, z = 0;
    for (int j = 0; j < 300; j++)
        m = fmax(m, (double)s[j]);
    for (int j = 0; j < 300; j++)
        z += exp2((double)s[j] - m);
    for (int j = 0; j < 300; j++) {
        double ref = exp2((double)s[j] - m) / z;
        ck_assert_msg(fabs(a[j] - ref) <= 1e-6 * ref + 1e-9, "a[%d] %g vs 2^s/sum %g", j,
                      (double)a[j], ref);
    }
}
END_TEST

START_TEST(test_backward_row_accumulates) {
    const AttnVariant* v = attn_get(_i);
    if (!v->forward_row || !test_variant_selected(v->name)) return;
    AttnHParams hp;
    attn_hparams_default(&hp, v, 64, 2, 8, 16, 2);
    enum { N = 9 };
    float s[N], da[N], a[N], ks[N], p[ATTN_MAX_PPH] = {0}, dks0[N] = {0}, dks1[N];
    float ds0[N] = {0}, ds1[N], dp0[ATTN_MAX_PPH] = {0}, dp1[ATTN_MAX_PPH];
    float* scratch = allocFloats(attn_row_scratch(v, 64) + 64);
    Rng r;
    rng_seed(&r, 17 + (uint64_t)_i);
    fill_normal(s, N, 1.5f, &r);
    fill_normal(da, N, 1.0f, &r);
    fill_uniform(ks, N, 0.2f, 3.0f, &r);
    if (v->init_params) v->init_params(p, &hp);
    for (int j = 0; j < N; j++) {
        ds1[j] = 0.25f + 0.125f * (float)j;
        dks1[j] = -0.5f;
    }
    for (int k = 0; k < ATTN_MAX_PPH; k++)
        dp1[k] = 0.75f;
    AttnRowCtx ctx = {.hp = &hp,
                      .p = v->params_per_head ? p : NULL,
                      .scratch = scratch,
                      .key_sq = v->needs_key_sq ? ks : NULL,
                      .t = N - 1,
                      .T = 64,
                      .h = 1,
                      .step = 3};
    v->forward_row(a, s, N, &ctx);
    ctx.dp = v->params_per_head ? dp0 : NULL;
    ctx.dkey_sq = v->needs_key_sq ? dks0 : NULL;
    v->backward_row(ds0, da, s, a, N, &ctx);
    ctx.dp = v->params_per_head ? dp1 : NULL;
    ctx.dkey_sq = v->needs_key_sq ? dks1 : NULL;
    v->backward_row(ds1, da, s, a, N, &ctx);
    for (int j = 0; j < N; j++) {
        float want = 0.25f + 0.125f * (float)j + ds0[j];
        ck_assert_msg(fabsf(ds1[j] - want) <= 1e-6f * (1.0f + fabsf(want)),
                      "%s: ds[%d] %g after a start of %g, %g from zero", v->name, j, (double)ds1[j],
                      0.25 + 0.125 * j, (double)ds0[j]);
        if (v->needs_key_sq)
            ck_assert_msg(fabsf(dks1[j] - (-0.5f + dks0[j])) <= 1e-6f * (1.0f + fabsf(dks0[j])),
                          "%s: dkey_sq[%d] does not accumulate", v->name, j);
    }
    for (int k = 0; k < v->params_per_head; k++)
        ck_assert_msg(fabsf(dp1[k] - (0.75f + dp0[k])) <= 1e-6f * (1.0f + fabsf(dp0[k])),
                      "%s: dp[%d] %g after a start of 0.75, %g from zero", v->name, k,
                      (double)dp1[k], (double)dp0[k]);
    free(scratch);
}
END_TEST

static Suite* rowmap_laws_suite(void) {
    Suite* s = suite_create("rowmap_laws");
    TCase* tc = tcase_create("laws");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_gumbel_max_trick);
    tcase_add_test(tc, test_topk_ties_and_short_rows);
    tcase_add_test(tc, test_softermax_is_base2_softmax);
    tcase_add_loop_test(tc, test_backward_row_accumulates, 0, attn_count());
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(rowmap_laws_suite)
