// tests/test_bf16_train.c: the model and the training run in bf16 (precision bf16 where oneDNN
// is native, and the portable bf16_ref everywhere):
//   - a tiny GPT-2's logits and every parameter tensor's gradient in bf16 against fp32 within a
//     stated bound (and not identical: the rounding is real);
//   - the bf16 weight copy is made once per optimizer step, not once per forward;
//   - 1 vs 2 threads: identical loss and gradients, bit for bit;
//   - the linear layers' inputs rounded once in the forward and reused by the backward: the
//     parameters after 3 AdamW steps are bitwise those of rounding inside every matmul call;
//   - 200 steps of a tiny model track the fp32 loss curve within 0.02 nats;
//   - 20 steps straight == 10 steps + resume + 10 steps, exactly;
//   - every registered attention variant trains 40 steps with finite, falling loss.
// Where the CPU has no native bf16 matmul the oneDNN runs print why and are skipped.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "data/shard.h"
#include "model/gpt2.h"
#include "optim/clip.h"
#include "optim/data_parallel.h"
#include "optim/optim.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

static int native(void) {
    return test_bf16_native("test_bf16_train");
}

// the bf16 precisions to test here: the reference always, oneDNN where native
static int precisions(MMPrecision* p) {
    int n = 0;
    p[n++] = MM_BF16_REF;
    if (native()) p[n++] = MM_BF16;
    return n;
}

// forward + backward of one batch in precision p; copies logits and gradients out
static float step_once(MMPrecision p, int nthreads, const int* in, const int* tg, float** logits,
                       float** grads, size_t* nlog, size_t* npar, GPT2* keep) {
    Config c;
    test_tiny_config(&c, 300, 2, 4, 64, 32);
    omp_set_num_threads(nthreads);
    GPT2 m;
    test_build_model(&m, &c, 2, 32, 9);
    gpt2_set_precision(&m, p);
    gpt2_forward(&m, in, tg, 2, 32);
    *nlog = (size_t)2 * 32 * m.cfg.padded_vocab;
    *logits = allocFloats(*nlog);
    memcpy(*logits, m.logits, sizeof(float) * *nlog);
    gpt2_zero_grad(&m);
    gpt2_backward(&m, 1.0f);
    *npar = m.num_params;
    *grads = allocFloats(m.num_params);
    memcpy(*grads, m.grads, sizeof(float) * m.num_params);
    float loss = m.mean_loss;
    if (keep)
        *keep = m;
    else
        gpt2_free(&m);
    mm_set_precision(MM_FP32);
    omp_set_num_threads(2);
    return loss;
}

START_TEST(test_model_bf16_vs_fp32) {
    Rng r;
    rng_seed(&r, 5);
    int in[64], tg[64];
    test_random_tokens(in, 64, 300, &r);
    test_random_tokens(tg, 64, 300, &r);
    float *l0, *g0;
    size_t nl, np;
    GPT2 m0;
    float loss0 = step_once(MM_FP32, 2, in, tg, &l0, &g0, &nl, &np, &m0);
    MMPrecision ps[2];
    int n = precisions(ps);
    for (int q = 0; q < n; q++) {
        float *l1, *g1;
        float loss1 = step_once(ps[q], 2, in, tg, &l1, &g1, &nl, &np, NULL);
        // Bound: each matmul's relative error is ~u = 2^-8 per rounded operand (2u per product,
        // averaging down over K); the logits pass through ~10 matmuls in sequence and the
        // gradients through ~20, so relative (to the tensor's max) errors stay below 2e-2 and
        // 6e-2; the loss within 1e-2 nats.
        double rl = rel_diff(l1, l0, nl);
        ck_assert_msg(rl < 2e-2 && rl > 0, "%s: logits rel diff %.3g", mm_precision_name(ps[q]),
                      rl);
        ck_assert_msg(fabs(loss1 - loss0) < 1e-2, "loss %.6f vs %.6f", (double)loss1,
                      (double)loss0);
        for (int s = 0; s < m0.nspecs; s++) {
            const ParamSpec* sp = &m0.specs[s];
            if (s == P_WPE || max_abs(g0 + sp->offset, sp->size) == 0) continue;
            double rg = rel_diff(g1 + sp->offset, g0 + sp->offset, sp->size);
            ck_assert_msg(rg < 6e-2, "%s: gradient of %s rel diff %.3g", mm_precision_name(ps[q]),
                          sp->name, rg);
        }
        ck_assert(memcmp(g1, g0, sizeof(float) * np) != 0);
        free(l1);
        free(g1);
    }
    gpt2_free(&m0);
    free(l0);
    free(g0);
}
END_TEST

START_TEST(test_weight_copy_once_per_step) {
    Config c;
    test_tiny_config(&c, 300, 1, 2, 32, 16);
    GPT2 m;
    test_build_model(&m, &c, 2, 16, 3);
    gpt2_set_precision(&m, MM_BF16_REF);
    int in[32], tg[32];
    Rng r;
    rng_seed(&r, 1);
    test_random_tokens(in, 32, 300, &r);
    test_random_tokens(tg, 32, 300, &r);
    gpt2_zero_grad(&m);
    for (int k = 0; k < 3; k++) { // gradient accumulation: three forwards, one copy
        gpt2_forward(&m, in, tg, 2, 16);
        gpt2_backward(&m, 1.0f / 3);
    }
    ck_assert_int_eq(m.bf16_refreshes, 1);
    for (size_t i = 0; i < m.num_params; i++)
        ck_assert(m.params_bf16[i] == bf16_from_float(m.params[i]));
    float before = m.mean_loss;
    for (size_t i = 0; i < m.num_params; i++) // an "optimizer step"
        m.params[i] *= 0.5f;
    gpt2_params_changed(&m);
    gpt2_forward(&m, in, tg, 2, 16); // an evaluation after the step sees the new weights
    ck_assert_int_eq(m.bf16_refreshes, 2);
    ck_assert(m.mean_loss != before);
    for (size_t i = 0; i < m.num_params; i++)
        ck_assert(m.params_bf16[i] == bf16_from_float(m.params[i]));
    // a real optimizer step rewrites the copy in its own pass (dp_update without data
    // parallelism, as the trainer calls it): no refresh pass follows, in this step's evaluation
    // or in the next step, and the copy the next forward multiplies with is the new weights'
    Optimizer o;
    optim_init(&o, &optim_adamw, m.num_params);
    const OptimHParams hp = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
    OptimRange all = {0, m.num_params, 1};
    gpt2_zero_grad(&m);
    gpt2_forward(&m, in, tg, 2, 16);
    gpt2_backward(&m, 1.0f);
    const long refreshes = m.bf16_refreshes;
    double norm = grad_global_norm(m.grads, m.num_params);
    ck_assert_int_eq(dp_update(NULL, &o, m.params, m.grads, &all, 1, norm, (float)(norm / 2), 1e-2f,
                               &hp, gpt2_weight_copy(&m)),
                     1);
    gpt2_params_synced(&m);
    for (size_t i = 0; i < m.num_params; i++)
        ck_assert(m.params_bf16[i] == bf16_from_float(m.params[i]));
    gpt2_forward(&m, in, tg, 2, 16); // the evaluation after the step
    float after_step = m.mean_loss;
    gpt2_zero_grad(&m);
    gpt2_forward(&m, in, tg, 2, 16); // the next step
    ck_assert_int_eq(m.bf16_refreshes, refreshes);
    ck_assert(m.mean_loss == after_step);
    gpt2_zero_grad(&m); // a step that changed nothing through the optimizer refreshes again
    gpt2_forward(&m, in, tg, 2, 16);
    ck_assert_int_eq(m.bf16_refreshes, refreshes + 1);
    optim_free(&o);
    gpt2_free(&m);
    mm_set_precision(MM_FP32);
}
END_TEST

START_TEST(test_model_bf16_threads_identical) {
    Rng r;
    rng_seed(&r, 6);
    int in[64], tg[64];
    test_random_tokens(in, 64, 300, &r);
    test_random_tokens(tg, 64, 300, &r);
    MMPrecision ps[2];
    int n = precisions(ps);
    for (int q = 0; q < n; q++) {
        float *l[2], *g[2], loss[2];
        size_t nl, np;
        for (int k = 0; k < 2; k++)
            loss[k] = step_once(ps[q], k + 1, in, tg, &l[k], &g[k], &nl, &np, NULL);
        ck_assert_msg(loss[0] == loss[1], "%s: loss %.9g vs %.9g", mm_precision_name(ps[q]),
                      (double)loss[0], (double)loss[1]);
        ck_assert(memcmp(l[0], l[1], sizeof(float) * nl) == 0);
        ck_assert(memcmp(g[0], g[1], sizeof(float) * np) == 0);
        for (int k = 0; k < 2; k++) {
            free(l[k]);
            free(g[k]);
        }
    }
}
END_TEST

// Train a tiny model `steps` AdamW steps in precision p with `nthreads` threads and return its
// parameters. old_path: the linear layers' inputs are rounded inside every matmul call, as
// before the forward kept them (the model's bf16 activation copies are dropped, so the matmuls
// get no copy and round the fp32 activations themselves). Otherwise each copy is checked to hold
// exactly bf16(activation) after every forward, and the GELU backward's dfch copy after every
// backward.
static float* train_steps(MMPrecision p, int nthreads, int old_path, int steps, size_t* npar) {
    Config c;
    test_tiny_config(&c, 300, 2, 4, 64, 32);
    omp_set_num_threads(nthreads);
    GPT2 m;
    test_build_model(&m, &c, 2, 32, 11);
    gpt2_set_precision(&m, p);
    if (old_path) {
        free(m.acts_bf16);
        m.acts_bf16 = m.ln1_h = m.atty_h = m.ln2_h = m.fch_gelu_h = m.lnf_h = m.dfch_h = NULL;
    }
    ck_assert(old_path || (m.acts_bf16 && m.ln1_h && m.atty_h && m.ln2_h && m.fch_gelu_h &&
                           m.lnf_h && m.dfch_h));
    Optimizer o;
    optim_init(&o, &optim_adamw, m.num_params);
    const OptimHParams hp = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
    OptimRange all = {0, m.num_params, 1};
    Rng r;
    rng_seed(&r, 4);
    const size_t BTC = (size_t)2 * 32 * 64;
    for (int k = 0; k < steps; k++) {
        int in[64], tg[64];
        test_random_tokens(in, 64, 300, &r);
        test_random_tokens(tg, 64, 300, &r);
        gpt2_zero_grad(&m);
        gpt2_forward(&m, in, tg, 2, 32);
        if (!old_path) { // the copies the backward reads: bf16 of this forward's activations
            struct {
                const float* f;
                const bf16* h;
                size_t n;
            } a[] = {{m.ln1, m.ln1_h, 2 * BTC},
                     {m.atty, m.atty_h, 2 * BTC},
                     {m.ln2, m.ln2_h, 2 * BTC},
                     {m.fch_gelu, m.fch_gelu_h, 2 * 4 * BTC},
                     {m.lnf, m.lnf_h, BTC}};
            for (int t = 0; t < 5; t++)
                for (size_t i = 0; i < a[t].n; i++)
                    ck_assert_msg(a[t].h[i] == bf16_from_float(a[t].f[i]), "copy %d element %zu", t,
                                  i);
        }
        gpt2_backward(&m, 1.0f);
        if (!old_path) // the GELU backward's rounding of dfch (the last layer's: layer 0)
            for (size_t i = 0; i < 4 * BTC; i++)
                ck_assert_msg(m.dfch_h[i] == bf16_from_float(m.dfch[i]), "dfch element %zu", i);
        double norm = grad_global_norm(m.grads, m.num_params);
        dp_update(NULL, &o, m.params, m.grads, &all, 1, norm, (float)(norm / 2), 1e-2f, &hp,
                  gpt2_weight_copy(&m));
        gpt2_params_synced(&m);
    }
    *npar = m.num_params;
    float* params = allocFloats(m.num_params);
    memcpy(params, m.params, sizeof(float) * m.num_params);
    optim_free(&o);
    gpt2_free(&m);
    mm_set_precision(MM_FP32);
    omp_set_num_threads(2);
    return params;
}

// The forward's bf16 copies of the linear layers' inputs (written by layernorm and GELU in their
// own pass, and one cast of the attention output), reused by the backward's weight-gradient
// matmuls, give bitwise the parameters of rounding inside every matmul call, for 1 and 2
// threads.
START_TEST(test_bf16_act_copies_bitwise) {
    MMPrecision ps[2];
    int n = precisions(ps);
    for (int q = 0; q < n; q++) {
        size_t np;
        float* old = train_steps(ps[q], 2, 1, 3, &np);
        float* init = train_steps(ps[q], 2, 1, 0, &np);
        ck_assert(memcmp(old, init, sizeof(float) * np) != 0); // the steps changed something
        for (int t = 1; t <= 2; t++) {
            float* now = train_steps(ps[q], t, 0, 3, &np);
            size_t i = 0;
            while (i < np && memcmp(&old[i], &now[i], sizeof(float)) == 0)
                i++;
            ck_assert_msg(i == np, "%s, %d threads: parameter %zu %.9g vs %.9g",
                          mm_precision_name(ps[q]), t, i, (double)now[i < np ? i : 0],
                          (double)old[i < np ? i : 0]);
            free(now);
        }
        free(old);
        free(init);
    }
}
END_TEST

// ---------------------------------------------------------------------------------------------
// runs: synthetic shards, ./train

static void run_config(Config* c, const char* dir, const char* out, MMPrecision p) {
    test_tiny_config(c, 300, 2, 2, 32, 32);
    c->batch_size = 4;
    snprintf(c->train_data, sizeof(c->train_data), "%s/train_*.bin", dir);
    snprintf(c->val_data, sizeof(c->val_data), "%s/val_*.bin", dir);
    snprintf(c->out_dir, sizeof(c->out_dir), "%s/%s_%s", dir, out, mm_precision_name(p));
    util_strlcpy(c->precision, mm_precision_name(p), sizeof(c->precision));
    c->lr = 3e-3f;
    c->min_lr = 3e-4f;
    c->warmup_steps = 5;
    c->eval_every = 10;
    c->eval_steps = 2;
    c->log_every = 1000000; // no progress lines (0 is not a valid value)
    c->sample_every = 0;
    c->threads = 2;
    strcpy(c->tokenizer, "byte");
}

// Train with ./train; on failure its stderr is shown.
static int do_run(const Config* c) {
    char* se = NULL;
    int rc = test_train(c, &se);
    if (rc) fprintf(stderr, "./train exited %d: %s\n", rc, se);
    free(se);
    return rc;
}

static int read_losses(const char* out_dir, double* losses, int cap, double* last_val,
                       char* precision, size_t pcap) {
    char p[700], err[512];
    snprintf(p, sizeof(p), "%s/metrics.jsonl", out_dir);
    size_t len;
    char* text = util_read_file(p, &len, err, sizeof(err));
    ck_assert_msg(text != NULL, "%s", err);
    int n = 0;
    for (char* line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char* tl = strstr(line, "\"train_loss\":");
        if (tl && n < cap) losses[n++] = strtod(tl + 13, NULL);
        char* vl = strstr(line, "\"val_loss\":");
        if (vl && last_val) *last_val = strtod(vl + 11, NULL);
        char* pr = strstr(line, "\"precision\":\"");
        if (pr && precision) {
            pr += 13;
            size_t k = strcspn(pr, "\"");
            snprintf(precision, pcap, "%.*s", (int)k, pr);
        }
    }
    free(text);
    return n;
}

START_TEST(test_bf16_tracks_fp32_200_steps) {
    const char* dir = test_tmpdir();
    test_write_shards(dir, 300, 61, 40000, 3000);
    Config a;
    run_config(&a, dir, "track", MM_FP32);
    a.max_steps = 200;
    a.eval_every = 0;
    ck_assert_int_eq(do_run(&a), 0);
    static double la[256], lb[256];
    ck_assert_int_eq(read_losses(a.out_dir, la, 256, NULL, NULL, 0), 200);
    ck_assert_msg(la[0] - la[199] > 2.0, "fp32 did not learn (%.3f -> %.3f)", la[0], la[199]);
    MMPrecision ps[2];
    int n = precisions(ps);
    for (int q = 0; q < n; q++) {
        Config b;
        run_config(&b, dir, "track", ps[q]);
        b.max_steps = 200;
        b.eval_every = 0;
        ck_assert_int_eq(do_run(&b), 0);
        char prec[32] = "";
        ck_assert_int_eq(read_losses(b.out_dir, lb, 256, NULL, prec, sizeof(prec)), 200);
        ck_assert_str_eq(prec, mm_precision_name(ps[q])); // the metrics header says what ran
        double worst = 0, differ = 0;
        for (int i = 0; i < 200; i++) {
            double d = fabs(la[i] - lb[i]);
            if (d > worst) worst = d;
            differ += d > 0;
        }
        ck_assert_msg(worst <= 0.02, "%s: loss curve off fp32 by up to %.4f nats",
                      mm_precision_name(ps[q]), worst);
        ck_assert_msg(differ > 100, "%s: loss identical to fp32 at %.0f of 200 steps",
                      mm_precision_name(ps[q]), 200 - differ);
    }
}
END_TEST

START_TEST(test_bf16_resume_exact) {
    const char* dir = test_tmpdir();
    test_write_shards(dir, 300, 61, 20000, 3000);
    MMPrecision ps[2];
    int n = precisions(ps);
    for (int q = 0; q < n; q++) {
        Config a;
        run_config(&a, dir, "straight", ps[q]);
        a.max_steps = 20;
        a.shuffle = 1;
        char resumed[700];
        snprintf(resumed, sizeof(resumed), "%s/resumed_%s", dir, mm_precision_name(ps[q]));
        double va, vb;
        test_expect_resume_exact(&a, resumed, mm_precision_name(ps[q]), &va, &vb);
        ck_assert(va == vb);
    }
}
END_TEST

START_TEST(test_every_variant_trains_bf16) {
    const AttnVariant* v = attn_get(_i);
    const char* dir = test_tmpdir();
    test_write_shards(dir, 300, 61, 20000, 3000);
    Config c;
    run_config(&c, dir, "v", native() ? MM_BF16 : MM_BF16_REF);
    util_strlcpy(c.attention, v->name, sizeof(c.attention));
    c.max_steps = 40;
    c.eval_every = 0;
    c.eval_steps = 2;
    ck_assert_int_eq(do_run(&c), 0);
    double l[64], val = NAN;
    int k = read_losses(c.out_dir, l, 64, &val, NULL, 0);
    ck_assert_int_eq(k, 40);
    for (int i = 0; i < k; i++)
        ck_assert_msg(isfinite(l[i]), "%s: non-finite loss", v->name);
    double first = (l[0] + l[1] + l[2]) / 3, last = (l[37] + l[38] + l[39]) / 3;
    ck_assert_msg(last < first - 0.3, "%s: loss did not fall (%.3f -> %.3f)", v->name, first, last);
    ck_assert_msg(isfinite(val), "%s: val loss not finite", v->name);
}
END_TEST

static Suite* bf16_train_suite(void) {
    Suite* s = suite_create("bf16_train");
    TCase* tc = tcase_create("model");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_model_bf16_vs_fp32);
    tcase_add_test(tc, test_weight_copy_once_per_step);
    tcase_add_test(tc, test_model_bf16_threads_identical);
    tcase_add_test(tc, test_bf16_act_copies_bitwise);
    suite_add_tcase(s, tc);
    TCase* tr = tcase_create("training");
    tcase_set_timeout(tr, 300);
    tcase_add_test(tr, test_bf16_tracks_fp32_200_steps);
    tcase_add_test(tr, test_bf16_resume_exact);
    tcase_add_loop_test(tr, test_every_variant_trains_bf16, 0, attn_count());
    suite_add_tcase(s, tr);
    return s;
}

TEST_MAIN(bf16_train_suite)
