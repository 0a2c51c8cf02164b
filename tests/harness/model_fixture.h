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

#include "ddp/model.h"
#include "transfer/device.h"

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

#endif
