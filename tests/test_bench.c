// tests/test_bench.c: ./bench, the matmul peak measurements (tools/bench.c): the usage and an
// unknown measurement exit 2; sgemm-peak prints a positive GFLOP/s with the OpenMP thread count;
// bf16-peak prints its peak and oneDNN's kernel where the CPU has a native bf16 matmul, and is
// refused (exit 2) where it has none. `profile` (common/prof.h): on a tiny config it lists every
// phase for fp32 (and bf16 where native, else says why not), the named phases add up to a sane
// fraction of the measured step, bad arguments exit 2 naming them; and profiling changes no
// result (the gradients and the optimizer step are bitwise those of an unprofiled step).
// `generate` on a tiny model: cached and uncached tokens/s finite and positive, each the tokens
// over its printed seconds, their ratio the printed speed-up; the two token fingerprints equal
// each other and the fingerprint of the greedy tokens this suite generates itself from the same
// model (gpt2_generate); the cache's bytes those kv_cache_new takes; bad arguments exit 2.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/prof.h"
#include "common/util.h"
#include "model/kv_cache.h"
#include "model/sample.h"
#include "optim/optim.h"
#include "tests/model_util.h"
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

#define TINY                                                                                       \
    "n_layer=2 n_head=2 n_embd=32 vocab_size=260 tokenizer=byte block_size=32 seq_len=32 "         \
    "batch_size=2"

// The value of column `col` (0: fp32 ms, 2: bf16 ms) in the row "| name |" of the profile table;
// fails the test when the row is missing.
static double row_value(const char* out, const char* name, int col) {
    char key[128];
    snprintf(key, sizeof(key), "\n| %s |", name);
    const char* l = strstr(out, key);
    ck_assert_msg(l != NULL, "phase '%s' missing from:\n%s", name, out);
    l += strlen(key);
    for (int i = 0; i < col; i++) {
        l = strchr(l, '|');
        ck_assert(l != NULL);
        l++;
    }
    double v = NAN;
    ck_assert_msg(sscanf(l, " %lf", &v) == 1, "row '%s': %.80s", name, l);
    return v;
}

// The profile's matmul phases: the ten linear-layer families, then the attention products.
static const int MM_PHASES[12] = {PROF_MM_QKV_FWD,     PROF_MM_QKV_BWD,    PROF_MM_ATTPROJ_FWD,
                                  PROF_MM_ATTPROJ_BWD, PROF_MM_FC_FWD,     PROF_MM_FC_BWD,
                                  PROF_MM_FCPROJ_FWD,  PROF_MM_FCPROJ_BWD, PROF_MM_LMHEAD_FWD,
                                  PROF_MM_LMHEAD_BWD,  PROF_ATTN_MM_FWD,   PROF_ATTN_MM_BWD};

// The printed ms of the first n of MM_PHASES in column col of the phase table, summed.
static double matmul_ms(const char* out, int n, int col) {
    double ms = 0;
    for (int i = 0; i < n; i++)
        ms += row_value(out, prof_name(MM_PHASES[i]), col);
    return ms;
}

START_TEST(test_bench_profile_tiny) {
    static char out[1 << 16];
    // T = 256 (the tiny model's other shapes): the attention products' FLOPs at the peak, about
    // 0.1 ms, stand above the printed rounding of the bound and parity lines checked below
    int rc = rd_run("bench", "profile " TINY " block_size=256 seq_len=256 threads=2 steps=3", out,
                    sizeof(out));
    ck_assert_msg(rc == 0, "rc %d: %s", rc, out);
    ck_assert_msg(strstr(out, "2 threads") && strstr(out, "median of 3 steps"), "%s", out);
    const int native = test_bf16_native("bench profile");
    ck_assert_msg(native ? strstr(out, "| bf16 ms |") != NULL
                         : strstr(out, "bf16: not profiled") != NULL,
                  "%s", out);
    for (int c = 0; c <= (native ? 2 : 0); c += 2) {
        double sum = 0;
        for (int p = 0; p < PROF_NPHASES; p++) {
            double v = row_value(out, prof_name(p), c);
            ck_assert_msg(v >= 0 && isfinite(v), "phase %s: %g ms", prof_name(p), v);
            if (p != PROF_OTHER) sum += v;
        }
        // the printed sum is the sum of the rows (each rounded to 0.01 ms)
        double printed = row_value(out, "sum of the named phases", c);
        ck_assert_msg(fabs(sum - printed) <= 0.006 * PROF_NPHASES + 1e-9, "sum %g vs %g", sum,
                      printed);
        // Each step's phases, "other (untimed)" included, add up to that step's time, so the
        // named phases cover the step where the untimed rest is small. The phases are medians
        // over the steps: on a loaded machine a thread preempted for a few ms stalls one phase
        // of one step, which moves the median step but not each phase's median, so the named
        // sum is not compared with the step from below; only the untimed rest is.
        double step = row_value(out, "step (median)", c);
        double other = row_value(out, "other (untimed)", c);
        ck_assert_msg(step > 0 && other < 0.25 * step && sum < 1.5 * step,
                      "named phases %g ms, untimed %g ms of a %g ms step:\n%s", sum, other, step,
                      out);
        // the work every step does was timed
        ck_assert_msg(row_value(out, "matmul lm head fwd", c) > 0 &&
                          row_value(out, "adamw (+clip scale, bf16 copy)", c) > 0,
                      "%s", out);
    }
    // the linear layers against the peak: FLOPs from the config's shapes (2 layers, C = 32,
    // T = 256, 512 rows: 2 * 512 * |W| forward, twice that backward), each rate from its phase's
    // printed ms, each share from the printed peak (all within the printed rounding)
    const double T = 256, rows = 2 * T, C = 32, L = 2;
    const struct {
        const char *name, *phase;
        double flops;
    } fam[4] = {{"qkv fwd", "matmul qkv fwd", 2 * rows * 3 * C * C * L},
                {"qkv bwd", "matmul qkv bwd", 4 * rows * 3 * C * C * L},
                {"fc proj fwd", "matmul fc proj fwd", 2 * rows * 4 * C * C * L},
                {"attn proj bwd", "matmul attn proj bwd", 4 * rows * C * C * L}};
    double peaks[2] = {0, 0};
    for (int c = 0; c <= (native ? 1 : 0); c++) {
        const char* line = strstr(out, "\npeak (this run");
        const char* tag = c ? "; bf16 " : "): fp32 ";
        const char* pk = line ? strstr(line, tag) : NULL;
        double peak = 0;
        ck_assert_msg(pk && sscanf(pk + strlen(tag), "%lf GFLOP/s", &peak) == 1 && peak > 0,
                      "no %s peak in:\n%s", tag, out);
        peaks[c] = peak;
        for (int f = 0; f < 4; f++) {
            const double gf = row_value(out, fam[f].name, 0);
            ck_assert_msg(fabs(gf - fam[f].flops * 1e-9) <= 5e-4 * gf, "%s: %g GFLOP, want %g",
                          fam[f].name, gf, fam[f].flops * 1e-9);
            const double ms = row_value(out, fam[f].phase, 2 * c);
            const double rate = row_value(out, fam[f].name, 1 + 2 * c);
            const double pct = row_value(out, fam[f].name, 2 + 2 * c);
            if (ms > 0.02)
                ck_assert_msg(rate >= gf / (ms + 0.005) * 1e3 - 0.05 &&
                                  rate <= gf / (ms - 0.005) * 1e3 + 0.05,
                              "%s: %g GFLOP/s from %g GFLOP in %g ms", fam[f].name, rate, gf, ms);
            ck_assert_msg(fabs(pct - 100 * rate / peak) <= 0.05 + 100 * 0.05 / peak + 0.06,
                          "%s: %g%% of a %g GFLOP/s peak at %g GFLOP/s", fam[f].name, pct, peak,
                          rate);
        }
    }
    ck_assert_msg(strstr(out, "\nstep MFU (") != NULL && strstr(out, "| all linear layers |"), "%s",
                  out);
    if (native) { // the speed-up line is the ratio of the two printed median steps
        const char* tag = "\nfp32 step over bf16 step (medians): ";
        const char* sp = strstr(out, tag);
        double x = 0;
        ck_assert_msg(sp && sscanf(sp + strlen(tag), "%lfx", &x) == 1, "%s", out);
        const double f = row_value(out, "step (median)", 0), b = row_value(out, "step (median)", 2);
        // each step is printed to 0.01 ms, the ratio to 0.01
        ck_assert_msg(fabs(x - f / b) <= 0.005 + (f / b) * (0.005 / b + 0.005 / f) + 1e-9,
                      "speed-up %g, steps %g / %g ms", x, f, b);
        // the bound: bf16's step with every matmul at the printed bf16 peak, the rest of its
        // step (the step less the printed matmul phases) as measured, against the fp32 step
        const char* bt = "\nbf16 step with every matmul at its peak (";
        const char* bp = strstr(out, bt);
        double gl = 0, ga = 0, rest = 0, ideal = 0, most = 0;
        ck_assert_msg(bp && sscanf(bp + strlen(bt),
                                   "%lf GFLOP of linear layers, %lf of attention products; the "
                                   "other %lf ms as measured): %lf ms, so fp32 step over bf16 "
                                   "step at most %lfx",
                                   &gl, &ga, &rest, &ideal, &most) == 5,
                      "%s", out);
        const double all = row_value(out, "all linear layers", 0);
        ck_assert_msg(fabs(gl - all) <= 5e-4 * all, "linear %g GFLOP, table %g", gl, all);
        const double attn = 12 * L * T * C * rows; // QK^T, A.V: 2 T C per row each, x3 with bwd
        ck_assert_msg(fabs(ga - attn * 1e-9) <= 5e-4 * ga, "attention %g GFLOP, want %g", ga,
                      attn * 1e-9);
        const double mm = matmul_ms(out, 12, 2);
        // the step and 12 phases printed to 0.01 ms, the rest too
        ck_assert_msg(fabs(rest - (b - mm)) <= 0.005 * 14 + 1e-9, "rest %g ms, step %g - %g", rest,
                      b, mm);
        // the matmuls at the peak (GFLOP to 4 digits, the peak to 0.1) plus the printed rest (to
        // 0.01 ms, as the result)
        const double at_peak = (all + attn * 1e-9) / peaks[1] * 1e3, want = at_peak + rest;
        ck_assert_msg(fabs(ideal - want) <= 0.0101 + 1e-3 * at_peak, "ideal %g ms, want %g", ideal,
                      want);
        ck_assert_msg(fabs(most - f / ideal) <= 0.005 + (f / ideal) * (0.006 / ideal + 0.005 / f),
                      "at most %g, steps %g / %g ms", most, f, ideal);
        // at parity: bf16's matmuls at fp32's share of its peak (fp32's FLOPs over its printed
        // matmul phases and peak), fp32's rest (its step less those phases)
        const char* pt = "\nbf16 step at fp32's efficiency (its matmuls at ";
        const char* pp = strstr(out, pt);
        double share = 0, rest0 = 0, parity = 0, x0 = 0;
        ck_assert_msg(pp && sscanf(pp + strlen(pt),
                                   "%lf%% of the bf16 peak, as fp32's are of the fp32 peak; "
                                   "fp32's other %lf ms): %lf ms, so fp32 step over bf16 step "
                                   "%lfx at parity",
                                   &share, &rest0, &parity, &x0) == 4,
                      "%s", out);
        const double mm0 = matmul_ms(out, 12, 0), fl = all + attn * 1e-9;
        ck_assert_msg(fabs(rest0 - (f - mm0)) <= 0.005 * 14 + 1e-9, "fp32 rest %g ms, step %g - %g",
                      rest0, f, mm0);
        const double want_share = 100 * fl / (mm0 * 1e-3) / peaks[0];
        // the share to 0.05 points, the GFLOP to 4 digits, 12 phases and the peak to their digits
        const double tol_share = 0.05 + want_share * (1e-3 + 0.07 / mm0 + 0.05 / peaks[0]);
        ck_assert_msg(fabs(share - want_share) <= tol_share, "share %g%%, want %g", share,
                      want_share);
        // the peaks to 0.1 GFLOP/s, the fp32 matmul phases to 0.01 ms each
        const double want_par = mm0 * peaks[0] / peaks[1] + rest0;
        ck_assert_msg(fabs(parity - want_par) <=
                          0.0101 + 0.07 + mm0 * (0.05 / peaks[0] + 0.05 / peaks[1]) * 1.01,
                      "parity %g ms, want %g", parity, want_par);
        ck_assert_msg(fabs(x0 - f / parity) <= 0.005 + (f / parity) * (0.006 / parity + 0.005 / f),
                      "at parity %g, steps %g / %g ms", x0, f, parity);
    }
    // one precision only
    rc = rd_run("bench", "profile " TINY " steps=1 precision=fp32", out, sizeof(out));
    ck_assert_msg(rc == 0 && strstr(out, "| fp32 ms |") && !strstr(out, "bf16 ms"), "%s", out);
    if (native) { // a layer-level variant: its attention stays in the rest, as measured
        rc = rd_run("bench", "profile " TINY " steps=1 attention=linear", out, sizeof(out));
        ck_assert_msg(rc == 0, "rc %d: %s", rc, out);
        const char* bt = "\nbf16 step with every matmul at its peak (";
        const char* bp = strstr(out, bt);
        double gl = 0, rest = 0, ideal = 0;
        ck_assert_msg(bp && sscanf(bp + strlen(bt),
                                   "%lf GFLOP of linear layers, the attention of a layer-level "
                                   "variant as measured; the other %lf ms as measured): %lf ms",
                                   &gl, &rest, &ideal) == 3,
                      "%s", out);
        const double mm = matmul_ms(out, 10, 2); // the linear layers' phases only
        const double b = row_value(out, "step (median)", 2);
        ck_assert_msg(fabs(rest - (b - mm)) <= 0.005 * 12 + 1e-9, "rest %g ms, step %g - %g", rest,
                      b, mm);
    }
}
END_TEST

START_TEST(test_bench_profile_bad_args) {
    RD_EXPECT(2, "bench", "profile " TINY " steps=0", "steps = '0'");
    RD_EXPECT(2, "bench", "profile " TINY " steps=x", "steps = 'x'");
    RD_EXPECT(2, "bench", "profile " TINY " n_layr=2", "n_layr");
    RD_EXPECT(2, "bench", "profile no/such.conf", "no/such.conf");
    RD_EXPECT(2, "bench", "profile " TINY " seq_len=64", "seq_len");
}
END_TEST

// The tiny generation model: the default config's other keys, these shapes (the byte tokenizer)
#define GEN_TINY "n_layer=2 n_head=2 n_embd=32 vocab_size=260 tokenizer=byte block_size=32"
#define GEN_N    20

// The number after `key` in out (the first occurrence at a line start); fails when absent.
static double line_value(const char* out, const char* key) {
    char k[128];
    snprintf(k, sizeof(k), "\n%s", key);
    const char* l = strstr(out, k);
    ck_assert_msg(l != NULL, "'%s' missing from:\n%s", key, out);
    double v = NAN;
    ck_assert_msg(sscanf(l + strlen(k), "%lf", &v) == 1, "%s: %.80s", key, l);
    return v;
}

// Greedy tokens of the benchmark's model, generated here without the cache: the FNV-1a (64 bit)
// of the new token ids, each folded in as one value.
static unsigned long long reference_hash(double* cache_bytes) {
    Config c;
    config_defaults(&c);
    char path[1200], err[2048];
    snprintf(path, sizeof(path), "%s/configs/gpt2_124M.conf", test_repo_root());
    ck_assert_msg(config_load(&c, path, err, sizeof(err)) == 0, "%s", err);
    char args[] = GEN_TINY;
    for (char* a = strtok(args, " "); a; a = strtok(NULL, " "))
        ck_assert_msg(config_apply_arg(&c, a, err, sizeof(err)) == 0, "%s", err);
    GPT2 m;
    memset(&m, 0, sizeof(m));
    GPT2Config g;
    ck_assert(gpt2_setup_attention(&m, &c, err, sizeof(err)) == 0);
    ck_assert(gpt2_config_from(&g, &c, err, sizeof(err)) == 0);
    gpt2_build(&m, &g);
    gpt2_init(&m, (uint64_t)c.seed);
    gpt2_alloc_acts(&m, 1, 1 + GEN_N, 1); // the benchmark ran on one thread (rd_run)
    const size_t before = util_alloc_total();
    KVCache* kv = kv_cache_new(&m, 1 + GEN_N);
    *cache_bytes = (double)(util_alloc_total() - before);
    kv_cache_free(kv);
    int ids[1 + GEN_N] = {0};
    Rng r;
    rng_seed(&r, 1);
    ck_assert_int_eq(gpt2_generate(&m, ids, 1, GEN_N, 0.0f, 0, -1, &r), 1 + GEN_N);
    gpt2_free(&m);
    unsigned long long h = 0xcbf29ce484222325ULL; // the FNV-1a offset basis
    for (int i = 1; i <= GEN_N; i++) {
        h ^= (unsigned long long)(unsigned)ids[i];
        h *= 0x100000001b3ULL; // the FNV prime
    }
    return h;
}

START_TEST(test_bench_generate_tiny) {
    static char out[1 << 14];
    char args[512];
    snprintf(args, sizeof(args), "generate " GEN_TINY " tokens=%d repeats=3", GEN_N);
    int rc = rd_run("bench", args, out, sizeof(out));
    ck_assert_msg(rc == 0, "rc %d: %s", rc, out);
    ck_assert_msg(strstr(out, "1 threads") && strstr(out, "median of 3 repeats") &&
                      strstr(out, "precision fp32") && strstr(out, "CPU ") &&
                      strstr(out, "random init"),
                  "%s", out);
    const double cached = line_value(out, "cached: "), uncached = line_value(out, "uncached: ");
    const double ratio = line_value(out, "speed-up: ");
    ck_assert_msg(isfinite(cached) && isfinite(uncached) && isfinite(ratio) && cached > 0 &&
                      uncached > 0 && ratio > 0,
                  "%s", out);
    // tokens/s is the tokens over the printed median seconds; the ratio that of the two rates
    double sc = NAN, su = NAN;
    int nc = 0, nu = 0;
    ck_assert(sscanf(strstr(out, "\ncached: "), "\ncached: %*f tokens/s (%lf s for %d tokens)", &sc,
                     &nc) == 2);
    ck_assert(sscanf(strstr(out, "\nuncached: "), "\nuncached: %*f tokens/s (%lf s for %d tokens)",
                     &su, &nu) == 2);
    ck_assert_int_eq(nc, GEN_N);
    ck_assert_int_eq(nu, GEN_N);
    ck_assert_msg(sc > 0 && su > 0, "%s", out);
    ck_assert_msg(fabs(cached - GEN_N / sc) <= 1e-3 * cached, "%s", out);
    ck_assert_msg(fabs(uncached - GEN_N / su) <= 1e-3 * uncached, "%s", out);
    ck_assert_msg(fabs(ratio - cached / uncached) <= 0.01 + 0.01 * ratio, "%s", out);
    // the same tokens both ways, and the tokens greedy decoding of that model gives
    unsigned long long hc = 0, hu = 0;
    const char* l = strstr(out, "\ntokens: ");
    ck_assert_msg(l && sscanf(l, "\ntokens: cached %llx, uncached %llx", &hc, &hu) == 2, "%s", out);
    double want_bytes = 0;
    const unsigned long long want = reference_hash(&want_bytes);
    ck_assert_msg(hc == want && hu == want, "cached %016llx, uncached %016llx, reference %016llx",
                  hc, hu, want);
    ck_assert_msg(strstr(l, "identical") != NULL, "%s", out);
    // the cache it decoded with: the bytes kv_cache_new takes for 1 + N positions
    l = strstr(out, "\nkey/value cache: ");
    double bytes = NAN;
    int pos = 0;
    ck_assert_msg(l && sscanf(l, "\nkey/value cache: %lf bytes (%*f MiB) for %d positions", &bytes,
                              &pos) == 2,
                  "%s", out);
    ck_assert_int_eq(pos, 1 + GEN_N);
    ck_assert_msg(bytes == want_bytes, "printed %.0f, allocated %.0f", bytes, want_bytes);
}
END_TEST

START_TEST(test_bench_generate_bad_args) {
    RD_EXPECT(2, "bench", "generate " GEN_TINY " tokens=0", "tokens = '0'");
    RD_EXPECT(2, "bench", "generate " GEN_TINY " tokens=x", "tokens = 'x'");
    RD_EXPECT(2, "bench", "generate " GEN_TINY " repeats=0", "repeats = '0'");
    // past the block size the window would slide
    RD_EXPECT(2, "bench", "generate " GEN_TINY " tokens=32", "tokens = 32", "block_size = 32");
    RD_EXPECT(2, "bench", "generate " GEN_TINY " n_layr=2", "n_layr");
    RD_EXPECT(2, "bench", "generate no/such.conf", "no/such.conf");
    // a model whose attention cannot cache: said, not benchmarked
    RD_EXPECT(2, "bench", "generate " GEN_TINY " attention=gated tokens=4", "gated",
              "no key/value cache");
    RD_EXPECT(0, "bench", "--help", "generate");
}
END_TEST

// One training step (zero_grad, forward, backward, AdamW with clipping) of a fresh tiny model;
// the gradients and the updated parameters into g, p.
static void one_step(MMPrecision prec, int prof, float* g, float* p, size_t* n) {
    Config c;
    test_tiny_config(&c, 64, 2, 2, 32, 16);
    GPT2 m;
    test_build_model(&m, &c, 2, 16, 7);
    gpt2_set_precision(&m, prec);
    int x[32], y[32];
    Rng r;
    rng_seed(&r, 3);
    test_random_tokens(x, 32, 64, &r);
    test_random_tokens(y, 32, 64, &r);
    Optimizer o;
    optim_init(&o, optim_lookup("adamw"), m.num_params);
    OptimRange rg = {0, m.num_params, 1};
    OptimHParams h = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
    prof_enable(prof);
    prof_step_begin();
    gpt2_zero_grad(&m);
    gpt2_forward(&m, x, y, 2, 16);
    gpt2_backward(&m, 1.0f);
    memcpy(g, m.grads, sizeof(float) * m.num_params);
    OptimFuse f = {0.5f, gpt2_weight_copy(&m)};
    optim_step_fused(&o, m.params, m.grads, &rg, 1, 1e-3f, &h, &f);
    double acc[PROF_NPHASES];
    prof_step_end(acc);
    prof_enable(0);
    double named = 0;
    for (int i = 1; i < PROF_NPHASES; i++)
        named += acc[i];
    ck_assert_msg(prof ? named > 0 : named == 0, "profiling %d: %g s in named phases", prof, named);
    memcpy(p, m.params, sizeof(float) * m.num_params);
    *n = m.num_params;
    optim_free(&o);
    gpt2_free(&m);
}

START_TEST(test_profile_changes_nothing) {
    const size_t cap = 1 << 20;
    float *g0 = malloc(cap * 4), *g1 = malloc(cap * 4), *p0 = malloc(cap * 4),
          *p1 = malloc(cap * 4);
    for (int k = 0; k < 2; k++) {
        MMPrecision prec = k == 0 ? MM_FP32 : MM_BF16_REF;
        size_t n0, n1;
        one_step(prec, 0, g0, p0, &n0);
        one_step(prec, 1, g1, p1, &n1);
        ck_assert(n0 == n1 && n0 <= cap);
        ck_assert_msg(memcmp(g0, g1, n0 * 4) == 0, "gradients differ with profiling on (%d)", k);
        ck_assert_msg(memcmp(p0, p1, n0 * 4) == 0, "parameters differ with profiling on (%d)", k);
    }
    mm_set_precision(MM_FP32);
    free(g0);
    free(g1);
    free(p0);
    free(p1);
}
END_TEST

static Suite* bench_suite(void) {
    Suite* s = suite_create("bench");
    TCase* tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_bench_usage_and_unknown);
    tcase_add_test(tc, test_bench_sgemm_peak);
    tcase_add_test(tc, test_bench_bf16_peak);
    tcase_add_test(tc, test_bench_profile_tiny);
    tcase_add_test(tc, test_bench_profile_bad_args);
    tcase_add_test(tc, test_profile_changes_nothing);
    tcase_add_test(tc, test_bench_generate_tiny);
    tcase_add_test(tc, test_bench_generate_bad_args);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(bench_suite)
