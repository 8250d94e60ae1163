// tests/test_attention_bounds.c: memory bounds of every variant, and the hyperparameter ranges.
//   - every row map reads s, a, da and key_sq only at j < n and writes a, ds, dkey_sq only at
//     j < n, dp only at k < params_per_head and its scratch only within scratch_floats(T): each
//     buffer is followed by guard floats (NaN after inputs, so a read past the end poisons the
//     result; a bit pattern after outputs, so a write past the end shows), for n in {1, 7, 64};
//   - every layer-level variant, through attention_forward / attention_backward on B = 2 batch
//     items: NaN guards after x, qkv, dout and the row parameters, patterned guards after out,
//     att, dx, dqkv and the layer-tensor gradients, and the per-thread extra scratch pre-filled
//     with NaN (a variant may only read scratch it wrote). A loop one row past the end (for
//     example t <= T in a per-row VJP) reads the next batch item or the guard and fails here
//     without AddressSanitizer.
//   - numeric hyperparameter ranges: every numeric key of every variant accepts its declared
//     bounds and rejects values just outside, naming the key; entmax's alpha against the bounds
//     documented in docs/variants.md ([1.01, 2]), which the registry itself cannot vouch for;
//     every hyperparameter's default and range (or default choice) as the variant table of
//     docs/variants.md documents them, parsed from the page (a registry value moved by 1% fails).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "common/util.h"
#include "tests/attn_harness.h"
#include "tests/testutil.h"

enum { GUARD = 48 };

static const uint32_t PATTERN = 0x7f8a5a5au; // a signalling-NaN bit pattern no kernel writes

static float pattern_float(void) {
    float f;
    memcpy(&f, &PATTERN, sizeof(f));
    return f;
}

static void fill_guard_nan(float* g, size_t n) {
    for (size_t i = 0; i < n; i++)
        g[i] = NAN;
}

static void fill_guard_pattern(float* g, size_t n) {
    const float p = pattern_float();
    for (size_t i = 0; i < n; i++)
        g[i] = p;
}

// index of the first guard float that no longer holds the pattern, or -1
static long guard_broken(const float* g, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &g[i], sizeof(u));
        if (u != PATTERN) return (long)i;
    }
    return -1;
}

static void assert_finite(const float* x, size_t n, const char* what, const char* name) {
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(isfinite(x[i]), "%s: %s[%zu] = %g (a read past a buffer's end?)", name, what,
                      i, (double)x[i]);
}

static void assert_guard(const float* g, const char* what, const char* name) {
    long k = guard_broken(g, GUARD);
    ck_assert_msg(k < 0, "%s: written %ld floats past the end of %s", name, k, what);
}

// ---------------------------------------------------------------------------------------------
// row maps

static void row_bounds(const AttnVariant* v, const AttnHParams* hp0, int n) {
    const int T = 64;
    AttnHParams hp = *hp0;
    const int P = v->params_per_head;
    const size_t S = attn_row_scratch(v, T);
    float *s = allocFloats(n + GUARD), *a = allocFloats(n + GUARD), *da = allocFloats(n + GUARD);
    float *ds = allocFloats(n + GUARD), *ks = allocFloats(n + GUARD);
    float *dks = allocFloats(n + GUARD), *scratch = allocFloats(S + GUARD);
    float p[ATTN_MAX_PPH + GUARD], dp[ATTN_MAX_PPH + GUARD];
    Rng r;
    rng_seed(&r, 101 + (uint64_t)n);
    fill_normal(s, (size_t)n, 1.5f, &r);
    fill_normal(da, (size_t)n, 1.0f, &r);
    fill_uniform(ks, (size_t)n, 0.2f, 3.0f, &r);
    fill_guard_nan(s + n, GUARD);
    fill_guard_nan(da + n, GUARD);
    fill_guard_nan(ks + n, GUARD);
    fill_guard_pattern(a + n, GUARD);
    fill_guard_pattern(scratch + S, GUARD);
    memset(p, 0, sizeof(p));
    if (v->init_params) v->init_params(p, &hp);
    for (int k = 0; k < P; k++)
        p[k] += 0.05f * (float)(k + 1);
    fill_guard_nan(p + P, (size_t)(ATTN_MAX_PPH + GUARD - P));
    AttnRowCtx ctx = {.hp = &hp,
                      .p = P ? p : NULL,
                      .scratch = scratch,
                      .key_sq = v->needs_key_sq ? ks : NULL,
                      .t = n - 1,
                      .T = T,
                      .h = 1,
                      .step = 3,
                      .seed = 5};
    v->forward_row(a, s, n, &ctx);
    assert_guard(a + n, "a (forward)", v->name);
    assert_guard(scratch + S, "the row scratch (forward)", v->name);
    assert_finite(a, (size_t)n, "a", v->name);
    fill_guard_nan(a + n, GUARD); // a is an input of the backward
    memset(ds, 0, sizeof(float) * (size_t)n);
    memset(dks, 0, sizeof(float) * (size_t)n);
    fill_guard_pattern(ds + n, GUARD);
    fill_guard_pattern(dks + n, GUARD);
    memset(dp, 0, sizeof(dp));
    fill_guard_pattern(dp + P, GUARD);
    ctx.dp = P ? dp : NULL;
    ctx.dkey_sq = v->needs_key_sq ? dks : NULL;
    v->backward_row(ds, da, s, a, n, &ctx);
    assert_guard(ds + n, "ds", v->name);
    assert_guard(scratch + S, "the row scratch (backward)", v->name);
    assert_finite(ds, (size_t)n, "ds", v->name);
    if (P) {
        assert_guard(dp + P, "dp", v->name);
        assert_finite(dp, (size_t)P, "dp", v->name);
    }
    if (v->needs_key_sq) {
        assert_guard(dks + n, "dkey_sq", v->name);
        assert_finite(dks, (size_t)n, "dkey_sq", v->name);
    }
    free(s);
    free(a);
    free(da);
    free(ds);
    free(ks);
    free(dks);
    free(scratch);
}

// at the defaults, at every other value of each choice, and at both ends of each numeric range
// (one hyperparameter at a time), so every code path of the map runs with guards
START_TEST(test_row_map_bounds) {
    const AttnVariant* v = attn_get(_i);
    if (!v->forward_row || !test_variant_selected(v->name)) return;
    const int ns[] = {1, 7, 64};
    AttnHParams def;
    attn_hparams_default(&def, v, 64, 2, 8, 16, 2);
    for (int k = 0; k < 3; k++)
        row_bounds(v, &def, ns[k]);
    for (int i = 0; i < v->n_hparams; i++) {
        const AttnHParamSpec* s = &v->hparams[i];
        int nc = 0;
        if (s->choices) {
            nc = 1;
            for (const char* c = s->choices; *c; c++)
                nc += *c == '|';
        }
        const int nv = s->choices ? nc : 2;
        for (int c = 0; c < nv; c++) {
            AttnHParams hp = def;
            hp.v[i] = s->choices ? (float)c : (c ? s->max : s->min);
            if (hp.v[i] == def.v[i]) continue;
            for (int k = 0; k < 3; k++)
                row_bounds(v, &hp, ns[k]);
        }
    }
}
END_TEST

// ---------------------------------------------------------------------------------------------
// layer-level variants

// a copy of *buf with GUARD floats after it (NaN or the pattern); *buf is replaced, the old
// buffer freed
static float* guarded(float** buf, size_t n, int nan_guard) {
    float* g = allocFloats(n + GUARD);
    memcpy(g, *buf, sizeof(float) * n);
    if (nan_guard)
        fill_guard_nan(g + n, GUARD);
    else
        fill_guard_pattern(g + n, GUARD);
    free(*buf);
    *buf = g;
    return g;
}

static void poison_scratch(AttnWorkspace* ws, size_t floats) {
    attn_workspace_reserve(ws, floats);
    fill_guard_nan(attn_thread_scratch(ws), floats); // one thread: its scratch is all of it
}

START_TEST(test_layer_bounds) {
    const AttnVariant* v = attn_get(_i);
    if (!v->layer_forward || !test_variant_selected(v->name)) return;
    enum { B = 2, T = 9, C = 16, NH = 2 };
    AttnHarness h;
    harness_setup(&h, v, NULL, ATTN_POS_LEARNED, B, T, C, NH, 1, 0.0f, 77);
    const size_t BTC = (size_t)B * T * C, BNTT = (size_t)B * NH * T * T;
    const int P = h.row->params_per_head;
    h.L.x = guarded(&h.x, BTC, 1);
    h.L.qkv = guarded(&h.qkv, 3 * BTC, 1);
    h.L.dout = guarded(&h.w, BTC, 1);
    h.L.out = guarded(&h.out, BTC, 0);
    h.L.att = guarded(&h.att, BNTT, 0);
    h.L.dx = guarded(&h.dx, BTC, 0);
    h.L.dqkv = guarded(&h.dqkv, 3 * BTC, 0);
    if (P) {
        h.L.rowp = guarded(&h.rowp, (size_t)NH * P, 1);
        h.L.drowp = guarded(&h.drowp, (size_t)NH * P, 0);
    }
    for (int k = 0; k < h.ntens; k++) {
        h.L.tp[k] = guarded(&h.tp[k], h.tsize[k], 1);
        h.L.dtp[k] = guarded(&h.dtp[k], h.tsize[k], 0);
    }
    // more scratch than any variant reserves at this size, so its own reserve keeps these NaNs
    const size_t SCR = 4 * (size_t)T * T + 8 * (size_t)T * C + 4096;
    poison_scratch(h.ws, SCR);
    attention_forward(&h.L);
    assert_guard(h.out + BTC, "out", v->name);
    assert_guard(h.att + BNTT, "att", v->name);
    assert_finite(h.out, BTC, "out", v->name);
    // the harness's zeroing would clear the float after drowp: zero exactly the buffers
    memset(h.dx, 0, sizeof(float) * BTC);
    memset(h.dqkv, 0, sizeof(float) * 3 * BTC);
    if (P) memset(h.drowp, 0, sizeof(float) * (size_t)NH * P);
    for (int k = 0; k < h.ntens; k++)
        memset(h.dtp[k], 0, sizeof(float) * h.tsize[k]);
    poison_scratch(h.ws, SCR);
    attention_backward(&h.L);
    assert_guard(h.dx + BTC, "dx", v->name);
    assert_guard(h.dqkv + 3 * BTC, "dqkv", v->name);
    assert_finite(h.dx, BTC, "dx", v->name);
    assert_finite(h.dqkv, 3 * BTC, "dqkv", v->name);
    if (P) {
        assert_guard(h.drowp + (size_t)NH * P, "drowp", v->name);
        assert_finite(h.drowp, (size_t)NH * P, "drowp", v->name);
    }
    for (int k = 0; k < h.ntens; k++) {
        assert_guard(h.dtp[k] + h.tsize[k], h.specs[k].name, v->name);
        assert_finite(h.dtp[k], h.tsize[k], h.specs[k].name, v->name);
    }
    harness_free(&h);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// hyperparameter ranges

static int try_set(const AttnVariant* v, const char* key, double x, char* err, size_t cap,
                   float* stored) {
    AttnHParams hp;
    attn_hparams_default(&hp, v, 64, 2, 8, 16, 2);
    char val[64];
    snprintf(val, sizeof(val), "%.17g", x);
    err[0] = '\0';
    int rc = attn_hparams_set(&hp, v, key, val, err, cap);
    if (stored) *stored = hp.v[attn_hparam_index(v, key)];
    return rc;
}

static void expect_rejected(const AttnVariant* v, const char* key, double x) {
    char err[256], want[64];
    ck_assert_msg(try_set(v, key, x, err, sizeof(err), NULL) != 0, "%s: attn.%s = %.9g accepted",
                  v->name, key, x);
    snprintf(want, sizeof(want), "'attn.%s'", key);
    ck_assert_msg(strstr(err, want) && strstr(err, "out of range"),
                  "%s: the message for attn.%s = %.9g does not name the key: %s", v->name, key, x,
                  err);
}

static void expect_accepted(const AttnVariant* v, const char* key, double x) {
    char err[256];
    float got = 0;
    ck_assert_msg(try_set(v, key, x, err, sizeof(err), &got) == 0, "%s: attn.%s = %.9g refused: %s",
                  v->name, key, x, err);
    ck_assert_msg(got == (float)x, "%s: attn.%s = %.9g stored as %g", v->name, key, x, (double)got);
}

START_TEST(test_every_numeric_range) {
    int checked = 0;
    for (int i = 0; i < attn_count(); i++) {
        const AttnVariant* v = attn_get(i);
        for (int k = 0; k < v->n_hparams; k++) {
            const AttnHParamSpec* s = &v->hparams[k];
            if (s->choices) continue;
            ck_assert_msg(s->min <= s->def && s->def <= s->max,
                          "%s: attn.%s default %g outside "
                          "[%g, %g]",
                          v->name, s->name, (double)s->def, (double)s->min, (double)s->max);
            double lo = s->min, hi = s->max, w = hi - lo;
            expect_accepted(v, s->name, lo);
            expect_accepted(v, s->name, hi);
            expect_rejected(v, s->name, lo - 1e-3 * (w > 0 ? w : 1.0));
            expect_rejected(v, s->name, hi + 1e-3 * (w > 0 ? w : 1.0));
            checked++;
        }
    }
    ck_assert_msg(checked >= 20, "only %d numeric hyperparameters found", checked);
}
END_TEST

// The documented range of entmax's alpha: [1.01, 2] (docs/variants.md). A value between 1.01 and
// 1.0201 is accepted (so a minimum moved up by 1% fails), one below 1.01 is refused.
START_TEST(test_entmax_alpha_documented_range) {
    const AttnVariant* v = attn_lookup("entmax");
    ck_assert_msg(v != NULL, "entmax is not registered");
    expect_accepted(v, "alpha", 1.01);
    expect_accepted(v, "alpha", 1.015);
    expect_accepted(v, "alpha", 1.5);
    expect_accepted(v, "alpha", 2.0);
    expect_rejected(v, "alpha", 1.0099);
    expect_rejected(v, "alpha", 1.0);
    expect_rejected(v, "alpha", 2.0001);
    char err[256];
    ck_assert(try_set(v, "alpha", 1.5, err, sizeof(err), NULL) == 0);
    AttnHParams hp;
    attn_hparams_default(&hp, v, 64, 2, 8, 16, 2);
    ck_assert_msg(attn_hparams_set(&hp, v, "alpha", "1.5x", err, sizeof(err)) != 0 &&
                      strstr(err, "'attn.alpha'") && strstr(err, "not a number"),
                  "'1.5x' for attn.alpha: %s", err);
    ck_assert_msg(attn_hparams_set(&hp, v, "alhpa", "1.5", err, sizeof(err)) != 0 &&
                      strstr(err, "attn.alhpa"),
                  "unknown key attn.alhpa: %s", err);
}
END_TEST

// The variant table of docs/variants.md (the generated block of `./train --list-attention`,
// reviewed with each change of a variant) against the registry: every variant has one row, and
// every hyperparameter of it appears there as "`KEY` = DEFAULT [MIN, MAX]" (numbers, printed
// with %g: compared to 1e-5 relative) or "`KEY` = WORD (CHOICES)" (the default's word).
// the choice word number idx of "a|b|c"
static int doc_close(double doc, float reg) {
    return fabs(doc - (double)reg) <= 1e-5 * fmax(fabs((double)reg), 1e-30);
}

START_TEST(test_documented_hyperparameters) {
    FILE* f = fopen("docs/variants.md", "r");
    if (!f) ck_abort_msg("docs/variants.md not found (the suites run from the repository root)");
    char* rows[512];
    int nrows = 0, in_block = 0;
    char line[8192];
    while (fgets(line, sizeof(line), f)) {
        if (strstr(line, "<!-- BEGIN GENERATED: ./train --list-attention"))
            in_block = 1;
        else if (in_block && strstr(line, "<!-- END GENERATED"))
            in_block = 0;
        else if (in_block && strncmp(line, "| `", 3) == 0 && nrows < 512)
            rows[nrows++] = strdup(line);
    }
    fclose(f);
    ck_assert_msg(nrows >= attn_count(), "%d table rows for %d variants", nrows, attn_count());
    int checked = 0;
    for (int i = 0; i < attn_count(); i++) {
        const AttnVariant* v = attn_get(i);
        char head[96];
        snprintf(head, sizeof(head), "| `%s` |", v->name);
        const char* row = NULL;
        for (int r = 0; r < nrows; r++)
            if (strncmp(rows[r], head, strlen(head)) == 0) {
                ck_assert_msg(row == NULL, "%s: two rows in docs/variants.md", v->name);
                row = rows[r];
            }
        ck_assert_msg(row != NULL, "%s: no row in the variant table of docs/variants.md", v->name);
        for (int k = 0; k < v->n_hparams; k++) {
            const AttnHParamSpec* sp = &v->hparams[k];
            char key[80];
            snprintf(key, sizeof(key), "`%s` = ", sp->name);
            const char* at = strstr(row, key);
            ck_assert_msg(at != NULL, "%s: attn.%s is not documented", v->name, sp->name);
            at += strlen(key);
            if (sp->choices) {
                char want[64], got[64];
                test_nth_choice(want, sizeof(want), sp->choices, (int)sp->def);
                ck_assert(sscanf(at, "%63s", got) == 1);
                ck_assert_msg(strcmp(got, want) == 0, "%s: attn.%s default '%s', documented '%s'",
                              v->name, sp->name, want, got);
            } else {
                double d, lo, hi;
                ck_assert_msg(sscanf(at, "%lf [%lf, %lf]", &d, &lo, &hi) == 3,
                              "%s: attn.%s: no 'default [min, max]' in the table: %.60s", v->name,
                              sp->name, at);
                ck_assert_msg(
                    doc_close(d, sp->def) && doc_close(lo, sp->min) && doc_close(hi, sp->max),
                    "%s: attn.%s = %g [%g, %g] in the registry, %g [%g, %g] documented", v->name,
                    sp->name, (double)sp->def, (double)sp->min, (double)sp->max, d, lo, hi);
            }
            checked++;
        }
    }
    for (int r = 0; r < nrows; r++)
        free(rows[r]);
    ck_assert_msg(checked >= 30, "only %d hyperparameters checked", checked);
}
END_TEST

static Suite* attention_bounds_suite(void) {
    Suite* s = suite_create("attention_bounds");
    TCase* tc = tcase_create("bounds");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_row_map_bounds, 0, attn_count());
    tcase_add_loop_test(tc, test_layer_bounds, 0, attn_count());
    tcase_add_test(tc, test_every_numeric_range);
    tcase_add_test(tc, test_entmax_alpha_documented_range);
    tcase_add_test(tc, test_documented_hyperparameters);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(attention_bounds_suite)
