// tests/test_metrics_table.c: the table of diagnostics (model/metrics_table.h) against what a
// real run writes. Every row of the table appears in metrics.jsonl, in every record of its kind
// and unit (head: every (layer, head); act: every site and layer; route: every routed sublayer;
// model: once per step; grad, param: per tensor), no record holds a key that is neither a row nor
// one of its unit's index keys, the main.log headlines are the table's, and the attention
// explorer's per-head statistics use the same keys with the same values as metrics.jsonl's head
// records when both see the same map (one probe sequence, its dumped attention). And the act rows
// are collected from the table alone: each act row has a kernel and a per-sequence slot of its
// own, and after metrics_collect on planted activations every act row's value at every (site,
// layer, sequence) is that row's statistic recomputed here in double precision.
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "common/npy.h"
#include "common/util.h"
#include "model/explorer.h"
#include "model/metrics_table.h"
#include "model_util.h"
#include "testutil.h"
#include "train_util.h"

#define MAXKEYS 64
#define STEPS   2

// The keys of the flat JSON object starting at p (up to its closing brace) and the text of each
// value; returns the number of keys.
static int object_keys(const char* p, char keys[][64], char vals[][64]) {
    int n = 0;
    ck_assert(*p == '{');
    p++;
    while (*p && *p != '}') {
        ck_assert(*p == '"');
        const char* e = strchr(p + 1, '"');
        ck_assert(e && e - p - 1 < 64 && n < MAXKEYS);
        memcpy(keys[n], p + 1, (size_t)(e - p - 1));
        keys[n][e - p - 1] = 0;
        ck_assert(e[1] == ':');
        p = e + 2;
        const char* v = p;
        if (*p == '"') {
            p = strchr(p + 1, '"');
            ck_assert(p);
            p++;
        } else {
            while (*p && *p != ',' && *p != '}')
                p++;
        }
        size_t vl = (size_t)(p - v) < 63 ? (size_t)(p - v) : 63;
        memcpy(vals[n], v, vl);
        vals[n][vl] = 0;
        n++;
        if (*p == ',') p++;
    }
    return n;
}

static const char* val_of(char keys[][64], char vals[][64], int n, const char* key) {
    for (int i = 0; i < n; i++)
        if (!strcmp(keys[i], key)) return vals[i];
    return NULL;
}

static int is_index_key(MetricRecord r, const char* k) {
    static const char* const IDX[MR_COUNT][5] = {
        [MR_HEAD] = {"layer", "head"},
        [MR_ACT] = {"layer", "site"},
        [MR_ROUTE] = {"layer", "sublayer", "residual", "sources"},
        [MR_GRAD] = {"tensor", "layer"},
        [MR_PARAM] = {"tensor", "layer"},
    };
    if (!strcmp(k, "step") || !strcmp(k, "kind")) return 1;
    for (int i = 0; i < 5 && IDX[r][i]; i++)
        if (!strcmp(IDX[r][i], k)) return 1;
    return 0;
}

// The key of row d in a run whose every layer uses `variant`.
static const char* key_of(const MetricDef* d, const char* variant) {
    return d->flags & MF_ROW_STAT ? attn_lookup(variant)->row_stat_name : d->name;
}

START_TEST(test_table_is_complete) {
    int log_max = 0;
    for (int i = 0; i < METRIC_NROWS; i++) {
        const MetricDef* d = &METRIC_ROWS[i];
        ck_assert_msg(d->name || (d->flags & MF_ROW_STAT), "row %d has no name", i);
        ck_assert_msg(d->collected && d->doc, "row %d (%s) is not documented", i, d->name);
        ck_assert(d->agg < AG_COUNT && d->record < MR_COUNT);
        for (int k = 0; k < i; k++) // one row per key and record
            ck_assert(!d->name || !METRIC_ROWS[k].name || d->record != METRIC_ROWS[k].record ||
                      strcmp(d->name, METRIC_ROWS[k].name));
        if (d->agg >= AG_OF_MEAN && d->agg <= AG_OF_SUM)
            ck_assert_msg(metrics_row_find(d->of.record, d->of.name) >= 0, "%s: no row %s", d->name,
                          d->of.name);
        if (d->log) ck_assert(d->record == MR_MODEL);
        log_max = d->log > log_max ? d->log : log_max;
        if (d->flags & MF_MAP) ck_assert(d->record == MR_HEAD);
    }
    for (int pos = 1; pos <= log_max; pos++) { // headline positions 1..n, each once
        int c = 0;
        for (int i = 0; i < METRIC_NROWS; i++)
            c += METRIC_ROWS[i].log == pos;
        ck_assert_int_eq(c, 1);
    }
}
END_TEST

START_TEST(test_run_writes_every_row) {
    // credal has a row statistic; attnres routes; qk_norm adds param records; one probe
    // sequence so that the dumped map is the whole probe
    const char* variant = "credal";
    char dir[1100], extra[512];
    snprintf(dir, sizeof(dir), "%s/table_run", tu_dir());
    snprintf(extra, sizeof(extra),
             "attention=%s residual=attnres qk_norm=1 metrics_every=1 dump_attention_every=1 "
             "probe_sequences=1 max_steps=%d",
             variant, STEPS);
    ck_assert_int_eq(tu_train(dir, extra), 0);
    const int L = 2, NH = 2;
    char* jsonl = tu_file_in(dir, "metrics.jsonl");
    // per row: lines of its record that have it, and lines of its record (by step)
    int have[128] = {0}, lines[MR_COUNT] = {0};
    ck_assert(METRIC_NROWS <= 128);
    int head_seen[STEPS + 1][2][2] = {{{0}}};
    char keys[MAXKEYS][64], vals[MAXKEYS][64];
    char(*last_head)[MAXKEYS][64] = calloc((size_t)L * NH, sizeof(*last_head)); // keys at STEPS
    char(*last_val)[MAXKEYS][64] = calloc((size_t)L * NH, sizeof(*last_val));
    int last_n[4] = {0};
    int rs = -1; // the row statistic's row
    for (int i = 0; i < METRIC_NROWS; i++)
        if (METRIC_ROWS[i].flags & MF_ROW_STAT) rs = i;
    ck_assert_int_ge(rs, 0);
    for (char* line = jsonl; line && *line;) {
        char* nl = strchr(line, '\n');
        if (nl) *nl = 0;
        int n = object_keys(line, keys, vals);
        const char* kind = val_of(keys, vals, n, "kind");
        int r = -1;
        for (int k = 0; kind && k < MR_COUNT; k++) {
            char q[32];
            snprintf(q, sizeof(q), "\"%s\"", metrics_record_name((MetricRecord)k));
            if (!strcmp(kind, q)) r = k;
        }
        if (r >= 0) {
            lines[r]++;
            const long step = atol(val_of(keys, vals, n, "step"));
            for (int i = 0; i < n; i++) { // every key is an index key or a row of the record
                int row = metrics_row_find((MetricRecord)r, keys[i]);
                if (row < 0 && r == MR_HEAD && !strcmp(keys[i], key_of(&METRIC_ROWS[rs], variant)))
                    row = rs;
                ck_assert_msg(row >= 0 || is_index_key((MetricRecord)r, keys[i]),
                              "%s record key %s is not in the metrics table", kind, keys[i]);
                if (row >= 0) have[row]++;
            }
            if (r == MR_HEAD) {
                const int l = atoi(val_of(keys, vals, n, "layer"));
                const int h = atoi(val_of(keys, vals, n, "head"));
                ck_assert(l >= 0 && l < L && h >= 0 && h < NH && step >= 0 && step <= STEPS);
                head_seen[step][l][h]++;
                if (step == STEPS) {
                    memcpy(last_head[l * NH + h], keys, sizeof(keys));
                    memcpy(last_val[l * NH + h], vals, sizeof(vals));
                    last_n[l * NH + h] = n;
                }
            }
            if (r == MR_MODEL) ck_assert(!val_of(keys, vals, n, "layer")); // one per model
            if (r == MR_ACT) ck_assert(val_of(keys, vals, n, "site"));
        }
        line = nl ? nl + 1 : NULL;
    }
    // the records: every (layer, head) once per metrics step; act 5 L + 1, route 2 L + 1
    const int nsteps = lines[MR_MODEL];
    ck_assert_int_ge(nsteps, STEPS);
    for (int s = 1; s <= STEPS; s++)
        for (int l = 0; l < L; l++)
            for (int h = 0; h < NH; h++)
                ck_assert_int_eq(head_seen[s][l][h], 1);
    ck_assert_int_eq(lines[MR_HEAD], nsteps * L * NH);
    ck_assert_int_eq(lines[MR_ACT], nsteps * (5 * L + 1));
    ck_assert_int_eq(lines[MR_ROUTE], nsteps * (2 * L + 1));
    ck_assert_int_gt(lines[MR_GRAD], 0);
    ck_assert_int_gt(lines[MR_PARAM], 0);
    for (int i = 0; i < METRIC_NROWS; i++) { // every row written, in every record of its unit
        const MetricDef* d = &METRIC_ROWS[i];
        const int want = d->flags & MF_BLOCK ? nsteps * L : lines[d->record];
        ck_assert_msg(have[i] == want, "%s row %s: in %d of %d records",
                      metrics_record_name(d->record), key_of(d, variant), have[i], want);
    }
    // main.log: the table's headlines, once per metrics step each
    char* log = tu_file_in(dir, "main.log");
    for (int i = 0; i < METRIC_NROWS; i++) {
        const MetricDef* d = &METRIC_ROWS[i];
        if (!d->log) continue;
        char pat[96];
        snprintf(pat, sizeof(pat), "step %d %s ", STEPS, d->log_name ? d->log_name : d->name);
        ck_assert_msg(strstr(log, pat), "main.log has no line '%s'", pat);
    }
    free(log);

    // the explorer on the dumped map of the one probe sequence at step STEPS: the same keys and
    // values as the head records
    char prefix[1200], err[512], path[1300];
    snprintf(prefix, sizeof(prefix), "%s/attn/step_%08d.npy", dir, STEPS);
    NpyInfo info;
    float* maps = npy_read_f32(prefix, &info, err, sizeof(err));
    ck_assert_msg(maps != NULL, "%s", err);
    const int T = info.shape[2];
    ExplorerRun run = {.label = "run", .sidecar = "{}", .maps = maps, .nl = L, .nh = NH, .T = T};
    snprintf(path, sizeof(path), "%s/view.html", dir);
    ck_assert_msg(explorer_write(path, &run, 1, "t", 0, NULL, err, sizeof(err)) == 0, "%s", err);
    size_t len;
    char* page = util_read_file(path, &len, err, sizeof(err));
    ck_assert_ptr_nonnull(page);
    const char* p = strstr(page, "\"stats\":[");
    ck_assert_ptr_nonnull(p);
    p += strlen("\"stats\":[");
    int nmap = 0;
    for (int hh = 0; hh < L * NH; hh++) {
        ck_assert(*p == '{');
        int n = object_keys(p, keys, vals);
        for (int i = 0; i < n; i++) {
            const int row = metrics_row_find(MR_HEAD, keys[i]);
            const int extra_key = !strcmp(keys[i], "rowsum_min") ||
                                  !strcmp(keys[i], "rowsum_mean") ||
                                  !strcmp(keys[i], "rowsum_max") || !strcmp(keys[i], "negative");
            ck_assert_msg(row >= 0 || extra_key, "explorer key %s is not a metrics.jsonl key",
                          keys[i]);
            if (row < 0) continue;
            ck_assert(METRIC_ROWS[row].flags & MF_MAP);
            nmap++;
            const char* mv = val_of(last_head[hh], last_val[hh], last_n[hh], keys[i]);
            ck_assert_msg(mv && !strcmp(mv, vals[i]), "head %d %s: explorer %s, metrics.jsonl %s",
                          hh, keys[i], vals[i], mv ? mv : "(none)");
        }
        p = strchr(p, '}') + 1;
        if (*p == ',') p++;
    }
    int rows_map = 0; // every MF_MAP row in every head's statistics
    for (int i = 0; i < METRIC_NROWS; i++)
        rows_map += (METRIC_ROWS[i].flags & MF_MAP) != 0;
    ck_assert_int_gt(rows_map, 0);
    ck_assert_int_eq(nmap, rows_map * L * NH);
    free(page);
    free(maps);
    free(last_head);
    free(last_val);
    free(jsonl);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// the act rows: one row each, collected by its own kernel

enum { AL = 2, ANH = 2, AC = 16, AT = 8, AB = 2, ATC = AT * AC };

static int cmp_double(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

// The statistic of act row `name` over x[0..ATC) at site (0..5), from the definitions in
// docs/diagnostics.md.
static double act_reference(const char* name, const float* x, int site) {
    const int n = ATC;
    double mu = 0.0, mx = 0.0, a[ATC];
    for (int i = 0; i < n; i++) {
        mu += x[i];
        a[i] = fabs((double)x[i]);
        if (a[i] > mx) mx = a[i];
    }
    mu /= n;
    qsort(a, (size_t)n, sizeof(double), cmp_double);
    const double med = a[n / 2];
    if (!strcmp(name, "kurtosis")) {
        double m2 = 0.0, m4 = 0.0;
        for (int i = 0; i < n; i++) {
            const double d = x[i] - mu;
            m2 += d * d;
            m4 += d * d * d * d;
        }
        const double var = m2 / (n - 1);
        return (m4 / n) / (var * var + 1e-6);
    }
    if (!strcmp(name, "max_abs")) return mx;
    if (!strcmp(name, "massive_ratio")) return med > 0.0 ? mx / med : (mx > 0 ? INFINITY : NAN);
    if (!strcmp(name, "massive")) {
        if (site != 4) return 0.0; // block outputs only
        int c = 0;
        for (int i = 0; i < n; i++)
            c += fabs((double)x[i]) > 100.0 && fabs((double)x[i]) > 1000.0 * med;
        return c;
    }
    ck_abort_msg("act row %s has no reference here: add its definition", name);
    return NAN;
}

START_TEST(test_act_rows_from_table) {
    // every act row has a kernel and a slot of its own after the head slots
    int nact = 0, seen[METRICS_MAX_SLOTS] = {0};
    for (int i = 0; i < METRIC_NROWS; i++) {
        const MetricDef* d = &METRIC_ROWS[i];
        if (d->record != MR_ACT) continue;
        nact++;
        ck_assert_msg(d->act != NULL, "act row %s has no kernel", d->name);
        const int k = metrics_row_slot(d);
        ck_assert_int_ge(k, SQ_HEAD_COUNT);
        ck_assert_int_lt(k, metrics_seq_slots());
        ck_assert_msg(!seen[k]++, "act row %s shares slot %d", d->name, k);
        ck_assert_int_eq(metrics_seq_unit(k), MU_SITE);
    }
    ck_assert_int_ge(nact, 4);
    ck_assert_int_eq(metrics_seq_slots(), SQ_HEAD_COUNT + nact);

    Config c;
    test_tiny_config(&c, 64, AL, ANH, AC, AT);
    GPT2 m;
    test_build_model(&m, &c, AB, AT, 3);
    int tokens[AB * AT];
    for (int i = 0; i < AB * AT; i++)
        tokens[i] = (i * 7 + 3) % 64;
    gpt2_forward(&m, tokens, NULL, AB, AT);
    // planted activations: values of order 1 and, at every site, 1 to 3 spikes far above
    // 1000 x the median (so that a count that is not limited to block outputs shows)
    const size_t BTC = (size_t)AB * ATC;
    float* base[6] = {m.ln1, m.attproj, m.ln2, m.fcproj, m.residual3, m.lnf};
    for (int site = 0; site < 6; site++) {
        for (int l = 0; l < (site == 5 ? 1 : AL); l++) {
            for (int b = 0; b < AB; b++) {
                float* x = base[site] + (size_t)l * BTC + (size_t)b * ATC;
                for (int i = 0; i < ATC; i++)
                    x[i] = (float)(0.3 + 0.7 * sin(0.37 * i + site + 2.0 * l + 5.0 * b));
                for (int k = 0; k <= (site + l + b) % 3; k++)
                    x[17 + 31 * k] = (float)((k % 2 ? -1.0 : 1.0) * (2000.0 + 300.0 * (l + b)));
            }
        }
    }
    MetricsSetup ms = {
        .every = 1, .sink_eps = 0.3f, .tokens = tokens, .nseq = AB, .T = AT, .nthreads = 2};
    Metrics mt;
    char err[512];
    ck_assert_msg(metrics_init(&mt, &m, &ms, err, sizeof(err)) == 0, "%s", err);
    metrics_collect(&mt, &m, 0);
    for (int i = 0; i < METRIC_NROWS; i++) {
        const MetricDef* d = &METRIC_ROWS[i];
        if (d->record != MR_ACT) continue;
        const double* v = metrics_seq(&mt, metrics_row_slot(d));
        int nonzero = 0;
        for (int u = 0; u < 5 * AL + 1; u++) {
            const int site = u < 5 * AL ? u / AL : 5, l = u < 5 * AL ? u % AL : 0;
            for (int b = 0; b < AB; b++) {
                const float* x = base[site] + (size_t)l * BTC + (size_t)b * ATC;
                const double want = act_reference(d->name, x, site);
                const double got = v[(size_t)u * AB + b];
                ck_assert_msg(fabs(got - want) <= 1e-9 * fabs(want),
                              "act row %s, site %d layer %d sequence %d: %.17g, expected %.17g",
                              d->name, site, l, b, got, want);
                nonzero += want != 0.0;
            }
        }
        ck_assert_msg(nonzero > 0, "act row %s: the planted values do not test it", d->name);
    }
    metrics_free(&mt);
    gpt2_free(&m);
}
END_TEST

static Suite* metrics_table_suite(void) {
    Suite* s = suite_create("metrics_table");
    TCase* tc = tcase_create("core");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_table_is_complete);
    tcase_add_test(tc, test_run_writes_every_row);
    tcase_add_test(tc, test_act_rows_from_table);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(metrics_table_suite)
