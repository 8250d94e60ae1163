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
