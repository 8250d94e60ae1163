// optim/schedule.c: learning-rate schedules (linear warmup, then cosine / linear decay to min_lr
// at max_steps, or constant), as llm.c and nanoGPT define them, and warmup-stable-decay (wsd) as
// Hägele et al. 2024 ("Scaling Laws and Compute-Optimal Training Beyond Fixed Training
// Durations") define it with a linear cooldown. The name is resolved once at start-up;
// lr_schedule_get is a switch on the kind.
#include "optim/schedule.h"

#include <math.h>
#include <string.h>

#include "common/config.h"

static const struct {
    const char* name;
    LrKind kind;
} SCHEDULES[] = {
    {"cosine", LR_COSINE},
    {"linear", LR_LINEAR},
    {"constant", LR_CONSTANT},
    {"wsd", LR_WSD},
};
#define NSCHED ((int)(sizeof(SCHEDULES) / sizeof(SCHEDULES[0])))

int lr_schedule_init(LrSchedule* s, const char* name, float lr, float min_lr, int warmup,
                     int max_steps) {
    for (int i = 0; i < NSCHED; i++) {
        if (name && strcmp(SCHEDULES[i].name, name) == 0) {
            s->kind = SCHEDULES[i].kind;
            s->lr = lr;
            s->min_lr = min_lr;
            s->warmup = warmup > 0 ? warmup : 0;
            s->max_steps = max_steps;
            s->decay = 0;
            return 0;
        }
    }
    return -1;
}

void lr_schedule_set_decay(LrSchedule* s, int decay) {
    s->decay = decay > 0 ? decay : 0;
}

int lr_schedule_decay_steps(int max_steps, int decay_steps, double decay_fraction) {
    if (decay_steps > 0) return decay_steps;
    if (max_steps <= 0 || !(decay_fraction > 0)) return 0;
    return (int)floor(decay_fraction * (double)max_steps + 0.5);
}

int lr_schedule_from_config(LrSchedule* s, const Config* c) {
    if (lr_schedule_init(s, c->lr_schedule, c->lr, c->min_lr, c->warmup_steps, c->max_steps))
        return -1;
    lr_schedule_set_decay(
        s, lr_schedule_decay_steps(c->max_steps, c->decay_steps, (double)c->decay_fraction));
    return 0;
}

double lr_schedule_saved(const char* text, long step) {
    static Config c; // (large)
    LrSchedule s;
    char err[1024];
    config_defaults(&c);
    if (!text || config_load_text(&c, text, "saved config", err, sizeof(err)) != 0 ||
        lr_schedule_from_config(&s, &c) != 0)
        return NAN;
    return lr_schedule_get(&s, (int)step);
}

const char* lr_schedule_names(void) {
    return "cosine, linear, constant, wsd";
}

float lr_schedule_get(const LrSchedule* s, int step) {
    if (step < 0) step = 0;
    if (step < s->warmup) return (float)((double)s->lr * (double)(step + 1) / (double)s->warmup);
    if (s->kind == LR_CONSTANT) return s->lr;
    int start = s->warmup; // the first step of the decay
    if (s->kind == LR_WSD) {
        if (s->decay == 0) return s->lr;
        if (s->max_steps - s->decay > start) start = s->max_steps - s->decay;
        if (step < start) return s->lr;
    }
    // decay over [start, max_steps]; an empty decay interval means "already decayed"
    int span = s->max_steps - start;
    double ratio = span > 0 ? (double)(step - start) / (double)span : 1.0;
    if (ratio < 0.0) ratio = 0.0;
    if (ratio > 1.0) ratio = 1.0;
    double coeff = s->kind == LR_COSINE ? 0.5 * (1.0 + cos(M_PI * ratio)) : 1.0 - ratio;
    return (float)((double)s->min_lr + coeff * ((double)s->lr - (double)s->min_lr));
}
