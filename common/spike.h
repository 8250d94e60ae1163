// common/spike.h: loss-spike detector of the training loop. A train loss above SPIKE_K times the
// median of the last SPIKE_WINDOW losses (once at least SPIKE_MIN_HIST are known) is a spike; the
// trainer logs it as {"event":"loss_spike"} and on stderr. The median of an even count is the mean
// of the two middle values. Only the trainer (train.c) uses it; it sits in common/ because the
// root holds no file besides train.c.
#ifndef ATTNLAB_SPIKE_H
#define ATTNLAB_SPIKE_H

#define SPIKE_K        3.0
#define SPIKE_WINDOW   50
#define SPIKE_MIN_HIST 10

typedef struct {
    double hist[SPIKE_WINDOW];
    int n, pos; // losses held, next slot
} SpikeWindow;

// Add `loss`; returns the median of the window before it if it is a spike, else -1.
double spike_push(SpikeWindow* w, double loss);

#endif
