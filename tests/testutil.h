// tests/testutil.h: shared helpers for the Check suites: a main() per suite binary,
// finite-difference gradient checks (central 4-point stencil, loss in double), random fills.
#ifndef ATTNLAB_TESTUTIL_H
#define ATTNLAB_TESTUTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "common/rng.h"

// Each tests/test_X.c ends with TEST_MAIN(x_suite): runs the suite, exit 1 on any failure.
#define TEST_MAIN(suite_fn)                                                                        \
    int main(void) {                                                                               \
        SRunner* sr = srunner_create(suite_fn());                                                  \
        srunner_run_all(sr, CK_NORMAL);                                                            \
        int nf = srunner_ntests_failed(sr);                                                        \
        srunner_free(sr);                                                                          \
        return nf ? 1 : 0;                                                                         \
    }

// A scalar loss of the current contents of the buffer under test.
typedef double (*ScalarFn)(void* ctx);

typedef struct {
    double max_err;  // max over coordinates of |num-ana| / (1e-2 (|num| + |ana|) + atol): pass <= 1
    size_t worst;    // coordinate of max_err
    double num, ana; // values there
    size_t checked;
} GradCheck;

// Compare analytic gradient g[0..n) of f with respect to x[0..n) against a 4-point central
// difference (f(x-2h) - 8f(x-h) + 8f(x+h) - f(x+2h)) / 12h. x is restored afterwards.
// At most max_checks coordinates are checked (evenly strided) when max_checks < n.
// atol is the absolute allowance on top of 1% relative error (float rounding noise of the
// loss divided by h, and near-zero gradients): e.g. 1e-4 * max|g|.
GradCheck gradcheck(ScalarFn f, void* ctx, float* x, const float* g, size_t n, float h, double atol,
                    size_t max_checks);

// The 4-point central difference of f at *x with step h (x restored).
double test_fd4(ScalarFn f, void* ctx, float* x, double h);
// Every stride-th coordinate of g[0..n) against test_fd4 at step h, for losses with kinks
// (ReLU, max): a coordinate whose estimates at 2h and h (and, with finer, h and h/2) disagree by
// more than 2e-3 relative + 1e-2 atol has a kink within reach and is skipped; the others must
// agree within 1e-2 relative to (|num| + |ana| + atol). At least one coordinate is checked, and
// checked >= min_ratio x skipped.
void test_check_grad_kinks(ScalarFn f, void* ctx, float* x, const float* g, size_t n, size_t stride,
                           double h, double atol, int finer, int min_ratio, const char* what);

// Fill with uniform values in [lo, hi) or N(0, std).
void fill_uniform(float* x, size_t n, float lo, float hi, Rng* r);
void fill_normal(float* x, size_t n, float std, Rng* r);
float max_abs(const float* x, size_t n);
// max |a-b| / (max|b| + tiny)
double rel_diff(const float* a, const float* b, size_t n);

// Registry loops call this to honour ATTNLAB_TEST_VARIANTS (a comma-separated list of variant
// names; unset or empty = all), which scripts/mutate sets to run only the variant it mutated.
int test_variant_selected(const char* name);

// A fresh temporary directory (mkdtemp under $TMPDIR or /tmp); returns a static buffer.
const char* test_tmpdir(void);

// From this test binary's path (ROOT/BUILD/tests/test_x): the build directory, which holds the
// tools (BUILD/train, BUILD/probe, ...), and the repository root (scripts/, configs/). Static
// buffers; exits if /proc/self/exe cannot be read.
const char* test_build_dir(void);
const char* test_repo_root(void);

// 1 when oneDNN runs bf16 matmuls natively on this CPU (dnnl_mm_probe, asked once per test
// binary), else 0 after printing "WHO: oneDNN bf16 cases not run: <reason>" once to stderr, so
// a skip always names its cause.
int test_bf16_native(const char* who);

// Word number idx of a "a|b|c" choice list, into out (empty when idx is past the end): the tests'
// own reading of a choice hyperparameter, independent of the registry printer's helper.
void test_nth_choice(char* out, size_t cap, const char* choices, int idx);

#endif
