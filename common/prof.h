// common/prof.h: the per-phase profile of a training step (`./bench profile`,
// docs/performance.md "Where a step's time goes"). A global table of wall-clock accumulators, one
// per phase; the code marks its phases with PROF(phase, statements...). Profiling is off unless a
// tool turns it on (prof_enable), and then each mark costs one predictable branch on a global
// flag: no clock is read, nothing is written, and no result changes either way (the marks only
// read the clock). When on, the time between two marks goes to the innermost open phase only
// (exclusive accounting): the activation rounding inside a linear layer's call counts as a cast,
// not as that matmul. Marks are honoured on the serial path only (outside OpenMP parallel
// regions); inside the attention driver's parallel loop each thread adds its row-map time to its
// own slot (prof_par_add), and the driver then moves that share of the region's wall time from
// the attention matmuls to the row maps (prof_par_split).
#ifndef ATTNLAB_PROF_H
#define ATTNLAB_PROF_H

typedef enum {
    PROF_OTHER, // step time outside every named phase
    PROF_MM_QKV_FWD,
    PROF_MM_QKV_BWD,
    PROF_MM_ATTPROJ_FWD,
    PROF_MM_ATTPROJ_BWD,
    PROF_MM_FC_FWD,
    PROF_MM_FC_BWD,
    PROF_MM_FCPROJ_FWD,
    PROF_MM_FCPROJ_BWD,
    PROF_MM_LMHEAD_FWD,
    PROF_MM_LMHEAD_BWD,
    PROF_ATTN_MM_FWD, // the attention driver except its row maps: QK^T, A.V, position encodings
    PROF_ATTN_MM_BWD,
    PROF_ATTN_ROW_FWD, // the row maps (softmax or the variant's)
    PROF_ATTN_ROW_BWD,
    PROF_LN_FWD,
    PROF_LN_BWD,
    PROF_GELU_FWD,
    PROF_GELU_BWD,
    PROF_RESID, // residual adds (forward) and the activation gradients' zeroing (backward)
    PROF_EMBED, // token and position embedding, forward and backward
    PROF_LOSS_FWD,
    PROF_LOSS_BWD,
    PROF_ZERO_GRAD,
    PROF_GRADNORM, // the global gradient norm the clipping needs
    PROF_ADAMW,    // the optimizer pass (clipping scale and bf16 weight copy folded in)
    PROF_CAST,     // fp32 -> bf16 rounding of linear-layer operands and of the weights
    PROF_METRICS,  // the step's loss, schedule and record bookkeeping
    PROF_NPHASES
} ProfPhase;

extern int prof_on; // 1 while profiling (prof_enable)

// The phase's name as the profile prints it ("matmul qkv fwd", ...).
const char* prof_name(int phase);

// Turn profiling on or off; on clears the accumulators.
void prof_enable(int on);
// Start a step's accounting: clears the accumulators, the current phase is PROF_OTHER.
void prof_step_begin(void);
// End it: acc[p] gets each phase's seconds in this step (PROF_NPHASES doubles; they add up to
// the wall time since prof_step_begin).
void prof_step_end(double* acc);

// Enter `phase`, returning the phase that was open (or -1 when profiling is off or inside a
// parallel region: then prof_leave does nothing).
int prof_enter(int phase);
void prof_leave(int prev);

static inline int prof_begin(int phase) {
    return prof_on ? prof_enter(phase) : -1;
}
static inline void prof_end(int prev) {
    if (prev >= 0) prof_leave(prev);
}

#define PROF(phase, ...)                                                                           \
    do {                                                                                           \
        const int prof_prev_ = prof_begin(phase);                                                  \
        __VA_ARGS__;                                                                               \
        prof_end(prof_prev_);                                                                      \
    } while (0)

// Inside a parallel region: per-thread sums. slot 0: the thread's time in the region's work
// items; slot 1: the part of it to split off. prof_par_reset before the region (serial).
void prof_par_reset(void);
void prof_par_add(int slot, double seconds);
// After the region (serial): move wall * (sum of slot 1 / sum of slot 0) seconds from phase
// `from` to phase `to`.
void prof_par_split(int from, int to, double wall);

#endif
