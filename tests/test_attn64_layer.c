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
#include "common/npy.h"
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

// ---------------------------------------------------------------------------------------------
// The double build's forward against the independent float64 references (tests/ref/ref_layers.py,
// which follows the authors' code: bzhangGo/zero modules/rela.py, umich-sota/selective_attention
// lit_gpt/gpt_2_PTS.py, deep-spin/asentmax sparse_gemma.py, OliverRichter/normalized-attention
// models.py, apple/ml-sigmoid-attention's fixed -ln T_train) for rela, ssa, asentmax, normalized
// and sigmoid, each at its defaults and in its earlier forms. The float build's comparison is
// test_ref_layers / test_ref_rowmaps (tolerance 2e-5); here the inputs are rounded to float (the
// .npy files hold float32), the layer runs in double and the reference's float32 output is
// matched to 1e-6 of max(1, max |ref|): a 0.5% change of any constant fails by far. Heads 2 and
// 3, B = 2, T up to 80 with T_train = 40 (positions beyond T_train), every position encoding
// among the cases.

#define REF64_PY "/usr/bin/python3"

typedef struct {
    const char* variant;
    const char* settings; // "key=value ..." or ""
    int pos, T, NH;
} Ref64Case;

static const Ref64Case REF64[] = {
    {"rela", "", ATTN_POS_ROPE, 33, 3},
    {"rela", "rela_norm=head rela_gate=input rela_eps=1e-5", ATTN_POS_ALIBI, 7, 2},
    {"rela", "rela_gate=input", ATTN_POS_LEARNED, 64, 3},
    {"rela", "rela_norm=head rela_map=relu2", ATTN_POS_NONE, 33, 2},
    {"ssa", "", ATTN_POS_LEARNED, 80, 3},
    {"ssa", "ssa_value=on", ATTN_POS_NONE, 64, 3},
    {"ssa", "ssa_temp=token ssa_value=on", ATTN_POS_ROPE, 33, 2},
    {"asentmax", "", ATTN_POS_NONE, 80, 3},
    {"asentmax", "as_map=inner", ATTN_POS_ALIBI, 33, 2},
    {"asentmax", "as_scale=recipe", ATTN_POS_ROPE, 33, 3},
    {"normalized", "", ATTN_POS_LEARNED, 64, 3},
    {"normalized", "gain=off bias=off eps_mode=var eps=1e-12", ATTN_POS_NONE, 33, 2},
    {"normalized", "eps_mode=var len_scale=inv_sqrt_n", ATTN_POS_ROPE, 7, 3},
    {"sigmoid", "", ATTN_POS_LEARNED, 80, 3},
    {"sigmoid", "bias_mode=ln_n", ATTN_POS_ALIBI, 64, 2},
};
#define N_REF64      ((int)(sizeof(REF64) / sizeof(REF64[0])))
#define REF64_TTRAIN 40

static void ref64_hp(FILE* f, const AttnVariant* v, const AttnHParams* hp) {
    fputc('{', f);
    for (int i = 0; i < v->n_hparams; i++) {
        const AttnHParamSpec* sp = &v->hparams[i];
        if (i) fputc(',', f);
        if (sp->choices) {
            char w[64];
            test_nth_choice(w, sizeof(w), sp->choices, (int)hp->v[i]);
            ck_assert_msg(w[0], "choice %d of %s", (int)hp->v[i], sp->choices);
            fprintf(f, "\"%s\":\"%s\"", sp->name, w);
        } else {
            fprintf(f, "\"%s\":%.17g", sp->name, (double)hp->v[i]); // exact for the double build
        }
    }
    fputc('}', f);
}

// round a to float (what the .npy files hold) and write it
static void ref64_save(const char* dir, const char* id, const char* what, real* a, size_t n,
                       const int* shape, int ndim) {
    float* f = mallocCheck(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)a[i];
        a[i] = (real)f[i];
    }
    char path[1024], err[512];
    snprintf(path, sizeof(path), "%s/%s.%s.npy", dir, id, what);
    ck_assert_msg(npy_write(path, f, shape, ndim, 0, err, sizeof(err)) == 0, "%s", err);
    free(f);
}

static double ref64_cmp(const real* a, const char* path, size_t n) {
    char err[512];
    NpyInfo info;
    float* r = npy_read_f32(path, &info, err, sizeof(err));
    ck_assert_msg(r != NULL, "%s", err);
    ck_assert_msg(info.count == n, "%s: %zu values, expected %zu", path, info.count, n);
    double md = 0, mr = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)r[i]);
        if (!(d <= md)) md = d;
        if (fabs((double)r[i]) > mr) mr = fabs((double)r[i]);
    }
    free(r);
    return md / (mr > 1.0 ? mr : 1.0);
}

START_TEST(test_authors_forms_match_reference64) {
    ck_assert_msg(system(REF64_PY " -c 'import numpy' >/dev/null 2>&1") == 0,
                  REF64_PY " with numpy is required for the independent references: "
                           "sudo apt-get install python3-numpy (or bash scripts/deps)");
    const char* dir = test_tmpdir();
    char path[1024];
    snprintf(path, sizeof(path), "%s/cases.jsonl", dir);
    FILE* man = fopen(path, "w");
    ck_assert_msg(man != NULL, "cannot write %s", path);
    static const char* const POSN[] = {"learned", "rope", "alibi", "none", "xpos", "fire"};
    AttnHarness hs[N_REF64];
    for (int c = 0; c < N_REF64; c++) {
        const Ref64Case* rc = &REF64[c];
        const AttnVariant* v = attn_lookup(rc->variant);
        ck_assert_msg(v != NULL, "no variant %s", rc->variant);
        const int B = 2, hsz = 8, C = rc->NH * hsz, T = rc->T;
        AttnHParams hp;
        attn_hparams_default(&hp, v, REF64_TTRAIN, rc->NH, hsz, C, 2);
        char buf[256], err[256];
        util_strlcpy(buf, rc->settings, sizeof(buf));
        for (char* tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
            char* eq = strchr(tok, '=');
            ck_assert_msg(eq != NULL, "setting %s", tok);
            *eq = '\0';
            ck_assert_msg(attn_hparams_set(&hp, v, tok, eq + 1, err, sizeof(err)) == 0, "%s", err);
        }
        if (v->layer_forward) hp.inner = attn_lookup("softmax");
        AttnHarness* h = &hs[c];
        harness_setup(h, v, &hp, rc->pos, B, T, C, rc->NH, 1, 0.3f, 4242 + 31 * (uint64_t)c);
        const int P = h->row->params_per_head;
        Rng r;
        rng_seed(&r, 99 + (uint64_t)c);
        for (int k = 0; k < rc->NH * P; k++) // per-head parameters away from their init
            h->rowp[k] += 0.3f * rng_normal(&r);
        char id[16];
        snprintf(id, sizeof(id), "d%02d", c);
        int sx[3] = {B, T, C}, sq[3] = {B, T, 3 * C}, sp[2] = {rc->NH, P};
        ref64_save(dir, id, "x", h->x, (size_t)B * T * C, sx, 3);
        ref64_save(dir, id, "qkv", h->qkv, (size_t)B * T * 3 * C, sq, 3);
        if (P > 0) ref64_save(dir, id, "rowp", h->rowp, (size_t)rc->NH * P, sp, 2);
        fprintf(man, "{\"id\":\"%s\",\"variant\":\"%s\",\"pos\":\"%s\",\"B\":%d,\"T\":%d,", id,
                v->name, POSN[rc->pos], B, T);
        fprintf(man, "\"C\":%d,\"NH\":%d,\"P\":%d,\"T_train\":%d,\"inner\":\"softmax\",\"hp\":", C,
                rc->NH, P, REF64_TTRAIN);
        ref64_hp(man, v, &h->hp);
        fprintf(man, ",\"inner_hp\":");
        ref64_hp(man, h->row, &h->row_hp);
        fprintf(man, ",\"tensors\":[");
        for (int k = 0; k < h->ntens; k++) {
            int shape[3];
            size_t n = 1;
            for (int q = 0; q < h->specs[k].ndim; q++)
                n *= (size_t)(shape[q] = h->specs[k].shape[q]);
            char what[80];
            snprintf(what, sizeof(what), "t.%s", h->specs[k].name);
            ref64_save(dir, id, what, h->tp[k], n, shape, h->specs[k].ndim);
            fprintf(man, "%s\"%s\"", k ? "," : "", h->specs[k].name);
        }
        fprintf(man, "]}\n");
        attention_forward(&h->L); // on the float-rounded inputs, in double
    }
    ck_assert_msg(fclose(man) == 0, "cannot write %s", path);
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), REF64_PY " %s/tests/ref/ref_layers.py %s", test_repo_root(), dir);
    int rc = system(cmd);
    ck_assert_msg(rc == 0, "tests/ref/ref_layers.py failed (exit %d): see its message above", rc);
    double worst = 0;
    for (int c = 0; c < N_REF64; c++) {
        AttnHarness* h = &hs[c];
        const size_t nout = (size_t)h->d.B * h->d.T * h->d.C;
        const size_t natt = (size_t)h->d.B * h->d.NH * h->d.T * h->d.T;
        snprintf(path, sizeof(path), "%s/d%02d.ref_out.npy", dir, c);
        double eo = ref64_cmp(h->out, path, nout);
        snprintf(path, sizeof(path), "%s/d%02d.ref_att.npy", dir, c);
        double ea = ref64_cmp(h->att, path, natt);
        double e = eo > ea ? eo : ea;
        if (!(e <= worst)) worst = e;
        ck_assert_msg(e <= 1e-6,
                      "%s [%s] (double build): out %.3g, att %.3g relative to the "
                      "reference (tolerance 1e-6)",
                      REF64[c].variant, REF64[c].settings, eo, ea);
        harness_free(h);
    }
    printf("attn64 reference forward: %d cases, worst relative difference %.3g\n", N_REF64, worst);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", dir);
}
END_TEST

static Suite* attn64_layer_suite(void) {
    Suite* s = suite_create("attn64_layer");
    TCase* tc = tcase_create("layer");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_layer_gradcheck64, 0, attn_count());
    tcase_add_loop_test(tc, test_wrapped_inner_params64, 0, attn_count());
    tcase_add_test(tc, test_authors_forms_match_reference64);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(attn64_layer_suite)
