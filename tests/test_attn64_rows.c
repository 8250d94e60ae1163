// tests/test_attn64_rows.c: row-map gradient checks in double precision (attention/ compiled
// with -DATTN_REAL_DOUBLE), one test per registered row map, over all its configurations
// (tests/attn64_cfg.h: defaults, every choice value, numeric sweeps):
//   - rows of n in {1, 2, 7, 64, 300} keys, two draws each: ds, the per-head parameters dp and,
//     for key-norm maps, d|k|^2 against 4-point differences at h = 1e-4 with a 1e-6 relative
//     tolerance (a 0.5% error in any one entry fails);
//   - straight-through maps are checked against their declared surrogate, and the surrogate of
//     a map documented as "straight-through softmax" must be softmax (computed here from its
//     definition);
//   - every per-head parameter must be checked, with a nonzero gradient, under at least one
//     configuration: a parameter no configuration uses is reported as a defect;
//   - at most half of a row's used score coordinates may sit at kinks.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "common/util.h"
#include "tests/attn64_cfg.h"
#include "tests/testutil.h"

#define NMAX 300

typedef struct {
    const Attn64Cfg* c;
    AttnRowCtx ctx;
    real *s, *w, *a, *p, *key_sq;
    int n;
} RowProb;

static double row_loss(void* vp) {
    RowProb* rp = vp;
    const AttnVariant* v = rp->c->v;
    AttnRowCtx ctx = rp->ctx;
    ctx.p = rp->p;
    ctx.key_sq = rp->key_sq;
    ctx.dp = NULL;
    ctx.dkey_sq = NULL;
    if (v->surrogate_row)
        v->surrogate_row(rp->a, rp->s, rp->n, &ctx);
    else
        v->forward_row(rp->a, rp->s, rp->n, &ctx);
    double L = 0;
    for (int j = 0; j < rp->n; j++)
        L += (double)rp->w[j] * (double)rp->a[j];
    return L;
}

static void fill(real* x, int n, double lo, double hi, int normal, Rng* r) {
    for (int i = 0; i < n; i++)
        x[i] =
            normal ? (real)(hi * (double)rng_normal(r)) : (real)(lo + (hi - lo) * rng_uniform_d(r));
}

// one row of n keys; adds to used_p[k] when parameter k was checked with a nonzero gradient
static void row_one(const Attn64Cfg* c, int n, uint64_t seed, int* used_p) {
    const AttnVariant* v = c->v;
    const int P = v->params_per_head;
    Rng r;
    rng_seed(&r, seed);
    real* buf = real_alloc((size_t)8 * NMAX + 64);
    real *s = buf, *w = s + NMAX, *a = w + NMAX, *ks = a + NMAX, *ds = ks + NMAX, *dks = ds + NMAX,
         *p = dks + NMAX, *dp = p + 32;
    real* scr = real_alloc(attn_row_scratch(v, NMAX) + 1);
    fill(s, n, 0, 1.5, 1, &r);
    fill(w, n, 0, 1.0, 1, &r);
    fill(ks, n, 0.2, 3.0, 0, &r);
    if (P) { // head 1's parameters: the init, moved off its symmetries and kinks
        if (v->init_params) v->init_params(p, &c->hp);
        for (int k = 0; k < P; k++)
            p[k] += (real)(0.05 * (double)rng_normal(&r));
    }
    RowProb rp = {.c = c, .s = s, .w = w, .a = a, .p = P ? p : NULL, .n = n};
    rp.key_sq = v->needs_key_sq ? ks : NULL;
    rp.ctx = (AttnRowCtx){.hp = &c->hp, .scratch = scr, .t = n - 1, .T = NMAX, .h = 1, .step = 3};
    AttnRowCtx ctx = rp.ctx;
    ctx.p = rp.p;
    ctx.key_sq = rp.key_sq;
    ctx.dp = P ? dp : NULL;
    ctx.dkey_sq = v->needs_key_sq ? dks : NULL;
    v->forward_row(a, s, n, &ctx);
    v->backward_row(ds, w, s, a, n, &ctx);
    double gmax = attn64_max_abs(ds, (size_t)n);
    if (P) gmax = fmax(gmax, attn64_max_abs(dp, (size_t)P));
    if (v->needs_key_sq) gmax = fmax(gmax, attn64_max_abs(dks, (size_t)n));
    row_loss(&rp);
    double lmag = 0;
    for (int j = 0; j < n; j++)
        lmag += fabs((double)w[j] * (double)a[j]);
    char label[200];
    snprintf(label, sizeof(label), "%s (row n=%d, seed %llu)", c->label, n,
             (unsigned long long)seed);
    Attn64Count cs = attn64_check(row_loss, &rp, s, ds, (size_t)n, gmax, lmag, label, "s");
    ck_assert_msg(cs.kinks <= cs.checked, "%s: %d score coordinates at kinks vs %d checked", label,
                  cs.kinks, cs.checked);
    if (v->needs_key_sq) {
        Attn64Count ck =
            attn64_check(row_loss, &rp, ks, dks, (size_t)n, gmax, lmag, label, "key_sq");
        ck_assert_msg(ck.kinks <= ck.checked, "%s: key_sq: %d kinks vs %d checked", label, ck.kinks,
                      ck.checked);
    }
    for (int k = 0; k < P; k++) {
        Attn64Count cp =
            attn64_check(row_loss, &rp, &p[k], &dp[k], 1, gmax, lmag, label, v->param_names[k]);
        if (cp.checked && dp[k] != 0) used_p[k]++;
    }
    free(scr);
    free(buf);
}

START_TEST(test_row_gradcheck64) {
    const AttnVariant* v = attn_get(_i);
    if (!test_variant_selected(v->name)) return; // ATTNLAB_TEST_VARIANTS (scripts/mutate)
    if (!v->forward_row) return;                 // layer-level: test_attn64_layer
    static Attn64Cfg cfgs[ATTN64_MAX_CFG];
    int nc = attn64_cfgs(cfgs, v, 64, 2, 4);
    int used_p[ATTN_MAX_PPH] = {0};
    const int ns[] = {1, 2, 7, 64, NMAX};
    for (int i = 0; i < nc; i++)
        for (int k = 0; k < 5; k++)
            for (int trial = 0; trial < 2; trial++)
                row_one(&cfgs[i], ns[k], attn64_seed(cfgs[i].label) + 10u * (uint64_t)k + trial,
                        used_p);
    for (int k = 0; k < v->params_per_head; k++)
        ck_assert_msg(used_p[k] > 0,
                      "%s: parameter %s is never checked with a nonzero gradient under any of "
                      "%d configurations (unused, or always at a kink)",
                      v->name, v->param_names[k], nc);
}
END_TEST

// softmax from its definition, in double
static void ref_softmax(double* a, const real* s, int n) {
    double m = -INFINITY, sum = 0;
    for (int j = 0; j < n; j++)
        m = fmax(m, (double)s[j]);
    for (int j = 0; j < n; j++)
        sum += (a[j] = exp((double)s[j] - m));
    for (int j = 0; j < n; j++)
        a[j] /= sum;
}

START_TEST(test_surrogate_declared64) {
    // a straight-through map documented as having the softmax backward must use softmax
    const AttnVariant* v = attn_get(_i);
    if (!test_variant_selected(v->name)) return; // ATTNLAB_TEST_VARIANTS (scripts/mutate)
    if (!v->surrogate_row || !strstr(v->formula, "straight-through softmax")) return;
    Rng r;
    rng_seed(&r, attn64_seed(v->name));
    real s[64], a[64];
    double ref[64];
    real* scr = real_alloc(attn_row_scratch(v, 64) + 1);
    AttnHParams hp;
    attn_hparams_default(&hp, v, 64, 2, 4, 8, 2);
    AttnRowCtx ctx = {.hp = &hp, .scratch = scr, .t = 63, .T = 64, .h = 1, .step = 3};
    fill(s, 64, 0, 2.0, 1, &r);
    v->surrogate_row(a, s, 64, &ctx);
    ref_softmax(ref, s, 64);
    for (int j = 0; j < 64; j++)
        ck_assert_msg(fabs((double)a[j] - ref[j]) <= 1e-12 * (1 + ref[j]),
                      "%s: surrogate a[%d] = %.15g, softmax %.15g", v->name, j, (double)a[j],
                      ref[j]);
    free(scr);
}
END_TEST

START_TEST(test_double_build64) {
    // the suite really runs on the double kernels
    ck_assert_int_eq((int)sizeof(real), 8);
    ck_assert_int_eq(REAL_IS_DOUBLE, 1);
}
END_TEST

static Suite* attn64_rows_suite(void) {
    Suite* s = suite_create("attn64_rows");
    TCase* tc = tcase_create("rows");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_double_build64);
    tcase_add_loop_test(tc, test_row_gradcheck64, 0, attn_count());
    tcase_add_loop_test(tc, test_surrogate_declared64, 0, attn_count());
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(attn64_rows_suite)
