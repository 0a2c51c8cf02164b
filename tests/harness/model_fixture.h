/* model_fixture: a model on a simulated device of its own, for the unit
 * tests of lib/ddp (the model lives in device memory since chapter 6 runs
 * on any device; the tests run it on the simulated one).
 *
 * Where it sits: tests/harness, linked into every unit test. */
#ifndef TEST_MODEL_FIXTURE_H
#define TEST_MODEL_FIXTURE_H

#include "ddp/model.h"

/* model_create on a fresh simulated device and compute stream: the same
 * returns (a bad spec or batch is model_create's ERR_ARG). */
int fixture_model_create(const struct model_spec *spec, int max_batch, model_t **out);

/* model_destroy, then the stream and the device. NULL is a no-op. */
void fixture_model_destroy(model_t *m);

/* The batch's labels into the model's device memory (host -> device), then
 * model_loss: the tests' labels are host arrays. */
int fixture_loss(model_t *m, const int64_t *labels, int batch, float scale, struct model_loss *out);

#endif
