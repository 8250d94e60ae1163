// tests/test_ref_rowmaps.c: every registered row map's forward against an independent float64
// numpy reference (tests/ref/ref_rowmaps.py, written from VARIANTS.md and the papers, not from the
// C). The suite loops over the registry, so a new row map is covered without editing this file,
// and one without a reference entry fails by name.
//
// Cases: for every row map, every combination of its choice hyperparameters, each at the
// default numbers and with each numeric hyperparameter swept one at a time over its declared
// range (min, max, an interior point, and two log-spaced points when the range spans two
// decades; values are rounded for integer hyperparameters); rows of length n in
// {1, 2, 7, 64, 300} at T = 320 (T != n, T_train = 200 != T), scores N(0, sd^2) with sd in
// {0.5, 1.5, 3} and occasional ties, a random head of 6, key norms |k_j|^2 in [0, 3 hs), and
// per-head parameters drawn at init + N(0, 0.5^2). The C side writes every case in one batch,
// runs the script once, reads the references back and compares:
// The defaults run once more with NH = 5 heads (an odd count, for per-head schedules such as
// swat's balanced slopes over P = ceil(H/2)).
//   |a - [lo, hi]| <= RTOL |ref| + ATOL max_j |ref_j|,  RTOL = 2e-5, ATOL = 2e-6
// (lo = hi = ref except for the quantizers, where an entry within float rounding of a rounding
// boundary may go either way). Float rows agree with the float64 reference to ~1e-6 relative;
// 2e-5 still sees a 0.5% change of any constant that moves the weights, and ln T for ln n.
// Stochastic variants: quantized's stochastic rounding (step >= 0) uses a hash draw that cannot
// be reproduced independently, so each draw must be one of the two grid neighbours of p and the
// mean over 2000 steps must equal p within 5 standard errors (unbiasedness); each row of the
// stochastic window must be a windowed softmax of a width in the documented range (the law of
// the draws is tested in test_ref_window_draws.c).
// Also checked: documented defaults and choice lists of every hyperparameter, and init_params.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attention/attention.h"
#include "common/util.h"
#include "tests/testutil.h"

#define PYTHON "/usr/bin/python3"
// The same cases run in the double build (tests/test_attn64_ref_rowmaps.c includes this file;
// attention/real.h), where the rows agree with the float64 reference to ~1e-13 (worst ~1e-9:
// squareplus's (x + sqrt(x^2 + b)) / 2 at x << -sqrt(b), a cancellation in double): there a
// 4e-9 relative change of one entry fails. The reference's own float-rounding bands (lo, hi: the
// quantizers' boundaries, multimax's float32 z) still widen the accepted interval.
#if REAL_IS_DOUBLE
#define RTOL       4e-9
#define ATOL       1e-11
#define SUITE_NAME "attn64_ref_rowmaps"
#else
#define RTOL       2e-5
#define ATOL       2e-6
#define SUITE_NAME "ref_rowmaps"
#endif
#define T_CALL       320
#define T_TRAIN      200
#define NHEAD        6
#define NHEAD_ODD    5 // the defaults once more with an odd head count (swat's P = ceil(H/2))
#define HS           16
#define STOCH_STEPS  2000
#define WSTOCH_STEPS 40
#define MAX_CFG      2048

static const int NS[] = {1, 2, 7, 64, 300};
#define N_NS ((int)(sizeof(NS) / sizeof(NS[0])))

typedef struct {
    const AttnVariant* v;
    AttnHParams hp;
    int nh;       // heads (NHEAD, or NHEAD_ODD)
    int init_off; // offset of its init_params output in INIT_C (params_per_head floats), or -1
} Cfg;

enum { K_DET, K_STOCH, K_WSTOCH };

typedef struct {
    int cfg, n, h, layer, kind, wobs;
    long step;
    real stat;            // the row statistic (row_stat) of a, if the variant declares one
    size_t off;           // into S, KSQ, A (n floats); REF block at case_ref(i)
    size_t draws;         // K_STOCH: STOCH_STEPS * n draws at DRAWS[draws]
    real p[ATTN_MAX_PPH]; // float values in both builds (written exactly, %.17g)
} Case;

static Cfg CFG[MAX_CFG];
static int NCFG;
static Case* CASES;
static int NCASE, CAPCASE;
static float *S, *KSQ; // the inputs, float32 in both builds (the reference reads them)
static real *A, *DRAWS, *INIT_C;
static size_t NS_TOT, CAPS, NDRAWS, CAPDRAWS, NINIT;
static double *REF, *INIT_REF;
static char STATUS[65536]; // status.txt of the reference
static char SETUP_ERR[4096];

static int is_rowmap(const AttnVariant* v) {
    return !v->layer_forward && v->forward_row;
}

static void choice_word(char* out, size_t cap, const char* choices, int idx) {
    const char* p = choices;
    for (int i = 0; i < idx && p; i++)
        if ((p = strchr(p, '|'))) p++;
    if (!p) {
        snprintf(out, cap, "?");
        return;
    }
    size_t len = strcspn(p, "|");
    if (len >= cap) len = cap - 1;
    memcpy(out, p, len);
    out[len] = '\0';
}

static int n_choices(const char* choices) {
    int k = 1;
    for (const char* p = choices; *p; p++)
        k += *p == '|';
    return k;
}

static int hp_is_word(const AttnVariant* v, const AttnHParams* hp, const char* name,
                      const char* word) {
    int i = attn_hparam_index(v, name);
    if (i < 0 || !v->hparams[i].choices) return 0;
    char w[64];
    choice_word(w, sizeof(w), v->hparams[i].choices, (int)hp->v[i]);
    return strcmp(w, word) == 0;
}

// Sweep values of a numeric hyperparameter (excluding its default), see the header.
static int sweep_values(const AttnHParamSpec* s, float* out) {
    double lo = s->min, hi = s->max, def = s->def, cand[5];
    int nc = 0;
    cand[nc++] = lo;
    cand[nc++] = hi;
    cand[nc++] = lo + 0.37 * (hi - lo);
    double base = lo > 0 ? lo : 1.0;
    if (hi / base >= 100.0) {
        cand[nc++] = base * pow(hi / base, 0.1);
        cand[nc++] = base * pow(hi / base, 0.5);
    }
    int integral = strstr(s->help, "integer") != NULL ||
                   (lo == floor(lo) && hi == floor(hi) && def == floor(def) && hi >= 10);
    int k = 0;
    for (int i = 0; i < nc; i++) {
        float x = (float)(integral ? floor(cand[i] + 0.5) : cand[i]);
        if (x < s->min || x > s->max || x == s->def) continue;
        int dup = 0;
        for (int j = 0; j < k; j++)
            dup |= out[j] == x;
        if (!dup) out[k++] = x;
    }
    return k;
}

static void add_cfg(const AttnVariant* v, const AttnHParams* hp) {
    ASSERT(NCFG < MAX_CFG);
    CFG[NCFG].v = v;
    CFG[NCFG].hp = *hp;
    CFG[NCFG].nh = hp->n_head > 0 ? hp->n_head : NHEAD;
    CFG[NCFG].init_off = -1;
    NCFG++;
}

static void build_cfgs(void) {
    NCFG = 0;
    for (int i = 0; i < attn_count(); i++) {
        const AttnVariant* v = attn_get(i);
        if (!is_rowmap(v) || !test_variant_selected(v->name)) continue;
        int ncomb = 1;
        for (int k = 0; k < v->n_hparams; k++)
            if (v->hparams[k].choices) ncomb *= n_choices(v->hparams[k].choices);
        for (int c = 0; c < ncomb; c++) {
            AttnHParams hp;
            attn_hparams_default(&hp, v, T_TRAIN, NHEAD, HS, NHEAD * HS, 3);
            int rest = c;
            for (int k = 0; k < v->n_hparams; k++) {
                if (!v->hparams[k].choices) continue;
                int nk = n_choices(v->hparams[k].choices);
                hp.v[k] = (float)(rest % nk);
                rest /= nk;
            }
            add_cfg(v, &hp);
            for (int k = 0; k < v->n_hparams; k++) {
                if (v->hparams[k].choices) continue;
                float vals[8];
                int nv = sweep_values(&v->hparams[k], vals);
                for (int q = 0; q < nv; q++) {
                    AttnHParams h2 = hp;
                    h2.v[k] = vals[q];
                    add_cfg(v, &h2);
                }
            }
        }
        AttnHParams odd;
        attn_hparams_default(&odd, v, T_TRAIN, NHEAD_ODD, HS, NHEAD_ODD * HS, 3);
        add_cfg(v, &odd);
    }
}

static void* grow(void* p, size_t* cap, size_t need, size_t elem) {
    if (need <= *cap) return p;
    size_t c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    p = realloc(p, c * elem);
    ASSERT(p);
    *cap = c;
    return p;
}

// Forward of one row into a, with the case's context.
static void run_row(Case* k, real* a, const float* s32, const float* ksq32) {
    const Cfg* c = &CFG[k->cfg];
    size_t ns = c->v->scratch_floats ? c->v->scratch_floats(T_CALL) : 0;
    real* scratch = malloc((ns + 1) * sizeof(real));
    real* s = malloc(2 * (size_t)k->n * sizeof(real));
    ASSERT(scratch && s);
    real* ksq = s + k->n;
    for (int j = 0; j < k->n; j++) // exact in both builds
        s[j] = s32[j], ksq[j] = ksq32[j];
    AttnRowCtx ctx = {.hp = &c->hp,
                      .p = c->v->params_per_head ? k->p : NULL,
                      .scratch = scratch,
                      .key_sq = c->v->needs_key_sq ? ksq : NULL,
                      .t = k->n - 1,
                      .T = T_CALL,
                      .h = k->h,
                      .step = k->step,
                      .seed = 1234567,
                      .layer = k->layer};
    c->v->forward_row(a, s, k->n, &ctx);
    if (c->v->row_stat) k->stat = c->v->row_stat(a, s, k->n, &ctx);
    free(scratch);
    free(s);
}

static Case* new_case(int cfg, int n, Rng* r) {
    if (NCASE == CAPCASE) {
        CAPCASE = CAPCASE ? 2 * CAPCASE : 1024;
        CASES = realloc(CASES, (size_t)CAPCASE * sizeof(Case));
        ASSERT(CASES);
    }
    Case* k = &CASES[NCASE++];
    memset(k, 0, sizeof(*k));
    k->cfg = cfg;
    k->n = n;
    k->h = (int)rng_below(r, (uint64_t)CFG[cfg].nh);
    k->step = -1;
    k->off = NS_TOT;
    NS_TOT += (size_t)n;
    S = grow(S, &CAPS, NS_TOT, sizeof(float));
    size_t c2 = CAPS;
    (void)c2;
    KSQ = realloc(KSQ, CAPS * sizeof(float));
    A = realloc(A, CAPS * sizeof(real));
    ASSERT(KSQ && A);
    static const float SD[3] = {0.5f, 1.5f, 3.0f};
    float sd = SD[NCASE % 3];
    for (int j = 0; j < n; j++) {
        S[k->off + (size_t)j] = sd * rng_normal(r);
        KSQ[k->off + (size_t)j] = 3.0f * HS * rng_uniform(r);
    }
    if (n >= 2 && NCASE % 4 == 0) S[k->off + (size_t)n - 1] = S[k->off]; // a tie
    const AttnVariant* v = CFG[cfg].v;
    if (v->params_per_head) {
        if (v->init_params) v->init_params(k->p, &CFG[cfg].hp);
        for (int i = 0; i < v->params_per_head; i++) // rounded to float: the manifest's value
            k->p[i] = (float)(k->p[i] + 0.5f * rng_normal(r));
    }
    return k;
}

static void build_cases(void) {
    Rng r;
    rng_seed(&r, 20261201);
    NCASE = 0;
    NS_TOT = NDRAWS = NINIT = 0;
    for (int c = 0; c < NCFG; c++) {
        const AttnVariant* v = CFG[c].v;
        const AttnHParams* hp = &CFG[c].hp;
        if (v->params_per_head && v->init_params) {
            CFG[c].init_off = (int)NINIT;
            NINIT += (size_t)v->params_per_head;
            INIT_C = realloc(INIT_C, NINIT * sizeof(real));
            ASSERT(INIT_C);
            v->init_params(INIT_C + CFG[c].init_off, hp);
        }
        for (int i = 0; i < N_NS; i++) {
            Case* k = new_case(c, NS[i], &r);
            run_row(k, A + k->off, S + k->off, KSQ + k->off);
        }
        // quantized stochastic rounding at training steps (post, no renorm: unbiased per entry)
        if (hp_is_word(v, hp, "rounding", "stochastic") && hp_is_word(v, hp, "ste", "post") &&
            hp_is_word(v, hp, "renorm", "off")) {
            for (int n = 7; n <= 64; n += 57) {
                Case* k = new_case(c, n, &r);
                k->kind = K_STOCH;
                k->draws = NDRAWS;
                NDRAWS += (size_t)STOCH_STEPS * (size_t)n;
                DRAWS = grow(DRAWS, &CAPDRAWS, NDRAWS, sizeof(real));
                for (int st = 0; st < STOCH_STEPS; st++) {
                    k->step = st;
                    run_row(k, DRAWS + k->draws + (size_t)st * (size_t)n, S + k->off, KSQ + k->off);
                }
                memcpy(A + k->off, DRAWS + k->draws, (size_t)n * sizeof(real));
            }
        }
        // stochastic window at training steps: the observed support goes to the reference
        if (hp_is_word(v, hp, "window_mode", "stochastic")) {
            for (int st = 0; st < WSTOCH_STEPS; st++)
                for (int layer = 0; layer < 2; layer++)
                    for (int n = 64; n <= 300; n += 236) {
                        Case* k = new_case(c, n, &r);
                        k->kind = K_WSTOCH;
                        k->step = st;
                        k->layer = layer;
                        real* a = A + k->off;
                        run_row(k, a, S + k->off, KSQ + k->off);
                        int first = 0;
                        while (first < n && a[first] == 0.0f)
                            first++;
                        k->wobs = n - first;
                    }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// manifest, reference run, read back

static void write_hp(FILE* f, const AttnVariant* v, const AttnHParams* hp) {
    for (int i = 0; i < v->n_hparams; i++) {
        const AttnHParamSpec* s = &v->hparams[i];
        if (s->choices) {
            char w[64];
            choice_word(w, sizeof(w), s->choices, (int)hp->v[i]);
            fprintf(f, " hp.%s=%s", s->name, w);
        } else {
            fprintf(f, " hp.%s=%.17g", s->name, (double)hp->v[i]);
        }
    }
}

static void write_dims(FILE* f, int nh, int h) {
    fprintf(f, " Ttrain=%d NH=%d hs=%d C=%d h=%d", T_TRAIN, nh, HS, nh * HS, h);
}

static int write_batch(const char* dir) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/manifest.txt", dir);
    FILE* f = fopen(path, "w");
    if (!f) return -1;
    for (int i = 0; i < attn_count(); i++) {
        const AttnVariant* v = attn_get(i);
        if (!is_rowmap(v)) continue;
        for (int k = 0; k < v->n_hparams; k++) {
            const AttnHParamSpec* s = &v->hparams[k];
            char w[64];
            if (s->choices)
                choice_word(w, sizeof(w), s->choices, (int)s->def);
            else
                snprintf(w, sizeof(w), "%.9g", (double)s->def);
            fprintf(f, "spec variant=%s name=%s def=%s choices=%s\n", v->name, s->name, w,
                    s->choices ? s->choices : "-");
        }
    }
    for (int c = 0; c < NCFG; c++) {
        if (CFG[c].init_off < 0) continue;
        fprintf(f, "init variant=%s id=%d", CFG[c].v->name, c);
        write_dims(f, CFG[c].nh, 0);
        write_hp(f, CFG[c].v, &CFG[c].hp);
        fprintf(f, " P=%d\n", CFG[c].v->params_per_head);
    }
    static const char* KIND[3] = {"det", "stoch", "wstoch"};
    for (int i = 0; i < NCASE; i++) {
        const Case* k = &CASES[i];
        const Cfg* c = &CFG[k->cfg];
        fprintf(f, "case variant=%s id=%d n=%d T=%d step=%ld kind=%s stat=%d", c->v->name, i, k->n,
                T_CALL, k->step, KIND[k->kind], c->v->row_stat != NULL);
        write_dims(f, c->nh, k->h);
        if (k->kind == K_WSTOCH) fprintf(f, " wobs=%d", k->wobs);
        write_hp(f, c->v, &c->hp);
        if (c->v->params_per_head) {
            fprintf(f, " p=");
            for (int q = 0; q < c->v->params_per_head; q++)
                fprintf(f, "%s%.17g", q ? "," : "", (double)k->p[q]);
        }
        fprintf(f, " off=%zu\n", k->off);
    }
    if (fclose(f) != 0) return -1;
    const char* names[2] = {"s.f32", "ksq.f32"};
    const float* bufs[2] = {S, KSQ};
    for (int b = 0; b < 2; b++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[b]);
        FILE* g = fopen(path, "wb");
        if (!g || fwrite(bufs[b], sizeof(float), NS_TOT, g) != NS_TOT) return -1;
        if (fclose(g) != 0) return -1;
    }
    return 0;
}

static double* read_f64(const char* dir, const char* name, size_t want) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE* f = fopen(path, "rb");
    if (!f) return NULL;
    double* x = malloc((want + 1) * sizeof(double));
    size_t got = fread(x, sizeof(double), want + 1, f);
    fclose(f);
    if (got != want) {
        free(x);
        return NULL;
    }
    return x;
}

static void setup_batch(void) {
    SETUP_ERR[0] = STATUS[0] = '\0';
    if (access(PYTHON, X_OK) != 0 || system(PYTHON " -c 'import numpy' >/dev/null 2>&1") != 0) {
        snprintf(SETUP_ERR, sizeof(SETUP_ERR),
                 "%s with numpy is required for the row-map reference: apt-get install "
                 "python3-numpy",
                 PYTHON);
        return;
    }
    build_cfgs();
    build_cases();
    const char* dir = test_tmpdir();
    if (write_batch(dir) != 0) {
        snprintf(SETUP_ERR, sizeof(SETUP_ERR), "cannot write the batch into %s", dir);
        return;
    }
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "%s %s/tests/ref/ref_rowmaps.py %s", PYTHON, test_repo_root(), dir);
    int rc = system(cmd);
    if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
        snprintf(SETUP_ERR, sizeof(SETUP_ERR), "'%s' failed (status %d)", cmd, rc);
        return;
    }
    REF = read_f64(dir, "ref.f64", 3 * NS_TOT + 3 * (size_t)NCASE);
    INIT_REF = read_f64(dir, "init.f64", NINIT);
    char path[1024];
    snprintf(path, sizeof(path), "%s/status.txt", dir);
    FILE* f = fopen(path, "r");
    size_t got = f ? fread(STATUS, 1, sizeof(STATUS) - 1, f) : 0;
    STATUS[got] = '\0';
    if (f) fclose(f);
    if (!REF || !INIT_REF || !f) {
        snprintf(SETUP_ERR, sizeof(SETUP_ERR), "reference outputs in %s are missing or short", dir);
        return; // the batch stays for inspection
    }
    if (getenv("REF_ROWMAPS_KEEP")) {
        printf("batch kept in %s\n", dir);
        return;
    }
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", dir);
}

// reference block of case i: ref[n], lo[n], hi[n], then stat, stat_lo, stat_hi
static const double* case_ref(int i) {
    return REF + 3 * CASES[i].off + 3 * (size_t)i;
}

#define REQUIRE_BATCH() ck_assert_msg(SETUP_ERR[0] == '\0', "%s", SETUP_ERR)

// ---------------------------------------------------------------------------------------------
// tests

START_TEST(test_ref_python_numpy_present) {
    REQUIRE_BATCH();
    if (getenv("REF_ROWMAPS_VERBOSE"))
        printf("%d configurations, %d rows, %zu scores\n", NCFG, NCASE, NS_TOT);
    if (test_variant_selected("")) ck_assert_int_gt(NCASE, 1000); // unless a subset is selected
}
END_TEST

// Lines of STATUS starting with `tag`, joined into out.
static int status_lines(const char* tag, char* out, size_t cap) {
    int count = 0;
    out[0] = '\0';
    size_t tl = strlen(tag);
    for (const char* p = STATUS; *p;) {
        const char* e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > tl && strncmp(p, tag, tl) == 0 && p[tl] == ' ') {
            count++;
            size_t ol = strlen(out);
            if (ol + len + 3 < cap)
                snprintf(out + ol, cap - ol, "%s%.*s", ol ? "; " : "", (int)len, p);
        }
        p += len + (e != NULL);
    }
    return count;
}

START_TEST(test_ref_every_rowmap_has_reference) {
    REQUIRE_BATCH();
    char msg[4096];
    int k = status_lines("noref", msg, sizeof(msg));
    ck_assert_msg(k == 0, "registered row maps without a reference entry: %s", msg);
    k = status_lines("nohp", msg, sizeof(msg));
    ck_assert_msg(k == 0, "hyperparameters the reference does not know: %s", msg);
    k = status_lines("nostat", msg, sizeof(msg));
    ck_assert_msg(k == 0, "row statistics without a reference: %s", msg);
    k = status_lines("nparams", msg, sizeof(msg));
    ck_assert_msg(k == 0, "parameter counts differ: %s", msg);
}
END_TEST

START_TEST(test_ref_documented_defaults) {
    REQUIRE_BATCH();
    char msg[4096], msg2[4096];
    int k = status_lines("default", msg, sizeof(msg));
    int k2 = status_lines("choices", msg2, sizeof(msg2));
    ck_assert_msg(k == 0 && k2 == 0, "declared hyperparameters differ from the documented: %s %s",
                  msg, msg2);
}
END_TEST

START_TEST(test_ref_init_params) {
    REQUIRE_BATCH();
    int bad = 0, checked = 0;
    char first[512] = "";
    for (int c = 0; c < NCFG; c++) {
        if (CFG[c].init_off < 0) continue;
        for (int q = 0; q < CFG[c].v->params_per_head; q++) {
            double ref = INIT_REF[CFG[c].init_off + q];
            if (isnan(ref)) continue; // unused in this configuration
            double got = INIT_C[CFG[c].init_off + q];
            checked++;
            if (!(fabs(got - ref) <= 1e-6 * (1.0 + fabs(ref)))) {
                if (!bad++)
                    snprintf(first, sizeof(first), "%s param %s: init %.9g, documented %.9g",
                             CFG[c].v->name, CFG[c].v->param_names[q], got, ref);
            }
        }
    }
    if (test_variant_selected("")) ck_assert_int_gt(checked, 50); // unless a subset is selected
    ck_assert_msg(bad == 0, "%d init values differ; first: %s", bad, first);
}
END_TEST

static void cfg_label(char* out, size_t cap, const Cfg* c) {
    size_t l = (size_t)snprintf(out, cap, "%s", c->v->name);
    if (c->nh != NHEAD) l += (size_t)snprintf(out + l, cap - l, " NH=%d", c->nh);
    for (int i = 0; i < c->v->n_hparams && l < cap; i++) {
        const AttnHParamSpec* s = &c->v->hparams[i];
        if (s->choices) {
            char w[64];
            choice_word(w, sizeof(w), s->choices, (int)c->hp.v[i]);
            l += (size_t)snprintf(out + l, cap - l, " %s=%s", s->name, w);
        } else {
            l += (size_t)snprintf(out + l, cap - l, " %s=%g", s->name, (double)c->hp.v[i]);
        }
    }
}

// Entry j of case k against [lo, hi] widened by the tolerance at ref (row scale m).
static int entry_ok(double a, double ref, double lo, double hi, double m) {
    double tol = RTOL * fabs(ref) + ATOL * m + 1e-30;
    return isfinite(a) && isfinite(ref) && a >= lo - tol && a <= hi + tol;
}

static double row_scale(const double* ref, int n) {
    double m = 0;
    for (int j = 0; j < n; j++)
        m = fmax(m, fabs(ref[j]));
    return m;
}

// The deterministic forward of every case of the row map with registry index _i.
START_TEST(test_ref_forward) {
    REQUIRE_BATCH();
    const AttnVariant* v = attn_get(_i);
    if (!test_variant_selected(v->name)) return; // ATTNLAB_TEST_VARIANTS (scripts/mutate)
    if (!is_rowmap(v)) return; // layer-level variants have their own reference suite
    int cases = 0, bad = 0;
    double worst = 0;
    char first[1024] = "";
    for (int i = 0; i < NCASE; i++) {
        const Case* k = &CASES[i];
        if (CFG[k->cfg].v != v || k->kind == K_STOCH) continue;
        cases++;
        const double* ref = case_ref(i);
        const double *lo = ref + k->n, *hi = ref + 2 * k->n;
        const real* a = A + k->off;
        double m = row_scale(ref, k->n);
        for (int j = 0; j < k->n; j++) {
            double e = fabs(a[j] - ref[j]) / (RTOL * fabs(ref[j]) + ATOL * m + 1e-30);
            if (e > worst && lo[j] == hi[j]) worst = e;
            if (entry_ok(a[j], ref[j], lo[j], hi[j], m)) continue;
            if (!bad++) {
                char lab[512];
                cfg_label(lab, sizeof(lab), &CFG[k->cfg]);
                snprintf(first, sizeof(first),
                         "[%s] n=%d T=%d h=%d step=%ld j=%d: a=%.9g ref=%.9g (lo %.9g hi %.9g)",
                         lab, k->n, T_CALL, k->h, k->step, j, (double)a[j], ref[j], lo[j], hi[j]);
            }
        }
    }
    if (getenv("REF_ROWMAPS_VERBOSE"))
        printf("%-12s %5d rows, worst |a-ref|/tol = %.3g\n", v->name, cases, worst);
    ck_assert_msg(cases >= N_NS, "%s: only %d cases", v->name, cases);
    ck_assert_msg(bad == 0, "%s: %d entries differ from the float64 reference; first: %s", v->name,
                  bad, first);
}
END_TEST

// The row statistic (credal uncertainty n/S; entmax/sparsemax support fraction) of every
// deterministic case of a variant that declares one.
START_TEST(test_ref_row_stat) {
    REQUIRE_BATCH();
    int checked = 0, bad = 0;
    char first[768] = "";
    for (int i = 0; i < NCASE; i++) {
        const Case* k = &CASES[i];
        const AttnVariant* v = CFG[k->cfg].v;
        if (!v->row_stat || k->kind != K_DET) continue;
        const double* st = case_ref(i) + 3 * k->n;
        checked++;
        double tol = RTOL * fabs(st[0]) + 1e-7;
        if (isfinite(st[0]) && k->stat >= st[1] - tol && k->stat <= st[2] + tol) continue;
        if (!bad++) {
            char lab[512];
            cfg_label(lab, sizeof(lab), &CFG[k->cfg]);
            snprintf(first, sizeof(first), "[%s] n=%d: %s = %.9g, reference %.9g [%.9g, %.9g]", lab,
                     k->n, v->row_stat_name, (double)k->stat, st[0], st[1], st[2]);
        }
    }
    if (test_variant_selected("")) ck_assert_int_gt(checked, 50); // unless a subset is selected
    ck_assert_msg(bad == 0, "%d row statistics differ; first: %s", bad, first);
}
END_TEST

// quantized, rounding = stochastic at training steps: every draw is a grid neighbour of p, and
// the mean over STOCH_STEPS draws is p within 5 standard errors (unbiased rounding).
START_TEST(test_ref_quantized_stochastic_unbiased) {
    REQUIRE_BATCH();
    int cases = 0;
    for (int i = 0; i < NCASE; i++) {
        const Case* k = &CASES[i];
        if (k->kind != K_STOCH) continue;
        cases++;
        const double* ref = case_ref(i);
        const double *lo = ref + k->n, *hi = ref + 2 * k->n;
        char lab[512];
        cfg_label(lab, sizeof(lab), &CFG[k->cfg]);
        for (int j = 0; j < k->n; j++) {
            double sum = 0, tol = 1e-6 * fmax(1.0, hi[j]);
            int nlo = 0;
            for (int st = 0; st < STOCH_STEPS; st++) {
                double a = DRAWS[k->draws + (size_t)st * (size_t)k->n + (size_t)j];
                int on_lo = fabs(a - lo[j]) <= tol, on_hi = fabs(a - hi[j]) <= tol;
                ck_assert_msg(on_lo || on_hi,
                              "[%s] n=%d step %d j=%d: draw %.9g is not %.9g or %.9g", lab, k->n,
                              st, j, a, lo[j], hi[j]);
                nlo += on_lo && !on_hi;
                sum += a;
            }
            double mean = sum / STOCH_STEPS, gap = hi[j] - lo[j];
            double f = gap > 0 ? (ref[j] - lo[j]) / gap : 0.0; // P(round up)
            double se = gap * sqrt(f * (1.0 - f) / STOCH_STEPS);
            // + 2 draws' worth: for a rare round-up (N f << 1) the count is Poisson, not normal
            ck_assert_msg(fabs(mean - ref[j]) <= 5.0 * se + 2.0 * gap / STOCH_STEPS + 1e-6,
                          "[%s] n=%d j=%d: mean of %d draws %.9g, p = %.9g (5 se = %.3g)", lab,
                          k->n, j, STOCH_STEPS, mean, ref[j], 5.0 * se);
            (void)nlo;
        }
    }
    if (test_variant_selected("")) ck_assert_int_ge(cases, 4); // both grids, n = 7 and 64
}
END_TEST

static void batch_fixture(void) {
    setup_batch();
}

static Suite* ref_rowmaps_suite(void) {
    Suite* s = suite_create(SUITE_NAME);
    TCase* tc = tcase_create("reference");
    tcase_add_unchecked_fixture(tc, batch_fixture, NULL);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ref_python_numpy_present);
    tcase_add_test(tc, test_ref_every_rowmap_has_reference);
    tcase_add_test(tc, test_ref_documented_defaults);
    tcase_add_test(tc, test_ref_init_params);
    tcase_add_loop_test(tc, test_ref_forward, 0, attn_count());
    tcase_add_test(tc, test_ref_row_stat);
    tcase_add_test(tc, test_ref_quantized_stochastic_unbiased);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(ref_rowmaps_suite)
