/* nccl_comm: the NCCL backend of the communicator (backend "nccl"), chapter 5.
 *
 * Where it sits: behind lib/comm/comm.h, one rank per GPU; the collectives' buffers
 * are device pointers (comm_mem_alloc / comm_mem_upload give them), and every
 * collective is queued on the communicator's CUDA stream (comm_config.stream,
 * or one it creates). Read comm.h first, then nccl_comm.cu from the top.
 *
 * Starting the ranks (comm_config.launch, AUTO picks from the environment):
 *   THREADS  one process, a thread per GPU: comm_world_create("nccl") makes
 *            the ncclUniqueId, rank r uses GPU first_device + r;
 *   MPI      one process per GPU under mpirun: rank 0 makes the id and
 *            broadcasts it over MPI (lib/comm/mpi/comm_mpi.h); GPU = node-local
 *            rank. Needs a build with MPI;
 *   ENV      torchrun-style (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
 *            MASTER_PORT): rank 0 hands the id out over TCP
 *            (lib/comm/rendezvous.h); GPU = LOCAL_RANK.
 * All three work across nodes except THREADS.
 *
 * Types: float32, float64, int32, int64, float16, bfloat16 (ncclBfloat16:
 * NCCL >= 2.10). Average is ncclAvg (NCCL >= 2.10).
 * For floating types NCCL multiplies every input by 1/W before it sums
 * (ncclDevPreMulSum, in hostToDevRedOp of NCCL's src/enqueue.cc); for
 * integers it divides after. So a float average may differ in its last bit
 * from the sim's and MPI's sum-then-divide when W is not a power of two
 * (scaling by 1/2^k is exact, barring underflow). Barrier is an all-reduce of
 * one float, as PyTorch's NCCL barrier does, since NCCL has no barrier.
 * Needs NCCL >= 2.14 (non-blocking communicators: how a rank that never comes
 * becomes a timeout and ncclCommAbort instead of a hang).
 *
 * World 1: NCCL's all-reduce on one GPU is a device-to-device copy: nothing
 * crosses a link, and its "bus bandwidth" is device memory's. The backend
 * says so on stderr when it opens a world of 1.
 *
 * No CUDA or NCCL header here: comm.c includes this file when HAVE_NCCL is set.
 */
#ifndef DDP_NCCL_COMM_H
#define DDP_NCCL_COMM_H

#include "comm/comm_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const struct comm_backend_ops comm_backend_nccl;

#ifdef __cplusplus
}
#endif

#endif
