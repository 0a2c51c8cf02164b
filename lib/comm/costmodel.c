/* costmodel: alpha-beta-gamma predictions of all-reduce time (see costmodel.h). */
#include "comm/costmodel.h"

#include <math.h>

/* Messages needed to move `bytes` in segments. */
static double costmodel_messages(const struct costmodel *m, double bytes)
{
    if (bytes <= 0)
        return 0;
    return m->segment_bytes > 0 ? ceil(bytes / m->segment_bytes) : 1;
}

/* A link class: what one message over it costs. */
struct costmodel_link {
    double alpha, beta;
};

static struct costmodel_link costmodel_inside(const struct costmodel *m)
{
    return (struct costmodel_link){m->alpha_s, m->beta_s_per_b};
}

static struct costmodel_link costmodel_across(const struct costmodel *m)
{
    return m->beta_inter_s_per_b > 0 ? (struct costmodel_link){m->alpha_inter_s, m->beta_inter_s_per_b}
                                     : costmodel_inside(m);
}

/* `steps` ring steps over `link`, each moving `chunk` bytes in segments. */
static double costmodel_steps(const struct costmodel *m, struct costmodel_link link, double steps, double chunk)
{
    return steps * (costmodel_messages(m, chunk) * link.alpha + chunk * link.beta);
}

double costmodel_allreduce(const struct costmodel *m, enum comm_algo algo, int world, double bytes)
{
    if (world <= 1 || bytes <= 0)
        return 0;
    int N = m->node_size > 0 && m->node_size < world && world % m->node_size == 0 ? world / m->node_size : 1;
    double W = world, G = world / N, n = bytes, path, work;
    /* a flat algorithm goes at the pace of its slowest hop: across nodes when there are several */
    struct costmodel_link flat = N > 1 ? costmodel_across(m) : costmodel_inside(m);
    switch (algo) {
    case COMM_ALGO_TREE: {
        /* the root receives and sends one copy per level, segment by segment:
         * its links set the pace, whether or not the segments are pipelined */
        double depth = ceil(log2(W));
        path = costmodel_steps(m, flat, 2 * depth, n) + depth * n * m->gamma_s_per_b;
        work = 2 * (W - 1) * n * flat.beta + (W - 1) * n * m->gamma_s_per_b;
        break;
    }
    case COMM_ALGO_NAIVE:
        path = costmodel_steps(m, flat, 2 * (W - 1), n) + (W - 1) * n * m->gamma_s_per_b;
        work = path;
        break;
    case COMM_ALGO_HIER: {
        /* reduce-scatter in the node, all-reduce of one 1/G slice across the
         * N nodes, all-gather in the node (see costmodel.h) */
        double slice = n / G;
        struct costmodel_link across = costmodel_across(m);
        if (m->inter_ports > 0 && m->inter_ports < G) /* G rings at once through fewer ports */
            across.beta *= G / m->inter_ports;
        path = costmodel_steps(m, costmodel_inside(m), G - 1, slice) + (G - 1) * slice * m->gamma_s_per_b +
               costmodel_steps(m, across, 2 * (N - 1), slice / N) +
               (N - 1) / (double)N * slice * m->gamma_s_per_b +
               costmodel_steps(m, costmodel_inside(m), G - 1, slice);
        work = W * path;
        break;
    }
    default: {
        /* 2(W-1) steps, each moving one chunk of n/W in segments */
        double chunk = n / W;
        path = costmodel_steps(m, flat, 2 * (W - 1), chunk) + (W - 1) * chunk * m->gamma_s_per_b;
        work = W * path;
        break;
    }
    }
    double cores = m->cores > 0 && m->cores < world ? m->cores : W;
    return fmax(path, work / cores);
}

double costmodel_collective(const struct costmodel *m, enum comm_coll coll, enum comm_algo algo, int world,
                            double bytes)
{
    if (world <= 1)
        return 0;
    if (coll == COMM_ALLREDUCE)
        return costmodel_allreduce(m, algo, world, bytes);
    int N = m->node_size > 0 && m->node_size < world && world % m->node_size == 0 ? world / m->node_size : 1;
    struct costmodel_link link = N > 1 ? costmodel_across(m) : costmodel_inside(m);
    double W = world, n = bytes > 0 ? bytes : 0, depth = ceil(log2(W));
    switch (coll) {
    case COMM_BROADCAST:
        return fmin(depth * (link.alpha + n * link.beta),
                    (depth + W - 1) * link.alpha + 2 * (W - 1) / W * n * link.beta);
    case COMM_REDUCE_SCATTER:
        return (W - 1) * link.alpha + (W - 1) / W * n * (link.beta + m->gamma_s_per_b);
    case COMM_ALLGATHER:
        return (W - 1) * link.alpha + (W - 1) / W * n * link.beta;
    default: /* barrier */
        return depth * link.alpha;
    }
}
