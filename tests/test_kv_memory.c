// tests/test_kv_memory.c: the memory of the key/value cache (model/kv_cache.h) in what generation
// reports.
//   - kv_cache_model_bytes equals the bytes kv_cache_new hands out (the checked allocators' own
//     tally, util_alloc_total), and that number is the cache's layout: keys and values (n_layer,
//     T, n_embd) each, the query (n_embd), the rotated keys (T, n_embd) under xpos and the
//     attention scratch of the largest row map (attn_decode_scratch_floats), each buffer as
//     real_alloc rounds it, plus the struct; for softmax and entmax (a row map with scratch),
//     under learned, rope and xpos, 1 and 3 threads;
//   - ./generate --verbose prints the cache of block_size positions with exactly the bytes
//     kv_cache_new takes for that model, a total that adds up its parts, and no cache with
//     --no-cache.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "attention/attention.h"
#include "common/util.h"
#include "model/checkpoint.h"
#include "model/gpt2.h"
#include "model/kv_cache.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

// The cache's floats as its layout describes them (model/kv_store.c, struct KVCache), each
// buffer rounded as util_floats_bytes rounds an allocation; the struct itself not included.
static double layout_bytes(const GPT2* m, int T, int nthreads) {
    const size_t L = (size_t)m->cfg.n_layer, C = (size_t)m->cfg.n_embd, Tz = (size_t)T;
    const size_t per_real = sizeof(real) / sizeof(float);
    size_t scratch = 0;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        size_t s = attn_decode_scratch_floats(m->la[l].row, T, m->cfg.n_head, nthreads);
        if (s > scratch) scratch = s;
    }
    double b = 0;
    b += 2.0 * (double)util_floats_bytes(L * Tz * C * per_real); // keys, values
    b += (double)util_floats_bytes(C * per_real);                // the query
    if (m->cfg.pos_encoding == ATTN_POS_XPOS) b += (double)util_floats_bytes(Tz * C * per_real);
    b += (double)util_floats_bytes(scratch * per_real);
    return b;
}

// Bytes kv_cache_new(m, T) allocates, by the allocators' tally.
static double measured_bytes(GPT2* m, int T) {
    const size_t before = util_alloc_total();
    KVCache* kv = kv_cache_new(m, T);
    const size_t after = util_alloc_total();
    kv_cache_free(kv);
    return (double)(after - before);
}

START_TEST(test_kv_cache_bytes_is_what_is_allocated) {
    const char* att[] = {"softmax", "entmax"};
    const char* pos[] = {"learned", "rope", "xpos"};
    const int threads[] = {1, 3};
    int checked = 0;
    for (int a = 0; a < 2; a++)
        for (int p = 0; p < 3; p++)
            for (int t = 0; t < 2; t++) {
                Config c;
                test_tiny_config(&c, 64, 3, 4, 32, 20);
                util_strlcpy(c.attention, att[a], sizeof(c.attention));
                util_strlcpy(c.pos_encoding, pos[p], sizeof(c.pos_encoding));
                GPT2 m;
                test_build_model_threads(&m, &c, 1, 20, threads[t], 5);
                char why[256];
                if (!kv_cache_supported(&m, why, sizeof(why))) {
                    gpt2_free(&m);
                    continue;
                }
                for (int T = 7; T <= 20; T += 13) {
                    const double est = kv_cache_model_bytes(&m, T);
                    const double got = measured_bytes(&m, T);
                    const double lay = layout_bytes(&m, T, threads[t]);
                    ck_assert_msg(est == got,
                                  "%s %s %d threads T=%d: estimate %.0f, allocated %.0f", att[a],
                                  pos[p], threads[t], T, est, got);
                    // beyond the buffers only the struct: seven ints and five pointers
                    const double head = est - lay;
                    ck_assert_msg(head >= 7 * sizeof(int) + 5 * sizeof(void*) && head <= 128,
                                  "%s %s: %.0f bytes beyond the layout's %.0f", att[a], pos[p],
                                  head, lay);
                    checked++;
                }
                gpt2_free(&m);
            }
    ck_assert_int_eq(checked, 2 * 3 * 2 * 2); // both variants cache under every encoding here
}
END_TEST

#define GV  257 // the byte tokenizer
#define GL  3
#define GNH 4
#define GC  32
#define GT  48

static void gen_config(Config* c, const char* pos) {
    test_tiny_config(c, GV, GL, GNH, GC, GT);
    util_strlcpy(c->tokenizer, "byte", sizeof(c->tokenizer));
    util_strlcpy(c->pos_encoding, pos, sizeof(c->pos_encoding));
}

// One scratch folder for the suite (test_tmpdir makes a new one on every call).
static const char* tmp(void) {
    static char dir[600];
    if (!dir[0]) util_strlcpy(dir, test_tmpdir(), sizeof(dir));
    return dir;
}

// ./generate's stderr for the checkpoint ck with options opts (one thread); fails unless exit 0.
static void generate_stderr(const char* ck, const char* opts, char* errtext, size_t cap) {
    char cmd[4096], ep[1200];
    snprintf(ep, sizeof(ep), "%s/kvmem_stderr.txt", tmp());
    snprintf(cmd, sizeof(cmd), "OMP_NUM_THREADS=1 %s/generate --checkpoint %s %s >/dev/null 2>%s",
             test_build_dir(), ck, opts, ep);
    const int st = system(cmd);
    FILE* f = fopen(ep, "rb");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(errtext, 1, cap - 1, f);
    errtext[n] = '\0';
    fclose(f);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: %s", cmd, errtext);
}

START_TEST(test_generate_verbose_counts_the_cache) {
    const char* pos[] = {"learned", "xpos"};
    for (int p = 0; p < 2; p++) {
        Config c;
        gen_config(&c, pos[p]);
        GPT2 m;
        test_build_model_threads(&m, &c, 1, GT, 1, 3);
        char ck[1100], err[2048];
        snprintf(ck, sizeof(ck), "%s/kvmem_%s.bin", tmp(), pos[p]);
        char* text = NULL;
        size_t tl = 0;
        FILE* f = open_memstream(&text, &tl);
        ck_assert_int_eq(config_write(&c, f), 0);
        fclose(f);
        ck_assert_msg(ckpt_save_model(&m, ck, 0, text, err, sizeof(err)) == 0, "%s", err);
        free(text);
        // what ./generate's cache takes: its model on one thread, a cache of block_size positions
        const double want = measured_bytes(&m, GT);
        const double lay = layout_bytes(&m, GT, 1);
        gpt2_free(&m);

        char e[4096];
        generate_stderr(ck, "--verbose --n 1 --tokens 3 --temperature 0", e, sizeof(e));
        double total = NAN, par = NAN, grad = NAN, acts = NAN, ws = NAN, cache = NAN, cmib = NAN;
        int positions = -1, tacts = -1;
        const char* l = strstr(e, "generate: memory estimate ");
        ck_assert_msg(l && sscanf(l,
                                  "generate: memory estimate %lf MiB: parameters %lf, gradients "
                                  "%lf, activations of 1 x %d positions %lf, workspace and "
                                  "variant caches %lf MiB; key/value cache %lf bytes (%lf MiB, "
                                  "%d positions)",
                                  &total, &par, &grad, &tacts, &acts, &ws, &cache, &cmib,
                                  &positions) == 9,
                      "%s", e);
        ck_assert_int_eq(positions, GT);
        ck_assert_int_eq(tacts, GT);
        ck_assert_msg(cache == want, "%s: printed %.0f bytes, kv_cache_new takes %.0f", pos[p],
                      cache, want);
        ck_assert(cache > lay); // the layout's buffers and the struct
        // the parts add up (each printed to 0.1 MiB), and the cache is in the total
        const double sum = par + grad + acts + ws + cmib;
        ck_assert_msg(fabs(total - sum) <= 0.3 && total > par + grad + acts + ws - 0.3, "%s", e);
        ck_assert(par > 0 && grad > 0 && acts > 0 && total > 0);

        // without the cache: none counted
        generate_stderr(ck, "--verbose --no-cache --n 1 --tokens 3 --temperature 0", e, sizeof(e));
        l = strstr(e, "key/value cache ");
        ck_assert_msg(l && sscanf(l, "key/value cache %lf bytes", &cache) == 1 && cache == 0, "%s",
                      e);
        // and nothing without --verbose
        generate_stderr(ck, "--n 1 --tokens 3 --temperature 0", e, sizeof(e));
        ck_assert_msg(strstr(e, "memory estimate") == NULL, "%s", e);
    }
}
END_TEST

static Suite* kv_memory_suite(void) {
    Suite* s = suite_create("kv_memory");
    TCase* tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_kv_cache_bytes_is_what_is_allocated);
    tcase_add_test(tc, test_generate_verbose_counts_the_cache);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(kv_memory_suite)
