/* model_fixture: a model on its own simulated device (see model_fixture.h). */
#include "model_fixture.h"

#include "transfer/device.h"

int fixture_model_create(const struct model_spec *spec, int max_batch, model_t **out)
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

void fixture_model_destroy(model_t *m)
{
    if (!m)
        return;
    device_stream_t *s = model_stream(m);
    device_t *dev = device_stream_device(s);
    model_destroy(m);
    device_stream_destroy(s);
    device_close(dev);
}

int fixture_loss(model_t *m, const int64_t *labels, int batch, float scale, struct model_loss *out)
{
    int rc = model_sync(m);
    if (rc == 0 && batch > 0)
        rc = device_copy(device_stream_device(model_stream(m)), model_labels(m), labels,
                         (uint64_t)batch * sizeof *labels, DEVICE_H2D);
    return rc < 0 ? rc : model_loss(m, batch, scale, out);
}
