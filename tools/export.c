// tools/export.c: convert an attnlab checkpoint (or an llm.c model file) to Hugging Face
// (model.safetensors + config.json + vocab.json + merges.txt) or to an llm.c model file.
// Usage: ./export --checkpoint PATH --format hf|llmc --out DIR_or_FILE [options]; ./export --help
// A model that is not GPT-2 (another attention, positions, residual) is refused by --format hf
// unless --allow-nonstandard: a GPT-2 loader would silently compute plain GPT-2 with it.
//
// defines: Config (common/config.h); GPT2 (model/gpt2.h); model_open (model/open.h); checkpoints
// (model/checkpoint.h); the Hugging Face writer (model/hf.h); the model settings (model/settings.h)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cli.h"
#include "common/config.h"
#include "common/util.h"
#include "model/checkpoint.h"
#include "model/hf.h"
#include "model/open.h"
#include "model/settings.h"

static void usage(FILE* f) {
    fprintf(
        f, "usage: ./export --checkpoint PATH --format hf|llmc --out DIR_or_FILE [options]\n\n"
           "Converts a trained model.\n"
           "  --checkpoint PATH    an attnlab model file (OUT/model_NNNNNNNN.bin), a run\n"
           "                       directory (its newest complete checkpoint), or an llm.c\n"
           "                       model file (magic 20240326)\n"
           "  --format hf          write DIR/model.safetensors, DIR/config.json and the GPT-2\n"
           "                       tokenizer files DIR/vocab.json, DIR/merges.txt; the directory\n"
           "                       loads with transformers' GPT2LMHeadModel.from_pretrained(DIR)\n"
           "                       and GPT2TokenizerFast.from_pretrained(DIR)\n"
           "  --format llmc        write an llm.c model file (version 3, fp32, padded vocab)\n"
           "  --out DIR_or_FILE    output directory (hf) or file (llmc)\n"
           "  --tokenizer-dir DIR  where encoder.json and vocab.bpe are (default data_cache/gpt2;\n"
           "                       `scripts/setup tokenizer` fetches them)\n"
           "  --no-tokenizer       hf: skip vocab.json / merges.txt\n"
           "  --allow-nonstandard  hf: export a model that is not GPT-2 (see below)\n\n"
           "Only softmax attention with learned positions, qk_norm 0, residual standard and\n"
           "value_residual 0 is exactly Hugging Face GPT-2; a GPT-2 loader would read any other\n"
           "model as plain GPT-2 and compute other numbers. --format hf refuses such a model\n"
           "(exit 2, naming what differs) unless --allow-nonstandard is given: then config.json\n"
           "says model_type \"attnlab-gpt2\" and architectures AttnlabGPT2LMHeadModel, which\n"
           "transformers does not take for GPT-2, the settings are recorded as attnlab_* keys,\n"
           "the model's own tensors are saved as attnlab.*, and attnlab reads the directory\n"
           "back as hf:DIR (docs/interop.md).\n"
           "Exit codes: 0 done, 1 write failure, 2 bad usage or input.\n");
}

// A usage error: "export: MESSAGE" (fmt with one %s, arg), the usage, exit 2.
_Noreturn static void usage_error(const char* fmt, const char* arg) {
    fputs("export: ", stderr);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    usage(stderr);
    exit(EXIT_USAGE);
}

// Open `source` (an attnlab model file, or llmc:PATH) into m and report what it is.
static void load(GPT2* m, const char* source) {
    char err[2048];
    ModelOpen mo = {.run = NULL};
    if (model_open(m, source, &mo, err, sizeof(err))) die(EXIT_USAGE, "%s", err);
    if (mo.kind == MODEL_SRC_LLMC)
        fprintf(stderr, "export: %s: llm.c model, %zu parameters\n",
                strncmp(source, "llmc:", 5) ? source : source + 5, m->num_params);
    else
        fprintf(stderr, "export: %s: step %ld, attention %s, %zu parameters\n", source, mo.step,
                m->attention, m->num_params);
}

int main(int argc, char** argv) {
    const char *ckpt = NULL, *format = NULL, *out = NULL, *tokdir = "data_cache/gpt2";
    int no_tok = 0, allow_nonstandard = 0;
    const CliOpt opts[] = {CLI_STR_OPT("--checkpoint", &ckpt),
                           CLI_STR_OPT("--format", &format),
                           CLI_STR_OPT("--out", &out),
                           CLI_STR_OPT("--tokenizer-dir", &tokdir),
                           CLI_FLAG_OPT("--no-tokenizer", &no_tok),
                           CLI_FLAG_OPT("--allow-nonstandard", &allow_nonstandard)};
    const CliTool tool = {.usage = usage,
                          .unknown = "unknown argument '%s'",
                          .no_value = "%s needs a value",
                          .fail = usage_error};
    cli_parse_or_exit(argc, argv, 1, opts, CLI_COUNT(opts), &tool);
    if (!ckpt || !format || !out)
        usage_error("%s", "--checkpoint, --format and --out are required");
    if (strcmp(format, "hf") != 0 && strcmp(format, "llmc") != 0) {
        fprintf(stderr, "export: --format must be hf or llmc, not '%s'\n", format);
        return EXIT_USAGE;
    }
    GPT2 m;
    load(&m, ckpt); // a model file, a run directory (its newest complete checkpoint) or llm.c

    char err[2048];
    int rc = 0;
    if (!strcmp(format, "llmc")) {
        // (settings the llm.c header cannot hold are refused by llmc_save, naming them)
        GPT2Config gpt2 = m.cfg; // every setting at the value an llm.c file means
        settings_absent(&gpt2);
        const int representable = !settings_differ(&gpt2, &m.cfg);
        if (representable && !hf_is_plain_gpt2(&m))
            fprintf(stderr,
                    "export: warning: attention '%s' is not llm.c's softmax GPT-2; the "
                    "llm.c file holds only the 16 GPT-2 tensors\n",
                    m.attention);
        if (llmc_save(&m, out, err, sizeof(err))) {
            fprintf(stderr, "export: %s\n", err);
            rc = 1;
        } else {
            printf("wrote %s\n", out);
        }
    } else {
        char why[512];
        if (hf_nonstandard(&m, why, sizeof(why)) && !allow_nonstandard) {
            fprintf(stderr,
                    "export: %s is not Hugging Face GPT-2: %s. A GPT-2 loader would read it as "
                    "plain GPT-2 and compute other numbers. Nothing written; pass "
                    "--allow-nonstandard to export it as model_type \"%s\" (attnlab reads it "
                    "back as hf:DIR; docs/interop.md)\n",
                    ckpt, why, HF_MODEL_TYPE_ATTNLAB);
            gpt2_free(&m);
            return EXIT_USAGE;
        }
        const char* td = NULL;
        if (!no_tok) {
            if (m.cfg.vocab_size != 50257) {
                fprintf(stderr,
                        "export: vocab_size is %d, not GPT-2's 50257: vocab.json and "
                        "merges.txt are not written\n",
                        m.cfg.vocab_size);
            } else {
                char p1[1100], p2[1100];
                snprintf(p1, sizeof(p1), "%s/encoder.json", tokdir);
                snprintf(p2, sizeof(p2), "%s/vocab.bpe", tokdir);
                if (!util_file_exists(p1) || !util_file_exists(p2))
                    die(EXIT_USAGE,
                        "%s: encoder.json / vocab.bpe missing (run `scripts/setup "
                        "tokenizer`, or pass --tokenizer-dir DIR or --no-tokenizer)",
                        tokdir);
                td = tokdir;
            }
        }
        if (hf_export(&m, out, td, err, sizeof(err))) {
            fprintf(stderr, "export: %s\n", err);
            rc = 1;
        } else {
            printf("wrote %s/model.safetensors, config.json%s\n", out,
                   td ? ", vocab.json, merges.txt" : "");
        }
    }
    gpt2_free(&m);
    return rc;
}
