// data/passkey.h: the passkey-retrieval sequences of ./evaluate --passkey.
//
// With a tokenizer:
//   filler  "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back
//            again. " repeated
//   needle  "The pass key is" K ". Remember it. "   (K the token of " D", D a digit 0-9, or of
//            "D" for the byte tokenizer: one token each, else passkey_from_tokenizer fails)
//   query   "What is the pass key? The pass key is"
// Without one, token ids stand in: filler ids drawn uniformly from [20, vocab), needle
// [1 2 3] K [4] with K in 10..19, query [1 2 3].
// A sequence of T tokens is filler with the needle inserted at filler depth `depth` in [0, 1)
// (snapped down to the start of a filler repeat in text mode), then the query; the key is the
// answer predicted at the last query token.
#ifndef ATTNLAB_PASSKEY_H
#define ATTNLAB_PASSKEY_H

#include <stddef.h>

#include "common/rng.h"
#include "data/tokenizer.h"

typedef struct {
    int *filler, *needle_pre, *needle_post, *query;
    size_t nfill, npre, npost, nquery;
    int keys[10]; // the token of each digit 0..9
    int use_tok;  // 1: text mode (arrays owned), 0: token-id mode
} Passkey;

// Text mode from a tokenizer. 0, or -1 when a digit is not a single token (p is then freed).
int passkey_from_tokenizer(Passkey* p, Tokenizer* tok);
// Token-id mode (static arrays).
void passkey_from_ids(Passkey* p);
void passkey_free(Passkey* p);

// Fill seq[0..) with one sequence of length T holding `key` at depth `depth`; returns the
// position of the last query token, or -1 when T is too short for the pattern. Filler ids in
// token-id mode come from r, uniform in [20, vocab).
int passkey_build(int* seq, int T, const Passkey* p, int key, double depth, int vocab, Rng* r);

#endif
