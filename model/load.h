// model/load.h: build a GPT2 from an attnlab model file alone: the file carries the resolved
// config of its run, so tools (generate, attnmap, evaluate, export) need nothing else.
#ifndef ATTNLAB_LOAD_H
#define ATTNLAB_LOAD_H

#include <stddef.h>

#include "common/config.h"
#include "model/gpt2.h"

// Parse config text (the `key = value` format) into c, starting from defaults. err names
// `what` (e.g. the checkpoint path) on failure.
int config_from_text(Config* c, const char* text, const char* what, char* err, size_t errcap);

// Read the config saved in `path`, build the model, load its weights and allocate activations
// for (B, T) with nthreads threads. *cfg gets the saved config and *step the saved step.
// 0, or -1 with err.
int gpt2_load_checkpoint(GPT2* m, Config* cfg, long* step, const char* path, int B, int T,
                         int nthreads, char* err, size_t errcap);

#endif
