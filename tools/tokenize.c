// tools/tokenize.c: command-line GPT-2 / byte tokenizer.
//   ./tokenize encode [FILE]    ids one per line (stdin when no FILE)
//   ./tokenize decode [FILE]    whitespace-separated ids -> the exact bytes
//   ./tokenize bench FILE       encode throughput, median MB/s of several cold-cache runs
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "common/util.h"    // defines: die, util_read_file, util_now, mallocCheck
#include "data/tokenizer.h" // defines: Tokenizer, tokenizer_load/encode/decode

static void usage(FILE* f) {
    fprintf(f, "usage: ./tokenize encode [FILE] [options]   text -> ids, one per line\n"
               "       ./tokenize decode [FILE] [options]   ids (whitespace-separated) -> bytes\n"
               "       ./tokenize bench FILE [options]      encode speed (median MB/s)\n"
               "Reads stdin when FILE is missing or '-'.\n"
               "options:\n"
               "  --tokenizer gpt2|byte  tokenizer (default gpt2)\n"
               "  --dir DIR              directory with vocab.bpe (default data_cache/gpt2)\n"
               "  --allow-special        encode the literal <|endoftext|> as the EOT id\n"
               "                         (default: encode it as ordinary text)\n"
               "  --js-whitespace        JavaScript's \\s in the pre-tokenizer (js-tiktoken),\n"
               "                         default Python's (encoder.py, tiktoken); differs only\n"
               "                         for U+0085 and U+FEFF\n"
               "  --runs N               bench: number of timed runs (default 7)\n"
               "  -h, --help             this text\n");
}

// Read FILE (or stdin for NULL / "-") whole.
static char* read_input(const char* path, size_t* len) {
    if (path && strcmp(path, "-") != 0) {
        char err[1300];
        char* buf = util_read_file(path, len, err, sizeof err);
        if (!buf) die(EXIT_USAGE, "%s", err);
        return buf;
    }
    size_t cap = 1 << 16, n = 0;
    char* buf = mallocCheck(cap);
    for (;;) {
        if (n + 1 >= cap) buf = reallocCheck(buf, cap *= 2);
        size_t r = fread(buf + n, 1, cap - n - 1, stdin);
        n += r;
        if (r == 0) break;
    }
    if (ferror(stdin)) die(EXIT_USAGE, "stdin: read error: %s", strerror(errno));
    buf[n] = 0;
    *len = n;
    return buf;
}

static void write_all(const void* p, size_t n) {
    if (n && fwrite(p, 1, n, stdout) != n) die(1, "stdout: write error: %s", strerror(errno));
}

static void cmd_encode(Tokenizer* t, const char* path, int allow_special) {
    size_t n;
    char* text = read_input(path, &n);
    int* ids;
    size_t m = tokenizer_encode(t, text, n, allow_special, &ids);
    char line[16];
    for (size_t i = 0; i < m; i++) {
        int l = snprintf(line, sizeof line, "%d\n", ids[i]);
        write_all(line, (size_t)l);
    }
    free(ids);
    free(text);
}

static void cmd_decode(Tokenizer* t, const char* path) {
    size_t n;
    char* text = read_input(path, &n);
    const char* name = path && strcmp(path, "-") != 0 ? path : "stdin";
    int V = tokenizer_vocab_size(t);
    size_t line = 1, i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)text[i];
        if (c == '\n') line++;
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
            i++;
            continue;
        }
        size_t j = i;
        long v = 0;
        int ok = 1;
        while (j < n && !strchr(" \t\n\r\v\f", text[j]) && text[j]) {
            if (text[j] < '0' || text[j] > '9' || j - i >= 9)
                ok = 0;
            else
                v = v * 10 + (text[j] - '0');
            j++;
        }
        if (j < n && text[j] == 0) ok = 0, j++;
        if (!ok || v >= V)
            die(EXIT_USAGE, "%s:%zu: bad token id '%.*s' (expected an integer in 0..%d)", name,
                line, (int)(j - i > 40 ? 40 : j - i), text + i, V - 1);
        size_t len;
        const unsigned char* b = tokenizer_token_bytes(t, (int)v, &len);
        write_all(b, len);
        i = j;
    }
    free(text);
}

static int cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static void cmd_bench(Tokenizer* t, const char* path, int runs, int allow_special) {
    if (!path || strcmp(path, "-") == 0) die(EXIT_USAGE, "bench needs a FILE");
    size_t n;
    char* text = read_input(path, &n);
    double* secs = mallocCheck((size_t)runs * sizeof(double));
    size_t ntok = 0;
    for (int r = 0; r < runs; r++) {
        tokenizer_clear_cache(t); // every run starts cold
        int* ids;
        double t0 = util_now();
        ntok = tokenizer_encode(t, text, n, allow_special, &ids);
        secs[r] = util_now() - t0;
        free(ids);
    }
    qsort(secs, (size_t)runs, sizeof(double), cmp_double);
    double med = secs[runs / 2];
    printf("%s: %zu bytes -> %zu tokens (%.3f bytes/token), tokenizer %s\n", path, n, ntok,
           ntok ? (double)n / (double)ntok : 0.0, tokenizer_kind(t));
    printf("encode: median %.1f MB/s over %d runs (best %.1f, worst %.1f), %.0f ktok/s\n",
           (double)n / med / 1e6, runs, (double)n / secs[0] / 1e6, (double)n / secs[runs - 1] / 1e6,
           (double)ntok / med / 1e3);
    free(secs);
    free(text);
}

// --runs N: 1..1000 (a CLI_FN parser, into an int).
static void parse_runs(const char* name, const char* v, void* dst) {
    (void)name;
    char* end;
    long r = strtol(v, &end, 10);
    if (*end || r < 1 || r > 1000) die(EXIT_USAGE, "--runs: expected 1..1000, got '%s'", v);
    *(int*)dst = (int)r;
}

int main(int argc, char** argv) {
    const char* kind = "gpt2";
    const char* dir = "data_cache/gpt2";
    const char* cmd = NULL;
    const char* file = NULL;
    int allow_special = 0, js = 0, runs = 7;
    const CliOpt opts[] = {CLI_STR_OPT("--tokenizer", &kind), CLI_STR_OPT("--dir", &dir),
                           CLI_FN_OPT("--runs", parse_runs, &runs),
                           CLI_FLAG_OPT("--allow-special", &allow_special),
                           CLI_FLAG_OPT("--js-whitespace", &js)};
    const char* pos[2] = {NULL, NULL};
    int npos;
    const CliTool tool = {.usage = usage,
                          .unknown = "unknown option '%s' (see --help)",
                          .no_value = "%s needs a value (see --help)",
                          .extra = "unexpected argument '%s' (see --help)"};
    cli_parse_args_or_exit(argc, argv, 1, opts, CLI_COUNT(opts), pos, 2, &npos, &tool);
    cmd = pos[0];
    file = pos[1];
    if (!cmd) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(cmd, "encode") && strcmp(cmd, "decode") && strcmp(cmd, "bench"))
        die(EXIT_USAGE, "unknown command '%s' (encode, decode or bench; see --help)", cmd);
    char err[1400];
    Tokenizer* t = tokenizer_load(kind, dir, err, sizeof err);
    if (!t) die(EXIT_USAGE, "%s", err);
    tokenizer_set_js_whitespace(t, js);
    if (!strcmp(cmd, "encode"))
        cmd_encode(t, file, allow_special);
    else if (!strcmp(cmd, "decode"))
        cmd_decode(t, file);
    else
        cmd_bench(t, file, runs, allow_special);
    tokenizer_free(t);
    if (fflush(stdout) != 0) die(1, "stdout: write error: %s", strerror(errno));
    return 0;
}
