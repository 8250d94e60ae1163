// tests/model_util.c: small models and synthetic data shared by the model-level suites
// (see model_util.h).
#include "tests/model_util.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>

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

int test_train(const Config* c, char** stderr_text) {
    char train[1100], conf[1100], so[1100], se[1100], err[1200];
    snprintf(train, sizeof(train), "%s/train", test_build_dir());
    ck_assert_msg(access(train, X_OK) == 0, "%s: trainer not built", train);
    snprintf(conf, sizeof(conf), "%s.conf", c->out_dir);
    snprintf(so, sizeof(so), "%s.stdout.txt", c->out_dir);
    snprintf(se, sizeof(se), "%s.stderr.txt", c->out_dir);
    FILE* f = fopen(conf, "w");
    ck_assert_msg(f != NULL, "%s: cannot write", conf);
    ck_assert_int_eq(config_write(c, f), 0);
    fclose(f);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        int fo = open(so, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(se, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0) _exit(126);
        dup2(fo, 1);
        dup2(fe, 2);
        char* argv[] = {train, conf, NULL};
        execv(train, argv);
        _exit(127);
    }
    int st;
    ck_assert(waitpid(pid, &st, 0) == pid);
    if (stderr_text) {
        size_t n;
        *stderr_text = util_read_file(se, &n, err, sizeof(err));
        if (!*stderr_text) *stderr_text = strdup("");
    }
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}
