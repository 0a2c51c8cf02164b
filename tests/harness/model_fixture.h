/* model_fixture: a model on a simulated device of its own, for the unit
 * tests of lib/ddp, the lab 6 grader (labs/06-ddp/grade.c) and the
 * checkpoint fuzzer (tests/fuzz/fuzz_checkpoint.c). The model lives in
 * device memory since chapter 6 runs on any device; the tests run it on the
 * simulated one. Header-only (static functions), like loader_fixture.h: the
 * grader and the fuzzer are built on their own, without the harness's
 * objects.
 *
 * Where it sits: tests/harness, beside the tests of lib/ddp. */
#ifndef TEST_MODEL_FIXTURE_H
#define TEST_MODEL_FIXTURE_H

#include "base/error.h"
#include "ddp/model.h"
#include "transfer/device.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* model_create on a fresh simulated device and compute stream: the same
 * returns (a bad spec or batch is model_create's ERR_ARG). */
static inline int fixture_model_create(const struct model_spec *spec, int max_batch, model_t **out)
{
    struct device_config dc;
    device_config_default(&dc);
    dc.backend = "sim";
    device_t *dev = NULL;
    device_stream_t *s = NULL;
    *out = NULL;
    int rc = device_open(&dc, &dev);
    if (rc == 0)
        rc = device_stream_create(dev, "compute", &s);
    if (rc == 0)
        rc = model_create(spec, max_batch, s, out);
    if (rc < 0) {
        device_stream_destroy(s);
        device_close(dev);
    }
    return rc;
}

/* model_destroy, then the stream and the device. NULL is a no-op. */
static inline void fixture_model_destroy(model_t *m)
{
    if (!m)
        return;
    device_stream_t *s = model_stream(m);
    device_t *dev = device_stream_device(s);
    model_destroy(m);
    device_stream_destroy(s);
    device_close(dev);
}

/* The batch's labels into the model's device memory (host -> device), then
 * model_loss: the tests' labels are host arrays. */
static inline int fixture_loss(model_t *m, const int64_t *labels, int batch, float scale, struct model_loss *out)
{
    int rc = model_sync(m);
    if (rc == 0 && batch > 0)
        rc = device_copy(device_stream_device(model_stream(m)), model_labels(m), labels,
                         (uint64_t)batch * sizeof *labels, DEVICE_H2D);
    return rc < 0 ? rc : model_loss(m, batch, scale, out);
}

/* ---- the host's view: every number through a copy, as lib/ddp reads them -------------- */

/* The floats of a part: model_param_floats for the parameters and the
 * gradients, model_buffer_floats for the buffers. */
static inline size_t fixture_part_floats(const model_t *m, enum model_part part)
{
    return part == MODEL_BUFFERS ? model_buffer_floats(m) : model_param_floats(m);
}

/* A whole part copied to the host into *out, malloc'd (the caller frees
 * it): 0, ERR_NOMEM, or the copy's error (*out NULL). */
static inline int fixture_part(const model_t *m, enum model_part part, float **out)
{
    size_t n = fixture_part_floats(m, part);
    float *host = malloc((n ? n : 1) * sizeof *host);
    int rc = host ? model_read(m, part, 0, n, host)
                  : err_set(ERR_NOMEM, "model fixture: out of memory for %zu floats", n);
    if (rc < 0) {
        free(host);
        host = NULL;
    }
    *out = host;
    return rc;
}

/* One float of a part; NaN when the copy fails, which equals nothing a
 * check compares it with. */
static inline float fixture_get(const model_t *m, enum model_part part, size_t at)
{
    float v;
    return model_read(m, part, at, 1, &v) == 0 ? v : NAN;
}

/* Sets one float of a part: 0, or model_write's error. */
static inline int fixture_set(model_t *m, enum model_part part, size_t at, float value)
{
    return model_write(m, part, at, 1, &value);
}

/* 1 when a part of a and the same part of b hold the same bits, 0 when
 * not (or their sizes differ), or the copies' negative error. */
static inline int fixture_same(const model_t *a, const model_t *b, enum model_part part)
{
    size_t n = fixture_part_floats(a, part);
    if (n != fixture_part_floats(b, part))
        return 0;
    float *x = NULL, *y = NULL;
    int rc = fixture_part(a, part, &x);
    if (rc == 0)
        rc = fixture_part(b, part, &y);
    if (rc == 0)
        rc = memcmp(x, y, n * sizeof *x) == 0;
    free(x);
    free(y);
    return rc;
}

/* Parameter t's gradient, wherever the layout puts it (model_grad_offset):
 * numel floats from or to the host. 0, or the copy's error. */
static inline int fixture_read_grad(const model_t *m, int t, float *host)
{
    return model_read(m, MODEL_GRADS, model_grad_offset(m, t), model_param(m, t)->numel, host);
}

static inline int fixture_write_grad(model_t *m, int t, const float *host)
{
    return model_write(m, MODEL_GRADS, model_grad_offset(m, t), model_param(m, t)->numel, host);
}

/* `bytes` of the model's device memory at `dev` copied to the host once its
 * stream is done: for what model_read does not cover (the input). */
static inline int fixture_download(const model_t *m, void *host, const void *dev, size_t bytes)
{
    int rc = model_sync(m);
    return rc < 0 ? rc : device_copy(device_stream_device(model_stream(m)), host, dev, bytes, DEVICE_D2H);
}

#endif
