// common/eta.c: the trainer's time left, from measured step and phase costs and the phases'
// cadences (eta.h).
#include "common/eta.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"

static long floordiv(long a, long b) { // b > 0
    long q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

// Multiples of k in (from, to], k > 0.
static long multiples(long from, long to, long k) {
    return floordiv(to, k) - floordiv(from, k);
}

static long gcd(long a, long b) {
    while (b) {
        long r = a % b;
        a = b;
        b = r;
    }
    return a;
}

long eta_occurrences(long from, long to, const long every[2], int at_end) {
    if (to <= from) return 0;
    const long a = every[0] > 0 ? every[0] : 0, b = every[1] > 0 ? every[1] : 0;
    long n = 0;
    if (a) n += multiples(from, to, a);
    if (b) n += multiples(from, to, b);
    if (a && b) { // inclusion-exclusion: the common multiples were counted twice
        const long g = gcd(a, b);
        if (a / g <= LONG_MAX / b)
            n -= multiples(from, to, a / g * b);
        else if (from < 0 && to >= 0) // the lcm overflows: 0 is the only common multiple
            n--;
    }
    const int end_counted = (a && to % a == 0) || (b && to % b == 0);
    if (at_end && !end_counted) n++;
    return n;
}

void eta_init(Eta* e, int have_val, long eval_every, long sample_every, long metrics_every,
              long dump_every, long checkpoint_every) {
    memset(e, 0, sizeof(*e));
    e->ph[ETA_EVAL] =
        (EtaPhase){.every = {eval_every, 0}, .at_end = 1, .on = have_val, .pending = 1};
    e->ph[ETA_SAMPLE] =
        (EtaPhase){.every = {sample_every, 0}, .at_end = 1, .on = sample_every > 0, .pending = 1};
    e->ph[ETA_DIAG] = (EtaPhase){.every = {metrics_every, dump_every},
                                 .at_end = 1,
                                 .on = metrics_every > 0 || dump_every > 0,
                                 .pending = 0};
    e->ph[ETA_CKPT] =
        (EtaPhase){.every = {checkpoint_every, 0}, .at_end = 1, .on = 1, .pending = 1};
}

void eta_step(Eta* e, double seconds, int first) {
    if (first) {
        e->first_s = seconds;
        return;
    }
    e->step_s += seconds;
    e->step_n++;
}

void eta_add(Eta* e, int p, double seconds) {
    ASSERT(p >= 0 && p < ETA_NPHASES);
    e->ph[p].seconds += seconds;
    e->ph[p].count++;
}

double eta_seconds(const Eta* e, long done, long total, int* untimed) {
    const double per_step = e->step_n ? e->step_s / (double)e->step_n : e->first_s;
    double s = per_step * (double)(total > done ? total - done : 0);
    int nu = 0;
    for (int p = 0; p < ETA_NPHASES; p++) {
        const EtaPhase* ph = &e->ph[p];
        if (!ph->on) continue;
        const long left =
            eta_occurrences(ph->pending ? done - 1 : done, total, ph->every, ph->at_end);
        if (left == 0) continue;
        if (ph->count == 0)
            nu++;
        else
            s += (double)left * ph->seconds / (double)ph->count;
    }
    if (untimed) *untimed = nu;
    return s;
}

void eta_format(const Eta* e, long done, long total, char* buf, int cap) {
    int untimed;
    util_format_duration(buf, (size_t)cap - 1, eta_seconds(e, done, total, &untimed));
    if (untimed) strcat(buf, "+");
}

void eta_summary(const Eta* e, char* buf, int cap) {
    static const char* const NAMES[ETA_NPHASES] = {"evaluation", "samples", "diagnostics",
                                                   "checkpoints"};
    const int first = e->first_s > 0;
    int n = 0;
    buf[0] = '\0';
    for (int p = -1; p < ETA_NPHASES && n < cap; p++) {
        const long k = p < 0 ? e->step_n + first : e->ph[p].count;
        if (k == 0) continue;
        char d[32];
        util_format_duration(d, sizeof(d), p < 0 ? e->step_s + e->first_s : e->ph[p].seconds);
        int w = snprintf(buf + n, (size_t)(cap - n), "%s%s %s (%ldx)", n ? ", " : "",
                         p < 0 ? "training steps" : NAMES[p], d, k);
        if (w < 0) break;
        n += w;
    }
}
