// common/npy.c: implementation of npy.h (NumPy .npy v1.0 writer and reader, fp16 conversion).
#include "common/npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.c writes host floats as little-endian data"
#endif

#define NPY_ALIGN 64
#define NPY_CHUNK 16384 // elements converted to fp16 at a time

// ----------------------------------------------------------------------------
// fp16

uint16_t npy_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t man = x & 0x7fffffu;
    if (exp == 0xff) { // Inf, or NaN (kept quiet, payload top bits kept)
        if (man) return (uint16_t)(sign | 0x7e00u | (man >> 13));
        return (uint16_t)(sign | 0x7c00u);
    }
    int e = (int)exp - 127 + 15; // half exponent field
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        // subnormal half: value = M * 2^(e-14) in units of 2^-24, M = 1.man with 24 bits
        if (e < -10) return (uint16_t)sign; // below 2^-25: rounds to zero
        uint32_t m = man | 0x800000u;
        int shift = 14 - e; // 14..24
        uint32_t h = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (h & 1u))) h++; // may carry into the exponent
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; // a carry may reach Inf: correct
    return (uint16_t)(sign | h);
}

float npy_f16_to_f32(uint16_t h) {
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t exp = ((uint32_t)h >> 10) & 0x1fu;
    uint32_t man = (uint32_t)h & 0x3ffu;
    uint32_t x;
    if (exp == 0x1f) {
        x = sign | 0x7f800000u | (man << 13);
    } else if (exp == 0) {
        if (man == 0) {
            x = sign;
        } else { // subnormal: normalise
            int e = -1;
            do {
                man <<= 1;
                e++;
            } while (!(man & 0x400u));
            x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else {
        x = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &x, sizeof(f));
    return f;
}

// ----------------------------------------------------------------------------
// writer

size_t npy_header(char* out, size_t cap, const int* shape, int ndim, int fp16) {
    if (ndim < 0 || ndim > NPY_MAX_DIMS) return 0;
    char dict[512];
    size_t n =
        (size_t)snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': False, 'shape': (",
                         fp16 ? "<f2" : "<f4");
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return 0;
        n += (size_t)snprintf(dict + n, sizeof(dict) - n, i ? ", %d" : "%d", shape[i]);
    }
    n += (size_t)snprintf(dict + n, sizeof(dict) - n, "%s), }", ndim == 1 ? "," : "");
    if (ndim > 0) {
        // numpy (>= 1.24) leaves room for the first axis to grow to 21 digits in place
        char digits[16];
        int nd = snprintf(digits, sizeof(digits), "%d", shape[0]);
        n += (size_t)snprintf(dict + n, sizeof(dict) - n, "%*s", 21 - nd, "");
    }
    // numpy's rule: hlen = dict + '\n'; pad = 64 - (10 + hlen) % 64 spaces (so 1..64)
    size_t hlen = n + 1;
    size_t pad = NPY_ALIGN - (10 + hlen) % NPY_ALIGN;
    size_t total = 10 + hlen + pad;
    if (total > cap || hlen + pad > 65535) return 0;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (char)((hlen + pad) & 0xff);
    out[9] = (char)((hlen + pad) >> 8);
    memcpy(out + 10, dict, n);
    memset(out + 10 + n, ' ', pad);
    out[total - 1] = '\n';
    return total;
}

static void set_err(char* err, size_t errcap, const char* msg) {
    if (err && errcap) snprintf(err, errcap, "%s", msg);
}

int npy_open(NpyWriter* w, const char* path, const int* shape, int ndim, int fp16, char* err,
             size_t errcap) {
    memset(w, 0, sizeof(*w));
    w->err = err;
    w->errcap = errcap;
    w->fp16 = fp16 ? 1 : 0;
    char hdr[1024];
    size_t hn = npy_header(hdr, sizeof(hdr), shape, ndim, w->fp16);
    if (hn == 0) {
        if (err && errcap) snprintf(err, errcap, "%s: invalid array shape (ndim %d)", path, ndim);
        w->af.failed = 1;
        return -1;
    }
    w->total = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] > 0 && w->total > ((size_t)1 << 60) / (size_t)shape[i]) {
            if (err && errcap) snprintf(err, errcap, "%s: array shape too large", path);
            w->af.failed = 1;
            return -1;
        }
        w->total *= (size_t)shape[i];
    }
    if (atomic_open(&w->af, path) != 0 || atomic_write(&w->af, hdr, hn) != 0) {
        set_err(err, errcap, w->af.err);
        npy_abort(w);
        return -1;
    }
    return 0;
}

int npy_write_chunk(NpyWriter* w, const float* data, size_t n) {
    if (w->af.failed) return -1;
    if (n > w->total - w->written) {
        if (w->err && w->errcap)
            snprintf(w->err, w->errcap, "%s: more elements written than the shape holds (%zu)",
                     w->af.path, w->total);
        npy_abort(w);
        return -1;
    }
    int rc = 0;
    if (!w->fp16) {
        rc = atomic_write(&w->af, data, n * sizeof(float));
    } else {
        uint16_t buf[NPY_CHUNK];
        for (size_t i = 0; i < n && rc == 0; i += NPY_CHUNK) {
            size_t m = n - i < NPY_CHUNK ? n - i : NPY_CHUNK;
            for (size_t k = 0; k < m; k++)
                buf[k] = npy_f32_to_f16(data[i + k]);
            rc = atomic_write(&w->af, buf, m * sizeof(uint16_t));
        }
    }
    if (rc != 0) {
        set_err(w->err, w->errcap, w->af.err);
        npy_abort(w);
        return -1;
    }
    w->written += n;
    return 0;
}

int npy_commit(NpyWriter* w) {
    if (w->af.failed) {
        npy_abort(w);
        return -1;
    }
    if (w->written != w->total) {
        if (w->err && w->errcap)
            snprintf(w->err, w->errcap, "%s: %zu of %zu elements written", w->af.path, w->written,
                     w->total);
        npy_abort(w);
        return -1;
    }
    if (atomic_commit(&w->af) != 0) {
        set_err(w->err, w->errcap, w->af.err);
        return -1;
    }
    return 0;
}

void npy_abort(NpyWriter* w) {
    if (w->af.f) atomic_abort(&w->af);
    w->af.failed = 1;
}

int npy_write(const char* path, const float* data, const int* shape, int ndim, int fp16, char* err,
              size_t errcap) {
    NpyWriter w;
    if (npy_open(&w, path, shape, ndim, fp16, err, errcap) != 0) return -1;
    if (npy_write_chunk(&w, data, w.total) != 0) return -1;
    return npy_commit(&w);
}

// ----------------------------------------------------------------------------
// reader

// Find `'key':` in the header dict and return a pointer just past the colon and spaces.
static const char* dict_value(const char* d, const char* key) {
    char pat[32];
    snprintf(pat, sizeof(pat), "'%s':", key);
    const char* p = strstr(d, pat);
    if (!p) return NULL;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    return p;
}

static int header_fail(char* err, size_t errcap, const char* path, const char* what) {
    if (err && errcap) snprintf(err, errcap, "%s: not a supported .npy file: %s", path, what);
    return -1;
}

static int read_header_f(FILE* f, const char* path, NpyInfo* info, char* err, size_t errcap) {
    unsigned char pre[12];
    memset(info, 0, sizeof(*info));
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0)
        return header_fail(err, errcap, path, "bad magic (expected \\x93NUMPY)");
    int major = pre[6];
    size_t hlen, prefix;
    if (major == 1) {
        hlen = (size_t)pre[8] | ((size_t)pre[9] << 8);
        prefix = 10;
    } else if (major == 2 || major == 3) {
        if (fread(pre + 10, 1, 2, f) != 2) return header_fail(err, errcap, path, "truncated");
        hlen = (size_t)pre[8] | ((size_t)pre[9] << 8) | ((size_t)pre[10] << 16) |
               ((size_t)pre[11] << 24);
        prefix = 12;
    } else {
        return header_fail(err, errcap, path, "unknown format version");
    }
    if (hlen == 0 || hlen > (1u << 20)) return header_fail(err, errcap, path, "bad header length");
    char* d = mallocCheck(hlen + 1);
    if (fread(d, 1, hlen, f) != hlen) {
        free(d);
        return header_fail(err, errcap, path, "truncated header");
    }
    d[hlen] = '\0';
    const char* why = NULL;
    const char* v = dict_value(d, "descr");
    if (!v)
        why = "no 'descr'";
    else if (strncmp(v, "'<f4'", 5) == 0)
        info->fp16 = 0;
    else if (strncmp(v, "'<f2'", 5) == 0)
        info->fp16 = 1;
    else
        why = "dtype is not '<f4' or '<f2'";
    if (!why) {
        v = dict_value(d, "fortran_order");
        if (!v || strncmp(v, "False", 5) != 0) why = "not C order (fortran_order must be False)";
    }
    if (!why) {
        v = dict_value(d, "shape");
        if (!v || *v != '(') why = "no 'shape' tuple";
    }
    size_t count = 1;
    if (!why) {
        const char* p = v + 1;
        for (;;) {
            while (*p == ' ')
                p++;
            if (*p == ')') break;
            if (info->ndim == NPY_MAX_DIMS) {
                why = "too many dimensions";
                break;
            }
            char* end;
            errno = 0;
            long long x = strtoll(p, &end, 10);
            if (end == p || x < 0 || errno) {
                why = "bad shape";
                break;
            }
            info->shape[info->ndim++] = x;
            if (x > 0 && count > ((size_t)1 << 62) / (size_t)x) {
                why = "shape too large";
                break;
            }
            count *= (size_t)x;
            p = end;
            while (*p == ' ')
                p++;
            if (*p == ',')
                p++;
            else if (*p != ')') {
                why = "bad shape";
                break;
            }
        }
    }
    free(d);
    if (why) return header_fail(err, errcap, path, why);
    info->count = count;
    info->data_offset = prefix + hlen;
    return 0;
}

int npy_read_header(const char* path, NpyInfo* info, char* err, size_t errcap) {
    FILE* f = fopen(path, "rb");
    if (!f) {
        if (err && errcap) snprintf(err, errcap, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    int rc = read_header_f(f, path, info, err, errcap);
    fclose(f);
    return rc;
}

float* npy_read_f32(const char* path, NpyInfo* info, char* err, size_t errcap) {
    FILE* f = fopen(path, "rb");
    if (!f) {
        if (err && errcap) snprintf(err, errcap, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    float* out = NULL;
    if (read_header_f(f, path, info, err, errcap) != 0) goto done;
    size_t isz = info->fp16 ? 2 : 4;
    // the data must be exactly count * itemsize bytes
    if (fseek(f, 0, SEEK_END) != 0) goto io_fail;
    long size = ftell(f);
    if (size < 0) goto io_fail;
    if ((size_t)size != info->data_offset + info->count * isz) {
        if (err && errcap)
            snprintf(err, errcap, "%s: file is %ld bytes, header says %zu + %zu x %zu", path, size,
                     info->data_offset, info->count, isz);
        goto done;
    }
    if (fseek(f, (long)info->data_offset, SEEK_SET) != 0) goto io_fail;
    out = mallocCheck((info->count ? info->count : 1) * sizeof(float));
    if (!info->fp16) {
        if (fread(out, 4, info->count, f) != info->count) goto io_fail;
    } else {
        uint16_t buf[NPY_CHUNK];
        for (size_t i = 0; i < info->count; i += NPY_CHUNK) {
            size_t m = info->count - i < NPY_CHUNK ? info->count - i : NPY_CHUNK;
            if (fread(buf, 2, m, f) != m) goto io_fail;
            for (size_t k = 0; k < m; k++)
                out[i + k] = npy_f16_to_f32(buf[k]);
        }
    }
    fclose(f);
    return out;
io_fail:
    if (err && errcap) snprintf(err, errcap, "%s: read error", path);
    free(out);
    out = NULL;
done:
    fclose(f);
    return out;
}
