// data/shard.c: read, validate and atomically write llm.c token shards (int32[256] header with
// magic 20240520, version 1 and the token count, then uint16 tokens). Every reader error is a
// one-line "PATH: what is wrong" message, with a hint when the file looks like another llm.c
// format. Shards are stored little-endian, as llm.c writes them (this code assumes an x86 host).
#include "data/shard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"

#define HEADER_BYTES ((size_t)SHARD_HEADER_INTS * sizeof(int32_t))

// ----------------------------------------------------------------------------
// header validation shared by shard_probe and shard_read

// What a foreign magic number most likely is, or NULL.
static const char* magic_hint(int32_t magic) {
    switch (magic) {
    case 20240326:
        return "this looks like an llm.c model checkpoint (gpt2_*.bin), not a token shard";
    case 20240327:
        return "this looks like an llm.c debug state file, not a token shard";
    case 20240328:
        return "this looks like an llm.c tokenizer file (gpt2_tokenizer.bin), not a token shard";
    case 20240527:
        return "this looks like an llm.c optimizer state file, not a token shard";
    default:
        break;
    }
    const unsigned char* b = (const unsigned char*)&magic;
    if (b[0] == 0x1f && b[1] == 0x8b) return "the file is gzip-compressed; gunzip it first";
    if (b[0] == 0x93 && b[1] == 'N' && b[2] == 'U' && b[3] == 'M') return "this is a .npy array";
    return "is it an llm.c token shard? re-run ./prepare to write one";
}

// Open `path`, check header and size. On success the stream is positioned at the first token and
// *ntok holds the token count; returns the open FILE*. On error returns NULL with err set.
static FILE* shard_open_checked(const char* path, size_t* ntok, char* err, size_t errcap) {
    FILE* f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errcap, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        snprintf(err, errcap, "%s: cannot stat: %s", path, strerror(errno));
        fclose(f);
        return NULL;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(err, errcap, "%s: not a regular file", path);
        fclose(f);
        return NULL;
    }
    size_t fsize = (size_t)sb.st_size;
    if (fsize < HEADER_BYTES) {
        snprintf(err, errcap,
                 "%s: truncated header: the file is %zu bytes, a shard header alone is %zu bytes",
                 path, fsize, HEADER_BYTES);
        fclose(f);
        return NULL;
    }
    int32_t h[SHARD_HEADER_INTS];
    if (fread(h, sizeof(int32_t), SHARD_HEADER_INTS, f) != SHARD_HEADER_INTS) {
        snprintf(err, errcap, "%s: cannot read the header: %s", path,
                 ferror(f) ? strerror(errno) : "unexpected end of file");
        fclose(f);
        return NULL;
    }
    if (h[0] != SHARD_MAGIC) {
        snprintf(err, errcap, "%s: wrong magic number %d (expected %d): %s", path, (int)h[0],
                 SHARD_MAGIC, magic_hint(h[0]));
        fclose(f);
        return NULL;
    }
    if (h[1] != SHARD_VERSION) {
        snprintf(err, errcap, "%s: unsupported shard version %d (expected %d)%s", path, (int)h[1],
                 SHARD_VERSION,
                 h[1] == 2 ? ": version 2 holds uint32 tokens (llama 3 vocabularies); attnlab "
                             "reads uint16 GPT-2 tokens"
                           : "");
        fclose(f);
        return NULL;
    }
    if (h[2] <= 0) {
        snprintf(err, errcap, "%s: header declares %d tokens; a shard needs at least one", path,
                 (int)h[2]);
        fclose(f);
        return NULL;
    }
    size_t n = (size_t)h[2];
    size_t want = HEADER_BYTES + n * sizeof(uint16_t);
    if (fsize != want) {
        snprintf(err, errcap,
                 "%s: size mismatch: the header declares %zu tokens, so the file should be %zu "
                 "bytes, but it is %zu bytes (%s)",
                 path, n, want, fsize, fsize < want ? "truncated" : "trailing data");
        fclose(f);
        return NULL;
    }
    *ntok = n;
    return f;
}

// ----------------------------------------------------------------------------
// public API

int shard_probe(const char* path, size_t* ntok, char* err, size_t errcap) {
    size_t n = 0;
    FILE* f = shard_open_checked(path, &n, err, errcap);
    if (!f) return -1;
    fclose(f);
    if (ntok) *ntok = n;
    return 0;
}

int shard_read(Shard* s, const char* path, char* err, size_t errcap) {
    memset(s, 0, sizeof(*s));
    size_t n = 0;
    FILE* f = shard_open_checked(path, &n, err, errcap);
    if (!f) return -1;
    uint16_t* tok = mallocCheck(n * sizeof(uint16_t));
    size_t got = fread(tok, sizeof(uint16_t), n, f);
    int bad = ferror(f);
    fclose(f);
    if (got != n) {
        snprintf(err, errcap, "%s: read %zu of %zu tokens: %s", path, got, n,
                 bad ? "read error" : "unexpected end of file (was it modified while reading?)");
        free(tok);
        return -1;
    }
    util_strlcpy(s->path, path, sizeof(s->path));
    s->ntok = n;
    s->tokens = tok;
    return 0;
}

void shard_free(Shard* s) {
    free(s->tokens);
    s->tokens = NULL;
    s->ntok = 0;
}

int shard_write(const char* path, const uint16_t* tokens, size_t ntok, char* err, size_t errcap) {
    if (ntok == 0) {
        snprintf(err, errcap, "%s: refusing to write a shard with zero tokens", path);
        return -1;
    }
    if (ntok > (size_t)INT32_MAX) {
        snprintf(err, errcap, "%s: %zu tokens do not fit one shard (at most %d)", path, ntok,
                 INT32_MAX);
        return -1;
    }
    int32_t h[SHARD_HEADER_INTS];
    memset(h, 0, sizeof(h));
    h[0] = SHARD_MAGIC;
    h[1] = SHARD_VERSION;
    h[2] = (int32_t)ntok;
    AtomicFile af;
    if (atomic_open(&af, path) != 0) {
        snprintf(err, errcap, "%s", af.err);
        return -1;
    }
    if (atomic_write(&af, h, sizeof(h)) != 0 ||
        atomic_write(&af, tokens, ntok * sizeof(uint16_t)) != 0 || atomic_commit(&af) != 0) {
        snprintf(err, errcap, "%s", af.err);
        atomic_abort(&af);
        return -1;
    }
    return 0;
}
