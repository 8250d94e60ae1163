// optim/lion.c: Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"):
//   c = b1 m + (1-b1) g;  p -= lr (sign(c) + wd p);  m = b2 m + (1-b2) g,   sign(0) = 0.
// The paper's defaults are b1 = 0.9, b2 = 0.99 with an lr 3-10x smaller than AdamW's and a
// correspondingly larger weight decay. State: m (1 array).
#include "optim/optim.h"

static void lion_update(float* p, const float* g, float* state, size_t stride, size_t n, float lr,
                        float wd, const OptimHParams* h, long t) {
    (void)stride, (void)t;
    float* m = state;
    const float b1 = h->beta1, b2 = h->beta2;
#pragma omp parallel for schedule(static) if (n >= OPTIM_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float c = b1 * m[i] + (1.0f - b1) * g[i];
        float s = (c > 0.0f) - (c < 0.0f);
        p[i] -= lr * (s + wd * p[i]);
        m[i] = b2 * m[i] + (1.0f - b2) * g[i];
    }
}

const OptimizerDef optim_lion = {
    .name = "lion",
    .formula = "c=b1 m+(1-b1)g; p-=lr(sign(c)+wd p); m=b2 m+(1-b2)g",
    .state_per_param = 1,
    .update = lion_update,
};
