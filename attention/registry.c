// attention/registry.c: the registry of attention variants, built from the one list in
// attention/variants.def (adding a variant = one file exporting `const AttnVariant attn_<name>`
// + one X(name) line there); lookup by name with a "did you mean" for near misses. Tests and
// --list-attention iterate it.
#include <stdio.h>
#include <string.h>

#include "attention/attention.h"

#define X(name) extern const AttnVariant attn_##name;
#include "attention/variants.def"
#undef X

static const AttnVariant* const ATTN_VARIANTS[] = {
#define X(name) &attn_##name,
#include "attention/variants.def"
#undef X
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
