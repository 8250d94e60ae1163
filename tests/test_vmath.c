// tests/test_vmath.c: the vectorised exp and tanh (common/vmath.h) and the passes built on them
// (GELU, cross-entropy): accuracy against libm in double over a sweep of every representable
// range, the vector widths bitwise equal to the scalar form (specials included), and results
// that do not depend on an element's position in its array or on the array's length.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/vmath.h"
#include "model/layers.h"
#include "tests/testutil.h"

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

// distance in units in the last place between a float result and the double truth
static double ulp_err(float got, double want) {
    if (want == 0.0) return got == 0.0f ? 0.0 : INFINITY;
    int e;
    frexp(want, &e);                 // want = f 2^e, f in [0.5, 1)
    double ulp = ldexp(1.0, e - 24); // the spacing of floats at want
    if (ulp < ldexp(1.0, -149)) ulp = ldexp(1.0, -149);
    return fabs((double)got - want) / ulp;
}

// Every 97th float bit pattern in [VM_EXP_LO, VM_EXP_HI] (about 23 million inputs), both signs.
START_TEST(test_exp_accuracy) {
    double worst = 0;
    float worst_x = 0;
    long n = 0;
    for (int sign = 0; sign < 2; sign++) {
        for (uint32_t u = 0; u < 0x7f800000u; u += 97) {
            float x = from_bits(u | (sign ? 0x80000000u : 0));
            if (x > VM_EXP_HI || x < VM_EXP_LO) continue;
            double want = exp((double)x);
            if (want < 1.2e-38) continue; // flushed range, checked below
            double e = ulp_err(vm_expf(x), want);
            n++;
            if (e > worst) worst = e, worst_x = x;
        }
    }
    ck_assert_msg(n > 20000000, "only %ld inputs swept", n);
    printf("vm_expf: worst %.3f ulp at x = %.9g over %ld inputs\n", worst, (double)worst_x, n);
    ck_assert_msg(worst <= 1.0, "vm_expf: %.2f ulp at x = %.9g (want <= 1)", worst,
                  (double)worst_x);
    // the special cases the header states
    ck_assert(isinf(vm_expf(88.4f)) && vm_expf(88.4f) > 0);
    ck_assert(isinf(vm_expf(INFINITY)));
    ck_assert(vm_expf(-87.31f) == 0.0f && !signbit(vm_expf(-87.31f)));
    ck_assert(vm_expf(-INFINITY) == 0.0f);
    ck_assert(isnan(vm_expf(NAN)));
    ck_assert(vm_expf(0.0f) == 1.0f && vm_expf(-0.0f) == 1.0f);
    ck_assert(fabs(vm_expf(88.37f) - exp((double)88.37f)) <= 2 * ldexp(1.0, 127 - 23));
}
END_TEST

START_TEST(test_tanh_accuracy) {
    double worst = 0;
    float worst_u = 0;
    for (int i = -2000000; i <= 2000000; i++) {
        float u = (float)i * 1e-5f; // [-20, 20]
        double e = fabs((double)vm_tanhf(u) - tanh((double)u));
        if (e > worst) worst = e, worst_u = u;
    }
    printf("vm_tanhf: worst abs error %.3g at u = %.9g\n", worst, (double)worst_u);
    ck_assert_msg(worst <= 1.2e-7, "vm_tanhf: abs error %.3g at u = %.9g", worst, (double)worst_u);
    ck_assert(vm_tanhf(1e4f) == 1.0f && vm_tanhf(-1e4f) == -1.0f);
    ck_assert(vm_tanhf(INFINITY) == 1.0f && vm_tanhf(-INFINITY) == -1.0f);
    ck_assert(isnan(vm_tanhf(NAN)));
    ck_assert(vm_tanhf(0.0f) == 0.0f && fabsf(vm_tanhf(1e-30f)) < 1e-7f);
    ck_assert(vm_tanhf(-0.5f) == -vm_tanhf(0.5f)); // odd
}
END_TEST

// inputs for the bitwise comparisons: specials, the clamp boundaries and their neighbours, and
// random values over the whole range
static float* special_inputs(int* n) {
    enum { NR = 1 << 16 };
    const float fixed[] = {0.0f,
                           -0.0f,
                           INFINITY,
                           -INFINITY,
                           NAN,
                           -NAN,
                           VM_EXP_HI,
                           VM_EXP_LO,
                           nextafterf(VM_EXP_HI, 100),
                           nextafterf(VM_EXP_LO, -100),
                           nextafterf(VM_EXP_HI, 0),
                           nextafterf(VM_EXP_LO, 0),
                           1e-30f,
                           -1e-30f,
                           1e-45f,
                           3.4e38f,
                           -3.4e38f,
                           0.34657359f,
                           -0.34657359f,
                           1.0f,
                           -1.0f};
    const int nf = (int)(sizeof(fixed) / sizeof(fixed[0]));
    float* x = malloc(sizeof(float) * (size_t)(nf + NR + 16));
    memcpy(x, fixed, sizeof(fixed));
    Rng r;
    rng_seed(&r, 5);
    for (int i = 0; i < NR; i++)
        x[nf + i] = (rng_uniform(&r) - 0.5f) * (i % 3 ? 200.0f : 40.0f);
    *n = nf + NR;
    return x;
}

START_TEST(test_vector_equals_scalar) {
    int n;
    float* x = special_inputs(&n);
    int lanes = 0;
#if defined(__AVX512F__)
    lanes = 16;
    for (int i = 0; i + 16 <= n; i += 16) {
        float e[16], t[16];
        _mm512_storeu_ps(e, vm_exp16(_mm512_loadu_ps(x + i)));
        _mm512_storeu_ps(t, vm_tanh16(_mm512_loadu_ps(x + i)));
        for (int k = 0; k < 16; k++) {
            float xe = vm_expf(x[i + k]), xt = vm_tanhf(x[i + k]);
            ck_assert_msg(bits_of(e[k]) == bits_of(xe) || (isnan(e[k]) && isnan(xe)),
                          "exp16(%.9g) = %.9g, scalar %.9g", (double)x[i + k], (double)e[k],
                          (double)xe);
            ck_assert_msg(bits_of(t[k]) == bits_of(xt) || (isnan(t[k]) && isnan(xt)),
                          "tanh16(%.9g) = %.9g, scalar %.9g", (double)x[i + k], (double)t[k],
                          (double)xt);
        }
    }
#endif
#if defined(__AVX2__) && defined(__FMA__)
    lanes = lanes ? lanes : 8;
    for (int i = 0; i + 8 <= n; i += 8) {
        float e[8], t[8];
        _mm256_storeu_ps(e, vm_exp8(_mm256_loadu_ps(x + i)));
        _mm256_storeu_ps(t, vm_tanh8(_mm256_loadu_ps(x + i)));
        for (int k = 0; k < 8; k++) {
            float xe = vm_expf(x[i + k]), xt = vm_tanhf(x[i + k]);
            ck_assert_msg(bits_of(e[k]) == bits_of(xe) || (isnan(e[k]) && isnan(xe)),
                          "exp8(%.9g) = %.9g, scalar %.9g", (double)x[i + k], (double)e[k],
                          (double)xe);
            ck_assert_msg(bits_of(t[k]) == bits_of(xt) || (isnan(t[k]) && isnan(xt)),
                          "tanh8(%.9g) = %.9g, scalar %.9g", (double)x[i + k], (double)t[k],
                          (double)xt);
        }
    }
#endif
    if (!lanes) printf("vmath: this build has no AVX2+FMA or AVX-512: only the scalar form ran\n");
    free(x);
}
END_TEST

static double gelu_ref(double x) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static double gelu_dref(double x) {
    const double k = sqrt(2.0 / M_PI);
    double t = tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

// GELU over 10,007 elements (vector body and tail) against the double definition, and each
// element equal to the same element computed alone (a length-1 call takes the scalar path).
START_TEST(test_gelu_vector) {
    enum { N = 10007 };
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    float *d = malloc(sizeof(float) * N), *g = malloc(sizeof(float) * N);
    Rng r;
    rng_seed(&r, 9);
    for (int i = 0; i < N; i++) {
        x[i] = (rng_uniform(&r) - 0.5f) * 16.0f;
        d[i] = rng_uniform(&r) - 0.5f;
        g[i] = 0.25f;
    }
    gelu_forward(y, x, N);
    gelu_backward(g, x, d, N);
    for (int i = 0; i < N; i++) {
        double ref = gelu_ref(x[i]);
        ck_assert_msg(fabs(y[i] - ref) <= 3e-7 * (1.0 + fabs(ref)), "gelu(%.9g) = %.9g, want %.9g",
                      (double)x[i], (double)y[i], ref);
        double gref = 0.25 + gelu_dref(x[i]) * d[i];
        ck_assert_msg(fabs(g[i] - gref) <= 1e-6, "gelu'(%.9g) accumulate = %.9g, want %.9g",
                      (double)x[i], (double)g[i], gref);
        float y1, g1 = 0.25f;
        gelu_forward(&y1, x + i, 1);
        gelu_backward(&g1, x + i, d + i, 1);
        ck_assert_msg(bits_of(y1) == bits_of(y[i]) && bits_of(g1) == bits_of(g[i]),
                      "gelu element %d depends on its position", i);
    }
    free(x), free(y), free(d), free(g);
}
END_TEST

// Cross-entropy over rows of V = 1,000 and 50,257 (body and tail) against double logsumexp and
// softmax, with padded columns (Vp > V) zeroed in the gradient and a NaN logit reaching the loss.
START_TEST(test_crossentropy_vector) {
    const int Vs[2] = {1000, 50257};
    for (int vi = 0; vi < 2; vi++) {
        const int N = 3, V = Vs[vi], Vp = V + 47;
        float* z = malloc(sizeof(float) * (size_t)N * Vp);
        float* dz = malloc(sizeof(float) * (size_t)N * Vp);
        float losses[3], lse[3];
        int tg[3] = {0, V / 2, V - 1};
        Rng r;
        rng_seed(&r, 3 + vi);
        for (int i = 0; i < N * Vp; i++)
            z[i] = (rng_uniform(&r) - 0.5f) * 30.0f;
        crossentropy_forward(losses, lse, z, tg, N, V, Vp);
        crossentropy_backward(dz, z, lse, tg, 0.5f, N, V, Vp);
        for (int n = 0; n < N; n++) {
            const float* zr = z + (size_t)n * Vp;
            double m = -INFINITY, s = 0;
            for (int v = 0; v < V; v++)
                m = fmax(m, zr[v]);
            for (int v = 0; v < V; v++)
                s += exp(zr[v] - m);
            double l = m + log(s);
            ck_assert_msg(fabs(lse[n] - l) <= 2e-6 * fabs(l), "V=%d row %d lse %.9g, want %.9g", V,
                          n, (double)lse[n], l);
            ck_assert(fabs(losses[n] - (l - zr[tg[n]])) <= 4e-6 * (1 + fabs(l)));
            for (int v = 0; v < Vp; v++) {
                double want = v < V ? 0.5 * (exp(zr[v] - l) - (v == tg[n])) : 0.0;
                ck_assert_msg(fabs(dz[(size_t)n * Vp + v] - want) <= 4e-6 * fabs(want) + 1e-12,
                              "V=%d row %d dz[%d] = %.9g, want %.9g", V, n, v,
                              (double)dz[(size_t)n * Vp + v], want);
            }
        }
        z[(size_t)Vp + 17] = NAN; // row 1
        crossentropy_forward(losses, lse, z, tg, N, V, Vp);
        ck_assert(isfinite(losses[0]) && isnan(losses[1]) && isfinite(losses[2]));
        free(z), free(dz);
    }
}
END_TEST

static Suite* vmath_suite(void) {
    Suite* s = suite_create("vmath");
    TCase* tc = tcase_create("vmath");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_exp_accuracy);
    tcase_add_test(tc, test_tanh_accuracy);
    tcase_add_test(tc, test_vector_equals_scalar);
    tcase_add_test(tc, test_gelu_vector);
    tcase_add_test(tc, test_crossentropy_vector);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(vmath_suite)
