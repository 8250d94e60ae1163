// model/checkpoint.c: attnlab model files, run state and llm.c model files (see checkpoint.h).
#include "model/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dist.h"
#include "common/util.h"
#include "model/residual.h"
#include "model/settings.h"

#define SPEC_REC 72 // name[64] + int64 size

// ---------------------------------------------------------------------------------------------
// shared: checked reads (the trailer, crc32 of all bytes before the last 8 and the end magic, is
// common/util.h's: util_verify_trailer, atomic_finish)

static int read_exact(FILE* f, void* p, size_t n, const char* path, const char* what, char* err,
                      size_t errcap) {
    if (n && fread(p, 1, n, f) != n) {
        snprintf(err, errcap, "%s: truncated while reading %s", path, what);
        return -1;
    }
    return 0;
}

static int64_t get64(const int32_t* h, int i) {
    return (int64_t)(((uint64_t)(uint32_t)h[i + 1] << 32) | (uint32_t)h[i]);
}
static void put64(int32_t* h, int i, int64_t v) {
    h[i] = (int32_t)(uint32_t)((uint64_t)v & 0xffffffffu);
    h[i + 1] = (int32_t)(uint32_t)((uint64_t)v >> 32);
}

// Fields 2..7 of llm.c's model-file header: the settings table's rows with an llm.c slot (maxT,
// V, L, NH, C) and Vp.
static void header_sizes(int32_t* h, const GPT2Config* c) {
    for (int i = 0; i < MODEL_NSETTINGS; i++)
        if (MODEL_SETTINGS[i].llmc >= 0)
            h[MODEL_SETTINGS[i].llmc] = setting_get(c, &MODEL_SETTINGS[i]);
    h[7] = c->padded_vocab;
}

// The inverse of header_sizes: a config with those sizes and the settings llm.c files imply.
static void config_from_header(GPT2Config* c, const int32_t* h) {
    memset(c, 0, sizeof(*c));
    for (int i = 0; i < MODEL_NSETTINGS; i++)
        if (MODEL_SETTINGS[i].llmc >= 0)
            setting_set(c, &MODEL_SETTINGS[i], h[MODEL_SETTINGS[i].llmc]);
    settings_absent(c); // learned positions, standard residual, MLPs, ...
    c->padded_vocab = h[7];
}

// ---------------------------------------------------------------------------------------------
// attnlab model files

int ckpt_save_model(const GPT2* m, const char* path, long step, const char* config_text, char* err,
                    size_t errcap) {
    int32_t h[256] = {0};
    const GPT2Config* c = &m->cfg;
    size_t tl = config_text ? strlen(config_text) : 0;
    h[0] = CKPT_MAGIC;
    h[1] = CKPT_VERSION;
    settings_to_header(h, c); // the settings table's slots: 2..6, 8, 9, 17..20
    h[7] = c->padded_vocab;
    h[10] = m->nspecs;
    h[11] = m->maxP;
    put64(h, 12, (int64_t)m->num_params);
    put64(h, 14, (int64_t)step);
    h[16] = (int32_t)tl;
    AtomicFile af;
    if (atomic_open(&af, path)) {
        snprintf(err, errcap, "%s", af.err);
        return -1;
    }
    char att[256] = {0};
    util_strlcpy(att, m->attention, sizeof(att));
    atomic_write(&af, h, sizeof(h));
    atomic_write(&af, att, sizeof(att));
    for (int i = 0; i < m->nspecs; i++) {
        char rec[SPEC_REC] = {0};
        util_strlcpy(rec, m->specs[i].name, 64);
        int64_t sz = (int64_t)m->specs[i].size;
        memcpy(rec + 64, &sz, 8);
        atomic_write(&af, rec, sizeof(rec));
    }
    atomic_write(&af, config_text ? config_text : "", tl);
    atomic_write(&af, m->params, sizeof(float) * m->num_params);
    return atomic_finish(&af, err, errcap);
}

int ckpt_open(CkptFile* cf, const char* path, char* err, size_t errcap) {
    memset(cf, 0, sizeof(*cf));
    util_strlcpy(cf->path, path, sizeof(cf->path));
    FILE* probe = fopen(path, "rb"); // an llm.c file has no trailer: say so before checking it
    int32_t magic = 0;
    if (probe && fread(&magic, 4, 1, probe) == 1 && magic == LLMC_MAGIC) {
        fclose(probe);
        snprintf(err, errcap, "%s: this is an llm.c model file; load it with init_from=llmc:%s",
                 path, path);
        return -1;
    }
    if (probe) fclose(probe);
    if (util_verify_trailer(path, 1024, err, errcap)) return -1;
    FILE* f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errcap, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    cf->f = f;
    int32_t h[256];
    if (read_exact(f, h, 1024, path, "the header", err, errcap)) goto fail;
    if (h[0] != CKPT_MAGIC) {
        snprintf(err, errcap, "%s: not an attnlab model file (magic %d, expected %d)", path, h[0],
                 CKPT_MAGIC);
        goto fail;
    }
    if (h[1] != CKPT_VERSION) {
        snprintf(err, errcap, "%s: unsupported version %d (expected %d)", path, h[1], CKPT_VERSION);
        goto fail;
    }
    memset(&cf->cfg, 0, sizeof(cf->cfg));
    if (h[10] < 0 || h[10] > GPT2_MAX_SPECS || h[16] < 0 || h[16] > (1 << 24) ||
        settings_from_header(&cf->cfg, h)) {
        snprintf(err, errcap, "%s: corrupted header", path);
        goto fail;
    }
    cf->cfg.padded_vocab = h[7];
    cf->step = (long)get64(h, 14);
    if (read_exact(f, cf->attention, 256, path, "the attention spec", err, errcap)) goto fail;
    cf->attention[255] = '\0';
    const int ns = cf->ntensors = h[10];
    cf->names = mallocCheck(sizeof(char[64]) * (size_t)(ns + 1));
    cf->sizes = mallocCheck(sizeof(int64_t) * (size_t)(ns + 1));
    for (int i = 0; i < ns; i++) {
        char rec[SPEC_REC];
        if (read_exact(f, rec, SPEC_REC, path, "the tensor table", err, errcap)) goto fail;
        memcpy(cf->names[i], rec, 64);
        cf->names[i][63] = '\0';
        memcpy(&cf->sizes[i], rec + 64, 8);
        if (cf->sizes[i] < 0 || cf->sizes[i] > ((int64_t)1 << 36)) {
            snprintf(err, errcap, "%s: corrupted tensor table", path);
            goto fail;
        }
    }
    cf->config_text = mallocCheck((size_t)h[16] + 1);
    if (read_exact(f, cf->config_text, (size_t)h[16], path, "the config text", err, errcap))
        goto fail;
    cf->config_text[h[16]] = '\0';
    return 0;
fail:
    ckpt_close(cf);
    return -1;
}

void ckpt_close(CkptFile* cf) {
    if (cf->f) fclose(cf->f);
    free(cf->names);
    free(cf->sizes);
    free(cf->config_text);
    memset(cf, 0, sizeof(*cf));
}

int ckpt_read_params(CkptFile* cf, GPT2* m, int strict, char* note, size_t notecap, char* err,
                     size_t errcap) {
    const char* path = cf->path;
    const GPT2Config* c = &m->cfg;
    const GPT2Config* h = &cf->cfg;
    if (note && notecap) note[0] = '\0';
    if (h->block_size != c->block_size || h->vocab_size != c->vocab_size ||
        h->n_layer != c->n_layer || h->n_head != c->n_head || h->n_embd != c->n_embd) {
        snprintf(err, errcap,
                 "%s: model sizes differ from the config (file: block_size=%d "
                 "vocab_size=%d n_layer=%d n_head=%d n_embd=%d)",
                 path, h->block_size, h->vocab_size, h->n_layer, h->n_head, h->n_embd);
        return -1;
    }
    if (cf->cfg.mlp != m->cfg.mlp) {
        snprintf(err, errcap, "%s: saved with mlp = %d, the config says mlp = %d", cf->path,
                 cf->cfg.mlp, m->cfg.mlp);
        return -1;
    }
    if (strict && strcmp(cf->attention, m->attention) != 0) {
        snprintf(err, errcap, "%s: saved with attention '%s', the config says '%s'", path,
                 cf->attention, m->attention);
        return -1;
    }
    if (strict && settings_differ(&cf->cfg, &m->cfg)) {
        char was[512], now[512];
        settings_describe(was, sizeof(was), &cf->cfg, "=", " ");
        settings_describe(now, sizeof(now), &m->cfg, "=", " ");
        snprintf(err, errcap, "%s: saved with %s, the config says %s", cf->path, was, now);
        return -1;
    }
    const int ns = cf->ntensors;
    if (strict) {
        if (ns != m->nspecs) {
            snprintf(err, errcap, "%s: has %d tensors, the model has %d", path, ns, m->nspecs);
            return -1;
        }
        for (int i = 0; i < ns; i++) {
            if (strcmp(cf->names[i], m->specs[i].name) != 0 ||
                (size_t)cf->sizes[i] != m->specs[i].size) {
                snprintf(err, errcap, "%s: tensor %d is %s[%lld], the model expects %s[%zu]", path,
                         i, cf->names[i], (long long)cf->sizes[i], m->specs[i].name,
                         m->specs[i].size);
                return -1;
            }
        }
        return read_exact(cf->f, m->params, sizeof(float) * m->num_params, path, "the parameters",
                          err, errcap);
    }
    int found[GPT2_MAX_SPECS] = {0};
    for (int i = 0; i < ns; i++) {
        int j = gpt2_find_spec(m, cf->names[i]);
        size_t bytes = sizeof(float) * (size_t)cf->sizes[i];
        if (j >= 0 && (size_t)cf->sizes[i] == m->specs[j].size) {
            if (read_exact(cf->f, m->params + m->specs[j].offset, bytes, path, cf->names[i], err,
                           errcap))
                return -1;
            found[j] = 1;
        } else if (fseek(cf->f, (long)bytes, SEEK_CUR) != 0) {
            snprintf(err, errcap, "%s: truncated while reading %s", path, cf->names[i]);
            return -1;
        }
    }
    for (int j = 0; j < m->nspecs; j++) {
        if (!found[j] && note) {
            size_t l = strlen(note);
            snprintf(note + l, notecap - l, "%s%s", l ? ", " : "", m->specs[j].name);
        }
    }
    return 0;
}

int ckpt_read_info(const char* path, GPT2Config* cfg, char* attention, size_t attcap,
                   char** config_text, long* step, char* err, size_t errcap) {
    CkptFile cf;
    if (ckpt_open(&cf, path, err, errcap)) return -1;
    *cfg = cf.cfg;
    if (attention) util_strlcpy(attention, cf.attention, attcap);
    if (step) *step = cf.step;
    if (config_text) {
        *config_text = cf.config_text;
        cf.config_text = NULL;
    }
    ckpt_close(&cf);
    return 0;
}

int ckpt_load_model(GPT2* m, const char* path, int strict, long* step, char* note, size_t notecap,
                    char* err, size_t errcap) {
    if (note && notecap) note[0] = '\0';
    CkptFile cf;
    if (ckpt_open(&cf, path, err, errcap)) return -1;
    int rc = ckpt_read_params(&cf, m, strict, note, notecap, err, errcap);
    gpt2_params_changed(m); // (also on failure: the parameters may be partly read)
    if (rc == 0 && step) *step = cf.step;
    ckpt_close(&cf);
    return rc;
}

int ckpt_check_resume(const char* model_path, const Config* now, const char* now_text, int nranks,
                      ResumeChanges* changes, char** saved_text, char* err, size_t errcap) {
    GPT2Config sc;
    char att[256], what[1200], *saved = NULL;
    long step;
    if (saved_text) *saved_text = NULL;
    if (ckpt_read_info(model_path, &sc, att, sizeof(att), &saved, &step, err, errcap)) return -1;
    snprintf(what, sizeof(what), "the checkpoint %s", model_path);
    int rc = run_state_check_resume(saved, what, now, now_text, nranks, settings_resume_fixed,
                                    changes, err, errcap);
    if (rc == 0 && saved_text)
        *saved_text = saved;
    else
        free(saved);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// llm.c model files

// The table row in llm.c slot `slot` (every slot has one).
static int llmc_spec(const GPT2* m, int slot) {
    for (int i = 0; i < m->nspecs; i++)
        if (m->specs[i].llmc == slot) return i;
    die(1, "the parameter table has no tensor in llm.c slot %d", slot);
}

int llmc_save(const GPT2* m, const char* path, char* err, size_t errcap) {
    const GPT2Config* c = &m->cfg;
    if (!c->mlp) {
        snprintf(err, errcap,
                 "%s: llm.c model files have an MLP in every block (this model has mlp = 0)", path);
        return -1;
    }
    // llm.c's header has no field for the settings (rows without an llm.c slot): a file written
    // from a model with any of them away from its default would load as a different model
    GPT2Config gpt2 = *c;
    settings_absent(&gpt2);
    if (settings_differ(c, &gpt2) || settings_differ(&gpt2, c)) {
        char want[512], has[512];
        settings_describe(want, sizeof(want), &gpt2, " = ", ", ");
        settings_describe(has, sizeof(has), c, " = ", ", ");
        snprintf(err, errcap,
                 "%s: an llm.c model file holds GPT-2 with %s only (this model has %s: llm.c has "
                 "neither the setting nor its tensors); export it with --format hf "
                 "--allow-nonstandard",
                 path, want, has);
        return -1;
    }
    int32_t h[256] = {0};
    h[0] = LLMC_MAGIC;
    h[1] = LLMC_VERSION;
    header_sizes(h, c);
    AtomicFile af;
    if (atomic_open(&af, path)) {
        snprintf(err, errcap, "%s", af.err);
        return -1;
    }
    atomic_write(&af, h, sizeof(h));
    for (int slot = 0; slot < GPT2_NUM_LLMC; slot++) { // the table's rows, in llm.c's slot order
        const ParamSpec* s = &m->specs[llmc_spec(m, slot)];
        atomic_write(&af, m->params + s->offset, sizeof(float) * s->size);
    }
    if (atomic_commit(&af)) {
        snprintf(err, errcap, "%s", af.err);
        return -1;
    }
    return 0;
}

int llmc_read_config(const char* path, GPT2Config* cfg, char* err, size_t errcap) {
    FILE* f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errcap, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    int32_t h[256];
    int ok = fread(h, 4, 256, f) == 256;
    struct stat st;
    int have_st = fstat(fileno(f), &st) == 0;
    fclose(f);
    if (!ok) {
        snprintf(err, errcap, "%s: truncated header (an llm.c model file starts with 1024 bytes)",
                 path);
        return -1;
    }
    if (h[0] != LLMC_MAGIC) {
        snprintf(err, errcap, "%s: not an llm.c model file (magic %d, expected %d)", path, h[0],
                 LLMC_MAGIC);
        return -1;
    }
    if (h[1] != LLMC_VERSION) {
        snprintf(err, errcap,
                 "%s: llm.c model version %d is not supported (need %d: fp32 with "
                 "padded vocabulary)",
                 path, h[1], LLMC_VERSION);
        return -1;
    }
    for (int i = 2; i <= 7; i++) {
        if (h[i] <= 0 || h[i] > (1 << 24)) {
            snprintf(err, errcap, "%s: implausible header value %d at field %d", path, h[i], i);
            return -1;
        }
    }
    if (h[7] < h[3] || h[6] % h[5] != 0) {
        snprintf(err, errcap, "%s: inconsistent sizes (V=%d Vp=%d C=%d NH=%d)", path, h[3], h[7],
                 h[6], h[5]);
        return -1;
    }
    config_from_header(cfg, h);
    cfg->pos_encoding = ATTN_POS_LEARNED;
    size_t nparams = gpt2_llmc_floats(cfg);
    if (have_st && (size_t)st.st_size != 1024 + 4 * nparams) {
        snprintf(err, errcap, "%s: size %lld bytes, expected %zu for these sizes", path,
                 (long long)st.st_size, 1024 + 4 * nparams);
        return -1;
    }
    return 0;
}

int llmc_load_params(GPT2* m, const char* path, const GPT2Config* header, char* err,
                     size_t errcap) {
    const GPT2Config fc = *header;
    const GPT2Config* c = &m->cfg;
    if (fc.block_size != c->block_size || fc.vocab_size != c->vocab_size ||
        fc.n_layer != c->n_layer || fc.n_head != c->n_head || fc.n_embd != c->n_embd ||
        fc.padded_vocab != c->padded_vocab) {
        snprintf(err, errcap,
                 "%s: sizes (block_size=%d vocab_size=%d n_layer=%d n_head=%d "
                 "n_embd=%d) differ from the config",
                 path, fc.block_size, fc.vocab_size, fc.n_layer, fc.n_head, fc.n_embd);
        return -1;
    }
    FILE* f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errcap, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    int rc = fseek(f, 1024, SEEK_SET) == 0 ? 0 : -1;
    for (int slot = 0; slot < GPT2_NUM_LLMC && rc == 0; slot++) { // in llm.c's slot order
        const ParamSpec* s = &m->specs[llmc_spec(m, slot)];
        rc = read_exact(f, m->params + s->offset, sizeof(float) * s->size, path, "the parameters",
                        err, errcap);
    }
    fclose(f);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// finding and pruning checkpoints

static int collect_steps(const char* dir, long* steps, int cap) {
    DIR* d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent* e;
    while ((e = readdir(d)) && n < cap) {
        long s;
        char tail[8];
        if (sscanf(e->d_name, "state_%ld.bi%1s", &s, tail) == 2 && strlen(e->d_name) == 18)
            steps[n++] = s;
    }
    closedir(d);
    // sort descending
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && steps[j] > steps[j - 1]; j--) {
            long t = steps[j];
            steps[j] = steps[j - 1];
            steps[j - 1] = t;
        }
    return n;
}

long ckpt_find_latest(const char* dir) {
    long steps[4096];
    int n = collect_steps(dir, steps, 4096);
    for (int i = 0; i < n; i++) {
        char mp[1100], sp[1100], err[1400];
        snprintf(mp, sizeof(mp), "%s/model_%08ld.bin", dir, steps[i]);
        snprintf(sp, sizeof(sp), "%s/state_%08ld.bin", dir, steps[i]);
        if (util_verify_trailer(mp, 1024, err, sizeof(err)) == 0 &&
            util_verify_trailer(sp, RUN_STATE_MIN_BYTES, err, sizeof(err)) == 0)
            return steps[i];
        fprintf(stderr, "attnlab: skipping damaged checkpoint at step %ld: %s\n", steps[i], err);
    }
    return -1;
}

void ckpt_prune(const char* dir, int keep) {
    util_remove_stale_temps(dir); // temp files of writes a killed process left behind
    if (keep <= 0) return;
    long steps[4096];
    int n = collect_steps(dir, steps, 4096);
    for (int i = keep; i < n; i++) {
        char p[1100];
        snprintf(p, sizeof(p), "%s/state_%08ld.bin", dir, steps[i]);
        unlink(p);
        snprintf(p, sizeof(p), "%s/model_%08ld.bin", dir, steps[i]);
        unlink(p);
    }
}

void ckpt_pair_paths(const char* dir, long step, char* model_path, char* state_path, size_t cap) {
    snprintf(model_path, cap, "%s/model_%08ld.bin", dir, step);
    snprintf(state_path, cap, "%s/state_%08ld.bin", dir, step);
}

long ckpt_resume_step(const char* dir, int resume, int max_steps) {
    long latest = resume ? ckpt_find_latest(dir) : -1;
    dist_bcast(&latest, sizeof(latest), 0, "resume step"); // every rank takes rank 0's choice
    if (latest < 0) {
        if (resume)
            printf("resume = 1 but %s has no complete checkpoint: starting from step 0\n", dir);
        return -1;
    }
    if (latest >= max_steps) {
        printf("%s: the run is finished (checkpoint at step %ld, max_steps = %d): nothing to do\n",
               dir, latest, max_steps);
        return -2;
    }
    return latest;
}
