// tests/test_resume_compat.c: checkpoints written before the training loop moved into train.c
// still resume. tests/fixtures/run_v1 holds the step-2 model and run-state files of a 4-step run
// made by that trainer (its README gives the command); today's ./train resumes them to step 4 and
// must end exactly where an uninterrupted run of today's ./train ends: the same losses at steps 3
// and 4, the same weights, and a byte-identical run-state file. The uninterrupted run's own
// step-2 run-state file is byte-identical to the fixture's: the layout did not change.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "data/shard.h"
#include "model/checkpoint.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

static char* slurp(const char* path, size_t* n) {
    char err[1200];
    char* t = util_read_file(path, n, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    return t;
}

static void copy_file(const char* from, const char* to) {
    size_t n;
    char* t = slurp(from, &n);
    FILE* f = fopen(to, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(t, 1, n, f), n);
    fclose(f);
    free(t);
}

static int same_bytes(const char* a, const char* b) {
    size_t na, nb;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    int eq = na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return eq;
}

// train_loss of step `step` in OUT/metrics.jsonl
static double loss_at(const char* out, long step) {
    char p[1100], pat[64];
    snprintf(p, sizeof(p), "%s/metrics.jsonl", out);
    snprintf(pat, sizeof(pat), "{\"step\":%ld,\"train_loss\":", step);
    size_t n;
    char* t = slurp(p, &n);
    char* at = strstr(t, pat);
    ck_assert_msg(at != NULL, "%s: no train_loss at step %ld", p, step);
    double v = strtod(at + strlen(pat), NULL);
    free(t);
    return v;
}

// The fixture run's config (tests/fixtures/run_v1/README).
static void fixture_config(Config* c, const char* dir, const char* out) {
    test_tiny_config(c, 257, 1, 2, 16, 16);
    c->batch_size = 2;
    util_strlcpy(c->tokenizer, "byte", sizeof(c->tokenizer));
    c->threads = 1;
    c->max_steps = 4;
    c->checkpoint_every = 2;
    c->keep_last = 5;
    c->eval_every = 0;
    c->sample_every = 0;
    c->log_every = 100;
    c->warmup_steps = 0;
    c->shuffle = 1;
    c->lr = 0.003f;
    snprintf(c->train_data, sizeof(c->train_data), "%s/train_*.bin", dir);
    snprintf(c->out_dir, sizeof(c->out_dir), "%s/%s", dir, out);
}

START_TEST(test_v1_checkpoint_resumes_exactly) {
    const char* dir = test_tmpdir();
    char p[1100], q[1100], err[1200];
    uint16_t tok[4000];
    for (int i = 0; i < 4000; i++)
        tok[i] = (uint16_t)((i * 7 + (i / 5) * 3) % 251);
    snprintf(p, sizeof(p), "%s/train_000000.bin", dir);
    ck_assert_msg(shard_write(p, tok, 4000, err, sizeof(err)) == 0, "%s", err);
    // the old checkpoint, resumed by today's trainer
    Config old;
    fixture_config(&old, dir, "old");
    ck_assert_msg(util_mkdirs(old.out_dir, err, sizeof(err)) == 0, "%s", err);
    const char* names[2] = {"model_00000002.bin", "state_00000002.bin"};
    for (int k = 0; k < 2; k++) {
        char from[1100];
        snprintf(from, sizeof(from), "%s/tests/fixtures/run_v1/%s", test_repo_root(), names[k]);
        snprintf(p, sizeof(p), "%s/%s", old.out_dir, names[k]);
        copy_file(from, p);
    }
    old.resume = 1;
    char* se = NULL;
    int rc = test_train(&old, &se);
    ck_assert_msg(rc == 0, "resume exited %d: %s", rc, se);
    free(se);
    snprintf(p, sizeof(p), "%s.stdout.txt", old.out_dir);
    size_t n;
    char* so = slurp(p, &n);
    ck_assert_msg(strstr(so, "resuming from step 2"), "%s", so);
    free(so);
    // an uninterrupted run of today's trainer
    Config now;
    fixture_config(&now, dir, "now");
    rc = test_train(&now, &se);
    ck_assert_msg(rc == 0, "straight run exited %d: %s", rc, se);
    free(se);
    for (long s = 3; s <= 4; s++)
        ck_assert_msg(loss_at(old.out_dir, s) == loss_at(now.out_dir, s),
                      "step %ld: resumed %.9g, straight %.9g", s, loss_at(old.out_dir, s),
                      loss_at(now.out_dir, s));
    snprintf(p, sizeof(p), "%s/state_00000004.bin", old.out_dir);
    snprintf(q, sizeof(q), "%s/state_00000004.bin", now.out_dir);
    ck_assert_msg(same_bytes(p, q), "run state at step 4 differs from the uninterrupted run's");
    GPT2 a, b;
    test_build_model(&a, &old, 1, 16, 1);
    test_build_model(&b, &old, 1, 16, 2);
    long sa, sb;
    snprintf(p, sizeof(p), "%s/model_00000004.bin", old.out_dir);
    snprintf(q, sizeof(q), "%s/model_00000004.bin", now.out_dir);
    ck_assert_msg(ckpt_load_model(&a, p, 1, &sa, NULL, 0, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(ckpt_load_model(&b, q, 1, &sb, NULL, 0, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(sa, 4);
    ck_assert_int_eq(sb, 4);
    ck_assert_msg(memcmp(a.params, b.params, sizeof(float) * a.num_params) == 0,
                  "weights at step 4 differ from the uninterrupted run's");
    gpt2_free(&a);
    gpt2_free(&b);
    // the layout did not change: today's step-2 run state is the fixture's, byte for byte
    char fix[1100];
    snprintf(fix, sizeof(fix), "%s/tests/fixtures/run_v1/state_00000002.bin", test_repo_root());
    snprintf(q, sizeof(q), "%s/state_00000002.bin", now.out_dir);
    ck_assert_msg(same_bytes(fix, q), "%s: today's trainer writes a different layout", q);
}
END_TEST

static Suite* resume_compat_suite(void) {
    Suite* s = suite_create("resume_compat");
    TCase* tc = tcase_create("v1");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_v1_checkpoint_resumes_exactly);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(resume_compat_suite)
