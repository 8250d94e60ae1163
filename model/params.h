// model/params.h: building a model's parameter list from the parameter table (model/params.c).
// Used by gpt2_build; everything else reads the resulting GPT2.specs.
#ifndef ATTNLAB_PARAMS_H
#define ATTNLAB_PARAMS_H

#include "model/gpt2.h"

// Resolve every row of the table that m's config switches on, in table order, into m->specs
// (and m->row_spec, each layer's LayerAttn.tensor_spec). Attention must be set up first.
void gpt2_add_specs(GPT2* m);

#endif
