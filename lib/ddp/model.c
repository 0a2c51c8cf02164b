/* model: the MLP's tables, PyTorch's initialisation, forward, loss and
 * backward (see model.h). Read model_create() for the memory layout, then
 * model_forward() and model_backward(), which mirror each other layer by
 * layer.
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
 * overwrites them going down.
 */
#include "ddp/model.h"

#include "base/cli.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/rng.h"

#include <cblas.h> /* OpenBLAS's; it includes <complex.h>, so no identifier here may be called I */
#include <limits.h>
#include <math.h>
#include <pthread.h>
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
    float *mean, *invstd;   /* BatchNorm, TRAIN: the batch's statistics, [out] */
};

struct model {
    struct model_spec spec;
    int max_batch, nlayers, max_width;
    struct model_layer layers[MODEL_MAX_HIDDEN + 1];
    struct model_tensor params[MODEL_MAX_TENSORS];
    struct model_tensor buffers[2 * MODEL_MAX_HIDDEN];
    int nparams, nbuffers;
    size_t param_floats, buffer_floats;
    float *param, *grad, *buffer; /* the flat buffers */
    size_t grad_off[MODEL_MAX_TENSORS];
    float *input;                 /* [max_batch x inputs] */
    float *scratch[2];            /* backward: [max_width x max_batch] each */
    int64_t batches_tracked;
    int fwd_batch;                /* batch of the last forward, 0 before any */
    enum model_mode fwd_mode;
    int loss_batch;               /* batch model_loss prepared scratch[0] for, 0 if none */
    int timing;
    struct model_timing t;
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

/* 64-byte aligned (a cache line, and AVX-512's vector), zeroed. */
static float *model_alloc(size_t floats)
{
    void *p = NULL;
    size_t bytes = (floats ? floats : 1) * sizeof(float);
    bytes = (bytes + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, bytes) != 0)
        return NULL;
    memset(p, 0, bytes);
    return p;
}

/* One BLAS thread for the whole process, set once: every rank thread runs its
 * own products, and openblas_set_num_threads is not safe to call from several
 * threads at once. */
static pthread_once_t model_blas_once = PTHREAD_ONCE_INIT;

static void model_blas_one_thread(void) { openblas_set_num_threads(1); }

int model_create(const struct model_spec *spec, int max_batch, model_t **out)
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
    for (int l = 0; l < m->nlayers; l++) {
        struct model_layer *L = &m->layers[l];
        L->in = l == 0 ? spec->inputs : spec->hidden[l - 1];
        L->out = l == spec->nhidden ? spec->classes : spec->hidden[l];
        if (L->out > m->max_width)
            m->max_width = L->out;
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
    /* every buffer below, in floats: sized from flags (--batch, --hidden), so checked before any is touched */
    uint64_t floats = 2 * (uint64_t)m->param_floats + m->buffer_floats + (uint64_t)spec->inputs * (uint64_t)max_batch +
                      2 * (uint64_t)act;
    for (int l = 0; l < m->nlayers; l++)
        floats += (uint64_t)m->layers[l].out * (uint64_t)max_batch * (m->layers[l].bn_weight >= 0 ? 2 : 1);
    char what[96];
    snprintf(what, sizeof what, "model: its parameters, gradients and the buffers of a batch of %d", max_batch);
    rc = mem_check_array(what, floats, sizeof(float), &(size_t){0});
    if (rc < 0) {
        model_destroy(m);
        return rc;
    }
    int ok = (m->param = model_alloc(m->param_floats)) && (m->grad = model_alloc(m->param_floats)) &&
             (m->buffer = model_alloc(m->buffer_floats)) &&
             (m->input = model_alloc((size_t)spec->inputs * (size_t)max_batch)) &&
             (m->scratch[0] = model_alloc(act)) && (m->scratch[1] = model_alloc(act));
    for (int l = 0; ok && l < m->nlayers; l++) {
        struct model_layer *L = &m->layers[l];
        ok = (L->z = model_alloc((size_t)L->out * (size_t)max_batch)) != NULL;
        if (ok && L->bn_weight >= 0)
            ok = (L->xhat = model_alloc((size_t)L->out * (size_t)max_batch)) && (L->mean = model_alloc((size_t)L->out)) &&
                 (L->invstd = model_alloc((size_t)L->out));
    }
    if (!ok) {
        model_destroy(m);
        return err_set(ERR_NOMEM, "model: out of memory for a batch of %d", max_batch);
    }
    pthread_once(&model_blas_once, model_blas_one_thread);
    *out = m;
    return 0;
}

void model_destroy(model_t *m)
{
    if (!m)
        return;
    for (int l = 0; l < m->nlayers; l++) {
        free(m->layers[l].z);
        free(m->layers[l].xhat);
        free(m->layers[l].mean);
        free(m->layers[l].invstd);
    }
    free(m->param);
    free(m->grad);
    free(m->buffer);
    free(m->input);
    free(m->scratch[0]);
    free(m->scratch[1]);
    free(m);
}

const struct model_spec *model_get_spec(const model_t *m) { return &m->spec; }

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

void model_init(model_t *m, uint64_t seed)
{
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
        model_uniform(&g, m->param + m->params[L->weight].offset, m->params[L->weight].numel, wbound);
        model_uniform(&g, m->param + m->params[L->bias].offset, m->params[L->bias].numel, bbound);
        if (L->bn_weight >= 0) {
            float *w = m->param + m->params[L->bn_weight].offset, *b = m->param + m->params[L->bn_bias].offset;
            float *rm = m->buffer + m->buffers[L->running_mean].offset;
            float *rv = m->buffer + m->buffers[L->running_var].offset;
            for (int j = 0; j < L->out; j++) {
                w[j] = 1.0f;
                b[j] = 0.0f;
                rm[j] = 0.0f;
                rv[j] = 1.0f;
            }
        }
    }
    m->batches_tracked = 0;
}

/* ---- tables ---------------------------------------------------------------------------------- */

int model_param_tensors(const model_t *m) { return m->nparams; }
const struct model_tensor *model_param(const model_t *m, int t) { return &m->params[t]; }
size_t model_param_floats(const model_t *m) { return m->param_floats; }
float *model_params(model_t *m) { return m->param; }
const float *model_params_const(const model_t *m) { return m->param; }
float *model_grads(model_t *m) { return m->grad; }
float *model_grad(model_t *m, int t) { return m->grad + m->grad_off[t]; }
size_t model_grad_offset(const model_t *m, int t) { return m->grad_off[t]; }
int model_buffer_tensors(const model_t *m) { return m->nbuffers; }
const struct model_tensor *model_buffer(const model_t *m, int b) { return &m->buffers[b]; }
size_t model_buffer_floats(const model_t *m) { return m->buffer_floats; }
float *model_buffers(model_t *m) { return m->buffer; }
const float *model_buffers_const(const model_t *m) { return m->buffer; }
int64_t model_batches_tracked(const model_t *m) { return m->batches_tracked; }
void model_set_batches_tracked(model_t *m, int64_t n) { m->batches_tracked = n; }
float *model_input(model_t *m) { return m->input; }

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
    float *moved = model_alloc(m->param_floats);
    if (!moved)
        return err_set(ERR_NOMEM, "gradient layout: out of memory");
    for (int t = 0; t < m->nparams; t++) {
        memcpy(moved + offsets[t], m->grad + m->grad_off[t], m->params[t].numel * sizeof(float));
        m->grad_off[t] = offsets[t];
    }
    free(m->grad);
    m->grad = moved;
    return 0;
}

/* ---- the matrix products ------------------------------------------------------------------------- */

/* C = A B (+ C when beta = 1), row-major, as cblas_sgemm; timed when asked. */
static void model_gemm(model_t *m, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int rows, int cols, int depth,
                       const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    uint64_t t0 = m->timing ? clock_now_ns() : 0;
    cblas_sgemm(CblasRowMajor, ta, tb, rows, cols, depth, 1.0f, a, lda, b, ldb, beta, c, ldc);
    if (m->timing) {
        m->t.gemm_ns += clock_now_ns() - t0;
        m->t.gemm_calls++;
    }
}

/* ---- forward -------------------------------------------------------------------------------------- */

/* byte / 255 for every byte value: the same correctly rounded quotients as
 * dividing, without a division per pixel. */
static float model_byte_quotient[256];
static pthread_once_t model_quotients_once = PTHREAD_ONCE_INIT;

static void model_quotients_init(void)
{
    for (int v = 0; v < 256; v++)
        model_byte_quotient[v] = (float)v / 255.0f;
}

int model_input_from_bytes(model_t *m, const uint8_t *bytes, int batch)
{
    if (batch < 1 || batch > m->max_batch)
        return err_set(ERR_ARG, "model: batch of %d samples (this model takes 1 to %d)", batch, m->max_batch);
    pthread_once(&model_quotients_once, model_quotients_init);
    size_t n = (size_t)batch * (size_t)m->spec.inputs;
    for (size_t i = 0; i < n; i++)
        m->input[i] = model_byte_quotient[bytes[i]];
    return 0;
}

/* BatchNorm1d then ReLU on layer L's Z (rows of B), in place, keeping xhat
 * for backward. TRAIN: the batch's mean and biased variance normalise; the
 * running statistics move by momentum 0.1 towards the mean and the unbiased
 * variance, all in double as PyTorch's CPU kernel accumulates
 * (batch_norm_cpu_collect_stats / update_stats in aten's Normalization.cpp). */
static void model_bn_relu(model_t *m, struct model_layer *L, int batch, enum model_mode mode)
{
    const float *gamma = m->param + m->params[L->bn_weight].offset, *beta = m->param + m->params[L->bn_bias].offset;
    float *rm = m->buffer + m->buffers[L->running_mean].offset, *rv = m->buffer + m->buffers[L->running_var].offset;
    for (int j = 0; j < L->out; j++) {
        float *z = L->z + (size_t)j * (size_t)batch, *xh = L->xhat + (size_t)j * (size_t)batch;
        double mean, invstd;
        if (mode == MODEL_TRAIN) {
            double sum = 0, sq = 0;
            for (int b = 0; b < batch; b++)
                sum += z[b];
            mean = sum / batch;
            for (int b = 0; b < batch; b++)
                sq += (z[b] - mean) * (z[b] - mean);
            invstd = 1.0 / sqrt(sq / batch + MODEL_BN_EPS);
            rm[j] = (float)(MODEL_BN_MOMENTUM * mean + (1 - MODEL_BN_MOMENTUM) * rm[j]);
            rv[j] = (float)(MODEL_BN_MOMENTUM * (sq / (batch - 1)) + (1 - MODEL_BN_MOMENTUM) * rv[j]);
            L->mean[j] = (float)mean;
            L->invstd[j] = (float)invstd;
        } else {
            mean = rm[j];
            invstd = 1.0 / sqrt((double)rv[j] + MODEL_BN_EPS);
        }
        float fm = (float)mean, fi = (float)invstd, g = gamma[j], sh = beta[j];
        for (int b = 0; b < batch; b++) {
            float x = (z[b] - fm) * fi;
            float y = x * g + sh;
            xh[b] = x;
            z[b] = y > 0.0f ? y : 0.0f;
        }
    }
}

int model_forward(model_t *m, int batch, enum model_mode mode)
{
    if (batch < 1 || batch > m->max_batch)
        return err_set(ERR_ARG, "model: batch of %d samples (this model takes 1 to %d)", batch, m->max_batch);
    if (mode == MODEL_TRAIN && m->spec.batchnorm && batch == 1)
        return err_set(ERR_ARG, "model: BatchNorm1d in training mode needs more than 1 value per channel (a batch "
                                "of 1 has none to normalise against), as PyTorch says");
    m->fwd_batch = 0;
    m->loss_batch = 0;
    for (int l = 0; l < m->nlayers; l++) {
        struct model_layer *L = &m->layers[l];
        const float *w = m->param + m->params[L->weight].offset, *bias = m->param + m->params[L->bias].offset;
        /* Z starts as the bias in every column and the product adds onto it
         * (beta = 1), as torch's addmm copies the bias into its output first. */
        for (int j = 0; j < L->out; j++) {
            float *row = L->z + (size_t)j * (size_t)batch;
            for (int b = 0; b < batch; b++)
                row[b] = bias[j];
        }
        if (l == 0) /* Z [out x B] = W [out x in] . X^T, X batch-major [B x in] */
            model_gemm(m, CblasNoTrans, CblasTrans, L->out, batch, L->in, w, L->in, m->input, L->in, 1.0f, L->z, batch);
        else /* Z = W . A, A feature-major [in x B] */
            model_gemm(m, CblasNoTrans, CblasNoTrans, L->out, batch, L->in, w, L->in, m->layers[l - 1].z, batch, 1.0f,
                       L->z, batch);
        if (l == m->nlayers - 1)
            break; /* the logits */
        if (L->bn_weight >= 0) {
            model_bn_relu(m, L, batch, mode);
        } else {
            size_t n = (size_t)L->out * (size_t)batch;
            for (size_t i = 0; i < n; i++)
                L->z[i] = L->z[i] > 0.0f ? L->z[i] : 0.0f;
        }
    }
    if (mode == MODEL_TRAIN && m->spec.batchnorm)
        m->batches_tracked++;
    m->fwd_batch = batch;
    m->fwd_mode = mode;
    return 0;
}

float model_logit(const model_t *m, int b, int c)
{
    return m->layers[m->nlayers - 1].z[(size_t)c * (size_t)m->fwd_batch + (size_t)b];
}

float model_activation(const model_t *m, int l, int b, int j)
{
    return m->layers[l].z[(size_t)j * (size_t)m->fwd_batch + (size_t)b];
}

int model_loss(model_t *m, const int64_t *labels, int batch, float scale, struct model_loss *out)
{
    if (m->fwd_batch == 0 || batch != m->fwd_batch)
        return err_set(ERR_STATE, "model: loss of a batch of %d, but the last forward %s", batch,
                       m->fwd_batch ? "had another size" : "did not run or failed");
    int classes = m->spec.classes;
    const float *z = m->layers[m->nlayers - 1].z;
    float *dz = m->scratch[0];
    double total = 0, g = (double)scale / batch;
    int correct = 0;
    for (int b = 0; b < batch; b++) {
        if (labels[b] < 0 || labels[b] >= classes)
            return err_set(ERR_RANGE, "model: sample %d of the batch has label %lld, outside 0..%d", b,
                           (long long)labels[b], classes - 1);
        /* log-sum-exp around the largest logit, in double */
        int best = 0;
        for (int c = 1; c < classes; c++)
            if (z[(size_t)c * batch + b] > z[(size_t)best * batch + b])
                best = c;
        double top = z[(size_t)best * batch + b], sum = 0;
        for (int c = 0; c < classes; c++)
            sum += exp(z[(size_t)c * batch + b] - top);
        double lse = top + log(sum);
        int y = (int)labels[b];
        total += lse - z[(size_t)y * batch + b];
        correct += best == y;
        for (int c = 0; c < classes; c++) /* d(scale x mean loss)/dz = scale (softmax - onehot) / B */
            dz[(size_t)c * batch + b] = (float)((exp(z[(size_t)c * batch + b] - lse) - (c == y)) * g);
    }
    out->loss = total / batch;
    out->correct = correct;
    m->loss_batch = batch;
    return 0;
}

/* ---- backward ------------------------------------------------------------------------------------- */

/* dst[j] (+)= sum over the row j of d [rows x B], summed in double. */
static void model_row_sums(float *dst, const float *d, int rows, int batch, int accumulate)
{
    for (int j = 0; j < rows; j++) {
        const float *row = d + (size_t)j * (size_t)batch;
        double s = 0;
        for (int b = 0; b < batch; b++)
            s += row[b];
        dst[j] = accumulate ? dst[j] + (float)s : (float)s;
    }
}

/* From dA (gradient with respect to layer L's activation, in place) to dZ:
 * through ReLU (the activation is 0 exactly where ReLU cut), then through
 * BatchNorm when there is one, whose parameter gradients come out on the way:
 *     dgamma = sum dY xhat,  dbeta = sum dY,
 *     dZ = gamma invstd / B (B dY - dbeta - xhat dgamma). */
static int model_relu_bn_backward(model_t *m, struct model_layer *L, float *d, int batch, int accumulate,
                                  model_ready_fn ready, void *arg)
{
    size_t n = (size_t)L->out * (size_t)batch;
    for (size_t i = 0; i < n; i++)
        d[i] = L->z[i] > 0.0f ? d[i] : 0.0f;
    if (L->bn_weight < 0)
        return 0;
    const float *gamma = m->param + m->params[L->bn_weight].offset;
    float *dgamma = model_grad(m, L->bn_weight), *dbeta = model_grad(m, L->bn_bias);
    float inv_b = 1.0f / (float)batch;
    for (int j = 0; j < L->out; j++) {
        float *dy = d + (size_t)j * (size_t)batch;
        const float *xh = L->xhat + (size_t)j * (size_t)batch;
        double sb = 0, sg = 0;
        for (int b = 0; b < batch; b++) {
            sb += dy[b];
            sg += (double)dy[b] * xh[b];
        }
        float fb = (float)sb, fg = (float)sg, k = gamma[j] * L->invstd[j] * inv_b, bf = (float)batch;
        for (int b = 0; b < batch; b++)
            dy[b] = k * (bf * dy[b] - fb - xh[b] * fg);
        dbeta[j] = accumulate ? dbeta[j] + fb : fb;
        dgamma[j] = accumulate ? dgamma[j] + fg : fg;
    }
    int rc;
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
    float *dz = m->scratch[0], *da = m->scratch[1];
    for (int l = m->nlayers - 1; l >= 0; l--) {
        struct model_layer *L = &m->layers[l];
        int rc;
        if (l < m->nlayers - 1 && (rc = model_relu_bn_backward(m, L, dz, batch, accumulate, ready, arg)) < 0)
            return rc;
        model_row_sums(model_grad(m, L->bias), dz, L->out, batch, accumulate);
        float beta = accumulate ? 1.0f : 0.0f;
        if (l == 0) /* dW [out x in] = dZ [out x B] . X [B x in] */
            model_gemm(m, CblasNoTrans, CblasNoTrans, L->out, L->in, batch, dz, batch, m->input, L->in, beta,
                       model_grad(m, L->weight), L->in);
        else /* dW = dZ . A^T, A feature-major [in x B] */
            model_gemm(m, CblasNoTrans, CblasTrans, L->out, L->in, batch, dz, batch, m->layers[l - 1].z, batch, beta,
                       model_grad(m, L->weight), L->in);
        if (l > 0) { /* dA [in x B] = W^T [in x out] . dZ [out x B]; the input needs no gradient */
            model_gemm(m, CblasTrans, CblasNoTrans, L->in, batch, L->out, m->param + m->params[L->weight].offset,
                       L->in, dz, batch, 0.0f, da, batch);
            float *t = dz;
            dz = da;
            da = t;
        }
        /* Ready once the layer is done, as in PyTorch, where a Linear's
         * weight and bias gradients are accumulated after its whole backward
         * node ran: from here on nothing reads this layer's parameters. */
        if (ready && ((rc = ready(arg, L->bias)) < 0 || (rc = ready(arg, L->weight)) < 0))
            return rc;
    }
    return 0;
}

/* ---- measurement ------------------------------------------------------------------------------------ */

void model_timing_enable(model_t *m, int on) { m->timing = on; }
void model_timing_reset(model_t *m) { memset(&m->t, 0, sizeof m->t); }
struct model_timing model_timing_get(const model_t *m) { return m->t; }

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
