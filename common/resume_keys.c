// common/resume_keys.c: the keys a resumed run may change (resume_keys.h): their kinds (this
// file's own tables, and the fixed keys of the caller's rules), the resume_change list, the
// comparison of the checkpoint's config with the new one, and the config-text record of accepted
// changes.
#include "common/resume_keys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

static const char* const EXEMPT[] = {
    "out_dir",          "resume",
    "overwrite",        "resume_change",
    "threads",          "zero",
    "dist_timeout",     "log_every",
    "eval_every",       "metrics_every",
    "checkpoint_every", "keep_last",
    "sample_every",     "dump_attention_every",
    "sample_tokens",    "tokenizer_dir",
};
static const char* const DATA[] = {"batch_size", "seq_len",    "seed",
                                   "shuffle",    "grad_accum", "train_data"};
// Fixed whatever the rules: the attention variant is no row of the settings table (model/ passes
// those rows as the rules); the model file saves its name beside the header, and the variant's
// attn.* tensors are its own, so the saved weights are of it.
static const char* const FIXED[] = {"attention"};
// Every other key not fixed by the rules is named. Of the config table's model group that is
// init_from alone: it names where a new run's weights come from (a resumed run's come from its
// checkpoint); tests/test_settings.c checks that every other key of the group is a settings row.

static int in_list(const char* const* list, size_t n, const char* key) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], key) == 0) return 1;
    return 0;
}

ResumeKeyKind resume_key_kind(const char* key, ResumeFixedFn fixed, const char** why) {
    const char* w = NULL;
    ResumeKeyKind k = RESUME_KEY_NAMED;
    if (strncmp(key, "attn.", 5) == 0) {
        k = RESUME_KEY_NAMED;
    } else if (in_list(EXEMPT, sizeof(EXEMPT) / sizeof(EXEMPT[0]), key)) {
        k = RESUME_KEY_EXEMPT;
    } else if (in_list(DATA, sizeof(DATA) / sizeof(DATA[0]), key)) {
        k = RESUME_KEY_ELSEWHERE;
        w = "the saved data position would point at other tokens";
    } else if (strcmp(key, "optimizer") == 0) {
        k = RESUME_KEY_ELSEWHERE; // optim_state_get refuses another optimizer's state
        w = "the saved optimizer state belongs to the saved optimizer";
    } else if (in_list(FIXED, sizeof(FIXED) / sizeof(FIXED[0]), key) ||
               (fixed && config_field(key) && fixed(key))) {
        k = RESUME_KEY_FIXED;
        w = "the saved weights are of the saved model's shape and attention";
    }
    if (why) *why = w;
    return k;
}

// The next entry of a comma-separated list (spaces trimmed) into buf; returns the rest of the
// list, or NULL at its end.
static const char* next_entry(const char* p, char* buf, size_t cap) {
    if (!p || !*p) return NULL;
    const char* e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    while (n && *p == ' ')
        p++, n--;
    while (n && p[n - 1] == ' ')
        n--;
    snprintf(buf, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
    return e ? e + 1 : p + n + strlen(p + n);
}

int resume_change_validate(const char* list, ResumeFixedFn fixed, char* err, size_t errcap) {
    char key[CONFIG_STR];
    for (const char* p = list; (p = next_entry(p, key, sizeof(key))) != NULL;) {
        const char* why;
        if (!key[0]) {
            snprintf(err, errcap, "key 'resume_change': an empty entry in '%s'", list);
            return -1;
        }
        if (strncmp(key, "attn.", 5) == 0) {
            if (!key[5]) {
                snprintf(err, errcap, "key 'resume_change': 'attn.' needs a name after the dot");
                return -1;
            }
            continue;
        }
        if (!config_field(key)) {
            const char* s = config_closest_key(key);
            snprintf(err, errcap, "key 'resume_change': unknown key '%s'%s%s%s", key,
                     s ? " (did you mean '" : "", s ? s : "", s ? "'?)" : "");
            return -1;
        }
        ResumeKeyKind k = resume_key_kind(key, fixed, &why);
        if (k == RESUME_KEY_ELSEWHERE || k == RESUME_KEY_FIXED) {
            snprintf(err, errcap,
                     "key 'resume_change': '%s' cannot change on resume (%s); train into a new "
                     "out_dir instead",
                     key, why);
            return -1;
        }
    }
    return 0;
}

// 1 when `list` names `key`.
static int resume_change_names(const char* list, const char* key) {
    char e[CONFIG_STR];
    for (const char* p = list; (p = next_entry(p, e, sizeof(e))) != NULL;)
        if (strcmp(e, key) == 0) return 1;
    return 0;
}

// err += text (truncated at errcap).
static void add(char* err, size_t errcap, const char* text) {
    size_t n = strlen(err);
    if (n + 1 < errcap) snprintf(err + n, errcap - n, "%s", text);
}

typedef struct {
    const char* what;
    ResumeFixedFn rules;
    const Config* now;
    ResumeChanges* out;
    int nfixed, nunnamed;
    char fixed[2048], unnamed[2048], names[1024];
} Compare;

static void differ(Compare* k, const char* key, const char* a, const char* b) {
    const char* why = NULL;
    ResumeKeyKind kind = resume_key_kind(key, k->rules, &why);
    if (kind == RESUME_KEY_EXEMPT || kind == RESUME_KEY_ELSEWHERE) return; // (checked elsewhere)
    char line[CONFIG_STR * 2 + 200];
    snprintf(line, sizeof(line), "key '%s' was '%s', now '%s'", key, a, b);
    if (kind == RESUME_KEY_FIXED) {
        if (k->nfixed++ == 0)
            snprintf(k->fixed, sizeof(k->fixed),
                     "key '%s' was '%s' in %s, now '%s': %s; set it back, or train into a new "
                     "out_dir",
                     key, a, k->what, b, why);
        return;
    }
    if (resume_change_names(k->now->resume_change, key)) {
        if (k->out) {
            ASSERT(k->out->n < RESUME_MAX_CHANGES);
            ResumeChange* c = &k->out->ch[k->out->n++];
            util_strlcpy(c->key, key, sizeof(c->key));
            util_strlcpy(c->was, a, sizeof(c->was));
            util_strlcpy(c->now, b, sizeof(c->now));
        }
        return;
    }
    add(k->unnamed, sizeof(k->unnamed), k->nunnamed ? "; " : "");
    add(k->unnamed, sizeof(k->unnamed), line);
    add(k->names, sizeof(k->names), k->nunnamed++ ? "," : "");
    add(k->names, sizeof(k->names), key);
}

int resume_keys_compare(const Config* old, const Config* now, ResumeFixedFn fixed, const char* what,
                        ResumeChanges* out, char* err, size_t errcap) {
    static Compare k; // (large; the trainer compares once)
    memset(&k, 0, sizeof(k));
    k.what = what;
    k.rules = fixed;
    k.now = now;
    k.out = out;
    if (out) out->n = 0;
    for (int i = 0; i < CONFIG_NFIELDS; i++) {
        const ConfigField* f = &CONFIG_FIELDS[i];
        char a[CONFIG_STR + 32], b[CONFIG_STR + 32];
        config_format_value(a, sizeof(a), old, f);
        config_format_value(b, sizeof(b), now, f);
        if (strcmp(a, b) != 0) differ(&k, f->key, a, b);
    }
    for (int pass = 0; pass < 2; pass++) { // attn.* keys by name: old's, then those only in now
        const Config* x = pass ? now : old;
        const Config* y = pass ? old : now;
        for (int i = 0; i < x->n_attn && i < CONFIG_MAX_ATTN; i++) {
            const char* vy = config_attn_get(y, x->attn[i].key + 5, NULL);
            if (pass == 1 && vy) continue; // compared in pass 0
            if (vy && strcmp(vy, x->attn[i].value) == 0) continue;
            const char* was = pass ? "(unset)" : x->attn[i].value;
            const char* is = pass ? x->attn[i].value : (vy ? vy : "(unset)");
            differ(&k, x->attn[i].key, was, is);
        }
    }
    if (k.nfixed) {
        snprintf(err, errcap, "%s", k.fixed);
        return -1;
    }
    if (k.nunnamed) {
        char all[CONFIG_STR + 1100];
        snprintf(all, sizeof(all), "%s%s%s", now->resume_change, now->resume_change[0] ? "," : "",
                 k.names);
        snprintf(err, errcap,
                 "%s differ%s from %s: %s. A resumed run continues the saved run exactly, so each "
                 "change must be named: add resume_change=%s (each change is then recorded with "
                 "its step in main.log, metrics.jsonl and config.conf), or set %s back, or start "
                 "over with overwrite=1",
                 k.nunnamed == 1 ? "a key" : "keys", k.nunnamed == 1 ? "s" : "", what, k.unnamed,
                 all, k.nunnamed == 1 ? "it" : "them");
        return -1;
    }
    return 0;
}

// *text += line + '\n'.
static void append_line(char** text, const char* line, size_t n) {
    size_t len = strlen(*text);
    *text = reallocCheck(*text, len + n + 2);
    memcpy(*text + len, line, n);
    (*text)[len + n] = '\n';
    (*text)[len + n + 1] = '\0';
}

void resume_changes_append_text(char** text, const char* saved, long step, const ResumeChanges* c) {
    const size_t pl = strlen(RESUME_CHANGE_LINE);
    for (const char* p = saved ? saved : ""; *p;) {
        size_t n = strcspn(p, "\n");
        if (n >= pl && strncmp(p, RESUME_CHANGE_LINE, pl) == 0) append_line(text, p, n);
        p += n + (p[n] == '\n');
    }
    for (int i = 0; c && i < c->n; i++) {
        char line[CONFIG_STR * 2 + 200];
        int n = snprintf(line, sizeof(line), RESUME_CHANGE_LINE "step %ld: %s '%s' -> '%s'", step,
                         c->ch[i].key, c->ch[i].was, c->ch[i].now);
        append_line(text, line, n < (int)sizeof(line) ? (size_t)n : sizeof(line) - 1);
    }
}
