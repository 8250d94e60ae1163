// tests/test_metrics_run.c: diagnostics on a real training run: the read-only guarantee
// (identical training losses with diagnostics on and off), completeness and bounds of the JSONL
// records (raw and renormalised sink keys, per-head records, massive-activation ratios, probe
// size), main.log's "step N KEY VALUE" lines, ./attnmap output (C reader, numpy, usage errors),
// and the plot scripts on the run's output (when matplotlib is present).
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/npy.h"
#include "common/util.h"
#include "data/shard.h"
#include "model/metrics.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

#define PYTHON "/usr/bin/python3"

// ---------------------------------------------------------------------------------------------
// a real run: read-only guarantee, complete records, attnmap, plot scripts

static void write_shards(const char* dir) {
    // a learnable byte sequence: repeating short words
    const char* text = "the cat sat on the mat. a dog ran to the log. ";
    const size_t n = 6000, tl = strlen(text);
    uint16_t* tok = mallocCheck(sizeof(uint16_t) * n);
    for (size_t i = 0; i < n; i++)
        tok[i] = (uint16_t)(unsigned char)text[(i * 7 / 5) % tl];
    char path[1100], err[512];
    snprintf(path, sizeof(path), "%s/d_train_000000.bin", dir);
    ck_assert_msg(shard_write(path, tok, n, err, sizeof(err)) == 0, "%s", err);
    snprintf(path, sizeof(path), "%s/d_val_000000.bin", dir);
    ck_assert_msg(shard_write(path, tok + 1000, 2000, err, sizeof(err)) == 0, "%s", err);
    free(tok);
}

static void tiny_config(Config* c, const char* dir, const char* out, int metrics, int dump) {
    config_defaults(c);
    c->n_layer = 2;
    c->n_head = 2;
    c->n_embd = 16;
    c->block_size = 32;
    c->vocab_size = 257;
    util_strlcpy(c->tokenizer, "byte", sizeof(c->tokenizer));
    util_strlcpy(c->attention, "0-0:ssmax,1-1:sigmoid", sizeof(c->attention));
    snprintf(c->train_data, sizeof(c->train_data), "%s/d_train_*.bin", dir);
    snprintf(c->val_data, sizeof(c->val_data), "%s/d_val_*.bin", dir);
    util_strlcpy(c->out_dir, out, sizeof(c->out_dir));
    c->batch_size = 2;
    c->seq_len = 32;
    c->max_steps = 6;
    c->eval_every = 3;
    c->eval_steps = 1;
    c->log_every = 100;
    c->lr = 3e-3f;
    c->warmup_steps = 0;
    c->threads = 2;
    c->metrics_every = metrics;
    c->dump_attention_every = dump;
}

static void train_tiny(const char* dir, const char* out, int metrics, int dump) {
    Config c;
    tiny_config(&c, dir, out, metrics, dump);
    char err[2048];
    ck_assert_msg(config_validate(&c, err, sizeof(err)) == 0, "%s", err);
    test_train_ok(&c);
}

// Value of "key": in a JSONL line as text (up to , or }), or NULL.
static const char* jval(const char* line, const char* key, char* buf, size_t cap) {
    char pat[96];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    const char* p = strstr(line, pat);
    if (!p) return NULL;
    p += strlen(pat);
    size_t n = strcspn(p, ",}\n");
    if (n >= cap) n = cap - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return buf;
}

static double jnum(const char* line, const char* key) {
    char b[128];
    const char* v = jval(line, key, b, sizeof(b));
    ck_assert_msg(v != NULL, "key %s missing in %s", key, line);
    ck_assert_msg(strcmp(v, "null") != 0, "key %s is null in %s", key, line);
    return strtod(v, NULL);
}

static char** read_lines(const char* path, int* n) {
    char err[512];
    size_t len;
    char* text = util_read_file(path, &len, err, sizeof(err));
    ck_assert_msg(text != NULL, "%s", err);
    int cap = 16;
    char** lines = mallocCheck(sizeof(char*) * (size_t)cap);
    *n = 0;
    for (char* s = strtok(text, "\n"); s; s = strtok(NULL, "\n")) {
        if (*n == cap) lines = reallocCheck(lines, sizeof(char*) * (size_t)(cap *= 2));
        lines[(*n)++] = strdup(s);
    }
    free(text);
    return lines;
}

static int png_ok(const char* path) {
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    unsigned char b[8];
    FILE* f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(b, 1, 8, f);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fclose(f);
    return n == 8 && memcmp(b, sig, 8) == 0 && sz > 1000;
}

static int have_python(const char* modules) {
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s -c 'import %s' >/dev/null 2>&1", PYTHON, modules);
    return access(PYTHON, X_OK) == 0 && system(cmd) == 0;
}

static int run_cmd(const char* cmd) {
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(test_training_run) {
    const char* dir = test_tmpdir();
    write_shards(dir);
    char on[1100], off[1100], path[1300];
    snprintf(on, sizeof(on), "%s/on", dir);
    snprintf(off, sizeof(off), "%s/off", dir);
    train_tiny(dir, on, 1, 2);
    train_tiny(dir, off, 0, 0);

    // ---- identical training losses with diagnostics on and off (compared as written text)
    int n_on, n_off;
    snprintf(path, sizeof(path), "%s/metrics.jsonl", on);
    char** a = read_lines(path, &n_on);
    snprintf(path, sizeof(path), "%s/metrics.jsonl", off);
    char** b = read_lines(path, &n_off);
    char la[64][64], lb[64][64], tmp[128];
    int ka = 0, kb = 0;
    for (int i = 0; i < n_on; i++)
        if (jval(a[i], "train_loss", tmp, sizeof(tmp)) && ka < 64) strcpy(la[ka++], tmp);
    for (int i = 0; i < n_off; i++)
        if (jval(b[i], "train_loss", tmp, sizeof(tmp)) && kb < 64) strcpy(lb[kb++], tmp);
    ck_assert_int_eq(ka, 6);
    ck_assert_int_eq(kb, 6);
    for (int i = 0; i < 6; i++)
        ck_assert_str_eq(la[i], lb[i]);
    ck_assert(strcmp(la[0], la[5]) != 0); // it trained

    // ---- main.log: "# ..." header lines and "step N KEY VALUE" lines only; the losses are
    // metrics.jsonl's (to main.log's 6 decimals), the headlines there at every metrics step
    snprintf(path, sizeof(path), "%s/main.log", on);
    int n_log;
    char** lg = read_lines(path, &n_log);
    int ntrain = 0, nval = 0, nsink = 0;
    for (int i = 0; i < n_log; i++) {
        if (lg[i][0] == '#') continue;
        long st;
        char key[64];
        double v;
        int used = 0;
        ck_assert_msg(sscanf(lg[i], "step %ld %63s %lf%n", &st, key, &v, &used) == 3 &&
                          lg[i][used] == '\0',
                      "main.log line %d is not 'step N KEY VALUE': %s", i + 1, lg[i]);
        if (!strcmp(key, "train_loss")) {
            ck_assert(st >= 1 && st <= 6);
            ck_assert_double_eq_tol(v, strtod(la[st - 1], NULL), 1e-6);
            ntrain++;
        }
        nval += !strcmp(key, "val_loss");
        nsink += !strcmp(key, "sink_rate");
    }
    ck_assert_int_eq(ntrain, 6);
    ck_assert_int_eq(nval, 3); // steps 0, 3 and 6
    ck_assert_int_eq(nsink, 6);
    for (int i = 0; i < n_log; i++)
        free(lg[i]);
    free(lg);

    // ---- complete, in-bound records at every step
    const int L = 2, NH = 2, T = 32;
    for (int step = 1; step <= 6; step++) {
        int heads = 0, models = 0, acts = 0, params = 0, seen[2][2] = {{0}};
        double gsum = 0, gnorm = -1, frac_raw = 0, frac_norm = 0, rate_raw = -1, rate_norm = -1;
        for (int i = 0; i < n_on; i++) {
            char kind[32];
            if (!jval(a[i], "kind", kind, sizeof(kind)) || jnum(a[i], "step") != step) continue;
            if (!strcmp(kind, "\"head\"")) {
                int l = (int)jnum(a[i], "layer"), h = (int)jnum(a[i], "head");
                ck_assert(l >= 0 && l < L && h >= 0 && h < NH);
                seen[l][h]++;
                double e = jnum(a[i], "entropy"), en = jnum(a[i], "entropy_norm");
                ck_assert(e >= 0 && e <= log(T) + 1e-6);
                ck_assert(en >= 0 && en <= 1 + 1e-6);
                double sm = jnum(a[i], "sink_mass"), mw = jnum(a[i], "max_weight");
                ck_assert(sm >= 0 && sm <= 1 && mw > 0 && mw <= 1 + 1e-6);
                double sp = jnum(a[i], "sparsity");
                ck_assert(sp >= 0 && sp <= 1);
                ck_assert(jnum(a[i], "max_logit") >= 0);
                ck_assert(jnum(a[i], "grad_norm_q") >= 0 && jnum(a[i], "grad_norm_k") >= 0);
                ck_assert(jnum(a[i], "grad_norm_v") > 0);
                // raw and renormalised sink statistics; alpha0 keeps its renormalised meaning
                double ar = jnum(a[i], "alpha0_raw"), an = jnum(a[i], "alpha0_renorm");
                ck_assert(jnum(a[i], "alpha0") == an);
                ck_assert(an >= 0 && an <= 1 && ar >= 0 && ar <= 1 + 1e-6);
                if (l == 0) ck_assert_double_eq_tol(ar, an, 1e-6); // ssmax rows sum to 1
                if (l == 1) ck_assert(fabs(ar - an) > 1e-4);       // sigmoid rows do not
                double fr = jnum(a[i], "sink_frac_raw"), fn = jnum(a[i], "sink_frac_renorm");
                ck_assert(fr >= 0 && fr <= 1 && fn >= 0 && fn <= 1);
                frac_raw += fr;
                frac_norm += fn;
                ck_assert(jnum(a[i], "sink_mass_raw") >= 0);
                ck_assert(jnum(a[i], "kurtosis") > 0);
                heads++;
            } else if (!strcmp(kind, "\"model\"")) {
                double sr = jnum(a[i], "sink_rate");
                ck_assert(sr >= 0 && sr <= 1);
                ck_assert(sr == jnum(a[i], "sink_rate_renorm"));
                rate_raw = jnum(a[i], "sink_rate_raw");
                rate_norm = sr;
                ck_assert_int_eq((int)jnum(a[i], "probe_sequences"), 64);
                ck_assert_int_eq((int)jnum(a[i], "probe_len"), T);
                ck_assert(jnum(a[i], "massive_ratio_max") >= 1.0);
                ck_assert(jnum(a[i], "kurtosis_max") >= jnum(a[i], "kurtosis_mean"));
                ck_assert(jnum(a[i], "max_abs_act") > 0);
                ck_assert(jnum(a[i], "massive_acts") >= 0);
                gnorm = jnum(a[i], "grad_norm");
                models++;
            } else if (!strcmp(kind, "\"act\"")) {
                ck_assert(jnum(a[i], "kurtosis") >= 0 && jnum(a[i], "max_abs") > 0);
                ck_assert(jnum(a[i], "massive_ratio") >= 1.0);
                acts++;
            } else if (!strcmp(kind, "\"grad\"")) {
                double g = jnum(a[i], "norm");
                gsum += g * g;
            } else if (!strcmp(kind, "\"param\"")) {
                ck_assert(jnum(a[i], "min") <= jnum(a[i], "mean"));
                ck_assert(jnum(a[i], "mean") <= jnum(a[i], "max"));
                params++;
            }
        }
        ck_assert_int_eq(heads, L * NH);
        // the model's sink rates are the means of the per-head sink fractions
        ck_assert_double_eq_tol(rate_raw, frac_raw / (L * NH), 1e-6);
        ck_assert_double_eq_tol(rate_norm, frac_norm / (L * NH), 1e-6);
        for (int l = 0; l < L; l++)
            for (int h = 0; h < NH; h++)
                ck_assert_int_eq(seen[l][h], 1);
        ck_assert_int_eq(models, 1);
        ck_assert_int_eq(acts, 5 * L + 1);
        ck_assert_int_eq(params, 3); // ssmax.theta, ssmax.bias (layer 0), sigmoid.bias (layer 1)
        // per-tensor norms add up (in squares) to the global pre-clip norm
        ck_assert_double_eq_tol(sqrt(gsum), gnorm, 1e-4 * gnorm);
    }
    int found = 0;
    for (int i = 0; i < n_on; i++)
        found += strstr(a[i], "\"tensor\":\"ssmax.theta\",\"layer\":0") != NULL;
    ck_assert_int_eq(found, 6);
    for (int i = 0; i < n_on; i++)
        free(a[i]);
    for (int i = 0; i < n_off; i++)
        free(b[i]);
    free(a);
    free(b);

    // ---- training dumps: (L, NH, T, T) of the probe's first sequence
    char err[512];
    NpyInfo info;
    snprintf(path, sizeof(path), "%s/attn/step_00000004.npy", on);
    float* d = npy_read_f32(path, &info, err, sizeof(err));
    ck_assert_msg(d != NULL, "%s", err);
    ck_assert_int_eq(info.ndim, 4);
    ck_assert(info.shape[0] == L && info.shape[1] == NH && info.shape[2] == T &&
              info.shape[3] == T);
    free(d);
    snprintf(path, sizeof(path), "%s/attn/step_00000003.npy", on);
    ck_assert(!util_file_exists(path));

    // ---- attnmap on the final checkpoint
    char cmd[4096], prefix[1200];
    snprintf(prefix, sizeof(prefix), "%s/map", dir);
    // the binary lives in this test's build directory
    const char* exe = test_build_dir();
    snprintf(cmd, sizeof(cmd),
             "%s/attnmap --checkpoint %s/model_00000006.bin --text 'the cat sat' --out %s "
             ">/dev/null",
             exe, on, prefix);
    ck_assert_int_eq(run_cmd(cmd), 0);
    snprintf(path, sizeof(path), "%s.npy", prefix);
    d = npy_read_f32(path, &info, err, sizeof(err));
    ck_assert_msg(d != NULL, "%s", err);
    const int n = 11; // bytes of "the cat sat"
    ck_assert(info.shape[0] == L && info.shape[1] == NH && info.shape[2] == n &&
              info.shape[3] == n);
    for (int h = 0; h < NH; h++) { // layer 0 is ssmax: rows sum to 1, nothing above the diagonal
        const float* A = d + (size_t)h * n * n;
        for (int t = 0; t < n; t++) {
            double s = 0;
            for (int j = 0; j < n; j++) {
                if (j > t) ck_assert(A[t * n + j] == 0.0f);
                s += A[t * n + j];
            }
            ck_assert_double_eq_tol(s, 1.0, 1e-5);
        }
    }
    free(d);
    if (have_python("numpy")) {
        snprintf(cmd, sizeof(cmd),
                 "%s -c \"import numpy as np, json; a = np.load('%s.npy', mmap_mode='r'); "
                 "m = json.load(open('%s.json')); "
                 "assert a.shape == (2, 2, 11, 11) and a.dtype == np.float32; "
                 "assert np.allclose(a[0].sum(-1), 1, atol=1e-5); "
                 "assert (np.triu(a, 1) == 0).all(); "
                 "assert m['tokens'][:3] == [116, 104, 101] and m['token_strings'][0] == 't'; "
                 "assert m['layers'] == [0, 1] and m['step'] == 6\"",
                 PYTHON, prefix, prefix);
        ck_assert_int_eq(run_cmd(cmd), 0);
    }
    // usage errors exit 2
    snprintf(cmd, sizeof(cmd),
             "%s/attnmap --checkpoint %s/model_00000006.bin --text ab --layers 5 --out %s "
             "2>/dev/null",
             exe, on, prefix);
    ck_assert_int_eq(run_cmd(cmd), 2);
    snprintf(cmd, sizeof(cmd), "%s/attnmap --text ab --out %s 2>/dev/null", exe, prefix);
    ck_assert_int_eq(run_cmd(cmd), 2);
    snprintf(cmd, sizeof(cmd),
             "%s/attnmap --checkpoint %s/nothing.bin --text ab --out %s "
             "2>/dev/null",
             exe, on, prefix);
    ck_assert_int_eq(run_cmd(cmd), 2);

    // ---- plot scripts on this run
    if (have_python("numpy, matplotlib")) {
        snprintf(cmd, sizeof(cmd), "%s %s/scripts/plot_run %s >/dev/null", PYTHON, test_repo_root(),
                 on);
        ck_assert_int_eq(run_cmd(cmd), 0);
        const char* figs[] = {"loss", "grad_norm", "heads", "diagnostics", "activations", "params"};
        for (int i = 0; i < 6; i++) {
            snprintf(path, sizeof(path), "%s/plots/%s.png", on, figs[i]);
            ck_assert_msg(png_ok(path), "%s is not a PNG", path);
        }
        snprintf(cmd, sizeof(cmd), "%s %s/scripts/plot_attention %s >/dev/null", PYTHON,
                 test_repo_root(), prefix);
        ck_assert_int_eq(run_cmd(cmd), 0);
        snprintf(path, sizeof(path), "%s.png", prefix);
        ck_assert(png_ok(path));
        snprintf(cmd, sizeof(cmd),
                 "%s %s/scripts/plot_attention %s/attn/step_00000006 "
                 "--out %s/dump.png >/dev/null",
                 PYTHON, test_repo_root(), on, dir);
        ck_assert_int_eq(run_cmd(cmd), 0);
        snprintf(path, sizeof(path), "%s/dump.png", dir);
        ck_assert(png_ok(path));
        snprintf(cmd, sizeof(cmd), "%s %s/scripts/plot_run %s/none 2>/dev/null", PYTHON,
                 test_repo_root(), dir);
        ck_assert_int_eq(run_cmd(cmd), 2);
    }
}
END_TEST

static Suite* metrics_run_suite(void) {
    Suite* s = suite_create("metrics_run");
    TCase* r = tcase_create("run");
    tcase_set_timeout(r, 240);
    tcase_add_test(r, test_training_run);
    suite_add_tcase(s, r);
    return s;
}

TEST_MAIN(metrics_run_suite)
