// attention/layer_check.c: the configuration checks of an attention layer, run once when the
// model is set up (model/attn_setup.c, gpt2_setup_attention) so that a bad configuration is
// refused before anything is allocated, with a message naming the key and the value. The forward
// and backward then assume what was checked here: they neither die on a configuration nor
// allocate (docs/design.md). What a layer-level variant itself needs is its layer_check hook.
#include <stdio.h>

#include "attention/attention.h"

int attn_layer_check(const AttnVariant* v, const AttnHParams* hp, const AttnDims* d, int pos,
                     char* err, size_t errcap) {
    if (attn_pos_rotates(pos) && d->hs % 2 != 0) {
        snprintf(err, errcap,
                 "key 'pos_encoding': %s rotates channel pairs within each head and needs an even "
                 "head size, and n_embd %d / n_head %d gives %d",
                 attn_pos_name(pos), d->C, d->NH, d->hs);
        return -1;
    }
    if (pos == ATTN_POS_FIRE && d->NH > ATTN_FIRE_MAX_HEADS) {
        snprintf(err, errcap, "key 'n_head': pos_encoding = %s supports at most %d heads, not %d",
                 attn_pos_name(pos), ATTN_FIRE_MAX_HEADS, d->NH);
        return -1;
    }
    return v->layer_check ? v->layer_check(d, hp, pos, err, errcap) : 0;
}
