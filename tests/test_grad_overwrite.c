// tests/test_grad_overwrite.c: gradients written without a zeroing pass. gpt2_zero_grad clears
// only the tensors the backward adds into; the weight-gradient matmuls overwrite theirs (GEMM
// beta = 0) on a step's first micro-batch, and the activation gradients that one matmul or the
// GELU writes whole are overwritten too. Everything must equal, bit for bit, the path that
// zeroes every buffer first and accumulates:
//   - matmul_backward_to(MM_OVERWRITE) on NaN-filled outputs == zeroed outputs + matmul_backward,
//     for fp32, bf16_ref and (where native) bf16, on inputs with +0 / -0 entries and an all-zero
//     column of dout (products that are all +-0);
//   - gelu_backward_set on a NaN-filled dinp == zeroed dinp + gelu_backward, -0 products included;
//   - the cross-entropy backward writing bf16 dlogits == the fp32 dlogits rounded;
//   - a model step's gradients (the buffer NaN-filled before gpt2_zero_grad) == those of a fully
//     zeroed buffer with every matmul accumulating, for grad_accum 1 and 3, fp32, bf16_ref and
//     bf16, with softmax and with variants that own parameters (ssmax, gated);
//   - with a gradient hook that fills some segments with a running sum (as a data-parallel rank
//     receives one), those segments accumulate onto it, the others are overwritten.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/matmul.h"
#include "common/util.h"
#include "model/gpt2.h"
#include "model/layers.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

static int native(void) {
    return test_bf16_native("test_grad_overwrite");
}

// fp32 and bf16_ref always; bf16 (oneDNN) where native
static int precisions(MMPrecision* p) {
    int n = 0;
    p[n++] = MM_FP32;
    p[n++] = MM_BF16_REF;
    if (native()) p[n++] = MM_BF16;
    return n;
}

static void fill_nan(float* x, size_t n) {
    for (size_t i = 0; i < n; i++)
        x[i] = NAN;
}

START_TEST(test_matmul_overwrite_bits) {
    // C = 200: column blocks of 64 (strided outputs, the bf16 merge path); OC = 300 likewise
    const int N = 37, C = 200, OC = 300;
    Rng r;
    rng_seed(&r, 11);
    float* dout = allocFloats((size_t)N * OC);
    float* inp = allocFloats((size_t)N * C);
    float* w = allocFloats((size_t)OC * C);
    fill_uniform(dout, (size_t)N * OC, -1.0f, 1.0f, &r);
    fill_uniform(inp, (size_t)N * C, -1.0f, 1.0f, &r);
    fill_uniform(w, (size_t)OC * C, -1.0f, 1.0f, &r);
    for (int n = 0; n < N; n++) {
        dout[(size_t)n * OC + 7] = n % 2 ? 0.0f : -0.0f; // dweight row 7: products all +-0
        inp[(size_t)n * C + 3] = -0.0f;
    }
    for (int o = 0; o < OC; o++)
        w[(size_t)o * C + 5] = o % 3 ? -0.0f : 0.0f;
    const size_t ni = (size_t)N * C, nw = (size_t)OC * C;
    float *di0 = allocFloats(ni), *di1 = allocFloats(ni), *dw0 = allocFloats(nw),
          *dw1 = allocFloats(nw), *db0 = allocFloats(OC), *db1 = allocFloats(OC);
    MMPrecision p[3];
    int np = precisions(p);
    for (int k = 0; k < np; k++) {
        mm_set_precision(p[k]);
        memset(di0, 0, sizeof(float) * ni);
        memset(dw0, 0, sizeof(float) * nw);
        memset(db0, 0, sizeof(float) * OC);
        matmul_backward(di0, dw0, db0, dout, inp, w, N, C, OC);
        fill_nan(di1, ni);
        fill_nan(dw1, nw);
        memset(db1, 0, sizeof(float) * OC);
        matmul_backward_to(di1, MM_OVERWRITE, dw1, MM_OVERWRITE, db1, dout, inp, w, N, C, OC);
        ck_assert_msg(memcmp(di0, di1, sizeof(float) * ni) == 0, "%s: dinp differs",
                      mm_precision_name(p[k]));
        ck_assert_msg(memcmp(dw0, dw1, sizeof(float) * nw) == 0, "%s: dweight differs",
                      mm_precision_name(p[k]));
        ck_assert_msg(memcmp(db0, db1, sizeof(float) * OC) == 0, "%s: dbias differs",
                      mm_precision_name(p[k]));
        // the row of +-0 products is exactly zero and the rest is not trivially so
        for (int c = 0; c < C; c++)
            ck_assert(dw1[(size_t)7 * C + c] == 0.0f);
        ck_assert(dw1[0] != 0.0f && di1[0] != 0.0f);
        // mixed: dinp accumulates onto what is there, dweight is overwritten
        for (size_t i = 0; i < ni; i++)
            di1[i] = di0[i] = 0.25f * (float)(i % 5);
        matmul_backward_to(di1, MM_ACCUMULATE, dw1, MM_OVERWRITE, NULL, dout, inp, w, N, C, OC);
        memset(dw0, 0, sizeof(float) * nw);
        matmul_backward(di0, dw0, NULL, dout, inp, w, N, C, OC);
        ck_assert_msg(memcmp(di0, di1, sizeof(float) * ni) == 0, "%s: accumulated dinp differs",
                      mm_precision_name(p[k]));
        ck_assert(memcmp(dw0, dw1, sizeof(float) * nw) == 0);
    }
    mm_set_precision(MM_FP32);
    free(dout);
    free(inp);
    free(w);
    free(di0);
    free(di1);
    free(dw0);
    free(dw1);
    free(db0);
    free(db1);
}
END_TEST

START_TEST(test_gelu_backward_set_bits) {
    const size_t n = 3 * 4096 + 21; // several parallel chunks and a scalar tail
    Rng r;
    rng_seed(&r, 12);
    float *x = allocFloats(n), *dy = allocFloats(n), *d0 = allocFloats(n), *d1 = allocFloats(n);
    for (size_t i = 0; i < n; i++) {
        x[i] = 6.0f * rng_uniform(&r) - 3.0f;
        dy[i] = 2.0f * rng_uniform(&r) - 1.0f;
        if (i % 7 == 0) { // gelu'(1) > 0 times -0: the product is -0, the accumulated result +0
            x[i] = 1.0f;
            dy[i] = -0.0f;
        }
    }
    memset(d0, 0, sizeof(float) * n);
    gelu_backward(d0, x, dy, n);
    fill_nan(d1, n);
    gelu_backward_set(d1, x, dy, n);
    ck_assert(memcmp(d0, d1, sizeof(float) * n) == 0);
    ck_assert(!signbit(d1[0]) && d1[0] == 0.0f && d1[1] != 0.0f);
    free(x);
    free(dy);
    free(d0);
    free(d1);
}
END_TEST

// the fused bf16 cross-entropy backward == bf16_from_float of each fp32 value, with V not a
// multiple of 16 or of the span and padded entries
START_TEST(test_crossentropy_backward_bf16_bits) {
    const int N = 5, V = 2500 + 7, Vp = 2560;
    Rng r;
    rng_seed(&r, 13);
    float *z = allocFloats((size_t)N * Vp), *lse = allocFloats(N), *d = allocFloats((size_t)N * Vp);
    bf16* h = mallocCheck(sizeof(bf16) * (size_t)N * Vp);
    fill_uniform(z, (size_t)N * Vp, -4.0f, 4.0f, &r);
    int tg[5] = {0, V - 1, 1023, 1024, 2047};
    crossentropy_forward(d, lse, z, tg, N, V, Vp);
    crossentropy_backward(d, z, lse, tg, 0.3f, N, V, Vp);
    memset(h, 0xff, sizeof(bf16) * (size_t)N * Vp);
    crossentropy_backward_bf16(h, z, lse, tg, 0.3f, N, V, Vp);
    for (size_t i = 0; i < (size_t)N * Vp; i++)
        ck_assert_msg(h[i] == bf16_from_float(d[i]), "element %zu: %04x vs %04x", i, h[i],
                      bf16_from_float(d[i]));
    ck_assert(d[(size_t)1 * Vp + V - 1] < 0.0f && d[V] == 0.0f); // the target, a padded entry
    free(z);
    free(lse);
    free(d);
    free(h);
}
END_TEST

// ---- the model step

enum { GB = 2, GT = 16, GACC = 3 };

typedef struct {
    GPT2* m;
    int active;
} FakeRank;

// A rank that receives the running sum of segments 1, 3, ...: fills them with a fixed pattern
// at phase 0 and reports it.
static int fake_hook(void* ctx, int seg, int phase) {
    FakeRank* f = ctx;
    if (!f->active || phase != 0 || seg % 2 == 0) return 0;
    size_t off[GPT2_MAX_SPECS], len[GPT2_MAX_SPECS];
    int n = gpt2_segment_slices(f->m, seg, off, len);
    for (int s = 0; s < n; s++)
        for (size_t i = 0; i < len[s]; i++)
            f->m->grads[off[s] + i] = 1e-3f * (float)((int)((off[s] + i) % 17) - 8);
    return 1;
}

// One optimizer step's gradient: accum micro-batches after gpt2_zero_grad. memset_path: the old
// way, every gradient zeroed and every matmul accumulating; else the buffer is NaN-filled first
// (nothing stale may survive).
static void step_grads(GPT2* m, const int* in, const int* tg, int accum, int memset_path) {
    if (!memset_path) fill_nan(m->grads, m->num_params);
    gpt2_zero_grad(m);
    if (memset_path) {
        memset(m->grads, 0, sizeof(float) * m->num_params);
        m->grads_fresh = 0;
    }
    for (int k = 0; k < accum; k++) {
        gpt2_forward(m, in + k * GB * GT, tg + k * GB * GT, GB, GT);
        gpt2_backward(m, 1.0f / (float)accum);
    }
}

static const char* const ATTN[] = {"softmax", "0:ssmax,1:gated"};

// _i: precision (3) x grad_accum {1, 3} x attention (2) x hook {off, on}
START_TEST(test_step_grads_equal_memset_path) {
    MMPrecision p[3];
    int np = precisions(p);
    const int pi = _i % 3, accum = (_i / 3) % 2 ? GACC : 1, ai = (_i / 6) % 2, hook = _i / 12;
    if (pi >= np) return; // bf16 where it is not native (reported by native())
    Config c;
    test_tiny_config(&c, 300, 2, 4, 64, GT);
    util_strlcpy(c.attention, ATTN[ai], sizeof(c.attention));
    GPT2 m;
    test_build_model(&m, &c, GB, GT, 21);
    gpt2_set_precision(&m, p[pi]);
    FakeRank f = {.m = &m, .active = 1};
    if (hook) {
        m.grad_hook = fake_hook;
        m.grad_hook_ctx = &f;
    }
    int owned = 0;
    for (int i = 0; i < m.nspecs; i++)
        owned += m.specs[i].variant_owned && m.specs[i].size > 0;
    ck_assert_int_eq(owned > 0, ai == 1); // the variant case has parameters of its own
    Rng r;
    rng_seed(&r, 22 + (uint64_t)_i);
    int in[GACC * GB * GT], tg[GACC * GB * GT];
    test_random_tokens(in, GACC * GB * GT, 300, &r);
    test_random_tokens(tg, GACC * GB * GT, 300, &r);
    const size_t n = m.num_params;
    float* ref = allocFloats(n);
    step_grads(&m, in, tg, accum, 1);
    memcpy(ref, m.grads, sizeof(float) * n);
    for (int rep = 0; rep < 2; rep++) { // twice: the second step starts from a used buffer
        step_grads(&m, in, tg, accum, 0);
        for (int i = 0; i < m.nspecs; i++) {
            const ParamSpec* s = &m.specs[i];
            ck_assert_msg(memcmp(ref + s->offset, m.grads + s->offset, sizeof(float) * s->size) ==
                              0,
                          "%s, %s, grad_accum %d, hook %d: gradient of %s differs",
                          mm_precision_name(p[pi]), ATTN[ai], accum, hook, s->name);
        }
    }
    // the weight-gradient matmuls' tensors hold real gradients (not zeros passed as equal)
    for (int i = 0; i < m.nspecs; i++) {
        const ParamSpec* s = &m.specs[i];
        if (!s->mm_grad || s->size == 0) continue;
        size_t nz = 0;
        for (size_t k = 0; k < s->size; k++)
            nz += ref[s->offset + k] != 0.0f;
        ck_assert_msg(nz > s->size / 4, "%s: only %zu of %zu nonzero", s->name, nz, s->size);
    }
    free(ref);
    gpt2_set_precision(&m, MM_FP32);
    gpt2_free(&m);
}
END_TEST

static Suite* grad_overwrite_suite(void) {
    Suite* s = suite_create("grad_overwrite");
    TCase* tc = tcase_create("kernels");
    tcase_add_test(tc, test_matmul_overwrite_bits);
    tcase_add_test(tc, test_gelu_backward_set_bits);
    tcase_add_test(tc, test_crossentropy_backward_bf16_bits);
    suite_add_tcase(s, tc);
    TCase* tm = tcase_create("model");
    tcase_set_timeout(tm, 120);
    tcase_add_loop_test(tm, test_step_grads_equal_memset_path, 0, 24);
    suite_add_tcase(s, tm);
    return s;
}

TEST_MAIN(grad_overwrite_suite)
