// tests/test_prepare.c: ./prepare end to end. Text files -> shards -> shard_read: every document
// starts with EOT, decoding each document gives its text back byte for byte, the val split is the
// first N tokens, shards have the requested size, stale shards go, bad input exits 2.
// --doc-tokens N: documents of exactly N tokens, each EOT first, the text's own EOTs removed,
// the tail dropped, the validation split rounded to whole documents; N = 1, non-numbers and a
// text shorter than one document exit 2 naming the option.
// The prepare binary is the one built beside this test (BUILD/prepare).
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "tests/testutil.h"

#define GPT2_DIR "data_cache/gpt2"

static const char* prepare_bin(void) {
    static char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/prepare", test_build_dir());
    ck_assert_msg(access(path, X_OK) == 0, "%s not built", path);
    return path;
}

// Run prepare with the given argument string (quiet); returns its exit code.
static int run_prepare(const char* args) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s --quiet %s 2>/dev/null", prepare_bin(), args);
    int rc = system(cmd);
    ck_assert(rc != -1 && WIFEXITED(rc));
    return WEXITSTATUS(rc);
}

// Run prepare expecting exit code 2 and a message on stderr that contains `want` (the bad
// option, value or file).
static void expect_usage_error(const char* dir, const char* args, const char* want) {
    char cmd[8192], errpath[1200], err[1400];
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", dir);
    snprintf(cmd, sizeof cmd, "%s --quiet %s 2>%s", prepare_bin(), args, errpath);
    int rc = system(cmd);
    ck_assert(rc != -1 && WIFEXITED(rc));
    ck_assert_msg(WEXITSTATUS(rc) == 2, "%s: exit code %d, want 2", args, WEXITSTATUS(rc));
    size_t n;
    char* msg = util_read_file(errpath, &n, err, sizeof err);
    ck_assert_msg(msg != NULL, "%s", err);
    ck_assert_msg(strstr(msg, want) != NULL, "%s: message '%s' does not name '%s'", args, msg,
                  want);
    free(msg);
}

static void write_text(const char* path, const char* s) {
    FILE* f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fwrite(s, 1, strlen(s), f);
    fclose(f);
}

// Concatenate PREFIX_SPLIT_000000.bin, ... ; returns the shard count, *ntok the total.
static int read_split(const char* prefix, const char* split, uint16_t** out, size_t* ntok,
                      size_t shard_tokens) {
    *out = NULL;
    *ntok = 0;
    int k = 0;
    for (;; k++) {
        char path[1200], err[1400];
        snprintf(path, sizeof path, "%s_%s_%06d.bin", prefix, split, k);
        if (!util_file_exists(path)) break;
        Shard s;
        ck_assert_msg(shard_read(&s, path, err, sizeof err) == 0, "%s", err);
        ck_assert_uint_le(s.ntok, shard_tokens);
        *out = reallocCheck(*out, (*ntok + s.ntok) * sizeof(uint16_t) + 1);
        memcpy(*out + *ntok, s.tokens, s.ntok * sizeof(uint16_t));
        *ntok += s.ntok;
        shard_free(&s);
    }
    return k;
}

// Read val + train, split at EOT and compare each decoded document with docs[i].
static void check_stream(const char* prefix, const char* kind, const char* const* docs, int ndocs,
                         size_t want_val, size_t shard_tokens) {
    uint16_t *val, *train;
    size_t nv, nt;
    int sv = read_split(prefix, "val", &val, &nv, shard_tokens);
    int st = read_split(prefix, "train", &train, &nt, shard_tokens);
    ck_assert_int_ge(st, 1);
    ck_assert_uint_eq(nv, want_val);
    ck_assert_int_eq(sv, (int)((nv + shard_tokens - 1) / shard_tokens));
    ck_assert_int_eq(st, (int)((nt + shard_tokens - 1) / shard_tokens));
    size_t n = nv + nt;
    int* all = mallocCheck(n * sizeof(int));
    for (size_t i = 0; i < nv; i++)
        all[i] = val[i];
    for (size_t i = 0; i < nt; i++)
        all[nv + i] = train[i];
    char err[1400];
    Tokenizer* t = tokenizer_load(kind, GPT2_DIR, err, sizeof err);
    ck_assert_msg(t != NULL, "%s", err);
    int eot = tokenizer_eot(t);
    ck_assert_int_eq(all[0], eot);
    int d = 0;
    for (size_t i = 0; i < n;) {
        ck_assert_int_eq(all[i], eot);
        size_t j = i + 1;
        while (j < n && all[j] != eot)
            j++;
        ck_assert_int_lt(d, ndocs);
        size_t len;
        char* text = tokenizer_decode(t, all + i + 1, j - i - 1, &len);
        ck_assert_msg(len == strlen(docs[d]) && memcmp(text, docs[d], len) == 0,
                      "document %d decodes to '%s', expected '%s'", d, text, docs[d]);
        free(text);
        d++;
        i = j;
    }
    ck_assert_int_eq(d, ndocs);
    tokenizer_free(t);
    free(all);
    free(val);
    free(train);
}

static const char* DOC_A = "The whale, the whale! It's 3 o'clock.\n\nA second paragraph   \n";
static const char* DOC_B = "Ünïcödé: 漢字 🐋 and a literal <|endoftext|> stays text.";
static const char* DOC_C = "x";

START_TEST(test_split_file_gpt2) {
    ck_assert_msg(util_file_exists(GPT2_DIR "/vocab.bpe"), "run scripts/setup tokenizer");
    const char* dir = test_tmpdir();
    char a[1100], b[1100], c[1100], e[1100], args[6000], prefix[1100];
    snprintf(a, sizeof a, "%s/a.txt", dir);
    snprintf(b, sizeof b, "%s/b.txt", dir);
    snprintf(c, sizeof c, "%s/c.txt", dir);
    snprintf(e, sizeof e, "%s/empty.txt", dir);
    write_text(a, DOC_A);
    write_text(b, DOC_B);
    write_text(c, DOC_C);
    write_text(e, "");
    snprintf(prefix, sizeof prefix, "%s/out/corpus", dir);
    snprintf(args, sizeof args, "--out %s --val-tokens 7 --shard-tokens 9 --split file %s %s %s %s",
             prefix, a, e, b, c);
    ck_assert_int_eq(run_prepare(args), 0);
    const char* docs[] = {DOC_A, DOC_B, DOC_C}; // the empty file makes no document
    check_stream(prefix, "gpt2", docs, 3, 7, 9);
}
END_TEST

START_TEST(test_split_paragraph) {
    const char* dir = test_tmpdir();
    char f[1100], args[4000], prefix[1100];
    snprintf(f, sizeof f, "%s/p.txt", dir);
    write_text(f, "\n\nFirst para\nline two\n\n \t\n\nSecond para\r\n\r\nThird\n  indented\nend");
    snprintf(prefix, sizeof prefix, "%s/para", dir);
    snprintf(args, sizeof args, "--out %s --val-tokens 2 --split paragraph %s", prefix, f);
    ck_assert_int_eq(run_prepare(args), 0);
    // blank lines stay with the paragraph before them (leading ones with the first)
    const char* docs[] = {"\n\nFirst para\nline two\n\n \t\n\n", "Second para\r\n\r\n",
                          "Third\n  indented\nend"};
    check_stream(prefix, "gpt2", docs, 3, 2, 100000000);
}
END_TEST

START_TEST(test_split_custom_byte_fraction) {
    const char* dir = test_tmpdir();
    char f[1100], args[4000], prefix[1100];
    snprintf(f, sizeof f, "%s/s.txt", dir);
    // 3 documents of 5, 7 and 10 bytes (+1 EOT each) = 25 tokens; 0.25 -> 6 val tokens
    write_text(f, "hello\n##\nworld!!\n##\n\n##\nlast\xff\x80 doc");
    snprintf(prefix, sizeof prefix, "%s/sep", dir);
    snprintf(args, sizeof args,
             "--out %s --tokenizer byte --val-fraction 0.25 --shard-tokens 4 --split '\\n##\\n' %s",
             prefix, f);
    ck_assert_int_eq(run_prepare(args), 0);
    const char* docs[] = {"hello", "world!!", "last\xff\x80 doc"};
    check_stream(prefix, "byte", docs, 3, 6, 4);
}
END_TEST

// A second run with bigger shards removes the now stale higher-numbered shards.
START_TEST(test_stale_shards_removed) {
    const char* dir = test_tmpdir();
    char f[1100], args[4000], prefix[1100], path[1200];
    snprintf(f, sizeof f, "%s/t.txt", dir);
    write_text(f, "abcdefghijklmnopqrstuvwxyz0123456789");
    snprintf(prefix, sizeof prefix, "%s/st", dir);
    snprintf(args, sizeof args, "--out %s --tokenizer byte --val-tokens 5 --shard-tokens 4 %s",
             prefix, f);
    ck_assert_int_eq(run_prepare(args), 0);
    snprintf(path, sizeof path, "%s_train_000007.bin", prefix);
    ck_assert(util_file_exists(path)); // 32 train tokens in shards of 4
    snprintf(args, sizeof args, "--out %s --tokenizer byte --val-tokens 5 --shard-tokens 100 %s",
             prefix, f);
    ck_assert_int_eq(run_prepare(args), 0);
    ck_assert(!util_file_exists(path));
    snprintf(path, sizeof path, "%s_train_000001.bin", prefix);
    ck_assert(!util_file_exists(path));
    snprintf(path, sizeof path, "%s_val_000001.bin", prefix);
    ck_assert(!util_file_exists(path));
    const char* docs[] = {"abcdefghijklmnopqrstuvwxyz0123456789"};
    check_stream(prefix, "byte", docs, 1, 5, 100);
}
END_TEST

START_TEST(test_bad_input) {
    const char* dir = test_tmpdir();
    char f[1100], args[4000], prefix[1100], path[1200];
    snprintf(f, sizeof f, "%s/small.txt", dir);
    write_text(f, "tiny");
    snprintf(prefix, sizeof prefix, "%s/bad", dir);
    snprintf(path, sizeof path, "%s_val_000000.bin", prefix);
    // each failure names what is wrong: the file, the option and its value
    char want[1200];
    snprintf(args, sizeof args, "--out %s %s/missing.txt", prefix, dir);
    snprintf(want, sizeof want, "%s/missing.txt", dir);
    expect_usage_error(dir, args, want);
    snprintf(args, sizeof args, "--out %s --tokenizer byte --val-tokens 5 %s", prefix, f);
    expect_usage_error(dir, args, "nothing for training"); // 5 tokens: all of them validation
    snprintf(args, sizeof args, "--out %s --val-fraction 1.5 %s", prefix, f);
    expect_usage_error(dir, args, "--val-fraction");
    expect_usage_error(dir, args, "1.5");
    snprintf(args, sizeof args, "--out %s --shard-tokens x %s", prefix, f);
    expect_usage_error(dir, args, "--shard-tokens");
    snprintf(args, sizeof args, "--out %s --bogus %s", prefix, f);
    expect_usage_error(dir, args, "--bogus");
    snprintf(args, sizeof args, "--out %s --tokenizer nope %s", prefix, f);
    expect_usage_error(dir, args, "'nope'");
    snprintf(args, sizeof args, "--out %s --dir %s/novocab %s", prefix, dir, f);
    snprintf(want, sizeof want, "%s/novocab/vocab.bpe", dir);
    expect_usage_error(dir, args, want);
    ck_assert(!util_file_exists(path)); // nothing was written by any failed run
    ck_assert_int_eq(run_prepare(""), 2);
    ck_assert_int_eq(run_prepare("--help >/dev/null"), 0);
}
END_TEST

// Read a split back as one token array (the shards in order).
static uint16_t* read_all(const char* prefix, const char* split, size_t* n) {
    uint16_t* t;
    read_split(prefix, split, &t, n, 100000000);
    return t;
}

START_TEST(test_doc_tokens) {
    const char* dir = test_tmpdir();
    char f[1100], args[4000], prefix[1100];
    snprintf(f, sizeof f, "%s/d.txt", dir);
    // three documents (7, 10 and 2 bytes); their 19 bytes in order: abcdefghijklmnopqrs
    write_text(f, "abcdefg\n##\nhijklmnopq\n##\nrs");
    const char* text = "abcdefghijklmnopqrs";
    snprintf(prefix, sizeof prefix, "%s/fixed", dir);
    // N = 5: EOT + 4 bytes: abcd efgh ijkl mnop, tail qrs dropped; --val-tokens 8 rounds to
    // the nearest whole number of documents: 2 (10 tokens), train the other 2
    snprintf(args, sizeof args,
             "--out %s --tokenizer byte --doc-tokens 5 --val-tokens 8 --split '\n##\n' %s", prefix,
             f);
    ck_assert_int_eq(run_prepare(args), 0);
    size_t nv, nt;
    uint16_t* val = read_all(prefix, "val", &nv);
    uint16_t* train = read_all(prefix, "train", &nt);
    ck_assert_uint_eq(nv, 10);
    ck_assert_uint_eq(nt, 10);
    for (size_t i = 0; i < nv + nt; i++) {
        uint16_t tok = i < nv ? val[i] : train[i - nv];
        if (i % 5 == 0)
            ck_assert_uint_eq(tok, 256); // EOT first in every document, nowhere else
        else
            ck_assert_uint_eq(tok, (unsigned char)text[i / 5 * 4 + i % 5 - 1]);
    }
    free(val);
    free(train);
    // --val-tokens 7 rounds down to 1 document
    snprintf(args, sizeof args,
             "--out %s --tokenizer byte --doc-tokens 5 --val-tokens 7 --split '\n##\n' %s", prefix,
             f);
    ck_assert_int_eq(run_prepare(args), 0);
    val = read_all(prefix, "val", &nv);
    train = read_all(prefix, "train", &nt);
    ck_assert_uint_eq(nv, 5);
    ck_assert_uint_eq(nt, 15);
    ck_assert_uint_eq(train[0], 256);
    ck_assert_uint_eq(train[1], 'e');
    free(val);
    free(train);
    // bad values
    snprintf(args, sizeof args, "--out %s --tokenizer byte --doc-tokens 1 %s", prefix, f);
    expect_usage_error(dir, args, "--doc-tokens");
    snprintf(args, sizeof args, "--out %s --tokenizer byte --doc-tokens x %s", prefix, f);
    expect_usage_error(dir, args, "--doc-tokens");
    expect_usage_error(dir, args, "'x'");
    snprintf(args, sizeof args, "--out %s --tokenizer byte --doc-tokens -3 %s", prefix, f);
    expect_usage_error(dir, args, "--doc-tokens");
    // 19 text bytes (the separators are not text): too few for one document of EOT + 20
    snprintf(args, sizeof args, "--out %s --tokenizer byte --doc-tokens 21 --split '\\n##\\n' %s",
             prefix, f);
    expect_usage_error(dir, args, "shorter than one document");
}
END_TEST

static Suite* prepare_suite(void) {
    Suite* s = suite_create("prepare");
    TCase* tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_split_file_gpt2);
    tcase_add_test(tc, test_split_paragraph);
    tcase_add_test(tc, test_split_custom_byte_fraction);
    tcase_add_test(tc, test_stale_shards_removed);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_doc_tokens);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(prepare_suite)
