/* tree_reduce: the all-reduce of --same-bits, whose bits do not depend on the
 * world size.
 *
 * Where it sits: after backward, in place of the reducer's buckets
 * (lib/ddp/train.c), when the model computes by atoms (model_set_atoms): a
 * global batch is TRAIN_SAME_BITS_ATOMS atoms, rank r holds the atoms
 * t = r (mod W), and its gradient is already the fixed tree's sum over them
 * (kernel_tree, transfer/kernels.h). What is left is the tree's upper levels:
 * the W ranks' sums added as v[r] += v[r + s], s = W/2 ... 1, the same
 * additions a single rank holding every atom makes. A ring or a tree of the
 * communication library adds in an order that changes with W, so the sums
 * are all-gathered (every rank receives all W) and every rank adds them
 * itself, in that order: (W - 1) x the gradient's bytes received per step,
 * against a ring all-reduce's 2 (W - 1) / W.
 *
 * A communicator that reads device memory (nccl, the simulator) gathers the
 * device buffers directly; one that reads host memory (mpi) goes through
 * pinned host memory, copied each way.
 */
#ifndef DDP_TREE_REDUCE_H
#define DDP_TREE_REDUCE_H

#include "comm/comm.h"
#include "ddp/model.h"

#include <stdint.h>

typedef struct tree_reduce tree_reduce_t;

/* For the gradients of `m` over the ranks of `comm`: its world must be a
 * power of two up to KERNEL_TREE_MAX. 0, ERR_ARG, or ERR_NOMEM naming the
 * buffer. */
int tree_reduce_open(comm_t *comm, model_t *m, tree_reduce_t **out);

/* The model's gradient <- the fixed tree's sum of every rank's (call it on
 * every rank after backward). It waits for the model's stream itself before
 * the gradient leaves the rank, so it is right whatever the caller did; the
 * training loop waits first anyway, to end backward's bar in the timeline,
 * and the second wait then finds nothing to wait for. 0, or the
 * communicator's or the device's error. */
int tree_reduce_run(tree_reduce_t *t);

/* Bytes this rank receives per tree_reduce_run. */
uint64_t tree_reduce_bytes(const tree_reduce_t *t);

void tree_reduce_close(tree_reduce_t *t);

#endif
