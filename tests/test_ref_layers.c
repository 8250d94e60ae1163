// tests/test_ref_layers.c: every layer-level attention variant (those with layer_forward) against
// the independent float64 numpy reference tests/ref/ref_layers.py, written from VARIANTS.md and the
// papers. One attention layer per case (tests/attn_harness.h): B = 2, NH = 2 or 3 (6, 8 and 12
// in the ALiBi cases), hs = 8, T in {64, 7, 33, 2, 80, 1} and once per variant 300; layer
// tensors drawn N(0, 0.3) around their init and row parameters N(0, 0.3) around theirs (away
// from the zero inits that make several variants the identity); x, q, k, v N(0, 1).
//
// Cases per variant: the defaults under every position encoding (learned, rope, alibi, none);
// under xpos at T = 33 and 64 (odd and even centring offsets), under alibi with NH = 6 (ALiBi
// slopes of a head count that is not a power of two), and, when the variant forms logits, once
// under fire (c = 0.25, L = 5.5 < T);
// the settings of COMBOS below (keys that act together, e.g. linear's InLine scale under
// norm = subtract), three times each;
// the inner row maps ssmax (learnable per-head theta) and sigmoid (unnormalised)
// besides the default softmax, each under rope and alibi; every choice value of every choice
// hyperparameter (twice, under different position encodings and sizes); three values of every
// numeric hyperparameter (NUM_VALUES below; a numeric hyperparameter without an entry fails the
// suite by name). All cases are written as .npy files (common/npy.h) with a cases.jsonl manifest,
// the reference runs once for all of them, and `out` and the stored attention weights `att` are
// compared: max |C - ref| / max(1, max |ref|) <= TOL.
//
// The default pipeline's position encodings are also compared under the row maps softmax, ssmax
// and sigmoid (the row maps themselves are covered in depth by their own reference suite), softmax
// under alibi with NH = 3, 6, 12 and 8, and talking_heads with attn.bias_order = after and
// before under alibi (NH = 6, 12) and fire.
// Also: diff at layers 1, 4 and 11 (its depth schedule), gated_deltanet under alibi with NH = 3,
// and rows beyond the training length (T = 80 > T_train = 33) for every layer-level variant
// (defaults, and around ssmax and sigmoid where it uses attn.inner) and for the default pipeline
// under softmax, ssmax and sigmoid.
// A registered layer-level variant that the reference does not implement fails by name; a
// missing /usr/bin/python3 or numpy fails with the install line.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "common/npy.h"
#include "common/util.h"
#include "tests/attn_harness.h"
#include "tests/testutil.h"

#define PY      "/usr/bin/python3"
#define MAXCASE 700
// The same cases run in the double build (tests/test_attn64_ref_layers.c includes this file;
// attention/real.h): inputs and results then cross as float64 .npy files ("f64": 1 in the
// manifest) and the layer agrees with the reference to ~1e-13, so TOL is 1e-9 there.
// One exception: linear's feature = slay, whose C kernel takes |q^ - k^|^2 = 2 - 2c (exact for
// unit vectors) while the reference computes |q^|^2 + |k^|^2 - 2c of the vectors normalised
// with the 1e-6 epsilon (x / sqrt(|x|^2 + 1e-6)): the two differ by O(1e-6 / |x|^2), measured
// <= 9e-7, so those cases take TOL_SLAY.
#if REAL_IS_DOUBLE
#define TOL        1e-9
#define TOL_SLAY   4e-6
#define SUITE_NAME "attn64_ref_layers"
#else
#define TOL        2e-5 // float kernels vs float64; measured worst case is ~2e-6 (docs/testing.md)
#define TOL_SLAY   TOL
#define SUITE_NAME "ref_layers"
#endif

static const char* const POS_NAMES[] = {"learned", "rope", "alibi", "none", "xpos", "fire"};

// Numeric hyperparameters of the layer-level variants: three values each (the default among
// them), with the setting (if any) under which the key takes effect.
typedef struct {
    const char* variant;
    const char* key;
    const char* values[3];
    const char* with; // "key=word" set alongside, or NULL
} NumValues;

static const NumValues NUM_VALUES[] = {
    {"gated", "gate_init", {"0.25", "0.05", "0.9"}, NULL},
    {"asentmax", "alpha", {"1.5", "1.25", "2"}, NULL},
    {"asentmax", "delta", {"1", "0", "2.5"}, NULL},
    {"rela", "rela_eps", {"1e-8", "1e-5", "0.5"}, NULL},
    {"linear", "eps", {"1e-6", "0.01", "0.3"}, NULL},
    {"linear", "cos_len", {"0", "70", "300"}, "feature=cosformer"},
    {"linear", "rf_m", {"0", "5", "12"}, "feature=performer"},
    {"linear", "redraw", {"0", "1", "2"}, "feature=performer"},
    {"linear", "yat_eps", {"0.01", "0.001", "0.5"}, "feature=slay"},
    {"diff", "lambda0", {"0.8", "0.3", "-0.5"}, "lambda_mode=fixed"},
    {"deltanet", "chunk", {"0", "1", "5"}, NULL},
    {"gated_deltanet", "chunk", {"0", "3", "16"}, NULL},
    {"mta", "cq", {"0", "3", "9"}, NULL},
    {"mta", "kw", {"0", "2", "8"}, NULL},
    {"mta", "post_cq", {"0", "2", "9"}, NULL},
    {"mta", "post_kw", {"0", "1", "8"}, NULL},
    {"mta", "ch", {"0", "1", "2"}, NULL},
    {"mta", "conv_every", {"4", "1", "3"}, NULL},
    {"mta", "conv_first", {"2", "0", "5"}, NULL},
};

// Settings that only act together (a key that takes effect under another key's value), each run
// under three position encodings, lengths and head counts (NH = 2 and 3) besides the
// one-key-at-a-time cases.
typedef struct {
    const char* variant;
    const char* settings;
} Combo;

static const Combo COMBOS[] = {
    {"linear", "feature=identity norm=subtract"},
    {"linear", "feature=identity norm=subtract inline_scale=paper"},
    {"linear", "feature=relu norm=subtract"},
    {"linear", "norm=subtract inline_scale=paper"},
    {"linear", "feature=flatten flatten_norm=head"},
    {"linear", "feature=flatten flatten_norm=channels eps=0.01"},
    {"linear", "feature=cottention cos_stab=row"},
    {"linear", "feature=cottention norm=subtract"},
    {"linear", "feature=cottention norm=subtract inline_scale=paper"},
    {"deltanet", "o_norm=none q_scale=one"},
    {"deltanet", "o_norm=gated chunk=0"},
    {"gated_deltanet", "o_norm=rms q_scale=one"},
    {"gated_deltanet", "o_norm=none chunk=0"},
};

// The setting under which a variant uses attn.inner ("" = always; NULL = never).
static const char* inner_setting(const char* variant) {
    if (strcmp(variant, "asentmax") == 0) return "as_map=inner";
    if (strcmp(variant, "rela") == 0) return "rela_map=inner";
    if (strcmp(variant, "linear") == 0) return NULL;
    if (strcmp(variant, "deltanet") == 0 || strcmp(variant, "gated_deltanet") == 0) return NULL;
    if (strcmp(variant, "mta") == 0) return NULL;
    return "";
}

typedef struct {
    char id[16];
    char label[256];
    const AttnVariant* v;
    size_t nout, natt;
    real *out, *att; // the C layer's results
} Case;

typedef struct {
    Case c[MAXCASE];
    int n;
    FILE* manifest;
    const char* dir;
    char err[512];
} Cases;

static int have_numpy(void) {
    return system(PY " -c 'import numpy' >/dev/null 2>&1") == 0;
}

#define NEED_NUMPY()                                                                               \
    ck_assert_msg(have_numpy(), PY " with numpy is required for the independent references: "      \
                                   "sudo apt-get install python3-numpy (or bash scripts/deps)")

// word number idx of "a|b|c" into out
static void choice_word(char* out, size_t cap, const char* choices, int idx) {
    const char* p = choices;
    for (int i = 0; i < idx && p; i++) {
        p = strchr(p, '|');
        if (p) p++;
    }
    ck_assert_msg(p != NULL, "choice %d of %s", idx, choices);
    size_t len = strcspn(p, "|");
    if (len >= cap) len = cap - 1;
    memcpy(out, p, len);
    out[len] = '\0';
}

static int n_choices(const char* choices) {
    int n = 1;
    for (const char* p = choices; *p; p++)
        n += *p == '|';
    return n;
}

// "key":value pairs of hp for variant v, as JSON members
static void write_hp(FILE* f, const AttnVariant* v, const AttnHParams* hp) {
    fputc('{', f);
    for (int i = 0; i < v->n_hparams; i++) {
        const AttnHParamSpec* s = &v->hparams[i];
        if (i) fputc(',', f);
        if (s->choices) {
            char w[64];
            choice_word(w, sizeof(w), s->choices, (int)hp->v[i]);
            fprintf(f, "\"%s\":\"%s\"", s->name, w);
        } else {
            fprintf(f, "\"%s\":%.17g", s->name, (double)hp->v[i]);
        }
    }
    fputc('}', f);
}

static void set_hp(AttnHParams* hp, const AttnVariant* v, const char* key, const char* val) {
    char err[256];
    ck_assert_msg(attn_hparams_set(hp, v, key, val, err, sizeof(err)) == 0, "%s", err);
}

#if REAL_IS_DOUBLE
// x as a '<f8' .npy file (version 1.0; common/npy writes float32 only)
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

// the '<f8' .npy file at path (n values), malloc'd
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

static void save(Cases* cs, const char* id, const char* what, const real* x, const int* shape,
                 int ndim) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s.%s.npy", cs->dir, id, what);
#if REAL_IS_DOUBLE
    (void)cs;
    npy_write_f64(path, x, shape, ndim);
#else
    ck_assert_msg(npy_write(path, x, shape, ndim, 0, cs->err, sizeof(cs->err)) == 0, "%s", cs->err);
#endif
}

// Depth and training length of the next add_case (defaults: layer 0, or mta's cycle; T_train =
// T), set by the cases that vary them.
static int CASE_LAYER = -1, CASE_TTRAIN = 0;

// One case: variant v with settings "k=v k=v" (may be empty), inner map name, position, T, NH.
static void add_case(Cases* cs, const AttnVariant* v, const char* settings, const char* inner,
                     int pos, int T, int NH) {
    ck_assert_int_lt(cs->n, MAXCASE);
    const int B = 2, hs = 8, C = NH * hs;
    Case* c = &cs->c[cs->n];
    snprintf(c->id, sizeof(c->id), "c%03d", cs->n);
    snprintf(c->label, sizeof(c->label), "%s [%s] inner=%s pos=%s T=%d NH=%d", v->name, settings,
             inner, POS_NAMES[pos], T, NH);
    c->v = v;
    AttnHParams hp;
    attn_hparams_default(&hp, v, CASE_TTRAIN > 0 ? CASE_TTRAIN : T, NH, hs, C, 2);
    char buf[256];
    util_strlcpy(buf, settings, sizeof(buf));
    for (char* tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
        char* eq = strchr(tok, '=');
        ck_assert_msg(eq != NULL, "setting %s", tok);
        *eq = '\0';
        set_hp(&hp, v, tok, eq + 1);
    }
    if (v->layer_forward) {
        hp.inner = attn_lookup(inner);
        ck_assert_msg(hp.inner != NULL, "inner %s", inner);
    }
    AttnHarness h;
    harness_setup(&h, v, &hp, pos, B, T, C, NH, 2, 0.3f, 1000 + 17 * (uint64_t)cs->n);
    // mta's key-query convolutions run in layers conv_first + n conv_every (2, 6, ... by
    // default) and its group norm may scale by depth: its cases cycle through conv and plain
    // layers
    static const int MTA_LAYERS[4] = {2, 3, 6, 5};
    if (strcmp(v->name, "mta") == 0) h.L.layer = MTA_LAYERS[cs->n % 4];
    if (CASE_LAYER >= 0) h.L.layer = CASE_LAYER;
    if (CASE_LAYER >= 0 || CASE_TTRAIN > 0) {
        size_t l = strlen(c->label);
        snprintf(c->label + l, sizeof(c->label) - l, " layer=%d T_train=%d", h.L.layer,
                 h.hp.T_train);
    }
    const int P = h.row->params_per_head;
    Rng r;
    rng_seed(&r, 77 + (uint64_t)cs->n);
    for (int k = 0; k < NH * P; k++) // row parameters well away from their init
        h.rowp[k] += 0.3f * rng_normal(&r);
    if (pos == ATTN_POS_FIRE) { // c off its init, the threshold L = 5.5 inside the rows
        h.posp[0] = 0.25f;
        h.posp[1] = 5.5f / 512.0f;
    }
    attention_forward(&h.L);
    c->nout = (size_t)B * T * C;
    c->natt = (size_t)B * NH * T * T;
    c->out = mallocCheck(sizeof(real) * c->nout);
    c->att = mallocCheck(sizeof(real) * c->natt);
    memcpy(c->out, h.out, sizeof(real) * c->nout);
    memcpy(c->att, h.att, sizeof(real) * c->natt);
    int sx[3] = {B, T, C}, sq[3] = {B, T, 3 * C}, sp[2] = {NH, P};
    save(cs, c->id, "x", h.x, sx, 3);
    save(cs, c->id, "qkv", h.qkv, sq, 3);
    if (P > 0) save(cs, c->id, "rowp", h.rowp, sp, 2);
    if (pos == ATTN_POS_FIRE) {
        int sf[1] = {(int)h.nposp};
        save(cs, c->id, "fire", h.posp, sf, 1);
    }
    FILE* f = cs->manifest;
    fprintf(f, "{\"id\":\"%s\",\"variant\":\"%s\",\"pos\":\"%s\",\"B\":%d,\"T\":%d,\"C\":%d,",
            c->id, v->name, POS_NAMES[pos], B, T, C);
    fprintf(f, "\"NH\":%d,\"P\":%d,\"T_train\":%d,\"layer\":%d,\"f64\":%d,\"inner\":\"%s\",\"hp\":",
            NH, P, h.hp.T_train, h.L.layer, REAL_IS_DOUBLE, inner);
    write_hp(f, v, &h.hp);
    fprintf(f, ",\"inner_hp\":");
    write_hp(f, h.row, &h.row_hp);
    fprintf(f, ",\"tensors\":[");
    for (int k = 0; k < h.ntens; k++) {
        int shape[3];
        for (int q = 0; q < h.specs[k].ndim; q++)
            shape[q] = h.specs[k].shape[q];
        char what[80];
        snprintf(what, sizeof(what), "t.%s", h.specs[k].name);
        save(cs, c->id, what, h.tp[k], shape, h.specs[k].ndim);
        fprintf(f, "%s\"%s\"", k ? "," : "", h.specs[k].name);
    }
    const int fi = attn_hparam_index(v, "feature");
    char fw[64] = "";
    if (strcmp(v->name, "linear") == 0 && fi >= 0)
        choice_word(fw, sizeof(fw), v->hparams[fi].choices, (int)h.hp.v[fi]);
    if (strcmp(fw, "performer") == 0) {
        // the layer's random features (the draw is checked in test_linear_maps): the reference
        // takes them as given
        const int mm = h.hp.v[4] > 0 ? (int)h.hp.v[4] : 2 * hs;
        real* W = mallocCheck(sizeof(real) * (size_t)NH * mm * hs);
        for (int hd = 0; hd < NH; hd++)
            attn_performer_features(W + (size_t)hd * mm * hs, mm, hs, h.L.seed, h.L.layer, hd,
                                    h.L.step, (int)h.hp.v[5]);
        int sw[3] = {NH, mm, hs};
        save(cs, c->id, "t.perf_w", W, sw, 3);
        fprintf(f, "%s\"perf_w\"", h.ntens ? "," : "");
        free(W);
    }
    fprintf(f, "]}\n");
    harness_free(&h);
    cs->n++;
}

static const int TS[] = {64, 7, 33, 2, 80, 1};
#define NTS ((int)(sizeof(TS) / sizeof(TS[0])))

static void variant_cases(Cases* cs, const AttnVariant* v) {
    int k = cs->n; // cycles T, NH and the position encoding across cases
#define NEXT_T  TS[k % NTS]
#define NEXT_NH (2 + k % 2)
    for (int pos = 0; pos < 4; pos++, k++)
        add_case(cs, v, "", "softmax", pos, NEXT_T, NEXT_NH);
    add_case(cs, v, "", "softmax", ATTN_POS_ROPE, 300, 2); // long rows
    add_case(cs, v, "", "softmax", ATTN_POS_XPOS, 33, 3);  // rotation with decay
    add_case(cs, v, "", "softmax", ATTN_POS_XPOS, 64, 2);  // even T: the centring offset
    add_case(cs, v, "", "softmax", ATTN_POS_ALIBI, 33, 6); // ALiBi slopes of 6 heads (not 2^k)
    if (attn_pos_supported(v, ATTN_POS_FIRE))
        add_case(cs, v, "", "softmax", ATTN_POS_FIRE, 33, 3); // learned bias, T > L
    const char* with = inner_setting(v->name);
    static const char* const INNERS[] = {"ssmax", "sigmoid"};
    if (with) {
        for (int i = 0; i < 2; i++)
            for (int pos = ATTN_POS_ROPE; pos <= ATTN_POS_ALIBI; pos++, k++)
                add_case(cs, v, with, INNERS[i], pos, NEXT_T, NEXT_NH);
        if (*with) add_case(cs, v, with, "softmax", k % 4, NEXT_T, NEXT_NH), k++;
    }
    for (int i = 0; i < v->n_hparams; i++) {
        const AttnHParamSpec* s = &v->hparams[i];
        char set[256];
        if (s->choices) {
            for (int c = 0; c < n_choices(s->choices); c++) {
                char w[64];
                choice_word(w, sizeof(w), s->choices, c);
                snprintf(set, sizeof(set), "%s=%s", s->name, w);
                for (int rep = 0; rep < 2; rep++, k++) // two positions, lengths, head counts
                    add_case(cs, v, set, "softmax", (k + c) % 4, NEXT_T, NEXT_NH);
            }
            continue;
        }
        const NumValues* nv = NULL;
        for (size_t q = 0; q < sizeof(NUM_VALUES) / sizeof(NUM_VALUES[0]); q++)
            if (strcmp(NUM_VALUES[q].variant, v->name) == 0 &&
                strcmp(NUM_VALUES[q].key, s->name) == 0)
                nv = &NUM_VALUES[q];
        ck_assert_msg(nv != NULL, "%s: numeric hyperparameter attn.%s has no values to test",
                      v->name, s->name);
        for (int q = 0; q < 3; q++, k++) {
            snprintf(set, sizeof(set), "%s=%s%s%s", s->name, nv->values[q], nv->with ? " " : "",
                     nv->with ? nv->with : "");
            add_case(cs, v, set, "softmax", k % 4, NEXT_T, NEXT_NH);
        }
    }
    for (size_t q = 0; q < sizeof(COMBOS) / sizeof(COMBOS[0]); q++) {
        if (strcmp(COMBOS[q].variant, v->name) != 0) continue;
        for (int rep = 0; rep < 3; rep++, k++)
            add_case(cs, v, COMBOS[q].settings, "softmax", rep == 2 ? k % 4 : 1 + rep,
                     rep == 0 ? 33 : NEXT_T, 2 + rep % 2);
    }
#undef NEXT_T
#undef NEXT_NH
}

static double cmp(const real* a, const char* path, size_t n, char* err, size_t cap) {
#if REAL_IS_DOUBLE
    (void)err, (void)cap;
    double* r = npy_read_f64(path, n);
#else
    NpyInfo info;
    float* r = npy_read_f32(path, &info, err, cap);
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

// All registered layer-level variants, every case, one reference call.
START_TEST(test_layer_variants_match_reference) {
    NEED_NUMPY();
    static Cases cs;
    memset(&cs, 0, sizeof(cs));
    cs.dir = test_tmpdir();
    char path[1024], cmd[4096];
    snprintf(path, sizeof(path), "%s/cases.jsonl", cs.dir);
    cs.manifest = fopen(path, "w");
    ck_assert(cs.manifest != NULL);
    int nlayer = 0;
    for (int i = 0; i < attn_count(); i++)
        if (attn_get(i)->layer_forward && test_variant_selected(attn_get(i)->name)) {
            variant_cases(&cs, attn_get(i));
            nlayer++;
        }
    // the default pipeline's position encodings, under row maps the reference also implements
    static const char* const ROWMAPS[] = {"softmax", "ssmax", "sigmoid"};
    for (int i = 0; i < 3; i++)
        for (int pos = 0; pos < 6; pos++)
            add_case(&cs, attn_lookup(ROWMAPS[i]), "", ROWMAPS[i], pos,
                     pos == ATTN_POS_FIRE ? 9 : TS[(i + pos) % NTS], 2 + pos % 2);
    // ALiBi with head counts that are not powers of two (the authors' get_slopes: 3, 6 as the
    // small config, 12 as gpt2_124M) and with a power of two (8)
    static const int ALIBI_NH[] = {3, 6, 12, 8};
    for (int i = 0; i < 4; i++)
        add_case(&cs, attn_lookup("softmax"), "", "softmax", ATTN_POS_ALIBI, 64, ALIBI_NH[i]);
    // talking heads: both orders of the position bias and the head mixing, under alibi and fire
    const AttnVariant* th = attn_lookup("talking_heads");
    if (th && test_variant_selected(th->name))
        for (int o = 0; o < 2; o++) {
            const char* set = o ? "bias_order=before" : "bias_order=after";
            add_case(&cs, th, set, "softmax", ATTN_POS_ALIBI, 33, 6);
            add_case(&cs, th, set, "softmax", ATTN_POS_ALIBI, 7, 12);
            add_case(&cs, th, set, "softmax", ATTN_POS_FIRE, 33, 3);
        }
    // depth: diff's lambda_init(l) = 0.8 - 0.6 exp(-0.3 l) at layers l > 0 (its default
    // lambda_mode = depth; lambda_mode = fixed must not depend on l)
    const AttnVariant* df = attn_lookup("diff");
    if (df && test_variant_selected(df->name)) {
        static const int DEPTH[] = {1, 4, 11};
        for (int i = 0; i < 3; i++) {
            CASE_LAYER = DEPTH[i];
            add_case(&cs, df, "", "softmax", i, TS[i], 2 + i % 2);
        }
        add_case(&cs, df, "lambda_mode=fixed lambda0=0.3", "softmax", ATTN_POS_ROPE, 33, 3);
        CASE_LAYER = -1;
    }
    // gated_deltanet's decay under ALiBi with an odd head count
    const AttnVariant* gdn = attn_lookup("gated_deltanet");
    if (gdn && test_variant_selected(gdn->name)) {
        add_case(&cs, gdn, "", "softmax", ATTN_POS_ALIBI, 33, 3);
        add_case(&cs, gdn, "chunk=0", "softmax", ATTN_POS_ALIBI, 7, 3);
    }
    // rows beyond the training length (T = 80 > T_train = 33): every layer-level variant at its
    // defaults and around each inner map it uses, and the default pipeline's row maps
    CASE_TTRAIN = 33;
    for (int i = 0; i < attn_count(); i++) {
        const AttnVariant* v = attn_get(i);
        if (!v->layer_forward || !test_variant_selected(v->name)) continue;
        add_case(&cs, v, "", "softmax", ATTN_POS_ROPE, 80, 3);
        const char* with = inner_setting(v->name);
        if (!with) continue;
        add_case(&cs, v, with, "ssmax", ATTN_POS_ALIBI, 80, 2);
        add_case(&cs, v, with, "sigmoid", ATTN_POS_NONE, 80, 3);
    }
    for (int i = 0; i < 3; i++)
        add_case(&cs, attn_lookup(ROWMAPS[i]), "", ROWMAPS[i], ATTN_POS_ROPE, 80, 3);
    CASE_TTRAIN = 0;
    fclose(cs.manifest);
    if (test_variant_selected("")) ck_assert_int_ge(nlayer, 8); // unless a subset was selected
    snprintf(cmd, sizeof(cmd), PY " %s/tests/ref/ref_layers.py %s", test_repo_root(), cs.dir);
    int rc = system(cmd);
    ck_assert_msg(rc == 0, "tests/ref/ref_layers.py failed (exit %d): see its message above", rc);
    int bad = 0;
    double worst = 0;
    for (int i = 0; i < cs.n; i++) {
        Case* c = &cs.c[i];
        snprintf(path, sizeof(path), "%s/%s.ref_out.npy", cs.dir, c->id);
        double eo = cmp(c->out, path, c->nout, cs.err, sizeof(cs.err));
        snprintf(path, sizeof(path), "%s/%s.ref_att.npy", cs.dir, c->id);
        double ea = cmp(c->att, path, c->natt, cs.err, sizeof(cs.err));
        const double tol = strstr(c->label, "feature=slay") ? TOL_SLAY : TOL;
        if (!(eo <= tol && ea <= tol)) {
            if (bad++ < 25) fprintf(stderr, "MISMATCH %s: out %.3g att %.3g\n", c->label, eo, ea);
        }
        if (eo > worst) worst = eo;
        if (ea > worst) worst = ea;
        free(c->out);
        free(c->att);
    }
    printf("ref_layers: %d cases, worst relative difference %.3g (tolerance %.1g)\n", cs.n, worst,
           TOL);
    ck_assert_msg(bad == 0, "%d of %d layer-level cases differ from the reference (listed above)",
                  bad, cs.n);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", cs.dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

// LUCID's preconditioner has a unit diagonal (arXiv 2602.10410: exp(k^ k^T / sqrt d - sqrt d) on
// RMS-normalised keys), derived by hand for two tokens with the same key: G = [[1, 0], [1, 1]]
// (up to the RMSNorm eps), so Vt = [v0, v1 - v0]; the softmax row 1 sees equal scores (1/2, 1/2),
// hence o_0 = v_0 and o_1 = (v0 + v1 - v0)/2 = v_1 / 2: the duplicated key's value is removed.
// A kernel without the -sqrt(hs) shift gives e^-sqrt(hs) times these.
START_TEST(test_lucid_unit_diagonal) {
    const AttnVariant* v = attn_lookup("lucid");
    ck_assert_ptr_nonnull(v);
    enum { B = 2, T = 2, NH = 2, C = 16 };
    AttnHarness h;
    harness_setup(&h, v, NULL, ATTN_POS_NONE, B, T, C, NH, 1, 0.0f, 77);
    for (int b = 0; b < B; b++) // key of token 1 := key of token 0, every head
        memcpy(h.qkv + ((size_t)b * T + 1) * 3 * C + C, h.qkv + (size_t)b * T * 3 * C + C,
               sizeof(real) * C);
    attention_forward(&h.L);
    double worst = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                const double vv = (double)h.qkv[((size_t)b * T + t) * 3 * C + 2 * C + c];
                const double want = t == 0 ? vv : 0.5 * vv;
                const double got = (double)h.out[((size_t)b * T + t) * C + c];
                const double e = fabs(got - want) / (fabs(want) + 1e-3);
                if (e > worst) worst = e;
            }
    ck_assert_msg(worst < 1e-4, "lucid with a repeated key: relative error %.3g", worst);
    harness_free(&h);
}
END_TEST

// A registered layer-level variant the reference does not implement fails by name.
START_TEST(test_every_layer_variant_has_reference) {
    NEED_NUMPY();
    char cmd[2048], names[4096] = "";
    snprintf(cmd, sizeof(cmd), PY " %s/tests/ref/ref_layers.py --list", test_repo_root());
    FILE* p = popen(cmd, "r");
    ck_assert(p != NULL);
    size_t n = fread(names, 1, sizeof(names) - 1, p);
    names[n] = '\0';
    ck_assert_int_eq(pclose(p), 0);
    int nlayer = 0;
    for (int i = 0; i < attn_count(); i++) {
        const AttnVariant* v = attn_get(i);
        if (!v->layer_forward) continue;
        nlayer++;
        char line[80];
        snprintf(line, sizeof(line), "\n%s\n", v->name);
        char hay[4200];
        snprintf(hay, sizeof(hay), "\n%s", names);
        ck_assert_msg(strstr(hay, line) != NULL,
                      "layer-level variant '%s' has no reference in tests/ref/ref_layers.py",
                      v->name);
    }
    ck_assert_int_ge(nlayer, 8);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// The defaults are the authors' forms, with the tensors and initial values of their code:
//   rela (bzhangGo/zero modules/rela.py): RMSNorm over all C channels, gate sigmoid(g * o) with a
//     C-vector g (N(0, 1/C) here), eps 1e-8, scale init 1;
//   ssa (umich-sota/selective_attention lit_gpt/gpt_2_PTS.py): one beta per layer, init 1.5;
//   asentmax (deep-spin/asentmax sparse_gemma.py, README's ASEntmax): adapt-softplus-tanh with
//     biased projections of the block input (Gemma-2 init: N(0, 0.02), zero bias).
// The numbers are read off those files; a default that drifts from them fails by name.

static void want_choice(const AttnVariant* v, const AttnHParams* hp, const char* key,
                        const char* word) {
    const int i = attn_hparam_index(v, key);
    ck_assert_msg(i >= 0, "%s has no attn.%s", v->name, key);
    char w[64];
    choice_word(w, sizeof(w), v->hparams[i].choices, (int)hp->v[i]);
    ck_assert_msg(strcmp(w, word) == 0, "%s: default attn.%s = %s, the reference's is %s", v->name,
                  key, w, word);
}

static const AttnTensorSpec* want_tensor(const AttnTensorSpec* sp, int n, const char* name,
                                         const char* variant) {
    for (int k = 0; k < n; k++)
        if (strcmp(sp[k].name, name) == 0) return &sp[k];
    ck_abort_msg("%s: no layer tensor %s at its defaults", variant, name);
    return NULL;
}

START_TEST(test_layer_defaults_are_authors_forms) {
    const AttnDims d = {.B = 2, .T = 9, .C = 24, .NH = 3, .hs = 8};
    AttnTensorSpec sp[ATTN_MAX_TENSORS];
    AttnHParams hp;
    const AttnVariant* rela = attn_lookup("rela");
    attn_hparams_default(&hp, rela, 64, d.NH, d.hs, d.C, 2);
    want_choice(rela, &hp, "rela_norm", "all");
    want_choice(rela, &hp, "rela_gate", "output");
    want_choice(rela, &hp, "rela_map", "relu");
    ck_assert_float_eq(hp.v[attn_hparam_index(rela, "rela_eps")], 1e-8f);
    int n = rela->layer_tensors(sp, &d, &hp);
    const AttnTensorSpec* g = want_tensor(sp, n, "gate", "rela");
    ck_assert_int_eq(g->ndim, 1);
    ck_assert_int_eq(g->shape[0], d.C);
    ck_assert_int_eq(g->init, ATTN_INIT_NORMAL);
    ck_assert_float_eq_tol(g->init_value, 1.0 / sqrt((double)d.C), 1e-7);
    const AttnTensorSpec* sc = want_tensor(sp, n, "gain", "rela");
    ck_assert_int_eq(sc->init, ATTN_INIT_CONST);
    ck_assert_float_eq(sc->init_value, 1.0f);
    ck_assert_int_eq(n, 2);

    const AttnVariant* ssa = attn_lookup("ssa");
    attn_hparams_default(&hp, ssa, 64, d.NH, d.hs, d.C, 2);
    want_choice(ssa, &hp, "ssa_temp", "position");
    want_choice(ssa, &hp, "ssa_value", "off");
    n = ssa->layer_tensors(sp, &d, &hp);
    ck_assert_int_eq(n, 1);
    const AttnTensorSpec* be = want_tensor(sp, n, "beta", "ssa");
    ck_assert_int_eq(be->ndim, 1);
    ck_assert_int_eq(be->shape[0], 1); // one per layer, shared by the heads
    ck_assert_int_eq(be->init, ATTN_INIT_CONST);
    ck_assert_float_eq(be->init_value, 1.5f);

    const AttnVariant* as = attn_lookup("asentmax");
    attn_hparams_default(&hp, as, 64, d.NH, d.hs, d.C, 2);
    want_choice(as, &hp, "as_scale", "adapt");
    want_choice(as, &hp, "as_map", "entmax");
    ck_assert_float_eq(hp.v[attn_hparam_index(as, "alpha")], 1.5f);
    ck_assert_float_eq(hp.v[attn_hparam_index(as, "delta")], 1.0f);
    n = as->layer_tensors(sp, &d, &hp);
    ck_assert_int_eq(n, 4);
    static const char *const W[] = {"beta_w", "gamma_w"}, *const Bs[] = {"beta_b", "gamma_b"};
    for (int k = 0; k < 2; k++) {
        const AttnTensorSpec* w = want_tensor(sp, n, W[k], "asentmax");
        ck_assert_int_eq(w->shape[0], d.NH);
        ck_assert_int_eq(w->shape[1], d.C); // projected from the block input
        ck_assert_int_eq(w->init, ATTN_INIT_NORMAL);
        ck_assert_float_eq(w->init_value, 0.02f);
        const AttnTensorSpec* b = want_tensor(sp, n, Bs[k], "asentmax");
        ck_assert_int_eq(b->shape[0], d.NH);
        ck_assert_int_eq(b->init, ATTN_INIT_ZERO);
    }
}
END_TEST

static Suite* ref_layers_suite(void) {
    Suite* s = suite_create(SUITE_NAME);
    TCase* tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_every_layer_variant_has_reference);
    tcase_add_test(tc, test_layer_variants_match_reference);
    tcase_add_test(tc, test_lucid_unit_diagonal);
    tcase_add_test(tc, test_layer_defaults_are_authors_forms);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(ref_layers_suite)
