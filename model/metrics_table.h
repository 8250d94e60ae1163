// model/metrics_table.h: the diagnostics as a table. One row per statistic that metrics.jsonl
// holds: its key, its record and level (one value per head, per layer / site / sublayer, per
// parameter tensor, or per model), the quantity it is collected from, how that quantity is
// aggregated, whether main.log gets it as a headline line, and its definition. The storage of
// the collected quantities (one allocation), its reset, every record of metrics.jsonl, the
// main.log headlines, the per-head statistics of the attention explorer and the generated table
// in docs/diagnostics.md (`./train --list-metrics`) all come from it.
//
// Adding an activation statistic (an "act" row): one row in model/metrics_table.c with its
// kernel (`.act`, a MetricActFn over one sequence's T*C values at one site; MF_BLOCK: collected
// and written on block outputs only). The row gets its own per-sequence storage (a site slot
// after the head slots, metrics_row_slot), metrics_collect calls its kernel for every (site,
// layer, sequence), and the reduction, the record, the main.log line and the docs follow.
// Adding another statistic: a row, and, when it needs a new collected quantity, a head slot in
// MetricSeqSlot (and the line it->v[SLOT] = ... in attn_items of model/metrics.c) or a slot in
// MetricRunSlot (with its unit and reset in metrics_table.c). tests/test_metrics_table.c checks
// that a real run writes every row and that each act row's values are its own statistic.
#ifndef ATTNLAB_METRICS_TABLE_H
#define ATTNLAB_METRICS_TABLE_H

#include <stdio.h>

#include "model/metrics.h"

// The records of metrics.jsonl that the table describes, in the order a metrics step writes them.
typedef enum { MR_HEAD, MR_ACT, MR_ROUTE, MR_MODEL, MR_GRAD, MR_PARAM, MR_COUNT } MetricRecord;

// Quantities collected per (unit, probe sequence): head units (L*NH, layer-major) and site units
// (5 L + 1: site-major over layers, ln_f last). Reduced at write time over the sequences in
// ascending order, so the numbers do not depend on the probe chunking or the thread count. The
// head slots are named here; each act row has a site slot of its own after them
// (metrics_row_slot), metrics_seq_slots in all.
typedef enum {
    SQ_MAX_LOGIT, // head: max |s| of the sequence
    SQ_STAT_SUM,  // head: sum of the row map's own row statistic over the sequence's rows
    SQ_STAT_N,    // head: rows where that statistic is finite
    SQ_A0_RAW,    // head: alpha0 of the sequence, raw
    SQ_A0_NORM,   // head: alpha0 of the sequence, renormalised
    SQ_HEAD_KURT, // head: kurtosis of the head's attention output
    SQ_HEAD_COUNT // the act rows' site slots follow
} MetricSeqSlot;

// Quantities accumulated over the probe forwards in order (per sublayer, or one per model),
// reset at the start of each metrics step to their table value.
typedef enum {
    RN_ROUTE_SUM, // sublayer: sum over positions of the largest depth-routing weight
    RN_ROUTE_N,   // sublayer: positions
    RN_LOGZ_SUM,  // model: sum of log Z over positions
    RN_LOGZ_MAX,  // model: max of log Z (NaN-sticky)
    RN_LOGZ_N,    // model: positions
    RN_COUNT
} MetricRunSlot;

// The units a quantity or record has one value per.
typedef enum {
    MU_HEAD,     // (layer, head), layer-major
    MU_SITE,     // (site, layer) for the five block sites, site-major, then ln_f: 5 L + 1
    MU_SUBLAYER, // 2 l (attention), 2 l + 1 (MLP) of block l, then ln_f: 2 L + 1
    MU_MODEL,    // one
    MU_TENSOR,   // (parameter tensor, layer): nspecs * L
    MU_COUNT
} MetricUnit;

typedef struct {
    MetricUnit unit;
    double reset; // value at the start of a metrics step
} MetricRunDef;
extern const MetricRunDef METRIC_RUN_SLOTS[RN_COUNT];

// How a row's value is made from the collected quantities.
typedef enum {
    AG_POOLED,       // head: the rows of every sequence pooled (AttnAccum), field of AttnHeadStats
    AG_MAX,          // max over the sequences (NaN-sticky)
    AG_RATIO,        // sum over the sequences of slot / of slot2 (NaN when that is 0)
    AG_MEAN,         // mean over the sequences
    AG_MEAN_NAN0,    // mean over the sequences, NaN counting 0
    AG_MEAN_DEFINED, // mean over the sequences that are not NaN (NaN if none)
    AG_SUM,          // sum over the sequences
    AG_SINK_FRAC,    // fraction of the sequences with slot > sink_eps (NaN: no sink)
    AG_GRAD_HEAD,    // per-head gradient norm (0 q, 1 k, 2 v in field); null without gradients
    AG_GRAD_MODEL,   // the global gradient norm before clipping; null without gradients
    AG_GRAD_TENSOR,  // the gradient norm of one tensor slice
    AG_RUN_RATIO,    // running slot / running slot2 (NaN when slot2 is 0)
    AG_RUN_MAX,      // running slot, NaN when running slot2 is 0
    AG_OF_MEAN,      // model: mean of row `of` over its units
    AG_OF_MEAN_FIN,  // model: mean of row `of` over its units where it is finite (NaN if none)
    AG_OF_MAX,       // model: max of row `of` over its units (NaN-sticky)
    AG_OF_MAX_DEF,   // model: max of row `of` over its units where it is not NaN
    AG_OF_SUM,       // model: sum of row `of` over its units
    AG_PROBE_N,      // probe sequences collected
    AG_PROBE_T,      // probe length
    AG_PARAM_MEAN,   // mean / min / max of one variant parameter slice
    AG_PARAM_MIN,
    AG_PARAM_MAX,
    AG_COUNT
} MetricAgg;

enum {
    MF_INT = 1,       // written as an integer
    MF_BLOCK = 2,     // act: collected and written on block outputs only (0 stored elsewhere)
    MF_ROW_STAT = 4,  // key = the row map's row_stat_name; only where the layer has one
    MF_MAP = 8,       // computed from one attention map too: the explorer's per-head statistics
    MF_PRESENT1 = 16, // the unit is present only where slot2's running count is > 0 (route)
};

// The kernel of an act row: its statistic of one sequence's n = T*C values x at one site.
typedef struct {
    int site;       // 0..5: ln_1, attn, ln_2, mlp, block, ln_f
    float* scratch; // n floats of this thread's own, free to overwrite
} MetricActCtx;
typedef double (*MetricActFn)(const float* x, size_t n, const MetricActCtx* ctx);

typedef struct {
    const char* name;    // key in metrics.jsonl (NULL for MF_ROW_STAT: the variant names it)
    MetricRecord record; // the record it is written in
    MetricAgg agg;       // how it is aggregated
    int slot, slot2;     // MetricSeqSlot / MetricRunSlot it reads (AG_RATIO, AG_RUN_*: slot2);
                         // not for act rows (their slot is metrics_row_slot's)
    MetricActFn act;     // act rows: how the per-sequence value is collected
    int field;           // AG_POOLED: offset in AttnHeadStats; AG_GRAD_HEAD: 0 q, 1 k, 2 v
    struct {
        MetricRecord record;
        const char* name;
    } of;                  // AG_OF_*: the row aggregated over its units
    int log;               // position of its main.log headline line (1, 2, ...), 0 = none
    const char* log_name;  // its key in main.log (NULL: the JSONL key)
    unsigned flags;        // MF_*
    const char* collected; // how it is collected (docs)
    const char* doc;       // definition (docs)
} MetricDef;

extern const MetricDef METRIC_ROWS[];
extern const int METRIC_NROWS;

// Units of u in the run of mt; the values of a slot: (units, nseq) per-sequence, (units) running.
size_t metrics_units(const Metrics* mt, MetricUnit u);
// The per-sequence slots: SQ_HEAD_COUNT head slots, then one site slot per act row (in table
// order); the unit of slot k; the slot row d reads (an act row's own, else d->slot).
int metrics_seq_slots(void);
MetricUnit metrics_seq_unit(int k);
int metrics_row_slot(const MetricDef* d);
static inline double* metrics_seq(const Metrics* mt, int k) {
    return mt->store + mt->seq_off[k];
}
static inline double* metrics_run(const Metrics* mt, MetricRunSlot k) {
    return mt->store + mt->run_off[k];
}

// Whether site (0..5: ln_1, attn, ln_2, mlp, block, ln_f) exists in m's blocks (ln_2 and the
// MLP output only in blocks with an MLP).
int metrics_site_present(const GPT2* m, int site);

// "head", "act", ... (the JSONL "kind"), and the level: "head", "layer", "tensor" or "model".
const char* metrics_record_name(MetricRecord r);
const char* metrics_level_name(MetricRecord r);
const char* metrics_agg_doc(MetricAgg a);

// Index of the row of record r named name, or -1.
int metrics_row_find(MetricRecord r, const char* name);

// The value of an MF_MAP row for one head from one map's accumulators (the explorer): the same
// aggregation as metrics.jsonl's, over that one map as the only sequence.
double metrics_map_value(const MetricDef* d, const AttnAccum* acc, MetricsAlpha0 a0);

// The table as tab-separated lines (record, key, level, collected, aggregated, main.log key,
// definition), for scripts/gen_docs.
void metrics_print_table(FILE* f);

#endif
