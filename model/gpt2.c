// model/gpt2.c: GPT-2 parameter table, initialisation, activations, forward and backward.
//
// Block l (pre-LayerNorm):  x1 = x + attnproj(attention(ln_1(x)));  x2 = x1 + mlp(ln_2(x1))
// with mlp(h) = c_proj(gelu(c_fc(h))). Final ln_f, tied classifier logits = ln_f(x) @ wte^T
// over the padded vocabulary (padded logits never enter the loss).
// Backward walks the blocks in reverse, keeping one residual-stream gradient `dres` that every
// branch adds into; per-layer gradient scratch is reused across layers.
#include "model/gpt2.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "common/util.h"
#include "model/layers.h"

// ---------------------------------------------------------------------------------------------
// parameter table

static int add_spec(GPT2* m, const char* name, int ndim, const size_t* shape, int decay,
                    int stacked, int llmc, int variant_owned) {
    ASSERT(m->nspecs < GPT2_MAX_SPECS);
    ParamSpec* s = &m->specs[m->nspecs];
    memset(s, 0, sizeof(*s));
    util_strlcpy(s->name, name, sizeof(s->name));
    s->ndim = ndim;
    s->size = 1;
    for (int i = 0; i < ndim; i++) {
        s->shape[i] = shape[i];
        s->size *= shape[i];
    }
    s->decay = decay;
    s->stacked = stacked;
    s->llmc = llmc;
    s->variant_owned = variant_owned;
    return m->nspecs++;
}

#define SHAPE(...) ((const size_t[]){__VA_ARGS__})

void gpt2_build(GPT2* m, const GPT2Config* cfg) {
    m->cfg = *cfg;
    const size_t L = (size_t)cfg->n_layer, C = (size_t)cfg->n_embd, Vp = (size_t)cfg->padded_vocab;
    const size_t maxT = (size_t)cfg->block_size, NH = (size_t)cfg->n_head;
    m->nspecs = 0;
    // llm.c's 16 tensors, in llm.c's order (names follow its ParameterTensors fields)
    add_spec(m, "wte", 2, SHAPE(Vp, C), 1, 0, 1, 0);
    add_spec(m, "wpe", 2, SHAPE(maxT, C), 1, 0, 1, 0);
    add_spec(m, "ln1w", 2, SHAPE(L, C), 0, 1, 1, 0);
    add_spec(m, "ln1b", 2, SHAPE(L, C), 0, 1, 1, 0);
    add_spec(m, "qkvw", 3, SHAPE(L, 3 * C, C), 1, 1, 1, 0);
    add_spec(m, "qkvb", 2, SHAPE(L, 3 * C), 0, 1, 1, 0);
    add_spec(m, "attprojw", 3, SHAPE(L, C, C), 1, 1, 1, 0);
    add_spec(m, "attprojb", 2, SHAPE(L, C), 0, 1, 1, 0);
    add_spec(m, "ln2w", 2, SHAPE(L, C), 0, 1, 1, 0);
    add_spec(m, "ln2b", 2, SHAPE(L, C), 0, 1, 1, 0);
    add_spec(m, "fcw", 3, SHAPE(L, 4 * C, C), 1, 1, 1, 0);
    add_spec(m, "fcb", 2, SHAPE(L, 4 * C), 0, 1, 1, 0);
    add_spec(m, "fcprojw", 3, SHAPE(L, C, 4 * C), 1, 1, 1, 0);
    add_spec(m, "fcprojb", 2, SHAPE(L, C), 0, 1, 1, 0);
    add_spec(m, "lnfw", 1, SHAPE(C), 0, 0, 1, 0);
    add_spec(m, "lnfb", 1, SHAPE(C), 0, 0, 1, 0);
    // row-map parameters of every layer: (L, NH, maxP), decay-free
    m->attnp_spec = -1;
    if (m->maxP > 0)
        m->attnp_spec = add_spec(m, "attnp", 3, SHAPE(L, NH, (size_t)m->maxP), 0, 1, 0, 1);
    // pos_encoding = fire: one FIRE parameter vector per layer, decay-free
    m->fire_spec = -1;
    if (cfg->pos_encoding == ATTN_POS_FIRE)
        m->fire_spec =
            add_spec(m, "fire", 2, SHAPE(L, (size_t)attn_fire_nparams(cfg->n_head)), 0, 1, 0, 1);
    // layer-level tensors: one stacked tensor per (variant, tensor) in use
    for (int l = 0; l < cfg->n_layer; l++) {
        LayerAttn* la = &m->la[l];
        la->ntensors = 0;
        if (!la->v->layer_tensors) continue;
        AttnTensorSpec ts[ATTN_MAX_TENSORS];
        AttnDims d = {.B = 1,
                      .T = cfg->block_size,
                      .C = cfg->n_embd,
                      .NH = cfg->n_head,
                      .hs = cfg->n_embd / cfg->n_head};
        int nt = la->v->layer_tensors(ts, &d, &la->hp);
        ASSERT(nt <= ATTN_MAX_TENSORS);
        for (int k = 0; k < nt; k++) {
            char name[64];
            snprintf(name, sizeof(name), "%s.%s", la->v->name, ts[k].name);
            int idx = gpt2_find_spec(m, name);
            if (idx < 0) {
                size_t shape[4] = {L, 1, 1, 1};
                for (int q = 0; q < ts[k].ndim; q++)
                    shape[q + 1] = (size_t)ts[k].shape[q];
                idx = add_spec(m, name, ts[k].ndim + 1, shape, ts[k].decay, 1, 0, 1);
            }
            la->tensor_spec[k] = idx;
        }
        la->ntensors = nt;
    }
    size_t off = 0;
    for (int i = 0; i < m->nspecs; i++) {
        m->specs[i].offset = off;
        off += m->specs[i].size;
    }
    m->num_params = off;
    m->params = allocFloats(off);
    m->grads = allocFloats(off);
    m->mean_loss = -1.0f;
    m->step = -1;
}

int gpt2_find_spec(const GPT2* m, const char* name) {
    for (int i = 0; i < m->nspecs; i++)
        if (strcmp(m->specs[i].name, name) == 0) return i;
    return -1;
}

float* gpt2_tensor(const GPT2* m, const float* base, int spec, int l) {
    const ParamSpec* s = &m->specs[spec];
    size_t off = s->offset;
    if (s->stacked) off += (size_t)l * (s->size / s->shape[0]);
    return (float*)base + off;
}

void gpt2_set_precision(GPT2* m, MMPrecision p) {
    mm_set_precision(p);
    m->precision = p;
    if (p == MM_FP32) {
        if (m->params_bf16) mm_bf16_unregister(m->params);
        free(m->params_bf16);
        m->params_bf16 = NULL;
        return;
    }
    if (!m->params_bf16) m->params_bf16 = mallocCheck(sizeof(bf16) * m->num_params);
    mm_bf16_register(m->params, m->num_params, m->params_bf16);
    m->bf16_stale = 1;
}

void gpt2_params_changed(GPT2* m) {
    m->bf16_stale = 1;
}

// Before a forward: bring the bf16 weight copy up to date (one pass over the parameters).
static void refresh_bf16(GPT2* m) {
    if (!m->params_bf16 || !m->bf16_stale) return;
    bf16_from_floats(m->params_bf16, m->params, m->num_params);
    m->bf16_stale = 0;
    m->bf16_refreshes++;
}

void gpt2_init(GPT2* m, uint64_t seed) {
    gpt2_params_changed(m);
    Rng r;
    rng_seed(&r, seed);
    const GPT2Config* c = &m->cfg;
    const float std = 0.02f, proj_std = 0.02f / sqrtf(2.0f * (float)c->n_layer);
    memset(m->params, 0, sizeof(float) * m->num_params);
    for (int i = 0; i < GPT2_NUM_LLMC; i++) {
        ParamSpec* s = &m->specs[i];
        float* p = m->params + s->offset;
        switch (i) {
        case P_LN1W:
        case P_LN2W:
        case P_LNFW:
            for (size_t k = 0; k < s->size; k++)
                p[k] = 1.0f;
            break;
        case P_WTE: { // real vocabulary rows only; padded rows stay 0
            size_t n = (size_t)c->vocab_size * (size_t)c->n_embd;
            for (size_t k = 0; k < n; k++)
                p[k] = std * rng_normal(&r);
            break;
        }
        case P_WPE:
        case P_QKVW:
        case P_FCW:
            for (size_t k = 0; k < s->size; k++)
                p[k] = std * rng_normal(&r);
            break;
        case P_ATTPROJW:
        case P_FCPROJW: // residual projections: 1/sqrt(2 L)
            for (size_t k = 0; k < s->size; k++)
                p[k] = proj_std * rng_normal(&r);
            break;
        default: // biases
            break;
        }
    }
    for (int l = 0; l < c->n_layer; l++) {
        LayerAttn* la = &m->la[l];
        if (m->fire_spec >= 0)
            attn_fire_init(gpt2_tensor(m, m->params, m->fire_spec, l), c->n_head, rng_u64(&r));
        int P = la->row->params_per_head;
        if (P > 0) {
            float* p = gpt2_tensor(m, m->params, m->attnp_spec, l);
            for (int h = 0; h < c->n_head; h++) {
                float* ph = p + (size_t)h * (size_t)m->maxP;
                if (la->row->init_params) la->row->init_params(ph, &la->row_hp);
            }
        }
        if (la->ntensors) {
            AttnTensorSpec ts[ATTN_MAX_TENSORS];
            AttnDims d = {.B = 1,
                          .T = c->block_size,
                          .C = c->n_embd,
                          .NH = c->n_head,
                          .hs = c->n_embd / c->n_head};
            la->v->layer_tensors(ts, &d, &la->hp);
            for (int k = 0; k < la->ntensors; k++) {
                int si = la->tensor_spec[k];
                size_t n = m->specs[si].size / m->specs[si].shape[0];
                float* p = gpt2_tensor(m, m->params, si, l);
                for (size_t q = 0; q < n; q++) {
                    if (ts[k].init == ATTN_INIT_CONST)
                        p[q] = ts[k].init_value;
                    else if (ts[k].init == ATTN_INIT_NORMAL)
                        p[q] = ts[k].init_value * rng_normal(&r);
                    else
                        p[q] = 0.0f;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// activations

void gpt2_alloc_acts(GPT2* m, int B, int T, int nthreads) {
    const size_t L = (size_t)m->cfg.n_layer, C = (size_t)m->cfg.n_embd;
    const size_t NH = (size_t)m->cfg.n_head, Vp = (size_t)m->cfg.padded_vocab;
    const size_t BT = (size_t)B * (size_t)T;
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
        {&m->ln2, L * BT * C},
        {&m->ln2_mean, L * BT},
        {&m->ln2_rstd, L * BT},
        {&m->fch, L * BT * 4 * C},
        {&m->fch_gelu, L * BT * 4 * C},
        {&m->fcproj, L * BT * C},
        {&m->residual3, L * BT * C},
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
        {&m->dfch, BT * 4 * C},
        {&m->dfch_gelu, BT * 4 * C},
        {&m->dlnf, BT * C},
    };
    size_t ntab = sizeof(tab) / sizeof(tab[0]), total = 0;
    for (size_t i = 0; i < ntab; i++)
        total += (tab[i].n + 15) & ~(size_t)15;
    m->acts = allocFloats(total);
    size_t off = 0;
    for (size_t i = 0; i < ntab; i++) {
        *tab[i].p = m->acts + off;
        off += (tab[i].n + 15) & ~(size_t)15;
    }
    size_t row_scratch = 0;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        LayerAttn* la = &m->la[l];
        AttnDims d = {.B = B, .T = T, .C = (int)C, .NH = (int)NH, .hs = (int)(C / NH)};
        size_t cf = la->v->layer_cache_floats ? la->v->layer_cache_floats(&d, &la->hp) : 0;
        // under rope the layer's rotated q, k (B,T,2C) come first, then the variant's cache
        size_t qkn = attn_pos_rotates(m->cfg.pos_encoding) ? BT * 2 * C : 0;
        m->attn_cache[l] = cf + qkn ? allocFloats(cf + qkn) : NULL;
        size_t rs = attn_row_scratch(la->row, T);
        if (rs > row_scratch) row_scratch = rs;
    }
    m->ws = attn_workspace_new(B, T, (int)NH, nthreads, row_scratch, m->maxP);
}

void gpt2_free(GPT2* m) {
    if (m->params_bf16) mm_bf16_unregister(m->params);
    free(m->params_bf16);
    free(m->params);
    free(m->grads);
    free(m->acts);
    for (int l = 0; l < m->cfg.n_layer; l++)
        free(m->attn_cache[l]);
    attn_workspace_free(m->ws);
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
        L.rowp = gpt2_tensor(m, m->params, m->attnp_spec, l);
        L.drowp = gpt2_tensor(m, m->grads, m->attnp_spec, l);
    }
    if (m->fire_spec >= 0) {
        L.posp = gpt2_tensor(m, m->params, m->fire_spec, l);
        L.dposp = gpt2_tensor(m, m->grads, m->fire_spec, l);
    }
    for (int k = 0; k < la->ntensors; k++) {
        L.tp[k] = gpt2_tensor(m, m->params, la->tensor_spec[k], l);
        L.dtp[k] = gpt2_tensor(m, m->grads, la->tensor_spec[k], l);
    }
    return L;
}

void gpt2_forward(GPT2* m, const int* inputs, const int* targets, int B, int T) {
    ASSERT(B <= m->B && T <= m->T && T <= m->cfg.block_size);
    const int C = m->cfg.n_embd, L = m->cfg.n_layer, V = m->cfg.vocab_size;
    const int Vp = m->cfg.padded_vocab;
    const size_t BT = (size_t)B * T, BTC = BT * C;
    const float* P = m->params;
    refresh_bf16(m);
    m->cur_B = B;
    m->cur_T = T;
    m->inputs = inputs;
    m->targets = targets;
    const float* wpe = m->cfg.pos_encoding == ATTN_POS_LEARNED ? P + m->specs[P_WPE].offset : NULL;
    encoder_forward(m->encoded, inputs, P + m->specs[P_WTE].offset, wpe, B, T, C);
    for (int l = 0; l < L; l++) {
        const float* res = l == 0 ? m->encoded : m->residual3 + (l - 1) * BTC;
        float* ln1 = m->ln1 + l * BTC;
        layernorm_forward(ln1, m->ln1_mean + l * BT, m->ln1_rstd + l * BT, res,
                          gpt2_tensor(m, P, P_LN1W, l), gpt2_tensor(m, P, P_LN1B, l), (int)BT, C);
        matmul_forward(m->qkv + l * 3 * BTC, ln1, gpt2_tensor(m, P, P_QKVW, l),
                       gpt2_tensor(m, P, P_QKVB, l), (int)BT, C, 3 * C);
        AttnLayer al = make_layer(m, l, B, T);
        attention_forward(&al);
        matmul_forward(m->attproj + l * BTC, m->atty + l * BTC, gpt2_tensor(m, P, P_ATTPROJW, l),
                       gpt2_tensor(m, P, P_ATTPROJB, l), (int)BT, C, C);
        residual_forward(m->residual2 + l * BTC, res, m->attproj + l * BTC, BTC);
        float* ln2 = m->ln2 + l * BTC;
        layernorm_forward(ln2, m->ln2_mean + l * BT, m->ln2_rstd + l * BT, m->residual2 + l * BTC,
                          gpt2_tensor(m, P, P_LN2W, l), gpt2_tensor(m, P, P_LN2B, l), (int)BT, C);
        matmul_forward(m->fch + l * 4 * BTC, ln2, gpt2_tensor(m, P, P_FCW, l),
                       gpt2_tensor(m, P, P_FCB, l), (int)BT, C, 4 * C);
        gelu_forward(m->fch_gelu + l * 4 * BTC, m->fch + l * 4 * BTC, 4 * BTC);
        matmul_forward(m->fcproj + l * BTC, m->fch_gelu + l * 4 * BTC,
                       gpt2_tensor(m, P, P_FCPROJW, l), gpt2_tensor(m, P, P_FCPROJB, l), (int)BT,
                       4 * C, C);
        residual_forward(m->residual3 + l * BTC, m->residual2 + l * BTC, m->fcproj + l * BTC, BTC);
    }
    layernorm_forward(m->lnf, m->lnf_mean, m->lnf_rstd, m->residual3 + (L - 1) * BTC,
                      P + m->specs[P_LNFW].offset, P + m->specs[P_LNFB].offset, (int)BT, C);
    matmul_forward(m->logits, m->lnf, P + m->specs[P_WTE].offset, NULL, (int)BT, C, Vp);
    if (targets) {
        crossentropy_forward(m->losses, m->lse, m->logits, targets, (int)BT, V, Vp);
        double s = 0.0;
        for (size_t i = 0; i < BT; i++)
            s += m->losses[i];
        m->mean_loss = (float)(s / (double)BT);
    } else {
        m->mean_loss = -1.0f;
    }
}

void gpt2_zero_grad(GPT2* m) {
    gpt2_params_changed(m); // a new optimizer step: the last one updated the parameters
    memset(m->grads, 0, sizeof(float) * m->num_params);
}

void gpt2_backward(GPT2* m, float scale) {
    ASSERT(m->targets != NULL);
    const int B = m->cur_B, T = m->cur_T;
    const int C = m->cfg.n_embd, L = m->cfg.n_layer, V = m->cfg.vocab_size;
    const int Vp = m->cfg.padded_vocab;
    const size_t BT = (size_t)B * T, BTC = BT * C;
    const float* P = m->params;
    float* G = m->grads;
    // classifier: dlogits overwrite logits in place
    crossentropy_backward(m->logits, m->logits, m->lse, m->targets, scale / (float)BT, (int)BT, V,
                          Vp);
    memset(m->dlnf, 0, sizeof(float) * BTC);
    matmul_backward(m->dlnf, G + m->specs[P_WTE].offset, NULL, m->logits, m->lnf,
                    P + m->specs[P_WTE].offset, (int)BT, C, Vp);
    memset(m->dres, 0, sizeof(float) * BTC);
    layernorm_backward(m->dres, G + m->specs[P_LNFW].offset, G + m->specs[P_LNFB].offset, m->dlnf,
                       m->residual3 + (L - 1) * BTC, P + m->specs[P_LNFW].offset, m->lnf_mean,
                       m->lnf_rstd, (int)BT, C);
    for (int l = L - 1; l >= 0; l--) {
        const float* res = l == 0 ? m->encoded : m->residual3 + (l - 1) * BTC;
        // MLP branch: dres is d(residual3) = d(fcproj) and the direct part of d(residual2)
        memset(m->dfch_gelu, 0, sizeof(float) * 4 * BTC);
        matmul_backward(m->dfch_gelu, gpt2_tensor(m, G, P_FCPROJW, l),
                        gpt2_tensor(m, G, P_FCPROJB, l), m->dres, m->fch_gelu + l * 4 * BTC,
                        gpt2_tensor(m, P, P_FCPROJW, l), (int)BT, 4 * C, C);
        memset(m->dfch, 0, sizeof(float) * 4 * BTC);
        gelu_backward(m->dfch, m->fch + l * 4 * BTC, m->dfch_gelu, 4 * BTC);
        memset(m->dln, 0, sizeof(float) * BTC);
        matmul_backward(m->dln, gpt2_tensor(m, G, P_FCW, l), gpt2_tensor(m, G, P_FCB, l), m->dfch,
                        m->ln2 + l * BTC, gpt2_tensor(m, P, P_FCW, l), (int)BT, C, 4 * C);
        layernorm_backward(m->dres, gpt2_tensor(m, G, P_LN2W, l), gpt2_tensor(m, G, P_LN2B, l),
                           m->dln, m->residual2 + l * BTC, gpt2_tensor(m, P, P_LN2W, l),
                           m->ln2_mean + l * BT, m->ln2_rstd + l * BT, (int)BT, C);
        // attention branch: dres is now d(residual2) = d(attproj) and the direct part of d(res)
        memset(m->datty, 0, sizeof(float) * BTC);
        matmul_backward(m->datty, gpt2_tensor(m, G, P_ATTPROJW, l),
                        gpt2_tensor(m, G, P_ATTPROJB, l), m->dres, m->atty + l * BTC,
                        gpt2_tensor(m, P, P_ATTPROJW, l), (int)BT, C, C);
        memset(m->dqkv, 0, sizeof(float) * 3 * BTC);
        memset(m->dln, 0, sizeof(float) * BTC);
        AttnLayer al = make_layer(m, l, B, T);
        al.dout = m->datty;
        al.dqkv = m->dqkv;
        al.dx = m->dln; // layer-level variants that read x add their gradient here
        attention_backward(&al);
        matmul_backward(m->dln, gpt2_tensor(m, G, P_QKVW, l), gpt2_tensor(m, G, P_QKVB, l), m->dqkv,
                        m->ln1 + l * BTC, gpt2_tensor(m, P, P_QKVW, l), (int)BT, C, 3 * C);
        layernorm_backward(m->dres, gpt2_tensor(m, G, P_LN1W, l), gpt2_tensor(m, G, P_LN1B, l),
                           m->dln, res, gpt2_tensor(m, P, P_LN1W, l), m->ln1_mean + l * BT,
                           m->ln1_rstd + l * BT, (int)BT, C);
    }
    float* dwpe = m->cfg.pos_encoding == ATTN_POS_LEARNED ? G + m->specs[P_WPE].offset : NULL;
    encoder_backward(G + m->specs[P_WTE].offset, dwpe, m->dres, m->inputs, B, T, C);
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
