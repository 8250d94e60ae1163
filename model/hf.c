// model/hf.c: Hugging Face safetensors / config.json export and import (see hf.h). Includes a
// small strict JSON reader for safetensors headers and config.json.
#include "model/hf.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"

// ---------------------------------------------------------------------------------------------
// JSON reader: a tree of values, strict RFC 8259 syntax, nesting depth <= 32

typedef enum { JV_NULL, JV_BOOL, JV_NUM, JV_STR, JV_ARR, JV_OBJ } JvType;

typedef struct Jv {
    JvType t;
    int b;
    double num;
    int is_uint; // a non-negative integer that fits uint64 exactly
    uint64_t u;
    char* s;          // JV_STR (NUL-terminated; strings holding NUL are rejected)
    struct Jv* items; // JV_ARR / JV_OBJ values
    char** keys;      // JV_OBJ keys
    int n, cap;
} Jv;

typedef struct {
    const char* p;
    const char* end;
    char err[200];
} JParse;

static void jv_free(Jv* v) {
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
    if (depth > 32) return jfail(j, "nesting too deep");
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

// Parse a whole document; trailing spaces are allowed (safetensors pads its header with them).
static int json_parse(Jv* v, const char* text, size_t n, char* err, size_t errcap) {
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

static const Jv* jv_get(const Jv* o, const char* key) {
    if (o->t != JV_OBJ) return NULL;
    for (int i = 0; i < o->n; i++)
        if (strcmp(o->keys[i], key) == 0) return &o->items[i];
    return NULL;
}

// ---------------------------------------------------------------------------------------------
// safetensors reader

static const struct {
    const char* name;
    int dtype, size;
} DTYPES[] = {
    {"F32", ST_F32, 4},    {"F16", ST_F16, 2},        {"BF16", ST_BF16, 2},
    {"F64", ST_F64, 8},    {"BOOL", ST_OTHER1, 1},    {"U8", ST_OTHER1, 1},
    {"I8", ST_OTHER1, 1},  {"F8_E4M3", ST_OTHER1, 1}, {"F8_E5M2", ST_OTHER1, 1},
    {"I16", ST_OTHER2, 2}, {"U16", ST_OTHER2, 2},     {"I32", ST_OTHER4, 4},
    {"U32", ST_OTHER4, 4}, {"I64", ST_OTHER8, 8},     {"U64", ST_OTHER8, 8},
};

static int dtype_size(int dt) {
    for (size_t i = 0; i < sizeof(DTYPES) / sizeof(DTYPES[0]); i++)
        if (DTYPES[i].dtype == dt) return DTYPES[i].size;
    return 1;
}

static int st_cmp_begin(const void* a, const void* b) {
    const StTensor* x = *(StTensor* const*)a;
    const StTensor* y = *(StTensor* const*)b;
    return x->begin < y->begin   ? -1
           : x->begin > y->begin ? 1
                                 : (x->end > y->end) - (x->end < y->end);
}

static int st_meta(SafeTensors* st, const Jv* md, char* err, size_t errcap) {
    if (md->t != JV_OBJ) {
        snprintf(err, errcap, "%s: __metadata__ is not an object", st->path);
        return -1;
    }
    for (int i = 0; i < md->n; i++) {
        if (md->items[i].t != JV_STR) {
            snprintf(err, errcap, "%s: __metadata__ value of '%s' is not a string", st->path,
                     md->keys[i]);
            return -1;
        }
        const char* k = md->keys[i];
        const char* val = md->items[i].s;
        if (strcmp(k, "attnlab_attention") == 0)
            util_strlcpy(st->attention, val, sizeof(st->attention));
        if (strcmp(k, "attnlab_pos_encoding") == 0)
            util_strlcpy(st->pos_encoding, val, sizeof(st->pos_encoding));
        if (strcmp(k, "attnlab_qk_norm") == 0) st->qk_norm = strcmp(val, "1") == 0;
    }
    return 0;
}

static int st_tensor(SafeTensors* st, StTensor* t, const char* name, const Jv* d, char* err,
                     size_t errcap) {
    const char* p = st->path;
    if (util_strlcpy(t->name, name, sizeof(t->name))) {
        snprintf(err, errcap, "%s: tensor name '%.60s...' is too long", p, name);
        return -1;
    }
    if (d->t != JV_OBJ) {
        snprintf(err, errcap, "%s: tensor %s: entry is not an object", p, name);
        return -1;
    }
    const Jv* dt = jv_get(d, "dtype");
    const Jv* sh = jv_get(d, "shape");
    const Jv* of = jv_get(d, "data_offsets");
    if (!dt || dt->t != JV_STR || !sh || sh->t != JV_ARR || !of || of->t != JV_ARR) {
        snprintf(err, errcap,
                 "%s: tensor %s: needs \"dtype\" (string), \"shape\" and "
                 "\"data_offsets\" (arrays)",
                 p, name);
        return -1;
    }
    t->dtype = -1;
    for (size_t i = 0; i < sizeof(DTYPES) / sizeof(DTYPES[0]); i++)
        if (strcmp(dt->s, DTYPES[i].name) == 0) {
            t->dtype = DTYPES[i].dtype;
            util_strlcpy(t->dtype_name, DTYPES[i].name, sizeof(t->dtype_name));
        }
    if (t->dtype < 0) {
        snprintf(err, errcap, "%s: tensor %s: unknown dtype '%.20s'", p, name, dt->s);
        return -1;
    }
    if (sh->n > ST_MAX_DIMS) {
        snprintf(err, errcap, "%s: tensor %s: %d dimensions (at most %d)", p, name, sh->n,
                 ST_MAX_DIMS);
        return -1;
    }
    t->ndim = sh->n;
    t->numel = 1;
    for (int i = 0; i < sh->n; i++) {
        const Jv* e = &sh->items[i];
        if (e->t != JV_NUM || !e->is_uint || e->u > ((uint64_t)1 << 40)) {
            snprintf(err, errcap, "%s: tensor %s: shape entry %d is not a valid size", p, name, i);
            return -1;
        }
        t->shape[i] = e->u;
        if (e->u && t->numel > (((uint64_t)1 << 40) / e->u)) {
            snprintf(err, errcap, "%s: tensor %s: shape too large", p, name);
            return -1;
        }
        t->numel *= e->u;
    }
    if (of->n != 2 || of->items[0].t != JV_NUM || !of->items[0].is_uint ||
        of->items[1].t != JV_NUM || !of->items[1].is_uint) {
        snprintf(err, errcap, "%s: tensor %s: data_offsets must be two non-negative integers", p,
                 name);
        return -1;
    }
    t->begin = of->items[0].u;
    t->end = of->items[1].u;
    if (t->begin > t->end || t->end > st->data_size) {
        snprintf(err, errcap,
                 "%s: tensor %s: data_offsets [%llu, %llu] outside the data section "
                 "(%llu bytes)",
                 p, name, (unsigned long long)t->begin, (unsigned long long)t->end,
                 (unsigned long long)st->data_size);
        return -1;
    }
    if (t->end - t->begin != t->numel * (uint64_t)dtype_size(t->dtype)) {
        snprintf(err, errcap, "%s: tensor %s: %llu bytes for a %s tensor of %llu elements", p, name,
                 (unsigned long long)(t->end - t->begin), dt->s, (unsigned long long)t->numel);
        return -1;
    }
    return 0;
}

int st_open(SafeTensors* st, const char* path, char* err, size_t errcap) {
    memset(st, 0, sizeof(*st));
    util_strlcpy(st->path, path, sizeof(st->path));
    FILE* f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errcap, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    st->f = f;
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        snprintf(err, errcap, "%s: cannot stat: %s", path, strerror(errno));
        goto fail;
    }
    uint64_t fsize = (uint64_t)sb.st_size;
    unsigned char lb[8];
    if (fsize < 8 || fread(lb, 1, 8, f) != 8) {
        snprintf(err, errcap,
                 "%s: truncated: a safetensors file starts with an 8-byte header "
                 "length",
                 path);
        goto fail;
    }
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = (hl << 8) | lb[i];
    if (hl < 2 || hl > ST_MAX_HEADER) {
        snprintf(err, errcap, "%s: header length %llu is not plausible (not a safetensors file?)",
                 path, (unsigned long long)hl);
        goto fail;
    }
    if (hl > fsize - 8) {
        snprintf(err, errcap,
                 "%s: header length %llu goes beyond the end of the file (%llu "
                 "bytes): truncated",
                 path, (unsigned long long)hl, (unsigned long long)fsize);
        goto fail;
    }
    char* text = mallocCheck((size_t)hl);
    if (fread(text, 1, (size_t)hl, f) != (size_t)hl) {
        free(text);
        snprintf(err, errcap, "%s: read error in the header", path);
        goto fail;
    }
    st->data_start = 8 + hl;
    st->data_size = fsize - 8 - hl;
    if (text[0] != '{') {
        free(text);
        snprintf(err, errcap, "%s: the header does not start with '{' (not a safetensors file?)",
                 path);
        goto fail;
    }
    Jv root;
    char jerr[300];
    if (json_parse(&root, text, (size_t)hl, jerr, sizeof(jerr))) {
        free(text);
        snprintf(err, errcap, "%s: header is not valid JSON: %s", path, jerr);
        goto fail;
    }
    free(text);
    if (root.t != JV_OBJ) {
        jv_free(&root);
        snprintf(err, errcap, "%s: header is not a JSON object", path);
        goto fail;
    }
    st->t = callocCheck((size_t)root.n + 1, sizeof(StTensor));
    int bad = 0;
    for (int i = 0; i < root.n && !bad; i++) {
        const char* k = root.keys[i];
        if (strcmp(k, "__metadata__") == 0) {
            bad = st_meta(st, &root.items[i], err, errcap) != 0;
            continue;
        }
        for (int q = 0; q < st->n && !bad; q++)
            if (strcmp(st->t[q].name, k) == 0) {
                snprintf(err, errcap, "%s: tensor %s appears twice in the header", path, k);
                bad = 1;
            }
        if (!bad) bad = st_tensor(st, &st->t[st->n], k, &root.items[i], err, errcap) != 0;
        if (!bad) st->n++;
    }
    jv_free(&root);
    if (bad) goto fail;
    // the data section is exactly the tensors, back to back (no overlap, no holes)
    StTensor** order = mallocCheck(sizeof(StTensor*) * ((size_t)st->n + 1));
    for (int i = 0; i < st->n; i++)
        order[i] = &st->t[i];
    qsort(order, (size_t)st->n, sizeof(StTensor*), st_cmp_begin);
    uint64_t pos = 0;
    for (int i = 0; i < st->n && !bad; i++) {
        if (order[i]->begin != pos) {
            if (order[i]->begin < pos)
                snprintf(err, errcap,
                         "%s: tensor %s: data_offsets [%llu, %llu] overlap the "
                         "previous tensor %s",
                         path, order[i]->name, (unsigned long long)order[i]->begin,
                         (unsigned long long)order[i]->end, i ? order[i - 1]->name : "");
            else
                snprintf(err, errcap,
                         "%s: tensor %s: data_offsets start at %llu, leaving a gap "
                         "after byte %llu",
                         path, order[i]->name, (unsigned long long)order[i]->begin,
                         (unsigned long long)pos);
            bad = 1;
        }
        pos = order[i]->end;
    }
    free(order);
    if (!bad && pos != st->data_size) {
        snprintf(err, errcap,
                 "%s: the tensors cover %llu bytes of a %llu-byte data section "
                 "(truncated or trailing garbage)",
                 path, (unsigned long long)pos, (unsigned long long)st->data_size);
        bad = 1;
    }
    if (bad) goto fail;
    return 0;
fail:
    st_close(st);
    return -1;
}

void st_close(SafeTensors* st) {
    if (st->f) fclose(st->f);
    free(st->t);
    st->f = NULL;
    st->t = NULL;
    st->n = 0;
}

int st_find(const SafeTensors* st, const char* name) {
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->t[i].name, name) == 0) return i;
    return -1;
}

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    int e = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    float v;
    if (e == 0)
        v = ldexpf((float)mant, -24);
    else if (e == 31)
        v = mant ? NAN : INFINITY;
    else
        v = ldexpf((float)(mant | 0x400), e - 25);
    uint32_t bits;
    memcpy(&bits, &v, 4);
    bits |= sign;
    memcpy(&v, &bits, 4);
    return v;
}

int st_read_f32(const SafeTensors* st, int i, float* out, char* err, size_t errcap) {
    const StTensor* t = &st->t[i];
    size_t bytes = (size_t)(t->end - t->begin);
    if (fseeko(st->f, (off_t)(st->data_start + t->begin), SEEK_SET) != 0) {
        snprintf(err, errcap, "%s: tensor %s: seek failed", st->path, t->name);
        return -1;
    }
    if (t->dtype == ST_F32) {
        if (fread(out, 1, bytes, st->f) != bytes) {
            snprintf(err, errcap, "%s: tensor %s: truncated", st->path, t->name);
            return -1;
        }
        return 0;
    }
    if (t->dtype != ST_F16 && t->dtype != ST_BF16 && t->dtype != ST_F64) {
        snprintf(err, errcap,
                 "%s: tensor %s: dtype %s cannot be read as parameters (F32, F16, "
                 "BF16, F64)",
                 st->path, t->name, t->dtype_name);
        return -1;
    }
    if (t->dtype == ST_F64) {
        double* d = mallocCheck(bytes + 8);
        if (fread(d, 1, bytes, st->f) != bytes) {
            free(d);
            snprintf(err, errcap, "%s: tensor %s: truncated", st->path, t->name);
            return -1;
        }
        for (size_t k = 0; k < t->numel; k++)
            out[k] = (float)d[k];
        free(d);
        return 0;
    }
    uint16_t* tmp = mallocCheck(bytes + 2);
    if (fread(tmp, 1, bytes, st->f) != bytes) {
        free(tmp);
        snprintf(err, errcap, "%s: tensor %s: truncated", st->path, t->name);
        return -1;
    }
    for (size_t k = 0; k < t->numel; k++) {
        if (t->dtype == ST_F16) {
            out[k] = half_to_float(tmp[k]);
        } else {
            uint32_t b = (uint32_t)tmp[k] << 16;
            memcpy(&out[k], &b, 4);
        }
    }
    free(tmp);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// GPT-2 name mapping

// Per-layer Hugging Face tensors: name suffix, attnlab spec, and whether the weight is a Conv1D
// stored (in, out) (transposed against attnlab's (out, in)).
static const struct {
    const char* hf;
    int spec;
    int transposed;
} LAYER_MAP[] = {
    {"ln_1.weight", P_LN1W, 0},
    {"ln_1.bias", P_LN1B, 0},
    {"attn.c_attn.weight", P_QKVW, 1},
    {"attn.c_attn.bias", P_QKVB, 0},
    {"attn.c_proj.weight", P_ATTPROJW, 1},
    {"attn.c_proj.bias", P_ATTPROJB, 0},
    {"ln_2.weight", P_LN2W, 0},
    {"ln_2.bias", P_LN2B, 0},
    {"mlp.c_fc.weight", P_FCW, 1},
    {"mlp.c_fc.bias", P_FCB, 0},
    {"mlp.c_proj.weight", P_FCPROJW, 1},
    {"mlp.c_proj.bias", P_FCPROJB, 0},
};
#define N_LAYER_MAP ((int)(sizeof(LAYER_MAP) / sizeof(LAYER_MAP[0])))

static const char* pos_name(int pe) {
    static const char* names[] = {"learned", "rope", "alibi", "none"};
    return pe >= 0 && pe < 4 ? names[pe] : "learned";
}

int hf_is_plain_gpt2(const GPT2* m) {
    if (m->cfg.pos_encoding != ATTN_POS_LEARNED || m->cfg.qk_norm) return 0;
    for (int l = 0; l < m->cfg.n_layer; l++)
        if (strcmp(m->la[l].v->name, "softmax") != 0 || strcmp(m->la[l].row->name, "softmax") != 0)
            return 0;
    return m->nspecs == GPT2_NUM_LLMC;
}

// HF shape of attnlab spec `s` for one layer: (in, out) for Conv1D weights.
static int layer_shape(const GPT2* m, int spec, int transposed, uint64_t* shape) {
    const ParamSpec* s = &m->specs[spec];
    if (s->ndim == 3) {
        shape[0] = transposed ? s->shape[2] : s->shape[1];
        shape[1] = transposed ? s->shape[1] : s->shape[2];
        return 2;
    }
    shape[0] = s->shape[1];
    return 1;
}

// ---------------------------------------------------------------------------------------------
// import

static int shape_eq(const StTensor* t, const uint64_t* shape, int nd) {
    if (t->ndim != nd) return 0;
    for (int i = 0; i < nd; i++)
        if (t->shape[i] != shape[i]) return 0;
    return 1;
}

static void shape_str(char* buf, size_t cap, const uint64_t* shape, int nd) {
    size_t l = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < nd && l < cap; i++)
        l += (size_t)snprintf(buf + l, cap - l, "%s%llu", i ? ", " : "",
                              (unsigned long long)shape[i]);
    if (l < cap) snprintf(buf + l, cap - l, "]");
}

static int check_shape(const SafeTensors* st, int i, const uint64_t* want, int nd, char* err,
                       size_t errcap) {
    int dt = st->t[i].dtype;
    if (dt != ST_F32 && dt != ST_F16 && dt != ST_BF16 && dt != ST_F64) {
        snprintf(err, errcap,
                 "%s: tensor %s has dtype %s; parameters must be F32, F16, BF16 or "
                 "F64",
                 st->path, st->t[i].name, st->t[i].dtype_name);
        return -1;
    }
    if (shape_eq(&st->t[i], want, nd)) return 0;
    char a[128], b[128];
    shape_str(a, sizeof(a), st->t[i].shape, st->t[i].ndim);
    shape_str(b, sizeof(b), want, nd);
    snprintf(err, errcap, "%s: tensor %s has shape %s, the model expects %s", st->path,
             st->t[i].name, a, b);
    return -1;
}

int hf_load_safetensors(GPT2* m, const char* path, char* err, size_t errcap) {
    SafeTensors st;
    if (st_open(&st, path, err, errcap)) return -1;
    const GPT2Config* c = &m->cfg;
    const int L = c->n_layer;
    const size_t C = (size_t)c->n_embd, V = (size_t)c->vocab_size;
    // which file tensor fills which (spec, layer); -1 = not found yet
    int nslots = GPT2_NUM_LLMC * L + m->nspecs;
    int* slot = mallocCheck(sizeof(int) * (size_t)nslots);
    for (int i = 0; i < nslots; i++)
        slot[i] = -1;
    int rc = -1;
    float* buf = NULL;
    char ignored[512] = "";
    for (int i = 0; i < st.n; i++) {
        const char* nm = st.t[i].name;
        if (strncmp(nm, "transformer.", 12) == 0) nm += 12;
        int idx = -1;
        if (strcmp(nm, "wte.weight") == 0)
            idx = P_WTE * L;
        else if (strcmp(nm, "wpe.weight") == 0)
            idx = P_WPE * L;
        else if (strcmp(nm, "ln_f.weight") == 0)
            idx = P_LNFW * L;
        else if (strcmp(nm, "ln_f.bias") == 0)
            idx = P_LNFB * L;
        else if (strncmp(nm, "h.", 2) == 0) {
            char* rest;
            errno = 0;
            long l = strtol(nm + 2, &rest, 10);
            if (rest != nm + 2 && *rest == '.' && l >= 0 && l < 100000) {
                for (int k = 0; k < N_LAYER_MAP; k++)
                    if (strcmp(rest + 1, LAYER_MAP[k].hf) == 0) {
                        if (l >= L) {
                            snprintf(err, errcap,
                                     "%s: tensor %s belongs to layer %ld, the model "
                                     "has n_layer=%d",
                                     path, st.t[i].name, l, L);
                            goto done;
                        }
                        idx = LAYER_MAP[k].spec * L + (int)l;
                    }
            }
        } else if (strncmp(st.t[i].name, "attnlab.", 8) == 0) {
            int s = gpt2_find_spec(m, st.t[i].name + 8);
            if (s >= GPT2_NUM_LLMC) idx = GPT2_NUM_LLMC * L + s;
        }
        if (idx < 0) { // lm_head (tied), attention bias buffers and anything foreign
            size_t l = strlen(ignored);
            if (l + 80 < sizeof(ignored))
                snprintf(ignored + l, sizeof(ignored) - l, "%s%s", l ? ", " : "", st.t[i].name);
            continue;
        }
        if (slot[idx] >= 0) {
            snprintf(err, errcap, "%s: tensor %s and %s hold the same parameter", path,
                     st.t[slot[idx]].name, st.t[i].name);
            goto done;
        }
        slot[idx] = i;
    }
    // check presence and shapes of everything first, then read
    for (int s = 0; s < GPT2_NUM_LLMC; s++) {
        int per_layer = m->specs[s].stacked;
        for (int l = 0; l < (per_layer ? L : 1); l++) {
            int i = slot[s * L + l];
            if (i < 0) {
                char want[96];
                if (!per_layer)
                    snprintf(want, sizeof(want), "%s",
                             s == P_WTE    ? "wte.weight"
                             : s == P_WPE  ? "wpe.weight"
                             : s == P_LNFW ? "ln_f.weight"
                                           : "ln_f.bias");
                else
                    for (int k = 0; k < N_LAYER_MAP; k++)
                        if (LAYER_MAP[k].spec == s)
                            snprintf(want, sizeof(want), "h.%d.%s", l, LAYER_MAP[k].hf);
                snprintf(err, errcap, "%s: tensor %s (or transformer.%s) is missing", path, want,
                         want);
                goto done;
            }
            uint64_t shape[2];
            int nd;
            if (s == P_WTE) {
                shape[0] = V;
                shape[1] = C;
                nd = 2;
            } else if (!per_layer) {
                nd = m->specs[s].ndim;
                for (int q = 0; q < nd; q++)
                    shape[q] = m->specs[s].shape[q];
            } else {
                int tr = 0;
                for (int k = 0; k < N_LAYER_MAP; k++)
                    if (LAYER_MAP[k].spec == s) tr = LAYER_MAP[k].transposed;
                nd = layer_shape(m, s, tr, shape);
            }
            if (check_shape(&st, i, shape, nd, err, errcap)) goto done;
        }
    }
    for (int s = GPT2_NUM_LLMC; s < m->nspecs; s++) {
        int i = slot[GPT2_NUM_LLMC * L + s];
        if (i < 0) continue;
        uint64_t shape[4];
        for (int q = 0; q < m->specs[s].ndim; q++)
            shape[q] = m->specs[s].shape[q];
        if (check_shape(&st, i, shape, m->specs[s].ndim, err, errcap)) goto done;
    }
    size_t maxn = 0;
    for (int i = 0; i < st.n; i++)
        if (st.t[i].numel > maxn) maxn = (size_t)st.t[i].numel;
    buf = mallocCheck(sizeof(float) * (maxn + 1));
    for (int s = 0; s < GPT2_NUM_LLMC; s++) {
        int per_layer = m->specs[s].stacked;
        for (int l = 0; l < (per_layer ? L : 1); l++) {
            int i = slot[s * L + l];
            if (st_read_f32(&st, i, buf, err, errcap)) goto done;
            float* dst = gpt2_tensor(m, m->params, s, l);
            if (s == P_WTE) { // real rows, then zero padding
                memcpy(dst, buf, sizeof(float) * V * C);
                memset(dst + V * C, 0, sizeof(float) * ((size_t)c->padded_vocab - V) * C);
            } else if (per_layer && m->specs[s].ndim == 3) { // (in, out) -> (out, in)
                size_t OC = m->specs[s].shape[1], IC = m->specs[s].shape[2];
                for (size_t o = 0; o < OC; o++)
                    for (size_t k = 0; k < IC; k++)
                        dst[o * IC + k] = buf[k * OC + o];
            } else {
                size_t n = per_layer ? m->specs[s].size / m->specs[s].shape[0] : m->specs[s].size;
                memcpy(dst, buf, sizeof(float) * n);
            }
        }
    }
    for (int s = GPT2_NUM_LLMC; s < m->nspecs; s++) {
        int i = slot[GPT2_NUM_LLMC * L + s];
        if (i >= 0 && st_read_f32(&st, i, m->params + m->specs[s].offset, err, errcap)) goto done;
    }
    if (ignored[0]) fprintf(stderr, "attnlab: %s: ignored tensors: %s\n", path, ignored);
    rc = 0;
done:
    free(buf);
    free(slot);
    st_close(&st);
    return rc;
}

int hf_load(GPT2* m, const char* dir, char* err, size_t errcap) {
    char path[1100];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    return hf_load_safetensors(m, path, err, errcap);
}

static int cfg_int(const Jv* root, const char* key, const char* path, int required, int* out,
                   char* err, size_t errcap) {
    const Jv* v = jv_get(root, key);
    if (!v || v->t == JV_NULL) {
        if (!required) return 1;
        snprintf(err, errcap, "%s: key '%s' is missing", path, key);
        return -1;
    }
    if (v->t != JV_NUM || !v->is_uint || v->u == 0 || v->u > (1u << 24)) {
        snprintf(err, errcap, "%s: key '%s' must be a positive integer", path, key);
        return -1;
    }
    *out = (int)v->u;
    return 0;
}

int hf_read_config(const char* dir, GPT2Config* cfg, char* attention, size_t attcap, char* err,
                   size_t errcap) {
    char path[1100];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    size_t len;
    char* text = util_read_file(path, &len, err, errcap);
    if (!text) return -1;
    Jv root;
    char jerr[300];
    if (json_parse(&root, text, len, jerr, sizeof(jerr))) {
        free(text);
        snprintf(err, errcap, "%s: not valid JSON: %s", path, jerr);
        return -1;
    }
    free(text);
    int rc = -1;
    memset(cfg, 0, sizeof(*cfg));
    if (root.t != JV_OBJ) {
        snprintf(err, errcap, "%s: not a JSON object", path);
        goto done;
    }
    const Jv* mt = jv_get(&root, "model_type");
    if (mt && (mt->t != JV_STR || strcmp(mt->s, "gpt2") != 0)) {
        snprintf(err, errcap, "%s: model_type is not \"gpt2\"", path);
        goto done;
    }
    const Jv* af = jv_get(&root, "activation_function");
    if (af && (af->t != JV_STR ||
               (strcmp(af->s, "gelu_new") != 0 && strcmp(af->s, "gelu_pytorch_tanh") != 0))) {
        snprintf(err, errcap,
                 "%s: activation_function must be \"gelu_new\" (the tanh GELU "
                 "attnlab computes)",
                 path);
        goto done;
    }
    const Jv* eps = jv_get(&root, "layer_norm_epsilon");
    if (eps && (eps->t != JV_NUM || fabs(eps->num - 1e-5) > 1e-12)) {
        snprintf(err, errcap, "%s: layer_norm_epsilon must be 1e-05 (attnlab's LayerNorm)", path);
        goto done;
    }
    if (cfg_int(&root, "n_layer", path, 1, &cfg->n_layer, err, errcap) ||
        cfg_int(&root, "n_head", path, 1, &cfg->n_head, err, errcap) ||
        cfg_int(&root, "n_embd", path, 1, &cfg->n_embd, err, errcap) ||
        cfg_int(&root, "n_positions", path, 1, &cfg->block_size, err, errcap) ||
        cfg_int(&root, "vocab_size", path, 1, &cfg->vocab_size, err, errcap))
        goto done;
    int inner = 0;
    int r = cfg_int(&root, "n_inner", path, 0, &inner, err, errcap);
    if (r < 0) goto done;
    if (r == 0 && inner != 4 * cfg->n_embd) {
        snprintf(err, errcap, "%s: n_inner=%d, attnlab's MLP is 4*n_embd=%d", path, inner,
                 4 * cfg->n_embd);
        goto done;
    }
    if (cfg->n_layer > GPT2_MAX_LAYERS || cfg->n_embd % cfg->n_head != 0) {
        snprintf(err, errcap, "%s: unsupported sizes (n_layer=%d n_embd=%d n_head=%d)", path,
                 cfg->n_layer, cfg->n_embd, cfg->n_head);
        goto done;
    }
    cfg->padded_vocab = (cfg->vocab_size + 127) / 128 * 128;
    cfg->pos_encoding = ATTN_POS_LEARNED;
    const Jv* pe = jv_get(&root, "attnlab_pos_encoding");
    if (pe && pe->t == JV_STR) {
        for (int i = 0; i < 4; i++)
            if (strcmp(pe->s, pos_name(i)) == 0) cfg->pos_encoding = i;
    }
    const Jv* qk = jv_get(&root, "attnlab_qk_norm");
    if (qk && ((qk->t == JV_BOOL && qk->b) || (qk->t == JV_NUM && qk->num != 0))) cfg->qk_norm = 1;
    const Jv* at = jv_get(&root, "attnlab_attention");
    if (attention) {
        if (at && at->t == JV_STR)
            util_strlcpy(attention, at->s, attcap);
        else
            util_strlcpy(attention, "softmax", attcap);
    }
    rc = 0;
done:
    jv_free(&root);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// export

typedef struct {
    char name[96];
    int spec, layer, transposed;
    int ndim;
    uint64_t shape[4];
    uint64_t bytes;
} ExpTensor;

static int copy_file(const char* src, const char* dst, char* err, size_t errcap) {
    size_t len;
    char* text = util_read_file(src, &len, err, errcap);
    if (!text) return -1;
    AtomicFile af;
    int rc = 0;
    if (atomic_open(&af, dst) || atomic_write(&af, text, len) || atomic_commit(&af)) {
        snprintf(err, errcap, "%s", af.err);
        rc = -1;
    }
    free(text);
    return rc;
}

static void json_escape_into(char* out, size_t cap, const char* s) {
    size_t n = 0;
    for (; *s && n + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[n++] = '\\';
            out[n++] = (char)c;
        } else if (c < 0x20) {
            n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
        } else {
            out[n++] = (char)c;
        }
    }
    out[n] = '\0';
}

int hf_export(const GPT2* m, const char* dir, const char* tokenizer_dir, char* err, size_t errcap) {
    const GPT2Config* c = &m->cfg;
    const int L = c->n_layer;
    const size_t C = (size_t)c->n_embd, V = (size_t)c->vocab_size;
    int plain = hf_is_plain_gpt2(m);
    if (util_mkdirs(dir, err, errcap)) return -1;
    char att_esc[600];
    json_escape_into(att_esc, sizeof(att_esc), m->attention);
    if (!plain)
        fprintf(stderr,
                "attnlab: warning: this model (attention '%s', positions %s, qk_norm %d) "
                "is not Hugging Face GPT-2: transformers will load the weights but compute "
                "softmax attention with learned positions. The variant is recorded as "
                "attnlab_attention in config.json and the safetensors metadata; its own tensors "
                "are saved as attnlab.*\n",
                m->attention, pos_name(c->pos_encoding), c->qk_norm);
    // tensor list
    int cap = 4 + 12 * L + m->nspecs;
    ExpTensor* et = callocCheck((size_t)cap, sizeof(ExpTensor));
    int n = 0;
    et[n++] = (ExpTensor){"transformer.wte.weight", P_WTE, 0, 0, 2, {V, C, 0, 0}, 0};
    et[n++] = (ExpTensor){"transformer.wpe.weight",           P_WPE, 0, 0, 2,
                          {(uint64_t)c->block_size, C, 0, 0}, 0};
    for (int l = 0; l < L; l++)
        for (int k = 0; k < N_LAYER_MAP; k++) {
            ExpTensor* t = &et[n++];
            snprintf(t->name, sizeof(t->name), "transformer.h.%d.%s", l, LAYER_MAP[k].hf);
            t->spec = LAYER_MAP[k].spec;
            t->layer = l;
            t->transposed = LAYER_MAP[k].transposed;
            t->ndim = layer_shape(m, t->spec, t->transposed, t->shape);
        }
    et[n++] = (ExpTensor){"transformer.ln_f.weight", P_LNFW, 0, 0, 1, {C, 0, 0, 0}, 0};
    et[n++] = (ExpTensor){"transformer.ln_f.bias", P_LNFB, 0, 0, 1, {C, 0, 0, 0}, 0};
    for (int s = GPT2_NUM_LLMC; s < m->nspecs; s++) {
        ExpTensor* t = &et[n++];
        snprintf(t->name, sizeof(t->name), "attnlab.%s", m->specs[s].name);
        t->spec = s;
        t->layer = -1;
        t->ndim = m->specs[s].ndim;
        for (int q = 0; q < t->ndim; q++)
            t->shape[q] = m->specs[s].shape[q];
    }
    // header
    char* hdr = NULL;
    size_t hcap = 4096 + (size_t)n * 200, hl = 0;
    hdr = mallocCheck(hcap);
    hl += (size_t)snprintf(hdr + hl, hcap - hl, "{\"__metadata__\":{\"format\":\"pt\"");
    if (!plain)
        hl += (size_t)snprintf(hdr + hl, hcap - hl,
                               ",\"attnlab_attention\":\"%s\","
                               "\"attnlab_pos_encoding\":\"%s\",\"attnlab_qk_norm\":\"%d\"",
                               att_esc, pos_name(c->pos_encoding), c->qk_norm);
    hl += (size_t)snprintf(hdr + hl, hcap - hl, "}");
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        ExpTensor* t = &et[i];
        uint64_t numel = 1;
        for (int q = 0; q < t->ndim; q++)
            numel *= t->shape[q];
        t->bytes = 4 * numel;
        hl += (size_t)snprintf(hdr + hl, hcap - hl, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[",
                               t->name);
        for (int q = 0; q < t->ndim; q++)
            hl += (size_t)snprintf(hdr + hl, hcap - hl, "%s%llu", q ? "," : "",
                                   (unsigned long long)t->shape[q]);
        hl += (size_t)snprintf(hdr + hl, hcap - hl, "],\"data_offsets\":[%llu,%llu]}",
                               (unsigned long long)off, (unsigned long long)(off + t->bytes));
        off += t->bytes;
    }
    hl += (size_t)snprintf(hdr + hl, hcap - hl, "}");
    ASSERT(hl + 8 < hcap);
    while (hl % 8)
        hdr[hl++] = ' ';
    char path[1100];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    AtomicFile af;
    int rc = -1;
    float* buf = NULL;
    if (atomic_open(&af, path)) {
        snprintf(err, errcap, "%s", af.err);
        goto done;
    }
    unsigned char lb[8];
    for (int i = 0; i < 8; i++)
        lb[i] = (unsigned char)(((uint64_t)hl >> (8 * i)) & 0xff);
    atomic_write(&af, lb, 8);
    atomic_write(&af, hdr, hl);
    buf = mallocCheck(sizeof(float) * (4 * C * C + 16));
    for (int i = 0; i < n; i++) {
        ExpTensor* t = &et[i];
        const ParamSpec* s = &m->specs[t->spec];
        if (t->spec == P_WTE) {
            atomic_write(&af, m->params + s->offset, t->bytes); // the V real rows
        } else if (t->layer < 0 || !s->stacked) {
            atomic_write(&af, m->params + s->offset, t->bytes);
        } else {
            const float* src = gpt2_tensor(m, m->params, t->spec, t->layer);
            if (t->transposed) { // (out, in) -> (in, out)
                size_t OC = s->shape[1], IC = s->shape[2];
                for (size_t o = 0; o < OC; o++)
                    for (size_t k = 0; k < IC; k++)
                        buf[k * OC + o] = src[o * IC + k];
                src = buf;
            }
            atomic_write(&af, src, t->bytes);
        }
    }
    if (atomic_commit(&af)) {
        snprintf(err, errcap, "%s", af.err);
        goto done;
    }
    // config.json
    {
        int eot = c->vocab_size == 50257 ? 50256 : c->vocab_size - 1;
        char* cj = NULL;
        size_t cl = 0;
        FILE* f = open_memstream(&cj, &cl);
        if (!f) die(1, "cannot allocate config.json");
        fprintf(
            f,
            "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
            "  \"activation_function\": \"gelu_new\",\n  \"attn_pdrop\": 0.0,\n"
            "  \"embd_pdrop\": 0.0,\n  \"resid_pdrop\": 0.0,\n  \"summary_first_dropout\": 0.0,\n"
            "  \"bos_token_id\": %d,\n  \"eos_token_id\": %d,\n"
            "  \"initializer_range\": 0.02,\n  \"layer_norm_epsilon\": 1e-05,\n"
            "  \"n_ctx\": %d,\n  \"n_embd\": %d,\n  \"n_head\": %d,\n  \"n_inner\": null,\n"
            "  \"n_layer\": %d,\n  \"n_positions\": %d,\n  \"vocab_size\": %d,\n"
            "  \"scale_attn_weights\": true,\n  \"tie_word_embeddings\": true,\n"
            "  \"torch_dtype\": \"float32\",\n  \"use_cache\": true",
            eot, eot, c->block_size, c->n_embd, c->n_head, c->n_layer, c->block_size,
            c->vocab_size);
        if (!plain)
            fprintf(f,
                    ",\n  \"attnlab_attention\": \"%s\",\n  \"attnlab_pos_encoding\": \"%s\",\n"
                    "  \"attnlab_qk_norm\": %d",
                    att_esc, pos_name(c->pos_encoding), c->qk_norm);
        fprintf(f, "\n}\n");
        fclose(f);
        snprintf(path, sizeof(path), "%s/config.json", dir);
        int bad = atomic_open(&af, path) || atomic_write(&af, cj, cl) || atomic_commit(&af);
        free(cj);
        if (bad) {
            snprintf(err, errcap, "%s", af.err);
            goto done;
        }
    }
    if (tokenizer_dir) {
        char src[1100];
        snprintf(src, sizeof(src), "%s/encoder.json", tokenizer_dir);
        snprintf(path, sizeof(path), "%s/vocab.json", dir);
        if (copy_file(src, path, err, errcap)) goto done;
        snprintf(src, sizeof(src), "%s/vocab.bpe", tokenizer_dir);
        snprintf(path, sizeof(path), "%s/merges.txt", dir);
        if (copy_file(src, path, err, errcap)) goto done;
    }
    rc = 0;
done:
    free(buf);
    free(hdr);
    free(et);
    return rc;
}
