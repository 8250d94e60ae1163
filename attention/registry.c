// attention/registry.c: the list of attention variants. Adding a variant = one file exporting
// `const AttnVariant attn_<name>` + one line below; tests and --list-attention iterate this.
#include <stdio.h>
#include <string.h>

#include "attention/attention.h"

extern const AttnVariant attn_softmax;

static const AttnVariant* const ATTN_VARIANTS[] = {
    &attn_softmax,
};

#define N_VARIANTS ((int)(sizeof(ATTN_VARIANTS) / sizeof(ATTN_VARIANTS[0])))

int attn_count(void) {
    return N_VARIANTS;
}

const AttnVariant* attn_get(int i) {
    return i >= 0 && i < N_VARIANTS ? ATTN_VARIANTS[i] : NULL;
}

const AttnVariant* attn_lookup(const char* name) {
    for (int i = 0; i < N_VARIANTS; i++)
        if (strcmp(ATTN_VARIANTS[i]->name, name) == 0) return ATTN_VARIANTS[i];
    return NULL;
}
