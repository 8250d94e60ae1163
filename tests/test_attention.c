// tests/test_attention.c: generic tests that loop over the attention registry, so every variant
// (and every future one) is covered without editing this file. These run on the float (product)
// build; the gradient checks that resolve a 0.5% error run in double in tests/test_attn64_rows.c
// and tests/test_attn64_layer.c (docs/testing.md). Each variant is tested at its defaults and at
// every value of each of its choice hyperparameters:
//   - row gradient check of the float kernels (loss summed in double) against finite
//     differences, n in {1, 2, 7, 64}, including the per-head parameters and the key-norm input;
//     coordinates at a kink (where the 4-point estimates at h and h/2 disagree) are skipped, and
//     most coordinates must be checkable; straight-through variants are checked against their
//     declared smooth surrogate;
//   - a layer gradient check through the driver (B = 1, T = 5, C = 8, 2 heads) on q, k, v, the
//     layer input x, the row parameters and any layer tensors;
//   - causality: changing a future key/value never changes an earlier row or output;
//   - rows sum to 1 exactly when the variant says so; shift invariance holds exactly for the
//     variants that declare it and is absent for the others;
//   - finite forward and backward for scores up to |s| = 100;
//   - 1 thread and 2 threads give bit-identical outputs and gradients.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "common/util.h"
#include "tests/attn_harness.h"
#include "tests/testutil.h"

// ---------------------------------------------------------------------------------------------
// configurations: (variant, hyperparameters) pairs covering every choice value

#define MAX_CFG 512
typedef struct {
    const AttnVariant* v;
    AttnHParams hp;
    char label[128];
} VarCfg;

static VarCfg CFGS[MAX_CFG];
static int NCFG = 0;

static void add_cfg(const AttnVariant* v, const AttnHParams* hp, const char* label) {
    ASSERT(NCFG < MAX_CFG);
    CFGS[NCFG].v = v;
    CFGS[NCFG].hp = *hp;
    snprintf(CFGS[NCFG].label, sizeof(CFGS[NCFG].label), "%s%s", v->name, label);
    NCFG++;
}

static void build_cfgs(int T_train, int NH, int hs) {
    NCFG = 0;
    for (int i = 0; i < attn_count(); i++) {
        const AttnVariant* v = attn_get(i);
        if (!test_variant_selected(v->name)) continue; // ATTNLAB_TEST_VARIANTS (scripts/mutate)
        AttnHParams hp;
        attn_hparams_default(&hp, v, T_train, NH, hs, NH * hs, 2);
        if (v->layer_forward) hp.inner = attn_lookup("softmax");
        add_cfg(v, &hp, "");
        for (int k = 0; k < v->n_hparams; k++) {
            const AttnHParamSpec* s = &v->hparams[k];
            if (!s->choices) continue;
            int nchoice = 1;
            for (const char* p = s->choices; *p; p++)
                nchoice += *p == '|';
            for (int c = 0; c < nchoice; c++) {
                if (c == (int)s->def) continue;
                AttnHParams h2 = hp;
                h2.v[k] = (float)c;
                char label[96];
                snprintf(label, sizeof(label), "[%s=%d]", s->name, c);
                add_cfg(v, &h2, label);
            }
        }
    }
}

static void init_row_params(float* p, const VarCfg* c, int NH, Rng* r) {
    const AttnVariant* v = c->v;
    int P = v->params_per_head;
    for (int h = 0; h < NH; h++) {
        if (v->init_params)
            v->init_params(p + h * P, &c->hp);
        else
            memset(p + h * P, 0, sizeof(float) * (size_t)P);
        for (int k = 0; k < P; k++)
            p[h * P + k] += 0.02f * rng_normal(r); // off init symmetries
    }
}

// ---------------------------------------------------------------------------------------------
// row-level gradient check

typedef struct {
    const VarCfg* c;
    AttnRowCtx ctx;
    float *s, *w, *a, *p, *key_sq;
    int n;
} RowProblem;

static double row_loss(void* vp) {
    RowProblem* rp = vp;
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

// 4-point central difference with step h
static double fd(void* prob, double (*f)(void*), float* x, double h) {
    float x0 = *x;
    double v[4];
    const double off[4] = {-2, -1, 1, 2};
    for (int k = 0; k < 4; k++) {
        *x = (float)((double)x0 + off[k] * h);
        v[k] = f(prob);
    }
    *x = x0;
    return (v[0] - 8 * v[1] + 8 * v[2] - v[3]) / (12 * h);
}

// Float forward maps make the loss noisy at the level of float rounding of its terms: the
// 4-point estimate with step h carries about 8e-7 * sum|terms| / h of noise. Each coordinate is
// estimated at h = 0.02, 0.01 and 0.005; if the three disagree beyond noise, a kink lies within
// reach and the coordinate is skipped; otherwise the h = 0.01 estimate is compared.
static double fd_noise(double lmag, double h) {
    return 8e-7 * lmag / h;
}

static int check_coords(void* prob, double (*f)(void*), float* x, const float* g, int m,
                        double atol, double lmag, const char* what, const char* label, int n,
                        int* skipped) {
    int checked = 0;
    for (int i = 0; i < m; i++) {
        double d1 = fd(prob, f, &x[i], 2e-2);
        double d2 = fd(prob, f, &x[i], 1e-2);
        double d3 = fd(prob, f, &x[i], 5e-3);
        // same absolute floor as the acceptance test below: an estimate that drifts with h by
        // more than the allowed error is at a kink (e.g. a jump in the second derivative)
        if (fabs(d1 - d2) > 2e-3 * (fabs(d1) + fabs(d2)) + 1e-2 * atol + fd_noise(lmag, 1e-2) ||
            fabs(d2 - d3) > 2e-3 * (fabs(d2) + fabs(d3)) + 1e-2 * atol + fd_noise(lmag, 5e-3)) {
            (*skipped)++; // a kink within 2h
            continue;
        }
        // 1% relative, plus an absolute floor: 1% of atol and the estimate's rounding noise
        double diff = fabs(d2 - (double)g[i]);
        double allowed = 1e-2 * (fabs(d2) + fabs((double)g[i]) + atol) + fd_noise(lmag, 1e-2);
        ck_assert_msg(diff <= allowed,
                      "%s: d%s[%d] analytic %.8g vs numeric %.8g (n=%d, |diff| %.3g > %.3g)", label,
                      what, i, (double)g[i], d2, n, diff, allowed);
        checked++;
    }
    return checked;
}

static double row_lmag(const RowProblem* rp) {
    double s = 0;
    for (int j = 0; j < rp->n; j++)
        s += fabs((double)rp->w[j] * (double)rp->a[j]);
    return s;
}

// seeds derived from the configuration's label, so adding variants changes no other's draws
static uint64_t label_seed(const char* label) {
    uint64_t h = 1469598103934665603ULL;
    for (const char* p = label; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h;
}

static void row_gradcheck_one(const VarCfg* c, int n, uint64_t seed) {
    const AttnVariant* v = c->v;
    const int NH = 2, P = v->params_per_head;
    Rng r;
    rng_seed(&r, seed);
    size_t scratch = attn_row_scratch(v, 64);
    RowProblem rp = {.c = c, .n = n};
    rp.s = allocFloats((size_t)n);
    rp.w = allocFloats((size_t)n);
    rp.a = allocFloats((size_t)n);
    rp.key_sq = allocFloats((size_t)n);
    rp.p = allocFloats((size_t)(P * NH + 1));
    float* ds = allocFloats((size_t)n);
    float* dks = allocFloats((size_t)n);
    float* dp = allocFloats((size_t)(P + 1));
    float* scr = allocFloats(scratch + 1);
    float* key_sq = rp.key_sq;
    fill_normal(rp.s, (size_t)n, 1.5f, &r);
    fill_normal(rp.w, (size_t)n, 1.0f, &r);
    fill_uniform(rp.key_sq, (size_t)n, 0.2f, 3.0f, &r);
    if (P) init_row_params(rp.p, c, NH, &r);
    rp.ctx = (AttnRowCtx){.hp = &c->hp, .scratch = scr, .t = n - 1, .T = 64, .h = 1, .step = 3};
    float* p_head = rp.p + P; // head 1
    rp.p = P ? p_head : NULL;
    // analytic
    AttnRowCtx ctx = rp.ctx;
    ctx.p = rp.p;
    ctx.key_sq = v->needs_key_sq ? rp.key_sq : NULL;
    ctx.dp = P ? dp : NULL;
    ctx.dkey_sq = v->needs_key_sq ? dks : NULL;
    v->forward_row(rp.a, rp.s, n, &ctx);
    v->backward_row(ds, rp.w, rp.s, rp.a, n, &ctx);
    if (!v->needs_key_sq) rp.key_sq = NULL;
    float gmax = max_abs(ds, (size_t)n);
    if (P) gmax = fmaxf(gmax, max_abs(dp, (size_t)P));
    double atol = 2e-3 * (double)gmax + 1e-5;
    int skipped = 0, checked = 0;
    double lmag = row_lmag(&rp);
    checked += check_coords(&rp, row_loss, rp.s, ds, n, atol, lmag, "s", c->label, n, &skipped);
    if (P)
        checked += check_coords(&rp, row_loss, rp.p, dp, P, atol, lmag, "p", c->label, n, &skipped);
    if (v->needs_key_sq)
        checked += check_coords(&rp, row_loss, rp.key_sq, dks, n, atol, lmag, "key_sq", c->label, n,
                                &skipped);
    ck_assert_msg(checked >= skipped, "%s: n=%d: %d coordinates at kinks vs %d checked", c->label,
                  n, skipped, checked);
    free(rp.s);
    free(rp.w);
    free(rp.a);
    free(key_sq);
    free(p_head - P);
    free(ds);
    free(dks);
    free(dp);
    free(scr);
}

START_TEST(test_row_gradcheck) {
    const VarCfg* c = &CFGS[_i];
    if (!c->v->forward_row) return; // layer-level variants are checked through the layer test
    const int ns[] = {1, 2, 7, 64};
    for (int k = 0; k < 4; k++)
        for (int trial = 0; trial < 3; trial++)
            row_gradcheck_one(c, ns[k], label_seed(c->label) + 10u * (uint64_t)k + (uint64_t)trial);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// row invariants

static void run_row(const VarCfg* c, float* a, const float* s, int n, const float* p,
                    const float* key_sq, float* scr) {
    AttnRowCtx ctx = {.hp = &c->hp,
                      .p = p,
                      .scratch = scr,
                      .key_sq = key_sq,
                      .t = n - 1,
                      .T = 64,
                      .h = 1,
                      .step = 3};
    c->v->forward_row(a, s, n, &ctx);
}

START_TEST(test_row_invariants) {
    const VarCfg* c = &CFGS[_i];
    const AttnVariant* v = c->v;
    if (!v->forward_row) return;
    Rng r;
    rng_seed(&r, label_seed(c->label) + 77);
    const int n = 33, P = v->params_per_head;
    float s[33], s2[33], a[33], a2[33], ks[33], p[2 * ATTN_MAX_PPH + 1];
    float* scr = allocFloats(attn_row_scratch(v, 64) + 1);
    fill_uniform(ks, n, 0.2f, 3.0f, &r);
    if (P) init_row_params(p, c, 2, &r);
    const float* ph = P ? p + P : NULL;
    const float* kp = v->needs_key_sq ? ks : NULL;
    double max_shift_diff = 0;
    for (int trial = 0; trial < 20; trial++) {
        int nn = 1 + (trial * 7) % n;
        fill_normal(s, (size_t)nn, 2.0f, &r);
        run_row(c, a, s, nn, ph, kp, scr);
        double sum = 0;
        for (int j = 0; j < nn; j++) {
            ck_assert_msg(isfinite(a[j]), "%s: non-finite weight", c->label);
            sum += a[j];
        }
        if (v->rows_sum_to_one)
            ck_assert_msg(fabs(sum - 1.0) < 1e-5, "%s: row of %d sums to %.9g, declared 1",
                          c->label, nn, sum);
        // shift by a per-row constant
        float cst = 0.75f + (float)trial * 0.1f;
        for (int j = 0; j < nn; j++)
            s2[j] = s[j] + cst;
        run_row(c, a2, s2, nn, ph, kp, scr);
        for (int j = 0; j < nn; j++) {
            double dd = fabs((double)a[j] - (double)a2[j]);
            if (dd > max_shift_diff) max_shift_diff = dd;
            if (v->shift_invariant)
                ck_assert_msg(dd < 2e-5 * (1 + fabs((double)a[j])),
                              "%s: declared shift-invariant but a[%d] moved %.3g under s+%.2f",
                              c->label, j, dd, (double)cst);
        }
    }
    if (!v->shift_invariant)
        ck_assert_msg(max_shift_diff > 1e-4,
                      "%s: declared not shift-invariant, but shifting scores changed nothing "
                      "(max change %.3g): a hidden max-normalisation?",
                      c->label, max_shift_diff);
    free(scr);
}
END_TEST

START_TEST(test_row_extreme_logits) {
    const VarCfg* c = &CFGS[_i];
    const AttnVariant* v = c->v;
    if (!v->forward_row) return;
    Rng r;
    rng_seed(&r, label_seed(c->label) + 5);
    const int n = 64, P = v->params_per_head;
    float s[64], a[64], da[64], ds[64], ks[64], dks[64], p[2 * ATTN_MAX_PPH + 1],
        dp[ATTN_MAX_PPH + 1];
    float* scr = allocFloats(attn_row_scratch(v, 64) + 1);
    fill_uniform(ks, n, 0.2f, 3.0f, &r);
    if (P) init_row_params(p, c, 2, &r);
    for (int mode = 0; mode < 4; mode++) {
        for (int j = 0; j < n; j++) {
            if (mode == 0)
                s[j] = -100.0f + 200.0f * rng_uniform(&r);
            else if (mode == 1)
                s[j] = 100.0f;
            else if (mode == 2)
                s[j] = -100.0f;
            else
                s[j] = (j % 2) ? 100.0f : -100.0f;
        }
        fill_normal(da, n, 1.0f, &r);
        memset(ds, 0, sizeof(ds));
        memset(dp, 0, sizeof(dp));
        memset(dks, 0, sizeof(dks));
        for (int nn = 1; nn <= n; nn += 21) {
            AttnRowCtx ctx = {.hp = &c->hp,
                              .p = P ? p + P : NULL,
                              .dp = P ? dp : NULL,
                              .scratch = scr,
                              .key_sq = v->needs_key_sq ? ks : NULL,
                              .dkey_sq = v->needs_key_sq ? dks : NULL,
                              .t = nn - 1,
                              .T = 64,
                              .h = 1,
                              .step = 3};
            v->forward_row(a, s, nn, &ctx);
            v->backward_row(ds, da, s, a, nn, &ctx);
            for (int j = 0; j < nn; j++) {
                ck_assert_msg(isfinite(a[j]), "%s: a[%d] not finite at |s|=100 (mode %d, n=%d)",
                              c->label, j, mode, nn);
                ck_assert_msg(isfinite(ds[j]), "%s: ds[%d] not finite at |s|=100 (mode %d, n=%d)",
                              c->label, j, mode, nn);
            }
            for (int k = 0; k < P; k++)
                ck_assert_msg(isfinite(dp[k]), "%s: dp[%d] not finite at |s|=100", c->label, k);
        }
    }
    free(scr);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// layer-level checks (tests/attn_harness.h builds the layer)

static void layer_check(AttnHarness* lp, const char* cfg_label, float* x, const float* g, size_t n,
                        double atol, const char* what) {
    int skipped = 0;
    size_t BTC = (size_t)lp->d.B * lp->d.T * lp->d.C;
    harness_loss(lp);
    double lmag = 0;
    for (size_t i = 0; i < BTC; i++)
        lmag += fabs((double)lp->w[i] * (double)lp->out[i]);
    char label[200];
    static const char* const POS[] = {"learned", "rope", "alibi", "none"};
    snprintf(label, sizeof(label), "%s (layer, pos_encoding=%s)", cfg_label,
             POS[lp->L.pos_encoding & 3]);
    int checked =
        check_coords(lp, harness_loss, x, g, (int)n, atol, lmag, what, label, lp->d.T, &skipped);
    // a handful of parameters, each touching every row, can all sit near some kink
    if (n > 8)
        ck_assert_msg(checked >= skipped, "%s: layer d%s: %d kinks vs %d checked", cfg_label, what,
                      skipped, checked);
}

START_TEST(test_layer_gradcheck) {
    // every configuration under every position encoding: _i = cfg * 4 + encoding
    const VarCfg* c = &CFGS[_i / 4];
    const int pos = _i % 4; // ATTN_POS_LEARNED, _ROPE, _ALIBI, _NONE
    AttnHarness lp;
    harness_setup(&lp, c->v, &c->hp, pos, 1, 5, 8, 2, 1, 0, label_seed(c->label) + (uint64_t)pos);
    // straight-through row maps: check the backward against their smooth surrogate
    AttnVariant surrogate;
    if (lp.row->surrogate_row) {
        surrogate = *lp.row;
        surrogate.forward_row = lp.row->surrogate_row;
        lp.L.row = &surrogate;
        if (!c->v->layer_forward) lp.L.v = &surrogate;
    }
    harness_zero_grads(&lp);
    attention_forward(&lp.L);
    attention_backward(&lp.L);
    size_t BTC = 5 * 8;
    float gmax = fmaxf(max_abs(lp.dqkv, 3 * BTC), max_abs(lp.dx, BTC));
    double atol = 2e-3 * (double)gmax + 1e-5;
    layer_check(&lp, c->label, lp.qkv, lp.dqkv, 3 * BTC, atol, "qkv");
    layer_check(&lp, c->label, lp.x, lp.dx, BTC, atol, "x");
    int P = lp.row->params_per_head;
    if (P) layer_check(&lp, c->label, lp.rowp, lp.drowp, (size_t)2 * P, atol, "rowp");
    for (int k = 0; k < lp.ntens; k++)
        layer_check(&lp, c->label, lp.tp[k], lp.dtp[k], lp.tsize[k], atol, lp.specs[k].name);
    harness_free(&lp);
}
END_TEST

START_TEST(test_layer_causality) {
    const VarCfg* c = &CFGS[_i];
    const int B = 1, T = 9, C = 8, NH = 2;
    AttnHarness lp;
    harness_setup(&lp, c->v, &c->hp, ATTN_POS_LEARNED, B, T, C, NH, 1, 0,
                  label_seed(c->label) + 99);
    attention_forward(&lp.L);
    size_t BTC = (size_t)B * T * C;
    float* out0 = allocFloats(BTC);
    float* att0 = allocFloats((size_t)NH * T * T);
    memcpy(out0, lp.out, sizeof(float) * BTC);
    memcpy(att0, lp.att, sizeof(float) * (size_t)NH * T * T);
    // perturb everything at the last position: its q, k, v and x
    for (int i = 0; i < 3 * C; i++)
        lp.qkv[(size_t)(T - 1) * 3 * C + (size_t)i] += 0.7f;
    for (int i = 0; i < C; i++)
        lp.x[(size_t)(T - 1) * C + (size_t)i] -= 0.5f;
    attention_forward(&lp.L);
    for (int t = 0; t < T - 1; t++) {
        for (int i = 0; i < C; i++)
            ck_assert_msg(out0[(size_t)t * C + i] == lp.out[(size_t)t * C + i],
                          "%s: output at t=%d changed when a future position changed", c->label, t);
        for (int h = 0; h < NH; h++)
            for (int j = 0; j < T; j++)
                ck_assert_msg(att0[((size_t)h * T + t) * T + j] ==
                                  lp.att[((size_t)h * T + t) * T + j],
                              "%s: att row %d changed when a future key changed", c->label, t);
    }
    for (int h = 0; h < NH; h++)
        for (int t = 0; t < T; t++)
            for (int j = t + 1; j < T; j++)
                ck_assert_msg(lp.att[((size_t)h * T + t) * T + j] == 0.0f,
                              "%s: att[%d][%d] above the diagonal is not 0", c->label, t, j);
    free(out0);
    free(att0);
    harness_free(&lp);
}
END_TEST

START_TEST(test_layer_threads_identical) {
    const VarCfg* c = &CFGS[_i];
    const int B = 2, T = 24, C = 16, NH = 4;
    AttnHarness a, b;
    harness_setup(&a, c->v, &c->hp, ATTN_POS_LEARNED, B, T, C, NH, 1, 0, label_seed(c->label) + 7);
    harness_setup(&b, c->v, &c->hp, ATTN_POS_LEARNED, B, T, C, NH, 2, 0, label_seed(c->label) + 7);
    harness_pass(&a);
    harness_pass(&b);
    harness_expect_identical(&a, &b, c->label);
    harness_free(&a);
    harness_free(&b);
}
END_TEST

START_TEST(test_registry_well_formed) {
    ck_assert_int_gt(attn_count(), 0);
    for (int i = 0; i < attn_count(); i++) {
        const AttnVariant* v = attn_get(i);
        ck_assert_msg(v->name && v->formula && *v->formula, "variant %d lacks name/formula", i);
        ck_assert_msg(attn_lookup(v->name) == v, "%s: lookup mismatch (duplicate name?)", v->name);
        ck_assert_msg(v->forward_row || v->layer_forward, "%s: neither row map nor layer hook",
                      v->name);
        ck_assert_msg(!v->forward_row || v->backward_row, "%s: row map without backward", v->name);
        ck_assert_msg(!v->layer_forward || v->layer_backward, "%s: layer forward without backward",
                      v->name);
        ck_assert_msg(v->params_per_head <= ATTN_MAX_PPH, "%s: too many params", v->name);
        ck_assert_msg(v->n_hparams <= ATTN_MAX_HP, "%s: too many hyperparameters", v->name);
        for (int k = 0; k < v->params_per_head; k++)
            ck_assert_msg(v->param_names && v->param_names[k], "%s: param %d unnamed", v->name, k);
        for (int k = 0; k < v->n_hparams; k++) {
            const AttnHParamSpec* s = &v->hparams[k];
            ck_assert_msg(s->name && s->help, "%s: hparam %d lacks name/help", v->name, k);
            if (!s->choices)
                ck_assert_msg(s->min <= s->def && s->def <= s->max,
                              "%s: attn.%s default %g outside [%g, %g]", v->name, s->name,
                              (double)s->def, (double)s->min, (double)s->max);
        }
    }
    ck_assert_ptr_null(attn_lookup("no-such-variant"));
    ck_assert_str_eq(attn_closest("sofmax"), "softmax");
}
END_TEST

START_TEST(test_hparams_parse) {
    // every variant accepts its defaults written as text, and rejects junk and unknown keys
    char err[256];
    for (int i = 0; i < attn_count(); i++) {
        const AttnVariant* v = attn_get(i);
        AttnHParams hp;
        attn_hparams_default(&hp, v, 64, 2, 4, 8, 2);
        ck_assert_int_eq(attn_hparams_set(&hp, v, "no_such_key", "1", err, sizeof(err)), -1);
        ck_assert_msg(strstr(err, "attn.no_such_key") != NULL, "message lacks key: %s", err);
        for (int k = 0; k < v->n_hparams; k++) {
            const AttnHParamSpec* s = &v->hparams[k];
            if (s->choices) {
                ck_assert_int_eq(
                    attn_hparams_set(&hp, v, s->name, "not-a-choice", err, sizeof(err)), -1);
                ck_assert_msg(strstr(err, s->name) != NULL, "%s", err);
            } else {
                char buf[64];
                snprintf(buf, sizeof(buf), "%.9g", (double)s->def);
                ck_assert_int_eq(attn_hparams_set(&hp, v, s->name, buf, err, sizeof(err)), 0);
                ck_assert_int_eq(attn_hparams_set(&hp, v, s->name, "1.5x", err, sizeof(err)), -1);
                if (s->max < 1e30f) {
                    snprintf(buf, sizeof(buf), "%.9g", (double)s->max * 2 + 1);
                    ck_assert_int_eq(attn_hparams_set(&hp, v, s->name, buf, err, sizeof(err)), -1);
                    ck_assert_msg(strstr(err, "out of range") != NULL, "%s", err);
                }
            }
        }
    }
}
END_TEST

static Suite* attention_suite(void) {
    build_cfgs(64, 2, 4);
    Suite* s = suite_create("attention");
    TCase* tc = tcase_create("registry");
    tcase_add_test(tc, test_registry_well_formed);
    tcase_add_test(tc, test_hparams_parse);
    suite_add_tcase(s, tc);
    TCase* rows = tcase_create("rows");
    tcase_set_timeout(rows, 120);
    tcase_add_loop_test(rows, test_row_gradcheck, 0, NCFG);
    tcase_add_loop_test(rows, test_row_invariants, 0, NCFG);
    tcase_add_loop_test(rows, test_row_extreme_logits, 0, NCFG);
    suite_add_tcase(s, rows);
    TCase* layer = tcase_create("layer");
    tcase_set_timeout(layer, 120);
    tcase_add_loop_test(layer, test_layer_gradcheck, 0, 4 * NCFG);
    tcase_add_loop_test(layer, test_layer_causality, 0, NCFG);
    tcase_add_loop_test(layer, test_layer_threads_identical, 0, NCFG);
    suite_add_tcase(s, layer);
    return s;
}

TEST_MAIN(attention_suite)
