// common/dist.h: data-parallel processes over MPI (OpenMPI), the only file of attnlab that
// talks to MPI. A process started by mpirun or srun (the launcher's environment says so) joins
// MPI_COMM_WORLD; one started without a launcher never initialises MPI and is rank 0 of 1, so
// the single-process trainer runs exactly as it does without this layer.
//
// Every wait (collective or point-to-point) runs non-blocking under a watchdog: a peer that
// makes no progress for dist_set_timeout() seconds ends the whole job with MPI_Abort and a
// message naming this rank, the operation and the peer it waited for. A rank that dies is seen
// by the launcher, which ends the others. MPI errors return to the caller here (not the default
// abort) and are reported the same way. Buffers are floats or bytes; collectives that split a
// buffer into per-rank shards take the shard bounds `b[0..size]` (rank r owns [b[r], b[r+1])).
#ifndef ATTNLAB_DIST_H
#define ATTNLAB_DIST_H

#include <stddef.h>

// Join MPI when launched by mpirun/srun (OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_RANK set),
// else stay single-process. Call first thing in main.
void dist_init(int* argc, char*** argv);
void dist_finalize(void);
int dist_rank(void);
int dist_size(void);
int dist_is_root(void); // rank 0: the only rank that writes files and the console
// Seconds a wait may go without progress before the job is aborted (default 300).
void dist_set_timeout(double seconds);

// Print "attnlab: rank R of N: MESSAGE" and end every rank (MPI_Abort with `code`; exit(code)
// when single-process).
_Noreturn void dist_abort(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Errors under mpirun (docs/distributed.md). die() on one rank prints once, prefixed "rank R of
// N: " on ranks other than 0 (dist_init sets the prefix), and ends that rank; the launcher ends
// the others. An error every rank may meet at the same point goes through dist_exit_if_failed,
// a collective every rank calls with its own verdict: when any rank failed, the lowest failing
// rank prints its err once ("attnlab: err" from rank 0, which it is when every rank fails;
// "attnlab: rank R of N: err" from another), and every rank exits with `code`. Nothing happens
// when no rank failed. Single process: print err and exit when failed.
void dist_exit_if_failed(int failed, int code, const char* err);
// The same agreement, and in the same collective (`what` names it) the largest `flag` of every
// rank, which it returns when no rank failed (the trainer's per-step stop agreement).
int dist_agree(int failed, int code, const char* err, int flag, const char* what);
// The same for flags[0..n_flags) (n_flags <= 4), each replaced in place by its largest value
// over the ranks.
void dist_agree_v(int failed, int code, const char* err, int* flags, int n_flags, const char* what);

// Collectives (every rank calls them in the same order). `what` names the operation in
// watchdog and error messages.
void dist_bcast(void* buf, size_t bytes, int root, const char* what);
// recv[r * n .. r * n + n) = rank r's send[0..n), on every rank.
void dist_allgather_doubles(const double* send, size_t n, double* recv, const char* what);
// In place: root's buf[b[r], b[r+1]) goes to rank r's buf at the same place.
void dist_scatter_shards(float* buf, const size_t* b, int root, const char* what);
// In place: every rank's buf[b[r], b[r+1]) goes to every rank.
void dist_allgather_shards(float* buf, const size_t* b, const char* what);
// shard (b[rank+1] - b[rank] floats) of every rank into full[b[r], b[r+1]) on root (full is
// only read on root).
void dist_gather_shards(const float* shard, float* full, const size_t* b, int root,
                        const char* what);

// Point-to-point transfer of a set of slices of one float buffer (one message per call, the
// slices as an MPI indexed type, no packing). Sends are asynchronous: the slices must not be
// written until dist_wait_sends(tag) or dist_wait_all_sends() returns. Messages between two
// ranks with the same tag arrive in the order they were sent.
typedef struct {
    size_t offset, size;
} DistSlice;
void dist_send_slices(const float* base, const DistSlice* s, int n, int to, int tag);
void dist_recv_slices(float* base, const DistSlice* s, int n, int from, int tag, const char* what);
void dist_wait_sends(int tag);
void dist_wait_all_sends(void);
void dist_progress(void); // let pending sends advance (call between pieces of work)

// Non-blocking sums over every rank (dp_reduce = allreduce), started per slice as the backward
// finishes a segment and completed together by dist_wait_reductions. The buffer must not be
// touched in between. Every rank starts the same reductions in the same order.
//   dist_iallreduce_slices   base[slice] = the sum over ranks, on every rank (MPI_Iallreduce,
//                            in place)
//   dist_ireduce_scatter_slices  the sum of base[slice], each element only on the rank whose
//                            shard (bounds b[0..size]) holds it (MPI_Ireduce_scatter, from a
//                            copy in scratch, the size of base); the other elements of base are
//                            left as they were
void dist_iallreduce_slices(float* base, const DistSlice* s, int n, const char* what);
void dist_ireduce_scatter_slices(float* base, float* scratch, const DistSlice* s, int n,
                                 const size_t* b, const char* what);
void dist_progress_reductions(void);
void dist_wait_reductions(const char* what);

// Counters since start: seconds this rank spent waiting for communication to complete, and
// bytes it sent (point-to-point exactly; a broadcast root counts bytes x (size - 1), a scatter
// root every shard but its own, an all-gather its shard x (size - 1), a gather its shard; an
// all-reduce 2 (size - 1) / size and a reduce-scatter (size - 1) / size of its bytes, what the
// bandwidth-optimal algorithms send: the MPI library picks its own).
double dist_wait_seconds(void);
double dist_bytes_sent(void);

#endif
