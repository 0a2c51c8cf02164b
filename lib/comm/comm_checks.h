/* comm_checks: the cross-rank debug checks of the process backends (mpi,
 * nccl), chapter 5. Both compare something every rank computes locally with
 * rank 0's, after an all-gather that each backend does its own way (MPI
 * through MPI_Iallgather, NCCL through device memory); this module is the
 * comparing, so the two backends word their findings the same way.
 *
 * Where it sits: called by lib/comm/mpi/comm_mpi.c and lib/comm/nccl/comm_nccl.cu when
 * comm_t.check asks for it (see enum comm_check in comm.h). The simulator has
 * all ranks in one process and compares in its rendezvous instead.
 *
 * Read first: comm_checks_fingerprint().
 */
#ifndef DDP_COMM_CHECKS_H
#define DDP_COMM_CHECKS_H

#include "comm/comm_backend.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A backend's all-gather of a few bytes: all[] receives world x bytes, rank
 * r's at all + r x bytes. `d` is the collective being checked and `phase`
 * says which check, both for the backend's timeout message. 0 or ERR_*. */
typedef int (*comm_checks_exchange_fn)(comm_t *c, const void *mine, void *all, size_t bytes,
                                       const struct comm_coll_desc *d, const char *phase);

/* Before collective d: every rank's fingerprint, compared with rank 0's.
 * Returns 0; ERR_STATE with err_msg() = "<backend>: rank R: fingerprint
 * mismatch before collective #S: rank 0 called ..., rank B called ...
 * (differs: ...)" (the same on every rank, so all refuse the collective); or
 * the exchange's error. */
int comm_checks_fingerprint(comm_t *c, const struct comm_coll_desc *d, comm_checks_exchange_fn exchange);

/* Whether d leaves the same result on every rank (all-reduce, broadcast,
 * all-gather; not reduce-scatter or barrier), and then its size in bytes. */
int comm_checks_result_bytes(const struct comm_coll_desc *d, int world, size_t *bytes);

/* After collective d: every rank's checksum of its result (comm_checksum),
 * compared with rank 0's. Returns 0; ERR_STATE naming the first rank that
 * differs and both checksums; or the exchange's error. */
int comm_checks_results(comm_t *c, const struct comm_coll_desc *d, uint64_t mine, comm_checks_exchange_fn exchange);

#ifdef __cplusplus
}
#endif

#endif
