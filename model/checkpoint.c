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

#include "common/util.h"

#define SPEC_REC 72 // name[64] + int64 size

// ---------------------------------------------------------------------------------------------
// shared: trailer verification and checked reads

// Check the file's trailer: crc32 of all bytes before the last 8 and the end magic.
static int verify_trailer(const char* path, size_t min_size, char* err, size_t errcap) {
    FILE* f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errcap, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || (size_t)st.st_size < min_size + 8) {
        fclose(f);
        snprintf(err, errcap, "%s: truncated (%lld bytes)", path, (long long)st.st_size);
        return -1;
    }
    size_t body = (size_t)st.st_size - 8;
    uint32_t crc = util_crc32(0, NULL, 0);
    size_t bufn = body < (1u << 20) ? body + 1 : (1u << 20);
    char* buf = mallocCheck(bufn);
    size_t left = body;
    while (left > 0) {
        size_t n = left < bufn ? left : bufn;
        if (fread(buf, 1, n, f) != n) break;
        crc = util_crc32(crc, buf, n);
        left -= n;
    }
    uint32_t tr[2] = {0, 0};
    int ok = left == 0 && fread(tr, 4, 2, f) == 2;
    free(buf);
    fclose(f);
    if (!ok) {
        snprintf(err, errcap, "%s: read error", path);
        return -1;
    }
    if (tr[1] != CKPT_END_MAGIC) {
        snprintf(err, errcap, "%s: missing end marker (truncated or not an attnlab file)", path);
        return -1;
    }
    if (tr[0] != crc) {
        snprintf(err, errcap,
                 "%s: checksum mismatch (stored %08x, computed %08x): the file is "
                 "corrupted",
                 path, tr[0], crc);
        return -1;
    }
    return 0;
}

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

static int finish(AtomicFile* af, char* err, size_t errcap) {
    uint32_t tr[2] = {af->crc, CKPT_END_MAGIC};
    atomic_write(af, tr, sizeof(tr));
    if (atomic_commit(af)) {
        snprintf(err, errcap, "%s", af->err);
        return -1;
    }
    return 0;
}

// Fields 2..7 of both model-file headers (attnlab's and llm.c's): maxT, V, L, NH, C, Vp.
static void header_sizes(int32_t* h, const GPT2Config* c) {
    h[2] = c->block_size;
    h[3] = c->vocab_size;
    h[4] = c->n_layer;
    h[5] = c->n_head;
    h[6] = c->n_embd;
    h[7] = c->padded_vocab;
}

// The inverse of header_sizes: a zeroed config with those six sizes.
static void config_from_header(GPT2Config* c, const int32_t* h) {
    memset(c, 0, sizeof(*c));
    c->block_size = h[2];
    c->vocab_size = h[3];
    c->n_layer = h[4];
    c->n_head = h[5];
    c->n_embd = h[6];
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
    header_sizes(h, c);
    h[8] = c->pos_encoding;
    h[9] = c->qk_norm;
    h[17] = c->mlp ? 0 : 1; // 0 in files written before the key: they have MLPs
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
    return finish(&af, err, errcap);
}

// Read and check the fixed part; leaves f positioned after the config text.
static FILE* open_model(const char* path, int32_t* h, char* att, char** text, char* err,
                        size_t errcap) {
    if (verify_trailer(path, 1024, err, errcap)) return NULL;
    FILE* f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errcap, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    if (read_exact(f, h, 1024, path, "the header", err, errcap)) goto fail;
    if (h[0] == LLMC_MAGIC) {
        snprintf(err, errcap, "%s: this is an llm.c model file; load it with init_from=llmc:%s",
                 path, path);
        goto fail;
    }
    if (h[0] != CKPT_MAGIC) {
        snprintf(err, errcap, "%s: not an attnlab model file (magic %d, expected %d)", path, h[0],
                 CKPT_MAGIC);
        goto fail;
    }
    if (h[1] != CKPT_VERSION) {
        snprintf(err, errcap, "%s: unsupported version %d (expected %d)", path, h[1], CKPT_VERSION);
        goto fail;
    }
    if (h[10] < 0 || h[10] > GPT2_MAX_SPECS || h[16] < 0 || h[16] > (1 << 24)) {
        snprintf(err, errcap, "%s: corrupted header", path);
        goto fail;
    }
    if (read_exact(f, att, 256, path, "the attention spec", err, errcap)) goto fail;
    att[255] = '\0';
    if (fseek(f, (long)h[10] * SPEC_REC, SEEK_CUR) != 0) goto fail;
    char* t = mallocCheck((size_t)h[16] + 1);
    if (read_exact(f, t, (size_t)h[16], path, "the config text", err, errcap)) {
        free(t);
        goto fail;
    }
    t[h[16]] = '\0';
    if (text)
        *text = t;
    else
        free(t);
    return f;
fail:
    fclose(f);
    return NULL;
}

int ckpt_read_info(const char* path, GPT2Config* cfg, char* attention, size_t attcap,
                   char** config_text, long* step, char* err, size_t errcap) {
    int32_t h[256];
    char att[256];
    FILE* f = open_model(path, h, att, config_text, err, errcap);
    if (!f) return -1;
    fclose(f);
    config_from_header(cfg, h);
    cfg->pos_encoding = h[8];
    cfg->qk_norm = h[9];
    cfg->mlp = h[17] ? 0 : 1;
    if (attention) util_strlcpy(attention, att, attcap);
    if (step) *step = (long)get64(h, 14);
    return 0;
}

int ckpt_load_model(GPT2* m, const char* path, int strict, long* step, char* note, size_t notecap,
                    char* err, size_t errcap) {
    int32_t h[256];
    char att[256];
    if (note && notecap) note[0] = '\0';
    FILE* f = open_model(path, h, att, NULL, err, errcap);
    if (!f) return -1;
    // re-read the spec table (open_model skipped it)
    const GPT2Config* c = &m->cfg;
    int rc = -1;
    if (h[2] != c->block_size || h[3] != c->vocab_size || h[4] != c->n_layer || h[5] != c->n_head ||
        h[6] != c->n_embd) {
        snprintf(err, errcap,
                 "%s: model sizes differ from the config (file: block_size=%d "
                 "vocab_size=%d n_layer=%d n_head=%d n_embd=%d)",
                 path, h[2], h[3], h[4], h[5], h[6]);
        goto done;
    }
    if ((h[17] ? 0 : 1) != c->mlp) {
        snprintf(err, errcap, "%s: saved with mlp = %d, the config says mlp = %d", path,
                 h[17] ? 0 : 1, c->mlp);
        goto done;
    }
    if (strict && strcmp(att, m->attention) != 0) {
        snprintf(err, errcap, "%s: saved with attention '%s', the config says '%s'", path, att,
                 m->attention);
        goto done;
    }
    int ns = h[10];
    char(*names)[64] = mallocCheck(sizeof(char[64]) * (size_t)(ns + 1));
    int64_t* sizes = mallocCheck(sizeof(int64_t) * (size_t)(ns + 1));
    if (fseek(f, 1024 + 256, SEEK_SET) != 0) goto done_free;
    for (int i = 0; i < ns; i++) {
        char rec[SPEC_REC];
        if (read_exact(f, rec, SPEC_REC, path, "the tensor table", err, errcap)) goto done_free;
        memcpy(names[i], rec, 64);
        names[i][63] = '\0';
        memcpy(&sizes[i], rec + 64, 8);
        if (sizes[i] < 0 || sizes[i] > ((int64_t)1 << 36)) {
            snprintf(err, errcap, "%s: corrupted tensor table", path);
            goto done_free;
        }
    }
    if (fseek(f, h[16], SEEK_CUR) != 0) goto done_free;
    if (strict) {
        if (ns != m->nspecs) {
            snprintf(err, errcap, "%s: has %d tensors, the model has %d", path, ns, m->nspecs);
            goto done_free;
        }
        for (int i = 0; i < ns; i++) {
            if (strcmp(names[i], m->specs[i].name) != 0 || (size_t)sizes[i] != m->specs[i].size) {
                snprintf(err, errcap, "%s: tensor %d is %s[%lld], the model expects %s[%zu]", path,
                         i, names[i], (long long)sizes[i], m->specs[i].name, m->specs[i].size);
                goto done_free;
            }
        }
        if (read_exact(f, m->params, sizeof(float) * m->num_params, path, "the parameters", err,
                       errcap))
            goto done_free;
    } else {
        int found[GPT2_MAX_SPECS] = {0};
        for (int i = 0; i < ns; i++) {
            int j = gpt2_find_spec(m, names[i]);
            size_t bytes = sizeof(float) * (size_t)sizes[i];
            if (j >= 0 && (size_t)sizes[i] == m->specs[j].size) {
                if (read_exact(f, m->params + m->specs[j].offset, bytes, path, names[i], err,
                               errcap))
                    goto done_free;
                found[j] = 1;
            } else if (fseek(f, (long)bytes, SEEK_CUR) != 0) {
                goto done_free;
            }
        }
        for (int j = 0; j < m->nspecs; j++) {
            if (!found[j] && note) {
                size_t l = strlen(note);
                snprintf(note + l, notecap - l, "%s%s", l ? ", " : "", m->specs[j].name);
            }
        }
    }
    if (step) *step = (long)get64(h, 14);
    rc = 0;
done_free:
    free(names);
    free(sizes);
done:
    fclose(f);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// run state

int ckpt_save_state(const Optimizer* o, const RunState* rs, const char* path, char* err,
                    size_t errcap) {
    int32_t h[256] = {0};
    h[0] = STATE_MAGIC;
    h[1] = CKPT_VERSION;
    put64(h, 2, (int64_t)o->n);
    put64(h, 4, (int64_t)o->t);
    h[6] = o->def->state_per_param;
    put64(h, 8, (int64_t)rs->step);
    char name[32] = {0};
    util_strlcpy(name, o->def->name, sizeof(name));
    AtomicFile af;
    if (atomic_open(&af, path)) {
        snprintf(err, errcap, "%s", af.err);
        return -1;
    }
    atomic_write(&af, h, sizeof(h));
    atomic_write(&af, name, sizeof(name));
    atomic_write(&af, rs, sizeof(*rs));
    atomic_write(&af, o->state, sizeof(float) * o->n * (size_t)o->def->state_per_param);
    return finish(&af, err, errcap);
}

int ckpt_load_state(Optimizer* o, RunState* rs, const char* path, char* err, size_t errcap) {
    if (verify_trailer(path, 1024 + 32 + sizeof(RunState), err, errcap)) return -1;
    FILE* f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errcap, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    int32_t h[256];
    char name[32];
    int rc = -1;
    if (read_exact(f, h, sizeof(h), path, "the header", err, errcap)) goto done;
    if (h[0] != STATE_MAGIC || h[1] != CKPT_VERSION) {
        snprintf(err, errcap, "%s: not an attnlab run-state file (magic %d version %d)", path, h[0],
                 h[1]);
        goto done;
    }
    if (read_exact(f, name, sizeof(name), path, "the optimizer name", err, errcap)) goto done;
    name[31] = '\0';
    if (strcmp(name, o->def->name) != 0 || (size_t)get64(h, 2) != o->n ||
        h[6] != o->def->state_per_param) {
        snprintf(err, errcap,
                 "%s: optimizer state is %s over %lld parameters; the run uses %s "
                 "over %zu",
                 path, name, (long long)get64(h, 2), o->def->name, o->n);
        goto done;
    }
    if (read_exact(f, rs, sizeof(*rs), path, "the run state", err, errcap)) goto done;
    if (read_exact(f, o->state, sizeof(float) * o->n * (size_t)o->def->state_per_param, path,
                   "the optimizer state", err, errcap))
        goto done;
    o->t = (long)get64(h, 4);
    rc = 0;
done:
    fclose(f);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// llm.c model files

int llmc_save(const GPT2* m, const char* path, char* err, size_t errcap) {
    const GPT2Config* c = &m->cfg;
    if (!c->mlp) {
        snprintf(err, errcap,
                 "%s: llm.c model files have an MLP in every block (this model has mlp = 0)", path);
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
    // llm.c's tensors are the first 16 specs and contiguous at the start of the buffer
    size_t n = m->specs[GPT2_NUM_LLMC - 1].offset + m->specs[GPT2_NUM_LLMC - 1].size;
    atomic_write(&af, m->params, sizeof(float) * n);
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
    size_t L = (size_t)h[4], C = (size_t)h[6];
    size_t nparams = (size_t)h[7] * C + (size_t)h[2] * C + L * (12 * C * C + 13 * C) + 2 * C;
    if (have_st && (size_t)st.st_size != 1024 + 4 * nparams) {
        snprintf(err, errcap, "%s: size %lld bytes, expected %zu for these sizes", path,
                 (long long)st.st_size, 1024 + 4 * nparams);
        return -1;
    }
    return 0;
}

int llmc_load(GPT2* m, const char* path, char* err, size_t errcap) {
    GPT2Config fc;
    if (llmc_read_config(path, &fc, err, errcap)) return -1;
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
    size_t n = m->specs[GPT2_NUM_LLMC - 1].offset + m->specs[GPT2_NUM_LLMC - 1].size;
    int rc = fseek(f, 1024, SEEK_SET) == 0 && read_exact(f, m->params, sizeof(float) * n, path,
                                                         "the parameters", err, errcap) == 0
                 ? 0
                 : -1;
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
        if (verify_trailer(mp, 1024, err, sizeof(err)) == 0 &&
            verify_trailer(sp, 1024, err, sizeof(err)) == 0)
            return steps[i];
        fprintf(stderr, "attnlab: skipping damaged checkpoint at step %ld: %s\n", steps[i], err);
    }
    return -1;
}

// Remove temp files of checkpoint writes that a crashed process left behind
// ("model_N.bin.tmp.PID" / "state_N.bin.tmp.PID" whose PID is not running).
static void remove_stale_temps(const char* dir) {
    DIR* d = opendir(dir);
    if (!d) return;
    struct dirent* e;
    while ((e = readdir(d))) {
        const char* t = strstr(e->d_name, ".bin.tmp.");
        if (!t || (strncmp(e->d_name, "model_", 6) != 0 && strncmp(e->d_name, "state_", 6) != 0))
            continue;
        long pid = strtol(t + 9, NULL, 10);
        if (pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char p[1100];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
}

void ckpt_prune(const char* dir, int keep) {
    remove_stale_temps(dir);
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
