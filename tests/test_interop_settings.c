// tests/test_interop_settings.c: every model setting the exporters must carry, through ./export
// and back. For every position encoding, every residual mode and value_residual (and one model
// combining the non-default ones), a 2-layer model with random weights is saved as an attnlab
// model file and exported with the real ./export tool to a Hugging Face directory and to an llm.c
// file. Then:
//   - hf:DIR opened as saved (model_open without a run config, the path of ./evaluate and the
//     other tools) has the setting in its config and gives the saved model's logits bit for bit;
//   - ./train (max_steps = 0: evaluation only) with init_from = the attnlab file, hf:DIR and, where
//     the format holds the setting, llmc:FILE writes the same val_loss to the last bit (the same
//     float weights through the same code: no tolerance is needed, and any lost tensor would
//     show, since every tensor is random and differs from its initial value);
//   - ./export --format hf refuses every setting but learned / standard / 0 (and any attention
//     variant but softmax) unless --allow-nonstandard, naming it and writing nothing; with the
//     flag config.json says model_type attnlab-gpt2 / AttnlabGPT2LMHeadModel (a model type no
//     GPT-2 loader takes for GPT-2), plain GPT-2 keeps gpt2 / GPT2LMHeadModel, byte for byte
//     with or without the flag; the numpy reference warns about RoPE positions;
//   - llm.c's header has no field for positions, residual mode or value residual: ./export
//     --format llmc refuses any setting but learned / standard / 0, exits non-zero, names the
//     setting, and leaves no file;
//   - config.json's attnlab_* keys are read strictly (unknown names, flags other than 0/1);
//   - the trainer's init_from = hf:DIR of the FIRE model under pos_encoding = learned runs, with a
//     note on stderr naming both settings.
// The model's tensors are N(0, 0.2) with LayerNorm gains around 1 (as test_interop.c), so the
// logits are far from uniform and depend on every tensor.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/util.h"
#include "model/checkpoint.h"
#include "model/hf.h"
#include "model/open.h"
#include "model/residual.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

#define V 300

typedef struct {
    int pos, residual, value_residual;
} Setting;

static char* config_text(const Config* c) {
    char* buf = NULL;
    size_t len = 0;
    FILE* f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(config_write(c, f), 0);
    fclose(f);
    return buf;
}

static void apply(Config* c, const Setting* s) {
    util_strlcpy(c->pos_encoding, attn_pos_name(s->pos), sizeof(c->pos_encoding));
    util_strlcpy(c->residual, resid_name(s->residual), sizeof(c->residual));
    c->value_residual = s->value_residual;
}

// Exit code of a shell command; its stderr into *err_text (malloc'd) when given.
static int run(const char* cmd, const char* errfile, char** err_text) {
    char full[8192];
    ck_assert((size_t)snprintf(full, sizeof(full), "%s >/dev/null 2>%s", cmd, errfile) <
              sizeof(full));
    int st = system(full);
    if (err_text) {
        size_t len;
        char e[1200];
        *err_text = util_read_file(errfile, &len, e, sizeof(e));
        ck_assert_msg(*err_text != NULL, "%s", e);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

// val_loss of ./train evaluating the model `init_from` under config c (max_steps = 0).
static float train_val_loss(const Config* base, const char* init_from, const char* out) {
    Config c = *base;
    c.max_steps = 0;
    util_strlcpy(c.init_from, init_from, sizeof(c.init_from));
    char od[sizeof(c.out_dir) + 16];
    ck_assert((size_t)snprintf(od, sizeof(od), "%s-%s", base->out_dir, out) < sizeof(c.out_dir));
    util_strlcpy(c.out_dir, od, sizeof(c.out_dir));
    test_train_ok(&c);
    double val = 0;
    test_read_losses(c.out_dir, NULL, 0, &val);
    return (float)val;
}

// DIR/config.json names GPT-2 (plain) or attnlab's own model type, which no GPT-2 loader takes
// for GPT-2 (not_gpt2), and nothing else.
static void expect_model_type(const char* dir, int plain, const char* label) {
    char p[1200], e[1300];
    size_t len;
    snprintf(p, sizeof(p), "%s/config.json", dir);
    char* cj = util_read_file(p, &len, e, sizeof(e));
    ck_assert_msg(cj != NULL, "%s: %s", label, e);
    const int gpt2 = strstr(cj, "\"model_type\": \"gpt2\"") &&
                     strstr(cj, "\"architectures\": [\"GPT2LMHeadModel\"]");
    const int own = strstr(cj, "\"model_type\": \"attnlab-gpt2\"") &&
                    strstr(cj, "\"architectures\": [\"AttnlabGPT2LMHeadModel\"]") &&
                    !strstr(cj, "[\"GPT2LMHeadModel\"]");
    ck_assert_msg(plain ? gpt2 && !strstr(cj, "attnlab") : own && !strstr(cj, "\"gpt2\""),
                  "%s: config.json does not say %s:\n%s", label,
                  plain ? "gpt2 / GPT2LMHeadModel" : "attnlab-gpt2 / AttnlabGPT2LMHeadModel", cj);
    free(cj);
}

// A refused export wrote nothing.
static void expect_hf_absent(const char* dir, const char* label) {
    char p[1200];
    struct stat st;
    snprintf(p, sizeof(p), "%s/config.json", dir);
    ck_assert_msg(stat(p, &st) != 0, "%s: a refused export left %s", label, p);
    snprintf(p, sizeof(p), "%s/model.safetensors", dir);
    ck_assert_msg(stat(p, &st) != 0, "%s: a refused export left %s", label, p);
}

static void roundtrip(const Setting* s, int k, const char* dir) {
    char label[160], ck[1100], hf[1100], llmc[1100], errf[1100], cmd[4096], err[2048];
    snprintf(label, sizeof(label), "pos_encoding=%s residual=%s value_residual=%d",
             attn_pos_name(s->pos), resid_name(s->residual), s->value_residual);
    snprintf(ck, sizeof(ck), "%s/s%d_model.bin", dir, k);
    snprintf(hf, sizeof(hf), "%s/s%d_hf", dir, k);
    snprintf(llmc, sizeof(llmc), "%s/s%d.llmc.bin", dir, k);
    snprintf(errf, sizeof(errf), "%s/s%d.stderr", dir, k);
    char out[64];
    snprintf(out, sizeof(out), "run%d", k);
    Config c;
    test_run_config(&c, dir, out, V);
    apply(&c, s);
    // the model: every tensor random
    GPT2 m;
    test_build_model(&m, &c, 1, c.seq_len, 3);
    Rng r;
    rng_seed(&r, 100 + (uint64_t)k);
    fill_normal(m.params, m.num_params, 0.2f, &r);
    for (int sp = 0; sp < GPT2_NUM_LLMC; sp++)
        if (sp == P_LN1W || sp == P_LN2W || sp == P_LNFW)
            for (size_t i = 0; i < m.specs[sp].size; i++)
                m.params[m.specs[sp].offset + i] += 1.0f;
    const size_t Vr = (size_t)m.cfg.vocab_size, C = (size_t)m.cfg.n_embd;
    memset(m.params + m.specs[P_WTE].offset + Vr * C, 0,
           sizeof(float) * ((size_t)m.cfg.padded_vocab - Vr) * C);
    char* t = config_text(&c);
    ck_assert_msg(ckpt_save_model(&m, ck, 0, t, err, sizeof(err)) == 0, "%s", err);
    free(t);
    // ./export to both formats; a setting GPT-2 lacks only with --allow-nonstandard, and then
    // under a model type no GPT-2 loader takes for GPT-2
    const char* exe_dir = test_build_dir();
    const int plain =
        s->pos == ATTN_POS_LEARNED && s->residual == GPT2_RESID_STANDARD && !s->value_residual;
    char* se = NULL;
    int rc;
    if (!plain) {
        snprintf(cmd, sizeof(cmd), "%s/export --checkpoint %s --format hf --out %s --no-tokenizer",
                 exe_dir, ck, hf);
        rc = run(cmd, errf, &se);
        ck_assert_msg(rc == 2, "%s: ./export --format hf of a non-GPT-2 model exited %d: %s", label,
                      rc, se);
        char want[128];
        if (s->pos != ATTN_POS_LEARNED)
            snprintf(want, sizeof(want), "pos_encoding = %s", attn_pos_name(s->pos));
        else if (s->residual != GPT2_RESID_STANDARD)
            snprintf(want, sizeof(want), "residual = %s", resid_name(s->residual));
        else
            snprintf(want, sizeof(want), "value_residual = 1");
        ck_assert_msg(strstr(se, want) && strstr(se, "--allow-nonstandard"),
                      "%s: the refusal does not name '%s' and the flag: %s", label, want, se);
        expect_hf_absent(hf, label);
        free(se);
    }
    snprintf(cmd, sizeof(cmd), "%s/export --checkpoint %s --format hf --out %s --no-tokenizer%s",
             exe_dir, ck, hf, plain ? "" : " --allow-nonstandard");
    rc = run(cmd, errf, &se);
    ck_assert_msg(rc == 0, "%s: ./export --format hf exited %d: %s", label, rc, se);
    free(se);
    expect_model_type(hf, plain, label);
    if (s->pos == ATTN_POS_ROPE && system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") == 0) {
        // the numpy reference computes learned positions: it says so, as for attention
        snprintf(cmd, sizeof(cmd),
                 "/usr/bin/python3 %s/tests/ref/ref_gpt2.py --model %s --data '%s/val_*.bin' -B 1 "
                 "-T 8 --batches 1",
                 test_repo_root(), hf, dir);
        rc = run(cmd, errf, &se);
        ck_assert_msg(rc == 0 && strstr(se, "warning: position encoding rope is not learned"),
                      "%s: ref_gpt2.py exited %d without the positions warning: %s", label, rc, se);
        free(se);
    }
    const int llmc_ok = plain; // llm.c's header holds no other setting
    snprintf(cmd, sizeof(cmd), "%s/export --checkpoint %s --format llmc --out %s", exe_dir, ck,
             llmc);
    rc = run(cmd, errf, &se);
    if (llmc_ok) {
        ck_assert_msg(rc == 0, "%s: ./export --format llmc exited %d: %s", label, rc, se);
    } else {
        struct stat st;
        ck_assert_msg(rc != 0, "%s: ./export --format llmc accepted a setting llm.c cannot hold",
                      label);
        ck_assert_msg(strstr(se, "llm.c model file holds GPT-2 with") &&
                          strstr(se, attn_pos_name(s->pos)) && strstr(se, resid_name(s->residual)),
                      "%s: the refusal does not name the setting: %s", label, se);
        ck_assert_msg(stat(llmc, &st) != 0, "%s: a refused export left %s", label, llmc);
        ck_assert_msg(!strstr(se, "is not llm.c's softmax"), "%s: a misleading warning: %s", label,
                      se);
    }
    free(se);
    // hf:DIR as saved (the tools' path): the setting and the logits come back
    char src[1200];
    snprintf(src, sizeof(src), "hf:%s", hf);
    ModelOpen mo = {.run = NULL};
    GPT2 o;
    ck_assert_msg(model_open(&o, src, &mo, err, sizeof(err)) == 0, "%s: %s", label, err);
    ck_assert_msg(strcmp(mo.cfg.pos_encoding, attn_pos_name(s->pos)) == 0 &&
                      strcmp(mo.cfg.residual, resid_name(s->residual)) == 0 &&
                      mo.cfg.value_residual == s->value_residual,
                  "%s: hf:DIR opens as pos_encoding=%s residual=%s value_residual=%d", label,
                  mo.cfg.pos_encoding, mo.cfg.residual, mo.cfg.value_residual);
    ck_assert_int_eq(o.num_params, m.num_params);
    gpt2_alloc_acts(&o, 1, c.seq_len, 2);
    int in[32];
    for (int i = 0; i < c.seq_len; i++)
        in[i] = (i * 37 + 11) % V;
    gpt2_forward(&m, in, NULL, 1, c.seq_len);
    gpt2_forward(&o, in, NULL, 1, c.seq_len);
    ck_assert_msg(memcmp(m.logits, o.logits,
                         sizeof(float) * (size_t)c.seq_len * (size_t)m.cfg.padded_vocab) == 0,
                  "%s: hf:DIR gives other logits than the saved model", label);
    gpt2_free(&o);
    gpt2_free(&m);
    // the trainer's init_from from every source: the same validation loss, bit for bit
    const float l_ck = train_val_loss(&c, ck, "ck");
    const float l_hf = train_val_loss(&c, src, "hf");
    printf("%-58s val_loss attnlab %.9g  hf %.9g", label, l_ck, l_hf);
    ck_assert_msg(l_ck == l_hf, "%s: val_loss %.9g from the model file, %.9g through hf:", label,
                  l_ck, l_hf);
    if (llmc_ok) {
        snprintf(src, sizeof(src), "llmc:%s", llmc);
        const float l_llmc = train_val_loss(&c, src, "llmc");
        printf("  llmc %.9g", l_llmc);
        ck_assert_msg(l_ck == l_llmc,
                      "%s: val_loss %.9g from the model file, %.9g through llmc:", label, l_ck,
                      l_llmc);
    }
    printf("\n");
    if (s->pos == ATTN_POS_FIRE && s->residual == GPT2_RESID_STANDARD) {
        // the trainer on other positions than the file's: a note names both
        Config o2 = c;
        util_strlcpy(o2.pos_encoding, attn_pos_name(ATTN_POS_LEARNED), sizeof(o2.pos_encoding));
        snprintf(src, sizeof(src), "hf:%s", hf);
        util_strlcpy(o2.init_from, src, sizeof(o2.init_from));
        o2.max_steps = 0;
        ck_assert((size_t)snprintf(o2.out_dir, sizeof(o2.out_dir), "%s-other", c.out_dir) <
                  sizeof(o2.out_dir));
        char* te = NULL;
        ck_assert_int_eq(test_train(&o2, &te), 0);
        ck_assert_msg(strstr(te, "weights trained with pos_encoding = fire") &&
                          strstr(te, "this run uses learned"),
                      "no note on the differing positions: %s", te);
        free(te);
    }
}

START_TEST(test_every_setting_roundtrips) {
    char dir[600];
    util_strlcpy(dir, test_tmpdir(), sizeof(dir)); // a new directory at every call
    test_write_shards(dir, V, 37, 4096, 2048);
    Setting s[ATTN_POS_COUNT + GPT2_RESID_COUNT + 2];
    int n = 0;
    for (int p = 0; p < ATTN_POS_COUNT; p++)
        s[n++] = (Setting){p, GPT2_RESID_STANDARD, 0};
    for (int rm = 0; rm < GPT2_RESID_COUNT; rm++)
        if (rm != GPT2_RESID_STANDARD) s[n++] = (Setting){ATTN_POS_LEARNED, rm, 0};
    s[n++] = (Setting){ATTN_POS_LEARNED, GPT2_RESID_STANDARD, 1};
    s[n++] = (Setting){ATTN_POS_FIRE, GPT2_RESID_DELTA, 1};
    for (int k = 0; k < n; k++)
        roundtrip(&s[k], k, dir);
}
END_TEST

// config.json's attnlab_* settings are read strictly: an unknown name or a flag other than 0/1
// is refused, naming the file, the key and the value.
START_TEST(test_bad_settings_rejected) {
    const char* dir = test_tmpdir();
    const char* bad[][3] = {
        {"\"attnlab_pos_encoding\": \"firee\"", "attnlab_pos_encoding", "firee"},
        {"\"attnlab_pos_encoding\": 5", "attnlab_pos_encoding", "not a string"},
        {"\"attnlab_residual\": \"delta\"", "attnlab_residual", "delta"},
        {"\"attnlab_value_residual\": 2", "attnlab_value_residual", "0 or 1"},
        {"\"attnlab_qk_norm\": \"yes\"", "attnlab_qk_norm", "0 or 1"},
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        char p[1100], err[2048], att[64];
        snprintf(p, sizeof(p), "%s/config.json", dir);
        FILE* f = fopen(p, "w");
        ck_assert_ptr_nonnull(f);
        fprintf(f,
                "{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_head\": 2, \"n_embd\": 32, "
                "\"n_positions\": 32, \"vocab_size\": 300, %s}\n",
                bad[k][0]);
        ck_assert_int_eq(fclose(f), 0);
        GPT2Config g;
        ck_assert_int_eq(hf_read_config(dir, &g, att, sizeof(att), err, sizeof(err)), -1);
        ck_assert_msg(strstr(err, p) && strstr(err, bad[k][1]) && strstr(err, bad[k][2]), "%s",
                      err);
    }
}
END_TEST

// Saves a 2-layer model of `attention` (learned positions) with random weights to CK; returns it
// built (the caller frees it).
static void save_variant(GPT2* m, Config* c, const char* attention, const char* dir,
                         const char* ck) {
    char err[2048];
    test_run_config(c, dir, "unused", V);
    util_strlcpy(c->attention, attention, sizeof(c->attention));
    test_build_model(m, c, 1, c->seq_len, 3);
    Rng r;
    rng_seed(&r, 77);
    fill_normal(m->params, m->num_params, 0.2f, &r);
    const size_t Vr = (size_t)m->cfg.vocab_size, C = (size_t)m->cfg.n_embd; // padding rows: 0
    memset(m->params + m->specs[P_WTE].offset + Vr * C, 0,
           sizeof(float) * ((size_t)m->cfg.padded_vocab - Vr) * C);
    char* t = config_text(c);
    ck_assert_msg(ckpt_save_model(m, ck, 0, t, err, sizeof(err)) == 0, "%s", err);
    free(t);
}

static int same_bytes(const char* a, const char* b) {
    char e[1300];
    size_t na, nb;
    char* x = util_read_file(a, &na, e, sizeof(e));
    ck_assert_msg(x != NULL, "%s", e);
    char* y = util_read_file(b, &nb, e, sizeof(e));
    ck_assert_msg(y != NULL, "%s", e);
    const int same = na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

// An attention variant (softpick) is not GPT-2 either: ./export --format hf refuses it, naming the
// variant, and writes nothing; with --allow-nonstandard config.json says attnlab-gpt2 and hf:DIR
// opens as the same softpick model (its logits bit for bit). A softmax model exports as GPT-2,
// and the flag changes no byte of it.
START_TEST(test_variant_export_needs_the_flag) {
    const char* dir = test_tmpdir();
    char ck[1100], hf[1100], errf[1100], cmd[4096], src[1200], err[2048];
    snprintf(ck, sizeof(ck), "%s/softpick.bin", dir);
    snprintf(hf, sizeof(hf), "%s/softpick_hf", dir);
    snprintf(errf, sizeof(errf), "%s/export.stderr", dir);
    GPT2 m;
    Config c;
    save_variant(&m, &c, "softpick", dir, ck);
    const char* exe = test_build_dir();
    snprintf(cmd, sizeof(cmd), "%s/export --checkpoint %s --format hf --out %s --no-tokenizer", exe,
             ck, hf);
    char* se = NULL;
    int rc = run(cmd, errf, &se);
    ck_assert_msg(rc == 2 && strstr(se, "attention 'softpick'") &&
                      strstr(se, "--allow-nonstandard"),
                  "softpick: exit %d, stderr: %s", rc, se);
    free(se);
    expect_hf_absent(hf, "softpick");
    snprintf(cmd, sizeof(cmd),
             "%s/export --checkpoint %s --format hf --out %s --no-tokenizer --allow-nonstandard",
             exe, ck, hf);
    rc = run(cmd, errf, &se);
    ck_assert_msg(rc == 0, "softpick --allow-nonstandard: exit %d: %s", rc, se);
    free(se);
    expect_model_type(hf, 0, "softpick");
    snprintf(src, sizeof(src), "hf:%s", hf);
    ModelOpen mo = {.run = NULL};
    GPT2 o;
    ck_assert_msg(model_open(&o, src, &mo, err, sizeof(err)) == 0, "%s", err);
    ck_assert_str_eq(mo.cfg.attention, "softpick");
    gpt2_alloc_acts(&o, 1, c.seq_len, 2);
    int in[32];
    for (int i = 0; i < c.seq_len; i++)
        in[i] = (i * 37 + 11) % V;
    gpt2_forward(&m, in, NULL, 1, c.seq_len);
    gpt2_forward(&o, in, NULL, 1, c.seq_len);
    ck_assert_msg(memcmp(m.logits, o.logits,
                         sizeof(float) * (size_t)c.seq_len * (size_t)m.cfg.padded_vocab) == 0,
                  "softpick: hf:DIR gives other logits than the saved model");
    gpt2_free(&o);
    gpt2_free(&m);
    // softmax: GPT-2, with or without the flag, the same bytes
    char hf2[1100], a[1200], b[1200];
    snprintf(ck, sizeof(ck), "%s/softmax.bin", dir);
    snprintf(hf, sizeof(hf), "%s/softmax_hf", dir);
    snprintf(hf2, sizeof(hf2), "%s/softmax_hf_flag", dir);
    save_variant(&m, &c, "softmax", dir, ck);
    gpt2_free(&m);
    for (int flag = 0; flag < 2; flag++) {
        snprintf(cmd, sizeof(cmd),
                 "%s/export --checkpoint %s --format hf --out %s --no-tokenizer%s", exe, ck,
                 flag ? hf2 : hf, flag ? " --allow-nonstandard" : "");
        rc = run(cmd, errf, &se);
        ck_assert_msg(rc == 0, "softmax: exit %d: %s", rc, se);
        ck_assert_msg(!strstr(se, "warning"), "softmax: a warning: %s", se);
        free(se);
        expect_model_type(flag ? hf2 : hf, 1, "softmax");
    }
    static const char* const files[] = {"config.json", "model.safetensors"};
    for (int k = 0; k < 2; k++) {
        snprintf(a, sizeof(a), "%s/%s", hf, files[k]);
        snprintf(b, sizeof(b), "%s/%s", hf2, files[k]);
        ck_assert_msg(same_bytes(a, b), "softmax: --allow-nonstandard changed %s", files[k]);
    }
}
END_TEST

static Suite* interop_settings_suite(void) {
    Suite* s = suite_create("interop_settings");
    TCase* tc = tcase_create("roundtrip");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_every_setting_roundtrips);
    tcase_add_test(tc, test_bad_settings_rejected);
    tcase_add_test(tc, test_variant_export_needs_the_flag);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(interop_settings_suite)
