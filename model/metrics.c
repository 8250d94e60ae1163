// model/metrics.c: the diagnostics of a run (model/metrics.h): the probe forward over the probe
// sequences, the statistics it feeds (attention rows raw and renormalised, per-head output
// kurtosis, activation kurtosis, outliers and massive activations, gradient norms, variant
// parameters) and the JSONL / main.log records. The kernels are in model/metrics_kernels.c;
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
#include "model/residual.h"

// ---------------------------------------------------------------------------------------------
// setup

typedef struct {
    AttnAccum acc;
    MetricsAlpha0 alpha0;
    double kurt; // of this head's attention output
    float max_logit;
    double stat_sum;
    long stat_n;
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
    mt->massive_buf = allocFloats((size_t)T * C * (size_t)mt->nthreads);
    mt->tensor_norm = callocCheck((size_t)m->nspecs * L, sizeof(double));
    mt->gq = allocFloats((size_t)L * NH);
    mt->gk = allocFloats((size_t)L * NH);
    mt->gv = allocFloats((size_t)L * NH);
    const size_t LH = (size_t)L * NH, NA = (size_t)(5 * L + 1) * n;
    mt->acc = callocCheck(LH, sizeof(AttnAccum));
    mt->max_logit = allocFloats(LH);
    mt->logz = allocFloats((size_t)mt->chunk * T);
    mt->stat_sum = callocCheck(LH, sizeof(double));
    mt->stat_n = callocCheck(LH, sizeof(long));
    mt->a0_raw = callocCheck(LH * n, sizeof(double));
    mt->a0_norm = callocCheck(LH * n, sizeof(double));
    mt->head_kurt = callocCheck(LH * n, sizeof(double));
    mt->act_kurt = callocCheck(NA, sizeof(double));
    mt->act_ratio = callocCheck(NA, sizeof(double));
    mt->act_max = allocFloats(NA);
    mt->act_massive = callocCheck(NA, sizeof(long));
    mt->items = callocCheck((size_t)m->B * NH, sizeof(HeadItem));
    return 0;
}

void metrics_free(Metrics* mt) {
    void* bufs[] = {mt->probe,     mt->tbuf,    mt->massive_buf, mt->tensor_norm, mt->gq,
                    mt->gk,        mt->gv,      mt->acc,         mt->max_logit,   mt->stat_sum,
                    mt->stat_n,    mt->a0_raw,  mt->a0_norm,     mt->head_kurt,   mt->act_kurt,
                    mt->act_ratio, mt->act_max, mt->act_massive, mt->items,       mt->logz};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        free(bufs[i]);
    json_free(&mt->j);
    memset(mt, 0, sizeof(*mt));
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
            mt->tensor_norm[(size_t)i * L + l] =
                sqrt(grad_sumsq(m->grads + s->offset + (size_t)l * per, per));
    }
    for (int l = 0; l < L; l++)
        metrics_head_grad_norms(mt->gq + (size_t)l * NH, mt->gk + (size_t)l * NH,
                                mt->gv + (size_t)l * NH, gpt2_tensor(m, m->grads, P_QKVW, l),
                                gpt2_tensor(m, m->grads, P_QKVB, l), C, NH);
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
            it->alpha0 = metrics_attn_accum(&it->acc, A, T, Ts);
            // this head's channels of the attention output (before c_proj): T x hs values
            it->kurt = metrics_kurtosis_2d(atty + (size_t)b * T * C + (size_t)h * hs, (size_t)T,
                                           (size_t)hs, (size_t)C);
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
            it->max_logit = mx;
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
                        it->stat_sum += v;
                        it->stat_n++;
                    }
                }
            }
        }
    }
    free(fire);
}

// ---------------------------------------------------------------------------------------------
// activation statistics of the last forward

static const char* const SITE_NAMES[METRICS_NSITES] = {"ln_1", "attn",  "ln_2",
                                                       "mlp",  "block", "ln_f"};

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

// ln_2 and the MLP output exist only in blocks with an MLP.
static int site_present(const GPT2* m, int site) {
    return m->cfg.mlp || (site != 2 && site != 3);
}

// Entry [(site*L + l)*nseq + b0 + b] for sites 0..4; ln_f at [(5*L)*nseq + b0 + b].
static void act_items(Metrics* mt, const GPT2* m, int b0) {
    const int B = m->cur_B, T = m->cur_T, C = m->cfg.n_embd, L = m->cfg.n_layer;
    const size_t TC = (size_t)T * C;
    const int n = (5 * L + 1) * B;
#pragma omp parallel for schedule(dynamic, 1) num_threads(mt->nthreads)
    for (int i = 0; i < n; i++) {
        int b = i % B, sl = i / B, site = sl < 5 * L ? sl / L : 5, l = sl < 5 * L ? sl % L : 0;
        const size_t o = (size_t)sl * mt->nseq + b0 + b;
        if (!site_present(m, site)) continue;
        const float* x = site_base(m, site, l) + (size_t)b * TC;
        mt->act_kurt[o] = metrics_kurtosis(x, TC);
        mt->act_max[o] = metrics_max_abs(x, TC);
        mt->act_ratio[o] = metrics_massive(
            x, TC, mt->massive_buf + (size_t)omp_get_thread_num() * TC, &mt->act_massive[o]);
        if (site != 4) mt->act_massive[o] = 0; // counted on block outputs only
    }
}

void metrics_collect(Metrics* mt, const GPT2* m, int b0) {
    const int L = m->cfg.n_layer, NH = m->cfg.n_head, B = m->cur_B;
    ASSERT(b0 >= 0 && b0 + B <= mt->nseq && B <= m->B && m->cur_T == mt->T);
    const size_t LH = (size_t)L * NH;
    if (b0 == 0) { // a new metrics step
        memset(mt->acc, 0, sizeof(AttnAccum) * LH);
        memset(mt->stat_sum, 0, sizeof(double) * LH);
        memset(mt->stat_n, 0, sizeof(long) * LH);
        for (size_t i = 0; i < LH; i++)
            mt->max_logit[i] = 0.0f;
        mt->collected = 0;
        mt->logz_sum = 0.0;
        mt->logz_max = -INFINITY;
        mt->logz_n = 0;
        memset(mt->route_sum, 0, sizeof(mt->route_sum));
        memset(mt->route_n, 0, sizeof(mt->route_n));
    }
    ASSERT(b0 == mt->collected);       // sequences arrive in order: the sums keep a fixed order
    for (int s = 0; s <= 2 * L; s++) { // D11: routing weights of this chunk's forward
        double sum;
        long n;
        resid_max_weight(m->resid, s, &sum, &n);
        mt->route_sum[s] += sum;
        mt->route_n[s] += n;
    }
    HeadItem* items = mt->items;
    for (int l = 0; l < L; l++) {
        attn_items(items, mt, m, l);
        for (int h = 0; h < NH; h++) {
            const size_t lh = (size_t)l * NH + h;
            for (int b = 0; b < B; b++) { // fixed order over the sequences
                const HeadItem* it = &items[(size_t)b * NH + h];
                metrics_accum_add(&mt->acc[lh], &it->acc);
                if (it->max_logit > mt->max_logit[lh] || isnan(it->max_logit))
                    mt->max_logit[lh] = it->max_logit;
                mt->a0_raw[lh * mt->nseq + b0 + b] = it->alpha0.raw;
                mt->a0_norm[lh * mt->nseq + b0 + b] = it->alpha0.renorm;
                mt->head_kurt[lh * mt->nseq + b0 + b] = it->kurt;
                mt->stat_sum[lh] += it->stat_sum;
                mt->stat_n[lh] += it->stat_n;
            }
        }
    }
    act_items(mt, m, b0);
    // log Z of every position, as the training loss computes it (crossentropy_forward's lse over
    // the real vocabulary), summed in position order
    const int BT = B * m->cur_T;
    crossentropy_forward(NULL, mt->logz, m->logits, NULL, BT, m->cfg.vocab_size,
                         m->cfg.padded_vocab);
    for (int i = 0; i < BT; i++) {
        const double z = mt->logz[i];
        mt->logz_sum += z;
        if (z > mt->logz_max || isnan(z)) mt->logz_max = z;
    }
    mt->logz_n += BT;
    mt->collected = b0 + B;
}

// ---------------------------------------------------------------------------------------------
// records

static void record_head(JsonBuf* j, long step, const char* kind) {
    json_begin(j);
    json_int(j, "step", step);
    json_str(j, "kind", kind);
}

// Mean of v[0..n) (NaN entries count 0, as "no sink" / no statistic), and the NaN-skipping
// mean for kurtosis-like statistics.
static double mean_nan0(const double* v, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += isnan(v[i]) ? 0.0 : v[i];
    return s / n;
}

// Mean over the entries that are not NaN (NaN if none): for the massive-activation ratio, which
// is undefined on an all-zero tensor.
static double mean_defined(const double* v, int n) {
    double s = 0.0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(v[i])) continue;
        s += v[i];
        k++;
    }
    return k ? s / k : NAN;
}

static double mean_plain(const double* v, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += v[i];
    return s / n;
}

void metrics_write(Metrics* mt, const GPT2* m, long step, FILE* jsonl, FILE* log) {
    const int L = m->cfg.n_layer, NH = m->cfg.n_head, n = mt->collected;
    ASSERT(n >= 1);
    const double eps = mt->sink_eps;
    JsonBuf* j = &mt->j;
    double ent_sum = 0.0, max_logit = 0.0;
    long ent_n = 0;
    for (int l = 0; l < L; l++) {
        const AttnVariant* row = m->la[l].row;
        for (int h = 0; h < NH; h++) {
            const size_t lh = (size_t)l * NH + h;
            const double* araw = mt->a0_raw + lh * mt->nseq;
            const double* anorm = mt->a0_norm + lh * mt->nseq;
            AttnHeadStats hs;
            metrics_attn_finish(&hs, &mt->acc[lh]);
            if (isfinite(hs.entropy)) {
                ent_sum += hs.entropy;
                ent_n++;
            }
            const float ml = mt->max_logit[lh];
            if (ml > max_logit || isnan(ml)) max_logit = ml;
            record_head(j, step, "head");
            json_int(j, "layer", l);
            json_int(j, "head", h);
            json_num(j, "entropy", hs.entropy);
            json_num(j, "entropy_norm", hs.entropy_norm);
            json_num(j, "sink_mass", hs.sink_mass);
            json_num(j, "sink_mass_raw", hs.sink_mass_raw);
            json_num(j, "max_weight", hs.max_weight);
            json_num(j, "max_logit", ml);
            json_num(j, "sparsity", hs.sparsity);
            if (mt->have_grads) {
                json_num(j, "grad_norm_q", mt->gq[lh]);
                json_num(j, "grad_norm_k", mt->gk[lh]);
                json_num(j, "grad_norm_v", mt->gv[lh]);
            } else {
                json_null(j, "grad_norm_q");
                json_null(j, "grad_norm_k");
                json_null(j, "grad_norm_v");
            }
            const double a0n = mean_nan0(anorm, n);
            json_num(j, "alpha0", a0n); // = alpha0_renorm (kept for existing readers)
            json_num(j, "alpha0_raw", mean_nan0(araw, n));
            json_num(j, "alpha0_renorm", a0n);
            json_num(j, "sink_frac_raw", metrics_sink_rate(araw, (size_t)n, eps));
            json_num(j, "sink_frac_renorm", metrics_sink_rate(anorm, (size_t)n, eps));
            json_num(j, "kurtosis", mean_plain(mt->head_kurt + lh * mt->nseq, n));
            if (row->row_stat && row->row_stat_name && m->la[l].v->layer_forward == NULL)
                json_num(j, row->row_stat_name,
                         mt->stat_n[lh] ? mt->stat_sum[lh] / (double)mt->stat_n[lh] : NAN);
            json_end(j);
            json_write_line(j, jsonl);
        }
    }
    // fraction of (layer, head) pairs that are sinks, averaged over the probe sequences; the
    // arrays hold (l, h, sequence) with nseq slots per head of which n are filled
    double sr_raw = 0.0, sr_norm = 0.0;
    for (size_t lh = 0; lh < (size_t)L * NH; lh++) {
        sr_raw += metrics_sink_rate(mt->a0_raw + lh * mt->nseq, (size_t)n, eps);
        sr_norm += metrics_sink_rate(mt->a0_norm + lh * mt->nseq, (size_t)n, eps);
    }
    sr_raw /= (double)L * NH;
    sr_norm /= (double)L * NH;

    // activations: per (site, layer) means over the probe sequences
    double kmean = 0.0, kmax = -INFINITY, amax = 0.0, rmax = NAN;
    long massive = 0;
    int nmod = 0;
    for (int sl = 0; sl < 5 * L + 1; sl++) {
        const size_t o = (size_t)sl * mt->nseq;
        if (!site_present(m, sl < 5 * L ? sl / L : 5)) continue;
        double a = 0.0;
        long mc = 0;
        for (int b = 0; b < n; b++) {
            a += mt->act_max[o + b];
            mc += mt->act_massive[o + b];
        }
        const double k = mean_plain(mt->act_kurt + o, n), r = mean_defined(mt->act_ratio + o, n);
        a /= n;
        kmean += k;
        if (k > kmax || isnan(k)) kmax = k;
        if (a > amax || isnan(a)) amax = a;
        if (!isnan(r) && (isnan(rmax) || r > rmax)) rmax = r; // over the defined ratios
        massive += mc;
        nmod++;
        const int site = sl < 5 * L ? sl / L : 5, l = sl < 5 * L ? sl % L : -1;
        record_head(j, step, "act");
        if (l >= 0) json_int(j, "layer", l);
        json_str(j, "site", SITE_NAMES[site]);
        json_num(j, "kurtosis", k);
        json_num(j, "max_abs", a);
        json_num(j, "massive_ratio", r);
        if (site == 4) json_int(j, "massive", mc);
        json_end(j);
        json_write_line(j, jsonl);
    }
    kmean /= nmod;
    const double ent_mean = ent_n ? ent_sum / ent_n : NAN;

    // D11: depth-routing contrast per sublayer (only the sublayers that route)
    for (int s = 0; s <= 2 * L; s++) {
        if (!mt->route_n[s]) continue;
        static const char* const SUB[] = {"attn", "mlp", "ln_f"};
        record_head(j, step, "route");
        if (s < 2 * L) json_int(j, "layer", s / 2);
        json_str(j, "sublayer", SUB[s < 2 * L ? s % 2 : 2]);
        json_str(j, "residual", resid_name(m->cfg.residual));
        json_int(j, "sources", resid_nsrc(m->cfg.residual, m->cfg.n_layer, s));
        json_num(j, "max_weight", mt->route_sum[s] / (double)mt->route_n[s]);
        json_end(j);
        json_write_line(j, jsonl);
    }

    record_head(j, step, "model");
    json_num(j, "sink_rate", sr_norm); // = sink_rate_renorm (kept for existing readers)
    json_num(j, "sink_rate_raw", sr_raw);
    json_num(j, "sink_rate_renorm", sr_norm);
    json_num(j, "kurtosis_mean", kmean);
    json_num(j, "kurtosis_max", kmax);
    json_num(j, "max_abs_act", amax);
    json_int(j, "massive_acts", massive);
    json_num(j, "massive_ratio_max", rmax);
    if (mt->have_grads)
        json_num(j, "grad_norm", mt->grad_norm);
    else
        json_null(j, "grad_norm");
    json_num(j, "entropy_mean", ent_mean);
    json_num(j, "max_logit", max_logit);
    const double lzm = mt->logz_n ? mt->logz_sum / (double)mt->logz_n : NAN;
    json_num(j, "log_z_mean", lzm);
    json_num(j, "log_z_max", mt->logz_n ? mt->logz_max : NAN);
    json_int(j, "probe_sequences", n);
    json_int(j, "probe_len", mt->T);
    json_end(j);
    json_write_line(j, jsonl);

    // gradient norms per tensor (per layer for stacked tensors)
    if (mt->have_grads) {
        for (int i = 0; i < m->nspecs; i++) {
            const ParamSpec* s = &m->specs[i];
            if (!s->size) continue; // the MLP tensors of an attention-only model
            for (int l = 0; l < (s->stacked ? L : 1); l++) {
                record_head(j, step, "grad");
                json_str(j, "tensor", s->name);
                if (s->stacked) json_int(j, "layer", l);
                json_num(j, "norm", mt->tensor_norm[(size_t)i * L + l]);
                json_end(j);
                json_write_line(j, jsonl);
            }
        }
    }

    // variant-owned parameters: attnp per named slot and layer; other tensors per layer; and the
    // qk-norm gains per layer
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
                record_head(j, step, "param");
                json_str(j, "tensor", name);
                if (s->stacked) json_int(j, "layer", l);
                json_num(j, "mean", sum / (double)count);
                json_num(j, "min", mn);
                json_num(j, "max", mx);
                json_end(j);
                json_write_line(j, jsonl);
            }
        }
    }

    if (log) { // headline lines "step N key value" (docs/configuration.md, main.log)
        fprintf(log, "step %ld sink_rate %f\n", step, sr_norm);
        fprintf(log, "step %ld sink_rate_raw %f\n", step, sr_raw);
        fprintf(log, "step %ld entropy %f\n", step, ent_mean);
        fprintf(log, "step %ld kurtosis_mean %f\n", step, kmean);
        fprintf(log, "step %ld kurtosis_max %f\n", step, kmax);
        fprintf(log, "step %ld max_abs_act %f\n", step, amax);
        fprintf(log, "step %ld massive_acts %ld\n", step, massive);
        fprintf(log, "step %ld massive_ratio_max %f\n", step, rmax);
        fprintf(log, "step %ld max_logit %f\n", step, max_logit);
        fprintf(log, "step %ld log_z_mean %f\n", step, lzm);
        fprintf(log, "step %ld log_z_max %f\n", step, mt->logz_max);
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
