/* test_reducer: lib/ddp/reducer on simulated rank threads. Open broadcasts
 * rank 0's replica and names a rank whose model differs; buckets are
 * PyTorch's (the expected assignments below were printed by torch 1.13's
 * dist._compute_bucket_assignment_by_size for the same sizes); a bucket
 * starts when its last gradient is ready, in bucket order whatever order
 * each rank marks in; the average is the correctly rounded sum / W on every
 * rank; no_sync, the rebuild from rank 0's ready order, compression,
 * broadcast_buffers, layouts, and the errors. Each rank's model lives on a
 * simulated device of its own (model_fixture.h), as in chapter 6; the test
 * writes and reads its gradients, parameters and buffers through copies. */
#include "check.h"
#include "model_fixture.h"
#include "base/error.h"
#include "comm/comm.h"
#include "ddp/reducer.h"
#include "ddp/replica.h"
#include "ddp/optim.h"
#include "sim/launch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* 20-9-6-4: fc1.weight 720 B, fc1.bias 36, fc2.weight 216, fc2.bias 24,
 * fc3.weight 96, fc3.bias 16. With limits 256 and 512 bytes torch gives
 * initial [[0], [1, 2, 3, 4, 5]], reversed to buckets {1..5}, {0}; rebuilt
 * from the ready order 5..0: [[5, 4, 3, 2], [1, 0]]. */
#define SMALL_FIRST 256
#define SMALL_CAP 512

struct job;
typedef int (*body_fn)(struct job *j, int rank, comm_t *c, model_t *m, reducer_t *r);

struct job {
    struct reducer_config cfg;
    int batchnorm;
    int hidden_of_rank[8]; /* 0: 9 */
    body_fn body;
    char layout[8][REDUCER_LAYOUT_MAX];
    float out[8][4];
    int rc[8];
};

static int job_rank(struct launch_rank *ctx)
{
    struct job *j = ctx->shared;
    struct comm_config cc;
    comm_config_default(&cc);
    cc.timeout_s = 5;
    comm_t *c;
    int rc = launch_comm_open(ctx, &cc, &c);
    if (rc < 0)
        return rc;
    int h = j->hidden_of_rank[ctx->rank] ? j->hidden_of_rank[ctx->rank] : 9;
    struct model_spec s = {.inputs = 20, .classes = 4, .hidden = {h, 6}, .nhidden = 2, .batchnorm = j->batchnorm};
    model_t *m;
    reducer_t *r = NULL;
    rc = fixture_model_create(&s, 8, &m);
    if (rc == 0)
        rc = model_init(m, 100 + (uint64_t)ctx->rank); /* every rank different: open must fix that */
    if (rc == 0)
        rc = reducer_open(&j->cfg, c, m, &r);
    if (rc == 0 && j->body)
        rc = j->body(j, ctx->rank, c, m, r);
    if (r)
        reducer_layout_describe(r, j->layout[ctx->rank], sizeof j->layout[0]);
    j->rc[ctx->rank] = rc;
    reducer_close(r);
    fixture_model_destroy(m);
    comm_close(c);
    return rc;
}

/* Runs the job on W ranks; returns the first failure (err_msg() set). */
static int job_run(struct job *j, int W)
{
    struct launch_config lc = {.backend = "sim", .world = W, .shared = j};
    return launch_run(&lc, job_rank);
}

static void small_caps(struct job *j)
{
    reducer_config_default(&j->cfg);
    j->cfg.first_bucket_bytes = SMALL_FIRST;
    j->cfg.bucket_cap_bytes = SMALL_CAP;
}

/* ---- open --------------------------------------------------------------------------- */

static int body_params_of_rank0(struct job *j, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)c;
    (void)r;
    struct model_spec s = *model_get_spec(m);
    model_t *zero;
    int rc = fixture_model_create(&s, 8, &zero);
    if (rc < 0)
        return rc;
    int same = model_init(zero, 100);
    if (same == 0)
        same = fixture_same(zero, m, MODEL_PARAMS);
    rc = same < 0 ? same : same ? 0 : err_set(ERR_STATE, "rank %d's parameters are not rank 0's after open", rank);
    fixture_model_destroy(zero);
    j->out[rank][0] = fixture_get(m, MODEL_PARAMS, 0);
    return rc;
}

TEST(reducer_open_broadcasts_rank_0s_parameters)
{
    struct job j = {.body = body_params_of_rank0};
    reducer_config_default(&j.cfg);
    CHECK_OK(job_run(&j, 3));
    /* the default caps: the whole 940 KB MLP would be one bucket, and so is this one */
    CHECK_STR(j.layout[1], "initial: fc1.weight fc1.bias fc2.weight fc2.bias fc3.weight fc3.bias");
}

TEST(reducer_open_names_the_rank_and_parameter_that_differ)
{
    struct job j = {.hidden_of_rank = {0, 0, 10}};
    reducer_config_default(&j.cfg);
    CHECK_ERR(job_run(&j, 3), ERR_STATE, "parameter 0 differs: rank 2 has fc1.weight [10, 20], rank 0 has fc1.weight [9, 20]");
    for (int r = 0; r < 3; r++) /* every rank fails alike: none walks on into a broadcast */
        CHECK_EQ(j.rc[r], ERR_STATE);
    struct job k = {.hidden_of_rank = {0, 9}};
    reducer_config_default(&k.cfg);
    CHECK_OK(job_run(&k, 2));
}

/* ---- buckets ----------------------------------------------------------------------------- */

TEST(reducer_buckets_are_pytorchs_and_rebuilt_once_in_ready_order)
{
    struct job j = {0};
    small_caps(&j);
    CHECK_OK(job_run(&j, 1));
    CHECK_STR(j.layout[0], "initial: fc1.bias fc2.weight fc2.bias fc3.weight fc3.bias | fc1.weight");
}

/* Writes gradient value g(rank, parameter, i) = small integers. */
static float grad_value(int rank, int p, size_t i) { return (float)((int)((i * 7 + (size_t)p * 3 + (size_t)rank * 5) % 23) - 11); }

/* The largest parameter of the models here (fc1.weight of 20-10-6-4), in floats. */
#define MAX_NUMEL 200

static int fill_grads(model_t *m, int rank)
{
    int rc = 0;
    for (int p = 0; rc == 0 && p < model_param_tensors(m); p++) {
        float g[MAX_NUMEL];
        for (size_t i = 0; i < model_param(m, p)->numel; i++)
            g[i] = grad_value(rank, p, i);
        rc = fixture_write_grad(m, p, g);
    }
    return rc;
}

/* Checks every gradient element is (sum over ranks) / W, rounded once. */
static int check_average(model_t *m, int rank, int W)
{
    for (int p = 0; p < model_param_tensors(m); p++) {
        float g[MAX_NUMEL];
        int rc = fixture_read_grad(m, p, g);
        if (rc < 0)
            return rc;
        for (size_t i = 0; i < model_param(m, p)->numel; i++) {
            int sum = 0;
            for (int q = 0; q < W; q++)
                sum += (int)grad_value(q, p, i);
            float want = (float)sum / (float)W;
            if (g[i] != want)
                return err_set(ERR_STATE, "rank %d: %s[%zu] is %.9g, want %d / %d = %.9g", rank,
                               model_param(m, p)->name, i, g[i], sum, W, want);
        }
    }
    return 0;
}

/* One iteration of marking; rank 1 marks in definition order, the others in reverse. */
static int mark_all(reducer_t *r, model_t *m, int rank)
{
    int n = model_param_tensors(m), rc = reducer_prepare_backward(r);
    for (int k = 0; rc == 0 && k < n; k++)
        rc = reducer_mark_ready(r, rank == 1 ? k : n - 1 - k);
    return rc;
}

static int body_average(struct job *j, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)j;
    int W = comm_world(c), rc = 0;
    for (int it = 0; rc == 0 && it < 3; it++) {
        if ((rc = reducer_prepare_forward(r, 1)) < 0 || (rc = fill_grads(m, rank)) < 0)
            break;
        if ((rc = mark_all(r, m, rank)) == 0 && (rc = reducer_finish(r)) == 0)
            rc = check_average(m, rank, W);
        if (rc == 0 && reducer_in_flight(r) != 0)
            rc = err_set(ERR_STATE, "all-reduces still in flight after finish");
    }
    return rc;
}

TEST(reducer_average_is_the_sum_divided_once_on_every_rank)
{
    for (int W = 1; W <= 4; W++) { /* 3: 1/3 is inexact, the division rounds */
        struct job j = {.body = body_average};
        small_caps(&j);
        CHECK_OK(job_run(&j, W));
        /* rank 0 marked in reverse: the rebuild keeps torch's assignment for that order */
        for (int r = 0; r < W; r++)
            CHECK_STR(j.layout[r], "rebuilt: fc3.bias fc3.weight fc2.bias fc2.weight | fc1.bias fc1.weight");
    }
}

static int body_rebuild_from_rank0(struct job *j, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)j;
    (void)c;
    /* rank 0 marks in a custom order; the others in reverse: all take rank 0's */
    const int custom[] = {4, 5, 2, 3, 0, 1};
    int rc = reducer_prepare_forward(r, 1), n = model_param_tensors(m);
    if (rc == 0)
        rc = reducer_prepare_backward(r);
    for (int k = 0; rc == 0 && k < n; k++)
        rc = reducer_mark_ready(r, rank == 0 ? custom[k] : n - 1 - k);
    if (rc == 0)
        rc = reducer_finish(r);
    if (rc == 0)
        rc = reducer_prepare_forward(r, 1);
    return rc;
}

TEST(reducer_rebuild_takes_rank_0s_ready_order)
{
    struct job j = {.body = body_rebuild_from_rank0};
    small_caps(&j);
    CHECK_OK(job_run(&j, 3));
    /* torch for the order 4 5 2 3 0 1: [[4, 5, 2], [3, 0], [1]] (fc3.weight 96 B, fc3.bias 112,
     * fc2.weight 328 >= 256 closes; fc2.bias 24, fc1.weight 744 >= 512 closes; fc1.bias alone) */
    for (int r = 0; r < 3; r++)
        CHECK_STR(j.layout[r], "rebuilt: fc3.weight fc3.bias fc2.weight | fc2.bias fc1.weight | fc1.bias");
}

/* ---- overlap: when buckets start ------------------------------------------------------- */

static int body_launch_timing(struct job *j, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)j;
    (void)m;
    /* initial buckets: {1..5} then {0}; mark 5 4 3 2 1 then 0 */
    int rc = reducer_prepare_backward(r);
    uint64_t seq0 = comm_next_seq(c);
    for (int p = 5; rc == 0 && p >= 2; p--)
        rc = reducer_mark_ready(r, p);
    if (rc == 0 && comm_next_seq(c) != seq0)
        rc = err_set(ERR_STATE, "rank %d: a bucket started before its last gradient (fc1.bias) was ready", rank);
    if (rc == 0)
        rc = reducer_mark_ready(r, 1);
    if (rc == 0 && comm_next_seq(c) != seq0 + 1)
        rc = err_set(ERR_STATE, "rank %d: bucket 0 did not start as soon as it was full", rank);
    if (rc == 0 && reducer_in_flight(r) != 1)
        rc = err_set(ERR_STATE, "rank %d: %d all-reduces in flight, expected 1", rank, reducer_in_flight(r));
    if (rc == 0)
        rc = reducer_mark_ready(r, 0);
    if (rc == 0 && comm_next_seq(c) != seq0 + 2)
        rc = err_set(ERR_STATE, "rank %d: the last bucket did not start", rank);
    if (rc == 0)
        rc = reducer_finish(r);
    return rc;
}

TEST(reducer_starts_a_bucket_when_its_last_gradient_is_ready)
{
    struct job j = {.body = body_launch_timing};
    small_caps(&j);
    CHECK_OK(job_run(&j, 2));
}

static int body_waits_its_turn(struct job *j, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)j;
    (void)m;
    /* bucket 1 ({fc1.weight}) is full first: it must wait for bucket 0 */
    int rc = reducer_prepare_backward(r);
    uint64_t seq0 = comm_next_seq(c);
    if (rc == 0)
        rc = reducer_mark_ready(r, 0);
    if (rc == 0 && comm_next_seq(c) != seq0)
        rc = err_set(ERR_STATE, "rank %d: bucket 1 started before bucket 0", rank);
    for (int p = 1; rc == 0 && p <= 5; p++)
        rc = reducer_mark_ready(r, p);
    if (rc == 0 && comm_next_seq(c) != seq0 + 2)
        rc = err_set(ERR_STATE, "rank %d: both buckets should have started once bucket 0 filled", rank);
    if (rc == 0) {
        struct reducer_bucket_info b0, b1;
        reducer_bucket_info(r, 0, &b0);
        reducer_bucket_info(r, 1, &b1);
        if (b0.seq != seq0 || b1.seq != seq0 + 1)
            rc = err_set(ERR_STATE, "rank %d: buckets started as collectives #%llu and #%llu", rank,
                         (unsigned long long)b0.seq, (unsigned long long)b1.seq);
    }
    if (rc == 0)
        rc = reducer_finish(r);
    return rc;
}

TEST(reducer_starts_buckets_in_bucket_order)
{
    struct job j = {.body = body_waits_its_turn};
    small_caps(&j);
    CHECK_OK(job_run(&j, 2));
}

/* ---- errors ------------------------------------------------------------------------------ */

static int body_double_mark(struct job *j, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)j;
    (void)rank;
    (void)c;
    (void)m;
    int rc = reducer_prepare_backward(r);
    if (rc == 0)
        rc = reducer_mark_ready(r, 3);
    if (rc == 0)
        rc = reducer_mark_ready(r, 3);
    return rc;
}

TEST(reducer_refuses_a_gradient_marked_twice)
{
    struct job j = {.body = body_double_mark};
    small_caps(&j);
    CHECK_ERR(job_run(&j, 1), ERR_STATE, "fc2.bias was marked ready twice in this backward");
}

static int body_missing(struct job *j, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)j;
    (void)rank;
    (void)c;
    (void)m;
    int rc = reducer_prepare_backward(r);
    for (int p = 5; rc == 0 && p >= 0; p--)
        if (p != 1) /* fc1.bias never ready: bucket 0 never starts, nor bucket 1 after it */
            rc = reducer_mark_ready(r, p);
    if (rc == 0)
        rc = reducer_finish(r);
    if (reducer_in_flight(r) != 0)
        return err_set(ERR_STATE, "left all-reduces in flight");
    return rc;
}

TEST(reducer_names_gradients_that_never_became_ready)
{
    struct job j = {.body = body_missing};
    small_caps(&j);
    CHECK_ERR(job_run(&j, 2), ERR_STATE, "2 of 2 buckets never started: no gradient was marked ready for fc1.bias");
}

/* ---- no_sync ------------------------------------------------------------------------------ */

static int body_no_sync(struct job *j, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)j;
    int W = comm_world(c);
    reducer_set_sync(r, 0);
    uint64_t seq0 = comm_next_seq(c);
    int rc = fill_grads(m, rank);
    if (rc == 0)
        rc = mark_all(r, m, rank);
    if (rc == 0)
        rc = reducer_finish(r);
    if (rc == 0 && comm_next_seq(c) != seq0)
        rc = err_set(ERR_STATE, "rank %d: no_sync communicated", rank);
    if (rc == 0 && fixture_get(m, MODEL_GRADS, model_grad_offset(m, 2) + 5) != grad_value(rank, 2, 5))
        rc = err_set(ERR_STATE, "rank %d: no_sync changed a gradient", rank);
    /* then a synchronised one reduces what accumulated */
    reducer_set_sync(r, 1);
    if (rc == 0 && (rc = mark_all(r, m, rank)) == 0 && (rc = reducer_finish(r)) == 0)
        rc = check_average(m, rank, W);
    return rc;
}

TEST(reducer_no_sync_does_not_communicate)
{
    struct job j = {.body = body_no_sync};
    small_caps(&j);
    CHECK_OK(job_run(&j, 3));
}

/* ---- compression ----------------------------------------------------------------------------- */

static int body_compressed(struct job *j, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    int W = comm_world(c);
    int rc = fill_grads(m, rank);
    if (rc == 0)
        rc = mark_all(r, m, rank);
    if (rc == 0)
        rc = reducer_finish(r);
    /* small integers / W: within 16-bit rounding of the exact average */
    double tol = j->cfg.compress == REDUCER_COMPRESS_FP16 ? 2e-3 : 1.6e-2;
    for (int p = 0; rc == 0 && p < model_param_tensors(m); p++) {
        float g[MAX_NUMEL];
        rc = fixture_read_grad(m, p, g);
        for (size_t i = 0; rc == 0 && i < model_param(m, p)->numel; i++) {
            double sum = 0;
            for (int q = 0; q < W; q++)
                sum += grad_value(q, p, i);
            if (fabs(g[i] - sum / W) > tol * (fabs(sum / W) + 1))
                rc = err_set(ERR_STATE, "%s[%zu] is %g, average %g", model_param(m, p)->name, i, g[i], sum / W);
        }
    }
    struct reducer_stats st = reducer_get_stats(r);
    if (rc == 0 && (st.bytes_saved != model_param_floats(m) * 2 || st.bytes_reduced != model_param_floats(m) * 2))
        rc = err_set(ERR_STATE, "compression saved %llu bytes of %zu", (unsigned long long)st.bytes_saved,
                     model_param_floats(m) * 4);
    j->out[rank][0] = fixture_get(m, MODEL_GRADS, model_grad_offset(m, 0) + 17);
    return rc;
}

TEST(reducer_compression_halves_the_bytes)
{
    enum reducer_compress kinds[] = {REDUCER_COMPRESS_FP16, REDUCER_COMPRESS_BF16};
    for (int k = 0; k < 2; k++) {
        struct job j = {.body = body_compressed};
        small_caps(&j);
        j.cfg.compress = kinds[k];
        CHECK_OK(job_run(&j, 3));
        CHECK(j.out[0][0] == j.out[1][0] && j.out[1][0] == j.out[2][0]);
    }
    enum reducer_compress c;
    CHECK_OK(reducer_compress_parse("--compress", "bf16", &c));
    CHECK_EQ(c, REDUCER_COMPRESS_BF16);
    CHECK_ERR(reducer_compress_parse("--compress", "int8", &c), ERR_ARG, "none, fp16, bf16");
}

/* ---- buffers -------------------------------------------------------------------------------- */

static int body_buffers(struct job *j, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)c;
    float b[64];
    for (size_t i = 0; i < model_buffer_floats(m); i++)
        b[i] = (float)(rank * 1000 + (int)i);
    int rc = model_write(m, MODEL_BUFFERS, 0, model_buffer_floats(m), b);
    if (rc == 0)
        rc = reducer_prepare_forward(r, 0);
    j->out[rank][0] = fixture_get(m, MODEL_BUFFERS, 7);
    return rc;
}

TEST(reducer_broadcasts_rank_0s_buffers_before_forward)
{
    struct job j = {.body = body_buffers, .batchnorm = 1};
    reducer_config_default(&j.cfg);
    CHECK_OK(job_run(&j, 3));
    for (int r = 0; r < 3; r++)
        CHECK(j.out[r][0] == 7.0f);
    struct job k = {.body = body_buffers, .batchnorm = 1};
    reducer_config_default(&k.cfg);
    k.cfg.broadcast_buffers = 0;
    CHECK_OK(job_run(&k, 3));
    CHECK(k.out[2][0] == 2007.0f);
}

/* ---- layouts ------------------------------------------------------------------------------- */

static int body_layout(struct job *j, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)j;
    (void)rank;
    (void)c;
    int rc = reducer_layout_restore(r, "rebuilt: fc3.bias | fc3.weight fc2.bias fc2.weight fc1.bias fc1.weight");
    if (rc == 0 && (reducer_bucket_count(r) != 2 || model_grad_offset(m, 5) != 0))
        rc = err_set(ERR_STATE, "the restored layout is not in place");
    if (rc == 0 && reducer_layout_restore(r, "rebuilt: fc3.bias | fc3.weight") != ERR_FORMAT)
        rc = err_set(ERR_STATE, "a layout missing parameters was accepted");
    if (rc == 0 && reducer_layout_restore(r, "rebuilt: fc3.bias fc3.bias fc3.weight fc2.bias fc2.weight fc1.bias "
                                             "fc1.weight") != ERR_FORMAT)
        rc = err_set(ERR_STATE, "a layout with a parameter twice was accepted");
    if (rc == 0 && reducer_layout_restore(r, "rebuilt: conv1.weight") != ERR_FORMAT)
        rc = err_set(ERR_STATE, "a foreign parameter was accepted");
    if (rc == 0 && reducer_layout_restore(r, "mine: fc1.weight") != ERR_FORMAT)
        rc = err_set(ERR_STATE, "a layout without its kind was accepted");
    return rc;
}

TEST(reducer_layouts_are_described_and_restored)
{
    struct job j = {.body = body_layout};
    small_caps(&j);
    CHECK_OK(job_run(&j, 1));
    CHECK_STR(j.layout[0], "rebuilt: fc3.bias | fc3.weight fc2.bias fc2.weight fc1.bias fc1.weight");
}

/* ---- a real training run --------------------------------------------------------------------- */

enum { TRAIN_STEPS = 12 };
static float *train_final; /* rank 0's parameters at the end */

static void train_batch(int rank, uint8_t *x, int64_t *y)
{
    for (int i = 0; i < 8 * 20; i++) /* each rank its own batch */
        x[i] = (uint8_t)((i * 31 + rank * 13) % 256);
    for (int b = 0; b < 8; b++)
        y[b] = x[b * 20] % 4;
}

static int body_train(struct job *j, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)j;
    struct optim_config oc;
    optim_config_default(&oc, OPTIM_SGD);
    oc.lr = 0.05;
    optim_t *o;
    int rc = optim_create(&oc, m, &o);
    uint8_t x[8 * 20];
    int64_t y[8];
    struct model_loss loss;
    train_batch(rank, x, y);
    for (int step = 0; rc == 0 && step < TRAIN_STEPS; step++) {
        if ((rc = reducer_prepare_forward(r, 1)) < 0 ||
            (rc = replica_check(c, m, (uint64_t)step, REPLICA_PARAMS | REPLICA_BUFFERS)) < 0 ||
            (rc = model_upload_batch(m, x, NULL, y, 8)) < 0 || (rc = model_forward(m, 8, MODEL_TRAIN)) < 0 ||
            (rc = model_loss(m, 8, 1.0f, &loss)) < 0 || (rc = reducer_backward(r, 8, 0)) < 0 ||
            (rc = optim_step(o, m)) < 0)
            break;
        rc = replica_check(c, m, (uint64_t)step, REPLICA_PARAMS);
    }
    if (rc == 0 && rank == 0)
        rc = model_read(m, MODEL_PARAMS, 0, model_param_floats(m), train_final);
    if (rc == 0 && reducer_get_stats(r).iterations != TRAIN_STEPS)
        rc = err_set(ERR_STATE, "%llu iterations reduced", (unsigned long long)reducer_get_stats(r).iterations);
    optim_destroy(o);
    return rc;
}

/* W ranks of 8 samples each equal one process on the union of their batches
 * (the mean of W means of 8 is the mean of 8W), to float32 rounding: the
 * sums run in another order. */
TEST(reducer_trains_like_one_process_on_the_union_of_batches)
{
    train_final = calloc(1000, sizeof(float));
    struct job j = {.body = body_train};
    small_caps(&j);
    CHECK_OK(job_run(&j, 3));
    struct model_spec s = {.inputs = 20, .classes = 4, .hidden = {9, 6}, .nhidden = 2};
    model_t *m;
    CHECK_OK(fixture_model_create(&s, 24, &m));
    CHECK_OK(model_init(m, 100)); /* rank 0's initialisation */
    struct optim_config oc;
    optim_config_default(&oc, OPTIM_SGD);
    oc.lr = 0.05;
    optim_t *o;
    CHECK_OK(optim_create(&oc, m, &o));
    uint8_t x[24 * 20];
    int64_t y[24];
    for (int r = 0; r < 3; r++)
        train_batch(r, x + r * 160, y + r * 8);
    struct model_loss loss;
    for (int step = 0; step < TRAIN_STEPS; step++) {
        CHECK_OK(model_upload_batch(m, x, NULL, y, 24));
        CHECK_OK(model_forward(m, 24, MODEL_TRAIN));
        CHECK_OK(model_loss(m, 24, 1.0f, &loss));
        CHECK_OK(model_backward(m, 24, 0, NULL, NULL));
        CHECK_OK(optim_step(o, m));
    }
    float *p;
    CHECK_OK(fixture_part(m, MODEL_PARAMS, &p));
    for (size_t i = 0; i < model_param_floats(m); i++)
        CHECK_MSG(fabsf(train_final[i] - p[i]) <= 1e-6f + 1e-4f * fabsf(p[i]),
                  "parameter element %zu: %.9g with 3 ranks, %.9g in one process", i, train_final[i], p[i]);
    free(p);
    optim_destroy(o);
    fixture_model_destroy(m);
    free(train_final);
}

TEST(reducer_keeps_batchnorm_replicas_identical)
{
    train_final = calloc(1000, sizeof(float));
    struct job j = {.body = body_train, .batchnorm = 1};
    small_caps(&j);
    CHECK_OK(job_run(&j, 3)); /* replica_check every step, buffers included */
    free(train_final);
}
