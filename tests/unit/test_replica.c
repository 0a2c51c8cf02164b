/* test_replica: lib/ddp/replica finds the first tensor and element where a
 * replica drifted and blames the rank the majority disagrees with (rank 0
 * included; nobody with two ranks), every rank reporting the same; a damaged
 * copy of the check's own hashes is named as such, not taken for a drifted
 * replica; identical replicas pass; buffers are compared only when asked;
 * replica_flip changes the bit it says, and ranks flipped at one step differ
 * from each other, so they never outvote the healthy ones. Each rank's
 * model lives on a simulated device of its own (model_fixture.h); the test
 * changes and reads it through copies. */
#include "check.h"
#include "model_fixture.h"
#include "base/error.h"
#include "comm/comm.h"
#include "ddp/replica.h"
#include "sim/launch.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define DRIFT_MAX_WORLD 8

struct drift {
    int world;         /* 0: 3 */
    unsigned ranks;    /* bit r: rank r drifts */
    const char *what;  /* "fc2.weight" or a buffer name */
    size_t element;
    unsigned check;
    const char *faults; /* the simulator's, e.g. a flip in the check's own all-gather */
    uint64_t flip_step; /* > 0: the drifting ranks replica_flip() at this step, which labels the check */
    int rc[DRIFT_MAX_WORLD];
    char msg[DRIFT_MAX_WORLD][512];
};

static int drift_rank(struct launch_rank *ctx)
{
    struct drift *d = ctx->shared;
    struct comm_config cc;
    comm_config_default(&cc);
    cc.timeout_s = 5;
    comm_t *c;
    int rc = launch_comm_open(ctx, &cc, &c);
    if (rc < 0)
        return rc;
    struct model_spec s = {.inputs = 20, .classes = 4, .hidden = {9, 6}, .nhidden = 2, .batchnorm = 1};
    model_t *m;
    rc = fixture_model_create(&s, 4, &m);
    if (rc == 0) {
        rc = model_init(m, 3);
        if (rc == 0 && d->ranks >> ctx->rank & 1 && d->flip_step) {
            rc = replica_flip(m, d->flip_step, ctx->rank);
        } else if (rc == 0 && d->ranks >> ctx->rank & 1) {
            int p = model_param_find(m, d->what), b = model_buffer_find(m, d->what);
            enum model_part part = p >= 0 ? MODEL_PARAMS : MODEL_BUFFERS;
            size_t at = (p >= 0 ? model_param(m, p)->offset : model_buffer(m, b)->offset) + d->element;
            rc = fixture_set(m, part, at, fixture_get(m, part, at) + 1e-7f); /* one ulp or so */
        }
        if (rc == 0)
            rc = replica_check(c, m, d->flip_step ? d->flip_step : 5, d->check);
        d->rc[ctx->rank] = rc;
        snprintf(d->msg[ctx->rank], sizeof d->msg[0], "%s", err_msg());
        fixture_model_destroy(m);
    }
    comm_close(c);
    return rc;
}

static int drift_run(struct drift *d)
{
    struct launch_config lc = {.backend = "sim", .world = d->world ? d->world : 3, .faults = d->faults, .shared = d};
    return launch_run(&lc, drift_rank);
}

/* every rank of the run failed with the same message */
static void drift_all_agree(const struct drift *d)
{
    for (int r = 0; r < (d->world ? d->world : 3); r++) {
        CHECK_EQ(d->rc[r], ERR_STATE);
        CHECK_STR(d->msg[r], d->msg[0]);
    }
}

TEST(replica_identical_replicas_pass)
{
    struct drift d = {.check = REPLICA_PARAMS | REPLICA_BUFFERS};
    CHECK_OK(drift_run(&d));
}

TEST(replica_names_step_rank_tensor_and_element)
{
    struct drift d = {.ranks = 1u << 2, .what = "fc2.weight", .element = 16, .check = REPLICA_PARAMS};
    CHECK_ERR(drift_run(&d), ERR_STATE, "step 5: rank 2 differs from the other 2 ranks in fc2.weight[1,7]: ");
    CHECK_CONTAINS(d.msg[0], " on rank 2, ");
    CHECK_CONTAINS(d.msg[0], " on the others");
    drift_all_agree(&d);
}

/* rank 0 is a rank like the others: when it drifts, it is the one named */
TEST(replica_blames_rank_0_when_the_others_agree)
{
    struct drift d = {.ranks = 1u << 0, .what = "fc2.weight", .element = 16, .check = REPLICA_PARAMS};
    CHECK_ERR(drift_run(&d), ERR_STATE, "step 5: rank 0 differs from the other 2 ranks in fc2.weight[1,7]");
    drift_all_agree(&d);
    struct drift e = {.world = 8, .ranks = 1u << 0, .what = "fc1.bias", .element = 4, .check = REPLICA_PARAMS};
    CHECK_ERR(drift_run(&e), ERR_STATE, "step 5: rank 0 differs from the other 7 ranks in fc1.bias[4]");
    drift_all_agree(&e);
}

TEST(replica_two_ranks_cannot_say_which)
{
    struct drift d = {.world = 2, .ranks = 1u << 1, .what = "fc2.weight", .element = 16, .check = REPLICA_PARAMS};
    CHECK_ERR(drift_run(&d), ERR_STATE, "step 5: rank 0 and rank 1 hold different fc2.weight, first in "
                                        "fc2.weight[1,7]: ");
    CHECK_CONTAINS(d.msg[0], "with two ranks there is no majority to tell which one is wrong");
    drift_all_agree(&d);
}

TEST(replica_several_odd_ranks_are_listed)
{
    struct drift d = {.world = 5, .ranks = 1u << 1 | 1u << 3, .what = "fc2.weight", .element = 16,
                      .check = REPLICA_PARAMS};
    CHECK_ERR(drift_run(&d), ERR_STATE, "step 5: ranks 1 and 3 differ from the other 3 ranks in fc2.weight, rank 1 "
                                        "first in fc2.weight[1,7]");
    drift_all_agree(&d);
    /* 2 against 2: no copy has a majority */
    struct drift e = {.world = 4, .ranks = 1u << 1 | 1u << 3, .what = "fc2.weight", .element = 16,
                      .check = REPLICA_PARAMS};
    CHECK_ERR(drift_run(&e), ERR_STATE, "no copy of fc2.weight is shared by a majority of the 4 ranks");
    drift_all_agree(&e);
}

TEST(replica_buffers_only_when_asked)
{
    struct drift d = {.ranks = 1u << 1, .what = "bn2.running_var", .element = 3, .check = REPLICA_PARAMS};
    CHECK_OK(drift_run(&d));
    struct drift e = {.ranks = 1u << 1, .what = "bn2.running_var", .element = 3, .check = REPLICA_BUFFERS};
    CHECK_ERR(drift_run(&e), ERR_STATE, "rank 1 differs from the other 2 ranks in bn2.running_var[3]: ");
}

/* Collective #1 is the all-gather of the hashes: a bit flipped in what it
 * gave one rank must not send that rank to locate alone (which met the
 * others' next collective as a fingerprint mismatch); every rank names it. */
TEST(replica_damaged_hashes_name_the_rank_that_received_them)
{
    for (int r = 0; r < 3; r++) {
        char spec[32], want[160];
        snprintf(spec, sizeof spec, "flip:%d@1", r);
        struct drift d = {.check = REPLICA_PARAMS | REPLICA_BUFFERS, .faults = spec};
        snprintf(want, sizeof want, "step 5: rank %d received a copy of the replicas' hashes that differs from the "
                                    "one the other 2 ranks received", r);
        CHECK_ERR(drift_run(&d), ERR_STATE, want);
        drift_all_agree(&d);
    }
    struct drift d = {.world = 2, .check = REPLICA_PARAMS, .faults = "flip:1@1"};
    CHECK_ERR(drift_run(&d), ERR_STATE, "received different copies of the replicas' hashes");
    CHECK_CONTAINS(d.msg[0], "with two ranks there is no majority to tell which one is wrong");
    drift_all_agree(&d);
}

/* The flip: bit 22 of the output bias's element step % n, or bit 30 of a zero, and the rank in the lowest
 * bits (none on rank 0); and the check names that rank, tensor and element. */
TEST(replica_flip_changes_the_bit_that_matters)
{
    struct model_spec s = {.inputs = 20, .classes = 4, .hidden = {9, 6}, .nhidden = 2, .batchnorm = 1};
    model_t *m;
    CHECK_OK(fixture_model_create(&s, 4, &m));
    CHECK_OK(model_init(m, 3));
    const struct model_tensor *b = model_param(m, model_param_tensors(m) - 1);
    CHECK_STR(b->name, "fc3.bias");
    float *all;
    CHECK_OK(fixture_part(m, MODEL_PARAMS, &all));
    static const int ranks[] = {0, 1, 5, 63};
    for (uint64_t step = 1; step < 12; step++)
        for (size_t k = 0; k < sizeof ranks / sizeof ranks[0]; k++) {
            size_t e = step % b->numel;
            float before = fixture_get(m, MODEL_PARAMS, b->offset + e);
            CHECK_OK(replica_flip(m, step, ranks[k]));
            float after = fixture_get(m, MODEL_PARAMS, b->offset + e);
            uint32_t was, now;
            memcpy(&was, &before, 4);
            memcpy(&now, &after, 4);
            CHECK_MSG((was ^ now) == (1u << 22 | (uint32_t)ranks[k]), "step %llu, rank %d: bits %08x -> %08x",
                      (unsigned long long)step, ranks[k], was, now);
            double moved = fabs((double)after - before) / fabs((double)before);
            CHECK_MSG(moved >= 0.25 && moved <= 1.0, "step %llu: %g -> %g", (unsigned long long)step, before, after);
            CHECK_OK(fixture_set(m, MODEL_PARAMS, b->offset + e, before));
        }
    /* only that element moved: every other parameter is as it was */
    float *now;
    CHECK_OK(fixture_part(m, MODEL_PARAMS, &now));
    CHECK(memcmp(all, now, model_param_floats(m) * sizeof *all) == 0);
    CHECK_OK(fixture_set(m, MODEL_PARAMS, b->offset + 1, 0.0f));
    CHECK_OK(replica_flip(m, 1, 0));
    float zero_flipped = fixture_get(m, MODEL_PARAMS, b->offset + 1);
    CHECK_MSG(zero_flipped == 2.0f, "a zero flipped to %g, not 2", zero_flipped);
    free(all);
    free(now);
    fixture_model_destroy(m);
}

/* Ranks flipped at one step differ from each other, as independent faults do: with two of three flipped no
 * copy has a majority, and the healthy rank 0 is not blamed; with two of five both are named. */
TEST(replica_flips_of_two_ranks_at_one_step_do_not_agree)
{
    struct drift d = {.world = 3, .ranks = 1u << 1 | 1u << 2, .flip_step = 7, .check = REPLICA_PARAMS};
    CHECK_ERR(drift_run(&d), ERR_STATE, "no copy of fc3.bias is shared by a majority of the 3 ranks");
    drift_all_agree(&d);
    struct drift e = {.world = 5, .ranks = 1u << 1 | 1u << 3, .flip_step = 7, .check = REPLICA_PARAMS};
    CHECK_ERR(drift_run(&e), ERR_STATE, "step 7: ranks 1 and 3 differ from the other 3 ranks in fc3.bias, rank 1 "
                                        "first in fc3.bias[3]");
    drift_all_agree(&e);
}

TEST(replica_check_names_a_flip)
{
    for (int r = 0; r < 4; r += 3) {
        struct drift d = {.world = 4, .ranks = 1u << r, .flip_step = 7, .check = REPLICA_PARAMS};
        char want[96];
        snprintf(want, sizeof want, "step 7: rank %d differs from the other 3 ranks in fc3.bias[3]: ", r);
        CHECK_ERR(drift_run(&d), ERR_STATE, want);
        drift_all_agree(&d);
    }
}
