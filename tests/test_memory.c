// tests/test_memory.c: the memory estimate (model/run/memory.h) against what the model really
// allocates. For several attention configurations (plain softmax; a row map with per-head
// parameters; layer-level variants with their own tensors and caches; composed variants; rope,
// whose workspace holds RoPE tables and a gradient buffer; fire, whose workspace holds its bias
// table, gradient slots and backward rows; the layer-level variants that take
// per-thread workspace scratch) and both precisions, the estimate must
// equal the bytes the checked allocators (common/util.h: util_alloc_total) hand out while the
// model is built, its activations allocated, its precision set and the optimizer initialised,
// and, in fp32, while a forward and backward run (nothing may be allocated lazily behind the
// estimate's back). Separately, the parameter bytes of variant tensors are checked against the
// shapes the variants' documentation gives (rela: gate (C) and gain (NH, hs) per layer).
#include <check.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/matmul.h"
#include "common/util.h"
#include "model/gpt2.h"
#include "model/run/memory.h"
#include "optim/optim.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

enum { V = 300, NL = 2, NH = 2, C = 32, T = 16, B = 2 };

typedef struct {
    const char* attention;
    const char* pos;
    const char* keys; // attn.* overrides, space separated, or NULL
} MemCase;

static const MemCase CASES[] = {
    {"softmax", "learned", NULL},
    {"ssmax", "learned", NULL},            // per-head row parameters (attnp)
    {"rela", "learned", NULL},             // layer tensors, cache, composed ReLU map
    {"0:asentmax,1:gated", "alibi", NULL}, // composed entmax; gated's tensors
    {"0:asentmax,1:rela", "learned", "attn.as_map=inner attn.rela_map=inner attn.inner=ssmax"},
    {"softmax", "rope", NULL}, // rotated q, k; RoPE tables
    {"softmax", "fire", NULL}, // FIRE's bias table, its gradient slots and backward rows
    // layer-level variants with per-thread workspace scratch (layer_scratch_floats)
    {"0:linear,1:talking_heads", "learned", NULL},
    {"0:diff,1:selective", "rope", "attn.inner=ssmax"},
    {"0:lucid,1:multiscreen", "learned", NULL},
    {"0:affine,1:deltanet", "learned", NULL},
};
#define NCASES ((int)(sizeof(CASES) / sizeof(CASES[0])))

static void case_config(Config* c, const MemCase* k) {
    test_tiny_config(c, V, NL, NH, C, T);
    util_strlcpy(c->attention, k->attention, sizeof(c->attention));
    util_strlcpy(c->pos_encoding, k->pos, sizeof(c->pos_encoding));
    if (k->keys) {
        char buf[256], err[512];
        util_strlcpy(buf, k->keys, sizeof(buf));
        char* save = NULL;
        for (char* a = strtok_r(buf, " ", &save); a; a = strtok_r(NULL, " ", &save))
            ck_assert_msg(config_apply_arg(c, a, err, sizeof(err)) == 0, "%s", err);
    }
}

// The estimate for case k at precision p, and the bytes allocated by building the model, its
// activations, setting p and initialising AdamW (plus, in fp32, a forward and backward).
static void estimate_and_allocate(const MemCase* k, MMPrecision p, MemEstimate* e,
                                  double* allocated) {
    Config c;
    case_config(&c, k);
    char err[512];
    GPT2* m = callocCheck(1, sizeof(GPT2));
    ck_assert_msg(gpt2_setup_attention(m, &c, err, sizeof(err)) == 0, "%s", err);
    GPT2Config g;
    ck_assert_msg(gpt2_config_from(&g, &c, err, sizeof(err)) == 0, "%s", err);
    const int nthreads = omp_get_max_threads();
    memory_estimate(e, m, &g, B, T, optim_adamw.state_per_param, p, nthreads);
    mm_thread_scratch_free(); // this thread's operand buffers start empty, as in a new process
    const size_t before = util_alloc_total();
    gpt2_build(m, &g);
    gpt2_init(m, 5);
    gpt2_alloc_acts(m, B, T, nthreads);
    gpt2_set_precision(m, p);
    Optimizer o;
    optim_init(&o, &optim_adamw, m->num_params);
    if (p == MM_FP32) {
        int x[B * T], y[B * T];
        Rng r;
        rng_seed(&r, 9);
        test_random_tokens(x, B * T, V, &r);
        test_random_tokens(y, B * T, V, &r);
        gpt2_zero_grad(m);
        gpt2_forward(m, x, y, B, T);
        gpt2_backward(m, 1.0f);
        gpt2_forward(m, x, NULL, B, T / 2); // a shorter eval-style call allocates nothing either
    }
    *allocated = (double)(util_alloc_total() - before);
    optim_free(&o);
    gpt2_set_precision(m, MM_FP32);
    gpt2_free(m);
    free(m);
    mm_thread_scratch_free();
}

START_TEST(test_estimate_equals_allocated) {
    const MemCase* k = &CASES[_i / 2];
    const MMPrecision p = _i % 2 ? MM_BF16_REF : MM_FP32;
    MemEstimate e;
    double got;
    estimate_and_allocate(k, p, &e, &got);
    ck_assert_msg(e.total == got, "%s pos=%s %s: estimate %.0f bytes, allocated %.0f", k->attention,
                  k->pos, mm_precision_name(p), e.total, got);
    // the parts add up, and the precision decides the bf16 part
    ck_assert(e.total == e.params + e.grads + e.optim + e.bf16 + e.acts + e.workspace);
    if (p == MM_FP32)
        ck_assert(e.bf16 == 0);
    else // at least the bf16 weight copy: 2 bytes per parameter
        ck_assert(e.bf16 >= e.params / 2);
}
END_TEST

// Parameter bytes of variant tensors, from the shapes rela.c documents (at its defaults gate (C)
// and gain (NH, hs) per layer) and ssmax's one scale per head (VARIANTS.md), against plain softmax.
START_TEST(test_estimate_counts_variant_tensors) {
    MemEstimate base, rela, ssmax;
    double got;
    estimate_and_allocate(&CASES[0], MM_FP32, &base, &got);
    estimate_and_allocate(&CASES[2], MM_FP32, &rela, &got);
    estimate_and_allocate(&CASES[1], MM_FP32, &ssmax, &got);
    const double rela_floats = (double)NL * (C + C); // NH * hs = C
    // allocFloats rounds each buffer up to 64 bytes: the difference is exact up to that
    ck_assert_msg(rela.params - base.params >= 4 * rela_floats - 64 &&
                      rela.params - base.params <= 4 * rela_floats + 64,
                  "rela adds %.0f parameter bytes, expected %.0f", rela.params - base.params,
                  4 * rela_floats);
    ck_assert(rela.optim - base.optim >= 2 * 4 * rela_floats - 64);
    // rela caches obar, dobar, gate, dgate (B,T,C) and r (B,T,NH) per layer
    const double cache = 4.0 * NL * (4.0 * B * T * C + (double)B * T * NH);
    ck_assert_msg(rela.workspace - base.workspace >= cache - 64 * NL,
                  "rela's caches: %.0f bytes more workspace, expected at least %.0f",
                  rela.workspace - base.workspace, cache);
    const double ssmax_floats = (double)NL * NH; // attnp (L, NH, 1)
    ck_assert(ssmax.params - base.params >= 4 * ssmax_floats - 64 &&
              ssmax.params - base.params <= 4 * ssmax_floats + 64);
    // the activations do not depend on the attention variant
    ck_assert(rela.acts == base.acts && ssmax.acts == base.acts);
}
END_TEST

static Suite* memory_suite(void) {
    Suite* s = suite_create("memory");
    TCase* tc = tcase_create("estimate");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_estimate_equals_allocated, 0, 2 * NCASES);
    tcase_add_test(tc, test_estimate_counts_variant_tensors);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(memory_suite)
