/* comm_mpi: the MPI backend of the communicator (backend "mpi"), chapter 5,
 * and the MPI session the NCCL backend borrows to start its ranks.
 *
 * Where it sits: behind lib/comm/comm.h, for CPU ranks that are processes started
 * by `mpirun -np W` (Open MPI here; any MPI-3 library should do), on one node
 * or many: mpirun places the processes, this backend only asks MPI who it is.
 * Read comm.h first, then comm_mpi.c from the top.
 *
 * What it supports: all-reduce (sum, avg), broadcast, reduce-scatter,
 * all-gather and barrier on float32, float64, int32 and int64 (MPI_FLOAT,
 * MPI_DOUBLE, MPI_INT32_T, MPI_INT64_T), and float16 and bfloat16 (as
 * MPI_UINT16_T, summed by user-defined ops), counts up to INT_MAX elements per
 * buffer (MPI's counts are int; larger gives ERR_RANGE). Average is MPI_SUM
 * followed by a division by W on every rank (MPI has no average operator;
 * this is what ncclAvg computes too, so results compare bit for bit).
 *
 * No MPI, CUDA or NCCL header is included here: comm.c includes this file
 * when HAVE_MPI is set, and lib/comm/nccl/comm_nccl.cu uses the session functions
 * below to broadcast its unique id without knowing MPI's types.
 */
#ifndef DDP_COMM_MPI_H
#define DDP_COMM_MPI_H

#include "comm/comm_backend.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

extern const struct comm_backend_ops comm_backend_mpi;

/* Where this process sits in the MPI job. */
struct comm_mpi_place {
    int rank, world;             /* in MPI_COMM_WORLD */
    int local_rank, local_world; /* among the processes on this node */
};

/* The session is process-wide state: begin and end from one thread at a time.
 *
 * Joins the MPI job: MPI_Init_thread (MPI_THREAD_SERIALIZED) unless MPI is
 * already initialized (by the program, or by an earlier session), then fills
 * *out. Sessions nest: every successful begin needs one comm_mpi_session_end.
 * MPI's calls here wait for every rank of the job with no timeout of their
 * own: each runs under a guard that ends this process (status 1, and mpirun
 * then ends the job) when it has not returned after timeout_s, or 10 s if
 * that is longer (processes start slowly on a loaded machine); timeout_s 0:
 * no guard. The first session's timeout guards MPI_Finalize too.
 * Returns 0, or ERR_STATE (MPI was already finalized: it cannot start twice in
 * one process), ERR_IO (an MPI call failed: its name and MPI_Error_string). */
int comm_mpi_session_begin(double timeout_s, struct comm_mpi_place *out);

/* Leaves the session. The last end calls MPI_Finalize when begin called
 * MPI_Init. With `abort_job` non-zero, or after a comm_mpi_bcast_bytes that
 * failed, it calls MPI_Abort(MPI_COMM_WORLD, 1) instead and does not return:
 * MPI cannot cancel a collective that never completed, and MPI_Finalize would
 * wait forever for the rank that never came. */
void comm_mpi_session_end(int abort_job);

/* comm_abort between processes: sends `msg` ("rank 0 failed while saving
 * ...") and `seq`, the first collective the failed rank never started, to
 * every other rank of the job, once per process; the waits of the mpi and
 * nccl backends poll for it with comm_mpi_session_heard_failure. Needs an
 * open session. 0, or ERR_STATE / ERR_IO. */
int comm_mpi_session_tell_failure(uint64_t seq, const char *msg);

/* 1 when a failure notice from another rank has come (one is taken: its text
 * into buf, its sender into *from, its seq into *seq), 0 when none has or
 * there is no session. */
int comm_mpi_session_heard_failure(char *buf, size_t len, int *from, uint64_t *seq);

/* Copies `bytes` from `root`'s buf into every rank's buf (MPI_Ibcast over a
 * duplicate of MPI_COMM_WORLD, polled for at most timeout_s seconds).
 * Collective over the job; needs an open session. Returns 0, ERR_TIMEOUT
 * (some rank never came) or ERR_IO; after either, the job cannot continue and
 * the session's end aborts it. */
int comm_mpi_bcast_bytes(void *buf, size_t bytes, int root, double timeout_s);

/* The MPI function that c's last collective called ("MPI_Allreduce",
 * "MPI_Iallreduce", ...; "" before the first), so a test can tell the
 * blocking path (no watchdog) from the polled one. c must be an mpi
 * communicator. */
const char *comm_mpi_last_call(const comm_t *c);

#ifdef __cplusplus
}
#endif

#endif
