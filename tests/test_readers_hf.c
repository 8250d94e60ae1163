// tests/test_readers_hf.c: Hugging Face directories and the attention setup through ./train and
// ./export, with crafted bad inputs; each case checks exit code 2 and that the message names the
// file (or the config key) and what is wrong.
//   - ./export --format hf with the tokenizer files: vocab.json and merges.txt are byte copies
//     of encoder.json and vocab.bpe; a tokenizer directory without them is refused.
//   - config.json (init_from = hf:DIR): not JSON, not an object, another model_type, another
//     activation, another LayerNorm epsilon, a missing or non-positive size, n_inner != 4 C,
//     n_embd not a multiple of n_head.
//   - model.safetensors: a foreign tensor is ignored, two names for one parameter and a missing
//     ln_f are refused (the file is rewritten with the safetensors layout: u64 header length,
//     JSON header, data).
//   - attention setup: the per-layer spec forms, ranges and gaps; attn.inner that is not a row
//     map; an out-of-range attn.* value (naming where it was set); an unknown attn.* key with and
//     without a close match; n_layer above the build's maximum; qk_norm = 1 (layernorm) with a
//     head size of 1.
//   - ./train --print-config makes the checks training makes before step 1 (attention name,
//     attn.* keys and values, data globs), exit 2 with the same message, nothing
//     written.
//   - ./evaluate --checkpoint hf:DIR takes its lengths from the model's block_size and exits 2
//     when it evaluated no length.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/reader_util.h"
#include "tests/testutil.h"

#define TINY                                                                                       \
    "n_layer=2 n_head=2 n_embd=16 block_size=16 seq_len=16 batch_size=2 vocab_size=257 "           \
    "tokenizer=byte threads=1 eval_every=0 sample_every=0 warmup_steps=0 max_steps=1 "

static char g_run[600], g_hf[800];

// ./export of RUN's step-2 model in the Hugging Face layout into HF
static void export_hf(const char* run, const char* hf) {
    char args[4096];
    snprintf(args, sizeof(args),
             "--checkpoint %s/model_00000002.bin --format hf --out %s --tokenizer-dir "
             "data_cache/gpt2",
             run, hf);
    RD_EXPECT(0, "export", args, "");
}

static void setup(void) {
    if (g_run[0]) return;
    snprintf(g_run, sizeof(g_run), "%s", rd_train_tiny(""));
    snprintf(g_hf, sizeof(g_hf), "%s/hf", g_run);
    export_hf(g_run, g_hf);
}

static int same_file(const char* a, const char* b) {
    size_t na, nb;
    unsigned char* x = rd_slurp(a, &na);
    unsigned char* y = rd_slurp(b, &nb);
    int same = na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

START_TEST(test_export_tokenizer_files) {
    // a GPT-2-vocabulary model: only then does the export write the tokenizer files
    const char* run = rd_train_tiny("vocab_size=50257 tokenizer=gpt2");
    // its own directories: the other tests share r_run / r_hf (a byte-vocabulary model), and
    // under CK_FORK=no (make asan) globals set here would outlive this test
    char r_run[1024], r_hf[1100];
    snprintf(r_run, sizeof(r_run), "%s", run);
    snprintf(r_hf, sizeof(r_hf), "%s/hf", r_run);
    export_hf(r_run, r_hf);
    char a[1200], b[1200];
    snprintf(a, sizeof(a), "%s/data_cache/gpt2/encoder.json", test_repo_root());
    snprintf(b, sizeof(b), "%s/vocab.json", r_hf);
    ck_assert_msg(same_file(a, b), "%s differs from %s", b, a);
    snprintf(a, sizeof(a), "%s/data_cache/gpt2/vocab.bpe", test_repo_root());
    snprintf(b, sizeof(b), "%s/merges.txt", r_hf);
    ck_assert_msg(same_file(a, b), "%s differs from %s", b, a);
    char args[4096];
    snprintf(args, sizeof(args),
             "--checkpoint %s/model_00000002.bin --format hf --out %s/hf2 --tokenizer-dir %s/none",
             r_run, r_run, r_run);
    RD_EXPECT(2, "export", args, "none: encoder.json / vocab.bpe missing", "--no-tokenizer");
}
END_TEST

// a copy of the exported directory with config.json replaced by `json`; train from it
static void hf_config_case(const char* name, const char* json, const char* want) {
    setup();
    char cmd[8192], p[1200], args[8192];
    snprintf(cmd, sizeof(cmd), "rm -rf %s/%s && cp -r %s %s/%s", g_run, name, g_hf, g_run, name);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(p, sizeof(p), "%s/%s/config.json", g_run, name);
    rd_write(p, json, strlen(json));
    snprintf(args, sizeof(args),
             TINY "train_data='%s/data/train_*.bin' out_dir=%s/o_%s init_from=hf:%s/%s", g_run,
             g_run, name, g_run, name);
    char where[1300];
    snprintf(where, sizeof(where), "%s/config.json", name);
    RD_EXPECT(2, "train", args, where, want);
}

#define SIZES                                                                                      \
    "\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 16, \"n_positions\": 16, \"vocab_size\": 257"

START_TEST(test_hf_config_errors) {
    hf_config_case("c_json", "{\"n_layer\": 2,", "not valid JSON");
    hf_config_case("c_array", "[1, 2]", "not a JSON object");
    hf_config_case("c_type", "{\"model_type\": \"llama\", " SIZES "}",
                   "model_type is not \"gpt2\"");
    hf_config_case("c_act", "{\"activation_function\": \"relu\", " SIZES "}",
                   "activation_function must be \"gelu_new\"");
    hf_config_case("c_eps", "{\"layer_norm_epsilon\": 1e-6, " SIZES "}",
                   "layer_norm_epsilon must be 1e-05");
    hf_config_case("c_missing",
                   "{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 16, \"vocab_size\": 257}",
                   "key 'n_positions' is missing");
    hf_config_case(
        "c_zero",
        "{\"n_layer\": 0, \"n_head\": 2, \"n_embd\": 16, \"n_positions\": 16, \"vocab_size\": 257}",
        "key 'n_layer' must be a positive integer");
    hf_config_case("c_inner", "{\"n_inner\": 32, " SIZES "}",
                   "n_inner=32, attnlab's MLP is 4*n_embd=64");
    hf_config_case(
        "c_heads",
        "{\"n_layer\": 2, \"n_head\": 3, \"n_embd\": 16, \"n_positions\": 16, \"vocab_size\": 257}",
        "unsupported sizes (n_layer=2 n_embd=16 n_head=3)");
}
END_TEST

// model.safetensors rewritten with the tensor name `from` replaced by `to` in its JSON header
// (the header length is rewritten; data offsets are relative to the data, so they stay valid)
static void st_rename_case(const char* name, const char* from, const char* to, int want_rc,
                           const char* want) {
    setup();
    char cmd[8192], p[1200], args[8192];
    snprintf(cmd, sizeof(cmd), "rm -rf %s/%s && cp -r %s %s/%s", g_run, name, g_hf, g_run, name);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(p, sizeof(p), "%s/%s/model.safetensors", g_run, name);
    size_t n;
    unsigned char* b = rd_slurp(p, &n);
    uint64_t hl;
    memcpy(&hl, b, 8);
    ck_assert(hl + 8 <= n);
    char q[128];
    snprintf(q, sizeof(q), "\"%s\"", from);
    const char* h = (const char*)b + 8;
    size_t at = (size_t)-1, ql = strlen(q);
    for (size_t i = 0; i + ql <= hl; i++)
        if (memcmp(h + i, q, ql) == 0) {
            at = i;
            break;
        }
    ck_assert_msg(at != (size_t)-1, "no tensor %s in %s", from, p);
    size_t tl = strlen(to) + 2, nhl = hl - ql + tl, nn = n - ql + tl;
    unsigned char* o = malloc(nn);
    memcpy(o, &(uint64_t){nhl}, 8);
    memcpy(o + 8, h, at);
    o[8 + at] = '"';
    memcpy(o + 9 + at, to, tl - 2);
    o[8 + at + tl - 1] = '"';
    memcpy(o + 8 + at + tl, h + at + ql, n - 8 - at - ql);
    rd_write(p, o, nn);
    free(o);
    free(b);
    snprintf(args, sizeof(args),
             TINY "train_data='%s/data/train_*.bin' out_dir=%s/o_%s init_from=hf:%s/%s", g_run,
             g_run, name, g_run, name);
    char where[1300];
    snprintf(where, sizeof(where), "%s/model.safetensors", name);
    RD_EXPECT(want_rc, "train", args, where, want);
}

START_TEST(test_safetensors_errors) {
    // ln_f.bias renamed to a foreign name: ignored, then reported missing
    st_rename_case("s_lnf", "transformer.ln_f.bias", "ln_f.unknown", 2,
                   "tensor ln_f.bias (or transformer.ln_f.bias) is missing");
    // transformer.wpe.weight renamed to wte.weight: two names for the token embedding
    st_rename_case("s_dup", "transformer.wpe.weight", "wte.weight", 2,
                   "tensor transformer.wte.weight and wte.weight hold the same parameter");
}
END_TEST

static void setup_case(const char* extra, const char* want1, const char* want2) {
    setup();
    char args[8192];
    snprintf(args, sizeof(args), TINY "train_data='%s/data/train_*.bin' out_dir=%s/as %s", g_run,
             g_run, extra);
    RD_EXPECT(2, "train", args, want1, want2);
}

START_TEST(test_attention_setup_errors) {
    setup_case("attention=0-1:softmax,ssmax", "key 'attention'",
               "'ssmax' is not of the form FIRST-LAST:NAME");
    setup_case("'attention=x-1:softmax'", "key 'attention'", "bad layer range 'x-1'");
    setup_case("attention=0-2:softmax", "key 'attention'", "layer range 0-2 outside 0-1");
    setup_case("attention=0-1:softmax,1:ssmax", "key 'attention'", "layer 1 is given twice");
    setup_case("attention=0:softmax", "key 'attention'", "layer 1 has no variant");
    // spaces around a layer's name and after a comma are allowed: the error is the next key's
    setup_case("'attention=0:softmax, 1: ssmax ' attn.inner=gated",
               "'gated' is not a row-map variant", "");
    setup_case("attention=gated attn.inner=gated",
               "key 'attn.inner': 'gated' is not a row-map variant", "");
    setup_case("attention=entmax attn.alpha=1.005", "attn.alpha", "out of range");
    setup_case("attention=entmax attn.alpah=1.5", "unknown key 'attn.alpah'",
               "did you mean 'attn.alpha'");
    setup_case("attention=softmax attn.zzz=1", "unknown key 'attn.zzz'",
               "has no such hyperparameter");
    setup_case("attention=softmx", "unknown variant 'softmx' (did you mean 'softmax'?)", "");
    // a missing underscore is one edit from theta_init, four from theta0 (common/suggest.h)
    setup_case("attention=ssmax attn.thetainit=inv_log_T", "unknown key 'attn.thetainit'",
               "did you mean 'attn.theta_init'?");
    setup_case("attention=qqqqqqqqqqqq", "unknown variant 'qqqqqqqqqqqq'", "--list-attention");
    setup_case("n_layer=65", "key 'n_layer'", "64");
    setup_case("qk_norm=1 n_head=16", "key 'qk_norm'", "head size of at least 2");
}
END_TEST

// --print-config ("check a config, train nothing") refuses what training refuses before step 1,
// with the trainer's message, and writes nothing; a good config prints and exits 0.
START_TEST(test_print_config_checks_like_training) {
    setup();
    static const char* const cases[][2] = {
        {"attention=ssmaxx", "unknown variant 'ssmaxx' (did you mean 'ssmax'?)"},
        {"attention=ssmax attn.thetainit=inv_log_T", "unknown key 'attn.thetainit'"},
        {"attention=ssmax attn.theta_init=foo", "'foo' is not one of fixed|inv_log_T"},
        {"train_data='/nonexistent/dir/train_*.bin'", "no file matches this glob"},
        {"val_data='/nonexistent/dir/val_*.bin'", "no file matches this glob"},
    };
    char args[8192], od[1100];
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        snprintf(od, sizeof(od), "%s/pc%zu", g_run, k);
        for (int print = 0; print < 2; print++) {
            snprintf(args, sizeof(args), TINY "train_data='%s/data/train_*.bin' out_dir=%s %s%s",
                     g_run, od, cases[k][0], print ? " --print-config" : "");
            RD_EXPECT(2, "train", args, cases[k][1]);
            ck_assert_msg(access(od, F_OK) != 0, "%s: %s was created", cases[k][0], od);
        }
    }
    snprintf(od, sizeof(od), "%s/pc_ok", g_run);
    snprintf(args, sizeof(args),
             TINY "train_data='%s/data/train_*.bin' out_dir=%s attention=ssmax "
                  "attn.theta_init=inv_log_T --print-config",
             g_run, od);
    RD_EXPECT(0, "train", args, "# attnlab resolved config", "attn.theta_init      = inv_log_T");
    ck_assert_msg(access(od, F_OK) != 0, "--print-config created %s", od);
}
END_TEST

// ./evaluate of hf:DIR (no saved training length): the lengths are multiples of the model's
// block_size (32 here), not of the default seq_len; a run that evaluates no length exits 2.
START_TEST(test_evaluate_hf_lengths) {
    const char* run = rd_train_tiny("block_size=32 seq_len=32");
    char r_run[1024], args[4096];
    snprintf(r_run, sizeof(r_run), "%s", run);
    snprintf(args, sizeof(args),
             "--checkpoint %s/model_00000002.bin --format hf --out %s/hf --no-tokenizer", r_run,
             r_run);
    RD_EXPECT(0, "export", args, "");
    snprintf(args, sizeof(args), "--checkpoint hf:%s/hf --data '%s/data/val_*.bin' --batches 1",
             r_run, r_run);
    const char* out = RD_EXPECT(0, "evaluate", args, "seq_len=32 block_size=32");
    double loss = 0;
    const char* line = strstr(out, "\n32       1x      ");
    ck_assert_msg(line && sscanf(line + 19, "%lf", &loss) == 1 && loss > 0,
                  "no loss at length 32:\n%s", out);
    snprintf(args, sizeof(args),
             "--checkpoint hf:%s/hf --data '%s/data/val_*.bin' --seq-len 64,128 --batches 1", r_run,
             r_run);
    RD_EXPECT(2, "evaluate", args, "64       2x      not evaluated", "no length was evaluated");
}
END_TEST

static Suite* readers_hf_suite(void) {
    Suite* s = suite_create("readers_hf");
    TCase* tc = tcase_create("hf");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_export_tokenizer_files);
    tcase_add_test(tc, test_hf_config_errors);
    tcase_add_test(tc, test_safetensors_errors);
    tcase_add_test(tc, test_attention_setup_errors);
    tcase_add_test(tc, test_print_config_checks_like_training);
    tcase_add_test(tc, test_evaluate_hf_lengths);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(readers_hf_suite)
