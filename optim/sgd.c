// optim/sgd.c: SGD with heavy-ball momentum (PyTorch semantics, dampening 0, no Nesterov) and
// decoupled weight decay:
//   buf = b1 buf + g   (first step: buf = g, which the zeroed state gives for free)
//   p -= lr (buf + wd p)
// beta1 is the momentum; beta1 = 0 is plain SGD. State: buf (1 array).
#include "optim/optim.h"

static void sgd_update(float* p, const float* g, float* state, size_t stride, size_t n, float lr,
                       float wd, const OptimHParams* h, long t) {
    (void)stride;
    float* buf = state;
    const float b1 = h->beta1;
#pragma omp parallel for schedule(static) if (n >= OPTIM_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        // PyTorch initialises the buffer to g on step 1 (not b1*0 + g, which is the same value
        // except for a NaN or Inf already sitting in the state)
        float bi = t == 1 ? g[i] : b1 * buf[i] + g[i];
        buf[i] = bi;
        p[i] -= lr * (bi + wd * p[i]);
    }
}

const OptimizerDef optim_sgd = {
    .name = "sgd",
    .formula = "buf=b1 buf+g; p-=lr(buf+wd p)  (beta1 = momentum)",
    .state_per_param = 1,
    .update = sgd_update,
};
