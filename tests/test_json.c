// tests/test_json.c: the JSON writer of common/json.h: records, float round trips, escaping
// (control characters, invalid UTF-8), nested objects and arrays, the one-member-a-line layout
// of config.json (json_begin_lines, json_literal), and JSON lines and whole-file
// writes whose validity Python's json module checks (a missing Python is a failure).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/util.h"
#include "tests/file_util.h"
#include "tests/testutil.h"

START_TEST(test_json_record) {
    JsonBuf j = {0};
    json_begin(&j);
    json_int(&j, "step", 10);
    json_num(&j, "loss", 3.25);
    json_num(&j, "lr", 0.1f); // float 0.1 = 0.100000001490116...: 9 significant digits
    json_num(&j, "nan", NAN);
    json_num(&j, "inf", -INFINITY);
    json_str(&j, "kind", "head");
    json_bool(&j, "ok", 1);
    json_bool(&j, "no", 0);
    json_null(&j, "nil");
    json_int(&j, "big", -9007199254740993LL);
    json_num(&j, "e", 1e20);
    json_num(&j, "negz", -0.0);
    json_dbl(&j, "d", 0.1);
    json_dbl(&j, "dn", NAN);
    json_str(&j, "s0", NULL);
    json_end(&j);
    ck_assert_str_eq(j.buf,
                     "{\"step\":10,\"loss\":3.25,\"lr\":0.100000001,\"nan\":null,\"inf\":null,"
                     "\"kind\":\"head\",\"ok\":true,\"no\":false,\"nil\":null,"
                     "\"big\":-9007199254740993,\"e\":1e+20,\"negz\":-0,"
                     "\"d\":0.10000000000000001,\"dn\":null,\"s0\":null}");
    ck_assert_uint_eq(j.len, strlen(j.buf));
    // json_begin starts over, reusing the buffer
    json_begin(&j);
    json_end(&j);
    ck_assert_str_eq(j.buf, "{}");
    json_free(&j);
    ck_assert_ptr_null(j.buf);
}
END_TEST

// Every float32 printed with %.9g reads back as the same float.
START_TEST(test_json_float_roundtrip) {
    Rng r;
    rng_seed(&r, 3);
    JsonBuf j = {0};
    for (int i = 0; i < 2000; i++) {
        uint32_t bits = (uint32_t)rng_u64(&r);
        float f;
        memcpy(&f, &bits, 4);
        if (!isfinite(f)) continue;
        json_begin(&j);
        json_num(&j, "x", f);
        json_end(&j);
        float back = strtof(j.buf + 5, NULL);
        ck_assert_msg(memcmp(&back, &f, 4) == 0, "%s", j.buf);
    }
    json_free(&j);
}
END_TEST

static void check_escape(const char* in, size_t n, const char* expect) {
    char* e = json_escape(in, n);
    ck_assert_str_eq(e, expect);
    free(e);
}

START_TEST(test_json_escape) {
    check_escape("", 0, "\"\"");
    check_escape("plain / text", 12, "\"plain / text\"");
    check_escape("a\"b\\c", 5, "\"a\\\"b\\\\c\"");
    check_escape("\b\f\n\r\t", 5, "\"\\b\\f\\n\\r\\t\"");
    check_escape("\x01\x1f\x7f", 3, "\"\\u0001\\u001f\x7f\""); // DEL needs no escape
    check_escape("x\0y", 3, "\"x\\u0000y\"");                  // NUL inside a counted string
    check_escape("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14,
                 "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""); // valid UTF-8 passes
    check_escape("\xff", 1, "\"\\ufffd\"");                        // never valid
    check_escape("a\x80z", 3, "\"a\\ufffdz\"");                    // stray continuation
    check_escape("\xe2\x82", 2, "\"\\ufffd\\ufffd\"");             // truncated at the end
    check_escape("\xe2\x82x", 3, "\"\\ufffd\\ufffdx\"");           // truncated before ASCII
    check_escape("\xc0\xaf", 2, "\"\\ufffd\\ufffd\"");             // overlong '/'
    check_escape("\xe0\x80\xaf", 3, "\"\\ufffd\\ufffd\\ufffd\"");  // overlong 3-byte
    check_escape("\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\"");  // UTF-16 surrogate
    check_escape("\xf4\x90\x80\x80", 4, "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); // > U+10FFFF
    check_escape("\xf4\x8f\xbf\xbf", 4, "\"\xf4\x8f\xbf\xbf\"");             // U+10FFFF itself
    check_escape("\xed\x9f\xbf", 3, "\"\xed\x9f\xbf\"");                     // U+D7FF
    // keys are escaped too
    JsonBuf j = {0};
    json_begin(&j);
    json_strn(&j, "k\"ey", "a\0b", 3);
    json_end(&j);
    ck_assert_str_eq(j.buf, "{\"k\\\"ey\":\"a\\u0000b\"}");
    json_free(&j);
}
END_TEST

START_TEST(test_json_nested) {
    const int ids[3] = {50256, 0, -1};
    const char* toks[3] = {"Hello", NULL, " \"w\""};
    const float xs[3] = {0.5f, NAN, -2.0f};
    JsonBuf j;
    json_init(&j);
    json_begin(&j);
    json_int_array(&j, "ids", ids, 3);
    json_str_array(&j, "tokens", toks, 3);
    json_num_array(&j, "x", xs, 3);
    json_int_array(&j, "empty", NULL, 0);
    json_object_begin(&j, "o");
    json_array_begin(&j, "layers");
    json_object_begin(&j, NULL);
    json_int(&j, "l", 0);
    json_object_end(&j);
    json_object_begin(&j, NULL);
    json_object_end(&j);
    json_array_begin(&j, NULL);
    json_bool(&j, NULL, 1);
    json_array_end(&j);
    json_array_end(&j);
    json_object_end(&j);
    json_int(&j, "after", 1);
    json_end(&j);
    ck_assert_str_eq(j.buf, "{\"ids\":[50256,0,-1],\"tokens\":[\"Hello\",null,\" \\\"w\\\"\"],"
                            "\"x\":[0.5,null,-2],\"empty\":[],"
                            "\"o\":{\"layers\":[{\"l\":0},{},[true]]},\"after\":1}");
    ck_assert_int_eq(j.depth, 0);
    json_free(&j);
}
END_TEST

// Lines written with json_write_line parse with Python's json module and decode to what we meant.
// json_begin_lines: the layout of a config.json (model/hf.c) that people and Hugging Face read:
// each top-level member on its own line, "key": value with one space, nested values on one line;
// json_literal keeps a number's spelling ("0.0", "1e-05") that %.9g would change; a json_begin
// after it is compact again.
START_TEST(test_json_begin_lines) {
    JsonBuf j = {0};
    json_begin_lines(&j);
    json_array_begin(&j, "architectures");
    json_str(&j, NULL, "GPT2LMHeadModel");
    json_str(&j, NULL, "X");
    json_array_end(&j);
    json_literal(&j, "attn_pdrop", "0.0");
    json_literal(&j, "eps", "1e-05");
    json_null(&j, "n_inner");
    json_object_begin(&j, "o");
    json_int(&j, "a", 1);
    json_bool(&j, "b", 1);
    json_object_end(&j);
    json_int(&j, "n", 12);
    json_end(&j);
    ck_assert_str_eq(j.buf, "{\n  \"architectures\": [\"GPT2LMHeadModel\",\"X\"],\n"
                            "  \"attn_pdrop\": 0.0,\n  \"eps\": 1e-05,\n  \"n_inner\": null,\n"
                            "  \"o\": {\"a\":1,\"b\":true},\n  \"n\": 12\n}");
    json_begin(&j);
    json_int(&j, "n", 1);
    json_int(&j, "m", 2);
    json_end(&j);
    ck_assert_str_eq(j.buf, "{\"n\":1,\"m\":2}");
    json_free(&j);
}
END_TEST

START_TEST(test_json_lines_valid) {
    const char* dir = test_tmpdir();
    char path[1024];
    snprintf(path, sizeof(path), "%s/metrics.jsonl", dir);
    FILE* f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    JsonBuf j = {0};
    // a long string forces the buffer to grow several times
    char* longs = mallocCheck(100001);
    for (int i = 0; i < 100000; i++)
        longs[i] = (char)('a' + i % 26);
    longs[100000] = '\0';
    for (int step = 0; step < 3; step++) {
        json_begin(&j);
        json_int(&j, "step", step);
        json_num(&j, "train_loss", step == 1 ? NAN : 10.0 / (step + 1));
        json_str(&j, "s", "q\"\\\n\x01\xc3\xa9\xf0\x9f\x98\x80\xff/");
        json_str(&j, "long", longs);
        json_end(&j);
        ck_assert_int_eq(json_write_line(&j, f), 0);
    }
    fclose(f);
    free(longs);
    size_t n;
    char* text = test_read_text(path, &n);
    int lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += text[i] == '\n';
    ck_assert_int_eq(lines, 3);
    ck_assert(n > 0 && text[n - 1] == '\n');
    ck_assert(strncmp(text, "{\"step\":0,\"train_loss\":10,", 26) == 0);
    free(text);
    // whole-file atomic writes
    char fpath[1024], err[2048];
    snprintf(fpath, sizeof(fpath), "%s/side.json", dir);
    ck_assert_int_eq(json_write_file(&j, fpath, err, sizeof(err)), 0);
    char* side = test_read_text(fpath, &n);
    ck_assert_uint_eq(n, j.len + 1);
    ck_assert(memcmp(side, j.buf, j.len) == 0 && side[j.len] == '\n');
    free(side);
    char bad[1024];
    snprintf(bad, sizeof(bad), "%s/no/such/dir/side.json", dir);
    ck_assert_int_eq(json_write_file(&j, bad, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "/no/such/dir/side.json"));
    json_free(&j);
    // a missing Python is a failure, not a pass: the validation below is the point
    ck_assert_msg(test_have_python("json"),
                  "%s not available: JSON lines cannot be validated; install it with "
                  "`apt-get install python3` (or `make deps`)",
                  TEST_PYTHON);
    const char* script =
        "import json, sys\n"
        "lines = open(sys.argv[1], encoding='utf-8').read().split('\\n')\n"
        "assert lines[-1] == '' and len(lines) == 4, len(lines)\n"
        "recs = [json.loads(l) for l in lines[:3]]\n"
        "assert [r['step'] for r in recs] == [0, 1, 2]\n"
        "assert recs[0]['train_loss'] == 10.0 and recs[1]['train_loss'] is None\n"
        "assert abs(recs[2]['train_loss'] - 10/3) < 1e-8\n"
        "assert recs[0]['s'] == 'q\"\\\\\\n\\x01\\u00e9\\U0001F600\\ufffd/', repr(recs[0]['s'])\n"
        "assert len(recs[2]['long']) == 100000 and recs[2]['long'][:3] == 'abc'\n"
        "json.loads(open(sys.argv[2], encoding='utf-8').read())\n";
    char args[2200];
    snprintf(args, sizeof(args), "%s %s", path, fpath);
    ck_assert_int_eq(test_run_python(dir, script, args), 0);
}
END_TEST

static Suite* json_suite(void) {
    Suite* s = suite_create("json");
    TCase* tj = tcase_create("json");
    tcase_set_timeout(tj, 20);
    tcase_add_test(tj, test_json_record);
    tcase_add_test(tj, test_json_float_roundtrip);
    tcase_add_test(tj, test_json_escape);
    tcase_add_test(tj, test_json_nested);
    tcase_add_test(tj, test_json_lines_valid);
    tcase_add_test(tj, test_json_begin_lines);
    suite_add_tcase(s, tj);
    return s;
}

TEST_MAIN(json_suite)
