// tests/test_resume_keys.c: a resumed run changes no key that changes the computation unless
// resume_change names it, and records each change it makes (common/resume_keys.h,
// docs/configuration.md "Resume"); a warmup-stable-decay run extends cleanly (optim/schedule.h,
// docs/optimizers.md). Drives the real BUILD/train on a tiny byte-level model:
//   - each of lr, min_lr, warmup_steps, lr_schedule, max_steps, weight_decay, beta2, grad_clip,
//     precision and attn.bias_mode changed on resume is refused naming the key and the override;
//     with resume_change=KEY it trains, and the change is in main.log, metrics.jsonl (an event
//     record at the resumed step) and config.conf; the record of a change stays through later
//     resumes; keys that change nothing (cadence, threads) need no override; the model's shape
//     cannot be named; an unknown key in resume_change is refused with a suggestion;
//   - lr_schedule = wsd: a run of 12 steps resumed from its stable phase with max_steps = 20 and
//     resume_change = max_steps trains exactly as an uninterrupted 20-step run (every learning
//     rate, loss and gradient norm), and those learning rates are the schedule's formula.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "tests/testutil.h"
#include "tests/train_util.h"

static void path_in(char* buf, size_t cap, const char* name) {
    snprintf(buf, cap, "%s/%s", tu_dir(), name);
}

#define BASE                                                                                       \
    "max_steps=8 eval_every=4 checkpoint_every=4 keep_last=5 warmup_steps=2 lr_schedule=cosine "   \
    "precision=fp32 attention=sigmoid attn.bias_mode=ln_T"

// A run of BASE resumable from step 4 (its step-8 checkpoint dropped), in DIR.
static void make_base(char* dir, size_t cap) {
    path_in(dir, cap, "keys_base");
    if (tu_count(dir, "model_00000004") == 1) return;
    ck_assert_int_eq(tu_train(dir, BASE), 0);
    tu_drop_ckpt(dir, 8);
}

static int contains(const char* dir, const char* file, const char* text) {
    char* t = tu_file_in(dir, file);
    int yes = strstr(t, text) != NULL;
    free(t);
    return yes;
}

START_TEST(test_changed_keys_refused_unless_named) {
    char base[1100], dir[1100];
    make_base(base, sizeof(base));
    path_in(dir, sizeof(dir), "keys_run");
    static const char* const CHANGES[][2] = {
        {"lr", "0.002"},           {"min_lr", "0.0001"},
        {"warmup_steps", "3"},     {"lr_schedule", "linear"},
        {"max_steps", "10"},       {"weight_decay", "0.05"},
        {"beta2", "0.99"},         {"grad_clip", "0.5"},
        {"precision", "bf16_ref"}, {"attn.bias_mode", "fixed"},
    };
    for (size_t i = 0; i < sizeof(CHANGES) / sizeof(CHANGES[0]); i++) {
        const char *key = CHANGES[i][0], *val = CHANGES[i][1];
        char extra[2048], want[512];
        tu_copy_dir(base, dir);
        snprintf(extra, sizeof(extra), BASE " resume=1 %s=%s", key, val);
        int rc = tu_train(dir, extra);
        char* se = tu_log(dir, "err");
        char named[128], override[128];
        snprintf(named, sizeof(named), "key '%s' was '", key);
        snprintf(override, sizeof(override), "resume_change=%s ", key);
        ck_assert_msg(rc == 2, "%s=%s on resume: exit %d; %s", key, val, rc, se);
        ck_assert_msg(strstr(se, named) && strstr(se, override) && strstr(se, val), "%s: %s", key,
                      se);
        free(se);
        ck_assert_msg(!contains(dir, "main.log", "resumed"), "%s: the refused run wrote", key);
        // named: it trains, and the change is recorded with its step
        snprintf(extra, sizeof(extra), BASE " resume=1 %s=%s resume_change=%s", key, val, key);
        rc = tu_train(dir, extra);
        se = tu_log(dir, "err");
        ck_assert_msg(rc == 0, "%s=%s resume_change=%s: exit %d; %s", key, val, key, rc, se);
        free(se);
        snprintf(want, sizeof(want), "# resume_change at step 4: %s '", key);
        ck_assert_msg(contains(dir, "main.log", want), "%s: not in main.log", key);
        snprintf(want, sizeof(want), "{\"step\":4,\"event\":\"resume_change\",\"key\":\"%s\"", key);
        ck_assert_msg(contains(dir, "metrics.jsonl", want), "%s: no event record", key);
        snprintf(want, sizeof(want), "# resume_change: step 4: %s '", key);
        ck_assert_msg(contains(dir, "config.conf", want), "%s: not in config.conf", key);
        snprintf(want, sizeof(want), "-> '%s'", val);
        ck_assert_msg(contains(dir, "config.conf", want), "%s: new value not recorded", key);
        if (strcmp(key, "lr") == 0) {
            // the new schedule from step 4 on: cosine, lr 0.002, min_lr 6e-5, warmup 2, 8 steps
            char* m = tu_file_in(dir, "metrics.jsonl");
            const double want_lr = 6e-5 + 0.5 * (1 + cos(M_PI * 2.0 / 6.0)) * (0.002 - 6e-5);
            ck_assert_double_eq_tol(tu_record(m, 5, "lr"), want_lr, 1e-8);
            free(m);
            // the record stays through a later resume (step 8, max_steps changed too): the
            // step-8 model file saved lr 0.002, so lr needs no override any more
            snprintf(extra, sizeof(extra),
                     BASE " resume=1 lr=0.002 max_steps=12 resume_change=max_steps");
            ck_assert_int_eq(tu_train(dir, extra), 0);
            ck_assert_msg(contains(dir, "config.conf", "# resume_change: step 4: lr '") &&
                              contains(dir, "config.conf",
                                       "# resume_change: step 8: max_steps "
                                       "'8' -> '12'"),
                          "the history of changes is not in config.conf");
            ck_assert_msg(contains(dir, "metrics.jsonl", "\"key\":\"lr\"") &&
                              contains(dir, "metrics.jsonl", "\"key\":\"max_steps\""),
                          "the events of both resumes are not in metrics.jsonl");
        }
    }
    // two keys at once: both named, and the override that accepts both
    tu_copy_dir(base, dir);
    ck_assert_int_eq(tu_train(dir, BASE " resume=1 lr=0.002 beta2=0.99 resume_change=beta2"), 2);
    char* se = tu_log(dir, "err");
    ck_assert_msg(strstr(se, "key 'lr' was") && strstr(se, "resume_change=beta2,lr "), "%s", se);
    free(se);
    // keys that change nothing need no override; the model's shape and the data cannot be named;
    // an unknown key is refused with a suggestion
    ck_assert_int_eq(tu_train(dir, BASE " resume=1 eval_every=2 checkpoint_every=2 keep_last=2 "
                                        "log_every=3 threads=1"),
                     0);
    tu_copy_dir(base, dir); // resumable again from step 4
    const char* const bad[][2] = {
        {"pos_encoding=rope", "key 'pos_encoding' was 'learned' in the checkpoint"},
        {"resume_change=n_layer", "cannot change on resume"},
        {"resume_change=batch_size", "cannot change on resume"},
        {"resume_change=lrr", "did you mean 'lr'"}};
    for (int k = 0; k < 4; k++) {
        char extra[1024];
        snprintf(extra, sizeof(extra), BASE " resume=1 %s", bad[k][0]);
        ck_assert_int_eq(tu_train(dir, extra), 2);
        se = tu_log(dir, "err");
        ck_assert_msg(strstr(se, bad[k][1]), "%s: %s", bad[k][0], se);
        free(se);
    }
    ck_assert_int_eq(tu_train(dir, BASE " resume_change=lr"), 2); // without resume = 1
    se = tu_log(dir, "err");
    ck_assert_msg(strstr(se, "resume = 1 only"), "%s", se);
    free(se);
}
END_TEST

// The learning rate of 0-based step i of lr_schedule = wsd (lr 6e-4, min_lr 6e-5, warmup 2,
// decay_steps 4, 20 steps), from the definition: linear warmup, constant, linear decay over the
// last 4 steps.
static double wsd_lr(int i) {
    const double lr = (double)6e-4f, mn = (double)6e-5f;
    if (i < 2) return lr * (i + 1) / 2;
    if (i < 16) return lr;
    return mn + (1.0 - (i - 16) / 4.0) * (lr - mn);
}

START_TEST(test_wsd_extends_exactly) {
    char ref[1100], part[1100], ext[1100];
    path_in(ref, sizeof(ref), "wsd_ref");
    path_in(part, sizeof(part), "wsd_part");
    path_in(ext, sizeof(ext), "wsd_ext");
    const char* wsd = "lr_schedule=wsd decay_steps=4 warmup_steps=2 eval_every=4 keep_last=5";
    char a[512];
    snprintf(a, sizeof(a), "%s max_steps=20", wsd);
    ck_assert_int_eq(tu_train(ref, a), 0);
    // 12 steps, decaying over 8..12; its step-8 checkpoint is the end of the stable phase
    snprintf(a, sizeof(a), "%s max_steps=12 checkpoint_every=4", wsd);
    ck_assert_int_eq(tu_train(part, a), 0);
    char* m = tu_file_in(part, "metrics.jsonl");
    ck_assert_double_eq_tol(tu_record(m, 10, "lr"), 6e-5 + 0.75 * (6e-4 - 6e-5), 1e-9);
    free(m);
    tu_copy_dir(part, ext);
    tu_drop_ckpt(ext, 12);
    snprintf(a, sizeof(a), "%s max_steps=20 checkpoint_every=4 resume=1", wsd);
    ck_assert_int_eq(tu_train(ext, a), 2);
    char* se = tu_log(ext, "err");
    ck_assert_msg(strstr(se, "key 'max_steps' was '12'") && strstr(se, "resume_change=max_steps"),
                  "%s", se);
    free(se);
    snprintf(a, sizeof(a), "%s max_steps=20 checkpoint_every=4 resume=1 resume_change=max_steps",
             wsd);
    ck_assert_int_eq(tu_train(ext, a), 0);
    char *x = tu_file_in(ref, "metrics.jsonl"), *y = tu_file_in(ext, "metrics.jsonl");
    static const char* const KEYS[] = {"lr", "train_loss", "grad_norm"};
    for (int s = 1; s <= 20; s++) {
        for (int k = 0; k < 3; k++) {
            double u = tu_record(x, s, KEYS[k]), v = tu_record(y, s, KEYS[k]);
            ck_assert_msg(isfinite(u) && u == v, "step %d %s: uninterrupted %.9g, extended %.9g", s,
                          KEYS[k], u, v);
        }
        ck_assert_msg(fabs(tu_record(x, s, "lr") - wsd_lr(s - 1)) <= 1e-7 * wsd_lr(s - 1),
                      "step %d: lr %.9g, the formula %.9g", s, tu_record(x, s, "lr"),
                      wsd_lr(s - 1));
    }
    // the change is recorded at step 8, where the learning rate did not move
    ck_assert_msg(strstr(y, "{\"step\":8,\"event\":\"resume_change\",\"key\":\"max_steps\","
                            "\"was\":\"12\",\"now\":\"20\",\"lr_was\":0.000600000028,"
                            "\"lr_now\":0.000600000028}"),
                  "%s", y);
    free(x), free(y);
}
END_TEST

static Suite* resume_keys_suite(void) {
    Suite* s = suite_create("resume_keys");
    TCase* tc = tcase_create("resume");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_changed_keys_refused_unless_named);
    tcase_add_test(tc, test_wsd_extends_exactly);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(resume_keys_suite)
