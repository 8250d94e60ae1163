// common/config_field.c: one field of the run configuration: setting it from text with the
// checks of its key's type, range and choices (config_field_set: used by the parser, the
// defaults and config_validate), its value as text (config_format_value, config_fmt_num), and
// the closest-key suggestions ("did you mean", through common/suggest.h) for unknown keys. It
// uses the key table (config_table.c) only; the parser (config.c), the cross-field validation
// (config_check.c) and the resume key kinds (resume_keys.c) call it, never the other way.
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/config_int.h"
#include "common/suggest.h"
#include "common/util.h" // util_parse_double: no NaN, inf or hex

// Names researchers bring from nanoGPT / Hugging Face, for "did you mean" hints.
static const char* const KEY_ALIASES[][2] = {
    {"learning_rate", "lr"},
    {"max_lr", "lr"},
    {"n_ctx", "block_size"},
    {"n_positions", "block_size"},
    {"context_length", "block_size"},
    {"max_iters", "max_steps"},
    {"num_steps", "max_steps"},
    {"steps", "max_steps"},
    {"warmup_iters", "warmup_steps"},
    {"gradient_accumulation_steps", "grad_accum"},
    {"dataset", "train_data"},
    {"decay_lr", "lr_schedule"},
    {"output_dir", "out_dir"},
    {"eval_interval", "eval_every"},
    {"log_interval", "log_every"},
    {"eval_iters", "eval_steps"},
    {"n_embed", "n_embd"},
    {"n_heads", "n_head"},
    {"n_layers", "n_layer"},
    {"d_model", "n_embd"},
    {"init", "init_from"},
    {"attn", "attention"},
};

// ----------------------------------------------------------------------------
// single values

// Numbers as people write them: integers without exponent, others with %g.
void config_fmt_num(char* buf, size_t cap, double x) {
    if (x >= 9223372036854775807.0)
        snprintf(buf, cap, "%lld", LLONG_MAX);
    else if (x == floor(x) && fabs(x) < 1e16)
        snprintf(buf, cap, "%.0f", x);
    else
        snprintf(buf, cap, "%g", x);
}

// The value of field f as config text (common/config.h).
void config_format_value(char* buf, size_t cap, const Config* c, const ConfigField* f) {
    const void* p = config_field_cptr(c, f);
    switch (f->type) {
    case CF_INT:
        snprintf(buf, cap, "%d", *(const int*)p);
        break;
    case CF_LONG:
        snprintf(buf, cap, "%lld", *(const long long*)p);
        break;
    case CF_FLOAT: {
        // the shortest text that reads back as the same float
        float x = *(const float*)p;
        for (int prec = 6; prec <= 9; prec++) {
            snprintf(buf, cap, "%.*g", prec, (double)x);
            if ((float)strtod(buf, NULL) == x) break;
        }
        break;
    }
    case CF_STR:
        snprintf(buf, cap, "%.*s", (int)f->size, (const char*)p);
        break;
    }
}

// Is `choice` one of the '|'-separated entries of `choices`?
static int choice_ok(const char* choices, const char* v) {
    size_t n = strlen(v);
    const char* p = choices;
    while (*p) {
        const char* e = strchr(p, '|');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, v, n) == 0) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

int config_is_bool_field(const ConfigField* f) {
    return (f->type == CF_INT) && f->min == 0 && f->max == 1;
}

static int parse_bool_word(const char* s, int* out) {
    static const char* const T[] = {"true", "yes", "on"};
    static const char* const F[] = {"false", "no", "off"};
    for (int i = 0; i < 3; i++) {
        if (strcasecmp(s, T[i]) == 0) return *out = 1, 0;
        if (strcasecmp(s, F[i]) == 0) return *out = 0, 0;
    }
    return -1;
}

// Set field f from text. `where` is "FILE:LINE" or "command line".
int config_field_set(Config* c, const ConfigField* f, const char* v, const char* where, char* err,
                     size_t errcap) {
    for (const char* p = v; *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            snprintf(err, errcap, "%s: key '%s': the value contains a control character", where,
                     f->key);
            return -1;
        }
    }
    if (f->type == CF_STR) {
        size_t n = strlen(v);
        if (n < (size_t)f->min) {
            snprintf(err, errcap, "%s: key '%s': empty value", where, f->key);
            return -1;
        }
        if (n >= f->size) {
            snprintf(err, errcap, "%s: key '%s': the value is %zu characters long, at most %zu",
                     where, f->key, n, f->size - 1);
            return -1;
        }
        if (f->choices && !choice_ok(f->choices, v)) {
            snprintf(err, errcap, "%s: key '%s': '%s' is not one of %s", where, f->key, v,
                     f->choices);
            return -1;
        }
        memcpy(config_field_ptr(c, f), v, n + 1);
        return 0;
    }
    if (!*v) {
        snprintf(err, errcap, "%s: key '%s': empty value", where, f->key);
        return -1;
    }
    double d;
    int b;
    if (config_is_bool_field(f) && parse_bool_word(v, &b) == 0) {
        d = b;
    } else if (util_parse_double(v, &d) != 0) {
        snprintf(err, errcap, "%s: key '%s': '%s' is not a number", where, f->key, v);
        return -1;
    }
    if (f->type != CF_FLOAT && d != floor(d)) {
        snprintf(err, errcap, "%s: key '%s': '%s' is not an integer", where, f->key, v);
        return -1;
    }
    if (!(d >= f->min && d <= f->max)) {
        char lo[32], hi[32];
        config_fmt_num(lo, sizeof(lo), f->min);
        config_fmt_num(hi, sizeof(hi), f->max);
        snprintf(err, errcap, "%s: key '%s': %s is out of range [%s, %s]", where, f->key, v, lo,
                 hi);
        return -1;
    }
    switch (f->type) {
    case CF_INT:
        *(int*)config_field_ptr(c, f) = (int)d;
        break;
    case CF_FLOAT:
        *(float*)config_field_ptr(c, f) = (float)d;
        break;
    case CF_LONG: {
        // Plain integers go through strtoll so that values above 2^53 stay exact.
        char* end = NULL;
        errno = 0;
        long long ll = strtoll(v, &end, 10);
        if (*end == '\0' && errno == 0)
            *(long long*)config_field_ptr(c, f) = ll;
        else
            *(long long*)config_field_ptr(c, f) = (long long)d;
        break;
    }
    case CF_STR:
        break;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// "did you mean"

const char* config_closest_key(const char* key) {
    for (size_t i = 0; i < sizeof(KEY_ALIASES) / sizeof(KEY_ALIASES[0]); i++)
        if (strcasecmp(key, KEY_ALIASES[i][0]) == 0) return KEY_ALIASES[i][1];
    Suggest s; // common/suggest.h, the one "did you mean"
    suggest_init(&s, key);
    for (int i = 0; i < CONFIG_NFIELDS; i++)
        suggest_offer(&s, CONFIG_FIELDS[i].key);
    suggest_offer(&s, "include");
    return suggest_result(&s);
}
