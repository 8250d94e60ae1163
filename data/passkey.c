// data/passkey.c: passkey-retrieval sequences (layout in data/passkey.h).
#include "data/passkey.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void encode(Tokenizer* tok, const char* s, int** ids, size_t* n) {
    *n = tokenizer_encode(tok, s, strlen(s), 0, ids);
}

int passkey_from_tokenizer(Passkey* p, Tokenizer* tok) {
    memset(p, 0, sizeof(*p));
    p->use_tok = 1;
    encode(tok,
           "The grass is green. The sky is blue. The sun is yellow. Here we go. There and "
           "back again. ",
           &p->filler, &p->nfill);
    encode(tok, "The pass key is", &p->needle_pre, &p->npre);
    encode(tok, ". Remember it. ", &p->needle_post, &p->npost);
    encode(tok, "What is the pass key? The pass key is", &p->query, &p->nquery);
    int is_bpe = strcmp(tokenizer_kind(tok), "byte") != 0;
    for (int d = 0; d < 10; d++) {
        char s[4];
        snprintf(s, sizeof(s), is_bpe ? " %d" : "%d", d);
        int* ids;
        size_t n;
        encode(tok, s, &ids, &n);
        if (n != 1) {
            free(ids);
            passkey_free(p);
            return -1;
        }
        p->keys[d] = ids[0];
        free(ids);
    }
    return 0;
}

void passkey_from_ids(Passkey* p) {
    static int pre[] = {1, 2, 3}, post[] = {4}, query[] = {1, 2, 3};
    memset(p, 0, sizeof(*p));
    p->needle_pre = pre;
    p->npre = 3;
    p->needle_post = post;
    p->npost = 1;
    p->query = query;
    p->nquery = 3;
    for (int d = 0; d < 10; d++)
        p->keys[d] = 10 + d;
    p->use_tok = 0;
}

void passkey_free(Passkey* p) {
    if (p->use_tok) {
        free(p->filler);
        free(p->needle_pre);
        free(p->needle_post);
        free(p->query);
    }
    memset(p, 0, sizeof(*p));
}

int passkey_build(int* seq, int T, const Passkey* p, int key, double depth, int vocab, Rng* r) {
    const size_t nneedle = p->npre + 1 + p->npost;
    const int nfill = T - (int)nneedle - (int)p->nquery;
    if (nfill < 1) return -1;
    int ins = (int)(depth * nfill);
    if (p->use_tok) { // snap to a filler sentence boundary (start of a repeat)
        int per = (int)p->nfill;
        ins = (ins / per) * per;
    }
    int pos = 0;
    for (int i = 0; i < nfill; i++) {
        if (i == ins) {
            for (size_t j = 0; j < p->npre; j++)
                seq[pos++] = p->needle_pre[j];
            seq[pos++] = key;
            for (size_t j = 0; j < p->npost; j++)
                seq[pos++] = p->needle_post[j];
        }
        seq[pos++] = p->use_tok ? p->filler[(size_t)i % p->nfill]
                                : 20 + (int)rng_below(r, (uint64_t)(vocab - 20));
    }
    for (size_t j = 0; j < p->nquery; j++)
        seq[pos++] = p->query[j];
    return pos - 1;
}
