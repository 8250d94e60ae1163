// attention/hparams.c: variant hyperparameters (config keys attn.<name>): defaults, parsing of
// numbers and choice words with range checks, "did you mean" for names, and the listing
// printed by `./train --list-attention`.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "common/suggest.h"
#include "common/util.h"

void attn_hparams_default(AttnHParams* hp, const AttnVariant* v, int T_train, int n_head,
                          int head_size, int n_embd, int n_layer) {
    memset(hp, 0, sizeof(*hp));
    ASSERT(v->n_hparams <= ATTN_MAX_HP);
    for (int i = 0; i < v->n_hparams; i++)
        hp->v[i] = v->hparams[i].def;
    hp->T_train = T_train;
    hp->n_head = n_head;
    hp->head_size = head_size;
    hp->n_embd = n_embd;
    hp->n_layer = n_layer;
}

void attn_compose(AttnComposed* out, const AttnVariant* v, const AttnHParams* hp) {
    memset(out, 0, sizeof(*out));
    if (v->compose) v->compose(out, hp);
}

int attn_hparam_index(const AttnVariant* v, const char* name) {
    for (int i = 0; i < v->n_hparams; i++)
        if (strcmp(v->hparams[i].name, name) == 0) return i;
    return -1;
}

// index of `word` in "a|b|c", or -1
static int choice_index(const char* choices, const char* word) {
    int idx = 0;
    const char* p = choices;
    size_t wl = strlen(word);
    while (*p) {
        const char* bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == wl && strncmp(p, word, len) == 0) return idx;
        idx++;
        if (!bar) break;
        p = bar + 1;
    }
    return -1;
}

static void choice_word(char* out, size_t cap, const char* choices, int idx) {
    const char* p = choices;
    for (int i = 0; i < idx && p; i++) {
        p = strchr(p, '|');
        if (p) p++;
    }
    if (!p) {
        snprintf(out, cap, "?");
        return;
    }
    const char* bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len >= cap) len = cap - 1;
    memcpy(out, p, len);
    out[len] = '\0';
}

int attn_hparams_set(AttnHParams* hp, const AttnVariant* v, const char* name, const char* value,
                     char* err, size_t errcap) {
    int i = attn_hparam_index(v, name);
    if (i < 0) {
        snprintf(err, errcap, "attention '%s' has no hyperparameter 'attn.%s'", v->name, name);
        return -1;
    }
    const AttnHParamSpec* s = &v->hparams[i];
    if (s->choices) {
        int c = choice_index(s->choices, value);
        if (c < 0) {
            snprintf(err, errcap, "key 'attn.%s': '%s' is not one of %s", name, value, s->choices);
            return -1;
        }
        hp->v[i] = (float)c;
        return 0;
    }
    char num[64]; // the shared number parser (common/util.h), trailing blanks dropped
    size_t n = strlen(value);
    while (n > 0 && (value[n - 1] == ' ' || value[n - 1] == '\t'))
        n--;
    double x = 0;
    int bad = n >= sizeof(num);
    if (!bad) {
        memcpy(num, value, n);
        num[n] = '\0';
        bad = util_parse_double(num, &x) != 0;
    }
    if (bad) {
        snprintf(err, errcap, "key 'attn.%s': '%s' is not a number", name, value);
        return -1;
    }
    if (x < s->min || x > s->max) {
        snprintf(err, errcap, "key 'attn.%s': %g is out of range [%g, %g]", name, x, (double)s->min,
                 (double)s->max);
        return -1;
    }
    hp->v[i] = (float)x;
    return 0;
}

void attn_hparams_write(const AttnHParams* hp, const AttnVariant* v, void* file) {
    FILE* f = file;
    for (int i = 0; i < v->n_hparams; i++) {
        const AttnHParamSpec* s = &v->hparams[i];
        if (s->choices) {
            char w[64];
            choice_word(w, sizeof(w), s->choices, (int)hp->v[i]);
            fprintf(f, "attn.%s = %s\n", s->name, w);
        } else {
            fprintf(f, "attn.%s = %.9g\n", s->name, (double)hp->v[i]);
        }
    }
}

const char* attn_closest(const char* name) {
    Suggest s; // common/suggest.h, the one "did you mean"
    suggest_init(&s, name);
    for (int i = 0; i < attn_count(); i++)
        suggest_offer(&s, attn_get(i)->name);
    return suggest_result(&s);
}

void attn_print_variant(void* file, const AttnVariant* v) {
    FILE* f = file;
    fprintf(f, "%-12s %s\n", v->name, v->formula);
    fprintf(f, "%-12s rows sum to 1: %s; shift-invariant: %s%s\n", "",
            v->rows_sum_to_one ? "yes" : "no", v->shift_invariant ? "yes" : "no",
            v->layer_forward
                ? (v->ignores_inner ? "; layer-level" : "; layer-level (wraps attn.inner)")
                : "");
    if (v->source) fprintf(f, "%-12s source: %s\n", "", v->source);
    if (v->reference) fprintf(f, "%-12s reference: %s\n", "", v->reference);
    if (v->deviations) fprintf(f, "%-12s deviations: %s\n", "", v->deviations);
    if (v->layer_tensors) { // shapes shown for GPT-2 small's sizes
        AttnDims d = {.B = 1, .T = 1024, .C = 768, .NH = 12, .hs = 64};
        AttnHParams hp;
        attn_hparams_default(&hp, v, 1024, 12, 64, 768, 12);
        AttnTensorSpec ts[ATTN_MAX_TENSORS];
        int nt = v->layer_tensors(ts, &d, &hp);
        if (nt > 0) {
            fprintf(f, "%-12s learnable per layer (n_embd 768, n_head 12):", "");
            for (int k = 0; k < nt; k++) {
                fprintf(f, " %s(", ts[k].name);
                for (int q = 0; q < ts[k].ndim; q++)
                    fprintf(f, "%s%d", q ? "," : "", ts[k].shape[q]);
                fputc(')', f);
            }
            fputc('\n', f);
        }
    }
    if (v->params_per_head > 0) {
        fprintf(f, "%-12s learnable per head:", "");
        for (int k = 0; k < v->params_per_head; k++)
            fprintf(f, " %s", v->param_names[k]);
        fputc('\n', f);
    }
    for (int k = 0; k < v->n_hparams; k++) {
        const AttnHParamSpec* s = &v->hparams[k];
        if (s->choices) {
            char w[64];
            choice_word(w, sizeof(w), s->choices, (int)s->def);
            fprintf(f, "%-12s attn.%-14s = %-8s (%s) %s\n", "", s->name, w, s->choices, s->help);
        } else {
            fprintf(f, "%-12s attn.%-14s = %-8g [%g, %g] %s\n", "", s->name, (double)s->def,
                    (double)s->min, (double)s->max, s->help);
        }
    }
}

void attn_print_list(void* file) {
    FILE* f = file;
    fprintf(f,
            "attention variants (%d); choose with `attention = NAME`, set `attn.<key> = value`\n\n",
            attn_count());
    for (int i = 0; i < attn_count(); i++) {
        attn_print_variant(f, attn_get(i));
        fputc('\n', f);
    }
}

int attn_print_named(void* file, const char* name, char* err, size_t errcap) {
    const AttnVariant* v = attn_lookup(name);
    if (v) {
        attn_print_variant(file, v);
        return 0;
    }
    const char* near = attn_closest(name);
    snprintf(
        err, errcap,
        "--list-attention: unknown variant '%s'%s%s%s; `./train --list-attention` lists all %d",
        name, near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "", attn_count());
    return -1;
}
