// attention/entmax.c: alpha-entmax attention (sparse simplex mapping), exact at alpha = 1.5 and
// alpha = 2, Newton-solved for any other alpha, with an optional learnable alpha per head.
//
//   a_j = [(alpha-1) z_j - tau]_+ ^ (1/(alpha-1)),   tau such that sum_j a_j = 1
//
// Peters, Niculae, Martins 2019 (arXiv 1905.05702); Correia, Niculae, Martins, Adaptively Sparse
// Transformers, EMNLP 2019 (arXiv 1909.00015) for the learnable alpha. alpha -> 1 is softmax,
// alpha = 2 is sparsemax. Rows sum to 1 with exact zeros; shift-invariant (tau absorbs a shift).
//
// Hyperparameters: attn.alpha = 1.5 in [1.01, 2]; attn.learn_alpha = off|on.
// Learnable per-head parameter "alpha" (used only with learn_alpha = on): a raw value r with
// alpha = 1 + sigmoid(r), so alpha stays in (1, 2); init r = logit(attn.alpha - 1), attn.alpha
// clamped to [1.01, 1.99] for the init.
//
// Forward. z = s - max s (so the largest z is 0); x = (alpha-1) z. tau lies in [-1, -n^(1-alpha)].
//  - alpha = 1.5 (fixed): p = (x - tau)_+^2 with x = z/2. No sort. Newton steps on the convex,
//    decreasing h(tau) = sqrt(sum (x - tau)_+^2) - 1 (a norm of convex terms, nearly linear far
//    from the root) start at tau = -1 <= tau* and stay <= tau*. At each step the candidate set
//    S = {x > tau} contains the support, and the root u of the quadratic sum_S (x - u)^2 = 1
//    restricted to S is exact as soon as min_S x >= u (then no element of S is clipped and none
//    outside can enter). This is the sort-based closed form of Peters et al. evaluated on the
//    one support that satisfies it, found in 1-5 O(n) passes; a sort of S remains as fallback if
//    Newton stalls at rounding level.
//  - alpha = 2 (fixed): the same scheme with q = 1, p = (x - tau)_+, u = (sum_S x - 1)/|S|; the
//    Newton step is Michelot's projection step and terminates exactly.
//  - any other alpha, or learnable alpha: Newton on h(tau) = (sum (x - tau)_+^b)^(1/b) - 1,
//    b = 1/(alpha-1), from tau = -1 (convex, so monotone; quadratic near the root), then
//    p /= sum p. This path costs an expf and a logf per support entry and pass (3-7 passes),
//    about 6-10x the row cost of softmax; the exact paths cost less than softmax.
// Numerics: z <= 0 and x - tau <= 1 on the support, so every power stays in [0, 1] for any finite
// score; sums are accumulated in double, and x - tau is formed in double (a float tau would shift
// all |S| weights the same way, by up to |S| ulp in their sum).
//
// Backward (all alpha). On the support S, p_j = y_j^b with y_j = (alpha-1) z_j - tau; from
// sum_S p = 1, dtau/dz_k = g_k / sum g with g_j = p_j^(2-alpha) (= b y_j^(b-1)/b: sqrt(p) at
// 1.5, 1 at 2), so J = diag(g) - g g^T / sum g and
//   ds_j = g_j da_j - g_j <g, da> / sum g.
// Learnable alpha: differentiating sum_S y_j^b = 1, y_j = (alpha-1) z_j - tau(alpha), gives
//   dp_j/dalpha = h_j - g'_j sum h / sum g',   g'_j = b p_j / y_j = b p_j^(2-alpha),
//   h_j = p_j (-b^2 ln y_j + b z_j / y_j) = b (g_j z_j - p_j ln p_j),
// so dL/dalpha = <da, h> - <da, g'> sum h / sum g' and dL/dr = dL/dalpha (alpha-1)(2-alpha).
// Everything is O(n) per row (plus the sort fallback, O(|S| log |S|), practically never taken).
//
// Reference: deep-spin/entmax:entmax/activations.py
// Deviations from it: alpha other than 1.5 and 2 is solved by Newton steps on tau (the reference's
//   entmax/root_finding.py bisects; same fixed point); the learnable alpha (attn.learn_alpha = on,
//   off by default) is alpha = 1 + sigmoid(r) with r initialised at logit(attn.alpha - 1).
#include <math.h>
#include <stdlib.h>

#include "attention/rowmap.h"
#include "attention/compose.h"
#include "attention/rowops.h"

// max/min without libm's NaN and signed-zero handling (a call per element otherwise; inputs are
// finite), so loops stay inline and vectorise
static inline real max_f(real x, real y) {
    return x > y ? x : y;
}

static inline real min_f(real x, real y) {
    return x < y ? x : y;
}

enum { HP_ALPHA, HP_LEARN, N_HP };
_Static_assert((int)HP_ALPHA == (int)ATTN_ENTMAX_HP_ALPHA &&
                   (int)HP_LEARN == (int)ATTN_ENTMAX_HP_LEARN,
               "attention/compose.h must match entmax's hyperparameters");

static const AttnHParamSpec ENTMAX_HP[N_HP] = {
    [HP_ALPHA] = {"alpha", 1.5f, 1.01f, 2.0f, NULL,
                  "entmax alpha (1.5 and 2 use exact closed forms; others Newton)"},
    [HP_LEARN] = {"learn_alpha", 0, 0, 0, "off|on",
                  "learn alpha per head as 1 + sigmoid(param), initialised at attn.alpha"},
};

static const char* const ENTMAX_PARAMS[] = {"alpha"};

static void entmax_init_params(real* p, const AttnHParams* hp) {
    real a = min_f(max_f(hp->v[HP_ALPHA], 1.01f), 1.99f);
    p[0] = real_log((a - 1.0f) / (2.0f - a));
}

static size_t entmax_scratch(int T) {
    return (size_t)T;
}

// alpha for this head; *learned set when it comes from the parameter
static real entmax_alpha(const AttnRowCtx* ctx, int* learned) {
    *learned = ctx->hp->v[HP_LEARN] >= 0.5f && ctx->p != NULL;
    if (*learned) return 1.0f + 1.0f / (1.0f + real_exp(-ctx->p[0]));
    return ctx->hp->v[HP_ALPHA];
}

static int cmp_desc(const void* pa, const void* pb) {
    real a = *(const real*)pa, b = *(const real*)pb;
    return (a < b) - (a > b);
}

// Root u of sum_S (x - u)^q = 1 on a candidate set with k elements, sums s1 = sum x,
// s2 = sum x^2 (q = 1: sparsemax, q = 2: 1.5-entmax; the smaller root). 0 if none.
static int piece_root(double* u, int k, double s1, double s2, int q) {
    if (q == 1) {
        *u = (s1 - 1.0) / k;
        return 1;
    }
    double mu = s1 / k;
    double ss = s2 - s1 * mu;
    double disc = (1.0 - ss) / k;
    if (disc < 0) return 0;
    *u = mu - sqrt(disc);
    return 1;
}

// Over S = {x > lo}: k = |S|, s1 = sum x, s2 = sum x^2, returns min_S x. `omp simd reduction`
// lets the sums vectorise; the order is fixed by the compiled code, so results do not depend on
// the thread count.
static real entmax_pass(const real* x, int n, real lo, int* k, double* s1, double* s2) {
    const double lod = lo;
    double c = 0, t1 = 0, t2 = 0;
    real xmin = INFINITY;
#pragma omp simd reduction(+ : c, t1, t2) reduction(min : xmin)
    for (int j = 0; j < n; j++) {
        double v = x[j];
        double in = v > lod ? 1.0 : 0.0;
        c += in;
        t1 += in * v;
        t2 += in * v * v;
        xmin = v > lod ? min_f(xmin, x[j]) : xmin;
    }
    *k = (int)c;
    *s1 = t1;
    *s2 = t2;
    return xmin;
}

// largest float <= x
static real float_below(double x) {
    real f = (real)x;
    return (double)f > x ? real_nextafter(f, -INFINITY) : f;
}

// Exact threshold tau with sum_j (x_j - tau)_+^q = 1 for q in {1, 2}; max_j x_j = 0. The lower
// bound lo is a float rounded down, so it stays <= tau* and {x > lo} is what the pass sees.
static double entmax_threshold(const real* x, int n, int q, real* scratch) {
    real lo = -1.0f; // tau* >= max x - 1
    for (int it = 0; it < 100; it++) {
        int k;
        double s1, s2, u;
        real xmin = entmax_pass(x, n, lo, &k, &s1, &s2);
        if (k == 0) break; // rounding pushed lo past the max: sort from the start
        if (piece_root(&u, k, s1, s2, q) && u <= (double)xmin && u >= (double)lo) return u;
        // Next lower bound: a Newton step from lo, or xmin if larger (f = q_S - 1 on [lo, xmin]
        // and the restricted root failed, so f(xmin) > 0 and tau* > xmin). q = 1: Newton on
        // F(tau) - 1, F = sum (x - tau)_+ (Michelot's step). q = 2: Newton on sqrt(F) - 1,
        // F = sum (x - tau)_+^2: sqrt(F) is a Euclidean norm of convex terms, hence convex and
        // decreasing, so the step stays at or below tau*; it is nearly linear far from the root,
        // which takes about half the passes of Newton on F - 1.
        double l = lo;
        double F = q == 1 ? s1 - k * l : s2 - 2.0 * l * s1 + k * l * l;
        double step = q == 1 ? (F - 1.0) / k : F * (1.0 - 1.0 / sqrt(F)) / (s1 - k * l);
        real nlo = max_f(float_below(l + step), xmin);
        if (!(nlo > lo)) break;
        lo = nlo;
    }
    // fallback: sort the candidates x > lo (a superset of the support) and scan (Peters et al.)
    int m = 0;
    for (int j = 0; j < n; j++)
        if (x[j] > lo) scratch[m++] = x[j];
    if (m == 0) // only when lo overshot by rounding: take the whole row
        for (int j = 0; j < n; j++)
            scratch[m++] = x[j];
    qsort(scratch, (size_t)m, sizeof(real), cmp_desc);
    double s1 = 0, s2 = 0, tau = (double)scratch[0] - 1.0;
    for (int k = 1; k <= m; k++) {
        double v = scratch[k - 1];
        s1 += v;
        s2 += v * v;
        double u;
        if (!piece_root(&u, k, s1, s2, q)) break;
        if (u > v) break; // the k-th largest would get a negative weight: support is k-1
        tau = u;
    }
    return tau;
}

// General alpha: Newton on h(tau) = (sum (x - tau)_+^b)^(1/b) - 1, b = 1/(alpha-1), from
// tau = -1. h is an l_b norm of convex terms, hence convex and decreasing, so every step stays at
// or below tau*, and it is nearly linear far from the root (Newton on sum(.)^b - 1 itself crawls
// there): 3-7 passes, stopped at the float resolution of tau. Powers in float (expf/logf), sums
// in double; the final p /= sum p makes the row sum to 1 to float precision.
static void entmax_general(real* a, const real* s, int n, real alpha) {
    real m = -INFINITY;
    for (int j = 0; j < n; j++)
        m = max_f(m, s[j]);
    const real am1 = alpha - 1.0f;
    const double b = 1.0 / (double)am1;
    for (int j = 0; j < n; j++)
        a[j] = am1 * (s[j] - m); // x, in place; max x = 0
    double tau = -1.0;
    for (int it = 0; it < 100; it++) {
        double F = 0.0, G = 0.0; // sum y^b, sum y^(b-1) over y = x - tau > 0
        const real t = (real)tau, bf = (real)b;
        for (int j = 0; j < n; j++) {
            real y = a[j] - t;
            if (y > 0.0f) {
                real p =
                    real_exp(bf * real_log(y)); // float powers: the final p /= sum p absorbs it
                F += p;
                G += p / y;
            }
        }
        if (F <= 1.0 || G <= 0.0) break;
        double step = (F - pow(F, 1.0 - (double)am1)) / G;
        tau += step;
        if (step <= 1e-7) break; // float resolution of tau in [-1, 0]
    }
    double sum = 0;
    const real t = (real)tau, bf = (real)b;
    for (int j = 0; j < n; j++) {
        real y = a[j] - t;
        a[j] = y > 0.0f ? real_exp(bf * real_log(y)) : 0.0f;
        sum += a[j];
    }
    double inv = 1.0 / sum;
    for (int j = 0; j < n; j++)
        a[j] = (real)(a[j] * inv);
}

static void entmax_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    int learned;
    real alpha = entmax_alpha(ctx, &learned);
    int q = learned ? 0 : alpha == 1.5f ? 2 : alpha == 2.0f ? 1 : 0;
    if (!q) {
        entmax_general(a, s, n, alpha);
        return;
    }
    real m = -INFINITY;
    for (int j = 0; j < n; j++)
        m = max_f(m, s[j]);
    const real c = q == 2 ? 0.5f : 1.0f;
    for (int j = 0; j < n; j++)
        a[j] = c * (s[j] - m); // x, in place
    // x - tau in double: rounding tau to float would shift all |S| weights the same way
    const double tau = entmax_threshold(a, n, q, ctx->scratch);
    if (q == 2) {
        for (int j = 0; j < n; j++) {
            real y = max_f((real)((double)a[j] - tau), 0.0f);
            a[j] = y * y;
        }
    } else {
        for (int j = 0; j < n; j++) {
            a[j] = max_f((real)((double)a[j] - tau), 0.0f);
        }
    }
}

static void entmax_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                const AttnRowCtx* ctx) {
    int learned;
    real alpha = entmax_alpha(ctx, &learned);
    int q = learned ? 0 : alpha == 1.5f ? 2 : alpha == 2.0f ? 1 : 0;
    real* g = ctx->scratch;
    real sg = 0.0f, sgd = 0.0f;
    if (q == 2) {
        for (int j = 0; j < n; j++)
            g[j] = real_sqrt(a[j]);
    } else if (q == 1) {
        for (int j = 0; j < n; j++)
            g[j] = a[j] > 0.0f ? 1.0f : 0.0f;
    } else {
        for (int j = 0; j < n; j++)
            g[j] = a[j] > 0.0f ? real_pow(a[j], 2.0f - alpha) : 0.0f;
    }
#pragma omp simd reduction(+ : sg, sgd)
    for (int j = 0; j < n; j++) {
        sg += g[j];
        sgd += g[j] * da[j];
    }
    real mean = sgd / sg;
    for (int j = 0; j < n; j++)
        ds[j] += g[j] * (da[j] - mean);
    if (learned && ctx->dp) {
        // h_j / b = g_j z_j - p_j ln p_j on the support, z = s - max s
        real m = -INFINITY;
        for (int j = 0; j < n; j++)
            m = max_f(m, s[j]);
        double sh = 0, shd = 0;
        for (int j = 0; j < n; j++) {
            if (a[j] <= 0.0f) continue;
            double h = (double)g[j] * (double)(s[j] - m) - (double)a[j] * log((double)a[j]);
            sh += h;
            shd += h * da[j];
        }
        double b = 1.0 / (alpha - 1.0);
        double dalpha = b * (shd - (double)sgd * sh / (double)sg);
        ctx->dp[0] += (real)(dalpha * (alpha - 1.0) * (2.0 - alpha));
    }
}

const AttnVariant attn_entmax = {
    .name = "entmax",
    .formula = "a = [(alpha-1) s - tau]_+^(1/(alpha-1)), sum a = 1 (alpha = 1.5)",
    .source = "Peters et al. 2019 (1905.05702); Correia et al. 2019 (1909.00015)",
    .reference = "deep-spin/entmax:entmax/activations.py",
    .deviations = "alpha other than 1.5 and 2 is solved by Newton steps on tau (the reference's "
                  "entmax/root_finding.py bisects; same fixed point); the learnable alpha "
                  "(attn.learn_alpha = on, off by default) is alpha = 1 + sigmoid(r) with r "
                  "initialised at logit(attn.alpha - 1)",
    .rows_sum_to_one = 1,
    .shift_invariant = 1,
    .hparams = ENTMAX_HP,
    .n_hparams = N_HP,
    .params_per_head = 1,
    .param_names = ENTMAX_PARAMS,
    .init_params = entmax_init_params,
    .scratch_floats = entmax_scratch,
    .forward_row = entmax_forward_row,
    .backward_row = entmax_backward_row,
    .row_stat_name = "support",
    .row_stat = rowops_support,
};
