/* test_replica: lib/ddp/replica finds the first rank, tensor and element
 * where a replica drifted, and every rank reports the same; identical
 * replicas pass; buffers are compared only when asked. */
#include "check.h"
#include "base/error.h"
#include "comm/comm.h"
#include "ddp/replica.h"
#include "sim/launch.h"

#include <stdio.h>

struct drift {
    int rank;          /* the rank that drifts, -1 none */
    const char *what;  /* "fc2.weight" or a buffer name */
    size_t element;
    unsigned check;
    int rc[4];
    char msg[4][512];
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
    rc = model_create(&s, 4, &m);
    if (rc == 0) {
        model_init(m, 3);
        if (ctx->rank == d->rank) {
            int p = model_param_find(m, d->what), b = model_buffer_find(m, d->what);
            float *x = p >= 0 ? model_params(m) + model_param(m, p)->offset
                              : model_buffers(m) + model_buffer(m, b)->offset;
            x[d->element] += 1e-7f; /* one ulp or so */
        }
        rc = replica_check(c, m, 5, d->check);
        d->rc[ctx->rank] = rc;
        snprintf(d->msg[ctx->rank], sizeof d->msg[0], "%s", err_msg());
        model_destroy(m);
    }
    comm_close(c);
    return rc;
}

static int drift_run(struct drift *d)
{
    struct launch_config lc = {.backend = "sim", .world = 3, .shared = d};
    return launch_run(&lc, drift_rank);
}

TEST(replica_identical_replicas_pass)
{
    struct drift d = {.rank = -1, .check = REPLICA_PARAMS | REPLICA_BUFFERS};
    CHECK_OK(drift_run(&d));
}

TEST(replica_names_step_rank_tensor_and_element)
{
    struct drift d = {.rank = 2, .what = "fc2.weight", .element = 16, .check = REPLICA_PARAMS};
    CHECK_ERR(drift_run(&d), ERR_STATE, "step 5: rank 2's fc2.weight differs from rank 0's at element 16 (row 1, column 7)");
    for (int r = 0; r < 3; r++) { /* every rank says the same */
        CHECK_EQ(d.rc[r], ERR_STATE);
        CHECK_STR(d.msg[r], d.msg[0]);
    }
}

TEST(replica_buffers_only_when_asked)
{
    struct drift d = {.rank = 1, .what = "bn2.running_var", .element = 3, .check = REPLICA_PARAMS};
    CHECK_OK(drift_run(&d));
    struct drift e = {.rank = 1, .what = "bn2.running_var", .element = 3, .check = REPLICA_BUFFERS};
    CHECK_ERR(drift_run(&e), ERR_STATE, "rank 1's bn2.running_var differs from rank 0's at element 3: ");
}
