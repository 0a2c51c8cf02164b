/* grade: lab 6, the reducer's readiness logic (`make lab-6`).
 *
 * Your reducer_ready.c marks gradients ready, starts each bucket's
 * all-reduce when its last gradient is in, in bucket order, and waits for
 * all of them (averaging) before the optimizer may step. These tests run it
 * on simulated rank threads with the real communicator, which checks on
 * every collective that all ranks issue the same one (the fingerprint), and
 * a watchdog that turns a hang into a failed test after 2 s. Gradients are
 * written just before they are marked ready, as backward does, and after
 * every mark the grader counts the collectives started: a bucket must start
 * at the mark that completes it (and every bucket before it), not one mark
 * earlier or later. The compression tests use a communicator that reads a
 * collective's input the moment it starts (as a GPU stream that reaches it
 * at once), so a 16-bit copy written after the start is never summed, every
 * time. The last tests train the real model and compare every rank's
 * parameters bit for bit after every step. Each rank's model lives on a
 * simulated device of its own, as in chapter 6 (tests/harness/
 * model_fixture.h): the grader writes and reads gradients through copies,
 * as backward's kernels and the optimizer reach them on a GPU.
 */
#include "comm/comm.h"
#include "comm/comm_backend.h"
#include "base/vclock.h"
#include "base/error.h"
#include "ddp/optim.h"
#include "ddp/reducer.h"
#include "ddp/replica.h"
#include "grader.h"
#include "model_fixture.h"
#include "sim/comm_sim.h"
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
#define LAB_NPARAMS 6

struct lab;
typedef int (*lab_body)(struct lab *L, int rank, comm_t *c, model_t *m, reducer_t *r);

struct lab {
    struct reducer_config cfg;
    int batchnorm;
    int eager; /* the communicator runs each collective inside its start (lab_eager_ops) */
    lab_body body;
    float *final; /* rank 0's parameters at the end, when asked */
    int rc[LAB_MAXW];         /* each rank's result ... */
    char msg[LAB_MAXW][1024]; /* ... and its message */
};

/* The simulator's communicator, except that every collective runs to
 * completion inside its start call: its input is read at the moment it
 * starts, as on a GPU whose communication stream reaches the all-reduce at
 * once. A buffer written after the start is then never summed, on every run,
 * where the simulator's own queue, which the rank's thread runs when it
 * waits, would read it late and sum it as if nothing were wrong. */
static struct comm_backend_ops lab_eager_ops;

static int lab_eager_start(comm_t *c, comm_request_t *req)
{
    req->blocking = 1; /* the sim then runs it on this thread, now (sim/comm_sim.c) */
    return comm_backend_sim.start(c, req);
}

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
    if (L->eager)
        c->ops = &lab_eager_ops;
    struct model_spec s = {.inputs = 20, .classes = 4, .hidden = {9, 6}, .nhidden = 2, .batchnorm = L->batchnorm};
    model_t *m;
    reducer_t *r = NULL;
    rc = fixture_model_create(&s, 8, &m);
    if (rc == 0)
        rc = model_init(m, 100);
    if (rc == 0)
        rc = reducer_open(&L->cfg, c, m, &r);
    if (rc == 0)
        rc = L->body(L, ctx->rank, c, m, r);
    L->rc[ctx->rank] = rc;
    snprintf(L->msg[ctx->rank], sizeof L->msg[ctx->rank], "%s", rc < 0 ? err_msg() : "");
    reducer_close(r);
    fixture_model_destroy(m);
    comm_close(c);
    return rc;
}

static void lab_go_with(lab_body body, int W, size_t first, size_t cap, enum reducer_compress compress, int eager,
                        float *final)
{
    struct lab L = {.body = body, .eager = eager, .final = final};
    reducer_config_default(&L.cfg);
    L.cfg.first_bucket_bytes = first;
    L.cfg.bucket_cap_bytes = cap;
    L.cfg.compress = compress;
    lab_eager_ops = comm_backend_sim;
    lab_eager_ops.start = lab_eager_start;
    struct launch_config lc = {.backend = "sim", .world = W, .shared = &L};
    int rc = launch_run(&lc, lab_rank); /* on failure err_msg() is the watchdog's report when it has one */
    /* A rank that found something wrong leaves the others waiting for its
     * collectives: its own message says what, the watchdog's only where. */
    for (int q = 0; rc != 0 && q < W; q++)
        CHECK_MSG(L.rc[q] == 0 || L.rc[q] == ERR_TIMEOUT || L.rc[q] == ERR_PEER, "W=%d: rank %d: %s", W, q, L.msg[q]);
    CHECK_MSG(rc == 0, "W=%d: %s", W, err_msg());
}

static void lab_go(lab_body body, int W, size_t first, size_t cap, enum reducer_compress compress, float *final)
{
    lab_go_with(body, W, first, cap, compress, 0, final);
}

/* ---- gradients written as backward writes them ---------------------------------------- */

static float lab_grad(int rank, int iteration, int p, size_t i)
{
    return (float)((int)((i * 7 + (size_t)p * 3 + (size_t)rank * 5 + (size_t)iteration * 11) % 23) - 11);
}

/* The largest parameter of the lab's model (fc1.weight, 9 x 20), in floats. */
#define LAB_MAX_NUMEL 180

/* Before a backward every gradient holds garbage, so a bucket reduced before
 * its gradients are written shows. */
static int lab_poison(model_t *m)
{
    size_t n = model_param_floats(m);
    float *g = malloc(n * sizeof *g);
    if (!g)
        return err_set(ERR_NOMEM, "grader: out of memory");
    for (size_t i = 0; i < n; i++)
        g[i] = 1e30f;
    int rc = model_write(m, MODEL_GRADS, 0, n, g);
    free(g);
    return rc;
}

/* One backward as the grader drives it: which gradients it marked, and how
 * many collectives the communicator had started when it began, so that after
 * every mark it can tell how many buckets must have started by then. */
struct lab_backward {
    reducer_t *r;
    comm_t *c;
    model_t *m;
    int rank, iteration;
    int accumulate;  /* gradients are added to what earlier micro-batches left (no_sync) */
    int sync;        /* this backward reduces */
    float scale;     /* gradients are lab_grad() x scale */
    uint64_t seq0;
    unsigned char marked[LAB_NPARAMS];
};

static int lab_backward_begin(struct lab_backward *k, reducer_t *r, comm_t *c, model_t *m, int rank, int iteration,
                              int accumulate, int sync)
{
    *k = (struct lab_backward){.r = r, .c = c, .m = m, .rank = rank, .iteration = iteration,
                               .accumulate = accumulate, .sync = sync, .scale = 1};
    reducer_set_sync(r, sync);
    int rc = reducer_prepare_backward(r);
    if (rc == 0 && !accumulate)
        rc = lab_poison(m);
    k->seq0 = comm_next_seq(c);
    return rc;
}

/* Buckets that must have started by now: every bucket whose gradients are
 * all marked, up to the first that still waits (bucket order). Sets *waits
 * to the first bucket still waiting and *missing to one of its parameters. */
static int lab_due(const struct lab_backward *k, int *waits, int *missing)
{
    int due = 0, nb = reducer_bucket_count(k->r);
    *waits = -1;
    *missing = -1;
    for (int b = 0; k->sync && b < nb; b++) {
        struct reducer_bucket_info bi;
        reducer_bucket_info(k->r, b, &bi);
        for (int j = 0; j < bi.nparams && *missing < 0; j++)
            if (!k->marked[bi.params[j]])
                *missing = bi.params[j];
        if (*missing >= 0) {
            *waits = b;
            break;
        }
        due++;
    }
    return due;
}

/* After a mark (or a refused one) of parameter p: exactly the due buckets started. */
static int lab_check_started(const struct lab_backward *k, int p, const char *how)
{
    int waits, missing, due = lab_due(k, &waits, &missing);
    uint64_t started = comm_next_seq(k->c) - k->seq0;
    const char *name = model_param(k->m, p)->name;
    if (!k->sync && started != 0)
        return err_set(ERR_STATE, "rank %d: %llu collectives started during a no_sync backward (after %s %s): it "
                                  "must only accumulate locally", k->rank, (unsigned long long)started, how, name);
    if (started > (uint64_t)due && waits < 0)
        return err_set(ERR_STATE, "rank %d: after %s %s, %llu all-reduces had started: more than the %d buckets",
                       k->rank, how, name, (unsigned long long)started, due);
    if (started > (uint64_t)due)
        return err_set(ERR_STATE, "rank %d: after %s %s, %llu all-reduces had started, but only %d bucket(s) had "
                                  "all their gradients: bucket %d still waits for %s, so its all-reduce sums a "
                                  "gradient not written yet", k->rank, how, name, (unsigned long long)started, due,
                       waits, model_param(k->m, missing)->name);
    if (started < (uint64_t)due)
        return err_set(ERR_STATE, "rank %d: after %s %s, bucket %d and every bucket before it had all their "
                                  "gradients, but only %llu all-reduces had started: a bucket starts the moment it "
                                  "is full and the buckets before it have started, or backward overlaps nothing",
                       k->rank, how, name, due - 1, (unsigned long long)started);
    return 0;
}

/* Writes parameter p's gradient (or adds it, when accumulating), marks it
 * ready, and checks which buckets started. */
static int lab_mark(struct lab_backward *k, int p)
{
    float g[LAB_MAX_NUMEL];
    int rc = k->accumulate ? fixture_read_grad(k->m, p, g) : 0;
    for (size_t i = 0; rc == 0 && i < model_param(k->m, p)->numel; i++) {
        float v = lab_grad(k->rank, k->iteration, p, i) * k->scale;
        g[i] = k->accumulate ? g[i] + v : v;
    }
    if (rc == 0)
        rc = fixture_write_grad(k->m, p, g);
    if (rc == 0)
        rc = reducer_mark_ready(k->r, p);
    if (rc < 0)
        return rc;
    k->marked[p] = 1;
    return lab_check_started(k, p, "marking");
}

/* Marks p a second time: it must be refused, naming p, and change nothing. */
static int lab_mark_again(struct lab_backward *k, int p)
{
    const char *name = model_param(k->m, p)->name;
    int rc = reducer_mark_ready(k->r, p);
    if (rc != ERR_STATE || !strstr(err_msg(), name))
        return err_set(ERR_STATE, "rank %d: marking %s ready twice in one %sbackward returned %s (%s); expected "
                                  "ERR_STATE naming %s", k->rank, name, k->sync ? "" : "no_sync ", err_name(rc),
                       rc ? err_msg() : "no error", name);
    return lab_check_started(k, p, "the refused second mark of");
}

/* reducer_finish, and nothing may stay in flight after it. */
static int lab_finish(struct lab_backward *k)
{
    int rc = reducer_finish(k->r);
    if (rc == 0 && reducer_in_flight(k->r) != 0)
        rc = err_set(ERR_STATE, "rank %d: %d all-reduces still in flight after reducer_finish: the optimizer would "
                                "read gradients the communicator is still writing", k->rank,
                     reducer_in_flight(k->r));
    return rc;
}

/* Every gradient of parameters [p0, p1) must be (sum over ranks and over the
 * iterations its[0..nits)) / W, rounded once. */
static int lab_check_average_of(model_t *m, int rank, int W, const int *its, int nits, int p0, int p1)
{
    for (int p = p0; p < p1; p++) {
        float g[LAB_MAX_NUMEL];
        int rc = fixture_read_grad(m, p, g);
        if (rc < 0)
            return rc;
        for (size_t i = 0; i < model_param(m, p)->numel; i++) {
            int sum = 0;
            for (int q = 0; q < W; q++)
                for (int t = 0; t < nits; t++)
                    sum += (int)lab_grad(q, its[t], p, i);
            float want = (float)sum / (float)W, got = g[i];
            const char *hint = got == (float)sum     ? " (the sum: never divided by W?)"
                               : got == want / (float)W ? " (divided by W twice?)"
                               : got >= 1e29f          ? " (the value from before backward: reduced too early?)"
                                                       : "";
            if (got != want)
                return err_set(ERR_STATE, "rank %d, iteration %d: %s[%zu] is %.9g after reducer_finish; the average "
                                          "is %d / %d = %.9g%s",
                               rank, its[nits - 1], model_param(m, p)->name, i, got, sum, W, want, hint);
        }
    }
    return 0;
}

static int lab_check_average(model_t *m, int rank, int W, int iteration)
{
    return lab_check_average_of(m, rank, W, &iteration, 1, 0, model_param_tensors(m));
}

/* One backward of fake gradients: every rank in reverse order, except rank 1
 * in definition order (its bucket 1 fills first). */
static int lab_iteration(reducer_t *r, comm_t *c, model_t *m, int rank, int iteration)
{
    struct lab_backward k;
    int n = model_param_tensors(m), rc = lab_backward_begin(&k, r, c, m, rank, iteration, 0, 1);
    for (int j = 0; rc == 0 && j < n; j++)
        rc = lab_mark(&k, rank == 1 ? j : n - 1 - j);
    return rc == 0 ? lab_finish(&k) : rc;
}

/* ---- tests ---------------------------------------------------------------------------------- */

static int body_one_bucket(struct lab *L, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)L;
    int rc = lab_iteration(r, c, m, rank, 0);
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
    struct lab_backward k;
    int rc = lab_backward_begin(&k, r, c, m, rank, 0, 0, 1);
    for (int p = 5; rc == 0 && p >= 0; p--) /* bucket 0 starts at fc1.bias, bucket 1 at fc1.weight */
        rc = lab_mark(&k, p);
    if (rc == 0)
        rc = lab_finish(&k);
    return rc == 0 ? lab_check_average(m, rank, comm_world(c), 0) : rc;
}

static void test_starts_when_full(void)
{
    lab_go(body_starts_when_full, 2, LAB_FIRST, LAB_CAP, REDUCER_COMPRESS_NONE, NULL);
}

static int body_in_order(struct lab *L, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)L;
    int rc = lab_iteration(r, c, m, rank, 0);
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
            rc = lab_iteration(r, c, m, rank, it);
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

/* fc2.bias marked twice: refused, naming it, and not counted, so bucket 0
 * still starts only when fc1.bias, its last gradient, is marked. */
static int body_double(struct lab *L, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)L;
    struct lab_backward k;
    static const int order[] = {5, 3, -3, 4, 2, 1, 0}; /* -3: fc2.bias again */
    int rc = lab_backward_begin(&k, r, c, m, rank, 0, 0, 1);
    for (size_t j = 0; rc == 0 && j < sizeof order / sizeof order[0]; j++)
        rc = order[j] < 0 ? lab_mark_again(&k, -order[j]) : lab_mark(&k, order[j]);
    if (rc == 0)
        rc = lab_finish(&k);
    return rc == 0 ? lab_check_average(m, rank, comm_world(c), 0) : rc;
}

static void test_double_mark_refused(void)
{
    lab_go(body_double, 1, LAB_FIRST, LAB_CAP, REDUCER_COMPRESS_NONE, NULL);
    lab_go(body_double, 3, LAB_FIRST, LAB_CAP, REDUCER_COMPRESS_NONE, NULL);
}

/* A backward that ends with `skip` never marked; finish must name it. */
static int lab_backward_missing(reducer_t *r, comm_t *c, model_t *m, int rank, int skip)
{
    struct lab_backward k;
    int rc = lab_backward_begin(&k, r, c, m, rank, 0, 0, 1);
    for (int p = 5; rc == 0 && p >= 0; p--)
        if (p != skip)
            rc = lab_mark(&k, p);
    if (rc < 0)
        return rc;
    const char *name = model_param(m, skip)->name;
    rc = reducer_finish(r);
    if (rc != ERR_STATE || !strstr(err_msg(), name))
        return err_set(ERR_STATE, "rank %d: reducer_finish with %s never ready returned %s (%s); expected ERR_STATE "
                                  "naming %s, before the optimizer steps on stale gradients", rank, name, err_name(rc),
                       rc ? err_msg() : "no error", name);
    if (reducer_in_flight(r) != 0)
        return err_set(ERR_STATE, "rank %d: after the backward that never marked %s, %d all-reduces are still in "
                                  "flight: finish must wait for every bucket that started, then report the missing "
                                  "gradient", rank, name, reducer_in_flight(r));
    return 0;
}

/* The backward after one that failed runs as if nothing happened. */
static int lab_backward_after_failed(reducer_t *r, comm_t *c, model_t *m, int rank, int skip)
{
    int rc = lab_iteration(r, c, m, rank, 1);
    if (rc == 0)
        rc = lab_check_average(m, rank, comm_world(c), 1);
    return rc < 0 ? err_wrap(rc, "the backward after the one that never marked %s", model_param(m, skip)->name) : 0;
}

/* fc2.weight never ready: bucket 0 never starts, so neither does bucket 1. */
static int body_missing(struct lab *L, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)L;
    int rc = lab_backward_missing(r, c, m, rank, 2);
    return rc == 0 ? lab_backward_after_failed(r, c, m, rank, 2) : rc;
}

static void test_missing_gradient_named(void)
{
    lab_go(body_missing, 2, LAB_FIRST, LAB_CAP, REDUCER_COMPRESS_NONE, NULL);
}

/* fc1.weight, alone in bucket 1, never ready while bucket 0's all-reduce is
 * in flight: finish waits for bucket 0 (and averages it), then names
 * fc1.weight; the reducer then runs the next backward as if nothing
 * happened. */
static int body_missing_in_flight(struct lab *L, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)L;
    int W = comm_world(c), it = 0, rc = lab_backward_missing(r, c, m, rank, 0);
    if (rc == 0 && (rc = lab_check_average_of(m, rank, W, &it, 1, 1, LAB_NPARAMS)) < 0)
        return err_wrap(rc, "bucket 0 started, so finish must wait for it and average it even though fc1.weight "
                            "never came");
    return rc == 0 ? lab_backward_after_failed(r, c, m, rank, 0) : rc;
}

static void test_missing_gradient_in_flight(void)
{
    lab_go(body_missing_in_flight, 2, LAB_FIRST, LAB_CAP, REDUCER_COMPRESS_NONE, NULL);
}

/* Gradient accumulation, as PyTorch's no_sync() is used: micro-batches
 * 0 and 1 backward without communicating (fc2.bias marked twice in the
 * first: refused), micro-batch 2 reduces what the three left. Twice, after a
 * reducing backward, so that nothing a backward leaves behind leaks into the
 * next. */
static int body_accumulation(struct lab *L, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)L;
    int W = comm_world(c), rc = lab_iteration(r, c, m, rank, 0);
    if (rc == 0)
        rc = lab_check_average(m, rank, W, 0);
    for (int round = 1; rc == 0 && round <= 2; round++) {
        int its[3];
        for (int micro = 0; rc == 0 && micro < 3; micro++) {
            struct lab_backward k;
            int sync = micro == 2;
            its[micro] = round * 10 + micro;
            rc = lab_backward_begin(&k, r, c, m, rank, its[micro], micro > 0, sync);
            for (int p = 5; rc == 0 && p >= 0; p--) {
                rc = lab_mark(&k, p);
                if (rc == 0 && micro == 0 && p == 3)
                    rc = lab_mark_again(&k, p);
            }
            if (rc == 0)
                rc = lab_finish(&k);
            if (rc < 0) {
                rc = err_wrap(rc, "accumulation round %d, micro-batch %d of 3 (%s)", round, micro,
                              sync ? "the reducing one" : "no_sync");
                break;
            }
            /* no_sync: each rank keeps the sum of its own micro-batches */
            for (int p = 0; !sync && p < LAB_NPARAMS; p++) {
                float g[LAB_MAX_NUMEL];
                if ((rc = fixture_read_grad(m, p, g)) < 0)
                    return rc;
                for (size_t i = 0; i < model_param(m, p)->numel; i++) {
                    float want = 0;
                    for (int t = 0; t <= micro; t++)
                        want += lab_grad(rank, its[t], p, i);
                    if (g[i] != want)
                        return err_set(ERR_STATE, "rank %d, accumulation round %d: after no_sync micro-batch %d, "
                                                  "%s[%zu] is %.9g; this rank's own sum is %.9g: a no_sync backward "
                                                  "must leave the local gradients alone", rank, round, micro,
                                       model_param(m, p)->name, i, g[i], want);
                }
            }
        }
        if (rc == 0)
            rc = lab_check_average_of(m, rank, W, its, 3, 0, LAB_NPARAMS);
    }
    return rc;
}

static void test_accumulation(void) { lab_go(body_accumulation, 3, LAB_FIRST, LAB_CAP, REDUCER_COMPRESS_NONE, NULL); }

/* Compression: every gradient must be the average within the 16-bit type's
 * rounding: the gradient, then its share (/ W), then W - 1 sums, each
 * rounded to 8 (bfloat16) or 11 (float16) significant bits, are off by a few
 * units in the last place of the largest term. bfloat16's gradients are
 * scaled past float16's largest number, 65504, where only bfloat16 holds
 * them. */
static int body_compressed(struct lab *L, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    int W = comm_world(c), bf16 = L->cfg.compress == REDUCER_COMPRESS_BF16;
    const char *type = bf16 ? "bf16" : "fp16";
    double ulp = bf16 ? 1.0 / 128 : 1.0 / 1024, tolerance = 4 * ulp;
    for (int it = 0; it < 2; it++) {
        struct lab_backward k;
        int n = model_param_tensors(m), rc = lab_backward_begin(&k, r, c, m, rank, it, 0, 1);
        k.scale = bf16 ? 8192 : 1;
        for (int j = 0; rc == 0 && j < n; j++)
            rc = lab_mark(&k, rank == 1 ? j : n - 1 - j);
        if (rc == 0)
            rc = lab_finish(&k);
        if (rc < 0)
            return rc;
        for (int p = 0; p < n; p++) {
            float g[LAB_MAX_NUMEL];
            if ((rc = fixture_read_grad(m, p, g)) < 0)
                return rc;
            for (size_t i = 0; i < model_param(m, p)->numel; i++) {
                double sum = 0, magnitude = 0;
                for (int q = 0; q < W; q++) {
                    sum += lab_grad(q, it, p, i) * k.scale;
                    magnitude += fabs(lab_grad(q, it, p, i) * k.scale);
                }
                double got = g[i], own = lab_grad(rank, it, p, i) * k.scale;
                const char *hint = fabs(got - own / W) <= tolerance * fabs(own / W) && fabs(own - sum / W) > 1
                                       ? " (this rank's own gradient / W: the 16-bit copy was not yet written when "
                                         "its all-reduce started?)"
                                   : fabs(got - sum / W) > 0.25 * magnitude
                                       ? " (the 16-bit sum read as the other 16-bit type?)"
                                       : "";
                if (fabs(got - sum / W) > tolerance * magnitude / W)
                    return err_set(ERR_STATE, "%s, W=%d, rank %d, iteration %d: %s[%zu] is %.9g, the average is "
                                              "%.9g%s", type, W, rank, it, model_param(m, p)->name, i, got, sum / W,
                                   hint);
            }
        }
    }
    return 0;
}

static void test_fp16(void)
{
    lab_go_with(body_compressed, 3, LAB_FIRST, LAB_CAP, REDUCER_COMPRESS_FP16, 1, NULL);
    lab_go_with(body_compressed, 3, REDUCER_FIRST_BUCKET_BYTES, REDUCER_BUCKET_CAP_BYTES, REDUCER_COMPRESS_FP16, 1,
                NULL);
}

static void test_bf16(void)
{
    lab_go_with(body_compressed, 3, LAB_FIRST, LAB_CAP, REDUCER_COMPRESS_BF16, 1, NULL);
    lab_go_with(body_compressed, 3, REDUCER_FIRST_BUCKET_BYTES, REDUCER_BUCKET_CAP_BYTES, REDUCER_COMPRESS_BF16, 1,
                NULL);
}

/* A moment strictly after every vclock_now_ns() read before this call: the
 * simulator's host clock is modelled (base/vclock.h), so the grader spends
 * a nanosecond of it. */
static uint64_t lab_tick(void) { return vclock_advance_ns(1); }

/* ready_ns is when a bucket's last gradient was marked, launch_ns when its
 * all-reduce started. Bucket 1 (fc1.weight) fills first, at the first mark,
 * and waits for bucket 0; both start at the last mark. */
static int body_ready_ns(struct lab *L, int rank, comm_t *c, model_t *m, reducer_t *r)
{
    (void)L;
    struct lab_backward k;
    int rc = lab_backward_begin(&k, r, c, m, rank, 0, 0, 1);
    uint64_t t0 = lab_tick();
    if (rc == 0)
        rc = lab_mark(&k, 0);
    uint64_t t1 = lab_tick();
    for (int p = 1; rc == 0 && p < 5; p++)
        rc = lab_mark(&k, p);
    uint64_t t2 = lab_tick();
    if (rc == 0)
        rc = lab_mark(&k, 5);
    uint64_t t3 = lab_tick();
    if (rc == 0)
        rc = lab_finish(&k);
    if (rc < 0)
        return rc;
    struct reducer_bucket_info b0, b1;
    reducer_bucket_info(r, 0, &b0);
    reducer_bucket_info(r, 1, &b1);
    if (b0.ready_ns == 0 || b1.ready_ns == 0)
        return err_set(ERR_STATE, "rank %d: a bucket's ready_ns is 0 after its backward: note vclock_now_ns() in it "
                                  "when its last gradient is marked", rank);
    if (!(t0 <= b1.ready_ns && b1.ready_ns < t1))
        return err_set(ERR_STATE, "rank %d: bucket 1 filled when fc1.weight was marked, but its ready_ns is %.3f us "
                                  "after that mark returned (it started %.3f us after it): ready_ns is when the "
                                  "bucket's last gradient was marked, not when its all-reduce started", rank,
                       ((double)b1.ready_ns - (double)t1) * 1e-3, ((double)b1.launch_ns - (double)t1) * 1e-3);
    if (!(t2 <= b0.ready_ns && b0.ready_ns < t3 && b0.ready_ns <= b0.launch_ns))
        return err_set(ERR_STATE, "rank %d: bucket 0 filled when fc3.bias, its last gradient, was marked, but its "
                                  "ready_ns is %.3f us from that mark (launch_ns %.3f us)", rank,
                       ((double)b0.ready_ns - (double)t2) * 1e-3, ((double)b0.launch_ns - (double)t2) * 1e-3);
    return 0;
}

static void test_ready_ns(void) { lab_go(body_ready_ns, 2, LAB_FIRST, LAB_CAP, REDUCER_COMPRESS_NONE, NULL); }

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
        if ((rc = reducer_prepare_forward(r, 1)) == 0 && (rc = model_upload_batch(m, x, NULL, y, 8)) == 0 &&
            (rc = model_forward(m, 8, MODEL_TRAIN)) == 0 && (rc = model_loss(m, 8, 1.0f, &loss)) == 0 &&
            (rc = reducer_backward(r, 8, 0)) == 0 && (rc = optim_step(o, m)) == 0)
            rc = replica_check(c, m, (uint64_t)step, REPLICA_PARAMS);
    }
    if (rc == 0 && rank == 0)
        rc = model_read(m, MODEL_PARAMS, 0, model_param_floats(m), L->final);
    optim_destroy(o);
    return rc;
}

static void test_training_replicas(void)
{
    float final[1000];
    lab_go(body_train, 3, LAB_FIRST, LAB_CAP, REDUCER_COMPRESS_NONE, final);
    struct model_spec s = {.inputs = 20, .classes = 4, .hidden = {9, 6}, .nhidden = 2};
    model_t *m;
    CHECK_OK(fixture_model_create(&s, 24, &m));
    CHECK_OK(model_init(m, 100));
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
        CHECK_OK(model_upload_batch(m, x, NULL, y, 24));
        CHECK_OK(model_forward(m, 24, MODEL_TRAIN));
        CHECK_OK(model_loss(m, 24, 1.0f, &loss));
        CHECK_OK(model_backward(m, 24, 0, NULL, NULL));
        CHECK_OK(optim_step(o, m));
    }
    float p[1000];
    CHECK_OK(model_read(m, MODEL_PARAMS, 0, model_param_floats(m), p));
    for (size_t i = 0; i < model_param_floats(m); i++)
        CHECK_MSG(fabsf(final[i] - p[i]) <= 1e-6f + 1e-4f * fabsf(p[i]),
                  "after 8 steps on 3 ranks, parameter element %zu is %.9g; one process on the union of the batches "
                  "has %.9g", i, final[i], p[i]);
    optim_destroy(o);
    fixture_model_destroy(m);
}

static const struct grade_test tests[] = {
    {"one-bucket-average", 10, 20, test_one_bucket_average},
    {"bucket-starts-when-full", 10, 20, test_starts_when_full},
    {"buckets-in-order-whatever-the-ready-order", 10, 20, test_in_order_whatever_the_ready_order},
    {"average-every-iteration", 10, 30, test_average_every_iteration},
    {"marked-twice-refused-not-counted", 10, 20, test_double_mark_refused},
    {"missing-gradient-named", 5, 20, test_missing_gradient_named},
    {"missing-gradient-while-a-bucket-is-in-flight", 10, 20, test_missing_gradient_in_flight},
    {"accumulation-over-three-micro-batches", 10, 20, test_accumulation},
    {"fp16-compression", 5, 20, test_fp16},
    {"bf16-compression", 5, 20, test_bf16},
    {"ready-ns-when-the-bucket-filled", 5, 20, test_ready_ns},
    {"training-replicas-bit-identical", 10, 30, test_training_replicas},
};

int main(int argc, char **argv) { return GRADE_MAIN(argc, argv, tests); }
