// tests/test_sample.c: text generation (model/sample.c) against the model's own logits.
//   - greedy (temperature 0) picks, at every step, the argmax of the logits of an independent
//     forward over the same prefix; top_k = 1 at any temperature is the same;
//   - stop_id ends generation at that token;
//   - top_k = 2, temperature 0.7: only the two largest logits are ever drawn, with frequencies
//     softmax(logit / 0.7) over those two (5-sigma binomial band);
//   - the same seed gives the same text; the step counter is restored;
//   - a sample's text shows the end-of-text token as the line "--- end of document ---"
//     (sample_write), raw as the token's own text; ./generate prints a model that only ever
//     predicts end-of-text that way, and with --raw as "<|endoftext|>"; so do the trainer's
//     samples.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/util.h"
#include "data/tokenizer.h"
#include "model/checkpoint.h"
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

static const unsigned char* tok_bytes(const void* tok, int id, size_t* len) {
    return tokenizer_token_bytes(tok, id, len);
}

// sample_write into a string
static char* written(const int* ids, int n, int eot, const Tokenizer* tok, int raw) {
    char* buf = NULL;
    size_t len = 0;
    FILE* f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(sample_write(f, ids, n, eot, tok ? tok_bytes : NULL, tok, raw), 0);
    ck_assert_int_eq(fclose(f), 0);
    return buf;
}

START_TEST(test_document_breaks_shown) {
    char err[512];
    Tokenizer* tok = tokenizer_load("byte", NULL, err, sizeof(err));
    ck_assert_msg(tok != NULL, "%s", err);
    const int eot = tokenizer_eot(tok); // 256
    const int ids[] = {'H', 'i', eot, 'Y', 'o', eot};
    char* t = written(ids, 6, eot, tok, 0);
    ck_assert_str_eq(t, "Hi\n--- end of document ---\nYo\n--- end of document ---\n");
    free(t);
    t = written(ids, 6, eot, tok, 1);
    ck_assert_str_eq(t, "Hi<|endoftext|>Yo<|endoftext|>");
    free(t);
    t = written(ids, 6, eot, NULL, 0); // no tokenizer: the ids
    ck_assert_str_eq(t, "72 105 \n--- end of document ---\n89 111 \n--- end of document ---\n");
    free(t);
    tokenizer_free(tok);
}
END_TEST

// Exit code and stdout of a shell command.
static int run_out(const char* cmd, char* out, size_t cap) {
    FILE* p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

// A byte-vocabulary model whose every prediction is end-of-text (ln_f maps every position to
// the same vector b, and wte's EOT row is 10 b, every other row 0), through ./generate.
START_TEST(test_generate_shows_document_breaks) {
    const char* dir = test_tmpdir();
    Config c;
    test_tiny_config(&c, 257, 1, 2, 16, 8);
    util_strlcpy(c.tokenizer, "byte", sizeof(c.tokenizer));
    GPT2 m;
    test_build_model(&m, &c, 1, 8, 5);
    const size_t C = 16;
    float* wte = m.params + m.specs[P_WTE].offset;
    float* lnfw = m.params + m.specs[P_LNFW].offset;
    float* lnfb = m.params + m.specs[P_LNFB].offset;
    memset(wte, 0, sizeof(float) * m.specs[P_WTE].size);
    for (size_t i = 0; i < C; i++) {
        lnfw[i] = 0.0f;
        lnfb[i] = (i % 2) ? 1.0f : -1.0f;
        wte[256 * C + i] = 10.0f * lnfb[i];
    }
    char ck[1100], err[2048], cmd[4096], out[4096];
    snprintf(ck, sizeof(ck), "%s/eot.bin", dir);
    char* text = NULL;
    size_t tl = 0;
    FILE* f = open_memstream(&text, &tl);
    ck_assert_int_eq(config_write(&c, f), 0);
    fclose(f);
    ck_assert_msg(ckpt_save_model(&m, ck, 0, text, err, sizeof(err)) == 0, "%s", err);
    free(text);
    gpt2_free(&m);
    snprintf(cmd, sizeof(cmd),
             "OMP_NUM_THREADS=1 %s/generate --checkpoint %s --n 1 --tokens 2 --temperature 0 "
             "2>/dev/null",
             test_build_dir(), ck);
    ck_assert_int_eq(run_out(cmd, out, sizeof(out)), 0);
    const char* s1 = strstr(out, "---- sample 1 ----\n");
    ck_assert_msg(s1 != NULL, "%s", out);
    ck_assert_str_eq(s1 + 19, "\n--- end of document ---\n\n--- end of document ---\n\n");
    snprintf(cmd, sizeof(cmd),
             "OMP_NUM_THREADS=1 %s/generate --checkpoint %s --n 1 --tokens 2 --temperature 0 "
             "--raw 2>/dev/null",
             test_build_dir(), ck);
    ck_assert_int_eq(run_out(cmd, out, sizeof(out)), 0);
    s1 = strstr(out, "---- sample 1 ----\n");
    ck_assert_msg(s1 != NULL, "%s", out);
    ck_assert_str_eq(s1 + 19, "<|endoftext|><|endoftext|>\n");
    // the trainer's samples (init_from the same model, lr 0: it stays one that predicts EOT)
    test_write_shards(dir, 257, 13, 4096, 1024);
    snprintf(cmd, sizeof(cmd),
             "OMP_NUM_THREADS=1 %s/train n_layer=1 n_head=2 n_embd=16 block_size=8 seq_len=8 "
             "batch_size=2 vocab_size=257 tokenizer=byte threads=1 max_steps=1 lr=0 min_lr=0 "
             "warmup_steps=0 eval_every=0 metrics_every=0 sample_every=1 sample_tokens=2 "
             "checkpoint_every=0 train_data='%s/train_*.bin' val_data='%s/val_*.bin' "
             "init_from=%s out_dir=%s/run 2>/dev/null",
             test_build_dir(), dir, dir, ck, dir);
    ck_assert_int_eq(run_out(cmd, out, sizeof(out)), 0);
    ck_assert_msg(strstr(out, "---- sample at step 1 ----\n\n--- end of document ---\n\n--- end "
                              "of document ---\n\n---"),
                  "%s", out);
}
END_TEST

static Suite* sample_suite(void) {
    Suite* s = suite_create("sample");
    TCase* tc = tcase_create("sample");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_greedy_follows_logits);
    tcase_add_test(tc, test_top_k_law);
    tcase_add_test(tc, test_document_breaks_shown);
    tcase_add_test(tc, test_generate_shows_document_breaks);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(sample_suite)
