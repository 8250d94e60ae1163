// tests/test_config.c: the config parser: defaults, include chains and override order, include
// cycles and depth, comments and quoting, every error message (file, line, key, suggestion),
// command-line overrides, attn.* keys, write -> load round trip, cross-field validation, --help.
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attention/attention.h"
#include "common/config.h"
#include "common/suggest.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

// ----------------------------------------------------------------------------
// helpers

static char* write_conf(const char* dir, const char* name, const char* text) {
    static char bufs[8][1200];
    static int k = 0;
    char* p = bufs[k++ % 8];
    snprintf(p, sizeof(bufs[0]), "%s/%s", dir, name);
    FILE* f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return p;
}

#define ASSERT_HAS(err, s) ck_assert_msg(strstr((err), (s)) != NULL, "'%s' lacks '%s'", (err), (s))

// Loading `text` (as FILE) must fail; the message must start with "FILE:LINE: " and contain s1/s2.
static void expect_load_error(const char* text, int line, const char* s1, const char* s2) {
    const char* dir = test_tmpdir();
    char* p = write_conf(dir, "bad.conf", text);
    Config c;
    config_defaults(&c);
    char err[1024];
    ck_assert_msg(config_load(&c, p, err, sizeof(err)) == -1, "accepted: %s", text);
    char prefix[1300];
    snprintf(prefix, sizeof(prefix), "%s:%d: ", p, line);
    ck_assert_msg(strncmp(err, prefix, strlen(prefix)) == 0, "'%s' does not start with '%s'", err,
                  prefix);
    if (s1) ASSERT_HAS(err, s1);
    if (s2) ASSERT_HAS(err, s2);
}

static void expect_arg_error(const char* arg, const char* s1, const char* s2) {
    Config c;
    config_defaults(&c);
    char err[1024];
    ck_assert_msg(config_apply_arg(&c, arg, err, sizeof(err)) == -1, "accepted: %s", arg);
    ASSERT_HAS(err, "command line");
    if (s1) ASSERT_HAS(err, s1);
    if (s2) ASSERT_HAS(err, s2);
}

// ----------------------------------------------------------------------------
// defaults

START_TEST(test_defaults) {
    Config c;
    memset(&c, 0x5a, sizeof(c));
    config_defaults(&c);
    // the documented defaults
    ck_assert_int_eq(c.n_layer, 12);
    ck_assert_int_eq(c.n_head, 12);
    ck_assert_int_eq(c.n_embd, 768);
    ck_assert_int_eq(c.block_size, 1024);
    ck_assert_int_eq(c.vocab_size, 50257);
    ck_assert_str_eq(c.pos_encoding, "learned");
    ck_assert_int_eq(c.qk_norm, 0);
    ck_assert_str_eq(c.residual, "standard");
    ck_assert_int_eq(c.value_residual, 0);
    ck_assert_int_eq(c.mlp, 1);
    ck_assert_str_eq(c.init_from, "scratch");
    ck_assert_str_eq(c.attention, "softmax");
    ck_assert_int_eq(c.n_attn, 0);
    ck_assert_str_eq(c.train_data, "");
    ck_assert_str_eq(c.val_data, "");
    ck_assert_str_eq(c.tokenizer, "gpt2");
    ck_assert_str_eq(c.tokenizer_dir, "data_cache/gpt2");
    ck_assert_int_eq(c.shuffle, 0);
    ck_assert_int_eq(c.batch_size, 4);
    ck_assert_int_eq(c.seq_len, 64);
    ck_assert_int_eq(c.max_steps, 100);
    ck_assert_int_eq(c.grad_accum, 1);
    ck_assert_int_eq(c.threads, 0);
    ck_assert_int_eq(c.resume, 0);
    ck_assert_int_eq(c.seed, 1337);
    ck_assert_str_eq(c.optimizer, "adamw");
    ck_assert_str_eq(c.lr_schedule, "cosine");
    ck_assert(c.lr == 6e-4f);
    ck_assert(c.min_lr == 6e-5f);
    ck_assert_int_eq(c.warmup_steps, 10);
    ck_assert(c.weight_decay == 0.1f);
    ck_assert(c.beta1 == 0.9f);
    ck_assert(c.beta2 == 0.95f);
    ck_assert(c.eps == 1e-8f);
    ck_assert(c.grad_clip == 1.0f);
    ck_assert_str_eq(c.out_dir, "out");
    ck_assert_int_eq(c.log_every, 1);
    ck_assert_int_eq(c.eval_every, 50);
    ck_assert_int_eq(c.eval_steps, 10);
    ck_assert_int_eq(c.metrics_every, 50);
    ck_assert_int_eq(c.checkpoint_every, 0);
    ck_assert_int_eq(c.sample_every, 0);
    ck_assert_int_eq(c.sample_tokens, 64);
    ck_assert_int_eq(c.keep_last, 3);
    ck_assert_int_eq(c.dump_attention_every, 0);
    ck_assert(c.sink_eps == 0.3f);
    ck_assert_str_eq(c.nan_policy, "stop");
    ck_assert_int_eq(c.max_skips, 10);
    ck_assert_int_eq(c.eval_seq_len, 0);
    char err[512];
    ck_assert_msg(config_validate(&c, err, sizeof(err)) == 0, "%s", err);

    // the table covers every key once, and each default is inside its own range
    for (int i = 0; i < CONFIG_NFIELDS; i++) {
        const ConfigField* f = &CONFIG_FIELDS[i];
        ck_assert_ptr_eq(config_field(f->key), f);
        for (int j = 0; j < i; j++)
            ck_assert_str_ne(CONFIG_FIELDS[j].key, f->key);
        if (f->type != CF_STR) {
            double d = atof(f->def);
            ck_assert_msg(d >= f->min && d <= f->max, "default of %s out of range", f->key);
        }
    }
    // every key of the Config struct is in the table, and nothing else
    static const char* const KEYS[] = {"n_layer",
                                       "n_head",
                                       "n_embd",
                                       "block_size",
                                       "vocab_size",
                                       "pos_encoding",
                                       "qk_norm",
                                       "qk_norm_kind",
                                       "residual",
                                       "value_residual",
                                       "mlp",
                                       "init_from",
                                       "attention",
                                       "train_data",
                                       "val_data",
                                       "tokenizer",
                                       "tokenizer_dir",
                                       "shuffle",
                                       "batch_size",
                                       "seq_len",
                                       "max_steps",
                                       "grad_accum",
                                       "threads",
                                       "resume",
                                       "seed",
                                       "optimizer",
                                       "lr_schedule",
                                       "lr",
                                       "min_lr",
                                       "weight_decay",
                                       "weight_decay_mode",
                                       "z_loss",
                                       "beta1",
                                       "beta2",
                                       "eps",
                                       "grad_clip",
                                       "warmup_steps",
                                       "out_dir",
                                       "log_every",
                                       "eval_every",
                                       "eval_steps",
                                       "metrics_every",
                                       "checkpoint_every",
                                       "sample_every",
                                       "sample_tokens",
                                       "keep_last",
                                       "dump_attention_every",
                                       "sink_eps",
                                       "probe_sequences",
                                       "nan_policy",
                                       "max_skips",
                                       "eval_seq_len",
                                       "precision",
                                       "zero",
                                       "dp_reduce",
                                       "dist_timeout",
                                       "overwrite",
                                       "resume_change",
                                       "decay_steps",
                                       "decay_fraction",

                                       "mc_data",
                                       "mc_examples"};
    int nkeys = (int)(sizeof(KEYS) / sizeof(KEYS[0]));
    for (int i = 0; i < nkeys; i++)
        ck_assert_msg(config_field(KEYS[i]) != NULL, "%s", KEYS[i]);
    ck_assert_int_eq(CONFIG_NFIELDS, nkeys);
    ck_assert_ptr_eq(config_field("lr")->offset + (char*)&c, (char*)&c.lr);
    ck_assert_ptr_eq(config_field("seed")->offset + (char*)&c, (char*)&c.seed);
    ck_assert_ptr_eq(config_field("eval_seq_len")->offset + (char*)&c, (char*)&c.eval_seq_len);
    ck_assert_int_eq(c.probe_sequences, 64);
    // dp_reduce: the bit-identical chain by default; only chain and allreduce accepted
    ck_assert_str_eq(c.dp_reduce, "chain");
    ck_assert_int_eq(config_apply_arg(&c, "dp_reduce=allreduce", err, sizeof(err)), 0);
    ck_assert_str_eq(c.dp_reduce, "allreduce");
    ck_assert_int_ne(config_apply_arg(&c, "dp_reduce=tree", err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "dp_reduce"), "%s", err);
    // precision: fp32 by default (bit-identical to the fp32-only trainer); unknown values refused
    ck_assert_str_eq(c.precision, "fp32");
    ck_assert_int_eq(config_apply_arg(&c, "precision=auto", err, sizeof(err)), 0);
    ck_assert_str_eq(c.precision, "auto");
    ck_assert_int_ne(config_apply_arg(&c, "precision=fp16", err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "precision") != NULL, "%s", err);
    // data parallel: zero is 0 or 1, the watchdog at least a second
    ck_assert_int_eq(c.zero, 0);
    ck_assert(c.dist_timeout == 300.0f);
    ck_assert_int_ne(config_apply_arg(&c, "zero=2", err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "zero") != NULL, "%s", err);
    ck_assert_int_ne(config_apply_arg(&c, "dist_timeout=0", err, sizeof(err)), 0);
    ck_assert_int_eq(config_apply_arg(&c, "zero=1", err, sizeof(err)), 0);
    ck_assert_int_eq(c.zero, 1);
}
END_TEST

// ----------------------------------------------------------------------------
// includes

START_TEST(test_include_chain) {
    const char* dir = test_tmpdir();
    char sub[1200];
    snprintf(sub, sizeof(sub), "%s/sub", dir);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    write_conf(dir, "base.conf",
               "n_layer = 4\n"
               "n_head = 4\n"
               "lr = 1e-3\n"
               "attn.alpha = 1.0\n"
               "out_dir = base_out\n");
    write_conf(dir, "mid.conf",
               "lr = 2e-3          # set before the include: the include overrides it\n"
               "include = base.conf\n"
               "n_layer = 6        # set after the include: overrides base\n"
               "attn.alpha = 2.0\n");
    char* top = write_conf(dir, "sub/top.conf",
                           "include = ../mid.conf   # relative to this file's directory\n"
                           "n_head = 2\n"
                           "attn.beta = 0.5\n");
    Config c;
    config_defaults(&c);
    char err[1024];
    ck_assert_msg(config_load(&c, top, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(c.n_layer, 6);
    ck_assert_int_eq(c.n_head, 2);
    ck_assert(c.lr == 1e-3f);
    ck_assert_str_eq(c.out_dir, "base_out");
    ck_assert_int_eq(c.n_embd, 768); // untouched keys keep their defaults
    ck_assert_int_eq(c.n_attn, 2);

    const char* origin = NULL;
    const char* v = config_attn_get(&c, "alpha", &origin);
    ck_assert_str_eq(v, "2.0");
    char want[1300];
    snprintf(want, sizeof(want), "%s/sub/../mid.conf:4", dir);
    ck_assert_str_eq(origin, want);
    v = config_attn_get(&c, "beta", &origin);
    ck_assert_str_eq(v, "0.5");
    snprintf(want, sizeof(want), "%s:3", top);
    ck_assert_str_eq(origin, want);
    ck_assert_ptr_null(config_attn_get(&c, "gamma", &origin));
    ck_assert_ptr_null(origin);
    ck_assert_ptr_null(config_attn_get(&c, "attn.alpha", NULL)); // names are given without prefix
}
END_TEST

START_TEST(test_include_cycle) {
    const char* dir = test_tmpdir();
    char* a = write_conf(dir, "a.conf", "n_layer = 2\ninclude = b.conf\n");
    write_conf(dir, "b.conf", "\n\ninclude = a.conf\n");
    Config c;
    config_defaults(&c);
    char err[2048];
    ck_assert_int_eq(config_load(&c, a, err, sizeof(err)), -1);
    ASSERT_HAS(err, "include cycle");
    ASSERT_HAS(err, "b.conf:3");
    ASSERT_HAS(err, "a.conf");

    char* self = write_conf(dir, "self.conf", "include = self.conf\n");
    ck_assert_int_eq(config_load(&c, self, err, sizeof(err)), -1);
    ASSERT_HAS(err, "include cycle");
    ASSERT_HAS(err, "self.conf:1");
}
END_TEST

START_TEST(test_include_depth) {
    const char* dir = test_tmpdir();
    // f0 includes f1 ... includes f17: 17 levels of nesting, one more than allowed
    char name[32], text[64];
    for (int i = 0; i <= 17; i++) {
        snprintf(name, sizeof(name), "f%d.conf", i);
        if (i < 17)
            snprintf(text, sizeof(text), "include = f%d.conf\n", i + 1);
        else
            snprintf(text, sizeof(text), "n_layer = 3\n");
        write_conf(dir, name, text);
    }
    Config c;
    config_defaults(&c);
    char err[1024];
    char path[1200];
    snprintf(path, sizeof(path), "%s/f0.conf", dir);
    ck_assert_int_eq(config_load(&c, path, err, sizeof(err)), -1);
    ASSERT_HAS(err, "deeper than 16");
    // 16 levels are fine
    snprintf(path, sizeof(path), "%s/f1.conf", dir);
    config_defaults(&c);
    ck_assert_msg(config_load(&c, path, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(c.n_layer, 3);
}
END_TEST

START_TEST(test_include_missing) {
    const char* dir = test_tmpdir();
    char* p = write_conf(dir, "top.conf", "# header\ninclude = nope.conf\n");
    Config c;
    config_defaults(&c);
    char err[1024];
    ck_assert_int_eq(config_load(&c, p, err, sizeof(err)), -1);
    char want[1300];
    snprintf(want, sizeof(want), "%s:2: ", p);
    ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
    ASSERT_HAS(err, "nope.conf");
    ASSERT_HAS(err, "cannot open");

    char missing[1200];
    snprintf(missing, sizeof(missing), "%s/absent.conf", dir);
    ck_assert_int_eq(config_load(&c, missing, err, sizeof(err)), -1);
    ASSERT_HAS(err, missing);
    ASSERT_HAS(err, "cannot open");
}
END_TEST

// ----------------------------------------------------------------------------
// syntax

START_TEST(test_comments_and_quoting) {
    const char* dir = test_tmpdir();
    char* p = write_conf(dir, "c.conf",
                         "# a whole-line comment\n"
                         "   # an indented comment\n"
                         "\n"
                         "\t\n"
                         "lr = 0.001 # trailing comment\n"
                         "  n_layer=3  \n"
                         "out_dir = runs/a#b\n"
                         "train_data = \"data/x #1/*.bin\"   # quoted '#' and space\n"
                         "val_data = \"  padded  \"\n"
                         "init_from = \"say \\\"hi\\\" \\\\ there\"\n"
                         "attention = relu # c\r\n"
                         "attn.note = \"a # b\"\n"
                         "tokenizer_dir =   x y   \n"
                         "qk_norm = true\n"
                         "shuffle = off\n"
                         "max_steps = 1e3\n"
                         "seed = 9007199254740993\n");
    Config c;
    config_defaults(&c);
    char err[1024];
    ck_assert_msg(config_load(&c, p, err, sizeof(err)) == 0, "%s", err);
    ck_assert(c.lr == 0.001f);
    ck_assert_int_eq(c.n_layer, 3);
    ck_assert_str_eq(c.out_dir, "runs/a#b");
    ck_assert_str_eq(c.train_data, "data/x #1/*.bin");
    ck_assert_str_eq(c.val_data, "  padded  ");
    ck_assert_str_eq(c.init_from, "say \"hi\" \\ there");
    ck_assert_str_eq(c.attention, "relu");
    ck_assert_str_eq(config_attn_get(&c, "note", NULL), "a # b");
    ck_assert_str_eq(c.tokenizer_dir, "x y");
    ck_assert_int_eq(c.qk_norm, 1);
    ck_assert_int_eq(c.shuffle, 0);
    ck_assert_int_eq(c.max_steps, 1000);
    ck_assert(c.seed == 9007199254740993LL); // 2^53 + 1: not representable as a double

    // empty values: allowed for the data globs only
    p = write_conf(dir, "e.conf", "train_data = x\ntrain_data =\nval_data = \"\"\n");
    ck_assert_msg(config_load(&c, p, err, sizeof(err)) == 0, "%s", err);
    ck_assert_str_eq(c.train_data, "");
    ck_assert_str_eq(c.val_data, "");
}
END_TEST

START_TEST(test_errors) {
    expect_load_error("n_layer = 2\nlrr = 3\n", 2, "unknown key 'lrr'", "did you mean 'lr'?");
    expect_load_error("\n\n\nn_layers = 3\n", 4, "'n_layers'", "did you mean 'n_layer'?");
    expect_load_error("learning_rate = 3\n", 1, "'learning_rate'", "did you mean 'lr'?");
    expect_load_error("zzyzx_frobnicate = 1\n", 1, "unknown key 'zzyzx_frobnicate'", NULL);
    {
        // far from every key: no suggestion
        const char* dir = test_tmpdir();
        char* p = write_conf(dir, "x.conf", "zzyzx_frobnicate = 1\n");
        Config c;
        config_defaults(&c);
        char err[1024];
        ck_assert_int_eq(config_load(&c, p, err, sizeof(err)), -1);
        ck_assert_ptr_null(strstr(err, "did you mean"));
    }
    expect_load_error("lr = abc\n", 1, "key 'lr'", "'abc' is not a number");
    expect_load_error("# c\nn_layer = 3x\n", 2, "key 'n_layer'", "'3x' is not a number");
    expect_load_error("lr = 0x10\n", 1, "key 'lr'", "not a number");
    expect_load_error("lr = nan\n", 1, "key 'lr'", "not a number");
    expect_load_error("lr = 1e-3#x\n", 1, "key 'lr'", "not a number"); // '#' needs a space
    expect_load_error("n_layer = 0\n", 1, "key 'n_layer'", "0 is out of range [1, 256]");
    expect_load_error("n_layer = 257\n", 1, "key 'n_layer'", "257 is out of range [1, 256]");
    expect_load_error("lr = -1e-3\n", 1, "key 'lr'", "out of range");
    expect_load_error("beta2 = 1\n", 1, "key 'beta2'", "out of range");
    expect_load_error("n_layer = 1.5\n", 1, "key 'n_layer'", "'1.5' is not an integer");
    expect_load_error("max_steps = 1e-3\n", 1, "key 'max_steps'", "not an integer");
    expect_load_error("seed = -1\n", 1, "key 'seed'", "out of range");
    expect_load_error("optimizer = adam\n", 1, "key 'optimizer'", "adamw|sgd|signsgd|lion");
    expect_load_error("pos_encoding = sinusoidal\n", 1, "'sinusoidal'", "learned|rope|alibi|none");
    expect_load_error("nan_policy = STOP\n", 1, "key 'nan_policy'", "stop|skip");
    expect_load_error("n_layer\n", 1, "expected 'key = value'", "n_layer");
    expect_load_error("n_layer # = 3\n", 1, "expected 'key = value'", NULL);
    expect_load_error(" = 3\n", 1, "missing key", NULL);
    expect_load_error("n_layer =\n", 1, "key 'n_layer'", "empty value");
    expect_load_error("out_dir = # nothing\n", 1, "key 'out_dir'", "empty value");
    expect_load_error("attention = \"\"\n", 1, "key 'attention'", "empty value");
    expect_load_error("out_dir = \"abc\n", 1, "key 'out_dir'", "unterminated quote");
    expect_load_error("out_dir = \"abc\" def\n", 1, "key 'out_dir'", "after the closing quote");
    expect_load_error("qk_norm = maybe\n", 1, "key 'qk_norm'", "not a number");
    expect_load_error("residual = attn_res\n", 1, "key 'residual'",
                      "standard|attnres|delta_attnres");
    expect_load_error("value_residual = 2\n", 1, "key 'value_residual'", "out of range");
    expect_load_error("attn. = 3\n", 1, "attn.", "name");
    expect_load_error("attn.alpha =\n", 1, "attn.alpha", "empty value");
    expect_load_error("include =\n", 1, "include", NULL);
    {
        char text[1200];
        char longv[400];
        memset(longv, 'a', sizeof(longv) - 1);
        longv[sizeof(longv) - 1] = '\0';
        snprintf(text, sizeof(text), "n_layer = 2\nout_dir = %s\n", longv);
        expect_load_error(text, 2, "key 'out_dir'", "at most 255");
        snprintf(text, sizeof(text), "pos_encoding = %.40s\n", longv);
        expect_load_error(text, 1, "key 'pos_encoding'", "at most 31");
        snprintf(text, sizeof(text), "attn.x = %s\n", longv);
        expect_load_error(text, 1, "attn.x", "at most 255");
    }
}
END_TEST

START_TEST(test_error_in_included_file) {
    const char* dir = test_tmpdir();
    write_conf(dir, "inner.conf", "n_layer = 2\n\nn_head = -4\n");
    char* outer = write_conf(dir, "outer.conf", "include = inner.conf\n");
    Config c;
    config_defaults(&c);
    char err[1024];
    ck_assert_int_eq(config_load(&c, outer, err, sizeof(err)), -1);
    ASSERT_HAS(err, "inner.conf:3: key 'n_head'");
    ASSERT_HAS(err, "out of range");
}
END_TEST

START_TEST(test_attn_keys) {
    const char* dir = test_tmpdir();
    char text[4096] = "";
    size_t len = 0;
    for (int i = 0; i < CONFIG_MAX_ATTN; i++)
        len += (size_t)snprintf(text + len, sizeof(text) - len, "attn.k%d = %d\n", i, i);
    // repeats replace without using a new slot
    len += (size_t)snprintf(text + len, sizeof(text) - len, "attn.k5 = five\n");
    char* p = write_conf(dir, "a.conf", text);
    Config c;
    config_defaults(&c);
    char err[1024];
    ck_assert_msg(config_load(&c, p, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(c.n_attn, CONFIG_MAX_ATTN);
    const char* origin;
    ck_assert_str_eq(config_attn_get(&c, "k5", &origin), "five");
    char want[1300];
    snprintf(want, sizeof(want), "%s:%d", p, CONFIG_MAX_ATTN + 1);
    ck_assert_str_eq(origin, want);
    ck_assert_str_eq(config_attn_get(&c, "k31", NULL), "31");

    // one more distinct key is an error naming it
    snprintf(text + len, sizeof(text) - len, "attn.extra = 1\n");
    p = write_conf(dir, "b.conf", text);
    config_defaults(&c);
    ck_assert_int_eq(config_load(&c, p, err, sizeof(err)), -1);
    ASSERT_HAS(err, "attn.extra");
    ASSERT_HAS(err, "too many");
    snprintf(want, sizeof(want), "%s:%d: ", p, CONFIG_MAX_ATTN + 2);
    ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
}
END_TEST

// ----------------------------------------------------------------------------
// command line

START_TEST(test_command_line) {
    Config c;
    config_defaults(&c);
    char err[1024];
    ck_assert_int_eq(config_apply_arg(&c, "lr=0.01", err, sizeof(err)), 0);
    ck_assert(c.lr == 0.01f);
    ck_assert_int_eq(config_apply_arg(&c, "--n_layer=3", err, sizeof(err)), 0);
    ck_assert_int_eq(c.n_layer, 3);
    ck_assert_int_eq(config_apply_arg(&c, "--train_data=my data/*.bin", err, sizeof(err)), 0);
    ck_assert_str_eq(c.train_data, "my data/*.bin");
    ck_assert_int_eq(config_apply_arg(&c, "out_dir=a # b", err, sizeof(err)), 0);
    ck_assert_str_eq(c.out_dir, "a # b"); // the shell already split words: taken literally
    ck_assert_int_eq(config_apply_arg(&c, "attn.alpha=0.5", err, sizeof(err)), 0);
    const char* origin;
    ck_assert_str_eq(config_attn_get(&c, "alpha", &origin), "0.5");
    ck_assert_str_eq(origin, "command line");
    ck_assert_int_eq(config_apply_arg(&c, "--resume=yes", err, sizeof(err)), 0);
    ck_assert_int_eq(c.resume, 1);
    ck_assert_int_eq(config_apply_arg(&c, "train_data=", err, sizeof(err)), 0);
    ck_assert_str_eq(c.train_data, "");

    expect_arg_error("--lrr=1", "unknown key 'lrr'", "did you mean 'lr'?");
    expect_arg_error("lr=abc", "key 'lr'", "not a number");
    expect_arg_error("--n_layer=0", "key 'n_layer'", "out of range [1, 256]");
    expect_arg_error("lr", "'lr'", "key=value");
    expect_arg_error("--=3", "missing key", NULL);
    expect_arg_error("optimizer=adam", "key 'optimizer'", "adamw|sgd|signsgd|lion");
    expect_arg_error("seq_len=", "key 'seq_len'", "empty value");
    expect_arg_error("out_dir=a\nb", "key 'out_dir'", "control character");

    // include from the command line reads the file relative to the working directory
    const char* dir = test_tmpdir();
    write_conf(dir, "inc.conf", "n_head = 3\n");
    char arg[1300];
    snprintf(arg, sizeof(arg), "include=%s/inc.conf", dir);
    ck_assert_msg(config_apply_arg(&c, arg, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(c.n_head, 3);
}
END_TEST

START_TEST(test_closest_key) {
    ck_assert_str_eq(config_closest_key("lrr"), "lr");
    ck_assert_str_eq(config_closest_key("n_layers"), "n_layer");
    ck_assert_str_eq(config_closest_key("batchsize"), "batch_size");
    ck_assert_str_eq(config_closest_key("Seq_Len"), "seq_len");
    ck_assert_str_eq(config_closest_key("n_ctx"), "block_size");
    ck_assert_str_eq(config_closest_key("inclde"), "include");
    ck_assert_ptr_null(config_closest_key("q"));
    ck_assert_ptr_null(config_closest_key("completely_unrelated"));
}
END_TEST

// The one "did you mean" (common/suggest.h): Damerau-Levenshtein distance, its limit, and the
// closest of a list; the distances are counted by hand.
START_TEST(test_suggest) {
    ck_assert_int_eq(suggest_distance("kitten", "sitting"), 3); // 2 substitutions, 1 insertion
    ck_assert_int_eq(suggest_distance("", "abc"), 3);
    ck_assert_int_eq(suggest_distance("abc", "abc"), 0);
    ck_assert_int_eq(suggest_distance("ABC", "abc"), 0);       // letters without case
    ck_assert_int_eq(suggest_distance("lenght", "length"), 1); // one swap (Levenshtein: 2)
    ck_assert_int_eq(suggest_distance("ca", "abc"), 3);        // optimal string alignment
    ck_assert_int_eq(suggest_distance("thetainit", "theta_init"), 1);
    ck_assert_int_eq(suggest_distance("thetainit", "theta0"), 4); // 1 substitution, 3 deletions
    char longer[SUGGEST_MAX_LEN + 2];
    memset(longer, 'a', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    ck_assert_int_gt(suggest_distance(longer, "a"), suggest_limit(1000));
    ck_assert_int_eq(suggest_limit(3), 1);
    ck_assert_int_eq(suggest_limit(4), 2);
    ck_assert_int_eq(suggest_limit(6), 2);
    ck_assert_int_eq(suggest_limit(7), 3);
    // attn.thetainit among ssmax's keys: theta_init (the prefix ranking picked theta0)
    static const char* const ssmax_keys[] = {"theta_init", "theta0", "bias"};
    Suggest sg;
    suggest_init(&sg, "thetainit");
    for (int i = 0; i < 3; i++)
        suggest_offer(&sg, ssmax_keys[i]);
    ck_assert_str_eq(suggest_result(&sg), "theta_init");
    suggest_init(&sg, "xyz"); // nothing within 1 edit
    for (int i = 0; i < 3; i++)
        suggest_offer(&sg, ssmax_keys[i]);
    ck_assert_ptr_null(suggest_result(&sg));
    suggest_init(&sg, "bais"); // a swap
    for (int i = 0; i < 3; i++)
        suggest_offer(&sg, ssmax_keys[i]);
    ck_assert_str_eq(suggest_result(&sg), "bias");
    suggest_init(&sg, "ab"); // ties: the first offered
    suggest_offer(&sg, "ac");
    suggest_offer(&sg, "ad");
    ck_assert_str_eq(suggest_result(&sg), "ac");
    // the three users: config keys, attention variants (attn.* keys: test_readers_hf)
    ck_assert_str_eq(config_closest_key("bacth_size"), "batch_size");
    ck_assert_str_eq(attn_closest("ssmaxx"), "ssmax");
    ck_assert_str_eq(attn_closest("sotfpick"), "softpick");
}
END_TEST

// ----------------------------------------------------------------------------
// write -> load

// Give every field of `c` a value different from its default (awkward strings included).
static void set_all_non_default(Config* c) {
    for (int i = 0; i < CONFIG_NFIELDS; i++) {
        const ConfigField* f = &CONFIG_FIELDS[i];
        void* p = (char*)c + f->offset;
        switch (f->type) {
        case CF_INT:
            *(int*)p = (int)f->max != atoi(f->def) ? (int)f->max : (int)f->min;
            break;
        case CF_LONG:
            *(long long*)p = 9223372036854775807LL;
            break;
        case CF_FLOAT:
            *(float*)p = (float)(f->max * 0.3141592653589793);
            break;
        case CF_STR: {
            char* s = (char*)p;
            if (f->choices) {
                const char* last = strrchr(f->choices, '|') + 1;
                snprintf(s, f->size, "%s", strcmp(last, f->def) ? last : "learned");
                if (strcmp(s, f->def) == 0) {
                    size_t n = strcspn(f->choices, "|");
                    snprintf(s, f->size, "%.*s", (int)n, f->choices);
                }
            } else {
                snprintf(s, f->size, " %s \"x\" #y\\z ", f->key);
            }
            break;
        }
        }
    }
    c->n_attn = 0;
    snprintf(c->attn[c->n_attn].key, sizeof(c->attn[0].key), "attn.alpha");
    snprintf(c->attn[c->n_attn].value, sizeof(c->attn[0].value), "0.25");
    snprintf(c->attn[c->n_attn++].origin, sizeof(c->attn[0].origin), "somewhere:1");
    snprintf(c->attn[c->n_attn].key, sizeof(c->attn[0].key), "attn.layers");
    snprintf(c->attn[c->n_attn].value, sizeof(c->attn[0].value), "\"0-3 # odd\"");
    snprintf(c->attn[c->n_attn++].origin, sizeof(c->attn[0].origin), "command line");
}

START_TEST(test_write_load_round_trip) {
    Config a, b, d;
    config_defaults(&a);
    config_defaults(&d);
    set_all_non_default(&a);
    char what[512];
    // every key differs from the defaults, so the round trip below exercises every key
    ck_assert_int_eq(config_diff(&a, &d, what, sizeof(what)), CONFIG_NFIELDS + 2);

    const char* dir = test_tmpdir();
    char path[1200];
    snprintf(path, sizeof(path), "%s/resolved.conf", dir);
    FILE* f = fopen(path, "w");
    ck_assert_int_eq(config_write(&a, f), 0);
    fclose(f);
    config_defaults(&b);
    char err[1024];
    ck_assert_msg(config_load(&b, path, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(config_diff(&a, &b, what, sizeof(what)) == 0, "round trip differs: %s", what);
    // field by field, bytes included
    for (int i = 0; i < CONFIG_NFIELDS; i++) {
        const ConfigField* fd = &CONFIG_FIELDS[i];
        const char* pa = (const char*)&a + fd->offset;
        const char* pb = (const char*)&b + fd->offset;
        if (fd->type == CF_STR)
            ck_assert_str_eq(pa, pb);
        else
            ck_assert_msg(memcmp(pa, pb, fd->size) == 0, "%s differs", fd->key);
    }
    ck_assert_str_eq(config_attn_get(&b, "layers", NULL), "\"0-3 # odd\"");

    // config_diff notices a single change and names it
    b.lr = a.lr * 2;
    ck_assert_int_eq(config_diff(&a, &b, what, sizeof(what)), 1);
    ASSERT_HAS(what, "lr");
    b.lr = a.lr;
    snprintf(b.attn[0].value, sizeof(b.attn[0].value), "0.5");
    ck_assert_int_eq(config_diff(&a, &b, what, sizeof(what)), 1);
    ASSERT_HAS(what, "attn.alpha");

    // defaults round trip too, and the written file names every key in table order
    snprintf(path, sizeof(path), "%s/defaults.conf", dir);
    f = fopen(path, "w");
    ck_assert_int_eq(config_write(&d, f), 0);
    fclose(f);
    set_all_non_default(&b);
    b.n_attn = 0;
    ck_assert_msg(config_load(&b, path, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(config_diff(&d, &b, what, sizeof(what)) == 0, "defaults differ: %s", what);
    f = fopen(path, "r");
    char line[512];
    int next = 0;
    while (fgets(line, sizeof(line), f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        size_t klen = strlen(CONFIG_FIELDS[next].key);
        ck_assert_msg(strncmp(line, CONFIG_FIELDS[next].key, klen) == 0 && line[klen] == ' ',
                      "expected key %s, got %s", CONFIG_FIELDS[next].key, line);
        next++;
    }
    fclose(f);
    ck_assert_int_eq(next, CONFIG_NFIELDS);
}
END_TEST

// ----------------------------------------------------------------------------
// validation

static void expect_invalid(const char* args, const char* s1, const char* s2) {
    Config c;
    config_defaults(&c);
    char err[1024];
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", args);
    for (char* tok = strtok(buf, " "); tok; tok = strtok(NULL, " "))
        ck_assert_msg(config_apply_arg(&c, tok, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(config_validate(&c, err, sizeof(err)) == -1, "valid: %s", args);
    ASSERT_HAS(err, s1);
    if (s2) ASSERT_HAS(err, s2);
}

START_TEST(test_validate) {
    expect_invalid("n_embd=100 n_head=12", "n_embd", "n_head");
    expect_invalid("seq_len=2048", "seq_len", "block_size");
    expect_invalid("block_size=32", "seq_len", "block_size");
    expect_invalid("eval_seq_len=2000", "eval_seq_len", "block_size");
    expect_invalid("min_lr=0.01 lr=0.001", "min_lr", "lr");
    expect_invalid("warmup_steps=200 max_steps=100", "warmup_steps", "max_steps");
    expect_invalid("pos_encoding=rope n_embd=36 n_head=4", "rope", "head size");
    expect_invalid("vocab_size=256", "vocab_size", "gpt2");
    expect_invalid("tokenizer=byte vocab_size=100", "vocab_size", "byte");
    expect_invalid("tokenizer=byte vocab_size=256", "vocab_size", "257"); // EOT is id 256

    // valid corner cases
    Config c;
    config_defaults(&c);
    char err[1024];
    ck_assert_int_eq(config_apply_arg(&c, "max_steps=0", err, sizeof(err)), 0);
    ck_assert_msg(config_validate(&c, err, sizeof(err)) == 0, "%s",
                  err); // 0 steps: no warm-up check
    ck_assert_int_eq(config_apply_arg(&c, "tokenizer=byte", err, sizeof(err)), 0);
    ck_assert_int_eq(config_apply_arg(&c, "vocab_size=257", err, sizeof(err)), 0); // bytes + EOT
    ck_assert_int_eq(config_apply_arg(&c, "seq_len=1024", err, sizeof(err)), 0);
    ck_assert_msg(config_validate(&c, err, sizeof(err)) == 0, "%s", err);

    // values set in code bypass the parser: validation re-checks ranges and choices
    config_defaults(&c);
    c.n_layer = 0;
    ck_assert_int_eq(config_validate(&c, err, sizeof(err)), -1);
    ASSERT_HAS(err, "n_layer");
    config_defaults(&c);
    snprintf(c.optimizer, sizeof(c.optimizer), "adam");
    ck_assert_int_eq(config_validate(&c, err, sizeof(err)), -1);
    ASSERT_HAS(err, "optimizer");
}
END_TEST

START_TEST(test_help) {
    const char* dir = test_tmpdir();
    char path[1200];
    snprintf(path, sizeof(path), "%s/help.txt", dir);
    FILE* f = fopen(path, "w");
    config_print_help(f);
    fclose(f);
    f = fopen(path, "r");
    char line[1024];
    int seen[64] = {0};
    while (fgets(line, sizeof(line), f)) {
        size_t n = strlen(line);
        ck_assert_msg(n <= 101, "help line longer than 100 columns: %s", line);
        ck_assert_msg(n < 2 || line[n - 2] != ' ', "trailing space: %s", line);
        char key[64];
        if (line[0] == ' ' && line[1] == ' ' && line[2] != ' ' && sscanf(line, "%63s", key) == 1) {
            const ConfigField* fd = config_field(key);
            if (fd) seen[fd - CONFIG_FIELDS]++;
        }
    }
    fclose(f);
    for (int i = 0; i < CONFIG_NFIELDS; i++)
        ck_assert_msg(seen[i] == 1, "key %s listed %d times", CONFIG_FIELDS[i].key, seen[i]);
}
END_TEST

static Suite* config_suite(void) {
    Suite* s = suite_create("config");
    TCase* tc = tcase_create("parse");
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_include_chain);
    tcase_add_test(tc, test_include_cycle);
    tcase_add_test(tc, test_include_depth);
    tcase_add_test(tc, test_include_missing);
    tcase_add_test(tc, test_comments_and_quoting);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_error_in_included_file);
    tcase_add_test(tc, test_attn_keys);
    tcase_add_test(tc, test_command_line);
    tcase_add_test(tc, test_closest_key);
    tcase_add_test(tc, test_suggest);
    suite_add_tcase(s, tc);
    tc = tcase_create("write_validate");
    tcase_add_test(tc, test_write_load_round_trip);
    tcase_add_test(tc, test_validate);
    tcase_add_test(tc, test_help);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(config_suite)
