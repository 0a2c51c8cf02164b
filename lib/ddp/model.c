/* model: the MLP's tables, PyTorch's initialisation, forward, loss and
 * backward as device operations (see model.h). Read model_create() for the
 * memory layout, then model_forward() and model_backward(), which mirror each
 * other layer by layer.
 *
 * Shapes, with B the batch and activations feature-major ([features x B],
 * row j holds feature j of every sample):
 *
 *   input X      [B x in]   batch-major, as the loader collates images
 *   layer l      Z = W X^T + b (l = 0) or W A + b      [out x B]
 *                hidden: [BatchNorm] then ReLU, in place: A_{l+1} = the same buffer
 *   logits       Z of the last layer                   [classes x B]
 *
 * Backward keeps two scratch buffers, dA and dZ of the current layer, and
 * overwrites them going down. Every buffer is device memory; the host keeps
 * only shapes, offsets and the few bytes a loss copies back.
 */
#include "ddp/model.h"

#include "base/cli.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/rng.h"
#include "transfer/device_ops.h"

#include <cblas.h> /* model_blas_describe: which OpenBLAS the simulated device runs */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct model_layer {
    int in, out;
    int weight, bias;       /* parameter indices */
    int bn_weight, bn_bias; /* -1 without BatchNorm (and for the last layer) */
    int running_mean, running_var; /* buffer indices, -1 without BatchNorm */
    float *z;               /* [out x max_batch]: Z, then (hidden layers) the activation A */
    float *xhat;            /* BatchNorm: (Z - mean) * invstd, [out x max_batch] */
    float *mean, *invstd;   /* BatchNorm: the statistics the last forward applied, [out] */
    char name[3][32];       /* "fc1 forward", "fc1 backward (dW)", "fc1 backward (dA)": operation names */
};

struct model {
    struct model_spec spec;
    int max_batch, nlayers, max_width;
    struct model_layer layers[MODEL_MAX_HIDDEN + 1];
    struct model_tensor params[MODEL_MAX_TENSORS];
    struct model_tensor buffers[2 * MODEL_MAX_HIDDEN];
    int nparams, nbuffers;
    size_t param_floats, buffer_floats;
    device_t *dev;
    device_stream_t *s;
    /* device memory */
    float *param, *grad, *buffer; /* the flat buffers */
    float *input;                 /* [max_batch x inputs] */
    uint8_t *bytes;               /* [max_batch x inputs]: a batch uploaded from the host */
    int64_t *labels;              /* [max_batch] */
    float *scratch[2];            /* backward: [max_width x max_batch] each */
    double *sample_loss;          /* [max_batch] */
    int32_t *sample_correct;      /* [max_batch] */
    struct kernel_loss_result *loss_out;
    /* host */
    size_t grad_off[MODEL_MAX_TENSORS];
    int64_t batches_tracked;
    int fwd_batch;                /* batch of the last forward, 0 before any */
    enum model_mode fwd_mode;
    int loss_batch;               /* batch model_loss prepared scratch[0] for, 0 if none */
    int64_t batch_number;         /* the batch model_take_batch gave, for messages; -1: none */
    struct device_stats timing_base;
    int atoms;                    /* model_set_atoms: 0, or the atoms of every batch */
    float *atom_grads;            /* [atoms x the largest weight]: each atom's weight gradient, then the tree */
    uint64_t *check_words;        /* [model_check_chunks]: the replica check's hash words (model_check_words) */
};

/* ---- the spec ----------------------------------------------------------------------------- */

void model_spec_default(struct model_spec *s)
{
    memset(s, 0, sizeof *s);
    s->inputs = 784;
    s->classes = 10;
    s->hidden[0] = 256;
    s->hidden[1] = 128;
    s->nhidden = 2;
}

int model_spec_parse_hidden(struct model_spec *s, const char *text, const char *flag)
{
    uint64_t widths[MODEL_MAX_HIDDEN];
    int n, rc = cli_parse_list(flag, text, 1, MODEL_MAX_WIDTH, widths, MODEL_MAX_HIDDEN, &n);
    if (rc < 0)
        return rc;
    for (int i = 0; i < n; i++)
        s->hidden[i] = (int)widths[i];
    s->nhidden = n;
    return 0;
}

int model_spec_check(const struct model_spec *s)
{
    if (s->inputs < 1 || s->inputs > MODEL_MAX_WIDTH)
        return err_set(ERR_ARG, "model: %d inputs (1 to %d)", s->inputs, MODEL_MAX_WIDTH);
    if (s->classes < 2 || s->classes > MODEL_MAX_WIDTH)
        return err_set(ERR_ARG, "model: %d classes (2 to %d)", s->classes, MODEL_MAX_WIDTH);
    if (s->nhidden < 0 || s->nhidden > MODEL_MAX_HIDDEN)
        return err_set(ERR_ARG, "model: %d hidden layers (0 to %d)", s->nhidden, MODEL_MAX_HIDDEN);
    for (int i = 0; i < s->nhidden; i++)
        if (s->hidden[i] < 1 || s->hidden[i] > MODEL_MAX_WIDTH)
            return err_set(ERR_ARG, "model: hidden layer %d has %d units (1 to %d)", i + 1, s->hidden[i],
                           MODEL_MAX_WIDTH);
    return 0;
}

uint64_t model_spec_param_floats(const struct model_spec *s)
{
    uint64_t floats = 0, in = (uint64_t)s->inputs;
    for (int i = 0; i <= s->nhidden; i++) {
        uint64_t out = (uint64_t)(i < s->nhidden ? s->hidden[i] : s->classes);
        floats += in * out + out + (i < s->nhidden && s->batchnorm ? 2 * out : 0); /* Linear, BatchNorm1d */
        in = out;
    }
    return floats;
}

const char *model_spec_describe(const struct model_spec *s, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "%d", s->inputs);
    for (int i = 0; i < s->nhidden && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "-%d", s->hidden[i]);
    if (n < len)
        n += (size_t)snprintf(buf + n, len - n, "-%d", s->classes);
    if (s->batchnorm && n < len)
        snprintf(buf + n, len - n, " with BatchNorm1d");
    return buf;
}

/* ---- creation -------------------------------------------------------------------------- */

static void model_add_tensor(struct model_tensor *t, size_t *floats, const char *name, int index, const char *what,
                             int64_t d0, int64_t d1)
{
    snprintf(t->name, sizeof t->name, "%s%d.%s", name, index, what);
    t->ndim = d1 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->numel = (size_t)d0 * (size_t)(d1 ? d1 : 1);
    t->offset = *floats;
    *floats += t->numel;
}

/* Device memory of `count` elements of `size` bytes, zeroed on the model's
 * stream; NULL with the error set when the device has none. */
static void *model_alloc(model_t *m, size_t count, size_t size, const char *name, int *rc)
{
    void *p = NULL;
    if (*rc < 0)
        return NULL;
    uint64_t bytes = (uint64_t)(count ? count : 1) * size;
    if ((*rc = device_malloc(m->dev, bytes, name, &p)) == 0 && (*rc = device_memset_async(m->s, p, 0, bytes)) < 0) {
        device_free(m->dev, p);
        p = NULL;
    }
    return p;
}

int model_create(const struct model_spec *spec, int max_batch, device_stream_t *stream, model_t **out)
{
    *out = NULL;
    int rc = model_spec_check(spec);
    if (rc < 0)
        return rc;
    if (max_batch < 1 || max_batch > MODEL_MAX_BATCH)
        return err_set(ERR_ARG, "model: batch of %d (1 to %d)", max_batch, MODEL_MAX_BATCH);
    model_t *m = calloc(1, sizeof *m);
    if (!m)
        return err_set(ERR_NOMEM, "model: out of memory");
    m->spec = *spec;
    m->max_batch = max_batch;
    m->nlayers = spec->nhidden + 1;
    m->max_width = spec->inputs;
    m->s = stream;
    m->dev = device_stream_device(stream);
    for (int l = 0; l < m->nlayers; l++) {
        struct model_layer *L = &m->layers[l];
        L->in = l == 0 ? spec->inputs : spec->hidden[l - 1];
        L->out = l == spec->nhidden ? spec->classes : spec->hidden[l];
        if (L->out > m->max_width)
            m->max_width = L->out;
        snprintf(L->name[0], sizeof L->name[0], "fc%d forward", l + 1);
        snprintf(L->name[1], sizeof L->name[1], "fc%d backward (dW)", l + 1);
        snprintf(L->name[2], sizeof L->name[2], "fc%d backward (dA)", l + 1);
        L->weight = m->nparams;
        model_add_tensor(&m->params[m->nparams++], &m->param_floats, "fc", l + 1, "weight", L->out, L->in);
        L->bias = m->nparams;
        model_add_tensor(&m->params[m->nparams++], &m->param_floats, "fc", l + 1, "bias", L->out, 0);
        L->bn_weight = L->bn_bias = L->running_mean = L->running_var = -1;
        if (spec->batchnorm && l < spec->nhidden) {
            L->bn_weight = m->nparams;
            model_add_tensor(&m->params[m->nparams++], &m->param_floats, "bn", l + 1, "weight", L->out, 0);
            L->bn_bias = m->nparams;
            model_add_tensor(&m->params[m->nparams++], &m->param_floats, "bn", l + 1, "bias", L->out, 0);
            L->running_mean = m->nbuffers;
            model_add_tensor(&m->buffers[m->nbuffers++], &m->buffer_floats, "bn", l + 1, "running_mean", L->out, 0);
            L->running_var = m->nbuffers;
            model_add_tensor(&m->buffers[m->nbuffers++], &m->buffer_floats, "bn", l + 1, "running_var", L->out, 0);
        }
    }
    for (int t = 0; t < m->nparams; t++)
        m->grad_off[t] = m->params[t].offset;
    size_t act = (size_t)m->max_width * (size_t)max_batch;
    /* every buffer below, in floats: sized from flags (--batch, --hidden), so checked before any is made */
    uint64_t floats = 2 * (uint64_t)m->param_floats + m->buffer_floats + 2 * (uint64_t)spec->inputs * (uint64_t)max_batch +
                      2 * (uint64_t)act + 4 * (uint64_t)max_batch;
    for (int l = 0; l < m->nlayers; l++)
        floats += (uint64_t)m->layers[l].out * (uint64_t)max_batch * (m->layers[l].bn_weight >= 0 ? 2 : 1);
    char what[96];
    snprintf(what, sizeof what, "model: its parameters, gradients and the buffers of a batch of %d", max_batch);
    rc = mem_check_array(what, floats, sizeof(float), &(size_t){0});
    size_t in = (size_t)spec->inputs * (size_t)max_batch;
    m->param = model_alloc(m, m->param_floats, sizeof(float), "parameters", &rc);
    m->grad = model_alloc(m, m->param_floats, sizeof(float), "gradients", &rc);
    m->buffer = model_alloc(m, m->buffer_floats, sizeof(float), "BatchNorm buffers", &rc);
    m->input = model_alloc(m, in, sizeof(float), "input", &rc);
    m->bytes = model_alloc(m, in, 1, "input bytes", &rc);
    m->labels = model_alloc(m, (size_t)max_batch, sizeof(int64_t), "labels", &rc);
    m->scratch[0] = model_alloc(m, act, sizeof(float), "backward scratch 0", &rc);
    m->scratch[1] = model_alloc(m, act, sizeof(float), "backward scratch 1", &rc);
    m->sample_loss = model_alloc(m, (size_t)max_batch, sizeof(double), "losses", &rc);
    m->sample_correct = model_alloc(m, (size_t)max_batch, sizeof(int32_t), "correct", &rc);
    m->loss_out = model_alloc(m, 1, sizeof(struct kernel_loss_result), "loss", &rc);
    for (int l = 0; l < m->nlayers; l++) {
        struct model_layer *L = &m->layers[l];
        char name[48];
        size_t n = (size_t)L->out * (size_t)max_batch;
        snprintf(name, sizeof name, "fc%d activations", l + 1);
        L->z = model_alloc(m, n, sizeof(float), name, &rc);
        if (L->bn_weight >= 0) {
            snprintf(name, sizeof name, "bn%d xhat", l + 1);
            L->xhat = model_alloc(m, n, sizeof(float), name, &rc);
            snprintf(name, sizeof name, "bn%d mean", l + 1);
            L->mean = model_alloc(m, (size_t)L->out, sizeof(float), name, &rc);
            snprintf(name, sizeof name, "bn%d invstd", l + 1);
            L->invstd = model_alloc(m, (size_t)L->out, sizeof(float), name, &rc);
        }
    }
    /* not zeroed: the check's kernel writes every word it reads back, and a memset would be one more
     * operation on the stream, in the modelled timeline */
    if (rc == 0)
        rc = device_malloc(m->dev, model_check_chunks(m) * sizeof *m->check_words, "replica check hashes",
                           (void **)&m->check_words);
    if (rc < 0) {
        model_destroy(m);
        return rc;
    }
    device_stats(m->dev, &m->timing_base);
    m->batch_number = -1;
    *out = m;
    return 0;
}

void model_destroy(model_t *m)
{
    if (!m)
        return;
    device_stream_synchronize(m->s);
    for (int l = 0; l < m->nlayers; l++) {
        device_free(m->dev, m->layers[l].z);
        device_free(m->dev, m->layers[l].xhat);
        device_free(m->dev, m->layers[l].mean);
        device_free(m->dev, m->layers[l].invstd);
    }
    void *bufs[] = {m->param, m->grad, m->buffer, m->input, m->bytes, m->labels, m->scratch[0], m->scratch[1],
                    m->sample_loss, m->sample_correct, m->loss_out, m->atom_grads, m->check_words};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        device_free(m->dev, bufs[i]);
    free(m);
}

const struct model_spec *model_get_spec(const model_t *m) { return &m->spec; }
int64_t model_batch_number(const model_t *m) { return m->batch_number; }
device_stream_t *model_stream(const model_t *m) { return m->s; }

/* ---- the host's view -------------------------------------------------------------------- */

int model_sync(const model_t *m) { return device_stream_synchronize(m->s); }

static float *model_part(const model_t *m, enum model_part part, size_t *floats)
{
    *floats = part == MODEL_BUFFERS ? m->buffer_floats : m->param_floats;
    return part == MODEL_PARAMS ? m->param : part == MODEL_GRADS ? m->grad : m->buffer;
}

static int model_span(const model_t *m, enum model_part part, size_t offset, size_t count, float **at)
{
    size_t floats;
    float *base = model_part(m, part, &floats);
    if (offset > floats || count > floats - offset)
        return err_set(ERR_RANGE, "model: floats %zu to %zu of a part of %zu", offset, offset + count, floats);
    *at = base + offset;
    return 0;
}

int model_read(const model_t *m, enum model_part part, size_t offset, size_t count, float *host)
{
    float *at = NULL;
    int rc = model_span(m, part, offset, count, &at);
    if (rc == 0 && count)
        rc = model_sync(m);
    if (rc == 0 && count)
        rc = device_copy(m->dev, host, at, count * sizeof(float), DEVICE_D2H);
    return rc;
}

int model_write(model_t *m, enum model_part part, size_t offset, size_t count, const float *host)
{
    float *at = NULL;
    int rc = model_span(m, part, offset, count, &at);
    if (rc == 0 && count)
        rc = model_sync(m);
    if (rc == 0 && count)
        rc = device_copy(m->dev, at, host, count * sizeof(float), DEVICE_H2D);
    return rc;
}

/* ---- initialisation ------------------------------------------------------------------------ */

/* Tensor.uniform_(from, to) on the CPU for float32, as torch 1.13 computes it
 * (aten/src/ATen/core/TransformationHelper.h, uniform_real): one 32-bit draw
 * per element, its low 24 bits scaled to [0, 1), then x * (to - from) + from
 * in float32, which torch's AVX2 build contracts into one fused multiply-add
 * (checked bit for bit against torch: with two roundings half the values
 * differ in their last bit). */
static void model_uniform(rng_t *g, float *dst, size_t n, double bound)
{
    float from = (float)-bound, to = (float)bound, span = to - from;
    for (size_t i = 0; i < n; i++) {
        float x = (float)(rng_random(g) & 0xffffffu) * 0x1p-24f;
        dst[i] = fmaf(x, span, from);
    }
}

int model_init(model_t *m, uint64_t seed)
{
    /* drawn on the host, as torch draws on the CPU, then copied to the device */
    float *param = calloc(m->param_floats ? m->param_floats : 1, sizeof *param);
    float *buffer = calloc(m->buffer_floats ? m->buffer_floats : 1, sizeof *buffer);
    if (!param || !buffer) {
        free(param);
        free(buffer);
        return err_set(ERR_NOMEM, "model: out of memory for the initial parameters");
    }
    rng_t g;
    rng_seed(&g, seed);
    for (int l = 0; l < m->nlayers; l++) {
        struct model_layer *L = &m->layers[l];
        /* nn.Linear.reset_parameters: kaiming_uniform_(weight, a=sqrt(5)) draws
         * U(-bound, bound) with bound = sqrt(3) * gain / sqrt(fan_in), gain =
         * sqrt(2 / (1 + a^2)) (torch/nn/init.py), computed in double as Python
         * does; then the bias, U(-1/sqrt(fan_in), 1/sqrt(fan_in)). */
        double a = sqrt(5.0), gain = sqrt(2.0 / (1.0 + a * a));
        double wbound = sqrt(3.0) * (gain / sqrt((double)L->in)), bbound = 1.0 / sqrt((double)L->in);
        model_uniform(&g, param + m->params[L->weight].offset, m->params[L->weight].numel, wbound);
        model_uniform(&g, param + m->params[L->bias].offset, m->params[L->bias].numel, bbound);
        if (L->bn_weight >= 0) {
            float *w = param + m->params[L->bn_weight].offset, *b = param + m->params[L->bn_bias].offset;
            float *rm = buffer + m->buffers[L->running_mean].offset;
            float *rv = buffer + m->buffers[L->running_var].offset;
            for (int j = 0; j < L->out; j++) {
                w[j] = 1.0f;
                b[j] = 0.0f;
                rm[j] = 0.0f;
                rv[j] = 1.0f;
            }
        }
    }
    m->batches_tracked = 0;
    int rc = model_write(m, MODEL_PARAMS, 0, m->param_floats, param);
    if (rc == 0)
        rc = model_write(m, MODEL_BUFFERS, 0, m->buffer_floats, buffer);
    free(param);
    free(buffer);
    return rc;
}

/* ---- tables ---------------------------------------------------------------------------------- */

int model_param_tensors(const model_t *m) { return m->nparams; }
const struct model_tensor *model_param(const model_t *m, int t) { return &m->params[t]; }
size_t model_param_floats(const model_t *m) { return m->param_floats; }
float *model_params(model_t *m) { return m->param; }
float *model_grads(model_t *m) { return m->grad; }
float *model_grad(model_t *m, int t) { return m->grad + m->grad_off[t]; }
size_t model_grad_offset(const model_t *m, int t) { return m->grad_off[t]; }
int model_buffer_tensors(const model_t *m) { return m->nbuffers; }
const struct model_tensor *model_buffer(const model_t *m, int b) { return &m->buffers[b]; }
size_t model_buffer_floats(const model_t *m) { return m->buffer_floats; }
float *model_buffers(model_t *m) { return m->buffer; }

uint64_t model_tensor_chunks(const struct model_tensor *t)
{
    return (t->numel + KERNEL_HASH_CHUNK - 1) / KERNEL_HASH_CHUNK;
}

uint64_t model_check_chunks(const model_t *m)
{
    uint64_t n = 0;
    for (int t = 0; t < m->nparams; t++)
        n += model_tensor_chunks(&m->params[t]);
    for (int b = 0; b < m->nbuffers; b++)
        n += model_tensor_chunks(&m->buffers[b]);
    return n;
}

uint64_t *model_check_words(model_t *m) { return m->check_words; }
int64_t model_batches_tracked(const model_t *m) { return m->batches_tracked; }
void model_set_batches_tracked(model_t *m, int64_t n) { m->batches_tracked = n; }
float *model_input(model_t *m) { return m->input; }
int64_t *model_labels(model_t *m) { return m->labels; }

static int model_find(const struct model_tensor *t, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0)
            return i;
    return -1;
}

int model_param_find(const model_t *m, const char *name) { return model_find(m->params, m->nparams, name); }
int model_buffer_find(const model_t *m, const char *name) { return model_find(m->buffers, m->nbuffers, name); }

int model_set_grad_layout(model_t *m, const size_t *offsets)
{
    /* Tiling check: sorted by offset, each tensor must start where the
     * previous one ended, and the last end at param_floats. */
    int order[MODEL_MAX_TENSORS];
    for (int t = 0; t < m->nparams; t++) {
        int k = t;
        while (k > 0 && offsets[order[k - 1]] > offsets[t]) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = t;
    }
    size_t end = 0;
    for (int k = 0; k < m->nparams; k++) {
        int t = order[k];
        if (offsets[t] != end)
            return err_set(ERR_ARG, "gradient layout: %s starts at element %zu, %s", m->params[t].name, offsets[t],
                           offsets[t] < end ? "inside the gradient before it" : "leaving a gap after the one before it");
        end += m->params[t].numel;
    }
    /* the gradients move into a new buffer, tensor by tensor, on the device */
    int rc = 0;
    float *moved = model_alloc(m, m->param_floats, sizeof(float), "gradients", &rc);
    for (int t = 0; rc == 0 && t < m->nparams; t++)
        rc = device_copy_d2d_async(m->s, moved + offsets[t], m->grad + m->grad_off[t], m->params[t].numel * sizeof(float));
    if (rc == 0)
        rc = model_sync(m);
    if (rc < 0) {
        device_free(m->dev, moved);
        return rc;
    }
    for (int t = 0; t < m->nparams; t++)
        m->grad_off[t] = offsets[t];
    device_free(m->dev, m->grad);
    m->grad = moved;
    return 0;
}

int model_set_atoms(model_t *m, int atoms)
{
    if (atoms < 0 || atoms > KERNEL_TREE_MAX || (atoms & (atoms - 1)))
        return err_set(ERR_ARG, "model: %d atoms (0, or a power of two up to %d)", atoms, KERNEL_TREE_MAX);
    if (atoms && m->spec.batchnorm)
        return err_set(ERR_ARG, "model: BatchNorm1d normalises over the whole batch, not atom by atom");
    size_t most = 0;
    for (int l = 0; l < m->nlayers; l++)
        if ((size_t)m->layers[l].out * (size_t)m->layers[l].in > most)
            most = (size_t)m->layers[l].out * (size_t)m->layers[l].in;
    int rc = model_sync(m); /* the last backward may still write the old buffer */
    if (rc < 0)
        return rc;
    device_free(m->dev, m->atom_grads);
    m->atom_grads = NULL;
    m->atoms = 0;
    if (atoms)
        m->atom_grads = model_alloc(m, (size_t)atoms * most, sizeof(float), "the atoms' weight gradients", &rc);
    if (rc == 0)
        m->atoms = atoms;
    return rc;
}

/* ---- the operations ------------------------------------------------------------------------------- */

/* C = op(A) op(B) + beta C for row-major matrices, as cblas_sgemm(CblasRowMajor, ...) takes them,
 * issued as the column-major product of the transposes, C^T = op(B)^T op(A)^T: exactly the call
 * OpenBLAS's row-major interface makes inside, and the one cuBLAS takes. `count` such products in
 * one operation, each one's A, B and C `sa`, `sb`, `sc` elements past the previous one's (the atoms
 * of a batch, model_set_atoms); count 1 is the single product. */
static int model_gemm(model_t *m, const char *name, enum device_transpose ta, enum device_transpose tb, int rows,
                        int cols, int depth, const float *a, int lda, int64_t sa, const float *b, int ldb, int64_t sb,
                        float beta, float *c, int ldc, int64_t sc, int count)
{
    struct device_gemm g = {.transa = tb, .transb = ta, .m = cols, .n = rows, .k = depth, .alpha = 1.0f, .a = b,
                            .lda = ldb, .b = a, .ldb = lda, .beta = beta, .c = c, .ldc = ldc, .count = count,
                            .stride_a = sb, .stride_b = sa, .stride_c = sc};
    return device_sgemm(m->s, &g, name, m->batch_number);
}

static int model_kernel(model_t *m, enum kernel_id id, uint64_t n, const union kernel_args *args)
{
    return device_kernel(m->s, id, n, args, NULL, m->batch_number);
}

static int model_check_batch(const model_t *m, int batch)
{
    if (batch < 1 || batch > m->max_batch)
        return err_set(ERR_ARG, "model: batch of %d samples (this model takes 1 to %d)", batch, m->max_batch);
    return 0;
}

/* ---- input ------------------------------------------------------------------------------------------ */

int model_take_batch(model_t *m, const uint8_t *bytes, const int64_t *labels, int batch, int64_t number)
{
    int rc = model_check_batch(m, batch);
    size_t n = (size_t)batch * (size_t)m->spec.inputs;
    union kernel_args a = {.bytes_to_float = {.dst = m->input, .src = bytes}};
    m->batch_number = number;
    if (rc == 0)
        rc = device_kernel(m->s, KERNEL_bytes_to_float, n, &a, "input", number);
    if (rc == 0 && labels && labels != m->labels)
        rc = device_copy_d2d_async(m->s, m->labels, labels, (size_t)batch * sizeof *labels);
    return rc;
}

int model_upload_batch(model_t *m, const uint8_t *bytes, const float *input, const int64_t *labels, int batch)
{
    int rc = model_check_batch(m, batch);
    size_t n = (size_t)batch * (size_t)m->spec.inputs;
    if (rc == 0)
        rc = model_sync(m); /* the buffers below may still be read by the last step */
    if (rc == 0 && labels)
        rc = device_copy(m->dev, m->labels, labels, (size_t)batch * sizeof *labels, DEVICE_H2D);
    if (rc == 0 && !bytes)
        return device_copy(m->dev, m->input, input, n * sizeof(float), DEVICE_H2D);
    if (rc == 0)
        rc = device_copy(m->dev, m->bytes, bytes, n, DEVICE_H2D);
    return rc == 0 ? model_take_batch(m, m->bytes, NULL, batch, -1) : rc;
}

/* ---- forward -------------------------------------------------------------------------------------- */

/* Hidden layer L's output: BatchNorm1d (statistics, then normalise) and
 * ReLU, or ReLU alone, in place on Z. */
static int model_activate(model_t *m, struct model_layer *L, int batch, enum model_mode mode)
{
    uint64_t n = (uint64_t)L->out * (uint64_t)batch;
    if (L->bn_weight < 0)
        return model_kernel(m, KERNEL_relu, n, &(union kernel_args){.relu = {.z = L->z}});
    union kernel_args st = {.bn_stats = {.z = L->z, .running_mean = m->buffer + m->buffers[L->running_mean].offset,
                                         .running_var = m->buffer + m->buffers[L->running_var].offset,
                                         .mean = L->mean, .invstd = L->invstd, .batch = (uint32_t)batch,
                                         .train = mode == MODEL_TRAIN, .momentum = MODEL_BN_MOMENTUM,
                                         .eps = MODEL_BN_EPS}};
    union kernel_args ap = {.bn_relu = {.z = L->z, .xhat = L->xhat, .mean = L->mean, .invstd = L->invstd,
                                        .gamma = m->param + m->params[L->bn_weight].offset,
                                        .beta = m->param + m->params[L->bn_bias].offset, .batch = (uint32_t)batch}};
    int rc = model_kernel(m, KERNEL_bn_stats, (uint64_t)L->out, &st);
    return rc ? rc : model_kernel(m, KERNEL_bn_relu, n, &ap);
}

int model_forward(model_t *m, int batch, enum model_mode mode)
{
    int rc = model_check_batch(m, batch);
    if (rc < 0)
        return rc;
    if (mode == MODEL_TRAIN && m->spec.batchnorm && batch == 1)
        return err_set(ERR_ARG, "model: BatchNorm1d in training mode needs more than 1 value per channel (a batch "
                                "of 1 has none to normalise against), as PyTorch says");
    int atoms = m->atoms ? m->atoms : 1, width = batch / atoms;
    if (batch % atoms)
        return err_set(ERR_ARG, "model: a batch of %d samples does not split into %d atoms", batch, atoms);
    m->fwd_batch = 0;
    m->loss_batch = 0;
    for (int l = 0; rc == 0 && l < m->nlayers; l++) {
        struct model_layer *L = &m->layers[l];
        const float *w = m->param + m->params[L->weight].offset, *bias = m->param + m->params[L->bias].offset;
        /* Z starts as the bias in every column and the product adds onto it
         * (beta = 1), as torch's addmm copies the bias into its output first. */
        union kernel_args b = {.bias_rows = {.z = L->z, .bias = bias, .cols = (uint32_t)batch}};
        rc = model_kernel(m, KERNEL_bias_rows, (uint64_t)L->out * (uint64_t)batch, &b);
        /* by atoms (model_set_atoms): T products of `width` columns each, the same shapes at any T */
        if (rc == 0 && l == 0) /* Z [out x B] = W [out x in] . X^T, X batch-major [B x in] */
            rc = model_gemm(m, L->name[0], DEVICE_OP_N, DEVICE_OP_T, L->out, width, L->in, w, L->in, 0, m->input,
                              L->in, (int64_t)width * L->in, 1.0f, L->z, batch, width, atoms);
        else if (rc == 0) /* Z = W . A, A feature-major [in x B] */
            rc = model_gemm(m, L->name[0], DEVICE_OP_N, DEVICE_OP_N, L->out, width, L->in, w, L->in, 0,
                              m->layers[l - 1].z, batch, width, 1.0f, L->z, batch, width, atoms);
        if (rc == 0 && l < m->nlayers - 1) /* the last layer's Z are the logits */
            rc = model_activate(m, L, batch, mode);
    }
    if (rc < 0)
        return rc;
    if (mode == MODEL_TRAIN && m->spec.batchnorm)
        m->batches_tracked++;
    m->fwd_batch = batch;
    m->fwd_mode = mode;
    return 0;
}

int model_read_layer(const model_t *m, int l, float *host)
{
    if (l < 0 || l >= m->nlayers)
        return err_set(ERR_ARG, "model: layer %d of %d", l, m->nlayers);
    if (m->fwd_batch == 0)
        return err_set(ERR_STATE, "model: no forward ran, so layer %d has no output", l);
    int rc = model_sync(m);
    size_t bytes = (size_t)m->layers[l].out * (size_t)m->fwd_batch * sizeof(float);
    return rc ? rc : device_copy(m->dev, host, m->layers[l].z, bytes, DEVICE_D2H);
}

int model_loss(model_t *m, int batch, float scale, struct model_loss *out)
{
    if (m->fwd_batch == 0 || batch != m->fwd_batch)
        return err_set(ERR_STATE, "model: loss of a batch of %d, but the last forward %s", batch,
                       m->fwd_batch ? "had another size" : "did not run or failed");
    union kernel_args x = {.softmax_xent = {.z = m->layers[m->nlayers - 1].z, .dz = m->scratch[0], .labels = m->labels,
                                            .loss = m->sample_loss, .correct = m->sample_correct,
                                            .batch = (uint32_t)batch, .classes = (uint32_t)m->spec.classes,
                                            .grad_scale = (double)scale / batch}};
    union kernel_args s = {.loss_sum = {.loss = m->sample_loss, .correct = m->sample_correct, .labels = m->labels,
                                        .batch = (uint32_t)batch, .out = m->loss_out}};
    struct kernel_loss_result r;
    int rc = model_kernel(m, KERNEL_softmax_xent, (uint64_t)batch, &x);
    if (rc == 0)
        rc = model_kernel(m, KERNEL_loss_sum, 1, &s);
    if (rc == 0) /* the loss.item() of every step: the host waits for the forward here */
        rc = model_sync(m);
    if (rc == 0)
        rc = device_copy(m->dev, &r, m->loss_out, sizeof r, DEVICE_D2H);
    if (rc < 0)
        return rc;
    if (r.bad_sample >= 0)
        return err_set(ERR_RANGE, "model: sample %lld of the batch has label %lld, outside 0..%d",
                       (long long)r.bad_sample, (long long)r.bad_label, m->spec.classes - 1);
    out->loss = r.loss_sum / batch;
    out->correct = (int)r.correct;
    m->loss_batch = batch;
    return 0;
}

/* ---- backward ------------------------------------------------------------------------------------- */

/* From dA (gradient with respect to layer L's activation, in place) to dZ:
 * through ReLU, then through BatchNorm when there is one, whose parameter
 * gradients come out on the way (kernels.h has the formulas). */
static int model_relu_bn_backward(model_t *m, struct model_layer *L, float *d, int batch, int accumulate,
                                  model_ready_fn ready, void *arg)
{
    union kernel_args r = {.relu_backward = {.d = d, .act = L->z}};
    int rc = model_kernel(m, KERNEL_relu_backward, (uint64_t)L->out * (uint64_t)batch, &r);
    if (rc < 0 || L->bn_weight < 0)
        return rc;
    union kernel_args bn = {.bn_backward = {.d = d, .xhat = L->xhat, .gamma = m->param + m->params[L->bn_weight].offset,
                                            .invstd = L->invstd, .dgamma = model_grad(m, L->bn_weight),
                                            .dbeta = model_grad(m, L->bn_bias), .batch = (uint32_t)batch,
                                            .accumulate = accumulate}};
    if ((rc = model_kernel(m, KERNEL_bn_backward, (uint64_t)L->out, &bn)) < 0)
        return rc;
    if (ready && ((rc = ready(arg, L->bn_bias)) < 0 || (rc = ready(arg, L->bn_weight)) < 0))
        return rc;
    return 0;
}

int model_backward(model_t *m, int batch, int accumulate, model_ready_fn ready, void *arg)
{
    if (m->fwd_batch != batch || m->fwd_mode != MODEL_TRAIN || m->loss_batch != batch)
        return err_set(ERR_STATE, "model: backward of a batch of %d needs a TRAIN forward and model_loss of that "
                                  "batch first", batch);
    m->loss_batch = 0; /* the loss gradient is consumed: a second backward needs a new loss */
    int atoms = m->atoms ? m->atoms : 1, width = batch / atoms;
    if (m->atoms && accumulate)
        return err_set(ERR_ARG, "model: backward by atoms overwrites the gradients: it does not accumulate");
    float *dz = m->scratch[0], *da = m->scratch[1];
    for (int l = m->nlayers - 1; l >= 0; l--) {
        struct model_layer *L = &m->layers[l];
        int rc = 0;
        if (l < m->nlayers - 1 && (rc = model_relu_bn_backward(m, L, dz, batch, accumulate, ready, arg)) < 0)
            return rc;
        union kernel_args rs = {.row_sum = {.dst = model_grad(m, L->bias), .d = dz, .batch = (uint32_t)batch,
                                            .accumulate = accumulate}};
        if (m->atoms) /* each atom's sum, then the fixed tree */
            rs = (union kernel_args){.row_sum_atoms = {.dst = model_grad(m, L->bias), .d = dz,
                                                        .batch = (uint32_t)batch, .atoms = (uint32_t)atoms}};
        rc = model_kernel(m, m->atoms ? KERNEL_row_sum_atoms : KERNEL_row_sum, (uint64_t)L->out, &rs);
        float beta = accumulate ? 1.0f : 0.0f;
        /* by atoms: each atom's weight gradient into atom_grads, then the fixed tree into the gradient */
        float *dw = m->atoms ? m->atom_grads : model_grad(m, L->weight);
        int64_t dw_stride = (int64_t)L->out * L->in;
        if (rc == 0 && l == 0) /* dW [out x in] = dZ [out x B] . X [B x in] */
            rc = model_gemm(m, L->name[1], DEVICE_OP_N, DEVICE_OP_N, L->out, L->in, width, dz, batch, width,
                              m->input, L->in, (int64_t)width * L->in, beta, dw, L->in, dw_stride, atoms);
        else if (rc == 0) /* dW = dZ . A^T, A feature-major [in x B] */
            rc = model_gemm(m, L->name[1], DEVICE_OP_N, DEVICE_OP_T, L->out, L->in, width, dz, batch, width,
                              m->layers[l - 1].z, batch, width, beta, dw, L->in, dw_stride, atoms);
        if (rc == 0 && m->atoms) {
            union kernel_args tr = {.tree_sum = {.dst = model_grad(m, L->weight), .src = m->atom_grads,
                                                 .stride = (uint64_t)dw_stride, .slices = (uint32_t)atoms}};
            rc = model_kernel(m, KERNEL_tree_sum, (uint64_t)dw_stride, &tr);
        }
        if (rc == 0 && l > 0) { /* dA [in x B] = W^T [in x out] . dZ [out x B]; the input needs no gradient */
            rc = model_gemm(m, L->name[2], DEVICE_OP_T, DEVICE_OP_N, L->in, width, L->out,
                              m->param + m->params[L->weight].offset, L->in, 0, dz, batch, width, 0.0f, da, batch,
                              width, atoms);
            float *t = dz;
            dz = da;
            da = t;
        }
        if (rc < 0)
            return rc;
        /* Ready once the layer is done, as in PyTorch, where a Linear's
         * weight and bias gradients are accumulated after its whole backward
         * node ran: from here on nothing reads this layer's parameters. */
        if (ready && ((rc = ready(arg, L->bias)) < 0 || (rc = ready(arg, L->weight)) < 0))
            return rc;
    }
    return 0;
}

/* ---- measurement ------------------------------------------------------------------------------------ */

void model_timing_reset(model_t *m) { device_stats(m->dev, &m->timing_base); }

struct model_timing model_timing_get(const model_t *m)
{
    struct device_stats now;
    device_stats(m->dev, &now);
    return (struct model_timing){.gemm_ns = (uint64_t)((now.gemm_s - m->timing_base.gemm_s) * 1e9),
                                 .gemm_calls = now.gemm_calls - m->timing_base.gemm_calls};
}

const char *model_blas_describe(char *buf, size_t len)
{
    const char *core = openblas_get_corename();
    int n = snprintf(buf, len, "%s, core %s", openblas_get_config(), core);
    /* An OpenBLAS older than the CPU falls back to its SSE3 kernels
     * ("Prescott"), 2 to 3 times slower than the AVX2/AVX-512 ones. */
    __builtin_cpu_init();
    if (n > 0 && (size_t)n < len && strcmp(core, "Prescott") == 0 && __builtin_cpu_supports("avx2"))
        snprintf(buf + n, len - (size_t)n, " (this CPU has AVX2%s: OPENBLAS_CORETYPE=%s selects faster kernels)",
                 __builtin_cpu_supports("avx512f") ? " and AVX-512" : "",
                 __builtin_cpu_supports("avx512f") ? "SkylakeX" : "Haswell");
    return buf;
}
