// tests/test_run_folder.c: one run per out_dir (model/run/folder.h, docs/configuration.md "The
// run folder"), driving the real BUILD/train on a tiny byte-level model:
//   - a new run into a folder that holds a run is refused naming what is there, and changes
//     nothing; overwrite = 1 deletes that run's files (only those) and trains;
//   - a second ./train on a folder in use is refused by the lock, naming the holder's pid, and
//     touches nothing (also with overwrite = 1); a run that ends deletes its lock file; the lock
//     file of a killed run is taken over with a note;
//   - resume refuses a state file that is not its model file's pair: another step's, or another
//     run's (the parameters' crc32 differs);
//   - a short run: warmup_steps from a config file is capped at max_steps with a note (the
//     README's `configs/gpt2_124M.conf max_steps=20` and small.conf below 20 steps); set on the
//     command line and too large, it is refused naming warmup_steps=N.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/testutil.h"
#include "tests/train_util.h"

static void path_in(char* buf, size_t cap, const char* name) {
    snprintf(buf, cap, "%s/%s", tu_dir(), name);
}

// ---------------------------------------------------------------------------------------------
// 39.4: a new run into a used folder

START_TEST(test_new_run_into_used_folder) {
    char dir[1100], p[1300];
    path_in(dir, sizeof(dir), "used");
    const char* cfg = "max_steps=6 eval_every=3 checkpoint_every=3 keep_last=5 warmup_steps=0";
    ck_assert_int_eq(tu_train(dir, cfg), 0);
    snprintf(p, sizeof(p), "%s/notes.txt", dir); // a file of the user's: never deleted
    FILE* f = fopen(p, "w");
    fputs("mine\n", f);
    fclose(f);
    char *m0 = tu_file_in(dir, "metrics.jsonl"), *c0 = tu_file_in(dir, "config.conf"),
         *l0 = tu_file_in(dir, "main.log");
    // the same command again, and another one: refused (exit 2), naming what is there and the
    // ways on; nothing changes
    const char* again[] = {cfg, "max_steps=2 eval_every=1 warmup_steps=0"};
    for (int k = 0; k < 2; k++) {
        int rc = tu_train(dir, again[k]);
        char* se = tu_log(dir, "err");
        ck_assert_msg(rc == 2, "a new run into a used folder: exit %d; %s", rc, se);
        ck_assert_msg(strstr(se, "holds a run") && strstr(se, dir) && strstr(se, "config.conf") &&
                          strstr(se, "metrics.jsonl") && strstr(se, "main.log") &&
                          strstr(se, "4 checkpoint files (steps 3 to 6)") &&
                          strstr(se, "resume=1") && strstr(se, "overwrite=1"),
                      "%s", se);
        free(se);
        char *m1 = tu_file_in(dir, "metrics.jsonl"), *c1 = tu_file_in(dir, "config.conf"),
             *l1 = tu_file_in(dir, "main.log");
        ck_assert_str_eq(m0, m1);
        ck_assert_str_eq(c0, c1);
        ck_assert_str_eq(l0, l1);
        free(m1), free(c1), free(l1);
        ck_assert_int_eq(tu_count(dir, "model_"), 2);
    }
    // overwrite = 1: the earlier run's files go (its step-6 checkpoint included), the new run
    // trains; the user's file stays
    ck_assert_int_eq(tu_train(dir, "max_steps=2 eval_every=1 warmup_steps=0 overwrite=1"), 0);
    char* so = tu_log(dir, "out");
    ck_assert_msg(strstr(so, "overwrite = 1: deleted the earlier run"), "%s", so);
    free(so);
    ck_assert_int_eq(tu_count(dir, "model_00000006"), 0);
    ck_assert_int_eq(tu_count(dir, "model_00000003"), 0);
    ck_assert_int_eq(tu_count(dir, "model_00000002"), 1);
    ck_assert_msg(util_file_exists(p), "overwrite = 1 deleted a file that is not the run's");
    char* m = tu_file_in(dir, "metrics.jsonl");
    ck_assert_msg(!strstr(m, "{\"step\":3,") && strstr(m, "{\"step\":2,\"train_loss\""), "%s", m);
    free(m);
    char* c = tu_file_in(dir, "config.conf");
    ck_assert_msg(strstr(c, "max_steps            = 2\n"), "%s", c);
    free(c);
    // resume = 1 and overwrite = 1 together: refused before anything is touched
    ck_assert_int_eq(tu_train(dir, "max_steps=2 resume=1 overwrite=1"), 2);
    char* se = tu_log(dir, "err");
    ck_assert_msg(strstr(se, "overwrite"), "%s", se);
    free(se);
    ck_assert_int_eq(tu_count(dir, "model_00000002"), 1);
    free(m0), free(c0), free(l0);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// 39.5: the lock

START_TEST(test_second_trainer_refused_by_lock) {
    char dir[1100], pid[32], lock[1300];
    path_in(dir, sizeof(dir), "locked");
    snprintf(lock, sizeof(lock), "%s/train.lock", dir);
    pid_t first = tu_spawn_train(dir, "max_steps=100000 eval_every=0 log_every=1000");
    tu_wait_step(first, dir, 2);
    ck_assert_msg(waitpid(first, NULL, WNOHANG) == 0, "the first run ended");
    snprintf(pid, sizeof(pid), "pid %ld on ", (long)first);
    char* held = tu_slurp(lock);
    ck_assert_msg(strstr(held, pid), "the lock file says '%s'", held);
    free(held);
    // a second trainer on the folder: resume = 1 and overwrite = 1 are both refused by the lock,
    // before they read or delete anything
    char other[1100];
    path_in(other, sizeof(other), "locked_second");
    const char* tries[] = {"max_steps=100000 eval_every=0 resume=1",
                           "max_steps=4 eval_every=0 overwrite=1"};
    for (int k = 0; k < 2; k++) {
        char args[4096], log[1200];
        snprintf(args, sizeof(args), TU_TINY "%s out_dir=%s %s", tu_data(), dir, tries[k]);
        snprintf(log, sizeof(log), "%s.log", other);
        int rc = tu_wait(tu_spawn(args, log), 60, tries[k]);
        char* se = tu_log(other, "err");
        ck_assert_msg(rc == 2, "%s: exit %d; %s", tries[k], rc, se);
        ck_assert_msg(strstr(se, "is in use") && strstr(se, pid) && strstr(se, "train.lock"), "%s",
                      se);
        free(se);
        ck_assert_msg(waitpid(first, NULL, WNOHANG) == 0, "the first run ended");
        ck_assert_int_eq(tu_count(dir, "metrics.jsonl"), 1);
    }
    kill(first, SIGTERM);
    ck_assert_int_eq(tu_wait(first, 60, "the first run"), EXIT_STOPPED);
    ck_assert_msg(!util_file_exists(lock), "a run that ended left its lock file");
    // a run killed outright (SIGKILL) leaves its lock file; the kernel released the lock, and the
    // next run takes it over, saying whose it was
    pid_t killed = tu_spawn_train(dir, "max_steps=100000 eval_every=0 log_every=1000 resume=1");
    snprintf(pid, sizeof(pid), "pid %ld on ", (long)killed);
    for (int i = 0; i < 30000; i++) { // until it holds the lock (at most 60 s)
        char* l = tu_slurp(lock);
        int mine = strstr(l, pid) != NULL;
        free(l);
        if (mine || waitpid(killed, NULL, WNOHANG) == killed) break;
        usleep(2000);
    }
    kill(killed, SIGKILL);
    ck_assert_int_eq(tu_wait(killed, 60, "the killed run"), 128 + SIGKILL);
    ck_assert_msg(util_file_exists(lock), "no lock file after SIGKILL");
    ck_assert_int_eq(tu_train(dir, "max_steps=2 eval_every=0 overwrite=1"), 0);
    char* se = tu_log(dir, "err");
    ck_assert_msg(strstr(se, "train.lock was left by") && strstr(se, pid) &&
                      strstr(se, "no longer holds it"),
                  "%s", se);
    free(se);
    ck_assert_msg(!util_file_exists(lock), "the lock file remains");
    // a refused run (exit 2 after taking the lock) deletes its lock file too: the next run has
    // nothing to take over
    ck_assert_int_eq(tu_train(dir, "max_steps=2 eval_every=0"), 2);
    ck_assert_msg(!util_file_exists(lock), "a refused run left its lock file");
}
END_TEST

// ---------------------------------------------------------------------------------------------
// 39.5: a state file and its model file are one checkpoint

START_TEST(test_resume_refuses_mismatched_pair) {
    char a[1100], b[1100], p[1300], q[1300], keep[1300];
    path_in(a, sizeof(a), "pair_a");
    path_in(b, sizeof(b), "pair_b");
    const char* cfg = "max_steps=12 eval_every=0 checkpoint_every=4 keep_last=5 warmup_steps=0";
    ck_assert_int_eq(tu_train(a, cfg), 0);
    char other[512];
    snprintf(other, sizeof(other), "%s lr=0.002", cfg); // another run: other weights at step 8
    ck_assert_int_eq(tu_train(b, other), 0);
    tu_drop_ckpt(a, 12);
    snprintf(p, sizeof(p), "%s/state_00000008.bin", a);
    snprintf(keep, sizeof(keep), "%s/state_8.keep", tu_dir());
    tu_copy_file(p, keep);
    char extra[512];
    snprintf(extra, sizeof(extra), "%s resume=1", cfg);
    // the step-4 state under the step-8 name
    snprintf(q, sizeof(q), "%s/state_00000004.bin", a);
    tu_copy_file(q, p);
    int rc = tu_train(a, extra);
    char* se = tu_log(a, "err");
    ck_assert_msg(rc == 2, "a step-4 state with the step-8 model: exit %d; %s", rc, se);
    ck_assert_msg(strstr(se, "is the state of step 4") && strstr(se, "model_00000008.bin"), "%s",
                  se);
    free(se);
    // the other run's step-8 state
    snprintf(q, sizeof(q), "%s/state_00000008.bin", b);
    tu_copy_file(q, p);
    rc = tu_train(a, extra);
    se = tu_log(a, "err");
    ck_assert_msg(rc == 2, "another run's state: exit %d; %s", rc, se);
    ck_assert_msg(strstr(se, "different runs") && strstr(se, "state_00000008.bin") &&
                      strstr(se, "crc32"),
                  "%s", se);
    free(se);
    // its own state back: the resume goes through
    tu_copy_file(keep, p);
    ck_assert_int_eq(tu_train(a, extra), 0);
    char* so = tu_log(a, "out");
    ck_assert_msg(strstr(so, "resuming from step 8"), "%s", so);
    free(so);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// 40.1: short runs

START_TEST(test_short_run_caps_warmup) {
    char conf[1100], dir[1100], log[1200], args[4096];
    path_in(conf, sizeof(conf), "warm.conf");
    FILE* f = fopen(conf, "w");
    fputs("warmup_steps = 50\nmax_steps = 1000\n", f);
    fclose(f);
    path_in(dir, sizeof(dir), "short");
    snprintf(log, sizeof(log), "%s.log", dir);
    snprintf(args, sizeof(args), "%s " TU_TINY "%s out_dir=%s max_steps=6 eval_every=3", conf,
             tu_data(), dir);
    int rc = tu_wait(tu_spawn(args, log), 120, "short run");
    char* se = tu_log(dir, "err");
    ck_assert_msg(rc == 0, "a short run: exit %d; %s", rc, se);
    ck_assert_msg(strstr(se, "warmup_steps = 50") && strstr(se, "capped at 6"), "%s", se);
    free(se);
    char* c = tu_file_in(dir, "config.conf");
    ck_assert_msg(strstr(c, "warmup_steps         = 6\n"), "%s", c);
    free(c);
    char* m = tu_file_in(dir, "metrics.jsonl"); // the warmup reaches lr (6e-4) at the last step
    ck_assert_double_eq_tol(tu_record(m, 6, "lr"), 6e-4, 1e-9);
    ck_assert_double_eq_tol(tu_record(m, 3, "lr"), 3e-4, 1e-9);
    free(m);
    // set on the command line and too large: refused, naming the key and the value to set
    path_in(dir, sizeof(dir), "short_explicit");
    snprintf(log, sizeof(log), "%s.log", dir);
    snprintf(args, sizeof(args), "%s " TU_TINY "%s out_dir=%s max_steps=6 --warmup_steps=50", conf,
             tu_data(), dir);
    rc = tu_wait(tu_spawn(args, log), 60, "explicit warmup");
    se = tu_log(dir, "err");
    ck_assert_msg(rc == 2, "an explicit warmup_steps > max_steps: exit %d; %s", rc, se);
    ck_assert_msg(strstr(se, "warmup_steps=6"), "%s", se);
    free(se);
    // the README's short-run override and small.conf below 20 steps resolve (--print-config
    // probes the data globs as training does: the test's shards stand in for the corpus)
    const char* const readme[][2] = {
        {"configs/gpt2_124M.conf max_steps=20 checkpoint_every=10 eval_every=10", "20"},
        {"configs/small.conf max_steps=10", "10"}};
    for (int k = 0; k < 2; k++) {
        char cmd[3000];
        path_in(dir, sizeof(dir), k ? "readme_small" : "readme_124M");
        snprintf(log, sizeof(log), "%s.log", dir);
        snprintf(cmd, sizeof(cmd), "%s/%s %s --print-config", test_repo_root(), readme[k][0],
                 tu_data());
        rc = tu_wait(tu_spawn(cmd, log), 60, readme[k][0]);
        char *so = tu_log(dir, "out"), want[64];
        se = tu_log(dir, "err");
        snprintf(want, sizeof(want), "warmup_steps         = %s\n", readme[k][1]);
        ck_assert_msg(rc == 0 && strstr(so, want), "%s: exit %d; %s%s", readme[k][0], rc, so, se);
        free(so), free(se);
    }
}
END_TEST

static Suite* run_folder_suite(void) {
    Suite* s = suite_create("run_folder");
    TCase* tc = tcase_create("folder");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_new_run_into_used_folder);
    tcase_add_test(tc, test_second_trainer_refused_by_lock);
    tcase_add_test(tc, test_resume_refuses_mismatched_pair);
    tcase_add_test(tc, test_short_run_caps_warmup);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(run_folder_suite)
