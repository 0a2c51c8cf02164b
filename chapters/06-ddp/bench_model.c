/* bench_model: one rank's training step on one thread (see bench_model.h).
 * A step is what a training loop does with a batch the loader delivered:
 * bytes to floats, forward, loss, backward, optimizer. */
#include "bench_model.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/hash.h"
#include "ddp/model.h"
#include "ddp/optim.h"
#include "transfer/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_MODEL_POOL 8192 /* samples: more than any timed run reuses in cache */

void bench_model_defaults(struct bench_model_options *o)
{
    memset(o, 0, sizeof *o);
    o->batches[0] = 32;
    o->batches[1] = 64;
    o->batches[2] = 256;
    o->nbatches = 3;
    o->seconds = 0.4;
    o->repeats = 5;
    o->device = "sim";
}

struct bench_model_result {
    double samples_per_s, step_us, gemm_us;
};

/* The samples and labels of the pool in the device's memory, as the
 * prefetcher leaves a batch there: the model alone is timed, not the copy. */
struct bench_model_device {
    device_t *dev;
    device_stream_t *s;
    uint8_t *pool;
    int64_t *labels;
};

static void bench_model_device_close(struct bench_model_device *d)
{
    if (d->dev) {
        device_free(d->dev, d->pool);
        device_free(d->dev, d->labels);
        device_stream_destroy(d->s);
        device_close(d->dev);
    }
}

static int bench_model_device_open(const char *backend, const uint8_t *pool, const int64_t *labels,
                                   struct bench_model_device *d)
{
    memset(d, 0, sizeof *d);
    struct device_config dc;
    device_config_default(&dc);
    dc.backend = backend;
    uint64_t bytes = (uint64_t)BENCH_MODEL_POOL * 784, lbytes = BENCH_MODEL_POOL * sizeof *labels;
    int rc = device_open(&dc, &d->dev);
    if (rc == 0)
        rc = device_stream_create(d->dev, "compute", &d->s);
    if (rc == 0)
        rc = device_malloc(d->dev, bytes, "sample pool", (void **)&d->pool);
    if (rc == 0)
        rc = device_malloc(d->dev, lbytes, "label pool", (void **)&d->labels);
    if (rc == 0)
        rc = device_copy(d->dev, d->pool, pool, bytes, DEVICE_H2D);
    if (rc == 0)
        rc = device_copy(d->dev, d->labels, labels, lbytes, DEVICE_H2D);
    if (rc < 0)
        bench_model_device_close(d);
    return rc;
}

static int bench_model_one(int batch, const struct bench_model_device *d, const struct bench_model_options *o,
                           struct bench_model_result *best)
{
    struct model_spec spec;
    model_spec_default(&spec);
    model_t *m;
    int rc = model_create(&spec, batch, d->s, &m);
    if (rc < 0)
        return rc;
    struct optim_config oc;
    optim_config_default(&oc, OPTIM_SGD);
    optim_t *opt = NULL;
    if ((rc = model_init(m, 0)) < 0 || (rc = optim_create(&oc, m, &opt)) < 0) {
        model_destroy(m);
        return rc;
    }
    int at = 0;
    struct model_loss loss;
    memset(best, 0, sizeof *best);
    for (int rep = -1; rc == 0 && rep < o->repeats; rep++) { /* rep -1 warms up */
        model_timing_reset(m);
        uint64_t t0 = clock_now_ns(), steps = 0, limit = (uint64_t)((rep < 0 ? 0.1 : o->seconds) * 1e9);
        while (rc == 0 && clock_now_ns() - t0 < limit) {
            if (at + batch > BENCH_MODEL_POOL)
                at = 0;
            if ((rc = model_take_batch(m, d->pool + (size_t)at * 784, d->labels + at, batch, -1)) < 0 ||
                (rc = model_forward(m, batch, MODEL_TRAIN)) < 0 || (rc = model_loss(m, batch, 1.0f, &loss)) < 0 ||
                (rc = model_backward(m, batch, 0, NULL, NULL)) < 0 || (rc = optim_step(opt, m)) < 0)
                break;
            at += batch;
            steps++;
        }
        if (rc == 0)
            rc = model_sync(m); /* the last step's work is part of the time */
        double seconds = (double)(clock_now_ns() - t0) * 1e-9;
        if (rep >= 0 && steps && (double)steps * batch / seconds > best->samples_per_s) {
            best->samples_per_s = (double)steps * batch / seconds;
            best->step_us = seconds * 1e6 / (double)steps;
            best->gemm_us = (double)model_timing_get(m).gemm_ns * 1e-3 / (double)steps;
        }
    }
    optim_destroy(opt);
    model_destroy(m);
    return rc;
}

int bench_model(const struct bench_model_options *o)
{
    for (int k = 0; k < o->nbatches; k++)
        if (o->batches[k] < 1 || o->batches[k] > BENCH_MODEL_POOL)
            return err_set(ERR_ARG, "bench_model: a batch of %d: the timed steps draw from a pool of %d samples "
                                    "(1 to %d)", o->batches[k], BENCH_MODEL_POOL, BENCH_MODEL_POOL);
    uint8_t *pool = malloc((size_t)BENCH_MODEL_POOL * 784);
    int64_t *labels = malloc(BENCH_MODEL_POOL * sizeof *labels);
    if (!pool || !labels) {
        free(pool);
        free(labels);
        return err_set(ERR_NOMEM, "bench_model: out of memory for the sample pool");
    }
    uint64_t st = 1;
    for (size_t i = 0; i < (size_t)BENCH_MODEL_POOL * 784; i++)
        pool[i] = (uint8_t)hash_splitmix64_next(&st);
    for (int i = 0; i < BENCH_MODEL_POOL; i++)
        labels[i] = (int64_t)(hash_splitmix64_next(&st) % 10);
    char blas[512];
    printf("bench_model: blas %s\n", model_blas_describe(blas, sizeof blas));
    struct bench_model_device d;
    int rc = bench_model_device_open(o->device, pool, labels, &d);
    if (rc == 0)
        printf("bench_model: device %s\n", device_describe(d.dev));
    for (int k = 0; rc == 0 && k < o->nbatches; k++) {
        struct bench_model_result r;
        rc = bench_model_one(o->batches[k], &d, o, &r);
        if (rc == 0)
            printf("bench_model: batch=%d samples_per_s=%.0f step_us=%.1f gemm_us=%.1f\n", o->batches[k],
                   r.samples_per_s, r.step_us, r.gemm_us);
        fflush(stdout);
    }
    bench_model_device_close(&d);
    free(pool);
    free(labels);
    return rc;
}
