// tests/test_sample.c: text generation (model/sample.c) against the model's own logits.
//   - greedy (temperature 0) picks, at every step, the argmax of the logits of an independent
//     forward over the same prefix; top_k = 1 at any temperature is the same;
//   - stop_id ends generation at that token;
//   - top_k = 2, temperature 0.7: only the two largest logits are ever drawn, with frequencies
//     softmax(logit / 0.7) over those two (5-sigma binomial band);
//   - the same seed gives the same text; the step counter is restored.
#include <math.h>
#include <omp.h>
#include <string.h>

#include "common/util.h"
#include "model/gpt2.h"
#include "model/sample.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

#define V  64
#define TT 12

static void build(GPT2* m) {
    Config c;
    test_tiny_config(&c, V, 2, 2, 16, TT);
    test_build_model(m, &c, 1, TT, 9);
    for (size_t i = 0; i < m->num_params; i++) // larger weights: peaked, distinct logits
        m->params[i] *= 4.0f;
}

// logits of the last position of ids[0..n) (n <= TT), from a fresh forward
static void last_logits(GPT2* m, const int* ids, int n, double* out) {
    gpt2_forward(m, ids, NULL, 1, n);
    const float* row = gpt2_logits(m, 0, n - 1);
    for (int v = 0; v < V; v++)
        out[v] = row[v];
}

static int argmax(const double* x) {
    int b = 0;
    for (int v = 1; v < V; v++)
        if (x[v] > x[b]) b = v;
    return b;
}

START_TEST(test_greedy_follows_logits) {
    GPT2 m;
    build(&m);
    int ids[TT] = {3, 17, 5};
    Rng r;
    rng_seed(&r, 1);
    m.step = 41;
    int n = gpt2_generate(&m, ids, 3, TT - 3, 0.0f, 0, -1, &r);
    ck_assert_int_eq(n, TT);
    ck_assert_int_eq(m.step, 41);
    double lg[V];
    for (int t = 3; t < TT; t++) {
        last_logits(&m, ids, t, lg);
        ck_assert_msg(ids[t] == argmax(lg), "step %d: token %d, argmax %d", t, ids[t], argmax(lg));
    }
    int ids2[TT] = {3, 17, 5};
    gpt2_generate(&m, ids2, 3, TT - 3, 1.3f, 1, -1, &r); // top_k = 1 is greedy at any temperature
    ck_assert(memcmp(ids, ids2, sizeof(ids)) == 0);
    int ids3[TT] = {3, 17, 5};
    n = gpt2_generate(&m, ids3, 3, TT - 3, 0.0f, 0, ids[3], &r); // stop at the first new token
    ck_assert_int_eq(n, 4);
    gpt2_free(&m);
}
END_TEST

START_TEST(test_top_k_law) {
    GPT2 m;
    build(&m);
    const int prompt[2] = {7, 30};
    double lg[V];
    last_logits(&m, prompt, 2, lg);
    int a = argmax(lg);
    double la = lg[a];
    lg[a] = -INFINITY;
    int b = argmax(lg);
    double lb = lg[b];
    const double tau = 0.7, pa = 1.0 / (1.0 + exp((lb - la) / tau));
    Rng r;
    rng_seed(&r, 2);
    const int N = 3000;
    int na = 0;
    for (int k = 0; k < N; k++) {
        int ids[3] = {7, 30, -1};
        gpt2_generate(&m, ids, 2, 1, (float)tau, 2, -1, &r);
        ck_assert_msg(ids[2] == a || ids[2] == b, "draw %d outside the top 2", ids[2]);
        na += ids[2] == a;
    }
    double f = (double)na / N, sd = sqrt(pa * (1 - pa) / N);
    ck_assert_msg(fabs(f - pa) < 5 * sd + 1e-9, "top token frequency %.4f, expected %.4f (sd %.4f)",
                  f, pa, sd);
    ck_assert_msg(pa < 0.995, "the law is not tested: the top two logits are too far apart");
    // the same seed, the same draws
    int x[TT] = {1, 2}, y[TT] = {1, 2};
    Rng r1, r2;
    rng_seed(&r1, 77);
    rng_seed(&r2, 77);
    gpt2_generate(&m, x, 2, TT - 2, 1.0f, 0, -1, &r1);
    gpt2_generate(&m, y, 2, TT - 2, 1.0f, 0, -1, &r2);
    ck_assert(memcmp(x, y, sizeof(x)) == 0);
    gpt2_free(&m);
}
END_TEST

static Suite* sample_suite(void) {
    Suite* s = suite_create("sample");
    TCase* tc = tcase_create("sample");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_greedy_follows_logits);
    tcase_add_test(tc, test_top_k_law);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(sample_suite)
