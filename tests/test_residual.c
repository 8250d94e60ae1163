// tests/test_residual.c: the residual-path model keys (residual = attnres | delta_attnres,
// value_residual) end to end, with the in-process trainer on synthetic shards:
//   - each option (and both together) trains 40 steps with a finite, falling loss, and writes the
//     D11 "route" records (one per routing sublayer per metrics step; under attnres the first
//     attention sublayer has a single source, so its max weight is exactly 1);
//   - 20 steps straight == 10 steps + resume + 10 steps, exactly;
//   - checkpoints carry the keys (header and saved config), reload with identical logits, and are
//     refused by a model built without the key; a checkpoint whose saved config predates the
//     keys loads as residual = standard, value_residual = 0;
//   - forward and backward are bit-identical with 1 and 2 threads;
//   - at init (zero pseudo-queries, lambda = 1/2) the routing and mixing are what the papers'
//     zero-init / fixed forms give: uniform weights over the sources.
// Gradients are checked in test_gpt2_gradcheck (residual tcase), the forward against the
// independent float64 reference in test_ref_model.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "model/checkpoint.h"
#include "model/gpt2.h"
#include "model/residual.h"
#include "model/open.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

static void run_config(Config* c, const char* dir, const char* out, const char* keys) {
    test_run_config(c, dir, out, 300);
    c->eval_every = 0;
    c->log_every = 1000; // in range: the checkpoint test reloads the saved config
    c->metrics_every = 0;
    char buf[256], err[512];
    util_strlcpy(buf, keys, sizeof(buf));
    char* save = NULL;
    for (char* kv = strtok_r(buf, " ", &save); kv; kv = strtok_r(NULL, " ", &save))
        ck_assert_msg(config_apply_arg(c, kv, err, sizeof(err)) == 0, "%s: %s", kv, err);
}

// the model as saved in `path` (model_open), with activations for (B, T)
static void open_saved(GPT2* m, Config* cfg, long* step, const char* path, int B, int T) {
    ModelOpen mo;
    memset(&mo, 0, sizeof(mo));
    char err[2048];
    ck_assert_msg(model_open(m, path, &mo, err, sizeof(err)) == 0, "%s", err);
    gpt2_alloc_acts(m, B, T, 2);
    *cfg = mo.cfg;
    *step = mo.step;
}

static char* read_metrics(const char* out_dir) {
    char p[700], err[512];
    snprintf(p, sizeof(p), "%s/metrics.jsonl", out_dir);
    size_t len;
    char* text = util_read_file(p, &len, err, sizeof(err));
    ck_assert_msg(text != NULL, "%s", err);
    return text;
}

static const char* const OPTIONS[] = {
    "residual=attnres",
    "residual=delta_attnres",
    "value_residual=1",
    "residual=attnres value_residual=1",
    "residual=delta_attnres value_residual=1 attention=0:ssmax,1:gated",
};

START_TEST(test_residual_options_train) {
    const char* dir = test_tmpdir();
    test_write_shards(dir, 300, 61, 20000, 3000);
    Config c;
    run_config(&c, dir, "r", OPTIONS[_i]);
    c.max_steps = 40;
    c.metrics_every = 20;
    c.probe_sequences = 4;
    test_expect_learns(&c, OPTIONS[_i]);
    // D11 records: attnres routes 2L + 1 = 5 sublayers, delta_attnres 2L - 1 = 3 (sublayers
    // 1..3), value_residual alone none; two metrics steps (20 and 40)
    const int routed = strstr(OPTIONS[_i], "residual=attnres")         ? 5
                       : strstr(OPTIONS[_i], "residual=delta_attnres") ? 3
                                                                       : 0;
    char* text = read_metrics(c.out_dir);
    int nroute = 0, nfirst = 0;
    for (char* line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strstr(line, "\"kind\":\"route\"")) continue;
        nroute++;
        char* mw = strstr(line, "\"max_weight\":");
        char* ns = strstr(line, "\"sources\":");
        ck_assert(mw && ns);
        double w = strtod(mw + 13, NULL);
        int n = atoi(ns + 10);
        // the largest of n softmax weights lies in [1/n, 1]
        ck_assert_msg(w >= 1.0 / n - 1e-6 && w <= 1.0 + 1e-6, "%s: %s", OPTIONS[_i], line);
        if (n == 1) { // attnres, layer 0's attention: the embedding alone
            ck_assert_msg(strstr(line, "\"layer\":0") && strstr(line, "\"sublayer\":\"attn\""),
                          "%s", line);
            ck_assert_msg(fabs(w - 1.0) < 1e-6, "%s", line);
            nfirst++;
        }
    }
    free(text);
    ck_assert_int_eq(nroute, 2 * routed);
    ck_assert_int_eq(nfirst, routed == 5 ? 2 : 0);
}
END_TEST

START_TEST(test_residual_resume_exact) {
    const char* dir = test_tmpdir();
    test_write_shards(dir, 300, 61, 20000, 3000);
    Config a;
    run_config(&a, dir, "straight", "residual=attnres value_residual=1");
    a.max_steps = 20;
    char resumed[700];
    snprintf(resumed, sizeof(resumed), "%s/resumed", dir);
    test_expect_resume_exact(&a, resumed, "attnres + value_residual", NULL, NULL);
}
END_TEST

static void same_logits(GPT2* a, GPT2* b) {
    int in[32];
    for (int i = 0; i < 32; i++)
        in[i] = (i * 7) % 300;
    gpt2_forward(a, in, NULL, 1, 32);
    gpt2_forward(b, in, NULL, 1, 32);
    ck_assert(memcmp(a->logits, b->logits, sizeof(float) * 32 * a->cfg.padded_vocab) == 0);
}

// The resolved config text has the line "KEY<spaces>= VALUE"
static int key_is(const char* text, const char* key, const char* value) {
    for (const char* l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        size_t k = strlen(key);
        if (strncmp(l, key, k) != 0 || (l[k] != ' ' && l[k] != '=')) continue;
        const char* e = strchr(l, '=');
        if (!e) return 0;
        e++;
        while (*e == ' ')
            e++;
        return strncmp(e, value, strlen(value)) == 0 &&
               (e[strlen(value)] == '\n' || e[strlen(value)] == '\0');
    }
    return 0;
}

START_TEST(test_residual_checkpoint_keys) {
    const char* dir = test_tmpdir();
    test_write_shards(dir, 300, 61, 20000, 3000);
    Config c;
    run_config(&c, dir, "ck", "residual=delta_attnres value_residual=1");
    c.max_steps = 6;
    test_train_ok(&c);
    char path[800], err[1024];
    snprintf(path, sizeof(path), "%s/model_%08d.bin", c.out_dir, 6);
    // the header and the saved config carry both keys
    GPT2Config info;
    char att[CONFIG_STR], *text = NULL;
    long step;
    ck_assert_msg(ckpt_read_info(path, &info, att, sizeof(att), &text, &step, err, sizeof(err)) ==
                      0,
                  "%s", err);
    ck_assert_int_eq(info.residual, GPT2_RESID_DELTA);
    ck_assert_int_eq(info.value_residual, 1);
    ck_assert_msg(key_is(text, "residual", "delta_attnres"), "%s", text);
    ck_assert_msg(key_is(text, "value_residual", "1"), "%s", text);
    // the model built from the checkpoint's own config has the trained tensors and logits
    GPT2 a, b;
    Config ca;
    open_saved(&a, &ca, &step, path, 1, 32);
    ck_assert_str_eq(ca.residual, "delta_attnres");
    ck_assert_int_eq(a.cfg.residual, GPT2_RESID_DELTA);
    ck_assert_int_eq(a.cfg.value_residual, 1);
    test_build_model(&b, &c, 1, 32, 7);
    ck_assert_msg(ckpt_load_model(&b, path, 1, &step, NULL, 0, err, sizeof(err)) == 0, "%s", err);
    same_logits(&a, &b);
    // training moved the pseudo-queries off 0 and the lambdas off 1/2
    const float* q = a.params + a.specs[a.row_spec[P_RESID_QUERY]].offset;
    const float* lam = a.params + a.specs[a.row_spec[P_VRES_LAMBDA]].offset;
    double qa = 0;
    for (size_t k = 0; k < a.specs[a.row_spec[P_RESID_QUERY]].size; k++)
        qa += fabs(q[k]);
    ck_assert(qa > 0);
    ck_assert(lam[2] != 0.5f && lam[3] != 0.5f); // layer 1's (lambda_1, lambda_2)
    ck_assert(lam[0] == 0.5f && lam[1] == 0.5f); // layer 0's row is never read
    // a model without the keys refuses the checkpoint (strict: the tensor table differs)
    Config cs = c;
    strcpy(cs.residual, "standard");
    cs.value_residual = 0;
    GPT2 s;
    test_build_model(&s, &cs, 1, 32, 1);
    ck_assert_int_eq(ckpt_load_model(&s, path, 1, &step, NULL, 0, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "residual=delta_attnres value_residual=1") != NULL, "%s", err);
    // a non-strict load (init_from) takes the GPT-2 tensors and leaves the rest out
    char note[512];
    ck_assert_msg(ckpt_load_model(&s, path, 0, &step, note, sizeof(note), err, sizeof(err)) == 0,
                  "%s", err);
    gpt2_free(&s);
    // a standard model file whose saved config predates the keys loads as standard
    GPT2 o;
    test_build_model(&o, &cs, 1, 32, 3);
    const char* old_text = "n_layer = 2\nn_head = 2\nn_embd = 32\nblock_size = 32\n"
                           "vocab_size = 300\nattention = softmax\n";
    snprintf(path, sizeof(path), "%s/old.bin", dir);
    ck_assert_msg(ckpt_save_model(&o, path, 4, old_text, err, sizeof(err)) == 0, "%s", err);
    GPT2 lo;
    Config co;
    open_saved(&lo, &co, &step, path, 1, 32);
    ck_assert_str_eq(co.residual, "standard");
    ck_assert_int_eq(co.value_residual, 0);
    ck_assert_int_eq(lo.cfg.residual, GPT2_RESID_STANDARD);
    ck_assert_int_eq(lo.row_spec[P_RESID_QUERY], -1);
    ck_assert_int_eq(lo.row_spec[P_VRES_LAMBDA], -1);
    same_logits(&o, &lo);
    free(text);
    gpt2_free(&a), gpt2_free(&b), gpt2_free(&o), gpt2_free(&lo);
}
END_TEST

// forward + backward of a tiny model with n threads: the gradients
static float* grads_with_threads(const Config* c, int n) {
    omp_set_num_threads(n);
    GPT2 m;
    test_build_model(&m, c, 2, 16, 11);
    Rng r;
    rng_seed(&r, 5);
    float* p = m.params + m.specs[m.row_spec[P_RESID_QUERY]].offset; // non-uniform routing
    for (size_t k = 0; k < m.specs[m.row_spec[P_RESID_QUERY]].size; k++)
        p[k] = 0.5f * rng_normal(&r);
    int in[32], tg[32];
    test_random_tokens(in, 32, c->vocab_size, &r);
    test_random_tokens(tg, 32, c->vocab_size, &r);
    gpt2_forward(&m, in, tg, 2, 16);
    gpt2_zero_grad(&m);
    gpt2_backward(&m, 1.0f);
    float* g = mallocCheck(sizeof(float) * m.num_params);
    memcpy(g, m.grads, sizeof(float) * m.num_params);
    gpt2_free(&m);
    return g;
}

START_TEST(test_residual_thread_invariance) {
    static const char* const K[] = {"residual=attnres value_residual=1", "residual=delta_attnres"};
    Config c;
    test_tiny_config(&c, 97, 3, 2, 80, 16); // C = 80: two channel blocks of the query gradient
    char err[512];
    ck_assert(config_apply_arg(&c, strchr(K[_i], ' ') ? "value_residual=1" : "value_residual=0",
                               err, sizeof(err)) == 0);
    ck_assert(config_apply_arg(&c, _i ? "residual=delta_attnres" : "residual=attnres", err,
                               sizeof(err)) == 0);
    GPT2 m;
    test_build_model(&m, &c, 2, 16, 11);
    size_t np = m.num_params;
    gpt2_free(&m);
    float* g1 = grads_with_threads(&c, 1);
    float* g2 = grads_with_threads(&c, 2);
    ck_assert_msg(memcmp(g1, g2, sizeof(float) * np) == 0, "%s: gradients differ by thread count",
                  K[_i]);
    free(g1);
    free(g2);
}
END_TEST

START_TEST(test_residual_init_is_uniform) {
    // zero pseudo-queries: every routed input is the plain mean of its sources (attnres) or the
    // stream plus that mean (delta_attnres); lambda = 1/2: V'_1 = (V_1 + V_0) / 2
    for (int mode = 0; mode < 2; mode++) {
        Config c;
        test_tiny_config(&c, 97, 2, 2, 16, 8);
        char err[512];
        ck_assert(config_apply_arg(&c, mode ? "residual=delta_attnres" : "residual=attnres", err,
                                   sizeof(err)) == 0);
        ck_assert(config_apply_arg(&c, "value_residual=1", err, sizeof(err)) == 0);
        GPT2 m;
        test_build_model(&m, &c, 1, 8, 3);
        int in[8] = {1, 5, 9, 2, 6, 50, 3, 96};
        gpt2_forward(&m, in, NULL, 1, 8);
        const size_t BTC = 8 * 16;
        // the input of layer 1's MLP (sublayer 3): sources emb, f_0, f_1, f_2
        const float* u = resid_input(m.resid, 3, m.residual2 + BTC);
        const float* src[4] = {m.encoded, m.attproj, m.fcproj, m.attproj + BTC};
        for (size_t k = 0; k < BTC; k++) {
            double mean = (src[0][k] + src[1][k] + src[2][k] + src[3][k]) / 4.0;
            double want = mode ? m.residual2[BTC + k] + mean : mean;
            ck_assert_msg(fabs(u[k] - want) <= 1e-5 * (1 + fabs(want)), "mode %d entry %zu", mode,
                          k);
        }
        double sum;
        long n;
        ck_assert_int_eq(resid_max_weight(m.resid, 3, &sum, &n), 4);
        ck_assert(fabs(sum / n - 0.25) < 1e-6);
        // layer 1 attends with (V_1 + V_0) / 2: its qkv holds the mixed values
        for (size_t p = 0; p < 8; p++)
            for (int ch = 0; ch < 16; ch++) {
                float v1 = m.vres->raw[BTC + p * 16 + ch], v0 = m.qkv[p * 48 + 32 + ch];
                ck_assert(fabsf(m.qkv[3 * BTC + p * 48 + 32 + ch] - 0.5f * (v1 + v0)) <= 1e-6f);
            }
        gpt2_free(&m);
    }
}
END_TEST

// mlp = 0 (attention-only blocks) leaves no MLP sublayer for the routing over sublayers: the
// model configuration refuses it with either residual key, naming mlp and the residual value;
// with residual = standard it is accepted
START_TEST(test_residual_refuses_attention_only) {
    static const char* const R[] = {"attnres", "delta_attnres", "standard"};
    for (int i = 0; i < 3; i++) {
        Config c;
        config_defaults(&c);
        char err[512] = "", arg[64];
        ck_assert(config_apply_arg(&c, "mlp=0", err, sizeof(err)) == 0);
        snprintf(arg, sizeof(arg), "residual=%s", R[i]);
        ck_assert_msg(config_apply_arg(&c, arg, err, sizeof(err)) == 0, "%s", err);
        GPT2Config g;
        const int rc = gpt2_config_from(&g, &c, err, sizeof(err));
        if (i < 2)
            ck_assert_msg(rc != 0 && strstr(err, "key 'mlp'") && strstr(err, R[i]),
                          "mlp=0 %s: rc %d, message '%s'", arg, rc, err);
        else
            ck_assert_msg(rc == 0 && g.mlp == 0, "mlp=0 residual=standard refused: %s", err);
    }
}
END_TEST

static Suite* residual_suite(void) {
    Suite* s = suite_create("residual");
    TCase* tc = tcase_create("model");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_residual_init_is_uniform);
    tcase_add_test(tc, test_residual_refuses_attention_only);
    tcase_add_loop_test(tc, test_residual_thread_invariance, 0, 2);
    tcase_add_test(tc, test_residual_checkpoint_keys);
    tcase_add_test(tc, test_residual_resume_exact);
    tcase_add_loop_test(tc, test_residual_options_train, 0,
                        (int)(sizeof(OPTIONS) / sizeof(OPTIONS[0])));
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(residual_suite)
