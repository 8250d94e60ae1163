// tests/test_util.c: common/util.h: crc32 (the CRC-32 check value, incremental), atomic writes
// (nothing at the final path before commit, abort keeps the old file, failures name the path and
// leave no temp file), util_cli_long (whole-string integers in range, anything else exits 2), and
// the tools' option table and its handling of --help and errors (common/cli.h), and allocFloats'
// sizes and huge pages (2 MiB pages, aligned and advised, from 2 MiB up; not under ASan).
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cli.h"
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

// The --buckets kind of parser a tool brings (CLI_FN): records what it was given.
static void fn_record(const char* name, const char* value, void* dst) {
    snprintf((char*)dst, 64, "%s=%s", name, value);
}

// cli_parse: every kind of row, a second spelling, a later value replacing an earlier one,
// arguments before `first` not looked at, and the three ways it stops (--help, an unknown
// argument, an option given last without its value) naming the argument at fault.
START_TEST(test_cli_parse) {
    const char* s = "unset";
    int flag = 0, n = 0;
    long big = 0;
    float f = 0;
    double d = 0;
    char rec[64] = "";
    const CliOpt opts[] = {CLI_STR_OPT("--out", &s),
                           CLI_STR_OPT("-o", &s),
                           CLI_FLAG_OPT("--raw", &flag),
                           CLI_INT_OPT("--n", &n, 1, 100),
                           CLI_LONG_OPT("--seed", &big, 0, (double)LONG_MAX),
                           CLI_FLOAT_OPT("--t", &f, 0, 2),
                           CLI_DOUBLE_OPT("--eps", &d, 0, 1),
                           CLI_FN_OPT("--b", fn_record, rec)};
    const char* bad = "x";
    char* ok[] = {"tool", "--n", "--raw", "--out", "a",      "--n",
                  "7",    "-o",  "b",     "--raw", "--seed", "9223372036854775807",
                  "--t",  "1.5", "--eps", "0.25",  "--b",    "s,e"};
    ck_assert_int_eq(cli_parse(18, ok, 2, opts, CLI_COUNT(opts), &bad), CLI_DONE);
    ck_assert_ptr_null(bad);
    ck_assert_str_eq(s, "b"); // -o after --out: the later one
    ck_assert_int_eq(flag, 1);
    ck_assert_int_eq(n, 7);
    ck_assert(big == LONG_MAX);
    ck_assert(f == 1.5f && d == 0.25);
    ck_assert_str_eq(rec, "--b=s,e");
    char* help[] = {"tool", "--n", "3", "-h", "--bogus"};
    ck_assert_int_eq(cli_parse(5, help, 1, opts, CLI_COUNT(opts), &bad), CLI_HELP);
    char* unknown[] = {"tool", "--n", "4", "--bogus", "1"};
    ck_assert_int_eq(cli_parse(5, unknown, 1, opts, CLI_COUNT(opts), &bad), CLI_UNKNOWN);
    ck_assert_str_eq(bad, "--bogus");
    ck_assert_int_eq(n, 4);
    char* novalue[] = {"tool", "--raw", "--out"};
    ck_assert_int_eq(cli_parse(3, novalue, 1, opts, CLI_COUNT(opts), &bad), CLI_NO_VALUE);
    ck_assert_str_eq(bad, "--out");
    char* positional[] = {"tool", "file.txt"};
    ck_assert_int_eq(cli_parse(2, positional, 1, opts, CLI_COUNT(opts), &bad), CLI_UNKNOWN);
    ck_assert_str_eq(bad, "file.txt");
}
END_TEST

// A number out of a row's range or not a number ends the process with exit 2 (util_cli_long,
// util_cli_double).
START_TEST(test_cli_parse_bad_number_exits_2) {
    int n = 0;
    double d = 0;
    const CliOpt opts[] = {CLI_INT_OPT("--n", &n, 1, 100), CLI_DOUBLE_OPT("--eps", &d, 0, 1)};
    char* cases[][2] = {
        {"--n", "0"}, {"--n", "101"}, {"--n", "5x"}, {"--eps", "nan"}, {"--eps", "1.5"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fflush(NULL);
        pid_t pid = fork();
        ck_assert(pid >= 0);
        if (pid == 0) {
            char* argv[] = {"tool", cases[i][0], cases[i][1]};
            const char* bad;
            cli_parse(3, argv, 1, opts, 2, &bad);
            _exit(0);
        }
        int st;
        ck_assert(waitpid(pid, &st, 0) == pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == EXIT_USAGE, "%s %s was accepted",
                      cases[i][0], cases[i][1]);
    }
}
END_TEST

// cli_parse_args: arguments that are not options ("-" alone is one: standard input) are
// collected in order up to maxpos, one more is CLI_EXTRA; a dashed argument the table does not
// name stays CLI_UNKNOWN; the options between the arguments are parsed as with cli_parse.
START_TEST(test_cli_parse_args) {
    int flag = 0;
    const char* out = NULL;
    const CliOpt opts[] = {CLI_FLAG_OPT("--q", &flag), CLI_STR_OPT("--out", &out)};
    const char *pos[2], *bad;
    int npos = -1;
    char* two[] = {"tool", "a.txt", "--q", "-", "--out", "o"};
    ck_assert_int_eq(cli_parse_args(6, two, 1, opts, 2, pos, 2, &npos, &bad), CLI_DONE);
    ck_assert_int_eq(npos, 2);
    ck_assert_str_eq(pos[0], "a.txt");
    ck_assert_str_eq(pos[1], "-");
    ck_assert(flag == 1 && out && !strcmp(out, "o"));
    char* three[] = {"tool", "a", "b", "c"};
    ck_assert_int_eq(cli_parse_args(4, three, 1, opts, 2, pos, 2, &npos, &bad), CLI_EXTRA);
    ck_assert_str_eq(bad, "c");
    char* dashed[] = {"tool", "a", "-x"};
    ck_assert_int_eq(cli_parse_args(3, dashed, 1, opts, 2, pos, 2, &npos, &bad), CLI_UNKNOWN);
    ck_assert_str_eq(bad, "-x");
}
END_TEST

// The usage and failure of a tool under test (cli_parse_or_exit).
static void t_usage(FILE* f) {
    fputs("USAGE\n", f);
}
static void t_fail(const char* fmt, const char* arg) {
    fputs("tool: ", stderr);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    fflush(NULL);
    _exit(EXIT_USAGE);
}

// cli_parse_args_or_exit: --help prints the usage to stdout and exits 0; each way to stop short
// prints the tool's own message for it (after the usage where usage_first says so; through the
// tool's fail where it has one) and exits 2; a command line that parses returns.
START_TEST(test_cli_parse_or_exit) {
    const struct {
        int argc;
        char* argv[4];
        int usage_first, own_fail;
        int rc;
        const char *out, *err;
    } cases[] = {
        {2, {"tool", "--help"}, 1, 0, 0, "USAGE\n", ""},
        {3, {"tool", "a", "-h"}, 0, 1, 0, "USAGE\n", ""},
        {2, {"tool", "--bogus"}, 0, 0, EXIT_USAGE, "", "attnlab: unknown '--bogus'\n"},
        {2, {"tool", "--bogus"}, 1, 0, EXIT_USAGE, "", "USAGE\nattnlab: unknown '--bogus'\n"},
        {3, {"tool", "a", "--out"}, 0, 0, EXIT_USAGE, "", "attnlab: --out needs a value\n"},
        {4, {"tool", "a", "b", "c"}, 0, 0, EXIT_USAGE, "", "attnlab: extra 'c'\n"},
        {2, {"tool", "--bogus"}, 1, 1, EXIT_USAGE, "", "USAGE\ntool: unknown '--bogus'\n"},
        {4, {"tool", "a", "--out", "o"}, 0, 0, 0, "parsed a o\n", ""},
    };
    char out_path[1024], err_path[1024];
    snprintf(out_path, sizeof(out_path), "%s/cli_out.txt", test_tmpdir());
    snprintf(err_path, sizeof(err_path), "%s/cli_err.txt", test_tmpdir());
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fflush(NULL);
        pid_t pid = fork();
        ck_assert(pid >= 0);
        if (pid == 0) {
            if (!freopen(out_path, "w", stdout) || !freopen(err_path, "w", stderr)) _exit(99);
            const char* out = NULL;
            const CliOpt opts[] = {CLI_STR_OPT("--out", &out)};
            const CliTool tool = {.usage = t_usage,
                                  .unknown = "unknown '%s'",
                                  .no_value = "%s needs a value",
                                  .extra = "extra '%s'",
                                  .usage_first = cases[i].usage_first,
                                  .fail = cases[i].own_fail ? t_fail : NULL};
            const char* pos[2];
            int npos;
            cli_parse_args_or_exit(cases[i].argc, (char**)cases[i].argv, 1, opts, 1, pos, 2, &npos,
                                   &tool);
            printf("parsed %s %s\n", npos == 1 ? pos[0] : "?", out ? out : "?");
            fflush(NULL);
            _exit(0);
        }
        int st;
        ck_assert(waitpid(pid, &st, 0) == pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == cases[i].rc, "case %zu: status %d", i,
                      st);
        char* out = test_read_text(out_path, NULL);
        char* err = test_read_text(err_path, NULL);
        ck_assert_msg(!strcmp(out, cases[i].out), "case %zu: stdout '%s'", i, out);
        ck_assert_msg(!strcmp(err, cases[i].err), "case %zu: stderr '%s'", i, err);
        free(out);
        free(err);
    }
}
END_TEST

#if !defined(__SANITIZE_ADDRESS__)
// The VmFlags line of the mapping in /proc/self/smaps that holds p ("" when none is found).
static void vmflags_of(const void* p, char* flags, size_t cap) {
    flags[0] = '\0';
    FILE* f = fopen("/proc/self/smaps", "r");
    if (!f) return;
    char line[512];
    int inside = 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { // a mapping's first line: LO-HI ...
            inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        } else if (inside && !strncmp(line, "VmFlags:", 8)) {
            snprintf(flags, cap, "%s", line + 8);
            break;
        }
    }
    fclose(f);
}
#endif

START_TEST(test_alloc_floats_sizes_and_huge_pages) {
    const size_t MiB2 = (size_t)2 << 20, big = MiB2 / sizeof(float); // floats in 2 MiB
    ck_assert_uint_eq(util_floats_bytes(0), 64);
    ck_assert_uint_eq(util_floats_bytes(16), 64);
    ck_assert_uint_eq(util_floats_bytes(17), 128);
    ck_assert_uint_eq(util_floats_bytes(big - 17), MiB2 - 64); // under 2 MiB: 64-byte rounding
#if defined(__SANITIZE_ADDRESS__)
    // ASan build: sizes stay exact to 64 bytes, so a write past a large buffer is reported
    ck_assert_uint_eq(util_floats_bytes(big), MiB2);
    ck_assert_uint_eq(util_floats_bytes(big + 1), MiB2 + 64);
    printf("test_alloc_floats_sizes_and_huge_pages: sanitized build: no huge pages (by design)\n");
#else
    ck_assert_uint_eq(util_floats_bytes(big), MiB2);
    ck_assert_uint_eq(util_floats_bytes(big + 1), 2 * MiB2);
    ck_assert_uint_eq(util_floats_bytes(3 * big - 1), 3 * MiB2);
    const size_t before = util_alloc_total();
    float* p = allocFloats(big + 5);
    ck_assert_uint_eq(util_alloc_total() - before, 2 * MiB2); // the tally is the rounded size
    ck_assert_uint_eq((uintptr_t)p % MiB2, 0);
    for (size_t i = 0; i < 2 * big; i++)
        ck_assert_msg(p[i] == 0.0f, "float %zu not zeroed", i);
    float* small = allocFloats(100);
    ck_assert_uint_eq((uintptr_t)small % 64, 0);
    if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) != 0) {
        printf("test_alloc_floats_sizes_and_huge_pages: kernel without transparent huge pages: "
               "the MADV_HUGEPAGE advice is not checked\n");
    } else {
        char flags[512];
        vmflags_of(p, flags, sizeof(flags));
        ck_assert_msg(flags[0], "no mapping in /proc/self/smaps holds %p", (void*)p);
        ck_assert_msg(strstr(flags, " hg"), "2 MiB buffer not advised as huge pages: VmFlags%s",
                      flags);
    }
    free(small);
    free(p);
#endif
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
    tcase_add_test(tu, test_cli_parse);
    tcase_add_test(tu, test_cli_parse_bad_number_exits_2);
    tcase_add_test(tu, test_cli_parse_args);
    tcase_add_test(tu, test_cli_parse_or_exit);
    tcase_add_test(tu, test_alloc_floats_sizes_and_huge_pages);
    suite_add_tcase(s, tu);
    return s;
}

TEST_MAIN(util_suite)
