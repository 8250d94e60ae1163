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
    o->t = 0;
    size_t nstate = (size_t)def->state_per_param * n;
    o->state = nstate ? allocFloats(nstate) : NULL; // zeroed
}

void optim_step(Optimizer* o, float* params, const float* grads, const OptimRange* ranges,
                int nranges, float lr, const OptimHParams* h) {
    long t = ++o->t; // one update count per step, shared by every range
    for (int i = 0; i < nranges; i++) {
        const OptimRange* r = &ranges[i];
        ASSERT(r->offset <= o->n && r->size <= o->n - r->offset);
        if (r->size == 0) continue;
        float wd = r->decay ? h->weight_decay : 0.0f;
        float* state = o->state ? o->state + r->offset : NULL;
        o->def->update(params + r->offset, grads + r->offset, state, o->n, r->size, lr, wd, h, t);
    }
}

void optim_free(Optimizer* o) {
    free(o->state);
    o->state = NULL;
    o->def = NULL;
    o->n = 0;
    o->t = 0;
}
