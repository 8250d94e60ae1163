// common/json_read.c: strict JSON reader (see common/json_read.h): recursive descent over the
// text, building a tree of Jv values.
#include "common/json_read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

typedef struct {
    const char* p;
    const char* end;
    char err[200];
} JParse;

void jv_free(Jv* v) {
    if (v->t == JV_STR) free(v->s);
    if (v->t == JV_ARR || v->t == JV_OBJ) {
        for (int i = 0; i < v->n; i++) {
            jv_free(&v->items[i]);
            if (v->keys) free(v->keys[i]);
        }
        free(v->items);
        free(v->keys);
    }
    memset(v, 0, sizeof(*v));
}

static void jskip(JParse* j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int jfail(JParse* j, const char* what) {
    if (!j->err[0]) snprintf(j->err, sizeof(j->err), "%s", what);
    return -1;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int parse_hex4(JParse* j, unsigned* out) {
    if (j->end - j->p < 4) return jfail(j, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(j->p[i]);
        if (h < 0) return jfail(j, "bad \\u escape");
        v = v * 16 + (unsigned)h;
    }
    j->p += 4;
    *out = v;
    return 0;
}

static int parse_string(JParse* j, char** out) {
    if (j->p >= j->end || *j->p != '"') return jfail(j, "expected a string");
    j->p++;
    size_t cap = 32, n = 0;
    char* s = mallocCheck(cap);
    for (;;) {
        if (j->p >= j->end) {
            free(s);
            return jfail(j, "unterminated string");
        }
        if (n + 5 >= cap) {
            cap *= 2;
            s = reallocCheck(s, cap);
        }
        unsigned char c = (unsigned char)*j->p++;
        if (c == '"') break;
        if (c < 0x20) {
            free(s);
            return jfail(j, "control character in a string");
        }
        if (c != '\\') {
            s[n++] = (char)c;
            continue;
        }
        if (j->p >= j->end) {
            free(s);
            return jfail(j, "unterminated escape");
        }
        char e = *j->p++;
        unsigned cp;
        switch (e) {
        case '"':
            s[n++] = '"';
            break;
        case '\\':
            s[n++] = '\\';
            break;
        case '/':
            s[n++] = '/';
            break;
        case 'b':
            s[n++] = '\b';
            break;
        case 'f':
            s[n++] = '\f';
            break;
        case 'n':
            s[n++] = '\n';
            break;
        case 'r':
            s[n++] = '\r';
            break;
        case 't':
            s[n++] = '\t';
            break;
        case 'u':
            if (parse_hex4(j, &cp)) {
                free(s);
                return -1;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (j->end - j->p < 2 || j->p[0] != '\\' || j->p[1] != 'u') {
                    free(s);
                    return jfail(j, "unpaired surrogate in a string");
                }
                j->p += 2;
                if (parse_hex4(j, &lo)) {
                    free(s);
                    return -1;
                }
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    free(s);
                    return jfail(j, "unpaired surrogate in a string");
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                free(s);
                return jfail(j, "unpaired surrogate in a string");
            }
            if (cp == 0) {
                free(s);
                return jfail(j, "NUL character in a string");
            }
            if (cp < 0x80) {
                s[n++] = (char)cp;
            } else if (cp < 0x800) {
                s[n++] = (char)(0xC0 | (cp >> 6));
                s[n++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                s[n++] = (char)(0xE0 | (cp >> 12));
                s[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                s[n++] = (char)(0x80 | (cp & 0x3F));
            } else {
                s[n++] = (char)(0xF0 | (cp >> 18));
                s[n++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                s[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                s[n++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        default:
            free(s);
            return jfail(j, "bad escape in a string");
        }
    }
    s[n] = '\0';
    *out = s;
    return 0;
}

static int parse_number(JParse* j, Jv* v) {
    const char* s = j->p;
    const char* p = s;
    if (p < j->end && *p == '-') p++;
    if (p >= j->end || *p < '0' || *p > '9') return jfail(j, "bad number");
    if (*p == '0')
        p++;
    else
        while (p < j->end && *p >= '0' && *p <= '9')
            p++;
    int integral = 1;
    if (p < j->end && *p == '.') {
        integral = 0;
        p++;
        if (p >= j->end || *p < '0' || *p > '9') return jfail(j, "bad number");
        while (p < j->end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < j->end && (*p == 'e' || *p == 'E')) {
        integral = 0;
        p++;
        if (p < j->end && (*p == '+' || *p == '-')) p++;
        if (p >= j->end || *p < '0' || *p > '9') return jfail(j, "bad number");
        while (p < j->end && *p >= '0' && *p <= '9')
            p++;
    }
    char buf[64];
    size_t len = (size_t)(p - s);
    if (len >= sizeof(buf)) return jfail(j, "number too long");
    memcpy(buf, s, len);
    buf[len] = '\0';
    v->t = JV_NUM;
    v->num = strtod(buf, NULL);
    if (integral && s[0] != '-') {
        uint64_t u = 0;
        int ok = 1;
        for (size_t i = 0; i < len; i++) {
            unsigned d = (unsigned)(buf[i] - '0');
            if (u > (UINT64_MAX - d) / 10) {
                ok = 0;
                break;
            }
            u = u * 10 + d;
        }
        v->is_uint = ok;
        v->u = u;
    }
    j->p = p;
    return 0;
}

static int parse_value(JParse* j, Jv* v, int depth);

static void jv_push(Jv* v, Jv* item, char* key) {
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 8;
        v->items = reallocCheck(v->items, sizeof(Jv) * (size_t)v->cap);
        if (v->t == JV_OBJ) v->keys = reallocCheck(v->keys, sizeof(char*) * (size_t)v->cap);
    }
    v->items[v->n] = *item;
    if (v->t == JV_OBJ) v->keys[v->n] = key;
    v->n++;
}

static int parse_container(JParse* j, Jv* v, int depth, int obj) {
    v->t = obj ? JV_OBJ : JV_ARR;
    j->p++;
    jskip(j);
    if (j->p < j->end && *j->p == (obj ? '}' : ']')) {
        j->p++;
        return 0;
    }
    for (;;) {
        char* key = NULL;
        jskip(j);
        if (obj) {
            if (parse_string(j, &key)) return -1;
            jskip(j);
            if (j->p >= j->end || *j->p != ':') {
                free(key);
                return jfail(j, "expected ':' after an object key");
            }
            j->p++;
        }
        Jv item;
        memset(&item, 0, sizeof(item));
        if (parse_value(j, &item, depth + 1)) {
            free(key);
            jv_free(&item);
            return -1;
        }
        jv_push(v, &item, key);
        jskip(j);
        if (j->p >= j->end) return jfail(j, obj ? "unterminated object" : "unterminated array");
        if (*j->p == ',') {
            j->p++;
            continue;
        }
        if (*j->p == (obj ? '}' : ']')) {
            j->p++;
            return 0;
        }
        return jfail(j,
                     obj ? "expected ',' or '}' in an object" : "expected ',' or ']' in an array");
    }
}

static int parse_value(JParse* j, Jv* v, int depth) {
    if (depth > JSON_READ_MAX_DEPTH) return jfail(j, "nesting too deep");
    jskip(j);
    if (j->p >= j->end) return jfail(j, "unexpected end of JSON");
    char c = *j->p;
    if (c == '{' || c == '[') return parse_container(j, v, depth, c == '{');
    if (c == '"') {
        v->t = JV_STR;
        return parse_string(j, &v->s);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(j, v);
    static const struct {
        const char* w;
        JvType t;
        int b;
    } lits[] = {{"true", JV_BOOL, 1}, {"false", JV_BOOL, 0}, {"null", JV_NULL, 0}};
    for (int i = 0; i < 3; i++) {
        size_t l = strlen(lits[i].w);
        if ((size_t)(j->end - j->p) >= l && memcmp(j->p, lits[i].w, l) == 0) {
            v->t = lits[i].t;
            v->b = lits[i].b;
            j->p += l;
            return 0;
        }
    }
    return jfail(j, "unexpected character");
}

int json_parse(Jv* v, const char* text, size_t n, char* err, size_t errcap) {
    JParse j = {.p = text, .end = text + n};
    memset(v, 0, sizeof(*v));
    if (parse_value(&j, v, 0) == 0) {
        jskip(&j);
        if (j.p == j.end) return 0;
        jfail(&j, "trailing characters after the JSON value");
    }
    snprintf(err, errcap, "%s at byte %ld", j.err, (long)(j.p - text));
    jv_free(v);
    return -1;
}

const Jv* jv_get(const Jv* o, const char* key) {
    if (o->t != JV_OBJ) return NULL;
    for (int i = 0; i < o->n; i++)
        if (strcmp(o->keys[i], key) == 0) return &o->items[i];
    return NULL;
}
