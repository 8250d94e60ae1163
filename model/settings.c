// model/settings.c: the settings table (settings.h) and the loops over it that translate a
// setting between the config, GPT2Config and the attnlab model-file header, and that give the
// resume check its fixed keys. The rows keep the
// order in which the settings came (the safetensors metadata lists them in this order); the
// header slots are those the attnlab model file has always used, so files stay byte-identical.
#include "model/settings.h"

#include <stdio.h>
#include <string.h>

#include "common/resume_keys.h"
#include "common/util.h"
#include "model/residual.h"

#define CFG(f) offsetof(Config, f)
#define GF(f)  offsetof(GPT2Config, f)

const ModelSetting MODEL_SETTINGS[] = {
    // GPT-2's sizes: in both model-file headers (llm.c's fields 2..6) and config.json
    {.key = "n_layer",
     .kind = SETTING_SIZE,
     .cfg = CFG(n_layer),
     .field = GF(n_layer),
     .hf = "n_layer",
     .slot = 4,
     .llmc = 4,
     .resume_fixed = 1},
    {.key = "n_head",
     .kind = SETTING_SIZE,
     .cfg = CFG(n_head),
     .field = GF(n_head),
     .hf = "n_head",
     .slot = 5,
     .llmc = 5,
     .resume_fixed = 1},
    {.key = "n_embd",
     .kind = SETTING_SIZE,
     .cfg = CFG(n_embd),
     .field = GF(n_embd),
     .hf = "n_embd",
     .slot = 6,
     .llmc = 6,
     .resume_fixed = 1},
    {.key = "block_size",
     .kind = SETTING_SIZE,
     .cfg = CFG(block_size),
     .field = GF(block_size),
     .hf = "n_positions",
     .slot = 2,
     .llmc = 2,
     .resume_fixed = 1},
    {.key = "vocab_size",
     .kind = SETTING_SIZE,
     .cfg = CFG(vocab_size),
     .field = GF(vocab_size),
     .hf = "vocab_size",
     .slot = 3,
     .llmc = 3,
     .resume_fixed = 1},
    // attnlab's settings: attnlab_* keys in config.json, absent from plain GPT-2 and llm.c
    {.key = "pos_encoding",
     .kind = SETTING_ENUM,
     .cfg = CFG(pos_encoding),
     .field = GF(pos_encoding),
     .name = attn_pos_name,
     .from_name = attn_pos_from_name,
     .count = ATTN_POS_COUNT,
     .what = "a position encoding",
     .hf = "attnlab_pos_encoding",
     .slot = 8,
     .llmc = -1,
     .absent = ATTN_POS_LEARNED,
     .resume_fixed = 1},
    {.key = "qk_norm",
     .kind = SETTING_FLAG,
     .cfg = CFG(qk_norm),
     .field = GF(qk_norm),
     .hf = "attnlab_qk_norm",
     .slot = 9,
     .llmc = -1,
     .absent = 0,
     .resume_fixed = 1},
    {.key = "residual",
     .kind = SETTING_ENUM,
     .cfg = CFG(residual),
     .field = GF(residual),
     .name = resid_name,
     .from_name = resid_from_name,
     .count = GPT2_RESID_COUNT,
     .what = "a residual mode",
     .hf = "attnlab_residual",
     .slot = 17,
     .llmc = -1,
     .absent = GPT2_RESID_STANDARD,
     .resume_fixed = 1},
    {.key = "value_residual",
     .kind = SETTING_FLAG,
     .cfg = CFG(value_residual),
     .field = GF(value_residual),
     .hf = "attnlab_value_residual",
     .slot = 18,
     .llmc = -1,
     .absent = 0,
     .resume_fixed = 1},
    {.key = "qk_norm_kind",
     .kind = SETTING_ENUM,
     .cfg = CFG(qk_norm_kind),
     .field = GF(qk_norm_kind),
     .name = attn_qknorm_name,
     .from_name = attn_qknorm_from_name,
     .count = ATTN_QKNORM_COUNT,
     .what = "a qk-norm kind",
     .hf = "attnlab_qk_norm_kind",
     .slot = 20,
     .llmc = -1,
     .absent = ATTN_QKNORM_LAYERNORM,
     .needs = "qk_norm",
     .resume_fixed = 1},
    // Hugging Face GPT-2 and llm.c have an MLP in every block: their files cannot hold mlp = 0
    {.key = "mlp",
     .kind = SETTING_FLAG,
     .cfg = CFG(mlp),
     .field = GF(mlp),
     .slot = 19,
     .slot_flip = 1,
     .llmc = -1,
     .absent = 1,
     .resume_fixed = 1},
};
const int MODEL_NSETTINGS = (int)(sizeof(MODEL_SETTINGS) / sizeof(MODEL_SETTINGS[0]));
_Static_assert(sizeof(MODEL_SETTINGS) / sizeof(MODEL_SETTINGS[0]) <= MODEL_MAX_SETTINGS,
               "MODEL_MAX_SETTINGS");

const ModelSetting* setting_find(const char* key) {
    for (int i = 0; i < MODEL_NSETTINGS; i++)
        if (strcmp(MODEL_SETTINGS[i].key, key) == 0) return &MODEL_SETTINGS[i];
    return NULL;
}

int setting_get(const GPT2Config* g, const ModelSetting* s) {
    return *(const int*)((const char*)g + s->field);
}

void setting_set(GPT2Config* g, const ModelSetting* s, int v) {
    *(int*)((char*)g + s->field) = v;
}

// 1 when the setting takes effect in g (its `needs` flag, if any, is set).
static int setting_active(const GPT2Config* g, const ModelSetting* s) {
    const ModelSetting* n = s->needs ? setting_find(s->needs) : NULL;
    return !n || setting_get(g, n) != 0;
}

void setting_text(char* buf, size_t cap, const GPT2Config* g, const ModelSetting* s) {
    const int v = setting_get(g, s);
    const char* name = s->kind == SETTING_ENUM ? s->name(v) : NULL;
    if (name)
        snprintf(buf, cap, "%s", name);
    else
        snprintf(buf, cap, "%d", v);
}

// "a, b or c": the names of an enum's name table, for error messages.
static void name_list(char* out, size_t cap, const ModelSetting* s) {
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < s->count && len < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%s",
                                i == 0              ? ""
                                : i == s->count - 1 ? " or "
                                                    : ", ",
                                s->name(i));
}

int settings_from_config(GPT2Config* g, const Config* c, char* err, size_t errcap) {
    for (int i = 0; i < MODEL_NSETTINGS; i++) {
        const ModelSetting* s = &MODEL_SETTINGS[i];
        const char* p = (const char*)c + s->cfg;
        if (s->kind != SETTING_ENUM) {
            setting_set(g, s, *(const int*)p);
            continue;
        }
        const int v = s->from_name(p);
        if (v < 0) {
            char names[256];
            name_list(names, sizeof(names), s);
            snprintf(err, errcap, "key '%s': '%s' is not supported (use %s)", s->key, p, names);
            return -1;
        }
        setting_set(g, s, v);
    }
    return 0;
}

void settings_to_config(Config* c, const GPT2Config* g) {
    for (int i = 0; i < MODEL_NSETTINGS; i++) {
        const ModelSetting* s = &MODEL_SETTINGS[i];
        char* p = (char*)c + s->cfg;
        if (s->kind == SETTING_ENUM) // the config table knows the char array's size
            util_strlcpy(p, s->name(setting_get(g, s)), config_field(s->key)->size);
        else
            *(int*)p = setting_get(g, s);
    }
}

void settings_absent(GPT2Config* g) {
    for (int i = 0; i < MODEL_NSETTINGS; i++)
        if (MODEL_SETTINGS[i].kind != SETTING_SIZE)
            setting_set(g, &MODEL_SETTINGS[i], MODEL_SETTINGS[i].absent);
}

void settings_to_header(int32_t* h, const GPT2Config* g) {
    for (int i = 0; i < MODEL_NSETTINGS; i++) {
        const ModelSetting* s = &MODEL_SETTINGS[i];
        const int v = setting_get(g, s);
        h[s->slot] = s->slot_flip ? !v : v;
    }
}

int settings_from_header(GPT2Config* g, const int32_t* h) {
    for (int i = 0; i < MODEL_NSETTINGS; i++) {
        const ModelSetting* s = &MODEL_SETTINGS[i];
        int v = h[s->slot];
        if (s->kind == SETTING_FLAG && (v < 0 || v > 1)) return -1;
        if (s->kind == SETTING_ENUM && (v < 0 || v >= s->count || !s->name(v))) return -1;
        setting_set(g, s, s->slot_flip ? !v : v);
    }
    return 0;
}

int settings_resume_fixed(const char* key) {
    for (int i = 0; i < MODEL_NSETTINGS; i++)
        if (strcmp(MODEL_SETTINGS[i].key, key) == 0) return MODEL_SETTINGS[i].resume_fixed;
    return 0;
}

int settings_resume_change_check(const Config* c, char* err, size_t errcap) {
    return resume_change_validate(c->resume_change, settings_resume_fixed, err, errcap);
}

int settings_differ(const GPT2Config* a, const GPT2Config* b) {
    for (int i = 0; i < MODEL_NSETTINGS; i++) {
        const ModelSetting* s = &MODEL_SETTINGS[i];
        if (s->kind != SETTING_SIZE && setting_active(b, s) &&
            setting_get(a, s) != setting_get(b, s))
            return 1;
    }
    return 0;
}

// One row of settings_describe: "KEY=VALUE" (or the value alone) after `sep` when buf has text.
static size_t describe_row(char* buf, size_t cap, size_t n, const GPT2Config* g,
                           const ModelSetting* s, const char* eq, const char* sep) {
    char v[64];
    setting_text(v, sizeof(v), g, s);
    if (n >= cap) return n;
    return n + (size_t)snprintf(buf + n, cap - n, "%s%s%s%s", n ? sep : "", eq ? s->key : "",
                                eq ? eq : "", v);
}

void settings_describe(char* buf, size_t cap, const GPT2Config* g, const char* eq,
                       const char* sep) {
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < MODEL_NSETTINGS; i++) {
        const ModelSetting* s = &MODEL_SETTINGS[i];
        if (s->kind == SETTING_SIZE || s->needs) continue;
        n = describe_row(buf, cap, n, g, s, eq, sep);
        for (int j = 0; j < MODEL_NSETTINGS; j++) // the rows that need this one, where active
            if (MODEL_SETTINGS[j].needs && strcmp(MODEL_SETTINGS[j].needs, s->key) == 0 &&
                setting_active(g, &MODEL_SETTINGS[j]))
                n = describe_row(buf, cap, n, g, &MODEL_SETTINGS[j], eq, sep);
    }
}
