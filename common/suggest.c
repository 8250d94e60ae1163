// common/suggest.c: "did you mean" (see suggest.h): Damerau-Levenshtein distance and the closest
// of a list of names within a length-dependent limit.
#include "common/suggest.h"

#include <ctype.h>
#include <string.h>

int suggest_distance(const char* a, const char* b) {
    enum { N = SUGGEST_MAX_LEN + 1 };
    const size_t na = strlen(a), nb = strlen(b);
    if (na > SUGGEST_MAX_LEN || nb > SUGGEST_MAX_LEN) return 1 << 20;
    // three rows of the (na+1) x (nb+1) table: i-2, i-1, i
    int r0[N + 1], r1[N + 1], r2[N + 1];
    int *pp = r0, *prev = r1, *cur = r2;
    for (size_t j = 0; j <= nb; j++)
        prev[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        cur[0] = (int)i;
        const int ca = tolower((unsigned char)a[i - 1]);
        for (size_t j = 1; j <= nb; j++) {
            const int cb = tolower((unsigned char)b[j - 1]);
            int d = prev[j - 1] + (ca != cb);           // substitute (or keep)
            if (prev[j] + 1 < d) d = prev[j] + 1;       // delete a[i-1]
            if (cur[j - 1] + 1 < d) d = cur[j - 1] + 1; // insert b[j-1]
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == cb && pp[j - 2] + 1 < d)
                d = pp[j - 2] + 1; // swap two adjacent characters
            cur[j] = d;
        }
        int* t = pp;
        pp = prev;
        prev = cur;
        cur = t;
    }
    return prev[nb];
}

int suggest_limit(size_t n) {
    return n <= 3 ? 1 : n <= 6 ? 2 : 3;
}

void suggest_init(Suggest* s, const char* query) {
    s->query = query;
    s->best = NULL;
    s->best_d = 1 << 30;
}

void suggest_offer(Suggest* s, const char* candidate) {
    if (!candidate) return;
    const int d = suggest_distance(s->query, candidate);
    if (d < s->best_d) {
        s->best_d = d;
        s->best = candidate;
    }
}

const char* suggest_result(const Suggest* s) {
    return s->best && s->best_d <= suggest_limit(strlen(s->query)) ? s->best : NULL;
}
