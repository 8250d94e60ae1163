// data/dataloader.c: (inputs, targets) batches from a glob of llm.c shards, one shard in memory at
// a time, in sequential or seeded-shuffle order, with a position that saves and restores exactly.
//
// A shard of n tokens holds (n - 1) / (B*T) batch windows; window w covers tokens
// [w*B*T, w*B*T + B*T + 1). Shuffled order: at the start of an epoch, a copy of the epoch RNG
// permutes the shard order and then draws one 64-bit base; the window order of the shard at
// position k is a permutation seeded from (base, k), and the RNG state after the base draw starts
// the next epoch. The whole order therefore follows from DataLoaderState alone, so restoring a
// state re-derives the same permutations without replaying batches.
#include "data/dataloader.h"

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/run_state.h"
#include "common/util.h"

// ----------------------------------------------------------------------------
// order derivation

static uint64_t windows_of(const DataLoader* dl, size_t ntok) {
    uint64_t bt = (uint64_t)dl->B * (uint64_t)dl->T;
    return ntok > bt ? (uint64_t)(ntok - 1) / bt : 0;
}

// Shard order of the current epoch into dl->shard_order; *next_rng (optional) gets the RNG that
// starts the following epoch; *base (optional) the seed base of the window permutations.
static void derive_epoch(DataLoader* dl, const Rng* epoch_rng, Rng* next_rng, uint64_t* base) {
    for (int i = 0; i < dl->nfiles; i++)
        dl->shard_order[i] = (uint64_t)i;
    Rng r = *epoch_rng;
    uint64_t b = 0;
    if (dl->shuffle) {
        rng_shuffle_u64(&r, dl->shard_order, (uint64_t)dl->nfiles);
        b = rng_u64(&r);
    }
    if (next_rng) *next_rng = r;
    if (base) *base = b;
}

// Window order of the shard at dl->st.shard_pos (whose token count is known from the probe).
static void derive_windows(DataLoader* dl) {
    uint64_t base = 0;
    derive_epoch(dl, &dl->st.rng, NULL, &base);
    uint64_t f = dl->shard_order[dl->st.shard_pos];
    uint64_t nw = windows_of(dl, dl->ntok[f]);
    free(dl->window_order);
    dl->window_order = mallocCheck(nw * sizeof(uint64_t));
    for (uint64_t i = 0; i < nw; i++)
        dl->window_order[i] = i;
    if (dl->shuffle) {
        Rng wr;
        rng_seed(&wr, base ^ ((dl->st.shard_pos + 1) * 0x9E3779B97F4A7C15ull));
        rng_shuffle_u64(&wr, dl->window_order, nw);
    }
    dl->nwindows = nw;
}

// Make sure the shard at the current position is in memory with its window order.
static void ensure_current(DataLoader* dl) {
    if (dl->nwindows == 0) derive_windows(dl);
    int f = (int)dl->shard_order[dl->st.shard_pos];
    if (dl->loaded == f) return;
    if (dl->loaded >= 0) shard_free(&dl->shard);
    dl->loaded = -1;
    char err[1400];
    if (shard_read(&dl->shard, dl->files[f], err, sizeof(err)) != 0) die(1, "%s", err);
    if (dl->shard.ntok != dl->ntok[f])
        die(1, "%s: the shard changed while training (%zu tokens at start, %zu now)", dl->files[f],
            dl->ntok[f], dl->shard.ntok);
    dl->loaded = f;
}

// ----------------------------------------------------------------------------
// public API

static int cmp_str(const void* a, const void* b) {
    return strcmp(*(char* const*)a, *(char* const*)b);
}

// The corpora scripts/setup knows how to fetch ("bash scripts/setup corpus NAME"), found in a
// pattern as ".../data_cache/NAME/...". NULL when the pattern names none of them.
static const char* bundled_corpus(const char* pattern) {
    static const char* const BUNDLED[] = {"mobydick", "kjv"};
    for (size_t i = 0; i < sizeof(BUNDLED) / sizeof(BUNDLED[0]); i++) {
        char dir[64];
        snprintf(dir, sizeof(dir), "data_cache/%s/", BUNDLED[i]);
        const char* at = strstr(pattern, dir);
        if (at && (at == pattern || at[-1] == '/')) return BUNDLED[i];
    }
    return NULL;
}

// glob(3) error callback: remember the first directory that could not be read and why.
static _Thread_local int glob_errno;
static _Thread_local char glob_errpath[1024];
static int glob_error(const char* path, int eerrno) {
    if (!glob_errno) {
        glob_errno = eerrno;
        snprintf(glob_errpath, sizeof(glob_errpath), "%s", path);
    }
    return 1; // stop (GLOB_ERR)
}

int dataloader_init(DataLoader* dl, const char* pattern, int B, int T, int shuffle, uint64_t seed,
                    char* err, size_t errcap) {
    memset(dl, 0, sizeof(*dl));
    dl->loaded = -1;
    if (B < 1 || T < 1) {
        snprintf(err, errcap, "dataloader: batch_size %d and seq_len %d must be >= 1", B, T);
        return -1;
    }
    if (!pattern || !*pattern) {
        snprintf(err, errcap, "dataloader: no data: the shard glob is empty");
        return -1;
    }
    dl->B = B;
    dl->T = T;
    dl->shuffle = shuffle ? 1 : 0;
    dl->seed = seed;
    uint64_t need = (uint64_t)B * (uint64_t)T + 1;

    glob_t g;
    glob_errno = 0;
    glob_errpath[0] = 0;
    int rc = glob(pattern, GLOB_ERR, glob_error, &g);
    // a directory of the pattern that does not exist is "no match", not a read error
    int missing = rc == GLOB_ABORTED && (glob_errno == ENOENT || glob_errno == ENOTDIR);
    if (rc != 0 || g.gl_pathc == 0) {
        if (rc == GLOB_NOMATCH || missing || (rc == 0 && g.gl_pathc == 0)) {
            const char* corpus = bundled_corpus(pattern);
            if (corpus)
                snprintf(err, errcap,
                         "%s: no file matches this glob; %s is a corpus scripts/setup makes: "
                         "bash scripts/setup corpus %s",
                         pattern, corpus, corpus);
            else
                snprintf(err, errcap,
                         "%s: no file matches this glob (make shards from text files with "
                         "./prepare)",
                         pattern);
        } else if (rc == GLOB_ABORTED) {
            snprintf(err, errcap, "%s: glob failed: cannot read %s: %s", pattern,
                     glob_errpath[0] ? glob_errpath : "a directory", strerror(glob_errno));
        } else {
            snprintf(err, errcap, "%s: glob failed (%s)", pattern,
                     rc == GLOB_NOSPACE ? "out of memory" : "read error");
        }
        if (rc != GLOB_NOMATCH) globfree(&g);
        return -1;
    }
    size_t n = g.gl_pathc;
    char** names = mallocCheck(n * sizeof(char*));
    for (size_t i = 0; i < n; i++)
        names[i] = g.gl_pathv[i];
    qsort(names, n, sizeof(char*), cmp_str); // byte order, independent of the locale

    dl->files = mallocCheck(n * sizeof(char*));
    dl->ntok = mallocCheck(n * sizeof(size_t));
    size_t nskip = 0, largest = 0;
    const char* first_skipped = NULL;
    for (size_t i = 0; i < n; i++) {
        size_t nt = 0;
        if (shard_probe(names[i], &nt, err, errcap) != 0) {
            free(names);
            globfree(&g);
            dataloader_free(dl);
            return -1;
        }
        if (nt > largest) largest = nt;
        if ((uint64_t)nt < need) {
            if (!nskip) first_skipped = names[i];
            nskip++;
            continue;
        }
        size_t len = strlen(names[i]);
        dl->files[dl->nfiles] = mallocCheck(len + 1);
        memcpy(dl->files[dl->nfiles], names[i], len + 1);
        dl->ntok[dl->nfiles] = nt;
        dl->total_tokens += nt;
        dl->nfiles++;
    }
    if (dl->nfiles == 0) {
        snprintf(err, errcap,
                 "%s: no shard holds one batch of batch_size*seq_len+1 = %llu tokens "
                 "(%zu file%s, the largest has %zu tokens)",
                 pattern, (unsigned long long)need, n, n == 1 ? "" : "s", largest);
        free(names);
        globfree(&g);
        dataloader_free(dl);
        return -1;
    }
    if (nskip)
        fprintf(stderr,
                "attnlab: warning: %s: skipping %zu shard%s with fewer than %llu tokens "
                "(one batch), e.g. %s\n",
                pattern, nskip, nskip == 1 ? "" : "s", (unsigned long long)need, first_skipped);
    free(names);
    globfree(&g);

    dl->shard_order = mallocCheck((size_t)dl->nfiles * sizeof(uint64_t));
    dataloader_reset(dl);
    return 0;
}

void dataloader_reset(DataLoader* dl) {
    memset(&dl->st, 0, sizeof(dl->st));
    rng_seed(&dl->st.rng, dl->seed);
    derive_epoch(dl, &dl->st.rng, NULL, NULL);
    dl->nwindows = 0; // window order re-derived on the next batch
}

// Copy the batch at the current position (if inputs) and advance to the next one.
static void next_batch(DataLoader* dl, int* inputs, int* targets) {
    ensure_current(dl);
    if (inputs) {
        size_t bt = (size_t)dl->B * (size_t)dl->T;
        size_t start = (size_t)dl->window_order[dl->st.window_pos] * bt;
        const uint16_t* tok = dl->shard.tokens + start;
        for (size_t i = 0; i < bt; i++) {
            inputs[i] = tok[i];
            targets[i] = tok[i + 1];
        }
    }
    // advance: next window, next shard, next epoch
    dl->st.window_pos++;
    if (dl->st.window_pos < dl->nwindows) return;
    dl->st.window_pos = 0;
    dl->st.shard_pos++;
    dl->nwindows = 0;
    if (dl->st.shard_pos < (uint64_t)dl->nfiles) return;
    Rng next;
    derive_epoch(dl, &dl->st.rng, &next, NULL);
    dl->st.rng = next;
    dl->st.shard_pos = 0;
    dl->st.epoch++;
    derive_epoch(dl, &dl->st.rng, NULL, NULL);
}

void dataloader_next(DataLoader* dl, int* inputs, int* targets) {
    next_batch(dl, inputs, targets);
}

void dataloader_next_slice(DataLoader* dl, int rank, int nranks, int* inputs, int* targets) {
    ASSERT(rank >= 0 && rank < nranks);
    for (int r = 0; r < nranks; r++)
        next_batch(dl, r == rank ? inputs : NULL, r == rank ? targets : NULL);
}

void dataloader_get_state(const DataLoader* dl, DataLoaderState* st) {
    *st = dl->st;
}

int dataloader_set_state(DataLoader* dl, const DataLoaderState* st, char* err, size_t errcap) {
    if (st->shard_pos >= (uint64_t)dl->nfiles) {
        snprintf(err, errcap,
                 "data position: shard %llu of %d usable shards; were the data files, batch_size "
                 "or seq_len changed since the checkpoint?",
                 (unsigned long long)st->shard_pos, dl->nfiles);
        return -1;
    }
    DataLoaderState old = dl->st;
    dl->st = *st;
    derive_epoch(dl, &dl->st.rng, NULL, NULL);
    uint64_t f = dl->shard_order[st->shard_pos];
    uint64_t nw = windows_of(dl, dl->ntok[f]);
    if (st->window_pos >= nw) {
        snprintf(err, errcap,
                 "data position: window %llu of %s, which has %llu windows; were the data files, "
                 "batch_size or seq_len changed since the checkpoint?",
                 (unsigned long long)st->window_pos, dl->files[f], (unsigned long long)nw);
        dl->st = old;
        derive_epoch(dl, &dl->st.rng, NULL, NULL);
        dl->nwindows = 0;
        return -1;
    }
    dl->nwindows = 0;
    return 0;
}

void dataloader_free(DataLoader* dl) {
    if (dl->loaded >= 0) shard_free(&dl->shard);
    dl->loaded = -1;
    for (int i = 0; i < dl->nfiles; i++)
        free(dl->files[i]);
    free(dl->files);
    free(dl->ntok);
    free(dl->shard_order);
    free(dl->window_order);
    dl->files = NULL;
    dl->ntok = NULL;
    dl->shard_order = NULL;
    dl->window_order = NULL;
    dl->nfiles = 0;
    dl->nwindows = 0;
}

// ---------------------------------------------------------------------------------------------
// serialised state and probe windows

static void put_u64(unsigned char* p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char* p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void dataloader_state_write(const DataLoaderState* st, unsigned char* buf) {
    put_u64(buf, st->epoch);
    put_u64(buf + 8, st->shard_pos);
    put_u64(buf + 16, st->window_pos);
    for (int i = 0; i < 4; i++)
        put_u64(buf + 24 + 8 * i, st->rng.s[i]);
}

// The position back from the bytes dataloader_state_write wrote.
static void dataloader_state_read(DataLoaderState* st, const unsigned char* buf) {
    st->epoch = get_u64(buf);
    st->shard_pos = get_u64(buf + 8);
    st->window_pos = get_u64(buf + 16);
    for (int i = 0; i < 4; i++)
        st->rng.s[i] = get_u64(buf + 24 + 8 * i);
}

void dataloader_state_put(const DataLoaderState* st, RunStateWriter* w) {
    unsigned char b[DATALOADER_STATE_BYTES];
    dataloader_state_write(st, b);
    run_state_section(w, DATALOADER_STATE_SECTION, sizeof(b));
    run_state_put(w, b, sizeof(b));
}

int dataloader_state_get(DataLoaderState* st, RunStateReader* r, char* err, size_t errcap) {
    uint64_t size;
    unsigned char b[DATALOADER_STATE_BYTES];
    if (run_state_find(r, DATALOADER_STATE_SECTION, &size, err, errcap)) return -1;
    if (size != sizeof(b)) {
        snprintf(err, errcap, "%s: section '%s' is %llu bytes, not %d (the loader's position)",
                 r->path, DATALOADER_STATE_SECTION, (unsigned long long)size,
                 DATALOADER_STATE_BYTES);
        return -1;
    }
    if (run_state_get(r, b, sizeof(b), err, errcap)) return -1;
    dataloader_state_read(st, b);
    return 0;
}

// Tokens [start, start + T) of shard `file` of the loader into out[0..T) (e.g. the diagnostics'
// probe windows). 0, or -1 with err naming the shard.
static int dataloader_read_window(const DataLoader* dl, int file, size_t start, int T, int* out,
                                  char* err, size_t errcap) {
    const char* path = dl->files[file];
    uint16_t* buf = mallocCheck(sizeof(uint16_t) * (size_t)T);
    FILE* f = fopen(path, "rb");
    long off = (long)(sizeof(int32_t) * SHARD_HEADER_INTS + sizeof(uint16_t) * start);
    int ok = f && start + (size_t)T <= dl->ntok[file] && fseek(f, off, SEEK_SET) == 0 &&
             fread(buf, sizeof(uint16_t), (size_t)T, f) == (size_t)T;
    if (f) fclose(f);
    for (int t = 0; ok && t < T; t++)
        out[t] = buf[t];
    free(buf);
    if (!ok) snprintf(err, errcap, "%s: cannot read the %d tokens at token %zu", path, T, start);
    return ok ? 0 : -1;
}

// ---------------------------------------------------------------------------------------------
// spread windows (the diagnostics' probe sequences)

int dataloader_spread_windows(const size_t* ntok, int nfiles, int T, int n, int* file,
                              size_t* start) {
    uint64_t S = 0; // number of possible window starts over all files
    for (int f = 0; f < nfiles; f++)
        if (ntok[f] >= (size_t)T) S += ntok[f] - (size_t)T + 1;
    if (S == 0 || n < 1 || T < 1) return -1;
    for (int j = 0; j < n; j++) {
        // evenly spaced over the starts: g = floor(j S / n) (exact for S * n < 2^64)
        uint64_t g = (uint64_t)j * (S / (uint64_t)n) + ((uint64_t)j * (S % (uint64_t)n)) / n;
        int f = 0;
        for (;; f++) {
            uint64_t s = ntok[f] >= (size_t)T ? ntok[f] - (size_t)T + 1 : 0;
            if (g < s) break;
            g -= s;
        }
        file[j] = f;
        start[j] = (size_t)g;
    }
    return 0;
}

int* dataloader_spread_tokens(const DataLoader* dl, int n, int T, char* err, size_t errcap) {
    int* file = mallocCheck(sizeof(int) * (size_t)n);
    size_t* start = mallocCheck(sizeof(size_t) * (size_t)n);
    int* out = NULL;
    if (dataloader_spread_windows(dl->ntok, dl->nfiles, T, n, file, start)) {
        snprintf(err, errcap, "%s: no shard holds a probe sequence of %d tokens", dl->files[0], T);
    } else {
        out = mallocCheck(sizeof(int) * (size_t)n * T);
        for (int j = 0; j < n && out; j++)
            if (dataloader_read_window(dl, file[j], start[j], T, out + (size_t)j * T, err,
                                       errcap)) {
                free(out);
                out = NULL;
            }
    }
    free(file);
    free(start);
    return out;
}

int tokens_check_range(const int* ids, size_t n, int vocab_size, const char* what, char* err,
                       size_t errcap) {
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= 0 && ids[i] < vocab_size) continue;
        if (ids[i] < 0)
            snprintf(err, errcap, "%s: token id %d is negative (a corrupt file?)", what, ids[i]);
        else
            snprintf(err, errcap,
                     "%s: token id %d is >= vocab_size %d (wrong tokenizer or vocab_size?)", what,
                     ids[i], vocab_size);
        return -1;
    }
    return 0;
}
