// common/config.c: the run configuration. One table (CONFIG_FIELDS) gives every key its type,
// default, range or choices, group and help; the same table drives the `key = value` file parser
// (with `include`, comments and quoting), the command-line overrides, validation, `--help` and the
// resolved config written into out_dir.
//
// File syntax, one setting per line:
//   key = value            whitespace around key and value is ignored
//   # comment              a '#' at the start of a line or after whitespace starts a comment
//   key = "a # b "         double quotes keep '#' and spaces; \" and \\ escape inside quotes
//   include = other.conf   loads other.conf here (relative to this file's directory)
//   attn.NAME = value      kept raw for the attention variant, with the file and line
// Integers are decimal; an exponent form ("1e4") is accepted when its value is an exact integer.
// 0/1 keys also accept true/false, yes/no and on/off. Later settings override earlier ones.
#include "common/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define INCLUDE_MAX_DEPTH 16
#define ORIGIN_CMDLINE    "command line"

// For CF_STR fields `min` is the minimum length: 0 lets the value be empty.
#define F_INT(k, field, def, lo, hi, grp, hlp)                                                     \
    { k, CF_INT, offsetof(Config, field), sizeof(int), def, lo, hi, NULL, grp, hlp }
#define F_LONG(k, field, def, lo, hi, grp, hlp)                                                    \
    { k, CF_LONG, offsetof(Config, field), sizeof(long long), def, lo, hi, NULL, grp, hlp }
#define F_FLOAT(k, field, def, lo, hi, grp, hlp)                                                   \
    { k, CF_FLOAT, offsetof(Config, field), sizeof(float), def, lo, hi, NULL, grp, hlp }
#define F_STR(k, field, def, minlen, choices, grp, hlp)                                            \
    {                                                                                              \
        k, CF_STR, offsetof(Config, field), sizeof(((Config*)0)->field), def, minlen, 0, choices,  \
            grp, hlp                                                                               \
    }

const ConfigField CONFIG_FIELDS[] = {
    // ---- model
    F_INT("n_layer", n_layer, "12", 1, 256, "model", "number of transformer blocks"),
    F_INT("n_head", n_head, "12", 1, 256, "model", "attention heads per block; must divide n_embd"),
    F_INT("n_embd", n_embd, "768", 1, 16384, "model", "width of the residual stream (channels)"),
    F_INT("block_size", block_size, "1024", 1, 65536, "model",
          "maximum context length (size of the learned position table)"),
    F_INT("vocab_size", vocab_size, "50257", 1, 65536, "model",
          "vocabulary size: 50257 for gpt2, at least 257 for byte (256 bytes + EOT) (tokens are uint16)"),
    F_STR("pos_encoding", pos_encoding, "learned", 1, "learned|rope|alibi|none", "model",
          "positions: learned table, rotary, ALiBi biases, or none (causal mask only)"),
    F_INT("qk_norm", qk_norm, "0", 0, 1, "model",
          "1: RMS-normalise q and k per head before the dot product"),
    F_STR("init_from", init_from, "scratch", 1, NULL, "model",
          "scratch, an attnlab checkpoint PATH, llmc:PATH (llm.c model file) or hf:DIR"),
    // ---- attention
    F_STR("attention", attention, "softmax", 1, NULL, "attention",
          "variant name, or per-layer spec like 0-3:softmax,4-11:ssmax (./train "
          "--list-attention); its hyperparameters are attn.NAME keys"),
    // ---- data
    F_STR("train_data", train_data, "", 0, NULL, "data",
          "glob of training shards (llm.c .bin files), e.g. data_cache/x/train_*.bin"),
    F_STR("val_data", val_data, "", 0, NULL, "data",
          "glob of validation shards; empty: no validation"),
    F_STR("tokenizer", tokenizer, "gpt2", 1, "gpt2|byte", "data",
          "GPT-2 byte-level BPE, or raw bytes (ids 0-255)"),
    F_STR("tokenizer_dir", tokenizer_dir, "data_cache/gpt2", 1, NULL, "data",
          "directory holding the GPT-2 vocab.bpe and encoder.json"),
    F_INT("shuffle", shuffle, "0", 0, 1, "data",
          "0: shards and batches in order; 1: seeded reshuffle of both every epoch"),
    // ---- training
    F_INT("batch_size", batch_size, "4", 1, 65536, "training", "sequences per micro-batch (B)"),
    F_INT("seq_len", seq_len, "64", 1, 65536, "training",
          "tokens per training sequence (T); at most block_size"),
    F_INT("max_steps", max_steps, "100", 0, 1e9, "training", "optimizer steps to run"),
    F_INT("grad_accum", grad_accum, "1", 1, 65536, "training",
          "micro-batches accumulated into each optimizer step"),
    F_INT("threads", threads, "0", 0, 4096, "training", "OpenMP threads; 0: all cores"),
    F_INT("resume", resume, "0", 0, 1, "training",
          "1: continue exactly from the latest checkpoint in out_dir"),
    F_LONG("seed", seed, "1337", 0, 9223372036854775807.0, "training",
           "seed for initialisation, data shuffling and sampling"),
    // ---- optimizer
    F_STR("optimizer", optimizer, "adamw", 1, "adamw|sgd|signsgd|lion", "optimizer", "update rule"),
    F_FLOAT("lr", lr, "6e-4", 0, 10, "optimizer", "peak learning rate (reached after warm-up)"),
    F_FLOAT("min_lr", min_lr, "6e-5", 0, 10, "optimizer",
            "final learning rate of the cosine or linear decay; at most lr"),
    F_INT("warmup_steps", warmup_steps, "10", 0, 1e9, "optimizer",
          "steps of linear warm-up to lr; at most max_steps"),
    F_STR("lr_schedule", lr_schedule, "cosine", 1, "cosine|constant|linear", "optimizer",
          "learning-rate decay from lr to min_lr after warm-up"),
    F_FLOAT("weight_decay", weight_decay, "0.1", 0, 10, "optimizer",
            "decoupled weight-decay coefficient"),
    F_FLOAT("beta1", beta1, "0.9", 0, 0.999999, "optimizer", "first-moment decay (adamw, lion)"),
    F_FLOAT("beta2", beta2, "0.95", 0, 0.999999, "optimizer",
            "second-moment decay (adamw; lion's momentum)"),
    F_FLOAT("eps", eps, "1e-8", 1e-30, 1, "optimizer", "adamw denominator epsilon"),
    F_FLOAT("grad_clip", grad_clip, "1.0", 0, 1e6, "optimizer",
            "clip the global gradient norm to this; 0: no clipping"),
    // ---- output
    F_STR("out_dir", out_dir, "out", 1, NULL, "output",
          "directory for checkpoints, metrics.jsonl, the log and the resolved config"),
    F_INT("log_every", log_every, "1", 1, 1e9, "output", "progress line every N steps"),
    F_INT("eval_every", eval_every, "50", 0, 1e9, "output",
          "validation loss every N steps (and at the end); 0: never"),
    F_INT("eval_steps", eval_steps, "10", 1, 1e6, "output", "validation batches per evaluation"),
    F_INT("metrics_every", metrics_every, "50", 0, 1e9, "output",
          "attention diagnostics (entropy, sink rate, kurtosis, head grad norms) every N "
          "steps; 0: never"),
    F_INT("checkpoint_every", checkpoint_every, "0", 0, 1e9, "output",
          "checkpoint every N steps; 0: only at the end"),
    F_INT("sample_every", sample_every, "0", 0, 1e9, "output",
          "print a generated sample every N steps; 0: never"),
    F_INT("sample_tokens", sample_tokens, "64", 1, 65536, "output", "tokens per sample"),
    F_INT("keep_last", keep_last, "3", 1, 1e6, "output",
          "periodic checkpoints kept; older ones are deleted"),
    F_INT("dump_attention_every", dump_attention_every, "0", 0, 1e9, "output",
          "write attention maps (.npy) every N steps; 0: never"),
    F_FLOAT("sink_eps", sink_eps, "0.3", 0, 1, "output",
            "a head counts as a sink when its mean attention to the first token exceeds this "
            "(Gu et al.: 0.3)"),
    F_STR("nan_policy", nan_policy, "stop", 1, "stop|skip", "output",
          "on a non-finite loss or gradient: stop (exit 3) or skip the step"),
    F_INT("max_skips", max_skips, "10", 1, 1e6, "output",
          "with nan_policy = skip: stop after this many consecutive skipped steps"),
    F_INT("eval_seq_len", eval_seq_len, "0", 0, 65536, "output",
          "validation sequence length (up to block_size, for length extrapolation); 0: seq_len"),
};
const int CONFIG_NFIELDS = (int)(sizeof(CONFIG_FIELDS) / sizeof(CONFIG_FIELDS[0]));

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
// small helpers

const ConfigField* config_field(const char* key) {
    for (int i = 0; i < CONFIG_NFIELDS; i++)
        if (strcmp(CONFIG_FIELDS[i].key, key) == 0) return &CONFIG_FIELDS[i];
    return NULL;
}

static void* field_ptr(Config* c, const ConfigField* f) {
    return (char*)c + f->offset;
}
static const void* field_cptr(const Config* c, const ConfigField* f) {
    return (const char*)c + f->offset;
}

// Numbers as people write them: integers without exponent, others with %g.
static void fmt_num(char* buf, size_t cap, double x) {
    if (x >= 9223372036854775807.0)
        snprintf(buf, cap, "%lld", LLONG_MAX);
    else if (x == floor(x) && fabs(x) < 1e16)
        snprintf(buf, cap, "%.0f", x);
    else
        snprintf(buf, cap, "%g", x);
}

static int is_space(char ch) {
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' || ch == '\v' || ch == '\f';
}

static char* trim(char* s) {
    while (is_space(*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && is_space(s[n - 1]))
        s[--n] = '\0';
    return s;
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

// Only plain decimal notation: digits, sign, point, exponent (no hex, inf or nan).
static int numeric_chars(const char* s) {
    if (!*s) return 0;
    for (const char* p = s; *p; p++)
        if (!isdigit((unsigned char)*p) && !strchr("+-.eE", *p)) return 0;
    return 1;
}

// Parse a full-string number. Returns 0 ok, -1 not a number.
static int parse_double(const char* s, double* out) {
    if (!numeric_chars(s)) return -1;
    char* end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

static int is_bool_field(const ConfigField* f) {
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
static int field_set(Config* c, const ConfigField* f, const char* v, const char* where, char* err,
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
        memcpy(field_ptr(c, f), v, n + 1);
        return 0;
    }
    if (!*v) {
        snprintf(err, errcap, "%s: key '%s': empty value", where, f->key);
        return -1;
    }
    double d;
    int b;
    if (is_bool_field(f) && parse_bool_word(v, &b) == 0) {
        d = b;
    } else if (parse_double(v, &d) != 0) {
        snprintf(err, errcap, "%s: key '%s': '%s' is not a number", where, f->key, v);
        return -1;
    }
    if (f->type != CF_FLOAT && d != floor(d)) {
        snprintf(err, errcap, "%s: key '%s': '%s' is not an integer", where, f->key, v);
        return -1;
    }
    if (!(d >= f->min && d <= f->max)) {
        char lo[32], hi[32];
        fmt_num(lo, sizeof(lo), f->min);
        fmt_num(hi, sizeof(hi), f->max);
        snprintf(err, errcap, "%s: key '%s': %s is out of range [%s, %s]", where, f->key, v, lo,
                 hi);
        return -1;
    }
    switch (f->type) {
    case CF_INT:
        *(int*)field_ptr(c, f) = (int)d;
        break;
    case CF_FLOAT:
        *(float*)field_ptr(c, f) = (float)d;
        break;
    case CF_LONG: {
        // Plain integers go through strtoll so that values above 2^53 stay exact.
        char* end = NULL;
        errno = 0;
        long long ll = strtoll(v, &end, 10);
        if (*end == '\0' && errno == 0)
            *(long long*)field_ptr(c, f) = ll;
        else
            *(long long*)field_ptr(c, f) = (long long)d;
        break;
    }
    case CF_STR:
        break;
    }
    return 0;
}

static int attn_set(Config* c, const char* key, const char* v, const char* where, char* err,
                    size_t errcap) {
    if (strlen(key) <= 5) {
        snprintf(err, errcap, "%s: key 'attn.' needs a name after the dot", where);
        return -1;
    }
    if (strlen(key) >= sizeof(c->attn[0].key)) {
        snprintf(err, errcap, "%s: key '%s' is longer than %zu characters", where, key,
                 sizeof(c->attn[0].key) - 1);
        return -1;
    }
    if (!*v) {
        snprintf(err, errcap, "%s: key '%s': empty value", where, key);
        return -1;
    }
    size_t n = strlen(v);
    if (n >= sizeof(c->attn[0].value)) {
        snprintf(err, errcap, "%s: key '%s': the value is %zu characters long, at most %zu", where,
                 key, n, sizeof(c->attn[0].value) - 1);
        return -1;
    }
    for (const char* p = v; *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            snprintf(err, errcap, "%s: key '%s': the value contains a control character", where,
                     key);
            return -1;
        }
    }
    int slot = -1;
    for (int i = 0; i < c->n_attn; i++)
        if (strcmp(c->attn[i].key, key) == 0) slot = i;
    if (slot < 0) {
        if (c->n_attn >= CONFIG_MAX_ATTN) {
            snprintf(err, errcap, "%s: key '%s': too many attn.* keys (at most %d different)",
                     where, key, CONFIG_MAX_ATTN);
            return -1;
        }
        slot = c->n_attn++;
        util_strlcpy(c->attn[slot].key, key, sizeof(c->attn[slot].key));
    }
    memcpy(c->attn[slot].value, v, n + 1);
    util_strlcpy(c->attn[slot].origin, where, sizeof(c->attn[slot].origin));
    return 0;
}

// ----------------------------------------------------------------------------
// "did you mean"

static int levenshtein(const char* a, const char* b) {
    enum { MAXN = 96 };
    size_t na = strlen(a), nb = strlen(b);
    if (na >= MAXN || nb >= MAXN) return INT_MAX;
    int prev[MAXN + 1], cur[MAXN + 1];
    for (size_t j = 0; j <= nb; j++)
        prev[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int sub = prev[j - 1] +
                      (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            int m = sub < del ? sub : del;
            cur[j] = m < ins ? m : ins;
        }
        memcpy(prev, cur, (nb + 1) * sizeof(int));
    }
    return prev[nb];
}

const char* config_closest_key(const char* key) {
    for (size_t i = 0; i < sizeof(KEY_ALIASES) / sizeof(KEY_ALIASES[0]); i++)
        if (strcasecmp(key, KEY_ALIASES[i][0]) == 0) return KEY_ALIASES[i][1];
    size_t n = strlen(key);
    int limit = n <= 3 ? 1 : (n <= 6 ? 2 : 3);
    const char* best = NULL;
    int bestd = INT_MAX;
    for (int i = 0; i < CONFIG_NFIELDS; i++) {
        int d = levenshtein(key, CONFIG_FIELDS[i].key);
        if (d < bestd) bestd = d, best = CONFIG_FIELDS[i].key;
    }
    int d = levenshtein(key, "include");
    if (d < bestd) bestd = d, best = "include";
    return bestd <= limit ? best : NULL;
}

static void unknown_key(const char* where, const char* key, char* err, size_t errcap) {
    const char* s = config_closest_key(key);
    if (s)
        snprintf(err, errcap, "%s: unknown key '%s' (did you mean '%s'?)", where, key, s);
    else
        snprintf(err, errcap, "%s: unknown key '%s' (./train --help lists every key)", where, key);
}

// ----------------------------------------------------------------------------
// defaults and single settings

void config_defaults(Config* c) {
    memset(c, 0, sizeof(*c));
    char err[512];
    for (int i = 0; i < CONFIG_NFIELDS; i++) {
        int rc = field_set(c, &CONFIG_FIELDS[i], CONFIG_FIELDS[i].def, "default", err, sizeof(err));
        if (rc != 0) util_assert_fail(err, __FILE__, __LINE__);
    }
}

static int valid_key_chars(const char* k) {
    if (!*k) return 0;
    for (const char* p = k; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '.' && *p != '-') return 0;
    return 1;
}

typedef struct {
    char paths[INCLUDE_MAX_DEPTH + 1][PATH_MAX]; // canonical paths of the files being read
    char shown[INCLUDE_MAX_DEPTH + 1][1024];     // the same paths as the user wrote them
    int depth;
} IncludeStack;

static int load_file(Config* c, const char* path, IncludeStack* stk, const char* from, char* err,
                     size_t errcap);

// One setting from file or command line. `base` is the directory for relative includes.
static int apply_kv(Config* c, const char* key, const char* value, const char* where,
                    const char* base, IncludeStack* stk, char* err, size_t errcap) {
    if (strcmp(key, "include") == 0) {
        if (!*value) {
            snprintf(err, errcap, "%s: include needs a file name", where);
            return -1;
        }
        char full[1024];
        int n;
        if (value[0] == '/' || !base || !*base)
            n = snprintf(full, sizeof(full), "%s", value);
        else
            n = snprintf(full, sizeof(full), "%s/%s", base, value);
        if (n < 0 || (size_t)n >= sizeof(full)) {
            snprintf(err, errcap, "%s: include path too long", where);
            return -1;
        }
        return load_file(c, full, stk, where, err, errcap);
    }
    if (strncmp(key, "attn.", 5) == 0) return attn_set(c, key, value, where, err, errcap);
    const ConfigField* f = config_field(key);
    if (!f) {
        if (!valid_key_chars(key)) {
            snprintf(err, errcap, "%s: '%s' is not a valid key name", where, key);
            return -1;
        }
        unknown_key(where, key, err, errcap);
        return -1;
    }
    return field_set(c, f, value, where, err, errcap);
}

// ----------------------------------------------------------------------------
// file parsing

// Split one line into key and value (in place). Returns 1 for a setting, 0 for a blank or
// comment line, -1 on a syntax error (err set, prefixed with `where`).
static int split_line(char* line, char** key, char** value, const char* where, char* err,
                      size_t errcap) {
    char* s = line;
    while (is_space(*s))
        s++;
    if (*s == '\0' || *s == '#') return 0;
    char* eq = NULL;
    for (char* p = s; *p; p++) {
        if (*p == '=') {
            eq = p;
            break;
        }
        if (*p == '#' && is_space(p[-1])) {
            *p = '\0';
            break;
        }
    }
    if (!eq) {
        snprintf(err, errcap, "%s: expected 'key = value', got '%s'", where, trim(s));
        return -1;
    }
    *eq = '\0';
    *key = trim(s);
    if (!**key) {
        snprintf(err, errcap, "%s: missing key before '='", where);
        return -1;
    }
    char* v = eq + 1;
    while (is_space(*v))
        v++;
    if (*v == '"') {
        // quoted: copy with \" and \\ unescaped, then only a comment may follow
        char* out = v;
        char* p = v + 1;
        for (;;) {
            if (*p == '\0') {
                snprintf(err, errcap, "%s: key '%s': unterminated quote", where, *key);
                return -1;
            }
            if (*p == '\\' && (p[1] == '"' || p[1] == '\\')) {
                *out++ = p[1];
                p += 2;
                continue;
            }
            if (*p == '"') break;
            *out++ = *p++;
        }
        char* rest = p + 1;
        *out = '\0';
        while (is_space(*rest))
            rest++;
        if (*rest != '\0' && *rest != '#') {
            snprintf(err, errcap, "%s: key '%s': unexpected text after the closing quote: '%s'",
                     where, *key, trim(rest));
            return -1;
        }
        if (*rest == '#' && rest == p + 1) {
            snprintf(err, errcap, "%s: key '%s': put a space between the closing quote and '#'",
                     where, *key);
            return -1;
        }
        *value = v;
        return 1;
    }
    for (char* p = v; *p; p++) {
        if (*p == '#' && p > v && is_space(p[-1])) {
            *p = '\0';
            break;
        }
        if (*p == '#' && p == v) {
            *p = '\0';
            break;
        }
    }
    *value = trim(v);
    return 1;
}

static int load_file(Config* c, const char* path, IncludeStack* stk, const char* from, char* err,
                     size_t errcap) {
    char canon[PATH_MAX];
    FILE* f = fopen(path, "r");
    if (!f) {
        if (from)
            snprintf(err, errcap, "%s: cannot open included file %s: %s", from, path,
                     strerror(errno));
        else
            snprintf(err, errcap, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    if (!realpath(path, canon)) util_strlcpy(canon, path, sizeof(canon));
    for (int i = 0; i < stk->depth; i++) {
        if (strcmp(stk->paths[i], canon) == 0) {
            char chain[2048];
            size_t len = 0;
            chain[0] = '\0';
            for (int j = i; j < stk->depth; j++) {
                int w = snprintf(chain + len, sizeof(chain) - len, "%s -> ", stk->shown[j]);
                if (w < 0 || (size_t)w >= sizeof(chain) - len) break;
                len += (size_t)w;
            }
            snprintf(err, errcap, "%s: include cycle: %s%s", from ? from : path, chain, path);
            fclose(f);
            return -1;
        }
    }
    if (stk->depth > INCLUDE_MAX_DEPTH) {
        snprintf(err, errcap, "%s: includes nested deeper than %d levels (at %s)",
                 from ? from : path, INCLUDE_MAX_DEPTH, path);
        fclose(f);
        return -1;
    }
    util_strlcpy(stk->paths[stk->depth], canon, sizeof(stk->paths[0]));
    util_strlcpy(stk->shown[stk->depth], path, sizeof(stk->shown[0]));
    stk->depth++;

    // directory of this file, for relative includes
    char base[1024];
    util_strlcpy(base, path, sizeof(base));
    char* slash = strrchr(base, '/');
    if (slash)
        slash[slash == base ? 1 : 0] = '\0';
    else
        base[0] = '\0';

    char* line = NULL;
    size_t cap = 0;
    ssize_t got;
    int lineno = 0, rc = 0;
    while ((got = getline(&line, &cap, f)) >= 0) {
        lineno++;
        char where[1100];
        snprintf(where, sizeof(where), "%s:%d", path, lineno);
        if (memchr(line, '\0', (size_t)got)) {
            snprintf(err, errcap, "%s: NUL byte in the file (is it a text config file?)", where);
            rc = -1;
            break;
        }
        char *key = NULL, *value = NULL;
        int s = split_line(line, &key, &value, where, err, errcap);
        if (s < 0) {
            rc = -1;
            break;
        }
        if (s == 0) continue;
        if (apply_kv(c, key, value, where, base, stk, err, errcap) != 0) {
            rc = -1;
            break;
        }
    }
    if (rc == 0 && ferror(f)) {
        snprintf(err, errcap, "%s: read error", path);
        rc = -1;
    }
    free(line);
    fclose(f);
    stk->depth--;
    return rc;
}

int config_load(Config* c, const char* path, char* err, size_t errcap) {
    IncludeStack* stk = mallocCheck(sizeof(IncludeStack));
    stk->depth = 0;
    int rc = load_file(c, path, stk, NULL, err, errcap);
    free(stk);
    return rc;
}

int config_apply_arg(Config* c, const char* arg, char* err, size_t errcap) {
    const char* a = arg;
    if (strncmp(a, "--", 2) == 0) a += 2;
    const char* eq = strchr(a, '=');
    if (!eq) {
        snprintf(err, errcap, "command line: '%s' is not key=value", arg);
        return -1;
    }
    char key[128];
    size_t klen = (size_t)(eq - a);
    if (klen >= sizeof(key)) {
        snprintf(err, errcap, "command line: key '%.*s...' is too long", 40, a);
        return -1;
    }
    memcpy(key, a, klen);
    key[klen] = '\0';
    char* k = trim(key);
    if (!*k) {
        snprintf(err, errcap, "command line: missing key before '=' in '%s'", arg);
        return -1;
    }
    IncludeStack* stk = mallocCheck(sizeof(IncludeStack));
    stk->depth = 0;
    int rc = apply_kv(c, k, eq + 1, ORIGIN_CMDLINE, NULL, stk, err, errcap);
    free(stk);
    return rc;
}

// ----------------------------------------------------------------------------
// validation

static int field_check(const Config* c, const ConfigField* f, char* err, size_t errcap) {
    char v[CONFIG_STR + 32];
    config_format_value(v, sizeof(v), c, f);
    Config tmp; // re-parse the formatted value: the same rules as the file parser
    memset(&tmp, 0, sizeof(tmp));
    if (f->type == CF_STR && memchr(field_cptr(c, f), '\0', f->size) == NULL) {
        snprintf(err, errcap, "key '%s': the value is not terminated", f->key);
        return -1;
    }
    char e[600];
    if (field_set(&tmp, f, v, "config", e, sizeof(e)) != 0) {
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
    if (strcmp(c->pos_encoding, "rope") == 0 && (c->n_embd / c->n_head) % 2 != 0) {
        snprintf(err, errcap,
                 "pos_encoding = rope needs an even head size, but n_embd / n_head = %d / %d = %d",
                 c->n_embd, c->n_head, c->n_embd / c->n_head);
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
        snprintf(err, errcap, "warmup_steps = %d is larger than max_steps = %d", c->warmup_steps,
                 c->max_steps);
        return -1;
    }
    if (strcmp(c->tokenizer, "gpt2") == 0 && c->vocab_size < 50257) {
        snprintf(err, errcap, "vocab_size = %d is too small for tokenizer = gpt2 (needs 50257)",
                 c->vocab_size);
        return -1;
    }
    if (strcmp(c->tokenizer, "byte") == 0 && c->vocab_size < 257) {
        snprintf(err, errcap, "vocab_size = %d is too small for tokenizer = byte (needs 257: 256 bytes + EOT)",
                 c->vocab_size);
        return -1;
    }
    if (c->n_attn < 0 || c->n_attn > CONFIG_MAX_ATTN) {
        snprintf(err, errcap, "n_attn = %d is out of range [0, %d]", c->n_attn, CONFIG_MAX_ATTN);
        return -1;
    }
    return 0;
}

const char* config_attn_get(const Config* c, const char* name, const char** origin) {
    for (int i = 0; i < c->n_attn; i++) {
        const ConfigKV* kv = &c->attn[i];
        if (strncmp(kv->key, "attn.", 5) == 0 && strcmp(kv->key + 5, name) == 0) {
            if (origin) *origin = kv->origin;
            return kv->value;
        }
    }
    if (origin) *origin = NULL;
    return NULL;
}

// ----------------------------------------------------------------------------
// output

void config_format_value(char* buf, size_t cap, const Config* c, const ConfigField* f) {
    const void* p = field_cptr(c, f);
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

// Write a string value so that the parser reads back exactly `v`.
static void write_str_value(FILE* f, const char* v) {
    size_t n = strlen(v);
    int quote = n == 0 || is_space(v[0]) || is_space(v[n - 1]) || v[0] == '"' || strchr(v, '#');
    if (!quote) {
        fputs(v, f);
        return;
    }
    fputc('"', f);
    for (const char* p = v; *p; p++) {
        if (*p == '"' || *p == '\\') fputc('\\', f);
        fputc(*p, f);
    }
    fputc('"', f);
}

int config_write(const Config* c, FILE* f) {
    const char* group = NULL;
    for (int i = 0; i < CONFIG_NFIELDS; i++) {
        const ConfigField* fd = &CONFIG_FIELDS[i];
        if (!group || strcmp(group, fd->group) != 0) {
            fprintf(f, "%s# %s\n", group ? "\n" : "", fd->group);
            group = fd->group;
        }
        fprintf(f, "%-20s = ", fd->key);
        if (fd->type == CF_STR) {
            char v[CONFIG_STR + 1];
            config_format_value(v, sizeof(v), c, fd);
            write_str_value(f, v);
        } else {
            char v[64];
            config_format_value(v, sizeof(v), c, fd);
            fputs(v, f);
        }
        fputc('\n', f);
    }
    if (c->n_attn > 0) fprintf(f, "\n# attention hyperparameters (attn.*)\n");
    for (int i = 0; i < c->n_attn && i < CONFIG_MAX_ATTN; i++) {
        fprintf(f, "%-20s = ", c->attn[i].key);
        write_str_value(f, c->attn[i].value);
        fprintf(f, "   # from %s\n", c->attn[i].origin);
    }
    return ferror(f) ? -1 : 0;
}

int config_diff(const Config* a, const Config* b, char* what, size_t cap) {
    int ndiff = 0;
    if (cap) what[0] = '\0';
    for (int i = 0; i < CONFIG_NFIELDS; i++) {
        const ConfigField* f = &CONFIG_FIELDS[i];
        char va[CONFIG_STR + 32], vb[CONFIG_STR + 32];
        config_format_value(va, sizeof(va), a, f);
        config_format_value(vb, sizeof(vb), b, f);
        if (strcmp(va, vb) != 0) {
            if (ndiff++ == 0 && cap) snprintf(what, cap, "%s: '%s' vs '%s'", f->key, va, vb);
        }
    }
    // attn.* keys: same set with the same values (order and origin do not matter)
    for (int pass = 0; pass < 2; pass++) {
        const Config* x = pass ? b : a;
        const Config* y = pass ? a : b;
        for (int i = 0; i < x->n_attn && i < CONFIG_MAX_ATTN; i++) {
            const char* vy = config_attn_get(y, x->attn[i].key + 5, NULL);
            if (pass == 1 && vy) continue; // already compared in pass 0
            if (!vy || strcmp(vy, x->attn[i].value) != 0) {
                if (ndiff++ == 0 && cap)
                    snprintf(what, cap, "%s: '%s' vs '%s'", x->attn[i].key,
                             pass ? (vy ? vy : "(unset)") : x->attn[i].value,
                             pass ? x->attn[i].value : (vy ? vy : "(unset)"));
            }
        }
    }
    return ndiff;
}

// Append `text` word-wrapped to `width` columns, continuation lines indented by `indent`.
static void print_wrapped(FILE* f, const char* text, int col, int indent, int width) {
    const char* p = text;
    while (*p) {
        const char* e = p;
        while (*e && *e != ' ')
            e++;
        int wl = (int)(e - p);
        if (col > indent && col + 1 + wl > width) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        }
        fprintf(f, "%.*s", wl, p);
        col += wl;
        p = e;
        while (*p == ' ')
            p++;
    }
    fputc('\n', f);
}

void config_print_help(FILE* f) {
    static const char* const TYPE_NAMES[] = {"int", "int", "float", "str"};
    fprintf(f, "Config keys (set in a config file as `key = value`, or on the command line as "
               "key=value\nor --key=value; later settings win). attn.NAME keys set hyperparameters "
               "of the\nattention variant; `include = FILE` reads another config file in place.\n");
    const char* group = NULL;
    for (int i = 0; i < CONFIG_NFIELDS; i++) {
        const ConfigField* fd = &CONFIG_FIELDS[i];
        if (!group || strcmp(group, fd->group) != 0) {
            fprintf(f, "\n%s:\n", fd->group);
            group = fd->group;
        }
        char range[80];
        if (fd->type == CF_STR) {
            snprintf(range, sizeof(range), "%s", fd->choices ? fd->choices : "(text)");
        } else if (is_bool_field(fd)) {
            snprintf(range, sizeof(range), "0|1");
        } else {
            char lo[32], hi[32];
            fmt_num(lo, sizeof(lo), fd->min);
            fmt_num(hi, sizeof(hi), fd->max);
            snprintf(range, sizeof(range), "[%s, %s]", lo, hi);
        }
        char def[64];
        if (fd->type == CF_STR && !fd->def[0])
            snprintf(def, sizeof(def), "\"\"");
        else
            snprintf(def, sizeof(def), "%s", fd->def);
        fprintf(f, "  %-20s %-5s %-16s %s\n      ", fd->key, TYPE_NAMES[fd->type], def, range);
        print_wrapped(f, fd->help, 6, 6, 100);
    }
}
