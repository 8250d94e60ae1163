// common/cpuinfo.c: the CPU model name and the kernel-selecting ISA flags, read from
// /proc/cpuinfo (common/cpuinfo.h). Only the first processor's block is read: every core of a
// run's machine is the same model.
#include "common/cpuinfo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

// the value after "KEY<tabs/spaces>: " on a line that starts with KEY, or NULL
static const char* field(const char* line, const char* key) {
    size_t k = strlen(key);
    if (strncmp(line, key, k) != 0) return NULL;
    const char* p = line + k;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p != ':') return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

// 1 when the space-separated list [s, e) holds the word w
static int has_word(const char* s, const char* e, const char* w) {
    size_t n = strlen(w);
    for (const char* p = s; p + n <= e; p++) {
        if ((p == s || p[-1] == ' ') && strncmp(p, w, n) == 0 && (p + n == e || p[n] == ' '))
            return 1;
    }
    return 0;
}

void cpuinfo_parse(const char* text, char* model, size_t model_cap, char* flags, size_t flags_cap) {
    util_strlcpy(model, "unknown", model_cap);
    if (flags_cap) flags[0] = '\0';
    int seen_model = 0, seen_flags = 0;
    for (const char* line = text; line && *line && !(seen_model && seen_flags);) {
        const char* end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        if (end == line) break; // the blank line that ends the first processor's block
        const char* v;
        if (!seen_model && (v = field(line, "model name")) != NULL) {
            size_t n = (size_t)(end - v);
            if (n >= model_cap) n = model_cap - 1;
            memcpy(model, v, n);
            model[n] = '\0';
            seen_model = 1;
        } else if (!seen_flags && (v = field(line, "flags")) != NULL) {
            char want[] = CPUINFO_FLAGS;
            size_t used = 0;
            for (char* w = strtok(want, " "); w; w = strtok(NULL, " ")) {
                if (!has_word(v, end, w)) continue;
                int k = snprintf(flags + used, flags_cap - used, "%s%s", used ? " " : "", w);
                if (k < 0 || (size_t)k >= flags_cap - used) { // does not fit: drop it whole
                    flags[used] = '\0';
                    break;
                }
                used += (size_t)k;
            }
            seen_flags = 1;
        }
        line = *end ? end + 1 : end;
    }
}

void cpuinfo_describe(char* model, size_t model_cap, char* flags, size_t flags_cap) {
    // the first processor's block, read line by line straight into the buffer (procfs files
    // report size 0, so no stat); a blank line or a full buffer ends it
    enum { CAP = 1 << 16 };
    char* text = callocCheck(CAP, 1);
    FILE* f = fopen("/proc/cpuinfo", "r");
    size_t used = 0;
    while (f && used + 1 < CAP && fgets(text + used, (int)(CAP - used), f)) {
        if (text[used] == '\n') {
            text[used] = '\0';
            break;
        }
        used += strlen(text + used);
    }
    if (f) fclose(f);
    cpuinfo_parse(text, model, model_cap, flags, flags_cap);
    free(text);
}

// OpenBLAS's x86-64 core names (its DYNAMIC_ARCH list) by the widest vector instruction set their
// sgemm kernels use: 1 SSE, 2 AVX, 3 AVX2 with FMA, 4 AVX-512. Cooperlake and SapphireRapids add
// bf16 kernels of OpenBLAS's own, which attnlab does not call (its bf16 goes through oneDNN), so
// for fp32 they are AVX-512 cores like SkylakeX.
static const struct {
    const char* name;
    int level;
} BLAS_CORES[] = {
    {"Katmai", 1},         {"Coppermine", 1}, {"Northwood", 1},   {"Prescott", 1},
    {"Banias", 1},         {"Core2", 1},      {"Penryn", 1},      {"Dunnington", 1},
    {"Nehalem", 1},        {"Atom", 1},       {"Athlon", 1},      {"Opteron", 1},
    {"Opteron_SSE3", 1},   {"Barcelona", 1},  {"Nano", 1},        {"Sandybridge", 2},
    {"Bulldozer", 2},      {"Piledriver", 2}, {"Steamroller", 2}, {"Excavator", 2},
    {"Haswell", 3},        {"Zen", 3},        {"SkylakeX", 4},    {"Cooperlake", 4},
    {"SapphireRapids", 4},
};

static const char* const LEVEL_NAMES[] = {"", "SSE", "AVX", "AVX2", "AVX-512"};

static int flags_have(const char* flags, const char* w) {
    return flags && has_word(flags, flags + strlen(flags), w);
}

int cpuinfo_blas_core_note(const char* forced_core, const char* cpu_flags, int portable, char* out,
                           size_t cap) {
    if (cap) out[0] = '\0';
    if (!forced_core || !*forced_core) return 0;
    if (portable) {
        snprintf(out, cap,
                 "OPENBLAS_CORETYPE=%s: the portable build pins OpenBLAS's core on purpose, so "
                 "that reruns give the same numbers on every AVX2 CPU (make portable, "
                 "docs/ablations.md)",
                 forced_core);
        return 1;
    }
    int forced = 0;
    for (size_t i = 0; i < sizeof(BLAS_CORES) / sizeof(BLAS_CORES[0]); i++)
        if (strcasecmp(forced_core, BLAS_CORES[i].name) == 0) forced = BLAS_CORES[i].level;
    if (!forced) return 0;
    int cpu = flags_have(cpu_flags, "avx512f")                                ? 4
              : flags_have(cpu_flags, "avx2") && flags_have(cpu_flags, "fma") ? 3
                                                                              : 0;
    if (cpu <= forced) return 0;
    snprintf(out, cap,
             "OPENBLAS_CORETYPE=%s forces OpenBLAS's %s kernels on a CPU with %s: fp32 matmuls "
             "run slower than this CPU allows (unset OPENBLAS_CORETYPE for this command to let "
             "OpenBLAS choose; docs/performance.md)",
             forced_core, LEVEL_NAMES[forced], LEVEL_NAMES[cpu]);
    return 1;
}

void cpuinfo_blas_core_warn(FILE* f, const char* prog) {
    char model[256], flags[256], note[512];
    cpuinfo_describe(model, sizeof(model), flags, sizeof(flags));
#ifdef ATTNLAB_PORTABLE
    const int portable = 1;
#else
    const int portable = 0;
#endif
    if (cpuinfo_blas_core_note(getenv("OPENBLAS_CORETYPE"), flags, portable, note, sizeof(note)))
        fprintf(f, "%s: %s\n", prog, note);
}
