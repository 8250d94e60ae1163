// model/metrics_sinks.c: Gu et al.'s sink rate and Guo et al.'s non-trigger first-token weight
// (definitions and the papers' code in model/metrics_sinks.h and docs/diagnostics.md). Every sum
// runs in double precision in a fixed order (rows ascending, then sequences), so the scores do
// not depend on the thread count.
#include "model/metrics_sinks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

// The row sum of the causal part of row t (keys 0..t).
static double row_sum(const float* row, int t) {
    double s = 0.0;
    for (int j = 0; j <= t; j++)
        s += (double)row[j];
    return s;
}

void metrics_gu_alpha0(const float* A, int T, int Ts, double* raw, double* renorm) {
    if (Ts > T) Ts = T;
    double r = 0.0, p = 0.0;
    for (int i = 0; i < Ts; i++) {
        const float* row = A + (size_t)i * T;
        r += (double)row[0];
        p += (double)row[0] / (row_sum(row, i) + METRICS_GU_RENORM_EPS);
    }
    *raw = Ts > 0 && isfinite(r) ? r / (double)Ts : NAN;
    *renorm = Ts > 0 && isfinite(p) ? p / (double)Ts : NAN;
}

void metrics_first_token_rows(const float* A, int T, const unsigned char* mask, double* raw_sum,
                              double* renorm_sum, long* n) {
    for (int t = 0; t < T; t++) {
        if (mask && !mask[t]) continue;
        const float* row = A + (size_t)t * T;
        *raw_sum += (double)row[0];
        *renorm_sum += (double)row[0] / (row_sum(row, t) + METRICS_GU_RENORM_EPS);
        (*n)++;
    }
}

void metrics_sinks_init(SinkScores* s, int L, int NH, int nseq, float eps) {
    memset(s, 0, sizeof(*s));
    s->L = L;
    s->NH = NH;
    s->nseq = nseq;
    s->eps = eps;
    const size_t LH = (size_t)L * NH;
    s->gu_raw = callocCheck(LH * (size_t)nseq, sizeof(double));
    s->gu_renorm = callocCheck(LH * (size_t)nseq, sizeof(double));
    s->nt_raw = callocCheck(LH, sizeof(double));
    s->nt_renorm = callocCheck(LH, sizeof(double));
    s->all_raw = callocCheck(LH, sizeof(double));
    s->all_renorm = callocCheck(LH, sizeof(double));
    s->nt_n = callocCheck(LH, sizeof(long));
    s->all_n = callocCheck(LH, sizeof(long));
}

void metrics_sinks_free(SinkScores* s) {
    free(s->gu_raw);
    free(s->gu_renorm);
    free(s->nt_raw);
    free(s->nt_renorm);
    free(s->all_raw);
    free(s->all_renorm);
    free(s->nt_n);
    free(s->all_n);
    memset(s, 0, sizeof(*s));
}

void metrics_sinks_add_gu(SinkScores* s, int l, int h, int b, const float* A_gu, int Tg, int Ts) {
    const size_t i = ((size_t)l * s->NH + h) * (size_t)s->nseq + (size_t)b;
    metrics_gu_alpha0(A_gu, Tg, Ts, &s->gu_raw[i], &s->gu_renorm[i]);
}

void metrics_sinks_add_rows(SinkScores* s, int l, int h, const float* A, int T,
                            const unsigned char* nontrig) {
    const size_t i = (size_t)l * s->NH + h;
    metrics_first_token_rows(A, T, nontrig, &s->nt_raw[i], &s->nt_renorm[i], &s->nt_n[i]);
    metrics_first_token_rows(A, T, NULL, &s->all_raw[i], &s->all_renorm[i], &s->all_n[i]);
}

// Fraction of v[0..n) strictly above eps (NaN counts as no sink), as Gu's `> epsilon`.
static double frac_above(const double* v, size_t n, double eps) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += v[i] > eps;
    return n ? (double)k / (double)n : NAN;
}

double metrics_sinks_mean(const double* sum, const long* n, int i) {
    return n[i] > 0 ? sum[i] / (double)n[i] : NAN;
}

void metrics_sinks_finish(SinkScores* s) {
    const size_t N = (size_t)s->L * s->NH * (size_t)s->nseq;
    s->rate_raw = frac_above(s->gu_raw, N, s->eps);
    s->rate_renorm = frac_above(s->gu_renorm, N, s->eps);
    s->nt_max = NAN;
    s->nt_max_layer = s->nt_max_head = -1;
    for (int l = 0; l < s->L; l++) {
        for (int h = 0; h < s->NH; h++) {
            double v = metrics_sinks_mean(s->nt_renorm, s->nt_n, l * s->NH + h);
            if (isfinite(v) && (!isfinite(s->nt_max) || v > s->nt_max)) {
                s->nt_max = v;
                s->nt_max_layer = l;
                s->nt_max_head = h;
            }
        }
    }
}
