// model/metrics_dump.c: attention-map files (metrics.h): PREFIX.npy with the exact causal
// weights of the last forward for chosen layers and heads, and the PREFIX.json sidecar with the
// tokens, indices, variant and step. Used by the training dumps and by ./attnmap.
#include <stdlib.h>
#include <string.h>

#include "common/npy.h"
#include "common/util.h"
#include "model/metrics.h"

int metrics_write_attention(const GPT2* m, const char* prefix, int b, int T, const int* layers,
                            int nl, const int* heads, int nh, int fp16, const int* tokens,
                            const TokenText* tok, long step, const char* source, char* err,
                            size_t errcap) {
    const int B = m->cur_B, Tc = m->cur_T, NH = m->cfg.n_head;
    ASSERT(b >= 0 && b < B && T >= 1 && T <= Tc && nl >= 1 && nh >= 1);
    char path[1300];
    snprintf(path, sizeof(path), "%s.npy", prefix);
    const int shape[4] = {nl, nh, T, T};
    NpyWriter w;
    if (npy_open(&w, path, shape, 4, fp16, err, errcap)) return -1;
    float* buf = mallocCheck(sizeof(float) * (size_t)T * T);
    for (int li = 0; li < nl; li++) {
        for (int hi = 0; hi < nh; hi++) {
            const int l = layers[li], h = heads[hi];
            ASSERT(l >= 0 && l < m->cfg.n_layer && h >= 0 && h < NH);
            const float* A = m->att + (size_t)l * B * NH * Tc * Tc + ((size_t)b * NH + h) * Tc * Tc;
            for (int t = 0; t < T; t++)
                memcpy(buf + (size_t)t * T, A + (size_t)t * Tc, sizeof(float) * (size_t)T);
            if (npy_write_chunk(&w, buf, (size_t)T * T)) {
                free(buf);
                return -1;
            }
        }
    }
    free(buf);
    if (npy_commit(&w)) return -1;

    const int* seq = tokens + (size_t)b * Tc;
    JsonBuf j;
    json_init(&j);
    json_begin(&j);
    json_str(&j, "variant", m->attention);
    json_int(&j, "step", step);
    json_str(&j, "source", source);
    json_int(&j, "T", T);
    json_int_array(&j, "shape", shape, 4);
    json_str(&j, "dtype", fp16 ? "float16" : "float32");
    json_int_array(&j, "layers", layers, (size_t)nl);
    json_int_array(&j, "heads", heads, (size_t)nh);
    json_array_begin(&j, "layer_variants");
    for (int li = 0; li < nl; li++)
        json_str(&j, NULL, m->la[layers[li]].v->name);
    json_array_end(&j);
    json_int_array(&j, "tokens", seq, (size_t)T);
    json_array_begin(&j, "token_strings");
    for (int t = 0; t < T; t++) {
        size_t len = 0;
        const unsigned char* s = tok && tok->bytes ? tok->bytes(tok->ctx, seq[t], &len) : NULL;
        if (s)
            json_strn(&j, NULL, (const char*)s, len);
        else
            json_null(&j, NULL);
    }
    json_array_end(&j);
    json_end(&j);
    snprintf(path, sizeof(path), "%s.json", prefix);
    int rc = json_write_file(&j, path, err, errcap);
    json_free(&j);
    return rc;
}
