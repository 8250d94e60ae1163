// tools/prepare.c: text files -> llm.c token shards (PREFIX_val_NNNNNN.bin,
// PREFIX_train_NNNNNN.bin): the command line, progress and the summary. Splitting, encoding and
// shard writing are data/corpus.c. Every document starts with EOT. The token stream is the
// documents in input order; its first N tokens are the validation split (as llm.c's
// tinyshakespeare), the rest the training split, each cut into shards of --shard-tokens tokens.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cli.h"
#include "common/util.h"    // defines: die, util_read_file, util_mkdirs, util_now
#include "data/corpus.h"    // defines: corpus_encode_text, corpus_write_split
#include "data/tokenizer.h" // defines: tokenizer_load, tokenizer_encode, tokenizer_split_point

#define CHUNK_BYTES (1u << 20) // encode in pieces of about this size (progress, memory)

static void usage(FILE* f) {
    fprintf(
        f,
        "usage: ./prepare [options] FILE...\n"
        "Tokenize text files into llm.c shards PREFIX_val_000000.bin, PREFIX_train_000000.bin, "
        "...\n"
        "Every document starts with the EOT token; the first tokens of the stream are the\n"
        "validation split, the rest the training split.\n"
        "options:\n"
        "  --out PREFIX         output path prefix (default data_cache/NAME/NAME, NAME = the\n"
        "                       first file's name without extension)\n"
        "  --split MODE         document boundaries: file (each file is one document, default),\n"
        "                       paragraph (a new document after each run of blank lines; the\n"
        "                       blank lines stay with the paragraph before them), or any other\n"
        "                       string = a separator, removed from the text (\\n \\t \\r \\\\\n"
        "                       escapes understood), e.g. --split '<|endoftext|>'\n"
        "  --val-tokens N       the first N tokens are the validation split\n"
        "  --val-fraction F     the first fraction F of the tokens (default 0.1)\n"
        "  --shard-tokens N     tokens per shard (default 100000000, as llm.c)\n"
        "  --doc-tokens N       re-cut the text into documents of exactly N tokens, EOT first\n"
        "                       (the text's own document breaks dropped, the short tail too):\n"
        "                       trained with seq_len = N, every row starts with EOT\n"
        "  --tokenizer gpt2|byte  (default gpt2)\n"
        "  --dir DIR            directory with vocab.bpe (default data_cache/gpt2)\n"
        "  --allow-special      the literal <|endoftext|> in the text becomes EOT (default: text)\n"
        "  --quiet              no progress output\n"
        "  -h, --help           this text\n");
}

typedef struct {
    const char* out;
    const char* split;    // "file", "paragraph" or a separator string (escapes decoded)
    long long val_tokens; // -1: use val_fraction
    double val_fraction;
    long long shard_tokens;
    long long doc_tokens; // 0: documents as --split makes them
    int allow_special, quiet;
} PrepareArgs;

// ----------------------------------------------------------------------------
// progress on stderr

typedef struct {
    size_t done, total;
    double t0, last;
    int show, tty;
} Progress;

static void progress_update(Progress* p, size_t add, int final) {
    p->done += add;
    if (!p->show) return;
    double now = util_now();
    if (!final && now - p->last < (p->tty ? 0.2 : 5.0)) return;
    p->last = now;
    double el = now - p->t0, frac = p->total ? (double)p->done / (double)p->total : 1.0;
    double mbs = el > 0 ? (double)p->done / el / 1e6 : 0.0;
    char eta[32];
    util_format_duration(eta, sizeof eta, frac > 0 ? el * (1.0 - frac) / frac : 0.0);
    int w = 30, fill = (int)(frac * w);
    char bar[64];
    for (int i = 0; i < w; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[w] = 0;
    fprintf(stderr, "%s[%s] %5.1f%%  %.0f/%.0f MB  %.1f MB/s  ETA %s%s", p->tty ? "\r" : "", bar,
            100.0 * frac, (double)p->done / 1e6, (double)p->total / 1e6, mbs, eta,
            p->tty && !final ? "" : "\n");
}

static void progress_add(void* ctx, size_t bytes) {
    progress_update(ctx, bytes, 0);
}

static int write_split(const char* prefix, const char* split, const uint16_t* tok, size_t n,
                       size_t shard_tokens, int quiet) {
    char err[1400];
    int k = corpus_write_split(prefix, split, tok, n, shard_tokens, quiet ? NULL : stderr, err,
                               sizeof err);
    if (k < 0) die(1, "%s", err);
    return k;
}

// A count option (--val-tokens, --shard-tokens, --doc-tokens; a CLI_FN parser, into a long long).
static void parse_count(const char* opt, const char* v, void* dst) {
    char* end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || *end || end == v || x < 0)
        die(EXIT_USAGE, "%s: expected a non-negative integer, got '%s'", opt, v);
    *(long long*)dst = x;
}

// --val-fraction F in [0, 1): the validation split by fraction (val_tokens back to -1).
static void parse_val_fraction(const char* opt, const char* v, void* dst) {
    PrepareArgs* a = dst;
    a->val_fraction = util_cli_double(opt, v, 0.0, 1.0);
    if (a->val_fraction >= 1.0)
        die(EXIT_USAGE, "--val-fraction: expected a number in [0, 1), got '%s'", v);
    a->val_tokens = -1;
}

int main(int argc, char** argv) {
    PrepareArgs a = {NULL, "file", -1, 0.1, 100000000LL, 0, 0, 0};
    const char* kind = "gpt2";
    const char* dir = "data_cache/gpt2";
    const char** files = mallocCheck((size_t)argc * sizeof(char*));
    int nfiles = 0;
    const CliOpt opts[] = {CLI_FLAG_OPT("--allow-special", &a.allow_special),
                           CLI_FLAG_OPT("--quiet", &a.quiet),
                           CLI_STR_OPT("--out", &a.out),
                           CLI_STR_OPT("--split", &a.split),
                           CLI_FN_OPT("--val-tokens", parse_count, &a.val_tokens),
                           CLI_FN_OPT("--val-fraction", parse_val_fraction, &a),
                           CLI_FN_OPT("--shard-tokens", parse_count, &a.shard_tokens),
                           CLI_FN_OPT("--doc-tokens", parse_count, &a.doc_tokens),
                           CLI_STR_OPT("--tokenizer", &kind),
                           CLI_STR_OPT("--dir", &dir)};
    const CliTool tool = {.usage = usage,
                          .unknown = "unknown option '%s' (see --help)",
                          .no_value = "%s needs a value (see --help)"};
    cli_parse_args_or_exit(argc, argv, 1, opts, CLI_COUNT(opts), files, argc, &nfiles, &tool);
    if (nfiles == 0) {
        usage(stderr);
        free(files);
        return EXIT_USAGE;
    }
    if (a.shard_tokens < 1) die(EXIT_USAGE, "--shard-tokens must be at least 1");
    if (!a.split[0]) die(EXIT_USAGE, "--split: empty separator");
    if (a.doc_tokens == 1) die(EXIT_USAGE, "--doc-tokens must be at least 2 (EOT and one token)");
    char* sep = NULL;
    if (strcmp(a.split, "file") && strcmp(a.split, "paragraph"))
        a.split = sep = corpus_unescape(a.split);

    char err[1400];
    Tokenizer* t = tokenizer_load(kind, dir, err, sizeof err);
    if (!t) die(EXIT_USAGE, "%s", err);
    if (tokenizer_vocab_size(t) > 65536)
        die(EXIT_USAGE, "tokenizer %s has %d tokens; shards hold uint16 ids", kind,
            tokenizer_vocab_size(t));

    // default prefix: data_cache/NAME/NAME from the first file
    char prefix[900];
    if (a.out) {
        if (util_strlcpy(prefix, a.out, sizeof prefix)) die(EXIT_USAGE, "--out: path too long");
    } else {
        const char* base = strrchr(files[0], '/');
        base = base ? base + 1 : files[0];
        char name[256];
        util_strlcpy(name, base, sizeof name);
        char* dot = strrchr(name, '.');
        if (dot && dot != name) *dot = 0;
        snprintf(prefix, sizeof prefix, "data_cache/%s/%s", name, name);
    }
    char pdir[900];
    util_strlcpy(pdir, prefix, sizeof pdir);
    char* slash = strrchr(pdir, '/');
    if (slash && slash != pdir) {
        *slash = 0;
        if (util_mkdirs(pdir, err, sizeof err)) die(1, "%s", err);
    }

    // read and encode
    Progress pr = {0, 0, util_now(), 0.0, 0, isatty(2)};
    pr.last = pr.t0;
    for (int f = 0; f < nfiles; f++) {
        FILE* fp = fopen(files[f], "rb");
        if (!fp) die(EXIT_USAGE, "%s: cannot open: %s", files[f], strerror(errno));
        fseek(fp, 0, SEEK_END);
        long sz = ftell(fp);
        fclose(fp);
        if (sz > 0) pr.total += (size_t)sz;
    }
    pr.show = !a.quiet && pr.total > (4u << 20);
    CorpusTokens b = {NULL, 0, 0, 0};
    CorpusOptions co = {a.split, a.allow_special, progress_add, &pr};
    size_t empty_files = 0;
    for (int f = 0; f < nfiles; f++) {
        size_t n;
        char* text = util_read_file(files[f], &n, err, sizeof err);
        if (!text) die(EXIT_USAGE, "%s", err);
        size_t before = b.ndocs, base = pr.done;
        corpus_encode_text(&b, t, text, n, &co, CHUNK_BYTES);
        pr.done = base + n; // separators and blank lines count as done too
        if (b.ndocs == before) empty_files++;
        free(text);
    }
    progress_update(&pr, 0, 1);
    if (b.n == 0) die(EXIT_USAGE, "no text in the input files: nothing to write");
    if (a.doc_tokens > 1) {
        size_t dropped = corpus_fixed_docs(&b, tokenizer_eot(t), (size_t)a.doc_tokens);
        if (b.n == 0)
            die(EXIT_USAGE, "--doc-tokens %lld: the text is shorter than one document",
                a.doc_tokens);
        if (!a.quiet)
            fprintf(stderr, "prepare: %zu documents of %lld tokens (tail of %zu tokens dropped)\n",
                    b.ndocs, a.doc_tokens, dropped);
    }

    size_t nval =
        a.val_tokens >= 0 ? (size_t)a.val_tokens : (size_t)(a.val_fraction * (double)b.n + 0.5);
    if (a.doc_tokens > 1) // whole documents in each split
        nval = (nval + (size_t)a.doc_tokens / 2) / (size_t)a.doc_tokens * (size_t)a.doc_tokens;
    if (nval >= b.n)
        die(EXIT_USAGE,
            "the validation split (%zu tokens) leaves nothing for training (%zu tokens "
            "in total)",
            nval, b.n);
    int nv = write_split(prefix, "val", b.tok, nval, (size_t)a.shard_tokens, a.quiet);
    int nt =
        write_split(prefix, "train", b.tok + nval, b.n - nval, (size_t)a.shard_tokens, a.quiet);
    if (!a.quiet) {
        fprintf(stderr,
                "prepare: %zu documents, %zu tokens (%s): val %zu tokens in %d shard%s, "
                "train %zu tokens in %d shard%s\n",
                b.ndocs, b.n, tokenizer_kind(t), nval, nv, nv == 1 ? "" : "s", b.n - nval, nt,
                nt == 1 ? "" : "s");
        if (empty_files) fprintf(stderr, "prepare: %zu input file(s) held no text\n", empty_files);
    }
    corpus_tokens_free(&b);
    free(sep);
    free(files);
    tokenizer_free(t);
    return 0;
}
