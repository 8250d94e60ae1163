// model/metrics.c: the diagnostics of model/metrics.h: attention-row statistics, activation
// kurtosis and outliers, gradient norms, variant parameters, the probe forward that feeds them
// and the JSONL / main.log records. Definitions and conventions are stated in metrics.h.
//
// Parallel parts (per (b, h) attention statistics, per (site, layer, b) activation statistics)
// write per-item results that are reduced afterwards in a fixed order, so every number is the
// same for any thread count.
#include "model/metrics.h"
#include "common/matmul.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "data/dataloader.h"
#include "optim/clip.h"

// ---------------------------------------------------------------------------------------------
// kernels

double metrics_attn_accum(AttnAccum* acc, const float* A, int T, int Ts) {
    double a0 = 0.0;
    long na0 = 0;
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
    return na0 ? a0 / (double)na0 : NAN;
}

double metrics_sink_rate(const double* alpha0, size_t n, double eps) {
    size_t sinks = 0;
    for (size_t i = 0; i < n; i++)
        sinks += alpha0[i] > eps; // NaN counts as no sink
    return n ? (double)sinks / (double)n : NAN;
}

static void accum_add(AttnAccum* a, const AttnAccum* b) {
    a->ent += b->ent;
    a->ent_norm += b->ent_norm;
    a->sink += b->sink;
    a->maxw += b->maxw;
    a->n_rows += b->n_rows;
    a->n_rows_norm += b->n_rows_norm;
    a->n_rows_sink += b->n_rows_sink;
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
    out->max_weight = ratio(acc->maxw, acc->n_rows);
    out->sparsity = ratio((double)acc->n_zero, acc->n_entries);
}

double metrics_kurtosis(const float* x, size_t n) {
    if (n < 2) return NAN;
    double mu = 0.0;
    for (size_t i = 0; i < n; i++)
        mu += x[i];
    mu /= (double)n;
    double m2 = 0.0, m4 = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)x[i] - mu, d2 = d * d;
        m2 += d2;
        m4 += d2 * d2;
    }
    const double var = m2 / (double)(n - 1); // unbiased, as torch.std
    return (m4 / (double)n) / (var * var + 1e-6);
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

long metrics_massive_count(const float* x, size_t n, float* scratch) {
    long big = 0;
    for (size_t i = 0; i < n; i++)
        big += fabsf(x[i]) > 100.0f;
    if (big == 0) return 0;
    for (size_t i = 0; i < n; i++)
        scratch[i] = fabsf(x[i]);
    const double thr = 1000.0 * (double)select_kth(scratch, n, n / 2);
    long count = 0;
    for (size_t i = 0; i < n; i++) {
        double a = fabs((double)x[i]);
        count += a > 100.0 && a > thr;
    }
    return count;
}

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

// ---------------------------------------------------------------------------------------------
// setup

int metrics_init(Metrics* mt, const GPT2* m, const Config* c, int nthreads, char* err,
                 size_t errcap) {
    memset(mt, 0, sizeof(*mt));
    json_init(&mt->j);
    if (c->metrics_every <= 0 && c->dump_attention_every <= 0) return 0;
    const int use_val = c->val_data[0] != '\0';
    const char* glob = use_val ? c->val_data : c->train_data;
    const int B = c->batch_size;
    const int T = use_val && c->eval_seq_len > 0 ? c->eval_seq_len : c->seq_len;
    DataLoader dl;
    if (dataloader_init(&dl, glob, B, T, use_val ? 0 : c->shuffle, use_val ? 0 : (uint64_t)c->seed,
                        err, errcap))
        return -1;
    int* targets = mallocCheck(sizeof(int) * (size_t)B * T);
    mt->probe = mallocCheck(sizeof(int) * (size_t)B * T);
    dataloader_next(&dl, mt->probe, targets);
    dataloader_free(&dl);
    free(targets);
    for (size_t i = 0; i < (size_t)B * T; i++) {
        if (mt->probe[i] < 0 || mt->probe[i] >= m->cfg.vocab_size) {
            snprintf(err, errcap, "%s: probe batch token id %d is >= vocab_size %d", glob,
                     mt->probe[i], m->cfg.vocab_size);
            free(mt->probe);
            mt->probe = NULL;
            return -1;
        }
    }
    mt->every = c->metrics_every;
    mt->dump_every = c->dump_attention_every;
    mt->sink_eps = c->sink_eps;
    mt->B = B;
    mt->T = T;
    mt->nthreads = nthreads > 0 ? nthreads : 1;
    const int L = m->cfg.n_layer, NH = m->cfg.n_head, C = m->cfg.n_embd;
    size_t rs = 0;
    for (int l = 0; l < L; l++) {
        size_t s = attn_row_scratch(m->la[l].row, T);
        if (s > rs) rs = s;
    }
    mt->tbuf_per = ((size_t)T * T + (size_t)T + rs + 15) & ~(size_t)15;
    mt->tbuf = allocFloats(mt->tbuf_per * (size_t)mt->nthreads);
    mt->massive_buf = allocFloats((size_t)T * C * (size_t)mt->nthreads);
    mt->tensor_norm = callocCheck((size_t)m->nspecs * L, sizeof(double));
    mt->gq = allocFloats((size_t)L * NH);
    mt->gk = allocFloats((size_t)L * NH);
    mt->gv = allocFloats((size_t)L * NH);
    return 0;
}

void metrics_free(Metrics* mt) {
    free(mt->probe);
    free(mt->tbuf);
    free(mt->massive_buf);
    free(mt->tensor_norm);
    free(mt->gq);
    free(mt->gk);
    free(mt->gv);
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
// attention statistics of the probe batch

typedef struct {
    AttnAccum acc;
    double alpha0;
    float max_logit;
    double stat_sum;
    long stat_n;
} HeadItem;

// Statistics of layer l for every (b, h) of the last forward into items[(b*NH + h)].
static void attn_items(HeadItem* items, const Metrics* mt, const GPT2* m, int l) {
    const int B = m->cur_B, T = m->cur_T, NH = m->cfg.n_head, C = m->cfg.n_embd, hs = C / NH;
    const int Ts = T < METRICS_SINK_T ? T : METRICS_SINK_T;
    const LayerAttn* la = &m->la[l];
    const int default_pipe = la->v->layer_forward == NULL;
    const int alibi = default_pipe && m->cfg.pos_encoding == ATTN_POS_ALIBI;
    const int want_stat = default_pipe && la->row->row_stat != NULL;
    const float* qkv = m->qkv + (size_t)l * B * T * 3 * C;
    const float* att = m->att + (size_t)l * B * NH * T * T;
    const float* rowp =
        la->row->params_per_head > 0 ? gpt2_tensor(m, m->params, m->attnp_spec, l) : NULL;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(static) num_threads(mt->nthreads)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            HeadItem* it = &items[(size_t)b * NH + h];
            memset(it, 0, sizeof(*it));
            const float* A = att + ((size_t)b * NH + h) * T * T;
            it->alpha0 = metrics_attn_accum(&it->acc, A, T, Ts);
            // scores s = q.k / sqrt(hs) (+ ALiBi), as the row map saw them
            float* S = mt->tbuf + (size_t)omp_get_thread_num() * mt->tbuf_per;
            float* key_sq = S + (size_t)T * T;
            float* scratch = key_sq + T;
            const float* q = qkv + (size_t)b * T * 3 * C + (size_t)h * hs;
            const float* k = q + C;
            mm_gemm(0, 1, T, T, hs, scale, q, 3 * C, k, 3 * C, 0.0f, S, T);
            // ALiBi slopes 2^(-8(h+1)/NH), the driver's geometric sequence
            const float slope = alibi ? powf(2.0f, -8.0f * (float)(h + 1) / (float)NH) : 0.0f;
            float mx = 0.0f;
            for (int t = 0; t < T; t++) {
                float* srow = S + (size_t)t * T;
                for (int j = 0; j <= t; j++) {
                    if (alibi) srow[j] -= slope * (float)(t - j);
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
}

// ---------------------------------------------------------------------------------------------
// activation statistics of the probe batch

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

typedef struct {
    double kurt;
    float max_abs;
    long massive;
} ActItem;

// items[(site*L + l)*B + b] for sites 0..4; ln_f at [(5*L)*B + b].
static void act_items(ActItem* items, const Metrics* mt, const GPT2* m) {
    const int B = m->cur_B, T = m->cur_T, C = m->cfg.n_embd, L = m->cfg.n_layer;
    const size_t TC = (size_t)T * C;
    const int n = (5 * L + 1) * B;
#pragma omp parallel for schedule(dynamic, 1) num_threads(mt->nthreads)
    for (int i = 0; i < n; i++) {
        int b = i % B, sl = i / B, site = sl < 5 * L ? sl / L : 5, l = sl < 5 * L ? sl % L : 0;
        const float* x = site_base(m, site, l) + (size_t)b * TC;
        items[i].kurt = metrics_kurtosis(x, TC);
        items[i].max_abs = metrics_max_abs(x, TC);
        items[i].massive =
            site == 4
                ? metrics_massive_count(x, TC, mt->massive_buf + (size_t)omp_get_thread_num() * TC)
                : 0;
    }
}

// ---------------------------------------------------------------------------------------------
// records

static void record_head(JsonBuf* j, long step, const char* kind) {
    json_begin(j);
    json_int(j, "step", step);
    json_str(j, "kind", kind);
}

static void write_records(Metrics* mt, const GPT2* m, long step, FILE* jsonl, FILE* log) {
    const int L = m->cfg.n_layer, NH = m->cfg.n_head, B = m->cur_B;
    JsonBuf* j = &mt->j;
    HeadItem* items = mallocCheck(sizeof(HeadItem) * (size_t)B * NH);
    double* alpha0 = mallocCheck(sizeof(double) * (size_t)L * B * NH); // (l, h, b)
    double ent_sum = 0.0, max_logit = 0.0;
    long ent_n = 0;
    for (int l = 0; l < L; l++) {
        attn_items(items, mt, m, l);
        const AttnVariant* row = m->la[l].row;
        for (int h = 0; h < NH; h++) {
            AttnAccum acc = {0};
            float ml = 0.0f;
            double a0 = 0.0, ssum = 0.0;
            long sn = 0;
            for (int b = 0; b < B; b++) { // fixed order over b
                const HeadItem* it = &items[(size_t)b * NH + h];
                accum_add(&acc, &it->acc);
                if (it->max_logit > ml || isnan(it->max_logit)) ml = it->max_logit;
                a0 += isnan(it->alpha0) ? 0.0 : it->alpha0;
                alpha0[((size_t)l * NH + h) * B + b] = it->alpha0;
                ssum += it->stat_sum;
                sn += it->stat_n;
            }
            AttnHeadStats hs;
            metrics_attn_finish(&hs, &acc);
            if (isfinite(hs.entropy)) {
                ent_sum += hs.entropy;
                ent_n++;
            }
            if (ml > max_logit || isnan(ml)) max_logit = ml;
            record_head(j, step, "head");
            json_int(j, "layer", l);
            json_int(j, "head", h);
            json_num(j, "entropy", hs.entropy);
            json_num(j, "entropy_norm", hs.entropy_norm);
            json_num(j, "sink_mass", hs.sink_mass);
            json_num(j, "max_weight", hs.max_weight);
            json_num(j, "max_logit", ml);
            json_num(j, "sparsity", hs.sparsity);
            if (mt->have_grads) {
                json_num(j, "grad_norm_q", mt->gq[(size_t)l * NH + h]);
                json_num(j, "grad_norm_k", mt->gk[(size_t)l * NH + h]);
                json_num(j, "grad_norm_v", mt->gv[(size_t)l * NH + h]);
            } else {
                json_null(j, "grad_norm_q");
                json_null(j, "grad_norm_k");
                json_null(j, "grad_norm_v");
            }
            json_num(j, "alpha0", a0 / B);
            if (row->row_stat && row->row_stat_name && m->la[l].v->layer_forward == NULL)
                json_num(j, row->row_stat_name, sn ? ssum / (double)sn : NAN);
            json_end(j);
            json_write_line(j, jsonl);
        }
    }
    free(items);
    // fraction of (layer, head) pairs that are sinks, averaged over the probe sequences
    const double sink_rate = metrics_sink_rate(alpha0, (size_t)L * NH * B, mt->sink_eps);
    free(alpha0);

    // activations: per (site, layer) means over the probe sequences
    ActItem* ai = mallocCheck(sizeof(ActItem) * (size_t)(5 * L + 1) * B);
    act_items(ai, mt, m);
    double kmean = 0.0, kmax = -INFINITY, amax = 0.0;
    long massive = 0;
    int nmod = 0;
    for (int sl = 0; sl < 5 * L + 1; sl++) {
        double k = 0.0, a = 0.0;
        long mc = 0;
        for (int b = 0; b < B; b++) {
            k += ai[(size_t)sl * B + b].kurt;
            a += ai[(size_t)sl * B + b].max_abs;
            mc += ai[(size_t)sl * B + b].massive;
        }
        k /= B;
        a /= B;
        kmean += k;
        if (k > kmax || isnan(k)) kmax = k;
        if (a > amax || isnan(a)) amax = a;
        massive += mc;
        nmod++;
        const int site = sl < 5 * L ? sl / L : 5, l = sl < 5 * L ? sl % L : -1;
        record_head(j, step, "act");
        if (l >= 0) json_int(j, "layer", l);
        json_str(j, "site", SITE_NAMES[site]);
        json_num(j, "kurtosis", k);
        json_num(j, "max_abs", a);
        if (site == 4) json_int(j, "massive", mc);
        json_end(j);
        json_write_line(j, jsonl);
    }
    free(ai);
    kmean /= nmod;
    const double ent_mean = ent_n ? ent_sum / ent_n : NAN;

    record_head(j, step, "model");
    json_num(j, "sink_rate", sink_rate);
    json_num(j, "kurtosis_mean", kmean);
    json_num(j, "kurtosis_max", kmax);
    json_num(j, "max_abs_act", amax);
    json_int(j, "massive_acts", massive);
    if (mt->have_grads)
        json_num(j, "grad_norm", mt->grad_norm);
    else
        json_null(j, "grad_norm");
    json_num(j, "entropy_mean", ent_mean);
    json_num(j, "max_logit", max_logit);
    json_end(j);
    json_write_line(j, jsonl);

    // gradient norms per tensor (per layer for stacked tensors)
    if (mt->have_grads) {
        for (int i = 0; i < m->nspecs; i++) {
            const ParamSpec* s = &m->specs[i];
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

    // variant-owned parameters: attnp per named slot and layer; other tensors per layer
    for (int i = 0; i < m->nspecs; i++) {
        const ParamSpec* s = &m->specs[i];
        if (!s->variant_owned) continue;
        for (int l = 0; l < (s->stacked ? L : 1); l++) {
            const float* p = gpt2_tensor(m, m->params, i, l);
            int nslots = 1, stride = 0;
            size_t count = s->stacked ? s->size / s->shape[0] : s->size;
            const AttnVariant* row = m->la[l].row;
            if (i == m->attnp_spec) {
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
                if (i == m->attnp_spec) {
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

    if (log) { // llm.c-style headline lines
        fprintf(log, "s:%ld sink_rate:%f\n", step, sink_rate);
        fprintf(log, "s:%ld entropy:%f\n", step, ent_mean);
        fprintf(log, "s:%ld kurtosis_mean:%f\n", step, kmean);
        fprintf(log, "s:%ld kurtosis_max:%f\n", step, kmax);
        fprintf(log, "s:%ld max_abs_act:%f\n", step, amax);
        fprintf(log, "s:%ld massive_acts:%ld\n", step, massive);
        fprintf(log, "s:%ld max_logit:%f\n", step, max_logit);
        fflush(log);
    }
}

int metrics_probe(Metrics* mt, GPT2* m, long step, int records, int dump, const Tokenizer* tok,
                  const char* out_dir, FILE* jsonl, FILE* log, char* err, size_t errcap) {
    // probe forward in evaluation mode; it overwrites only activations the next step recomputes
    const long saved = m->step;
    m->step = -1;
    gpt2_forward(m, mt->probe, NULL, mt->B, mt->T);
    m->step = saved;
    if (records && jsonl) write_records(mt, m, step, jsonl, log);
    mt->have_grads = 0;
    if (!dump) return 0;
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
