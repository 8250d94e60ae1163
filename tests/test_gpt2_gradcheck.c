// tests/test_gpt2_gradcheck.c: model-level finite-difference gradient checks (gradcheck_model.h)
// of every parameter tensor the model declares, for every registered attention variant:
//   - each variant at its defaults, and at every other value of each of its choice
//     hyperparameters (one at a time), so parameters a choice switches on are checked too;
//   - layer-level variants also around an inner row map with per-head parameters (ssmax);
//   - mixed per-layer variants whose row maps have different parameter counts (the attnp
//     stride plumbing), and a wrapper in one layer only;
//   - each position encoding (learned, rope, alibi, none, xpos, fire) once, on a mixed model
//     (under fire its per-layer "fire" tensor is checked with the others).
//   - the residual-path options (residual = attnres | delta_attnres, value_residual = 1), alone,
//     together and on a mixed model: resid.query and value_residual.lambda in every layer.
//   - attention-only blocks (mlp = 0).
// Tensors the math leaves unused under a choice are listed below with the reason; any other
// tensor with no gradient signal fails the check.
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "attention/attention.h"
#include "common/util.h"
#include "tests/gradcheck_model.h"
#include "tests/testutil.h"

// Layer-level variants also run around this inner row map, with all its parameters learned.
#define INNER_P "attn.inner=ssmax attn.bias=learn"

// Per-head parameters the math leaves unused: the model must give them exactly 0 gradient
// and the loss must not move with them (mgc_check asserts both); any parameter not listed
// here must carry a gradient signal. `only`: the run whose keys are exactly these (NULL: any
// run); `unless`: not in the run with these keys.
typedef struct {
    const char* variant;
    const char* only;
    const char* unless;
    int param; // attnp parameter index, -1 = all
    const char* why;
} Unused;

static const Unused UNUSED[] = {
    {"entmax", NULL, "attn.learn_alpha=on", 0,
     "alpha is fixed at attn.alpha unless learn_alpha=on"},
    {"hccs", "attn.learn=off", NULL, -1, "learn=off: alpha, beta fixed at attn.alpha0, beta0"},
    {"swat", NULL, "attn.bias=learn", 0, "the per-head bias is learned only with bias=learn"},
    {"normalized", "attn.gain=off", NULL, 0, "gain=off: the gain is fixed at 1"},
    {"normalized", "attn.bias=off", NULL, 1, "bias=off: the bias is fixed at 0"},
    {"relu_ln", "attn.affine=none", NULL, -1, "affine=none: no gain and bias"},
    {"ssmax", NULL, "attn.bias=learn", 1, "lambda = theta ln n + b has b only with bias=learn"},
    {"logn", NULL, "attn.learn=on", 0, "beta_scale is learned only with learn=on"},
    {"softmax1", NULL, "attn.sink=learn", 0, "the sink logit is learned only with sink=learn"},
    {"sigmoid", NULL, "attn.bias_mode=learn", 0, "the bias is learned only with bias_mode=learn"},
    {"asentmax", INNER_P, NULL, -1, "as_map=entmax (default) does not use the inner map"},
    {"rela", INNER_P, NULL, -1, "rela_map=relu (default) does not use the inner map"},
};

#define N_UNUSED ((int)(sizeof(UNUSED) / sizeof(UNUSED[0])))

static void set_keys(Config* c, const char* kvs) {
    char buf[256], err[512];
    util_strlcpy(buf, kvs, sizeof(buf));
    char* save = NULL;
    for (char* kv = strtok_r(buf, " ", &save); kv; kv = strtok_r(NULL, " ", &save))
        ck_assert_msg(config_apply_arg(c, kv, err, sizeof(err)) == 0, "%s: %s", kv, err);
}

// The unused list of run (variant name, keys) for mgc_check.
static int unused_for(MgcUnused* out, const char* variant, const char* kvs) {
    int n = 0;
    for (int i = 0; i < N_UNUSED; i++) {
        const Unused* u = &UNUSED[i];
        if (strcmp(u->variant, variant) != 0) continue;
        if (u->only && (!kvs || strcmp(u->only, kvs) != 0)) continue;
        if (u->unless && kvs && strcmp(u->unless, kvs) == 0) continue;
        out[n++] = (MgcUnused){"attnp", u->param, -1, u->why};
    }
    const AttnVariant* v = attn_lookup(variant);
    if (v && v->ignores_inner && kvs && strcmp(kvs, INNER_P) == 0) // declared by the variant
        out[n++] = (MgcUnused){"attnp", -1, -1, "the variant declares that it ignores attn.inner"};
    return n;
}

// i-th word of "a|b|c" into out; 0 if there is none
static int choice_word(const char* choices, int i, char* out, size_t cap) {
    const char* p = choices;
    for (int k = 0; k < i; k++) {
        p = strchr(p, '|');
        if (!p) return 0;
        p++;
    }
    size_t n = strcspn(p, "|");
    if (n + 1 > cap) n = cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 1;
}

static MgcReport run_spec(const char* attention, const char* kvs, const char* pos,
                          const MgcUnused* un, int nun) {
    Config c;
    mgc_tiny_config(&c);
    util_strlcpy(c.attention, attention, sizeof(c.attention));
    if (pos) util_strlcpy(c.pos_encoding, pos, sizeof(c.pos_encoding));
    char label[320];
    snprintf(label, sizeof(label), "%s%s%s%s%s", attention, kvs ? " " : "", kvs ? kvs : "",
             pos ? " pos_encoding=" : "", pos ? pos : "");
    if (kvs) set_keys(&c, kvs);
    MgcReport r = mgc_check(&c, label, un, nun, 17);
    // every GPT-2 tensor slice at least: 12 stacked x 2 layers + wte, lnfw, lnfb (+ wpe)
    ck_assert_int_ge(r.slices_checked, 27 + (!pos || strcmp(pos, "learned") == 0));
    return r;
}

// Keys added to every run of a variant so that the 2-layer model uses all its tensors: mta's
// key-query convolutions start at layer 2 by default (its layers without them, where the
// kernels get exactly 0 gradient, are checked in tests/test_attn64_mta.c).
static const char* base_keys(const char* variant) {
    if (strcmp(variant, "mta") == 0) return "attn.conv_every=1 attn.conv_first=0";
    return NULL;
}

static void run_variant(const AttnVariant* v, const char* kvs) {
    MgcUnused un[ATTN_MAX_PPH];
    int nun = unused_for(un, v->name, kvs);
    char all[320];
    const char* base = base_keys(v->name);
    if (base) snprintf(all, sizeof(all), "%s%s%s", base, kvs ? " " : "", kvs ? kvs : "");
    MgcReport r = run_spec(v->name, base ? all : kvs, NULL, un, nun);
    // exactly the listed parameters went unused, in both layers: every other per-head
    // parameter and every layer tensor was checked
    int P = v->params_per_head;
    if (v->layer_forward)
        P = kvs && strcmp(kvs, INNER_P) == 0 ? attn_lookup("ssmax")->params_per_head : 0;
    int expect = 0;
    for (int i = 0; i < nun; i++)
        expect += 2 * (un[i].param < 0 ? P : 1);
    ck_assert_msg(r.unused == expect, "%s %s: %d unused parameter slices, %d listed", v->name,
                  kvs ? kvs : "", r.unused, expect);
}

START_TEST(test_every_variant_model_gradcheck) {
    omp_set_num_threads(1); // tiny models: threads only add synchronisation on a shared CPU
    const AttnVariant* v = attn_get(_i);
    if (!test_variant_selected(v->name)) return; // ATTNLAB_TEST_VARIANTS (scripts/mutate)
    run_variant(v, NULL);
    for (int h = 0; h < v->n_hparams; h++) {
        const AttnHParamSpec* hs = &v->hparams[h];
        if (!hs->choices) continue;
        char word[64], kv[160];
        for (int w = 0; choice_word(hs->choices, w, word, sizeof(word)); w++) {
            if (w == (int)hs->def) continue;
            snprintf(kv, sizeof(kv), "attn.%s=%s", hs->name, word);
            run_variant(v, kv);
        }
    }
    if (v->layer_forward) run_variant(v, INNER_P);
}
END_TEST

START_TEST(test_mixed_layers_stride_gradcheck) {
    // Row maps with 2 and 8 per-head parameters share attnp (L, NH, 8): the 2-parameter layer
    // reads its heads 8 floats apart and must leave its parameters 2..7 at exactly 0 gradient.
    // Zero checks counted by mgc_check: wte's padded rows (1) + one per never-read attnp
    // parameter of a layer + one per layer tensor slice in a layer that does not use it.
    // (t_init = 1, r_init = -0.3: hinges that move the scores strongly and thresholds inside
    // the score range, so each r carries signal)
    omp_set_num_threads(1);
    const char* mm = "attn.bias=learn attn.t_init=1 attn.r_init=-0.3";
    MgcReport r = run_spec("0:ssmax,1:multimax", mm, NULL, NULL, 0);
    ck_assert_int_eq(r.unused, 0);
    ck_assert_int_eq(r.zero_checks, 1 + 6);
    r = run_spec("0:multimax,1:ssmax", mm, NULL, NULL, 0);
    ck_assert_int_eq(r.unused, 0);
    ck_assert_int_eq(r.zero_checks, 1 + 6);
    // a wrapper in layer 1 only, around a row map with parameters (hccs, 2): layer 0 (softmax)
    // reads neither attnp parameter nor gated.w, gated.b
    r = run_spec("0:softmax,1:gated", "attn.inner=hccs", NULL, NULL, 0);
    ck_assert_int_eq(r.unused, 0);
    ck_assert_int_eq(r.zero_checks, 1 + 2 + 2);
    // two wrappers around a parameterised inner map (rela: gate, gain; asentmax: beta_w, beta_b,
    // gamma_w, gamma_b, each unread in the other layer)
    r = run_spec("0:rela,1:asentmax", "attn.rela_map=inner attn.as_map=inner " INNER_P, NULL, NULL,
                 0);
    ck_assert_int_eq(r.unused, 0);
    ck_assert_int_eq(r.zero_checks, 1 + 2 + 4);
    // two tensor-owning variants: affine (alpha_w, alpha_b, beta_w, beta_b) and ssa with its
    // value tensor (beta, val_w)
    r = run_spec("0:affine,1:ssa", "attn.ssa_value=on", NULL, NULL, 0);
    ck_assert_int_eq(r.unused, 0);
    ck_assert_int_eq(r.zero_checks, 1 + 4 + 2);
    // the earlier forms: rela's dense input gate (gate_w, gain), asentmax's recipe (w,
    // log_gamma), ssa's token temperature (tau_w, tau_pos, val_w)
    r = run_spec("0:rela,1:asentmax",
                 "attn.rela_gate=input attn.rela_norm=head attn.as_scale=recipe", NULL, NULL, 0);
    ck_assert_int_eq(r.unused, 0);
    ck_assert_int_eq(r.zero_checks, 1 + 2 + 2);
    r = run_spec("0:affine,1:ssa", "attn.ssa_value=on attn.ssa_temp=token", NULL, NULL, 0);
    ck_assert_int_eq(r.unused, 0);
    ck_assert_int_eq(r.zero_checks, 1 + 4 + 3);
}
END_TEST

START_TEST(test_posenc_gradcheck) {
    // each position encoding once, on a row map with parameters and a layer-level variant
    omp_set_num_threads(1);
    static const char* const POS[] = {"learned", "rope", "alibi", "none", "xpos", "fire"};
    int p = _i;
    MgcReport r = run_spec("0:ssmax,1:gated", "attn.bias=learn", POS[p], NULL, 0);
    ck_assert_int_eq(r.unused, 0);
    // wte's padded rows, attnp of layer 1 (2 params), gated.w/b of layer 0, and wpe when
    // positions are not learned
    ck_assert_int_eq(r.zero_checks, 1 + 2 + 2 + (p != 0));
}
END_TEST

// The residual-path model keys. Under attnres the routing weights of every sublayer depend on
// resid.query, so all of it carries signal; value_residual.lambda's layer-0 row is never read
// (layer 0's values are V_1 itself) and is the one listed unused slice.
static const struct {
    const char* attention;
    const char* keys;
    int routed, vres;
} RESID_RUNS[] = {
    {"softmax", "residual=attnres", 1, 0},
    {"softmax", "residual=delta_attnres", 1, 0},
    {"softmax", "value_residual=1", 0, 1},
    {"0:ssmax,1:gated", "residual=attnres value_residual=1 attn.bias=learn", 1, 1},
    {"0:gated,1:ssmax", "residual=delta_attnres value_residual=1 attn.bias=learn", 1, 1},
};

START_TEST(test_residual_gradcheck) {
    omp_set_num_threads(1);
    const MgcUnused un[] = {
        {"value_residual.lambda", -1, 0, "layer 0 is not mixed: its values are V_1 itself"}};
    const int vres = RESID_RUNS[_i].vres;
    MgcReport r = run_spec(RESID_RUNS[_i].attention, RESID_RUNS[_i].keys, NULL, un, vres);
    ck_assert_int_eq(r.unused, vres); // exactly the layer-0 lambda row, when present
    // the GPT-2 slices (27 + wpe), resid.query (one slice) and lambda's layer-1 row
    int extra = RESID_RUNS[_i].routed + vres;
    ck_assert_int_ge(r.slices_checked, 28 + extra);
}
END_TEST

START_TEST(test_attention_only_gradcheck) {
    // mlp = 0: ln_2 and the MLP tensors have no entries; every other tensor is checked, with a
    // row map with per-head parameters in layer 0 and a layer-level variant in layer 1
    omp_set_num_threads(1);
    Config c;
    mgc_tiny_config(&c);
    util_strlcpy(c.attention, "0:ssmax,1:gated", sizeof(c.attention));
    set_keys(&c, "mlp=0 attn.bias=learn");
    MgcReport r = mgc_check(&c, "mlp=0 0:ssmax,1:gated", NULL, 0, 17);
    ck_assert_int_eq(r.unused, 0);
    // ln1w, ln1b, qkvw, qkvb, attprojw, attprojb x 2 layers + wte, wpe, lnfw, lnfb + attnp
    // (layer 0) + gated.w, gated.b (layer 1)
    ck_assert_int_ge(r.slices_checked, 12 + 4 + 1 + 2);
    // wte's padded rows, attnp of layer 1, gated.* of layer 0
    ck_assert_int_eq(r.zero_checks, 1 + 2 + 2);
}
END_TEST

static Suite* gradcheck_suite(void) {
    Suite* s = suite_create("gpt2_gradcheck");
    TCase* tc = tcase_create("variants");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_every_variant_model_gradcheck, 0, attn_count());
    suite_add_tcase(s, tc);
    TCase* tm = tcase_create("plumbing");
    tcase_set_timeout(tm, 120);
    tcase_add_test(tm, test_mixed_layers_stride_gradcheck);
    tcase_add_loop_test(tm, test_posenc_gradcheck, 0, 6);
    tcase_add_test(tm, test_attention_only_gradcheck);
    suite_add_tcase(s, tm);
    TCase* tr = tcase_create("residual");
    tcase_set_timeout(tr, 120);
    tcase_add_loop_test(tr, test_residual_gradcheck, 0,
                        (int)(sizeof(RESID_RUNS) / sizeof(RESID_RUNS[0])));
    suite_add_tcase(s, tr);
    return s;
}

TEST_MAIN(gradcheck_suite)
