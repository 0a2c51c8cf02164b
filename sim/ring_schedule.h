/* ring_schedule: which chunk each rank sends and receives at each step of a
 * ring all-reduce (chapter 5, and lab 5's exercise).
 *
 * Where it sits: under the simulator's ring algorithm (sim/comm_sim_algos.c).
 * The buffer of `count` elements is cut into W chunks; the ring moves one
 * chunk per rank per step to the right-hand neighbour (rank r -> r+1 mod W):
 *
 *   reduce-scatter, steps 0 .. W-2: rank r sends chunk ring_rs_send(r, W, s)
 *     and receives chunk ring_rs_recv(r, W, s), which it adds to its own
 *     copy of that chunk. After the last step rank r holds the full sum of
 *     chunk r (NCCL's reduce-scatter convention: block r to rank r).
 *   all-gather, steps 0 .. W-2: rank r sends chunk ring_ag_send(r, W, s) and
 *     receives ring_ag_recv(r, W, s), a finished chunk, which it stores.
 *     It starts by sending its own finished chunk r.
 *
 * Every rank sends (W-1) chunks in each phase, so 2(W-1)/W of the buffer in
 * all, whatever W: that is why the ring's bus bandwidth does not fall as the
 * world grows. Each chunk is reduced in one fixed order (starting at the rank
 * after its owner, ending at its owner), so results never depend on timing,
 * and the all-gather hands every rank the owner's bits: all ranks agree.
 */
#ifndef DDP_RING_SCHEDULE_H
#define DDP_RING_SCHEDULE_H

#include <stddef.h>

/* The chunk rank `rank` sends / receives at reduce-scatter step `step`
 * (0 <= step < world-1). What it receives at step s it sends at step s+1. */
int ring_rs_send(int rank, int world, int step);
int ring_rs_recv(int rank, int world, int step);

/* The same for the all-gather phase. */
int ring_ag_send(int rank, int world, int step);
int ring_ag_recv(int rank, int world, int step);

/* Chunk `chunk` of a buffer of `count` elements cut into `world` chunks as
 * evenly as possible (the first count % world chunks get one element more):
 * sets its first element and its length. Counts smaller than world give
 * empty chunks. */
void ring_chunk(size_t count, int world, int chunk, size_t *offset, size_t *length);

#endif
