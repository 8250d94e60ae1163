// tests/test_cpuinfo.c: the CPU description every run records (common/cpuinfo.c): the model name
// and the kernel-selecting flags of the first processor block of a /proc/cpuinfo text, in
// CPUINFO_FLAGS order, whole words only; later blocks are not read; a text without a model name
// reads "unknown"; small buffers truncate and stay NUL-terminated; and the machine's own
// /proc/cpuinfo gives a model name and only flags of the list.
#include <string.h>

#include "common/cpuinfo.h"
#include "common/util.h"
#include "tests/testutil.h"

static const char* TEXT = "processor\t: 0\n"
                          "vendor_id\t: GenuineIntel\n"
                          "model name\t: Test CPU @ 2.0GHz\n"
                          "flags\t\t: fpu amx_tile sse avx512_bf16x avx2 avx512f fma amx_bf16\n"
                          "\n"
                          "processor\t: 1\n"
                          "model name\t: Other CPU\n"
                          "flags\t\t: avx512_fp16 avx512_bf16\n";

START_TEST(test_parse_first_block_in_list_order) {
    char model[64], flags[128];
    cpuinfo_parse(TEXT, model, sizeof(model), flags, sizeof(flags));
    ck_assert_str_eq(model, "Test CPU @ 2.0GHz");
    // avx512_bf16x is not avx512_bf16; the second block's avx512_fp16 is not this CPU's
    ck_assert_str_eq(flags, "avx2 fma avx512f amx_bf16 amx_tile");
}
END_TEST

START_TEST(test_parse_missing_and_truncated) {
    char model[8], flags[10];
    cpuinfo_parse("flags : avx2 fma avx512f\n", model, sizeof(model), flags, sizeof(flags));
    ck_assert_str_eq(model, "unknown");
    ck_assert_str_eq(flags, "avx2 fma"); // "avx2 fma avx512f" does not fit in 10 bytes
    cpuinfo_parse("model name : A very long processor name\n", model, sizeof(model), flags,
                  sizeof(flags));
    ck_assert_str_eq(model, "A very ");
    ck_assert_str_eq(flags, "");
    cpuinfo_parse("", model, sizeof(model), flags, sizeof(flags));
    ck_assert_str_eq(model, "unknown");
}
END_TEST

START_TEST(test_describe_this_machine) {
    char model[256], flags[256];
    cpuinfo_describe(model, sizeof(model), flags, sizeof(flags));
    ck_assert(strlen(model) > 0);
    char list[] = CPUINFO_FLAGS, copy[256];
    util_strlcpy(copy, flags, sizeof(copy));
    for (char* w = strtok(copy, " "); w; w = strtok(NULL, " "))
        ck_assert_msg(strstr(list, w) != NULL, "flag %s is not in CPUINFO_FLAGS", w);
}
END_TEST

static Suite* cpuinfo_suite(void) {
    Suite* s = suite_create("cpuinfo");
    TCase* tc = tcase_create("core");
    tcase_add_test(tc, test_parse_first_block_in_list_order);
    tcase_add_test(tc, test_parse_missing_and_truncated);
    tcase_add_test(tc, test_describe_this_machine);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(cpuinfo_suite)
