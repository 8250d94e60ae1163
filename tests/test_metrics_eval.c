// tests/test_metrics_eval.c: length evaluation (./evaluate): the loss inside the training length
// and beyond it, checked against an independent route. By causality the positions t < seq_len of
// a long window see exactly the window's first seq_len tokens, so the inside loss equals the mean
// loss of a separate forward of those prefixes; the beyond loss follows from the full forward's
// mean: (T * mean_full - T0 * mean_prefix) / (T - T0). Both means come from the model's own loss
// reduction, not from a position split.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "data/shard.h"
#include "model/checkpoint.h"
#include "model/gpt2.h"
#include "tests/testutil.h"

enum { V = 64, T0 = 16, TL = 40, BS = 48, B = 2 };

static void config(Config* c) {
    config_defaults(c);
    c->n_layer = 2;
    c->n_head = 2;
    c->n_embd = 16;
    c->block_size = BS;
    c->vocab_size = V;
    c->seq_len = T0;
    c->batch_size = B;
    util_strlcpy(c->pos_encoding, "rope", sizeof(c->pos_encoding));
}

static void build(GPT2* m, const Config* c, int T) {
    char err[512];
    memset(m, 0, sizeof(*m));
    ck_assert_msg(gpt2_setup_attention(m, c, err, sizeof(err)) == 0, "%s", err);
    GPT2Config g;
    ck_assert_msg(gpt2_config_from(&g, c, err, sizeof(err)) == 0, "%s", err);
    gpt2_build(m, &g);
    gpt2_init(m, 5);
    gpt2_alloc_acts(m, B, T, 1);
    m->step = -1;
}

__attribute__((noinline)) static char* run_capture(const char* cmd) {
    FILE* f = popen(cmd, "r");
    ck_assert_msg(f != NULL, "cannot run %s", cmd);
    char* out = NULL;
    size_t len = 0;
    FILE* o = open_memstream(&out, &len);
    char buf[512];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        fwrite(buf, 1, n, o);
    int rc = pclose(f);
    fclose(o);
    ck_assert_msg(rc == 0, "%s exited with %d:\n%s", cmd, rc, out);
    return out;
}

START_TEST(test_loss_inside_and_beyond) {
    const char* dir = test_tmpdir();
    Config c;
    config(&c);
    GPT2 m;
    build(&m, &c, TL);
    // weights far from the init scale, so the per-position losses differ visibly
    Rng r;
    rng_seed(&r, 3);
    fill_normal(m.params, m.num_params, 0.5f, &r);
    char* text = NULL;
    size_t len = 0;
    FILE* f = open_memstream(&text, &len);
    config_write(&c, f);
    fclose(f);
    char ckpt[1100], shard[1100], err[1024];
    snprintf(ckpt, sizeof(ckpt), "%s/model_00000000.bin", dir);
    ck_assert_msg(ckpt_save_model(&m, ckpt, 0, text, err, sizeof(err)) == 0, "%s", err);
    free(text);
    uint16_t tok[2000];
    for (int i = 0; i < 2000; i++)
        tok[i] = (uint16_t)rng_below(&r, V);
    snprintf(shard, sizeof(shard), "%s/val_000.bin", dir);
    ck_assert_msg(shard_write(shard, tok, 2000, err, sizeof(err)) == 0, "%s", err);

    // independent route: the first batch of TL-token windows (tokens [b TL, b TL + TL], targets
    // shifted by one), forwarded whole and as T0-token prefixes
    int in[B * TL], tg[B * TL], pin[B * T0], ptg[B * T0];
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < TL; t++) {
            in[b * TL + t] = tok[b * TL + t];
            tg[b * TL + t] = tok[b * TL + t + 1];
        }
        for (int t = 0; t < T0; t++) {
            pin[b * T0 + t] = in[b * TL + t];
            ptg[b * T0 + t] = tg[b * TL + t];
        }
    }
    gpt2_forward(&m, in, tg, B, TL);
    const double full = m.mean_loss;
    gpt2_forward(&m, pin, ptg, B, T0);
    const double prefix = m.mean_loss;
    const double beyond = (TL * full - T0 * prefix) / (TL - T0);
    gpt2_free(&m);
    ck_assert_msg(fabs(prefix - beyond) > 0.05, "inside %g and beyond %g too close to tell apart",
                  prefix, beyond);

    char cmd[4400];
    snprintf(cmd, sizeof(cmd),
             "%s/evaluate --checkpoint %s --data '%s/val_*.bin' --seq-len %d,%d,%d --batches 1 "
             "--batch-size %d --threads 1 2>&1",
             test_build_dir(), ckpt, dir, T0, TL, 2 * BS, B);
    char* out = run_capture(cmd);
    char pat[32];
    snprintf(pat, sizeof(pat), "\n%d ", TL);
    const char* line = strstr(out, pat);
    ck_assert_msg(line != NULL, "no line for length %d:\n%s", TL, out);
    double l_all, l_in, l_out;
    long ntok;
    char fac[16];
    ck_assert_msg(sscanf(line + 1, "%*d %15s %lf %lf %lf %ld", fac, &l_all, &l_in, &l_out, &ntok) ==
                      5,
                  "cannot parse: %s", line + 1);
    ck_assert_str_eq(fac, "2.50x");
    ck_assert_int_eq(ntok, B * TL);
    ck_assert_double_eq_tol(l_all, full, 2e-4);
    ck_assert_double_eq_tol(l_in, prefix, 2e-4);
    ck_assert_double_eq_tol(l_out, beyond, 5e-4);
    // at the training length nothing lies beyond it; longer than block_size is refused
    snprintf(pat, sizeof(pat), "\n%d ", T0);
    line = strstr(out, pat);
    ck_assert_msg(line != NULL, "no line for length %d:\n%s", T0, out);
    char dash[8];
    ck_assert(sscanf(line + 1, "%*d %*s %*f %*f %7s", dash) == 1);
    ck_assert_str_eq(dash, "-");
    ck_assert_msg(strstr(out, "not evaluated: longer than block_size") != NULL, "%s", out);
    free(out);
    // bad lengths are usage errors
    snprintf(cmd, sizeof(cmd), "%s/evaluate --checkpoint %s --data x --seq-len 0 2>/dev/null",
             test_build_dir(), ckpt);
    int st = system(cmd);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2);
}
END_TEST

static Suite* metrics_eval_suite(void) {
    Suite* s = suite_create("metrics_eval");
    TCase* k = tcase_create("lengths");
    tcase_set_timeout(k, 60);
    tcase_add_test(k, test_loss_inside_and_beyond);
    suite_add_tcase(s, k);
    return s;
}

TEST_MAIN(metrics_eval_suite)
