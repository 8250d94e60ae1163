// common/portable.c: the portable build's start-up pin (common/portable.h).
//
// What changes the numbers between two CPUs at one precision is the code that runs, never the
// thread count: the compiler's vector code (fixed here by building for -march=x86-64-v3, the
// Makefile's `portable` target), OpenBLAS's kernels, which it picks per CPU when the library
// loads unless OPENBLAS_CORETYPE names one, and oneDNN's bf16 kernels, picked by ISA. Built with
// -DATTNLAB_PORTABLE, a constructor runs before main in every tool that links the kernel layer:
//   - a CPU without AVX2 and FMA cannot run the x86-64-v3 code: it stops, saying so (exit 2);
//   - OPENBLAS_CORETYPE unset: the process sets it to Haswell (OpenBLAS's AVX2 kernels) and
//     executes itself again, once, with the same arguments, since OpenBLAS has read the
//     variable by then; OPENBLAS_CORETYPE set to anything else is refused (exit 2);
//   - oneDNN's ISA is capped at avx512_core_bf16 (dnnl_set_max_cpu_isa, before any primitive),
//     so a CPU with AMX runs the bf16 kernels of one without.
// glibc passes a constructor main's argc and argv. The default build has none of this.
#include "common/portable.h"

#ifdef ATTNLAB_PORTABLE
#include <oneapi/dnnl/dnnl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PORTABLE_CORE "Haswell"

__attribute__((constructor)) static void portable_pin(int argc, char** argv) {
    (void)argc;
    const char* name = argv && argv[0] ? argv[0] : "attnlab";
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        fprintf(stderr,
                "%s: the portable build needs a CPU with AVX2 and FMA (x86-64-v3); this one "
                "lacks them: use the default build (make)\n",
                name);
        _exit(2);
    }
    const char* core = getenv("OPENBLAS_CORETYPE");
    if (!core || !*core) {
        if (setenv("OPENBLAS_CORETYPE", PORTABLE_CORE, 1) != 0) {
            perror("setenv OPENBLAS_CORETYPE");
            _exit(2);
        }
        execv("/proc/self/exe", argv);
        fprintf(stderr, "%s: portable build: cannot execute /proc/self/exe again: %s\n", name,
                strerror(errno));
        _exit(2);
    }
    if (strcmp(core, PORTABLE_CORE) != 0) {
        fprintf(stderr,
                "%s: the portable build pins OpenBLAS's core to " PORTABLE_CORE
                ", but OPENBLAS_CORETYPE=%s: unset it\n",
                name, core);
        _exit(2);
    }
    if (dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx512_core_bf16) != dnnl_success) {
        fprintf(stderr, "%s: portable build: oneDNN refused to cap its ISA at avx512_core_bf16\n",
                name);
        _exit(2);
    }
}

const char* portable_note(void) {
    return "; portable build (OpenBLAS core pinned to " PORTABLE_CORE
           ", oneDNN ISA capped at avx512_core_bf16)";
}
#else
const char* portable_note(void) {
    return "";
}
#endif
