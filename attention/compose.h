// attention/compose.h: typed access to the row maps that composed variants run with a fixed map
// of their own (rela's ReLU forms, asentmax's alpha-entmax): the variant objects themselves and
// the indices of the hyperparameters a wrapper sets. A composed variant fills the inner map's
// AttnHParams once, at setup, in its compose hook (AttnVariant.compose, called by attn_compose);
// forward and backward read the resolved AttnComposed (AttnLayer.own), with no registry look-up,
// text parsing or anything that can fail. relu.c and entmax.c assert that these indices match
// their hyperparameter tables.
#ifndef ATTNLAB_COMPOSE_H
#define ATTNLAB_COMPOSE_H

#include "attention/layer.h"

extern const AttnVariant attn_relu;
extern const AttnVariant attn_entmax;

// attn_relu: hyperparameter attn.form and its values (relu_n | relu | relu2)
enum { ATTN_RELU_HP_FORM = 0 };
enum { ATTN_RELU_FORM_N = 0, ATTN_RELU_FORM_PLAIN = 1, ATTN_RELU_FORM_SQ = 2 };
// attn_entmax: hyperparameters attn.alpha and attn.learn_alpha (0 = off)
enum { ATTN_ENTMAX_HP_ALPHA = 0, ATTN_ENTMAX_HP_LEARN = 1 };

#endif
