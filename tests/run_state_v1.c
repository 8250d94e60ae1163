// tests/run_state_v1.c: the version-1 run-state writer of tests/run_state_v1.h (the old
// common/run_state.c's run_state_begin and optim/'s array writer, kept for the tests), and a
// reader through the trainer's calls.
#include "tests/run_state_v1.h"

#include <stdint.h>
#include <string.h>

static void put64(int32_t* h, int64_t v) {
    h[0] = (int32_t)(uint32_t)((uint64_t)v & 0xffffffffu);
    h[1] = (int32_t)(uint32_t)((uint64_t)v >> 32);
}

int test_run_state_v1_write(const char* path, const LoopState* loop, const Optimizer* o,
                            const DataLoaderState* pos, char* err, size_t errcap) {
    int32_t h[256] = {0};
    h[0] = RUN_STATE_MAGIC;
    h[1] = 1;
    put64(h + 2, (int64_t)o->n);
    put64(h + 4, (int64_t)o->t);
    h[6] = o->def->state_per_param;
    put64(h + 8, loop->step);
    char name[32] = {0};
    util_strlcpy(name, o->def->name, sizeof(name));
    unsigned char rec[104] = {0}; // little-endian fields (x86-64 and arm64)
    int64_t step = loop->step;
    int32_t skips = loop->skips;
    memcpy(rec, &step, 8);
    memcpy(rec + 8, loop->rng.s, 32);
    dataloader_state_write(pos, rec + 40);
    memcpy(rec + 96, &loop->best_val, 4);
    memcpy(rec + 100, &skips, 4);
    AtomicFile af;
    if (atomic_open(&af, path)) {
        snprintf(err, errcap, "%s", af.err);
        return -1;
    }
    atomic_write(&af, h, sizeof(h));
    atomic_write(&af, name, sizeof(name));
    atomic_write(&af, rec, sizeof(rec));
    atomic_write(&af, o->state, sizeof(float) * o->n * (size_t)o->def->state_per_param);
    return atomic_finish(&af, err, errcap);
}

int test_run_state_read(const char* path, LoopState* loop, Optimizer* o, DataLoaderState* pos,
                        char* err, size_t errcap) {
    static const char* const SECTIONS[] = {DATALOADER_STATE_SECTION, OPTIM_STATE_SECTION};
    RunStateReader r;
    if (run_state_open(&r, path, SECTIONS, 2, err, errcap)) return -1;
    *loop = r.loop;
    int bad = optim_state_get(o, &r, err, errcap) || dataloader_state_get(pos, &r, err, errcap);
    run_state_close(&r);
    return bad ? -1 : 0;
}
