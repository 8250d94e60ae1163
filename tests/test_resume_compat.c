// tests/test_resume_compat.c: checkpoints written before the training loop moved into train.c
// still resume. tests/fixtures/run_v1 holds the step-2 model and run-state files of a 4-step run
// made by that trainer (its README gives the command). Today's ./train resumes them: with nothing
// left to train it says the run is finished and changes nothing; today's run-state reader and
// writer take the step-2 file back byte for byte (optimizer state included); trained on to step 4
// it is at the step, optimizer count, RNG and data position of an uninterrupted run; and its own
// step-2 file has the fixture's layout. The checks avoid floating-point results, which differ
// between builds (-O3 -march=native vs the sanitizer build); with the build that made the fixture,
// the resumed run is also bit-identical to the uninterrupted one (test_gpt2_train's
// test_resume_exact checks that property for today's files).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/run_state.h"
#include "common/util.h"
#include "data/dataloader.h"
#include "data/shard.h"
#include "model/checkpoint.h"
#include "optim/optim.h"
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

// Bytes [0, n) of two files are equal, and so are their sizes.
static int same_prefix(const char* a, const char* b, size_t n) {
    size_t na, nb;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    int eq = na == nb && na >= n && memcmp(x, y, n) == 0;
    free(x);
    free(y);
    return eq;
}

// The run-state bytes that do not depend on floating-point results: the header (optimizer n, t,
// state arrays, step), the optimizer name and the loop record up to best_val (step, sampling
// RNG, the loader's position). docs/design.md has the table.
#define STATE_EXACT_BYTES (1024 + 32 + 8 + 32 + 56)

START_TEST(test_v1_checkpoint_resumes) {
    const char* dir = test_tmpdir();
    char p[1100], q[1100], fix[1100], err[1200];
    uint16_t tok[4000];
    for (int i = 0; i < 4000; i++)
        tok[i] = (uint16_t)((i * 7 + (i / 5) * 3) % 251);
    snprintf(p, sizeof(p), "%s/train_000000.bin", dir);
    ck_assert_msg(shard_write(p, tok, 4000, err, sizeof(err)) == 0, "%s", err);
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
    snprintf(fix, sizeof(fix), "%s/tests/fixtures/run_v1/state_00000002.bin", test_repo_root());
    // resumed at step 2 with nothing left to train, today's trainer says the run is finished and
    // leaves every file as it is
    old.resume = 1;
    old.max_steps = 2;
    test_train_ok(&old);
    snprintf(p, sizeof(p), "%s.stdout.txt", old.out_dir);
    size_t n;
    char* so = slurp(p, &n);
    ck_assert_msg(strstr(so, "the run is finished (checkpoint at step 2"), "%s", so);
    free(so);
    snprintf(p, sizeof(p), "%s/state_00000002.bin", old.out_dir);
    ck_assert_msg(same_bytes(p, fix), "a finished run given resume=1 changed its state file");
    snprintf(p, sizeof(p), "%s/metrics.jsonl", old.out_dir);
    ck_assert_msg(!util_file_exists(p), "a finished run given resume=1 wrote %s", p);
    // the old run-state file reads and writes back byte for byte through the calls the trainer
    // makes (the loader's position, the loop state, optim_state_load / optim_state_save),
    // optimizer state included, and the old model file loads strictly
    GPT2 a;
    test_build_model(&a, &old, 1, 16, 1);
    Optimizer o;
    optim_init(&o, optim_lookup("adamw"), a.num_params);
    RunStateHead h;
    ck_assert_msg(optim_state_load(&o, fix, &h, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(h.loop.step, 2);
    DataLoaderState pos;
    dataloader_state_read(&pos, h.pos);
    RunStateHead w = {.loop = h.loop};
    dataloader_state_write(&pos, w.pos);
    snprintf(p, sizeof(p), "%s/state_roundtrip.bin", old.out_dir);
    ck_assert_msg(optim_state_save(&o, p, &w, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(same_bytes(p, fix), "the v1 run state did not round-trip byte for byte");
    unlink(p);
    optim_free(&o);
    long sa;
    snprintf(q, sizeof(q), "%s/tests/fixtures/run_v1/model_00000002.bin", test_repo_root());
    ck_assert_msg(ckpt_load_model(&a, q, 1, &sa, NULL, 0, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(sa, 2);
    gpt2_free(&a);
    // resumed on to step 4, it continues where an uninterrupted run of today's trainer is: the
    // same step, optimizer update count, sampling RNG and data position at step 4
    old.max_steps = 4;
    test_train_ok(&old);
    Config now;
    fixture_config(&now, dir, "now");
    test_train_ok(&now);
    snprintf(p, sizeof(p), "%s/state_00000004.bin", old.out_dir);
    snprintf(q, sizeof(q), "%s/state_00000004.bin", now.out_dir);
    ck_assert_msg(same_prefix(p, q, STATE_EXACT_BYTES),
                  "step 4 after the v1 resume is not where the uninterrupted run is");
    // the layout did not change: today's step-2 file has the fixture's size, header, name and
    // loop record
    snprintf(q, sizeof(q), "%s/state_00000002.bin", now.out_dir);
    ck_assert_msg(same_prefix(q, fix, STATE_EXACT_BYTES),
                  "%s: today's trainer writes a different layout than %s", q, fix);
}
END_TEST

static Suite* resume_compat_suite(void) {
    Suite* s = suite_create("resume_compat");
    TCase* tc = tcase_create("v1");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_v1_checkpoint_resumes);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(resume_compat_suite)
