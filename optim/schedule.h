// optim/schedule.h: learning-rate schedules: linear warmup from 0 over `warmup` steps, then
// cosine / linear decay to min_lr at max_steps, or constant. Looked up once by name.
#ifndef ATTNLAB_SCHEDULE_H
#define ATTNLAB_SCHEDULE_H

typedef enum { LR_COSINE, LR_CONSTANT, LR_LINEAR } LrKind;

typedef struct {
    LrKind kind;
    float lr, min_lr;
    int warmup, max_steps;
} LrSchedule;

// 0 ok, -1 unknown name
int lr_schedule_init(LrSchedule* s, const char* name, float lr, float min_lr, int warmup,
                     int max_steps);
// Learning rate for 0-based step `step`. Warmup: lr*(step+1)/warmup for step < warmup.
// After warmup, with ratio = (step - warmup) / (max_steps - warmup) clamped to [0, 1]:
//   cosine:   min_lr + 0.5 (1 + cos(pi ratio)) (lr - min_lr)
//   linear:   min_lr + (1 - ratio) (lr - min_lr)
//   constant: lr
// Steps at or past max_steps get min_lr (cosine, linear); max_steps <= warmup means the decay has
// no length, so every step after warmup gets min_lr. Computed in double, returned as float.
float lr_schedule_get(const LrSchedule* s, int step);
// The accepted names, comma-separated, for --help and error messages.
const char* lr_schedule_names(void);

#endif
