// common/safetensors.c: safetensors reader (strict header validation, F32/F16/BF16/F64 to
// float) and F32 writer (see common/safetensors.h).
#include "common/safetensors.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/json.h"
#include "common/json_read.h"

// ---------------------------------------------------------------------------------------------
// reader

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
// writer

int st_write_begin(StWriter* w, const char* path, const char* const* meta, int nmeta,
                   const StSpec* t, int n, char* err, size_t errcap) {
    memset(w, 0, sizeof(*w));
    JsonBuf j;
    json_init(&j);
    json_begin(&j);
    json_object_begin(&j, "__metadata__");
    json_str(&j, "format", "pt");
    for (int i = 0; i < nmeta; i++)
        json_str(&j, meta[2 * i], meta[2 * i + 1]);
    json_object_end(&j);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        uint64_t numel = 1;
        for (int q = 0; q < t[i].ndim; q++)
            numel *= t[i].shape[q];
        json_object_begin(&j, t[i].name);
        json_str(&j, "dtype", "F32");
        json_array_begin(&j, "shape");
        for (int q = 0; q < t[i].ndim; q++)
            json_int(&j, NULL, (long long)t[i].shape[q]);
        json_array_end(&j);
        json_array_begin(&j, "data_offsets");
        json_int(&j, NULL, (long long)off);
        json_int(&j, NULL, (long long)(off + 4 * numel));
        json_array_end(&j);
        json_object_end(&j);
        off += 4 * numel;
    }
    json_end(&j);
    w->expect = off;
    size_t hl = (j.len + 7) / 8 * 8; // pad the header to a multiple of 8 bytes with spaces
    char* hdr = mallocCheck(hl);
    memcpy(hdr, j.buf, j.len);
    memset(hdr + j.len, ' ', hl - j.len);
    json_free(&j);
    if (atomic_open(&w->af, path)) {
        snprintf(err, errcap, "%s", w->af.err);
        free(hdr);
        return -1;
    }
    unsigned char lb[8];
    for (int i = 0; i < 8; i++)
        lb[i] = (unsigned char)(((uint64_t)hl >> (8 * i)) & 0xff);
    atomic_write(&w->af, lb, 8);
    atomic_write(&w->af, hdr, hl);
    free(hdr);
    return 0;
}

void st_write_f32(StWriter* w, const float* x, size_t numel) {
    atomic_write(&w->af, x, numel * sizeof(float));
    w->written += (uint64_t)numel * sizeof(float);
}

int st_write_end(StWriter* w, char* err, size_t errcap) {
    if (w->written != w->expect) {
        atomic_abort(&w->af);
        snprintf(err, errcap, "%s: %llu data bytes written, the header declares %llu", w->af.path,
                 (unsigned long long)w->written, (unsigned long long)w->expect);
        return -1;
    }
    if (atomic_commit(&w->af)) {
        snprintf(err, errcap, "%s", w->af.err);
        return -1;
    }
    return 0;
}
