// tests/test_attn64_layer.c: layer gradient checks in double precision through the driver
// (attention_forward / attention_backward of attention/ compiled with -DATTN_REAL_DOUBLE), one
// test per registered variant over all its configurations (tests/attn64_cfg.h), wrappers
// around several inner maps:
//   - B = 2, T = 9, C = 8, NH = 2, batch items drawn independently (so a reduction over the
//     batch that drops an item fails), under pos_encoding = learned and one of rope, alibi,
//     none in turn, and the first configuration once more under fire (when the variant forms
//     logits; attn_pos_supported);
//   - gradients of qkv (q, k, v), the layer input x, the per-head row parameters, every layer
//     tensor and (under fire) the FIRE parameters against 4-point differences at h = 1e-4, 1e-6
//     relative tolerance;
//   - straight-through row maps: the backward against the declared surrogate;
//   - every declared vector (each row parameter and each layer tensor) must be checked with a
//     nonzero gradient under at least one configuration, and qkv always; at most half of a
//     vector's used coordinates may sit at kinks.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "common/util.h"
#include "tests/attn64_cfg.h"
#include "tests/attn_harness.h"
#include "tests/testutil.h"

enum { B_ = 2, T_ = 9, C_ = 8, NH_ = 2 };

typedef struct {
    int rowp[ATTN_MAX_PPH];     // per row parameter index: configurations checking it
    int tens[ATTN_MAX_TENSORS]; // per layer tensor (in layer_tensors order)
    char tname[ATTN_MAX_TENSORS][64];
    int ntens;
    int fire; // FIRE parameter vectors checked with a nonzero gradient
} Usage;

static Attn64Count check_vec(AttnHarness* h, const char* label, real* x, const real* g, size_t n,
                             double gmax, const char* what) {
    const size_t BTC = (size_t)B_ * T_ * C_;
    harness_loss(h);
    double lmag = 0;
    for (size_t i = 0; i < BTC; i++)
        lmag += fabs((double)h->w[i] * (double)h->out[i]);
    Attn64Count c = attn64_check(harness_loss, h, x, g, n, gmax, lmag, label, what);
    ck_assert_msg(c.kinks <= c.checked, "%s: d%s: %d coordinates at kinks vs %d checked", label,
                  what, c.kinks, c.checked);
    return c;
}

static void layer_one(const Attn64Cfg* c, int pos, Usage* u) {
    static const char* const POS[] = {"learned", "rope", "alibi", "none", "xpos", "fire"};
    char label[240];
    snprintf(label, sizeof(label), "%s (layer B=%d T=%d NH=%d, pos_encoding=%s)", c->label, B_, T_,
             NH_, POS[pos]);
    AttnHarness h;
    harness_setup(&h, c->v, &c->hp, pos, B_, T_, C_, NH_, 1, 0,
                  attn64_seed(c->label) + (uint64_t)pos);
    // per-head parameters further from their init than the harness's N(0, 0.02): off kinks
    // and symmetries (e.g. a clip bound at the init)
    const int P = h.row->params_per_head;
    Rng r;
    rng_seed(&r, attn64_seed(label));
    for (int k = 0; k < NH_ * P; k++)
        h.rowp[k] += (real)(0.05 * (double)rng_normal(&r));
    AttnVariant surrogate;
    if (h.row->surrogate_row) {
        surrogate = *h.row;
        surrogate.forward_row = h.row->surrogate_row;
        h.L.row = &surrogate;
        if (!c->v->layer_forward) h.L.v = &surrogate;
    }
    harness_zero_grads(&h);
    attention_forward(&h.L);
    attention_backward(&h.L);
    const size_t BTC = (size_t)B_ * T_ * C_;
    double gmax = fmax(attn64_max_abs(h.dqkv, 3 * BTC), attn64_max_abs(h.dx, BTC));
    if (P) gmax = fmax(gmax, attn64_max_abs(h.drowp, (size_t)NH_ * P));
    if (pos == ATTN_POS_FIRE) gmax = fmax(gmax, attn64_max_abs(h.dposp, h.nposp));
    for (int k = 0; k < h.ntens; k++)
        gmax = fmax(gmax, attn64_max_abs(h.dtp[k], h.tsize[k]));
    Attn64Count cq = check_vec(&h, label, h.qkv, h.dqkv, 3 * BTC, gmax, "qkv");
    ck_assert_msg(cq.checked > 0, "%s: no qkv coordinate checked", label);
    check_vec(&h, label, h.x, h.dx, BTC, gmax, "x");
    for (int k = 0; k < P; k++) { // parameter k of every head (stride P)
        int used = 0;
        for (int hd = 0; hd < NH_; hd++) {
            char what[80];
            snprintf(what, sizeof(what), "%s[head %d]", h.row->param_names[k], hd);
            size_t i = (size_t)hd * P + (size_t)k;
            Attn64Count cp = check_vec(&h, label, &h.rowp[i], &h.drowp[i], 1, gmax, what);
            used += cp.checked > 0 && h.drowp[i] != 0;
        }
        if (used && c->hp.inner == h.row && k < ATTN_MAX_PPH) u->rowp[k]++;
        if (!c->v->layer_forward && used) u->rowp[k]++;
    }
    for (int k = 0; k < h.ntens; k++) {
        Attn64Count ct = check_vec(&h, label, h.tp[k], h.dtp[k], h.tsize[k], gmax, h.specs[k].name);
        if (ct.checked > 0) u->tens[k]++;
        snprintf(u->tname[k], sizeof(u->tname[k]), "%s", h.specs[k].name);
        if (k + 1 > u->ntens) u->ntens = k + 1;
    }
    if (pos == ATTN_POS_FIRE) {
        Attn64Count cf = check_vec(&h, label, h.posp, h.dposp, h.nposp, gmax, "fire");
        // dead ReLU units leave a quarter or more of W1, b1, W2 unused; c, l must be live
        if ((size_t)cf.checked >= h.nposp / 4 && h.dposp[0] != 0 && h.dposp[1] != 0) u->fire++;
    }
    harness_free(&h);
}

START_TEST(test_layer_gradcheck64) {
    const AttnVariant* v = attn_get(_i);
    if (!test_variant_selected(v->name)) return; // ATTNLAB_TEST_VARIANTS (scripts/mutate)
    static Attn64Cfg cfgs[ATTN64_MAX_CFG];
    int nc = attn64_cfgs(cfgs, v, T_, NH_, C_ / NH_);
    Usage u;
    memset(&u, 0, sizeof(u));
    for (int i = 0; i < nc; i++) {
        layer_one(&cfgs[i], ATTN_POS_LEARNED, &u);
        layer_one(&cfgs[i], 1 + i % 3, &u); // rope, alibi, none in turn
    }
    if (attn_pos_supported(v, ATTN_POS_FIRE)) {
        layer_one(&cfgs[0], ATTN_POS_FIRE, &u);
        ck_assert_msg(u.fire == 1,
                      "%s: FIRE parameters (c, l and a quarter of the MLP) not "
                      "checked with a nonzero gradient under fire",
                      v->name);
    }
    if (!v->layer_forward)
        for (int k = 0; k < v->params_per_head; k++)
            ck_assert_msg(u.rowp[k] > 0,
                          "%s: row parameter %s is never checked with a nonzero gradient in "
                          "any of %d layer configurations",
                          v->name, v->param_names[k], nc);
    for (int k = 0; k < u.ntens; k++)
        ck_assert_msg(u.tens[k] > 0,
                      "%s: layer tensor %s is never checked with a nonzero gradient in any of %d "
                      "configurations (unused under every configuration?)",
                      v->name, u.tname[k], nc);
}
END_TEST

START_TEST(test_wrapped_inner_params64) {
    // a wrapper around a row map with per-head parameters passes their gradient through: the
    // inner ssmax's theta gets a nonzero, checked gradient under every wrapper that uses the
    // inner map by default
    const AttnVariant* v = attn_get(_i);
    if (!test_variant_selected(v->name)) return; // ATTNLAB_TEST_VARIANTS (scripts/mutate)
    if (!v->layer_forward) return;
    static Attn64Cfg cfgs[ATTN64_MAX_CFG];
    int nc = attn64_cfgs(cfgs, v, T_, NH_, C_ / NH_);
    const AttnVariant* ssmax = attn_lookup("ssmax");
    int any_inner = 0, used = 0;
    for (int i = 0; i < nc; i++) {
        if (cfgs[i].hp.inner != ssmax) continue;
        // does this configuration use its inner map? (the output moves when it changes)
        AttnHParams other = cfgs[i].hp;
        other.inner = attn_lookup("sparsemax");
        AttnHarness h1, h2;
        harness_setup(&h1, v, &cfgs[i].hp, ATTN_POS_LEARNED, B_, T_, C_, NH_, 1, 0, 5);
        harness_setup(&h2, v, &other, ATTN_POS_LEARNED, B_, T_, C_, NH_, 1, 0, 5);
        attention_forward(&h1.L);
        attention_forward(&h2.L);
        const size_t BTC = (size_t)B_ * T_ * C_;
        int uses_inner = memcmp(h1.out, h2.out, sizeof(real) * BTC) != 0;
        harness_free(&h1);
        harness_free(&h2);
        if (!uses_inner) continue;
        any_inner = 1;
        Usage u;
        memset(&u, 0, sizeof(u));
        layer_one(&cfgs[i], ATTN_POS_LEARNED, &u);
        used += u.rowp[0] > 0;
    }
    ck_assert_msg(!any_inner || used > 0, "%s: the inner map's theta never gets a gradient",
                  v->name);
}
END_TEST

static Suite* attn64_layer_suite(void) {
    Suite* s = suite_create("attn64_layer");
    TCase* tc = tcase_create("layer");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_layer_gradcheck64, 0, attn_count());
    tcase_add_loop_test(tc, test_wrapped_inner_params64, 0, attn_count());
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(attn64_layer_suite)
