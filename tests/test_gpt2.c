// tests/test_gpt2.c: the whole model, without training runs (tests/test_gpt2_train.c) and
// gradient checks (tests/test_gpt2_gradcheck.c):
//   - 1 thread vs 2 threads: identical loss and gradients, bit for bit;
//   - save -> load (attnlab and llm.c files) gives identical logits;
//   - bad attention names and keys are rejected with the key named;
//   - attn.* keys reach the model (per-head parameter init, a window's effect on the logits);
//   - the parameter table: llm.c's tensors in its file order, the config's optional rows;
//   - attention-only blocks (mlp = 0): no MLP parameters, the key round-trips through the model
//     file, a file of the other kind is refused, a file without the key loads as mlp = 1.
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
#include "tests/model_util.h"
#include "tests/testutil.h"

// ---------------------------------------------------------------------------------------------
// helpers

// ---------------------------------------------------------------------------------------------

START_TEST(test_model_threads_identical) {
    Config c;
    test_tiny_config(&c, 300, 2, 4, 128, 32);
    Rng r;
    rng_seed(&r, 5);
    int in[64], tg[64];
    test_random_tokens(in, 64, 300, &r);
    test_random_tokens(tg, 64, 300, &r);
    float* g[2];
    float loss[2];
    for (int k = 0; k < 2; k++) {
        omp_set_num_threads(k + 1);
        GPT2 m;
        test_build_model(&m, &c, 2, 32, 9);
        gpt2_forward(&m, in, tg, 2, 32);
        gpt2_zero_grad(&m);
        gpt2_backward(&m, 1.0f);
        loss[k] = m.mean_loss;
        g[k] = allocFloats(m.num_params);
        memcpy(g[k], m.grads, sizeof(float) * m.num_params);
        size_t n = m.num_params;
        gpt2_free(&m);
        if (k == 1) ck_assert(memcmp(g[0], g[1], sizeof(float) * n) == 0);
    }
    omp_set_num_threads(2);
    ck_assert_msg(loss[0] == loss[1], "loss %.9g vs %.9g", (double)loss[0], (double)loss[1]);
    free(g[0]);
    free(g[1]);
}
END_TEST
START_TEST(test_save_load_logits) {
    Config c;
    test_tiny_config(&c, 200, 2, 2, 32, 16);
    GPT2 a, b;
    test_build_model(&a, &c, 1, 16, 11);
    test_build_model(&b, &c, 1, 16, 12); // different init
    Rng r;
    rng_seed(&r, 1);
    int in[16];
    test_random_tokens(in, 16, 200, &r);
    const char* dir = test_tmpdir();
    char path[600], err[1024];
    snprintf(path, sizeof(path), "%s/model.bin", dir);
    ck_assert_msg(ckpt_save_model(&a, path, 42, "# test\n", err, sizeof(err)) == 0, "%s", err);
    long step;
    ck_assert_msg(ckpt_load_model(&b, path, 1, &step, NULL, 0, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(step, 42);
    gpt2_forward(&a, in, NULL, 1, 16);
    gpt2_forward(&b, in, NULL, 1, 16);
    size_t nl = (size_t)16 * a.cfg.padded_vocab;
    ck_assert(memcmp(a.logits, b.logits, sizeof(float) * nl) == 0);
    // llm.c model file both ways
    snprintf(path, sizeof(path), "%s/model_llmc.bin", dir);
    GPT2 d;
    test_build_model(&d, &c, 1, 16, 13);
    ck_assert_msg(llmc_save(&a, path, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(llmc_load(&d, path, err, sizeof(err)) == 0, "%s", err);
    gpt2_forward(&d, in, NULL, 1, 16);
    ck_assert(memcmp(a.logits, d.logits, sizeof(float) * nl) == 0);
    // loading into a model of other sizes is refused with the file named
    Config c2 = c;
    c2.n_layer = 3;
    GPT2 e;
    test_build_model(&e, &c2, 1, 16, 1);
    ck_assert_int_eq(llmc_load(&e, path, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, path) != NULL, "%s", err);
    snprintf(path, sizeof(path), "%s/model.bin", dir);
    ck_assert_int_eq(ckpt_load_model(&e, path, 1, &step, NULL, 0, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, path) && strstr(err, "sizes"), "%s", err);
    gpt2_free(&a), gpt2_free(&b), gpt2_free(&d), gpt2_free(&e);
}
END_TEST

START_TEST(test_attention_only_model) {
    enum { V = 200, L = 2, NH = 2, C = 32, T = 16 };
    Config c;
    test_tiny_config(&c, V, L, NH, C, T);
    c.mlp = 0;
    GPT2 a, full;
    test_build_model(&a, &c, 1, T, 11);
    Config cf = c;
    cf.mlp = 1;
    test_build_model(&full, &cf, 1, T, 11);
    // GPT-2's parameter count from its shapes: wte (Vp, C), wpe (T, C), per layer ln_1 2C,
    // c_attn 3C^2 + 3C, c_proj C^2 + C, ln_2 2C, c_fc 4C^2 + 4C, mlp c_proj 4C^2 + C; ln_f 2C
    const size_t Vp = 256, attn_l = 2 * C + 3 * C * C + 3 * C + C * C + C;
    const size_t mlp_l = 2 * C + 4 * C * C + 4 * C + 4 * C * C + C;
    ck_assert_uint_eq(full.num_params, Vp * C + T * C + L * (attn_l + mlp_l) + 2 * C);
    ck_assert_uint_eq(a.num_params, Vp * C + T * C + L * attn_l + 2 * C);
    ck_assert_uint_eq(a.specs[P_FCW].size, 0);
    ck_assert_uint_eq(a.specs[P_LN2W].size, 0);
    // the block output is the attention residual itself
    Rng r;
    rng_seed(&r, 3);
    int in[T];
    test_random_tokens(in, T, V, &r);
    gpt2_forward(&a, in, NULL, 1, T);
    for (size_t i = 0; i < (size_t)T * C; i++)
        ck_assert(a.residual3[i] == a.residual2[i]);
    // the key round-trips through the model file and is checked on load
    const char* dir = test_tmpdir();
    char path[600], path1[600], err[1024];
    snprintf(path, sizeof(path), "%s/model_mlp0.bin", dir);
    ck_assert_msg(ckpt_save_model(&a, path, 7, "mlp = 0\n", err, sizeof(err)) == 0, "%s", err);
    GPT2Config info;
    long step;
    ck_assert_int_eq(ckpt_read_info(path, &info, NULL, 0, NULL, &step, err, sizeof(err)), 0);
    ck_assert_int_eq(info.mlp, 0);
    GPT2 b;
    test_build_model(&b, &c, 1, T, 12);
    ck_assert_msg(ckpt_load_model(&b, path, 1, &step, NULL, 0, err, sizeof(err)) == 0, "%s", err);
    gpt2_forward(&b, in, NULL, 1, T);
    ck_assert(memcmp(a.logits, b.logits, sizeof(float) * T * a.cfg.padded_vocab) == 0);
    ck_assert_int_eq(ckpt_load_model(&full, path, 0, &step, NULL, 0, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, path) && strstr(err, "mlp = 0"), "%s", err);
    // a file whose header field 19 is 0 (every file written before the key) is mlp = 1
    snprintf(path1, sizeof(path1), "%s/model_mlp1.bin", dir);
    ck_assert_msg(ckpt_save_model(&full, path1, 7, "", err, sizeof(err)) == 0, "%s", err);
    FILE* f = fopen(path1, "rb");
    ck_assert(f != NULL);
    int32_t h[256];
    ck_assert_uint_eq(fread(h, sizeof(int32_t), 256, f), 256);
    fclose(f);
    ck_assert_int_eq(h[19], 0);
    ck_assert_int_eq(ckpt_read_info(path1, &info, NULL, 0, NULL, &step, err, sizeof(err)), 0);
    ck_assert_int_eq(info.mlp, 1);
    ck_assert_int_eq(ckpt_load_model(&a, path1, 0, &step, NULL, 0, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "mlp = 1"), "%s", err);
    // llm.c files have an MLP in every block
    snprintf(path1, sizeof(path1), "%s/model_llmc.bin", dir);
    ck_assert_int_eq(llmc_save(&a, path1, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "mlp = 0"), "%s", err);
    gpt2_free(&a), gpt2_free(&b), gpt2_free(&full);
}
END_TEST

START_TEST(test_bad_attention_config) {
    Config c;
    test_tiny_config(&c, 64, 2, 2, 8, 8);
    GPT2 m;
    char err[1024];
    strcpy(c.attention, "sofmax");
    ck_assert_int_eq(gpt2_setup_attention(&m, &c, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "'attention'") && strstr(err, "softmax"), "%s", err);
    strcpy(c.attention, "0-0:softmax");
    ck_assert_int_eq(gpt2_setup_attention(&m, &c, err, sizeof(err)), -1); // layer 1 missing
    ck_assert_msg(strstr(err, "layer 1"), "%s", err);
    strcpy(c.attention, "softmax");
    ck_assert_int_eq(config_apply_arg(&c, "attn.no_such=1", err, sizeof(err)), 0);
    ck_assert_int_eq(gpt2_setup_attention(&m, &c, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "attn.no_such") && strstr(err, "command line"), "%s", err);
}
END_TEST
START_TEST(test_attn_keys_reach_model) {
    // attn.* keys set in the config change the model: per-head parameter init and the forward
    Config c;
    test_tiny_config(&c, 64, 2, 2, 8, 8);
    char err[1024];
    strcpy(c.attention, "ssmax");
    ck_assert_int_eq(config_apply_arg(&c, "attn.theta0=0.9", err, sizeof(err)), 0);
    GPT2 m;
    test_build_model(&m, &c, 1, 8, 1);
    int si = gpt2_find_spec(&m, "attnp");
    ck_assert_int_ge(si, 0);
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < 2; h++)
            ck_assert_float_eq(gpt2_tensor(&m, m.params, si, l)[h * m.maxP], 0.9f);
    gpt2_free(&m);
    // a window of 1 key attends only to itself: different logits from the default window
    int in[8] = {1, 5, 9, 2, 7, 3, 3, 8};
    float* logits[2];
    for (int k = 0; k < 2; k++) {
        test_tiny_config(&c, 64, 2, 2, 8, 8);
        strcpy(c.attention, "window");
        if (k) ck_assert_int_eq(config_apply_arg(&c, "attn.window=1", err, sizeof(err)), 0);
        test_build_model(&m, &c, 1, 8, 1);
        gpt2_forward(&m, in, NULL, 1, 8);
        logits[k] = allocFloats((size_t)8 * m.cfg.padded_vocab);
        memcpy(logits[k], m.logits, sizeof(float) * 8 * m.cfg.padded_vocab);
        gpt2_free(&m);
    }
    // position 0 sees one key either way; later positions must differ
    ck_assert(memcmp(logits[0], logits[1], sizeof(float) * 128) == 0);
    ck_assert(memcmp(logits[0] + 7 * 128, logits[1] + 7 * 128, sizeof(float) * 128) != 0);
    free(logits[0]);
    free(logits[1]);
}
END_TEST
// The parameter table derives each tensor's llm.c slot from the row order and `stacked` from the
// first dimension: llm.c's ParameterTensors, in the order its model file holds them
// (karpathy/llm.c:train_gpt2.c, fill_in_parameter_sizes), must be slots 0..15 with llm.c's
// sizes; the attnlab rows have no slot and appear exactly when their config asks for them.
START_TEST(test_param_table_llmc_order) {
    static const char* LLMC[GPT2_NUM_LLMC] = {
        "wte",  "wpe",  "ln1w", "ln1b", "qkvw",    "qkvb",    "attprojw", "attprojb",
        "ln2w", "ln2b", "fcw",  "fcb",  "fcprojw", "fcprojb", "lnfw",     "lnfb"};
    const size_t V = 300, Vp = 384, T = 16, L = 3, C = 32;
    const size_t SIZE[GPT2_NUM_LLMC] = {
        Vp * C, T * C, L * C,         L * C,     L * 3 * C * C, L * 3 * C, L * C * C, L * C,
        L * C,  L * C, L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C,     C,         C};
    // unstacked: the embeddings, ln_f and the residual router's queries (one row per sublayer)
    static const char* FLAT[] = {"wte", "wpe", "lnfw", "lnfb", "resid.query"};
    char err[1024];
    for (int k = 0; k < 2; k++) {
        Config c;
        test_tiny_config(&c, (int)V, (int)L, 4, (int)C, (int)T);
        if (k) {
            strcpy(c.attention, "0:ssmax,1:gated,2:softmax");
            const char* kv[] = {"pos_encoding=fire", "residual=attnres", "value_residual=1"};
            for (int q = 0; q < 3; q++)
                ck_assert_msg(config_apply_arg(&c, kv[q], err, sizeof(err)) == 0, "%s", err);
        }
        GPT2 m;
        test_build_model(&m, &c, 1, (int)T, 1);
        for (int slot = 0; slot < GPT2_NUM_LLMC; slot++) {
            ck_assert_int_eq(m.specs[slot].llmc, slot);
            ck_assert_str_eq(m.specs[slot].name, LLMC[slot]);
            ck_assert_uint_eq(m.specs[slot].size, SIZE[slot]);
            ck_assert_int_eq(m.row_spec[slot], slot);
        }
        for (int i = 0; i < m.nspecs; i++) {
            const ParamSpec* s = &m.specs[i];
            if (i >= GPT2_NUM_LLMC) ck_assert_int_eq(s->llmc, -1);
            int flat = 0;
            for (size_t q = 0; q < sizeof(FLAT) / sizeof(FLAT[0]); q++)
                flat |= strcmp(s->name, FLAT[q]) == 0;
            ck_assert_msg(s->stacked == !flat, "%s stacked %d", s->name, s->stacked);
            if (s->stacked) ck_assert_uint_eq(s->shape[0], L);
        }
        const struct {
            int row;
            const char* name;
        } opt[] = {{P_ATTNP, "attnp"},
                   {P_FIRE, "fire"},
                   {P_VARIANT, "gated.w"},
                   {P_RESID_QUERY, "resid.query"},
                   {P_VRES_LAMBDA, "value_residual.lambda"}};
        for (int q = 0; q < 5; q++) {
            int si = m.row_spec[opt[q].row];
            if (!k) {
                ck_assert_int_eq(si, -1);
                ck_assert_int_eq(gpt2_find_spec(&m, opt[q].name), -1);
            } else {
                ck_assert_int_ge(si, GPT2_NUM_LLMC);
                ck_assert_str_eq(m.specs[si].name, opt[q].name);
                ck_assert_int_eq(m.specs[si].row, opt[q].row);
            }
        }
        ck_assert_int_eq(m.nspecs, k ? GPT2_NUM_LLMC + 6 : GPT2_NUM_LLMC); // gated.w, gated.b
        gpt2_free(&m);
    }
}
END_TEST
static Suite* gpt2_suite(void) {
    Suite* s = suite_create("gpt2");
    TCase* tc = tcase_create("model");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_model_threads_identical);
    tcase_add_test(tc, test_save_load_logits);
    tcase_add_test(tc, test_attention_only_model);
    tcase_add_test(tc, test_bad_attention_config);
    tcase_add_test(tc, test_attn_keys_reach_model);
    tcase_add_test(tc, test_param_table_llmc_order);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(gpt2_suite)
