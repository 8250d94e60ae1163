// model/metrics_write.c: a metrics step: the probe forward in chunks (metrics_probe, feeding
// metrics_collect of model/metrics.c) and its records (metrics_write, model/metrics.h), made
// from the table of model/metrics_table.h: for each record kind, for each of its units, the
// index keys and then every row of that record in table order, each aggregated from the
// quantities metrics_collect stored; then the main.log headlines of the rows that have one.
//
// Sequences are reduced in ascending order and units in table order, so every number is the same
// for any thread count and any probe chunk size.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "model/metrics.h"
#include "model/metrics_table.h"
#include "model/residual.h"

static const char* const SITE_NAMES[METRICS_NSITES] = {"ln_1", "attn",  "ln_2",
                                                       "mlp",  "block", "ln_f"};

static MetricUnit record_unit(MetricRecord r) {
    static const MetricUnit U[MR_COUNT] = {MU_HEAD,  MU_SITE,   MU_SUBLAYER,
                                           MU_MODEL, MU_TENSOR, MU_TENSOR};
    return U[r];
}

static int unit_site(const Metrics* mt, size_t u) {
    return u < 5 * (size_t)mt->L ? (int)(u / (size_t)mt->L) : 5;
}

// Whether record r has unit u at this step (act: the site exists; route: the sublayer routes).
static int unit_present(const Metrics* mt, const GPT2* m, MetricRecord r, size_t u) {
    if (r == MR_ACT) return metrics_site_present(m, unit_site(mt, u));
    if (r == MR_ROUTE) return metrics_run(mt, RN_ROUTE_N)[u] > 0;
    return 1;
}

// Whether row d is written in unit u of its record.
static int row_present(const Metrics* mt, const GPT2* m, const MetricDef* d, size_t u) {
    if ((d->flags & MF_BLOCK) && unit_site(mt, u) != 4) return 0;
    if (d->flags & MF_ROW_STAT) {
        const LayerAttn* la = &m->la[u / (size_t)mt->NH];
        return la->row->row_stat && la->row->row_stat_name && la->v->layer_forward == NULL;
    }
    return 1;
}

static const char* row_name(const Metrics* mt, const GPT2* m, const MetricDef* d, size_t u) {
    return d->flags & MF_ROW_STAT ? m->la[u / (size_t)mt->NH].row->row_stat_name : d->name;
}

// Value of row d (not a param row) at unit u; *null = 1 when it is written as null.
static double row_value(const Metrics* mt, const GPT2* m, const MetricDef* d, size_t u, int* null) {
    const int n = mt->collected;
    const double* v =
        d->agg <= AG_SINK_FRAC ? metrics_seq(mt, metrics_row_slot(d)) + u * (size_t)mt->nseq : NULL;
    double s = 0.0, s2 = 0.0, mx;
    int k = 0;
    *null = 0;
    switch (d->agg) {
    case AG_POOLED: {
        AttnAccum acc = {0};
        for (int b = 0; b < n; b++) // fixed order over the sequences
            metrics_accum_add(&acc, &mt->acc[u * (size_t)mt->nseq + b]);
        return metrics_map_value(d, &acc, (MetricsAlpha0){NAN, NAN});
    }
    case AG_MAX:
        mx = 0.0;
        for (int b = 0; b < n; b++)
            if (v[b] > mx || isnan(v[b])) mx = v[b];
        return mx;
    case AG_RATIO: {
        const double* v2 = metrics_seq(mt, d->slot2) + u * (size_t)mt->nseq;
        for (int b = 0; b < n; b++) {
            s += v[b];
            s2 += v2[b];
        }
        return s2 != 0.0 ? s / s2 : NAN;
    }
    case AG_MEAN:
        for (int b = 0; b < n; b++)
            s += v[b];
        return s / n;
    case AG_MEAN_NAN0:
        for (int b = 0; b < n; b++)
            s += isnan(v[b]) ? 0.0 : v[b];
        return s / n;
    case AG_MEAN_DEFINED:
        for (int b = 0; b < n; b++) {
            if (isnan(v[b])) continue;
            s += v[b];
            k++;
        }
        return k ? s / k : NAN;
    case AG_SUM:
        for (int b = 0; b < n; b++)
            s += v[b];
        return s;
    case AG_SINK_FRAC:
        return metrics_sink_rate(v, (size_t)n, mt->sink_eps);
    case AG_GRAD_HEAD:
        *null = !mt->have_grads;
        return mt->grad_head[(size_t)d->field * metrics_units(mt, MU_HEAD) + u];
    case AG_GRAD_MODEL:
        *null = !mt->have_grads;
        return mt->grad_norm;
    case AG_GRAD_TENSOR:
        return mt->grad_tensor[u];
    case AG_RUN_RATIO:
        s2 = metrics_run(mt, (MetricRunSlot)d->slot2)[u];
        return s2 != 0.0 ? metrics_run(mt, (MetricRunSlot)d->slot)[u] / s2 : NAN;
    case AG_RUN_MAX:
        return metrics_run(mt, (MetricRunSlot)d->slot2)[u] != 0.0
                   ? metrics_run(mt, (MetricRunSlot)d->slot)[u]
                   : NAN;
    case AG_OF_MEAN:
    case AG_OF_MEAN_FIN:
    case AG_OF_MAX:
    case AG_OF_MAX_DEF:
    case AG_OF_SUM: {
        const int src = metrics_row_find(d->of.record, d->of.name);
        ASSERT(src >= 0);
        const MetricDef* sd = &METRIC_ROWS[src];
        mx = d->agg == AG_OF_MAX ? -INFINITY : NAN;
        for (size_t w = 0; w < metrics_units(mt, record_unit(sd->record)); w++) {
            if (!unit_present(mt, m, sd->record, w) || !row_present(mt, m, sd, w)) continue;
            int nl;
            const double x = row_value(mt, m, sd, w, &nl);
            if (d->agg == AG_OF_MEAN_FIN && !isfinite(x)) continue;
            s += x;
            k++;
            if (d->agg == AG_OF_MAX && (x > mx || isnan(x))) mx = x;
            if (d->agg == AG_OF_MAX_DEF && !isnan(x) && (isnan(mx) || x > mx)) mx = x;
        }
        if (d->agg == AG_OF_MAX || d->agg == AG_OF_MAX_DEF) return mx;
        if (d->agg == AG_OF_SUM) return s;
        return k ? s / k : NAN;
    }
    case AG_PROBE_N:
        return n;
    case AG_PROBE_T:
        return mt->T;
    case AG_PARAM_MEAN:
    case AG_PARAM_MIN:
    case AG_PARAM_MAX:
    case AG_COUNT:
        break;
    }
    ASSERT(0); // a row whose aggregation has no writer
    return NAN;
}

static void put(JsonBuf* j, const char* name, const MetricDef* d, double v, int null) {
    if (null)
        json_null(j, name);
    else if (d->flags & MF_INT)
        json_int(j, name, (long long)v);
    else
        json_num(j, name, v);
}

static void record_head(JsonBuf* j, long step, MetricRecord r) {
    json_begin(j);
    json_int(j, "step", step);
    json_str(j, "kind", metrics_record_name(r));
}

// The index keys of unit u of record r (head, act, route).
static void index_keys(JsonBuf* j, const Metrics* mt, const GPT2* m, MetricRecord r, size_t u) {
    const int L = mt->L;
    if (r == MR_HEAD) {
        json_int(j, "layer", (long long)(u / (size_t)mt->NH));
        json_int(j, "head", (long long)(u % (size_t)mt->NH));
    } else if (r == MR_ACT) {
        if (u < 5 * (size_t)L) json_int(j, "layer", (long long)(u % (size_t)L));
        json_str(j, "site", SITE_NAMES[unit_site(mt, u)]);
    } else if (r == MR_ROUTE) {
        static const char* const SUB[] = {"attn", "mlp", "ln_f"};
        const int s = (int)u;
        if (s < 2 * L) json_int(j, "layer", s / 2);
        json_str(j, "sublayer", SUB[s < 2 * L ? s % 2 : 2]);
        json_str(j, "residual", resid_name(m->cfg.residual));
        json_int(j, "sources", resid_nsrc(m->cfg.residual, m->cfg.n_layer, s));
    }
}

// The records of r with one line per unit: head, act, route, model.
static void write_units(Metrics* mt, const GPT2* m, long step, MetricRecord r, FILE* jsonl) {
    JsonBuf* j = &mt->j;
    for (size_t u = 0; u < metrics_units(mt, record_unit(r)); u++) {
        if (!unit_present(mt, m, r, u)) continue;
        record_head(j, step, r);
        index_keys(j, mt, m, r, u);
        for (int i = 0; i < METRIC_NROWS; i++) {
            const MetricDef* d = &METRIC_ROWS[i];
            if (d->record != r || !row_present(mt, m, d, u)) continue;
            int null;
            const double v = row_value(mt, m, d, u, &null);
            put(j, row_name(mt, m, d, u), d, v, null);
        }
        json_end(j);
        json_write_line(j, jsonl);
    }
}

// Gradient norms per tensor (per layer for stacked tensors).
static void write_grads(Metrics* mt, const GPT2* m, long step, FILE* jsonl) {
    JsonBuf* j = &mt->j;
    const int L = mt->L;
    for (int i = 0; i < m->nspecs; i++) {
        const ParamSpec* s = &m->specs[i];
        if (!s->size) continue; // the MLP tensors of an attention-only model
        for (int l = 0; l < (s->stacked ? L : 1); l++) {
            record_head(j, step, MR_GRAD);
            json_str(j, "tensor", s->name);
            if (s->stacked) json_int(j, "layer", l);
            const size_t u = (size_t)i * L + l;
            for (int k = 0; k < METRIC_NROWS; k++) {
                const MetricDef* d = &METRIC_ROWS[k];
                if (d->record != MR_GRAD) continue;
                int null;
                const double v = row_value(mt, m, d, u, &null);
                put(j, d->name, d, v, null);
            }
            json_end(j);
            json_write_line(j, jsonl);
        }
    }
}

// Variant-owned parameters: attnp per named slot and layer; other tensors per layer; and the
// qk-norm gains per layer.
static void write_params(Metrics* mt, const GPT2* m, long step, FILE* jsonl) {
    JsonBuf* j = &mt->j;
    const int L = mt->L, NH = mt->NH;
    for (int i = 0; i < m->nspecs; i++) {
        const ParamSpec* s = &m->specs[i];
        if (!s->variant_owned && s->row != P_QKNORM_Q && s->row != P_QKNORM_K) continue;
        for (int l = 0; l < (s->stacked ? L : 1); l++) {
            const float* p = gpt2_tensor(m, m->params, i, l);
            int nslots = 1, stride = 0;
            size_t count = s->stacked ? s->size / s->shape[0] : s->size;
            const AttnVariant* row = m->la[l].row;
            if (i == m->row_spec[P_ATTNP]) {
                nslots = row->params_per_head; // this layer's row map may use fewer than maxP
                stride = m->maxP;
                count = (size_t)NH;
            }
            for (int k = 0; k < nslots; k++) {
                double sum = 0.0, mn = INFINITY, mx = -INFINITY;
                for (size_t q = 0; q < count; q++) {
                    double v = stride ? p[q * (size_t)stride + k] : p[q];
                    sum += v;
                    if (v < mn) mn = v;
                    if (v > mx) mx = v;
                }
                char name[128];
                if (i == m->row_spec[P_ATTNP]) {
                    if (row->param_names && row->param_names[k])
                        snprintf(name, sizeof(name), "%s.%s", row->name, row->param_names[k]);
                    else
                        snprintf(name, sizeof(name), "%s.p%d", row->name, k);
                } else {
                    util_strlcpy(name, s->name, sizeof(name));
                }
                record_head(j, step, MR_PARAM);
                json_str(j, "tensor", name);
                if (s->stacked) json_int(j, "layer", l);
                for (int r = 0; r < METRIC_NROWS; r++) {
                    const MetricDef* d = &METRIC_ROWS[r];
                    if (d->record != MR_PARAM) continue;
                    ASSERT(d->agg >= AG_PARAM_MEAN && d->agg <= AG_PARAM_MAX);
                    const double v = d->agg == AG_PARAM_MEAN  ? sum / (double)count
                                     : d->agg == AG_PARAM_MIN ? mn
                                                              : mx;
                    put(j, d->name, d, v, 0);
                }
                json_end(j);
                json_write_line(j, jsonl);
            }
        }
    }
}

void metrics_write(Metrics* mt, const GPT2* m, long step, FILE* jsonl, FILE* log) {
    ASSERT(mt->collected >= 1);
    ASSERT(mt->L == m->cfg.n_layer && mt->NH == m->cfg.n_head);
    write_units(mt, m, step, MR_HEAD, jsonl);
    write_units(mt, m, step, MR_ACT, jsonl);
    write_units(mt, m, step, MR_ROUTE, jsonl); // D11, only the sublayers that route
    write_units(mt, m, step, MR_MODEL, jsonl);
    if (mt->have_grads) write_grads(mt, m, step, jsonl);
    write_params(mt, m, step, jsonl);

    if (log) { // headline lines "step N key value" (docs/configuration.md, main.log)
        for (int pos = 1;; pos++) {
            int found = 0;
            for (int i = 0; i < METRIC_NROWS; i++) {
                const MetricDef* d = &METRIC_ROWS[i];
                if (d->log != pos) continue;
                ASSERT(d->record == MR_MODEL);
                int null;
                const double v = row_value(mt, m, d, 0, &null);
                const char* key = d->log_name ? d->log_name : d->name;
                if (d->flags & MF_INT)
                    fprintf(log, "step %ld %s %ld\n", step, key, (long)v);
                else
                    fprintf(log, "step %ld %s %f\n", step, key, v);
                found = 1;
            }
            if (!found) break;
        }
        fflush(log);
    }
}

static int write_dump(const Metrics* mt, const GPT2* m, long step, const TokenText* tok,
                      const char* out_dir, char* err, size_t errcap) {
    char dir[1100], prefix[1200];
    snprintf(dir, sizeof(dir), "%s/attn", out_dir);
    if (util_mkdirs(dir, err, errcap)) return -1;
    snprintf(prefix, sizeof(prefix), "%s/step_%08ld", dir, step);
    const int L = m->cfg.n_layer, NH = m->cfg.n_head;
    int layers[GPT2_MAX_LAYERS], *heads = mallocCheck(sizeof(int) * (size_t)NH);
    for (int l = 0; l < L; l++)
        layers[l] = l;
    for (int h = 0; h < NH; h++)
        heads[h] = h;
    const int Td = mt->T < METRICS_DUMP_T ? mt->T : METRICS_DUMP_T;
    int rc = metrics_write_attention(m, prefix, 0, Td, layers, L, heads, NH, 0, mt->probe, tok,
                                     step, "probe", err, errcap);
    free(heads);
    return rc;
}

int metrics_probe(Metrics* mt, GPT2* m, long step, int records, int dump, const TokenText* tok,
                  const char* out_dir, FILE* jsonl, FILE* log, char* err, size_t errcap) {
    // probe forward in evaluation mode, in chunks of the activation batch; it overwrites only
    // activations the next step recomputes
    const long saved = m->step;
    const int want = records && jsonl;
    int rc = 0;
    m->step = -1;
    for (int b0 = 0; b0 < mt->nseq; b0 += mt->chunk) {
        const int Bc = mt->nseq - b0 < mt->chunk ? mt->nseq - b0 : mt->chunk;
        gpt2_forward(m, mt->probe + (size_t)b0 * mt->T, NULL, Bc, mt->T);
        if (b0 == 0 && dump) rc = write_dump(mt, m, step, tok, out_dir, err, errcap);
        if (!want) break; // the dump needs the first chunk only
        metrics_collect(mt, m, b0);
    }
    m->step = saved;
    if (want) metrics_write(mt, m, step, jsonl, log);
    mt->have_grads = 0;
    return rc;
}
