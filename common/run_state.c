// common/run_state.c: the run-state file of run_state.h (its fixed part; the optimizer's arrays
// are written and read by optim/), and the checks that a resumed run continues exactly.
//
// state_NNNNNNNN.bin (version 1): int32[256] header {RUN_STATE_MAGIC, version, optimizer n
// (int64, words 2-3), optimizer t (int64, words 4-5), optimizer state arrays (word 6), step
// (int64, words 8-9)}, the optimizer's name[32], the loop record {int64 step, sampling RNG (4 x
// uint64), the training loader's position (RUN_STATE_POS_BYTES), float best_val, int32 skips},
// the optimizer's state arrays, the checkpoint trailer (common/util.h). Integers little-endian.
#include "common/run_state.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/dist.h"

#define LOOP_RECORD_BYTES (8 + 32 + RUN_STATE_POS_BYTES + 4 + 4)

static void put64(int32_t* h, int64_t v) {
    h[0] = (int32_t)(uint32_t)((uint64_t)v & 0xffffffffu);
    h[1] = (int32_t)(uint32_t)((uint64_t)v >> 32);
}
static int64_t get64(const int32_t* h) {
    return (int64_t)(((uint64_t)(uint32_t)h[1] << 32) | (uint32_t)h[0]);
}

int run_state_begin(AtomicFile* af, const char* path, const RunStateHead* s, char* err,
                    size_t errcap) {
    int32_t h[256] = {0};
    h[0] = RUN_STATE_MAGIC;
    h[1] = RUN_STATE_VERSION;
    put64(h + 2, s->opt_n);
    put64(h + 4, s->opt_t);
    h[6] = s->opt_arrays;
    put64(h + 8, s->loop.step);
    unsigned char rec[LOOP_RECORD_BYTES] = {0}; // little-endian fields (x86-64 and arm64)
    int64_t step = s->loop.step;
    int32_t skips = s->loop.skips;
    memcpy(rec, &step, 8);
    memcpy(rec + 8, s->loop.rng.s, 32);
    memcpy(rec + 40, s->pos, RUN_STATE_POS_BYTES);
    memcpy(rec + 40 + RUN_STATE_POS_BYTES, &s->loop.best_val, 4);
    memcpy(rec + 44 + RUN_STATE_POS_BYTES, &skips, 4);
    if (atomic_open(af, path)) {
        snprintf(err, errcap, "%s", af->err);
        return -1;
    }
    atomic_write(af, h, sizeof(h));
    atomic_write(af, s->opt_name, RUN_STATE_NAME_BYTES);
    atomic_write(af, rec, sizeof(rec)); // a failed write is reported by atomic_finish
    return 0;
}

FILE* run_state_open(const char* path, RunStateHead* s, char* err, size_t errcap) {
    if (util_verify_trailer(path, RUN_STATE_FIXED_BYTES, err, errcap)) return NULL;
    FILE* f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errcap, "%s: cannot open", path);
        return NULL;
    }
    int32_t h[256];
    unsigned char rec[LOOP_RECORD_BYTES];
    if (fread(h, 4, 256, f) != 256 ||
        fread(s->opt_name, 1, RUN_STATE_NAME_BYTES, f) != RUN_STATE_NAME_BYTES ||
        fread(rec, 1, sizeof(rec), f) != sizeof(rec)) {
        snprintf(err, errcap, "%s: read error", path);
        fclose(f);
        return NULL;
    }
    if (h[0] != RUN_STATE_MAGIC || h[1] != RUN_STATE_VERSION) {
        snprintf(err, errcap, "%s: not an attnlab run-state file (magic %d version %d)", path, h[0],
                 h[1]);
        fclose(f);
        return NULL;
    }
    s->opt_n = get64(h + 2);
    s->opt_t = get64(h + 4);
    s->opt_arrays = h[6];
    int64_t step;
    int32_t skips;
    memcpy(&step, rec, 8);
    memcpy(s->loop.rng.s, rec + 8, 32);
    memcpy(s->pos, rec + 40, RUN_STATE_POS_BYTES);
    memcpy(&s->loop.best_val, rec + 40 + RUN_STATE_POS_BYTES, 4);
    memcpy(&skips, rec + 44 + RUN_STATE_POS_BYTES, 4);
    s->loop.step = (long)step;
    s->loop.skips = skips;
    return f;
}

// ---------------------------------------------------------------------------------------------
// exact resume: the same data, batch geometry and seed

#define DATA_LINE "# train_data file: "

void run_state_append_data_text(char** text, char* const* files, int nfiles) {
    size_t len = strlen(*text), cap = len + 1;
    char* out = *text;
    for (int i = 0; i < nfiles; i++) {
        struct stat st;
        char line[1400];
        if (stat(files[i], &st) != 0) memset(&st, 0, sizeof(st));
        int n =
            snprintf(line, sizeof(line), DATA_LINE "%s (%lld bytes, mtime %lld.%09ld)\n", files[i],
                     (long long)st.st_size, (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
        if (n < 0) continue;
        if (len + (size_t)n + 1 > cap) out = reallocCheck(out, cap = 2 * (len + (size_t)n + 1));
        memcpy(out + len, line, (size_t)n + 1);
        len += (size_t)n;
    }
    *text = out;
}

// The k-th (0-based) DATA_LINE of text (without the prefix and newline) into buf; 0 if none.
static int data_line(const char* text, int k, char* buf, size_t cap) {
    for (const char* p = text; (p = strstr(p, DATA_LINE)) != NULL; p += strlen(DATA_LINE)) {
        if (p != text && p[-1] != '\n') continue;
        if (k-- > 0) continue;
        const char* v = p + strlen(DATA_LINE);
        size_t n = strcspn(v, "\n");
        snprintf(buf, cap, "%.*s", (int)(n < cap ? n : cap - 1), v);
        return 1;
    }
    return 0;
}

// The ranks of the run that wrote `saved` ("# data parallel: N ranks ..."; 1 without the line).
static int saved_ranks(const char* saved) {
    const char* p = strstr(saved, "# data parallel: ");
    return p ? atoi(p + strlen("# data parallel: ")) : 1;
}

int run_state_check_resume(const char* saved, const char* what, const Config* now,
                           const char* now_data, int nranks, char* err, size_t errcap) {
    if (!saved) saved = "";
    Config old;
    config_defaults(&old);
    char perr[1024];
    if (config_load_text(&old, saved, what, perr, sizeof(perr)) != 0) {
        snprintf(err, errcap, "%s: the saved config cannot be read back (%s)", what, perr);
        return -1;
    }
    static const char* const KEYS[] = {"batch_size", "seq_len", "seed", "shuffle"};
    const char* why = "the saved data position would point at other tokens";
    for (size_t i = 0; i < sizeof(KEYS) / sizeof(KEYS[0]); i++) {
        const ConfigField* f = config_field(KEYS[i]);
        char a[CONFIG_STR + 32], b[CONFIG_STR + 32];
        config_format_value(a, sizeof(a), &old, f);
        config_format_value(b, sizeof(b), now, f);
        if (strcmp(a, b) != 0) {
            snprintf(err, errcap,
                     "key '%s' was '%s' in %s, now '%s': %s; set it back, or train into a new "
                     "out_dir",
                     f->key, a, what, b, why);
            return -1;
        }
    }
    const int on = saved_ranks(saved);
    if ((long)on * old.grad_accum != (long)nranks * now->grad_accum) {
        snprintf(err, errcap,
                 "key 'grad_accum' was %d on %d rank(s) in %s (global batch %ld), now %d on %d "
                 "rank(s) (global batch %ld): %s; keep ranks x grad_accum",
                 old.grad_accum, on, what, (long)on * old.grad_accum, now->grad_accum, nranks,
                 (long)nranks * now->grad_accum, why);
        return -1;
    }
    char a[1400], b[1400];
    if (!data_line(saved, 0, a, sizeof(a))) { // written before the file list was saved
        if (dist_is_root())
            fprintf(stderr,
                    "attnlab: %s records no list of its training files (an older trainer wrote "
                    "it): the data is not checked against it\n",
                    what);
        return 0;
    }
    for (int k = 0;; k++) {
        int ha = data_line(saved, k, a, sizeof(a)), hb = data_line(now_data, k, b, sizeof(b));
        if (!ha && !hb) return 0;
        if (!ha || !hb || strcmp(a, b) != 0) {
            snprintf(err, errcap,
                     "key 'train_data': file %d was '%s' in %s, now '%s': the files changed since "
                     "the checkpoint, so %s; restore them, or train into a new out_dir",
                     k + 1, ha ? a : "(none)", what, hb ? b : "(none)", why);
            return -1;
        }
    }
}
