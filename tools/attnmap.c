// attnmap.c: dump the attention maps of a checkpoint on a given text.
//   ./attnmap --checkpoint PATH (--text TEXT | --tokens FILE) [--layers LIST] [--heads LIST]
//             [--fp16] [--tokenizer-dir DIR] --out PREFIX
// Builds the model from the checkpoint (sizes, attention spec and config saved in it), runs one
// forward over the tokens and writes PREFIX.npy (layers, heads, T, T) with the exact causal
// weights of the checkpoint's own variant, and PREFIX.json (tokens as ids and strings, layer and
// head indices, variant, step). scripts/plot_attention PREFIX renders them.
//   ./attnmap html (--checkpoint PATH | --maps PREFIX) [--compare PATH | --compare-maps PREFIX]
//             ... --out FILE.html
// writes the attention explorer instead: one self-contained HTML page (model/explorer.h) for one
// run or two runs on the same tokens, from checkpoints (dumped through the same path as above
// into a temporary directory) or from existing PREFIX.npy/.json dumps.
//
// defines: Config, config_* (common/config.h); GPT2, gpt2_* (model/gpt2.h); model_open
// (model/open.h); metrics_write_attention (model/metrics.h)
#include <ctype.h>
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cli.h"
#include "common/config.h"
#include "common/matmul.h"
#include "common/util.h"
#include "data/dataloader.h"
#include "data/tokenizer.h"
#include "common/npy.h"
#include "model/explorer.h"
#include "model/open.h"
#include "model/gpt2.h"
#include "model/metrics.h"

static void usage(FILE* f) {
    fprintf(
        f,
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
        "T must not exceed the model's block_size. Exit codes: 0 ok, 1 I/O, 2 bad usage.\n\n"
        "./attnmap html ... writes the attention explorer page instead (./attnmap html --help).\n");
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

// The tokenizer as the dumps' token text (model/metrics.h).
static const unsigned char* token_bytes(const void* tok, int id, size_t* len) {
    return tok ? tokenizer_token_bytes(tok, id, len) : NULL;
}

// What one dump needs: the checkpoint, the tokens (text, a token file, or ids given directly),
// the selection and the output prefix.
typedef struct {
    const char *ckpt, *text, *tokfile, *tokdir, *layers_s, *heads_s, *out;
    const int* ids; // used when text and tokfile are NULL
    int n_ids, fp16;
    size_t max_raw; // html mode: refuse before the forward if the maps exceed this (0 = no check)
} DumpArgs;

// Run the checkpoint on the tokens and write OUT.npy and OUT.json. Returns the token ids
// (malloc'd, *T of them). Bad input exits with EXIT_USAGE, I/O errors with 1.
static int* dump_maps(const DumpArgs* d, int* T_out, int* nl_out, int* nh_out) {
    const char* ckpt = d->ckpt;
    // ---- model from the checkpoint: its saved config gives variant, keys and sizes
    char err[2048];
    GPT2 m;
    ModelOpen mo = {.run = NULL};
    if (model_open(&m, ckpt, &mo, err, sizeof(err))) usage_error("--checkpoint: %s", err);
    const Config c = mo.cfg;
    const GPT2Config gc = m.cfg;
    const long step = mo.step;

    // ---- tokens
    Tokenizer* tok =
        tokenizer_load(c.tokenizer, d->tokdir ? d->tokdir : c.tokenizer_dir, err, sizeof(err));
    int T = 0, *ids = NULL;
    if (d->text) {
        if (!tok)
            usage_error("--text needs the tokenizer: %s (pass --tokenizer-dir or --tokens)", err);
        T = (int)tokenizer_encode(tok, d->text, strlen(d->text), 1, &ids);
    } else if (d->tokfile) {
        ids = read_token_file(d->tokfile, &T, gc.vocab_size);
    } else {
        T = d->n_ids;
        ids = mallocCheck(sizeof(int) * (size_t)(T > 0 ? T : 1));
        memcpy(ids, d->ids, sizeof(int) * (size_t)T);
    }
    if (T == 0) usage_error("%s", "no tokens to run");
    if (T > gc.block_size) {
        char msg[128];
        snprintf(msg, sizeof(msg), "%d tokens exceed the model's block_size %d", T, gc.block_size);
        usage_error("%s", msg);
    }
    if (tokens_check_range(ids, (size_t)T, gc.vocab_size, "tokens", err, sizeof(err)))
        usage_error("%s", err);
    int layers[GPT2_MAX_LAYERS], nl = 0, nh = 0;
    int* heads = mallocCheck(sizeof(int) * (size_t)gc.n_head);
    if (parse_list(layers, &nl, d->layers_s, gc.n_layer))
        usage_error("--layers '%s': expected all, or indices/ranges like 0,2-3 below n_layer",
                    d->layers_s);
    if (parse_list(heads, &nh, d->heads_s, gc.n_head))
        usage_error("--heads '%s': expected all, or indices/ranges like 0,2-3 below n_head",
                    d->heads_s);
    if (d->max_raw && explorer_raw_bytes(nl, nh, T) / 3 * 4 > d->max_raw) {
        char msg[256];
        snprintf(msg, sizeof(msg),
                 "%d layers x %d heads at T = %d make a page of up to %.0f MiB, above --max-mib: "
                 "choose fewer --layers/--heads or a shorter text",
                 nl, nh, T, explorer_raw_bytes(nl, nh, T) / 3.0 * 4 / 1048576.0);
        usage_error("%s", msg);
    }

    // ---- forward and write
    mm_init_threads();
    int nthreads = omp_get_num_procs();
    omp_set_num_threads(nthreads);
    gpt2_alloc_acts(&m, 1, T, nthreads);
    m.step = -1;
    gpt2_forward(&m, ids, NULL, 1, T);
    char src[1200];
    snprintf(src, sizeof(src), "attnmap %s", ckpt);
    const TokenText tt = {.bytes = token_bytes, .ctx = tok};
    if (metrics_write_attention(&m, d->out, 0, T, layers, nl, heads, nh, d->fp16, ids, &tt, step,
                                src, err, sizeof(err)))
        die(1, "%s", err);
    free(heads);
    if (tok) tokenizer_free(tok);
    gpt2_free(&m);
    *T_out = T;
    *nl_out = nl;
    *nh_out = nh;
    return ids;
}

// ---------------------------------------------------------------------------------------------
// html mode: the attention explorer page (model/explorer.h)

static void html_usage(FILE* f) {
    fprintf(
        f,
        "usage: ./attnmap html (--checkpoint PATH | --maps PREFIX) [--compare PATH |\n"
        "                 --compare-maps PREFIX] [--text TEXT | --tokens FILE] [--layers LIST]\n"
        "                 [--heads LIST] [--metrics FILE|none] [--compare-metrics FILE|none]\n"
        "                 [--title TEXT] [--max-mib N] [--tokenizer-dir DIR] --out FILE.html\n\n"
        "Writes one self-contained HTML page (data and JavaScript inline, works offline) to\n"
        "explore the attention of a run on a text, or of two runs side by side on the same\n"
        "tokens: a layer x head grid of heatmaps, per-query weights over the tokens, per-head\n"
        "entropy, raw sink weight and max weight, and metrics.jsonl trajectories.\n\n"
        "  --checkpoint PATH     run the checkpoint on --text/--tokens\n"
        "  --maps PREFIX         or use an existing dump PREFIX.npy + PREFIX.json\n"
        "  --compare PATH        a second checkpoint, run on the same tokens\n"
        "  --compare-maps PREFIX a second dump (same tokens)\n"
        "  --layers, --heads     as in dump mode (checkpoints only; default all)\n"
        "  --metrics FILE        metrics.jsonl of the first run (default: the one next to\n"
        "                        the checkpoint, if any; none = leave out)\n"
        "  --compare-metrics F   same for the second run\n"
        "  --max-mib N           refuse pages that could exceed N MiB (default 128, 0 = no limit)\n"
        "  --out FILE            the page (-o also works)\n"
        "Maps are quantised to uint8 per row (step = row range / 255, error <= step / 2). Page\n"
        "size <= 4/3 * L*H*(12*T + T*(T+1)/2) bytes per run plus about 40 KB (docs/\n"
        "diagnostics.md). Exit codes: 0 ok, 1 I/O, 2 bad usage.\n");
}

// The integers of the sidecar's top-level array "key": [a, b, ...] (whitespace allowed, as
// json.dump writes it) into a malloc'd array; *n = -1 if the key or a well-formed array of
// integers is missing.
static long* sidecar_ints(const char* sidecar, const char* key, long* n) {
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\"", key);
    *n = -1;
    const char* p = strstr(sidecar, pat);
    if (!p) return NULL;
    p += strlen(pat);
    while (isspace((unsigned char)*p))
        p++;
    if (*p++ != ':') return NULL;
    while (isspace((unsigned char)*p))
        p++;
    if (*p++ != '[') return NULL;
    long cap = 16, cnt = 0;
    long* v = mallocCheck(sizeof(long) * (size_t)cap);
    for (;;) {
        while (isspace((unsigned char)*p))
            p++;
        if (*p == ']' && cnt == 0) break;
        char* end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno) {
            free(v);
            return NULL;
        }
        if (cnt == cap) v = reallocCheck(v, sizeof(long) * (size_t)(cap *= 2));
        v[cnt++] = x;
        p = end;
        while (isspace((unsigned char)*p))
            p++;
        if (*p == ']') break;
        if (*p++ != ',') {
            free(v);
            return NULL;
        }
    }
    *n = cnt;
    return v;
}

typedef struct {
    float* maps;
    char *sidecar, *metrics;
    int nl, nh, T;
    char label[1100], metrics_path[1100];
} HtmlRun;

// PREFIX.npy (layers, heads, T, T) and its PREFIX.json sidecar; the sidecar's "shape" must agree.
static void load_prefix(HtmlRun* r, const char* prefix) {
    char path[1200], err[2048];
    NpyInfo info;
    snprintf(path, sizeof(path), "%s.npy", prefix);
    r->maps = npy_read_f32(path, &info, err, sizeof(err));
    if (!r->maps) usage_error("%s", err);
    if (info.ndim != 4 || info.shape[2] != info.shape[3] || info.shape[2] < 1 ||
        info.shape[2] > 65536 || info.shape[0] < 1 || info.shape[1] < 1)
        usage_error("%s: expected an array of shape (layers, heads, T, T)", path);
    r->nl = (int)info.shape[0];
    r->nh = (int)info.shape[1];
    r->T = (int)info.shape[2];
    size_t len;
    snprintf(path, sizeof(path), "%s.json", prefix);
    r->sidecar = util_read_file(path, &len, err, sizeof(err));
    if (!r->sidecar) usage_error("%s", err);
    long ns;
    long* sh = sidecar_ints(r->sidecar, "shape", &ns);
    int ok = ns == 4 && sh[0] == r->nl && sh[1] == r->nh && sh[2] == r->T && sh[3] == r->T;
    free(sh);
    if (!ok) {
        char msg[1400];
        snprintf(msg, sizeof(msg), "%s: its \"shape\" does not match %s.npy", path, prefix);
        usage_error("%s", msg);
    }
    snprintf(r->label, sizeof(r->label), "%s", prefix);
}

static void load_metrics(HtmlRun* r, const char* opt_value, const char* ckpt) {
    char err[2048];
    size_t len;
    if (opt_value && !strcmp(opt_value, "none")) return;
    if (!opt_value && !ckpt) return;
    if (opt_value) {
        snprintf(r->metrics_path, sizeof(r->metrics_path), "%s", opt_value);
    } else { // next to the checkpoint
        const char* slash = strrchr(ckpt, '/');
        int dl = slash ? (int)(slash - ckpt) : 1;
        snprintf(r->metrics_path, sizeof(r->metrics_path), "%.*s/metrics.jsonl", dl,
                 slash ? ckpt : ".");
        if (access(r->metrics_path, R_OK) != 0) return;
    }
    r->metrics = util_read_file(r->metrics_path, &len, err, sizeof(err));
    if (!r->metrics) usage_error("--metrics: %s", err);
}

static int html_main(int argc, char** argv) {
    DumpArgs d = {.layers_s = "all", .heads_s = "all"};
    const char *maps[2] = {NULL, NULL}, *ckpts[2] = {NULL, NULL}, *mfile[2] = {NULL, NULL};
    const char *out = NULL, *title = NULL, *max_s = "128";
    const CliOpt opts[] = {CLI_STR_OPT("--checkpoint", &ckpts[0]),
                           CLI_STR_OPT("--compare", &ckpts[1]),
                           CLI_STR_OPT("--maps", &maps[0]),
                           CLI_STR_OPT("--compare-maps", &maps[1]),
                           CLI_STR_OPT("--metrics", &mfile[0]),
                           CLI_STR_OPT("--compare-metrics", &mfile[1]),
                           CLI_STR_OPT("--text", &d.text),
                           CLI_STR_OPT("--tokens", &d.tokfile),
                           CLI_STR_OPT("--layers", &d.layers_s),
                           CLI_STR_OPT("--heads", &d.heads_s),
                           CLI_STR_OPT("--tokenizer-dir", &d.tokdir),
                           CLI_STR_OPT("--title", &title),
                           CLI_STR_OPT("--max-mib", &max_s),
                           CLI_STR_OPT("--out", &out),
                           CLI_STR_OPT("-o", &out)};
    const CliTool tool = {.usage = html_usage,
                          .unknown = "html: unknown argument '%s'",
                          .no_value = "html: %s needs a value",
                          .fail = usage_error};
    cli_parse_or_exit(argc, argv, 1, opts, CLI_COUNT(opts), &tool);
    if (!out || !*out) usage_error("%s", "html: --out FILE.html is required");
    if (!ckpts[0] == !maps[0]) usage_error("%s", "html: give one of --checkpoint and --maps");
    if (ckpts[1] && maps[1])
        usage_error("%s", "html: give at most one of --compare and --compare-maps");
    int any_ckpt = ckpts[0] || ckpts[1];
    if (any_ckpt && !d.text == !d.tokfile)
        usage_error("%s", "html: a checkpoint needs exactly one of --text TEXT and --tokens FILE");
    if (!any_ckpt && (d.text || d.tokfile))
        usage_error("%s", "html: --text/--tokens apply to checkpoints, not to --maps");
    const long max_mib = util_cli_long("--max-mib", max_s, 0, 1L << 20);
    const size_t max_bytes = (size_t)max_mib << 20;
    const int nruns = (ckpts[1] || maps[1]) ? 2 : 1;

    char tmpdir[] = "/tmp/attnmap-html-XXXXXX";
    if (any_ckpt && !mkdtemp(tmpdir)) die(1, "cannot create a temporary directory in /tmp");
    HtmlRun runs[2];
    memset(runs, 0, sizeof(runs));
    int *ids = NULL, T0 = 0;
    for (int k = 0; k < nruns; k++) {
        if (maps[k]) {
            load_prefix(&runs[k], maps[k]);
        } else {
            char prefix[1100];
            snprintf(prefix, sizeof(prefix), "%s/run%d", tmpdir, k);
            DumpArgs dk = d;
            dk.ckpt = ckpts[k];
            dk.out = prefix;
            dk.max_raw = max_bytes;
            if (ids) { // the second checkpoint runs on the first one's tokens
                dk.text = dk.tokfile = NULL;
                dk.ids = ids;
                dk.n_ids = T0;
            }
            int T, nl, nh;
            int* got = dump_maps(&dk, &T, &nl, &nh);
            if (!ids) {
                ids = got;
                T0 = T;
            } else {
                free(got);
            }
            load_prefix(&runs[k], prefix);
            char path[1200];
            snprintf(path, sizeof(path), "%s.npy", prefix);
            unlink(path);
            snprintf(path, sizeof(path), "%s.json", prefix);
            unlink(path);
            snprintf(runs[k].label, sizeof(runs[k].label), "%s", ckpts[k]);
        }
        load_metrics(&runs[k], mfile[k], ckpts[k]);
    }
    if (any_ckpt) rmdir(tmpdir);
    free(ids);
    if (nruns == 2) {
        long n0, n1;
        long* t0 = sidecar_ints(runs[0].sidecar, "tokens", &n0);
        long* t1 = sidecar_ints(runs[1].sidecar, "tokens", &n1);
        int same = runs[0].T == runs[1].T && n0 == runs[0].T && n1 == n0 &&
                   !memcmp(t0, t1, sizeof(long) * (size_t)n0);
        free(t0);
        free(t1);
        if (!same) usage_error("%s", "html: the two runs' maps are not over the same tokens");
    }
    ExplorerRun er[2];
    for (int k = 0; k < nruns; k++)
        er[k] = (ExplorerRun){.label = runs[k].label,
                              .sidecar = runs[k].sidecar,
                              .maps = runs[k].maps,
                              .nl = runs[k].nl,
                              .nh = runs[k].nh,
                              .T = runs[k].T,
                              .metrics = runs[k].metrics,
                              .metrics_path = runs[k].metrics_path};
    char deftitle[2400], err[2048];
    snprintf(deftitle, sizeof(deftitle), "attention: %s%s%s", runs[0].label,
             nruns == 2 ? " vs " : "", nruns == 2 ? runs[1].label : "");
    size_t written = 0, bound = explorer_page_bound(er, nruns);
    if (explorer_write(out, er, nruns, title ? title : deftitle, max_bytes, &written, err,
                       sizeof(err))) {
        if (strstr(err, "above the limit")) usage_error("html: %s", err);
        die(1, "%s", err);
    }
    printf("wrote %s: %.2f MiB (bound %.2f MiB), %d run%s, T=%d\n", out, written / 1048576.0,
           bound / 1048576.0, nruns, nruns == 2 ? "s" : "", runs[0].T);
    for (int k = 0; k < nruns; k++) {
        free(runs[k].maps);
        free(runs[k].sidecar);
        free(runs[k].metrics);
    }
    return 0;
}

int main(int argc, char** argv) {
    if (argc >= 2 && !strcmp(argv[1], "html")) return html_main(argc - 1, argv + 1);
    DumpArgs d = {.layers_s = "all", .heads_s = "all"};
    const CliOpt opts[] = {
        CLI_STR_OPT("--checkpoint", &d.ckpt),      CLI_STR_OPT("--text", &d.text),
        CLI_STR_OPT("--tokens", &d.tokfile),       CLI_STR_OPT("--layers", &d.layers_s),
        CLI_STR_OPT("--heads", &d.heads_s),        CLI_STR_OPT("--out", &d.out),
        CLI_STR_OPT("--tokenizer-dir", &d.tokdir), CLI_FLAG_OPT("--fp16", &d.fp16)};
    const CliTool tool = {.usage = usage,
                          .unknown = "unknown argument '%s'",
                          .no_value = "%s needs a value",
                          .fail = usage_error};
    cli_parse_or_exit(argc, argv, 1, opts, CLI_COUNT(opts), &tool);
    if (!d.ckpt) usage_error("%s", "--checkpoint PATH is required");
    if (!d.out || !*d.out) usage_error("%s", "--out PREFIX is required");
    if (!d.text == !d.tokfile)
        usage_error("%s", "give exactly one of --text TEXT and --tokens FILE");
    int T, nl, nh;
    int* ids = dump_maps(&d, &T, &nl, &nh);
    printf("wrote %s.npy (%d layers, %d heads, T=%d, %s) and %s.json\n", d.out, nl, nh, T,
           d.fp16 ? "float16" : "float32", d.out);
    free(ids);
    return 0;
}
