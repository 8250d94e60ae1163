// tools/evaluate.c: long-context evaluation of an attnlab checkpoint.
//
//   ./evaluate --checkpoint PATH --data GLOB [--lengths 1,2,4 | --seq-len N,...] [--batches N]
//              [--batch-size B] [--threads N]
//     Validation loss at multiples of the training length (seq_len from the checkpoint's saved
//     config), or at lengths in tokens with --seq-len: one line per length with the mean loss
//     over all positions, over the positions inside the training length (t < seq_len) and over
//     the positions beyond it (t >= seq_len; "-" when there are none). Each length reads its
//     first --batches batches of B sequences from the start of the data, in order.
//     Beside the loss in nats per token, the bits per byte of the text evaluated (over all
//     positions: the targets' bytes, decoded with the checkpoint's tokenizer, end-of-text counting
//     0; "-" without the tokenizer files), so byte-level and BPE models compare.
//   ./evaluate --checkpoint PATH --passkey [--length N] [--trials N] [--seed S] [--threads N]
//     Passkey retrieval: accuracy of recalling a one-token key placed at the start, middle or
//     end of a long filler context.
//   ./evaluate --checkpoint PATH --multiple-choice FILE [--examples N] [--window N] [--threads N]
//     Multiple-choice accuracy (HellaSwag: llm.c's evaluation file or HellaSwag's JSONL, read by
//     data/mc.h, tokenised with the checkpoint's tokenizer; scored by model/mc_eval.h): acc,
//     acc_norm (llm.c: mean log-likelihood per token) and acc_norm_bytes (lm-evaluation-harness:
//     per byte of the ending) over the first N examples (default all), the context cut from the
//     left to a window of N tokens (default block_size). docs/evaluation.md.
//   ./evaluate --checkpoint PATH --stream --data GLOB [--window W] [--sinks S | --recompute]
//              [--length N] [--bucket N] [--csv FILE] [--threads N]
//     Streaming evaluation (model/stream.h, docs/streaming.md): the first N tokens of the data
//     (default 4 x block_size) run one token at a time through a cache of the last W tokens
//     (default block_size - S), with the first S tokens kept as attention sinks (StreamingLLM),
//     or with --recompute a full forward over the last W tokens per position. The mean next-token
//     loss and perplexity over the whole text, with bits per byte, and per bucket of N positions
//     (default 64) on stdout and in FILE as CSV.
//
// The training length is the checkpoint's seq_len; an llm.c file or an hf:DIR has none, and its
// block_size stands in. A run that evaluates no length at all (every one longer than block_size,
// or the data unreadable) exits 2.
// Lengths above block_size are refused: the model's position tables are sized by block_size
// (with learned positions there are only block_size rows, and rows beyond the training length
// are never trained). To evaluate longer contexts, train with pos_encoding = rope, alibi or
// none and block_size >= the longest length.
//
// Passkey design (the sequences are built by data/passkey.c). With the checkpoint's tokenizer
// (tokenizer / tokenizer_dir in its config):
//   filler  "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back
//            again. " repeated
//   needle  "The pass key is D. Remember it. D is the pass key. "   (D a random digit 0-9)
//   query   "What is the pass key? The pass key is"
// The needle is inserted at a sentence boundary of the filler, at a depth drawn uniformly in the
// bucket (start [0, 1/3), middle [1/3, 2/3), end [2/3, 1) of the filler), the whole sequence is
// `--length` tokens (default: the training length), and the prediction is the argmax of the
// next-token logits after the query, over the whole vocabulary; it is correct when it is the
// token of " D" (the digit with its leading space, one token in GPT-2 BPE) or "D" for the byte
// tokenizer. Without a tokenizer, token ids stand in: filler ids drawn uniformly from
// [20, vocab_size), needle = [1 2 3 K 4] with K in 10..19, query = [1 2 3]. Chance is about
// 1/10 for a model that has learned to answer with a digit. Reported per bucket: accuracy and the
// mean log-probability of the key token. Deterministic given --seed.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cli.h"
#include "common/config.h"
#include "common/matmul.h"
#include "common/rng.h"
#include "common/util.h"
#include "data/dataloader.h"
#include "data/mc.h"
#include "data/passkey.h"
#include "data/tokenizer.h"
#include "model/gpt2.h"
#include "model/mc_eval.h"
#include "model/open.h"
#include "model/stream.h"

static void usage(FILE* f) {
    fprintf(f,
            "usage: ./evaluate --checkpoint PATH --data GLOB [--lengths 1,2,4 | --seq-len N,...]\n"
            "                  [--batches N] [--batch-size B] [--threads N]\n"
            "       ./evaluate --checkpoint PATH --passkey [--length N] [--trials N] [--seed S]\n"
            "                  [--threads N]\n"
            "       ./evaluate --checkpoint PATH --multiple-choice FILE [--examples N]\n"
            "                  [--window N] [--threads N]\n"
            "       ./evaluate --checkpoint PATH --stream --data GLOB [--window W]\n"
            "                  [--sinks S | --recompute] [--length N] [--bucket N] [--csv FILE]\n"
            "                  [--threads N]\n\n"
            "Loss at multiples of the training length (seq_len of the checkpoint; block_size for\n"
            "llmc: and hf: models) or at lengths in tokens (--seq-len), reported over all\n"
            "positions, inside the training length and beyond it, with the bits per byte of the\n"
            "text; a passkey retrieval probe (accuracy by needle position: start, middle, end);\n"
            "multiple-choice accuracy (HellaSwag: llm.c's evaluation file or its JSONL): acc,\n"
            "acc_norm (per token, llm.c) and acc_norm_bytes (per byte, lm-evaluation-harness's\n"
            "acc_norm); streaming evaluation (--stream: the first --length tokens one at a time\n"
            "through a cache of the last W tokens, plus the first S with --sinks, or a full\n"
            "forward over the last W per position with --recompute; W + S <= block_size): loss\n"
            "and perplexity over the text and per --bucket of positions, --csv FILE. Lengths\n"
            "must be <= the checkpoint's block_size. Exit codes: 0 ok, 1 I/O, 2 bad usage or\n"
            "input (also when no length could be evaluated).\n");
}

// Build the model saved in `path` (its config, attention and parameters).
static void load_model(GPT2* m, Config* cfg, const char* path) {
    char err[2048];
    ModelOpen mo = {.run = NULL};
    if (model_open(m, path, &mo, err, sizeof(err))) die(EXIT_USAGE, "%s", err);
    *cfg = mo.cfg;
    // an llm.c file or a Hugging Face directory has no training length: its block_size stands in
    if (mo.kind != MODEL_SRC_ATTNLAB) cfg->seq_len = m->cfg.block_size;
    m->step = -1;
}

// ---------------------------------------------------------------------------------------------
// loss at several lengths

// Lengths to evaluate: factors of the training length (--lengths 1,2,4) or, with tokens set,
// lengths in tokens (--seq-len 96,192). Returns the count written to len[0..16).
static int parse_lengths(int* len, const char* list, int tokens, int T0) {
    const char* opt = tokens ? "--seq-len" : "--lengths";
    int n = 0;
    char buf[256];
    util_strlcpy(buf, list, sizeof(buf));
    char* save = NULL;
    for (char* tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == 16) die(EXIT_USAGE, "%s: at most 16 values", opt);
        len[n++] = tokens ? (int)util_cli_long(opt, tok, 1, 1 << 20)
                          : T0 * (int)util_cli_long(opt, tok, 1, 1024);
    }
    if (n == 0) die(EXIT_USAGE, "%s: give a list such as %s", opt, tokens ? "96,192" : "1,2,4");
    return n;
}

// The number of lengths evaluated (main exits 2 when it is 0).
static int eval_lengths(GPT2* m, const Config* cfg, const char* glob, const char* lengths,
                        int tokens, int batches, int B, int nthreads) {
    const int T0 = cfg->seq_len, maxT = m->cfg.block_size;
    int lens[16];
    const int nf = parse_lengths(lens, lengths, tokens, T0);
    int Tmax = 0;
    for (int i = 0; i < nf; i++)
        if (lens[i] <= maxT && lens[i] > Tmax) Tmax = lens[i];
    const char* pe = cfg->pos_encoding;
    printf("# checkpoint: attention=%s pos_encoding=%s seq_len=%d block_size=%d; %d batches of "
           "%d sequences per length\n",
           cfg->attention, pe, T0, maxT, batches, B);
    char terr[512];
    Tokenizer* tok = tokenizer_load(cfg->tokenizer, cfg->tokenizer_dir, terr, sizeof(terr));
    if (!tok) printf("# no bits per byte: %s\n", terr);
    printf("%-8s %-7s %-10s %-12s %-12s %-8s %-8s %s\n", "length", "factor", "val_loss",
           "loss_t<train", "loss_t>=train", "tokens", "bpb", "bytes");
    if (Tmax > 0) gpt2_alloc_acts(m, B, Tmax, nthreads);
    int* in = mallocCheck(sizeof(int) * (size_t)B * (Tmax > 0 ? Tmax : 1));
    int* tg = mallocCheck(sizeof(int) * (size_t)B * (Tmax > 0 ? Tmax : 1));
    int done = 0;
    for (int i = 0; i < nf; i++) {
        const int T = lens[i];
        char fs[16];
        if (T % T0 == 0)
            snprintf(fs, sizeof(fs), "%dx", T / T0);
        else
            snprintf(fs, sizeof(fs), "%.2fx", (double)T / T0);
        if (T > maxT) {
            printf("%-8d %-7s not evaluated: longer than block_size = %d%s\n", T, fs, maxT,
                   attn_pos_from_name(pe) == ATTN_POS_LEARNED
                       ? " (learned positions have block_size rows; retrain with pos_encoding = "
                         "rope, alibi or none and a larger block_size)"
                       : " (retrain with a larger block_size)");
            continue;
        }
        DataLoader dl;
        char err[2048];
        if (dataloader_init(&dl, glob, B, T, 0, 0, err, sizeof(err))) {
            printf("%-8d %-7s not evaluated: %s\n", T, fs, err);
            continue;
        }
        double all = 0, in_train = 0, beyond = 0;
        size_t n_in = 0, n_out = 0;
        long long bytes = 0; // of the targets' text; -1: unknown
        for (int k = 0; k < batches; k++) {
            dataloader_next(&dl, in, tg);
            if (tokens_check_range(in, (size_t)B * T, m->cfg.vocab_size, glob, err, sizeof(err)) ||
                tokens_check_range(tg, (size_t)B * T, m->cfg.vocab_size, glob, err, sizeof(err)))
                die(EXIT_USAGE, "%s", err);
            gpt2_forward(m, in, tg, B, T);
            const long long nb = tok ? mc_text_bytes(tok, tg, (size_t)B * T) : -1;
            bytes = bytes < 0 || nb < 0 ? -1 : bytes + nb;
            for (int b = 0; b < B; b++) {
                for (int t = 0; t < T; t++) {
                    double l = m->losses[(size_t)b * T + t];
                    all += l;
                    if (t < T0) {
                        in_train += l;
                        n_in++;
                    } else {
                        beyond += l;
                        n_out++;
                    }
                }
            }
        }
        dataloader_free(&dl);
        const double ntot = (double)(n_in + n_out);
        char bey[32];
        if (n_out)
            snprintf(bey, sizeof(bey), "%.4f", beyond / (double)n_out);
        else
            snprintf(bey, sizeof(bey), "-");
        char bpb[32] = "-", nbytes[32] = "-";
        if (bytes > 0) {
            snprintf(bpb, sizeof(bpb), "%.4f", mc_bits_per_byte(all / ntot, ntot, (double)bytes));
            snprintf(nbytes, sizeof(nbytes), "%lld", bytes);
        }
        printf("%-8d %-7s %-10.4f %-12.4f %-12s %-8zu %-8s %s\n", T, fs, all / ntot,
               in_train / (double)n_in, bey, n_in + n_out, bpb, nbytes);
        fflush(stdout);
        done++;
    }
    free(in);
    free(tg);
    if (tok) tokenizer_free(tok);
    return done;
}

// ---------------------------------------------------------------------------------------------
// passkey retrieval

static void eval_passkey(GPT2* m, const Config* cfg, int T, int trials, uint64_t seed,
                         int nthreads) {
    const int V = m->cfg.vocab_size;
    if (T > m->cfg.block_size)
        die(EXIT_USAGE, "--length %d is longer than the checkpoint's block_size = %d%s", T,
            m->cfg.block_size,
            attn_pos_from_name(cfg->pos_encoding) == ATTN_POS_LEARNED
                ? " (learned positions have block_size rows)"
                : "");
    Passkey p;
    char err[512];
    Tokenizer* tok = tokenizer_load(cfg->tokenizer, cfg->tokenizer_dir, err, sizeof(err));
    const char* mode = "token ids";
    if (tok && tokenizer_vocab_size(tok) <= V && passkey_from_tokenizer(&p, tok) == 0)
        mode = "text";
    else
        passkey_from_ids(&p);
    if (V < 32) die(EXIT_USAGE, "passkey probe needs vocab_size >= 32 (model has %d)", V);
    gpt2_alloc_acts(m, 1, T, nthreads);
    int* seq = mallocCheck(sizeof(int) * (size_t)T);
    Rng r;
    rng_seed(&r, seed);
    static const char* names[3] = {"start", "middle", "end"};
    printf("# passkey: length %d (training length %d), %d trials per bucket, %s mode, seed %llu\n",
           T, cfg->seq_len, trials, mode, (unsigned long long)seed);
    printf("%-8s %-9s %-10s %s\n", "bucket", "accuracy", "mean_logp", "correct/trials");
    for (int bk = 0; bk < 3; bk++) {
        int correct = 0;
        double lp = 0;
        for (int i = 0; i < trials; i++) {
            int key = p.keys[rng_below(&r, 10)];
            double depth = (bk + rng_uniform_d(&r)) / 3.0;
            int at = passkey_build(seq, T, &p, key, depth, V, &r);
            if (at < 0) die(EXIT_USAGE, "--length %d is too short for the passkey pattern", T);
            gpt2_forward(m, seq, NULL, 1, at + 1);
            const float* lg = gpt2_logits(m, 0, at);
            int best = 0;
            double mx = -INFINITY;
            for (int v = 0; v < V; v++)
                if (lg[v] > mx) {
                    mx = lg[v];
                    best = v;
                }
            double s = 0;
            for (int v = 0; v < V; v++)
                s += exp((double)lg[v] - mx);
            lp += (double)lg[key] - mx - log(s);
            correct += best == key;
        }
        printf("%-8s %-9.3f %-10.4f %d/%d\n", names[bk], (double)correct / trials, lp / trials,
               correct, trials);
    }
    free(seq);
    passkey_free(&p);
    if (tok) tokenizer_free(tok);
}

// ---------------------------------------------------------------------------------------------
// multiple choice (data/mc.h reads and tallies, model/mc_eval.h scores)

static void eval_mc(GPT2* m, const Config* cfg, const char* path, int limit, int window,
                    int nthreads) {
    char terr[512], err[2048];
    Tokenizer* tok = tokenizer_load(cfg->tokenizer, cfg->tokenizer_dir, terr, sizeof(terr));
    McSet s;
    if (mc_load(&s, path, tok, m->cfg.vocab_size, err, sizeof(err)))
        die(EXIT_USAGE, "%s%s%s", err, tok ? "" : "; the tokenizer: ", tok ? "" : terr);
    const int W = window > 0 && window < m->cfg.block_size ? window : m->cfg.block_size;
    if (mc_check_window(&s, limit, W, err, sizeof(err))) die(EXIT_USAGE, "%s", err);
    gpt2_alloc_acts(m, mc_most_completions(&s, limit), mc_longest_row(&s, limit, W), nthreads);
    McResult r = {.ll = NULL};
    if (mc_run(&s, limit, W, mc_eval_score, m, &r, err, sizeof(err))) die(EXIT_USAGE, "%s", err);
    printf("# multiple choice: %s (%s, tokenizer %s), %d of %d examples, window %d tokens, %d "
           "with the context cut from the left\n",
           path, s.format, tok ? tokenizer_kind(tok) : "not loaded", r.n, s.n, W, r.truncated);
    printf("%-15s %-7s %-9s %s\n", "metric", "value", "correct", "prediction");
    static const char* names[3] = {"acc", "acc_norm", "acc_norm_bytes"};
    static const char* rules[3] = {
        "argmax of the summed log-likelihood (llm.c acc, lm-eval acc)",
        "argmax of the mean log-likelihood per token (llm.c acc_norm)",
        "argmax of the log-likelihood per byte of the ending (lm-eval acc_norm)"};
    for (int k = 0; k < 3; k++) {
        if (k == 2 && !r.have_bytes) {
            printf("%-15s %-7s %-9s %s (no tokenizer to decode the completions: %s)\n", names[k],
                   "-", "-", rules[k], terr);
            continue;
        }
        char cnt[32];
        snprintf(cnt, sizeof(cnt), "%d/%d", r.correct[k], r.n);
        printf("%-15s %-7.4f %-9s %s\n", names[k], mc_accuracy(&r, k), cnt, rules[k]);
    }
    mc_free(&s);
    if (tok) tokenizer_free(tok);
}

// ---------------------------------------------------------------------------------------------
// streaming (model/stream.h)

static void eval_stream(GPT2* m, const Config* cfg, const char* glob, const StreamPolicy* p, int N,
                        int bucket, const char* csv, int nthreads) {
    char err[2048];
    if (stream_check(m, p, err, sizeof(err))) die(EXIT_USAGE, "%s", err);
    if (csv) { // refuse an unwritable file before the long run (written again at the end)
        FILE* f = fopen(csv, "w");
        if (!f || fclose(f)) die(EXIT_FAILURE, "--csv %s: cannot open for writing", csv);
    }
    DataLoader dl;
    if (dataloader_init(&dl, glob, 1, N, 0, 0, err, sizeof(err))) die(EXIT_USAGE, "%s", err);
    int* tokens = mallocCheck(sizeof(int) * ((size_t)N + 1));
    int* tg = mallocCheck(sizeof(int) * (size_t)N);
    dataloader_next(&dl, tokens, tg);
    dataloader_free(&dl);
    tokens[N] = tg[N - 1];
    if (tokens_check_range(tokens, (size_t)N + 1, m->cfg.vocab_size, glob, err, sizeof(err)))
        die(EXIT_USAGE, "%s", err);
    float* losses = mallocCheck(sizeof(float) * (size_t)N);
    gpt2_alloc_acts(m, 1, p->window + p->sinks, nthreads);
    stream_losses(m, p, tokens, N + 1, losses);
    char terr[512];
    Tokenizer* tok = tokenizer_load(cfg->tokenizer, cfg->tokenizer_dir, terr, sizeof(terr));
    const long long bytes = tok ? mc_text_bytes(tok, tokens + 1, (size_t)N) : -1;
    double all = 0;
    for (int i = 0; i < N; i++)
        all += losses[i];
    all /= N;
    char bpb[32] = "-";
    if (bytes > 0) snprintf(bpb, sizeof(bpb), "%.4f", mc_bits_per_byte(all, N, (double)bytes));
    printf("# stream: policy %s, window %d, sinks %d (positions: indices in the %s); %d tokens of "
           "%s; attention=%s pos_encoding=%s block_size=%d\n",
           stream_policy_name(p), p->window, p->sinks, p->recompute ? "window" : "cache", N, glob,
           cfg->attention, cfg->pos_encoding, m->cfg.block_size);
    if (!tok) printf("# no bits per byte: %s\n", terr);
    printf("loss %.4f perplexity %.4f tokens %d bpb %s\n", all, exp(all), N, bpb);
    stream_print_buckets(stdout, losses, N, bucket);
    if (csv) {
        if (stream_write_csv(csv, p, losses, N, bucket, err, sizeof(err)))
            die(EXIT_FAILURE, "--csv %s", err);
        printf("# wrote %s\n", csv);
    }
    if (tok) tokenizer_free(tok);
    free(losses);
    free(tokens);
    free(tg);
}

// --lengths (factors of the training length) and --seq-len (tokens) fill one list; the later wins.
typedef struct {
    const char* list;
    int tokens;
} Lengths;
static void set_lengths(const char* name, const char* value, void* dst) {
    Lengths* l = dst;
    l->list = value;
    l->tokens = !strcmp(name, "--seq-len");
}

int main(int argc, char** argv) {
    const char *ckpt = NULL, *data = NULL, *mc = NULL;
    int mc_examples = 0, mc_window = 0;
    int batches = 4, B = 0, threads = 0, passkey = 0, plen = 0, trials = 20;
    int seed = 1234;
    int stream = 0, sinks = 0, recompute = 0, bucket = 64;
    const char* csv = NULL;
    Lengths len = {"1,2,4", 0};
    const CliOpt opts[] = {CLI_FLAG_OPT("--passkey", &passkey),
                           CLI_STR_OPT("--multiple-choice", &mc),
                           CLI_INT_OPT("--examples", &mc_examples, 1, 1 << 30),
                           CLI_INT_OPT("--window", &mc_window, 1, 1 << 20),
                           CLI_STR_OPT("--checkpoint", &ckpt),
                           CLI_STR_OPT("--data", &data),
                           CLI_FN_OPT("--lengths", set_lengths, &len),
                           CLI_FN_OPT("--seq-len", set_lengths, &len),
                           CLI_INT_OPT("--batches", &batches, 1, 1000000),
                           CLI_INT_OPT("--batch-size", &B, 1, 4096),
                           CLI_INT_OPT("--threads", &threads, 1, 1024),
                           CLI_INT_OPT("--length", &plen, 8, 1 << 20),
                           CLI_INT_OPT("--trials", &trials, 1, 1000000),
                           CLI_INT_OPT("--seed", &seed, 0, 2147483647),
                           CLI_FLAG_OPT("--stream", &stream),
                           CLI_INT_OPT("--sinks", &sinks, 0, 1 << 20),
                           CLI_FLAG_OPT("--recompute", &recompute),
                           CLI_INT_OPT("--bucket", &bucket, 1, 1 << 30),
                           CLI_STR_OPT("--csv", &csv)};
    const CliTool tool = {.usage = usage,
                          .unknown = "unknown or incomplete argument '%s'",
                          .no_value = "unknown or incomplete argument '%s'",
                          .usage_first = 1};
    cli_parse_or_exit(argc, argv, 1, opts, CLI_COUNT(opts), &tool);
    const char* lengths = len.list;
    const int len_tokens = len.tokens;
    if (!ckpt) {
        usage(stderr);
        die(EXIT_USAGE, "--checkpoint is required");
    }
    if (!passkey && !data && !mc) {
        usage(stderr);
        die(EXIT_USAGE, "give --data GLOB (loss by length), --passkey or --multiple-choice FILE");
    }
    if (mc && (passkey || data)) {
        usage(stderr);
        die(EXIT_USAGE, "--multiple-choice runs alone: not with --data or --passkey");
    }
    if (stream && (passkey || mc || !data)) {
        usage(stderr);
        die(EXIT_USAGE, "--stream reads --data GLOB and runs alone: not with --passkey or "
                        "--multiple-choice");
    }
    if (!stream && (sinks || recompute || csv)) {
        usage(stderr);
        die(EXIT_USAGE, "--sinks, --recompute and --csv belong to --stream");
    }
    mm_init_threads();
    if (threads <= 0) threads = omp_get_max_threads();
    omp_set_num_threads(threads);
    GPT2 m;
    memset(&m, 0, sizeof(m));
    Config cfg;
    load_model(&m, &cfg, ckpt);
    if (stream) {
        const StreamPolicy p = {.window = mc_window > 0 ? mc_window : m.cfg.block_size - sinks,
                                .sinks = sinks,
                                .recompute = recompute};
        eval_stream(&m, &cfg, data, &p, plen > 0 ? plen : 4 * m.cfg.block_size, bucket, csv,
                    threads);
    } else if (mc)
        eval_mc(&m, &cfg, mc, mc_examples, mc_window, threads);
    else if (passkey)
        eval_passkey(&m, &cfg, plen > 0 ? plen : cfg.seq_len, trials, (uint64_t)seed, threads);
    else if (!eval_lengths(&m, &cfg, data, lengths, len_tokens, batches, B > 0 ? B : cfg.batch_size,
                           threads))
        die(EXIT_USAGE, "no length was evaluated (the lines above say why)");
    gpt2_free(&m);
    return 0;
}
