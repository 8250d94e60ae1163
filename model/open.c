// model/open.c: models from an attnlab model file, an llm.c model file or a Hugging Face
// directory, in one call (see open.h).
#include "model/open.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "model/checkpoint.h"
#include "model/hf.h"
#include "model/settings.h"

// The config a bare model file implies: defaults with its settings (every row of the settings
// table, names through the enums' tables) and attention.
static void config_of_sizes(Config* c, const GPT2Config* g, const char* attention) {
    config_defaults(c);
    settings_to_config(c, g);
    util_strlcpy(c->attention, attention, sizeof(c->attention));
}

// init_from: the file's sizes (fc) must equal the config's (gc). On a difference, err reads
// "WHERE: WHAT n_layer=.. n_head=.. n_embd=.. vocab_size=.. block_size=..NOTE; set these keys
// to match" and 1 is returned.
static int sizes_differ(const GPT2Config* fc, const GPT2Config* gc, const char* where,
                        const char* what, const char* note, char* err, size_t errcap) {
    if (fc->n_layer == gc->n_layer && fc->n_head == gc->n_head && fc->n_embd == gc->n_embd &&
        fc->vocab_size == gc->vocab_size && fc->block_size == gc->block_size)
        return 0;
    snprintf(err, errcap,
             "%s: %s n_layer=%d n_head=%d n_embd=%d vocab_size=%d block_size=%d%s; set these "
             "keys to match",
             where, what, fc->n_layer, fc->n_head, fc->n_embd, fc->vocab_size, fc->block_size,
             note);
    return 1;
}

// The run's model settings: those the caller translated (o->setup), or *run translated here.
static int run_config(GPT2Config* gc, const ModelOpen* o, char* err, size_t errcap) {
    if (o->setup) {
        *gc = o->setup->cfg;
        return 0;
    }
    return gpt2_config_from(gc, o->run, err, errcap);
}

// Attention, build and (for init_from) initial values, from o->cfg (or, for a run, the setup
// its caller made of it).
static int build(GPT2* m, ModelOpen* o, const char* what, char* err, size_t errcap) {
    char e2[1800];
    GPT2Config gc;
    if (o->run && o->setup) { // translated once already: its attention and settings
        util_strlcpy(m->attention, o->setup->attention, sizeof(m->attention));
        memcpy(m->la, o->setup->la, sizeof(m->la));
        m->maxP = o->setup->maxP;
        gc = o->setup->cfg;
    } else {
        if (gpt2_setup_attention(m, &o->cfg, e2, sizeof(e2))) {
            if (o->run)
                snprintf(err, errcap, "%s", e2);
            else
                snprintf(err, errcap, "%s: %s", what, e2);
            return -1;
        }
        if (gpt2_config_from(&gc, &o->cfg, e2, sizeof(e2))) {
            snprintf(err, errcap, "%s: %s", what, e2);
            return -1;
        }
    }
    gpt2_build(m, &gc);
    if (o->run) gpt2_init(m, (uint64_t)o->cfg.seed);
    m->seed = (uint64_t)o->cfg.seed;
    return 0;
}

static int open_attnlab(GPT2* m, const char* path, ModelOpen* o, char* err, size_t errcap) {
    CkptFile cf;
    if (ckpt_open(&cf, path, err, errcap)) return -1;
    int rc = -1;
    o->step = cf.step;
    if (!o->run) {
        char name[1200], e2[1800];
        snprintf(name, sizeof(name), "%s (saved config)", path);
        config_defaults(&o->cfg);
        if (config_load_text(&o->cfg, cf.config_text, name, e2, sizeof(e2))) {
            snprintf(err, errcap, "%s: its saved config does not parse: %s", path, e2);
            goto done;
        }
    }
    if (build(m, o, path, err, errcap)) goto done;
    rc = ckpt_read_params(&cf, m, o->run ? 0 : 1, o->note, sizeof(o->note), err, errcap);
done:
    ckpt_close(&cf);
    return rc;
}

static int open_llmc(GPT2* m, const char* path, ModelOpen* o, char* err, size_t errcap) {
    GPT2Config fc;
    if (llmc_read_config(path, &fc, err, errcap)) return -1;
    if (o->run) {
        GPT2Config gc;
        if (run_config(&gc, o, err, errcap)) return -1;
        if (sizes_differ(&fc, &gc, path, "llm.c model has", "", err, errcap)) return -1;
    } else {
        config_of_sizes(&o->cfg, &fc, "softmax");
    }
    if (build(m, o, path, err, errcap)) return -1;
    if (!o->run && m->cfg.padded_vocab != fc.padded_vocab) {
        snprintf(err, errcap, "%s: padded vocabulary %d, attnlab pads %d to %d", path,
                 fc.padded_vocab, fc.vocab_size, m->cfg.padded_vocab);
        return -1;
    }
    return llmc_load_params(m, path, &fc, err, errcap);
}

static int open_hf(GPT2* m, const char* dir, ModelOpen* o, char* err, size_t errcap) {
    GPT2Config fc;
    char fatt[CONFIG_STR];
    if (hf_read_config(dir, &fc, fatt, sizeof(fatt), err, errcap)) return -1;
    if (o->run) {
        GPT2Config gc;
        if (run_config(&gc, o, err, errcap)) return -1;
        char where[1100];
        snprintf(where, sizeof(where), "%s/config.json", dir);
        if (sizes_differ(&fc, &gc, where, "model has", " (n_positions)", err, errcap)) return -1;
        if (strcmp(fatt, o->cfg.attention) != 0)
            fprintf(stderr,
                    "attnlab: init_from hf:%s: weights trained with attention '%s', this run "
                    "uses '%s'\n",
                    dir, fatt, o->cfg.attention);
        if (settings_differ(&gc, &fc)) {
            char was[512], now[512];
            settings_describe(was, sizeof(was), &fc, " = ", ", ");
            settings_describe(now, sizeof(now), &gc, NULL, ", ");
            fprintf(stderr,
                    "attnlab: init_from hf:%s: weights trained with %s; this run uses %s "
                    "(tensors of the other setting are ignored, those of this run's keep their "
                    "initial values)\n",
                    dir, was, now);
        }
    } else {
        config_of_sizes(&o->cfg, &fc, fatt);
    }
    if (build(m, o, dir, err, errcap)) return -1;
    return hf_load(m, dir, err, errcap);
}

// A plain source: a model file as it is, or a run directory's newest complete checkpoint (the
// newest step whose model and state files both verify, ckpt_find_latest).
static int resolve_path(const char* source, char* path, size_t cap, char* err, size_t errcap) {
    struct stat st;
    if (stat(source, &st) != 0 || !S_ISDIR(st.st_mode)) {
        if ((size_t)snprintf(path, cap, "%s", source) >= cap) {
            snprintf(err, errcap, "%.200s...: path too long", source);
            return -1;
        }
        return 0;
    }
    long s = ckpt_find_latest(source);
    if (s < 0) {
        snprintf(err, errcap,
                 "%s: a directory with no complete checkpoint (model_NNNNNNNN.bin "
                 "with its state file)",
                 source);
        return -1;
    }
    if ((size_t)snprintf(path, cap, "%s/model_%08ld.bin", source, s) >= cap) {
        snprintf(err, errcap, "%.200s...: path too long", source);
        return -1;
    }
    return 0;
}

int model_open(GPT2* m, const char* source, ModelOpen* o, char* err, size_t errcap) {
    memset(m, 0, sizeof(*m));
    o->step = 0;
    o->note[0] = '\0';
    if (o->run) o->cfg = *o->run;
    int rc;
    if (strncmp(source, "llmc:", 5) == 0) {
        o->kind = MODEL_SRC_LLMC;
        rc = open_llmc(m, source + 5, o, err, errcap);
    } else if (strncmp(source, "hf:", 3) == 0) {
        o->kind = MODEL_SRC_HF;
        rc = open_hf(m, source + 3, o, err, errcap);
    } else if (source[0] == '\0' || strcmp(source, "scratch") == 0) {
        o->kind = MODEL_SRC_SCRATCH;
        if (!o->run) {
            snprintf(err, errcap, "'%s': give a model file, llmc:PATH or hf:DIR", source);
            return -1;
        }
        rc = build(m, o, "scratch", err, errcap);
    } else {
        char path[1024];
        if (resolve_path(source, path, sizeof(path), err, errcap)) return -1;
        int32_t magic = 0;
        FILE* f = fopen(path, "rb");
        if (f && fread(&magic, sizeof(magic), 1, f) != 1) magic = 0;
        if (f) fclose(f);
        // a tool opens an llm.c file named without its llmc: prefix as one; the trainer's
        // init_from names the kind of file (the error from open_attnlab says how)
        if (magic == LLMC_MAGIC && !o->run) {
            o->kind = MODEL_SRC_LLMC;
            rc = open_llmc(m, path, o, err, errcap);
        } else {
            o->kind = MODEL_SRC_ATTNLAB;
            rc = open_attnlab(m, path, o, err, errcap);
        }
    }
    if (rc) gpt2_free(m);
    return rc ? -1 : 0;
}
