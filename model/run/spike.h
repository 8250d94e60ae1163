// model/run/spike.h: loss-spike detector of the training loop. A train loss above SPIKE_K times the
// median of the last SPIKE_WINDOW losses (once at least SPIKE_MIN_HIST are known) is a spike;
// spike_check logs it as {"event":"loss_spike"} and on stderr. The median of an even count is the
// mean of the two middle values. Only the trainer (train.c) uses it; it sits in common/ because
// the root holds no file besides train.c.
#ifndef ATTNLAB_SPIKE_H
#define ATTNLAB_SPIKE_H

#include "common/json.h"
#include "common/runlog.h"

#define SPIKE_K        3.0
#define SPIKE_WINDOW   50
#define SPIKE_MIN_HIST 10

typedef struct {
    double hist[SPIKE_WINDOW];
    int n, pos; // losses held, next slot
} SpikeWindow;

// spike_push of the train loss of the step that ends at `step` (its record's step); a spike is
// reported as "attnlab: loss spike at step STEP: ..." on stderr (when `print`: rank 0 under
// mpirun) and as the record {"step": STEP, "event": "loss_spike", "train_loss", "median",
// "factor"} in rl (built in j). Returns 1 for a spike, else 0.
int spike_check(SpikeWindow* w, double loss, long step, int print, JsonBuf* j, RunLog* rl);

#endif
