// tests/attn64_cfg.h: the configurations and the finite-difference check shared by the
// double-precision attention suites (tests/test_attn64_*.c, built on attention/ compiled with
// -DATTN_REAL_DOUBLE; see docs/testing.md, "Precision").
//
// Configurations, per registered variant (so a new variant is covered without editing tests):
//   - its defaults; every value of every choice hyperparameter;
//   - every numeric hyperparameter at three more values spread over its range (the range capped
//     at max(4 |default|, default + 10) so that [0, 1e9] windows stay meaningful), rounded for
//     integer keys, plus min + 2 for count-like keys (min >= 1, max >= 1000: windows shorter
//     than every row), plus 0 and 1 for integer keys with min 0 (0 switches a mode, e.g.
//     attn.chunk = 0 is deltanet's recurrence, 1 its one-token chunks);
//   - layer-level variants: the defaults and every choice value around each map of
//     ATTN64_INNERS, the numeric sweeps around one of them in turn (around one map only for
//     variants that never run attn.inner, ignores_inner);
//   - the settings that only act together (COMBOS in attn64_cfg.c, e.g. linear's InLine scale
//     under norm = subtract), one configuration each.
//
// The check: 4-point central differences at h = 1e-4 and h = 5e-5 in double. The two agree to
// ~1e-12 where the loss is smooth within 2h; where they do not, a kink is within reach and the
// coordinate is not counted (the inputs are drawn so that this is rare, and a vector with fewer
// than half its used coordinates checkable fails). Accepted: |num - ana| <= 1e-6 (|num| + |ana|)
// + 1e-9 max|g| + rounding noise of the loss: a 0.5% error in one entry fails.
#ifndef ATTNLAB_ATTN64_CFG_H
#define ATTNLAB_ATTN64_CFG_H

#include <stddef.h>
#include <stdint.h>

#include "attention/attention.h"

#define ATTN64_MAX_CFG 64
#define ATTN64_N_INNER 3
extern const char* const ATTN64_INNERS[ATTN64_N_INNER];

typedef struct {
    const AttnVariant* v;
    AttnHParams hp; // hp.inner set for layer-level variants
    char label[160];
} Attn64Cfg;

// The configurations of variant v (T_train, heads, head size as given); returns the count.
int attn64_cfgs(Attn64Cfg* out, const AttnVariant* v, int T_train, int NH, int hs);

// FNV-1a of a label: seeds that do not move when other variants are added.
uint64_t attn64_seed(const char* label);

typedef double (*Attn64Loss)(void* ctx);

typedef struct {
    int checked; // coordinates compared (smooth there, and used: num or ana nonzero)
    int kinks;   // coordinates skipped: the two step sizes disagree
    int unused;  // coordinates whose analytic and numeric gradients are both exactly 0
} Attn64Count;

// Compare g[0..n) with finite differences of f in x[0..n) (restored afterwards); fails the
// running Check test with `label` and `what` in the message. lmag = sum |terms| of the loss,
// for its rounding noise; gmax = max |g| over the gradients of this problem.
Attn64Count attn64_check(Attn64Loss f, void* ctx, real* x, const real* g, size_t n, double gmax,
                         double lmag, const char* label, const char* what);

real attn64_max_abs(const real* x, size_t n);

#endif
