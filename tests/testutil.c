// tests/testutil.c: implementation of the shared test helpers.
#include "tests/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/dnnl_mm.h"
#include "common/util.h"

GradCheck gradcheck(ScalarFn f, void* ctx, float* x, const float* g, size_t n, float h, double atol,
                    size_t max_checks) {
    GradCheck r = {0};
    size_t stride = 1;
    if (max_checks > 0 && n > max_checks) stride = (n + max_checks - 1) / max_checks;
    for (size_t i = 0; i < n; i += stride) {
        float x0 = x[i];
        double fv[4];
        const float off[4] = {-2.0f, -1.0f, 1.0f, 2.0f};
        double hd[4];
        for (int k = 0; k < 4; k++) {
            x[i] = x0 + off[k] * h;
            hd[k] = (double)x[i] - (double)x0; // the step actually taken in float
            fv[k] = f(ctx);
        }
        x[i] = x0;
        // use the realised steps: symmetric stencil assumes hd = off*h; float rounding of x0+h
        // is absorbed by dividing with the realised mean step
        double hh = (hd[3] - hd[0] + hd[2] - hd[1]) / 6.0;
        double num = (fv[0] - 8.0 * fv[1] + 8.0 * fv[2] - fv[3]) / (12.0 * hh);
        double ana = g[i];
        double err = fabs(num - ana) / (1e-2 * (fabs(num) + fabs(ana)) + atol);
        if (err > r.max_err || r.checked == 0) {
            if (err >= r.max_err) {
                r.max_err = err;
                r.worst = i;
                r.num = num;
                r.ana = ana;
            }
        }
        r.checked++;
    }
    return r;
}

void fill_uniform(float* x, size_t n, float lo, float hi, Rng* r) {
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * rng_uniform(r);
}

void fill_normal(float* x, size_t n, float std, Rng* r) {
    for (size_t i = 0; i < n; i++)
        x[i] = std * rng_normal(r);
}

float max_abs(const float* x, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++)
        if (fabsf(x[i]) > m) m = fabsf(x[i]);
    return m;
}

double rel_diff(const float* a, const float* b, size_t n) {
    double m = 0, s = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > m) m = d;
        if (fabs((double)b[i]) > s) s = fabs((double)b[i]);
    }
    return m / s;
}

const char* test_tmpdir(void) {
    static char buf[512];
    const char* base = getenv("TMPDIR");
    snprintf(buf, sizeof(buf), "%s/attnlab-test-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(buf)) die(1, "cannot create a temporary directory under %s", buf);
    return buf;
}

// The directory `up` levels above this binary: 2 -> BUILD, 3 -> ROOT.
static void self_dir(char* out, size_t cap, int up) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) die(1, "cannot read /proc/self/exe");
    exe[n] = '\0';
    for (int k = 0; k < up; k++) {
        char* s = strrchr(exe, '/');
        if (!s || s == exe) die(1, "%s: not inside BUILD/tests", exe);
        *s = '\0';
    }
    util_strlcpy(out, exe, cap);
}

const char* test_build_dir(void) {
    static char buf[4096];
    if (!buf[0]) self_dir(buf, sizeof(buf), 2);
    return buf;
}

const char* test_repo_root(void) {
    static char buf[4096];
    if (!buf[0]) self_dir(buf, sizeof(buf), 3);
    return buf;
}

void test_nth_choice(char* out, size_t cap, const char* choices, int idx) {
    char tmp[256];
    snprintf(tmp, sizeof(tmp), "%s", choices);
    char* save = NULL;
    char* w = strtok_r(tmp, "|", &save);
    for (int i = 0; i < idx && w; i++)
        w = strtok_r(NULL, "|", &save);
    snprintf(out, cap, "%s", w ? w : "");
}

int test_variant_selected(const char* name) {
    const char* want = getenv("ATTNLAB_TEST_VARIANTS");
    if (!want || !*want) return 1;
    size_t n = strlen(name);
    for (const char* p = want; *p;) {
        const char* e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

double test_fd4(ScalarFn f, void* ctx, float* x, double h) {
    float x0 = *x;
    double v[4];
    const double off[4] = {-2, -1, 1, 2};
    for (int k = 0; k < 4; k++) {
        *x = (float)((double)x0 + off[k] * h);
        v[k] = f(ctx);
    }
    *x = x0;
    return (v[0] - 8 * v[1] + 8 * v[2] - v[3]) / (12 * h);
}

// two estimates agree to within the kink tolerance
static int fd_agree(double a, double b, double atol) {
    return fabs(a - b) <= 2e-3 * (fabs(a) + fabs(b)) + 1e-2 * atol;
}

void test_check_grad_kinks(ScalarFn f, void* ctx, float* x, const float* g, size_t n, size_t stride,
                           double h, double atol, int finer, int min_ratio, const char* what) {
    int skipped = 0, checked = 0;
    for (size_t i = 0; i < n; i += stride) {
        double d1 = test_fd4(f, ctx, &x[i], 2 * h);
        double d2 = test_fd4(f, ctx, &x[i], h);
        if (!fd_agree(d1, d2, atol) ||
            (finer && !fd_agree(d2, test_fd4(f, ctx, &x[i], 0.5 * h), atol))) {
            skipped++;
            continue;
        }
        double err = fabs(d2 - (double)g[i]) / (fabs(d2) + fabs((double)g[i]) + atol);
        ck_assert_msg(err < 1e-2, "%s[%zu]: analytic %.8g vs numeric %.8g (err %.3g)", what, i,
                      (double)g[i], d2, err);
        checked++;
    }
    ck_assert_msg(checked >= min_ratio * skipped && checked > 0, "%s: %d kinks vs %d checked", what,
                  skipped, checked);
}

int test_bf16_native(const char* who) {
    static int cached = -1;
    if (cached < 0) {
        char impl[256], why[512];
        cached = dnnl_mm_probe(impl, sizeof(impl), why, sizeof(why));
        if (!cached) fprintf(stderr, "%s: oneDNN bf16 cases not run: %s\n", who, why);
    }
    return cached;
}
