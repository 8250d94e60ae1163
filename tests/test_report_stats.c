// tests/test_report_stats.c: the statistics of the sweep reports on hand-computed examples:
// the exact paired sign-flip p (scripts/ablate_stats.py; 5 differences of one sign give 2/32 =
// 0.0625 two-sided; mixed signs counted by hand, and by an independent enumeration here), the
// parity p, Holm's step-down adjustment, the interval of measured/claimed; in a committed sweep
// (scripts/ablate_report.py): Holm's correction over the sweep's tested claims, "sign and size"
// read from the interval of the ratio, not its point; and the learning-rate sensitivity of
// Wortsman et al. (scripts/ablate_lr.py) with diverged runs (stopped on a non-finite loss, an
// update skipped under nan_policy = skip, a final loss above the loss at initialisation), the
// largest stable learning rate, claims on both and their positive control.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <zlib.h>

#include "common/util.h"
#include "tests/testutil.h"

#define PY "/usr/bin/python3"

// The repr() of a Python expression over scripts/ablate_stats.py (imported as s), in out.
static void py_eval(const char* expr, char* out, size_t cap) {
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             PY " -c \"import sys; sys.path.insert(0, '%s/scripts'); import ablate_stats as s; "
                "print(repr(%s))\"",
             test_repo_root(), expr);
    FILE* p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    ck_assert_msg(pclose(p) == 0, "%s: %s", cmd, out);
}

static double py_num(const char* expr) {
    char out[256];
    py_eval(expr, out, sizeof(out));
    return atof(out);
}

// An independent two-sided sign-flip p: every one of the 2^n sign patterns, by bit masks.
static double flip_p(const double* d, int n) {
    double obs = 0, tot = 0;
    for (int i = 0; i < n; i++) {
        obs += d[i];
        tot += fabs(d[i]);
    }
    int hits = 0;
    for (long m = 0; m < (1L << n); m++) {
        double s = 0;
        for (int i = 0; i < n; i++)
            s += (m >> i & 1) ? -d[i] : d[i];
        hits += fabs(s) >= fabs(obs) - 1e-12 * (1 + tot);
    }
    return (double)hits / (double)(1L << n);
}

START_TEST(test_signflip_holm_ratio_by_hand) {
    // 5 differences of one sign: 2 of the 32 patterns (all +, all -) reach |sum| = 15
    ck_assert_double_eq_tol(py_num("s.signflip_p([1, 2, 3, 4, 5])"), 2.0 / 32, 1e-15);
    ck_assert_double_eq_tol(py_num("s.signflip_p([-0.3, -0.1, -2, -0.5, -1])"), 0.0625, 1e-15);
    ck_assert_double_eq_tol(py_num("s.signflip_p([1, 2, 3, 4, 5], 'greater')"), 1.0 / 32, 1e-15);
    // mixed signs 1, 2, 3, 4, -5: the sum is 5; a pattern's sum is 15 - 2 S, S the sum of the
    // magnitudes it negates, and |15 - 2 S| >= 5 for S <= 5 or S >= 10. Subsets of {1..5} by
    // sum: 0:1 1:1 2:1 3:2 4:2 5:3 | 10:3 11:2 12:2 13:1 14:1 15:1, 10 + 10 = 20 of 32
    ck_assert_double_eq_tol(py_num("s.signflip_p([1, 2, 3, 4, -5])"), 20.0 / 32, 1e-15);
    const double mixed[5] = {1, 2, 3, 4, -5};
    ck_assert_double_eq_tol(flip_p(mixed, 5), 20.0 / 32, 1e-15);
    // a zero difference changes no sum: (0, 1, 1) is as likely at |sum| 2 as (1, 1): 1/2
    ck_assert_double_eq_tol(py_num("s.signflip_p([0, 1, 1])"), 0.5, 1e-15);
    // 3 seeds of one sign, the smallest p with 3 seeds: 2/8
    ck_assert_double_eq_tol(py_num("s.signflip_p([-0.1, -0.2, -0.3])"), 0.25, 1e-15);
    // parity within 0.1 of (0.01, -0.01, 0.02, 0, 0.01): d + 0.1 > 0 and 0.1 - d > 0 in every
    // seed, 1/32 each; the smallest of the three one-sided p (inside, above, below) doubled
    ck_assert_double_eq_tol(py_num("s.parity_p([0.01, -0.01, 0.02, 0, 0.01], 0.1)[0]"), 2.0 / 32,
                            1e-15);
    char out[256];
    py_eval("s.parity_p([0.01, -0.01, 0.02, 0, 0.01], 0.1)[1]", out, sizeof(out));
    ck_assert_str_eq(out, "'inside'\n");
    py_eval("s.parity_p([0.5, 0.6, 0.7], 0.1)[1]", out, sizeof(out));
    ck_assert_str_eq(out, "'above'\n");
    // Holm: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04, then the
    // running maximum: 0.02, 0.03, 0.06, 0.06, back in the given order; None stays out
    py_eval("[round(x, 12) if x is not None else None for x in s.holm([0.01, 0.04, None, 0.03, "
            "0.005])]",
            out, sizeof(out));
    ck_assert_str_eq(out, "[0.03, 0.06, None, 0.06, 0.02]\n");
    py_eval("s.holm([0.5, 0.9])", out, sizeof(out)); // capped at 1
    ck_assert_str_eq(out, "[1.0, 1.0]\n");
    // the interval of measured/claimed: [-0.9969, -0.0031] / -0.5 = [0.0062, 1.9938]
    ck_assert_double_eq_tol(py_num("s.ratio_interval(-0.9969, -0.0031, -0.5)[0]"), 0.0062, 1e-12);
    ck_assert_double_eq_tol(py_num("s.ratio_interval(-0.9969, -0.0031, -0.5)[1]"), 1.9938, 1e-12);
    // the same enumeration with 20 differences (above it a fixed-seed Monte Carlo)
    ck_assert_double_eq_tol(py_num("s.signflip_p([1.0 + i / 7 for i in range(20)])"),
                            2.0 / (1 << 20), 1e-18);
}
END_TEST

// ---- committed-style sweeps (scripts/results_export's layout) --------------------------------

static void write_text(const char* path, const char* text) {
    FILE* f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_ge(fputs(text, f), 0);
    ck_assert_int_eq(fclose(f), 0);
}

// DIR/NAME with config.conf (CONF), metrics.jsonl.gz (METRICS) and, when FINISHED, a
// provenance.json at step 10; else an ablate_status.json with exit EXIT.
static void write_run(const char* dir, const char* name, const char* conf, const char* metrics,
                      int finished, int exit_code) {
    char d[1200], p[1400], text[256];
    snprintf(d, sizeof(d), "%s/%s", dir, name);
    ck_assert_int_eq(mkdir(d, 0755), 0);
    snprintf(p, sizeof(p), "%s/config.conf", d);
    write_text(p, conf);
    snprintf(p, sizeof(p), "%s/metrics.jsonl.gz", d);
    gzFile g = gzopen(p, "wb");
    ck_assert_ptr_nonnull(g);
    ck_assert_int_gt(gzputs(g, metrics), 0);
    ck_assert_int_eq(gzclose(g), Z_OK);
    if (finished) {
        snprintf(p, sizeof(p), "%s/provenance.json", d);
        write_text(p, "{\"final_step\": 10, \"command\": \"x\"}\n");
    } else {
        snprintf(p, sizeof(p), "%s/ablate_status.json", d);
        snprintf(text, sizeof(text), "{\"run\": \"%s\", \"exit\": %d, \"wall_s\": 1}\n", name,
                 exit_code);
        write_text(p, text);
    }
}

static char* run_report(const char* dir, const char* file) {
    char cmd[2400], p[1400];
    snprintf(cmd, sizeof(cmd), PY " %s/scripts/ablate_report.py %s >/dev/null", test_repo_root(),
             dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(p, sizeof(p), "%s/%s", dir, file);
    size_t n;
    char* text = util_read_file(p, &n, NULL, 0);
    ck_assert_ptr_nonnull(text);
    return text;
}

// The text after `"KEY": ` in the claims.json entry of CLAIM (its "claim" field), up to the
// next ',' or newline.
static void claim_field(const char* json, const char* claim, const char* key, char* out,
                        size_t cap) {
    char pat[256];
    snprintf(pat, sizeof(pat), "\"claim\": \"%s\"", claim);
    const char* c = strstr(json, pat);
    ck_assert_msg(c != NULL, "claim %s missing", claim);
    const char* end = strstr(c + 1, "\"claim\": \""); // the next claim's entry
    snprintf(pat, sizeof(pat), "\"%s\": ", key);
    const char* k = strstr(c, pat);
    ck_assert_msg(k != NULL && (!end || k < end), "%s: no %s", claim, key);
    k += strlen(pat);
    if (*k == '"') k++;
    size_t n = strcspn(k, "\",\n");
    if (n >= cap) n = cap - 1;
    memcpy(out, k, n);
    out[n] = '\0';
}

static double claim_num(const char* json, const char* claim, const char* key) {
    char v[128];
    claim_field(json, claim, key, v, sizeof(v));
    return atof(v);
}

// Per seed (8 seeds) the difference variant - softmax of the validation loss:
//   x: all 8 negative -> exact p 2/256; y: 6 negative, 2 small positive -> |sum| >= 5.5 needs
//   the negated magnitudes (of 1 x 6, 0.2, 0.3) to sum to <= 0.5 or >= 6: 4 + 4 of 256 = 1/32;
//   w: mixed, no effect; and r (3 seeds of one sign, 2/8, below). Holm over these 4 tested
//   claims (the invalid one is not tested): x 4 x 1/128 = 1/32 (stands), y 3 x 1/32 = 3/32
//   (inconclusive after correction, though its t interval excludes 0), r 2 x 1/4, w max(1/2,
//   its p).
static const double DX[8] = {-1, -0.5, -2, -0.7, -1.2, -0.9, -0.3, -1.1};
static const double DY[8] = {-1, -1, -1, -1, -1, -1, 0.2, 0.3};
static const double DW[8] = {-1, 1.2, -0.8, 0.9, -1.1, 1, -0.2, 0.4};

START_TEST(test_holm_correction_and_ratio_interval) {
    char dir[1024], p[1400], conf[256], metrics[256], name[128];
    snprintf(dir, sizeof(dir), "%s/holm", test_tmpdir());
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    snprintf(p, sizeof(p), "%s/ablate_sweep.tsv", dir);
    FILE* f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "sweep\tx.conf\ncommand\tx\nkey\tattention\nkey\tseed\n");
    fprintf(f, "claim\tval_loss: x < softmax | x helps\n");
    fprintf(f, "claim\tval_loss: y < softmax | y helps\n");
    fprintf(f, "claim\tval_loss: w < softmax | w helps\n");
    fprintf(f, "claim\tlr_sensitivity: x < softmax | not a sweep over lr\n");
    fprintf(f, "claim\tbest_val_loss: r < softmax | r helps | size: -0.5\n");
    const char* att[4] = {"softmax", "x", "y", "w"};
    for (int a = 0; a < 4; a++)
        for (int s = 1; s <= 8; s++)
            fprintf(f, "run\tattention-%s__seed-%d\tattention=%s\tseed=%d\n", att[a], s, att[a], s);
    for (int s = 1; s <= 3; s++)
        fprintf(f, "run\tattention-r__seed-%d\tattention=r\tseed=%d\n", s, s);
    fclose(f);
    // softmax's losses per seed; best_val_loss of r: softmax's minus 0.3, 0.5, 0.7 (seeds 1-3):
    // mean -0.5, sd 0.2, 95% interval -0.5 +- 4.303 x 0.2 / sqrt 3, inside 0 on the claimed side;
    // measured/claimed 1 at its point, but [0.0062, 1.9938] reaches outside [1/2, 2]: sign only
    for (int a = 0; a < 5; a++)
        for (int s = 1; s <= (a == 4 ? 3 : 8); s++) {
            const double base = 2.0 + 0.05 * s;
            const double d = a == 1 ? DX[s - 1] : a == 2 ? DY[s - 1] : a == 3 ? DW[s - 1] : 0;
            const double r = a == 4 ? -(0.1 + 0.2 * s) : 0;
            const char* at = a == 4 ? "r" : att[a];
            snprintf(conf, sizeof(conf), "attention = %s\nseed = %d\nmax_steps = 10\n", at, s);
            snprintf(metrics, sizeof(metrics),
                     "{\"step\":0,\"val_loss\":5.5}\n{\"step\":10,\"train_loss\":2}\n"
                     "{\"step\":10,\"val_loss\":%.6f}\n",
                     base + d + r);
            snprintf(name, sizeof(name), "attention-%s__seed-%d", at, s);
            write_run(dir, name, conf, metrics, 1, 0);
        }
    char* json = run_report(dir, "claims.json");
    char v[160];
    ck_assert_double_eq_tol(claim_num(json, "val_loss: x < softmax", "p_exact"), 2.0 / 256, 1e-12);
    ck_assert_double_eq_tol(claim_num(json, "val_loss: y < softmax", "p_exact"), 1.0 / 32, 1e-12);
    ck_assert_double_eq_tol(claim_num(json, "val_loss: w < softmax", "p_exact"), flip_p(DW, 8),
                            1e-12);
    ck_assert_double_eq_tol(claim_num(json, "val_loss: x < softmax", "p_holm"), 4.0 / 128, 1e-12);
    ck_assert_double_eq_tol(claim_num(json, "val_loss: y < softmax", "p_holm"), 3.0 / 32, 1e-12);
    ck_assert_double_eq_tol(claim_num(json, "best_val_loss: r < softmax", "p_holm"), 0.5, 1e-12);
    ck_assert_double_eq_tol(claim_num(json, "val_loss: w < softmax", "p_holm"),
                            fmax(0.5, flip_p(DW, 8)), 1e-12);
    ck_assert_int_eq((int)claim_num(json, "val_loss: x < softmax", "holm_m"), 4);
    claim_field(json, "val_loss: x < softmax", "verdict", v, sizeof(v));
    ck_assert_str_eq(v, "reproduced: sign only");
    claim_field(json, "val_loss: y < softmax", "verdict_unadjusted", v, sizeof(v));
    ck_assert_str_eq(v, "reproduced: sign only"); // the t interval excludes 0
    claim_field(json, "val_loss: y < softmax", "verdict", v, sizeof(v));
    ck_assert_str_eq(v, "inconclusive after correction");
    claim_field(json, "lr_sensitivity: x < softmax", "verdict", v, sizeof(v));
    ck_assert_str_eq(v, "invalid claim line");
    // the ratio's interval, not its point, decides the size
    const double half = 4.303 * 0.2 / sqrt(3.0);
    ck_assert_double_eq_tol(claim_num(json, "best_val_loss: r < softmax", "ratio"), 1.0, 1e-6);
    ck_assert_double_eq_tol(claim_num(json, "best_val_loss: r < softmax", "ratio_lo"),
                            (-0.5 + half) / -0.5, 1e-6);
    ck_assert_double_eq_tol(claim_num(json, "best_val_loss: r < softmax", "ratio_hi"),
                            (-0.5 - half) / -0.5, 1e-6);
    claim_field(json, "best_val_loss: r < softmax", "verdict_unadjusted", v, sizeof(v));
    ck_assert_str_eq(v, "reproduced: sign only");
    free(json);
    char* md = run_report(dir, "claims.md");
    ck_assert_msg(strstr(md, "- **inconclusive after correction** (unadjusted: reproduced: sign "
                             "only) — y helps") &&
                      strstr(md, "exact sign-flip p = 0.0312"),
                  "%s", md);
    free(md);
}
END_TEST

// A run of a learning-rate sweep: L0 = 5 (validation loss at step 0), then either a final loss
// FINAL at step 10 (KIND 0), a stop on a non-finite loss at step 7 after the finite loss 4.5 at
// step 6 (KIND 1: the trainer's diverged record, exit 3), or an update skipped at step 5 under
// nan_policy = skip before a finished run with FINAL (KIND 2).
static double g_max_logit = 0, g_log_z = 0; // > 0 / != 0: a model record with these values

static void write_lr_run(const char* dir, const char* att, const char* lr, int seed, double final,
                         int kind) {
    char conf[256], m[1024], name[128];
    snprintf(conf, sizeof(conf), "attention = %s\nlr = %s\nseed = %d\nmax_steps = 10\n", att, lr,
             seed);
    int n = snprintf(m, sizeof(m), "{\"step\":0,\"val_loss\":5}\n");
    if (g_max_logit > 0)
        n += snprintf(m + n, sizeof(m) - n,
                      "{\"step\":5,\"kind\":\"model\",\"max_logit\":%g,\"log_z_mean\":%g}\n",
                      g_max_logit, g_log_z);
    for (int s = 1; s <= 6; s++)
        n += snprintf(m + n, sizeof(m) - n, "{\"step\":%d,\"train_loss\":%g}\n", s, 5.0 - s / 12.0);
    if (kind == 1)
        n += snprintf(m + n, sizeof(m) - n,
                      "{\"step\":7,\"event\":\"diverged\",\"loss\":null,\"grad_norm\":null,"
                      "\"where\":\"x\",\"last_finite_step\":6,\"last_finite_loss\":4.5,"
                      "\"nan_policy\":\"stop\"}\n");
    else {
        if (kind == 2)
            n += snprintf(m + n, sizeof(m) - n, "{\"step\":5,\"event\":\"skipped_nonfinite\"}\n");
        n += snprintf(m + n, sizeof(m) - n,
                      "{\"step\":10,\"train_loss\":%g}\n{\"step\":10,\"val_loss\":%g}\n", final,
                      final);
    }
    snprintf(name, sizeof(name), "attention-%s__lr-%s__seed-%d", att, lr, seed);
    write_run(dir, name, conf, m, kind != 1, 3);
}

START_TEST(test_lr_sensitivity_with_diverged_runs) {
    char dir[1024], p[1400];
    snprintf(dir, sizeof(dir), "%s/lrsweep", test_tmpdir());
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    snprintf(p, sizeof(p), "%s/ablate_sweep.tsv", dir);
    FILE* f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "sweep\tlr.conf\ncommand\tx\nkey\tattention\nkey\tlr\nkey\tseed\n");
    fprintf(f, "claim\tlr_sensitivity: sigmoid < softmax | sigmoid is less sensitive\n");
    fprintf(f, "claim\tlr_max_stable_log10: sigmoid > softmax | sigmoid is stable higher\n");
    fprintf(f, "claim\tlr_max_stable_log10: softmax > sigmoid | the other way round\n");
    const char* att[2] = {"softmax", "sigmoid"};
    const char* lrs[4] = {"0.001", "0.01", "0.1", "1"};
    for (int a = 0; a < 2; a++)
        for (int l = 0; l < 4; l++)
            for (int s = 1; s <= 3; s++)
                fprintf(f, "run\tattention-%s__lr-%s__seed-%d\tattention=%s\tlr=%s\tseed=%d\n",
                        att[a], lrs[l], s, att[a], lrs[l], s);
    fclose(f);
    // softmax, seed s (delta = 0, 0.1, 0.2): final losses 3, 2, 4 (+ delta), lr 1 stops on a
    // non-finite loss. min(L, L0) - L* = 1, 0, 2, 3 - delta: sensitivity (6 - delta) / 4.
    // sigmoid: 3, 2.2, 2.5 and at lr 1 a final loss 6 > L0 (seed 1), a skipped update (seed 2),
    // 4 (seed 3): sensitivity (0.8 + 0 + 0.3 + 2.8) / 4 = 0.975, 0.975, (0.8 + 0.3 + 1.8) / 4
    for (int s = 1; s <= 3; s++) {
        const double dl = 0.1 * (s - 1);
        write_lr_run(dir, "softmax", "0.001", s, 3 + dl, 0);
        write_lr_run(dir, "softmax", "0.01", s, 2 + dl, 0);
        write_lr_run(dir, "softmax", "0.1", s, 4 + dl, 0);
        write_lr_run(dir, "softmax", "1", s, 0, 1);
        write_lr_run(dir, "sigmoid", "0.001", s, 3, 0);
        write_lr_run(dir, "sigmoid", "0.01", s, 2.2, 0);
        write_lr_run(dir, "sigmoid", "0.1", s, 2.5, 0);
        write_lr_run(dir, "sigmoid", "1", s, s == 1 ? 6 : 4, s == 2 ? 2 : 0);
    }
    const double sm[3] = {1.5, 1.475, 1.45}, sg[3] = {0.975, 0.975, 0.725};
    char* json = run_report(dir, "claims.json");
    double d[3], mean = 0, ss = 0;
    for (int s = 0; s < 3; s++)
        mean += (d[s] = sg[s] - sm[s]) / 3;
    for (int s = 0; s < 3; s++)
        ss += (d[s] - mean) * (d[s] - mean);
    const double half = 4.303 * sqrt(ss / 2) / sqrt(3.0);
    const char* c1 = "lr_sensitivity: sigmoid < softmax";
    ck_assert_double_eq_tol(claim_num(json, c1, "paired_mean"), mean, 1e-9);
    ck_assert_double_eq_tol(claim_num(json, c1, "paired_hi"), mean + half, 1e-9);
    ck_assert(mean + half < 0);
    char v[160];
    claim_field(json, c1, "verdict_unadjusted", v, sizeof(v));
    ck_assert_str_eq(v, "reproduced: sign only");
    ck_assert_double_eq_tol(claim_num(json, c1, "p_exact"), 0.25, 1e-12); // 3 seeds of one sign
    // the largest stable lr: 0.1 for softmax; 0.1, 0.1, 1 for sigmoid: differences 0, 0, 1 decade
    ck_assert_double_eq_tol(
        claim_num(json, "lr_max_stable_log10: sigmoid > softmax", "paired_mean"), 1.0 / 3, 1e-9);
    claim_field(json, "lr_max_stable_log10: sigmoid > softmax", "verdict", v, sizeof(v));
    ck_assert_str_eq(v, "inconclusive (interval includes 0)");
    // softmax > sigmoid needs sigmoid to reach its instability in every seed: seed 3 never
    // diverges on the grid, so its largest stable lr is only a lower bound
    claim_field(json, "lr_max_stable_log10: softmax > sigmoid", "verdict", v, sizeof(v));
    ck_assert_str_eq(v, "untestable here");
    free(json);
    char* md = run_report(dir, "results.md");
    ck_assert_msg(strstr(md, "| softmax | 1 | 5 | 2 (0.01) | 1.5 | 0.1 | lr 1: step 7, last finite "
                             "loss 4.5 (non-finite loss or gradient) |"),
                  "%s", md);
    ck_assert_msg(strstr(md, "| sigmoid | 1 | 5 | 2.2 (0.01) | 0.975 | 0.1 | lr 1: step 10, last "
                             "finite loss 6 (final loss 6 above L0 5) |"),
                  "%s", md);
    ck_assert_msg(strstr(md, "| sigmoid | 2 | 5 | 2.2 (0.01) | 0.975 | 0.1 | lr 1: step 5, last "
                             "finite loss 4.667 (non-finite loss or gradient (update skipped, "
                             "nan_policy = skip)) |"),
                  "%s", md);
    ck_assert_msg(strstr(md, "| sigmoid | 3 | 5 | 2.2 (0.01) | 0.725 | 1 | none |"), "%s", md);
    free(md);
    snprintf(p, sizeof(p), "%s/plots/lr.png", dir);
    ck_assert_msg(util_file_exists(p), "%s missing", p);
}
END_TEST

// scripts/lr_control.py, the stability control's rule, on the sweep above with max_logit
// records: (1) softmax's sensitivity (1.5, 1.475, 1.45) is above sigmoid's (0.975, 0.975,
// 0.725) in every seed; (2) softmax's max_logit at lr 0.1 must be >= 10x its own at lr 0.001
// (20) and >= 10x sigmoid's at 0.1 (30): 500 holds, 250 (seed 3) does not, so the control fails
// in seed 3 alone; a log_z_mean below -5 is named as output-logit divergence.
START_TEST(test_lr_control_rule) {
    char dir[1024], p[1400];
    snprintf(dir, sizeof(dir), "%s/lrcontrol", test_tmpdir());
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    snprintf(p, sizeof(p), "%s/ablate_sweep.tsv", dir);
    FILE* f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "sweep\tlr.conf\ncommand\tx\nkey\tattention\nkey\tlr\nkey\tseed\n");
    const char* att[2] = {"softmax", "sigmoid"};
    const char* lrs[4] = {"0.001", "0.01", "0.1", "1"};
    for (int a = 0; a < 2; a++)
        for (int l = 0; l < 4; l++)
            for (int s = 1; s <= 3; s++)
                fprintf(f, "run\tattention-%s__lr-%s__seed-%d\tattention=%s\tlr=%s\tseed=%d\n",
                        att[a], lrs[l], s, att[a], lrs[l], s);
    fclose(f);
    for (int s = 1; s <= 3; s++) {
        const double dl = 0.1 * (s - 1);
        g_log_z = s == 2 ? -6 : 1; // seed 2's runs drift: output-logit divergence
        g_max_logit = 20;
        write_lr_run(dir, "softmax", "0.001", s, 3 + dl, 0);
        write_lr_run(dir, "softmax", "0.01", s, 2 + dl, 0);
        g_max_logit = s == 3 ? 250 : 500;
        write_lr_run(dir, "softmax", "0.1", s, 4 + dl, 0);
        g_max_logit = 20;
        write_lr_run(dir, "softmax", "1", s, 0, 1);
        write_lr_run(dir, "sigmoid", "0.001", s, 3, 0);
        write_lr_run(dir, "sigmoid", "0.01", s, 2.2, 0);
        g_max_logit = 30;
        write_lr_run(dir, "sigmoid", "0.1", s, 2.5, 0);
        write_lr_run(dir, "sigmoid", "1", s, s == 1 ? 6 : 4, s == 2 ? 2 : 0);
    }
    g_max_logit = 0, g_log_z = 0;
    char cmd[2400], out[1500];
    snprintf(cmd, sizeof(cmd), PY " %s/scripts/lr_control.py %s --with-norm sigmoid > %s/out.txt",
             test_repo_root(), dir, dir);
    const int st = system(cmd);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "exit status %d", st);
    snprintf(out, sizeof(out), "%s/out.txt", dir);
    size_t n;
    char* text = util_read_file(out, &n, NULL, 0);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strstr(text, "seed 1: (1) LR sensitivity softmax 1.5 vs sigmoid 0.975: holds; "
                               "(2) max_logit 500 at lr 0.1, 20 at lr 0.001, sigmoid 30 at lr "
                               "0.1: holds -> holds"),
                  "%s", text);
    ck_assert_msg(strstr(text, "seed 3: (1) LR sensitivity softmax 1.45 vs sigmoid 0.725: holds; "
                               "(2) max_logit 250 at lr 0.1, 20 at lr 0.001, sigmoid 30 at lr "
                               "0.1: fails -> FAILS"),
                  "%s", text);
    ck_assert_msg(strstr(text, "output-logit divergence: attention-softmax__lr-0.001__seed-2"),
                  "%s", text);
    ck_assert_msg(!strstr(text, "output-logit divergence: attention-softmax__lr-0.001__seed-1"),
                  "%s", text);
    ck_assert_msg(strstr(text, "control does not hold"), "%s", text);
    free(text);
}
END_TEST

START_TEST(test_lr_metric_names_checked) {
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             PY " %s/scripts/ablate_report.py --check-claim 'lr_sensitivty: a < b' >/dev/null",
             test_repo_root());
    ck_assert_int_ne(system(cmd), 0); // a misspelt learning-rate metric stops the sweep
    snprintf(cmd, sizeof(cmd),
             PY " %s/scripts/ablate_report.py --check-claim 'lr_max_stable_log10: a > b | x' "
                ">/dev/null",
             test_repo_root());
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite* report_stats_suite(void) {
    Suite* s = suite_create("report_stats");
    TCase* tc = tcase_create("stats");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_signflip_holm_ratio_by_hand);
    tcase_add_test(tc, test_holm_correction_and_ratio_interval);
    tcase_add_test(tc, test_lr_sensitivity_with_diverged_runs);
    tcase_add_test(tc, test_lr_metric_names_checked);
    tcase_add_test(tc, test_lr_control_rule);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(report_stats_suite)
