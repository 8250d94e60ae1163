// common/resume_keys.h: which config keys a resumed run (resume = 1) may change, and the record
// of the changes it makes. A resumed run continues the saved one exactly, so every key that
// changes the computation must equal the checkpoint's saved value unless `resume_change` names
// it; the accepted changes are recorded, each with the step it takes effect at, in main.log,
// metrics.jsonl (an event record) and the resolved config text (config.conf and every later
// model file), so that the run's record says what it ran with (docs/configuration.md, "Resume").
//
// Keys fall in four kinds:
//   exempt    do not change what is trained or measured: out_dir, resume, overwrite,
//             resume_change, threads, zero, dist_timeout, the cadence of logs, evaluations,
//             diagnostics, samples and checkpoints (log_every, eval_every, metrics_every,
//             dump_attention_every, sample_every, sample_tokens, checkpoint_every, keep_last) and
//             tokenizer_dir; never compared;
//   elsewhere batch_size, seq_len, seed, shuffle, grad_accum (ranks x grad_accum) and train_data
//             (its files): the saved data position points into them; compared by
//             run_state_check_resume (common/run_state.h); optimizer: the saved optimizer state
//             is its own (optim_state_get refuses another's); never changeable;
//   fixed     the keys the caller's rules (ResumeFixedFn) call fixed: model/ passes
//             settings_resume_fixed, the rows of its settings table with .resume_fixed (the
//             model's shape, model/settings.h); and attention, fixed here whatever the rules: the
//             variant is no settings row (the model file saves its name beside the header, and
//             its attn.* tensors are the variant's own); the saved weights are of that shape;
//             never changeable;
//   named     every other key, attn.* and init_from included: refused unless named in
//             resume_change.
// This file sits below model/ and cannot read the settings table: the rules come down as an
// argument, never through a registration.
#ifndef ATTNLAB_RESUME_KEYS_H
#define ATTNLAB_RESUME_KEYS_H

#include <stddef.h>

#include "common/config.h"

typedef enum {
    RESUME_KEY_EXEMPT,
    RESUME_KEY_ELSEWHERE,
    RESUME_KEY_FIXED,
    RESUME_KEY_NAMED
} ResumeKeyKind;

// The rules of the layer above: 1 when config-table key `key` is fixed on resume (the saved
// weights have its shape). model/ passes settings_resume_fixed (model/settings.h). NULL: no key
// is fixed beyond this file's own (attention).
typedef int (*ResumeFixedFn)(const char* key);

// The kind of `key` (a table key or attn.NAME) under the rules `fixed`; for elsewhere and fixed
// keys *why gets the reason it cannot change (why may be NULL).
ResumeKeyKind resume_key_kind(const char* key, ResumeFixedFn fixed, const char** why);

// Check a resume_change list: comma-separated, each entry a config key or attn.NAME (spaces
// around entries ignored), none of kind elsewhere or fixed under `fixed`. 0, or -1 with err
// naming the entry. config_validate (common/config_check.c) checks with NULL rules; the trainer
// checks again with the settings table's (settings_resume_change_check, model/settings.h).
int resume_change_validate(const char* list, ResumeFixedFn fixed, char* err, size_t errcap);

#define RESUME_MAX_CHANGES 128 // more than the table keys and attn.* keys together
typedef struct {
    char key[64];
    char was[CONFIG_STR + 32], now[CONFIG_STR + 32]; // "(unset)" for an attn.* key not set
} ResumeChange;

typedef struct {
    int n;
    ResumeChange ch[RESUME_MAX_CHANGES];
} ResumeChanges;

// Compare the checkpoint's config `old` (its saved text read back) with `now`, every key of
// kind fixed (under `fixed`) or named (attn.* by name, their origin aside). A fixed key that
// differs, or a named one resume_change does not name, is refused: -1 with err naming each such
// key, both values, and the override (`resume_change=KEYS`) that would accept the named ones.
// Otherwise 0, with the accepted changes in *out (may be NULL). `what` names the checkpoint in
// messages.
int resume_keys_compare(const Config* old, const Config* now, ResumeFixedFn fixed, const char* what,
                        ResumeChanges* out, char* err, size_t errcap);

// The config-text line prefix of a recorded change: "# resume_change: step S: KEY 'A' -> 'B'".
#define RESUME_CHANGE_LINE "# resume_change: "

// Append to *text (malloc'd, realloc'd) the change lines of `saved` (the checkpoint's config
// text: the changes of earlier resumes, in order), then one line per change of `c` at `step`.
void resume_changes_append_text(char** text, const char* saved, long step, const ResumeChanges* c);

#endif
