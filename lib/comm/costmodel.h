/* costmodel: the alpha-beta(-gamma) model of all-reduce time (chapter 5).
 *
 * Where it sits: beside the measurements of build/chapter-5, which prints
 * and plots its predictions next to each measured time. The textbook model
 * (Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication
 * Operations in MPICH", IJHPCA 2005) charges a message of n bytes
 * alpha + n beta, and a reduction of n bytes n gamma:
 *
 *   ring   2(W-1) alpha + 2(W-1)/W n beta + (W-1)/W n gamma
 *   tree   2 ceil(log2 W) (alpha + n beta) + ceil(log2 W) n gamma   (binomial, reduce then broadcast)
 *   naive  2(W-1) (alpha + n beta) + (W-1) n gamma                 (everything through rank 0)
 *
 * Two refinements make it predict our simulator rather than an ideal one:
 * messages are cut into segments (one channel slot), and each segment pays
 * alpha; and the W ranks share `cores` CPU cores, so the time is at least
 * the total work of all ranks divided by the cores. With segment_bytes = 0
 * and cores >= W it is the textbook model.
 */
#ifndef DDP_COSTMODEL_H
#define DDP_COSTMODEL_H

#include "comm/comm.h"

struct costmodel {
    double alpha_s;        /* latency per message (segment), seconds */
    double beta_s_per_b;   /* time per byte moved over one link */
    double gamma_s_per_b;  /* time per byte reduced (added into) */
    double segment_bytes;  /* messages are cut into segments of this size; 0 = never */
    int cores;             /* ranks run on this many cores; 0 = one each */
};

/* Predicted seconds for an all-reduce of `bytes` on `world` ranks with
 * `algo` (DEFAULT counts as ring). 0 for world 1 or 0 bytes. */
double costmodel_allreduce(const struct costmodel *m, enum comm_algo algo, int world, double bytes);

#endif
