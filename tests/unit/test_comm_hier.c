/* test_comm_hier: hierarchical all-reduce in the thread simulator
 * (COMM_ALGO_HIER, sim/comm_sim_algos.c) on NODESxGPUS topologies, and the
 * topology's text (comm_topology_parse) and checks.
 *
 * The reference sums each element in the order the three rings fix (inside
 * the node starting after the chunk's owner, then the nodes' sums the same
 * way across nodes) with the library's own adder (comm_reduce_sum3), so every
 * rank's result must equal it bit for bit, in every type; float32 results are
 * also held against a sum in double. Same bits run to run under injected
 * delays; 1xW and Wx1 are the flat ring's bits; only 1/GPUS of the buffer
 * crosses the nodes. */
#include "check.h"
#include "base/error.h"
#include "base/half.h"
#include "comm/comm.h"
#include "comm/comm_backend.h"
#include "sim/comm_sim.h"
#include "sim/ranks.h"
#include "sim/ring_schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rank r's value i, as a float: varied magnitudes and signs, so the order of
 * the additions shows in the bits. */
static float hier_value(int r, size_t i)
{
    uint32_t h = (uint32_t)(r * 2654435761u) ^ (uint32_t)(i * 40503u + 17u);
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    return ((float)(h % 20001u) - 10000.0f) / (float)(1u + (h >> 27));
}

/* Rank r's element i in dtype (float32, float16, bfloat16) into *out. */
static void hier_element(enum comm_dtype dtype, int r, size_t i, void *out)
{
    float v = hier_value(r, i);
    if (dtype == COMM_FLOAT32)
        memcpy(out, &v, sizeof v);
    else if (dtype == COMM_FLOAT16)
        half_from_floats(out, &v, 1);
    else
        half_bf16_from_floats(out, &v, 1);
}

/* Rank r's input of `count` elements. */
static void hier_fill(enum comm_dtype dtype, int r, void *buf, size_t count)
{
    for (size_t i = 0; i < count; i++)
        hier_element(dtype, r, i, (unsigned char *)buf + i * comm_dtype_size(dtype));
}

struct hier_job {
    comm_world_t *world;
    enum comm_algo algo;
    enum comm_dtype dtype;
    enum comm_op op;
    size_t count;
    int in_place;
    unsigned char **out; /* per rank: its result */
    uint64_t *sent;      /* per rank: bytes through the channels, or NULL */
};

static int hier_rank(struct rank_ctx *ctx)
{
    struct hier_job *j = ctx->shared;
    size_t es = comm_dtype_size(j->dtype);
    struct comm_config cfg;
    comm_config_default(&cfg);
    cfg.rank = ctx->rank;
    cfg.shared = j->world;
    cfg.algo = j->algo;
    comm_t *c;
    int rc = comm_open(&cfg, &c);
    if (rc < 0)
        return rc;
    unsigned char *in = malloc(j->count * es + 1), *out = j->out[ctx->rank];
    hier_fill(j->dtype, ctx->rank, in, j->count);
    if (j->in_place) {
        rc = comm_allreduce(c, in, in, j->count, j->dtype, j->op);
        memcpy(out, in, j->count * es);
    } else {
        rc = comm_allreduce(c, in, out, j->count, j->dtype, j->op);
    }
    if (j->sent)
        j->sent[ctx->rank] = comm_sim_bytes_sent(c);
    free(in);
    comm_close(c);
    return rc;
}

/* Runs the job on a world of nodes x gpus ranks (node_size = gpus); faults
 * may be NULL. Allocates j->out, which hier_free releases. */
static int hier_run(struct hier_job *j, int nodes, int gpus, const char *faults)
{
    int W = nodes * gpus;
    struct comm_world_options opt = {.world = W, .node_size = gpus, .faults = faults};
    j->out = calloc((size_t)W, sizeof *j->out);
    for (int r = 0; r < W; r++)
        j->out[r] = calloc(j->count * comm_dtype_size(j->dtype) + 1, 1);
    int rc = comm_world_create("sim", &opt, &j->world);
    if (rc < 0)
        return rc;
    rc = ranks_run(W, hier_rank, j, NULL, 0, NULL);
    comm_world_destroy(j->world);
    return rc;
}

static void hier_free(struct hier_job *j, int W)
{
    for (int r = 0; r < W; r++)
        free(j->out[r]);
    free(j->out);
}

/* dst = the sum over `n` members (first, first + stride, ...) of src (n
 * buffers of one element), in ring order: starting after member `owner`,
 * ending with it, each addition the library's (sim_recv adds the message
 * and its own value with comm_reduce_sum3). */
static void ring_order_sum(enum comm_dtype dtype, unsigned char *dst, unsigned char *const *src, int n, int owner)
{
    size_t es = comm_dtype_size(dtype);
    memcpy(dst, src[(owner + 1) % n], es);
    for (int k = 2; k <= n; k++)
        comm_reduce_sum3(dtype, dst, dst, src[(owner + k) % n], 1);
}

/* The expected result of element i on a topology nodes x gpus: the rings'
 * order, then divided by the world for avg. */
static void hier_reference(enum comm_dtype dtype, enum comm_op op, int nodes, int gpus, size_t count, size_t i,
                           unsigned char *want)
{
    size_t off = 0, len = 0, sub_off, sub_len;
    unsigned char vals[64][8], sums[64][8], *members[64]; /* the tests' topologies have at most 8 nodes and GPUs */
    /* which in-node chunk (its owner, local index l), and which piece of it across nodes (owner node m) */
    int l = 0, m = 0;
    for (l = 0; l < gpus; l++) {
        ring_chunk(count, gpus, l, &off, &len);
        if (i >= off && i < off + len)
            break;
    }
    for (m = 0; m < nodes; m++) {
        ring_chunk(len, nodes, m, &sub_off, &sub_len);
        if (i - off >= sub_off && i - off < sub_off + sub_len)
            break;
    }
    for (int n = 0; n < nodes; n++) {
        for (int g = 0; g < gpus; g++) {
            hier_element(dtype, n * gpus + g, i, vals[g]);
            members[g] = vals[g];
        }
        ring_order_sum(dtype, sums[n], members, gpus, l);
    }
    for (int n = 0; n < nodes; n++)
        members[n] = sums[n];
    ring_order_sum(dtype, want, members, nodes, m);
    if (op == COMM_AVG)
        comm_reduce_divide(dtype, want, 1, nodes * gpus);
}

static double hier_to_double(enum comm_dtype dtype, const unsigned char *p)
{
    float f;
    if (dtype == COMM_FLOAT32)
        memcpy(&f, p, 4);
    else if (dtype == COMM_FLOAT16)
        half_to_floats(&f, (const uint16_t *)p, 1);
    else
        half_bf16_to_floats(&f, (const uint16_t *)p, 1);
    return f;
}

static const int topologies[][2] = {{2, 2}, {2, 4}, {4, 2}, {3, 2}, {2, 3}, {1, 4}, {4, 1}, {1, 1}};
#define NTOPOLOGIES (int)(sizeof topologies / sizeof topologies[0])

/* Every rank equals the schedule-order reference bit for bit; float32 is
 * also within rounding of the sum in double. */
static void hier_check(const struct hier_job *j, int nodes, int gpus, const char *what)
{
    int W = nodes * gpus;
    size_t es = comm_dtype_size(j->dtype);
    for (int r = 1; r < W; r++)
        CHECK_MSG(memcmp(j->out[r], j->out[0], j->count * es) == 0, "%s: rank %d differs from rank 0", what, r);
    /* elements far apart only, for large counts: the reference re-derives each input */
    size_t step = j->count > 2000 ? j->count / 997 : 1;
    for (size_t i = 0; i < j->count; i += step) {
        unsigned char want[8];
        hier_reference(j->dtype, j->op, nodes, gpus, j->count, i, want);
        CHECK_MSG(memcmp(j->out[0] + i * es, want, es) == 0, "%s: element %zu: got %.9g, want %.9g (schedule order)",
                  what, i, hier_to_double(j->dtype, j->out[0] + i * es), hier_to_double(j->dtype, want));
        if (j->dtype == COMM_FLOAT32) {
            double s = 0, a = 0;
            for (int q = 0; q < W; q++) {
                s += hier_value(q, i);
                a += fabs(hier_value(q, i));
            }
            if (j->op == COMM_AVG)
                s /= W, a /= W;
            double tol = (W + 1) * 1.2e-7 * a + 1e-30;
            float got;
            memcpy(&got, j->out[0] + i * es, 4);
            CHECK_MSG(fabs(got - s) <= tol, "%s: element %zu: got %.9g, the sum is %.9g (tolerance %.3g)", what, i,
                      got, s, tol);
        }
    }
}

TEST(hier_allreduce_equals_the_schedule_order_sum_on_every_rank)
{
    /* 0, 1, fewer than GPUS or NODES, not divisible by either, past one channel slot (65536 floats) */
    const size_t counts[] = {0, 1, 7, 1001, 65536 * 2 + 5};
    for (int t = 0; t < NTOPOLOGIES; t++)
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
            for (int in_place = 0; in_place < 2; in_place++) {
                int nodes = topologies[t][0], gpus = topologies[t][1];
                if (counts[ci] > 100000 && (in_place || t > 4)) /* the big count on a few runs only: 2 cores */
                    continue;
                struct hier_job j = {.algo = COMM_ALGO_HIER, .dtype = COMM_FLOAT32, .count = counts[ci],
                                     .in_place = in_place};
                char what[96];
                snprintf(what, sizeof what, "hier %dx%d count=%zu %s", nodes, gpus, j.count,
                         in_place ? "in-place" : "out-of-place");
                CHECK_OK(hier_run(&j, nodes, gpus, NULL));
                hier_check(&j, nodes, gpus, what);
                hier_free(&j, nodes * gpus);
            }
}

TEST(hier_allreduce_16_bit_types_and_avg)
{
    const enum comm_dtype dtypes[] = {COMM_FLOAT16, COMM_BFLOAT16, COMM_FLOAT32};
    for (int d = 0; d < 3; d++)
        for (int op = 0; op < 2; op++)
            for (int t = 0; t < 5; t++) {
                int nodes = topologies[t][0], gpus = topologies[t][1];
                struct hier_job j = {.algo = COMM_ALGO_HIER, .dtype = dtypes[d], .op = op ? COMM_AVG : COMM_SUM,
                                     .count = 1001};
                char what[96];
                snprintf(what, sizeof what, "hier %dx%d %s %s", nodes, gpus, comm_dtype_name(j.dtype),
                         comm_op_name(j.op));
                CHECK_OK(hier_run(&j, nodes, gpus, NULL));
                hier_check(&j, nodes, gpus, what);
                hier_free(&j, nodes * gpus);
            }
}

/* Whatever the thread timing: later runs hold back one rank or two. */
TEST(hier_allreduce_is_the_same_bits_every_run)
{
    static const char *const timings[] = {NULL, "delay:0@1:40", "delay:5@1:40,delay:2@1:15", "delay:3@1:25"};
    size_t n = 65536 + 333;
    unsigned char *first = NULL;
    for (int run = 0; run < 4; run++) {
        struct hier_job j = {.algo = COMM_ALGO_HIER, .dtype = COMM_FLOAT32, .count = n};
        CHECK_OK(hier_run(&j, 3, 2, timings[run]));
        if (!first) {
            first = j.out[0];
            j.out[0] = calloc(1, 1);
        } else {
            CHECK_MSG(memcmp(first, j.out[4], n * 4) == 0, "run %d differs from run 0", run);
        }
        hier_free(&j, 6);
    }
    free(first);
}

/* One node, or one rank per node: the flat ring, bit for bit. */
TEST(hier_on_one_node_or_one_gpu_per_node_is_the_ring)
{
    const int shapes[][2] = {{1, 5}, {5, 1}};
    for (int s = 0; s < 2; s++) {
        struct hier_job h = {.algo = COMM_ALGO_HIER, .dtype = COMM_FLOAT32, .count = 70001};
        struct hier_job r = {.algo = COMM_ALGO_RING, .dtype = COMM_FLOAT32, .count = 70001};
        CHECK_OK(hier_run(&h, shapes[s][0], shapes[s][1], NULL));
        CHECK_OK(hier_run(&r, shapes[s][0], shapes[s][1], NULL));
        CHECK_MSG(memcmp(h.out[0], r.out[0], 70001 * 4) == 0, "%dx%d: hier differs from the ring", shapes[s][0],
                  shapes[s][1]);
        hier_free(&h, 5);
        hier_free(&r, 5);
    }
}

/* Each rank sends 2(G-1)/G n inside its node and 2(N-1)/N n/G across: only
 * its slice crosses the network. n = 4 x 3 x 8000 floats divides evenly. */
TEST(hier_sends_one_slice_per_rank_across_nodes)
{
    int N = 3, G = 4;
    size_t n = (size_t)N * G * 8000;
    uint64_t sent[12];
    struct hier_job j = {.algo = COMM_ALGO_HIER, .dtype = COMM_FLOAT32, .count = n, .sent = sent};
    CHECK_OK(hier_run(&j, N, G, NULL));
    uint64_t bytes = n * 4, inside = 2 * (uint64_t)(G - 1) * bytes / G, across = 2 * (uint64_t)(N - 1) * bytes / G / N;
    for (int r = 0; r < N * G; r++)
        CHECK_EQ_U64(sent[r], inside + across);
    hier_free(&j, N * G);
}

/* Under hier, the other collectives run their flat algorithms: on 2x2, small
 * integers (exact in any order) come out as NCCL's conventions say. */
static int flat_rank(struct rank_ctx *ctx)
{
    struct comm_config cfg;
    comm_config_default(&cfg);
    cfg.rank = ctx->rank;
    cfg.shared = ctx->shared;
    cfg.algo = COMM_ALGO_HIER;
    comm_t *c;
    int rc = comm_open(&cfg, &c), r = ctx->rank, bad = 0;
    if (rc < 0)
        return rc;
    float a[8], b[8];
    for (int i = 0; i < 8; i++)
        a[i] = (float)(10 * r + i);
    if ((rc = comm_broadcast(c, a, 8, COMM_FLOAT32, 2)) == 0) /* a[i] = 20 + i */
        rc = comm_reduce_scatter(c, a, b, 2, COMM_FLOAT32, COMM_SUM);
    bad += rc == 0 && (b[0] != 4 * (20 + 2 * r) || b[1] != 4 * (21 + 2 * r));
    if (rc == 0 && (rc = comm_allgather(c, b, a, 2, COMM_FLOAT32)) == 0)
        for (int i = 0; i < 8; i++)
            bad += a[i] != 4 * (20 + i);
    comm_close(c);
    return rc < 0 ? rc : bad ? err_set(ERR_STATE, "rank %d: %d wrong results", r, bad) : 0;
}

TEST(hier_leaves_the_other_collectives_flat)
{
    struct comm_world_options opt = {.world = 4, .node_size = 2};
    comm_world_t *w;
    CHECK_OK(comm_world_create("sim", &opt, &w));
    CHECK_OK(ranks_run(4, flat_rank, w, NULL, 0, NULL));
    comm_world_destroy(w);
}

TEST(a_world_must_fill_its_topology)
{
    comm_world_t *w = NULL;
    struct comm_world_options six_in_fours = {.world = 6, .node_size = 4};
    CHECK_ERR(comm_world_create("sim", &six_in_fours, &w), ERR_ARG, "a world of 6 ranks cannot be cut into nodes of 4");
    CHECK(w == NULL);
    struct comm_world_options negative = {.world = 4, .node_size = -2};
    CHECK_ERR(comm_world_create("sim", &negative, &w), ERR_ARG, "nodes of -2");
}

TEST(topology_text)
{
    int n = 0, g = 0;
    CHECK_OK(comm_topology_parse("2x8", &n, &g));
    CHECK_EQ(n, 2);
    CHECK_EQ(g, 8);
    CHECK_OK(comm_topology_parse("1x1", &n, &g));
    CHECK_EQ(n * g, 1);
    CHECK_OK(comm_topology_parse("32x32", &n, &g));
    CHECK_EQ(n * g, COMM_TOPOLOGY_MAX_RANKS);
    static const char *const bad[] = {"", "8", "x8", "2x", "0x4", "2x0", "2*8", "2x8x", " 2x8", "2x 8", "-1x2",
                                      "2X8", "2x8 ", "99999999999x1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char needle[64];
        snprintf(needle, sizeof needle, "topology '%s'", bad[i]);
        CHECK_ERR(comm_topology_parse(bad[i], &n, &g), ERR_ARG, needle);
    }
    CHECK_ERR(comm_topology_parse("32x33", &n, &g), ERR_ARG, "32 x 33 = 1056 ranks, more than the 1024");
}

TEST(hier_is_a_name)
{
    enum comm_algo a;
    CHECK_OK(comm_algo_parse("hier", &a));
    CHECK_EQ(a, COMM_ALGO_HIER);
    CHECK_STR(comm_algo_name(COMM_ALGO_HIER), "hier");
    CHECK_ERR(comm_algo_parse("hierarchical", &a), ERR_ARG, "(ring, tree, naive, hier)");
}
