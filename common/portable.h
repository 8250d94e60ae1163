// common/portable.h: the portable build (`make portable`, build-portable/): one binary and one
// kernel path on every x86-64-v3 CPU, so a run trained with it is reproduced to the last digit
// on any such machine at the same precision (docs/ablations.md, "Reruns across machines").
#pragma once

// "; portable build (OpenBLAS core pinned to Haswell, oneDNN ISA capped at avx512_core_bf16)"
// in the portable build, "" otherwise: appended to every run's precision text.
const char* portable_note(void);
