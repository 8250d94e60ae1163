// tests/test_gpt2_train.c: training runs of tiny models with ./train (the binary built beside
// this suite, run on a config written from the test's Config), on synthetic shards:
//   - 20 steps straight == 10 steps + resume + 10 steps, exactly;
//   - one batch overfits (loss < 0.1); a tiny model's loss falls > 2 nats in 60 steps;
//   - every registered attention variant trains 40 steps with finite, falling loss;
//   - per-layer variants train, checkpoint and reload with identical logits; strict resume.
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
// runs: synthetic shards, ./train

static void run_config(Config* c, const char* dir, const char* out, int V) {
    test_run_config(c, dir, out, V);
    c->eval_every = 10;
    c->log_every = 1000000; // no progress lines (0 is not a valid value)
}

START_TEST(test_resume_exact) {
    const char* dir = test_tmpdir();
    test_write_shards(dir, 300, 61, 20000, 3000);
    Config a;
    run_config(&a, dir, "straight", 300);
    a.max_steps = 20; // the resumed run keeps it: the cosine horizon must not change at the stop
    a.shuffle = 1;
    char resumed[700];
    snprintf(resumed, sizeof(resumed), "%s/resumed", dir);
    test_expect_resume_exact(&a, resumed, "softmax", NULL, NULL);
}
END_TEST

START_TEST(test_overfit_one_batch) {
    const char* dir = test_tmpdir();
    // exactly one batch of B*T+1 tokens: every step sees the same batch
    Config c;
    run_config(&c, dir, "overfit", 300);
    Rng r;
    rng_seed(&r, 9);
    size_t n = (size_t)c.batch_size * c.seq_len + 1;
    uint16_t* t = mallocCheck(sizeof(uint16_t) * n);
    for (size_t i = 0; i < n; i++)
        t[i] = (uint16_t)rng_below(&r, 300);
    char p[600], err[1024];
    snprintf(p, sizeof(p), "%s/train_000.bin", dir);
    ck_assert_msg(shard_write(p, t, n, err, sizeof(err)) == 0, "%s", err);
    snprintf(p, sizeof(p), "%s/val_000.bin", dir);
    ck_assert_msg(shard_write(p, t, n, err, sizeof(err)) == 0, "%s", err);
    free(t);
    c.max_steps = 150;
    c.lr = 1e-2f;
    c.min_lr = 1e-3f;
    c.weight_decay = 0;
    c.eval_every = 0;
    c.eval_steps = 1;
    test_train_ok(&c);
    double l[200];
    int k = test_read_losses(c.out_dir, l, 200, NULL);
    ck_assert_int_eq(k, 150);
    ck_assert_msg(l[k - 1] < 0.1, "one batch did not overfit: final loss %.4f", l[k - 1]);
}
END_TEST

START_TEST(test_tiny_gpt2_vocab_learns) {
    // 2 layers, 64 wide, full GPT-2 vocabulary: loss falls by more than 2 nats in 60 steps
    const char* dir = test_tmpdir();
    test_write_shards(dir, 50257, 97, 30000, 5000);
    Config c;
    run_config(&c, dir, "learn", 50257);
    c.n_embd = 64;
    c.n_head = 2;
    c.block_size = 64;
    c.seq_len = 32;
    c.max_steps = 60;
    c.eval_every = 0;
    strcpy(c.tokenizer, "gpt2");
    test_train_ok(&c);
    double l[64];
    int k = test_read_losses(c.out_dir, l, 64, NULL);
    ck_assert_int_eq(k, 60);
    ck_assert_msg(l[0] - l[59] > 2.0, "loss fell only %.3f nats (%.3f -> %.3f)", l[0] - l[59], l[0],
                  l[59]);
}
END_TEST

START_TEST(test_every_variant_trains) {
    const AttnVariant* v = attn_get(_i);
    if (!test_variant_selected(v->name)) return; // ATTNLAB_TEST_VARIANTS (scripts/mutate)
    const char* dir = test_tmpdir();
    test_write_shards(dir, 300, 61, 20000, 3000);
    Config c;
    run_config(&c, dir, "v", 300);
    util_strlcpy(c.attention, v->name, sizeof(c.attention));
    c.max_steps = 40;
    c.eval_every = 0;
    c.eval_steps = 2;
    ck_assert_msg(isfinite(test_expect_learns(&c, v->name)), "%s: val loss not finite", v->name);
}
END_TEST
START_TEST(test_linear_maps_train) {
    // linear attention's Performer (redrawn every 10 steps), Cottention and SLAY feature maps:
    // 40 steps with a falling loss (test_every_variant_trains runs linear at its default map)
    static const char* const SET[] = {"attn.feature=performer", "attn.feature=cottention",
                                      "attn.feature=slay"};
    const char* dir = test_tmpdir();
    test_write_shards(dir, 300, 61, 20000, 3000);
    Config c;
    char out[32], err[1024];
    snprintf(out, sizeof(out), "lin%d", _i);
    run_config(&c, dir, out, 300);
    util_strlcpy(c.attention, "linear", sizeof(c.attention));
    ck_assert_int_eq(config_apply_arg(&c, SET[_i], err, sizeof(err)), 0);
    if (_i == 0) ck_assert_int_eq(config_apply_arg(&c, "attn.redraw=10", err, sizeof(err)), 0);
    c.max_steps = 40;
    c.eval_every = 0;
    c.eval_steps = 2;
    ck_assert_msg(isfinite(test_expect_learns(&c, SET[_i])), "%s: val loss not finite", SET[_i]);
}
END_TEST

START_TEST(test_fire_trains) {
    // pos_encoding = fire: 40 steps with a falling loss, and the FIRE tensor (c, L and the MLP
    // of every layer) moves from its init
    const char* dir = test_tmpdir();
    test_write_shards(dir, 300, 61, 20000, 3000);
    Config c;
    run_config(&c, dir, "fire", 300);
    util_strlcpy(c.pos_encoding, "fire", sizeof(c.pos_encoding));
    c.max_steps = 40;
    c.eval_every = 0;
    c.eval_steps = 2;
    ck_assert_msg(isfinite(test_expect_learns(&c, "fire")), "fire: val loss not finite");
    GPT2 a, fresh;
    test_build_model(&a, &c, 1, 32, 1);
    test_build_model(&fresh, &c, 1, 32, (uint64_t)c.seed);
    char path[700], err[1024];
    long step;
    snprintf(path, sizeof(path), "%s/model_%08d.bin", c.out_dir, 40);
    ck_assert_msg(ckpt_load_model(&a, path, 1, &step, NULL, 0, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_ge(a.row_spec[P_FIRE], 0);
    const ParamSpec* fs = &a.specs[a.row_spec[P_FIRE]];
    const size_t per = fs->size / fs->shape[0];
    for (int ly = 0; ly < c.n_layer; ly++) {
        const float* p1 = gpt2_tensor(&a, a.params, a.row_spec[P_FIRE], ly);
        const float* p0 = gpt2_tensor(&fresh, fresh.params, fresh.row_spec[P_FIRE], ly);
        ck_assert_msg(p1[0] != p0[0], "layer %d: FIRE's c did not move", ly);
        ck_assert_msg(memcmp(p1 + 2, p0 + 2, sizeof(float) * (per - 2)) != 0,
                      "layer %d: FIRE's MLP did not move", ly);
    }
    gpt2_free(&a);
    gpt2_free(&fresh);
}
END_TEST

START_TEST(test_mixed_layers_train_and_checkpoint) {
    // per-layer variants: a row map with per-head params, a layer-level wrapper and softmax
    const char* dir = test_tmpdir();
    test_write_shards(dir, 300, 61, 20000, 3000);
    Config c;
    run_config(&c, dir, "mixed", 300);
    c.n_layer = 3;
    strcpy(c.attention, "0:ssmax,1:gated,2:softmax1");
    char err[1024];
    ck_assert_int_eq(config_apply_arg(&c, "attn.sink=learn", err, sizeof(err)), 0);
    c.max_steps = 30;
    c.eval_every = 0;
    test_train_ok(&c);
    double l[40];
    int k = test_read_losses(c.out_dir, l, 40, NULL);
    ck_assert_int_eq(k, 30);
    ck_assert_msg(l[29] < l[0] - 0.3, "mixed model did not learn (%.3f -> %.3f)", l[0], l[29]);
    // the checkpoint loads into a model built from the same config, with identical logits
    GPT2 a, b;
    test_build_model(&a, &c, 1, 32, 1);
    test_build_model(&b, &c, 1, 32, 2);
    char path[700];
    snprintf(path, sizeof(path), "%s/model_%08d.bin", c.out_dir, 30);
    long step;
    ck_assert_msg(ckpt_load_model(&a, path, 1, &step, NULL, 0, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(ckpt_load_model(&b, path, 1, &step, NULL, 0, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(step, 30);
    // the variants' own tensors were trained: gated's gate weights moved from their init
    int gs = -1;
    for (int i = 0; i < a.nspecs; i++)
        if (strncmp(a.specs[i].name, "gated.", 6) == 0) gs = i;
    ck_assert_int_ge(gs, 0);
    GPT2 fresh;
    test_build_model(&fresh, &c, 1, 32, (uint64_t)c.seed);
    ck_assert(memcmp(fresh.params + fresh.specs[gs].offset, a.params + a.specs[gs].offset,
                     sizeof(float) * a.specs[gs].size) != 0);
    gpt2_free(&fresh);
    int in[32];
    for (int i = 0; i < 32; i++)
        in[i] = (i * 7) % 300;
    gpt2_forward(&a, in, NULL, 1, 32);
    gpt2_forward(&b, in, NULL, 1, 32);
    ck_assert(memcmp(a.logits, b.logits, sizeof(float) * 32 * a.cfg.padded_vocab) == 0);
    // loading under another attention spec is refused (strict resume)
    Config c2 = c;
    strcpy(c2.attention, "softmax");
    c2.n_attn = 0;
    GPT2 d;
    test_build_model(&d, &c2, 1, 32, 1);
    ck_assert_int_eq(ckpt_load_model(&d, path, 1, &step, NULL, 0, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "attention"), "%s", err);
    gpt2_free(&a), gpt2_free(&b), gpt2_free(&d);
}
END_TEST
static Suite* gpt2_train_suite(void) {
    Suite* s = suite_create("gpt2_train");
    TCase* tr = tcase_create("training");
    tcase_set_timeout(tr, 600); // the GPT-2-vocabulary run took > 300 s on a loaded shared machine
    tcase_add_test(tr, test_resume_exact);
    tcase_add_test(tr, test_overfit_one_batch);
    tcase_add_test(tr, test_tiny_gpt2_vocab_learns);
    tcase_add_test(tr, test_mixed_layers_train_and_checkpoint);
    tcase_add_test(tr, test_fire_trains);
    tcase_add_loop_test(tr, test_linear_maps_train, 0, 3);
    tcase_add_loop_test(tr, test_every_variant_trains, 0, attn_count());
    suite_add_tcase(s, tr);
    return s;
}

TEST_MAIN(gpt2_train_suite)
