// tests/test_metrics_records.c: the diagnostics records (model/metrics.h) end to end on hand-built
// activations: a model's attention, attention-output and block-output buffers are filled with
// rows and tensors whose statistics are known in closed form, metrics_collect reads them as probe
// chunks (3 sequences in chunks of 2, so the cross-chunk reduction is exercised) and
// metrics_write's JSONL records are compared with the closed forms: raw and renormalised sink
// rates with exactly known sink heads (heads between half the threshold and the threshold,
// rows that do not sum to 1, all-zero rows), per-head sink fractions, alpha0 and output
// kurtosis, massive-activation counts and top/median ratios.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "model/metrics.h"
#include "tests/testutil.h"

enum { L = 2, NH = 4, C = 16, HS = C / NH, T = 8, NSEQ = 3, BA = 2 };
static const double EPS = 0.3;

// Head types, by the weight a_t0 on key 0 of rows t >= 1 and the row sum s (row 0 holds s):
//   S sink (0.5, 1), N near (0.1, 1: alpha0 between eps/2 and eps), H half-scaled sink
//   (0.25, 0.5: a non-normalised variant whose renormalised rows are S), Z all-zero rows.
typedef enum { S, N, H, Z } HeadType;
static const double W0[4] = {0.5, 0.1, 0.25, 0.0}, SUM[4] = {1.0, 1.0, 0.5, 0.0};

static HeadType type_of(int l, int h, int b) {
    static const HeadType t0[NH] = {S, S, N, Z}, t1[NH] = {H, N, S, H};
    if (l == 1 && h == 1 && b == 2) return S; // one sequence differs
    return l == 0 ? t0[h] : t1[h];
}

// Closed forms over the Ts = T first rows: raw alpha0 = (s + (T-1) w0) / T; renormalised
// p_t0 = w0 / s, row 0 gives 1: (1 + (T-1) w0/s) / T; all-zero rows: raw 0, renormalised none.
static double alpha_raw(HeadType y) {
    return (SUM[y] + (T - 1) * W0[y]) / T;
}
static double alpha_renorm(HeadType y) {
    return y == Z ? NAN : (1.0 + (T - 1) * W0[y] / SUM[y]) / T;
}

static void fill_rows(float* A, HeadType y) {
    memset(A, 0, sizeof(float) * T * T);
    A[0] = (float)SUM[y];
    for (int t = 1; t < T; t++)
        for (int j = 0; j <= t; j++)
            A[t * T + j] = (float)(j == 0 ? W0[y] : (SUM[y] - W0[y]) / t);
}

static void build(GPT2* m) {
    Config c;
    config_defaults(&c);
    c.n_layer = L;
    c.n_head = NH;
    c.n_embd = C;
    c.block_size = T;
    c.vocab_size = 64;
    c.seq_len = T;
    char err[512];
    memset(m, 0, sizeof(*m));
    ck_assert_msg(gpt2_setup_attention(m, &c, err, sizeof(err)) == 0, "%s", err);
    GPT2Config g;
    ck_assert_msg(gpt2_config_from(&g, &c, err, sizeof(err)) == 0, "%s", err);
    gpt2_build(m, &g);
    gpt2_init(m, 1);
    gpt2_alloc_acts(m, BA, T, 1);
}

// Head kurtosis planted in head 2 of layer 0, sequence b: spikes +a, -a among T*HS zeros.
static double spike(int b) {
    return 1.0 + b;
}

// Fill the buffers for probe sequences b0 .. b0 + Bc - 1 as one forward of Bc sequences would.
static void fill_chunk(GPT2* m, int b0, int Bc) {
    const size_t BTC = (size_t)Bc * T * C, full = (size_t)L * BA * T * C;
    float* zero[] = {m->ln1, m->attproj, m->ln2, m->fcproj, m->residual3, m->atty};
    for (size_t i = 0; i < sizeof(zero) / sizeof(zero[0]); i++)
        memset(zero[i], 0, sizeof(float) * full);
    memset(m->qkv, 0, sizeof(float) * full * 3);
    memset(m->lnf, 0, sizeof(float) * (size_t)BA * T * C);
    m->cur_B = Bc;
    m->cur_T = T;
    for (int l = 0; l < L; l++)
        for (int b = 0; b < Bc; b++)
            for (int h = 0; h < NH; h++)
                fill_rows(m->att + (size_t)l * Bc * NH * T * T + ((size_t)b * NH + h) * T * T,
                          type_of(l, h, b0 + b));
    for (int b = 0; b < Bc; b++) {
        // attention output of layer 0: head 2 holds two spikes; every other head large values
        float* y = m->atty + (size_t)b * T * C;
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++)
                y[t * C + c] = c / HS == 2 ? 0.0f : 40.0f + (float)((t + c) % 5);
        y[1 * C + 2 * HS + 0] = (float)spike(b0 + b);
        y[6 * C + 2 * HS + 3] = (float)-spike(b0 + b);
        // block output of layer 1: +-0.05 with one spike 100 (b+1) at position (3, 5)
        float* x = m->residual3 + (size_t)1 * BTC + (size_t)b * T * C;
        for (int i = 0; i < T * C; i++)
            x[i] = i % 2 ? -0.05f : 0.05f;
        x[3 * C + 5] = 100.0f * (float)(b0 + b + 1);
    }
}

static char* find_line(char** lines, int n, const char* kind, int l, int h, const char* site) {
    char want[128];
    for (int i = 0; i < n; i++) {
        snprintf(want, sizeof(want), "\"kind\":\"%s\"", kind);
        if (!strstr(lines[i], want)) continue;
        if (l >= 0) {
            snprintf(want, sizeof(want), "\"layer\":%d,", l);
            if (!strstr(lines[i], want)) continue;
        }
        if (h >= 0) {
            snprintf(want, sizeof(want), "\"head\":%d,", h);
            if (!strstr(lines[i], want)) continue;
        }
        if (site) {
            snprintf(want, sizeof(want), "\"site\":\"%s\"", site);
            if (!strstr(lines[i], want)) continue;
        }
        return lines[i];
    }
    ck_abort_msg("no %s record for layer %d head %d site %s", kind, l, h, site ? site : "-");
    return NULL;
}

// "key":value as a number; NAN for null.
static double num(const char* line, const char* key) {
    char pat[96];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    const char* p = strstr(line, pat);
    ck_assert_msg(p != NULL, "key %s missing in %s", key, line);
    p += strlen(pat);
    if (!strncmp(p, "null", 4)) return NAN;
    return strtod(p, NULL);
}

START_TEST(test_records_closed_form) {
    GPT2 m;
    build(&m);
    int tokens[NSEQ * T] = {0};
    MetricsSetup ms = {
        .every = 1, .sink_eps = (float)EPS, .tokens = tokens, .nseq = NSEQ, .T = T, .nthreads = 2};
    Metrics mt;
    char err[512];
    ck_assert_msg(metrics_init(&mt, &m, &ms, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(mt.chunk, BA);
    fill_chunk(&m, 0, 2);
    metrics_collect(&mt, &m, 0);
    fill_chunk(&m, 2, 1);
    metrics_collect(&mt, &m, 2);
    char path[1100];
    snprintf(path, sizeof(path), "%s/metrics.jsonl", test_tmpdir());
    FILE* f = fopen(path, "w");
    ck_assert(f != NULL);
    metrics_write(&mt, &m, 7, f, NULL);
    fclose(f);
    size_t len;
    char* text = util_read_file(path, &len, err, sizeof(err));
    ck_assert_msg(text != NULL, "%s", err);
    char* lines[512];
    int n = 0;
    for (char* s = strtok(text, "\n"); s && n < 512; s = strtok(NULL, "\n"))
        lines[n++] = s;

    // expected sink counts from the closed forms
    int k_raw = 0, k_norm = 0;
    for (int l = 0; l < L; l++) {
        for (int h = 0; h < NH; h++) {
            int fr = 0, fn = 0;
            double ar = 0, an = 0;
            for (int b = 0; b < NSEQ; b++) {
                HeadType y = type_of(l, h, b);
                fr += alpha_raw(y) > EPS;
                fn += alpha_renorm(y) > EPS; // NaN: no sink
                ar += alpha_raw(y);
                an += y == Z ? 0.0 : alpha_renorm(y);
            }
            k_raw += fr;
            k_norm += fn;
            const char* r = find_line(lines, n, "head", l, h, NULL);
            ck_assert_double_eq_tol(num(r, "sink_frac_raw"), (double)fr / NSEQ, 1e-7);
            ck_assert_double_eq_tol(num(r, "sink_frac_renorm"), (double)fn / NSEQ, 1e-7);
            ck_assert_double_eq_tol(num(r, "alpha0_raw"), ar / NSEQ, 1e-6);
            ck_assert_double_eq_tol(num(r, "alpha0_renorm"), an / NSEQ, 1e-6);
            ck_assert(num(r, "alpha0") == num(r, "alpha0_renorm"));
        }
    }
    // the construction: 6 + 9 + 1 renormalised sinks and 6 + 3 + 1 raw ones of 24
    ck_assert_int_eq(k_norm, 16);
    ck_assert_int_eq(k_raw, 10);
    const char* mr = find_line(lines, n, "model", -1, -1, NULL);
    ck_assert_double_eq_tol(num(mr, "sink_rate_raw"), k_raw / (double)(L * NH * NSEQ), 1e-7);
    ck_assert_double_eq_tol(num(mr, "sink_rate_renorm"), k_norm / (double)(L * NH * NSEQ), 1e-7);
    ck_assert(num(mr, "sink_rate") == num(mr, "sink_rate_renorm"));
    ck_assert_int_eq((int)num(mr, "probe_sequences"), NSEQ);
    ck_assert_int_eq((int)num(mr, "probe_len"), T);

    // rows that do not sum to 1: sink mass raw 0.25, renormalised 0.5
    const char* h10 = find_line(lines, n, "head", 1, 0, NULL);
    ck_assert_double_eq_tol(num(h10, "sink_mass_raw"), 0.25, 1e-6);
    ck_assert_double_eq_tol(num(h10, "sink_mass"), 0.5, 1e-6);
    // all-zero rows: no distribution (entropy null), raw alpha0 0, every entry a zero
    const char* h03 = find_line(lines, n, "head", 0, 3, NULL);
    ck_assert(isnan(num(h03, "entropy")) && isnan(num(h03, "sink_mass")));
    ck_assert(num(h03, "alpha0_raw") == 0.0 && num(h03, "sparsity") == 1.0);
    // uniform-over-the-rest rows of an S head: H = -(w ln w + (1-w) ln((1-w)/t)), row 0 = 0
    double Hs = 0;
    for (int t = 1; t < T; t++)
        Hs -= 0.5 * log(0.5) + 0.5 * log(0.5 / t);
    ck_assert_double_eq_tol(num(find_line(lines, n, "head", 0, 0, NULL), "entropy"), Hs / T, 1e-6);

    // head output kurtosis: two spikes +-a among N = T*HS zeros, per sequence, then the mean
    const double NV = T * HS;
    double kexp = 0;
    for (int b = 0; b < NSEQ; b++) {
        double a = spike(b), var = 2 * a * a / (NV - 1);
        kexp += (2 * a * a * a * a / NV) / (var * var + 1e-6);
    }
    ck_assert_double_eq_tol(num(find_line(lines, n, "head", 0, 2, NULL), "kurtosis"), kexp / NSEQ,
                            1e-6 * kexp);
    ck_assert(num(find_line(lines, n, "head", 1, 2, NULL), "kurtosis") == 0.0); // all zero

    // massive activations in the block output of layer 1: median 0.05, spikes 100, 200, 300:
    // ratios 2000, 4000, 6000; massive = |x| > 100 and > 50: the spikes 200 and 300
    const char* blk = find_line(lines, n, "act", 1, -1, "block");
    ck_assert_double_eq_tol(num(blk, "massive_ratio"), 4000.0, 1e-3);
    ck_assert_int_eq((int)num(blk, "massive"), 2);
    ck_assert_double_eq_tol(num(blk, "max_abs"), 200.0, 1e-4);
    ck_assert(isnan(num(find_line(lines, n, "act", 0, -1, "block"), "massive_ratio"))); // zeros
    ck_assert_double_eq_tol(num(mr, "massive_ratio_max"), 4000.0, 1e-3);
    ck_assert_int_eq((int)num(mr, "massive_acts"), 2);
    free(text);
    metrics_free(&mt);
    gpt2_free(&m);
}
END_TEST

// The same statistics whether the probe arrives in one chunk or several, for any thread count.
START_TEST(test_records_chunking) {
    GPT2 m;
    build(&m);
    int tokens[NSEQ * T] = {0};
    char out[2][1100], err[512];
    for (int v = 0; v < 2; v++) {
        MetricsSetup ms = {.every = 1,
                           .sink_eps = (float)EPS,
                           .tokens = tokens,
                           .nseq = 2,
                           .T = T,
                           .nthreads = v ? 1 : 2};
        Metrics mt;
        ck_assert_msg(metrics_init(&mt, &m, &ms, err, sizeof(err)) == 0, "%s", err);
        if (v == 0) {
            fill_chunk(&m, 0, 2);
            metrics_collect(&mt, &m, 0);
        } else {
            fill_chunk(&m, 0, 1); // two one-sequence forwards
            metrics_collect(&mt, &m, 0);
            fill_chunk(&m, 1, 1);
            metrics_collect(&mt, &m, 1);
        }
        snprintf(out[v], sizeof(out[v]), "%s/r%d.jsonl", test_tmpdir(), v);
        FILE* f = fopen(out[v], "w");
        metrics_write(&mt, &m, 1, f, NULL);
        fclose(f);
        metrics_free(&mt);
    }
    size_t la, lb;
    char* a = util_read_file(out[0], &la, err, sizeof(err));
    char* b = util_read_file(out[1], &lb, err, sizeof(err));
    ck_assert(a && b);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    gpt2_free(&m);
}
END_TEST

// Bad probe input is refused with a message naming the sequence and position.
START_TEST(test_init_rejects_bad_tokens) {
    GPT2 m;
    build(&m);
    int tokens[2 * T] = {0};
    tokens[T + 5] = 64; // vocab_size 64
    MetricsSetup ms = {.every = 1, .sink_eps = 0.3f, .tokens = tokens, .nseq = 2, .T = T};
    Metrics mt;
    char err[512];
    ck_assert_int_eq(metrics_init(&mt, &m, &ms, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "sequence 1, position 5") && strstr(err, "64"), "%s", err);
    tokens[T + 5] = 0;
    ms.T = T + 1; // longer than the activations
    ck_assert_int_eq(metrics_init(&mt, &m, &ms, err, sizeof(err)), -1);
    gpt2_free(&m);
}
END_TEST

static Suite* metrics_records_suite(void) {
    Suite* s = suite_create("metrics_records");
    TCase* k = tcase_create("records");
    tcase_set_timeout(k, 60);
    tcase_add_test(k, test_records_closed_form);
    tcase_add_test(k, test_records_chunking);
    tcase_add_test(k, test_init_rejects_bad_tokens);
    suite_add_tcase(s, k);
    return s;
}

TEST_MAIN(metrics_records_suite)
