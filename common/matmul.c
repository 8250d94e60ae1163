// common/matmul.c: the matmul kernel layer (see matmul.h): GEMM on strided views in fp32, bf16
// (oneDNN) or the bf16 reference, and the linear layer's forward and backward on fixed blocks.
#include "common/matmul.h"

#include <cblas.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dnnl_mm.h"
#include "common/portable.h"
#include "common/prof.h"
#include "common/util.h"

static MMPrecision g_prec = MM_FP32;

// ---------------------------------------------------------------------------------------------
// per-thread scratch: operands rounded to bf16 (A, B of mm_gemm; the linear layer's activations
// X0, X1 and an unregistered weight W, converted once by the calling thread and read by all), and
// the reference path's fp32 expansions (RA, RB), dense copies for oneDNN (DA, DB, C).

enum { BUF_A, BUF_B, BUF_X0, BUF_X1, BUF_W, BUF_RA, BUF_RB, BUF_DA, BUF_DB, BUF_C, NBUF };
static _Thread_local void* tl_buf[NBUF];
static _Thread_local size_t tl_cap[NBUF];

static size_t tl_grown(size_t bytes) { // capacity a request of `bytes` allocates
    return bytes + bytes / 4;
}

static void* tl_get(int slot, size_t bytes) {
    if (bytes > tl_cap[slot]) {
        free(tl_buf[slot]);
        tl_cap[slot] = tl_grown(bytes);
        tl_buf[slot] = mallocCheck(tl_cap[slot]);
    }
    return tl_buf[slot];
}

size_t mm_linear_reserve_bytes(size_t x0, size_t x1) {
    return tl_grown(sizeof(bf16) * x0) + tl_grown(sizeof(bf16) * x1);
}

void mm_thread_scratch_free(void) {
    for (int i = 0; i < NBUF; i++) {
        free(tl_buf[i]);
        tl_buf[i] = NULL;
        tl_cap[i] = 0;
    }
}

void mm_linear_reserve(size_t x0, size_t x1) {
    tl_get(BUF_X0, sizeof(bf16) * x0);
    tl_get(BUF_X1, sizeof(bf16) * x1);
}

// ---------------------------------------------------------------------------------------------
// registered bf16 copies

static struct {
    const float* base;
    size_t n;
    const bf16* copy;
} reg[MM_MAX_REGISTERED];

void mm_bf16_register(const float* base, size_t n, const bf16* copy) {
    mm_bf16_unregister(base);
    for (int i = 0; i < MM_MAX_REGISTERED; i++) {
        if (!reg[i].base) {
            reg[i].base = base;
            reg[i].n = n;
            reg[i].copy = copy;
            return;
        }
    }
    die(1, "matmul: more than %d registered bf16 weight copies", MM_MAX_REGISTERED);
}

void mm_bf16_unregister(const float* base) {
    for (int i = 0; i < MM_MAX_REGISTERED; i++)
        if (reg[i].base == base) reg[i].base = NULL;
}

static const bf16* copy_of(const float* p) {
    for (int i = 0; i < MM_MAX_REGISTERED; i++)
        if (reg[i].base && p >= reg[i].base && p < reg[i].base + reg[i].n)
            return reg[i].copy + (p - reg[i].base);
    return NULL;
}

// Operand `p`, a strided (rows, cols) view with row stride *ld, as bf16: the registered copy (same
// strides), else rounded into the thread's scratch `slot` (dense: *ld becomes cols).
static const bf16* as_bf16(const float* p, int rows, int cols, int* ld, int slot) {
    const bf16* c = copy_of(p);
    if (c) return c;
    bf16* buf = tl_get(slot, sizeof(bf16) * (size_t)rows * (size_t)cols);
    bf16_pack_rows(buf, p, rows, cols, *ld);
    *ld = cols;
    return buf;
}

// ---------------------------------------------------------------------------------------------
// GEMM

static void sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float* A,
                  int lda, const float* B, int ldb, float beta, float* C, int ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static const float* expand(const bf16* p, int rows, int cols, int ld, int slot) {
    float* buf = tl_get(slot, sizeof(float) * (size_t)rows * (size_t)cols);
    for (int r = 0; r < rows; r++)
        bf16_to_floats(buf + (size_t)r * cols, p + (size_t)r * ld, (size_t)cols);
    return buf;
}

// A strided bf16 view (rows, cols, row stride ld) as a dense one: itself when ld == cols, else
// copied into the thread's scratch `slot`.
static const bf16* densify(const bf16* p, int rows, int cols, int ld, int slot) {
    if (ld == cols) return p;
    bf16* buf = tl_get(slot, sizeof(bf16) * (size_t)rows * (size_t)cols);
    for (int r = 0; r < rows; r++)
        memcpy(buf + (size_t)r * cols, p + (size_t)r * ld, sizeof(bf16) * (size_t)cols);
    return buf;
}

// out (rows,ld)[:, 0:n] += bias[0:n] on every row; restrict tells the compiler that the two never
// overlap, so bias stays in registers instead of being reloaded after every store.
static void bias_add(float* restrict out, const float* restrict bias, int rows, int ld, int n) {
    for (int r = 0; r < rows; r++) {
        float* o = out + (size_t)r * ld;
        for (int j = 0; j < n; j++)
            o[j] += bias[j];
    }
}

// oneDNN 2.6 picks its AMX / AVX512-BF16 kernels (brg:) only for dense matrices; on strided ones
// it falls back to gemm:jit, which is emulated on CPUs without bf16. So operands are made dense
// first (a copy of the block, small next to the product), and a strided C is computed densely
// and merged: C = T + beta C with T = alpha op(A) op(B). A bias (N floats, or NULL; only with
// beta = 0, as the forward calls it) is then added to every row of C; in a merge it is added in
// the merge itself (c = t + bias, the same rounding as copying t and adding the bias after),
// which saves the block a pass.
static int dnnl_dense(int ta, int tb, int M, int N, int K, float alpha, const bf16* A, int lda,
                      const bf16* B, int ldb, float beta, float* C, int ldc, const float* bias) {
    ASSERT(!bias || beta == 0.0f);
    const int ac = ta ? M : K, bc = tb ? K : N;
    const bf16* Ad = densify(A, ta ? K : M, ac, lda, BUF_DA);
    const bf16* Bd = densify(B, tb ? N : K, bc, ldb, BUF_DB);
    if (ldc == N) {
        if (dnnl_mm_gemm(ta, tb, M, N, K, alpha, Ad, ac, Bd, bc, beta, C, ldc)) return -1;
        if (bias) bias_add(C, bias, M, ldc, N);
        return 0;
    }
    float* T = tl_get(BUF_C, sizeof(float) * (size_t)M * (size_t)N);
    if (dnnl_mm_gemm(ta, tb, M, N, K, alpha, Ad, ac, Bd, bc, 0.0f, T, N)) return -1;
    for (int r = 0; r < M; r++) {
        float* restrict c = C + (size_t)r * ldc;
        const float* restrict t = T + (size_t)r * N;
        if (bias)
            for (int j = 0; j < N; j++)
                c[j] = t[j] + bias[j];
        else if (beta == 0.0f)
            memcpy(c, t, sizeof(float) * (size_t)N);
        else
            for (int j = 0; j < N; j++)
                c[j] = t[j] + beta * c[j];
    }
    return 0;
}

// The same with bf16 operands, in the current bf16 precision (bf16: oneDNN, falling back to the
// reference for a shape oneDNN has no native kernel for; bf16_ref or fp32: the reference), and
// bias (N floats, or NULL; beta = 0 then) added to every row of C after the product.
static void mm_gemm_bf16_bias(int trans_a, int trans_b, int M, int N, int K, float alpha,
                              const bf16* A, int lda, const bf16* B, int ldb, float beta, float* C,
                              int ldc, const float* bias) {
    if (M <= 0 || N <= 0) return;
    if (g_prec == MM_BF16 && K > 0 &&
        dnnl_dense(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias) == 0)
        return;
    // reference: the bf16 values exactly in fp32, then sgemm
    const int ar = trans_a ? K : M, ac = trans_a ? M : K;
    const int br = trans_b ? N : K, bc = trans_b ? K : N;
    const float* Af = expand(A, ar, ac, lda, BUF_RA);
    const float* Bf = expand(B, br, bc, ldb, BUF_RB);
    sgemm(trans_a, trans_b, M, N, K, alpha, Af, ac, Bf, bc, beta, C, ldc);
    if (bias) bias_add(C, bias, M, ldc, N);
}

static void mm_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha, const bf16* A,
                         int lda, const bf16* B, int ldb, float beta, float* C, int ldc) {
    mm_gemm_bf16_bias(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL);
}

void mm_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float* A, int lda,
             const float* B, int ldb, float beta, float* C, int ldc) {
    if (g_prec == MM_FP32) {
        sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    const bf16* Ab = as_bf16(A, trans_a ? K : M, trans_a ? M : K, &lda, BUF_A);
    const bf16* Bb = as_bf16(B, trans_b ? N : K, trans_b ? K : N, &ldb, BUF_B);
    mm_gemm_bf16(trans_a, trans_b, M, N, K, alpha, Ab, lda, Bb, ldb, beta, C, ldc);
}

void mm_init_threads(void) {
    openblas_set_num_threads(1);
}

// ---------------------------------------------------------------------------------------------
// precision

void mm_set_precision(MMPrecision p) {
    g_prec = p;
}

static MMPrecision mm_precision(void) {
    return g_prec;
}

static const char* const MM_PRECISION_NAMES[MM_PRECISION_COUNT] = {
    [MM_FP32] = "fp32",
    [MM_BF16] = "bf16",
    [MM_BF16_REF] = "bf16_ref",
};

const char* mm_precision_name(MMPrecision p) {
    return (int)p >= 0 && p < MM_PRECISION_COUNT ? MM_PRECISION_NAMES[p] : NULL;
}

int mm_precision_from_name(const char* name) {
    for (int p = 0; p < MM_PRECISION_COUNT; p++)
        if (MM_PRECISION_NAMES[p] && strcmp(name, MM_PRECISION_NAMES[p]) == 0) return p;
    return -1;
}

#ifndef ATTNLAB_OPT
#define ATTNLAB_OPT "unknown"
#endif
#ifndef ATTNLAB_MARCH
#define ATTNLAB_MARCH "unknown"
#endif

// The build's code path, appended to every precision's description: the compiler flags (OPT of
// the Makefile) with the -march they resolve to on the building machine, and OpenBLAS's sgemm
// kernel (its core type, chosen per CPU at start-up or by OPENBLAS_CORETYPE). Two runs of one
// config are bit-identical where this text, the precision and the thread count are
// (docs/ablations.md, "Reruns across machines").
static void add_code_path(char* info, size_t infocap) {
    size_t n = strlen(info);
    const char* core = openblas_get_corename();
    if (n < infocap)
        snprintf(info + n, infocap - n, "; OpenBLAS core %s; compiled %s (-march = %s)%s",
                 core && *core ? core : "unknown", ATTNLAB_OPT, ATTNLAB_MARCH, portable_note());
}

static int resolve_precision(const char* want, MMPrecision* out, char* info, size_t infocap,
                             char* err, size_t errcap);

int mm_resolve_precision(const char* want, MMPrecision* out, char* info, size_t infocap, char* err,
                         size_t errcap) {
    int rc = resolve_precision(want, out, info, infocap, err, errcap);
    if (rc == 0) add_code_path(info, infocap);
    return rc;
}

static int resolve_precision(const char* want, MMPrecision* out, char* info, size_t infocap,
                             char* err, size_t errcap) {
    const int named = mm_precision_from_name(want), automatic = !strcmp(want, MM_PRECISION_AUTO);
    if (named == MM_FP32) {
        *out = MM_FP32;
        snprintf(info, infocap, "%s (OpenBLAS sgemm)", want);
        return 0;
    }
    if (named == MM_BF16_REF) {
        *out = MM_BF16_REF;
        snprintf(info, infocap, "%s (operands rounded to bf16, OpenBLAS sgemm)", want);
        return 0;
    }
    if (named != MM_BF16 && !automatic) {
        snprintf(err, errcap, "key 'precision': unknown precision '%s' (%s, %s, %s, %s)", want,
                 mm_precision_name(MM_FP32), mm_precision_name(MM_BF16), MM_PRECISION_AUTO,
                 mm_precision_name(MM_BF16_REF));
        return -1;
    }
    char impl[256], why[512];
    int native = dnnl_mm_probe(impl, sizeof(impl), why, sizeof(why));
    if (native) {
        *out = MM_BF16;
        snprintf(info, infocap, "%s (%soneDNN %s)", mm_precision_name(MM_BF16),
                 automatic ? MM_PRECISION_AUTO ": " : "", impl);
        return 0;
    }
    if (automatic) {
        *out = MM_FP32;
        snprintf(info, infocap,
                 "%s (" MM_PRECISION_AUTO ": no native bf16 matmul; oneDNN would use %s)",
                 mm_precision_name(MM_FP32), impl);
        return 0;
    }
    snprintf(err, errcap, "key 'precision' = bf16: %s; set precision = fp32 (or auto)", why);
    return -1;
}

// ---------------------------------------------------------------------------------------------
// The linear layer on fixed blocks. OpenMP threads each call the GEMM on fixed blocks of output
// columns (forward, dinp) or rows (dweight). The block size depends only on the matrix shape,
// never on the thread count: a GEMM's result for an element depends on how the call is sliced,
// so fixed blocks are what make results identical for any number of threads. Blocks of 128 (64
// for narrow or odd-count dimensions, for load balance) cost 2-4% against one whole call,
// measured on GPT-2 shapes. In bf16 the activations are rounded once per call by the calling
// thread (not once per block), or
// come already rounded from the caller (the _h calls), and the weight comes from its registered
// bf16 copy.

static int mm_block(int dim) {
    int nb = dim / 128;
    return (nb >= 8 || (nb > 0 && nb % 2 == 0 && dim % 128 == 0)) ? 128 : 64;
}

// One operand, fp32 or bf16 (exactly one of f, h is set); gemm_blk offsets it by `off`.
typedef struct {
    const float* f;
    const bf16* h;
} Opnd;

static Opnd opnd(const float* p, int rows, int cols, int slot) {
    Opnd o = {p, NULL};
    if (g_prec != MM_FP32) {
        const int pp = prof_begin(PROF_CAST); // the step profile (common/prof.h)
        int ld = cols;
        o.h = as_bf16(p, rows, cols, &ld, slot);
        o.f = NULL;
        prof_end(pp);
    }
    return o;
}

// The operand inp of a linear layer: its caller's rounding inp_h where given (bf16 precisions).
static Opnd opnd_h(const float* p, const bf16* h, int rows, int cols, int slot) {
    if (g_prec == MM_FP32 || !h) return opnd(p, rows, cols, slot);
    return (Opnd){NULL, h};
}

// C = op(A) op(B) + beta C, then bias (N floats, or NULL) added to every row of C.
static void gemm_blk(int ta, int tb, int M, int N, int K, Opnd A, size_t aoff, int lda, Opnd B,
                     size_t boff, int ldb, float beta, float* C, int ldc, const float* bias) {
    if (A.h) {
        mm_gemm_bf16_bias(ta, tb, M, N, K, 1.0f, A.h + aoff, lda, B.h + boff, ldb, beta, C, ldc,
                          bias);
    } else {
        sgemm(ta, tb, M, N, K, 1.0f, A.f + aoff, lda, B.f + boff, ldb, beta, C, ldc);
        if (bias) bias_add(C, bias, M, ldc, N);
    }
}

// dbias[lo:hi] += the column sums of dout (N,OC)[:, lo:hi], rows added in order: the same sums,
// bit for bit, as adding row by row into dbias, but kept in a local accumulator, which the
// compiler holds in place (it cannot know that dbias and dout never overlap): 2.3x faster than
// the row-by-row form on a cold GPT-2 MLP gradient (docs/performance.md).
static void colsum_add(float* restrict dbias, const float* restrict dout, int N, int OC, int lo,
                       int hi) {
    enum { CW = 128 }; // a block is at most 128 columns (mm_block)
    for (int j0 = lo; j0 < hi; j0 += CW) {
        const int w = hi - j0 < CW ? hi - j0 : CW;
        float acc[CW];
        for (int j = 0; j < w; j++)
            acc[j] = dbias[j0 + j];
        for (int r = 0; r < N; r++) {
            const float* d = dout + (size_t)r * OC + j0;
            for (int j = 0; j < w; j++)
                acc[j] += d[j];
        }
        for (int j = 0; j < w; j++)
            dbias[j0 + j] = acc[j];
    }
}

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC) {
    matmul_forward_h(out, inp, NULL, weight, bias, N, C, OC);
}

void matmul_forward_h(float* out, const float* inp, const bf16* inp_h, const float* weight,
                      const float* bias, int N, int C, int OC) {
    const int bs = mm_block(OC), nblk = (OC + bs - 1) / bs;
    const Opnd X = opnd_h(inp, inp_h, N, C, BUF_X0), W = opnd(weight, OC, C, BUF_W);
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        int lo = blk * bs, hi = lo + bs < OC ? lo + bs : OC;
        gemm_blk(0, 1, N, hi - lo, C, X, 0, C, W, (size_t)lo * C, C, 0.0f, out + lo, OC,
                 bias ? bias + lo : NULL);
    }
}

void matmul_backward_to(float* dinp, MMWrite dinp_w, float* dweight, MMWrite dweight_w,
                        float* dbias, const float* dout, const float* inp, const float* weight,
                        int N, int C, int OC) {
    matmul_backward_to_h(dinp, dinp_w, dweight, dweight_w, dbias, dout, NULL, inp, NULL, weight, N,
                         C, OC);
}

void matmul_backward_to_h(float* dinp, MMWrite dinp_w, float* dweight, MMWrite dweight_w,
                          float* dbias, const float* dout, const bf16* dout_h, const float* inp,
                          const bf16* inp_h, const float* weight, int N, int C, int OC) {
    const Opnd D = opnd_h(dout, dout_h, N, OC, BUF_X0);
    if (dinp) { // dinp[:, lo:hi] (+)= dout @ weight[:, lo:hi]
        const Opnd W = opnd(weight, OC, C, BUF_W);
        const int bs = mm_block(C), nblk = (C + bs - 1) / bs;
        const float beta = dinp_w == MM_OVERWRITE ? 0.0f : 1.0f;
#pragma omp parallel for schedule(static)
        for (int blk = 0; blk < nblk; blk++) {
            int lo = blk * bs, hi = lo + bs < C ? lo + bs : C;
            gemm_blk(0, 0, N, hi - lo, OC, D, 0, OC, W, (size_t)lo, C, beta, dinp + lo, C, NULL);
        }
    }
    if (!dweight) return; // the input gradient only (dbias then must be NULL too)
    // dweight[lo:hi, :] (+)= dout[:, lo:hi]^T @ inp ; dbias[lo:hi] += column sums
    const Opnd X = opnd_h(inp, inp_h, N, C, BUF_X1);
    const int bs = mm_block(OC), nblk = (OC + bs - 1) / bs;
    const float beta = dweight_w == MM_OVERWRITE ? 0.0f : 1.0f;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        int lo = blk * bs, hi = lo + bs < OC ? lo + bs : OC;
        gemm_blk(1, 0, hi - lo, C, N, D, (size_t)lo, OC, X, 0, C, beta, dweight + (size_t)lo * C, C,
                 NULL);
        if (dbias) colsum_add(dbias, dout, N, OC, lo, hi);
    }
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC) {
    matmul_backward_to(dinp, MM_ACCUMULATE, dweight, MM_ACCUMULATE, dbias, dout, inp, weight, N, C,
                       OC);
}

// ---------------------------------------------------------------------------------------------
// measured peak (matmul.h)

// The trial's threads are pinned one to a CPU for its duration, each to a different CPU of the
// calling thread's affinity mask, and given their own mask back after it. Unpinned, Linux can
// leave two short-lived threads on one CPU for a whole measurement, so they run one after the
// other: on a 2-vCPU VM about one process in two measured 135 instead of 300 GFLOP/s (sgemm) and
// 140 instead of 720 (bf16), the threads found on the same CPU. Without enough CPUs in the mask
// (fewer than nthreads), the threads are left as they are.
typedef struct {
    int n;       // CPUs in the calling thread's mask
    int cpu[64]; // the first of them, in order
} PinSet;

static void pin_set_of_caller(PinSet* ps) {
    cpu_set_t m;
    ps->n = 0;
    if (sched_getaffinity(0, sizeof(m), &m)) return;
    for (int c = 0; c < CPU_SETSIZE && ps->n < 64; c++)
        if (CPU_ISSET(c, &m)) ps->cpu[ps->n++] = c;
}

// Pin the calling thread to ps's CPU number `slot`, saving its mask in *saved; 1 when pinned.
static int pin_thread(const PinSet* ps, int slot, cpu_set_t* saved) {
    if (slot >= ps->n || sched_getaffinity(0, sizeof(*saved), saved)) return 0;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(ps->cpu[slot], &one);
    return sched_setaffinity(0, sizeof(one), &one) == 0;
}

static int g_trial_cpu[64]; // the CPU each thread of the last trial ended on (tests)

int mm_peak_trial_cpu(int thread) {
    return thread >= 0 && thread < 64 ? g_trial_cpu[thread] : -1;
}

static void unpin_thread(int pinned, const cpu_set_t* saved) {
    if (pinned && sched_setaffinity(0, sizeof(*saved), saved))
        die(1, "cannot restore a thread's CPU affinity after the peak trial");
}

double mm_measure_peak_trials(int nthreads, int trials, double* rates) {
    const int n = 512;
    PinSet ps;
    pin_set_of_caller(&ps);
    if (ps.n < nthreads) ps.n = 0; // not one CPU a thread: leave them to the scheduler
    const size_t nn = (size_t)n * n;
    float* a = allocFloats((size_t)nthreads * nn);
    float* b = allocFloats((size_t)nthreads * nn);
    float* c = allocFloats((size_t)nthreads * nn);
    bf16* ah = mallocCheck(sizeof(bf16) * (size_t)nthreads * nn);
    bf16* bh = mallocCheck(sizeof(bf16) * (size_t)nthreads * nn);
    for (size_t i = 0; i < (size_t)nthreads * nn; i++) {
        a[i] = (float)(i % 7) * 0.1f;
        b[i] = (float)(i % 5) * 0.1f;
        ah[i] = bf16_from_float(a[i]);
        bh[i] = bf16_from_float(b[i]);
    }
    const int half = mm_precision() != MM_FP32;
    double best = 0;
    for (int rep = 0; rep < trials; rep++) {
        double t0 = 0, dt = 0; // set by the master thread between the barriers
#pragma omp parallel num_threads(nthreads)
        {
            const int t = omp_get_thread_num();
            cpu_set_t saved;
            const int pinned = pin_thread(&ps, t, &saved);
#pragma omp barrier
#pragma omp master
            t0 = util_now();
            size_t o = (size_t)t * nn;
            for (int k = 0; k < 2; k++) {
                if (half)
                    mm_gemm_bf16(0, 1, n, n, n, 1.0f, ah + o, n, bh + o, n, 0.0f, c + o, n);
                else
                    mm_gemm(0, 1, n, n, n, 1.0f, a + o, n, b + o, n, 0.0f, c + o, n);
            }
            if (t < 64) g_trial_cpu[t] = sched_getcpu();
#pragma omp barrier
#pragma omp master
            dt = util_now() - t0;
            unpin_thread(pinned, &saved);
        }
        double f = 2.0 * 2.0 * n * n * (double)n * nthreads / dt;
        if (rep == 0) continue; // the first trial creates primitives, warms caches
        if (f > best) best = f;
        if (rates) rates[rep - 1] = f;
    }
    free(a);
    free(b);
    free(c);
    free(ah);
    free(bh);
    return best;
}

static int cmp_double(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

int mm_print_peak(const char* precision) {
    mm_init_threads();
    char info[384] = "", err[1024];
    if (precision) {
        MMPrecision p;
        if (mm_resolve_precision(precision, &p, info, sizeof(info), err, sizeof(err)))
            die(EXIT_USAGE, "%s", err);
        mm_set_precision(p);
    }
    int nt = omp_get_max_threads();
    double r[11];
    double best = mm_measure_peak_trials(nt, 12, r);
    qsort(r, 11, sizeof(double), cmp_double);
    printf("%s peak: %.1f GFLOP/s with %d threads (best of 11 trials; median %.1f, min %.1f)%s%s\n",
           precision ? "bf16" : "sgemm", best / 1e9, nt, r[5] / 1e9, r[0] / 1e9,
           precision ? " | " : "", info);
    return 0;
}

double mm_peak_mfu(MMPeak* p, double rate, long step, FILE* log) {
    if (rate > p->flops) {
        p->flops = rate;
        if (!p->raised)
            fprintf(log,
                    "# step %ld beat the measured matmul peak: mfu is now against the "
                    "best step rate, %.1f GFLOP/s\n",
                    step, rate / 1e9);
        p->raised = 1;
    }
    return rate / p->flops;
}
