// common/eta.h: the trainer's time left (the console's "ETA") and its account of where the time
// went. A run spends its time in training steps and in phases that run at step boundaries:
// evaluation, samples, diagnostics (metrics and attention dumps) and checkpoints. Each phase's
// cost is measured as it happens; the time left is the remaining steps at the mean step time plus,
// per phase, its remaining occurrences (counted from its cadence) at its mean measured cost.
//
// Boundaries: boundary n is the point after n optimizer steps, n in [0, max_steps]. A phase with
// intervals every[0], every[1] runs at every boundary that is a multiple of either (an interval
// <= 0 is unused), and, with at_end, at the last boundary max_steps as well. That is the
// cadence of all four phases of train.c: evaluation (eval_every, and at the end), samples
// (sample_every, and at the end), diagnostics (metrics_every or dump_attention_every, and at
// the end), checkpoints (checkpoint_every before the end, and the final one).
#ifndef ATTNLAB_ETA_H
#define ATTNLAB_ETA_H

enum { ETA_EVAL, ETA_SAMPLE, ETA_DIAG, ETA_CKPT, ETA_NPHASES };

typedef struct {
    long every[2];  // intervals in steps (<= 0: unused)
    int at_end;     // also at the last boundary
    int on;         // the phase runs in this run at all
    int pending;    // when the ETA is printed after n steps, this phase's boundary-n run is still
                    // to come (evaluation, samples, checkpoints: 1; diagnostics run before: 0)
    double seconds; // measured so far
    long count;     // occurrences measured so far
} EtaPhase;

typedef struct {
    EtaPhase ph[ETA_NPHASES];
    double step_s;  // training-step seconds measured, the first step of the process excluded
    long step_n;    // steps in step_s
    double first_s; // the first step's seconds (the estimate until a second step is measured)
} Eta;

// Boundaries s with from < s <= to that are a multiple of every[0] or every[1] (intervals <= 0
// unused), or equal `to` when at_end. 0 when to <= from.
long eta_occurrences(long from, long to, const long every[2], int at_end);

// The cadences of train.c's phases from its config values (have_val: evaluation runs at all).
void eta_init(Eta* e, int have_val, long eval_every, long sample_every, long metrics_every,
              long dump_every, long checkpoint_every);
// One training step took `seconds` (first: the process's first step, kept out of the mean).
void eta_step(Eta* e, double seconds, int first);
// Phase p took `seconds` once.
void eta_add(Eta* e, int p, double seconds);

// Seconds left after `done` of `total` steps: (total - done) x the mean step time, plus for each
// phase that is on, eta_occurrences(from, total) x its mean measured cost, where from = done - 1
// for a pending phase (its boundary-`done` run is still to come), done otherwise. *untimed (if
// not NULL) gets the number of phases with occurrences left but none measured yet: the time left
// is then a lower bound (the console marks it with "+").
double eta_seconds(const Eta* e, long done, long total, int* untimed);

// eta_seconds as util_format_duration writes it ("3m05s"), with "+" appended when it is a lower
// bound (a phase with occurrences left is not timed yet).
void eta_format(const Eta* e, long done, long total, char* buf, int cap);

// "training steps 3m10s (400x), evaluation 12.3s (6x), diagnostics 4.1s (10x), checkpoints 2.0s
// (3x)": every phase that ran, into buf; "" when none did.
void eta_summary(const Eta* e, char* buf, int cap);

#endif
