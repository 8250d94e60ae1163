// tests/test_readers_data.c: the data-side readers and writers on bad input, each checked for
// its return or exit code and a message that names the file (and line) and the fault:
//   - token shards: the llm.c file kinds a shard is mistaken for (debug state, tokenizer,
//     optimizer state) are named from their magic numbers; a shard too large for the int32
//     header count is refused before anything is written; a write that fails midway (file-size
//     limit) reports the file and leaves neither it nor a temporary behind;
//   - the dataloader refuses a batch size or sequence length below 1;
//   - ./prepare: a stale shard it cannot remove (a directory of that name) is an error naming it;
//   - probe parameters outside their documented ranges (probes_validate) and an empty split;
//   - ./tokenize with a malformed vocab.bpe: invalid UTF-8, a line with one symbol, and a merge
//     whose result is already a token exit 2 naming file:line.
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/dataloader.h"
#include "data/probes.h"
#include "data/shard.h"
#include "tests/reader_util.h"
#include "tests/testutil.h"

static void write_header_file(const char* path, int32_t magic) {
    int32_t h[256 + 2] = {0}; // the header, then 4 tokens' worth of zero bytes
    h[0] = magic;
    h[1] = 1;
    h[2] = 4;
    rd_write(path, h, sizeof(h));
}

START_TEST(test_shard_magic_hints) {
    const char* dir = test_tmpdir();
    const struct {
        int32_t magic;
        const char* hint;
    } cases[] = {
        {20240327, "llm.c debug state file"},
        {20240328, "llm.c tokenizer file (gpt2_tokenizer.bin)"},
        {20240527, "llm.c optimizer state file"},
        {20240326, "llm.c model checkpoint"},
    };
    for (int i = 0; i < 4; i++) {
        char p[700], err[1024];
        snprintf(p, sizeof(p), "%s/kind%d.bin", dir, i);
        write_header_file(p, cases[i].magic);
        Shard s;
        ck_assert_int_eq(shard_read(&s, p, err, sizeof(err)), -1);
        ck_assert_msg(strstr(err, p) && strstr(err, "wrong magic number") &&
                          strstr(err, cases[i].hint),
                      "magic %d: %s", cases[i].magic, err);
        size_t n = 0;
        ck_assert_int_eq(shard_probe(p, &n, err, sizeof(err)), -1);
        ck_assert_msg(strstr(err, cases[i].hint), "probe, magic %d: %s", cases[i].magic, err);
    }
}
END_TEST

START_TEST(test_shard_write_limits) {
    const char* dir = test_tmpdir();
    char p[700], err[1024];
    snprintf(p, sizeof(p), "%s/huge.bin", dir);
    static const uint16_t one = 1;
    // the count is checked before any token is read: a pointer to one token is enough
    ck_assert_int_eq(shard_write(p, &one, (size_t)INT32_MAX + 1, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, p) && strstr(err, "do not fit one shard"), "%s", err);
    ck_assert_msg(access(p, F_OK) != 0, "%s was created", p);
    // a write that fails midway: a child under a 4 KiB file-size limit writes 100000 tokens
    snprintf(p, sizeof(p), "%s/limited.bin", dir);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {4096, 4096};
        setrlimit(RLIMIT_FSIZE, &rl);
        uint16_t* t = calloc(100000, sizeof(uint16_t));
        char e2[1024];
        int rc = shard_write(p, t, 100000, e2, sizeof(e2));
        free(t);
        int ok = rc == -1 && strstr(e2, "limited.bin") != NULL;
        exit(ok ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the limited write did not fail cleanly");
    ck_assert_msg(access(p, F_OK) != 0, "%s exists after a failed write", p);
    DIR* d = opendir(dir);
    struct dirent* e;
    while ((e = readdir(d)))
        ck_assert_msg(strstr(e->d_name, "limited") == NULL, "left behind: %s", e->d_name);
    closedir(d);
}
END_TEST

START_TEST(test_dataloader_sizes) {
    const char* dir = test_tmpdir();
    char p[700], err[1024];
    snprintf(p, sizeof(p), "%s/s.bin", dir);
    uint16_t t[64] = {0};
    ck_assert(shard_write(p, t, 64, err, sizeof(err)) == 0);
    DataLoader dl;
    ck_assert_int_eq(dataloader_init(&dl, p, 0, 8, 0, 1, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "batch_size 0 and seq_len 8 must be >= 1"), "%s", err);
    ck_assert_int_eq(dataloader_init(&dl, p, 2, 0, 0, 1, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "batch_size 2 and seq_len 0 must be >= 1"), "%s", err);
}
END_TEST

START_TEST(test_prepare_stale_shard_is_a_directory) {
    const char* dir = test_tmpdir();
    char p[700], args[4096];
    snprintf(p, sizeof(p), "%s/text.txt", dir);
    const char* text = "Call me Ishmael. Some years ago, never mind how long precisely.\n";
    rd_write(p, text, strlen(text));
    snprintf(args, sizeof(args), "mkdir -p %s/c_train_000001.bin", dir);
    ck_assert_int_eq(system(args), 0);
    snprintf(args, sizeof(args), "--tokenizer byte --val-tokens 4 --quiet --out %s/c %s", dir, p);
    char out[8192];
    int rc = rd_run("prepare", args, out, sizeof(out));
    ck_assert_msg(rc != 0, "prepare succeeded with a directory in place of a stale shard");
    ck_assert_msg(strstr(out, "c_train_000001.bin: cannot remove stale shard"), "%s", out);
}
END_TEST

// ./probe gen checks each option's range itself, so probes_validate's own checks (the library
// entry point) are called directly, one field out of range at a time
static void expect_invalid(const ProbeParams* p, const char* want) {
    char err[512] = "";
    ck_assert_int_eq(probes_validate(p, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, want) != NULL, "'%s' lacks '%s'", err, want);
}

START_TEST(test_probe_param_ranges) {
    ProbeParams p0, p;
    probes_defaults(&p0, PROBE_TASK_RECALL, 64);
    char err[512];
    ck_assert_msg(probes_validate(&p0, err, sizeof(err)) == 0, "defaults refused: %s", err);
    p = p0, p.task = 9;
    expect_invalid(&p, "unknown task 9");
    p = p0, p.alphabet = 1;
    expect_invalid(&p, "alphabet = 1 is out of range [2, 26]");
    p = p0, p.alphabet = 27;
    expect_invalid(&p, "alphabet = 27 is out of range [2, 26]");
    p = p0, p.pairs = 0;
    expect_invalid(&p, "pairs = 0 is out of range [1, 26]");
    p = p0, p.trigger_every = 1;
    expect_invalid(&p, "trigger-every = 1 is out of range [2, 1000000]");
    p = p0, p.bucket_mask = 0;
    expect_invalid(&p, "bucket mask 0 selects no bucket");
    p = p0, p.bucket_mask = 8;
    expect_invalid(&p, "bucket mask 8 selects no bucket");
    // an empty split (./probe gen refuses --n-val 0 itself)
    const char* dir = test_tmpdir();
    probes_defaults(&p, PROBE_TASK_COPY, 32);
    ck_assert_int_eq(probes_write(dir, &p, 4, 0, 1, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "the val split needs at least one document"), "%s", err);
}
END_TEST

static void bad_vocab(const char* body, const char* want) {
    const char* dir = test_tmpdir();
    char p[700], args[4096];
    snprintf(p, sizeof(p), "%s/vocab.bpe", dir);
    rd_write(p, body, strlen(body));
    snprintf(args, sizeof(args), "encode --dir %s < /dev/null", dir);
    RD_EXPECT(2, "tokenize", args, p, want);
}

START_TEST(test_tokenizer_bad_vocab) {
    bad_vocab("#version: 0.2\n\xff\xfe a\n", ":2: invalid UTF-8 in merge symbol");
    bad_vocab("#version: 0.2\na b\nabc\n", ":3: expected two space-separated symbols, got 'abc'");
    bad_vocab("#version: 0.2\na b\nb c\nab c\na bc\n", ":5: merge result duplicates token");
}
END_TEST

static Suite* readers_data_suite(void) {
    Suite* s = suite_create("readers_data");
    TCase* tc = tcase_create("data");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_shard_magic_hints);
    tcase_add_test(tc, test_shard_write_limits);
    tcase_add_test(tc, test_dataloader_sizes);
    tcase_add_test(tc, test_prepare_stale_shard_is_a_directory);
    tcase_add_test(tc, test_probe_param_ranges);
    tcase_add_test(tc, test_tokenizer_bad_vocab);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(readers_data_suite)
