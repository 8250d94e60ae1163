// tests/model_util.c: small models and synthetic data shared by the model-level suites
// (see model_util.h).
#include "tests/model_util.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "data/shard.h"
#include "tests/testutil.h"

void test_tiny_config(Config* c, int V, int L, int NH, int C, int T) {
    config_defaults(c);
    c->n_layer = L;
    c->n_head = NH;
    c->n_embd = C;
    c->block_size = T;
    c->vocab_size = V;
    c->seq_len = T;
    c->batch_size = 2;
}

void test_build_model(GPT2* m, const Config* c, int B, int T, uint64_t seed) {
    char err[512];
    memset(m, 0, sizeof(*m));
    ck_assert_msg(gpt2_setup_attention(m, c, err, sizeof(err)) == 0, "%s", err);
    GPT2Config g;
    ck_assert_msg(gpt2_config_from(&g, c, err, sizeof(err)) == 0, "%s", err);
    gpt2_build(m, &g);
    gpt2_init(m, seed);
    gpt2_alloc_acts(m, B, T, omp_get_max_threads());
}

void test_random_tokens(int* x, int n, int V, Rng* r) {
    for (int i = 0; i < n; i++)
        x[i] = (int)rng_below(r, (uint64_t)V);
}

void test_write_shards(const char* dir, int V, int period, size_t ntrain, size_t nval) {
    Rng r;
    rng_seed(&r, 123);
    uint16_t* base = mallocCheck(sizeof(uint16_t) * (size_t)period);
    for (int i = 0; i < period; i++)
        base[i] = (uint16_t)rng_below(&r, (uint64_t)V);
    uint16_t* t = mallocCheck(sizeof(uint16_t) * (ntrain + nval));
    for (size_t i = 0; i < ntrain + nval; i++)
        t[i] = base[i % (size_t)period];
    char p[600], err[1024];
    snprintf(p, sizeof(p), "%s/train_000.bin", dir);
    ck_assert_msg(shard_write(p, t, ntrain, err, sizeof(err)) == 0, "%s", err);
    snprintf(p, sizeof(p), "%s/val_000.bin", dir);
    ck_assert_msg(shard_write(p, t + ntrain, nval, err, sizeof(err)) == 0, "%s", err);
    free(base);
    free(t);
}
