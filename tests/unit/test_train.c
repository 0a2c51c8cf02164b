/* test_train: what the training loop (lib/ddp/train.c) tells the other ranks
 * when one rank fails in its own code: the phase it was in, as every rank
 * hears it (comm_abort, lib/comm/comm.h), on rank threads (sim/launch.h).
 *
 * A custom sampler (train_config.indices) gives rank 1, in the second epoch,
 * an index past the dataset's end: the loader refuses it when the epoch
 * starts, and the failure must be named "starting epoch 2", not the first
 * epoch's evaluation, which had ended. (A failure inside a step, and its
 * number, 1-based as --fault's, is tests/programs/chapter6.sh's: a label
 * out of range.)
 */
#include "check.h"

#include "base/error.h"
#include "dataset/dataset.h"
#include "ddp/train.h"
#include "sim/launch.h"

#include <stdlib.h>
#include <string.h>

#define TRAIN_RECORDS 256 /* two ranks of 128: four batches of 32 each, per epoch */

/* Rank r's indices r, r + W, ...; rank 1's first index of the second epoch
 * is past the end. */
static int train_bad_indices(void *user, int rank, int world, uint64_t epoch, uint64_t records, uint64_t **out,
                             uint64_t *count)
{
    (void)user;
    *count = records / (uint64_t)world;
    if (!(*out = malloc(*count * sizeof **out)))
        return err_set(ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < *count; i++)
        (*out)[i] = (uint64_t)rank + i * (uint64_t)world;
    if (rank == 1 && epoch == 1)
        (*out)[0] = records + 7;
    return 0;
}

static int train_phase_rank(struct launch_rank *lr)
{
    const struct train_config *c = lr->shared;
    comm_t *comm;
    int rc = launch_comm_open(lr, NULL, &comm);
    if (rc < 0)
        return rc;
    struct train_result res;
    rc = train_rank(c, comm, NULL, &res);
    timeline_all_free(res.timeline);
    comm_close(comm);
    return rc;
}

TEST(a_failure_at_an_epoch_start_names_that_epoch)
{
    struct dataset_options o;
    dataset_options_default(&o);
    o.synthetic_records = TRAIN_RECORDS;
    dataset_t *ds;
    CHECK_OK(dataset_open("synthetic", &o, &ds));
    struct train_config c;
    train_config_default(&c);
    c.train_set = ds;
    c.batch = 32;
    c.epochs = 2;
    c.workers = 0;
    c.check = 1;
    c.indices = train_bad_indices;
    struct launch_config lc = {.backend = "sim", .world = 2, .shared = &c};
    CHECK(launch_run(&lc, train_phase_rank) < 0);
    CHECK_STR(err_msg(), "rank 1 failed while starting epoch 2: epoch 1: index 263 at position 0 is past the end of "
                         "synthetic:256 (256 records)");
    dataset_close(ds);
}
