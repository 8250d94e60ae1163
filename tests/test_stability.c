// tests/test_stability.c: the output-logit stability tools of Wortsman et al. 2023 ("Small-scale
// proxies for large-scale Transformer training instabilities", arXiv 2309.14322):
//   - z_loss: the cross-entropy kernels with z-loss (model/layers.h crossentropy_backward_z,
//     zloss_mean) against the independent float64 numpy reference tests/ref/ref_zloss.py (lse,
//     cross-entropy, the z term, the gradient; the reference checks its own gradient against
//     float64 finite differences), the bf16 form equal to the float one rounded, z = 0 giving the
//     cross-entropy's gradient bit for bit; the float backward per entry (B T = 6 rows) against
//     finite differences of the objective computed in double (1e-4 relative: a 0.5% error in one
//     entry fails); the model's mean_zloss is z times
//     the mean squared log Z of its own logits (computed here in double) while mean_loss stays
//     the cross-entropy; in ./train the record's z_loss at step 1 is z (log Z)^2 with log Z ~
//     ln V at init, train_loss is the same with and without z_loss at step 1, and there is no
//     z_loss key without it;
//   - log Z diagnostics: log_z_mean and log_z_max of the "model" record and main.log equal the
//     mean and max over the probe positions of the log-sum-exp of the model's own logits,
//     computed here in double;
//   - weight_decay_mode = independent: one step of each optimizer (adamw, sgd, signsgd, lion)
//     against a hand computation p - lr_t u - (lr_t / lr_max) wd p, coupled against p - lr_t (u +
//     wd p), undecayed ranges untouched, lr_max = 0 without decay; through ./train the mode
//     changes the run when weight_decay > 0 and nothing when it is 0.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bf16.h"
#include "common/npy.h"
#include "common/util.h"
#include "model/gpt2.h"
#include "model/layers.h"
#include "model/metrics.h"
#include "optim/optim.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

#define PY "/usr/bin/python3"

static float* read_ref(const char* dir, const char* name, size_t n) {
    char path[1100], err[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    NpyInfo info;
    float* r = npy_read_f32(path, &info, err, sizeof(err));
    ck_assert_msg(r != NULL, "%s", err);
    ck_assert_msg(info.count == n, "%s: %zu values, expected %zu", path, info.count, n);
    return r;
}

static double rel_err(const float* a, const float* ref, size_t n) {
    double md = 0, mr = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - (double)ref[i]);
        if (!(d <= md)) md = d;
        if (fabs((double)ref[i]) > mr) mr = fabs((double)ref[i]);
    }
    return md / (mr > 1e-3 ? mr : 1e-3);
}

// ---------------------------------------------------------------------------------------------
// z-loss kernels

enum { ZN = 6, ZV = 50, ZVP = 64 };

// logits with a row offset, so that log Z is far from 0 and the z term matters
static void zlogits(float* z, int* tg, Rng* r) {
    for (int i = 0; i < ZN; i++) {
        const float off = 2.0f * (float)i - 4.0f;
        for (int v = 0; v < ZVP; v++)
            z[i * ZVP + v] = v < ZV ? off + 1.5f * rng_normal(r) : 0.0f;
        tg[i] = (int)rng_below(r, ZV);
    }
}

START_TEST(test_zloss_matches_reference) {
    ck_assert_msg(system(PY " -c 'import numpy' >/dev/null 2>&1") == 0,
                  PY " with numpy is required for the independent references");
    static const float ZC[] = {1e-4f, 0.05f, 0.7f};
    for (int k = 0; k < 3; k++) {
        const char* dir = test_tmpdir();
        float z[ZN * ZVP], lse[ZN], ce[ZN], d[ZN * ZVP], d0[ZN * ZVP], dplain[ZN * ZVP];
        int tg[ZN];
        Rng r;
        rng_seed(&r, 3 + (uint64_t)k);
        zlogits(z, tg, &r);
        char path[1100], err[512];
        int shape[2] = {ZN, ZVP};
        snprintf(path, sizeof(path), "%s/logits.npy", dir);
        ck_assert_msg(npy_write(path, z, shape, 2, 0, err, sizeof(err)) == 0, "%s", err);
        const float dloss = 0.37f;
        snprintf(path, sizeof(path), "%s/case.json", dir);
        FILE* f = fopen(path, "w");
        ck_assert(f != NULL);
        fprintf(f, "{\"N\":%d,\"V\":%d,\"Vp\":%d,\"c\":%.9g,\"dloss\":%.9g,\"targets\":[", ZN, ZV,
                ZVP, (double)ZC[k], (double)dloss);
        for (int i = 0; i < ZN; i++)
            fprintf(f, "%s%d", i ? "," : "", tg[i]);
        fprintf(f, "]}\n");
        fclose(f);
        char cmd[1400];
        snprintf(cmd, sizeof(cmd), PY " %s/tests/ref/ref_zloss.py %s", test_repo_root(), dir);
        ck_assert_msg(system(cmd) == 0, "tests/ref/ref_zloss.py failed (its message is above)");
        crossentropy_forward(ce, lse, z, tg, ZN, ZV, ZVP);
        const float zt = zloss_mean(lse, ZN, ZC[k]);
        crossentropy_backward_z(d, z, lse, tg, dloss, ZC[k], ZN, ZV, ZVP);
        float* rl = read_ref(dir, "ref_lse.npy", ZN);
        float* rc = read_ref(dir, "ref_ce.npy", ZN);
        float* rz = read_ref(dir, "ref_zterm.npy", 1);
        float* rd = read_ref(dir, "ref_dlogits.npy", ZN * ZVP);
        ck_assert_msg(rel_err(lse, rl, ZN) <= 1e-6, "c=%g: lse", (double)ZC[k]);
        ck_assert_msg(rel_err(ce, rc, ZN) <= 1e-6, "c=%g: cross-entropy", (double)ZC[k]);
        ck_assert_msg(fabs((double)zt - rz[0]) <= 1e-6 * fabs(rz[0]), "c=%g: z term %.9g vs %.9g",
                      (double)ZC[k], (double)zt, (double)rz[0]);
        const double e = rel_err(d, rd, ZN * ZVP);
        ck_assert_msg(e <= 1e-6, "c=%g: dlogits differ from the reference by %.3g", (double)ZC[k],
                      e);
        for (int i = 0; i < ZN; i++) // padded columns
            for (int v = ZV; v < ZVP; v++)
                ck_assert(d[i * ZVP + v] == 0.0f);
        // bf16: the float gradient rounded, bit for bit
        bf16 h[ZN * ZVP];
        crossentropy_backward_bf16_z(h, z, lse, tg, dloss, ZC[k], ZN, ZV, ZVP);
        for (int i = 0; i < ZN * ZVP; i++)
            ck_assert_msg(h[i] == bf16_from_float(d[i]), "bf16 dlogits[%d]", i);
        // the z term does change the gradient, and z = 0 is the cross-entropy's, bit for bit
        crossentropy_backward_z(d0, z, lse, tg, dloss, 0.0f, ZN, ZV, ZVP);
        crossentropy_backward(dplain, z, lse, tg, dloss, ZN, ZV, ZVP);
        ck_assert(memcmp(d0, dplain, sizeof(d0)) == 0);
        ck_assert(memcmp(d0, d, sizeof(d0)) != 0);
        free(rl);
        free(rc);
        free(rz);
        free(rd);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        ck_assert_int_eq(system(cmd), 0);
    }
}
END_TEST

typedef struct {
    float* z;
    const int* tg;
    float c;
} ZCtx;

// the objective of the float logits, in double: mean over rows of lse - z_target + c lse^2
static double zobjective(void* p) {
    ZCtx* x = p;
    double s = 0;
    for (int i = 0; i < ZN; i++) {
        const float* z = x->z + i * ZVP;
        double mx = z[0], e = 0;
        for (int v = 1; v < ZV; v++)
            mx = fmax(mx, z[v]);
        for (int v = 0; v < ZV; v++)
            e += exp((double)z[v] - mx);
        const double lse = mx + log(e);
        s += lse - z[x->tg[i]] + (double)x->c * lse * lse;
    }
    return s / ZN;
}

START_TEST(test_zloss_finite_differences) {
    static const float ZC[] = {0.05f, 0.7f};
    for (int k = 0; k < 2; k++) {
        float z[ZN * ZVP], lse[ZN], ce[ZN], d[ZN * ZVP];
        int tg[ZN];
        Rng r;
        rng_seed(&r, 50 + (uint64_t)k);
        zlogits(z, tg, &r);
        crossentropy_forward(ce, lse, z, tg, ZN, ZV, ZVP);
        crossentropy_backward_z(d, z, lse, tg, 1.0f / ZN, ZC[k], ZN, ZV, ZVP);
        ZCtx x = {z, tg, ZC[k]};
        int checked = 0;
        for (int i = 0; i < ZN; i++)
            for (int v = 0; v < ZV; v++) {
                const double ana = d[i * ZVP + v];
                // step ladder, as tests/test_qknorm.c: the first step that agrees passes
                static const double HS[3] = {3e-2, 1e-2, 3e-3};
                double num = 0;
                int ok = 0;
                for (int s = 0; s < 3 && !ok; s++) {
                    num = test_fd4(zobjective, &x, z + i * ZVP + v, HS[s]);
                    ok = fabs(num - ana) <= 1e-4 * (fabs(num) + fabs(ana)) + 1e-8;
                }
                ck_assert_msg(ok, "c=%g: dlogits[%d][%d] analytic %.9g vs numeric %.9g",
                              (double)ZC[k], i, v, ana, num);
                checked += fabs(ana) >= 1e-5; // entries where a 0.5% error exceeds the bar
            }
        ck_assert_int_ge(checked, ZN * 5);
    }
}
END_TEST

START_TEST(test_zloss_in_model) {
    Config c;
    test_tiny_config(&c, 97, 2, 2, 32, 16);
    GPT2 a, b;
    test_build_model(&a, &c, 2, 16, 4);
    c.z_loss = 0.01f;
    test_build_model(&b, &c, 2, 16, 4);
    int in[32], tg[32];
    Rng r;
    rng_seed(&r, 8);
    test_random_tokens(in, 32, 97, &r);
    test_random_tokens(tg, 32, 97, &r);
    gpt2_forward(&a, in, tg, 2, 16);
    gpt2_forward(&b, in, tg, 2, 16);
    ck_assert(a.mean_loss == b.mean_loss); // the logged loss is the cross-entropy
    ck_assert(a.mean_zloss == 0.0f);
    double s = 0;
    for (int bt = 0; bt < 32; bt++) {
        const float* lg = gpt2_logits(&b, bt / 16, bt % 16);
        double mx = lg[0], e = 0;
        for (int v = 1; v < 97; v++)
            mx = fmax(mx, lg[v]);
        for (int v = 0; v < 97; v++)
            e += exp((double)lg[v] - mx);
        const double lz = mx + log(e);
        s += lz * lz;
    }
    const double want = 0.01 * s / 32;
    ck_assert_msg(fabs(b.mean_zloss - want) <= 1e-5 * want, "mean_zloss %.9g, expected %.9g",
                  (double)b.mean_zloss, want);
    // the gradients differ (the z term has one), and without targets there is no z term
    gpt2_zero_grad(&a);
    gpt2_backward(&a, 1.0f);
    gpt2_zero_grad(&b);
    gpt2_backward(&b, 1.0f);
    ck_assert(memcmp(a.grads, b.grads, sizeof(float) * a.num_params) != 0);
    gpt2_forward(&b, in, NULL, 2, 16);
    ck_assert(b.mean_zloss == 0.0f);
    gpt2_free(&a);
    gpt2_free(&b);
}
END_TEST

// the value of "key": in the line of OUT/metrics.jsonl that has "step":STEP and `has`, or NAN
static double record_value(const char* out, long step, const char* has, const char* key) {
    char p[1100], err[1200], pat[64], kp[96];
    snprintf(p, sizeof(p), "%s/metrics.jsonl", out);
    size_t len;
    char* text = util_read_file(p, &len, err, sizeof(err));
    ck_assert_msg(text != NULL, "%s", err);
    snprintf(pat, sizeof(pat), "{\"step\":%ld,", step);
    snprintf(kp, sizeof(kp), "\"%s\":", key);
    double v = NAN;
    for (char* line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, pat, strlen(pat)) != 0 || !strstr(line, has)) continue;
        const char* q = strstr(line, kp);
        if (q) v = strtod(q + strlen(kp), NULL);
        break;
    }
    free(text);
    return v;
}

START_TEST(test_zloss_in_train) {
    const char* dir = test_tmpdir();
    test_write_shards(dir, 300, 61, 20000, 3000);
    Config a, b;
    test_run_config(&a, dir, "plain", 300);
    a.log_every = 1000000;
    a.max_steps = 3;
    a.warmup_steps = 1;
    a.eval_every = 0;
    b = a;
    snprintf(b.out_dir, sizeof(b.out_dir), "%s/z", dir);
    b.z_loss = 0.01f;
    test_train_ok(&a);
    test_train_ok(&b);
    const double la = record_value(a.out_dir, 1, "train_loss", "train_loss");
    const double lb = record_value(b.out_dir, 1, "train_loss", "train_loss");
    ck_assert_msg(la == lb, "step 1 train_loss %.9g vs %.9g with z_loss", la, lb);
    ck_assert_msg(isnan(record_value(a.out_dir, 1, "train_loss", "z_loss")),
                  "a z_loss key without z_loss");
    // at init the logits are ~0 (N(0, 0.02) embeddings): log Z ~ ln 300 within a few percent
    const double zl = record_value(b.out_dir, 1, "train_loss", "z_loss");
    const double lz = log(300.0);
    ck_assert_msg(fabs(zl / (0.01 * lz * lz) - 1) < 0.02, "z_loss %.6g, expected ~%.6g", zl,
                  0.01 * lz * lz);
    // later steps differ: the z term is in the gradient
    ck_assert(record_value(a.out_dir, 3, "train_loss", "train_loss") !=
              record_value(b.out_dir, 3, "train_loss", "train_loss"));
}
END_TEST

// ---------------------------------------------------------------------------------------------
// log Z diagnostics

START_TEST(test_log_z_records) {
    enum { T = 12, NSEQ = 3 };
    Config c;
    test_tiny_config(&c, 97, 2, 2, 32, T);
    GPT2 m;
    test_build_model(&m, &c, 2, T, 6);
    Rng r;
    rng_seed(&r, 9);
    for (size_t k = 0; k < (size_t)97 * 32; k++) // logits of O(1) spread
        m.params[m.specs[P_WTE].offset + k] = 0.5f * rng_normal(&r);
    gpt2_params_changed(&m);
    int tokens[NSEQ * T];
    test_random_tokens(tokens, NSEQ * T, 97, &r);
    // expected: every probe position's log-sum-exp, in double, from the model's own logits
    double sum = 0, mx = -INFINITY;
    for (int q = 0; q < NSEQ; q++) {
        gpt2_forward(&m, tokens + q * T, NULL, 1, T);
        for (int t = 0; t < T; t++) {
            const float* lg = gpt2_logits(&m, 0, t);
            double a = lg[0], e = 0;
            for (int v = 1; v < 97; v++)
                a = fmax(a, lg[v]);
            for (int v = 0; v < 97; v++)
                e += exp((double)lg[v] - a);
            sum += a + log(e);
            mx = fmax(mx, a + log(e));
        }
    }
    MetricsSetup ms = {
        .every = 1, .sink_eps = 0.3f, .tokens = tokens, .nseq = NSEQ, .T = T, .nthreads = 2};
    Metrics mt;
    char err[512], path[1100], logp[1100];
    ck_assert_msg(metrics_init(&mt, &m, &ms, err, sizeof(err)) == 0, "%s", err);
    const char* dir = test_tmpdir();
    snprintf(path, sizeof(path), "%s/metrics.jsonl", dir);
    snprintf(logp, sizeof(logp), "%s/main.log", dir);
    FILE* f = fopen(path, "w");
    FILE* lf = fopen(logp, "w");
    ck_assert(f && lf);
    ck_assert(metrics_probe(&mt, &m, 5, 1, 0, NULL, dir, f, lf, err, sizeof(err)) == 0);
    fclose(f);
    fclose(lf);
    const double lzm = record_value(dir, 5, "\"kind\":\"model\"", "log_z_mean");
    const double lzx = record_value(dir, 5, "\"kind\":\"model\"", "log_z_max");
    ck_assert_msg(fabs(lzm - sum / (NSEQ * T)) <= 1e-5 * fabs(lzm), "log_z_mean %.9g vs %.9g", lzm,
                  sum / (NSEQ * T));
    ck_assert_msg(fabs(lzx - mx) <= 1e-5 * fabs(mx), "log_z_max %.9g vs %.9g", lzx, mx);
    ck_assert(lzx > lzm);
    size_t len;
    char* text = util_read_file(logp, &len, err, sizeof(err));
    ck_assert_msg(text && strstr(text, "step 5 log_z_mean ") && strstr(text, "step 5 log_z_max "),
                  "main.log lacks the log Z lines");
    free(text);
    metrics_free(&mt);
    gpt2_free(&m);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// independent weight decay

// u of one first step of each optimizer from g (state zero): p1 = p - lr (u + wd p)
static double first_u(const char* opt, double g, const OptimHParams* h) {
    if (!strcmp(opt, "adamw")) return g / (fabs(g) + h->eps); // mhat = g, vhat = g^2
    if (!strcmp(opt, "sgd")) return g;                        // buf = g
    return g > 0 ? 1.0 : g < 0 ? -1.0 : 0.0;                  // signsgd; lion: sign((1-b1) g)
}

START_TEST(test_weight_decay_modes) {
    static const char* const OPTS[] = {"adamw", "sgd", "signsgd", "lion"};
    const float lr_max = 2e-3f, lr = 5e-4f, wd = 0.3f; // s_t = lr / lr_max = 0.25
    enum { N = 40 };
    for (int oi = 0; oi < 4; oi++) {
        for (int mode = 0; mode < OPTIM_WD_COUNT; mode++) {
            float p[N], g[N], p0[N];
            Rng r;
            rng_seed(&r, 30 + (uint64_t)oi);
            fill_normal(p, N, 1.0f, &r);
            fill_normal(g, N, 1.0f, &r);
            memcpy(p0, p, sizeof(p));
            OptimHParams h = {.beta1 = 0.9f,
                              .beta2 = 0.95f,
                              .eps = 1e-8f,
                              .weight_decay = wd,
                              .wd_mode = mode,
                              .lr_max = lr_max};
            OptimRange rg[2] = {{0, N / 2, 1}, {N / 2, N / 2, 0}}; // decayed, not decayed
            Optimizer o;
            optim_init(&o, optim_lookup(OPTS[oi]), N);
            optim_step(&o, p, g, rg, 2, lr, &h);
            for (int i = 0; i < N; i++) {
                const double u = first_u(OPTS[oi], g[i], &h);
                double want;
                if (i >= N / 2)
                    want = p0[i] - lr * u;
                else if (mode == OPTIM_WD_INDEPENDENT) // the paper's independent decay
                    want = p0[i] - (double)lr * u - ((double)lr / lr_max) * wd * p0[i];
                else
                    want = p0[i] - (double)lr * (u + (double)wd * p0[i]);
                ck_assert_msg(fabs(p[i] - want) <= 1e-6 * fabs(want) + 1e-7,
                              "%s %s p[%d]: %.9g, expected %.9g", OPTS[oi],
                              optim_wd_mode_name(mode), i, (double)p[i], want);
            }
            optim_free(&o);
        }
    }
    // the two modes differ by the factor lr_max on the decay term: with lr_max = 1 they agree
    OptimHParams h = {.weight_decay = 0.1f, .wd_mode = OPTIM_WD_INDEPENDENT, .lr_max = 1.0f};
    ck_assert(optim_decay_coeff(&h) == 0.1f);
    h.lr_max = 4e-3f;
    ck_assert_float_eq_tol(optim_decay_coeff(&h), 25.0f, 1e-4f);
    h.lr_max = 0.0f; // nothing moves: no decay
    ck_assert(optim_decay_coeff(&h) == 0.0f);
    h.wd_mode = OPTIM_WD_COUPLED;
    ck_assert(optim_decay_coeff(&h) == 0.1f);
}
END_TEST

START_TEST(test_weight_decay_mode_in_train) {
    const char* dir = test_tmpdir();
    test_write_shards(dir, 300, 61, 20000, 3000);
    Config a;
    test_run_config(&a, dir, "c", 300);
    a.log_every = 1000000;
    a.max_steps = 4;
    a.warmup_steps = 1;
    a.eval_every = 0;
    Config b = a;
    snprintf(b.out_dir, sizeof(b.out_dir), "%s/i", dir);
    util_strlcpy(b.weight_decay_mode, "independent", sizeof(b.weight_decay_mode));
    test_train_ok(&a);
    test_train_ok(&b);
    ck_assert(record_value(a.out_dir, 4, "train_loss", "train_loss") !=
              record_value(b.out_dir, 4, "train_loss", "train_loss"));
    // without decay the mode changes nothing
    a.weight_decay = b.weight_decay = 0.0f;
    snprintf(a.out_dir, sizeof(a.out_dir), "%s/c0", dir);
    snprintf(b.out_dir, sizeof(b.out_dir), "%s/i0", dir);
    test_train_ok(&a);
    test_train_ok(&b);
    for (long s = 1; s <= 4; s++)
        ck_assert(record_value(a.out_dir, s, "train_loss", "train_loss") ==
                  record_value(b.out_dir, s, "train_loss", "train_loss"));
}
END_TEST

static Suite* stability_suite(void) {
    Suite* s = suite_create("stability");
    TCase* tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_zloss_matches_reference);
    tcase_add_test(tc, test_zloss_finite_differences);
    tcase_add_test(tc, test_zloss_in_model);
    tcase_add_test(tc, test_zloss_in_train);
    tcase_add_test(tc, test_log_z_records);
    tcase_add_test(tc, test_weight_decay_modes);
    tcase_add_test(tc, test_weight_decay_mode_in_train);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(stability_suite)
