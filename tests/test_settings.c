// tests/test_settings.c: the settings table (model/settings.h) is the one declaration of a model
// setting. A model key costs a Config field, a config-table row, a GPT2Config field, a settings
// row and the feature; this suite shows that nothing else is needed and nothing is missed:
//   - table: every key of the config table's model group (init_from aside: it names a source,
//     not a shape) has a settings row and every row is such a key; each row's Config offset and
//     type are the config table's; the model-file header slots are distinct and clear of the
//     slots the file keeps for itself; llm.c slots are its size fields 2..6;
//   - round trip: for every row and every value other than the default (each size changed, each
//     flag flipped, every other name of each enum), a config with that one change goes through
//     gpt2_config_from, a built model saved as an attnlab model file (its header slot read raw
//     from the file), the file opened again as the tools open it (model_open), config.json and
//     model.safetensors (hf_export, hf_read_config, hf:DIR opened, which makes the config a bare
//     file implies), llm.c where its header holds the row, and arrives with the value it left
//     with, the other rows untouched;
//   - resume: the resume check takes its fixed keys from the rows: settings_resume_fixed is a row's
//     .resume_fixed (0 for every other key); every row is fixed on resume under it
//     (resume_key_kind), and a resume that changes it is refused naming the key
//     (resume_keys_compare); under other rules (a test's own, or none) the same check fixes what
//     those rules say and nothing of the model group, so it has no rule of its own beyond
//     attention; resume_change naming a fixed row is refused with the trainer's message
//     (settings_resume_change_check), and config_validate's rule-less check lets it through.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/resume_keys.h"
#include "common/util.h"
#include "model/checkpoint.h"
#include "model/hf.h"
#include "model/open.h"
#include "model/settings.h"
#include "tests/model_util.h"
#include "tests/testutil.h"

// Slots of the attnlab model-file header that are not settings: magic, version, padded vocab,
// tensor count, maxP, parameter count (2), step (2), config-text length.
static const int RESERVED[] = {0, 1, 7, 10, 11, 12, 13, 14, 15, 16};

START_TEST(test_table_matches_config_table) {
    int rows_seen[64] = {0};
    ck_assert_int_le(MODEL_NSETTINGS, 64);
    for (int i = 0; i < CONFIG_NFIELDS; i++) {
        const ConfigField* f = &CONFIG_FIELDS[i];
        if (strcmp(f->group, "model") != 0 || strcmp(f->key, "init_from") == 0) continue;
        const ModelSetting* s = setting_find(f->key);
        ck_assert_msg(s, "model key '%s' has no row in the settings table", f->key);
        rows_seen[s - MODEL_SETTINGS] = 1;
        ck_assert_msg(s->cfg == f->offset, "%s: Config offset %zu, the config table's %zu", f->key,
                      s->cfg, f->offset);
        ck_assert_msg(f->type == (s->kind == SETTING_ENUM ? CF_STR : CF_INT), "%s: type", f->key);
    }
    for (int i = 0; i < MODEL_NSETTINGS; i++) {
        const ModelSetting* s = &MODEL_SETTINGS[i];
        ck_assert_msg(rows_seen[i], "row '%s' is no model key of the config table", s->key);
        ck_assert_msg(s->slot >= 2 && s->slot < 256, "%s: slot %d", s->key, s->slot);
        for (size_t r = 0; r < sizeof(RESERVED) / sizeof(RESERVED[0]); r++)
            ck_assert_msg(s->slot != RESERVED[r], "%s: slot %d is the file's own", s->key, s->slot);
        for (int j = 0; j < i; j++) {
            ck_assert_msg(MODEL_SETTINGS[j].slot != s->slot, "%s and %s share slot %d", s->key,
                          MODEL_SETTINGS[j].key, s->slot);
            ck_assert_msg(s->llmc < 0 || MODEL_SETTINGS[j].llmc != s->llmc, "%s: llm.c slot",
                          s->key);
        }
        ck_assert_msg(s->llmc < 0 || (s->llmc >= 2 && s->llmc <= 6), "%s: llm.c slot %d", s->key,
                      s->llmc);
        ck_assert_msg(s->kind != SETTING_ENUM || (s->name && s->from_name && s->count > 1 &&
                                                  s->what && s->name(s->absent)),
                      "%s: enum row incomplete", s->key);
        ck_assert_msg(!s->needs || setting_find(s->needs), "%s: needs '%s'", s->key, s->needs);
    }
}
END_TEST

// The tiny config every case starts from, and its translation.
static void base_config(Config* c) {
    test_tiny_config(c, 300, 2, 2, 16, 16);
    util_strlcpy(c->attention, "softmax", sizeof(c->attention));
}

// Config c with row s set to v (a size, a flag or an enum index), and its `needs` flag set.
static void set_in_config(Config* c, const ModelSetting* s, int v) {
    char* p = (char*)c + s->cfg;
    if (s->kind == SETTING_ENUM)
        util_strlcpy(p, s->name(v), config_field(s->key)->size);
    else
        *(int*)p = v;
    if (s->needs) *(int*)((char*)c + setting_find(s->needs)->cfg) = 1;
}

// A value of row s other than the base config's (in `want`): the base's size changed so the
// model stays valid, or the flag flipped; for enums the caller walks every value.
static int other_size(const ModelSetting* s, int base) {
    if (strcmp(s->key, "n_head") == 0) return 2 * base; // still divides n_embd
    if (strcmp(s->key, "n_embd") == 0) return base + 8; // still a multiple of n_head
    return base + 1;
}

// Every row of g equals want's, for `what`.
static void expect_rows(const GPT2Config* g, const GPT2Config* want, const char* what) {
    for (int i = 0; i < MODEL_NSETTINGS; i++) {
        const ModelSetting* s = &MODEL_SETTINGS[i];
        ck_assert_msg(setting_get(g, s) == setting_get(want, s), "%s: %s is %d, expected %d", what,
                      s->key, setting_get(g, s), setting_get(want, s));
    }
}

// The value of row s in config c, as config text.
static void config_text_of(char* buf, size_t cap, const Config* c, const ModelSetting* s) {
    const char* p = (const char*)c + s->cfg;
    if (s->kind == SETTING_ENUM)
        snprintf(buf, cap, "%s", p);
    else
        snprintf(buf, cap, "%d", *(const int*)p);
}

static int32_t header_slot(const char* path, int slot) {
    int32_t h[256];
    FILE* f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fread(h, 4, 256, f), 256);
    fclose(f);
    return h[slot];
}

// One case: row s at value v through every place that carries it.
static void round_trip(const ModelSetting* s, int v, int k) {
    char err[2048], what[160], path[1100], dir[1100], a[64], b[64];
    const char* tmp = test_tmpdir();
    Config c;
    base_config(&c);
    set_in_config(&c, s, v);
    snprintf(what, sizeof(what), "%s = %d", s->key, v);
    GPT2Config g;
    ck_assert_msg(gpt2_config_from(&g, &c, err, sizeof(err)) == 0, "%s: %s", what, err);
    ck_assert_int_eq(setting_get(&g, s), v);
    // the attnlab model file: header slot, header reader, and the model reopened
    GPT2 m;
    test_build_model(&m, &c, 1, 8, 5);
    expect_rows(&m.cfg, &g, what);
    snprintf(path, sizeof(path), "%s/s%d.bin", tmp, k);
    char* text = gpt2_config_text(&m, &c, "fp32");
    ck_assert_msg(ckpt_save_model(&m, path, 3, text, err, sizeof(err)) == 0, "%s", err);
    free(text);
    ck_assert_int_eq(header_slot(path, s->slot), s->slot_flip ? !v : v);
    GPT2Config hc;
    ck_assert_msg(ckpt_read_info(path, &hc, NULL, 0, NULL, NULL, err, sizeof(err)) == 0, "%s", err);
    expect_rows(&hc, &g, what);
    GPT2 m2;
    ModelOpen mo = {.run = NULL};
    ck_assert_msg(model_open(&m2, path, &mo, err, sizeof(err)) == 0, "%s: %s", what, err);
    expect_rows(&m2.cfg, &g, what);
    gpt2_free(&m2);
    // Hugging Face: config.json and back, and the config a bare HF directory implies
    if (g.mlp) {
        snprintf(dir, sizeof(dir), "%s/hf%d", tmp, k);
        ck_assert_msg(hf_export(&m, dir, NULL, err, sizeof(err)) == 0, "%s: %s", what, err);
        GPT2Config fc;
        char att[64];
        ck_assert_msg(hf_read_config(dir, &fc, att, sizeof(att), err, sizeof(err)) == 0, "%s: %s",
                      what, err);
        expect_rows(&fc, &g, what);
        char src[1200];
        snprintf(src, sizeof(src), "hf:%s", dir);
        ModelOpen ho = {.run = NULL};
        ck_assert_msg(model_open(&m2, src, &ho, err, sizeof(err)) == 0, "%s: %s", what, err);
        for (int i = 0; i < MODEL_NSETTINGS; i++) {
            config_text_of(a, sizeof(a), &ho.cfg, &MODEL_SETTINGS[i]);
            config_text_of(b, sizeof(b), &c, &MODEL_SETTINGS[i]);
            ck_assert_msg(strcmp(a, b) == 0, "%s: hf:DIR implies %s = %s, saved %s", what,
                          MODEL_SETTINGS[i].key, a, b);
        }
        gpt2_free(&m2);
    }
    // llm.c, where its header holds the row and the model is llm.c's GPT-2 otherwise
    if (s->llmc >= 0) {
        snprintf(path, sizeof(path), "%s/s%d.llmc", tmp, k);
        ck_assert_msg(llmc_save(&m, path, err, sizeof(err)) == 0, "%s: %s", what, err);
        ck_assert_int_eq(header_slot(path, s->llmc), v);
        GPT2Config lc;
        ck_assert_msg(llmc_read_config(path, &lc, err, sizeof(err)) == 0, "%s", err);
        expect_rows(&lc, &g, what);
    }
    gpt2_free(&m);
    // resume: the key is fixed, and a resume that changes it is refused naming it
    ck_assert_msg(resume_key_kind(s->key, settings_resume_fixed, NULL) ==
                      (s->resume_fixed ? RESUME_KEY_FIXED : RESUME_KEY_NAMED),
                  "%s: resume kind", s->key);
    Config old;
    base_config(&old);
    if (s->needs) set_in_config(&old, setting_find(s->needs), 1); // only s differs
    ck_assert_int_eq(resume_keys_compare(&old, &c, settings_resume_fixed, "the checkpoint", NULL,
                                         err, sizeof(err)),
                     -1);
    char key[80];
    snprintf(key, sizeof(key), "key '%s'", s->key);
    ck_assert_msg(strstr(err, key), "%s: %s", what, err);
}

START_TEST(test_every_row_round_trips) {
    int k = 0;
    for (int i = 0; i < MODEL_NSETTINGS; i++) {
        const ModelSetting* s = &MODEL_SETTINGS[i];
        Config c;
        base_config(&c);
        GPT2Config g;
        char err[1024];
        ck_assert(gpt2_config_from(&g, &c, err, sizeof(err)) == 0);
        const int base = setting_get(&g, s);
        if (s->kind == SETTING_SIZE) {
            round_trip(s, other_size(s, base), k++);
        } else if (s->kind == SETTING_FLAG) {
            round_trip(s, !base, k++);
        } else {
            for (int v = 0; v < s->count; v++)
                if (v != base) round_trip(s, v, k++);
        }
    }
    ck_assert_int_ge(k, MODEL_NSETTINGS);
}
END_TEST

// Test-only rules: lr is fixed, nothing else (no row of the settings table).
static int only_lr(const char* key) {
    return strcmp(key, "lr") == 0;
}

// resume_keys_compare of the base config with `now` under `rules`: its return, err in err.
static int compare_base(const Config* now, ResumeFixedFn rules, ResumeChanges* out, char* err,
                        size_t errcap) {
    Config old;
    base_config(&old);
    err[0] = '\0';
    return resume_keys_compare(&old, now, rules, "the checkpoint", out, err, errcap);
}

START_TEST(test_resume_rules_are_the_rows) {
    // settings_resume_fixed is the rows' .resume_fixed, for every key of the config table
    int nfixed = 0;
    for (int i = 0; i < CONFIG_NFIELDS; i++) {
        const char* key = CONFIG_FIELDS[i].key;
        const ModelSetting* s = setting_find(key);
        ck_assert_msg(settings_resume_fixed(key) == (s ? s->resume_fixed : 0), "%s", key);
        nfixed += settings_resume_fixed(key);
    }
    ck_assert_int_gt(nfixed, 0);
    ck_assert_int_eq(settings_resume_fixed("attn.bias_mode"), 0);
    // the kinds follow the rules passed: n_layer (a fixed row) is named under rules that do not
    // fix it, lr (no row) is fixed under rules that do; attention is fixed under any rules, and
    // init_from (the model group's one key that is no row) is named
    ck_assert_int_eq(resume_key_kind("n_layer", settings_resume_fixed, NULL), RESUME_KEY_FIXED);
    ck_assert_int_eq(resume_key_kind("n_layer", only_lr, NULL), RESUME_KEY_NAMED);
    ck_assert_int_eq(resume_key_kind("n_layer", NULL, NULL), RESUME_KEY_NAMED);
    ck_assert_int_eq(resume_key_kind("lr", settings_resume_fixed, NULL), RESUME_KEY_NAMED);
    ck_assert_int_eq(resume_key_kind("lr", only_lr, NULL), RESUME_KEY_FIXED);
    ck_assert_int_eq(resume_key_kind("init_from", settings_resume_fixed, NULL), RESUME_KEY_NAMED);
    ck_assert_int_eq(resume_key_kind("attention", NULL, NULL), RESUME_KEY_FIXED);
    ck_assert_int_eq(resume_key_kind("attention", only_lr, NULL), RESUME_KEY_FIXED);
    ck_assert_int_eq(resume_key_kind("batch_size", only_lr, NULL), RESUME_KEY_ELSEWHERE);

    // the comparison: every row changed and named in resume_change is refused under the rows'
    // rules, and accepted (the change recorded) under rules that do not fix it
    char err[4096];
    static ResumeChanges ch;
    for (int i = 0; i < MODEL_NSETTINGS; i++) {
        const ModelSetting* s = &MODEL_SETTINGS[i];
        Config now;
        base_config(&now);
        int v = *(const int*)((const char*)&now + s->cfg) + 1; // (sizes and flags)
        if (s->kind == SETTING_ENUM) {
            GPT2Config g;
            ck_assert(gpt2_config_from(&g, &now, err, sizeof(err)) == 0);
            v = (setting_get(&g, s) + 1) % s->count;
        } else if (s->kind == SETTING_FLAG) {
            v = !*(const int*)((const char*)&now + s->cfg);
        }
        set_in_config(&now, s, v);
        if (s->needs) continue; // (its flag changes with it; the flag's own row covers that)
        util_strlcpy(now.resume_change, s->key, sizeof(now.resume_change));
        ck_assert_int_eq(compare_base(&now, settings_resume_fixed, &ch, err, sizeof(err)), -1);
        char want[128];
        snprintf(want, sizeof(want), "key '%s' was '", s->key);
        ck_assert_msg(strstr(err, want) && strstr(err, "set it back, or train into a new out_dir"),
                      "%s: %s", s->key, err);
        ck_assert_msg(compare_base(&now, only_lr, &ch, err, sizeof(err)) == 0, "%s: %s", s->key,
                      err);
        ck_assert_int_eq(ch.n, 1);
        ck_assert_str_eq(ch.ch[0].key, s->key);
    }
    // lr changed and named: accepted under the rows' rules, refused under rules that fix it
    Config now;
    base_config(&now);
    now.lr *= 2;
    util_strlcpy(now.resume_change, "lr", sizeof(now.resume_change));
    ck_assert_msg(compare_base(&now, settings_resume_fixed, &ch, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(ch.n, 1);
    ck_assert_int_eq(compare_base(&now, only_lr, &ch, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "key 'lr' was '") && strstr(err, "set it back, or train into a new"),
                  "%s", err);

    // resume_change naming a fixed row: the trainer's check refuses it (the message byte for
    // byte), config_validate's check (no rules) does not; rows and attention under any rules
    for (int i = 0; i < MODEL_NSETTINGS; i++) {
        const ModelSetting* s = &MODEL_SETTINGS[i];
        Config c;
        config_defaults(&c);
        c.resume = 1;
        util_strlcpy(c.resume_change, s->key, sizeof(c.resume_change));
        ck_assert_int_eq(settings_resume_change_check(&c, err, sizeof(err)), -1);
        char want[512];
        snprintf(want, sizeof(want),
                 "key 'resume_change': '%s' cannot change on resume (the saved weights are of "
                 "the saved model's shape and attention); train into a new out_dir instead",
                 s->key);
        ck_assert_str_eq(err, want);
        ck_assert_msg(config_validate(&c, err, sizeof(err)) == 0, "%s: %s", s->key, err);
        ck_assert_msg(resume_change_validate(s->key, only_lr, err, sizeof(err)) == 0, "%s", err);
    }
    ck_assert_int_eq(resume_change_validate("lr", settings_resume_fixed, err, sizeof(err)), 0);
    ck_assert_int_eq(resume_change_validate("lr", only_lr, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "'lr' cannot change on resume"), "%s", err);
    ck_assert_int_eq(resume_change_validate("init_from", settings_resume_fixed, err, sizeof(err)),
                     0);
    ck_assert_int_eq(resume_change_validate(" attention", NULL, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "'attention' cannot change on resume"), "%s", err);
}
END_TEST

static Suite* settings_suite(void) {
    Suite* s = suite_create("settings");
    TCase* tc = tcase_create("settings");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_table_matches_config_table);
    tcase_add_test(tc, test_every_row_round_trips);
    tcase_add_test(tc, test_resume_rules_are_the_rows);
    suite_add_tcase(s, tc);
    return s;
}

TEST_MAIN(settings_suite)
