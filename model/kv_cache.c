// model/kv_cache.c: the key/value cache of incremental decoding (see kv_cache.h). One step runs
// the model's own forward for a single position (gpt2_forward_cached, B = T = 1 with the position
// offset) and, in each layer, kv_cache_attend in place of attention_forward: the new key and
// value are stored and the new query attends over all of them (attn_decode_forward).
#include "model/kv_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

struct KVCache {
    int L, C, NH, T; // layers, channels, heads, capacity in positions
    int len;         // positions cached
    int pos;         // ATTN_POS_*
    int nthreads;
    int token;      // the token of the step in progress (the forward keeps a pointer to it)
    int reposition; // rope keys stored raw and rotated at their cache index every step (stream)
    real* k;        // (L, T, C): rotated under rope, raw otherwise (xpos rotates per step)
    real* v;        // (L, T, C)
    real* krot;     // (T, C) under xpos: this step's rotated keys
    real* q;        // (C) the rotated query under rope / xpos
    real* scratch;  // attn_decode_scratch_floats of the largest row map
};

int kv_cache_supported(const GPT2* m, char* why, size_t cap) {
    for (int l = 0; l < m->cfg.n_layer; l++) {
        const AttnVariant* v = m->la[l].v;
        if (!attn_decode_exact(v, m->cfg.pos_encoding)) {
            if (v->layer_forward)
                snprintf(why, cap,
                         "attention '%s' (layer %d) is a layer-level variant, which the key/value "
                         "cache does not reproduce",
                         v->name, l);
            else
                snprintf(why, cap,
                         "attention '%s' (layer %d) reads key norms, which pos_encoding = %s "
                         "makes depend on the sequence length",
                         v->name, l, attn_pos_name(m->cfg.pos_encoding));
            return 0;
        }
    }
    return 1;
}

static size_t scratch_floats(const GPT2Config* cfg, int T, int nthreads, size_t row_scratch) {
    // attn_decode_scratch_floats with the largest row-map scratch of the layers
    return (size_t)cfg->n_head * (size_t)T + ((3 * (size_t)T + row_scratch + 15) & ~(size_t)15) *
                                                 (size_t)(nthreads > 0 ? nthreads : 1);
}

// Bytes real_alloc takes for n reals (util_floats_bytes rounds each buffer to 64 bytes).
static double reals_bytes(size_t n) {
    return (double)util_floats_bytes(n * (sizeof(real) / sizeof(float)));
}

double kv_cache_bytes(const GPT2Config* cfg, int T, int nthreads, size_t row_scratch_floats) {
    // what kv_cache_new allocates: k and v, q, krot under xpos, the scratch, and the struct
    const size_t TC = (size_t)T * (size_t)cfg->n_embd;
    double b = 2 * reals_bytes((size_t)cfg->n_layer * TC) + reals_bytes((size_t)cfg->n_embd);
    if (cfg->pos_encoding == ATTN_POS_XPOS) b += reals_bytes(TC);
    b += reals_bytes(scratch_floats(cfg, T, nthreads, row_scratch_floats));
    return b + (double)sizeof(KVCache);
}

double kv_cache_model_bytes(const GPT2* m, int T) {
    size_t rs = 0; // the largest row-map scratch of the layers, as kv_cache_new takes it
    for (int l = 0; l < m->cfg.n_layer; l++) {
        const size_t s = attn_row_scratch(m->la[l].row, T);
        if (s > rs) rs = s;
    }
    return kv_cache_bytes(&m->cfg, T, m->nthreads, rs);
}

static KVCache* cache_new(const GPT2* m, int T, int reposition) {
    char why[256];
    if (!kv_cache_supported(m, why, sizeof(why))) die(EXIT_USAGE, "%s", why);
    ASSERT(T >= 1 && T <= m->T && T <= m->cfg.block_size);
    KVCache* kv = callocCheck(1, sizeof(KVCache));
    kv->L = m->cfg.n_layer;
    kv->C = m->cfg.n_embd;
    kv->NH = m->cfg.n_head;
    kv->T = T;
    kv->pos = m->cfg.pos_encoding;
    kv->nthreads = m->nthreads;
    kv->reposition = reposition && kv->pos == ATTN_POS_ROPE;
    const size_t TC = (size_t)T * (size_t)kv->C;
    kv->k = real_alloc((size_t)kv->L * TC);
    kv->v = real_alloc((size_t)kv->L * TC);
    kv->q = real_alloc((size_t)kv->C);
    if (kv->pos == ATTN_POS_XPOS || kv->reposition) kv->krot = real_alloc(TC);
    size_t ns = 0;
    for (int l = 0; l < kv->L; l++) {
        size_t s = attn_decode_scratch_floats(m->la[l].row, T, kv->NH, kv->nthreads);
        if (s > ns) ns = s;
    }
    kv->scratch = real_alloc(ns);
    return kv;
}

KVCache* kv_cache_new(const GPT2* m, int T) {
    return cache_new(m, T, 0);
}

KVCache* kv_cache_new_stream(const GPT2* m, int T) {
    return cache_new(m, T, 1);
}

void kv_cache_free(KVCache* kv) {
    if (!kv) return;
    free(kv->k);
    free(kv->v);
    free(kv->krot);
    free(kv->q);
    free(kv->scratch);
    free(kv);
}

void kv_cache_reset(KVCache* kv) {
    kv->len = 0;
}

int kv_cache_len(const KVCache* kv) {
    return kv->len;
}

int kv_cache_capacity(const KVCache* kv) {
    return kv->T;
}

void kv_cache_evict(KVCache* kv, int from, int count) {
    ASSERT(from >= 0 && count >= 0 && from + count <= kv->len);
    if (count == 0) return;
    const size_t C = (size_t)kv->C, TC = (size_t)kv->T * C;
    const size_t keep = (size_t)(kv->len - from - count) * C; // the positions after the gap
    for (int l = 0; l < kv->L; l++) {
        real* K = kv->k + (size_t)l * TC + (size_t)from * C;
        real* Vl = kv->v + (size_t)l * TC + (size_t)from * C;
        memmove(K, K + (size_t)count * C, sizeof(real) * keep);
        memmove(Vl, Vl + (size_t)count * C, sizeof(real) * keep);
    }
    kv->len -= count;
}

const float* kv_cache_step(GPT2* m, KVCache* kv, int token) {
    ASSERT(kv->len < kv->T && kv->L == m->cfg.n_layer);
    kv->token = token;
    gpt2_forward_cached(m, kv, &kv->token);
    kv->len++;
    return gpt2_logits(m, 0, 0);
}

void kv_cache_attend(KVCache* kv, const AttnLayer* al) {
    const int C = kv->C, t = kv->len, n = t + 1, l = al->layer;
    const size_t TC = (size_t)kv->T * (size_t)C;
    ASSERT(t < kv->T && al->d.B == 1 && al->d.T == 1 && al->d.C == C);
    real* K = kv->k + (size_t)l * TC;
    real* V = kv->v + (size_t)l * TC;
    const real* qkv = al->qkv;
    memcpy(V + (size_t)t * C, qkv + 2 * (size_t)C, sizeof(real) * (size_t)C);
    AttnDecode s = {
        .q = qkv, .k = K, .v = V, .ld = (size_t)C, .n = n, .out = al->out, .scratch = kv->scratch};
    // the rotation of a call of length n, as the full forward over the prefix rotates it
    const AttnDims d = {.B = 1, .T = n, .C = C, .NH = kv->NH, .hs = C / kv->NH};
    if (kv->pos == ATTN_POS_ROPE && !kv->reposition) { // t's rotation does not depend on n
        attn_pos_rotate_rows(K + (size_t)t * C, (size_t)C, qkv + C, 3 * (size_t)C, &d, al->ws,
                             kv->pos, 1, t);
        attn_pos_rotate_rows(kv->q, (size_t)C, qkv, 3 * (size_t)C, &d, al->ws, kv->pos, 0, t);
        s.q = kv->q;
    } else if (kv->pos == ATTN_POS_XPOS || kv->reposition) {
        // xpos is centred on the call, and a repositioning cache's keys move down on eviction:
        // rotate every cached key again at its index 0..n-1 (the query at n - 1)
        memcpy(K + (size_t)t * C, qkv + C, sizeof(real) * (size_t)C);
        attn_pos_rotate_rows(kv->krot, (size_t)C, K, (size_t)C, &d, al->ws, kv->pos, 1, 0);
        attn_pos_rotate_rows(kv->q, (size_t)C, qkv, 3 * (size_t)C, &d, al->ws, kv->pos, 0, t);
        s.q = kv->q;
        s.k = kv->krot;
    } else {
        memcpy(K + (size_t)t * C, qkv + C, sizeof(real) * (size_t)C);
    }
    attn_decode_forward(al, &s, kv->T, kv->nthreads);
}
