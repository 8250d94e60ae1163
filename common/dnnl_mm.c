// common/dnnl_mm.c: oneDNN matmul primitives for the bf16 kernel layer (see dnnl_mm.h).
//
// op(A) (M,K) bf16 and op(B) (K,N) bf16 are described to oneDNN as strided 2-D memory (a
// transposed view is the same storage with its strides swapped), C (M,N) fp32 with row stride
// ldc. alpha is the primitive's output scale, beta a sum post-op, so one call computes
// C = alpha op(A) op(B) + beta C with fp32 accumulation. The scratchpad is user-managed (one
// buffer per thread) so any number of threads can execute the cached primitives at once.
#include "common/dnnl_mm.h"

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc;
    float alpha, beta;
} MMKey;

typedef struct {
    MMKey key;
    int used;
    int native; // 0: oneDNN would use a non-native kernel for this shape
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a, b, c, scratch;
    size_t scratch_bytes;
} MMEntry;

#define MM_CACHE 4096 // open addressing; GPT-2 training uses a few dozen shapes

static MMEntry cache[MM_CACHE];
static long n_created;
static dnnl_engine_t engine;
static int engine_ok = -1; // -1 not tried, 0 failed, 1 ready

static _Thread_local dnnl_stream_t tl_stream;
static _Thread_local void* tl_scratch;
static _Thread_local size_t tl_scratch_cap;

static int engine_ready(void) {
    int ok;
#pragma omp critical(attnlab_dnnl)
    {
        if (engine_ok < 0) engine_ok = dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success;
        ok = engine_ok;
    }
    return ok;
}

static uint64_t key_hash(const MMKey* k) {
    uint64_t h = 1469598103934665603ULL;
    const unsigned char* p = (const unsigned char*)k;
    for (size_t i = 0; i < sizeof(*k); i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static void strided_md(dnnl_memory_desc_t* md, int rows, int cols, int trans, int ld,
                       dnnl_data_type_t dt) {
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {trans ? 1 : ld, trans ? ld : 1};
    if (dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides) != dnnl_success)
        die(1, "oneDNN: cannot describe a %dx%d matrix with stride %d", rows, cols, ld);
}

// A kernel is native when its name carries a bf16 ISA (avx512_core_bf16, avx512_core_amx_bf16,
// avx512_core_amx): the reference ("ref:") and emulated ("gemm:jit" on plain AVX-512) kernels
// do not.
static int impl_native(const char* impl) {
    return strstr(impl, "bf16") != NULL || strstr(impl, "amx") != NULL;
}

// Create the primitive for e->key with oneDNN planning for one thread (the OpenMP ICV of this
// thread is set to 1 around creation; oneDNN reads it for its work split).
static void create_entry(MMEntry* e) {
    const MMKey* k = &e->key;
    strided_md(&e->a, k->M, k->K, k->ta, k->lda, dnnl_bf16);
    strided_md(&e->b, k->K, k->N, k->tb, k->ldb, dnnl_bf16);
    strided_md(&e->c, k->M, k->N, 0, k->ldc, dnnl_f32);
    dnnl_matmul_desc_t md;
    if (dnnl_matmul_desc_init(&md, &e->a, &e->b, NULL, &e->c) != dnnl_success)
        die(1, "oneDNN: cannot describe matmul M=%d N=%d K=%d", k->M, k->N, k->K);
    dnnl_primitive_attr_t attr;
    dnnl_primitive_attr_create(&attr);
    dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (k->alpha != 1.0f) dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha);
    if (k->beta != 0.0f) {
        dnnl_post_ops_t po;
        dnnl_post_ops_create(&po);
        dnnl_post_ops_append_sum(po, k->beta);
        dnnl_primitive_attr_set_post_ops(attr, po);
        dnnl_post_ops_destroy(po);
    }
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    dnnl_primitive_desc_t pd;
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &md, attr, engine, NULL);
    omp_set_num_threads(saved);
    dnnl_primitive_attr_destroy(attr);
    e->native = 0;
    e->prim = NULL;
    if (st != dnnl_success) return;
    const char* impl = "";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    if (impl_native(impl)) {
        e->native = 1;
        e->scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        e->scratch_bytes = dnnl_memory_desc_get_size(&e->scratch);
        saved = omp_get_max_threads();
        omp_set_num_threads(1);
        if (dnnl_primitive_create(&e->prim, pd) != dnnl_success) e->native = 0;
        omp_set_num_threads(saved);
        n_created++;
    }
    dnnl_primitive_desc_destroy(pd);
}

static MMEntry* lookup(const MMKey* k) {
    MMEntry* found = NULL;
    size_t h = (size_t)(key_hash(k) % MM_CACHE);
#pragma omp critical(attnlab_dnnl)
    {
        for (size_t probe = 0; probe < MM_CACHE; probe++) {
            MMEntry* e = &cache[(h + probe) % MM_CACHE];
            if (!e->used) {
                e->key = *k;
                create_entry(e);
                e->used = 1;
                found = e;
                break;
            }
            if (memcmp(&e->key, k, sizeof(*k)) == 0) {
                found = e;
                break;
            }
        }
    }
    if (!found) die(1, "oneDNN: more than %d matmul shapes", MM_CACHE);
    return found;
}

int dnnl_mm_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const bf16* A, int lda,
                 const bf16* B, int ldb, float beta, float* C, int ldc) {
    if (!engine_ready()) return -1;
    MMKey k;
    memset(&k, 0, sizeof(k)); // the key is hashed and compared bytewise
    k.ta = trans_a;
    k.tb = trans_b;
    k.M = M;
    k.N = N;
    k.K = K;
    k.lda = lda;
    k.ldb = ldb;
    k.ldc = ldc;
    k.alpha = alpha;
    k.beta = beta;
    MMEntry* e = lookup(&k);
    if (!e->native) return -1;
    if (!tl_stream && dnnl_stream_create(&tl_stream, engine, dnnl_stream_default_flags))
        die(1, "oneDNN: cannot create a stream");
    if (e->scratch_bytes > tl_scratch_cap) {
        free(tl_scratch);
        tl_scratch_cap = e->scratch_bytes;
        tl_scratch = mallocCheck(tl_scratch_cap);
    }
    dnnl_memory_t ma, mb, mc, ms = NULL;
    dnnl_memory_create(&ma, &e->a, engine, (void*)A);
    dnnl_memory_create(&mb, &e->b, engine, (void*)B);
    dnnl_memory_create(&mc, &e->c, engine, C);
    dnnl_exec_arg_t args[4] = {
        {DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}, {DNNL_ARG_SCRATCHPAD, 0}};
    int nargs = 3;
    if (e->scratch_bytes) {
        dnnl_memory_create(&ms, &e->scratch, engine, tl_scratch);
        args[3].memory = ms;
        nargs = 4;
    }
    dnnl_status_t st = dnnl_primitive_execute(e->prim, tl_stream, nargs, args);
    if (st == dnnl_success) st = dnnl_stream_wait(tl_stream);
    dnnl_memory_destroy(ma);
    dnnl_memory_destroy(mb);
    dnnl_memory_destroy(mc);
    if (ms) dnnl_memory_destroy(ms);
    if (st != dnnl_success) die(1, "oneDNN: matmul M=%d N=%d K=%d failed (%d)", M, N, K, (int)st);
    return 0;
}

static const char* isa_name(dnnl_cpu_isa_t isa) {
    if ((isa & dnnl_cpu_isa_avx512_core_amx) == dnnl_cpu_isa_avx512_core_amx)
        return "avx512_core_amx";
    if ((isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16)
        return "avx512_core_bf16";
    if ((isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core) return "avx512_core";
    if ((isa & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2) return "avx2";
    return "sse41 or older";
}

int dnnl_mm_probe(char* impl, size_t implcap, char* why, size_t whycap) {
    snprintf(impl, implcap, "none");
    if (!engine_ready()) {
        snprintf(why, whycap, "oneDNN cannot create a CPU engine");
        return 0;
    }
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    // a block of the linear layer's forward at 124M: (256 x 768) @ (768 x 128)^T, dense
    dnnl_memory_desc_t a, b, c;
    strided_md(&a, 256, 768, 0, 768, dnnl_bf16);
    strided_md(&b, 768, 128, 1, 768, dnnl_bf16);
    strided_md(&c, 256, 128, 0, 128, dnnl_f32);
    dnnl_matmul_desc_t md;
    dnnl_matmul_desc_init(&md, &a, &b, NULL, &c);
    dnnl_primitive_desc_t pd;
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &md, NULL, engine, NULL);
    omp_set_num_threads(saved);
    if (st != dnnl_success) {
        snprintf(impl, implcap, "none (isa %s)", isa_name(isa));
        snprintf(why, whycap,
                 "this CPU has no native bf16 matmul: oneDNN's effective ISA is %s and it has no "
                 "bf16 matmul for it (AVX512-BF16 or AMX-BF16 is needed)",
                 isa_name(isa));
        return 0;
    }
    const char* s = "";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s);
    snprintf(impl, implcap, "%s (isa %s)", s, isa_name(isa));
    int native =
        impl_native(s) && (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
    if (!native)
        snprintf(why, whycap,
                 "this CPU has no native bf16 matmul: oneDNN's effective ISA is %s (AVX512-BF16 "
                 "or AMX-BF16 is needed) and it would run bf16 on its %s kernel",
                 isa_name(isa), s);
    dnnl_primitive_desc_destroy(pd);
    return native;
}

long dnnl_mm_primitives_created(void) {
    return n_created;
}
