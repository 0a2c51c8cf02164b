/* comm_sim_algos: how the simulator moves a collective's bytes: ring
 * (reduce-scatter then all-gather, sim/ring_schedule.h), hierarchical
 * all-reduce (rings inside nodes and across them, on the world's topology),
 * binomial tree and naive all-reduce, ring-pipelined broadcast, and the ring
 * phases alone for reduce-scatter and all-gather (see comm_sim.h for where
 * this sits). Under "hier", the collectives other than all-reduce run their
 * flat algorithm.
 *
 * Every algorithm cuts its data into pieces of one channel slot and runs its
 * whole schedule piece by piece (NCCL's slices), so a link buffer of a few
 * slots never deadlocks and large messages stream through the ring. Each
 * element is reduced in one order fixed by the schedule, never by timing, so
 * results are the same bits on every run; and each algorithm ends by
 * distributing one rank's finished values, so every rank ends bit-identical.
 */
#include "sim/comm_sim.h"

#include "base/clock.h"
#include "base/error.h"
#include "sim/ring_schedule.h"

#include <stdlib.h>
#include <string.h>

/* A failed channel wait: ERR_PEER (someone else failed: say so), or
 * ERR_TIMEOUT (this rank is the watchdog of a stalled data phase). */
static int sim_stalled(struct sim_exec *x, int rc, const char *waiting_for, int peer)
{
    char desc[128], story[320];
    comm_coll_describe(x->d, desc, sizeof desc);
    if (rc == ERR_PEER)
        return err_set(ERR_PEER, "%s aborted on rank %d: another rank failed first: %s", desc, x->rank,
                       x->w->base.diagnosis);
    pthread_mutex_lock(&x->w->lock);
    sim_rank_story(x->w, peer, story, sizeof story);
    pthread_mutex_unlock(&x->w->lock);
    return sim_world_fail(x->w, ERR_TIMEOUT,
                          "watchdog: %s stalled in its data phase: rank %d waited %s rank %d until the timeout\n"
                          "  rank %d: %s",
                          desc, x->rank, waiting_for, peer, peer, story);
}

static int sim_link(struct sim_exec *x, int src, int dst, channel_t **ch)
{
    int rc = sim_channel(x->w, src, dst, ch);
    return rc < 0 ? sim_world_fail(x->w, rc, "%s", err_msg()) : 0;
}

/* Sends `bytes` from src to `peer` over ch (one slot at most). */
static int sim_send(struct sim_exec *x, channel_t *ch, int peer, const void *src, size_t bytes)
{
    void *slot;
    int rc = channel_send_begin(ch, x->deadline_ns, &slot);
    if (rc < 0)
        return sim_stalled(x, rc, "for room to send to", peer);
    memcpy(slot, src, bytes);
    channel_send_end(ch, bytes);
    x->sc->bytes_sent += bytes;
    return 0;
}

/* Receives `bytes` from `peer`: dst = message (own == NULL) or dst =
 * message + own, element-wise (the reduction of one step). */
static int sim_recv(struct sim_exec *x, channel_t *ch, int peer, void *dst, const void *own, size_t bytes)
{
    const void *slot;
    size_t got;
    int rc = channel_recv_begin(ch, x->deadline_ns, &slot, &got);
    if (rc < 0)
        return sim_stalled(x, rc, "for data from", peer);
    if (got != bytes) {
        channel_recv_end(ch);
        char desc[128];
        return sim_world_fail(x->w, ERR_STATE,
                              "%s: rank %d expected a message of %zu bytes from rank %d, got %zu: the ranks' "
                              "schedules disagree",
                              comm_coll_describe(x->d, desc, sizeof desc), x->rank, bytes, peer, got);
    }
    size_t es = comm_dtype_size(x->d->dtype);
    if (own)
        comm_reduce_sum3(x->d->dtype, dst, slot, own, bytes / es);
    else
        memcpy(dst, slot, bytes);
    channel_recv_end(ch);
    return 0;
}

/* Elements per piece: one channel slot. */
static size_t sim_piece(const struct sim_exec *x) { return SIM_SLOT_BYTES / comm_dtype_size(x->d->dtype); }

/* Piece p of a run of `len` elements: its first element and length (0 past the end). */
static size_t sim_piece_len(size_t len, size_t piece, size_t p)
{
    size_t begin = p * piece;
    return begin >= len ? 0 : (len - begin < piece ? len - begin : piece);
}

/* ---- ring ---------------------------------------------------------------- */

/* The ranks a ring runs over: base + k x stride for k = 0 .. size-1, this
 * rank being k = index; it sends to k+1 and receives from k-1 (mod size).
 * The flat ring is the whole world {0, 1, W, rank}; hierarchical all-reduce
 * runs one ring per node {node x G, 1, G, local} and one per local index
 * across the nodes {local, G, N, node}. */
struct ring_group {
    int base, stride, size, index;
};

/* The world rank of member k of g (k taken mod size). */
static int ring_member(const struct ring_group *g, int k)
{
    return g->base + ((k % g->size) + g->size) % g->size * g->stride;
}

static struct ring_group ring_world(const struct sim_exec *x) { return (struct ring_group){0, 1, x->world, x->rank}; }

struct ring_pass {
    struct ring_group g;     /* who takes part: the schedule runs on g.index of g.size */
    const unsigned char *in; /* this rank's contribution (reduce-scatter) */
    unsigned char *out;      /* where chunks are reduced and gathered */
    size_t count;            /* elements of the whole buffer (of this ring's part of it) */
    size_t fixed;            /* chunk length when every chunk has it, else 0 */
    int reduce, gather;      /* which phases run */
};

static void ring_pass_chunk(const struct ring_pass *rp, int c, size_t *off, size_t *len)
{
    if (rp->fixed) {
        *off = (size_t)c * rp->fixed;
        *len = rp->fixed;
    } else {
        ring_chunk(rp->count, rp->g.size, c, off, len);
    }
}

/* A schedule function's answer, checked: a learner's bug must fail clearly. */
static int ring_checked(struct sim_exec *x, const struct ring_group *g, int chunk, const char *fn, int step)
{
    if (chunk >= 0 && chunk < g->size)
        return chunk;
    char desc[128];
    if (chunk == ERR_UNSUPPORTED)
        return sim_world_fail(x->w, ERR_UNSUPPORTED, "%s: %s is not written yet: %s",
                              comm_coll_describe(x->d, desc, sizeof desc), fn, err_msg());
    return sim_world_fail(x->w, ERR_RANGE, "%s: %s(rank %d, world %d, step %d) = %d, not a chunk 0..%d",
                          comm_coll_describe(x->d, desc, sizeof desc), fn, g->index, g->size, step, chunk,
                          g->size - 1);
}

/* One step for piece p: send chunk `cs` from `src`, receive chunk `cr`
 * into out (reducing with in when `reduce`). */
static int ring_step(struct sim_exec *x, const struct ring_pass *rp, channel_t *to, channel_t *from, size_t p,
                     int cs, const unsigned char *src, int cr, int reduce)
{
    size_t es = comm_dtype_size(x->d->dtype), piece = sim_piece(x), off, len, n;
    int right = ring_member(&rp->g, rp->g.index + 1), left = ring_member(&rp->g, rp->g.index - 1);
    ring_pass_chunk(rp, cs, &off, &len);
    if ((n = sim_piece_len(len, piece, p)) > 0) {
        int rc = sim_send(x, to, right, src + (off + p * piece) * es, n * es);
        if (rc < 0)
            return rc;
    }
    ring_pass_chunk(rp, cr, &off, &len);
    if ((n = sim_piece_len(len, piece, p)) > 0) {
        size_t at = (off + p * piece) * es;
        return sim_recv(x, from, left, rp->out + at, reduce ? rp->in + at : NULL, n * es);
    }
    return 0;
}

static int ring_run(struct sim_exec *x, const struct ring_pass *rp)
{
    int W = rp->g.size, r = rp->g.index, rc;
    if (W == 1)
        return 0;
    channel_t *to, *from;
    if ((rc = sim_link(x, x->rank, ring_member(&rp->g, r + 1), &to)) < 0 ||
        (rc = sim_link(x, ring_member(&rp->g, r - 1), x->rank, &from)) < 0)
        return rc;
    size_t first_off, longest;
    ring_pass_chunk(rp, 0, &first_off, &longest); /* chunk 0 is never shorter than another */
    size_t piece = sim_piece(x), pieces = (longest + piece - 1) / piece;
    for (size_t p = 0; p < pieces; p++) {
        for (int s = 0; rp->reduce && s < W - 1; s++) {
            int cs = ring_checked(x, &rp->g, ring_rs_send(r, W, s), "ring_rs_send", s);
            int cr = ring_checked(x, &rp->g, ring_rs_recv(r, W, s), "ring_rs_recv", s);
            if (cs < 0 || cr < 0)
                return cs < 0 ? cs : cr;
            /* step 0 sends this rank's own data; later steps forward a partial sum */
            if ((rc = ring_step(x, rp, to, from, p, cs, s == 0 ? rp->in : rp->out, cr, 1)) < 0)
                return rc;
        }
        for (int s = 0; rp->gather && s < W - 1; s++) {
            int cs = ring_checked(x, &rp->g, ring_ag_send(r, W, s), "ring_ag_send", s);
            int cr = ring_checked(x, &rp->g, ring_ag_recv(r, W, s), "ring_ag_recv", s);
            if (cs < 0 || cr < 0)
                return cs < 0 ? cs : cr;
            if ((rc = ring_step(x, rp, to, from, p, cs, rp->out, cr, 0)) < 0)
                return rc;
        }
    }
    return 0;
}

/* ---- hierarchical all-reduce ------------------------------------------------ */

/* The world as N nodes of G ranks (sim_world.node_size). Three rings, one
 * after the other, each the ring above on a group of ranks:
 *   (a) reduce-scatter inside the node: the buffer cut into G chunks, local
 *       rank l ends with the node's sum of chunk l;
 *   (b) all-reduce of chunk l across the nodes, among the N ranks of local
 *       index l (a ring over N, which cuts chunk l into N pieces of its own):
 *       each ends with the world's sum of chunk l, the same bits on all N
 *       (the ring's all-gather hands out its owner's);
 *   (c) all-gather inside the node: rank l hands chunk l to its node.
 * Each element is reduced in an order the three schedules fix (inside its
 * node in ring order, then the nodes' sums in ring order), and every rank
 * ends with bits that come from one rank per chunk: all ranks agree. Only
 * (b) crosses the network, with 1/G of the buffer per rank. With G = 1, (a)
 * and (c) have nothing to do and (b) is the flat ring over the world; with
 * N = 1, (b) has nothing to do and (a) + (c) are the flat ring. */
static int hier_allreduce(struct sim_exec *x)
{
    const struct comm_coll_desc *d = x->d;
    int G = x->w->node_size, N = x->world / G, node = x->rank / G, local = x->rank % G, rc;
    size_t es = comm_dtype_size(d->dtype), off, len;
    struct ring_group inside = {node * G, 1, G, local}, across = {local, G, N, node};
    struct ring_pass rs = {.g = inside, .in = d->sendbuf, .out = d->recvbuf, .count = d->count, .reduce = 1};
    if ((rc = ring_run(x, &rs)) < 0)
        return rc;
    ring_chunk(d->count, G, local, &off, &len);
    /* with G = 1 there was no (a): this rank's own values are still in sendbuf */
    const unsigned char *mine = G > 1 ? (const unsigned char *)d->recvbuf : (const unsigned char *)d->sendbuf;
    struct ring_pass ar = {.g = across, .in = mine + off * es, .out = (unsigned char *)d->recvbuf + off * es,
                           .count = len, .reduce = 1, .gather = 1};
    if ((rc = ring_run(x, &ar)) < 0)
        return rc;
    struct ring_pass ag = {.g = inside, .out = d->recvbuf, .count = d->count, .gather = 1};
    return ring_run(x, &ag);
}

/* ---- tree and naive all-reduce --------------------------------------------- */

/* Binomial tree rooted at rank 0. Up: a rank receives from its children
 * r + 1, r + 2, r + 4, ... (below its lowest set bit) in that order, adds,
 * and sends the subtree's sum to its parent r - lowbit. Down: the total flows
 * back along the same edges. Each phase runs over all pieces in turn, so
 * pieces stream through the tree (pipelined) and the root's links set the
 * pace: it receives and sends log2 W copies of the buffer. */
static int tree_lowbit(int r) { return r == 0 ? 1 << 30 : (r & -r); }

static int tree_up_piece(struct sim_exec *x, unsigned char *acc, size_t bytes)
{
    int W = x->world, r = x->rank, lowbit = tree_lowbit(r), rc;
    channel_t *ch;
    for (int mask = 1; mask < lowbit && r + mask < W; mask <<= 1)
        if ((rc = sim_link(x, r + mask, r, &ch)) < 0 || (rc = sim_recv(x, ch, r + mask, acc, acc, bytes)) < 0)
            return rc;
    if (r != 0 && ((rc = sim_link(x, r, r - lowbit, &ch)) < 0 || (rc = sim_send(x, ch, r - lowbit, acc, bytes)) < 0))
        return rc;
    return 0;
}

static int tree_down_piece(struct sim_exec *x, unsigned char *acc, size_t bytes)
{
    int W = x->world, r = x->rank, lowbit = tree_lowbit(r), rc;
    channel_t *ch;
    if (r != 0 &&
        ((rc = sim_link(x, r - lowbit, r, &ch)) < 0 || (rc = sim_recv(x, ch, r - lowbit, acc, NULL, bytes)) < 0))
        return rc;
    for (int mask = 1; mask < lowbit && r + mask < W; mask <<= 1)
        if ((rc = sim_link(x, r, r + mask, &ch)) < 0 || (rc = sim_send(x, ch, r + mask, acc, bytes)) < 0)
            return rc;
    return 0;
}

/* Naive: every rank sends to rank 0, which adds them in rank order and sends
 * the total back to each rank in turn: rank 0's links carry everything. */
static int naive_piece(struct sim_exec *x, unsigned char *acc, size_t bytes)
{
    int W = x->world, r = x->rank, rc;
    channel_t *ch;
    if (r != 0) {
        if ((rc = sim_link(x, r, 0, &ch)) < 0 || (rc = sim_send(x, ch, 0, acc, bytes)) < 0 ||
            (rc = sim_link(x, 0, r, &ch)) < 0)
            return rc;
        return sim_recv(x, ch, 0, acc, NULL, bytes);
    }
    for (int q = 1; q < W; q++)
        if ((rc = sim_link(x, q, 0, &ch)) < 0 || (rc = sim_recv(x, ch, q, acc, acc, bytes)) < 0)
            return rc;
    for (int q = 1; q < W; q++)
        if ((rc = sim_link(x, 0, q, &ch)) < 0 || (rc = sim_send(x, ch, q, acc, bytes)) < 0)
            return rc;
    return 0;
}

/* Runs per_piece over the result buffer, piece by piece, after copying the
 * input there (the accumulator starts as this rank's own values). */
static int sim_by_pieces(struct sim_exec *x, int (*per_piece)(struct sim_exec *, unsigned char *, size_t))
{
    size_t es = comm_dtype_size(x->d->dtype), piece = sim_piece(x);
    unsigned char *out = x->d->recvbuf;
    for (size_t p = 0; p * piece < x->d->count; p++) {
        size_t n = sim_piece_len(x->d->count, piece, p);
        int rc = per_piece(x, out + p * piece * es, n * es);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- broadcast: a pipelined chain root -> root+1 -> ... ---------------------- */

static int chain_piece(struct sim_exec *x, unsigned char *buf, size_t bytes)
{
    int W = x->world, r = x->rank, root = x->d->root, rc;
    int left = (r + W - 1) % W, right = (r + 1) % W;
    channel_t *ch;
    if (r != root && ((rc = sim_link(x, left, r, &ch)) < 0 || (rc = sim_recv(x, ch, left, buf, NULL, bytes)) < 0))
        return rc;
    if (right != root && ((rc = sim_link(x, r, right, &ch)) < 0 || (rc = sim_send(x, ch, right, buf, bytes)) < 0))
        return rc;
    return 0;
}

/* ---- all-gather of a few words: copied at the rendezvous ------------------------ */

int sim_allgather_is_direct(const struct comm_coll_desc *d, int world)
{
    return d->coll == COMM_ALLGATHER &&
           d->count * comm_dtype_size(d->dtype) * (size_t)world <= SIM_ALLGATHER_DIRECT_BYTES;
}

void sim_allgather_direct(struct sim_world *w)
{
    const struct comm_coll_desc *d0 = &w->ranks[0].at;
    size_t block = d0->count * comm_dtype_size(d0->dtype);
    if (block == 0)
        return;
    for (int r = 0; r < w->world; r++)
        for (int q = 0; q < w->world; q++) {
            unsigned char *dst = (unsigned char *)w->ranks[r].at.recvbuf + (size_t)q * block;
            if (dst != (const unsigned char *)w->ranks[q].at.sendbuf) /* in place: rank q's block is there */
                memcpy(dst, w->ranks[q].at.sendbuf, block);
        }
}

/* ---- dispatch ---------------------------------------------------------------- */

int sim_algo_run(struct sim_exec *x)
{
    const struct comm_coll_desc *d = x->d;
    size_t es = comm_dtype_size(d->dtype), W = (size_t)x->world;
    switch (d->coll) {
    case COMM_ALLREDUCE: {
        if (x->algo == COMM_ALGO_HIER && W > 1)
            return hier_allreduce(x);
        if (x->algo == COMM_ALGO_RING && W > 1) {
            /* reads the input where it is: step 0 sends from it, every later
             * step reduces into recvbuf, so in place needs no copy either */
            struct ring_pass rp = {.g = ring_world(x), .in = d->sendbuf, .out = d->recvbuf, .count = d->count,
                                   .reduce = 1, .gather = 1};
            return ring_run(x, &rp);
        }
        /* tree and naive accumulate in recvbuf, starting from this rank's values */
        if (d->recvbuf != d->sendbuf && d->count)
            memcpy(d->recvbuf, d->sendbuf, d->count * es);
        if (W == 1)
            return 0;
        if (x->algo == COMM_ALGO_NAIVE)
            return sim_by_pieces(x, naive_piece);
        int rc = sim_by_pieces(x, tree_up_piece);
        return rc < 0 ? rc : sim_by_pieces(x, tree_down_piece);
    }
    case COMM_BROADCAST:
        return W == 1 ? 0 : sim_by_pieces(x, chain_piece);
    case COMM_REDUCE_SCATTER: {
        /* the partial sums need a whole buffer; the caller's recvbuf holds one block */
        unsigned char *scratch = malloc(d->count * W * es + 1);
        if (!scratch)
            return sim_world_fail(x->w, ERR_NOMEM, "reduce_scatter on rank %d: cannot allocate %zu bytes",
                                  x->rank, d->count * W * es);
        if (d->count)
            memcpy(scratch, d->sendbuf, d->count * W * es);
        struct ring_pass rp = {.g = ring_world(x), .in = scratch, .out = scratch, .count = d->count * W,
                               .fixed = d->count, .reduce = 1};
        int rc = d->count ? ring_run(x, &rp) : 0;
        if (rc == 0 && d->count)
            memmove(d->recvbuf, scratch + (size_t)x->rank * d->count * es, d->count * es);
        free(scratch);
        return rc;
    }
    case COMM_ALLGATHER: {
        if (sim_allgather_is_direct(d, x->world)) { /* moved at the rendezvous; counted as the ring would send */
            x->sc->bytes_sent += (W - 1) * d->count * es;
            return 0;
        }
        unsigned char *own = (unsigned char *)d->recvbuf + (size_t)x->rank * d->count * es;
        if (own != (const unsigned char *)d->sendbuf && d->count)
            memcpy(own, d->sendbuf, d->count * es);
        struct ring_pass rp = {.g = ring_world(x), .out = d->recvbuf, .count = d->count * W, .fixed = d->count,
                               .gather = 1};
        return d->count ? ring_run(x, &rp) : 0;
    }
    default:
        return 0;
    }
}
