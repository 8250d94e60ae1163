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
// Attention other than plain softmax (or non-learned positions, qk_norm) has no Hugging Face
// equivalent: the export then records attnlab_attention / attnlab_pos_encoding /
// attnlab_qk_norm in __metadata__ and config.json, saves variant tensors as "attnlab.<name>",
// and warns on stderr.
//
// Import reads the same layout with or without the "transformer." prefix (the original GPT-2
// checkpoint uses "wte.weight", "h.0.ln_1.weight", ...), in F32, F16, BF16 or F64. The header is
// validated fully (length, JSON, dtype, shapes, offsets in bounds and contiguous); errors name
// the file and the tensor.
#ifndef ATTNLAB_HF_H
#define ATTNLAB_HF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model/gpt2.h"

#define ST_MAX_DIMS   8
#define ST_MAX_HEADER (100u << 20) // header bytes accepted (safetensors' own limit is 100 MB)

// Every safetensors dtype is accepted in a header (sizes are validated); st_read_f32 converts
// F32, F16, BF16 and F64, the others (masks, integer buffers) can only be skipped.
enum { ST_F32, ST_F16, ST_BF16, ST_F64, ST_OTHER1, ST_OTHER2, ST_OTHER4, ST_OTHER8 };

typedef struct {
    char name[160];
    int dtype; // ST_*
    char dtype_name[12];
    int ndim;
    uint64_t shape[ST_MAX_DIMS];
    uint64_t numel;
    uint64_t begin, end; // byte offsets into the data section
} StTensor;

typedef struct {
    char path[1024];
    FILE* f;
    uint64_t data_start; // 8 + header length
    uint64_t data_size;  // bytes after the header
    StTensor* t;
    int n;
    char attention[256];   // __metadata__ attnlab_attention, or "" if absent
    char pos_encoding[32]; // __metadata__ attnlab_pos_encoding, or ""
    int qk_norm;           // __metadata__ attnlab_qk_norm ("1"), else 0
} SafeTensors;

// Open and validate a safetensors file (the data stays on disk). 0, or -1 with err naming the
// file and what is wrong.
int st_open(SafeTensors* st, const char* path, char* err, size_t errcap);
void st_close(SafeTensors* st);
int st_find(const SafeTensors* st, const char* name); // index, or -1
// Read tensor i as float32 (converting F16 / BF16 / F64) into out[numel]. 0, or -1 with err
// (also for integer or boolean tensors, which are not parameters).
int st_read_f32(const SafeTensors* st, int i, float* out, char* err, size_t errcap);

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

// 1 if the model is exactly Hugging Face GPT-2 (softmax everywhere, learned positions, no
// qk_norm), else 0.
int hf_is_plain_gpt2(const GPT2* m);

#endif
