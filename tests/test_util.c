// tests/test_util.c: common/util.h: crc32 (the CRC-32 check value, incremental), atomic writes
// (nothing at the final path before commit, abort keeps the old file, failures name the path and
// leave no temp file), and util_cli_long (whole-string integers in range, anything else exits 2).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/file_util.h"
#include "tests/testutil.h"

START_TEST(test_crc32) {
    ck_assert_uint_eq(util_crc32(0, "123456789", 9), 0xCBF43926u); // the CRC-32 check value
    uint32_t c = util_crc32(0, "1234", 4);
    ck_assert_uint_eq(util_crc32(c, "56789", 5), 0xCBF43926u); // incremental
    ck_assert_uint_eq(util_crc32(0, "", 0), 0);
}
END_TEST

START_TEST(test_atomic_write) {
    const char* dir = test_tmpdir();
    char path[1024];
    snprintf(path, sizeof(path), "%s/f.txt", dir);
    AtomicFile af;
    ck_assert_int_eq(atomic_open(&af, path), 0);
    ck_assert(!util_file_exists(path)); // nothing at the final path until commit
    ck_assert_int_eq(atomic_write(&af, "hello ", 6), 0);
    ck_assert_int_eq(atomic_write(&af, "world", 5), 0);
    ck_assert_uint_eq(af.crc, util_crc32(0, "hello world", 11));
    ck_assert_int_eq(atomic_commit(&af), 0);
    size_t n;
    char* s = test_read_text(path, &n);
    ck_assert_str_eq(s, "hello world");
    free(s);
    ck_assert_int_eq(test_dir_entries(dir), 1);
    // an aborted rewrite leaves the old contents and no temp file
    ck_assert_int_eq(atomic_open(&af, path), 0);
    ck_assert_int_eq(atomic_write(&af, "new", 3), 0);
    atomic_abort(&af);
    s = test_read_text(path, &n);
    ck_assert_str_eq(s, "hello world");
    free(s);
    ck_assert_int_eq(test_dir_entries(dir), 1);
    // a successful rewrite replaces it
    ck_assert_int_eq(atomic_open(&af, path), 0);
    ck_assert_int_eq(atomic_write(&af, "new", 3), 0);
    ck_assert_int_eq(atomic_commit(&af), 0);
    s = test_read_text(path, &n);
    ck_assert_str_eq(s, "new");
    free(s);
    ck_assert_int_eq(test_dir_entries(dir), 1);
    // a commit that cannot rename (the target is a non-empty directory) fails, names the path,
    // removes its temp file and leaves the target alone
    char dpath[1024], inner[1100];
    snprintf(dpath, sizeof(dpath), "%s/d", dir);
    ck_assert_int_eq(mkdir(dpath, 0755), 0);
    snprintf(inner, sizeof(inner), "%s/keep", dpath);
    test_write_text(inner, "k", 1);
    ck_assert_int_eq(atomic_open(&af, dpath), 0);
    ck_assert_int_eq(atomic_write(&af, "x", 1), 0);
    ck_assert_int_eq(atomic_commit(&af), -1);
    ck_assert_ptr_nonnull(strstr(af.err, dpath));
    ck_assert_int_eq(test_dir_entries(dir), 2);
    ck_assert(util_file_exists(inner));
    // a directory that does not exist: open fails with a message naming the path
    char bad[1024];
    snprintf(bad, sizeof(bad), "%s/nope/f.txt", dir);
    ck_assert_int_eq(atomic_open(&af, bad), -1);
    ck_assert_ptr_nonnull(strstr(af.err, "/nope/f.txt"));
    ck_assert_int_eq(atomic_write(&af, "x", 1), -1);
    ck_assert_int_eq(atomic_commit(&af), -1);
    ck_assert_int_eq(test_dir_entries(dir), 2);
    ck_assert(!util_file_exists(bad));
}
END_TEST

// util_cli_long: whole-string integers in range; anything else exits 2 (EXIT_USAGE).
START_TEST(test_cli_long_ok) {
    ck_assert_int_eq(util_cli_long("--n", "12", 1, 100), 12);
    ck_assert_int_eq(util_cli_long("--n", "-3", -5, 5), -3);
    ck_assert_int_eq(util_cli_long("--n", "100", 1, 100), 100);
}
END_TEST

static const char* const CLI_BAD[] = {"", "12x", "x", "101", "0", "99999999999999999999", " 5"};

// in a child of our own, so that it also runs without Check's fork (CK_FORK=no under ASan)
START_TEST(test_cli_long_bad_exits_2) {
    for (size_t i = 0; i < sizeof(CLI_BAD) / sizeof(CLI_BAD[0]); i++) {
        fflush(NULL);
        pid_t pid = fork();
        ck_assert(pid >= 0);
        if (pid == 0) {
            util_cli_long("--n", CLI_BAD[i], 1, 100);
            _exit(0);
        }
        int st;
        ck_assert(waitpid(pid, &st, 0) == pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == EXIT_USAGE, "'%s' was accepted",
                      CLI_BAD[i]);
    }
}
END_TEST

static Suite* util_suite(void) {
    Suite* s = suite_create("util");
    TCase* tu = tcase_create("util");
    tcase_set_timeout(tu, 20);
    tcase_add_test(tu, test_crc32);
    tcase_add_test(tu, test_atomic_write);
    tcase_add_test(tu, test_cli_long_ok);
    tcase_add_test(tu, test_cli_long_bad_exits_2);
    suite_add_tcase(s, tu);
    return s;
}

TEST_MAIN(util_suite)
