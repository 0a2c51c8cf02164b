/* test_comm_mpi: the backends whose ranks are processes started by mpirun,
 * through lib/comm/comm.h: "mpi" (lib/comm/mpi/comm_mpi.c) always, and "nccl" when
 * tests/gpu/nccl.sh sets COMM_TEST_BACKEND=nccl on a GPU machine (NCCL ranks
 * started by mpirun: the unique id travels over MPI). Buffers go through
 * comm_mem_alloc / upload / download, so the same checks run on host and
 * device memory.
 *
 * Every test opens a communicator in whatever job it finds itself:
 *   - run as a plain unit test (tests/run), each test is a singleton MPI
 *     process: world 1, where every collective must still be exact;
 *   - run by tests/mpi/comm_mpi.sh as `mpirun --oversubscribe -np W
 *     build/tests/unit/test_comm_mpi TEST`, one test per job (each test initializes
 *     and finalizes MPI, which a process may do once), at W = 2 and 4.
 * Each rank checks its own result against a reference computed here from every
 * rank's inputs, and the ranks compare checksums of their results with an
 * all-gather, so "every rank bit-identical" is checked by the code under test
 * and by the test itself. Built without MPI, the one test checks the
 * "no MPI support" error.
 */
#include "check.h"
#include "comm/comm.h"
#include "comm/comm_backend.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/half.h"
#include "base/hash.h"
#ifdef HAVE_MPI
#include "comm/mpi/comm_mpi.h"

#include <mpi.h> /* the profiling interface's wrappers below; the build gives this test mpicc's flags */
#endif

#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef HAVE_MPI

TEST(comm_mpi_not_built)
{
    struct comm_config cfg;
    comm_config_default(&cfg);
    cfg.backend = "mpi";
    comm_t *c;
    CHECK_ERR(comm_open(&cfg, &c), ERR_UNSUPPORTED, "no MPI support");
}

#else

static const char *test_backend(void)
{
    const char *b = getenv("COMM_TEST_BACKEND");
    return b && *b ? b : "mpi";
}

static comm_t *test_open(enum comm_check check, double timeout_s)
{
    struct comm_config cfg;
    comm_config_default(&cfg);
    cfg.backend = test_backend();
    cfg.check = check;
    cfg.timeout_s = timeout_s;
    comm_t *c = NULL;
    CHECK_OK(comm_open(&cfg, &c));
    return c;
}

/* Rank r's value i: varied magnitudes (mantissa and exponent from
 * SplitMix64 of (r, i)), so the order of additions shows in the bits. */
static double test_value(int r, size_t i)
{
    uint64_t z = hash_splitmix64((uint64_t)r << 40 ^ (uint64_t)i);
    return ((double)(z % 2000001u) - 1000000.0) / (double)(1u << (z >> 60));
}

static void test_fill(enum comm_dtype t, void *buf, int r, size_t first, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double v = test_value(r, first + i);
        switch (t) {
        case COMM_FLOAT32: ((float *)buf)[i] = (float)v; break;
        case COMM_FLOAT64: ((double *)buf)[i] = v; break;
        case COMM_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
        /* the 16-bit floats: scaled so that a sum over 4 ranks stays below float16's 65504 */
        case COMM_FLOAT16: ((uint16_t *)buf)[i] = half_from_float((float)(v / 128)); break;
        case COMM_BFLOAT16: ((uint16_t *)buf)[i] = half_bf16_from_float((float)(v / 128)); break;
        default: ((int64_t *)buf)[i] = (int64_t)v; break;
        }
    }
}

static double test_get(enum comm_dtype t, const void *buf, size_t i)
{
    switch (t) {
    case COMM_FLOAT32: return ((const float *)buf)[i];
    case COMM_FLOAT64: return ((const double *)buf)[i];
    case COMM_INT32: return ((const int32_t *)buf)[i];
    case COMM_FLOAT16: return half_to_float(((const uint16_t *)buf)[i]);
    case COMM_BFLOAT16: return half_bf16_to_float(((const uint16_t *)buf)[i]);
    default: return (double)((const int64_t *)buf)[i];
    }
}

/* Element i of op over ranks of their inputs (element `first + i` of each
 * rank's data), checked against `got` within the type's rounding. */
static void test_check_reduced(enum comm_dtype t, enum comm_op op, int world, const void *got, size_t first,
                               size_t n, const char *what)
{
    /* one rounding per addition: 2^-24, 2^-53, 2^-11, 2^-8 relative, with room */
    double eps = t == COMM_FLOAT32   ? 1e-6
                 : t == COMM_FLOAT64 ? 1e-14
                 : t == COMM_FLOAT16 ? 1e-3
                 : t == COMM_BFLOAT16 ? 8e-3
                                      : 0;
    for (size_t i = 0; i < n; i++) {
        double ref = 0, mag = 0, one;
        for (int r = 0; r < world; r++) {
            double cell; /* room for one element of any type */
            test_fill(t, &cell, r, first + i, 1);
            one = test_get(t, &cell, 0);
            ref += one;
            mag += fabs(one);
        }
        if (op == COMM_AVG) {
            ref /= world;
            mag /= world;
        }
        double v = test_get(t, got, i);
        CHECK_MSG(fabs(v - ref) <= eps * (mag + 1) * world, "%s: element %zu: got %.17g, want %.17g (world %d)",
                  what, first + i, v, ref, world);
    }
}

/* A buffer in the communicator's memory (device memory under nccl) with a
 * host copy: fill host, up(); collective on dev; down(), check host. */
struct tbuf {
    void *host, *dev;
    size_t bytes;
};

static struct tbuf tb_new(comm_t *c, size_t bytes)
{
    struct tbuf b = {.host = calloc(1, bytes + 1), .bytes = bytes};
    CHECK(b.host);
    CHECK_OK(comm_mem_alloc(c, bytes, &b.dev));
    return b;
}

static void tb_up(comm_t *c, const struct tbuf *b) { CHECK_OK(comm_mem_upload(c, b->dev, b->host, b->bytes)); }
static void tb_down(comm_t *c, const struct tbuf *b) { CHECK_OK(comm_mem_download(c, b->host, b->dev, b->bytes)); }

static void tb_free(comm_t *c, struct tbuf *b)
{
    comm_mem_free(c, b->dev);
    free(b->host);
}

/* Element `i` of a buffer in comm memory, as a pointer the collectives take. */
static void *tb_at(const struct tbuf *b, size_t i, size_t es) { return (char *)b->dev + i * es; }

/* Every rank must hold the same `bytes` at host: all-gather the checksums. */
static void test_check_identical(comm_t *c, const void *host, size_t bytes, const char *what)
{
    int world = comm_world(c);
    struct tbuf mine = tb_new(c, 8), all = tb_new(c, 8 * (size_t)world);
    *(int64_t *)mine.host = (int64_t)comm_checksum(host, bytes);
    tb_up(c, &mine);
    CHECK_OK(comm_allgather(c, mine.dev, all.dev, 1, COMM_INT64));
    tb_down(c, &all);
    const int64_t *sums = all.host;
    for (int r = 1; r < world; r++)
        CHECK_MSG(sums[r] == sums[0], "%s: rank %d's result differs from rank 0's", what, r);
    tb_free(c, &mine);
    tb_free(c, &all);
}

/* Counts that exercise the edges: 0, 1, fewer than W, not divisible by W. */
static const size_t test_counts[] = {0, 1, 3, 7, 1001, 65537};
#define TEST_NCOUNTS (sizeof test_counts / sizeof test_counts[0])

static void test_allreduce(enum comm_dtype t, enum comm_op op, double timeout_s)
{
    comm_t *c = test_open(COMM_CHECK_NONE, timeout_s);
    int rank = comm_rank(c), world = comm_world(c);
    size_t es = comm_dtype_size(t);
    for (size_t k = 0; k < TEST_NCOUNTS; k++) {
        size_t n = test_counts[k];
        for (int in_place = 0; in_place < 2; in_place++) {
            struct tbuf send = tb_new(c, n * es), recv = tb_new(c, n * es);
            test_fill(t, send.host, rank, 0, n);
            tb_up(c, &send);
            CHECK_OK(comm_allreduce(c, send.dev, in_place ? send.dev : recv.dev, n, t, op));
            struct tbuf *out = in_place ? &send : &recv;
            tb_down(c, out);
            char what[96];
            snprintf(what, sizeof what, "allreduce %s %s count %zu%s", comm_op_name(op), comm_dtype_name(t), n,
                     in_place ? " in place" : "");
            test_check_reduced(t, op, world, out->host, 0, n, what);
            test_check_identical(c, out->host, n * es, what);
            tb_free(c, &send);
            tb_free(c, &recv);
        }
    }
    comm_close(c);
}

TEST(comm_mpi_allreduce_sum_float32) { test_allreduce(COMM_FLOAT32, COMM_SUM, 0); }
TEST(comm_mpi_allreduce_avg_float32) { test_allreduce(COMM_FLOAT32, COMM_AVG, 0); }
TEST(comm_mpi_allreduce_avg_float64) { test_allreduce(COMM_FLOAT64, COMM_AVG, 0); }
TEST(comm_mpi_allreduce_sum_int32) { test_allreduce(COMM_INT32, COMM_SUM, 0); }
TEST(comm_mpi_allreduce_sum_int64) { test_allreduce(COMM_INT64, COMM_SUM, 0); }
TEST(comm_mpi_allreduce_sum_float16) { test_allreduce(COMM_FLOAT16, COMM_SUM, 0); }
TEST(comm_mpi_allreduce_avg_bfloat16) { test_allreduce(COMM_BFLOAT16, COMM_AVG, 0); }

/* hier is the simulator's: the libraries choose their own algorithms, so a
 * request they would silently not honour is refused before anything starts */
TEST(comm_mpi_refuses_hier)
{
    struct comm_config cfg;
    comm_config_default(&cfg);
    cfg.backend = test_backend();
    cfg.algo = COMM_ALGO_HIER;
    comm_t *c = NULL;
    CHECK_ERR(comm_open(&cfg, &c), ERR_UNSUPPORTED, "algorithm hier is the simulator's (--backend=sim)");
    CHECK(c == NULL);
}

/* Without a watchdog (COMM_NO_TIMEOUT, what `make bench` runs) the blocking
 * collectives call MPI's blocking functions, and give the same results; the
 * start/wait forms and a communicator with a timeout still post the
 * non-blocking ones and poll them. nccl refuses COMM_NO_TIMEOUT. */
TEST(comm_mpi_untimed_calls_blocking_mpi)
{
    if (strcmp(test_backend(), "mpi") != 0)
        return;
    comm_t *timed = test_open(COMM_CHECK_NONE, 10); /* open first: MPI may start only once per process */
    test_allreduce(COMM_FLOAT32, COMM_SUM, COMM_NO_TIMEOUT);
    test_allreduce(COMM_FLOAT64, COMM_AVG, COMM_NO_TIMEOUT);
    comm_t *c = test_open(COMM_CHECK_RESULTS, COMM_NO_TIMEOUT);
    int rank = comm_rank(c), world = comm_world(c);
    size_t n = 1001, total = n * (size_t)world;
    struct tbuf a = tb_new(c, total * 4), b = tb_new(c, total * 4);
    test_fill(COMM_FLOAT32, a.host, rank, 0, total);
    tb_up(c, &a);
    CHECK_STR(comm_mpi_last_call(c), "");
    /* in place: reduced into a temporary, copied at the end (mpi_post) */
    CHECK_OK(comm_reduce_scatter(c, a.dev, tb_at(&a, (size_t)rank * n, 4), n, COMM_FLOAT32, COMM_AVG));
    CHECK_STR(comm_mpi_last_call(c), "MPI_Reduce_scatter_block");
    CHECK_OK(comm_mem_download(c, b.host, tb_at(&a, (size_t)rank * n, 4), n * 4));
    test_check_reduced(COMM_FLOAT32, COMM_AVG, world, b.host, (size_t)rank * n, n, "untimed reduce_scatter");
    CHECK_OK(comm_allgather(c, tb_at(&a, (size_t)rank * n, 4), b.dev, n, COMM_FLOAT32));
    CHECK_STR(comm_mpi_last_call(c), "MPI_Allgather");
    CHECK_OK(comm_broadcast(c, b.dev, total, COMM_FLOAT32, world - 1));
    CHECK_STR(comm_mpi_last_call(c), "MPI_Bcast");
    CHECK_OK(comm_allreduce(c, a.dev, b.dev, total, COMM_FLOAT32, COMM_SUM));
    CHECK_STR(comm_mpi_last_call(c), "MPI_Allreduce");
    comm_request_t *req;
    CHECK_OK(comm_allreduce_start(c, a.dev, b.dev, total, COMM_FLOAT32, COMM_SUM, &req));
    CHECK_STR(comm_mpi_last_call(c), "MPI_Iallreduce");
    CHECK_OK(comm_wait(req));
    CHECK_OK(comm_barrier(c));
    CHECK_STR(comm_mpi_last_call(c), "MPI_Barrier");
    tb_free(c, &a);
    tb_free(c, &b);
    comm_close(c);
    CHECK_OK(comm_barrier(timed));
    CHECK_STR(comm_mpi_last_call(timed), "MPI_Ibarrier");
    comm_close(timed);
}

/* The average is sum / W, bit for bit. NCCL pre-multiplies each input by 1/W
 * instead (nccl_comm.h), which gives the same bits only when W is a power of
 * two; other worlds are checked within rounding by the avg tests above. */
TEST(comm_mpi_avg_is_sum_then_divide)
{
    comm_t *c = test_open(COMM_CHECK_NONE, 0);
    int world = comm_world(c);
    if (strcmp(test_backend(), "nccl") == 0 && (world & (world - 1)) != 0) {
        comm_close(c);
        return;
    }
    size_t n = 4099;
    struct tbuf in = tb_new(c, n * 4), sum = tb_new(c, n * 4), avg = tb_new(c, n * 4);
    test_fill(COMM_FLOAT32, in.host, comm_rank(c), 0, n);
    tb_up(c, &in);
    CHECK_OK(comm_allreduce(c, in.dev, sum.dev, n, COMM_FLOAT32, COMM_SUM));
    CHECK_OK(comm_allreduce(c, in.dev, avg.dev, n, COMM_FLOAT32, COMM_AVG));
    tb_down(c, &sum);
    tb_down(c, &avg);
    const float *s = sum.host, *a = avg.host;
    for (size_t i = 0; i < n; i++)
        CHECK_MSG(a[i] == s[i] / (float)world, "element %zu: avg %.9g, sum / W %.9g", i, a[i], s[i] / (float)world);
    tb_free(c, &in), tb_free(c, &sum), tb_free(c, &avg);
    comm_close(c);
}

/* Same inputs, same bits, run after run (the library's reduction order is
 * fixed for a given count, world and algorithm). */
TEST(comm_mpi_deterministic)
{
    comm_t *c = test_open(COMM_CHECK_RESULTS, 0);
    size_t n = 100003;
    struct tbuf in = tb_new(c, n * 4), a = tb_new(c, n * 4), b = tb_new(c, n * 4);
    test_fill(COMM_FLOAT32, in.host, comm_rank(c), 0, n);
    tb_up(c, &in);
    CHECK_OK(comm_allreduce(c, in.dev, a.dev, n, COMM_FLOAT32, COMM_SUM));
    CHECK_OK(comm_allreduce(c, in.dev, b.dev, n, COMM_FLOAT32, COMM_SUM));
    tb_down(c, &a);
    tb_down(c, &b);
    CHECK_MSG(memcmp(a.host, b.host, n * 4) == 0, "two identical all-reduces gave different bits");
    tb_free(c, &in), tb_free(c, &a), tb_free(c, &b);
    comm_close(c);
}

TEST(comm_mpi_broadcast_every_root)
{
    comm_t *c = test_open(COMM_CHECK_RESULTS, 0);
    int rank = comm_rank(c), world = comm_world(c);
    for (int root = 0; root < world; root++)
        for (size_t k = 0; k < TEST_NCOUNTS; k++) {
            size_t n = test_counts[k];
            struct tbuf buf = tb_new(c, n * 4);
            float *want = malloc(n * 4 + 4);
            CHECK(want);
            test_fill(COMM_FLOAT32, buf.host, rank, 0, n);
            test_fill(COMM_FLOAT32, want, root, 0, n);
            tb_up(c, &buf);
            CHECK_OK(comm_broadcast(c, buf.dev, n, COMM_FLOAT32, root));
            tb_down(c, &buf);
            CHECK_MSG(memcmp(buf.host, want, n * 4) == 0, "broadcast from root %d, count %zu: rank %d differs", root,
                      n, rank);
            tb_free(c, &buf);
            free(want);
        }
    comm_close(c);
}

TEST(comm_mpi_reduce_scatter)
{
    comm_t *c = test_open(COMM_CHECK_FINGERPRINT, 0);
    int rank = comm_rank(c), world = comm_world(c);
    for (size_t k = 0; k < TEST_NCOUNTS; k++) {
        size_t n = test_counts[k], total = n * (size_t)world;
        for (int op = COMM_SUM; op <= COMM_AVG; op++)
            for (int in_place = 0; in_place < 2; in_place++) {
                struct tbuf send = tb_new(c, total * 4), recv = tb_new(c, n * 4);
                test_fill(COMM_FLOAT32, send.host, rank, 0, total);
                tb_up(c, &send);
                void *out = in_place ? tb_at(&send, (size_t)rank * n, 4) : recv.dev;
                CHECK_OK(comm_reduce_scatter(c, send.dev, out, n, COMM_FLOAT32, (enum comm_op)op));
                CHECK_OK(comm_mem_download(c, recv.host, out, n * 4));
                char what[96];
                snprintf(what, sizeof what, "reduce_scatter %s count %zu%s", comm_op_name((enum comm_op)op), n,
                         in_place ? " in place" : "");
                test_check_reduced(COMM_FLOAT32, (enum comm_op)op, world, recv.host, (size_t)rank * n, n, what);
                tb_free(c, &send);
                tb_free(c, &recv);
            }
    }
    comm_close(c);
}

TEST(comm_mpi_allgather)
{
    comm_t *c = test_open(COMM_CHECK_RESULTS, 0);
    int rank = comm_rank(c), world = comm_world(c);
    for (size_t k = 0; k < TEST_NCOUNTS; k++) {
        size_t n = test_counts[k], total = n * (size_t)world;
        for (int in_place = 0; in_place < 2; in_place++) {
            struct tbuf send = tb_new(c, n * 4), recv = tb_new(c, total * 4);
            float *want = malloc(n * 4 + 4);
            CHECK(want);
            test_fill(COMM_FLOAT32, send.host, rank, 0, n);
            void *in = in_place ? tb_at(&recv, (size_t)rank * n, 4) : send.dev;
            CHECK_OK(comm_mem_upload(c, in, send.host, n * 4));
            CHECK_OK(comm_allgather(c, in, recv.dev, n, COMM_FLOAT32));
            tb_down(c, &recv);
            for (int r = 0; r < world; r++) {
                test_fill(COMM_FLOAT32, want, r, 0, n);
                CHECK_MSG(memcmp((float *)recv.host + (size_t)r * n, want, n * 4) == 0,
                          "allgather count %zu%s: rank %d's block is wrong on rank %d", n,
                          in_place ? " in place" : "", r, rank);
            }
            tb_free(c, &send);
            tb_free(c, &recv);
            free(want);
        }
    }
    comm_close(c);
}

/* Launch several collectives, then wait for them in order: what DDP does with
 * its buckets. Sequence numbers count every collective, barrier included. */
TEST(comm_mpi_async_and_sequence)
{
    comm_t *c = test_open(COMM_CHECK_FINGERPRINT, 0);
    int rank = comm_rank(c), world = comm_world(c);
    enum { BUCKETS = 4 };
    size_t n = 3001;
    struct tbuf bufs[BUCKETS];
    comm_request_t *reqs[BUCKETS];
    CHECK_EQ_U64(comm_next_seq(c), 1);
    for (int b = 0; b < BUCKETS; b++) {
        bufs[b] = tb_new(c, n * 4);
        test_fill(COMM_FLOAT32, bufs[b].host, rank, (size_t)b * n, n);
        tb_up(c, &bufs[b]);
        CHECK_OK(comm_allreduce_start(c, bufs[b].dev, bufs[b].dev, n, COMM_FLOAT32, COMM_AVG, &reqs[b]));
    }
    CHECK_EQ_U64(comm_next_seq(c), 1 + BUCKETS);
    for (int b = 0; b < BUCKETS; b++) {
        CHECK_OK(comm_wait(reqs[b]));
        tb_down(c, &bufs[b]);
        test_check_reduced(COMM_FLOAT32, COMM_AVG, world, bufs[b].host, (size_t)b * n, n, "bucket");
        tb_free(c, &bufs[b]);
    }
    CHECK_OK(comm_barrier(c));
    CHECK_EQ_U64(comm_next_seq(c), 2 + BUCKETS);
    comm_close(c);
}

/* MPI ranks are processes: no thread worlds, no torchrun variables, and the
 * launcher's rank and world win over a configuration that disagrees. */
TEST(comm_mpi_launch_and_config_errors)
{
    if (strcmp(test_backend(), "mpi") != 0)
        return;
    comm_world_t *w;
    struct comm_world_options opt = {.world = 2};
    CHECK_ERR(comm_world_create("mpi", &opt, &w), ERR_UNSUPPORTED, "no thread mode");
    enum comm_launch l;
    CHECK_ERR(comm_launch_resolve("mpi", COMM_LAUNCH_ENV, &l), ERR_UNSUPPORTED, "started by mpirun");
    CHECK_OK(comm_launch_resolve("mpi", COMM_LAUNCH_AUTO, &l));
    CHECK_EQ(l, COMM_LAUNCH_MPI);
    struct comm_config cfg;
    comm_config_default(&cfg);
    cfg.backend = "mpi";
    cfg.world = 1000;
    comm_t *c;
    CHECK_ERR(comm_open(&cfg, &c), ERR_ARG, "but the configuration asks for rank -1 of 1000");
}

/* The MPI session the NCCL backend borrows: where this process sits, and the
 * broadcast that carries the NCCL unique id (here from the last rank). */
TEST(comm_mpi_session_place_and_bcast)
{
    struct comm_mpi_place at;
    CHECK_OK(comm_mpi_session_begin(10, &at));
    CHECK(at.rank >= 0 && at.rank < at.world);
    CHECK(at.local_rank >= 0 && at.local_rank < at.local_world && at.local_world <= at.world);
    unsigned char id[128], want[128];
    for (int i = 0; i < 128; i++)
        want[i] = (unsigned char)(i * 7 + at.world), id[i] = at.rank == at.world - 1 ? want[i] : 0;
    CHECK_OK(comm_mpi_bcast_bytes(id, sizeof id, at.world - 1, 10));
    CHECK(memcmp(id, want, sizeof id) == 0);
    comm_mpi_session_end(0);
    CHECK_ERR(comm_mpi_session_begin(10, &at), ERR_STATE, "already finalized");
}

/* Rank 1 calls a broadcast where the others call an all-reduce: with the
 * fingerprint check every rank refuses it, naming rank 1 against the
 * majority (at world 2: both ranks, and that neither can be blamed) and the
 * fields. Needs two ranks; at world 1 there is nobody to disagree with. */
TEST(comm_mpi_fingerprint_mismatch)
{
    comm_t *c = test_open(COMM_CHECK_FINGERPRINT, 0);
    int rank = comm_rank(c);
    if (comm_world(c) >= 2) {
        struct tbuf buf = tb_new(c, 64 * 4);
        tb_up(c, &buf);
        CHECK_OK(comm_barrier(c));
        int rc = rank == 1 ? comm_broadcast(c, buf.dev, 64, COMM_FLOAT32, 0)
                           : comm_allreduce(c, buf.dev, buf.dev, 64, COMM_FLOAT32, COMM_SUM);
        CHECK_EQ(rc, ERR_STATE);
        CHECK_CONTAINS(err_msg(), "fingerprint mismatch before collective #2");
        CHECK_CONTAINS(err_msg(), "rank 1 called #2 broadcast");
        if (comm_world(c) == 2) {
            CHECK_CONTAINS(err_msg(), "rank 0 called #2 allreduce");
            CHECK_CONTAINS(err_msg(), "with two ranks there is no majority");
        } else {
            CHECK_CONTAINS(err_msg(), "ranks called #2 allreduce");
        }
        CHECK_CONTAINS(err_msg(), "differs: collective");
        CHECK_ERR(comm_barrier(c), ERR_STATE, "broken");
        tb_free(c, &buf);
    }
    comm_close(c);
}

/* A rank that never arrives, or fails, or stops, and how the others learn
 * it. COMM_MPI_TEST_ABORT says how:
 *   missing   rank 1 never calls collective #2: it stays in its own code
 *             (sleeps) while the others wait in it;
 *   other     rank 1 calls a broadcast as #2 where the others all-reduce,
 *             with no fingerprint check to refuse it first: Open MPI then
 *             waits on both sides;
 *   closed    rank 1 closes its communicator instead of calling #2;
 *   pending   rank 1 never calls #2 to #4; the others start all three
 *             before waiting: the first wait times out and takes the census,
 *             the two after it are abandoned at once (they cannot complete,
 *             and waiting out the timeout again for each only delayed the
 *             end);
 *   failed    rank 1 fails in its own code, "while saving a test file", and
 *             calls comm_abort; the others wait in #2 with a watchdog of
 *             COMM_MAX_TIMEOUT_S, so only rank 1's notice can end their wait;
 *   joined    the same, right after rank 1 started #2: the others complete
 *             #2 (rank 1 joined it), and fail at #3, which it never started;
 *   in-flight the same as failed, while the others have two all-reduces
 *             posted (DDP's buckets): the first fails with rank 1's notice,
 *             the second is given up, and both buffers are freed before
 *             comm_close, which must then not progress MPI at all;
 *   start-failed
 *             rank 1's #2 fails to start on rank 1 alone (more elements than
 *             MPI's int counts take), "while reducing too many elements",
 *             and it calls comm_abort: its own failure, which the others,
 *             waiting in #2, must hear at once;
 *   stop-start, stop-end
 *             rank 1 stops itself (SIGSTOP, as a frozen node) before opening
 *             its communicator, or after its last collective, before
 *             closing it: MPI_Init_thread, or comm_close's final barrier,
 *             must not wait for it forever.
 * Every waiting rank times out and takes its census: the ranks that wait in
 * #2 too, and rank 1 named, as not answering (in no collective) or as
 * waiting in another one; or, for the four failures, fails at once naming
 * rank 1 and its phase. Under mpi the job then ends in MPI_Abort (or, for
 * stop-start, in the guard's exit), since MPI cannot cancel the posted
 * call, and no rank that gave a collective up calls MPI after freeing its
 * buffer (the guard below ends the rank that does); so the job
 * FAILS by design; only tests/mpi/comm_mpi.sh runs this, alone, and checks
 * the failure and its messages. Elsewhere it does nothing. Under nccl
 * (COMM_MPI_TEST_ABORT=1 from tests/gpu/nccl.sh: `missing`), ncclCommAbort
 * ends the collective and the job passes. */
/* One line on stdout, at once: the runner prints what a test wrote to stderr
 * only when the test ends, and MPI_Abort may end the runner first. */
static void test_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void test_say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

/* The MPI calls that move data, wrapped through MPI's profiling interface
 * (PMPI_*, MPI-3.1 section 14.2), so the test sees every one the backend
 * makes. Once this rank has given a collective up and freed its buffer
 * (test_gave_up), none may run: MPI could write what the collective still
 * receives into freed memory. Only MPI_Abort may end the job then. A call
 * made anyway is said, and ends the rank with status 3. */
static volatile sig_atomic_t test_gave_up;

/* in-flight: "my two all-reduces are posted", to rank 1, which fails only
 * then; on MPI_COMM_WORLD, which no communicator of ours is */
#define TEST_TAG_POSTED 77

static void test_no_progress(const char *call)
{
    if (!test_gave_up)
        return;
    test_say("%s called after this rank freed the buffer of a collective it gave up", call);
    _exit(3);
}

int MPI_Test(MPI_Request *r, int *flag, MPI_Status *st)
{
    test_no_progress("MPI_Test");
    return PMPI_Test(r, flag, st);
}

int MPI_Wait(MPI_Request *r, MPI_Status *st)
{
    test_no_progress("MPI_Wait");
    return PMPI_Wait(r, st);
}

int MPI_Iprobe(int src, int tag, MPI_Comm comm, int *flag, MPI_Status *st)
{
    test_no_progress("MPI_Iprobe");
    return PMPI_Iprobe(src, tag, comm, flag, st);
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Status *st)
{
    test_no_progress("MPI_Recv");
    return PMPI_Recv(buf, count, type, src, tag, comm, st);
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dst, int tag, MPI_Comm comm)
{
    test_no_progress("MPI_Send");
    return PMPI_Send(buf, count, type, dst, tag, comm);
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dst, int tag, MPI_Comm comm, MPI_Request *r)
{
    test_no_progress("MPI_Isend");
    return PMPI_Isend(buf, count, type, dst, tag, comm, r);
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *r)
{
    test_no_progress("MPI_Ibarrier");
    return PMPI_Ibarrier(comm, r);
}

int MPI_Comm_free(MPI_Comm *comm)
{
    test_no_progress("MPI_Comm_free");
    return PMPI_Comm_free(comm);
}

int MPI_Finalize(void)
{
    test_no_progress("MPI_Finalize");
    return PMPI_Finalize();
}

/* Stops this process (SIGSTOP), as a frozen node would be, after writing
 * its pid where COMM_MPI_TEST_PIDFILE says: the script ends it if the job
 * did not. */
static void test_stop(void)
{
    const char *path = getenv("COMM_MPI_TEST_PIDFILE");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (f) {
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
    }
    raise(SIGSTOP);
}

TEST(comm_mpi_timeout_aborts)
{
    const char *how = getenv("COMM_MPI_TEST_ABORT");
    if (!how)
        return;
    int mpi = strcmp(test_backend(), "mpi") == 0;
    const char *rank_env = getenv("OMPI_COMM_WORLD_RANK");
    int me = rank_env ? atoi(rank_env) : 0;
    if (mpi && me == 1 && strcmp(how, "stop-start") == 0)
        test_stop(); /* the others wait in MPI_Init_thread until the guard ends the job */
    int joined = strcmp(how, "joined") == 0, start_failed = strcmp(how, "start-failed") == 0;
    int in_flight = strcmp(how, "in-flight") == 0;
    int failed = joined || start_failed || in_flight || strcmp(how, "failed") == 0;
    comm_t *c = test_open(COMM_CHECK_NONE, failed ? COMM_MAX_TIMEOUT_S : 1.0);
    if (comm_world(c) < 2) { /* nobody to be missing */
        comm_close(c);
        return;
    }
    struct tbuf buf = tb_new(c, 16 * 4), buf2 = tb_new(c, 16 * 4);
    tb_up(c, &buf);
    CHECK_OK(comm_barrier(c));
    int rc = 0, gave_up = 0;
    comm_request_t *joined_req = NULL;
    if (comm_rank(c) != 1) {
        if (mpi && in_flight) { /* two buckets posted when rank 1's notice comes */
            comm_request_t *req[2];
            CHECK_OK(comm_allreduce_start(c, buf.dev, buf.dev, 16, COMM_FLOAT32, COMM_SUM, &req[0]));
            CHECK_OK(comm_allreduce_start(c, buf2.dev, buf2.dev, 16, COMM_FLOAT32, COMM_SUM, &req[1]));
            CHECK(MPI_Send(NULL, 0, MPI_CHAR, 1, TEST_TAG_POSTED, MPI_COMM_WORLD) == MPI_SUCCESS);
            rc = comm_wait(req[0]);
            char first[1024];
            snprintf(first, sizeof first, "%s", err_msg());
            CHECK_ERR(comm_wait(req[1]), ERR_PEER, "collective #3 (allreduce sum, 16 x float32): abandoned");
            err_set(rc, "%s", first);
        } else if (mpi && strcmp(how, "pending") == 0) {
            gave_up = 1;
            comm_request_t *req[3];
            for (int k = 0; k < 3; k++)
                CHECK_OK(comm_allreduce_start(c, buf.dev, buf.dev, 16, COMM_FLOAT32, COMM_SUM, &req[k]));
            for (int k = 0; k < 3; k++) {
                int rk = comm_wait(req[k]);
                test_say("rank %d, request %d: %s", comm_rank(c), k + 2, err_msg());
                CHECK_EQ(rk, k == 0 ? ERR_TIMEOUT : ERR_PEER);
            }
        } else {
            if (mpi && joined) /* #2: rank 1 started it before it failed */
                CHECK_OK(comm_allreduce(c, buf.dev, buf.dev, 16, COMM_FLOAT32, COMM_SUM));
            rc = comm_allreduce(c, buf.dev, buf.dev, 16, COMM_FLOAT32, COMM_SUM);
        }
    } else if (strcmp(how, "other") == 0) {
        rc = comm_broadcast(c, buf.dev, 16, COMM_FLOAT32, 0);
    } else if (mpi && failed) {
        if (joined)
            CHECK_OK(comm_allreduce_start(c, buf.dev, buf.dev, 16, COMM_FLOAT32, COMM_SUM, &joined_req));
        for (int r = 0; in_flight && r < comm_world(c) - 1; r++) /* every other rank has posted both */
            CHECK(MPI_Recv(NULL, 0, MPI_CHAR, MPI_ANY_SOURCE, TEST_TAG_POSTED, MPI_COMM_WORLD, MPI_STATUS_IGNORE) ==
                  MPI_SUCCESS);
        if (start_failed) { /* the buffer is never touched: MPI's counts refuse it first */
            comm_set_activity(c, "reducing too many elements");
            rc = comm_allreduce(c, buf.dev, buf.dev, (size_t)INT_MAX + 1, COMM_FLOAT32, COMM_SUM);
            CHECK_EQ(rc, ERR_RANGE);
        } else {
            comm_set_activity(c, "saving a test file");
            rc = err_set(ERR_IO, "test.bin: disk full");
        }
        char own[512];
        snprintf(own, sizeof own, "%s", err_msg());
        rc = comm_abort(c, rc);
        CHECK_STR(err_msg(), own);
    } else if (mpi && strcmp(how, "stop-end") == 0) {
        rc = comm_allreduce(c, buf.dev, buf.dev, 16, COMM_FLOAT32, COMM_SUM);
        test_stop(); /* after its last collective: the others wait for it in comm_close */
    } else if (mpi && strcmp(how, "closed") != 0) {
        clock_sleep_ns(60000000000ull); /* in its own code: the others' watchdog ends the job long before */
    }
    if (rc < 0) {
        test_say("rank %d diagnosed: %s", comm_rank(c), err_msg());
        CHECK_EQ(rc, !failed ? ERR_TIMEOUT : comm_rank(c) != 1 ? ERR_PEER : start_failed ? ERR_RANGE : ERR_IO);
    }
    if (joined_req) /* rank 1's own request, after its failure: given up */
        CHECK_EQ(comm_wait(joined_req), ERR_PEER);
    tb_free(c, &buf);
    tb_free(c, &buf2);
    test_gave_up = mpi && (rc < 0 || gave_up); /* a collective may still be posted, its buffer freed */
    comm_close(c);
}

#endif
