// tests/attn64_cfg.c: configurations and finite-difference check of the double-precision
// attention suites (see attn64_cfg.h).
#include "tests/attn64_cfg.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"

// inner row maps of the layer-level variants: plain, with per-head parameters, sparse
const char* const ATTN64_INNERS[ATTN64_N_INNER] = {"softmax", "ssmax", "sparsemax"};

uint64_t attn64_seed(const char* label) {
    uint64_t h = 1469598103934665603ULL;
    for (const char* p = label; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h;
}

static int n_choices(const AttnHParamSpec* s) {
    int n = 1;
    for (const char* p = s->choices; *p; p++)
        n += *p == '|';
    return n;
}

static void add(Attn64Cfg* out, int* n, const AttnVariant* v, const AttnHParams* hp, int inner,
                const char* what) {
    ASSERT(*n < ATTN64_MAX_CFG);
    Attn64Cfg* c = &out[(*n)++];
    c->v = v;
    c->hp = *hp;
    if (v->layer_forward) {
        c->hp.inner = attn_lookup(ATTN64_INNERS[inner % ATTN64_N_INNER]);
        ASSERT(c->hp.inner);
        snprintf(c->label, sizeof(c->label), "%s%s[inner=%s]", v->name, what, c->hp.inner->name);
    } else {
        snprintf(c->label, sizeof(c->label), "%s%s", v->name, what);
    }
}

// the sweep values of numeric hyperparameter s (see the header); returns the count
static int sweep_values(const AttnHParamSpec* s, float* out) {
    double lo = s->min, def = s->def;
    double hi = fmin((double)s->max, fmax(4.0 * fabs(def), def + 10.0));
    int integer = strstr(s->help, "integer") != NULL;
    int n = 0;
    const double frac[3] = {0.1, 0.5, 1.0};
    for (int k = 0; k < 3; k++) {
        double x = lo + frac[k] * (hi - lo);
        if (integer) x = rint(x);
        out[n++] = (float)x;
    }
    if (lo >= 1.0 && s->max >= 1000.0f) out[n++] = (float)(lo + 2.0);
    if (integer && lo == 0.0) { // a 0 that switches a mode (attn.chunk = 0: recurrent), and 1
        out[n++] = 0.0f;
        out[n++] = 1.0f;
    }
    return n;
}

// Settings that only act together (a key that takes effect under another key's value), one
// configuration each on top of the one-key-at-a-time sweeps.
static const struct {
    const char* variant;
    const char* settings;
} COMBOS[] = {
    {"linear", "feature=identity norm=subtract"},
    {"linear", "feature=identity norm=subtract inline_scale=paper"},
    {"linear", "norm=subtract inline_scale=paper"},
    {"linear", "feature=flatten flatten_norm=head"},
    {"linear", "feature=cottention cos_stab=row"},
    {"linear", "feature=cottention norm=subtract"},
    {"deltanet", "o_norm=gated"},
    {"deltanet", "o_norm=gated chunk=0"},
    {"deltanet", "o_norm=none q_scale=one"},
    {"gated_deltanet", "o_norm=rms"},
    {"gated_deltanet", "o_norm=none"},
};

static void add_combos(Attn64Cfg* out, int* n, const AttnVariant* v, const AttnHParams* base) {
    for (size_t q = 0; q < sizeof(COMBOS) / sizeof(COMBOS[0]); q++) {
        if (strcmp(COMBOS[q].variant, v->name) != 0) continue;
        AttnHParams hp = *base;
        char buf[160], err[256], what[176];
        util_strlcpy(buf, COMBOS[q].settings, sizeof(buf));
        for (char* tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
            char* eq = strchr(tok, '=');
            ASSERT(eq);
            *eq = '\0';
            if (attn_hparams_set(&hp, v, tok, eq + 1, err, sizeof(err)) != 0)
                ck_abort_msg("%s: %s", v->name, err);
        }
        snprintf(what, sizeof(what), "[%s]", COMBOS[q].settings);
        add(out, n, v, &hp, 0, what);
    }
}

int attn64_cfgs(Attn64Cfg* out, const AttnVariant* v, int T_train, int NH, int hs) {
    int n = 0;
    const int layer = v->layer_forward != NULL;
    // a layer-level variant that never runs attn.inner is checked around one inner map only
    const int ninner = layer && !v->ignores_inner ? ATTN64_N_INNER : 1;
    AttnHParams base;
    attn_hparams_default(&base, v, T_train, NH, hs, NH * hs, 2);
    for (int in = 0; in < (layer ? ninner : 1); in++)
        add(out, &n, v, &base, in, "");
    // and once around an inner map that reads the key norms (keynorm: the driver, selective and
    // talking_heads keep key-norm scratch and a key-gradient path only for such maps); diff
    // refuses one at setup by design
    if (layer && !v->ignores_inner && strcmp(v->name, "diff") != 0) {
        add(out, &n, v, &base, 0, "");
        out[n - 1].hp.inner = attn_lookup("keynorm");
        ASSERT(out[n - 1].hp.inner);
        snprintf(out[n - 1].label, sizeof(out[n - 1].label), "%s[inner=keynorm]", v->name);
    }
    for (int k = 0; k < v->n_hparams; k++) {
        const AttnHParamSpec* s = &v->hparams[k];
        char what[96];
        if (s->choices) {
            for (int c = 0; c < n_choices(s); c++) {
                if (c == (int)s->def) continue;
                AttnHParams hp = base;
                hp.v[k] = (float)c;
                snprintf(what, sizeof(what), "[%s=%d]", s->name, c);
                for (int in = 0; in < ninner; in++)
                    add(out, &n, v, &hp, in, what);
            }
        } else {
            float vals[6];
            int nv = sweep_values(s, vals);
            for (int q = 0; q < nv; q++) {
                if (vals[q] == s->def) continue;
                AttnHParams hp = base;
                hp.v[k] = vals[q];
                snprintf(what, sizeof(what), "[%s=%g]", s->name, (double)vals[q]);
                add(out, &n, v, &hp, v->ignores_inner ? 0 : n, what);
            }
        }
    }
    add_combos(out, &n, v, &base);
    return n;
}

real attn64_max_abs(const real* x, size_t n) {
    real m = 0;
    for (size_t i = 0; i < n; i++)
        if (real_fabs(x[i]) > m) m = real_fabs(x[i]);
    return m;
}

// 4-point central difference of f in *x with step h
static double fd4(Attn64Loss f, void* ctx, real* x, double h) {
    const real x0 = *x;
    const double off[4] = {-2, -1, 1, 2};
    double v[4];
    for (int k = 0; k < 4; k++) {
        *x = (real)((double)x0 + off[k] * h);
        v[k] = f(ctx);
    }
    *x = x0;
    return (v[0] - 8 * v[1] + 8 * v[2] - v[3]) / (12 * h);
}

Attn64Count attn64_check(Attn64Loss f, void* ctx, real* x, const real* g, size_t n, double gmax,
                         double lmag, const char* label, const char* what) {
    const double h1 = 1e-4, h2 = 5e-5;
    // rounding noise of a 4-point estimate: ~18/12 ulp of the loss's terms over h
    const double noise = 4e-15 * lmag / h2;
    const double atol = 1e-9 * gmax + noise;
    Attn64Count c = {0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        double d1 = fd4(f, ctx, &x[i], h1);
        double d2 = fd4(f, ctx, &x[i], h2);
        double ana = (double)g[i];
        if (ana == 0.0 && d1 == 0.0 && d2 == 0.0) {
            c.unused++;
            continue;
        }
        if (fabs(d1 - d2) > 2e-7 * (fabs(d1) + fabs(d2)) + atol) {
            c.kinks++; // a kink within 2 h1 of x[i]
            continue;
        }
        double diff = fabs(d2 - ana), allowed = 1e-6 * (fabs(d2) + fabs(ana)) + atol;
        ck_assert_msg(diff <= allowed,
                      "%s: d%s[%zu] analytic %.12g vs numeric %.12g (|diff| %.3g > %.3g, rel %.3g)",
                      label, what, i, ana, d2, diff, allowed,
                      diff / (fabs(d2) + fabs(ana) + 1e-300));
        c.checked++;
    }
    return c;
}
