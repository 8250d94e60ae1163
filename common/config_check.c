// common/config_check.c: the cross-field checks of the run configuration (config_validate):
// every field re-checked through config_field_set (config_field.c), then the rules between keys
// and the resume_change list (common/resume_keys.c: its syntax, unknown keys and the keys this
// layer knows cannot change; the trainer checks the model's fixed keys with model/'s rules,
// settings_resume_change_check in model/settings.h). Only the trainer calls it; the parser
// (config.c) does not, so the calls run one way: config_check.c -> resume_keys.c -> config.c ->
// config_field.c -> config_table.c.
#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "common/config_int.h"
#include "common/resume_keys.h"
// ----------------------------------------------------------------------------
// validation

static int field_check(const Config* c, const ConfigField* f, char* err, size_t errcap) {
    char v[CONFIG_STR + 32];
    config_format_value(v, sizeof(v), c, f);
    Config tmp; // re-parse the formatted value: the same rules as the file parser
    memset(&tmp, 0, sizeof(tmp));
    if (f->type == CF_STR && memchr(config_field_cptr(c, f), '\0', f->size) == NULL) {
        snprintf(err, errcap, "key '%s': the value is not terminated", f->key);
        return -1;
    }
    char e[600];
    if (config_field_set(&tmp, f, v, "config", e, sizeof(e)) != 0) {
        snprintf(err, errcap, "%s", e);
        return -1;
    }
    return 0;
}

int config_validate(const Config* c, char* err, size_t errcap) {
    for (int i = 0; i < CONFIG_NFIELDS; i++)
        if (field_check(c, &CONFIG_FIELDS[i], err, errcap) != 0) return -1;
    if (c->n_embd % c->n_head != 0) {
        snprintf(err, errcap, "n_embd = %d is not divisible by n_head = %d", c->n_embd, c->n_head);
        return -1;
    }
    if ((strcmp(c->pos_encoding, "rope") == 0 || strcmp(c->pos_encoding, "xpos") == 0) &&
        (c->n_embd / c->n_head) % 2 != 0) {
        snprintf(err, errcap,
                 "pos_encoding = %s needs an even head size, but n_embd / n_head = %d / %d = %d",
                 c->pos_encoding, c->n_embd, c->n_head, c->n_embd / c->n_head);
        return -1;
    }
    if (c->seq_len > c->block_size) {
        snprintf(err, errcap, "seq_len = %d is larger than block_size = %d", c->seq_len,
                 c->block_size);
        return -1;
    }
    if (c->eval_seq_len > c->block_size) {
        snprintf(err, errcap, "eval_seq_len = %d is larger than block_size = %d", c->eval_seq_len,
                 c->block_size);
        return -1;
    }
    if (c->min_lr > c->lr) {
        snprintf(err, errcap, "min_lr = %g is larger than lr = %g", (double)c->min_lr,
                 (double)c->lr);
        return -1;
    }
    if (c->max_steps > 0 && c->warmup_steps > c->max_steps) {
        snprintf(err, errcap,
                 "warmup_steps = %d is larger than max_steps = %d: set warmup_steps=%d (or less), "
                 "or raise max_steps",
                 c->warmup_steps, c->max_steps, c->max_steps);
        return -1;
    }
    if (c->decay_steps > 0 && strcmp(c->lr_schedule, "wsd") != 0) {
        snprintf(err, errcap,
                 "decay_steps = %d applies to lr_schedule = wsd only (lr_schedule is '%s')",
                 c->decay_steps, c->lr_schedule);
        return -1;
    }
    if (c->max_steps > 0 && c->decay_steps > c->max_steps) {
        snprintf(err, errcap,
                 "decay_steps = %d is larger than max_steps = %d: set decay_steps=%d (or less), "
                 "or raise max_steps",
                 c->decay_steps, c->max_steps, c->max_steps);
        return -1;
    }
    if (c->resume && c->overwrite) {
        snprintf(err, errcap,
                 "resume = 1 continues the run in out_dir and overwrite = 1 deletes it: set one");
        return -1;
    }
    if (c->resume_change[0] && !c->resume) {
        snprintf(err, errcap, "key 'resume_change' ('%s') applies to resume = 1 only",
                 c->resume_change);
        return -1;
    }
    if (resume_change_validate(c->resume_change, NULL, err, errcap)) return -1;
    if (strcmp(c->tokenizer, "gpt2") == 0 && c->vocab_size < 50257) {
        snprintf(err, errcap, "vocab_size = %d is too small for tokenizer = gpt2 (needs 50257)",
                 c->vocab_size);
        return -1;
    }
    if (strcmp(c->tokenizer, "byte") == 0 && c->vocab_size < 257) {
        snprintf(err, errcap,
                 "vocab_size = %d is too small for tokenizer = byte (needs 257: 256 bytes + EOT)",
                 c->vocab_size);
        return -1;
    }
    if (c->n_attn < 0 || c->n_attn > CONFIG_MAX_ATTN) {
        snprintf(err, errcap, "n_attn = %d is out of range [0, %d]", c->n_attn, CONFIG_MAX_ATTN);
        return -1;
    }
    return 0;
}
