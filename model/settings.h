// model/settings.h: the settings table, beside the parameter table (model/params.c): one row per
// config key that shapes the model, declaring everything the plumbing needs (model/settings.c).
// Each row names the config key and its Config field, the GPT2Config field, the enum name table
// (attn_pos_name, resid_name, ...) where the setting is a name, the Hugging Face config.json key,
// the attnlab model file's header slot, the llm.c header slot where llm.c has one, the value a
// file without the setting means, and whether a resumed run must refuse a change. The
// translation of the config (gpt2_config_from), the config a bare model file implies
// (model/open.c), the attnlab model-file header (model/checkpoint.c), config.json and the
// safetensors metadata (model/hf.c), the strict checkpoint match and the messages that list the
// settings are loops over it, and so are the keys a resumed run refuses to change: the resume
// check (common/resume_keys.c) sits below model/ and gets them as its rules, settings_resume_fixed
// (passed by ckpt_check_resume and settings_resume_change_check). tests/test_settings.c checks
// every row through each of them.
//
// A model key costs: a Config field (common/config.h), a config-table row (common/config_table.c),
// a GPT2Config field (model/gpt2.h), a row here, and the feature itself.
#ifndef ATTNLAB_SETTINGS_H
#define ATTNLAB_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "model/gpt2.h"

typedef enum {
    SETTING_SIZE, // a positive integer (n_layer, block_size, ...): GPT-2's own sizes
    SETTING_FLAG, // 0/1
    SETTING_ENUM, // a name of an enum's name table; Config holds the name, GPT2Config the index
} SettingKind;

typedef struct {
    const char* key;                    // config key (common/config_table.c)
    SettingKind kind;                   //
    size_t cfg;                         // offsetof(Config, ...): int, or a char array for ENUM
    size_t field;                       // offsetof(GPT2Config, ...): int
    const char* (*name)(int);           // ENUM: the enum's name table (NULL out of range)
    int (*from_name)(const char* name); //       and its inverse (-1 if unknown)
    int count;                          //       the enum's number of values
    const char* what;                   // ENUM: what a name is, for errors ("a position encoding")
    const char* hf;    // config.json key (attnlab_* for attnlab's own), NULL: not in config.json
    int slot;          // int32 slot of the attnlab model-file header (every row has one)
    int slot_flip;     // the slot holds 1 - value (files from before the key hold 0 = the default)
    int llmc;          // int32 slot of llm.c's header, -1: llm.c holds the value `absent` only
    int absent;        // the value of a file without the setting (plain GPT-2 / llm.c)
    const char* needs; // the flag key this setting is inert without (qk_norm_kind: qk_norm), NULL
    int resume_fixed;  // a resumed run refuses a change (the saved weights have its shape)
} ModelSetting;

#define MODEL_MAX_SETTINGS 32 // room for the rows (settings.c asserts it)

extern const ModelSetting MODEL_SETTINGS[];
extern const int MODEL_NSETTINGS;

// The row of config key `key`, or NULL.
const ModelSetting* setting_find(const char* key);
int setting_get(const GPT2Config* g, const ModelSetting* s);
void setting_set(GPT2Config* g, const ModelSetting* s, int v);
// The value as config text ("rope", "1", "12").
void setting_text(char* buf, size_t cap, const GPT2Config* g, const ModelSetting* s);

// Every row from the config: sizes and flags copied, names looked up in their tables. 0, or -1
// with err "key 'K': 'V' is not supported (use a, b or c)". Other fields of g are untouched.
int settings_from_config(GPT2Config* g, const Config* c, char* err, size_t errcap);
// Every row into the config (names through their tables).
void settings_to_config(Config* c, const GPT2Config* g);
// Every row to `absent` (a file that does not hold the settings); sizes are left alone.
void settings_absent(GPT2Config* g);

// The attnlab model-file header: every row into its slot; and back, with the range of each
// (flags 0/1, names within their table; sizes are not checked here): 0, or -1 if out of range.
void settings_to_header(int32_t* h, const GPT2Config* g);
int settings_from_header(GPT2Config* g, const int32_t* h);

// The resume rules (common/resume_keys.h, ResumeFixedFn): 1 when `key` is a row with
// .resume_fixed (a loop over the rows), else 0.
int settings_resume_fixed(const char* key);
// config_validate's check of c->resume_change again, now with these rules: a fixed row named
// there is refused ("key 'resume_change': 'n_layer' cannot change on resume (...)"). 0, or -1
// with err. The trainer calls it right after config_validate.
int settings_resume_change_check(const Config* c, char* err, size_t errcap);

// 1 when a and b differ in a row that is not a size (a row with `needs` only where it is active
// in b).
int settings_differ(const GPT2Config* a, const GPT2Config* b);
// "pos_encoding = rope, qk_norm = 1, qk_norm_kind = rmsnorm, ..." (`eq` between key and value,
// NULL: the values only; `sep` between rows): every row that is not a size, a row with `needs`
// right after the flag it needs, and only where it is active.
void settings_describe(char* buf, size_t cap, const GPT2Config* g, const char* eq, const char* sep);

#endif
