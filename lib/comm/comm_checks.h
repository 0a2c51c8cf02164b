/* comm_checks: the cross-rank debug checks of every backend, chapter 5: the
 * fingerprint compared before a collective and the result checksum compared
 * after it, and the verdict of who differs.
 *
 * Who differs is decided by the majority, never by rank 0 alone: when seven
 * ranks of eight agree, the eighth is named, whichever rank it is, even rank
 * 0. With two ranks, or when no value is held by more than half the ranks,
 * the message says that it cannot tell which one is wrong, and shows two
 * ranks that differ.
 *
 * Where it sits: the simulator (sim/comm_sim.c) compares what its ranks
 * posted at the rendezvous; the process backends (lib/comm/mpi/comm_mpi.c,
 * lib/comm/nccl/comm_nccl.cu) first all-gather every rank's fingerprint or
 * checksum, each its own way (MPI_Iallgather, device memory), through
 * comm_checks_fingerprint() and comm_checks_results(). All word their
 * findings the same way, here.
 *
 * Read first: comm_checks_compare_results().
 */
#ifndef DDP_COMM_CHECKS_H
#define DDP_COMM_CHECKS_H

#include "comm/comm_backend.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the vote, over any per-rank value ------------------------------------ */

/* Whether ranks a and b hold the same value in `values` (laid out as the
 * caller likes: an array of fingerprints, of checksums, a table of hashes). */
typedef int (*comm_checks_same_fn)(const void *values, int a, int b);

/* Who disagrees with whom. */
struct comm_checks_verdict {
    int majority; /* some value is held by more than half the ranks ... */
    int ref;      /* ... and this is the lowest rank holding it; without a majority: rank 0 */
    int agree;    /* ranks holding ref's value */
    int odd;      /* the lowest rank whose value differs from ref's; -1 when all agree */
    char odd_ranks[128]; /* "rank 3", "ranks 1 and 5", "ranks 1, 5, ... and 9 more" */
};

/* The majority vote over world ranks' values (Boyer and Moore's: linear in
 * the world). Every check that says who differs across ranks votes here, so
 * they all blame alike: the fingerprint and result checks below, and the
 * replica check of chapter 6 (lib/ddp/replica.c). */
void comm_checks_vote(const void *values, int world, comm_checks_same_fn same, struct comm_checks_verdict *v);

/* Why nobody is named when v.majority is 0, for the end of a message:
 * "; with two ranks there is no majority to tell which one is wrong", or
 * "; no <what> is shared by a majority of the 4 ranks, so none can be called
 * the wrong one". */
void comm_checks_no_majority(int world, const char *what, char *buf, size_t len);

/* ---- the verdicts, over every rank's value -------------------------------- */

/* Compares fps[0 .. world-1], every rank's fingerprint of the collective it
 * is about to run. 0 when all agree; else ERR_STATE with err_msg() =
 * "fingerprint mismatch before collective #2: rank 2 called #2 allreduce avg
 * 1000 x float32, the other 3 ranks called #2 allreduce avg 1024 x float32
 * (differs: count)", or the forms for several odd ranks, two ranks and no
 * majority (see the top of this file). */
int comm_checks_compare_fingerprints(const struct comm_fingerprint *fps, int world);

/* Optional detail for a result mismatch: where rank `odd`'s result differs
 * from rank `ref`'s ("element 512: rank 1 has 2.87500024, rank 0 has
 * 2.875"), written into buf. The simulator, which can see every rank's
 * buffer, passes one; the process backends see only checksums. */
typedef void (*comm_checks_detail_fn)(const void *ctx, int odd, int ref, char *buf, size_t len);

/* Compares sums[0 .. world-1], every rank's checksum of its result of d. 0
 * when all agree; else ERR_STATE with err_msg() = "result check: after
 * collective #2 (allreduce avg, 1024 x float32), rank 0's result differs from
 * the other 7 ranks', which agree (checksum ... vs ...; <detail>): the ranks
 * no longer hold the same values", or the forms for several odd ranks, two
 * ranks and no majority. `detail` may be NULL. */
int comm_checks_compare_results(const struct comm_coll_desc *d, const uint64_t *sums, int world,
                                comm_checks_detail_fn detail, const void *ctx);

/* ---- the process backends' side: exchange, then compare ------------------- */

/* A backend's all-gather of a few bytes: all[] receives world x bytes, rank
 * r's at all + r x bytes. `d` is the collective being checked and `phase`
 * says which check, both for the backend's timeout message. 0 or ERR_*. */
typedef int (*comm_checks_exchange_fn)(comm_t *c, const void *mine, void *all, size_t bytes,
                                       const struct comm_coll_desc *d, const char *phase);

/* Before collective d: every rank's fingerprint, compared. Returns 0;
 * ERR_STATE with err_msg() = "<backend>: rank R: " and the verdict of
 * comm_checks_compare_fingerprints (the same on every rank, so all refuse
 * the collective); or the exchange's error. */
int comm_checks_fingerprint(comm_t *c, const struct comm_coll_desc *d, comm_checks_exchange_fn exchange);

/* Whether d leaves the same result on every rank (all-reduce, broadcast,
 * all-gather; not reduce-scatter or barrier), and then its size in bytes. */
int comm_checks_result_bytes(const struct comm_coll_desc *d, int world, size_t *bytes);

/* After collective d: every rank's checksum of its result (comm_checksum),
 * compared. Returns 0; ERR_STATE with "<backend>: rank R: " and the verdict
 * of comm_checks_compare_results; or the exchange's error. */
int comm_checks_results(comm_t *c, const struct comm_coll_desc *d, uint64_t mine, comm_checks_exchange_fn exchange);

#ifdef __cplusplus
}
#endif

#endif
