// common/dist.c: the MPI layer of dist.h. Each collective is started non-blocking (MPI-3) and
// completed by watch(), which polls it and aborts the job with a message naming the rank, the
// operation and the peer once dist_set_timeout's seconds pass without completion. Point-to-point
// sends are kept per tag until waited for. Without a launcher nothing here calls MPI.
#include "common/dist.h"

#include <limits.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

static int g_active, g_rank, g_size = 1;
static double g_timeout = 300.0;

#define MAX_SENDS 256
typedef struct {
    MPI_Request req;
    int tag, to;
} PendingSend;
static PendingSend g_sends[MAX_SENDS];
static int g_nsends;
static double g_wait_s, g_bytes;

double dist_wait_seconds(void) {
    return g_wait_s;
}
double dist_bytes_sent(void) {
    return g_bytes;
}

void dist_init(int* argc, char*** argv) {
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK") && !getenv("PMI_RANK")) return;
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        die(1, "MPI_Init failed");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    g_active = 1;
    if (g_size > 1 && g_rank > 0) { // an error of this rank alone names it (die)
        char prefix[64];
        snprintf(prefix, sizeof(prefix), "rank %d of %d: ", g_rank, g_size);
        util_set_die_prefix(prefix);
    }
}

void dist_finalize(void) {
    if (!g_active) return;
    dist_wait_all_sends();
    MPI_Finalize();
    g_active = 0;
}

int dist_rank(void) {
    return g_rank;
}
int dist_size(void) {
    return g_size;
}
int dist_is_root(void) {
    return g_rank == 0;
}
void dist_set_timeout(double seconds) {
    g_timeout = seconds;
}

void dist_abort(int code, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "attnlab: rank %d of %d: ", g_rank, g_size);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(NULL);
    if (g_active) MPI_Abort(MPI_COMM_WORLD, code);
    _exit(code);
}

static void check(int rc, const char* what) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    dist_abort(1, "%s failed: %s", what, msg);
}

static int to_int(size_t n, const char* what) {
    if (n > (size_t)INT_MAX) dist_abort(1, "%s: %zu elements exceed one MPI message", what, n);
    return (int)n;
}

// Complete `req`, polling; abort after g_timeout seconds without completion. `peer` (or -1 for
// a collective) names whom the wait is for; with two ranks a collective waits for the other one,
// so it is named too.
static void watch(MPI_Request* req, const char* what, int peer) {
    if (peer < 0 && g_size == 2) peer = 1 - g_rank;
    double t0 = util_now();
    long polls = 0;
    for (;;) {
        int done = 0;
        check(MPI_Test(req, &done, MPI_STATUS_IGNORE), what);
        if (done) {
            g_wait_s += util_now() - t0;
            return;
        }
        if (++polls > 2000) { // spin briefly (fast collectives), then yield the core
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
        if (util_now() - t0 > g_timeout) {
            if (peer >= 0)
                dist_abort(1,
                           "%s: no message from rank %d for %.0f s (dist_timeout); rank %d "
                           "hangs or died",
                           what, peer, g_timeout, peer);
            dist_abort(1,
                       "%s: collective not complete after %.0f s (dist_timeout): another rank "
                       "hangs, died or is in a different step",
                       what, g_timeout);
        }
    }
}

void dist_bcast(void* buf, size_t bytes, int root, const char* what) {
    if (g_size < 2) return;
    // in pieces below INT_MAX bytes
    const size_t piece = (size_t)1 << 30;
    for (size_t o = 0; o < bytes || (bytes == 0 && o == 0); o += piece) {
        size_t n = bytes - o < piece ? bytes - o : piece;
        if (g_rank == root) g_bytes += (double)n * (g_size - 1);
        MPI_Request q;
        check(MPI_Ibcast((char*)buf + o, (int)n, MPI_BYTE, root, MPI_COMM_WORLD, &q), what);
        watch(&q, what, -1);
        if (bytes == 0) break;
    }
}

void dist_agree_v(int failed, int code, const char* err, int* flags, int n_flags,
                  const char* what) {
    enum { MAXF = 4 };
    const int n = g_size, me = g_rank;
    if (n_flags < 0 || n_flags > MAXF)
        dist_abort(EXIT_FAILURE, "%s: %d flags (at most %d)", what, n_flags, MAXF);
    int mine[1 + MAXF] = {failed ? n - me : 0}, v[1 + MAXF];
    for (int i = 0; i < n_flags; i++)
        mine[1 + i] = flags[i];
    memcpy(v, mine, sizeof(int) * (size_t)(1 + n_flags));
    if (n > 1) {
        MPI_Request q;
        check(MPI_Iallreduce(mine, v, 1 + n_flags, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &q), what);
        watch(&q, what, -1);
    }
    if (!v[0]) {
        for (int i = 0; i < n_flags; i++)
            flags[i] = v[1 + i];
        return;
    }
    if (me == n - v[0]) {
        if (n > 1 && me > 0)
            fprintf(stderr, "attnlab: rank %d of %d: %s\n", me, n, err);
        else
            fprintf(stderr, "attnlab: %s\n", err);
    }
    fflush(NULL);
    dist_finalize();
    util_exit(code); // as die(): no atexit handlers for a run that ends on an error
}

int dist_agree(int failed, int code, const char* err, int flag, const char* what) {
    dist_agree_v(failed, code, err, &flag, 1, what);
    return flag;
}

void dist_exit_if_failed(int failed, int code, const char* err) {
    (void)dist_agree(failed, code, err, 0, "error agreement");
}

void dist_allgather_doubles(const double* send, size_t n, double* recv, const char* what) {
    if (g_size < 2) {
        memcpy(recv, send, sizeof(double) * n);
        return;
    }
    MPI_Request q;
    check(MPI_Iallgather(send, to_int(n, what), MPI_DOUBLE, recv, to_int(n, what), MPI_DOUBLE,
                         MPI_COMM_WORLD, &q),
          what);
    watch(&q, what, -1);
}

// counts and displacements of shard bounds b[0..size]
static void shard_counts(const size_t* b, int* cnt, int* dsp, const char* what) {
    for (int r = 0; r < g_size; r++) {
        cnt[r] = to_int(b[r + 1] - b[r], what);
        dsp[r] = to_int(b[r], what);
    }
}

void dist_scatter_shards(float* buf, const size_t* b, int root, const char* what) {
    if (g_size < 2) return;
    int* cnt = mallocCheck(sizeof(int) * (size_t)g_size);
    int* dsp = mallocCheck(sizeof(int) * (size_t)g_size);
    shard_counts(b, cnt, dsp, what);
    if (g_rank == root) g_bytes += 4.0 * (double)(b[g_size] - b[0] - (b[root + 1] - b[root]));
    MPI_Request q;
    if (g_rank == root)
        check(MPI_Iscatterv(buf, cnt, dsp, MPI_FLOAT, MPI_IN_PLACE, 0, MPI_FLOAT, root,
                            MPI_COMM_WORLD, &q),
              what);
    else
        check(MPI_Iscatterv(NULL, cnt, dsp, MPI_FLOAT, buf + b[g_rank], cnt[g_rank], MPI_FLOAT,
                            root, MPI_COMM_WORLD, &q),
              what);
    watch(&q, what, -1);
    free(cnt);
    free(dsp);
}

void dist_allgather_shards(float* buf, const size_t* b, const char* what) {
    if (g_size < 2) return;
    int* cnt = mallocCheck(sizeof(int) * (size_t)g_size);
    int* dsp = mallocCheck(sizeof(int) * (size_t)g_size);
    shard_counts(b, cnt, dsp, what);
    g_bytes += 4.0 * (double)cnt[g_rank] * (g_size - 1);
    MPI_Request q;
    check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, buf, cnt, dsp, MPI_FLOAT, MPI_COMM_WORLD, &q),
          what);
    watch(&q, what, -1);
    free(cnt);
    free(dsp);
}

void dist_gather_shards(const float* shard, float* full, const size_t* b, int root,
                        const char* what) {
    size_t mine = b[g_rank + 1] - b[g_rank];
    if (g_size < 2) {
        memcpy(full + b[0], shard, sizeof(float) * mine);
        return;
    }
    int* cnt = mallocCheck(sizeof(int) * (size_t)g_size);
    int* dsp = mallocCheck(sizeof(int) * (size_t)g_size);
    shard_counts(b, cnt, dsp, what);
    if (g_rank != root) g_bytes += 4.0 * (double)mine;
    MPI_Request q;
    check(MPI_Igatherv(shard, to_int(mine, what), MPI_FLOAT, full, cnt, dsp, MPI_FLOAT, root,
                       MPI_COMM_WORLD, &q),
          what);
    watch(&q, what, -1);
    free(cnt);
    free(dsp);
}

// An indexed MPI type over the slices (displacements and lengths in floats).
static MPI_Datatype slice_type(const DistSlice* s, int n, const char* what) {
    int* len = mallocCheck(sizeof(int) * (size_t)n);
    int* dsp = mallocCheck(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) {
        len[i] = to_int(s[i].size, what);
        dsp[i] = to_int(s[i].offset, what);
    }
    MPI_Datatype t;
    check(MPI_Type_indexed(n, len, dsp, MPI_FLOAT, &t), what);
    check(MPI_Type_commit(&t), what);
    free(len);
    free(dsp);
    return t;
}

void dist_send_slices(const float* base, const DistSlice* s, int n, int to, int tag) {
    if (g_nsends == MAX_SENDS) dist_wait_all_sends();
    MPI_Datatype t = slice_type(s, n, "gradient send");
    for (int i = 0; i < n; i++)
        g_bytes += 4.0 * (double)s[i].size;
    PendingSend* p = &g_sends[g_nsends++];
    p->tag = tag;
    p->to = to;
    check(MPI_Isend(base, 1, t, to, tag, MPI_COMM_WORLD, &p->req), "gradient send");
    MPI_Type_free(&t); // freed once the send completes
}

void dist_recv_slices(float* base, const DistSlice* s, int n, int from, int tag, const char* what) {
    MPI_Datatype t = slice_type(s, n, what);
    MPI_Request q;
    check(MPI_Irecv(base, 1, t, from, tag, MPI_COMM_WORLD, &q), what);
    MPI_Type_free(&t);
    // pending sends progress while this rank waits
    double t0 = util_now();
    for (;;) {
        int done = 0;
        check(MPI_Test(&q, &done, MPI_STATUS_IGNORE), what);
        if (done) {
            g_wait_s += util_now() - t0;
            break;
        }
        dist_progress();
        if (util_now() - t0 > 0.01) { // not a short wait: hand over to the watchdog
            g_wait_s += util_now() - t0;
            watch(&q, what, from);
            break;
        }
    }
}

static void drop_send(int i) {
    g_sends[i] = g_sends[--g_nsends];
}

void dist_wait_sends(int tag) {
    for (int i = 0; i < g_nsends;) {
        if (g_sends[i].tag == tag) {
            watch(&g_sends[i].req, "gradient send", g_sends[i].to);
            drop_send(i);
        } else {
            i++;
        }
    }
}

void dist_wait_all_sends(void) {
    while (g_nsends > 0) {
        watch(&g_sends[g_nsends - 1].req, "gradient send", g_sends[g_nsends - 1].to);
        g_nsends--;
    }
}

void dist_progress(void) {
    for (int i = 0; i < g_nsends;) {
        int done = 0;
        check(MPI_Test(&g_sends[i].req, &done, MPI_STATUS_IGNORE), "gradient send");
        if (done)
            drop_send(i);
        else
            i++;
    }
}

// ---- non-blocking reductions (dp_reduce = allreduce)
#define MAX_REDS 4096
typedef struct {
    MPI_Request req;
    int* counts; // Ireduce_scatter's receive counts, kept until completion
} PendingRed;
static PendingRed g_reds[MAX_REDS];
static int g_nreds;

static PendingRed* new_red(const char* what) {
    if (g_nreds == MAX_REDS) dist_wait_reductions(what);
    PendingRed* p = &g_reds[g_nreds++];
    p->counts = NULL;
    return p;
}

void dist_iallreduce_slices(float* base, const DistSlice* s, int n, const char* what) {
    if (g_size < 2) return;
    for (int i = 0; i < n; i++) {
        if (s[i].size == 0) continue;
        g_bytes += 4.0 * (double)s[i].size * 2.0 * (g_size - 1) / g_size;
        PendingRed* p = new_red(what);
        check(MPI_Iallreduce(MPI_IN_PLACE, base + s[i].offset, to_int(s[i].size, what), MPI_FLOAT,
                             MPI_SUM, MPI_COMM_WORLD, &p->req),
              what);
    }
}

void dist_ireduce_scatter_slices(float* base, float* scratch, const DistSlice* s, int n,
                                 const size_t* b, const char* what) {
    if (g_size < 2) return;
    for (int i = 0; i < n; i++) {
        const size_t lo = s[i].offset, hi = s[i].offset + s[i].size;
        if (lo == hi) continue;
        PendingRed* p = new_red(what);
        p->counts = mallocCheck(sizeof(int) * (size_t)g_size);
        for (int r = 0; r < g_size; r++) { // the part of [lo, hi) in rank r's shard
            size_t a = b[r] > lo ? b[r] : lo, e = b[r + 1] < hi ? b[r + 1] : hi;
            p->counts[r] = e > a ? to_int(e - a, what) : 0;
        }
        size_t mine = b[g_rank] > lo ? b[g_rank] : lo;
        if (mine > hi) mine = hi;
        memcpy(scratch + lo, base + lo, sizeof(float) * (hi - lo));
        g_bytes += 4.0 * (double)(hi - lo) * (g_size - 1) / g_size;
        check(MPI_Ireduce_scatter(scratch + lo, base + mine, p->counts, MPI_FLOAT, MPI_SUM,
                                  MPI_COMM_WORLD, &p->req),
              what);
    }
}

void dist_progress_reductions(void) {
    for (int i = 0; i < g_nreds; i++) {
        int done = 0;
        check(MPI_Test(&g_reds[i].req, &done, MPI_STATUS_IGNORE), "gradient reduction");
        // a completed request is MPI_REQUEST_NULL: testing it again is a no-op
    }
}

void dist_wait_reductions(const char* what) {
    for (int i = 0; i < g_nreds; i++) {
        watch(&g_reds[i].req, what, -1);
        free(g_reds[i].counts);
    }
    g_nreds = 0;
}
