// attention/decode.c: one new query over cached keys and values, for incremental decoding
// (model/kv_cache.c). For a row map the new position's output depends only on its own score row,
// so a cache of the earlier positions' keys and values gives the same head outputs as the driver's
// full forward (attention.c) over the whole prefix: the same score formula (scale q k^T, the ALiBi
// or FIRE bias of that row), the same row map call (t = n - 1 of a call of length n) and the same
// A·V. Layer-level variants build their outputs from more than the row (gates of the block input,
// mixes across heads, recurrent memories, convolutions over the score matrix) and are not cached;
// nor is a row map that reads key norms (keynorm) under xPos, whose key norms change with the
// length of the call (the full forward's earlier positions then differ from the cached ones).
#include "attention/attention.h"

#include <omp.h>
#include <string.h>

#include "common/util.h"

int attn_decode_exact(const AttnVariant* v, int pos_encoding) {
    if (v->layer_forward || !v->forward_row) return 0;
    // xPos scales key j by zeta^(-p/512) with p centred on the call's length: |k_j|^2 then
    // depends on how long the sequence is, and so does every earlier position's output
    return !(v->needs_key_sq && pos_encoding == ATTN_POS_XPOS);
}

static size_t per_thread(const AttnVariant* row, int T) {
    return (3 * (size_t)T + attn_row_scratch(row, T) + 15) & ~(size_t)15;
}

size_t attn_decode_scratch_floats(const AttnVariant* row, int T, int NH, int nthreads) {
    return (size_t)NH * (size_t)T + per_thread(row, T) * (size_t)(nthreads > 0 ? nthreads : 1);
}

void attn_decode_forward(const AttnLayer* L, const AttnDecode* s, int T, int nthreads) {
    ASSERT(attn_decode_exact(L->v, L->pos_encoding) && s->n >= 1 && s->n <= T);
    const AttnCore c = attn_layer_core(L);
    const int NH = L->d.NH, hs = L->d.hs, C = L->d.C, n = s->n, t = n - 1;
    const int P = c.row->params_per_head;
    const int stride = c.rowp_stride > 0 ? c.rowp_stride : P;
    real* fire = NULL;
    if (L->pos_encoding == ATTN_POS_FIRE) { // row t of every head's bias, heads n apart
        // the model gives every layer its FIRE parameters
        ASSERT(L->posp);
        fire = s->scratch;
        attn_fire_bias_row(fire, (size_t)n, L->posp, NH, t);
    }
    const size_t pt = per_thread(c.row, T);
    real* base = s->scratch + (size_t)NH * (size_t)T;
#pragma omp parallel for schedule(static) num_threads(nthreads > 0 ? nthreads : 1)
    for (int h = 0; h < NH; h++) {
        real* S = base + (size_t)omp_get_thread_num() * pt;
        real* A = S + T;
        real* key_sq = A + T;
        real* row_scratch = key_sq + T;
        const real* k = s->k + (size_t)h * hs;
        const real* v = s->v + (size_t)h * hs;
        // the driver's scores(): scale q k^T, then the ALiBi penalty, then the FIRE bias
        real_gemm(0, 1, 1, n, hs, c.scale, s->q + (size_t)h * hs, C, k, (int)s->ld, 0.0f, S, n);
        if (L->pos_encoding == ATTN_POS_ALIBI) {
            const real slope = attn_alibi_slope(h, NH);
            for (int j = 0; j <= t; j++)
                S[j] -= slope * (real)(t - j);
        }
        if (fire)
            for (int j = 0; j <= t; j++)
                S[j] += fire[(size_t)h * n + j];
        if (c.row->needs_key_sq) // the driver's key_norms()
            for (int j = 0; j < n; j++) {
                const real* kj = k + (size_t)j * s->ld;
                real q2 = 0.0f;
                for (int i = 0; i < hs; i++)
                    q2 += kj[i] * kj[i];
                key_sq[j] = q2;
            }
        AttnRowCtx ctx = {.hp = c.hp,
                          .p = P > 0 ? c.rowp + (size_t)h * stride : NULL,
                          .scratch = row_scratch,
                          .key_sq = c.row->needs_key_sq ? key_sq : NULL,
                          .t = t,
                          .T = n,
                          .h = h,
                          .step = c.step,
                          .seed = c.seed,
                          .layer = c.layer};
        c.row->forward_row(A, S, n, &ctx);
        real_gemm(0, 0, 1, hs, n, 1.0f, A, n, v, (int)s->ld, 0.0f, s->out + (size_t)h * hs, C);
    }
}
