// model/run_dist.c: data-parallel training steps (see run_dist.h for the scheme and why it is
// bit-identical to one process): the batch slice, the in-order gradient chain through
// gpt2_backward's segment hook, broadcast or ZeRO-1 shard update, the full optimizer state for
// checkpoints and the per-step communication record.
#include "model/run_dist.h"

#include <stdlib.h>
#include <string.h>

#include "common/dist.h"
#include "common/util.h"
#include "optim/clip.h"

typedef struct RunDist {
    int rank, size, accum, zero;
    int k;              // micro-batch of this rank in the current step
    size_t* bounds;     // shard bounds (size + 1) of the parameters
    int nseg;           // gradient segments
    DistSlice** slices; // per segment
    int* nslices;
    double* losses;       // this rank's micro-batch losses of the step (accum)
    double* all_losses;   // every rank's (size * accum), rank-major
    int full;             // the full gradient is on every rank this step (zero = 1)
    double wait0, bytes0; // counters at the start of the step
} RunDist;

// The segment hook (gpt2.h). Micro-batch j = k * size + rank of the step adds onto the running
// sum of micro-batches 0..j-1, received from the rank of j-1, and passes its sum to the rank of
// j+1.
static void grad_hook(void* ctx, int seg, int phase) {
    Run* r = ctx;
    RunDist* d = r->dist;
    const long j = (long)d->k * d->size + d->rank, last = (long)d->accum * d->size - 1;
    float* G = r->model.grads;
    if (phase == 0) {
        if (seg == 0) d->losses[d->k] = r->model.mean_loss;
        if (j == 0) return;   // the first micro-batch starts from the zeroed gradient
        dist_wait_sends(seg); // this rank's last send of the segment has left the buffer
        char what[96];
        snprintf(what, sizeof(what), "gradient segment %d of step %ld", seg, r->model.step + 1);
        dist_recv_slices(G, d->slices[seg], d->nslices[seg], (d->rank + d->size - 1) % d->size, seg,
                         what);
    } else {
        if (j < last)
            dist_send_slices(G, d->slices[seg], d->nslices[seg], (d->rank + 1) % d->size, seg);
        dist_progress();
    }
}

int run_dist_setup(Run* r, char* err, size_t errcap) {
    dist_set_timeout(r->cfg.dist_timeout);
    if (dist_size() < 2) return 0;
    RunDist* d = callocCheck(1, sizeof(RunDist));
    r->dist = d;
    GPT2* m = &r->model;
    d->rank = dist_rank();
    d->size = dist_size();
    d->accum = r->cfg.grad_accum;
    d->zero = r->cfg.zero;
    d->bounds = mallocCheck(sizeof(size_t) * (size_t)(d->size + 1));
    optim_shard_bounds(m->num_params, d->size, d->bounds);
    if (m->num_params < (size_t)d->size * 16) {
        snprintf(err, errcap, "%d ranks for a model of %zu parameters: use fewer ranks", d->size,
                 m->num_params);
        return -1;
    }
    if (m->num_params > (size_t)2147483647) {
        snprintf(err, errcap, "data parallel training supports up to 2^31 parameters (%zu)",
                 m->num_params);
        return -1;
    }
    d->nseg = gpt2_grad_segments(m);
    d->slices = mallocCheck(sizeof(DistSlice*) * (size_t)d->nseg);
    d->nslices = mallocCheck(sizeof(int) * (size_t)d->nseg);
    for (int s = 0; s < d->nseg; s++) {
        size_t off[GPT2_MAX_SPECS], len[GPT2_MAX_SPECS];
        int n = gpt2_segment_slices(m, s, off, len);
        d->slices[s] = mallocCheck(sizeof(DistSlice) * (size_t)(n ? n : 1));
        for (int i = 0; i < n; i++)
            d->slices[s][i] = (DistSlice){off[i], len[i]};
        d->nslices[s] = n;
    }
    d->losses = mallocCheck(sizeof(double) * (size_t)d->accum);
    d->all_losses = mallocCheck(sizeof(double) * (size_t)d->accum * (size_t)d->size);
    if (d->zero) { // the optimizer state of this rank's shard only
        const OptimizerDef* od = r->opt.def;
        optim_free(&r->opt);
        optim_init_shard(&r->opt, od, d->bounds[d->rank], d->bounds[d->rank + 1]);
    }
    m->grad_hook = grad_hook;
    m->grad_hook_ctx = r;
    // the resolved config (config.conf, checkpoints) records the global batch
    const char* fmt = "# data parallel: %d ranks x batch_size %d x grad_accum %d = global batch "
                      "of %d sequences of %d tokens; zero = %d\n";
    int add = snprintf(NULL, 0, fmt, d->size, r->cfg.batch_size, d->accum,
                       d->size * r->cfg.batch_size * d->accum, r->cfg.seq_len, d->zero);
    size_t len = strlen(r->config_text);
    r->config_text = reallocCheck(r->config_text, len + (size_t)add + 1);
    snprintf(r->config_text + len, (size_t)add + 1, fmt, d->size, r->cfg.batch_size, d->accum,
             d->size * r->cfg.batch_size * d->accum, r->cfg.seq_len, d->zero);
    return 0;
}

void run_dist_free(Run* r) {
    RunDist* d = r->dist;
    if (!d) return;
    dist_wait_all_sends();
    for (int s = 0; s < d->nseg; s++)
        free(d->slices[s]);
    free(d->slices);
    free(d->nslices);
    free(d->bounds);
    free(d->losses);
    free(d->all_losses);
    free(d);
    r->dist = NULL;
    r->model.grad_hook = NULL;
}

void run_dist_next_batch(Run* r, int k) {
    RunDist* d = r->dist;
    if (!d) {
        dataloader_next(&r->train, r->inputs, r->targets);
        return;
    }
    if (k == 0) {
        d->wait0 = dist_wait_seconds();
        d->bytes0 = dist_bytes_sent();
        d->full = 0;
    }
    d->k = k;
    dataloader_next_slice(&r->train, d->rank, d->size, r->inputs, r->targets);
}

double run_dist_reduce(Run* r, double* loss) {
    RunDist* d = r->dist;
    GPT2* m = &r->model;
    if (!d) return grad_global_norm(m->grads, m->num_params);
    dist_wait_all_sends();
    // the global loss, summed in the order one process would (micro-batch j on rank j mod N)
    dist_allgather_doubles(d->losses, (size_t)d->accum, d->all_losses, "loss gather");
    double s = 0;
    const long nj = (long)d->accum * d->size;
    for (long j = 0; j < nj; j++)
        s += d->all_losses[(j % d->size) * d->accum + j / d->size];
    *loss = s / (double)nj;
    const int owner = d->size - 1; // rank of the last micro-batch: holds the global gradient
    double norm = 0;
    if (!d->zero) {
        dist_bcast(m->grads, sizeof(float) * m->num_params, owner, "gradient broadcast");
        norm = grad_global_norm(m->grads, m->num_params);
    } else {
        if (d->rank == owner) norm = grad_global_norm(m->grads, m->num_params);
        dist_bcast(&norm, sizeof(norm), owner, "gradient norm broadcast");
    }
    return norm;
}

void run_dist_full_grads(Run* r) {
    RunDist* d = r->dist;
    if (!d || !d->zero || d->full) return;
    dist_bcast(r->model.grads, sizeof(float) * r->model.num_params, d->size - 1,
               "gradient broadcast (diagnostics)");
    d->full = 1;
}

void run_dist_update(Run* r, double norm, float lr) {
    RunDist* d = r->dist;
    GPT2* m = &r->model;
    if (!d || !d->zero) {
        grad_clip(m->grads, m->num_params, norm, r->cfg.grad_clip);
        optim_step(&r->opt, m->params, m->grads, r->ranges, r->nranges, lr, &r->oh);
        return;
    }
    if (!d->full) dist_scatter_shards(m->grads, d->bounds, d->size - 1, "gradient reduce-scatter");
    const size_t lo = d->bounds[d->rank], hi = d->bounds[d->rank + 1];
    grad_clip(m->grads + lo, hi - lo, norm, r->cfg.grad_clip);
    optim_step(&r->opt, m->params, m->grads, r->ranges, r->nranges, lr, &r->oh);
    dist_allgather_shards(m->params, d->bounds, "parameter all-gather");
}

const Optimizer* run_dist_state_for_save(Run* r, Optimizer* tmp) {
    RunDist* d = r->dist;
    if (!d) return &r->opt;
    if (!d->zero) return dist_is_root() ? &r->opt : NULL;
    const int root = dist_is_root(), sp = r->opt.def->state_per_param;
    const size_t n = r->model.num_params;
    if (root) {
        optim_init(tmp, r->opt.def, n);
        tmp->t = r->opt.t;
    }
    for (int k = 0; k < sp; k++)
        dist_gather_shards(r->opt.state + (size_t)k * r->opt.n, root ? tmp->state + k * n : NULL,
                           d->bounds, 0, "optimizer state gather");
    return root ? tmp : NULL;
}

void run_dist_state_done(Run* r, Optimizer* tmp) {
    if (r->dist && r->dist->zero && dist_is_root()) optim_free(tmp);
}

int run_dist_load_state(Run* r, const char* path, char* err, size_t errcap) {
    RunDist* d = r->dist;
    if (!d || !d->zero) return ckpt_load_state(&r->opt, &r->rs, path, err, errcap);
    Optimizer full;
    optim_init(&full, r->opt.def, r->model.num_params);
    int rc = ckpt_load_state(&full, &r->rs, path, err, errcap);
    if (rc == 0) {
        const size_t lo = d->bounds[d->rank], n = r->opt.n;
        for (int k = 0; k < full.def->state_per_param; k++)
            memcpy(r->opt.state + (size_t)k * n, full.state + (size_t)k * full.n + lo,
                   sizeof(float) * n);
        r->opt.t = full.t;
    }
    optim_free(&full);
    return rc;
}

void run_dist_record(const Run* r, JsonBuf* j) {
    const RunDist* d = r->dist;
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
}
