// tests/test_probe_sinks.c: ./probe sinks end to end against the independent numpy reference
// tests/ref/ref_sinks.py (Gu et al.'s sink rate and Guo et al.'s non-trigger first-token weight,
// recomputed from the maps ./attnmap writes, a separate code path), on a briefly trained
// two-layer model whose layer 0 is softmax and layer 1 bias-free sigmoid (rows that do not sum
// to 1: there the renormalised and raw measures differ, and the threshold splits them); and the
// refusals of bad input.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/util.h"
#include "data/probes.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

#define PY "/usr/bin/python3"

static int have_numpy(void) {
    return system(PY " -c 'import numpy' >/dev/null 2>&1") == 0;
}

// A bb probe set of 16-token documents in dir and a 3-step run on it into dir/run.
static void train_tiny(const char* dir) {
    ProbeParams p;
    probes_defaults(&p, PROBE_TASK_BB, 16);
    p.alphabet = 4;
    p.trigger_every = 2;
    char err[2048];
    ck_assert_msg(probes_write(dir, &p, 64, 100, 1, err, sizeof(err)) == 0, "%s", err);
    Config c;
    test_tiny_config(&c, PROBE_VOCAB, 2, 2, 16, 16);
    c.batch_size = 4;
    snprintf(c.train_data, sizeof(c.train_data), "%s/bb_train_*.bin", dir);
    snprintf(c.val_data, sizeof(c.val_data), "%s/bb_val_*.bin", dir);
    snprintf(c.out_dir, sizeof(c.out_dir), "%s/run", dir);
    util_strlcpy(c.attention, "0:softmax,1:sigmoid", sizeof(c.attention));
    util_strlcpy(c.tokenizer, "byte", sizeof(c.tokenizer));
    ck_assert_msg(config_apply_arg(&c, "attn.bias_mode=none", err, sizeof(err)) == 0, "%s", err);
    c.max_steps = 3;
    c.warmup_steps = 1;
    c.checkpoint_every = 3;
    c.eval_every = 0;
    c.metrics_every = 0;
    c.sample_every = 0;
    c.threads = 1;
    test_train_ok(&c);
}

START_TEST(test_probe_sinks_matches_reference) {
    ck_assert_msg(have_numpy(), PY " with numpy is required for the independent reference: "
                                   "sudo apt-get install python3-numpy (or bash scripts/deps)");
    char dir[600], cmd[8192];
    util_strlcpy(dir, test_tmpdir(), sizeof(dir));
    train_tiny(dir);
    // prefix 8: near-uniform softmax rows give Gu's importance about H_8 / 8 = 0.34 > 0.3; the
    // bias-free sigmoid rows (about 1/2 each) renormalise to the same, but raw average 0.5 only
    // when unrenormalised, so the eps 0.4 splits raw from renormalised in layer 1
    snprintf(cmd, sizeof(cmd),
             "%s/probe sinks bb --checkpoint %s/run/model_00000003.bin --data %s --docs 100 "
             "--prefix 8 --eps 0.4 --threads 1 > %s/sinks.txt",
             test_build_dir(), dir, dir, dir);
    ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
    snprintf(cmd, sizeof(cmd),
             PY " %s/tests/ref/ref_sinks.py --attnmap %s/attnmap --checkpoint "
                "%s/run/model_00000003.bin --shard %s/bb_val_000000.bin --docs 100 --prefix 8 "
                "--triggers 012 --eps 0.4 --json %s/sinks.txt",
             test_repo_root(), test_build_dir(), dir, dir, dir);
    ck_assert_msg(system(cmd) == 0, "tests/ref/ref_sinks.py disagrees (its message is above)");
    // the case is not degenerate: layer 1's raw and renormalised rates differ
    char path[700], err[800];
    snprintf(path, sizeof(path), "%s/sinks.txt", dir);
    size_t len;
    char* text = util_read_file(path, &len, err, sizeof(err));
    ck_assert_msg(text != NULL, "%s", err);
    const char* g = strstr(text, "\"sink_rate_gu\": ");
    const char* r = strstr(text, "\"sink_rate_gu_raw\": ");
    ck_assert(g && r);
    double gu = strtod(g + 16, NULL), raw = strtod(r + 20, NULL);
    ck_assert_msg(gu != raw, "renormalised %g = raw %g: the case does not test renormalisation", gu,
                  raw);
    free(text);
}
END_TEST

START_TEST(test_probe_sinks_refuses_bad_input) {
    char dir[600], cmd[8192];
    util_strlcpy(dir, test_tmpdir(), sizeof(dir));
    train_tiny(dir);
    const char* bad[] = {
        "--docs 99",      // fewer than Gu's 100
        "--docs 101",     // more documents than the shard holds
        "--eps nan",      // NaN refused
        "--eps 1.5",      // out of [0, 1]
        "--prefix 0",     // no rows
        "--batch-size x", // not a number
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(cmd, sizeof(cmd),
                 "%s/probe sinks bb --checkpoint %s/run/model_00000003.bin --data %s %s "
                 ">/dev/null 2>&1",
                 test_build_dir(), dir, dir, bad[i]);
        int rc = system(cmd);
        ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "%s: exit %d, want 2", bad[i], rc);
    }
}
END_TEST

static Suite* probe_sinks_suite(void) {
    Suite* s = suite_create("probe_sinks");
    TCase* k = tcase_create("cli");
    tcase_set_timeout(k, 600);
    tcase_add_test(k, test_probe_sinks_matches_reference);
    tcase_add_test(k, test_probe_sinks_refuses_bad_input);
    suite_add_tcase(s, k);
    return s;
}

TEST_MAIN(probe_sinks_suite)
