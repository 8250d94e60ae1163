// tests/test_attention_draws.c: the random draws of the stochastic row maps, in the float build
// (the double build computes u = (m + 1/2) 2^-k exactly and cannot see a float rounding).
//   - rowops_uniform_open: every one of its 2^23 values lies strictly inside (0, 1) in float32,
//     increasing, with a finite Gumbel -ln(-ln u) at both ends;
//   - every row map of the registry, under every combination of its choice hyperparameters, is
//     probed at training steps: one whose rows change with the run seed is stochastic. For each
//     such (variant, setting), every draw is pinned to its lowest and to its highest value
//     (AttnRowCtx.draw_pin, rowops_draw): forward, surrogate and backward rows must be finite, and
//     the pinned rows must no longer depend on the seed or the step (so every draw of the variant
//     goes through rowops_draw and was pinned). gumbel, quantized and window must be among them;
//   - window: the lowest draw gives attn.window_min, the highest attn.window_max;
//   - layer-level variants under every combination of their choices: the only one whose output
//     depends on the run seed is linear's performer (Gaussian features from common/rng.c, which
//     rowops_draw does not cover); it stays finite over 16 seeds.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention/rowops.h"
#include "common/rng.h"
#include "tests/attn_harness.h"
#include "tests/testutil.h"

#define NMAX   200 // longest row probed
#define T_CALL 256

static int is_finite_row(const real* x, int n) {
    for (int j = 0; j < n; j++)
        if (!isfinite(x[j])) return 0;
    return 1;
}

START_TEST(test_uniform_open_range) {
    const uint32_t M = 1u << ROWOPS_UNIFORM_BITS;
    float prev = 0.0f;
    for (uint32_t m = 0; m < M; m++) {
        const float u = rowops_uniform_open(m);
        if (!(u > prev && u < 1.0f)) ck_abort_msg("m = %u: u = %.9g (previous %.9g)", m, u, prev);
        prev = u;
    }
    const float lo = rowops_uniform_open(0), hi = rowops_uniform_open(M - 1);
    ck_assert_float_eq(lo, 0x1.0p-24f);
    ck_assert_float_eq(hi, 1.0f - 0x1.0p-24f);
    // the bits of a draw: all zeros and all ones are the two ends
    ck_assert_float_eq(rowops_uniform_open_bits(0), lo);
    ck_assert_float_eq(rowops_uniform_open_bits(UINT64_MAX), hi);
    const float g_lo = -logf(-logf(lo)), g_hi = -logf(-logf(hi));
    ck_assert_msg(isfinite(g_lo) && isfinite(g_hi), "Gumbel ends %g %g", g_lo, g_hi);
    // -ln(-ln u) in double: -ln(ln 2^24) = -2.81, -ln(2^-24 + ...) = 16.64
    ck_assert_double_eq_tol(g_lo, -log(-log(0x1.0p-24)), 1e-5);
    ck_assert_double_eq_tol(g_hi, -log(-log1p(-0x1.0p-24)), 1e-4);
}
END_TEST

typedef struct {
    const AttnVariant* v;
    AttnHParams hp;
    real s[NMAX], da[NMAX], ksq[NMAX];
    real* p;  // params_per_head
    real* dp; // their gradient slot
    real* scratch;
} Probe;

static void probe_init(Probe* pr, const AttnVariant* v, const AttnHParams* hp) {
    memset(pr, 0, sizeof(*pr));
    pr->v = v;
    pr->hp = *hp;
    Rng r;
    rng_seed(&r, 77);
    for (int j = 0; j < NMAX; j++) {
        pr->s[j] = 2.0f * rng_normal(&r);
        pr->da[j] = rng_normal(&r);
        pr->ksq[j] = 0.5f + rng_uniform(&r);
    }
    int np = v->params_per_head;
    pr->p = calloc((size_t)np + 1, sizeof(real));
    pr->dp = calloc((size_t)np + 1, sizeof(real));
    if (np && v->init_params) v->init_params(pr->p, &pr->hp);
    size_t ns = v->scratch_floats ? v->scratch_floats(T_CALL) : 0;
    pr->scratch = calloc(ns + 1, sizeof(real));
    ck_assert(pr->p && pr->dp && pr->scratch);
}

static void probe_free(Probe* pr) {
    free(pr->p);
    free(pr->dp);
    free(pr->scratch);
}

static AttnRowCtx probe_ctx(Probe* pr, int n, long step, uint64_t seed, int pin) {
    return (AttnRowCtx){.hp = &pr->hp,
                        .p = pr->v->params_per_head ? pr->p : NULL,
                        .scratch = pr->scratch,
                        .key_sq = pr->v->needs_key_sq ? pr->ksq : NULL,
                        .t = n - 1,
                        .T = T_CALL,
                        .h = 1,
                        .step = step,
                        .seed = seed,
                        .layer = 1,
                        .draw_pin = pin};
}

static const int NS[] = {1, 2, 7, 40, NMAX};
#define NNS ((int)(sizeof(NS) / sizeof(NS[0])))

// Forward rows of every probed length, concatenated into out (sum of NS floats).
static void probe_rows(Probe* pr, real* out, long step, uint64_t seed, int pin) {
    for (int k = 0; k < NNS; k++) {
        AttnRowCtx c = probe_ctx(pr, NS[k], step, seed, pin);
        pr->v->forward_row(out, pr->s, NS[k], &c);
        out += NS[k];
    }
}

// Index of `word` among the choices of v's hyperparameter `key` (-1 if absent).
static int choice_index(const AttnVariant* v, const char* key, const char* word) {
    AttnHParams hp;
    char err[256];
    const int k = attn_hparam_index(v, key);
    if (k < 0) return -1;
    attn_hparams_default(&hp, v, 8, 2, 8, 16, 2);
    if (attn_hparams_set(&hp, v, key, word, err, sizeof(err))) return -1;
    return (int)hp.v[k];
}

static int rows_differ(const real* a, const real* b, int n) {
    return memcmp(a, b, sizeof(real) * (size_t)n) != 0;
}

// Number of words of a "a|b|c" choices string.
static int n_choices(const char* c) {
    int k = 1;
    for (; *c; c++)
        k += *c == '|';
    return k;
}

// Probe one (variant, setting): returns 1 when it is stochastic, after checking its pinned draws.
static int probe_setting(const AttnVariant* v, const AttnHParams* hp, const char* label) {
    int tot = 0;
    for (int k = 0; k < NNS; k++)
        tot += NS[k];
    real* a = malloc(sizeof(real) * (size_t)tot);
    real* b = malloc(sizeof(real) * (size_t)tot);
    ck_assert(a && b);
    Probe pr;
    probe_init(&pr, v, hp);
    int stochastic = 0;
    for (long step = 0; step < 3 && !stochastic; step++) {
        probe_rows(&pr, a, step, 11, 0);
        probe_rows(&pr, b, step, 12, 0);
        stochastic = rows_differ(a, b, tot);
    }
    if (stochastic) {
        for (int pin = -1; pin <= 1; pin += 2) {
            probe_rows(&pr, a, 0, 11, pin);
            ck_assert_msg(is_finite_row(a, tot), "%s, every draw at its %s: non-finite weights",
                          label, pin < 0 ? "lowest" : "highest");
            probe_rows(&pr, b, 5, 12, pin);
            ck_assert_msg(!rows_differ(a, b, tot),
                          "%s: with every rowops_draw pinned the rows still depend on the seed: "
                          "the variant draws random numbers elsewhere",
                          label);
            for (int k = 0; k < NNS; k++) {
                const int n = NS[k];
                AttnRowCtx c = probe_ctx(&pr, n, 0, 11, pin);
                real w[NMAX], ds[NMAX];
                if (v->surrogate_row) {
                    v->surrogate_row(w, pr.s, n, &c);
                    ck_assert_msg(is_finite_row(w, n), "%s n=%d pin %d: non-finite surrogate",
                                  label, n, pin);
                }
                v->forward_row(w, pr.s, n, &c);
                memset(ds, 0, sizeof(ds));
                memset(pr.dp, 0, sizeof(real) * (size_t)(v->params_per_head + 1));
                c.dp = v->params_per_head ? pr.dp : NULL;
                v->backward_row(ds, pr.da, pr.s, w, n, &c);
                ck_assert_msg(is_finite_row(ds, n), "%s n=%d pin %d: non-finite score gradient",
                              label, n, pin);
                ck_assert_msg(is_finite_row(pr.dp, v->params_per_head),
                              "%s n=%d pin %d: non-finite parameter gradient", label, n, pin);
            }
        }
    }
    probe_free(&pr);
    free(a);
    free(b);
    return stochastic;
}

START_TEST(test_stochastic_variants_extreme_draws_finite) {
    int found_gumbel = 0, found_quantized = 0, found_window = 0, n_stoch = 0;
    for (int i = 0; i < attn_count(); i++) {
        const AttnVariant* v = attn_get(i);
        if (!v->forward_row) continue; // layer-level: its row map is probed as a variant
        AttnHParams hp;
        attn_hparams_default(&hp, v, T_CALL, 4, 16, 64, 2);
        // every combination of the choice hyperparameters (mixed radix over their indices)
        int idx[ATTN_MAX_HP], nc[ATTN_MAX_HP], nh = 0;
        long combos = 1;
        for (int k = 0; k < v->n_hparams; k++)
            if (v->hparams[k].choices) {
                idx[nh] = k;
                nc[nh] = n_choices(v->hparams[k].choices);
                combos *= nc[nh];
                nh++;
            }
        ck_assert_msg(combos <= 4096, "%s: %ld settings", v->name, combos);
        for (long cmb = 0; cmb < combos; cmb++) {
            char label[512];
            int len = snprintf(label, sizeof(label), "%s", v->name);
            long rest = cmb;
            for (int q = 0; q < nh; q++) {
                const int ci = (int)(rest % nc[q]);
                rest /= nc[q];
                hp.v[idx[q]] = (float)ci;
                if (len < (int)sizeof(label))
                    len += snprintf(label + len, sizeof(label) - (size_t)len, " %s=%d",
                                    v->hparams[idx[q]].name, ci);
            }
            if (probe_setting(v, &hp, label)) {
                n_stoch++;
                found_gumbel |= strcmp(v->name, "gumbel") == 0;
                found_quantized |= strcmp(v->name, "quantized") == 0;
                found_window |= strcmp(v->name, "window") == 0;
            }
        }
    }
    printf("stochastic (variant, setting) pairs probed at their extreme draws: %d\n", n_stoch);
    ck_assert_msg(found_gumbel && found_quantized && found_window,
                  "the probe did not detect gumbel (%d), quantized (%d), window (%d) as stochastic",
                  found_gumbel, found_quantized, found_window);
}
END_TEST

// gumbel at its highest draw (the m that made u = 1 in float32): finite, rows sum to 1, in hard
// and soft mode, at several temperatures.
START_TEST(test_gumbel_highest_draw) {
    const AttnVariant* v = attn_lookup("gumbel");
    ck_assert_ptr_nonnull(v);
    const char* taus[] = {"0.01", "1", "1000"};
    for (int hard = 0; hard <= 1; hard++)
        for (int k = 0; k < 3; k++) {
            AttnHParams hp;
            char err[256];
            attn_hparams_default(&hp, v, T_CALL, 4, 16, 64, 2);
            ck_assert(attn_hparams_set(&hp, v, "tau", taus[k], err, sizeof(err)) == 0);
            ck_assert(attn_hparams_set(&hp, v, "hard", hard ? "on" : "off", err, sizeof(err)) == 0);
            Probe pr;
            probe_init(&pr, v, &hp);
            for (int pin = -1; pin <= 1; pin += 2) {
                AttnRowCtx c = probe_ctx(&pr, NMAX, 3, 5, pin);
                real a[NMAX];
                v->forward_row(a, pr.s, NMAX, &c);
                double sum = 0;
                for (int j = 0; j < NMAX; j++)
                    sum += a[j];
                ck_assert_msg(is_finite_row(a, NMAX) && fabs(sum - 1.0) < 1e-5,
                              "gumbel hard=%d tau=%s pin %d: sum %g", hard, taus[k], pin, sum);
            }
            probe_free(&pr);
        }
}
END_TEST

// window, stochastic mode: the lowest draw is window_min wide, the highest window_max.
START_TEST(test_window_extreme_widths) {
    const AttnVariant* v = attn_lookup("window");
    ck_assert_ptr_nonnull(v);
    AttnHParams hp;
    char err[256];
    attn_hparams_default(&hp, v, T_CALL, 4, 16, 64, 2);
    ck_assert(attn_hparams_set(&hp, v, "window_mode", "stochastic", err, sizeof(err)) == 0);
    ck_assert(attn_hparams_set(&hp, v, "window_min", "5", err, sizeof(err)) == 0);
    ck_assert(attn_hparams_set(&hp, v, "window_max", "150", err, sizeof(err)) == 0);
    Probe pr;
    probe_init(&pr, v, &hp);
    for (int pin = -1; pin <= 1; pin += 2) {
        AttnRowCtx c = probe_ctx(&pr, NMAX, 0, 9, pin);
        real a[NMAX];
        v->forward_row(a, pr.s, NMAX, &c);
        int nz = 0;
        for (int j = 0; j < NMAX; j++)
            nz += a[j] != 0.0f;
        ck_assert_int_eq(nz, pin < 0 ? 5 : 150);
    }
    probe_free(&pr);
}
END_TEST

// Layer-level variants draw nothing through rowops_draw (a row map's ctx is built by the driver,
// with draw_pin = 0). Under every combination of their choice hyperparameters, those whose output
// changes with the run seed are found, and each must be one whose draws are known and checked
// here: linear with feature = performer (orthogonal Gaussian features drawn in double by
// common/rng.c's rng_normal, whose u1 is clamped at 1e-300, so |z| <= 37.2; a new stochastic
// layer-level variant fails until its draws are classified). For those, forward and backward
// stay finite over 16 seeds.
START_TEST(test_layer_variants_seed_dependence) {
    int n_stoch = 0;
    for (int i = 0; i < attn_count(); i++) {
        const AttnVariant* v = attn_get(i);
        if (!v->layer_forward) continue;
        AttnHParams hp;
        attn_hparams_default(&hp, v, 8, 2, 8, 16, 2);
        int idx[ATTN_MAX_HP], nc[ATTN_MAX_HP], nh = 0;
        long combos = 1;
        for (int k = 0; k < v->n_hparams; k++)
            if (v->hparams[k].choices) {
                idx[nh] = k;
                nc[nh] = n_choices(v->hparams[k].choices);
                combos *= nc[nh];
                nh++;
            }
        ck_assert_msg(combos <= 256, "%s: %ld settings", v->name, combos);
        for (long cmb = 0; cmb < combos; cmb++) {
            long rest = cmb;
            char label[512];
            int len = snprintf(label, sizeof(label), "%s", v->name);
            for (int q = 0; q < nh; q++) {
                const int ci = (int)(rest % nc[q]);
                rest /= nc[q];
                hp.v[idx[q]] = (float)ci;
                if (len < (int)sizeof(label))
                    len += snprintf(label + len, sizeof(label) - (size_t)len, " %s=%d",
                                    v->hparams[idx[q]].name, ci);
            }
            AttnHarness h;
            harness_setup(&h, v, &hp, ATTN_POS_LEARNED, 2, 8, 16, 2, 1, 0, 5);
            const size_t BTC = (size_t)h.d.B * h.d.T * h.d.C;
            real* out0 = malloc(sizeof(real) * BTC);
            ck_assert_ptr_nonnull(out0);
            h.L.step = 0;
            h.L.seed = 11;
            attention_forward(&h.L);
            memcpy(out0, h.out, sizeof(real) * BTC);
            h.L.seed = 12;
            attention_forward(&h.L);
            const int stochastic = memcmp(out0, h.out, sizeof(real) * BTC) != 0;
            if (stochastic) {
                n_stoch++;
                const int feature = attn_hparam_index(v, "feature");
                ck_assert_msg(
                    strcmp(v->name, "linear") == 0 && feature >= 0 && strstr(label, "feature=") &&
                        (int)hp.v[feature] == choice_index(v, "feature", "performer"),
                    "%s depends on the run seed: its draws are not classified here", label);
                for (uint64_t sd = 0; sd < 16; sd++) {
                    h.L.seed = sd * 0x9e3779b97f4a7c15ull;
                    h.L.step = (long)sd;
                    harness_pass(&h);
                    ck_assert_msg(is_finite_row(h.out, (int)BTC) &&
                                      is_finite_row(h.dqkv, (int)(3 * BTC)) &&
                                      is_finite_row(h.dx, (int)BTC),
                                  "%s seed %llu: non-finite output or gradient", label,
                                  (unsigned long long)sd);
                }
            }
            free(out0);
            harness_free(&h);
        }
    }
    printf("seed-dependent layer-level settings: %d\n", n_stoch);
    ck_assert_int_gt(n_stoch, 0); // linear's performer features are found
}
END_TEST

static Suite* attention_draws_suite(void) {
    Suite* s = suite_create("attention_draws");
    TCase* tc = tcase_create("draws");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_uniform_open_range);
    tcase_add_test(tc, test_stochastic_variants_extreme_draws_finite);
    tcase_add_test(tc, test_gumbel_highest_draw);
    tcase_add_test(tc, test_window_extreme_widths);
    tcase_add_test(tc, test_layer_variants_seed_dependence);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(attention_draws_suite)
