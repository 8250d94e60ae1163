// model/metrics_kernels.c: the statistics behind the diagnostics of model/metrics.h, as plain
// functions over flat float arrays: attention-row statistics (raw and renormalised), the sink
// rate, activation kurtosis, max |x|, massive activations (count and top/median ratio),
// per-head gradient norms and the placement of the probe windows. Definitions are stated in
// metrics.h and docs/diagnostics.md; every sum runs in double precision in a fixed order.
#include <math.h>
#include <stdint.h>

#include "model/metrics.h"

// ---------------------------------------------------------------------------------------------
// attention rows
//
// A is (T, T) row-major; row t holds the n = t + 1 causal weights a_t0..a_tt (entries above the
// diagonal are ignored). Raw statistics read a as the variant produced it; renormalised ones
// read p_j = |a_j| / sum_k |a_k| and skip rows with sum |a| = 0 (or non-finite).

MetricsAlpha0 metrics_attn_accum(AttnAccum* acc, const float* A, int T, int Ts) {
    double a0 = 0.0, a0_raw = 0.0;
    long na0 = 0, na0_raw = 0;
    for (int t = 0; t < T; t++) {
        const float* row = A + (size_t)t * T;
        const int n = t + 1;
        double sum = 0.0;
        long zeros = 0;
        for (int j = 0; j < n; j++) {
            sum += fabs((double)row[j]);
            zeros += row[j] == 0.0f;
        }
        acc->n_entries += n;
        acc->n_zero += zeros;
        // raw: every row counts (an all-zero row contributes a_t0 = 0)
        if (t >= 1) {
            acc->sink_raw += row[0];
            acc->n_rows_sink_raw++;
        }
        if (t < Ts) {
            a0_raw += row[0];
            na0_raw++;
        }
        if (!(sum > 0.0) || !isfinite(sum)) continue; // no distribution in this row
        const double inv = 1.0 / sum;
        double H = 0.0, mx = 0.0;
        for (int j = 0; j < n; j++) {
            double p = fabs((double)row[j]) * inv;
            if (p > 0.0) H -= p * log(p);
            if (p > mx) mx = p;
        }
        acc->ent += H;
        acc->maxw += mx;
        acc->n_rows++;
        if (n >= 2) {
            acc->ent_norm += H / log((double)n);
            acc->n_rows_norm++;
        }
        const double p0 = fabs((double)row[0]) * inv;
        if (t >= 1) {
            acc->sink += p0;
            acc->n_rows_sink++;
        }
        if (t < Ts) {
            a0 += p0;
            na0++;
        }
    }
    MetricsAlpha0 r = {.raw = na0_raw ? a0_raw / (double)na0_raw : NAN,
                       .renorm = na0 ? a0 / (double)na0 : NAN};
    return r;
}

void metrics_accum_add(AttnAccum* a, const AttnAccum* b) {
    a->ent += b->ent;
    a->ent_norm += b->ent_norm;
    a->sink += b->sink;
    a->sink_raw += b->sink_raw;
    a->maxw += b->maxw;
    a->n_rows += b->n_rows;
    a->n_rows_norm += b->n_rows_norm;
    a->n_rows_sink += b->n_rows_sink;
    a->n_rows_sink_raw += b->n_rows_sink_raw;
    a->n_entries += b->n_entries;
    a->n_zero += b->n_zero;
}

static double ratio(double num, long den) {
    return den > 0 ? num / (double)den : NAN;
}

void metrics_attn_finish(AttnHeadStats* out, const AttnAccum* acc) {
    out->entropy = ratio(acc->ent, acc->n_rows);
    out->entropy_norm = ratio(acc->ent_norm, acc->n_rows_norm);
    out->sink_mass = ratio(acc->sink, acc->n_rows_sink);
    out->sink_mass_raw = ratio(acc->sink_raw, acc->n_rows_sink_raw);
    out->max_weight = ratio(acc->maxw, acc->n_rows);
    out->sparsity = ratio((double)acc->n_zero, acc->n_entries);
}

double metrics_sink_rate(const double* alpha0, size_t n, double eps) {
    size_t sinks = 0;
    for (size_t i = 0; i < n; i++)
        sinks += alpha0[i] > eps; // NaN counts as no sink
    return n ? (double)sinks / (double)n : NAN;
}

// ---------------------------------------------------------------------------------------------
// activations

double metrics_kurtosis_2d(const float* x, size_t rows, size_t cols, size_t ld) {
    const size_t n = rows * cols;
    if (n < 2) return NAN;
    double mu = 0.0;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            mu += x[r * ld + c];
    mu /= (double)n;
    double m2 = 0.0, m4 = 0.0;
    for (size_t r = 0; r < rows; r++) {
        for (size_t c = 0; c < cols; c++) {
            double d = (double)x[r * ld + c] - mu, d2 = d * d;
            m2 += d2;
            m4 += d2 * d2;
        }
    }
    const double var = m2 / (double)(n - 1); // unbiased, as torch.std
    return (m4 / (double)n) / (var * var + 1e-6);
}

double metrics_kurtosis(const float* x, size_t n) {
    return metrics_kurtosis_2d(x, 1, n, n);
}

float metrics_max_abs(const float* x, size_t n) {
    float mx = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > mx || isnan(a)) mx = a;
        if (isnan(mx)) break;
    }
    return mx;
}

// k-th smallest of v[0..n) (v is reordered): quickselect with a three-way partition and a
// median-of-three pivot (NaNs compare equal to everything and end in the middle part).
static void swapf(float* a, float* b) {
    float t = *a;
    *a = *b;
    *b = t;
}

static float select_kth(float* v, size_t n, size_t k) {
    size_t lo = 0, hi = n; // search in [lo, hi)
    while (hi - lo > 1) {
        float a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi - 1];
        float pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        size_t lt = lo, i = lo, gt = hi; // [lo,lt) < pivot, [lt,i) == pivot, [gt,hi) > pivot
        while (i < gt) {
            if (v[i] < pivot)
                swapf(&v[lt++], &v[i++]);
            else if (v[i] > pivot)
                swapf(&v[i], &v[--gt]);
            else
                i++;
        }
        if (k < lt)
            hi = lt;
        else if (k >= gt)
            lo = gt;
        else
            return pivot;
    }
    return v[k];
}

double metrics_massive(const float* x, size_t n, float* scratch, long* count) {
    if (count) *count = 0;
    if (n == 0) return NAN;
    float mx = 0.0f;
    int nan = 0;
    for (size_t i = 0; i < n; i++) {
        scratch[i] = fabsf(x[i]);
        nan |= isnan(scratch[i]);
        if (scratch[i] > mx) mx = scratch[i];
    }
    if (nan) return NAN;
    const double med = (double)select_kth(scratch, n, n / 2);
    if (count && mx > 100.0f) {
        const double thr = 1000.0 * med;
        long c = 0;
        for (size_t i = 0; i < n; i++) {
            double a = fabs((double)x[i]);
            c += a > 100.0 && a > thr;
        }
        *count = c;
    }
    if (med > 0.0) return (double)mx / med;
    return mx > 0.0f ? INFINITY : NAN; // median 0: unbounded ratio; all zero: no statistic
}

long metrics_massive_count(const float* x, size_t n, float* scratch) {
    long c = 0;
    metrics_massive(x, n, scratch, &c);
    return c;
}

// ---------------------------------------------------------------------------------------------
// gradients

void metrics_head_grad_norms(float* gq, float* gk, float* gv, const float* dqkvw,
                             const float* dqkvb, int C, int NH) {
    const int hs = C / NH;
    float* outs[3] = {gq, gk, gv};
    for (int part = 0; part < 3; part++) {
        for (int h = 0; h < NH; h++) {
            double s = 0.0;
            for (int r = part * C + h * hs; r < part * C + (h + 1) * hs; r++) {
                const float* w = dqkvw + (size_t)r * C;
                for (int c = 0; c < C; c++)
                    s += (double)w[c] * w[c];
                if (dqkvb) s += (double)dqkvb[r] * dqkvb[r];
            }
            outs[part][h] = (float)sqrt(s);
        }
    }
}
