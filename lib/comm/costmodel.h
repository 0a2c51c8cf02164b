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
 * On a topology of N nodes of G ranks (W = N G) there are two link classes:
 * inside a node (alpha, beta: NVLink) and across nodes (alpha_o, beta_o: the
 * network). A flat ring's 2(W-1) steps then go at the pace of its slowest
 * hop, and every step has N hops that cross nodes:
 *
 *   ring   2(W-1) (alpha_o + n/W beta_o) + (W-1)/W n gamma          (N > 1)
 *   hier   (G-1) (alpha + n/G beta) + (G-1)/G n gamma                reduce-scatter in the node
 *        + 2(N-1) (alpha_o + n/(G N) beta_o) + (N-1)/N (n/G) gamma  all-reduce of n/G across nodes
 *        + (G-1) (alpha + n/G beta)                                  all-gather in the node
 *
 * Tree and naive are charged the slowest link too. With N = 1 or G = 1, hier
 * is the flat ring. A node with fewer network ports P than ranks G shares
 * them among hier's G concurrent rings: beta_o is then G/P times a port's.
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
    double alpha_s;        /* latency per message (segment), seconds, inside a node */
    double beta_s_per_b;   /* time per byte moved over one link inside a node */
    double gamma_s_per_b;  /* time per byte reduced (added into) */
    double segment_bytes;  /* messages are cut into segments of this size; 0 = never */
    int cores;             /* ranks run on this many cores; 0 = one each */
    int node_size;         /* ranks per node (GPUS of NODESxGPUS); 0, or one that does not
                            * divide the world: one node of every rank */
    double alpha_inter_s;      /* the link across nodes: latency per message ... */
    double beta_inter_s_per_b; /* ... and time per byte of one port; 0 = the same link as
                                * inside a node (alpha_s and beta_s_per_b), so a model
                                * without these set predicts as if there were one link class */
    int inter_ports;           /* network ports a node has: hier's G rings across nodes
                                * run at once and share them (a flat ring crosses each
                                * node boundary with one flow, one port); 0 = a port a rank */
};

/* Predicted seconds for an all-reduce of `bytes` on `world` ranks with
 * `algo` (DEFAULT counts as ring) on the model's topology. 0 for world 1 or
 * 0 bytes. Pure: the same arguments, the same answer. */
double costmodel_allreduce(const struct costmodel *m, enum comm_algo algo, int world, double bytes);

/* Predicted seconds for any collective on the model's topology: the
 * simulator's modelled time for it (sim/comm_sim.c). `bytes` is the buffer
 * of an all-reduce or a broadcast, and the whole of world blocks for a
 * reduce-scatter or an all-gather (world x the per-rank count); a barrier
 * moves none. All-reduce is costmodel_allreduce; the others follow Thakur,
 * Rabenseifner and Gropp (2005), on the slowest link class the flat
 * algorithm crosses (across nodes when there are several), whatever algo:
 *
 *   broadcast       min(ceil(log2 W) (alpha + n beta),                  binomial tree
 *                       (ceil(log2 W) + W-1) alpha + 2(W-1)/W n beta)    scatter + ring all-gather
 *   reduce-scatter  (W-1) alpha + (W-1)/W n beta + (W-1)/W n gamma       ring (pairwise exchange)
 *   all-gather      (W-1) alpha + (W-1)/W n beta                         ring
 *   barrier         ceil(log2 W) alpha                                   dissemination
 *
 * (MPICH picks between broadcast's two by size; we take the cheaper.) 0 for
 * world 1. Pure. */
double costmodel_collective(const struct costmodel *m, enum comm_coll coll, enum comm_algo algo, int world,
                            double bytes);

#endif
