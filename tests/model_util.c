// tests/model_util.c: small models and synthetic data shared by the model-level suites
// (see model_util.h).
#include "tests/model_util.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>

#include "common/util.h"
#include "data/shard.h"
#include "model/checkpoint.h"
#include "optim/clip.h"
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
    test_build_model_threads(m, c, B, T, omp_get_max_threads(), seed);
}

void test_build_model_threads(GPT2* m, const Config* c, int B, int T, int nthreads, uint64_t seed) {
    char err[512];
    memset(m, 0, sizeof(*m));
    ck_assert_msg(gpt2_setup_attention(m, c, err, sizeof(err)) == 0, "%s", err);
    GPT2Config g;
    ck_assert_msg(gpt2_config_from(&g, c, err, sizeof(err)) == 0, "%s", err);
    gpt2_build(m, &g);
    gpt2_init(m, seed);
    gpt2_alloc_acts(m, B, T, nthreads);
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

void test_train_ok(const Config* c) {
    char* se = NULL;
    int rc = test_train(c, &se);
    ck_assert_msg(rc == 0, "%s: ./train exited %d: %s", c->out_dir, rc, se ? se : "");
    free(se);
}

void test_run_config(Config* c, const char* dir, const char* out, int V) {
    test_tiny_config(c, V, 2, 2, 32, 32);
    c->batch_size = 4;
    snprintf(c->train_data, sizeof(c->train_data), "%s/train_*.bin", dir);
    snprintf(c->val_data, sizeof(c->val_data), "%s/val_*.bin", dir);
    snprintf(c->out_dir, sizeof(c->out_dir), "%s/%s", dir, out);
    c->lr = 3e-3f;
    c->min_lr = 3e-4f;
    c->warmup_steps = 5;
    c->eval_steps = 2;
    c->sample_every = 0;
    c->threads = 2;
    util_strlcpy(c->tokenizer, "byte", sizeof(c->tokenizer)); // no tokenizer files needed
}

int test_read_losses(const char* out_dir, double* losses, int cap, double* last_val) {
    char p[1100], err[1200];
    snprintf(p, sizeof(p), "%s/metrics.jsonl", out_dir);
    size_t len;
    char* text = util_read_file(p, &len, err, sizeof(err));
    ck_assert_msg(text != NULL, "%s", err);
    int n = 0;
    char* save = NULL;
    for (char* line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char* tl = strstr(line, "\"train_loss\":");
        if (tl && n < cap) losses[n++] = strtod(tl + 13, NULL);
        char* vl = strstr(line, "\"val_loss\":");
        if (vl && last_val) *last_val = strtod(vl + 11, NULL);
    }
    free(text);
    return n;
}

void test_expect_resume_exact(const Config* a, const char* resumed, const char* what, double* val_a,
                              double* val_b) {
    const int S = a->max_steps;
    ck_assert(S >= 2 && S <= 64);
    test_train_ok(a);
    Config b = *a;
    util_strlcpy(b.out_dir, resumed, sizeof(b.out_dir));
    b.checkpoint_every = S / 2;
    test_train_ok(&b);
    // the interruption: everything after the middle checkpoint is gone
    char p[1100];
    snprintf(p, sizeof(p), "%s/model_%08d.bin", b.out_dir, S);
    ck_assert_int_eq(unlink(p), 0);
    snprintf(p, sizeof(p), "%s/state_%08d.bin", b.out_dir, S);
    ck_assert_int_eq(unlink(p), 0);
    b.resume = 1;
    test_train_ok(&b);
    double la[64], lb[64], va = NAN, vb = NAN;
    ck_assert_int_eq(test_read_losses(a->out_dir, la, 64, &va), S);
    ck_assert_int_eq(test_read_losses(b.out_dir, lb, 64, &vb), S);
    for (int i = 0; i < S; i++)
        ck_assert_msg(la[i] == lb[i], "%s step %d: straight %.9g vs resumed %.9g", what, i + 1,
                      la[i], lb[i]);
    if (val_a) *val_a = va;
    if (val_b) *val_b = vb;
}

double test_expect_learns(const Config* c, const char* what) {
    const int S = c->max_steps;
    ck_assert(S >= 3 && S <= 64);
    test_train_ok(c);
    double l[64], val = NAN;
    ck_assert_int_eq(test_read_losses(c->out_dir, l, 64, &val), S);
    for (int i = 0; i < S; i++)
        ck_assert_msg(isfinite(l[i]), "%s: non-finite loss", what);
    double first = (l[0] + l[1] + l[2]) / 3, last = (l[S - 3] + l[S - 2] + l[S - 1]) / 3;
    ck_assert_msg(last < first - 0.3, "%s: loss did not fall (%.3f -> %.3f)", what, first, last);
    return val;
}

int llmc_load(GPT2* m, const char* path, char* err, size_t errcap) {
    GPT2Config fc;
    if (llmc_read_config(path, &fc, err, errcap)) return -1;
    return llmc_load_params(m, path, &fc, err, errcap);
}

void optim_step(Optimizer* o, float* params, const float* grads, const OptimRange* ranges,
                int nranges, float lr, const OptimHParams* h) {
    optim_step_fused(o, params, (float*)grads, ranges, nranges, lr, h, NULL);
}

float grad_clip(float* g, size_t n, double norm, float max_norm) {
    float scale = grad_clip_scale(norm, max_norm);
    if (scale == 1.0f) return scale;
#pragma omp parallel for schedule(static) if (n >= 32768)
    for (size_t i = 0; i < n; i++)
        g[i] *= scale;
    return scale;
}

int config_diff(const Config* a, const Config* b, char* what, size_t cap) {
    int ndiff = 0;
    if (cap) what[0] = '\0';
    for (int i = 0; i < CONFIG_NFIELDS; i++) {
        const ConfigField* f = &CONFIG_FIELDS[i];
        char va[CONFIG_STR + 32], vb[CONFIG_STR + 32];
        config_format_value(va, sizeof(va), a, f);
        config_format_value(vb, sizeof(vb), b, f);
        if (strcmp(va, vb) != 0) {
            if (ndiff++ == 0 && cap) snprintf(what, cap, "%s: '%s' vs '%s'", f->key, va, vb);
        }
    }
    // attn.* keys: same set with the same values (order and origin do not matter)
    for (int pass = 0; pass < 2; pass++) {
        const Config* x = pass ? b : a;
        const Config* y = pass ? a : b;
        for (int i = 0; i < x->n_attn && i < CONFIG_MAX_ATTN; i++) {
            const char* vy = config_attn_get(y, x->attn[i].key + 5, NULL);
            if (pass == 1 && vy) continue; // already compared in pass 0
            if (!vy || strcmp(vy, x->attn[i].value) != 0) {
                if (ndiff++ == 0 && cap)
                    snprintf(what, cap, "%s: '%s' vs '%s'", x->attn[i].key,
                             pass ? (vy ? vy : "(unset)") : x->attn[i].value,
                             pass ? x->attn[i].value : (vy ? vy : "(unset)"));
            }
        }
    }
    return ndiff;
}

int memory_estimate_config(MemEstimate* e, const Config* c, const GPT2Config* g, int B, int T,
                           int state_per_param, MMPrecision prec, int nthreads, char* err,
                           size_t errcap) {
    GPT2* probe = callocCheck(1, sizeof(GPT2)); // large: not on the stack
    int bad = gpt2_setup_attention(probe, c, err, errcap);
    if (!bad) memory_estimate(e, probe, g, B, T, state_per_param, prec, nthreads);
    free(probe);
    return bad ? -1 : 0;
}
