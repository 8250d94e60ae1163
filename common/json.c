// common/json.c: implementation of json.h (JSON writer: growable buffer, separators tracked per
// nesting level, string escaping with UTF-8 validation).
#include "common/json.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

// ----------------------------------------------------------------------------
// buffer

void json_init(JsonBuf* j) {
    memset(j, 0, sizeof(*j));
}

void json_free(JsonBuf* j) {
    free(j->buf);
    memset(j, 0, sizeof(*j));
}

// Empty the buffer (keeps its memory).
static void json_reset(JsonBuf* j) {
    j->len = 0;
    j->depth = 0;
    if (j->buf) j->buf[0] = '\0';
}

static void buf_reserve(JsonBuf* j, size_t extra) {
    if (j->len + extra + 1 <= j->cap) return;
    size_t cap = j->cap ? j->cap : 256;
    while (cap < j->len + extra + 1)
        cap *= 2;
    j->buf = reallocCheck(j->buf, cap);
    j->cap = cap;
}

static void buf_put(JsonBuf* j, const char* s, size_t n) {
    buf_reserve(j, n);
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

static void buf_putc(JsonBuf* j, char c) {
    buf_put(j, &c, 1);
}

static void buf_printf(JsonBuf* j, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(JsonBuf* j, const char* fmt, ...) {
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    ASSERT(n >= 0 && (size_t)n < sizeof(tmp)); // only used for numbers
    buf_put(j, tmp, (size_t)n);
}

// ----------------------------------------------------------------------------
// strings

// Length of the valid UTF-8 sequence starting at s[0] (n bytes available), or 0 if invalid.
static size_t utf8_valid_len(const unsigned char* s, size_t n) {
    unsigned char c = s[0];
    size_t len;
    unsigned lo = 0x80, hi = 0xBF; // allowed range of the second byte
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0; // overlong
        if (c == 0xED) hi = 0x9F; // UTF-16 surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90; // overlong
        if (c == 0xF4) hi = 0x8F; // > U+10FFFF
    } else {
        return 0; // continuation byte, C0/C1 (overlong) or F5..FF
    }
    if (n < len) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t k = 2; k < len; k++)
        if (s[k] < 0x80 || s[k] > 0xBF) return 0;
    return len;
}

void json_append_escaped(JsonBuf* j, const char* str, size_t n) {
    const unsigned char* s = (const unsigned char*)str;
    buf_reserve(j, n + 2);
    buf_putc(j, '"');
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            size_t k = i; // copy a run of plain ASCII at once
            while (k < n && s[k] >= 0x20 && s[k] < 0x80 && s[k] != '"' && s[k] != '\\')
                k++;
            buf_put(j, str + i, k - i);
            i = k;
            continue;
        }
        switch (c) {
        case '"':
            buf_put(j, "\\\"", 2);
            i++;
            continue;
        case '\\':
            buf_put(j, "\\\\", 2);
            i++;
            continue;
        case '\b':
            buf_put(j, "\\b", 2);
            i++;
            continue;
        case '\f':
            buf_put(j, "\\f", 2);
            i++;
            continue;
        case '\n':
            buf_put(j, "\\n", 2);
            i++;
            continue;
        case '\r':
            buf_put(j, "\\r", 2);
            i++;
            continue;
        case '\t':
            buf_put(j, "\\t", 2);
            i++;
            continue;
        default:
            break;
        }
        if (c < 0x20) {
            buf_printf(j, "\\u%04x", c);
            i++;
            continue;
        }
        size_t len = utf8_valid_len(s + i, n - i);
        if (len == 0) {
            buf_put(j, "\\ufffd", 6);
            i++;
        } else {
            buf_put(j, str + i, len);
            i += len;
        }
    }
    buf_putc(j, '"');
}

// ----------------------------------------------------------------------------
// structure

// Separator and key before a value at the current level.
static void json_member(JsonBuf* j, const char* key) {
    ASSERT(j->depth > 0);
    int d = j->depth - 1;
    ASSERT(j->is_array[d] ? key == NULL : key != NULL);
    const int line = j->lines && d == 0; // json_begin_lines: a top-level member on its own line
    if (j->count[d]) buf_putc(j, ',');
    if (line) buf_put(j, "\n  ", 3);
    j->count[d] = 1;
    if (key) {
        json_append_escaped(j, key, strlen(key));
        buf_putc(j, ':');
        if (line) buf_putc(j, ' ');
    }
}

static void json_open(JsonBuf* j, char c, int is_array) {
    ASSERT(j->depth < JSON_MAX_DEPTH);
    buf_putc(j, c);
    j->count[j->depth] = 0;
    j->is_array[j->depth] = (unsigned char)is_array;
    j->depth++;
}

static void json_close(JsonBuf* j, char c, int is_array) {
    ASSERT(j->depth > 0 && j->is_array[j->depth - 1] == is_array);
    j->depth--;
    if (j->lines && j->depth == 0) buf_putc(j, '\n');
    buf_putc(j, c);
}

void json_begin(JsonBuf* j) {
    json_reset(j);
    j->lines = 0;
    json_open(j, '{', 0);
}

void json_begin_lines(JsonBuf* j) {
    json_begin(j);
    j->lines = 1;
}

void json_end(JsonBuf* j) {
    json_close(j, '}', 0);
}

void json_object_begin(JsonBuf* j, const char* key) {
    json_member(j, key);
    json_open(j, '{', 0);
}

void json_object_end(JsonBuf* j) {
    json_close(j, '}', 0);
}

void json_array_begin(JsonBuf* j, const char* key) {
    json_member(j, key);
    json_open(j, '[', 1);
}

void json_array_end(JsonBuf* j) {
    json_close(j, ']', 1);
}

// ----------------------------------------------------------------------------
// values

void json_int(JsonBuf* j, const char* key, long long v) {
    json_member(j, key);
    buf_printf(j, "%lld", v);
}

void json_num(JsonBuf* j, const char* key, double v) {
    json_member(j, key);
    if (isfinite(v))
        buf_printf(j, "%.9g", v);
    else
        buf_put(j, "null", 4);
}

void json_dbl(JsonBuf* j, const char* key, double v) {
    json_member(j, key);
    if (isfinite(v))
        buf_printf(j, "%.17g", v);
    else
        buf_put(j, "null", 4);
}

void json_strn(JsonBuf* j, const char* key, const char* s, size_t n) {
    json_member(j, key);
    if (s)
        json_append_escaped(j, s, n);
    else
        buf_put(j, "null", 4);
}

void json_str(JsonBuf* j, const char* key, const char* s) {
    json_strn(j, key, s, s ? strlen(s) : 0);
}

void json_bool(JsonBuf* j, const char* key, int v) {
    json_member(j, key);
    if (v)
        buf_put(j, "true", 4);
    else
        buf_put(j, "false", 5);
}

void json_null(JsonBuf* j, const char* key) {
    json_member(j, key);
    buf_put(j, "null", 4);
}

void json_literal(JsonBuf* j, const char* key, const char* literal) {
    ASSERT(literal && literal[0]); // (a constant of the caller's, never read from a file)
    json_member(j, key);
    buf_put(j, literal, strlen(literal));
}

void json_int_array(JsonBuf* j, const char* key, const int* v, size_t n) {
    json_array_begin(j, key);
    for (size_t i = 0; i < n; i++)
        json_int(j, NULL, v[i]);
    json_array_end(j);
}

void json_num_array(JsonBuf* j, const char* key, const float* v, size_t n) {
    json_array_begin(j, key);
    for (size_t i = 0; i < n; i++)
        json_num(j, NULL, v[i]);
    json_array_end(j);
}

void json_str_array(JsonBuf* j, const char* key, const char* const* v, size_t n) {
    json_array_begin(j, key);
    for (size_t i = 0; i < n; i++)
        json_str(j, NULL, v[i]);
    json_array_end(j);
}

// ----------------------------------------------------------------------------
// output

int json_write_line(const JsonBuf* j, FILE* f) {
    if (j->len && fwrite(j->buf, 1, j->len, f) != j->len) return -1;
    if (fputc('\n', f) == EOF) return -1;
    return fflush(f) == 0 ? 0 : -1;
}

int json_write_file(const JsonBuf* j, const char* path, char* err, size_t errcap) {
    AtomicFile af;
    if (atomic_open(&af, path) != 0 || atomic_write(&af, j->buf ? j->buf : "", j->len) != 0 ||
        atomic_write(&af, "\n", 1) != 0 || atomic_commit(&af) != 0) {
        if (err && errcap) snprintf(err, errcap, "%s", af.err);
        if (af.f) atomic_abort(&af); // a failed write leaves the temp file open
        return -1;
    }
    return 0;
}

int jsonl_keep_steps(const char* path, long last, const char* redo_key, char* err, size_t errcap) {
    size_t len;
    if (!util_file_exists(path)) return 0;
    char* text = util_read_file(path, &len, err, errcap);
    if (!text) return -1;
    AtomicFile af;
    int rc = atomic_open(&af, path);
    for (char* line = text; rc == 0 && *line;) {
        char* nl = strchr(line, '\n');
        size_t ll = nl ? (size_t)(nl - line) + 1 : strlen(line);
        const char* sp = strstr(line, "\"step\":");
        long s = sp && (!nl || sp < nl) ? strtol(sp + 7, NULL, 10) : 0;
        const char* rk = redo_key ? strstr(line, redo_key) : NULL;
        int redo = s == last && rk && (!nl || rk < nl); // written again by the resumed run
        // a last line without its newline was cut by a crash mid-write: drop it
        if (s <= last && nl && !redo) rc = atomic_write(&af, line, ll);
        line += ll;
    }
    if (rc == 0) rc = atomic_commit(&af);
    if (rc != 0) {
        snprintf(err, errcap, "%s", af.err);
        if (af.f) atomic_abort(&af);
    }
    free(text);
    return rc;
}
