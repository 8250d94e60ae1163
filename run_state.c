// run_state.c: the run-state file of run_state.h.
//
// state_NNNNNNNN.bin (version 1): int32[256] header {STATE_MAGIC, version, optimizer n (int64,
// words 2-3), optimizer t (int64, words 4-5), optimizer state arrays (word 6), step (int64, words
// 8-9)}, the optimizer's name[32], the loop record {int64 step, sampling RNG (4 x uint64), the
// training loader's position (DATALOADER_STATE_BYTES), float best_val, int32 skips}, the
// optimizer's state arrays, the checkpoint trailer. Integers little-endian.
#include "run_state.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

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
