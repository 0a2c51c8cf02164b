/* test_partition: sim/partition.h passes a correct sampler and catches what
 * a broken one would do: a share given twice, a record given to no rank, an
 * index past the dataset, an order that never changes (set_epoch forgotten),
 * a token-budget batch split between ranks. */
#include "check.h"

#include "base/error.h"
#include "sim/partition.h"

#include <stdlib.h>
#include <string.h>

/* The verdict called `check` among v[0..n), or NULL. */
static const struct partition_verdict *find(const struct partition_verdict *v, int n, const char *check)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v[i].check, check) == 0)
            return &v[i];
    return NULL;
}

static int all_pass(const struct partition_verdict *v, int n)
{
    for (int i = 0; i < n; i++)
        if (v[i].ok == 0)
            return 0;
    return 1;
}

static partition_run_t distributed(uint64_t n, uint32_t world, int drop_last, int set_epoch)
{
    struct sampler_options o;
    sampler_options_default(&o);
    o.size = n;
    o.world = world;
    o.drop_last = drop_last;
    partition_run_t run;
    int rc = partition_run_distributed(&o, 3, set_epoch, &run);
    CHECK_OK(rc);
    return run;
}

TEST(a_correct_sampler_passes_every_check)
{
    for (int drop = 0; drop <= 1; drop++) {
        partition_run_t run = distributed(1003, 4, drop, 1);
        struct partition_verdict v[PARTITION_MAX_VERDICTS];
        for (uint64_t e = 0; e < 3; e++) {
            int n = partition_check_epoch(&run, e, v);
            CHECK(n >= 3);
            CHECK_MSG(all_pass(v, n), "epoch %llu, drop_last %d: a check failed", (unsigned long long)e, drop);
        }
        partition_run_free(&run);
    }
}

TEST(a_share_given_twice_fails_disjoint_and_coverage)
{
    partition_run_t run = distributed(1000, 4, 0, 1);
    struct partition_shard *sh = &run.shards[1 * 4 + 2]; /* epoch 1, rank 2 */
    sh->indices[5] = sh->indices[6];                    /* record indices[5] reaches nobody, indices[6] twice */
    struct partition_verdict v[PARTITION_MAX_VERDICTS];
    int n = partition_check_epoch(&run, 1, v);
    CHECK_EQ(find(v, n, "disjoint")->ok, 0);
    CHECK_EQ(find(v, n, "coverage")->ok, 0);
    CHECK_EQ(find(v, n, "equal counts")->ok, 1);
    CHECK(all_pass(v, partition_check_epoch(&run, 0, v)));
    sh->indices[5] = 1000;
    CHECK_ERR(partition_check_epoch(&run, 1, v), ERR_RANGE, "rank 2 was given index 1000 (position 5)");
    partition_run_free(&run);
}

TEST(a_forgotten_set_epoch_fails_new_order)
{
    partition_run_t run = distributed(500, 2, 0, 0);
    struct partition_verdict v[PARTITION_MAX_VERDICTS];
    int n = partition_check_epoch(&run, 2, v);
    CHECK_EQ(find(v, n, "new order")->ok, 0);
    CHECK_CONTAINS(find(v, n, "new order")->detail, "0 of 500 positions differ");
    partition_run_free(&run);
}

TEST(token_budget_batches_pass_and_a_split_batch_fails)
{
    struct dataset_options d;
    dataset_options_default(&d);
    d.synthetic_records = 700;
    d.synthetic_min_bytes = 16;
    d.synthetic_bytes = 900;
    dataset_t *ds;
    CHECK_OK(dataset_open("synthetic", &d, &ds));
    struct batch_dynamic_options o;
    batch_dynamic_options_default(&o);
    o.world = 3;
    o.max_token_length = 1000;
    o.budget = 4096;
    partition_run_t run;
    CHECK_OK(partition_run_dynamic(ds, &o, 2, 1, &run));
    struct partition_verdict v[PARTITION_MAX_VERDICTS];
    int n = partition_check_epoch(&run, 1, v);
    CHECK(all_pass(v, n));
    CHECK_OK(partition_check_resume(&run, v));
    CHECK_EQ(v[0].ok, 1);
    /* rank 1's first record also appears in rank 0's first batch: no longer a clean copy */
    struct partition_shard *r0 = &run.shards[1 * 3 + 0], *r1 = &run.shards[1 * 3 + 1];
    r0->indices[0] = r1->indices[0];
    n = partition_check_epoch(&run, 1, v);
    CHECK_EQ(find(v, n, "disjoint")->ok, 0);
    partition_run_free(&run);
    dataset_close(ds);
}
