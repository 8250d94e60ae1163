// model/hf.h: Hugging Face interop. Export writes the file set that transformers'
// GPT2LMHeadModel.from_pretrained(DIR) and GPT2TokenizerFast.from_pretrained(DIR) load:
//   model.safetensors  8-byte little-endian header length, a JSON header (padded with spaces to
//                      a multiple of 8) with __metadata__ {"format":"pt"} and per tensor dtype,
//                      shape and data_offsets, then the raw little-endian data, contiguous.
//                      Names are GPT2LMHeadModel's ("transformer.wte.weight",
//                      "transformer.h.0.attn.c_attn.weight", ...); Conv1D weights are stored
//                      (in, out), i.e. transposed against attnlab's (out, in); wte holds the
//                      vocab_size real rows (no padding); no lm_head (tied to wte).
//   config.json        GPT2Config keys (model_type gpt2, n_embd, n_head, n_layer, ...).
//   vocab.json, merges.txt  copies of the GPT-2 tokenizer files encoder.json and vocab.bpe.
// Attention other than plain softmax (or non-learned positions, qk_norm, a residual mode other
// than standard, value_residual) has no Hugging Face equivalent: a standard GPT-2 loader would
// read the weights and compute plain GPT-2, silently. ./export refuses such a model unless asked
// (--allow-nonstandard); hf_export then writes model_type HF_MODEL_TYPE_ATTNLAB and architectures
// [HF_ARCH_ATTNLAB] (names transformers does not take for GPT-2), records attnlab_attention /
// attnlab_pos_encoding / attnlab_qk_norm / attnlab_qk_norm_kind / attnlab_residual /
// attnlab_value_residual in __metadata__ and config.json (names from the enums' tables:
// attn_pos_name, attn_qknorm_name, resid_name), saves the model's own tensors (variant tensors,
// the FIRE MLP, resid.query, the value-residual lambdas, the qk-norm gains) as "attnlab.<name>",
// and warns on stderr. Import takes model_type gpt2 or HF_MODEL_TYPE_ATTNLAB and reads those keys
// back (an unknown name or a flag other than 0/1 is an error naming the file and the key), so
// hf:DIR rebuilds the model that was exported.
//
// Import reads the same layout with or without the "transformer." prefix (the original GPT-2
// checkpoint uses "wte.weight", "h.0.ln_1.weight", ...), in F32, F16, BF16 or F64. The file is
// read by common/safetensors.h, which validates the header fully (length, JSON, dtype, shapes,
// offsets in bounds and contiguous); errors name the file and the tensor.
#ifndef ATTNLAB_HF_H
#define ATTNLAB_HF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/safetensors.h"
#include "model/gpt2.h"

// Model sizes and attention spec from DIR/config.json (and the safetensors metadata if
// config.json has no attnlab_attention). attention gets "softmax" for plain GPT-2.
int hf_read_config(const char* dir, GPT2Config* cfg, char* attention, size_t attcap, char* err,
                   size_t errcap);

// Load DIR/model.safetensors into a built model whose sizes match. Variant tensors missing from
// the file keep their values; padded vocabulary rows are zero. 0, or -1 with err.
int hf_load(GPT2* m, const char* dir, char* err, size_t errcap);
// The same from a safetensors file path.
int hf_load_safetensors(GPT2* m, const char* path, char* err, size_t errcap);

// Write DIR/model.safetensors and DIR/config.json, and, when tokenizer_dir is not NULL,
// DIR/vocab.json and DIR/merges.txt copied from tokenizer_dir/encoder.json and vocab.bpe.
// Every file is written atomically. 0, or -1 with err.
int hf_export(const GPT2* m, const char* dir, const char* tokenizer_dir, char* err, size_t errcap);

#define HF_MODEL_TYPE_ATTNLAB "attnlab-gpt2"
#define HF_ARCH_ATTNLAB       "AttnlabGPT2LMHeadModel"

// 1 if the model is exactly Hugging Face GPT-2 (softmax everywhere, learned positions, no
// qk_norm, standard residual, no value residual, no tensor GPT-2 lacks), else 0.
int hf_is_plain_gpt2(const GPT2* m);
// The opposite, with what differs from GPT-2 written to why (when not NULL), e.g. "attention
// 'softpick' (GPT-2: softmax), pos_encoding = rope (GPT-2: learned)"; "" for plain GPT-2.
int hf_nonstandard(const GPT2* m, char* why, size_t cap);

#endif
