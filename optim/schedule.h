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
float lr_schedule_get(const LrSchedule* s, int step);

#endif
