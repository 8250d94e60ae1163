// optim/data_parallel.c: data-parallel optimizer steps (see data_parallel.h for the scheme and
// why it is bit-identical to one process): the in-order gradient chain through the model's
// segment hook (or, dp_reduce = allreduce, one non-blocking all-reduce or reduce-scatter per
// segment as this rank's backward finishes it), broadcast or ZeRO-1 shard update, the full
// optimizer state for checkpoints and the per-step communication record.
#include "optim/data_parallel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dist.h"
#include "common/gradnorm.h"
#include "common/util.h"
#include "optim/clip.h"

struct DataParallel {
    int rank, size, accum, zero;
    int allreduce;      // dp_reduce = allreduce: sums by MPI reductions, not the chain
    float* scratch;     // allreduce with zero = 1: the send copy of the reduce-scatter
    int k;              // micro-batch of this rank in the current step
    size_t* bounds;     // shard bounds (size + 1) of the parameters
    int nseg;           // gradient segments
    DistSlice** slices; // per segment
    int* nslices;
    double* losses;       // this rank's micro-batch losses of the step (accum)
    double* all_losses;   // every rank's (size * accum), rank-major
    int full;             // the full gradient is on every rank this step (zero = 1)
    double wait0, bytes0; // counters at the start of the step
    double* seg_t0;       // per segment: when this micro-batch's backward began it (phase 0)
    double seg_s;         // this step's summed backward time of the segments (phase 0 to 1)
    int seg_n;            // and their count
};

int dp_new(DataParallel** out, int accum, int zero, int allreduce, size_t nparams, int nseg,
           Optimizer* opt, char* err, size_t errcap) {
    *out = NULL;
    if (dist_size() < 2) return 0;
    if (nparams < (size_t)dist_size() * 16) {
        snprintf(err, errcap, "%d ranks for a model of %zu parameters: use fewer ranks",
                 dist_size(), nparams);
        return -1;
    }
    if (nparams > (size_t)2147483647) {
        snprintf(err, errcap, "data parallel training supports up to 2^31 parameters (%zu)",
                 nparams);
        return -1;
    }
    DataParallel* d = callocCheck(1, sizeof(DataParallel));
    d->rank = dist_rank();
    d->size = dist_size();
    d->accum = accum;
    d->zero = zero;
    d->allreduce = allreduce;
    if (allreduce && zero) d->scratch = mallocCheck(sizeof(float) * nparams);
    d->bounds = mallocCheck(sizeof(size_t) * (size_t)(d->size + 1));
    optim_shard_bounds(nparams, d->size, d->bounds);
    d->nseg = nseg;
    d->slices = callocCheck((size_t)nseg, sizeof(DistSlice*));
    d->seg_t0 = callocCheck((size_t)nseg, sizeof(double));
    d->nslices = callocCheck((size_t)nseg, sizeof(int));
    d->losses = mallocCheck(sizeof(double) * (size_t)d->accum);
    d->all_losses = mallocCheck(sizeof(double) * (size_t)d->accum * (size_t)d->size);
    if (d->zero) { // the optimizer state of this rank's shard only
        const OptimizerDef* od = opt->def;
        optim_free(opt);
        optim_init_shard(opt, od, d->bounds[d->rank], d->bounds[d->rank + 1]);
    }
    *out = d;
    return 0;
}

void dp_set_segment(DataParallel* d, int seg, int n, const size_t* off, const size_t* len) {
    ASSERT(d && seg >= 0 && seg < d->nseg);
    free(d->slices[seg]);
    d->slices[seg] = mallocCheck(sizeof(DistSlice) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++)
        d->slices[seg][i] = (DistSlice){off[i], len[i]};
    d->nslices[seg] = n;
}

void dp_free(DataParallel* d) {
    if (!d) return;
    dist_wait_all_sends();
    for (int s = 0; s < d->nseg; s++)
        free(d->slices[s]);
    free(d->slices);
    free(d->nslices);
    free(d->bounds);
    free(d->losses);
    free(d->all_losses);
    free(d->scratch);
    free(d->seg_t0);
    free(d);
}

void dp_describe(const DataParallel* d, int batch_size, int seq_len, char* line, size_t cap) {
    if (!d) {
        if (cap) line[0] = 0;
        return;
    }
    snprintf(line, cap,
             "# data parallel: %d ranks x batch_size %d x grad_accum %d = global batch of %d "
             "sequences of %d tokens; zero = %d%s\n",
             d->size, batch_size, d->accum, d->size * batch_size * d->accum, seq_len, d->zero,
             d->allreduce ? "; dp_reduce = allreduce" : "");
}

int dp_rank(const DataParallel* d) {
    return d ? d->rank : 0;
}

int dp_size(const DataParallel* d) {
    return d ? d->size : 1;
}

void dp_begin_micro(DataParallel* d, int k) {
    if (!d) return;
    if (k == 0) {
        d->wait0 = dist_wait_seconds();
        d->bytes0 = dist_bytes_sent();
        d->full = 0;
        d->seg_s = 0;
        d->seg_n = 0;
    }
    d->k = k;
}

// Micro-batch j = k * size + rank of the step adds onto the running sum of micro-batches
// 0..j-1, received from the rank of j-1, and passes its sum to the rank of j+1.
// dp_reduce = allreduce: every rank sums its own micro-batches in place (as one process with
// grad_accum = accum), and once its last micro-batch has finished a segment, the segment's sum
// over the ranks starts (all-reduce, or reduce-scatter onto the shards with zero = 1) while
// the backward goes on to the next segment. Completed in dp_reduce.
static int allreduce_hook(DataParallel* d, float* G, int seg, int phase, double loss, long step) {
    if (phase == 0) {
        if (seg == 0) d->losses[d->k] = loss;
    } else if (d->k == d->accum - 1) {
        char what[96];
        snprintf(what, sizeof(what), "gradient %s of segment %d, step %ld",
                 d->zero ? "reduce-scatter" : "all-reduce", seg, step);
        if (d->zero)
            dist_ireduce_scatter_slices(G, d->scratch, d->slices[seg], d->nslices[seg], d->bounds,
                                        what);
        else
            dist_iallreduce_slices(G, d->slices[seg], d->nslices[seg], what);
    }
    dist_progress_reductions();
    return 0;
}

static int hook(DataParallel* d, float* G, int seg, int phase, double loss, long step);

// The segment's backward time (phase 0 to phase 1, after any receive), for dp_record.
int dp_grad_hook(DataParallel* d, float* G, int seg, int phase, double loss, long step) {
    if (phase == 1) {
        d->seg_s += util_now() - d->seg_t0[seg];
        d->seg_n++;
    }
    int r = hook(d, G, seg, phase, loss, step);
    if (phase == 0) d->seg_t0[seg] = util_now();
    return r;
}

static int hook(DataParallel* d, float* G, int seg, int phase, double loss, long step) {
    if (d->allreduce) return allreduce_hook(d, G, seg, phase, loss, step);
    const long j = (long)d->k * d->size + d->rank, last = (long)d->accum * d->size - 1;
    if (phase == 0) {
        if (seg == 0) d->losses[d->k] = loss;
        if (j == 0) return 0; // the first micro-batch starts from the zeroed gradient
        dist_wait_sends(seg); // this rank's last send of the segment has left the buffer
        char what[96];
        snprintf(what, sizeof(what), "gradient segment %d of step %ld", seg, step);
        dist_recv_slices(G, d->slices[seg], d->nslices[seg], (d->rank + d->size - 1) % d->size, seg,
                         what);
        return 1;
    }
    if (j < last)
        dist_send_slices(G, d->slices[seg], d->nslices[seg], (d->rank + 1) % d->size, seg);
    dist_progress();
    return 0;
}

double dp_reduce(DataParallel* d, float* G, size_t n, double* loss) {
    if (!d) return grad_global_norm(G, n);
    dist_wait_all_sends();
    dist_allgather_doubles(d->losses, (size_t)d->accum, d->all_losses, "loss gather");
    double s = 0;
    const long nj = (long)d->accum * d->size;
    for (long j = 0; j < nj; j++) // in micro-batch order, as one process sums them
        s += d->all_losses[(j % d->size) * d->accum + j / d->size];
    *loss = s / (double)nj;
    if (d->allreduce) {
        dist_wait_reductions(d->zero ? "gradient reduce-scatter" : "gradient all-reduce");
        // the norm from each rank's shard of the sum (zero = 0: every rank has the whole sum;
        // the shards are summed in rank order, so every rank gets the same norm)
        double ss = grad_sumsq(G + d->bounds[d->rank], d->bounds[d->rank + 1] - d->bounds[d->rank]);
        dist_allgather_doubles(&ss, 1, d->all_losses, "gradient norm");
        double tot = 0;
        for (int r = 0; r < d->size; r++)
            tot += d->all_losses[r];
        return sqrt(tot);
    }
    const int owner = d->size - 1; // rank of the last micro-batch: holds the global gradient
    double norm = 0;
    if (!d->zero) {
        dist_bcast(G, sizeof(float) * n, owner, "gradient broadcast");
        norm = grad_global_norm(G, n);
    } else {
        if (d->rank == owner) norm = grad_global_norm(G, n);
        dist_bcast(&norm, sizeof(norm), owner, "gradient norm broadcast");
    }
    return norm;
}

void dp_full_grads(DataParallel* d, float* G, size_t n) {
    if (!d || !d->zero || d->full) return;
    d->full = 1;
    if (d->allreduce) { // every rank has its shard of the sum
        dist_allgather_shards(G, d->bounds, "gradient all-gather (diagnostics)");
        return;
    }
    dist_bcast(G, sizeof(float) * n, d->size - 1, "gradient broadcast (diagnostics)");
}

int dp_update(DataParallel* d, Optimizer* opt, float* params, float* grads,
              const OptimRange* ranges, int nranges, double norm, float max_norm, float lr,
              const OptimHParams* h, bf16* copy) {
    // clipping is folded into the optimizer's pass (the scale is a scalar it applies to g)
    OptimFuse f = {grad_clip_scale(norm, max_norm), copy};
    if (!d || !d->zero) {
        optim_step_fused(opt, params, grads, ranges, nranges, lr, h, &f);
        return copy != NULL;
    }
    if (!d->full && !d->allreduce)
        dist_scatter_shards(grads, d->bounds, d->size - 1, "gradient reduce-scatter");
    f.copy = NULL; // the all-gather below changes the other shards' parameters
    optim_step_fused(opt, params, grads, ranges, nranges, lr, h, &f);
    dist_allgather_shards(params, d->bounds, "parameter all-gather");
    return 0;
}

const Optimizer* dp_state_for_save(DataParallel* d, Optimizer* opt, Optimizer* tmp, size_t n) {
    if (!d) return opt;
    if (!d->zero) return dist_is_root() ? opt : NULL;
    const int root = dist_is_root(), sp = opt->def->state_per_param;
    if (root) {
        optim_init(tmp, opt->def, n);
        tmp->t = opt->t;
    }
    for (int k = 0; k < sp; k++)
        dist_gather_shards(opt->state + (size_t)k * opt->n, root ? tmp->state + k * n : NULL,
                           d->bounds, 0, "optimizer state gather");
    return root ? tmp : NULL;
}

void dp_state_done(DataParallel* d, Optimizer* tmp) {
    if (d && d->zero && dist_is_root()) optim_free(tmp);
}

int dp_sharded(const DataParallel* d) {
    return d && d->zero;
}

void dp_take_shard(const DataParallel* d, const Optimizer* full, Optimizer* shard) {
    const size_t lo = d->bounds[d->rank], n = shard->n;
    for (int k = 0; k < full->def->state_per_param; k++)
        memcpy(shard->state + (size_t)k * n, full->state + (size_t)k * full->n + lo,
               sizeof(float) * n);
    shard->t = full->t;
}

void dp_record(const DataParallel* d, JsonBuf* j) {
    if (!d) return;
    double mine[2] = {dist_wait_seconds() - d->wait0, dist_bytes_sent() - d->bytes0};
    double* all = mallocCheck(sizeof(double) * 2 * (size_t)d->size);
    dist_allgather_doubles(mine, 2, all, "communication statistics");
    double wmax = 0, bytes = 0;
    for (int i = 0; i < d->size; i++) {
        if (all[2 * i] > wmax) wmax = all[2 * i];
        bytes += all[2 * i + 1];
    }
    free(all);
    json_int(j, "ranks", d->size);
    json_num(j, "comm_ms", wmax * 1e3);
    json_num(j, "comm_mb", bytes / 1e6);
    // rank 0's mean backward time of one gradient segment (the chain's lag per rank)
    json_num(j, "seg_ms", d->seg_n ? d->seg_s / d->seg_n * 1e3 : 0.0);
}
