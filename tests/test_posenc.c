// tests/test_posenc.c: position encodings (learned, rope, alibi, none, xpos, fire) and
// long-context evaluation.
//   - RoPE against a double-precision reference rotation; inverse and norm; scores depend only
//     on the relative position; xPos likewise (FIRE's own tests: tests/test_fire.c);
//   - a layer gradient check (finite differences, loss in double) of every registered variant
//     under rope, alibi, none, xpos and fire, on q, k, v, the layer input, row parameters, layer
//     tensors and (under fire) the FIRE parameters;
//   - a whole-model gradient check (B=1, T=5, C=8, L=1, NH=2, vocab 64) per position encoding,
//     for softmax and for layer-level variants under rope;
//   - sliding-window rows: exactly 0 outside the window; stochastic windows are a function of
//     (seed, step, layer); twicing equals (2A - A^2) V formed explicitly;
//   - a rope model evaluated at 2x its training length: finite and identical across two runs,
//     both through the library and through the ./evaluate tool.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "data/shard.h"
#include "model/checkpoint.h"
#include "model/gpt2.h"
#include "tests/attn_harness.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

static const int POS[5] = {ATTN_POS_ROPE, ATTN_POS_ALIBI, ATTN_POS_NONE, ATTN_POS_XPOS,
                           ATTN_POS_FIRE};
static const char* const POS_NAME[6] = {"learned", "rope", "alibi", "none", "xpos", "fire"};
#define N_POS 5

// check_grad: test_check_grad_kinks (tests/testutil.h) with estimates at 2h, h and h/2 (a kink
// within reach, also a C^1 one such as max(x, 0)^2, is skipped) and at most half the coordinates
// kinks.
static void check_grad(void* prob, double (*f)(void*), float* x, const float* g, size_t n,
                       size_t stride, double h, double atol, const char* what) {
    test_check_grad_kinks(f, prob, x, g, n, stride, h, atol, 1, 1, what);
}

static void tiny_config(Config* c, const char* attention, const char* pos, int T);

// ---------------------------------------------------------------------------------------------
// RoPE itself

START_TEST(test_rope_reference) {
    const int B = 2, T = 7, NH = 2, hs = 6, C = NH * hs;
    AttnDims d = {.B = B, .T = T, .C = C, .NH = NH, .hs = hs};
    AttnWorkspace* ws = attn_workspace_new(B, T, NH, 2, 0, 0);
    attn_workspace_prepare_pos(ws, ATTN_POS_ROPE, C);
    Rng r;
    rng_seed(&r, 5);
    size_t n = (size_t)B * T * C;
    float* x = allocFloats(n);
    float* y = allocFloats(n);
    float* z = allocFloats(n);
    fill_normal(x, n, 1.0f, &r);
    attn_rope(y, C, x, C, &d, ws, 0, 0);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++)
                for (int i = 0; i < hs / 2; i++) {
                    size_t o = ((size_t)b * T + t) * C + (size_t)h * hs + 2 * (size_t)i;
                    double a = t * pow(10000.0, -2.0 * i / hs);
                    double e0 = x[o] * cos(a) - x[o + 1] * sin(a);
                    double e1 = x[o] * sin(a) + x[o + 1] * cos(a);
                    ck_assert_msg(fabs(y[o] - e0) < 1e-5 && fabs(y[o + 1] - e1) < 1e-5,
                                  "rope (t=%d, i=%d): %g %g vs %g %g", t, i, y[o], y[o + 1], e0,
                                  e1);
                }
    attn_rope(z, C, y, C, &d, ws, 1, 0); // R^T R x = x
    ck_assert_msg(rel_diff(z, x, n) < 1e-6, "inverse rope does not undo rope");
    // relative positions: <R_t q, R_s k> depends only on t - s
    float* q = allocFloats(n);
    float* k = allocFloats(n);
    memset(q, 0, sizeof(float) * n);
    memset(k, 0, sizeof(float) * n);
    float qv[6], kv[6];
    for (int i = 0; i < hs; i++) {
        qv[i] = rng_normal(&r);
        kv[i] = rng_normal(&r);
    }
    for (int i = 0; i < hs; i++) {
        q[(size_t)3 * C + i] = qv[i];
        k[(size_t)1 * C + i] = kv[i];
        q[(size_t)6 * C + i] = qv[i];
        k[(size_t)4 * C + i] = kv[i];
    }
    float* qr = allocFloats(n);
    float* kr = allocFloats(n);
    attn_rope(qr, C, q, C, &d, ws, 0, 0);
    attn_rope(kr, C, k, C, &d, ws, 0, 0);
    double s31 = 0, s64 = 0, s0 = 0;
    for (int i = 0; i < hs; i++) {
        s31 += (double)qr[(size_t)3 * C + i] * kr[(size_t)1 * C + i];
        s64 += (double)qr[(size_t)6 * C + i] * kr[(size_t)4 * C + i];
        s0 += (double)qv[i] * kv[i];
    }
    ck_assert_msg(fabs(s31 - s64) < 1e-5, "score at (3,1) %g vs (6,4) %g", s31, s64);
    ck_assert_msg(fabs(s31 - s0) > 1e-3, "rotation had no effect");
    free(q);
    free(k);
    free(qr);
    free(kr);
    free(x);
    free(y);
    free(z);
    attn_workspace_free(ws);
}
END_TEST

// xPos as torchscale computes it (microsoft/torchscale:
// torchscale/component/xpos_relative_position.py, written here from that code): pair i of a query
// at position t is R_t x scaled by zeta_i^(p/512), of a key by zeta_i^(-p/512), zeta_i = (2i/hs +
// 0.4) / 1.4, at the centred position p = t + min_pos, min_pos = -T // 2 in Python's floor division
// (-5 for T = 9). Scores then depend on t - s only, equal the uncentred xPos scores R_t q . R_s k
// zeta^((t-s)/512) (the centring cancels), and decay with the distance; the transpose undoes the
// map.
START_TEST(test_xpos_reference) {
    const int B = 1, T = 9, NH = 2, hs = 8, C = NH * hs, min_pos = -5;
    AttnDims d = {.B = B, .T = T, .C = C, .NH = NH, .hs = hs};
    AttnWorkspace* ws = attn_workspace_new(B, T, NH, 1, 0, 0);
    attn_workspace_prepare_pos(ws, ATTN_POS_XPOS, C);
    Rng r;
    rng_seed(&r, 11);
    size_t n = (size_t)B * T * C;
    float *x = allocFloats(n), *yq = allocFloats(n), *yk = allocFloats(n), *z = allocFloats(n);
    fill_normal(x, n, 1.0f, &r);
    attn_xpos(yq, C, x, C, &d, ws, 0, 0, 0);
    attn_xpos(yk, C, x, C, &d, ws, 1, 0, 0);
    double moved = 0; // against the uncentred scale zeta^(t/512): the centring is visible on q, k
    for (int t = 0; t < T; t++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < hs / 2; i++) {
                size_t o = (size_t)t * C + (size_t)h * hs + 2 * (size_t)i;
                double a = t * pow(10000.0, -2.0 * i / hs);
                double zeta = (2.0 * i / hs + 0.4) / 1.4, sq = pow(zeta, (t + min_pos) / 512.0);
                double e0 = x[o] * cos(a) - x[o + 1] * sin(a);
                double e1 = x[o] * sin(a) + x[o + 1] * cos(a);
                ck_assert_msg(fabs(yq[o] - sq * e0) < 1e-5 && fabs(yq[o + 1] - sq * e1) < 1e-5,
                              "xpos query (t=%d, i=%d): %g %g vs %g %g", t, i, yq[o], yq[o + 1],
                              sq * e0, sq * e1);
                ck_assert_msg(fabs(yk[o] - e0 / sq) < 1e-5 && fabs(yk[o + 1] - e1 / sq) < 1e-5,
                              "xpos key (t=%d, i=%d): %g %g vs %g %g", t, i, yk[o], yk[o + 1],
                              e0 / sq, e1 / sq);
                moved = fmax(moved, fabs(yq[o] - pow(zeta, t / 512.0) * e0));
            }
    ck_assert_msg(moved > 1e-3, "xpos queries equal the uncentred ones (max diff %g)", moved);
    // the transpose: X^T X x = scale^2 x per pair (a rotation scaled by zeta^(p/512))
    attn_xpos(z, C, yq, C, &d, ws, 0, 1, 0);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < C; i++) {
            double zeta = (2.0 * ((i % hs) / 2) / hs + 0.4) / 1.4,
                   sq = pow(zeta, (t + min_pos) / 512.0);
            size_t o = (size_t)t * C + (size_t)i;
            ck_assert_msg(fabs(z[o] - sq * sq * x[o]) < 1e-5, "xpos transpose at t=%d i=%d", t, i);
        }
    // every score equals the uncentred one: R_t q . R_s k with pair i weighted zeta_i^((t-s)/512)
    float *q = allocFloats(n), *k = allocFloats(n), *qr = allocFloats(n), *kr = allocFloats(n);
    float *qo = allocFloats(n), *ko = allocFloats(n);
    fill_normal(q, n, 1.0f, &r);
    fill_normal(k, n, 1.0f, &r);
    attn_xpos(qr, C, q, C, &d, ws, 0, 0, 0);
    attn_xpos(kr, C, k, C, &d, ws, 1, 0, 0);
    attn_rope(qo, C, q, C, &d, ws, 0, 0);
    attn_rope(ko, C, k, C, &d, ws, 0, 0);
    for (int t = 0; t < T; t++)
        for (int s = 0; s <= t; s++)
            for (int h = 0; h < NH; h++) {
                double got = 0, want = 0;
                for (int i = 0; i < hs; i++) {
                    const size_t a = (size_t)t * C + (size_t)h * hs + i;
                    const size_t b = (size_t)s * C + (size_t)h * hs + i;
                    double zeta = (2.0 * (i / 2) / hs + 0.4) / 1.4;
                    got += (double)qr[a] * kr[b];
                    want += (double)qo[a] * ko[b] * pow(zeta, (t - s) / 512.0);
                }
                ck_assert_msg(fabs(got - want) < 1e-5, "xpos score (%d,%d) head %d: %g vs %g", t, s,
                              h, got, want);
            }
    free(q);
    free(k);
    free(qr);
    free(kr);
    free(qo);
    free(ko);
    free(x);
    free(yq);
    free(yk);
    free(z);
    attn_workspace_free(ws);
}
END_TEST

// The independent float64 reference tests/ref/ref_posenc.py: ARGS -> up to cap numbers.
static int ref_posenc(const char* args, double* out, int cap) {
    ck_assert_msg(system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0,
                  "/usr/bin/python3 with numpy is required for the independent references: "
                  "sudo apt-get install python3-numpy (or bash scripts/deps)");
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/ref/ref_posenc.py %s", test_repo_root(),
             args);
    FILE* p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "cannot run %s", cmd);
    int n = 0;
    while (n < cap && fscanf(p, "%lf", &out[n]) == 1)
        n++;
    ck_assert_msg(pclose(p) == 0, "%s failed", cmd);
    return n;
}

// ALiBi slopes against the authors' get_slopes (ofirpress/attention_with_linear_biases:
// fairseq/models/transformer.py, as tests/ref/ref_posenc.py re-implements it), for head counts that
// are and are not powers of two (3, 6 as the small config, 12 as gpt2_124M), in the float build
// (tests/test_attn64_posenc.c: the double build). The scores of the default pipeline under alibi
// carry them (NH = 3, 6, 12 in tests/test_ref_layers.c).
START_TEST(test_alibi_slopes_reference) {
    static const int NHS[] = {1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48};
    char args[256] = "slopes";
    int total = 0;
    for (size_t k = 0; k < sizeof(NHS) / sizeof(NHS[0]); k++) {
        snprintf(args + strlen(args), sizeof(args) - strlen(args), " %d", NHS[k]);
        total += NHS[k];
    }
    double ref[256];
    ck_assert_int_eq(ref_posenc(args, ref, 256), total);
    int o = 0;
    for (size_t k = 0; k < sizeof(NHS) / sizeof(NHS[0]); k++)
        for (int h = 0; h < NHS[k]; h++, o++) {
            const double m = attn_alibi_slope(h, NHS[k]);
            ck_assert_msg(fabs(m - ref[o]) <= 1e-7 * ref[o],
                          "ALiBi slope of head %d of %d: %.9g, the authors' get_slopes %.9g", h,
                          NHS[k], m, ref[o]);
        }
}
END_TEST

// xPos's float32 range: attn_xpos_max_T() equals the reference's search; at the ends of the
// longest table (centred positions -ceil(T/2) .. floor(T/2) - 1) the factors match the reference
// and they and their reciprocals are normal floats; one position further they are not; the
// config refuses block_size beyond the range under xpos (naming the key), not under rope.
START_TEST(test_xpos_range) {
    double lim;
    ck_assert_int_eq(ref_posenc("xpos_max_T", &lim, 1), 1);
    const int Tmax = attn_xpos_max_T(), hs = 8;
    ck_assert_msg(Tmax == (int)lim, "attn_xpos_max_T() = %d, the reference %d", Tmax, (int)lim);
    ck_assert_int_gt(Tmax, 2 * 36261 - 2000); // twice the uncentred range (overflow from 36,261)
    const int P[] = {-(Tmax + 1) / 2, -1000, 0, 1000, Tmax / 2 - 1};
    char args[256];
    int len = snprintf(args, sizeof(args), "xpos_scale %d", hs);
    for (int k = 0; k < 5; k++)
        len += snprintf(args + len, sizeof(args) - (size_t)len, " %d", P[k]);
    double ref[5 * 4];
    ck_assert_int_eq(ref_posenc(args, ref, 20), 20);
    for (int k = 0; k < 5; k++)
        for (int i = 0; i < hs / 2; i++) {
            const float f = attn_xpos_scale(i, hs, P[k]), inv = 1.0f / f;
            ck_assert_msg(fabs(f - ref[k * 4 + i]) <= 1e-6 * ref[k * 4 + i],
                          "xpos scale (i=%d, p=%d): %.9g vs %.9g", i, P[k], f, ref[k * 4 + i]);
            ck_assert_msg(isnormal(f) && isnormal(inv), "xpos scale (i=%d, p=%d): %g, 1/%g", i,
                          P[k], f, inv);
        }
    const float past = attn_xpos_scale(0, hs, -(Tmax + 2) / 2);
    ck_assert_msg(!isnormal(1.0f / past) || !isnormal(past),
                  "the range is not tight: at p = %d the factor %g and its reciprocal are normal",
                  -(Tmax + 2) / 2, past);
    Config c;
    GPT2Config g;
    char err[512];
    tiny_config(&c, "softmax", "xpos", 8);
    c.block_size = Tmax;
    ck_assert_msg(gpt2_config_from(&g, &c, err, sizeof(err)) == 0, "%s", err);
    c.block_size = Tmax + 1;
    ck_assert_int_ne(gpt2_config_from(&g, &c, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "block_size") && strstr(err, "xpos"), "message: %s", err);
    char num[32];
    snprintf(num, sizeof(num), "%d", Tmax);
    ck_assert_msg(strstr(err, num) != NULL, "message does not name the limit %d: %s", Tmax, err);
    util_strlcpy(c.pos_encoding, "rope", sizeof(c.pos_encoding));
    ck_assert_msg(gpt2_config_from(&g, &c, err, sizeof(err)) == 0, "%s", err);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// layer gradient check under each position encoding

// The default pipeline is shared by every row map: softmax and window stand for them. Every
// layer-level variant handles the position encoding itself and is checked individually.
static const AttnVariant* LAYER_VARIANTS[64];
static int N_LAYER_VARIANTS = 0;

static void collect_layer_variants(void) {
    N_LAYER_VARIANTS = 0;
    LAYER_VARIANTS[N_LAYER_VARIANTS++] = attn_lookup("softmax");
    if (attn_lookup("window")) LAYER_VARIANTS[N_LAYER_VARIANTS++] = attn_lookup("window");
    for (int i = 0; i < attn_count() && N_LAYER_VARIANTS < 64; i++)
        if (attn_get(i)->layer_forward && test_variant_selected(attn_get(i)->name))
            LAYER_VARIANTS[N_LAYER_VARIANTS++] = attn_get(i);
}

START_TEST(test_layer_gradcheck_posenc) {
    const int vi = _i / N_POS, pi = _i % N_POS;
    const AttnVariant* v = LAYER_VARIANTS[vi];
    const int pos = POS[pi];
    if (!attn_pos_supported(v, pos)) return; // fire on a variant without logits: refused
    AttnHarness p;
    // seeds of the first three encodings as when they were the only ones; xpos, fire draw theirs
    const uint64_t seed = pi < 3    ? 77 + (uint64_t)(vi * 3 + pi)
                          : pi == 3 ? 7077 + (uint64_t)vi
                                    : 9077 + (uint64_t)vi;
    harness_setup(&p, v, NULL, pos, 1, 5, 8, 2, 1, 0.1f, seed);
    attention_forward(&p.L);
    attention_backward(&p.L);
    const size_t BTC = 40;
    float gmax = fmaxf(max_abs(p.dqkv, 3 * BTC), max_abs(p.dx, BTC));
    double atol = 2e-3 * gmax + 1e-5;
    char what[160];
    snprintf(what, sizeof(what), "%s/%s: layer dqkv", v->name, POS_NAME[pos]);
    check_grad(&p, harness_loss, p.qkv, p.dqkv, 3 * BTC, 2, 1e-2, atol, what);
    if (max_abs(p.dx, BTC) > 0) {
        snprintf(what, sizeof(what), "%s/%s: layer dx", v->name, POS_NAME[pos]);
        check_grad(&p, harness_loss, p.x, p.dx, BTC, 1, 1e-2, atol, what);
    }
    int P = p.row->params_per_head;
    if (P) {
        snprintf(what, sizeof(what), "%s/%s: layer drowp", v->name, POS_NAME[pos]);
        check_grad(&p, harness_loss, p.rowp, p.drowp, (size_t)2 * P, 1, 1e-2, atol, what);
    }
    for (int k = 0; k < p.ntens; k++) {
        snprintf(what, sizeof(what), "%s/%s: layer d%s", v->name, POS_NAME[pos], p.specs[k].name);
        size_t stride = p.tsize[k] > 60 ? p.tsize[k] / 60 : 1;
        check_grad(&p, harness_loss, p.tp[k], p.dtp[k], p.tsize[k], stride, 1e-2, atol, what);
    }
    if (pos == ATTN_POS_FIRE) {
        snprintf(what, sizeof(what), "%s/fire: layer dfire", v->name);
        ck_assert_msg(max_abs(p.dposp, p.nposp) > 0, "%s: FIRE parameters have no gradient", what);
        check_grad(&p, harness_loss, p.posp, p.dposp, p.nposp, 3, 1e-2, atol, what);
    } else {
        ck_assert_msg(max_abs(p.dposp, p.nposp) == 0, "%s/%s: FIRE parameters got a gradient",
                      v->name, POS_NAME[pos]);
    }
    harness_free(&p);
}
END_TEST

// Under rope and alibi the output must differ from pos_encoding = none (the variant applies the
// position encoding).
START_TEST(test_layer_sees_position) {
    const AttnVariant* v = LAYER_VARIANTS[_i];
    const int T = 6, C = 8, BTC = T * C;
    float* ref = allocFloats((size_t)BTC);
    AttnHarness p;
    static const int ORDER[N_POS] = {ATTN_POS_NONE, ATTN_POS_ALIBI, ATTN_POS_ROPE, ATTN_POS_XPOS,
                                     ATTN_POS_FIRE};
    for (int k = 0; k < N_POS; k++) {
        if (!attn_pos_supported(v, ORDER[k])) continue;
        harness_setup(&p, v, NULL, ORDER[k], 1, T, C, 2, 1, 0.1f,
                      555); // none first, then alibi, rope, xpos
        attention_forward(&p.L);
        if (k == 0) {
            memcpy(ref, p.out, sizeof(float) * (size_t)BTC);
        } else {
            ck_assert_msg(rel_diff(p.out, ref, (size_t)BTC) > 1e-4,
                          "%s: output under %s equals the output without position encoding",
                          v->name, POS_NAME[ORDER[k]]);
        }
        harness_free(&p);
    }
    free(ref);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// whole-model gradient check

static void tiny_config(Config* c, const char* attention, const char* pos, int T) {
    config_defaults(c);
    c->n_layer = 1;
    c->n_head = 2;
    c->n_embd = 8;
    c->block_size = T;
    c->vocab_size = 64;
    c->seq_len = T;
    c->batch_size = 1;
    util_strlcpy(c->attention, attention, sizeof(c->attention));
    util_strlcpy(c->pos_encoding, pos, sizeof(c->pos_encoding));
}

typedef struct {
    GPT2* m;
    const int *in, *tg;
    int T;
} ML;

static double ml_loss(void* vp) {
    ML* p = vp;
    gpt2_forward(p->m, p->in, p->tg, 1, p->T);
    double s = 0;
    for (int t = 0; t < p->T; t++)
        s += p->m->losses[t];
    return s / p->T;
}

static const struct {
    const char *att, *pos;
} MODEL_CASES[] = {
    {"softmax", "learned"}, {"softmax", "rope"},       {"softmax", "alibi"}, {"softmax", "none"},
    {"boosted", "rope"},    {"twicing", "rope"},       {"linear", "rope"},   {"window", "rope"},
    {"softmax", "xpos"},    {"talking_heads", "xpos"}, {"softmax", "fire"},  {"diff", "fire"},
    {"selective", "fire"},
};

START_TEST(test_model_gradcheck_posenc) {
    const char* att = MODEL_CASES[_i].att;
    const char* pos = MODEL_CASES[_i].pos;
    if (!attn_lookup(att)) ck_abort_msg("variant %s is not registered", att);
    const int T = 5;
    Config c;
    tiny_config(&c, att, pos, T);
    GPT2 m;
    test_build_model_threads(&m, &c, 1, T, 1, 3 + (uint64_t)_i);
    m.seed = 3 + (uint64_t)_i; // the stochastic variants' draws
    Rng r;
    rng_seed(&r, 100 + (uint64_t)_i);
    for (size_t i = 0; i < m.num_params; i++)
        m.params[i] += 0.15f * rng_normal(&r);
    int in[5], tg[5];
    for (int t = 0; t < T; t++) {
        in[t] = (int)rng_below(&r, 64);
        tg[t] = (int)rng_below(&r, 64);
    }
    gpt2_forward(&m, in, tg, 1, T);
    gpt2_zero_grad(&m);
    gpt2_backward(&m, 1.0f);
    ML p = {&m, in, tg, T};
    float gmax = max_abs(m.grads, m.num_params);
    for (int s = 0; s < m.nspecs; s++) {
        const ParamSpec* ps = &m.specs[s];
        if (s == P_WPE && strcmp(pos, "learned") != 0) {
            ck_assert_msg(max_abs(m.grads + ps->offset, ps->size) == 0.0f,
                          "%s/%s: wpe has a gradient but is unused", att, pos);
            continue;
        }
        char what[160];
        snprintf(what, sizeof(what), "%s/%s: model d%s", att, pos, ps->name);
        size_t stride = ps->size > 8 ? ps->size / 8 : 1;
        check_grad(&p, ml_loss, m.params + ps->offset, m.grads + ps->offset, ps->size, stride, 2e-2,
                   5e-3 * gmax + 1e-6, what);
    }
    gpt2_free(&m);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// window and twicing against independent references

START_TEST(test_window_rows) {
    const AttnVariant* v = attn_lookup("window");
    ck_assert_ptr_nonnull(v);
    AttnHParams hp;
    attn_hparams_default(&hp, v, 64, 1, 4, 4, 2);
    char err[256];
    ck_assert_int_eq(attn_hparams_set(&hp, v, "window", "3", err, sizeof(err)), 0);
    float s[10], a[10];
    Rng r;
    rng_seed(&r, 9);
    for (int j = 0; j < 10; j++)
        s[j] = rng_normal(&r);
    AttnRowCtx ctx = {.hp = &hp, .t = 9, .T = 10, .step = 5, .seed = 1};
    v->forward_row(a, s, 10, &ctx);
    double z = exp(s[7]) + exp(s[8]) + exp(s[9]);
    for (int j = 0; j < 10; j++) {
        double e = j >= 7 ? exp(s[j]) / z : 0.0;
        ck_assert_msg(fabs(a[j] - e) < 1e-6 && (j >= 7 || a[j] == 0.0f), "window a[%d] = %g vs %g",
                      j, a[j], e);
    }
    // stochastic: each (step, layer) gives a window in [min, max], the same on every call; the
    // evaluation step (-1) uses attn.window
    ck_assert_int_eq(attn_hparams_set(&hp, v, "window_mode", "stochastic", err, sizeof(err)), 0);
    ck_assert_int_eq(attn_hparams_set(&hp, v, "window_min", "2", err, sizeof(err)), 0);
    ck_assert_int_eq(attn_hparams_set(&hp, v, "window_max", "6", err, sizeof(err)), 0);
    int seen[11] = {0};
    for (long step = 0; step < 200; step++) {
        ctx.step = step;
        ctx.layer = (int)(step % 3);
        float b[10];
        v->forward_row(a, s, 10, &ctx);
        v->forward_row(b, s, 10, &ctx);
        ck_assert(memcmp(a, b, sizeof(a)) == 0);
        int nz = 0;
        for (int j = 0; j < 10; j++)
            nz += a[j] != 0.0f;
        ck_assert_msg(nz >= 2 && nz <= 6, "stochastic window %d outside [2, 6]", nz);
        seen[nz] = 1;
    }
    ck_assert_msg(seen[2] && seen[6], "stochastic windows never reached the bounds");
    ctx.step = -1;
    v->forward_row(a, s, 10, &ctx);
    int nz = 0;
    for (int j = 0; j < 10; j++)
        nz += a[j] != 0.0f;
    ck_assert_int_eq(nz, 3);
}
END_TEST

START_TEST(test_twicing_reference) {
    const AttnVariant* v = attn_lookup("twicing");
    ck_assert_ptr_nonnull(v);
    AttnHarness p;
    const int T = 6, C = 8, NH = 2, hs = 4;
    harness_setup(&p, v, NULL, ATTN_POS_NONE, 1, T, C, NH, 1, 0.1f, 31);
    attention_forward(&p.L);
    for (int h = 0; h < NH; h++) {
        // softmax A in double from q, k, then (2A - A^2) V explicitly
        double A[6][6] = {{0}}, M[6][6];
        for (int t = 0; t < T; t++) {
            double mx = -1e300, s[6], z = 0;
            for (int j = 0; j <= t; j++) {
                s[j] = 0;
                for (int i = 0; i < hs; i++)
                    s[j] +=
                        (double)p.qkv[t * 3 * C + h * hs + i] * p.qkv[j * 3 * C + C + h * hs + i];
                s[j] /= sqrt((double)hs);
                mx = fmax(mx, s[j]);
            }
            for (int j = 0; j <= t; j++)
                z += exp(s[j] - mx);
            for (int j = 0; j <= t; j++)
                A[t][j] = exp(s[j] - mx) / z;
        }
        for (int t = 0; t < T; t++)
            for (int j = 0; j < T; j++) {
                double a2 = 0;
                for (int l = 0; l < T; l++)
                    a2 += A[t][l] * A[l][j];
                M[t][j] = 2 * A[t][j] - a2;
            }
        for (int t = 0; t < T; t++)
            for (int i = 0; i < hs; i++) {
                double o = 0;
                for (int j = 0; j < T; j++)
                    o += M[t][j] * p.qkv[j * 3 * C + 2 * C + h * hs + i];
                ck_assert_msg(fabs(o - p.out[t * C + h * hs + i]) < 1e-5,
                              "twicing out[%d][%d] = %g vs %g", t, h * hs + i,
                              p.out[t * C + h * hs + i], o);
            }
    }
    harness_free(&p);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// long-context evaluation of a rope model

static void write_rope_checkpoint(const char* dir, char* ckpt, size_t cap, char* glob,
                                  size_t gcap) {
    Config c;
    tiny_config(&c, "softmax", "rope", 32);
    c.n_embd = 16;
    c.seq_len = 8; // training length 8, block_size 32 allows 2x and 4x
    c.batch_size = 2;
    GPT2 m;
    test_build_model_threads(&m, &c, 2, 8, 1, 21);
    m.seed = 21;
    char* text = NULL;
    size_t len = 0;
    FILE* f = open_memstream(&text, &len);
    config_write(&c, f);
    fclose(f);
    snprintf(ckpt, cap, "%s/model_00000000.bin", dir);
    char err[1024];
    ck_assert_msg(ckpt_save_model(&m, ckpt, 0, text, err, sizeof(err)) == 0, "%s", err);
    free(text);
    gpt2_free(&m);
    uint16_t tok[2000];
    Rng r;
    rng_seed(&r, 8);
    for (int i = 0; i < 2000; i++)
        tok[i] = (uint16_t)rng_below(&r, 64);
    char p[1100];
    snprintf(p, sizeof(p), "%s/val_000.bin", dir);
    ck_assert_msg(shard_write(p, tok, 2000, err, sizeof(err)) == 0, "%s", err);
    snprintf(glob, gcap, "%s/val_*.bin", dir);
}

START_TEST(test_rope_long_context_library) {
    const char* dir = test_tmpdir();
    char ckpt[1100], glob[1100];
    write_rope_checkpoint(dir, ckpt, sizeof(ckpt), glob, sizeof(glob));
    double loss[2];
    for (int run = 0; run < 2; run++) {
        GPT2Config gc;
        char att[CONFIG_STR], err[1024], note[256];
        char* text;
        long step;
        ck_assert_msg(ckpt_read_info(ckpt, &gc, att, sizeof(att), &text, &step, err, sizeof(err)) ==
                          0,
                      "%s", err);
        free(text);
        Config c;
        tiny_config(&c, "softmax", "rope", 32);
        c.n_embd = 16;
        c.seq_len = 8;
        GPT2 m;
        // different init and threads: the load overwrites
        test_build_model_threads(&m, &c, 2, 16, run + 1, 99);
        m.seed = 99;
        ck_assert_msg(ckpt_load_model(&m, ckpt, 1, &step, note, sizeof(note), err, sizeof(err)) ==
                          0,
                      "%s", err);
        m.step = -1;
        int in[32], tg[32];
        Rng r;
        rng_seed(&r, 4);
        for (int i = 0; i < 32; i++) {
            in[i] = (int)rng_below(&r, 64);
            tg[i] = (int)rng_below(&r, 64);
        }
        gpt2_forward(&m, in, tg, 2, 16); // 2x the training length
        double s = 0;
        for (int i = 0; i < 32; i++) {
            ck_assert_msg(isfinite(m.losses[i]), "non-finite loss at position %d", i);
            s += m.losses[i];
        }
        loss[run] = s / 32;
        gpt2_free(&m);
    }
    ck_assert_msg(loss[0] == loss[1], "2x-length loss differs: %.9g vs %.9g", loss[0], loss[1]);
    ck_assert_msg(loss[0] > 3.0 && loss[0] < 6.0, "loss %g far from ln 64 for a fresh model",
                  loss[0]);
}
END_TEST

static char* run_capture(const char* cmd) {
    FILE* f = popen(cmd, "r");
    ck_assert_msg(f != NULL, "cannot run %s", cmd);
    char* out = NULL;
    size_t len = 0;
    FILE* o = open_memstream(&out, &len);
    char buf[512];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        fwrite(buf, 1, n, o);
    int rc = pclose(f);
    fclose(o);
    ck_assert_msg(rc == 0, "%s exited with %d:\n%s", cmd, rc, out);
    return out;
}

START_TEST(test_rope_long_context_tool) {
    char tool[4200];
    snprintf(tool, sizeof(tool), "%s/evaluate", test_build_dir());
    ck_assert_msg(access(tool, X_OK) == 0, "%s not built", tool);
    const char* dir = test_tmpdir();
    char ckpt[1100], glob[1100], cmd[8400];
    write_rope_checkpoint(dir, ckpt, sizeof(ckpt), glob, sizeof(glob));
    snprintf(cmd, sizeof(cmd), "%s --checkpoint %s --data '%s' --lengths 1,2,8 --batches 2 2>&1",
             tool, ckpt, glob);
    char* a = run_capture(cmd);
    char* b = run_capture(cmd);
    ck_assert_msg(strcmp(a, b) == 0, "two evaluations differ:\n%s\n---\n%s", a, b);
    // the 2x line: "16 2 x <loss> <loss in> <loss beyond> <tokens>"
    const char* line = strstr(a, "\n16 ");
    ck_assert_msg(line != NULL, "no line for length 16:\n%s", a);
    double l_all, l_in, l_out;
    ck_assert_msg(sscanf(line + 1, "%*d %*dx %lf %lf %lf", &l_all, &l_in, &l_out) == 3,
                  "cannot parse: %s", line + 1);
    ck_assert_msg(isfinite(l_all) && isfinite(l_in) && isfinite(l_out) && l_all > 0,
                  "non-finite 2x loss:\n%s", a);
    ck_assert_msg(fabs(l_all - 0.5 * (l_in + l_out)) < 1e-3, "mean %g != halves %g %g", l_all, l_in,
                  l_out);
    ck_assert_msg(strstr(a, "not evaluated: longer than block_size") != NULL,
                  "8x (64 > block_size 32) was not refused:\n%s", a);
    free(a);
    free(b);
}
END_TEST

static Suite* posenc_suite(void) {
    Suite* s = suite_create("posenc");
    TCase* tr = tcase_create("rope");
    tcase_set_timeout(tr, 60); // two cases start python, slow on a loaded machine
    tcase_add_test(tr, test_rope_reference);
    tcase_add_test(tr, test_xpos_reference);
    tcase_add_test(tr, test_alibi_slopes_reference);
    tcase_add_test(tr, test_xpos_range);
    tcase_add_test(tr, test_window_rows);
    tcase_add_test(tr, test_twicing_reference);
    suite_add_tcase(s, tr);
    TCase* tl = tcase_create("layer");
    tcase_set_timeout(tl, 120);
    collect_layer_variants();
    tcase_add_loop_test(tl, test_layer_gradcheck_posenc, 0, N_POS * N_LAYER_VARIANTS);
    tcase_add_loop_test(tl, test_layer_sees_position, 0, N_LAYER_VARIANTS);
    suite_add_tcase(s, tl);
    TCase* tm = tcase_create("model");
    tcase_set_timeout(tm, 120);
    tcase_add_loop_test(tm, test_model_gradcheck_posenc, 0,
                        (int)(sizeof(MODEL_CASES) / sizeof(MODEL_CASES[0])));
    suite_add_tcase(s, tm);
    TCase* te = tcase_create("long_context");
    tcase_set_timeout(te, 60);
    tcase_add_test(te, test_rope_long_context_library);
    tcase_add_test(te, test_rope_long_context_tool);
    suite_add_tcase(s, te);
    return s;
}

TEST_MAIN(posenc_suite)
