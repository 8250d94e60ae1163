// tools/probe.c: synthetic probe tasks (data/probes.h): write their shards, and score a
// checkpoint's greedy predictions on the answer positions.
//
//   ./probe gen TASK --out DIR [--n-train N] [--n-val N] [--seq-len T] [--seed S] [options]
//   ./probe eval TASK --checkpoint PATH --data DIR|FILE [--batches N] [--batch-size B]
//                [--threads N]
//   ./probe sinks TASK --checkpoint PATH --data DIR|FILE [--docs N] [--prefix T] [--eps E]
//                 [--triggers CHARS] [--batch-size B] [--threads N]
//
// eval prints a table per bucket and, last, one JSON line {"probe": TASK, "accuracy": ...}
// for scripts.
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/cli.h"
#include "common/util.h"
#include "common/matmul.h"
#include "data/probes.h"
#include "data/shard.h"
#include "model/metrics_sinks.h"
#include "model/open.h"

#define TASK_LIST "trigger, recall, passkey, copy, bb, ibb or mark"

static void usage(FILE* f) {
    fprintf(
        f,
        "usage: ./probe gen TASK --out DIR [--n-train N] [--n-val N] [--seq-len T] [--seed S]\n"
        "                        [--alphabet A] [--pairs P] [--trigger-every K]\n"
        "                        [--copy-len L] [--buckets start,middle,end]\n"
        "       ./probe eval TASK --checkpoint PATH --data DIR|FILE [--batches N]\n"
        "                         [--batch-size B] [--threads N]\n"
        "       ./probe sinks TASK --checkpoint PATH --data DIR|FILE [--docs N] [--prefix T]\n"
        "                          [--eps E] [--triggers CHARS] [--batch-size B] [--threads N]\n\n"
        "Tasks (byte vocabulary, vocab_size = 257, documents of T tokens starting with EOT):\n"
        "  trigger  symbol/answer pairs; after the trigger '!' the answer is the most\n"
        "           frequent preceding symbol, otherwise the no-op '.' (buckets trigger,\n"
        "           noop)\n"
        "  recall   P key-value pairs, '|', then queries answered by the key's value\n"
        "  passkey  filler with a needle '#K' in the start/middle/end third; '?' asks for K\n"
        "  copy     a random segment, '|', its copy\n"
        "  bb       Bigram-Backcopy: letters from a fixed bigram table; after a trigger\n"
        "           '0' '1' '2' the token before the trigger is copied (buckets backcopy,\n"
        "           bigram)\n"
        "  ibb      induction Bigram-Backcopy: as bb, but after a trigger the letter that\n"
        "           followed the previous occurrence of the letter before the trigger is\n"
        "           copied (x ... x y ... x 0 -> y; buckets induction, bigram)\n"
        "  mark     bigram letters with one mark '^' in the first half; after a query '?'\n"
        "           the letter before the mark (buckets recall, bigram)\n\n"
        "gen writes DIR/TASK_train_000000.bin and DIR/TASK_val_000000.bin.\n"
        "  --n-train N (20000)  --n-val N (500)  --seq-len T (128)  --seed S (1)\n"
        "  --alphabet A: symbols per slot (trigger 4, bb/ibb/mark 16, others 26)\n"
        "  --pairs P: recall pairs (8)\n"
        "  --trigger-every K: trigger (mark: query) probability 1/K (8)\n"
        "  --copy-len L: longest segment ((T-2)/2)\n"
        "  --buckets: passkey needle depths generated (start,middle,end)\n"
        "Train on them with tokenizer = byte, vocab_size = 257, seq_len = T.\n\n"
        "eval scores the argmax next-token prediction on the answer positions of the\n"
        "validation documents (DIR/TASK_val_*.bin, or FILE): accuracy overall and per bucket,\n"
        "then one JSON line. --batches N: at most N batches of B documents (default: all);\n"
        "--batch-size B (8).\n\n"
        "sinks scores the first-token sinks of the first N (--docs; default 128 or all when\n"
        "fewer, at least 100) validation documents\n"
        "(docs/diagnostics.md, \"Sink measures of the papers\"): Gu et al.'s sink rate (the\n"
        "fraction of (document, layer, head) whose mean weight on the first token over the\n"
        "query rows of the T-token prefix (--prefix, 64) exceeds E (--eps, 0.3); renormalised\n"
        "a/(sum a + 1e-8) and raw), and Guo et al.'s mean first-token weight over the query\n"
        "rows whose token is not a trigger (--triggers: the characters that are; default bb,\n"
        "ibb '012', trigger '!', mark '?'), per layer and head, then one JSON line.\n"
        "Exit codes: 0 ok, 1 I/O, 2 bad usage or input.\n");
}

// --buckets start,middle,end (a CLI_FN parser: the mask into *dst, an int).
static void parse_buckets(const char* what, const char* s, void* dst) {
    (void)what;
    int mask = 0;
    char buf[256];
    util_strlcpy(buf, s, sizeof(buf));
    for (char* tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int b = -1;
        for (int i = 0; i < 3; i++)
            if (strcmp(tok, probes_bucket_name(PROBE_TASK_PASSKEY, i)) == 0) b = i;
        if (b < 0) die(EXIT_USAGE, "--buckets: unknown bucket '%s' (start, middle, end)", tok);
        mask |= 1 << b;
    }
    if (!mask) die(EXIT_USAGE, "--buckets: no bucket given");
    *(int*)dst = mask;
}

// A command's options (common/cli.h), with probe's wording of the two errors (--help was
// handled by main).
static void parse_options(const char* cmd, int argc, char** argv, const CliOpt* opts, int n) {
    char unknown[96];
    snprintf(unknown, sizeof(unknown), "unknown option '%%s' for %s (./probe --help)", cmd);
    const CliTool tool = {
        .usage = usage, .unknown = unknown, .no_value = "%s needs a value (./probe --help)"};
    cli_parse_or_exit(argc, argv, 0, opts, n, &tool);
}

static int cmd_gen(int task, int argc, char** argv) {
    const char* out = NULL;
    long ntrain = 20000, nval = 500, T = 128, seed = 1;
    ProbeParams p;
    probes_defaults(&p, task, 128);
    int alphabet = -1, pairs = -1, every = -1, copy_len = -1, mask = -1;
    const CliOpt opts[] = {CLI_STR_OPT("--out", &out),
                           CLI_LONG_OPT("--n-train", &ntrain, 1, 100000000),
                           CLI_LONG_OPT("--n-val", &nval, 1, 100000000),
                           CLI_LONG_OPT("--seq-len", &T, 1, 65536),
                           CLI_LONG_OPT("--seed", &seed, 0, (double)LONG_MAX),
                           CLI_INT_OPT("--alphabet", &alphabet, 2, 26),
                           CLI_INT_OPT("--pairs", &pairs, 1, 26),
                           CLI_INT_OPT("--trigger-every", &every, 2, 1000000),
                           CLI_INT_OPT("--copy-len", &copy_len, 0, 65536),
                           CLI_FN_OPT("--buckets", parse_buckets, &mask)};
    parse_options("gen", argc, argv, opts, CLI_COUNT(opts));
    if (!out) die(EXIT_USAGE, "gen needs --out DIR");
    probes_defaults(&p, task, (int)T);
    if (alphabet > 0) p.alphabet = alphabet;
    if (pairs > 0) p.pairs = pairs;
    if (every > 0) p.trigger_every = every;
    if (copy_len >= 0) p.copy_len = copy_len;
    if (mask > 0) p.bucket_mask = mask;
    char err[2048];
    if (probes_validate(&p, err, sizeof(err)))
        die(EXIT_USAGE, "probe gen %s: %s", probes_task_name(task), err);
    if (probes_write(out, &p, (size_t)ntrain, (size_t)nval, (uint64_t)seed, err, sizeof(err)))
        die(1, "%s", err);
    printf("%s/%s_train_000000.bin: %ld documents of %ld tokens\n", out, probes_task_name(task),
           ntrain, T);
    printf("%s/%s_val_000000.bin: %ld documents of %ld tokens\n", out, probes_task_name(task), nval,
           T);
    printf("train with: tokenizer = byte, vocab_size = 257, seq_len = %ld, block_size >= %ld,\n"
           "            train_data = %s/%s_train_*.bin, val_data = %s/%s_val_*.bin\n",
           T, T, out, probes_task_name(task), out, probes_task_name(task));
    return 0;
}

// Concatenate the validation shards of `data` (a directory or a shard file).
static uint16_t* read_val(const char* data, int task, size_t* ntok, char* first, size_t cap) {
    struct stat st;
    char pattern[2048];
    glob_t g;
    memset(&g, 0, sizeof(g));
    if (stat(data, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(pattern, sizeof(pattern), "%s/%s_val_*.bin", data, probes_task_name(task));
        if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0)
            die(EXIT_USAGE, "%s: no validation shard %s (make one with ./probe gen %s --out %s)",
                data, pattern, probes_task_name(task), data);
    } else {
        if (glob(data, 0, NULL, &g) != 0 || g.gl_pathc == 0)
            die(EXIT_USAGE, "%s: no such shard", data);
    }
    uint16_t* all = NULL;
    size_t n = 0;
    util_strlcpy(first, g.gl_pathv[0], cap);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        Shard s;
        char err[2048];
        if (shard_read(&s, g.gl_pathv[i], err, sizeof(err))) die(EXIT_USAGE, "%s", err);
        all = reallocCheck(all, (n + s.ntok) * sizeof(uint16_t));
        memcpy(all + n, s.tokens, s.ntok * sizeof(uint16_t));
        n += s.ntok;
        shard_free(&s);
    }
    globfree(&g);
    *ntok = n;
    return all;
}

static int cmd_eval(int task, int argc, char** argv) {
    const char *ckpt = NULL, *data = NULL;
    long batches = 0, B = 8, threads = 0;
    const CliOpt opts[] = {CLI_STR_OPT("--checkpoint", &ckpt), CLI_STR_OPT("--data", &data),
                           CLI_LONG_OPT("--batches", &batches, 0, 1000000000),
                           CLI_LONG_OPT("--batch-size", &B, 1, 4096),
                           CLI_LONG_OPT("--threads", &threads, 0, 4096)};
    parse_options("eval", argc, argv, opts, CLI_COUNT(opts));
    if (!ckpt || !data) die(EXIT_USAGE, "eval needs --checkpoint PATH and --data DIR");
    if (threads > 0) omp_set_num_threads((int)threads);

    size_t ntok;
    char first[2048];
    uint16_t* tok = read_val(data, task, &ntok, first, sizeof(first));
    long T = probes_doc_len(tok, ntok);
    if (T < 4)
        die(EXIT_USAGE, "%s: not a %s probe shard (documents must start with EOT = %d)", first,
            probes_task_name(task), PROBE_EOT);
    size_t ndocs = ntok / (size_t)T;
    for (size_t d = 0; d < ndocs; d++)
        if (tok[d * (size_t)T] != PROBE_EOT)
            die(EXIT_USAGE,
                "%s: document %zu does not start with EOT at token %zu (documents "
                "must all be %ld tokens)",
                first, d, d * (size_t)T, T);
    if (batches > 0 && (size_t)(batches * B) < ndocs) ndocs = (size_t)(batches * B);

    GPT2 m;
    char err[2048];
    ModelOpen mo = {.run = NULL};
    if (model_open(&m, ckpt, &mo, err, sizeof(err))) die(EXIT_USAGE, "%s", err);
    const long step = mo.step;
    if (T > m.cfg.block_size)
        die(EXIT_USAGE, "%s: documents are %ld tokens, longer than the model's block_size = %d",
            first, T, m.cfg.block_size);
    if (m.cfg.vocab_size < PROBE_VOCAB)
        die(EXIT_USAGE, "%s: vocab_size = %d, the probe tasks need %d (tokenizer = byte)", ckpt,
            m.cfg.vocab_size, PROBE_VOCAB);
    gpt2_alloc_acts(&m, (int)B, (int)T, omp_get_max_threads());

    ProbeScore sc;
    memset(&sc, 0, sizeof(sc));
    int* inputs = mallocCheck(sizeof(int) * (size_t)(B * T));
    for (size_t d0 = 0; d0 < ndocs; d0 += (size_t)B) {
        int nb = (int)((ndocs - d0) < (size_t)B ? (ndocs - d0) : (size_t)B);
        for (size_t i = 0; i < (size_t)nb * (size_t)T; i++)
            inputs[i] = tok[d0 * (size_t)T + i];
        gpt2_forward(&m, inputs, NULL, nb, (int)T);
        for (int b = 0; b < nb; b++)
            probes_score_doc(&sc, task, tok + (d0 + (size_t)b) * (size_t)T, (int)T,
                             gpt2_logits(&m, b, 0), (size_t)m.cfg.padded_vocab, m.cfg.vocab_size);
    }

    const char* tn = probes_task_name(task);
    int nbk = probes_nbuckets(task);
    printf("# probe %s: %s (attention=%s, step %ld), %ld documents of %ld tokens from %s\n", tn,
           ckpt, m.attention, step, sc.docs, T, first);
    if (sc.malformed)
        printf("# %ld documents without the %s layout were skipped\n", sc.malformed, tn);
    printf("%-8s %-9s %s\n", "bucket", "accuracy", "correct/total");
    long ctot = 0, ntot = 0;
    for (int b = 0; b < nbk; b++) {
        ctot += sc.correct[b];
        ntot += sc.total[b];
        if (nbk > 1 && sc.total[b])
            printf("%-8s %-9.4f %ld/%ld\n", probes_bucket_name(task, b), probes_accuracy(&sc, b),
                   sc.correct[b], sc.total[b]);
    }
    if (ntot == 0) die(EXIT_USAGE, "%s: no answer positions found", first);
    printf("%-8s %-9.4f %ld/%ld\n", "all", probes_accuracy(&sc, -1), ctot, ntot);
    printf("{\"probe\": \"%s\", \"checkpoint\": \"%s\", \"attention\": \"%s\", \"step\": %ld, "
           "\"docs\": %ld, \"accuracy\": %.6f, \"correct\": %ld, \"total\": %ld",
           tn, ckpt, m.attention, step, sc.docs, probes_accuracy(&sc, -1), ctot, ntot);
    if (nbk > 1) {
        printf(", \"buckets\": {");
        int firstb = 1;
        for (int b = 0; b < nbk; b++) {
            if (!sc.total[b]) continue;
            printf("%s\"%s\": %.6f", firstb ? "" : ", ", probes_bucket_name(task, b),
                   probes_accuracy(&sc, b));
            firstb = 0;
        }
        printf("}");
    }
    printf("}\n");
    free(inputs);
    free(tok);
    gpt2_free(&m);
    return 0;
}

// A number in [0, 1] (NaN refused), into *dst (a double; a CLI_FN parser).
static void cli_unit(const char* what, const char* v, void* dst) {
    char* end = NULL;
    double x = strtod(v, &end);
    if (end == v || *end || !(x >= 0.0 && x <= 1.0))
        die(EXIT_USAGE, "%s: '%s' is not a number in [0, 1]", what, v);
    *(double*)dst = x;
}

// A JSON number, or null for NaN (no rows counted).
static void json_num(double x) {
    if (isfinite(x))
        printf("%.6f", x);
    else
        printf("null");
}

// The default trigger characters of a task for Guo's non-trigger rows.
static const char* default_triggers(int task) {
    if (task == PROBE_TASK_BB || task == PROBE_TASK_IBB) return "012";
    if (task == PROBE_TASK_TRIGGER) return "!";
    if (task == PROBE_TASK_MARK) return "?";
    return "";
}

// Run the model on documents d0..d0+nb of length T (their first T tokens) and add every head's
// maps: Gu's measure over the first Ts rows when gu, Guo's rows otherwise.
static void sinks_batch(GPT2* m, SinkScores* sc, const uint16_t* tok, long Tdoc, size_t d0, int nb,
                        int T, int gu, const unsigned char* is_trig, int* inputs,
                        unsigned char* mask) {
    for (int b = 0; b < nb; b++)
        for (int t = 0; t < T; t++)
            inputs[b * T + t] = tok[(d0 + (size_t)b) * (size_t)Tdoc + (size_t)t];
    gpt2_forward(m, inputs, NULL, nb, T);
    const int L = m->cfg.n_layer, NH = m->cfg.n_head;
    for (int l = 0; l < L; l++) {
        const float* att = m->att + (size_t)l * nb * NH * T * T;
        for (int b = 0; b < nb; b++) {
            for (int t = 0; t < T; t++)
                mask[t] = !is_trig[inputs[b * T + t] & 0xffff];
            for (int h = 0; h < NH; h++) {
                const float* A = att + ((size_t)b * NH + h) * T * T;
                if (gu)
                    metrics_sinks_add_gu(sc, l, h, (int)(d0 + (size_t)b), A, T, T);
                else
                    metrics_sinks_add_rows(sc, l, h, A, T, mask);
            }
        }
    }
}

static int cmd_sinks(int task, int argc, char** argv) {
    const char *ckpt = NULL, *data = NULL, *trig = default_triggers(task);
    long ndocs_want = 0, prefix = METRICS_GU_T, B = 8, threads = 0;
    double eps = 0.3;
    const CliOpt opts[] = {CLI_STR_OPT("--checkpoint", &ckpt),
                           CLI_STR_OPT("--data", &data),
                           CLI_LONG_OPT("--docs", &ndocs_want, 100, 1000000),
                           CLI_LONG_OPT("--prefix", &prefix, 1, 65536),
                           CLI_FN_OPT("--eps", cli_unit, &eps),
                           CLI_STR_OPT("--triggers", &trig),
                           CLI_LONG_OPT("--batch-size", &B, 1, 4096),
                           CLI_LONG_OPT("--threads", &threads, 0, 4096)};
    parse_options("sinks", argc, argv, opts, CLI_COUNT(opts));
    if (!ckpt || !data) die(EXIT_USAGE, "sinks needs --checkpoint PATH and --data DIR");
    if (threads > 0) omp_set_num_threads((int)threads);
    unsigned char is_trig[65536];
    memset(is_trig, 0, sizeof(is_trig));
    for (const char* c = trig; *c; c++)
        is_trig[(unsigned char)*c] = 1;

    size_t ntok;
    char first[2048];
    uint16_t* tok = read_val(data, task, &ntok, first, sizeof(first));
    long T = probes_doc_len(tok, ntok);
    if (T < 2)
        die(EXIT_USAGE, "%s: not a probe shard (documents must start with EOT = %d)", first,
            PROBE_EOT);
    size_t ndocs = ntok / (size_t)T;
    for (size_t d = 0; d < ndocs; d++)
        if (tok[d * (size_t)T] != PROBE_EOT)
            die(EXIT_USAGE,
                "%s: document %zu does not start with EOT (documents must all be %ld "
                "tokens)",
                first, d, T);
    // default: the first 128 documents, or all of them when there are 100 to 127
    if (ndocs_want == 0) ndocs_want = ndocs < 128 ? (long)ndocs : 128;
    if (ndocs < 100 || ndocs < (size_t)ndocs_want)
        die(EXIT_USAGE, "%s: %zu documents, %ld wanted (Gu et al.'s measure needs at least 100)",
            first, ndocs, ndocs_want < 100 ? 100 : ndocs_want);
    ndocs = (size_t)ndocs_want;
    const int Ts = (int)(prefix < T ? prefix : T);

    GPT2 m;
    char err[2048];
    ModelOpen mo = {.run = NULL};
    if (model_open(&m, ckpt, &mo, err, sizeof(err))) die(EXIT_USAGE, "%s", err);
    if (T > m.cfg.block_size)
        die(EXIT_USAGE, "%s: documents are %ld tokens, longer than the model's block_size = %d",
            first, T, m.cfg.block_size);
    if (m.cfg.vocab_size < PROBE_VOCAB)
        die(EXIT_USAGE, "%s: vocab_size = %d, the probe tasks need %d (tokenizer = byte)", ckpt,
            m.cfg.vocab_size, PROBE_VOCAB);
    gpt2_alloc_acts(&m, (int)B, (int)T, omp_get_max_threads());
    const int L = m.cfg.n_layer, NH = m.cfg.n_head;
    SinkScores sc;
    metrics_sinks_init(&sc, L, NH, (int)ndocs, (float)eps);
    int* inputs = mallocCheck(sizeof(int) * (size_t)(B * T));
    unsigned char* mask = mallocCheck((size_t)T);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t d0 = 0; d0 < ndocs; d0 += (size_t)B) {
            int nb = (int)((ndocs - d0) < (size_t)B ? (ndocs - d0) : (size_t)B);
            sinks_batch(&m, &sc, tok, T, d0, nb, pass == 0 ? Ts : (int)T, pass == 0, is_trig,
                        inputs, mask);
        }
    }
    metrics_sinks_finish(&sc);

    printf("# probe sinks: %s (attention=%s, step %ld), %zu documents of %ld tokens from %s\n",
           ckpt, m.attention, mo.step, ndocs, T, first);
    printf("# Gu sink rate (eps %.3g, first %d tokens): renormalised %.4f, raw %.4f\n", eps, Ts,
           sc.rate_renorm, sc.rate_raw);
    printf("# Guo first-token weight over non-trigger rows (triggers \"%s\"), all %ld tokens\n",
           trig, T);
    printf("%-5s %-4s %-9s %-9s %-9s %-11s %-9s\n", "layer", "head", "gu_rate", "gu_alpha0",
           "nontrig", "nontrig_raw", "all_rows");
    for (int l = 0; l < L; l++) {
        for (int h = 0; h < NH; h++) {
            const int i = l * NH + h;
            const double* g = sc.gu_renorm + (size_t)i * ndocs;
            double mean = 0.0;
            long above = 0;
            for (size_t d = 0; d < ndocs; d++) {
                mean += g[d];
                above += g[d] > eps;
            }
            printf("%-5d %-4d %-9.4f %-9.4f %-9.4f %-11.4f %-9.4f\n", l, h,
                   (double)above / (double)ndocs, mean / (double)ndocs,
                   metrics_sinks_mean(sc.nt_renorm, sc.nt_n, i),
                   metrics_sinks_mean(sc.nt_raw, sc.nt_n, i),
                   metrics_sinks_mean(sc.all_renorm, sc.all_n, i));
        }
    }
    printf("{\"probe\": \"sinks\", \"checkpoint\": \"%s\", \"attention\": \"%s\", \"step\": %ld, "
           "\"docs\": %zu, \"T\": %ld, \"prefix\": %d, \"eps\": %.6g, \"triggers\": \"%s\", "
           "\"sink_rate_gu\": ",
           ckpt, m.attention, mo.step, ndocs, T, Ts, eps, trig);
    json_num(sc.rate_renorm);
    printf(", \"sink_rate_gu_raw\": ");
    json_num(sc.rate_raw);
    printf(", \"nontrig_a0_max\": ");
    json_num(sc.nt_max);
    printf(", \"nontrig_a0_max_layer\": %d, \"nontrig_a0_max_head\": %d, \"heads\": [",
           sc.nt_max_layer, sc.nt_max_head);
    for (int i = 0; i < L * NH; i++) {
        const double* gr = sc.gu_renorm + (size_t)i * ndocs;
        const double* gw = sc.gu_raw + (size_t)i * ndocs;
        long ar = 0, aw = 0;
        for (size_t d = 0; d < ndocs; d++) {
            ar += gr[d] > eps;
            aw += gw[d] > eps;
        }
        printf("%s{\"layer\": %d, \"head\": %d, \"gu_rate\": %.6f, \"gu_rate_raw\": %.6f",
               i ? ", " : "", i / NH, i % NH, (double)ar / (double)ndocs,
               (double)aw / (double)ndocs);
        double mr = 0.0, mw = 0.0; // Gu's importance, mean over the documents
        for (size_t d = 0; d < ndocs; d++) {
            mr += gr[d];
            mw += gw[d];
        }
        const char* names[6] = {"gu_alpha0",      "gu_alpha0_raw", "nontrig_a0",
                                "nontrig_a0_raw", "all_a0",        "all_a0_raw"};
        const double vals[6] = {mr / (double)ndocs,
                                mw / (double)ndocs,
                                metrics_sinks_mean(sc.nt_renorm, sc.nt_n, i),
                                metrics_sinks_mean(sc.nt_raw, sc.nt_n, i),
                                metrics_sinks_mean(sc.all_renorm, sc.all_n, i),
                                metrics_sinks_mean(sc.all_raw, sc.all_n, i)};
        for (int k = 0; k < 6; k++) {
            printf(", \"%s\": ", names[k]);
            json_num(vals[k]);
        }
        printf("}");
    }
    printf("]}\n");
    metrics_sinks_free(&sc);
    free(mask);
    free(inputs);
    free(tok);
    gpt2_free(&m);
    return 0;
}

int main(int argc, char** argv) {
    mm_init_threads();
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    if (strcmp(argv[1], "gen") && strcmp(argv[1], "eval") && strcmp(argv[1], "sinks"))
        die(EXIT_USAGE, "unknown command '%s': gen, eval or sinks (./probe --help)", argv[1]);
    if (argc < 3) die(EXIT_USAGE, "%s needs a task: %s", argv[1], TASK_LIST);
    int task = probes_task_from_name(argv[2]);
    if (task < 0) die(EXIT_USAGE, "unknown task '%s': %s", argv[2], TASK_LIST);
    if (!strcmp(argv[1], "gen")) return cmd_gen(task, argc - 3, argv + 3);
    if (!strcmp(argv[1], "sinks")) return cmd_sinks(task, argc - 3, argv + 3);
    return cmd_eval(task, argc - 3, argv + 3);
}
