// common/run_state.c: the run-state file of run_state.h, a sectioned file whose sections are
// opaque named blobs (the loop's own "loop" section is the one this module parses), and the
// checks that a resumed run continues exactly.
//
// state_NNNNNNNN.bin, version 2 (written): int32 RUN_STATE_MAGIC, int32 version 2, int32 section
// count; then each section {name: 16 bytes, NUL-padded; payload length: uint64; payload}; then
// the checkpoint trailer (common/util.h: crc32 of everything before it, end magic). The trainer
// writes the sections loop, data, optim in that order (the fixed-size ones first); readers find
// them by name, in any order. "loop": int64 step, sampling RNG (4 x uint64), float32 best_val,
// int32 skips (48 bytes). "data" and "optim" are their owners' (data/dataloader.h,
// optim/optim.h). "model" (optional, written last): int64 step, uint32 crc32 of the paired model
// file's parameters, uint32 0 (16 bytes). Readers refuse a section that runs past the end of the
// file, bytes after the last one, a malformed name, a duplicate, a missing one and an unknown one:
// a section this build does not know is state a newer trainer saved and this one would drop, so the
// run would not continue exactly; refusing says so instead of resuming something else.
//
// Version 1 (read only; what the trainer wrote before): int32[256] header {RUN_STATE_MAGIC, 1,
// optimizer n (int64, words 2-3), optimizer t (int64, words 4-5), optimizer state arrays (word
// 6), step (int64, words 8-9)}, the optimizer's name[32], the loop record {int64 step, sampling
// RNG (4 x uint64), the training loader's position (56 bytes), float best_val, int32 skips}, the
// optimizer's state arrays, the trailer. The reader presents it as the three sections of version
// 2 with their version-2 payloads (the loop's and the optimizer's header fields gathered into
// `head`, the position and the arrays read from the file where they are), so the owners parse one
// encoding. Integers little-endian.
#include "common/run_state.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/dist.h"

void run_state_put_u64(unsigned char* p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

uint64_t run_state_get_u64(const unsigned char* p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void put_u32(unsigned char* p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char* p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void loop_encode(unsigned char* b, const LoopState* s) {
    run_state_put_u64(b, (uint64_t)(int64_t)s->step);
    for (int i = 0; i < 4; i++)
        run_state_put_u64(b + 8 + 8 * i, s->rng.s[i]);
    uint32_t bits;
    memcpy(&bits, &s->best_val, 4);
    put_u32(b + 40, bits);
    put_u32(b + 44, (uint32_t)(int32_t)s->skips);
}

static void loop_decode(LoopState* s, const unsigned char* b) {
    s->step = (long)(int64_t)run_state_get_u64(b);
    for (int i = 0; i < 4; i++)
        s->rng.s[i] = run_state_get_u64(b + 8 + 8 * i);
    uint32_t bits = get_u32(b + 40);
    memcpy(&s->best_val, &bits, 4);
    s->skips = (int32_t)get_u32(b + 44);
}

// 1 when name is 1 to 15 characters (printable, no space) NUL-padded to RUN_STATE_NAME_BYTES.
static int name_ok(const char* name) {
    size_t n = 0;
    while (n < RUN_STATE_NAME_BYTES && name[n] > ' ' && name[n] < 127)
        n++;
    if (n == 0 || n == RUN_STATE_NAME_BYTES) return 0;
    for (size_t i = n; i < RUN_STATE_NAME_BYTES; i++)
        if (name[i] != '\0') return 0;
    return 1;
}

// ---------------------------------------------------------------------------------------------
// writing

int run_state_create(RunStateWriter* w, const char* path, int nsections, const LoopState* loop,
                     char* err, size_t errcap) {
    ASSERT(nsections >= 0 && nsections < RUN_STATE_MAX_SECTIONS);
    memset(w, 0, sizeof(*w));
    if (atomic_open(&w->af, path)) {
        snprintf(err, errcap, "%s", w->af.err);
        return -1;
    }
    w->nsections = nsections + 1;
    unsigned char h[RUN_STATE_HEADER_BYTES];
    put_u32(h, (uint32_t)RUN_STATE_MAGIC);
    put_u32(h + 4, RUN_STATE_VERSION);
    put_u32(h + 8, (uint32_t)w->nsections);
    atomic_write(&w->af, h, sizeof(h)); // a failed write is reported by run_state_finish
    unsigned char b[RUN_STATE_LOOP_BYTES];
    loop_encode(b, loop);
    run_state_section(w, RUN_STATE_LOOP, sizeof(b));
    run_state_put(w, b, sizeof(b));
    return 0;
}

void run_state_section(RunStateWriter* w, const char* name, uint64_t size) {
    ASSERT(w->left == 0 && w->begun < w->nsections);
    char padded[RUN_STATE_NAME_BYTES] = {0};
    ASSERT(strlen(name) < RUN_STATE_NAME_BYTES);
    memcpy(padded, name, strlen(name));
    ASSERT(name_ok(padded));
    for (int i = 0; i < w->begun; i++)
        ASSERT(memcmp(w->names[i], padded, RUN_STATE_NAME_BYTES) != 0);
    memcpy(w->names[w->begun++], padded, RUN_STATE_NAME_BYTES);
    unsigned char len[8];
    run_state_put_u64(len, size);
    atomic_write(&w->af, padded, RUN_STATE_NAME_BYTES);
    atomic_write(&w->af, len, 8);
    w->left = size;
}

void run_state_put(RunStateWriter* w, const void* data, size_t n) {
    ASSERT(n <= w->left);
    w->left -= n;
    if (n) atomic_write(&w->af, data, n);
}

int run_state_finish(RunStateWriter* w, char* err, size_t errcap) {
    ASSERT(w->left == 0 && w->begun == w->nsections);
    return atomic_finish(&w->af, err, errcap);
}

void run_state_put_pair(RunStateWriter* w, long step, uint32_t params_crc) {
    unsigned char b[RUN_STATE_PAIR_BYTES] = {0};
    run_state_put_u64(b, (uint64_t)(int64_t)step);
    put_u32(b + 8, params_crc);
    run_state_section(w, RUN_STATE_PAIR, sizeof(b));
    run_state_put(w, b, sizeof(b));
}

uint32_t run_state_params_crc(const float* params, size_t n) {
    uint32_t crc = 0;
    const size_t chunk = (size_t)1 << 28; // zlib takes 32-bit lengths
    for (size_t i = 0; i < n; i += chunk / sizeof(float)) {
        size_t k = n - i < chunk / sizeof(float) ? n - i : chunk / sizeof(float);
        crc = util_crc32(crc, params + i, k * sizeof(float));
    }
    return crc;
}

// ---------------------------------------------------------------------------------------------
// reading

static RunStateSection* add_section(RunStateReader* r, const char* name) {
    RunStateSection* s = &r->sec[r->nsections++];
    memset(s, 0, sizeof(*s));
    util_strlcpy(s->name, name, sizeof(s->name));
    return s;
}

static int seek_to(FILE* f, uint64_t off) {
    return fseeko(f, (off_t)off, SEEK_SET);
}

// A version-1 file (body bytes before the trailer) as the three sections of version 2.
static int read_v1(RunStateReader* r, uint64_t body, char* err, size_t errcap) {
    const char* path = r->path;
    if (body < RUN_STATE_V1_FIXED_BYTES) {
        snprintf(err, errcap,
                 "%s: truncated (a version-1 run-state file holds at least %d bytes before its "
                 "trailer, this one %llu)",
                 path, RUN_STATE_V1_FIXED_BYTES, (unsigned long long)body);
        return -1;
    }
    unsigned char h[1024], name[32], rec[104];
    if (seek_to(r->f, 0) || fread(h, 1, sizeof(h), r->f) != sizeof(h) ||
        fread(name, 1, sizeof(name), r->f) != sizeof(name) ||
        fread(rec, 1, sizeof(rec), r->f) != sizeof(rec)) {
        snprintf(err, errcap, "%s: read error", path);
        return -1;
    }
    RunStateSection* s = add_section(r, RUN_STATE_LOOP); // step, RNG | position | best, skips
    memcpy(s->head, rec, 40);
    memcpy(s->head + 40, rec + 96, 8);
    s->nhead = RUN_STATE_LOOP_BYTES;
    s = add_section(r, "data"); // the loader's position, in the file
    s->offset = 1096;
    s->size = 56;
    s = add_section(r, "optim"); // name, n, t, arrays (the header's words 2-6), then the arrays
    memcpy(s->head, name, 32);
    memcpy(s->head + 32, h + 8, 20);
    s->nhead = 52;
    s->offset = RUN_STATE_V1_FIXED_BYTES;
    s->size = body - RUN_STATE_V1_FIXED_BYTES;
    return 0;
}

// The section table of a version-2 file (body bytes before the trailer).
static int read_v2(RunStateReader* r, uint64_t body, int count, char* err, size_t errcap) {
    const char* path = r->path;
    if (count < 1 || count > RUN_STATE_MAX_SECTIONS) {
        snprintf(err, errcap, "%s: %d sections (this build reads 1 to %d)", path, count,
                 RUN_STATE_MAX_SECTIONS);
        return -1;
    }
    uint64_t pos = RUN_STATE_HEADER_BYTES;
    for (int i = 0; i < count; i++) {
        unsigned char b[RUN_STATE_SECTION_BYTES];
        if (body - pos < RUN_STATE_SECTION_BYTES) {
            snprintf(err, errcap,
                     "%s: section %d of %d runs past the end of the file (its header at offset "
                     "%llu, %llu bytes before the trailer)",
                     path, i + 1, count, (unsigned long long)pos, (unsigned long long)body);
            return -1;
        }
        if (seek_to(r->f, pos) || fread(b, 1, sizeof(b), r->f) != sizeof(b)) {
            snprintf(err, errcap, "%s: read error", path);
            return -1;
        }
        if (!name_ok((const char*)b)) {
            snprintf(err, errcap,
                     "%s: section %d (at offset %llu) has a malformed name (1 to %d printable "
                     "characters, NUL-padded to %d bytes)",
                     path, i + 1, (unsigned long long)pos, RUN_STATE_NAME_BYTES - 1,
                     RUN_STATE_NAME_BYTES);
            return -1;
        }
        const char* name = (const char*)b;
        uint64_t size = run_state_get_u64(b + RUN_STATE_NAME_BYTES);
        pos += RUN_STATE_SECTION_BYTES;
        if (size > body - pos) {
            snprintf(err, errcap,
                     "%s: section '%s' (%llu bytes at offset %llu) runs past the end of the file "
                     "(%llu bytes before the trailer)",
                     path, name, (unsigned long long)size, (unsigned long long)pos,
                     (unsigned long long)body);
            return -1;
        }
        for (int k = 0; k < r->nsections; k++)
            if (strcmp(r->sec[k].name, name) == 0) {
                snprintf(err, errcap, "%s: section '%s' appears twice", path, name);
                return -1;
            }
        RunStateSection* s = add_section(r, name);
        s->offset = pos;
        s->size = size;
        pos += size;
    }
    if (pos != body) {
        snprintf(err, errcap, "%s: %llu bytes after the last of its %d sections", path,
                 (unsigned long long)(body - pos), count);
        return -1;
    }
    return 0;
}

static const RunStateSection* lookup(const RunStateReader* r, const char* name) {
    for (int i = 0; i < r->nsections; i++)
        if (strcmp(r->sec[i].name, name) == 0) return &r->sec[i];
    return NULL;
}

// Every section known (the loop's or an owner's), every owner's present.
static int check_names(const RunStateReader* r, const char* const* owners, int nowners, char* err,
                       size_t errcap) {
    char known[512];
    snprintf(known, sizeof(known), "%s", RUN_STATE_LOOP);
    for (int k = 0; k < nowners; k++)
        snprintf(known + strlen(known), sizeof(known) - strlen(known), ", %s", owners[k]);
    for (int i = 0; i < r->nsections; i++) {
        int found = strcmp(r->sec[i].name, RUN_STATE_LOOP) == 0 ||
                    strcmp(r->sec[i].name, RUN_STATE_PAIR) == 0;
        for (int k = 0; k < nowners && !found; k++)
            found = strcmp(r->sec[i].name, owners[k]) == 0;
        if (!found) {
            snprintf(err, errcap,
                     "%s: unknown section '%s' (this trainer reads %s; state it does not know "
                     "cannot be resumed exactly)",
                     r->path, r->sec[i].name, known);
            return -1;
        }
    }
    for (int k = -1; k < nowners; k++) {
        const char* want = k < 0 ? RUN_STATE_LOOP : owners[k];
        if (!lookup(r, want)) {
            snprintf(err, errcap, "%s: no section '%s' (this trainer needs %s)", r->path, want,
                     known);
            return -1;
        }
    }
    return 0;
}

int run_state_open(RunStateReader* r, const char* path, const char* const* owners, int nowners,
                   char* err, size_t errcap) {
    memset(r, 0, sizeof(*r));
    util_strlcpy(r->path, path, sizeof(r->path));
    if (util_verify_trailer(path, RUN_STATE_HEADER_BYTES, err, errcap)) return -1;
    r->f = fopen(path, "rb");
    struct stat st;
    unsigned char h[RUN_STATE_HEADER_BYTES];
    if (!r->f || fstat(fileno(r->f), &st) != 0 || fread(h, 1, sizeof(h), r->f) != sizeof(h)) {
        snprintf(err, errcap, "%s: cannot read", path);
        run_state_close(r);
        return -1;
    }
    const uint64_t body = (uint64_t)st.st_size - 8; // verified: at least the header
    const int32_t magic = (int32_t)get_u32(h);
    r->version = (int32_t)get_u32(h + 4);
    int bad;
    if (magic != RUN_STATE_MAGIC) {
        snprintf(err, errcap, "%s: not an attnlab run-state file (magic %d version %d)", path,
                 magic, r->version);
        bad = 1;
    } else if (r->version == 1) {
        bad = read_v1(r, body, err, errcap);
    } else if (r->version == 2) {
        bad = read_v2(r, body, (int32_t)get_u32(h + 8), err, errcap);
    } else {
        snprintf(err, errcap,
                 "%s: run-state file version %d (this build reads versions 1 and 2: written by a "
                 "newer trainer?)",
                 path, r->version);
        bad = 1;
    }
    bad = bad || check_names(r, owners, nowners, err, errcap);
    uint64_t n;
    unsigned char b[RUN_STATE_LOOP_BYTES];
    if (!bad && !(bad = run_state_find(r, RUN_STATE_LOOP, &n, err, errcap))) {
        if (n != RUN_STATE_LOOP_BYTES) {
            snprintf(err, errcap, "%s: section '%s' is %llu bytes, not %d", path, RUN_STATE_LOOP,
                     (unsigned long long)n, RUN_STATE_LOOP_BYTES);
            bad = 1;
        } else {
            bad = run_state_get(r, b, sizeof(b), err, errcap);
            if (!bad) loop_decode(&r->loop, b);
        }
    }
    if (bad) {
        run_state_close(r);
        return -1;
    }
    return 0;
}

int run_state_find(RunStateReader* r, const char* name, uint64_t* size, char* err, size_t errcap) {
    const RunStateSection* s = lookup(r, name);
    if (!s) {
        snprintf(err, errcap, "%s: no section '%s'", r->path, name);
        return -1;
    }
    if (seek_to(r->f, s->offset)) {
        snprintf(err, errcap, "%s: cannot seek to section '%s'", r->path, name);
        return -1;
    }
    r->cur = s;
    r->done = 0;
    *size = s->nhead + s->size;
    return 0;
}

int run_state_get(RunStateReader* r, void* buf, size_t n, char* err, size_t errcap) {
    const RunStateSection* s = r->cur;
    ASSERT(s != NULL);
    const uint64_t total = s->nhead + s->size;
    if (n > total - r->done) {
        snprintf(err, errcap, "%s: section '%s' ends after %llu bytes (%zu more wanted at %llu)",
                 r->path, s->name, (unsigned long long)total, n, (unsigned long long)r->done);
        return -1;
    }
    unsigned char* out = buf;
    if (r->done < s->nhead) {
        size_t k = s->nhead - (size_t)r->done < n ? s->nhead - (size_t)r->done : n;
        memcpy(out, s->head + r->done, k);
        out += k;
        n -= k;
        r->done += k;
    }
    if (n && fread(out, 1, n, r->f) != n) {
        snprintf(err, errcap, "%s: read error in section '%s'", r->path, s->name);
        return -1;
    }
    r->done += n;
    return 0;
}

int run_state_check_pair(RunStateReader* r, const char* model_path, long model_step,
                         uint32_t params_crc, char* err, size_t errcap) {
    if (r->loop.step != model_step) {
        snprintf(err, errcap,
                 "%s is the state of step %ld, but %s holds step %ld: the two files are not one "
                 "checkpoint",
                 r->path, r->loop.step, model_path, model_step);
        return -1;
    }
    if (!lookup(r, RUN_STATE_PAIR)) return 0; // written before the section existed
    uint64_t n;
    unsigned char b[RUN_STATE_PAIR_BYTES];
    if (run_state_find(r, RUN_STATE_PAIR, &n, err, errcap)) return -1;
    if (n != RUN_STATE_PAIR_BYTES) {
        snprintf(err, errcap, "%s: section '%s' is %llu bytes, not %d", r->path, RUN_STATE_PAIR,
                 (unsigned long long)n, RUN_STATE_PAIR_BYTES);
        return -1;
    }
    if (run_state_get(r, b, sizeof(b), err, errcap)) return -1;
    const long step = (long)(int64_t)run_state_get_u64(b);
    const uint32_t crc = get_u32(b + 8);
    if (step != model_step || crc != params_crc) {
        snprintf(err, errcap,
                 "%s belongs with the model file of step %ld whose parameters have crc32 %08x, "
                 "but %s (step %ld) has crc32 %08x: the two files come from different runs (two "
                 "runs wrote into one out_dir?), and resuming them would continue neither",
                 r->path, step, (unsigned)crc, model_path, model_step, (unsigned)params_crc);
        return -1;
    }
    return 0;
}

void run_state_close(RunStateReader* r) {
    if (r->f) fclose(r->f);
    r->f = NULL;
    r->cur = NULL;
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
                           const char* now_data, int nranks, ResumeFixedFn fixed,
                           ResumeChanges* changes, char* err, size_t errcap) {
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
    if (resume_keys_compare(&old, now, fixed, what, changes, err, errcap)) return -1;
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
