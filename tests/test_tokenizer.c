// tests/test_tokenizer.c: GPT-2 BPE and byte tokenizers against independent references:
// js-tiktoken ids (tests/fixtures/tokenizer_ref.txt, scripts/ref_tokens.mjs), ids from OpenAI's
// encoder.py algorithm (tokenizer_ref_py.txt, scripts/ref_tokens_py.py), encoder.json parsed here,
// byte-exact round trips on random bytes, and malformed vocab.bpe files.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "common/util.h"
#include "data/tokenizer.h"
#include "tests/testutil.h"

#define GPT2_DIR "data_cache/gpt2"

static Tokenizer* load_gpt2(void) {
    char err[1500];
    ck_assert_msg(util_file_exists(GPT2_DIR "/vocab.bpe"),
                  GPT2_DIR "/vocab.bpe is missing: run scripts/setup tokenizer");
    Tokenizer* t = tokenizer_load("gpt2", GPT2_DIR, err, sizeof err);
    ck_assert_msg(t != NULL, "load failed: %s", err);
    return t;
}

// ----------------------------------------------------------------------------
// reference fixtures: name \t ordinary|special \t hex \t ids

typedef struct {
    char name[64];
    int special;
    unsigned char* text;
    size_t len;
    int* ids;
    size_t nids;
} RefCase;

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static RefCase* read_fixture(const char* path, size_t* ncases) {
    char err[1300];
    size_t len;
    char* buf = util_read_file(path, &len, err, sizeof err);
    ck_assert_msg(buf != NULL, "%s", err);
    RefCase* cs = NULL;
    size_t n = 0, cap = 0;
    int line = 0;
    for (char* p = buf; p < buf + len;) {
        char* nl = strchr(p, '\n');
        ck_assert_msg(nl != NULL, "%s: last line has no newline", path);
        *nl = 0;
        line++;
        char* f[4];
        f[0] = p;
        for (int k = 1; k < 4; k++) {
            char* tab = strchr(f[k - 1], '\t');
            ck_assert_msg(tab != NULL, "%s:%d: expected 4 tab-separated fields", path, line);
            *tab = 0;
            f[k] = tab + 1;
        }
        if (n == cap) cs = reallocCheck(cs, (cap = cap ? 2 * cap : 64) * sizeof(RefCase));
        RefCase* c = &cs[n++];
        util_strlcpy(c->name, f[0], sizeof c->name);
        c->special = strcmp(f[1], "special") == 0;
        size_t hl = strlen(f[2]);
        ck_assert_msg(hl % 2 == 0, "%s:%d: odd hex length", path, line);
        c->len = hl / 2;
        c->text = mallocCheck(c->len + 1);
        for (size_t i = 0; i < c->len; i++) {
            int hi = hexval(f[2][2 * i]), lo = hexval(f[2][2 * i + 1]);
            ck_assert_msg(hi >= 0 && lo >= 0, "%s:%d: bad hex", path, line);
            c->text[i] = (unsigned char)(hi * 16 + lo);
        }
        c->ids = mallocCheck((strlen(f[3]) / 2 + 1) * sizeof(int));
        c->nids = 0;
        for (char* q = f[3]; *q;) {
            char* end;
            long v = strtol(q, &end, 10);
            ck_assert_msg(end != q, "%s:%d: bad id list", path, line);
            c->ids[c->nids++] = (int)v;
            q = end;
            while (*q == ' ')
                q++;
        }
        p = nl + 1;
    }
    free(buf);
    *ncases = n;
    return cs;
}

static void free_fixture(RefCase* cs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(cs[i].text);
        free(cs[i].ids);
    }
    free(cs);
}

// Encode every case and compare with the reference ids.
static void check_fixture(const char* path, int js_whitespace, size_t min_cases) {
    Tokenizer* t = load_gpt2();
    tokenizer_set_js_whitespace(t, js_whitespace);
    size_t n;
    RefCase* cs = read_fixture(path, &n);
    ck_assert_msg(n >= min_cases, "%s: only %zu cases", path, n);
    size_t total = 0;
    for (size_t c = 0; c < n; c++) {
        int* ids;
        size_t m = tokenizer_encode(t, (const char*)cs[c].text, cs[c].len, cs[c].special, &ids);
        size_t k = 0;
        while (k < m && k < cs[c].nids && ids[k] == cs[c].ids[k])
            k++;
        ck_assert_msg(m == cs[c].nids && k == m,
                      "%s case %s: %zu ids vs %zu reference, first difference at %zu (%d vs %d)",
                      path, cs[c].name, m, cs[c].nids, k, k < m ? ids[k] : -1,
                      k < cs[c].nids ? cs[c].ids[k] : -1);
        // and the reference ids decode back to the input bytes
        size_t dl;
        char* dec = tokenizer_decode(t, cs[c].ids, cs[c].nids, &dl);
        ck_assert_msg(dl == cs[c].len && memcmp(dec, cs[c].text, dl) == 0,
                      "case %s: decode(reference ids) differs from the input", cs[c].name);
        free(dec);
        free(ids);
        total += m;
    }
    ck_assert_uint_gt(total, 2000); // the prose and code cases are really there
    free_fixture(cs, n);
    tokenizer_free(t);
}

START_TEST(test_js_tiktoken_reference) {
    check_fixture("tests/fixtures/tokenizer_ref.txt", 1, 300);
}
END_TEST

START_TEST(test_encoder_py_reference) {
    check_fixture("tests/fixtures/tokenizer_ref_py.txt", 0, 300);
}
END_TEST

// Ids of the pieces encoded one by one, concatenated (each piece must be one pre-token).
static size_t encode_pieces(Tokenizer* t, const char* const* pieces, int np, int* out) {
    size_t n = 0;
    for (int k = 0; k < np; k++) {
        int* ids;
        size_t m = tokenizer_encode(t, pieces[k], strlen(pieces[k]), 0, &ids);
        memcpy(out + n, ids, m * sizeof(int));
        n += m;
        free(ids);
    }
    return n;
}

static void expect_pieces(Tokenizer* t, const char* text, const char* const* pieces, int np) {
    int want[64], *got;
    size_t nw = encode_pieces(t, pieces, np, want);
    size_t ng = tokenizer_encode(t, text, strlen(text), 0, &got);
    ck_assert_uint_eq(ng, nw);
    for (size_t i = 0; i < ng; i++)
        ck_assert_int_eq(got[i], want[i]);
    free(got);
}

// The two \s conventions: U+0085 is whitespace in Python's regex only, U+FEFF in JavaScript's
// only. " X" + letter splits as " ", X, letter when X is whitespace, and " X", letter otherwise.
START_TEST(test_whitespace_conventions) {
    Tokenizer* t = load_gpt2();
    const char* nel = "x \xc2\x85y";
    const char* bom = "x \xef\xbb\xbfy";
    expect_pieces(t, nel, (const char* const[]){"x", " ", "\xc2\x85", "y"}, 4);
    expect_pieces(t, bom, (const char* const[]){"x", " \xef\xbb\xbf", "y"}, 3);
    tokenizer_set_js_whitespace(t, 1);
    expect_pieces(t, nel, (const char* const[]){"x", " \xc2\x85", "y"}, 3);
    expect_pieces(t, bom, (const char* const[]){"x", " ", "\xef\xbb\xbf", "y"}, 4);
    // both: U+00A0, U+2028, U+3000 are whitespace; U+200B (a format character) is not
    for (int js = 0; js < 2; js++) {
        tokenizer_set_js_whitespace(t, js);
        expect_pieces(t,
                      "a \xc2\xa0"
                      "b",
                      (const char* const[]){"a", " ", "\xc2\xa0", "b"}, 4);
        expect_pieces(t,
                      "a \xe2\x80\xa8"
                      "b",
                      (const char* const[]){"a", " ", "\xe2\x80\xa8", "b"}, 4);
        expect_pieces(t,
                      "a \xe3\x80\x80"
                      "b",
                      (const char* const[]){"a", " ", "\xe3\x80\x80", "b"}, 4);
        expect_pieces(t,
                      "a \xe2\x80\x8b"
                      "b",
                      (const char* const[]){"a", " \xe2\x80\x8b", "b"}, 3);
    }
    tokenizer_free(t);
}
END_TEST

// ----------------------------------------------------------------------------
// vocabulary rebuilt from vocab.bpe == encoder.json

// GPT-2's byte alphabet, from its definition: printable Latin-1 maps to itself, the remaining 68
// bytes map to U+0100, U+0101, ... in byte order.
static void alphabet(int cp_to_byte[324]) {
    int extra = 0;
    for (int i = 0; i < 324; i++)
        cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        if (printable)
            cp_to_byte[b] = b;
        else
            cp_to_byte[256 + extra++] = b;
    }
}

// Parse a JSON string starting after its opening quote into code points. Returns the position
// after the closing quote.
static const char* json_string(const char* p, int32_t* cps, int* ncp) {
    *ncp = 0;
    while (*p != '"') {
        int32_t c;
        if (*p == '\\') {
            p++;
            switch (*p) {
            case 'u': {
                c = (int32_t)strtol((char[5]){p[1], p[2], p[3], p[4], 0}, NULL, 16);
                p += 4;
                break;
            }
            case 'n':
                c = '\n';
                break;
            case 't':
                c = '\t';
                break;
            case 'r':
                c = '\r';
                break;
            case 'b':
                c = '\b';
                break;
            case 'f':
                c = '\f';
                break;
            default:
                c = (unsigned char)*p;
                break; // \" \\ \/
            }
            p++;
        } else {
            unsigned char u = (unsigned char)*p;
            int extra = u < 0x80 ? 0 : u < 0xE0 ? 1 : u < 0xF0 ? 2 : 3;
            c = extra == 0 ? u : extra == 1 ? (u & 0x1F) : extra == 2 ? (u & 0x0F) : (u & 7);
            p++;
            for (int k = 0; k < extra; k++)
                c = c << 6 | (*p++ & 0x3F);
        }
        cps[(*ncp)++] = c;
    }
    return p + 1;
}

START_TEST(test_vocab_matches_encoder_json) {
    Tokenizer* t = load_gpt2();
    char err[1300];
    size_t len;
    char* js = util_read_file(GPT2_DIR "/encoder.json", &len, err, sizeof err);
    ck_assert_msg(js != NULL, "%s (run scripts/setup tokenizer)", err);
    int cp_to_byte[324];
    alphabet(cp_to_byte);
    char* seen = callocCheck(50257, 1);
    int32_t cps[256];
    unsigned char bytes[256];
    int count = 0;
    const char* p = strchr(js, '{');
    ck_assert(p != NULL);
    p++;
    for (;;) {
        while (*p == ' ' || *p == '\n' || *p == ',')
            p++;
        if (*p == '}') break;
        ck_assert_msg(*p == '"', "encoder.json: unexpected '%c'", *p);
        int ncp;
        p = json_string(p + 1, cps, &ncp);
        while (*p == ' ' || *p == ':')
            p++;
        char* end;
        long id = strtol(p, &end, 10);
        p = end;
        ck_assert(id >= 0 && id < 50257 && !seen[id]);
        seen[id] = 1;
        count++;
        size_t nb = 0;
        if (id == 50256) { // the special token is stored as its literal text
            for (int k = 0; k < ncp; k++)
                bytes[nb++] = (unsigned char)cps[k];
        } else {
            for (int k = 0; k < ncp; k++) {
                ck_assert(cps[k] >= 0 && cps[k] < 324 && cp_to_byte[cps[k]] >= 0);
                bytes[nb++] = (unsigned char)cp_to_byte[cps[k]];
            }
        }
        size_t tl;
        const unsigned char* tb = tokenizer_token_bytes(t, (int)id, &tl);
        ck_assert_msg(tb && tl == nb && memcmp(tb, bytes, nb) == 0,
                      "token %ld differs from encoder.json", id);
    }
    ck_assert_int_eq(count, 50257);
    ck_assert_int_eq(tokenizer_vocab_size(t), 50257);
    ck_assert_int_eq(tokenizer_eot(t), 50256);
    size_t tl;
    ck_assert_ptr_null(tokenizer_token_bytes(t, 50257, &tl));
    ck_assert_ptr_null(tokenizer_token_bytes(t, -1, &tl));
    free(seen);
    free(js);
    tokenizer_free(t);
}
END_TEST

// ----------------------------------------------------------------------------
// round trips

// Random byte strings that mix ASCII, spaces, apostrophes, valid multi-byte UTF-8 and invalid
// sequences (stray continuation bytes, truncated and overlong forms, surrogates, > U+10FFFF).
static size_t random_bytes(unsigned char* out, size_t cap, Rng* r) {
    static const char* frags[] = {"'s",
                                  "'ll",
                                  " ",
                                  "  ",
                                  "\n",
                                  "\t",
                                  "\r\n",
                                  "a",
                                  "Z",
                                  "7",
                                  "\xc3\xa9",
                                  "\xe4\xb8\xad",
                                  "\xf0\x9f\x98\x80",
                                  "\xc2\xa0",
                                  "\xc2\x85",
                                  "\xef\xbb\xbf",
                                  "\xe2\x80\xa8",
                                  "\x80",
                                  "\xbf",
                                  "\xc0\xaf",
                                  "\xe0\x80\xaf",
                                  "\xed\xa0\x80",
                                  "\xf4\x90\x80\x80",
                                  "\xe4\xb8",
                                  "\xf0\x9f\x98",
                                  "\xff",
                                  "\xfe",
                                  "<|endoftext|>"};
    size_t nfr = sizeof frags / sizeof frags[0];
    size_t n = 0, target = (uint32_t)rng_u64(r) % (cap - 16);
    while (n < target) {
        uint32_t k = (uint32_t)rng_u64(r) % 4;
        if (k == 0) { // any byte
            out[n++] = (unsigned char)((uint32_t)rng_u64(r) & 0xFF);
        } else {
            const char* f = frags[(uint32_t)rng_u64(r) % nfr];
            size_t fl = strlen(f);
            if (n + fl > cap) break;
            memcpy(out + n, f, fl);
            n += fl;
        }
    }
    return n;
}

static void check_round_trips(Tokenizer* t, int cases, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    unsigned char buf[200];
    int V = tokenizer_vocab_size(t);
    for (int c = 0; c < cases; c++) {
        size_t n = random_bytes(buf, sizeof buf, &r);
        for (int special = 0; special < 2; special++) {
            int* ids;
            size_t m = tokenizer_encode(t, (const char*)buf, n, special, &ids);
            ck_assert(m <= n); // at most one token per byte; none for empty input
            for (size_t i = 0; i < m; i++) {
                ck_assert(ids[i] >= 0 && ids[i] < V);
                if (!special) ck_assert_int_ne(ids[i], tokenizer_eot(t));
            }
            size_t dl;
            char* dec = tokenizer_decode(t, ids, m, &dl);
            ck_assert_msg(dl == n && memcmp(dec, buf, n) == 0, "round trip %d failed (%s)", c,
                          tokenizer_kind(t));
            free(dec);
            free(ids);
        }
    }
}

START_TEST(test_round_trip_random_bytes) {
    Tokenizer* t = load_gpt2();
    check_round_trips(t, 4000, 1234);
    tokenizer_set_js_whitespace(t, 1);
    check_round_trips(t, 1000, 99);
    tokenizer_free(t);
    char err[200];
    Tokenizer* b = tokenizer_load("byte", NULL, err, sizeof err);
    ck_assert_ptr_nonnull(b);
    check_round_trips(b, 1000, 7);
    tokenizer_free(b);
}
END_TEST

// Invalid bytes are single "other" characters: they join neighbouring punctuation into one
// piece, and never merge with letters.
START_TEST(test_invalid_utf8_pieces) {
    Tokenizer* t = load_gpt2();
    int *a, *b;
    // "\xff" alone is the byte token; "a\xff" = "a" + byte 0xff (letters and others never merge)
    size_t na = tokenizer_encode(t, "a\xff", 2, 0, &a);
    ck_assert_uint_eq(na, 2);
    size_t nb = tokenizer_encode(t, "a", 1, 0, &b);
    ck_assert_int_eq(a[0], b[0]);
    size_t l;
    const unsigned char* tb = tokenizer_token_bytes(t, a[1], &l);
    ck_assert(l == 1 && tb[0] == 0xff);
    free(a);
    free(b);
    (void)nb;
    tokenizer_free(t);
}
END_TEST

START_TEST(test_byte_tokenizer) {
    char err[200];
    Tokenizer* t = tokenizer_load("byte", "ignored", err, sizeof err);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(tokenizer_vocab_size(t), 257);
    ck_assert_int_eq(tokenizer_eot(t), 256);
    ck_assert_str_eq(tokenizer_kind(t), "byte");
    const char* s = "A\xff<|endoftext|>z";
    int* ids;
    size_t n = tokenizer_encode(t, s, strlen(s), 1, &ids);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(ids[0], 'A');
    ck_assert_int_eq(ids[1], 255);
    ck_assert_int_eq(ids[2], 256);
    ck_assert_int_eq(ids[3], 'z');
    free(ids);
    n = tokenizer_encode(t, s, strlen(s), 0, &ids);
    ck_assert_uint_eq(n, strlen(s));
    free(ids);
    ck_assert_ptr_null(tokenizer_load("bogus", NULL, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "bogus"));
    tokenizer_free(t);
}
END_TEST

// Chunked encoding at tokenizer_split_point gives the same ids as one call.
START_TEST(test_split_point_chunks) {
    Tokenizer* t = load_gpt2();
    char err[1300];
    size_t plen;
    char* prose = util_read_file("tests/fixtures/tokenizer_prose.txt", &plen, err, sizeof err);
    ck_assert_msg(prose != NULL, "%s", err);
    int *whole, *part;
    size_t nw = tokenizer_encode(t, prose, plen, 0, &whole);
    size_t k = 0, pos = 0;
    int chunks = 0;
    while (pos < plen) {
        size_t end = tokenizer_split_point(t, prose, plen, pos + 37);
        ck_assert_uint_gt(end, pos);
        size_t m = tokenizer_encode(t, prose + pos, end - pos, 0, &part);
        ck_assert_uint_le(k + m, nw);
        for (size_t i = 0; i < m; i++)
            ck_assert_int_eq(part[i], whole[k + i]);
        k += m;
        free(part);
        pos = end;
        chunks++;
    }
    ck_assert_uint_eq(k, nw);
    ck_assert_int_gt(chunks, 20);
    free(whole);
    free(prose);
    tokenizer_free(t);
}
END_TEST

// ----------------------------------------------------------------------------
// malformed vocab.bpe

static char* real_vocab(size_t* len) {
    char err[1300];
    char* v = util_read_file(GPT2_DIR "/vocab.bpe", len, err, sizeof err);
    ck_assert_msg(v != NULL, "%s (run scripts/setup tokenizer)", err);
    return v;
}

// Write DIR/vocab.bpe = head + middle + tail and check that loading fails with an error naming
// the file, the line (when line > 0) and containing `what`.
static void expect_reject(const char* name, const char* a, size_t na, const char* b, size_t nb,
                          const char* c, size_t nc, int line, const char* what) {
    char dir[1100], path[1200], err[1500];
    snprintf(dir, sizeof dir, "%s/%s", test_tmpdir(), name);
    ck_assert_int_eq(util_mkdirs(dir, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/vocab.bpe", dir);
    FILE* f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fwrite(a, 1, na, f);
    fwrite(b, 1, nb, f);
    fwrite(c, 1, nc, f);
    fclose(f);
    err[0] = 0;
    Tokenizer* t = tokenizer_load("gpt2", dir, err, sizeof err);
    ck_assert_msg(t == NULL, "%s: malformed vocab.bpe was accepted", name);
    ck_assert_msg(strstr(err, path) != NULL, "%s: error does not name the file: %s", name, err);
    if (line > 0) {
        char tag[1300];
        snprintf(tag, sizeof tag, "%s:%d:", path, line);
        ck_assert_msg(strstr(err, tag) != NULL, "%s: error does not name line %d: %s", name, line,
                      err);
    }
    ck_assert_msg(strstr(err, what) != NULL, "%s: expected '%s' in: %s", name, what, err);
}

// Offset of the start of 1-based line `line`.
static size_t line_start(const char* v, int line) {
    size_t o = 0;
    for (int l = 1; l < line; l++)
        o = (size_t)(strchr(v + o, '\n') - v) + 1;
    return o;
}

START_TEST(test_malformed_vocab) {
    size_t n;
    char* v = real_vocab(&n);
    size_t l2 = line_start(v, 2), l5 = line_start(v, 5), l6 = line_start(v, 6);
    size_t l1001 = line_start(v, 1001);
    // sanity: the untouched copy loads
    char dir[1100], path[1200], err[1500];
    snprintf(dir, sizeof dir, "%s/ok", test_tmpdir());
    util_mkdirs(dir, err, sizeof err);
    snprintf(path, sizeof path, "%s/vocab.bpe", dir);
    FILE* f = fopen(path, "wb");
    fwrite(v, 1, n, f);
    fclose(f);
    Tokenizer* t = tokenizer_load("gpt2", dir, err, sizeof err);
    ck_assert_msg(t != NULL, "%s", err);
    tokenizer_free(t);

    expect_reject("noheader", v + l2, n - l2, "", 0, "", 0, 1, "#version");
    expect_reject("empty", "", 0, "", 0, "", 0, 1, "#version");
    expect_reject("threefields", v, l5, "a b c\n", 6, v + l6, n - l6, 5, "two space-separated");
    expect_reject("onefield", v, l5, "abc\n", 4, v + l6, n - l6, 5, "two space-separated");
    expect_reject("blankline", v, l5, "\n", 1, v + l6, n - l6, 5, "two space-separated");
    // line 5 refers to a symbol that no earlier merge made
    expect_reject("unknown", v, l5, "zzqx y\n", 7, v + l6, n - l6, 5, "unknown symbol 'zzqx'");
    expect_reject("alphabet", v, l5, "\xe4\xb8\xad a\n", 6, v + l6, n - l6, 5, "U+4E2D");
    expect_reject("crlf", v, l5, "a b\r\n", 5, v + l6, n - l6, 5, "U+000D");
    // line 5 repeats line 2's merge
    expect_reject("duplicate", v, l5, v + l2, line_start(v, 3) - l2, v + l6, n - l6, 5,
                  "duplicate merge (same as line 2)");
    expect_reject("truncated", v, l1001, "", 0, "", 0, 1001, "truncated");
    expect_reject("nonewline", v, n - 1, "", 0, "", 0, 50001, "truncated");
    expect_reject("extra", v, n, "a b\n", 4, "", 0, 50002, "more than 50000");
    // a missing file names the path and the setup command
    t = tokenizer_load("gpt2", "/nonexistent/dir", err, sizeof err);
    ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/dir/vocab.bpe"));
    ck_assert_ptr_nonnull(strstr(err, "scripts/setup tokenizer"));
    free(v);
}
END_TEST

static Suite* tokenizer_suite(void) {
    Suite* s = suite_create("tokenizer");
    TCase* tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_js_tiktoken_reference);
    tcase_add_test(tc, test_encoder_py_reference);
    tcase_add_test(tc, test_whitespace_conventions);
    tcase_add_test(tc, test_vocab_matches_encoder_json);
    tcase_add_test(tc, test_round_trip_random_bytes);
    tcase_add_test(tc, test_invalid_utf8_pieces);
    tcase_add_test(tc, test_byte_tokenizer);
    tcase_add_test(tc, test_split_point_chunks);
    tcase_add_test(tc, test_malformed_vocab);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(tokenizer_suite)
