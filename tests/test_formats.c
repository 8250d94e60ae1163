// tests/test_formats.c: the file-format layer under model/hf.c, called directly:
// common/json_read.c (values, numbers, escapes, errors with byte positions, depth limit) and
// the safetensors writer in common/safetensors.c (header bytes as the safetensors spec lays them
// out, read back by st_open, a short write refused). Expected values come from RFC 8259 and the
// safetensors format description, not from the code.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_read.h"
#include "common/safetensors.h"
#include "common/util.h"
#include "tests/testutil.h"

static void parse_ok(Jv* v, const char* text) {
    char err[300];
    ck_assert_msg(json_parse(v, text, strlen(text), err, sizeof err) == 0, "%s: %s", text, err);
}

static void parse_bad(const char* text, const char* want_err) {
    Jv v;
    char err[300] = "";
    ck_assert_msg(json_parse(&v, text, strlen(text), err, sizeof err) != 0, "accepted %s", text);
    ck_assert_msg(strstr(err, want_err) != NULL, "%s: error '%s' lacks '%s'", text, err, want_err);
}

START_TEST(test_json_values) {
    Jv v;
    parse_ok(&v, " {\"a\": [1, -2.5e1, true, null], \"s\": \"x\\u00e9\\ud83d\\ude00\\n\","
                 " \"big\": 18446744073709551615, \"a\": 7}  ");
    ck_assert_int_eq(v.t, JV_OBJ);
    ck_assert_int_eq(v.n, 4); // duplicate keys kept
    const Jv* a = jv_get(&v, "a");
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(a->t, JV_ARR); // the first "a"
    ck_assert_int_eq(a->n, 4);
    ck_assert(a->items[0].t == JV_NUM && a->items[0].is_uint && a->items[0].u == 1);
    ck_assert(a->items[1].t == JV_NUM && !a->items[1].is_uint && a->items[1].num == -25.0);
    ck_assert(a->items[2].t == JV_BOOL && a->items[2].b == 1);
    ck_assert_int_eq(a->items[3].t, JV_NULL);
    const Jv* s = jv_get(&v, "s");
    ck_assert_str_eq(s->s, "x\xc3\xa9\xf0\x9f\x98\x80\n"); // e-acute and U+1F600 in UTF-8
    const Jv* big = jv_get(&v, "big");
    ck_assert(big->is_uint && big->u == UINT64_MAX);
    ck_assert_ptr_null(jv_get(&v, "missing"));
    ck_assert_ptr_null(jv_get(a, "a")); // not an object
    jv_free(&v);
}
END_TEST

START_TEST(test_json_errors) {
    parse_bad("{\"a\": 1} x", "trailing characters");
    parse_bad("{\"a\" 1}", "expected ':'");
    parse_bad("[1, 2", "unterminated");
    parse_bad("\"\\ud800\"", "unpaired surrogate");
    parse_bad("\"a\\u0000b\"", "NUL");
    parse_bad("\"tab\there\"", "control character");
    parse_bad("{\"a\": 01}", "at byte"); // leading zeros are not JSON
    // depth: JSON_READ_MAX_DEPTH + 1 nested arrays parse, one more does not
    char deep[128];
    int d = JSON_READ_MAX_DEPTH + 1;
    for (int i = 0; i < d; i++)
        deep[i] = '[';
    for (int i = 0; i < d; i++)
        deep[d + i] = ']';
    deep[2 * d] = 0;
    Jv v;
    parse_ok(&v, deep);
    jv_free(&v);
    char deeper[130];
    snprintf(deeper, sizeof deeper, "[%s]", deep);
    parse_bad(deeper, "nesting too deep");
}
END_TEST

START_TEST(test_st_writer_layout_and_readback) {
    char path[1100], err[2048];
    snprintf(path, sizeof path, "%s/w.safetensors", test_tmpdir());
    StSpec t[2] = {{"w", 2, {2, 3}}, {"b", 1, {3}}};
    const char* meta[2] = {"attnlab_attention", "ssmax"};
    StWriter w;
    ck_assert_msg(st_write_begin(&w, path, meta, 1, t, 2, err, sizeof err) == 0, "%s", err);
    float x[9] = {1, 2, 3, 4, 5, 6, -1.5f, 0.25f, 1e-3f};
    st_write_f32(&w, x, 4); // data may come in any pieces
    st_write_f32(&w, x + 4, 5);
    ck_assert_msg(st_write_end(&w, err, sizeof err) == 0, "%s", err);

    size_t len;
    unsigned char* raw = (unsigned char*)util_read_file(path, &len, err, sizeof err);
    ck_assert_ptr_nonnull(raw);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = (hl << 8) | raw[i];
    ck_assert_uint_eq(hl % 8, 0);
    ck_assert_uint_eq(len, 8 + hl + 9 * 4);
    const char* want = "{\"__metadata__\":{\"format\":\"pt\",\"attnlab_attention\":\"ssmax\"},"
                       "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[24,36]}}";
    ck_assert_uint_ge(hl, strlen(want));
    ck_assert(memcmp(raw + 8, want, strlen(want)) == 0);
    for (size_t i = strlen(want); i < hl; i++)
        ck_assert_int_eq(raw[8 + i], ' ');
    free(raw);

    SafeTensors st;
    ck_assert_msg(st_open(&st, path, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(st.attention, "ssmax");
    ck_assert_int_eq(st.n, 2);
    int ib = st_find(&st, "b");
    ck_assert_int_ge(ib, 0);
    float y[6];
    ck_assert(st_read_f32(&st, ib, y, err, sizeof err) == 0);
    ck_assert(y[0] == -1.5f && y[1] == 0.25f && y[2] == 1e-3f);
    ck_assert(st_read_f32(&st, st_find(&st, "w"), y, err, sizeof err) == 0);
    for (int i = 0; i < 6; i++)
        ck_assert(y[i] == (float)(i + 1));
    st_close(&st);
}
END_TEST

START_TEST(test_st_writer_short_data_refused) {
    char path[1100], err[2048];
    snprintf(path, sizeof path, "%s/short.safetensors", test_tmpdir());
    StSpec t[1] = {{"w", 1, {4}}};
    StWriter w;
    ck_assert(st_write_begin(&w, path, NULL, 0, t, 1, err, sizeof err) == 0);
    float x[3] = {1, 2, 3};
    st_write_f32(&w, x, 3);
    ck_assert(st_write_end(&w, err, sizeof err) != 0);
    ck_assert_msg(strstr(err, "12 data bytes written, the header declares 16") != NULL, "%s", err);
    ck_assert_msg(!util_file_exists(path), "a short file was left at %s", path);
}
END_TEST

static Suite* formats_suite(void) {
    Suite* s = suite_create("formats");
    TCase* tc = tcase_create("core");
    tcase_add_test(tc, test_json_values);
    tcase_add_test(tc, test_json_errors);
    tcase_add_test(tc, test_st_writer_layout_and_readback);
    tcase_add_test(tc, test_st_writer_short_data_refused);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(formats_suite)
