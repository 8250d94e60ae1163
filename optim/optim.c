// optim/optim.c: the optimizer registry (name -> OptimizerDef) and the driver that applies one
// optimizer step over the ranges of a flat parameter buffer, each with its weight-decay flag.
#include "optim/optim.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

// The first entry is the default optimizer.
static const OptimizerDef* const OPTIMIZERS[] = {&optim_adamw, &optim_sgd, &optim_signsgd,
                                                 &optim_lion};
#define NOPTIM ((int)(sizeof(OPTIMIZERS) / sizeof(OPTIMIZERS[0])))

static const char* const WD_MODE_NAMES[OPTIM_WD_COUNT] = {
    [OPTIM_WD_COUPLED] = "coupled",
    [OPTIM_WD_INDEPENDENT] = "independent",
};

const char* optim_wd_mode_name(int mode) {
    return mode >= 0 && mode < OPTIM_WD_COUNT ? WD_MODE_NAMES[mode] : NULL;
}

int optim_wd_mode_from_name(const char* name) {
    for (int i = 0; i < OPTIM_WD_COUNT; i++)
        if (strcmp(name, WD_MODE_NAMES[i]) == 0) return i;
    return -1;
}

float optim_decay_coeff(const OptimHParams* h) {
    if (h->wd_mode != OPTIM_WD_INDEPENDENT) return h->weight_decay;
    return h->lr_max > 0.0f ? (float)((double)h->weight_decay / (double)h->lr_max) : 0.0f;
}

const OptimizerDef* optim_lookup(const char* name) {
    if (!name) return NULL;
    for (int i = 0; i < NOPTIM; i++)
        if (strcmp(OPTIMIZERS[i]->name, name) == 0) return OPTIMIZERS[i];
    return NULL;
}

int optim_count(void) {
    return NOPTIM;
}

const OptimizerDef* optim_get(int i) {
    return (i >= 0 && i < NOPTIM) ? OPTIMIZERS[i] : NULL;
}

void optim_init(Optimizer* o, const OptimizerDef* def, size_t n) {
    ASSERT(def != NULL);
    o->def = def;
    o->n = n;
    o->base = 0;
    o->t = 0;
    size_t nstate = (size_t)def->state_per_param * n;
    o->state = nstate ? allocFloats(nstate) : NULL; // zeroed
}

void optim_step_fused(Optimizer* o, float* params, float* grads, const OptimRange* ranges,
                      int nranges, float lr, const OptimHParams* h, const OptimFuse* f) {
    const float gscale = f ? f->gscale : 1.0f;
    bf16* copy = f ? f->copy : NULL;
    long t = ++o->t; // one update count per step, shared by every range
    const size_t lo = o->base, hi = o->base + o->n;
    for (int i = 0; i < nranges; i++) {
        const OptimRange* r = &ranges[i];
        size_t a = r->offset > lo ? r->offset : lo;
        size_t e = r->offset + r->size < hi ? r->offset + r->size : hi;
        if (e <= a) continue;
        float wd = r->decay ? optim_decay_coeff(h) : 0.0f;
        float* state = o->state ? o->state + (a - lo) : NULL;
        if (o->def->update_fused) {
            o->def->update_fused(params + a, grads + a, state, o->n, e - a, lr, wd, h, t, gscale,
                                 copy ? copy + a : NULL);
            continue;
        }
        if (gscale != 1.0f) {
            float* g = grads + a;
            const size_t len = e - a;
#pragma omp parallel for schedule(static) if (len >= OPTIM_PAR_MIN)
            for (size_t k = 0; k < len; k++)
                g[k] *= gscale;
        }
        o->def->update(params + a, grads + a, state, o->n, e - a, lr, wd, h, t);
        if (copy) bf16_from_floats(copy + a, params + a, e - a);
    }
}

void optim_shard_bounds(size_t n, int nranks, size_t* b) {
    ASSERT(nranks >= 1);
    for (int r = 0; r < nranks; r++)
        b[r] = n / (size_t)nranks * (size_t)r / 16 * 16;
    b[nranks] = n;
}

void optim_init_shard(Optimizer* o, const OptimizerDef* def, size_t lo, size_t hi) {
    ASSERT(lo <= hi);
    optim_init(o, def, hi - lo);
    o->base = lo;
}

void optim_free(Optimizer* o) {
    free(o->state);
    o->state = NULL;
    o->def = NULL;
    o->n = 0;
    o->base = 0;
    o->t = 0;
}

// ---------------------------------------------------------------------------------------------
// state serialisation

static void optim_state_header(const Optimizer* o, OptimStateHeader* h) {
    memset(h, 0, sizeof(*h));
    util_strlcpy(h->name, o->def->name, sizeof(h->name));
    h->n = (int64_t)o->n;
    h->t = (int64_t)o->t;
    h->state_per_param = o->def->state_per_param;
}

// Accept a header read from `path`: the same algorithm, size and state arrays as o (else -1 with
// err "PATH: optimizer state is NAME over N parameters; the run uses NAME over N"); sets o->t.
static int optim_state_accept(Optimizer* o, const OptimStateHeader* h, const char* path, char* err,
                              size_t errcap) {
    char name[OPTIM_NAME_BYTES];
    memcpy(name, h->name, sizeof(name));
    name[sizeof(name) - 1] = '\0';
    if (strcmp(name, o->def->name) != 0 || (size_t)h->n != o->n ||
        h->state_per_param != o->def->state_per_param) {
        snprintf(err, errcap,
                 "%s: optimizer state is %s over %lld parameters; the run uses %s over %zu", path,
                 name, (long long)h->n, o->def->name, o->n);
        return -1;
    }
    o->t = (long)h->t;
    return 0;
}

// The section's payload length for o.
static uint64_t optim_state_bytes(const Optimizer* o) {
    return OPTIM_STATE_HEADER_BYTES +
           sizeof(float) * (uint64_t)o->n * (uint64_t)o->def->state_per_param;
}

void optim_state_put(const Optimizer* o, RunStateWriter* w) {
    OptimStateHeader oh;
    optim_state_header(o, &oh);
    unsigned char b[OPTIM_STATE_HEADER_BYTES];
    memcpy(b, oh.name, OPTIM_NAME_BYTES);
    run_state_put_u64(b + OPTIM_NAME_BYTES, (uint64_t)oh.n);
    run_state_put_u64(b + OPTIM_NAME_BYTES + 8, (uint64_t)oh.t);
    for (int i = 0; i < 4; i++)
        b[OPTIM_NAME_BYTES + 16 + i] = (unsigned char)((uint32_t)oh.state_per_param >> (8 * i));
    run_state_section(w, OPTIM_STATE_SECTION, optim_state_bytes(o));
    run_state_put(w, b, sizeof(b));
    run_state_put(w, o->state, sizeof(float) * o->n * (size_t)o->def->state_per_param);
}

int optim_state_get(Optimizer* o, RunStateReader* r, char* err, size_t errcap) {
    uint64_t size;
    unsigned char b[OPTIM_STATE_HEADER_BYTES];
    if (run_state_find(r, OPTIM_STATE_SECTION, &size, err, errcap)) return -1;
    if (size < sizeof(b)) {
        snprintf(err, errcap, "%s: section '%s' is %llu bytes, shorter than its %d-byte header",
                 r->path, OPTIM_STATE_SECTION, (unsigned long long)size, OPTIM_STATE_HEADER_BYTES);
        return -1;
    }
    if (run_state_get(r, b, sizeof(b), err, errcap)) return -1;
    OptimStateHeader oh;
    memcpy(oh.name, b, OPTIM_NAME_BYTES);
    oh.name[OPTIM_NAME_BYTES - 1] = '\0';
    oh.n = (int64_t)run_state_get_u64(b + OPTIM_NAME_BYTES);
    oh.t = (int64_t)run_state_get_u64(b + OPTIM_NAME_BYTES + 8);
    uint32_t spp = 0;
    for (int i = 0; i < 4; i++)
        spp |= (uint32_t)b[OPTIM_NAME_BYTES + 16 + i] << (8 * i);
    oh.state_per_param = (int32_t)spp;
    if (optim_state_accept(o, &oh, r->path, err, errcap)) return -1;
    const uint64_t want = optim_state_bytes(o);
    if (size != want) {
        snprintf(err, errcap,
                 "%s: section '%s': %s the optimizer state (%llu bytes; %s over %zu parameters "
                 "needs %llu)",
                 r->path, OPTIM_STATE_SECTION,
                 size < want ? "truncated while reading" : "extra bytes after",
                 (unsigned long long)size, o->def->name, o->n, (unsigned long long)want);
        return -1;
    }
    return run_state_get(r, o->state, sizeof(float) * o->n * (size_t)o->def->state_per_param, err,
                         errcap);
}
