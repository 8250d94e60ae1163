// model/metrics_table.c: the table of diagnostics (model/metrics_table.h): one row per statistic
// of metrics.jsonl, in the order each record writes its keys, with the kernels of the act rows,
// the units of the collected quantities, the explorer's per-map values and the table's text for
// docs/diagnostics.md.
#include "model/metrics_table.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "common/util.h"

_Static_assert(SQ_HEAD_COUNT <= METRICS_MAX_SLOTS && RN_COUNT <= METRICS_MAX_SLOTS,
               "raise METRICS_MAX_SLOTS");

const MetricRunDef METRIC_RUN_SLOTS[RN_COUNT] = {[RN_ROUTE_SUM] = {MU_SUBLAYER, 0.0},
                                                 [RN_ROUTE_N] = {MU_SUBLAYER, 0.0},
                                                 [RN_LOGZ_SUM] = {MU_MODEL, 0.0},
                                                 [RN_LOGZ_MAX] = {MU_MODEL, -INFINITY},
                                                 [RN_LOGZ_N] = {MU_MODEL, 0.0}};

// The act rows' kernels (model/metrics.h's definitions). massive_ratio and massive share
// metrics_massive: each row calls it (the count only on block outputs, one more median there).
static double act_kurtosis(const float* x, size_t n, const MetricActCtx* ctx) {
    (void)ctx;
    return metrics_kurtosis(x, n);
}
static double act_max_abs(const float* x, size_t n, const MetricActCtx* ctx) {
    (void)ctx;
    return metrics_max_abs(x, n);
}
static double act_massive_ratio(const float* x, size_t n, const MetricActCtx* ctx) {
    return metrics_massive(x, n, ctx->scratch, NULL);
}
static double act_massive(const float* x, size_t n, const MetricActCtx* ctx) {
    return (double)metrics_massive_count(x, n, ctx->scratch);
}

#define POOLED(f)    .agg = AG_POOLED, .field = (int)offsetof(AttnHeadStats, f)
#define ROWS_PER_SEQ "attention rows of each sequence"

const MetricDef METRIC_ROWS[] = {
    // "head": one per layer and head
    {"entropy", MR_HEAD, POOLED(entropy), .flags = MF_MAP, .collected = ROWS_PER_SEQ,
     .doc = "mean over rows of `H = -sum_j p_j ln p_j`, in nats (`0 ln 0 = 0`); row 0 counts, "
            "with `H = 0`"},
    {"entropy_norm", MR_HEAD, POOLED(entropy_norm), .flags = MF_MAP, .collected = ROWS_PER_SEQ,
     .doc = "mean over rows with `n >= 2` of `H / ln n`; 1 = uniform, 0 = one-hot"},
    {"sink_mass", MR_HEAD, POOLED(sink_mass), .flags = MF_MAP, .collected = ROWS_PER_SEQ,
     .doc = "mean over rows `t >= 1` with `sum|a| > 0` of `p_t0` (mass on the first token)"},
    {"sink_mass_raw", MR_HEAD, POOLED(sink_mass_raw), .flags = MF_MAP, .collected = ROWS_PER_SEQ,
     .doc = "mean over every row `t >= 1` of the raw weight `a_t0`"},
    {"max_weight", MR_HEAD, POOLED(max_weight), .flags = MF_MAP, .collected = ROWS_PER_SEQ,
     .doc = "mean over rows of `max_j p_tj` (routing contrast, D11); row 0 counts, with 1"},
    {"max_logit", MR_HEAD, AG_MAX, .slot = SQ_MAX_LOGIT,
     .collected = "scores `s = q.k / sqrt(hs)` recomputed from the layer's stored q, k",
     .doc = "`max |s_tj|` over all causal entries, plus the ALiBi bias when `pos_encoding = "
            "alibi` and the layer's FIRE bias when `pos_encoding = fire`. Layer-level variants "
            "that change their scores internally (e.g. row scales) are reported on the plain "
            "`q.k / sqrt(hs)`"},
    {"sparsity", MR_HEAD, POOLED(sparsity), .flags = MF_MAP, .collected = ROWS_PER_SEQ,
     .doc = "fraction of causal entries (`j <= t`) whose raw weight is exactly 0"},
    {"grad_norm_q", MR_HEAD, AG_GRAD_HEAD, .field = 0, .collected = "gradients before clipping",
     .doc = "L2 norm (before clipping) of this head's rows of the `qkvw` and `qkvb` gradients: "
            "q rows `[h*hs, (h+1)*hs)`; null on a step without gradients"},
    {"grad_norm_k", MR_HEAD, AG_GRAD_HEAD, .field = 1, .collected = "gradients before clipping",
     .doc = "the same for the k rows (`C` further)"},
    {"grad_norm_v", MR_HEAD, AG_GRAD_HEAD, .field = 2, .collected = "gradients before clipping",
     .doc = "the same for the v rows (`2C` further)"},
    {"alpha0", MR_HEAD, AG_MEAN_NAN0, .slot = SQ_A0_NORM, .flags = MF_MAP,
     .collected = "Gu's alpha0 of each sequence",
     .doc = "= `alpha0_renorm` (kept for existing readers)"},
    {"alpha0_raw", MR_HEAD, AG_MEAN_NAN0, .slot = SQ_A0_RAW, .flags = MF_MAP,
     .collected = "Gu's alpha0 of each sequence",
     .doc = "Gu et al.'s importance of key 0 on the raw weights: mean over queries "
            "`i < min(64, T)` of `a_i0` (including `i = 0`)"},
    {"alpha0_renorm", MR_HEAD, AG_MEAN_NAN0, .slot = SQ_A0_NORM, .flags = MF_MAP,
     .collected = "Gu's alpha0 of each sequence",
     .doc = "the same on `p_i0`, over the rows with `sum|a| > 0`"},
    {"sink_frac_raw", MR_HEAD, AG_SINK_FRAC, .slot = SQ_A0_RAW,
     .collected = "Gu's alpha0 of each sequence",
     .doc = "fraction of the probe sequences whose `alpha0_raw > sink_eps`"},
    {"sink_frac_renorm", MR_HEAD, AG_SINK_FRAC, .slot = SQ_A0_NORM,
     .collected = "Gu's alpha0 of each sequence",
     .doc = "fraction of the probe sequences whose `alpha0_renorm > sink_eps`"},
    {"kurtosis", MR_HEAD, AG_MEAN, .slot = SQ_HEAD_KURT,
     .collected = "the head's attention output (before c_proj), `T x hs` values per sequence",
     .doc = "kurtosis (as the `act` records') of the head's attention output"},
    {NULL, MR_HEAD, AG_RATIO, .slot = SQ_STAT_SUM, .slot2 = SQ_STAT_N, .flags = MF_ROW_STAT,
     .collected = "the row map's own statistic of each row (default pipeline only)",
     .doc = "only for variants that declare a row statistic, under its name (e.g. "
            "`uncertainty` for credal, `support` for entmax/sparsemax): mean over rows"},

    // "act": one per layer and site, plus ln_f
    {"kurtosis", MR_ACT, AG_MEAN, .act = act_kurtosis,
     .collected = "each sequence's `T*C` values at the site",
     .doc = "`mean((x - mu)^4) / (std^4 + 1e-6)` with the unbiased std (non-excess: Gaussian = "
            "3)"},
    {"max_abs", MR_ACT, AG_MEAN, .act = act_max_abs,
     .collected = "each sequence's `T*C` values at the site", .doc = "`max |x|`"},
    {"massive_ratio", MR_ACT, AG_MEAN_DEFINED, .act = act_massive_ratio,
     .collected = "each sequence's `T*C` values at the site",
     .doc = "`max |x| / median |x|` (median = the `floor(N/2)`-th smallest of the `N = T*C` "
            "magnitudes); undefined on an all-zero tensor"},
    {"massive", MR_ACT, AG_SUM, .act = act_massive, .flags = MF_INT | MF_BLOCK,
     .collected = "each sequence's block output",
     .doc = "`block` only: entries with `|x| > 100` and `|x| > 1000 * median |x|` (Sun et al.)"},

    // "route": one per sublayer that routes over depth (residual = attnres | delta_attnres)
    {"max_weight", MR_ROUTE, AG_RUN_RATIO, .slot = RN_ROUTE_SUM, .slot2 = RN_ROUTE_N,
     .flags = MF_PRESENT1, .collected = "the depth-routing weights of every probe position",
     .doc = "mean over all probe positions of `max_i alpha_{i->s}`, the largest depth-routing "
            "weight; in [1/n, 1]; 1/n = uniform routing"},

    // "model": one per metrics step
    {"sink_rate", MR_MODEL, AG_OF_MEAN, .of = {MR_HEAD, "sink_frac_renorm"}, .log = 1,
     .collected = "the head records", .doc = "= `sink_rate_renorm` (kept for existing readers)"},
    {"sink_rate_raw", MR_MODEL, AG_OF_MEAN, .of = {MR_HEAD, "sink_frac_raw"}, .log = 2,
     .collected = "the head records",
     .doc = "Gu et al.'s sink rate: over (layer, head, sequence), the fraction with "
            "`alpha0_raw > sink_eps`"},
    {"sink_rate_renorm", MR_MODEL, AG_OF_MEAN, .of = {MR_HEAD, "sink_frac_renorm"},
     .collected = "the head records", .doc = "the same with `alpha0_renorm`"},
    {"kurtosis_mean", MR_MODEL, AG_OF_MEAN, .of = {MR_ACT, "kurtosis"}, .log = 4,
     .collected = "the act records", .doc = "mean of the act records' `kurtosis`"},
    {"kurtosis_max", MR_MODEL, AG_OF_MAX, .of = {MR_ACT, "kurtosis"}, .log = 5,
     .collected = "the act records", .doc = "max of the act records' `kurtosis`"},
    {"max_abs_act", MR_MODEL, AG_OF_MAX, .of = {MR_ACT, "max_abs"}, .log = 6,
     .collected = "the act records",
     .doc = "max of the act records' `max_abs` (Bondarenko's max inf-norm)"},
    {"massive_acts", MR_MODEL, AG_OF_SUM, .of = {MR_ACT, "massive"}, .log = 7, .flags = MF_INT,
     .collected = "the act records",
     .doc = "massive activations in block outputs over all layers and probe sequences"},
    {"massive_ratio_max", MR_MODEL, AG_OF_MAX_DEF, .of = {MR_ACT, "massive_ratio"}, .log = 8,
     .collected = "the act records", .doc = "max of the act records' defined `massive_ratio`"},
    {"grad_norm", MR_MODEL, AG_GRAD_MODEL, .collected = "gradients before clipping",
     .doc = "global gradient norm before clipping (the step's `train_loss` record's); null on a "
            "step without gradients"},
    {"entropy_mean", MR_MODEL, AG_OF_MEAN_FIN, .of = {MR_HEAD, "entropy"}, .log = 3,
     .log_name = "entropy", .collected = "the head records",
     .doc = "mean of the heads' finite `entropy`"},
    {"max_logit", MR_MODEL, AG_OF_MAX, .of = {MR_HEAD, "max_logit"}, .log = 9,
     .collected = "the head records", .doc = "max of the heads' `max_logit`"},
    {"log_z_mean", MR_MODEL, AG_RUN_RATIO, .slot = RN_LOGZ_SUM, .slot2 = RN_LOGZ_N, .log = 10,
     .collected = "the output logits of every probe position",
     .doc = "mean over every probe position of `log Z = ln sum_v exp(logit_v)` over the real "
            "vocabulary"},
    {"log_z_max", MR_MODEL, AG_RUN_MAX, .slot = RN_LOGZ_MAX, .slot2 = RN_LOGZ_N, .log = 11,
     .collected = "the output logits of every probe position", .doc = "max of `log Z`"},
    {"probe_sequences", MR_MODEL, AG_PROBE_N, .flags = MF_INT, .collected = "the probe",
     .doc = "probe sequences"},
    {"probe_len", MR_MODEL, AG_PROBE_T, .flags = MF_INT, .collected = "the probe",
     .doc = "their length `T`"},

    // "grad": one per parameter tensor and layer
    {"norm", MR_GRAD, AG_GRAD_TENSOR, .collected = "gradients before clipping",
     .doc = "L2 norm of the tensor's slice of the gradient before clipping"},

    // "param": one per variant-owned tensor (per named slot of attnp) and layer
    {"mean", MR_PARAM, AG_PARAM_MEAN, .collected = "the current parameters",
     .doc = "mean of the current values"},
    {"min", MR_PARAM, AG_PARAM_MIN, .collected = "the current parameters",
     .doc = "min of the current values"},
    {"max", MR_PARAM, AG_PARAM_MAX, .collected = "the current parameters",
     .doc = "max of the current values"},
};
const int METRIC_NROWS = (int)(sizeof(METRIC_ROWS) / sizeof(METRIC_ROWS[0]));

static const char* const RECORD_NAMES[MR_COUNT] = {"head",  "act",  "route",
                                                   "model", "grad", "param"};
static const char* const LEVEL_NAMES[MR_COUNT] = {"head",  "layer",  "layer",
                                                  "model", "tensor", "tensor"};

const char* metrics_record_name(MetricRecord r) {
    return RECORD_NAMES[r];
}

const char* metrics_level_name(MetricRecord r) {
    return LEVEL_NAMES[r];
}

const char* metrics_agg_doc(MetricAgg a) {
    switch (a) {
    case AG_POOLED:
        return "pooled over the rows of all probe sequences";
    case AG_MAX:
        return "max over the probe sequences";
    case AG_RATIO:
        return "sum over the probe sequences / their row count";
    case AG_MEAN:
        return "mean over the probe sequences";
    case AG_MEAN_NAN0:
        return "mean over the probe sequences (none counts 0)";
    case AG_MEAN_DEFINED:
        return "mean over the probe sequences where defined";
    case AG_SUM:
        return "sum over the probe sequences";
    case AG_SINK_FRAC:
        return "fraction of the probe sequences";
    case AG_GRAD_HEAD:
    case AG_GRAD_MODEL:
    case AG_GRAD_TENSOR:
        return "of the step's gradients";
    case AG_RUN_RATIO:
        return "mean over the probe positions";
    case AG_RUN_MAX:
        return "max over the probe positions";
    case AG_OF_MEAN:
        return "mean over the records";
    case AG_OF_MEAN_FIN:
        return "mean over the records where finite";
    case AG_OF_MAX:
    case AG_OF_MAX_DEF:
        return "max over the records";
    case AG_OF_SUM:
        return "sum over the records";
    case AG_PROBE_N:
    case AG_PROBE_T:
        return "-";
    case AG_PARAM_MEAN:
    case AG_PARAM_MIN:
    case AG_PARAM_MAX:
        return "over the slice's entries";
    case AG_COUNT:
        break;
    }
    return "?";
}

int metrics_seq_slots(void) {
    int k = SQ_HEAD_COUNT;
    for (int i = 0; i < METRIC_NROWS; i++)
        k += METRIC_ROWS[i].record == MR_ACT;
    return k;
}

MetricUnit metrics_seq_unit(int k) {
    return k < SQ_HEAD_COUNT ? MU_HEAD : MU_SITE;
}

int metrics_row_slot(const MetricDef* d) {
    if (d->record != MR_ACT) return d->slot;
    ASSERT(d >= METRIC_ROWS && d < METRIC_ROWS + METRIC_NROWS && d->act);
    int k = SQ_HEAD_COUNT;
    for (const MetricDef* e = METRIC_ROWS; e < d; e++)
        k += e->record == MR_ACT;
    return k;
}

int metrics_row_find(MetricRecord r, const char* name) {
    for (int i = 0; i < METRIC_NROWS; i++)
        if (METRIC_ROWS[i].record == r && METRIC_ROWS[i].name && !strcmp(METRIC_ROWS[i].name, name))
            return i;
    return -1;
}

double metrics_map_value(const MetricDef* d, const AttnAccum* acc, MetricsAlpha0 a0) {
    if (d->agg == AG_POOLED) {
        AttnHeadStats hs;
        metrics_attn_finish(&hs, acc);
        double v;
        memcpy(&v, (const char*)&hs + d->field, sizeof(v));
        return v;
    }
    if (d->agg == AG_MEAN_NAN0 && (d->slot == SQ_A0_RAW || d->slot == SQ_A0_NORM)) {
        const double v = d->slot == SQ_A0_RAW ? a0.raw : a0.renorm;
        return isnan(v) ? 0.0 : v; // one sequence: its alpha0, none counting 0
    }
    return NAN; // not an MF_MAP row
}

void metrics_print_table(FILE* f) {
    fprintf(f, "record\tkey\tlevel\tcollected from\taggregated\tmain.log\tdefinition\n");
    for (int i = 0; i < METRIC_NROWS; i++) {
        const MetricDef* d = &METRIC_ROWS[i];
        const char* log = d->log ? (d->log_name ? d->log_name : d->name) : "-";
        fprintf(f, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", metrics_record_name(d->record),
                d->name ? d->name : "*row_stat_name*", metrics_level_name(d->record), d->collected,
                metrics_agg_doc(d->agg), log, d->doc);
    }
}
