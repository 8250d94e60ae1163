// common/cpuinfo.h: the CPU a run trains on, as results record it (the run event of
// metrics.jsonl, main.log, and through them each committed result's provenance.json): the model
// name and the instruction-set flags that select attnlab's kernel paths.
#pragma once
#include <stddef.h>
#include <stdio.h>

// The flags that change which kernels run or how fast (OpenBLAS's and oneDNN's dispatch), in
// this order, as /proc/cpuinfo spells them.
#define CPUINFO_FLAGS "avx2 fma avx512f avx512_bf16 avx512_fp16 amx_bf16 amx_tile"

// model: the "model name" of the first processor ("unknown" where /proc/cpuinfo has none);
// flags: the subset of CPUINFO_FLAGS the CPU has, space-separated ("" for none). Both are always
// NUL-terminated within their capacity.
void cpuinfo_describe(char* model, size_t model_cap, char* flags, size_t flags_cap);

// The same from a /proc/cpuinfo-format text (tests).
void cpuinfo_parse(const char* text, char* model, size_t model_cap, char* flags, size_t flags_cap);

// OpenBLAS picks its sgemm kernels ("core") from the CPU at start-up unless the environment
// variable OPENBLAS_CORETYPE names one. A site or a shell profile that forces an older core
// (Haswell's AVX2 kernels on an AVX-512 CPU, say) makes every fp32 matmul slower, and nothing
// else in a run's output says why. cpuinfo_blas_core_note writes one line into out when
// forced_core (the variable's value; NULL or "" when unset) names a core whose kernels use a
// smaller instruction set than cpu_flags (a CPUINFO_FLAGS subset, as cpuinfo_describe gives)
// offers, and returns 1; with portable set (the portable build, which pins its core on purpose)
// the line says that instead; otherwise out is "" and it returns 0. A core name OpenBLAS does
// not list is not judged.
int cpuinfo_blas_core_note(const char* forced_core, const char* cpu_flags, int portable, char* out,
                           size_t cap);

// The same for this process: OPENBLAS_CORETYPE, this machine's flags and this build. Prints the
// line, prefixed with "prog: ", to f when there is one.
void cpuinfo_blas_core_warn(FILE* f, const char* prog);
