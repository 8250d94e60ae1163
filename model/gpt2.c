// model/gpt2.c: GPT-2 initialisation, activations, forward and backward (the parameter table
// is model/params.c).
//
// Block l (pre-LayerNorm):  x1 = x + attnproj(attention(ln_1(x)));  x2 = x1 + mlp(ln_2(x1))
// with mlp(h) = c_proj(gelu(c_fc(h))); with mlp = 0 the block is attention-only, x2 = x1 (ln_2
// and the MLP tensors keep their place in the table with a layer dimension of 0, and
// residual3 aliases residual2). Final ln_f, tied classifier logits = ln_f(x) @ wte^T
// over the padded vocabulary (padded logits never enter the loss).
// With qk_norm the projection's q and k are normalised in place (attention/qknorm.c) before the
// attention reads them. With z_loss the objective per token adds z_loss (log Z)^2 (its gradient in
// the cross-entropy backward); mean_loss stays the cross-entropy.
// Backward walks the blocks in reverse, keeping one residual-stream gradient `dres` that every
// branch adds into; per-layer gradient scratch is reused across layers.
#include "model/gpt2.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/prof.h"
#include "common/rng.h"
#include "common/util.h"
#include "model/kv_store.h"
#include "model/layers.h"
#include "model/params.h"
#include "model/residual.h"
#include "model/value_residual.h"

// Every model buffer comes from here: allocated and tallied into *kind, or in size-only mode
// only tallied (NULL).
static float* model_floats(GPT2* m, size_t n, double* kind) {
    *kind += (double)util_floats_bytes(n);
    return m->size_only ? NULL : allocFloats(n);
}

void gpt2_build(GPT2* m, const GPT2Config* cfg) {
    m->cfg = *cfg;
    gpt2_add_specs(m); // the parameter table (model/params.c)
    size_t off = 0;
    for (int i = 0; i < m->nspecs; i++) {
        m->specs[i].offset = off;
        off += m->specs[i].size;
    }
    m->num_params = off;
    memset(&m->bytes, 0, sizeof(m->bytes));
    m->params = model_floats(m, off, &m->bytes.params);
    m->grads = model_floats(m, off, &m->bytes.grads);
    m->mean_loss = -1.0f;
    m->step = -1;
}

float* gpt2_tensor(const GPT2* m, const float* base, int spec, int l) {
    const ParamSpec* s = &m->specs[spec];
    size_t off = s->offset;
    if (s->stacked && s->shape[0]) off += (size_t)l * (s->size / s->shape[0]);
    return (float*)base + off;
}

// bf16: the linear layers' inputs are rounded once, into acts_bf16, by their producers in the
// forward, and so are dfch (GELU backward) and the classifier's dlogits (cross-entropy backward,
// into dlogits_bf16); the other output gradients are rounded into the calling thread's buffers
// (common/matmul.h), reserved for the largest, (B T, 3C), so no backward grows them; a layer
// variant with linear layers of its own (boosted: inputs up to (B T, 2C)) rounds its inputs
// into the second buffer.
static void reserve_matmul(GPT2* m) {
    if (!m->B) return; // activations not allocated yet: gpt2_alloc_acts reserves
    const size_t BT = (size_t)m->B * (size_t)m->T, C = (size_t)m->cfg.n_embd, C4 = 4 * C;
    const size_t Vp = (size_t)m->cfg.padded_vocab, L = (size_t)m->cfg.n_layer;
    const size_t LM = m->cfg.mlp ? L : 0, x0 = BT * 3 * C, x1 = BT * 2 * C;
    m->bytes.matmul = (double)mm_linear_reserve_bytes(x0, x1);
    if (!m->size_only) mm_linear_reserve(x0, x1);
    free(m->dlogits_bf16);
    m->dlogits_bf16 = (bf16*)model_floats(m, (BT * Vp + 1) / 2, &m->bytes.matmul);
    // ln1, atty (L B T C), ln2 (LM B T C), fch_gelu (LM B T 4C), lnf (B T C), and the backward's
    // dfch (B T 4C if LM), each 32-aligned
    const size_t n[6] = {L * BT * C,   L * BT * C, LM * BT * C,
                         LM * BT * C4, BT * C,     (LM ? BT : 0) * C4};
    bf16** dst[6] = {&m->ln1_h, &m->atty_h, &m->ln2_h, &m->fch_gelu_h, &m->lnf_h, &m->dfch_h};
    size_t total = 0;
    for (int i = 0; i < 6; i++)
        total += (n[i] + 31) & ~(size_t)31;
    free(m->acts_bf16);
    m->acts_bf16 = (bf16*)model_floats(m, total / 2, &m->bytes.matmul);
    size_t off = 0;
    for (int i = 0; i < 6; i++) {
        *dst[i] = m->acts_bf16 ? m->acts_bf16 + off : NULL;
        off += (n[i] + 31) & ~(size_t)31;
    }
}

// The bf16 copies the forward writes (NULL in fp32, where nothing is rounded).
static bf16* act_h(const GPT2* m, bf16* base, size_t off) {
    return m->precision != MM_FP32 && base ? base + off : NULL;
}

void gpt2_set_precision(GPT2* m, MMPrecision p) {
    m->precision = p;
    if (m->size_only) { // tally only; the process-wide precision stays as it is
        m->bytes.bf16 = p == MM_FP32 ? 0 : (double)util_floats_bytes((m->num_params + 1) / 2);
        m->bytes.matmul = 0;
        if (p != MM_FP32) reserve_matmul(m);
        return;
    }
    mm_set_precision(p);
    if (p == MM_FP32) {
        if (m->params_bf16) mm_bf16_unregister(m->params);
        free(m->params_bf16);
        m->params_bf16 = NULL;
        free(m->dlogits_bf16);
        m->dlogits_bf16 = NULL;
        free(m->acts_bf16);
        m->acts_bf16 = m->ln1_h = m->atty_h = m->ln2_h = m->fch_gelu_h = m->lnf_h = m->dfch_h =
            NULL;
        return;
    }
    if (!m->params_bf16) {
        m->bytes.bf16 = 0;
        m->params_bf16 = (bf16*)model_floats(m, (m->num_params + 1) / 2, &m->bytes.bf16);
    }
    mm_bf16_register(m->params, m->num_params, m->params_bf16);
    m->bf16_stale = 1;
    m->bytes.matmul = 0;
    reserve_matmul(m);
}

void gpt2_params_changed(GPT2* m) {
    m->bf16_stale = 1;
    m->bf16_synced = 0;
}

bf16* gpt2_weight_copy(GPT2* m) {
    return m->params_bf16;
}

void gpt2_params_synced(GPT2* m) {
    if (!m->params_bf16) return;
    m->bf16_stale = 0;
    m->bf16_synced = 1;
}

// Before a forward: bring the bf16 weight copy up to date (one pass over the parameters).
static void refresh_bf16(GPT2* m) {
    if (!m->params_bf16 || !m->bf16_stale) return;
    bf16_from_floats(m->params_bf16, m->params, m->num_params);
    m->bf16_stale = 0;
    m->bf16_refreshes++;
}

// Layer l's slice of tensor i under a per-layer init rule (PINIT_ROWMAP, PINIT_FIRE, PINIT_LAYER).
static void init_layer_slice(GPT2* m, int i, int l, Rng* r) {
    const GPT2Config* c = &m->cfg;
    const LayerAttn* la = &m->la[l];
    float* p = gpt2_tensor(m, m->params, i, l);
    if (m->specs[i].init == PINIT_FIRE) {
        attn_fire_init(p, c->n_head, rng_u64(r));
    } else if (m->specs[i].init == PINIT_ROWMAP) {
        if (la->row->params_per_head <= 0 || !la->row->init_params) return; // zeros
        for (int h = 0; h < c->n_head; h++)
            la->row->init_params(p + (size_t)h * (size_t)m->maxP, &la->row_hp);
    } else { // PINIT_LAYER: a tensor of this layer's variant, or of another (stays 0)
        int k = 0;
        while (k < la->ntensors && la->tensor_spec[k] != i)
            k++;
        if (k == la->ntensors) return;
        AttnTensorSpec ts[ATTN_MAX_TENSORS];
        AttnDims d = {.B = 1,
                      .T = c->block_size,
                      .C = c->n_embd,
                      .NH = c->n_head,
                      .hs = c->n_embd / c->n_head};
        la->v->layer_tensors(ts, &d, &la->hp);
        size_t n = m->specs[i].size / m->specs[i].shape[0];
        for (size_t q = 0; q < n; q++) {
            if (ts[k].init == ATTN_INIT_CONST)
                p[q] = ts[k].init_value;
            else if (ts[k].init == ATTN_INIT_NORMAL)
                p[q] = ts[k].init_value * rng_normal(r);
            else
                p[q] = 0.0f;
        }
    }
}

static int per_layer_init(int init) {
    return init == PINIT_ROWMAP || init == PINIT_FIRE || init == PINIT_LAYER;
}

// One walk over the table in table order, one rule per tensor, normal draws from one stream in
// that order. A run of consecutive tensors with per-layer rules (the attention's: attnp, fire,
// the variant tensors) is filled layer by layer, each layer's slices together.
void gpt2_init(GPT2* m, uint64_t seed) {
    gpt2_params_changed(m);
    Rng r;
    rng_seed(&r, seed);
    const GPT2Config* c = &m->cfg;
    const float std = 0.02f, proj_std = 0.02f / sqrtf(2.0f * (float)c->n_layer);
    memset(m->params, 0, sizeof(float) * m->num_params);
    for (int i = 0; i < m->nspecs;) {
        const ParamSpec* s = &m->specs[i];
        if (per_layer_init(s->init)) {
            int j = i;
            while (j < m->nspecs && per_layer_init(m->specs[j].init))
                j++;
            for (int l = 0; l < c->n_layer; l++)
                for (int k = i; k < j; k++)
                    init_layer_slice(m, k, l, &r);
            i = j;
            continue;
        }
        float* p = m->params + s->offset;
        // real vocabulary rows only; padded rows stay 0
        size_t n = s->vocab_rows ? (size_t)c->vocab_size * (s->size / s->shape[0]) : s->size;
        for (size_t k = 0; k < n; k++) {
            switch (s->init) {
            case PINIT_ONES:
                p[k] = 1.0f;
                break;
            case PINIT_NORMAL:
                p[k] = std * rng_normal(&r);
                break;
            case PINIT_RESID:
                p[k] = proj_std * rng_normal(&r);
                break;
            case PINIT_HALF:
                p[k] = 0.5f;
                break;
            default: // PINIT_ZERO
                break;
            }
        }
        i++;
    }
}

// ---------------------------------------------------------------------------------------------
// activations

void gpt2_alloc_acts(GPT2* m, int B, int T, int nthreads) {
    const size_t L = (size_t)m->cfg.n_layer, C = (size_t)m->cfg.n_embd;
    const size_t NH = (size_t)m->cfg.n_head, Vp = (size_t)m->cfg.padded_vocab;
    const size_t BT = (size_t)B * (size_t)T, LM = m->cfg.mlp ? L : 0;
    const size_t LQ = m->cfg.qk_norm ? L : 0; // layers with qk-norm
    m->B = B;
    m->T = T;
    m->nthreads = nthreads;
    struct {
        float** p;
        size_t n;
    } tab[] = {
        {&m->encoded, BT * C},
        {&m->ln1, L * BT * C},
        {&m->ln1_mean, L * BT},
        {&m->ln1_rstd, L * BT},
        {&m->qkv, L * BT * 3 * C},
        {&m->atty, L * BT * C},
        {&m->att, L * BT * NH * (size_t)T},
        {&m->attproj, L * BT * C},
        {&m->residual2, L * BT * C},
        {&m->ln2, LM * BT * C},
        {&m->ln2_mean, LM * BT},
        {&m->ln2_rstd, LM * BT},
        {&m->fch, LM * BT * 4 * C},
        {&m->fch_gelu, LM * BT * 4 * C},
        {&m->fcproj, LM * BT * C},
        {&m->residual3, LM * BT * C},
        {&m->lnf, BT * C},
        {&m->lnf_mean, BT},
        {&m->lnf_rstd, BT},
        {&m->logits, BT * Vp},
        {&m->lse, BT},
        {&m->losses, BT},
        {&m->dres, BT * C},
        {&m->dln, BT * C},
        {&m->dqkv, BT * 3 * C},
        {&m->datty, BT * C},
        {&m->dfch, (LM ? BT : 0) * 4 * C},
        {&m->dfch_gelu, (LM ? BT : 0) * 4 * C},
        {&m->dlnf, BT * C},
        {&m->qkn_xhat, LQ * BT * 2 * C},
        {&m->qkn_rstd, LQ * BT * 2 * NH},
    };
    size_t ntab = sizeof(tab) / sizeof(tab[0]), total = 0;
    for (size_t i = 0; i < ntab; i++)
        total += (tab[i].n + 15) & ~(size_t)15;
    m->bytes.acts = m->bytes.caches = m->bytes.workspace = 0;
    for (size_t i = 0; i < ntab; i++) { // the two parts memory_check names
        if (tab[i].p == &m->att) m->bytes.attn = 4.0 * (double)tab[i].n;
        if (tab[i].p == &m->logits) m->bytes.logits = 4.0 * (double)tab[i].n;
    }
    m->acts = model_floats(m, total, &m->bytes.acts);
    size_t off = 0;
    for (size_t i = 0; i < ntab && m->acts; i++) {
        *tab[i].p = m->acts + off;
        off += (tab[i].n + 15) & ~(size_t)15;
    }
    if (!m->cfg.mlp) m->residual3 = m->residual2; // attention-only: x2 = x1
    if (!LQ) m->qkn_xhat = m->qkn_rstd = NULL;
    size_t row_scratch = 0, extra = 0;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        LayerAttn* la = &m->la[l];
        AttnDims d = {.B = B, .T = T, .C = (int)C, .NH = (int)NH, .hs = (int)(C / NH)};
        size_t cf = la->v->layer_cache_floats ? la->v->layer_cache_floats(&d, &la->hp) : 0;
        // under rope the layer's rotated q, k (B,T,2C) come first, then the variant's cache
        size_t qkn = attn_pos_rotates(m->cfg.pos_encoding) ? BT * 2 * C : 0;
        m->attn_cache[l] = cf + qkn ? model_floats(m, cf + qkn, &m->bytes.caches) : NULL;
        size_t rs = attn_row_scratch(la->row, T);
        if (rs > row_scratch) row_scratch = rs;
        rs = attn_row_scratch(la->own.row, T); // a composed variant's own row map
        if (rs > row_scratch) row_scratch = rs;
        // per-thread scratch the layer hooks reserve, reserved here once for the largest
        size_t xs = la->v->layer_scratch_floats ? la->v->layer_scratch_floats(&d, &la->hp) : 0;
        if (xs > extra) extra = xs;
    }
    m->bytes.workspace = (double)attn_workspace_bytes(B, T, (int)NH, (int)C, nthreads, row_scratch,
                                                      m->maxP, m->cfg.pos_encoding) +
                         (double)attn_workspace_reserve_bytes(nthreads, extra);
    if (!m->size_only) {
        m->ws = attn_workspace_new(B, T, (int)NH, nthreads, row_scratch, m->maxP);
        attn_workspace_prepare_pos(m->ws, m->cfg.pos_encoding, (int)C);
        if (extra) attn_workspace_reserve(m->ws, extra);
    }
    if (m->precision != MM_FP32) reserve_matmul(m);
    const GPT2Config* g = &m->cfg;
    m->bytes.acts += resid_bytes(g->residual, g->n_layer, g->n_embd, B, T) +
                     vres_bytes(g->value_residual, g->n_layer, g->n_embd, B, T);
    if (!m->size_only) {
        m->resid = resid_alloc(g->residual, g->n_layer, g->n_embd, B, T);
        m->vres = vres_alloc(g->value_residual, g->n_layer, g->n_embd, B, T);
    }
}

void gpt2_free(GPT2* m) {
    if (m->params_bf16) mm_bf16_unregister(m->params);
    free(m->params_bf16);
    free(m->dlogits_bf16);
    free(m->acts_bf16);
    free(m->params);
    free(m->grads);
    free(m->acts);
    for (int l = 0; l < m->cfg.n_layer; l++)
        free(m->attn_cache[l]);
    attn_workspace_free(m->ws);
    resid_free(m->resid);
    vres_free(m->vres);
    memset(m, 0, sizeof(*m));
}

// ---------------------------------------------------------------------------------------------
// forward / backward

static AttnLayer make_layer(GPT2* m, int l, int B, int T) {
    const int C = m->cfg.n_embd, NH = m->cfg.n_head;
    const size_t BTC = (size_t)B * T * C;
    LayerAttn* la = &m->la[l];
    AttnLayer L = {.v = la->v,
                   .row = la->row,
                   .hp = &la->hp,
                   .row_hp = &la->row_hp,
                   .own = &la->own,
                   .d = {.B = B, .T = T, .C = C, .NH = NH, .hs = C / NH},
                   .layer = l,
                   .step = m->step,
                   .seed = m->seed,
                   .pos_encoding = m->cfg.pos_encoding,
                   .qk_norm = m->cfg.qk_norm,
                   .x = m->ln1 + l * BTC,
                   .qkv = m->qkv + l * 3 * BTC,
                   .out = m->atty + l * BTC,
                   .att = m->att + (size_t)l * B * NH * T * T,
                   .ws = m->ws};
    if (attn_pos_rotates(m->cfg.pos_encoding)) {
        L.qk_pos = m->attn_cache[l];
        L.cache = m->attn_cache[l] + (size_t)m->B * m->T * 2 * C;
    } else {
        L.cache = m->attn_cache[l];
    }
    if (la->row->params_per_head > 0) {
        // attnp is (L, NH, maxP): heads are maxP apart whatever this layer's row map uses
        L.rowp_stride = m->maxP;
        L.rowp = gpt2_tensor(m, m->params, m->row_spec[P_ATTNP], l);
        L.drowp = gpt2_tensor(m, m->grads, m->row_spec[P_ATTNP], l);
    }
    if (m->row_spec[P_FIRE] >= 0) {
        L.posp = gpt2_tensor(m, m->params, m->row_spec[P_FIRE], l);
        L.dposp = gpt2_tensor(m, m->grads, m->row_spec[P_FIRE], l);
    }
    for (int k = 0; k < la->ntensors; k++) {
        L.tp[k] = gpt2_tensor(m, m->params, la->tensor_spec[k], l);
        L.dtp[k] = gpt2_tensor(m, m->grads, la->tensor_spec[k], l);
    }
    return L;
}

// The forward of gpt2_forward, or with kv (B = T = 1) of the one position kv_cache_len(kv):
// learned positions read that position's row, and each layer's attention attends over the cache.
static void forward(GPT2* m, const int* inputs, const int* targets, int B, int T, KVCache* kv) {
    ASSERT(B <= m->B && T <= m->T && T <= m->cfg.block_size);
    const int C = m->cfg.n_embd, L = m->cfg.n_layer, V = m->cfg.vocab_size;
    const int Vp = m->cfg.padded_vocab;
    const size_t BT = (size_t)B * T, BTC = BT * C;
    const float* P = m->params;
    PROF(PROF_CAST, refresh_bf16(m));
    m->cur_B = B;
    m->cur_T = T;
    m->inputs = inputs;
    m->targets = targets;
    const float* wpe = m->cfg.pos_encoding == ATTN_POS_LEARNED ? P + m->specs[P_WPE].offset : NULL;
    if (kv) {
        ASSERT(B == 1 && T == 1 && kv_cache_len(kv) < m->cfg.block_size);
        if (wpe) wpe += (size_t)kv_cache_len(kv) * C;
    }
    PROF(PROF_EMBED, encoder_forward(m->encoded, inputs, P + m->specs[P_WTE].offset, wpe, B, T, C));
    const int rp = m->cfg.residual != GPT2_RESID_STANDARD; // sublayer inputs are routed
    const ResidSources rsrc = {m->encoded, m->attproj, m->fcproj};
    const float* rq = rp ? gpt2_tensor(m, P, m->row_spec[P_RESID_QUERY], 0) : NULL;
    for (int l = 0; l < L; l++) {
        const float* res = l == 0 ? m->encoded : m->residual3 + (l - 1) * BTC;
        const float* in1 = rp ? resid_forward(m->resid, 2 * l, res, rq, &rsrc, B, T) : res;
        float* ln1 = m->ln1 + l * BTC;
        bf16* ln1_h = act_h(m, m->ln1_h, l * BTC);
        PROF(PROF_LN_FWD,
             layernorm_forward_h(ln1, ln1_h, m->ln1_mean + l * BT, m->ln1_rstd + l * BT, in1,
                                 gpt2_tensor(m, P, P_LN1W, l), gpt2_tensor(m, P, P_LN1B, l),
                                 (int)BT, C));
        PROF(PROF_MM_QKV_FWD,
             matmul_forward_h(m->qkv + l * 3 * BTC, ln1, ln1_h, gpt2_tensor(m, P, P_QKVW, l),
                              gpt2_tensor(m, P, P_QKVB, l), (int)BT, C, 3 * C));
        if (m->cfg.value_residual)
            vres_forward(m->vres, l, m->qkv, gpt2_tensor(m, P, m->row_spec[P_VRES_LAMBDA], l), B,
                         T);
        AttnLayer al = make_layer(m, l, B, T);
        if (m->cfg.qk_norm) // in place: every variant and position encoding sees normalised q, k
            attn_qknorm_forward(m->qkv + l * 3 * BTC, m->qkn_xhat + l * 2 * BTC,
                                m->qkn_rstd + l * BT * 2 * al.d.NH,
                                gpt2_tensor(m, P, m->row_spec[P_QKNORM_Q], l),
                                gpt2_tensor(m, P, m->row_spec[P_QKNORM_K], l), &al.d,
                                m->cfg.qk_norm_kind, m->nthreads);
        if (kv)
            kv_cache_attend(kv, &al);
        else
            PROF(PROF_ATTN_MM_FWD, attention_forward(&al));
        bf16* atty_h = act_h(m, m->atty_h, l * BTC);
        if (atty_h) PROF(PROF_CAST, bf16_from_floats(atty_h, m->atty + l * BTC, BTC));
        PROF(PROF_MM_ATTPROJ_FWD,
             matmul_forward_h(m->attproj + l * BTC, m->atty + l * BTC, atty_h,
                              gpt2_tensor(m, P, P_ATTPROJW, l), gpt2_tensor(m, P, P_ATTPROJB, l),
                              (int)BT, C, C));
        PROF(PROF_RESID, residual_forward(m->residual2 + l * BTC, res, m->attproj + l * BTC, BTC));
        if (!m->cfg.mlp) continue; // residual3 is residual2
        const float* in2 = m->residual2 + l * BTC;
        if (rp) in2 = resid_forward(m->resid, 2 * l + 1, in2, rq, &rsrc, B, T);
        float* ln2 = m->ln2 + l * BTC;
        bf16* ln2_h = act_h(m, m->ln2_h, l * BTC);
        PROF(PROF_LN_FWD,
             layernorm_forward_h(ln2, ln2_h, m->ln2_mean + l * BT, m->ln2_rstd + l * BT, in2,
                                 gpt2_tensor(m, P, P_LN2W, l), gpt2_tensor(m, P, P_LN2B, l),
                                 (int)BT, C));
        PROF(PROF_MM_FC_FWD,
             matmul_forward_h(m->fch + l * 4 * BTC, ln2, ln2_h, gpt2_tensor(m, P, P_FCW, l),
                              gpt2_tensor(m, P, P_FCB, l), (int)BT, C, 4 * C));
        bf16* gelu_h = act_h(m, m->fch_gelu_h, l * 4 * BTC);
        PROF(PROF_GELU_FWD,
             gelu_forward_h(m->fch_gelu + l * 4 * BTC, gelu_h, m->fch + l * 4 * BTC, 4 * BTC));
        PROF(PROF_MM_FCPROJ_FWD,
             matmul_forward_h(m->fcproj + l * BTC, m->fch_gelu + l * 4 * BTC, gelu_h,
                              gpt2_tensor(m, P, P_FCPROJW, l), gpt2_tensor(m, P, P_FCPROJB, l),
                              (int)BT, 4 * C, C));
        PROF(PROF_RESID, residual_forward(m->residual3 + l * BTC, m->residual2 + l * BTC,
                                          m->fcproj + l * BTC, BTC));
    }
    const float* inf = m->residual3 + (L - 1) * BTC;
    if (rp) inf = resid_forward(m->resid, 2 * L, inf, rq, &rsrc, B, T);
    bf16* lnf_h = act_h(m, m->lnf_h, 0);
    PROF(PROF_LN_FWD,
         layernorm_forward_h(m->lnf, lnf_h, m->lnf_mean, m->lnf_rstd, inf,
                             P + m->specs[P_LNFW].offset, P + m->specs[P_LNFB].offset, (int)BT, C));
    PROF(PROF_MM_LMHEAD_FWD, matmul_forward_h(m->logits, m->lnf, lnf_h, P + m->specs[P_WTE].offset,
                                              NULL, (int)BT, C, Vp));
    if (targets) {
        PROF(PROF_LOSS_FWD,
             crossentropy_forward(m->losses, m->lse, m->logits, targets, (int)BT, V, Vp));
        const int pp = prof_begin(PROF_METRICS);
        double s = 0.0;
        for (size_t i = 0; i < BT; i++)
            s += m->losses[i];
        m->mean_loss = (float)(s / (double)BT);
        m->mean_zloss = m->cfg.z_loss > 0.0f ? zloss_mean(m->lse, (int)BT, m->cfg.z_loss) : 0.0f;
        prof_end(pp);
    } else {
        m->mean_loss = -1.0f;
        m->mean_zloss = 0.0f;
    }
}

void gpt2_forward(GPT2* m, const int* inputs, const int* targets, int B, int T) {
    forward(m, inputs, targets, B, T, NULL);
}

void gpt2_forward_cached(GPT2* m, KVCache* kv, const int* token) {
    forward(m, token, NULL, 1, 1, kv);
}

void gpt2_zero_grad(GPT2* m) {
    // a new optimizer step: the last one updated the parameters, and its optimizer pass rewrote
    // the bf16 copy too unless it said otherwise (gpt2_params_synced)
    if (!m->bf16_synced) m->bf16_stale = 1;
    m->bf16_synced = 0;
    // the matmul-written tensors (mm_grad, nearly all of the 124M floats) are not cleared: the
    // next backward overwrites them (grads_fresh); only the tensors it adds into are zeroed
    const int pp = prof_begin(PROF_ZERO_GRAD);
    for (int i = 0; i < m->nspecs; i++)
        if (!m->specs[i].mm_grad)
            memset(m->grads + m->specs[i].offset, 0, sizeof(float) * m->specs[i].size);
    prof_end(pp);
    m->grads_fresh = 1;
}

void gpt2_backward(GPT2* m, float scale) {
    ASSERT(m->targets != NULL);
    const int B = m->cur_B, T = m->cur_T;
    const int C = m->cfg.n_embd, L = m->cfg.n_layer, V = m->cfg.vocab_size;
    const int Vp = m->cfg.padded_vocab;
    const size_t BT = (size_t)B * T, BTC = BT * C;
    const float* P = m->params;
    float* G = m->grads;
    // data parallelism: with a hook the classifier's wte gradient waits for the embedding segment
    const int hook = m->grad_hook != NULL;
    // The weight-gradient matmuls write their tensors (mm_grad) with WGRAD: overwriting them on
    // the first micro-batch after gpt2_zero_grad (which left them uncleared), accumulating
    // otherwise, and always when the hook has just filled the segment with a received running
    // sum (recv). Activation gradients that one matmul or gelu writes whole are overwritten too.
    const MMWrite first = m->grads_fresh ? MM_OVERWRITE : MM_ACCUMULATE;
    m->grads_fresh = 0;
    int recv = 0;
#define GRAD_HOOK(seg, phase) recv = hook ? m->grad_hook(m->grad_hook_ctx, (seg), (phase)) : 0
#define WGRAD                 (recv ? MM_ACCUMULATE : first)
    GRAD_HOOK(0, 0);
    // classifier: dlogits overwrite logits in place; in bf16 precisions they are rounded into
    // dlogits_bf16 as they are computed, registered as the logits' bf16 copy for the classifier
    // matmul, and the fp32 logits stay as they are
    const int half = m->dlogits_bf16 != NULL && m->precision != MM_FP32;
    int pp = prof_begin(PROF_LOSS_BWD);
    if (half) {
        crossentropy_backward_bf16_z(m->dlogits_bf16, m->logits, m->lse, m->targets,
                                     scale / (float)BT, m->cfg.z_loss, (int)BT, V, Vp);
        mm_bf16_register(m->logits, BT * (size_t)Vp, m->dlogits_bf16);
    } else {
        crossentropy_backward_z(m->logits, m->logits, m->lse, m->targets, scale / (float)BT,
                                m->cfg.z_loss, (int)BT, V, Vp);
    }
    prof_end(pp);
    PROF(PROF_MM_LMHEAD_BWD,
         matmul_backward_to_h(m->dlnf, MM_OVERWRITE, hook ? NULL : G + m->specs[P_WTE].offset,
                              first, NULL, m->logits, NULL, m->lnf, act_h(m, m->lnf_h, 0),
                              P + m->specs[P_WTE].offset, (int)BT, C, Vp));
    PROF(PROF_RESID, memset(m->dres, 0, sizeof(float) * BTC));
    // routed residual path: each LayerNorm's input gradient goes to resid_dinput, then through
    // resid_backward; each branch reads d(its output) from resid_branch_grad
    const int rp = m->cfg.residual != GPT2_RESID_STANDARD;
    const ResidSources rsrc = {m->encoded, m->attproj, m->fcproj};
    const float* rq = rp ? gpt2_tensor(m, P, m->row_spec[P_RESID_QUERY], 0) : NULL;
    float* drq = rp ? gpt2_tensor(m, G, m->row_spec[P_RESID_QUERY], 0) : NULL;
    if (rp) resid_backward_begin(m->resid);
    pp = prof_begin(PROF_LN_BWD);
    layernorm_backward(rp ? resid_dinput(m->resid) : m->dres, G + m->specs[P_LNFW].offset,
                       G + m->specs[P_LNFB].offset, m->dlnf,
                       rp ? resid_input(m->resid, 2 * L, m->residual3 + (L - 1) * BTC)
                          : m->residual3 + (L - 1) * BTC,
                       P + m->specs[P_LNFW].offset, m->lnf_mean, m->lnf_rstd, (int)BT, C);
    prof_end(pp);
    if (rp) resid_backward(m->resid, 2 * L, m->dres, rq, drq, &rsrc);
    GRAD_HOOK(0, 1);
    for (int l = L - 1; l >= 0; l--) {
        GRAD_HOOK(L - l, 0);
        const float* res = l == 0 ? m->encoded : m->residual3 + (l - 1) * BTC;
        const float* dmlp = rp ? resid_branch_grad(m->resid, 2 * l + 1, m->dres) : m->dres;
        // MLP branch: dres is d(residual3) = d(fcproj) and the direct part of d(residual2)
        const float* datt = m->dres; // mlp = 0: residual3 is residual2
        if (m->cfg.mlp) {
            PROF(PROF_MM_FCPROJ_BWD,
                 matmul_backward_to_h(m->dfch_gelu, MM_OVERWRITE, gpt2_tensor(m, G, P_FCPROJW, l),
                                      WGRAD, gpt2_tensor(m, G, P_FCPROJB, l), dmlp, NULL,
                                      m->fch_gelu + l * 4 * BTC,
                                      act_h(m, m->fch_gelu_h, l * 4 * BTC),
                                      gpt2_tensor(m, P, P_FCPROJW, l), (int)BT, 4 * C, C));
            PROF(PROF_GELU_BWD, gelu_backward_set_h(m->dfch, act_h(m, m->dfch_h, 0),
                                                    m->fch + l * 4 * BTC, m->dfch_gelu, 4 * BTC));
            PROF(PROF_MM_FC_BWD,
                 matmul_backward_to_h(m->dln, MM_OVERWRITE, gpt2_tensor(m, G, P_FCW, l), WGRAD,
                                      gpt2_tensor(m, G, P_FCB, l), m->dfch, act_h(m, m->dfch_h, 0),
                                      m->ln2 + l * BTC, act_h(m, m->ln2_h, l * BTC),
                                      gpt2_tensor(m, P, P_FCW, l), (int)BT, C, 4 * C));
            pp = prof_begin(PROF_LN_BWD);
            layernorm_backward(rp ? resid_dinput(m->resid) : m->dres, gpt2_tensor(m, G, P_LN2W, l),
                               gpt2_tensor(m, G, P_LN2B, l), m->dln,
                               rp ? resid_input(m->resid, 2 * l + 1, m->residual2 + l * BTC)
                                  : m->residual2 + l * BTC,
                               gpt2_tensor(m, P, P_LN2W, l), m->ln2_mean + l * BT,
                               m->ln2_rstd + l * BT, (int)BT, C);
            prof_end(pp);
            if (rp) resid_backward(m->resid, 2 * l + 1, m->dres, rq, drq, &rsrc);
            datt = rp ? resid_branch_grad(m->resid, 2 * l, m->dres) : m->dres;
        }
        // attention branch: dres is now d(residual2) = d(attproj) and the direct part of d(res)
        PROF(PROF_MM_ATTPROJ_BWD,
             matmul_backward_to_h(m->datty, MM_OVERWRITE, gpt2_tensor(m, G, P_ATTPROJW, l), WGRAD,
                                  gpt2_tensor(m, G, P_ATTPROJB, l), datt, NULL, m->atty + l * BTC,
                                  act_h(m, m->atty_h, l * BTC), gpt2_tensor(m, P, P_ATTPROJW, l),
                                  (int)BT, C, C));
        PROF(PROF_RESID, memset(m->dqkv, 0, sizeof(float) * 3 * BTC);
             memset(m->dln, 0, sizeof(float) * BTC));
        AttnLayer al = make_layer(m, l, B, T);
        al.dout = m->datty;
        al.dqkv = m->dqkv;
        al.dx = m->dln; // layer-level variants that read x add their gradient here
        PROF(PROF_ATTN_MM_BWD, attention_backward(&al));
        if (m->cfg.value_residual)
            vres_backward(m->vres, l, m->dqkv, m->qkv,
                          gpt2_tensor(m, P, m->row_spec[P_VRES_LAMBDA], l),
                          gpt2_tensor(m, G, m->row_spec[P_VRES_LAMBDA], l), B, T);
        if (m->cfg.qk_norm) // dqkv's q, k: from the normalised values' gradient to the projection's
            attn_qknorm_backward(m->dqkv, gpt2_tensor(m, G, m->row_spec[P_QKNORM_Q], l),
                                 gpt2_tensor(m, G, m->row_spec[P_QKNORM_K], l),
                                 m->qkn_xhat + l * 2 * BTC, m->qkn_rstd + l * BT * 2 * al.d.NH,
                                 gpt2_tensor(m, P, m->row_spec[P_QKNORM_Q], l),
                                 gpt2_tensor(m, P, m->row_spec[P_QKNORM_K], l), &al.d,
                                 m->cfg.qk_norm_kind, m->nthreads);
        PROF(PROF_MM_QKV_BWD,
             matmul_backward_to_h(m->dln, MM_ACCUMULATE, gpt2_tensor(m, G, P_QKVW, l), WGRAD,
                                  gpt2_tensor(m, G, P_QKVB, l), m->dqkv, NULL, m->ln1 + l * BTC,
                                  act_h(m, m->ln1_h, l * BTC), gpt2_tensor(m, P, P_QKVW, l),
                                  (int)BT, C, 3 * C));
        PROF(PROF_LN_BWD,
             layernorm_backward(rp ? resid_dinput(m->resid) : m->dres, gpt2_tensor(m, G, P_LN1W, l),
                                gpt2_tensor(m, G, P_LN1B, l), m->dln,
                                rp ? resid_input(m->resid, 2 * l, res) : res,
                                gpt2_tensor(m, P, P_LN1W, l), m->ln1_mean + l * BT,
                                m->ln1_rstd + l * BT, (int)BT, C));
        if (rp) resid_backward(m->resid, 2 * l, m->dres, rq, drq, &rsrc);
        GRAD_HOOK(L - l, 1);
    }
    if (rp) resid_embed_grad(m->resid, m->dres);
    GRAD_HOOK(L + 1, 0);
    if (hook) // the classifier's weight gradient (dlogits are still in m->logits / its copy)
        PROF(PROF_MM_LMHEAD_BWD,
             matmul_backward_to_h(NULL, MM_OVERWRITE, G + m->specs[P_WTE].offset, WGRAD, NULL,
                                  m->logits, NULL, m->lnf, act_h(m, m->lnf_h, 0),
                                  P + m->specs[P_WTE].offset, (int)BT, C, Vp));
    if (half) mm_bf16_unregister(m->logits);
    float* dwpe = m->cfg.pos_encoding == ATTN_POS_LEARNED ? G + m->specs[P_WPE].offset : NULL;
    PROF(PROF_EMBED,
         encoder_backward(G + m->specs[P_WTE].offset, dwpe, m->dres, m->inputs, B, T, C));
    GRAD_HOOK(L + 1, 1);
#undef GRAD_HOOK
#undef WGRAD
}

int gpt2_grad_segments(const GPT2* m) {
    return m->cfg.n_layer + 2;
}

int gpt2_segment_slices(const GPT2* m, int seg, size_t* off, size_t* len) {
    const int L = m->cfg.n_layer;
    ASSERT(seg >= 0 && seg <= L + 1);
    int n = 0;
    for (int i = 0; i < m->nspecs; i++) {
        const ParamSpec* s = &m->specs[i];
        if (s->size == 0) continue; // ln_2 and the MLP under mlp = 0
        int in;
        if (s->stacked)
            in = seg >= 1 && seg <= L;
        else if (i == P_LNFW || i == P_LNFB)
            in = seg == 0;
        else
            in = seg == L + 1; // wte, wpe
        if (!in) continue;
        if (s->stacked) {
            size_t per = s->size / s->shape[0];
            off[n] = s->offset + (size_t)(L - seg) * per;
            len[n] = per;
        } else {
            off[n] = s->offset;
            len[n] = s->size;
        }
        n++;
    }
    return n;
}

const float* gpt2_logits(const GPT2* m, int b, int t) {
    return m->logits + ((size_t)b * m->cur_T + t) * m->cfg.padded_vocab;
}

double gpt2_flops_per_token(const GPT2* m, int T) {
    double N = 0;
    for (int i = 0; i < m->nspecs; i++)
        if (i != P_WPE) N += (double)m->specs[i].size;
    // wte's padded rows do no work in the loss but do in the classifier matmul: count real V
    N -= (double)(m->cfg.padded_vocab - m->cfg.vocab_size) * m->cfg.n_embd;
    return 6.0 * N + 12.0 * m->cfg.n_layer * (double)T * m->cfg.n_embd;
}
