// tests/test_attn64_mta.c: Multi-Token Attention (attention/mta.c) in the double-precision build
// of attention/ (-DATTN_REAL_DOUBLE), beyond the generic test_attn64_layer sweep (which runs at
// layer 0 only):
//   - the forward (out and the stored weights att) against the independent float64 reference
//     tests/ref/ref_mta.py (written from the authors' facebookresearch/RAM projects/mta code), over
//     layer indices 0, 2, 3, 6, 10 (with and without the key-query convolutions, the depth
//     rescale lambda_l), head counts 2, 3, 5, 6, lengths 1, 4, 7, 13, 20, every position
//     encoding the variant supports and every hyperparameter away from its default; relative
//     difference <= 1e-10;
//   - finite-difference gradients (4-point, tests/attn64_cfg.h: a 0.5% error in one entry fails)
//     with B = 2 of q, k, v, x and every layer tensor (theta, theta_post, pre_mix, mix, gn_w,
//     gate_w, gate_b) in convolution layers 2 and 6 and in the plain layer 3, NH = 3; each tensor
//     must be checked with a nonzero gradient, and in the plain layer the kernels' gradient is 0.
// A missing /usr/bin/python3 or numpy fails with the install line.
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

#define PY "/usr/bin/python3"

static AttnHParams hp_set(const char* settings, int T, int NH, int hs) {
    const AttnVariant* v = attn_lookup("mta");
    ck_assert_ptr_nonnull(v);
    AttnHParams hp;
    attn_hparams_default(&hp, v, T, NH, hs, NH * hs, 12);
    char buf[256], err[256];
    util_strlcpy(buf, settings, sizeof(buf));
    for (char* tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
        char* eq = strchr(tok, '=');
        ck_assert_msg(eq != NULL, "setting %s", tok);
        *eq = '\0';
        ck_assert_msg(attn_hparams_set(&hp, v, tok, eq + 1, err, sizeof(err)) == 0, "%s", err);
    }
    hp.inner = attn_lookup("softmax");
    return hp;
}

static int tensor_index(const AttnHarness* h, const char* name) {
    for (int k = 0; k < h->ntens; k++)
        if (strcmp(h->specs[k].name, name) == 0) return k;
    return -1;
}

// ---- forward against tests/ref/ref_mta.py

typedef struct {
    const char* settings;
    int layer, pos, T, NH;
} RefCase;

static const RefCase REF_CASES[] = {
    {"", 2, ATTN_POS_LEARNED, 13, 3},
    {"", 3, ATTN_POS_ROPE, 7, 3},
    {"", 6, ATTN_POS_ALIBI, 20, 5},
    {"", 0, ATTN_POS_NONE, 4, 2},
    {"", 2, ATTN_POS_XPOS, 1, 3},
    {"rescale=on", 6, ATTN_POS_ROPE, 13, 3},
    {"rescale=on gate=off", 10, ATTN_POS_LEARNED, 7, 6},
    {"pre_mix=off", 2, ATTN_POS_ALIBI, 13, 5},
    {"ch=2", 2, ATTN_POS_ROPE, 13, 3},
    {"ch=3", 6, ATTN_POS_LEARNED, 7, 6},
    {"ch=1 post_cq=0", 2, ATTN_POS_NONE, 20, 2},
    {"cq=0 post_cq=3 post_kw=1", 2, ATTN_POS_ROPE, 13, 3},
    {"cq=2 kw=0 post_cq=9 post_kw=7", 6, ATTN_POS_ALIBI, 7, 3},
    {"cq=1 kw=8", 2, ATTN_POS_LEARNED, 13, 2},
    {"conv_every=1 conv_first=0", 3, ATTN_POS_LEARNED, 7, 3},
    {"conv_every=3 conv_first=1", 10, ATTN_POS_ROPE, 13, 5},
    {"conv_every=3 conv_first=1", 3, ATTN_POS_ROPE, 13, 5},
    {"conv_first=5", 3, ATTN_POS_NONE, 7, 3},
    {"ch=2 cq=3 kw=2 post_cq=2 post_kw=1 rescale=on pre_mix=off gate=off", 2, ATTN_POS_ALIBI, 20,
     5},
};
#define N_REF ((int)(sizeof(REF_CASES) / sizeof(REF_CASES[0])))

static void write_f64(const char* dir, const char* id, const char* what, const real* x, size_t n) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s.%s.f64", dir, id, what);
    FILE* f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert_msg(fwrite(x, sizeof(double), n, f) == n, "short write %s", path);
    ck_assert_msg(fclose(f) == 0, "close %s", path);
}

static double cmp_f64(const real* a, const char* path, size_t n) {
    FILE* f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    double* r = malloc(sizeof(double) * n);
    ck_assert(r != NULL);
    ck_assert_msg(fread(r, sizeof(double), n, f) == n, "%s: short", path);
    ck_assert_msg(fgetc(f) == EOF, "%s: more values than expected", path);
    fclose(f);
    double md = 0, mr = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - r[i]);
        if (!(d <= md)) md = d; // NaN propagates
        if (fabs(r[i]) > mr) mr = fabs(r[i]);
    }
    free(r);
    return md / (mr > 1 ? mr : 1);
}

START_TEST(test_mta_forward_vs_reference64) {
    ck_assert_msg(system(PY " -c 'import numpy' >/dev/null 2>&1") == 0,
                  PY " with numpy is required: sudo apt-get install python3-numpy");
    static const char* const POS[] = {"learned", "rope", "alibi", "none", "xpos", "fire"};
    const char* dir = test_tmpdir();
    char path[1024], cmd[2048];
    snprintf(path, sizeof(path), "%s/cases.jsonl", dir);
    FILE* man = fopen(path, "w");
    ck_assert(man != NULL);
    static AttnHarness hs[N_REF];
    const int B = 2, hsz = 4;
    for (int i = 0; i < N_REF; i++) {
        const RefCase* rc = &REF_CASES[i];
        const int C = rc->NH * hsz;
        AttnHParams hp = hp_set(rc->settings, rc->T, rc->NH, hsz);
        AttnHarness* h = &hs[i];
        harness_setup(h, attn_lookup("mta"), &hp, rc->pos, B, rc->T, C, rc->NH, 1, 0.3, 500 + i);
        h->L.layer = rc->layer;
        attention_forward(&h->L);
        char id[16];
        snprintf(id, sizeof(id), "m%02d", i);
        write_f64(dir, id, "x", h->x, (size_t)B * rc->T * C);
        write_f64(dir, id, "qkv", h->qkv, (size_t)B * rc->T * 3 * C);
        fprintf(man, "{\"id\":\"%s\",\"variant\":\"mta\",\"pos\":\"%s\",\"B\":%d,\"T\":%d,", id,
                POS[rc->pos], B, rc->T);
        fprintf(man, "\"C\":%d,\"NH\":%d,\"layer\":%d,\"f64\":true,\"hp\":{", C, rc->NH, rc->layer);
        const AttnVariant* v = h->v;
        for (int k = 0; k < v->n_hparams; k++) {
            const AttnHParamSpec* s = &v->hparams[k];
            if (s->choices)
                fprintf(man, "%s\"%s\":\"%s\"", k ? "," : "", s->name,
                        h->hp.v[k] > 0.5f ? "on" : "off");
            else
                fprintf(man, "%s\"%s\":%g", k ? "," : "", s->name, (double)h->hp.v[k]);
        }
        fprintf(man, "},\"tensors\":[");
        for (int k = 0; k < h->ntens; k++)
            fprintf(man, "%s\"%s\"", k ? "," : "", h->specs[k].name);
        fprintf(man, "],\"shapes\":{");
        for (int k = 0; k < h->ntens; k++) {
            fprintf(man, "%s\"%s\":[", k ? "," : "", h->specs[k].name);
            for (int q = 0; q < h->specs[k].ndim; q++)
                fprintf(man, "%s%d", q ? "," : "", h->specs[k].shape[q]);
            fprintf(man, "]");
            char what[80];
            snprintf(what, sizeof(what), "t.%s", h->specs[k].name);
            write_f64(dir, id, what, h->tp[k], h->tsize[k]);
        }
        fprintf(man, "}}\n");
    }
    ck_assert_int_eq(fclose(man), 0);
    snprintf(cmd, sizeof(cmd), PY " %s/tests/ref/ref_mta.py %s", test_repo_root(), dir);
    const int rc = system(cmd);
    ck_assert_msg(rc == 0, "tests/ref/ref_mta.py failed (exit %d)", rc);
    int bad = 0;
    double worst = 0;
    for (int i = 0; i < N_REF; i++) {
        const RefCase* c = &REF_CASES[i];
        AttnHarness* h = &hs[i];
        const size_t nout = (size_t)B * c->T * c->NH * hsz, natt = (size_t)B * c->NH * c->T * c->T;
        snprintf(path, sizeof(path), "%s/m%02d.ref_out.f64", dir, i);
        const double eo = cmp_f64(h->out, path, nout);
        snprintf(path, sizeof(path), "%s/m%02d.ref_att.f64", dir, i);
        const double ea = cmp_f64(h->att, path, natt);
        if (!(eo <= 1e-10 && ea <= 1e-10)) {
            bad++;
            fprintf(stderr, "MISMATCH mta [%s] layer %d pos %s T=%d NH=%d: out %.3g att %.3g\n",
                    c->settings, c->layer, POS[c->pos], c->T, c->NH, eo, ea);
        }
        worst = fmax(worst, fmax(eo, ea));
        harness_free(h);
    }
    printf("ref_mta (double): %d cases, worst relative difference %.3g\n", N_REF, worst);
    ck_assert_msg(bad == 0, "%d of %d mta cases differ from tests/ref/ref_mta.py", bad, N_REF);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

// ---- finite-difference gradients

typedef struct {
    const char* settings;
    int layer, pos;
} GradCase;

static const GradCase GRAD_CASES[] = {
    {"", 2, ATTN_POS_ROPE},
    {"", 3, ATTN_POS_LEARNED},
    {"rescale=on ch=2 cq=3 kw=2 post_cq=2 post_kw=1", 6, ATTN_POS_ALIBI},
    {"gate=off pre_mix=off", 2, ATTN_POS_NONE},
};

static void check_one(AttnHarness* h, const char* label, real* x, const real* g, size_t n,
                      double gmax, const char* what, int need) {
    harness_loss(h);
    double lmag = 0;
    const size_t BTC = (size_t)h->d.B * h->d.T * h->d.C;
    for (size_t i = 0; i < BTC; i++)
        lmag += fabs((double)h->w[i] * (double)h->out[i]);
    Attn64Count c = attn64_check(harness_loss, h, x, g, n, gmax, lmag, label, what);
    ck_assert_msg(c.kinks <= c.checked, "%s: d%s: %d kinks vs %d checked", label, what, c.kinks,
                  c.checked);
    if (need) ck_assert_msg(c.checked > 0, "%s: d%s never checked", label, what);
}

START_TEST(test_mta_gradcheck64) {
    const GradCase* gc = &GRAD_CASES[_i];
    enum { B = 2, T = 9, NH = 3, HS = 4, C = NH * HS };
    AttnHParams hp = hp_set(gc->settings, T, NH, HS);
    AttnHarness h;
    harness_setup(&h, attn_lookup("mta"), &hp, gc->pos, B, T, C, NH, 1, 0.3,
                  attn64_seed(gc->settings) + (uint64_t)gc->layer);
    h.L.layer = gc->layer;
    char label[200];
    snprintf(label, sizeof(label), "mta [%s] layer %d", gc->settings, gc->layer);
    harness_pass(&h);
    const size_t BTC = (size_t)B * T * C;
    double gmax = fmax(attn64_max_abs(h.dqkv, 3 * BTC), attn64_max_abs(h.dx, BTC));
    for (int k = 0; k < h.ntens; k++)
        gmax = fmax(gmax, attn64_max_abs(h.dtp[k], h.tsize[k]));
    check_one(&h, label, h.qkv, h.dqkv, 3 * BTC, gmax, "qkv", 1);
    check_one(&h, label, h.x, h.dx, BTC, gmax, "x", 0);
    const int conv_layer = gc->layer != 3;
    for (int k = 0; k < h.ntens; k++) {
        const char* nm = h.specs[k].name;
        const int kernel = strcmp(nm, "theta") == 0 || strcmp(nm, "theta_post") == 0;
        if (kernel && !conv_layer) { // unused outside the convolution layers
            ck_assert_msg(attn64_max_abs(h.dtp[k], h.tsize[k]) == 0, "%s: d%s nonzero", label, nm);
            continue;
        }
        ck_assert_msg(attn64_max_abs(h.dtp[k], h.tsize[k]) > 0, "%s: d%s is 0", label, nm);
        check_one(&h, label, h.tp[k], h.dtp[k], h.tsize[k], gmax, nm, 1);
    }
    // the tensors this case must have
    ck_assert(tensor_index(&h, "mix") >= 0 && tensor_index(&h, "gn_w") >= 0);
    if (strstr(gc->settings, "gate=off") == NULL) ck_assert(tensor_index(&h, "gate_w") >= 0);
    if (strstr(gc->settings, "pre_mix=off") == NULL) ck_assert(tensor_index(&h, "pre_mix") >= 0);
    ck_assert(tensor_index(&h, "theta") >= 0 && tensor_index(&h, "theta_post") >= 0);
    harness_free(&h);
}
END_TEST

static Suite* attn64_mta_suite(void) {
    Suite* s = suite_create("attn64_mta");
    TCase* tc = tcase_create("mta");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_mta_forward_vs_reference64);
    tcase_add_loop_test(tc, test_mta_gradcheck64, 0,
                        (int)(sizeof(GRAD_CASES) / sizeof(GRAD_CASES[0])));
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(attn64_mta_suite)
