// run_state.c: the run-state file of run_state.h, the trainer's checkpoints (model file + run-state
// file: saving, and resuming from the newest complete pair), and what a resumed run must keep for
// its saved data position to point at the same tokens (run_state_check_resume).
//
// state_NNNNNNNN.bin (version 1): int32[256] header {STATE_MAGIC, version, optimizer n (int64,
// words 2-3), optimizer t (int64, words 4-5), optimizer state arrays (word 6), step (int64, words
// 8-9)}, the optimizer's name[32], the loop record {int64 step, sampling RNG (4 x uint64), the
// training loader's position (DATALOADER_STATE_BYTES), float best_val, int32 skips}, the
// optimizer's state arrays, the checkpoint trailer. Integers little-endian.
#include "run_state.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/dist.h"
#include "common/util.h"
#include "model/checkpoint.h"

#define LOOP_RECORD_BYTES (8 + 32 + DATALOADER_STATE_BYTES + 4 + 4)

static void put64(int32_t* h, int64_t v) {
    h[0] = (int32_t)(uint32_t)((uint64_t)v & 0xffffffffu);
    h[1] = (int32_t)(uint32_t)((uint64_t)v >> 32);
}
static int64_t get64(const int32_t* h) {
    return (int64_t)(((uint64_t)(uint32_t)h[1] << 32) | (uint32_t)h[0]);
}

int run_state_save(const char* path, const LoopState* ls, const DataLoaderState* pos,
                   const Optimizer* opt, char* err, size_t errcap) {
    OptimStateHeader oh;
    optim_state_header(opt, &oh);
    int32_t h[256] = {0};
    h[0] = STATE_MAGIC;
    h[1] = CKPT_VERSION;
    put64(h + 2, oh.n);
    put64(h + 4, oh.t);
    h[6] = oh.state_per_param;
    put64(h + 8, ls->step);
    unsigned char rec[LOOP_RECORD_BYTES] = {0}; // little-endian fields (x86-64 and arm64)
    int64_t step = ls->step;
    int32_t skips = ls->skips;
    memcpy(rec, &step, 8);
    memcpy(rec + 8, ls->rng.s, 32);
    dataloader_state_write(pos, rec + 40);
    memcpy(rec + 40 + DATALOADER_STATE_BYTES, &ls->best_val, 4);
    memcpy(rec + 44 + DATALOADER_STATE_BYTES, &skips, 4);
    AtomicFile af;
    if (atomic_open(&af, path)) {
        snprintf(err, errcap, "%s", af.err);
        return -1;
    }
    atomic_write(&af, h, sizeof(h));
    atomic_write(&af, oh.name, OPTIM_NAME_BYTES);
    atomic_write(&af, rec, sizeof(rec));
    optim_state_write(opt, &af);
    return ckpt_finish_file(&af, err, errcap);
}

int run_state_load(const char* path, LoopState* ls, DataLoaderState* pos, Optimizer* opt, char* err,
                   size_t errcap) {
    if (ckpt_verify_file(path, 1024 + OPTIM_NAME_BYTES + LOOP_RECORD_BYTES, err, errcap)) return -1;
    FILE* f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errcap, "%s: cannot open", path);
        return -1;
    }
    int32_t h[256];
    OptimStateHeader oh;
    unsigned char rec[LOOP_RECORD_BYTES];
    int rc = -1;
    if (fread(h, 4, 256, f) != 256 || fread(oh.name, 1, OPTIM_NAME_BYTES, f) != OPTIM_NAME_BYTES ||
        fread(rec, 1, sizeof(rec), f) != sizeof(rec)) {
        snprintf(err, errcap, "%s: read error", path);
        goto done;
    }
    if (h[0] != STATE_MAGIC || h[1] != CKPT_VERSION) {
        snprintf(err, errcap, "%s: not an attnlab run-state file (magic %d version %d)", path, h[0],
                 h[1]);
        goto done;
    }
    oh.n = get64(h + 2);
    oh.t = get64(h + 4);
    oh.state_per_param = h[6];
    if (optim_state_accept(opt, &oh, path, err, errcap) ||
        optim_state_read(opt, f, path, err, errcap))
        goto done;
    int64_t step;
    int32_t skips;
    memcpy(&step, rec, 8);
    memcpy(ls->rng.s, rec + 8, 32);
    dataloader_state_read(pos, rec + 40);
    memcpy(&ls->best_val, rec + 40 + DATALOADER_STATE_BYTES, 4);
    memcpy(&skips, rec + 44 + DATALOADER_STATE_BYTES, 4);
    ls->step = (long)step;
    ls->skips = skips;
    rc = 0;
done:
    fclose(f);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// exact resume: the same data, batch geometry and seed

#define DATA_LINE "# train_data file: "

void run_state_append_data_text(char** text, const DataLoader* dl) {
    size_t len = strlen(*text), cap = len + 1;
    char* out = *text;
    for (int i = 0; i < dl->nfiles; i++) {
        struct stat st;
        char line[1400];
        if (stat(dl->files[i], &st) != 0) memset(&st, 0, sizeof(st));
        int n = snprintf(line, sizeof(line), DATA_LINE "%s (%lld bytes, mtime %lld.%09ld)\n",
                         dl->files[i], (long long)st.st_size, (long long)st.st_mtim.tv_sec,
                         (long)st.st_mtim.tv_nsec);
        if (n < 0) continue;
        if (len + (size_t)n + 1 > cap) out = reallocCheck(out, cap = 2 * (len + (size_t)n + 1));
        memcpy(out + len, line, (size_t)n + 1);
        len += (size_t)n;
    }
    *text = out;
}

// The k-th (0-based) DATA_LINE of text (without the prefix and newline) into buf; 0 if none.
static int data_line(const char* text, int k, char* buf, size_t cap) {
    for (const char* p = text; (p = strstr(p, DATA_LINE)) != NULL; p += strlen(DATA_LINE)) {
        if (p != text && p[-1] != '\n') continue;
        if (k-- > 0) continue;
        const char* v = p + strlen(DATA_LINE);
        size_t n = strcspn(v, "\n");
        snprintf(buf, cap, "%.*s", (int)(n < cap ? n : cap - 1), v);
        return 1;
    }
    return 0;
}

// The ranks of the run that wrote `saved` ("# data parallel: N ranks ..."; 1 without the line).
static int saved_ranks(const char* saved) {
    const char* p = strstr(saved, "# data parallel: ");
    return p ? atoi(p + strlen("# data parallel: ")) : 1;
}

// The checks of run_state_check_resume on the saved config text `saved` of `what`.
static int check_resume(const char* saved, const char* what, const Config* now,
                        const char* now_data, int nranks, char* err, size_t errcap) {
    Config old;
    config_defaults(&old);
    char perr[1024];
    if (config_load_text(&old, saved, what, perr, sizeof(perr)) != 0) {
        snprintf(err, errcap, "%s: the saved config cannot be read back (%s)", what, perr);
        return -1;
    }
    static const char* const KEYS[] = {"batch_size", "seq_len", "seed", "shuffle"};
    const char* why = "the saved data position would point at other tokens";
    for (size_t i = 0; i < sizeof(KEYS) / sizeof(KEYS[0]); i++) {
        const ConfigField* f = config_field(KEYS[i]);
        char a[CONFIG_STR + 32], b[CONFIG_STR + 32];
        config_format_value(a, sizeof(a), &old, f);
        config_format_value(b, sizeof(b), now, f);
        if (strcmp(a, b) != 0) {
            snprintf(err, errcap,
                     "key '%s' was '%s' in %s, now '%s': %s; set it back, or train into a new "
                     "out_dir",
                     f->key, a, what, b, why);
            return -1;
        }
    }
    const int on = saved_ranks(saved);
    if ((long)on * old.grad_accum != (long)nranks * now->grad_accum) {
        snprintf(err, errcap,
                 "key 'grad_accum' was %d on %d rank(s) in %s (global batch %ld), now %d on %d "
                 "rank(s) (global batch %ld): %s; keep ranks x grad_accum",
                 old.grad_accum, on, what, (long)on * old.grad_accum, now->grad_accum, nranks,
                 (long)nranks * now->grad_accum, why);
        return -1;
    }
    char a[1400], b[1400];
    if (!data_line(saved, 0, a, sizeof(a))) { // written before the file list was saved
        if (dist_is_root())
            fprintf(stderr,
                    "attnlab: %s records no list of its training files (an older trainer wrote "
                    "it): the data is not checked against it\n",
                    what);
        return 0;
    }
    for (int k = 0;; k++) {
        int ha = data_line(saved, k, a, sizeof(a)), hb = data_line(now_data, k, b, sizeof(b));
        if (!ha && !hb) return 0;
        if (!ha || !hb || strcmp(a, b) != 0) {
            snprintf(err, errcap,
                     "key 'train_data': file %d was '%s' in %s, now '%s': the files changed since "
                     "the checkpoint, so %s; restore them, or train into a new out_dir",
                     k + 1, ha ? a : "(none)", what, hb ? b : "(none)", why);
            return -1;
        }
    }
}

int run_state_check_resume(const char* model_path, const Config* now, const char* now_text,
                           int nranks, char* err, size_t errcap) {
    GPT2Config sc;
    char att[CONFIG_STR], what[1200], *saved = NULL;
    long step;
    if (ckpt_read_info(model_path, &sc, att, sizeof(att), &saved, &step, err, errcap)) return -1;
    snprintf(what, sizeof(what), "the checkpoint %s", model_path);
    int rc = check_resume(saved ? saved : "", what, now, now_text, nranks, err, errcap);
    free(saved);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// the trainer's checkpoints: the model file (model/checkpoint.h) and the run-state file

static void checkpoint_paths(const RunParts* r, long step, char* mp, char* sp, size_t cap) {
    snprintf(mp, cap, "%s/model_%08ld.bin", r->cfg->out_dir, step);
    snprintf(sp, cap, "%s/state_%08ld.bin", r->cfg->out_dir, step);
}

int run_checkpoint_save(const RunParts* r, long step) {
    char mp[1100], sp[1100], err[2048];
    checkpoint_paths(r, step, mp, sp, sizeof(mp));
    r->ls->step = step;
    Optimizer full;
    const Optimizer* opt = dp_state_for_save(r->dp, r->opt, &full, r->model->num_params);
    if (!opt) return 0; // under mpirun only rank 0 writes (the state was gathered to it)
    DataLoaderState pos = *r->data_pos;
    if (r->train) dataloader_get_state(r->train, &pos);
    int bad = ckpt_save_model(r->model, mp, step, r->config_text, err, sizeof(err)) ||
              run_state_save(sp, r->ls, &pos, opt, err, sizeof(err));
    dp_state_done(r->dp, &full);
    if (bad) {
        fprintf(stderr,
                "attnlab: checkpoint at step %ld failed: %s (previous checkpoints are "
                "intact)\n",
                step, err);
        return -1;
    }
    ckpt_prune(r->cfg->out_dir, r->cfg->keep_last);
    return 0;
}

long run_checkpoint_resume(const RunParts* r, int* resumed) {
    const char* dir = r->cfg->out_dir;
    const int N = dp_size(r->dp);
    long latest = r->cfg->resume ? ckpt_find_latest(dir) : -1;
    dist_bcast(&latest, sizeof(latest), 0, "resume step"); // every rank takes rank 0's choice
    if (latest < 0) {
        if (r->cfg->resume)
            printf("resume = 1 but %s has no complete checkpoint: starting from step 0\n", dir);
        return 0;
    }
    if (latest >= r->cfg->max_steps) {
        printf("%s: the run is finished (checkpoint at step %ld, max_steps = %d): nothing to do\n",
               dir, latest, r->cfg->max_steps);
        return -1;
    }
    char mp[1100], sp[1100], err[2048] = "";
    checkpoint_paths(r, latest, mp, sp, sizeof(mp));
    long s;
    Optimizer full; // zero = 1: the file holds the full state; this rank keeps its shard
    if (dp_sharded(r->dp)) optim_init(&full, r->opt->def, r->model->num_params);
    Optimizer* into = dp_sharded(r->dp) ? &full : r->opt;
    int bad = run_state_check_resume(mp, r->cfg, r->config_text, N, err, sizeof(err)) ||
              ckpt_load_model(r->model, mp, 1, &s, NULL, 0, err, sizeof(err)) ||
              run_state_load(sp, r->ls, r->data_pos, into, err, sizeof(err)) ||
              (r->train && dataloader_set_state(r->train, r->data_pos, err, sizeof(err)));
    char msg[2100];
    snprintf(msg, sizeof(msg), "cannot resume: %s", err);
    dist_exit_if_failed(bad, EXIT_USAGE, msg);
    if (dp_sharded(r->dp)) {
        dp_take_shard(r->dp, &full, r->opt);
        optim_free(&full);
    }
    printf("resuming from step %ld (%s)\n", r->ls->step, mp);
    *resumed = 1;
    return r->ls->step;
}
