// tests/test_stream.c: streaming evaluation with cache eviction (model/stream.c, the eviction of
// model/kv_cache.c, ./evaluate --stream).
//   (a) no eviction (the window holds the whole text): the per-position losses of the window and
//       sinks policies equal the full forward's losses on the same sequence, on a 2-layer model,
//       under every position encoding;
//   (b) with eviction: the stream's loss at every position equals a full forward of the tokens
//       the cache holds at that moment (the sinks, then the window, at positions 0..n-1) through
//       the ordinary forward, on a 1-layer model under every position encoding (learned: with
//       the wpe rows of the slots the held tokens were appended at). One
//       layer: the keys and values a cache keeps were computed when their token came in, over the
//       context of that moment; with more layers the second layer's inputs of a kept token still
//       carry the evicted tokens, which no forward over the held tokens reproduces (StreamingLLM's
//       cache is the same), whereas one layer's keys and values depend on the token alone;
//   (c) --recompute equals a full forward over the last W tokens at every position, also for a
//       variant the cache cannot serve;
//   (d) ./evaluate --stream: its loss and CSV buckets equal the library's; bad options (window 0,
//       NaN, window + sinks over block_size, sinks with recompute, a non-cacheable variant, an
//       unwritable CSV) exit 2 (1 for the file) naming the option or file.
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/util.h"
#include "data/shard.h"
#include "model/checkpoint.h"
#include "model/gpt2.h"
#include "model/kv_cache.h"
#include "model/stream.h"
#include "tests/file_util.h"
#include "tests/model_util.h"
#include "tests/reader_util.h"
#include "tests/testutil.h"

#define V 64
#define N 200 // tokens of the text: N - 1 scored positions
// The tolerance on a loss (nats). The stream's step and the full forward run the same arithmetic
// except the order OpenBLAS sums a one-row product in (tests/test_kv_cache.c, KV_TOL): the logits
// then differ in the last bits. Measured: at most 3e-6 below; a wrong position, a key rotated at
// its text index, or a wrong token evicted moves a loss by 1e-2 or more (see the "differs"
// checks, which prove the eviction changes the losses by far more than this).
#define LOSS_TOL 1e-4

static void build(GPT2* m, const char* attention, const char* pos, int L, int T, uint64_t seed) {
    Config c;
    test_tiny_config(&c, V, L, 4, 32, T);
    util_strlcpy(c.attention, attention, sizeof(c.attention));
    util_strlcpy(c.pos_encoding, pos, sizeof(c.pos_encoding));
    test_build_model(m, &c, 1, T, seed);
    Rng r;
    rng_seed(&r, seed + 1);
    for (size_t i = 0; i < m->num_params; i++) // larger, less regular weights: distinct logits
        m->params[i] = m->params[i] * 1.5f + 0.05f * (float)rng_normal(&r);
    m->step = -1;
}

// The ordinary forward's loss of predicting `target` after tokens ctx[0..n-1] at positions
// 0..n-1 (gpt2_forward's own per-position loss).
static double forward_loss(GPT2* m, const int* ctx, int n, int target) {
    int tg[256];
    ck_assert_int_le(n, 256);
    for (int j = 0; j + 1 < n; j++)
        tg[j] = ctx[j + 1];
    tg[n - 1] = target;
    gpt2_forward(m, ctx, tg, 1, n);
    return m->losses[n - 1];
}

static void text(int* x, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    test_random_tokens(x, N, V, &r);
}

static const char* const POS[] = {"learned", "rope", "alibi", "none", "xpos", "fire"};

// (a) window >= the text: no eviction, the full forward's losses
START_TEST(test_no_eviction_equals_full_forward) {
    omp_set_num_threads(2);
    int x[N];
    text(x, 3);
    float full[N], got[N];
    double worst = 0;
    for (int p = 0; p < 6; p++) {
        GPT2 m;
        build(&m, "softmax", POS[p], 2, 256, 7);
        gpt2_forward(&m, x, x + 1, 1, N - 1);
        memcpy(full, m.losses, sizeof(float) * (N - 1));
        const StreamPolicy pol[2] = {{.window = N - 1, .sinks = 0}, {.window = N - 5, .sinks = 4}};
        for (int k = 0; k < 2; k++) {
            stream_losses(&m, &pol[k], x, N, got);
            for (int i = 0; i < N - 1; i++) {
                ck_assert_msg(isfinite(got[i]), "%s: position %d", POS[p], i);
                const double d = fabs((double)got[i] - full[i]);
                if (d > worst) worst = d;
                ck_assert_msg(d <= LOSS_TOL, "%s, %s: position %d: stream %.6f, full forward %.6f",
                              POS[p], stream_policy_name(&pol[k]), i, got[i], full[i]);
            }
        }
        gpt2_free(&m);
    }
    fprintf(stderr, "stream (a): worst loss difference to the full forward %.2e\n", worst);
}
END_TEST

// (b) with eviction: a full forward of the held tokens, re-positioned at 0..n-1. Under learned
// positions a cached key keeps the wpe row of the slot its token was appended at (model/stream.h):
// slot t for the first S + W - 1 tokens, then always the last slot S + W - 1 (the cache is full,
// one position is evicted, the new token goes last). The reference forward then runs with wpe
// rows 0..n-1 replaced by the rows of the held tokens' slots.
START_TEST(test_eviction_equals_forward_of_held_tokens) {
    omp_set_num_threads(2);
    int x[N], held[64], slot[64];
    text(x, 5);
    float got[N];
    double worst = 0;
    for (int p = 0; p < 6; p++) {
        GPT2 m;
        build(&m, "softmax", POS[p], 1, 64, 9);
        const int C = m.cfg.n_embd;
        float* wpe = p == 0 ? gpt2_tensor(&m, m.params, P_WPE, 0) : NULL;
        float* wpe0 = mallocCheck(sizeof(float) * 64 * (size_t)C);
        if (wpe) memcpy(wpe0, wpe, sizeof(float) * 64 * (size_t)C);
        const StreamPolicy pol[2] = {{.window = 24, .sinks = 0}, {.window = 20, .sinks = 4}};
        for (int k = 0; k < 2; k++) {
            const int S = pol[k].sinks, W = pol[k].window, cap = S + W;
            stream_losses(&m, &pol[k], x, N, got);
            int differs = 0; // positions where the evicted tokens mattered
            for (int i = 0; i < N - 1; i++) {
                int n = 0;
                for (int t = 0; t <= i; t++)
                    if (i + 1 <= cap || t < S || t > i - W) { // held: all, the sinks, the window
                        slot[n] = t < cap - 1 ? t : cap - 1;
                        held[n++] = x[t];
                    }
                if (wpe)
                    for (int j = 0; j < n; j++)
                        memcpy(wpe + (size_t)j * C, wpe0 + (size_t)slot[j] * C,
                               sizeof(float) * (size_t)C);
                const double want = forward_loss(&m, held, n, x[i + 1]);
                if (wpe) memcpy(wpe, wpe0, sizeof(float) * 64 * (size_t)C);
                const double d = fabs((double)got[i] - want);
                if (d > worst) worst = d;
                ck_assert_msg(d <= LOSS_TOL,
                              "%s, sinks %d window %d: position %d: stream %.6f, forward of the "
                              "%d held tokens %.6f",
                              POS[p], S, W, i, got[i], n, want);
                // the whole prefix (up to 64 tokens, the model's block) gives another loss
                if (i >= cap && i < 64 && fabs(forward_loss(&m, x, i + 1, x[i + 1]) - want) > 1e-2)
                    differs++;
            }
            ck_assert_msg(differs > 10, "%s: eviction changed only %d losses", POS[p], differs);
        }
        free(wpe0);
        gpt2_free(&m);
    }
    fprintf(stderr, "stream (b): worst loss difference to the held tokens' forward %.2e\n", worst);
}
END_TEST

// the sinks survive: with sinks the stream's losses are not the window-only ones
START_TEST(test_sinks_change_the_losses) {
    omp_set_num_threads(2);
    int x[N];
    text(x, 8);
    float a[N], b[N];
    GPT2 m;
    build(&m, "softmax", "rope", 2, 64, 13);
    const StreamPolicy w = {.window = 24, .sinks = 0}, s = {.window = 20, .sinks = 4},
                       w20 = {.window = 20, .sinks = 0};
    stream_losses(&m, &w, x, N, a);
    stream_losses(&m, &s, x, N, b);
    int same_head = 1, differs = 0;
    for (int i = 0; i < 24; i++) // the same cache until the first eviction
        same_head &= fabs((double)a[i] - b[i]) <= LOSS_TOL;
    for (int i = 24; i < N - 1; i++)
        differs += fabs((double)a[i] - b[i]) > 1e-2;
    ck_assert(same_head);
    ck_assert_int_gt(differs, 100);
    // and a window of 20 alone differs from 4 sinks + 20
    stream_losses(&m, &w20, x, N, a);
    differs = 0;
    for (int i = 24; i < N - 1; i++)
        differs += fabs((double)a[i] - b[i]) > 1e-2;
    ck_assert_int_gt(differs, 100);
    gpt2_free(&m);
}
END_TEST

// (c) recompute: a full forward over the last W tokens
START_TEST(test_recompute_equals_last_window_forward) {
    omp_set_num_threads(2);
    int x[N];
    text(x, 11);
    float got[N];
    const char* cases[3][2] = {{"softmax", "learned"}, {"softmax", "rope"}, {"gated", "rope"}};
    for (int c = 0; c < 3; c++) {
        GPT2 m;
        build(&m, cases[c][0], cases[c][1], 2, 64, 17);
        const StreamPolicy p = {.window = 24, .recompute = 1};
        char err[512];
        ck_assert_msg(stream_check(&m, &p, err, sizeof(err)) == 0, "%s", err);
        stream_losses(&m, &p, x, N, got);
        for (int i = 0; i < N - 1; i++) {
            const int start = i + 1 > 24 ? i + 1 - 24 : 0;
            const double want = forward_loss(&m, x + start, i + 1 - start, x[i + 1]);
            ck_assert_msg(fabs((double)got[i] - want) <= LOSS_TOL,
                          "%s/%s: position %d: recompute %.6f, forward of %d..%d %.6f", cases[c][0],
                          cases[c][1], i, got[i], start, i, want);
        }
        gpt2_free(&m);
    }
}
END_TEST

// stream_check: the reasons name the option or the variant
START_TEST(test_check_refusals) {
    GPT2 m;
    build(&m, "softmax", "rope", 1, 32, 3);
    char err[512];
    const StreamPolicy bad[] = {{.window = 0},
                                {.window = 29, .sinks = 4},
                                {.window = 8, .sinks = -1},
                                {.window = 8, .sinks = 2, .recompute = 1}};
    const char* want[] = {"--window 0", "block_size = 32", "--sinks -1", "--recompute takes no"};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(stream_check(&m, &bad[i], err, sizeof(err)), -1);
        ck_assert_msg(strstr(err, want[i]) != NULL, "%s", err);
    }
    const StreamPolicy fits = {.window = 28, .sinks = 4};
    ck_assert_int_eq(stream_check(&m, &fits, err, sizeof(err)), 0);
    gpt2_free(&m);
    build(&m, "gated", "rope", 1, 32, 3);
    ck_assert_int_eq(stream_check(&m, &fits, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "gated") && strstr(err, "--recompute"), "%s", err);
    gpt2_free(&m);
}
END_TEST

// a byte-tokenizer checkpoint (block_size 16) of a random model; m keeps the model
static void write_model(GPT2* m, const char* path, const char* attention) {
    Config c;
    test_tiny_config(&c, 257, 2, 4, 32, 16);
    util_strlcpy(c.tokenizer, "byte", sizeof(c.tokenizer));
    util_strlcpy(c.attention, attention, sizeof(c.attention));
    util_strlcpy(c.pos_encoding, "rope", sizeof(c.pos_encoding));
    test_build_model(m, &c, 1, 16, 21);
    for (size_t i = 0; i < m->num_params; i++)
        m->params[i] *= 3.0f;
    char err[2048];
    char* txt = NULL;
    size_t tl = 0;
    FILE* f = open_memstream(&txt, &tl);
    ck_assert_int_eq(config_write(&c, f), 0);
    fclose(f);
    ck_assert_msg(ckpt_save_model(m, path, 0, txt, err, sizeof(err)) == 0, "%s", err);
    free(txt);
    m->step = -1;
}

// (d) the tool
START_TEST(test_evaluate_stream_tool) {
    const char* dir = test_tmpdir();
    char ck[1100], gated[1100], shard[1100], csv[2][1100], err[1024];
    snprintf(ck, sizeof(ck), "%s/stream_rope.bin", dir);
    snprintf(gated, sizeof(gated), "%s/stream_gated.bin", dir);
    snprintf(shard, sizeof(shard), "%s/val_000.bin", dir);
    for (int k = 0; k < 2; k++)
        snprintf(csv[k], sizeof(csv[k]), "%s/stream_%d.csv", dir, k);
    enum { NT = 300, LEN = 100 };
    uint16_t tok[NT];
    int x[LEN + 1];
    Rng r;
    rng_seed(&r, 4);
    for (int i = 0; i < NT; i++)
        tok[i] = (uint16_t)rng_below(&r, 256);
    for (int i = 0; i <= LEN; i++)
        x[i] = tok[i];
    ck_assert_msg(shard_write(shard, tok, NT, err, sizeof(err)) == 0, "%s", err);
    GPT2 m, g;
    write_model(&m, ck, "softmax");
    write_model(&g, gated, "gated");
    gpt2_free(&g);
    const StreamPolicy pols[2] = {{.window = 10, .sinks = 4}, {.window = 12, .recompute = 1}};
    const char* opts[2] = {"--window 10 --sinks 4", "--window 12 --recompute"};
    for (int k = 0; k < 2; k++) {
        float want[LEN];
        stream_losses(&m, &pols[k], x, LEN + 1, want);
        double mean = 0;
        for (int i = 0; i < LEN; i++)
            mean += want[i];
        mean /= LEN;
        char args[6000], out[16384];
        snprintf(args, sizeof(args),
                 "--checkpoint %s --stream --data '%s' %s --length %d --bucket 32 --csv %s "
                 "--threads 1",
                 ck, shard, opts[k], LEN, csv[k]);
        ck_assert_msg(rd_run("evaluate", args, out, sizeof(out)) == 0, "%s", out);
        const char* line = strstr(out, "\nloss ");
        ck_assert_msg(line != NULL, "%s", out);
        double loss, ppl;
        int ntok;
        ck_assert_int_eq(sscanf(line, "\nloss %lf perplexity %lf tokens %d", &loss, &ppl, &ntok),
                         3);
        ck_assert_int_eq(ntok, LEN);
        ck_assert_msg(fabs(loss - mean) < 1e-4, "tool %.6f, library %.6f", loss, mean);
        ck_assert_double_eq_tol(ppl, exp(mean), 1e-3 * exp(mean));
        // the CSV: the header, then buckets 0-31, 32-63, 64-95, 96-99 with their mean losses
        FILE* f = fopen(csv[k], "r");
        ck_assert_ptr_nonnull(f);
        char row[512];
        ck_assert_ptr_nonnull(fgets(row, sizeof(row), f));
        ck_assert_str_eq(row, "policy,window,sinks,first,last,tokens,loss,perplexity\n");
        int rows = 0, total = 0;
        while (fgets(row, sizeof(row), f)) {
            char pol[32];
            int w, s, a, b, t;
            double l, pp;
            ck_assert_int_eq(
                sscanf(row, "%31[^,],%d,%d,%d,%d,%d,%lf,%lf", pol, &w, &s, &a, &b, &t, &l, &pp), 8);
            ck_assert_str_eq(pol, stream_policy_name(&pols[k]));
            ck_assert_int_eq(w, pols[k].window);
            ck_assert_int_eq(s, pols[k].sinks);
            ck_assert_int_eq(a, 32 * rows);
            ck_assert_int_eq(b, a + 32 <= LEN ? a + 31 : LEN - 1);
            ck_assert_int_eq(t, b - a + 1);
            double bm = 0;
            for (int i = a; i <= b; i++)
                bm += want[i];
            bm /= t;
            ck_assert_msg(fabs(l - bm) < 1e-4, "bucket %d: %.6f, library %.6f", rows, l, bm);
            ck_assert_double_eq_tol(pp, exp(l), 1e-5 * exp(l));
            total += t;
            rows++;
        }
        fclose(f);
        ck_assert_int_eq(rows, 4);
        ck_assert_int_eq(total, LEN);
    }
    gpt2_free(&m);
    // scripts/plot_stream draws both on one PNG; a NaN loss is refused naming file:line
    if (test_have_python("matplotlib")) {
        char cmd[6000], png[1100];
        snprintf(png, sizeof(png), "%s/stream.png", dir);
        snprintf(cmd, sizeof(cmd), "%s %s/scripts/plot_stream --out %s %s %s >/dev/null",
                 TEST_PYTHON, test_repo_root(), png, csv[0], csv[1]);
        ck_assert_int_eq(system(cmd), 0);
        FILE* f = fopen(png, "rb");
        unsigned char magic[8] = {0};
        ck_assert(f && fread(magic, 1, 8, f) == 8 && fclose(f) == 0);
        ck_assert(memcmp(magic, "\x89PNG\r\n\x1a\n", 8) == 0);
        f = fopen(csv[1], "a");
        ck_assert(f && fputs("recompute,12,0,100,131,32,nan,nan\n", f) >= 0 && fclose(f) == 0);
        char errf[1100];
        snprintf(errf, sizeof(errf), "%s/plot_err.txt", dir);
        snprintf(cmd, sizeof(cmd), "%s %s/scripts/plot_stream --out %s %s %s 2>%s", TEST_PYTHON,
                 test_repo_root(), png, csv[0], csv[1], errf);
        const int st = system(cmd);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2);
        size_t n;
        char* msg = (char*)rd_slurp(errf, &n);
        msg[n] = '\0'; // rd_slurp leaves room for it
        char want[1200];
        snprintf(want, sizeof(want), "%s:6: loss nan is not finite", csv[1]);
        ck_assert_msg(n > 0 && strstr(msg, want), "%.*s", (int)n, msg);
        free(msg);
    } else {
        fprintf(stderr, "test_evaluate_stream_tool: %s has no matplotlib: plot not run\n",
                TEST_PYTHON);
    }
    // refusals, naming the option or file
    struct {
        const char* model;
        const char* opts;
        int rc;
        const char* needle;
    } bad[] = {
        {ck, "--window 0", 2, "--window"},
        {ck, "--window nan", 2, "--window: 'nan'"},
        {ck, "--window 14 --sinks 4", 2, "--window 14 + --sinks 4"},
        {ck, "--window 8 --sinks 2 --recompute", 2, "--recompute takes no --sinks"},
        {gated, "--window 8", 2, "'gated'"},
        {ck, "--window 8 --csv /nonexistent_dir/s.csv", 1, "/nonexistent_dir/s.csv"},
        {ck, "--window 8 --csv /dev/full", 1, "/dev/full"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char args[4000];
        snprintf(args, sizeof(args), "--checkpoint %s --stream --data '%s' --length 50 %s",
                 bad[i].model, shard, bad[i].opts);
        RD_EXPECT(bad[i].rc, "evaluate", args, bad[i].needle);
    }
    // the stream options belong to --stream
    char args[4000];
    snprintf(args, sizeof(args), "--checkpoint %s --data '%s' --sinks 4", ck, shard);
    RD_EXPECT(2, "evaluate", args, "--sinks, --recompute and --csv belong to --stream");
}
END_TEST

static Suite* stream_suite(void) {
    Suite* s = suite_create("stream");
    TCase* tc = tcase_create("losses");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_no_eviction_equals_full_forward);
    tcase_add_test(tc, test_eviction_equals_forward_of_held_tokens);
    tcase_add_test(tc, test_sinks_change_the_losses);
    tcase_add_test(tc, test_recompute_equals_last_window_forward);
    tcase_add_test(tc, test_check_refusals);
    suite_add_tcase(s, tc);
    tc = tcase_create("tool");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_evaluate_stream_tool);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(stream_suite)
