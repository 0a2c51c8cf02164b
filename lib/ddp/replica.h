/* replica: the check that data parallelism's one invariant holds: after
 * every step, every rank's replica of the model is the same bits.
 *
 * Where it sits: after the optimizer step, on every rank (chapter 6 runs it
 * every step in the simulator, and under --check elsewhere). It is what no
 * real job checks and the simulator can afford: a rank that skipped an
 * all-reduce, averaged twice, broadcast no buffers or stepped with a stale
 * gradient drifts from the others, silently, until the loss curves diverge.
 * Here the step it first happens is named, with the rank, the tensor and the
 * element.
 *
 * Buffers (BatchNorm's running statistics) are the same bits only right
 * after broadcast_buffers has copied rank 0's over the others, before the
 * forward: each rank's training forward then moves its own statistics with
 * its own batch (in PyTorch too). So check the parameters after the step and
 * the buffers after reducer_prepare_forward(); chapter 6 does both in one call
 * at the start of every step (the parameters are still the last step's).
 *
 * How: each rank's device hashes each parameter and buffer tensor, in
 * chunks (kernel_hash_chunks, transfer/kernels.h), on the compute stream
 * after the step; the host receives the chunks' words through one copy and
 * folds them into a 64-bit hash per tensor, and the hashes are all-gathered;
 * then each rank's hash of the table it received is all-gathered too, so
 * that every rank knows it decides from the same table
 * (a rank whose copy differed would otherwise take its own branch: locate
 * while the others go on to their next all-reduce). Only when a tensor's
 * hashes differ does the check spend two more collectives: the reference
 * rank's copy of it is copied off its device and broadcast, and every rank
 * finds its first differing element, which is all-gathered, so every rank
 * reports the same first difference. A collective, so every rank must call it at the same step.
 *
 * Who is blamed is decided by the majority (comm_checks_vote, the vote of
 * chapter 5's fingerprint and result checks): with three or more ranks, the
 * rank the others agree against is named, rank 0 included; with two, or when
 * no copy is held by more than half the ranks, the message says nobody can
 * be named.
 */
#ifndef DDP_REPLICA_H
#define DDP_REPLICA_H

#include "comm/comm.h"
#include "ddp/model.h"

#include <stdint.h>

enum {
    REPLICA_PARAMS = 1,  /* the parameters */
    REPLICA_BUFFERS = 2, /* the float buffers (BatchNorm running statistics) */
};

/* 0 when every rank's tensors of the kinds in `what` are the same bits;
 * otherwise ERR_STATE on every rank with the same err_msg():
 *   "step 7: rank 2 differs from the other 3 ranks in fc2.weight[13,40]:
 *   0.0123456791 on rank 2, 0.0123456787 on the others",
 *   "step 7: ranks 1 and 5 differ from the other 6 ranks in fc2.weight, rank 1
 *   first in fc2.weight[13,40]: ...",
 *   "step 7: rank 0 and rank 1 hold different fc2.weight, first in
 *   fc2.weight[13,40]: ... on rank 0, ... on rank 1; with two ranks there is no
 *   majority to tell which one is wrong",
 *   "step 7: rank 2 received a copy of the replicas' hashes that differs from
 *   the one the other 3 ranks received: ..." (the check's own data damaged);
 * or the communicator's error. `step` only labels the message. Every rank
 * must pass the same `what`. */
int replica_check(comm_t *comm, model_t *m, uint64_t step, unsigned what);

/* The fault the check is there to catch, for chapter 6's --fault=flip:R@K
 * (the moment is the caller's; `rank` is the replica's): flips one bit of
 * this replica, a bit that always matters. The tensor is the output layer's
 * bias (the last parameter: fc3.bias in the default model), which every
 * sample's logits add, so every step reads its value and its gradient; the
 * element is `step` modulo its length; the bit is 22, the mantissa's highest,
 * which moves the value by a quarter to a half of itself (a zero or
 * subnormal element gets bit 30, the exponent's highest, instead, and becomes
 * 2 or more: bit 22 would leave it below anything the step's sums notice).
 * The rank is XORed into the lowest mantissa bits too (nothing on rank 0), so
 * that ranks flipped at one step differ from each other, as independent
 * faults would: flipped alike, they would agree, and two of three ranks would
 * outvote the healthy one. `rank` is below 2^22. The element is copied to
 * the host, flipped and copied back. 0, or the device's error. */
int replica_flip(model_t *m, uint64_t step, int rank);

#endif
