// tools/generate.c: sample text from an attnlab checkpoint.
// Usage: ./generate --checkpoint PATH [--prompt TEXT] [--n N] [--tokens N] [--temperature T]
//                   [--top-k K] [--seed S] [--raw] [--no-cache] [--verbose]
// A generated end-of-text token shows as the line "--- end of document ---" (SAMPLE_DOC_BREAK,
// model/sample.h); --raw prints its text "<|endoftext|>" instead. Decoding keeps a key/value
// cache (model/kv_cache.h) unless --no-cache, or unless the model's attention cannot be cached
// (a layer-level variant: one note on stderr, then the prefix is recomputed for every token).
// --verbose prints the memory the generation takes on stderr, the cache included.
// defines: model_open (model/open.h), gpt2_generate_cached (model/sample.h), tokenizer
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "common/util.h"
#include "common/matmul.h"
#include "data/tokenizer.h"
#include "model/kv_cache.h"
#include "model/open.h"
#include "model/sample.h"

static void usage(FILE* f) {
    fprintf(f, "usage: ./generate --checkpoint PATH [options]\n"
               "  --prompt TEXT      text to continue (default: start of a document, EOT)\n"
               "  --n N              number of samples (default 3)\n"
               "  --tokens N         new tokens per sample (default 100)\n"
               "  --temperature T    softmax temperature, 0 = greedy (default 0.8)\n"
               "  --top-k K          sample among the K most likely tokens, 0 = all (default 40)\n"
               "  --seed S           random seed (default 1)\n"
               "  --raw              print the end-of-text token as its text (<|endoftext|>),\n"
               "                     not as the line \"--- end of document ---\"\n"
               "  --no-cache         recompute the whole prefix for every token (no key/value\n"
               "                     cache; the cache is used by default where the attention\n"
               "                     allows it)\n"
               "  --verbose          print the memory generation takes on stderr (model buffers\n"
               "                     and the key/value cache for block_size positions)\n"
               "The tokenizer and model sizes come from the config saved in the checkpoint.\n");
}

static const unsigned char* token_bytes(const void* tok, int id, size_t* len) {
    return tokenizer_token_bytes(tok, id, len);
}

static double mib(double b) {
    return b / (1024.0 * 1024.0);
}

// The memory of this generation on stderr: the model's buffers as allocated (GPT2.bytes) and the
// key/value cache (kv_cache_model_bytes, what kv_cache_new took).
static void print_memory(const GPT2* m, const KVCache* kv) {
    const GPT2Bytes* b = &m->bytes;
    const double model =
        b->params + b->grads + b->bf16 + b->matmul + b->acts + b->caches + b->workspace;
    const int T = kv ? kv_cache_capacity(kv) : 0;
    const double cache = kv ? kv_cache_model_bytes(m, T) : 0;
    fprintf(stderr,
            "generate: memory estimate %.1f MiB: parameters %.1f, gradients %.1f, activations of "
            "1 x %d positions %.1f, workspace and variant caches %.1f MiB; key/value cache %.0f "
            "bytes (%.1f MiB, %d positions)\n",
            mib(model + cache), mib(b->params), mib(b->grads), m->T,
            mib(b->acts + b->bf16 + b->matmul), mib(b->caches + b->workspace), cache, mib(cache),
            T);
}

int main(int argc, char** argv) {
    const char *ckpt = NULL, *prompt = NULL;
    int n = 3, tokens = 100, top_k = 40, raw = 0, no_cache = 0, verbose = 0;
    float temperature = 0.8f;
    long seed = 1;
    const CliOpt opts[] = {CLI_STR_OPT("--checkpoint", &ckpt),
                           CLI_STR_OPT("--prompt", &prompt),
                           CLI_INT_OPT("--n", &n, 1, 1000),
                           CLI_INT_OPT("--tokens", &tokens, 1, 100000),
                           CLI_INT_OPT("--top-k", &top_k, 0, 1 << 20),
                           CLI_LONG_OPT("--seed", &seed, 0, (double)(1L << 62)),
                           CLI_FLOAT_OPT("--temperature", &temperature, 0, 100),
                           CLI_FLAG_OPT("--raw", &raw),
                           CLI_FLAG_OPT("--no-cache", &no_cache),
                           CLI_FLAG_OPT("--verbose", &verbose)};
    const CliTool tool = {.usage = usage,
                          .unknown = "unknown option '%s'",
                          .no_value = "%s needs a value",
                          .usage_first = 1};
    cli_parse_or_exit(argc, argv, 1, opts, CLI_COUNT(opts), &tool);
    if (!ckpt) {
        usage(stderr);
        die(EXIT_USAGE, "--checkpoint is required");
    }
    mm_init_threads();
    char err[2048];
    GPT2 m;
    ModelOpen mo = {.run = NULL};
    if (model_open(&m, ckpt, &mo, err, sizeof(err))) die(EXIT_USAGE, "%s", err);
    const Config cfg = mo.cfg;
    const long step = mo.step;
    // allocate for the model's own block size: generation slides a window of that length
    gpt2_alloc_acts(&m, 1, m.cfg.block_size, omp_get_max_threads());
    KVCache* kv = NULL;
    if (!no_cache) {
        char why[512];
        if (kv_cache_supported(&m, why, sizeof(why)))
            kv = kv_cache_new(&m, m.cfg.block_size);
        else
            fprintf(stderr,
                    "generate: no key/value cache: %s; recomputing the prefix for every "
                    "token\n",
                    why);
    }
    if (verbose) print_memory(&m, kv);
    Tokenizer* tok = tokenizer_load(cfg.tokenizer, cfg.tokenizer_dir, err, sizeof(err));
    if (!tok) die(EXIT_USAGE, "%s", err);
    int* pids = NULL;
    size_t np = 0;
    if (prompt && *prompt) np = tokenizer_encode(tok, prompt, strlen(prompt), 0, &pids);
    int cap = (int)np + 1 + tokens;
    int* ids = mallocCheck(sizeof(int) * (size_t)cap);
    Rng rng;
    rng_seed(&rng, (uint64_t)seed);
    printf("# %s (step %ld, attention %s)\n", ckpt, step, m.attention);
    for (int s = 0; s < n; s++) {
        int len = 0;
        ids[len++] = tokenizer_eot(tok);
        for (size_t k = 0; k < np; k++)
            ids[len++] = pids[k];
        int total = gpt2_generate_cached(&m, kv, ids, len, tokens, temperature, top_k, -1, &rng);
        printf("---- sample %d ----\n", s + 1);
        sample_write(stdout, ids + 1, total - 1, tokenizer_eot(tok), token_bytes, tok, raw);
        printf("\n");
    }
    free(ids);
    free(pids);
    tokenizer_free(tok);
    kv_cache_free(kv);
    gpt2_free(&m);
    return 0;
}
