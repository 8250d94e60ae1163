// tests/test_resume_compat.c: run directories written by earlier trainers still resume.
// tests/fixtures/run_v1 holds the step-2 model and run-state files (run-state version 1) of a
// 4-step run made by the trainer as it was before the training loop moved into train.c (its
// README gives the command). Today's ./train resumes them: with nothing left to train it says the
// run is finished and changes nothing; today's reader reads every field of the version-1 file (the
// test-only copy of the old writer, tests/run_state_v1.c, writes those fields back byte for byte)
// and writes them as version 2, which reads back the same; trained on to step 4 it is at the step,
// optimizer count, RNG and data position of an uninterrupted run; and its own step-2 file holds
// the fixture's values. The checks avoid floating-point results, which differ between builds
// (-O3 -march=native vs the sanitizer build). A second case makes a version-1 run directory with
// this build (a run's checkpoint rewritten by the old writer) and checks the resumed run is bit
// for bit the uninterrupted one: every loss and the final run-state file.
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
#include "tests/run_state_v1.h"
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

// The version-2 run-state bytes that do not depend on floating-point results: the header, the
// loop section (step, sampling RNG, best_val -1 and skips 0: the fixture's run does not evaluate),
// the data section and the optim section up to its arrays (name, n, t, state arrays), in the
// trainer's section order. docs/design.md has the table.
#define STATE_EXACT_BYTES (12 + (24 + 48) + (24 + 56) + (24 + 52))

// The fields of two reads of run-state files are equal (the optimizer arrays when `arrays`).
static void same_state(const char* what, const LoopState* la, const Optimizer* oa,
                       const DataLoaderState* pa, const LoopState* lb, const Optimizer* ob,
                       const DataLoaderState* pb, int arrays) {
    ck_assert_msg(la->step == lb->step && memcmp(la->rng.s, lb->rng.s, 32) == 0, "%s: loop", what);
    ck_assert_msg(pa->epoch == pb->epoch && pa->shard_pos == pb->shard_pos &&
                      pa->window_pos == pb->window_pos && memcmp(pa->rng.s, pb->rng.s, 32) == 0,
                  "%s: data position", what);
    ck_assert_msg(oa->t == ob->t && oa->n == ob->n, "%s: optimizer header", what);
    if (arrays)
        ck_assert_msg(memcmp(oa->state, ob->state, sizeof(float) * 2 * oa->n) == 0 &&
                          la->best_val == lb->best_val && la->skips == lb->skips,
                      "%s: optimizer state", what);
}

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
    // the old run-state file reads through the trainer's calls (run_state_open, optim_state_get,
    // dataloader_state_get): the old writer (tests/run_state_v1.c) makes the same bytes from what
    // it read, optimizer state included; written as version 2, it reads back the same
    GPT2 a;
    test_build_model(&a, &old, 1, 16, 1);
    Optimizer o, o2;
    optim_init(&o, optim_lookup("adamw"), a.num_params);
    optim_init(&o2, optim_lookup("adamw"), a.num_params);
    LoopState ls, ls2;
    DataLoaderState pos, pos2;
    ck_assert_msg(test_run_state_read(fix, &ls, &o, &pos, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(ls.step, 2);
    ck_assert_int_eq(o.t, 2);
    snprintf(p, sizeof(p), "%s/state_roundtrip.bin", old.out_dir);
    ck_assert_msg(test_run_state_v1_write(p, &ls, &o, &pos, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(same_bytes(p, fix), "the v1 run state did not round-trip byte for byte");
    RunStateWriter w;
    ck_assert_msg(run_state_create(&w, p, 2, &ls, err, sizeof(err)) == 0, "%s", err);
    dataloader_state_put(&pos, &w);
    optim_state_put(&o, &w);
    ck_assert_msg(run_state_finish(&w, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(test_run_state_read(p, &ls2, &o2, &pos2, err, sizeof(err)) == 0, "%s", err);
    same_state("v1 -> v2", &ls, &o, &pos, &ls2, &o2, &pos2, 1);
    unlink(p);
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
    // today's step-2 file (version 2) holds the fixture's step, RNG, data position and optimizer
    // header
    snprintf(q, sizeof(q), "%s/state_00000002.bin", now.out_dir);
    ck_assert_msg(test_run_state_read(q, &ls2, &o2, &pos2, err, sizeof(err)) == 0, "%s", err);
    same_state(q, &ls, &o, &pos, &ls2, &o2, &pos2, 0);
    optim_free(&o);
    optim_free(&o2);
}
END_TEST

// A run directory as the previous build leaves it: a run's step-4 checkpoint with its run-state
// file rewritten in version 1 by the old writer, and nothing after it. Resumed, the run is the
// uninterrupted one bit for bit: every training loss and the final run-state file.
START_TEST(test_v1_run_dir_resumes_exactly) {
    const char* dir = test_tmpdir();
    test_write_shards(dir, 300, 61, 20000, 3000);
    Config a;
    test_run_config(&a, dir, "straight", 300);
    a.max_steps = 8;
    a.eval_every = 4;
    a.log_every = 1000000;
    a.shuffle = 1;
    test_train_ok(&a);
    Config b = a;
    snprintf(b.out_dir, sizeof(b.out_dir), "%s/resumed", dir);
    b.checkpoint_every = 4;
    test_train_ok(&b);
    char p[1100], q[1100], err[2048];
    snprintf(p, sizeof(p), "%s/model_00000008.bin", b.out_dir);
    ck_assert_int_eq(unlink(p), 0);
    snprintf(p, sizeof(p), "%s/state_00000008.bin", b.out_dir);
    ck_assert_int_eq(unlink(p), 0);
    // the step-4 run state, rewritten as the previous build wrote it
    snprintf(p, sizeof(p), "%s/state_00000004.bin", b.out_dir);
    GPT2 m;
    test_build_model(&m, &a, 1, 32, 1);
    Optimizer o;
    const size_t np = m.num_params;
    optim_init(&o, optim_lookup("adamw"), np);
    gpt2_free(&m);
    LoopState ls;
    DataLoaderState pos;
    ck_assert_msg(test_run_state_read(p, &ls, &o, &pos, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(ls.step, 4);
    ck_assert_msg(test_run_state_v1_write(p, &ls, &o, &pos, err, sizeof(err)) == 0, "%s", err);
    optim_free(&o);
    size_t n;
    char* t = slurp(p, &n);
    int32_t version;
    memcpy(&version, t + 4, 4);
    ck_assert_int_eq(version, 1);
    ck_assert_uint_eq(n, 1160 + sizeof(float) * 2 * np + 8);
    free(t);
    b.resume = 1;
    test_train_ok(&b);
    snprintf(p, sizeof(p), "%s.stdout.txt", b.out_dir);
    t = slurp(p, &n);
    ck_assert_msg(strstr(t, "resuming from step 4"), "%s", t);
    free(t);
    double la[16], lb[16];
    ck_assert_int_eq(test_read_losses(a.out_dir, la, 16, NULL), 8);
    ck_assert_int_eq(test_read_losses(b.out_dir, lb, 16, NULL), 8);
    for (int i = 0; i < 8; i++)
        ck_assert_msg(la[i] == lb[i], "step %d: straight %.9g vs resumed from v1 %.9g", i + 1,
                      la[i], lb[i]);
    snprintf(p, sizeof(p), "%s/state_00000008.bin", a.out_dir);
    snprintf(q, sizeof(q), "%s/state_00000008.bin", b.out_dir);
    ck_assert_msg(same_bytes(p, q), "%s differs from the uninterrupted run's %s", q, p);
}
END_TEST

static Suite* resume_compat_suite(void) {
    Suite* s = suite_create("resume_compat");
    TCase* tc = tcase_create("v1");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_v1_checkpoint_resumes);
    tcase_add_test(tc, test_v1_run_dir_resumes_exactly);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(resume_compat_suite)
