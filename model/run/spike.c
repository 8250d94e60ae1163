// model/run/spike.c: the loss-spike detector (spike.h): a sliding window of recent losses, the
// median test against it, and the report of a spike (stderr and metrics.jsonl).
#include "model/run/spike.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

// Add `loss`; returns the median of the window before it if it is a spike, else -1.
static double spike_push(SpikeWindow* w, double loss) {
    double med = -1;
    if (w->n >= SPIKE_MIN_HIST) {
        double tmp[SPIKE_WINDOW];
        memcpy(tmp, w->hist, sizeof(double) * (size_t)w->n);
        qsort(tmp, (size_t)w->n, sizeof(double), cmp_double);
        double m = w->n % 2 ? tmp[w->n / 2] : 0.5 * (tmp[w->n / 2 - 1] + tmp[w->n / 2]);
        if (loss > SPIKE_K * m) med = m;
    }
    w->hist[w->pos] = loss;
    w->pos = (w->pos + 1) % SPIKE_WINDOW;
    if (w->n < SPIKE_WINDOW) w->n++;
    return med;
}

int spike_check(SpikeWindow* w, double loss, long step, int print, JsonBuf* j, RunLog* rl) {
    const int hist = w->n;
    const double med = spike_push(w, loss);
    if (med < 0) return 0;
    if (print)
        fprintf(stderr,
                "attnlab: loss spike at step %ld: %.4f > %.0fx the median %.4f of the last %d "
                "steps\n",
                step, loss, SPIKE_K, med, hist);
    runlog_event(j, step, "loss_spike");
    json_num(j, "train_loss", loss);
    json_num(j, "median", med);
    json_num(j, "factor", SPIKE_K);
    runlog_end(rl, j);
    return 1;
}
