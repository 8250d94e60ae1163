// common/cpuinfo.h: the CPU a run trains on, as results record it (the run event of
// metrics.jsonl, main.log, and through them each committed result's provenance.json): the model
// name and the instruction-set flags that select attnlab's kernel paths.
#pragma once
#include <stddef.h>

// The flags that change which kernels run or how fast (OpenBLAS's and oneDNN's dispatch), in
// this order, as /proc/cpuinfo spells them.
#define CPUINFO_FLAGS "avx2 fma avx512f avx512_bf16 avx512_fp16 amx_bf16 amx_tile"

// model: the "model name" of the first processor ("unknown" where /proc/cpuinfo has none);
// flags: the subset of CPUINFO_FLAGS the CPU has, space-separated ("" for none). Both are always
// NUL-terminated within their capacity.
void cpuinfo_describe(char* model, size_t model_cap, char* flags, size_t flags_cap);

// The same from a /proc/cpuinfo-format text (tests).
void cpuinfo_parse(const char* text, char* model, size_t model_cap, char* flags, size_t flags_cap);
