// common/suggest.h: the one "did you mean" of attnlab. Every unknown name (a config key, an
// attention variant, an attn.* hyperparameter) is matched against the valid names by
// Damerau-Levenshtein distance (insertions, deletions, substitutions and swaps of two adjacent
// characters each cost 1; optimal string alignment; letters compared without case), and the
// closest one is suggested when it is near enough for the name's length (suggest_limit).
#ifndef ATTNLAB_SUGGEST_H
#define ATTNLAB_SUGGEST_H

#include <stddef.h>

// Longest name the distance handles; longer names are never near anything.
#define SUGGEST_MAX_LEN 95

// Damerau-Levenshtein (optimal string alignment) distance of a and b, case-insensitive;
// a large number (> every limit) when either is longer than SUGGEST_MAX_LEN.
int suggest_distance(const char* a, const char* b);

// The largest distance that still counts as a typo of a name of n characters: 1 up to 3
// characters, 2 up to 6, else 3.
int suggest_limit(size_t n);

// The closest candidate: offer each valid name in turn; the first of equally close ones wins.
typedef struct {
    const char* query;
    const char* best;
    int best_d;
} Suggest;

void suggest_init(Suggest* s, const char* query);
void suggest_offer(Suggest* s, const char* candidate);
// The closest name offered if it is within suggest_limit of the query, else NULL. A candidate
// equal to the query is returned too (callers ask only for names they did not find).
const char* suggest_result(const Suggest* s);

#endif
