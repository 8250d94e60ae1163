// tests/test_mc.c: multiple-choice sets (data/mc.h): the llm.c evaluation-file reader against
// files this test writes with its own writer (the layout of karpathy/llm.c dev/data/
// data_common.py write_evalfile), every kind of corruption refused naming the file and the
// example, the HellaSwag JSONL reader on tests/fixtures/mc_hellaswag.jsonl (byte and GPT-2
// tokenizers, and the same examples written as an llm.c file read back identically), the three
// scoring rules on hand-made cases where each picks a different completion, the tally and the
// left cut to the window against hand-worked positions, bits per byte on hand examples, and
// `scripts/setup hellaswag` without the file. The model side is tests/test_mc_eval.c.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/json_read.h"
#include "common/util.h"
#include "data/mc.h"
#include "data/tokenizer.h"
#include "tests/file_util.h"
#include "tests/reader_util.h"
#include "tests/testutil.h"

#define FIXTURE  "tests/fixtures/mc_hellaswag.jsonl"
#define GPT2_DIR "data_cache/gpt2"

// ---------------------------------------------------------------------------------------------
// the test's own writer of llm.c's evaluation format

typedef struct {
    int label, ncomp, ctx_len;
    int ctx[80];
    int comp_len[6];
    int comp[6][40];
} TEx;

typedef struct {
    unsigned char* buf; // header + stream
    size_t len;
    size_t start[16]; // byte offset of each example's delimiter
} Img;

static void put16(Img* im, unsigned v) {
    im->buf[im->len++] = (unsigned char)(v & 0xff);
    im->buf[im->len++] = (unsigned char)(v >> 8);
}

static void set32(unsigned char* p, int32_t v) {
    for (int k = 0; k < 4; k++)
        p[k] = (unsigned char)((uint32_t)v >> (8 * k));
}

static void set16(unsigned char* p, unsigned v) {
    p[0] = (unsigned char)(v & 0xff);
    p[1] = (unsigned char)(v >> 8);
}

static Img make_img(const TEx* ex, int n) {
    Img im = {.buf = calloc(1, 1024 + 2 * 1024 * (size_t)n), .len = 1024};
    int longest = 0;
    for (int i = 0; i < n; i++) {
        const TEx* e = &ex[i];
        im.start[i] = im.len;
        put16(&im, 65535);
        put16(&im, 0); // size, filled below
        put16(&im, (unsigned)i);
        put16(&im, (unsigned)e->label);
        put16(&im, (unsigned)e->ncomp);
        put16(&im, (unsigned)e->ctx_len);
        for (int t = 0; t < e->ctx_len; t++)
            put16(&im, (unsigned)e->ctx[t]);
        for (int c = 0; c < e->ncomp; c++) {
            put16(&im, (unsigned)e->comp_len[c]);
            for (int t = 0; t < e->comp_len[c]; t++)
                put16(&im, (unsigned)e->comp[c][t]);
        }
        const int nb = (int)(im.len - im.start[i]);
        set16(im.buf + im.start[i] + 2, (unsigned)nb);
        if (nb > longest) longest = nb;
    }
    set32(im.buf, 20240522);
    set32(im.buf + 4, 1);
    set32(im.buf + 8, n);
    set32(im.buf + 12, longest);
    return im;
}

// Five examples of byte tokens: completions start with a space (id 32) except example 3's
// completion 1; example 2 has 3 completions.
static int five(TEx* ex) {
    memset(ex, 0, 5 * sizeof(TEx));
    Rng r;
    rng_seed(&r, 11);
    for (int i = 0; i < 5; i++) {
        TEx* e = &ex[i];
        e->ncomp = i == 2 ? 3 : 4;
        e->label = (i * 3 + 1) % e->ncomp;
        e->ctx_len = 5 + 6 * i;
        for (int t = 0; t < e->ctx_len; t++)
            e->ctx[t] = 'a' + (int)rng_below(&r, 26);
        for (int c = 0; c < e->ncomp; c++) {
            e->comp_len[c] = 2 + (i + c) % 5;
            for (int t = 0; t < e->comp_len[c]; t++)
                e->comp[c][t] = t == 0 && !(i == 3 && c == 1) ? ' ' : 'a' + (int)rng_below(&r, 26);
        }
    }
    return 5;
}

static const char* write_img(const Img* im, const char* name) {
    static char path[1200];
    snprintf(path, sizeof(path), "%s/%s", test_tmpdir(), name);
    rd_write(path, im->buf, im->len);
    return path;
}

static Tokenizer* byte_tok(void) {
    char err[256];
    Tokenizer* t = tokenizer_load("byte", NULL, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    return t;
}

START_TEST(test_llmc_reader) {
    TEx ex[5];
    const int n = five(ex);
    Img im = make_img(ex, n);
    const char* path = write_img(&im, "five.bin");
    Tokenizer* tok = byte_tok();
    McSet s;
    char err[2048];
    ck_assert_msg(mc_load(&s, path, tok, 257, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(s.n, n);
    ck_assert_str_eq(s.format, "llm.c eval file");
    ck_assert_int_eq(s.have_bytes, 1);
    for (int i = 0; i < n; i++) {
        const McExample* e = &s.ex[i];
        ck_assert_int_eq(e->label, ex[i].label);
        ck_assert_int_eq(e->ncomp, ex[i].ncomp);
        ck_assert_int_eq(e->ctx_len, ex[i].ctx_len);
        for (int t = 0; t < e->ctx_len; t++)
            ck_assert_int_eq(e->ctx[t], ex[i].ctx[t]);
        for (int c = 0; c < e->ncomp; c++) {
            ck_assert_int_eq(e->comp_len[c], ex[i].comp_len[c]);
            for (int t = 0; t < e->comp_len[c]; t++)
                ck_assert_int_eq(e->comp[c][t], ex[i].comp[c][t]);
            // one byte per token, less the leading space when there is one
            const int want = ex[i].comp_len[c] - (ex[i].comp[c][0] == ' ');
            ck_assert_int_eq(e->comp_bytes[c], want);
        }
    }
    mc_free(&s);
    // without a tokenizer the bytes are unknown, and the set still loads
    ck_assert_msg(mc_load(&s, path, NULL, 257, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(s.have_bytes, 0);
    mc_free(&s);
    tokenizer_free(tok);
    free(im.buf);
}
END_TEST

// mc_load of the image must fail with every needle in the message (and the file's path).
static void expect_refused(const Img* im, int vocab, const char* const* needles) {
    const char* path = write_img(im, "bad.bin");
    McSet s;
    char err[2048] = "";
    Tokenizer* tok = byte_tok();
    ck_assert_msg(mc_load(&s, path, tok, vocab, err, sizeof(err)) != 0, "accepted; wanted '%s'",
                  needles[0]);
    tokenizer_free(tok);
    ck_assert_msg(strstr(err, path) != NULL, "message does not name the file: %s", err);
    for (int k = 0; needles[k]; k++)
        ck_assert_msg(strstr(err, needles[k]) != NULL, "'%s' not in: %s", needles[k], err);
}
#define REFUSED(im, vocab, ...)                                                                    \
    expect_refused((im), (vocab), (const char* const[]){__VA_ARGS__, NULL})

START_TEST(test_llmc_corruption) {
    TEx ex[5];
    const int n = five(ex);
    const Img good = make_img(ex, n);
    Img b = good;
    b.buf = malloc(good.len + 16);
#define FRESH() memcpy(b.buf, good.buf, good.len), b.len = good.len
    FRESH();
    set32(b.buf, 20240520); // a token shard's magic
    REFUSED(&b, 257, "bad magic 20240520", "20240522");
    FRESH();
    set32(b.buf + 4, 2);
    REFUSED(&b, 257, "unsupported version 2");
    FRESH();
    b.len = good.start[3] + 8; // cut inside example 3
    REFUSED(&b, 257, "example 3:", "truncated");
    FRESH();
    b.len = good.start[3]; // example 3 missing altogether
    REFUSED(&b, 257, "example 3:", "truncated", "3 of the 5 examples");
    FRESH();
    b.len = 1000; // inside the header
    REFUSED(&b, 257, "truncated header");
    FRESH();
    set32(b.buf + 8, 6); // one more example announced than written
    REFUSED(&b, 257, "example 5:", "truncated");
    FRESH();
    set32(b.buf + 8, 2000000000); // refused by the file's size, not by running out of memory
    REFUSED(&b, 257, "announces 2000000000 examples");
    FRESH();
    set16(b.buf + good.start[2] + 6, 3); // label 3 of 3 completions
    REFUSED(&b, 257, "example 2:", "label 3, but it has 3 completions");
    FRESH();
    set16(b.buf + good.start[1], 65534);
    REFUSED(&b, 257, "example 1:", "missing the example delimiter");
    FRESH();
    set16(b.buf + good.start[4] + 12, 300); // the first context token of example 4
    REFUSED(&b, 257, "example 4:", "token id 300 is >= vocab_size 257");
    FRESH();
    REFUSED(&b, 100, "example 0:", ">= vocab_size 100"); // letters are >= 100
    FRESH();
    set16(b.buf + good.start[3] + 4, 7);
    REFUSED(&b, 257, "example 3:", "index field is 7");
    FRESH();
    const unsigned sz = b.buf[good.start[2] + 2] | b.buf[good.start[2] + 3] << 8;
    set16(b.buf + good.start[2] + 2, sz + 2);
    REFUSED(&b, 257, "example 2:", "stated size");
    FRESH();
    set16(b.buf + good.start[1] + 8, 1); // one completion
    REFUSED(&b, 257, "example 1:", "1 completions");
    FRESH();
    memset(b.buf + b.len, 0, 4);
    b.len += 4;
    REFUSED(&b, 257, "4 bytes after the last of the 5 examples");
    FRESH();
    const int32_t longest = (int32_t)(b.buf[12] | b.buf[13] << 8);
    set32(b.buf + 12, longest + 2);
    REFUSED(&b, 257, "longest example");
    FRESH();
    set32(b.buf + 12, longest - 2);
    REFUSED(&b, 257, "more than the header's longest example");
#undef FRESH
    free(b.buf);
    // an empty completion and an empty context
    TEx e2[5];
    five(e2);
    e2[1].comp_len[2] = 0;
    Img im = make_img(e2, n);
    REFUSED(&im, 257, "example 1:", "completion 2 is empty");
    free(im.buf);
    five(e2);
    e2[4].ctx_len = 0;
    im = make_img(e2, n);
    REFUSED(&im, 257, "example 4:", "the context is empty");
    free(im.buf);
    // a completion that is nothing but the space before the ending
    five(e2);
    e2[0].comp_len[3] = 1;
    im = make_img(e2, n);
    REFUSED(&im, 257, "example 0:", "completion 3 decodes to no text");
    free(im.buf);
    free(good.buf);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// HellaSwag JSONL

static void expect_jsonl_refused(const char* text, int vocab, const char* const* needles) {
    char path[1200];
    snprintf(path, sizeof(path), "%s/bad.jsonl", test_tmpdir());
    test_write_text(path, text, strlen(text));
    McSet s;
    char err[2048] = "";
    Tokenizer* tok = byte_tok();
    ck_assert_msg(mc_load(&s, path, tok, vocab, err, sizeof(err)) != 0, "accepted: %s", text);
    tokenizer_free(tok);
    ck_assert_msg(strstr(err, path) != NULL, "message does not name the file: %s", err);
    for (int k = 0; needles[k]; k++)
        ck_assert_msg(strstr(err, needles[k]) != NULL, "'%s' not in: %s", needles[k], err);
}
#define JSONL_REFUSED(text, vocab, ...)                                                            \
    expect_jsonl_refused((text), (vocab), (const char* const[]){__VA_ARGS__, NULL})

#define OK_LINE "{\"ctx\": \"A cat\", \"endings\": [\"sits.\", \"runs.\"], \"label\": 1}\n"

START_TEST(test_jsonl_corruption) {
    JSONL_REFUSED(OK_LINE "{\"ctx\": \"x\", \"endings\": [\"a\", \"b\"], \"label\": 2}\n", 257,
                  "line 2 (example 1)", "label 2, but it has 2 endings");
    JSONL_REFUSED(OK_LINE "\n" OK_LINE "{\"ctx\": \"x\", \"endings\": [\"a\"", 257,
                  "line 4 (example 2)", "malformed JSON");
    JSONL_REFUSED("{\"ctx\": \"x\", \"label\": 0}\n", 257, "line 1 (example 0)", "\"endings\"");
    JSONL_REFUSED("{\"ctx\": \"x\", \"endings\": [\"a\", \"b\"], \"label\": \"1\"}\n", 257,
                  "line 1", "\"label\"");
    JSONL_REFUSED("{\"ctx_a\": \"x\", \"endings\": [\"a\", \"b\"], \"label\": 0}\n", 257, "line 1",
                  "\"ctx\" is missing");
    JSONL_REFUSED("{\"ctx\": \"x\", \"endings\": [\"a\", \"\"], \"label\": 0}\n", 257, "line 1",
                  "ending 1 is not a non-empty string");
    JSONL_REFUSED(OK_LINE, 100, "line 1 (example 0)", "is >= vocab_size 100");
    JSONL_REFUSED("\n\n", 257, "no examples");
    char* huge = malloc((1 << 20) + 64);
    memset(huge, ' ', (1 << 20) + 32);
    memcpy(huge, "{\"ctx\": \"", 9);
    memcpy(huge + (1 << 20) + 20, "x\"}\n", 5);
    huge[(1 << 20) + 25] = '\0';
    JSONL_REFUSED(huge, 257, "line 1 (example 0)", "longer than the 1048576 a line may hold");
    free(huge);
    // no tokenizer for a file that must be tokenised
    char path[1200], err[2048];
    snprintf(path, sizeof(path), "%s/ok.jsonl", test_tmpdir());
    test_write_text(path, OK_LINE, strlen(OK_LINE));
    McSet s;
    ck_assert(mc_load(&s, path, NULL, 257, err, sizeof(err)) != 0);
    ck_assert_msg(strstr(err, "no tokenizer") != NULL, "%s", err);
}
END_TEST

typedef struct {
    int n;
    char ctx[8][128];
    char end[8][6][64];
    int nend[8], label[8];
} Fixture;

// The fixture's examples, read with the JSON parser (blank lines skipped).
static void read_fixture(Fixture* fx) {
    size_t len;
    char* text = test_read_text(FIXTURE, &len);
    memset(fx, 0, sizeof(*fx));
    char* save = NULL;
    for (char* line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        Jv o;
        char err[300];
        ck_assert_msg(json_parse(&o, line, strlen(line), err, sizeof(err)) == 0, "%s", err);
        const int i = fx->n++;
        util_strlcpy(fx->ctx[i], jv_get(&o, "ctx")->s, sizeof(fx->ctx[i]));
        const Jv* e = jv_get(&o, "endings");
        fx->nend[i] = e->n;
        for (int c = 0; c < e->n; c++)
            util_strlcpy(fx->end[i][c], e->items[c].s, sizeof(fx->end[i][c]));
        fx->label[i] = (int)jv_get(&o, "label")->u;
        jv_free(&o);
    }
    free(text);
}

static void expect_ids(const int* ids, int n, const int* want, int nw, const char* what) {
    ck_assert_msg(n == nw, "%s: %d ids, expected %d", what, n, nw);
    for (int t = 0; t < n; t++)
        ck_assert_msg(ids[t] == want[t], "%s: id %d is %d, expected %d", what, t, ids[t], want[t]);
}

START_TEST(test_jsonl_fixture) {
    Fixture fx;
    read_fixture(&fx);
    ck_assert_int_eq(fx.n, 5);
    char err[2048];
    McSet s;
    // byte tokenizer: the ids are the text's bytes, the completions " " + ending
    Tokenizer* tok = byte_tok();
    ck_assert_msg(mc_load(&s, FIXTURE, tok, 257, err, sizeof(err)) == 0, "%s", err);
    ck_assert_str_eq(s.format, "JSONL");
    ck_assert_int_eq(s.n, fx.n);
    TEx ex[5];
    memset(ex, 0, sizeof(ex));
    for (int i = 0; i < fx.n; i++) {
        const McExample* e = &s.ex[i];
        ck_assert_int_eq(e->label, fx.label[i]);
        ck_assert_int_eq(e->ncomp, fx.nend[i]);
        TEx* t = &ex[i];
        t->label = fx.label[i];
        t->ncomp = fx.nend[i];
        t->ctx_len = (int)strlen(fx.ctx[i]);
        for (int k = 0; k < t->ctx_len; k++)
            t->ctx[k] = (unsigned char)fx.ctx[i][k];
        expect_ids(e->ctx, e->ctx_len, t->ctx, t->ctx_len, "context");
        for (int c = 0; c < t->ncomp; c++) {
            const int nb = (int)strlen(fx.end[i][c]);
            t->comp_len[c] = nb + 1;
            t->comp[c][0] = ' ';
            for (int k = 0; k < nb; k++)
                t->comp[c][k + 1] = (unsigned char)fx.end[i][c][k];
            expect_ids(e->comp[c], e->comp_len[c], t->comp[c], t->comp_len[c], "completion");
            ck_assert_int_eq(e->comp_bytes[c], nb); // bytes: "café." is 6, not 5
        }
    }
    ck_assert_int_eq(s.ex[2].comp_bytes[1], 22); // "Snow covers the café." (21 characters)
    // the same examples as an llm.c file read back identically, bytes included
    Img im = make_img(ex, fx.n);
    McSet b;
    ck_assert_msg(mc_load(&b, write_img(&im, "fixture.bin"), tok, 257, err, sizeof(err)) == 0, "%s",
                  err);
    ck_assert_int_eq(b.n, s.n);
    for (int i = 0; i < s.n; i++) {
        ck_assert_int_eq(b.ex[i].label, s.ex[i].label);
        expect_ids(b.ex[i].ctx, b.ex[i].ctx_len, s.ex[i].ctx, s.ex[i].ctx_len, "llm.c context");
        for (int c = 0; c < s.ex[i].ncomp; c++) {
            expect_ids(b.ex[i].comp[c], b.ex[i].comp_len[c], s.ex[i].comp[c], s.ex[i].comp_len[c],
                       "llm.c completion");
            ck_assert_int_eq(b.ex[i].comp_bytes[c], s.ex[i].comp_bytes[c]);
        }
    }
    mc_free(&b);
    free(im.buf);
    mc_free(&s);
    tokenizer_free(tok);
    // GPT-2 BPE: encode(ctx) and encode(" " + ending), as llm.c's hellaswag.py renders them
    tok = tokenizer_load("gpt2", GPT2_DIR, err, sizeof(err));
    ck_assert_msg(tok != NULL, "%s (run scripts/setup tokenizer)", err);
    ck_assert_msg(mc_load(&s, FIXTURE, tok, 50257, err, sizeof(err)) == 0, "%s", err);
    for (int i = 0; i < fx.n; i++) {
        int* ids;
        size_t k = tokenizer_encode(tok, fx.ctx[i], strlen(fx.ctx[i]), 0, &ids);
        expect_ids(s.ex[i].ctx, s.ex[i].ctx_len, ids, (int)k, "gpt2 context");
        free(ids);
        for (int c = 0; c < fx.nend[i]; c++) {
            char sp[80];
            snprintf(sp, sizeof(sp), " %s", fx.end[i][c]);
            k = tokenizer_encode(tok, sp, strlen(sp), 0, &ids);
            expect_ids(s.ex[i].comp[c], s.ex[i].comp_len[c], ids, (int)k, "gpt2 completion");
            free(ids);
            ck_assert_int_eq(s.ex[i].comp_bytes[c], (int)strlen(fx.end[i][c]));
        }
    }
    ck_assert_int_lt(s.ex[0].comp_len[0], (int)strlen(fx.end[0][0])); // BPE merged something
    mc_free(&s);
    tokenizer_free(tok);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// scoring rules, the tally and the window

START_TEST(test_pick_rules) {
    // sum / tokens / bytes: c0 -4 -4 -2; c1 -6 -2 -3; c2 -9 -3 -1: each rule a different pick
    const double ll[3] = {-4, -6, -9};
    const int ntok[3] = {1, 3, 3}, nbytes[3] = {2, 2, 9};
    int pick[3];
    mc_pick(ll, ntok, nbytes, 3, pick);
    ck_assert_int_eq(pick[0], 0);
    ck_assert_int_eq(pick[1], 1);
    ck_assert_int_eq(pick[2], 2);
    // ties go to the lower index, under every rule
    const double tie[3] = {-3, -3, -3};
    const int one[3] = {1, 1, 1};
    mc_pick(tie, one, one, 3, pick);
    ck_assert_int_eq(pick[0], 0);
    ck_assert_int_eq(pick[1], 0);
    ck_assert_int_eq(pick[2], 0);
    const double late[3] = {-5, -2, -2};
    mc_pick(late, one, one, 3, pick);
    ck_assert_int_eq(pick[0], 1);
    // without bytes there is no third pick
    mc_pick(ll, ntok, NULL, 3, pick);
    ck_assert_int_eq(pick[1], 1);
    ck_assert_int_eq(pick[2], -1);
}
END_TEST

// A scorer that returns fixed log-likelihoods and records the contexts it was given.
typedef struct {
    const double* ll; // per completion, example after example
    int k;
    const int* ctx0[16]; // the first call's context pointers and lengths
    int len0[16];
    int calls;
    int fail; // returned instead of 0 when set
} Fake;

static int fake_score(void* model, const int* const* ctx, const int* ctx_len,
                      const int* const* comp, const int* comp_len, int n, double* ll) {
    Fake* f = model;
    (void)comp;
    (void)comp_len;
    for (int c = 0; c < n; c++) {
        if (f->calls == 0) {
            f->ctx0[c] = ctx[c];
            f->len0[c] = ctx_len[c];
        }
        ll[c] = f->ll[f->k++];
    }
    f->calls++;
    return f->fail;
}

START_TEST(test_run_tally_and_window) {
    // three examples of 3 completions: ctx 10 tokens, completions 2, 5 and 3 tokens; the
    // log-likelihoods make example 0 right under acc and acc_norm, example 1 under acc_norm and
    // acc_norm_bytes, example 2 under all three
    TEx ex[3];
    memset(ex, 0, sizeof(ex));
    const int clen[3] = {2, 5, 3};
    for (int i = 0; i < 3; i++) {
        ex[i].ncomp = 3;
        ex[i].ctx_len = 10;
        for (int t = 0; t < 10; t++)
            ex[i].ctx[t] = 'a' + t;
        for (int c = 0; c < 3; c++) {
            ex[i].comp_len[c] = clen[c];
            for (int t = 0; t < clen[c]; t++)
                ex[i].comp[c][t] = t ? 'x' : ' ';
        }
    }
    // bytes of the endings: 1, 4, 2. ll/token and ll/byte per completion:
    //   ex 0: ll -2 -5 -6: sums pick 0; per token -1 -1 -2 -> 0; per byte -2 -1.25 -3 -> 1
    //   ex 1: ll -4 -5 -3: sums pick 2; per token -2 -1 -1 -> 1; per byte -4 -1.25 -1.5 -> 1
    //   ex 2: ll -1 -9 -9: all pick 0
    ex[0].label = 0;
    ex[1].label = 1;
    ex[2].label = 0;
    const double ll[9] = {-2, -5, -6, -4, -5, -3, -1, -9, -9};
    Img im = make_img(ex, 3);
    const char* path = write_img(&im, "tally.bin");
    Tokenizer* tok = byte_tok();
    McSet s;
    char err[2048];
    ck_assert_msg(mc_load(&s, path, tok, 257, err, sizeof(err)) == 0, "%s", err);
    // window 8: completion c keeps 9 - len context tokens: 7, 4, 6 of the 10
    ck_assert_int_eq(mc_check_window(&s, 0, 8, err, sizeof(err)), 0);
    ck_assert_int_eq(mc_longest_row(&s, 0, 8), 8);
    ck_assert_int_eq(mc_longest_row(&s, 0, 100), 14);
    ck_assert_int_eq(mc_most_completions(&s, 0), 3);
    Fake f = {.ll = ll};
    double got[9];
    McResult r = {.ll = got};
    ck_assert_int_eq(mc_run(&s, 0, 8, fake_score, &f, &r, err, sizeof(err)), 0);
    ck_assert_int_eq(r.n, 3);
    ck_assert_int_eq(r.correct[0], 2); // ex 0, ex 2
    ck_assert_int_eq(r.correct[1], 3);
    ck_assert_int_eq(r.correct[2], 2); // ex 1, ex 2
    ck_assert_int_eq(r.truncated, 3);
    ck_assert_double_eq(mc_accuracy(&r, 0), 2.0 / 3);
    for (int k = 0; k < 9; k++)
        ck_assert_double_eq(got[k], ll[k]);
    const int keep[3] = {7, 4, 6};
    for (int c = 0; c < 3; c++) {
        ck_assert_int_eq(f.len0[c], keep[c]);
        ck_assert_ptr_eq(f.ctx0[c], s.ex[0].ctx + 10 - keep[c]); // the last tokens: cut on the left
    }
    // a window that holds everything cuts nothing; limit scores only the first examples
    f = (Fake){.ll = ll};
    r = (McResult){.ll = NULL};
    ck_assert_int_eq(mc_run(&s, 2, 14, fake_score, &f, &r, err, sizeof(err)), 0);
    ck_assert_int_eq(r.n, 2);
    ck_assert_int_eq(r.truncated, 0);
    ck_assert_int_eq(f.len0[1], 10);
    // window 13 cuts only the 5-token completion's context (10 + 5 - 1 = 14 > 13)
    f = (Fake){.ll = ll};
    ck_assert_int_eq(mc_run(&s, 1, 13, fake_score, &f, &r, err, sizeof(err)), 0);
    ck_assert_int_eq(r.truncated, 1);
    ck_assert_int_eq(f.len0[0], 10);
    ck_assert_int_eq(f.len0[1], 9);
    // a scorer's failure names the example: a non-finite log-likelihood, a row too long
    for (int code = -2; code <= -1; code++) {
        f = (Fake){.ll = ll, .fail = code};
        ck_assert_int_eq(mc_run(&s, 0, 8, fake_score, &f, &r, err, sizeof(err)), -1);
        ck_assert_msg(strstr(err, path) && strstr(err, "example 0:") &&
                          strstr(err, code == -2 ? "non-finite" : "longer than"),
                      "%s", err);
    }
    // a completion longer than the window cannot be scored
    ck_assert_int_eq(mc_check_window(&s, 0, 4, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, path) && strstr(err, "example 0: completion 1 has 5 tokens"), "%s",
                  err);
    mc_free(&s);
    // without bytes acc_norm_bytes is not a number
    ck_assert_msg(mc_load(&s, path, NULL, 257, err, sizeof(err)) == 0, "%s", err);
    f = (Fake){.ll = ll};
    ck_assert_int_eq(mc_run(&s, 0, 8, fake_score, &f, &r, err, sizeof(err)), 0);
    ck_assert(isnan(mc_accuracy(&r, 2)));
    ck_assert_int_eq(r.correct[1], 3);
    mc_free(&s);
    tokenizer_free(tok);
    free(im.buf);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// bits per byte

START_TEST(test_bits_per_byte) {
    // 2 nats per token over 3 tokens of 6 bytes: 6 nats = 6 / ln 2 bits over 6 bytes
    ck_assert_double_eq_tol(mc_bits_per_byte(2.0, 3, 6), 1.4426950408889634, 1e-15);
    // 1.5 nats per token, 4 tokens of 11 bytes: 6 / (11 ln 2)
    ck_assert_double_eq_tol(mc_bits_per_byte(1.5, 4, 11), 0.78692456775761640, 1e-15);
    ck_assert(isnan(mc_bits_per_byte(1, 1, 0)));
    Tokenizer* b = byte_tok();
    const int ids[4] = {'H', 'i', 256, '!'}; // end-of-text counts no bytes
    ck_assert_int_eq(mc_text_bytes(b, ids, 4), 3);
    const int bad[1] = {300};
    ck_assert_int_eq(mc_text_bytes(b, bad, 1), -1);
    tokenizer_free(b);
    char err[512];
    Tokenizer* g = tokenizer_load("gpt2", GPT2_DIR, err, sizeof(err));
    ck_assert_msg(g != NULL, "%s (run scripts/setup tokenizer)", err);
    const char* text = "Hello world, caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac";
    int* tid;
    size_t n = tokenizer_encode(g, text, strlen(text), 0, &tid);
    ck_assert_int_lt((int)n, (int)strlen(text)); // fewer tokens than bytes: bpb != nats/ln2
    ck_assert_int_eq(mc_text_bytes(g, tid, n), (long long)strlen(text));
    free(tid);
    tokenizer_free(g);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// scripts/setup hellaswag

START_TEST(test_setup_hellaswag) {
    const char* dir = test_tmpdir();
    char cmd[2400], out[8192] = "";
    snprintf(cmd, sizeof(cmd), "HELLASWAG_DIR='%s' bash scripts/setup hellaswag 2>&1", dir);
    FILE* p = popen(cmd, "r");
    ck_assert(p != NULL);
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0, "exit 0 without the file:\n%s", out);
    ck_assert_msg(strstr(out, "hellaswag_val.jsonl") && strstr(out, dir) &&
                      strstr(out, "rowanz/hellaswag") && strstr(out, "--multiple-choice"),
                  "no instructions:\n%s", out);
    // with the file in place it is found and counted
    char dst[1400];
    snprintf(dst, sizeof(dst), "%s/hellaswag_val.jsonl", dir);
    size_t len;
    char* fx = test_read_text(FIXTURE, &len);
    test_write_text(dst, fx, len);
    free(fx);
    p = popen(cmd, "r");
    n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    st = pclose(p);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit %d with the file:\n%s",
                  WEXITSTATUS(st), out);
    ck_assert_msg(strstr(out, "5 examples"), "%s", out);
}
END_TEST

static Suite* mc_suite(void) {
    Suite* s = suite_create("mc");
    TCase* k = tcase_create("readers");
    tcase_set_timeout(k, 60);
    tcase_add_test(k, test_llmc_reader);
    tcase_add_test(k, test_llmc_corruption);
    tcase_add_test(k, test_jsonl_corruption);
    tcase_add_test(k, test_jsonl_fixture);
    tcase_add_test(k, test_pick_rules);
    tcase_add_test(k, test_run_tally_and_window);
    tcase_add_test(k, test_bits_per_byte);
    tcase_add_test(k, test_setup_hellaswag);
    suite_add_tcase(s, k);
    return s;
}

TEST_MAIN(mc_suite)
