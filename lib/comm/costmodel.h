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

struct comm_coll_desc; /* comm/comm_backend.h */

/* What a communicator on a modelled clock charges collective d on `world`
 * ranks, in integer nanoseconds (vclock_ns_of_s): costmodel_collective() of
 * its bytes, the buffer's, or the world's blocks for a reduce-scatter or an
 * all-gather. One computation for every backend that models time (the
 * simulator's, MPI's beside a simulated device), so that they agree to the
 * nanosecond. */
uint64_t costmodel_coll_ns(const struct costmodel *m, const struct comm_coll_desc *d, enum comm_algo algo,
                           int world);

/* Which link is busy when during one all-reduce: the model's time cut into
 * spans, one per link class and ring step (chapter 5's --links draws them).
 * Three lanes: the links inside a node, the network across nodes, and the
 * GPUs adding what they received (gamma). */
enum costmodel_lane {
    COSTMODEL_LANE_INSIDE, /* every GPU's link inside its node (NVLink) */
    COSTMODEL_LANE_ACROSS, /* each node's network ports */
    COSTMODEL_LANE_REDUCE, /* the GPUs adding a received chunk into theirs */
};

struct costmodel_span {
    enum costmodel_lane lane;
    const char *phase;   /* "reduce-scatter", "all-gather"; hier: "... in the node", "all-reduce across nodes" */
    int step;            /* the ring step, from 0, over the whole all-reduce */
    double bytes;        /* what each sender moves in this step (a chunk); 0 on the reduce lane */
    double start_s, end_s;
    double share;        /* the part of the lane in use: of a node's GPU links (a flat ring sends
                          * G-1 of its G hops a node inside), of its network ports (a flat ring
                          * crosses each node boundary with one flow, one port; hier's G rings
                          * use G of them), 1 on the reduce lane */
};

/* The spans of one all-reduce of `bytes` on `world` ranks on the model's
 * topology, ring (or DEFAULT) or hier, in order of start: each step's
 * transfers start together, the step lasts as long as the model's pace (the
 * slowest link class the algorithm crosses in it) and, in a reduce phase,
 * the chunk's addition follows. The last span ends at costmodel_allreduce()'s
 * time when the ranks have a core each (cores 0 or >= world; on fewer cores
 * the model adds their contention, which no link shows). Writes at most
 * `max` spans into out (out may be NULL with max 0) and returns how many
 * there are; 0 for world 1 or 0 bytes. ERR_ARG for tree and naive: the
 * model charges their every level at the slowest link, so it cannot say
 * which link a level uses. Pure. */
int costmodel_allreduce_spans(const struct costmodel *m, enum comm_algo algo, int world, double bytes,
                              struct costmodel_span *out, int max);

/* What one all-reduce of `bytes` on `world` ranks moves across rank 0's host
 * link (its GPU's PCIe x16), each way: *in into the GPU, *out of it. Ranks
 * fill nodes of `node_size` in order (0, or a size that does not divide the
 * world: one node). Where a node's GPUs talk over NVLink (`nvlink`), only what
 * crosses nodes does: the network card sits beside the GPU on PCIe (GPUDirect
 * RDMA). Where they talk over PCIe, every byte rank 0 sends or receives does.
 * Rank 0 is the root of tree and naive, so theirs are the busiest rank's:
 *
 *   ring   2(W-1)/W n, from rank W-1 (another node when N > 1) and to rank 1
 *          (another node when G = 1)
 *   hier   2(G-1)/G n inside the node + 2(N-1)/N n/G across nodes each way:
 *          the ring's bytes over PCIe (the sums are equal), fewer on the network
 *   tree   n each way with each child 2^k < W (on another node when 2^k >= G)
 *   naive  n each way with each other rank (W - G of them on other nodes)
 *
 * Pure; 0 both ways for world 1. */
void costmodel_host_link_bytes(int world, int node_size, int nvlink, enum comm_algo algo, double bytes, double *in,
                               double *out);

#endif
