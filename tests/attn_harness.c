// tests/attn_harness.c: the shared attention-layer test harness (see attn_harness.h).
#include "tests/attn_harness.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "tests/testutil.h"

void harness_setup(AttnHarness* h, const AttnVariant* v, const AttnHParams* hp, int pos, int B,
                   int T, int C, int NH, int nthreads, float tensor_noise, uint64_t seed) {
    memset(h, 0, sizeof(*h));
    h->v = v;
    h->d = (AttnDims){.B = B, .T = T, .C = C, .NH = NH, .hs = C / NH};
    if (hp)
        h->hp = *hp;
    else
        attn_hparams_default(&h->hp, v, T, NH, C / NH, C, 2);
    if (v->layer_forward && !h->hp.inner) h->hp.inner = attn_lookup("softmax");
    h->row = v->layer_forward ? h->hp.inner : v;
    if (v->layer_forward)
        attn_hparams_default(&h->row_hp, h->row, h->hp.T_train, NH, C / NH, C, 2);
    else
        h->row_hp = h->hp;
    Rng r;
    rng_seed(&r, seed);
    h->ntens = v->layer_tensors ? v->layer_tensors(h->specs, &h->d, &h->hp) : 0;
    for (int k = 0; k < h->ntens; k++) {
        const AttnTensorSpec* s = &h->specs[k];
        size_t n = 1;
        for (int q = 0; q < s->ndim; q++)
            n *= (size_t)s->shape[q];
        h->tsize[k] = n;
        h->tp[k] = allocFloats(n);
        h->dtp[k] = allocFloats(n);
        float base = s->init == ATTN_INIT_CONST ? s->init_value : 0.0f;
        float sd = tensor_noise > 0              ? tensor_noise
                   : s->init == ATTN_INIT_NORMAL ? s->init_value
                                                 : 0.05f;
        for (size_t i = 0; i < n; i++)
            h->tp[k][i] = base + sd * rng_normal(&r);
    }
    const size_t BTC = (size_t)B * T * C;
    const int P = h->row->params_per_head;
    h->x = allocFloats(BTC);
    h->qkv = allocFloats(3 * BTC);
    h->out = allocFloats(BTC);
    h->w = allocFloats(BTC);
    h->att = allocFloats((size_t)B * NH * T * T);
    size_t cf = v->layer_cache_floats ? v->layer_cache_floats(&h->d, &h->hp) : 0;
    h->cache = allocFloats(cf + 1);
    h->qk_pos = allocFloats(2 * BTC); // rotated q, k under rope
    h->rowp = allocFloats((size_t)NH * P + 1);
    h->drowp = allocFloats((size_t)NH * P + 1);
    h->dx = allocFloats(BTC);
    h->dqkv = allocFloats(3 * BTC);
    fill_normal(h->x, BTC, 1.0f, &r);
    fill_normal(h->qkv, 3 * BTC, 1.0f, &r);
    fill_normal(h->w, BTC, 1.0f, &r);
    for (int hd = 0; hd < NH; hd++) { // off the init's symmetries
        if (h->row->init_params) h->row->init_params(h->rowp + hd * P, &h->row_hp);
        for (int k = 0; k < P; k++)
            h->rowp[hd * P + k] += 0.02f * rng_normal(&r);
    }
    h->ws = attn_workspace_new(B, T, NH, nthreads, attn_row_scratch(h->row, T), P);
    h->L = (AttnLayer){.v = v,
                       .row = h->row,
                       .hp = &h->hp,
                       .row_hp = &h->row_hp,
                       .d = h->d,
                       .layer = 0,
                       .step = 3,
                       .seed = 11,
                       .pos_encoding = pos,
                       .qk_pos = h->qk_pos,
                       .rowp = P ? h->rowp : NULL,
                       .drowp = P ? h->drowp : NULL,
                       .x = h->x,
                       .qkv = h->qkv,
                       .out = h->out,
                       .att = h->att,
                       .cache = h->cache,
                       .dout = h->w,
                       .dx = h->dx,
                       .dqkv = h->dqkv,
                       .ws = h->ws};
    for (int k = 0; k < h->ntens; k++) {
        h->L.tp[k] = h->tp[k];
        h->L.dtp[k] = h->dtp[k];
    }
}

void harness_free(AttnHarness* h) {
    for (int k = 0; k < h->ntens; k++) {
        free(h->tp[k]);
        free(h->dtp[k]);
    }
    free(h->x);
    free(h->qkv);
    free(h->out);
    free(h->w);
    free(h->att);
    free(h->cache);
    free(h->qk_pos);
    free(h->rowp);
    free(h->drowp);
    free(h->dx);
    free(h->dqkv);
    attn_workspace_free(h->ws);
}

void harness_zero_grads(AttnHarness* h) {
    const size_t BTC = (size_t)h->d.B * h->d.T * h->d.C;
    memset(h->dx, 0, sizeof(float) * BTC);
    memset(h->dqkv, 0, sizeof(float) * 3 * BTC);
    memset(h->drowp, 0, sizeof(float) * ((size_t)h->d.NH * h->row->params_per_head + 1));
    for (int k = 0; k < h->ntens; k++)
        memset(h->dtp[k], 0, sizeof(float) * h->tsize[k]);
}

double harness_loss(void* vp) {
    AttnHarness* h = vp;
    attention_forward(&h->L);
    const size_t BTC = (size_t)h->d.B * h->d.T * h->d.C;
    double L = 0;
    for (size_t i = 0; i < BTC; i++)
        L += (double)h->w[i] * (double)h->out[i];
    return L;
}
