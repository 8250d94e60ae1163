// tests/test_qknorm.c: the model key qk_norm (qk-layernorm, attention/qknorm.c) in the whole model
// (the layer itself: tests/test_qknorm_layer.c; the forward against numpy: tests/test_ref_model.c):
//   - whole-model finite differences of every parameter tensor (tests/gradcheck_model.h, B = 2),
//     the qk-norm gains of every layer included, for both kinds under every position encoding,
//     on mixed per-layer variants, with value_residual and with z_loss;
//   - a tight check of every gain entry of every layer on two models, B = 2: 4-point differences
//     at h = 3e-2, then 1e-2, then 3e-3 (the float forward's noise dominates small steps on small
//     gradients, the truncation large steps on large ones) against 1e-3 relative + 1e-5, on
//     entries whose gradient is at least 5e-3: a 0.5% error in one entry fails at every step;
//   - the gains are rows of the parameter table: "qk_norm.q_gain" and "qk_norm.k_gain",
//     (n_layer, head size), initialised to 1, without weight decay, absent without qk_norm (and
//     the other tensors' initial values do not change with it);
//   - tiny training runs (./train) learn with qk_norm = 1 under every position encoding and on a
//     sample of variants, and both kinds;
//   - a checkpoint round trip gives identical logits; a strict load into a config with another
//     qk_norm or qk_norm_kind is refused naming them; resume is exact (with z_loss and
//     weight_decay_mode = independent as well);
//   - Hugging Face export and import give identical logits (the gains travel as attnlab.* tensors,
//     the kind in config.json); an llm.c export is refused naming qk_norm;
//   - the memory estimate counts the saved normalised q, k and their scales and the gains,
//     computed here from the shapes.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/util.h"
#include "model/checkpoint.h"
#include "model/gpt2.h"
#include "model/hf.h"
#include "model/run/memory.h"
#include "model/open.h"
#include "tests/gradcheck_model.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

static void set_keys(Config* c, const char* kvs) {
    char buf[512], err[1024];
    util_strlcpy(buf, kvs, sizeof(buf));
    char* save = NULL;
    for (char* kv = strtok_r(buf, " ", &save); kv; kv = strtok_r(NULL, " ", &save))
        ck_assert_msg(config_apply_arg(c, kv, err, sizeof(err)) == 0, "%s: %s", kv, err);
}

// ---------------------------------------------------------------------------------------------
// gradients

static const char* const GC_CASES[] = {
    "qk_norm=1 pos_encoding=learned",
    "qk_norm=1 qk_norm_kind=rmsnorm pos_encoding=rope",
    "qk_norm=1 pos_encoding=alibi",
    "qk_norm=1 qk_norm_kind=rmsnorm pos_encoding=none",
    "qk_norm=1 pos_encoding=xpos",
    "qk_norm=1 qk_norm_kind=rmsnorm pos_encoding=fire",
    "qk_norm=1 pos_encoding=rope attention=0:ssmax,1:gated",
    "qk_norm=1 qk_norm_kind=rmsnorm pos_encoding=alibi attention=0:diff,1:deltanet",
    "qk_norm=1 pos_encoding=learned value_residual=1 z_loss=0.05",
};
#define N_GC ((int)(sizeof(GC_CASES) / sizeof(GC_CASES[0])))

START_TEST(test_model_gradcheck) {
    Config c;
    mgc_tiny_config(&c);
    set_keys(&c, GC_CASES[_i]);
    // ssmax's per-head bias is a parameter only with attn.bias = learn
    // value_residual's lambda row 0 is never read (layer 0 is not mixed)
    MgcUnused unused[2];
    int nu = 0;
    if (strstr(GC_CASES[_i], "ssmax"))
        unused[nu++] = (MgcUnused){"attnp", 1, 0, "ssmax: b is learned only with bias=learn"};
    if (strstr(GC_CASES[_i], "value_residual=1"))
        unused[nu++] = (MgcUnused){"value_residual.lambda", -1, 0, "layer 0 is not mixed"};
    MgcReport r = mgc_check(&c, GC_CASES[_i], unused, nu, 41 + (uint64_t)_i);
    // every tensor of both layers, the two gains included, with a signal
    ck_assert_int_ge(r.slices_checked, 2 * 2);
}
END_TEST

typedef struct {
    GPT2* m;
    int in[2 * 9], tg[2 * 9];
} Net;

static double net_loss(void* ctx) {
    Net* n = ctx;
    gpt2_forward(n->m, n->in, n->tg, 2, 9);
    return (double)n->m->mean_loss + (double)n->m->mean_zloss;
}

START_TEST(test_gain_entries_tight) {
    static const char* const CASES[] = {"qk_norm=1 pos_encoding=rope",
                                        "qk_norm=1 qk_norm_kind=rmsnorm pos_encoding=alibi"};
    Config c;
    mgc_tiny_config(&c);
    set_keys(&c, CASES[_i]);
    GPT2 m;
    test_build_model(&m, &c, 2, 9, 5);
    Rng r;
    rng_seed(&r, 17 + (uint64_t)_i);
    // matrices N(0, 1) (at C = 16: attention that moves the loss, gain gradients of 0.01-0.2),
    // gains 1 + N(0, 0.5), the rest near its init
    for (int s = 0; s < m.nspecs; s++) {
        float* p = m.params + m.specs[s].offset;
        const ParamSpec* sp = &m.specs[s];
        const int gain = sp->row == P_QKNORM_Q || sp->row == P_QKNORM_K;
        const int mat = sp->ndim == 3 || s == P_WTE;
        for (size_t k = 0; k < sp->size; k++)
            p[k] = gain  ? 1.0f + 0.5f * rng_normal(&r)
                   : mat ? rng_normal(&r)
                         : p[k] + 0.1f * rng_normal(&r);
    }
    Net n = {.m = &m};
    for (int i = 0; i < 18; i++) {
        n.in[i] = (int)rng_below(&r, 64);
        n.tg[i] = (int)rng_below(&r, 64);
    }
    net_loss(&n);
    gpt2_zero_grad(&m);
    gpt2_backward(&m, 1.0f);
    const int hs = c.n_embd / c.n_head;
    int checked = 0;
    for (int row = P_QKNORM_Q; row <= P_QKNORM_K; row++) {
        const int si = m.row_spec[row];
        ck_assert_int_ge(si, 0);
        for (int l = 0; l < c.n_layer; l++) {
            float* x = gpt2_tensor(&m, m.params, si, l);
            const float* g = gpt2_tensor(&m, m.grads, si, l);
            for (int i = 0; i < hs; i++) {
                // the step ladder: the float forward's noise dominates small steps on small
                // gradients, the stencil's truncation large steps on large ones; an entry passes
                // at the first step that agrees (a 0.5% error agrees at none)
                static const double HS[3] = {3e-2, 1e-2, 3e-3};
                const double ana = g[i];
                double num = 0;
                int ok = 0, signal = 0;
                for (int k = 0; k < 3 && !ok; k++) {
                    num = test_fd4(net_loss, &n, x + i, HS[k]);
                    signal |= fabs(num) >= 5e-3;
                    ok = fabs(num - ana) <= 1e-3 * (fabs(num) + fabs(ana)) + 1e-5;
                }
                if (!signal) continue; // too little signal for the 0.5% bar
                ck_assert_msg(ok, "%s: %s layer %d entry %d: analytic %.8g vs numeric %.8g",
                              CASES[_i], m.specs[si].name, l, i, ana, num);
                checked++;
            }
        }
    }
    ck_assert_msg(checked >= 2 * c.n_layer * hs / 2, "%s: only %d gain entries had signal",
                  CASES[_i], checked);
    gpt2_free(&m);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// the parameter table

START_TEST(test_gain_rows) {
    Config c;
    test_tiny_config(&c, 97, 3, 4, 32, 16);
    GPT2 plain, qk;
    test_build_model(&plain, &c, 1, 16, 9);
    set_keys(&c, "qk_norm=1");
    test_build_model(&qk, &c, 1, 16, 9);
    ck_assert_int_eq(plain.row_spec[P_QKNORM_Q], -1);
    ck_assert_int_eq(plain.row_spec[P_QKNORM_K], -1);
    ck_assert_int_eq(qk.nspecs, plain.nspecs + 2);
    static const char* const NAMES[2] = {"qk_norm.q_gain", "qk_norm.k_gain"};
    for (int k = 0; k < 2; k++) {
        const int si = qk.row_spec[P_QKNORM_Q + k];
        ck_assert_int_ge(si, 0);
        const ParamSpec* s = &qk.specs[si];
        ck_assert_str_eq(s->name, NAMES[k]);
        ck_assert_int_eq(s->ndim, 2);
        ck_assert_uint_eq(s->shape[0], 3);
        ck_assert_uint_eq(s->shape[1], 8); // head size 32 / 4
        ck_assert_int_eq(s->decay, 0);
        ck_assert_int_eq(s->stacked, 1);
        ck_assert_int_eq(s->llmc, -1);
        ck_assert_ptr_null(s->hf);
        for (size_t i = 0; i < s->size; i++)
            ck_assert_float_eq(qk.params[s->offset + i], 1.0f);
    }
    // every other tensor starts where it starts without qk-norm
    for (int s = 0; s < plain.nspecs; s++) {
        ck_assert_str_eq(plain.specs[s].name, qk.specs[s].name);
        ck_assert(memcmp(plain.params + plain.specs[s].offset, qk.params + qk.specs[s].offset,
                         sizeof(float) * plain.specs[s].size) == 0);
    }
    // and the whole model differs from the plain one (the norm acts at init)
    int in[16];
    for (int i = 0; i < 16; i++)
        in[i] = (i * 7) % 97;
    gpt2_forward(&plain, in, NULL, 1, 16);
    gpt2_forward(&qk, in, NULL, 1, 16);
    ck_assert(memcmp(gpt2_logits(&plain, 0, 15), gpt2_logits(&qk, 0, 15), sizeof(float) * 97) != 0);
    gpt2_free(&plain);
    gpt2_free(&qk);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// training runs

static const char* const TRAIN_CASES[] = {
    "pos_encoding=learned",
    "pos_encoding=rope qk_norm_kind=rmsnorm",
    "pos_encoding=alibi",
    "pos_encoding=none qk_norm_kind=rmsnorm",
    "pos_encoding=xpos",
    "pos_encoding=fire",
    "pos_encoding=rope attention=ssmax",
    "pos_encoding=alibi attention=gated qk_norm_kind=rmsnorm",
    "pos_encoding=rope attention=diff",
    "pos_encoding=none attention=deltanet",
    "pos_encoding=learned attention=sigmoid z_loss=1e-3",
    "pos_encoding=rope attention=0:linear,1:softmax weight_decay_mode=independent",
};
#define N_TRAIN ((int)(sizeof(TRAIN_CASES) / sizeof(TRAIN_CASES[0])))

START_TEST(test_qknorm_trains) {
    const char* dir = test_tmpdir();
    test_write_shards(dir, 300, 61, 20000, 3000);
    Config c;
    test_run_config(&c, dir, "run", 300);
    c.log_every = 1000000;
    c.max_steps = 30;
    c.eval_every = 0;
    c.lr = 1e-2f;
    c.min_lr = 1e-3f;
    set_keys(&c, "qk_norm=1");
    set_keys(&c, TRAIN_CASES[_i]);
    ck_assert_msg(isfinite(test_expect_learns(&c, TRAIN_CASES[_i])), "%s: val loss not finite",
                  TRAIN_CASES[_i]);
}
END_TEST

START_TEST(test_qknorm_resume_exact) {
    const char* dir = test_tmpdir();
    test_write_shards(dir, 300, 61, 20000, 3000);
    Config a;
    test_run_config(&a, dir, "straight", 300);
    a.log_every = 1000000;
    a.eval_every = 5;
    a.max_steps = 10;
    set_keys(&a, "qk_norm=1 pos_encoding=rope z_loss=1e-3 weight_decay_mode=independent");
    char resumed[700];
    snprintf(resumed, sizeof(resumed), "%s/resumed", dir);
    double va, vb;
    test_expect_resume_exact(&a, resumed, "qk_norm", &va, &vb);
    ck_assert_msg(va == vb, "val loss %.9g vs resumed %.9g", va, vb);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// files

// a qk_norm model of config c, away from its init (the gains too)
static void build_moved(GPT2* m, const Config* c, uint64_t seed) {
    test_build_model(m, c, 2, 16, seed);
    Rng r;
    rng_seed(&r, seed + 1);
    for (int s = 0; s < m->nspecs; s++) {
        float* p = m->params + m->specs[s].offset;
        size_t n = s == P_WTE ? (size_t)c->vocab_size * c->n_embd : m->specs[s].size;
        for (size_t k = 0; k < n; k++)
            p[k] += 0.1f * rng_normal(&r);
    }
    gpt2_params_changed(m);
}

static void logits_of(GPT2* m, float* out) {
    int in[32];
    for (int i = 0; i < 32; i++)
        in[i] = (i * 13 + 5) % m->cfg.vocab_size;
    gpt2_forward(m, in, NULL, 2, 16);
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < 16; t++)
            memcpy(out + ((size_t)b * 16 + t) * m->cfg.vocab_size, gpt2_logits(m, b, t),
                   sizeof(float) * (size_t)m->cfg.vocab_size);
}

START_TEST(test_checkpoint_roundtrip) {
    const char* dir = test_tmpdir();
    Config c;
    test_tiny_config(&c, 97, 2, 2, 32, 16);
    set_keys(&c, "qk_norm=1 qk_norm_kind=rmsnorm pos_encoding=rope");
    GPT2 a, b;
    build_moved(&a, &c, 3);
    char path[700], err[2048];
    snprintf(path, sizeof(path), "%s/model_00000007.bin", dir);
    char* text = gpt2_config_text(&a, &c, "fp32");
    ck_assert_msg(ckpt_save_model(&a, path, 7, text, err, sizeof(err)) == 0, "%s", err);
    free(text);
    test_build_model(&b, &c, 2, 16, 99);
    long step = 0;
    ck_assert_msg(ckpt_load_model(&b, path, 1, &step, NULL, 0, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(step, 7);
    ck_assert(memcmp(a.params, b.params, sizeof(float) * a.num_params) == 0);
    float* la = mallocCheck(sizeof(float) * 32 * 97);
    float* lb = mallocCheck(sizeof(float) * 32 * 97);
    logits_of(&a, la);
    logits_of(&b, lb);
    ck_assert(memcmp(la, lb, sizeof(float) * 32 * 97) == 0);
    // the header holds both settings
    GPT2Config hc;
    ck_assert_msg(ckpt_read_info(path, &hc, NULL, 0, NULL, NULL, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(hc.qk_norm, 1);
    ck_assert_int_eq(hc.qk_norm_kind, ATTN_QKNORM_RMSNORM);
    gpt2_free(&b);
    // a strict load into another qk-norm setting is refused, naming it
    static const char* const OTHER[] = {"qk_norm=0", "qk_norm_kind=layernorm"};
    for (int k = 0; k < 2; k++) {
        Config o = c;
        set_keys(&o, OTHER[k]);
        test_build_model(&b, &o, 2, 16, 99);
        ck_assert(ckpt_load_model(&b, path, 1, &step, NULL, 0, err, sizeof(err)) != 0);
        ck_assert_msg(strstr(err, "qk_norm=1 qk_norm_kind=rmsnorm") != NULL, "%s: %s", OTHER[k],
                      err);
        gpt2_free(&b);
    }
    // the model opens from the file alone (the tools' path), as saved
    ModelOpen mo = {0};
    ck_assert_msg(model_open(&b, path, &mo, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(b.cfg.qk_norm, 1);
    ck_assert_int_eq(b.cfg.qk_norm_kind, ATTN_QKNORM_RMSNORM);
    gpt2_alloc_acts(&b, 2, 16, 2);
    logits_of(&b, lb);
    ck_assert(memcmp(la, lb, sizeof(float) * 32 * 97) == 0);
    gpt2_free(&b);
    free(la);
    free(lb);
    gpt2_free(&a);
}
END_TEST

START_TEST(test_exports) {
    const char* dir = test_tmpdir();
    Config c;
    test_tiny_config(&c, 97, 2, 2, 32, 16);
    set_keys(&c, "qk_norm=1 qk_norm_kind=rmsnorm");
    GPT2 a, b;
    build_moved(&a, &c, 4);
    char path[700], err[2048];
    // llm.c: no field and no tensor for it
    snprintf(path, sizeof(path), "%s/model.llmc.bin", dir);
    ck_assert(llmc_save(&a, path, err, sizeof(err)) != 0);
    ck_assert_msg(strstr(err, "qk_norm = 1") != NULL && strstr(err, "--format hf") != NULL, "%s",
                  err);
    ck_assert_msg(access(path, F_OK) != 0, "%s was written", path);
    // Hugging Face: the gains as attnlab.* tensors, the settings in config.json
    snprintf(path, sizeof(path), "%s/hf", dir);
    ck_assert_msg(hf_export(&a, path, NULL, err, sizeof(err)) == 0, "%s", err);
    char src[800];
    snprintf(src, sizeof(src), "hf:%s", path);
    ModelOpen mo = {0};
    ck_assert_msg(model_open(&b, src, &mo, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(b.cfg.qk_norm, 1);
    ck_assert_int_eq(b.cfg.qk_norm_kind, ATTN_QKNORM_RMSNORM);
    ck_assert(memcmp(a.params, b.params, sizeof(float) * a.num_params) == 0);
    gpt2_alloc_acts(&b, 2, 16, 2);
    float* la = mallocCheck(sizeof(float) * 32 * 97);
    float* lb = mallocCheck(sizeof(float) * 32 * 97);
    logits_of(&a, la);
    logits_of(&b, lb);
    ck_assert(memcmp(la, lb, sizeof(float) * 32 * 97) == 0);
    free(la);
    free(lb);
    gpt2_free(&a);
    gpt2_free(&b);
}
END_TEST

START_TEST(test_memory_estimate) {
    Config c;
    test_tiny_config(&c, 97, 3, 4, 32, 16);
    GPT2Config g0, g1;
    char err[1024];
    MemEstimate e0, e1;
    ck_assert(gpt2_config_from(&g0, &c, err, sizeof(err)) == 0);
    ck_assert(memory_estimate_config(&e0, &c, &g0, 4, 16, 2, MM_FP32, 2, err, sizeof(err)) == 0);
    set_keys(&c, "qk_norm=1");
    ck_assert(gpt2_config_from(&g1, &c, err, sizeof(err)) == 0);
    ck_assert(memory_estimate_config(&e1, &c, &g1, 4, 16, 2, MM_FP32, 2, err, sizeof(err)) == 0);
    // gains: 2 tensors of (L, hs) floats, in parameters, gradients and both AdamW moments (each
    // buffer rounded up to 64 bytes)
    GPT2 m;
    Config c0 = c;
    set_keys(&c0, "qk_norm=0");
    test_build_model(&m, &c0, 4, 16, 1);
    const size_t n0 = m.num_params, n1 = n0 + 2 * 3 * 8;
    gpt2_free(&m);
    const double dp = (double)util_floats_bytes(n1) - (double)util_floats_bytes(n0);
    ck_assert_double_eq(e1.params - e0.params, dp);
    ck_assert_double_eq(e1.grads - e0.grads, dp);
    ck_assert_double_eq(e1.optim - e0.optim,
                        (double)util_floats_bytes(2 * n1) - (double)util_floats_bytes(2 * n0));
    // activations: xhat (L, B*T, 2C) and rstd (L, B*T, 2NH), each padded to 16 floats
    const double xhat = 3.0 * 64 * 2 * 32, rstd = 3.0 * 64 * 2 * 4;
    const double pad = (double)(((size_t)xhat + 15) / 16 * 16 + ((size_t)rstd + 15) / 16 * 16);
    ck_assert_double_eq(e1.acts - e0.acts, 4.0 * pad);
    // and what a real model allocates is what the estimate says
    test_build_model(&m, &c, 4, 16, 1);
    ck_assert_double_eq(m.bytes.acts, e1.acts);
    ck_assert_double_eq(m.bytes.params, e1.params);
    gpt2_free(&m);
}
END_TEST

static Suite* qknorm_suite(void) {
    Suite* s = suite_create("qknorm");
    TCase* tc = tcase_create("model");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_model_gradcheck, 0, N_GC);
    tcase_add_loop_test(tc, test_gain_entries_tight, 0, 2);
    tcase_add_test(tc, test_gain_rows);
    tcase_add_test(tc, test_checkpoint_roundtrip);
    tcase_add_test(tc, test_exports);
    tcase_add_test(tc, test_memory_estimate);
    suite_add_tcase(s, tc);
    TCase* tr = tcase_create("train");
    tcase_set_timeout(tr, 600);
    tcase_add_loop_test(tr, test_qknorm_trains, 0, N_TRAIN);
    tcase_add_test(tr, test_qknorm_resume_exact);
    suite_add_tcase(s, tr);
    return s;
}

TEST_MAIN(qknorm_suite)
