// model/open.h: one call opens a model from any source:
//   PATH       an attnlab model file (model_NNNNNNNN.bin): it carries the resolved config of its
//              run, so the model is rebuilt exactly (variant, hyperparameters, sizes); a run
//              directory: its newest complete checkpoint; for the tools (run == NULL) a file
//              with llm.c's magic also opens as llmc:PATH;
//   llmc:PATH  an llm.c model file (softmax attention, learned positions);
//   hf:DIR     a Hugging Face GPT-2 directory (DIR/config.json + DIR/model.safetensors).
// The source's header is read once (attnlab: trailer, header, tensor table and saved config in
// one pass; llm.c: its int32[256] header; HF: config.json), the saved config text is parsed from
// memory (config_load_text), attention is set up, the model is built and its weights loaded.
//
// Two uses:
//   tools (run == NULL): the model as saved. o->cfg gets the source's config (attnlab: the saved
//     one; llm.c / HF: defaults with the file's sizes and attention). Weights load strictly.
//   the trainer's init_from (run = the run's config): the model is built from *run, initialised
//     from run->seed, and the source's sizes must equal the config's (the error names the file,
//     its sizes and says to set the keys to match). attnlab files are matched by tensor name and
//     size (tensors the file lacks keep their initial values and are listed in o->note); llm.c
//     and HF files fill their tensors (variant tensors keep init). "scratch" (or "") only builds
//     and initialises.
#ifndef ATTNLAB_OPEN_H
#define ATTNLAB_OPEN_H

#include <stddef.h>

#include "common/config.h"
#include "model/gpt2.h"

typedef enum { MODEL_SRC_SCRATCH, MODEL_SRC_ATTNLAB, MODEL_SRC_LLMC, MODEL_SRC_HF } ModelSource;

typedef struct {
    const Config* run; // in: NULL for the model as saved, else the trainer's config (init_from)
    const GPT2* setup; // in, with run: *run translated once already (cfg from gpt2_config_from,
                       // attention from gpt2_setup_attention, no tensors): the model is built
                       // from it instead of translating *run again; NULL: model_open translates
    Config cfg;        // out: the config the model was built from
    ModelSource kind;  // out
    long step;         // out: the step saved in an attnlab file (0 otherwise)
    char note[1024];   // out: init_from an attnlab file: the tensors that kept their initial values
} ModelOpen;

// Open `source` into m (which need not be initialised; activations are not allocated: call
// gpt2_alloc_acts). 0, or -1 with err naming the file (m is then freed).
int model_open(GPT2* m, const char* source, ModelOpen* o, char* err, size_t errcap);

#endif
