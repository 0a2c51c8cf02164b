/* grade: lab 6, the reducer's readiness logic (`make lab-6`).
 *
 * Your reducer_ready.c marks gradients ready, starts each bucket's
 * all-reduce when its last gradient is in, in bucket order, and waits for
 * all of them (averaging) before the optimizer may step. These tests run it
 * on simulated rank threads with the real communicator, which checks on
 * every collective that all ranks issue the same one (the fingerprint), and
 * a watchdog that turns a hang into a failed test after 2 s. Gradients are
 * written just before they are marked ready, as backward does, so a bucket
 * started too early sums stale values. The last tests train the real model
 * and compare every rank's parameters bit for bit after every step.
 */
#include "comm/comm.h"
#include "base/error.h"
#include "ddp/optim.h"
#include "ddp/reducer.h"
#include "ddp/replica.h"
#include "grader.h"
#include "sim/launch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* 20-9-6-4: fc1.weight 720 B, fc1.bias 36, fc2.weight 216, fc2.bias 24,
 * fc3.weight 96, fc3.bias 16 (parameters 0..5). With bucket limits of 256
 * and 512 bytes the buckets are {fc1.bias .. fc3.bias} then {fc1.weight}. */
#define LAB_FIRST 256
#define LAB_CAP 512
#define LAB_MAXW 4

struct lab;
typedef int (*lab_body)(struct lab *L, int rank, comm_t *c, model_t *m, reducer_t *r);

struct lab {
    struct reducer_config cfg;
    int batchnorm;
    lab_body body;
    float *final; /* rank 0's parameters at the end, when asked */
};

static int lab_rank(struct launch_rank *ctx)
{
    struct lab *L = ctx->shared;
    struct comm_config cc;
    comm_config_default(&cc);
    cc.timeout_s = 2;
    comm_t *c;
    int rc = launch_comm_open(ctx, &cc, &c);
    if (rc < 0)
        return rc;
    struct model_spec s = {.inputs = 20, .classes = 4, .hidden = {9, 6}, .nhidden = 2, .batchnorm = L->batchnorm};
    model_t *m;
    reducer_t *r = NULL;
    rc = model_create(&s, 8, &m);
    if (rc == 0) {
        model_init(m, 100);
        rc = reducer_open(&L->cfg, c, m, &r);
    }
    if (rc == 0)
        rc = L->body(L, ctx->rank, c, m, r);
    reducer_close(r);
    model_destroy(m);
    comm_close(c);
    return rc;
}

static void lab_go(lab_body body, int W, size_t first, size_t cap, enum reducer_compress compress, float *final)
{
    struct lab L = {.body = body, .final = final};
    reducer_config_default(&L.cfg);
    L.cfg.first_bucket_bytes = first;
    L.cfg.bucket_cap_bytes = cap;
    L.cfg.compress = compress;
    struct launch_config lc = {.backend = "sim", .world = W, .shared = &L};
    int rc = launch_run(&lc, lab_rank); /* on failure err_msg() is the watchdog's report when it has one */
    CHECK_MSG(rc == 0, "W=%d: %s", W, err_msg());
}

/* ---- gradients written as backward writes them ---------------------------------------- */

static float lab_grad(int rank, int iteration, int p, size_t i)
{
    return (float)((int)((i * 7 + (size_t)p * 3 + (size_t)rank * 5 + (size_t)iteration * 11) % 23) - 11);
}

/* Writes parameter p's gradient, then marks it ready. */
static int lab_ready(reducer_t *r, model_t *m, int rank, int iteration, int p)
{
    for (size_t i = 0; i < model_param(m, p)->numel; i++)
        model_grad(m, p)[i] = lab_grad(rank, iteration, p, i);
    return reducer_mark_ready(r, p);
}

/* Before a backward every gradient holds garbage, so a bucket reduced before
 * its gradients are written shows. */
static void lab_poison(model_t *m)
{
    for (size_t i = 0; i < model_param_floats(m); i++)
        model_grads(m)[i] = 1e30f;
}

/* Every gradient must be (sum over ranks) / W, rounded once. */
static int lab_check_average(model_t *m, int rank, int W, int iteration)
{
    for (int p = 0; p < model_param_tensors(m); p++)
        for (size_t i = 0; i < model_param(m, p)->numel; i++) {
            int sum = 0;
            for (int q = 0; q < W; q++)
                sum += (int)lab_grad(q, iteration, p, i);
            float want = (float)sum / (float)W, got = model_grad(m, p)[i];
            const char *hint = got == (float)sum     ? " (the sum: never divided by W?)"
                               : got == want / (float)W ? " (divided by W twice?)"
                               : got >= 1e29f          ? " (the value from before backward: reduced too early?)"
                                                       : "";
            if (got != want)
                return err_set(ERR_STATE, "rank %d, iteration %d: %s[%zu] is %.9g after reducer_finish; the average "
                                          "is %d / %d = %.9g%s",
                               rank, iteration, model_param(m, p)->name, i, got, sum, W, want, hint);
        }
    return 0;
}

/* One backward of fake gradients: every rank in reverse order, except rank 1
 * in definition order (its bucket 1 fills first). */
static int lab_iteration(reducer_t *r, model_t *m, int rank, int iteration)
{
    int n = model_param_tensors(m), rc = reducer_prepare_backward(r);
    lab_poison(m);
    for (int k = 0; rc == 0 && k < n; k++)
        rc = lab_ready(r, m, rank, iteration, rank == 1 ? k : n - 1 - k);
    if (rc == 0)
        rc = reducer_finish(r);
    if (rc == 0 && reducer_in_flight(r) != 0)
        rc = err_set(ERR_STATE, "rank %d: %d all-reduces still in flight after reducer_finish: the optimizer would "
                                "read gradients the communicator is still writing", rank, reducer_in_flight(r));
    return rc;
}

/* ---- tests ---------------------------------------------------------------------------------- */

static int body_one_bucket(struct lab *L, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)L;
    int rc = lab_iteration(r, m, rank, 0);
    return rc == 0 ? lab_check_average(m, rank, comm_world(c), 0) : rc;
}

static void test_one_bucket_average(void)
{
    for (int W = 1; W <= 3; W++)
        lab_go(body_one_bucket, W, REDUCER_FIRST_BUCKET_BYTES, REDUCER_BUCKET_CAP_BYTES, REDUCER_COMPRESS_NONE, NULL);
}

static int body_starts_when_full(struct lab *L, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)L;
    int rc = reducer_prepare_backward(r);
    uint64_t seq0 = comm_next_seq(c);
    lab_poison(m);
    for (int p = 5; rc == 0 && p >= 2; p--)
        rc = lab_ready(r, m, rank, 0, p);
    if (rc == 0 && comm_next_seq(c) != seq0)
        return err_set(ERR_STATE, "rank %d: a bucket's all-reduce started while fc1.bias, in that bucket, was not "
                                  "ready yet", rank);
    if (rc == 0)
        rc = lab_ready(r, m, rank, 0, 1);
    if (rc == 0 && comm_next_seq(c) != seq0 + 1)
        return err_set(ERR_STATE, "rank %d: bucket 0 was full but its all-reduce did not start at once (%llu "
                                  "collectives started): no overlap with the rest of backward", rank,
                       (unsigned long long)(comm_next_seq(c) - seq0));
    if (rc == 0)
        rc = lab_ready(r, m, rank, 0, 0);
    if (rc == 0 && comm_next_seq(c) != seq0 + 2)
        return err_set(ERR_STATE, "rank %d: the last bucket did not start when it filled", rank);
    if (rc == 0)
        rc = reducer_finish(r);
    return rc == 0 ? lab_check_average(m, rank, comm_world(c), 0) : rc;
}

static void test_starts_when_full(void)
{
    lab_go(body_starts_when_full, 2, LAB_FIRST, LAB_CAP, REDUCER_COMPRESS_NONE, NULL);
}

static int body_in_order(struct lab *L, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)L;
    int rc = lab_iteration(r, m, rank, 0);
    if (rc == 0)
        rc = lab_check_average(m, rank, comm_world(c), 0);
    struct reducer_bucket_info b0, b1;
    reducer_bucket_info(r, 0, &b0);
    reducer_bucket_info(r, 1, &b1);
    if (rc == 0 && !(b0.seq < b1.seq))
        rc = err_set(ERR_STATE, "rank %d: bucket 1 started (collective #%llu) before bucket 0 (#%llu): every rank "
                                "must start the buckets in bucket order", rank, (unsigned long long)b1.seq,
                     (unsigned long long)b0.seq);
    return rc;
}

static void test_in_order_whatever_the_ready_order(void)
{
    lab_go(body_in_order, 3, LAB_FIRST, LAB_CAP, REDUCER_COMPRESS_NONE, NULL);
}

static int body_iterations(struct lab *L, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)L;
    int rc = 0;
    for (int it = 0; rc == 0 && it < 4; it++) {
        rc = reducer_prepare_forward(r, 1); /* the buckets are rebuilt before the second */
        if (rc == 0)
            rc = lab_iteration(r, m, rank, it);
        if (rc == 0)
            rc = lab_check_average(m, rank, comm_world(c), it);
    }
    return rc;
}

static void test_average_every_iteration(void)
{
    for (int W = 2; W <= 4; W++) /* 3: 1/3 is inexact, so the rounding of sum / 3 shows */
        lab_go(body_iterations, W, LAB_FIRST, LAB_CAP, REDUCER_COMPRESS_NONE, NULL);
}

static int body_double(struct lab *L, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)L;
    (void)c;
    int rc = reducer_prepare_backward(r);
    if (rc == 0)
        rc = lab_ready(r, m, rank, 0, 3);
    if (rc == 0) {
        rc = lab_ready(r, m, rank, 0, 3);
        if (rc != ERR_STATE || !strstr(err_msg(), "fc2.bias"))
            return err_set(ERR_STATE, "marking fc2.bias ready twice in one backward returned %s (%s); expected "
                                      "ERR_STATE naming fc2.bias", err_name(rc), err_msg());
        rc = 0;
    }
    for (int p = 5; rc == 0 && p >= 0; p--)
        if (p != 3)
            rc = lab_ready(r, m, rank, 0, p);
    return rc == 0 ? reducer_finish(r) : rc;
}

static void test_double_mark_refused(void)
{
    lab_go(body_double, 1, LAB_FIRST, LAB_CAP, REDUCER_COMPRESS_NONE, NULL);
}

static int body_missing(struct lab *L, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)L;
    (void)c;
    int rc = reducer_prepare_backward(r);
    for (int p = 5; rc == 0 && p >= 0; p--)
        if (p != 2) /* fc2.weight never becomes ready */
            rc = lab_ready(r, m, rank, 0, p);
    if (rc == 0) {
        rc = reducer_finish(r);
        if (rc != ERR_STATE || !strstr(err_msg(), "fc2.weight"))
            return err_set(ERR_STATE, "reducer_finish with fc2.weight never ready returned %s (%s); expected "
                                      "ERR_STATE naming fc2.weight, before the optimizer steps on stale gradients",
                           err_name(rc), err_msg());
        rc = 0;
    }
    if (rc == 0 && reducer_in_flight(r) != 0)
        rc = err_set(ERR_STATE, "after the failed backward %d all-reduces are still in flight", reducer_in_flight(r));
    return rc;
}

static void test_missing_gradient_named(void)
{
    lab_go(body_missing, 2, LAB_FIRST, LAB_CAP, REDUCER_COMPRESS_NONE, NULL);
}

static int body_no_sync(struct lab *L, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)L;
    reducer_set_sync(r, 0);
    uint64_t seq0 = comm_next_seq(c);
    int rc = reducer_prepare_backward(r);
    for (int p = 5; rc == 0 && p >= 0; p--)
        rc = lab_ready(r, m, rank, 1, p);
    if (rc == 0)
        rc = reducer_finish(r);
    if (rc == 0 && comm_next_seq(c) != seq0)
        return err_set(ERR_STATE, "rank %d: %llu collectives during a no_sync backward: it must only accumulate "
                                  "locally", rank, (unsigned long long)(comm_next_seq(c) - seq0));
    if (rc == 0 && model_grad(m, 2)[4] != lab_grad(rank, 1, 2, 4))
        return err_set(ERR_STATE, "rank %d: a no_sync backward changed the local gradient", rank);
    reducer_set_sync(r, 1);
    if (rc == 0)
        rc = lab_iteration(r, m, rank, 2);
    return rc == 0 ? lab_check_average(m, rank, comm_world(c), 2) : rc;
}

static void test_no_sync(void) { lab_go(body_no_sync, 3, LAB_FIRST, LAB_CAP, REDUCER_COMPRESS_NONE, NULL); }

static int body_compressed(struct lab *L, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)L;
    int W = comm_world(c), rc = lab_iteration(r, m, rank, 0);
    for (int p = 0; rc == 0 && p < model_param_tensors(m); p++)
        for (size_t i = 0; i < model_param(m, p)->numel; i++) {
            double sum = 0;
            for (int q = 0; q < W; q++)
                sum += lab_grad(q, 0, p, i);
            double got = model_grad(m, p)[i];
            if (fabs(got - sum / W) > 2e-3 * (fabs(sum / W) + 1))
                return err_set(ERR_STATE, "fp16: rank %d: %s[%zu] is %g, the average is %g", rank,
                               model_param(m, p)->name, i, got, sum / W);
        }
    return rc;
}

static void test_compressed(void)
{
    lab_go(body_compressed, 3, LAB_FIRST, LAB_CAP, REDUCER_COMPRESS_FP16, NULL);
}

/* Real training: every rank its own batch; parameters compared bit for bit
 * after every step, and at the end against one process on the union. */
static void lab_batch(int rank, uint8_t *x, int64_t *y)
{
    for (int i = 0; i < 8 * 20; i++)
        x[i] = (uint8_t)((i * 31 + rank * 13) % 256);
    for (int b = 0; b < 8; b++)
        y[b] = x[b * 20] % 4;
}

static int body_train(struct lab *L, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    struct optim_config oc;
    optim_config_default(&oc, OPTIM_SGD);
    oc.lr = 0.05;
    optim_t *o;
    int rc = optim_create(&oc, m, &o);
    uint8_t x[160];
    int64_t y[8];
    struct model_loss loss;
    lab_batch(rank, x, y);
    for (int step = 0; rc == 0 && step < 8; step++) {
        if ((rc = reducer_prepare_forward(r, 1)) == 0 && (rc = model_input_from_bytes(m, x, 8)) == 0 &&
            (rc = model_forward(m, 8, MODEL_TRAIN)) == 0 && (rc = model_loss(m, y, 8, 1.0f, &loss)) == 0 &&
            (rc = reducer_backward(r, 8, 0)) == 0) {
            optim_step(o, m);
            rc = replica_check(c, m, (uint64_t)step, REPLICA_PARAMS);
        }
    }
    if (rc == 0 && rank == 0)
        memcpy(L->final, model_params(m), model_param_floats(m) * sizeof(float));
    optim_destroy(o);
    return rc;
}

static void test_training_replicas(void)
{
    float final[1000];
    lab_go(body_train, 3, LAB_FIRST, LAB_CAP, REDUCER_COMPRESS_NONE, final);
    struct model_spec s = {.inputs = 20, .classes = 4, .hidden = {9, 6}, .nhidden = 2};
    model_t *m;
    CHECK_OK(model_create(&s, 24, &m));
    model_init(m, 100);
    struct optim_config oc;
    optim_config_default(&oc, OPTIM_SGD);
    oc.lr = 0.05;
    optim_t *o;
    CHECK_OK(optim_create(&oc, m, &o));
    uint8_t x[480];
    int64_t y[24];
    for (int q = 0; q < 3; q++)
        lab_batch(q, x + q * 160, y + q * 8);
    struct model_loss loss;
    for (int step = 0; step < 8; step++) {
        CHECK_OK(model_input_from_bytes(m, x, 24));
        CHECK_OK(model_forward(m, 24, MODEL_TRAIN));
        CHECK_OK(model_loss(m, y, 24, 1.0f, &loss));
        CHECK_OK(model_backward(m, 24, 0, NULL, NULL));
        optim_step(o, m);
    }
    for (size_t i = 0; i < model_param_floats(m); i++)
        CHECK_MSG(fabsf(final[i] - model_params(m)[i]) <= 1e-6f + 1e-4f * fabsf(model_params(m)[i]),
                  "after 8 steps on 3 ranks, parameter element %zu is %.9g; one process on the union of the batches "
                  "has %.9g", i, final[i], model_params(m)[i]);
    optim_destroy(o);
    model_destroy(m);
}

static const struct grade_test tests[] = {
    {"one-bucket-average", 10, 20, test_one_bucket_average},
    {"bucket-starts-when-full", 15, 20, test_starts_when_full},
    {"buckets-in-order-whatever-the-ready-order", 15, 20, test_in_order_whatever_the_ready_order},
    {"average-every-iteration", 15, 30, test_average_every_iteration},
    {"marked-twice-refused", 5, 20, test_double_mark_refused},
    {"missing-gradient-named", 10, 20, test_missing_gradient_named},
    {"no-sync-accumulates-locally", 10, 20, test_no_sync},
    {"fp16-compression", 5, 20, test_compressed},
    {"training-replicas-bit-identical", 15, 30, test_training_replicas},
};

int main(int argc, char **argv) { return GRADE_MAIN(argc, argv, tests); }
