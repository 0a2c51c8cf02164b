/* test_torch_cases: the C side of the PyTorch equivalence check
 * (tests/crosscheck/ddp_torch.sh). Each case trains the model a few steps
 * from PyTorch's initialisation on fixed batches and writes, as one
 * safetensors file, the batches and the whole run: the state before every
 * step (parameters, BatchNorm's buffers, the optimizer's state), every step's
 * logits, loss, gradient and the units each ReLU passed, and the final state; and a model file written by
 * checkpoint_save_model for torch's load_state_dict. ddp_torch.py checks
 * each step from the state our run reached (tests/crosscheck/
 * step_reference.py says why not from its own run). The files go to
 * $DDP_TORCH_DIR when it is set (the cross-check), else to a temporary
 * directory, where this test checks that a second run writes the same bits
 * and that training lowered the loss.
 *
 * torch_file_loads reads a file PyTorch wrote ($DDP_TORCH_DIR/
 * torch_written.safetensors, or the committed tests/crosscheck/
 * torch_written.safetensors made by `ddp_torch.py --fixture`) with
 * checkpoint_load_model and checks each tensor against the sums torch put in
 * its metadata. The model runs on a simulated device (model_fixture.h), and
 * every number written comes off it through a copy. */
#include "check.h"
#include "model_fixture.h"
#include "base/error.h"
#include "base/hash.h"
#include "ddp/checkpoint.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

struct torch_case {
    const char *name;
    int hidden[2], nhidden, batchnorm, batch, steps;
    enum optim_kind kind;
    double lr, momentum, weight_decay;
    int nesterov;
};

static const struct torch_case cases[] = {
    {"sgd_momentum", {256, 128}, 2, 0, 32, 5, OPTIM_SGD, 0.05, 0.9, 0, 0},
    {"sgd_decay_nesterov", {256, 128}, 2, 0, 32, 5, OPTIM_SGD, 0.05, 0.9, 1e-3, 1},
    {"adam", {256, 128}, 2, 0, 32, 5, OPTIM_ADAM, 1e-3, 0, 0, 0},
    {"batchnorm_sgd", {256, 128}, 2, 1, 32, 5, OPTIM_SGD, 0.05, 0.9, 0, 0},
    {"batchnorm_adam_decay", {256, 128}, 2, 1, 32, 5, OPTIM_ADAM, 1e-3, 0, 1e-4, 0},
    {"one_hidden_plain_sgd", {64, 0}, 1, 0, 7, 4, OPTIM_SGD, 0.1, 0, 0, 0},
};
#define NCASES (sizeof cases / sizeof cases[0])
#define CASE_SEED 3

/* the case's batches: bytes and labels from one splitmix64 stream, with a
 * pattern per class so training has something to learn */
static void case_data(const struct torch_case *tc, uint8_t *x, int64_t *y)
{
    uint64_t st = 77;
    size_t n = (size_t)tc->steps * (size_t)tc->batch;
    for (size_t s = 0; s < n; s++) {
        y[s] = (int64_t)(hash_splitmix64_next(&st) % 10);
        for (int i = 0; i < 784; i++) {
            uint64_t r = hash_splitmix64_next(&st);
            x[s * 784 + (size_t)i] = (uint8_t)((i % 10 == y[s] ? 128 : 0) + (int)(r % 128));
        }
    }
}

/* What a case's run went through: the state before each step k (parameters,
 * BatchNorm's buffers, the optimizer's state; k = steps is the final one),
 * and each step's logits, loss and gradient. Arrays of steps + 1 (or steps)
 * copies, each in the parameter layout (model_param(m, t)->offset). */
struct case_run {
    model_t *m;
    int steps, nstate;
    char state_name[2][24]; /* the optimizer's, as PyTorch's state_dict names them */
    size_t nparam, nbuffer;
    float *param, *buffer, *state, *grad, *logits;
    uint8_t *relu[2]; /* [steps][B x hidden[l]]: 1 where hidden layer l's ReLU passed sample b's unit */
    double loss[8];
};

static float *case_alloc(size_t copies, size_t n)
{
    float *p = calloc(copies * n + 1, sizeof(float)); /* + 1: calloc(0) may return NULL */
    CHECK_MSG(p != NULL, "out of memory for %zu x %zu floats", copies, n);
    return p;
}

/* Copies the state of m and o into copy k of r's arrays. */
static void case_keep_state(struct case_run *r, optim_t *o, int k)
{
    CHECK_OK(model_read(r->m, MODEL_PARAMS, 0, r->nparam, r->param + (size_t)k * r->nparam));
    CHECK_OK(model_read(r->m, MODEL_BUFFERS, 0, r->nbuffer, r->buffer + (size_t)k * r->nbuffer));
    for (int s = 0; s < r->nstate; s++)
        CHECK_OK(optim_state_read(o, s, r->state + ((size_t)s * (size_t)(r->steps + 1) + (size_t)k) * r->nparam));
}

/* Step `step`'s logits and ReLU masks into r, from the forward just run:
 * one copy off the device per layer (model_read_layer). */
static void case_keep_forward(struct case_run *r, const struct torch_case *tc, int step)
{
    int B = tc->batch, width = 10;
    for (int l = 0; l < tc->nhidden; l++)
        width = tc->hidden[l] > width ? tc->hidden[l] : width;
    float *z = malloc((size_t)width * (size_t)B * sizeof *z);
    CHECK(z != NULL);
    CHECK_OK(model_read_layer(r->m, tc->nhidden, z)); /* the logits, [10 x B] */
    for (int b = 0; b < B; b++)
        for (int k = 0; k < 10; k++) {
            float v = z[(size_t)k * (size_t)B + (size_t)b];
            CHECK_MSG(v == v, "%s step %d: logit %d of sample %d is NaN", tc->name, step, k, b);
            r->logits[((size_t)step * (size_t)B + (size_t)b) * 10 + (size_t)k] = v;
        }
    for (int l = 0; l < tc->nhidden; l++) {
        CHECK_OK(model_read_layer(r->m, l, z)); /* [hidden x B], after ReLU */
        for (int b = 0; b < B; b++)
            for (int j = 0; j < tc->hidden[l]; j++) {
                float a = z[(size_t)j * (size_t)B + (size_t)b];
                CHECK_MSG(a == a, "%s step %d: hidden layer %d's unit %d of sample %d is NaN", tc->name, step, l + 1,
                          j, b);
                r->relu[l][((size_t)step * (size_t)B + (size_t)b) * (size_t)tc->hidden[l] + (size_t)j] = a > 0;
            }
    }
    free(z);
}

/* Runs case tc into *out; `forwards`: with every step's logits and ReLU masks (the file's). */
static void case_train(const struct torch_case *tc, const uint8_t *x, const int64_t *y, int forwards,
                       struct case_run *out)
{
    struct model_spec s = {.inputs = 784, .classes = 10, .nhidden = tc->nhidden, .batchnorm = tc->batchnorm};
    memcpy(s.hidden, tc->hidden, sizeof tc->hidden);
    CHECK_OK(fixture_model_create(&s, tc->batch, &out->m));
    model_t *m = out->m;
    CHECK_OK(model_init(m, CASE_SEED));
    struct optim_config c;
    optim_config_default(&c, tc->kind);
    c.lr = tc->lr;
    c.momentum = tc->momentum;
    c.weight_decay = tc->weight_decay;
    c.nesterov = tc->nesterov;
    optim_t *o;
    CHECK_OK(optim_create(&c, m, &o));
    size_t copies = (size_t)tc->steps + 1;
    out->steps = tc->steps;
    out->nstate = optim_state_count(o);
    for (int k = 0; k < out->nstate; k++)
        snprintf(out->state_name[k], sizeof out->state_name[k], "%s", optim_state_name(o, k));
    out->nparam = model_param_floats(m);
    out->nbuffer = model_buffer_floats(m);
    out->param = case_alloc(copies, out->nparam);
    out->buffer = case_alloc(copies, out->nbuffer);
    out->state = case_alloc(copies * 2, out->nparam);
    out->grad = case_alloc((size_t)tc->steps, out->nparam);
    out->logits = case_alloc((size_t)tc->steps, (size_t)tc->batch * 10);
    for (int l = 0; l < tc->nhidden; l++) {
        out->relu[l] = calloc((size_t)tc->steps * (size_t)tc->batch, (size_t)tc->hidden[l]);
        CHECK_MSG(out->relu[l] != NULL, "out of memory for the ReLU masks");
    }
    for (int step = 0; step < tc->steps; step++) {
        struct model_loss loss;
        case_keep_state(out, o, step);
        CHECK_OK(model_upload_batch(m, x + (size_t)step * (size_t)tc->batch * 784, NULL,
                                    y + (size_t)step * (size_t)tc->batch, tc->batch));
        CHECK_OK(model_forward(m, tc->batch, MODEL_TRAIN));
        if (forwards)
            case_keep_forward(out, tc, step);
        CHECK_OK(model_loss(m, tc->batch, 1.0f, &loss));
        CHECK_OK(model_backward(m, tc->batch, 0, NULL, NULL));
        out->loss[step] = loss.loss;
        for (int t = 0; t < model_param_tensors(m); t++) /* in the parameter layout, whatever the gradients' */
            CHECK_OK(fixture_read_grad(m, t, out->grad + (size_t)step * out->nparam + model_param(m, t)->offset));
        CHECK_OK(optim_step(o, m));
    }
    case_keep_state(out, o, tc->steps);
    optim_destroy(o);
}

static void case_free(struct case_run *r)
{
    fixture_model_destroy(r->m);
    free(r->param);
    free(r->buffer);
    free(r->state);
    free(r->grad);
    free(r->logits);
    free(r->relu[0]);
    free(r->relu[1]);
}

/* One entry per tensor of step k's copy in `base` (parameter or buffer
 * layout), named "step<k>.<what>.<tensor>", into e and names from *n on. */
static void case_entries(const struct case_run *r, int k, const char *what, const float *base, int buffers,
                         struct safetensors_entry *e, char (*names)[64], size_t *n)
{
    int count = buffers ? model_buffer_tensors(r->m) : model_param_tensors(r->m);
    const float *copy = base + (size_t)k * (buffers ? r->nbuffer : r->nparam);
    for (int t = 0; t < count; t++) {
        const struct model_tensor *pt = buffers ? model_buffer(r->m, t) : model_param(r->m, t);
        snprintf(names[*n], sizeof names[*n], "step%d.%s.%s", k, what, pt->name);
        e[*n] = (struct safetensors_entry){.name = names[*n], .dtype = SAFETENSORS_F32, .ndim = pt->ndim,
                                           .shape = {pt->shape[0], pt->shape[1]}, .data = copy + pt->offset};
        (*n)++;
    }
}

/* Writes case tc's file into dir. */
static void case_write(const char *dir, const struct torch_case *tc, const uint8_t *x, const int64_t *y,
                       const struct case_run *r)
{
    const model_t *m = r->m;
    int np = model_param_tensors(m), nb = model_buffer_tensors(m);
    size_t copies = (size_t)tc->steps + 1, cap = copies * (size_t)(np * 4 + nb + 3) + 3;
    struct safetensors_entry *e = calloc(cap, sizeof *e);
    char (*names)[64] = calloc(cap, sizeof *names);
    CHECK_MSG(e && names, "out of memory for %zu entries", cap);
    size_t n = 0;
    for (int k = 0; k <= tc->steps; k++) {
        case_entries(r, k, "param", r->param, 0, e, names, &n);
        case_entries(r, k, "buffer", r->buffer, 1, e, names, &n);
        for (int s = 0; k > 0 && s < r->nstate; s++) /* before the first step the optimizer has no state */
            case_entries(r, k, r->state_name[s], r->state + (size_t)s * copies * r->nparam, 0, e, names, &n);
        if (k == tc->steps)
            break;
        case_entries(r, k, "grad", r->grad, 0, e, names, &n);
        snprintf(names[n], sizeof names[n], "step%d.logits", k);
        e[n] = (struct safetensors_entry){.name = names[n], .dtype = SAFETENSORS_F32, .ndim = 2,
                                          .shape = {tc->batch, 10}, .data = r->logits + (size_t)k * (size_t)tc->batch * 10};
        n++;
        for (int l = 0; l < tc->nhidden; l++) {
            snprintf(names[n], sizeof names[n], "step%d.relu%d", k, l + 1);
            e[n] = (struct safetensors_entry){.name = names[n], .dtype = SAFETENSORS_U8, .ndim = 2,
                                              .shape = {tc->batch, tc->hidden[l]},
                                              .data = r->relu[l] + (size_t)k * (size_t)tc->batch * (size_t)tc->hidden[l]};
            n++;
        }
    }
    e[n++] = (struct safetensors_entry){.name = "x", .dtype = SAFETENSORS_U8, .ndim = 3,
                                        .shape = {tc->steps, tc->batch, 784}, .data = x};
    e[n++] = (struct safetensors_entry){.name = "y", .dtype = SAFETENSORS_I64, .ndim = 2,
                                        .shape = {tc->steps, tc->batch}, .data = y};
    e[n++] = (struct safetensors_entry){.name = "loss", .dtype = SAFETENSORS_F64, .ndim = 1, .shape = {tc->steps},
                                        .data = r->loss};
    CHECK_MSG(n <= cap, "%zu entries, room for %zu", n, cap);
    char hidden[32], lr[32], mom[32], wd[32], seed[8];
    snprintf(hidden, sizeof hidden, tc->nhidden == 2 ? "%d,%d" : "%d", tc->hidden[0], tc->hidden[1]);
    snprintf(lr, sizeof lr, "%.17g", tc->lr);
    snprintf(mom, sizeof mom, "%.17g", tc->momentum);
    snprintf(wd, sizeof wd, "%.17g", tc->weight_decay);
    snprintf(seed, sizeof seed, "%d", CASE_SEED);
    struct safetensors_meta meta[] = {
        {"hidden", hidden}, {"batchnorm", tc->batchnorm ? "1" : "0"}, {"optimizer", optim_kind_name(tc->kind)},
        {"lr", lr}, {"momentum", mom}, {"weight_decay", wd}, {"nesterov", tc->nesterov ? "1" : "0"}, {"seed", seed},
    };
    char path[1024];
    snprintf(path, sizeof path, "%s/case_%s.safetensors", dir, tc->name);
    CHECK_OK(safetensors_write(path, e, n, meta, sizeof meta / sizeof meta[0], 0));
    snprintf(path, sizeof path, "%s/model_%s.safetensors", dir, tc->name); /* what --save writes */
    CHECK_OK(checkpoint_save_model(path, m, 0));
    free(e);
    free(names);
}

TEST(torch_cases_written)
{
    const char *dir = getenv("DDP_TORCH_DIR") ? getenv("DDP_TORCH_DIR") : check_tmpdir();
    for (size_t c = 0; c < NCASES; c++) {
        const struct torch_case *tc = &cases[c];
        size_t n = (size_t)tc->steps * (size_t)tc->batch;
        uint8_t *x = malloc(n * 784);
        int64_t *y = malloc(n * sizeof *y);
        case_data(tc, x, y);
        struct case_run a = {0}, b = {0};
        case_train(tc, x, y, 1, &a);
        case_write(dir, tc, x, y, &a);
        /* the run repeats bit for bit, and it learns (the second run's forwards are not written: not kept) */
        case_train(tc, x, y, 0, &b);
        CHECK_MSG(fixture_same(a.m, b.m, MODEL_PARAMS) == 1, "%s: a second run ends with other parameters", tc->name);
        CHECK_MSG(a.loss[tc->steps - 1] < a.loss[0], "%s: the loss went from %g to %g", tc->name, a.loss[0],
                  a.loss[tc->steps - 1]);
        case_free(&a);
        case_free(&b);
        free(x);
        free(y);
    }
}

TEST(torch_file_loads)
{
    char path[1024];
    const char *dir = getenv("DDP_TORCH_DIR");
    snprintf(path, sizeof path, "%s/torch_written.safetensors", dir ? dir : "tests/crosscheck");
    safetensors_t *st;
    CHECK_OK(safetensors_open(path, &st));
    struct model_spec s = {.inputs = 20, .classes = 4, .hidden = {9, 6}, .nhidden = 2, .batchnorm = 1};
    char want[64];
    CHECK_STR(safetensors_meta(st, "model"), model_spec_describe(&s, want, sizeof want));
    model_t *m;
    CHECK_OK(fixture_model_create(&s, 4, &m));
    CHECK_OK(checkpoint_load_model(path, m, NULL, 0));
    float *part[2];
    CHECK_OK(fixture_part(m, MODEL_PARAMS, &part[0]));
    CHECK_OK(fixture_part(m, MODEL_BUFFERS, &part[1]));
    for (int k = 0; k < model_param_tensors(m) + model_buffer_tensors(m); k++) {
        int param = k < model_param_tensors(m);
        const struct model_tensor *t = param ? model_param(m, k) : model_buffer(m, k - model_param_tensors(m));
        const float *v = part[!param] + t->offset;
        char key[64];
        snprintf(key, sizeof key, "sum.%s", t->name);
        const char *text = safetensors_meta(st, key);
        CHECK_MSG(text, "%s: no %s in the metadata", path, key);
        double sum = 0, mag = 0, expect = strtod(text, NULL);
        for (size_t i = 0; i < t->numel; i++) {
            sum += v[i];
            mag += fabs(v[i]);
        }
        CHECK_MSG(fabs(sum - expect) <= 1e-12 * (mag + 1), "%s: %s sums to %.17g here, %.17g in torch", path, t->name,
                  sum, expect);
    }
    CHECK_EQ(model_batches_tracked(m), strtoll(safetensors_meta(st, "num_batches_tracked"), NULL, 10));
    safetensors_close(st);
    free(part[0]);
    free(part[1]);
    fixture_model_destroy(m);
}
