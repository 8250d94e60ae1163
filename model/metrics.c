// model/metrics.c: the diagnostics of a run (model/metrics.h): the statistics the probe forward
// over the probe sequences feeds (attention rows raw and renormalised, per-head output kurtosis,
// activation kurtosis, outliers and massive activations, gradient norms, variant parameters). What
// is collected, and where, is set by model/metrics_table.h (an activation statistic is one act
// row with its kernel: act_items calls every act row's kernel); the probe step (metrics_probe) and
// the records are in model/metrics_write.c and the kernels are in model/metrics_kernels.c;
// definitions are stated in metrics.h and docs/diagnostics.md.
//
// Parallel parts (per (b, h) attention statistics, per (site, layer, b) activation statistics)
// write per-item results that are reduced afterwards in a fixed order (sequences ascending), so
// every number is the same for any thread count and any probe chunk size.
#include "model/metrics.h"
#include "common/matmul.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/gradnorm.h"
#include "common/util.h"
#include "model/layers.h"
#include "model/metrics_table.h"
#include "model/residual.h"

// ---------------------------------------------------------------------------------------------
// setup

// The statistics of one (sequence, head) of a layer: the attention rows, and one value per head
// slot of the table (the head slots of MetricSeqSlot).
typedef struct {
    AttnAccum acc;
    double v[SQ_HEAD_COUNT];
} HeadItem;

int metrics_init(Metrics* mt, const GPT2* m, const MetricsSetup* s, char* err, size_t errcap) {
    memset(mt, 0, sizeof(*mt));
    json_init(&mt->j);
    if (s->every <= 0 && s->dump_every <= 0) return 0;
    const int T = s->T, n = s->nseq;
    if (n < 1 || T < 1 || !s->tokens) {
        snprintf(err, errcap, "probe: no probe sequences");
        return -1;
    }
    if (T > m->T || m->B < 1) {
        snprintf(err, errcap, "probe: sequence length %d is longer than the activations (%d)", T,
                 m->T);
        return -1;
    }
    for (size_t i = 0; i < (size_t)n * T; i++) {
        if (s->tokens[i] < 0 || s->tokens[i] >= m->cfg.vocab_size) {
            snprintf(err, errcap, "probe sequence %zu, position %zu: token id %d is not in [0, %d)",
                     i / (size_t)T, i % (size_t)T, s->tokens[i], m->cfg.vocab_size);
            return -1;
        }
    }
    mt->probe = mallocCheck(sizeof(int) * (size_t)n * T);
    memcpy(mt->probe, s->tokens, sizeof(int) * (size_t)n * T);
    mt->every = s->every;
    mt->dump_every = s->dump_every;
    mt->sink_eps = s->sink_eps;
    mt->nseq = n;
    mt->T = T;
    mt->chunk = n < m->B ? n : m->B;
    mt->nthreads = s->nthreads > 0 ? s->nthreads : 1;
    const int L = m->cfg.n_layer, NH = m->cfg.n_head, C = m->cfg.n_embd;
    size_t rs = 0;
    for (int l = 0; l < L; l++) {
        size_t r = attn_row_scratch(m->la[l].row, T);
        if (r > rs) rs = r;
    }
    mt->tbuf_per = ((size_t)T * T + (size_t)T + rs + 15) & ~(size_t)15;
    mt->tbuf = allocFloats(mt->tbuf_per * (size_t)mt->nthreads);
    mt->act_scratch = allocFloats((size_t)T * C * (size_t)mt->nthreads);
    mt->L = L;
    mt->NH = NH;
    mt->nspecs = m->nspecs;
    // the collected quantities, laid out by the table (metrics_table.h): the head slots, then
    // one site slot per act row
    size_t off = 0;
    ASSERT(metrics_seq_slots() <= METRICS_MAX_SLOTS);
    for (int k = 0; k < metrics_seq_slots(); k++) {
        mt->seq_off[k] = off;
        off += metrics_units(mt, metrics_seq_unit(k)) * (size_t)n;
    }
    for (int k = 0; k < RN_COUNT; k++) {
        mt->run_off[k] = off;
        off += metrics_units(mt, METRIC_RUN_SLOTS[k].unit);
    }
    const size_t grad_off = off;
    off += 3 * metrics_units(mt, MU_HEAD) + metrics_units(mt, MU_TENSOR);
    mt->store = callocCheck(off, sizeof(double));
    mt->grad_head = mt->store + grad_off;
    mt->grad_tensor = mt->grad_head + 3 * metrics_units(mt, MU_HEAD);
    mt->acc = callocCheck(metrics_units(mt, MU_HEAD) * (size_t)n, sizeof(AttnAccum));
    mt->logz = allocFloats((size_t)mt->chunk * T);
    mt->items = callocCheck((size_t)m->B * NH, sizeof(HeadItem));
    return 0;
}

void metrics_free(Metrics* mt) {
    void* bufs[] = {mt->probe, mt->tbuf, mt->act_scratch, mt->store, mt->acc, mt->items, mt->logz};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        free(bufs[i]);
    json_free(&mt->j);
    memset(mt, 0, sizeof(*mt));
}

size_t metrics_units(const Metrics* mt, MetricUnit u) {
    switch (u) {
    case MU_HEAD:
        return (size_t)mt->L * mt->NH;
    case MU_SITE:
        return 5 * (size_t)mt->L + 1;
    case MU_SUBLAYER:
        return 2 * (size_t)mt->L + 1;
    case MU_MODEL:
        return 1;
    case MU_TENSOR:
        return (size_t)mt->nspecs * mt->L;
    case MU_COUNT:
        break;
    }
    ASSERT(0);
    return 0;
}

int metrics_due(const Metrics* mt, long step, int last) {
    return mt->every > 0 && (step % mt->every == 0 || last);
}

int metrics_dump_due(const Metrics* mt, long step, int last) {
    return mt->dump_every > 0 && (step % mt->dump_every == 0 || last);
}

// ---------------------------------------------------------------------------------------------
// gradient norms

void metrics_grads(Metrics* mt, const GPT2* m, double global_norm) {
    const int L = m->cfg.n_layer, NH = m->cfg.n_head, C = m->cfg.n_embd;
    for (int i = 0; i < m->nspecs; i++) {
        const ParamSpec* s = &m->specs[i];
        int nl = s->stacked ? L : 1;
        size_t per = s->size / (size_t)nl;
        for (int l = 0; l < nl; l++)
            mt->grad_tensor[(size_t)i * L + l] =
                sqrt(grad_sumsq(m->grads + s->offset + (size_t)l * per, per));
    }
    float* g = allocFloats(3 * (size_t)NH); // q, k, v of one layer
    const size_t LH = (size_t)L * NH;
    for (int l = 0; l < L; l++) {
        metrics_head_grad_norms(g, g + NH, g + 2 * NH, gpt2_tensor(m, m->grads, P_QKVW, l),
                                gpt2_tensor(m, m->grads, P_QKVB, l), C, NH);
        for (int w = 0; w < 3; w++)
            for (int h = 0; h < NH; h++)
                mt->grad_head[w * LH + (size_t)l * NH + h] = g[w * NH + h];
    }
    free(g);
    mt->grad_norm = global_norm;
    mt->have_grads = 1;
}

// ---------------------------------------------------------------------------------------------
// attention statistics of the last forward

// Statistics of layer l for every (b, h) of the last forward into items[(b*NH + h)].
static void attn_items(HeadItem* items, const Metrics* mt, const GPT2* m, int l) {
    const int B = m->cur_B, T = m->cur_T, NH = m->cfg.n_head, C = m->cfg.n_embd, hs = C / NH;
    const int Ts = T < METRICS_SINK_T ? T : METRICS_SINK_T;
    const LayerAttn* la = &m->la[l];
    const int default_pipe = la->v->layer_forward == NULL;
    const int alibi = default_pipe && m->cfg.pos_encoding == ATTN_POS_ALIBI;
    // under fire the row map saw this layer's learned bias table (NH, T, T) on top of q.k
    float* fire = NULL;
    if (default_pipe && m->row_spec[P_FIRE] >= 0) {
        fire = allocFloats((size_t)NH * T * T);
        attn_fire_bias(fire, gpt2_tensor(m, m->params, m->row_spec[P_FIRE], l), NH, T,
                       mt->nthreads);
    }
    const int want_stat = default_pipe && la->row->row_stat != NULL;
    const float* qkv = m->qkv + (size_t)l * B * T * 3 * C;
    const float* att = m->att + (size_t)l * B * NH * T * T;
    const float* atty = m->atty + (size_t)l * B * T * C;
    const float* rowp =
        la->row->params_per_head > 0 ? gpt2_tensor(m, m->params, m->row_spec[P_ATTNP], l) : NULL;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(static) num_threads(mt->nthreads)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            HeadItem* it = &items[(size_t)b * NH + h];
            memset(it, 0, sizeof(*it));
            const float* A = att + ((size_t)b * NH + h) * T * T;
            const MetricsAlpha0 a0 = metrics_attn_accum(&it->acc, A, T, Ts);
            it->v[SQ_A0_RAW] = a0.raw;
            it->v[SQ_A0_NORM] = a0.renorm;
            // this head's channels of the attention output (before c_proj): T x hs values
            it->v[SQ_HEAD_KURT] = metrics_kurtosis_2d(atty + (size_t)b * T * C + (size_t)h * hs,
                                                      (size_t)T, (size_t)hs, (size_t)C);
            // scores s = q.k / sqrt(hs) (+ ALiBi), as the row map saw them
            float* S = mt->tbuf + (size_t)omp_get_thread_num() * mt->tbuf_per;
            float* key_sq = S + (size_t)T * T;
            float* scratch = key_sq + T;
            const float* q = qkv + (size_t)b * T * 3 * C + (size_t)h * hs;
            const float* k = q + C;
            mm_gemm(0, 1, T, T, hs, scale, q, 3 * C, k, 3 * C, 0.0f, S, T);
            // the driver's ALiBi slopes (attention/posenc.h)
            const float slope = alibi ? attn_alibi_slope(h, NH) : 0.0f;
            float mx = 0.0f;
            for (int t = 0; t < T; t++) {
                float* srow = S + (size_t)t * T;
                for (int j = 0; j <= t; j++) {
                    if (alibi) srow[j] -= slope * (float)(t - j);
                    if (fire) srow[j] += fire[((size_t)h * T + t) * T + j];
                    float a = fabsf(srow[j]);
                    if (a > mx || isnan(a)) mx = a;
                }
            }
            it->v[SQ_MAX_LOGIT] = mx;
            if (want_stat) {
                if (la->row->needs_key_sq) {
                    for (int j = 0; j < T; j++) {
                        const float* kj = k + (size_t)j * 3 * C;
                        float s = 0.0f;
                        for (int i = 0; i < hs; i++)
                            s += kj[i] * kj[i];
                        key_sq[j] = s;
                    }
                }
                AttnRowCtx ctx = {.hp = &la->row_hp,
                                  .p = rowp ? rowp + (size_t)h * m->maxP : NULL,
                                  .scratch = scratch,
                                  .key_sq = la->row->needs_key_sq ? key_sq : NULL,
                                  .T = T,
                                  .h = h,
                                  .step = -1,
                                  .seed = m->seed};
                for (int t = 0; t < T; t++) {
                    ctx.t = t;
                    float v = la->row->row_stat(A + (size_t)t * T, S + (size_t)t * T, t + 1, &ctx);
                    if (isfinite(v)) {
                        it->v[SQ_STAT_SUM] += v;
                        it->v[SQ_STAT_N] += 1.0;
                    }
                }
            }
        }
    }
    free(fire);
}

// ---------------------------------------------------------------------------------------------
// activation statistics of the last forward

static const float* site_base(const GPT2* m, int site, int l) {
    const size_t BTC = (size_t)m->cur_B * m->cur_T * m->cfg.n_embd;
    switch (site) {
    case 0:
        return m->ln1 + l * BTC;
    case 1:
        return m->attproj + l * BTC;
    case 2:
        return m->ln2 + l * BTC;
    case 3:
        return m->fcproj + l * BTC;
    case 4:
        return m->residual3 + l * BTC;
    default:
        return m->lnf;
    }
}

int metrics_site_present(const GPT2* m, int site) {
    return m->cfg.mlp || (site != 2 && site != 3);
}

// Every act row's kernel on every (site, layer, sequence) of the last forward: entry
// [(site*L + l)*nseq + b0 + b] of the row's site slot for sites 0..4; ln_f at
// [(5*L)*nseq + b0 + b]. MF_BLOCK rows are collected on block outputs only (0 elsewhere).
static void act_items(Metrics* mt, const GPT2* m, int b0) {
    const int B = m->cur_B, T = m->cur_T, C = m->cfg.n_embd, L = m->cfg.n_layer;
    const size_t TC = (size_t)T * C;
    const int n = (5 * L + 1) * B;
#pragma omp parallel for schedule(dynamic, 1) num_threads(mt->nthreads)
    for (int i = 0; i < n; i++) {
        int b = i % B, sl = i / B, site = sl < 5 * L ? sl / L : 5, l = sl < 5 * L ? sl % L : 0;
        const size_t o = (size_t)sl * mt->nseq + b0 + b;
        if (!metrics_site_present(m, site)) continue;
        const float* x = site_base(m, site, l) + (size_t)b * TC;
        const MetricActCtx ctx = {.site = site,
                                  .scratch = mt->act_scratch + (size_t)omp_get_thread_num() * TC};
        for (int r = 0; r < METRIC_NROWS; r++) {
            const MetricDef* d = &METRIC_ROWS[r];
            if (d->record != MR_ACT) continue;
            const int skip = (d->flags & MF_BLOCK) && site != 4;
            metrics_seq(mt, metrics_row_slot(d))[o] = skip ? 0.0 : d->act(x, TC, &ctx);
        }
    }
}

void metrics_collect(Metrics* mt, const GPT2* m, int b0) {
    const int L = m->cfg.n_layer, NH = m->cfg.n_head, B = m->cur_B;
    ASSERT(b0 >= 0 && b0 + B <= mt->nseq && B <= m->B && m->cur_T == mt->T);
    if (b0 == 0) { // a new metrics step: the running quantities start from their table value
        for (int k = 0; k < RN_COUNT; k++) {
            double* v = metrics_run(mt, (MetricRunSlot)k);
            for (size_t u = 0; u < metrics_units(mt, METRIC_RUN_SLOTS[k].unit); u++)
                v[u] = METRIC_RUN_SLOTS[k].reset;
        }
        mt->collected = 0;
    }
    ASSERT(b0 == mt->collected); // sequences arrive in order: the sums keep a fixed order
    double *route_sum = metrics_run(mt, RN_ROUTE_SUM), *route_n = metrics_run(mt, RN_ROUTE_N);
    for (int s = 0; s <= 2 * L; s++) { // D11: routing weights of this chunk's forward
        double sum;
        long n;
        resid_max_weight(m->resid, s, &sum, &n);
        route_sum[s] += sum;
        route_n[s] += (double)n;
    }
    HeadItem* items = mt->items;
    for (int l = 0; l < L; l++) {
        attn_items(items, mt, m, l);
        for (int h = 0; h < NH; h++) {
            const size_t lh = (size_t)l * NH + h;
            for (int b = 0; b < B; b++) {
                const HeadItem* it = &items[(size_t)b * NH + h];
                const size_t o = lh * mt->nseq + b0 + b;
                mt->acc[o] = it->acc;
                for (int k = 0; k < SQ_HEAD_COUNT; k++)
                    metrics_seq(mt, k)[o] = it->v[k];
            }
        }
    }
    act_items(mt, m, b0);
    // log Z of every position, as the training loss computes it (crossentropy_forward's lse over
    // the real vocabulary), summed in position order
    const int BT = B * m->cur_T;
    crossentropy_forward(NULL, mt->logz, m->logits, NULL, BT, m->cfg.vocab_size,
                         m->cfg.padded_vocab);
    double *lz_sum = metrics_run(mt, RN_LOGZ_SUM), *lz_max = metrics_run(mt, RN_LOGZ_MAX);
    for (int i = 0; i < BT; i++) {
        const double z = mt->logz[i];
        *lz_sum += z;
        if (z > *lz_max || isnan(z)) *lz_max = z;
    }
    *metrics_run(mt, RN_LOGZ_N) += BT;
    mt->collected = b0 + B;
}

// ---------------------------------------------------------------------------------------------
// the probe

void metrics_describe_nonfinite(const GPT2* m, char* out, size_t cap) {
    for (int i = 0; i < m->nspecs; i++) {
        const ParamSpec* s = &m->specs[i];
        size_t k = grad_first_nonfinite(m->grads + s->offset, s->size);
        if (k < s->size) {
            if (s->stacked)
                snprintf(out, cap, "gradient of tensor %s (layer %zu)", s->name,
                         k / (s->size / s->shape[0]));
            else
                snprintf(out, cap, "gradient of tensor %s", s->name);
            return;
        }
    }
    snprintf(out, cap, "the loss (all gradients finite)");
}
