// tests/test_adamw_kernel.c: AdamW's fused kernel (optim/adamw.c: the update with the clipping
// scale folded in and the bf16 weight copy written in the same pass; AVX-512, AVX and scalar
// paths) is bit for bit the kernel it replaced, kept below as the reference (its AVX path, its
// scalar tail and its separate copy loop, verbatim). Checked through optim_step_fused over ranges
// of odd offsets and lengths (every vector/tail split), several steps, with clipping on and off,
// with and without the copy, on normal values and on the awkward ones: +-0, subnormals,
// gradients whose square overflows, Inf and NaN gradients, and parameters that the copy rounds
// at a tie, to Inf, or keeps NaN (lr = 0 leaves the parameters as set, so the copy sees them).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef __AVX__
#include <immintrin.h>
#endif

#include "common/bf16.h"
#include "common/util.h"
#include "optim/optim.h"
#include "tests/testutil.h"

typedef struct {
    float b1, b2, c1, c2, bc1, bc2, eps, lr, wd;
} RefConst;

// The kernel before the AVX-512 path, unchanged (kept out of line: specialised for run_case's
// constant arguments, gcc warns about its tail loop).
__attribute__((noipa)) static void ref_span(float* p, const float* g, float* m, float* v, size_t lo,
                                            size_t hi, const RefConst* k, float gscale,
                                            bf16* copy) {
    size_t i = lo;
#ifdef __AVX__
    const __m256 gs = _mm256_set1_ps(gscale);
    const __m256 b1 = _mm256_set1_ps(k->b1), b2 = _mm256_set1_ps(k->b2);
    const __m256 c1 = _mm256_set1_ps(k->c1), c2 = _mm256_set1_ps(k->c2);
    const __m256 bc1 = _mm256_set1_ps(k->bc1), bc2 = _mm256_set1_ps(k->bc2);
    const __m256 eps = _mm256_set1_ps(k->eps), lr = _mm256_set1_ps(k->lr);
    const __m256 wd = _mm256_set1_ps(k->wd);
    for (; i + 8 <= hi; i += 8) {
        __m256 gi = _mm256_mul_ps(_mm256_loadu_ps(g + i), gs);
        __m256 pi = _mm256_loadu_ps(p + i);
        __m256 mi = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(c1, gi));
        __m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + i)),
                                  _mm256_mul_ps(_mm256_mul_ps(c2, gi), gi));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        __m256 mhat = _mm256_div_ps(mi, bc1);
        __m256 vhat = _mm256_div_ps(vi, bc2);
        __m256 u = _mm256_div_ps(mhat, _mm256_add_ps(_mm256_sqrt_ps(vhat), eps));
        u = _mm256_add_ps(u, _mm256_mul_ps(wd, pi));
        _mm256_storeu_ps(p + i, _mm256_sub_ps(pi, _mm256_mul_ps(lr, u)));
    }
#endif
    for (; i < hi; i++) {
        float gi = g[i] * gscale;
        float mi = k->b1 * m[i] + k->c1 * gi;
        float vi = k->b2 * v[i] + k->c2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float mhat = mi / k->bc1;
        float vhat = vi / k->bc2;
        p[i] -= k->lr * (mhat / (sqrtf(vhat) + k->eps) + k->wd * p[i]);
    }
    if (copy)
        for (i = lo; i < hi; i++)
            copy[i] = bf16_from_float(p[i]);
}

static const OptimHParams HP = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};

static RefConst ref_const(float lr, float wd, long t) {
    return (RefConst){.b1 = HP.beta1,
                      .b2 = HP.beta2,
                      .c1 = 1.0f - HP.beta1,
                      .c2 = 1.0f - HP.beta2,
                      .bc1 = (float)(1.0 - pow((double)HP.beta1, (double)t)),
                      .bc2 = (float)(1.0 - pow((double)HP.beta2, (double)t)),
                      .eps = HP.eps,
                      .lr = lr,
                      .wd = wd};
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// Awkward values at every 7th element (the rest normal): by kind k.
static float awkward(int k, Rng* r) {
    switch (k % 10) {
    case 0:
        return 0.0f;
    case 1:
        return -0.0f;
    case 2:
        return from_bits(0x00000123u); // subnormal
    case 3:
        return from_bits(0x3F808000u); // a bf16 tie (rounds to even: down)
    case 4:
        return from_bits(0x3F818000u); // a bf16 tie (rounds to even: up)
    case 5:
        return 3.4e38f; // rounds to Inf in bf16; squares overflow
    case 6:
        return INFINITY;
    case 7:
        return -NAN;
    case 8:
        return from_bits(0x7F800001u); // a signalling-pattern NaN
    default:
        return (float)(1e-30 * rng_normal(r)); // tiny
    }
}

// Index of the first element where a and b differ in their bits, except that any two NaNs are
// equal (x86 propagates one of two NaN operands, and the compiler may commute an addition or a
// product: which payload survives is not an arithmetic result); n when none.
static size_t first_diff(const float* a, const float* b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, 4) != 0 && !(isnan(a[i]) && isnan(b[i]))) return i;
    return n;
}

static size_t first_diff_bf16(const bf16* a, const bf16* b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i] && !(isnan(bf16_to_float(a[i])) && isnan(bf16_to_float(b[i])))) return i;
    return n;
}

static void run_case(size_t n, size_t off, int with_copy, float lr, int special, int seed) {
    const size_t N = n + off + 3;
    float *p = malloc(4 * N), *pr = malloc(4 * N), *g = malloc(4 * N), *gr = malloc(4 * N);
    float* mr = calloc(2 * N, 4); // reference state: m then v, stride N
    bf16 *c = malloc(2 * N), *cr = malloc(2 * N);
    Rng rg;
    rng_seed(&rg, (uint64_t)seed);
    fill_normal(p, N, 0.5f, &rg);
    if (special)
        for (size_t i = 0; i < N; i += 7)
            p[i] = awkward((int)(i / 7), &rg);
    memcpy(pr, p, 4 * N);
    memset(c, 0xAB, 2 * N);
    memcpy(cr, c, 2 * N);
    Optimizer o;
    optim_init(&o, &optim_adamw, N);
    const OptimRange range = {off, n, 1};
    for (long t = 1; t <= 3; t++) {
        fill_normal(g, N, 1.0f, &rg);
        if (special)
            for (size_t i = 3; i < N; i += 7)
                g[i] = awkward((int)(i / 7) + (int)t, &rg);
        memcpy(gr, g, 4 * N);
        const float gscale = t == 2 ? 1.0f : 0.37f; // clipping on, off, on
        OptimFuse f = {gscale, with_copy ? c : NULL};
        optim_step_fused(&o, p, g, &range, 1, lr, &HP, &f);
        RefConst k = ref_const(lr, optim_decay_coeff(&HP), t);
        // state is indexed from the range's start (optim_step_fused: o->state + offset)
        ref_span(pr + off, gr + off, mr + off, mr + N + off, 0, n, &k, gscale,
                 with_copy ? cr + off : NULL);
        const char* what = special ? "awkward values" : "normal values";
        size_t d = first_diff(p, pr, N);
        ck_assert_msg(d == N, "n %zu off %zu step %ld (%s): parameter %zu: %a vs %a", n, off, t,
                      what, d, (double)p[d % N], (double)pr[d % N]);
        d = first_diff(o.state + off, mr + off, n);
        ck_assert_msg(d == n, "n %zu off %zu step %ld (%s): m %zu: %a vs %a (g %a)", n, off, t,
                      what, d, (double)o.state[off + d % n], (double)mr[off + d % n],
                      (double)gr[off + d % n]);
        d = first_diff(o.state + N + off, mr + N + off, n);
        ck_assert_msg(d == n, "n %zu off %zu step %ld (%s): v %zu: %a vs %a (g %a)", n, off, t,
                      what, d, (double)o.state[N + off + d % n], (double)mr[N + off + d % n],
                      (double)gr[off + d % n]);
        d = first_diff_bf16(c, cr, N);
        ck_assert_msg(d == N, "n %zu off %zu step %ld (%s): bf16 copy %zu: %04x vs %04x", n, off, t,
                      what, d, c[d % N], cr[d % N]);
        ck_assert(memcmp(g, gr, 4 * N) == 0); // the gradient is only read
    }
    optim_free(&o);
    free(p), free(pr), free(g), free(gr), free(mr), free(c), free(cr);
}

START_TEST(test_adamw_kernel_matches_reference) {
    // lengths around the 16- and 8-lane widths and the 4096-element chunks; odd offsets
    const size_t lens[] = {1, 7, 8, 15, 16, 17, 31, 33, 4095, 4096, 4097, 3 * 4096 + 77, 40000};
    for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
        for (size_t off = 0; off < 6; off += 5)
            for (int cp = 0; cp <= 1; cp++)
                for (int sp = 0; sp <= 1; sp++)
                    run_case(lens[li], off, cp, 1e-2f, sp, (int)(li * 8 + off + 2 * cp + sp));
}
END_TEST

// lr = 0: the parameters stay as set (finite updates), so the copy rounds exactly the awkward
// parameter values (ties, values past the largest bf16, NaNs, subnormals)
START_TEST(test_adamw_kernel_copy_rounding) {
    run_case(3 * 4096 + 77, 0, 1, 0.0f, 1, 11);
    run_case(1000, 5, 1, 0.0f, 1, 12);
}
END_TEST

static Suite* adamw_kernel_suite(void) {
    Suite* s = suite_create("adamw_kernel");
    TCase* tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_adamw_kernel_matches_reference);
    tcase_add_test(tc, test_adamw_kernel_copy_rounding);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(adamw_kernel_suite)
