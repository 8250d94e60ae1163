// tests/test_cpuinfo.c: the CPU description every run records (common/cpuinfo.c): the model name
// and the kernel-selecting flags of the first processor block of a /proc/cpuinfo text, in
// CPUINFO_FLAGS order, whole words only; later blocks are not read; a text without a model name
// reads "unknown"; small buffers truncate and stay NUL-terminated; the machine's own
// /proc/cpuinfo gives a model name and only flags of the list; and the run header
// (model/run/header.c) records it: main.log's precision, peak (trials, spread, cache), CPU and
// data-parallel lines, the run event of metrics.jsonl and the console banner, and a resumed
// run's note instead of a second run event.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cpuinfo.h"
#include "common/json.h"
#include "common/runlog.h"
#include "common/util.h"
#include "model/run/header.h"
#include "tests/file_util.h"
#include "tests/model_util.h"
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

// run_header_write into DIR's logs, the console captured into DIR/stdout.txt (returned, malloc'd).
static char* header_into(const char* dir, const RunHeader* h, long resumed_at) {
    char path[1100], err[2048];
    snprintf(path, sizeof(path), "%s/stdout.txt", dir);
    RunLog rl;
    JsonBuf j;
    json_init(&j);
    ck_assert_msg(runlog_open(&rl, dir, resumed_at, err, sizeof(err)) == 0, "%s", err);
    fflush(stdout);
    const int saved = dup(1);
    FILE* out = fopen(path, "w");
    ck_assert(saved >= 0 && out && dup2(fileno(out), 1) == 1);
    run_header_write(h, &rl, &j);
    fflush(stdout);
    ck_assert(dup2(saved, 1) == 1);
    close(saved);
    fclose(out);
    ck_assert_msg(runlog_close(&rl) == 0, "%s", rl.err);
    json_free(&j);
    size_t n;
    return test_read_text(path, &n);
}

START_TEST(test_run_header_records_the_machine) {
    Config c;
    test_tiny_config(&c, 64, 2, 2, 16, 8);
    c.grad_accum = 3;
    GPT2 m;
    test_build_model(&m, &c, 2, 8, 1);
    char dir[1024], path[1100], want[4096], cpu[256], isa[256];
    util_strlcpy(dir, test_tmpdir(), sizeof(dir));
    cpuinfo_describe(cpu, sizeof(cpu), isa, sizeof(isa));
    const PeakStats ps = {.peak = 2.5e9,
                          .median = 2.0e9,
                          .min = 1.5e9,
                          .max = 3.0e9,
                          .trials = 64,
                          .seconds = 1.3,
                          .load = 0.5,
                          .cached = 1,
                          .when = "2026-12-05 14:20 UTC",
                          .path = "/c/peak-x.txt"};
    RunHeader h = {.model = &m,
                   .cfg = &c,
                   .precision_info = "fp32 (test)",
                   .peak_flops = 2.5e9,
                   .peak = &ps,
                   .nthreads = 3,
                   .dp_line = "# data parallel: 2 ranks, global batch 4\n# not this line\n",
                   .start = 0,
                   .resumed = 0};
    char* con = header_into(dir, &h, -1);
    ck_assert_msg(strstr(con, "| 2 layers, 2 heads, 16 wide, block 8 |"), "%s", con);
    // the peak with how it was measured: its trials, median, spread, load and cache file
    const char* how = "90th percentile of 64 trials in 1.3 s (median 2.0, spread 1.5-3.0 GFLOP/s), "
                      "measured 2026-12-05 14:20 UTC at load 0.50, cached in /c/peak-x.txt (delete "
                      "it to measure again)";
    snprintf(want, sizeof(want),
             "| B=2 T=8 accum=3 | 3 threads | fp32 peak 2.5 GFLOP/s\nprecision: fp32 (test); mfu "
             "is against the fp32 matmul peak above (%s); model FLOPs/token",
             how);
    ck_assert_msg(strstr(con, want), "%s", con);
    const size_t nc = strlen(con), tail = strlen("\ndata parallel: 2 ranks, global batch 4\n");
    ck_assert_msg(nc > tail &&
                      strcmp(con + nc - tail, "\ndata parallel: 2 ranks, global batch 4\n") == 0,
                  "%s", con);
    free(con);
    snprintf(path, sizeof(path), "%s/main.log", dir);
    size_t n;
    char* log = test_read_text(path, &n);
    snprintf(
        want, sizeof(want),
        "# precision: fp32 (test) | fp32 peak 2.5 GFLOP/s\n# peak: %s\n# cpu: %s | flags: %s | "
        "3 threads\n# data parallel: 2 ranks, global batch 4\n",
        how, cpu, isa);
    ck_assert_str_eq(log, want);
    free(log);
    snprintf(path, sizeof(path), "%s/metrics.jsonl", dir);
    char* rec = test_read_text(path, &n);
    char *ecpu = json_escape(cpu, strlen(cpu)), *eisa = json_escape(isa, strlen(isa));
    snprintf(
        want, sizeof(want),
        "{\"step\":0,\"event\":\"run\",\"precision\":\"fp32\",\"precision_info\":\"fp32 "
        "(test)\",\"mfu_against\":\"fp32 matmul peak, 90th percentile of short trials, cached per "
        "machine\",\"cpu\":%s,"
        "\"cpu_flags\":%s,\"threads\":3}\n",
        ecpu, eisa);
    ck_assert_str_eq(rec, want);
    // resumed at step 5 in one process: the resume noted in main.log, no second run event
    h.resumed = 1;
    h.start = 5;
    h.dp_line = NULL;
    free(header_into(dir, &h, 5));
    char* rec2 = test_read_text(path, &n);
    ck_assert_str_eq(rec2, rec);
    snprintf(path, sizeof(path), "%s/main.log", dir);
    log = test_read_text(path, &n);
    snprintf(want, sizeof(want),
             "# data parallel: 2 ranks, global batch 4\n# precision: fp32 (test) | fp32 peak 2.5 "
             "GFLOP/s\n# peak: %s\n# cpu: %s | flags: %s | 3 threads\n# resumed from step 5\n",
             how, cpu, isa);
    ck_assert_msg(strlen(log) >= strlen(want) &&
                      strcmp(log + strlen(log) - strlen(want), want) == 0,
                  "%s", log);
    free(log);
    free(rec);
    free(rec2);
    free(ecpu);
    free(eisa);
    gpt2_free(&m);
}
END_TEST

// A forced OpenBLAS core below the CPU's instruction set is named, with the variable; an equal or
// higher one, an unknown name, an unset variable say nothing; the portable build says it pins.
START_TEST(test_blas_core_note) {
    char note[512];
    const char* avx512 = "avx2 fma avx512f avx512_bf16";
    ck_assert_int_eq(cpuinfo_blas_core_note("Haswell", avx512, 0, note, sizeof(note)), 1);
    ck_assert_msg(strstr(note, "OPENBLAS_CORETYPE=Haswell") && strstr(note, "AVX2 kernels") &&
                      strstr(note, "CPU with AVX-512"),
                  "%s", note);
    ck_assert_int_eq(cpuinfo_blas_core_note("prescott", "avx2 fma", 0, note, sizeof(note)), 1);
    ck_assert_msg(strstr(note, "SSE kernels on a CPU with AVX2"), "%s", note);
    ck_assert_int_eq(cpuinfo_blas_core_note("Sandybridge", avx512, 0, note, sizeof(note)), 1);
    // not below: the same level, a higher core, no AVX2 on the CPU, unknown names, unset
    const char* quiet[][2] = {{"SkylakeX", avx512},     {"Cooperlake", avx512},
                              {"Haswell", "avx2 fma"},  {"Zen", "avx2 fma"},
                              {"SkylakeX", "avx2 fma"}, {"Haswell", ""},
                              {"NoSuchCore", avx512},   {"", avx512}};
    for (size_t i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++) {
        ck_assert_msg(cpuinfo_blas_core_note(quiet[i][0], quiet[i][1], 0, note, sizeof(note)) == 0,
                      "%s on '%s' noted: %s", quiet[i][0], quiet[i][1], note);
        ck_assert_str_eq(note, "");
    }
    ck_assert_int_eq(cpuinfo_blas_core_note(NULL, avx512, 0, note, sizeof(note)), 0);
    ck_assert_int_eq(cpuinfo_blas_core_note("Haswell", avx512, 1, note, sizeof(note)), 1);
    ck_assert_msg(strstr(note, "portable build pins") && !strstr(note, "slower"), "%s", note);
}
END_TEST

// The trainer says so at start-up, naming the variable: Prescott (SSE) is below every CPU the
// default build runs on (it needs AVX2).
START_TEST(test_trainer_names_a_forced_core) {
    char dir[1024];
    util_strlcpy(dir, test_tmpdir(), sizeof(dir));
    test_write_shards(dir, 257, 7, 4096, 1024);
    Config c;
    test_run_config(&c, dir, "forced", 257);
    c.max_steps = 1;
    c.warmup_steps = 1;
    c.eval_every = 0;
    c.checkpoint_every = 0;
    char* old = getenv("OPENBLAS_CORETYPE") ? strdup(getenv("OPENBLAS_CORETYPE")) : NULL;
    ck_assert_int_eq(setenv("OPENBLAS_CORETYPE", "Prescott", 1), 0);
    char* se = NULL;
    int rc = test_train(&c, &se);
    if (old) {
        setenv("OPENBLAS_CORETYPE", old, 1);
        free(old);
    } else {
        unsetenv("OPENBLAS_CORETYPE");
    }
    ck_assert_msg(rc == 0, "%s", se ? se : "");
    ck_assert_msg(se && strstr(se, "attnlab: OPENBLAS_CORETYPE=Prescott forces OpenBLAS's SSE "
                                   "kernels"),
                  "%s", se ? se : "");
    free(se);
}
END_TEST

static Suite* cpuinfo_suite(void) {
    Suite* s = suite_create("cpuinfo");
    TCase* tc = tcase_create("core");
    tcase_add_test(tc, test_parse_first_block_in_list_order);
    tcase_add_test(tc, test_parse_missing_and_truncated);
    tcase_add_test(tc, test_describe_this_machine);
    tcase_add_test(tc, test_run_header_records_the_machine);
    tcase_add_test(tc, test_blas_core_note);
    tcase_add_test(tc, test_trainer_names_a_forced_core);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(cpuinfo_suite)
