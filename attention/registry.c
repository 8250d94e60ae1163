// attention/registry.c: the list of attention variants. Adding a variant = one file exporting
// `const AttnVariant attn_<name>` + one line below; tests and --list-attention iterate this.
#include <stdio.h>
#include <string.h>

#include "attention/attention.h"

extern const AttnVariant attn_softmax;
extern const AttnVariant attn_gated;
extern const AttnVariant attn_affine;
extern const AttnVariant attn_asentmax;
extern const AttnVariant attn_ssa;
extern const AttnVariant attn_rela;
extern const AttnVariant attn_cog;
extern const AttnVariant attn_entmax;
extern const AttnVariant attn_sparsemax;
extern const AttnVariant attn_quantized;
extern const AttnVariant attn_pot;
extern const AttnVariant attn_hccs;
extern const AttnVariant attn_multimax;
extern const AttnVariant attn_softplus;
extern const AttnVariant attn_swat;
extern const AttnVariant attn_slowgrow;
extern const AttnVariant attn_normalized;
extern const AttnVariant attn_relu_ln;
extern const AttnVariant attn_linear_scale;
extern const AttnVariant attn_shaped;
extern const AttnVariant attn_keynorm;
extern const AttnVariant attn_credal;
extern const AttnVariant attn_ssmax;
extern const AttnVariant attn_logn;
extern const AttnVariant attn_softmax1;
extern const AttnVariant attn_sigmoid;
extern const AttnVariant attn_softpick;
extern const AttnVariant attn_clipped;
extern const AttnVariant attn_relu;
extern const AttnVariant attn_polynomial;
extern const AttnVariant attn_sa_softmax;
extern const AttnVariant attn_boosted;
extern const AttnVariant attn_twicing;
extern const AttnVariant attn_window;
extern const AttnVariant attn_linear;
extern const AttnVariant attn_topk;
extern const AttnVariant attn_softcap;
extern const AttnVariant attn_consmax;
extern const AttnVariant attn_polymax;
extern const AttnVariant attn_squareplus;
extern const AttnVariant attn_sigsoftmax;
extern const AttnVariant attn_softermax;
extern const AttnVariant attn_stablemax;
extern const AttnVariant attn_gumbel;
extern const AttnVariant attn_talking_heads;
extern const AttnVariant attn_diff;
extern const AttnVariant attn_selective;
extern const AttnVariant attn_lucid;
extern const AttnVariant attn_multiscreen;
extern const AttnVariant attn_deltanet;
extern const AttnVariant attn_gated_deltanet;
extern const AttnVariant attn_mta;

static const AttnVariant* const ATTN_VARIANTS[] = {
    &attn_softmax,      &attn_gated,      &attn_affine,
    &attn_asentmax,     &attn_ssa,        &attn_rela,
    &attn_cog,          &attn_entmax,     &attn_sparsemax,
    &attn_quantized,    &attn_pot,        &attn_hccs,
    &attn_multimax,     &attn_softplus,   &attn_swat,
    &attn_slowgrow,     &attn_normalized, &attn_relu_ln,
    &attn_linear_scale, &attn_shaped,     &attn_keynorm,
    &attn_credal,       &attn_ssmax,      &attn_logn,
    &attn_softmax1,     &attn_sigmoid,    &attn_softpick,
    &attn_clipped,      &attn_relu,       &attn_polynomial,
    &attn_sa_softmax,   &attn_boosted,    &attn_twicing,
    &attn_window,       &attn_linear,     &attn_topk,
    &attn_softcap,      &attn_consmax,    &attn_polymax,
    &attn_squareplus,   &attn_sigsoftmax, &attn_softermax,
    &attn_stablemax,    &attn_gumbel,     &attn_talking_heads,
    &attn_diff,         &attn_selective,  &attn_lucid,
    &attn_multiscreen,  &attn_deltanet,   &attn_gated_deltanet,
    &attn_mta,
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
