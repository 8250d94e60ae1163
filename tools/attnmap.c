// attnmap.c: dump the attention maps of a checkpoint on a given text.
//   ./attnmap --checkpoint PATH (--text TEXT | --tokens FILE) [--layers LIST] [--heads LIST]
//             [--fp16] [--tokenizer-dir DIR] --out PREFIX
// Builds the model from the checkpoint (sizes, attention spec and config saved in it), runs one
// forward over the tokens and writes PREFIX.npy (layers, heads, T, T) with the exact causal
// weights of the checkpoint's own variant, and PREFIX.json (tokens as ids and strings, layer and
// head indices, variant, step). scripts/plot_attention PREFIX renders them.
//
// defines: Config, config_* (common/config.h); GPT2, gpt2_* (model/gpt2.h); ckpt_read_info,
// ckpt_load_model (model/checkpoint.h); metrics_write_attention (model/metrics.h)
#include <ctype.h>
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/matmul.h"
#include "common/util.h"
#include "data/tokenizer.h"
#include "model/checkpoint.h"
#include "model/gpt2.h"
#include "model/metrics.h"

static void usage(FILE* f) {
    fprintf(f,
            "usage: ./attnmap --checkpoint PATH (--text TEXT | --tokens FILE) [--layers LIST]\n"
            "                 [--heads LIST] [--fp16] [--tokenizer-dir DIR] --out PREFIX\n\n"
            "Runs the checkpoint's model on the tokens and writes its attention weights:\n"
            "  PREFIX.npy   float32 (or float16 with --fp16), shape (layers, heads, T, T); row t\n"
            "               holds the weights of query t over keys 0..t (zeros after)\n"
            "  PREFIX.json  tokens (ids and strings), layers, heads, variant, step\n\n"
            "  --checkpoint PATH   attnlab model file (model_NNNNNNNN.bin)\n"
            "  --text TEXT         text, encoded with the checkpoint's tokenizer\n"
            "  --tokens FILE       token ids separated by spaces, commas or newlines\n"
            "  --layers LIST       e.g. 0,2,5 or 0-3 or all (default all)\n"
            "  --heads LIST        same syntax (default all)\n"
            "  --fp16              write float16 instead of float32\n"
            "  --tokenizer-dir DIR where vocab.bpe lives (default: the checkpoint's config)\n"
            "  --out PREFIX        output prefix\n"
            "T must not exceed the model's block_size. Exit codes: 0 ok, 1 I/O, 2 bad usage.\n");
}

_Noreturn static void usage_error(const char* fmt, const char* arg) {
    fprintf(stderr, "attnmap: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(./attnmap --help for usage)\n");
    fflush(NULL);
    _exit(EXIT_USAGE); // like die(): no atexit handlers on a usage error
}

// Parse "all", "3", "0,2,5", "0-3,7" into sel[0..n) (ascending, unique). 0 or -1.
static int parse_list(int* sel, int* n, const char* s, int limit) {
    int mark[GPT2_MAX_LAYERS * 4] = {0};
    if (limit > (int)(sizeof(mark) / sizeof(mark[0]))) return -1;
    if (strcmp(s, "all") == 0) {
        for (int i = 0; i < limit; i++)
            sel[i] = i;
        *n = limit;
        return 0;
    }
    const char* p = s;
    while (*p) {
        char* end;
        errno = 0;
        long a = strtol(p, &end, 10);
        if (end == p || errno || a < 0 || a >= limit) return -1;
        long b = a;
        p = end;
        if (*p == '-') {
            b = strtol(p + 1, &end, 10);
            if (end == p + 1 || errno || b < a || b >= limit) return -1;
            p = end;
        }
        for (long i = a; i <= b; i++)
            mark[i] = 1;
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    *n = 0;
    for (int i = 0; i < limit; i++)
        if (mark[i]) sel[(*n)++] = i;
    return *n > 0 ? 0 : -1;
}

// Token ids from a text file (separators: whitespace and commas).
static int* read_token_file(const char* path, int* n, int vocab) {
    char err[1024];
    size_t len;
    char* text = util_read_file(path, &len, err, sizeof(err));
    if (!text) usage_error("--tokens: %s", err);
    int cap = 64, cnt = 0;
    int* ids = mallocCheck(sizeof(int) * (size_t)cap);
    for (char* p = text; *p;) {
        if (isspace((unsigned char)*p) || *p == ',') {
            p++;
            continue;
        }
        char* end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v >= vocab) {
            char msg[1200];
            snprintf(msg, sizeof(msg), "%s: token %d is not an id in [0, %d)", path, cnt + 1,
                     vocab);
            usage_error("--tokens: %s", msg);
        }
        if (cnt == cap) ids = reallocCheck(ids, sizeof(int) * (size_t)(cap *= 2));
        ids[cnt++] = (int)v;
        p = end;
    }
    free(text);
    *n = cnt;
    return ids;
}

int main(int argc, char** argv) {
    const char *ckpt = NULL, *text = NULL, *tokfile = NULL, *layers_s = "all", *heads_s = "all";
    const char *out = NULL, *tokdir = NULL;
    int fp16 = 0;
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--fp16")) {
            fp16 = 1;
            continue;
        }
        const char** dst = !strcmp(a, "--checkpoint")      ? &ckpt
                           : !strcmp(a, "--text")          ? &text
                           : !strcmp(a, "--tokens")        ? &tokfile
                           : !strcmp(a, "--layers")        ? &layers_s
                           : !strcmp(a, "--heads")         ? &heads_s
                           : !strcmp(a, "--out")           ? &out
                           : !strcmp(a, "--tokenizer-dir") ? &tokdir
                                                           : NULL;
        if (!dst) usage_error("unknown argument '%s'", a);
        if (i + 1 >= argc) usage_error("%s needs a value", a);
        *dst = argv[++i];
    }
    if (!ckpt) usage_error("%s", "--checkpoint PATH is required");
    if (!out || !*out) usage_error("%s", "--out PREFIX is required");
    if (!text == !tokfile) usage_error("%s", "give exactly one of --text TEXT and --tokens FILE");

    // ---- model from the checkpoint: sizes and attention from its header, keys from its config
    char err[2048], attention[CONFIG_STR];
    GPT2Config gc;
    char* cfg_text = NULL;
    long step = 0;
    if (ckpt_read_info(ckpt, &gc, attention, sizeof(attention), &cfg_text, &step, err, sizeof(err)))
        usage_error("--checkpoint: %s", err);
    char cfg_path[] = "/tmp/attnmap-config-XXXXXX";
    int fd = mkstemp(cfg_path);
    if (fd < 0) die(1, "cannot create a temporary file in /tmp");
    size_t cl = cfg_text ? strlen(cfg_text) : 0;
    if (write(fd, cfg_text ? cfg_text : "", cl) != (ssize_t)cl)
        die(1, "%s: write failed", cfg_path);
    close(fd);
    Config c;
    config_defaults(&c);
    int lrc = config_load(&c, cfg_path, err, sizeof(err));
    unlink(cfg_path);
    free(cfg_text);
    if (lrc) usage_error("%s: the saved config does not load", ckpt);
    util_strlcpy(c.attention, attention, sizeof(c.attention));
    GPT2 m;
    memset(&m, 0, sizeof(m));
    if (gpt2_setup_attention(&m, &c, err, sizeof(err))) usage_error("%s", err);
    gpt2_build(&m, &gc);
    if (ckpt_load_model(&m, ckpt, 1, &step, NULL, 0, err, sizeof(err)))
        usage_error("--checkpoint: %s", err);

    // ---- tokens
    Tokenizer* tok =
        tokenizer_load(c.tokenizer, tokdir ? tokdir : c.tokenizer_dir, err, sizeof(err));
    int T = 0, *ids = NULL;
    if (text) {
        if (!tok)
            usage_error("--text needs the tokenizer: %s (pass --tokenizer-dir or --tokens)", err);
        T = (int)tokenizer_encode(tok, text, strlen(text), 1, &ids);
    } else {
        ids = read_token_file(tokfile, &T, gc.vocab_size);
    }
    if (T == 0) usage_error("%s", "no tokens to run");
    if (T > gc.block_size) {
        char msg[128];
        snprintf(msg, sizeof(msg), "%d tokens exceed the model's block_size %d", T, gc.block_size);
        usage_error("%s", msg);
    }
    for (int t = 0; t < T; t++)
        if (ids[t] >= gc.vocab_size) usage_error("%s", "a token id is >= the model's vocab_size");
    int layers[GPT2_MAX_LAYERS], nl = 0, nh = 0;
    int* heads = mallocCheck(sizeof(int) * (size_t)gc.n_head);
    if (parse_list(layers, &nl, layers_s, gc.n_layer))
        usage_error("--layers '%s': expected all, or indices/ranges like 0,2-3 below n_layer",
                    layers_s);
    if (parse_list(heads, &nh, heads_s, gc.n_head))
        usage_error("--heads '%s': expected all, or indices/ranges like 0,2-3 below n_head",
                    heads_s);

    // ---- forward and write
    mm_init_threads();
    int nthreads = omp_get_num_procs();
    omp_set_num_threads(nthreads);
    gpt2_alloc_acts(&m, 1, T, nthreads);
    m.step = -1;
    gpt2_forward(&m, ids, NULL, 1, T);
    char src[1200];
    snprintf(src, sizeof(src), "attnmap %s", ckpt);
    if (metrics_write_attention(&m, out, 0, T, layers, nl, heads, nh, fp16, ids, tok, step, src,
                                err, sizeof(err)))
        die(1, "%s", err);
    printf("wrote %s.npy (%d layers, %d heads, T=%d, %s) and %s.json\n", out, nl, nh, T,
           fp16 ? "float16" : "float32", out);
    free(ids);
    free(heads);
    if (tok) tokenizer_free(tok);
    gpt2_free(&m);
    return 0;
}
