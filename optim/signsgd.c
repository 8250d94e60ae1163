// optim/signsgd.c: SignSGD (Bernstein et al. 2018) with decoupled weight decay:
//   p -= lr (sign(g) + wd p),   sign(0) = 0. No state.
#include "optim/optim.h"

static void signsgd_update(float* p, const float* g, float* state, size_t stride, size_t n,
                           float lr, float wd, const OptimHParams* h, long t) {
    (void)state, (void)stride, (void)h, (void)t;
#pragma omp parallel for schedule(static) if (n >= OPTIM_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float s = (g[i] > 0.0f) - (g[i] < 0.0f);
        p[i] -= lr * (s + wd * p[i]);
    }
}

const OptimizerDef optim_signsgd = {
    .name = "signsgd",
    .formula = "p-=lr(sign(g)+wd p)",
    .state_per_param = 0,
    .update = signsgd_update,
};
