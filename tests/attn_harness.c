// tests/attn_harness.c: the shared attention-layer test harness (see attn_harness.h).
#include "tests/attn_harness.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "tests/testutil.h"

// N(0, sd) draws into a buffer of the kernels' scalar type (as fill_normal for float)
static void fill_real(real* x, size_t n, real sd, Rng* r) {
    for (size_t i = 0; i < n; i++)
        x[i] = sd * rng_normal(r);
}

void harness_setup(AttnHarness* h, const AttnVariant* v, const AttnHParams* hp, int pos, int B,
                   int T, int C, int NH, int nthreads, real tensor_noise, uint64_t seed) {
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
    attn_compose(&h->own, v, &h->hp);
    Rng r;
    rng_seed(&r, seed);
    h->ntens = v->layer_tensors ? v->layer_tensors(h->specs, &h->d, &h->hp) : 0;
    for (int k = 0; k < h->ntens; k++) {
        const AttnTensorSpec* s = &h->specs[k];
        size_t n = 1;
        for (int q = 0; q < s->ndim; q++)
            n *= (size_t)s->shape[q];
        h->tsize[k] = n;
        h->tp[k] = real_alloc(n);
        h->dtp[k] = real_alloc(n);
        real base = s->init == ATTN_INIT_CONST ? s->init_value : 0.0f;
        real sd = tensor_noise > 0              ? tensor_noise
                  : s->init == ATTN_INIT_NORMAL ? s->init_value
                                                : 0.05f;
        for (size_t i = 0; i < n; i++)
            h->tp[k][i] = base + sd * rng_normal(&r);
    }
    const size_t BTC = (size_t)B * T * C;
    const int P = h->row->params_per_head;
    h->x = real_alloc(BTC);
    h->qkv = real_alloc(3 * BTC);
    h->out = real_alloc(BTC);
    h->w = real_alloc(BTC);
    h->att = real_alloc((size_t)B * NH * T * T);
    size_t cf = v->layer_cache_floats ? v->layer_cache_floats(&h->d, &h->hp) : 0;
    h->cache = real_alloc(cf + 1);
    h->qk_pos = real_alloc(2 * BTC); // rotated q, k under rope
    h->rowp = real_alloc((size_t)NH * P + 1);
    h->drowp = real_alloc((size_t)NH * P + 1);
    h->dx = real_alloc(BTC);
    h->dqkv = real_alloc(3 * BTC);
    fill_real(h->x, BTC, 1.0f, &r);
    fill_real(h->qkv, 3 * BTC, 1.0f, &r);
    fill_real(h->w, BTC, 1.0f, &r);
    for (int hd = 0; hd < NH; hd++) { // off the init's symmetries
        if (h->row->init_params) h->row->init_params(h->rowp + hd * P, &h->row_hp);
        for (int k = 0; k < P; k++)
            h->rowp[hd * P + k] += 0.02f * rng_normal(&r);
    }
    h->nposp = (size_t)attn_fire_nparams(NH);
    h->posp = real_alloc(h->nposp);
    h->dposp = real_alloc(h->nposp);
    attn_fire_init(h->posp, NH, rng_u64(&r));
    for (size_t i = 2; i < h->nposp; i++)
        h->posp[i] += 0.05f * rng_normal(&r);
    size_t rs = attn_row_scratch(h->row, T), rs_own = attn_row_scratch(h->own.row, T);
    h->ws = attn_workspace_new(B, T, NH, nthreads, rs > rs_own ? rs : rs_own, P);
    attn_workspace_prepare_pos(h->ws, pos, h->d.C); // as the model does at setup
    if (v->layer_scratch_floats) // the layer hooks' scratch, reserved at setup as the model does
        attn_workspace_reserve(h->ws, v->layer_scratch_floats(&h->d, &h->hp));
    h->L = (AttnLayer){.v = v,
                       .row = h->row,
                       .hp = &h->hp,
                       .row_hp = &h->row_hp,
                       .own = &h->own,
                       .d = h->d,
                       .layer = 0,
                       .step = 3,
                       .seed = 11,
                       .pos_encoding = pos,
                       .qk_pos = h->qk_pos,
                       .posp = h->posp,
                       .dposp = h->dposp,
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
    free(h->posp);
    free(h->dposp);
    free(h->dx);
    free(h->dqkv);
    attn_workspace_free(h->ws);
}

void harness_zero_grads(AttnHarness* h) {
    const size_t BTC = (size_t)h->d.B * h->d.T * h->d.C;
    memset(h->dx, 0, sizeof(real) * BTC);
    memset(h->dqkv, 0, sizeof(real) * 3 * BTC);
    memset(h->drowp, 0, sizeof(real) * ((size_t)h->d.NH * h->row->params_per_head + 1));
    memset(h->dposp, 0, sizeof(real) * h->nposp);
    for (int k = 0; k < h->ntens; k++)
        memset(h->dtp[k], 0, sizeof(real) * h->tsize[k]);
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

void harness_pass(AttnHarness* h) {
    harness_zero_grads(h);
    attention_forward(&h->L);
    attention_backward(&h->L);
}

void harness_expect_identical(const AttnHarness* a, const AttnHarness* b, const char* label) {
    const size_t BTC = (size_t)a->d.B * a->d.T * a->d.C;
    ck_assert_msg(memcmp(a->out, b->out, sizeof(real) * BTC) == 0, "%s: out differs 1 vs 2 threads",
                  label);
    ck_assert_msg(memcmp(a->dqkv, b->dqkv, sizeof(real) * 3 * BTC) == 0,
                  "%s: dqkv differs 1 vs 2 threads", label);
    ck_assert_msg(memcmp(a->dx, b->dx, sizeof(real) * BTC) == 0, "%s: dx differs 1 vs 2 threads",
                  label);
    const size_t P = (size_t)a->row->params_per_head;
    ck_assert_msg(memcmp(a->drowp, b->drowp, sizeof(real) * (size_t)a->d.NH * P) == 0,
                  "%s: row param grads differ 1 vs 2 threads", label);
    for (int k = 0; k < a->ntens; k++)
        ck_assert_msg(memcmp(a->dtp[k], b->dtp[k], sizeof(real) * a->tsize[k]) == 0,
                      "%s: grad of %s differs 1 vs 2 threads", label, a->specs[k].name);
}
