// data/mc.c: multiple-choice evaluation sets: the llm.c evaluation file and HellaSwag JSONL
// readers, the window check, the three scoring rules, the tally and the trainer's record; and the
// bits per byte of evaluated text (formats and rules in data/mc.h).
//
// References (read, not copied): karpathy/llm.c dev/data/data_common.py (write_evalfile: the
// format), llmc/dataloader.h (EvalLoader: its C reader and the mean-loss rule),
// dev/data/hellaswag.py (render_example: encode(ctx), encode(" " + ending); evaluate: pred and
// pred_norm); EleutherAI/lm-evaluation-harness lm_eval/api/task.py (multiple_choice
// process_results: acc and acc_norm with completion_len = len(choice)) and
// lm_eval/models/huggingface.py (_loglikelihood_tokens: the left cut to the model's length).
#include "data/mc.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_read.h"
#include "common/util.h"

// HellaSwag's validation split is 3.6 MB (llm.c's file) or 11 MB (JSONL); an example's JSONL line
// is below 2 KB
#define MC_FILE_MAX ((size_t)1 << 30)
#define MC_LINE_MAX (1 << 20)

// ---------------------------------------------------------------------------------------------
// examples

// An example with room for ntok ids in total and n completions (counts, pointers zeroed).
static void example_alloc(McExample* e, int ntok, int n) {
    memset(e, 0, sizeof(*e));
    e->ncomp = n;
    e->buf = mallocCheck(sizeof(int) * ((size_t)ntok + 2 * (size_t)n));
    e->comp_len = e->buf + ntok;
    e->comp_bytes = e->comp_len + n;
    e->comp = callocCheck((size_t)n, sizeof(int*));
    e->ctx = e->buf;
}

static void example_free(McExample* e) {
    free(e->buf);
    free(e->comp);
    memset(e, 0, sizeof(*e));
}

void mc_free(McSet* s) {
    for (int i = 0; i < s->n; i++)
        example_free(&s->ex[i]);
    free(s->ex);
    memset(s, 0, sizeof(*s));
}

long long mc_text_bytes(const Tokenizer* tok, const int* ids, size_t n) {
    long long total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] == tokenizer_eot(tok)) continue;
        size_t len;
        if (!tokenizer_token_bytes(tok, ids[i], &len)) return -1;
        total += (long long)len;
    }
    return total;
}

double mc_bits_per_byte(double nats_per_token, double tokens, double bytes) {
    return bytes > 0 ? nats_per_token * tokens / (bytes * M_LN2) : NAN;
}

// Bytes of the ending a completion encodes: its text without the one leading space both formats
// put before the ending. 0 when unknown (no tokenizer, or an id it lacks); -1 when the completion
// is nothing but that space.
static int ending_bytes(const Tokenizer* tok, const int* ids, int n) {
    if (!tok) return 0;
    long long b = mc_text_bytes(tok, ids, (size_t)n);
    if (b < 0) return 0;
    size_t len;
    const unsigned char* first = tokenizer_token_bytes(tok, ids[0], &len);
    if (first && len > 0 && first[0] == ' ') b--;
    return b > 0 ? (int)(b < INT32_MAX ? b : INT32_MAX) : -1;
}

// ---------------------------------------------------------------------------------------------
// llm.c's evaluation file

static int32_t rd_i32(const unsigned char* p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

// The uint16 stream after the header.
typedef struct {
    const unsigned char* p;
    size_t nw; // words in the stream
} Words;

static unsigned wd(const Words* w, size_t i) {
    return (unsigned)w->p[2 * i] | (unsigned)w->p[2 * i + 1] << 8;
}

static int load_llmc(McSet* s, const char* text, size_t len, const Tokenizer* tok, int vocab,
                     char* err, size_t errcap) {
    const char* f = s->path;
    const unsigned char* u = (const unsigned char*)text;
    if (len < 4 * MC_HEADER_INTS) {
        snprintf(err, errcap,
                 "%s: truncated header: %zu bytes, an llm.c evaluation file starts with %d "
                 "(int32[256])",
                 f, len, 4 * MC_HEADER_INTS);
        return -1;
    }
    const int32_t magic = rd_i32(u), version = rd_i32(u + 4), n = rd_i32(u + 8),
                  longest = rd_i32(u + 12);
    if (magic != MC_MAGIC) {
        snprintf(err, errcap,
                 "%s: bad magic %d: not an llm.c multiple-choice evaluation file (magic %d, "
                 "dev/data/hellaswag.py writes one) nor HellaSwag JSONL (a line per example, "
                 "starting with '{')",
                 f, (int)magic, MC_MAGIC);
        return -1;
    }
    if (version != MC_VERSION) {
        snprintf(err, errcap, "%s: unsupported version %d of the llm.c evaluation file (read: %d)",
                 f, (int)version, MC_VERSION);
        return -1;
    }
    if (n <= 0 || longest <= 0 || longest > 65535) {
        snprintf(err, errcap,
                 "%s: bad header: %d examples, longest example %d bytes (expected > 0, and "
                 "the longest below 65536)",
                 f, (int)n, (int)longest);
        return -1;
    }
    if ((len - 4 * MC_HEADER_INTS) % 2) {
        snprintf(err, errcap, "%s: truncated: %zu bytes after the header, not whole uint16s", f,
                 len - 4 * MC_HEADER_INTS);
        return -1;
    }
    const Words w = {u + 4 * MC_HEADER_INTS, (len - 4 * MC_HEADER_INTS) / 2};
    if ((size_t)n > w.nw / 11) { // an example is at least 11 uint16s
        snprintf(err, errcap,
                 "%s: the header announces %d examples, more than the %zu bytes after it can "
                 "hold (a truncated file or a corrupt header)",
                 f, (int)n, 2 * w.nw);
        return -1;
    }
    s->ex = callocCheck((size_t)n, sizeof(McExample));
    s->have_bytes = tok != NULL;
    size_t pos = 0;
    int max_bytes = 0;
    for (int i = 0; i < n; i++) {
        if (pos >= w.nw) {
            snprintf(err, errcap,
                     "%s: example %d: truncated: the file ends after %d of the %d examples its "
                     "header announces",
                     f, i, i, (int)n);
            return -1;
        }
        if (wd(&w, pos) != MC_DELIMITER) {
            snprintf(err, errcap,
                     "%s: example %d: missing the example delimiter 65535 (found %u at byte %zu)",
                     f, i, wd(&w, pos), 4 * MC_HEADER_INTS + 2 * pos);
            return -1;
        }
        if (pos + 6 > w.nw) {
            snprintf(err, errcap, "%s: example %d: truncated in its header fields", f, i);
            return -1;
        }
        const unsigned nbytes = wd(&w, pos + 1), index = wd(&w, pos + 2), label = wd(&w, pos + 3),
                       ncomp = wd(&w, pos + 4);
        if (nbytes % 2 || nbytes < 12) {
            snprintf(err, errcap,
                     "%s: example %d: stated size %u bytes is not a valid example size", f, i,
                     nbytes);
            return -1;
        }
        const size_t nw = nbytes / 2; // words of this example, from its delimiter on
        if (pos + nw > w.nw) {
            snprintf(err, errcap,
                     "%s: example %d: truncated: its stated size is %u bytes, the file holds %zu",
                     f, i, nbytes, 2 * (w.nw - pos));
            return -1;
        }
        if (index != (unsigned)i) {
            snprintf(err, errcap,
                     "%s: example %d: its index field is %u (examples are numbered in order)", f, i,
                     index);
            return -1;
        }
        if (ncomp < 2 || ncomp > MC_MAX_COMPLETIONS) {
            snprintf(err, errcap, "%s: example %d: %u completions (expected 2 to %d)", f, i, ncomp,
                     MC_MAX_COMPLETIONS);
            return -1;
        }
        if (label >= ncomp) {
            snprintf(err, errcap, "%s: example %d: label %u, but it has %u completions (0..%u)", f,
                     i, label, ncomp, ncomp - 1);
            return -1;
        }
        McExample* e = &s->ex[i];
        example_alloc(e, (int)nw, (int)ncomp); // nw words hold every id of the example
        s->n = i + 1;                          // (freed by mc_free on an error)
        e->label = (int)label;
        size_t q = pos + 5; // the context's length
        int* out = e->buf;
        for (int part = -1; part < (int)ncomp; part++) { // -1: the context
            if (q >= pos + nw) {
                snprintf(err, errcap,
                         "%s: example %d: its contents run past its stated size of %u bytes", f, i,
                         nbytes);
                return -1;
            }
            const unsigned k = wd(&w, q++);
            char what[48];
            if (part < 0)
                snprintf(what, sizeof(what), "the context");
            else
                snprintf(what, sizeof(what), "completion %d", part);
            if (k == 0) {
                snprintf(err, errcap, "%s: example %d: %s is empty", f, i, what);
                return -1;
            }
            if (q + k > pos + nw) {
                snprintf(err, errcap,
                         "%s: example %d: %s (%u tokens) runs past the example's stated size of "
                         "%u bytes",
                         f, i, what, k, nbytes);
                return -1;
            }
            for (unsigned t = 0; t < k; t++) {
                const unsigned id = wd(&w, q + t);
                if ((int)id >= vocab) {
                    snprintf(err, errcap,
                             "%s: example %d: %s: token id %u is >= vocab_size %d (a file "
                             "tokenised for another vocabulary?)",
                             f, i, what, id, vocab);
                    return -1;
                }
                out[t] = (int)id;
            }
            if (part < 0) {
                e->ctx_len = (int)k;
            } else {
                e->comp[part] = out;
                e->comp_len[part] = (int)k;
                e->comp_bytes[part] = ending_bytes(tok, out, (int)k);
                if (e->comp_bytes[part] < 0) {
                    snprintf(err, errcap,
                             "%s: example %d: %s decodes to no text beyond its leading space", f, i,
                             what);
                    return -1;
                }
                if (e->comp_bytes[part] == 0) s->have_bytes = 0;
            }
            out += k;
            q += k;
        }
        if (q != pos + nw) {
            snprintf(err, errcap,
                     "%s: example %d: its stated size is %u bytes, its contents %zu bytes", f, i,
                     nbytes, 2 * (q - pos));
            return -1;
        }
        if ((int)nbytes > longest) {
            snprintf(err, errcap,
                     "%s: example %d: %u bytes, more than the header's longest example (%d bytes)",
                     f, i, nbytes, (int)longest);
            return -1;
        }
        if ((int)nbytes > max_bytes) max_bytes = (int)nbytes;
        pos += nw;
    }
    if (pos != w.nw) {
        snprintf(err, errcap,
                 "%s: %zu bytes after the last of the %d examples its header announces "
                 "(corrupt header or file)",
                 f, 2 * (w.nw - pos), (int)n);
        return -1;
    }
    if (max_bytes != longest) {
        snprintf(err, errcap,
                 "%s: the header's longest example is %d bytes, the longest example has %d "
                 "(corrupt header)",
                 f, (int)longest, max_bytes);
        return -1;
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// HellaSwag JSONL

// Encode `prefix` + text with tok into *ids (malloc'd); returns the count.
static int encode(Tokenizer* tok, const char* prefix, const char* text, int** ids) {
    const size_t a = strlen(prefix), b = strlen(text);
    char* s = mallocCheck(a + b + 1);
    memcpy(s, prefix, a);
    memcpy(s + a, text, b + 1);
    size_t n = tokenizer_encode(tok, s, a + b, 0, ids); // <= a + b + 1 <= MC_LINE_MAX + 1
    free(s);
    return (int)n;
}

// One JSONL line, example i, into e. 0, or -1 with err.
static int jsonl_example(McExample* e, const Jv* o, Tokenizer* tok, int vocab, const char* where,
                         char* err, size_t errcap) {
    const Jv* ctx = jv_get(o, "ctx");
    const Jv* ends = jv_get(o, "endings");
    const Jv* lab = jv_get(o, "label");
    if (o->t != JV_OBJ) {
        snprintf(err, errcap, "%s: not a JSON object", where);
        return -1;
    }
    if (!ctx || ctx->t != JV_STR) {
        snprintf(err, errcap, "%s: \"ctx\" is missing or not a string", where);
        return -1;
    }
    if (!ends || ends->t != JV_ARR || ends->n < 2 || ends->n > MC_MAX_COMPLETIONS) {
        snprintf(err, errcap, "%s: \"endings\" is missing or not an array of 2 to %d strings",
                 where, MC_MAX_COMPLETIONS);
        return -1;
    }
    const int n = ends->n;
    if (!lab || lab->t != JV_NUM || !lab->is_uint) {
        snprintf(err, errcap, "%s: \"label\" is missing or not a non-negative integer", where);
        return -1;
    }
    if (lab->u >= (uint64_t)n) {
        snprintf(err, errcap, "%s: label %llu, but it has %d endings (0..%d)", where,
                 (unsigned long long)lab->u, n, n - 1);
        return -1;
    }
    int* ids[MC_MAX_COMPLETIONS + 1] = {NULL};
    int len[MC_MAX_COMPLETIONS + 1], rc = -1;
    len[0] = encode(tok, "", ctx->s, &ids[0]);
    long total = len[0];
    for (int c = 0; c < n; c++) {
        if (ends->items[c].t != JV_STR || !ends->items[c].s[0]) {
            snprintf(err, errcap, "%s: ending %d is not a non-empty string", where, c);
            goto done;
        }
        len[c + 1] = encode(tok, " ", ends->items[c].s, &ids[c + 1]);
        total += len[c + 1];
    }
    if (len[0] == 0) {
        snprintf(err, errcap, "%s: \"ctx\" is empty", where);
        goto done;
    }
    for (int c = 0; c <= n; c++) {
        for (int t = 0; t < len[c]; t++) {
            if (ids[c][t] >= vocab) {
                char what[32];
                if (c == 0)
                    snprintf(what, sizeof(what), "the context");
                else
                    snprintf(what, sizeof(what), "ending %d", c - 1);
                snprintf(err, errcap,
                         "%s: %s: token id %d is >= vocab_size %d (the %s tokenizer has %d "
                         "ids)",
                         where, what, ids[c][t], vocab, tokenizer_kind(tok),
                         tokenizer_vocab_size(tok));
                goto done;
            }
        }
    }
    example_alloc(e, (int)total, n);
    e->label = (int)lab->u;
    e->ctx_len = len[0];
    memcpy(e->ctx, ids[0], sizeof(int) * (size_t)len[0]);
    int* out = e->buf + len[0];
    for (int c = 0; c < n; c++) {
        memcpy(out, ids[c + 1], sizeof(int) * (size_t)len[c + 1]);
        e->comp[c] = out;
        e->comp_len[c] = len[c + 1];
        e->comp_bytes[c] = (int)strlen(ends->items[c].s);
        out += len[c + 1];
    }
    rc = 0;
done:
    for (int c = 0; c <= n; c++)
        free(ids[c]);
    return rc;
}

static int load_jsonl(McSet* s, char* text, size_t len, Tokenizer* tok, int vocab, char* err,
                      size_t errcap) {
    if (!tok) {
        snprintf(err, errcap,
                 "%s: a JSONL file is tokenised on reading, and no tokenizer is loaded", s->path);
        return -1;
    }
    int cap = 0;
    s->have_bytes = 1;
    long line = 0;
    for (size_t at = 0; at < len;) {
        char* nl = memchr(text + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - text) : len, ll = end - at;
        char* ln = text + at;
        at = end + 1;
        line++;
        if (ll && ln[ll - 1] == '\r') ll--;
        size_t k = 0;
        while (k < ll && (ln[k] == ' ' || ln[k] == '\t'))
            k++;
        if (k == ll) continue; // a blank line
        char where[1200], perr[300];
        snprintf(where, sizeof(where), "%s: line %ld (example %d)", s->path, line, s->n);
        if (ll > MC_LINE_MAX) {
            snprintf(err, errcap, "%s: %zu bytes, longer than the %d a line may hold", where, ll,
                     MC_LINE_MAX);
            return -1;
        }
        Jv o;
        if (json_parse(&o, ln, ll, perr, sizeof(perr))) {
            snprintf(err, errcap, "%s: malformed JSON: %s", where, perr);
            return -1;
        }
        if (s->n == cap) {
            cap = cap ? 2 * cap : 1024;
            s->ex = reallocCheck(s->ex, sizeof(McExample) * (size_t)cap);
        }
        const int rc = jsonl_example(&s->ex[s->n], &o, tok, vocab, where, err, errcap);
        jv_free(&o);
        if (rc) return -1;
        s->n++;
    }
    if (s->n == 0) {
        snprintf(err, errcap, "%s: no examples (an empty file)", s->path);
        return -1;
    }
    return 0;
}

int mc_load(McSet* s, const char* path, Tokenizer* tok, int vocab, char* err, size_t errcap) {
    memset(s, 0, sizeof(*s));
    util_strlcpy(s->path, path, sizeof(s->path));
    size_t len;
    char* text = util_read_file_max(path, MC_FILE_MAX, &len, err, errcap);
    if (!text) return -1;
    size_t k = 0;
    while (k < len && (text[k] == ' ' || text[k] == '\t' || text[k] == '\r' || text[k] == '\n'))
        k++;
    // JSONL: not llm.c's magic, and a '{' first, or only white space, or a .jsonl name
    const size_t pl = strlen(path);
    const int is_jsonl =
        !(len >= 4 && rd_i32((const unsigned char*)text) == MC_MAGIC) &&
        (k == len || text[k] == '{' || (pl >= 6 && strcmp(path + pl - 6, ".jsonl") == 0));
    s->format = is_jsonl ? "JSONL" : "llm.c eval file";
    int rc = is_jsonl ? load_jsonl(s, text, len, tok, vocab, err, errcap)
                      : load_llmc(s, text, len, tok, vocab, err, errcap);
    free(text);
    if (rc) mc_free(s);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// scoring

int mc_check_window(const McSet* s, int limit, int window, char* err, size_t errcap) {
    const int n = limit > 0 && limit < s->n ? limit : s->n;
    for (int i = 0; i < n; i++) {
        const McExample* e = &s->ex[i];
        for (int c = 0; c < e->ncomp; c++) {
            if (e->comp_len[c] > window) {
                snprintf(err, errcap,
                         "%s: example %d: completion %d has %d tokens, more than the %d the model "
                         "reads at once: it cannot be scored",
                         s->path, i, c, e->comp_len[c], window);
                return -1;
            }
        }
    }
    return 0;
}

int mc_longest_row(const McSet* s, int limit, int window) {
    const int n = limit > 0 && limit < s->n ? limit : s->n;
    int most = 1;
    for (int i = 0; i < n; i++) {
        const McExample* e = &s->ex[i];
        for (int c = 0; c < e->ncomp; c++) {
            int len = e->ctx_len + e->comp_len[c] - 1;
            if (len > window) len = window;
            if (len > most) most = len;
        }
    }
    return most;
}

int mc_most_completions(const McSet* s, int limit) {
    const int n = limit > 0 && limit < s->n ? limit : s->n;
    int most = 0;
    for (int i = 0; i < n; i++)
        if (s->ex[i].ncomp > most) most = s->ex[i].ncomp;
    return most;
}

void mc_pick(const double* ll, const int* ntok, const int* nbytes, int n, int pick[3]) {
    double best[3] = {-INFINITY, -INFINITY, -INFINITY};
    pick[0] = pick[1] = pick[2] = -1;
    int bytes_ok = nbytes != NULL;
    for (int c = 0; c < n && bytes_ok; c++)
        bytes_ok = nbytes[c] > 0;
    for (int c = 0; c < n; c++) {
        const double v[3] = {ll[c], ll[c] / ntok[c], bytes_ok ? ll[c] / nbytes[c] : 0};
        for (int k = 0; k < (bytes_ok ? 3 : 2); k++) {
            if (pick[k] < 0 || v[k] > best[k]) { // strict: a tie keeps the lower index
                best[k] = v[k];
                pick[k] = c;
            }
        }
    }
}

int mc_run(const McSet* s, int limit, int window, McScoreFn fn, void* model, McResult* r, char* err,
           size_t errcap) {
    double* keep_ll = r->ll;
    memset(r, 0, sizeof(*r));
    r->ll = keep_ll;
    r->have_bytes = s->have_bytes;
    const int n = limit > 0 && limit < s->n ? limit : s->n;
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        const McExample* e = &s->ex[i];
        const int* cx[MC_MAX_COMPLETIONS];
        int cl[MC_MAX_COMPLETIONS], pick[3], cut = 0;
        double ll[MC_MAX_COMPLETIONS];
        for (int c = 0; c < e->ncomp; c++) {
            // input = (context + completion)[-(window + 1):][:-1]: keep window + 1 - len tokens
            int keep = window + 1 - e->comp_len[c];
            ASSERT(keep >= 1); // mc_check_window
            if (keep > e->ctx_len) keep = e->ctx_len;
            cut |= keep < e->ctx_len;
            cx[c] = e->ctx + (e->ctx_len - keep);
            cl[c] = keep;
        }
        const int rc = fn(model, cx, cl, (const int* const*)e->comp, e->comp_len, e->ncomp, ll);
        if (rc) {
            snprintf(err, errcap, "%s: example %d: %s", s->path, i,
                     rc == -2 ? "the model gives a non-finite log-likelihood (diverged weights?)"
                              : "a row is longer than the model's window");
            return -1;
        }
        mc_pick(ll, e->comp_len, s->have_bytes ? e->comp_bytes : NULL, e->ncomp, pick);
        for (int m = 0; m < 3; m++)
            r->correct[m] += pick[m] == e->label;
        r->truncated += cut;
        if (r->ll) {
            memcpy(r->ll + k, ll, sizeof(double) * (size_t)e->ncomp);
            k += (size_t)e->ncomp;
        }
    }
    r->n = n;
    return 0;
}

double mc_accuracy(const McResult* r, int k) {
    if (r->n == 0 || (k == 2 && !r->have_bytes)) return NAN;
    return (double)r->correct[k] / r->n;
}

int mc_log(const McSet* s, int limit, int window, McScoreFn fn, void* model, long step, RunLog* rl,
           JsonBuf* j, char* err, size_t errcap) {
    McResult r = {.ll = NULL};
    if (mc_run(s, limit, window, fn, model, &r, err, errcap)) return -1;
    json_begin(j);
    json_int(j, "step", step);
    json_str(j, "kind", "mc");
    json_str(j, "file", s->path);
    json_int(j, "examples", r.n);
    json_num(j, "acc", mc_accuracy(&r, 0));
    json_num(j, "acc_norm", mc_accuracy(&r, 1));
    json_num(j, "acc_norm_bytes", mc_accuracy(&r, 2));
    json_int(j, "truncated", r.truncated);
    runlog_end(rl, j);
    fprintf(rl->log, "step %ld mc_acc_norm %f\n", step, mc_accuracy(&r, 1)); // acc_norm (per token)
    printf("step %ld | mc acc %.4f | acc_norm %.4f | acc_norm_bytes %.4f | %d examples\n", step,
           mc_accuracy(&r, 0), mc_accuracy(&r, 1), mc_accuracy(&r, 2), r.n);
    fflush(stdout);
    return 0;
}
