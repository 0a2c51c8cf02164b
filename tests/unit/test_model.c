/* test_model: lib/ddp/model. The spec parser; PyTorch's initialisation bit
 * for bit (vectors printed by torch 1.13: torch.manual_seed(s), then the
 * Linear layers built in order, elements as float32 bits); every gradient
 * against central differences of an independent double-precision forward
 * written here (with and without BatchNorm); the ready order; accumulation;
 * gradient layouts; BatchNorm's running statistics; bad input; a batch
 * taken from host or device memory. The model lives on a simulated device
 * (model_fixture.h), and the test sees its numbers only through copies, as
 * lib/ddp does. */
#include "check.h"
#include "model_fixture.h"
#include "base/error.h"
#include "base/hash.h"
#include "ddp/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

TEST(model_spec_parse_and_check)
{
    struct model_spec s;
    model_spec_default(&s);
    char buf[128];
    CHECK_STR(model_spec_describe(&s, buf, sizeof buf), "784-256-128-10");
    CHECK_OK(model_spec_parse_hidden(&s, "512,64,32", "hidden"));
    CHECK_EQ(s.nhidden, 3);
    CHECK_EQ(s.hidden[2], 32);
    s.batchnorm = 1;
    CHECK_STR(model_spec_describe(&s, buf, sizeof buf), "784-512-64-32-10 with BatchNorm1d");
    static const char *const bad[] = {"0", "", "256,,128", "-5", "256,", "70000", "12x", "256, 128", " 256", NULL};
    for (const char *const *t = bad; *t; t++)
        CHECK_ERR(model_spec_parse_hidden(&s, *t, "hidden"), ERR_ARG,
                  "--hidden: expected a comma-separated list of 1 to 65536, got '");
    CHECK_ERR(model_spec_parse_hidden(&s, "1,2,3,4,5,6,7,8,9", "hidden"), ERR_ARG, "--hidden: at most 8 values");
    CHECK_EQ(s.nhidden, 3); /* a refused list changes nothing */
    CHECK_EQ(s.hidden[0], 512);
    model_t *m;
    s.classes = 1;
    CHECK_ERR(fixture_model_create(&s, 8, &m), ERR_ARG, "1 classes");
    model_spec_default(&s);
    CHECK_ERR(fixture_model_create(&s, 0, &m), ERR_ARG, "batch of 0");
}

TEST(model_tables_follow_pytorch_names_and_layout)
{
    struct model_spec s;
    model_spec_default(&s);
    model_t *m;
    CHECK_OK(fixture_model_create(&s, 4, &m));
    CHECK_EQ(model_param_tensors(m), 6);
    CHECK_EQ_U64(model_param_floats(m), 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10); /* 235146 */
    CHECK_EQ_U64(model_spec_param_floats(&s), model_param_floats(m)); /* the size known before the model is made */
    const char *names[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"};
    size_t offset = 0;
    for (int t = 0; t < 6; t++) {
        CHECK_STR(model_param(m, t)->name, names[t]);
        CHECK_EQ_U64(model_param(m, t)->offset, offset);
        CHECK_EQ_U64(model_grad_offset(m, t), offset);
        offset += model_param(m, t)->numel;
    }
    CHECK_EQ(model_param(m, 0)->shape[0], 256); /* [out, in] */
    CHECK_EQ(model_param(m, 0)->shape[1], 784);
    CHECK_EQ(model_param(m, 1)->ndim, 1);
    CHECK_EQ(model_buffer_tensors(m), 0);
    CHECK_EQ(model_param_find(m, "fc2.bias"), 3);
    CHECK_EQ(model_param_find(m, "fc4.bias"), -1);
    fixture_model_destroy(m);
    s.batchnorm = 1;
    CHECK_OK(fixture_model_create(&s, 4, &m));
    const char *bn_names[] = {"fc1.weight", "fc1.bias", "bn1.weight", "bn1.bias", "fc2.weight",
                              "fc2.bias",   "bn2.weight", "bn2.bias", "fc3.weight", "fc3.bias"};
    CHECK_EQ(model_param_tensors(m), 10);
    CHECK_EQ_U64(model_spec_param_floats(&s), model_param_floats(m));
    for (int t = 0; t < 10; t++)
        CHECK_STR(model_param(m, t)->name, bn_names[t]);
    CHECK_EQ(model_buffer_tensors(m), 4);
    CHECK_STR(model_buffer(m, 0)->name, "bn1.running_mean");
    CHECK_STR(model_buffer(m, 3)->name, "bn2.running_var");
    CHECK_EQ(model_buffer_find(m, "bn2.running_mean"), 2);
    CHECK_EQ_U64(model_buffer_floats(m), 2 * 256 + 2 * 128);
    fixture_model_destroy(m);
}

struct torch_init_vector {
    uint64_t seed;
    const char *name;
    size_t index[4];
    uint32_t bits[4];
};

static const struct torch_init_vector torch_init[] = {
    {0, "fc1.weight", {0, 1, 1000, 200703}, {0xb98c3000, 0x3c9cf2b5, 0xbb46fd37, 0xbc679185}},
    {0, "fc1.bias", {0, 1, 232, 255}, {0xbc3ffbee, 0x3c596a17, 0x3a970d25, 0x3c5cd421}},
    {0, "fc2.weight", {0, 1, 1000, 32767}, {0xbc7bd890, 0x3c1e87b8, 0x3c9fe108, 0x3c719238}},
    {0, "fc2.bias", {0, 1, 104, 127}, {0xbd7603a4, 0x3d3778f8, 0xbd747770, 0x3d01b618}},
    {0, "fc3.weight", {0, 1, 1000, 1279}, {0x3d776a54, 0xbc5d4eb8, 0x3d4e171d, 0x3d3c6f4f}},
    {0, "fc3.bias", {0, 1, 0, 9}, {0xbd9e073f, 0xbd176eb8, 0xbd9e073f, 0xbda82f31}},
    {12345, "fc1.weight", {0, 1, 1000, 200703}, {0x3d0cefde, 0x3cde1fc3, 0x3c30c4a1, 0xbcddf60a}},
    {12345, "fc2.bias", {0, 1, 104, 127}, {0x3c7bd6b8, 0x3aad2940, 0x3d59beaa, 0x3d5d96c6}},
    {12345, "fc3.weight", {0, 1, 1000, 1279}, {0x3b168efa, 0x3b4e4250, 0x3da81998, 0xbd9cc501}},
};

TEST(model_init_is_pytorch_bit_for_bit)
{
    struct model_spec s;
    model_spec_default(&s);
    model_t *m;
    CHECK_OK(fixture_model_create(&s, 4, &m));
    for (size_t v = 0; v < sizeof torch_init / sizeof torch_init[0]; v++) {
        const struct torch_init_vector *tv = &torch_init[v];
        CHECK_OK(model_init(m, tv->seed));
        int t = model_param_find(m, tv->name);
        CHECK(t >= 0);
        for (int k = 0; k < 4; k++) {
            uint32_t got;
            float p;
            CHECK_OK(model_read(m, MODEL_PARAMS, model_param(m, t)->offset + tv->index[k], 1, &p));
            memcpy(&got, &p, 4);
            CHECK_MSG(got == tv->bits[k], "seed %llu: %s[%zu] is 0x%08x, torch has 0x%08x",
                      (unsigned long long)tv->seed, tv->name, tv->index[k], got, tv->bits[k]);
        }
    }
    /* BatchNorm: weight 1, bias 0, running mean 0, variance 1, as torch */
    s.batchnorm = 1;
    fixture_model_destroy(m);
    CHECK_OK(fixture_model_create(&s, 4, &m));
    CHECK_OK(model_init(m, 0));
    CHECK(fixture_get(m, MODEL_PARAMS, model_param(m, model_param_find(m, "bn2.weight"))->offset + 7) == 1.0f);
    CHECK(fixture_get(m, MODEL_BUFFERS, model_buffer(m, model_buffer_find(m, "bn1.running_var"))->offset + 3) == 1.0f);
    /* the BatchNorm layers draw nothing: the Linear layers are the same as without them */
    int fc3 = model_param_find(m, "fc3.weight");
    uint32_t got;
    float p = fixture_get(m, MODEL_PARAMS, model_param(m, fc3)->offset + 1000);
    memcpy(&got, &p, 4);
    CHECK_EQ_U64(got, 0x3d4e171du);
    fixture_model_destroy(m);
}

/* ---- gradients against an independent double-precision forward ------------------ */

static const int test_sizes[] = {12, 7, 5, 3}; /* inputs, hidden, hidden, classes */
enum { TB = 6 };                               /* batch */

/* Mean cross-entropy of the model with parameters p (laid out as model.h
 * says), in double, training-mode BatchNorm when bn. */
static double ref_loss(const model_t *m, const double *p, const float *x, const int64_t *y, int bn)
{
    double act[TB][16], next[TB][16];
    for (int b = 0; b < TB; b++)
        for (int i = 0; i < test_sizes[0]; i++)
            act[b][i] = x[b * test_sizes[0] + i];
    for (int l = 0; l < 3; l++) {
        int in = test_sizes[l], out = test_sizes[l + 1];
        char name[32];
        snprintf(name, sizeof name, "fc%d.weight", l + 1);
        const double *w = p + model_param(m, model_param_find(m, name))->offset;
        snprintf(name, sizeof name, "fc%d.bias", l + 1);
        const double *bias = p + model_param(m, model_param_find(m, name))->offset;
        for (int b = 0; b < TB; b++)
            for (int j = 0; j < out; j++) {
                double z = bias[j];
                for (int i = 0; i < in; i++)
                    z += w[j * in + i] * act[b][i];
                next[b][j] = z;
            }
        if (l < 2) {
            if (bn) {
                snprintf(name, sizeof name, "bn%d.weight", l + 1);
                const double *g = p + model_param(m, model_param_find(m, name))->offset;
                snprintf(name, sizeof name, "bn%d.bias", l + 1);
                const double *be = p + model_param(m, model_param_find(m, name))->offset;
                for (int j = 0; j < out; j++) {
                    double mean = 0, var = 0;
                    for (int b = 0; b < TB; b++)
                        mean += next[b][j] / TB;
                    for (int b = 0; b < TB; b++)
                        var += (next[b][j] - mean) * (next[b][j] - mean) / TB;
                    for (int b = 0; b < TB; b++)
                        next[b][j] = (next[b][j] - mean) / sqrt(var + MODEL_BN_EPS) * g[j] + be[j];
                }
            }
            for (int b = 0; b < TB; b++)
                for (int j = 0; j < out; j++)
                    next[b][j] = next[b][j] > 0 ? next[b][j] : 0;
        }
        memcpy(act, next, sizeof act);
    }
    double loss = 0;
    for (int b = 0; b < TB; b++) {
        double mx = act[b][0], s = 0;
        for (int c = 1; c < 3; c++)
            mx = act[b][c] > mx ? act[b][c] : mx;
        for (int c = 0; c < 3; c++)
            s += exp(act[b][c] - mx);
        loss += mx + log(s) - act[b][y[b]];
    }
    return loss / TB;
}

/* The 12-7-5-3 model from `seed`, its input x and labels y uploaded (float input, no bytes). */
static model_t *small_model(int bn, uint64_t seed, float *x, int64_t *y)
{
    struct model_spec s = {.inputs = 12, .classes = 3, .hidden = {7, 5}, .nhidden = 2, .batchnorm = bn};
    model_t *m;
    CHECK_OK(fixture_model_create(&s, TB, &m));
    CHECK_OK(model_init(m, seed));
    if (bn) { /* non-trivial affine parameters */
        float *p;
        CHECK_OK(fixture_part(m, MODEL_PARAMS, &p));
        for (int t = 0; t < model_param_tensors(m); t++)
            if (strncmp(model_param(m, t)->name, "bn", 2) == 0)
                for (size_t i = 0; i < model_param(m, t)->numel; i++)
                    p[model_param(m, t)->offset + i] += 0.1f * (float)((i * 7 + (size_t)t) % 5) - 0.2f;
        CHECK_OK(model_write(m, MODEL_PARAMS, 0, model_param_floats(m), p));
        free(p);
    }
    uint64_t st = seed + 99;
    for (int i = 0; i < TB * 12; i++)
        x[i] = (float)(hash_splitmix64_next(&st) % 2001) / 1000.0f - 1.0f;
    for (int b = 0; b < TB; b++)
        y[b] = (int64_t)(hash_splitmix64_next(&st) % 3);
    CHECK_OK(model_upload_batch(m, NULL, x, y, TB));
    return m;
}

static void check_gradients(int bn)
{
    float x[TB * 12];
    int64_t y[TB];
    model_t *m = small_model(bn, 3, x, y);
    struct model_loss loss;
    CHECK_OK(model_forward(m, TB, MODEL_TRAIN));
    CHECK_OK(model_loss(m, TB, 1.0f, &loss));
    CHECK_OK(model_backward(m, TB, 0, NULL, NULL));
    size_t n = model_param_floats(m);
    double *p = malloc(n * sizeof *p);
    float *params, *grad = malloc(n * sizeof *grad);
    CHECK_OK(fixture_part(m, MODEL_PARAMS, &params));
    for (size_t i = 0; i < n; i++)
        p[i] = params[i];
    double ref = ref_loss(m, p, x, y, bn);
    CHECK_MSG(fabs(ref - loss.loss) < 1e-5, "loss %.9g, double reference %.9g", loss.loss, ref);
    for (int t = 0; t < model_param_tensors(m); t++) {
        const struct model_tensor *pt = model_param(m, t);
        CHECK_OK(fixture_read_grad(m, t, grad));
        for (size_t i = 0; i < pt->numel; i++) {
            size_t k = pt->offset + i;
            double h = 1e-6, keep = p[k];
            p[k] = keep + h;
            double up = ref_loss(m, p, x, y, bn);
            p[k] = keep - h;
            double down = ref_loss(m, p, x, y, bn);
            p[k] = keep;
            double num = (up - down) / (2 * h), got = grad[i];
            CHECK_MSG(fabs(got - num) <= 2e-6 + 1e-4 * fabs(num), "%s%s[%zu]: backward %.9g, finite differences %.9g",
                      bn ? "(BatchNorm) " : "", pt->name, i, got, num);
        }
    }
    free(p);
    free(params);
    free(grad);
    fixture_model_destroy(m);
}

TEST(model_gradients_match_finite_differences) { check_gradients(0); }
TEST(model_gradients_match_finite_differences_batchnorm) { check_gradients(1); }

struct ready_log {
    int order[MODEL_MAX_TENSORS], n, stop_at;
};

static int ready_record(void *arg, int t)
{
    struct ready_log *l = arg;
    l->order[l->n++] = t;
    return l->n == l->stop_at ? err_set(ERR_PEER, "stop here") : 0;
}

TEST(model_ready_fires_in_reverse_parameter_order)
{
    for (int bn = 0; bn < 2; bn++) {
        float x[TB * 12];
        int64_t y[TB];
        model_t *m = small_model(bn, 1, x, y);
        struct model_loss loss;
        struct ready_log log = {.stop_at = -1};
        CHECK_OK(model_forward(m, TB, MODEL_TRAIN));
        CHECK_OK(model_loss(m, TB, 1.0f, &loss));
        CHECK_OK(model_backward(m, TB, 0, ready_record, &log));
        CHECK_EQ(log.n, model_param_tensors(m));
        for (int k = 0; k < log.n; k++)
            CHECK_MSG(log.order[k] == log.n - 1 - k, "ready call %d was %s, expected %s", k,
                      model_param(m, log.order[k])->name, model_param(m, log.n - 1 - k)->name);
        /* a hook's error stops backward and comes back */
        struct ready_log stop = {.stop_at = 2};
        CHECK_OK(model_forward(m, TB, MODEL_TRAIN));
        CHECK_OK(model_loss(m, TB, 1.0f, &loss));
        CHECK_ERR(model_backward(m, TB, 0, ready_record, &stop), ERR_PEER, "stop here");
        CHECK_EQ(stop.n, 2);
        fixture_model_destroy(m);
    }
}

TEST(model_accumulate_adds_and_layouts_move_gradients)
{
    float x[TB * 12];
    int64_t y[TB];
    model_t *m = small_model(1, 5, x, y);
    struct model_loss loss;
    size_t n = model_param_floats(m);
    float *once, *twice, *g = malloc(n * sizeof *g);
    CHECK_OK(model_forward(m, TB, MODEL_TRAIN));
    CHECK_OK(model_loss(m, TB, 1.0f, &loss));
    CHECK_OK(model_backward(m, TB, 0, NULL, NULL));
    CHECK_OK(fixture_part(m, MODEL_GRADS, &once));
    /* a second backward of the same batch, accumulating: exactly twice (g + g is exact) */
    CHECK_OK(model_forward(m, TB, MODEL_TRAIN));
    CHECK_OK(model_loss(m, TB, 1.0f, &loss));
    CHECK_OK(model_backward(m, TB, 1, NULL, NULL));
    CHECK_OK(fixture_part(m, MODEL_GRADS, &twice));
    for (size_t i = 0; i < n; i++)
        CHECK_MSG(twice[i] == 2 * once[i], "element %zu: %g after accumulating, %g once", i, twice[i], once[i]);
    /* the gradients laid out in reverse: same values per parameter */
    size_t offs[MODEL_MAX_TENSORS], at = 0;
    for (int t = model_param_tensors(m) - 1; t >= 0; t--) {
        offs[t] = at;
        at += model_param(m, t)->numel;
    }
    CHECK_OK(model_set_grad_layout(m, offs));
    for (int t = 0; t < model_param_tensors(m); t++) { /* the accumulated values moved with their parameter */
        CHECK_EQ_U64(model_grad_offset(m, t), offs[t]);
        CHECK_OK(fixture_read_grad(m, t, g));
        for (size_t i = 0; i < model_param(m, t)->numel; i++)
            CHECK(g[i] == 2 * once[model_param(m, t)->offset + i]);
    }
    CHECK(model_grad(m, 0) == model_grads(m) + offs[0]);
    CHECK_OK(model_forward(m, TB, MODEL_TRAIN));
    CHECK_OK(model_loss(m, TB, 1.0f, &loss));
    CHECK_OK(model_backward(m, TB, 0, NULL, NULL));
    for (int t = 0; t < model_param_tensors(m); t++) {
        CHECK_OK(fixture_read_grad(m, t, g));
        CHECK_MSG(memcmp(g, once + model_param(m, t)->offset, model_param(m, t)->numel * 4) == 0,
                  "%s's gradient changed with the layout", model_param(m, t)->name);
    }
    /* layouts that do not tile the buffer are refused */
    offs[1] = offs[0];
    CHECK_ERR(model_set_grad_layout(m, offs), ERR_ARG, "gradient layout");
    offs[1] = n + 10;
    CHECK_ERR(model_set_grad_layout(m, offs), ERR_ARG, "gradient layout");
    free(once);
    free(twice);
    free(g);
    fixture_model_destroy(m);
}

TEST(model_batchnorm_running_statistics_and_eval)
{
    float x[TB * 12];
    int64_t y[TB];
    model_t *m = small_model(1, 8, x, y);
    CHECK_OK(model_forward(m, TB, MODEL_TRAIN));
    CHECK_EQ(model_batches_tracked(m), 1);
    /* bn1's running statistics: 0.9 x (0, 1) + 0.1 x (batch mean, unbiased variance) of fc1's output */
    float *params, *buffers;
    CHECK_OK(fixture_part(m, MODEL_PARAMS, &params));
    CHECK_OK(fixture_part(m, MODEL_BUFFERS, &buffers));
    const float *w = params + model_param(m, 0)->offset, *bias = params + model_param(m, 1)->offset;
    const float *rm = buffers, *rv = buffers + model_buffer(m, 1)->offset;
    for (int j = 0; j < 7; j++) {
        double z[TB], mean = 0, var = 0;
        for (int b = 0; b < TB; b++) {
            z[b] = bias[j];
            for (int i = 0; i < 12; i++)
                z[b] += (double)w[j * 12 + i] * x[b * 12 + i];
            mean += z[b] / TB;
        }
        for (int b = 0; b < TB; b++)
            var += (z[b] - mean) * (z[b] - mean) / (TB - 1);
        CHECK_MSG(fabs(rm[j] - 0.1 * mean) < 1e-6, "running_mean[%d] %g, expected %g", j, rm[j], 0.1 * mean);
        CHECK_MSG(fabs(rv[j] - (0.9 + 0.1 * var)) < 1e-6, "running_var[%d] %g, expected %g", j, rv[j],
                  0.9 + 0.1 * var);
    }
    /* eval: no statistics move, the counter stays, the batch is normalised with the running ones */
    float *after;
    CHECK_OK(model_forward(m, 1, MODEL_EVAL)); /* one sample is fine in eval */
    CHECK_OK(fixture_part(m, MODEL_BUFFERS, &after));
    CHECK(memcmp(buffers, after, model_buffer_floats(m) * 4) == 0);
    CHECK_EQ(model_batches_tracked(m), 1);
    CHECK_ERR(model_forward(m, 1, MODEL_TRAIN), ERR_ARG, "more than 1 value per channel");
    struct model_loss loss;
    CHECK_ERR(model_backward(m, 1, 0, NULL, NULL), ERR_STATE, "needs a TRAIN forward");
    CHECK_OK(model_loss(m, 1, 1.0f, &loss));
    CHECK_ERR(model_backward(m, 1, 0, NULL, NULL), ERR_STATE, "needs a TRAIN forward");
    free(params);
    free(buffers);
    free(after);
    fixture_model_destroy(m);
}

TEST(model_bad_input_is_refused)
{
    float x[TB * 12];
    int64_t y[TB];
    model_t *m = small_model(0, 2, x, y);
    struct model_loss loss;
    CHECK_ERR(model_forward(m, TB + 1, MODEL_TRAIN), ERR_ARG, "batch of 7 samples (this model takes 1 to 6)");
    CHECK_ERR(model_loss(m, TB, 1.0f, &loss), ERR_STATE, "did not run");
    CHECK_OK(model_forward(m, TB, MODEL_TRAIN));
    y[4] = 3;
    CHECK_ERR(fixture_loss(m, y, TB, 1.0f, &loss), ERR_RANGE, "sample 4 of the batch has label 3, outside 0..2");
    y[4] = -1;
    CHECK_ERR(fixture_loss(m, y, TB, 1.0f, &loss), ERR_RANGE, "label -1");
    CHECK_ERR(model_backward(m, TB, 0, NULL, NULL), ERR_STATE, "model_loss of that batch first");
    uint8_t bytes[TB * 12] = {0};
    CHECK_ERR(model_upload_batch(m, bytes, NULL, y, 0), ERR_ARG, "batch of 0");
    CHECK_ERR(model_upload_batch(m, bytes, NULL, y, TB + 1), ERR_ARG, "batch of 7 samples");
    CHECK_ERR(model_take_batch(m, NULL, NULL, 0, 0), ERR_ARG, "batch of 0");
    fixture_model_destroy(m);
}

/* The same batch reaches model a from host memory (model_upload_batch) and
 * model b from device memory (model_take_batch, the prefetcher's way): the
 * same input, bytes / 255, and the two runs the same bits. */
TEST(model_inputs_are_bytes_over_255_and_runs_repeat_bit_for_bit)
{
    struct model_spec s;
    model_spec_default(&s);
    model_t *a, *b;
    CHECK_OK(fixture_model_create(&s, 32, &a));
    CHECK_OK(fixture_model_create(&s, 32, &b));
    uint8_t *bytes = malloc(32 * 784);
    float *in = malloc(32 * 784 * sizeof *in);
    int64_t y[32];
    for (int i = 0; i < 32 * 784; i++)
        bytes[i] = (uint8_t)(i * 37 + i / 784);
    for (int i = 0; i < 32; i++)
        y[i] = i % 10;
    CHECK_OK(model_upload_batch(a, bytes, NULL, y, 32));
    CHECK_OK(fixture_download(a, in, model_input(a), 32 * 784 * sizeof *in));
    for (int i = 0; i < 32 * 784; i++)
        CHECK(in[i] == (float)bytes[i] / 255.0f);
    device_t *dev = device_stream_device(model_stream(b));
    uint8_t *dev_bytes;
    int64_t *dev_labels;
    CHECK_OK(device_malloc(dev, 32 * 784, "batch bytes", (void **)&dev_bytes));
    CHECK_OK(device_malloc(dev, sizeof y, "batch labels", (void **)&dev_labels));
    CHECK_OK(device_copy(dev, dev_bytes, bytes, 32 * 784, DEVICE_H2D));
    CHECK_OK(device_copy(dev, dev_labels, y, sizeof y, DEVICE_H2D));
    CHECK_OK(model_take_batch(b, dev_bytes, dev_labels, 32, 0));
    CHECK_OK(model_init(a, 7));
    CHECK_OK(model_init(b, 7));
    struct model_loss la, lb;
    for (model_t *m = a; m; m = m == a ? b : NULL) {
        model_timing_reset(m);
        CHECK_OK(model_forward(m, 32, MODEL_TRAIN));
        CHECK_OK(model_loss(m, 32, 1.0f, m == a ? &la : &lb));
        CHECK_OK(model_backward(m, 32, 0, NULL, NULL));
        CHECK_OK(model_sync(m));
        /* the simulated device counts the products: 3 forward, 3 for the weights' gradients, 2 for the
         * activations' (the input needs none) */
        CHECK_EQ_U64(model_timing_get(m).gemm_calls, 8);
    }
    CHECK(la.loss == lb.loss);
    CHECK(la.loss > 2.0 && la.loss < 2.6); /* about log(10) at the start */
    CHECK(la.correct == lb.correct);
    CHECK_EQ(fixture_same(a, b, MODEL_GRADS), 1);
    float za[10 * 32], zb[10 * 32];
    CHECK_OK(model_read_layer(a, 2, za));
    CHECK_OK(model_read_layer(b, 2, zb));
    CHECK(memcmp(za, zb, sizeof za) == 0);
    CHECK_ERR(model_read_layer(a, 3, za), ERR_ARG, "layer 3 of 3");
    CHECK_OK(model_sync(b)); /* the batch's device buffers were read on b's stream */
    device_free(dev, dev_bytes);
    device_free(dev, dev_labels);
    free(bytes);
    free(in);
    fixture_model_destroy(a);
    fixture_model_destroy(b);
}

TEST(model_blas_is_described)
{
    char buf[512];
    CHECK_CONTAINS(model_blas_describe(buf, sizeof buf), "OpenBLAS");
    CHECK_CONTAINS(buf, "core ");
}
