// tests/test_forward_rules.c: the forward neither allocates nor dies (docs/design.md).
//   - each configuration the attention cannot run is refused when the model is set up
//     (gpt2_setup_attention, which every build runs before anything is allocated), with a
//     message naming the key and the value: rope and xpos with an odd head size, fire with more
//     heads than its backward holds, diff with an inner map that reads key norms, an odd head
//     size, or under rope a head size that is not a multiple of 4, linear's performer features
//     with a head size beyond their draw; the nearest valid configuration is accepted;
//   - after setup, a forward and a backward (the first ones, under every position encoding, for
//     the default pipeline and for layer-level variants) and the steps of key/value-cache
//     decoding allocate nothing: the checked allocators' tally (util_alloc_total, which every
//     allocation in attention/ and model/ goes through) does not move;
//   - a layer hook's scratch comes from setup: attn_workspace_expect allocates nothing and
//     accepts what was reserved, and a hook that asks for more than setup reserved (a
//     layer_scratch_floats that under-reports) stops at the assertion, not with an allocation
//     or an overrun.
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "common/util.h"
#include "model/gpt2.h"
#include "model/kv_cache.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

#define V 64

static void config(Config* c, const char* attention, const char* pos, int NH, int C, int T) {
    test_tiny_config(c, V, 2, NH, C, T);
    util_strlcpy(c->attention, attention, sizeof(c->attention));
    util_strlcpy(c->pos_encoding, pos, sizeof(c->pos_encoding));
}

// The setup of config c: 0, or -1 with the message in err.
static int setup(const Config* c, char* err, size_t cap) {
    GPT2* m = callocCheck(1, sizeof(GPT2)); // large: not on the stack
    err[0] = '\0';
    const int rc = gpt2_setup_attention(m, c, err, cap);
    free(m);
    return rc;
}

typedef struct {
    const char* attention;
    const char* pos;
    int NH, C;
    const char* arg;      // an attn.* setting, or NULL
    const char* words[3]; // what the message names: the key, the value, ...
    int ok_NH, ok_C;      // the nearest valid sizes (the same configuration otherwise)
    const char* ok_pos;   // NULL: the same encoding
} Refusal;

static const Refusal REFUSALS[] = {
    {"softmax", "rope", 4, 12, NULL, {"key 'pos_encoding'", "rope", "gives 3"}, 4, 16, NULL},
    {"softmax", "xpos", 2, 10, NULL, {"key 'pos_encoding'", "xpos", "gives 5"}, 2, 12, NULL},
    {"entmax", "rope", 2, 14, NULL, {"key 'pos_encoding'", "rope", "gives 7"}, 2, 16, NULL},
    {"softmax", "fire", 130, 260, NULL, {"key 'n_head'", "fire", "130"}, 128, 256, NULL},
    {"diff",
     "learned",
     2,
     16,
     "attn.inner=keynorm",
     {"key 'attn.inner'", "keynorm", "diff"},
     0,
     0,
     NULL},
    {"diff", "learned", 2, 10, NULL, {"key 'n_embd'", "diff", "head size 5"}, 2, 12, NULL},
    {"diff", "rope", 2, 12, NULL, {"key 'pos_encoding'", "rope", "head size 6"}, 2, 16, NULL},
    {"diff", "xpos", 2, 12, NULL, {"key 'pos_encoding'", "xpos", "head size 6"}, 0, 0, "alibi"},
    {"linear",
     "learned",
     2,
     132,
     "attn.feature=performer",
     {"key 'attn.feature'", "66", "64"},
     2,
     128,
     NULL},
};

// Every refusal at setup, with its message; its nearest valid neighbour set up without error.
START_TEST(test_config_errors_at_setup) {
    const Refusal* r = &REFUSALS[_i];
    Config c;
    char err[1024];
    config(&c, r->attention, r->pos, r->NH, r->C, 16);
    if (r->arg) ck_assert_int_eq(config_apply_arg(&c, r->arg, err, sizeof(err)), 0);
    ck_assert_msg(setup(&c, err, sizeof(err)) != 0,
                  "%s under %s, n_head %d, n_embd %d%s%s: accepted", r->attention, r->pos, r->NH,
                  r->C, r->arg ? ", " : "", r->arg ? r->arg : "");
    for (int w = 0; w < 3; w++)
        ck_assert_msg(strstr(err, r->words[w]), "%s under %s: the message does not name '%s': %s",
                      r->attention, r->pos, r->words[w], err);
    Config ok;
    config(&ok, r->attention, r->ok_pos ? r->ok_pos : r->pos, r->ok_NH ? r->ok_NH : r->NH,
           r->ok_C ? r->ok_C : r->C, 16);
    if (r->arg && r->ok_NH) ck_assert_int_eq(config_apply_arg(&ok, r->arg, err, sizeof(err)), 0);
    ck_assert_msg(setup(&ok, err, sizeof(err)) == 0, "%s under %s: the valid neighbour refused: %s",
                  r->attention, ok.pos_encoding, err);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// no allocation after setup

typedef struct {
    const char* attention;
    const char* pos;
    const char* arg;
    int bf16; // run in precision bf16_ref (the bf16 path's rounding buffers, on any CPU)
} Case;

static const Case CASES[] = {
    {"softmax", "fire", NULL, 0},
    {"softmax", "rope", NULL, 0},
    {"softmax", "xpos", NULL, 0},
    {"softmax", "alibi", NULL, 0},
    {"entmax", "learned", NULL, 0},
    {"diff", "fire", NULL, 0},
    {"diff", "xpos", NULL, 0},
    {"boosted", "fire", NULL, 0},
    {"linear", "rope", "attn.feature=performer", 0},
    {"talking_heads", "fire", NULL, 0},
    {"mta", "rope", NULL, 0},
    {"deltanet", "xpos", NULL, 0},
    {"softmax", "learned", NULL, 1},
    {"boosted", "rope", NULL, 1}, // its own linear layers round their inputs in the backward
};

// One forward with targets and one backward of a freshly built model allocate nothing.
START_TEST(test_forward_backward_allocate_nothing) {
    const Case* k = &CASES[_i];
    enum { B = 2, T = 16 };
    Config c;
    char err[512];
    config(&c, k->attention, k->pos, 2, 16, T);
    if (k->arg) ck_assert_int_eq(config_apply_arg(&c, k->arg, err, sizeof(err)), 0);
    int in[B * T], tg[B * T];
    Rng r;
    rng_seed(&r, 3);
    test_random_tokens(in, B * T, V, &r);
    test_random_tokens(tg, B * T, V, &r);
    // the runtime's own first-use costs (OpenMP's team, OpenBLAS) before the tally: a model of
    // the same shape under the plain pipeline
    Config warm;
    config(&warm, "softmax", "learned", 2, 16, T);
    GPT2 w;
    test_build_model_threads(&w, &warm, B, T, 2, 1);
    if (k->bf16) gpt2_set_precision(&w, MM_BF16_REF);
    gpt2_forward(&w, in, tg, B, T);
    gpt2_zero_grad(&w);
    gpt2_backward(&w, 1.0f);
    gpt2_free(&w);
    GPT2 m;
    test_build_model_threads(&m, &c, B, T, 2, 5);
    if (k->bf16) gpt2_set_precision(&m, MM_BF16_REF);
    const size_t before = util_alloc_total();
    gpt2_forward(&m, in, tg, B, T);
    const size_t after_forward = util_alloc_total();
    gpt2_zero_grad(&m);
    gpt2_backward(&m, 1.0f);
    const size_t after_backward = util_alloc_total();
    ck_assert_msg(after_forward == before, "%s under %s: the forward allocated %zu bytes",
                  k->attention, k->pos, after_forward - before);
    ck_assert_msg(after_backward == after_forward, "%s under %s: the backward allocated %zu bytes",
                  k->attention, k->pos, after_backward - after_forward);
    ck_assert_msg(m.mean_loss > 0.0f, "%s under %s: no loss (%g)", k->attention, k->pos,
                  (double)m.mean_loss);
    gpt2_free(&m);
    mm_set_precision(MM_FP32);
}
END_TEST

// The steps of cached decoding allocate nothing: the cache is sized when it is made.
START_TEST(test_decode_steps_allocate_nothing) {
    static const char* const POS[] = {"fire", "rope", "xpos", "alibi"};
    enum { T = 16 };
    Config c;
    config(&c, "softmax", POS[_i], 2, 16, T);
    GPT2 m;
    test_build_model_threads(&m, &c, 1, T, 2, 7);
    KVCache* kv = kv_cache_new(&m, T);
    KVCache* ks = kv_cache_new_stream(&m, T);
    const size_t before = util_alloc_total();
    for (int t = 0; t < T; t++) {
        kv_cache_step(&m, kv, (5 * t + 1) % V);
        kv_cache_step(&m, ks, (3 * t + 2) % V);
    }
    kv_cache_evict(ks, 1, 4);
    kv_cache_step(&m, ks, 9);
    const size_t after = util_alloc_total();
    ck_assert_msg(after == before, "decoding under %s allocated %zu bytes", POS[_i],
                  after - before);
    ck_assert_int_eq(kv_cache_len(kv), T);
    ck_assert_int_eq(kv_cache_len(ks), T - 3);
    kv_cache_free(kv);
    kv_cache_free(ks);
    gpt2_free(&m);
}
END_TEST

START_TEST(test_scratch_expect_within_reservation) {
    AttnWorkspace* ws = attn_workspace_new(2, 8, 2, 2, 0, 0);
    attn_workspace_reserve(ws, 100);
    const long before = util_alloc_total();
    attn_workspace_expect(ws, 100);
    attn_workspace_expect(ws, 1);
    ck_assert_int_eq(util_alloc_total(), before);
    attn_workspace_free(ws);
}
END_TEST

START_TEST(test_scratch_expect_beyond_reservation) {
    AttnWorkspace* ws = attn_workspace_new(2, 8, 2, 2, 0, 0);
    attn_workspace_reserve(ws, 100);
    attn_workspace_expect(ws, 1000); // aborts: setup reserved 100 (rounded up to 112) floats
}
END_TEST

static Suite* forward_rules_suite(void) {
    Suite* s = suite_create("forward_rules");
    TCase* tc = tcase_create("forward_rules");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_config_errors_at_setup, 0,
                        (int)(sizeof(REFUSALS) / sizeof(REFUSALS[0])));
    tcase_add_loop_test(tc, test_forward_backward_allocate_nothing, 0,
                        (int)(sizeof(CASES) / sizeof(CASES[0])));
    tcase_add_loop_test(tc, test_decode_steps_allocate_nothing, 0, 4);
    tcase_add_test(tc, test_scratch_expect_within_reservation);
    const char* fork_mode = getenv("CK_FORK");
    if (fork_mode && strcmp(fork_mode, "no") == 0) // an abort would end the whole process
        fprintf(stderr, "forward_rules: skipped the scratch assertion's abort (CK_FORK=no: "
                        "Check runs the tests in this process)\n");
    else
        tcase_add_test_raise_signal(tc, test_scratch_expect_beyond_reservation, SIGABRT);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(forward_rules_suite)
