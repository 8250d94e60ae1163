// attention/compose.h: typed access to the row maps that layer-level variants compose with a
// fixed map of their own (rela's ReLU forms, asentmax's alpha-entmax): the variant objects
// themselves and the indices of the hyperparameters a wrapper sets, so a wrapper fills the
// inner map's AttnHParams directly, with no registry look-up or text parsing and nothing that
// can fail inside forward or backward. relu.c and entmax.c assert that these indices match
// their hyperparameter tables.
#ifndef ATTNLAB_COMPOSE_H
#define ATTNLAB_COMPOSE_H

#include "attention/attention.h"

extern const AttnVariant attn_relu;
extern const AttnVariant attn_entmax;

// attn_relu: hyperparameter attn.form and its values (relu_n | relu | relu2)
enum { ATTN_RELU_HP_FORM = 0 };
enum { ATTN_RELU_FORM_N = 0, ATTN_RELU_FORM_PLAIN = 1, ATTN_RELU_FORM_SQ = 2 };
// attn_entmax: hyperparameters attn.alpha and attn.learn_alpha (0 = off)
enum { ATTN_ENTMAX_HP_ALPHA = 0, ATTN_ENTMAX_HP_LEARN = 1 };

#endif
