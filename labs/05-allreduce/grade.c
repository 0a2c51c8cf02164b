/* grade: lab 5, the ring all-reduce's schedule (`make lab-5`).
 *
 * Your ring_schedule.c decides which chunk each rank sends and receives at
 * each step; the simulator (sim/comm_sim_algos.c) moves the bytes. These
 * tests run real all-reduces on rank threads and check the results, that
 * every rank ends bit-identical, and that each rank sent exactly what a ring
 * sends. A schedule that deadlocks hits the communicator's 2 s watchdog and
 * the test fails with its diagnosis.
 */
#include "comm/comm.h"
#include "sim/comm_sim.h"
#include "base/error.h"
#include "grader.h"
#include "sim/ranks.h"
#include "sim/ring_schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum lab_kind { LAB_ALLREDUCE, LAB_REDUCE_SCATTER, LAB_ALLGATHER };

struct lab_run {
    comm_world_t *world;
    enum lab_kind kind;
    size_t count;         /* all-reduce: elements; reduce-scatter / all-gather: per rank */
    float *out[8];        /* per rank: its result */
    uint64_t sent[8];     /* per rank: bytes it sent */
};

static float lab_value(int rank, size_t i) { return (float)((i * 13 + (size_t)rank * 5) % 17) * 0.25f - 1.5f; }

static int lab_rank(struct rank_ctx *ctx)
{
    struct lab_run *run = ctx->shared;
    struct comm_config cfg;
    comm_config_default(&cfg);
    cfg.rank = ctx->rank;
    cfg.shared = run->world;
    cfg.algo = COMM_ALGO_RING;
    cfg.timeout_s = 2;
    comm_t *c;
    int rc = comm_open(&cfg, &c);
    if (rc < 0)
        return rc;
    size_t n_in = run->kind == LAB_REDUCE_SCATTER ? run->count * (size_t)ctx->world : run->count;
    float *in = malloc((n_in + 1) * sizeof *in);
    for (size_t i = 0; i < n_in; i++)
        in[i] = lab_value(ctx->rank, i);
    float *out = run->out[ctx->rank];
    if (run->kind == LAB_ALLREDUCE)
        rc = comm_allreduce(c, in, out, run->count, COMM_FLOAT32, COMM_SUM);
    else if (run->kind == LAB_REDUCE_SCATTER)
        rc = comm_reduce_scatter(c, in, out, run->count, COMM_FLOAT32, COMM_SUM);
    else
        rc = comm_allgather(c, in, out, run->count, COMM_FLOAT32);
    run->sent[ctx->rank] = comm_sim_bytes_sent(c);
    free(in);
    comm_close(c);
    return rc;
}

/* Runs one collective on W ranks; the results stay in run->out (free with lab_done). */
static void lab_go(struct lab_run *run, int W)
{
    size_t n_out = run->kind == LAB_ALLGATHER ? run->count * (size_t)W : run->count;
    for (int r = 0; r < W; r++)
        run->out[r] = calloc(n_out + 1, sizeof(float));
    struct comm_world_options opt = {.world = W};
    CHECK_OK(comm_world_create("sim", &opt, &run->world));
    int rc = ranks_run(W, lab_rank, run, NULL, 0, NULL);
    const char *diag = comm_world_diagnosis(run->world);
    CHECK_MSG(rc == 0, "W=%d count=%zu: %s", W, run->count, *diag ? diag : err_msg());
    comm_world_destroy(run->world);
}

static void lab_done(struct lab_run *run, int W)
{
    for (int r = 0; r < W; r++)
        free(run->out[r]);
}

/* The sum over ranks of element i, in double. */
static double lab_sum(int W, size_t i)
{
    double s = 0;
    for (int r = 0; r < W; r++)
        s += lab_value(r, i);
    return s;
}

static void lab_allreduce_case(int W, size_t count)
{
    struct lab_run run = {.kind = LAB_ALLREDUCE, .count = count};
    lab_go(&run, W);
    for (size_t i = 0; i < count; i++) /* quarter-integers: every sum is exact */
        CHECK_MSG(run.out[0][i] == lab_sum(W, i), "W=%d count=%zu: element %zu is %g, the sum is %g", W, count, i,
                  run.out[0][i], lab_sum(W, i));
    for (int r = 1; r < W; r++)
        CHECK_MSG(memcmp(run.out[r], run.out[0], count * sizeof(float)) == 0,
                  "W=%d count=%zu: rank %d's result is not bit-identical to rank 0's", W, count, r);
    lab_done(&run, W);
}

static void test_allreduce_small_worlds(void)
{
    for (int W = 2; W <= 4; W++)
        lab_allreduce_case(W, 64 * (size_t)W);
}

static void test_allreduce_awkward_counts(void)
{
    const size_t counts[] = {1, 5, 7, 1001, 70000}; /* smaller than W, not divisible, past one slot */
    for (int W = 3; W <= 8; W += 5)
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
            lab_allreduce_case(W, counts[k]);
}

static void test_bytes_moved(void)
{
    /* each rank sends W-1 chunks in each phase: 2(W-1)/W of the buffer */
    for (int W = 2; W <= 6; W++) {
        size_t count = 3000 * (size_t)W;
        struct lab_run run = {.kind = LAB_ALLREDUCE, .count = count};
        lab_go(&run, W);
        uint64_t want = 2 * (uint64_t)(W - 1) * count * sizeof(float) / (uint64_t)W;
        for (int r = 0; r < W; r++)
            CHECK_MSG(run.sent[r] == want, "W=%d: rank %d sent %llu bytes; a ring sends 2(W-1)/W x %zu = %llu", W,
                      r, (unsigned long long)run.sent[r], count * sizeof(float), (unsigned long long)want);
        lab_done(&run, W);
    }
}

static void test_reduce_scatter_block_r_to_rank_r(void)
{
    for (int W = 2; W <= 5; W++) {
        struct lab_run run = {.kind = LAB_REDUCE_SCATTER, .count = 33};
        lab_go(&run, W);
        for (int r = 0; r < W; r++)
            for (size_t i = 0; i < run.count; i++)
                CHECK_MSG(run.out[r][i] == lab_sum(W, (size_t)r * run.count + i),
                          "W=%d: rank %d element %zu of its block is %g, want %g (after reduce-scatter rank r "
                          "must own chunk r)",
                          W, r, i, run.out[r][i], lab_sum(W, (size_t)r * run.count + i));
        lab_done(&run, W);
    }
}

static void test_allgather_every_block(void)
{
    for (int W = 2; W <= 5; W++) {
        /* past the few words the simulator copies without the ring: your schedule moves these */
        struct lab_run run = {.kind = LAB_ALLGATHER, .count = SIM_ALLGATHER_DIRECT_BYTES / sizeof(float) + 21};
        lab_go(&run, W);
        for (int r = 0; r < W; r++)
            for (int q = 0; q < W; q++)
                for (size_t i = 0; i < run.count; i++)
                    CHECK_MSG(run.out[r][(size_t)q * run.count + i] == lab_value(q, i),
                              "W=%d: rank %d holds a wrong value in rank %d's block, element %zu", W, r, q, i);
        lab_done(&run, W);
    }
}

static const struct grade_test tests[] = {
    {"allreduce-small-worlds", 20, 20, test_allreduce_small_worlds},
    {"allreduce-awkward-counts", 20, 30, test_allreduce_awkward_counts},
    {"bytes-moved-2(W-1)/W", 20, 30, test_bytes_moved},
    {"reduce-scatter-owner", 20, 20, test_reduce_scatter_block_r_to_rank_r},
    {"allgather", 20, 20, test_allgather_every_block},
};

int main(int argc, char **argv) { return GRADE_MAIN(argc, argv, tests); }
