// tests/test_qknorm_layer.c: qk-norm (the model key qk_norm; attention/qknorm.c) in front of an
// attention layer, through the kernels and the driver the model uses: the projection's raw q, k
// normalised in place (attn_qknorm_forward), the layer (attention_forward / attention_backward,
// tests/attn_harness.h), then attn_qknorm_backward turning the gradient of the normalised q, k
// into the gradient of the raw ones and of the two gains.
//   - against the independent float64 numpy reference tests/ref/ref_qknorm.py (its attention from
//     tests/ref/ref_layers.py): the normalised qkv, the layer output and the attention weights,
//     for both kinds (layernorm, rmsnorm) under every position encoding (learned, rope, alibi,
//     none, xpos, fire) with softmax, and a sample of row maps (ssmax, sigmoid, relu, entmax) and
//     layer-level variants (gated, diff, deltanet, linear, talking_heads, mta, multiscreen, lucid)
//     under the encodings in turn; B = 2, hs = 8, NH 2 or 3, T in {9, 33, 1, 64};
//     max |C - ref| / max(1, max |ref|) <= TOL;
//   - finite differences of the loss sum(w * out) in the raw qkv (q, k and v), in the q gain and
//     in the k gain, B = 2, T = 9, for the same kinds, encodings and variants; in the double build
//     (tests/test_attn64_qknorm_layer.c includes this file) with tests/attn64_cfg.h's check (1e-6
//     relative: a 0.5% error in one entry fails), in the float build with testutil's gradcheck;
//   - 1 thread and 2 threads give identical bits (the gains' gradient is a reduction over rows).
// q and k are drawn with a per-channel offset, so the mean that layernorm subtracts is far from 0
// and a layernorm that forgot it (or an rmsnorm that subtracted it) fails; the gains are drawn
// 1 + N(0, 0.3), so a kernel that ignored a gain, or swapped q's and k's, fails.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "common/npy.h"
#include "common/util.h"
#include "tests/attn_harness.h"
#include "tests/testutil.h"
#if REAL_IS_DOUBLE
#include "tests/attn64_cfg.h"
#define TOL        1e-9
#define SUITE_NAME "attn64_qknorm_layer"
#else
#define TOL        2e-5 // float kernels vs float64 (as tests/test_ref_layers.c)
#define SUITE_NAME "qknorm_layer"
#endif

#define PY "/usr/bin/python3"

static const char* const POS[] = {"learned", "rope", "alibi", "none", "xpos", "fire"};

typedef struct {
    AttnHarness h;
    real *raw, *gq, *gk, *xhat, *rstd, *dgq, *dgk;
    int kind, nthreads;
} QkLayer;

static void qk_setup(QkLayer* q, const char* variant, int pos, int kind, int T, int NH,
                     int nthreads, uint64_t seed) {
    const AttnVariant* v = attn_lookup(variant);
    ck_assert_msg(v != NULL, "variant %s", variant);
    const int B = 2, hs = 8, C = NH * hs;
    memset(q, 0, sizeof(*q));
    harness_setup(&q->h, v, NULL, pos, B, T, C, NH, nthreads, 0.3f, seed);
    if (pos == ATTN_POS_FIRE) { // c off its init, the FIRE threshold L = 5.5 inside the rows
        q->h.posp[0] = 0.25f;
        q->h.posp[1] = 5.5f / 512.0f;
    }
    const size_t BT = (size_t)B * T;
    q->kind = kind;
    q->nthreads = nthreads;
    q->raw = real_alloc(BT * 3 * C);
    q->xhat = real_alloc(BT * 2 * C);
    q->rstd = real_alloc(BT * 2 * NH);
    q->gq = real_alloc(hs);
    q->gk = real_alloc(hs);
    q->dgq = real_alloc(hs);
    q->dgk = real_alloc(hs);
    Rng r;
    rng_seed(&r, seed ^ 0x9e3779b97f4a7c15ULL);
    real off[16];
    for (int i = 0; i < 16; i++)
        off[i] = (real)(1.5 * rng_normal(&r));
    memcpy(q->raw, q->h.qkv, sizeof(real) * BT * 3 * C);
    for (size_t row = 0; row < BT; row++) // q and k: a channel offset (a far-from-0 mean)
        for (int c = 0; c < 2 * C; c++)
            q->raw[row * 3 * C + c] += off[(c / hs + c % hs) % 16];
    for (int i = 0; i < hs; i++) {
        q->gq[i] = (real)(1.0 + 0.3 * rng_normal(&r));
        q->gk[i] = (real)(1.0 + 0.3 * rng_normal(&r));
    }
}

static void qk_free(QkLayer* q) {
    harness_free(&q->h);
    real* bufs[] = {q->raw, q->gq, q->gk, q->xhat, q->rstd, q->dgq, q->dgk};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        free(bufs[i]);
}

// the layer's qkv = the normalised raw qkv
static void qk_normalise(QkLayer* q) {
    const AttnDims* d = &q->h.d;
    memcpy(q->h.qkv, q->raw, sizeof(real) * (size_t)d->B * d->T * 3 * d->C);
    attn_qknorm_forward(q->h.qkv, q->xhat, q->rstd, q->gq, q->gk, d, q->kind, q->nthreads);
}

static double qk_loss(void* ctx) {
    QkLayer* q = ctx;
    qk_normalise(q);
    return harness_loss(&q->h);
}

// forward and backward: h.dqkv = dL/d(raw qkv), dgq, dgk = dL/d(gains)
static void qk_grads(QkLayer* q) {
    qk_normalise(q);
    harness_pass(&q->h);
    memset(q->dgq, 0, sizeof(real) * (size_t)q->h.d.hs);
    memset(q->dgk, 0, sizeof(real) * (size_t)q->h.d.hs);
    attn_qknorm_backward(q->h.dqkv, q->dgq, q->dgk, q->xhat, q->rstd, q->gq, q->gk, &q->h.d,
                         q->kind, q->nthreads);
}

// The configurations of both suites: (variant, pos) pairs, each under both kinds.
typedef struct {
    const char* variant;
    int pos;
} QkCfg;

static int qk_cfgs(QkCfg* out) {
    int n = 0;
    for (int pos = 0; pos < ATTN_POS_COUNT; pos++)
        out[n++] = (QkCfg){"softmax", pos};
    static const char* const OTHERS[] = {"ssmax",         "sigmoid", "relu",        "entmax",
                                         "gated",         "diff",    "deltanet",    "linear",
                                         "talking_heads", "mta",     "multiscreen", "lucid"};
    for (size_t i = 0; i < sizeof(OTHERS) / sizeof(OTHERS[0]); i++) {
        const AttnVariant* v = attn_lookup(OTHERS[i]);
        ck_assert_msg(v != NULL, "variant %s", OTHERS[i]);
        int pos = (int)(i % ATTN_POS_COUNT);
        if (!attn_pos_supported(v, pos)) pos = ATTN_POS_ROPE;
        out[n++] = (QkCfg){OTHERS[i], pos};
    }
    return n;
}

// ---------------------------------------------------------------------------------------------
// the numpy reference

#if REAL_IS_DOUBLE
static void npy_write_f64(const char* path, const double* x, const int* shape, int ndim) {
    char dict[256], sh[128] = "";
    size_t n = 1, l = 0;
    for (int i = 0; i < ndim; i++) {
        l += (size_t)snprintf(sh + l, sizeof(sh) - l, "%d%s", shape[i], ndim == 1 ? "," : ", ");
        n *= (size_t)shape[i];
    }
    int dl = snprintf(dict, sizeof(dict),
                      "{'descr': '<f8', 'fortran_order': False, 'shape': (%s), }", sh);
    int total = (10 + dl + 1 + 63) / 64 * 64, pad = total - 10 - dl - 1;
    FILE* f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    const unsigned char magic[10] = {0x93,
                                     'N',
                                     'U',
                                     'M',
                                     'P',
                                     'Y',
                                     1,
                                     0,
                                     (unsigned char)((total - 10) & 0xff),
                                     (unsigned char)((total - 10) >> 8)};
    int ok = fwrite(magic, 1, 10, f) == 10 && fwrite(dict, 1, (size_t)dl, f) == (size_t)dl;
    for (int i = 0; i < pad; i++)
        ok = ok && fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF && fwrite(x, sizeof(double), n, f) == n;
    ck_assert_msg(fclose(f) == 0 && ok, "cannot write %s", path);
}

static double* npy_read_f64(const char* path, size_t n) {
    FILE* f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    unsigned char head[10];
    ck_assert_msg(fread(head, 1, 10, f) == 10 && head[0] == 0x93 && head[6] == 1, "%s: not npy 1.x",
                  path);
    size_t hl = (size_t)head[8] | (size_t)head[9] << 8;
    char* dict = mallocCheck(hl + 1);
    ck_assert_msg(fread(dict, 1, hl, f) == hl, "%s: short header", path);
    dict[hl] = '\0';
    ck_assert_msg(strstr(dict, "'<f8'") != NULL, "%s: not float64: %s", path, dict);
    free(dict);
    double* x = mallocCheck(sizeof(double) * (n + 1));
    size_t got = fread(x, sizeof(double), n + 1, f);
    fclose(f);
    ck_assert_msg(got == n, "%s: %zu values, expected %zu", path, got, n);
    return x;
}
#endif

static void save(const char* dir, const char* id, const char* what, const real* x, const int* shape,
                 int ndim) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s.%s.npy", dir, id, what);
#if REAL_IS_DOUBLE
    npy_write_f64(path, x, shape, ndim);
#else
    char err[512];
    ck_assert_msg(npy_write(path, x, shape, ndim, 0, err, sizeof(err)) == 0, "%s", err);
#endif
}

// max |a - ref| / max(1, max |ref|) against the reference file
static double cmp(const real* a, const char* path, size_t n) {
#if REAL_IS_DOUBLE
    double* r = npy_read_f64(path, n);
#else
    char err[512];
    NpyInfo info;
    float* r = npy_read_f32(path, &info, err, sizeof(err));
    ck_assert_msg(r != NULL, "%s", err);
    ck_assert_msg(info.count == n, "%s: %zu values, expected %zu", path, info.count, n);
#endif
    double md = 0, mr = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)r[i]);
        if (!(d <= md)) md = d; // NaN propagates
        if (fabs((double)r[i]) > mr) mr = fabs((double)r[i]);
    }
    free(r);
    return md / (mr > 1 ? mr : 1);
}

static void write_hp(FILE* f, const AttnVariant* v, const AttnHParams* hp) {
    fputc('{', f);
    for (int i = 0; i < v->n_hparams; i++) {
        const AttnHParamSpec* s = &v->hparams[i];
        if (i) fputc(',', f);
        if (s->choices) {
            char w[64];
            test_nth_choice(w, sizeof(w), s->choices, (int)hp->v[i]);
            fprintf(f, "\"%s\":\"%s\"", s->name, w);
        } else {
            fprintf(f, "\"%s\":%.17g", s->name, (double)hp->v[i]);
        }
    }
    fputc('}', f);
}

typedef struct {
    char label[160];
    size_t nqkv, nout, natt;
    real *qkvn, *out, *att;
} RefCase;

START_TEST(test_qknorm_layer_matches_reference) {
    ck_assert_msg(system(PY " -c 'import numpy' >/dev/null 2>&1") == 0,
                  PY " with numpy is required for the independent references: "
                     "sudo apt-get install python3-numpy (or bash scripts/deps)");
    static const int TS[] = {9, 33, 1, 64};
    QkCfg cfgs[32];
    const int ncfg = qk_cfgs(cfgs);
    RefCase* rc = callocCheck((size_t)ncfg * ATTN_QKNORM_COUNT, sizeof(RefCase));
    const char* dir = test_tmpdir();
    char path[1024], cmd[2048];
    snprintf(path, sizeof(path), "%s/cases.jsonl", dir);
    FILE* man = fopen(path, "w");
    ck_assert(man != NULL);
    int n = 0;
    for (int ci = 0; ci < ncfg; ci++) {
        for (int kind = 0; kind < ATTN_QKNORM_COUNT; kind++, n++) {
            const int T = TS[n % 4], NH = 2 + n % 2;
            QkLayer q;
            qk_setup(&q, cfgs[ci].variant, cfgs[ci].pos, kind, T, NH, 2, 500 + 31 * (uint64_t)n);
            AttnHarness* h = &q.h;
            qk_normalise(&q);
            attention_forward(&h->L);
            RefCase* c = &rc[n];
            snprintf(c->label, sizeof(c->label), "%s pos=%s kind=%s T=%d NH=%d", cfgs[ci].variant,
                     POS[cfgs[ci].pos], attn_qknorm_name(kind), T, NH);
            const int B = h->d.B, C = h->d.C, hs = h->d.hs, P = h->row->params_per_head;
            c->nqkv = (size_t)B * T * 3 * C;
            c->nout = (size_t)B * T * C;
            c->natt = (size_t)B * NH * T * T;
            c->qkvn = mallocCheck(sizeof(real) * c->nqkv);
            c->out = mallocCheck(sizeof(real) * c->nout);
            c->att = mallocCheck(sizeof(real) * c->natt);
            memcpy(c->qkvn, h->qkv, sizeof(real) * c->nqkv);
            memcpy(c->out, h->out, sizeof(real) * c->nout);
            memcpy(c->att, h->att, sizeof(real) * c->natt);
            char id[16];
            snprintf(id, sizeof(id), "q%03d", n);
            int sx[3] = {B, T, C}, sq[3] = {B, T, 3 * C}, sg[1] = {hs}, sp[2] = {NH, P};
            save(dir, id, "x", h->x, sx, 3);
            save(dir, id, "qkv", q.raw, sq, 3);
            save(dir, id, "gq", q.gq, sg, 1);
            save(dir, id, "gk", q.gk, sg, 1);
            if (P > 0) save(dir, id, "rowp", h->rowp, sp, 2);
            if (cfgs[ci].pos == ATTN_POS_FIRE) {
                int sf[1] = {(int)h->nposp};
                save(dir, id, "fire", h->posp, sf, 1);
            }
            fprintf(man,
                    "{\"id\":\"%s\",\"kind\":\"%s\",\"variant\":\"%s\",\"pos\":\"%s\",\"B\":%d,"
                    "\"T\":%d,\"C\":%d,\"NH\":%d,\"P\":%d,\"T_train\":%d,\"layer\":%d,\"f64\":%d,"
                    "\"inner\":\"%s\",\"hp\":",
                    id, attn_qknorm_name(kind), cfgs[ci].variant, POS[cfgs[ci].pos], B, T, C, NH, P,
                    h->hp.T_train, h->L.layer, REAL_IS_DOUBLE, h->row->name);
            write_hp(man, h->v, &h->hp);
            fprintf(man, ",\"inner_hp\":");
            write_hp(man, h->row, &h->row_hp);
            fprintf(man, ",\"tensors\":[");
            for (int k = 0; k < h->ntens; k++) {
                int shape[3];
                for (int d = 0; d < h->specs[k].ndim; d++)
                    shape[d] = h->specs[k].shape[d];
                char what[80];
                snprintf(what, sizeof(what), "t.%s", h->specs[k].name);
                save(dir, id, what, h->tp[k], shape, h->specs[k].ndim);
                fprintf(man, "%s\"%s\"", k ? "," : "", h->specs[k].name);
            }
            fprintf(man, "]}\n");
            qk_free(&q);
        }
    }
    fclose(man);
    snprintf(cmd, sizeof(cmd), PY " %s/tests/ref/ref_qknorm.py %s", test_repo_root(), dir);
    ck_assert_msg(system(cmd) == 0, "tests/ref/ref_qknorm.py failed (its message is above)");
    int bad = 0;
    for (int i = 0; i < n; i++) {
        RefCase* c = &rc[i];
        char p[1100];
        snprintf(p, sizeof(p), "%s/q%03d.ref_qkvn.npy", dir, i);
        const double eq = cmp(c->qkvn, p, c->nqkv);
        snprintf(p, sizeof(p), "%s/q%03d.ref_out.npy", dir, i);
        const double eo = cmp(c->out, p, c->nout);
        snprintf(p, sizeof(p), "%s/q%03d.ref_att.npy", dir, i);
        const double ea = cmp(c->att, p, c->natt);
        const int ok = eq <= TOL && eo <= TOL && ea <= TOL;
        if (!ok) bad++;
        if (!ok || i < 2)
            fprintf(stderr, "%s %-60s qkv %.2g out %.2g att %.2g\n", ok ? "ok      " : "MISMATCH",
                    c->label, eq, eo, ea);
        free(c->qkvn);
        free(c->out);
        free(c->att);
    }
    free(rc);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_msg(bad == 0, "%d of %d qk-norm cases differ from the numpy reference (above)", bad,
                  n);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// finite differences

static double max_abs_r(const real* x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs((double)x[i]) > m) m = fabs((double)x[i]);
    return m;
}

// dL/d(raw qkv), dL/dgq, dL/dgk of one configuration against finite differences
static void fd_one(const char* variant, int pos, int kind, uint64_t seed) {
    enum { T = 9, NH = 2 };
    char label[200];
    snprintf(label, sizeof(label), "qk_norm %s: %s, pos_encoding=%s (B=2 T=%d NH=%d)",
             attn_qknorm_name(kind), variant, POS[pos], T, NH);
    QkLayer q;
    qk_setup(&q, variant, pos, kind, T, NH, 1, seed);
    qk_grads(&q);
    const AttnDims* d = &q.h.d;
    const size_t n = (size_t)d->B * d->T * 3 * d->C, hs = (size_t)d->hs;
    real* g = mallocCheck(sizeof(real) * n);
    real* ggq = mallocCheck(sizeof(real) * hs);
    real* ggk = mallocCheck(sizeof(real) * hs);
    memcpy(g, q.h.dqkv, sizeof(real) * n);
    memcpy(ggq, q.dgq, sizeof(real) * hs);
    memcpy(ggk, q.dgk, sizeof(real) * hs);
    const double gmax = fmax(max_abs_r(g, n), fmax(max_abs_r(ggq, hs), max_abs_r(ggk, hs)));
    ck_assert_msg(max_abs_r(ggq, hs) > 0 && max_abs_r(ggk, hs) > 0, "%s: a gain has no gradient",
                  label);
#if REAL_IS_DOUBLE
    qk_loss(&q);
    double lmag = 0;
    for (size_t i = 0; i < (size_t)d->B * d->T * d->C; i++)
        lmag += fabs((double)q.h.w[i] * (double)q.h.out[i]);
    Attn64Count c1 = attn64_check(qk_loss, &q, q.raw, g, n, gmax, lmag, label, "qkv");
    Attn64Count c2 = attn64_check(qk_loss, &q, q.gq, ggq, hs, gmax, lmag, label, "q_gain");
    Attn64Count c3 = attn64_check(qk_loss, &q, q.gk, ggk, hs, gmax, lmag, label, "k_gain");
    ck_assert_msg(
        c1.checked >= (int)(n / 8) && c2.checked >= (int)hs / 2 && c3.checked >= (int)hs / 2,
        "%s: too few coordinates checked (%d, %d, %d)", label, c1.checked, c2.checked, c3.checked);
#else
    GradCheck r1 = gradcheck(qk_loss, &q, q.raw, g, n, 1e-2f, 1e-3 * gmax, 400);
    GradCheck r2 = gradcheck(qk_loss, &q, q.gq, ggq, hs, 1e-2f, 1e-3 * gmax, hs);
    GradCheck r3 = gradcheck(qk_loss, &q, q.gk, ggk, hs, 1e-2f, 1e-3 * gmax, hs);
    ck_assert_msg(r1.max_err <= 1.0, "%s: dqkv[%zu] %.6g vs numeric %.6g", label, r1.worst, r1.ana,
                  r1.num);
    ck_assert_msg(r2.max_err <= 1.0, "%s: dq_gain[%zu] %.6g vs numeric %.6g", label, r2.worst,
                  r2.ana, r2.num);
    ck_assert_msg(r3.max_err <= 1.0, "%s: dk_gain[%zu] %.6g vs numeric %.6g", label, r3.worst,
                  r3.ana, r3.num);
#endif
    free(g);
    free(ggq);
    free(ggk);
    qk_free(&q);
}

START_TEST(test_qknorm_layer_gradients) {
    QkCfg cfgs[32];
    const int ncfg = qk_cfgs(cfgs);
    for (int ci = 0; ci < ncfg; ci++)
        for (int kind = 0; kind < ATTN_QKNORM_COUNT; kind++)
            fd_one(cfgs[ci].variant, cfgs[ci].pos, kind, 900 + 7 * (uint64_t)(ci * 2 + kind));
}
END_TEST

START_TEST(test_qknorm_layer_threads) {
    for (int kind = 0; kind < ATTN_QKNORM_COUNT; kind++) {
        QkLayer a, b;
        qk_setup(&a, "softmax", ATTN_POS_ROPE, kind, 33, 3, 1, 77);
        qk_setup(&b, "softmax", ATTN_POS_ROPE, kind, 33, 3, 2, 77);
        qk_grads(&a);
        qk_grads(&b);
        const int hs = a.h.d.hs;
        harness_expect_identical(&a.h, &b.h, attn_qknorm_name(kind));
        ck_assert_msg(memcmp(a.dgq, b.dgq, sizeof(real) * hs) == 0 &&
                          memcmp(a.dgk, b.dgk, sizeof(real) * hs) == 0,
                      "%s: gain gradients differ 1 vs 2 threads", attn_qknorm_name(kind));
        qk_free(&a);
        qk_free(&b);
    }
}
END_TEST

static Suite* qknorm_layer_suite(void) {
    Suite* s = suite_create(SUITE_NAME);
    TCase* tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_qknorm_layer_matches_reference);
    tcase_add_test(tc, test_qknorm_layer_gradients);
    tcase_add_test(tc, test_qknorm_layer_threads);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(qknorm_layer_suite)
