// optim/schedule.h: learning-rate schedules: linear warmup from 0 over `warmup` steps, then
// cosine / linear decay to min_lr at max_steps, constant, or warmup-stable-decay (wsd: constant
// lr, then a linear decay to min_lr over the last `decay` steps). Looked up once by name.
#ifndef ATTNLAB_SCHEDULE_H
#define ATTNLAB_SCHEDULE_H

#include "common/config.h"

typedef enum { LR_COSINE, LR_CONSTANT, LR_LINEAR, LR_WSD } LrKind;

typedef struct {
    LrKind kind;
    float lr, min_lr;
    int warmup, max_steps;
    int decay; // wsd: steps of the decay phase (lr_schedule_set_decay); 0: no decay
} LrSchedule;

// 0 ok, -1 unknown name. A wsd schedule starts with no decay phase: lr_schedule_set_decay.
int lr_schedule_init(LrSchedule* s, const char* name, float lr, float min_lr, int warmup,
                     int max_steps);
// wsd: the decay phase is the last `decay` steps before max_steps (lr_schedule_decay_steps).
void lr_schedule_set_decay(LrSchedule* s, int decay);
// The length of a wsd decay phase: decay_steps when > 0, else decay_fraction x max_steps rounded
// to the nearest step (halves up).
int lr_schedule_decay_steps(int max_steps, int decay_steps, double decay_fraction);
// Learning rate for 0-based step `step`. Warmup: lr*(step+1)/warmup for step < warmup.
// After warmup, with ratio = (step - warmup) / (max_steps - warmup) clamped to [0, 1]:
//   cosine:   min_lr + 0.5 (1 + cos(pi ratio)) (lr - min_lr)
//   linear:   min_lr + (1 - ratio) (lr - min_lr)
//   constant: lr
//   wsd:      lr until step S = max(warmup, max_steps - decay), then
//             min_lr + (1 - (step - S) / (max_steps - S)) (lr - min_lr), clamped to min_lr
//             (Hägele et al. 2024: warmup, a constant phase, a linear cooldown at the end)
// Steps at or past max_steps get min_lr (cosine, linear, wsd); max_steps <= warmup means the decay
// has no length, so every step after warmup gets min_lr (wsd: lr while decay = 0). Computed in
// double, returned as float.
float lr_schedule_get(const LrSchedule* s, int step);
// The schedule of a run's config (lr_schedule, lr, min_lr, warmup_steps, max_steps and the wsd
// decay from decay_steps / decay_fraction). 0, or -1 for an unknown lr_schedule.
int lr_schedule_from_config(LrSchedule* s, const Config* c);
// The learning rate of step `step` under the config text `text` (a checkpoint's saved config);
// NAN when the text does not read back.
double lr_schedule_saved(const char* text, long step);
// The accepted names, comma-separated, for --help and error messages.
const char* lr_schedule_names(void);

#endif
