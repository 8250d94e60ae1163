// tests/test_mc_eval.c: multiple-choice scoring by the model (model/mc_eval.h through data/mc.h's
// mc_run) against the independent float64 numpy reference tests/ref/ref_mc.py (every completion's
// log-likelihood, contexts cut from the left to the window, and the three accuracies); the same
// counts from `./evaluate --multiple-choice`; its bits per byte beside the loss on a shard with
// end-of-text tokens; and `mc_data` in a tiny training run: an mc record per evaluation in
// metrics.jsonl, equal to ./evaluate on the final checkpoint, written once per step after a
// resume, and a corrupt file refused before training.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/json_read.h"
#include "common/util.h"
#include "data/mc.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "model/checkpoint.h"
#include "model/gpt2.h"
#include "model/mc_eval.h"
#include "tests/file_util.h"
#include "tests/model_util.h"
#include "tests/reader_util.h"
#include "tests/testutil.h"

enum { V = 257, W = 24, NEX = 10, NC = 4 };

// The test's own writer of llm.c's evaluation format (karpathy/llm.c dev/data/data_common.py):
// NEX examples of NC completions, byte tokens below 256, each completion starting with a space.
static void write_eval(const char* path, int* labels) {
    uint16_t st[NEX * 200];
    size_t n = 0;
    int longest = 0;
    Rng r;
    rng_seed(&r, 77);
    for (int i = 0; i < NEX; i++) {
        const size_t s0 = n;
        const int ctx = 3 + (int)rng_below(&r, 28); // up to 30 tokens: many rows exceed W
        labels[i] = (int)rng_below(&r, NC);
        st[n++] = 65535;
        st[n++] = 0;
        st[n++] = (uint16_t)i;
        st[n++] = (uint16_t)labels[i];
        st[n++] = NC;
        st[n++] = (uint16_t)ctx;
        for (int t = 0; t < ctx; t++)
            st[n++] = (uint16_t)rng_below(&r, 256);
        for (int c = 0; c < NC; c++) {
            const int len = 2 + (int)rng_below(&r, 7);
            st[n++] = (uint16_t)len;
            st[n++] = ' ';
            for (int t = 1; t < len; t++)
                st[n++] = (uint16_t)(33 + rng_below(&r, 223));
        }
        st[s0 + 1] = (uint16_t)(2 * (n - s0));
        if (2 * (int)(n - s0) > longest) longest = 2 * (int)(n - s0);
    }
    int32_t h[256] = {20240522, 1, NEX, longest};
    unsigned char* buf = malloc(1024 + 2 * n);
    memcpy(buf, h, 1024); // little-endian host, as llm.c's numpy writer
    memcpy(buf + 1024, st, 2 * n);
    rd_write(path, buf, 1024 + 2 * n);
    free(buf);
}

// A 2-layer byte-vocabulary model with weights moved away from the init; saved as an attnlab
// checkpoint (CKPT, config with tokenizer = byte) and an llm.c file (LLMC).
static void make_model(GPT2* m, Config* c, const char* ckpt, const char* llmc) {
    test_tiny_config(c, V, 2, 2, 32, W);
    util_strlcpy(c->tokenizer, "byte", sizeof(c->tokenizer));
    test_build_model(m, c, NC, W, 5);
    Rng r;
    rng_seed(&r, 9);
    for (size_t i = 0; i < m->num_params; i++)
        m->params[i] += 0.15f * rng_normal(&r);
    gpt2_params_changed(m);
    char* text = NULL;
    size_t len = 0;
    FILE* f = open_memstream(&text, &len);
    config_write(c, f);
    fclose(f);
    char err[1024];
    ck_assert_msg(ckpt_save_model(m, ckpt, 0, text, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(llmc_save(m, llmc, err, sizeof(err)) == 0, "%s", err);
    free(text);
}

static int json_count(const Jv* o, const char* key) {
    const Jv* v = jv_get(o, key);
    ck_assert_msg(v && v->t == JV_NUM && v->is_uint, "reference output lacks %s", key);
    return (int)v->u;
}

// The three "metric value k/n" lines of ./evaluate --multiple-choice.
static void parse_counts(const char* out, int* k, int* n) {
    static const char* names[3] = {"\nacc ", "\nacc_norm ", "\nacc_norm_bytes "};
    for (int i = 0; i < 3; i++) {
        const char* p = strstr(out, names[i]);
        ck_assert_msg(p != NULL, "no %s line:\n%s", names[i] + 1, out);
        double v;
        ck_assert_msg(sscanf(p + 1, "%*s %lf %d/%d", &v, &k[i], n) == 3, "cannot parse: %s", p);
        ck_assert_double_eq_tol(v, (double)k[i] / *n, 6e-5);
    }
}

START_TEST(test_scores_match_reference) {
    ck_assert_msg(test_have_python("numpy"), "tests/ref/ref_mc.py needs /usr/bin/python3 with "
                                             "numpy: apt-get install python3-numpy");
    const char* dir = test_tmpdir();
    char ckpt[1100], llmc[1100], evalf[1100], refout[1100], cmd[6000], err[2048];
    snprintf(ckpt, sizeof(ckpt), "%s/model_00000000.bin", dir);
    snprintf(llmc, sizeof(llmc), "%s/model.llmc.bin", dir);
    snprintf(evalf, sizeof(evalf), "%s/mc.bin", dir);
    snprintf(refout, sizeof(refout), "%s/ref.json", dir);
    GPT2 m;
    Config c;
    make_model(&m, &c, ckpt, llmc);
    int labels[NEX];
    write_eval(evalf, labels);
    snprintf(cmd, sizeof(cmd),
             TEST_PYTHON " tests/ref/ref_mc.py --model %s --eval %s --window %d > %s", llmc, evalf,
             W, refout);
    ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
    size_t len;
    char* text = util_read_file(refout, &len, err, sizeof(err));
    ck_assert_msg(text != NULL, "%s", err);
    Jv ref;
    ck_assert_msg(json_parse(&ref, text, len, err, sizeof(err)) == 0, "%s", err);
    free(text);

    // attnlab: the set read by data/mc.c, scored by model/mc_eval.c (rows padded to 4 x W)
    char terr[256];
    Tokenizer* tok = tokenizer_load("byte", NULL, terr, sizeof(terr));
    McSet s;
    ck_assert_msg(mc_load(&s, evalf, tok, V, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(mc_check_window(&s, 0, W, err, sizeof(err)), 0);
    double ll[NEX * NC];
    McResult r = {.ll = ll};
    m.step = 7; // a training step: scoring runs in evaluation mode (-1) and puts it back
    ck_assert_int_eq(mc_run(&s, 0, W, mc_eval_score, &m, &r, err, sizeof(err)), 0);
    const Jv* rl = jv_get(&ref, "ll");
    ck_assert(rl && rl->t == JV_ARR && rl->n == NEX);
    double worst = 0;
    for (int i = 0; i < NEX; i++) {
        ck_assert_int_eq(rl->items[i].n, NC);
        for (int cc = 0; cc < NC; cc++) {
            const double want = rl->items[i].items[cc].num, got = ll[i * NC + cc];
            const double e = fabs(got - want) / fmax(1.0, fabs(want));
            if (e > worst) worst = e;
            ck_assert_msg(e < 1e-6, "example %d completion %d: ll %.8f, reference %.8f", i, cc, got,
                          want);
        }
    }
    fprintf(stderr, "mc_eval: worst relative difference to the float64 reference %.2e\n", worst);
    ck_assert_int_eq(r.n, json_count(&ref, "n"));
    ck_assert_int_eq(r.truncated, json_count(&ref, "truncated"));
    ck_assert_int_gt(r.truncated, 0);   // the left cut is exercised
    ck_assert_int_lt(r.truncated, NEX); // and so are uncut examples
    ck_assert_int_eq(r.correct[0], json_count(&ref, "acc"));
    ck_assert_int_eq(r.correct[1], json_count(&ref, "acc_norm"));
    ck_assert_int_eq(r.correct[2], json_count(&ref, "acc_norm_bytes"));
    // the step is restored, and 1 row at a time gives the same numbers
    ck_assert_int_eq(m.step, 7);
    double one[NC];
    const McExample* e = &s.ex[NEX - 1];
    for (int cc = 0; cc < NC; cc++) {
        const int keep =
            e->ctx_len < W + 1 - e->comp_len[cc] ? e->ctx_len : W + 1 - e->comp_len[cc];
        const int* cx = e->ctx + e->ctx_len - keep;
        const int* cp = e->comp[cc];
        ck_assert_int_eq(mc_eval_score(&m, &cx, &keep, &cp, &e->comp_len[cc], 1, &one[cc]), 0);
        ck_assert_double_eq_tol(one[cc], ll[(NEX - 1) * NC + cc], 1e-4);
    }
    mc_free(&s);
    tokenizer_free(tok);
    gpt2_free(&m);

    // ./evaluate: the same counts (its window is block_size; a larger --window is capped to it),
    // and the same output on 1 and 2 threads
    const char* args[2] = {"--threads 1", "--threads 2 --window 1000"};
    char outs[2][16384];
    for (int a = 0; a < 2; a++) {
        char ev[3000];
        char* out = outs[a];
        snprintf(ev, sizeof(ev), "--checkpoint %s --multiple-choice %s %s", ckpt, evalf, args[a]);
        ck_assert_msg(rd_run("evaluate", ev, out, sizeof(outs[a])) == 0, "%s", out);
        int k[3], n;
        parse_counts(out, k, &n);
        ck_assert_int_eq(n, NEX);
        ck_assert_int_eq(k[0], json_count(&ref, "acc"));
        ck_assert_int_eq(k[1], json_count(&ref, "acc_norm"));
        ck_assert_int_eq(k[2], json_count(&ref, "acc_norm_bytes"));
        ck_assert_msg(strstr(out, "window 24 tokens"), "%s", out);
    }
    ck_assert_str_eq(outs[0], outs[1]);
    // --examples N scores the first N; a corrupt file is refused naming it and the example
    char ev[3000], out[16384];
    snprintf(ev, sizeof(ev), "--checkpoint %s --multiple-choice %s --examples 3", ckpt, evalf);
    ck_assert_msg(rd_run("evaluate", ev, out, sizeof(out)) == 0, "%s", out);
    ck_assert_msg(strstr(out, "3 of 10 examples"), "%s", out);
    size_t n;
    unsigned char* raw = rd_slurp(evalf, &n);
    raw[1024 + 6] = 9; // example 0's label
    char bad[1100];
    snprintf(bad, sizeof(bad), "%s/bad.bin", dir);
    rd_write(bad, raw, n);
    free(raw);
    snprintf(ev, sizeof(ev), "--checkpoint %s --multiple-choice %s", ckpt, bad);
    RD_EXPECT(2, "evaluate", ev, bad, "example 0: label 9, but it has 4 completions");
    jv_free(&ref);
}
END_TEST

START_TEST(test_bits_per_byte_column) {
    const char* dir = test_tmpdir();
    char ckpt[1100], llmc[1100], shard[1100], err[1024];
    snprintf(ckpt, sizeof(ckpt), "%s/model_00000000.bin", dir);
    snprintf(llmc, sizeof(llmc), "%s/model.llmc.bin", dir);
    snprintf(shard, sizeof(shard), "%s/val_000.bin", dir);
    GPT2 m;
    Config c;
    make_model(&m, &c, ckpt, llmc);
    // bytes, with an end-of-text token every 7th position (it counts no bytes)
    enum { B = 2, N = 400 };
    uint16_t tok[N];
    Rng r;
    rng_seed(&r, 3);
    for (int i = 0; i < N; i++)
        tok[i] = i % 7 == 3 ? 256 : (uint16_t)rng_below(&r, 256);
    ck_assert_msg(shard_write(shard, tok, N, err, sizeof(err)) == 0, "%s", err);
    int in[B * W], tg[B * W], bytes = 0;
    for (int i = 0; i < B * W; i++) {
        in[i] = tok[i];
        tg[i] = tok[i + 1];
        bytes += tg[i] != 256;
    }
    gpt2_forward(&m, in, tg, B, W);
    const double loss = m.mean_loss;
    gpt2_free(&m);
    const double want = loss * (B * W) / (bytes * log(2.0));
    char ev[3000], out[8192];
    snprintf(ev, sizeof(ev),
             "--checkpoint %s --data '%s' --seq-len %d --batches 1 --batch-size %d --threads 1",
             ckpt, shard, W, B);
    ck_assert_msg(rd_run("evaluate", ev, out, sizeof(out)) == 0, "%s", out);
    const char* line = strstr(out, "\n24 ");
    ck_assert_msg(line != NULL, "%s", out);
    double vl, bpb;
    long ntok, nbytes;
    ck_assert_msg(sscanf(line + 1, "%*d %*s %lf %*f %*s %ld %lf %ld", &vl, &ntok, &bpb, &nbytes) ==
                      4,
                  "cannot parse: %s", line + 1);
    ck_assert_int_eq(ntok, B * W);
    ck_assert_int_eq(nbytes, bytes);
    ck_assert_int_lt(nbytes, ntok); // the end-of-text tokens are not text
    ck_assert_double_eq_tol(vl, loss, 1e-4);
    ck_assert_double_eq_tol(bpb, want, 1e-4);
    ck_assert_msg(fabs(bpb - vl / log(2.0)) > 0.01, "bpb %g indistinguishable from nats/ln2", bpb);
}
END_TEST

// The lines of OUT/metrics.jsonl holding `needle`, concatenated; *count gets their number.
static char* records(const char* out_dir, const char* needle, int* count) {
    char p[1100], err[1200];
    snprintf(p, sizeof(p), "%s/metrics.jsonl", out_dir);
    size_t len;
    char* text = util_read_file(p, &len, err, sizeof(err));
    ck_assert_msg(text != NULL, "%s", err);
    char* acc = calloc(1, len + 1);
    *count = 0;
    char* save = NULL;
    for (char* l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (!strstr(l, needle)) continue;
        strcat(acc, l);
        strcat(acc, "\n");
        (*count)++;
    }
    free(text);
    return acc;
}

START_TEST(test_training_mc_records) {
    const char* dir = test_tmpdir();
    test_write_shards(dir, 256, 37, 4000, 1000);
    Config c;
    test_run_config(&c, dir, "straight", V);
    snprintf(c.mc_data, sizeof(c.mc_data), "%s/tests/fixtures/mc_hellaswag.jsonl",
             test_repo_root());
    c.max_steps = 4;
    c.warmup_steps = 1;
    c.eval_every = 2;
    c.metrics_every = 0;
    char resumed[1100];
    snprintf(resumed, sizeof(resumed), "%s/resumed", dir);
    test_expect_resume_exact(&c, resumed, "mc_data", NULL, NULL);
    int na, nb;
    char* a = records(c.out_dir, "\"kind\":\"mc\"", &na);
    char* b = records(resumed, "\"kind\":\"mc\"", &nb);
    ck_assert_msg(na == 3, "%d mc records (steps 0, 2, 4 expected):\n%s", na, a);
    ck_assert_msg(strcmp(a, b) == 0, "the resumed run's mc records differ:\n%s---\n%s", a, b);
    // the last record against ./evaluate on the final checkpoint (window: the run's T = 32)
    const char* last = strstr(a, "{\"step\":4,");
    ck_assert_msg(last != NULL, "%s", a);
    Jv rec;
    char err[512];
    ck_assert(json_parse(&rec, last, strcspn(last, "\n"), err, sizeof(err)) == 0);
    ck_assert_int_eq((int)jv_get(&rec, "examples")->u, 5);
    ck_assert_int_gt((int)jv_get(&rec, "truncated")->u, 0); // example 3's 66-byte context
    char ev[3000], out[16384];
    snprintf(ev, sizeof(ev), "--checkpoint %s/model_00000004.bin --multiple-choice %s --window 32",
             c.out_dir, c.mc_data);
    ck_assert_msg(rd_run("evaluate", ev, out, sizeof(out)) == 0, "%s", out);
    int k[3], n;
    parse_counts(out, k, &n);
    ck_assert_int_eq(n, 5);
    static const char* keys[3] = {"acc", "acc_norm", "acc_norm_bytes"};
    for (int i = 0; i < 3; i++) {
        const Jv* v = jv_get(&rec, keys[i]);
        ck_assert_msg(v && v->t == JV_NUM, "record lacks %s: %s", keys[i], last);
        ck_assert_double_eq_tol(v->num, k[i] / 5.0, 1e-7);
    }
    jv_free(&rec);
    free(a);
    free(b);
    // llm.c's HellaSwag line in main.log
    char p[1100];
    snprintf(p, sizeof(p), "%s/main.log", c.out_dir);
    size_t len;
    char* log = test_read_text(p, &len);
    ck_assert_msg(strstr(log, "step 4 mc_acc_norm "), "%s", log);
    free(log);
    // a corrupt set is refused before training, naming the file and the example
    char bad[1100];
    snprintf(bad, sizeof(bad), "%s/bad.jsonl", dir);
    const char* line = "{\"ctx\": \"A cat\", \"endings\": [\"a\", \"b\"], \"label\": 5}\n";
    test_write_text(bad, line, strlen(line));
    util_strlcpy(c.mc_data, bad, sizeof(c.mc_data));
    snprintf(c.out_dir, sizeof(c.out_dir), "%s/bad_run", dir);
    char* se = NULL;
    ck_assert_int_eq(test_train(&c, &se), 2);
    ck_assert_msg(strstr(se, bad) && strstr(se, "line 1 (example 0)"), "%s", se);
    free(se);
}
END_TEST

static Suite* mc_eval_suite(void) {
    Suite* s = suite_create("mc_eval");
    TCase* k = tcase_create("scoring");
    tcase_set_timeout(k, 180);
    tcase_add_test(k, test_scores_match_reference);
    tcase_add_test(k, test_bits_per_byte_column);
    tcase_add_test(k, test_training_mc_records);
    suite_add_tcase(s, k);
    return s;
}

TEST_MAIN(mc_eval_suite)
