// data/tokenizer.c: GPT-2 byte-level BPE (encode + decode) rebuilt from vocab.bpe, and the byte
// tokenizer. Encoding = pre-tokenization (the GPT-2 regex, hand-coded over utf8proc character
// classes) -> BPE per piece with a pair-rank hash and a priority queue -> a cache of pieces.
//
// Pre-tokenizer: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// tried left to right at each position. \p{L} / \p{N} are the Unicode general categories L* / N*
// from utf8proc. \s follows Python's `regex` module, which OpenAI's encoder.py and tiktoken use:
// White_Space = Zs, Zl, Zp, U+0009..U+000D, U+0085. With tokenizer_set_js_whitespace() it follows
// JavaScript's /u regex instead (js-tiktoken, gpt-3-encoder): Zs, Zl, Zp, U+0009..U+000D, U+FEFF.
// A byte that is not part of a well-formed UTF-8 sequence counts as one "other" character.
#include "data/tokenizer.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "common/util.h"

#define GPT2_MERGES 50000
#define GPT2_VOCAB  50257
#define EOT_TEXT    "<|endoftext|>"
#define EOT_LEN     13

enum { KIND_GPT2, KIND_BYTE };
enum { CL_LETTER, CL_NUMBER, CL_SPACE, CL_OTHER };

typedef struct {
    uint64_t key; // (left << 32 | right) + 1; 0 = empty slot
    int32_t rank; // merge line index; the merged token id is 256 + rank
} PairSlot;

typedef struct {
    uint64_t hash; // 0 = empty slot
    uint32_t key_off, key_len, ids_off, nids;
} CacheSlot;

typedef struct {
    int id;   // -1 once merged into its left neighbour
    int next; // index of the next live symbol, -1 at the end
    int prev;
} Sym;

typedef struct {
    int32_t rank;
    int32_t left; // symbol index (= byte offset in the piece) of the pair's left symbol
} HeapItem;

struct Tokenizer {
    int kind;
    int vocab, eot;
    int js_whitespace;
    uint32_t* tok_off; // (vocab+1) offsets into tok_bytes
    unsigned char* tok_bytes;
    int byte_id[256]; // byte value -> token id
    PairSlot* pairs;  // open addressing, pair_mask+1 slots
    size_t pair_mask;
    // cache of encoded pieces
    CacheSlot* cache;
    size_t cache_mask, cache_used;
    unsigned char* ckeys;
    size_t ckeys_len, ckeys_cap;
    int* cids;
    size_t cids_len, cids_cap;
    // BPE scratch
    Sym* syms;
    HeapItem* heap;
    size_t scratch_cap;
};

// ----------------------------------------------------------------------------
// hashing

static uint64_t hash_bytes(const unsigned char* s, size_t n) {
    uint64_t h = 1469598103934665603ULL; // FNV-1a
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ULL;
    return h | 1; // never 0 (0 marks an empty slot)
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static int pair_rank(const Tokenizer* t, int left, int right) {
    uint64_t key = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
    for (size_t i = mix64(key) & t->pair_mask;; i = (i + 1) & t->pair_mask) {
        if (t->pairs[i].key == key) return t->pairs[i].rank;
        if (t->pairs[i].key == 0) return -1;
    }
}

// Insert; returns the existing rank if the pair is already present, else -1.
static int pair_insert(Tokenizer* t, int left, int right, int rank) {
    uint64_t key = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
    for (size_t i = mix64(key) & t->pair_mask;; i = (i + 1) & t->pair_mask) {
        if (t->pairs[i].key == key) return t->pairs[i].rank;
        if (t->pairs[i].key == 0) {
            t->pairs[i].key = key;
            t->pairs[i].rank = rank;
            return -1;
        }
    }
}

// ----------------------------------------------------------------------------
// GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes map to
// U+0100.. in byte order. Token ids 0..255 are the bytes in this order: first the printable
// ranges '!'..'~', U+00A1..U+00AC, U+00AE..U+00FF, then the rest.
static int byte_printable(int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

// order[i] = byte with id i; cp_byte[cp] = byte for a code point < 324, or -1.
static void byte_tables(int order[256], int cp_byte[324]) {
    int n = 0, extra = 0;
    for (int i = 0; i < 324; i++)
        cp_byte[i] = -1;
    for (int b = 0; b < 256; b++)
        if (byte_printable(b)) {
            order[n++] = b;
            cp_byte[b] = b;
        }
    for (int b = 0; b < 256; b++)
        if (!byte_printable(b)) {
            order[n++] = b;
            cp_byte[256 + extra++] = b;
        }
}

// ----------------------------------------------------------------------------
// vocab.bpe loading

typedef struct {
    uint32_t* slot; // token id + 1, 0 = empty; keyed by token bytes
    size_t mask;
} TokIndex;

static int tokindex_find(const TokIndex* ix, const Tokenizer* t, const unsigned char* s, size_t n,
                         uint64_t h) {
    for (size_t i = h & ix->mask;; i = (i + 1) & ix->mask) {
        uint32_t v = ix->slot[i];
        if (!v) return -(int)i - 1; // not found: -(slot+1)
        int id = (int)v - 1;
        size_t len = t->tok_off[id + 1] - t->tok_off[id];
        if (len == n && memcmp(t->tok_bytes + t->tok_off[id], s, n) == 0) return id;
    }
}

// Decode one field of a merge line into bytes via the byte alphabet. 0 ok, else -1 with err.
static int field_bytes(unsigned char* out, size_t* outlen, const char* f, size_t n,
                       const int cp_byte[324], const char* path, int line, char* err,
                       size_t errcap) {
    size_t i = 0, k = 0;
    while (i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t l =
            utf8proc_iterate((const utf8proc_uint8_t*)f + i, (utf8proc_ssize_t)(n - i), &cp);
        if (l <= 0) {
            snprintf(err, errcap, "%s:%d: invalid UTF-8 in merge symbol", path, line);
            return -1;
        }
        if (cp >= 324 || cp_byte[cp] < 0) {
            snprintf(err, errcap, "%s:%d: character U+%04X is not in the GPT-2 byte alphabet", path,
                     line, (unsigned)cp);
            return -1;
        }
        out[k++] = (unsigned char)cp_byte[cp];
        i += (size_t)l;
    }
    *outlen = k;
    return 0;
}

static int gpt2_load(Tokenizer* t, const char* dir, char* err, size_t errcap) {
    char path[1200];
    snprintf(path, sizeof path, "%s/vocab.bpe", dir);
    size_t len = 0;
    char rerr[1300];
    // GPT-2's vocab.bpe is 456 KiB: 64 MiB bounds any merge list
    char* buf = util_read_file_max(path, (size_t)64 << 20, &len, rerr, sizeof rerr);
    if (!buf) {
        snprintf(err, errcap, "%s (run: scripts/setup tokenizer)", rerr);
        return -1;
    }
    // check the header before building any table: a wrong file is rejected cheaply
    const char* nl = memchr(buf, '\n', len);
    if (len < 8 || strncmp(buf, "#version", 8) != 0 || !nl) {
        snprintf(err, errcap, "%s:1: missing '#version' header line", path);
        free(buf);
        return -1;
    }
    int order[256], cp_byte[324];
    byte_tables(order, cp_byte);
    t->vocab = GPT2_VOCAB;
    t->eot = GPT2_VOCAB - 1;
    t->tok_off = mallocCheck((GPT2_VOCAB + 1) * sizeof(uint32_t));
    size_t cap = 1 << 20, used = 0;
    t->tok_bytes = mallocCheck(cap);
    for (int i = 0; i < 256; i++) {
        t->tok_off[i] = (uint32_t)i;
        t->tok_bytes[i] = (unsigned char)order[i];
        t->byte_id[order[i]] = i;
    }
    used = 256;
    t->tok_off[256] = (uint32_t)used;
    t->pair_mask = (1u << 17) - 1;
    t->pairs = callocCheck(t->pair_mask + 1, sizeof(PairSlot));
    TokIndex ix = {callocCheck(1u << 17, sizeof(uint32_t)), (1u << 17) - 1};
    for (int i = 0; i < 256; i++) {
        unsigned char b = (unsigned char)order[i];
        int r = tokindex_find(&ix, t, &b, 1, hash_bytes(&b, 1));
        ix.slot[-r - 1] = (uint32_t)i + 1;
    }
    unsigned char* tmp = mallocCheck(len + 1);
    int rc = -1, line = 1, nmerges = 0;
    const char* p = nl + 1;
    const char* end = buf + len;
    while (p < end) {
        line++;
        nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) {
            snprintf(err, errcap, "%s:%d: last line has no newline (truncated file?)", path, line);
            goto done;
        }
        if (nmerges == GPT2_MERGES) {
            snprintf(err, errcap, "%s:%d: more than %d merges", path, line, GPT2_MERGES);
            goto done;
        }
        const char* sp = memchr(p, ' ', (size_t)(nl - p));
        if (!sp || sp == p || sp + 1 == nl || memchr(sp + 1, ' ', (size_t)(nl - sp - 1))) {
            snprintf(err, errcap, "%s:%d: expected two space-separated symbols, got '%.*s'", path,
                     line, (int)((nl - p) > 60 ? 60 : (nl - p)), p);
            goto done;
        }
        size_t la, lb;
        if (field_bytes(tmp, &la, p, (size_t)(sp - p), cp_byte, path, line, err, errcap) ||
            field_bytes(tmp + la, &lb, sp + 1, (size_t)(nl - sp - 1), cp_byte, path, line, err,
                        errcap))
            goto done;
        int ida = tokindex_find(&ix, t, tmp, la, hash_bytes(tmp, la));
        int idb = tokindex_find(&ix, t, tmp + la, lb, hash_bytes(tmp + la, lb));
        if (ida < 0 || idb < 0) {
            const char* f = ida < 0 ? p : sp + 1;
            int fl = (int)(ida < 0 ? sp - p : nl - sp - 1);
            snprintf(err, errcap, "%s:%d: unknown symbol '%.*s' (not a byte or an earlier merge)",
                     path, line, fl > 60 ? 60 : fl, f);
            goto done;
        }
        int prev = pair_insert(t, ida, idb, nmerges);
        if (prev >= 0) {
            snprintf(err, errcap, "%s:%d: duplicate merge (same as line %d)", path, line, prev + 2);
            goto done;
        }
        uint64_t h = hash_bytes(tmp, la + lb);
        int slot = tokindex_find(&ix, t, tmp, la + lb, h);
        if (slot >= 0) {
            snprintf(err, errcap, "%s:%d: merge result duplicates token %d", path, line, slot);
            goto done;
        }
        int id = 256 + nmerges;
        ix.slot[-slot - 1] = (uint32_t)id + 1;
        if (used + la + lb + EOT_LEN > cap) {
            cap *= 2;
            t->tok_bytes = reallocCheck(t->tok_bytes, cap);
        }
        memcpy(t->tok_bytes + used, tmp, la + lb);
        used += la + lb;
        t->tok_off[id + 1] = (uint32_t)used;
        nmerges++;
        p = nl + 1;
    }
    if (nmerges != GPT2_MERGES) {
        snprintf(err, errcap, "%s:%d: file ends after %d merges, GPT-2 has %d (truncated file?)",
                 path, line + 1, nmerges, GPT2_MERGES);
        goto done;
    }
    memcpy(t->tok_bytes + used, EOT_TEXT, EOT_LEN);
    t->tok_off[GPT2_VOCAB] = (uint32_t)(used + EOT_LEN);
    rc = 0;
done:
    free(tmp);
    free(ix.slot);
    free(buf);
    return rc;
}

static void byte_load(Tokenizer* t) {
    t->vocab = 257;
    t->eot = 256;
    t->tok_off = mallocCheck(258 * sizeof(uint32_t));
    t->tok_bytes = mallocCheck(256 + EOT_LEN);
    for (int i = 0; i < 256; i++) {
        t->tok_off[i] = (uint32_t)i;
        t->tok_bytes[i] = (unsigned char)i;
        t->byte_id[i] = i;
    }
    memcpy(t->tok_bytes + 256, EOT_TEXT, EOT_LEN);
    t->tok_off[256] = 256;
    t->tok_off[257] = 256 + EOT_LEN;
}

Tokenizer* tokenizer_load(const char* kind, const char* dir, char* err, size_t errcap) {
    Tokenizer* t = callocCheck(1, sizeof(Tokenizer));
    if (kind && strcmp(kind, "byte") == 0) {
        t->kind = KIND_BYTE;
        byte_load(t);
        return t;
    }
    if (!kind || strcmp(kind, "gpt2") != 0) {
        snprintf(err, errcap, "unknown tokenizer '%s' (known: gpt2, byte)", kind ? kind : "");
        free(t);
        return NULL;
    }
    t->kind = KIND_GPT2;
    if (gpt2_load(t, dir ? dir : "data_cache/gpt2", err, errcap)) {
        tokenizer_free(t);
        return NULL;
    }
    t->cache_mask = (1u << 16) - 1;
    t->cache = callocCheck(t->cache_mask + 1, sizeof(CacheSlot));
    return t;
}

void tokenizer_free(Tokenizer* t) {
    if (!t) return;
    free(t->tok_off);
    free(t->tok_bytes);
    free(t->pairs);
    free(t->cache);
    free(t->ckeys);
    free(t->cids);
    free(t->syms);
    free(t->heap);
    free(t);
}

int tokenizer_vocab_size(const Tokenizer* t) {
    return t->vocab;
}
int tokenizer_eot(const Tokenizer* t) {
    return t->eot;
}
const char* tokenizer_kind(const Tokenizer* t) {
    return t->kind == KIND_GPT2 ? "gpt2" : "byte";
}
void tokenizer_set_js_whitespace(Tokenizer* t, int on) {
    t->js_whitespace = on != 0;
    tokenizer_clear_cache(t);
}

void tokenizer_clear_cache(Tokenizer* t) {
    if (t->cache) memset(t->cache, 0, (t->cache_mask + 1) * sizeof(CacheSlot));
    t->cache_used = t->ckeys_len = t->cids_len = 0;
}

// ----------------------------------------------------------------------------
// pre-tokenizer

// Length of the well-formed UTF-8 sequence at s[0..n) and its code point, or 0 if s[0] does not
// start one (overlong forms, surrogates, > U+10FFFF and truncated sequences are not well formed).
static int utf8_decode(const unsigned char* s, size_t n, int32_t* cp) {
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = (int32_t)c;
        return 1;
    }
    int len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, v = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, v = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, v = c & 0x07, min = 0x10000;
    else
        return 0;
    if ((size_t)len > n) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = (int32_t)v;
    return len;
}

// Class of an ASCII byte (both whitespace conventions agree on ASCII).
static const unsigned char ASCII_CLASS[128] = {
    3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3,
    3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3, 3, 3, 3,
    3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3, 3, 3, 3,
};

static int class_of_cp(int32_t cp, int js) {
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
        return CL_LETTER;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
        return CL_NUMBER;
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
        return CL_SPACE;
    default:
        break;
    }
    if (cp == (js ? 0xFEFF : 0x85)) return CL_SPACE;
    return CL_OTHER;
}

// Class of the character at s[i]; *len gets its byte length (1 for an invalid byte).
static inline int char_class(const unsigned char* s, size_t n, size_t i, int js, int* len) {
    if (s[i] < 0x80) {
        *len = 1;
        return ASCII_CLASS[s[i]];
    }
    int32_t cp;
    int l = utf8_decode(s + i, n - i, &cp);
    if (!l) {
        *len = 1;
        return CL_OTHER;
    }
    *len = l;
    return class_of_cp(cp, js);
}

// End of the run of characters of class `cls` starting at i.
static size_t run_end(const unsigned char* s, size_t n, size_t i, int cls, int js) {
    int l;
    while (i < n && char_class(s, n, i, js, &l) == cls)
        i += (size_t)l;
    return i;
}

// End of the pre-token starting at s[i] (i < n).
static size_t pretok_next(const unsigned char* s, size_t n, size_t i, int js) {
    unsigned c = s[i];
    if (c == '\'' && i + 1 < n) { // 's 't 're 've 'm 'll 'd (lowercase ASCII only)
        unsigned d = s[i + 1];
        if (d == 's' || d == 't' || d == 'm' || d == 'd') return i + 2;
        if (i + 2 < n) {
            unsigned e = s[i + 2];
            if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l'))
                return i + 3;
        }
    }
    int l0, l1;
    int k0 = char_class(s, n, i, js, &l0);
    if (c == ' ' && i + 1 < n) { //  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+ with the space
        int k1 = char_class(s, n, i + 1, js, &l1);
        if (k1 != CL_SPACE) return run_end(s, n, i + 1 + (size_t)l1, k1, js);
    }
    if (k0 != CL_SPACE) return run_end(s, n, i + (size_t)l0, k0, js);
    // \s+(?!\S) | \s+ : a whitespace run followed by a non-space gives back its last character
    size_t j = i, last = i;
    int l;
    while (j < n && char_class(s, n, j, js, &l) == CL_SPACE) {
        last = j;
        j += (size_t)l;
    }
    if (j == n || last == i) return j;
    return last;
}

// ----------------------------------------------------------------------------
// BPE on one piece

typedef struct {
    int* ids;
    size_t n, cap;
} IdBuf;

static void idbuf_push(IdBuf* b, int id) {
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 64;
        b->ids = reallocCheck(b->ids, b->cap * sizeof(int));
    }
    b->ids[b->n++] = id;
}

static inline int heap_less(HeapItem a, HeapItem b) {
    return a.rank < b.rank || (a.rank == b.rank && a.left < b.left);
}

static void heap_push(HeapItem* h, size_t* n, HeapItem it) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(it, h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = it;
}

static HeapItem heap_pop(HeapItem* h, size_t* n) {
    HeapItem top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && heap_less(h[c + 1], h[c])) c++;
        if (!heap_less(h[c], last)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}

static void push_pair(const Tokenizer* t, HeapItem* h, size_t* nh, int left) {
    const Sym* sy = t->syms;
    int right = sy[left].next;
    if (right < 0) return;
    int r = pair_rank(t, sy[left].id, sy[right].id);
    if (r >= 0) heap_push(h, nh, (HeapItem){r, left});
}

// Merge lowest-rank pairs first, equal ranks left to right: the same result as applying each
// merge rule in rank order to all its non-overlapping occurrences, left to right (encoder.py).
// Every pair that involves a freshly merged token ranks after the merge that made it, so popped
// entries never go back in rank; stale entries are recognised and skipped.
static void bpe_piece(Tokenizer* t, IdBuf* out, const unsigned char* s, size_t n) {
    if (n + 1 > t->scratch_cap) {
        t->scratch_cap = 2 * n + 64;
        t->syms = reallocCheck(t->syms, t->scratch_cap * sizeof(Sym));
        t->heap = reallocCheck(t->heap, t->scratch_cap * sizeof(HeapItem));
    }
    Sym* sy = t->syms;
    HeapItem* h = t->heap;
    size_t nh = 0;
    for (size_t i = 0; i < n; i++) {
        sy[i].id = t->byte_id[s[i]];
        sy[i].prev = (int)i - 1;
        sy[i].next = i + 1 < n ? (int)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < n; i++)
        push_pair(t, h, &nh, (int)i);
    while (nh > 0) {
        HeapItem it = heap_pop(h, &nh);
        int l = it.left, r = sy[l].next;
        if (sy[l].id < 0 || r < 0 || pair_rank(t, sy[l].id, sy[r].id) != it.rank) continue;
        sy[l].id = 256 + it.rank;
        sy[r].id = -1;
        sy[l].next = sy[r].next;
        if (sy[r].next >= 0) sy[sy[r].next].prev = l;
        if (sy[l].prev >= 0) push_pair(t, h, &nh, sy[l].prev);
        push_pair(t, h, &nh, l);
    }
    for (int i = 0; i >= 0; i = sy[i].next)
        idbuf_push(out, sy[i].id);
}

#define CACHE_MAX_PIECE 256
#define CACHE_MAX_BYTES (16u << 20)

static void encode_piece(Tokenizer* t, IdBuf* out, const unsigned char* s, size_t n) {
    if (n == 1) {
        idbuf_push(out, t->byte_id[s[0]]);
        return;
    }
    if (n > CACHE_MAX_PIECE) {
        bpe_piece(t, out, s, n);
        return;
    }
    uint64_t hsh = hash_bytes(s, n);
    size_t i = hsh & t->cache_mask;
    for (; t->cache[i].hash; i = (i + 1) & t->cache_mask) {
        const CacheSlot* c = &t->cache[i];
        if (c->hash == hsh && c->key_len == n && memcmp(t->ckeys + c->key_off, s, n) == 0) {
            for (uint32_t k = 0; k < c->nids; k++)
                idbuf_push(out, t->cids[c->ids_off + k]);
            return;
        }
    }
    size_t start = out->n;
    bpe_piece(t, out, s, n);
    size_t nids = out->n - start;
    // insert; start over when the table is half full or the pools are large
    if (t->cache_used * 2 >= t->cache_mask || t->ckeys_len + n > CACHE_MAX_BYTES) {
        tokenizer_clear_cache(t);
        for (i = hsh & t->cache_mask; t->cache[i].hash; i = (i + 1) & t->cache_mask) {}
    }
    if (t->ckeys_len + n > t->ckeys_cap) {
        t->ckeys_cap = 2 * (t->ckeys_len + n) + 4096;
        t->ckeys = reallocCheck(t->ckeys, t->ckeys_cap);
    }
    if (t->cids_len + nids > t->cids_cap) {
        t->cids_cap = 2 * (t->cids_len + nids) + 1024;
        t->cids = reallocCheck(t->cids, t->cids_cap * sizeof(int));
    }
    memcpy(t->ckeys + t->ckeys_len, s, n);
    memcpy(t->cids + t->cids_len, out->ids + start, nids * sizeof(int));
    t->cache[i] = (CacheSlot){hsh, (uint32_t)t->ckeys_len, (uint32_t)n, (uint32_t)t->cids_len,
                              (uint32_t)nids};
    t->ckeys_len += n;
    t->cids_len += nids;
    t->cache_used++;
}

static void encode_ordinary(Tokenizer* t, IdBuf* out, const unsigned char* s, size_t n) {
    if (t->kind == KIND_BYTE) {
        for (size_t i = 0; i < n; i++)
            idbuf_push(out, s[i]);
        return;
    }
    int js = t->js_whitespace;
    for (size_t i = 0; i < n;) {
        size_t j = pretok_next(s, n, i, js);
        encode_piece(t, out, s + i, j - i);
        i = j;
    }
}

size_t tokenizer_encode(Tokenizer* t, const char* text, size_t n, int allow_special, int** ids) {
    IdBuf out = {NULL, 0, 0};
    out.cap = n / 3 + 16;
    out.ids = mallocCheck(out.cap * sizeof(int));
    const unsigned char* s = (const unsigned char*)text;
    size_t i = 0;
    while (allow_special && i < n) {
        const unsigned char* m = memmem(s + i, n - i, EOT_TEXT, EOT_LEN);
        if (!m) break;
        size_t k = (size_t)(m - s);
        encode_ordinary(t, &out, s + i, k - i);
        idbuf_push(&out, t->eot);
        i = k + EOT_LEN;
    }
    encode_ordinary(t, &out, s + i, n - i);
    *ids = out.ids;
    return out.n;
}

size_t tokenizer_split_point(const Tokenizer* t, const char* text, size_t n, size_t target) {
    if (target >= n) return n;
    if (t->kind == KIND_BYTE) return target;
    const unsigned char* s = (const unsigned char*)text;
    for (size_t p = target > 0 ? target : 1; p + 1 < n; p++) {
        // "x y" with ASCII letters: the piece holding x ends at p, " y..." starts one
        if (s[p] == ' ' && s[p - 1] < 0x80 && ASCII_CLASS[s[p - 1]] == CL_LETTER &&
            s[p + 1] < 0x80 && ASCII_CLASS[s[p + 1]] == CL_LETTER)
            return p;
    }
    return n;
}

// ----------------------------------------------------------------------------
// decode

const unsigned char* tokenizer_token_bytes(const Tokenizer* t, int id, size_t* len) {
    if (id < 0 || id >= t->vocab) {
        *len = 0;
        return NULL;
    }
    *len = t->tok_off[id + 1] - t->tok_off[id];
    return t->tok_bytes + t->tok_off[id];
}

char* tokenizer_decode(const Tokenizer* t, const int* ids, size_t n, size_t* len) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < t->vocab) total += t->tok_off[ids[i] + 1] - t->tok_off[ids[i]];
    char* out = mallocCheck(total + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab) continue;
        size_t l = t->tok_off[ids[i] + 1] - t->tok_off[ids[i]];
        memcpy(out + k, t->tok_bytes + t->tok_off[ids[i]], l);
        k += l;
    }
    out[k] = 0;
    *len = k;
    return out;
}
