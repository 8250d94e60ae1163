// tests/test_bench.c: ./bench, the matmul peak measurements (tools/bench.c): the usage and an
// unknown measurement exit 2; sgemm-peak prints a positive GFLOP/s with the OpenMP thread count;
// bf16-peak prints its peak and oneDNN's kernel where the CPU has a native bf16 matmul, and is
// refused (exit 2) where it has none.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/reader_util.h"
#include "tests/testutil.h"

START_TEST(test_bench_usage_and_unknown) {
    RD_EXPECT(2, "bench", "", "usage: ./bench");
    RD_EXPECT(2, "bench", "nope", "unknown measurement 'nope'", "usage: ./bench");
    RD_EXPECT(0, "bench", "--help", "sgemm-peak", "bf16-peak");
}
END_TEST

START_TEST(test_bench_sgemm_peak) {
    char out[4096];
    ck_assert_int_eq(rd_run("bench", "sgemm-peak", out, sizeof(out)), 0);
    double g = 0;
    int nt = 0;
    const char* l = strstr(out, "sgemm peak: ");
    ck_assert_msg(l && sscanf(l, "sgemm peak: %lf GFLOP/s with %d threads", &g, &nt) == 2, "%s",
                  out);
    ck_assert_msg(g > 0.1 && g < 1e5, "implausible peak %g GFLOP/s", g);
    ck_assert_int_ge(nt, 1);
}
END_TEST

START_TEST(test_bench_bf16_peak) {
    char out[4096];
    int rc = rd_run("bench", "bf16-peak", out, sizeof(out));
    if (test_bf16_native("bench bf16-peak")) {
        ck_assert_msg(rc == 0 && strstr(out, "bf16 peak: ") && strstr(out, "oneDNN"), "rc %d: %s",
                      rc, out);
    } else {
        ck_assert_msg(rc == 2 && strstr(out, "bf16"), "rc %d: %s", rc, out);
    }
}
END_TEST

static Suite* bench_suite(void) {
    Suite* s = suite_create("bench");
    TCase* tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_bench_usage_and_unknown);
    tcase_add_test(tc, test_bench_sgemm_peak);
    tcase_add_test(tc, test_bench_bf16_peak);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(bench_suite)
