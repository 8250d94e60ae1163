// tests/gradcheck_model.c: the model-level finite-difference check of gradcheck_model.h.
//
// Float noise and the tolerance. The model runs in float; the loss L is the mean of B*T float
// per-position losses, summed in double. Its rounding noise delta was measured on these tiny
// models (MGC_NOISEPROBE=1: L under one-ulp changes of single weights, far too small to move
// it): rms 2e-8 .. 4.5e-8, max 1.6e-7 over every variant (losses ~ 4.5; one float ulp of 4.5 is
// 4.8e-7, and the mean over 18 positions averages the per-position rounding). The 4-point
// stencil (f(-2h) - 8 f(-h) + 8 f(h) - f(2h)) / 12h turns independent errors delta into
// sqrt(1 + 64 + 64 + 1) / 12 delta / h = 0.95 delta / h; its truncation error h^4 |f^(5)| / 30
// is negligible on O(1) activations at the steps used (h = 1e-2 for single entries, 5e-2 along
// unit directions). Each check allows
//     |num - ana| <= MGC_RTOL (|num| + |ana|) + MGC_NOISE / h,  MGC_RTOL = 2e-2,
//     MGC_NOISE = 2e-7 (above the largest delta measured, 5x the rms),
// and a slice's (or a per-head parameter's) directional derivative counts as checked only when
// |num| >= MGC_SIGNAL MGC_NOISE / h with MGC_SIGNAL = 20: there an analytic value off by more
// than 0.04 + 1/20 = 9% fails, so a dropped gradient, a batch reduction over one item (about
// half the gradient) or a missing layer cannot hide in the noise. The direction for the signal
// is the analytic gradient's own plus half a random unit vector (signal >= |g|/3; a random
// direction alone carries only rms(g)); a purely random direction over the slice is checked
// too, and sampled single entries.
// Kinks (relu, sparse supports, clips, hinges: the many scores of a tiny model move together
// along a direction) make the difference quotient wrong at large steps; on a mismatch the step
// shrinks by 4, up to 5 times, with the noise allowance and the signal bar growing as 1/h. A
// wrong gradient does not shrink with h and still fails (MGC_LADDER=1 prints the quotient as
// h -> 0 for a failing check). Sensitivity here is about coverage (every tensor, layer, head,
// batch item); the 0.5%-per-entry sensitivity lives in the kernel-level suites.
#include "tests/gradcheck_model.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "model/gpt2.h"
#include "tests/testutil.h"

#define MGC_B       2
#define MGC_H       1e-2 // single entries
#define MGC_HDIR    5e-2 // directions (unit vectors over a slice)
#define MGC_RTOL    2e-2
#define MGC_NOISE   2e-7
#define MGC_SIGNAL  20.0
#define MGC_SAMPLE  2 // single entries per GPT-2 tensor slice (variant tensors <= 64: all)
#define MGC_SHRINKS 5 // step shrinks by 4 on a mismatch (kinks), signal bar scaled to match

typedef struct {
    GPT2* m;
    int in[MGC_B * 64], tg[MGC_B * 64];
    int B, T;
} Net;

static double net_loss(Net* n) {
    gpt2_forward(n->m, n->in, n->tg, n->B, n->T);
    // the objective the backward differentiates: cross-entropy plus z_loss (log Z)^2 per token
    const double z = n->m->cfg.z_loss;
    double s = 0;
    for (int i = 0; i < n->B * n->T; i++)
        s += n->m->losses[i] + z * (double)n->m->lse[i] * (double)n->m->lse[i];
    return s / (n->B * n->T);
}

// 4-point central difference of the loss along u (len floats at x), step h.
static double fd_dir(Net* n, float* x, const float* u, size_t len, double h) {
    float* x0 = allocFloats(len);
    memcpy(x0, x, sizeof(float) * len);
    const double off[4] = {-2, -1, 1, 2};
    double f[4];
    for (int k = 0; k < 4; k++) {
        for (size_t i = 0; i < len; i++)
            x[i] = (float)((double)x0[i] + off[k] * h * u[i]);
        f[k] = net_loss(n);
    }
    memcpy(x, x0, sizeof(float) * len);
    free(x0);
    return (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h);
}

static int close_enough(double num, double ana, double h) {
    return fabs(num - ana) <= MGC_RTOL * (fabs(num) + fabs(ana)) + MGC_NOISE / h;
}

// Directional (u over the slice) or single-entry (u = e_i) check. On a mismatch the step is
// shrunk by 4, up to MGC_SHRINKS times, with the noise allowance growing to match: kinks inside the
// stencil (relu, sparse supports, clips: the many scores of a tiny model move together under a
// direction over a whole slice) leave the smaller stencils, a wrong gradient does not shrink.
// Returns the number of shrinks for a pass (0..MGC_SHRINKS), -1 for a fail; *num_out, *h_out at the
// last step tried.
static int check_dir(Net* n, float* x, const float* u, size_t len, double ana, double* num_out,
                     double* h_out, double h0) {
    double h = h0;
    for (int k = 0; k <= MGC_SHRINKS; k++, h /= 4) {
        double num = fd_dir(n, x, u, len, h);
        *num_out = num, *h_out = h;
        if (close_enough(num, ana, h)) return k;
    }
    if (getenv("MGC_LADDER")) { // diagnosis: the difference quotient as h -> 0
        for (double hh = h0; hh > 1e-6; hh /= 4)
            fprintf(stderr, "  h %.3g: numeric %.9g (analytic %.9g, noise %.2g)\n", hh,
                    fd_dir(n, x, u, len, hh), ana, MGC_NOISE / hh);
    }
    return -1;
}

void mgc_tiny_config(Config* c) {
    config_defaults(c);
    c->n_layer = 2;
    c->n_head = 2;
    c->n_embd = 16;
    c->block_size = 9; // = T: every wpe row is read
    c->seq_len = 9;
    c->vocab_size = 64;
    c->batch_size = MGC_B;
}

static int si_is_attnp(const GPT2* m, int i) {
    return i == m->row_spec[P_ATTNP];
}

// Every parameter away from its init, at scales that give O(1) activations, attention scores
// of std ~1 (so rows are far from uniform) and O(1) logits at C = 16.
static void perturb(GPT2* m, Rng* r) {
    const float wstd = 1.0f / sqrtf((float)m->cfg.n_embd);
    for (int i = 0; i < m->nspecs; i++) {
        const ParamSpec* s = &m->specs[i];
        float* p = m->params + s->offset;
        size_t n = s->size;
        if (i == P_WTE) n = (size_t)m->cfg.vocab_size * m->cfg.n_embd; // padded rows stay 0
        for (size_t k = 0; k < n; k++) {
            float z = rng_normal(r);
            if (si_is_attnp(m, i))
                p[k] += 0.3f * z; // per-head scalars (raw parameters: any real value is valid)
            else if (s->variant_owned)
                p[k] += 0.1f * z;
            else if (i == P_LN1W || i == P_LN2W || i == P_LNFW)
                p[k] = 1.0f + 0.1f * z;
            else if (s->row == P_QKNORM_Q || s->row == P_QKNORM_K)
                p[k] = 1.0f + 0.3f * z; // qk-norm gains: around 1, not a bias's 0
            else if (s->ndim == 1 || (s->stacked && s->ndim == 2))
                p[k] = 0.1f * z; // biases, LayerNorm shifts
            else
                p[k] = wstd * z; // matrices (wte, wpe included)
        }
    }
}

// Which (layer, attnp entry) the model reads: entries below the layer's row-map P.
static int attnp_used(const GPT2* m, int l, int k) {
    return k < m->la[l].row->params_per_head;
}

// Is spec si a tensor of layer l's variant?
static int tensor_in_layer(const GPT2* m, int si, int l) {
    if (si == m->row_spec[P_FIRE])
        return 1; // pos_encoding = fire: every layer reads its FIRE vector
    for (int k = 0; k < m->la[l].ntensors; k++)
        if (m->la[l].tensor_spec[k] == si) return 1;
    return 0;
}

static const MgcUnused* find_unused(const MgcUnused* u, int nu, const char* tensor, int param,
                                    int l) {
    for (int i = 0; i < nu; i++)
        if (strcmp(u[i].tensor, tensor) == 0 && (u[i].param < 0 || u[i].param == param) &&
            (u[i].layer < 0 || u[i].layer == l))
            return &u[i];
    return NULL;
}

static int all_zero(const float* g, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (g[i] != 0.0f) return 0;
    return 1;
}

// Directional check of one slice (x, g: len floats) plus `sample` entries (all if sample < 0;
// sample 0: all if len <= 64, else MGC_SAMPLE).
// `name` labels messages; returns 1 if the slice carried signal, 0 if it is a candidate unused
// slice (exact zero gradient, no numeric signal), 2 if its nonzero gradient agrees with the
// numeric one but is below the signal bar (the tensor must then carry signal in another layer).
static int check_slice(Net* n, const char* label, const char* name, int l, float* x, const float* g,
                       size_t len, int sample, Rng* r, MgcReport* rep) {
    float* u = allocFloats(len);
    float* xi = allocFloats(len);
    double nx = 0, ng = 0, num, h;
    for (size_t i = 0; i < len; i++) {
        xi[i] = rng_normal(r);
        nx += (double)xi[i] * xi[i];
        ng += (double)g[i] * g[i];
    }
    nx = sqrt(nx), ng = sqrt(ng);
    // 1: a random unit direction over the whole slice
    double ana = 0;
    for (size_t i = 0; i < len; i++) {
        u[i] = (float)(xi[i] / nx);
        ana += (double)g[i] * u[i];
    }
    int rc = check_dir(n, x, u, len, ana, &num, &h, MGC_HDIR);
    ck_assert_msg(rc >= 0, "%s: %s layer %d: random direction: analytic %.6g vs numeric %.6g",
                  label, name, l, ana, num);
    rep->retries += rc;
    // 2: the gradient's own direction plus half a random one: carries signal >= |g| / 3 (a
    // random direction alone carries only rms(g)); the slice must carry signal here
    double nu = 0;
    ana = 0;
    for (size_t i = 0; i < len; i++) {
        u[i] = (float)(0.5 * xi[i] / nx + (ng > 0 ? g[i] / ng : 0.0));
        nu += (double)u[i] * u[i];
    }
    for (size_t i = 0; i < len; i++) {
        u[i] = (float)(u[i] / sqrt(nu));
        ana += (double)g[i] * u[i];
    }
    rc = check_dir(n, x, u, len, ana, &num, &h, MGC_HDIR);
    int signal = fabs(num) >= MGC_SIGNAL * MGC_NOISE / h;
    // a weak but nonzero gradient: larger steps lower the noise floor MGC_NOISE / h (the
    // stencil's truncation error is still inside the check's relative tolerance)
    for (double hh = 4 * MGC_HDIR; !signal && ng > 0 && rc >= 0 && hh <= 16 * MGC_HDIR; hh *= 4) {
        rc = check_dir(n, x, u, len, ana, &num, &h, hh);
        signal = fabs(num) >= MGC_SIGNAL * MGC_NOISE / h;
    }
    if (!signal && ng == 0) {
        free(u);
        free(xi);
        return 0;
    }
    ck_assert_msg(rc >= 0, "%s: %s layer %d: gradient direction: analytic %.6g vs numeric %.6g",
                  label, name, l, ana, num);
    if (!signal) { // agrees, but too weak to be a check here: another layer must carry signal
        rep->weak++;
        free(u);
        free(xi);
        return 2;
    }
    rep->slices_checked++;
    rep->retries += rc;
    // single entries: all of a small slice of a variant, else a random sample
    int all = sample < 0 || (sample == 0 && len <= 64);
    if (sample == 0 && !all) sample = MGC_SAMPLE;
    size_t ns = all ? len : (size_t)sample;
    for (size_t q = 0; q < ns; q++) {
        size_t i = all ? q : (size_t)rng_below(r, (uint64_t)len);
        memset(u, 0, sizeof(float) * len);
        u[i] = 1.0f;
        rc = check_dir(n, x, u, len, g[i], &num, &h, MGC_H);
        ck_assert_msg(rc >= 0, "%s: %s layer %d entry %zu: analytic %.6g vs numeric %.6g", label,
                      name, l, i, (double)g[i], num);
        rep->entries_checked++;
        rep->retries += rc;
    }
    free(u);
    free(xi);
    return 1;
}

MgcReport mgc_check(const Config* c, const char* label, const MgcUnused* unused, int nunused,
                    uint64_t seed) {
    MgcReport rep = {0};
    char err[1024];
    GPT2 m;
    memset(&m, 0, sizeof(m));
    ck_assert_msg(gpt2_setup_attention(&m, c, err, sizeof(err)) == 0, "%s: %s", label, err);
    GPT2Config gc;
    ck_assert_msg(gpt2_config_from(&gc, c, err, sizeof(err)) == 0, "%s: %s", label, err);
    // straight-through variants: check the backward against the surrogate it declares, by
    // running that surrogate as the forward (the model reads la->v and la->row per call)
    static AttnVariant st[GPT2_MAX_LAYERS][2];
    for (int l = 0; l < c->n_layer; l++) {
        const AttnVariant** vp[2] = {&m.la[l].v, &m.la[l].row};
        for (int k = 0; k < 2; k++) {
            if (!(*vp[k])->surrogate_row) continue;
            st[l][k] = **vp[k];
            st[l][k].forward_row = st[l][k].surrogate_row;
            *vp[k] = &st[l][k];
        }
    }
    const int T = c->seq_len, L = c->n_layer;
    ck_assert(T <= 64);
    gpt2_build(&m, &gc);
    gpt2_init(&m, seed);
    gpt2_alloc_acts(&m, MGC_B, T, omp_get_max_threads());
    m.step = 3; // the training path (stochastic variants draw from (seed, step, layer))
    m.seed = seed;
    Rng r;
    rng_seed(&r, seed * 7919 + 1);
    perturb(&m, &r);
    Net n = {.m = &m, .B = MGC_B, .T = T};
    for (int i = 0; i < MGC_B * T; i++) {
        n.in[i] = (int)rng_below(&r, (uint64_t)c->vocab_size);
        n.tg[i] = (int)rng_below(&r, (uint64_t)c->vocab_size);
    }
    // batch items differ (else a reduction over item 0 only could pass as 2 x item 0 / 2)
    ck_assert(memcmp(n.in, n.in + T, sizeof(int) * T) != 0);
    net_loss(&n);
    gpt2_zero_grad(&m);
    gpt2_backward(&m, 1.0f);
    if (getenv("MGC_NOISEPROBE")) {
        // loss scatter under perturbations far too small to move it: delta
        float* x = m.params + m.specs[P_QKVW].offset;
        double f0 = net_loss(&n), mx = 0, ss = 0;
        for (int k = 0; k < 40; k++) {
            size_t i = (size_t)rng_below(&r, m.specs[P_QKVW].size);
            float x0 = x[i];
            x[i] = nextafterf(x0, 2.0f * x0);
            double d = net_loss(&n) - f0;
            x[i] = x0;
            if (fabs(d) > mx) mx = fabs(d);
            ss += d * d;
        }
        fprintf(stderr, "%s: loss %.6f delta max %.3g rms %.3g\n", label, f0, mx, sqrt(ss / 40));
    }
    float* G = allocFloats(m.num_params);
    memcpy(G, m.grads, sizeof(float) * m.num_params);
    int psig[ATTN_MAX_PPH] = {0}, pweak[ATTN_MAX_PPH] = {0}; // attnp: layers with signal, weak
    for (int si = 0; si < m.nspecs; si++) {
        const ParamSpec* s = &m.specs[si];
        if (s->size == 0) continue; // ln_2 and the MLP of an attention-only model (mlp = 0)
        int nl = s->stacked ? L : 1;
        int tsig = 0, tweak = 0; // layers of this tensor with signal, and too weak to check
        size_t per = s->size / (size_t)nl;
        for (int l = 0; l < nl; l++) {
            float* x = gpt2_tensor(&m, m.params, si, l);
            const float* g = G + (gpt2_tensor(&m, m.params, si, l) - m.params);
            char name[96];
            if (si == P_WTE) {
                size_t nreal = (size_t)c->vocab_size * gc.n_embd;
                ck_assert_msg(all_zero(g + nreal, per - nreal), "%s: wte padded rows", label);
                rep.zero_checks++;
                per = nreal;
            }
            if (si == P_WPE && gc.pos_encoding != ATTN_POS_LEARNED) {
                ck_assert_msg(all_zero(g, per), "%s: wpe is not read without learned positions",
                              label);
                rep.zero_checks++;
                continue;
            }
            if (s->variant_owned && si != m.row_spec[P_ATTNP] && !tensor_in_layer(&m, si, l)) {
                ck_assert_msg(all_zero(g, per), "%s: %s layer %d: layer does not use it", label,
                              s->name, l);
                rep.zero_checks++;
                continue;
            }
            if (si == m.row_spec[P_ATTNP]) {
                // every used entry on its own (each head, each parameter), then one random
                // direction over all used entries of the layer
                const int NH = gc.n_head, mp = m.maxP;
                ck_assert(NH <= 64);
                int used_any = 0, listed = 0;
                for (int k = 0; k < mp; k++) {
                    float gs[64];
                    if (!attnp_used(&m, l, k)) {
                        for (int h = 0; h < NH; h++)
                            gs[h] = g[(size_t)h * mp + k];
                        ck_assert_msg(all_zero(gs, (size_t)NH),
                                      "%s: attnp layer %d param %d: beyond the layer's row map "
                                      "(P = %d), gradient must be 0 (stride plumbing)",
                                      label, l, k, m.la[l].row->params_per_head);
                        rep.zero_checks++;
                        continue;
                    }
                    snprintf(name, sizeof(name), "attnp[%s]",
                             m.la[l].row->param_names ? m.la[l].row->param_names[k] : "?");
                    // each head's entry on its own
                    float* u = allocFloats(per);
                    double gn = 0;
                    for (int h = 0; h < NH; h++) {
                        size_t i = (size_t)h * mp + k;
                        gn += (double)g[i] * g[i];
                        memset(u, 0, sizeof(float) * per);
                        u[i] = 1.0f;
                        double num, hh;
                        int rc = check_dir(&n, x, u, per, g[i], &num, &hh, MGC_H);
                        ck_assert_msg(rc >= 0,
                                      "%s: %s layer %d head %d: analytic %.6g vs numeric %.6g",
                                      label, name, l, h, (double)g[i], num);
                        rep.entries_checked++;
                        rep.retries += rc;
                    }
                    // parameter k over all heads: its gradient direction plus half a random one
                    // (signal >= |g_k| / 3); it must carry signal unless listed unused
                    double nu = 0, ana = 0, num, hh;
                    memset(u, 0, sizeof(float) * per);
                    for (int h = 0; h < NH; h++) {
                        size_t i = (size_t)h * mp + k;
                        u[i] = rng_normal(&r);
                        nu += (double)u[i] * u[i];
                    }
                    double nv = 0;
                    for (int h = 0; h < NH; h++) {
                        size_t i = (size_t)h * mp + k;
                        u[i] = (float)(0.5 * u[i] / sqrt(nu) + (gn > 0 ? g[i] / sqrt(gn) : 0.0));
                        nv += (double)u[i] * u[i];
                    }
                    for (int h = 0; h < NH; h++) {
                        size_t i = (size_t)h * mp + k;
                        u[i] = (float)(u[i] / sqrt(nv));
                        ana += (double)g[i] * u[i];
                    }
                    int rc = check_dir(&n, x, u, per, ana, &num, &hh, MGC_HDIR);
                    int any = fabs(num) >= MGC_SIGNAL * MGC_NOISE / hh;
                    free(u);
                    if (any || gn > 0) {
                        ck_assert_msg(rc >= 0,
                                      "%s: %s layer %d: over the heads: analytic %.6g vs numeric "
                                      "%.6g",
                                      label, name, l, ana, num);
                        rep.retries += rc;
                    }
                    const MgcUnused* why = find_unused(unused, nunused, "attnp", k, l);
                    if (any) {
                        ck_assert_msg(!why, "%s: %s layer %d is listed unused (%s) but has signal",
                                      label, name, l, why ? why->why : "");
                        rep.slices_checked++;
                        psig[k]++;
                    } else if (gn > 0) {
                        // agrees, but below the signal bar (e.g. a threshold few scores cross):
                        // the parameter must then carry signal in another layer (checked below)
                        ck_assert_msg(!why,
                                      "%s: %s layer %d is listed unused (%s) but has a gradient",
                                      label, name, l, why ? why->why : "");
                        rep.weak++;
                        pweak[k]++;
                    } else {
                        ck_assert_msg(why != NULL,
                                      "%s: %s layer %d: gradient 0 and no signal over the "
                                      "heads; the parameter would go unchecked",
                                      label, name, l);
                        rep.unused++;
                    }
                    used_any += any > 0;
                }
                for (int k = 0; k < m.la[l].row->params_per_head; k++)
                    listed += find_unused(unused, nunused, "attnp", k, l) != NULL;
                ck_assert_msg(used_any > 0 || listed == m.la[l].row->params_per_head,
                              "%s: attnp layer %d: no parameter carries a gradient signal", label,
                              l);
                if (used_any) {
                    float* u = allocFloats(per);
                    double nrm = 0, ana = 0, num, hh;
                    for (size_t i = 0; i < per; i++) {
                        u[i] = attnp_used(&m, l, (int)(i % (size_t)mp)) ? rng_normal(&r) : 0.0f;
                        nrm += (double)u[i] * u[i];
                    }
                    for (size_t i = 0; i < per; i++) {
                        u[i] = (float)(u[i] / sqrt(nrm));
                        ana += (double)g[i] * u[i];
                    }
                    int rc = check_dir(&n, x, u, per, ana, &num, &hh, MGC_HDIR);
                    ck_assert_msg(rc >= 0,
                                  "%s: attnp layer %d: directional analytic %.6g vs numeric %.6g",
                                  label, l, ana, num);
                    rep.retries += rc;
                    free(u);
                }
                continue;
            }
            snprintf(name, sizeof(name), "%s", s->name);
            int sig = check_slice(&n, label, name, l, x, g, per, s->variant_owned ? 0 : MGC_SAMPLE,
                                  &r, &rep);
            const MgcUnused* why = find_unused(unused, nunused, s->name, -1, l);
            tsig += sig == 1;
            tweak += sig == 2;
            if (sig == 2) continue;
            if (sig)
                ck_assert_msg(!why, "%s: %s layer %d is listed unused (%s) but has signal", label,
                              name, l, why ? why->why : "");
            else {
                ck_assert_msg(why != NULL,
                              "%s: %s layer %d: gradient is 0 and the loss does not move: "
                              "the tensor would go unchecked",
                              label, name, l);
                rep.unused++;
            }
        }
        ck_assert_msg(tsig > 0 || tweak == 0,
                      "%s: %s: a nonzero gradient below the signal bar in every layer: the tensor "
                      "would go unchecked",
                      label, s->name);
    }
    for (int k = 0; k < m.maxP; k++)
        ck_assert_msg(psig[k] > 0 || pweak[k] == 0,
                      "%s: attnp parameter %d has a gradient but no signal in any layer", label, k);
    free(G);
    gpt2_free(&m);
    if (getenv("MGC_VERBOSE"))
        fprintf(stderr,
                "%s: %d slices, %d entries, %d retries, %d unused, %d weak, %d zero checks\n",
                label, rep.slices_checked, rep.entries_checked, rep.retries, rep.unused, rep.weak,
                rep.zero_checks);
    return rep;
}
