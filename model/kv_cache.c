// model/kv_cache.c: the key/value cache of a GPT2 for incremental decoding (see kv_cache.h): which
// models can decode from one, the cache sized for a model, and one step. A step runs the model's
// own forward for a single position (gpt2_forward_cached, B = T = 1 with the position offset),
// whose layers attend over the cache (kv_cache_attend, model/kv_store.c) in place of
// attention_forward.
#include "model/kv_cache.h"

#include <stdio.h>

#include "common/util.h"

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

// Bytes kv_cache_new takes for a model of these sizes (the memory estimate): keys and values
// (n_layer, T, n_embd) each, the query (n_embd), the rotated keys (T, n_embd) under xpos, the
// attention scratch (attn_decode_scratch_floats with the largest row-map scratch
// row_scratch_floats of the layers and nthreads threads), each buffer as real_alloc rounds it, and
// the struct itself.
static double kv_cache_bytes(const GPT2Config* cfg, int T, int nthreads,
                             size_t row_scratch_floats) {
    const KVStoreShape s = {.n_layer = cfg->n_layer,
                            .n_embd = cfg->n_embd,
                            .n_head = cfg->n_head,
                            .T = T,
                            .pos = cfg->pos_encoding,
                            .nthreads = nthreads,
                            .scratch_floats = scratch_floats(cfg, T, nthreads, row_scratch_floats)};
    return kv_store_bytes(&s);
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
    KVStoreShape s = {.n_layer = m->cfg.n_layer,
                      .n_embd = m->cfg.n_embd,
                      .n_head = m->cfg.n_head,
                      .T = T,
                      .pos = m->cfg.pos_encoding,
                      .nthreads = m->nthreads,
                      .reposition = reposition};
    for (int l = 0; l < s.n_layer; l++) {
        size_t n = attn_decode_scratch_floats(m->la[l].row, T, s.n_head, s.nthreads);
        if (n > s.scratch_floats) s.scratch_floats = n;
    }
    return kv_store_new(&s);
}

KVCache* kv_cache_new(const GPT2* m, int T) {
    return cache_new(m, T, 0);
}

KVCache* kv_cache_new_stream(const GPT2* m, int T) {
    return cache_new(m, T, 1);
}

const float* kv_cache_step(GPT2* m, KVCache* kv, int token) {
    ASSERT(kv_cache_len(kv) < kv_cache_capacity(kv));
    gpt2_forward_cached(m, kv, kv_store_push(kv, token));
    kv_store_commit(kv);
    return gpt2_logits(m, 0, 0);
}
