// tests/test_npy.c: the .npy writer and reader of common/npy.h: byte-exact headers, fp16
// rounding (known values and all 65536 halves), whole-file and streaming writes, malformed files
// (a message naming the file), and numpy loading our files and writing identical headers (a
// missing numpy is a failure).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/npy.h"
#include "common/util.h"
#include "tests/file_util.h"
#include "tests/testutil.h"

// ----------------------------------------------------------------------------
// .npy: headers

// The header the format specification prescribes for a dict literal: magic, version 1.0, the
// little-endian uint16 HEADER_LEN, the dict, numpy's growth room (21 - digits of the first
// axis), then 1..64 spaces and '\n' so that the total is a multiple of 64.
static size_t expected_header(char* out, const char* dict, int first_axis_digits) {
    size_t n = strlen(dict) + (first_axis_digits ? (size_t)(21 - first_axis_digits) : 0);
    size_t pad = 64 - (10 + n + 1) % 64;
    size_t hl = n + pad + 1;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (char)(hl & 0xff);
    out[9] = (char)(hl >> 8);
    memset(out + 10, ' ', hl);
    memcpy(out + 10, dict, strlen(dict));
    out[10 + hl - 1] = '\n';
    return 10 + hl;
}

START_TEST(test_npy_header_bytes) {
    char got[1024], exp[1024];
    // (2, 3) float32, written out in full: 59-char dict + 20 growth + 38 pad + '\n' = 118
    const char full[] = "\x93NUMPY\x01\x00\x76\x00"
                        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
                        "                    "                   // 20
                        "                                      " // 38
                        "\n";
    ck_assert_uint_eq(sizeof(full) - 1, 128);
    size_t n = npy_header(got, sizeof(got), (const int[]){2, 3}, 2, 0);
    ck_assert_uint_eq(n, 128);
    ck_assert(memcmp(got, full, 128) == 0);
    struct {
        int shape[5], ndim, fp16, digits;
        const char* dict;
    } cases[] = {
        {{5}, 1, 1, 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (5,), }"},
        {{0}, 0, 0, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }"},
        {{1, 12, 64, 64},
         4,
         0,
         1,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 12, 64, 64), }"},
        {{123456789, 2000000000, 7, 0, 1},
         5,
         1,
         9,
         "{'descr': '<f2', 'fortran_order': False, 'shape': (123456789, 2000000000, 7, 0, 1), }"},
        {{0, 3}, 2, 0, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }"},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        size_t en = expected_header(exp, cases[c].dict, cases[c].digits);
        n = npy_header(got, sizeof(got), cases[c].shape, cases[c].ndim, cases[c].fp16);
        ck_assert_uint_eq(n, en);
        ck_assert_uint_eq(n % 64, 0);
        ck_assert_msg(memcmp(got, exp, n) == 0, "case %zu", c);
    }
    // too small a buffer, negative dims, too many dims
    ck_assert_uint_eq(npy_header(got, 100, (const int[]){2, 3}, 2, 0), 0);
    ck_assert_uint_eq(npy_header(got, sizeof(got), (const int[]){2, -3}, 2, 0), 0);
    ck_assert_uint_eq(npy_header(got, sizeof(got), (const int[]){1}, NPY_MAX_DIMS + 1, 0), 0);
}
END_TEST

// ----------------------------------------------------------------------------
// fp16

static uint16_t h16(float f) {
    return npy_f32_to_f16(f);
}

START_TEST(test_fp16_known_values) {
    ck_assert_uint_eq(h16(1.0f), 0x3C00);
    ck_assert_uint_eq(h16(-2.0f), 0xC000);
    ck_assert_uint_eq(h16(0.0f), 0x0000);
    ck_assert_uint_eq(h16(-0.0f), 0x8000);
    ck_assert_uint_eq(h16(65504.0f), 0x7BFF); // largest finite
    ck_assert_uint_eq(h16(65519.0f), 0x7BFF); // below the midpoint to 65536
    ck_assert_uint_eq(h16(65520.0f), 0x7C00); // midpoint, ties to even = Inf
    ck_assert_uint_eq(h16(1e6f), 0x7C00);
    ck_assert_uint_eq(h16(-1e6f), 0xFC00);
    ck_assert_uint_eq(h16(INFINITY), 0x7C00);
    ck_assert_uint_eq(h16(-INFINITY), 0xFC00);
    uint16_t hn = h16(NAN);
    ck_assert((hn & 0x7C00) == 0x7C00 && (hn & 0x03FF) != 0);
    ck_assert_uint_eq(h16(0.1f), 0x2E66);
    ck_assert_uint_eq(h16(1.0f / 3.0f), 0x3555);
    ck_assert_uint_eq(h16(ldexpf(1.0f, -14)), 0x0400); // smallest normal
    ck_assert_uint_eq(h16(ldexpf(1.0f, -24)), 0x0001); // smallest subnormal
    ck_assert_uint_eq(h16(ldexpf(1.0f, -25)), 0x0000); // half of it: tie to even 0
    ck_assert_uint_eq(h16(ldexpf(1.0f, -25) * 1.0000001f), 0x0001);
    ck_assert_uint_eq(h16(ldexpf(3.0f, -25)), 0x0002);    // 1.5 units: tie to even 2
    ck_assert_uint_eq(h16(ldexpf(1023.0f, -24)), 0x03FF); // largest subnormal
    ck_assert_uint_eq(h16(ldexpf(2047.0f, -25)), 0x0400); // rounds up into the normals
    ck_assert_uint_eq(h16(1e-8f), 0x0000);                // 0.17 units of 2^-24
    ck_assert_uint_eq(h16(-1e-8f), 0x8000);
    ck_assert_uint_eq(h16(1e-7f), 0x0002); // 1.68 units
    ck_assert_uint_eq(h16(1e-30f), 0x0000);
    ck_assert_uint_eq(h16(1.0f + ldexpf(1.0f, -11)), 0x3C00); // tie: even mantissa 0
    ck_assert_uint_eq(h16(1.0f + ldexpf(3.0f, -11)), 0x3C02); // tie: even mantissa 2
    ck_assert_uint_eq(h16(1.0f + ldexpf(1.0f, -11) + ldexpf(1.0f, -20)), 0x3C01);
    ck_assert(npy_f16_to_f32(0x3C00) == 1.0f);
    ck_assert(npy_f16_to_f32(0xC000) == -2.0f);
    ck_assert(npy_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
    ck_assert(npy_f16_to_f32(0x7BFF) == 65504.0f);
    ck_assert(isinf(npy_f16_to_f32(0xFC00)) && npy_f16_to_f32(0xFC00) < 0);
    ck_assert(isnan(npy_f16_to_f32(0x7E00)));
}
END_TEST

// An independent decoder: value = (-1)^s * 2^(e-15) * (1 + m/1024), subnormal 2^-24 * m.
static double half_value(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

// All 65536 halves: decoding matches the independent decoder, encoding inverts it, and the
// midpoints between neighbours round to the even one (nudged ones to the nearer one).
START_TEST(test_fp16_exhaustive) {
    for (uint32_t h = 0; h < 65536; h++) {
        double v = half_value((uint16_t)h);
        float f = npy_f16_to_f32((uint16_t)h);
        if (isnan(v)) {
            ck_assert(isnan(f));
            ck_assert(isnan(npy_f16_to_f32(h16(f))));
            continue;
        }
        ck_assert_msg((double)f == v && !signbit(f) == !signbit(v), "h=%04x", h);
        ck_assert_msg(h16(f) == h, "h=%04x -> %04x", h, h16(f));
        uint32_t mag = h & 0x7FFF;
        if (mag >= 0x7BFF) continue;                 // no finite upper neighbour
        double next = half_value((uint16_t)(h + 1)); // same sign, one ulp further from 0
        float mid = (float)((v + next) / 2);         // exact: needs 12 significant bits
        ck_assert((double)mid == (v + next) / 2);
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        ck_assert_msg(h16(mid) == even, "midpoint above %04x -> %04x", h, h16(mid));
        ck_assert_uint_eq(h16(nextafterf(mid, 0.0f)), h);
        ck_assert_uint_eq(h16(nextafterf(mid, mid > 0 ? INFINITY : -INFINITY)), h + 1);
    }
}
END_TEST

// ----------------------------------------------------------------------------
// .npy: files

START_TEST(test_npy_roundtrip_and_stream) {
    const char* dir = test_tmpdir();
    char path[1024], err[2048];
    enum { N = 3 * 4 * 5 };
    float x[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(i - 30) / 8.0f + (i == 7 ? 1e-3f : 0.0f);
    const int shape[3] = {3, 4, 5};
    for (int fp16 = 0; fp16 <= 1; fp16++) {
        snprintf(path, sizeof(path), "%s/a%d.npy", dir, fp16);
        ck_assert_msg(npy_write(path, x, shape, 3, fp16, err, sizeof(err)) == 0, "%s", err);
        NpyInfo info;
        ck_assert_int_eq(npy_read_header(path, &info, err, sizeof(err)), 0);
        ck_assert_int_eq(info.ndim, 3);
        ck_assert(info.shape[0] == 3 && info.shape[1] == 4 && info.shape[2] == 5);
        ck_assert_int_eq(info.fp16, fp16);
        ck_assert_uint_eq(info.count, N);
        ck_assert_uint_eq(info.data_offset % 64, 0);
        struct stat st;
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_uint_eq((size_t)st.st_size, info.data_offset + N * (fp16 ? 2u : 4u));
        float* y = npy_read_f32(path, &info, err, sizeof(err));
        ck_assert_msg(y != NULL, "%s", err);
        for (int i = 0; i < N; i++) {
            float e = fp16 ? npy_f16_to_f32(h16(x[i])) : x[i];
            ck_assert(y[i] == e);
        }
        // values k/8 in [-4, 4) are exact in half; x[7] = -23/8 + 1e-3 is not
        if (fp16) ck_assert(y[7] != x[7] && fabsf(y[7] - x[7]) < 2e-3f);
        free(y);
    }
    // streaming in uneven chunks gives the same bytes as one call
    char spath[1024];
    snprintf(spath, sizeof(spath), "%s/s.npy", dir);
    NpyWriter w;
    ck_assert_int_eq(npy_open(&w, spath, shape, 3, 1, err, sizeof(err)), 0);
    for (int i = 0; i < N; i += 7)
        ck_assert_int_eq(npy_write_chunk(&w, x + i, (size_t)(N - i < 7 ? N - i : 7)), 0);
    ck_assert_msg(npy_commit(&w) == 0, "%s", err);
    size_t n1, n2;
    snprintf(path, sizeof(path), "%s/a1.npy", dir);
    char* a = test_read_text(path, &n1);
    char* b = test_read_text(spath, &n2);
    ck_assert(n1 == n2 && memcmp(a, b, n1) == 0);
    free(a);
    free(b);
    int before = test_dir_entries(dir);
    // too few elements: commit fails, nothing left behind
    snprintf(spath, sizeof(spath), "%s/short.npy", dir);
    ck_assert_int_eq(npy_open(&w, spath, shape, 3, 0, err, sizeof(err)), 0);
    ck_assert_int_eq(npy_write_chunk(&w, x, 10), 0);
    ck_assert_int_eq(npy_commit(&w), -1);
    ck_assert_ptr_nonnull(strstr(err, "short.npy"));
    ck_assert_ptr_nonnull(strstr(err, "10 of 60"));
    // too many: the chunk fails, and so does commit
    ck_assert_int_eq(npy_open(&w, spath, shape, 3, 0, err, sizeof(err)), 0);
    ck_assert_int_eq(npy_write_chunk(&w, x, 50), 0);
    ck_assert_int_eq(npy_write_chunk(&w, x, 11), -1);
    ck_assert_int_eq(npy_commit(&w), -1);
    // explicit abort
    ck_assert_int_eq(npy_open(&w, spath, shape, 3, 0, err, sizeof(err)), 0);
    npy_abort(&w);
    ck_assert_int_eq(test_dir_entries(dir), before);
    ck_assert(!util_file_exists(spath));
    // into a directory that does not exist: an error naming the path, nothing written
    snprintf(spath, sizeof(spath), "%s/missing/x.npy", dir);
    ck_assert_int_eq(npy_write(spath, x, shape, 3, 0, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "missing/x.npy"));
    ck_assert_int_eq(test_dir_entries(dir), before);
    // an invalid shape
    ck_assert_int_eq(npy_write(spath, x, (const int[]){-1}, 1, 0, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "shape"));
}
END_TEST

// Malformed files: each gives a message naming the file, never a crash.
START_TEST(test_npy_read_malformed) {
    const char* dir = test_tmpdir();
    char path[1024], err[2048];
    snprintf(path, sizeof(path), "%s/m.npy", dir);
    NpyInfo info;
    char hdr[256];
    const char* dicts[] = {
        "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }",
        "{'descr': '<f4', 'fortran_order': False, }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }",
    };
    for (size_t c = 0; c < sizeof(dicts) / sizeof(dicts[0]); c++) {
        size_t n = expected_header(hdr, dicts[c], 0);
        test_write_text(path, hdr, n);
        ck_assert_int_eq(npy_read_header(path, &info, err, sizeof(err)), -1);
        ck_assert_msg(strstr(err, "m.npy") != NULL, "%s", err);
    }
    // good header, wrong data size (one float short)
    size_t n = expected_header(hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 1);
    memset(hdr + n, 0, 4);
    test_write_text(path, hdr, n + 4);
    ck_assert_int_eq(npy_read_header(path, &info, err, sizeof(err)), 0);
    ck_assert_ptr_null(npy_read_f32(path, &info, err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "m.npy"));
    // bad magic, truncated header, empty file, missing file
    test_write_text(path, "\x93NUMPX\x01\x00\x10\x00{}", 12);
    ck_assert_int_eq(npy_read_header(path, &info, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "magic"));
    test_write_text(path, "\x93NUMPY\x01\x00\x70\x00{'descr'", 18);
    ck_assert_int_eq(npy_read_header(path, &info, err, sizeof(err)), -1);
    test_write_text(path, "", 0);
    ck_assert_int_eq(npy_read_header(path, &info, err, sizeof(err)), -1);
    snprintf(path, sizeof(path), "%s/absent.npy", dir);
    ck_assert_ptr_null(npy_read_f32(path, &info, err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "absent.npy"));
}
END_TEST

// numpy itself loads our files (also memory-mapped), sees the values, rounds to float16
// identically, and writes byte-identical headers.
START_TEST(test_npy_numpy_interop) {
    ck_assert_msg(test_have_python("numpy"),
                  "%s with numpy not available: numpy interoperability cannot be checked; "
                  "install it with `apt-get install python3-numpy` (or `make deps`)",
                  TEST_PYTHON);
    const char* dir = test_tmpdir();
    char p1[1024], p2[1024], p3[1024], p4[1024], err[2048];
    enum { A = 2, B = 3, C = 5, R = 4099 };
    float x[A * B * C];
    for (int i = 0; i < A * B * C; i++)
        x[i] = (float)((i % 97) - 48) / 8.0f;
    snprintf(p1, sizeof(p1), "%s/f4.npy", dir);
    ck_assert_int_eq(npy_write(p1, x, (const int[]){A, B, C}, 3, 0, err, sizeof(err)), 0);
    float* r = mallocCheck(R * sizeof(float));
    Rng rng;
    rng_seed(&rng, 11);
    for (int i = 0; i < R; i++) {
        uint32_t bits = (uint32_t)rng_u64(&rng); // every exponent, incl. sub/overflow, Inf, NaN
        if (i % 2) bits = (bits & 0x807FFFFFu) | ((uint32_t)(100 + i % 40) << 23); // half range
        memcpy(&r[i], &bits, 4);
    }
    snprintf(p2, sizeof(p2), "%s/r4.npy", dir);
    snprintf(p3, sizeof(p3), "%s/r2.npy", dir);
    ck_assert_int_eq(npy_write(p2, r, (const int[]){R}, 1, 0, err, sizeof(err)), 0);
    ck_assert_int_eq(npy_write(p3, r, (const int[]){R}, 1, 1, err, sizeof(err)), 0);
    float s = 2.5f;
    snprintf(p4, sizeof(p4), "%s/s.npy", dir);
    ck_assert_int_eq(npy_write(p4, &s, NULL, 0, 0, err, sizeof(err)), 0);
    free(r);
    const char* script =
        "import sys, io, numpy as np\n"
        "f4, r4, r2, sc = sys.argv[1:5]\n"
        "def header(path):\n"
        "    b = open(path, 'rb').read(); return b[:b.index(b'\\n') + 1]\n"
        "def npsave_header(a):\n"
        "    buf = io.BytesIO(); np.save(buf, a); b = buf.getvalue(); return b[:b.index(b'\\n') + "
        "1]\n"
        "a = np.load(f4)\n"
        "assert a.dtype == np.float32 and a.shape == (2, 3, 5), (a.dtype, a.shape)\n"
        "exp = ((np.arange(30) % 97 - 48) / 8).astype(np.float32).reshape(2, 3, 5)\n"
        "assert np.array_equal(a, exp)\n"
        "m = np.load(f4, mmap_mode='r')\n"
        "assert isinstance(m, np.memmap) and np.array_equal(m, exp)\n"
        "assert header(f4) == npsave_header(exp), (header(f4), npsave_header(exp))\n"
        "x = np.load(r4); h = np.load(r2, mmap_mode='r')\n"
        "assert h.dtype == np.float16 and h.shape == (4099,)\n"
        "with np.errstate(over='ignore', invalid='ignore'):\n"
        "    ref = x.astype(np.float16)\n"
        "nan = np.isnan(ref)\n"
        "assert np.array_equal(nan, np.isnan(h))\n"
        "assert np.array_equal(ref.view(np.uint16)[~nan], np.asarray(h).view(np.uint16)[~nan])\n"
        "assert header(r2) == npsave_header(ref)\n"
        "s = np.load(sc); assert s.shape == () and s == 2.5\n"
        "assert header(sc) == npsave_header(np.float32(2.5).reshape(()))\n";
    char args[4200];
    snprintf(args, sizeof(args), "%s %s %s %s", p1, p2, p3, p4);
    ck_assert_int_eq(test_run_python(dir, script, args), 0);
}
END_TEST

static Suite* npy_suite(void) {
    Suite* s = suite_create("npy");
    TCase* tn = tcase_create("npy");
    tcase_set_timeout(tn, 30);
    tcase_add_test(tn, test_npy_header_bytes);
    tcase_add_test(tn, test_fp16_known_values);
    tcase_add_test(tn, test_fp16_exhaustive);
    tcase_add_test(tn, test_npy_roundtrip_and_stream);
    tcase_add_test(tn, test_npy_read_malformed);
    tcase_add_test(tn, test_npy_numpy_interop);
    suite_add_tcase(s, tn);
    return s;
}

TEST_MAIN(npy_suite)
