// model/explorer.c: writes the attention explorer page (explorer.h): the HTML template
// (model/explorer.html, turned into the byte array explorer_template[] by the Makefile), the
// metadata of each run as JSON (sidecar, per-head statistics under their metrics.jsonl keys,
// metrics records) and each run's
// quantised maps as base64 of a zlib stream.
//
// Quantisation of a causal row a[0..n): lo = min(0, min a), hi = max(0, max a),
// step = (hi - lo) / 255, q_j = round((a_j - lo) / step) in [0, 255]. Dequantised a'_j =
// lo + q_j * step, |a'_j - a_j| <= step / 2 (plus float rounding). Since lo <= 0 <= hi, an
// exact zero stays zero when the row has no negative weight (lo = 0).
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/json.h"
#include "common/util.h"
#include "model/explorer.h"
#include "model/metrics.h"
#include "model/metrics_table.h"

#include "explorer_template.h" // generated: explorer_template[], explorer_template_len

#define MARKER "<!--ATTNLAB_DATA-->"

void explorer_quantize_row(const float* a, int n, uint8_t* q, float* lo, float* step) {
    float mn = 0.0f, mx = 0.0f;
    for (int j = 0; j < n; j++) {
        if (a[j] < mn) mn = a[j];
        if (a[j] > mx) mx = a[j];
    }
    const float s = (mx - mn) / 255.0f;
    *lo = mn;
    *step = s;
    for (int j = 0; j < n; j++) {
        float v = s > 0.0f ? (a[j] - mn) / s : 0.0f;
        long r = lrintf(v);
        q[j] = (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
    }
}

size_t explorer_raw_bytes(int nl, int nh, int T) {
    const size_t heads = (size_t)nl * nh, t = (size_t)T;
    return heads * (12 * t + t * (t + 1) / 2);
}

static size_t b64_len(size_t n) {
    return 4 * ((n + 2) / 3);
}

// The quantised data of one run (layout in explorer.h) into a malloc'd buffer of raw bytes.
static uint8_t* pack_run(const ExplorerRun* r, size_t* n) {
    const size_t H = (size_t)r->nl * r->nh, T = (size_t)r->T;
    *n = explorer_raw_bytes(r->nl, r->nh, r->T);
    uint8_t* buf = mallocCheck(*n);
    float *lo = mallocCheck(sizeof(float) * H * T), *st = mallocCheck(sizeof(float) * H * T);
    float* sum = mallocCheck(sizeof(float) * H * T);
    uint8_t* q = buf + 12 * H * T;
    for (size_t h = 0; h < H; h++) {
        for (size_t t = 0; t < T; t++) {
            const float* a = r->maps + (h * T + t) * T;
            explorer_quantize_row(a, (int)t + 1, q, &lo[h * T + t], &st[h * T + t]);
            double s = 0.0;
            for (size_t j = 0; j <= t; j++)
                s += a[j];
            sum[h * T + t] = (float)s;
            q += t + 1;
        }
    }
    memcpy(buf, lo, sizeof(float) * H * T); // little-endian float32, as the page reads them
    memcpy(buf + 4 * H * T, st, sizeof(float) * H * T);
    memcpy(buf + 8 * H * T, sum, sizeof(float) * H * T);
    free(lo);
    free(st);
    free(sum);
    return buf;
}

// Per-head statistics of this text (explorer.h) as a JSON array of objects: every statistic of
// the metrics table (model/metrics_table.h) that one attention map gives, under its metrics.jsonl
// key, then the row sums of the raw map.
static void head_stats(JsonBuf* j, const ExplorerRun* r) {
    const int T = r->T, Ts = T < METRICS_SINK_T ? T : METRICS_SINK_T;
    json_array_begin(j, "stats");
    for (size_t h = 0; h < (size_t)r->nl * r->nh; h++) {
        const float* A = r->maps + h * (size_t)T * T;
        AttnAccum acc = {0};
        MetricsAlpha0 a0 = metrics_attn_accum(&acc, A, T, Ts);
        double smin = INFINITY, smax = -INFINITY, smean = 0.0;
        int neg = 0;
        for (int t = 0; t < T; t++) {
            double s = 0.0;
            for (int k = 0; k <= t; k++) {
                s += A[(size_t)t * T + k];
                neg |= A[(size_t)t * T + k] < 0.0f;
            }
            smin = s < smin ? s : smin;
            smax = s > smax ? s : smax;
            smean += s / T;
        }
        json_object_begin(j, NULL);
        for (int i = 0; i < METRIC_NROWS; i++) {
            const MetricDef* d = &METRIC_ROWS[i];
            if (d->flags & MF_MAP) json_num(j, d->name, metrics_map_value(d, &acc, a0));
        }
        json_num(j, "rowsum_min", smin);
        json_num(j, "rowsum_mean", smean);
        json_num(j, "rowsum_max", smax);
        json_bool(j, "negative", neg);
        json_object_end(j);
    }
    json_array_end(j);
}

// The "head" and "model" records of a metrics.jsonl text, each line as a JSON string.
static int metrics_lines(JsonBuf* j, const ExplorerRun* r, char* err, size_t errcap) {
    json_array_begin(j, "metrics");
    const char* p = r->metrics;
    for (long line = 1; p && *p; line++) {
        const char* e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        while (n && (p[n - 1] == '\r' || p[n - 1] == ' '))
            n--;
        int want = memmem(p, n, "\"kind\":\"head\"", 13) || memmem(p, n, "\"kind\":\"model\"", 14);
        if (want && (n < 2 || p[0] != '{' || p[n - 1] != '}')) {
            snprintf(err, errcap, "%s:%ld: not a JSON object", r->metrics_path, line);
            return -1;
        }
        if (want) json_strn(j, NULL, p, n);
        p = e ? e + 1 : NULL;
    }
    json_array_end(j);
    return 0;
}

// The metadata JSON of all runs (everything but the maps).
static int build_meta(JsonBuf* j, const ExplorerRun* runs, int nruns, const char* title, char* err,
                      size_t errcap) {
    json_begin(j);
    json_int(j, "version", 1);
    json_str(j, "title", title);
    json_str(j, "quantisation", "uint8 per row: a = lo + q * step, |error| <= step / 2");
    json_array_begin(j, "runs");
    for (int i = 0; i < nruns; i++) {
        const ExplorerRun* r = &runs[i];
        const char* s = r->sidecar;
        while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')
            s++;
        if (*s != '{') {
            snprintf(err, errcap, "run %d (%s): the sidecar is not a JSON object", i + 1, r->label);
            return -1;
        }
        json_object_begin(j, NULL);
        json_str(j, "label", r->label);
        json_str(j, "sidecar", r->sidecar);
        json_int(j, "nl", r->nl);
        json_int(j, "nh", r->nh);
        json_int(j, "T", r->T);
        json_int(j, "raw_bytes", (long long)explorer_raw_bytes(r->nl, r->nh, r->T));
        json_str(j, "metrics_path", r->metrics ? r->metrics_path : NULL);
        head_stats(j, r);
        if (metrics_lines(j, r, err, errcap)) return -1;
        json_object_end(j);
    }
    json_array_end(j);
    json_end(j);
    return 0;
}

static const char* template_split(size_t* head_len) {
    const char* t = (const char*)explorer_template;
    const char* m = memmem(t, explorer_template_len, MARKER, strlen(MARKER));
    ASSERT(m != NULL); // the Makefile embeds model/explorer.html, which has the marker
    *head_len = (size_t)(m - t);
    return m + strlen(MARKER);
}

size_t explorer_page_bound(const ExplorerRun* runs, int nruns) {
    JsonBuf j;
    json_init(&j);
    char err[256];
    size_t meta = build_meta(&j, runs, nruns, "", err, sizeof(err)) ? 0 : j.len;
    json_free(&j);
    size_t n = explorer_template_len + 6 * meta + 256; // '<' may become \u003c
    for (int i = 0; i < nruns; i++)
        n += b64_len(compressBound(explorer_raw_bytes(runs[i].nl, runs[i].nh, runs[i].T))) + 128;
    return n;
}

// Write text with every '<' as \u003c (only inside JSON strings, so the JSON is unchanged and
// no "</script>" can end the data block).
static int write_json_safe(AtomicFile* af, const char* s, size_t n) {
    size_t a = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '<') continue;
        if (atomic_write(af, s + a, i - a) || atomic_write(af, "\\u003c", 6)) return -1;
        a = i + 1;
    }
    return atomic_write(af, s + a, n - a);
}

static int write_b64(AtomicFile* af, const uint8_t* d, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char out[4096];
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16;
        if (i + 1 < n) v |= (uint32_t)d[i + 1] << 8;
        if (i + 2 < n) v |= d[i + 2];
        out[o++] = tab[(v >> 18) & 63];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? tab[v & 63] : '=';
        if (o + 4 > sizeof(out)) {
            if (atomic_write(af, out, o)) return -1;
            o = 0;
        }
    }
    return atomic_write(af, out, o);
}

int explorer_write(const char* path, const ExplorerRun* runs, int nruns, const char* title,
                   size_t max_bytes, size_t* written, char* err, size_t errcap) {
    ASSERT(nruns >= 1 && nruns <= 2);
    for (int i = 1; i < nruns; i++)
        if (runs[i].T != runs[0].T) {
            snprintf(err, errcap, "the runs have different lengths (T = %d and %d)", runs[0].T,
                     runs[i].T);
            return -1;
        }
    const size_t bound = explorer_page_bound(runs, nruns);
    if (max_bytes && bound > max_bytes) {
        snprintf(err, errcap,
                 "the page could reach %.1f MiB, above the limit of %.1f MiB: choose fewer "
                 "--layers/--heads, a shorter text, or raise --max-mib",
                 bound / 1048576.0, max_bytes / 1048576.0);
        return -1;
    }
    JsonBuf j;
    json_init(&j);
    if (build_meta(&j, runs, nruns, title, err, errcap)) {
        json_free(&j);
        return -1;
    }
    AtomicFile af;
    if (atomic_open(&af, path)) {
        snprintf(err, errcap, "%s", af.err);
        json_free(&j);
        return -1;
    }
    size_t head_len;
    const char* tail = template_split(&head_len);
    const char* tpl = (const char*)explorer_template;
    int rc = atomic_write(&af, tpl, head_len);
    const char* open_meta = "<script id=\"attnlab-meta\" type=\"application/json\">";
    rc = rc || atomic_write(&af, open_meta, strlen(open_meta)) ||
         write_json_safe(&af, j.buf, j.len) || atomic_write(&af, "</script>\n", 10);
    json_free(&j);
    for (int i = 0; i < nruns && !rc; i++) {
        size_t raw_n;
        uint8_t* raw = pack_run(&runs[i], &raw_n);
        uLongf zn = compressBound(raw_n);
        uint8_t* z = mallocCheck(zn);
        if (compress2(z, &zn, raw, raw_n, 6) != Z_OK) die(1, "zlib compress2 failed");
        free(raw);
        char open[96];
        snprintf(open, sizeof(open), "<script id=\"attnlab-data-%d\" type=\"text/plain\">", i);
        rc = atomic_write(&af, open, strlen(open)) || write_b64(&af, z, zn) ||
             atomic_write(&af, "</script>\n", 10);
        free(z);
    }
    rc = rc || atomic_write(&af, tail, explorer_template_len - (size_t)(tail - tpl));
    if (rc) {
        snprintf(err, errcap, "%s", af.err);
        atomic_abort(&af);
        return -1;
    }
    long size = ftell(af.f);
    if (atomic_commit(&af)) {
        snprintf(err, errcap, "%s", af.err);
        return -1;
    }
    if (written) *written = size < 0 ? 0 : (size_t)size;
    return 0;
}
