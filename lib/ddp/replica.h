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
 * How: each rank hashes each parameter and buffer tensor (64 bits each) and
 * the hashes are all-gathered, one collective. Only when they differ does
 * the check spend two more: rank 0's differing tensor is broadcast and every
 * rank finds its first differing element, which is all-gathered, so every
 * rank reports the same first difference. A collective, so every rank must
 * call it at the same step.
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

/* 0 when every rank's tensors of the kinds in `what` equal rank 0's bit for
 * bit; otherwise ERR_STATE on every rank with err_msg() = "step 12: rank 2's
 * fc1.weight differs from rank 0's at element 513 (row 0, column 513):
 * 0.0123456791 on rank 2, 0.0123456787 on rank 0 (ranks differing in
 * fc1.weight: 2)"; or the communicator's error. `step` only labels the
 * message. Every rank must pass the same `what`. */
int replica_check(comm_t *comm, const model_t *m, uint64_t step, unsigned what);

#endif
