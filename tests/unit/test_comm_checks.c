/* test_comm_checks: the cross-rank checks (lib/comm/comm_checks.c): the
 * verdicts over every rank's fingerprint or checksum (who differs, by
 * majority), and the process backends' side with a scripted all-gather
 * standing in for MPI or NCCL: what each rank "received" is set by the test,
 * so every mismatch can be staged without running a job. */
#include "check.h"
#include "comm/comm_checks.h"
#include "base/error.h"

#include <stdio.h>
#include <string.h>

static const struct comm_backend_ops fake_ops = {.name = "fake"};

/* What the scripted exchange hands back, per rank, and what it saw. */
static struct comm_fingerprint fake_fps[3];
static uint64_t fake_sums[3];

static int fake_exchange(comm_t *c, const void *mine, void *all, size_t bytes, const struct comm_coll_desc *d,
                         const char *phase)
{
    (void)d, (void)phase;
    if (bytes == sizeof(struct comm_fingerprint))
        memcpy(fake_fps + c->rank, mine, bytes), memcpy(all, fake_fps, sizeof fake_fps);
    else
        memcpy(fake_sums + c->rank, mine, bytes), memcpy(all, fake_sums, sizeof fake_sums);
    return 0;
}

static int failing_exchange(comm_t *c, const void *mine, void *all, size_t bytes, const struct comm_coll_desc *d,
                            const char *phase)
{
    (void)mine, (void)all, (void)bytes, (void)d;
    return err_set(ERR_TIMEOUT, "rank %d timed out in%s", c->rank, phase);
}

static comm_t fake_comm(int rank)
{
    comm_t c;
    memset(&c, 0, sizeof c);
    c.ops = &fake_ops;
    c.rank = rank;
    c.world = 3;
    return c;
}

static const struct comm_coll_desc allreduce7 = {.seq = 7, .coll = COMM_ALLREDUCE, .op = COMM_SUM,
                                                 .dtype = COMM_FLOAT32, .count = 1024, .root = -1};

TEST(comm_checks_fingerprints_agree)
{
    comm_t c = fake_comm(1);
    for (int r = 0; r < 3; r++)
        comm_fingerprint_of(&allreduce7, &fake_fps[r]);
    CHECK_OK(comm_checks_fingerprint(&c, &allreduce7, fake_exchange));
}

TEST(comm_checks_fingerprint_mismatch_names_both_ranks)
{
    comm_t c = fake_comm(0);
    struct comm_coll_desc bcast = allreduce7;
    bcast.coll = COMM_BROADCAST, bcast.root = 0, bcast.count = 2048;
    comm_fingerprint_of(&allreduce7, &fake_fps[1]);
    comm_fingerprint_of(&bcast, &fake_fps[2]);
    CHECK_ERR(comm_checks_fingerprint(&c, &allreduce7, fake_exchange), ERR_STATE, "fake: rank 0: fingerprint mismatch");
    CHECK_CONTAINS(err_msg(), "rank 2 called #7 broadcast");
    CHECK_CONTAINS(err_msg(), "differs: collective, count, root");
}

TEST(comm_checks_result_sizes)
{
    size_t bytes = 0;
    CHECK(comm_checks_result_bytes(&allreduce7, 3, &bytes));
    CHECK_EQ(bytes, 4096);
    struct comm_coll_desc d = allreduce7;
    d.coll = COMM_ALLGATHER;
    CHECK(comm_checks_result_bytes(&d, 3, &bytes));
    CHECK_EQ(bytes, 3 * 4096);
    d.coll = COMM_REDUCE_SCATTER; /* each rank holds a different block */
    CHECK(!comm_checks_result_bytes(&d, 3, &bytes));
    d.coll = COMM_BARRIER;
    CHECK(!comm_checks_result_bytes(&d, 3, &bytes));
}

TEST(comm_checks_results_name_the_rank_that_differs)
{
    comm_t c = fake_comm(1);
    fake_sums[0] = 0x1111, fake_sums[2] = 0x2222;
    CHECK_ERR(comm_checks_results(&c, &allreduce7, 0x1111, fake_exchange), ERR_STATE,
              "fake: rank 1: result check: after collective #7 (allreduce sum, 1024 x float32), rank 2's result "
              "differs from the other 2 ranks', which agree (checksum 0000000000002222 vs 0000000000001111)");
    fake_sums[2] = 0x1111;
    CHECK_OK(comm_checks_results(&c, &allreduce7, 0x1111, fake_exchange));
}

TEST(comm_checks_pass_on_exchange_errors)
{
    comm_t c = fake_comm(2);
    CHECK_ERR(comm_checks_fingerprint(&c, &allreduce7, failing_exchange), ERR_TIMEOUT,
              "rank 2 timed out in (the fingerprint check)");
    CHECK_ERR(comm_checks_results(&c, &allreduce7, 1, failing_exchange), ERR_TIMEOUT, "(the result check)");
}

/* ---- the verdicts ------------------------------------------------------------ */

/* Rank 0 is no more right than any other: the majority names the odd one,
 * wherever it is, and without a majority the message says nobody can be
 * named. */
TEST(comm_checks_results_vote_by_majority)
{
    uint64_t sums[8] = {7, 5, 5, 5, 5, 5, 5, 5};
    CHECK_ERR(comm_checks_compare_results(&allreduce7, sums, 8, NULL, NULL), ERR_STATE,
              "rank 0's result differs from the other 7 ranks', which agree (checksum 0000000000000007 vs "
              "0000000000000005)");
    sums[0] = 5, sums[3] = 7, sums[6] = 9;
    CHECK_ERR(comm_checks_compare_results(&allreduce7, sums, 8, NULL, NULL), ERR_STATE,
              "ranks 3 and 6 hold results that differ from the one the other 6 ranks agree on (rank 3: checksum "
              "0000000000000007 vs 0000000000000005)");
    uint64_t many[19]; /* nine odd ranks: eight are named, the rest counted */
    for (int r = 0; r < 19; r++)
        many[r] = r < 10 ? 5 : (uint64_t)r;
    CHECK_ERR(comm_checks_compare_results(&allreduce7, many, 19, NULL, NULL), ERR_STATE,
              "ranks 10, 11, 12, 13, 14, 15, 16, 17 and 1 more hold results");
    uint64_t two[2] = {5, 7};
    CHECK_ERR(comm_checks_compare_results(&allreduce7, two, 2, NULL, NULL), ERR_STATE,
              "rank 1's result differs from rank 0's (checksum 0000000000000007 vs 0000000000000005): the ranks no "
              "longer hold the same values; with two ranks there is no majority to tell which one is wrong");
    uint64_t split[4] = {5, 7, 7, 5};
    CHECK_ERR(comm_checks_compare_results(&allreduce7, split, 4, NULL, NULL), ERR_STATE,
              "no result is shared by a majority of the 4 ranks");
    uint64_t same[3] = {5, 5, 5};
    CHECK_OK(comm_checks_compare_results(&allreduce7, same, 3, NULL, NULL));
}

static void detail_stub(const void *ctx, int odd, int ref, char *buf, size_t len)
{
    snprintf(buf, len, "%s: odd %d, ref %d", (const char *)ctx, odd, ref);
}

TEST(comm_checks_results_carry_the_detail)
{
    uint64_t sums[3] = {5, 5, 9};
    CHECK_ERR(comm_checks_compare_results(&allreduce7, sums, 3, detail_stub, "here"), ERR_STATE,
              "(checksum 0000000000000009 vs 0000000000000005; here: odd 2, ref 0)");
}

TEST(comm_checks_fingerprints_vote_by_majority)
{
    struct comm_coll_desc bcast = allreduce7, small = allreduce7;
    bcast.coll = COMM_BROADCAST, bcast.root = 0;
    small.count = 1000;
    struct comm_fingerprint fps[5];
    for (int r = 0; r < 5; r++)
        comm_fingerprint_of(&allreduce7, &fps[r]);
    CHECK_OK(comm_checks_compare_fingerprints(fps, 5));
    comm_fingerprint_of(&small, &fps[0]);
    CHECK_ERR(comm_checks_compare_fingerprints(fps, 5), ERR_STATE,
              "fingerprint mismatch before collective #7: rank 0 called #7 allreduce sum 1000 x float32, the other 4 "
              "ranks called #7 allreduce sum 1024 x float32 (differs: count)");
    comm_fingerprint_of(&bcast, &fps[3]);
    CHECK_ERR(comm_checks_compare_fingerprints(fps, 5), ERR_STATE,
              "ranks 0 and 3 called something else than the other 3 ranks, which called #7 allreduce sum 1024 x "
              "float32; rank 0 called #7 allreduce sum 1000 x float32 (differs: count)");
    comm_fingerprint_of(&bcast, &fps[1]);
    CHECK_ERR(comm_checks_compare_fingerprints(fps, 5), ERR_STATE,
              "no call is shared by a majority of the 5 ranks, so none can be called the wrong one");
    CHECK_ERR(comm_checks_compare_fingerprints(fps, 2), ERR_STATE,
              "rank 0 called #7 allreduce sum 1000 x float32, rank 1 called #7 broadcast 1024 x float32 root 0 "
              "(differs: collective, count, root); with two ranks there is no majority");
}
