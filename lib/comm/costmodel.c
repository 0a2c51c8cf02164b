/* costmodel: alpha-beta-gamma predictions of all-reduce time (see costmodel.h). */
#include "comm/costmodel.h"

#include "base/error.h"
#include "base/vclock.h"
#include "comm/comm_backend.h"

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

/* The nodes `world` ranks make on the model's topology: 1 without one, or
 * with a node size that does not divide the world. */
static int costmodel_nodes(const struct costmodel *m, int world)
{
    return m->node_size > 0 && m->node_size < world && world % m->node_size == 0 ? world / m->node_size : 1;
}

/* The ports a node's network has: inter_ports, or one a rank of the G in a node. */
static double costmodel_ports(const struct costmodel *m, double G)
{
    return m->inter_ports > 0 ? m->inter_ports : G;
}

/* The link hier's G rings across nodes see: a port each, or fewer ports
 * shared (beta_o G/P). */
static struct costmodel_link costmodel_hier_across(const struct costmodel *m, double G)
{
    struct costmodel_link across = costmodel_across(m);
    double ports = costmodel_ports(m, G);
    if (ports < G)
        across.beta *= G / ports;
    return across;
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
    int N = costmodel_nodes(m, world);
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
        struct costmodel_link across = costmodel_hier_across(m, G);
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
    int N = costmodel_nodes(m, world);
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

uint64_t costmodel_coll_ns(const struct costmodel *m, const struct comm_coll_desc *d, enum comm_algo algo, int world)
{
    double bytes = (double)d->count * (double)comm_dtype_size(d->dtype);
    if (d->coll == COMM_REDUCE_SCATTER || d->coll == COMM_ALLGATHER)
        bytes *= world;
    return vclock_ns_of_s(costmodel_collective(m, d->coll, algo, world, bytes));
}

/* Spans being written (costmodel_allreduce_spans): out[0 .. max-1] gets
 * them, n counts them all; step and t are the next step's number and start. */
struct costmodel_spans {
    struct costmodel_span *out;
    int max, n, step;
    double t;
};

/* What one step sends on one lane: over which link, using which share of the lane. */
struct costmodel_hop {
    enum costmodel_lane lane;
    struct costmodel_link link;
    double share;
};

static void costmodel_span_add(struct costmodel_spans *s, enum costmodel_lane lane, const char *phase, double bytes,
                               double len, double share)
{
    if (s->n < s->max)
        s->out[s->n] = (struct costmodel_span){.lane = lane, .phase = phase, .step = s->step, .bytes = bytes,
                                               .start_s = s->t, .end_s = s->t + len, .share = share};
    s->n++;
}

/* `steps` steps of `phase`, each sender moving `chunk` on every hop at once;
 * hops[0] sets the step's pace (the model's), the others end within it; in
 * a reduce phase (`reduce`) the chunk's addition follows the transfer. */
static void costmodel_span_phase(struct costmodel_spans *s, const struct costmodel *m, const char *phase,
                                 double steps, double chunk, int reduce, const struct costmodel_hop *hops, int nhops)
{
    for (double k = 0; k < steps; k++, s->step++) {
        double pace = costmodel_steps(m, hops[0].link, 1, chunk);
        for (int h = 0; h < nhops; h++)
            costmodel_span_add(s, hops[h].lane, phase, chunk, fmin(costmodel_steps(m, hops[h].link, 1, chunk), pace),
                               hops[h].share);
        s->t += pace;
        double add = reduce ? chunk * m->gamma_s_per_b : 0;
        if (add > 0) {
            costmodel_span_add(s, COSTMODEL_LANE_REDUCE, phase, 0, add, 1);
            s->t += add;
        }
    }
}

int costmodel_allreduce_spans(const struct costmodel *m, enum comm_algo algo, int world, double bytes,
                              struct costmodel_span *out, int max)
{
    if (algo == COMM_ALGO_TREE || algo == COMM_ALGO_NAIVE)
        return err_set(ERR_ARG, "the link timeline draws ring and hier: the model charges every level of %s at the "
                       "slowest link", algo == COMM_ALGO_TREE ? "tree" : "naive");
    struct costmodel_spans s = {.out = out, .max = max > 0 ? max : 0};
    if (world <= 1 || bytes <= 0)
        return 0;
    int N = costmodel_nodes(m, world);
    double W = world, G = world / N, ports = costmodel_ports(m, G);
    struct costmodel_hop inside = {COSTMODEL_LANE_INSIDE, costmodel_inside(m), 1};
    if (algo == COMM_ALGO_HIER) {
        double slice = bytes / G;
        struct costmodel_hop across = {COSTMODEL_LANE_ACROSS, costmodel_hier_across(m, G), fmin(G, ports) / ports};
        costmodel_span_phase(&s, m, "reduce-scatter in the node", G - 1, slice, 1, &inside, 1);
        costmodel_span_phase(&s, m, "all-reduce across nodes", N - 1, slice / N, 1, &across, 1);
        costmodel_span_phase(&s, m, "all-reduce across nodes", N - 1, slice / N, 0, &across, 1);
        costmodel_span_phase(&s, m, "all-gather in the node", G - 1, slice, 0, &inside, 1);
    } else if (N > 1) { /* every step crosses each node boundary once, at the network's pace */
        struct costmodel_hop hops[2] = {{COSTMODEL_LANE_ACROSS, costmodel_across(m), 1 / ports},
                                        {COSTMODEL_LANE_INSIDE, costmodel_inside(m), (G - 1) / G}};
        costmodel_span_phase(&s, m, "reduce-scatter", W - 1, bytes / W, 1, hops, 2);
        costmodel_span_phase(&s, m, "all-gather", W - 1, bytes / W, 0, hops, 2);
    } else {
        costmodel_span_phase(&s, m, "reduce-scatter", W - 1, bytes / W, 1, &inside, 1);
        costmodel_span_phase(&s, m, "all-gather", W - 1, bytes / W, 0, &inside, 1);
    }
    return s.n;
}

void costmodel_host_link_bytes(int world, int node_size, int nvlink, enum comm_algo algo, double bytes, double *in,
                               double *out)
{
    struct costmodel m = {.node_size = node_size};
    int N = costmodel_nodes(&m, world), G = world / N, W = world;
    *in = *out = 0;
    if (W < 2)
        return;
    switch (algo) {
    case COMM_ALGO_TREE:
        for (int child = 1; child < W; child *= 2) /* rank 0's children, one a level */
            if (!nvlink || child >= G) {
                *in += bytes;
                *out += bytes;
            }
        return;
    case COMM_ALGO_NAIVE:
        *in = *out = bytes * (nvlink ? W - G : W - 1);
        return;
    case COMM_ALGO_HIER:
        if (N > 1 && G > 1) {
            double across = 2.0 * (N - 1) / N * (bytes / G), inside = 2.0 * (G - 1) / G * bytes;
            *in = *out = across + (nvlink ? 0 : inside);
            return;
        }
        /* one node, or a GPU a node: the flat ring */
        /* fall through */
    default: {
        double ring = 2.0 * (W - 1) / W * bytes;
        *in = !nvlink || N > 1 ? ring : 0;  /* from rank W-1 */
        *out = !nvlink || G == 1 ? ring : 0; /* to rank 1 */
    }
    }
}
