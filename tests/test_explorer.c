// tests/test_explorer.c: the attention explorer page writer (model/explorer.h). The page's data
// block is decoded here with an independent base64 decoder and zlib's uncompress, following the
// layout documented in explorer.h, and compared with the input maps: every weight within half a
// quantisation step, exact row sums, the step defined as (max(0, max a) - min(0, min a)) / 255.
// Also: the size bound holds and is enforced (nothing written above the limit), the sidecar
// cannot close the page's script block, and metrics lines are filtered and checked.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/rng.h"
#include "common/util.h"
#include "model/explorer.h"
#include "tests/testutil.h"

START_TEST(test_quantize_row_bound) {
    Rng r;
    rng_seed(&r, 7);
    float a[300];
    uint8_t q[300];
    for (int trial = 0; trial < 200; trial++) {
        const int n = 1 + (int)rng_below(&r, 300);
        const int kind = trial % 4; // softmax-like, signed, constant, with exact zeros
        for (int j = 0; j < n; j++) {
            float u = rng_uniform(&r);
            a[j] = kind == 0   ? u * u / n
                   : kind == 1 ? u - 0.4f
                   : kind == 2 ? 0.25f
                               : (u < 0.5f ? 0.0f : u);
        }
        float lo, step;
        explorer_quantize_row(a, n, q, &lo, &step);
        float mn = 0.0f, mx = 0.0f;
        for (int j = 0; j < n; j++) {
            mn = fminf(mn, a[j]);
            mx = fmaxf(mx, a[j]);
        }
        ck_assert_float_eq(lo, mn);
        ck_assert_float_eq_tol(step, (mx - mn) / 255.0f, 1e-9f);
        for (int j = 0; j < n; j++) {
            const double back = (double)lo + q[j] * (double)step;
            ck_assert_msg(fabs(back - a[j]) <= step * 0.5 + 1e-7, "trial %d j %d: %g vs %g", trial,
                          j, back, a[j]);
            if (mn == 0.0f && a[j] == 0.0f) ck_assert_int_eq(q[j], 0); // zeros stay exact
        }
    }
}
END_TEST

START_TEST(test_raw_bytes_formula) {
    // 12 x 12 heads at T = 1024: 144 * (12 * 1024 + 1024 * 1025 / 2) = 144 * 537088
    ck_assert_uint_eq(explorer_raw_bytes(12, 12, 1024), 77340672u);
    ck_assert_uint_eq(explorer_raw_bytes(1, 1, 1), 13u); // 12 bytes of row data + one weight
}
END_TEST

// base64 (RFC 4648) without validation shortcuts: every character must be in the alphabet.
static uint8_t* b64_decode(const char* s, size_t n, size_t* out_n) {
    uint8_t* out = malloc(n / 4 * 3 + 3);
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n && s[i] != '='; i++) {
        const char* p =
            strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", s[i]);
        ck_assert_msg(p != NULL && s[i] != 0, "bad base64 character %d", s[i]);
        acc = (acc << 6) |
              (uint32_t)(p - "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    *out_n = o;
    return out;
}

// The text between `open` and the next "</script>" in page.
static const char* block(const char* page, const char* open, size_t* n) {
    const char* s = strstr(page, open);
    ck_assert_ptr_nonnull(s);
    s += strlen(open);
    const char* e = strstr(s, "</script>");
    ck_assert_ptr_nonnull(e);
    *n = (size_t)(e - s);
    return s;
}

static float* test_maps(int H, int T, Rng* r) { // causal rows, a signed one in head 1
    float* m = calloc((size_t)H * T * T, sizeof(float));
    for (int h = 0; h < H; h++)
        for (int t = 0; t < T; t++) {
            double s = 0.0;
            float* row = m + ((size_t)h * T + t) * T;
            for (int j = 0; j <= t; j++)
                s += row[j] = expf(3.0f * rng_uniform(r));
            for (int j = 0; j <= t; j++)
                row[j] = h == 1 ? row[j] / (float)s - 0.5f / (t + 1) : row[j] / (float)s;
        }
    return m;
}

START_TEST(test_page_roundtrip_and_bound) {
    Rng r;
    rng_seed(&r, 11);
    const int nl = 1, nh = 2, T = 9, H = nl * nh;
    float* maps = test_maps(H, T, &r);
    const char* sidecar = "{\"variant\":\"x</script><b>\",\"shape\":[1,2,9,9]}";
    ExplorerRun run = {.label = "run",
                       .sidecar = sidecar,
                       .maps = maps,
                       .nl = nl,
                       .nh = nh,
                       .T = T,
                       .metrics = NULL,
                       .metrics_path = NULL};
    char path[1200], err[512];
    snprintf(path, sizeof(path), "%s/page.html", test_tmpdir());
    const size_t bound = explorer_page_bound(&run, 1);
    // over the limit: an error, and no file
    ck_assert_int_eq(explorer_write(path, &run, 1, "t", bound - 1, NULL, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "--max-mib"));
    ck_assert_int_ne(access(path, F_OK), 0);
    size_t written = 0;
    ck_assert_int_eq(explorer_write(path, &run, 1, "t", bound, &written, err, sizeof(err)), 0);
    size_t len;
    char* page = util_read_file(path, &len, err, sizeof(err));
    ck_assert_ptr_nonnull(page);
    ck_assert_uint_eq(len, written);
    ck_assert_uint_le(written, bound);
    ck_assert_ptr_null(strstr(page, "<!--ATTNLAB_DATA-->")); // the marker was replaced
    ck_assert_ptr_null(strstr(page, "<b>"));                 // the sidecar's '<' is escaped
    size_t mn;
    const char* meta = block(page, "<script id=\"attnlab-meta\" type=\"application/json\">", &mn);
    ck_assert_ptr_null(memchr(meta, '<', mn));
    ck_assert_ptr_nonnull(strstr(page, "x\\u003c/script>\\u003cb>"));
    size_t bn, zn;
    const char* b64 = block(page, "<script id=\"attnlab-data-0\" type=\"text/plain\">", &bn);
    uint8_t* z = b64_decode(b64, bn, &zn);
    uLongf rn = explorer_raw_bytes(nl, nh, T);
    ck_assert_uint_eq(rn, (uLongf)H * (12 * T + T * (T + 1) / 2));
    uint8_t* raw = malloc(rn + 1);
    uLongf got = rn + 1;
    ck_assert_int_eq(uncompress(raw, &got, z, zn), Z_OK);
    ck_assert_uint_eq(got, rn);
    const float* lo = (const float*)raw;
    const float* st = lo + H * T;
    const float* sum = st + H * T;
    const uint8_t* q = raw + 12 * H * T;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < T; t++) {
            const float* a = maps + ((size_t)h * T + t) * T;
            float mnv = 0.0f, mxv = 0.0f;
            double s = 0.0;
            for (int j = 0; j <= t; j++) {
                mnv = fminf(mnv, a[j]);
                mxv = fmaxf(mxv, a[j]);
                s += a[j];
            }
            const float step = (mxv - mnv) / 255.0f;
            ck_assert_float_eq_tol(st[h * T + t], step, 1e-9f);
            ck_assert_float_eq_tol(sum[h * T + t], (float)s, 1e-6f);
            for (int j = 0; j <= t; j++) {
                const double back = lo[h * T + t] + *q++ * (double)st[h * T + t];
                ck_assert_msg(fabs(back - a[j]) <= step * 0.5 + 1e-7, "h %d t %d j %d", h, t, j);
            }
        }
    ck_assert_ptr_eq(q, raw + rn);
    free(raw);
    free(z);
    free(page);
    free(maps);
}
END_TEST

START_TEST(test_metrics_and_sidecar_checks) {
    Rng r;
    rng_seed(&r, 3);
    const int T = 4;
    float* maps = test_maps(1, T, &r);
    const char* good = "{\"step\":0,\"train_loss\":3}\n{\"step\":5,\"kind\":\"head\",\"layer\":0}\n"
                       "{\"step\":5,\"kind\":\"model\",\"sink_rate\":0.5}\n";
    ExplorerRun run = {.label = "run",
                       .sidecar = "{}",
                       .maps = maps,
                       .nl = 1,
                       .nh = 1,
                       .T = T,
                       .metrics = good,
                       .metrics_path = "m.jsonl"};
    char path[1200], err[512];
    snprintf(path, sizeof(path), "%s/m.html", test_tmpdir());
    ck_assert_int_eq(explorer_write(path, &run, 1, "t", 0, NULL, err, sizeof(err)), 0);
    size_t len;
    char* page = util_read_file(path, &len, err, sizeof(err));
    ck_assert_ptr_nonnull(strstr(page, "\\\"kind\\\":\\\"head\\\""));
    ck_assert_ptr_nonnull(strstr(page, "\\\"sink_rate\\\":0.5"));
    ck_assert_ptr_null(strstr(page, "train_loss")); // only head and model records
    free(page);
    run.metrics = "{\"step\":0}\n{\"step\":5,\"kind\":\"head\",\"layer\":0\n";
    ck_assert_int_eq(explorer_write(path, &run, 1, "t", 0, NULL, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "m.jsonl:2"));
    run.metrics = NULL;
    run.sidecar = "[1]";
    ck_assert_int_eq(explorer_write(path, &run, 1, "t", 0, NULL, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "sidecar"));
    ExplorerRun two[2] = {run, run};
    two[0].sidecar = two[1].sidecar = "{}";
    two[1].T = 3;
    ck_assert_int_eq(explorer_write(path, two, 2, "t", 0, NULL, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "different lengths"));
    free(maps);
}
END_TEST

static Suite* explorer_suite(void) {
    Suite* s = suite_create("explorer");
    TCase* tc = tcase_create("page");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_quantize_row_bound);
    tcase_add_test(tc, test_raw_bytes_formula);
    tcase_add_test(tc, test_page_roundtrip_and_bound);
    tcase_add_test(tc, test_metrics_and_sidecar_checks);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(explorer_suite)
