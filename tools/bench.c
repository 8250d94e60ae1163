// tools/bench.c: the machine's measured matmul peaks, the reference of the trainer's MFU column
// and of scripts/bench (docs/performance.md).
// Usage: ./bench sgemm-peak    sgemm GFLOP/s with every OpenMP thread (OpenBLAS)
//        ./bench bf16-peak     bf16 matmul GFLOP/s with every OpenMP thread (oneDNN); refused
//                              where the CPU has no native bf16 matmul (exit 2)
// defines: mm_print_peak (common/matmul.h)
#include <stdio.h>
#include <string.h>

#include "common/cpuinfo.h"
#include "common/matmul.h"

static void usage(FILE* f) {
    fprintf(f, "usage: ./bench sgemm-peak | bf16-peak\n"
               "  sgemm-peak   measured sgemm GFLOP/s of this machine (OpenBLAS, every thread)\n"
               "  bf16-peak    measured bf16 matmul GFLOP/s (oneDNN, every thread)\n"
               "Each is the best of 12 short trials of 512x512 matrices per thread, the way the\n"
               "trainer calls the kernels. OMP_NUM_THREADS sets the thread count.\n");
}

int main(int argc, char** argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc != 2) {
        usage(stderr);
        return 2;
    }
    cpuinfo_blas_core_warn(stderr, "bench"); // a forced core explains a low sgemm peak
    if (!strcmp(argv[1], "sgemm-peak")) return mm_print_peak(NULL);
    if (!strcmp(argv[1], "bf16-peak")) return mm_print_peak("bf16");
    fprintf(stderr, "bench: unknown measurement '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
