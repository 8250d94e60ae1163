// tests/test_open.c: opening a model from any source (model/open.h) and config text parsed from
// memory (config_load_text):
//   - config text read from memory gives the same Config as the same text read from a file, and
//     its errors name the text's source and line;
//   - an attnlab model file, llmc:PATH and hf:DIR each reopen into a model whose logits equal the
//     saved model's bit for bit, with the config the source implies;
//   - the trainer's init_from mode builds from the run's config: a variant's own tensors that
//     the file lacks keep their initial values and are named, shared tensors are the file's;
//     sizes that differ are refused naming the file;
//   - bad sources (missing, wrong kind, damaged saved config) fail naming the file.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "model/checkpoint.h"
#include "model/hf.h"
#include "model/open.h"
#include "tests/model_util.h"
#include "tests/reader_util.h"
#include "tests/testutil.h"

static char* config_text(const Config* c) {
    char* buf = NULL;
    size_t len = 0;
    FILE* f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(config_write(c, f), 0);
    fclose(f);
    return buf;
}

static void write_text(const char* path, const char* text) {
    FILE* f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

START_TEST(test_config_text_matches_file) {
    const char* text = "# a config held in memory\n"
                       "n_layer = 3\n"
                       "attention = \"0:ssmax,1-2:softmax\"   # quoted, then a comment\n"
                       "lr = 0.00125\n"
                       "\n"
                       "attn.sink = learn\n"
                       "out_dir = runs/x";
    Config a, b;
    char err[1024], p[700];
    config_defaults(&a);
    config_defaults(&b);
    ck_assert_msg(config_load_text(&a, text, "mem", err, sizeof(err)) == 0, "%s", err);
    snprintf(p, sizeof(p), "%s/same.conf", test_tmpdir());
    write_text(p, text);
    ck_assert_msg(config_load(&b, p, err, sizeof(err)) == 0, "%s", err);
    char what[512];
    ck_assert_msg(config_diff(&a, &b, what, sizeof(what)) == 0, "differ: %s", what);
    ck_assert_int_eq(a.n_layer, 3);
    ck_assert_str_eq(a.attention, "0:ssmax,1-2:softmax");
    ck_assert(a.lr == 0.00125f);
    ck_assert_str_eq(a.out_dir, "runs/x"); // the last line has no newline
    const char* origin = NULL;
    ck_assert_str_eq(config_attn_get(&a, "sink", &origin), "learn");
    ck_assert_str_eq(origin, "mem:6");
    // the resolved config the trainer writes reads back to the same Config
    char* t = config_text(&a);
    Config c;
    config_defaults(&c);
    ck_assert_msg(config_load_text(&c, t, "resolved", err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(config_diff(&a, &c, what, sizeof(what)) == 0, "differ: %s", what);
    free(t);
    // errors name the source and the line
    config_defaults(&c);
    ck_assert_int_eq(
        config_load_text(&c, "n_layer = 2\nn_layr = 3\n", "CK (saved config)", err, sizeof(err)),
        -1);
    ck_assert_msg(strstr(err, "CK (saved config):2") && strstr(err, "n_layr"), "%s", err);
    ck_assert_int_eq(config_load_text(&c, "\n\nn_head\n", "T", err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "T:3") && strstr(err, "key = value"), "%s", err);
}
END_TEST

// A tiny model with random weights, its config (attention `att`), saved as an attnlab file.
static void saved_model(GPT2* m, Config* c, const char* att, const char* path) {
    test_tiny_config(c, 300, 2, 2, 32, 16);
    util_strlcpy(c->attention, att, sizeof(c->attention));
    test_build_model(m, c, 1, 16, 7);
    Rng r;
    rng_seed(&r, 5);
    fill_normal(m->params, m->num_params, 0.05f, &r);
    size_t V = (size_t)m->cfg.vocab_size, C = (size_t)m->cfg.n_embd;
    memset(m->params + m->specs[P_WTE].offset + V * C, 0,
           sizeof(float) * ((size_t)m->cfg.padded_vocab - V) * C);
    char err[1024];
    char* t = config_text(c);
    ck_assert_msg(ckpt_save_model(m, path, 42, t, err, sizeof(err)) == 0, "%s", err);
    free(t);
}

// Logits of m and of the model opened from `source` on the same tokens are identical.
static void same_logits(GPT2* m, const char* source, ModelOpen* mo) {
    char err[2048];
    GPT2 o;
    ck_assert_msg(model_open(&o, source, mo, err, sizeof(err)) == 0, "%s: %s", source, err);
    gpt2_alloc_acts(&o, 1, 16, 2);
    ck_assert_int_eq(o.num_params, m->num_params);
    int in[16];
    for (int i = 0; i < 16; i++)
        in[i] = (i * 37 + 11) % 300;
    gpt2_forward(m, in, NULL, 1, 16);
    gpt2_forward(&o, in, NULL, 1, 16);
    ck_assert_msg(memcmp(m->logits, o.logits, sizeof(float) * 16 * m->cfg.padded_vocab) == 0,
                  "%s: logits differ", source);
    gpt2_free(&o);
}

START_TEST(test_open_every_source) {
    const char* dir = test_tmpdir();
    char ck[700], llmc[700], hf[700], src[800], err[2048];
    snprintf(ck, sizeof(ck), "%s/model_00000042.bin", dir);
    snprintf(llmc, sizeof(llmc), "%s/m.llmc.bin", dir);
    snprintf(hf, sizeof(hf), "%s/hf", dir);
    // an attnlab file of a per-layer variant with hyperparameters: rebuilt from its saved config
    GPT2 a;
    Config ca;
    saved_model(&a, &ca, "0:ssmax,1:softmax", ck);
    ModelOpen mo = {.run = NULL};
    same_logits(&a, ck, &mo);
    ck_assert_int_eq(mo.kind, MODEL_SRC_ATTNLAB);
    ck_assert_int_eq(mo.step, 42);
    char what[512];
    ck_assert_msg(config_diff(&mo.cfg, &ca, what, sizeof(what)) == 0, "differ: %s", what);
    gpt2_free(&a);
    // plain GPT-2 through llm.c and Hugging Face files
    GPT2 p;
    Config cp;
    saved_model(&p, &cp, "softmax", ck);
    ck_assert_msg(llmc_save(&p, llmc, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(hf_export(&p, hf, NULL, err, sizeof(err)) == 0, "%s", err);
    snprintf(src, sizeof(src), "llmc:%s", llmc);
    same_logits(&p, src, &mo);
    ck_assert_int_eq(mo.kind, MODEL_SRC_LLMC);
    ck_assert_int_eq(mo.step, 0);
    ck_assert_int_eq(mo.cfg.n_layer, 2);
    ck_assert_int_eq(mo.cfg.vocab_size, 300);
    ck_assert_str_eq(mo.cfg.attention, "softmax");
    snprintf(src, sizeof(src), "hf:%s", hf);
    same_logits(&p, src, &mo);
    ck_assert_int_eq(mo.kind, MODEL_SRC_HF);
    ck_assert_int_eq(mo.cfg.block_size, 16);
    ck_assert_str_eq(mo.cfg.pos_encoding, "learned");
    gpt2_free(&p);
}
END_TEST

START_TEST(test_open_init_from) {
    const char* dir = test_tmpdir();
    char ck[700], err[2048];
    snprintf(ck, sizeof(ck), "%s/model_00000042.bin", dir);
    GPT2 a;
    Config ca;
    saved_model(&a, &ca, "softmax", ck);
    // the run asks for gated attention: its gate tensors are not in the file
    Config run = ca;
    util_strlcpy(run.attention, "gated", sizeof(run.attention));
    run.seed = 99;
    ModelOpen mo = {.run = &run};
    GPT2 g;
    ck_assert_msg(model_open(&g, ck, &mo, err, sizeof(err)) == 0, "%s", err);
    ck_assert_str_eq(mo.cfg.attention, "gated");
    ck_assert_msg(strstr(mo.note, "gated."), "note: %s", mo.note);
    GPT2 fresh;
    test_build_model(&fresh, &run, 1, 16, 99);
    for (int i = 0; i < g.nspecs; i++) {
        const ParamSpec* s = &g.specs[i];
        int j = gpt2_find_spec(&a, s->name);
        const float* want = j >= 0 ? a.params + a.specs[j].offset : fresh.params + s->offset;
        ck_assert_msg(memcmp(g.params + s->offset, want, sizeof(float) * s->size) == 0,
                      "%s: not the %s values", s->name, j >= 0 ? "file's" : "initial");
    }
    gpt2_free(&fresh);
    gpt2_free(&g);
    // "scratch" is the initialisation alone
    ModelOpen ms = {.run = &run};
    ck_assert_msg(model_open(&g, "scratch", &ms, err, sizeof(err)) == 0, "%s", err);
    test_build_model(&fresh, &run, 1, 16, 99);
    ck_assert(memcmp(g.params, fresh.params, sizeof(float) * g.num_params) == 0);
    gpt2_free(&fresh);
    gpt2_free(&g);
    // other sizes are refused, naming the file
    run.n_layer = 3;
    ck_assert_int_eq(model_open(&g, ck, &mo, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, ck) && strstr(err, "sizes differ"), "%s", err);
    gpt2_free(&a);
}
END_TEST

// A run directory is a model source for every tool: model_open takes its newest complete
// checkpoint, and ./evaluate, ./generate and ./export accept the directory where they accept a
// model file; an llm.c file named without its prefix opens as llm.c for the tools.
START_TEST(test_open_run_directory) {
    char dir[700], out[800], args[2400], outbuf[8192], err[2048];
    snprintf(dir, sizeof(dir), "%s/rundir", test_tmpdir());
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    test_write_shards(dir, 257, 7, 4000, 1000);
    Config c;
    test_run_config(&c, dir, "run", 257);
    c.max_steps = 6;
    c.checkpoint_every = 3;
    c.keep_last = 5;
    c.eval_every = 0;
    c.log_every = 1;
    test_train_ok(&c);
    snprintf(out, sizeof(out), "%s", c.out_dir);
    // the newest complete checkpoint is step 6; with its state file gone, step 3
    GPT2 m, f;
    ModelOpen mo = {.run = NULL};
    ck_assert_msg(model_open(&m, out, &mo, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(mo.step, 6);
    char p6[900];
    snprintf(p6, sizeof(p6), "%s/model_00000006.bin", out);
    ModelOpen mf = {.run = NULL};
    ck_assert_msg(model_open(&f, p6, &mf, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(m.num_params, f.num_params);
    ck_assert_int_eq(memcmp(m.params, f.params, m.num_params * sizeof(float)), 0);
    gpt2_free(&m);
    gpt2_free(&f);
    char st6[900];
    snprintf(st6, sizeof(st6), "%s/state_00000006.bin", out);
    ck_assert_int_eq(unlink(st6), 0);
    ck_assert_msg(model_open(&m, out, &mo, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(mo.step, 3);
    gpt2_free(&m);
    // the tools
    snprintf(args, sizeof(args), "--checkpoint %s --data '%s/val_*.bin' --lengths 1 --batches 1",
             out, dir);
    ck_assert_msg(rd_run("evaluate", args, outbuf, sizeof(outbuf)) == 0, "%s", outbuf);
    snprintf(args, sizeof(args), "--checkpoint %s --n 1 --tokens 4", out);
    ck_assert_msg(rd_run("generate", args, outbuf, sizeof(outbuf)) == 0, "%s", outbuf);
    snprintf(args, sizeof(args), "--checkpoint %s --format llmc --out %s/m.llmc.bin", out, dir);
    ck_assert_msg(rd_run("export", args, outbuf, sizeof(outbuf)) == 0, "%s", outbuf);
    ck_assert_msg(strstr(outbuf, "step 3"), "%s", outbuf);
    // that llm.c file, named without llmc:, opens as one for the tools
    char lp[900];
    snprintf(lp, sizeof(lp), "%s/m.llmc.bin", dir);
    ck_assert_msg(model_open(&m, lp, &mo, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(mo.kind, MODEL_SRC_LLMC);
    gpt2_free(&m);
}
END_TEST

START_TEST(test_open_bad_sources) {
    const char* dir = test_tmpdir();
    char ck[700], bad[700], src[800], err[2048];
    snprintf(ck, sizeof(ck), "%s/model_00000042.bin", dir);
    snprintf(bad, sizeof(bad), "%s/bad_config.bin", dir);
    GPT2 a, o;
    Config ca;
    saved_model(&a, &ca, "softmax", ck);
    ck_assert_msg(ckpt_save_model(&a, bad, 1, "n_layer = 2\nn_layr = 2\n", err, sizeof(err)) == 0,
                  "%s", err);
    ModelOpen mo = {.run = NULL};
    struct {
        const char* source;
        const char* want[2];
    } cases[5];
    char missing[700], llmc_of_ck[800], hf_missing[800], want_hf[800], want_bad[800];
    snprintf(missing, sizeof(missing), "%s/nope.bin", dir);
    snprintf(llmc_of_ck, sizeof(llmc_of_ck), "llmc:%s", ck);
    snprintf(hf_missing, sizeof(hf_missing), "hf:%s/nohf", dir);
    snprintf(want_hf, sizeof(want_hf), "%s/nohf/config.json", dir);
    snprintf(want_bad, sizeof(want_bad), "%s (saved config):2", bad);
    cases[0].source = missing, cases[0].want[0] = missing, cases[0].want[1] = "cannot open";
    cases[1].source = llmc_of_ck, cases[1].want[0] = ck, cases[1].want[1] = "not an llm.c";
    cases[2].source = hf_missing, cases[2].want[0] = want_hf, cases[2].want[1] = "";
    cases[3].source = bad, cases[3].want[0] = want_bad, cases[3].want[1] = "n_layr";
    cases[4].source = "scratch", cases[4].want[0] = "scratch", cases[4].want[1] = "llmc:PATH";
    for (int k = 0; k < 5; k++) {
        err[0] = '\0';
        ck_assert_int_eq(model_open(&o, cases[k].source, &mo, err, sizeof(err)), -1);
        for (int w = 0; w < 2; w++)
            ck_assert_msg(strstr(err, cases[k].want[w]), "%s: '%s' not in: %s", cases[k].source,
                          cases[k].want[w], err);
    }
    // an llm.c file given as a plain path to init_from says how to load it
    char llmc[700];
    snprintf(llmc, sizeof(llmc), "%s/m.llmc.bin", dir);
    ck_assert_msg(llmc_save(&a, llmc, err, sizeof(err)) == 0, "%s", err);
    ModelOpen init = {.run = &ca};
    ck_assert_int_eq(model_open(&o, llmc, &init, err, sizeof(err)), -1);
    snprintf(src, sizeof(src), "init_from=llmc:%s", llmc);
    ck_assert_msg(strstr(err, src), "%s", err);
    // a directory without a complete checkpoint names itself
    char empty[700];
    snprintf(empty, sizeof(empty), "%s/empty_run", dir);
    ck_assert_int_eq(mkdir(empty, 0755), 0);
    ck_assert_int_eq(model_open(&o, empty, &mo, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, empty) && strstr(err, "no complete checkpoint"), "%s", err);
    gpt2_free(&a);
}
END_TEST

static Suite* open_suite(void) {
    Suite* s = suite_create("open");
    TCase* tc = tcase_create("open");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_config_text_matches_file);
    tcase_add_test(tc, test_open_every_source);
    tcase_add_test(tc, test_open_init_from);
    tcase_add_test(tc, test_open_bad_sources);
    tcase_add_test(tc, test_open_run_directory);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(open_suite)
