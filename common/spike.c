// common/spike.c: the loss-spike detector (spike.h): a sliding window of recent losses and the
// median test against it.
#include "common/spike.h"

#include <stdlib.h>
#include <string.h>

static int cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

double spike_push(SpikeWindow* w, double loss) {
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
