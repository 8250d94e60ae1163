// model/kv_store.c: the key/value cache's storage and the attention of one layer over it (see
// kv_store.h). The new key and value are stored and the new query attends over all of them
// (attn_decode_forward); nothing here knows the model.
#include "model/kv_store.h"

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

// Bytes real_alloc takes for n reals (util_floats_bytes rounds each buffer to 64 bytes).
static double reals_bytes(size_t n) {
    return (double)util_floats_bytes(n * (sizeof(real) / sizeof(float)));
}

double kv_store_bytes(const KVStoreShape* s) {
    // what kv_store_new allocates: k and v, q, krot under xpos, the scratch, and the struct
    const size_t TC = (size_t)s->T * (size_t)s->n_embd;
    double b = 2 * reals_bytes((size_t)s->n_layer * TC) + reals_bytes((size_t)s->n_embd);
    if (s->pos == ATTN_POS_XPOS) b += reals_bytes(TC);
    b += reals_bytes(s->scratch_floats);
    return b + (double)sizeof(KVCache);
}

KVCache* kv_store_new(const KVStoreShape* s) {
    KVCache* kv = callocCheck(1, sizeof(KVCache));
    kv->L = s->n_layer;
    kv->C = s->n_embd;
    kv->NH = s->n_head;
    kv->T = s->T;
    kv->pos = s->pos;
    kv->nthreads = s->nthreads;
    kv->reposition = s->reposition && kv->pos == ATTN_POS_ROPE;
    const size_t TC = (size_t)kv->T * (size_t)kv->C;
    kv->k = real_alloc((size_t)kv->L * TC);
    kv->v = real_alloc((size_t)kv->L * TC);
    kv->q = real_alloc((size_t)kv->C);
    if (kv->pos == ATTN_POS_XPOS || kv->reposition) kv->krot = real_alloc(TC);
    kv->scratch = real_alloc(s->scratch_floats);
    return kv;
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

const int* kv_store_push(KVCache* kv, int token) {
    ASSERT(kv->len < kv->T);
    kv->token = token;
    return &kv->token;
}

void kv_store_commit(KVCache* kv) {
    ASSERT(kv->len < kv->T);
    kv->len++;
}

void kv_cache_attend(KVCache* kv, const AttnLayer* al) {
    const int C = kv->C, t = kv->len, n = t + 1, l = al->layer;
    const size_t TC = (size_t)kv->T * (size_t)C;
    ASSERT(t < kv->T && l < kv->L && al->d.B == 1 && al->d.T == 1 && al->d.C == C);
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
