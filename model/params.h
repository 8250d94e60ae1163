// model/params.h: building a model's parameter list from the base table (model/params.c). Used by
// gpt2_build; everything else reads the resulting GPT2.specs.
#ifndef ATTNLAB_PARAMS_H
#define ATTNLAB_PARAMS_H

#include <stddef.h>

#include "model/gpt2.h"

// Append one tensor to m->specs (llmc = -1, no Hugging Face name); returns it for the caller to
// fill in the rest.
ParamSpec* gpt2_add_spec(GPT2* m, const char* name, int ndim, const size_t* shape, int stacked,
                         int init, int decay);
// Append GPT-2's 16 base tensors, in llm.c's order, with shapes resolved against m->cfg.
void gpt2_add_base_specs(GPT2* m);

#endif
