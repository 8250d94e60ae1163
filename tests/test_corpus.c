// tests/test_corpus.c: the library side of ./prepare and ./evaluate --passkey, called directly:
// data/corpus.c (document splitting, chunked encoding, shard splits, stale-shard removal,
// separator escapes, re-cutting into fixed-length documents) and data/passkey.c (sequence layout in
// both modes). Expected token streams are written out by hand from the layouts in data/corpus.h and
// data/passkey.h, with the byte tokenizer (id = byte value, EOT = 256) so every id is known without
// a vocabulary. Also the message a new user gets when a config names data that is not there yet: a
// missing directory is "no file matches" (not a glob read error), and a bundled corpus names the
// one command that fetches it, through the library and through ./train with configs/gpt2_124M.conf.
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "data/corpus.h"
#include "data/dataloader.h"
#include "data/passkey.h"
#include "data/shard.h"
#include "tests/testutil.h"

#define EOT 256

static Tokenizer* byte_tok(void) {
    char err[512];
    Tokenizer* t = tokenizer_load("byte", NULL, err, sizeof err);
    ck_assert_msg(t != NULL, "%s", err);
    return t;
}

// Encode `text` with split mode `split`; compare with the expected stream, written as a string
// in which '@' stands for EOT.
static void check_stream(const char* text, const char* split, const char* want, size_t want_docs,
                         size_t chunk) {
    Tokenizer* t = byte_tok();
    CorpusTokens c = {NULL, 0, 0, 0};
    CorpusOptions o = {split, 0, NULL, NULL};
    corpus_encode_text(&c, t, text, strlen(text), &o, chunk);
    size_t n = strlen(want);
    ck_assert_uint_eq(c.ndocs, want_docs);
    ck_assert_uint_eq(c.n, n);
    for (size_t i = 0; i < n; i++) {
        int w = want[i] == '@' ? EOT : (unsigned char)want[i];
        ck_assert_msg(c.tok[i] == w, "split %s: token %zu is %d, want %d", split, i, c.tok[i], w);
    }
    corpus_tokens_free(&c);
    tokenizer_free(t);
}

START_TEST(test_split_modes) {
    // file: one document; empty text: none
    check_stream("ab\n\ncd", "file", "@ab\n\ncd", 1, 1 << 20);
    check_stream("", "file", "", 0, 1 << 20);
    // paragraph: blank lines stay with the paragraph before; leading blanks with the first
    check_stream("\nab\n\n \ncd\ne\n\n", "paragraph", "@\nab\n\n \n@cd\ne\n\n", 2, 1 << 20);
    check_stream("\n\n", "paragraph", "", 0, 1 << 20);
    // separator: removed, empty pieces make no document
    check_stream("x<S>yy<S><S>z<S>", "<S>", "@x@yy@z", 3, 1 << 20);
}
END_TEST

START_TEST(test_chunked_encoding_is_whole) {
    // pieces of 3 bytes give the same stream as encoding whole (byte ids are context-free, so
    // this checks the chunk walk covers every byte exactly once, in order)
    check_stream("hello world, a longer line\n", "file", "@hello world, a longer line\n", 1, 3);
    check_stream("one\n\ntwo three\n", "paragraph", "@one\n\n@two three\n", 2, 2);
}
END_TEST

START_TEST(test_unescape) {
    char* s = corpus_unescape("a\\nb\\tc\\rd\\\\e\\qf\\");
    ck_assert_str_eq(s, "a\nb\tc\rd\\eqf\\");
    free(s);
}
END_TEST

// Shards PREFIX_train_*: count, sizes and content; then a smaller rewrite removes stale ones.
START_TEST(test_write_split_and_stale) {
    char prefix[1024], path[1200], err[1400];
    snprintf(prefix, sizeof prefix, "%s/c", test_tmpdir());
    uint16_t tok[5] = {256, 7, 8, 9, 10};
    ck_assert_int_eq(corpus_write_split(prefix, "train", tok, 5, 2, NULL, err, sizeof err), 3);
    size_t sizes[3] = {2, 2, 1};
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s_train_%06d.bin", prefix, k);
        Shard s;
        ck_assert_msg(shard_read(&s, path, err, sizeof err) == 0, "%s", err);
        ck_assert_uint_eq(s.ntok, sizes[k]);
        for (size_t i = 0; i < s.ntok; i++)
            ck_assert_int_eq(s.tokens[i], tok[2 * k + (int)i]);
        shard_free(&s);
    }
    ck_assert_int_eq(corpus_write_split(prefix, "train", tok, 2, 2, NULL, err, sizeof err), 1);
    snprintf(path, sizeof path, "%s_train_%06d.bin", prefix, 0);
    ck_assert(util_file_exists(path));
    for (int k = 1; k < 3; k++) {
        snprintf(path, sizeof path, "%s_train_%06d.bin", prefix, k);
        ck_assert_msg(!util_file_exists(path), "stale %s left behind", path);
    }
    // an unwritable prefix fails with the path in the message
    ck_assert_int_eq(
        corpus_write_split("/nonexistent-dir/x", "val", tok, 5, 2, NULL, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "/nonexistent-dir/x_val_000000.bin") != NULL, "%s", err);
}
END_TEST

// corpus_fixed_docs: the text tokens (the stream's own EOTs left out) in documents of exactly N
// tokens, EOT first, the unfinished tail dropped; the return value is the dropped tail's length.
START_TEST(test_fixed_docs) {
    // three documents of text 1..10 (3, 2 and 5 tokens)
    const uint16_t in[] = {EOT, 1, 2, 3, EOT, 4, 5, EOT, 6, 7, 8, 9, 10};
    // N = 3: EOT + 2 text tokens each: 1 2 | 3 4 | 5 6 | 7 8 | 9 10, no tail
    const uint16_t want3[] = {EOT, 1, 2, EOT, 3, 4, EOT, 5, 6, EOT, 7, 8, EOT, 9, 10};
    // N = 4: 1 2 3 | 4 5 6 | 7 8 9, tail 10 dropped; N = 11: one document of all 10; N = 12:
    // none, all 10 dropped; N = 2: one text token per document
    const uint16_t want4[] = {EOT, 1, 2, 3, EOT, 4, 5, 6, EOT, 7, 8, 9};
    const struct {
        size_t n;
        const uint16_t* want;
        size_t nwant, ndocs, dropped;
    } cases[] = {{3, want3, 15, 5, 0},
                 {4, want4, 12, 3, 1},
                 {11, NULL, 11, 1, 0},
                 {12, NULL, 0, 0, 10},
                 {2, NULL, 20, 10, 0}};
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        CorpusTokens c = {NULL, 0, 0, 0};
        c.tok = mallocCheck(sizeof(in));
        memcpy(c.tok, in, sizeof(in));
        c.n = c.cap = sizeof(in) / sizeof(in[0]);
        c.ndocs = 3;
        size_t dropped = corpus_fixed_docs(&c, EOT, cases[k].n);
        ck_assert_uint_eq(dropped, cases[k].dropped);
        ck_assert_uint_eq(c.n, cases[k].nwant);
        ck_assert_uint_eq(c.ndocs, cases[k].ndocs);
        for (size_t i = 0; i < c.n; i++) {
            // every N-th token is EOT, the others are the text in order
            if (cases[k].want) ck_assert_uint_eq(c.tok[i], cases[k].want[i]);
            if (i % cases[k].n == 0)
                ck_assert_uint_eq(c.tok[i], EOT);
            else
                ck_assert_uint_eq(c.tok[i],
                                  1 + i / cases[k].n * (cases[k].n - 1) + i % cases[k].n - 1);
        }
        corpus_tokens_free(&c);
    }
}
END_TEST

START_TEST(test_passkey_ids) {
    Passkey p;
    passkey_from_ids(&p);
    int seq[32];
    Rng r;
    rng_seed(&r, 5);
    // T = 20: needle [1 2 3 K 4] (5) + query [1 2 3] (3) leaves 12 filler tokens
    int at = passkey_build(seq, 20, &p, 13, 0.0, 100, &r);
    ck_assert_int_eq(at, 19);
    int head[5] = {1, 2, 3, 13, 4};
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(seq[i], head[i]);
    for (int i = 5; i < 17; i++)
        ck_assert_msg(seq[i] >= 20 && seq[i] < 100, "filler %d at %d", seq[i], i);
    ck_assert_int_eq(seq[17], 1);
    ck_assert_int_eq(seq[18], 2);
    ck_assert_int_eq(seq[19], 3);
    // depth 0.5 of 12 filler tokens: needle before filler token 6, i.e. at position 6
    at = passkey_build(seq, 20, &p, 17, 0.5, 100, &r);
    ck_assert_int_eq(at, 19);
    ck_assert_int_eq(seq[6], 1);
    ck_assert_int_eq(seq[9], 17);
    ck_assert_int_eq(seq[10], 4);
    // too short for needle + query + one filler token
    ck_assert_int_eq(passkey_build(seq, 8, &p, 13, 0.0, 100, &r), -1);
    for (int d = 0; d < 10; d++)
        ck_assert_int_eq(p.keys[d], 10 + d);
    passkey_free(&p);
}
END_TEST

START_TEST(test_passkey_text_byte) {
    Tokenizer* t = byte_tok();
    Passkey p;
    ck_assert_int_eq(passkey_from_tokenizer(&p, t), 0);
    for (int d = 0; d < 10; d++)
        ck_assert_int_eq(p.keys[d], '0' + d); // byte tokenizer: the digit without a space
    const char* filler = "The grass is green. The sky is blue. The sun is yellow. Here we go. "
                         "There and back again. ";
    const char* pre = "The pass key is";
    const char* post = ". Remember it. ";
    const char* query = "What is the pass key? The pass key is";
    size_t nf = strlen(filler), np = strlen(pre), npo = strlen(post), nq = strlen(query);
    ck_assert_uint_eq(p.nfill, nf);
    int T = (int)(3 * nf + np + 1 + npo + nq);
    int* seq = mallocCheck(sizeof(int) * (size_t)T);
    // depth 0.5 of 3 filler repeats snaps down to the start of the second repeat
    int at = passkey_build(seq, T, &p, '7', 0.5, 257, NULL);
    ck_assert_int_eq(at, T - 1);
    char* got = mallocCheck((size_t)T + 1);
    for (int i = 0; i < T; i++)
        got[i] = (char)seq[i];
    got[T] = 0;
    char want[2048];
    snprintf(want, sizeof want, "%s%s7%s%s%s%s", filler, pre, post, filler, filler, query);
    ck_assert_str_eq(got, want);
    free(got);
    free(seq);
    passkey_free(&p);
    tokenizer_free(t);
}
END_TEST

START_TEST(test_missing_data_messages) {
    char pat[1200], err[1400];
    DataLoader dl;
    // a bundled corpus whose directory does not exist yet
    snprintf(pat, sizeof pat, "%s/data_cache/kjv/kjv_train_*.bin", test_tmpdir());
    ck_assert_int_eq(dataloader_init(&dl, pat, 2, 4, 0, 1, err, sizeof err), -1);
    ck_assert_msg(strstr(err, pat) && strstr(err, "no file matches"), "%s", err);
    ck_assert_msg(strstr(err, "bash scripts/setup corpus kjv"), "%s", err);
    ck_assert_msg(!strstr(err, "glob failed"), "%s", err);
    snprintf(pat, sizeof pat, "data_cache/mobydick-missing-%d/x_*.bin", (int)getpid());
    ck_assert_int_eq(dataloader_init(&dl, pat, 2, 4, 0, 1, err, sizeof err), -1);
    ck_assert_msg(!strstr(err, "scripts/setup"), "not a bundled corpus: %s", err);
    snprintf(pat, sizeof pat, "%s/mydata_kjv/kjv_*.bin", test_tmpdir());
    ck_assert_int_eq(dataloader_init(&dl, pat, 2, 4, 0, 1, err, sizeof err), -1);
    ck_assert_msg(!strstr(err, "scripts/setup"), "not a bundled corpus: %s", err);
    // any other missing directory: no match, with the tool that makes shards
    snprintf(pat, sizeof pat, "%s/no/such/dir/x_*.bin", test_tmpdir());
    ck_assert_int_eq(dataloader_init(&dl, pat, 2, 4, 0, 1, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "no file matches") && strstr(err, "./prepare"), "%s", err);
    ck_assert_msg(!strstr(err, "glob failed"), "%s", err);
}
END_TEST

// A new user's first try: ./train configs/gpt2_124M.conf where no kjv shards exist (a fresh
// working directory). It must stop with exit 2 and print the command that fetches the corpus.
START_TEST(test_train_names_setup_command) {
    char conf[PATH_MAX], cmd[3 * PATH_MAX + 1300], out[1200];
    ck_assert_ptr_nonnull(realpath("configs/gpt2_124M.conf", conf));
    const char* dir = test_tmpdir();
    snprintf(out, sizeof out, "%s/stderr.txt", dir);
    char bin[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(test_build_dir(), bin));
    snprintf(cmd, sizeof cmd, "cd %s && %s/train %s >/dev/null 2>%s", dir, bin, conf, out);
    int rc = system(cmd);
    ck_assert(rc != -1 && WIFEXITED(rc));
    ck_assert_int_eq(WEXITSTATUS(rc), 2);
    size_t n;
    char e[256];
    char* text = util_read_file(out, &n, e, sizeof e);
    ck_assert_msg(text != NULL, "%s", e);
    ck_assert_msg(strstr(text, "data_cache/kjv/kjv_train_*.bin: no file matches"), "%s", text);
    ck_assert_msg(strstr(text, "bash scripts/setup corpus kjv"), "%s", text);
    free(text);
}
END_TEST

static Suite* corpus_suite(void) {
    Suite* s = suite_create("corpus");
    TCase* tc = tcase_create("core");
    tcase_add_test(tc, test_split_modes);
    tcase_add_test(tc, test_chunked_encoding_is_whole);
    tcase_add_test(tc, test_unescape);
    tcase_add_test(tc, test_write_split_and_stale);
    tcase_add_test(tc, test_fixed_docs);
    tcase_add_test(tc, test_passkey_ids);
    tcase_add_test(tc, test_passkey_text_byte);
    suite_add_tcase(s, tc);
    TCase* tm = tcase_create("missing_data");
    tcase_set_timeout(tm, 60);
    tcase_add_test(tm, test_missing_data_messages);
    tcase_add_test(tm, test_train_names_setup_command);
    suite_add_tcase(s, tm);
    return s;
}

TEST_MAIN(corpus_suite)
