/* test_comm_sim: the thread communicator (lib/comm/comm.h, backend "sim"):
 * every collective against a reference computed here, for every algorithm,
 * W = 1..8, awkward counts, in place and out of place; every rank
 * bit-identical and every run the same bits; and the diagnoses: the watchdog
 * on each injected fault, fingerprint mismatches, the result check; and a
 * fault spec less one kind (faults_without). */
#include "check.h"
#include "base/clock.h"
#include "base/vclock.h"
#include "comm/costmodel_hw.h"
#include "comm/comm.h"
#include "sim/comm_sim.h"
#include "sim/faults.h"
#include "base/error.h"
#include "base/half.h"
#include "sim/launch.h"
#include "sim/ranks.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rank r's value i: varied magnitudes, so the order of additions shows in the bits. */
static float test_value(int r, size_t i)
{
    uint32_t h = (uint32_t)(r * 2654435761u) ^ (uint32_t)(i * 40503u + 17u);
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    return ((float)(h % 2000001u) - 1000000.0f) / (float)(1u + (h >> 28));
}

/* Opens rank ctx->rank's communicator on `world` (ring, no checks unless given). */
static int test_open(const struct rank_ctx *ctx, comm_world_t *world, enum comm_algo algo, enum comm_check check,
                     double timeout_s, comm_t **out)
{
    struct comm_config cfg;
    comm_config_default(&cfg);
    cfg.rank = ctx->rank;
    cfg.shared = world;
    cfg.algo = algo;
    cfg.check = check;
    cfg.timeout_s = timeout_s;
    return comm_open(&cfg, out);
}

/* Runs fn on W ranks with ctx->shared = a fresh sim world; returns ranks_run's
 * result, and the world's diagnosis in diag when it is not NULL. */
static int world_run_diagnosed(int W, int (*fn)(struct rank_ctx *), char *diag, size_t len)
{
    struct comm_world_options opt = {.world = W};
    comm_world_t *w;
    int rc = comm_world_create("sim", &opt, &w);
    if (rc == 0) {
        rc = ranks_run(W, fn, w, NULL, 0, NULL);
        if (diag)
            snprintf(diag, len, "%s", comm_world_diagnosis(w));
        comm_world_destroy(w);
    }
    return rc;
}

static int world_run(int W, int (*fn)(struct rank_ctx *)) { return world_run_diagnosed(W, fn, NULL, 0); }

struct job {
    comm_world_t *world;
    enum comm_algo algo;
    enum comm_check check;
    enum comm_coll coll;
    enum comm_op op;
    size_t count;
    int in_place;
    int root;
    double timeout_s;
    int collectives;     /* how many times each rank runs the collective */
    float **out;         /* per rank: its result (world x count for allgather) */
    uint64_t *bytes_sent; /* per rank */
    const unsigned *hold_ms; /* per rank, or NULL: a real sleep before its first collective */
};

static int job_rank(struct rank_ctx *ctx)
{
    struct job *j = ctx->shared;
    int r = ctx->rank, W = ctx->world;
    comm_t *c;
    int rc = test_open(ctx, j->world, j->algo, j->check, j->timeout_s, &c);
    if (rc < 0)
        return rc;
    size_t n_in = j->coll == COMM_REDUCE_SCATTER ? j->count * (size_t)W : j->count;
    size_t n_out = j->coll == COMM_ALLGATHER ? j->count * (size_t)W : j->count;
    size_t n_buf = n_in > n_out ? n_in : n_out;
    float *in = calloc(n_buf + 1, sizeof *in), *out = j->out[r];
    if (j->hold_ms && j->hold_ms[r]) /* real time: the order in which the ranks' threads arrive */
        clock_sleep_ns((uint64_t)j->hold_ms[r] * 1000000u);
    for (int k = 0; k < j->collectives && rc == 0; k++) {
        for (size_t i = 0; i < n_in; i++)
            in[i] = test_value(r, i);
        switch (j->coll) {
        case COMM_ALLREDUCE:
            if (j->in_place) {
                rc = comm_allreduce(c, in, in, j->count, COMM_FLOAT32, j->op);
                memcpy(out, in, j->count * sizeof *in);
            } else {
                rc = comm_allreduce(c, in, out, j->count, COMM_FLOAT32, j->op);
            }
            break;
        case COMM_BROADCAST:
            rc = comm_broadcast(c, in, j->count, COMM_FLOAT32, j->root);
            memcpy(out, in, j->count * sizeof *in);
            break;
        case COMM_REDUCE_SCATTER:
            if (j->in_place) {
                rc = comm_reduce_scatter(c, in, in + (size_t)r * j->count, j->count, COMM_FLOAT32, j->op);
                memcpy(out, in + (size_t)r * j->count, j->count * sizeof *in);
            } else {
                rc = comm_reduce_scatter(c, in, out, j->count, COMM_FLOAT32, j->op);
            }
            break;
        case COMM_ALLGATHER:
            if (j->in_place) {
                float *all = calloc(n_out + 1, sizeof *all);
                memcpy(all + (size_t)r * j->count, in, j->count * sizeof *in);
                rc = comm_allgather(c, all + (size_t)r * j->count, all, j->count, COMM_FLOAT32);
                memcpy(out, all, n_out * sizeof *all);
                free(all);
            } else {
                rc = comm_allgather(c, in, out, j->count, COMM_FLOAT32);
            }
            break;
        default:
            rc = comm_barrier(c);
        }
    }
    if (j->bytes_sent)
        j->bytes_sent[r] = comm_sim_bytes_sent(c);
    free(in);
    comm_close(c);
    return rc;
}

/* Runs the job on W ranks; returns ranks_run's result. out[r] must hold the result. */
static int job_run(struct job *j, int W, const char *faults)
{
    struct comm_world_options opt = {.world = W, .faults = faults};
    int rc = comm_world_create("sim", &opt, &j->world);
    if (rc < 0)
        return rc;
    if (j->collectives == 0)
        j->collectives = 1;
    rc = ranks_run(W, job_rank, j, NULL, 0, NULL);
    comm_world_destroy(j->world);
    j->world = NULL;
    return rc;
}

static float **outs_alloc(int W, size_t n)
{
    float **o = calloc((size_t)W, sizeof *o);
    for (int r = 0; r < W; r++)
        o[r] = calloc(n + 1, sizeof **o);
    return o;
}

static void outs_free(float **o, int W)
{
    for (int r = 0; r < W; r++)
        free(o[r]);
    free(o);
}

/* Sum over ranks of value i, in double: the reference the float results must approach. */
static double ref_sum(int W, size_t i, double *abs_sum)
{
    double s = 0, a = 0;
    for (int r = 0; r < W; r++) {
        s += test_value(r, i);
        a += fabs(test_value(r, i));
    }
    *abs_sum = a;
    return s;
}

/* W-1 float roundings of partial sums bound the error by (W-1) eps sum|x| */
static void check_close(float got, double want, double abs_sum, int W, const char *what, size_t i)
{
    double tol = (W + 1) * 1.2e-7 * abs_sum + 1e-30;
    CHECK_MSG(fabs(got - want) <= tol, "%s: element %zu: got %.9g, want %.9g (tolerance %.3g)", what, i, got, want,
              tol);
}

static const enum comm_algo algos[] = {COMM_ALGO_RING, COMM_ALGO_TREE, COMM_ALGO_NAIVE};

TEST(allreduce_matches_reference_every_algo_world_count)
{
    /* 0 and 1, smaller than W, not divisible by W, and past one channel slot (65536 floats) */
    const size_t counts[] = {0, 1, 3, 7, 1000, 65536 * 2 + 5};
    for (int a = 0; a < 3; a++)
        for (int W = 1; W <= 8; W++)
            for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
                for (int in_place = 0; in_place < 2; in_place++) {
                    size_t n = counts[ci];
                    if (n > 100000 && (W % 3 != 0 || a == 2)) /* the big count on a few worlds only: 2 cores */
                        continue;
                    struct job j = {.algo = algos[a], .coll = COMM_ALLREDUCE, .count = n, .in_place = in_place,
                                    .out = outs_alloc(W, n)};
                    CHECK_OK(job_run(&j, W, NULL));
                    char what[96];
                    snprintf(what, sizeof what, "%s W=%d count=%zu %s", comm_algo_name(algos[a]), W, n,
                             in_place ? "in-place" : "out-of-place");
                    for (size_t i = 0; i < n; i++) {
                        double abs_sum, want = ref_sum(W, i, &abs_sum);
                        check_close(j.out[0][i], want, abs_sum, W, what, i);
                    }
                    for (int r = 1; r < W; r++)
                        CHECK_MSG(memcmp(j.out[r], j.out[0], n * sizeof(float)) == 0,
                                  "%s: rank %d differs from rank 0", what, r);
                    outs_free(j.out, W);
                }
}

/* Whatever the thread timing: runs after the first hold back one rank or
 * two, so the others' pieces arrive in another order. Real sleeps in the
 * test itself: the delay fault costs modelled time only, and the threads
 * would run as they like. */
TEST(allreduce_is_the_same_bits_every_run)
{
    static const unsigned timings[4][5] = {{0}, {40, 0, 0, 0, 0}, {0, 0, 15, 0, 40}, {0, 0, 0, 25, 0}};
    for (int a = 0; a < 3; a++) {
        size_t n = 65536 + 333;
        int W = 5;
        float *first = NULL;
        for (int run = 0; run < 4; run++) {
            struct job j = {.algo = algos[a], .coll = COMM_ALLREDUCE, .count = n, .out = outs_alloc(W, n),
                            .hold_ms = timings[run]};
            CHECK_OK(job_run(&j, W, NULL));
            if (!first) {
                first = j.out[0];
                j.out[0] = NULL;
            } else {
                CHECK_MSG(memcmp(first, j.out[2], n * sizeof(float)) == 0, "%s: run %d differs from run 0",
                          comm_algo_name(algos[a]), run);
            }
            outs_free(j.out, W);
        }
        free(first);
    }
}

TEST(avg_is_the_sum_divided_by_world)
{
    int W = 3;
    size_t n = 100;
    struct job s = {.coll = COMM_ALLREDUCE, .op = COMM_SUM, .count = n, .out = outs_alloc(W, n)};
    struct job v = {.coll = COMM_ALLREDUCE, .op = COMM_AVG, .count = n, .out = outs_alloc(W, n)};
    CHECK_OK(job_run(&s, W, NULL));
    CHECK_OK(job_run(&v, W, NULL));
    for (size_t i = 0; i < n; i++)
        CHECK(v.out[1][i] == s.out[1][i] / 3.0f);
    outs_free(s.out, W);
    outs_free(v.out, W);
}

TEST(ring_moves_2_w_minus_1_over_w_of_the_buffer)
{
    int W = 4;
    size_t n = 4 * 70000;
    uint64_t sent[4];
    struct job j = {.coll = COMM_ALLREDUCE, .count = n, .out = outs_alloc(W, n), .bytes_sent = sent};
    CHECK_OK(job_run(&j, W, NULL));
    for (int r = 0; r < W; r++)
        CHECK_EQ_U64(sent[r], 2 * (uint64_t)(W - 1) * n * 4 / (uint64_t)W);
    outs_free(j.out, W);
}

TEST(broadcast_reduce_scatter_allgather_barrier)
{
    for (int W = 1; W <= 6; W++)
        for (int in_place = 0; in_place < 2; in_place++) {
            size_t n = W == 5 ? 70001 : 13;
            struct job b = {.coll = COMM_BROADCAST, .count = n, .root = W / 2, .out = outs_alloc(W, n)};
            CHECK_OK(job_run(&b, W, NULL));
            for (int r = 0; r < W; r++)
                for (size_t i = 0; i < n; i++)
                    CHECK(b.out[r][i] == test_value(W / 2, i));
            outs_free(b.out, W);

            struct job rs = {.coll = COMM_REDUCE_SCATTER, .count = n, .in_place = in_place, .out = outs_alloc(W, n)};
            CHECK_OK(job_run(&rs, W, NULL));
            for (int r = 0; r < W; r++)
                for (size_t i = 0; i < n; i++) {
                    double abs_sum, want = ref_sum(W, (size_t)r * n + i, &abs_sum);
                    check_close(rs.out[r][i], want, abs_sum, W, "reduce_scatter", i);
                }
            outs_free(rs.out, W);

            struct job ag = {.coll = COMM_ALLGATHER, .count = n, .in_place = in_place, .out = outs_alloc(W, n * W)};
            CHECK_OK(job_run(&ag, W, NULL));
            for (int r = 0; r < W; r++)
                for (int q = 0; q < W; q++)
                    for (size_t i = 0; i < n; i++)
                        CHECK(ag.out[r][(size_t)q * n + i] == test_value(q, i));
            outs_free(ag.out, W);

            struct job bar = {.coll = COMM_BARRIER, .collectives = 5, .out = outs_alloc(W, 0)};
            CHECK_OK(job_run(&bar, W, NULL));
            outs_free(bar.out, W);
        }
}

/* An all-gather of a few words is copied at the rendezvous, not by the
 * ring (SIM_ALLGATHER_DIRECT_BYTES): every block in every rank's result,
 * in place or not, run after run, and the bytes counted as the ring sends
 * them, at every world size and on both sides of the threshold. */
TEST(small_allgather_every_world_and_its_bytes)
{
    for (int W = 1; W <= 8; W++) {
        size_t edge = SIM_ALLGATHER_DIRECT_BYTES / sizeof(float) / (size_t)W;
        const size_t counts[] = {1, 3, edge, edge + 1};
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
            for (int in_place = 0; in_place < 2; in_place++) {
                size_t n = counts[ci];
                uint64_t sent[8];
                struct job j = {.coll = COMM_ALLGATHER, .count = n, .in_place = in_place, .collectives = 3,
                                .check = COMM_CHECK_RESULTS, .out = outs_alloc(W, n * (size_t)W), .bytes_sent = sent};
                CHECK_OK(job_run(&j, W, NULL));
                for (int r = 0; r < W; r++) {
                    CHECK_EQ_U64(sent[r], 3 * (uint64_t)(W - 1) * n * sizeof(float));
                    for (int q = 0; q < W; q++)
                        for (size_t i = 0; i < n; i++)
                            CHECK_MSG(j.out[r][(size_t)q * n + i] == test_value(q, i),
                                      "W=%d count=%zu %s: rank %d holds a wrong value in rank %d's block, element %zu",
                                      W, n, in_place ? "in-place" : "out-of-place", r, q, i);
                }
                outs_free(j.out, W);
            }
    }
}

/* The faults act on a small all-gather as on the ring's: a flipped result is
 * caught by the result check, a killed rank by the watchdog. */
TEST(small_allgather_faults)
{
    int W = 4;
    char msg[2048];
    struct comm_world_options opt = {.world = W, .faults = "flip:2@2"};
    struct job j = {.coll = COMM_ALLGATHER, .count = 5, .collectives = 3, .timeout_s = 1,
                    .check = COMM_CHECK_RESULTS, .out = outs_alloc(W, 5 * (size_t)W)};
    CHECK_OK(comm_world_create("sim", &opt, &j.world));
    CHECK(ranks_run(W, job_rank, &j, NULL, 0, NULL) < 0);
    snprintf(msg, sizeof msg, "%s", comm_world_diagnosis(j.world));
    comm_world_destroy(j.world);
    CHECK_CONTAINS(msg, "after collective #2 (allgather, 5 x float32 per rank), rank 2's result differs from the "
                        "other 3 ranks', which agree");
    CHECK_CONTAINS(msg, "element 10: rank 2 has");
    opt.faults = "kill:1@3";
    CHECK_OK(comm_world_create("sim", &opt, &j.world));
    CHECK(ranks_run(W, job_rank, &j, NULL, 0, NULL) < 0);
    snprintf(msg, sizeof msg, "%s", comm_world_diagnosis(j.world));
    comm_world_destroy(j.world);
    CHECK_CONTAINS(msg, "arrived: ranks 0, 2, 3");
    CHECK_CONTAINS(msg, "rank 1: killed by --fault=kill:1@3 before collective #3");
    outs_free(j.out, W);
}

/* ---- faults and diagnoses ------------------------------------------------------ */

/* Runs W ranks x 3 all-reduces with `faults`; returns the world's diagnosis
 * (or the first rank's error when there is none) in `msg`. */
static int fault_run_world(int W, const char *faults, enum comm_check check, char *msg, size_t len)
{
    struct comm_world_options opt = {.world = W, .faults = faults};
    struct job j = {.coll = COMM_ALLREDUCE, .count = 1000, .collectives = 3, .timeout_s = 1, .check = check,
                    .out = outs_alloc(W, 1000)};
    CHECK_OK(comm_world_create("sim", &opt, &j.world));
    int rc = ranks_run(W, job_rank, &j, NULL, 0, NULL);
    snprintf(msg, len, "%s", *comm_world_diagnosis(j.world) ? comm_world_diagnosis(j.world) : err_msg());
    comm_world_destroy(j.world);
    outs_free(j.out, W);
    return rc;
}

static int fault_run(const char *faults, enum comm_check check, char *msg, size_t len)
{
    return fault_run_world(4, faults, check, msg, len);
}

TEST(watchdog_names_a_killed_rank)
{
    char msg[2048];
    CHECK(fault_run("kill:2@2", COMM_CHECK_NONE, msg, sizeof msg) < 0);
    CHECK_CONTAINS(msg, "collective #2 (allreduce sum, 1000 x float32) timed out");
    CHECK_CONTAINS(msg, "arrived: ranks 0, 1, 3");
    CHECK_CONTAINS(msg, "rank 2: killed by --fault=kill:2@2 before collective #2; last completed collective #1");
}

TEST(watchdog_names_a_straggler)
{
    char msg[2048];
    /* ten minutes' delay, a 1 s watchdog: the test ends long before the
     * harness's own limit only if the watchdog also wakes the sleeper */
    CHECK(fault_run("delay:1@3:600000", COMM_CHECK_NONE, msg, sizeof msg) < 0);
    CHECK_CONTAINS(msg, "collective #3 (allreduce sum, 1000 x float32) timed out");
    CHECK_CONTAINS(msg, "arrived: ranks 0, 2, 3");
    CHECK_CONTAINS(msg, "rank 1: sleeping in an injected delay of 600000 ms");
    CHECK_CONTAINS(msg, "last completed collective #2");
}

/* The longest delay the grammar takes (FAULT_MAX_DELAY_MS) lasts: its
 * nanoseconds fit 64 bits, and now + that saturates to "forever" (the
 * watchdog then wakes the sleeper) instead of wrapping to a deadline in the
 * past that lets the run pass as if no fault fired. One millisecond more
 * (18446744073710 ms x 10^6 is 2^64 + 448384 ns, a short nap once wrapped) is
 * refused, not cut short. */
TEST(watchdog_names_a_straggler_at_the_longest_delay)
{
    char msg[2048];
    CHECK_MSG(fault_run("delay:1@2:18446744073709", COMM_CHECK_NONE, msg, sizeof msg) < 0, "the run passed");
    CHECK_CONTAINS(msg, "collective #2 (allreduce sum, 1000 x float32) timed out");
    CHECK_CONTAINS(msg, "rank 1: sleeping in an injected delay of 18446744073709 ms");
    struct comm_world_options opt = {.world = 4, .faults = "delay:1@2:18446744073710"};
    comm_world_t *w;
    CHECK_ERR(comm_world_create("sim", &opt, &w), ERR_ARG,
              "--fault=delay:R@K:MS: MS must be 0 to 18446744073709 milliseconds, got '18446744073710'");
}

/* The watchdog is modelled: rank 1's thread arrives first in real time (the
 * others really sleep 50 ms before their first collective), but its
 * injected delay makes it 3 s late in modelled time, so the others' 1 s
 * deadline passes: the earliest deadline's rank (rank 0, the lowest of
 * equals) fires, at once, every run the same report. */
TEST(watchdog_fires_on_modelled_lateness_not_wall_time)
{
    static const unsigned hold[4] = {50, 0, 50, 50};
    for (int run = 0; run < 3; run++) {
        struct comm_world_options opt = {.world = 4, .faults = "delay:1@1:3000"};
        struct job j = {.coll = COMM_ALLREDUCE, .count = 100, .collectives = 2, .timeout_s = 1,
                        .out = outs_alloc(4, 100), .hold_ms = hold};
        CHECK_OK(comm_world_create("sim", &opt, &j.world));
        double t0 = clock_now_s();
        CHECK(ranks_run(4, job_rank, &j, NULL, 0, NULL) < 0);
        double took = clock_now_s() - t0;
        CHECK_STR(comm_world_diagnosis(j.world),
                  "watchdog: collective #1 (allreduce sum, 100 x float32) timed out after 1 s on rank 0, waiting "
                  "for every rank to reach its start\n  arrived: ranks 0, 2, 3\n  missing:\n  rank 1: sleeping in "
                  "an injected delay of 3000 ms before collective #1 (delay:1@1:3000); has completed no collective");
        CHECK_MSG(took < 0.9, "took %.2f s of wall time: the watchdog waited for the wall clock", took);
        comm_world_destroy(j.world);
        outs_free(j.out, 4);
    }
}

/* The deadline is exact: a rank late by less than the timeout (modelled) is
 * waited for, one late by more is not. */
TEST(a_modelled_delay_under_the_timeout_is_waited_for)
{
    char msg[2048];
    CHECK_OK(fault_run("delay:1@2:999", COMM_CHECK_NONE, msg, sizeof msg));
    CHECK(fault_run("delay:1@2:1001", COMM_CHECK_NONE, msg, sizeof msg) < 0);
    CHECK_CONTAINS(msg, "collective #2 (allreduce sum, 1000 x float32) timed out after 1 s on rank 0");
}

/* A rank late in modelled time is told as it was at the deadline: the
 * activity it had said then, though it cleared it before it came. */
static int late_saver_rank(struct rank_ctx *ctx)
{
    comm_t *c;
    int rc = test_open(ctx, ctx->shared, COMM_ALGO_RING, COMM_CHECK_NONE, 1, &c);
    if (rc < 0)
        return rc;
    float x = 1;
    rc = comm_allreduce(c, &x, &x, 1, COMM_FLOAT32, COMM_SUM);
    if (ctx->rank == 2) {
        comm_set_activity(c, "warming up");
        vclock_advance_ns(200000000u);
        comm_set_activity(c, "saving a checkpoint");
        vclock_advance_ns(5000000000u); /* 5 s of modelled work, no real time */
        comm_set_activity(c, "cooling down");
        vclock_advance_ns(1000000u);
        comm_set_activity(c, NULL);
    }
    if (rc == 0)
        rc = comm_allreduce(c, &x, &x, 1, COMM_FLOAT32, COMM_SUM);
    comm_close(c);
    return rc;
}

TEST(watchdog_tells_what_a_late_rank_did_at_the_deadline)
{
    char diag[2048];
    CHECK(world_run_diagnosed(3, late_saver_rank, diag, sizeof diag) < 0);
    CHECK_CONTAINS(diag, "collective #2 (allreduce sum, 1 x float32) timed out after 1 s on rank 0");
    CHECK_CONTAINS(diag, "arrived: ranks 0, 1\n");
    CHECK_CONTAINS(diag, "rank 2: running its own code (saving a checkpoint), in no collective; last completed "
                         "collective #1");
}

/* The wall-clock safety net: a rank whose thread really never comes (here
 * it sleeps, in real time, past the net, shortened to 0.3 s) is neither
 * late in modelled time nor gone, so only the wall clock can end the
 * others' wait; it does, naming it as it is. */
static int hung_rank(struct rank_ctx *ctx)
{
    comm_t *c;
    int rc = test_open(ctx, ctx->shared, COMM_ALGO_RING, COMM_CHECK_NONE, 1, &c);
    if (rc < 0)
        return rc;
    float x = 1;
    if (ctx->rank == 2) {
        comm_set_activity(c, "stuck");
        clock_sleep_ns(1500000000u);
    } else {
        rc = comm_allreduce(c, &x, &x, 1, COMM_FLOAT32, COMM_SUM);
    }
    comm_close(c);
    return rc;
}

TEST(a_real_hang_ends_at_the_wall_clock_safety_net)
{
    struct comm_world_options opt = {.world = 3, .hang_s = 0.3};
    comm_world_t *w;
    CHECK_OK(comm_world_create("sim", &opt, &w));
    CHECK(ranks_run(3, hung_rank, w, NULL, 0, NULL) < 0);
    const char *diag = comm_world_diagnosis(w);
    CHECK_CONTAINS(diag, "collective #1 (allreduce sum, 1 x float32): no progress for 0.3 s of wall-clock time on rank");
    CHECK_CONTAINS(diag, "the wall-clock safety net for real hangs");
    CHECK_CONTAINS(diag, "rank 2: running its own code (stuck), in no collective; has completed no collective");
    comm_world_destroy(w);
}

TEST(watchdog_names_the_rank_that_skipped_a_collective)
{
    char msg[2048];
    CHECK(fault_run("skip:3@2", COMM_CHECK_NONE, msg, sizeof msg) < 0);
    /* rank 3 issued only two collectives, so it was done when the others reached #3 */
    CHECK_CONTAINS(msg, "collective #3 (allreduce sum, 1000 x float32) timed out");
    CHECK_CONTAINS(msg, "arrived: ranks 0, 1, 2");
    CHECK_CONTAINS(msg, "rank 3: exited (closed its communicator); last completed collective #2");
}

TEST(result_check_catches_a_flipped_value)
{
    char msg[2048];
    CHECK(fault_run("flip:1@2", COMM_CHECK_RESULTS, msg, sizeof msg) < 0);
    CHECK_CONTAINS(msg, "after collective #2 (allreduce sum, 1000 x float32), rank 1's result differs from the other "
                        "3 ranks', which agree");
    CHECK_CONTAINS(msg, "element 500: rank 1 has");
    /* without the check the flip goes unnoticed: the silent divergence the check exists for */
    CHECK_OK(fault_run("flip:1@2", COMM_CHECK_NONE, msg, sizeof msg));
}

/* The majority decides who differs, not rank 0: a flip on rank 0, with seven
 * ranks agreeing, is rank 0's. With two ranks nobody can be blamed, and the
 * message says so; a 2-2 split neither. */
TEST(result_check_blames_by_majority_or_says_it_cannot)
{
    char msg[2048];
    CHECK(fault_run_world(8, "flip:0@2", COMM_CHECK_RESULTS, msg, sizeof msg) < 0);
    CHECK_CONTAINS(msg, "rank 0's result differs from the other 7 ranks', which agree");
    CHECK_CONTAINS(msg, "element 500: rank 0 has");
    CHECK_CONTAINS(msg, ", rank 1 has");
    CHECK(fault_run_world(5, "flip:4@1,flip:2@1", COMM_CHECK_RESULTS, msg, sizeof msg) < 0);
    CHECK_CONTAINS(msg, "ranks 2 and 4 hold results that differ from the one the other 3 ranks agree on");
    CHECK(fault_run_world(2, "flip:0@3", COMM_CHECK_RESULTS, msg, sizeof msg) < 0);
    CHECK_CONTAINS(msg, "rank 1's result differs from rank 0's");
    CHECK_CONTAINS(msg, "with two ranks there is no majority to tell which one is wrong");
    CHECK(fault_run_world(4, "flip:0@2,flip:3@2", COMM_CHECK_RESULTS, msg, sizeof msg) < 0);
    CHECK_CONTAINS(msg, "no result is shared by a majority of the 4 ranks, so none can be called the wrong one");
}

static int mismatch_odd_rank; /* the rank that calls something else */

static int mismatch_rank(struct rank_ctx *ctx)
{
    comm_t *c;
    int rc = test_open(ctx, ctx->shared, COMM_ALGO_DEFAULT, COMM_CHECK_NONE, 1, &c);
    if (rc < 0)
        return rc;
    float buf[64] = {0};
    rc = comm_allreduce(c, buf, buf, 16, COMM_FLOAT32, COMM_SUM);
    if (rc == 0) /* one rank broadcasts where the others all-reduce, with another count */
        rc = ctx->rank == mismatch_odd_rank ? comm_broadcast(c, buf, 32, COMM_FLOAT32, 0)
                                            : comm_allreduce(c, buf, buf, 16, COMM_FLOAT32, COMM_SUM);
    int again = comm_allreduce(c, buf, buf, 16, COMM_FLOAT32, COMM_SUM);
    if (rc < 0 && again != ERR_STATE)
        rc = err_set(ERR_IO, "a broken communicator accepted another collective");
    comm_close(c);
    return rc;
}

TEST(fingerprint_mismatch_names_the_odd_rank_and_fields)
{
    mismatch_odd_rank = 2;
    CHECK_ERR(world_run(4, mismatch_rank), ERR_STATE,
              "fingerprint mismatch before collective #2: rank 2 called #2 broadcast 32 x float32 root 0, the other 3 "
              "ranks called #2 allreduce sum 16 x float32 (differs: collective, count, root)");
    mismatch_odd_rank = 0; /* the majority decides, not rank 0 */
    CHECK_ERR(world_run(4, mismatch_rank), ERR_STATE, "rank 0 called #2 broadcast 32 x float32 root 0, the other 3");
    mismatch_odd_rank = 1;
    CHECK_ERR(world_run(2, mismatch_rank), ERR_STATE,
              "rank 0 called #2 allreduce sum 16 x float32, rank 1 called #2 broadcast 32 x float32 root 0 (differs: "
              "collective, count, root); with two ranks there is no majority to tell which one is wrong");
}

TEST(bad_arguments_and_configs)
{
    comm_world_t *w;
    struct comm_world_options opt = {.world = 2, .faults = "kill:5@1"};
    CHECK_ERR(comm_world_create("sim", &opt, &w), ERR_ARG, "rank R must be 0 to 1 (the world has 2 ranks), got '5'");
    opt.faults = "explode:1@1";
    CHECK_ERR(comm_world_create("sim", &opt, &w), ERR_ARG, "unknown kind 'explode'");
    opt.faults = "delay:1@1";
    CHECK_ERR(comm_world_create("sim", &opt, &w), ERR_ARG, "'delay:1@1' has no :MS");
    opt.faults = NULL;
    CHECK_ERR(comm_world_create("carrier-pigeon", &opt, &w), ERR_ARG, "unknown backend 'carrier-pigeon'");
    CHECK_OK(comm_world_create("sim", &opt, &w));
    struct comm_config cfg;
    comm_config_default(&cfg);
    cfg.shared = w;
    cfg.rank = 2;
    comm_t *c;
    CHECK_ERR(comm_open(&cfg, &c), ERR_ARG, "rank 2 is not in a world of 2");
    cfg.shared = NULL;
    CHECK_ERR(comm_open(&cfg, &c), ERR_ARG, "needs the shared world");
    /* a timeout past the cap would overflow the nanosecond deadline and time
     * out at once; one below the floor would blame ranks that are only being
     * scheduled (1e-300 s used to round to a deadline of "now"); the sim has
     * no wait without a watchdog */
    cfg.shared = w;
    cfg.rank = 1;
    cfg.timeout_s = 1e300;
    CHECK_ERR(comm_open(&cfg, &c), ERR_ARG, "timeout must be 0.01 .. 1e+06 s");
    cfg.timeout_s = 1e-300;
    CHECK_ERR(comm_open(&cfg, &c), ERR_ARG, "a shorter watchdog fires on ranks that are only waiting for a core");
    cfg.timeout_s = 0.009;
    CHECK_ERR(comm_open(&cfg, &c), ERR_ARG, "got 0.009 s");
    cfg.timeout_s = NAN;
    CHECK_ERR(comm_open(&cfg, &c), ERR_ARG, "timeout must be");
    cfg.timeout_s = -2;
    CHECK_ERR(comm_open(&cfg, &c), ERR_ARG, "timeout must be");
    cfg.timeout_s = COMM_NO_TIMEOUT;
    CHECK_ERR(comm_open(&cfg, &c), ERR_UNSUPPORTED, "backend sim always has a watchdog");
    comm_world_destroy(w);
    opt.faults = ""; /* strtok would skip the empty parts: every one is an error */
    CHECK_ERR(comm_world_create("sim", &opt, &w), ERR_ARG, "--fault: empty");
    opt.faults = "kill:1@2,,";
    CHECK_ERR(comm_world_create("sim", &opt, &w), ERR_ARG, "'kill:1@2,,': part 2 is empty");
    opt.faults = ",kill:1@2";
    CHECK_ERR(comm_world_create("sim", &opt, &w), ERR_ARG, "part 1 is empty");
    opt.faults = "kill:1@2,";
    CHECK_ERR(comm_world_create("sim", &opt, &w), ERR_ARG, "part 2 is empty");
}

/* A spec less one kind of fault, for a program that injects that kind itself. */
TEST(faults_without_a_kind)
{
    char *rest;
    CHECK_OK(faults_without("flip:0@5,kill:1@2,flip:2@1,delay:1@3:40", 3, FAULT_FLIP, &rest));
    CHECK_STR(rest, "kill:1@2,delay:1@3:40");
    free(rest);
    CHECK_OK(faults_without("flip:0@5,flip:2@1", 3, FAULT_FLIP, &rest));
    CHECK(rest == NULL);
    CHECK_ERR(faults_without("flip:3@5", 3, FAULT_FLIP, &rest), ERR_ARG,
              "--fault=flip:R@K: rank R must be 0 to 2 (the world has 3 ranks), got '3' in 'flip:3@5'");
    CHECK(rest == NULL);
}

/* Three all-reduces in flight at once (DDP's buckets), other types, and the sequence numbers. */
static int async_rank(struct rank_ctx *ctx)
{
    comm_t *c;
    int rc = test_open(ctx, ctx->shared, COMM_ALGO_DEFAULT, COMM_CHECK_NONE, 0, &c);
    if (rc < 0)
        return rc;
    double d[5];
    int32_t i32[7];
    int64_t i64[3];
    for (int k = 0; k < 5; k++)
        d[k] = 0.5 * (ctx->rank + k);
    for (int k = 0; k < 7; k++)
        i32[k] = ctx->rank * 1000 - k;
    for (int k = 0; k < 3; k++)
        i64[k] = ((int64_t)1 << 40) * (ctx->rank + 1);
    comm_request_t *req[3];
    if (comm_next_seq(c) != 1)
        rc = err_set(ERR_STATE, "the first collective is not #1");
    if (rc == 0)
        rc = comm_allreduce_start(c, d, d, 5, COMM_FLOAT64, COMM_AVG, &req[0]);
    if (rc == 0)
        rc = comm_allreduce_start(c, i32, i32, 7, COMM_INT32, COMM_SUM, &req[1]);
    if (rc == 0)
        rc = comm_allreduce_start(c, i64, i64, 3, COMM_INT64, COMM_SUM, &req[2]);
    for (int k = 0; rc == 0 && k < 3; k++)
        rc = comm_wait(req[k]);
    if (rc == 0 && comm_next_seq(c) != 4)
        rc = err_set(ERR_STATE, "after three collectives the next is #%llu", (unsigned long long)comm_next_seq(c));
    int W = ctx->world;
    for (int k = 0; rc == 0 && k < 5; k++)
        if (d[k] != 0.5 * ((W - 1) / 2.0 + k))
            rc = err_set(ERR_STATE, "float64 avg element %d is %g", k, d[k]);
    for (int k = 0; rc == 0 && k < 7; k++)
        if (i32[k] != 1000 * W * (W - 1) / 2 - W * k)
            rc = err_set(ERR_STATE, "int32 sum element %d is %d", k, i32[k]);
    for (int k = 0; rc == 0 && k < 3; k++)
        if (i64[k] != ((int64_t)1 << 40) * W * (W + 1) / 2)
            rc = err_set(ERR_STATE, "int64 sum element %d is %lld", k, (long long)i64[k]);
    if (rc == 0)
        rc = comm_allreduce_start(c, i32, i32, 7, COMM_INT32, COMM_AVG, &req[0]) == ERR_ARG
                 ? 0
                 : err_set(ERR_STATE, "avg of int32 was accepted");
    comm_close(c);
    return rc;
}

TEST(async_requests_other_types_and_sequence_numbers)
{
    for (int W = 1; W <= 4; W++)
        CHECK_OK(world_run(W, async_rank));
}

/* float16 and bfloat16: sums of small integers are exact in any order, so
 * every algorithm must give them exactly; avg is that sum divided by W and
 * rounded once; broadcast and all-gather move the bits untouched. */
struct half_job {
    comm_world_t *world;
    enum comm_algo algo;
    enum comm_dtype dtype;
};

static uint16_t half_of(enum comm_dtype t, float f)
{
    return t == COMM_FLOAT16 ? half_from_float(f) : half_bf16_from_float(f);
}

static int half_rank(struct rank_ctx *ctx)
{
    struct half_job *j = ctx->shared;
    int r = ctx->rank, W = ctx->world;
    comm_t *c;
    int rc = test_open(ctx, j->world, j->algo, COMM_CHECK_RESULTS, 0, &c);
    if (rc < 0)
        return rc;
    enum { N = 70001 }; /* past one 256 KiB channel slot, not divisible by W */
    uint16_t *sum = malloc(N * 2), *avg = malloc(N * 2), *all = malloc(N * 2 * (size_t)W);
    for (size_t i = 0; i < N; i++)
        sum[i] = avg[i] = half_of(j->dtype, (float)((int)((i * 7 + (size_t)r * 3) % 15) - 7));
    rc = comm_allreduce(c, sum, sum, N, j->dtype, COMM_SUM);
    if (rc == 0)
        rc = comm_allreduce(c, avg, avg, N, j->dtype, COMM_AVG);
    for (size_t i = 0; rc == 0 && i < N; i++) {
        int exact = 0;
        for (int q = 0; q < W; q++)
            exact += (int)((i * 7 + (size_t)q * 3) % 15) - 7;
        if (sum[i] != half_of(j->dtype, (float)exact))
            rc = err_set(ERR_STATE, "%s %s W=%d: sum element %zu is 0x%04x, want %d", comm_dtype_name(j->dtype),
                         comm_algo_name(j->algo), W, i, sum[i], exact);
        else if (avg[i] != half_of(j->dtype, (float)exact / (float)W))
            rc = err_set(ERR_STATE, "%s %s W=%d: avg element %zu is 0x%04x, want %d/%d rounded",
                         comm_dtype_name(j->dtype), comm_algo_name(j->algo), W, i, avg[i], exact, W);
    }
    uint16_t mine[5] = {(uint16_t)(0x3c00u + r), 0x7c00u, 0x8001u, 0x7bffu, (uint16_t)r};
    if (rc == 0)
        rc = comm_allgather(c, mine, all, 5, j->dtype);
    for (int q = 0; rc == 0 && q < W; q++)
        if (all[q * 5] != 0x3c00u + q || all[q * 5 + 1] != 0x7c00u || all[q * 5 + 4] != q)
            rc = err_set(ERR_STATE, "allgather %s: rank %d's block is wrong", comm_dtype_name(j->dtype), q);
    if (rc == 0)
        rc = comm_broadcast(c, mine, 5, j->dtype, W - 1);
    if (rc == 0 && mine[0] != 0x3c00u + W - 1)
        rc = err_set(ERR_STATE, "broadcast %s: got 0x%04x", comm_dtype_name(j->dtype), mine[0]);
    free(sum);
    free(avg);
    free(all);
    comm_close(c);
    return rc;
}

TEST(half_precision_types_sum_avg_move)
{
    const enum comm_dtype types[] = {COMM_FLOAT16, COMM_BFLOAT16};
    for (size_t t = 0; t < 2; t++)
        for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++)
            for (int W = 1; W <= 5; W += 2) {
                struct comm_world_options opt = {.world = W};
                struct half_job j = {.algo = algos[a], .dtype = types[t]};
                CHECK_OK(comm_world_create("sim", &opt, &j.world));
                int rc = ranks_run(W, half_rank, &j, NULL, 0, NULL);
                CHECK_MSG(rc == 0, "%s", err_msg());
                comm_world_destroy(j.world);
            }
    enum comm_dtype t;
    CHECK_OK(comm_dtype_parse("half", &t));
    CHECK_EQ(t, COMM_FLOAT16);
    CHECK_OK(comm_dtype_parse("bfloat16", &t));
    CHECK_EQ(t, COMM_BFLOAT16);
    CHECK_EQ(comm_dtype_size(COMM_BFLOAT16), 2);
}

TEST(backends_not_built_say_so)
{
    comm_world_t *w;
    struct comm_world_options opt = {.world = 2};
    /* MPI has no thread mode; when it is not built, it says that instead */
    CHECK_EQ(comm_world_create("mpi", &opt, &w), ERR_UNSUPPORTED);
#ifndef HAVE_MPI
    CHECK_CONTAINS(err_msg(), "this build has no MPI support");
#endif
#ifndef HAVE_NCCL
    CHECK_ERR(comm_world_create("nccl", &opt, &w), ERR_UNSUPPORTED, "this build has no NCCL support");
#endif
}

/* Rank 0 starts an all-reduce and only then lets rank 1 start its own: if
 * start() waited for the collective, the two would wait for each other
 * until the watchdog fired. DDP relies on this to overlap buckets with backward. */
static atomic_int overlap_started;

static int overlap_rank(struct rank_ctx *ctx)
{
    comm_t *c;
    int rc = test_open(ctx, ctx->shared, COMM_ALGO_DEFAULT, COMM_CHECK_NONE, 2, &c);
    if (rc < 0)
        return rc;
    float x[100];
    for (int i = 0; i < 100; i++)
        x[i] = (float)ctx->rank;
    if (ctx->rank == 0) {
        comm_request_t *req;
        rc = comm_allreduce_start(c, x, x, 100, COMM_FLOAT32, COMM_SUM, &req);
        atomic_store(&overlap_started, 1);
        if (rc == 0)
            rc = comm_wait(req);
    } else {
        for (int spins = 0; !atomic_load(&overlap_started) && spins < 3000; spins++)
            clock_sleep_ns(1000000);
        if (!atomic_load(&overlap_started))
            rc = err_set(ERR_TIMEOUT, "rank 0's comm_allreduce_start never returned before the collective ran");
        if (rc == 0)
            rc = comm_allreduce(c, x, x, 100, COMM_FLOAT32, COMM_SUM);
    }
    if (rc == 0 && x[7] != 1.0f)
        rc = err_set(ERR_STATE, "sum is %g, want 1", x[7]);
    comm_close(c);
    return rc;
}

TEST(start_returns_before_the_collective_completes)
{
    atomic_store(&overlap_started, 0);
    CHECK_OK(world_run(2, overlap_rank));
}

/* Who moves a started collective's bytes, and when. On the modelled clock,
 * the rank's own thread when it waits: both ranks have started, and 50 ms
 * later the buffers are still their own (nothing else touches them). On the
 * wall clock (a real GPU beside the thread communicator), a progress thread
 * as soon as it is queued: rank 1's blocking all-reduce completes while rank
 * 0, having only started its own, waits for rank 1 to say so. */
static atomic_int queue_rank1_done;

/* Opens the rank's communicator and fills x[0..64) with rank + 1. */
static int queue_open(struct rank_ctx *ctx, double timeout_s, float *x, comm_t **c)
{
    for (int i = 0; i < 64; i++)
        x[i] = (float)(ctx->rank + 1);
    return test_open(ctx, ctx->shared, COMM_ALGO_DEFAULT, COMM_CHECK_NONE, timeout_s, c);
}

static int queue_modelled_rank(struct rank_ctx *ctx)
{
    comm_t *c;
    float x[64];
    int rc = queue_open(ctx, 10, x, &c);
    if (rc < 0)
        return rc;
    comm_request_t *req;
    if ((rc = comm_allreduce_start(c, x, x, 64, COMM_FLOAT32, COMM_SUM, &req)) == 0) {
        clock_sleep_ns(50000000);
        float before = x[63];
        rc = comm_wait(req);
        if (rc == 0 && before != (float)(ctx->rank + 1))
            rc = err_set(ERR_STATE, "rank %d: the buffer held %g before comm_wait: another thread moved the "
                         "bytes", ctx->rank, before);
        if (rc == 0 && x[0] != 3.0f)
            rc = err_set(ERR_STATE, "rank %d: the sum is %g, want 3", ctx->rank, x[0]);
    }
    comm_close(c);
    return rc;
}

TEST(a_started_collective_runs_at_its_wait_on_the_modelled_clock)
{
    CHECK_OK(world_run(2, queue_modelled_rank));
}

static int queue_wall_rank(struct rank_ctx *ctx)
{
    comm_t *c;
    float x[64];
    int rc = queue_open(ctx, 30, x, &c);
    if (rc < 0)
        return rc;
    if (ctx->rank == 1) {
        rc = comm_allreduce(c, x, x, 64, COMM_FLOAT32, COMM_SUM);
        atomic_store(&queue_rank1_done, 1);
    } else {
        comm_request_t *req;
        if ((rc = comm_allreduce_start(c, x, x, 64, COMM_FLOAT32, COMM_SUM, &req)) == 0) {
            for (int spins = 0; !atomic_load(&queue_rank1_done) && spins < 10000; spins++) /* 10 s at most */
                clock_sleep_ns(1000000);
            int ran = atomic_load(&queue_rank1_done);
            rc = comm_wait(req);
            if (rc == 0 && !ran)
                rc = err_set(ERR_STATE, "rank 0: nothing ran its started all-reduce before its comm_wait");
        }
    }
    if (rc == 0 && x[0] != 3.0f)
        rc = err_set(ERR_STATE, "rank %d: the sum is %g, want 3", ctx->rank, x[0]);
    comm_close(c);
    return rc;
}

TEST(a_started_collective_runs_at_once_on_the_wall_clock)
{
    vclock_use_wall(1);
    atomic_store(&queue_rank1_done, 0);
    int rc = world_run(2, queue_wall_rank);
    vclock_use_wall(0);
    CHECK_OK(rc);
}

/* ---- a rank that fails in its own code ------------------------------------------ */

/* What each rank of abort_rank saw: its result, and its message. */
static int abort_rc[4];
static char abort_msg[4][2048];
static atomic_int abort_told;

/* Rank 3 fails "while saving a test file" (comm_abort); ranks 1 and 2 wait
 * in an all-reduce meanwhile, rank 0 starts it only after the failure. The
 * watchdog is COMM_MAX_TIMEOUT_S long: only the abort can end the waits
 * before the harness's own limit. */
static int abort_rank(struct rank_ctx *ctx)
{
    comm_t *c;
    int rc = test_open(ctx, ctx->shared, COMM_ALGO_DEFAULT, COMM_CHECK_NONE, COMM_MAX_TIMEOUT_S, &c);
    if (rc < 0)
        return rc;
    float x[64] = {0};
    int r = ctx->rank;
    if (r == 3) {
        comm_set_activity(c, "saving a test file");
        rc = comm_abort(c, err_set(ERR_IO, "test.bin: disk full"));
        atomic_store(&abort_told, 1);
        abort_rc[r] = rc;
        snprintf(abort_msg[r], sizeof abort_msg[r], "%s", err_msg()); /* comm_abort must leave it as it was */
        int again = comm_barrier(c); /* the communicator that told the others is broken too */
        if (again != ERR_STATE || !strstr(err_msg(), "rank 3 failed while saving a test file: test.bin: disk full"))
            snprintf(abort_msg[r], sizeof abort_msg[r], "a collective after comm_abort: %s: %s", err_name(again),
                     err_msg());
    } else {
        while (r == 0 && !atomic_load(&abort_told))
            clock_sleep_ns(1000000);
        rc = comm_allreduce(c, x, x, 64, COMM_FLOAT32, COMM_SUM);
        abort_rc[r] = rc;
        snprintf(abort_msg[r], sizeof abort_msg[r], "%s", err_msg());
    }
    comm_close(c);
    return rc;
}

TEST(abort_tells_every_rank_at_once_with_the_phase)
{
    char diag[2048];
    atomic_store(&abort_told, 0);
    CHECK(world_run_diagnosed(4, abort_rank, diag, sizeof diag) < 0);
    const char *want = "rank 3 failed while saving a test file: test.bin: disk full";
    CHECK_STR(diag, want);
    CHECK_EQ(abort_rc[3], ERR_IO);
    CHECK_STR(abort_msg[3], "test.bin: disk full");
    for (int r = 0; r < 3; r++) { /* in the collective, or starting it after the failure */
        CHECK_EQ(abort_rc[r], ERR_PEER);
        CHECK_CONTAINS(abort_msg[r], "collective #1 (allreduce sum, 64 x float32) aborted on rank");
        CHECK_CONTAINS(abort_msg[r], want);
    }
}

/* Without an activity the message says the rank was in its own code. */
static int abort_quiet_rank(struct rank_ctx *ctx)
{
    comm_t *c;
    int rc = test_open(ctx, ctx->shared, COMM_ALGO_DEFAULT, COMM_CHECK_NONE, COMM_MAX_TIMEOUT_S, &c);
    if (rc < 0)
        return rc;
    float x = 1;
    rc = ctx->rank == 1 ? comm_abort(c, err_set(ERR_NOMEM, "out of memory for a batch"))
                        : comm_allreduce(c, &x, &x, 1, COMM_FLOAT32, COMM_SUM);
    comm_close(c);
    return rc;
}

TEST(abort_without_an_activity_says_own_code)
{
    char diag[2048];
    CHECK(world_run_diagnosed(2, abort_quiet_rank, diag, sizeof diag) < 0);
    CHECK_STR(diag, "rank 1 failed in its own code: out of memory for a batch");
}

/* Rank 1 fails right after it started collective #1: the others complete
 * #1 (its comm_abort still runs it), and fail at #2, which it never
 * started. The watchdog is COMM_MAX_TIMEOUT_S long, as above. */
static int abort_joined_rank(struct rank_ctx *ctx)
{
    comm_t *c;
    int rc = test_open(ctx, ctx->shared, COMM_ALGO_DEFAULT, COMM_CHECK_NONE, COMM_MAX_TIMEOUT_S, &c);
    if (rc < 0)
        return rc;
    float x[64];
    for (int i = 0; i < 64; i++)
        x[i] = 1;
    if (ctx->rank == 1) {
        comm_request_t *req;
        if ((rc = comm_allreduce_start(c, x, x, 64, COMM_FLOAT32, COMM_SUM, &req)) == 0) {
            comm_set_activity(c, "saving a test file");
            rc = comm_abort(c, err_set(ERR_IO, "test.bin: disk full"));
            if (comm_wait(req) != 0 || x[5] != 4) /* its own collective still completes */
                rc = err_set(ERR_STATE, "rank 1's collective #1 did not complete: %s", err_msg());
        }
    } else if ((rc = comm_allreduce(c, x, x, 64, COMM_FLOAT32, COMM_SUM)) < 0 || x[5] != 4) {
        rc = err_set(ERR_STATE, "rank %d: collective #1, which rank 1 started, failed: %s", ctx->rank, err_msg());
    } else {
        rc = comm_allreduce(c, x, x, 64, COMM_FLOAT32, COMM_SUM);
        abort_rc[ctx->rank] = rc;
        snprintf(abort_msg[ctx->rank], sizeof abort_msg[ctx->rank], "%s", err_msg());
    }
    comm_close(c);
    return rc;
}

TEST(abort_spares_the_collectives_the_rank_started)
{
    char diag[2048];
    CHECK(world_run_diagnosed(4, abort_joined_rank, diag, sizeof diag) < 0);
    CHECK_STR(diag, "rank 1 failed while saving a test file: test.bin: disk full");
    for (int r = 0; r < 4; r++) {
        if (r == 1)
            continue;
        CHECK_EQ(abort_rc[r], ERR_PEER);
        CHECK_CONTAINS(abort_msg[r], "collective #2 (allreduce sum, 64 x float32) aborted on rank");
    }
}

/* After a failed collective every rank has its own error already: comm_abort
 * changes nothing, neither the rank's message nor the world's diagnosis. */
static int abort_after_mismatch_rank(struct rank_ctx *ctx)
{
    comm_t *c;
    int rc = test_open(ctx, ctx->shared, COMM_ALGO_DEFAULT, COMM_CHECK_NONE, 5, &c);
    if (rc < 0)
        return rc;
    float x[11] = {0};
    rc = comm_allreduce(c, x, x, ctx->rank == 1 ? 10 : 11, COMM_FLOAT32, COMM_SUM);
    if (rc == ERR_STATE) {
        char before[1024];
        snprintf(before, sizeof before, "%s", err_msg());
        comm_set_activity(c, "saving a test file");
        if (comm_abort(c, rc) != ERR_STATE || strcmp(err_msg(), before) != 0)
            rc = err_set(ERR_ARG, "comm_abort after a mismatch changed the error to: %s", err_msg());
    }
    comm_close(c);
    return rc;
}

TEST(abort_after_a_failed_collective_changes_nothing)
{
    char diag[2048];
    CHECK_EQ(world_run_diagnosed(3, abort_after_mismatch_rank, diag, sizeof diag), ERR_STATE);
    CHECK_CONTAINS(err_msg(), "fingerprint mismatch before collective #1");
    CHECK_CONTAINS(diag, "fingerprint mismatch before collective #1");
}

/* The rank launcher: a rank function that fails without comm_abort (it has
 * closed its communicator, or never had one open) still ends the others'
 * waits at once, with its own message; a rank killed by an injected fault
 * is dead and tells nobody, so the watchdog names it. */
static int launch_fail_rank(struct launch_rank *r)
{
    struct comm_config base;
    comm_config_default(&base);
    base.timeout_s = *(const double *)r->shared;
    comm_t *c;
    int rc = launch_comm_open(r, &base, &c);
    if (rc < 0)
        return rc;
    float x = 1;
    if (r->rank != 1 || r->cfg->faults)
        rc = comm_allreduce(c, &x, &x, 1, COMM_FLOAT32, COMM_SUM);
    comm_close(c);
    if (r->rank == 1 && !r->cfg->faults)
        rc = err_set(ERR_IO, "cannot read sample 7");
    return rc;
}

TEST(launch_tells_every_rank_when_one_fails)
{
    double timeout = COMM_MAX_TIMEOUT_S;
    struct launch_config cfg = {.backend = "sim", .world = 3, .shared = &timeout};
    CHECK(launch_run(&cfg, launch_fail_rank) < 0);
    CHECK_STR(err_msg(), "rank 1: cannot read sample 7");

    timeout = 1;
    cfg.faults = "kill:1@1";
    CHECK(launch_run(&cfg, launch_fail_rank) < 0);
    CHECK_CONTAINS(err_msg(), "collective #1 (allreduce sum, 1 x float32) timed out");
    CHECK_CONTAINS(err_msg(), "rank 1: killed by --fault=kill:1@1 before collective #1");
}

/* ---- failures every rank shares ------------------------------------------------------------- */

/* What each rank of agree_rank and shared_rank saw: its result, its message. */
static int shared_rc[3];
static char shared_msg[3][2048];
static const char *shared_how[3]; /* the message each rank's check fails with; "" when it passes */

/* A rank function as a program writes one: its checks, the agreement
 * (comm_agree_failure), and on failure comm_abort on the way out, which must
 * then tell nobody and change nothing; when every rank passed, the
 * communicator still works. The watchdog is COMM_MAX_TIMEOUT_S long: only
 * the agreement can end a wait before the harness's own limit. */
static int agree_rank(struct launch_rank *lr)
{
    struct comm_config base;
    comm_config_default(&base);
    base.timeout_s = COMM_MAX_TIMEOUT_S;
    comm_t *c;
    int rc = launch_comm_open(lr, &base, &c);
    if (rc < 0)
        return rc;
    int r = lr->rank;
    comm_set_activity(c, "starting");
    rc = comm_agree_failure(c, shared_how[r][0] ? err_set(ERR_FORMAT, "%s", shared_how[r]) : 0);
    shared_rc[r] = rc;
    snprintf(shared_msg[r], sizeof shared_msg[r], "%s", rc < 0 ? err_msg() : "");
    float x = 1;
    if (rc < 0 && (comm_abort(c, rc) != rc || strcmp(err_msg(), shared_msg[r]) != 0))
        rc = err_set(ERR_ARG, "rank %d: comm_abort after the agreement changed the message to: %s", r, err_msg());
    else if (rc == 0 && ((rc = comm_allreduce(c, &x, &x, 1, COMM_FLOAT32, COMM_SUM)) < 0 || x != 3))
        rc = err_set(ERR_STATE, "rank %d: the all-reduce after the agreement: %s", r, err_msg());
    comm_close(c);
    return rc;
}

static int agree_run(const char *r0, const char *r1, const char *r2)
{
    shared_how[0] = r0, shared_how[1] = r1, shared_how[2] = r2;
    struct launch_config cfg = {.backend = "sim", .world = 3};
    return launch_run(&cfg, agree_rank);
}

TEST(agree_when_every_rank_passes)
{
    CHECK_OK(agree_run("", "", ""));
    for (int r = 0; r < 3; r++)
        CHECK_EQ(shared_rc[r], 0);
}

/* Every rank refused the same file: the job's verdict, said as it is, with
 * no rank named ("rank 2 failed while starting: ..." would blame one). */
TEST(agree_on_a_failure_every_rank_shares)
{
    const char *damaged = "ck/checkpoint.safetensors: metadata \"step\" does not match its checksum";
    CHECK_EQ(agree_run(damaged, damaged, damaged), ERR_FORMAT);
    CHECK_STR(err_msg(), damaged);
    for (int r = 0; r < 3; r++) {
        CHECK_EQ(shared_rc[r], ERR_FORMAT);
        CHECK_STR(shared_msg[r], damaged);
    }
}

/* One rank failed alone: its own failure, which every other rank hears at
 * once, as comm_abort would say it; two that failed differently: the lowest
 * one's, and how many more. */
TEST(agree_tells_one_rank_s_own_failure_to_every_rank)
{
    CHECK(agree_run("", "out of memory for the loader's ring", "") < 0); /* the first rank to return: either */
    const char *story = "rank 1 failed while starting: out of memory for the loader's ring";
    CHECK_STR(err_msg(), story);
    CHECK_EQ(shared_rc[1], ERR_FORMAT);
    CHECK_STR(shared_msg[1], "out of memory for the loader's ring");
    for (int r = 0; r < 3; r += 2) {
        CHECK_EQ(shared_rc[r], ERR_PEER);
        CHECK_STR(shared_msg[r], story);
    }

    CHECK(agree_run("", "cannot read a.bin", "cannot read b.bin") < 0);
    CHECK_STR(err_msg(), "rank 1 failed while starting: cannot read a.bin (and 1 other rank failed)");
    CHECK_EQ(shared_rc[0], ERR_PEER);
    CHECK_STR(shared_msg[2], "cannot read b.bin");
}

/* A verdict every rank reached from data they all gathered (the replica
 * check's): comm_fail_shared, then comm_abort on the way out, which tells
 * nobody; the launcher prints the verdict alone, blaming no rank. */
static int shared_rank(struct launch_rank *lr)
{
    comm_t *c;
    int rc = launch_comm_open(lr, NULL, &c);
    if (rc < 0)
        return rc;
    comm_set_activity(c, "checking the replicas after step 5");
    const char *verdict = "step 5: rank 2 differs from the other 2 ranks in fc3.bias[5]";
    rc = comm_abort(c, comm_fail_shared(c, err_set(ERR_STATE, "%s", verdict)));
    shared_rc[lr->rank] = comm_barrier(c); /* broken by the verdict */
    snprintf(shared_msg[lr->rank], sizeof shared_msg[lr->rank], "%s", err_msg());
    comm_close(c);
    return err_set(rc, "%s", verdict); /* what the rank returns, as after comm_abort */
}

TEST(a_shared_verdict_blames_no_rank)
{
    struct launch_config cfg = {.backend = "sim", .world = 3};
    CHECK_EQ(launch_run(&cfg, shared_rank), ERR_STATE);
    CHECK_STR(err_msg(), "step 5: rank 2 differs from the other 2 ranks in fc3.bias[5]");
    for (int r = 0; r < 3; r++) {
        CHECK_EQ(shared_rc[r], ERR_STATE);
        CHECK_CONTAINS(shared_msg[r], "broken by an earlier failure: step 5: rank 2 differs");
    }
}

/* Modelled time: rank r issues at r ms; an all-reduce starts when the last
 * rank arrives and lasts the cost model's time (the default profile's
 * links), the same integer ns on every rank; a second one queued behind it
 * starts at its end (the communicator is busy until then), a barrier costs
 * ceil(log2 W) alphas. */
#define MT_W 4
#define MT_COUNT ((size_t)1 << 18)
static uint64_t mt_after[MT_W][3];
static float *mt_buf[MT_W];

static int modelled_rank(struct rank_ctx *ctx)
{
    comm_t *c;
    int rc = test_open(ctx, ctx->shared, COMM_ALGO_RING, COMM_CHECK_NONE, 30, &c);
    if (rc < 0)
        return rc;
    vclock_set_ns((uint64_t)ctx->rank * 1000000);
    float *b = mt_buf[ctx->rank];
    if ((rc = comm_allreduce(c, b, b, MT_COUNT, COMM_FLOAT32, COMM_SUM)) == 0)
        mt_after[ctx->rank][0] = vclock_now_ns();
    comm_request_t *q[2];
    if (rc == 0 && (rc = comm_allreduce_start(c, b, b, MT_COUNT, COMM_FLOAT32, COMM_SUM, &q[0])) == 0 &&
        (rc = comm_allreduce_start(c, b, b, MT_COUNT, COMM_FLOAT32, COMM_SUM, &q[1])) == 0) {
        uint64_t d0, d1;
        rc = comm_wait_timed(q[0], &d0);
        int r1 = comm_wait_timed(q[1], &d1);
        rc = rc ? rc : r1;
        mt_after[ctx->rank][1] = d1 - d0;
    }
    uint64_t before = vclock_now_ns();
    if (rc == 0 && (rc = comm_barrier(c)) == 0)
        mt_after[ctx->rank][2] = vclock_now_ns() - before;
    comm_close(c);
    return rc;
}

TEST(collectives_take_modelled_time)
{
    for (int r = 0; r < MT_W; r++)
        mt_buf[r] = calloc(MT_COUNT, sizeof(float));
    CHECK_EQ(world_run(MT_W, modelled_rank), 0);
    const struct hw_profile *hw;
    CHECK_EQ(hw_profile_find("a100", &hw), 0);
    struct costmodel m = {0};
    costmodel_from_hw(&m, hw);
    double bytes = (double)MT_COUNT * sizeof(float);
    uint64_t ar = vclock_ns_of_s(costmodel_collective(&m, COMM_ALLREDUCE, COMM_ALGO_RING, MT_W, bytes));
    uint64_t bar = vclock_ns_of_s(costmodel_collective(&m, COMM_BARRIER, COMM_ALGO_RING, MT_W, 0));
    CHECK(ar > 1000 && bar > 0);
    for (int r = 0; r < MT_W; r++) {
        CHECK_EQ(mt_after[r][0], (uint64_t)(MT_W - 1) * 1000000 + ar); /* the last arrival, plus the model */
        CHECK_EQ(mt_after[r][1], ar);                                  /* the second waits for the first */
        CHECK_EQ(mt_after[r][2], bar);                                 /* every rank left the barrier together */
        free(mt_buf[r]);
    }
}
