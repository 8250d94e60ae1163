// attention/sparsemax.c: sparsemax attention, the Euclidean projection of the score row onto the
// probability simplex (alpha-entmax at alpha = 2).
//
//   a_j = [s_j - tau]_+ ,   tau such that sum_j a_j = 1
//
// Martins & Astudillo, From Softmax to Sparsemax, ICML 2016 (arXiv 1602.02068). No learnable
// parameters, no hyperparameters. Rows sum to 1 with exact zeros; shift-invariant.
//
// Forward without a sort (Michelot's algorithm). With z = s - max s (max 0), tau* lies in
// [-1, -1/n]. Start at tau = -1 <= tau*; the candidate set S = {z > tau} then contains the
// support, and tau' = (sum_S z - 1)/|S| satisfies tau <= tau' <= tau* (since
// sum_S (z - tau*) <= sum (z - tau*)_+ = 1). Repeating until S stops changing gives tau* exactly:
// at the fixed point every element of S is >= tau' and every other one <= tau'. Each pass is
// O(n) and adds no transcendental; the number of passes is small in practice (each drops at
// least one element). If it has not converged after 64 passes, the remaining candidates are
// sorted and the textbook scan finishes (1 + k z_(k) > sum_{i<=k} z_(i)).
// Numerics: z <= 0 and sums in double; no exponentials, finite for any finite scores.
//
// Backward: on the support S (a > 0), J = I_S - 1_S 1_S^T / |S|, so
//   ds_j = [a_j > 0] (da_j - sum_{i in S} da_i / |S|).
//
// Reference: deep-spin/entmax:entmax/activations.py
// Deviations from it: none.
#include <math.h>
#include <stdlib.h>

#include "attention/rowmap.h"
#include "attention/rowops.h"

// max/min without libm's NaN and signed-zero handling (a call per element otherwise; inputs are
// finite), so loops stay inline and vectorise
static inline real max_f(real x, real y) {
    return x > y ? x : y;
}

static size_t sparsemax_scratch(int T) {
    return (size_t)T;
}

static int cmp_desc(const void* pa, const void* pb) {
    real a = *(const real*)pa, b = *(const real*)pb;
    return (a < b) - (a > b);
}

// k = #{z > lo} and *sum = their sum. `omp simd reduction` lets the sums vectorise; the order
// is fixed by the compiled code, so results do not depend on the thread count.
static int sparsemax_pass(const real* z, int n, real lo, double* sum) {
    const double lod = lo;
    double k = 0, s1 = 0;
#pragma omp simd reduction(+ : k, s1)
    for (int j = 0; j < n; j++) {
        double v = z[j];
        double in = v > lod ? 1.0 : 0.0;
        k += in;
        s1 += in * v;
    }
    *sum = s1;
    return (int)k;
}

// largest float <= x
static real float_below(double x) {
    real f = (real)x;
    return (double)f > x ? real_nextafter(f, -INFINITY) : f;
}

// tau with sum_j (z_j - tau)_+ = 1, for a row whose maximum is 0. lo is kept as a float (rounded
// down, so it stays <= tau*): then {z > lo} = {z > u} for the u that lo was rounded from.
static double sparsemax_threshold(const real* z, int n, real* scratch) {
    real lo = -1.0f;
    double u = -1.0;
    int kprev = -1;
    for (int it = 0; it < 64; it++) {
        double s1;
        int k = sparsemax_pass(z, n, lo, &s1);
        if (k == 0) break;
        // S = {z > lo} is the set u was computed from: every member is > u, every other element
        // <= u, so u is exact
        if (k == kprev) return u;
        kprev = k;
        u = (s1 - 1.0) / k;
        real nlo = float_below(u);
        if (!(nlo >= lo)) break; // only through rounding
        lo = nlo;
    }
    int m = 0;
    for (int j = 0; j < n; j++)
        if (z[j] > lo) scratch[m++] = z[j];
    if (m == 0)
        for (int j = 0; j < n; j++)
            scratch[m++] = z[j];
    qsort(scratch, (size_t)m, sizeof(real), cmp_desc);
    double c = 0, tau = (double)scratch[0] - 1.0;
    for (int k = 1; k <= m; k++) {
        c += scratch[k - 1];
        if (1.0 + k * (double)scratch[k - 1] <= c) break;
        tau = (c - 1.0) / k;
    }
    return tau;
}

static void sparsemax_forward_row(real* a, const real* s, int n, const AttnRowCtx* ctx) {
    real m = -INFINITY;
    for (int j = 0; j < n; j++)
        m = max_f(m, s[j]);
    for (int j = 0; j < n; j++)
        a[j] = s[j] - m;
    // z - tau in double: rounding tau to float would shift all |S| weights the same way
    const double tau = sparsemax_threshold(a, n, ctx->scratch);
    for (int j = 0; j < n; j++) {
        a[j] = max_f((real)((double)a[j] - tau), 0.0f);
    }
}

static void sparsemax_backward_row(real* ds, const real* da, const real* s, const real* a, int n,
                                   const AttnRowCtx* ctx) {
    (void)s;
    (void)ctx;
    int k = 0;
    real sum = 0.0f;
    for (int j = 0; j < n; j++) {
        if (a[j] > 0.0f) {
            k++;
            sum += da[j];
        }
    }
    real mean = sum / (real)k;
    for (int j = 0; j < n; j++)
        if (a[j] > 0.0f) ds[j] += da[j] - mean;
}

const AttnVariant attn_sparsemax = {
    .name = "sparsemax",
    .formula = "a = [s - tau]_+, sum a = 1 (projection onto the simplex)",
    .source = "Martins & Astudillo 2016 (1602.02068)",
    .reference = "deep-spin/entmax:entmax/activations.py",
    .rows_sum_to_one = 1,
    .shift_invariant = 1,
    .scratch_floats = sparsemax_scratch,
    .forward_row = sparsemax_forward_row,
    .backward_row = sparsemax_backward_row,
    .row_stat_name = "support",
    .row_stat = rowops_support,
};
