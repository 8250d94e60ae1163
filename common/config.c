// common/config.c: the run configuration: the defaults, the `key = value` file parser (with
// `include`, comments and quoting), the command-line overrides, the attn.* keys, and the output
// (resolved config file, config_diff, `--help`). The key table (with each key's default text) is
// in config_table.c; setting and formatting one value and "did you mean" are in config_field.c;
// config_validate is in config_check.c. Calls go one way: config_check.c -> resume_keys.c ->
// config.c -> config_field.c -> config_table.c.
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
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/config_int.h"
#include "common/util.h"

#define INCLUDE_MAX_DEPTH 16
#define ORIGIN_CMDLINE    "command line"
#define CONFIG_FILE_MAX   ((size_t)1 << 20) // a config file is text of at most 1 MiB

// ----------------------------------------------------------------------------
// small helpers

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

static void unknown_key(const char* where, const char* key, char* err, size_t errcap) {
    const char* s = config_closest_key(key);
    if (s)
        snprintf(err, errcap, "%s: unknown key '%s' (did you mean '%s'?)", where, key, s);
    else
        snprintf(err, errcap, "%s: unknown key '%s' (./train --help lists every key)", where, key);
}

// ----------------------------------------------------------------------------
// defaults and single settings

// Every field from its default text, through the same checks as a setting in a file.
void config_defaults(Config* c) {
    memset(c, 0, sizeof(*c));
    char err[512];
    for (int i = 0; i < CONFIG_NFIELDS; i++) {
        int rc = config_field_set(c, &CONFIG_FIELDS[i], CONFIG_FIELDS[i].def, "default", err,
                                  sizeof(err));
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
    return config_field_set(c, f, value, where, err, errcap);
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
    // a FIFO or device is refused before the open (opening a FIFO would wait for a writer)
    if (util_file_exists(path) &&
        util_check_input(NULL, path, CONFIG_FILE_MAX, "config file", err, errcap))
        return -1;
    FILE* f = fopen(path, "r");
    if (!f) {
        if (from)
            snprintf(err, errcap, "%s: cannot open included file %s: %s", from, path,
                     strerror(errno));
        else
            snprintf(err, errcap, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    if (util_check_input(f, path, CONFIG_FILE_MAX, "config file", err, errcap)) {
        fclose(f);
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

int config_load_text(Config* c, const char* text, const char* name, char* err, size_t errcap) {
    IncludeStack* stk = mallocCheck(sizeof(IncludeStack));
    stk->depth = 0;
    int lineno = 0, rc = 0;
    char* line = NULL;
    size_t cap = 0;
    for (const char* p = text; *p && rc == 0;) {
        const char* nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n + 1 > cap) line = reallocCheck(line, cap = n + 1);
        memcpy(line, p, n);
        line[n] = '\0';
        p += n + (nl ? 1 : 0);
        lineno++;
        char where[1100];
        snprintf(where, sizeof(where), "%s:%d", name, lineno);
        char *key = NULL, *value = NULL;
        int s = split_line(line, &key, &value, where, err, errcap);
        if (s < 0) rc = -1;
        if (s > 0 && apply_kv(c, key, value, where, NULL, stk, err, errcap) != 0) rc = -1;
    }
    free(line);
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
        } else if (config_is_bool_field(fd)) {
            snprintf(range, sizeof(range), "0|1");
        } else {
            char lo[32], hi[32];
            config_fmt_num(lo, sizeof(lo), fd->min);
            config_fmt_num(hi, sizeof(hi), fd->max);
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
