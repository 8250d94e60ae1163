// data/corpus.c: corpus preparation for ./prepare: document splitting, encoding into one token
// stream, and writing the validation/training splits as llm.c shards (see data/corpus.h).
#include "data/corpus.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "data/shard.h"

static void tokens_add(CorpusTokens* b, const int* ids, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = 2 * (b->n + n) + 4096;
        b->tok = reallocCheck(b->tok, b->cap * sizeof(uint16_t));
    }
    for (size_t i = 0; i < n; i++)
        b->tok[b->n + i] = (uint16_t)ids[i];
    b->n += n;
}

void corpus_tokens_free(CorpusTokens* c) {
    free(c->tok);
    memset(c, 0, sizeof(*c));
}

size_t corpus_fixed_docs(CorpusTokens* c, int eot, size_t doc_tokens) {
    size_t w = 0, n = c->n, ndocs = 0, in_doc = 0, text = 0;
    uint16_t* out =
        mallocCheck((n + n / (doc_tokens > 1 ? doc_tokens - 1 : 1) + 2) * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) {
        if (c->tok[i] == (uint16_t)eot) continue;
        text++;
        if (in_doc == 0) {
            out[w++] = (uint16_t)eot;
            in_doc = 1;
        }
        out[w++] = c->tok[i];
        if (++in_doc == doc_tokens) {
            in_doc = 0;
            ndocs++;
        }
    }
    if (in_doc) w -= in_doc; // the unfinished tail
    free(c->tok);
    c->tok = out;
    c->cap = n + n / (doc_tokens > 1 ? doc_tokens - 1 : 1) + 2;
    c->n = w;
    c->ndocs = ndocs;
    return text - ndocs * (doc_tokens - 1);
}

// Encode one document (EOT first) into the stream, in chunks at safe split points.
static void encode_doc(CorpusTokens* b, Tokenizer* t, const char* s, size_t n,
                       const CorpusOptions* o, size_t chunk_bytes) {
    int eot = tokenizer_eot(t);
    tokens_add(b, &eot, 1);
    b->ndocs++;
    for (size_t pos = 0; pos < n;) {
        size_t end = tokenizer_split_point(t, s, n, pos + chunk_bytes);
        int* ids;
        size_t m = tokenizer_encode(t, s + pos, end - pos, o->allow_special, &ids);
        tokens_add(b, ids, m);
        free(ids);
        if (o->progress) o->progress(o->progress_ctx, end - pos);
        pos = end;
    }
}

static int blank_line(const char* s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return 0;
    return 1;
}

void corpus_encode_text(CorpusTokens* b, Tokenizer* t, const char* s, size_t n,
                        const CorpusOptions* o, size_t chunk_bytes) {
    if (!strcmp(o->split, "file")) {
        if (n) encode_doc(b, t, s, n, o, chunk_bytes);
        return;
    }
    if (!strcmp(o->split, "paragraph")) {
        // a document = a run of non-blank lines plus the blank lines after it (the first one also
        // takes any blank lines before it), so the documents joined give back the file exactly
        size_t i = 0, start = 0;
        int seen_text = 0, after_blank = 0;
        while (i < n) {
            const char* nl = memchr(s + i, '\n', n - i);
            size_t le = nl ? (size_t)(nl - s) : n;
            if (blank_line(s + i, le - i)) {
                after_blank = seen_text;
            } else {
                if (after_blank) {
                    encode_doc(b, t, s + start, i - start, o, chunk_bytes);
                    start = i;
                    after_blank = 0;
                }
                seen_text = 1;
            }
            i = nl ? le + 1 : n;
        }
        if (seen_text) encode_doc(b, t, s + start, n - start, o, chunk_bytes);
        return;
    }
    size_t sl = strlen(o->split);
    for (size_t i = 0; i <= n;) {
        const char* m = i < n ? memmem(s + i, n - i, o->split, sl) : NULL;
        size_t e = m ? (size_t)(m - s) : n;
        if (e > i) encode_doc(b, t, s + i, e - i, o, chunk_bytes);
        i = e + (m ? sl : 1);
    }
}

char* corpus_unescape(const char* s) {
    char* out = mallocCheck(strlen(s) + 1);
    size_t k = 0;
    for (size_t i = 0; s[i]; i++) {
        if (s[i] == '\\' && s[i + 1]) {
            char c = s[++i];
            out[k++] = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
        } else {
            out[k++] = s[i];
        }
    }
    out[k] = 0;
    return out;
}

int corpus_write_split(const char* prefix, const char* split, const uint16_t* tok, size_t n,
                       size_t shard_tokens, FILE* log, char* err, size_t errcap) {
    int nshards = 0;
    char path[1100];
    for (size_t off = 0; off < n; off += shard_tokens, nshards++) {
        size_t m = n - off < shard_tokens ? n - off : shard_tokens;
        snprintf(path, sizeof path, "%s_%s_%06d.bin", prefix, split, nshards);
        if (shard_write(path, tok + off, m, err, errcap)) return -1;
        if (log) fprintf(log, "prepare: wrote %s (%zu tokens)\n", path, m);
    }
    // drop stale shards of an earlier, larger run with the same prefix
    for (int i = nshards;; i++) {
        snprintf(path, sizeof path, "%s_%s_%06d.bin", prefix, split, i);
        if (!util_file_exists(path)) break;
        if (unlink(path)) {
            snprintf(err, errcap, "%s: cannot remove stale shard: %s", path, strerror(errno));
            return -1;
        }
        if (log) fprintf(log, "prepare: removed stale %s\n", path);
    }
    return nshards;
}
