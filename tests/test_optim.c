// tests/test_optim.c: optimizers against closed forms and an independent double-precision
// recurrence, weight decay per range, the shared step count, LR schedules from their formulas,
// gradient norms and clipping (including 1- vs 2-thread bitwise equality).
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/bf16.h"
#include "common/util.h"
#include "optim/clip.h"
#include "optim/optim.h"
#include "optim/schedule.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

static const OptimHParams HP = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};

// ----------------------------------------------------------------------------
// registry

START_TEST(test_registry) {
    ck_assert_int_eq(optim_count(), 4);
    ck_assert_ptr_eq(optim_get(0), &optim_adamw); // the default comes first
    ck_assert_ptr_eq(optim_lookup("adamw"), &optim_adamw);
    ck_assert_ptr_eq(optim_lookup("sgd"), &optim_sgd);
    ck_assert_ptr_eq(optim_lookup("signsgd"), &optim_signsgd);
    ck_assert_ptr_eq(optim_lookup("lion"), &optim_lion);
    ck_assert_ptr_null(optim_lookup("adam"));
    ck_assert_ptr_null(optim_lookup(NULL));
    ck_assert_ptr_null(optim_get(4));
    ck_assert_ptr_null(optim_get(-1));
    ck_assert_int_eq(optim_adamw.state_per_param, 2);
    ck_assert_int_eq(optim_sgd.state_per_param, 1);
    ck_assert_int_eq(optim_signsgd.state_per_param, 0);
    ck_assert_int_eq(optim_lion.state_per_param, 1);
    for (int i = 0; i < optim_count(); i++) {
        ck_assert(optim_get(i)->formula && optim_get(i)->formula[0]);
        Optimizer o;
        optim_init(&o, optim_get(i), 1000);
        ck_assert_int_eq(o.t, 0);
        for (size_t k = 0; k < (size_t)o.def->state_per_param * 1000; k++)
            ck_assert(o.state[k] == 0.0f);
        optim_free(&o);
    }
}
END_TEST

// ----------------------------------------------------------------------------
// AdamW

// Constant gradient g: m_t = (1-b1^t) g and v_t = (1-b2^t) g^2, so after bias correction
// mhat = g and vhat = g^2 at every step and p_t = (1 - lr wd) p_{t-1} - lr s, s = g/(|g|+eps).
// Closed form: p_T = q^T p0 - lr s (1 - q^T)/(1 - q), q = 1 - lr wd.
// Three ranges make sure t advances once per step, not once per range (otherwise the bias
// correction of the second and third range would not cancel).
START_TEST(test_adamw_constant_grad_closed_form) {
    const size_t n = 9;
    float p[9], g[9], p0[9];
    for (size_t i = 0; i < n; i++) {
        p0[i] = p[i] = 0.5f - 0.125f * (float)i;
        g[i] = (i % 3 == 0 ? -1.0f : 1.0f) * (0.001f + 0.37f * (float)i); // mixed magnitudes
    }
    OptimRange r[3] = {{0, 3, 1}, {3, 4, 1}, {7, 2, 1}};
    Optimizer o;
    optim_init(&o, &optim_adamw, n);
    const float lr = 1e-2f;
    const int T = 7;
    for (int t = 1; t <= T; t++) {
        optim_step(&o, p, g, r, 3, lr, &HP);
        ck_assert_int_eq(o.t, t);
    }
    double q = 1.0 - (double)lr * HP.weight_decay;
    for (size_t i = 0; i < n; i++) {
        double s = g[i] / (fabs(g[i]) + (double)HP.eps);
        double expect = pow(q, T) * p0[i] - (double)lr * s * (1.0 - pow(q, T)) / (1.0 - q);
        ck_assert_double_eq_tol(p[i], expect, 2e-6);
        // state layout: m then v, each n floats
        double m = (1.0 - pow(HP.beta1, T)) * g[i];
        double v = (1.0 - pow(HP.beta2, T)) * g[i] * g[i];
        ck_assert_double_eq_tol(o.state[i], m, 1e-6 * fabs(m) + 1e-12);
        ck_assert_double_eq_tol(o.state[n + i], v, 1e-6 * v + 1e-12);
    }
    optim_free(&o);
}
END_TEST

// Step 1 by hand: m = (1-b1) g, v = (1-b2) g^2, mhat = g, vhat = g^2, so
// p1 = p0 - lr (g/(|g|+eps) + wd p0); for |g| = eps the update is exactly lr/2 (no wd).
START_TEST(test_adamw_first_step) {
    float p[3] = {1.0f, -2.0f, 0.0f};
    const float g[3] = {1e-8f, -3.0f, 0.0f};
    OptimHParams h = HP;
    h.weight_decay = 0.0f;
    OptimRange r = {0, 3, 1};
    Optimizer o;
    optim_init(&o, &optim_adamw, 3);
    optim_step(&o, p, g, &r, 1, 0.5f, &h);
    ck_assert_double_eq_tol(p[0], 1.0 - 0.5 * 0.5, 1e-6); // g = eps: half a step
    ck_assert_double_eq_tol(p[1], -2.0 + 0.5 * (3.0 / (3.0 + 1e-8)), 1e-6);
    ck_assert(p[2] == 0.0f); // zero gradient: no move
    optim_free(&o);
}
END_TEST

// Independent double-precision reference of the AdamW recurrence for arbitrary gradients.
static void adamw_ref(double* p, double* m, double* v, const double* g, size_t n, double lr,
                      double wd, const OptimHParams* h, long t) {
    for (size_t i = 0; i < n; i++) {
        m[i] = h->beta1 * m[i] + (1.0 - h->beta1) * g[i];
        v[i] = h->beta2 * v[i] + (1.0 - h->beta2) * g[i] * g[i];
        double mhat = m[i] / (1.0 - pow(h->beta1, (double)t));
        double vhat = v[i] / (1.0 - pow(h->beta2, (double)t));
        p[i] -= lr * (mhat / (sqrt(vhat) + h->eps) + wd * p[i]);
    }
}

// Varying gradients (sign flips, growing and shrinking magnitudes) and a changing lr, with a
// decayed and a non-decayed range; compared to the double reference step by step.
START_TEST(test_adamw_reference_sequence) {
    enum { N = 37, T = 12 }; // long enough for the vector path and a scalar tail
    float p[N];
    double pr[N], mr[N] = {0}, vr[N] = {0};
    for (int i = 0; i < N; i++)
        pr[i] = p[i] = 0.3f * (float)(i - 2);
    OptimRange r[2] = {{0, 20, 1}, {20, N - 20, 0}};
    Optimizer o;
    optim_init(&o, &optim_adamw, N);
    for (int t = 1; t <= T; t++) {
        float g[N];
        double gd[N];
        for (int i = 0; i < N; i++) {
            // alternating sign, magnitudes between 1e-3 and ~2
            double x = ((t + i) % 2 ? 1.0 : -1.0) * (0.001 + 0.15 * (double)((t * 7 + i * 3) % 13));
            g[i] = (float)x;
            gd[i] = (double)g[i];
        }
        float lr = 1e-2f * (float)t / (float)T;
        optim_step(&o, p, g, r, 2, lr, &HP);
        adamw_ref(pr, mr, vr, gd, 20, lr, HP.weight_decay, &HP, t);
        adamw_ref(pr + 20, mr + 20, vr + 20, gd + 20, N - 20, lr, 0.0, &HP, t);
        for (int i = 0; i < N; i++)
            ck_assert_double_eq_tol(p[i], pr[i], 1e-6 * (1.0 + fabs(pr[i])));
    }
    optim_free(&o);
}
END_TEST

// The documented float formula, evaluated here one element at a time in the stated order, matches
// every element bitwise, whichever path (vector or scalar tail) the optimizer used for it.
START_TEST(test_adamw_float_formula_bitwise) {
    const size_t n = 1003;
    float* p = allocFloats(n);
    float* g = allocFloats(n);
    float* q = allocFloats(n);
    float* m = allocFloats(n);
    float* v = allocFloats(n);
    Rng rng;
    rng_seed(&rng, 5);
    fill_normal(p, n, 1.0f, &rng);
    memcpy(q, p, n * sizeof(float));
    OptimRange r = {0, n, 1};
    Optimizer o;
    optim_init(&o, &optim_adamw, n);
    const float lr = 3e-3f, wd = HP.weight_decay, b1 = HP.beta1, b2 = HP.beta2;
    for (long t = 1; t <= 3; t++) {
        fill_normal(g, n, 0.1f, &rng);
        optim_step(&o, p, g, &r, 1, lr, &HP);
        float bc1 = (float)(1.0 - pow(b1, (double)t)), bc2 = (float)(1.0 - pow(b2, (double)t));
        for (size_t i = 0; i < n; i++) {
            m[i] = b1 * m[i] + (1.0f - b1) * g[i];
            v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
            q[i] -= lr * ((m[i] / bc1) / (sqrtf(v[i] / bc2) + HP.eps) + wd * q[i]);
        }
        ck_assert(memcmp(p, q, n * sizeof(float)) == 0);
        ck_assert(memcmp(o.state, m, n * sizeof(float)) == 0);
        ck_assert(memcmp(o.state + n, v, n * sizeof(float)) == 0);
    }
    optim_free(&o);
    free(p);
    free(g);
    free(q);
    free(m);
    free(v);
}
END_TEST

// With g = 0 AdamW only decays: p_T = (1 - lr wd)^T p0 on decayed ranges, unchanged elsewhere.
START_TEST(test_weight_decay_only_on_decay_ranges) {
    for (int k = 0; k < optim_count(); k++) {
        const OptimizerDef* def = optim_get(k);
        enum { N = 10 };
        float p[N], g[N] = {0};
        for (int i = 0; i < N; i++)
            p[i] = 1.0f + 0.25f * (float)i;
        OptimRange r[3] = {{0, 3, 1}, {3, 5, 0}, {8, 2, 1}};
        Optimizer o;
        optim_init(&o, def, N);
        const float lr = 0.05f;
        for (int t = 0; t < 5; t++)
            optim_step(&o, p, g, r, 3, lr, &HP);
        for (int i = 0; i < N; i++) {
            double p0 = 1.0 + 0.25 * i;
            int decayed = i < 3 || i >= 8;
            if (decayed)
                ck_assert_double_eq_tol(p[i], p0 * pow(1.0 - lr * HP.weight_decay, 5), 1e-6);
            else
                ck_assert_msg(p[i] == (float)p0, "%s: undecayed p[%d] moved", def->name, i);
        }
        ck_assert_int_eq(o.t, 5);
        optim_free(&o);
    }
}
END_TEST

// ----------------------------------------------------------------------------
// SGD, SignSGD, Lion

// SGD, constant g, no wd: buf_t = g (1 - b1^t)/(1 - b1), p_T = p0 - lr g sum_t (1-b1^t)/(1-b1).
START_TEST(test_sgd_momentum_closed_form) {
    float p[2] = {1.0f, -1.0f};
    const float g[2] = {0.5f, -2.0f};
    OptimHParams h = HP;
    h.weight_decay = 0.0f;
    OptimRange r = {0, 2, 1};
    Optimizer o;
    optim_init(&o, &optim_sgd, 2);
    const int T = 6;
    const float lr = 0.01f;
    for (int t = 0; t < T; t++)
        optim_step(&o, p, g, &r, 1, lr, &h);
    double b1 = h.beta1, sum = 0;
    for (int t = 1; t <= T; t++)
        sum += (1.0 - pow(b1, t)) / (1.0 - b1);
    for (int i = 0; i < 2; i++) {
        double p0 = i ? -1.0 : 1.0;
        ck_assert_double_eq_tol(p[i], p0 - lr * g[i] * sum, 1e-5);
        ck_assert_double_eq_tol(o.state[i], g[i] * (1.0 - pow(b1, T)) / (1.0 - b1), 1e-5);
    }
    optim_free(&o);
}
END_TEST

// SGD with wd and momentum 0 is plain gradient descent plus decoupled decay:
// p1 = p0 - lr (g + wd p0).
START_TEST(test_sgd_plain_with_decay) {
    float p[1] = {2.0f};
    const float g[1] = {0.25f};
    OptimHParams h = HP;
    h.beta1 = 0.0f;
    OptimRange r = {0, 1, 1};
    Optimizer o;
    optim_init(&o, &optim_sgd, 1);
    optim_step(&o, p, g, &r, 1, 0.1f, &h);
    ck_assert_double_eq_tol(p[0], 2.0 - 0.1 * (0.25 + 0.1 * 2.0), 1e-6);
    optim_step(&o, p, g, &r, 1, 0.1f, &h);
    double p1 = 2.0 - 0.1 * (0.25 + 0.1 * 2.0);
    ck_assert_double_eq_tol(p[0], p1 - 0.1 * (0.25 + 0.1 * p1), 1e-6);
    optim_free(&o);
}
END_TEST

// SignSGD: p -= lr (sign(g) + wd p); the gradient's magnitude never matters, sign(0) = 0.
START_TEST(test_signsgd) {
    float p[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    const float g[4] = {1e-20f, -300.0f, 0.0f, 7.0f};
    OptimRange r[2] = {{0, 2, 1}, {2, 2, 0}};
    Optimizer o;
    optim_init(&o, &optim_signsgd, 4);
    ck_assert_ptr_null(o.state);
    optim_step(&o, p, g, r, 2, 0.1f, &HP);
    ck_assert_double_eq_tol(p[0], 1.0 - 0.1 * (1.0 + 0.1), 1e-7);
    ck_assert_double_eq_tol(p[1], 1.0 - 0.1 * (-1.0 + 0.1), 1e-7);
    ck_assert(p[2] == 1.0f);
    ck_assert_double_eq_tol(p[3], 0.9, 1e-7);
    optim_free(&o);
}
END_TEST

// Lion with b1 = 0.9, b2 = 0.99, m0 = 0, no wd. Step 1 with g = 1: c = 0.1 > 0, p -= lr,
// m = 0.01. Step 2 with g2: c = 0.009 + 0.1 g2, so g2 = -0.05 still moves p down (c = 0.004)
// while g2 = -0.2 moves it up (c = -0.011); m = 0.0099 + 0.01 g2 either way.
START_TEST(test_lion) {
    OptimHParams h = {.beta1 = 0.9f, .beta2 = 0.99f, .eps = 0.0f, .weight_decay = 0.0f};
    float p[2] = {0.0f, 0.0f};
    float g[2] = {1.0f, 1.0f};
    OptimRange r = {0, 2, 1};
    Optimizer o;
    optim_init(&o, &optim_lion, 2);
    optim_step(&o, p, g, &r, 1, 0.01f, &h);
    ck_assert_double_eq_tol(p[0], -0.01, 1e-9);
    ck_assert_double_eq_tol(o.state[0], 0.01, 1e-8);
    g[0] = -0.05f;
    g[1] = -0.2f;
    optim_step(&o, p, g, &r, 1, 0.01f, &h);
    ck_assert_double_eq_tol(p[0], -0.02, 1e-9);
    ck_assert_double_eq_tol(p[1], 0.0, 1e-9);
    ck_assert_double_eq_tol(o.state[0], 0.0099 - 0.0005, 1e-8);
    ck_assert_double_eq_tol(o.state[1], 0.0099 - 0.002, 1e-8);
    // decoupled decay: p -= lr (sign(c) + wd p)
    h.weight_decay = 0.5f;
    float q[1] = {4.0f};
    const float gq[1] = {-1.0f};
    Optimizer o2;
    optim_init(&o2, &optim_lion, 1);
    optim_step(&o2, q, gq, &r, 0, 0.01f, &h); // no ranges: nothing moves, but t advances
    ck_assert(q[0] == 4.0f);
    ck_assert_int_eq(o2.t, 1);
    OptimRange r1 = {0, 1, 1};
    optim_step(&o2, q, gq, &r1, 1, 0.01f, &h);
    ck_assert_double_eq_tol(q[0], 4.0 - 0.01 * (-1.0 + 0.5 * 4.0), 1e-6);
    optim_free(&o2);
    optim_free(&o);
}
END_TEST

// Every optimizer: 1 thread and 2 threads give bitwise identical parameters and state.
START_TEST(test_thread_count_invariance) {
    const size_t n = 3 * OPTIM_PAR_MIN + 123;
    float* g = allocFloats(n);
    float* p1 = allocFloats(n);
    float* p2 = allocFloats(n);
    Rng rng;
    for (int k = 0; k < optim_count(); k++) {
        rng_seed(&rng, 42);
        fill_normal(g, n, 1.0f, &rng);
        fill_normal(p1, n, 0.5f, &rng);
        memcpy(p2, p1, n * sizeof(float));
        OptimRange r[2] = {{0, n / 2, 1}, {n / 2, n - n / 2, 0}};
        Optimizer o1, o2;
        optim_init(&o1, optim_get(k), n);
        optim_init(&o2, optim_get(k), n);
        for (int t = 0; t < 3; t++) {
            omp_set_num_threads(1);
            optim_step(&o1, p1, g, r, 2, 1e-3f, &HP);
            omp_set_num_threads(2);
            optim_step(&o2, p2, g, r, 2, 1e-3f, &HP);
        }
        ck_assert_msg(memcmp(p1, p2, n * sizeof(float)) == 0, "%s differs", optim_get(k)->name);
        size_t ns = (size_t)optim_get(k)->state_per_param * n;
        if (ns) ck_assert(memcmp(o1.state, o2.state, ns * sizeof(float)) == 0);
        optim_free(&o1);
        optim_free(&o2);
    }
    free(g);
    free(p1);
    free(p2);
}
END_TEST

// ----------------------------------------------------------------------------
// schedules

// optim_step_fused (clipping scale and bf16 copy folded into the optimizer's pass) against the
// three passes it replaces: grad_clip in place, optim_step, bf16_from_floats. Bitwise, for every
// optimizer (AdamW's fused kernel, the others' fallback), over two ranges of odd lengths spanning
// several parallel chunks, for three steps with clipping on, and with gscale = 1.
START_TEST(test_fused_step_bitwise) {
    const size_t n = 3 * 4096 + 77;
    const OptimRange r[2] = {{0, 5000, 1}, {5000, n - 5000, 0}};
    for (int oi = 0; oi < optim_count(); oi++) {
        const OptimizerDef* def = optim_get(oi);
        float *pa = malloc(sizeof(float) * n), *pb = malloc(sizeof(float) * n);
        float *ga = malloc(sizeof(float) * n), *gb = malloc(sizeof(float) * n);
        bf16 *ca = malloc(sizeof(bf16) * n), *cb = malloc(sizeof(bf16) * n);
        Rng rg;
        rng_seed(&rg, 40 + (uint64_t)oi);
        fill_normal(pa, n, 0.5f, &rg);
        memcpy(pb, pa, sizeof(float) * n);
        Optimizer oa, ob;
        optim_init(&oa, def, n);
        optim_init(&ob, def, n);
        for (int step = 0; step < 4; step++) {
            fill_normal(ga, n, 1.0f, &rg);
            memcpy(gb, ga, sizeof(float) * n);
            double norm = grad_global_norm(ga, n);
            float max_norm = step == 3 ? 0.0f : (float)(norm * 0.3); // step 3: no clipping
            float s = grad_clip(ga, n, norm, max_norm);
            optim_step(&oa, pa, ga, r, 2, 1e-2f, &HP);
            bf16_from_floats(ca, pa, n);
            OptimFuse f = {grad_clip_scale(norm, max_norm), cb};
            ck_assert(f.gscale == s && (step == 3) == (s == 1.0f));
            optim_step_fused(&ob, pb, gb, r, 2, 1e-2f, &HP, &f);
            ck_assert_msg(memcmp(pa, pb, sizeof(float) * n) == 0, "%s step %d: parameters differ",
                          def->name, step);
            ck_assert_msg(memcmp(ca, cb, sizeof(bf16) * n) == 0, "%s step %d: bf16 copy differs",
                          def->name, step);
            if (def->state_per_param) // (SignSGD keeps no state: NULL buffers)
                ck_assert(memcmp(oa.state, ob.state,
                                 sizeof(float) * (size_t)def->state_per_param * n) == 0);
        }
        optim_free(&oa), optim_free(&ob);
        free(pa), free(pb), free(ga), free(gb), free(ca), free(cb);
    }
}
END_TEST

START_TEST(test_schedule_cosine) {
    LrSchedule s;
    const double lr = 6e-4, mn = 6e-5;
    ck_assert_int_eq(lr_schedule_init(&s, "cosine", (float)lr, (float)mn, 10, 110), 0);
    ck_assert_double_eq_tol(lr_schedule_get(&s, 0), lr / 10, 1e-10); // warmup start
    ck_assert_double_eq_tol(lr_schedule_get(&s, 4), lr * 5 / 10, 1e-10);
    ck_assert_double_eq_tol(lr_schedule_get(&s, 9), lr, 1e-10);             // warmup end
    ck_assert_double_eq_tol(lr_schedule_get(&s, 10), lr, 1e-10);            // decay starts at lr
    ck_assert_double_eq_tol(lr_schedule_get(&s, 60), (lr + mn) / 2, 1e-10); // midpoint
    // quarter: coeff = 0.5 (1 + cos(pi/4))
    ck_assert_double_eq_tol(lr_schedule_get(&s, 35), mn + 0.5 * (1 + sqrt(0.5)) * (lr - mn), 1e-10);
    ck_assert_double_eq_tol(lr_schedule_get(&s, 110), mn, 1e-10); // end
    ck_assert_double_eq_tol(lr_schedule_get(&s, 500), mn, 1e-10); // past the end: clamped
    // monotone non-increasing after warmup
    for (int t = 10; t < 120; t++)
        ck_assert(lr_schedule_get(&s, t + 1) <= lr_schedule_get(&s, t));
}
END_TEST

START_TEST(test_schedule_linear_constant) {
    LrSchedule s;
    ck_assert_int_eq(lr_schedule_init(&s, "linear", 1.0f, 0.1f, 0, 100), 0);
    ck_assert_double_eq_tol(lr_schedule_get(&s, 0), 1.0, 1e-7); // no warmup
    ck_assert_double_eq_tol(lr_schedule_get(&s, 25), 0.1 + 0.75 * 0.9, 1e-7);
    ck_assert_double_eq_tol(lr_schedule_get(&s, 50), 0.55, 1e-7);
    ck_assert_double_eq_tol(lr_schedule_get(&s, 100), 0.1, 1e-7);
    ck_assert_double_eq_tol(lr_schedule_get(&s, 1000), 0.1, 1e-7);
    ck_assert_int_eq(lr_schedule_init(&s, "constant", 0.5f, 0.1f, 4, 100), 0);
    ck_assert_double_eq_tol(lr_schedule_get(&s, 0), 0.125, 1e-7);
    ck_assert_double_eq_tol(lr_schedule_get(&s, 3), 0.5, 1e-7);
    ck_assert(lr_schedule_get(&s, 4) == 0.5f);
    ck_assert(lr_schedule_get(&s, 100000) == 0.5f);
    // unknown names
    ck_assert_int_eq(lr_schedule_init(&s, "cosinus", 1.0f, 0.1f, 0, 10), -1);
    ck_assert_int_eq(lr_schedule_init(&s, NULL, 1.0f, 0.1f, 0, 10), -1);
    ck_assert_ptr_nonnull(strstr(lr_schedule_names(), "cosine"));
}
END_TEST

// max_steps <= warmup: warmup still ramps, then the (empty) decay has finished: min_lr.
START_TEST(test_schedule_degenerate) {
    LrSchedule s;
    ck_assert_int_eq(lr_schedule_init(&s, "cosine", 1.0f, 0.25f, 10, 5), 0);
    ck_assert_double_eq_tol(lr_schedule_get(&s, 3), 0.4, 1e-7);
    ck_assert_double_eq_tol(lr_schedule_get(&s, 10), 0.25, 1e-7);
    ck_assert(isfinite(lr_schedule_get(&s, 10)));
    ck_assert_int_eq(lr_schedule_init(&s, "linear", 1.0f, 0.25f, 10, 10), 0);
    ck_assert_double_eq_tol(lr_schedule_get(&s, 9), 1.0, 1e-7);
    ck_assert_double_eq_tol(lr_schedule_get(&s, 10), 0.25, 1e-7);
    ck_assert_int_eq(lr_schedule_init(&s, "cosine", 1.0f, 0.0f, -3, 0), 0); // negative warmup
    ck_assert_double_eq_tol(lr_schedule_get(&s, 0), 0.0, 1e-7);
    ck_assert_double_eq_tol(lr_schedule_get(&s, -5), 0.0, 1e-7); // negative step = step 0
}
END_TEST

// Warmup-stable-decay (Hägele et al. 2024, linear cooldown): values worked out by hand from the
// definition (docs/optimizers.md). lr 1, min_lr 0.1, warmup 10, 100 steps, decay over the last 20.
START_TEST(test_schedule_wsd) {
    LrSchedule s;
    ck_assert_int_eq(lr_schedule_init(&s, "wsd", 1.0f, 0.1f, 10, 100), 0);
    ck_assert_double_eq_tol(lr_schedule_get(&s, 50), 1.0, 1e-7); // no decay phase set: constant
    lr_schedule_set_decay(&s, 20);
    ck_assert_double_eq_tol(lr_schedule_get(&s, 0), 0.1, 1e-7); // warmup: (step + 1) / 10
    ck_assert_double_eq_tol(lr_schedule_get(&s, 4), 0.5, 1e-7);
    ck_assert_double_eq_tol(lr_schedule_get(&s, 9), 1.0, 1e-7);
    for (int t = 10; t <= 80; t++) // stable through the first step of the decay (step 80)
        ck_assert_msg(lr_schedule_get(&s, t) == 1.0f, "step %d", t);
    ck_assert_double_eq_tol(lr_schedule_get(&s, 81), 0.955, 1e-7); // 1 - 0.9 * 1/20
    ck_assert_double_eq_tol(lr_schedule_get(&s, 90), 0.55, 1e-7);  // halfway: (1 + 0.1) / 2
    ck_assert_double_eq_tol(lr_schedule_get(&s, 99), 0.145, 1e-7); // 0.1 + 0.9 * 1/20
    ck_assert_double_eq_tol(lr_schedule_get(&s, 100), 0.1, 1e-7);
    ck_assert_double_eq_tol(lr_schedule_get(&s, 5000), 0.1, 1e-7);
    // a decay longer than the steps after warmup starts right after the warmup: 20 steps, warmup
    // 10, decay 15 -> over steps 10..20
    ck_assert_int_eq(lr_schedule_init(&s, "wsd", 1.0f, 0.1f, 10, 20), 0);
    lr_schedule_set_decay(&s, 15);
    ck_assert_double_eq_tol(lr_schedule_get(&s, 10), 1.0, 1e-7);
    ck_assert_double_eq_tol(lr_schedule_get(&s, 15), 0.55, 1e-7);
    // the same stable-phase steps whatever max_steps, with decay_steps fixed: what makes a wsd run
    // extend exactly
    LrSchedule a, b;
    ck_assert_int_eq(lr_schedule_init(&a, "wsd", 1.0f, 0.1f, 10, 100), 0);
    ck_assert_int_eq(lr_schedule_init(&b, "wsd", 1.0f, 0.1f, 10, 300), 0);
    lr_schedule_set_decay(&a, 20);
    lr_schedule_set_decay(&b, 20);
    for (int t = 0; t <= 80; t++)
        ck_assert(lr_schedule_get(&a, t) == lr_schedule_get(&b, t));
    ck_assert(lr_schedule_get(&a, 81) < lr_schedule_get(&b, 81));
    // the decay's length: decay_steps, else decay_fraction x max_steps rounded (halves up)
    ck_assert_int_eq(lr_schedule_decay_steps(100, 0, 0.2), 20);
    ck_assert_int_eq(lr_schedule_decay_steps(100, 30, 0.2), 30);
    ck_assert_int_eq(lr_schedule_decay_steps(7, 0, 0.5), 4); // 3.5
    ck_assert_int_eq(lr_schedule_decay_steps(10, 0, 0.24), 2);
    ck_assert_int_eq(lr_schedule_decay_steps(10, 0, 0.0), 0);
    ck_assert_ptr_nonnull(strstr(lr_schedule_names(), "wsd"));
}
END_TEST

// ----------------------------------------------------------------------------
// clipping

START_TEST(test_clip_345) {
    float g[2] = {3.0f, -4.0f};
    ck_assert(grad_sumsq(g, 2) == 25.0);
    ck_assert(grad_global_norm(g, 2) == 5.0);
    ck_assert(grad_sumsq(g, 0) == 0.0);
    // below the threshold, at it, disabled, non-finite norm: untouched, scale 1
    ck_assert(grad_clip(g, 2, 5.0, 10.0f) == 1.0f);
    ck_assert(grad_clip(g, 2, 5.0, 5.0f) == 1.0f);
    ck_assert(grad_clip(g, 2, 5.0, 0.0f) == 1.0f);
    ck_assert(grad_clip(g, 2, NAN, 1.0f) == 1.0f);
    ck_assert(grad_clip(g, 2, INFINITY, 1.0f) == 1.0f);
    ck_assert(g[0] == 3.0f && g[1] == -4.0f);
    // clip to 1: scale = 1/(5 + 1e-6) as torch.nn.utils.clip_grad_norm_
    float sc = grad_clip(g, 2, 5.0, 1.0f);
    ck_assert_double_eq_tol(sc, 1.0 / (5.0 + 1e-6), 1e-8); // 0.2 would be 4e-8 off
    ck_assert_double_eq_tol(g[0], 0.6, 1e-6);
    ck_assert_double_eq_tol(g[1], -0.8, 1e-6);
    ck_assert_double_eq_tol(grad_global_norm(g, 2), 1.0, 1e-6);
}
END_TEST

// A multi-block array: the sum matches a long-double reference, and 1 vs 2 threads agree bitwise.
START_TEST(test_clip_sumsq_threads) {
    const size_t n = 5 * 65536 + 4321;
    float* g = allocFloats(n);
    Rng rng;
    rng_seed(&rng, 7);
    fill_normal(g, n, 3.0f, &rng);
    long double ref = 0;
    for (size_t i = 0; i < n; i++)
        ref += (long double)g[i] * g[i];
    omp_set_num_threads(1);
    double s1 = grad_sumsq(g, n);
    omp_set_num_threads(2);
    double s2 = grad_sumsq(g, n);
    ck_assert_msg(memcmp(&s1, &s2, sizeof(double)) == 0, "%.17g vs %.17g", s1, s2);
    ck_assert_double_eq_tol(s1, (double)ref, 1e-12 * (double)ref);
    // clipping a big array: the new norm is max_norm (within float rounding)
    double norm = sqrt(s2);
    float sc = grad_clip(g, n, norm, 1.0f);
    ck_assert(sc < 1.0f);
    ck_assert_double_eq_tol(grad_global_norm(g, n), 1.0, 1e-5);
    free(g);
}
END_TEST

START_TEST(test_first_nonfinite) {
    const size_t n = 300000;
    float* g = allocFloats(n);
    for (size_t i = 0; i < n; i++)
        g[i] = (float)i * 1e-3f;
    ck_assert_uint_eq(grad_first_nonfinite(g, n), n);
    ck_assert_uint_eq(grad_first_nonfinite(g, 0), 0);
    g[n - 1] = -INFINITY;
    ck_assert_uint_eq(grad_first_nonfinite(g, n), n - 1);
    g[250000] = NAN;
    g[70000] = INFINITY;
    ck_assert_uint_eq(grad_first_nonfinite(g, n), 70000);
    omp_set_num_threads(1);
    ck_assert_uint_eq(grad_first_nonfinite(g, n), 70000);
    g[3] = NAN;
    ck_assert_uint_eq(grad_first_nonfinite(g, n), 3);
    ck_assert_uint_eq(grad_first_nonfinite(g, 3), 3); // the NaN is outside [0, 3)
    free(g);
}
END_TEST

static Suite* optim_suite(void) {
    Suite* s = suite_create("optim");
    TCase* tc = tcase_create("optimizers");
    tcase_add_test(tc, test_registry);
    tcase_add_test(tc, test_adamw_constant_grad_closed_form);
    tcase_add_test(tc, test_adamw_first_step);
    tcase_add_test(tc, test_adamw_reference_sequence);
    tcase_add_test(tc, test_adamw_float_formula_bitwise);
    tcase_add_test(tc, test_weight_decay_only_on_decay_ranges);
    tcase_add_test(tc, test_sgd_momentum_closed_form);
    tcase_add_test(tc, test_sgd_plain_with_decay);
    tcase_add_test(tc, test_signsgd);
    tcase_add_test(tc, test_lion);
    tcase_add_test(tc, test_thread_count_invariance);
    tcase_add_test(tc, test_fused_step_bitwise);
    suite_add_tcase(s, tc);
    TCase* ts = tcase_create("schedule");
    tcase_add_test(ts, test_schedule_cosine);
    tcase_add_test(ts, test_schedule_linear_constant);
    tcase_add_test(ts, test_schedule_degenerate);
    tcase_add_test(ts, test_schedule_wsd);
    suite_add_tcase(s, ts);
    TCase* tcl = tcase_create("clip");
    tcase_set_timeout(tcl, 20);
    tcase_add_test(tcl, test_clip_345);
    tcase_add_test(tcl, test_clip_sumsq_threads);
    tcase_add_test(tcl, test_first_nonfinite);
    suite_add_tcase(s, tcl);
    return s;
}

TEST_MAIN(optim_suite)
